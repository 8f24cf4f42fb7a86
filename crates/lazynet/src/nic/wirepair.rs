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
//!
//! **Gather frames (ext area).** With [`WireConfig::ext_bytes`] > 0 the
//! region ends with an *ext area* (page-aligned, after the buffers) that side
//! A writes once through [`Nic::ext_area_mut`] (setup only) and then
//! transmits from by reference with [`Nic::send_gather`]: no copy, no
//! allocation, no system call on send. Only side A may transmit from it
//! (side B's `ext_capacity()` is 0); both sides can read it
//! ([`Nic::ext_bytes`]). A gather frame is two consecutive data-ring
//! entries, pushed in one batch (one producer-index store, so the consumer
//! sees both or neither; a pop batch may still end between them, in which
//! case the header waits in `pending` for the next pop):
//!
//! - the header: a normal descriptor with [`GATHER_HDR`] set in `buf`
//!   (bits 31..30 = `10`; real indices are < 2^22, so normal descriptors
//!   have `00` there);
//! - the ext entry: `buf` bits 31..30 = `11` ([`EXT_ENTRY`]), the ext offset
//!   (46 bits) in `buf` bits 29..0 (high part) and `off` (low 16 bits), the
//!   ext length in `len`.
//!
//! `01` in bits 31..30 is reserved (dropped). The receiver checks the header
//! like any descriptor and the ext slice against the ext length from its own
//! validated copy of the header; a lone ext entry, a header followed by
//! anything but an ext entry, an out-of-range slice are dropped and counted
//! (`rx_gather_bad`), the header buffer going back to its owner.
//!
//! `recv` still hands out contiguous frames: it *linearizes* a gather frame
//! by copying the ext bytes right after the header inside the header's
//! buffer (which it holds, exactly as for a normal frame). If the header
//! sits too far into its buffer, it copies header and ext bytes into one of
//! its own free buffers instead and returns the header buffer at once. If
//! neither fits (no free buffer, frame larger than a buffer) the frame is
//! dropped and counted (`rx_gather_dropped`). This one copy of the payload is
//! the receiver's cost; the sender pays none.

use std::io;
use std::mem::size_of;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use crate::mem::doorbell::{Doorbell, DOORBELL_BYTES};
use crate::mem::ring::{self, Consumer, Producer, Ring};
use crate::mem::{BufArea, Desc, Region};

use super::{ExtRef, Nic};

/// `"LZWP"`.
const WIRE_MAGIC: u32 = 0x4c5a_5750;
const WIRE_VERSION: u32 = 3;
/// How long [`Nic::wait`] polls before it sleeps: about what a sleep and
/// its wake-up cost on a KVM guest (a futex wake takes ~50 µs from the
/// waker's call to the sleeper running, `results/wakeup/`). Spinning for
/// the cost of blocking is the classic 2-competitive choice (Karlin, Li,
/// Manasse and Owicki, SOSP 1991): a peer that answers within it — a
/// request/response partner — is never slept on, and an idle end wastes at
/// most that per wait.
pub const SPIN_BEFORE_SLEEP_NS: u64 = 50_000;
/// Largest ext area (the offset has 46 bits in an ext entry).
pub const MAX_EXT_BYTES: u64 = 1 << 46;
/// Data-ring `buf` bits that mark gather entries (normal indices are < 2^22).
pub const KIND_MASK: u32 = 0xC000_0000;
/// `buf` bits of a gather header entry (the ext entry follows).
pub const GATHER_HDR: u32 = 0x8000_0000;
/// `buf` bits of an ext entry.
pub const EXT_ENTRY: u32 = 0xC000_0000;

/// The data-ring entry naming ext slice `e` (see the module docs).
#[inline]
pub fn ext_entry(e: ExtRef) -> Desc {
    Desc {
        buf: EXT_ENTRY | ((e.off >> 16) as u32 & !KIND_MASK),
        off: e.off as u16,
        len: e.len,
    }
}

/// The ext slice an ext entry names (its kind bits are not checked).
#[inline]
pub fn ext_of_entry(d: Desc) -> ExtRef {
    ExtRef {
        off: (((d.buf & !KIND_MASK) as u64) << 16) | d.off as u64,
        len: d.len,
    }
}
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
    /// Bytes of the ext area side A transmits from by reference (at most
    /// 2^46). Default 0: no ext area.
    pub ext_bytes: u64,
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
            ext_bytes: 0,
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
    /// Gather frames accepted by `send_gather` (also in `tx_frames`).
    pub tx_gather: u64,
    /// Gather frames `send_gather` refused: this end may not transmit from
    /// the ext area, the slice is out of range, the header is invalid, or the
    /// frame would not fit a buffer (the frame stays the caller's).
    pub tx_gather_bad: u64,
    /// Gather frames received and linearized (also in `rx_frames`).
    pub rx_gather: u64,
    /// Gather frames with a copy into one of our own buffers (header too far
    /// into its buffer to append the payload in place).
    pub rx_gather_copied: u64,
    /// Malformed gather entries from the peer (lone ext entry, header not
    /// followed by an ext entry, bad header, slice out of range); dropped.
    pub rx_gather_bad: u64,
    /// Well-formed gather frames dropped because they could not be
    /// linearized (larger than a buffer, or no free buffer for the copy).
    pub rx_gather_dropped: u64,
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
    ext_off: u64,
    ext_len: u64,
    total_len: u64,
}

const RING_AB: usize = 0;
const RING_BA: usize = 1;
const RET_A: usize = 2;
const RET_B: usize = 3;

/// Where the parts of a wire region lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    /// The two doorbells: A's receive ring (rung by B), then B's.
    bell_off: u64,
    ring_off: [u64; 4],
    ret_cap: u32,
    buf_off: u64,
    ext_off: u64,
    total: u64,
}

/// Computes the layout for validated parameters.
fn layout(buf_count: u32, buf_size: u32, ring_cap: u32, ext_len: u64) -> Layout {
    let ret_cap = (buf_count / 2).next_power_of_two();
    let bell_off = size_of::<WireHeader>().div_ceil(DOORBELL_BYTES) * DOORBELL_BYTES;
    let mut off = bell_off + 2 * DOORBELL_BYTES;
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
    let buf_end = buf_off as u64 + buf_count as u64 * buf_size as u64;
    let ext_off = buf_end.div_ceil(PAGE as u64) * PAGE as u64;
    let total = if ext_len == 0 {
        buf_end
    } else {
        ext_off + ext_len
    };
    Layout {
        bell_off: bell_off as u64,
        ring_off,
        ret_cap,
        buf_off: buf_off as u64,
        ext_off,
        total,
    }
}

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

fn check_params(
    buf_count: u32,
    buf_size: u32,
    ring_cap: u32,
    mtu: u32,
    ext_len: u64,
) -> io::Result<()> {
    if ext_len > MAX_EXT_BYTES {
        return Err(invalid("wire ext area must be at most 2^46 bytes"));
    }
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
        let (mut a, region) = Self::create(cfg)?;
        let mut b = WireEnd::from_region(region, Side::B)?;
        // One process: each end can also sleep in a poll of its own, on an
        // eventfd the other end's ring signals.
        let (ea, eb) = (
            Arc::new(crate::sys::EventFd::new()?),
            Arc::new(crate::sys::EventFd::new()?),
        );
        a.bell_tx = a.bell_tx.with_eventfd(eb.clone());
        b.bell_tx = b.bell_tx.with_eventfd(ea.clone());
        a.wake_fd = Some(ea);
        b.wake_fd = Some(eb);
        Ok((a, b))
    }

    /// Creates the region and end A. Hand `region.fd()` (a duplicate without
    /// `FD_CLOEXEC`) to another process, which calls [`WireEnd::attach`].
    pub fn create(cfg: WireConfig) -> io::Result<(WireEnd, Arc<Region>)> {
        check_params(
            cfg.buf_count,
            cfg.buf_size,
            cfg.ring_capacity,
            cfg.mtu,
            cfg.ext_bytes,
        )?;
        let Layout {
            ring_off,
            ret_cap,
            buf_off,
            ext_off,
            total,
            ..
        } = layout(
            cfg.buf_count,
            cfg.buf_size,
            cfg.ring_capacity,
            cfg.ext_bytes,
        );
        let len = usize::try_from(total).map_err(|_| invalid("wire too large"))?;
        let region = Region::create("lazynet-wirepair", len)?;
        init_rings(&region, &ring_off, cfg.ring_capacity, ret_cap)?;
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
            ext_off,
            ext_len: cfg.ext_bytes,
            total_len: total,
        };
        // SAFETY: the region is at least `total` > size_of::<WireHeader>()
        // bytes, page-aligned (mmap), and not yet shared with anyone.
        unsafe { std::ptr::write_volatile(region.as_ptr().cast::<WireHeader>(), hdr) };
        let a = WireEnd::from_region(region.clone(), Side::A)?;
        Ok((a, region))
    }

    /// Puts a wire made by [`WirePair::new`] back in its first state in the
    /// same region: both rings and both return rings empty, every buffer
    /// free at its owner, counters zero. Buffer contents are left as they
    /// were. For callers that run many short runs (the fuzzer):
    /// creating a region costs system calls and a page fault for every page
    /// it touches; a reset touches only the rings.
    ///
    /// Refused unless `a` and `b` are the two ends of one wire and nothing
    /// else in this process holds its region; a refused reset consumes the
    /// ends. A wire another process has attached to must not be reset: it
    /// would see its rings change under it.
    pub fn reset(a: WireEnd, b: WireEnd) -> io::Result<(WireEnd, WireEnd)> {
        if a.side != Side::A || b.side != Side::B || !Arc::ptr_eq(a.region(), b.region()) {
            return Err(invalid("not the two ends of one wire"));
        }
        let region = a.region().clone();
        drop((a, b));
        if Arc::strong_count(&region) != 1 {
            return Err(invalid("the wire's region is still in use"));
        }
        // The header was validated when the ends were built from it.
        let h = read_header(&region)?;
        init_rings(&region, &h.ring_off, h.ring_cap, h.ret_cap)?;
        let a = WireEnd::from_region(region.clone(), Side::A)?;
        let b = WireEnd::from_region(region, Side::B)?;
        Ok((a, b))
    }
}

/// Initialises the wire's four rings (both directions and both return
/// rings) empty. Only while no ring handle on them exists.
fn init_rings(
    region: &Arc<Region>,
    ring_off: &[u64; 4],
    ring_cap: u32,
    ret_cap: u32,
) -> io::Result<()> {
    Ring::<Desc>::init(region, ring_off[RING_AB] as usize, ring_cap)?;
    Ring::<Desc>::init(region, ring_off[RING_BA] as usize, ring_cap)?;
    Ring::<u32>::init(region, ring_off[RET_A] as usize, ret_cap)?;
    Ring::<u32>::init(region, ring_off[RET_B] as usize, ret_cap)?;
    Ok(())
}

/// A copy of the region's header (not yet validated).
fn read_header(region: &Region) -> io::Result<WireHeader> {
    if region.len() < size_of::<WireHeader>() {
        return Err(invalid("wire region too small"));
    }
    // SAFETY: the region holds at least a header; it is page-aligned
    // (mmap), so the pointer is aligned for WireHeader, and WireHeader is
    // plain integers, so any bytes are a valid value. We copy it once and
    // only use the copy.
    Ok(unsafe { std::ptr::read_volatile(region.as_ptr().cast::<WireHeader>()) })
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
    /// Byte offset of the ext area in the region (validated).
    ext_off: usize,
    /// Bytes of the ext area (0: none).
    ext_len: usize,
    /// A gather header popped without its ext entry (end of a pop batch);
    /// held, index already stripped of its kind bits, until the next entry.
    pending: Option<Desc>,
    /// Rung by the peer when it sends to us ([`Nic::wait`] sleeps on it).
    bell_rx: Doorbell,
    /// The peer's: rung after we send.
    bell_tx: Doorbell,
    /// Both ends in one process ([`WirePair::new`]): the eventfd the peer
    /// signals when we sleep in a `poll` of our own ([`Nic::wait_fd`]).
    wake_fd: Option<Arc<crate::sys::EventFd>>,
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
        let h = read_header(&region)?;
        if h.magic != WIRE_MAGIC || h.version != WIRE_VERSION {
            return Err(invalid("not a lazynet wire region"));
        }
        check_params(h.buf_count, h.buf_size, h.ring_cap, h.mtu, h.ext_len)?;
        let Layout {
            bell_off,
            ring_off,
            ret_cap,
            buf_off,
            ext_off,
            total,
        } = layout(h.buf_count, h.buf_size, h.ring_cap, h.ext_len);
        if h.ring_off != ring_off
            || h.ret_cap != ret_cap
            || h.buf_off != buf_off
            || h.ext_off != ext_off
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
        let bell =
            |i: usize| Doorbell::attach(region.clone(), bell_off as usize + i * DOORBELL_BYTES);
        let (bell_rx, bell_tx) = match side {
            Side::A => (bell(0)?, bell(1)?),
            Side::B => (bell(1)?, bell(0)?),
        };
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
            // Checked above: ext_off + ext_len = total <= region length.
            ext_off: ext_off as usize,
            ext_len: h.ext_len as usize,
            pending: None,
            bell_rx,
            bell_tx,
            wake_fd: None,
        })
    }

    /// The doorbell this end sleeps on in [`Nic::wait`]: another thread or
    /// process that wants this end's user to wake (a remote wake of its
    /// executor) rings it with [`Doorbell::wake`].
    pub fn doorbell(&self) -> Doorbell {
        self.bell_rx.clone()
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

    /// Receives and at once gives back up to about `max` frames without
    /// reading or copying them (gather frames are not linearized): a
    /// discarding sink, so that measurements see only the sender's path.
    /// Returns the frames discarded.
    pub fn discard(&mut self, max: usize) -> usize {
        let mut ents = [Desc::default(); 64];
        let mut rel = [Desc::default(); 64];
        let mut frames = 0;
        while frames < max {
            let n = self.rx.pop(&mut ents[..(max - frames).clamp(2, 64)]);
            if n == 0 {
                break;
            }
            let mut nr = 0;
            for &e in &ents[..n] {
                let h = match e.buf & KIND_MASK {
                    0 => e,
                    GATHER_HDR => Desc {
                        buf: e.buf & !KIND_MASK,
                        ..e
                    },
                    // Ext entries name no buffer; reserved kinds are dropped.
                    _ => continue,
                };
                if self.accept_rx(h) {
                    rel[nr] = h;
                    nr += 1;
                    frames += 1;
                } else {
                    self.stats.rx_bad_desc += 1;
                }
            }
            self.release(&rel[..nr]);
        }
        self.stats.rx_frames += frames as u64;
        frames
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
        let mut k = 0;
        // Entries are decoded in place: entry i yields at most one frame,
        // written to out[k] with k <= i. A gather pair takes two entries
        // for one frame, so pop again while there is room (a bounded number
        // of times, so a peer flooding bad entries cannot keep us here).
        for _ in 0..4 {
            if k == out.len() {
                break;
            }
            let n = self.rx.pop(&mut out[k..]);
            let first = k;
            for i in first..first + n {
                if let Some(d) = self.rx_entry(out[i]) {
                    out[k] = d;
                    k += 1;
                }
            }
            if n == 0 {
                break;
            }
        }
        self.stats.rx_frames += k as u64;
        k
    }

    fn rx_ready(&mut self) -> bool {
        // One acquire load of the peer's producer index.
        !self.rx.is_empty()
    }

    fn rx_probe(&self) -> Option<super::RxProbe> {
        let p = self.rx.probe();
        Some(Box::new(move || p.nonempty()))
    }

    fn wait_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.wake_fd.as_deref().map(crate::sys::EventFd::fd)
    }

    fn idle_spin_ns(&self) -> u64 {
        SPIN_BEFORE_SLEEP_NS
    }

    fn wait_begin(&mut self) -> bool {
        if self.wake_fd.is_none() || self.pending.is_some() {
            return self.pending.is_none();
        }
        self.bell_rx.begin_sleep();
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        if self.rx.is_empty() {
            true
        } else {
            self.bell_rx.end_sleep();
            false
        }
    }

    fn wait_end(&mut self) {
        self.bell_rx.end_sleep();
        if let Some(e) = &self.wake_fd {
            e.drain();
        }
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
        let n = self.send_frames(frames);
        // One load while the peer busy-polls; a wake if it sleeps.
        self.bell_tx.ring();
        n
    }

    fn doorbell(&self) -> Option<Doorbell> {
        Some(self.bell_rx.clone())
    }

    /// Waits for the peer's next frame: first polls for up to
    /// [`SPIN_BEFORE_SLEEP_NS`], then sleeps on the doorbell the peer rings
    /// when it sends. Without a timeout, 10 ms, as TAP's.
    fn wait(&mut self, timeout_ns: Option<u64>) {
        if self.pending.is_some() {
            return;
        }
        let timeout = timeout_ns.unwrap_or(10_000_000);
        let t0 = std::time::Instant::now();
        let spin = std::time::Duration::from_nanos(timeout.min(SPIN_BEFORE_SLEEP_NS));
        while t0.elapsed() < spin {
            if !self.rx.is_empty() {
                return;
            }
            std::hint::spin_loop();
        }
        let left = timeout.saturating_sub(t0.elapsed().as_nanos() as u64);
        if left == 0 {
            return;
        }
        self.bell_rx.arm();
        let rx = &mut self.rx;
        self.bell_rx.sleep(Some(left), || rx.is_empty());
    }

    /// The other end is another stack, normally on another core.
    fn cross_core_buffers(&self) -> bool {
        true
    }

    fn ext_capacity(&self) -> usize {
        match self.side {
            Side::A => self.ext_len,
            Side::B => 0,
        }
    }

    fn ext_area_mut(&mut self) -> Option<&mut [u8]> {
        if self.side != Side::A || self.ext_len == 0 {
            return None;
        }
        // SAFETY: inside the region and disjoint from the buffers (see
        // `ext_raw`); `&mut self` rules out other slices from this end. The
        // peer only reads the area, for frames sent after this setup step.
        Some(unsafe {
            std::slice::from_raw_parts_mut(
                self.area.region().as_ptr().add(self.ext_off),
                self.ext_len,
            )
        })
    }

    fn ext_bytes(&self) -> Option<&[u8]> {
        (self.ext_len > 0).then(|| self.ext_raw())
    }

    fn send_gather(&mut self, frames: &[(Desc, ExtRef)]) -> usize {
        let mut entries = [Desc::default(); 2 * BATCH];
        let mut done = 0;
        while done < frames.len() {
            // Whole pairs only: never publish a header without its ext entry.
            let room = self.tx.free() / 2;
            let mut n = 0;
            let mut bad = false;
            for &(h, e) in &frames[done..] {
                if n == BATCH || n == room {
                    break;
                }
                if !self.gather_ok(h, e) {
                    bad = true;
                    break;
                }
                entries[2 * n] = Desc {
                    buf: h.buf | GATHER_HDR,
                    ..h
                };
                entries[2 * n + 1] = ext_entry(e);
                n += 1;
            }
            // `free()` just refreshed the consumer index, so all 2n fit.
            let pushed = if n > 0 {
                self.tx.push(&entries[..2 * n]) / 2
            } else {
                0
            };
            for &(h, _) in &frames[done..done + pushed] {
                if let Some(s) = self.own(h.buf) {
                    self.state[s] = AT_PEER;
                }
            }
            self.stats.tx_frames += pushed as u64;
            self.stats.tx_gather += pushed as u64;
            done += pushed;
            if bad && pushed == n {
                self.stats.tx_gather_bad += 1;
                break;
            }
            if pushed < n || n == 0 {
                self.stats.tx_full += (frames.len() - done) as u64;
                break;
            }
        }
        done
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
    /// The ext area as a raw slice (length 0 if none). The returned slice's
    /// lifetime is not tied to `self` so that it can be read while a buffer
    /// is written; callers keep it local to one call.
    #[inline]
    fn ext_raw<'a>(&self) -> &'a [u8] {
        if self.ext_len == 0 {
            return &[];
        }
        // SAFETY: [ext_off, ext_off + ext_len) lies inside the region
        // (validated at attach: ext_off + ext_len == total <= region length)
        // and is disjoint from the buffers. The mapping lives as long as
        // `self.area` (an Arc), and callers use the slice only within one
        // method call. The ext area is written only during setup, through
        // `ext_area_mut` (side A); bytes are plain `u8`, so a hostile peer
        // writing concurrently can change values but not make this unsound
        // in practice (as for every shared buffer).
        unsafe {
            std::slice::from_raw_parts(self.area.region().as_ptr().add(self.ext_off), self.ext_len)
        }
    }

    /// Decodes one data-ring entry; returns the frame to hand out, if any.
    #[inline]
    fn rx_entry(&mut self, e: Desc) -> Option<Desc> {
        match e.buf & KIND_MASK {
            0 => {
                self.drop_pending();
                if self.accept_rx(e) {
                    Some(e)
                } else {
                    self.stats.rx_bad_desc += 1;
                    None
                }
            }
            GATHER_HDR => {
                self.drop_pending();
                self.pending = Some(Desc {
                    buf: e.buf & !KIND_MASK,
                    ..e
                });
                None
            }
            EXT_ENTRY => match self.pending.take() {
                Some(h) => self.rx_gather(h, ext_of_entry(e)),
                None => {
                    self.stats.rx_gather_bad += 1;
                    None
                }
            },
            _ => {
                self.drop_pending();
                self.stats.rx_bad_desc += 1;
                None
            }
        }
    }

    /// A pending gather header not followed by its ext entry: malformed;
    /// its buffer goes back to its owner.
    fn drop_pending(&mut self) {
        if let Some(h) = self.pending.take() {
            self.stats.rx_gather_bad += 1;
            if self.accept_rx(h) {
                self.release(&[h]);
            }
        }
    }

    /// Linearizes a gather frame (header `h`, kind bits stripped; slice `e`).
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn rx_gather(&mut self, h: Desc, e: ExtRef) -> Option<Desc> {
        if !self.accept_rx(h) {
            self.stats.rx_gather_bad += 1;
            return None;
        }
        // From here on we hold `h` like any received frame.
        let Some(src) = e.slice(self.ext_raw()) else {
            self.stats.rx_gather_bad += 1;
            self.release(&[h]);
            return None;
        };
        let bs = self.area.buf_size();
        let total = h.len as usize + src.len();
        if total > bs || total > u16::MAX as usize {
            self.stats.rx_gather_dropped += 1;
            self.release(&[h]);
            return None;
        }
        let start = h.off as usize + h.len as usize;
        if start + src.len() <= bs {
            // In place: append the payload to the header in its buffer.
            let buf = self.area.buf_mut(h.buf)?;
            buf[start..start + src.len()].copy_from_slice(src);
            self.stats.rx_gather += 1;
            return Some(Desc {
                len: total as u16,
                ..h
            });
        }
        // Copy header and payload into one of our own buffers.
        if self.free.is_empty() {
            self.refill();
        }
        let Some(nb) = self.free.pop() else {
            self.stats.rx_gather_dropped += 1;
            self.release(&[h]);
            return None;
        };
        if let Some(i) = self.own(nb) {
            self.state[i] = USER;
        }
        let hdr = self.area.frame(h).map(<[u8]>::as_ptr)?;
        let dst = self.area.buf_mut(nb)?;
        // SAFETY: `hdr` points at h.len valid bytes of buffer h.buf, which we
        // hold; `nb` is a different buffer (it was free, h is not), so the
        // ranges do not overlap; total <= buffer size.
        unsafe { std::ptr::copy_nonoverlapping(hdr, dst.as_mut_ptr(), h.len as usize) };
        dst[h.len as usize..total].copy_from_slice(src);
        self.release(&[h]);
        self.stats.rx_gather += 1;
        self.stats.rx_gather_copied += 1;
        Some(Desc::new(nb, total as u16))
    }

    /// True if this end may send gather frame `(h, e)`.
    #[inline]
    fn gather_ok(&self, h: Desc, e: ExtRef) -> bool {
        self.side == Side::A
            && self.tx_ok(h)
            && e.off
                .checked_add(e.len as u64)
                .is_some_and(|end| end <= self.ext_len as u64)
            && h.len as usize + e.len as usize <= self.area.buf_size().min(u16::MAX as usize)
    }

    /// Pushes the valid prefix runs of `frames` onto the ring (see
    /// [`Nic::send`]); invalid descriptors are consumed and counted.
    fn send_frames(&mut self, frames: &[Desc]) -> usize {
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
    fn reset_empties_the_rings_and_frees_every_buffer() {
        // Not two ends of one wire: refused.
        let (a, _) = WirePair::new(WireConfig::default()).unwrap();
        let (_, b) = WirePair::new(WireConfig::default()).unwrap();
        assert!(WirePair::reset(a, b).is_err());
        // A clone of the region still held: refused.
        let (a, b) = WirePair::new(WireConfig::default()).unwrap();
        let extra = a.region().clone();
        assert!(WirePair::reset(a, b).is_err());
        drop(extra);
        // Frames in flight both ways, buffers held by the user.
        let (mut a, mut b) = WirePair::new(WireConfig::default()).unwrap();
        let region = Arc::as_ptr(a.region());
        let fa: Vec<Desc> = (0..10).map(|s| frame(&mut a, s, 100)).collect();
        assert_eq!(a.send(&fa), 10);
        let fb = frame(&mut b, 1, 60);
        assert_eq!(b.send(&[fb]), 1);
        // Two of a's frames read and released by b: on a's return ring.
        let mut rx = [Desc::default(); 32];
        assert_eq!(b.recv(&mut rx[..2]), 2);
        b.release(&rx[..2]);
        let mut held = [0u32; 5];
        assert_eq!(a.alloc(&mut held), 5);
        let (mut a, mut b) = WirePair::reset(a, b).unwrap();
        assert_eq!(Arc::as_ptr(a.region()), region, "the same region");
        assert_eq!((a.recv(&mut rx), b.recv(&mut rx)), (0, 0));
        a.reclaim();
        b.reclaim();
        assert_eq!((a.free_buffers(), b.free_buffers()), (512, 512));
        assert_eq!(a.stats().ret_bad + b.stats().ret_bad, 0, "stale returns");
        assert_eq!(a.stats().tx_frames + b.stats().rx_frames, 0);
        // And it works as new.
        let f = frame(&mut a, 7, 300);
        assert_eq!(a.send(&[f]), 1);
        assert_eq!(b.recv(&mut rx), 1);
        check(&b, rx[0], 7);
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
                .add(layout(16, 2048, 16, 0).ring_off[RING_AB] as usize + 64);
            (*(p as *const std::sync::atomic::AtomicU32))
                .store(1 << 30, std::sync::atomic::Ordering::Release);
        }
        assert_eq!(b.recv(&mut rx), 0);
        assert!(b.stats().ring_corrupt > 0);
    }

    fn gather_pair() -> (WireEnd, WireEnd) {
        let cfg = WireConfig {
            buf_count: 16,
            ring_capacity: 16,
            ext_bytes: 10_000,
            ..WireConfig::default()
        };
        let (mut a, b) = WirePair::new(cfg).unwrap();
        for (k, x) in a.ext_area_mut().unwrap().iter_mut().enumerate() {
            *x = (k * 7 + 3) as u8;
        }
        (a, b)
    }

    fn hdr(buf: u32, off: u16, len: u16) -> Desc {
        Desc {
            buf: buf | GATHER_HDR,
            off,
            len,
        }
    }

    #[test]
    fn ext_entry_encoding_round_trips() {
        for off in [
            0u64,
            1,
            0xffff,
            0x1_0000,
            0x1234_5678_9abc,
            MAX_EXT_BYTES - 1,
        ] {
            let e = ExtRef { off, len: 1234 };
            let d = ext_entry(e);
            assert_eq!(d.buf & KIND_MASK, EXT_ENTRY);
            assert_eq!(ext_of_entry(d), e);
        }
        let big = WireConfig {
            ext_bytes: MAX_EXT_BYTES + 1,
            ..WireConfig::default()
        };
        assert!(WirePair::new(big).is_err());
    }

    #[test]
    fn hostile_gather_entries_are_dropped() {
        let (mut a, mut b) = gather_pair();
        let ext_len = 10_000u64;
        let ext = |off: u64, len: u16| ext_entry(ExtRef { off, len });
        // A (acting hostile) writes raw entries; A's buffers 0..8 are "at
        // the peer" as if sent.
        let mut ids = [0u32; 8];
        assert_eq!(a.alloc(&mut ids), 8);
        for s in a.state.iter_mut() {
            *s = AT_PEER;
        }
        let bad = [
            hdr(0, 0, 20),
            ext(ext_len, 1), // offset beyond the area
            hdr(1, 0, 20),
            ext(ext_len - 10, 20), // length beyond the area
            hdr(2, 0, 20),
            ext(MAX_EXT_BYTES - 1, 0xffff), // huge offset
            ext(0, 10),                     // lone ext entry
            hdr(3, 0, 20),
            Desc::new(4, 30), // header not followed by its ext entry
            hdr(5, 0, 20),
            hdr(6, 0, 2040),                // header replaced by another header
            ext(0, 100),                    // frame larger than a buffer
            Desc::new(7 | 0x4000_0000, 10), // reserved kind
            hdr(1000, 0, 10),               // header index out of range
            ext(0, 10),
        ];
        assert_eq!(a.tx.push(&bad), bad.len());
        let mut rx = [Desc::default(); 16];
        assert_eq!(b.recv(&mut rx), 1);
        assert_eq!(rx[0], Desc::new(4, 30));
        let s = b.stats();
        assert_eq!(s.rx_gather, 0);
        // ext beyond, len beyond, huge, lone, header 3, header 5, bad index.
        assert_eq!(s.rx_gather_bad, 7, "{s:?}");
        assert_eq!(s.rx_gather_dropped, 1, "{s:?}");
        assert_eq!(s.rx_bad_desc, 1, "{s:?}");
        b.release(&rx[..1]);
        // Every header buffer came back to A, except 7 (reserved entry: its
        // index is not trusted, so it stays lost, like any bad descriptor).
        a.reclaim();
        assert_eq!(a.free_buffers(), 7, "{a:?}");
        assert_eq!(a.stats().ret_bad, 0);
    }

    #[test]
    fn gather_header_waits_for_its_ext_entry() {
        let (mut a, mut b) = gather_pair();
        let mut ids = [0u32; 4];
        assert_eq!(a.alloc(&mut ids), 4);
        // Move the rings near the wrap point with normal frames.
        let mut rx = [Desc::default(); 16];
        for _ in 0..3 {
            let ds: Vec<Desc> = ids[..4].iter().map(|&i| Desc::new(i, 60)).collect();
            assert_eq!(a.send(&ds), 4);
            assert_eq!(b.recv(&mut rx), 4);
            assert_eq!(b.send(&rx[..4]), 4);
            assert_eq!(a.recv(&mut rx), 4);
        }
        // Ring indices are now 12 of 16; 3 pairs wrap around.
        let frames: Vec<(Desc, ExtRef)> = (0..3)
            .map(|k| {
                let buf = a.buffers_mut().buf_mut(ids[k]).unwrap();
                buf[..14].fill(k as u8);
                (
                    Desc::new(ids[k], 14),
                    ExtRef {
                        off: 1 + 100 * k as u64,
                        len: 50,
                    },
                )
            })
            .collect();
        assert_eq!(a.send_gather(&frames), 3);
        // One slot at a time: the header is held until its ext entry.
        let mut got = Vec::new();
        for _ in 0..10 {
            let n = b.recv(&mut rx[..1]);
            got.extend_from_slice(&rx[..n]);
        }
        assert_eq!(got.len(), 3);
        for (k, d) in got.iter().enumerate() {
            let f = b.buffers().frame(*d).unwrap();
            assert_eq!(&f[..14], &[k as u8; 14]);
            let e = &b.ext_bytes().unwrap()[1 + 100 * k..1 + 100 * k + 50];
            assert_eq!(&f[14..], e);
        }
        // A header whose ext entry is not yet published: nothing, then the frame.
        a.state[ids[3] as usize] = AT_PEER; // raw push: mark it sent by hand
        a.tx.push(&[hdr(ids[3], 0, 14)]);
        assert_eq!(b.recv(&mut rx), 0);
        a.tx.push(&[ext_entry(ExtRef { off: 5, len: 5 })]);
        assert_eq!(b.recv(&mut rx), 1);
        assert_eq!(rx[0].len, 19);
        got.push(rx[0]);
        b.release(&got);
        a.reclaim();
        assert_eq!(a.free_buffers(), 8);
        assert_eq!(b.stats().rx_gather, 4);
        assert_eq!(b.stats().rx_gather_bad, 0);
    }

    #[test]
    fn only_side_a_transmits_from_the_ext_area() {
        let (mut a, mut b) = gather_pair();
        assert_eq!(a.ext_capacity(), 10_000);
        assert_eq!(b.ext_capacity(), 0);
        assert!(b.ext_area_mut().is_none());
        assert_eq!(b.ext_bytes().unwrap()[..3], [3, 10, 17]);
        let mut ids = [0u32; 1];
        assert_eq!(b.alloc(&mut ids), 1);
        let f = (Desc::new(ids[0], 14), ExtRef { off: 0, len: 10 });
        assert_eq!(b.send_gather(&[f]), 0);
        assert_eq!(b.stats().tx_gather_bad, 1);
        b.release(&[f.0]);
        // A: the bad frame and what follows stay with the caller.
        let mut ids = [0u32; 3];
        assert_eq!(a.alloc(&mut ids), 3);
        let fr = [
            (Desc::new(ids[0], 14), ExtRef { off: 0, len: 10 }),
            (
                Desc::new(ids[1], 14),
                ExtRef {
                    off: 9_995,
                    len: 10,
                },
            ),
            (Desc::new(ids[2], 14), ExtRef { off: 0, len: 10 }),
        ];
        assert_eq!(a.send_gather(&fr), 1);
        assert_eq!(a.stats().tx_gather_bad, 1);
        // Too big for a buffer.
        let big = (Desc::new(ids[1], 14), ExtRef { off: 0, len: 2040 });
        assert_eq!(a.send_gather(&[big]), 0);
        assert_eq!(a.send_gather(&fr[2..]), 1);
        a.release(&[fr[1].0]);
        let mut rx = [Desc::default(); 4];
        assert_eq!(b.recv(&mut rx), 2);
        b.release(&rx[..2]);
        a.reclaim();
        assert_eq!(a.free_buffers(), 8);
    }
}
