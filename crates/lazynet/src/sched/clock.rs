//! Clocks the executor measures CPU time with.
//!
//! The executor reads its clock twice per iteration (before and after) and
//! once more around each [`Cx::charge_to`](super::Cx::charge_to) section, so
//! a read must be cheap: on x86_64 [`TscClock`] is one `RDTSC` plus a
//! multiply. Tests inject a [`VirtualClock`] that only moves when the test
//! (or a task standing in for CPU work) advances it, so fairness and decay
//! are checked exactly, with no dependence on real timing.
//!
//! **Owns:** the `Clock` trait and its three clocks. **May not touch:**
//! the executor's state. The `RDTSC` itself is `crate::sys::rdtsc`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A monotonic source of nanoseconds.
pub trait Clock {
    /// Nanoseconds since an arbitrary, fixed origin. Never decreases.
    fn now_ns(&self) -> u64;
}

/// `std::time::Instant`: portable, a `clock_gettime` (vDSO) per read.
#[derive(Clone, Copy, Debug)]
pub struct InstantClock {
    origin: Instant,
}

impl InstantClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        InstantClock {
            origin: Instant::now(),
        }
    }
}

impl Default for InstantClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for InstantClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
}

/// The time-stamp counter, converted to nanoseconds with a 32.32 fixed-point
/// factor calibrated against `Instant` at start-up.
///
/// Assumes an invariant TSC (`constant_tsc` and `nonstop_tsc` in
/// `/proc/cpuinfo`, true of every x86_64 CPU of the last decade) and that the
/// executor stays on one core, which it does: it is pinned. On other
/// architectures it falls back to `Instant`.
#[derive(Clone, Copy, Debug)]
pub struct TscClock {
    #[cfg(target_arch = "x86_64")]
    base: u64,
    /// Nanoseconds per tick, 32.32 fixed point.
    #[cfg(target_arch = "x86_64")]
    ns_per_tick_fp: u64,
    #[cfg(target_arch = "x86_64")]
    hz: u64,
    #[cfg(not(target_arch = "x86_64"))]
    fallback: InstantClock,
}

impl TscClock {
    /// Calibration long enough for a frequency error well under 0.1%.
    pub const DEFAULT_CALIBRATION: Duration = Duration::from_millis(20);

    /// Calibrates for [`Self::DEFAULT_CALIBRATION`] (spinning, once).
    pub fn new() -> Self {
        Self::calibrate(Self::DEFAULT_CALIBRATION)
    }

    /// Calibrates by spinning for `span` and comparing TSC ticks with
    /// `Instant`. Kept out of line so that instruction counts can leave out
    /// its spin, whose length is wall-clock time (`bench tcp-instructions`).
    #[cfg(target_arch = "x86_64")]
    #[inline(never)]
    pub fn calibrate(span: Duration) -> Self {
        use crate::sys::rdtsc;
        let span = span.max(Duration::from_micros(100));
        let i0 = Instant::now();
        let t0 = rdtsc();
        while i0.elapsed() < span {
            std::hint::spin_loop();
        }
        let t1 = rdtsc();
        let ns = i0.elapsed().as_nanos().max(1);
        let ticks = u128::from(t1.wrapping_sub(t0).max(1));
        let ns_per_tick_fp = ((ns << 32) / ticks).max(1) as u64;
        let hz = (ticks * 1_000_000_000 / ns) as u64;
        TscClock {
            base: rdtsc(),
            ns_per_tick_fp,
            hz,
        }
    }

    /// Falls back to `Instant` on architectures without `RDTSC`.
    #[cfg(not(target_arch = "x86_64"))]
    pub fn calibrate(_span: Duration) -> Self {
        TscClock {
            fallback: InstantClock::new(),
        }
    }

    /// The calibrated counter frequency (1 GHz for the `Instant` fallback).
    pub fn ticks_per_sec(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            self.hz
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            1_000_000_000
        }
    }
}

impl Default for TscClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TscClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            // Saturating: a core whose counter is a few ticks behind the
            // calibrating one reads 0, not 2^64.
            let ticks = crate::sys::rdtsc().saturating_sub(self.base);
            ((u128::from(ticks) * u128::from(self.ns_per_tick_fp)) >> 32) as u64
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self.fallback.now_ns()
        }
    }
}

/// Nanoseconds on one process-wide [`TscClock`], calibrated on first use
/// (a 20-ms spin, once per process): for code that wants real time cheaply
/// and has no clock handed to it, such as [`crate::stack::Stack::now`].
/// `Instant::now` costs a `clock_gettime` (26 ns here against 10 for
/// this), and a host reads the time several times per iteration.
/// Comparable across threads: the kernel itself keeps time on this
/// counter (clocksource `tsc`) only where it is synchronised between cores.
pub fn mono_ns() -> u64 {
    static CLOCK: std::sync::OnceLock<TscClock> = std::sync::OnceLock::new();
    CLOCK.get_or_init(TscClock::new).now_ns()
}

/// A clock that moves only when told to. Clones share the same time, so a
/// test task can hold one and "spend" CPU by advancing it.
#[derive(Clone, Debug, Default)]
pub struct VirtualClock {
    now: Arc<AtomicU64>,
}

impl VirtualClock {
    /// A clock at time zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves time forward by `ns`.
    pub fn advance(&self, ns: u64) {
        self.now.fetch_add(ns, Ordering::Relaxed);
    }

    /// Sets the time; it must not go backwards.
    pub fn set(&self, ns: u64) {
        let old = self.now.swap(ns, Ordering::Relaxed);
        debug_assert!(ns >= old, "VirtualClock moved backwards");
    }
}

impl Clock for VirtualClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }
}
