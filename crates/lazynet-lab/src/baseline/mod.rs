//! What lazynet is compared with: Linux at its best and smoltcp. The LRP
//! experiments' Linux series in namespaces of their own ([`linux`]) and
//! the programs they run there ([`linux_helpers`]); Linux sockets over
//! loopback as the benchmarks' counterparts ([`loopback`]); Linux's send
//! paths beside NLF's ([`linux_send`]); MemNet's Linux web servers
//! ([`linux_web`]); smoltcp as the TCP benchmarks' peer stack ([`smol`]).
//!
//! **May not touch:** lazynet's stack (a baseline never uses it, except as
//! the client that drives a Linux server); global kernel settings.

pub mod linux;
pub mod linux_helpers;
pub mod linux_send;
pub mod linux_web;
pub mod loopback;
pub mod smol;
