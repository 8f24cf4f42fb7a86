//! MemNet: sockets offloaded to a lazynet daemon that runs TCP/IP on its
//! own core (the offload placement, `lazynet daemon --placement offload`).
//!
//! **Owns:** the client side of a job area ([`crate::mem::jobs`]): posting
//! requests, reaping completions, the job table, the client's credits,
//! which bytes of the data section are registered, and which ranges are
//! held by unfinished jobs.
//!
//! **May not touch:** TCP, the NIC, or anything of the daemon but the job
//! area. The application holds no protocol state at all.
//!
//! # The API (MemNet Fig. 4, with the paper's semantics)
//!
//! | call | what |
//! |---|---|
//! | [`MemNet::register_mem`] / [`MemNet::deregister_mem`] | memory the daemon reads and writes without a copy on the client's side: a range of the job area's data section, handed out as a [`MemHandle`]; [`MemNet::buf`] / [`MemNet::buf_mut`] give its bytes |
//! | [`MemNet::send_direct`] / [`MemNet::recv_direct`] | synchronous: return when the daemon has taken all bytes into TCP's buffer, or placed some received bytes in the range |
//! | [`MemNet::async_send`] / [`MemNet::async_recv`] | post and return a [`Job`] at once |
//! | [`MemNet::job_done`] / [`MemNet::job_wait`] | poll a job, or sleep on the doorbell until it completes |
//! | [`MemNet::listen`], [`MemNet::accept`], [`MemNet::connect`], [`MemNet::send`], [`MemNet::recv`], [`MemNet::close`] | the ordinary sockets calls: they copy through a range of the library's own (the paper's "MemNet" series) |
//!
//! A range under an unfinished job can neither be written ([`MemNet::buf_mut`]
//! answers [`Error::Busy`]) nor deregistered: the job's state says so. The
//! daemon copies what it sends into TCP's send buffer and retransmits from
//! that copy, so a send's range is free again once the send completes.
//!
//! Credits: at most `credits` jobs are in flight (the completion ring's
//! capacity); a post with none left reaps completions and, if it must,
//! waits for one — the paper's flow control. Posting costs one ring push
//! and a doorbell check; no system call unless the daemon sleeps.
//!
//! Waiting spins for [`MemNet::set_spin`] (default 50 µs: a daemon on its
//! own core answers within microseconds), then sleeps on the client's
//! doorbell, which the daemon rings after posting completions.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;

use crate::ctl::{self, Msg, Welcome};
use crate::mem::jobs::{Cpl, JobArea, JobCounter, JobError, JobParams, Req, ReqOp, Span};
use crate::mem::{Consumer, Doorbell, Producer};
use crate::sys::EventFd;

/// Bytes of the range the sockets API copies through.
pub const BOUNCE_BYTES: u32 = 256 * 1024;
/// Unreaped finished jobs a client may hold, on top of its credits.
const JOB_SLACK: usize = 1024;
const PAGE: u32 = 4096;

/// What a MemNet call can fail with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The daemon failed the job.
    Job(JobError),
    /// The range is held by an unfinished job.
    Busy,
    /// The data section has no free run of that many pages.
    NoSpace,
    /// The job is unknown (never posted, or reaped already).
    UnknownJob,
    /// The handle names no registered range.
    UnknownHandle,
    /// `job_wait` ran out of time (the job goes on).
    TimedOut,
    /// Too many finished jobs nobody reaped.
    TooManyJobs,
    /// The daemon stopped answering (its area's rings were damaged).
    Broken,
    /// The daemon is gone (its end of the control connection hung up): no
    /// job will complete.
    DaemonGone,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for Error {}

impl From<JobError> for Error {
    fn from(e: JobError) -> Self {
        Error::Job(e)
    }
}

/// A registered range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemHandle(u32);

/// A socket in the daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Socket(u32);

/// An asynchronous job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Job(u32);

impl MemHandle {
    /// The daemon's number for the range (what travels in requests).
    pub fn id(self) -> u32 {
        self.0
    }
}

impl Socket {
    /// The daemon's number for the socket.
    pub fn id(self) -> u32 {
        self.0
    }
}

#[derive(Clone, Copy, Debug)]
enum JobState {
    Free,
    Running { handle: Option<u32> },
    Done(Result<u64, JobError>),
}

#[derive(Clone, Copy, Debug)]
struct JobSlot {
    gen: u16,
    state: JobState,
}

#[derive(Clone, Copy, Debug)]
struct Registered {
    handle: u32,
    off: u32,
    len: u32,
    /// Unfinished jobs on it.
    busy: u32,
}

/// A MemNet client: the connection to one daemon in the offload placement.
pub struct MemNet {
    /// The control connection: closing it detaches; its hang-up is how
    /// this side learns that the daemon is gone.
    conn: OwnedFd,
    area: JobArea,
    data: Span,
    req: Producer<Req>,
    cpl: Consumer<Cpl>,
    bell: Doorbell,
    daemon: Doorbell,
    welcome: Welcome,
    credits: usize,
    in_flight: usize,
    jobs: Vec<JobSlot>,
    free_jobs: Vec<u32>,
    /// By the daemon's range index.
    regs: Vec<Option<Registered>>,
    /// Free runs of the data section: (offset, length), sorted.
    free_space: Vec<(u32, u32)>,
    bounce: MemHandle,
    spin_ns: u64,
    cbuf: [Cpl; 32],
    /// Jobs in the order they completed, for [`MemNet::next_done`].
    done_q: std::collections::VecDeque<u32>,
}

impl std::fmt::Debug for MemNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemNet")
            .field("client", &self.welcome.app_id)
            .field("in_flight", &self.in_flight)
            .finish()
    }
}

fn bad(m: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m.into())
}

impl MemNet {
    /// Attaches to the daemon at `path` (it must run the offload placement).
    pub fn attach(path: &Path) -> io::Result<MemNet> {
        let conn = ctl::connect(path)?;
        ctl::send(&conn, &Msg::HelloOffload, &[])?;
        let (w, mut fds) = match ctl::recv(&conn)? {
            Some((Ok(Msg::Welcome(w)), fds)) if fds.len() == 2 => (w, fds),
            Some((Ok(Msg::Refused(e)), _)) => {
                return Err(io::Error::other(format!("the daemon refused: {e:?}")))
            }
            other => return Err(bad(format!("unexpected answer {other:?}"))),
        };
        let ev = Arc::new(EventFd::from_fd(fds.pop().expect("two descriptors")));
        let area = JobArea::open(fds.pop().expect("two descriptors"))?;
        let l = *area.layout();
        let p: JobParams = l.params;
        let region = area.region().clone();
        let bell = area.app_bell()?;
        bell.arm();
        let credits = p.credits as usize;
        let nslots = credits + JOB_SLACK;
        let mut m = MemNet {
            conn,
            data: area.data(),
            req: Producer::attach(&region, l.req)?,
            cpl: Consumer::attach(&region, l.cpl)?,
            daemon: area.daemon_bell(ev)?,
            bell,
            welcome: w,
            credits,
            in_flight: 0,
            jobs: vec![
                JobSlot {
                    gen: 0,
                    state: JobState::Free
                };
                nslots
            ],
            free_jobs: (0..nslots as u32).rev().collect(),
            regs: vec![None; p.max_regions as usize],
            free_space: vec![(0, p.data_bytes)],
            bounce: MemHandle(0),
            spin_ns: 50_000,
            cbuf: [Cpl::default(); 32],
            done_q: std::collections::VecDeque::with_capacity(nslots),
            area,
        };
        let bounce = BOUNCE_BYTES.min(p.data_bytes / 2).max(PAGE);
        m.bounce = m
            .register_mem(bounce as usize)
            .map_err(|e| io::Error::other(format!("registering the copy range: {e}")))?;
        Ok(m)
    }

    /// What the daemon said when we attached (address, MAC, MTU).
    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    /// Our address (the daemon's).
    pub fn addr(&self) -> Ipv4Addr {
        self.welcome.addr
    }

    /// Jobs that may be in flight at once.
    pub fn credits(&self) -> usize {
        self.credits
    }

    /// Jobs posted and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// How long a wait polls before it sleeps on the doorbell.
    pub fn set_spin(&mut self, ns: u64) {
        self.spin_ns = ns;
    }

    /// One of the counters the daemon publishes for us.
    pub fn counter(&self, c: JobCounter) -> u64 {
        self.area.published().counter_at(c as usize)
    }

    // ---- jobs -----------------------------------------------------------

    /// Moves completions from the ring into the job table. Returns how
    /// many.
    fn reap(&mut self) -> usize {
        let n = self.cpl.pop(&mut self.cbuf);
        for i in 0..n {
            let c = self.cbuf[i];
            let slot = (c.job & 0xffff) as usize;
            let Some(s) = self.jobs.get_mut(slot) else {
                continue;
            };
            let JobState::Running { handle } = s.state else {
                continue;
            };
            if s.gen != (c.job >> 16) as u16 {
                continue;
            }
            s.state = JobState::Done(match JobError::from_code(c.code) {
                None => Ok(c.value),
                Some(e) => Err(e),
            });
            self.in_flight -= 1;
            if self.done_q.len() >= 2 * self.jobs.len() {
                // A client that never asks for `next_done`: keep only the
                // jobs still unreaped (at most one per slot).
                let jobs = &self.jobs;
                self.done_q.retain(|&j| {
                    jobs.get((j & 0xffff) as usize).is_some_and(|s| {
                        s.gen == (j >> 16) as u16 && matches!(s.state, JobState::Done(_))
                    })
                });
            }
            self.done_q.push_back(c.job);
            if let Some(h) = handle {
                if let Some(Some(r)) = self.regs.get_mut((h & 0xffff) as usize) {
                    r.busy = r.busy.saturating_sub(1);
                }
            }
        }
        n
    }

    /// Waits until `done()` or `deadline` (ns, monotonic): spins, then
    /// sleeps on the doorbell. Returns false on time-out.
    /// Spins, then sleeps on the doorbell, until `done`: `Ok(true)`, or
    /// `Ok(false)` at `deadline`; [`Error::DaemonGone`] as soon as the
    /// daemon has hung up (looked at before each sleep, at most every
    /// 10 ms: no system call while spinning).
    fn wait_until(
        &mut self,
        deadline: Option<u64>,
        done: impl Fn(&Self) -> bool,
    ) -> Result<bool, Error> {
        let start = crate::sched::clock::mono_ns();
        loop {
            self.reap();
            if done(self) {
                return Ok(true);
            }
            let now = crate::sched::clock::mono_ns();
            if deadline.is_some_and(|d| now >= d) {
                return Ok(false);
            }
            if now.saturating_sub(start) < self.spin_ns {
                std::hint::spin_loop();
                continue;
            }
            if crate::ctl::peer_gone(&self.conn) {
                // What it completed before it went still counts.
                self.reap();
                return if done(self) {
                    Ok(true)
                } else {
                    Err(Error::DaemonGone)
                };
            }
            let t = deadline.map_or(10_000_000, |d| d.saturating_sub(now).min(10_000_000));
            let cpl = &mut self.cpl;
            self.bell.sleep(Some(t), || cpl.is_empty());
        }
    }

    /// Posts a request; waits for a credit if there is none.
    fn post(&mut self, mut r: Req, handle: Option<u32>) -> Result<Job, Error> {
        if self.in_flight >= self.credits {
            self.reap();
            if self.in_flight >= self.credits {
                let credits = self.credits;
                self.wait_until(None, |m| m.in_flight < credits)?;
            }
        }
        let Some(slot) = self.free_jobs.pop() else {
            return Err(Error::TooManyJobs);
        };
        let s = &mut self.jobs[slot as usize];
        s.gen = s.gen.wrapping_add(1);
        s.state = JobState::Running { handle };
        r.job = slot | u32::from(s.gen) << 16;
        if self.req.push_one(r).is_err() {
            // The ring holds at most `credits` < its capacity for an
            // honest pair; a full one means the daemon is gone wrong.
            s.state = JobState::Free;
            self.free_jobs.push(slot);
            return Err(Error::Broken);
        }
        self.in_flight += 1;
        if let Some(h) = handle {
            if let Some(Some(g)) = self.regs.get_mut((h & 0xffff) as usize) {
                g.busy += 1;
            }
        }
        self.daemon.ring();
        Ok(Job(r.job))
    }

    fn slot(&self, j: Job) -> Result<usize, Error> {
        let i = (j.0 & 0xffff) as usize;
        match self.jobs.get(i) {
            Some(s) if s.gen == (j.0 >> 16) as u16 && !matches!(s.state, JobState::Free) => Ok(i),
            _ => Err(Error::UnknownJob),
        }
    }

    fn take(&mut self, i: usize) -> Option<Result<u64, Error>> {
        match self.jobs[i].state {
            JobState::Done(r) => {
                self.jobs[i].state = JobState::Free;
                self.free_jobs.push(i as u32);
                Some(r.map_err(Error::Job))
            }
            _ => None,
        }
    }

    /// Polls job `j`: `None` while it runs; its result once (the job is
    /// then forgotten).
    pub fn job_done(&mut self, j: Job) -> Option<Result<u64, Error>> {
        let i = match self.slot(j) {
            Ok(i) => i,
            Err(e) => return Some(Err(e)),
        };
        if let Some(r) = self.take(i) {
            return Some(r);
        }
        self.reap();
        self.take(i)
    }

    /// The next job that completed and was not yet reaped, oldest first
    /// (an event loop's way of waiting on many jobs: get it, then
    /// [`MemNet::job_done`] gives its result).
    pub fn next_done(&mut self) -> Option<Job> {
        loop {
            if self.done_q.is_empty() {
                self.reap();
            }
            let j = self.done_q.pop_front()?;
            // Skip jobs reaped meanwhile by `job_done` or `job_wait`.
            if let Ok(i) = self.slot(Job(j)) {
                if matches!(self.jobs[i].state, JobState::Done(_)) {
                    return Some(Job(j));
                }
            }
        }
    }

    /// Waits (at most `timeout`) for some job to complete and returns it
    /// as [`MemNet::next_done`] does.
    pub fn wait_any(&mut self, timeout: std::time::Duration) -> Option<Job> {
        if let Some(j) = self.next_done() {
            return Some(j);
        }
        let deadline = crate::sched::clock::mono_ns() + timeout.as_nanos() as u64;
        // A daemon gone completes nothing more: nothing to return.
        let _ = self.wait_until(Some(deadline), |m| !m.done_q.is_empty());
        self.next_done()
    }

    /// Waits for job `j` (at most `timeout`; `None`: as long as it takes)
    /// and returns its result. [`Error::TimedOut`] leaves it running.
    pub fn job_wait(&mut self, j: Job, timeout: Option<std::time::Duration>) -> Result<u64, Error> {
        let i = self.slot(j)?;
        let deadline = timeout.map(|t| crate::sched::clock::mono_ns() + t.as_nanos() as u64);
        if self.wait_until(deadline, |m| matches!(m.jobs[i].state, JobState::Done(_)))? {
            self.take(i).expect("done")
        } else {
            Err(Error::TimedOut)
        }
    }

    /// Posts and waits.
    fn call(&mut self, r: Req, handle: Option<u32>) -> Result<u64, Error> {
        let j = self.post(r, handle)?;
        self.job_wait(j, None)
    }

    /// A request that does nothing, round trip (the channel's cost).
    pub fn nop(&mut self) -> Result<(), Error> {
        self.call(Self::req(ReqOp::Nop), None).map(|_| ())
    }

    fn req(op: ReqOp) -> Req {
        Req {
            op: op as u32,
            ..Req::default()
        }
    }

    // ---- memory ---------------------------------------------------------

    /// Registers `len` bytes (rounded up to pages) of the data section.
    pub fn register_mem(&mut self, len: usize) -> Result<MemHandle, Error> {
        if len == 0 || len > u32::MAX as usize - PAGE as usize {
            return Err(Error::NoSpace);
        }
        let want = (len as u32).div_ceil(PAGE) * PAGE;
        let Some(i) = self.free_space.iter().position(|&(_, l)| l >= want) else {
            return Err(Error::NoSpace);
        };
        let (off, l) = self.free_space[i];
        if l == want {
            self.free_space.remove(i);
        } else {
            self.free_space[i] = (off + want, l - want);
        }
        let r = Req {
            off,
            len: len as u32,
            ..Self::req(ReqOp::Register)
        };
        match self.call(r, None) {
            Ok(h) => {
                let h = h as u32;
                let reg = Registered {
                    handle: h,
                    off,
                    len: len as u32,
                    busy: 0,
                };
                match self.regs.get_mut((h & 0xffff) as usize) {
                    Some(x) => *x = Some(reg),
                    None => return Err(Error::Broken),
                }
                Ok(MemHandle(h))
            }
            Err(e) => {
                self.give_back(off, want);
                Err(e)
            }
        }
    }

    fn give_back(&mut self, off: u32, len: u32) {
        let i = self.free_space.partition_point(|&(o, _)| o < off);
        self.free_space.insert(i, (off, len));
        // Merge with the neighbours.
        if i + 1 < self.free_space.len() && off + len == self.free_space[i + 1].0 {
            self.free_space[i].1 += self.free_space[i + 1].1;
            self.free_space.remove(i + 1);
        }
        if i > 0 && self.free_space[i - 1].0 + self.free_space[i - 1].1 == off {
            self.free_space[i - 1].1 += self.free_space[i].1;
            self.free_space.remove(i);
        }
    }

    fn reg(&self, h: MemHandle) -> Result<Registered, Error> {
        match self.regs.get((h.0 & 0xffff) as usize) {
            Some(Some(r)) if r.handle == h.0 => Ok(*r),
            _ => Err(Error::UnknownHandle),
        }
    }

    /// Deregisters `h`; refused with [`Error::Busy`] while a job holds it.
    pub fn deregister_mem(&mut self, h: MemHandle) -> Result<(), Error> {
        let r = self.reg(h)?;
        self.reap();
        if self.reg(h)?.busy > 0 {
            return Err(Error::Busy);
        }
        self.call(
            Req {
                handle: h.0,
                ..Self::req(ReqOp::Deregister)
            },
            None,
        )?;
        self.regs[(h.0 & 0xffff) as usize] = None;
        self.give_back(r.off, r.len.div_ceil(PAGE) * PAGE);
        Ok(())
    }

    /// The bytes of range `h`; [`Error::Busy`] while a job holds it (a
    /// receive would be writing them).
    pub fn buf(&mut self, h: MemHandle) -> Result<&[u8], Error> {
        let mut r = self.reg(h)?;
        if r.busy > 0 {
            // A receive under way writes these bytes.
            self.reap();
            r = self.reg(h)?;
            if r.busy > 0 {
                return Err(Error::Busy);
            }
        }
        self.data
            .slice(r.off as usize, r.len as usize)
            .ok_or(Error::UnknownHandle)
    }

    /// The bytes of range `h` for writing; [`Error::Busy`] while a job
    /// holds it.
    pub fn buf_mut(&mut self, h: MemHandle) -> Result<&mut [u8], Error> {
        let mut r = self.reg(h)?;
        if r.busy > 0 {
            self.reap();
            r = self.reg(h)?;
            if r.busy > 0 {
                return Err(Error::Busy);
            }
        }
        self.data
            .slice_mut(r.off as usize, r.len as usize)
            .ok_or(Error::UnknownHandle)
    }

    /// Length of range `h`.
    pub fn len_of(&self, h: MemHandle) -> Result<usize, Error> {
        Ok(self.reg(h)?.len as usize)
    }

    // ---- direct and asynchronous data -----------------------------------

    fn data_req(
        &self,
        op: ReqOp,
        s: Socket,
        h: MemHandle,
        off: usize,
        len: usize,
    ) -> Result<Req, Error> {
        let r = self.reg(h)?;
        match off.checked_add(len) {
            Some(e) if e <= r.len as usize => Ok(Req {
                sock: s.0,
                handle: h.0,
                off: off as u32,
                len: len as u32,
                ..Self::req(op)
            }),
            _ => Err(Error::Job(JobError::BadRange)),
        }
    }

    /// Posts a send of `len` bytes at `off` of range `h` on `s`.
    pub fn async_send_at(
        &mut self,
        s: Socket,
        h: MemHandle,
        off: usize,
        len: usize,
    ) -> Result<Job, Error> {
        let r = self.data_req(ReqOp::Send, s, h, off, len)?;
        self.post(r, Some(h.0))
    }

    /// Posts a receive of up to `len` bytes into `off` of range `h`.
    pub fn async_recv_at(
        &mut self,
        s: Socket,
        h: MemHandle,
        off: usize,
        len: usize,
    ) -> Result<Job, Error> {
        let r = self.data_req(ReqOp::Recv, s, h, off, len)?;
        self.post(r, Some(h.0))
    }

    /// Posts a send of the first `len` bytes of `h` on `s` and returns at
    /// once. Do not write `h` until the job completes ([`MemNet::buf_mut`]
    /// refuses).
    pub fn async_send(&mut self, s: Socket, h: MemHandle, len: usize) -> Result<Job, Error> {
        self.async_send_at(s, h, 0, len)
    }

    /// Posts a receive of up to `len` bytes into `h` and returns at once.
    pub fn async_recv(&mut self, s: Socket, h: MemHandle, len: usize) -> Result<Job, Error> {
        self.async_recv_at(s, h, 0, len)
    }

    /// Sends the first `len` bytes of `h` on `s`; returns once TCP holds
    /// all of them.
    pub fn send_direct(&mut self, s: Socket, h: MemHandle, len: usize) -> Result<usize, Error> {
        let j = self.async_send(s, h, len)?;
        self.job_wait(j, None).map(|n| n as usize)
    }

    /// Receives up to `len` bytes into `h`; returns how many (0: the peer
    /// finished sending).
    pub fn recv_direct(&mut self, s: Socket, h: MemHandle, len: usize) -> Result<usize, Error> {
        let j = self.async_recv(s, h, len)?;
        self.job_wait(j, None).map(|n| n as usize)
    }

    // ---- the sockets API --------------------------------------------------

    /// Listens on TCP `port` (`backlog` 0: the daemon's default).
    pub fn listen(&mut self, port: u16, backlog: u32) -> Result<Socket, Error> {
        let r = Req {
            port,
            len: backlog,
            ..Self::req(ReqOp::Listen)
        };
        self.call(r, None).map(|v| Socket(v as u32))
    }

    /// Waits for a connection on listener `l`.
    pub fn accept(&mut self, l: Socket) -> Result<Socket, Error> {
        self.async_accept(l)
            .and_then(|j| self.job_wait(j, None))
            .map(|v| Socket(v as u32))
    }

    /// Posts an accept on listener `l`; the job's value is the socket
    /// ([`MemNet::socket_of`]).
    pub fn async_accept(&mut self, l: Socket) -> Result<Job, Error> {
        self.post(
            Req {
                sock: l.0,
                ..Self::req(ReqOp::Accept)
            },
            None,
        )
    }

    /// The socket an accept or connect job's value names.
    pub fn socket_of(value: u64) -> Socket {
        Socket(value as u32)
    }

    /// Connects to `to`; returns once the handshake is done.
    pub fn connect(&mut self, to: SocketAddrV4) -> Result<Socket, Error> {
        let r = Req {
            addr: u32::from(*to.ip()),
            port: to.port(),
            ..Self::req(ReqOp::Connect)
        };
        self.call(r, None).map(|v| Socket(v as u32))
    }

    /// Sends all of `data` (copied through the library's range); returns
    /// once TCP holds it.
    pub fn send(&mut self, s: Socket, data: &[u8]) -> Result<usize, Error> {
        let b = self.bounce;
        let cap = self.reg(b)?.len as usize;
        let mut done = 0;
        while done < data.len() {
            let n = (data.len() - done).min(cap);
            self.buf_mut(b)?[..n].copy_from_slice(&data[done..done + n]);
            done += self.send_direct(s, b, n)?;
        }
        Ok(done)
    }

    /// Receives up to `buf.len()` bytes (copied out of the library's
    /// range); 0 when the peer finished sending.
    pub fn recv(&mut self, s: Socket, buf: &mut [u8]) -> Result<usize, Error> {
        if buf.is_empty() {
            return Ok(0);
        }
        let b = self.bounce;
        let n = buf.len().min(self.reg(b)?.len as usize);
        let got = self.recv_direct(s, b, n)?;
        buf[..got].copy_from_slice(&self.buf(b)?[..got]);
        Ok(got)
    }

    /// Closes `s` (a connection finishes sending in the background; its
    /// unfinished jobs fail with [`JobError::Closed`]).
    pub fn close(&mut self, s: Socket) -> Result<(), Error> {
        self.call(
            Req {
                sock: s.0,
                ..Self::req(ReqOp::Close)
            },
            None,
        )
        .map(|_| ())
    }

    /// Posts a close of `s` and returns at once.
    pub fn async_close(&mut self, s: Socket) -> Result<Job, Error> {
        self.post(
            Req {
                sock: s.0,
                ..Self::req(ReqOp::Close)
            },
            None,
        )
    }

    /// Switches Nagle's algorithm off (`true`: every send goes out at
    /// once) or on, on connection `s`.
    pub fn set_nodelay(&mut self, s: Socket, on: bool) -> Result<(), Error> {
        self.call(
            Req {
                sock: s.0,
                len: u32::from(on),
                ..Self::req(ReqOp::SetNodelay)
            },
            None,
        )
        .map(|_| ())
    }

    /// Sends FIN on `s`.
    pub fn shutdown(&mut self, s: Socket) -> Result<(), Error> {
        self.call(
            Req {
                sock: s.0,
                ..Self::req(ReqOp::Shutdown)
            },
            None,
        )
        .map(|_| ())
    }

    /// Posts a raw request (for tests of the daemon's checks): the job id
    /// is filled in; nothing else is checked here.
    #[doc(hidden)]
    pub fn post_raw(&mut self, r: Req) -> Result<Job, Error> {
        self.post(r, None)
    }
}
