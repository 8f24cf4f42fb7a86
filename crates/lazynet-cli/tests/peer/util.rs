//! Helpers shared by the tests that run `lazynet` against the Linux kernel
//! in a network namespace: unique names, a cleanup guard, the `ready` line.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_lazynet");
pub static N: AtomicU32 = AtomicU32::new(0);

/// Unique names and a /24 inside 10.201.0.0/16 for one test.
pub struct Names {
    pub ns: String,
    pub subnet: u32,
}

impl Names {
    pub fn new() -> Self {
        let n = N.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id() % 100_000;
        Names {
            ns: format!("lnp{pid}-{n}"),
            subnet: 100 + (pid * 7 + n * 13) % 150,
        }
    }
    pub fn ours(&self) -> String {
        format!("10.201.{}.2", self.subnet)
    }
    /// Flags naming the namespace, device and kernel-side address.
    pub fn ns_args(&self) -> Vec<String> {
        vec![
            "--peer-ns".into(),
            self.ns.clone(),
            "--dev".into(),
            self.ns.clone(),
            "--peer-addr".into(),
            format!("10.201.{}.1/24", self.subnet),
        ]
    }
    /// The kernel's address on the link, lazynet's router with
    /// [`client_behind_router`].
    pub fn gateway(&self) -> String {
        format!("10.201.{}.1", self.subnet)
    }
    /// `ns_args` plus lazynet's own address.
    pub fn args(&self) -> Vec<String> {
        let mut a = self.ns_args();
        a.extend(["--addr".into(), format!("{}/24", self.ours())]);
        a
    }
}

/// Kills the server and removes the namespace and device on drop.
pub struct Cleanup {
    pub child: Option<Child>,
    pub ns: Option<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(ns) = &self.ns {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
            let _ = Command::new("ip").args(["link", "del", ns]).output();
        }
    }
}

/// Sends `sig` to our child `c` (not reaped yet, so its pid is still its).
pub fn signal(c: &Child, sig: i32) {
    lazynet::sys::signal(c.id(), sig);
}

/// Reads stdout lines until `ready`; returns the lines before it.
pub fn wait_ready(out: &mut BufReader<ChildStdout>) -> Vec<String> {
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut l = String::new();
        assert!(
            out.read_line(&mut l).unwrap() > 0,
            "server exited before ready: {lines:?}"
        );
        if l.trim() == "ready" {
            return lines;
        }
        lines.push(l.trim().to_string());
        assert!(Instant::now() < deadline, "no ready line");
    }
}

/// Starts `lazynet serve WHAT EXTRA…` with `names`' namespace and
/// addresses, waits for `ready`; the guard stops it and removes the
/// namespace (`ns`: `None` to leave it).
pub fn start_serve(
    names: &Names,
    what: &[&str],
    extra: &[&str],
    ns: Option<String>,
) -> (Cleanup, BufReader<ChildStdout>) {
    let mut child = Command::new(BIN)
        .arg("serve")
        .args(what)
        .args(extra)
        .args(names.args())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let guard = Cleanup {
        child: Some(child),
        ns,
    };
    wait_ready(&mut out);
    (guard, out)
}

/// SIGTERM to the guard's server, then the rest of its output (it must
/// exit cleanly).
pub fn stop_serve(guard: &mut Cleanup, out: &mut BufReader<ChildStdout>) -> String {
    let mut child = guard.child.take().unwrap();
    signal(&child, libc::SIGTERM);
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(out, &mut rest).unwrap();
    assert!(status.success(), "exit {status}: {rest}");
    rest
}

pub fn in_ns(ns: &str, args: &[&str]) -> std::process::Output {
    Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .output()
        .expect("ip netns exec")
}

/// The namespace and the device (or veth pair) named after it are gone.
pub fn assert_removed(names: &Names) {
    assert!(
        !lazynet::nic::netns::list_netns()
            .unwrap()
            .contains(&names.ns),
        "namespace left behind"
    );
    let link = Command::new("ip")
        .args(["link", "show", &names.ns])
        .output()
        .unwrap();
    assert!(!link.status.success(), "device left behind");
}

/// A client namespace behind the peer namespace of `names`, which routes
/// between them: a veth pair whose router end has an MTU of `mtu` while
/// the client's keeps 1500 (so the client still offers an MSS of 1460 and
/// only the router knows the path is smaller); the client at
/// 10.202.S.2 with its default route through the router (10.202.S.1).
/// Returns its name and the guard that removes it.
pub fn client_behind_router(names: &Names, mtu: u32) -> (String, Cleanup) {
    let (r, s) = (&names.ns, names.subnet);
    let c = format!("{r}c");
    let guard = Cleanup {
        child: None,
        ns: Some(c.clone()),
    };
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ip netns add {c} && \
             ip link add {c}a netns {r} type veth peer name {c}b netns {c} && \
             ip -n {r} addr add 10.202.{s}.1/24 dev {c}a && \
             ip -n {r} link set {c}a mtu {mtu} up && \
             ip -n {c} addr add 10.202.{s}.2/24 dev {c}b && \
             ip -n {c} link set {c}b up && ip -n {c} link set lo up && \
             ip -n {c} route add default via 10.202.{s}.1 && \
             ip netns exec {r} sysctl -qw net.ipv4.ip_forward=1"
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (c, guard)
}

/// A kernel client in namespace `ns` that makes `n` HTTP/1.0 requests to
/// `addr`:80, one connection each, reads every answer to its end (the
/// server's FIN) and keeps every socket open: each connection waits in
/// CLOSE-WAIT on the client's side, acknowledging the server's FIN and
/// never sending its own, so the server's side waits in FIN-WAIT-2 for
/// ever unless it bounds its orphans. It prints `held N` when done, then,
/// once its stdin closes, `reset R` (the sockets the server reset) and
/// exits.
pub struct HalfOpen {
    child: Child,
    out: BufReader<ChildStdout>,
}

const HALF_OPEN: &str = r#"
import resource, socket, sys
n, host = int(sys.argv[1]), sys.argv[2]
resource.setrlimit(resource.RLIMIT_NOFILE, (n + 64, n + 64))
held = []
for i in range(n):
    s = socket.create_connection((host, 80), timeout=10)
    s.sendall(b"GET /bytes/100 HTTP/1.0\r\n\r\n")
    got = b""
    while True:
        d = s.recv(4096)
        if not d:
            break
        got += d
    assert got.startswith(b"HTTP/1.") and len(got) > 100, got
    held.append(s)
print("held", len(held), flush=True)
sys.stdin.read()
# A RST in CLOSE-WAIT closes the socket (tcpi_state 7, TCP_CLOSE); one
# the server let go silently stays in CLOSE-WAIT (8).
reset = sum(1 for s in held if s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0] == 7)
print("reset", reset, flush=True)
"#;

impl HalfOpen {
    /// Starts the client and waits (at most two minutes) until it holds
    /// all `n` connections.
    pub fn hold(ns: &str, addr: &str, n: usize) -> HalfOpen {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns, "python3", "-c", HALF_OPEN])
            .arg(n.to_string())
            .arg(addr)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut l = String::new();
        let _ = out.read_line(&mut l);
        assert_eq!(
            l.trim(),
            format!("held {n}"),
            "the client did not hold its connections"
        );
        HalfOpen { child, out }
    }

    /// Lets the client go; how many of its sockets the server had reset.
    pub fn release(mut self) -> usize {
        drop(self.child.stdin.take());
        let mut l = String::new();
        let _ = self.out.read_line(&mut l);
        let _ = self.child.wait();
        l.trim()
            .strip_prefix("reset ")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no reset count: {l:?}"))
    }
}

impl Drop for HalfOpen {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Asks the server `child` (SIGUSR1) for its status line and reads it from
/// `out`: its `key=value` fields.
pub fn server_status(
    child: &Child,
    out: &mut BufReader<ChildStdout>,
) -> std::collections::HashMap<String, u64> {
    signal(child, libc::SIGUSR1);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut l = String::new();
        assert!(out.read_line(&mut l).unwrap() > 0, "server exited");
        if let Some(rest) = l.trim().strip_prefix("status: ") {
            return rest
                .split_whitespace()
                .filter_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    Some((k.to_string(), v.parse().ok()?))
                })
                .collect();
        }
        assert!(Instant::now() < deadline, "no status line");
    }
}

/// The orphan bounds of the half-open tests: at most this many orphans,
/// each at most [`FIN_TIMEOUT_S`] in FIN-WAIT-2.
pub const MAX_ORPHANS: usize = 1000;
pub const FIN_TIMEOUT_S: u64 = 4;

/// Checks a server against [`HalfOpen`]: 5,000 connections held half-open
/// leave at most [`MAX_ORPHANS`] orphans (as `status` reports them:
/// `orphans`, and, where known, `connections` and `tcp_buffer_bytes`),
/// holding no buffers, the rest reset (the client saw the resets), and none
/// after the FIN timeout.
pub fn orphans_bounded(
    ns: &str,
    addr: &str,
    mut status: impl FnMut() -> std::collections::HashMap<String, u64>,
) {
    let n = 5000;
    let client = HalfOpen::hold(ns, addr, n);
    let s = status();
    assert_eq!(s["orphans"], MAX_ORPHANS as u64, "{s:?}");
    if let Some(&c) = s.get("connections") {
        assert!(c <= MAX_ORPHANS as u64 + 1, "{s:?}");
    }
    if let Some(&b) = s.get("tcp_buffer_bytes") {
        assert_eq!(b, 0, "orphans in FIN-WAIT-2 hold no buffers: {s:?}");
    }
    std::thread::sleep(Duration::from_secs(FIN_TIMEOUT_S + 2));
    let s = status();
    assert_eq!(s["orphans"], 0, "{s:?}");
    if let Some(&c) = s.get("connections") {
        assert_eq!(c, 0, "{s:?}");
    }
    let reset = client.release();
    assert_eq!(
        reset,
        n - MAX_ORPHANS,
        "the client saw the oldest orphans reset"
    );
}
