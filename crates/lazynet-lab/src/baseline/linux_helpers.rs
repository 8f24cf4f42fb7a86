//! The Linux programs the experiments run inside their namespaces, on a
//! pinned core (`lazynet-lab exp-helper …`, [`crate::cli::helper`]): a
//! CPU-bound spinner, a UDP sink that works on every datagram
//! (`recvmmsg`), UDP echo servers (one datagram at a time, and batched with
//! `recvmmsg`/`sendmmsg`), a ping-pong client, and a whole Linux livelock
//! and latency point for tests.
//!
//! **Owns:** the sockets it opens; every loop is bounded by `--seconds`
//! and ends at SIGTERM. **May not touch:** namespaces and processes (the
//! caller owns them, [`super::linux`]).

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::linux::{latency_point, livelock_point, LinuxNet, Side};
use crate::infra::exp::work;

/// `exp-helper spin`: a CPU-bound ordinary process on `cpu` for at most
/// `seconds` (the competing load of `rtu-qos`).
pub fn spin(seconds: f64, cpu: Option<usize>) -> anyhow::Result<()> {
    pin(cpu);
    let end = bound(seconds)?;
    let mut x = 1u64;
    while Instant::now() < end {
        x = work(10_000, x);
    }
    std::hint::black_box(x);
    Ok(())
}

fn pin(cpu: Option<usize>) {
    if let Some(c) = cpu {
        if !lazynet::sys::pin_thread(c) {
            eprintln!("cannot pin to CPU {c}");
        }
    }
}

/// How often a blocked helper looks at its stop flag and deadline.
const POLL: Duration = Duration::from_millis(20);

fn bound(seconds: f64) -> anyhow::Result<Instant> {
    if !(seconds > 0.0 && seconds <= 3600.0) {
        bail!("--seconds must be in (0, 3600]");
    }
    Ok(Instant::now() + Duration::from_secs_f64(seconds))
}

const SINK_BATCH: usize = 32;

/// `exp-helper udp-sink`: see [`crate::cli::helper::HelperCmd::UdpSink`].
pub fn udp_sink(
    bind: SocketAddrV4,
    work_iters: u32,
    seconds: f64,
    cpu: Option<usize>,
) -> anyhow::Result<()> {
    pin(cpu);
    let end = bound(seconds)?;
    let stop = lazynet_cli::util::stop_flag()?;
    let sock = UdpSocket::bind(bind).with_context(|| format!("bind {bind}"))?;
    sock.set_read_timeout(Some(POLL))?;
    println!("ready");
    let (received, bytes, h) = sink_loop(&sock, work_iters, end, &stop);
    println!("udp-sink received={received} bytes={bytes} work={h:x}");
    Ok(())
}

/// Receives in batches with `recvmmsg(MSG_WAITFORONE)` until `stop` or
/// `end`; returns (datagrams, bytes, work hash).
fn sink_loop(
    sock: &UdpSocket,
    work_iters: u32,
    end: Instant,
    stop: &AtomicBool,
) -> (u64, u64, u64) {
    use std::os::fd::AsFd;
    let mut mm = crate::infra::sys::MmsgReceiver::new(SINK_BATCH);
    let (mut n, mut bytes, mut h) = (0u64, 0u64, 0u64);
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        let Ok(got) = mm.recv(sock.as_fd(), libc::MSG_WAITFORONE) else {
            continue; // timeout (EAGAIN) or EINTR: look at the flags
        };
        for b in got {
            let seq = b
                .get(..4)
                .map_or(0, |s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]));
            h ^= work(work_iters, seq as u64 ^ n);
            n += 1;
            bytes += b.len() as u64;
        }
    }
    (n, bytes, h)
}

/// `exp-helper udp-echo`: sends every datagram back.
pub fn udp_echo(bind: SocketAddrV4, seconds: f64, cpu: Option<usize>) -> anyhow::Result<()> {
    pin(cpu);
    let end = bound(seconds)?;
    let stop = lazynet_cli::util::stop_flag()?;
    let sock = UdpSocket::bind(bind).with_context(|| format!("bind {bind}"))?;
    sock.set_read_timeout(Some(POLL))?;
    println!("ready");
    let mut buf = [0u8; 2048];
    let mut echoed = 0u64;
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        if let Ok((len, from)) = sock.recv_from(&mut buf) {
            if sock.send_to(&buf[..len], from).is_ok() {
                echoed += 1;
            }
        }
    }
    println!("udp-echo echoed={echoed}");
    Ok(())
}

/// `exp-helper ping-client`: one datagram outstanding; prints the round
/// trips' percentiles.
pub fn ping_client(
    dst: SocketAddrV4,
    seconds: f64,
    warmup_ms: u64,
    timeout_ms: u64,
    size: usize,
    cpu: Option<usize>,
) -> anyhow::Result<()> {
    pin(cpu);
    if !(8..=1472).contains(&size) {
        bail!("--size must be in 8..=1472");
    }
    if timeout_ms == 0 || timeout_ms > 10_000 {
        bail!("--timeout-ms must be in 1..=10000");
    }
    let stop = lazynet_cli::util::stop_flag()?;
    let sock = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))?;
    sock.connect(dst)?;
    let timeout = Duration::from_millis(timeout_ms);
    let warm_end = Instant::now() + Duration::from_millis(warmup_ms);
    let end = warm_end + Duration::from_secs_f64(seconds.clamp(0.001, 3600.0));
    let mut hist = lazynet_cli::echo::hist();
    let mut out = vec![0u8; size];
    let mut inb = [0u8; 2048];
    let (mut seq, mut lost) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= end {
            break;
        }
        seq += 1;
        out[..8].copy_from_slice(&seq.to_be_bytes());
        let t0 = Instant::now();
        let measured = t0 >= warm_end;
        let rtt = match sock.send(&out) {
            Ok(_) => wait_reply(&sock, &mut inb, seq, t0, timeout)?,
            Err(_) => None,
        };
        match rtt {
            Some(d) if measured => hist.record((d.as_nanos() as u64).max(1))?,
            Some(_) => {}
            None if measured => lost += 1,
            None => {}
        }
    }
    println!(
        "ping-client samples={} lost={lost} p50_ns={} p99_ns={} p999_ns={} max_ns={}",
        hist.len(),
        hist.value_at_quantile(0.5),
        hist.value_at_quantile(0.99),
        hist.value_at_quantile(0.999),
        hist.max()
    );
    Ok(())
}

/// Waits for the reply to `seq` until `t0 + timeout` (stale replies to
/// earlier, lost pings are skipped); returns the round trip.
fn wait_reply(
    sock: &UdpSocket,
    buf: &mut [u8],
    seq: u64,
    t0: Instant,
    timeout: Duration,
) -> anyhow::Result<Option<Duration>> {
    loop {
        let left = timeout.saturating_sub(t0.elapsed());
        if left.is_zero() {
            return Ok(None);
        }
        sock.set_read_timeout(Some(left))?;
        match sock.recv(buf) {
            Ok(n) if n >= 8 && buf[..8] == seq.to_be_bytes() => return Ok(Some(t0.elapsed())),
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            // ECONNREFUSED (ICMP port unreachable) and the like: lost.
            Err(_) => return Ok(None),
        }
    }
}

/// `exp-helper linux-points`: one Linux livelock point and one latency
/// point in fresh namespaces; prints both, the namespaces and the pids.
pub fn linux_points(
    rate: u64,
    blast: u64,
    seconds: f64,
    work_iters: u32,
    rps: bool,
) -> anyhow::Result<()> {
    let net = LinuxNet::up_with(rps)?;
    println!("namespaces={},{}", net.ns(Side::Host), net.ns(Side::Gen));
    for n in net.notes() {
        println!("{n}");
    }
    let r = (|| -> anyhow::Result<()> {
        let l = livelock_point(&net, rate, seconds, work_iters)?;
        println!("livelock: {}", l.summary());
        println!(
            "livelock offered={} delivered={} sink_drops={} backlog_drops={} softirq_host_pct={:.0}",
            l.offered,
            l.delivered,
            l.sink_drops,
            l.backlog_drops,
            l.softirq.time_on_host * 100.0
        );
        let p = latency_point(&net, blast, seconds, work_iters)?;
        println!("latency: {}", p.summary());
        println!(
            "latency p50_ns={:.0} p99_ns={:.0} p999_ns={:.0} samples={} lost={}",
            p.p50_us * 1000.0,
            p.p99_us * 1000.0,
            p.p999_us * 1000.0,
            p.samples,
            p.lost
        );
        Ok(())
    })();
    let pids = net.spawned_pids();
    net.down()?;
    println!(
        "pids={}",
        pids.iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
    r
}

/// The batched Linux UDP echo server (`exp-helper udp-echo-batch`):
/// `recvmmsg` up to 64 datagrams, `sendmmsg` them back to their senders.
pub fn udp_echo_batch(bind: SocketAddrV4, seconds: f64) -> anyhow::Result<()> {
    use std::os::fd::AsFd;
    let sock = std::net::UdpSocket::bind(bind)?;
    sock.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut rx = crate::infra::sys::MmsgReceiver::new(64);
    let mut tx = crate::infra::sys::MmsgSender::new(64, None);
    let end = Instant::now() + Duration::from_secs_f64(seconds.clamp(0.1, 3600.0));
    println!("ready");
    let unspecified = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
    while Instant::now() < end {
        let Ok(n) = rx.recv_n(sock.as_fd(), libc::MSG_WAITFORONE) else {
            continue;
        };
        // Sent back from the receive buffers: no copy, no allocation.
        let mut data: [&[u8]; 64] = [&[]; 64];
        let mut dsts = [unspecified; 64];
        let n = n.min(64);
        for i in 0..n {
            data[i] = rx.datagram(i);
            dsts[i] = rx.sender(i).unwrap_or(unspecified);
        }
        let mut off = 0;
        while off < n {
            match tx.send_each(sock.as_fd(), &data[off..n], &dsts[off..n], 0) {
                Ok(0) | Err(_) => break,
                Ok(k) => off += k,
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sink, echo and client against each other on loopback (no root).
    #[test]
    fn sink_and_ping_pong_on_loopback() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = sock.local_addr().unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for i in 0..10u32 {
            tx.send_to(&i.to_be_bytes(), addr).unwrap();
        }
        sock.set_read_timeout(Some(POLL)).unwrap();
        let stop = AtomicBool::new(false);
        let (n, bytes, _) = sink_loop(
            &sock,
            10,
            Instant::now() + Duration::from_millis(200),
            &stop,
        );
        assert_eq!((n, bytes), (10, 40));

        let echo = UdpSocket::bind("127.0.0.1:0").unwrap();
        let at = echo.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let mut b = [0u8; 64];
            for _ in 0..3 {
                let (len, from) = echo.recv_from(&mut b).unwrap();
                echo.send_to(&b[..len], from).unwrap();
            }
        });
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.connect(at).unwrap();
        let mut buf = [0u8; 64];
        for seq in 1..=3u64 {
            let t0 = Instant::now();
            c.send(&seq.to_be_bytes()).unwrap();
            let r = wait_reply(&c, &mut buf, seq, t0, Duration::from_secs(5)).unwrap();
            assert!(r.is_some());
        }
        t.join().unwrap();
        // Nobody answers now: lost after the timeout.
        let t0 = Instant::now();
        c.send(&9u64.to_be_bytes()).unwrap();
        let r = wait_reply(&c, &mut buf, 9, t0, Duration::from_millis(30)).unwrap();
        assert!(r.is_none());
    }
}
