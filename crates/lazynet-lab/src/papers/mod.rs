//! The experiments that reproduce the papers' figures, one module per
//! paper: LRP ([`lrp`]), RTU ([`rtu`]), NLF ([`nlf`]), MemNet ([`memnet`])
//! and the latency paper's build-variant study ([`paths`]).
//!
//! **May not touch:** the stack's internals; every experiment drives
//! lazynet through its public API, as a user program would. Their Linux
//! and smoltcp counterparts are in [`crate::baseline`], the shared
//! machinery in [`crate::infra`].

pub mod lrp;
pub mod memnet;
pub mod nlf;
pub mod paths;
pub mod rtu;
