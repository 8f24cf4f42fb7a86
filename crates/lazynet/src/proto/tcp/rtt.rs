//! Retransmission timer computation (RFC 6298).
//!
//! **Owns:** SRTT, RTTVAR and the RTO with its bounds and backoff.
//! **May not touch:** the connection's other state; it is fed samples.

/// Smoothed RTT estimator and RTO (RFC 6298 §2), in nanoseconds.
#[derive(Debug, Clone, Copy)]
pub struct RttEstimator {
    srtt: u64,
    rttvar: u64,
    has_sample: bool,
    rto: u64,
    min: u64,
    max: u64,
    /// Clock granularity G (RFC 6298 §2.3).
    granularity: u64,
}

impl RttEstimator {
    /// Before any sample: RTO = `initial` (RFC 6298 §2.1: 1 s).
    pub fn new(initial: u64, min: u64, max: u64) -> Self {
        RttEstimator {
            srtt: 0,
            rttvar: 0,
            has_sample: false,
            rto: initial.clamp(min, max),
            min,
            max,
            granularity: 1_000_000,
        }
    }
    /// Feeds one RTT measurement `r` (RFC 6298 §2.2, §2.3).
    pub fn sample(&mut self, r: u64) {
        // Bound the sample (1 hour) so no input can overflow the filters.
        let r = r.min(3_600_000_000_000);
        if !self.has_sample {
            // RFC 6298 §2.2: SRTT <- R, RTTVAR <- R/2.
            self.srtt = r;
            self.rttvar = r / 2;
            self.has_sample = true;
        } else {
            // RFC 6298 §2.3: beta = 1/4, alpha = 1/8.
            let d = self.srtt.abs_diff(r);
            self.rttvar = (3 * self.rttvar + d) / 4;
            self.srtt = (7 * self.srtt + r) / 8;
        }
        // RFC 6298 §2.4, §2.5: RTO = SRTT + max(G, 4*RTTVAR), clamped.
        let rto = self.srtt + self.granularity.max(4 * self.rttvar);
        self.rto = rto.clamp(self.min, self.max);
    }
    /// Raises the RTO to at least `v` (RFC 6298 §5.7).
    pub fn raise_to(&mut self, v: u64) {
        self.rto = self.rto.max(v).min(self.max);
    }
    /// The current RTO (without backoff).
    pub fn rto(&self) -> u64 {
        self.rto
    }
    /// Smoothed RTT, if any sample was taken.
    pub fn srtt(&self) -> Option<u64> {
        self.has_sample.then_some(self.srtt)
    }
    /// RTT variance.
    pub fn rttvar(&self) -> u64 {
        self.rttvar
    }
    /// RTO after `backoff` doublings (RFC 6298 §5.5), capped at the maximum.
    pub fn backed_off(&self, backoff: u32) -> u64 {
        self.rto
            .checked_shl(backoff.min(32))
            .unwrap_or(self.max)
            .min(self.max)
    }
}
