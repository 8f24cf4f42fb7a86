//! TCP (RFC 9293), sans-IO.
//!
//! **Owns:** the state of one connection ([`Connection`]): sequence
//! spaces, send and receive buffers (fixed rings allocated at
//! construction), the out-of-order interval set, options (MSS, window
//! scaling, timestamps with PAWS, SACK), RTO (RFC 6298), delayed ACKs,
//! Nagle, silly-window avoidance, zero-window probing, RFC 5961
//! mitigations, and congestion control behind [`CongestionControl`]
//! ([`NewReno`] or [`Cubic`], chosen per connection by [`Config::cc`]).
//!
//! **May not touch:** clocks, randomness (the ISS comes in), I/O,
//! demultiplexing. The listener (SYN and accept queues, SYN cookies) is
//! [`listen`]; the keyed hash for ISNs, ports and cookies is [`secret`].
//! Segments come in as a parsed [`crate::wire::tcp::TcpRepr`] plus
//! payload and leave the same way; checksums are the caller's.
//!
//! **Deviations from the letter of the RFCs, on purpose** (each has a test):
//! - a zero-length non-RST segment exactly at our right window edge is
//!   acceptable (as Linux `tcp_sequence()`), and our pure ACKs carry
//!   `min(SND.MAX, SND.UNA + SND.WND)` (as Linux `tcp_acceptable_seq()`):
//!   the strict RFC 9293 test deadlocks two peers that filled each other's
//!   window after an RTO;
//! - segments without timestamps after they were negotiated are accepted
//!   (RFC 7323 §3.2 allows dropping them; Linux accepts);
//! - no timestamp RTT samples from ACKs covering data outstanding at an
//!   RTO (their TSecr may predate the timeout);
//! - RTO floor 200 ms (configurable) instead of RFC 6298's 1 s.
//!
//! With SACK negotiated, loss recovery is RFC 6675's (scoreboard in
//! [`sack`], pipe-driven, NextSeg); without it, NewReno's (RFC 6582).
//! Either way the first two duplicate ACKs each let one new segment out
//! (Limited Transmit, RFC 3042).
//!
//! **Also here:** SACK-based loss recovery per RFC 6675 with a bounded
//! scoreboard ([`sack`]); CUBIC (RFC 9438) and NewReno behind
//! [`CongestionControl`], chosen per connection by `Config::cc`; a bounded
//! TIME-WAIT table with RFC 6191 reuse ([`timewait`]), which the stack
//! fills with connections whose handle was closed.
//!
//! **Not yet:** RACK-TLP, PRR, HyStart, undo of
//! spurious reductions, D-SACK use, urgent data (ignored, delivered
//! inline). Restart after idle (RFC 5681 §4.1) decays the window per RTO
//! of silence as Linux does rather than resetting it to the restart
//! window at once ([`cc::idle_restart`]). SYN cookies carry the MSS,
//! and window scale and SACK-permitted in the timestamp when the peer
//! sends one (`cookie`).
//!
//! **Fast path:** header prediction for ESTABLISHED in-order data and
//! pure ACKs (`fast.rs`, `Config::fast_path`), a proven subset of the
//! slow path (`tests/tcp/fastpath.rs`).

pub mod buffer;
pub mod cc;
pub mod conn;
pub mod cookie;
pub mod listen;
pub mod rtt;
pub mod sack;
pub mod secret;
pub mod timewait;
mod tuple_index;

pub use cc::{Cc, CcAlgo, CongestionControl, Cubic, NewReno};
pub use conn::{
    reset_for, Burst, Config, ConnError, Connection, State, TcpCounters, TcpDrop, DEFAULT_MSS,
    MIN_PMTU,
};
pub use listen::{ListenConfig, ListenCounters, ListenDrop, ListenOutput, Listener};
pub use rtt::RttEstimator;
pub use secret::{EphemeralPorts, Secret};
pub use timewait::{
    TimeWaitConfig, TimeWaitEntry, TimeWaitTable, TwAction, TwCounters, TwDrop, TwEvict, TwKey,
    TwTimestamps,
};
