//! The Linux series of the overload experiments (LRP Figs. 3 and 4): the
//! same UDP traffic, the same per-datagram [`work`](crate::infra::exp::work), against the
//! Linux kernel's stack, in two network namespaces of our own.
//!
//! # API (stable; [`crate::papers::lrp`]'s `livelock`, `latency` and `tap` call it)
//!
//! - [`LinuxNet::up`] → a guard owning two fresh namespaces, "host" (the
//!   server under test, on [`Role::Server`]) and "gen" (generator and client,
//!   on [`Role::Client`]), joined by a veth pair, with RPS steering each side's
//!   kernel receive work to its own core. Dropping it removes both
//!   namespaces (and so the veth pair), on every path. [`LinuxNet::notes`]
//!   says what was set up (for `NAME.txt`); [`LinuxNet::up_with`]`(false)`
//!   leaves RPS off (a comparison, not the series).
//! - [`livelock_point`]`(&net, rate_pps, seconds, work_iters)` →
//!   [`LivelockPoint`]: offered vs delivered rate of a UDP sink that spends
//!   `work(work_iters)` per datagram, plus the kernel's drop counters and
//!   where its softirq time went.
//! - [`latency_point`]`(&net, blast_pps, seconds, blast_work_iters)` →
//!   [`LatencyPoint`]: ping-pong round-trip p50/p99/p99.9 to an echo server
//!   while a blast sink on the same core is sent `blast_pps` (0 = unloaded).
//! - [`tap_livelock_point`](crate::papers::lrp::tap::tap_livelock_point)`(mode, rate_pps, seconds, work_iters)` →
//!   [`LivelockPoint`]: the livelock traffic from a Linux peer namespace,
//!   through a TAP device, into a lazynet stack in `mode` (part 2: real
//!   kernel traffic instead of the emulated NIC).
//!
//! Every point's [`LivelockPoint::summary`] / [`LatencyPoint::summary`] is
//! one line for the results' notes, including where the softirq time went.
//!
//! Each point is bounded in time (`seconds` ≤ [`MAX_SECONDS`], plus fixed
//! start-up and drain bounds) and count (the generator's rate × seconds).
//!
//! # How the Linux series faces the situation lazynet's host faces
//!
//! On veth the receiver's kernel work (IP, UDP, socket lookup and queueing)
//! runs in softirq on the *sender's* core: `veth_xmit` calls `netif_rx`,
//! which queues to the current CPU's backlog. Left so, the Linux host would
//! get its protocol work done for free on the generator's core. We write
//! RPS masks ([`LinuxNet::up`]): the host-side veth's `rx-0/rps_cpus` =
//! [`Role::Server`] and the gen-side one = [`Role::Client`], so `netif_rx` hands each
//! packet to the receiving side's core (backlog + IPI) and the host's core
//! does both the kernel's receive work and the server's, as in the paper.
//! Every point measures where the softirq time went (per-CPU softirq time
//! from `/proc/stat`, `NET_RX` counts from `/proc/softirqs`) and reports
//! the share on [`Role::Server`] ([`SoftirqShare`]). Socket buffers, backlog
//! length (`netdev_max_backlog`) and qdiscs are left at Linux's defaults.
//!
//! Reading those counters: this kernel has no `CONFIG_IRQ_TIME_ACCOUNTING`,
//! so softirq time is *sampled* by the 250 Hz tick (a short point has few
//! samples). `NET_RX` runs are counted on the sender's core too, because
//! with RPS the sender raises `NET_RX` to send the IPIs
//! (`net_rps_action`): the counts show activity, the time shows where the
//! work is. Without RPS the receive work runs inside the sender's
//! `sendmmsg` (softirq processed at `local_bh_enable`, in process context)
//! and is charged as the *sender's* system time — it then hardly shows as
//! softirq time at all. The counters are global: other load on the machine
//! shows up in them. With RPS most of the sampled softirq time is on the
//! host's core, without it hardly any is sampled (docs/PERFORMANCE.md).
//!
//! In the latency point the ping-pong client and the blast generator share
//! [`Role::Client`] (as the lazynet series' client and load do); the generator
//! spins close to its deadlines, so the client's wake-ups compete with it.
//!
//! The servers and clients are hidden subcommands of our own binary
//! (`lazynet-lab exp-helper …`, [`HelperCmd`](crate::cli::helper::HelperCmd)) run with `ip netns exec`, which
//! execs (no extra process), so the pid we hold is the helper's. The Linux
//! sink receives with `recvmmsg` (up to 32 datagrams per call, Linux at its
//! best); the echo server with `recvfrom`/`sendto`.
//!
//! Cleanup covers errors and panics (guards); a process killed by a signal
//! cannot run them, and then leaves its namespaces `lxh<pid>-<n>` and
//! `lxg<pid>-<n>` (TAP: `lnt<pid>-<n>`) behind: remove them by name with
//! `ip netns del`.
//!
//! **Owns:** the namespaces, veth pair and child processes it creates, by
//! name and pid (names carry our pid and a counter). **May not touch:**
//! anything else — no global sysctls, no other namespaces, no processes it
//! did not start; it reads global counters (`/proc/stat`, `/proc/softirqs`,
//! `/proc/net/softnet_stat`) but never writes them.

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use lazynet::nic::netns::ip;

use crate::infra::cpus::Role;

/// Longest measured window of one point.
pub const MAX_SECONDS: f64 = 120.0;
/// The host's address on the veth pair.
pub const HOST_ADDR: Ipv4Addr = Ipv4Addr::new(10, 203, 0, 1);
/// The generator's address on the veth pair.
pub const GEN_ADDR: Ipv4Addr = Ipv4Addr::new(10, 203, 0, 2);
const HOST_MAC: &str = "02:4c:4e:00:00:01";
const GEN_MAC: &str = "02:4c:4e:00:00:02";
/// Time after the generator ends for the host to drain its queues.
pub(crate) const DRAIN: Duration = Duration::from_millis(200);
/// Bound on a helper's start-up (`ready`).
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on a helper's exit after SIGTERM.
const TERM_GRACE: Duration = Duration::from_secs(3);
/// UDP payload bytes of the livelock and blast load (a 60-byte frame, as
/// the lazynet series).
pub const LOAD_PAYLOAD: usize = 18;

static UNIQUE: AtomicU32 = AtomicU32::new(0);

pub(crate) fn check_seconds(seconds: f64) -> anyhow::Result<()> {
    if !(seconds > 0.0 && seconds <= MAX_SECONDS) {
        bail!("seconds must be in (0, {MAX_SECONDS}], got {seconds}");
    }
    Ok(())
}

// ---------------------------------------------------------------- namespaces

/// Which of the two namespaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The server under test, on [`Role::Server`].
    Host,
    /// Generator and client, on [`Role::Client`].
    Gen,
}

/// Two namespaces joined by a veth pair, removed on drop (see the module
/// docs). Needs root.
#[derive(Debug)]
pub struct LinuxNet {
    host_ns: String,
    gen_ns: String,
    host_dev: String,
    gen_dev: String,
    exe: PathBuf,
    notes: Vec<String>,
    pids: Mutex<Vec<u32>>,
    removed: bool,
}

/// Hex CPU mask of one CPU, as `rps_cpus` takes it.
fn cpu_mask(cpu: usize) -> String {
    format!("{:x}", 1u64 << cpu.min(63))
}

impl LinuxNet {
    /// Creates the namespaces and the veth pair (static neighbour entries,
    /// so no ARP exchange races the first packets), and sets RPS. Undoes
    /// everything on failure. Uses this program for the helpers.
    pub fn up() -> anyhow::Result<Self> {
        Self::up_with(true)
    }

    /// As [`Self::up`], but without RPS when `rps` is false: then each
    /// side's kernel receive work runs on the *sender's* core (veth's
    /// default) — a comparison that shows what RPS changes, not the series.
    pub fn up_with(rps: bool) -> anyhow::Result<Self> {
        if !lazynet::sys::is_root() {
            bail!("the Linux series needs root (network namespaces)");
        }
        let exe = std::env::current_exe().context("cannot find our own binary")?;
        let pid = std::process::id() % 100_000;
        let n = UNIQUE.fetch_add(1, Ordering::Relaxed) % 100;
        let mut net = LinuxNet {
            host_ns: format!("lxh{pid}-{n}"),
            gen_ns: format!("lxg{pid}-{n}"),
            host_dev: format!("lvh{pid}-{n}"),
            gen_dev: format!("lvg{pid}-{n}"),
            exe,
            notes: Vec::new(),
            pids: Mutex::new(Vec::new()),
            removed: false,
        };
        // On error, `net` drops and removes whatever was made.
        net.create(rps)?;
        Ok(net)
    }

    fn create(&mut self, rps: bool) -> anyhow::Result<()> {
        let (h, g) = (self.host_ns.clone(), self.gen_ns.clone());
        let (hd, gd) = (self.host_dev.clone(), self.gen_dev.clone());
        ip(&["netns", "add", &h])?;
        ip(&["netns", "add", &g])?;
        ip(&[
            "link", "add", &hd, "address", HOST_MAC, "netns", &h, "type", "veth", "peer", "name",
            &gd, "address", GEN_MAC, "netns", &g,
        ])?;
        let host = format!("{HOST_ADDR}/24");
        let gen = format!("{GEN_ADDR}/24");
        for (ns, dev, addr, peer, peer_mac) in [
            (&h, &hd, &host, GEN_ADDR, GEN_MAC),
            (&g, &gd, &gen, HOST_ADDR, HOST_MAC),
        ] {
            ip(&["-n", ns, "addr", "add", addr, "dev", dev])?;
            ip(&["-n", ns, "link", "set", "dev", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "dev", "lo", "up"])?;
            ip(&[
                "-n",
                ns,
                "neigh",
                "replace",
                &peer.to_string(),
                "lladdr",
                peer_mac,
                "dev",
                dev,
                "nud",
                "permanent",
            ])?;
        }
        if !rps {
            self.notes.push(
                "linux: no RPS: receive work runs on the sender's core (comparison only)".into(),
            );
            return Ok(());
        }
        for (ns, dev, cpu) in [(&h, &hd, Role::Server.cpu()), (&g, &gd, Role::Client.cpu())] {
            let got = self.set_rps(ns, dev, cpu)?;
            self.notes.push(format!(
                "linux: {dev} rx-0 rps_cpus = {got} (CPU {cpu}) in namespace {ns}"
            ));
        }
        Ok(())
    }

    /// Writes `rps_cpus` of `dev`'s rx-0 inside `ns` (`ip netns exec`
    /// mounts that namespace's sysfs) and reads it back.
    fn set_rps(&self, ns: &str, dev: &str, cpu: usize) -> anyhow::Result<String> {
        let path = format!("/sys/class/net/{dev}/queues/rx-0/rps_cpus");
        let mask = cpu_mask(cpu);
        ip(&[
            "netns",
            "exec",
            ns,
            "sh",
            "-c",
            "printf '%s\\n' \"$1\" > \"$2\" && cat \"$2\"",
            "sh",
            &mask,
            &path,
        ])
        .map(|s| s.trim().to_string())
        .with_context(|| format!("cannot set RPS on {dev}"))
    }

    /// Namespace name of `side`.
    pub fn ns(&self, side: Side) -> &str {
        match side {
            Side::Host => &self.host_ns,
            Side::Gen => &self.gen_ns,
        }
    }

    /// What was set up (RPS masks), for the results' notes.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Pids of every helper process started so far (all waited for when
    /// the point that started them returned).
    pub fn spawned_pids(&self) -> Vec<u32> {
        self.pids.lock().map(|p| p.clone()).unwrap_or_default()
    }

    /// Starts `lazynet ARGS` in `side`'s namespace.
    fn spawn(&self, side: Side, what: &str, args: &[String]) -> anyhow::Result<Proc> {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", self.ns(side)])
            .arg(&self.exe)
            .args(args);
        let p = Proc::spawn(what, cmd)?;
        if let Ok(mut pids) = self.pids.lock() {
            pids.push(p.pid);
        }
        Ok(p)
    }

    /// Removes the namespaces (and with them the veth pair) now, reporting
    /// the first error.
    pub fn down(mut self) -> anyhow::Result<()> {
        self.remove()
    }

    fn remove(&mut self) -> anyhow::Result<()> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        let mut first = Ok(());
        if lazynet::nic::netns::dev_exists_in(&self.host_ns, &self.host_dev) {
            if let Err(e) = ip(&["-n", &self.host_ns, "link", "del", &self.host_dev]) {
                first = Err(e);
            }
        }
        for ns in [&self.host_ns, &self.gen_ns] {
            if lazynet::nic::netns::netns_exists(ns) {
                if let Err(e) = ip(&["netns", "del", ns]) {
                    if first.is_ok() {
                        first = Err(e);
                    }
                }
            }
        }
        Ok(first?)
    }
}

impl Drop for LinuxNet {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            eprintln!("linux: cleanup: {e:#}");
        }
    }
}

// ---------------------------------------------------------------- child processes

/// A child process whose stdout and stderr lines are collected; killed and
/// waited for on drop.
pub(crate) struct Proc {
    what: String,
    pid: u32,
    child: Option<Child>,
    rx: mpsc::Receiver<String>,
    readers: Vec<JoinHandle<()>>,
    /// Lines read so far (stderr lines prefixed `stderr: `).
    pub(crate) lines: Vec<String>,
}

impl Proc {
    pub(crate) fn spawn(what: &str, mut cmd: Command) -> anyhow::Result<Proc> {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {what}"))?;
        let (tx, rx) = mpsc::channel();
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            let tx = tx.clone();
            readers.push(std::thread::spawn(move || {
                for l in BufReader::new(out).lines().map_while(Result::ok) {
                    let _ = tx.send(l);
                }
            }));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(std::thread::spawn(move || {
                for l in BufReader::new(err).lines().map_while(Result::ok) {
                    let _ = tx.send(format!("stderr: {l}"));
                }
            }));
        }
        Ok(Proc {
            what: what.to_string(),
            pid: child.id(),
            child: Some(child),
            rx,
            readers,
            lines: Vec::new(),
        })
    }

    /// Waits (bounded) for a stdout line equal to `line`.
    fn wait_line(&mut self, line: &str, timeout: Duration) -> anyhow::Result<()> {
        let end = Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(l) => {
                    let hit = l == line;
                    self.lines.push(l);
                    if hit {
                        return Ok(());
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    bail!(
                        "{}: no `{line}` within {timeout:?}: {:?}",
                        self.what,
                        self.lines
                    )
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    bail!("{}: exited before `{line}`: {:?}", self.what, self.lines)
                }
            }
        }
    }

    /// Waits (bounded) for the exit; kills it at the bound. Then collects
    /// the remaining output.
    fn wait_exit(&mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        let Some(child) = self.child.as_mut() else {
            bail!("{}: already reaped", self.what);
        };
        let end = Instant::now() + timeout;
        let status = loop {
            if let Some(s) = child.try_wait()? {
                break s;
            }
            if Instant::now() >= end {
                let _ = child.kill();
                let _ = child.wait();
                self.child = None;
                self.collect();
                bail!("{}: still running after {timeout:?}: killed", self.what);
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        self.child = None;
        self.collect();
        Ok(status)
    }

    /// SIGTERM, then [`Self::wait_exit`] with a grace period.
    fn terminate(&mut self) -> anyhow::Result<ExitStatus> {
        if let Some(child) = self.child.as_mut() {
            if child.try_wait()?.is_none() {
                // Our own child, not reaped yet (try_wait said it runs), so
                // the pid cannot have been reused.
                lazynet::sys::signal(self.pid, libc::SIGTERM);
            }
        }
        self.wait_exit(TERM_GRACE)
    }

    /// Joins the readers (the pipes are at EOF once the child is gone) and
    /// takes the rest of the lines.
    fn collect(&mut self) {
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        while let Ok(l) = self.rx.try_recv() {
            self.lines.push(l);
        }
    }

    /// Runs to completion (bounded) and checks the exit status.
    pub(crate) fn finish(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let s = self.wait_exit(timeout)?;
        if !s.success() {
            bail!("{}: {s}: {:?}", self.what, self.lines);
        }
        Ok(())
    }

    /// The first stdout line starting with `prefix`.
    fn line(&self, prefix: &str) -> anyhow::Result<&str> {
        self.lines
            .iter()
            .find(|l| l.starts_with(prefix))
            .map(String::as_str)
            .with_context(|| format!("{}: no `{prefix}` line in {:?}", self.what, self.lines))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
    }
}

// ---------------------------------------------------------------- kernel counters

/// The UDP counters of `/proc/net/snmp` (per namespace).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpCounters {
    /// Datagrams delivered to sockets.
    pub in_datagrams: u64,
    /// Datagrams to a port nobody listens on.
    pub no_ports: u64,
    /// Datagrams dropped on receive (includes the two below).
    pub in_errors: u64,
    /// Dropped because the socket's receive buffer was full.
    pub rcvbuf_errors: u64,
    /// Dropped for a bad checksum.
    pub in_csum_errors: u64,
}

/// Parses the `Udp:` header and value lines of `/proc/net/snmp`.
pub fn parse_snmp_udp(text: &str) -> Option<UdpCounters> {
    let mut lines = text.lines().filter(|l| l.starts_with("Udp: "));
    let names: Vec<&str> = lines.next()?.split_whitespace().skip(1).collect();
    let values: Vec<u64> = lines
        .next()?
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    if names.len() != values.len() {
        return None;
    }
    let get = |n: &str| {
        names
            .iter()
            .position(|x| *x == n)
            .map(|i| values[i])
            .unwrap_or(0)
    };
    Some(UdpCounters {
        in_datagrams: get("InDatagrams"),
        no_ports: get("NoPorts"),
        in_errors: get("InErrors"),
        rcvbuf_errors: get("RcvbufErrors"),
        in_csum_errors: get("InCsumErrors"),
    })
}

/// Per-CPU `dropped` column (the second, hex) of `/proc/net/softnet_stat`:
/// packets dropped because the CPU's backlog was full.
pub fn parse_softnet_dropped(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(|v| u64::from_str_radix(v, 16).unwrap_or(0))
        .collect()
}

/// Per-CPU softirq time (USER_HZ ticks) from `/proc/stat` (`cpuN` lines,
/// 7th field), indexed by CPU number.
pub fn parse_stat_softirq(text: &str) -> Vec<u64> {
    let mut v = Vec::new();
    for l in text.lines() {
        let mut f = l.split_whitespace();
        let Some(name) = f.next() else { continue };
        let Some(cpu) = name
            .strip_prefix("cpu")
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let t = f.nth(6).and_then(|x| x.parse().ok()).unwrap_or(0);
        if v.len() <= cpu {
            v.resize(cpu + 1, 0);
        }
        v[cpu] = t;
    }
    v
}

/// Per-CPU `NET_RX` softirq counts from `/proc/softirqs`.
pub fn parse_softirqs_net_rx(text: &str) -> Vec<u64> {
    text.lines()
        .find(|l| l.trim_start().starts_with("NET_RX:"))
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Global per-CPU counters (not per namespace) at one moment.
#[derive(Clone, Debug, Default)]
pub(crate) struct CpuSnap {
    softirq_ticks: Vec<u64>,
    net_rx: Vec<u64>,
    backlog_dropped: Vec<u64>,
}

impl CpuSnap {
    pub(crate) fn now() -> Self {
        let rd = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        CpuSnap {
            softirq_ticks: parse_stat_softirq(&rd("/proc/stat")),
            net_rx: parse_softirqs_net_rx(&rd("/proc/softirqs")),
            backlog_dropped: parse_softnet_dropped(&rd("/proc/net/softnet_stat")),
        }
    }
}

fn deltas(a: &[u64], b: &[u64]) -> Vec<u64> {
    b.iter()
        .zip(a.iter().chain(std::iter::repeat(&0)))
        .map(|(b, a)| b.saturating_sub(*a))
        .collect()
}

/// Where the kernel's softirq work ran during a point (global counters:
/// the other engineers' runs on this machine show up in them too).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SoftirqShare {
    /// Share of all softirq time (`/proc/stat`) that was on [`Role::Server`]
    /// (NaN if no softirq tick was counted).
    pub time_on_host: f64,
    /// Softirq ticks (USER_HZ) on [`Role::Server`] and on all CPUs.
    pub host_ticks: u64,
    /// Softirq ticks on all CPUs.
    pub all_ticks: u64,
    /// Share of `NET_RX` softirq runs on [`Role::Server`] (NaN if none).
    pub net_rx_on_host: f64,
}

impl SoftirqShare {
    /// A short phrase for notes.
    pub fn summary(&self) -> String {
        if self.all_ticks == 0 {
            return "no softirq time sampled".into();
        }
        format!(
            "softirq time on CPU {}: {:.0}% ({} of {} ticks), NET_RX runs there: {:.0}%",
            Role::Server.cpu(),
            self.time_on_host * 100.0,
            self.host_ticks,
            self.all_ticks,
            self.net_rx_on_host * 100.0
        )
    }

    pub(crate) fn between(a: &CpuSnap, b: &CpuSnap) -> Self {
        let t = deltas(&a.softirq_ticks, &b.softirq_ticks);
        let r = deltas(&a.net_rx, &b.net_rx);
        let host = Role::Server.cpu();
        let share = |v: &[u64]| {
            let all: u64 = v.iter().sum();
            v.get(host).copied().unwrap_or(0) as f64 / all as f64
        };
        SoftirqShare {
            time_on_host: share(&t),
            host_ticks: t.get(host).copied().unwrap_or(0),
            all_ticks: t.iter().sum(),
            net_rx_on_host: share(&r),
        }
    }
}

// ---------------------------------------------------------------- output parsing

/// `key=value` from a helper's line.
fn kv<T: std::str::FromStr>(line: &str, key: &str) -> anyhow::Result<T> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no {key}= in {line:?}"))
}

/// What `lazynet-lab loadgen udp` printed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LoadgenSummary {
    /// Datagrams the schedule handed to the socket.
    pub offered: u64,
    /// Datagrams the kernel took.
    pub sent: u64,
    /// Datagrams the kernel refused at once (counted, not retried).
    pub dropped: u64,
    /// Datagrams the generator could not offer in time.
    pub shortfall: u64,
    /// The generator's window, seconds.
    pub seconds: f64,
}

/// Parses the summary `loadgen::udp_cmd` prints (`print_stats`).
pub fn parse_loadgen(text: &str) -> anyhow::Result<LoadgenSummary> {
    let after = |key: &str| -> anyhow::Result<u64> {
        let mut w = text.split_whitespace();
        while let Some(x) = w.next() {
            if x == key {
                if let Some(v) = w.next().and_then(|v| v.parse().ok()) {
                    return Ok(v);
                }
            }
        }
        bail!("loadgen output has no `{key} N`: {text:?}")
    };
    let seconds = text
        .split_once(" pps, ")
        .and_then(|(_, r)| r.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("loadgen output has no duration: {text:?}"))?;
    Ok(LoadgenSummary {
        offered: after("offered")?,
        sent: after("sent")?,
        dropped: after("dropped")?,
        shortfall: after("shortfall")?,
        seconds,
    })
}

pub(crate) fn loadgen_args(dst: SocketAddrV4, rate: u64, seconds: f64) -> Vec<String> {
    vec![
        "loadgen".into(),
        "udp".into(),
        "--dst".into(),
        dst.to_string(),
        "--rate".into(),
        rate.to_string(),
        "--seconds".into(),
        format!("{seconds}"),
        "--size".into(),
        LOAD_PAYLOAD.to_string(),
        "--cpu".into(),
        Role::Client.cpu().to_string(),
    ]
}

fn port() -> u16 {
    // Ports are per namespace; distinct ones only make logs readable.
    9000 + (UNIQUE.fetch_add(1, Ordering::Relaxed) % 1000) as u16 * 2
}

// ---------------------------------------------------------------- livelock

/// One point of the livelock curve (LRP Fig. 3).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LivelockPoint {
    /// Datagrams per second the generator offered over its window.
    pub offered_pps: f64,
    /// Datagrams per second the server received (and worked on), over the
    /// generator's window. The count includes what the server drained from
    /// its queues in the [`DRAIN`] after the window (at most a socket or
    /// channel queue's worth).
    pub delivered_pps: f64,
    /// Datagrams offered.
    pub offered: u64,
    /// Datagrams the server received.
    pub delivered: u64,
    /// The generator's window, seconds.
    pub seconds: f64,
    /// Datagrams the generator's kernel refused at once (its socket buffer
    /// or qdisc was full) plus the generator's shortfall.
    pub gen_dropped: u64,
    /// Drops at the socket queue (Linux: `RcvbufErrors` in the host
    /// namespace, after full protocol work; TAP: the stack's channel-full
    /// drops).
    pub sink_drops: u64,
    /// Other receive errors (Linux: `InErrors` − `RcvbufErrors`).
    pub other_errors: u64,
    /// Drops before protocol work: a full per-CPU backlog
    /// (`/proc/net/softnet_stat`, all CPUs; TAP: frames the TAP device's
    /// queue dropped, plus `eager`'s IP-queue drops).
    pub backlog_drops: u64,
    /// Where the softirq time went.
    pub softirq: SoftirqShare,
}

impl LivelockPoint {
    /// A one-line summary for notes and logs.
    pub fn summary(&self) -> String {
        format!(
            "offered {:.0} pps, delivered {:.0} pps ({} of {} in {:.3} s); drops: socket queue {}, backlog {}, sender {}, other {}; {}",
            self.offered_pps,
            self.delivered_pps,
            self.delivered,
            self.offered,
            self.seconds,
            self.sink_drops,
            self.backlog_drops,
            self.gen_dropped,
            self.other_errors,
            self.softirq.summary(),
        )
    }
}

/// Runs one livelock point against Linux: a UDP sink in the host namespace
/// (pinned to [`Role::Server`], `work(work_iters)` per datagram) and `lazynet
/// loadgen udp` at `rate_pps` for `seconds` in the gen namespace (pinned to
/// [`Role::Client`]). Bounded: `seconds` + ~14 s at worst.
pub fn livelock_point(
    net: &LinuxNet,
    rate_pps: u64,
    seconds: f64,
    work_iters: u32,
) -> anyhow::Result<LivelockPoint> {
    check_seconds(seconds)?;
    if rate_pps == 0 {
        bail!("rate must be > 0");
    }
    let port = port();
    let dst = SocketAddrV4::new(HOST_ADDR, port);
    let mut sink = net.spawn(
        Side::Host,
        "udp-sink",
        &sink_args(dst, work_iters, seconds + 30.0),
    )?;
    sink.wait_line("ready", READY_TIMEOUT)?;
    let snmp = || -> anyhow::Result<UdpCounters> {
        let p = format!("/proc/{}/net/snmp", sink.pid);
        let t = std::fs::read_to_string(&p).with_context(|| format!("cannot read {p}"))?;
        parse_snmp_udp(&t).with_context(|| format!("no Udp counters in {p}"))
    };
    let udp0 = snmp()?;
    let cpu0 = CpuSnap::now();
    let mut gen = net.spawn(Side::Gen, "loadgen", &loadgen_args(dst, rate_pps, seconds))?;
    gen.finish(Duration::from_secs_f64(seconds + 10.0))?;
    std::thread::sleep(DRAIN);
    let cpu1 = CpuSnap::now();
    let udp1 = snmp()?;
    sink.terminate()?;
    let g = parse_loadgen(&gen.lines.join("\n"))?;
    let delivered: u64 = kv(sink.line("udp-sink ")?, "received")?;
    let secs = g.seconds.max(1e-9);
    let rcvbuf = udp1.rcvbuf_errors - udp0.rcvbuf_errors;
    Ok(LivelockPoint {
        offered_pps: g.offered as f64 / secs,
        delivered_pps: delivered as f64 / secs,
        offered: g.offered,
        delivered,
        seconds: g.seconds,
        gen_dropped: g.dropped + g.shortfall,
        sink_drops: rcvbuf,
        other_errors: (udp1.in_errors - udp0.in_errors).saturating_sub(rcvbuf),
        backlog_drops: deltas(&cpu0.backlog_dropped, &cpu1.backlog_dropped)
            .iter()
            .sum(),
        softirq: SoftirqShare::between(&cpu0, &cpu1),
    })
}

fn sink_args(bind: SocketAddrV4, work_iters: u32, seconds: f64) -> Vec<String> {
    vec![
        "exp-helper".into(),
        "udp-sink".into(),
        "--bind".into(),
        bind.to_string(),
        "--work-iters".into(),
        work_iters.to_string(),
        "--seconds".into(),
        format!("{seconds}"),
        "--cpu".into(),
        Role::Server.cpu().to_string(),
    ]
}

// ---------------------------------------------------------------- latency

/// One point of the latency-under-load curve (LRP Fig. 4). Latencies are
/// round trips (the paper's), client to echo server and back.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatencyPoint {
    /// Blast rate the generator offered (0 = unloaded).
    pub blast_pps: f64,
    /// Blast datagrams per second the blast sink received.
    pub blast_delivered_pps: f64,
    /// Round-trip percentiles, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// 99.9th percentile, µs.
    pub p999_us: f64,
    /// Largest round trip, µs.
    pub max_us: f64,
    /// Round trips measured.
    pub samples: u64,
    /// Pings without a reply within the timeout (counted, not retried).
    pub lost: u64,
}

impl LatencyPoint {
    /// A one-line summary.
    pub fn summary(&self) -> String {
        format!(
            "blast {:.0} pps (sink got {:.0} pps): RTT p50 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs, max {:.1} µs; {} samples, {} lost",
            self.blast_pps,
            self.blast_delivered_pps,
            self.p50_us,
            self.p99_us,
            self.p999_us,
            self.max_us,
            self.samples,
            self.lost
        )
    }
}

/// Timeout of one ping before it counts as lost.
pub const PING_TIMEOUT_MS: u64 = 50;
/// Pings before the measured window (not recorded).
pub const PING_WARMUP_MS: u64 = 200;

/// Runs one latency point against Linux: a UDP echo server and a blast sink
/// (`work(blast_work_iters)` per datagram), both pinned to [`Role::Server`] in
/// the host namespace; a ping-pong client (one ping outstanding) and `lazynet
/// loadgen udp` at `blast_pps` to the blast sink, both pinned to
/// [`Role::Client`] in the gen namespace. The blast starts before and ends after
/// the client's `seconds`. Bounded: `seconds` + ~20 s at worst.
pub fn latency_point(
    net: &LinuxNet,
    blast_pps: u64,
    seconds: f64,
    blast_work_iters: u32,
) -> anyhow::Result<LatencyPoint> {
    check_seconds(seconds)?;
    let (pe, pb) = (port(), port() + 1);
    let echo_at = SocketAddrV4::new(HOST_ADDR, pe);
    let blast_at = SocketAddrV4::new(HOST_ADDR, pb);
    let bound = seconds + 30.0;
    let mut echo = net.spawn(
        Side::Host,
        "udp-echo",
        &[
            "exp-helper".into(),
            "udp-echo".into(),
            "--bind".into(),
            echo_at.to_string(),
            "--seconds".into(),
            format!("{bound}"),
            "--cpu".into(),
            Role::Server.cpu().to_string(),
        ],
    )?;
    let mut sink = net.spawn(
        Side::Host,
        "udp-sink",
        &sink_args(blast_at, blast_work_iters, bound),
    )?;
    echo.wait_line("ready", READY_TIMEOUT)?;
    sink.wait_line("ready", READY_TIMEOUT)?;
    let client_secs = seconds + PING_WARMUP_MS as f64 / 1000.0;
    let mut gen = if blast_pps > 0 {
        Some(net.spawn(
            Side::Gen,
            "loadgen",
            &loadgen_args(blast_at, blast_pps, client_secs + 0.3),
        )?)
    } else {
        None
    };
    let mut client = net.spawn(
        Side::Gen,
        "ping-client",
        &[
            "exp-helper".into(),
            "ping-client".into(),
            "--dst".into(),
            echo_at.to_string(),
            "--seconds".into(),
            format!("{seconds}"),
            "--warmup-ms".into(),
            PING_WARMUP_MS.to_string(),
            "--timeout-ms".into(),
            PING_TIMEOUT_MS.to_string(),
            "--cpu".into(),
            Role::Client.cpu().to_string(),
        ],
    )?;
    client.finish(Duration::from_secs_f64(client_secs + 10.0))?;
    let (blast, blast_secs) = match gen.as_mut() {
        Some(g) => {
            g.finish(Duration::from_secs_f64(client_secs + 10.0))?;
            let s = parse_loadgen(&g.lines.join("\n"))?;
            (s.offered as f64 / s.seconds.max(1e-9), s.seconds)
        }
        None => (0.0, 0.0),
    };
    std::thread::sleep(DRAIN);
    sink.terminate()?;
    echo.terminate()?;
    let c = client.line("ping-client ")?;
    let us = |k: &str| -> anyhow::Result<f64> { Ok(kv::<u64>(c, k)? as f64 / 1000.0) };
    let received: u64 = kv(sink.line("udp-sink ")?, "received")?;
    Ok(LatencyPoint {
        blast_pps: blast,
        blast_delivered_pps: if blast_secs > 0.0 {
            received as f64 / blast_secs
        } else {
            0.0
        },
        p50_us: us("p50_ns")?,
        p99_us: us("p99_ns")?,
        p999_us: us("p999_ns")?,
        max_us: us("max_ns")?,
        samples: kv(c, "samples")?,
        lost: kv(c, "lost")?,
    })
}
#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "Ip: Forwarding DefaultTTL InReceives\nIp: 2 64 10\nUdp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\nUdp: 120 3 45 7 40 0 5 0 0\nUdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\nUdpLite: 0 0 0 0 0 0 0 0 0\n";

    #[test]
    fn snmp_udp_counters_are_read_by_name() {
        let c = parse_snmp_udp(SNMP).unwrap();
        assert_eq!(
            c,
            UdpCounters {
                in_datagrams: 120,
                no_ports: 3,
                in_errors: 45,
                rcvbuf_errors: 40,
                in_csum_errors: 5,
            }
        );
        // UdpLite's lines are not Udp's.
        assert!(parse_snmp_udp("UdpLite: InDatagrams\nUdpLite: 1\n").is_none());
        assert!(parse_snmp_udp("Udp: InDatagrams NoPorts\nUdp: 1\n").is_none());
        assert!(parse_snmp_udp("").is_none());
    }

    #[test]
    fn snmp_of_this_machine_parses() {
        let t = std::fs::read_to_string("/proc/net/snmp").unwrap();
        assert!(parse_snmp_udp(&t).is_some());
    }

    #[test]
    fn softnet_stat_dropped_column_is_hex() {
        let t = "0000a000 0000001f 00000000 00000000\n00000010 000000ff 00000002 00000000\n";
        assert_eq!(parse_softnet_dropped(t), vec![31, 255]);
        let live = std::fs::read_to_string("/proc/net/softnet_stat").unwrap();
        assert_eq!(
            parse_softnet_dropped(&live).len(),
            lazynet::sys::cpus_online()
        );
    }

    #[test]
    fn stat_softirq_column_per_cpu() {
        let t = "cpu  10 0 20 300 0 0 9 0 0 0\ncpu0 5 0 10 150 0 0 4 0 0 0\ncpu1 5 0 10 150 0 0 5 0 0 0\nintr 1 2\n";
        assert_eq!(parse_stat_softirq(t), vec![4, 5]);
        let live = std::fs::read_to_string("/proc/stat").unwrap();
        assert_eq!(parse_stat_softirq(&live).len(), lazynet::sys::cpus_online());
    }

    #[test]
    fn softirqs_net_rx_row() {
        let t = "                    CPU0       CPU1\n          HI:          1          0\n      NET_TX:          7          8\n      NET_RX:     123456        789\n";
        assert_eq!(parse_softirqs_net_rx(t), vec![123456, 789]);
        assert!(parse_softirqs_net_rx("").is_empty());
    }

    #[test]
    fn softirq_share_is_the_host_cpus_part_of_the_deltas() {
        let a = CpuSnap {
            softirq_ticks: vec![10, 10],
            net_rx: vec![0, 0],
            backlog_dropped: vec![0, 0],
        };
        let b = CpuSnap {
            softirq_ticks: vec![12, 18],
            net_rx: vec![1, 3],
            backlog_dropped: vec![0, 4],
        };
        let s = SoftirqShare::between(&a, &b);
        assert_eq!((s.host_ticks, s.all_ticks), (8, 10));
        assert!((s.time_on_host - 0.8).abs() < 1e-9);
        assert!((s.net_rx_on_host - 0.75).abs() < 1e-9);
        assert!(SoftirqShare::between(&a, &a).time_on_host.is_nan());
        assert_eq!(deltas(&a.backlog_dropped, &b.backlog_dropped), vec![0, 4]);
    }

    #[test]
    fn loadgen_summary_parses_what_udp_cmd_prints() {
        // The format of loadgen::print_stats.
        let t = "loadgen udp -> 10.203.0.1:9000: rate 50000 pps, 1.000 s\n  offered 50001  sent 49990  dropped 11 (no buffer 0, refused 11)  shortfall 3  calls 1600\n  offered 50001 pps  achieved 49990 pps\n";
        let s = parse_loadgen(t).unwrap();
        assert_eq!(
            s,
            LoadgenSummary {
                offered: 50001,
                sent: 49990,
                dropped: 11,
                shortfall: 3,
                seconds: 1.0,
            }
        );
        assert!(parse_loadgen("loadgen: nothing").is_err());
    }

    #[test]
    fn key_values_of_helper_lines() {
        let l = "ping-client samples=10 lost=2 p50_ns=9000";
        assert_eq!(kv::<u64>(l, "samples").unwrap(), 10);
        assert_eq!(kv::<u64>(l, "p50_ns").unwrap(), 9000);
        assert!(kv::<u64>(l, "p99_ns").is_err());
        assert!(kv::<u64>(l, "p50").is_err(), "whole keys only");
    }

    #[test]
    fn masks_and_bounds() {
        assert_eq!(cpu_mask(0), "1");
        assert_eq!(cpu_mask(1), "2");
        assert_eq!(cpu_mask(5), "20");
        assert!(check_seconds(0.0).is_err());
        assert!(check_seconds(f64::NAN).is_err());
        assert!(check_seconds(MAX_SECONDS + 1.0).is_err());
        assert!(check_seconds(1.5).is_ok());
    }

    #[test]
    fn loadgen_arguments() {
        let a = loadgen_args(SocketAddrV4::new(HOST_ADDR, 9), 1000, 1.5);
        assert_eq!(a[..2], ["loadgen", "udp"]);
        assert!(a.windows(2).any(|w| w == ["--seconds", "1.5"]));
    }

    fn sh(script: &str) -> Proc {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        Proc::spawn("sh", c).unwrap()
    }

    fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
    }

    #[test]
    fn proc_reads_lines_terminates_and_is_bounded() {
        // Ready, then blocks until SIGTERM.
        let mut p = sh("echo one; echo oops >&2; echo ready; exec sleep 30");
        p.wait_line("ready", Duration::from_secs(5)).unwrap();
        let t0 = Instant::now();
        let st = p.terminate().unwrap();
        assert!(!st.success(), "killed by SIGTERM");
        assert!(t0.elapsed() < TERM_GRACE, "SIGTERM was enough");
        assert_eq!(p.line("one").unwrap(), "one");
        assert!(p.lines.iter().any(|l| l == "stderr: oops"));
        assert!(p.line("two").is_err());
        // Exits before the line: an error, not a hang.
        let mut p = sh("echo nope");
        assert!(p.wait_line("ready", Duration::from_secs(5)).is_err());
        // Runs past its bound: killed, an error.
        let mut p = sh("exec sleep 30");
        let pid = p.pid;
        assert!(p.finish(Duration::from_millis(100)).is_err());
        assert!(!alive(pid));
        // A failing exit status is an error carrying the output.
        let mut p = sh("echo why; exit 3");
        let e = p.finish(Duration::from_secs(5)).unwrap_err().to_string();
        assert!(e.contains("why"), "{e}");
        // Dropped while running: killed and reaped.
        let p = sh("exec sleep 30");
        let pid = p.pid;
        drop(p);
        assert!(!alive(pid));
    }
}
