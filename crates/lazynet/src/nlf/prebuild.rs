//! The prebuilder: reads a media file once and writes its meta file.
//!
//! **Owns:** cutting a media file into packets, their send times and
//! stored sums, and writing the meta file. **May not touch:** the media
//! file (read only) or any network state.
//!
//! * **MPEG-TS** (detected by the sync byte 0x47 at the start of each of the
//!   first five 188-byte packets, or of all of them in a shorter file) is cut
//!   on 188-byte boundaries: the payload size is rounded *down* to a
//!   multiple of 188 (1316 = 7 × 188 is the usual; 1500 → 1316, 2048 → 1880,
//!   4096 → 3948, 8192 → 8084) and must be at least 188. A trailing partial
//!   TS packet goes out in the last payload. The PCR of the first PID that
//!   carries one is taken from the adaptation fields; the send time of a
//!   packet is the PCR interpolated piecewise-linearly at the byte offset of
//!   its payload's first byte (a PCR is placed at the start of its TS
//!   packet), extrapolated before the first and after the last PCR with the
//!   average rate between them; 33-bit PCR wrap-around is unwrapped and a
//!   PCR that does not advance (discontinuity) is ignored. With fewer than
//!   two usable PCRs the nominal bit rate is used. Time 0 is the first byte.
//! * **Other files** are opaque bytes cut into payloads of the given size;
//!   send times follow the nominal bit rate ([`PrebuildOptions::nominal_bit_rate`],
//!   3 Mbit/s by default).
//!
//! The RTP timestamp of a packet is its send time in 90 kHz units with base 0
//! (`send_ns * 90 / 1_000_000`, wrapping at 2³²); the RTP sequence offset is
//! its index. The streamer adds random per-client bases (RFC 3550).
//!
//! The meta file is written to a temporary name in the output directory and
//! renamed into place, so a reader never sees half a file.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::meta::{self, MetaHeader, PacketMeta, FLAG_MPEGTS, FLAG_RTP, RTP_CLOCK_HZ, RTP_PT_MP2T};
use super::NlfError;
use crate::wire::checksum;

/// MPEG-TS packet length.
pub const TS_PACKET: usize = 188;
/// The largest payload: an IPv4 datagram of 65535 bytes minus the IPv4,
/// UDP and RTP headers.
pub const MAX_PAYLOAD: usize = 65535 - 20 - 8 - 12;
/// Default nominal bit rate for opaque files and PCR-less streams.
pub const DEFAULT_BIT_RATE: u64 = 3_000_000;

const PCR_HZ: u64 = 27_000_000;
const PCR_WRAP: i128 = (1i128 << 33) * 300;

/// What to prebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrebuildOptions<'a> {
    /// Requested payload size (rounded down to a multiple of 188 for MPEG-TS).
    pub payload: usize,
    /// Mark the meta file for RTP framing.
    pub rtp: bool,
    /// Where to write the meta file (default: next to the media).
    pub out_dir: Option<&'a Path>,
    /// Bit rate for send times when there are no PCRs, in bit/s.
    pub nominal_bit_rate: u64,
}

/// What [`prebuild`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct PrebuildSummary {
    /// The meta file written.
    pub meta: PathBuf,
    /// The payload size used.
    pub payload_size: usize,
    /// Whether the input was parsed as MPEG-TS.
    pub mpegts: bool,
    /// Number of PCRs used for timing.
    pub pcrs: usize,
    /// Packets.
    pub packets: u64,
    /// Media bytes.
    pub bytes: u64,
    /// Stream duration.
    pub duration: Duration,
    /// Stream bit rate in bit/s.
    pub bit_rate: u64,
    /// Time taken by the prebuild.
    pub elapsed: Duration,
}

/// The meta file name for `media`: `<name>.nlf-<payload>[-rtp]`, in
/// `out_dir` or next to the media. `payload` is the requested size.
pub fn meta_path(media: &Path, payload: usize, rtp: bool, out_dir: Option<&Path>) -> PathBuf {
    let mut name = media.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".nlf-{payload}{}", if rtp { "-rtp" } else { "" }));
    match out_dir {
        Some(d) => d.join(name),
        None => media.with_file_name(name),
    }
}

/// Prebuilds with the default nominal bit rate; see [`prebuild_with`].
pub fn prebuild(
    media: &Path,
    payload: usize,
    rtp: bool,
    out_dir: Option<&Path>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<PrebuildSummary, NlfError> {
    let opts = PrebuildOptions {
        payload,
        rtp,
        out_dir,
        nominal_bit_rate: DEFAULT_BIT_RATE,
    };
    prebuild_with(media, &opts, progress)
}

/// Reads `media`, computes one record per payload and writes the meta file
/// at [`meta_path`]. `progress(done, total)` is called with media bytes.
pub fn prebuild_with(
    media: &Path,
    opts: &PrebuildOptions<'_>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<PrebuildSummary, NlfError> {
    let started = Instant::now();
    if opts.payload == 0 || opts.payload > MAX_PAYLOAD {
        return Err(NlfError::BadPayloadSize {
            payload: opts.payload,
            reason: "must be between 1 and 65495 bytes",
        });
    }
    if opts.nominal_bit_rate == 0 {
        return Err(NlfError::BadPayloadSize {
            payload: opts.payload,
            reason: "nominal bit rate is 0",
        });
    }
    let (media_len, fp) = meta::fingerprint(media)?;
    if media_len == 0 {
        return Err(NlfError::EmptyMedia);
    }
    let mut f = File::open(media).map_err(|e| NlfError::io("open", media, e))?;

    // Detect MPEG-TS from the start of the file.
    let mut head = vec![0u8; (5 * TS_PACKET).min(media_len as usize)];
    f.read_exact(&mut head)
        .map_err(|e| NlfError::io("read", media, e))?;
    let mpegts = is_mpegts(&head);
    drop(head);
    let mut f = File::open(media).map_err(|e| NlfError::io("open", media, e))?;

    let payload = if mpegts {
        let p = opts.payload / TS_PACKET * TS_PACKET;
        if p == 0 {
            return Err(NlfError::BadPayloadSize {
                payload: opts.payload,
                reason: "MPEG-TS payloads are whole 188-byte packets, so at least 188",
            });
        }
        p
    } else {
        opts.payload
    };

    // One pass: offsets, lengths, sums and PCRs.
    let mut records: Vec<PacketMeta> = Vec::new();
    let mut pcrs: Vec<(u64, i128)> = Vec::new();
    let mut pcr_pid: Option<u16> = None;
    let mut buf = vec![0u8; payload];
    let mut offset = 0u64;
    progress(0, media_len);
    while offset < media_len {
        let n = (media_len - offset).min(payload as u64) as usize;
        let chunk = &mut buf[..n];
        f.read_exact(chunk)
            .map_err(|e| NlfError::io("read", media, e))?;
        if mpegts {
            for (k, ts) in chunk.chunks_exact(TS_PACKET).enumerate() {
                if let Some((pid, pcr)) = parse_pcr(ts) {
                    if *pcr_pid.get_or_insert(pid) == pid {
                        push_pcr(&mut pcrs, offset + (k * TS_PACKET) as u64, pcr);
                    }
                }
            }
        }
        records.push(PacketMeta {
            offset,
            len: n as u32,
            sum: checksum::partial(chunk, 0),
            send_ns: 0,
            rtp_ts: 0,
            rtp_seq: records.len() as u32,
        });
        offset += n as u64;
        progress(offset, media_len);
    }

    // Timing.
    let clock = Clock::new(&pcrs, opts.nominal_bit_rate);
    let t0 = clock.ticks_at(0);
    let ns_at = |pos: u64| -> u64 {
        let ticks = (clock.ticks_at(pos) - t0).max(0);
        u64::try_from(ticks * 1000 / (PCR_HZ / 1_000_000) as i128).unwrap_or(u64::MAX)
    };
    let mut last = 0u64;
    for r in &mut records {
        let t = ns_at(r.offset).max(last);
        last = t;
        r.send_ns = t;
        r.rtp_ts = rtp_ts(t);
    }
    let duration_ns = ns_at(media_len).max(last);
    let bit_rate = if duration_ns == 0 {
        opts.nominal_bit_rate
    } else {
        u64::try_from(u128::from(media_len) * 8 * 1_000_000_000 / u128::from(duration_ns))
            .unwrap_or(u64::MAX)
    };

    let header = MetaHeader {
        version: meta::VERSION,
        flags: if opts.rtp { FLAG_RTP } else { 0 } | if mpegts { FLAG_MPEGTS } else { 0 },
        payload_size: payload as u32,
        packets: records.len() as u64,
        media_len,
        fingerprint: fp,
        duration_ns,
        bit_rate,
        rtp_payload_type: RTP_PT_MP2T,
        rtp_clock_hz: RTP_CLOCK_HZ,
    };
    let image = meta::encode(&header, &records);
    let out = meta_path(media, opts.payload, opts.rtp, opts.out_dir);
    write_atomic(&out, &image)?;
    Ok(PrebuildSummary {
        meta: out,
        payload_size: payload,
        mpegts,
        pcrs: clock.points(),
        packets: records.len() as u64,
        bytes: media_len,
        duration: Duration::from_nanos(duration_ns),
        bit_rate,
        elapsed: started.elapsed(),
    })
}

/// The RTP timestamp (90 kHz, base 0) for a send time in ns.
#[inline]
pub fn rtp_ts(send_ns: u64) -> u32 {
    (u128::from(send_ns) * 90 / 1_000_000) as u32
}

/// True if `head` (the start of a file) looks like MPEG-TS: a sync byte at
/// the start of each of its first five (or all, if fewer) 188-byte packets.
pub fn is_mpegts(head: &[u8]) -> bool {
    let n = (head.len() / TS_PACKET).min(5);
    n > 0 && (0..n).all(|i| head[i * TS_PACKET] == 0x47)
}

/// The PID and the 27 MHz PCR of one 188-byte TS packet, if it carries one.
pub fn parse_pcr(p: &[u8]) -> Option<(u16, u64)> {
    let p: &[u8; TS_PACKET] = p.try_into().ok()?;
    if p[0] != 0x47 {
        return None;
    }
    let afc = (p[3] >> 4) & 3;
    if afc & 2 == 0 || p[4] < 7 || p[5] & 0x10 == 0 {
        return None;
    }
    let pid = (u16::from(p[1] & 0x1F) << 8) | u16::from(p[2]);
    let base = (u64::from(p[6]) << 25)
        | (u64::from(p[7]) << 17)
        | (u64::from(p[8]) << 9)
        | (u64::from(p[9]) << 1)
        | (u64::from(p[10]) >> 7);
    let ext = (u64::from(p[10] & 1) << 8) | u64::from(p[11]);
    Some((pid, base * 300 + ext))
}

/// Appends a PCR, unwrapping 33-bit wrap-around; a PCR that does not
/// advance is dropped.
fn push_pcr(pcrs: &mut Vec<(u64, i128)>, pos: u64, pcr: u64) {
    let mut v = i128::from(pcr);
    if let Some(&(_, prev)) = pcrs.last() {
        let wraps = prev.div_euclid(PCR_WRAP);
        v += wraps * PCR_WRAP;
        if v < prev - PCR_WRAP / 2 {
            v += PCR_WRAP;
        }
        if v <= prev {
            return;
        }
    }
    pcrs.push((pos, v));
}

/// Byte position → 27 MHz ticks.
struct Clock<'a> {
    pcrs: &'a [(u64, i128)],
    /// Average ticks per byte, as a ratio num/den.
    num: i128,
    den: i128,
    i: std::cell::Cell<usize>,
}

impl<'a> Clock<'a> {
    fn new(pcrs: &'a [(u64, i128)], nominal_bit_rate: u64) -> Self {
        match (pcrs.first(), pcrs.last()) {
            (Some(&(p0, c0)), Some(&(p1, c1))) if pcrs.len() >= 2 && p1 > p0 => Clock {
                pcrs,
                num: c1 - c0,
                den: i128::from(p1 - p0),
                i: std::cell::Cell::new(0),
            },
            _ => Clock {
                pcrs: &[],
                num: i128::from(PCR_HZ) * 8,
                den: i128::from(nominal_bit_rate.max(1)),
                i: std::cell::Cell::new(0),
            },
        }
    }

    fn points(&self) -> usize {
        self.pcrs.len()
    }

    /// Ticks at byte `pos`; `pos` must not decrease between calls (it is
    /// walked forward through the PCR list).
    fn ticks_at(&self, pos: u64) -> i128 {
        let pos = i128::from(pos);
        let (Some(&(fp, fc)), Some(&(lp, lc))) = (self.pcrs.first(), self.pcrs.last()) else {
            return pos * self.num / self.den;
        };
        let (fp, lp) = (i128::from(fp), i128::from(lp));
        if pos <= fp {
            return fc - (fp - pos) * self.num / self.den;
        }
        if pos >= lp {
            return lc + (pos - lp) * self.num / self.den;
        }
        let mut i = self.i.get();
        if i128::from(self.pcrs.get(i).map_or(0, |p| p.0)) > pos {
            i = 0;
        }
        while i + 1 < self.pcrs.len() && i128::from(self.pcrs[i + 1].0) <= pos {
            i += 1;
        }
        self.i.set(i);
        let (ap, ac) = self.pcrs[i];
        let Some(&(bp, bc)) = self.pcrs.get(i + 1) else {
            return lc;
        };
        let (ap, bp) = (i128::from(ap), i128::from(bp));
        ac + (pos - ap) * (bc - ac) / (bp - ap).max(1)
    }
}

fn write_atomic(path: &Path, data: &[u8]) -> Result<(), NlfError> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".tmp{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let res = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()
    })();
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(NlfError::io("write", &tmp, e));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        NlfError::io("rename into", path, e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcr_roundtrip_and_wrap() {
        let mut p = [0xFFu8; TS_PACKET];
        p[0] = 0x47;
        p[1] = 0x01;
        p[2] = 0x00;
        p[3] = 0x30;
        p[4] = 7;
        p[5] = 0x10;
        let base: u64 = (1 << 33) - 1;
        let ext: u64 = 299;
        p[6] = (base >> 25) as u8;
        p[7] = (base >> 17) as u8;
        p[8] = (base >> 9) as u8;
        p[9] = (base >> 1) as u8;
        p[10] = ((base & 1) << 7) as u8 | 0x7E | (ext >> 8) as u8;
        p[11] = ext as u8;
        assert_eq!(parse_pcr(&p), Some((0x100, base * 300 + ext)));
        let mut v = Vec::new();
        push_pcr(&mut v, 0, base * 300);
        push_pcr(&mut v, 188, 100);
        assert_eq!(v[1].1, PCR_WRAP + 100);
        push_pcr(&mut v, 376, 50); // does not advance: dropped
        assert_eq!(v.len(), 2);
    }

    #[test]
    fn meta_path_names() {
        let p = meta_path(Path::new("/m/test.ts"), 1316, true, None);
        assert_eq!(p, Path::new("/m/test.ts.nlf-1316-rtp"));
        let p = meta_path(Path::new("test.ts"), 2048, false, Some(Path::new("/o")));
        assert_eq!(p, Path::new("/o/test.ts.nlf-2048"));
    }
}
