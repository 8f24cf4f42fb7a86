//! What every result file says about its run, small statistics, and the
//! `--verbose` switch.

use std::sync::atomic::{AtomicBool, Ordering};

static VERBOSE: AtomicBool = AtomicBool::new(false);

/// `--verbose`: diagnostics (counters, stalls) on stderr.
pub fn set_verbose(on: bool) {
    VERBOSE.store(on, Ordering::Relaxed);
}

/// Whether `--verbose` was given.
pub fn verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}

/// The lines that head a result file: the machine (CPUs, model, kernel),
/// the commit measured (`git describe`, `-dirty` if the tree had changes)
/// and the date (UTC).
pub fn machine_line() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let run = |cmd: &str, args: &[&str]| {
        std::process::Command::new(cmd)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| "unknown".into())
    };
    let commit = run("git", &["describe", "--always", "--dirty", "--abbrev=10"]);
    let date = run("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]);
    format!(
        "machine: {} CPUs, {cpu}, kernel {}\ncommit: {commit}\ndate: {date}\n",
        lazynet::sys::cpus_online(),
        kernel.trim()
    )
}

/// The median of `v` (the upper one of an even count); NaN if empty.
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[s.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 3.0);
        assert!(median(&[]).is_nan());
    }
}
