//! `lazynet-lab fairness`: LRP Table 2 — the CPU share of a compute-bound
//! worker that shares one core with two busy UDP RPC servers, per receive
//! mode.
//!
//! **Setup.** On [`Role::Server`]: the host runtime
//! ([`lazynet::host::Host`]: one stack and the `sched` executor, the
//! receive task at interrupt priority, the placement of each mode) with
//! three best-effort owners — `worker` (a task doing
//! [`exp::work`] in chunks of [`WORKER_CHUNK`] rounds until a fixed
//! amount of work is done; the amount is calibrated once per run and is the
//! same in every mode) and `rpc1`, `rpc2` (a task each, woken when its
//! socket has datagrams: up to [`REQUESTS_PER_ITERATION`] times receive a
//! request, `work(W)`, reply). On [`Role::Client`]: a lazynet
//! client stack on the other end of the in-memory wire keeps [`WINDOW`]
//! requests outstanding per server (closed loop, bounded, self-healing
//! after a loss), written from prebuilt frames so that one core can keep
//! two CPU-bound servers busy; in `ni-lrp` the same thread steps the NI
//! engine. So both servers are always busy but the host is not overloaded
//! — the paper's setting (§4.2: "the server is not operating under
//! conditions of overload").
//!
//! **What is measured.** Per mode: the worker's share = the time its task
//! really ran (`OwnerUsage::task_ns`, the executor's accounting of real
//! time, not what was charged to it) / its elapsed time; its elapsed
//! seconds; RPCs per second over the same interval; and the per-owner
//! accounting table (real vs charged).
//!
//! **Why the effect is real.** In `eager` and `early-demux` the receive
//! task runs IP input and the UDP checksum of every request at interrupt
//! priority, and the executor charges that time to whichever owner it
//! interrupted. The decayed-usage scheduler equalizes *charged* time, so
//! the owners are billed for the servers' packets and the worker does less
//! of its own work than 1/3. In the lazy modes the same checks run inside
//! the servers' `recv` and are charged to them; only demultiplexing is left
//! in the receive task (`soft-lrp`) or none (`ni-lrp`). The requests are
//! [`REQUEST_BYTES`] = 1472 bytes, one full Ethernet frame: the UDP
//! checksum over them is the real protocol work that moves between the
//! receive loop and the receiver, and a full frame is the most of it a
//! request can carry without IP fragmentation (reassembly runs in the
//! receive loop in every mode, which would blur the comparison). `W`
//! ([`RPC_WORK`]) is small — the paper's "Fast" RPC — so that protocol
//! work is a visible part of each request; nothing artificial is added to
//! any path. Expect a smaller gap than the paper's: this stack's receive
//! path costs a small fraction of 4.4BSD's on a 60 MHz SPARC
//! (docs/PERFORMANCE.md).
//!
//! **Checks.** Deterministic: where the IP/UDP checks ran, per mode.
//! Shares, judged only when the host and client threads were on their
//! CPUs at least 90% of the time ([`QUIET`]; otherwise
//! reported as not judged): full runs — the lazy modes within 10% of 1/3
//! and eager visibly (3 points) below them; quick runs — ni-lrp not below
//! 1/3 by more than 25% (not starved; a short run may not keep both
//! servers busy, and the worker then rightly takes more) and 2 points
//! above eager, soft-lrp no worse than eager, each mode's median of three
//! alternated runs
//! (soft-lrp's demultiplexing is charged as an interrupt too, and here it
//! costs about as much as the checks it leaves to the receiver).
//!
//! **Files.** `fairness.csv` (`mode,worker_cpu_share,worker_elapsed_s,rpc_per_s`),
//! `fairness.png` (worker share per mode, with the fair share 1/3 as a
//! second series), `fairness.txt` (summary, accounting tables, goals).
//!
//! **May not touch:** the stack's internals (public API only). Every load
//! is bounded in count and time.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::nic::Nic;
use lazynet::sched::{Class, Cx, Status, TscClock};
use lazynet::stack::{ReceiveMode, Stack, StackConfig, UdpSocket};

use super::hostloop::{send_frames, NiStep, SEND_BATCH};
use crate::infra::cpus::Role;
use crate::infra::exp::{self, Checks, ExpOpts, Results};
use crate::infra::exp::{OnCpu, QUIET};
use crate::loadgen::{Endpoints, UdpTemplate};
use lazynet::host::{Host, HostConfig, HostState};

/// Request payload: one full frame (see the module docs).
pub const REQUEST_BYTES: usize = 1472;
/// Reply payload.
pub const REPLY_BYTES: usize = 32;
/// `exp::work` rounds per request (a fraction of a microsecond;
/// docs/PERFORMANCE.md): the paper's "Fast".
pub const RPC_WORK: u32 = 32;
/// Requests outstanding per server: enough that a server never waits for
/// the network (the paper's condition (1)) even while the worker runs an
/// iteration or the client thread is briefly off its CPU (server channels
/// hold 512); the host takes at most [`RX_BATCH`] frames per poll, so
/// `eager`'s 50-frame IP queue never overflows (no overload).
pub const WINDOW: u32 = 200;
/// Requests a server handles per iteration: a few, so that the host
/// loop's own cost per iteration (not charged to anyone) stays a small
/// part of the core, and iterations stay short (docs/PERFORMANCE.md).
const REQUESTS_PER_ITERATION: usize = 4;
/// Frames per receive-loop poll (below the IP queue's 50).
const RX_BATCH: usize = 32;
/// `exp::work` rounds per worker iteration (docs/PERFORMANCE.md): the
/// delay before the receive loop ("interrupt") runs.
const WORKER_CHUNK: u32 = 4096;
/// UDP ports of the two servers.
const SERVER_PORTS: [u16; 2] = [7001, 7002];
const HOST_IP: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 2);
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 1);

/// The result of one mode.
#[derive(Clone, Debug)]
struct ModeResult {
    mode: ReceiveMode,
    share: f64,
    elapsed_s: f64,
    rpc_per_s: f64,
    report: String,
    drops: String,
    /// Fraction of its wall time the client thread was on a CPU (below 1:
    /// the load core was shared with something else).
    load_cpu: f64,
    /// The same for the host thread.
    host_cpu: f64,
    /// Real time of the two servers' tasks / elapsed.
    servers_share: f64,
    /// Datagrams whose IP/UDP checks ran in the receive loop, and in the
    /// servers' `recv`.
    checked_in_loop: u64,
    checked_in_recv: u64,
}

/// The host's application state: the two servers' sockets and counters,
/// the worker's remaining work.
struct App {
    servers: [UdpSocket; 2],
    replies: [u64; 2],
    worker_left: u64,
    worker_done_ns: Option<u64>,
}

type St<N> = HostState<N, App>;

/// Runs the experiment.
pub fn run(opts: &ExpOpts) -> anyhow::Result<()> {
    let mut res = Results::new(
        &opts.out,
        "fairness",
        "mode,worker_cpu_share,worker_elapsed_s,rpc_per_s",
    )?;
    let modes = opts.modes();
    // The worker's fixed amount of work: about this much CPU time.
    let worker_cpu = if opts.quick {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(8)
    };
    let chunks = calibrate_chunks(worker_cpu);
    res.note(format!(
        "worker: {chunks} chunks of {WORKER_CHUNK} work rounds (~{:.1} s of CPU); \
         RPC: {REQUEST_BYTES}-byte requests, {REPLY_BYTES}-byte replies, W = {RPC_WORK} \
         work rounds, {WINDOW} outstanding per server",
        worker_cpu.as_secs_f64()
    ));
    // A quick run is short enough that one run of a mode can land in a
    // moment when the servers' load is uneven (eager's worker share spreads
    // widely over CI runs of the same code; docs/PERFORMANCE.md): each mode
    // runs three times,
    // the modes alternated, and the run with the median worker share is
    // the one reported and judged.
    let reps = if opts.quick { 3 } else { 1 };
    let bar = exp::progress((modes.len() * reps) as u64, "fairness");
    let mut runs: Vec<Vec<ModeResult>> = modes.iter().map(|_| Vec::new()).collect();
    for _ in 0..reps {
        for (i, &mode) in modes.iter().enumerate() {
            bar.set_message(format!("fairness {}", mode.name()));
            runs[i].push(run_mode(mode, chunks, opts.quick)?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let mut results = Vec::new();
    for mut v in runs {
        v.sort_by(|a, b| a.share.total_cmp(&b.share));
        if reps > 1 {
            let shares: Vec<String> = v.iter().map(|r| format!("{:.3}", r.share)).collect();
            res.note(format!(
                "{}: worker shares of {reps} runs {}; the median run is reported",
                v[0].mode.name(),
                shares.join(" ")
            ));
        }
        let mid = v.len() / 2;
        results.push(v.swap_remove(mid));
    }
    for r in &results {
        res.row(format!(
            "{},{:.4},{:.3},{:.0}",
            r.mode.name(),
            r.share,
            r.elapsed_s,
            r.rpc_per_s
        ));
    }
    res.note("");
    res.note(format!(
        "{:<12} {:>13} {:>10} {:>10}",
        "mode", "worker share", "elapsed s", "RPCs/s"
    ));
    for r in &results {
        res.note(format!(
            "{:<12} {:>12.1}% {:>10.2} {:>10.0}",
            r.mode.name(),
            100.0 * r.share,
            r.elapsed_s,
            r.rpc_per_s
        ));
    }
    res.note("(paper, Table 2: worker share 23-26% with 4.4BSD, 29-33% with LRP; fair = 33.3%)");
    for r in &results {
        res.note("");
        res.note(format!(
            "accounting, {} (own_ms = real time of the owner's tasks; cpu_ms = \
             what was charged to it; to_oth/from_oth = moved by the charging rules):",
            r.mode.name()
        ));
        for l in r.report.lines() {
            res.note(format!("  {l}"));
        }
        res.note(format!("  host drops: {}", r.drops));
        res.note(format!(
            "  threads on their CPUs (100% on a quiet machine): host {:.0}%, clients {:.0}%; \
             servers' real share {:.1}%",
            100.0 * r.host_cpu,
            100.0 * r.load_cpu,
            100.0 * r.servers_share
        ));
    }
    if !results.is_empty() {
        let cats: Vec<String> = results.iter().map(|r| r.mode.name().to_string()).collect();
        let shares: Vec<f64> = results.iter().map(|r| 100.0 * r.share).collect();
        let fair = vec![100.0 / 3.0; results.len()];
        crate::infra::plot::bar_chart(
            &res.path("png"),
            "Worker CPU share beside two RPC servers (LRP Table 2); fair share 1/3",
            "receive mode",
            "worker CPU share (%)",
            &cats,
            &[
                ("worker share".to_string(), shares),
                ("fair share (1/3)".to_string(), fair),
            ],
        )?;
    }
    let mut checks = Checks::default();
    let get = |m: ReceiveMode| results.iter().find(|r| r.mode == m);
    // Mechanism (deterministic): where the requests' IP/UDP checks ran.
    for r in &results {
        if !r.mode.eager_protocol() {
            checks.check(
                r.checked_in_loop == 0 && r.checked_in_recv > 0,
                format!(
                    "{}: IP/UDP checks in the servers' recv ({}), none in the receive loop",
                    r.mode.name(),
                    r.checked_in_recv
                ),
            );
        } else {
            checks.check(
                r.checked_in_loop > 0 && r.checked_in_recv == 0,
                format!(
                    "{}: IP/UDP checks in the receive loop ({}), charged to whoever it interrupted",
                    r.mode.name(),
                    r.checked_in_loop
                ),
            );
        }
    }
    // Shares: judged only when both threads had their cores (a busy machine
    // starves the servers or the host and says nothing about scheduling).
    // Full runs: the paper's goals. Quick runs: what holds robustly here —
    // ni-lrp (nothing on the host per packet) near 1/3 and above eager;
    // soft-lrp no worse than eager (its demultiplexing is still charged as
    // an interrupt, and on this stack it costs about as much as the IP/UDP
    // checks it leaves to the receiver, so the two are close).
    let third = 1.0 / 3.0;
    let quiet = |r: &ModeResult| r.host_cpu >= QUIET && r.load_cpu >= QUIET;
    let judge = |checks: &mut Checks, key: String, rs: &[&ModeResult], ok: bool, what: String| {
        let quiet = rs.iter().all(|r| quiet(r));
        checks.judge(key, quiet.then_some(ok), what, "machine busy");
    };
    let lazy_modes: &[ReceiveMode] = if opts.quick {
        &[ReceiveMode::NiLrp]
    } else {
        &[ReceiveMode::SoftLrp, ReceiveMode::NiLrp]
    };
    let tol = if opts.quick { 0.25 } else { 0.10 };
    for &m in lazy_modes {
        if let Some(r) = get(m) {
            // Full runs: within 10% of 1/3 either way. A quick run checks
            // only that the worker is not starved (the paper's point): when
            // the load core (clients, and ni-lrp's NI engine) cannot keep
            // both servers busy in a short run, the worker rightly takes
            // what they leave (ni-lrp's share moves between CI runs of the
            // same code; docs/PERFORMANCE.md; docs/EXPERIMENTS.md, "Quick
            // runs").
            let (ok, what) = if opts.quick {
                (
                    r.share >= (1.0 - tol) * third,
                    format!(
                        "{}: worker share {:.3} not below 1/3 by more than {:.0}%",
                        m.name(),
                        r.share,
                        100.0 * tol
                    ),
                )
            } else {
                (
                    (r.share - third).abs() <= tol * third,
                    format!(
                        "{}: worker share {:.3} within {:.0}% of 1/3",
                        m.name(),
                        r.share,
                        100.0 * tol
                    ),
                )
            };
            judge(&mut checks, format!("share {}", m.name()), &[r], ok, what);
        }
    }
    if let Some(e) = get(ReceiveMode::Eager) {
        let margin = if opts.quick { 0.02 } else { 0.03 };
        for &m in lazy_modes {
            if let Some(l) = get(m) {
                judge(
                    &mut checks,
                    format!("eager below {}", m.name()),
                    &[e, l],
                    l.share > e.share + margin,
                    format!(
                        "eager worker share {:.3} visibly below {}'s {:.3} (by > {margin})",
                        e.share,
                        m.name(),
                        l.share
                    ),
                );
            }
        }
        if opts.quick {
            if let Some(s) = get(ReceiveMode::SoftLrp) {
                judge(
                    &mut checks,
                    "soft-lrp no worse than eager".into(),
                    &[e, s],
                    s.share >= e.share - 0.02,
                    format!(
                        "soft-lrp worker share {:.3} no worse than eager's {:.3}",
                        s.share, e.share
                    ),
                );
            }
        }
    }
    res.note("");
    // The files are written even when a quick run's checks fail.
    let verdict = checks.finish(&mut res, opts.quick);
    res.write(opts)?;
    println!("wrote {}", opts.out.display());
    verdict
}

/// Chunks of [`WORKER_CHUNK`] rounds that take about `cpu` here: the
/// fastest of many single-chunk timings, so that a busy machine does not
/// shrink the amount of work.
fn calibrate_chunks(cpu: Duration) -> u64 {
    let mut x = 1;
    let mut best = u64::MAX;
    for i in 0..200 {
        let t = Instant::now();
        x ^= exp::work(WORKER_CHUNK, x + i);
        best = best.min(t.elapsed().as_nanos() as u64);
    }
    std::hint::black_box(x);
    (cpu.as_nanos() as u64 / best.max(1)).max(10)
}

fn wire() -> anyhow::Result<(WireEnd, WireEnd)> {
    WirePair::new(WireConfig {
        buf_count: 2048,
        ..WireConfig::default()
    })
    .context("in-memory wire")
}

fn host_cfg(mode: ReceiveMode) -> StackConfig {
    StackConfig {
        addr: HOST_IP,
        mode,
        rx_batch: RX_BATCH,
        ..StackConfig::default()
    }
}

/// One mode: a fresh wire, host and client thread.
fn run_mode(mode: ReceiveMode, chunks: u64, quick: bool) -> anyhow::Result<ModeResult> {
    let (a, b) = wire()?;
    let (host_mac, client_mac) = (b.mac(), a.mac());
    if mode == ReceiveMode::NiLrp {
        // The NI engine runs in the client thread, on the load core.
        let (stack, mut engine) = Stack::new_ni_lrp(b, host_cfg(mode));
        let step: NiStep = Box::new(move || engine.step());
        run_with(
            mode,
            stack,
            Some(step),
            a,
            host_mac,
            client_mac,
            chunks,
            quick,
        )
    } else {
        let stack = Stack::new(b, host_cfg(mode));
        run_with(mode, stack, None, a, host_mac, client_mac, chunks, quick)
    }
}

#[allow(clippy::too_many_arguments)]
fn run_with<N: Nic + Send + 'static>(
    mode: ReceiveMode,
    mut stack: Stack<N>,
    ni: Option<NiStep>,
    client_end: WireEnd,
    host_mac: [u8; 6],
    client_mac: [u8; 6],
    chunks: u64,
    quick: bool,
) -> anyhow::Result<ModeResult> {
    stack.set_neighbor(CLIENT_IP, client_mac);
    let servers = [
        stack.udp_bind(SocketAddrV4::new(HOST_IP, SERVER_PORTS[0]), Some(512))?,
        stack.udp_bind(SocketAddrV4::new(HOST_IP, SERVER_PORTS[1]), Some(512))?,
    ];
    let stop = Arc::new(AtomicBool::new(false));
    let go = Arc::new(AtomicBool::new(false));
    // Requests per second per server once paced (0: closed loop).
    let rate = Arc::new(AtomicU64::new(0));
    let load = {
        let (stop, go, rate) = (stop.clone(), go.clone(), rate.clone());
        std::thread::Builder::new()
            .name("fairness-clients".into())
            .spawn(move || clients(client_end, host_mac, ni, &stop, &go, &rate))?
    };
    let host = std::thread::Builder::new()
        .name("fairness-host".into())
        .spawn(move || -> anyhow::Result<ModeResult> {
            Role::Server.pin();
            // Nice -20 (root): other programs on a shared machine do not take
            // this core (see `exp::boost`).
            exp::boost();
            let on_cpu = OnCpu::start();
            let app = App {
                servers,
                replies: [0; 2],
                worker_left: chunks,
                worker_done_ns: None,
            };
            let rmode = mode;
            let hcfg = HostConfig::for_mode(rmode);
            let mut h = Host::new(stack, app, TscClock::new(), hcfg)
                .map_err(|e| anyhow::anyhow!("host: {e}"))?;
            let worker = h.add_owner("worker", Class::BestEffort)?;
            let rpc = [
                h.add_owner("rpc1", Class::BestEffort)?,
                h.add_owner("rpc2", Class::BestEffort)?,
            ];
            for (i, &o) in rpc.iter().enumerate() {
                let t = h.spawn(o, move |cx: &mut Cx<'_>, st: &mut St<N>| {
                    serve_one(i, cx, st)
                })?;
                h.state_mut().register_udp(servers[i], o, t);
            }
            // Everything starts at once with zero usage: clients, servers,
            // worker.
            h.run_until_idle(100);
            // Calibration: the servers alone, closed loop, give their
            // throughput C; the measured run paces requests uniformly in
            // time at C (more than the servers' share beside the worker
            // can serve, so they never wait; the window bounds what
            // queues): "requests at the maximal throughput rate of the
            // server", uncorrelated with its scheduling (LRP §4.2) — a
            // closed loop would send each request right after a server ran,
            // so the "interrupts" would always land on the servers.
            go.store(true, Ordering::Release);
            let cal_ns: u64 = if quick { 200_000_000 } else { 500_000_000 };
            h.run_for(cal_ns / 4);
            // The best of four windows: a busy machine (threads briefly off
            // their cores) only ever lowers a window's count, and too low a
            // rate would leave the servers waiting.
            let mut c = 0;
            for _ in 0..4 {
                let r0 = h.app().replies[0] + h.app().replies[1];
                h.run_for(cal_ns / 4);
                let r1 = h.app().replies[0] + h.app().replies[1];
                c = c.max((r1 - r0) * 4_000_000_000 / cal_ns);
            }
            rate.store((c * 17 / 40).max(1), Ordering::Release);
            h.run_for(cal_ns / 4);
            h.app_mut().replies = [0; 2];
            h.reset_usage();
            let t0 = h.now_ns();
            h.spawn(worker, |cx: &mut Cx<'_>, st: &mut St<N>| {
                exp::work(WORKER_CHUNK, st.app.worker_left);
                st.app.worker_left -= 1;
                if st.app.worker_left == 0 {
                    st.app.worker_done_ns = Some(cx.now_ns());
                    Status::Done
                } else {
                    Status::Ready
                }
            })?;
            // Bounded: the worker needs a few times its CPU time
            // (docs/PERFORMANCE.md); allow 20x.
            let max_ns: u64 = if quick {
                20_000_000_000
            } else {
                400_000_000_000
            };
            while h.app().worker_done_ns.is_none() && h.now_ns().saturating_sub(t0) < max_ns {
                h.run_for(1_000_000);
            }
            let done = h.app().worker_done_ns.unwrap_or_else(|| h.now_ns());
            let elapsed = done.saturating_sub(t0).max(1);
            let real = h.usage(worker).task_ns;
            let servers_real = h.usage(rpc[0]).task_ns + h.usage(rpc[1]).task_ns;
            let replies = h.app().replies[0] + h.app().replies[1];
            let stats = h.stack().stats();
            Ok(ModeResult {
                mode,
                share: real as f64 / elapsed as f64,
                elapsed_s: elapsed as f64 / 1e9,
                rpc_per_s: replies as f64 * 1e9 / elapsed as f64,
                report: h.report().to_string(),
                drops: super::hostloop::drops_line(&stats),
                load_cpu: 0.0,
                host_cpu: on_cpu.fraction(),
                servers_share: servers_real as f64 / elapsed as f64,
                checked_in_loop: stats.udp_checked_in_poll,
                checked_in_recv: stats.udp_checked_in_recv,
            })
        })?;
    let r = host
        .join()
        .map_err(|_| anyhow::anyhow!("host thread panicked"));
    stop.store(true, Ordering::Release);
    let load_cpu = load.join().unwrap_or(0.0);
    let mut r = r??;
    r.load_cpu = load_cpu;
    Ok(r)
}

/// One iteration of server `i`: up to [`REQUESTS_PER_ITERATION`] requests,
/// each `W` rounds of work and one reply.
fn serve_one<N: Nic>(i: usize, _cx: &mut Cx<'_>, st: &mut St<N>) -> Status {
    let sock = st.app.servers[i];
    for _ in 0..REQUESTS_PER_ITERATION {
        let got = st.stack.udp_mut(sock).recv_with(|p, from| {
            let mut seq = [0u8; 8];
            let n = p.len().min(8);
            seq[..n].copy_from_slice(&p[..n]);
            (from, u64::from_le_bytes(seq))
        });
        let Ok((from, seq)) = got else {
            return Status::Wait;
        };
        let x = exp::work(RPC_WORK, seq);
        let mut reply = [0u8; REPLY_BYTES];
        reply[..8].copy_from_slice(&seq.to_le_bytes());
        reply[8..16].copy_from_slice(&x.to_le_bytes());
        let now = st.stack.now();
        if st.stack.udp_mut(sock).send_to(&reply, from, now).is_ok() {
            st.app.replies[i] += 1;
        }
    }
    if st.stack.udp(sock).pending().unwrap_or(0) > 0 {
        Status::Ready
    } else {
        Status::Wait
    }
}

/// The clients (load thread): [`WINDOW`] requests outstanding per server.
fn clients(
    end: WireEnd,
    host_mac: [u8; 6],
    mut ni: Option<NiStep>,
    stop: &AtomicBool,
    go: &AtomicBool,
    rate: &AtomicU64,
) -> f64 {
    let mut s = super::hostloop::load_client(end, CLIENT_IP, HOST_IP, host_mac, 7);
    let Ok(sock) = s.udp_bind(SocketAddrV4::new(CLIENT_IP, 0), Some(1024)) else {
        return 0.0;
    };
    // Requests are written from prebuilt frames (loadgen's UdpTemplate:
    // copy, then patch sequence number and checksums incrementally) so that
    // one load core can keep two CPU-bound servers busy; replies go through
    // the client stack as usual.
    let Ok(me) = s.udp(sock).local_addr() else {
        return 0.0;
    };
    let client_mac = s.mac();
    let Ok(templates) = SERVER_PORTS
        .map(|p| {
            UdpTemplate::new(
                &Endpoints {
                    src_mac: client_mac,
                    dst_mac: host_mac,
                    src: me,
                    dst: SocketAddrV4::new(HOST_IP, p),
                },
                REQUEST_BYTES,
            )
        })
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
    else {
        return 0.0;
    };
    // Per server: requests sent (their sequence numbers count from 1) and
    // how many are still unanswered. Each server answers in order (one
    // channel, one task), so a reply to request `q` means every request
    // before it that is still unanswered was lost: the window heals itself.
    let mut sent = [0u32; 2];
    let mut outstanding = [0u32; 2];
    let mut last_reply = 0u64;
    let mut paced: Option<(u64, [u32; 2])> = None;
    let on_cpu = OnCpu::start();
    while !stop.load(Ordering::Relaxed) {
        // ni-lrp: the NI engine's batch, on this (the load) core.
        if let Some(step) = ni.as_mut() {
            step();
        }
        let now = s.now();
        s.poll(now);
        if !go.load(Ordering::Relaxed) {
            continue;
        }
        // Bounded by the channel: at most 256 replies per turn.
        for _ in 0..256 {
            let Ok((port, q)) = s.udp_mut(sock).recv_with(|p, from| {
                let q = p
                    .get(..4)
                    .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                (from.port(), q)
            }) else {
                break;
            };
            if let Some(i) = SERVER_PORTS.iter().position(|&p| p == port) {
                outstanding[i] = sent[i].wrapping_sub(q).min(outstanding[i]);
                last_reply = now;
            }
        }
        // Paced (after calibration): requests due by now, uniformly in time.
        let per_server = rate.load(Ordering::Relaxed);
        if per_server > 0 && paced.is_none() {
            paced = Some((now, sent));
        }

        // Everything in flight lost (or never answered): start again.
        if now.saturating_sub(last_reply) > 20_000_000 {
            outstanding = [0; 2];
            last_reply = now;
        }
        for i in 0..2 {
            // Bounded: at most WINDOW outstanding, SEND_BATCH per turn when
            // paced (a backlog beyond that is given up, not burst).
            let mut room = (WINDOW - outstanding[i].min(WINDOW)) as usize;
            if let Some((t0, base)) = paced {
                let due = base[i] as u64 + (now - t0) as u128 as u64 * per_server / 1_000_000_000;
                let behind = due.saturating_sub(sent[i] as u64);
                if behind > 4 * SEND_BATCH as u64 {
                    // Fell behind (the window was full): start again from now.
                    paced = Some((now, sent));
                }
                room = room.min(behind as usize).min(SEND_BATCH);
            }
            while room > 0 {
                let want = room;
                let t = &templates[i];
                let mut q = sent[i];
                let k = send_frames(s.nic_mut(), want, |b| {
                    q = q.wrapping_add(1);
                    t.write(u64::from(q), b)
                });
                // Frames not taken were written but not sent: their numbers
                // are reused.
                sent[i] = sent[i].wrapping_add(k as u32);
                outstanding[i] += k as u32;
                room -= k;
                if k == 0 {
                    break;
                }
            }
        }
    }
    on_cpu.fraction()
}
