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
//! (docs/PERFORMANCE.md, "Hand-back"). Evicting the consumed lines
//! (`mem::BufArea::evict`) lets the writer fetch them from memory instead:
//! +32% with the cores apart, but −24% where they share a cache, since the
//! receiver then pays for the eviction and the writer for memory. A guest
//! cannot see where the host puts its vCPUs, and the host moves them every
//! few seconds, so the choice is made by measuring.
//!
//! [`Eviction`] does that, sans-IO: it is told the bytes consumed and the
//! time, and says whether to evict. Consumed text is counted in epochs of
//! [`EPOCH_BYTES`]. After [`CYCLE`] epochs with the current choice comes a
//! trial of the other one, in two parts: first it *settles* for as many
//! bytes as the NIC has buffer memory, unmeasured, because the choice acts
//! on buffers the writer takes again only after cycling through its free
//! buffers (on the wire, about that many bytes later; a trial measured at
//! once sees the previous choice's effect, and in an earlier version kept
//! evicting where the cores shared a cache, −27% in whole runs); then one
//! epoch is measured and compared with the last epoch of the current choice
//! that was itself preceded by one. A trial at least [`MARGIN_PCT`]% faster
//! is a win; a win is confirmed by another trial soon after, and
//! [`CONFIRM`] wins in a row change the choice.
//!
//! A lost trial doubles the wait for the next one, up to [`MAX_GAP`]
//! epochs, so that a choice that holds costs little (a trial is two epochs
//! in the worse choice: −24% for them where the cores share a cache). What
//! brings the next trial forward is a change: [`CHANGE_EPOCHS`] clean epochs
//! in a row whose time differs from the running average by more than
//! [`CHANGE_PCT`]% (one such epoch is common noise: 2.8% of consecutive
//! epochs differ by over 25%, docs/PERFORMANCE.md), which is what
//! the host moving the cores looks like. An epoch slower than
//! [`SLOW_EPOCH_NS`] (a flow limited by something else) restarts the
//! schedule without comparing: there the choice does not matter, and its
//! noise would only flip it. A flow that is not bulk never leaves "keep".
//!
//! It only applies where the NIC says another core writes its buffers
//! (`Nic::cross_core_buffers`) and is applied wherever TCP copies a
//! segment's text out of its frame: direct placement into the reader's
//! buffer (`Stack::conn_direct`) and the ordinary path into the receive
//! buffer (`Stack::conn_input_parsed`). Both count towards the epochs.
//!
//! **Owns:** the keep-or-evict decision and its measurements. **May not
//! touch:** buffers, the NIC, or a clock: it is told bytes and times
//! (time comes in as an argument) and answers; the stack evicts.

/// How received frames' lines are treated after their text is copied out
/// ([`crate::stack::StackConfig::rx_evict`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EvictMode {
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
/// Epochs with the current choice before the first trial, and after a
/// switch or a change.
pub const CYCLE: u32 = 30;
/// The longest wait between trials (a lost trial doubles the wait).
pub const MAX_GAP: u32 = 480;
/// How far (in %) from the running average an epoch's time must be to
/// count towards a change.
pub const CHANGE_PCT: u64 = 20;
/// Such epochs in a row that make a change.
pub const CHANGE_EPOCHS: u32 = 2;
/// Epochs with the current choice before the trial that confirms a win.
pub const CONFIRM_AFTER: u32 = 2;
/// Trials won in a row that change the choice.
pub const CONFIRM: u32 = 2;
/// How much faster (in %) a trial epoch must be to count as a win.
pub const MARGIN_PCT: u64 = 5;
/// Epochs slower than this per [`EPOCH_BYTES`] (below ~670 Mbit/s) are
/// not compared.
pub const SLOW_EPOCH_NS: u64 = 50_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The current choice; `left` epochs until the next trial.
    Current,
    /// The other choice, not measured, while the buffers it acts on come
    /// round to the writer.
    Settle,
    /// The other choice, measured.
    Trial,
}

/// The keep-or-evict choice of one stack (see the module docs).
#[derive(Clone, Debug)]
pub struct Eviction {
    mode: EvictMode,
    /// The current choice (outside trials); trials try `!best`.
    best: bool,
    phase: Phase,
    /// Epochs of the current choice left before the next trial.
    left: u32,
    /// Bytes of the settling part of a trial.
    settle: u64,
    /// Start time and bytes of the running epoch.
    start: u64,
    bytes: u64,
    /// Whether the running epoch follows one of the current choice.
    clean: bool,
    /// Nanoseconds per `EPOCH_BYTES` of the last clean epoch of the current
    /// choice (0: none yet).
    last: u64,
    /// Trials won in a row.
    wins: u32,
    /// Epochs to wait after a lost trial.
    gap: u32,
    /// Running average of clean epochs of the current choice (ns per
    /// `EPOCH_BYTES`, 0: none), and how many in a row were far from it.
    avg: u64,
    far: u32,
    switches: u64,
}

impl Eviction {
    /// A choice in `mode`; `Adaptive` starts by keeping. `settle_bytes`:
    /// how much text passes before a change of choice reaches the buffers
    /// the writer takes (the NIC's buffer memory).
    pub fn new(mode: EvictMode, settle_bytes: u64) -> Self {
        Eviction {
            mode,
            best: false,
            phase: Phase::Current,
            left: CYCLE,
            settle: settle_bytes.max(1),
            start: 0,
            bytes: 0,
            clean: true,
            last: 0,
            wins: 0,
            gap: CYCLE,
            avg: 0,
            far: 0,
            switches: 0,
        }
    }

    /// Whether to evict the frames consumed now.
    #[inline]
    pub fn evict(&self) -> bool {
        match self.mode {
            EvictMode::Off => false,
            EvictMode::Always => true,
            EvictMode::Adaptive => self.best != (self.phase != Phase::Current),
        }
    }

    /// Times the current choice changed.
    pub fn switches(&self) -> u64 {
        self.switches
    }

    /// `bytes` of received text were copied out of their frames at time
    /// `now` (ns, monotonic).
    #[inline]
    pub fn placed(&mut self, bytes: u64, now: u64) {
        if self.mode != EvictMode::Adaptive {
            return;
        }
        if self.bytes == 0 {
            self.start = now;
        }
        self.bytes += bytes;
        // A settling part is as long as the NIC's buffer memory; epochs
        // that are measured, EPOCH_BYTES.
        let target = if self.phase == Phase::Settle {
            self.settle
        } else {
            EPOCH_BYTES
        };
        if self.bytes >= target {
            self.epoch_end(now);
        }
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn epoch_end(&mut self, now: u64) {
        let took = now.saturating_sub(self.start);
        // Normalized to EPOCH_BYTES: the last call may overshoot the epoch.
        let per = (u128::from(took) * u128::from(EPOCH_BYTES) / u128::from(self.bytes)) as u64;
        self.bytes = 0;
        if per > SLOW_EPOCH_NS {
            // Not limited by this: start over with a fresh reference.
            self.current(CYCLE);
            self.wins = 0;
            self.last = 0;
            self.avg = 0;
            self.far = 0;
            return;
        }
        match self.phase {
            Phase::Current => {
                if self.clean {
                    self.last = per;
                    if self.changed(per) {
                        // The host moved the cores, most likely: try soon.
                        self.gap = CYCLE;
                        self.left = self.left.min(1);
                    }
                }
                self.clean = true;
                self.left = self.left.saturating_sub(1);
                if self.left == 0 && self.last > 0 {
                    self.phase = Phase::Settle;
                }
            }
            Phase::Settle => self.phase = Phase::Trial,
            Phase::Trial => {
                let won =
                    u128::from(per) * 100 < u128::from(self.last) * u128::from(100 - MARGIN_PCT);
                let wait = if won {
                    self.wins += 1;
                    if self.wins >= CONFIRM {
                        self.best = !self.best;
                        self.wins = 0;
                        self.switches += 1;
                        self.last = 0;
                        self.avg = 0;
                        self.gap = CYCLE;
                        CYCLE
                    } else {
                        CONFIRM_AFTER
                    }
                } else {
                    self.wins = 0;
                    let wait = self.gap;
                    self.gap = (self.gap * 2).min(MAX_GAP);
                    wait
                };
                self.current(wait);
            }
        }
    }

    /// Tracks clean epochs of the current choice; true once
    /// [`CHANGE_EPOCHS`] in a row were more than [`CHANGE_PCT`]% from the
    /// running average (which then restarts from the new level).
    fn changed(&mut self, per: u64) -> bool {
        if self.avg == 0 {
            self.avg = per;
            return false;
        }
        let far = u128::from(per.abs_diff(self.avg)) * 100
            > u128::from(self.avg) * u128::from(CHANGE_PCT);
        if !far {
            self.far = 0;
            // Average over ~8 epochs.
            self.avg = self.avg - self.avg / 8 + per / 8;
            return false;
        }
        self.far += 1;
        if self.far < CHANGE_EPOCHS {
            return false;
        }
        self.far = 0;
        self.avg = per;
        true
    }

    /// Back to the current choice for `epochs` epochs; the first follows
    /// epochs of the other choice, so it is not a reference.
    fn current(&mut self, epochs: u32) {
        self.phase = Phase::Current;
        self.left = epochs;
        self.clean = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// Reads of 64 KiB; buffer memory of 4 MiB, as on the default wire.
    const READ: u64 = 64 << 10;
    const SETTLE: u64 = 4 << 20;

    /// A receiver reading from a writer on another core. A read's time is
    /// `cost(evicting now, evicting when the buffers it uses were last
    /// consumed)`: the writer only meets the effect of a choice once its
    /// buffers come round, `SETTLE` bytes later.
    struct Sim {
        h: Eviction,
        now: u64,
        past: VecDeque<bool>,
    }

    impl Sim {
        fn new(mode: EvictMode) -> Self {
            Sim {
                h: Eviction::new(mode, SETTLE),
                now: 0,
                past: (0..SETTLE / READ).map(|_| false).collect(),
            }
        }

        /// One read costing `cost(evicting, evicting then)`; returns
        /// whether it evicted.
        fn step(&mut self, cost: impl Fn(bool, bool) -> u64) -> bool {
            let e = self.h.evict();
            let then = self.past.pop_front().unwrap();
            self.past.push_back(e);
            self.now += cost(e, then);
            self.h.placed(READ, self.now);
            e
        }

        /// Runs `epochs` × `EPOCH_BYTES` of reads; returns the share of
        /// them that evicted.
        fn run(&mut self, epochs: u32, cost: impl Fn(bool, bool) -> u64) -> f64 {
            let reads = u64::from(epochs) * (EPOCH_BYTES / READ);
            let evicting: u64 = (0..reads).map(|_| u64::from(self.step(&cost))).sum();
            evicting as f64 / reads as f64
        }
    }

    /// Cores apart: a buffer last consumed without eviction costs the
    /// writer a cross-core transfer per line (+40%); evicting costs the
    /// reader a little.
    fn apart(now: bool, then: bool) -> u64 {
        25_000 + if now { 1_000 } else { 0 } + if then { 0 } else { 10_000 }
    }

    /// Cores sharing a cache: evicting costs the reader now and the writer
    /// later (it fetches from memory).
    fn shared(now: bool, then: bool) -> u64 {
        25_000 + if now { 4_000 } else { 0 } + if then { 4_000 } else { 0 }
    }

    /// Cores sharing a cache, all of the cost delayed: a trial measured at
    /// once would see no difference, and one of keeping, after eviction
    /// was chosen, would still pay for it.
    fn shared_delayed(_now: bool, then: bool) -> u64 {
        25_000 + if then { 8_000 } else { 0 }
    }

    /// Epochs of one trial cycle (current choice, settling, trial).
    const ROUND: u32 = CYCLE + 2;

    #[test]
    fn off_and_always_never_change() {
        let mut off = Sim::new(EvictMode::Off);
        assert_eq!(off.run(100, apart), 0.0);
        let mut always = Sim::new(EvictMode::Always);
        assert_eq!(always.run(100, shared), 1.0);
        assert_eq!(off.h.switches() + always.h.switches(), 0);
    }

    #[test]
    fn keeps_where_evicting_is_slower_and_tries_less_and_less() {
        let mut s = Sim::new(EvictMode::Adaptive);
        // The first trial comes after CYCLE epochs: 2 of CYCLE + 2.
        let first = s.run(ROUND, shared);
        assert!(
            (first - 2.0 / f64::from(ROUND)).abs() < 0.01,
            "evicted {first}"
        );
        // Then the waits double up to MAX_GAP.
        let later = s.run(100 * ROUND, shared);
        assert!(later > 0.0 && later < 0.01, "evicted {later}");
        assert_eq!(s.h.gap, MAX_GAP);
        assert_eq!(s.h.switches(), 0);
    }

    #[test]
    fn keeps_where_both_cost_the_same() {
        let mut s = Sim::new(EvictMode::Adaptive);
        s.run(40 * ROUND, |_, _| 30_000);
        assert_eq!(s.h.switches(), 0);
    }

    #[test]
    fn evicts_where_it_is_faster_after_a_confirmed_win() {
        let mut s = Sim::new(EvictMode::Adaptive);
        s.run(ROUND, apart);
        assert_eq!(s.h.switches(), 0, "one win is not enough");
        s.run(8, apart);
        assert_eq!(s.h.switches(), 1, "the confirming trial follows soon");
        let share = s.run(40 * ROUND, apart);
        assert!(share > 0.9, "evicted {share}");
        assert_eq!(s.h.switches(), 1);
    }

    #[test]
    fn follows_the_cores_when_the_host_moves_them() {
        let mut s = Sim::new(EvictMode::Adaptive);
        s.run(3 * ROUND, apart);
        assert_eq!(s.h.switches(), 1);
        s.run(3 * ROUND, shared);
        assert_eq!(s.h.switches(), 2);
        let share = s.run(20 * ROUND, shared);
        assert!(share < 0.1, "evicted {share}");
        s.run(3 * ROUND, apart);
        assert_eq!(s.h.switches(), 3);
        assert!(s.run(20 * ROUND, apart) > 0.9);
    }

    #[test]
    fn a_delayed_cost_is_not_mistaken_for_no_cost() {
        // Eviction chosen where it paid, then the cores come together and
        // all its cost shows only when the buffers come round. The trial
        // of keeping must wait for that to settle to see its gain.
        let mut s = Sim::new(EvictMode::Adaptive);
        s.run(3 * ROUND, apart);
        assert!(s.h.evict() || s.h.phase != Phase::Current);
        s.run(3 * ROUND, shared_delayed);
        assert_eq!(s.h.switches(), 2);
        assert!(s.run(20 * ROUND, shared_delayed) < 0.1);
        assert_eq!(s.h.switches(), 2);
    }

    #[test]
    fn one_lucky_trial_does_not_switch() {
        let mut s = Sim::new(EvictMode::Adaptive);
        // Every other trial epoch happens to be fast; the trial that
        // would confirm it is not.
        let mut trials = 0u32;
        let mut in_trial = false;
        for _ in 0..200 * ROUND * (EPOCH_BYTES / READ) as u32 {
            let t = s.h.phase == Phase::Trial;
            if t && !in_trial {
                trials += 1;
            }
            in_trial = t;
            let lucky = t && trials % 2 == 1;
            let cost = if lucky { 20_000 } else { 30_000 };
            s.step(|_, _| cost);
        }
        assert!(trials >= 8, "{trials} trials");
        assert_eq!(s.h.switches(), 0);
    }

    #[test]
    fn a_change_in_cost_brings_the_next_trial_forward() {
        let mut s = Sim::new(EvictMode::Adaptive);
        s.run(100 * ROUND, shared);
        assert_eq!(s.h.gap, MAX_GAP, "trials have backed off");
        // The host moves the cores apart: keeping now costs 40% more.
        s.run(ROUND / 2, apart);
        assert_eq!(s.h.switches(), 1, "switched well before MAX_GAP epochs");
        assert_eq!(s.h.gap, CYCLE);
    }

    #[test]
    fn one_odd_epoch_is_not_a_change() {
        let mut h = Eviction::new(EvictMode::Adaptive, SETTLE);
        for _ in 0..20 {
            assert!(!h.changed(1_000_000));
        }
        assert!(!h.changed(1_500_000), "one far epoch");
        assert!(!h.changed(1_000_000));
        assert!(!h.changed(1_500_000));
        assert!(h.changed(1_500_000), "two in a row");
        assert_eq!(h.avg, 1_500_000, "the average restarts at the new level");
        assert!(!h.changed(1_650_000), "within 20% of it");
    }

    #[test]
    fn slow_epochs_are_not_compared() {
        let mut s = Sim::new(EvictMode::Adaptive);
        // An application-limited flow: 4 MiB in 60 or 90 ms.
        let share = s.run(10 * ROUND, |now, _| if now { 937_500 } else { 1_406_250 });
        assert_eq!(s.h.switches(), 0);
        assert_eq!(share, 0.0, "no trials at all");
    }

    #[test]
    fn an_epoch_spans_reads_and_overshoot_is_normalized() {
        let mut h = Eviction::new(EvictMode::Adaptive, SETTLE);
        // 3 MiB does not end an epoch; 3 MiB more ends it (6 MiB in 6 ms
        // counts as 4 ms per epoch).
        h.placed(3 << 20, 1_000);
        assert_eq!(h.bytes, 3 << 20);
        h.placed(3 << 20, 6_001_000);
        assert_eq!(h.bytes, 0);
        assert_eq!(h.last, 4_000_000);
        assert_eq!(h.left, CYCLE - 1);
    }
}
