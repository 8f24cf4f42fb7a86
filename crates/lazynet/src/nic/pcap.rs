//! A pcap recorder wrapping any [`Nic`]: every frame received and every frame
//! the inner NIC accepted for sending is written to a pcap file
//! (LINKTYPE_ETHERNET, wall-clock timestamps, micro- or nanosecond).
//!
//! **Owns:** the output stream and its staging buffer. Frames pass through
//! untouched (it never parses them) and buffers keep their owners: the
//! recorder only reads frames while the caller or the recorder owns them.
//!
//! **May not touch:** frame contents, the inner NIC's buffer accounting.
//!
//! **Crate choice:** `pcap-file` 2 writes the classic format that tcpdump,
//! tshark and Wireshark read, with no C dependency (libpcap is not needed).
//!
//! **Cost:** one wall-clock read per batch (not per frame) and a copy of each
//! frame into a reusable staging buffer; the file is written through a
//! `BufWriter` when a batch is committed, so there is no system call per
//! frame and no allocation once the staging buffer has grown to a batch.
//! Sent frames are staged *before* the inner `send` (after it, their buffers
//! belong to the NIC and may already be reused), and only the accepted prefix
//! is committed. A write error never breaks the data path: it is counted and
//! recording stops.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, TsResolution};

use super::{ExtRef, Nic};
use crate::mem::{BufArea, Desc};

/// Counters of a [`PcapNic`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PcapStats {
    /// Frames written to the file (received + sent).
    pub frames: u64,
    /// Received frames recorded.
    pub rx_frames: u64,
    /// Sent frames recorded.
    pub tx_frames: u64,
    /// Write errors (recording stops at the first one).
    pub write_errors: u64,
    /// Frames not recorded because recording had stopped or the descriptor
    /// was invalid.
    pub skipped: u64,
}

/// Staged pcap records plus the end offset of each one, shared between the
/// `PcapWriter` (which appends through [`Stage`]) and the `PcapNic` (which
/// commits a prefix).
#[derive(Debug, Default)]
struct Staging {
    bytes: Vec<u8>,
}

/// The `Write` end `pcap-file` writes into: appends to the staging buffer.
struct Stage(Arc<Mutex<Staging>>);

impl Write for Stage {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self.0.lock() {
            Ok(mut s) => {
                s.bytes.extend_from_slice(b);
                Ok(b.len())
            }
            Err(_) => Err(io::Error::other("pcap staging lock poisoned")),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Records every frame through `inner` into a pcap stream `W`.
pub struct PcapNic<N: Nic, W: Write = BufWriter<File>> {
    inner: N,
    pcap: Option<PcapWriter<Stage>>,
    staging: Arc<Mutex<Staging>>,
    /// End offset in the staging buffer of each record of the current batch.
    ends: Vec<usize>,
    out: Option<W>,
    stats: PcapStats,
    /// Assembles one gather frame's record (header + ext bytes).
    scratch: Vec<u8>,
}

/// Timestamp resolution of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Resolution {
    /// Microseconds (classic magic `a1b2c3d4`, read everywhere).
    #[default]
    Micro,
    /// Nanoseconds (magic `a1b23c4d`).
    Nano,
}

impl<N: Nic> PcapNic<N, BufWriter<File>> {
    /// Records into a new file at `path` (truncated if present).
    pub fn create(inner: N, path: impl AsRef<Path>, res: Resolution) -> io::Result<Self> {
        let f = File::create(path)?;
        Self::with_writer(inner, BufWriter::with_capacity(1 << 16, f), res)
    }
}

impl<N: Nic, W: Write> PcapNic<N, W> {
    /// Records into any writer (the pcap header is written at once).
    pub fn with_writer(inner: N, mut out: W, res: Resolution) -> io::Result<Self> {
        let staging = Arc::new(Mutex::new(Staging {
            bytes: Vec::with_capacity(1 << 16),
        }));
        let header = PcapHeader {
            snaplen: 65535,
            datalink: DataLink::ETHERNET,
            ts_resolution: match res {
                Resolution::Micro => TsResolution::MicroSecond,
                Resolution::Nano => TsResolution::NanoSecond,
            },
            ..PcapHeader::default()
        };
        let pcap = PcapWriter::with_header(Stage(staging.clone()), header)
            .map_err(|e| io::Error::other(format!("pcap header: {e}")))?;
        let mut nic = PcapNic {
            inner,
            pcap: Some(pcap),
            staging,
            ends: Vec::with_capacity(256),
            out: None,
            stats: PcapStats::default(),
            scratch: Vec::new(),
        };
        // Write the header straight through.
        let hdr_len = nic.staged_len();
        match nic.commit_to(&mut out, hdr_len) {
            Ok(()) => {
                nic.out = Some(out);
                Ok(nic)
            }
            Err(e) => Err(e),
        }
    }

    fn staged_len(&self) -> usize {
        self.staging.lock().map(|s| s.bytes.len()).unwrap_or(0)
    }

    /// Writes the first `upto` staged bytes to `out` and clears the staging.
    fn commit_to(&mut self, out: &mut W, upto: usize) -> io::Result<()> {
        let mut s = self
            .staging
            .lock()
            .map_err(|_| io::Error::other("pcap staging lock poisoned"))?;
        let upto = upto.min(s.bytes.len());
        let r = out.write_all(&s.bytes[..upto]);
        s.bytes.clear();
        r
    }

    /// Commits the first `upto` staged bytes; on error stops recording.
    fn commit(&mut self, upto: usize) {
        let Some(mut out) = self.out.take() else {
            return;
        };
        match self.commit_to(&mut out, upto) {
            Ok(()) => self.out = Some(out),
            Err(_) => self.fail(),
        }
    }

    fn fail(&mut self) {
        self.stats.write_errors += 1;
        self.pcap = None;
        self.out = None;
        if let Ok(mut s) = self.staging.lock() {
            s.bytes.clear();
        }
    }

    fn now() -> Duration {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
    }

    /// Stages a record per frame; `ends[i]` = staging length after frame i
    /// (unchanged if frame i was skipped).
    fn stage(&mut self, frames: &[Desc]) {
        self.ends.clear();
        let ts = Self::now();
        let Some(pcap) = self.pcap.as_mut() else {
            self.stats.skipped += frames.len() as u64;
            return;
        };
        let mut failed = false;
        for &d in frames {
            match self.inner.buffers().frame(d) {
                Some(data) if !failed => {
                    let p = PcapPacket::new(ts, data.len() as u32, data);
                    if pcap.write_packet(&p).is_err() {
                        failed = true;
                    }
                }
                _ => self.stats.skipped += 1,
            }
            let len = self.staging.lock().map(|s| s.bytes.len()).unwrap_or(0);
            self.ends.push(len);
        }
        if failed {
            self.fail();
            self.ends.clear();
        }
    }

    /// Stages one record per gather frame (header + ext bytes), like
    /// `stage` (unresolvable frames are counted as skipped).
    fn stage_gather(&mut self, frames: &[(Desc, ExtRef)]) {
        self.ends.clear();
        let ts = Self::now();
        let Some(pcap) = self.pcap.as_mut() else {
            self.stats.skipped += frames.len() as u64;
            return;
        };
        let mut failed = false;
        let mut rec = std::mem::take(&mut self.scratch);
        for &(h, e) in frames {
            let hdr = self.inner.buffers().frame(h);
            let ext = self.inner.ext_bytes().and_then(|x| e.slice(x));
            match (hdr, ext) {
                (Some(hdr), Some(ext)) if !failed => {
                    rec.clear();
                    rec.extend_from_slice(hdr);
                    rec.extend_from_slice(ext);
                    let p = PcapPacket::new(ts, rec.len() as u32, &rec);
                    if pcap.write_packet(&p).is_err() {
                        failed = true;
                    }
                }
                _ => self.stats.skipped += 1,
            }
            let len = self.staging.lock().map(|s| s.bytes.len()).unwrap_or(0);
            self.ends.push(len);
        }
        self.scratch = rec;
        if failed {
            self.fail();
            self.ends.clear();
        }
    }

    /// True if a gather frame's header and ext bytes can be read.
    fn gather_resolves(&self, h: Desc, e: ExtRef) -> bool {
        self.inner.buffers().valid(h) && self.inner.ext_bytes().and_then(|x| e.slice(x)).is_some()
    }

    /// Counters.
    pub fn stats(&self) -> PcapStats {
        self.stats
    }

    /// True while frames are being recorded (no write error so far).
    pub fn recording(&self) -> bool {
        self.out.is_some()
    }

    /// The wrapped NIC.
    pub fn inner(&self) -> &N {
        &self.inner
    }

    /// The wrapped NIC, mutably.
    pub fn inner_mut(&mut self) -> &mut N {
        &mut self.inner
    }

    fn flush_out(&mut self) {
        if let Some(out) = self.out.as_mut() {
            if out.flush().is_err() {
                self.fail();
            }
        }
    }
}

impl<N: Nic, W: Write> Nic for PcapNic<N, W> {
    fn mac(&self) -> [u8; 6] {
        self.inner.mac()
    }

    fn mtu(&self) -> usize {
        self.inner.mtu()
    }

    fn buffers(&self) -> &BufArea {
        self.inner.buffers()
    }

    fn buffers_mut(&mut self) -> &mut BufArea {
        self.inner.buffers_mut()
    }

    fn recv(&mut self, out: &mut [Desc]) -> usize {
        let n = self.inner.recv(out).min(out.len());
        if n > 0 && self.out.is_some() {
            self.stage(&out[..n]);
            let recorded = n as u64 - self.skipped_in_batch(&out[..n]);
            let end = self.ends.last().copied().unwrap_or(0);
            self.commit(end);
            if self.out.is_some() {
                self.stats.rx_frames += recorded;
                self.stats.frames += recorded;
            }
        } else if n > 0 {
            self.stats.skipped += n as u64;
        }
        n
    }

    fn alloc(&mut self, out: &mut [u32]) -> usize {
        self.inner.alloc(out)
    }

    fn send(&mut self, frames: &[Desc]) -> usize {
        if self.out.is_none() {
            self.stats.skipped += frames.len() as u64;
            return self.inner.send(frames);
        }
        self.stage(frames);
        let n = self.inner.send(frames).min(frames.len());
        let end = if n == 0 {
            0
        } else {
            self.ends.get(n - 1).copied().unwrap_or(0)
        };
        let recorded = n as u64 - self.skipped_in_batch(&frames[..n]);
        self.commit(end);
        if self.out.is_some() {
            self.stats.tx_frames += recorded;
            self.stats.frames += recorded;
        }
        n
    }

    fn release(&mut self, bufs: &[Desc]) {
        self.inner.release(bufs)
    }

    fn ext_capacity(&self) -> usize {
        self.inner.ext_capacity()
    }

    fn cross_core_buffers(&self) -> bool {
        self.inner.cross_core_buffers()
    }

    fn driver_stats(&self) -> Option<String> {
        self.inner.driver_stats()
    }

    fn ext_area_mut(&mut self) -> Option<&mut [u8]> {
        self.inner.ext_area_mut()
    }

    fn ext_bytes(&self) -> Option<&[u8]> {
        self.inner.ext_bytes()
    }

    /// Records each gather frame whole (header followed by the ext bytes,
    /// read through the inner NIC's `ext_bytes`; this copy is the recorder's
    /// own), then forwards the batch unchanged to the inner NIC.
    fn send_gather(&mut self, frames: &[(Desc, ExtRef)]) -> usize {
        if self.out.is_none() {
            self.stats.skipped += frames.len() as u64;
            return self.inner.send_gather(frames);
        }
        self.stage_gather(frames);
        let n = self.inner.send_gather(frames).min(frames.len());
        let end = if n == 0 {
            0
        } else {
            self.ends.get(n - 1).copied().unwrap_or(0)
        };
        let recorded = frames[..n]
            .iter()
            .filter(|&&(h, e)| self.gather_resolves(h, e))
            .count() as u64;
        self.commit(end);
        if self.out.is_some() {
            self.stats.tx_frames += recorded;
            self.stats.frames += recorded;
        }
        n
    }

    fn flush(&mut self) {
        self.inner.flush();
        self.flush_out();
    }

    fn doorbell(&self) -> Option<crate::mem::Doorbell> {
        self.inner.doorbell()
    }

    fn rx_probe(&self) -> Option<super::RxProbe> {
        self.inner.rx_probe()
    }

    fn wait_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.inner.wait_fd()
    }

    fn wait_begin(&mut self) -> bool {
        self.flush_out();
        self.inner.wait_begin()
    }

    fn wait_end(&mut self) {
        self.inner.wait_end()
    }

    fn idle_spin_ns(&self) -> u64 {
        self.inner.idle_spin_ns()
    }

    fn remote_waker(&self) -> Option<std::sync::Arc<crate::sys::EventFd>> {
        self.inner.remote_waker()
    }

    fn wait(&mut self, timeout_ns: Option<u64>) {
        self.inner.wait(timeout_ns)
    }
}

impl<N: Nic, W: Write> PcapNic<N, W> {
    fn skipped_in_batch(&self, frames: &[Desc]) -> u64 {
        frames
            .iter()
            .filter(|d| !self.inner.buffers().valid(**d))
            .count() as u64
    }

    /// Flushes the file (also done by `flush()` and on drop). An error is
    /// counted and stops recording, like any write error.
    pub fn flush_file(&mut self) -> io::Result<()> {
        let r = match self.out.as_mut() {
            Some(out) => out.flush(),
            None => Ok(()),
        };
        if r.is_err() {
            self.fail();
        }
        r
    }
}

impl<N: Nic, W: Write> Drop for PcapNic<N, W> {
    fn drop(&mut self) {
        self.flush_out();
    }
}
