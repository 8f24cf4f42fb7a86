//! Small helpers for programs. OS calls that need `unsafe` (pinning, CPU
//! counts, scheduling) are in `lazynet::sys`.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A flag raised by SIGUSR1: a server prints a status line (connections,
/// orphans, buffer bytes) at its next turn and lowers it.
pub fn status_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let f = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, f.clone())?;
    Ok(f)
}

/// A flag raised by SIGINT or SIGTERM.
pub fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let f = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, f.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, f.clone())?;
    Ok(f)
}
