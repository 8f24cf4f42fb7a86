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
//! | [`sys`]    | OS helpers that need `unsafe`: pinning, thread CPU time, scheduling class, TSC |
//! | [`wire`]   | zero-copy views and builders, Internet checksum |
//! | [`mem`]    | the communication area: memfd regions, buffers, descriptors, SPSC rings |
//! | [`sched`]  | the per-core executor: tasks, owners, priorities, CPU accounting (knows nothing about networking) |
//! | [`nic`]    | the [`nic::Nic`] trait and its drivers |
//! | [`demux`]  | the early-demultiplexing classifier and its bounded channels |
//! | [`proto`]  | sans-IO protocol state (ARP, IPv4, ICMP, UDP) |
//! | [`stack`]  | wiring: decides *when* protocol code runs |
//! | [`socket`] | the application API; lazy work happens inside its calls |
//! | [`nlf`]    | network level framing: prebuilt-packet meta files, the prebuilder, the send paths |
//!
//! Unsafe code is confined by the compiler to `sys`, `mem` and `nic`
//! (`unsafe_code` is denied everywhere else); every block carries a
//! `// SAFETY:` comment (`clippy::undocumented_unsafe_blocks`).
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod demux;
pub mod host;
mod keyhash;
#[allow(unsafe_code)]
pub mod mem;
#[allow(unsafe_code)]
pub mod nic;
pub mod nlf;
pub mod proto;
pub mod sched;
pub mod socket;
pub mod stack;
#[allow(unsafe_code)]
pub mod sys;
pub mod wire;
