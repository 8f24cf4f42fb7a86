//! UDP: the calls on one socket ([`UdpSocketRef`]) and the blocking-style
//! [`UdpSocket`].
//!
//! **Owns:** the public calls on one UDP socket. **May not touch:**
//! protocol state: the bodies are the stack's (`stack::udp`).

use std::net::SocketAddrV4;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

use crate::nic::Nic;
use crate::stack::{SocketError, Stack, UdpSocket};

/// The calls on one UDP socket: `stack.udp(h)` (read-only) or
/// `stack.udp_mut(h)`.
#[derive(Debug)]
pub struct UdpSocketRef<S> {
    stack: S,
    h: UdpSocket,
}

impl<N: Nic> Stack<N> {
    /// The read-only calls on UDP socket `h`.
    pub fn udp(&self, h: UdpSocket) -> UdpSocketRef<&Self> {
        UdpSocketRef { stack: self, h }
    }

    /// The calls on UDP socket `h`.
    pub fn udp_mut(&mut self, h: UdpSocket) -> UdpSocketRef<&mut Self> {
        UdpSocketRef { stack: self, h }
    }
}

impl<N: Nic, S: Deref<Target = Stack<N>>> UdpSocketRef<S> {
    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddrV4, SocketError> {
        self.stack.udp_local_addr(self.h)
    }

    /// The connected peer, if any.
    pub fn peer(&self) -> Result<Option<SocketAddrV4>, SocketError> {
        self.stack.udp_peer(self.h)
    }

    /// Frames waiting in the socket's channel, not yet processed.
    pub fn pending(&self) -> Result<usize, SocketError> {
        self.stack.udp_pending(self.h)
    }
}

impl<N: Nic, S: DerefMut<Target = Stack<N>>> UdpSocketRef<S> {
    /// Sets (or clears) the peer: `send` goes there and only its datagrams
    /// are received.
    pub fn connect(mut self, peer: Option<SocketAddrV4>) -> Result<(), SocketError> {
        self.stack.udp_connect(self.h, peer)
    }

    /// Receives one datagram, doing its protocol processing now, in the
    /// caller's context (LRP §3.3): IP header checksum, UDP length and
    /// checksum, peer filter. Frames that fail are dropped and counted, and
    /// the next is tried; at most the frames queued at entry are examined.
    /// `f` sees the payload in place (no copy) and the source.
    pub fn recv_with<R>(
        mut self,
        f: impl FnOnce(&[u8], SocketAddrV4) -> R,
    ) -> Result<R, SocketError> {
        self.stack.udp_recv_with(self.h, f)
    }

    /// Runs the IP and UDP checks of at most `max` queued frames ahead of
    /// `recv`, leaving them queued and marked as checked (the idle-priority
    /// work of LRP §3.3). Returns the frames checked.
    pub fn prepare(mut self, max: usize) -> Result<usize, SocketError> {
        self.stack.udp_prepare(self.h, max)
    }

    /// Sends `payload` to `dst` (UDP over IPv4, fragmented if larger than
    /// the MTU), in the caller's context.
    pub fn send_to(
        mut self,
        payload: &[u8],
        dst: SocketAddrV4,
        now: u64,
    ) -> Result<usize, SocketError> {
        self.stack.udp_send_to(self.h, payload, dst, now)
    }

    /// Closes the socket; frames still queued are released and counted.
    pub fn close(mut self) -> Result<(), SocketError> {
        self.stack.udp_close(self.h)
    }
}

/// The clock-driven and blocking-style calls of a UDP socket (the handle
/// itself; see the module docs).
impl UdpSocket {
    /// Binds to `local` (`0.0.0.0` for any address, port 0 for an ephemeral
    /// port) with the stack's default channel capacity.
    pub fn bind<N: Nic>(stack: &mut Stack<N>, local: SocketAddrV4) -> Result<Self, SocketError> {
        stack.udp_bind(local, None)
    }

    /// Binds with a channel of `cap` frames: the socket's limit of frames
    /// waiting for it; beyond it the classifier drops early.
    pub fn bind_with_capacity<N: Nic>(
        stack: &mut Stack<N>,
        local: SocketAddrV4,
        cap: usize,
    ) -> Result<Self, SocketError> {
        stack.udp_bind(local, Some(cap))
    }

    /// The bound address.
    pub fn local_addr<N: Nic>(&self, stack: &Stack<N>) -> Result<SocketAddrV4, SocketError> {
        stack.udp(*self).local_addr()
    }

    /// Sets the default destination; afterwards only datagrams from `peer`
    /// are received.
    pub fn connect<N: Nic>(
        &self,
        stack: &mut Stack<N>,
        peer: SocketAddrV4,
    ) -> Result<(), SocketError> {
        stack.udp_mut(*self).connect(Some(peer))
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
        stack.udp_mut(*self).send_to(buf, dst, now)
    }

    /// Sends to the connected peer.
    pub fn send<N: Nic>(&self, stack: &mut Stack<N>, buf: &[u8]) -> Result<usize, SocketError> {
        let peer = stack.udp(*self).peer()?.ok_or(SocketError::NotConnected)?;
        self.send_to(stack, buf, peer)
    }

    /// Receives a datagram if one is queued, copying its payload into `buf`
    /// (truncated to `buf.len()`); returns the bytes copied and the source.
    pub fn recv_from<N: Nic>(
        &self,
        stack: &mut Stack<N>,
        buf: &mut [u8],
    ) -> Result<(usize, SocketAddrV4), SocketError> {
        stack.udp_mut(*self).recv_with(|p, from| {
            let n = p.len().min(buf.len());
            buf[..n].copy_from_slice(&p[..n]);
            (n, from)
        })
    }

    /// Receives from the connected peer.
    pub fn recv<N: Nic>(&self, stack: &mut Stack<N>, buf: &mut [u8]) -> Result<usize, SocketError> {
        stack.udp(*self).peer()?.ok_or(SocketError::NotConnected)?;
        self.recv_from(stack, buf).map(|(n, _)| n)
    }

    /// Receives a datagram and lets `f` read its payload in place, with no
    /// copy.
    pub fn recv_with<N: Nic, R>(
        &self,
        stack: &mut Stack<N>,
        f: impl FnOnce(&[u8], SocketAddrV4) -> R,
    ) -> Result<R, SocketError> {
        stack.udp_mut(*self).recv_with(f)
    }

    /// Blocking-style receive: polls the stack until a datagram arrives or
    /// `timeout` (if any) passes.
    pub fn recv_from_blocking<N: Nic>(
        &self,
        stack: &mut Stack<N>,
        buf: &mut [u8],
        timeout: Option<Duration>,
    ) -> Result<(usize, SocketAddrV4), SocketError> {
        let deadline = super::deadline(stack, timeout);
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
        let deadline = super::deadline(stack, timeout);
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
        stack.udp(*self).pending()
    }

    /// Closes the socket; queued frames are released and counted.
    pub fn close<N: Nic>(self, stack: &mut Stack<N>) -> Result<(), SocketError> {
        stack.udp_mut(self).close()
    }
}
