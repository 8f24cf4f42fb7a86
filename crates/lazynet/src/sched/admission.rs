//! Admission control for the real-time classes: response-time analysis for
//! fixed (rate-monotonic) priorities with non-preemptive iterations.
//!
//! **Owns:** the schedulability test, as pure functions over declared loads;
//! nothing here reads a clock or touches the executor's state.
//!
//! **May not touch:** the executor (it calls in with a snapshot of its
//! handlers; [`super::Executor::add_owner`] refuses what this module finds
//! unschedulable).
//!
//! # The model (RTU §III-B, with delayed preemption)
//!
//! A periodic handler `i` is released every `T_i`; each release asks for
//! `B_i` iterations of at most `c_i` each, so `C_i = B_i·c_i`, due by the
//! next release (`D_i = T_i`). Priorities are rate-monotonic: a shorter
//! period first; handlers of equal period take turns, so each counts the
//! others as higher priority (safe for all of them). Preemption is delayed to
//! an iteration boundary, so a handler can be kept waiting, once per busy
//! window, by the longest iteration of anything of lower priority already
//! running: `b_i = max(c_j : T_j > T_i, the non-real-time iteration bound)`.
//! Reactive handlers and the system's own (`Fixed`) work are token buckets
//! of CPU time `(σ_k, ρ_k)`: in any window `w` they take at most
//! `σ_k + c_k + ρ_k·w` (a bucket may go negative by one iteration `c_k`).
//! Releases are seen at scheduling points, up to `J` late (the longest
//! iteration, or a sleeping executor's wake-up latency), so the level-`i`
//! busy window is the least fixed point of
//!
//! ```text
//! w = C_i + b_i + Σ_k (σ_k + c_k) + ⌈ρ·w⌉ + Σ_{j ∈ hp(i)} ⌈(w + J)/T_j⌉·C_j
//! ```
//!
//! and the worst response is `R_i = J + w`. The test asks `R_i ≤ T_i` for
//! every handler. Because then the level-`i` busy window closes before `i`
//! is released again, a job cannot push its successor (the "self-pushing"
//! that makes the refined last-iteration analysis of deferred preemption
//! optimistic: Bril, Lukkien and Verhaegh, *Worst-case response time
//! analysis of real-time tasks under fixed-priority scheduling with deferred
//! preemption*, Real-Time Systems 42, 2009); this coarser form does not take
//! that refinement and stays safe.
//!
//! Beside the response-time test, the total utilisation (periodic `C/T`
//! plus every bucket's `ρ`) must stay under a configured bound below 100%
//! (RTU footnote 3: leftover time belongs to ordinary processes).
//!
//! Written here, not taken from a crate: the test is part of the scheduler
//! (the product), and no maintained crate implements RTA with deferred
//! preemption and token-bucket interference.

use std::fmt;

/// A token bucket of CPU time: it fills at `share_ppm` parts per million of
/// the clock, up to `burst_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// Long-run share of the core, parts per million.
    pub share_ppm: u32,
    /// Most CPU time it can take at once, ns.
    pub burst_ns: u64,
}

/// A periodic handler's declaration: a batch of `batch` iterations of at
/// most `iteration_ns` each, released every `period_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Periodic {
    /// Period (and deadline), ns.
    pub period_ns: u64,
    /// Iterations per period.
    pub batch: u32,
    /// Declared cost of one iteration, ns (the measured maximum replaces
    /// it when larger).
    pub iteration_ns: u64,
}

impl Periodic {
    /// Processing time asked per period, `C = B·c`.
    pub fn demand_ns(&self) -> u64 {
        u64::from(self.batch).saturating_mul(self.iteration_ns)
    }

    /// Utilisation in parts per million, `C/T`.
    pub fn utilisation_ppm(&self) -> u64 {
        (u128::from(self.demand_ns()) * 1_000_000 / u128::from(self.period_ns.max(1))) as u64
    }

    /// The (T, B) that carries a stream of `rate_bps` bits per second in
    /// messages of `message_bytes` (one iteration per message) with a batch
    /// of at most `max_batch`: the RTU mapping of a QoS specification to the
    /// periodic model (§II, Fig. 2). The period is the time `max_batch`
    /// messages take at the rate; the batch, the messages of one period
    /// rounded up, so the handler never falls behind the rate.
    pub fn for_rate(
        rate_bps: u64,
        message_bytes: u32,
        max_batch: u32,
        iteration_ns: u64,
    ) -> Periodic {
        let bits = u128::from(message_bytes.max(1)) * 8;
        let batch = max_batch.max(1);
        let period_ns = (bits * u128::from(batch) * 1_000_000_000 / u128::from(rate_bps.max(1)))
            .clamp(1, u128::from(u64::MAX)) as u64;
        Periodic {
            period_ns,
            batch,
            iteration_ns,
        }
    }
}

/// One periodic handler as the analysis sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Load {
    /// Its name (for the error).
    pub name: String,
    /// Period, batch and the iteration cost to assume (declared, or the
    /// measured maximum if larger).
    pub periodic: Periodic,
}

/// Everything that interferes with the periodic handlers besides each other.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Interference {
    /// Reactive and system buckets, each with its longest iteration (ns).
    pub buckets: Vec<(Bucket, u64)>,
    /// The longest iteration of any non-real-time (best-effort, idle) work:
    /// a blocking term for every periodic handler.
    pub nonrt_iteration_ns: u64,
    /// How late a release can be seen, ns.
    pub release_jitter_ns: u64,
}

/// The analysis of one handler: its worst-case response time against its
/// deadline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseTime {
    /// The handler.
    pub name: String,
    /// Its period (its deadline), ns.
    pub deadline_ns: u64,
    /// Its worst-case response time, ns (`u64::MAX` if the busy window
    /// does not close).
    pub response_ns: u64,
    /// Its blocking term, ns.
    pub blocking_ns: u64,
}

impl ResponseTime {
    /// Whether the handler meets its deadline.
    pub fn meets(&self) -> bool {
        self.response_ns <= self.deadline_ns
    }
}

/// Why a set of handlers is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// This handler would miss its deadline.
    Miss {
        /// The handler that would miss.
        name: String,
        /// Its worst-case response time, ns (`u64::MAX`: unbounded).
        response_ns: u64,
        /// Its deadline (period), ns.
        deadline_ns: u64,
    },
    /// The set would use more of the core than the configured bound.
    Utilisation {
        /// What the set would use, ppm.
        utilisation_ppm: u64,
        /// The bound, ppm.
        bound_ppm: u32,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Miss {
                name,
                response_ns,
                deadline_ns,
            } if *response_ns == u64::MAX => write!(
                f,
                "handler `{name}` would miss its {deadline_ns} ns deadline: its busy window never closes"
            ),
            Refusal::Miss {
                name,
                response_ns,
                deadline_ns,
            } => write!(
                f,
                "handler `{name}` would miss its {deadline_ns} ns deadline by {} ns (worst-case response {response_ns} ns)",
                response_ns - deadline_ns
            ),
            Refusal::Utilisation {
                utilisation_ppm,
                bound_ppm,
            } => write!(
                f,
                "the set would use {:.1}% of the core, above the {:.1}% bound",
                *utilisation_ppm as f64 / 1e4,
                f64::from(*bound_ppm) / 1e4
            ),
        }
    }
}

/// Total utilisation of the handlers and buckets, ppm.
pub fn utilisation_ppm(loads: &[Load], interference: &Interference) -> u64 {
    let periodic: u64 = loads.iter().map(|l| l.periodic.utilisation_ppm()).sum();
    let buckets: u64 = interference
        .buckets
        .iter()
        .map(|(b, _)| u64::from(b.share_ppm))
        .sum();
    periodic + buckets
}

/// The response-time analysis of every handler in `loads` (any order).
pub fn analyse(loads: &[Load], interference: &Interference) -> Vec<ResponseTime> {
    let periodic: Vec<Periodic> = loads.iter().map(|l| l.periodic).collect();
    let sums = BucketSums::of(&interference.buckets);
    loads
        .iter()
        .enumerate()
        .map(|(i, me)| {
            let (response_ns, blocking_ns) = response(
                &periodic,
                i,
                sums,
                interference.nonrt_iteration_ns,
                interference.release_jitter_ns,
            );
            ResponseTime {
                name: me.name.clone(),
                deadline_ns: me.periodic.period_ns,
                response_ns,
                blocking_ns,
            }
        })
        .collect()
}

/// What the busy window takes of the buckets: `Σ (σ_k + c_k)` and `Σ ρ_k`.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct BucketSums {
    sigma: u64,
    rho_ppm: u64,
}

impl BucketSums {
    pub(super) fn of(buckets: &[(Bucket, u64)]) -> BucketSums {
        BucketSums {
            sigma: buckets
                .iter()
                .map(|(b, c)| b.burst_ns.saturating_add(*c))
                .fold(0u64, u64::saturating_add),
            rho_ppm: buckets.iter().map(|(b, _)| u64::from(b.share_ppm)).sum(),
        }
    }
}

/// Handler `me`'s worst-case response among `loads` and its blocking term
/// (see the module docs): `u64::MAX` if its busy window does not close.
/// Allocation-free (the executor re-checks its set with it while running).
pub(super) fn response(
    loads: &[Periodic],
    me: usize,
    b: BucketSums,
    nonrt_iteration_ns: u64,
    jitter: u64,
) -> (u64, u64) {
    let p = loads[me];
    let blocking = loads
        .iter()
        .filter(|o| o.period_ns > p.period_ns)
        .map(|o| o.iteration_ns)
        .max()
        .unwrap_or(0)
        .max(nonrt_iteration_ns);
    let fixed = p
        .demand_ns()
        .saturating_add(blocking)
        .saturating_add(b.sigma);
    let higher = |f: &mut dyn FnMut(&Periodic)| {
        for (i, o) in loads.iter().enumerate() {
            if i != me && o.period_ns <= p.period_ns {
                f(o);
            }
        }
    };
    let response = busy_window(
        fixed,
        b.rho_ppm,
        higher,
        jitter,
        p.period_ns.saturating_mul(64),
    )
    .map_or(u64::MAX, |w| w.saturating_add(jitter));
    (response, blocking)
}

/// The least fixed point of the busy-window equation, or `None` if it does
/// not settle below `limit` (the utilisation reaches the core's). Beyond
/// the deadline the fixed point is only the first job's window, which is
/// what a refusal reports ("misses by"). Each step grows `w` until it
/// settles; a step bound keeps a pathological input (periods of a few ns)
/// cheap. `higher` calls its argument once per higher-priority handler.
fn busy_window(
    fixed: u64,
    rho_ppm: u64,
    higher: impl Fn(&mut dyn FnMut(&Periodic)),
    jitter: u64,
    limit: u64,
) -> Option<u64> {
    if rho_ppm >= 1_000_000 {
        return None;
    }
    let mut w = fixed;
    for _ in 0..100_000 {
        if w.saturating_add(jitter) > limit {
            return None;
        }
        let rho = (u128::from(w) * u128::from(rho_ppm)).div_ceil(1_000_000) as u64;
        let mut hp = 0u64;
        higher(&mut |h| {
            let releases = (w.saturating_add(jitter)).div_ceil(h.period_ns.max(1));
            hp = hp.saturating_add(releases.saturating_mul(h.demand_ns()));
        });
        let next = fixed.saturating_add(rho).saturating_add(hp);
        if next == w {
            return Some(w);
        }
        w = next;
    }
    None
}

/// The admission test: every handler meets its deadline and the total
/// utilisation stays within `bound_ppm`. On refusal, names the first
/// handler (in rate-monotonic order) that would miss.
pub fn admit(loads: &[Load], interference: &Interference, bound_ppm: u32) -> Result<(), Refusal> {
    let u = utilisation_ppm(loads, interference);
    if u > u64::from(bound_ppm) {
        return Err(Refusal::Utilisation {
            utilisation_ppm: u,
            bound_ppm,
        });
    }
    let mut verdicts = analyse(loads, interference);
    verdicts.sort_by_key(|v| v.deadline_ns);
    match verdicts.into_iter().find(|v| !v.meets()) {
        None => Ok(()),
        Some(v) => Err(Refusal::Miss {
            name: v.name,
            response_ns: v.response_ns,
            deadline_ns: v.deadline_ns,
        }),
    }
}
