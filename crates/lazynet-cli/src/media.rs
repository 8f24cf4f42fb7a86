//! The media server (`serve media`) and the demo's media part. The `nlf`
//! experiment is in the lab.

use std::io::Write;
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use lazynet::host::{Host, HostConfig, HostState};
use lazynet::mem::MappedFile;
use lazynet::nic::netns::Ownership;
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::nic::Nic;
use lazynet::nlf::stream::{StreamConfig, Streamer, BATCH, BATCH_COST_NS, PERIOD_NS};
use lazynet::nlf::{meta_path, prebuild_with, MetaFile, PrebuildOptions, SendPath};
use lazynet::sched::{Class, Cx, InstantClock, Status};
use lazynet::socket::UdpSocket;
use lazynet::stack::{Stack, StackConfig};

use crate::args::{NetArgs, NicKind};
use lazynet::sys::{cpus_online, pin_thread};

/// Options of `serve media`.
pub struct MediaArgs {
    pub media: PathBuf,
    pub meta: Option<PathBuf>,
    pub clients: Vec<SocketAddrV4>,
    pub rtp: bool,
    pub path: SendPath,
    pub payload: usize,
    pub repeat: bool,
    /// The release jitter admission assumes; `None`: measured at start.
    pub release_jitter_ns: Option<u64>,
}

fn open_meta(a: &MediaArgs) -> anyhow::Result<MetaFile> {
    let meta = a
        .meta
        .clone()
        .unwrap_or_else(|| meta_path(&a.media, a.payload, a.rtp, None));
    MetaFile::open(&meta, &a.media).with_context(|| {
        format!(
            "meta-data {} for {} (prebuild it with `lazynet nlf prebuild`)",
            meta.display(),
            a.media.display()
        )
    })
}

/// The release jitter admission assumes when wake-ups could not be
/// measured: what the lab's media and scheduling runs declare.
const UNMEASURED_JITTER_NS: u64 = 200_000;

/// What the media server's handler works on.
struct MediaApp {
    streamer: Streamer<MappedFile>,
    repeat: bool,
    done: bool,
}

/// `lazynet serve media`.
pub fn serve(a: &MediaArgs, net: &NetArgs) -> anyhow::Result<()> {
    let meta = open_meta(a)?;
    anyhow::ensure!(!a.clients.is_empty(), "at least one --client ADDR:PORT");
    anyhow::ensure!(
        meta.rtp() == a.rtp,
        "the meta file was prebuilt {} RTP; pass the same --rtp",
        if meta.rtp() { "with" } else { "without" }
    );
    let media = MappedFile::open(&a.media).with_context(|| format!("map {}", a.media.display()))?;
    let stop = crate::util::stop_flag()?;
    let cfg = StackConfig {
        // The streamer mostly sends; `ni-lrp` runs as `soft-lrp` here
        // (`Stack::new`'s rule).
        mode: net.mode,
        ..net.stack_config()?
    };
    let mut owned_ns = None;
    let mut sink = None;
    let mut stack = if let Some(p) = &net.daemon {
        // Attached: the daemon's NIC; payloads are copied (no ext area).
        crate::serve::Opened::Daemon(p.clone()).into_stack(cfg, net)?
    } else {
        let nic: crate::serve::DynNic = match net.nic {
            NicKind::Wire => {
                let (a_end, b_end) = WirePair::new(WireConfig {
                    ext_bytes: media.bytes().len() as u64,
                    ..WireConfig::default()
                })?;
                sink = Some(spawn_sink(b_end, a.clients.clone(), stop.clone()));
                Box::new(a_end)
            }
            NicKind::Tap => {
                let (tap, own) = crate::serve::tap_nic(net, media.bytes().len())?;
                owned_ns = Some(own);
                tap
            }
            NicKind::Xdp => {
                // No ext area: gather frames are copied into the buffer
                // after their header (one copy, as the kernel does for TAP).
                let (nic, own) = crate::serve::xdp_nic(net, cfg.addr)?;
                owned_ns = Some(own);
                nic
            }
        };
        let nic = crate::serve::with_pcap(nic, net)?;
        Stack::new(nic, cfg)
    };
    let scfg = StreamConfig {
        path: a.path,
        seed: crate::serve::seed_from_os(),
        ..StreamConfig::default()
    };
    // The streams' source port is bound like any socket's: nobody else on
    // this stack (or, attached, on the daemon) can take it, and an attached
    // streamer's frames pass the daemon's source check.
    let _src = lazynet::socket::UdpSocket::bind(
        &mut stack,
        std::net::SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, scfg.src_port),
    )
    .map_err(|e| anyhow::anyhow!("source port {}: {e}", scfg.src_port))?;
    let mut streamer = Streamer::new(meta, media, &a.clients, scfg)?;
    let by_ref = streamer.attach(&mut stack);
    // The streams are one periodic handler (RTU §III-D): every period it
    // sends that period's packets; in between the host sleeps.
    let class = streamer.periodic(PERIOD_NS, BATCH_COST_NS);
    eprintln!(
        "streaming {} ({} packets, {:.2} Mbit/s) to {} clients, path {}, payload {}; a periodic handler of {} ms, up to {} packets a period",
        a.media.display(),
        streamer.meta().packets(),
        streamer.meta().bit_rate() as f64 / 1e6,
        a.clients.len(),
        a.path,
        if by_ref { "by reference" } else { "copied" },
        PERIOD_NS as f64 / 1e6,
        class.batch as usize * BATCH
    );
    let mut hcfg = HostConfig::for_mode(stack.mode()).sleeping();
    // Admission assumes releases seen up to a wake-up late: as late as
    // this machine's wake-ups measure (twice the worst of 100 half-period
    // sleeps: a sample of 100 does not see the tail), not zero.
    let (jitter, why) = match a.release_jitter_ns {
        Some(j) => (j, "given, not measured".to_string()),
        None => match lazynet::host::wakeup_overshoot(stack.nic_mut(), 100, PERIOD_NS / 2) {
            Some(o) => (
                o.saturating_mul(2),
                format!("wake-ups measured up to {:.0} us late", o as f64 / 1e3),
            ),
            None => (
                UNMEASURED_JITTER_NS,
                "not measured: frames were waiting at every sample".to_string(),
            ),
        },
    };
    hcfg.sched.release_jitter_ns = jitter;
    eprintln!(
        "release jitter assumed by admission: {:.0} us ({why})",
        jitter as f64 / 1e3
    );
    let app = MediaApp {
        streamer,
        repeat: a.repeat,
        done: false,
    };
    let mut h = Host::new(stack, app, InstantClock::new(), hcfg)
        .map_err(|e| anyhow::anyhow!("host: {e}"))?;
    let owner = h
        .add_owner("media", Class::Periodic(class))
        .map_err(|e| anyhow::anyhow!("the streams do not fit on one core: {e}"))?;
    h.spawn(
        owner,
        |cx: &mut Cx<'_>, st: &mut HostState<crate::serve::DynNic, MediaApp>| match st
            .app
            .streamer
            .serve_period(&mut st.stack, cx)
        {
            Status::Done if st.app.repeat => {
                st.app.streamer.rewind();
                Status::Ready
            }
            Status::Done => {
                st.app.done = true;
                Status::Done
            }
            s => s,
        },
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    println!("ready");
    std::io::stdout().flush()?;
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) && !h.app().done {
        h.run_for(10_000_000);
    }
    if h.app().done {
        // Let the last frames and any ARP traffic settle, then stop.
        h.run_for(200_000_000);
    }
    let media_usage = h.usage(owner);
    let (mut stack, mut app) = h.into_parts();
    let streamer = &mut app.streamer;
    streamer.release(&mut stack);
    let s = streamer.stats();
    println!(
        "stream: {} packets, {} payload bytes in {:.2} s; by reference {}, copied {}, late {} (max {:.2} ms), backpressure {}",
        s.packets,
        s.payload_bytes,
        started.elapsed().as_secs_f64(),
        s.by_reference,
        s.copied,
        s.late,
        s.max_late_ns as f64 / 1e6,
        s.backpressure
    );
    println!(
        "media handler: {} periods, {} deadline misses, {} iterations ({} over the declared {:.0} us)",
        media_usage.releases,
        media_usage.deadline_misses,
        media_usage.iterations,
        media_usage.overruns,
        BATCH_COST_NS as f64 / 1e3
    );
    println!("counters:\n{}", stack.stats());
    drop(stack);
    stop.store(true, Ordering::Relaxed);
    if let Some(h) = sink {
        let (dgrams, bytes) = h
            .join()
            .map_err(|_| anyhow::anyhow!("sink thread panicked"))?;
        println!("wire receiver: {dgrams} datagrams, {bytes} bytes");
    }
    if let Some(Ownership::Created(g)) = owned_ns {
        g.cleanup()?;
    }
    Ok(())
}

/// A lazynet receiver on the other end of the wire: binds the clients'
/// ports on the first client's address and counts what arrives.
fn spawn_sink(
    end: WireEnd,
    clients: Vec<SocketAddrV4>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(u64, u64)> {
    std::thread::spawn(move || {
        let addr = *clients[0].ip();
        let mut stack = Stack::new(
            end,
            StackConfig {
                addr,
                prefix_len: 24,
                seed: 9,
                ..StackConfig::default()
            },
        );
        let socks: Vec<UdpSocket> = clients
            .iter()
            .filter(|c| *c.ip() == addr)
            .filter_map(|c| UdpSocket::bind(&mut stack, *c).ok())
            .collect();
        let (mut n, mut bytes) = (0u64, 0u64);
        let mut buf = vec![0u8; 65536];
        while !stop.load(Ordering::Relaxed) {
            let now = stack.now();
            let w = stack.poll(now);
            let mut got = 0;
            for s in &socks {
                while let Ok((len, _)) = s.recv_from(&mut stack, &mut buf) {
                    n += 1;
                    bytes += len as u64;
                    got += 1;
                }
            }
            if w.received == 0 && got == 0 {
                stack.nic_mut().wait(Some(200_000));
            }
        }
        (n, bytes)
    })
}

/// `len` pseudo-random bytes (xorshift, fixed seed): media content that
/// neither compresses nor checksums trivially, the same in every run.
pub fn noise(len: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Writes `len` bytes of a synthetic MPEG-TS-like stream (188-byte packets
/// with a PCR every 40 ms of a 3 Mbit/s stream) to `path`.
pub fn synthetic_ts(path: &Path, len: usize) -> anyhow::Result<()> {
    let mut v = Vec::with_capacity(len);
    let bit_rate = 3_000_000u64;
    let mut i = 0u64;
    while v.len() + 188 <= len {
        let mut p = [0u8; 188];
        p[0] = 0x47;
        p[1] = 0x01; // PID 0x100
        p[2] = 0x00;
        let byte_pos = v.len() as u64;
        if i % 80 == 0 {
            // Adaptation field with a PCR: base (33 bits, 90 kHz) + ext (27 MHz).
            p[3] = 0x30 | (i % 16) as u8;
            p[4] = 7;
            p[5] = 0x10;
            let pcr27 = byte_pos * 8 * 27_000_000 / bit_rate;
            let (base, ext) = (pcr27 / 300, pcr27 % 300);
            p[6] = (base >> 25) as u8;
            p[7] = (base >> 17) as u8;
            p[8] = (base >> 9) as u8;
            p[9] = (base >> 1) as u8;
            p[10] = (((base & 1) << 7) as u8) | 0x7e | ((ext >> 8) as u8 & 1);
            p[11] = ext as u8;
            for (k, b) in p[12..].iter_mut().enumerate() {
                *b = (i as usize * 31 + k) as u8;
            }
        } else {
            p[3] = 0x10 | (i % 16) as u8;
            for (k, b) in p[4..].iter_mut().enumerate() {
                *b = (i as usize * 17 + k * 3) as u8;
            }
        }
        v.extend_from_slice(&p);
        i += 1;
    }
    std::fs::write(path, &v)?;
    Ok(())
}

/// The demo's media part: a synthetic stream of `seconds` (clamped to 1–10 s)
/// to 200 clients on the in-memory wire, paced in real time; the receiver
/// checks every byte.
pub fn demo(seconds: f64) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("lazynet-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let media_path = dir.join("demo.ts");
    let secs = seconds.clamp(1.0, 10.0);
    synthetic_ts(&media_path, (3_000_000.0 / 8.0 * secs) as usize)?;
    let opts = PrebuildOptions {
        payload: 1316,
        rtp: false,
        out_dir: Some(&dir),
        nominal_bit_rate: 3_000_000,
    };
    let sum = prebuild_with(&media_path, &opts, &mut |_, _| {})?;
    let meta = MetaFile::open(&sum.meta, &media_path)?;
    let media = MappedFile::open(&media_path)?;
    let n_clients = 200u16;
    let clients: Vec<SocketAddrV4> = (0..n_clients)
        .map(|i| SocketAddrV4::new(crate::echo::CLIENT_ADDR, 6000 + i))
        .collect();
    let (a, b) = WirePair::new(WireConfig {
        ext_bytes: media.bytes().len() as u64,
        buf_count: 4096,
        ..WireConfig::default()
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    let expected = media.bytes().to_vec();
    let bytes_ok = Arc::new(AtomicU64::new(0));
    let (stop2, ok2) = (stop.clone(), bytes_ok.clone());
    let clients2 = clients.clone();
    let rx = std::thread::spawn(move || {
        pin_thread(1 % cpus_online());
        let mut st = Stack::new(
            b,
            StackConfig {
                addr: crate::echo::CLIENT_ADDR,
                seed: 5,
                ..StackConfig::default()
            },
        );
        let socks: Vec<(UdpSocket, usize)> = clients2
            .iter()
            .map(|c| (UdpSocket::bind(&mut st, *c).expect("bind"), 0usize))
            .collect();
        let mut socks = socks;
        let mut buf = vec![0u8; 2048];
        let mut bad = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            let now = st.now();
            st.poll(now);
            for (s, pos) in socks.iter_mut() {
                while let Ok((n, _)) = s.recv_from(&mut st, &mut buf) {
                    if expected.get(*pos..*pos + n) == Some(&buf[..n]) {
                        ok2.fetch_add(n as u64, Ordering::Relaxed);
                    } else {
                        bad += 1;
                    }
                    *pos += n;
                }
            }
        }
        bad
    });
    pin_thread(0);
    let mut stack = Stack::new(
        a,
        StackConfig {
            addr: crate::echo::SERVER_ADDR,
            seed: 6,
            ..StackConfig::default()
        },
    );
    let mut s = Streamer::new(meta, media, &clients, StreamConfig::default())?;
    let by_ref = s.attach(&mut stack);
    let t0 = Instant::now();
    let cpu0 = lazynet::sys::thread_cpu_ns();
    loop {
        let now = stack.now();
        stack.poll(now);
        match s.poll(&mut stack, now) {
            None => break,
            // Tick pacing: send what is due, then sleep a millisecond.
            Some(due) if due > stack.now() => std::thread::sleep(Duration::from_millis(1)),
            Some(_) => {}
        }
    }
    s.release(&mut stack);
    let cpu = lazynet::sys::thread_cpu_ns() - cpu0;
    let wall = t0.elapsed();
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let bad = rx
        .join()
        .map_err(|_| anyhow::anyhow!("receiver panicked"))?;
    let st = s.stats();
    let total = s.meta().media_len() * n_clients as u64;
    println!("\nmedia (network level framing, path v3): {secs:.0} s of 3 Mbit/s MPEG-TS to {n_clients} clients, payload {}", if by_ref { "by reference" } else { "copied" });
    println!(
        "  {} packets in {:.2} s ({:.0}/s), sender CPU {:.0} ns/packet, paced by a 1 ms tick (max lateness {:.1} ms); received intact: {} of {} bytes, damaged {bad}",
        st.packets,
        wall.as_secs_f64(),
        st.packets as f64 / wall.as_secs_f64(),
        cpu as f64 / st.packets.max(1) as f64,
        st.max_late_ns as f64 / 1e6,
        bytes_ok.load(Ordering::Relaxed),
        total
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
