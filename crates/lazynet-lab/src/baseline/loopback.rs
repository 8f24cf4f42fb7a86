//! Linux sockets over loopback, the counterparts of the benchmarks on the
//! in-memory wire: UDP echo with lazynet's client pattern ([`udp_echo`]),
//! TCP request/response and bulk ([`tcp_rr_p50_us`], [`tcp_bulk_mb_s`]),
//! and a receiver blocked in `recv` woken by a datagram ([`udp_wake`]).
//! Two threads each, pinned to the cores the caller gives
//! ([`crate::infra::cpus::pair`]).
//!
//! **Owns:** its sockets and threads (joined before it returns). **May not
//! touch:** lazynet; kernel settings (loopback as the kernel has it).

use std::io::{Read, Write};
use std::net::{TcpListener as StdListener, TcpStream as StdStream, UdpSocket as StdUdp};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lazynet::sys::pin_thread;
use lazynet_cli::echo::{hist, EchoResult};

/// UDP echo over Linux sockets on loopback with the client pattern of
/// `lazynet_cli::echo::run_lazynet`: `window` datagrams of `size` bytes in
/// flight, each carrying its sequence number and send time; the server on
/// `cpus.1`, the client on `cpus.0`.
pub fn udp_echo(
    window: usize,
    size: usize,
    duration: Duration,
    cpus: (usize, usize),
) -> anyhow::Result<EchoResult> {
    let server_sock = StdUdp::bind("127.0.0.1:0")?;
    server_sock.set_read_timeout(Some(Duration::from_millis(50)))?;
    let addr = server_sock.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let server_cpu = cpus.1;
    let server = std::thread::spawn(move || {
        pin_thread(server_cpu);
        let mut buf = vec![0u8; 65536];
        while !stop2.load(Ordering::Relaxed) {
            if let Ok((n, from)) = server_sock.recv_from(&mut buf) {
                let _ = server_sock.send_to(&buf[..n], from);
            }
        }
    });
    pin_thread(cpus.0);
    let sock = StdUdp::bind("127.0.0.1:0")?;
    sock.connect(addr)?;
    sock.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut payload = vec![0u8; size.max(16)];
    let mut rx = vec![0u8; size.max(16)];
    let mut h = hist();
    let epoch = Instant::now();
    let (mut seq, mut inflight, mut received, mut lost) = (0u64, 0usize, 0u64, 0u64);
    // Warm-up of 200 ms, then the measured run, same as lazynet's.
    for (phase, d) in [(0, Duration::from_millis(200)), (1, duration)] {
        let start = Instant::now();
        if phase == 1 {
            h.reset();
            received = 0;
            lost = 0;
        }
        while start.elapsed() < d {
            while inflight < window {
                payload[..8].copy_from_slice(&seq.to_le_bytes());
                payload[8..16].copy_from_slice(&(epoch.elapsed().as_nanos() as u64).to_le_bytes());
                sock.send(&payload[..size])?;
                seq += 1;
                inflight += 1;
            }
            match sock.recv(&mut rx) {
                Ok(n) if n >= 16 => {
                    let sent = u64::from_le_bytes(rx[8..16].try_into().unwrap_or_default());
                    let _ = h.record(
                        (epoch.elapsed().as_nanos() as u64)
                            .saturating_sub(sent)
                            .max(1),
                    );
                    received += 1;
                    inflight -= 1;
                }
                Ok(_) => {}
                Err(_) => {
                    lost += inflight as u64;
                    inflight = 0;
                }
            }
        }
        if phase == 1 {
            let elapsed = start.elapsed();
            stop.store(true, Ordering::Relaxed);
            let _ = server.join();
            return Ok(EchoResult {
                received,
                lost,
                elapsed,
                rtt_ns: h,
            });
        }
    }
    unreachable!("the loop returns in its second phase")
}

/// TCP request/response over loopback, 1 byte each way on one connection
/// (nodelay) for `d` after 200 ms of warm-up: the p50 in µs; the server on
/// `cpus.1`, the client on `cpus.0`.
pub fn tcp_rr_p50_us(d: Duration, cpus: (usize, usize)) -> anyhow::Result<f64> {
    let l = StdListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    let srv = std::thread::spawn(move || -> std::io::Result<()> {
        pin_thread(cpus.1);
        let (mut s, _) = l.accept()?;
        s.set_nodelay(true)?;
        let mut b = [0u8; 64];
        loop {
            let k = s.read(&mut b)?;
            if k == 0 {
                return Ok(());
            }
            s.write_all(&b[..k])?;
        }
    });
    pin_thread(cpus.0);
    let mut c = StdStream::connect(addr)?;
    c.set_nodelay(true)?;
    let mut h = hist();
    let mut b = [0u8; 1];
    for (phase, len) in [(0, Duration::from_millis(200)), (1, d)] {
        if phase == 1 {
            h.reset();
        }
        let start = Instant::now();
        while start.elapsed() < len {
            let t = Instant::now();
            c.write_all(b"x")?;
            c.read_exact(&mut b)?;
            let _ = h.record(t.elapsed().as_nanos() as u64);
        }
    }
    drop(c);
    let _ = srv.join();
    Ok(h.value_at_quantile(0.5) as f64 / 1000.0)
}

/// One download of `bytes` over loopback: MB/s; the sender on `cpus.1`,
/// the receiver on `cpus.0`.
pub fn tcp_bulk_mb_s(bytes: u64, cpus: (usize, usize)) -> anyhow::Result<f64> {
    let l = StdListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    let srv = std::thread::spawn(move || -> std::io::Result<()> {
        pin_thread(cpus.1);
        let (mut s, _) = l.accept()?;
        let block: Vec<u8> = (0..65536u32).map(|i| (i % 251) as u8).collect();
        let mut left = bytes;
        while left > 0 {
            let k = left.min(block.len() as u64) as usize;
            s.write_all(&block[..k])?;
            left -= k as u64;
        }
        Ok(())
    });
    pin_thread(cpus.0);
    let mut c = StdStream::connect(addr)?;
    let mut buf = vec![0u8; 65536];
    let start = Instant::now();
    let mut got = 0u64;
    loop {
        let k = c.read(&mut buf)?;
        if k == 0 {
            break;
        }
        got += k as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    let _ = srv.join();
    anyhow::ensure!(got == bytes, "short download");
    Ok(bytes as f64 / secs / 1e6)
}

/// A Linux thread on `cpus.1` blocked in `recv` on a loopback UDP socket,
/// sent one datagram every `gap` from `cpus.0`, `n` times: when each was
/// sent, and when the receiver had it.
pub fn udp_wake(
    n: usize,
    gap: Duration,
    cpus: (usize, usize),
) -> anyhow::Result<(Vec<Instant>, Vec<Instant>)> {
    let rx = StdUdp::bind("127.0.0.1:0")?;
    rx.set_read_timeout(Some(Duration::from_secs(2)))?;
    let addr = rx.local_addr()?;
    let receiver = std::thread::spawn(move || {
        pin_thread(cpus.1);
        let mut seen = Vec::with_capacity(n);
        let mut buf = [0u8; 64];
        while seen.len() < n {
            match rx.recv(&mut buf) {
                Ok(_) => seen.push(Instant::now()),
                Err(_) => break,
            }
        }
        seen
    });
    pin_thread(cpus.0);
    let tx = StdUdp::bind("127.0.0.1:0")?;
    std::thread::sleep(Duration::from_millis(20));
    let mut sent = Vec::with_capacity(n);
    for _ in 0..n {
        std::thread::sleep(gap);
        sent.push(Instant::now());
        tx.send_to(b"wake", addr)?;
    }
    let seen = receiver
        .join()
        .map_err(|_| anyhow::anyhow!("receiver panicked"))?;
    Ok((sent, seen))
}
