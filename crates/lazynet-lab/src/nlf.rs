//! `lazynet-lab nlf`: the NLF paper's Table 1 and Fig. 4. Cycles per packet
//! of the four send paths (traditional, v1, v2, v3) at 1–8 KiB payloads,
//! sender CPU per stream, streams served per core, and Linux's own ways
//! (`sendmmsg`, `sendfile` + `UDP_SEGMENT`) beside them.
//!
//! **May not touch:** the stack's internals; the streamer and the stack are
//! driven through their public API, as `lazynet serve media` does.

use std::fmt::Write as _;
use std::net::SocketAddrV4;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use lazynet::mem::MappedFile;
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::nlf::stream::{StreamConfig, Streamer, BATCH};
use lazynet::nlf::{prebuild_with, MetaFile, PrebuildOptions, SendPath};
use lazynet::sched::clock::TscClock;
use lazynet::stack::{Stack, StackConfig};
use lazynet::sys::{cpus_online, pin_thread, SchedClass};
use lazynet_cli::media::{noise, synthetic_ts};

/// Waits for `due` (ns on the stack's clock, now `now`) in ticks of at
/// least 100 µs: many staggered clients always have a packet due within
/// microseconds, and a real-time thread that never sleeps is throttled by
/// the kernel (95% rule), so the sender sends everything due, then sleeps.
fn pace(due: u64, now: u64) {
    if due > now {
        std::thread::sleep(Duration::from_nanos((due - now).max(100_000)));
    }
}

/// One cell of the experiment.
struct Cell {
    path: SendPath,
    payload: usize,
    cycles: Histogram<u64>,
    cpu_ns_per_packet: f64,
    packets: u64,
}

/// Streams `mbytes` of `media` with `path` to one client over the wire as
/// fast as the send path allows, timing each batch with the TSC.
fn measure_cell(
    path: SendPath,
    media_path: &Path,
    meta_file: &Path,
    mbytes: u64,
) -> anyhow::Result<Cell> {
    let meta = MetaFile::open(meta_file, media_path)?;
    let payload = meta.payload_size() as usize;
    let media = MappedFile::open(media_path)?;
    let (a, b) = WirePair::new(WireConfig {
        ext_bytes: media.bytes().len() as u64,
        buf_size: 16384,
        mtu: 9000,
        buf_count: 2048,
        ring_capacity: 512,
        ..WireConfig::default()
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let sink = discard_sink(b, stop2, true);
    pin_thread(0);
    let mut stack = Stack::new(
        a,
        StackConfig {
            addr: lazynet_cli::echo::SERVER_ADDR,
            seed: 3,
            ..StackConfig::default()
        },
    );
    let client = SocketAddrV4::new(lazynet_cli::echo::CLIENT_ADDR, 5000);
    // No ARP peer on a discarding wire: the client's MAC is configured.
    stack.set_neighbor(*client.ip(), [2, 0, 0, 0, 0, 2]);
    let mut s = Streamer::new(
        meta,
        media,
        &[client],
        StreamConfig {
            path,
            ..StreamConfig::default()
        },
    )?;
    s.attach(&mut stack);
    s.poll(&mut stack, 0); // builds the client's header
    s.rewind();
    // Warm up: every buffer of the sender written once (first-touch page
    // faults), caches and branch predictors warm; not timed.
    while s.stats().packets < 4 * 2048 {
        if s.finished() {
            s.rewind();
        }
        if s.send_batch(&mut stack, 0, BATCH) < BATCH {
            let now = stack.now();
            stack.poll(now);
        }
    }
    let mut h = Histogram::<u64>::new_with_bounds(1, 100_000_000, 3)?;
    let target = s.stats().payload_bytes + mbytes * 1_000_000;
    // Real-time while timing (milliseconds per cell), so other processes
    // do not preempt a batch in the middle.
    let fifo = lazynet::sys::set_sched_class(SchedClass::Fifo(10)).is_ok();
    let cpu0 = lazynet::sys::thread_cpu_ns();
    let mut sent = 0u64;
    while s.stats().payload_bytes < target {
        if s.finished() {
            s.rewind();
        }
        let c0 = lazynet::sys::rdtsc();
        let n = s.send_batch(&mut stack, 0, BATCH);
        let c1 = lazynet::sys::rdtsc();
        if n == BATCH {
            let _ = h.record(((c1 - c0) / BATCH as u64).max(1));
        }
        sent += n as u64;
        if n < BATCH {
            let now = stack.now();
            stack.poll(now);
        }
    }
    let cpu = lazynet::sys::thread_cpu_ns() - cpu0;
    if fifo {
        let _ = lazynet::sys::set_sched_class(SchedClass::Normal);
    }
    stop.store(true, Ordering::Relaxed);
    let _ = sink.join();
    Ok(Cell {
        path,
        payload,
        cycles: h,
        cpu_ns_per_packet: cpu as f64 / sent.max(1) as f64,
        packets: sent,
    })
}

/// The other end of a measurement wire: drops what arrives without looking
/// at it (no copy, no protocol work), so only the sender's path is measured.
/// Real-time (SCHED_FIFO) on the other core so other processes cannot stall
/// it and fill the ring. With `spin` it spins while frames flow (flat-out
/// cells of a few milliseconds); without, it sleeps whenever the ring is
/// empty, so under a long paced stream it is never always-running and the
/// kernel's RT throttling (95% of each second) cannot stall it.
fn discard_sink(
    b: WireEnd,
    stop: Arc<AtomicBool>,
    spin: bool,
) -> std::thread::JoinHandle<lazynet::nic::wirepair::WireStats> {
    std::thread::spawn(move || {
        pin_thread(1 % cpus_online());
        let fifo = lazynet::sys::set_sched_class(SchedClass::Fifo(10)).is_ok();
        let mut end = b;
        let mut idle = 0u32;
        while !stop.load(Ordering::Relaxed) {
            if end.discard(256) > 0 {
                idle = 0;
            } else if spin && idle < 10_000 {
                // Spin while frames flow, so the sender never waits on us.
                idle += 1;
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
        if fifo {
            let _ = lazynet::sys::set_sched_class(SchedClass::Normal);
        }
        end.stats()
    })
}

/// One paced run of [`streams_per_core`].
struct PacedRun {
    packets: u64,
    /// Packets sent more than 1 ms after their time.
    late: u64,
    /// The sending thread's CPU per stream and second of wall time (ns).
    cpu_per_stream: f64,
    /// Whether the sender got SCHED_FIFO.
    fifo: bool,
}

/// Streams to `n` 3 Mbit/s clients from one core in real time for `secs`
/// and counts the packets sent late (the search for how many one core
/// serves).
fn streams_per_core(
    media_path: &Path,
    meta_file: &Path,
    n: usize,
    secs: f64,
) -> anyhow::Result<PacedRun> {
    let meta = MetaFile::open(meta_file, media_path)?;
    let media = MappedFile::open(media_path)?;
    let (a, b) = WirePair::new(WireConfig {
        ext_bytes: media.bytes().len() as u64,
        buf_count: 16384,
        ring_capacity: 8192,
        ..WireConfig::default()
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let sink = discard_sink(b, stop2, false);
    pin_thread(0);
    let mut stack = Stack::new(
        a,
        StackConfig {
            addr: lazynet_cli::echo::SERVER_ADDR,
            seed: 4,
            ..StackConfig::default()
        },
    );
    stack.set_neighbor(lazynet_cli::echo::CLIENT_ADDR, [2, 0, 0, 0, 0, 2]);
    let clients: Vec<SocketAddrV4> = (0..n)
        .map(|i| SocketAddrV4::new(lazynet_cli::echo::CLIENT_ADDR, 1024 + (i % 60000) as u16))
        .collect();
    let mut s = Streamer::new(meta, media, &clients, StreamConfig::default())?;
    s.attach(&mut stack);
    let fifo = lazynet::sys::set_sched_class(SchedClass::Fifo(10)).is_ok();
    let cpu0 = lazynet::sys::thread_cpu_ns();
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < secs {
        let now = stack.now();
        stack.poll(now);
        match s.poll(&mut stack, now) {
            None => break,
            // Send what is due, then sleep in ticks (see `pace`).
            Some(due) => pace(due, stack.now()),
        }
    }
    let cpu = lazynet::sys::thread_cpu_ns() - cpu0;
    let wall = t0.elapsed().as_secs_f64();
    if fifo {
        let _ = lazynet::sys::set_sched_class(SchedClass::Normal);
    }
    s.release(&mut stack);
    stop.store(true, Ordering::Relaxed);
    let _ = sink.join();
    Ok(PacedRun {
        packets: s.stats().packets,
        late: s.stats().late,
        cpu_per_stream: cpu as f64 / (n as f64 * wall),
        fifo,
    })
}

/// `lazynet-lab nlf`.
pub fn exp(quick: bool, out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    let work = std::env::temp_dir().join(format!("lazynet-nlf-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let mbytes: u64 = if quick { 20 } else { 200 };
    // MPEG-TS for the streams-per-core run; cells stream their media round
    // and round until `mbytes` went out.
    let media_path = work.join("media.ts");
    synthetic_ts(&media_path, 8 << 20)?;
    let hz = TscClock::calibrate(Duration::from_millis(200)).ticks_per_sec() as f64;
    let payloads = [1024usize, 2048, 4096, 8192];
    println!(
        "exp nlf: {mbytes} MB per cell over the in-memory wire, TSC {:.2} GHz",
        hz / 1e9
    );
    // One CSV for both senders: lazynet's paths (cycles of the send path
    // from the TSC, CPU per packet from the thread's clock) and Linux's
    // system calls ("-" where a column does not apply).
    let mut csv = String::from(
        "sender,payload_bytes,cycles_min,cycles_avg,cycles_p99,cpu_ns_per_packet,packets,bytes,wall_ns_per_packet,calls,device_frames,errors,destination\n",
    );
    let mut cells = Vec::new();
    // Opaque bytes (not MPEG-TS) so every payload is exactly the size asked for.
    let raw = work.join("media.bin");
    std::fs::write(&raw, noise(if quick { 8 << 20 } else { 64 << 20 }))?;
    for &p in &payloads {
        let sum = prebuild_with(
            &raw,
            &PrebuildOptions {
                payload: p,
                rtp: false,
                out_dir: Some(&work),
                nominal_bit_rate: 3_000_000,
            },
            &mut |_, _| {},
        )?;
        for path in SendPath::ALL {
            let c = measure_cell(path, &raw, &sum.meta, mbytes)?;
            let row = format!(
                "{},{},{},{:.0},{},{:.1},{},{},-,-,-,0,wire",
                c.path,
                c.payload,
                c.cycles.min(),
                c.cycles.mean(),
                c.cycles.value_at_quantile(0.99),
                c.cpu_ns_per_packet,
                c.packets,
                c.packets * c.payload as u64
            );
            println!(
                "  {row}   ({} packets, {:.1} ns CPU/packet)",
                c.packets, c.cpu_ns_per_packet
            );
            csv.push_str(&row);
            csv.push('\n');
            cells.push(c);
        }
    }

    // Linux beside it: the same payloads with sendmmsg and sendfile + UDP_SEGMENT.
    let mut linux = Vec::new();
    let linux_datagrams = if quick { 20_000 } else { 200_000 };
    use crate::linux_send::{measure_with, LinuxDest, LinuxMethod, LinuxSendConfig};
    // Every method with the CPU doing segmentation and checksums, and
    // sendfile + UDP_SEGMENT also with the TAP doing them (like a NIC with USO).
    let kinds: Vec<(LinuxMethod, bool)> = LinuxMethod::ALL
        .iter()
        .map(|&m| (m, false))
        .chain([(LinuxMethod::SendfileUdpSegment, true)])
        .collect();
    let kind_name =
        |m: LinuxMethod, off: bool| format!("{}{}", m.name(), if off { "+uso" } else { "" });
    for &p in &payloads {
        for &(m, offload) in &kinds {
            let cfg = LinuxSendConfig {
                method: m,
                payload: p,
                datagrams: linux_datagrams,
                media: Some(raw.clone()),
                dest: LinuxDest::TapInPrivateNetns,
                offload,
            };
            match measure_with(&cfg) {
                Ok(r) => {
                    let name = kind_name(r.method, r.offload);
                    let row = format!(
                        "linux-{name},{},-,{:.0},-,{:.1},{},{},{:.1},{},{},{},{}",
                        r.payload,
                        r.cpu_ns_per_datagram * hz / 1e9,
                        r.cpu_ns_per_datagram,
                        r.datagrams,
                        r.bytes,
                        r.wall_ns_per_datagram,
                        r.calls,
                        r.device_frames.map_or(String::from("-"), |d| d.to_string()),
                        r.errors,
                        r.dest.name()
                    );
                    println!(
                        "  {row}{}",
                        r.note
                            .as_deref()
                            .map(|n| format!("  ({n})"))
                            .unwrap_or_default()
                    );
                    if let Some(e) = &r.first_error {
                        println!("    first error: {e}");
                    }
                    csv.push_str(&row);
                    csv.push('\n');
                    linux.push((name, p, r.cpu_ns_per_datagram));
                }
                Err(e) => println!("  linux {} {p}: not measured: {e:#}", kind_name(m, offload)),
            }
        }
    }
    std::fs::write(out.join("nlf.csv"), &csv)?;

    // Streams per core: 3 Mbit/s, 1316-byte payloads, v3, real-time pacing.
    let ts_meta = prebuild_with(
        &media_path,
        &PrebuildOptions {
            payload: 1316,
            rtp: false,
            out_dir: Some(&work),
            nominal_bit_rate: 3_000_000,
        },
        &mut |_, _| {},
    )?;
    // Thread CPU per packet of v3 at 1 KiB (every cell was measured above).
    let v3_cpu_1k = cells
        .iter()
        .find(|c| c.path == SendPath::V3 && c.payload == 1024)
        .map(|c| c.cpu_ns_per_packet)
        .context("no v3 cell at 1 KiB")?;
    let pps_per_stream = 3_000_000.0 / (1316.0 * 8.0);
    let estimate = (1e9 / (v3_cpu_1k * pps_per_stream)) as usize;
    // Double from 500 clients while at most 0.1% of packets are later than
    // 1 ms (one wake-up outlier on this VM should not decide), then bisect.
    let mut n_ok = 0usize;
    let mut n_bad = usize::MAX;
    let mut stream_cpu = None;
    let mut tried = String::new();
    let (mut runs, mut fifo_runs) = (0usize, 0usize);
    let mut n = 500usize;
    for _ in 0..if quick { 4 } else { 9 } {
        let r = streams_per_core(&media_path, &ts_meta.meta, n, if quick { 0.5 } else { 2.0 })?;
        runs += 1;
        fifo_runs += usize::from(r.fifo);
        let (pkts, late) = (r.packets, r.late);
        let _ = write!(tried, " {n}:{pkts}pkts/{late}late");
        if late * 1000 <= pkts {
            stream_cpu = Some((n, r.cpu_per_stream));
            n_ok = n_ok.max(n);
        } else {
            n_bad = n_bad.min(n);
        }
        n = if n_bad == usize::MAX {
            n * 2
        } else {
            (n_ok + n_bad) / 2
        };
        if n_bad != usize::MAX && n_bad - n_ok <= n_bad / 16 {
            break;
        }
    }

    // Summary against the goals.
    let avg = |path: SendPath, p: usize| {
        cells
            .iter()
            .find(|c| c.path == path && c.payload == p)
            .map(|c| c.cycles.mean())
            .unwrap_or(f64::NAN)
    };
    let v3: Vec<f64> = payloads.iter().map(|&p| avg(SendPath::V3, p)).collect();
    let (v3min, v3max) = v3
        .iter()
        .fold((f64::MAX, 0f64), |(a, b), &x| (a.min(x), b.max(x)));
    let spread = v3max / v3min - 1.0;
    let ratio8 = avg(SendPath::V3, 8192) / avg(SendPath::Traditional, 8192);
    let lin = |name: &str, p: usize| linux.iter().find(|x| x.0 == name && x.1 == p).map(|x| x.2);
    let sendfile_1k = lin("sendfile+udp_segment+uso", 1024);
    let sendfile_1k_sw = lin("sendfile+udp_segment", 1024);
    let mut txt = crate::report::txt_head(&crate::report::command_line());
    txt.push('\n');
    let _ = writeln!(txt, "TSC: {:.3} GHz; {mbytes} MB streamed per cell; cycles per packet from batches of {BATCH} timed with RDTSC; Linux: {linux_datagrams} datagrams per cell, from a TAP device in a private namespace\n", hz / 1e9);
    let med = |path: SendPath, p: usize| {
        cells
            .iter()
            .find(|c| c.path == path && c.payload == p)
            .map(|c| c.cycles.value_at_quantile(0.5))
            .unwrap_or(0)
    };
    let _ = writeln!(
        txt,
        "v3 cycles per packet at 1/2/4/8 KiB: mean {:.0} / {:.0} / {:.0} / {:.0} — spread {:.0}% (goal within ±20%); median {} / {} / {} / {}",
        v3[0],
        v3[1],
        v3[2],
        v3[3],
        spread * 100.0,
        med(SendPath::V3, 1024),
        med(SendPath::V3, 2048),
        med(SendPath::V3, 4096),
        med(SendPath::V3, 8192)
    );
    let _ = writeln!(txt, "v3 / traditional at 8 KiB: {ratio8:.3} (goal ≤ 0.10)");
    for (label, l) in [
        ("with segmentation offload (USO)", sendfile_1k),
        ("without offload", sendfile_1k_sw),
    ] {
        match l {
            Some(l) => {
                let _ = writeln!(
                    txt,
                    "CPU per datagram at 1 KiB: v3 on the wire {v3_cpu_1k:.1} ns (thread CPU; {:.1} ns from the TSC cycles of the send path) vs Linux sendfile+UDP_SEGMENT {label} {l:.1} ns: ratio {:.2} (goal ≤ 0.5)",
                    avg(SendPath::V3, 1024) / hz * 1e9,
                    v3_cpu_1k / l
                );
            }
            None => {
                let _ = writeln!(txt, "Linux sendfile+UDP_SEGMENT {label}: not measured");
            }
        }
    }
    let stream_pkts = 10.0 * pps_per_stream; // a 10 s, 3 Mbit/s stream
    match stream_cpu {
        Some((n, c)) => {
            let _ = writeln!(
                txt,
                "Sender CPU per 3 Mbit/s stream, measured in the paced run with {n} streams (v3, thread CPU incl. pacing): {:.1} µs per second of stream ({:.2}% of a core per 1000 streams); a 10 s stream: {:.2} ms (the send path alone: {:.2} ms for its {:.0} packets)",
                c / 1e3,
                c * 1000.0 / 1e9 * 100.0,
                c * 10.0 / 1e6,
                stream_pkts * v3_cpu_1k / 1e6,
                stream_pkts
            );
        }
        None => {
            let _ = writeln!(txt, "CPU per 10 s 3 Mbit/s stream (send path only, v3, {stream_pkts:.0} packets): {:.2} ms", stream_pkts * v3_cpu_1k / 1e6);
        }
    }
    let sched = if fifo_runs == runs {
        "sender in SCHED_FIFO".to_string()
    } else if fifo_runs == 0 {
        "sender at normal priority: SCHED_FIFO refused".to_string()
    } else {
        format!("sender in SCHED_FIFO in {fifo_runs} of {runs} runs")
    };
    let _ = writeln!(txt, "3 Mbit/s streams one core sustains ({sched}, ≤ 0.1% of packets later than 1 ms): {n_ok} (estimate from CPU/packet {estimate}; tried{tried})");
    print!("{txt}");
    std::fs::write(out.join("nlf.txt"), &txt)?;

    let mut series: Vec<(String, Vec<(f64, f64)>)> = SendPath::ALL
        .iter()
        .map(|&path| {
            (
                path.to_string(),
                payloads.iter().map(|&p| (p as f64, avg(path, p))).collect(),
            )
        })
        .collect();
    for &(m, offload) in &kinds {
        let name = kind_name(m, offload);
        let pts: Vec<(f64, f64)> = linux
            .iter()
            .filter(|x| x.0 == name)
            .map(|x| (x.1 as f64, x.2 * hz / 1e9))
            .collect();
        if !pts.is_empty() {
            series.push((format!("Linux {name}"), pts));
        }
    }

    let cats: Vec<String> = payloads
        .iter()
        .map(|p| format!("{} KiB", p / 1024))
        .collect();
    let bars: Vec<(String, Vec<f64>)> = SendPath::ALL
        .iter()
        .map(|&path| {
            (
                path.to_string(),
                payloads.iter().map(|&p| avg(path, p)).collect(),
            )
        })
        .collect();
    crate::plot::figure(
        &out.join("nlf.png"),
        &[
            crate::plot::Panel::Lines {
                title: "Send path cost per packet (NLF Table 1 / Fig. 4)",
                x_label: "payload bytes",
                y_label: "CPU cycles per packet",
                series: &series,
                log_x: true,
                log_y: true,
            },
            crate::plot::Panel::Bars {
                title: "Average cycles per packet by send path",
                x_label: "payload",
                y_label: "CPU cycles per packet",
                categories: &cats,
                series: &bars,
            },
        ],
    )?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}
