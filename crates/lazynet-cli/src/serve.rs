//! `lazynet serve …` and `lazynet netns …`.

use std::io::Write;
use std::net::SocketAddrV4;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lazynet::nic::fault::{FaultConfig, FaultNic, FaultSpec};
use lazynet::nic::netns::{Link, Ownership, PeerNs, PeerNsConfig};
use lazynet::nic::pcap::{PcapNic, Resolution};
use lazynet::nic::tap::TapConfig;
use lazynet::nic::wirepair::{WireConfig, WirePair};
use lazynet::nic::xdp::XdpConfig;
use lazynet::nic::Nic;
use lazynet::socket::UdpSocket;
use lazynet::stack::{ReceiveMode, Stack, StackConfig};

use crate::args::{parse_cidr, LinkKind, NetArgs, NetnsCmd, NicKind, NsArgs, OnOff};

/// The peer namespace `a` names, joined by a link of kind `link`.
pub fn ns_config(a: &NsArgs, link: LinkKind) -> PeerNsConfig {
    PeerNsConfig {
        ns: a.peer_ns.clone(),
        dev: a.dev_for(link),
        peer_addr: a.peer_addr.clone(),
        link: match link {
            LinkKind::Tap => Link::Tap,
            LinkKind::Veth => Link::Veth,
        },
    }
}

/// The TAP device whose kernel side is in the peer namespace: attached if
/// the namespace exists (left in place), else created (removed by the
/// returned guard). `ext_bytes`: the driver's area for by-reference payloads.
pub fn tap_nic(net: &NetArgs, ext_bytes: usize) -> anyhow::Result<(DynNic, Ownership)> {
    let cfg = ns_config(&net.ns, LinkKind::Tap);
    let ns = PeerNs::new(cfg.clone());
    let (tap, own) = ns.attach_or_create(&TapConfig {
        name: cfg.dev.clone(),
        ext_bytes,
        tso: net.tso == OnOff::On,
        ..TapConfig::default()
    })?;
    report_ownership(&own, &cfg);
    Ok((Box::new(tap), own))
}

fn report_ownership(own: &Ownership, cfg: &PeerNsConfig) {
    match own {
        Ownership::Attached => {
            eprintln!("attached to {} in namespace {}", cfg.dev, cfg.ns)
        }
        Ownership::Created(_) => eprintln!(
            "created {} {} in namespace {} (removed on exit)",
            cfg.link.name(),
            cfg.dev,
            cfg.ns
        ),
    }
}

/// An AF_XDP socket on our end of the veth pair into the peer namespace:
/// bound to it if the namespace exists (left in place), else created with
/// the pair (removed by the returned guard). lazynet's address (`addr`) is
/// what the XDP program steers to the socket.
pub fn xdp_nic(net: &NetArgs, addr: std::net::Ipv4Addr) -> anyhow::Result<(DynNic, Ownership)> {
    let cfg = ns_config(&net.ns, LinkKind::Veth);
    let ns = PeerNs::new(cfg.clone());
    let (nic, own) = ns.attach_or_create_xdp(&XdpConfig {
        addr,
        ..XdpConfig::default()
    })?;
    report_ownership(&own, &cfg);
    eprintln!("{}", nic.describe());
    Ok((Box::new(nic), own))
}

/// Where a program's stack runs: on a NIC of its own, or attached to a
/// lazynet daemon (`--daemon PATH`).
pub enum Opened {
    /// A NIC this process opened.
    Nic(DynNic),
    /// The control socket of a daemon to attach to.
    Daemon(std::path::PathBuf),
}

impl Opened {
    /// The stack on it: `cfg` as given on a NIC of our own; attached, the
    /// daemon's address and receive placement with `cfg`'s other settings.
    /// Faults and capture (`net`) apply either way.
    pub fn into_stack(self, cfg: StackConfig, net: &NetArgs) -> anyhow::Result<Stack<DynNic>> {
        match self {
            Opened::Nic(nic) => Ok(Stack::new(nic, cfg)),
            Opened::Daemon(p) => {
                let s = Stack::attach_with(&p, cfg, |n| {
                    with_pcap(Box::new(n), net).map_err(std::io::Error::other)
                })?;
                eprintln!(
                    "attached to the daemon at {} as {} ({})",
                    p.display(),
                    s.addr(),
                    s.mode().name()
                );
                Ok(s)
            }
        }
    }
}

/// Opens what `net` names: the daemon to attach to (`--daemon`), or the
/// NIC ([`open_nic`]).
pub fn open(net: &NetArgs) -> anyhow::Result<(Opened, Option<Ownership>)> {
    if let Some(p) = &net.daemon {
        return Ok((Opened::Daemon(p.clone()), None));
    }
    let (nic, own) = open_nic(net)?;
    Ok((Opened::Nic(nic), own))
}

/// Opens the NIC `net` names, with its faults and capture ([`with_pcap`]).
/// For `wire`, prints the path another process attaches to (as side B,
/// through `/proc/PID/fd/N`). The namespace we created, if any, comes back
/// for cleanup.
pub fn open_nic(net: &NetArgs) -> anyhow::Result<(DynNic, Option<Ownership>)> {
    let (nic, own): (DynNic, _) = match net.nic {
        NicKind::Wire => {
            let (a, b) = WirePair::new(WireConfig::default())?;
            let fd = a.region().fd().as_raw_fd();
            println!("wire /proc/{}/fd/{fd}", std::process::id());
            drop(b);
            (Box::new(a), None)
        }
        NicKind::Tap => {
            let (tap, own) = tap_nic(net, 0)?;
            (tap, Some(own))
        }
        NicKind::Xdp => {
            let (addr, _) = parse_cidr(&net.addr)?;
            let (nic, own) = xdp_nic(net, addr)?;
            (nic, Some(own))
        }
    };
    Ok((with_pcap(nic, net)?, own))
}

/// `nic`, with faults from `--fault SPEC` injected and recording to
/// `--pcap FILE`, if given (the capture sees what the stack sees).
pub fn with_pcap(nic: DynNic, net: &NetArgs) -> anyhow::Result<DynNic> {
    let nic: DynNic = match &net.fault {
        Some(spec) => {
            let (spec, seed) = parse_fault(spec)?;
            let t0 = std::time::Instant::now();
            let cfg = FaultConfig {
                seed,
                rx: spec,
                tx: spec,
                queue_limit: 4096,
                ..FaultConfig::default()
            };
            Box::new(FaultNic::with_clock(
                nic,
                cfg,
                Box::new(move || t0.elapsed().as_nanos() as u64),
            ))
        }
        None => nic,
    };
    Ok(match &net.pcap {
        Some(p) => Box::new(PcapNic::create(nic, p, Resolution::Micro)?),
        None => nic,
    })
}

/// Parses `key=value,…` of `--fault` (see its help).
pub fn parse_fault(s: &str) -> anyhow::Result<(FaultSpec, u64)> {
    let mut f = FaultSpec {
        reorder_gap: 2,
        ..FaultSpec::default()
    };
    let mut seed = 1;
    for kv in s.split(',').filter(|x| !x.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--fault: `{kv}` is not key=value"))?;
        let p = || -> anyhow::Result<f64> {
            let p: f64 = v.parse()?;
            anyhow::ensure!((0.0..=1.0).contains(&p), "--fault {k}: {p} is not in 0..=1");
            Ok(p)
        };
        match k {
            "loss" => f.loss = p()?,
            "dup" => f.duplicate = p()?,
            "reorder" => f.reorder = p()?,
            "corrupt" => f.corrupt = p()?,
            "delay" => f.delay = p()?,
            "gap" => f.reorder_gap = v.parse()?,
            "delay-us" => f.delay_ns = v.parse::<u64>()? * 1000,
            "seed" => seed = v.parse()?,
            _ => anyhow::bail!("--fault: unknown key `{k}`"),
        }
    }
    Ok((f, seed))
}

/// `lazynet serve udp-echo`.
pub fn udp_echo(port: u16, net: &NetArgs) -> anyhow::Result<()> {
    let stop = crate::util::stop_flag()?;
    let cfg = net.stack_config()?;
    let (nic, owned_ns) = open(net)?;
    struct Echo {
        port: u16,
        stop: Arc<AtomicBool>,
    }
    impl OnStack for Echo {
        type Out = anyhow::Result<()>;
        fn run<N: Nic>(self, stack: &mut Stack<N>) -> Self::Out {
            let (addr, port) = (stack.addr(), self.port);
            let sock = UdpSocket::bind(stack, SocketAddrV4::new(addr, port))?;
            eprintln!(
                "serving UDP echo on {addr}:{port} ({})",
                stack.mode().name()
            );
            println!("ready");
            std::io::stdout().flush()?;
            crate::echo::serve_echo(stack, &sock, &self.stop);
            let stats = stack.stats();
            println!("counters:\n{stats}");
            Ok(())
        }
    }
    // The stack is dropped inside: the pcap file is flushed before the
    // namespace goes.
    run_on_stack(nic, cfg, net, Echo { port, stop })??;
    if let Some(Ownership::Created(g)) = owned_ns {
        g.cleanup()?;
    }
    Ok(())
}

/// A NIC chosen at run time; `Send`, so that the `ni-lrp` engine can own
/// it on its thread.
pub type DynNic = Box<dyn Nic + Send>;

/// Work to run on a stack of whatever NIC type the receive mode needs.
pub trait OnStack {
    /// What the work returns.
    type Out;
    /// Runs on the stack (the caller's thread).
    fn run<N: Nic>(self, stack: &mut Stack<N>) -> Self::Out;
}

/// Builds the stack on `nic` in receive mode `net.mode` (or attached to
/// the daemon `--daemon` names) and runs `job` on it.
/// In `ni-lrp` the NI engine runs on a thread of its own, pinned to another
/// CPU than this thread (which is pinned to the one it is on) when there are
/// two or more; when `job` returns, the host hands every buffer back
/// through the NI (bounded wait), the engine is stopped and joined, and the
/// NIC dropped. Both are dropped before this returns.
pub fn run_on_stack<T: OnStack>(
    opened: Opened,
    cfg: StackConfig,
    net: &NetArgs,
    job: T,
) -> anyhow::Result<T::Out> {
    let mode = net.mode;
    let nic = match opened {
        Opened::Nic(nic) => nic,
        daemon @ Opened::Daemon(_) => {
            let mut stack = daemon.into_stack(cfg, net)?;
            return Ok(job.run(&mut stack));
        }
    };
    if mode != ReceiveMode::NiLrp {
        let mut stack = Stack::new(nic, StackConfig { mode, ..cfg });
        return Ok(job.run(&mut stack));
    }
    let (mut stack, engine) = Stack::new_ni_lrp(nic, cfg);
    let n = lazynet::sys::cpus_online();
    let ni_cpu = match lazynet::sys::current_cpu() {
        Some(me) if n >= 2 => {
            lazynet::sys::pin_thread(me);
            Some((me + 1) % n)
        }
        _ => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let handle = engine.spawn(ni_cpu, stop.clone())?;
    eprintln!(
        "ni-lrp: NI thread on CPU {}",
        ni_cpu.map_or("any".to_string(), |c| c.to_string())
    );
    let out = job.run(&mut stack);
    let t0 = Instant::now();
    while !stack.ni_quiesce() && t0.elapsed() < Duration::from_secs(2) {
        std::thread::yield_now();
    }
    stop.store(true, Ordering::Release);
    let nic = handle
        .join()
        .map_err(|_| anyhow::anyhow!("the NI thread panicked"))?;
    drop(stack);
    drop(nic);
    Ok(out)
}

/// A start-up seed for ISNs, ports and identifiers.
pub fn seed_from_os() -> u64 {
    let mut b = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut b);
    }
    u64::from_le_bytes(b) ^ std::process::id() as u64
}

/// `lazynet netns up|down`.
pub fn netns(cmd: NetnsCmd) -> anyhow::Result<()> {
    match cmd {
        NetnsCmd::Up(a) => {
            let cfg = ns_config(&a, a.link);
            PeerNs::new(cfg.clone()).up()?;
            match a.link {
                LinkKind::Tap => println!(
                    "namespace {} with persistent TAP {} at {}",
                    cfg.ns, cfg.dev, cfg.peer_addr
                ),
                LinkKind::Veth => println!(
                    "namespace {} with veth {} at {} (our end {}: run with --nic xdp)",
                    cfg.ns, cfg.dev, cfg.peer_addr, cfg.dev
                ),
            }
        }
        NetnsCmd::Down(a) => {
            PeerNs::new(ns_config(&a, a.link)).down()?;
            println!("namespace {} removed", a.peer_ns);
        }
    }
    Ok(())
}
