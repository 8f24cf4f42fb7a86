//! An in-memory Ethernet wire: two [`WireEnd`]s joined by SPSC rings in one
//! shared [`Region`], usable between threads or between processes.
//!
//! **Owns:** the wire's region layout (header, four rings, buffers), the
//! circulation of free buffers between the two ends, and the validation of
//! every descriptor or buffer index the peer hands over.
//!
//! **May not touch:** frame contents (it never parses or copies a frame) and
//! anything above the [`Nic`] trait. Nothing on the data path allocates,
//! locks or makes a system call: frames move as descriptors through rings.
//!
//! Layout: a header (magic, version, buffer count and size, ring capacities,
//! offsets, MACs, MTU) so another process can attach and validate; then the
//! data rings A→B and B→A (of [`Desc`]), the return rings to A and to B (of
//! `u32` buffer indices, like AF_XDP's fill/completion rings); then the
//! buffers. End A owns buffers `[0, n/2)`, end B `[n/2, n)`. A buffer released
//! by the end that owns it goes to that end's local free list; a buffer of the
//! peer's half goes back on the return ring to the peer, which refills its
//! free list from it in batches inside `alloc`. Because the owner is fixed by
//! index, a received buffer may be sent back (zero-copy echo) and still ends up
//! at its owner.
//!
//! Each end tracks the state of its own buffers (free, held by the user, at the
//! peer), so a hostile peer can neither make it read out of bounds nor hand it
//! one of its own buffers twice: bad descriptors and indices are dropped and
//! counted in [`WireStats`]. The return rings are sized to hold a whole half,
//! so with an honest peer `release` never fails.

use std::io;
use std::mem::size_of;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use crate::mem::ring::{self, Consumer, Producer, Ring};
use crate::mem::{BufArea, Desc, Region};

use super::Nic;

/// `"LZWP"`.
const WIRE_MAGIC: u32 = 0x4c5a_5750;
const WIRE_VERSION: u32 = 1;
const PAGE: usize = 4096;
/// Largest buffer count accepted from a header.
const MAX_BUFS: u32 = 1 << 22;
/// Ethernet header length (the MTU excludes it).
const ETH_HLEN: u32 = 14;
/// Batch size of internal stack arrays (return ring traffic).
const BATCH: usize = 64;

/// Configuration of a [`WirePair`].
#[derive(Clone, Debug)]
pub struct WireConfig {
    /// Total buffers (even; each end owns half). Default 1024.
    pub buf_count: u32,
    /// Bytes per buffer, 64..=65536. Default 2048.
    pub buf_size: u32,
    /// Capacity of each data ring (power of two). Default 256.
    pub ring_capacity: u32,
    /// IP MTU, at most `buf_size - 14` and 9000. Default 1500.
    pub mtu: u32,
    /// MAC of end A. Default 02:00:00:00:00:01 (locally administered).
    pub mac_a: [u8; 6],
    /// MAC of end B. Default 02:00:00:00:00:02.
    pub mac_b: [u8; 6],
}

impl Default for WireConfig {
    fn default() -> Self {
        WireConfig {
            buf_count: 1024,
            buf_size: 2048,
            ring_capacity: 256,
            mtu: 1500,
            mac_a: [2, 0, 0, 0, 0, 1],
            mac_b: [2, 0, 0, 0, 0, 2],
        }
    }
}

/// Which end of the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The creating end; owns buffers `[0, n/2)`.
    A,
    /// The attaching end; owns buffers `[n/2, n)`.
    B,
}

/// Counters of one end. Every dropped descriptor or index is counted here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WireStats {
    /// Frames accepted by `send`.
    pub tx_frames: u64,
    /// Frames handed out by `recv`.
    pub rx_frames: u64,
    /// Frames `send` refused because the data ring was full.
    pub tx_full: u64,
    /// Descriptors given to `send` that were out of range or named a buffer
    /// the caller did not hold; dropped.
    pub tx_bad_desc: u64,
    /// Descriptors popped from the data ring that were out of range or named
    /// one of our buffers that was not at the peer; dropped.
    pub rx_bad_desc: u64,
    /// Indices on our return ring that were not our buffers at the peer.
    pub ret_bad: u64,
    /// Peer buffers we could not return because its return ring was full
    /// (only a stuck or hostile peer causes this).
    pub ret_full: u64,
    /// Descriptors given to `release` that were out of range or named one of
    /// our buffers the caller did not hold.
    pub release_bad: u64,
    /// Implausible ring indices seen (corrupt or hostile peer).
    pub ring_corrupt: u64,
}

/// The header at the start of the region (read by value, then validated).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WireHeader {
    magic: u32,
    version: u32,
    buf_count: u32,
    buf_size: u32,
    ring_cap: u32,
    ret_cap: u32,
    mtu: u32,
    _pad: u32,
    mac_a: [u8; 8],
    mac_b: [u8; 8],
    /// Data A→B, data B→A, return to A, return to B.
    ring_off: [u64; 4],
    buf_off: u64,
    total_len: u64,
}

const RING_AB: usize = 0;
const RING_BA: usize = 1;
const RET_A: usize = 2;
const RET_B: usize = 3;

/// Computes the layout for validated parameters.
fn layout(buf_count: u32, buf_size: u32, ring_cap: u32) -> ([u64; 4], u32, u64, u64) {
    let ret_cap = (buf_count / 2).next_power_of_two();
    let mut off = size_of::<WireHeader>().div_ceil(64) * 64;
    let mut ring_off = [0u64; 4];
    for (i, o) in ring_off.iter_mut().enumerate() {
        *o = off as u64;
        off += if i < 2 {
            ring::layout_size::<Desc>(ring_cap)
        } else {
            ring::layout_size::<u32>(ret_cap)
        };
    }
    let buf_off = off.div_ceil(PAGE) * PAGE;
    let total = buf_off as u64 + buf_count as u64 * buf_size as u64;
    (ring_off, ret_cap, buf_off as u64, total)
}

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

fn check_params(buf_count: u32, buf_size: u32, ring_cap: u32, mtu: u32) -> io::Result<()> {
    if buf_count < 2 || buf_count % 2 != 0 || buf_count > MAX_BUFS {
        return Err(invalid("wire buffer count must be even, 2..=2^22"));
    }
    if !(64..=65536).contains(&buf_size) {
        return Err(invalid("wire buffer size must be 64..=65536"));
    }
    if ring_cap == 0 || !ring_cap.is_power_of_two() || ring_cap > 1 << 20 {
        return Err(invalid("wire ring capacity must be a power of two <= 2^20"));
    }
    if !(68..=9000).contains(&mtu) || mtu > buf_size - ETH_HLEN {
        return Err(invalid("wire MTU must be 68..=min(9000, buf_size - 14)"));
    }
    Ok(())
}

/// Creates in-memory wires.
pub struct WirePair;

impl WirePair {
    /// Both ends in this process (for threads).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(cfg: WireConfig) -> io::Result<(WireEnd, WireEnd)> {
        let (a, region) = Self::create(cfg)?;
        let b = WireEnd::from_region(region, Side::B)?;
        Ok((a, b))
    }

    /// Creates the region and end A. Hand `region.fd()` (a duplicate without
    /// `FD_CLOEXEC`) to another process, which calls [`WireEnd::attach`].
    pub fn create(cfg: WireConfig) -> io::Result<(WireEnd, Arc<Region>)> {
        check_params(cfg.buf_count, cfg.buf_size, cfg.ring_capacity, cfg.mtu)?;
        let (ring_off, ret_cap, buf_off, total) =
            layout(cfg.buf_count, cfg.buf_size, cfg.ring_capacity);
        let len = usize::try_from(total).map_err(|_| invalid("wire too large"))?;
        let region = Region::create("lazynet-wirepair", len)?;
        Ring::<Desc>::init(&region, ring_off[RING_AB] as usize, cfg.ring_capacity)?;
        Ring::<Desc>::init(&region, ring_off[RING_BA] as usize, cfg.ring_capacity)?;
        Ring::<u32>::init(&region, ring_off[RET_A] as usize, ret_cap)?;
        Ring::<u32>::init(&region, ring_off[RET_B] as usize, ret_cap)?;
        let mut mac_a = [0u8; 8];
        mac_a[..6].copy_from_slice(&cfg.mac_a);
        let mut mac_b = [0u8; 8];
        mac_b[..6].copy_from_slice(&cfg.mac_b);
        let hdr = WireHeader {
            magic: WIRE_MAGIC,
            version: WIRE_VERSION,
            buf_count: cfg.buf_count,
            buf_size: cfg.buf_size,
            ring_cap: cfg.ring_capacity,
            ret_cap,
            mtu: cfg.mtu,
            _pad: 0,
            mac_a,
            mac_b,
            ring_off,
            buf_off,
            total_len: total,
        };
        // SAFETY: the region is at least `total` > size_of::<WireHeader>()
        // bytes, page-aligned (mmap), and not yet shared with anyone.
        unsafe { std::ptr::write_volatile(region.as_ptr().cast::<WireHeader>(), hdr) };
        let a = WireEnd::from_region(region.clone(), Side::A)?;
        Ok((a, region))
    }
}

/// Ownership state of one of our own buffers.
const FREE: u8 = 0;
const USER: u8 = 1;
const AT_PEER: u8 = 2;

/// One end of a [`WirePair`]. Implements [`Nic`]; `Send`.
pub struct WireEnd {
    side: Side,
    area: BufArea,
    tx: Producer<Desc>,
    rx: Consumer<Desc>,
    /// Returns the peer's buffers to it.
    ret_out: Producer<u32>,
    /// Our buffers coming back from the peer.
    ret_in: Consumer<u32>,
    own_lo: u32,
    own_hi: u32,
    /// Local free list of our own buffers (capacity fixed at creation).
    free: Vec<u32>,
    /// State of each of our own buffers, indexed by `buf - own_lo`.
    state: Vec<u8>,
    mac: [u8; 6],
    mtu: usize,
    stats: WireStats,
}

impl std::fmt::Debug for WireEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireEnd")
            .field("side", &self.side)
            .field("own", &(self.own_lo..self.own_hi))
            .field("free", &self.free.len())
            .field("stats", &self.stats)
            .finish()
    }
}

impl WireEnd {
    /// Attaches to a wire created by [`WirePair::create`] in another process,
    /// validating its header and rings.
    pub fn attach(region_fd: OwnedFd, side: Side) -> io::Result<WireEnd> {
        Self::from_region(Region::open(region_fd)?, side)
    }

    fn from_region(region: Arc<Region>, side: Side) -> io::Result<WireEnd> {
        if region.len() < size_of::<WireHeader>() {
            return Err(invalid("wire region too small"));
        }
        // SAFETY: the region holds at least a header; it is page-aligned, and
        // WireHeader is plain integers, so any bytes are a valid value. We copy
        // it once and only use the copy.
        let h = unsafe { std::ptr::read_volatile(region.as_ptr().cast::<WireHeader>()) };
        if h.magic != WIRE_MAGIC || h.version != WIRE_VERSION {
            return Err(invalid("not a lazynet wire region"));
        }
        check_params(h.buf_count, h.buf_size, h.ring_cap, h.mtu)?;
        let (ring_off, ret_cap, buf_off, total) = layout(h.buf_count, h.buf_size, h.ring_cap);
        if h.ring_off != ring_off
            || h.ret_cap != ret_cap
            || h.buf_off != buf_off
            || h.total_len != total
        {
            return Err(invalid("wire header layout mismatch"));
        }
        if total > region.len() as u64 {
            return Err(invalid("wire region shorter than its layout"));
        }
        let off = |i: usize| ring_off[i] as usize;
        let (tx_i, rx_i, out_i, in_i) = match side {
            Side::A => (RING_AB, RING_BA, RET_B, RET_A),
            Side::B => (RING_BA, RING_AB, RET_A, RET_B),
        };
        let tx = Producer::<Desc>::attach(&region, off(tx_i))?;
        let rx = Consumer::<Desc>::attach(&region, off(rx_i))?;
        let ret_out = Producer::<u32>::attach(&region, off(out_i))?;
        let ret_in = Consumer::<u32>::attach(&region, off(in_i))?;
        if tx.capacity() != h.ring_cap as usize
            || rx.capacity() != h.ring_cap as usize
            || ret_out.capacity() != ret_cap as usize
            || ret_in.capacity() != ret_cap as usize
        {
            return Err(invalid("wire ring capacity mismatch"));
        }
        let area = BufArea::new(region, buf_off as usize, h.buf_size, h.buf_count)?;
        let half = h.buf_count / 2;
        let (own_lo, own_hi) = match side {
            Side::A => (0, half),
            Side::B => (half, h.buf_count),
        };
        let mut free = Vec::with_capacity(half as usize);
        free.extend((own_lo..own_hi).rev());
        let mut mac = [0u8; 6];
        mac.copy_from_slice(match side {
            Side::A => &h.mac_a[..6],
            Side::B => &h.mac_b[..6],
        });
        Ok(WireEnd {
            side,
            area,
            tx,
            rx,
            ret_out,
            ret_in,
            own_lo,
            own_hi,
            free,
            state: vec![FREE; half as usize],
            mac,
            mtu: h.mtu as usize,
            stats: WireStats::default(),
        })
    }

    /// Which end this is.
    pub fn side(&self) -> Side {
        self.side
    }

    /// The buffer indices this end owns.
    pub fn own_range(&self) -> std::ops::Range<u32> {
        self.own_lo..self.own_hi
    }

    /// Buffers on the local free list (not counting any waiting on the
    /// return ring).
    pub fn free_buffers(&self) -> usize {
        self.free.len()
    }

    /// Takes back every buffer the peer has returned (normally done lazily
    /// by `alloc`); for accounting checks.
    pub fn reclaim(&mut self) {
        self.refill();
    }

    /// The region holding the wire.
    pub fn region(&self) -> &Arc<Region> {
        self.area.region()
    }

    /// Counters.
    pub fn stats(&self) -> WireStats {
        let mut s = self.stats;
        s.ring_corrupt =
            self.tx.corrupt() + self.rx.corrupt() + self.ret_out.corrupt() + self.ret_in.corrupt();
        s
    }

    /// Index into `state` if `buf` is one of ours.
    #[inline]
    fn own(&self, buf: u32) -> Option<usize> {
        (self.own_lo..self.own_hi)
            .contains(&buf)
            .then(|| (buf - self.own_lo) as usize)
    }

    /// Moves buffers the peer returned onto the free list.
    fn refill(&mut self) {
        let mut tmp = [0u32; BATCH];
        loop {
            let n = self.ret_in.pop(&mut tmp);
            for &b in &tmp[..n] {
                match self.own(b) {
                    Some(i) if self.state[i] == AT_PEER && self.free.len() < self.state.len() => {
                        self.state[i] = FREE;
                        self.free.push(b);
                    }
                    _ => self.stats.ret_bad += 1,
                }
            }
            if n < BATCH {
                break;
            }
        }
    }

    /// Gives a peer buffer back to the peer.
    fn return_batch(&mut self, batch: &[u32]) {
        let n = self.ret_out.push(batch);
        self.stats.ret_full += (batch.len() - n) as u64;
    }

    /// Validates a descriptor the peer sent. On success our own buffer moves
    /// to the user; on failure the buffer (if it names one) is disposed of.
    #[inline]
    fn accept_rx(&mut self, d: Desc) -> bool {
        if d.buf >= self.area.count() {
            return false;
        }
        let range_ok = self.area.valid(d);
        match self.own(d.buf) {
            Some(i) => {
                if self.state[i] != AT_PEER {
                    return false; // forged or duplicate: not ours to take
                }
                if range_ok {
                    self.state[i] = USER;
                    true
                } else {
                    self.state[i] = FREE;
                    self.free.push(d.buf);
                    false
                }
            }
            None => {
                if !range_ok {
                    self.return_batch(&[d.buf]);
                }
                range_ok
            }
        }
    }

    /// True if the caller may send `d`.
    #[inline]
    fn tx_ok(&self, d: Desc) -> bool {
        self.area.valid(d) && self.own(d.buf).is_none_or(|i| self.state[i] == USER)
    }
}

impl Nic for WireEnd {
    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn mtu(&self) -> usize {
        self.mtu
    }

    fn buffers(&self) -> &BufArea {
        &self.area
    }

    fn buffers_mut(&mut self) -> &mut BufArea {
        &mut self.area
    }

    fn recv(&mut self, out: &mut [Desc]) -> usize {
        let n = self.rx.pop(out);
        let mut k = 0;
        for i in 0..n {
            let d = out[i];
            if self.accept_rx(d) {
                out[k] = d;
                k += 1;
            } else {
                self.stats.rx_bad_desc += 1;
            }
        }
        self.stats.rx_frames += k as u64;
        k
    }

    fn alloc(&mut self, out: &mut [u32]) -> usize {
        if self.free.len() < out.len() {
            self.refill();
        }
        let n = out.len().min(self.free.len());
        for slot in &mut out[..n] {
            let b = self.free.pop().unwrap_or_default();
            if let Some(i) = self.own(b) {
                self.state[i] = USER;
            }
            *slot = b;
        }
        n
    }

    fn send(&mut self, frames: &[Desc]) -> usize {
        let mut i = 0;
        while i < frames.len() {
            let mut j = i;
            while j < frames.len() && self.tx_ok(frames[j]) {
                j += 1;
            }
            if j > i {
                let k = self.tx.push(&frames[i..j]);
                for d in &frames[i..i + k] {
                    if let Some(s) = self.own(d.buf) {
                        self.state[s] = AT_PEER;
                    }
                }
                self.stats.tx_frames += k as u64;
                if i + k < j {
                    self.stats.tx_full += (frames.len() - (i + k)) as u64;
                    return i + k;
                }
            }
            if j < frames.len() {
                // Invalid: consumed and dropped; give the buffer back if it
                // was the caller's to give.
                self.stats.tx_bad_desc += 1;
                if self.releasable(frames[j]) {
                    self.release(&frames[j..j + 1]);
                }
            }
            i = j + 1;
        }
        frames.len()
    }

    fn release(&mut self, bufs: &[Desc]) {
        let mut batch = [0u32; BATCH];
        let mut nb = 0;
        for d in bufs {
            if d.buf >= self.area.count() {
                self.stats.release_bad += 1;
                continue;
            }
            match self.own(d.buf) {
                Some(i) if self.state[i] == USER => {
                    self.state[i] = FREE;
                    self.free.push(d.buf);
                }
                Some(_) => self.stats.release_bad += 1,
                None => {
                    batch[nb] = d.buf;
                    nb += 1;
                    if nb == BATCH {
                        self.return_batch(&batch);
                        nb = 0;
                    }
                }
            }
        }
        if nb > 0 {
            self.return_batch(&batch[..nb]);
        }
    }
}

impl WireEnd {
    /// True if `release` would accept `d` without counting it as bad.
    fn releasable(&self, d: Desc) -> bool {
        d.buf < self.area.count() && self.own(d.buf).is_none_or(|i| self.state[i] == USER)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn frame(nic: &mut WireEnd, seq: u32, len: usize) -> Desc {
        let mut b = [0u32; 1];
        assert_eq!(nic.alloc(&mut b), 1, "out of buffers");
        let buf = nic.buffers_mut().buf_mut(b[0]).unwrap();
        for (k, byte) in buf[..len].iter_mut().enumerate() {
            *byte = (seq as usize * 31 + k) as u8;
        }
        Desc::new(b[0], len as u16)
    }

    fn check(nic: &WireEnd, d: Desc, seq: u32) {
        let f = nic.buffers().frame(d).unwrap();
        for (k, byte) in f.iter().enumerate() {
            assert_eq!(*byte, (seq as usize * 31 + k) as u8);
        }
    }

    #[test]
    fn defaults() {
        let (a, b) = WirePair::new(WireConfig::default()).unwrap();
        assert_eq!(a.mac(), [2, 0, 0, 0, 0, 1]);
        assert_eq!(b.mac(), [2, 0, 0, 0, 0, 2]);
        assert_eq!(a.mtu(), 1500);
        assert_eq!(a.own_range(), 0..512);
        assert_eq!(b.own_range(), 512..1024);
        let bad = WireConfig {
            mtu: 2040,
            ..WireConfig::default()
        };
        assert!(WirePair::new(bad).is_err());
        fn is_send<T: Send>() {}
        is_send::<WireEnd>();
    }

    #[test]
    fn attach_validates_header() {
        let (a, region) = WirePair::create(WireConfig::default()).unwrap();
        // Side A is taken; B attaches once.
        let e = WireEnd::attach(region.dup_inheritable().unwrap(), Side::A).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        let b = WireEnd::attach(region.dup_inheritable().unwrap(), Side::B).unwrap();
        assert_eq!(b.mac(), [2, 0, 0, 0, 0, 2]);
        assert!(WireEnd::attach(region.dup_inheritable().unwrap(), Side::B).is_err());
        drop(b);
        let hdr = region.as_ptr().cast::<WireHeader>();
        // SAFETY: test-only access to the header at the start of the region.
        let good = unsafe { std::ptr::read(hdr) };
        for bad in [
            WireHeader { magic: 1, ..good },
            WireHeader {
                buf_count: 1 << 30,
                ..good
            },
            WireHeader {
                buf_count: 2048,
                ..good
            },
            WireHeader { mtu: 4000, ..good },
            WireHeader {
                ring_off: [0; 4],
                ..good
            },
        ] {
            // SAFETY: as above; no handle reads the header after attach.
            unsafe { std::ptr::write(hdr, bad) };
            assert!(WireEnd::attach(region.dup_inheritable().unwrap(), Side::B).is_err());
        }
        // SAFETY: as above.
        unsafe { std::ptr::write(hdr, good) };
        assert!(WireEnd::attach(region.dup_inheritable().unwrap(), Side::B).is_ok());
        drop(a);
    }

    #[test]
    fn a_to_b_byte_exact_and_echo() {
        let (mut a, mut b) = WirePair::new(WireConfig::default()).unwrap();
        let frames: Vec<Desc> = (0..10)
            .map(|s| frame(&mut a, s, 60 + s as usize * 100))
            .collect();
        assert_eq!(a.send(&frames), 10);
        let mut rx = [Desc::default(); 32];
        assert_eq!(b.recv(&mut rx), 10);
        for (s, d) in rx[..10].iter().enumerate() {
            assert_eq!(*d, frames[s]);
            check(&b, *d, s as u32);
        }
        // Echo in place: flip the first byte, send the same buffers back.
        for d in &rx[..10] {
            b.buffers_mut().buf_mut(d.buf).unwrap()[0] ^= 0xff;
        }
        assert_eq!(b.send(&rx[..10]), 10);
        let mut back = [Desc::default(); 32];
        assert_eq!(a.recv(&mut back), 10);
        for (s, d) in back[..10].iter().enumerate() {
            assert_eq!(*d, frames[s]);
            let f = a.buffers().frame(*d).unwrap();
            assert_eq!(f[0], ((s * 31) as u8) ^ 0xff);
        }
        a.release(&back[..10]);
        assert_eq!(a.free_buffers(), 512);
        assert_eq!(a.stats().rx_bad_desc + b.stats().rx_bad_desc, 0);
    }

    #[test]
    fn conservation_over_many_rounds() {
        let cfg = WireConfig {
            buf_count: 64,
            ring_capacity: 16,
            ..WireConfig::default()
        };
        let (mut a, mut b) = WirePair::new(cfg).unwrap();
        let mut rng = 12345u32;
        let mut next = || {
            rng = rng.wrapping_mul(1_103_515_245).wrapping_add(12345);
            rng >> 16
        };
        let mut rx = [Desc::default(); 16];
        let mut ids = [0u32; 16];
        for _ in 0..2000 {
            for k in 0..2 {
                let (me, peer) = if k == 0 {
                    (&mut a, &mut b)
                } else {
                    (&mut b, &mut a)
                };
                let n = me.alloc(&mut ids[..(next() % 12) as usize]);
                let ds: Vec<Desc> = ids[..n].iter().map(|&i| Desc::new(i, 64)).collect();
                let sent = me.send(&ds);
                me.release(&ds[sent..]);
                let got = peer.recv(&mut rx[..(next() % 16) as usize]);
                // Echo some back, release the rest.
                let echo = (next() as usize % (got + 1)).min(got);
                let e = peer.send(&rx[..echo]);
                peer.release(&rx[e..got]);
            }
        }
        // Drain the data rings.
        for _ in 0..4 {
            for nic in [&mut a, &mut b] {
                let got = nic.recv(&mut rx);
                nic.release(&rx[..got]);
            }
        }
        let mut all = Vec::new();
        for nic in [&mut a, &mut b] {
            let mut ids = vec![0u32; 64];
            let n = nic.alloc(&mut ids);
            assert_eq!(n, 32, "{nic:?}");
            all.extend_from_slice(&ids[..n]);
            let s = nic.stats();
            assert_eq!(
                s.rx_bad_desc
                    + s.ret_bad
                    + s.release_bad
                    + s.tx_bad_desc
                    + s.ret_full
                    + s.ring_corrupt,
                0
            );
        }
        all.sort_unstable();
        assert_eq!(all, (0..64).collect::<Vec<_>>());
    }

    #[test]
    fn full_ring_partial_send() {
        let cfg = WireConfig {
            buf_count: 16,
            ring_capacity: 4,
            ..WireConfig::default()
        };
        let (mut a, mut b) = WirePair::new(cfg).unwrap();
        let ds: Vec<Desc> = (0..6).map(|s| frame(&mut a, s, 64)).collect();
        assert_eq!(a.send(&ds), 4);
        assert_eq!(a.stats().tx_full, 2);
        let mut rx = [Desc::default(); 8];
        assert_eq!(b.recv(&mut rx), 4);
        assert_eq!(a.send(&ds[4..]), 2);
        b.release(&rx[..4]);
        assert_eq!(b.recv(&mut rx), 2);
        b.release(&rx[..2]);
        let mut ids = [0u32; 8];
        assert_eq!(a.alloc(&mut ids), 8);
    }

    #[test]
    fn hostile_descriptors_are_dropped() {
        let cfg = WireConfig {
            buf_count: 16,
            ring_capacity: 16,
            ..WireConfig::default()
        };
        let (mut a, mut b) = WirePair::new(cfg).unwrap();
        // A (acting hostile) writes raw descriptors onto its data ring.
        let bad = [
            Desc::new(1000, 10), // index out of range
            Desc {
                buf: 2,
                off: 2000,
                len: 100,
            }, // off + len > buf size
            Desc::new(9, 10),    // one of B's buffers B never sent
            Desc::new(3, 10),    // fine
        ];
        assert_eq!(a.tx.push(&bad), 4);
        let mut rx = [Desc::default(); 8];
        assert_eq!(b.recv(&mut rx), 1);
        assert_eq!(rx[0], Desc::new(3, 10));
        assert_eq!(b.stats().rx_bad_desc, 3);
        // B's own buffer index on B's return ring (wrong half), and a bogus one.
        assert_eq!(a.ret_out.push(&[2, 12, 4000]), 3);
        let mut ids = [0u32; 9];
        assert_eq!(b.alloc(&mut ids), 8);
        assert_eq!(b.stats().ret_bad, 3);
        // A gets back buffers 2 (bad range, returned by B) and 3 (released).
        b.release(&rx[..1]);
        // Caller errors on send/release are counted, not fatal.
        assert_eq!(a.send(&[Desc::new(77, 1), Desc::new(0, 4000)]), 2);
        assert_eq!(a.stats().tx_bad_desc, 2);
        a.release(&[Desc::new(5, 1)]); // never allocated by the caller
        assert_eq!(a.stats().release_bad, 1);
        // A hostile producer index is refused.
        // SAFETY: test-only scribble on the ring header of data ring A→B: the
        // producer index lives at offset 64 of the ring (second cache line).
        unsafe {
            let p = a
                .region()
                .as_ptr()
                .add(layout(16, 2048, 16).0[RING_AB] as usize + 64);
            (*(p as *const std::sync::atomic::AtomicU32))
                .store(1 << 30, std::sync::atomic::Ordering::Release);
        }
        assert_eq!(b.recv(&mut rx), 0);
        assert!(b.stats().ring_corrupt > 0);
    }
}
