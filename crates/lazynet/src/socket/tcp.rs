//! TCP sockets: [`TcpListener`] and [`TcpStream`].
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
use std::time::Duration;

use crate::nic::Nic;
use crate::proto::tcp::{Config, ListenConfig, State};
pub use crate::stack::SocketError;
use crate::stack::{ListenHandle, Stack, TcpHandle};

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

fn deadline<N: Nic>(stack: &Stack<N>, timeout: Option<Duration>) -> Option<u64> {
    timeout.map(|t| stack.now().saturating_add(t.as_nanos() as u64))
}

/// A listening TCP socket.
#[derive(Debug)]
pub struct TcpListener {
    h: ListenHandle,
}

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
        Ok(TcpListener {
            h: stack.tcp_listen(local, Some(lcfg), cfg)?,
        })
    }

    /// The stack's handle.
    pub fn handle(&self) -> ListenHandle {
        self.h
    }

    /// The bound address.
    pub fn local_addr<N: Nic>(&self, stack: &Stack<N>) -> Result<SocketAddrV4, SocketError> {
        stack.tcp_listen_addr(self.h)
    }

    /// Accepts an established connection, or `WouldBlock`.
    pub fn accept<N: Nic>(&self, stack: &mut Stack<N>) -> Result<TcpStream, SocketError> {
        let now = stack.now();
        let h = stack.tcp_accept(self.h, now)?;
        Ok(TcpStream { h })
    }

    /// Accepts, driving the stack until a connection is established or
    /// `timeout` passes.
    pub fn accept_blocking<N: Nic>(
        &self,
        stack: &mut Stack<N>,
        timeout: Option<Duration>,
    ) -> Result<TcpStream, SocketError> {
        let dl = deadline(stack, timeout);
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
        stack.tcp_listen_close(self.h, now)
    }
}

/// A TCP connection.
#[derive(Debug)]
pub struct TcpStream {
    h: TcpHandle,
}

impl TcpStream {
    /// Wraps a handle from [`Stack::tcp_accept`] or [`Stack::tcp_connect`].
    pub fn from_handle(h: TcpHandle) -> Self {
        TcpStream { h }
    }

    /// The stack's handle.
    pub fn handle(&self) -> TcpHandle {
        self.h
    }

    /// Starts connecting (the SYN goes out now) and returns at once; see
    /// [`TcpStream::is_connected`].
    pub fn connect_nonblocking<N: Nic>(
        stack: &mut Stack<N>,
        remote: SocketAddrV4,
        cfg: Option<Config>,
    ) -> Result<Self, SocketError> {
        let now = stack.now();
        Ok(TcpStream {
            h: stack.tcp_connect(remote, cfg, now)?,
        })
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
        let dl = deadline(stack, timeout);
        loop {
            match s.is_connected(stack) {
                Ok(true) => return Ok(s),
                Ok(false) => {}
                Err(e) => {
                    let now = stack.now();
                    let _ = stack.tcp_abort(s.h, now);
                    return Err(e);
                }
            }
            if !wait_step(stack, dl) {
                let now = stack.now();
                let _ = stack.tcp_abort(s.h, now);
                return Err(SocketError::TimedOut);
            }
        }
    }

    /// True once established; the error if the attempt failed.
    pub fn is_connected<N: Nic>(&self, stack: &mut Stack<N>) -> Result<bool, SocketError> {
        let now = stack.now();
        let st = stack.tcp_state(self.h, now)?;
        if let Some(e) = stack.tcp_error(self.h)? {
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
        stack.tcp_state(self.h, now)
    }

    /// Reads into `buf`: `Ok(0)` at end of stream, `WouldBlock` if nothing
    /// is there yet.
    pub fn read<N: Nic>(&self, stack: &mut Stack<N>, buf: &mut [u8]) -> Result<usize, SocketError> {
        let now = stack.now();
        stack.tcp_recv(self.h, buf, now)
    }

    /// Reads, driving the stack until data, end of stream, an error, or
    /// `timeout`.
    pub fn read_blocking<N: Nic>(
        &self,
        stack: &mut Stack<N>,
        buf: &mut [u8],
        timeout: Option<Duration>,
    ) -> Result<usize, SocketError> {
        let dl = deadline(stack, timeout);
        loop {
            match self.read(stack, buf) {
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
    pub fn write<N: Nic>(&self, stack: &mut Stack<N>, data: &[u8]) -> Result<usize, SocketError> {
        let now = stack.now();
        stack.tcp_send(self.h, data, now)
    }

    /// Writes all of `data`, driving the stack while the send buffer is
    /// full, until done, an error, or `timeout`.
    pub fn write_all_blocking<N: Nic>(
        &self,
        stack: &mut Stack<N>,
        mut data: &[u8],
        timeout: Option<Duration>,
    ) -> Result<(), SocketError> {
        let dl = deadline(stack, timeout);
        while !data.is_empty() {
            match self.write(stack, data) {
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
        let dl = deadline(stack, timeout);
        loop {
            if let Some(e) = stack.tcp_error(self.h)? {
                return Err(e);
            }
            if stack.tcp_send_queue(self.h)? == 0 {
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
        stack.tcp_shutdown(self.h, now)
    }

    /// Closes the handle; the connection finishes in the background (FIN,
    /// TIME-WAIT), or is reset if received data was left unread.
    pub fn close<N: Nic>(self, stack: &mut Stack<N>) -> Result<(), SocketError> {
        let now = stack.now();
        stack.tcp_close(self.h, now)
    }

    /// Resets the connection and closes the handle.
    pub fn abort<N: Nic>(self, stack: &mut Stack<N>) -> Result<(), SocketError> {
        let now = stack.now();
        stack.tcp_abort(self.h, now)
    }

    /// Switches Nagle's algorithm off (`true`) or on.
    pub fn set_nodelay<N: Nic>(&self, stack: &mut Stack<N>, on: bool) -> Result<(), SocketError> {
        stack.tcp_set_nodelay(self.h, on)
    }

    /// Our address.
    pub fn local_addr<N: Nic>(&self, stack: &Stack<N>) -> Result<SocketAddrV4, SocketError> {
        Ok(stack.tcp_addrs(self.h)?.0)
    }

    /// The peer's address.
    pub fn peer_addr<N: Nic>(&self, stack: &Stack<N>) -> Result<SocketAddrV4, SocketError> {
        Ok(stack.tcp_addrs(self.h)?.1)
    }

    /// Bytes received and not yet read.
    pub fn recv_queue<N: Nic>(&self, stack: &Stack<N>) -> Result<usize, SocketError> {
        stack.tcp_recv_queue(self.h)
    }

    /// Bytes that fit in the send buffer now.
    pub fn send_space<N: Nic>(&self, stack: &Stack<N>) -> Result<usize, SocketError> {
        stack.tcp_send_space(self.h)
    }
}
