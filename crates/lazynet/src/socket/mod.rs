//! The application API: one name per socket, and two ways to call it.
//!
//! **Owns:** the public calls on one socket of a [`Stack`](crate::stack::Stack).
//! A socket *is* its handle: [`TcpStream`], [`TcpListener`] and
//! [`UdpSocket`] are small `Copy` names the stack hands out
//! (`Stack::tcp_connect`, `Stack::tcp_listen`, `Stack::udp_bind`, or the
//! constructors here) and the application passes back with the stack:
//!
//! * **Explicit time** (the sans-IO way the rest of the stack works): a
//!   view that borrows the stack for one call, `stack.tcp_mut(s)`
//!   ([`TcpStreamRef`]), `stack.listener_mut(l)` ([`TcpListenerRef`]),
//!   `stack.udp_mut(u)` ([`UdpSocketRef`]) and their read-only forms
//!   `stack.tcp(s)`, `stack.listener(l)`, `stack.udp(u)`. Every TCP call
//!   that may do protocol work takes `now` (UDP's checks need no clock).
//! * **The stack's clock**: methods on the socket itself that take the
//!   stack (`s.recv(&mut stack, buf)`), and blocking-style ones
//!   (`s.recv_blocking(..)`, `s.send_all_blocking(..)`, `l.accept_blocking(..)`)
//!   that drive [`Stack::poll`](crate::stack::Stack::poll) while they wait, so
//!   a single-threaded program needs no other loop. The same verbs as the
//!   views: `recv` and `send`.
//!
//! **May not touch:** protocol state: every call goes through the stack,
//! which decides how much queued work runs; the lazy protocol work of a
//! receive (LRP §3.3–3.4) runs inside these calls, in the caller's context.

pub use crate::stack::SocketError;

mod tcp;
mod udp;

pub use crate::stack::{TcpListener, TcpStream, UdpSocket};
pub use tcp::{wait_step, TcpListenerRef, TcpStreamRef};
pub use udp::UdpSocketRef;

/// The stack-clock time `timeout` from now (`None`: no deadline).
fn deadline<N: crate::nic::Nic>(
    stack: &crate::stack::Stack<N>,
    timeout: Option<std::time::Duration>,
) -> Option<u64> {
    timeout.map(|t| stack.now().saturating_add(t.as_nanos() as u64))
}
