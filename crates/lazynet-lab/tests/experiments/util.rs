//! What the experiment tests share: the binary, the modes, a temporary
//! directory, the root check and a lock that keeps experiments from
//! overlapping.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

pub const BIN: &str = env!("CARGO_BIN_EXE_lazynet-lab");
pub const MODES: [&str; 4] = ["eager", "early-demux", "soft-lrp", "ni-lrp"];

/// A directory under the system's temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(what: &str) -> Self {
        let d = std::env::temp_dir().join(format!("lazynet-lab-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Each experiment pins a thread to each core: the tests of this binary,
/// which the harness would run in parallel, take this lock first.
pub fn exclusive() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}
