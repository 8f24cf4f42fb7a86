//! An application's communication area: the one piece of memory a lazynet
//! daemon shares with one attached application process (RTU: one area per
//! process; pairwise sharing is what keeps it secure).
//!
//! **Owns:** the layout of that memory — a header, the two doorbells, the
//! rings between the two processes, one inbound ring and one ready flag per
//! channel slot, the published counters, and the application's buffer
//! pool — and the command and reply records that cross on its rings.
//!
//! **May not touch:** what the daemon or the application do with it. Both
//! sides compute every offset from the same small [`AreaParams`]; the
//! daemon, which creates the area, never reads the header back, and the
//! application checks it against its own computation before it trusts
//! anything ([`AppArea::open`]).
//!
//! Layout (every part 64-byte aligned, the pool page aligned):
//!
//! | part | written by | what |
//! |---|---|---|
//! | header | daemon, once | magic `"LZAA"`, version, the parameters, the length |
//! | published | daemon | commands applied, frames delivered, the application's counters |
//! | app bell | daemon rings, app sleeps | futex doorbell |
//! | daemon bell | app rings, daemon sleeps | doorbell whose wake is the daemon's eventfd |
//! | `free` ring | app → daemon | `u32` buffers the daemon may receive into |
//! | `tx` ring | app → daemon | [`Desc`] frames to transmit |
//! | `done` ring | daemon → app | `u32` buffers handed back (transmitted, or not needed) |
//! | `ready` ring | daemon → app | `u32` slots of notifying channels that got frames |
//! | `cmd` ring | app → daemon | [`Cmd`] bind and unbind requests |
//! | `reply` ring | daemon → app | [`Reply`] answers to the requests that need one |
//! | slots × ring | daemon → app | [`Desc`] frames for the socket bound to that slot |
//! | flags | both | one [`ReadyFlag`](super::ReadyFlag) byte per slot |
//! | pool | both | `bufs` buffers of `buf_size` bytes |
//!
//! Every ring is the ordinary SPSC ring ([`super::ring`]), hardened against
//! a peer that writes its indices: the daemon attaches all of its ends
//! before the application has the memory (the claim and the capacity are
//! read once), and an implausible index only counts as corrupt. Buffer
//! indices and descriptors are plain numbers checked against `bufs` and
//! `buf_size` wherever they are used.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::doorbell::DOORBELL_BYTES;
use super::ring::{layout_size, Pod};
use super::{BufArea, Desc, Region};

/// `"LZAA"`: an initialised communication area.
pub const AREA_MAGIC: u32 = u32::from_le_bytes(*b"LZAA");
/// Layout version of the area.
pub const AREA_VERSION: u32 = 1;
/// Most channel slots an area may have.
pub const MAX_SLOTS: u32 = 4096;
/// Most buffers an area may have (indices stay far below `u32` tags).
pub const MAX_BUFS: u32 = 1 << 20;
/// Counters the daemon publishes per application ([`AppCounter`]).
pub const COUNTERS: usize = 16;

/// The sizes an area is built from. Both sides derive the whole layout
/// from these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct AreaParams {
    /// Channel slots (a socket's channel id must be below this).
    pub slots: u32,
    /// Frames each slot's inbound ring holds (power of two).
    pub slot_cap: u32,
    /// Buffers in the pool.
    pub bufs: u32,
    /// Bytes per buffer.
    pub buf_size: u32,
    /// Capacity of the `free` ring (power of two).
    pub free_cap: u32,
    /// Capacity of the `tx` ring (power of two).
    pub tx_cap: u32,
    /// Capacity of the `done` ring (power of two, ≥ `bufs`: it holds every
    /// buffer, so handing one back never fails for an honest application).
    pub done_cap: u32,
    /// Capacity of the `ready` ring (power of two, ≥ `slots`).
    pub ready_cap: u32,
    /// Capacity of the `cmd` and `reply` rings (power of two).
    pub cmd_cap: u32,
}

impl Default for AreaParams {
    fn default() -> Self {
        // A slot per socket: a server's connections, its orphans among
        // them, and its listeners (4,094 at most, beside the control and
        // fragment slots).
        AreaParams {
            slots: 4096,
            slot_cap: 128,
            bufs: 4096,
            buf_size: 2048,
            free_cap: 512,
            tx_cap: 1024,
            done_cap: 4096,
            ready_cap: 4096,
            cmd_cap: 256,
        }
    }
}

impl AreaParams {
    /// Checks the bounds every part of the layout relies on.
    pub fn check(&self) -> io::Result<()> {
        let p2 = |v: u32| v.is_power_of_two() && v <= 1 << 20;
        let ok = (1..=MAX_SLOTS).contains(&self.slots)
            && (2..=MAX_BUFS).contains(&self.bufs)
            && (256..=65536).contains(&self.buf_size)
            && self.buf_size % 64 == 0
            && [
                self.slot_cap,
                self.free_cap,
                self.tx_cap,
                self.done_cap,
                self.ready_cap,
                self.cmd_cap,
            ]
            .into_iter()
            .all(p2)
            && self.done_cap >= self.bufs
            && self.ready_cap >= self.slots;
        if ok {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("implausible area parameters {self:?}"),
            ))
        }
    }
}

/// Byte offsets of every part, derived from [`AreaParams`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The parameters it was derived from.
    pub params: AreaParams,
    /// The published line.
    pub published: usize,
    /// The application's doorbell (the daemon rings it).
    pub app_bell: usize,
    /// The daemon's doorbell (the application rings it).
    pub daemon_bell: usize,
    /// `free` ring.
    pub free: usize,
    /// `tx` ring.
    pub tx: usize,
    /// `done` ring.
    pub done: usize,
    /// `ready` ring.
    pub ready: usize,
    /// `cmd` ring.
    pub cmd: usize,
    /// `reply` ring.
    pub reply: usize,
    /// First slot ring.
    pub slot0: usize,
    /// Bytes between slot rings.
    pub slot_stride: usize,
    /// First ready flag.
    pub flags: usize,
    /// First buffer.
    pub pool: usize,
    /// Total bytes.
    pub len: usize,
}

pub(super) const LINE: usize = 64;
pub(super) const PAGE: usize = 4096;
/// Bytes of the header (magic, version, parameters, length).
pub(super) const HEADER: usize = 128;

fn up(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

impl Layout {
    /// The layout of `p` (checked first).
    pub fn of(p: AreaParams) -> io::Result<Layout> {
        p.check()?;
        let mut at = HEADER;
        let mut take = |n: usize| {
            let o = up(at, LINE);
            at = o + n;
            o
        };
        let published = take(8 * (2 + COUNTERS));
        let app_bell = take(DOORBELL_BYTES);
        let daemon_bell = take(DOORBELL_BYTES);
        let free = take(layout_size::<u32>(p.free_cap));
        let tx = take(layout_size::<Desc>(p.tx_cap));
        let done = take(layout_size::<u32>(p.done_cap));
        let ready = take(layout_size::<u32>(p.ready_cap));
        let cmd = take(layout_size::<Cmd>(p.cmd_cap));
        let reply = take(layout_size::<Reply>(p.cmd_cap));
        let slot_stride = layout_size::<Desc>(p.slot_cap);
        let slot0 = take(slot_stride * p.slots as usize);
        let flags = take(p.slots as usize);
        let pool = up(at, PAGE);
        let len = up(pool + p.bufs as usize * p.buf_size as usize, PAGE);
        Ok(Layout {
            params: p,
            published,
            app_bell,
            daemon_bell,
            free,
            tx,
            done,
            ready,
            cmd,
            reply,
            slot0,
            slot_stride,
            flags,
            pool,
            len,
        })
    }

    /// Offset of slot `i`'s inbound ring (`i < slots`).
    pub fn slot(&self, i: u32) -> usize {
        debug_assert!(i < self.params.slots);
        self.slot0 + i as usize * self.slot_stride
    }
}

// SAFETY: nine `u32`: 36 bytes, 4-aligned, no padding, any bits valid.
unsafe impl Pod for AreaParams {}

/// The header of an area (a communication area, a job area) as it lies at
/// offset 0: what it is, its version, the parameters its layout derives
/// from, and its length.
#[repr(C)]
#[derive(Clone, Copy)]
struct Header<P> {
    magic: u32,
    version: u32,
    params: P,
    len: u64,
}

/// Writes the header of a new area (`region` is at least [`HEADER`] bytes
/// and nobody else has it yet).
pub(super) fn write_header<P: Pod>(
    region: &Region,
    magic: u32,
    version: u32,
    params: P,
    len: usize,
) {
    let h = Header {
        magic,
        version,
        params,
        len: len as u64,
    };
    assert!(std::mem::size_of::<Header<P>>() <= HEADER && region.len() >= HEADER);
    // SAFETY: the region holds at least HEADER bytes (asserted), which the
    // header fits; it is page aligned. Written unaligned-safe; the header
    // is plain integers.
    unsafe { std::ptr::write_unaligned(region.as_ptr().cast::<Header<P>>(), h) };
}

/// Reads and checks the header of an area another process handed over:
/// its magic and version must be `magic` and `version`, and the length it
/// states, `layout_len(params)`, and the region's own length must agree.
/// Returns the parameters and the layout's length.
pub(super) fn read_header<P: Pod>(
    region: &Region,
    magic: u32,
    version: u32,
    what: &str,
    layout_len: impl FnOnce(P) -> io::Result<usize>,
) -> io::Result<P> {
    let bad = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
    if region.len() < HEADER || std::mem::size_of::<Header<P>>() > HEADER {
        return Err(bad(format!("{what} shorter than its header")));
    }
    // SAFETY: HEADER bytes are mapped (checked above) and the header fits
    // them; it is plain integers and `P: Pod`, valid for any bytes; read
    // by value.
    let h = unsafe { std::ptr::read_volatile(region.as_ptr().cast::<Header<P>>()) };
    if h.magic != magic || h.version != version {
        return Err(bad(format!("not a lazynet {what} of this version")));
    }
    let len = layout_len(h.params)?;
    if h.len != len as u64 || region.len() != len {
        return Err(bad(format!("{what} length does not match its parameters")));
    }
    Ok(h.params)
}

/// A request from the application to the daemon (on the `cmd` ring).
/// Addresses and ports are host-order numbers.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cmd {
    /// The application's sequence number (replies carry it back).
    pub seq: u32,
    /// What ([`Op`] as a number; anything else is refused).
    pub op: u32,
    /// The channel slot the socket's frames go to.
    pub slot: u32,
    /// The application's id of the channel (what goes on the `ready` ring).
    pub id: u32,
    /// Local address (0: any of ours).
    pub laddr: u32,
    /// Remote address (connections).
    pub raddr: u32,
    /// Local port.
    pub lport: u16,
    /// Remote port (connections).
    pub rport: u16,
    /// Zero.
    pub pad: u32,
}

// SAFETY: seven `u32` and two `u16`: no padding (32 bytes, 4-aligned) and
// every bit pattern is a valid value.
unsafe impl Pod for Cmd {}
const _: () = assert!(std::mem::size_of::<Cmd>() == 32);

/// The daemon's answer to a [`Cmd`] that needs one ([`Op::needs_reply`]),
/// and to every command it refused.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reply {
    /// The command's sequence number.
    pub seq: u32,
    /// 0, or the refusal ([`Refusal`] as a number).
    pub code: u32,
    /// The command's channel id ([`Cmd::id`]): which socket a refusal of
    /// a command that was not waited for is about.
    pub id: u32,
    /// The command's operation ([`Cmd::op`]).
    pub op: u32,
}

// SAFETY: four `u32`: no padding, any bits valid.
unsafe impl Pod for Reply {}

/// Command operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Op {
    /// Bind a UDP port (reply).
    BindUdp = 1,
    /// Unbind it.
    UnbindUdp = 2,
    /// Listen on a TCP port (reply).
    Listen = 3,
    /// Stop listening.
    Unlisten = 4,
    /// A TCP connection's 4-tuple (no reply: its local port is the
    /// application's own).
    Conn = 5,
    /// Remove a connection's 4-tuple.
    Unconn = 6,
}

impl Op {
    /// The operation a number names.
    pub fn from_u32(v: u32) -> Option<Op> {
        Some(match v {
            1 => Op::BindUdp,
            2 => Op::UnbindUdp,
            3 => Op::Listen,
            4 => Op::Unlisten,
            5 => Op::Conn,
            6 => Op::Unconn,
            _ => return None,
        })
    }

    /// True for the requests the application waits for.
    pub fn needs_reply(self) -> bool {
        matches!(self, Op::BindUdp | Op::Listen)
    }
}

/// Why the daemon refused a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Refusal {
    /// The port is another application's (or bound already).
    InUse = 1,
    /// The address is not the daemon's.
    NotOurAddress = 2,
    /// Slot, operation or port out of range.
    Invalid = 3,
    /// The daemon's tables are full.
    Full = 4,
}

impl Refusal {
    /// The refusal a reply code names (`None` for 0, accepted).
    pub fn from_code(c: u32) -> Option<Refusal> {
        Some(match c {
            0 => return None,
            1 => Refusal::InUse,
            2 => Refusal::NotOurAddress,
            4 => Refusal::Full,
            _ => Refusal::Invalid,
        })
    }
}

/// The counters the daemon publishes in an application's area (and
/// answers `lazynet stats` with). Index into [`Published::counter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum AppCounter {
    /// Frames copied into the application's area.
    Delivered = 0,
    /// Frames dropped because the slot's ring was full (early discard).
    DropSlotFull,
    /// Frames dropped because the application gave no free buffer.
    DropNoBuffer,
    /// Frames the application asked to send.
    TxFrames,
    /// Descriptors on `tx`, `free` or `cmd` naming nothing in the area.
    BadDescriptor,
    /// Frames refused for a source the application does not own: not our
    /// MAC or address, ARP that does not speak as us, a protocol other
    /// than TCP, UDP and ICMP, or headers that do not parse.
    TxSpoofed,
    /// Frames the NIC would not take (dropped after retries).
    TxDropped,
    /// Commands refused.
    CmdRefused,
    /// Ring indices the application wrote that made no sense.
    RingCorrupt,
    /// Buffers the daemon could not hand back (`done` full).
    DoneFull,
    /// Reassembled datagrams that could not be handed on, whole or as
    /// fragments of the area's buffers (empty, or beyond IPv4's 64 KiB),
    /// and frames larger than one of its buffers.
    DropTooBig,
    /// TCP or UDP frames from a port the application does not hold.
    TxBadPort,
    /// ICMP that is not an error about a datagram of the application's
    /// own flows (sent back to the flow's peer).
    TxBadIcmp,
    /// A later fragment of no datagram whose first fragment the
    /// application sent.
    TxBadFragment,
}

impl AppCounter {
    /// Every counter, in order.
    pub const ALL: [AppCounter; 14] = [
        AppCounter::Delivered,
        AppCounter::DropSlotFull,
        AppCounter::DropNoBuffer,
        AppCounter::TxFrames,
        AppCounter::BadDescriptor,
        AppCounter::TxSpoofed,
        AppCounter::TxDropped,
        AppCounter::CmdRefused,
        AppCounter::RingCorrupt,
        AppCounter::DoneFull,
        AppCounter::DropTooBig,
        AppCounter::TxBadPort,
        AppCounter::TxBadIcmp,
        AppCounter::TxBadFragment,
    ];

    /// A short stable name.
    pub const fn name(self) -> &'static str {
        match self {
            AppCounter::Delivered => "delivered",
            AppCounter::DropSlotFull => "drop_slot_full",
            AppCounter::DropNoBuffer => "drop_no_buffer",
            AppCounter::TxFrames => "tx_frames",
            AppCounter::BadDescriptor => "bad_descriptor",
            AppCounter::TxSpoofed => "tx_spoofed",
            AppCounter::TxDropped => "tx_dropped",
            AppCounter::CmdRefused => "cmd_refused",
            AppCounter::RingCorrupt => "ring_corrupt",
            AppCounter::DoneFull => "done_full",
            AppCounter::DropTooBig => "drop_too_big",
            AppCounter::TxBadPort => "tx_bad_port",
            AppCounter::TxBadIcmp => "tx_bad_icmp",
            AppCounter::TxBadFragment => "tx_bad_fragment",
        }
    }
}

/// The published line: running totals the daemon stores and the
/// application reads (the daemon keeps its own copies and never reads
/// these back).
#[repr(C)]
pub struct Published {
    applied: AtomicU64,
    delivered: AtomicU64,
    counters: [AtomicU64; COUNTERS],
}

impl Published {
    /// Commands applied (`Release` by the daemon after their effects).
    pub fn applied(&self) -> u64 {
        self.applied.load(Ordering::Acquire)
    }

    /// Daemon: `n` commands applied.
    pub fn set_applied(&self, n: u64) {
        self.applied.store(n, Ordering::Release);
    }

    /// Batches of frames delivered so far (the application's "anything
    /// new since I last looked").
    pub fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Acquire)
    }

    /// Daemon: publishes the delivery count (after the frames).
    pub fn set_delivered(&self, n: u64) {
        self.delivered.store(n, Ordering::Release);
    }

    /// One counter.
    pub fn counter(&self, c: AppCounter) -> u64 {
        self.counters[c as usize].load(Ordering::Relaxed)
    }

    /// Daemon: stores one counter's running total.
    pub fn set_counter(&self, c: AppCounter, v: u64) {
        self.counters[c as usize].store(v, Ordering::Relaxed);
    }

    /// Counter `i` (another area kind's numbering; 0 if out of range).
    pub fn counter_at(&self, i: usize) -> u64 {
        self.counters
            .get(i)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Daemon: stores counter `i` (ignored if out of range).
    pub fn set_counter_at(&self, i: usize, v: u64) {
        if let Some(c) = self.counters.get(i) {
            c.store(v, Ordering::Relaxed);
        }
    }
}

/// One application's communication area, mapped.
#[derive(Clone, Debug)]
pub struct AppArea {
    region: Arc<Region>,
    layout: Layout,
}

impl AppArea {
    /// Daemon: a new area (sealed memfd, `name` for `/proc`), its rings
    /// initialised and its header written. Attach the daemon's ring ends
    /// before handing the memfd to the application.
    pub fn create(name: &str, params: AreaParams) -> io::Result<AppArea> {
        let layout = Layout::of(params)?;
        let region = Region::create_sealed(name, layout.len)?;
        use super::ring::Ring;
        let p = &params;
        Ring::<u32>::init(&region, layout.free, p.free_cap)?;
        Ring::<Desc>::init(&region, layout.tx, p.tx_cap)?;
        Ring::<u32>::init(&region, layout.done, p.done_cap)?;
        Ring::<u32>::init(&region, layout.ready, p.ready_cap)?;
        Ring::<Cmd>::init(&region, layout.cmd, p.cmd_cap)?;
        Ring::<Reply>::init(&region, layout.reply, p.cmd_cap)?;
        for i in 0..p.slots {
            Ring::<Desc>::init(&region, layout.slot(i), p.slot_cap)?;
        }
        write_header(&region, AREA_MAGIC, AREA_VERSION, params, layout.len);
        Ok(AppArea { region, layout })
    }

    /// Application: maps the area the daemon handed over. Refused unless
    /// it is size-sealed, its header names this version, its parameters are
    /// plausible and its length is what they give.
    pub fn open(fd: std::os::fd::OwnedFd) -> io::Result<AppArea> {
        let region = Region::open_sealed(fd)?;
        let p = read_header(
            &region,
            AREA_MAGIC,
            AREA_VERSION,
            "communication area",
            |p| Layout::of(p).map(|l| l.len),
        )?;
        let layout = Layout::of(p)?;
        Ok(AppArea { region, layout })
    }

    /// The mapped memory.
    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The parameters.
    pub fn params(&self) -> &AreaParams {
        &self.layout.params
    }

    /// The buffer pool, as a [`BufArea`] (indices `0..bufs`).
    pub fn bufs(&self) -> io::Result<BufArea> {
        let p = self.params();
        BufArea::new(self.region.clone(), self.layout.pool, p.buf_size, p.bufs)
    }

    /// The published line.
    pub fn published(&self) -> &Published {
        // SAFETY: the layout places the line inside the region (it was
        // checked against the region's length), 64-byte aligned; it is
        // atomics only, valid for any bytes and only accessed atomically.
        unsafe {
            &*self
                .region
                .as_ptr()
                .add(self.layout.published)
                .cast::<Published>()
        }
    }

    /// The application's doorbell (the daemon rings it after delivering).
    pub fn app_bell(&self) -> io::Result<super::Doorbell> {
        super::Doorbell::attach(self.region.clone(), self.layout.app_bell)
    }

    /// The daemon's doorbell (the application rings it after publishing
    /// on `tx`, `free` or `cmd`), waking through `waker`.
    pub fn daemon_bell(&self, waker: Arc<crate::sys::EventFd>) -> io::Result<super::Doorbell> {
        Ok(
            super::Doorbell::attach(self.region.clone(), self.layout.daemon_bell)?
                .with_eventfd(waker),
        )
    }

    /// Slot `i`'s ready flag.
    pub fn flag(&self, i: u32) -> io::Result<super::FlagRef> {
        if i >= self.params().slots {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no such slot"));
        }
        super::FlagRef::in_region(&self.region, self.layout.flags + i as usize)
    }

    /// Whether a descriptor names bytes inside one buffer of the pool.
    #[inline]
    pub fn valid(&self, d: Desc) -> bool {
        let p = self.params();
        d.buf < p.bufs && d.off as u32 + d.len as u32 <= p.buf_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::{Consumer, Producer};

    #[test]
    fn layout_parts_do_not_overlap_and_fit() {
        let l = Layout::of(AreaParams::default()).unwrap();
        let p = l.params;
        let mut parts = vec![
            (0, HEADER),
            (l.published, 8 * (2 + COUNTERS)),
            (l.app_bell, DOORBELL_BYTES),
            (l.daemon_bell, DOORBELL_BYTES),
            (l.free, layout_size::<u32>(p.free_cap)),
            (l.tx, layout_size::<Desc>(p.tx_cap)),
            (l.done, layout_size::<u32>(p.done_cap)),
            (l.ready, layout_size::<u32>(p.ready_cap)),
            (l.cmd, layout_size::<Cmd>(p.cmd_cap)),
            (l.reply, layout_size::<Reply>(p.cmd_cap)),
            (l.slot0, l.slot_stride * p.slots as usize),
            (l.flags, p.slots as usize),
            (l.pool, (p.bufs * p.buf_size) as usize),
        ];
        parts.sort();
        for w in parts.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "{:?} overlaps {:?}", w[0], w[1]);
        }
        assert!(l.pool % PAGE == 0);
        let last = parts.last().unwrap();
        assert!(last.0 + last.1 <= l.len);
    }

    #[test]
    fn implausible_parameters_are_refused() {
        let good = AreaParams::default();
        for bad in [
            AreaParams { slots: 0, ..good },
            AreaParams {
                slot_cap: 3,
                ..good
            },
            AreaParams {
                bufs: MAX_BUFS + 1,
                ..good
            },
            AreaParams {
                buf_size: 100,
                ..good
            },
            AreaParams {
                done_cap: 1024,
                ..good
            },
            AreaParams {
                ready_cap: 128,
                ..good
            },
        ] {
            assert!(Layout::of(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_application_sees_what_the_daemon_built() {
        let a = AppArea::create("area-test", AreaParams::default()).unwrap();
        let mut tx_c = Consumer::<Desc>::attach(a.region(), a.layout().tx).unwrap();
        let fd = a.region().dup_inheritable().unwrap();
        let b = AppArea::open(fd).unwrap();
        assert_eq!(a.layout(), b.layout());
        let mut tx_p = Producer::<Desc>::attach(b.region(), b.layout().tx).unwrap();
        assert!(tx_p.push_one(Desc::new(7, 60)).is_ok());
        assert_eq!(tx_c.pop_one(), Some(Desc::new(7, 60)));
        a.published().set_applied(3);
        assert_eq!(b.published().applied(), 3);
        assert!(b.flag(0).unwrap().arm());
        assert!(!a.flag(0).unwrap().arm());
        assert!(a.flag(a.params().slots).is_err());
        assert!(a.valid(Desc::new(4095, 2048)) && !a.valid(Desc::new(4096, 1)));
        assert!(!a.valid(Desc {
            buf: 0,
            off: 2000,
            len: 100
        }));
    }

    #[test]
    fn an_area_that_is_not_sealed_or_lies_about_its_size_is_refused() {
        let r = Region::create("area-test", 1 << 20).unwrap();
        assert!(AppArea::open(r.dup_inheritable().unwrap()).is_err());
        let r = Region::create_sealed("area-test", 1 << 20).unwrap();
        // Zeroed: no magic.
        assert!(AppArea::open(r.dup_inheritable().unwrap()).is_err());
    }
}
