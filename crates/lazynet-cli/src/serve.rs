//! `lazynet serve …` and `lazynet netns …`.

use std::io::Write;
use std::net::SocketAddrV4;
use std::os::fd::AsRawFd;

use lazynet::nic::fault::{FaultConfig, FaultNic, FaultSpec};
use lazynet::nic::netns::{Ownership, PeerNs, PeerNsConfig};
use lazynet::nic::pcap::{PcapNic, Resolution};
use lazynet::nic::tap::TapConfig;
use lazynet::nic::wirepair::{WireConfig, WirePair};
use lazynet::nic::Nic;
use lazynet::socket::UdpSocket;
use lazynet::stack::{Stack, StackConfig};

use crate::{parse_cidr, NetArgs, NetnsCmd, NicKind, NsArgs};

pub fn ns_config(a: &NsArgs) -> PeerNsConfig {
    PeerNsConfig {
        ns: a.peer_ns.clone(),
        dev: a.dev.clone(),
        peer_addr: a.peer_addr.clone(),
    }
}

/// One line naming the machine and the date, for result files.
pub fn machine_line() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    format!(
        "machine: {} CPUs, {cpu}, kernel {}\ndate: {date}\n",
        crate::util::cpus(),
        kernel.trim()
    )
}

/// The TAP device whose kernel side is in the peer namespace: attached if
/// the namespace exists (left in place), else created (removed by the
/// returned guard). `ext_bytes`: the driver's area for by-reference payloads.
pub fn tap_nic(net: &NetArgs, ext_bytes: usize) -> anyhow::Result<(Box<dyn Nic>, Ownership)> {
    let ns = PeerNs::new(ns_config(&net.ns));
    let (tap, own) = ns.attach_or_create(&TapConfig {
        name: net.ns.dev.clone(),
        ext_bytes,
        ..TapConfig::default()
    })?;
    match &own {
        Ownership::Attached => {
            eprintln!("attached to {} in namespace {}", net.ns.dev, net.ns.peer_ns)
        }
        Ownership::Created(_) => eprintln!(
            "created {} in namespace {} (removed on exit)",
            net.ns.dev, net.ns.peer_ns
        ),
    }
    Ok((Box::new(tap), own))
}

/// `nic`, with faults from `--fault SPEC` injected and recording to
/// `--pcap FILE`, if given (the capture sees what the stack sees).
pub fn with_pcap(nic: Box<dyn Nic>, net: &NetArgs) -> anyhow::Result<Box<dyn Nic>> {
    let nic: Box<dyn Nic> = match &net.fault {
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
    let (addr, prefix_len) = parse_cidr(&net.addr)?;
    let stop = crate::util::stop_flag()?;
    let cfg = StackConfig {
        addr,
        prefix_len,
        seed: seed_from_os(),
        ..StackConfig::default()
    };
    // The namespace we created, if any: removed on exit.
    let mut owned_ns = None;
    let nic: Box<dyn Nic> = match net.nic {
        NicKind::Wire => {
            let (a, b) = WirePair::new(WireConfig::default())?;
            // Another process attaches as side B through /proc/PID/fd/N.
            let fd = a.region().fd().as_raw_fd();
            println!("wire /proc/{}/fd/{fd}", std::process::id());
            drop(b);
            Box::new(a)
        }
        NicKind::Tap => {
            let (tap, own) = tap_nic(net, 0)?;
            owned_ns = Some(own);
            tap
        }
    };
    let nic = with_pcap(nic, net)?;
    let mut stack = Stack::new(nic, cfg);
    let sock = UdpSocket::bind(&mut stack, SocketAddrV4::new(addr, port))?;
    eprintln!("serving UDP echo on {addr}:{port}");
    println!("ready");
    std::io::stdout().flush()?;
    crate::echo::serve_echo(&mut stack, &sock, &stop);
    let stats = stack.stats();
    println!("counters:\n{stats}");
    drop(stack); // flushes the pcap file before the namespace goes
    if let Some(Ownership::Created(g)) = owned_ns {
        g.cleanup()?;
    }
    Ok(())
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
            let ns = PeerNs::new(ns_config(&a));
            ns.up()?;
            println!(
                "namespace {} with persistent TAP {} at {}",
                a.peer_ns, a.dev, a.peer_addr
            );
        }
        NetnsCmd::Down(a) => {
            PeerNs::new(ns_config(&a)).down()?;
            println!("namespace {} removed", a.peer_ns);
        }
    }
    Ok(())
}
