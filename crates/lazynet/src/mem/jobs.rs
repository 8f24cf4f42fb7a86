//! A job area: the memory a lazynet daemon in the offload placement shares
//! with one MemNet client process (MemNet §5.1: each client's channels and
//! its registered memory; RTU: one area per process).
//!
//! **Owns:** the layout of that memory — a header, the published counters,
//! the two doorbells, the request ring, the completion ring and the data
//! section that registered memory is carved from — the request and
//! completion records, and [`Span`], the checked byte access to the data
//! section.
//!
//! **May not touch:** what the records mean to the daemon's stack or the
//! client's jobs (`daemon::offload`, `memnet`). As with [`super::area`],
//! both sides derive every offset from [`JobParams`]; the daemon creates
//! the area and never reads the header back; the client checks it before
//! trusting anything.
//!
//! | part | written by | what |
//! |---|---|---|
//! | header | daemon, once | magic `"LZJA"`, version, the parameters, the length |
//! | published | daemon | requests taken, completions posted, the client's counters |
//! | app bell | daemon rings, client sleeps | futex doorbell (`job_wait`) |
//! | daemon bell | client rings, daemon sleeps | doorbell whose wake is the daemon's eventfd |
//! | `req` ring | client → daemon | [`Req`] requests (jobs) |
//! | `cpl` ring | daemon → client | [`Cpl`] completions; its capacity is the client's credits |
//! | data | both | `data_bytes` of memory for registered ranges (page aligned) |
//!
//! Credits: the daemon takes a request only while the completion ring has
//! room for the completion of every job it holds plus this one, so the
//! completion ring never overflows and a client has at most `credits` jobs
//! in flight, whatever it writes (the paper's flow control by RDMA
//! signalling, with the ring's free space as the signal).

use std::io;
use std::sync::Arc;

use super::area::{read_header, write_header, Published, HEADER, LINE, PAGE};
use super::doorbell::{Doorbell, DOORBELL_BYTES};
use super::ring::{layout_size, Pod, Ring};
use super::Region;

/// `"LZJA"`: an initialised job area.
pub const JOB_MAGIC: u32 = u32::from_le_bytes(*b"LZJA");
/// Layout version of the job area.
pub const JOB_VERSION: u32 = 1;
/// Largest data section (1 GiB).
pub const MAX_DATA: u32 = 1 << 30;

/// The sizes a job area is built from, and the daemon's per-client bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct JobParams {
    /// Capacity of the request ring (power of two).
    pub req_cap: u32,
    /// Capacity of the completion ring (power of two): jobs in flight, at most.
    pub credits: u32,
    /// Bytes of the data section (a multiple of 4096).
    pub data_bytes: u32,
    /// Registered ranges the client may hold at once.
    pub max_regions: u32,
    /// Sockets (listeners and connections) the client may hold at once.
    pub max_socks: u32,
}

impl Default for JobParams {
    fn default() -> Self {
        JobParams {
            req_cap: 256,
            credits: 128,
            data_bytes: 16 << 20,
            max_regions: 4096,
            max_socks: 1024,
        }
    }
}

impl JobParams {
    /// Checks the bounds every part of the layout relies on.
    pub fn check(&self) -> io::Result<()> {
        let p2 = |v: u32| v.is_power_of_two() && (2..=1 << 16).contains(&v);
        let ok = p2(self.req_cap)
            && p2(self.credits)
            && self.data_bytes >= PAGE as u32
            && self.data_bytes <= MAX_DATA
            && self.data_bytes % PAGE as u32 == 0
            && (1..=1 << 16).contains(&self.max_regions)
            && (1..=1 << 16).contains(&self.max_socks);
        if ok {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("implausible job area parameters {self:?}"),
            ))
        }
    }
}

/// Byte offsets of every part, derived from [`JobParams`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobLayout {
    /// The parameters it was derived from.
    pub params: JobParams,
    /// The published line.
    pub published: usize,
    /// The client's doorbell (the daemon rings it after completing).
    pub app_bell: usize,
    /// The daemon's doorbell (the client rings it after posting).
    pub daemon_bell: usize,
    /// `req` ring.
    pub req: usize,
    /// `cpl` ring.
    pub cpl: usize,
    /// The data section.
    pub data: usize,
    /// Total bytes.
    pub len: usize,
}

impl JobLayout {
    /// The layout of `p` (checked first).
    pub fn of(p: JobParams) -> io::Result<JobLayout> {
        p.check()?;
        let mut at = HEADER;
        let mut take = |n: usize| {
            let o = at.div_ceil(LINE) * LINE;
            at = o + n;
            o
        };
        let published = take(std::mem::size_of::<Published>());
        let app_bell = take(DOORBELL_BYTES);
        let daemon_bell = take(DOORBELL_BYTES);
        let req = take(layout_size::<Req>(p.req_cap));
        let cpl = take(layout_size::<Cpl>(p.credits));
        let data = at.div_ceil(PAGE) * PAGE;
        Ok(JobLayout {
            params: p,
            published,
            app_bell,
            daemon_bell,
            req,
            cpl,
            data,
            len: data + p.data_bytes as usize,
        })
    }
}

// SAFETY: five `u32`: 20 bytes, 4-aligned, no padding, any bits valid.
unsafe impl Pod for JobParams {}

/// A request (a job) from the client. Addresses and ports are host-order
/// numbers; which fields count depends on [`ReqOp`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Req {
    /// The client's job id (the completion carries it back).
    pub job: u32,
    /// What ([`ReqOp`] as a number; anything else fails the job).
    pub op: u32,
    /// The socket (the daemon's id for it).
    pub sock: u32,
    /// A registered range ([`ReqOp::Send`], [`ReqOp::Recv`], [`ReqOp::Deregister`]).
    pub handle: u32,
    /// Offset: inside the range, or of the range in the data section ([`ReqOp::Register`]).
    pub off: u32,
    /// Length in bytes (or the backlog of [`ReqOp::Listen`]).
    pub len: u32,
    /// Remote address ([`ReqOp::Connect`]).
    pub addr: u32,
    /// Local ([`ReqOp::Listen`]) or remote ([`ReqOp::Connect`]) port.
    pub port: u16,
    /// Zero.
    pub flags: u16,
}

// SAFETY: seven `u32` and two `u16`: 32 bytes, 4-aligned, no padding, any
// bits valid.
unsafe impl Pod for Req {}
const _: () = assert!(std::mem::size_of::<Req>() == 32);

/// The daemon's answer to one [`Req`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cpl {
    /// The request's job id.
    pub job: u32,
    /// 0, or the failure ([`JobError`] as a number).
    pub code: u32,
    /// Bytes moved, or the new socket or range id.
    pub value: u64,
}

// SAFETY: two `u32` and a `u64`: 16 bytes, 8-aligned, no padding, any bits
// valid.
unsafe impl Pod for Cpl {}
const _: () = assert!(std::mem::size_of::<Cpl>() == 16);

/// Request operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ReqOp {
    /// Nothing (completes at once; measures the round trip).
    Nop = 1,
    /// Registers `len` bytes at `off` of the data section → a range id.
    Register = 2,
    /// Deregisters range `handle`; its unfinished jobs fail.
    Deregister = 3,
    /// Listens on TCP `port` (backlog `len`, 0: the default) → a socket.
    Listen = 4,
    /// Takes one connection from listener `sock` (waits for one) → a socket.
    Accept = 5,
    /// Connects to `addr:port` (waits for the handshake) → a socket.
    Connect = 6,
    /// Sends `len` bytes at `off` of range `handle` (waits until TCP holds
    /// all of them) → bytes.
    Send = 7,
    /// Receives up to `len` bytes into `off` of range `handle` (waits for
    /// some) → bytes, 0 at the end of the stream.
    Recv = 8,
    /// Closes socket `sock` (the connection finishes in the background).
    Close = 9,
    /// Sends FIN on connection `sock` (no more sends).
    Shutdown = 10,
    /// Switches Nagle's algorithm off (`len` 1) or on (`len` 0) on
    /// connection `sock`.
    SetNodelay = 11,
}

impl ReqOp {
    /// The operation a number names.
    pub fn from_u32(v: u32) -> Option<ReqOp> {
        Some(match v {
            1 => ReqOp::Nop,
            2 => ReqOp::Register,
            3 => ReqOp::Deregister,
            4 => ReqOp::Listen,
            5 => ReqOp::Accept,
            6 => ReqOp::Connect,
            7 => ReqOp::Send,
            8 => ReqOp::Recv,
            9 => ReqOp::Close,
            10 => ReqOp::Shutdown,
            11 => ReqOp::SetNodelay,
            _ => return None,
        })
    }
}

/// Why a job failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum JobError {
    /// Unknown operation or implausible arguments.
    Invalid = 1,
    /// The socket id names nothing of this client's (or the wrong kind).
    BadSocket = 2,
    /// The range id names nothing of this client's.
    BadHandle = 3,
    /// Offset and length do not lie inside the range (or the data section).
    BadRange = 4,
    /// A per-client table is full (sockets, ranges).
    Full = 5,
    /// The port is taken.
    AddrInUse = 6,
    /// The peer refused the connection.
    ConnectionRefused = 7,
    /// The peer reset the connection.
    ConnectionReset = 8,
    /// The socket is not connected (or was shut down for sending).
    NotConnected = 9,
    /// The job's range was deregistered before it finished.
    Deregistered = 10,
    /// The connection timed out.
    TimedOut = 11,
    /// No route to the address.
    NoRoute = 12,
    /// The job's socket was closed before it finished.
    Closed = 13,
}

impl JobError {
    /// The failure a completion code names (`None` for 0, success).
    pub fn from_code(c: u32) -> Option<JobError> {
        Some(match c {
            0 => return None,
            2 => JobError::BadSocket,
            3 => JobError::BadHandle,
            4 => JobError::BadRange,
            5 => JobError::Full,
            6 => JobError::AddrInUse,
            7 => JobError::ConnectionRefused,
            8 => JobError::ConnectionReset,
            9 => JobError::NotConnected,
            10 => JobError::Deregistered,
            11 => JobError::TimedOut,
            12 => JobError::NoRoute,
            13 => JobError::Closed,
            _ => JobError::Invalid,
        })
    }
}

impl std::fmt::Display for JobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for JobError {}

/// The counters the daemon publishes in a job area (index into
/// [`Published::counter_at`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum JobCounter {
    /// Requests taken from the ring.
    Requests = 0,
    /// Jobs completed successfully.
    Completed,
    /// Jobs failed ([`JobError`]).
    Failed,
    /// Requests naming an unknown socket, range or operation, or a byte
    /// range outside its registration.
    BadRequest,
    /// Ring indices the client wrote that made no sense.
    RingCorrupt,
    /// Steps in which the client had requests waiting but no credit.
    NoCredit,
    /// Bytes sent for the client.
    TxBytes,
    /// Bytes received for the client.
    RxBytes,
    /// Connections accepted or opened for the client.
    Connections,
}

impl JobCounter {
    /// Every counter, in order.
    pub const ALL: [JobCounter; 9] = [
        JobCounter::Requests,
        JobCounter::Completed,
        JobCounter::Failed,
        JobCounter::BadRequest,
        JobCounter::RingCorrupt,
        JobCounter::NoCredit,
        JobCounter::TxBytes,
        JobCounter::RxBytes,
        JobCounter::Connections,
    ];

    /// A short stable name.
    pub const fn name(self) -> &'static str {
        match self {
            JobCounter::Requests => "requests",
            JobCounter::Completed => "completed",
            JobCounter::Failed => "failed",
            JobCounter::BadRequest => "bad_request",
            JobCounter::RingCorrupt => "ring_corrupt",
            JobCounter::NoCredit => "no_credit",
            JobCounter::TxBytes => "tx_bytes",
            JobCounter::RxBytes => "rx_bytes",
            JobCounter::Connections => "connections",
        }
    }
}

/// One client's job area, mapped.
#[derive(Clone, Debug)]
pub struct JobArea {
    region: Arc<Region>,
    layout: JobLayout,
}

impl JobArea {
    /// Daemon: a new area (sealed memfd), its rings initialised and its
    /// header written.
    pub fn create(name: &str, params: JobParams) -> io::Result<JobArea> {
        let layout = JobLayout::of(params)?;
        let region = Region::create_sealed(name, layout.len)?;
        Ring::<Req>::init(&region, layout.req, params.req_cap)?;
        Ring::<Cpl>::init(&region, layout.cpl, params.credits)?;
        write_header(&region, JOB_MAGIC, JOB_VERSION, params, layout.len);
        Ok(JobArea { region, layout })
    }

    /// Client: maps the area the daemon handed over. Refused unless it is
    /// size-sealed, names this version, and its length is what its
    /// parameters give.
    pub fn open(fd: std::os::fd::OwnedFd) -> io::Result<JobArea> {
        let region = Region::open_sealed(fd)?;
        let p = read_header(&region, JOB_MAGIC, JOB_VERSION, "job area", |p| {
            JobLayout::of(p).map(|l| l.len)
        })?;
        let layout = JobLayout::of(p)?;
        Ok(JobArea { region, layout })
    }

    /// The mapped memory.
    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }

    /// The layout.
    pub fn layout(&self) -> &JobLayout {
        &self.layout
    }

    /// The parameters.
    pub fn params(&self) -> &JobParams {
        &self.layout.params
    }

    /// The published line.
    pub fn published(&self) -> &Published {
        // SAFETY: the layout places the line inside the region (checked
        // against its length), 64-byte aligned; atomics only, valid for any
        // bytes and only accessed atomically.
        unsafe {
            &*self
                .region
                .as_ptr()
                .add(self.layout.published)
                .cast::<Published>()
        }
    }

    /// The client's doorbell.
    pub fn app_bell(&self) -> io::Result<Doorbell> {
        Doorbell::attach(self.region.clone(), self.layout.app_bell)
    }

    /// The daemon's doorbell, waking through `waker`.
    pub fn daemon_bell(&self, waker: Arc<crate::sys::EventFd>) -> io::Result<Doorbell> {
        Ok(Doorbell::attach(self.region.clone(), self.layout.daemon_bell)?.with_eventfd(waker))
    }

    /// The data section.
    pub fn data(&self) -> Span {
        Span {
            region: self.region.clone(),
            off: self.layout.data,
            len: self.layout.params.data_bytes as usize,
        }
    }
}

/// Checked access to a byte range of a region shared with another process
/// (a job area's data section).
///
/// Ownership protocol: bytes under a job belong to the daemon until the job
/// completes; the client library hands out a range's bytes only while no
/// job holds it ([`Span::slice`], [`Span::slice_mut`]: the client trusts
/// its daemon). The daemon trusts no client, which may write any byte at
/// any time: it never holds a reference into the section, only copies
/// bytes in and out through raw pointers ([`Span::read_into`],
/// [`Span::write_from`]). A hostile client can thus only change bytes it
/// sends or spoil bytes it receives; no decision of the daemon rests on
/// them.
#[derive(Clone, Debug)]
pub struct Span {
    region: Arc<Region>,
    off: usize,
    len: usize,
}

// SAFETY: a Span only hands out slices inside its region under the
// ownership protocol above; the mapping is valid on any thread.
unsafe impl Send for Span {}
// SAFETY: shared references give read access only.
unsafe impl Sync for Span {}

impl Span {
    /// Bytes in the span.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the span is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True if `[off, off + len)` lies inside the span.
    #[inline]
    pub fn contains(&self, off: usize, len: usize) -> bool {
        off.checked_add(len).is_some_and(|e| e <= self.len)
    }

    /// Bytes `[off, off + len)`, or `None` if they do not lie inside the
    /// span.
    #[inline]
    pub fn slice(&self, off: usize, len: usize) -> Option<&[u8]> {
        if !self.contains(off, len) {
            return None;
        }
        // SAFETY: in bounds of the mapping (checked above and at creation:
        // the span lies inside the region, which lives as long as `self`).
        // The peer may write these bytes (see the ownership protocol); they
        // are plain bytes, any value is valid, and no caller relies on
        // them staying put.
        Some(unsafe { std::slice::from_raw_parts(self.region.as_ptr().add(self.off + off), len) })
    }

    /// Bytes `[off, off + len)` for writing, or `None` if they do not lie
    /// inside the span.
    #[inline]
    pub fn slice_mut(&mut self, off: usize, len: usize) -> Option<&mut [u8]> {
        if !self.contains(off, len) {
            return None;
        }
        // SAFETY: in bounds as in `slice`; `&mut self` rules out other
        // slices from this handle, and the ownership protocol other owners
        // in this process (a hostile peer can only spoil its own bytes).
        Some(unsafe {
            std::slice::from_raw_parts_mut(self.region.as_ptr().add(self.off + off), len)
        })
    }

    /// Copies bytes `[off, off + dst.len())` into `dst` (memory of ours);
    /// false, copying nothing, if they do not lie inside the span. For the
    /// side that does not trust the other: no reference into the shared
    /// bytes is made, so a concurrent write only changes what is copied.
    #[inline]
    pub fn read_into(&self, off: usize, dst: &mut [u8]) -> bool {
        if !self.contains(off, dst.len()) {
            return false;
        }
        // SAFETY: the source is in bounds of the mapping (checked above and
        // at creation) and cannot overlap `dst`, which is memory of ours;
        // the shared bytes are read through the raw pointer only, every
        // value is a valid `u8`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.region.as_ptr().add(self.off + off),
                dst.as_mut_ptr(),
                dst.len(),
            );
        }
        true
    }

    /// Copies `src` (memory of ours) to bytes `[off, off + src.len())`;
    /// false, copying nothing, if they do not lie inside the span. As
    /// [`Span::read_into`], through the raw pointer only.
    #[inline]
    pub fn write_from(&self, off: usize, src: &[u8]) -> bool {
        if !self.contains(off, src.len()) {
            return false;
        }
        // SAFETY: the destination is in bounds of the mapping (checked above
        // and at creation), writable (the region is mapped read-write), and
        // cannot overlap `src`, which is memory of ours; no reference to the
        // shared bytes is made.
        unsafe {
            std::ptr::copy_nonoverlapping(
                src.as_ptr(),
                self.region.as_ptr().add(self.off + off),
                src.len(),
            );
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::{Consumer, Producer};

    #[test]
    fn layout_parts_do_not_overlap_and_fit() {
        let l = JobLayout::of(JobParams::default()).unwrap();
        let p = l.params;
        let mut parts = [
            (0, HEADER),
            (l.published, std::mem::size_of::<Published>()),
            (l.app_bell, DOORBELL_BYTES),
            (l.daemon_bell, DOORBELL_BYTES),
            (l.req, layout_size::<Req>(p.req_cap)),
            (l.cpl, layout_size::<Cpl>(p.credits)),
            (l.data, p.data_bytes as usize),
        ];
        parts.sort();
        for w in parts.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "{:?} overlaps {:?}", w[0], w[1]);
        }
        assert_eq!(l.data % PAGE, 0);
        assert_eq!(l.data + p.data_bytes as usize, l.len);
    }

    #[test]
    fn implausible_parameters_are_refused() {
        let good = JobParams::default();
        for bad in [
            JobParams { req_cap: 3, ..good },
            JobParams { credits: 1, ..good },
            JobParams {
                data_bytes: 1000,
                ..good
            },
            JobParams {
                data_bytes: MAX_DATA + PAGE as u32,
                ..good
            },
            JobParams {
                max_regions: 0,
                ..good
            },
            JobParams {
                max_socks: 1 << 20,
                ..good
            },
        ] {
            assert!(JobLayout::of(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_client_sees_what_the_daemon_built() {
        let p = JobParams {
            data_bytes: 1 << 16,
            ..JobParams::default()
        };
        let a = JobArea::create("jobs-test", p).unwrap();
        let mut req_c = Consumer::<Req>::attach(a.region(), a.layout().req).unwrap();
        let b = JobArea::open(a.region().dup_inheritable().unwrap()).unwrap();
        assert_eq!(a.layout(), b.layout());
        let mut req_p = Producer::<Req>::attach(b.region(), b.layout().req).unwrap();
        let r = Req {
            job: 9,
            op: ReqOp::Send as u32,
            len: 5,
            ..Req::default()
        };
        assert!(req_p.push_one(r).is_ok());
        assert_eq!(req_c.pop_one(), Some(r));
        let mut d = b.data();
        d.slice_mut(100, 5).unwrap().copy_from_slice(b"hello");
        assert_eq!(a.data().slice(100, 5).unwrap(), b"hello");
        assert!(d.slice(1 << 16, 1).is_none());
        assert!(d.slice(usize::MAX, 2).is_none());
        assert!(d.slice((1 << 16) - 1, 1).is_some());
        // The daemon's copies: checked the same way, nothing copied when out.
        let mut got = [0u8; 5];
        assert!(a.data().read_into(100, &mut got));
        assert_eq!(&got, b"hello");
        assert!(a.data().write_from(200, b"world"));
        assert_eq!(d.slice(200, 5).unwrap(), b"world");
        assert!(!a.data().read_into((1 << 16) - 2, &mut got));
        assert!(!a.data().write_from(usize::MAX - 1, b"xy"));
    }

    #[test]
    fn an_area_of_the_other_kind_or_unsealed_is_refused() {
        let r = Region::create("jobs-test", 1 << 20).unwrap();
        assert!(JobArea::open(r.dup_inheritable().unwrap()).is_err());
        let a = crate::mem::AppArea::create("jobs-test", Default::default()).unwrap();
        assert!(JobArea::open(a.region().dup_inheritable().unwrap()).is_err());
    }

    #[test]
    fn codes_round_trip() {
        for v in 1..=13u32 {
            let e = JobError::from_code(v).unwrap();
            assert_eq!(e as u32, v);
        }
        assert_eq!(JobError::from_code(0), None);
        assert_eq!(JobError::from_code(999), Some(JobError::Invalid));
        for v in 1..=11u32 {
            assert_eq!(ReqOp::from_u32(v).unwrap() as u32, v);
        }
        assert_eq!(ReqOp::from_u32(0), None);
    }
}
