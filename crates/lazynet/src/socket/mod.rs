//! The application API: UDP sockets, and TCP sockets in [`tcp`].
//!
//! **Owns:** the handle types applications hold and the blocking-style
//! waiting loops.
//!
//! **May not touch:** protocol state directly; every operation goes through
//! the [`Stack`], and the lazy protocol work of a receive (LRP §3.3) runs
//! inside these calls, in the caller's context.
//!
//! The embedded placement: the application owns its [`Stack`] and passes it
//! to each call. Non-blocking calls return [`SocketError::WouldBlock`];
//! blocking-style calls drive [`Stack::poll`] themselves while they wait, so a
//! single-threaded program needs no other loop.

use std::net::SocketAddrV4;
use std::time::Duration;

use crate::nic::Nic;
pub use crate::stack::SocketError;
use crate::stack::{Stack, UdpHandle};

pub mod tcp;
pub use tcp::{TcpListener, TcpStream};

/// A UDP socket of a [`Stack`].
#[derive(Debug)]
pub struct UdpSocket {
    h: UdpHandle,
}

impl UdpSocket {
    /// Binds to `local` (`0.0.0.0` for any address, port 0 for an ephemeral
    /// port) with the stack's default channel capacity.
    pub fn bind<N: Nic>(stack: &mut Stack<N>, local: SocketAddrV4) -> Result<Self, SocketError> {
        Ok(UdpSocket {
            h: stack.udp_bind(local, None)?,
        })
    }

    /// Binds with a channel of `cap` frames: the socket's limit of frames
    /// waiting for it; beyond it the classifier drops early.
    pub fn bind_with_capacity<N: Nic>(
        stack: &mut Stack<N>,
        local: SocketAddrV4,
        cap: usize,
    ) -> Result<Self, SocketError> {
        Ok(UdpSocket {
            h: stack.udp_bind(local, Some(cap))?,
        })
    }

    /// The stack's handle of this socket.
    pub fn handle(&self) -> UdpHandle {
        self.h
    }

    /// The bound address.
    pub fn local_addr<N: Nic>(&self, stack: &Stack<N>) -> Result<SocketAddrV4, SocketError> {
        stack.udp_local_addr(self.h)
    }

    /// Sets the default destination; afterwards only datagrams from `peer`
    /// are received.
    pub fn connect<N: Nic>(
        &self,
        stack: &mut Stack<N>,
        peer: SocketAddrV4,
    ) -> Result<(), SocketError> {
        stack.udp_connect(self.h, Some(peer))
    }

    /// Sends a datagram to `dst`. Fails with [`SocketError::NoBuffers`] when
    /// the NIC has no room now.
    pub fn send_to<N: Nic>(
        &self,
        stack: &mut Stack<N>,
        buf: &[u8],
        dst: SocketAddrV4,
    ) -> Result<usize, SocketError> {
        let now = stack.now();
        stack.udp_send_to(self.h, buf, dst, now)
    }

    /// Sends to the connected peer.
    pub fn send<N: Nic>(&self, stack: &mut Stack<N>, buf: &[u8]) -> Result<usize, SocketError> {
        let peer = stack.udp_peer(self.h)?.ok_or(SocketError::NotConnected)?;
        self.send_to(stack, buf, peer)
    }

    /// Receives a datagram if one is queued, copying its payload into `buf`
    /// (truncated to `buf.len()`); returns the bytes copied and the source.
    pub fn recv_from<N: Nic>(
        &self,
        stack: &mut Stack<N>,
        buf: &mut [u8],
    ) -> Result<(usize, SocketAddrV4), SocketError> {
        stack.udp_recv_with(self.h, |p, from| {
            let n = p.len().min(buf.len());
            buf[..n].copy_from_slice(&p[..n]);
            (n, from)
        })
    }

    /// Receives from the connected peer.
    pub fn recv<N: Nic>(&self, stack: &mut Stack<N>, buf: &mut [u8]) -> Result<usize, SocketError> {
        stack.udp_peer(self.h)?.ok_or(SocketError::NotConnected)?;
        self.recv_from(stack, buf).map(|(n, _)| n)
    }

    /// Receives a datagram and lets `f` read its payload in place, with no
    /// copy.
    pub fn recv_with<N: Nic, R>(
        &self,
        stack: &mut Stack<N>,
        f: impl FnOnce(&[u8], SocketAddrV4) -> R,
    ) -> Result<R, SocketError> {
        stack.udp_recv_with(self.h, f)
    }

    /// Blocking-style receive: polls the stack until a datagram arrives or
    /// `timeout` (if any) passes.
    pub fn recv_from_blocking<N: Nic>(
        &self,
        stack: &mut Stack<N>,
        buf: &mut [u8],
        timeout: Option<Duration>,
    ) -> Result<(usize, SocketAddrV4), SocketError> {
        let deadline = timeout.map(|t| stack.now().saturating_add(t.as_nanos() as u64));
        loop {
            match self.recv_from(stack, buf) {
                Err(SocketError::WouldBlock) => {}
                r => return r,
            }
            let now = stack.now();
            if deadline.is_some_and(|d| now >= d) {
                return Err(SocketError::TimedOut);
            }
            if stack.poll(now).received == 0 {
                stack
                    .nic_mut()
                    .wait(deadline.map(|d| d.saturating_sub(now)));
            }
        }
    }

    /// Blocking-style send: retries while the NIC has no room, polling the
    /// stack, until `timeout` (if any) passes.
    pub fn send_to_blocking<N: Nic>(
        &self,
        stack: &mut Stack<N>,
        buf: &[u8],
        dst: SocketAddrV4,
        timeout: Option<Duration>,
    ) -> Result<usize, SocketError> {
        let deadline = timeout.map(|t| stack.now().saturating_add(t.as_nanos() as u64));
        loop {
            match self.send_to(stack, buf, dst) {
                Err(SocketError::NoBuffers) => {}
                r => return r,
            }
            let now = stack.now();
            if deadline.is_some_and(|d| now >= d) {
                return Err(SocketError::TimedOut);
            }
            stack.poll(now);
            std::thread::yield_now();
        }
    }

    /// Frames waiting in the socket's channel, not yet processed.
    pub fn pending<N: Nic>(&self, stack: &Stack<N>) -> Result<usize, SocketError> {
        stack.udp_pending(self.h)
    }

    /// Closes the socket; queued frames are released and counted.
    pub fn close<N: Nic>(self, stack: &mut Stack<N>) -> Result<(), SocketError> {
        stack.udp_close(self.h)
    }
}
