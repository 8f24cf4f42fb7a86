//! TCP programs: `serve tcp-echo`, `serve http`, `get`, and the TCP part of
//! `demo`.
//!
//! Servers run on the library's loop ([`lazynet::server::Server`]): one
//! stack, one listener, one [`ConnApp`] per connection, driven by
//! readiness.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lazynet::nic::netns::Ownership;
use lazynet::nic::wirepair::{WireConfig, WirePair};
use lazynet::nic::Nic;
use lazynet::proto::tcp::ListenConfig;
use lazynet::server::{ConnApp, Server, ServerConfig};
use lazynet::socket::{SocketError, TcpListener, TcpStream};
use lazynet::stack::{Stack, StackConfig};

use crate::args::NetArgs;
use crate::http::pattern_byte;

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
            let scfg = ServerConfig {
                spin_ns: self.spin_ns,
                ..ServerConfig::default()
            };
            let mut server = Server::new(stack, listener, self.make, scfg)?;
            let status = self.status;
            let r = server.run(stack, self.stop, |stack, server| {
                if status.swap(false, Ordering::Relaxed) {
                    print_status(stack, server.serving());
                }
            });
            let (served, open) = (r.served, r.open_at_exit);
            println!("connections: {served}, open at exit: {open}");
            if let Ok(c) = stack.listener(listener).counters() {
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
            let n = s.recv_blocking(&mut st, &mut buf, t)?;
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
            let n = r.recv_blocking(&mut st, &mut one, t)?;
            if n == 0 {
                break;
            }
            r.send_all_blocking(&mut st, &one, t)?;
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
        let n = c.send(&mut st, &chunk[off..off + 60_000]);
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
    let bulk_counters = st.tcp(c).counters()?;
    c.close(&mut st)?;
    let r = TcpStream::connect(&mut st, dst, t)?;
    r.set_nodelay(&mut st, true)?;
    let mut h = crate::echo::hist();
    let start = Instant::now();
    let mut one = [7u8; 1];
    while start.elapsed().as_secs_f64() < secs / 2.0 {
        let t0 = Instant::now();
        r.send_all_blocking(&mut st, &one, t)?;
        let n = r.recv_blocking(&mut st, &mut one, t)?;
        anyhow::ensure!(n == 1 && one[0] == 7, "request/response reply wrong");
        h.record(t0.elapsed().as_nanos() as u64)?;
    }
    r.shutdown(&mut st)?;
    let mut tmp = [0u8; 1];
    let _ = r.recv_blocking(&mut st, &mut tmp, t);
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
    s.send_all_blocking(stack, get.request(), t)?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut werr = None;
    while !get.is_done() {
        let n = s.recv_blocking(stack, &mut buf, t)?;
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
