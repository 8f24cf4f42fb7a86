//! The Linux series of the overload experiments (root): `lazynet-lab exp-helper
//! linux-points` brings up its two namespaces and veth pair, runs one short
//! livelock point and one short latency point, and tears everything down.
//! The test checks plausible results, that the namespaces are gone and that
//! no helper process is left. A guard kills the program and removes the
//! namespaces it printed, by name, if anything fails.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::util::{exclusive, BIN};
use lazynet::nic::netns::list_netns;

struct Guard {
    child: Option<Child>,
    namespaces: Vec<String>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

fn kv(line: &str, key: &str) -> f64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"))
}

#[test]
fn linux_livelock_and_latency_points_run_and_clean_up() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let _one = exclusive();
    let child = Command::new(BIN)
        .args([
            "exp-helper",
            "linux-points",
            "--rate",
            "20000",
            "--blast",
            "20000",
            "--seconds",
            "1",
            "--work-iters",
            "400",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut g = Guard {
        child: Some(child),
        namespaces: Vec::new(),
    };
    let out = g.child.as_mut().unwrap().stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let mut lines = Vec::new();
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        match rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
            Ok(l) => {
                println!("{l}");
                if let Some(ns) = l.strip_prefix("namespaces=") {
                    g.namespaces = ns.split(',').map(str::to_owned).collect();
                }
                lines.push(l);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("no end within 60 s: {lines:?}"),
        }
    }
    reader.join().unwrap();
    let status = g.child.take().unwrap().wait().unwrap();
    assert!(status.success(), "{status}: {lines:?}");
    let find = |p: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(p))
            .unwrap_or_else(|| panic!("no {p} line: {lines:?}"))
            .clone()
    };

    assert_eq!(g.namespaces.len(), 2);
    assert!(
        lines.iter().any(|l| l.contains("rps_cpus = 2")),
        "RPS set to CPU 1 on the host side: {lines:?}"
    );
    let l = find("livelock offered=");
    let (offered, delivered) = (kv(&l, "offered"), kv(&l, "delivered"));
    assert!(offered > 10_000.0, "{l}");
    assert!(delivered > 0.0 && delivered <= offered, "{l}");
    let p = find("latency p50_ns=");
    let (p50, p99, p999) = (kv(&p, "p50_ns"), kv(&p, "p99_ns"), kv(&p, "p999_ns"));
    assert!(kv(&p, "samples") > 0.0, "{p}");
    assert!(p50 > 0.0 && p50 <= p99 && p99 <= p999, "{p}");

    // Nothing left: namespaces removed, helper processes gone.
    let list = list_netns().unwrap();
    for ns in &g.namespaces {
        assert!(!list.contains(ns), "{ns} left in {list:?}");
    }
    let pids = find("pids=");
    let pids: Vec<u32> = pids["pids=".len()..]
        .split(',')
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(
        pids.len() >= 5,
        "sink, loadgen, echo, sink, client, loadgen: {pids:?}"
    );
    for pid in pids {
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&cmd).contains("exp-helper"),
            "helper {pid} still running"
        );
    }
}

/// Part 2: the same traffic from a Linux peer namespace over TAP into a
/// lazynet host, one short point per receive mode; no namespace is left.
#[test]
fn tap_livelock_points_run_and_clean_up() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let _one = exclusive();
    for mode in ["eager", "early-demux", "soft-lrp", "ni-lrp"] {
        tap_point(mode);
    }
}

fn tap_point(mode: &str) {
    let child = Command::new(BIN)
        .args([
            "exp-helper",
            "tap-point",
            "--mode",
            mode,
            "--rate",
            "20000",
            "--seconds",
            "1",
            "--work-iters",
            "400",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id();
    // The program names its namespace lnt<pid % 10^7>-<n>.
    let prefix = format!("lnt{}-", pid % 10_000_000);
    let mut g = Guard {
        child: Some(child),
        namespaces: (0..4).map(|n| format!("{prefix}{n}")).collect(),
    };
    let mut c = g.child.take().unwrap();
    let end = Instant::now() + Duration::from_secs(40);
    let status = loop {
        if let Some(s) = c.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > end {
            g.child = Some(c);
            panic!("tap-point {mode} still running after 40 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    std::io::Read::read_to_string(&mut c.stdout.take().unwrap(), &mut out).unwrap();
    println!("{out}");
    assert!(status.success(), "{mode}: {status}");
    let l = out
        .lines()
        .find(|l| l.starts_with("tap offered="))
        .unwrap_or_else(|| panic!("{mode}: no result line: {out}"));
    let (offered, delivered) = (kv(l, "offered"), kv(l, "delivered"));
    assert!(offered > 10_000.0, "{mode}: {l}");
    assert!(delivered > 0.0 && delivered <= offered, "{mode}: {l}");
    assert!(
        !list_netns().unwrap().iter().any(|n| n.starts_with(&prefix)),
        "{mode}: namespace {prefix}* left behind"
    );
}
