//! The shared state behind [`crate::Net`]: the stack, a waker slot per
//! socket, and the driver's turn. Socket types reach it through the
//! object-safe [`Core`], so they carry no NIC type parameter.

use std::io;
use std::net::SocketAddrV4;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use lazynet::nic::Nic;
use lazynet::proto::tcp::State;
use lazynet::socket::SocketError;
use lazynet::stack::ready::{Event, Interest, Sleep, SocketId, Trigger};
use lazynet::stack::{
    Stack, TcpListener as StackListener, TcpStream as StackStream, UdpSocket as StackUdp,
};
use tokio::sync::Notify;

/// No slot (`Inner::by_conn`).
const NO_SLOT: u32 = u32::MAX;

/// A socket of [`Core`]: its waker slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sock(u32);

#[derive(Default)]
struct Slot {
    socket: Option<SocketId>,
    read: Option<Waker>,
    write: Option<Waker>,
}

/// What the socket types call (see the module docs). Each call is one
/// socket call on the stack; a `poll_*` that would block leaves its waker
/// in the socket's slot, and the driver wakes it when the ready set names
/// the socket.
pub(crate) trait Core {
    fn tcp_listen(&mut self, addr: SocketAddrV4, backlog: usize) -> io::Result<Sock>;
    fn tcp_connect(&mut self, addr: SocketAddrV4) -> io::Result<Sock>;
    fn poll_connected(&mut self, s: Sock, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
    fn poll_accept(&mut self, s: Sock, cx: &mut Context<'_>) -> Poll<io::Result<Sock>>;
    fn poll_read(
        &mut self,
        s: Sock,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>>;
    fn poll_write(&mut self, s: Sock, cx: &mut Context<'_>, data: &[u8])
        -> Poll<io::Result<usize>>;
    fn shutdown(&mut self, s: Sock) -> io::Result<()>;
    fn set_nodelay(&mut self, s: Sock, on: bool) -> io::Result<()>;
    fn udp_bind(&mut self, addr: SocketAddrV4) -> io::Result<Sock>;
    fn poll_send_to(
        &mut self,
        s: Sock,
        cx: &mut Context<'_>,
        data: &[u8],
        dst: SocketAddrV4,
    ) -> Poll<io::Result<usize>>;
    fn poll_recv_from(
        &mut self,
        s: Sock,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddrV4)>>;
    /// The socket's local address and its peer's (if connected).
    fn addrs(&self, s: Sock) -> io::Result<(SocketAddrV4, Option<SocketAddrV4>)>;
    /// Closes the socket (TCP: gracefully, or with a reset if `abort`)
    /// and frees its slot.
    fn close(&mut self, s: Sock, abort: bool);
}

pub(crate) struct Inner<N: Nic> {
    pub(crate) stack: Stack<N>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// The slot of each TCP connection, by its index in the stack's table
    /// (`NO_SLOT`: none): which reader to hand a connection's frames to.
    by_conn: Vec<u32>,
    events: Vec<Event>,
    events_per_turn: usize,
    /// UDP sends that found no transmit buffer: woken after the next turn.
    udp_blocked: Vec<Waker>,
    /// The driver sleeps until this deadline (`Some(None)`: none).
    sleeping: Option<Option<u64>>,
    /// Ends the driver's sleep when a call moved the next deadline
    /// earlier (a first retransmission timer, a connect's).
    pub(crate) kick: Rc<Notify>,
}

impl<N: Nic> Inner<N> {
    pub(crate) fn new(stack: Stack<N>, events_per_turn: usize) -> Self {
        Inner {
            stack,
            slots: Vec::new(),
            free: Vec::new(),
            by_conn: Vec::new(),
            events: Vec::with_capacity(events_per_turn),
            events_per_turn,
            udp_blocked: Vec::new(),
            sleeping: None,
            kick: Rc::new(Notify::new()),
        }
    }

    /// One driver turn: receive, TCP service, the ready set and the wakes
    /// it calls for. Returns whether anything happened, and the time.
    pub(crate) fn turn(&mut self, budget: usize) -> (bool, u64) {
        let now = self.stack.now();
        let rx = self.stack.poll(now).received;
        // A connection whose reader waits gets its frames unprocessed:
        // the woken read does their protocol work (LRP §3.4) and places
        // their text straight into the task's buffer.
        let (slots, by_conn) = (&mut self.slots, &self.by_conn);
        let work = self.stack.tcp_service_deferring(now, budget, |c| {
            let Some(&i) = by_conn.get(c.index() as usize) else {
                return false;
            };
            match slots.get_mut(i as usize) {
                Some(slot) if slot.socket == Some(SocketId::Tcp(c)) => match slot.read.take() {
                    Some(w) => {
                        w.wake();
                        true
                    }
                    None => false,
                },
                _ => false,
            }
        });
        self.events.clear();
        let n = self.stack.ready(&mut self.events, self.events_per_turn);
        for e in &self.events {
            let Some(slot) = self.slots.get_mut(e.token as usize) else {
                continue;
            };
            if slot.socket != Some(e.socket) {
                continue;
            }
            let r = e.readiness;
            if r.is_readable() || r.is_read_closed() || r.is_error() {
                if let Some(w) = slot.read.take() {
                    w.wake();
                }
            }
            if r.is_writable() || r.is_error() {
                if let Some(w) = slot.write.take() {
                    w.wake();
                }
            }
        }
        let blocked = !self.udp_blocked.is_empty();
        for w in self.udp_blocked.drain(..) {
            w.wake();
        }
        (rx != 0 || work != 0 || n != 0 || blocked, now)
    }

    pub(crate) fn sleep_begin(&mut self) -> Sleep {
        let s = self.stack.sleep_begin();
        if let Sleep::Until(d) = s {
            self.sleeping = Some(d);
        }
        s
    }

    pub(crate) fn sleep_end(&mut self) {
        self.sleeping = None;
        self.stack.sleep_end();
    }

    /// After a task's call into the stack: a sleeping driver is woken for
    /// a turn (the call may have queued output, armed an earlier timer, or
    /// processed input — an ACK in it frees room a writer on another task
    /// waits for — which only a turn's ready set reports).
    fn touch(&mut self) {
        if self.sleeping.take().is_some() {
            self.kick.notify_one();
        }
    }

    fn add(&mut self, socket: SocketId, interest: Interest) -> io::Result<Sock> {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::default());
                (self.slots.len() - 1) as u32
            }
        };
        if let Err(e) = self
            .stack
            .register(socket, u64::from(i), interest, Trigger::Edge)
        {
            self.free.push(i);
            return Err(e.into());
        }
        self.slots[i as usize] = Slot {
            socket: Some(socket),
            read: None,
            write: None,
        };
        if let SocketId::Tcp(h) = socket {
            let k = h.index() as usize;
            if self.by_conn.len() <= k {
                self.by_conn.resize(k + 1, NO_SLOT);
            }
            self.by_conn[k] = i;
        }
        // The registration is reported by the next turn's ready set.
        self.touch();
        Ok(Sock(i))
    }

    fn socket(&self, s: Sock) -> io::Result<SocketId> {
        self.slots
            .get(s.0 as usize)
            .and_then(|x| x.socket)
            .ok_or_else(|| SocketError::BadHandle.into())
    }

    fn tcp(&self, s: Sock) -> io::Result<StackStream> {
        match self.socket(s)? {
            SocketId::Tcp(h) => Ok(h),
            _ => Err(SocketError::BadHandle.into()),
        }
    }

    fn listener(&self, s: Sock) -> io::Result<StackListener> {
        match self.socket(s)? {
            SocketId::Listener(h) => Ok(h),
            _ => Err(SocketError::BadHandle.into()),
        }
    }

    fn udp(&self, s: Sock) -> io::Result<StackUdp> {
        match self.socket(s)? {
            SocketId::Udp(h) => Ok(h),
            _ => Err(SocketError::BadHandle.into()),
        }
    }

    fn park_read(&mut self, s: Sock, cx: &Context<'_>) {
        if let Some(slot) = self.slots.get_mut(s.0 as usize) {
            slot.read = Some(cx.waker().clone());
        }
    }

    fn park_write(&mut self, s: Sock, cx: &Context<'_>) {
        if let Some(slot) = self.slots.get_mut(s.0 as usize) {
            slot.write = Some(cx.waker().clone());
        }
    }
}

impl<N: Nic> Core for Inner<N> {
    fn tcp_listen(&mut self, addr: SocketAddrV4, backlog: usize) -> io::Result<Sock> {
        let mut lcfg = self.stack.tcp_listen_config();
        lcfg.backlog = backlog;
        let h = self.stack.tcp_listen(addr, Some(lcfg), None)?;
        match self.add(SocketId::Listener(h), Interest::READABLE) {
            Ok(s) => Ok(s),
            Err(e) => {
                let now = self.stack.now();
                let _ = self.stack.listener_mut(h).close(now);
                Err(e)
            }
        }
    }

    fn tcp_connect(&mut self, addr: SocketAddrV4) -> io::Result<Sock> {
        let now = self.stack.now();
        let h = self.stack.tcp_connect(addr, None, now)?;
        let s = self.add(SocketId::Tcp(h), Interest::BOTH);
        if s.is_err() {
            let _ = self.stack.tcp_mut(h).abort(now);
        }
        self.touch();
        s
    }

    fn poll_connected(&mut self, s: Sock, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let h = self.tcp(s)?;
        self.touch();
        let now = self.stack.now();
        if let Some(e) = self.stack.tcp(h).error()? {
            return Poll::Ready(Err(e.into()));
        }
        match self.stack.tcp_mut(h).state(now)? {
            State::SynSent | State::SynReceived => {
                self.park_write(s, cx);
                Poll::Pending
            }
            State::Closed => Poll::Ready(Err(SocketError::NotConnected.into())),
            _ => Poll::Ready(Ok(())),
        }
    }

    fn poll_accept(&mut self, s: Sock, cx: &mut Context<'_>) -> Poll<io::Result<Sock>> {
        let l = self.listener(s)?;
        self.touch();
        let now = self.stack.now();
        match self.stack.listener_mut(l).accept(now) {
            Ok(h) => Poll::Ready(match self.add(SocketId::Tcp(h), Interest::BOTH) {
                Ok(c) => Ok(c),
                Err(e) => {
                    let _ = self.stack.tcp_mut(h).abort(now);
                    Err(e)
                }
            }),
            Err(SocketError::WouldBlock) => {
                self.park_read(s, cx);
                Poll::Pending
            }
            Err(e) => Poll::Ready(Err(e.into())),
        }
    }

    fn poll_read(
        &mut self,
        s: Sock,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let h = self.tcp(s)?;
        let now = self.stack.now();
        let r = self.stack.tcp_mut(h).recv(buf, now);
        self.touch();
        match r {
            Ok(n) => Poll::Ready(Ok(n)),
            Err(SocketError::WouldBlock) => {
                self.park_read(s, cx);
                Poll::Pending
            }
            Err(e) => Poll::Ready(Err(e.into())),
        }
    }

    fn poll_write(
        &mut self,
        s: Sock,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let h = self.tcp(s)?;
        let now = self.stack.now();
        let r = self.stack.tcp_mut(h).send(data, now);
        self.touch();
        match r {
            Ok(n) => Poll::Ready(Ok(n)),
            Err(SocketError::WouldBlock) => {
                self.park_write(s, cx);
                Poll::Pending
            }
            Err(e) => Poll::Ready(Err(e.into())),
        }
    }

    fn shutdown(&mut self, s: Sock) -> io::Result<()> {
        let h = self.tcp(s)?;
        let now = self.stack.now();
        let r = self.stack.tcp_mut(h).shutdown(now);
        self.touch();
        Ok(r?)
    }

    fn set_nodelay(&mut self, s: Sock, on: bool) -> io::Result<()> {
        let h = self.tcp(s)?;
        Ok(self.stack.tcp_mut(h).set_nodelay(on)?)
    }

    fn udp_bind(&mut self, addr: SocketAddrV4) -> io::Result<Sock> {
        let h = self.stack.udp_bind(addr, None)?;
        let s = self.add(SocketId::Udp(h), Interest::READABLE);
        if s.is_err() {
            let _ = self.stack.udp_mut(h).close();
        }
        s
    }

    fn poll_send_to(
        &mut self,
        s: Sock,
        cx: &mut Context<'_>,
        data: &[u8],
        dst: SocketAddrV4,
    ) -> Poll<io::Result<usize>> {
        let h = self.udp(s)?;
        let now = self.stack.now();
        let r = self.stack.udp_mut(h).send_to(data, dst, now);
        // The datagram waits in the NIC's transmit batch, which the
        // driver's next turn hands over (a batch per turn, not a doorbell
        // per datagram).
        self.touch();
        match r {
            Ok(n) => Poll::Ready(Ok(n)),
            Err(SocketError::NoBuffers) => {
                self.udp_blocked.push(cx.waker().clone());
                Poll::Pending
            }
            Err(e) => Poll::Ready(Err(e.into())),
        }
    }

    fn poll_recv_from(
        &mut self,
        s: Sock,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddrV4)>> {
        let h = self.udp(s)?;
        let r = self.stack.udp_mut(h).recv_with(|p, from| {
            let n = p.len().min(buf.len());
            buf[..n].copy_from_slice(&p[..n]);
            (n, from)
        });
        match r {
            Ok(x) => Poll::Ready(Ok(x)),
            Err(SocketError::WouldBlock) => {
                self.park_read(s, cx);
                Poll::Pending
            }
            Err(e) => Poll::Ready(Err(e.into())),
        }
    }

    fn addrs(&self, s: Sock) -> io::Result<(SocketAddrV4, Option<SocketAddrV4>)> {
        Ok(match self.socket(s)? {
            SocketId::Tcp(h) => {
                let (l, r) = self.stack.tcp(h).addrs()?;
                (l, Some(r))
            }
            SocketId::Listener(h) => (self.stack.listener(h).addr()?, None),
            SocketId::Udp(h) => {
                let u = self.stack.udp(h);
                (u.local_addr()?, u.peer()?)
            }
        })
    }

    fn close(&mut self, s: Sock, abort: bool) {
        let Ok(socket) = self.socket(s) else { return };
        let now = self.stack.now();
        self.stack.deregister(socket);
        let _ = match socket {
            SocketId::Tcp(h) if abort => self.stack.tcp_mut(h).abort(now),
            SocketId::Tcp(h) => self.stack.tcp_mut(h).close(now),
            SocketId::Listener(h) => self.stack.listener_mut(h).close(now),
            SocketId::Udp(h) => self.stack.udp_mut(h).close(),
        };
        if let SocketId::Tcp(h) = socket {
            if let Some(x) = self.by_conn.get_mut(h.index() as usize) {
                *x = NO_SLOT;
            }
        }
        if let Some(slot) = self.slots.get_mut(s.0 as usize) {
            // Tasks still waiting on it (another clone's) see BadHandle.
            for w in [slot.read.take(), slot.write.take()].into_iter().flatten() {
                w.wake();
            }
            slot.socket = None;
        }
        self.free.push(s.0);
        self.touch();
    }
}
