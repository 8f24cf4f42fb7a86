//! `rtu-qos`: guaranteed TCP streams on periodic handlers (RTU Fig. 7), a
//! reactive echo beside best-effort bulk streams (Fig. 8, in
//! [`super::echo`]), the paper's mix of TCP and UDP periodic streams beside a
//! reactive UDP echo (Table II and Fig. 9, in [`super::mix`]), and admission up
//! to refusal, lazynet beside Linux.
//!
//! **Fig. 7.** Six TCP streams of equal specified bandwidth into a receiver
//! on the host core ([`Role::Server`]); each received 8-KiB message costs the
//! receiving application a fixed amount of work ([`crate::infra::exp::work`]),
//! calibrated so that the six streams need about two thirds of the core
//! (each a little more than a tenth: what a fair share gives it beside four
//! spinning processes). The sender, on the other core, paces each stream at
//! its rate; a receiver that falls behind closes its window and the stream
//! slows. Measured: what each receiving application consumed per second,
//! against the specified rate. Series:
//!
//! * lazynet, each stream a periodic owner `(T, B)` from its rate and
//!   message size ([`Periodic::for_rate`]) whose handler does the stream's
//!   TCP input and calls the application's function, one message per
//!   iteration; the host sleeps when idle and its thread runs
//!   `SCHED_FIFO` (root), or under CFS for contrast;
//! * Linux TCP over loopback, six receiving threads, under CFS and under
//!   `SCHED_FIFO`.
//!
//! Each with no competing load and with four CPU-bound processes spinning
//! on the host core.
//!
//! **Admission.** Periodic owners of the same shape are added to an
//! executor until one is refused; the refusal's text, and the analysis's
//! worst-case response of the admitted set, are reported (the streams of
//! Fig. 7 are admitted the same way, and their measured worst response is
//! reported beside the analysis).
//!
//! **May not touch:** the stack's internals (public API only). Every load is
//! bounded in time; the spinning processes are killed by their pid.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener as StdListener, TcpStream as StdStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use lazynet::host::{Host, HostConfig, HostState};
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::nic::Nic;
use lazynet::proto::tcp::State;
use lazynet::sched::{
    Bucket, Class, Cx, Executor, OwnerUsage, Periodic, ResponseTime, SchedConfig, Status, TscClock,
    VirtualClock,
};
use lazynet::stack::{ReceiveMode, Stack, StackConfig, TcpListener, TcpStream};
use lazynet::sys::{set_sched_class, SchedClass};

use crate::infra::cpus::Role;
use crate::infra::exp::{self, Checks, ExpOpts, OnCpu, Results};

pub(super) const HOST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PORT: u16 = 5000;
/// Application message (the paper's PDU, up to 8 KB).
const MSG: usize = 8192;
const STREAMS: usize = 6;
/// Messages per period (the batch).
const BATCH: u32 = 8;
/// Specified rate of each stream.
const RATE_BPS: u64 = 40_000_000;
/// Share of the core each stream's application work takes at its rate.
const SHARE_PER_STREAM: f64 = 0.105;
/// Protocol allowance per message in the declared iteration cost (its
/// segments, their ACKs, the copy out), with room for interrupts.
const PROTOCOL_NS: u64 = 45_000;
/// TCP units served per iteration: one message's segments (8 KiB in
/// 1448-byte segments) and an ACK.
const SEGMENTS_PER_MSG: usize = 7;
pub(super) const SPINNERS: usize = 4;

/// The executor set-up of the lazynet series: the system's own work (the
/// receive loop) is bounded by a 5% bucket, and admission may give the
/// periodic streams up to 90% of the core.
pub(super) fn sched_config() -> SchedConfig {
    SchedConfig {
        system: Bucket {
            share_ppm: 50_000,
            burst_ns: 200_000,
        },
        utilisation_bound_ppm: 900_000,
        // A sleeping host sees a release up to a wake-up late
        // (`bench wakeup`, docs/PERFORMANCE.md).
        release_jitter_ns: 200_000,
        ..SchedConfig::default()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Series {
    LazynetFifo,
    LazynetCfs,
    LinuxCfs,
    LinuxFifo,
}

impl Series {
    fn name(self) -> &'static str {
        match self {
            Series::LazynetFifo => "lazynet, host SCHED_FIFO",
            Series::LazynetCfs => "lazynet, host CFS",
            Series::LinuxCfs => "Linux TCP, receivers CFS",
            Series::LinuxFifo => "Linux TCP, receivers SCHED_FIFO",
        }
    }
    fn fifo(self) -> bool {
        matches!(self, Series::LazynetFifo | Series::LinuxFifo)
    }
}

/// What one point measured.
#[derive(Default)]
struct Point {
    /// Consumed by each receiving application, bit/s.
    measured_bps: Vec<f64>,
    /// lazynet: each stream owner's accounting.
    usage: Vec<OwnerUsage>,
    /// lazynet: the analysis's worst-case response per stream, at
    /// admission (declared costs).
    bound_ns: Vec<u64>,
    /// lazynet: the same from the run's own costs and lateness.
    run_bound_ns: Vec<u64>,
    /// lazynet: still periodic at the end (not demoted).
    periodic_at_end: Vec<bool>,
    /// The host thread's share of its core.
    host_cpu: f64,
    /// lazynet: ms the hypervisor took from the host's vCPU during the
    /// run, and the latest release the executor saw (ns).
    stolen_ms: u64,
    late_ns: u64,
    /// lazynet: the executor's counters (re-checks of admission, the
    /// receive loop's runs below the periodic level).
    exec: Option<lazynet::sched::ExecStats>,
}

/// Processes spinning on the host core, killed (by pid) when dropped.
pub(super) struct Spinners(Vec<Child>);

impl Spinners {
    pub(super) fn start(n: usize, seconds: f64) -> anyhow::Result<Spinners> {
        let exe = std::env::current_exe()?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(
                Command::new(&exe)
                    .args(["exp-helper", "spin", "--seconds"])
                    .arg(format!("{seconds:.1}"))
                    .args(["--cpu", &Role::Spinner.cpu().to_string()])
                    .stdout(Stdio::null())
                    .spawn()
                    .context("spawning a spinner")?,
            );
        }
        Ok(Spinners(v))
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Work iterations that take `ns` on this machine (median of five), on
/// the calling thread's CPU at its class.
pub(super) fn calibrate(ns: u64) -> u32 {
    let n = 20_000u32;
    let mut t = Vec::new();
    for _ in 0..5 {
        let t0 = Instant::now();
        exp::work(n, 7);
        t.push(t0.elapsed().as_nanos() as u64);
    }
    t.sort_unstable();
    let per = (t[2] as f64 / f64::from(n)).max(0.01);
    ((ns as f64 / per) as u32).max(1)
}

struct Plan {
    work_iters: u32,
    periodic: Periodic,
    warm: Duration,
    measure: Duration,
}

/// `lazynet-lab rtu-qos [--quick]`.
pub fn run(opts: &ExpOpts) -> anyhow::Result<()> {
    let mut res = Results::new(
        &opts.out,
        "rtu-qos",
        "part,series,spinners,item,specified_mbps,measured_mbps,ratio,deadline_misses,max_response_us,bound_us,run_bound_us,host_cpu,bulk_streams,p50_us,p99_us,p999_us",
    )?;
    let mut checks = Checks::default();
    let msgs_per_s = RATE_BPS as f64 / (MSG as f64 * 8.0);
    let app_ns = (SHARE_PER_STREAM / msgs_per_s * 1e9) as u64;
    let plan = Plan {
        work_iters: calibrate(app_ns),
        periodic: Periodic::for_rate(RATE_BPS, MSG as u32, BATCH, app_ns + PROTOCOL_NS),
        warm: Duration::from_millis(if opts.quick { 300 } else { 500 }),
        measure: Duration::from_secs_f64(if opts.quick { 1.2 } else { 5.0 }),
    };
    res.note(format!(
        "Fig. 7: {STREAMS} TCP streams of {} Mbit/s, {MSG}-byte messages, {:.0} us of application work per message ({:.0}% of the core per stream, {:.0}% for the six); lazynet streams periodic with T = {:.2} ms, B = {BATCH}, declared iteration {} us",
        RATE_BPS / 1_000_000,
        app_ns as f64 / 1e3,
        SHARE_PER_STREAM * 100.0,
        SHARE_PER_STREAM * 100.0 * STREAMS as f64,
        plan.periodic.period_ns as f64 / 1e6,
        plan.periodic.iteration_ns / 1_000
    ));
    let root = lazynet::sys::is_root();
    if !root && std::env::var("CI").as_deref() == Ok("true") {
        bail!("rtu-qos needs root for SCHED_FIFO (CI=true: not skipping)");
    }
    let mut series = vec![Series::LazynetCfs, Series::LinuxCfs];
    if root {
        series.insert(0, Series::LazynetFifo);
        series.push(Series::LinuxFifo);
    } else {
        eprintln!("skipped: SCHED_FIFO series need root");
    }
    if opts.no_linux {
        series.retain(|s| !matches!(s, Series::LinuxCfs | Series::LinuxFifo));
    }
    let bar = exp::progress((series.len() * 2) as u64, "rtu-qos fig. 7");
    let mut worst: Vec<(Series, usize, f64)> = Vec::new();
    for spinners in [0, SPINNERS] {
        for &s in &series {
            let spin = Spinners::start(spinners, (plan.warm + plan.measure).as_secs_f64() + 5.0)?;
            let p = match s {
                Series::LazynetFifo | Series::LazynetCfs => lazynet_point(&plan, s.fifo()),
                Series::LinuxCfs | Series::LinuxFifo => linux_point(&plan, s.fifo()),
            };
            drop(spin);
            let p = p.with_context(|| format!("{} with {spinners} spinners", s.name()))?;
            let mut w = f64::INFINITY;
            for (i, &m) in p.measured_bps.iter().enumerate() {
                let ratio = m / RATE_BPS as f64;
                w = w.min(ratio);
                let us = |b: Option<u64>| b.map(bound_us).unwrap_or_default();
                let (misses, resp, bound, run_bound) = match p.usage.get(i) {
                    Some(u) => (
                        u.deadline_misses.to_string(),
                        format!("{:.0}", u.max_response_ns as f64 / 1e3),
                        us(p.bound_ns.get(i).copied()),
                        us(p.run_bound_ns.get(i).copied()),
                    ),
                    None => Default::default(),
                };
                res.row(format!(
                    "fig7,{},{spinners},{i},{:.2},{:.2},{:.4},{misses},{resp},{bound},{run_bound},{:.3},,,,",
                    s.name(),
                    RATE_BPS as f64 / 1e6,
                    m / 1e6,
                    ratio,
                    p.host_cpu
                ));
            }
            if !p.usage.is_empty() {
                let misses: u64 = p.usage.iter().map(|u| u.deadline_misses).sum();
                let demoted = p.periodic_at_end.iter().filter(|&&x| !x).count();
                let longest = p
                    .usage
                    .iter()
                    .map(|u| u.max_iteration_ns)
                    .max()
                    .unwrap_or(0);
                let overruns: u64 = p.usage.iter().map(|u| u.overruns).sum();
                let within = |bounds: &[u64]| {
                    p.usage
                        .iter()
                        .zip(bounds)
                        .filter(|(u, &b)| within(u.max_response_ns, b))
                        .count()
                };
                let (within, within_run) = (within(&p.bound_ns), within(&p.run_bound_ns));
                let x = p.exec.unwrap_or_default();
                res.note(format!(
                    "  {} with {spinners} spinners: worst stream {:.2}% of its rate; deadline misses {misses}; overruns {overruns} (longest iteration {} us), demoted {demoted} ({} by a failed re-check of admission, in {} checks); measured worst response within the analysis at admission for {within} of {STREAMS}, within the analysis of the run's own costs for {within_run} of {STREAMS}; host thread on CPU {:.0}% of the time; {} ms stolen, releases up to {:.0} us late; the receive loop ran {} times below the streams (its bucket spent), was woken {} times at an iteration boundary",
                    s.name(),
                    w * 100.0,
                    longest / 1_000,
                    x.readmission_demotions,
                    x.readmission_checks,
                    p.host_cpu * 100.0,
                    p.stolen_ms,
                    p.late_ns as f64 / 1e3,
                    x.system_throttled_runs,
                    x.line_wakes
                ));
                // The scheduler keeps the analysis of what ran, on a run
                // that kept the premise: an unbounded analysis is no
                // guarantee, and counts as missed.
                if s == Series::LazynetFifo && spinners == SPINNERS {
                    let why =
                        premise_broken(p.stolen_ms, p.late_ns, sched_config().release_jitter_ns);
                    checks.judge_in_full_runs(
                        opts.quick,
                        "fig. 7 responses within the run's analysis",
                        why.is_none().then_some(within_run == STREAMS),
                        format!(
                            "Fig. 7 (SCHED_FIFO, {SPINNERS} spinners): every stream's measured worst response within the analysis of the run's own costs: {within_run} of {STREAMS}"
                        ),
                        why.as_deref().unwrap_or(""),
                    );
                }
            } else {
                res.note(format!(
                    "  {} with {spinners} spinners: worst stream {:.2}% of its rate",
                    s.name(),
                    w * 100.0
                ));
            }
            worst.push((s, spinners, w));
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let get = |s: Series, n: usize| worst.iter().find(|w| w.0 == s && w.1 == n).map(|w| w.2);
    if let Some(w) = get(Series::LazynetFifo, SPINNERS) {
        let goal = if opts.quick { 0.95 } else { 0.995 };
        checks.check(
            w >= goal,
            format!(
                "lazynet (SCHED_FIFO) keeps every stream at >= {:.1}% of its rate beside {SPINNERS} spinning processes: worst {:.2}%",
                goal * 100.0,
                w * 100.0
            ),
        );
    }
    if let (Some(l0), Some(l4)) = (get(Series::LinuxCfs, 0), get(Series::LinuxCfs, SPINNERS)) {
        res.note(format!(
            "Linux TCP under CFS: worst stream {:.1}% of its rate alone, {:.1}% beside {SPINNERS} spinning processes",
            l0 * 100.0,
            l4 * 100.0
        ));
    }
    let echo = super::echo::fig8(&mut res, &mut checks, opts)?;
    let mix = super::mix::table2_fig9(&mut res, &mut checks, opts)?;
    admission(&mut res, &mut checks, &plan)?;
    if root {
        let secs = if opts.quick { 2.0 } else { 180.0 };
        let spin = Spinners::start(SPINNERS, secs + 5.0)?;
        let r = periods_run(&mut res, &mut checks, secs, opts.quick);
        drop(spin);
        let out = r?;
        let secs = if opts.quick { 2.0 } else { 20.0 };
        let spin = Spinners::start(SPINNERS, secs + 5.0)?;
        let r = threads_run(&mut res, &out.shapes, secs, out.switches);
        drop(spin);
        r?;
        let spin = Spinners::start(SPINNERS, 8.0)?;
        let r = forced_run(&mut res, &mut checks, 2.0, opts.quick);
        drop(spin);
        r?;
    }
    idle_cpu(&mut res, &mut checks, &plan)?;
    checks.finish(&mut res, opts.quick)?;
    res.write(opts)?;
    plot(&res, &worst, &echo, &mix)?;
    Ok(())
}

/// Adds periodic owners shaped like the Fig. 7 streams until one is
/// refused; reports the refusal and the analysis of the admitted set.
fn admission(res: &mut Results, checks: &mut Checks, plan: &Plan) -> anyhow::Result<()> {
    let mut ex: Executor<()> = Executor::new(VirtualClock::new(), sched_config());
    let mut admitted = 0;
    let refusal = loop {
        match ex.add_owner(&format!("stream{admitted}"), Class::Periodic(plan.periodic)) {
            Ok(_) => admitted += 1,
            Err(e) => break e,
        }
        if admitted > 64 {
            bail!("admission never refused");
        }
    };
    let v = ex.analysis();
    let worst = v.iter().map(|v| v.response_ns).max().unwrap_or(0);
    res.note(format!(
        "admission: {admitted} streams of T = {:.2} ms, B = {}, c = {} us admitted; the next refused: {refusal}; worst-case response of the admitted set {:.2} ms",
        plan.periodic.period_ns as f64 / 1e6,
        plan.periodic.batch,
        plan.periodic.iteration_ns / 1_000,
        worst as f64 / 1e6
    ));
    for x in &v {
        res.row(format!(
            "admission,{},,,,,,,,{:.0},,,,,,",
            x.name,
            x.response_ns as f64 / 1e3
        ));
    }
    checks.check(
        admitted >= STREAMS && v.iter().all(|x| x.meets()),
        format!("the {STREAMS} streams of Fig. 7 are admitted ({admitted} fit) and every admitted one meets its period in the analysis"),
    );
    Ok(())
}

/// The handlers of the periods run: (period, batch) with iterations of
/// `ITER_US` declared; shapes from 0.5 to 4 ms, as many as admission takes.
const PERIODS_US: [u64; 8] = [500, 700, 1000, 1300, 2000, 2500, 3000, 4000];
/// Share of the core each handler of the periods run asks.
const PERIODS_SHARE: f64 = 0.13;
const ITER_US: u64 = 30;

/// One handler of the periods run.
struct Row {
    name: String,
    usage: OwnerUsage,
    /// Worst-case response by the analysis at admission (declared costs).
    declared: u64,
    /// Worst-case response by the analysis of the run's own costs: the
    /// longest iteration and the latest release seen, where larger.
    observed: u64,
    /// Still periodic at the end (not demoted).
    periodic: bool,
}

/// Real-time periodic handlers on the host core, beside spinning
/// processes, for `secs`: synthetic iterations (the Fig. 7 streams have too
/// long a period to reach 10^6 periods in minutes). Handlers are added in
/// the order of `PERIODS_US`, with batches that fill the core, until
/// admission refuses one (demotion off). Each iteration busies itself ([`crate::infra::exp::busy_for`]) for between a third and a
/// half of its declared cost: the rest is room for the clock reads and the
/// interrupts of a virtual machine, so that what the run holds against the
/// analysis at admission is the scheduling, not a declaration too tight.
/// Reports per handler the measured worst response beside two analyses: at
/// admission (declared costs and release jitter) and of the run's own costs
/// (each handler's longest iteration and the latest release, where larger:
/// a virtual machine's stall breaks the declared premise, and the
/// scheduler is then held to what the analysis says of what happened);
/// and the deadline misses over all periods.
fn periods_run(
    res: &mut Results,
    checks: &mut Checks,
    secs: f64,
    quick: bool,
) -> anyhow::Result<PeriodsOut> {
    let iter_ns = ITER_US * 1_000;
    let th = std::thread::spawn(move || -> anyhow::Result<PeriodsThread> {
        Role::Server.pin();
        set_sched_class(SchedClass::Fifo(10)).context("SCHED_FIFO")?;
        // No network here, so no system bucket; releases are seen up to a
        // sleep's overshoot late (`std::thread::sleep` under SCHED_FIFO).
        // Demotion off: these handlers always have work, so a demoted one
        // would take the whole core as best-effort, and a stall of this
        // guest in three periods running demotes one (the rule is checked
        // in the executor's tests).
        let cfg = SchedConfig {
            demote_after: u32::MAX,
            ..bare_config()
        };
        let mut ex: Executor<u64> = Executor::new(TscClock::new(), cfg);
        let mut owners = Vec::new();
        let mut refusal = String::new();
        for (i, &t) in PERIODS_US.iter().enumerate() {
            let batch = ((t as f64 * PERIODS_SHARE) / ITER_US as f64)
                .ceil()
                .max(1.0) as u32;
            let p = Periodic {
                period_ns: t * 1_000,
                batch,
                iteration_ns: iter_ns,
            };
            match ex.add_owner(&format!("h{i}-{t}us"), Class::Periodic(p)) {
                Ok(o) => owners.push(o),
                Err(e) => {
                    refusal = e.to_string();
                    break;
                }
            }
        }
        let admitted_bounds = ex.analysis();
        let mut seed = 0x9e37_79b9u64;
        for &o in &owners {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let mut r = seed;
            ex.spawn(o, move |cx: &mut Cx<'_>, sink: &mut u64| {
                for _ in 0..64 {
                    *sink = synthetic_iteration(&mut r, iter_ns, *sink);
                    if !cx.iteration_done() {
                        break;
                    }
                }
                Status::Ready
            })
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        let shapes: Vec<Periodic> = owners
            .iter()
            .filter_map(|&o| match ex.owner_info(o) {
                Some((_, Class::Periodic(p))) => Some(p),
                _ => None,
            })
            .collect();
        let steal0 = steal_ms(Role::Server.cpu());
        let on = OnCpu::start();
        let (sw0, t0) = (ctx_switches(), Instant::now());
        drive(&mut ex, secs, WAKE_EARLY);
        let switches = (ctx_switches() - sw0) as f64 / t0.elapsed().as_secs_f64();
        let on_cpu = on.fraction();
        let stolen = steal_ms(Role::Server.cpu()).saturating_sub(steal0);
        let late = ex.stats().max_release_late_ns;
        let _ = set_sched_class(SchedClass::Normal);
        // The analysis again with what the run showed where it exceeds
        // the declarations: each handler's longest iteration and the
        // latest release. A stall of the virtual machine inside an
        // iteration or a wake-up breaks the declared premise; the
        // scheduler is still held to the analysis of what happened.
        let observed = ex.observed_analysis();
        let bound_of = |v: &[ResponseTime], name: &str| {
            v.iter().find(|x| x.name == name).map(|x| x.response_ns)
        };
        let out = owners
            .iter()
            .map(|&o| {
                let (name, class) = ex.owner_info(o).unwrap_or(("", Class::Idle));
                Row {
                    name: name.to_string(),
                    usage: ex.usage(o),
                    declared: bound_of(&admitted_bounds, name).unwrap_or(u64::MAX),
                    observed: bound_of(&observed, name).unwrap_or(u64::MAX),
                    periodic: matches!(class, Class::Periodic(_)),
                }
            })
            .collect();
        Ok((out, refusal, stolen, late, on_cpu, shapes, switches))
    });
    let (rows, refusal, stolen, late, on_cpu, shapes, switches) = th
        .join()
        .map_err(|_| anyhow::anyhow!("periods thread panicked"))??;
    let part = "periods";
    let periods: u64 = rows.iter().map(|r| r.usage.releases).sum();
    let misses: u64 = rows.iter().map(|r| r.usage.deadline_misses).sum();
    let skipped: u64 = rows.iter().map(|r| r.usage.skipped_releases).sum();
    let overruns: u64 = rows.iter().map(|r| r.usage.overruns).sum();
    let demoted = rows.iter().filter(|r| !r.periodic).count();
    let within_declared = rows
        .iter()
        .filter(|r| within(r.usage.max_response_ns, r.declared))
        .count();
    // Among the handlers still admitted at the end (a demoted one has no
    // analysis any more).
    let admitted = rows.iter().filter(|r| r.periodic).count();
    let within_observed = rows
        .iter()
        .filter(|r| r.periodic && within(r.usage.max_response_ns, r.observed))
        .count();
    for r in &rows {
        res.row(format!(
            "{part},{},{SPINNERS},,,,,{},{:.0},{},{},,,,,",
            r.name,
            r.usage.deadline_misses,
            r.usage.max_response_ns as f64 / 1e3,
            bound_us(r.declared),
            bound_us(r.observed),
        ));
    }
    res.note(format!(
        "{part}: {} periodic handlers admitted ({}), beside {SPINNERS} spinning processes for {secs:.0} s under SCHED_FIFO: {periods} periods, {misses} deadline misses ({skipped} of them releases skipped), {overruns} iterations over their declared cost, {demoted} handlers demoted; releases seen at most {:.0} us late (declared {:.0}); measured worst response within the analysis at admission for {within_declared} of {n}, within the analysis of the run's own costs for {within_observed} of {n}; the executor's thread on its CPU {:.0}% of the time, {switches:.0} context switches a second; the hypervisor took {stolen} ms from the host's vCPU meanwhile",
        rows.len(),
        if refusal.is_empty() { "none refused".to_string() } else { format!("the next refused: {refusal}") },
        late as f64 / 1e3,
        bare_config().release_jitter_ns as f64 / 1e3,
        on_cpu * 100.0,
        n = rows.len(),
    ));
    // A vCPU the hypervisor stops stops every handler: no scheduler inside
    // the guest can keep a deadline through it. Deadlines are held only
    // where the run kept the declared premise: no vCPU stolen, releases
    // seen within the declared jitter (later is a wake-up's tail on this
    // guest, and the period it lands in is lost whatever the scheduler
    // does), and no handler demoted (the executor's own finding that a
    // handler's work ran well over its declaration period after period:
    // here, a vCPU slowed by its host, since the work is fixed).
    let jitter = bare_config().release_jitter_ns;
    let why = premise_broken(stolen, late, jitter).or_else(|| {
        (demoted > 0).then(|| {
            format!("{demoted} handlers demoted: their fixed work ran over its declared cost period after period")
        })
    });
    checks.judge_in_full_runs(
        quick,
        "periods: no deadline misses",
        why.is_none().then_some(misses == 0),
        format!("no deadline misses of admitted handlers: {misses} over {periods} periods"),
        why.as_deref().unwrap_or(""),
    );
    // The response bound holds for any run that kept the premise, given
    // its own costs (its longest iterations, its latest release); an
    // unbounded analysis is no guarantee and does not hold.
    let why = premise_broken(stolen, 0, jitter)
        .or_else(|| (admitted == 0).then(|| "every handler was demoted".to_string()));
    checks.judge_in_full_runs(
        quick,
        "periods: responses within the run's analysis",
        why.is_none().then_some(within_observed == admitted),
        format!(
            "every admitted handler's measured worst response is within the analysis of the run's own costs: {within_observed} of {admitted}"
        ),
        why.as_deref().unwrap_or(""),
    );
    Ok(PeriodsOut { shapes, switches })
}

/// What the periods run's thread returns: rows, the refusal, ms stolen,
/// the latest release (ns), the thread's share of its CPU, the admitted
/// shapes and context switches per second.
type PeriodsThread = (Vec<Row>, String, u64, u64, f64, Vec<Periodic>, f64);

/// What the periods run hands to the thread-per-handler run.
struct PeriodsOut {
    /// The admitted handlers' shapes.
    shapes: Vec<Periodic>,
    /// The executor thread's context switches per second.
    switches: f64,
}

/// This thread's context switches so far (voluntary and not), from
/// `/proc/thread-self/status`; 0 if unknown.
fn ctx_switches() -> u64 {
    let Ok(st) = std::fs::read_to_string("/proc/thread-self/status") else {
        return 0;
    };
    st.lines()
        .filter(|l| l.contains("ctxt_switches:"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// The periods run's handlers the way one would write them without an
/// executor: one `SCHED_FIFO` thread per handler, priorities rate-monotonic,
/// all on the host core beside the spinning processes; each sleeps to its
/// release, then does its batch (the same work per iteration). Counts the
/// threads' context switches, deadline misses (a batch done after the next
/// release) and worst response, for `secs`.
fn threads_run(
    res: &mut Results,
    shapes: &[Periodic],
    secs: f64,
    lazynet_switches: f64,
) -> anyhow::Result<()> {
    if shapes.is_empty() {
        return Ok(());
    }
    let start = Instant::now() + Duration::from_millis(100);
    let until = start + Duration::from_secs_f64(secs);
    // Shorter period, higher priority.
    let mut order: Vec<usize> = (0..shapes.len()).collect();
    order.sort_by_key(|&i| shapes[i].period_ns);
    let handles: Vec<_> = shapes
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let rank = order.iter().position(|&x| x == i).unwrap_or(0);
            let prio = 40u8.saturating_sub(rank as u8);
            std::thread::spawn(move || -> anyhow::Result<(u64, u64, u64, u64)> {
                Role::Server.pin();
                set_sched_class(SchedClass::Fifo(prio)).context("SCHED_FIFO")?;
                let sw0 = ctx_switches();
                let (mut releases, mut misses, mut worst) = (0u64, 0u64, 0u64);
                let mut r = 0x9e37_79b9u64 ^ i as u64;
                let mut sink = 0u64;
                let mut k = 0u64;
                loop {
                    let release = start + Duration::from_nanos(k * p.period_ns);
                    if release >= until {
                        break;
                    }
                    let now = Instant::now();
                    if release > now {
                        std::thread::sleep(release - now);
                    }
                    for _ in 0..p.batch {
                        sink = synthetic_iteration(&mut r, p.iteration_ns, sink);
                    }
                    let resp = release.elapsed().as_nanos() as u64;
                    worst = worst.max(resp);
                    if resp > p.period_ns {
                        misses += 1;
                    }
                    releases += 1;
                    // A batch that ran past later releases skips them.
                    k = k.max(resp / p.period_ns.max(1)) + 1;
                }
                std::hint::black_box(sink);
                let sw = ctx_switches() - sw0;
                let _ = set_sched_class(SchedClass::Normal);
                Ok((releases, misses, worst, sw))
            })
        })
        .collect();
    let mut total_sw = 0u64;
    let (mut releases, mut misses) = (0u64, 0u64);
    for (h, p) in handles.into_iter().zip(shapes) {
        let (rel, mis, worst, sw) = h
            .join()
            .map_err(|_| anyhow::anyhow!("handler thread panicked"))??;
        total_sw += sw;
        releases += rel;
        misses += mis;
        res.row(format!(
            "threads,{}us,{SPINNERS},,,,,{mis},{:.0},,,,,,,",
            p.period_ns / 1_000,
            worst as f64 / 1e3
        ));
    }
    let per_s = total_sw as f64 / secs;
    res.note(format!(
        "threads: the same {} handlers as one SCHED_FIFO thread each (rate-monotonic priorities) beside {SPINNERS} spinning processes for {secs:.0} s: {per_s:.0} context switches a second against the executor's {lazynet_switches:.0} ({:.1}x); {misses} deadline misses in {releases} periods",
        shapes.len(),
        per_s / lazynet_switches.max(1.0)
    ));
    Ok(())
}

/// One iteration of the synthetic handlers: busy for a third to a half of
/// the declared `iteration_ns` (the draw from the xorshift state `r`).
fn synthetic_iteration(r: &mut u64, iteration_ns: u64, sink: u64) -> u64 {
    *r ^= *r << 13;
    *r ^= *r >> 7;
    *r ^= *r << 17;
    let ns = iteration_ns / 3 + *r % (iteration_ns / 6 + 1);
    exp::busy_for(ns, sink ^ *r)
}

/// Whether a measured worst response `r` is within the analysis's bound:
/// never when the bound is unbounded (the busy window does not close: the
/// analysis gives no guarantee, so none is kept).
pub(super) fn within(r: u64, bound: u64) -> bool {
    bound != u64::MAX && r <= bound
}

/// Why a run's premise failed, if it did: the hypervisor took the host's
/// vCPU, or a release was seen later than the jitter admission assumed.
/// Claims that hold only on the declared premise are then not judged.
pub(super) fn premise_broken(stolen_ms: u64, late_ns: u64, jitter_ns: u64) -> Option<String> {
    if stolen_ms > 0 {
        Some(format!(
            "the hypervisor took {stolen_ms} ms of the host's vCPU"
        ))
    } else if late_ns > jitter_ns {
        Some(format!(
            "a release was seen {:.0} us late, beyond the declared {:.0} us",
            late_ns as f64 / 1e3,
            jitter_ns as f64 / 1e3
        ))
    } else {
        None
    }
}

/// A response bound in µs for the CSV ("unbounded": the busy window never
/// closes).
pub(super) fn bound_us(ns: u64) -> String {
    if ns == u64::MAX {
        "unbounded".to_string()
    } else {
        format!("{:.0}", ns as f64 / 1e3)
    }
}

/// Milliseconds the hypervisor has taken from `cpu` (its "steal" time in
/// `/proc/stat`); 0 if unknown.
pub(super) fn steal_ms(cpu: usize) -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return 0;
    };
    let name = format!("cpu{cpu}");
    let ticks: u64 = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))
        .and_then(|l| l.split_whitespace().nth(8))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // USER_HZ is 100 on Linux.
    ticks * 10
}

/// The executor set-up of the synthetic runs: no network, so no system
/// bucket; a release is seen up to a sleep's overshoot late
/// (`std::thread::sleep` under SCHED_FIFO).
fn bare_config() -> SchedConfig {
    SchedConfig {
        system: Bucket {
            share_ppm: 0,
            burst_ns: 0,
        },
        release_jitter_ns: 150_000,
        ..sched_config()
    }
}

/// How long before a release the periods run stops sleeping and polls: a
/// sleep on this guest overshoots (`bench wakeup`, docs/PERFORMANCE.md).
/// Not more: a SCHED_FIFO thread that polls through its idle time passes
/// Linux's real-time limit (95% of each second) and is throttled for the
/// rest of the second, which every handler sees as a stall.
const WAKE_EARLY: Duration = Duration::from_micros(30);

/// Runs `ex` on real time for `secs` after a 200-ms warm-up (forgotten:
/// the first periods see cold caches); when idle it sleeps until `early`
/// before the next release, then polls.
fn drive(ex: &mut Executor<u64>, secs: f64, early: Duration) {
    let mut sink = 0u64;
    let t0 = Instant::now();
    let warm = Duration::from_millis(200);
    let mut warming = true;
    while t0.elapsed() < warm + Duration::from_secs_f64(secs) {
        if warming && t0.elapsed() >= warm {
            ex.reset_usage();
            warming = false;
        }
        if ex.run_once(&mut sink).is_none() {
            if let Some(r) = ex.next_release_ns() {
                let wait = Duration::from_nanos(r.saturating_sub(ex.now_ns()));
                if wait > early {
                    std::thread::sleep(wait - early);
                } else {
                    std::hint::spin_loop();
                }
            }
        }
    }
    std::hint::black_box(sink);
}

/// A set the analysis admits because its lower-priority handler declares
/// less than it uses: `hi` (T = 4 ms) takes about 1.5 ms per period as
/// declared, `lo` (T = 6 ms) declares 2.1 ms and takes about 3.2 ms. The
/// core is not full (~90%), so Linux does not throttle the SCHED_FIFO
/// thread, but rate-monotonic order cannot always fit `lo` in its period
/// (3.2 + 2 × 1.5 > 6 ms when both are released together, every other
/// `lo` period): `lo` must miss, `hi` must not. Demotion is off.
fn forced_run(
    res: &mut Results,
    checks: &mut Checks,
    secs: f64,
    quick: bool,
) -> anyhow::Result<()> {
    type Rows = Vec<(String, OwnerUsage, u64)>;
    let th = std::thread::spawn(move || -> anyhow::Result<(Rows, u64, u64)> {
        Role::Server.pin();
        set_sched_class(SchedClass::Fifo(10)).context("SCHED_FIFO")?;
        let cfg = SchedConfig {
            demote_after: u32::MAX,
            ..bare_config()
        };
        let mut ex: Executor<u64> = Executor::new(TscClock::new(), cfg);
        let shapes = [
            ("hi-4ms", 4_000_000, 100, 16_000),
            ("lo-6ms", 6_000_000, 210, 10_000),
        ];
        let mut owners = Vec::new();
        for (name, period_ns, batch, iteration_ns) in shapes {
            let p = Periodic {
                period_ns,
                batch,
                iteration_ns,
            };
            let o = ex
                .add_owner(name, Class::Periodic(p))
                .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            ex.spawn(o, move |cx: &mut Cx<'_>, sink: &mut u64| {
                for _ in 0..64 {
                    *sink = exp::busy_for(15_000, *sink);
                    if !cx.iteration_done() {
                        break;
                    }
                }
                Status::Ready
            })
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            owners.push(o);
        }
        let bounds = ex.analysis();
        let steal0 = steal_ms(Role::Server.cpu());
        // Sleeps to each release: the set keeps the core ~90% busy, and any
        // polling on top would reach Linux's real-time limit.
        drive(&mut ex, secs, Duration::ZERO);
        let stolen = steal_ms(Role::Server.cpu()).saturating_sub(steal0);
        let late = ex.stats().max_release_late_ns;
        let _ = set_sched_class(SchedClass::Normal);
        let rows = owners
            .iter()
            .zip(&bounds)
            .map(|(&o, v)| (v.name.clone(), ex.usage(o), v.response_ns))
            .collect();
        Ok((rows, stolen, late))
    });
    let (rows, stolen, late) = th
        .join()
        .map_err(|_| anyhow::anyhow!("forced-set thread panicked"))??;
    for (name, u, bound) in &rows {
        res.row(format!(
            "forced,{name},{SPINNERS},,,,,{},{:.0},{:.0},,,,,,",
            u.deadline_misses,
            u.max_response_ns as f64 / 1e3,
            *bound as f64 / 1e3
        ));
    }
    let [(_, hi, _), (_, lo, _)] = rows.as_slice() else {
        bail!("the forced set has two handlers");
    };
    res.note(format!(
        "forced: an admitted set whose lower-priority handler uses about 1.5x its declaration, {secs:.0} s under SCHED_FIFO: hi {} misses of {} periods, lo {} of {} (worst response {:.2} ms against its 6-ms period); the hypervisor took {stolen} ms of the vCPU",
        hi.deadline_misses,
        hi.releases,
        lo.deadline_misses,
        lo.releases,
        lo.max_response_ns as f64 / 1e6
    ));
    // The lower-priority handler misses regularly, whatever the machine
    // does. The other misses none where the run kept the premise: releases
    // seen within the declared jitter, no iteration stretched by a stall,
    // no vCPU stolen (a stall of the guest, or Linux throttling a real-time
    // thread, loses the periods it covers, whatever the scheduler does).
    checks.check(
        lo.deadline_misses * 10 >= lo.releases,
        format!(
            "a forced unschedulable set misses in its lowest-priority handler: {} of its {} periods",
            lo.deadline_misses, lo.releases
        ),
    );
    // A stall while a handler runs shows as a long iteration (of 15 µs of
    // work); one while the executor sleeps, as a late release. A stall
    // shorter than the slack `hi` has in the analysis cannot make it miss.
    let jitter = bare_config().release_jitter_ns;
    let longest = hi.max_iteration_ns.max(lo.max_iteration_ns);
    let hi_slack = 4_000_000u64.saturating_sub(rows[0].2);
    let why = premise_broken(stolen, late, jitter).or_else(|| {
        (longest > hi_slack).then(|| {
            format!(
                "an iteration of {:.0} us, beyond the {:.0} us of slack",
                longest as f64 / 1e3,
                hi_slack as f64 / 1e3
            )
        })
    });
    checks.judge_in_full_runs(
        quick,
        "forced: the higher-priority handler misses none",
        why.is_none().then_some(hi.deadline_misses == 0),
        format!(
            "the forced set's higher-priority handler misses none: {} of {}",
            hi.deadline_misses, hi.releases
        ),
        why.as_deref().unwrap_or(""),
    );
    Ok(())
}

/// The host's CPU with the six periodic owners set up and no traffic.
fn idle_cpu(res: &mut Results, checks: &mut Checks, plan: &Plan) -> anyhow::Result<()> {
    let (_client, server) = stacks()?;
    let th = std::thread::spawn({
        let p = plan.periodic;
        move || -> anyhow::Result<f64> {
            Role::Server.pin();
            let mut h = Host::new(server, App::default(), TscClock::new(), host_config())
                .map_err(|e| anyhow::anyhow!("host: {e}"))?;
            for i in 0..STREAMS {
                h.add_owner(&format!("stream{i}"), Class::Periodic(p))
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            }
            h.run_for(100_000_000);
            let on = OnCpu::start();
            h.run_for(1_000_000_000);
            Ok(on.fraction())
        }
    });
    let cpu = th
        .join()
        .map_err(|_| anyhow::anyhow!("host thread panicked"))??;
    res.note(format!(
        "idle: a sleeping host with the six periodic owners and no traffic is on its CPU {:.2}% of the time",
        cpu * 100.0
    ));
    checks.check(
        cpu < 0.05,
        format!(
            "an idle host costs almost nothing: {:.2}% of its core (< 5%)",
            cpu * 100.0
        ),
    );
    Ok(())
}

pub(super) fn host_config() -> HostConfig {
    let mut c = HostConfig::for_mode(ReceiveMode::SoftLrp).sleeping();
    c.sched = sched_config();
    c
}

/// The two stacks on a wire with 16,384 buffers: with sixteen bulk
/// streams in flight (Fig. 8) the default 1,024 would run out at the
/// client, and a send that finds no buffer is retried a millisecond later.
pub(super) fn stacks() -> anyhow::Result<(Stack<WireEnd>, Stack<WireEnd>)> {
    let (a, b) = WirePair::new(WireConfig {
        buf_count: 16_384,
        ..WireConfig::default()
    })?;
    let cfg = |addr, seed| StackConfig {
        addr,
        prefix_len: 24,
        seed,
        mode: ReceiveMode::SoftLrp,
        ..StackConfig::default()
    };
    let mut client = Stack::new(a, cfg(CLIENT, 21));
    let mut server = Stack::new(b, cfg(HOST, 22));
    client.set_neighbor(HOST, server.mac());
    server.set_neighbor(CLIENT, client.mac());
    Ok((client, server))
}

#[derive(Default)]
pub(super) struct App {
    pub(super) sink: u64,
}

pub(super) type St = HostState<WireEnd, App>;

/// The handler's one connection: `conn`, or the first one `listener`
/// accepts (registered to the running task), or `None` while there is none.
pub(super) fn accepted(
    st: &mut HostState<WireEnd, impl Sized>,
    cx: &mut Cx<'_>,
    listener: TcpListener,
    conn: &mut Option<TcpStream>,
    now: u64,
) -> Option<TcpStream> {
    if conn.is_none() {
        let h = st.stack.listener_mut(listener).accept(now).ok()?;
        st.register_tcp(h, cx.owner(), cx.task());
        *conn = Some(h);
    }
    *conn
}

/// Polls `client` until every connection in `conns` is established (at
/// most 5 s); false if one is not.
pub(super) fn establish(client: &mut Stack<WireEnd>, conns: &[TcpStream]) -> bool {
    let up = Instant::now();
    while up.elapsed() < Duration::from_secs(5) {
        let now = client.now();
        client.poll(now);
        client.tcp_service(now, 256);
        if conns
            .iter()
            .all(|&c| client.tcp_mut(c).state(now) == Ok(State::Established))
        {
            return true;
        }
        client.nic_mut().wait(Some(100_000));
    }
    false
}

/// A stream's handler: the stream's TCP input and, for every complete
/// message, the application's work — one message per iteration.
pub(super) fn stream_handler(
    listener: TcpListener,
    consumed: Arc<AtomicU64>,
    work_iters: u32,
) -> impl FnMut(&mut Cx<'_>, &mut St) -> Status {
    let mut conn: Option<TcpStream> = None;
    let mut buf = vec![0u8; MSG].into_boxed_slice();
    move |cx, st| {
        for _ in 0..64 {
            // About one message's segments (and their ACKs) per iteration;
            // more only while no message is complete.
            let mut served = st.serve_tcp(cx, SEGMENTS_PER_MSG);
            let now = st.stack.now();
            let Some(h) = accepted(st, cx, listener, &mut conn, now) else {
                return Status::Wait;
            };
            // Bounded: a few more rounds while segments keep coming.
            let mut rounds = 0;
            loop {
                match st.stack.tcp(h).recv_queue() {
                    Ok(q) if q >= MSG => break,
                    Ok(_) if served > 0 && rounds < 4 => {
                        served = st.serve_tcp(cx, SEGMENTS_PER_MSG);
                        rounds += 1;
                    }
                    _ => return Status::Wait,
                }
            }
            let mut got = 0;
            while got < MSG {
                match st.stack.tcp_mut(h).recv(&mut buf[got..], now) {
                    Ok(n) if n > 0 => got += n,
                    _ => break,
                }
            }
            st.app.sink = exp::work(work_iters, st.app.sink ^ u64::from(buf[0]));
            consumed.fetch_add(got as u64, Ordering::Relaxed);
            if !cx.iteration_done() {
                return Status::Ready;
            }
        }
        Status::Ready
    }
}

fn lazynet_point(plan: &Plan, fifo: bool) -> anyhow::Result<Point> {
    let (mut client, mut server) = stacks()?;
    let mut listeners = Vec::new();
    for i in 0..STREAMS {
        listeners.push(server.tcp_listen(SocketAddrV4::new(HOST, PORT + i as u16), None, None)?);
    }
    let consumed: Arc<Vec<AtomicU64>> = Arc::new((0..STREAMS).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let (p, work_iters) = (plan.periodic, plan.work_iters);
    let max = plan.warm + plan.measure + Duration::from_secs(20);
    let host = {
        let (consumed, stop) = (consumed.clone(), stop.clone());
        std::thread::Builder::new().name("rtu-host".into()).spawn(
            move || -> anyhow::Result<Point> {
                Role::Server.pin();
                if fifo {
                    set_sched_class(SchedClass::Fifo(10)).context("SCHED_FIFO for the host")?;
                }
                let mut h = Host::new(server, App::default(), TscClock::new(), host_config())
                    .map_err(|e| anyhow::anyhow!("host: {e}"))?;
                let mut owners = Vec::new();
                for (i, &l) in listeners.iter().enumerate() {
                    let counter = Arc::new(AtomicU64::new(0));
                    let (o, t) = h
                        .add_owner_with_handler(
                            &format!("stream{i}"),
                            Class::Periodic(p),
                            stream_handler(l, counter.clone(), work_iters),
                        )
                        .map_err(|e| anyhow::anyhow!("stream {i}: {e}"))?;
                    h.state_mut().register_listener(l, o, t);
                    owners.push((o, counter));
                }
                // The analysis at admission, from the declared costs: what the
                // measured responses are held against.
                let bounds = h.executor().analysis();
                let on = OnCpu::start();
                let steal0 = steal_ms(Role::Server.cpu());
                let t0 = Instant::now();
                while !stop.load(Ordering::Relaxed) && t0.elapsed() < max {
                    h.run_for(2_000_000);
                    for (i, (_, c)) in owners.iter().enumerate() {
                        consumed[i].store(c.load(Ordering::Relaxed), Ordering::Relaxed);
                    }
                }
                let host_cpu = on.fraction();
                let stolen_ms = steal_ms(Role::Server.cpu()).saturating_sub(steal0);
                let late_ns = h.executor().stats().max_release_late_ns;
                let _ = set_sched_class(SchedClass::Normal);
                // And the analysis of the run's own costs and lateness.
                let observed = h.executor().observed_analysis();
                let mut pt = Point {
                    host_cpu,
                    stolen_ms,
                    late_ns,
                    exec: Some(h.executor().stats()),
                    ..Point::default()
                };
                for (o, _) in &owners {
                    pt.usage.push(h.usage(*o));
                    let (name, class) = h.executor().owner_info(*o).unwrap_or(("", Class::Idle));
                    pt.periodic_at_end.push(matches!(class, Class::Periodic(_)));
                    let of = |v: &[ResponseTime]| {
                        v.iter()
                            .find(|v| v.name == name)
                            .map_or(u64::MAX, |v| v.response_ns)
                    };
                    pt.bound_ns.push(of(&bounds));
                    pt.run_bound_ns.push(of(&observed));
                }
                Ok(pt)
            },
        )?
    };
    // The sender, on the load core.
    Role::Client.pin();
    exp::boost();
    let now = client.now();
    let mut conns = Vec::new();
    for i in 0..STREAMS {
        conns.push(client.tcp_connect(SocketAddrV4::new(HOST, PORT + i as u16), None, now)?);
    }
    establish(&mut client, &conns);
    let measured = pace(plan, &consumed, |target, sent, chunk| {
        let now = client.now();
        for (i, &c) in conns.iter().enumerate() {
            top_up(target, &mut sent[i], chunk, |b| {
                client.tcp_mut(c).send(b, now).unwrap_or(0)
            });
        }
        client.poll(now);
        client.tcp_service(now, 256);
        client.nic_mut().wait(Some(50_000));
    });
    stop.store(true, Ordering::Relaxed);
    let mut pt = host
        .join()
        .map_err(|_| anyhow::anyhow!("host thread panicked"))??;
    pt.measured_bps = measured;
    Ok(pt)
}

/// A warm-up then a measurement, on the wall clock: how much counters of
/// consumed bytes grew, per second of the measurement.
pub(super) struct Window {
    start: Instant,
    warm: Duration,
    end: Duration,
    /// The counters when the measurement began, and when that was.
    first: Option<(Duration, Vec<u64>)>,
}

/// One round of a [`Window`].
pub(super) enum Tick {
    /// Still running: the time since the start.
    Running(Duration),
    /// Over: what each counter grew by, in bit/s of the measurement.
    Done(Vec<f64>),
}

impl Window {
    pub(super) fn start(warm: Duration, measure: Duration) -> Window {
        Window {
            start: Instant::now(),
            warm,
            end: warm + measure,
            first: None,
        }
    }

    /// Called every round with a way to read the counters (read only when
    /// the measurement begins and ends).
    pub(super) fn tick(&mut self, counters: impl Fn() -> Vec<u64>) -> Tick {
        let el = self.start.elapsed();
        if self.first.is_none() && el >= self.warm {
            self.first = Some((el, counters()));
        }
        if el < self.end {
            return Tick::Running(el);
        }
        let (t0, c0) = self.first.take().unwrap_or_else(|| (el, counters()));
        let secs = (el - t0).as_secs_f64().max(1e-9);
        Tick::Done(
            c0.iter()
                .zip(counters())
                .map(|(a, b)| b.saturating_sub(*a) as f64 * 8.0 / secs)
                .collect(),
        )
    }
}

/// The sender's side of Fig. 7: round after round, `round(target, sent,
/// chunk)` brings every stream's `sent` bytes up to `target`, what the
/// specified rate allows by now, for the warm-up and the measurement.
/// Returns what each receiving application consumed (`consumed`) per
/// second of the measurement, in bit/s.
fn pace(
    plan: &Plan,
    consumed: &[AtomicU64],
    mut round: impl FnMut(u64, &mut [u64; STREAMS], &[u8]),
) -> Vec<f64> {
    let chunk = vec![0x5au8; 16 * 1024];
    let mut sent = [0u64; STREAMS];
    let mut w = Window::start(plan.warm, plan.measure);
    loop {
        let counters = || consumed.iter().map(|x| x.load(Ordering::Relaxed)).collect();
        let el = match w.tick(counters) {
            Tick::Running(el) => el,
            Tick::Done(bps) => return bps,
        };
        let target = (RATE_BPS as f64 / 8.0 * el.as_secs_f64()) as u64;
        round(target, &mut sent, &chunk);
    }
}

/// Writes (`write` returns what it took) up to `target - sent` bytes of
/// `chunk`, in at most eight writes.
pub(super) fn top_up(
    target: u64,
    sent: &mut u64,
    chunk: &[u8],
    mut write: impl FnMut(&[u8]) -> usize,
) {
    for _ in 0..8 {
        let want = target.saturating_sub(*sent).min(chunk.len() as u64) as usize;
        if want == 0 {
            return;
        }
        match write(&chunk[..want]) {
            0 => return,
            n => *sent += n as u64,
        }
    }
}

fn linux_point(plan: &Plan, fifo: bool) -> anyhow::Result<Point> {
    let consumed: Arc<Vec<AtomicU64>> = Arc::new((0..STREAMS).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let mut addrs = Vec::new();
    let mut receivers = Vec::new();
    for i in 0..STREAMS {
        let l = StdListener::bind("127.0.0.1:0")?;
        addrs.push(l.local_addr()?);
        let (consumed, stop) = (consumed.clone(), stop.clone());
        let work_iters = plan.work_iters;
        receivers.push(std::thread::spawn(move || -> anyhow::Result<()> {
            Role::Server.pin();
            if fifo {
                set_sched_class(SchedClass::Fifo(10)).context("SCHED_FIFO for a receiver")?;
            }
            let r = linux_receiver(&l, MSG, work_iters, &stop, |n| {
                consumed[i].fetch_add(n, Ordering::Relaxed);
            });
            let _ = set_sched_class(SchedClass::Normal);
            r
        }));
    }
    Role::Client.pin();
    exp::boost();
    let mut conns = Vec::new();
    for a in &addrs {
        let s = StdStream::connect(a)?;
        s.set_nodelay(true)?;
        s.set_nonblocking(true)?;
        conns.push(s);
    }
    let measured = pace(plan, &consumed, |target, sent, chunk| {
        for (i, c) in conns.iter_mut().enumerate() {
            top_up(target, &mut sent[i], chunk, |b| c.write(b).unwrap_or(0));
        }
        std::thread::sleep(Duration::from_micros(100));
    });
    stop.store(true, Ordering::Relaxed);
    drop(conns);
    for r in receivers {
        r.join()
            .map_err(|_| anyhow::anyhow!("receiver panicked"))??;
    }
    Ok(Point {
        measured_bps: measured,
        ..Point::default()
    })
}

/// A Linux receiving application: accepts one connection on `l`, reads
/// it in messages of `msg` bytes, spends `work_iters` of [`crate::infra::exp::work`]
/// on each and reports it to `consumed`, until `stop` or the end of the
/// stream.
pub(super) fn linux_receiver(
    l: &StdListener,
    msg: usize,
    work_iters: u32,
    stop: &AtomicBool,
    consumed: impl Fn(u64),
) -> anyhow::Result<()> {
    let (mut s, _) = l.accept()?;
    s.set_read_timeout(Some(Duration::from_millis(50)))?;
    let mut buf = vec![0u8; msg];
    let (mut got, mut sink) = (0usize, 0u64);
    while !stop.load(Ordering::Relaxed) {
        match s.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(_) => continue,
        }
        if got == msg {
            sink = exp::work(work_iters, sink ^ u64::from(buf[0]));
            consumed(msg as u64);
            got = 0;
        }
    }
    std::hint::black_box(sink);
    Ok(())
}

fn plot(
    res: &Results,
    worst: &[(Series, usize, f64)],
    echo: &[super::echo::EchoPoint],
    mix: &super::mix::MixOut,
) -> anyhow::Result<()> {
    let cats: Vec<String> = [0, SPINNERS]
        .iter()
        .map(|n| format!("{n} spinning processes"))
        .collect();
    let mut series: Vec<(String, Vec<f64>)> = Vec::new();
    for s in [
        Series::LazynetFifo,
        Series::LazynetCfs,
        Series::LinuxCfs,
        Series::LinuxFifo,
    ] {
        let v: Vec<f64> = [0, SPINNERS]
            .iter()
            .map(|&n| {
                worst
                    .iter()
                    .find(|w| w.0 == s && w.1 == n)
                    .map_or(0.0, |w| w.2 * 100.0)
            })
            .collect();
        if worst.iter().any(|w| w.0 == s) {
            series.push((s.name().to_string(), v));
        }
    }
    // Fig. 8: p99 of the 4-KiB echo against the bulk streams beside it.
    let mut bulks: Vec<usize> = echo.iter().map(|e| e.2).collect();
    bulks.sort_unstable();
    bulks.dedup();
    let echo_cats: Vec<String> = bulks.iter().map(|b| format!("{b} bulk streams")).collect();
    let mut names: Vec<&str> = Vec::new();
    for e in echo {
        if !names.contains(&e.0) {
            names.push(e.0);
        }
    }
    let echo_series: Vec<(String, Vec<f64>)> = names
        .iter()
        .map(|n| {
            let v = bulks
                .iter()
                .map(|&b| {
                    echo.iter()
                        .find(|e| e.0 == *n && e.1 == 4096 && e.2 == b)
                        .map_or(0.0, |e| e.4)
                })
                .collect();
            (n.to_string(), v)
        })
        .collect();
    let mut panels = vec![crate::infra::plot::Panel::Bars {
        title: "Fig. 7: worst of six guaranteed TCP streams, % of its specified rate",
        x_label: "competing load on the host core",
        y_label: "% of specified rate",
        categories: &cats,
        series: &series,
    }];
    if !echo.is_empty() {
        panels.push(crate::infra::plot::Panel::Bars {
            title: "Fig. 8: 4-KiB TCP echo round trip p99 (bulk streams with 4 spinning processes)",
            x_label: "best-effort load on the host core",
            y_label: "us",
            categories: &echo_cats,
            series: &echo_series,
        });
    }
    // Table II: each stream's measured ÷ specified, per series.
    let mut streams: Vec<String> = Vec::new();
    let mut mix_names: Vec<&str> = Vec::new();
    for &(series, stream, _) in &mix.table {
        if !streams.iter().any(|s| s == stream) {
            streams.push(stream.to_string());
        }
        if !mix_names.contains(&series) {
            mix_names.push(series);
        }
    }
    let table_series: Vec<(String, Vec<f64>)> = mix_names
        .iter()
        .map(|n| {
            let v = streams
                .iter()
                .map(|st| {
                    mix.table
                        .iter()
                        .find(|x| x.0 == *n && x.1 == st)
                        .map_or(0.0, |x| x.2 * 100.0)
                })
                .collect();
            (n.to_string(), v)
        })
        .collect();
    // Fig. 9: the echo's p99 against the message size.
    let mut fig9_series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for &(series, with, size, p99) in &mix.fig9 {
        let name = format!(
            "{series}: {}",
            if with { "with the streams" } else { "alone" }
        );
        match fig9_series.iter_mut().find(|s| s.0 == name) {
            Some(s) => s.1.push((size as f64, p99)),
            None => fig9_series.push((name, vec![(size as f64, p99)])),
        }
    }
    if !mix.table.is_empty() {
        panels.push(crate::infra::plot::Panel::Bars {
            title: "Table II: each stream, % of its specified rate (4 spinning processes)",
            x_label: "stream",
            y_label: "% of specified rate",
            categories: &streams,
            series: &table_series,
        });
    }
    if !mix.fig9.is_empty() {
        panels.push(crate::infra::plot::Panel::Lines {
            title: "Fig. 9: low-delay UDP echo round trip p99",
            x_label: "message bytes",
            y_label: "us",
            series: &fig9_series,
            log_x: true,
            log_y: true,
        });
    }
    crate::infra::plot::figure(&res.path("png"), &panels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unbounded_analysis_keeps_no_response_within_it() {
        // The busy window that never closes (u64::MAX) bounds nothing: not
        // even a response of 0 is "within" it.
        assert!(!within(0, u64::MAX));
        assert!(!within(u64::MAX, u64::MAX));
        assert!(within(10, 10));
        assert!(!within(11, 10));
        assert_eq!(bound_us(u64::MAX), "unbounded");
        assert_eq!(bound_us(1_500), "2");
    }
}
