//! The application's side of the multi-process placement: a [`Stack`]
//! attached to a lazynet daemon ([`Stack::attach`]).
//!
//! The daemon plays `ni-lrp`'s NI for this process: it owns the real NIC,
//! classifies every frame, and copies the frames for this application into
//! the application's own communication area ([`crate::mem::area`]), onto
//! the ring of the socket's channel slot, dropping them there when that
//! ring is full. Everything else is `ni-lrp` unchanged: the stack's
//! classifier holds the inbound ends of the slot rings as its channels'
//! links, notifying channels come through the `ready` ring and the slots'
//! ready flags, and binds and unbinds are mirrored as commands (here on the
//! area's `cmd` ring rather than an in-process queue). Protocol work runs
//! in this process, at its priority, charged to it.
//!
//! **[`AreaNic`] owns** the application's ends of the `free`, `tx` and
//! `done` rings and the buffers this process holds: all of the pool at
//! the start. It gives the daemon buffers to receive into (`free`), hands
//! it frames to send (`tx`), and takes back the buffers of sent frames
//! (`done`). It sleeps on the area's application doorbell.
//!
//! **[`DaemonLink`] owns** the `cmd` and `reply` rings, the slot
//! allocator, and the control connection, whose closing is how the daemon
//! learns that this process is gone. A slot returns to the allocator only
//! after its retired ring was drained, so a slot's ring never has two
//! consumers.
//!
//! **May not touch:** the daemon's memory (there is none in the area) or
//! another application's area (it never has it).

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use super::ni::{BindKind, NiLink, NiStats, RemoteNi};
use super::{ReceiveMode, Stack, StackConfig};
use crate::ctl::{self, Msg, Welcome};
use crate::demux::{ChannelId, DemuxStats, DropReason, Link, CONTROL, FRAGMENT};
use crate::mem::area::{AppCounter, Cmd, Op, Refusal, Reply};
use crate::mem::{AppArea, BufArea, Consumer, Desc, Doorbell, Producer};
use crate::nic::Nic;
use crate::stack::SocketError;
use crate::sys::EventFd;

/// How long a command waits for room on the `cmd` ring or for its reply
/// before the daemon is taken to be gone.
const DAEMON_TIMEOUT: Duration = Duration::from_secs(2);

/// The NIC an attached stack sees: its communication area.
pub struct AreaNic {
    mac: [u8; 6],
    mtu: usize,
    bufs: BufArea,
    nbufs: u32,
    area: AppArea,
    free: Producer<u32>,
    tx: Producer<Desc>,
    done: Consumer<u32>,
    /// Buffers this process holds and nobody uses (capacity: the pool).
    local: Vec<u32>,
    bell: Doorbell,
    daemon: Doorbell,
    /// The daemon's delivery count when we last received.
    seen: u64,
    /// Something was published for the daemon since the last ring.
    ring_due: bool,
    /// Buffer numbers the daemon handed back that name nothing.
    bad_returns: u64,
}

impl std::fmt::Debug for AreaNic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AreaNic")
            .field("local", &self.local.len())
            .finish()
    }
}

impl AreaNic {
    /// Takes back the buffers the daemon is done with.
    fn reclaim(&mut self) {
        let mut b = [0u32; 64];
        for _ in 0..(self.nbufs as usize).div_ceil(64) {
            let n = self.done.pop(&mut b);
            for &x in &b[..n] {
                self.keep(x);
            }
            if n < b.len() {
                break;
            }
        }
    }

    #[inline]
    fn keep(&mut self, x: u32) {
        // Never more than the pool: a number twice (a bug or a hostile
        // daemon) is dropped rather than grow the list.
        if x < self.nbufs && self.local.len() < self.nbufs as usize {
            self.local.push(x);
        } else {
            self.bad_returns += 1;
        }
    }

    /// Tops up the daemon's supply of receive buffers, keeping a quarter
    /// of the pool here for transmissions.
    fn refill(&mut self) {
        let keep = self.nbufs as usize / 4;
        let room = self.free.free();
        let give = room.min(self.local.len().saturating_sub(keep));
        if give == 0 {
            return;
        }
        let from = self.local.len() - give;
        let n = self.free.push(&self.local[from..]);
        self.local.truncate(from + (give - n));
        if n > 0 {
            self.ring_due = true;
        }
    }

    /// Buffer numbers from the daemon that named nothing (0 with an honest
    /// daemon).
    pub fn bad_returns(&self) -> u64 {
        self.bad_returns
    }

    /// The area (tests, statistics).
    pub fn area(&self) -> &AppArea {
        &self.area
    }
}

impl Nic for AreaNic {
    fn mac(&self) -> [u8; 6] {
        self.mac
    }
    fn mtu(&self) -> usize {
        self.mtu
    }
    fn buffers(&self) -> &BufArea {
        &self.bufs
    }
    fn buffers_mut(&mut self) -> &mut BufArea {
        &mut self.bufs
    }
    /// Nothing: frames arrive on the slot rings. Notes what was delivered.
    fn recv(&mut self, _out: &mut [Desc]) -> usize {
        self.seen = self.area.published().delivered();
        0
    }
    fn alloc(&mut self, out: &mut [u32]) -> usize {
        if self.local.len() < out.len() {
            self.reclaim();
        }
        let n = out.len().min(self.local.len());
        let from = self.local.len() - n;
        out[..n].copy_from_slice(&self.local[from..]);
        self.local.truncate(from);
        n
    }
    fn send(&mut self, frames: &[Desc]) -> usize {
        let n = self.tx.push(frames);
        if n > 0 {
            self.ring_due = true;
        }
        n
    }
    fn release(&mut self, bufs: &[Desc]) {
        for d in bufs {
            self.keep(d.buf);
        }
    }
    fn flush(&mut self) {
        self.reclaim();
        self.refill();
        if std::mem::take(&mut self.ring_due) {
            self.daemon.ring();
        }
    }
    fn rx_ready(&mut self) -> bool {
        self.area.published().delivered() != self.seen
    }
    fn wait(&mut self, timeout_ns: Option<u64>) {
        self.flush();
        self.bell.arm();
        let p = self.area.published();
        let seen = self.seen;
        self.bell.sleep(Some(timeout_ns.unwrap_or(1_000_000)), || {
            p.delivered() == seen
        });
    }
    fn cross_core_buffers(&self) -> bool {
        true
    }
    fn doorbell(&self) -> Option<Doorbell> {
        Some(self.bell.clone())
    }
    fn driver_stats(&self) -> Option<String> {
        let p = self.area.published();
        let mut s = String::from("daemon:");
        for c in AppCounter::ALL {
            s.push_str(&format!(" {}={}", c.name(), p.counter(c)));
        }
        Some(s)
    }
}

/// The control side of an attached stack (see the module docs).
pub(super) struct DaemonLink {
    area: AppArea,
    cmd: Producer<Cmd>,
    reply: Consumer<Reply>,
    daemon: Doorbell,
    bell: Doorbell,
    /// The control connection: closing it detaches; its hang-up is how
    /// this side learns that the daemon is gone.
    ctl: OwnedFd,
    sent: u64,
    free_slots: Vec<u32>,
    /// Per bound channel: its slot and the sequence number of its bind.
    slots: HashMap<u32, (u32, u64)>,
    /// Channels whose bind the daemon refused, not yet taken
    /// ([`DaemonLink::take_refused`]); at most one per slot.
    refused: Vec<u32>,
}

impl DaemonLink {
    fn sent(&self) -> u64 {
        self.sent
    }

    fn applied(&self) -> u64 {
        self.area.published().applied()
    }

    /// Sleeps on this process's doorbell while `waiting` holds, at most a
    /// millisecond (the daemon rings it after applying commands and
    /// posting replies). `Err` once the daemon is gone, or after
    /// [`DAEMON_TIMEOUT`] from `t0` (a daemon stopped with SIGSTOP).
    fn wait_daemon(&self, t0: Instant, waiting: impl Fn() -> bool) -> Result<(), SocketError> {
        if ctl::peer_gone(&self.ctl) {
            return Err(SocketError::NotConnected);
        }
        if t0.elapsed() > DAEMON_TIMEOUT {
            return Err(SocketError::TimedOut);
        }
        self.daemon.wake();
        self.bell.arm();
        self.bell.sleep(Some(1_000_000), waiting);
        Ok(())
    }

    /// Pushes a command, waiting (bounded, on the doorbell) for room.
    fn push(&mut self, mut c: Cmd) -> Result<u64, SocketError> {
        self.sent += 1;
        c.seq = self.sent as u32;
        let t0 = Instant::now();
        while self.cmd.push_one(c).is_err() {
            let cmd = &self.cmd;
            self.wait_daemon(t0, || cmd.peek_free() == 0)?;
        }
        self.daemon.wake();
        Ok(self.sent)
    }

    /// Waits (bounded, on the doorbell) for the reply to command `seq`.
    /// Refusals of other commands met meanwhile are kept for
    /// [`DaemonLink::take_refused`].
    fn reply(&mut self, seq: u64) -> Result<u32, SocketError> {
        let t0 = Instant::now();
        loop {
            while let Some(r) = self.reply.pop_one() {
                if r.seq == seq as u32 {
                    return Ok(r.code);
                }
                self.note_refusal(r);
            }
            let reply = &self.reply;
            self.wait_daemon(t0, || reply.peek_len() == 0)?;
        }
    }

    /// A reply to a command nobody waits for: a refused connection bind,
    /// if it is still the channel's current binding, is kept.
    fn note_refusal(&mut self, r: Reply) {
        let conn = Op::from_u32(r.op) == Some(Op::Conn);
        let current = self
            .slots
            .get(&r.id)
            .is_some_and(|&(_, seq)| seq as u32 == r.seq);
        if r.code != 0 && conn && current && self.refused.len() < self.slots.len() {
            self.refused.push(r.id);
        }
    }

    /// Moves the channels whose connection bind the daemon refused to
    /// `out` (replies waiting on the ring included; bounded by it).
    fn take_refused(&mut self, out: &mut Vec<u32>) {
        for _ in 0..self.reply.capacity() {
            let Some(r) = self.reply.pop_one() else { break };
            self.note_refusal(r);
        }
        out.append(&mut self.refused);
    }

    fn bind(&mut self, chan: ChannelId, kind: &BindKind) -> Result<Link, SocketError> {
        let slot = self.free_slots.pop().ok_or(SocketError::NoBuffers)?;
        let r = self.bind_slot(chan, slot, kind);
        match &r {
            Ok(_) => {
                self.slots.insert(chan.0, (slot, self.sent));
            }
            Err(_) => self.free_slots.push(slot),
        }
        r
    }

    fn bind_slot(
        &mut self,
        chan: ChannelId,
        slot: u32,
        kind: &BindKind,
    ) -> Result<Link, SocketError> {
        let flag = self.area.flag(slot).map_err(|_| SocketError::NoBuffers)?;
        // The slot's earlier binding is gone on both sides (its unbind was
        // applied before the slot came back): nothing arms it meanwhile.
        flag.disarm();
        let ring = Consumer::attach(self.area.region(), self.area.layout().slot(slot))
            .map_err(|_| SocketError::NoBuffers)?;
        let mut c = cmd_for(kind, false);
        c.slot = slot;
        c.id = chan.0;
        let op = Op::from_u32(c.op).expect("cmd_for gives valid operations");
        let seq = self.push(c)?;
        if op.needs_reply() {
            match Refusal::from_code(self.reply(seq)?) {
                None => {}
                Some(Refusal::InUse) => return Err(SocketError::AddrInUse),
                Some(Refusal::NotOurAddress) => return Err(SocketError::AddrNotAvailable),
                Some(Refusal::Full) => return Err(SocketError::NoBuffers),
                Some(Refusal::Invalid) => return Err(SocketError::BadHandle),
            }
        }
        Ok(Link::Inbound { ring, flag })
    }

    fn unbind(&mut self, kind: &BindKind) {
        // A daemon that is gone no longer delivers anything: nothing to
        // retire against, and the slot's ring is drained locally anyway.
        let _ = self.push(cmd_for(kind, true));
    }

    /// The slot of channel `c`, forgotten (it is being retired).
    fn slot_of(&mut self, c: ChannelId) -> Option<u32> {
        self.slots.remove(&c.0).map(|(s, _)| s)
    }

    fn free_slot(&mut self, s: u32) {
        self.free_slots.push(s);
    }

    fn snapshot(&self) -> NiStats {
        let p = self.area.published();
        let c = |x| p.counter(x);
        let delivered = c(AppCounter::Delivered);
        let full = c(AppCounter::DropSlotFull) + c(AppCounter::DropNoBuffer);
        let mut demux = DemuxStats {
            frames: delivered + full,
            enqueued: delivered,
            ..DemuxStats::default()
        };
        demux.drops[DropReason::ChannelFull as usize] = full;
        NiStats {
            rx_frames: delivered + full,
            demux,
            bad_descriptors: c(AppCounter::BadDescriptor),
            tx_forwarded: c(AppCounter::TxFrames)
                .saturating_sub(c(AppCounter::TxSpoofed) + c(AppCounter::TxDropped)),
            tx_dropped: c(AppCounter::TxSpoofed) + c(AppCounter::TxDropped),
            tx_retries: 0,
            commands_applied: p.applied(),
            command_errors: c(AppCounter::CmdRefused),
        }
    }
}

/// The daemon as the host side of `ni-lrp` sees it (the calls above).
impl RemoteNi for DaemonLink {
    fn sent(&self) -> u64 {
        DaemonLink::sent(self)
    }
    fn applied(&self) -> u64 {
        DaemonLink::applied(self)
    }
    fn bind(&mut self, chan: ChannelId, kind: &BindKind) -> Result<Link, SocketError> {
        DaemonLink::bind(self, chan, kind)
    }
    fn unbind(&mut self, kind: &BindKind) {
        DaemonLink::unbind(self, kind)
    }
    fn slot_of(&mut self, c: ChannelId) -> Option<u32> {
        DaemonLink::slot_of(self, c)
    }
    fn free_slot(&mut self, s: u32) {
        DaemonLink::free_slot(self, s)
    }
    fn take_refused(&mut self, out: &mut Vec<u32>) {
        DaemonLink::take_refused(self, out)
    }
    fn snapshot(&self) -> NiStats {
        DaemonLink::snapshot(self)
    }
}

/// The command for a binding (or its removal).
fn cmd_for(kind: &BindKind, off: bool) -> Cmd {
    let (op, l, r) = match *kind {
        BindKind::Udp(a, p) => (
            if off { Op::UnbindUdp } else { Op::BindUdp },
            (a, p),
            (std::net::Ipv4Addr::UNSPECIFIED, 0),
        ),
        BindKind::Listen(a, p) => (
            if off { Op::Unlisten } else { Op::Listen },
            (a, p),
            (std::net::Ipv4Addr::UNSPECIFIED, 0),
        ),
        BindKind::Conn(lo, re) => (
            if off { Op::Unconn } else { Op::Conn },
            (*lo.ip(), lo.port()),
            (*re.ip(), re.port()),
        ),
    };
    Cmd {
        op: op as u32,
        laddr: u32::from(l.0),
        lport: l.1,
        raddr: u32::from(r.0),
        rport: r.1,
        ..Cmd::default()
    }
}

fn bad(m: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m.into())
}

impl Stack<AreaNic> {
    /// Attaches to the lazynet daemon listening at `path`: receives this
    /// process's communication area and runs the stack on it (`cfg`'s
    /// address, prefix and mode are the daemon's; the rest applies).
    pub fn attach(path: &Path, cfg: StackConfig) -> io::Result<Stack<AreaNic>> {
        Self::attach_with(path, cfg, Ok)
    }
}

impl<N: Nic> Stack<N> {
    /// [`Stack::attach`], the area's NIC wrapped by `wrap` (a capture, a
    /// boxed NIC).
    pub fn attach_with(
        path: &Path,
        cfg: StackConfig,
        wrap: impl FnOnce(AreaNic) -> io::Result<N>,
    ) -> io::Result<Stack<N>> {
        let conn = ctl::connect(path)?;
        ctl::send(&conn, &Msg::Hello, &[])?;
        let (w, mut fds) = match ctl::recv(&conn)? {
            Some((Ok(Msg::Welcome(w)), fds)) if fds.len() == 2 => (w, fds),
            Some((Ok(Msg::Refused(e)), _)) => {
                return Err(io::Error::other(format!("the daemon refused: {e:?}")))
            }
            other => return Err(bad(format!("unexpected answer {other:?}"))),
        };
        let ev = EventFd::from_fd(fds.pop().expect("two descriptors"));
        let area = AppArea::open(fds.pop().expect("two descriptors"))?;
        Self::on_area(area, std::sync::Arc::new(ev), conn, w, cfg, wrap)
    }

    fn on_area(
        area: AppArea,
        ev: std::sync::Arc<EventFd>,
        conn: OwnedFd,
        w: Welcome,
        cfg: StackConfig,
        wrap: impl FnOnce(AreaNic) -> io::Result<N>,
    ) -> io::Result<Stack<N>> {
        let l = *area.layout();
        let p = l.params;
        if p.slots < 3 {
            return Err(bad("an area needs at least three slots"));
        }
        let region = area.region().clone();
        let daemon = area.daemon_bell(ev)?;
        let bell = area.app_bell()?;
        let nic = AreaNic {
            mac: w.mac,
            mtu: usize::from(w.mtu),
            bufs: area.bufs()?,
            nbufs: p.bufs,
            area: area.clone(),
            free: Producer::attach(&region, l.free)?,
            tx: Producer::attach(&region, l.tx)?,
            done: Consumer::attach(&region, l.done)?,
            local: (0..p.bufs).rev().collect(),
            bell: bell.clone(),
            daemon: daemon.clone(),
            seen: 0,
            ring_due: false,
            bad_returns: 0,
        };
        let mut nic = nic;
        // Receive buffers for the daemon from the start, before any poll.
        nic.flush();
        let link = DaemonLink {
            cmd: Producer::attach(&region, l.cmd)?,
            reply: Consumer::attach(&region, l.reply)?,
            area: area.clone(),
            daemon,
            bell,
            ctl: conn,
            sent: 0,
            free_slots: (2..p.slots).rev().collect(),
            slots: HashMap::new(),
            refused: Vec::with_capacity(p.slots as usize),
        };
        // Ephemeral ports from this application's own range: the daemon
        // accepts connections and wildcard binds from it only there.
        let mut stack = Stack::new(
            wrap(nic)?,
            StackConfig {
                mode: ReceiveMode::SoftLrp,
                addr: w.addr,
                prefix_len: w.prefix_len,
                gateway: w.gateway,
                ephemeral_ports: (w.eph_first, w.eph_last),
                // Every connection holds a slot of the area until it is
                // freed: orphans may take at most half of them, so that new
                // connections always find one.
                max_orphans: cfg.max_orphans.min((p.slots as usize - 2) / 2),
                ..cfg
            },
        );
        stack.mode = ReceiveMode::NiLrp;
        for (c, slot) in [(CONTROL, 0), (FRAGMENT, 1)] {
            let ring = Consumer::attach(&region, l.slot(slot))?;
            let flag = area.flag(slot)?;
            stack.demux.attach_link(c, Link::Inbound { ring, flag });
        }
        stack
            .demux
            .set_ready_inbound(Consumer::attach(&region, l.ready)?);
        stack.ni = Some(Box::new(NiLink::remote(Box::new(link))));
        Ok(stack)
    }
}
