//! lazynet's TCP against the Linux kernel's, over TAP into a namespace the
//! test creates (root; under CI=true these never skip). Real clients and
//! servers: curl, Python's http.server and sockets.
//!
//! Impairments: this machine's kernel has no `sch_netem`
//! (CONFIG_NET_SCH_NETEM is not set; `tc qdisc add … netem` fails with
//! "Specified qdisc kind is unknown"). So the kernel side drops TCP segments
//! at random in both directions with nftables (`numgen random`, in the
//! namespace's input and output hooks), and delay, reordering and
//! duplication are injected on lazynet's side of the link by its fault
//! injector (`--fault`), in both directions.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use crate::util::*;

/// SHA-256 of `/bytes/N` (byte i = i mod 251).
pub(crate) fn pattern_sha256(n: u64) -> String {
    let block: Vec<u8> = (0..251u32 * 64).map(|i| (i % 251) as u8).collect();
    let mut h = Sha256::new();
    let mut left = n;
    while left > 0 {
        let k = left.min(block.len() as u64) as usize;
        h.update(&block[..k]);
        left -= k as u64;
    }
    hex(&h.finalize())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// SHA-256 of `data`, in hex.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

pub(crate) fn sha256_file(p: &std::path::Path) -> String {
    let mut f = std::fs::File::open(p).unwrap();
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    hex(&h.finalize())
}

/// Makes the kernel in `ns` drop `permille`/1000 of the TCP segments it
/// sends and of those it receives (nftables; see the module docs).
fn kernel_loss(ns: &str, permille: u32) {
    let rules = format!(
        "table inet lossy {{
  chain in {{ type filter hook input priority 0; meta l4proto tcp numgen random mod 1000 < {permille} drop; }}
  chain out {{ type filter hook output priority 0; meta l4proto tcp numgen random mod 1000 < {permille} drop; }}
}}"
    );
    let mut c = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("nft");
    std::io::Write::write_all(c.stdin.as_mut().unwrap(), rules.as_bytes()).unwrap();
    drop(c.stdin.take());
    assert!(c.wait().unwrap().success(), "nft rules");
}

/// lazynet's side of the link, each direction: every frame +0.5 ms (a
/// fixed delay keeps order, as netem's does), 2% overtaken by the next 3,
/// 0.5% duplicated.
const FAULT: &str = "delay=1,delay-us=500,reorder=0.02,gap=3,dup=0.005,seed=7";

/// Starts `lazynet serve WHAT --nic tap` in a fresh namespace.
fn start(names: &Names, what: &[&str]) -> (Cleanup, BufReader<std::process::ChildStdout>) {
    start_serve(
        names,
        what,
        &["--nic", "tap", "--fault", FAULT],
        Some(names.ns.clone()),
    )
}

/// SIGTERM, then the rest of the server's output.
fn stop(guard: &mut Cleanup, out: &mut BufReader<std::process::ChildStdout>) -> String {
    stop_serve(guard, out)
}

/// Runs the Python program `script` with `args` in `ns`; its stdout, which
/// must come with a zero exit.
fn python_in_ns(ns: &str, script: &str, args: &[&str]) -> String {
    let mut argv = vec!["python3", "-c", script];
    argv.extend_from_slice(args);
    let o = in_ns(ns, &argv);
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    text
}

fn sh_in_ns(ns: &str, script: &str) -> String {
    let o = in_ns(ns, &["sh", "-c", script]);
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{script}: {text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    text
}

#[test]
fn half_open_http_clients_leave_a_bounded_number_of_orphans_all_gone_after_the_fin_timeout() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let names = Names::new();
    let (cap, fin) = (MAX_ORPHANS.to_string(), FIN_TIMEOUT_S.to_string());
    let (mut guard, mut out) = start_serve(
        &names,
        &["http", "--port", "80"],
        &[
            "--nic",
            "tap",
            "--max-orphans",
            &cap,
            "--fin-timeout-s",
            &fin,
        ],
        Some(names.ns.clone()),
    );
    let child = guard.child.as_ref().unwrap();
    orphans_bounded(&names.ns, &names.ours(), || server_status(child, &mut out));
    let rest = stop(&mut guard, &mut out);
    assert!(rest.contains("reset.orphans_over_cap"), "{rest}");
}

#[test]
fn curl_downloads_and_uploads_over_a_lossy_reordering_link() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let names = Names::new();
    let (mut guard, mut out) = start(&names, &["http", "--port", "80"]);
    kernel_loss(&names.ns, 10);
    let ours = names.ours();
    // 100 MiB from lazynet to curl, byte-exact.
    let n: u64 = 100 << 20;
    let got = sh_in_ns(
        &names.ns,
        &format!("curl -sS --max-time 120 http://{ours}/bytes/{n} | sha256sum"),
    );
    assert_eq!(
        got.split_whitespace().next(),
        Some(pattern_sha256(n).as_str())
    );
    // 20 MiB from curl to lazynet: it answers with length and SHA-256.
    let dir = std::env::temp_dir().join(format!("{}-up", names.ns));
    std::fs::create_dir_all(&dir).unwrap();
    let up = dir.join("up.bin");
    let data: Vec<u8> = (0..20u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&up, &data).unwrap();
    let reply = sh_in_ns(
        &names.ns,
        &format!(
            "curl -sS --max-time 120 -T {} http://{ours}/upload",
            up.display()
        ),
    );
    let want = hex(&Sha256::digest(&data));
    assert_eq!(
        reply.trim(),
        format!("bytes={} sha256={want}", data.len()),
        "upload"
    );
    // HTTP/1.0 and keep-alive: two requests on one connection, then 1.0.
    let two = sh_in_ns(
        &names.ns,
        &format!(
            "curl -sS --max-time 20 -w '%{{num_connects}}\\n' -o /dev/null http://{ours}/bytes/10 -o /dev/null http://{ours}/bytes/20"
        ),
    );
    assert_eq!(
        two.split_whitespace().collect::<Vec<_>>(),
        ["1", "0"],
        "reused"
    );
    let old = sh_in_ns(
        &names.ns,
        &format!("curl -sS --max-time 20 --http1.0 http://{ours}/bytes/5 | od -An -tu1"),
    );
    assert_eq!(
        old.split_whitespace().collect::<Vec<_>>(),
        ["0", "1", "2", "3", "4"]
    );
    let rest = stop(&mut guard, &mut out);
    assert!(rest.contains("open at exit: 0"), "{rest}");
    // The download went out in merged frames (segmentation offload), with
    // several segments each on average, through the fault injector's
    // reordering.
    let (frames, segs) = (counter(&rest, "tso_frames"), counter(&rest, "tso_segments"));
    assert!(frames > 0 && segs >= 4 * frames, "{rest}");
    // And the upload came in as GSO frames the driver cut up (receive
    // offload).
    assert_cut_up(&rest, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The report shows GSO frames received and cut into at least `per`
/// segments each on average, and none dropped.
fn assert_cut_up(report: &str, per: u64) {
    let (gso, cut) = (
        counter(report, "rx_gso_frames"),
        counter(report, "rx_gso_segments"),
    );
    assert!(gso > 0 && cut >= per * gso, "{report}");
    assert_eq!(counter(report, "rx_vnet_dropped"), 0, "{report}");
}

/// The value of `name: N` in a server's exit report (0 if absent).
fn counter(report: &str, name: &str) -> u64 {
    report
        .split(&format!("{name}: "))
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn lazynet_get_downloads_from_linux_over_a_lossy_link() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let names = Names::new();
    let mut guard = Cleanup {
        child: None,
        ns: Some(names.ns.clone()),
    };
    let up = Command::new(BIN)
        .args(["netns", "up"])
        .args(names.ns_args())
        .output()
        .unwrap();
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    kernel_loss(&names.ns, 5);
    let dir = std::env::temp_dir().join(format!("{}-www", names.ns));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("f.bin");
    let n = 100usize << 20;
    let data: Vec<u8> = (0..n as u32)
        .map(|i| (i.wrapping_mul(2246822519) >> 11) as u8)
        .collect();
    std::fs::write(&file, &data).unwrap();
    drop(data);
    let peer = format!("10.201.{}.1", names.subnet);
    let server = Command::new("ip")
        .args(["netns", "exec", &names.ns])
        .args(["python3", "-m", "http.server", "8080", "--bind", &peer])
        .arg("--directory")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    guard.child = Some(server);
    // Wait until the server listens.
    let mut ok = false;
    for _ in 0..100 {
        let o = in_ns(&names.ns, &["ss", "-ltn"]);
        if String::from_utf8_lossy(&o.stdout).contains(":8080") {
            ok = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(ok, "http.server did not start");
    let dst = dir.join("got.bin");
    let get = Command::new(BIN)
        .args(["get", &format!("http://{peer}:8080/f.bin"), "-o"])
        .arg(&dst)
        .args(["--timeout", "60", "--fault", FAULT])
        .args(names.args())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&get.stderr);
    assert!(get.status.success(), "get failed: {err}");
    assert!(err.contains(&format!("200 {n} bytes")), "{err}");
    assert_eq!(sha256_file(&dst), sha256_file(&file));
    // The kernel handed most of it over as GSO frames (receive offload),
    // cut into segments in lazynet's buffers, through the fault injector.
    assert_cut_up(&err, 4);
    // Again without offload, on the same persistent device, whose offload
    // setting the run above changed: plain frames only, the same bytes.
    let _ = std::fs::remove_file(&dst);
    let plain = Command::new(BIN)
        .args(["get", &format!("http://{peer}:8080/f.bin"), "-o"])
        .arg(&dst)
        .args(["--timeout", "60", "--tso", "off"])
        .args(names.args())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&plain.stderr);
    assert!(plain.status.success(), "get --tso off failed: {err}");
    assert_eq!(sha256_file(&dst), sha256_file(&file));
    assert!(err.contains("segmentation offload off"), "{err}");
    assert_eq!(counter(&err, "rx_gso_frames"), 0, "{err}");
    // A missing file is an error, and leaves no output file behind.
    let nope = std::env::temp_dir().join(format!("{}-nope", names.ns));
    let miss = Command::new(BIN)
        .args(["get", &format!("http://{peer}:8080/nope"), "-o"])
        .arg(&nope)
        .args(names.args())
        .output()
        .unwrap();
    let merr = String::from_utf8_lossy(&miss.stderr);
    assert!(!miss.status.success(), "{merr}");
    assert!(merr.contains("404"), "{merr}");
    assert!(!nope.exists(), "{nope:?} left behind after a 404");
    // But a failed download to a device writes there and never deletes
    // it: a node of /dev/null's device of our own (a failure with
    // `-o /dev/null` used to remove /dev/null itself).
    let dev = dir.join("null");
    let made = Command::new("mknod")
        .arg(&dev)
        .args(["c", "1", "3"])
        .status()
        .unwrap();
    assert!(made.success());
    let miss = Command::new(BIN)
        .args(["get", &format!("http://{peer}:8080/nope"), "-o"])
        .arg(&dev)
        .args(names.args())
        .output()
        .unwrap();
    assert!(!miss.status.success());
    use std::os::unix::fs::FileTypeExt;
    let kind = std::fs::symlink_metadata(&dev).map(|m| m.file_type().is_char_device());
    assert!(
        matches!(kind, Ok(true)),
        "{dev:?} after a failed get: {kind:?}"
    );
    drop(guard);
    let down = Command::new(BIN)
        .args(["netns", "down"])
        .args(names.ns_args())
        .output()
        .unwrap();
    assert!(down.status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

const MANY: &str = r#"
import socket, sys, threading
host = sys.argv[1]
def get(n, keep=False):
    s = socket.create_connection((host, 80), timeout=20)
    s.sendall(b"GET /bytes/%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % n)
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    head, body = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200"), head
    assert body == bytes(i % 251 for i in range(n)), "body"
for i in range(1000):
    get(100 + i % 50)
print("sequential 1000")
errors = []
def worker(i):
    try:
        get(10000 + i)
    except Exception as e:
        errors.append(repr(e))
ts = [threading.Thread(target=worker, args=(i,)) for i in range(200)]
for t in ts: t.start()
for t in ts: t.join()
assert not errors, errors[:3]
print("concurrent 200")
"#;

#[test]
fn thousand_sequential_and_two_hundred_concurrent_connections() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let names = Names::new();
    let (mut guard, mut out) = start(&names, &["http", "--port", "80"]);
    let text = python_in_ns(&names.ns, MANY, &[&names.ours()]);
    assert!(text.contains("concurrent 200"), "{text}");
    // The kernel side: nothing but TIME-WAIT may remain.
    let ss = in_ns(&names.ns, &["ss", "-tanH"]);
    let states = String::from_utf8_lossy(&ss.stdout);
    for l in states.lines() {
        assert!(
            l.starts_with("TIME-WAIT") || l.starts_with("LISTEN"),
            "{states}"
        );
    }
    let rest = stop(&mut guard, &mut out);
    assert!(
        rest.contains("connections: 1200, open at exit: 0"),
        "{rest}"
    );
    // lazynet's side: only TIME-WAIT, nothing half-closed or stuck.
    let line = rest
        .lines()
        .find(|l| l.starts_with("connections left:"))
        .unwrap();
    assert!(line.ends_with(", 0 other"), "{line}");
}

const ECHO: &str = r#"
import socket, sys, threading, hashlib
s = socket.create_connection((sys.argv[1], 7), timeout=20)
data = bytes((i * 7 + (i >> 9)) % 256 for i in range(8_000_000))
got = bytearray()
def rd():
    while True:
        b = s.recv(65536)
        if not b:
            break
        got.extend(b)
t = threading.Thread(target=rd); t.start()
s.sendall(data); s.shutdown(socket.SHUT_WR); t.join()
print("echoed", len(got), bytes(got) == data)
"#;

#[test]
fn tcp_echo_with_the_kernel_both_directions_at_once() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let names = Names::new();
    let (mut guard, mut out) = start(&names, &["tcp-echo", "--port", "7"]);
    kernel_loss(&names.ns, 5);
    let text = python_in_ns(&names.ns, ECHO, &[&names.ours()]);
    assert!(text.contains("echoed 8000000 True"), "{text}");
    let rest = stop(&mut guard, &mut out);
    assert!(rest.contains("open at exit: 0"), "{rest}");
    let mut lines = BufReader::new(rest.as_bytes()).lines();
    assert!(lines.any(|l| l.unwrap().contains("tcp_accepted")));
}

/// A Linux client's view of one download: TCP_INFO right after connect
/// (tcpi_options, and the window shifts: ours is tcpi_snd_wscale), then the
/// body's length and SHA-256.
const COOKIE_CLIENT: &str = r#"
import hashlib, socket, sys
host, n = sys.argv[1], int(sys.argv[2])
s = socket.create_connection((host, 80), timeout=60)
info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
opts, snd_ws, rcv_ws = info[5], info[6] & 15, info[6] >> 4
s.sendall(("GET /bytes/%d HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (n, host)).encode())
parts = []
while True:
    b = s.recv(1 << 20)
    if not b:
        break
    parts.append(b)
head, body = b"".join(parts).split(b"\r\n\r\n", 1)
print("options %d snd_wscale %d rcv_wscale %d body %d sha256 %s" % (opts, snd_ws, rcv_ws, len(body), hashlib.sha256(body).hexdigest()))
"#;

/// SYN cookies (RFC 4987) with the kernel as client: with `--syn-queue 0`
/// every connection opens through a cookie. With timestamps the cookie
/// keeps the client's window shift and SACK-permitted in our TSval, and
/// the kernel reports all three options and our window shift (3, for the
/// server's 256 KiB buffers); with timestamps off in the namespace it
/// falls back to MSS only. Both downloads are byte-exact.
#[test]
fn syn_cookies_keep_window_scaling_sack_and_timestamps_with_the_kernel() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let names = Names::new();
    let (mut guard, mut out) = start(&names, &["http", "--port", "80", "--syn-queue", "0"]);
    let ours = names.ours();
    let n: u64 = 8 << 20;
    let want = pattern_sha256(n);
    let fetch = || python_in_ns(&names.ns, COOKIE_CLIENT, &[&ours, &n.to_string()]);
    // TCPI_OPT_TIMESTAMPS 1 | TCPI_OPT_SACK 2 | TCPI_OPT_WSCALE 4.
    let with = fetch();
    assert!(
        with.starts_with("options 7 snd_wscale 3 ")
            && with.contains(&format!("body {n} sha256 {want}")),
        "{with}"
    );
    sh_in_ns(&names.ns, "sysctl -qw net.ipv4.tcp_timestamps=0");
    let without = fetch();
    assert!(
        without.starts_with("options 0 snd_wscale 0 ")
            && without.contains(&format!("body {n} sha256 {want}")),
        "{without}"
    );
    let rest = stop(&mut guard, &mut out);
    assert!(rest.contains("open at exit: 0"), "{rest}");
    assert!(
        rest.contains("listener: 0 SYNs queued") && rest.contains(", 2 connections from cookies"),
        "{rest}"
    );
}

/// Path MTU discovery (RFC 1191) with the Linux kernel as the router: the
/// peer namespace forwards to a client namespace over a veth pair whose
/// router end has an MTU of 1200 (the client's end keeps 1500, so the
/// client still offers an MSS of 1460). lazynet, reaching the client
/// through `--gateway`, sends full segments with DF set; the router drops
/// them and answers "fragmentation needed"; lazynet shrinks its segments
/// and curl downloads 20 MB byte-exact. (Without it every full segment
/// is lost and the download stalls.)
#[test]
fn a_download_through_a_router_with_a_smaller_mtu_completes() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let names = Names::new();
    let r = &names.ns;
    let gw = names.gateway();
    let (mut guard, mut out) = start_serve(
        &names,
        &["http", "--port", "80"],
        &["--nic", "tap", "--gateway", &gw],
        Some(r.clone()),
    );
    let (c, _client) = client_behind_router(&names, 1200);
    let ours = names.ours();
    let n: u64 = 20_000_000;
    let got = sh_in_ns(
        &c,
        &format!("curl -sS --max-time 60 http://{ours}/bytes/{n} | sha256sum"),
    );
    assert_eq!(
        got.split_whitespace().next(),
        Some(pattern_sha256(n).as_str())
    );
    // The router told us, and we listened.
    let mib = sh_in_ns(r, "cat /proc/net/snmp");
    let rest = stop(&mut guard, &mut out);
    assert!(
        table_counter(&rest, "icmp_frag_needed") >= 1,
        "{rest}\n{mib}"
    );
}

/// The value of `name` in the exit report's counter table (`  name  N`;
/// 0 if absent).
fn table_counter(report: &str, name: &str) -> u64 {
    report
        .lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some(name)).then(|| w.next()?.parse().ok())?
        })
        .unwrap_or(0)
}
