//! The application API: calls scoped to one socket, and blocking-style
//! sockets built on them.
//!
//! **Owns:** the public calls on one socket of a [`Stack`](crate::stack::Stack), as views that
//! borrow the stack for one call: `stack.udp_mut(h)` ([`UdpSock`]),
//! `stack.tcp_mut(h)` ([`TcpConn`]), `stack.listener_mut(h)`
//! ([`TcpListen`]), and their read-only forms `stack.udp(h)`,
//! `stack.tcp(h)`, `stack.listener(h)`. Every TCP call that may do
//! protocol work takes the time, `now`, like the rest of the sans-IO stack
//! (UDP's checks need no clock). On top of
//! them, [`UdpSocket`], [`TcpListener`] and [`TcpStream`] read the stack's
//! clock and offer blocking-style calls that drive [`Stack::poll`](crate::stack::Stack::poll) while
//! they wait, so a single-threaded program needs no other loop.
//!
//! **May not touch:** protocol state: every call goes through the stack,
//! which decides how much queued work runs; the lazy protocol work of a
//! receive (LRP §3.3–3.4) runs inside these calls, in the caller's context.
//! Sockets are created by the stack (`Stack::udp_bind`, `Stack::tcp_listen`,
//! `Stack::tcp_connect`), which allocates their channels.

pub use crate::stack::SocketError;

mod tcp;
mod udp;

pub use tcp::{wait_step, TcpConn, TcpListen, TcpListener, TcpStream};
pub use udp::{UdpSock, UdpSocket};

/// The stack-clock time `timeout` from now (`None`: no deadline).
fn deadline<N: crate::nic::Nic>(
    stack: &crate::stack::Stack<N>,
    timeout: Option<std::time::Duration>,
) -> Option<u64> {
    timeout.map(|t| stack.now().saturating_add(t.as_nanos() as u64))
}
