//! The lab's simulated application work: CPU a request burns before it is
//! answered ([`ServerConfig::with_work_ns`](super::ServerConfig::with_work_ns)),
//! so that experiments can make the server's core the bottleneck as a real
//! application's work would.
//!
//! **Owns:** [`busy_for`], spinning on this thread.
//!
//! **May not touch:** requests, responses, sleeping or yielding: the time
//! must be spent on the CPU, not given back to the scheduler.

/// Spins for `ns` nanoseconds of wall time on this thread.
pub(super) fn busy_for(ns: u64) {
    let t0 = std::time::Instant::now();
    while (t0.elapsed().as_nanos() as u64) < ns {
        std::hint::spin_loop();
    }
}
