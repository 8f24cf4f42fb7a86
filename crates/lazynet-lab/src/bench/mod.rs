//! The benchmarks of `lazynet-lab bench` and `lazynet-lab web`: lazynet
//! measured side by side with Linux and smoltcp in one run, each writing
//! `results/NAME/NAME.{csv,txt,png}`: TCP bulk and request/response
//! against smoltcp ([`tcp`]) and their instruction counts
//! ([`tcp_instructions`]), UDP echo ([`udp_echo`]), wake-up latency
//! ([`wakeup`]), the multi-process placement ([`multiproc`]), the async
//! sockets ([`async_bench`]), and the web server on a real NIC path
//! ([`web`]).
//!
//! **May not touch:** the stack's internals (public API only). The
//! counterparts they run are in [`crate::baseline`].

pub mod async_bench;
pub mod multiproc;
pub mod tcp;
pub mod tcp_instructions;
pub mod udp_echo;
pub mod wakeup;
pub mod web;
