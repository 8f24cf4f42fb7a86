//! `rtu-qos`, Fig. 8: a reactive TCP echo beside best-effort bulk streams
//! and spinning processes on the host core, lazynet beside Linux TCP.
//!
//! The client (on the other core) sends one message of `size` bytes, waits
//! for all of it to come back, and records the round trip; between two
//! round trips it pumps data for [`PUMP`] into `bulk` other connections to
//! best-effort receivers on the host, which spend a little work on every
//! read, so the host always has a backlog of best-effort work when the
//! echo arrives (during a round trip the client does nothing else, so what
//! grows is the host's part). On lazynet the echo is a reactive owner
//! (token bucket) whose handler does its TCP input and echoes, one read per
//! iteration; the bulk receivers are best-effort owners whose handlers mark
//! an iteration per few segments, so the echo waits at most for one of
//! them. The host thread runs `SCHED_FIFO`.
//! On Linux the echo is a thread (under CFS, or `SCHED_FIFO`), each bulk
//! receiver a CFS thread, over loopback.
//!
//! **May not touch:** the stack's internals. Bounded in count and time.

use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpListener as StdListener, TcpStream as StdStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use hdrhistogram::Histogram;
use lazynet::host::{Host, HostState};
use lazynet::nic::wirepair::WireEnd;
use lazynet::sched::{Bucket, Class, Cx, Status, TscClock};
use lazynet::stack::{TcpListener, TcpStream};
use lazynet::sys::{set_sched_class, SchedClass};
use lazynet_cli::echo::hist;

use super::qos::{accepted, establish, host_config, stacks, Spinners, HOST, SPINNERS};
use crate::infra::cpus::Role;
use crate::infra::exp::{self, Checks, ExpOpts, Results};

const ECHO_PORT: u16 = 6000;
const BULK_PORT: u16 = 6100;
const CHUNK: usize = 16 * 1024;
/// Work per bulk read (a few segments' worth).
const BULK_WORK_NS: u64 = 2_000;
/// How long the client pumps bulk data between two round trips.
const PUMP: Duration = Duration::from_micros(100);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Series {
    Lazynet,
    LinuxCfs,
    LinuxFifo,
}

impl Series {
    fn name(self) -> &'static str {
        match self {
            Series::Lazynet => "lazynet, reactive echo, host SCHED_FIFO",
            Series::LinuxCfs => "Linux TCP echo, CFS",
            Series::LinuxFifo => "Linux TCP echo, SCHED_FIFO",
        }
    }
}

#[derive(Default)]
struct App {
    sink: u64,
}

type St = HostState<WireEnd, App>;

/// One Fig. 8 point: series, message size, bulk streams, p50 and p99 (µs).
pub type EchoPoint = (&'static str, usize, usize, f64, f64);

/// Fig. 8 into `res`: round trips per (series, size, bulk streams).
pub fn fig8(
    res: &mut Results,
    checks: &mut Checks,
    opts: &ExpOpts,
) -> anyhow::Result<Vec<EchoPoint>> {
    let sizes: &[usize] = if opts.quick {
        &[32, 4096]
    } else {
        &[32, 512, 4096, 8192]
    };
    let bulks: &[usize] = if opts.quick { &[0, 16] } else { &[0, 4, 16] };
    let rounds = if opts.quick { 400 } else { 4000 };
    let work_iters = super::qos::calibrate(BULK_WORK_NS);
    let root = lazynet::sys::is_root();
    let mut series = vec![Series::Lazynet, Series::LinuxCfs, Series::LinuxFifo];
    if opts.no_linux {
        series.retain(|s| *s == Series::Lazynet);
    }
    if !root {
        eprintln!("skipped: Fig. 8 needs root (SCHED_FIFO)");
        return Ok(Vec::new());
    }
    res.note(format!(
        "Fig. 8: a TCP echo of one message at a time, {rounds} round trips per point, beside 0 to 16 best-effort bulk streams ({} us of work per read, the client pumping them for {} us between round trips) and {SPINNERS} spinning processes when bulk streams run; p50 / p99 / p99.9 in us",
        BULK_WORK_NS / 1_000,
        PUMP.as_micros()
    ));
    let bar = exp::progress(
        (series.len() * sizes.len() * bulks.len()) as u64,
        "rtu-qos fig. 8",
    );
    let mut p99 = Vec::new();
    for &size in sizes {
        for &bulk in bulks {
            for &s in &series {
                let spin = Spinners::start(if bulk > 0 { SPINNERS } else { 0 }, 60.0)?;
                let h = match s {
                    Series::Lazynet => lazynet_point(size, bulk, rounds, work_iters),
                    Series::LinuxCfs => linux_point(size, bulk, rounds, work_iters, false),
                    Series::LinuxFifo => linux_point(size, bulk, rounds, work_iters, true),
                };
                drop(spin);
                let h = h.with_context(|| format!("{} size {size} bulk {bulk}", s.name()))?;
                let q = |x: f64| h.value_at_quantile(x) as f64 / 1e3;
                res.row(format!(
                    "fig8,{},{},{size},,,,,,,,,{bulk},{:.1},{:.1},{:.1}",
                    s.name(),
                    if bulk > 0 { SPINNERS } else { 0 },
                    q(0.5),
                    q(0.99),
                    q(0.999)
                ));
                p99.push((s, size, bulk, q(0.5), q(0.99)));
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    let max_bulk = *bulks.last().unwrap_or(&0);
    for &size in sizes {
        for &s in &series {
            let get = |b: usize| p99.iter().find(|x| x.0 == s && x.1 == size && x.2 == b);
            if let (Some(u), Some(l)) = (get(0), get(max_bulk)) {
                res.note(format!(
                    "  {}, {size} B: p50 {:.1} -> {:.1} us, p99 {:.1} -> {:.1} us ({:.2}x) from unloaded to {max_bulk} bulk streams and {SPINNERS} spinners",
                    s.name(),
                    u.3,
                    l.3,
                    u.4,
                    l.4,
                    l.4 / u.4
                ));
                if s == Series::Lazynet && size == 4096 && !opts.quick {
                    checks.check(
                        l.4 <= 1.2 * u.4,
                        format!(
                            "the reactive echo's p99 ({size} B) with {max_bulk} best-effort streams stays within 1.2x of unloaded: {:.1} vs {:.1} us",
                            l.4, u.4
                        ),
                    );
                }
            }
        }
    }
    // The shape a quick run checks: under load the reactive echo stays in
    // the tens of microseconds while Linux's echo under CFS waits for the
    // scheduler (milliseconds).
    let at = |s: Series| {
        p99.iter()
            .find(|x| x.0 == s && x.1 == 4096 && x.2 == max_bulk)
            .map(|x| x.4)
    };
    if let (Some(lz), Some(lx)) = (at(Series::Lazynet), at(Series::LinuxCfs)) {
        checks.check(
            lz * 5.0 <= lx,
            format!(
                "with {max_bulk} best-effort streams the reactive echo's p99 (4096 B) is at most a fifth of Linux's under CFS: {lz:.1} vs {lx:.1} us"
            ),
        );
    }
    Ok(p99
        .into_iter()
        .map(|(s, size, bulk, p50, p99)| (s.name(), size, bulk, p50, p99))
        .collect())
}

fn lazynet_point(
    size: usize,
    bulk: usize,
    rounds: usize,
    work_iters: u32,
) -> anyhow::Result<Histogram<u64>> {
    let (mut client, mut server) = stacks()?;
    let echo_l = server.tcp_listen(SocketAddrV4::new(HOST, ECHO_PORT), None, None)?;
    let mut bulk_l = Vec::new();
    for i in 0..bulk {
        bulk_l.push(server.tcp_listen(
            SocketAddrV4::new(HOST, BULK_PORT + i as u16),
            None,
            None,
        )?);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let host = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("rtu-echo-host".into())
            .spawn(move || -> anyhow::Result<()> {
                Role::Server.pin();
                set_sched_class(SchedClass::Fifo(10)).context("SCHED_FIFO for the host")?;
                let mut h = Host::new(server, App::default(), TscClock::new(), host_config())
                    .map_err(|e| anyhow::anyhow!("host: {e}"))?;
                let bucket = Bucket {
                    share_ppm: 300_000,
                    burst_ns: 2_000_000,
                };
                let (o, t) = h
                    .add_owner_with_handler("echo", Class::Reactive(bucket), echo_handler(echo_l))
                    .map_err(|e| anyhow::anyhow!("echo: {e}"))?;
                h.state_mut().register_listener(echo_l, o, t);
                for (i, &l) in bulk_l.iter().enumerate() {
                    let (o, t) = h
                        .add_owner_with_handler(
                            &format!("bulk{i}"),
                            Class::BestEffort,
                            bulk_handler(l, work_iters),
                        )
                        .map_err(|e| anyhow::anyhow!("bulk {i}: {e}"))?;
                    h.state_mut().register_listener(l, o, t);
                }
                let t0 = Instant::now();
                while !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(60) {
                    h.run_for(2_000_000);
                }
                let _ = set_sched_class(SchedClass::Normal);
                if crate::infra::report::verbose() {
                    eprintln!("{}\necho: {:?}", h.report(), h.usage(o));
                }
                Ok(())
            })?
    };
    Role::Client.pin();
    exp::boost();
    let now = client.now();
    let echo = client.tcp_connect(SocketAddrV4::new(HOST, ECHO_PORT), None, now)?;
    let _ = client.tcp_mut(echo).set_nodelay(true);
    let mut bulks = Vec::new();
    for i in 0..bulk {
        bulks.push(client.tcp_connect(SocketAddrV4::new(HOST, BULK_PORT + i as u16), None, now)?);
    }
    let all: Vec<TcpStream> = std::iter::once(echo).chain(bulks.iter().copied()).collect();
    establish(&mut client, &all);
    let msg = vec![0x42u8; size];
    let junk = vec![0x17u8; CHUNK];
    let mut back = vec![0u8; size.max(1)];
    let mut h = hist();
    let warm = rounds / 10;
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut done = 0;
    let mut next_bulk = 0;
    'outer: while done < rounds + warm {
        // Pump bulk data, round robin, for a while.
        let p0 = Instant::now();
        while !bulks.is_empty() && p0.elapsed() < PUMP {
            let now = client.now();
            let _ = client
                .tcp_mut(bulks[next_bulk % bulks.len()])
                .send(&junk, now);
            next_bulk += 1;
            client.poll(now);
            client.tcp_service(now, 64);
        }
        let mut sent = 0;
        let t0 = Instant::now();
        let mut got = 0;
        while got < size {
            if Instant::now() > deadline {
                break 'outer;
            }
            let now = client.now();
            if sent < size {
                if let Ok(n) = client.tcp_mut(echo).send(&msg[sent..], now) {
                    sent += n;
                }
            }
            client.poll(now);
            client.tcp_service(now, 256);
            while let Ok(n) = client.tcp_mut(echo).recv(&mut back[..size - got], now) {
                if n == 0 {
                    break;
                }
                got += n;
                if got == size {
                    break;
                }
            }
        }
        if done >= warm {
            let _ = h.record((t0.elapsed().as_nanos() as u64).max(1));
        }
        done += 1;
    }
    stop.store(true, Ordering::Relaxed);
    host.join()
        .map_err(|_| anyhow::anyhow!("host thread panicked"))??;
    if done < rounds + warm {
        bail!("only {done} round trips in 40 s");
    }
    Ok(h)
}

/// The echo: its TCP input, then whatever arrived goes back, one read per
/// iteration.
fn echo_handler(listener: TcpListener) -> impl FnMut(&mut Cx<'_>, &mut St) -> Status {
    let mut conn: Option<TcpStream> = None;
    let mut buf = vec![0u8; 16 * 1024].into_boxed_slice();
    move |cx, st| {
        for _ in 0..64 {
            st.serve_tcp(cx, 16);
            let now = st.stack.now();
            let fresh = conn.is_none();
            let Some(h) = accepted(st, cx, listener, &mut conn, now) else {
                return Status::Wait;
            };
            if fresh {
                let _ = st.stack.tcp_mut(h).set_nodelay(true);
            }
            let n = match st.stack.tcp_mut(h).recv(&mut buf, now) {
                Ok(n) if n > 0 => n,
                _ => return Status::Wait,
            };
            let mut off = 0;
            // The reply fits the send buffer (one message in flight).
            for _ in 0..8 {
                match st.stack.tcp_mut(h).send(&buf[off..n], now) {
                    Ok(k) => off += k,
                    Err(_) => break,
                }
                if off == n {
                    break;
                }
            }
            if !cx.iteration_done() {
                return Status::Ready;
            }
        }
        Status::Ready
    }
}

/// A bulk receiver: its TCP input and one chunk of work per iteration.
fn bulk_handler(
    listener: TcpListener,
    work_iters: u32,
) -> impl FnMut(&mut Cx<'_>, &mut St) -> Status {
    let mut conn: Option<TcpStream> = None;
    let mut buf = vec![0u8; CHUNK].into_boxed_slice();
    move |cx, st| {
        for _ in 0..16 {
            let served = st.serve_tcp(cx, 4);
            let now = st.stack.now();
            let Some(h) = accepted(st, cx, listener, &mut conn, now) else {
                return Status::Wait;
            };
            match st.stack.tcp_mut(h).recv(&mut buf[..4 * 1448], now) {
                Ok(n) if n > 0 => {
                    st.app.sink = exp::work(work_iters, st.app.sink ^ u64::from(buf[0]));
                }
                _ if served > 0 => {}
                _ => return Status::Wait,
            }
            if !cx.iteration_done() {
                return Status::Ready;
            }
        }
        Status::Ready
    }
}

fn linux_point(
    size: usize,
    bulk: usize,
    rounds: usize,
    work_iters: u32,
    fifo: bool,
) -> anyhow::Result<Histogram<u64>> {
    let stop = Arc::new(AtomicBool::new(false));
    let el = StdListener::bind("127.0.0.1:0")?;
    let echo_addr = el.local_addr()?;
    let mut threads = Vec::new();
    {
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || -> anyhow::Result<()> {
            Role::Server.pin();
            if fifo {
                set_sched_class(SchedClass::Fifo(10)).context("SCHED_FIFO for the echo")?;
            }
            let (mut s, _) = el.accept()?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(Duration::from_millis(50)))?;
            let mut buf = vec![0u8; 16 * 1024];
            while !stop.load(Ordering::Relaxed) {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => s.write_all(&buf[..n])?,
                    Err(_) => continue,
                }
            }
            let _ = set_sched_class(SchedClass::Normal);
            Ok(())
        }));
    }
    let mut bulk_addrs = Vec::new();
    for _ in 0..bulk {
        let l = StdListener::bind("127.0.0.1:0")?;
        bulk_addrs.push(l.local_addr()?);
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || -> anyhow::Result<()> {
            Role::Server.pin();
            let (mut s, _) = l.accept()?;
            s.set_read_timeout(Some(Duration::from_millis(50)))?;
            let mut buf = vec![0u8; CHUNK];
            let mut sink = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => sink = exp::work(work_iters, sink ^ u64::from(buf[0])),
                    Err(_) => continue,
                }
            }
            std::hint::black_box(sink);
            Ok(())
        }));
    }
    // Bulk senders on the load core, one thread for all.
    let sender = {
        let stop = stop.clone();
        let addrs = bulk_addrs.clone();
        std::thread::spawn(move || -> anyhow::Result<()> {
            Role::Client.pin();
            let mut conns = Vec::new();
            for a in &addrs {
                let s = StdStream::connect(a)?;
                s.set_nonblocking(true)?;
                conns.push(s);
            }
            let junk = vec![0x17u8; CHUNK];
            while !stop.load(Ordering::Relaxed) {
                for c in &mut conns {
                    let _ = c.write(&junk);
                }
                std::thread::sleep(Duration::from_micros(50));
            }
            Ok(())
        })
    };
    Role::Client.pin();
    let mut s = StdStream::connect(echo_addr)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    let msg = vec![0x42u8; size];
    let mut back = vec![0u8; size];
    let mut h = hist();
    let warm = rounds / 10;
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut done = 0;
    while done < rounds + warm && Instant::now() < deadline {
        let t0 = Instant::now();
        s.write_all(&msg)?;
        s.read_exact(&mut back)?;
        if done >= warm {
            let _ = h.record((t0.elapsed().as_nanos() as u64).max(1));
        }
        done += 1;
    }
    stop.store(true, Ordering::Relaxed);
    drop(s);
    let _ = sender.join();
    for t in threads {
        let _ = t.join();
    }
    if done < rounds + warm {
        bail!("only {done} round trips in 40 s");
    }
    Ok(h)
}
