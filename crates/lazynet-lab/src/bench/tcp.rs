//! TCP benchmarks on the in-memory wire: lazynet against smoltcp, both
//! driven by the same loops over the same [`WirePair`].
//!
//! * `tcp-bulk`: one connection, the client writes as fast as it can, the
//!   server reads and discards; goodput counted at the server.
//! * `tcp-rr`: one connection, 1-byte request, 1-byte echo, repeat; the
//!   client times each round trip.
//!
//! Each stack runs on its own pinned thread and busy-polls (the client's
//! and the server's cores, [`crate::infra::cpus::pair`]). smoltcp's side
//! is in [`crate::baseline::smol`].
//!
//! **Owns:** the benchmark loops both stacks run, the vCPU placement probe
//! and the single-thread runs that profiles and instruction counts use.
//! **May not touch:** either stack's internals beyond their public API and
//! configuration.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use lazynet::mem::Desc;
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::nic::Nic;
use lazynet::proto::tcp::{Config, State};
use lazynet::sched::clock::{Clock, TscClock};
use lazynet::socket::SocketError;
use lazynet::stack::{EvictMode, Stack, StackConfig, TcpListener, TcpStream, RX_AHEAD};
use lazynet::wire::checksum;

use lazynet::sys::pin_thread;
use lazynet_cli::echo::hist;

use crate::infra::cpus;
use crate::infra::report::median;

pub const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(10, 202, 0, 1);
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 202, 0, 2);
pub const PORT: u16 = 5001;
/// Send and receive buffer of each connection, both stacks, by default.
pub const BUF: usize = 256 * 1024;

/// How a benchmark sets up its stacks and runs its threads (the options of
/// `bench tcp-*`).
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    /// Send buffer of each connection, both stacks (bytes).
    pub send_buf: usize,
    /// Receive buffer of each connection, both stacks (bytes).
    pub recv_buf: usize,
    /// Nagle off in both stacks.
    pub nodelay: bool,
    /// lazynet's TCP fast paths (`Config::fast_path`).
    pub fast_path: bool,
    /// lazynet's bulk receiver runs its protocol handler in every poll,
    /// before reading, as smoltcp's poll does (no direct placement).
    pub eager_receiver: bool,
    /// lazynet's `StackConfig::rx_evict`.
    pub evict: EvictMode,
    /// Both benchmark threads SCHED_FIFO.
    pub fifo: bool,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            send_buf: BUF,
            recv_buf: BUF,
            nodelay: false,
            fast_path: true,
            eager_receiver: false,
            evict: EvictMode::Adaptive,
            fifo: false,
        }
    }
}

/// Pins the calling benchmark thread to `cpu`, SCHED_FIFO if `fifo`.
fn bench_thread(cpu: usize, fifo: bool) {
    pin_thread(cpu);
    if fifo {
        if let Err(e) = lazynet::sys::set_sched_class(lazynet::sys::SchedClass::Fifo(10)) {
            eprintln!("SCHED_FIFO refused: {e}");
        }
    }
}

/// Warm-up before each measured interval.
const WARMUP: Duration = Duration::from_millis(300);
/// Setup (ARP, handshake) must finish within this.
const SETUP: Duration = Duration::from_secs(5);

/// The wire both stacks use: 1024 buffers of 2048 bytes per end, MTU 1500.
pub fn wire_config() -> WireConfig {
    WireConfig {
        buf_count: 2048,
        ring_capacity: 512,
        ..WireConfig::default()
    }
}

/// What a benchmark needs from a stack: one connection, driven by polling.
pub trait Endpoint: Sized {
    const NAME: &'static str;
    /// A stack on `end` listening on [`SERVER_ADDR`]:[`PORT`].
    fn server(end: WireEnd, setup: &Setup) -> Self;
    /// A stack on `end` connecting to the server.
    fn client(end: WireEnd, setup: &Setup) -> Self;
    /// Receives, runs protocol work and timers, transmits. True if it
    /// received anything (the bulk loops' idle-time diagnostics).
    fn poll(&mut self) -> bool;
    /// True once the connection is established (the server accepts it).
    fn connected(&mut self) -> bool;
    /// Queues bytes; 0 if there is no room.
    fn send(&mut self, data: &[u8]) -> usize;
    /// Pushes queued output to the wire if `send` does not do it itself.
    fn push(&mut self) {}
    /// Reads bytes; 0 if there are none.
    fn recv(&mut self, buf: &mut [u8]) -> usize;
    /// From now on this end mostly reads (the bulk receiver). lazynet
    /// then leaves received segments to `recv`, which processes them in
    /// the reader's context (LRP §3.4) and places in-order text straight
    /// into the reader's buffer; its protocol handler runs when `recv`
    /// finds nothing. Other stacks ignore it.
    fn reader(&mut self) {}
}

// ----- lazynet -----

/// A lazynet stack with one connection.
pub struct Lazy {
    stack: Stack<WireEnd>,
    /// The time of the last `poll`, passed to `send` and `recv` (the
    /// stack's API takes the time from its caller).
    now: u64,
    l: Option<TcpListener>,
    c: Option<TcpStream>,
    /// See [`Endpoint::reader`].
    reader: bool,
    /// [`Setup::eager_receiver`]: `reader` is never set.
    eager: bool,
}

fn lazy_stack(end: WireEnd, addr: Ipv4Addr, seed: u64, setup: &Setup) -> Stack<WireEnd> {
    Stack::new(
        end,
        StackConfig {
            addr,
            prefix_len: 24,
            seed,
            tcp: Config {
                send_buf: setup.send_buf,
                fast_path: setup.fast_path,
                recv_buf: setup.recv_buf,
                nodelay: setup.nodelay,
                ..Config::default()
            },
            rx_evict: setup.evict,
            ..StackConfig::default()
        },
    )
}

impl Endpoint for Lazy {
    const NAME: &'static str = "lazynet";

    fn server(end: WireEnd, setup: &Setup) -> Self {
        let mut stack = lazy_stack(end, SERVER_ADDR, 2, setup);
        let l = stack
            .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT), None, None)
            .expect("listen");
        Lazy {
            now: stack.now(),
            stack,
            l: Some(l),
            c: None,
            reader: false,
            eager: setup.eager_receiver,
        }
    }

    fn client(end: WireEnd, setup: &Setup) -> Self {
        let mut stack = lazy_stack(end, CLIENT_ADDR, 1, setup);
        let now = stack.now();
        let c = stack
            .tcp_connect(SocketAddrV4::new(SERVER_ADDR, PORT), None, now)
            .expect("connect");
        Lazy {
            now,
            stack,
            l: None,
            c: Some(c),
            reader: false,
            eager: setup.eager_receiver,
        }
    }

    // Never inlined: `lazynet-lab paths` counts the application's calls.
    #[inline(never)]
    fn poll(&mut self) -> bool {
        let now = self.stack.now();
        self.now = now;
        let w = self.stack.poll(now);
        if !self.reader {
            self.stack.tcp_service(now, 1024);
        }
        w.received > 0
    }

    fn connected(&mut self) -> bool {
        let now = self.stack.now();
        if self.c.is_none() {
            if let Some(l) = self.l {
                self.c = self.stack.listener_mut(l).accept(now).ok();
            }
        }
        self.c
            .is_some_and(|c| self.stack.tcp_mut(c).state(now) == Ok(State::Established))
    }

    // Never inlined: `lazynet-lab paths` counts the application's calls.
    #[inline(never)]
    fn send(&mut self, data: &[u8]) -> usize {
        let Some(c) = self.c else { return 0 };
        match self.stack.tcp_mut(c).send(data, self.now) {
            Ok(n) => n,
            Err(SocketError::WouldBlock) => 0,
            Err(e) => panic!("lazynet send: {e}"),
        }
    }

    // Never inlined: `lazynet-lab paths` counts the application's calls.
    #[inline(never)]
    fn recv(&mut self, buf: &mut [u8]) -> usize {
        let Some(c) = self.c else { return 0 };
        match self.stack.tcp_mut(c).recv(buf, self.now) {
            Ok(n) => n,
            Err(SocketError::WouldBlock) => {
                if self.reader {
                    // Nothing to read: timers and whatever `recv` left.
                    self.stack.tcp_service(self.now, 1024);
                }
                0
            }
            Err(e) => panic!("lazynet recv: {e}"),
        }
    }

    fn reader(&mut self) {
        self.reader = !self.eager;
    }
}

impl Drop for Lazy {
    /// With `--verbose`: the stack's and connection's counters.
    fn drop(&mut self) {
        if verbose() {
            eprintln!("--- lazynet {:?}\n{}", self.c, self.stack.stats());
            eprintln!(
                "tcp {:?}\nwire {:?}",
                self.stack.tcp_stats(),
                self.stack.nic().stats()
            );
            if let Some(c) = self.c {
                eprintln!("{:?}", self.stack.tcp(c).counters());
            }
        }
    }
}

use crate::infra::report::verbose;

// ----- the runs -----

/// Which stack(s) to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Which {
    Lazynet,
    Smoltcp,
    Both,
}

impl Which {
    /// The series of the stacks chosen, lazynet first.
    fn series(self) -> Vec<Series> {
        match self {
            Which::Lazynet => vec![Series::Lazynet],
            Which::Smoltcp => vec![Series::Smoltcp],
            Which::Both => vec![Series::Lazynet, Series::Smoltcp],
        }
    }
}

/// One series of a benchmark: a stack, or the wire reference of
/// `tcp-bulk --wire` ([`wire_run`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Series {
    Lazynet,
    Smoltcp,
    Wire,
}

impl Series {
    /// Its name in the CSV, the summary and the figure.
    fn name(self) -> &'static str {
        match self {
            Series::Lazynet => Lazy::NAME,
            Series::Smoltcp => crate::baseline::smol::Smol::NAME,
            Series::Wire => "wire",
        }
    }

    fn names(series: &[Series]) -> Vec<&'static str> {
        series.iter().map(|s| s.name()).collect()
    }

    /// The error of a benchmark that has no such series.
    fn unsupported(self, bench: &str) -> anyhow::Error {
        anyhow::anyhow!("{bench} has no {} series", self.name())
    }
}

/// Polls until connected or the deadline passes.
fn establish<E: Endpoint>(e: &mut E, deadline: Instant) -> anyhow::Result<()> {
    while !e.connected() {
        anyhow::ensure!(Instant::now() < deadline, "{}: no connection", E::NAME);
        e.poll();
    }
    Ok(())
}

/// Goodput of one bulk run, in bytes over the measured interval.
pub struct BulkResult {
    pub bytes: u64,
    pub elapsed: Duration,
}

impl BulkResult {
    pub fn gbit(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.elapsed.as_secs_f64() / 1e9
    }
}

/// One bulk run: server (receiver) on cpu 1, client (sender) on cpu 0.
pub fn bulk_run<E: Endpoint>(duration: Duration, setup: &Setup) -> anyhow::Result<BulkResult> {
    let (a, b) = WirePair::new(wire_config())?;
    let cp = cpus::pair();
    let setup = *setup;
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + SETUP + WARMUP + duration + Duration::from_secs(5);
    let stop2 = stop.clone();
    let server = std::thread::spawn(move || -> anyhow::Result<BulkResult> {
        bench_thread(cp.1, setup.fifo);
        let r = (|| {
            let mut e = E::server(b, &setup);
            establish(&mut e, deadline)?;
            e.reader();
            let mut buf = vec![0u8; 65536];
            let mut total = 0u64;
            let mut start: Option<(Instant, u64)> = None;
            let mut first: Option<Instant> = None;
            let mut turn = 0u32;
            let mut idle = 0u64;
            // Gaps of more than 0.5 ms between arrivals (diagnostics).
            let (mut seen, mut last_data) = (0u64, Instant::now());
            let (mut stalls, mut stalled) = (0u32, Duration::ZERO);
            // Time spent in turns that found nothing, and in all turns
            // (TSC): the share of the receiver's time it waited. (Counting
            // turns misleads: an empty turn is much shorter than a full one.)
            let mut idle_time = IdleTime::new();
            loop {
                e.poll();
                let before = total;
                for _ in 0..64 {
                    let n = e.recv(&mut buf);
                    if n == 0 {
                        break;
                    }
                    consume(&buf[..n]);
                    total += n as u64;
                }
                idle_time.turn(total == before);
                if total == before {
                    idle += 1;
                }
                // The clock is dear in a VM (docs/PERFORMANCE.md): read it
                // every 16 turns.
                turn = turn.wrapping_add(1);
                if turn % 16 != 0 {
                    continue;
                }
                let now = Instant::now();
                anyhow::ensure!(now < deadline, "{}: bulk run stalled", E::NAME);
                if total != seen {
                    let gap = now - last_data;
                    if gap > Duration::from_micros(500) {
                        stalls += 1;
                        stalled += gap;
                    }
                    last_data = now;
                    seen = total;
                }
                match (first, start) {
                    (None, _) if total > 0 => first = Some(now),
                    (Some(f), None) if now - f >= WARMUP => start = Some((now, total)),
                    (_, Some((t0, b0))) if now - t0 >= duration => {
                        if verbose() {
                            eprintln!(
                                "{} receiver: {turn} turns, {idle} without data ({:.1}% of its time), {stalls} gaps > 0.5 ms totalling {stalled:?}",
                                E::NAME,
                                idle_time.percent()
                            );
                        }
                        return Ok(BulkResult {
                            bytes: total - b0,
                            elapsed: now - t0,
                        });
                    }
                    _ => {}
                }
            }
        })();
        stop2.store(true, Ordering::Relaxed);
        r
    });
    let client = std::thread::spawn(move || -> anyhow::Result<()> {
        bench_thread(cp.0, setup.fifo);
        let mut e = E::client(a, &setup);
        establish(&mut e, deadline)?;
        let data = vec![0x5au8; 65536];
        let mut turn = 0u32;
        let (mut sends, mut blocked) = (0u64, 0u64);
        // Idle: the send buffer was full and the poll received nothing.
        let mut idle_time = IdleTime::new();
        while !stop.load(Ordering::Relaxed) {
            sends += 1;
            let full = e.send(&data) == 0;
            if full {
                blocked += 1;
            }
            let got = e.poll();
            idle_time.turn(full && !got);
            turn = turn.wrapping_add(1);
            if turn % 1024 == 0 && Instant::now() >= deadline {
                break;
            }
        }
        if verbose() {
            eprintln!(
                "{} sender: {sends} turns, {blocked} with a full send buffer, idle (full and nothing received) {:.1}% of its time",
                E::NAME,
                idle_time.percent()
            );
        }
        Ok(())
    });
    let r = server
        .join()
        .map_err(|_| anyhow::anyhow!("server thread panicked"))?;
    client
        .join()
        .map_err(|_| anyhow::anyhow!("client thread panicked"))??;
    r
}

/// Time shares of a polling loop's turns, by the TSC (far cheaper per
/// turn than `Instant::now` in a VM; docs/PERFORMANCE.md): how much of its
/// time a bulk end waited rather than worked. Only ratios are used, so a
/// short calibration does.
struct IdleTime {
    clock: TscClock,
    last: u64,
    idle: u64,
    total: u64,
}

impl IdleTime {
    fn new() -> Self {
        let clock = TscClock::calibrate(Duration::from_micros(100));
        IdleTime {
            last: clock.now_ns(),
            clock,
            idle: 0,
            total: 0,
        }
    }

    /// Ends a turn; `idle` if it did nothing.
    #[inline]
    fn turn(&mut self, idle: bool) {
        let now = self.clock.now_ns();
        let d = now.wrapping_sub(self.last);
        self.last = now;
        self.total += d;
        if idle {
            self.idle += d;
        }
    }

    fn percent(&self) -> f64 {
        100.0 * self.idle as f64 / self.total.max(1) as f64
    }
}

/// The reference series of `bench tcp-bulk --wire`: the same bytes over
/// the same wire, cores and buffer sizes with no protocol at all, only the
/// per-byte work any stack with copy semantics does. Sender: the
/// application's 64 KiB write copied into a 256 KiB send ring, then per
/// 1448-byte segment a buffer, a 66-byte header copied in, the payload
/// copied from the ring and summed, batches of 16 sent. Receiver: each
/// payload summed and copied into a 256 KiB receive ring, 64 KiB read out
/// of it by the application, buffers released in batches; each frame's
/// lines fetched [`RX_AHEAD`] frames ahead, as lazynet's readers do. No flow
/// control but the wire's own (free buffers, ring slots). How close a
/// stack with copy semantics comes to this is how much its protocol work
/// costs. lazynet's receiver places in-order text straight into the
/// reader's buffer (one copy where this series makes two), so it can pass
/// the reference; smoltcp cannot.
pub fn wire_run(duration: Duration, fifo: bool) -> anyhow::Result<BulkResult> {
    const PAY: usize = 1448;
    const HDR: usize = 66;
    const RING: usize = 256 * 1024;
    const APP: usize = 64 * 1024;
    let (mut a, mut b) = WirePair::new(wire_config())?;
    let cp = cpus::pair();
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + WARMUP + duration + Duration::from_secs(5);
    let stop2 = stop.clone();
    let server = std::thread::spawn(move || -> anyhow::Result<BulkResult> {
        bench_thread(cp.1, fifo);
        let mut ring = vec![0u8; RING];
        let mut app = vec![0u8; APP];
        let (mut wpos, mut fill, mut total) = (0usize, 0usize, 0u64);
        let mut d = [Desc::default(); 64];
        let mut sink = 0u32;
        let mut start: Option<(Instant, u64)> = None;
        let first = Instant::now();
        let mut turn = 0u32;
        let r = loop {
            let n = b.recv(&mut d);
            // Fetched ahead as lazynet's readers do (`stack::RX_AHEAD`).
            for x in &d[..n.min(RX_AHEAD)] {
                b.buffers().prefetch_read(*x);
            }
            for (i, x) in d[..n].iter().enumerate() {
                if let Some(&ahead) = d[..n].get(i + RX_AHEAD) {
                    b.buffers().prefetch_read(ahead);
                }
                let Some(f) = b.buffers().frame(*x) else {
                    continue;
                };
                let p = &f[HDR.min(f.len())..];
                if wpos + p.len() > RING {
                    wpos = 0;
                }
                sink = sink.wrapping_add(checksum::partial(p, 0));
                ring[wpos..wpos + p.len()].copy_from_slice(p);
                wpos += p.len();
                fill += p.len();
                total += p.len() as u64;
                if fill >= APP {
                    let st = wpos.saturating_sub(APP);
                    app.copy_from_slice(&ring[st..st + APP]);
                    fill -= APP;
                }
            }
            b.release(&d[..n]);
            b.flush();
            turn = turn.wrapping_add(1);
            if turn % 16 != 0 {
                continue;
            }
            let now = Instant::now();
            if now >= deadline {
                break Err(anyhow::anyhow!("wire: run stalled"));
            }
            match start {
                None if now - first >= WARMUP => start = Some((now, total)),
                Some((t0, b0)) if now - t0 >= duration => {
                    break Ok(BulkResult {
                        bytes: total - b0,
                        elapsed: now - t0,
                    })
                }
                _ => {}
            }
        };
        std::hint::black_box((sink, app[7]));
        stop2.store(true, Ordering::Relaxed);
        r
    });
    let client = std::thread::spawn(move || {
        bench_thread(cp.0, fifo);
        let src = vec![0x5au8; APP];
        let mut sbuf = vec![0u8; RING];
        let (mut spos, mut rpos) = (0usize, 0usize);
        let hdr = [0x11u8; HDR];
        let mut ids = [0u32; 16];
        let mut d = [Desc::default(); 16];
        'outer: while !stop.load(Ordering::Relaxed) {
            if spos + APP > RING {
                spos = 0;
            }
            sbuf[spos..spos + APP].copy_from_slice(&src);
            spos += APP;
            let mut left = APP;
            while left > 0 {
                let k = a.alloc(&mut ids[..left.div_ceil(PAY).min(16)]);
                if k == 0 {
                    if stop.load(Ordering::Relaxed) {
                        break 'outer;
                    }
                    continue;
                }
                for (m, &id) in ids[..k].iter().enumerate() {
                    let take = left.min(PAY);
                    if rpos + take > RING {
                        rpos = 0;
                    }
                    let Some(buf) = a.buffers_mut().buf_mut(id) else {
                        break 'outer;
                    };
                    buf[..HDR].copy_from_slice(&hdr);
                    let p = &sbuf[rpos..rpos + take];
                    buf[HDR..HDR + take].copy_from_slice(p);
                    let sum = checksum::partial(&buf[HDR..HDR + take], 0);
                    buf[50..52].copy_from_slice(&(sum as u16).to_be_bytes());
                    rpos += take;
                    left -= take;
                    d[m] = Desc {
                        buf: id,
                        off: 0,
                        len: (HDR + take) as u16,
                    };
                }
                let mut sent = 0;
                while sent < k {
                    sent += a.send(&d[sent..k]);
                    a.flush();
                    if stop.load(Ordering::Relaxed) {
                        break 'outer;
                    }
                }
            }
        }
    });
    let r = server
        .join()
        .map_err(|_| anyhow::anyhow!("wire receiver panicked"))?;
    client
        .join()
        .map_err(|_| anyhow::anyhow!("wire sender panicked"))?;
    r
}

/// Round-trip times of one request/response run.
pub struct RrResult {
    pub rtt_ns: Histogram<u64>,
    pub elapsed: Duration,
}

impl RrResult {
    pub fn p(&self, q: f64) -> f64 {
        self.rtt_ns.value_at_quantile(q) as f64 / 1000.0
    }
    pub fn rate(&self) -> f64 {
        self.rtt_ns.len() as f64 / self.elapsed.as_secs_f64()
    }
}

/// One request/response run: server (echo) on cpu 1, client on cpu 0;
/// Nagle off whatever `setup` says.
pub fn rr_run<E: Endpoint>(duration: Duration, setup: &Setup) -> anyhow::Result<RrResult> {
    let (a, b) = WirePair::new(wire_config())?;
    let cp = cpus::pair();
    let setup = Setup {
        nodelay: true,
        ..*setup
    };
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + SETUP + WARMUP + duration + Duration::from_secs(5);
    let stop2 = stop.clone();
    let server = std::thread::spawn(move || -> anyhow::Result<()> {
        bench_thread(cp.1, setup.fifo);
        let mut e = E::server(b, &setup);
        establish(&mut e, deadline)?;
        let mut buf = [0u8; 64];
        let mut turn = 0u32;
        while !stop2.load(Ordering::Relaxed) {
            turn = turn.wrapping_add(1);
            if turn % 1024 == 0 && Instant::now() >= deadline {
                break;
            }
            e.poll();
            let n = e.recv(&mut buf);
            if n > 0 {
                let mut sent = 0;
                for _ in 0..1_000_000 {
                    sent += e.send(&buf[sent..n]);
                    if sent == n {
                        break;
                    }
                    e.poll();
                }
                e.push();
            }
        }
        Ok(())
    });
    let client = std::thread::spawn(move || -> anyhow::Result<RrResult> {
        bench_thread(cp.0, setup.fifo);
        let r = (|| {
            let mut e = E::client(a, &setup);
            establish(&mut e, deadline)?;
            let mut h = hist();
            let mut buf = [0u8; 64];
            let t_start = Instant::now();
            let mut measuring: Option<Instant> = None;
            loop {
                let t0 = Instant::now();
                anyhow::ensure!(t0 < deadline, "{}: rr run stalled", E::NAME);
                match measuring {
                    None if t0 - t_start >= WARMUP => {
                        h.reset();
                        measuring = Some(t0);
                    }
                    Some(m) if t0 - m >= duration => {
                        return Ok(RrResult {
                            rtt_ns: h,
                            elapsed: t0 - m,
                        });
                    }
                    _ => {}
                }
                anyhow::ensure!(e.send(b"x") == 1, "{}: no room for 1 byte", E::NAME);
                e.push();
                let mut turn = 0u32;
                loop {
                    e.poll();
                    let n = e.recv(&mut buf);
                    if n > 0 {
                        consume(&buf[..n]);
                        break;
                    }
                    turn = turn.wrapping_add(1);
                    if turn % 1024 == 0 {
                        anyhow::ensure!(Instant::now() < deadline, "{}: no response", E::NAME);
                    }
                }
                let _ = h.record((t0.elapsed().as_nanos() as u64).max(1));
            }
        })();
        stop.store(true, Ordering::Relaxed);
        r
    });
    let r = client
        .join()
        .map_err(|_| anyhow::anyhow!("client thread panicked"))?;
    server
        .join()
        .map_err(|_| anyhow::anyhow!("server thread panicked"))??;
    r
}

/// `count` round trips with both stacks in the calling thread, ping-pong
/// (deterministic work for instruction counts), Nagle off whatever `setup`
/// says. Returns the round trips done and the polls they took.
pub fn rr_single<E: Endpoint>(count: u64, setup: &Setup) -> anyhow::Result<(u64, u64)> {
    let (a, b) = WirePair::new(wire_config())?;
    let setup = Setup {
        nodelay: true,
        ..*setup
    };
    let mut s = E::server(b, &setup);
    let mut c = E::client(a, &setup);
    let mut polls = 0u64;
    let mut up = (false, false);
    for _ in 0..1_000_000 {
        c.poll();
        s.poll();
        up = (c.connected(), s.connected());
        if up == (true, true) {
            break;
        }
    }
    anyhow::ensure!(up == (true, true), "{}: no connection", E::NAME);
    let mut buf = [0u8; 64];
    for i in 0..count {
        anyhow::ensure!(c.send(b"x") == 1, "{}: no room", E::NAME);
        c.push();
        let mut echoed = false;
        for _ in 0..1000 {
            s.poll();
            polls += 1;
            let n = s.recv(&mut buf);
            if n > 0 {
                anyhow::ensure!(s.send(&buf[..n]) == n, "{}: no room", E::NAME);
                s.push();
                echoed = true;
                break;
            }
        }
        anyhow::ensure!(echoed, "{}: request {i} not received", E::NAME);
        let mut got = false;
        for _ in 0..1000 {
            c.poll();
            polls += 1;
            let n = c.recv(&mut buf);
            if n > 0 {
                consume(&buf[..n]);
                got = true;
                break;
            }
        }
        anyhow::ensure!(got, "{}: response {i} not received", E::NAME);
    }
    Ok((count, polls))
}

/// Moves `bytes` from client to server with both stacks in the calling
/// thread (for profiles). Returns the polls it took.
pub fn bulk_single<E: Endpoint>(bytes: u64, setup: &Setup) -> anyhow::Result<u64> {
    let (a, b) = WirePair::new(wire_config())?;
    let mut s = E::server(b, setup);
    let mut c = E::client(a, setup);
    let mut up = (false, false);
    for _ in 0..1_000_000 {
        c.poll();
        s.poll();
        up = (c.connected(), s.connected());
        if up == (true, true) {
            break;
        }
    }
    anyhow::ensure!(up == (true, true), "{}: no connection", E::NAME);
    s.reader();
    let data = vec![0x5au8; 65536];
    let mut buf = vec![0u8; 65536];
    let (mut sent, mut got, mut polls) = (0u64, 0u64, 0u64);
    while got < bytes {
        anyhow::ensure!(polls < 100_000_000, "{}: bulk stalled at {got}", E::NAME);
        if sent < bytes {
            let n = (bytes - sent).min(data.len() as u64) as usize;
            sent += c.send(&data[..n]) as u64;
        }
        c.poll();
        s.poll();
        polls += 1;
        for _ in 0..64 {
            let n = s.recv(&mut buf);
            if n == 0 {
                break;
            }
            consume(&buf[..n]);
            got += n as u64;
        }
    }
    Ok(polls)
}

/// Hands received bytes to the optimizer as read: a benchmark that drops
/// what it receives would otherwise let the compiler remove a stack's copy
/// into the reader's buffer once that stack's receive call is inlined (it
/// did, for smoltcp's `recv_slice`), and measure a receive that copies
/// nothing.
#[inline]
fn consume(buf: &[u8]) {
    std::hint::black_box(buf);
}

// ----- dispatch by series -----

fn bulk_by(series: Series, d: Duration, setup: &Setup) -> anyhow::Result<BulkResult> {
    match series {
        Series::Lazynet => bulk_run::<Lazy>(d, setup),
        Series::Smoltcp => bulk_run::<crate::baseline::smol::Smol>(d, setup),
        Series::Wire => wire_run(d, setup.fifo),
    }
}

fn rr_by(series: Series, d: Duration, setup: &Setup) -> anyhow::Result<RrResult> {
    match series {
        Series::Lazynet => rr_run::<Lazy>(d, setup),
        Series::Smoltcp => rr_run::<crate::baseline::smol::Smol>(d, setup),
        Series::Wire => Err(series.unsupported("tcp-rr")),
    }
}

/// Where the host put the two benchmark cores, as a cache line sees it.
///
/// The 2-vCPU guest this was built on switched, every few seconds, between
/// two placements of its vCPUs: one where a cache line written on one core
/// reaches the other fast (a shared cache) and one where it takes several
/// times as long (docs/PERFORMANCE.md). Every figure of a two-core
/// benchmark moved with it, so each run is bracketed by
/// [`line_round_trip_ns`] and classed against [`SHARED_NS`] and
/// [`APART_NS`]; ratios are taken only between runs of the same class. (A
/// guest whose round trip lies between the two reads "mixed".)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Both probes under [`SHARED_NS`].
    Shared,
    /// Both probes over [`APART_NS`].
    Apart,
    /// Anything else (the placement changed during the run).
    Mixed,
}

/// Round trip of a cache line below which the cores share a cache.
pub const SHARED_NS: f64 = 150.0;
/// Round trip above which they do not.
pub const APART_NS: f64 = 250.0;

impl Placement {
    fn of(before: f64, after: f64) -> Placement {
        if before < SHARED_NS && after < SHARED_NS {
            Placement::Shared
        } else if before > APART_NS && after > APART_NS {
            Placement::Apart
        } else {
            Placement::Mixed
        }
    }

    fn name(self) -> &'static str {
        match self {
            Placement::Shared => "shared",
            Placement::Apart => "apart",
            Placement::Mixed => "mixed",
        }
    }
}

/// Mean round trip, in ns, of one cache line bounced between the two
/// benchmark cores (20,000 round trips): the placement probe.
pub fn line_round_trip_ns() -> f64 {
    #[repr(align(64))]
    struct Line(AtomicU64);
    const TRIPS: u64 = 20_000;
    /// Spins until the line holds `want`; false at the deadline.
    fn wait_for(line: &Line, want: u64, deadline: Instant) -> bool {
        let mut spins = 0u32;
        while line.0.load(Ordering::Acquire) != want {
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins % 4096 == 0 && Instant::now() > deadline {
                return false;
            }
        }
        true
    }
    let (c0, c1) = cpus::pair();
    if c0 == c1 {
        return f64::NAN;
    }
    let line = Arc::new(Line(AtomicU64::new(0)));
    let l2 = line.clone();
    let peer = std::thread::spawn(move || {
        pin_thread(c1);
        let deadline = Instant::now() + Duration::from_secs(1);
        for i in 0..TRIPS {
            if !wait_for(&l2, 2 * i + 1, deadline) {
                return;
            }
            l2.0.store(2 * i + 2, Ordering::Release);
        }
    });
    let me = std::thread::spawn(move || {
        pin_thread(c0);
        let deadline = Instant::now() + Duration::from_secs(1);
        let start = Instant::now();
        for i in 0..TRIPS {
            line.0.store(2 * i + 1, Ordering::Release);
            if !wait_for(&line, 2 * i + 2, deadline) {
                return f64::NAN;
            }
        }
        start.elapsed().as_nanos() as f64 / TRIPS as f64
    });
    let ns = me.join().unwrap_or(f64::NAN);
    let _ = peer.join();
    ns
}

/// Runs `f` between two placement probes.
fn probed<T>(f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<(T, f64, Placement)> {
    let before = line_round_trip_ns();
    let r = f()?;
    let after = line_round_trip_ns();
    Ok((r, before.max(after), Placement::of(before, after)))
}

/// The summary lines of one placement class: each series' median over its
/// runs of that class, and the median ratio of `pairs` (series indices)
/// over the runs where both were of that class.
fn placement_summary(
    out: &mut String,
    bench: &str,
    unit: &str,
    names: &[&str],
    vals: &[Vec<f64>],
    places: &[Vec<Placement>],
    pairs: &[(usize, usize)],
) -> std::fmt::Result {
    for p in [Placement::Shared, Placement::Apart, Placement::Mixed] {
        let mut line = format!("{bench} placement {}:", p.name());
        let mut any = false;
        for (i, name) in names.iter().enumerate() {
            let v: Vec<f64> = vals[i]
                .iter()
                .zip(&places[i])
                .filter(|(_, q)| **q == p)
                .map(|(x, _)| *x)
                .collect();
            if v.is_empty() {
                write!(line, " {name} no runs;")?;
            } else {
                any = true;
                write!(line, " {name} {:.3} {unit} ({} runs);", median(&v), v.len())?;
            }
        }
        for &(a, b) in pairs {
            let r: Vec<f64> = (0..vals[a].len().min(vals[b].len()))
                .filter(|&k| places[a][k] == p && places[b][k] == p)
                .map(|k| vals[a][k] / vals[b][k])
                .collect();
            if r.is_empty() {
                // A median of nothing would print as NaN.
                write!(line, " {}/{} no same-placement pairs;", names[a], names[b])?;
            } else {
                write!(
                    line,
                    " {}/{} {:.2}x (median of {} same-placement per-run ratios);",
                    names[a],
                    names[b],
                    median(&r),
                    r.len()
                )?;
            }
        }
        if any {
            writeln!(out, "{}", line.trim_end_matches(';'))?;
        }
    }
    Ok(())
}

/// Columns of `tcp-bulk.csv` and `tcp-rr.csv`: `probe_ns` is the slower of
/// the two placement probes around the run, `placement` its class.
const CSV_HEADER: &str =
    "bench,stack,run,seconds,bytes,gbit_s,p50_us,p99_us,round_trips,probe_ns,placement\n";

/// Per-run ratio of series `a` to series `b` (same run index), median.
fn run_ratio(a: &[f64], b: &[f64]) -> f64 {
    let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    median(&r)
}

/// Alternation: run `run` takes the stacks in turn, starting with a
/// different one each run.
fn order(n: usize, run: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |i| (i + run) % n)
}

fn settings(setup: &Setup) -> String {
    format!(
        "settings: in-memory wire ({} buffers of {} B, ring {}, MTU {}), MSS 1460 (1448 with timestamps), \
         send buffer {} KiB, receive buffer {} KiB, window scaling and timestamps on in both stacks, software checksums \
         in both, one pinned busy-polling thread per stack (cpus {:?}); bulk: lazynet's receiver {}, and evicts the lines of frames it copied out: {}\n",
        wire_config().buf_count,
        wire_config().buf_size,
        wire_config().ring_capacity,
        wire_config().mtu,
        setup.send_buf / 1024,
        setup.recv_buf / 1024,
        cpus::pair(),
        if setup.eager_receiver {
            "runs its protocol handler in every poll, before reading (--eager-receiver)"
        } else {
            "lets its reads process its segments (LRP; in-order text placed directly into the reader's buffer) and runs its protocol handler when a read finds nothing"
        },
        match setup.evict {
            EvictMode::Off => "never (--evict off)",
            EvictMode::Always => "always (--evict always)",
            EvictMode::Adaptive => "where measured faster (stack::evict)",
        }
    )
}

fn write_out(
    out: &Path,
    name: &str,
    setup: &Setup,
    csv: &str,
    summary: &str,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join(format!("{name}.csv")), csv)?;
    let txt = format!(
        "{}{}\n{summary}",
        crate::infra::report::txt_head(&crate::infra::report::command_line()),
        settings(setup)
    );
    std::fs::write(out.join(format!("{name}.txt")), txt)?;
    Ok(())
}

/// The figure of a two-core benchmark: each run's figure per stack (bars,
/// left) and, with two stacks, each run's ratio of the first to the second
/// by the placement the run was classed in (right).
fn plot_runs(
    out: &Path,
    name: &str,
    what: &str,
    series: &[Series],
    vals: &[Vec<f64>],
    places: &[Vec<Placement>],
) -> anyhow::Result<()> {
    let names = Series::names(series);
    let runs = vals.iter().map(Vec::len).max().unwrap_or(0);
    let cats: Vec<String> = (1..=runs).map(|r| r.to_string()).collect();
    let bars: Vec<(String, Vec<f64>)> = names
        .iter()
        .zip(vals)
        .map(|(n, v)| (n.to_string(), v.clone()))
        .collect();
    let title = format!("{name}: {what} per run");
    let left = crate::infra::plot::Panel::Bars {
        title: &title,
        x_label: "run",
        y_label: what,
        categories: &cats,
        series: &bars,
    };
    let png = out.join(format!("{name}.png"));
    // The ratio panel compares two stacks: not with one stack and the wire.
    if series.len() < 2 || series.len() == 2 && series[1] == Series::Wire {
        return crate::infra::plot::figure(&png, &[left]);
    }
    let mut ratios: Vec<(String, Vec<(f64, f64)>)> = ["shared", "apart", "mixed"]
        .iter()
        .map(|p| (format!("{} (cores {p})", names[0]), Vec::new()))
        .collect();
    for (r, (a, b)) in vals[0].iter().zip(&vals[1]).enumerate() {
        let k = match places[0].get(r) {
            Some(Placement::Shared) => 0,
            Some(Placement::Apart) => 1,
            _ => 2,
        };
        ratios[k].1.push(((r + 1) as f64, a / b));
    }
    ratios.retain(|(_, p)| !p.is_empty());
    let rtitle = format!("{} / {} per run", names[0], names[1]);
    let ylabel = format!("{what}, {} / {}", names[0], names[1]);
    let right = crate::infra::plot::Panel::Lines {
        title: &rtitle,
        x_label: "run",
        y_label: &ylabel,
        series: &ratios,
        log_x: false,
        log_y: false,
    };
    crate::infra::plot::figure(&png, &[left, right])
}

/// The settings of `lazynet-lab bench tcp-bulk`.
#[derive(Clone, Copy, Debug)]
pub struct BulkOpts {
    pub seconds: f64,
    pub runs: usize,
    pub which: Which,
    /// Also run the wire reference series ([`wire_run`]).
    pub wire: bool,
    pub setup: Setup,
}

/// `lazynet-lab bench tcp-bulk`.
pub fn bench_bulk(o: &BulkOpts, out: &Path) -> anyhow::Result<()> {
    let d = Duration::from_secs_f64(o.seconds);
    let mut series = o.which.series();
    if o.wire {
        series.push(Series::Wire);
    }
    let names = Series::names(&series);
    let mut csv = String::from(CSV_HEADER);
    let mut g: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut places: Vec<Vec<Placement>> = vec![Vec::new(); names.len()];
    for run in 0..o.runs.max(1) {
        for i in order(names.len(), run) {
            let name = names[i];
            let (r, probe, place) = probed(|| bulk_by(series[i], d, &o.setup))?;
            let line = format!(
                "tcp-bulk,{name},{run},{:.3},{},{:.3},,,,{probe:.0},{}\n",
                r.elapsed.as_secs_f64(),
                r.bytes,
                r.gbit(),
                place.name()
            );
            print!("{line}");
            csv.push_str(&line);
            g[i].push(r.gbit());
            places[i].push(place);
        }
    }
    let mut summary = String::new();
    for (i, name) in names.iter().enumerate() {
        writeln!(
            summary,
            "tcp-bulk {name}: median {:.3} Gbit/s goodput over {} runs, best {:.3} (all: {:?})",
            median(&g[i]),
            g[i].len(),
            g[i].iter().copied().fold(0.0, f64::max),
            g[i].iter()
                .map(|x| (x * 1000.0).round() / 1000.0)
                .collect::<Vec<_>>()
        )?;
    }
    let at = |x: Series| series.iter().position(|s| *s == x);
    if let (Some(l), Some(s)) = (at(Series::Lazynet), at(Series::Smoltcp)) {
        writeln!(
            summary,
            "tcp-bulk ratio lazynet/smoltcp: {:.2}x of the medians, {:.2}x median of the per-run ratios (goal >= 1.5x)",
            median(&g[l]) / median(&g[s]),
            run_ratio(&g[l], &g[s])
        )?;
    }
    if let Some(w) = at(Series::Wire) {
        for (i, name) in names.iter().enumerate() {
            if i != w {
                writeln!(
                    summary,
                    "tcp-bulk {name}/wire: {:.2} (median of the per-run ratios; the wire series is the per-byte work alone)",
                    run_ratio(&g[i], &g[w])
                )?;
            }
        }
    }
    let mut pairs = Vec::new();
    if let (Some(l), Some(s)) = (at(Series::Lazynet), at(Series::Smoltcp)) {
        pairs.push((l, s));
    }
    if let Some(w) = at(Series::Wire) {
        pairs.extend((0..names.len()).filter(|&i| i != w).map(|i| (i, w)));
    }
    writeln!(
        summary,
        "placement of the two cores, probed before and after each run (a cache line's round trip: shared < {SHARED_NS} ns, apart > {APART_NS} ns, else mixed):"
    )?;
    placement_summary(
        &mut summary,
        "tcp-bulk",
        "Gbit/s",
        &names,
        &g,
        &places,
        &pairs,
    )?;
    print!("{summary}");
    write_out(out, "tcp-bulk", &o.setup, &csv, &summary)?;
    plot_runs(out, "tcp-bulk", "Gbit/s", &series, &g, &places)
}

/// `lazynet-lab bench tcp-rr`.
pub fn bench_rr(
    seconds: f64,
    runs: usize,
    which: Which,
    fifo: bool,
    out: &Path,
) -> anyhow::Result<()> {
    let setup = Setup {
        fifo,
        ..Setup::default()
    };
    let d = Duration::from_secs_f64(seconds);
    let series = which.series();
    let names = Series::names(&series);
    let mut csv = String::from(CSV_HEADER);
    let mut p50: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut p99: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut rate: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut places: Vec<Vec<Placement>> = vec![Vec::new(); names.len()];
    for run in 0..runs.max(1) {
        for i in order(names.len(), run) {
            let name = names[i];
            let (r, probe, place) = probed(|| rr_by(series[i], d, &setup))?;
            let line = format!(
                "tcp-rr,{name},{run},{:.3},,,{:.3},{:.3},{},{probe:.0},{}\n",
                r.elapsed.as_secs_f64(),
                r.p(0.5),
                r.p(0.99),
                r.rtt_ns.len(),
                place.name()
            );
            print!("{line}");
            csv.push_str(&line);
            p50[i].push(r.p(0.5));
            p99[i].push(r.p(0.99));
            rate[i].push(r.rate());
            places[i].push(place);
        }
    }
    let mut summary = String::new();
    for (i, name) in names.iter().enumerate() {
        writeln!(
            summary,
            "tcp-rr {name}: median p50 {:.3} us (best run {:.3}), median p99 {:.3} us, {:.0} round trips/s ({} runs)",
            median(&p50[i]),
            p50[i].iter().copied().fold(f64::INFINITY, f64::min),
            median(&p99[i]),
            median(&rate[i]),
            p50[i].len()
        )?;
    }
    if names.len() == 2 {
        writeln!(
            summary,
            "tcp-rr ratio smoltcp/lazynet p50: {:.2}x, p99: {:.2}x (goal: lazynet p50 <= 3 us and below smoltcp)",
            median(&p50[1]) / median(&p50[0]),
            median(&p99[1]) / median(&p99[0])
        )?;
    }
    writeln!(
        summary,
        "placement of the two cores, probed before and after each run (a cache line's round trip: shared < {SHARED_NS} ns, apart > {APART_NS} ns, else mixed); p50 in us:"
    )?;
    let pairs: Vec<(usize, usize)> = if names.len() == 2 {
        vec![(0, 1)]
    } else {
        Vec::new()
    };
    placement_summary(&mut summary, "tcp-rr", "us", &names, &p50, &places, &pairs)?;
    print!("{summary}");
    write_out(out, "tcp-rr", &setup, &csv, &summary)?;
    plot_runs(out, "tcp-rr", "p50 round trip (us)", &series, &p50, &places)
}

/// `lazynet-lab bench tcp-bulk-single`: `bytes` in one thread, `runs` times
/// per stack (alternated); prints each run and the medians.
pub fn bench_bulk_single(
    bytes: u64,
    which: Which,
    runs: usize,
    fast_path: bool,
) -> anyhow::Result<()> {
    let setup = Setup {
        fast_path,
        ..Setup::default()
    };
    let series = which.series();
    let names = Series::names(&series);
    let mut g: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for run in 0..runs.max(1) {
        for i in order(names.len(), run) {
            let name = names[i];
            let t = Instant::now();
            let polls = match series[i] {
                Series::Lazynet => bulk_single::<Lazy>(bytes, &setup)?,
                Series::Smoltcp => bulk_single::<crate::baseline::smol::Smol>(bytes, &setup)?,
                Series::Wire => return Err(Series::Wire.unsupported("tcp-bulk-single")),
            };
            let gbit = bytes as f64 * 8.0 / t.elapsed().as_secs_f64() / 1e9;
            println!("tcp-bulk-single,{name},{run},{bytes},{polls},{gbit:.3}");
            g[i].push(gbit);
        }
    }
    for (i, name) in names.iter().enumerate() {
        println!(
            "tcp-bulk-single {name}: median {:.3} Gbit/s (one thread runs both ends, {} runs)",
            median(&g[i]),
            g[i].len()
        );
    }
    if names.len() == 2 {
        println!(
            "tcp-bulk-single ratio lazynet/smoltcp: {:.2}x",
            median(&g[0]) / median(&g[1])
        );
    }
    Ok(())
}

/// `lazynet-lab bench tcp-rr-single`: `count` round trips in one thread,
/// `runs` times per stack (alternated); prints each run and the medians.
pub fn bench_rr_single(
    count: u64,
    which: Which,
    runs: usize,
    fast_path: bool,
) -> anyhow::Result<()> {
    let setup = Setup {
        fast_path,
        ..Setup::default()
    };
    let series = which.series();
    let names = Series::names(&series);
    let mut us: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for run in 0..runs.max(1) {
        for i in order(names.len(), run) {
            let name = names[i];
            let t = Instant::now();
            let (n, polls) = match series[i] {
                Series::Lazynet => rr_single::<Lazy>(count, &setup)?,
                Series::Smoltcp => rr_single::<crate::baseline::smol::Smol>(count, &setup)?,
                Series::Wire => return Err(Series::Wire.unsupported("tcp-rr-single")),
            };
            let per = t.elapsed().as_secs_f64() * 1e6 / n.max(1) as f64;
            println!("tcp-rr-single,{name},{run},{n},{polls},{per:.3}");
            us[i].push(per);
        }
    }
    for (i, name) in names.iter().enumerate() {
        println!(
            "tcp-rr-single {name}: median {:.3} us per round trip (one thread runs both ends, {} runs)",
            median(&us[i]),
            us[i].len()
        );
    }
    if names.len() == 2 {
        println!(
            "tcp-rr-single ratio smoltcp/lazynet: {:.2}x",
            median(&us[1]) / median(&us[0])
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lazynet_single_thread_round_trips_and_bulk_complete() {
        let setup = Setup::default();
        assert_eq!(rr_single::<Lazy>(200, &setup).unwrap().0, 200);
        assert!(bulk_single::<Lazy>(4 << 20, &setup).unwrap() > 0);
    }

    #[test]
    fn smoltcp_single_thread_round_trips_and_bulk_complete() {
        let setup = Setup::default();
        assert_eq!(
            rr_single::<crate::baseline::smol::Smol>(200, &setup)
                .unwrap()
                .0,
            200
        );
        assert!(bulk_single::<crate::baseline::smol::Smol>(4 << 20, &setup).unwrap() > 0);
    }

    #[test]
    fn runs_alternate_which_stack_goes_first() {
        assert_eq!(order(2, 0).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(order(2, 1).collect::<Vec<_>>(), vec![1, 0]);
        assert_eq!(order(1, 3).collect::<Vec<_>>(), vec![0]);
    }

    #[test]
    fn runs_are_classed_by_both_probes() {
        assert_eq!(Placement::of(70.0, 90.0), Placement::Shared);
        assert_eq!(Placement::of(340.0, 420.0), Placement::Apart);
        assert_eq!(Placement::of(70.0, 340.0), Placement::Mixed);
        assert_eq!(Placement::of(200.0, 200.0), Placement::Mixed);
        assert_eq!(Placement::of(f64::NAN, 70.0), Placement::Mixed);
    }

    /// `placement_summary` of two series `a` and `b`, paired.
    fn summary(vals: &[Vec<f64>], places: &[Vec<Placement>]) -> String {
        let mut out = String::new();
        placement_summary(&mut out, "x", "u", &["a", "b"], vals, places, &[(0, 1)]).unwrap();
        out
    }

    /// The summary line of placement class `class`.
    fn class_line<'a>(out: &'a str, class: &str) -> &'a str {
        let head = format!("x placement {class}");
        out.lines().find(|l| l.starts_with(&head)).unwrap()
    }

    #[test]
    fn ratios_pair_only_runs_of_one_placement() {
        use Placement::*;
        let vals = vec![vec![60.0, 20.0, 50.0], vec![40.0, 50.0, 10.0]];
        let out = summary(
            &vals,
            &[vec![Shared, Apart, Shared], vec![Shared, Shared, Apart]],
        );
        // Shared: a has 60 and 50, b 40 and 50; only run 0 pairs (1.5x).
        let shared = class_line(&out, "shared");
        assert!(
            shared.contains("a/b 1.50x (median of 1 same-placement"),
            "{shared}"
        );
        assert!(shared.contains("b 50.000 u (2 runs)"), "{shared}");
        let apart = class_line(&out, "apart");
        assert!(apart.contains("a/b no same-placement pairs"), "{apart}");
        assert!(!out.contains("placement mixed"), "{out}");
        assert!(!out.contains("NaN"), "{out}");
        // A class where one series has runs and the other none.
        let out = summary(
            &vals,
            &[vec![Shared, Shared, Mixed], vec![Shared, Shared, Shared]],
        );
        let mixed = class_line(&out, "mixed");
        assert!(mixed.contains("a 50.000 u (1 runs); b no runs;"), "{mixed}");
        assert!(!out.contains("NaN"), "{out}");
    }
}
