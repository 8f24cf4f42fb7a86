//! `lazynet-lab livelock`: LRP Fig. 3 — delivered against offered UDP rate,
//! per receive mode, from a tenth of saturation to the generator's maximum.
//!
//! **Set-up.** One in-memory wire. The host (pinned to [`Role::Server`]) runs a
//! [`lazynet::host::Host`] in the mode under test with one best-effort owner,
//! `udp-server`, whose task receives one datagram per iteration and spends
//! [`work`]`(W, …)` on it. The generator (pinned to [`Role::Client`]) writes
//! 60-byte UDP frames straight into the wire at an exact open-loop rate
//! ([`BlastStepper`]), bounded in count and time. In `ni-lrp` the NI engine
//! runs in the generator's thread — blast one batch, step the engine once —
//! so the load core stands for "the network plus the NI processor", and
//! the host core spends nothing on a frame until the server reads it.
//!
//! **W** is chosen once per run, the same for every mode and for Linux: the
//! generator's maximum rate on the wire is measured first (a sink on the
//! host core only receives and releases), then W is the number of
//! [`work`] rounds that take 10 / max seconds, so that saturation is at most
//! a tenth of the highest offered rate. W and its time are recorded.
//!
//! **Measured:** delivered = datagrams the server finished per second over
//! a steady window after a warm-up; offered = what the generator actually
//! offered (frames it could not place on the full wire ring count as
//! offered and dropped "at the NIC ring"). Where frames were dropped comes
//! from the stack's counters over the window: the shared IP queue
//! (`eager`), the socket's channel (all modes; before any work except in
//! `eager`), after the work (`eager`: checked, then the channel was full).
//! The receive loop's cost per frame (the `net` owner's task time over the
//! frames it received) is reported beside W: it is what makes `eager`
//! collapse.
//!
//! **Soft-LRP's budget.** The soft-lrp host may spend at most 10% of the
//! core on demultiplexing frames it then drops ([`lazynet::host::RxBudget`];
//! demultiplexing that feeds an owner is not limited): beyond it frames
//! wait on the NIC ring and overflow there, so soft LRP does not merely
//! postpone livelock (LRP §4.2) — the "NIC ring" drops in the summary.
//! `eager` and `early-demux` receive without a budget, as 4.4BSD's
//! interrupts.
//!
//! **A shared machine.** Host and load threads run at nice −20 (root; see
//! [`exp::boost`]) and the summary gives the share of its core the host thread
//! really had (`CLOCK_THREAD_CPUTIME_ID` over the window). Quick runs judge
//! the shape on delivered datagrams per second of host-thread CPU time,
//! which is the plain curve on a quiet machine and stays meaningful on a
//! busy one; eager's collapse is judged only if the generator really
//! offered ten times saturation, an LRP mode's plateau only if its host
//! thread had at least [`MIN_SHARE`] of its core at its peak and top
//! points (else each is reported as unchecked, with the reason). Full runs
//! report every goal met or missed on the raw curve.
//!
//! **Linux** (root, unless `--no-linux`): the same W and target rates
//! through [`crate::baseline::linux::livelock_point`] (rows with mode `linux`).
//! **Kernel traffic into lazynet** (full runs, root): the same W over TAP
//! from the Linux peer namespace, per mode ([`super::tap::tap_livelock_point`];
//! rows `MODE/tap`, the right panel of `livelock.png`).
//!
//! **May not touch:** stack internals; the host runtime and loadgen are used
//! through their public APIs.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use lazynet::demux::DropReason;
use lazynet::host::{Host, HostConfig, HostState};
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::nic::Nic;
use lazynet::sched::{Class, Cx, OwnerUsage, Status, TscClock};
use lazynet::stack::{NiEngine, ReceiveMode, Stack, StackConfig, StackDrop, StackStats};

use crate::infra::cpus::Role;
use crate::infra::exp::{self, progress, work, Checks, ExpOpts, Results};
use crate::loadgen::{wire_endpoints, BlastStats, BlastStepper, Due, PacerConfig, UdpTemplate};

/// The least work per datagram (ns): a server that does something, as the
/// Linux baseline's 5 µs of work per datagram, so that saturation
/// is set by the server, not by the per-datagram cost of the stack path.
const MIN_WORK_NS: f64 = 2_000.0;
/// Quick runs judge an LRP mode's plateau only if its host thread had at
/// least this share of its core.
const MIN_SHARE: f64 = 0.6;
/// CSV columns.
pub const HEADER: &str = "mode,offered_pps,delivered_pps";
/// The host's address on the wire.
pub(crate) const HOST_IP: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 2);
/// The generator's (and client's) address.
pub(crate) const LOAD_IP: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 1);
/// The UDP server's port.
const PORT: u16 = 7000;
/// UDP payload of the load: 18 bytes make a 60-byte frame (as the Linux
/// series' `LOAD_PAYLOAD`; the paper used 14-byte messages).
pub(crate) const PAYLOAD: usize = 18;

/// The wire of every point: room for a full channel and a full ring on
/// each side, so the generator runs out of buffers only when the host holds
/// far more than its queues.
pub(crate) fn wire() -> anyhow::Result<(WireEnd, WireEnd)> {
    Ok(WirePair::new(WireConfig {
        buf_count: 8192,
        ring_capacity: 1024,
        ..WireConfig::default()
    })?)
}

/// The host's stack configuration in `mode`.
pub(crate) fn host_config(mode: ReceiveMode) -> StackConfig {
    StackConfig {
        addr: HOST_IP,
        prefix_len: 24,
        mode,
        ..StackConfig::default()
    }
}

/// The generator's frames to `port` on the host.
pub(crate) fn udp_gen(a: &WireEnd, b_mac: [u8; 6], port: u16) -> anyhow::Result<UdpTemplate> {
    let e = wire_endpoints(a, b_mac, SocketAddrV4::new(HOST_IP, port));
    UdpTemplate::new(&e, PAYLOAD)
}

/// The host side of a point, whatever its NIC (`WireEnd`, or the NI proxy).
pub(crate) enum HostStack {
    Wire(Box<Stack<WireEnd>>),
    Ni(Box<Stack<lazynet::stack::NiProxy>>),
}

/// Builds the host's stack on wire end `b` with `cfg` (from
/// [`host_config`]); in `ni-lrp` also the NI engine, which the load thread
/// steps.
/// The load thread's wait (at most 5 s) for the host to say it is ready;
/// the host calibrates its clock meanwhile, and in ni-lrp the NI engine
/// must keep going for it.
pub(crate) fn wait_host_ready(ready: &AtomicBool, mut engine: Option<&mut NiEngine<WireEnd>>) {
    let t0 = Instant::now();
    while !ready.load(Ordering::Acquire) && t0.elapsed() < Duration::from_secs(5) {
        if let Some(e) = engine.as_deref_mut() {
            e.step();
        }
        std::hint::spin_loop();
    }
}

pub(crate) fn host_stack(
    b: WireEnd,
    mode: ReceiveMode,
    cfg: StackConfig,
) -> (HostStack, Option<NiEngine<WireEnd>>) {
    match mode {
        ReceiveMode::NiLrp => {
            let (s, e) = Stack::new_ni_lrp(b, cfg);
            (HostStack::Ni(Box::new(s)), Some(e))
        }
        _ => (HostStack::Wire(Box::new(Stack::new(b, cfg))), None),
    }
}

/// The load thread's loop: the generator at its schedule, and after every
/// step the NI engine (if any). Bounded by the schedule and `max`; when
/// nothing is due it keeps stepping the engine (a spinning NI core). Returns
/// the generator's counters; afterwards the engine keeps forwarding until
/// `host_done` (bounded) so the host can give its buffers back.
pub(crate) fn load_loop(
    a: &mut WireEnd,
    stepper: &mut BlastStepper,
    mut engine: Option<&mut NiEngine<WireEnd>>,
    max: Duration,
    mut between: impl FnMut(&mut WireEnd, u64),
) -> BlastStats {
    let t0 = Instant::now();
    loop {
        let now = t0.elapsed().as_nanos() as u64;
        if now > max.as_nanos() as u64 {
            break;
        }
        match stepper.step(a, now) {
            Due::Done => break,
            Due::Send(_) => {}
            Due::WaitUntil(_) => std::hint::spin_loop(),
        }
        if let Some(e) = engine.as_deref_mut() {
            e.step();
        }
        between(a, now);
    }
    stepper.finish(a)
}

/// Keeps an NI engine forwarding until `done` (at most `max`), then ends it.
pub(crate) fn ni_tail(engine: Option<NiEngine<WireEnd>>, done: &AtomicBool, max: Duration) {
    if let Some(mut e) = engine {
        let t0 = Instant::now();
        while !done.load(Ordering::Acquire) && t0.elapsed() < max {
            e.step();
        }
        e.finish();
    }
}

/// Pins the calling thread to the host's core and raises its weight
/// ([`exp::boost`]).
pub(crate) fn host_thread() {
    Role::Server.pin();
    exp::boost();
}

/// Pins the calling thread to the load core and raises its weight.
pub(crate) fn load_thread() {
    Role::Client.pin();
    exp::boost();
}

/// The server's state: datagrams finished, and the work's result (kept so
/// the work cannot be optimized away).
#[derive(Default)]
struct Server {
    done: u64,
    acc: u64,
}

/// What the host measured over the window.
#[derive(Clone, Debug, Default)]
struct HostOut {
    delivered: u64,
    window_ns: u64,
    /// CPU time the host thread got during the window.
    cpu_ns: u64,
    before: StackStats,
    after: StackStats,
    net: OwnerUsage,
    server: OwnerUsage,
}

/// Host side of one point (on [`Role::Server`]).
fn serve<N: Nic + 'static>(
    stack: Stack<N>,
    w: u32,
    warmup: Duration,
    window: Duration,
    ready: &AtomicBool,
    load_done: &AtomicBool,
) -> anyhow::Result<HostOut> {
    let cfg = HostConfig::for_mode(stack.mode());
    let mut host = Host::new(stack, Server::default(), TscClock::new(), cfg)
        .map_err(|e| anyhow::anyhow!("host: {e}"))?;
    let owner = host
        .add_owner("udp-server", Class::BestEffort)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let h = host
        .state_mut()
        .stack
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT), None)
        .map_err(|e| anyhow::anyhow!("bind: {e}"))?;
    // One datagram per iteration: the interrupt check comes between any two.
    let t = host
        .spawn(
            owner,
            move |_cx: &mut Cx<'_>, st: &mut HostState<N, Server>| {
                let seed = st
                    .stack
                    .udp_mut(h)
                    .recv_with(|p, _| u64::from(u32::from_be_bytes([p[0], p[1], p[2], p[3]])));
                match seed {
                    Ok(seed) => {
                        st.app.acc ^= work(w, seed);
                        st.app.done += 1;
                        Status::Ready
                    }
                    Err(_) => Status::Wait,
                }
            },
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    host.state_mut().register_udp(h, owner, t);
    ready.store(true, Ordering::Release);
    host.run_for(warmup.as_nanos() as u64);
    host.reset_usage();
    let d0 = host.app().done;
    let before = host.stack().stats();
    let t0 = host.now_ns();
    let c0 = lazynet::sys::thread_cpu_ns();
    host.run_for(window.as_nanos() as u64);
    let t1 = host.now_ns();
    let cpu_ns = lazynet::sys::thread_cpu_ns() - c0;
    let out = HostOut {
        delivered: host.app().done - d0,
        window_ns: t1 - t0,
        cpu_ns,
        before,
        after: host.stack().stats(),
        net: host.usage(host.net_owner()),
        server: host.usage(owner),
    };
    // Keep serving (and releasing buffers) until the load is over, bounded.
    let end = Instant::now() + Duration::from_secs(5);
    while !load_done.load(Ordering::Acquire) && Instant::now() < end {
        host.run_for(1_000_000);
    }
    // ni-lrp: every buffer back to the NI before it stops (bounded).
    let end = Instant::now() + Duration::from_secs(2);
    while !host.state_mut().stack.ni_quiesce() && Instant::now() < end {
        std::thread::yield_now();
    }
    std::hint::black_box(host.app().acc);
    Ok(out)
}

/// One measured point.
#[derive(Clone, Debug, Default)]
struct Point {
    offered_pps: f64,
    delivered_pps: f64,
    gen: BlastStats,
    host: HostOut,
}

impl Point {
    fn drop_line(&self) -> String {
        let (a, b) = (&self.host.after, &self.host.before);
        let ipq = a.drops_for(StackDrop::IpQueueFull) - b.drops_for(StackDrop::IpQueueFull);
        let chan =
            a.demux.drops_for(DropReason::ChannelFull) - b.demux.drops_for(DropReason::ChannelFull);
        let after = a.udp_dropped_after_work - b.udp_dropped_after_work;
        let rx = a.rx_frames - b.rx_frames;
        let secs = self.host.window_ns as f64 / 1e9;
        let per = |n: u64| n as f64 / secs.max(1e-9);
        format!(
            "host thread had {:.0}% of its core; NIC ring {:.0}/s (whole run {} of {}), IP queue {:.0}/s, channel {:.0}/s, after work {:.0}/s; received {:.0}/s; receive loop {:.0} ns/frame ({:.0}% of the core), server {:.0}% of the core",
            100.0 * self.host.cpu_ns as f64 / self.host.window_ns.max(1) as f64,
            self.gen.dropped() as f64 / (self.gen.elapsed_ns as f64 / 1e9).max(1e-9),
            self.gen.dropped(),
            self.gen.offered,
            per(ipq),
            per(chan),
            per(after),
            per(rx),
            self.host.net.task_ns as f64 / rx.max(1) as f64,
            100.0 * self.host.net.task_ns as f64 / self.host.window_ns.max(1) as f64,
            100.0 * self.host.server.task_ns as f64 / self.host.window_ns.max(1) as f64,
        )
    }
}

/// Runs one point: `mode` at `rate_pps`.
fn point(
    mode: ReceiveMode,
    rate_pps: u64,
    w: u32,
    warmup: Duration,
    window: Duration,
) -> anyhow::Result<Point> {
    let (mut a, b) = wire()?;
    let gen = udp_gen(&a, b.mac(), PORT)?;
    let (stack, mut engine) = host_stack(b, mode, host_config(mode));
    let ready = AtomicBool::new(false);
    let load_done = AtomicBool::new(false);
    let host_done = AtomicBool::new(false);
    let total = warmup + window + Duration::from_millis(50);
    let (host, gen_stats) = std::thread::scope(|sc| {
        let (ready, load_done, host_done) = (&ready, &load_done, &host_done);
        let h = sc.spawn(move || {
            host_thread();
            let r = match stack {
                HostStack::Wire(s) => serve(*s, w, warmup, window, ready, load_done),
                HostStack::Ni(s) => serve(*s, w, warmup, window, ready, load_done),
            };
            host_done.store(true, Ordering::Release);
            r
        });
        let l = sc.spawn(move || {
            load_thread();
            wait_host_ready(ready, engine.as_mut());
            let mut s = BlastStepper::new(gen, PacerConfig::new(rate_pps, total.as_secs_f64()));
            let st = load_loop(
                &mut a,
                &mut s,
                engine.as_mut(),
                total + Duration::from_secs(1),
                |_, _| {},
            );
            load_done.store(true, Ordering::Release);
            ni_tail(engine, host_done, Duration::from_secs(3));
            st
        });
        (h.join(), l.join())
    });
    let host = host.map_err(|_| anyhow::anyhow!("host thread panicked"))??;
    let gen = gen_stats.map_err(|_| anyhow::anyhow!("load thread panicked"))?;
    Ok(Point {
        offered_pps: gen.offered_pps(),
        delivered_pps: host.delivered as f64 * 1e9 / host.window_ns.max(1) as f64,
        gen,
        host,
    })
}

/// The generator's highest rate on the wire: the best of `tries` runs of
/// `secs` each (a busy machine can take the core away during one).
pub(crate) fn generator_max(secs: f64, tries: usize) -> anyhow::Result<f64> {
    let mut best: f64 = 0.0;
    for _ in 0..tries.max(1) {
        best = best.max(generator_max_once(secs)?);
    }
    Ok(best)
}

/// One run: a sink on the host core only receives and releases; the
/// generator is asked for far more than it can.
fn generator_max_once(secs: f64) -> anyhow::Result<f64> {
    let (mut a, mut b) = wire()?;
    let gen = udp_gen(&a, b.mac(), PORT)?;
    let stop = AtomicBool::new(false);
    let st = std::thread::scope(|sc| {
        let stop = &stop;
        sc.spawn(move || {
            host_thread();
            let mut ds = [lazynet::mem::Desc::default(); 256];
            while !stop.load(Ordering::Relaxed) {
                let n = b.recv(&mut ds);
                b.release(&ds[..n]);
            }
        });
        let l = sc.spawn(move || {
            load_thread();
            let mut s = BlastStepper::new(gen, PacerConfig::new(200_000_000, secs));
            let st = load_loop(
                &mut a,
                &mut s,
                None,
                Duration::from_secs_f64(secs + 1.0),
                |_, _| {},
            );
            stop.store(true, Ordering::Relaxed);
            st
        });
        l.join()
    });
    let st = st.map_err(|_| anyhow::anyhow!("generator thread panicked"))?;
    Ok(st.achieved_pps())
}

/// Nanoseconds per round of [`work`] (best of a few tries, on the host core).
pub(crate) fn work_ns_per_iter() -> f64 {
    let r = std::thread::scope(|sc| {
        sc.spawn(|| {
            host_thread();
            let mut best = f64::INFINITY;
            for i in 0..5 {
                let t = Instant::now();
                std::hint::black_box(work(200_000, i));
                best = best.min(t.elapsed().as_nanos() as f64 / 200_000.0);
            }
            best
        })
        .join()
    });
    r.unwrap_or(1.0).max(0.01)
}

/// `n` rates, log-spaced from `lo` to `hi`.
pub(crate) fn log_rates(lo: f64, hi: f64, n: usize) -> Vec<u64> {
    let n = n.max(2);
    (0..n)
        .map(|i| {
            let f = i as f64 / (n - 1) as f64;
            (lo * (hi / lo).powf(f)).round().max(1.0) as u64
        })
        .collect()
}

/// The Linux series: the same W and rates against the kernel (root only).
fn linux_series(
    opts: &ExpOpts,
    rates: &[u64],
    w: u32,
    secs: f64,
    res: &mut Results,
) -> anyhow::Result<Option<Vec<(f64, f64)>>> {
    if !opts.linux()? {
        return Ok(None);
    }
    let net = crate::baseline::linux::LinuxNet::up().context("Linux series: namespaces")?;
    let bar = progress(rates.len() as u64, "livelock linux");
    let mut pts = Vec::new();
    for &r in rates {
        let p = crate::baseline::linux::livelock_point(&net, r, secs, w)?;
        res.row(format!("linux,{:.0},{:.0}", p.offered_pps, p.delivered_pps));
        res.note(format!("  linux @ {r} pps: {}", p.summary()));
        pts.push((p.offered_pps, p.delivered_pps));
        bar.inc(1);
    }
    bar.finish_and_clear();
    for n in net.notes() {
        res.note(format!("  linux set-up: {n}"));
    }
    net.down()?;
    Ok(Some(pts))
}

/// The same traffic from the Linux kernel: `lazynet-lab loadgen udp` in a peer
/// namespace sends over a TAP device into a lazynet host (the same server,
/// W, and host runtime) in each mode — real kernel traffic instead of the
/// emulated NIC. Full runs only (root); rows `MODE/tap`, plotted in the
/// right panel of `livelock.png` beside Linux. The kernel sender reaches a few hundred
/// thousand datagrams/s, so only the rates up to that are run; TAP costs
/// the host a `read()` per frame (part of what this series measures).
fn tap_series(
    opts: &ExpOpts,
    modes: &[ReceiveMode],
    rates: &[u64],
    w: u32,
    secs: f64,
    res: &mut Results,
) -> anyhow::Result<Vec<Series>> {
    if opts.quick || !opts.linux()? {
        return Ok(Vec::new());
    }
    let rates: Vec<u64> = rates
        .iter()
        .copied()
        .filter(|&r| r <= TAP_MAX_RATE)
        .collect();
    let bar = progress((modes.len() * rates.len()) as u64, "livelock tap");
    let mut out = Vec::new();
    for &m in modes {
        let mut pts = Vec::new();
        for &r in &rates {
            bar.set_message(format!("{}/tap @ {r}", m.name()));
            let p = super::tap::tap_livelock_point(m, r, secs, w)
                .with_context(|| format!("{}/tap at {r} pps", m.name()))?;
            res.row(format!(
                "{}/tap,{:.0},{:.0}",
                m.name(),
                p.offered_pps,
                p.delivered_pps
            ));
            res.note(format!("  {}/tap @ {r} pps: {}", m.name(), p.summary()));
            pts.push((p.offered_pps, p.delivered_pps));
            bar.inc(1);
        }
        out.push((format!("{} (TAP)", m.name()), pts));
    }
    bar.finish_and_clear();
    Ok(out)
}

/// A named line of (offered, delivered) points.
type Series = (String, Vec<(f64, f64)>);

/// Highest target rate of the TAP series (beyond what the kernel's sender
/// offers here anyway).
const TAP_MAX_RATE: u64 = 1_500_000;

/// Runs the experiment.
pub fn run(opts: &ExpOpts) -> anyhow::Result<()> {
    let quick = opts.quick;
    let mut res = Results::new(&opts.out, "livelock", HEADER)?;
    let gen_max = if quick {
        generator_max(0.1, 3)?
    } else {
        generator_max(0.5, 3)?
    };
    let ns_iter = work_ns_per_iter();
    // Saturation (at most 1 / (W's time)) at a tenth of the generator's
    // max or less; W is at least MIN_WORK_NS so the server's own work, not
    // the stack's per-datagram path, sets saturation.
    let target_ns = (10.0 * 1e9 / gen_max).max(MIN_WORK_NS);
    let w = (target_ns / ns_iter).ceil().max(1.0) as u32;
    let work_ns = f64::from(w) * ns_iter;
    let sat = 1e9 / work_ns;
    let n = if quick { 4 } else { 10 };
    let rates = log_rates(0.1 * sat, gen_max.max(10.0 * sat), n);
    let (warmup, window) = if quick {
        (Duration::from_millis(150), Duration::from_millis(350))
    } else {
        (Duration::from_millis(500), Duration::from_secs(2))
    };
    res.note(format!(
        "generator max on the wire: {gen_max:.0} pps (CPU {}); host on CPU {}",
        Role::Client.cpu(),
        Role::Server.cpu()
    ));
    res.note(format!(
        "W = {w} rounds of exp::work = {work_ns:.0} ns per datagram; saturation estimate 1/W = {sat:.0} pps"
    ));
    res.note(format!(
        "rates: {rates:?}; warm-up {} ms, window {} ms per point",
        warmup.as_millis(),
        window.as_millis()
    ));
    let modes = opts.modes();
    let bar = progress((modes.len() * rates.len()) as u64, "livelock");
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut summaries = Vec::new();
    let mut host_shares: Vec<(ReceiveMode, f64)> = Vec::new();
    for &m in &modes {
        let mut pts = Vec::new();
        // Delivered per second of host-thread CPU time: the same curve on
        // a quiet machine, and on a busy one the curve the host would have
        // drawn with its core to itself (quick runs judge the shape on it).
        let mut norm = Vec::new();
        let mut shares = Vec::new();
        let mut last = None;
        for &r in &rates {
            bar.set_message(format!("{} @ {r}", m.name()));
            let p = point(m, r, w, warmup, window)
                .with_context(|| format!("{} at {r} pps", m.name()))?;
            res.row(format!(
                "{},{:.0},{:.0}",
                m.name(),
                p.offered_pps,
                p.delivered_pps
            ));
            pts.push((p.offered_pps, p.delivered_pps));
            let share = p.host.cpu_ns as f64 / p.host.window_ns.max(1) as f64;
            norm.push(p.delivered_pps / share.clamp(0.05, 1.0));
            shares.push(share);
            last = Some(p);
            bar.inc(1);
        }
        let (peak, top) = if quick {
            (
                norm.iter().copied().fold(0.0, f64::max),
                norm.last().copied().unwrap_or(0.0),
            )
        } else {
            (
                pts.iter().map(|p| p.1).fold(0.0, f64::max),
                pts.last().map_or(0.0, |p| p.1),
            )
        };
        // The core share the host had at the peak and at the top point.
        let at_peak = norm
            .iter()
            .position(|&x| x == norm.iter().copied().fold(0.0, f64::max))
            .unwrap_or(0);
        let min_share = shares[at_peak].min(shares.last().copied().unwrap_or(0.0));
        host_shares.push((m, min_share));
        summaries.push((m, peak, top, last));
        series.push((m.name().to_string(), pts));
    }
    bar.finish_and_clear();
    let linux = linux_series(opts, &rates, w, window.as_secs_f64().max(1.0), &mut res)?;
    let tap = tap_series(
        opts,
        &modes,
        &rates,
        w,
        window.as_secs_f64().max(1.0),
        &mut res,
    )?;

    res.note(format!(
        "per mode (peak; delivered at the highest rate as % of peak{}; drops over the window at the highest rate):",
        if quick {
            ", both per second of host-thread CPU time"
        } else {
            ""
        }
    ));
    let mut checks = Checks::default();
    let measured_sat = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .fold(0.0, f64::max);
    res.note(format!(
        "measured saturation (the highest delivered rate of any mode): {measured_sat:.0} pps; the generator's max is {:.1}× that",
        gen_max / measured_sat.max(1.0)
    ));
    let frac = |m: ReceiveMode| {
        summaries
            .iter()
            .find(|s| s.0 == m)
            .map(|s| (s.1, if s.1 > 0.0 { s.2 / s.1 } else { 0.0 }))
    };
    for (m, peak, top, last) in &summaries {
        res.note(format!(
            "  {:<12} peak {peak:.0} pps, at the top {top:.0} pps = {:.0}% of peak",
            m.name(),
            if *peak > 0.0 { 100.0 * top / peak } else { 0.0 }
        ));
        if let Some(p) = last {
            res.note(format!("               {}", p.drop_line()));
        }
    }
    if let Some(l) = &linux {
        let peak = l.iter().map(|p| p.1).fold(0.0, f64::max);
        let top = l.last().map_or(0.0, |p| p.1);
        res.note(format!(
            "  {:<12} peak {peak:.0} pps, at the top {top:.0} pps = {:.0}% of peak",
            "linux",
            if peak > 0.0 { 100.0 * top / peak } else { 0.0 }
        ));
        series.push(("linux".to_string(), l.clone()));
    }
    // Goals (full run) and shapes with wide margins (quick: CI on a noisy VM).
    let (ni_goal, soft_goal, eager_goal) = if quick {
        (0.6, 0.6, 0.6)
    } else {
        (0.95, 0.85, 0.30)
    };
    // A quick run cannot judge an LRP mode whose host thread had less than
    // MIN_SHARE of its core at its peak or top point: on a machine that
    // busy, caches and time slices are the other processes', not ours.
    let too_busy = |m: ReceiveMode, res: &mut Results| {
        let sh = host_shares.iter().find(|x| x.0 == m).map_or(1.0, |x| x.1);
        let busy = quick && sh < MIN_SHARE;
        if busy && frac(m).is_some() {
            res.note(format!(
                "not checked: {}'s plateau (its host thread had only {:.0}% of its core: machine too busy)",
                m.name(),
                sh * 100.0
            ));
        }
        busy
    };
    if let (false, Some((_, f))) = (
        too_busy(ReceiveMode::NiLrp, &mut res),
        frac(ReceiveMode::NiLrp),
    ) {
        checks.check(
            f >= ni_goal,
            format!(
                "ni-lrp keeps >= {:.0}% of its peak at the highest rate ({:.0}%)",
                ni_goal * 100.0,
                f * 100.0
            ),
        );
    }
    if let (false, Some((_, f))) = (
        too_busy(ReceiveMode::SoftLrp, &mut res),
        frac(ReceiveMode::SoftLrp),
    ) {
        checks.check(
            f >= soft_goal,
            format!(
                "soft-lrp keeps >= {:.0}% of its peak at the highest rate ({:.0}%)",
                soft_goal * 100.0,
                f * 100.0
            ),
        );
    }
    // Eager collapses only if the load really reached far beyond
    // saturation; on a machine so busy that the generator could not, a
    // quick run cannot judge the shape and reports it as unchecked.
    let reached = summaries
        .iter()
        .find(|s| s.0 == ReceiveMode::Eager)
        .and_then(|s| s.3.as_ref())
        .map_or(0.0, |p| p.offered_pps);
    let lrp_peak = frac(ReceiveMode::SoftLrp)
        .or(frac(ReceiveMode::NiLrp))
        .map_or(0.0, |x| x.0);
    let sat = frac(ReceiveMode::Eager).map_or(0.0, |x| x.0).max(lrp_peak);
    if quick && frac(ReceiveMode::Eager).is_some() && reached < 10.0 * sat {
        res.note(format!(
            "not checked: eager's collapse (the generator offered {reached:.0} pps, less than 10× saturation {sat:.0}: machine too busy)"
        ));
    } else if let Some((_, f)) = frac(ReceiveMode::Eager) {
        checks.check(
            f <= eager_goal,
            format!(
                "eager falls to <= {:.0}% of its peak at the highest rate ({:.0}%)",
                eager_goal * 100.0,
                f * 100.0
            ),
        );
    }
    if let (Some((ep, _)), Some((lp, _))) = (
        frac(ReceiveMode::Eager),
        frac(ReceiveMode::SoftLrp).or(frac(ReceiveMode::NiLrp)),
    ) {
        let margin = if quick { 0.8 } else { 1.0 };
        checks.check(
            lp > ep * margin,
            if quick {
                format!("LRP peak ({lp:.0}) at least 80% of eager's ({ep:.0})")
            } else {
                format!("LRP peak ({lp:.0}) above eager's ({ep:.0})")
            },
        );
    }
    // One figure: the wire series, and beside it the kernel's traffic over
    // TAP when that series ran.
    let mut tap_plot = tap.clone();
    if let Some(l) = &linux {
        tap_plot.push(("linux".to_string(), l.clone()));
    }
    let wire_panel = crate::infra::plot::Panel::Lines {
        title: "Receive livelock (LRP Fig. 3)",
        x_label: "offered rate (datagrams/s)",
        y_label: "delivered to the server (datagrams/s)",
        series: &series,
        log_x: true,
        log_y: false,
    };
    let tap_panel = crate::infra::plot::Panel::Lines {
        title: "Kernel traffic over TAP",
        x_label: "offered rate (datagrams/s)",
        y_label: "delivered to the server (datagrams/s)",
        series: &tap_plot,
        log_x: true,
        log_y: false,
    };
    if tap.is_empty() {
        crate::infra::plot::figure(&res.path("png"), &[wire_panel])?;
    } else {
        crate::infra::plot::figure(&res.path("png"), &[wire_panel, tap_panel])?;
    }
    if !tap.is_empty() {
        res.note("kernel traffic over TAP (rows MODE/tap; the right panel of the figure):");
        for (name, pts) in &tap {
            let peak = pts.iter().map(|p| p.1).fold(0.0, f64::max);
            let top = pts.last().map_or(0.0, |p| p.1);
            res.note(format!(
                "  {name:<18} peak {peak:.0} pps, at the top {top:.0} pps = {:.0}% of peak",
                if peak > 0.0 { 100.0 * top / peak } else { 0.0 }
            ));
        }
    }
    // The files are written even when a shape check fails.
    let verdict = checks.finish(&mut res, quick);
    res.write(opts)?;
    verdict?;
    println!("wrote {}", opts.out.display());
    Ok(())
}
