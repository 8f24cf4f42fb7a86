//! The offload placement (MemNet): the daemon runs TCP for its clients.
//!
//! **Owns:** each MemNet client's state in the daemon — its job area's
//! daemon ends, its registered ranges, its sockets (listeners and
//! connections of the daemon's own [`Stack`]), its pending jobs, and its
//! counters — and the three parts of [`Daemon::step`] that serve them:
//! taking requests, retrying pending jobs when their socket had an event,
//! and posting completions.
//!
//! **May not touch:** the client's memory outside its job area, or another
//! client's sockets. Every socket id, range id, offset and length a client
//! writes is checked against the tables here before use.
//!
//! # Jobs
//!
//! A request is tried as soon as it is taken. One that cannot finish yet
//! (an accept with no connection, a receive with no data, a send larger
//! than TCP's free buffer, a connect in its handshake) waits in the
//! client's pending list and is tried again when its socket has an event
//! (input, a timer: [`Stack::tcp_take_events`]); jobs on one socket finish
//! in the order they were posted, per direction. The pending list is
//! bounded by the credits ([`crate::mem::jobs`]), so nothing grows with
//! what a client posts.
//!
//! Data: a send copies the registered bytes into TCP's send buffer — the
//! daemon's copy, which retransmissions read, so a range is free again as
//! soon as its send completes (Linux's `send` semantics, not zero-copy
//! transmission). A receive places bytes straight into the registered range
//! (TCP's direct placement). The client's side copies nothing with
//! `send_direct`/`recv_direct`/`async_*`; the sockets API copies once
//! through a range of its own.
//!
//! # Fairness
//!
//! Each step takes at most [`REQS_PER_STEP`] requests from each client and
//! begins with the client after the one that began the last step, so a
//! client that posts without pause gets its share of the daemon's core
//! and no more.

use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::OwnedFd;
use std::sync::Arc;

use crate::mem::jobs::{Cpl, JobArea, JobCounter, JobError, Req, ReqOp, Span};
use crate::mem::{Consumer, Doorbell, Producer};
use crate::nic::Nic;
use crate::proto::tcp::{ListenConfig, State};
use crate::stack::{SocketError, Stack, TcpEvent, TcpListener, TcpStream};

use super::ctl;
use super::ports::{Holder, Ports};

/// Requests taken from one client per step.
pub const REQS_PER_STEP: usize = 32;
/// Bytes one receive job takes at most per attempt (the bounce buffer).
const RECV_BOUNCE: usize = 64 * 1024;
/// TCP protocol work per step (segments, timers).
pub(super) const SERVICE_BUDGET: usize = 256;

/// One registered range: bytes `[off, off + len)` of the data section.
#[derive(Clone, Copy, Debug)]
struct Range {
    off: u32,
    len: u32,
}

#[derive(Clone, Copy, Debug)]
enum SockKind {
    Free,
    Listener(TcpListener),
    Conn(TcpStream),
}

/// One socket-table entry. Its id is `index | gen << 16`.
#[derive(Clone, Copy, Debug)]
struct Sock {
    gen: u16,
    kind: SockKind,
    /// Had an event since its pending jobs were last tried.
    ready: bool,
    /// Pass number in which a job on it stayed pending, per direction
    /// (send; receive, accept and connect): later jobs wait their turn.
    blocked_tx: u32,
    blocked_rx: u32,
    /// Jobs pending on it, per direction (send; the others).
    pend_tx: u16,
    pend_rx: u16,
}

/// A job waiting for its socket.
#[derive(Clone, Copy, Debug)]
struct Pending {
    req: Req,
    /// Bytes of a send already in TCP's buffer.
    done: u32,
}

/// One MemNet client (see the module docs).
pub(super) struct Client {
    pub(super) id: u32,
    pub(super) pid: Option<u32>,
    pub(super) conn: OwnedFd,
    pub(super) area: JobArea,
    data: Span,
    pub(super) bell: Doorbell,
    app_bell: Doorbell,
    pub(super) req: Consumer<Req>,
    cpl: Producer<Cpl>,
    regions: Vec<Option<(u16, Range)>>,
    region_gen: Vec<u16>,
    socks: Vec<Sock>,
    free_socks: Vec<u32>,
    pending: VecDeque<Pending>,
    out: Vec<Cpl>,
    posted: u64,
    pub(super) counters: [u64; crate::mem::area::COUNTERS],
    /// The owner tag of its connections and listeners in the daemon's
    /// stack: what its orphans are counted against (and capped by,
    /// `StackConfig::max_orphans_per_tag`) once it has closed them.
    pub(super) tag: u16,
}

impl Client {
    /// The daemon's ends of a new client's area.
    pub(super) fn new(
        id: u32,
        conn: OwnedFd,
        area: JobArea,
        wake: Arc<crate::sys::EventFd>,
    ) -> io::Result<Client> {
        let l = *area.layout();
        let p = l.params;
        let reg = area.region().clone();
        Ok(Client {
            id,
            pid: ctl::peer_pid(&conn),
            conn,
            data: area.data(),
            bell: area.daemon_bell(wake)?,
            app_bell: area.app_bell()?,
            req: Consumer::attach(&reg, l.req)?,
            cpl: Producer::attach(&reg, l.cpl)?,
            regions: vec![None; p.max_regions as usize],
            region_gen: vec![0; p.max_regions as usize],
            socks: vec![
                Sock {
                    gen: 0,
                    kind: SockKind::Free,
                    ready: false,
                    blocked_tx: 0,
                    blocked_rx: 0,
                    pend_tx: 0,
                    pend_rx: 0,
                };
                p.max_socks as usize
            ],
            free_socks: (0..p.max_socks).rev().collect(),
            pending: VecDeque::with_capacity(p.credits as usize),
            out: Vec::with_capacity(p.credits as usize),
            posted: 0,
            counters: [0; crate::mem::area::COUNTERS],
            tag: client_tag(id),
            area,
        })
    }

    fn count(&mut self, c: JobCounter, n: u64) {
        self.counters[c as usize] += n;
    }

    /// Jobs the daemon holds that still owe a completion.
    fn owed(&self) -> usize {
        self.pending.len() + self.out.len()
    }

    fn finish(&mut self, job: u32, r: Result<u64, JobError>) {
        let c = match r {
            Ok(v) => {
                self.count(JobCounter::Completed, 1);
                Cpl {
                    job,
                    code: 0,
                    value: v,
                }
            }
            Err(e) => {
                self.count(JobCounter::Failed, 1);
                if matches!(
                    e,
                    JobError::Invalid
                        | JobError::BadSocket
                        | JobError::BadHandle
                        | JobError::BadRange
                ) {
                    self.count(JobCounter::BadRequest, 1);
                }
                Cpl {
                    job,
                    code: e as u32,
                    value: 0,
                }
            }
        };
        self.out.push(c);
    }

    /// Queues `p` behind its socket's other pending jobs.
    fn push_pending(&mut self, p: Pending) {
        if let Some(s) = self.socks.get_mut((p.req.sock & 0xffff) as usize) {
            if p.req.op == ReqOp::Send as u32 {
                s.pend_tx += 1;
            } else {
                s.pend_rx += 1;
            }
        }
        self.pending.push_back(p);
    }

    /// Removes pending job `i`.
    fn take_pending(&mut self, i: usize) -> Option<Pending> {
        let p = self.pending.remove(i)?;
        if let Some(s) = self.socks.get_mut((p.req.sock & 0xffff) as usize) {
            if p.req.op == ReqOp::Send as u32 {
                s.pend_tx = s.pend_tx.saturating_sub(1);
            } else {
                s.pend_rx = s.pend_rx.saturating_sub(1);
            }
        }
        Some(p)
    }

    fn sock(&self, id: u32) -> Option<(usize, SockKind)> {
        let i = (id & 0xffff) as usize;
        let s = self.socks.get(i)?;
        (s.gen == (id >> 16) as u16 && !matches!(s.kind, SockKind::Free)).then_some((i, s.kind))
    }

    fn new_sock(&mut self, kind: SockKind) -> Option<u32> {
        let i = self.free_socks.pop()?;
        let s = &mut self.socks[i as usize];
        s.gen = s.gen.wrapping_add(1);
        s.kind = kind;
        s.ready = false;
        s.pend_tx = 0;
        s.pend_rx = 0;
        Some(i | u32::from(s.gen) << 16)
    }

    fn free_sock(&mut self, i: usize) {
        self.socks[i].kind = SockKind::Free;
        self.free_socks.push(i as u32);
    }

    /// The data-section bytes of `[off, off + len)` of range `handle`.
    fn range(&self, handle: u32, off: u32, len: u32) -> Result<(usize, usize), JobError> {
        let i = (handle & 0xffff) as usize;
        let Some(Some((gen, r))) = self.regions.get(i) else {
            return Err(JobError::BadHandle);
        };
        if *gen != (handle >> 16) as u16 {
            return Err(JobError::BadHandle);
        }
        match off.checked_add(len) {
            Some(e) if e <= r.len => Ok((r.off as usize + off as usize, len as usize)),
            _ => Err(JobError::BadRange),
        }
    }

    /// Posts this step's completions and rings the client if it sleeps.
    pub(super) fn publish(&mut self) {
        if self.out.is_empty() {
            return;
        }
        let n = self.cpl.push(&self.out);
        if n < self.out.len() {
            // Only a client that wrote the ring's indices gets here (the
            // credits kept room for every job taken).
            self.count(JobCounter::RingCorrupt, 1);
        }
        self.posted += n as u64;
        self.out.clear();
        let p = self.area.published();
        p.set_applied(self.counters[JobCounter::Requests as usize]);
        p.set_delivered(self.posted);
        self.app_bell.ring();
    }

    /// Stores the counters in the area.
    pub(super) fn publish_counters(&mut self) {
        self.counters[JobCounter::RingCorrupt as usize] = self.counters
            [JobCounter::RingCorrupt as usize]
            .max(self.req.corrupt() + self.cpl.corrupt());
        let p = self.area.published();
        for c in JobCounter::ALL {
            p.set_counter_at(c as usize, self.counters[c as usize]);
        }
    }

    /// Sockets open now.
    pub(super) fn sockets(&self) -> usize {
        self.socks.len() - self.free_socks.len()
    }
}

/// The owner tag of client `id`'s sockets (never 0, which is untagged).
/// Ids 65,535 apart share a tag; a client's orphans are gone long before
/// that many others have attached.
pub(super) fn client_tag(id: u32) -> u16 {
    (id % u32::from(u16::MAX)) as u16 + 1
}

/// Maps socket errors to job errors.
fn job_err(e: SocketError) -> JobError {
    match e {
        SocketError::AddrInUse => JobError::AddrInUse,
        SocketError::AddrNotAvailable | SocketError::TooBig => JobError::Invalid,
        SocketError::NoPorts => JobError::Full,
        SocketError::BadHandle => JobError::Closed,
        SocketError::NotConnected => JobError::NotConnected,
        SocketError::NoRoute => JobError::NoRoute,
        SocketError::ConnectionRefused => JobError::ConnectionRefused,
        SocketError::ConnectionReset => JobError::ConnectionReset,
        SocketError::TimedOut => JobError::TimedOut,
        SocketError::WouldBlock | SocketError::NoBuffers | SocketError::Dropped => {
            JobError::Invalid
        }
    }
}

/// What trying a job came to.
enum Tried {
    Done(Result<u64, JobError>),
    /// Not yet; bytes of a send now in TCP's buffer.
    Wait(u32),
}

/// The offload half of a daemon: its clients and the map from the stack's
/// connections back to them.
pub(super) struct Offload {
    pub(super) clients: Vec<Option<Client>>,
    /// Per connection slot of the stack: (client + 1, socket index).
    conn_owner: Vec<(u16, u32)>,
    listen_owner: Vec<(u16, u32)>,
    events: Vec<TcpEvent>,
    /// Sockets marked ready this step: (client, socket index).
    marked: Vec<(usize, usize)>,
    /// Sockets accepted by pending jobs in one `progress` pass.
    accepted: Vec<u32>,
    /// Client that begins the next step (round robin).
    first: usize,
    pass: u32,
    /// Where a receive job's bytes land before they are copied to the
    /// client's range: a receive takes at most this many at a time.
    bounce: Box<[u8]>,
}

impl Offload {
    pub(super) fn new(max: usize) -> Offload {
        Offload {
            clients: (0..max).map(|_| None).collect(),
            conn_owner: Vec::new(),
            listen_owner: Vec::new(),
            events: Vec::with_capacity(256),
            marked: Vec::with_capacity(256),
            accepted: Vec::with_capacity(64),
            first: 0,
            pass: 0,
            bounce: vec![0u8; if max == 0 { 0 } else { RECV_BOUNCE }].into_boxed_slice(),
        }
    }

    pub(super) fn attached(&self) -> usize {
        self.clients.iter().filter(|c| c.is_some()).count()
    }

    fn own_conn(&mut self, h: TcpStream, k: usize, i: u32) {
        let x = h.index() as usize;
        if self.conn_owner.len() <= x {
            self.conn_owner.resize(x + 1, (0, 0));
        }
        self.conn_owner[x] = (k as u16 + 1, i);
    }

    fn own_listener(&mut self, h: TcpListener, k: usize, i: u32) {
        let x = h.index() as usize;
        if self.listen_owner.len() <= x {
            self.listen_owner.resize(x + 1, (0, 0));
        }
        self.listen_owner[x] = (k as u16 + 1, i);
    }

    /// One step's offload work after the NIC's batch was classified:
    /// requests, TCP protocol work, events, pending jobs, completions.
    pub(super) fn step<N: Nic>(
        &mut self,
        stack: &mut Stack<N>,
        ports: &mut Ports,
        now: u64,
    ) -> usize {
        let n = self.clients.len();
        if n == 0 || self.attached() == 0 {
            // Connections still closing after their clients left: their
            // events are nobody's (taken, so that the list stays short).
            let w = stack.tcp_service(now, SERVICE_BUDGET);
            self.events.clear();
            stack.tcp_take_events(&mut self.events);
            return w;
        }
        let mut work = 0;
        let first = self.first;
        self.first = (first + 1) % n;
        for j in 0..n {
            let k = (first + j) % n;
            if self.clients[k].is_some() {
                work += self.requests(stack, ports, k, now);
            }
        }
        work += stack.tcp_service(now, SERVICE_BUDGET);
        self.events.clear();
        stack.tcp_take_events(&mut self.events);
        self.marked.clear();
        for e in &self.events {
            let (owner, x) = match *e {
                TcpEvent::Conn(h) => (&self.conn_owner, h.index()),
                TcpEvent::Listener(h) => (&self.listen_owner, h.index()),
            };
            let Some(&(c, i)) = owner.get(x as usize) else {
                continue;
            };
            let k = usize::from(c).wrapping_sub(1);
            if let Some(Some(cl)) = self.clients.get_mut(k) {
                if let Some(s) = cl.socks.get_mut(i as usize) {
                    s.ready = true;
                    self.marked.push((k, i as usize));
                }
            }
        }
        if !self.marked.is_empty() {
            for k in 0..n {
                if self.clients[k]
                    .as_ref()
                    .is_some_and(|c| !c.pending.is_empty())
                {
                    work += self.progress(stack, k, now);
                }
            }
            for &(k, i) in &self.marked {
                if let Some(Some(c)) = self.clients.get_mut(k) {
                    c.socks[i].ready = false;
                }
            }
        }
        for c in self.clients.iter_mut().flatten() {
            c.publish();
        }
        work
    }

    /// Takes up to [`REQS_PER_STEP`] requests of client `k`, as credits allow.
    fn requests<N: Nic>(
        &mut self,
        stack: &mut Stack<N>,
        ports: &mut Ports,
        k: usize,
        now: u64,
    ) -> usize {
        let mut work = 0;
        for _ in 0..REQS_PER_STEP {
            let c = self.clients[k].as_mut().expect("client present");
            if c.cpl.free() <= c.owed() {
                if c.req.peek_len() > 0 {
                    c.count(JobCounter::NoCredit, 1);
                }
                break;
            }
            let Some(r) = c.req.pop_one() else {
                break;
            };
            c.count(JobCounter::Requests, 1);
            work += 1;
            self.start(stack, ports, k, r, now);
        }
        work
    }

    /// Starts one job: done at once, or pending behind earlier jobs on
    /// its socket.
    fn start<N: Nic>(
        &mut self,
        stack: &mut Stack<N>,
        ports: &mut Ports,
        k: usize,
        r: Req,
        now: u64,
    ) {
        let c = self.clients[k].as_mut().expect("client present");
        let Some(op) = ReqOp::from_u32(r.op) else {
            c.finish(r.job, Err(JobError::Invalid));
            return;
        };
        match op {
            ReqOp::Nop => c.finish(r.job, Ok(0)),
            ReqOp::Register => {
                let ok = r.len > 0 && c.data.contains(r.off as usize, r.len as usize);
                if !ok {
                    c.finish(r.job, Err(JobError::BadRange));
                    return;
                }
                let Some(i) = c.regions.iter().position(|x| x.is_none()) else {
                    c.finish(r.job, Err(JobError::Full));
                    return;
                };
                c.region_gen[i] = c.region_gen[i].wrapping_add(1);
                let g = c.region_gen[i];
                c.regions[i] = Some((
                    g,
                    Range {
                        off: r.off,
                        len: r.len,
                    },
                ));
                c.finish(r.job, Ok(i as u64 | u64::from(g) << 16));
            }
            ReqOp::Deregister => {
                if let Err(e) = c.range(r.handle, 0, 0) {
                    c.finish(r.job, Err(e));
                    return;
                }
                c.regions[(r.handle & 0xffff) as usize] = None;
                // Its unfinished jobs fail (the client library never lets
                // this happen; a hostile client may).
                let h = r.handle;
                Self::fail_where(
                    c,
                    |p| {
                        matches!(ReqOp::from_u32(p.req.op), Some(ReqOp::Send | ReqOp::Recv))
                            && p.req.handle == h
                    },
                    JobError::Deregistered,
                );
                c.finish(r.job, Ok(0));
            }
            ReqOp::Listen => {
                let mut lcfg = None;
                if r.len > 0 {
                    let mut l: ListenConfig = stack.tcp_listen_config();
                    l.backlog = (r.len as usize).min(4096);
                    lcfg = Some(l);
                }
                if r.port == 0 || c.free_socks.is_empty() {
                    let e = if r.port == 0 {
                        JobError::Invalid
                    } else {
                        JobError::Full
                    };
                    c.finish(r.job, Err(e));
                    return;
                }
                // The port authority first: not an application's, not in
                // an application's range.
                let me = Holder::Client(k as u16);
                if ports.claim(true, r.port, me).is_err() {
                    c.finish(r.job, Err(JobError::AddrInUse));
                    return;
                }
                match stack.tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, r.port), lcfg, None)
                {
                    Ok(h) => {
                        // Connections it accepts inherit the tag.
                        let _ = stack.listener_mut(h).set_tag(c.tag);
                        let id = c.new_sock(SockKind::Listener(h)).expect("checked above");
                        c.finish(r.job, Ok(u64::from(id)));
                        self.own_listener(h, k, id & 0xffff);
                    }
                    Err(e) => {
                        ports.release(true, r.port, me);
                        c.finish(r.job, Err(job_err(e)));
                    }
                }
            }
            ReqOp::Connect => {
                if c.free_socks.is_empty() {
                    c.finish(r.job, Err(JobError::Full));
                    return;
                }
                let to = SocketAddrV4::new(Ipv4Addr::from(r.addr), r.port);
                match stack.tcp_connect(to, None, now) {
                    Ok(h) => {
                        let _ = stack.tcp_mut(h).set_tag(c.tag);
                        let id = c.new_sock(SockKind::Conn(h)).expect("checked above");
                        c.count(JobCounter::Connections, 1);
                        self.own_conn(h, k, id & 0xffff);
                        let r = Req { sock: id, ..r };
                        self.try_or_wait(stack, k, Pending { req: r, done: 0 }, now);
                    }
                    Err(e) => c.finish(r.job, Err(job_err(e))),
                }
            }
            ReqOp::SetNodelay => {
                let r2 = match c.sock(r.sock) {
                    Some((_, SockKind::Conn(h))) => {
                        stack.tcp_mut(h).set_nodelay(r.len != 0).map_err(job_err)
                    }
                    _ => Err(JobError::BadSocket),
                };
                c.finish(r.job, r2.map(|_| 0));
            }
            ReqOp::Close | ReqOp::Shutdown => {
                let Some((i, kind)) = c.sock(r.sock) else {
                    c.finish(r.job, Err(JobError::BadSocket));
                    return;
                };
                let res = match (op, kind) {
                    (ReqOp::Shutdown, SockKind::Conn(h)) => {
                        stack.tcp_mut(h).shutdown(now).map_err(job_err)
                    }
                    (ReqOp::Shutdown, _) => Err(JobError::BadSocket),
                    (_, SockKind::Conn(h)) => {
                        let _ = stack.tcp_mut(h).close(now);
                        c.free_sock(i);
                        Ok(())
                    }
                    (_, SockKind::Listener(h)) => {
                        if let Ok(a) = stack.listener(h).addr() {
                            ports.release(true, a.port(), Holder::Client(k as u16));
                        }
                        let _ = stack.listener_mut(h).close(now);
                        c.free_sock(i);
                        Ok(())
                    }
                    (_, SockKind::Free) => Err(JobError::BadSocket),
                };
                if op == ReqOp::Close && res.is_ok() {
                    let s = r.sock;
                    Self::fail_where(c, |p| p.req.sock == s, JobError::Closed);
                }
                c.finish(r.job, res.map(|_| 0));
            }
            ReqOp::Accept | ReqOp::Send | ReqOp::Recv => {
                self.try_or_wait(stack, k, Pending { req: r, done: 0 }, now)
            }
        }
    }

    /// Fails (and removes) every pending job of client `c` that `f` picks.
    fn fail_where(c: &mut Client, f: impl Fn(&Pending) -> bool, e: JobError) {
        let mut i = 0;
        while i < c.pending.len() {
            if f(&c.pending[i]) {
                let p = c.take_pending(i).expect("in range");
                c.finish(p.req.job, Err(e));
            } else {
                i += 1;
            }
        }
    }

    /// A new job that waits on its socket: tried now unless an earlier job
    /// in its direction waits already.
    fn try_or_wait<N: Nic>(&mut self, stack: &mut Stack<N>, k: usize, p: Pending, now: u64) {
        let c = self.clients[k].as_mut().expect("client present");
        let tx = p.req.op == ReqOp::Send as u32;
        // Jobs of a socket whose id is stale count against the socket
        // now in its slot: they only wait longer, and fail at their turn.
        let behind = c
            .socks
            .get((p.req.sock & 0xffff) as usize)
            .is_some_and(|s| if tx { s.pend_tx > 0 } else { s.pend_rx > 0 });
        if behind {
            c.push_pending(p);
            return;
        }
        match Self::attempt(stack, c, &mut self.bounce, &p, now) {
            Tried::Done(r) => {
                c.finish(p.req.job, r);
                if let (true, Ok(id)) = (p.req.op == ReqOp::Accept as u32, r) {
                    self.own_accepted(k, id as u32);
                }
            }
            Tried::Wait(done) => c.push_pending(Pending { done, ..p }),
        }
    }

    /// Notes that the connection client `k` accepted as socket `id` is its.
    fn own_accepted(&mut self, k: usize, id: u32) {
        if let Some((_, SockKind::Conn(h))) = self.clients[k].as_ref().and_then(|c| c.sock(id)) {
            self.own_conn(h, k, id & 0xffff);
        }
    }

    /// Tries client `k`'s pending jobs whose socket had an event, oldest
    /// first, keeping each socket's order per direction.
    fn progress<N: Nic>(&mut self, stack: &mut Stack<N>, k: usize, now: u64) -> usize {
        self.pass = self.pass.wrapping_add(1).max(1);
        let pass = self.pass;
        let mut work = 0;
        let c = self.clients[k].as_mut().expect("client present");
        let mut i = 0;
        let mut accepted = std::mem::take(&mut self.accepted);
        while i < c.pending.len() {
            let p = c.pending[i];
            let si = (p.req.sock & 0xffff) as usize;
            let tx = p.req.op == ReqOp::Send as u32;
            let Some(s) = c.socks.get(si).copied() else {
                i += 1;
                continue;
            };
            let blocked = if tx { s.blocked_tx } else { s.blocked_rx } == pass;
            if !s.ready || blocked {
                if let Some(s) = c.socks.get_mut(si) {
                    if tx {
                        s.blocked_tx = pass;
                    } else {
                        s.blocked_rx = pass;
                    }
                }
                i += 1;
                continue;
            }
            work += 1;
            match Self::attempt(stack, c, &mut self.bounce, &p, now) {
                Tried::Done(r) => {
                    if p.req.op == ReqOp::Accept as u32 {
                        if let Ok(id) = r {
                            accepted.push(id as u32);
                        }
                    }
                    c.take_pending(i);
                    c.finish(p.req.job, r);
                    if let (true, Err(e)) = (p.req.op == ReqOp::Connect as u32, r) {
                        // The socket is gone with its connection: the jobs
                        // queued behind the connect (all after it) fail with
                        // it, and give their credits back.
                        let sock = p.req.sock;
                        Self::fail_where(c, |q| q.req.sock == sock, e);
                    }
                }
                Tried::Wait(done) => {
                    c.pending[i].done = done;
                    let s = &mut c.socks[si];
                    if tx {
                        s.blocked_tx = pass;
                    } else {
                        s.blocked_rx = pass;
                    }
                    i += 1;
                }
            }
        }
        for &id in &accepted {
            self.own_accepted(k, id);
        }
        accepted.clear();
        self.accepted = accepted;
        work
    }

    /// Tries one job that may wait.
    fn attempt<N: Nic>(
        stack: &mut Stack<N>,
        c: &mut Client,
        bounce: &mut [u8],
        p: &Pending,
        now: u64,
    ) -> Tried {
        let r = &p.req;
        let Some((_, kind)) = c.sock(r.sock) else {
            return Tried::Done(Err(JobError::BadSocket));
        };
        match (ReqOp::from_u32(r.op), kind) {
            (Some(ReqOp::Accept), SockKind::Listener(l)) => {
                if c.free_socks.is_empty() {
                    return Tried::Done(Err(JobError::Full));
                }
                match stack.listener_mut(l).accept(now) {
                    Ok(h) => {
                        let id = c.new_sock(SockKind::Conn(h)).expect("checked above");
                        c.count(JobCounter::Connections, 1);
                        Tried::Done(Ok(u64::from(id)))
                    }
                    Err(SocketError::WouldBlock) => Tried::Wait(0),
                    Err(e) => Tried::Done(Err(job_err(e))),
                }
            }
            (Some(ReqOp::Connect), SockKind::Conn(h)) => match stack.tcp_mut(h).state(now) {
                Ok(State::SynSent | State::SynReceived) => Tried::Wait(0),
                Ok(State::Closed) | Err(_) => {
                    let e = stack.tcp(h).error().ok().flatten();
                    let (i, _) = c.sock(r.sock).expect("checked above");
                    let _ = stack.tcp_mut(h).abort(now);
                    c.free_sock(i);
                    Tried::Done(Err(job_err(e.unwrap_or(SocketError::ConnectionRefused))))
                }
                Ok(_) => Tried::Done(Ok(u64::from(r.sock))),
            },
            (Some(ReqOp::Send), SockKind::Conn(h)) => {
                let (at, len) = match c.range(r.handle, r.off, r.len) {
                    Ok(v) => v,
                    Err(e) => return Tried::Done(Err(e)),
                };
                let done = p.done as usize;
                // Straight from the client's range into TCP's buffer,
                // through raw copies (`Span`: no reference to bytes the
                // client may write meanwhile).
                let data = &c.data;
                let from = at + done;
                let sent = stack.tcp_mut(h).send_with(len - done, now, |k, dst| {
                    // In range: checked against the section at registration.
                    data.read_into(from + k, dst);
                });
                match sent {
                    Ok(n) => {
                        c.count(JobCounter::TxBytes, n as u64);
                        if done + n == len {
                            Tried::Done(Ok(len as u64))
                        } else {
                            Tried::Wait((done + n) as u32)
                        }
                    }
                    Err(SocketError::WouldBlock | SocketError::NoBuffers) => Tried::Wait(p.done),
                    Err(e) => Tried::Done(Err(job_err(e))),
                }
            }
            (Some(ReqOp::Recv), SockKind::Conn(h)) => {
                let (at, len) = match c.range(r.handle, r.off, r.len) {
                    Ok(v) => v,
                    Err(e) => return Tried::Done(Err(e)),
                };
                if len == 0 {
                    return Tried::Done(Err(JobError::Invalid));
                }
                // Into the daemon's own bounce buffer, then copied to the
                // range (`Span::write_from`): TCP never writes to memory the
                // client may touch meanwhile.
                let n = len.min(bounce.len());
                let got = stack.tcp_mut(h).recv(&mut bounce[..n], now);
                match got {
                    Ok(n) => {
                        c.data.write_from(at, &bounce[..n]);
                        c.count(JobCounter::RxBytes, n as u64);
                        Tried::Done(Ok(n as u64))
                    }
                    Err(SocketError::WouldBlock) => Tried::Wait(0),
                    Err(e) => Tried::Done(Err(job_err(e))),
                }
            }
            _ => Tried::Done(Err(JobError::BadSocket)),
        }
    }

    /// Client `k` is gone: its connections are reset, its listeners
    /// closed, its jobs dropped, its area released.
    pub(super) fn reclaim<N: Nic>(
        &mut self,
        stack: &mut Stack<N>,
        ports: &mut Ports,
        k: usize,
    ) -> bool {
        let Some(c) = self.clients[k].take() else {
            return false;
        };
        ports.release_all(Holder::Client(k as u16));
        // Nothing it caused outlives it: the connections it closed that
        // still close go too.
        let now = stack.now();
        stack.tcp_reset_orphans_of(c.tag, now);
        let now = stack.now();
        for s in &c.socks {
            match s.kind {
                SockKind::Conn(h) => {
                    let _ = stack.tcp_mut(h).abort(now);
                }
                SockKind::Listener(h) => {
                    let _ = stack.listener_mut(h).close(now);
                }
                SockKind::Free => {}
            }
        }
        stack.nic_mut().flush();
        true
    }
}
