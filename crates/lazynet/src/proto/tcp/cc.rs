//! Congestion control (RFC 5681, RFC 6582, RFC 9438).
//!
//! **Owns:** the congestion window and slow-start threshold, and how they
//! grow and shrink: [`NewReno`] (RFC 5681 + RFC 6582), [`Cubic`] (RFC 9438,
//! without HyStart), and [`Cc`], the run-time choice between them that
//! [`super::Connection`] uses by default (selected by
//! [`super::Config::cc`]).
//!
//! **Does not own:** loss detection (duplicate-ACK counting, the SACK
//! scoreboard, the `recover` point, RTO) — that is the connection's. A
//! controller sees only events: ACKed bytes, entering recovery, recovery
//! exit, RTO. NewReno's fast-recovery window inflation is expressed by the
//! `on_dup_ack_in_recovery` / `on_partial_ack` hooks, which SACK-based
//! recovery (RFC 6675, pipe-driven) does not call; it enters recovery with
//! [`CongestionControl::on_enter_recovery`] (cwnd = ssthresh) instead.
//!
//! No allocation; every call is O(1). CUBIC uses `f64` arithmetic (the
//! cube root of RFC 9438 §4.2 eq. 2); it is deterministic for given inputs.

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
    /// SACK-based loss recovery starts (RFC 6675 §5 step 4.2): set
    /// ssthresh as the algorithm prescribes and cwnd = ssthresh (no
    /// inflation; the connection paces by `pipe`). `flight` is FlightSize.
    fn on_enter_recovery(&mut self, now: u64, flight: u32, mss: u32);
    /// A new smoothed RTT (RFC 6298), in ns. CUBIC's target is
    /// W_cubic(t + RTT) (RFC 9438 §4.2); NewReno ignores it.
    fn on_rtt(&mut self, _srtt: u64) {}
    /// A further duplicate ACK during fast recovery (RFC 5681 §3.2 step 4).
    fn on_dup_ack_in_recovery(&mut self, mss: u32);
    /// A partial ACK of `acked` bytes during fast recovery (RFC 6582 §3.2 step 5).
    fn on_partial_ack(&mut self, acked: u32, mss: u32);
    /// A full ACK ends fast recovery (RFC 6582 §3.2 step 4); `flight` is
    /// FlightSize after the ACK.
    fn on_recovery_exit(&mut self, flight: u32, mss: u32);
    /// Retransmission timeout (RFC 5681 §3.1 eq. (4) and loss window).
    fn on_rto(&mut self, flight: u32, mss: u32);
    /// Sending resumes after the connection sent nothing for more than
    /// `halvings` retransmission timeouts (at most `halvings` + 1; at
    /// least one: [`idle_restart`]).
    fn on_idle_restart(&mut self, halvings: u32, mss: u32);
}

/// RFC 5681 §4.1, restart after idle, as Linux's `tcp_cwnd_restart`: the
/// window the connection had is no measure of the path after a silence
/// longer than an RTO, so it is halved once per RTO of silence beyond the
/// first (`halvings`), but not below RFC 5681's restart window
/// min(IW, cwnd); ssthresh keeps at least three quarters of the old
/// window, so slow start climbs back to it quickly. Returns the new
/// (cwnd, ssthresh).
pub fn idle_restart(cwnd: u32, ssthresh: u32, halvings: u32, mss: u32) -> (u32, u32) {
    let restart = initial_window(mss).min(cwnd);
    let ssthresh = ssthresh.max(cwnd / 4 * 3);
    let shifted = cwnd.checked_shr(halvings).unwrap_or(0);
    (shifted.max(restart), ssthresh)
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
    fn on_enter_recovery(&mut self, _now: u64, flight: u32, mss: u32) {
        // RFC 6675 §5 step 4.2: ssthresh = cwnd = FlightSize / 2 (with
        // RFC 5681 eq. (4)'s floor of 2·SMSS).
        self.ssthresh = (flight / 2).max(2 * mss);
        self.cwnd = self.ssthresh;
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
    fn on_idle_restart(&mut self, halvings: u32, mss: u32) {
        (self.cwnd, self.ssthresh) = idle_restart(self.cwnd, self.ssthresh, halvings, mss);
        self.ca_acked = 0;
    }
}

// -------------------------------------------------------------------
// CUBIC (RFC 9438).

/// RFC 9438 §4.6: multiplicative decrease factor β_cubic.
pub const CUBIC_BETA: f64 = 0.7;
/// RFC 9438 §4.2: the constant C (segments / s³).
pub const CUBIC_C: f64 = 0.4;
/// RFC 9438 §4.3: α_cubic = 3·(1 − β) / (1 + β), the Reno-friendly
/// additive increase while W_est < cwnd_prior.
pub const CUBIC_ALPHA: f64 = 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA);

const NS_PER_SEC: f64 = 1e9;

/// CUBIC (RFC 9438) without HyStart: slow start as RFC 5681 (with the same
/// L = 2 byte counting as [`NewReno`]); congestion avoidance follows
/// W_cubic(t) = C·(t − K)³ + W_max (§4.2) or, when that is below what Reno
/// would have reached, the Reno-friendly estimate W_est (§4.3); a loss
/// multiplies cwnd by β = 0.7 (§4.6) with fast convergence (§4.7).
///
/// Windows are kept in bytes (`W / SMSS` gives the RFC's segments); time
/// is the connection's `now` in ns. The fast-recovery hooks that are not
/// CUBIC's business (`on_dup_ack_in_recovery`, `on_partial_ack`,
/// `on_recovery_exit`) behave as NewReno's: RFC 9438 §4.6 changes only the
/// decrease, not the recovery algorithm.
#[derive(Debug, Clone, Copy)]
pub struct Cubic {
    cwnd: u32,
    ssthresh: u32,
    /// W_max in bytes: the window just before the last reduction, lowered
    /// by fast convergence (§4.7). 0 before the first congestion event.
    w_max: f64,
    /// cwnd_prior (§4.6): cwnd before the last reduction, for α (§4.3).
    cwnd_prior: f64,
    /// K in seconds (§4.2 eq. 2), fixed at the start of the epoch.
    k: f64,
    /// Start of the current congestion-avoidance stage (ns); `None` until
    /// the first ACK in congestion avoidance after a reduction.
    epoch: Option<u64>,
    /// W_est in bytes (§4.3).
    w_est: f64,
    /// The last reduction was an RTO: the next epoch uses K = 0 and
    /// W_max = cwnd_epoch (§4.8).
    after_rto: bool,
    /// An RTO happened and no ACK of new data since: a further RTO holds
    /// ssthresh (RFC 5681 §3.1, "held constant").
    rto_pending: bool,
    /// Smoothed RTT in ns (0 until sampled).
    srtt: u64,
    /// Fractional bytes of growth not yet added to cwnd.
    credit: f64,
}

impl Default for Cubic {
    fn default() -> Self {
        Cubic {
            cwnd: 0,
            // RFC 9438 §4.10 / RFC 5681 §3.1: initially arbitrarily high.
            ssthresh: u32::MAX,
            w_max: 0.0,
            cwnd_prior: 0.0,
            k: 0.0,
            epoch: None,
            w_est: 0.0,
            after_rto: false,
            rto_pending: false,
            srtt: 0,
            credit: 0.0,
        }
    }
}

impl Cubic {
    /// W_max in bytes (RFC 9438 §4.1).
    pub fn w_max(&self) -> f64 {
        self.w_max
    }
    /// K in seconds of the current epoch (RFC 9438 §4.2 eq. 2); 0 before
    /// the first epoch.
    pub fn k(&self) -> f64 {
        self.k
    }
    /// W_est in bytes (RFC 9438 §4.3).
    pub fn w_est(&self) -> f64 {
        self.w_est
    }
    /// Start of the current congestion-avoidance epoch (ns), if one began.
    pub fn epoch_start(&self) -> Option<u64> {
        self.epoch
    }

    /// W_cubic(t) in bytes (RFC 9438 §4.2 eq. 1), `t` in seconds since
    /// the start of the epoch.
    pub fn w_cubic(&self, t: f64, mss: u32) -> f64 {
        let d = t - self.k;
        CUBIC_C * d * d * d * f64::from(mss) + self.w_max
    }

    /// The multiplicative decrease and fast convergence common to every
    /// congestion event (RFC 9438 §4.6, §4.7). Sets ssthresh only.
    fn reduce(&mut self, mss: u32) {
        let cwnd = f64::from(self.cwnd);
        // §4.7: a flow whose window did not recover to the previous W_max
        // releases bandwidth: W_max = cwnd · (1 + β) / 2.
        self.w_max = if cwnd < self.w_max {
            cwnd * (1.0 + CUBIC_BETA) / 2.0
        } else {
            cwnd
        };
        self.cwnd_prior = cwnd;
        // §4.6: ssthresh = cwnd · β, at least 2·SMSS.
        self.ssthresh = ((cwnd * CUBIC_BETA) as u32).max(2 * mss);
        self.epoch = None;
        self.credit = 0.0;
        self.after_rto = false;
    }

    fn start_epoch(&mut self, now: u64, mss: u32) {
        let cwnd = f64::from(self.cwnd);
        self.epoch = Some(now);
        if self.after_rto || self.w_max <= cwnd {
            // §4.8 after an RTO, and when cwnd already reached W_max (no
            // loss yet, or the window regrew in slow start): K = 0 and the
            // plateau is where we start, so growth is convex from here.
            self.after_rto = false;
            self.k = 0.0;
            self.w_max = cwnd;
        } else {
            // §4.2 eq. 2: K = ∛((W_max − cwnd_epoch) / C), in segments.
            self.k = ((self.w_max - cwnd) / f64::from(mss) / CUBIC_C).cbrt();
        }
        // §4.3: W_est starts at cwnd_epoch.
        self.w_est = cwnd;
        self.credit = 0.0;
    }
}

impl CongestionControl for Cubic {
    fn window(&self) -> u32 {
        self.cwnd
    }
    fn ssthresh(&self) -> u32 {
        self.ssthresh
    }
    fn on_established(&mut self, mss: u32) {
        self.cwnd = initial_window(mss);
    }
    fn on_rtt(&mut self, srtt: u64) {
        self.srtt = srtt;
    }
    fn on_ack(&mut self, now: u64, acked: u32, mss: u32) {
        self.rto_pending = false;
        if self.cwnd < self.ssthresh {
            // §4.10: slow start as RFC 5681 (L = 2 as NewReno).
            self.cwnd = self.cwnd.saturating_add(acked.min(2 * mss));
            return;
        }
        let epoch = match self.epoch {
            Some(e) => e,
            None => {
                self.start_epoch(now, mss);
                now
            }
        };
        let cwnd = f64::from(self.cwnd).max(1.0);
        let acked_f = f64::from(acked);
        let mss_f = f64::from(mss);
        let t = now.saturating_sub(epoch) as f64 / NS_PER_SEC;
        // §4.3: W_est grows by α per window of ACKed data; α becomes 1
        // once W_est reaches cwnd_prior.
        let alpha = if self.w_est >= self.cwnd_prior {
            1.0
        } else {
            CUBIC_ALPHA
        };
        self.w_est += alpha * acked_f * mss_f / cwnd;
        if self.w_cubic(t, mss) < self.w_est {
            // §4.3 Reno-friendly region: cwnd = W_est.
            self.cwnd = (self.w_est as u32).max(self.cwnd);
            self.credit = 0.0;
            return;
        }
        // §4.4 / §4.5: target = W_cubic(t + RTT), clamped to
        // [cwnd, 1.5·cwnd]; cwnd += (target − cwnd) / cwnd per SMSS acked.
        let rtt = self.srtt as f64 / NS_PER_SEC;
        let target = self.w_cubic(t + rtt, mss).clamp(cwnd, 1.5 * cwnd);
        self.credit += (target - cwnd) * acked_f / cwnd;
        let whole = self.credit.floor();
        if whole >= 1.0 {
            self.credit -= whole;
            self.cwnd = self
                .cwnd
                .saturating_add(whole.min(f64::from(u32::MAX)) as u32);
        }
    }
    fn on_fast_retransmit(&mut self, _now: u64, _flight: u32, mss: u32) {
        // §4.6 decrease, then RFC 5681 §3.2 step 3's inflation (the
        // recovery itself is NewReno's, RFC 6582).
        self.reduce(mss);
        self.cwnd = self.ssthresh.saturating_add(3 * mss);
    }
    fn on_enter_recovery(&mut self, _now: u64, _flight: u32, mss: u32) {
        // §4.6: cwnd = max(ssthresh, 2·SMSS) on loss (RFC 6675 step 4.2).
        self.reduce(mss);
        self.cwnd = self.ssthresh;
    }
    fn on_dup_ack_in_recovery(&mut self, mss: u32) {
        self.cwnd = self.cwnd.saturating_add(mss);
    }
    fn on_partial_ack(&mut self, acked: u32, mss: u32) {
        // RFC 6582 §3.2 step 5, as NewReno.
        self.cwnd = self.cwnd.saturating_sub(acked);
        if acked >= mss {
            self.cwnd = self.cwnd.saturating_add(mss);
        }
        self.cwnd = self.cwnd.max(mss);
    }
    fn on_recovery_exit(&mut self, flight: u32, mss: u32) {
        // RFC 6582 §3.2 step 4 option (1), as NewReno.
        self.cwnd = self.ssthresh.min(flight.max(mss) + mss);
    }
    fn on_idle_restart(&mut self, halvings: u32, mss: u32) {
        (self.cwnd, self.ssthresh) = idle_restart(self.cwnd, self.ssthresh, halvings, mss);
        // The cubic curve's clock starts again when congestion avoidance
        // does: the silence was no time spent probing the path.
        self.epoch = None;
    }
    fn on_rto(&mut self, _flight: u32, mss: u32) {
        // §4.8: ssthresh by β as in §4.6, cwnd = loss window (1 SMSS);
        // the next epoch starts with K = 0 and W_max = cwnd_epoch. A
        // repeated RTO without progress holds ssthresh (RFC 5681 §3.1).
        if !self.rto_pending {
            self.reduce(mss);
        }
        self.rto_pending = true;
        self.after_rto = true;
        self.epoch = None;
        self.credit = 0.0;
        self.cwnd = mss;
    }
}

// -------------------------------------------------------------------
// Run-time choice.

/// Which congestion controller a [`super::Connection`] built with
/// `connect` / `accept_syn` uses ([`super::Config::cc`]).
///
/// The default is CUBIC, as in Linux, Windows and macOS: it is what peers
/// and competing flows on the Internet expect, and on long fat paths its
/// window regrows in time independent of RTT, where NewReno needs one RTT
/// per SMSS. NewReno remains available (and is what the segment-level
/// tests use for their exact RFC 5681 arithmetic).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CcAlgo {
    /// RFC 5681 + RFC 6582.
    NewReno,
    /// RFC 9438.
    #[default]
    Cubic,
}

/// A congestion controller chosen at run time; delegates to the variant.
/// An enum rather than `Box<dyn CongestionControl>`: no allocation and
/// no indirect call per ACK.
#[derive(Debug, Clone, Copy)]
pub enum Cc {
    /// NewReno.
    NewReno(NewReno),
    /// CUBIC.
    Cubic(Cubic),
}

impl Cc {
    /// A fresh controller of kind `algo`.
    pub fn new(algo: CcAlgo) -> Self {
        match algo {
            CcAlgo::NewReno => Cc::NewReno(NewReno::default()),
            CcAlgo::Cubic => Cc::Cubic(Cubic::default()),
        }
    }
    /// Which algorithm this is.
    pub fn algo(&self) -> CcAlgo {
        match self {
            Cc::NewReno(_) => CcAlgo::NewReno,
            Cc::Cubic(_) => CcAlgo::Cubic,
        }
    }
}

impl Default for Cc {
    fn default() -> Self {
        Cc::new(CcAlgo::default())
    }
}

macro_rules! delegate {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            Cc::NewReno($c) => $e,
            Cc::Cubic($c) => $e,
        }
    };
}

impl CongestionControl for Cc {
    fn window(&self) -> u32 {
        delegate!(self, c => c.window())
    }
    fn ssthresh(&self) -> u32 {
        delegate!(self, c => c.ssthresh())
    }
    fn on_established(&mut self, mss: u32) {
        delegate!(self, c => c.on_established(mss))
    }
    fn on_idle_restart(&mut self, halvings: u32, mss: u32) {
        delegate!(self, c => c.on_idle_restart(halvings, mss))
    }
    fn on_ack(&mut self, now: u64, acked: u32, mss: u32) {
        delegate!(self, c => c.on_ack(now, acked, mss))
    }
    fn on_fast_retransmit(&mut self, now: u64, flight: u32, mss: u32) {
        delegate!(self, c => c.on_fast_retransmit(now, flight, mss))
    }
    fn on_enter_recovery(&mut self, now: u64, flight: u32, mss: u32) {
        delegate!(self, c => c.on_enter_recovery(now, flight, mss))
    }
    fn on_rtt(&mut self, srtt: u64) {
        delegate!(self, c => c.on_rtt(srtt))
    }
    fn on_dup_ack_in_recovery(&mut self, mss: u32) {
        delegate!(self, c => c.on_dup_ack_in_recovery(mss))
    }
    fn on_partial_ack(&mut self, acked: u32, mss: u32) {
        delegate!(self, c => c.on_partial_ack(acked, mss))
    }
    fn on_recovery_exit(&mut self, flight: u32, mss: u32) {
        delegate!(self, c => c.on_recovery_exit(flight, mss))
    }
    fn on_rto(&mut self, flight: u32, mss: u32) {
        delegate!(self, c => c.on_rto(flight, mss))
    }
}
