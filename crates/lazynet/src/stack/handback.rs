//! Hand-back of consumed receive buffers: whether the receiver evicts a
//! frame's cache lines once it has copied the text out.
//!
//! On the in-memory wire and with the offload NI, the core that wrote a
//! received frame takes its buffer back and writes it again. Where the two
//! cores share a cache, the lines the receiver read are close to the writer
//! and keeping them is best. Where they do not, each line the writer
//! overwrites must first be taken back from the receiver's caches, one
//! slow cross-core transfer per line, and on this machine that made the
//! sender the bottleneck of bulk transfer for both stacks
//! (`results/tcp/ab-session8.md`). Evicting the consumed lines
//! (`mem::BufArea::evict`) lets the writer fetch them from memory instead:
//! +32% with the cores apart, but −24% where they share a cache, since the
//! receiver then pays for the eviction and the writer for memory. A guest
//! cannot see where the host puts its vCPUs, and the host moves them every
//! few seconds, so the choice is made by measuring.
//!
//! [`Handback`] does that, sans-IO: it is told the bytes consumed and the
//! time, and says whether to evict. Consumed text is counted in epochs of
//! [`EPOCH_BYTES`]. One epoch in [`CYCLE`] is a trial of the other choice;
//! the choice changes when [`CONFIRM`] trials in a row finished their
//! epoch at least [`MARGIN_PCT`]% faster than the epoch just before. An
//! epoch longer than [`SLOW_EPOCH_NS`] (a flow limited by something else)
//! is not compared: there the choice does not matter, and its noise would
//! only flip it. So a trial costs at most 1/`CYCLE` of the time in the
//! worse choice, and a flow that is not bulk never leaves "keep".
//!
//! Owns: the choice and its measurements. Does not touch: buffers, the
//! NIC, or a clock (time comes in as an argument). It only applies where
//! the NIC says another core writes its buffers (`Nic::cross_core_buffers`)
//! and is applied wherever TCP copies a segment's text out of its frame:
//! direct placement into the reader's buffer (`Stack::conn_direct`) and
//! the ordinary path into the receive buffer (`Stack::conn_input_parsed`).
//! Both count towards the epochs.

/// How received frames' lines are treated after their text is copied out
/// ([`crate::stack::StackConfig::rx_handback`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HandbackMode {
    /// Never evict.
    Off,
    /// Measure and choose (see the module docs). The default.
    #[default]
    Adaptive,
    /// Always evict (for experiments).
    Always,
}

/// Bytes of consumed text per measured epoch (~1.7 ms at 20 Gbit/s).
pub const EPOCH_BYTES: u64 = 4 << 20;
/// One epoch in `CYCLE` tries the other choice.
pub const CYCLE: u32 = 16;
/// Trials in a row that must win before the choice changes.
pub const CONFIRM: u32 = 2;
/// How much faster (in %) a trial epoch must be to count as a win.
pub const MARGIN_PCT: u64 = 5;
/// Epochs longer than this (4 MiB in 50 ms: below ~670 Mbit/s) are not
/// compared.
pub const SLOW_EPOCH_NS: u64 = 50_000_000;

/// The keep-or-evict choice of one stack (see the module docs).
#[derive(Clone, Debug)]
pub struct Handback {
    mode: HandbackMode,
    /// Evict in the current epoch.
    evict: bool,
    /// The choice outside trials.
    best: bool,
    /// Position in the cycle; 0 is the trial epoch.
    pos: u32,
    /// Trials won in a row.
    wins: u32,
    /// Start time and bytes of the current epoch.
    start: u64,
    bytes: u64,
    /// Nanoseconds per `EPOCH_BYTES` of the last non-trial epoch (0: none).
    last: u64,
    switches: u64,
}

impl Handback {
    /// A choice in `mode`; `Adaptive` starts by keeping.
    pub fn new(mode: HandbackMode) -> Self {
        Handback {
            mode,
            evict: mode == HandbackMode::Always,
            best: false,
            pos: 1,
            wins: 0,
            start: 0,
            bytes: 0,
            last: 0,
            switches: 0,
        }
    }

    /// Whether to evict the frames consumed now.
    #[inline]
    pub fn evict(&self) -> bool {
        self.evict
    }

    /// Times the choice outside trials changed.
    pub fn switches(&self) -> u64 {
        self.switches
    }

    /// `bytes` of received text were copied out of their frames at time
    /// `now` (ns, monotonic).
    #[inline]
    pub fn placed(&mut self, bytes: u64, now: u64) {
        if self.mode != HandbackMode::Adaptive {
            return;
        }
        if self.bytes == 0 {
            self.start = now;
        }
        self.bytes += bytes;
        if self.bytes >= EPOCH_BYTES {
            self.epoch_end(now);
        }
    }

    #[cold]
    fn epoch_end(&mut self, now: u64) {
        let took = now.saturating_sub(self.start);
        // Normalized to EPOCH_BYTES: the last call may overshoot it.
        let per = (u128::from(took) * u128::from(EPOCH_BYTES) / u128::from(self.bytes)) as u64;
        self.bytes = 0;
        if took > SLOW_EPOCH_NS {
            // Not limited by this: start over with a fresh reference.
            self.pos = 1;
            self.wins = 0;
            self.last = 0;
            self.evict = self.best;
            return;
        }
        if self.pos == 0 {
            let won = self.last > 0
                && u128::from(per) * 100 < u128::from(self.last) * u128::from(100 - MARGIN_PCT);
            if won {
                self.wins += 1;
                if self.wins >= CONFIRM {
                    self.best = !self.best;
                    self.wins = 0;
                    self.switches += 1;
                }
            } else {
                self.wins = 0;
            }
        } else {
            self.last = per;
        }
        self.pos = (self.pos + 1) % CYCLE;
        self.evict = if self.pos == 0 { !self.best } else { self.best };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `epochs` epochs of text in 64 KiB reads; an epoch takes
    /// `cost(evicting)` ns. Returns the epochs spent evicting.
    fn run(h: &mut Handback, now: &mut u64, epochs: u32, cost: impl Fn(bool) -> u64) -> u32 {
        const READ: u64 = 64 << 10;
        let mut evicting = 0;
        for _ in 0..epochs {
            let e = h.evict();
            evicting += u32::from(e);
            let step = cost(e) / (EPOCH_BYTES / READ);
            for _ in 0..EPOCH_BYTES / READ {
                *now += step;
                h.placed(READ, *now);
            }
        }
        evicting
    }

    /// Cores apart: evicting is 25% faster.
    fn apart(evict: bool) -> u64 {
        if evict {
            1_500_000
        } else {
            2_000_000
        }
    }

    /// Cores sharing a cache: evicting is 25% slower.
    fn shared(evict: bool) -> u64 {
        if evict {
            2_000_000
        } else {
            1_500_000
        }
    }

    #[test]
    fn off_and_always_never_change() {
        let mut now = 0;
        let mut off = Handback::new(HandbackMode::Off);
        assert_eq!(run(&mut off, &mut now, 100, apart), 0);
        let mut always = Handback::new(HandbackMode::Always);
        assert_eq!(run(&mut always, &mut now, 100, shared), 100);
        assert_eq!(off.switches() + always.switches(), 0);
    }

    #[test]
    fn keeps_where_evicting_is_slower_and_tries_once_a_cycle() {
        let mut h = Handback::new(HandbackMode::Adaptive);
        let mut now = 0;
        let n = 20 * CYCLE;
        assert_eq!(run(&mut h, &mut now, n, shared), 20, "one trial per cycle");
        assert_eq!(h.switches(), 0);
    }

    #[test]
    fn keeps_where_both_cost_the_same() {
        let mut h = Handback::new(HandbackMode::Adaptive);
        let mut now = 0;
        run(&mut h, &mut now, 20 * CYCLE, |_| 1_700_000);
        assert_eq!(h.switches(), 0);
        assert!(!h.evict() || h.pos == 0);
    }

    #[test]
    fn evicts_where_it_is_faster_after_two_winning_trials() {
        let mut h = Handback::new(HandbackMode::Adaptive);
        let mut now = 0;
        // The first cycle's trial wins once: not yet.
        run(&mut h, &mut now, CYCLE, apart);
        assert_eq!(h.switches(), 0);
        run(&mut h, &mut now, CYCLE, apart);
        assert_eq!(h.switches(), 1, "switched at the second win");
        let n = 10 * CYCLE;
        assert_eq!(
            run(&mut h, &mut now, n, apart),
            n - 10,
            "evicts but in trials"
        );
    }

    #[test]
    fn follows_the_cores_when_the_host_moves_them() {
        let mut h = Handback::new(HandbackMode::Adaptive);
        let mut now = 0;
        run(&mut h, &mut now, 4 * CYCLE, apart);
        assert!(h.evict() || h.pos == 0);
        run(&mut h, &mut now, 4 * CYCLE, shared);
        assert_eq!(h.switches(), 2);
        let n = 10 * CYCLE;
        assert_eq!(run(&mut h, &mut now, n, shared), 10, "keeps but in trials");
    }

    #[test]
    fn one_lucky_trial_does_not_switch() {
        let mut h = Handback::new(HandbackMode::Adaptive);
        let mut now = 0;
        // Trials alternate between a win and a loss: never two in a row.
        let mut trial = 0u32;
        for _ in 0..20 {
            for _ in 0..CYCLE {
                let lucky = h.pos == 0 && trial % 2 == 0;
                if h.pos == 0 {
                    trial += 1;
                }
                let c = if lucky { 1_000_000 } else { 2_000_000 };
                run(&mut h, &mut now, 1, |_| c);
            }
        }
        assert_eq!(h.switches(), 0);
    }

    #[test]
    fn slow_epochs_are_not_compared() {
        let mut h = Handback::new(HandbackMode::Adaptive);
        let mut now = 0;
        // An application-limited flow: 4 MiB in 60 or 90 ms.
        run(&mut h, &mut now, 10 * CYCLE, |e| {
            if e {
                60_000_000
            } else {
                90_000_000
            }
        });
        assert_eq!(h.switches(), 0);
        assert!(!h.evict());
    }

    #[test]
    fn an_epoch_spans_reads_and_overshoot_is_normalized() {
        let mut h = Handback::new(HandbackMode::Adaptive);
        // 3 MiB does not end an epoch; 3 MiB more ends it (6 MiB in 6 ms
        // counts as 4 ms per epoch).
        h.placed(3 << 20, 1_000);
        assert_eq!(h.bytes, 3 << 20);
        h.placed(3 << 20, 6_001_000);
        assert_eq!(h.bytes, 0);
        assert_eq!(h.last, 4_000_000);
        assert_eq!(h.pos, 2);
    }
}
