//! TCP: the calls on one connection ([`TcpStreamRef`]) or listener
//! ([`TcpListenerRef`]), and the blocking-style [`TcpListener`] and
//! [`TcpStream`].
//!
//! Like [`super::UdpSocket`], a socket is a small handle; the application
//! owns the [`Stack`] and passes it to every call. Each call first runs the
//! connection's queued protocol work (LRP §3.4: in the caller's context,
//! bounded), then does what it was asked. Non-blocking calls return
//! [`SocketError::WouldBlock`]; the `*_blocking` variants drive the stack
//! ([`Stack::poll`] and [`Stack::tcp_service`]) while they wait, sleeping on
//! the NIC until a frame arrives or the next TCP timer is due.
//!
//! Errors are the stack's small [`SocketError`]: `ConnectionRefused`,
//! `ConnectionReset`, `TimedOut`, `NotConnected`, `WouldBlock`, ...

use std::net::SocketAddrV4;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

use crate::nic::Nic;
use crate::proto::tcp::{Config, Connection, ListenConfig, ListenCounters, State, TcpCounters};
use crate::stack::{SocketError, Stack, TcpListener, TcpStream};

/// Work units one wait step lets [`Stack::tcp_service`] do.
const SERVICE_BUDGET: usize = 1024;

/// One step of a blocking-style wait: receive and demultiplex, run due TCP
/// work, and sleep on the NIC (at most until `deadline` or the next TCP
/// timer) if nothing happened. Returns false once `deadline` has passed.
pub fn wait_step<N: Nic>(stack: &mut Stack<N>, deadline: Option<u64>) -> bool {
    let now = stack.now();
    if deadline.is_some_and(|d| now >= d) {
        return false;
    }
    let rx = stack.poll(now).received;
    let work = stack.tcp_service(now, SERVICE_BUDGET);
    if rx == 0 && work == 0 {
        let wake = [deadline, stack.tcp_next_timeout()]
            .into_iter()
            .flatten()
            .min();
        // Sleep at most 1 ms: the NIC wakes us early when a frame arrives.
        let t = wake.map_or(1_000_000, |w| w.saturating_sub(now).min(1_000_000));
        stack.nic_mut().wait(Some(t));
    }
    true
}

/// The calls on one TCP connection: `stack.tcp(h)` (read-only) or
/// `stack.tcp_mut(h)`. `recv`, `send`, `close` and `state` first process
/// the connection's queued segments (bounded) in the caller's context.
#[derive(Debug)]
pub struct TcpStreamRef<S> {
    stack: S,
    h: TcpStream,
}

/// The calls on one TCP listener: `stack.listener(h)` (read-only) or
/// `stack.listener_mut(h)`.
#[derive(Debug)]
pub struct TcpListenerRef<S> {
    stack: S,
    h: TcpListener,
}

impl<N: Nic> Stack<N> {
    /// The read-only calls on connection `h`.
    pub fn tcp(&self, h: TcpStream) -> TcpStreamRef<&Self> {
        TcpStreamRef { stack: self, h }
    }

    /// The calls on connection `h`.
    pub fn tcp_mut(&mut self, h: TcpStream) -> TcpStreamRef<&mut Self> {
        TcpStreamRef { stack: self, h }
    }

    /// The read-only calls on listener `h`.
    pub fn listener(&self, h: TcpListener) -> TcpListenerRef<&Self> {
        TcpListenerRef { stack: self, h }
    }

    /// The calls on listener `h`.
    pub fn listener_mut(&mut self, h: TcpListener) -> TcpListenerRef<&mut Self> {
        TcpListenerRef { stack: self, h }
    }
}

impl<N: Nic, S: Deref<Target = Stack<N>>> TcpStreamRef<S> {
    /// Bytes that fit in the send buffer now.
    pub fn send_space(&self) -> Result<usize, SocketError> {
        self.stack.tcp_send_space(self.h)
    }

    /// Bytes sent but not yet acknowledged, plus bytes not yet sent.
    pub fn send_queue(&self) -> Result<usize, SocketError> {
        self.stack.tcp_send_queue(self.h)
    }

    /// Bytes received and not yet read.
    pub fn recv_queue(&self) -> Result<usize, SocketError> {
        self.stack.tcp_recv_queue(self.h)
    }

    /// The error that ended the connection, if any.
    pub fn error(&self) -> Result<Option<SocketError>, SocketError> {
        self.stack.tcp_error(self.h)
    }

    /// True once the peer's FIN was received and all data read.
    pub fn recv_finished(&self) -> Result<bool, SocketError> {
        self.stack.tcp_recv_finished(self.h)
    }

    /// Local and remote address.
    pub fn addrs(&self) -> Result<(SocketAddrV4, SocketAddrV4), SocketError> {
        self.stack.tcp_addrs(self.h)
    }

    /// The connection's counters.
    pub fn counters(&self) -> Result<TcpCounters, SocketError> {
        self.stack.tcp_counters(self.h)
    }

    /// Frames waiting in the connection's channel, not yet processed.
    pub fn pending(&self) -> Result<usize, SocketError> {
        self.stack.tcp_pending(self.h)
    }

    /// Runs `f` on the connection (read-only), for tests and tools.
    pub fn inspect<R>(&self, f: impl FnOnce(&Connection) -> R) -> Result<R, SocketError> {
        self.stack.tcp_inspect(self.h, f)
    }
}

impl<N: Nic, S: DerefMut<Target = Stack<N>>> TcpStreamRef<S> {
    /// Reads received bytes into `buf`. `Ok(0)` is end of stream (the peer
    /// sent FIN and everything was read); `WouldBlock` if nothing is there.
    /// Queued segments are processed first, in-order text going straight
    /// into `buf` where it can (direct placement); once `buf` is full,
    /// segments still queued wait for the next read or for the protocol
    /// handler ([`Stack::tcp_service`]).
    pub fn recv(mut self, buf: &mut [u8], now: u64) -> Result<usize, SocketError> {
        self.stack.tcp_recv(self.h, buf, now)
    }

    /// Queues bytes for sending; returns how many fit in the send buffer
    /// (`WouldBlock` if none fit now).
    pub fn send(mut self, data: &[u8], now: u64) -> Result<usize, SocketError> {
        self.stack.tcp_send(self.h, data, now)
    }

    /// [`TcpStreamRef::send`] of `n` bytes that `fill(at, dst)` writes straight
    /// into the send buffer (`dst` holds bytes `at..at + dst.len()`; one
    /// or two calls): for bytes the caller cannot hold as a slice, such as
    /// a range another process may write (a MemNet client's).
    pub fn send_with(
        mut self,
        n: usize,
        now: u64,
        fill: impl FnMut(usize, &mut [u8]),
    ) -> Result<usize, SocketError> {
        self.stack.tcp_send_with(self.h, n, now, fill)
    }

    /// Half-close: FIN after the queued data (RFC 9293 §3.10.4).
    pub fn shutdown(mut self, now: u64) -> Result<(), SocketError> {
        self.stack.tcp_shutdown(self.h, now)
    }

    /// Closes the handle. The connection finishes in the background (FIN,
    /// TIME-WAIT); if received data was left unread it is reset instead
    /// (RFC 9293 §3.10.4, RFC 2525 §2.17), as Linux does.
    pub fn close(mut self, now: u64) -> Result<(), SocketError> {
        self.stack.tcp_close(self.h, now)
    }

    /// Resets the connection and closes the handle.
    pub fn abort(mut self, now: u64) -> Result<(), SocketError> {
        self.stack.tcp_abort(self.h, now)
    }

    /// Processes queued input and reports the state.
    pub fn state(mut self, now: u64) -> Result<State, SocketError> {
        self.stack.tcp_state(self.h, now)
    }

    /// Switches Nagle's algorithm off (`true`) or on.
    pub fn set_nodelay(mut self, on: bool) -> Result<(), SocketError> {
        self.stack.tcp_set_nodelay(self.h, on)
    }

    /// Tags the connection for [`Stack::tcp_service_tag`] (0: untagged):
    /// its input then runs in the protocol handler of that owner.
    pub fn set_tag(mut self, tag: u16) -> Result<(), SocketError> {
        self.stack.tcp_set_tag(self.h, tag)
    }
}

impl<N: Nic, S: Deref<Target = Stack<N>>> TcpListenerRef<S> {
    /// True if the listener is stalled: it will not read its channel until
    /// `accept` (full accept queue) or its timer (full SYN queue without
    /// cookies, lazy modes) makes room.
    pub fn stalled(&self) -> Result<bool, SocketError> {
        self.stack.tcp_listen_stalled(self.h)
    }

    /// Half-open connections (SYN-RECEIVED).
    pub fn syn_queue_len(&self) -> Result<usize, SocketError> {
        self.stack.tcp_syn_queue_len(self.h)
    }

    /// Connections waiting to be accepted.
    pub fn accept_queue_len(&self) -> Result<usize, SocketError> {
        self.stack.tcp_accept_queue_len(self.h)
    }

    /// The listener's counters.
    pub fn counters(&self) -> Result<ListenCounters, SocketError> {
        self.stack.tcp_listener_counters(self.h)
    }

    /// Frames waiting in the listener's channel, not yet processed.
    pub fn pending(&self) -> Result<usize, SocketError> {
        self.stack.tcp_listen_pending(self.h)
    }

    /// The address the listener was bound to.
    pub fn addr(&self) -> Result<SocketAddrV4, SocketError> {
        self.stack.tcp_listen_addr(self.h)
    }
}

impl<N: Nic, S: DerefMut<Target = Stack<N>>> TcpListenerRef<S> {
    /// Accepts one established connection, after processing the listener's
    /// queued segments in the caller's context. `WouldBlock` if none.
    pub fn accept(mut self, now: u64) -> Result<TcpStream, SocketError> {
        self.stack.tcp_accept(self.h, now)
    }

    /// Closes the listener: its queued frames are released; every
    /// half-open entry and every connection not yet accepted is reset
    /// (RFC 9293 §3.10.5) and dropped. At most `syn_queue + backlog` RSTs.
    pub fn close(mut self, now: u64) -> Result<(), SocketError> {
        self.stack.tcp_listen_close(self.h, now)
    }

    /// Tags the listener; connections it accepts inherit the tag.
    pub fn set_tag(mut self, tag: u16) -> Result<(), SocketError> {
        self.stack.tcp_listen_set_tag(self.h, tag)
    }
}

/// The clock-driven and blocking-style calls of a listener (the handle
/// itself; see the module docs).
impl TcpListener {
    /// Binds to `local` (`0.0.0.0` for our address) and listens with the
    /// given backlog (accept queue) and the stack's other defaults.
    pub fn bind<N: Nic>(
        stack: &mut Stack<N>,
        local: SocketAddrV4,
        backlog: usize,
    ) -> Result<Self, SocketError> {
        let lcfg = ListenConfig {
            backlog,
            ..ListenConfig::default()
        };
        Self::bind_with(stack, local, lcfg, None)
    }

    /// Binds with a full listener configuration and, optionally, the
    /// configuration of the connections it accepts.
    pub fn bind_with<N: Nic>(
        stack: &mut Stack<N>,
        local: SocketAddrV4,
        lcfg: ListenConfig,
        cfg: Option<Config>,
    ) -> Result<Self, SocketError> {
        stack.tcp_listen(local, Some(lcfg), cfg)
    }

    /// The bound address.
    pub fn local_addr<N: Nic>(&self, stack: &Stack<N>) -> Result<SocketAddrV4, SocketError> {
        stack.listener(*self).addr()
    }

    /// Accepts an established connection, or `WouldBlock`.
    pub fn accept<N: Nic>(&self, stack: &mut Stack<N>) -> Result<TcpStream, SocketError> {
        let now = stack.now();
        stack.listener_mut(*self).accept(now)
    }

    /// Accepts, driving the stack until a connection is established or
    /// `timeout` passes.
    pub fn accept_blocking<N: Nic>(
        &self,
        stack: &mut Stack<N>,
        timeout: Option<Duration>,
    ) -> Result<TcpStream, SocketError> {
        let dl = super::deadline(stack, timeout);
        loop {
            match self.accept(stack) {
                Err(SocketError::WouldBlock) => {}
                r => return r,
            }
            if !wait_step(stack, dl) {
                return Err(SocketError::TimedOut);
            }
        }
    }

    /// Stops listening; half-open and not yet accepted connections are
    /// reset.
    pub fn close<N: Nic>(self, stack: &mut Stack<N>) -> Result<(), SocketError> {
        let now = stack.now();
        stack.listener_mut(self).close(now)
    }
}

/// The clock-driven and blocking-style calls of a connection (the handle
/// itself; see the module docs).
impl TcpStream {
    /// Starts connecting (the SYN goes out now) and returns at once; see
    /// [`TcpStream::is_connected`].
    pub fn connect_nonblocking<N: Nic>(
        stack: &mut Stack<N>,
        remote: SocketAddrV4,
        cfg: Option<Config>,
    ) -> Result<Self, SocketError> {
        let now = stack.now();
        stack.tcp_connect(remote, cfg, now)
    }

    /// Connects with the stack's default configuration, waiting until the
    /// handshake completes, fails, or `timeout` passes (the attempt is then
    /// aborted).
    pub fn connect<N: Nic>(
        stack: &mut Stack<N>,
        remote: SocketAddrV4,
        timeout: Option<Duration>,
    ) -> Result<Self, SocketError> {
        Self::connect_with(stack, remote, None, timeout)
    }

    /// [`TcpStream::connect`] with a connection configuration (buffer
    /// sizes, options, Nagle).
    pub fn connect_with<N: Nic>(
        stack: &mut Stack<N>,
        remote: SocketAddrV4,
        cfg: Option<Config>,
        timeout: Option<Duration>,
    ) -> Result<Self, SocketError> {
        let s = Self::connect_nonblocking(stack, remote, cfg)?;
        let dl = super::deadline(stack, timeout);
        loop {
            match s.is_connected(stack) {
                Ok(true) => return Ok(s),
                Ok(false) => {}
                Err(e) => {
                    let now = stack.now();
                    let _ = stack.tcp_mut(s).abort(now);
                    return Err(e);
                }
            }
            if !wait_step(stack, dl) {
                let now = stack.now();
                let _ = stack.tcp_mut(s).abort(now);
                return Err(SocketError::TimedOut);
            }
        }
    }

    /// True once established; the error if the attempt failed.
    pub fn is_connected<N: Nic>(&self, stack: &mut Stack<N>) -> Result<bool, SocketError> {
        let now = stack.now();
        let st = stack.tcp_mut(*self).state(now)?;
        if let Some(e) = stack.tcp(*self).error()? {
            return Err(e);
        }
        match st {
            State::SynSent | State::SynReceived => Ok(false),
            State::Closed => Err(SocketError::NotConnected),
            _ => Ok(true),
        }
    }

    /// The connection's state (after processing queued input).
    pub fn state<N: Nic>(&self, stack: &mut Stack<N>) -> Result<State, SocketError> {
        let now = stack.now();
        stack.tcp_mut(*self).state(now)
    }

    /// Reads into `buf`: `Ok(0)` at end of stream, `WouldBlock` if nothing
    /// is there yet.
    pub fn recv<N: Nic>(&self, stack: &mut Stack<N>, buf: &mut [u8]) -> Result<usize, SocketError> {
        let now = stack.now();
        stack.tcp_mut(*self).recv(buf, now)
    }

    /// Reads, driving the stack until data, end of stream, an error, or
    /// `timeout`.
    pub fn recv_blocking<N: Nic>(
        &self,
        stack: &mut Stack<N>,
        buf: &mut [u8],
        timeout: Option<Duration>,
    ) -> Result<usize, SocketError> {
        let dl = super::deadline(stack, timeout);
        loop {
            match self.recv(stack, buf) {
                Err(SocketError::WouldBlock) => {}
                r => return r,
            }
            if !wait_step(stack, dl) {
                return Err(SocketError::TimedOut);
            }
        }
    }

    /// Queues bytes for sending; returns how many fit (`WouldBlock` if
    /// none).
    pub fn send<N: Nic>(&self, stack: &mut Stack<N>, data: &[u8]) -> Result<usize, SocketError> {
        let now = stack.now();
        stack.tcp_mut(*self).send(data, now)
    }

    /// Writes all of `data`, driving the stack while the send buffer is
    /// full, until done, an error, or `timeout`.
    pub fn send_all_blocking<N: Nic>(
        &self,
        stack: &mut Stack<N>,
        mut data: &[u8],
        timeout: Option<Duration>,
    ) -> Result<(), SocketError> {
        let dl = super::deadline(stack, timeout);
        while !data.is_empty() {
            match self.send(stack, data) {
                Ok(n) => {
                    data = &data[n..];
                    continue;
                }
                Err(SocketError::WouldBlock) => {}
                Err(e) => return Err(e),
            }
            if !wait_step(stack, dl) {
                return Err(SocketError::TimedOut);
            }
        }
        Ok(())
    }

    /// Waits until everything written was acknowledged (or `timeout`).
    pub fn flush_blocking<N: Nic>(
        &self,
        stack: &mut Stack<N>,
        timeout: Option<Duration>,
    ) -> Result<(), SocketError> {
        let dl = super::deadline(stack, timeout);
        loop {
            if let Some(e) = stack.tcp(*self).error()? {
                return Err(e);
            }
            if stack.tcp(*self).send_queue()? == 0 {
                return Ok(());
            }
            if !wait_step(stack, dl) {
                return Err(SocketError::TimedOut);
            }
        }
    }

    /// Half-close: no more writes; FIN follows the queued data.
    pub fn shutdown<N: Nic>(&self, stack: &mut Stack<N>) -> Result<(), SocketError> {
        let now = stack.now();
        stack.tcp_mut(*self).shutdown(now)
    }

    /// Closes the handle; the connection finishes in the background (FIN,
    /// TIME-WAIT), or is reset if received data was left unread.
    pub fn close<N: Nic>(self, stack: &mut Stack<N>) -> Result<(), SocketError> {
        let now = stack.now();
        stack.tcp_mut(self).close(now)
    }

    /// Resets the connection and closes the handle.
    pub fn abort<N: Nic>(self, stack: &mut Stack<N>) -> Result<(), SocketError> {
        let now = stack.now();
        stack.tcp_mut(self).abort(now)
    }

    /// Switches Nagle's algorithm off (`true`) or on.
    pub fn set_nodelay<N: Nic>(&self, stack: &mut Stack<N>, on: bool) -> Result<(), SocketError> {
        stack.tcp_mut(*self).set_nodelay(on)
    }

    /// Our address.
    pub fn local_addr<N: Nic>(&self, stack: &Stack<N>) -> Result<SocketAddrV4, SocketError> {
        Ok(stack.tcp(*self).addrs()?.0)
    }

    /// The peer's address.
    pub fn peer_addr<N: Nic>(&self, stack: &Stack<N>) -> Result<SocketAddrV4, SocketError> {
        Ok(stack.tcp(*self).addrs()?.1)
    }

    /// Bytes received and not yet read.
    pub fn recv_queue<N: Nic>(&self, stack: &Stack<N>) -> Result<usize, SocketError> {
        stack.tcp(*self).recv_queue()
    }

    /// Bytes that fit in the send buffer now.
    pub fn send_space<N: Nic>(&self, stack: &Stack<N>) -> Result<usize, SocketError> {
        stack.tcp(*self).send_space()
    }
}
