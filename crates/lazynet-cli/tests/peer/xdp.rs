//! `--nic xdp`: lazynet on an AF_XDP socket bound to its end of a veth
//! pair, the Linux kernel on the other end in a namespace the test creates
//! (root; under CI=true these never skip). Real clients (ping, Python,
//! curl) and `tcpdump` on the kernel's side checking every checksum.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::tcp::{pattern_sha256, sha256_file};
use crate::udp::{assert_echo_verified, ping_and_udp_echo};
use crate::util::*;
use lazynet::nic::netns::list_netns;

/// Starts `lazynet serve WHAT --nic xdp` in a fresh namespace.
fn start(names: &Names, what: &[&str]) -> (Cleanup, BufReader<std::process::ChildStdout>) {
    start_serve(names, what, &["--nic", "xdp"], Some(names.ns.clone()))
}

/// `tcpdump` capturing on the kernel's end of the link, into a file.
struct Capture {
    child: Option<Child>,
    file: std::path::PathBuf,
}

impl Capture {
    /// Starts capturing (at most `count` frames, with a 64 MiB buffer so
    /// that a loaded machine drops none) and waits until tcpdump listens.
    fn start(names: &Names, count: u32) -> Capture {
        let file = std::env::temp_dir().join(format!("{}-peer.pcap", names.ns));
        let mut child = Command::new("ip")
            .args(["netns", "exec", &names.ns, "tcpdump", "-i", &names.ns])
            .args([
                "-n",
                "--immediate-mode",
                "-U",
                "-B",
                "65536",
                "-c",
                &count.to_string(),
                "-w",
            ])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tcpdump");
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !line.contains("listening on") {
            line.clear();
            assert!(
                err.read_line(&mut line).unwrap() > 0,
                "tcpdump did not start"
            );
            assert!(Instant::now() < deadline, "tcpdump did not start");
        }
        // Keep reading tcpdump's messages so that it never blocks on them.
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        Capture {
            child: Some(child),
            file,
        }
    }

    /// Stops the capture once the file stops growing (tcpdump may still be
    /// writing frames it has taken; `--immediate-mode` keeps the kernel
    /// from holding them back in blocks for up to a second) and returns `tcpdump -r -nn -vv`'s
    /// text, which must read cleanly.
    fn finish(mut self) -> String {
        let size = || std::fs::metadata(&self.file).map(|m| m.len()).unwrap_or(0);
        // Unchanged for half a second (a loaded machine may keep tcpdump
        // off the CPU for a while), within a bound.
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut last = u64::MAX;
        while size() != last && Instant::now() < deadline {
            last = size();
            std::thread::sleep(Duration::from_millis(500));
        }
        if let Some(c) = self.child.take() {
            signal(&c, libc::SIGINT);
            let mut c = c;
            let _ = c.wait();
        }
        let td = Command::new("tcpdump")
            .arg("-r")
            .arg(&self.file)
            .args(["-nn", "-vv"])
            .output()
            .expect("tcpdump");
        let text = String::from_utf8_lossy(&td.stdout).to_string();
        let err = String::from_utf8_lossy(&td.stderr);
        assert!(td.status.success(), "{err}");
        assert!(!err.contains("truncated"), "{err}");
        text
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(&self.file);
    }
}

/// No line of a `tcpdump -vv` text reports a bad checksum: TCP's
/// `(incorrect -> 0x…)`, UDP's `[bad udp cksum …]`, IP's `bad cksum` (a
/// checksum that reads `0x0bad` is no finding).
fn assert_clean(dump: &str) {
    let bad: Vec<&str> = dump
        .lines()
        .filter(|l| l.contains("incorrect") || l.contains("[bad ") || l.contains("bad cksum"))
        .take(5)
        .collect();
    assert!(
        bad.is_empty(),
        "bad checksums seen by the kernel's side: {bad:#?}"
    );
}

/// No XDP program is attached to device `dev` here (if it exists at all).
fn no_xdp_program(dev: &str) -> bool {
    let o = Command::new("ip")
        .args(["-d", "link", "show", "dev", dev])
        .output()
        .unwrap();
    !o.status.success() || !String::from_utf8_lossy(&o.stdout).contains("prog/xdp")
}

#[test]
fn kernel_pings_and_exchanges_udp_over_af_xdp() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let names = Names::new();
    let (mut guard, mut out) = start(&names, &["udp-echo"]);
    assert!(!no_xdp_program(&names.ns), "no XDP program on our veth end");
    let cap = Capture::start(&names, 100_000);

    ping_and_udp_echo(&names);

    // The kernel's side saw clean checksums on every datagram it could
    // verify (unfragmented ones, both directions) and on ICMP.
    let dump = cap.finish();
    assert_clean(&dump);
    assert_echo_verified(&dump);

    // Clean exit on SIGTERM with the driver's counters; the pair, the
    // namespace and the program are gone.
    let rest = stop_serve(&mut guard, &mut out);
    assert!(rest.contains("udp_delivered_reassembled"), "{rest}");
    assert_removed(&names);
}

#[test]
fn curl_downloads_and_uploads_100_mib_over_af_xdp() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let names = Names::new();
    let (mut guard, mut out) = start(&names, &["http"]);
    let url = format!("http://{}", names.ours());

    // A short exchange captured whole: every TCP checksum tcpdump checks
    // on the kernel's side is right.
    let cap = Capture::start(&names, 10_000);
    let o = in_ns(
        &names.ns,
        &[
            "curl",
            "-sS",
            "-o",
            "/dev/null",
            &format!("{url}/bytes/1000000"),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dump = cap.finish();
    assert_clean(&dump);
    let correct = dump.matches("(correct)").count();
    assert!(correct > 600, "{correct} verified TCP checksums\n{dump}");

    // 100 MiB down, byte-exact.
    let n: u64 = 100 << 20;
    let dl = std::env::temp_dir().join(format!("{}-dl", names.ns));
    let o = in_ns(
        &names.ns,
        &[
            "curl",
            "-sS",
            "--max-time",
            "120",
            "-o",
            dl.to_str().unwrap(),
            &format!("{url}/bytes/{n}"),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::metadata(&dl).unwrap().len(), n);
    assert_eq!(sha256_file(&dl), pattern_sha256(n));
    let _ = std::fs::remove_file(&dl);

    // 100 MiB up: the server's SHA-256 of what it received matches.
    let up = std::env::temp_dir().join(format!("{}-up", names.ns));
    {
        let mut f = std::fs::File::create(&up).unwrap();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut block = vec![0u8; 1 << 20];
        for _ in 0..100 {
            for b in block.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            std::io::Write::write_all(&mut f, &block).unwrap();
        }
    }
    let o = in_ns(
        &names.ns,
        &[
            "curl",
            "-sS",
            "--max-time",
            "120",
            "-T",
            up.to_str().unwrap(),
            &format!("{url}/upload"),
        ],
    );
    let answer = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        answer.contains(&format!("bytes={n}")) && answer.contains(&sha256_file(&up)),
        "{answer}"
    );
    let _ = std::fs::remove_file(&up);

    let rest = stop_serve(&mut guard, &mut out);
    assert!(rest.contains("AF_XDP"), "driver counters missing: {rest}");
    assert!(!list_netns().unwrap().contains(&names.ns));
}

#[test]
fn netns_up_veth_then_a_killed_server_leaves_no_program_behind() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let names = Names::new();
    let ns_args = names.ns_args();
    let up = Command::new(BIN)
        .args(["netns", "up", "--link", "veth"])
        .args(&ns_args)
        .output()
        .unwrap();
    let _ns = Cleanup {
        child: None,
        ns: Some(names.ns.clone()),
    };
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    assert!(no_xdp_program(&names.ns));

    // Attach, serve a ping, then die by SIGKILL: the kernel detaches the
    // program with the process, and the pair stays (it was not ours).
    let mut child = Command::new(BIN)
        .args(["serve", "udp-echo", "--nic", "xdp"])
        .args(names.args())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut guard = Cleanup {
        child: Some(child),
        ns: None,
    };
    wait_ready(&mut out);
    assert!(!no_xdp_program(&names.ns));
    let ping = in_ns(&names.ns, &["ping", "-c", "2", "-W", "2", &names.ours()]);
    assert!(ping.status.success());
    let mut child = guard.child.take().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !no_xdp_program(&names.ns) {
        assert!(Instant::now() < deadline, "XDP program left behind");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(list_netns().unwrap().contains(&names.ns));

    // A second server attaches to the same pair and works.
    let (mut guard, mut out) = start_serve(&names, &["udp-echo"], &["--nic", "xdp"], None);
    let ping = in_ns(&names.ns, &["ping", "-c", "2", "-W", "2", &names.ours()]);
    assert!(ping.status.success());
    stop_serve(&mut guard, &mut out);
    assert!(no_xdp_program(&names.ns));

    let down = Command::new(BIN)
        .args(["netns", "down", "--link", "veth"])
        .args(&ns_args)
        .output()
        .unwrap();
    assert!(
        down.status.success(),
        "{}",
        String::from_utf8_lossy(&down.stderr)
    );
    assert!(!list_netns().unwrap().contains(&names.ns));
}
