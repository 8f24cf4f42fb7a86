//! `lazynet-lab bench wakeup`: how long a sleeping lazynet host takes from a
//! frame's send on another core to the moment its task has the datagram,
//! beside the same host busy-polling, a Linux thread blocked in `recv` on a
//! UDP socket over loopback, and a bare futex wake (the kernel's part of
//! any such wake-up). One datagram or wake every `gap`, so the receiver is
//! asleep each time; the series alternate round by round. The sender is on
//! the client's core, the receiver on the server's
//! ([`crate::infra::cpus::pair`]); the Linux series is
//! [`crate::baseline::loopback::udp_wake`].
//!
//! **Owns:** its wires and threads (joined per round). **May not touch:**
//! the stack's internals (public API only).

use std::fs::File;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use lazynet::host::{Host, HostConfig, HostState};
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::sched::{Class, Cx, InstantClock, Status};
use lazynet::stack::{ReceiveMode, Stack, StackConfig};
use lazynet::sys::{futex_wait, futex_wake, pin_thread};
use lazynet_cli::echo::hist;

use crate::baseline::loopback;
use crate::infra::cpus;

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 7000;

/// The series, in the order of the first round.
const SERIES: [&str; 4] = [
    "lazynet host, sleeping",
    "lazynet host, polling",
    "Linux UDP recv, loopback",
    "futex wake alone",
];

/// One round of one series: `n` latencies in ns.
fn measure(
    series: usize,
    n: usize,
    gap: Duration,
    cpus: (usize, usize),
) -> anyhow::Result<Vec<u64>> {
    match series {
        0 => lazynet_host(true, n, gap, cpus),
        1 => lazynet_host(false, n, gap, cpus),
        2 => loopback::udp_wake(n, gap, cpus).map(|(sent, seen)| pair(&sent, &seen)),
        _ => futex(n, gap, cpus),
    }
}

#[derive(Default)]
struct App {
    seen: Vec<Instant>,
}

fn lazynet_host(
    sleep: bool,
    n: usize,
    gap: Duration,
    cpus: (usize, usize),
) -> anyhow::Result<Vec<u64>> {
    let (a, b) = WirePair::new(WireConfig::default())?;
    let cfg = |addr| StackConfig {
        addr,
        prefix_len: 24,
        seed: 11,
        mode: ReceiveMode::SoftLrp,
        ..StackConfig::default()
    };
    let mut client = Stack::new(a, cfg(A));
    let mut server = Stack::new(b, cfg(B));
    client.set_neighbor(B, server.mac());
    server.set_neighbor(A, client.mac());
    let mut hc = HostConfig::for_mode(ReceiveMode::SoftLrp);
    hc.sleep = sleep;
    let sent = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let sent2 = sent.clone();
    let host = std::thread::spawn(move || -> anyhow::Result<Vec<Instant>> {
        pin_thread(cpus.1);
        let app = App {
            seen: Vec::with_capacity(n),
        };
        let err = |e| anyhow::anyhow!("{e}");
        let mut h = Host::new(server, app, InstantClock::new(), hc).map_err(err)?;
        let o = h.add_owner("sink", Class::BestEffort).map_err(err)?;
        let s = h
            .state_mut()
            .stack
            .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT), None)?;
        let t = h
            .spawn(
                o,
                move |_cx: &mut Cx<'_>, st: &mut HostState<WireEnd, App>| match st
                    .stack
                    .udp_mut(s)
                    .recv_with(|_, _| ())
                {
                    Ok(()) => {
                        st.app.seen.push(Instant::now());
                        Status::Ready
                    }
                    Err(_) => Status::Wait,
                },
            )
            .map_err(err)?;
        h.state_mut().register_udp(s, o, t);
        let deadline = Instant::now() + gap * (n as u32 + 50) + Duration::from_secs(2);
        while h.app().seen.len() < n && Instant::now() < deadline {
            h.run_for(5_000_000);
        }
        Ok(std::mem::take(&mut h.app_mut().seen))
    });
    pin_thread(cpus.0);
    let sock = client.udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0), None)?;
    // Let the host reach its first sleep.
    std::thread::sleep(Duration::from_millis(20));
    for _ in 0..n {
        std::thread::sleep(gap);
        sent2
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .push(Instant::now());
        client
            .udp_mut(sock)
            .send_to(b"wake", SocketAddrV4::new(B, PORT), 0)?;
        client.poll(0);
    }
    let seen = host
        .join()
        .map_err(|_| anyhow::anyhow!("host thread panicked"))??;
    let sent = sent.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    Ok(pair(&sent, &seen))
}

fn pair(sent: &[Instant], seen: &[Instant]) -> Vec<u64> {
    sent.iter()
        .zip(seen)
        .map(|(s, r)| r.saturating_duration_since(*s).as_nanos() as u64)
        .collect()
}

fn futex(n: usize, gap: Duration, cpus: (usize, usize)) -> anyhow::Result<Vec<u64>> {
    let word = Arc::new(AtomicU32::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let (w2, d2) = (word.clone(), done.clone());
    let waiter = std::thread::spawn(move || {
        pin_thread(cpus.1);
        let mut seen = Vec::with_capacity(n);
        let mut last = 0;
        while seen.len() < n && !d2.load(Ordering::Acquire) {
            futex_wait(&w2, last, Some(100_000_000));
            let now = w2.load(Ordering::Acquire);
            if now != last {
                seen.push(Instant::now());
                last = now;
            }
        }
        seen
    });
    pin_thread(cpus.0);
    std::thread::sleep(Duration::from_millis(20));
    let mut sent = Vec::with_capacity(n);
    for _ in 0..n {
        std::thread::sleep(gap);
        sent.push(Instant::now());
        word.fetch_add(1, Ordering::Release);
        futex_wake(&word, 1);
    }
    std::thread::sleep(Duration::from_millis(50));
    done.store(true, Ordering::Release);
    futex_wake(&word, 1);
    let seen = waiter
        .join()
        .map_err(|_| anyhow::anyhow!("waiter panicked"))?;
    Ok(pair(&sent, &seen))
}

/// `lazynet-lab bench wakeup`.
pub fn bench(samples: usize, rounds: usize, gap_us: u64, out: &Path) -> anyhow::Result<()> {
    let cpus = cpus::pair();
    let gap = Duration::from_micros(gap_us.max(100));
    let mut hists: Vec<Histogram<u64>> = SERIES.iter().map(|_| hist()).collect();
    let mut csv = String::from("series,round,samples,p50_us,p90_us,p99_us,max_us\n");
    let us = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1e3;
    for round in 0..rounds.max(1) {
        for k in 0..SERIES.len() {
            // Rotate the order from round to round.
            let s = (k + round) % SERIES.len();
            let lat = measure(s, samples, gap, cpus)?;
            let mut h = hist();
            for &ns in &lat {
                let _ = h.record(ns.max(1));
                let _ = hists[s].record(ns.max(1));
            }
            let line = format!(
                "{},{round},{},{:.2},{:.2},{:.2},{:.2}\n",
                SERIES[s],
                lat.len(),
                us(&h, 0.5),
                us(&h, 0.9),
                us(&h, 0.99),
                h.max() as f64 / 1e3
            );
            print!("{line}");
            csv.push_str(&line);
        }
    }
    let mut summary = format!(
        "one datagram (or wake) every {} us, {samples} per round, {rounds} rounds; sender on CPU {}, receiver on CPU {}; latency from just before the send to the receiver's task holding it\n",
        gap.as_micros(),
        cpus.0,
        cpus.1
    );
    for (s, h) in SERIES.iter().zip(&hists) {
        summary.push_str(&format!(
            "{s}: p50 {:.2} us, p90 {:.2} us, p99 {:.2} us, max {:.2} us ({} samples)\n",
            us(h, 0.5),
            us(h, 0.9),
            us(h, 0.99),
            h.max() as f64 / 1e3,
            h.len()
        ));
    }
    print!("{summary}");
    std::fs::create_dir_all(out)?;
    File::create(out.join("wakeup.csv"))?.write_all(csv.as_bytes())?;
    let meta = crate::infra::report::txt_head(&crate::infra::report::command_line()) + &summary;
    File::create(out.join("wakeup.txt"))?.write_all(meta.as_bytes())?;
    let cats: Vec<String> = ["p50", "p90", "p99"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let series: Vec<(String, Vec<f64>)> = SERIES
        .iter()
        .zip(&hists)
        .map(|(s, h)| (s.to_string(), vec![us(h, 0.5), us(h, 0.9), us(h, 0.99)]))
        .collect();
    crate::infra::plot::bar_chart(
        &out.join("wakeup.png"),
        "Wake-up latency of a sleeping receiver",
        "percentile",
        "us",
        &cats,
        &series,
    )
}
