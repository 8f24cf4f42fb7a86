//! Congestion control (RFC 5681, RFC 6582).
//!
//! The connection owns loss detection (duplicate-ACK counting, the
//! `recover` point, RTO); a [`CongestionControl`] owns only the window.
//! NewReno's fast-recovery window inflation is expressed by the
//! `on_dup_ack_in_recovery` / `on_partial_ack` hooks, which a SACK-based
//! recovery (RFC 6675, pipe-driven) simply does not need; CUBIC (RFC 9438)
//! replaces `on_ack` growth and the decrease factor.

/// A congestion controller. All sizes are bytes; `mss` is the effective
/// send MSS. Called only by the connection, in the order the RFCs give.
pub trait CongestionControl: core::fmt::Debug {
    /// Congestion window.
    fn window(&self) -> u32;
    /// Slow-start threshold.
    fn ssthresh(&self) -> u32;
    /// The connection is established: set the initial window (RFC 5681 §3.1).
    fn on_established(&mut self, mss: u32);
    /// `acked` new bytes were acknowledged outside fast recovery.
    fn on_ack(&mut self, now: u64, acked: u32, mss: u32);
    /// Third duplicate ACK: fast retransmit, enter fast recovery
    /// (RFC 5681 §3.2 steps 2-3). `flight` is FlightSize.
    fn on_fast_retransmit(&mut self, now: u64, flight: u32, mss: u32);
    /// A further duplicate ACK during fast recovery (RFC 5681 §3.2 step 4).
    fn on_dup_ack_in_recovery(&mut self, mss: u32);
    /// A partial ACK of `acked` bytes during fast recovery (RFC 6582 §3.2 step 5).
    fn on_partial_ack(&mut self, acked: u32, mss: u32);
    /// A full ACK ends fast recovery (RFC 6582 §3.2 step 4); `flight` is
    /// FlightSize after the ACK.
    fn on_recovery_exit(&mut self, flight: u32, mss: u32);
    /// Retransmission timeout (RFC 5681 §3.1 eq. (4) and loss window).
    fn on_rto(&mut self, flight: u32, mss: u32);
}

/// NewReno (RFC 5681 + RFC 6582).
#[derive(Debug, Clone, Copy)]
pub struct NewReno {
    cwnd: u32,
    ssthresh: u32,
    /// Bytes acked in congestion avoidance since cwnd last grew.
    ca_acked: u32,
}

impl Default for NewReno {
    fn default() -> Self {
        NewReno {
            cwnd: 0,
            // RFC 5681 §3.1: "initial value of ssthresh SHOULD be set arbitrarily high".
            ssthresh: u32::MAX,
            ca_acked: 0,
        }
    }
}

/// RFC 5681 §3.1 eq. (3): IW = 2..4 segments depending on SMSS.
pub fn initial_window(mss: u32) -> u32 {
    if mss > 2190 {
        2 * mss
    } else if mss > 1095 {
        3 * mss
    } else {
        4 * mss
    }
}

impl CongestionControl for NewReno {
    fn window(&self) -> u32 {
        self.cwnd
    }
    fn ssthresh(&self) -> u32 {
        self.ssthresh
    }
    fn on_established(&mut self, mss: u32) {
        self.cwnd = initial_window(mss);
    }
    fn on_ack(&mut self, _now: u64, acked: u32, mss: u32) {
        if self.cwnd < self.ssthresh {
            // RFC 5681 §3.1 eq. (2) with RFC 3465 L=1*SMSS... we allow up to
            // 2*SMSS per ACK to compensate delayed ACKs (RFC 3465 L = 2).
            self.cwnd = self.cwnd.saturating_add(acked.min(2 * mss));
        } else {
            // RFC 5681 §3.1: byte counting, +SMSS per cwnd acked.
            self.ca_acked = self.ca_acked.saturating_add(acked);
            if self.ca_acked >= self.cwnd {
                self.ca_acked -= self.cwnd;
                self.cwnd = self.cwnd.saturating_add(mss);
            }
        }
    }
    fn on_fast_retransmit(&mut self, _now: u64, flight: u32, mss: u32) {
        // RFC 5681 §3.2 eq. (4) and step 3.
        self.ssthresh = (flight / 2).max(2 * mss);
        self.cwnd = self.ssthresh + 3 * mss;
        self.ca_acked = 0;
    }
    fn on_dup_ack_in_recovery(&mut self, mss: u32) {
        self.cwnd = self.cwnd.saturating_add(mss);
    }
    fn on_partial_ack(&mut self, acked: u32, mss: u32) {
        // RFC 6582 §3.2 step 5: deflate by the amount acked, add back SMSS
        // if at least SMSS was acked.
        self.cwnd = self.cwnd.saturating_sub(acked);
        if acked >= mss {
            self.cwnd = self.cwnd.saturating_add(mss);
        }
        self.cwnd = self.cwnd.max(mss);
    }
    fn on_recovery_exit(&mut self, flight: u32, mss: u32) {
        // RFC 6582 §3.2 step 4, option (1) guarded as in its text.
        self.cwnd = self.ssthresh.min(flight.max(mss) + mss);
    }
    fn on_rto(&mut self, flight: u32, mss: u32) {
        // RFC 5681 §3.1 eq. (4); loss window = 1 SMSS.
        self.ssthresh = (flight / 2).max(2 * mss);
        self.cwnd = mss;
        self.ca_acked = 0;
    }
}
