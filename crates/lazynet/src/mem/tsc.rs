//! The time-stamp counter, read with one instruction.
//!
//! It lives in `mem` only because this is one of the modules allowed to use
//! `unsafe` (`core::arch::x86_64::_rdtsc` is still an `unsafe fn` in Rust
//! 1.95). Converting ticks to time, calibration and the fallback on other
//! architectures are in [`crate::sched::clock`].

/// Reads the time-stamp counter (`RDTSC`).
///
/// Not serializing: the CPU may execute it a few instructions early or late,
/// which is noise of tens of cycles — far below the length of one scheduler
/// iteration that it is used to measure.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC reads a register and touches no memory; every x86_64 CPU
    // has it (it predates the architecture), and user mode may execute it
    // unless the OS sets CR4.TSD, which Linux does not. The intrinsic is
    // `unsafe` only because all `core::arch` intrinsics are declared so.
    unsafe { core::arch::x86_64::_rdtsc() }
}
