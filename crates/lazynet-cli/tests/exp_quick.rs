//! The quick runs of `lazynet exp livelock` and `lazynet exp
//! latency-under-load` (without the Linux series): each must finish within
//! a minute, pass its own shape checks (a failed check fails the command),
//! and write its CSV with the exact header, the expected rows per mode, the
//! summary and the PNG. Both run in one test so they never overlap (each
//! pins a thread to each core).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_lazynet");
const MODES: [&str; 4] = ["eager", "early-demux", "soft-lrp", "ni-lrp"];

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `lazynet exp NAME --quick --no-linux --out DIR`; checks it
/// succeeded within the bound and returns the CSV's lines.
fn run(name: &str, dir: &Path) -> Vec<String> {
    let t0 = Instant::now();
    let out = Command::new(BIN)
        .args(["exp", name, "--quick", "--no-linux", "--out"])
        .arg(dir)
        .output()
        .expect("spawn lazynet");
    let took = t0.elapsed();
    assert!(
        out.status.success(),
        "lazynet exp {name} --quick failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        took < Duration::from_secs(60),
        "exp {name} --quick took {took:?}"
    );
    for ext in ["png", "txt"] {
        let p = dir.join(format!("{name}.{ext}"));
        let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
        assert!(len > 0, "{} missing or empty", p.display());
    }
    std::fs::read_to_string(dir.join(format!("{name}.csv")))
        .expect("csv")
        .lines()
        .map(str::to_owned)
        .collect()
}

fn check_rows(lines: &[String], header: &str, per_mode: usize, fields: usize) {
    assert_eq!(lines[0], header);
    for m in MODES {
        let rows: Vec<&String> = lines[1..]
            .iter()
            .filter(|l| l.split(',').next() == Some(m))
            .collect();
        assert_eq!(rows.len(), per_mode, "rows of {m}: {lines:?}");
        for r in rows {
            let f: Vec<&str> = r.split(',').collect();
            assert_eq!(f.len(), fields, "{r}");
            for v in &f[1..] {
                let x: f64 = v.parse().unwrap_or_else(|_| panic!("not a number in {r}"));
                assert!(x.is_finite() && x >= 0.0, "{r}");
            }
        }
    }
}

#[test]
fn quick_livelock_and_latency_under_load_pass_their_shape_checks() {
    let dir =
        TempDir(std::env::temp_dir().join(format!("lazynet-exp-quick-{}", std::process::id())));
    let ll = dir.0.join("livelock");
    let lines = run("livelock", &ll);
    check_rows(&lines, "mode,offered_pps,delivered_pps", 4, 3);
    let lat = dir.0.join("latency");
    let lines = run("latency-under-load", &lat);
    check_rows(&lines, "mode,blast_pps,p50_us,p99_us,p999_us", 3, 5);
    // The unloaded point comes first for every mode.
    for m in MODES {
        let first = lines[1..]
            .iter()
            .find(|l| l.starts_with(&format!("{m},")))
            .unwrap();
        assert!(first.starts_with(&format!("{m},0,")), "{first}");
    }
}
