//! `lazynet-lab bench lrp-share`: the claim the multi-process placement
//! exists for (LRP §2, §4.3): protocol work is charged to the process it
//! is for, so the scheduler's shares hold, protocol work included.
//!
//! Two UDP echo applications, each spending the same application work per
//! datagram, share CPU 1 under cgroup `cpu.shares` 2048 and 1024 (2:1);
//! both are offered the same rate, more than CPU 1 can serve. A paced
//! client on CPU 0 counts the echoes per application; each application's
//! CPU time comes from `/proc/PID/task/*/schedstat`.
//!
//! * **lazynet**: `lazynet daemon --nic wire` on CPU 0 (it only
//!   demultiplexes and copies); each application is attached, so its IP and
//!   UDP work run in its own process, inside its own cgroup.
//! * **Linux**: the same two applications on UDP sockets, and the client,
//!   in a network namespace of their own whose loopback steers receive
//!   processing to CPU 1 (RPS), as a NIC interrupting the applications'
//!   CPU would. Linux does that protocol work in softirq context and
//!   charges it to whatever runs there (or to nobody); CPU 1's softirq
//!   time during the window is reported beside the shares.
//!
//! Needs root (cgroups); the groups are created and removed here. The
//! applications run on [`Role::Server`]'s core, the client on
//! [`Role::Client`]'s and the daemon on [`Role::ShareDaemon`]'s (CPU 1, 0
//! and 0 on two cores). The Linux series' client (`exp-helper
//! share-client`) stays here: it is the lazynet client's pacing on Linux
//! sockets.
//!
//! **Owns:** the two cgroups, the namespace, the daemon and the processes
//! it starts (removed and stopped when a run ends). **May not touch:** the
//! stack's internals (public API only); other cgroups.

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket as StdUdp};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use lazynet::nic::wirepair::{Side, WireEnd};
use lazynet::nic::Nic;
use lazynet::socket::UdpSocket;
use lazynet::stack::{AreaNic, Stack, StackConfig};

use crate::infra::cpus::Role;
use crate::infra::procs::{cpu_ns, exe, start, start_in, Ns, Proc};
use crate::infra::report::median;

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 2);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 1);
const PORTS: [u16; 2] = [7001, 7002];
const SHARES: [u32; 2] = [2048, 1024];
const CGROUP: &str = "/sys/fs/cgroup/cpu";

/// The two applications on CPU 1, each in its cgroup (attached to the
/// daemon at `daemon`, or on Linux sockets), inside namespace `ns` if given.
fn start_apps(
    ns: Option<&str>,
    daemon: Option<&str>,
    work: u32,
) -> anyhow::Result<([Group; 2], Vec<Proc>)> {
    let groups = [
        Group::new("lazynet-share-a", SHARES[0])?,
        Group::new("lazynet-share-b", SHARES[1])?,
    ];
    let lab = std::env::current_exe()?;
    let w = work.to_string();
    let mut apps = Vec::new();
    for (i, g) in groups.iter().enumerate() {
        let port = PORTS[i].to_string();
        let mut args = vec![
            "exp-helper",
            "share-echo",
            "--port",
            &port,
            "--work-iters",
            &w,
        ];
        if let Some(d) = daemon {
            args.extend_from_slice(&["--daemon", d]);
        }
        let (p, _) = start_in(ns, Role::Server.cpu(), &lab, &args)?;
        g.add(p.0.id())?;
        apps.push(p);
    }
    Ok((groups, apps))
}

/// A cgroup (v1 `cpu`) with `shares`, removed on drop.
struct Group(PathBuf);

impl Group {
    fn new(name: &str, shares: u32) -> anyhow::Result<Group> {
        let p = Path::new(CGROUP).join(name);
        let _ = std::fs::remove_dir(&p);
        std::fs::create_dir(&p).with_context(|| format!("mkdir {}", p.display()))?;
        std::fs::write(p.join("cpu.shares"), shares.to_string())?;
        Ok(Group(p))
    }
    fn add(&self, pid: u32) -> anyhow::Result<()> {
        std::fs::write(self.0.join("cgroup.procs"), pid.to_string())?;
        Ok(())
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // The members have exited by now (dropped first).
        for _ in 0..50 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `cpu`'s softirq time so far, in ns (`/proc/stat`, USER_HZ ticks).
fn softirq_ns(cpu: usize) -> u64 {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let tag = format!("cpu{cpu} ");
    s.lines()
        .find(|l| l.starts_with(&tag))
        .and_then(|l| l.split_whitespace().nth(7)?.parse::<u64>().ok())
        .map_or(0, |t| t * 10_000_000)
}

/// The helper: a UDP echo application with `work_iters` of work per
/// datagram, attached to the daemon at `daemon` or (without) on a Linux
/// socket; until SIGTERM or `seconds`.
pub fn share_echo(
    daemon: Option<&Path>,
    port: u16,
    work_iters: u32,
    seconds: f64,
) -> anyhow::Result<()> {
    let stop = lazynet_cli::util::stop_flag()?;
    let end = Instant::now() + Duration::from_secs_f64(seconds.clamp(0.1, 600.0));
    let mut x = 1u64;
    let mut buf = vec![0u8; 2048];
    let mut echoed = 0u64;
    match daemon {
        Some(p) => {
            let mut st: Stack<AreaNic> = Stack::attach(p, StackConfig::default())?;
            let u = UdpSocket::bind(&mut st, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))?;
            println!("ready");
            while !stop.load(Ordering::Relaxed) && Instant::now() < end {
                let now = st.now();
                st.poll(now);
                let mut served = 0;
                while served < 64 {
                    let Ok((n, from)) = u.recv_from(&mut st, &mut buf) else {
                        break;
                    };
                    x = crate::infra::exp::work(work_iters, x);
                    let _ = u.send_to(&mut st, &buf[..n], from);
                    served += 1;
                }
                echoed += served;
                if served == 0 {
                    st.nic_mut().wait(Some(1_000_000));
                }
            }
        }
        None => {
            let s = StdUdp::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))?;
            s.set_read_timeout(Some(Duration::from_millis(20)))?;
            println!("ready");
            while !stop.load(Ordering::Relaxed) && Instant::now() < end {
                if let Ok((n, from)) = s.recv_from(&mut buf) {
                    x = crate::infra::exp::work(work_iters, x);
                    let _ = s.send_to(&buf[..n], from);
                    echoed += 1;
                }
            }
        }
    }
    std::hint::black_box(x);
    println!("share-echo echoed={echoed}");
    Ok(())
}

/// One series' result.
#[derive(Clone, Copy, Debug, Default)]
struct Share {
    /// Echoes/s per application.
    rate: [f64; 2],
    /// CPU seconds per second per application.
    cpu: [f64; 2],
    /// CPU 1's softirq time per second.
    softirq: f64,
}

impl Share {
    fn cpu_ratio(&self) -> f64 {
        self.cpu[0] / self.cpu[1].max(1e-9)
    }
    fn rate_ratio(&self) -> f64 {
        self.rate[0] / self.rate[1].max(1e-9)
    }
}

/// A paced client: every millisecond `per_ms` datagrams to each port, then
/// replies until the next tick. `send` sends one datagram to port index
/// `i` (false: not taken now); `recv` returns the port index of a reply.
fn paced(
    per_ms: usize,
    warm: Duration,
    window: Duration,
    mut send: impl FnMut(usize, &[u8]) -> bool,
    mut recv: impl FnMut(&mut [u8]) -> Option<usize>,
    mut idle: impl FnMut(Duration),
    mut at_start: impl FnMut(),
) -> [u64; 2] {
    let mut got = [0u64; 2];
    let payload = [0x5au8; 64];
    let mut buf = [0u8; 2048];
    let t0 = Instant::now();
    let mut started = false;
    let mut tick = t0;
    while t0.elapsed() < warm + window {
        if !started && t0.elapsed() >= warm {
            started = true;
            got = [0; 2];
            at_start();
        }
        for _ in 0..per_ms {
            for i in 0..2 {
                let _ = send(i, &payload);
            }
        }
        tick += Duration::from_millis(1);
        while Instant::now() < tick {
            match recv(&mut buf) {
                Some(i) => got[i] += 1,
                None => idle(tick.saturating_duration_since(Instant::now())),
            }
        }
    }
    got
}

fn lazynet_share(
    per_ms: usize,
    work: u32,
    warm: Duration,
    window: Duration,
) -> anyhow::Result<Share> {
    let dir = std::env::temp_dir().join(format!("lazynet-share-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let sock = dir.join("ctl.sock");
    let s = sock.to_str().context("path")?;
    let (_d, lines) = start(
        Role::ShareDaemon.cpu(),
        &exe("lazynet")?,
        &["daemon", "--nic", "wire", "--socket", s],
    )?;
    let (groups, apps) = start_apps(None, Some(s), work)?;
    let path = lines
        .iter()
        .find_map(|l| l.strip_prefix("wire "))
        .context("no wire line")?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    let end = WireEnd::attach(OwnedFd::from(f), Side::B)?;
    Role::Client.pin();
    let mut st = Stack::new(
        end,
        StackConfig {
            addr: CLIENT,
            prefix_len: 24,
            seed: 3,
            ..StackConfig::default()
        },
    );
    let u = UdpSocket::bind(&mut st, SocketAddrV4::new(CLIENT, 0))?;
    let pids = [apps[0].0.id(), apps[1].0.id()];
    let mut c0 = [0u64; 2];
    let mut t_start = Instant::now();
    let st_cell = std::cell::RefCell::new(st);
    let got = paced(
        per_ms,
        warm,
        window,
        |i, p| {
            let mut st = st_cell.borrow_mut();
            u.send_to(&mut st, p, SocketAddrV4::new(SERVER, PORTS[i]))
                .is_ok()
        },
        |b| {
            let mut st = st_cell.borrow_mut();
            let now = st.now();
            st.poll(now);
            let (_, from) = u.recv_from(&mut st, b).ok()?;
            PORTS.iter().position(|&p| p == from.port())
        },
        |left| {
            st_cell
                .borrow_mut()
                .nic_mut()
                .wait(Some(left.as_nanos() as u64));
        },
        || {
            c0 = [cpu_ns(pids[0]), cpu_ns(pids[1])];
            t_start = Instant::now();
        },
    );
    let secs = t_start.elapsed().as_secs_f64();
    let c1 = [cpu_ns(pids[0]), cpu_ns(pids[1])];
    if crate::infra::report::verbose() {
        eprint!("{}", lazynet::daemon::stats(&sock).unwrap_or_default());
    }
    drop(apps);
    drop(groups);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Share {
        rate: [got[0] as f64 / secs, got[1] as f64 / secs],
        cpu: [
            (c1[0] - c0[0]) as f64 / 1e9 / secs,
            (c1[1] - c0[1]) as f64 / 1e9 / secs,
        ],
        softirq: 0.0,
    })
}

/// The helper: the paced client of the Linux series, on a UDP socket to
/// 127.0.0.1; prints `measure` when the window starts and
/// `share-client a=N b=M secs=S` at its end.
pub fn share_client(per_ms: usize, warm_ms: u64, seconds: f64) -> anyhow::Result<()> {
    let s = StdUdp::bind("127.0.0.1:0")?;
    s.set_nonblocking(true)?;
    let mut t_start = Instant::now();
    let got = paced(
        per_ms,
        Duration::from_millis(warm_ms),
        Duration::from_secs_f64(seconds),
        |i, p| {
            s.send_to(p, SocketAddrV4::new(Ipv4Addr::LOCALHOST, PORTS[i]))
                .is_ok()
        },
        |b| {
            let (_, from) = s.recv_from(b).ok()?;
            PORTS.iter().position(|&p| p == from.port())
        },
        |left| std::thread::sleep(left.min(Duration::from_micros(200))),
        || {
            println!("measure");
            let _ = std::io::Write::flush(&mut std::io::stdout());
            t_start = Instant::now();
        },
    );
    println!(
        "share-client a={} b={} secs={:.6}",
        got[0],
        got[1],
        t_start.elapsed().as_secs_f64()
    );
    Ok(())
}

fn linux_share(
    per_ms: usize,
    work: u32,
    warm: Duration,
    window: Duration,
) -> anyhow::Result<Share> {
    let ns = Ns::new("lzshare", Role::Server.mask())?;
    let (groups, apps) = start_apps(Some(&ns.0), None, work)?;
    let lab = std::env::current_exe()?;
    let pids = [apps[0].0.id(), apps[1].0.id()];
    let mut c = Command::new("ip")
        .args(["netns", "exec", &ns.0, "taskset", "-c"])
        .arg(Role::Client.cpu().to_string())
        .arg(&lab)
        .args([
            "exp-helper",
            "share-client",
            "--per-ms",
            &per_ms.to_string(),
        ])
        .args(["--warm-ms", &warm.as_millis().to_string()])
        .args(["--seconds", &window.as_secs_f64().to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut out = BufReader::new(c.stdout.take().context("stdout")?);
    let client = Proc(c);
    let (mut c0, mut s0) = ([0u64; 2], 0);
    let mut counts = None;
    let mut l = String::new();
    while out.read_line(&mut l)? > 0 {
        let t = l.trim();
        if t == "measure" {
            c0 = [cpu_ns(pids[0]), cpu_ns(pids[1])];
            s0 = softirq_ns(Role::Server.cpu());
        } else if let Some(rest) = t.strip_prefix("share-client ") {
            counts = Some(rest.to_string());
            break;
        }
        l.clear();
    }
    let c1 = [cpu_ns(pids[0]), cpu_ns(pids[1])];
    let s1 = softirq_ns(Role::Server.cpu());
    let counts = counts.context("the client printed no counts")?;
    let field = |k: &str| -> anyhow::Result<f64> {
        counts
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(k))
            .context("client output")?
            .parse::<f64>()
            .map_err(Into::into)
    };
    let (a, b, secs) = (field("a=")?, field("b=")?, field("secs=")?);
    drop(client);
    drop(apps);
    drop(groups);
    drop(ns);
    Ok(Share {
        rate: [a / secs, b / secs],
        cpu: [
            (c1[0] - c0[0]) as f64 / 1e9 / secs,
            (c1[1] - c0[1]) as f64 / 1e9 / secs,
        ],
        softirq: (s1 - s0) as f64 / 1e9 / secs,
    })
}

/// `lazynet-lab bench lrp-share`: one point per (rate, work) pair.
pub fn bench(seconds: f64, runs: usize, points: &[(u64, u32)], out: &Path) -> anyhow::Result<()> {
    anyhow::ensure!(lazynet::sys::is_root(), "lrp-share needs root (cgroups)");
    anyhow::ensure!(
        Path::new(CGROUP).join("cpu.shares").exists(),
        "no cgroup v1 cpu controller at {CGROUP}"
    );
    std::fs::create_dir_all(out)?;
    let (warm, window) = (Duration::from_secs(1), Duration::from_secs_f64(seconds));
    let names = ["lazynet multi-process", "Linux"];
    let mut csv = String::from(
        "series,point,run,app,shares,offered_per_s,work_iters,echoes_per_s,cpu_s_per_s,cpu1_softirq_s_per_s\n",
    );
    let mut summary = String::new();
    let mut cats = Vec::new();
    let mut bars: Vec<(String, Vec<f64>)> =
        names.iter().map(|n| (n.to_string(), Vec::new())).collect();
    for (pi, &(rate, work)) in points.iter().enumerate() {
        let per_ms = (rate / 1000).max(1) as usize;
        let mut res: [Vec<Share>; 2] = [Vec::new(), Vec::new()];
        for run in 0..runs.max(1) {
            for k in 0..2 {
                let which = (k + run) % 2;
                let r = if which == 0 {
                    lazynet_share(per_ms, work, warm, window)?
                } else {
                    linux_share(per_ms, work, warm, window)?
                };
                for a in 0..2 {
                    let line = format!(
                        "{},{pi},{run},{},{},{},{work},{:.0},{:.3},{:.3}\n",
                        names[which],
                        ["A", "B"][a],
                        SHARES[a],
                        per_ms * 1000,
                        r.rate[a],
                        r.cpu[a],
                        r.softirq
                    );
                    print!("{line}");
                    csv.push_str(&line);
                }
                res[which].push(r);
            }
        }
        summary.push_str(&format!(
            "point {pi}: {} datagrams/s offered to each application, {work} work iterations per datagram\n",
            per_ms * 1000
        ));
        for (i, name) in names.iter().enumerate() {
            let cpu = median(&res[i].iter().map(Share::cpu_ratio).collect::<Vec<_>>());
            let rr = median(&res[i].iter().map(Share::rate_ratio).collect::<Vec<_>>());
            let tot = median(
                &res[i]
                    .iter()
                    .map(|s| s.cpu[0] + s.cpu[1])
                    .collect::<Vec<_>>(),
            );
            let echoes = median(
                &res[i]
                    .iter()
                    .map(|s| s.rate[0] + s.rate[1])
                    .collect::<Vec<_>>(),
            );
            let sirq = median(&res[i].iter().map(|s| s.softirq).collect::<Vec<_>>());
            let apps = Role::Server.cpu();
            summary.push_str(&format!(
                "  {name}: CPU A:B {cpu:.2}:1, echoes A:B {rr:.2}:1 (shares 2:1; goal 1.80–2.20 while CPU {apps} is saturated); the applications' CPU {tot:.2} s/s, {echoes:.0} echoes/s{}\n",
                if i == 1 { format!(", CPU {apps} softirq {sirq:.3} s/s") } else { String::new() }
            ));
            bars[i].1.push(cpu);
            bars[i].1.push(rr);
        }
        cats.push(format!("CPU A:B, work {work}"));
        cats.push(format!("echoes A:B, work {work}"));
    }
    print!("{summary}");
    std::fs::write(out.join("lrp-share.csv"), &csv)?;
    let meta = crate::infra::report::txt_head(&crate::infra::report::command_line())
        + &format!("{seconds} s windows after 1 s of warm-up, {runs} runs per point, cpu.shares 2048:1024\n")
        + &summary;
    std::fs::write(out.join("lrp-share.txt"), meta)?;
    crate::infra::plot::bar_chart(
        &out.join("lrp-share.png"),
        "Two applications with cpu.shares 2:1 (goal: 2)",
        "",
        "ratio A:B",
        &cats,
        &bars,
    )?;
    Ok(())
}
