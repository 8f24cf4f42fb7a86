//! The quick runs of `lazynet exp fairness` and `lazynet exp syn-flood`
//! end to end through the binary: they finish, and write a CSV with the
//! documented header and the expected rows and a PNG into the directory
//! given. (Their shape checks are for `--quick` runs of a release build on
//! a quiet machine; a test build under `cargo test` is neither, so the exit
//! status is printed, not asserted; the files are written either way.)

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_lazynet");

/// The four receive modes.
const MODES: [&str; 4] = ["eager", "early-demux", "soft-lrp", "ni-lrp"];

fn run(exp: &str, out: &Path, env: &[(&str, &str)]) {
    let o = Command::new(BIN)
        .args(["exp", exp, "--quick", "--no-linux", "--out"])
        .arg(out)
        .envs(env.iter().copied())
        .output()
        .expect("run lazynet");
    let stderr = String::from_utf8_lossy(&o.stderr);
    eprintln!(
        "{exp}: {}\n{}\n{stderr}",
        o.status,
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(!stderr.contains("panicked"), "{exp} panicked");
}

fn csv_rows(path: &Path, header: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).expect("CSV written");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(header), "{}", path.display());
    lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

#[test]
fn quick_fairness_and_syn_flood_write_their_files() {
    let dir = std::env::temp_dir().join(format!("lazynet-exp-quick-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);

    let fair = dir.join("fairness");
    run("fairness", &fair, &[]);
    let rows = csv_rows(
        &fair.join("fairness.csv"),
        "mode,worker_cpu_share,worker_elapsed_s,rpc_per_s",
    );
    for m in MODES {
        let r: Vec<_> = rows.iter().filter(|r| r[0] == m).collect();
        assert_eq!(r.len(), 1, "one row for {m}: {rows:?}");
        let share: f64 = r[0][1].parse().unwrap();
        assert!(share > 0.0 && share <= 1.0, "{m}: share {share}");
    }
    assert!(fair.join("fairness.png").metadata().unwrap().len() > 0);
    assert!(fair.join("fairness.txt").exists());

    let syn = dir.join("syn-flood");
    // A lower top rate: a test build is many times slower than a release.
    run("syn-flood", &syn, &[("LAZYNET_SYN_RATES", "0,20000")]);
    let rows = csv_rows(
        &syn.join("syn-flood.csv"),
        "mode,syn_pps,http_transfers_per_s",
    );
    for m in MODES {
        for label in [m.to_string(), format!("{m}+cookies")] {
            let n = rows.iter().filter(|r| r[0] == label).count();
            assert_eq!(n, 2, "two rates for {label}: {rows:?}");
        }
    }
    assert!(syn.join("syn-flood.png").metadata().unwrap().len() > 0);
    assert!(syn.join("syn-flood.txt").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
