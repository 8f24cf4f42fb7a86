//! Small helpers for programs: CPU pinning, signals, time.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Pins the calling thread to `cpu` (best effort: returns false if the
/// machine has no such CPU or the call failed).
pub fn pin_to(cpu: usize) -> bool {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it; the call
    // only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= libc::CPU_SETSIZE as usize {
            return false;
        }
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// The CPU the calling thread runs on now, if the kernel says.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no memory effects; it returns -1 on error.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}

/// Number of CPUs online (not the affinity mask).
pub fn cpus() -> usize {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        1
    }
}

/// A flag raised by SIGINT or SIGTERM.
pub fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let f = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, f.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, f.clone())?;
    Ok(f)
}
