//! UDP echo: the server, the demo and the wire client. The lab's
//! lazynet-vs-Linux benchmark reuses the client.
//! Server and client share one client pattern: a fixed window of datagrams
//! in flight, each carrying its sequence number and send time.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use lazynet::nic::wirepair::{Side, WireConfig, WireEnd, WirePair};
use lazynet::nic::Nic;
use lazynet::socket::{SocketError, UdpSocket};
use lazynet::stack::{Stack, StackConfig};

use lazynet::sys::{cpus_online, pin_thread};

pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 2);
pub const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 1);
const ECHO_PORT: u16 = 7;

/// Result of one client run.
pub struct EchoResult {
    pub received: u64,
    pub lost: u64,
    pub elapsed: Duration,
    pub rtt_ns: Histogram<u64>,
}

impl EchoResult {
    pub fn rate(&self) -> f64 {
        self.received as f64 / self.elapsed.as_secs_f64()
    }
    pub fn p(&self, q: f64) -> f64 {
        self.rtt_ns.value_at_quantile(q) as f64 / 1000.0
    }
}

/// A latency histogram in ns, 1 ns to 60 s, 3 significant digits.
pub fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds")
}

fn config(addr: Ipv4Addr, seed: u64) -> StackConfig {
    StackConfig {
        addr,
        prefix_len: 24,
        seed,
        ..StackConfig::default()
    }
}

/// Serves UDP echo on `sock` until `stop`. Bounded work per loop turn.
pub fn serve_echo<N: Nic>(stack: &mut Stack<N>, sock: &UdpSocket, stop: &AtomicBool) {
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::Relaxed) {
        let now = stack.now();
        let w = stack.poll(now);
        let mut served = 0;
        while served < 256 {
            let Ok((n, from)) = sock.recv_from(stack, &mut buf) else {
                break;
            };
            let _ = sock.send_to_blocking(stack, &buf[..n], from, Some(Duration::from_millis(100)));
            served += 1;
        }
        if w.received == 0 && w.processed == 0 && served == 0 {
            // Nothing to do and no timer to keep: sleep until a frame (or
            // 50 ms, to look at the stop flag), so an idle server costs
            // next to nothing.
            stack.nic_mut().wait(Some(50_000_000));
        }
    }
}

/// Runs the client pattern against `dst` for `duration` (or `max` replies).
pub fn lazynet_client<N: Nic>(
    stack: &mut Stack<N>,
    sock: &UdpSocket,
    dst: SocketAddrV4,
    window: usize,
    size: usize,
    duration: Duration,
    max: u64,
) -> EchoResult {
    let mut payload = vec![0u8; size.max(16)];
    let mut rx = vec![0u8; size.max(16)];
    let mut h = hist();
    let (mut seq, mut inflight, mut received, mut lost) = (0u64, 0usize, 0u64, 0u64);
    let start = Instant::now();
    let mut last_progress = start;
    let epoch = stack.now();
    while start.elapsed() < duration && received < max {
        while inflight < window && seq < max + lost {
            payload[..8].copy_from_slice(&seq.to_le_bytes());
            payload[8..16].copy_from_slice(&(stack.now() - epoch).to_le_bytes());
            match sock.send_to(stack, &payload[..size], dst) {
                Ok(_) => {
                    seq += 1;
                    inflight += 1;
                }
                // No buffer, or dropped while the peer's address is being
                // resolved (ARP holds a few): not in flight, try later.
                Err(SocketError::NoBuffers | SocketError::Dropped) => break,
                Err(e) => panic!("send: {e}"),
            }
        }
        let now = stack.now();
        stack.poll(now);
        loop {
            match sock.recv_from(stack, &mut rx) {
                Ok((n, _)) if n >= 16 => {
                    let sent = u64::from_le_bytes(rx[8..16].try_into().unwrap_or_default());
                    let _ = h.record((stack.now() - epoch).saturating_sub(sent).max(1));
                    received += 1;
                    inflight = inflight.saturating_sub(1);
                    last_progress = Instant::now();
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        if inflight > 0 && last_progress.elapsed() > Duration::from_millis(200) {
            lost += inflight as u64;
            inflight = 0;
            last_progress = Instant::now();
        }
    }
    EchoResult {
        received,
        lost,
        elapsed: start.elapsed(),
        rtt_ns: h,
    }
}

/// One lazynet echo run on the in-memory wire: server thread on `server_cpu`,
/// client on the calling thread on `client_cpu`. Returns the client's result
/// and both stacks' counter tables.
pub fn run_lazynet(
    window: usize,
    size: usize,
    duration: Duration,
    cpus: (usize, usize),
) -> anyhow::Result<(EchoResult, String, String)> {
    let (a, b) = WirePair::new(WireConfig::default())?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let server_cpu = cpus.1;
    let server = std::thread::spawn(move || {
        pin_thread(server_cpu);
        let mut stack = Stack::new(b, config(SERVER_ADDR, 2));
        let sock = UdpSocket::bind(&mut stack, SocketAddrV4::new(SERVER_ADDR, ECHO_PORT))
            .expect("bind echo");
        serve_echo(&mut stack, &sock, &stop2);
        stack.stats().to_string()
    });
    pin_thread(cpus.0);
    let mut stack = Stack::new(a, config(CLIENT_ADDR, 1));
    let sock = UdpSocket::bind(&mut stack, SocketAddrV4::new(CLIENT_ADDR, 0))?;
    // Warm up (ARP, caches), then measure.
    lazynet_client(
        &mut stack,
        &sock,
        SocketAddrV4::new(SERVER_ADDR, ECHO_PORT),
        1,
        size,
        Duration::from_millis(200),
        1000,
    );
    let r = lazynet_client(
        &mut stack,
        &sock,
        SocketAddrV4::new(SERVER_ADDR, ECHO_PORT),
        window,
        size,
        duration,
        u64::MAX,
    );
    stop.store(true, Ordering::Relaxed);
    let server_stats = server
        .join()
        .map_err(|_| anyhow::anyhow!("server thread panicked"))?;
    Ok((r, stack.stats().to_string(), server_stats))
}

/// The client's and the server's CPU: 0 and 1, or both 0 on one CPU.
pub fn cpu_pair() -> (usize, usize) {
    if cpus_online() >= 2 {
        (0, 1)
    } else {
        (0, 0)
    }
}

/// `lazynet demo`.
pub fn demo(seconds: f64) -> anyhow::Result<()> {
    let half = Duration::from_secs_f64((seconds / 2.0).max(0.2));
    println!("lazynet demo: UDP echo over the in-memory wire (shared-memory rings, no root)");
    println!("  server {SERVER_ADDR}:{ECHO_PORT} and client {CLIENT_ADDR} on separate threads, 64-byte payloads\n");
    let (pp, _, _) = run_lazynet(1, 64, half, cpu_pair())?;
    println!(
        "ping-pong (1 in flight):   {:>10.0} datagrams/s   RTT p50 {:.2} us  p99 {:.2} us",
        pp.rate(),
        pp.p(0.5),
        pp.p(0.99)
    );
    let (pl, client, server) = run_lazynet(32, 64, half, cpu_pair())?;
    println!(
        "pipelined (32 in flight):  {:>10.0} datagrams/s   RTT p50 {:.2} us  p99 {:.2} us",
        pl.rate(),
        pl.p(0.5),
        pl.p(0.99)
    );
    println!("  lost: {}\n", pp.lost + pl.lost);
    println!("client counters (pipelined run):\n{client}");
    println!("server counters (pipelined run):\n{server}");
    Ok(())
}

/// `lazynet udp-client --wire PATH`: a second process on a served wire.
pub fn wire_client(path: &Path, count: u64, size: usize, port: u16) -> anyhow::Result<()> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| anyhow::anyhow!("open {}: {e}", path.display()))?;
    let end = WireEnd::attach(OwnedFd::from(f), Side::B)?;
    let mut stack = Stack::new(end, config(CLIENT_ADDR, 3));
    let sock = UdpSocket::bind(&mut stack, SocketAddrV4::new(CLIENT_ADDR, 0))?;
    let r = lazynet_client(
        &mut stack,
        &sock,
        SocketAddrV4::new(SERVER_ADDR, port),
        1,
        size,
        Duration::from_secs(60),
        count,
    );
    println!(
        "{} echoes in {:.2} s: {:.0}/s, RTT p50 {:.2} us p99 {:.2} us, lost {}",
        r.received,
        r.elapsed.as_secs_f64(),
        r.rate(),
        r.p(0.5),
        r.p(0.99),
        r.lost
    );
    anyhow::ensure!(r.received == count, "only {} of {count} echoes", r.received);
    Ok(())
}
