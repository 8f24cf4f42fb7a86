//! TCP (RFC 9293), sans-IO.
//!
//! **Owns:** the state of one connection ([`Connection`]): sequence
//! spaces, send and receive buffers (fixed rings allocated at
//! construction), the out-of-order interval set, options (MSS, window
//! scaling, timestamps with PAWS, SACK), RTO (RFC 6298), delayed ACKs,
//! Nagle, silly-window avoidance, zero-window probing, RFC 5961
//! mitigations, and congestion control behind [`CongestionControl`]
//! ([`NewReno`] first).
//!
//! **May not touch:** clocks, randomness (the ISS comes in), I/O, the
//! listener and its SYN queue (later), demultiplexing. Segments come in as
//! a parsed [`crate::wire::tcp::TcpRepr`] plus payload and leave the same
//! way; checksums are the caller's.

pub mod buffer;
pub mod cc;
pub mod conn;
pub mod rtt;

pub use cc::{CongestionControl, NewReno};
pub use conn::{
    reset_for, Config, ConnError, Connection, State, TcpCounters, TcpDrop, DEFAULT_MSS,
};
pub use rtt::RttEstimator;
