//! # lazynet
//!
//! A user-space TCP/IP stack and server runtime built around *lazy receiver
//! processing*: the NIC (or the receive loop standing in for it) only
//! demultiplexes frames into bounded per-socket channels and drops excess right
//! there; protocol work runs later, in the receiver's context.
//!
//! Layering (each module may use only the modules listed before it):
//!
//! | module   | owns |
//! |----------|------|
//! | [`sys`]    | OS helpers that need `unsafe`: pinning, CPU count, thread CPU time, scheduling class and nice, TSC, root check, signals |
//! | [`wire`]   | zero-copy views and builders, Internet checksum |
//! | [`mem`]    | the communication area: memfd regions, buffers, descriptors, SPSC rings |
//! | [`sched`]  | the per-core executor: tasks, owners, priorities, CPU accounting (knows nothing about networking) |
//! | [`nic`]    | the [`nic::Nic`] trait and its drivers |
//! | [`demux`]  | the early-demultiplexing classifier and its bounded channels |
//! | [`proto`]  | sans-IO protocol state (ARP, IPv4, ICMP, UDP) |
//! | [`stack`]  | wiring: decides *when* protocol code runs |
//! | [`socket`] | the application API; lazy work happens inside its calls |
//! | [`server`] | the server loop: one listener, a sans-IO app per connection, driven by readiness |
//! | [`nlf`]    | network level framing: prebuilt-packet meta files, the prebuilder, the send paths |
//!
//! # Example
//!
//! Two stacks on the in-memory wire: a TCP echo server and a client, both
//! driven by the caller with explicit time (here the stacks' own clock).
//!
//! ```
//! use std::net::{Ipv4Addr, SocketAddrV4};
//! use lazynet::nic::wirepair::{WireConfig, WirePair};
//! use lazynet::stack::{Stack, StackConfig};
//!
//! let (a, b) = WirePair::new(WireConfig::default()).unwrap();
//! let cfg = |addr| StackConfig { addr, ..StackConfig::default() };
//! let (ca, sa) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
//! let (mut client, mut server) = (Stack::new(a, cfg(ca)), Stack::new(b, cfg(sa)));
//! let l = server.tcp_listen(SocketAddrV4::new(sa, 7), None, None).unwrap();
//! let c = client.tcp_connect(SocketAddrV4::new(sa, 7), None, client.now()).unwrap();
//! let (mut conn, mut sent, mut echoed) = (None, false, Vec::new());
//! let mut buf = [0u8; 64];
//! for _ in 0..10_000 {
//!     for s in [&mut client, &mut server] {
//!         let now = s.now();
//!         s.poll(now); // receive: demultiplex only
//!         s.tcp_service(now, 256); // TCP input and timers that are due
//!     }
//!     let now = server.now();
//!     if conn.is_none() {
//!         conn = server.listener_mut(l).accept(now).ok();
//!     }
//!     if let Some(h) = conn {
//!         if let Ok(n) = server.tcp_mut(h).recv(&mut buf, now) {
//!             server.tcp_mut(h).send(&buf[..n], now).unwrap();
//!         }
//!     }
//!     let now = client.now();
//!     if !sent && client.tcp_mut(c).send(b"hello", now).is_ok() {
//!         sent = true;
//!     }
//!     if let Ok(n) = client.tcp_mut(c).recv(&mut buf, now) {
//!         echoed.extend_from_slice(&buf[..n]);
//!     }
//!     if echoed.len() == 5 {
//!         break;
//!     }
//! }
//! assert_eq!(echoed, b"hello");
//! ```
//!
//! Unsafe code is confined by the compiler to `sys`, `mem` and `nic`
//! (`unsafe_code` is denied everywhere else); every block carries a
//! `// SAFETY:` comment (`clippy::undocumented_unsafe_blocks`).
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod ctl;
pub mod daemon;
pub mod demux;
pub mod host;
mod keyhash;
#[allow(unsafe_code)]
pub mod mem;
pub mod memnet;
#[allow(unsafe_code)]
pub mod nic;
pub mod nlf;
pub mod proto;
pub mod sched;
pub mod server;
pub mod socket;
pub mod stack;
#[allow(unsafe_code)]
pub mod sys;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod wire;
