//! TCP programs: `serve tcp-echo`, `serve http`, `get`, and the TCP part of
//! `demo`.
//!
//! Servers share one event loop ([`serve_conns`]): one stack, one
//! listener, one [`ConnApp`] per connection. Each turn receives and
//! demultiplexes frames, runs the TCP protocol handler for the connections
//! that got segments ([`Stack::tcp_service`]), then drives the apps
//! named by the stack's events — and only those, plus apps that stopped
//! at their per-turn bound. Every app has bounded staging buffers: a
//! app that cannot send stops reading, so TCP flow control pushes back
//! on its peer.

use std::collections::HashMap;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lazynet::nic::netns::Ownership;
use lazynet::nic::wirepair::{WireConfig, WirePair};
use lazynet::nic::Nic;
use lazynet::proto::tcp::ListenConfig;
use lazynet::socket::{SocketError, TcpListener, TcpStream};
use lazynet::stack::{Stack, StackConfig, TcpEvent, TcpHandle};

use crate::args::NetArgs;
use crate::http::pattern_byte;

/// Staging buffer sizes of an app (input and output).
const STAGE: usize = 64 * 1024;
/// Staging buffers of closed connections kept for new ones (16 MiB).
const SPARE_STAGES: usize = 256;

/// A staging buffer: a spare one, else a new one.
fn stage(spare: &mut Vec<Box<[u8]>>) -> Box<[u8]> {
    spare
        .pop()
        .unwrap_or_else(|| vec![0; STAGE].into_boxed_slice())
}
/// Read/write rounds one app gets per loop turn.
const ROUNDS: usize = 16;

/// The application half of one connection, sans-IO: bytes in, bytes out.
pub trait ConnApp {
    /// Offers received bytes; returns how many were consumed (the rest is
    /// offered again with more appended).
    fn on_data(&mut self, data: &[u8]) -> usize;
    /// Writes output bytes into `out`; returns how many (0: nothing now).
    fn poll_output(&mut self, out: &mut [u8]) -> usize;
    /// The peer finished sending.
    fn on_eof(&mut self) {}
    /// Close once all output is sent.
    fn wants_close(&self) -> bool;
}

/// TCP echo: what comes in goes back out, up to a bounded backlog.
#[derive(Default)]
pub struct EchoApp {
    q: std::collections::VecDeque<u8>,
    eof: bool,
}

impl ConnApp for EchoApp {
    fn on_data(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(STAGE - self.q.len());
        self.q.extend(&data[..n]);
        n
    }
    fn poll_output(&mut self, out: &mut [u8]) -> usize {
        let n = out.len().min(self.q.len());
        for (o, b) in out.iter_mut().zip(self.q.drain(..n)) {
            *o = b;
        }
        n
    }
    fn on_eof(&mut self) {
        self.eof = true;
    }
    fn wants_close(&self) -> bool {
        self.eof && self.q.is_empty()
    }
}

struct Conn<S> {
    stream: TcpStream,
    sess: S,
    inb: Box<[u8]>,
    in_len: usize,
    out: Box<[u8]>,
    out_pos: usize,
    out_len: usize,
    eof: bool,
}

/// What driving an app did.
enum Drive {
    /// Waiting for the network (an event will come).
    Idle,
    /// Stopped at its per-turn bound; drive again next turn.
    Busy,
    /// Closed or failed; forget it.
    Done,
}

fn drive<N: Nic, S: ConnApp>(stack: &mut Stack<N>, c: &mut Conn<S>) -> Drive {
    for _ in 0..ROUNDS {
        let mut progress = false;
        // Output first: sending frees the app to take more input.
        if c.out_pos == c.out_len {
            c.out_pos = 0;
            c.out_len = c.sess.poll_output(&mut c.out);
        }
        if c.out_pos < c.out_len {
            match c.stream.write(stack, &c.out[c.out_pos..c.out_len]) {
                Ok(n) => {
                    c.out_pos += n;
                    progress |= n > 0;
                }
                Err(SocketError::WouldBlock) => {}
                Err(_) => return Drive::Done,
            }
        }
        if !c.eof && c.in_len < c.inb.len() {
            match c.stream.read(stack, &mut c.inb[c.in_len..]) {
                Ok(0) => {
                    c.eof = true;
                    progress = true;
                }
                Ok(n) => {
                    c.in_len += n;
                    progress = true;
                }
                Err(SocketError::WouldBlock) => {}
                Err(_) => return Drive::Done,
            }
        }
        if c.in_len > 0 {
            let used = c.sess.on_data(&c.inb[..c.in_len]);
            if used > 0 {
                c.inb.copy_within(used..c.in_len, 0);
                c.in_len -= used;
                progress = true;
            }
        }
        if c.eof && c.in_len == 0 {
            c.sess.on_eof();
        }
        if c.out_pos == c.out_len && c.sess.wants_close() {
            return Drive::Done;
        }
        if !progress {
            return Drive::Idle;
        }
    }
    Drive::Busy
}

/// After `stop`, how long connections in progress get to finish (no new
/// ones are accepted): a response's last segments or the peer's FIN may
/// need a retransmission or two (RTO at least 200 ms).
const DRAIN_NS: u64 = 2_000_000_000;

/// Serves `listener` until `stop`, one app from `make` per connection,
/// polling the NIC for `spin_ns` after the last work before sleeping on it,
/// then lets the open ones finish for up to [`DRAIN_NS`]. Returns the
/// number of connections served and of those still open after that (they
/// are reset).
pub fn serve_conns<N: Nic, S: ConnApp>(
    stack: &mut Stack<N>,
    listener: &TcpListener,
    mut make: impl FnMut() -> S,
    stop: &AtomicBool,
    status: &AtomicBool,
    spin_ns: u64,
) -> (u64, usize) {
    let mut conns: HashMap<TcpHandle, Conn<S>> = HashMap::new();
    let mut events = Vec::new();
    let mut again: Vec<TcpHandle> = Vec::new();
    let mut next: Vec<TcpHandle> = Vec::new();
    let mut served = 0u64;
    let mut drain_end: Option<u64> = None;
    let mut idle_since: Option<u64> = None;
    let mut spare: Vec<Box<[u8]>> = Vec::new();
    loop {
        let now = stack.now();
        if stop.load(Ordering::Relaxed) {
            let end = *drain_end.get_or_insert(now.saturating_add(DRAIN_NS));
            if conns.is_empty() || now >= end {
                break;
            }
        }
        if status.swap(false, Ordering::Relaxed) {
            print_status(stack, conns.len());
        }
        let rx = stack.poll(now).received;
        let work = stack.tcp_service(now, 1024);
        stack.tcp_take_events(&mut events);
        let had_events = !events.is_empty();
        for e in events.drain(..) {
            match e {
                TcpEvent::Listener(_) if drain_end.is_none() => {
                    // Bounded: at most a backlog's worth per turn.
                    for _ in 0..1024 {
                        let Ok(s) = listener.accept(stack) else { break };
                        let _ = s.set_nodelay(stack, true);
                        served += 1;
                        let h = s.handle();
                        again.push(h);
                        conns.insert(
                            h,
                            Conn {
                                stream: s,
                                sess: make(),
                                inb: stage(&mut spare),
                                in_len: 0,
                                out: stage(&mut spare),
                                out_pos: 0,
                                out_len: 0,
                                eof: false,
                            },
                        );
                    }
                }
                TcpEvent::Conn(h) => again.push(h),
                // Draining: new connections wait in the accept queue and
                // are reset when the listener closes.
                TcpEvent::Listener(_) => {}
            }
        }
        for h in again.drain(..) {
            let Some(c) = conns.get_mut(&h) else { continue };
            match drive(stack, c) {
                Drive::Idle => {}
                Drive::Busy => next.push(h),
                Drive::Done => {
                    if let Some(c) = conns.remove(&h) {
                        let _ = c.stream.close(stack);
                        // Staging buffers go to the next connection: new
                        // 64 KiB allocations would be zeroed (and
                        // page-faulted) for every connection.
                        if spare.len() < SPARE_STAGES {
                            spare.push(c.inb);
                            spare.push(c.out);
                        }
                    }
                }
            }
        }
        std::mem::swap(&mut again, &mut next);
        if rx != 0 || work != 0 || had_events || !again.is_empty() {
            idle_since = None;
        } else {
            let since = *idle_since.get_or_insert(now);
            if now.saturating_sub(since) < spin_ns {
                continue;
            }
            let wake = stack.tcp_next_timeout().map(|t| t.saturating_sub(now));
            stack
                .nic_mut()
                .wait(Some(wake.unwrap_or(1_000_000).min(1_000_000)));
        }
    }
    let open = conns.len();
    for (_, c) in conns.drain() {
        let _ = c.stream.abort(stack);
    }
    (served, open)
}

/// The status line of a running server (SIGUSR1): connections it serves,
/// all TCP connection slots in use, orphans among them, the bytes their
/// buffers hold, and TIME-WAIT entries.
fn print_status<N: Nic>(stack: &Stack<N>, serving: usize) {
    println!(
        "status: serving={serving} connections={} orphans={} tcp_buffer_bytes={} time_wait={}",
        stack.tcp_connections(),
        stack.tcp_orphans(),
        stack.tcp_buffer_bytes(),
        stack.tcp_time_wait_len()
    );
    let _ = std::io::stdout().flush();
}

fn stack_config(net: &NetArgs) -> anyhow::Result<StackConfig> {
    let mut cfg = net.stack_config()?;
    // Server-sized buffers: 256 KiB each way per connection.
    cfg.tcp.send_buf = 256 * 1024;
    cfg.tcp.recv_buf = 256 * 1024;
    Ok(cfg)
}

/// Runs a TCP server of apps from `make` on `port` (shared by
/// `serve tcp-echo` and `serve http`), with a SYN queue of `syn_queue`
/// half-open connections (the listener's default if `None`).
pub fn serve<S: ConnApp>(
    what: &str,
    port: u16,
    syn_queue: Option<usize>,
    net: &NetArgs,
    make: impl FnMut() -> S,
) -> anyhow::Result<()> {
    let cfg = stack_config(net)?;
    let stop = crate::util::stop_flag()?;
    let status = crate::util::status_flag()?;
    let (nic, owned_ns) = crate::serve::open(net)?;
    struct Serve<'a, M> {
        what: &'a str,
        port: u16,
        syn_queue: Option<usize>,
        make: M,
        stop: &'a AtomicBool,
        status: &'a AtomicBool,
        spin_ns: u64,
    }
    impl<S: ConnApp, M: FnMut() -> S> crate::serve::OnStack for Serve<'_, M> {
        type Out = anyhow::Result<()>;
        fn run<N: Nic>(self, stack: &mut Stack<N>) -> Self::Out {
            // The stack's own address: the daemon's, when attached.
            let (what, addr, port) = (self.what, stack.addr(), self.port);
            let mut lcfg = ListenConfig {
                backlog: 1024,
                ..ListenConfig::default()
            };
            if let Some(q) = self.syn_queue {
                lcfg.syn_queue = q;
            }
            let listener =
                TcpListener::bind_with(stack, SocketAddrV4::new(addr, port), lcfg, None)?;
            eprintln!("serving {what} on {addr}:{port} ({})", stack.mode().name());
            println!("ready");
            std::io::stdout().flush()?;
            let (served, open) = serve_conns(
                stack,
                &listener,
                self.make,
                self.stop,
                self.status,
                self.spin_ns,
            );
            println!("connections: {served}, open at exit: {open}");
            if let Ok(c) = stack.listener(listener.handle()).counters() {
                println!(
                    "listener: {} SYNs queued, {} cookies sent, {} connections from cookies",
                    c.syns, c.cookies_sent, c.cookies_accepted
                );
            }
            let states = stack.tcp_states();
            let tw = states
                .iter()
                .filter(|s| **s == lazynet::proto::tcp::State::TimeWait)
                .count();
            println!(
                "connections left: {} in TIME-WAIT, {} other",
                tw,
                states.len() - tw
            );
            println!("counters:\n{}", stack.stats());
            if let Some(s) = stack.nic().driver_stats() {
                println!("nic: {s}");
            }
            Ok(())
        }
    }
    let job = Serve {
        what,
        port,
        syn_queue,
        make,
        stop: &stop,
        status: &status,
        spin_ns: net.busy_poll_us.saturating_mul(1000),
    };
    crate::serve::run_on_stack(nic, cfg, net, job)??;
    if let Some(Ownership::Created(g)) = owned_ns {
        g.cleanup()?;
    }
    Ok(())
}

// ----- demo -----

/// The TCP part of `lazynet demo`: a bulk transfer and 1-byte
/// request/response over one connection each, two stacks on two threads
/// of the in-memory wire. Every received byte is checked.
pub fn demo(seconds: f64, verbose: bool) -> anyhow::Result<()> {
    const SERVER: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 2);
    const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 1);
    let (a, b) = WirePair::new(WireConfig::default())?;
    let secs = seconds.max(0.2);
    let cfg = |addr| {
        let mut c = StackConfig {
            addr,
            seed: crate::serve::seed_from_os(),
            ..StackConfig::default()
        };
        c.tcp.send_buf = 256 * 1024;
        c.tcp.recv_buf = 256 * 1024;
        c
    };
    let t = Some(Duration::from_secs_f64(secs + 10.0));
    let server = std::thread::spawn(move || -> anyhow::Result<(u64, u64)> {
        lazynet::sys::pin_thread(1);
        let mut st = Stack::new(b, cfg(SERVER));
        let l = TcpListener::bind(&mut st, SocketAddrV4::new(SERVER, 5001), 8)?;
        // Bulk: read and check until EOF.
        let s = l.accept_blocking(&mut st, t)?;
        let mut buf = vec![0u8; 65536];
        let mut got = 0u64;
        loop {
            let n = s.read_blocking(&mut st, &mut buf, t)?;
            if n == 0 {
                break;
            }
            anyhow::ensure!(
                buf[..n]
                    .iter()
                    .enumerate()
                    .all(|(i, &x)| x == pattern_byte(got + i as u64)),
                "bulk data corrupted at {got}"
            );
            got += n as u64;
        }
        s.close(&mut st)?;
        // Request/response: echo single bytes until EOF.
        let r = l.accept_blocking(&mut st, t)?;
        r.set_nodelay(&mut st, true)?;
        let mut rr = 0u64;
        let mut one = [0u8; 1];
        loop {
            let n = r.read_blocking(&mut st, &mut one, t)?;
            if n == 0 {
                break;
            }
            r.write_all_blocking(&mut st, &one, t)?;
            rr += 1;
        }
        r.close(&mut st)?;
        let end = st.now() + 100_000_000;
        while lazynet::socket::wait_step(&mut st, Some(end)) {}
        Ok((got, rr))
    });
    lazynet::sys::pin_thread(0);
    let mut st = Stack::new(a, cfg(CLIENT));
    let dst = SocketAddrV4::new(SERVER, 5001);
    let c = TcpStream::connect(&mut st, dst, t)?;
    let chunk: Vec<u8> = (0..65536).map(pattern_byte).collect();
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed().as_secs_f64() < secs / 2.0 {
        // The pattern repeats every 251 bytes; offsets keep it continuous.
        let off = (sent % 251) as usize;
        let n = c.write(&mut st, &chunk[off..off + 60_000]);
        match n {
            Ok(n) => sent += n as u64,
            Err(SocketError::WouldBlock) => {
                lazynet::socket::wait_step(&mut st, None);
            }
            Err(e) => return Err(e.into()),
        }
    }
    c.shutdown(&mut st)?;
    c.flush_blocking(&mut st, t)?;
    let bulk_secs = start.elapsed().as_secs_f64();
    let bulk_counters = st.tcp(c.handle()).counters()?;
    c.close(&mut st)?;
    let r = TcpStream::connect(&mut st, dst, t)?;
    r.set_nodelay(&mut st, true)?;
    let mut h = crate::echo::hist();
    let start = Instant::now();
    let mut one = [7u8; 1];
    while start.elapsed().as_secs_f64() < secs / 2.0 {
        let t0 = Instant::now();
        r.write_all_blocking(&mut st, &one, t)?;
        let n = r.read_blocking(&mut st, &mut one, t)?;
        anyhow::ensure!(n == 1 && one[0] == 7, "request/response reply wrong");
        h.record(t0.elapsed().as_nanos() as u64)?;
    }
    r.shutdown(&mut st)?;
    let mut tmp = [0u8; 1];
    let _ = r.read_blocking(&mut st, &mut tmp, t);
    r.close(&mut st)?;
    let end = st.now() + 100_000_000;
    while lazynet::socket::wait_step(&mut st, Some(end)) {}
    let (got, rr) = server
        .join()
        .map_err(|_| anyhow::anyhow!("server thread panicked"))??;
    anyhow::ensure!(got == sent, "server got {got} of {sent} bytes");
    anyhow::ensure!(
        rr == h.len(),
        "server echoed {rr}, client counted {}",
        h.len()
    );
    println!("TCP on the in-memory wire (two stacks, two threads):");
    println!(
        "  bulk: {:.1} MB in {:.2} s = {:.2} Gbit/s, every byte checked",
        sent as f64 / 1e6,
        bulk_secs,
        sent as f64 * 8.0 / bulk_secs / 1e9
    );
    println!(
        "  1-byte request/response: {} round trips, RTT p50 {:.1} µs, p99 {:.1} µs",
        h.len(),
        h.value_at_quantile(0.5) as f64 / 1000.0,
        h.value_at_quantile(0.99) as f64 / 1000.0
    );
    let s = st.stats();
    println!(
        "  client counters: {} segments in, {} out, {} dropped frames; bulk: {} retransmits ({} fast, {} timeouts)",
        s.tcp.segments_in,
        s.tcp.segments_out,
        s.rx_frame_drops,
        bulk_counters.retransmits,
        bulk_counters.fast_retransmits,
        bulk_counters.rto_expired
    );
    if verbose {
        println!("{s}");
    }
    Ok(())
}

// ----- HTTP -----

/// An HTTP/1.1 connection ([`crate::http::HttpConn`]) as an app.
pub struct HttpApp(crate::http::HttpConn);

impl HttpApp {
    pub fn new(cfg: std::rc::Rc<crate::http::ServerConfig>) -> Self {
        HttpApp(crate::http::HttpConn::new(cfg))
    }
}

impl ConnApp for HttpApp {
    fn on_data(&mut self, data: &[u8]) -> usize {
        self.0.feed(data)
    }
    fn poll_output(&mut self, out: &mut [u8]) -> usize {
        self.0.poll_output(out)
    }
    fn on_eof(&mut self) {
        self.0.on_eof()
    }
    fn wants_close(&self) -> bool {
        self.0.wants_close()
    }
}

/// `lazynet serve http`.
pub fn serve_http(
    port: u16,
    cfg: std::rc::Rc<crate::http::ServerConfig>,
    syn_queue: Option<usize>,
    net: &NetArgs,
) -> anyhow::Result<()> {
    serve("HTTP", port, syn_queue, net, move || {
        HttpApp::new(cfg.clone())
    })
}

/// `lazynet get URL [-o FILE]`: downloads over lazynet (a TAP device whose
/// kernel side is in the peer namespace) and writes the body to FILE or
/// stdout. Fails on a non-2xx status, a truncated body or a time-out; then
/// FILE is removed if it is a regular file (an error page or a partial body
/// left under the name the user asked for would pass for the download).
pub fn get(
    url: &str,
    out: Option<&std::path::Path>,
    timeout_s: f64,
    net: &NetArgs,
) -> anyhow::Result<()> {
    let url = crate::http::parse_url(url)?;
    let cfg = stack_config(net)?;
    let (opened, owned_ns) = crate::serve::open(net)?;
    let mut stack = opened.into_stack(cfg, net)?;
    let r = get_on(&mut stack, &url, out, timeout_s);
    if let (Err(_), Some(p)) = (&r, out) {
        // Only a regular file: `-o /dev/null` (or any device, FIFO or
        // directory entry that is not ours to delete) stays.
        let regular = std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file());
        if regular {
            let _ = std::fs::remove_file(p);
        }
    }
    drop(stack);
    if let Some(Ownership::Created(g)) = owned_ns {
        g.cleanup()?;
    }
    r
}

fn get_on<N: Nic>(
    stack: &mut Stack<N>,
    url: &crate::http::Url,
    out: Option<&std::path::Path>,
    timeout_s: f64,
) -> anyhow::Result<()> {
    let t = Some(Duration::from_secs_f64(timeout_s));
    let start = Instant::now();
    let mut sink: Box<dyn Write> = match out {
        Some(p) => Box::new(std::io::BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(p)?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let s = TcpStream::connect(stack, SocketAddrV4::new(url.host, url.port), t)?;
    let mut get = crate::http::HttpGet::new(url);
    s.write_all_blocking(stack, get.request(), t)?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut werr = None;
    while !get.is_done() {
        let n = s.read_blocking(stack, &mut buf, t)?;
        if n == 0 {
            get.on_eof()?;
            break;
        }
        get.feed_all(&buf[..n], |b| {
            if werr.is_none() {
                if let Err(e) = sink.write_all(b) {
                    werr = Some(e);
                }
            }
        })?;
        if let Some(e) = werr.take() {
            return Err(e.into());
        }
    }
    sink.flush()?;
    let _ = s.close(stack);
    // Let our FIN and the final ACKs go out.
    let end = stack.now() + 50_000_000;
    while lazynet::socket::wait_step(stack, Some(end)) {}
    let secs = start.elapsed().as_secs_f64();
    let status = get.status().unwrap_or(0);
    eprintln!(
        "{} {} bytes in {:.2} s ({:.1} Mbit/s)",
        status,
        get.body_bytes(),
        secs,
        get.body_bytes() as f64 * 8.0 / secs / 1e6
    );
    if let Some(s) = stack.nic().driver_stats() {
        eprintln!("nic: {s}");
    }
    anyhow::ensure!((200..300).contains(&status), "HTTP status {status}");
    Ok(())
}
