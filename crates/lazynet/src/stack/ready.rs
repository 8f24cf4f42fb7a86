//! Readiness: which of the sockets an application registered can be read
//! or written now, as one call's answer — what an event loop, an `epoll`
//! emulation or an async runtime sits on.
//!
//! **Owns:** the registrations (a token, an interest and a trigger per
//! socket), the sockets that may have changed since the last
//! [`Stack::ready`] (those the TCP protocol handler reported an event for,
//! every registered UDP socket, and the level-triggered ones ready last
//! time), and the rule that turns a socket's state into [`Readiness`].
//!
//! **May not touch:** protocol state (it reads through the stack's socket
//! calls), or when protocol work runs: driving the stack stays explicit
//! ([`Stack::poll`], [`Stack::tcp_service`]), and `ready` reports the
//! state that work left. A TCP channel with frames still queued (a
//! service call's work bound) is reported when its segments are processed.
//!
//! Triggers follow `epoll`'s: **level** reports a socket in every call
//! while it is ready; **edge** reports it when something happened to it
//! (TCP input or a timer, a UDP datagram arriving) and it is then ready.
//! Work bound of one call: the TCP events since the last call, the
//! registered UDP sockets, the level-triggered sockets ready last time;
//! at most `max` events are returned and the rest wait for the next call.

use super::{Stack, TcpEvent, TcpListener, TcpStream, UdpSocket};
use crate::nic::Nic;
use crate::stack::SocketError;

/// A socket of a stack, whatever its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SocketId {
    /// A TCP connection.
    Tcp(TcpStream),
    /// A TCP listener.
    Listener(TcpListener),
    /// A UDP socket.
    Udp(UdpSocket),
}

impl From<TcpStream> for SocketId {
    fn from(h: TcpStream) -> Self {
        SocketId::Tcp(h)
    }
}

impl From<TcpListener> for SocketId {
    fn from(h: TcpListener) -> Self {
        SocketId::Listener(h)
    }
}

impl From<UdpSocket> for SocketId {
    fn from(h: UdpSocket) -> Self {
        SocketId::Udp(h)
    }
}

/// What a registration wants to hear about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Interest(u8);

impl Interest {
    /// Data, end of stream or a connection to accept.
    pub const READABLE: Interest = Interest(1);
    /// Room to send.
    pub const WRITABLE: Interest = Interest(2);
    /// Both.
    pub const BOTH: Interest = Interest(3);

    /// Whether `self` includes `other`.
    pub const fn contains(self, other: Interest) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Interest {
    type Output = Interest;
    fn bitor(self, o: Interest) -> Interest {
        Interest(self.0 | o.0)
    }
}

/// What a socket can do now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Readiness(u8);

impl Readiness {
    /// Nothing.
    pub const EMPTY: Readiness = Readiness(0);
    /// A read would not block: data, end of stream, an error, or (a
    /// listener) a connection to accept, (UDP) a datagram.
    pub const READABLE: Readiness = Readiness(1);
    /// A write would not block: room in the send buffer, or an error.
    pub const WRITABLE: Readiness = Readiness(2);
    /// The peer sent its FIN: no more data will come (`EPOLLRDHUP`).
    pub const READ_CLOSED: Readiness = Readiness(4);
    /// The connection failed (refused, reset, timed out).
    pub const ERROR: Readiness = Readiness(8);

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: Readiness) -> bool {
        self.0 & other.0 == other.0
    }
    /// Whether reading would not block.
    pub const fn is_readable(self) -> bool {
        self.contains(Readiness::READABLE)
    }
    /// Whether writing would not block.
    pub const fn is_writable(self) -> bool {
        self.contains(Readiness::WRITABLE)
    }
    /// Whether the peer closed its side.
    pub const fn is_read_closed(self) -> bool {
        self.contains(Readiness::READ_CLOSED)
    }
    /// Whether the connection failed.
    pub const fn is_error(self) -> bool {
        self.contains(Readiness::ERROR)
    }
    /// Whether nothing is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// The bits `interest` asks for; errors and the peer's close always
    /// pass, as in `epoll`.
    const fn masked(self, interest: Interest) -> Readiness {
        Readiness(self.0 & (interest.0 | Readiness::READ_CLOSED.0 | Readiness::ERROR.0))
    }
}

impl std::ops::BitOr for Readiness {
    type Output = Readiness;
    fn bitor(self, o: Readiness) -> Readiness {
        Readiness(self.0 | o.0)
    }
}

/// When a registration is reported (`epoll`'s `EPOLLET` or not).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// In every [`Stack::ready`] while the socket is ready.
    #[default]
    Level,
    /// When something happened to the socket and it is then ready.
    Edge,
}

/// One ready socket, as [`Stack::ready`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// The registration's token.
    pub token: u64,
    /// The socket.
    pub socket: SocketId,
    /// What it can do (masked by the registration's interest; errors and
    /// the peer's close always shown).
    pub readiness: Readiness,
}

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Reg {
    socket: SocketId,
    token: u64,
    interest: Interest,
    trigger: Trigger,
    /// On the to-do list (at most once).
    queued: bool,
    /// Something happened since it was last looked at (for edge).
    happened: bool,
    /// UDP: datagrams pending when last looked at (an edge is more).
    pending: usize,
}

/// The registrations of one stack (see the module docs).
#[derive(Debug, Default)]
pub(in crate::stack) struct Registry {
    regs: Vec<Option<Reg>>,
    free: Vec<u32>,
    /// Registration of each connection, listener and UDP slot, by index.
    by_conn: Vec<u32>,
    by_listener: Vec<u32>,
    by_udp: Vec<u32>,
    /// Registered UDP sockets (looked at in every call: UDP has no events).
    udp: Vec<u32>,
    /// To look at in the next call.
    todo: Vec<u32>,
    /// Reused: the TCP events taken in one call.
    events: Vec<TcpEvent>,
}

impl Registry {
    fn slot_of(&mut self, s: SocketId) -> &mut u32 {
        let (v, i) = match s {
            SocketId::Tcp(h) => (&mut self.by_conn, h.index()),
            SocketId::Listener(h) => (&mut self.by_listener, h.index()),
            SocketId::Udp(h) => (&mut self.by_udp, h.0),
        };
        let i = i as usize;
        if v.len() <= i {
            v.resize(i + 1, NONE);
        }
        &mut v[i]
    }

    fn get(&self, s: SocketId) -> Option<u32> {
        let (v, i) = match s {
            SocketId::Tcp(h) => (&self.by_conn, h.index()),
            SocketId::Listener(h) => (&self.by_listener, h.index()),
            SocketId::Udp(h) => (&self.by_udp, h.0),
        };
        let r = *v.get(i as usize)?;
        // The registration must be this socket's, not an earlier holder's
        // of the slot.
        match self.regs.get(r as usize)? {
            Some(reg) if reg.socket == s => Some(r),
            _ => None,
        }
    }

    fn push_todo(&mut self, r: u32, happened: bool) {
        if let Some(Some(reg)) = self.regs.get_mut(r as usize) {
            reg.happened |= happened;
            if !reg.queued {
                reg.queued = true;
                self.todo.push(r);
            }
        }
    }

    /// Forgets socket `s` (it is closed, or its slot freed).
    pub(in crate::stack) fn forget(&mut self, s: SocketId) {
        let Some(r) = self.get(s) else { return };
        *self.slot_of(s) = NONE;
        self.regs[r as usize] = None;
        self.free.push(r);
        if matches!(s, SocketId::Udp(_)) {
            self.udp.retain(|&x| x != r);
        }
        self.todo.retain(|&x| x != r);
    }
}

impl<N: Nic> Stack<N> {
    /// Registers socket `s`: [`Stack::ready`] reports it with `token` when
    /// it is ready for `interest`, in every call while it is (level) or
    /// when something happened to it (edge). Registering again replaces
    /// the registration. Its current state is reported by the next call.
    pub fn register(
        &mut self,
        s: impl Into<SocketId>,
        token: u64,
        interest: Interest,
        trigger: Trigger,
    ) -> Result<(), SocketError> {
        let s = s.into();
        self.readiness(s)?;
        let reg = Reg {
            socket: s,
            token,
            interest,
            trigger,
            queued: false,
            happened: true,
            pending: 0,
        };
        let rg = &mut self.registry;
        let r = match rg.get(s) {
            Some(r) => {
                let q = rg.regs[r as usize].is_some_and(|x| x.queued);
                rg.regs[r as usize] = Some(Reg { queued: q, ..reg });
                r
            }
            None => {
                let r = match rg.free.pop() {
                    Some(r) => {
                        rg.regs[r as usize] = Some(reg);
                        r
                    }
                    None => {
                        rg.regs.push(Some(reg));
                        (rg.regs.len() - 1) as u32
                    }
                };
                *rg.slot_of(s) = r;
                if matches!(s, SocketId::Udp(_)) {
                    rg.udp.push(r);
                }
                r
            }
        };
        rg.push_todo(r, true);
        Ok(())
    }

    /// Forgets socket `s`'s registration (closing a socket does too).
    pub fn deregister(&mut self, s: impl Into<SocketId>) {
        self.registry.forget(s.into());
    }

    /// What socket `s` can do now (see [`Readiness`]).
    pub fn readiness(&self, s: impl Into<SocketId>) -> Result<Readiness, SocketError> {
        Ok(match s.into() {
            SocketId::Tcp(h) => {
                let c = self.tcp(h);
                let (err, fin, queued, space, may_send) = c.inspect(|c| {
                    (
                        c.error().is_some(),
                        c.fin_received(),
                        c.recv_queue(),
                        c.send_space(),
                        c.may_send(),
                    )
                })?;
                let closed = c.inspect(|c| c.state() == crate::proto::tcp::State::Closed)?;
                let mut r = Readiness::EMPTY;
                if queued > 0 || fin || err || closed {
                    r = r | Readiness::READABLE;
                }
                if (may_send && space > 0) || err || closed {
                    r = r | Readiness::WRITABLE;
                }
                if fin {
                    r = r | Readiness::READ_CLOSED;
                }
                if err {
                    r = r | Readiness::ERROR;
                }
                r
            }
            SocketId::Listener(h) => {
                if self.listener(h).accept_queue_len()? > 0 {
                    Readiness::READABLE
                } else {
                    Readiness::EMPTY
                }
            }
            SocketId::Udp(h) => {
                let pending = self.udp(h).pending()?;
                let r = Readiness::WRITABLE;
                if pending > 0 {
                    r | Readiness::READABLE
                } else {
                    r
                }
            }
        })
    }

    /// Appends the registered sockets that are ready to `out` (at most
    /// `max`; the rest wait for the next call), and returns how many it
    /// appended. Takes the TCP protocol handler's events
    /// ([`Stack::tcp_take_events`]): a program that uses readiness does
    /// not take them itself. Allocation-free once its lists have grown to
    /// the number of registrations.
    pub fn ready(&mut self, out: &mut Vec<Event>, max: usize) -> usize {
        let mut events = std::mem::take(&mut self.registry.events);
        self.tcp_take_events(&mut events);
        for e in events.drain(..) {
            let s = match e {
                TcpEvent::Conn(h) => SocketId::Tcp(h),
                TcpEvent::Listener(h) => SocketId::Listener(h),
            };
            if let Some(r) = self.registry.get(s) {
                self.registry.push_todo(r, true);
            }
        }
        self.registry.events = events;
        for i in 0..self.registry.udp.len() {
            let r = self.registry.udp[i];
            self.registry.push_todo(r, false);
        }
        let mut n = 0;
        let mut todo = std::mem::take(&mut self.registry.todo);
        let mut keep = 0;
        for k in 0..todo.len() {
            let r = todo[k];
            let Some(Some(reg)) = self.registry.regs.get(r as usize).copied() else {
                continue;
            };
            if n >= max {
                todo[keep] = r;
                keep += 1;
                continue;
            }
            let Ok(now) = self.readiness(reg.socket) else {
                // Closed under the registration: gone.
                self.registry.forget(reg.socket);
                continue;
            };
            let mut happened = reg.happened;
            let mut pending = reg.pending;
            if let SocketId::Udp(h) = reg.socket {
                let p = self.udp(h).pending().unwrap_or(0);
                happened |= p > pending;
                pending = p;
            }
            let shown = now.masked(reg.interest);
            let report = !shown.is_empty() && (reg.trigger == Trigger::Level || happened);
            if report {
                out.push(Event {
                    token: reg.token,
                    socket: reg.socket,
                    readiness: shown,
                });
                n += 1;
            }
            // A level-triggered socket that is ready is looked at again
            // next time (UDP sockets are anyway).
            let again =
                report && reg.trigger == Trigger::Level && !matches!(reg.socket, SocketId::Udp(_));
            if let Some(Some(x)) = self.registry.regs.get_mut(r as usize) {
                x.happened = false;
                x.pending = pending;
                x.queued = again;
            }
            if again {
                todo[keep] = r;
                keep += 1;
            }
        }
        todo.truncate(keep);
        // Registrations queued meanwhile (none: nothing above registers).
        todo.append(&mut self.registry.todo);
        self.registry.todo = todo;
        n
    }
}

/// What [`Stack::sleep_begin`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sleep {
    /// Frames wait: drive the stack instead of sleeping.
    Busy,
    /// Sleep on [`Stack::wait_fd`] until it is readable or the stack's
    /// clock reaches this time (`None`: no deadline), then call
    /// [`Stack::sleep_end`].
    Until(Option<u64>),
}

impl<N: Nic> Stack<N> {
    /// A descriptor to put in the caller's own `poll`/`epoll` (or an async
    /// reactor): readable when the NIC may have frames, once
    /// [`Stack::sleep_begin`] announced the sleep. `None` where the NIC
    /// can only sleep in [`Nic::wait`] (a wire end attached from another
    /// process, an attached stack's area).
    pub fn wait_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.iface.nic.wait_fd()
    }

    /// The earliest time (stack clock) work is due without any input: the
    /// next TCP timer, and the ARP and reassembly sweep while either has
    /// work pending.
    pub fn next_deadline(&self) -> Option<u64> {
        // Resolutions with frames waiting (retransmissions, give-up) and
        // datagrams half reassembled (their timeout) need the sweep; an
        // idle cache ages as well when the sweep comes later.
        let sweep = (self.iface.arp.waiting_total() > 0 || self.reasm.in_progress() > 0)
            .then_some(self.next_timer);
        match (self.tcp_next_timeout(), sweep) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Before sleeping on [`Stack::wait_fd`]: hands the NIC what is
    /// queued to send, announces the sleep, and says how long it may last
    /// (until [`Stack::next_deadline`]), or [`Sleep::Busy`] if frames
    /// already wait. The caller sleeps, then calls [`Stack::sleep_end`].
    pub fn sleep_begin(&mut self) -> Sleep {
        self.iface.flush_release();
        self.iface.nic.flush();
        if !self.iface.nic.wait_begin() {
            return Sleep::Busy;
        }
        Sleep::Until(self.next_deadline())
    }

    /// Ends a sleep begun with [`Stack::sleep_begin`].
    pub fn sleep_end(&mut self) {
        self.iface.nic.wait_end();
    }
}
