//! The livelock experiment's kernel-traffic series (LRP Fig. 3, the right
//! panel of `livelock.png`): [`tap_livelock_point`] feeds a lazynet host
//! in one receive mode from a Linux peer namespace, through a TAP device,
//! instead of the emulated NIC.
//!
//! **Owns:** the peer namespace, TAP device and `loadgen` process of each
//! point (removed when the point returns), and the host thread (joined).
//! **May not touch:** the stack's internals (public API only), or the
//! Linux series' namespaces ([`crate::baseline::linux`], whose process and
//! counter helpers it uses).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use lazynet::nic::netns::ip;

use crate::baseline::linux::{
    check_seconds, loadgen_args, parse_loadgen, CpuSnap, LivelockPoint, Proc, SoftirqShare, DRAIN,
    READY_TIMEOUT,
};
use crate::infra::cpus::Role;
use crate::infra::exp::work;

/// lazynet's address on the TAP link of [`tap_livelock_point`].
pub const TAP_OURS: Ipv4Addr = Ipv4Addr::new(10, 204, 0, 2);
/// The kernel side's address (in the peer namespace).
pub const TAP_PEER: Ipv4Addr = Ipv4Addr::new(10, 204, 0, 1);

/// What the lazynet server of [`tap_livelock_point`] keeps.
#[derive(Debug, Default)]
struct TapServer {
    work_iters: u32,
    got: u64,
    hash: u64,
}

/// What the host thread of [`tap_livelock_point`] reports.
#[derive(Debug, Default)]
struct TapRun {
    got: u64,
    channel_full: u64,
    ip_queue_full: u64,
    other_drops: u64,
}

/// The host thread: raises its stop flag and joins it when dropped, so it
/// never outlives the point (it also stops by itself at its own bound).
struct HostThread {
    stop: std::sync::Arc<AtomicBool>,
    th: Option<JoinHandle<anyhow::Result<TapRun>>>,
}

impl HostThread {
    fn join(mut self) -> anyhow::Result<TapRun> {
        self.stop.store(true, Ordering::Relaxed);
        match self.th.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => bail!("the lazynet host thread panicked"),
            None => bail!("the lazynet host thread is gone"),
        }
    }
}

impl Drop for HostThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.th.take() {
            let _ = t.join();
        }
    }
}

type TapHost<N> = lazynet::host::Host<N, TapServer>;

/// Builds the lazynet host of the TAP series on `stack` (one best-effort
/// owner whose task receives a datagram and spends `work(work_iters)` on
/// it), says `ready`, and runs it until `stop` or `bound`.
fn tap_host<N: lazynet::nic::Nic + 'static>(
    stack: lazynet::stack::Stack<N>,
    hcfg: lazynet::host::HostConfig,
    work_iters: u32,
    stop: &AtomicBool,
    bound: Duration,
    ready: mpsc::Sender<()>,
) -> anyhow::Result<TapHost<N>> {
    use lazynet::host::{Host, HostState};
    use lazynet::sched::{Class, Cx, Status, TscClock};

    let app = TapServer {
        work_iters,
        ..TapServer::default()
    };
    let mut host =
        Host::new(stack, app, TscClock::new(), hcfg).map_err(|e| anyhow::anyhow!("host: {e:?}"))?;
    let o = host
        .add_owner("server", Class::BestEffort)
        .map_err(|e| anyhow::anyhow!("host: {e:?}"))?;
    let h = host
        .state_mut()
        .stack
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, TAP_PORT), None)
        .map_err(|e| anyhow::anyhow!("bind: {e:?}"))?;
    let t = host
        .spawn(
            o,
            move |_cx: &mut Cx<'_>, st: &mut HostState<N, TapServer>| {
                let seq = st.stack.udp_mut(h).recv_with(|p, _| {
                    p.get(..4)
                        .map_or(0, |s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
                });
                match seq {
                    Ok(seq) => {
                        let a = &mut st.app;
                        a.hash ^= work(a.work_iters, seq as u64 ^ a.got);
                        a.got += 1;
                        Status::Ready
                    }
                    Err(_) => Status::Wait,
                }
            },
        )
        .map_err(|e| anyhow::anyhow!("host: {e:?}"))?;
    host.state_mut().register_udp(h, o, t);
    let _ = ready.send(());
    let end = Instant::now() + bound;
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        host.run_for(2_000_000);
    }
    Ok(host)
}

/// The counters of a finished TAP-series host.
fn tap_run<N: lazynet::nic::Nic + 'static>(host: &TapHost<N>) -> TapRun {
    let s = host.stack().stats();
    if crate::infra::report::verbose() {
        let mut t = String::new();
        let _ = s.write_table(&mut t);
        eprintln!("{t}\n{:?}\n{}", host.stats(), host.report());
    }
    let full = s.demux.drops_for(lazynet::demux::DropReason::ChannelFull);
    TapRun {
        got: host.app().got,
        channel_full: full,
        ip_queue_full: s.drops_for(lazynet::stack::StackDrop::IpQueueFull),
        other_drops: s.demux.dropped() - full,
    }
}

/// The UDP port of the TAP series' server.
const TAP_PORT: u16 = 9000;

/// One livelock point of lazynet in `mode` fed by *real kernel traffic*:
/// `lazynet-lab loadgen udp` in a Linux peer namespace (pinned to
/// [`Role::Client`]) sends through a TAP device whose other end is a lazynet
/// stack run by the host runtime ([`lazynet::host::Host`], the placement
/// of `mode`) on a thread pinned to [`Role::Server`]; its server task receives
/// each datagram and spends `work(work_iters)` on it.
///
/// What this series measures besides the stack: a TAP device costs one
/// `read()` system call per frame on the host core (which bounds the rate
/// it can read: docs/PERFORMANCE.md), and the host polls it — every receive-task
/// iteration is at least one `read()`, `EAGAIN` when idle. Excess the host
/// does not read in time is dropped by the TAP device's queue in the kernel;
/// it and `eager`'s IP queue drops are [`LivelockPoint::backlog_drops`]
/// (the device's `tx_dropped` seen from the peer namespace, plus
/// `StackDrop::IpQueueFull`): drops before protocol work, as Linux's backlog.
/// Datagrams dropped at a full socket channel are
/// [`LivelockPoint::sink_drops`] (after the checks in `eager` and
/// `early-demux`, before them in `soft-lrp` and `ni-lrp`). Offered =
/// delivered + these two + other drops + what the generator's kernel
/// refused.
///
/// In `ni-lrp` the NI engine owns the TAP device on a thread pinned to
/// [`Role::Client`] (beside the generator, as in the wire series): then the
/// `read()` per frame is the NI's cost, not the host's.
pub fn tap_livelock_point(
    mode: lazynet::stack::ReceiveMode,
    rate_pps: u64,
    seconds: f64,
    work_iters: u32,
) -> anyhow::Result<LivelockPoint> {
    use lazynet::nic::netns::{Ownership, PeerNs, PeerNsConfig};
    use lazynet::nic::tap::TapConfig;
    use lazynet::stack::ReceiveMode;

    check_seconds(seconds)?;
    if rate_pps == 0 {
        bail!("rate must be > 0");
    }
    if !lazynet::sys::is_root() {
        bail!("the TAP series needs root (network namespaces)");
    }
    let exe = std::env::current_exe().context("cannot find our own binary")?;
    let mut cfg = PeerNsConfig::unique(204);
    cfg.peer_addr = format!("{TAP_PEER}/24");
    let peer = PeerNs::new(cfg.clone());
    let tap_cfg = TapConfig {
        name: cfg.dev.clone(),
        ..TapConfig::default()
    };
    let (tap, own) = peer.attach_or_create(&tap_cfg)?;
    if matches!(own, Ownership::Attached) {
        bail!("{} already existed in {}: not ours", cfg.dev, cfg.ns);
    }
    // `own` removes the namespace when this function returns, after the
    // host thread (and with it the TAP descriptor) is gone.
    let mac = tap_cfg
        .mac
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    ip(&[
        "-n",
        &cfg.ns,
        "neigh",
        "replace",
        &TAP_OURS.to_string(),
        "lladdr",
        &mac,
        "dev",
        &cfg.dev,
        "nud",
        "permanent",
    ])?;

    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let bound = Duration::from_secs_f64(seconds + 30.0);
    let th = {
        let stop = stop.clone();
        std::thread::spawn(move || -> anyhow::Result<TapRun> {
            use lazynet::host::HostConfig;
            use lazynet::stack::{Stack, StackConfig};

            let _ = Role::Server.pin();
            let scfg = StackConfig {
                addr: TAP_OURS,
                prefix_len: 24,
                mode,
                ..StackConfig::default()
            };
            if mode != ReceiveMode::NiLrp {
                let stack = Stack::new(tap, scfg);
                let host = tap_host(
                    stack,
                    HostConfig::for_mode(mode),
                    work_iters,
                    &stop,
                    bound,
                    ready_tx,
                )?;
                return Ok(tap_run(&host));
            }
            // ni-lrp: the NI engine owns the TAP device on the load core.
            let (stack, engine) = Stack::new_ni_lrp(tap, scfg);
            let ni_stop = std::sync::Arc::new(AtomicBool::new(false));
            let ni = engine.spawn(Some(Role::Ni.cpu()), ni_stop.clone())?;
            let r = tap_host(
                stack,
                HostConfig::ni_lrp(),
                work_iters,
                &stop,
                bound,
                ready_tx,
            )
            .map(|mut host| {
                // Quiesce (bounded) so the merged counters are exact.
                let end = Instant::now() + Duration::from_secs(5);
                while !host.state_mut().stack.ni_quiesce() && Instant::now() < end {
                    std::thread::yield_now();
                }
                tap_run(&host)
            });
            ni_stop.store(true, Ordering::Relaxed);
            if ni.join().is_err() {
                bail!("the NI engine thread panicked");
            }
            r
        })
    };
    let host = HostThread { stop, th: Some(th) };
    if ready_rx.recv_timeout(READY_TIMEOUT).is_err() {
        return match host.join() {
            Err(e) => Err(e.context("the lazynet host did not start")),
            Ok(_) => bail!("the lazynet host did not start"),
        };
    }
    peer.wait_oper_up(Duration::from_secs(2));
    let dst = SocketAddrV4::new(TAP_OURS, TAP_PORT);
    let cpu0 = CpuSnap::now();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &cfg.ns])
        .arg(&exe)
        .args(loadgen_args(dst, rate_pps, seconds));
    let mut gen = Proc::spawn("loadgen", cmd)?;
    gen.finish(Duration::from_secs_f64(seconds + 10.0))?;
    std::thread::sleep(DRAIN);
    let cpu1 = CpuSnap::now();
    let tx_dropped: u64 = ip(&[
        "netns",
        "exec",
        &cfg.ns,
        "cat",
        &format!("/sys/class/net/{}/statistics/tx_dropped", cfg.dev),
    ])?
    .trim()
    .parse()
    .context("tx_dropped")?;
    let r = host.join()?;
    drop(own);
    let g = parse_loadgen(&gen.lines.join("\n"))?;
    let secs = g.seconds.max(1e-9);
    Ok(LivelockPoint {
        offered_pps: g.offered as f64 / secs,
        delivered_pps: r.got as f64 / secs,
        offered: g.offered,
        delivered: r.got,
        seconds: g.seconds,
        gen_dropped: g.dropped + g.shortfall,
        sink_drops: r.channel_full,
        other_errors: r.other_drops,
        backlog_drops: tx_dropped + r.ip_queue_full,
        softirq: SoftirqShare::between(&cpu0, &cpu1),
    })
}
