//! Protocol state machines, sans-IO.
//!
//! **Owns:** the protocol state of the stack — the ARP cache and resolution
//! queue ([`arp`]), IPv4 reassembly, fragmentation plans and identification
//! ([`ip`]), ICMP error rules and rate limiting ([`icmp`]), UDP port
//! allocation ([`udp`]), TCP connections ([`tcp`]).
//!
//! **May not touch:** I/O, sockets, threads, clocks or randomness. Time
//! comes in as `now: u64` (monotonic nanoseconds), randomness as values or
//! seeds drawn by the caller, packets as already-parsed fields, byte slices
//! and [`crate::mem::Desc`]s. Only [`tcp`] uses [`crate::wire`], for its
//! already-parsed `TcpRepr` and `SeqNumber` types (no parsing here): the
//! `stack` glues parsing and protocol state, and decides when code here runs.
//!
//! Every structure is bounded: its limits are fixed at construction (where
//! all allocation happens) and stated in its docs, every call does bounded
//! work, and every refusal is a small `Copy` reason that is also counted.

pub mod arp;
pub mod icmp;
pub mod ip;
pub mod tcp;
pub mod udp;

pub use arp::{ArpCache, ArpConfig, ArpCounters, ArpPoll, ArpState, ArpUpdate, Resolve};
pub use icmp::{may_send_error, ErrorContext, IcmpSuppress, RateLimiter};
pub use ip::{
    fragment_plan, FragError, FragmentPlan, IdentGen, ReasmConfig, ReasmCounters, ReasmDrop,
    ReasmKey, Reassembled, Reassembler,
};
pub use udp::{PortAllocator, EPHEMERAL_FIRST, EPHEMERAL_LAST};
