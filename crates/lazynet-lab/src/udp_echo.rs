//! `lazynet-lab bench udp-echo`: UDP echo rate, lazynet on the in-memory
//! wire against Linux UDP sockets on loopback, with the same client pattern
//! (a window of datagrams in flight, each carrying its sequence number and
//! send time), server and client on separate cores. Each run measures both,
//! and which goes first alternates from run to run.

use std::fs::File;
use std::io::Write;
use std::net::UdpSocket as StdUdp;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lazynet::sys::pin_thread;
use lazynet_cli::echo::{cpu_pair, hist, run_lazynet, EchoResult};

use crate::report::median;

/// The same client pattern over Linux UDP sockets on loopback.
pub fn run_linux(
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

/// `lazynet-lab bench udp-echo`: `runs` runs of lazynet and Linux, the
/// first of the two alternating.
pub fn bench(
    seconds: f64,
    runs: usize,
    window: usize,
    size: usize,
    out: &Path,
) -> anyhow::Result<()> {
    let d = Duration::from_secs_f64(seconds);
    let cp = cpu_pair();
    std::fs::create_dir_all(out)?;
    let mut csv = String::from("impl,run,seconds,window,size,echoes_per_s,p50_us,p99_us,lost\n");
    let (mut lz, mut lx) = (Vec::new(), Vec::new());
    let (mut pz, mut px) = (Vec::new(), Vec::new());
    for run in 0..runs.max(1) {
        let lazynet_run = || run_lazynet(window, size, d, cp).map(|(r, _, _)| r);
        let linux_run = || run_linux(window, size, d, cp);
        let (r, l) = if run % 2 == 0 {
            let r = lazynet_run()?;
            (r, linux_run()?)
        } else {
            let l = linux_run()?;
            (lazynet_run()?, l)
        };
        for (name, r) in [("lazynet-wire", &r), ("linux-loopback", &l)] {
            let line = format!(
                "{name},{run},{seconds},{window},{size},{:.0},{:.2},{:.2},{}\n",
                r.rate(),
                r.p(0.5),
                r.p(0.99),
                r.lost
            );
            print!("{line}");
            csv.push_str(&line);
        }
        lz.push(r.rate());
        lx.push(l.rate());
        pz.push(r.p(0.5));
        px.push(l.p(0.5));
    }
    let (mz, mx) = (median(&lz), median(&lx));
    let summary = format!(
        "median echoes/s: lazynet {mz:.0}, linux {mx:.0}, ratio {:.2}x (goal >= 2x)\n",
        mz / mx
    );
    print!("{summary}");
    File::create(out.join("udp-echo.csv"))?.write_all(csv.as_bytes())?;
    let meta = crate::report::txt_head(&crate::report::command_line()) + &summary;
    File::create(out.join("udp-echo.txt"))?.write_all(meta.as_bytes())?;
    let cats: Vec<String> = (1..=lz.len()).map(|r| r.to_string()).collect();
    let rate = [
        ("lazynet, in-memory wire".to_string(), lz),
        ("Linux, loopback".to_string(), lx),
    ];
    let p50 = [
        ("lazynet, in-memory wire".to_string(), pz),
        ("Linux, loopback".to_string(), px),
    ];
    crate::plot::figure(
        &out.join("udp-echo.png"),
        &[
            crate::plot::Panel::Bars {
                title: "UDP echo rate per run",
                x_label: "run",
                y_label: "echoes/s",
                categories: &cats,
                series: &rate,
            },
            crate::plot::Panel::Bars {
                title: "Round trip p50 per run",
                x_label: "run",
                y_label: "us",
                categories: &cats,
                series: &p50,
            },
        ],
    )
}
