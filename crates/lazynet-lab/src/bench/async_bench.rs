//! `lazynet-lab bench async`: what the async sockets (`lazynet-tokio`) cost
//! and give, side by side in one run.
//!
//! * **hyper**: hyper 1.x serving HTTP/1.1 keep-alive requests (a 64-byte
//!   body) on lazynet's async sockets over the in-memory wire, against the
//!   same hyper server on tokio's sockets over Linux loopback. The client
//!   is hyper's own, on the same kind of sockets as the server (lazynet on
//!   a second stack; tokio over loopback), a closed loop on `conns`
//!   connections. Same core budget: the server thread on one core, the
//!   client thread on the other, each a current-thread runtime.
//! * **echo**: one connection, `size`-byte messages echoed, closed loop:
//!   lazynet's async sockets on both ends against the native
//!   blocking-style socket API on both ends, on the same wire and cores.
//!   Both sleep when idle (the async driver in tokio's reactor on the
//!   stack's descriptor, the native calls on the NIC's doorbell); a
//!   busy-polling pair of each is measured too.
//!
//! Each run measures every series; the order rotates from run to run; the
//! medians are judged against the goals. CPU time is each thread's own
//! (`CLOCK_THREAD_CPUTIME_ID`: user and system, with the kernel's loopback
//! work that runs in the sending thread), summed over both. The server
//! thread is on the server's core, the client's on the client's
//! ([`crate::infra::cpus::pair`]). The tokio-over-loopback series stays
//! here: it runs the same hyper server and client code as lazynet's.
//!
//! **Owns:** its wires, runtimes and threads (joined per run). **May not
//! touch:** the stack's internals (public API and `lazynet-tokio` only).

use std::cell::Cell;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::socket::{SocketError, TcpListener as NativeListener, TcpStream as NativeStream};
use lazynet::stack::{Stack, StackConfig};
use lazynet::sys::{pin_thread, thread_cpu_ns};
use lazynet_cli::echo::hist;

use crate::infra::cpus;
use crate::infra::report::median;

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 203, 0, 2);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 203, 0, 1);
const HTTP_PORT: u16 = 80;
const ECHO_PORT: u16 = 7;
/// The response body.
const BODY: &[u8; 64] = b"lazynet says hello: sixty-four bytes of body, every one counted\n";
/// Warm-up before each measured interval.
const WARMUP: Duration = Duration::from_millis(300);

fn stack_config(addr: Ipv4Addr) -> StackConfig {
    StackConfig {
        addr,
        seed: u64::from(u32::from(addr)),
        ..StackConfig::default()
    }
}

fn wire() -> anyhow::Result<(WireEnd, WireEnd)> {
    Ok(WirePair::new(WireConfig {
        buf_count: 4096,
        ..WireConfig::default()
    })?)
}

fn current_thread() -> anyhow::Result<(tokio::runtime::Runtime, tokio::task::LocalSet)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok((rt, tokio::task::LocalSet::new()))
}

// ----- hyper -----

/// One hyper run: requests/s over the measured interval and CPU ns per
/// request (both threads).
#[derive(Clone, Copy, Debug)]
struct HyperRun {
    rps: f64,
    cpu_ns_per_req: f64,
}

async fn answer(_req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(BODY))))
}

/// hyper's server over whatever stream `accept` yields, each connection a
/// task, until `stop` is notified (its connections end with the runtime).
async fn hyper_server<S, F, Fut>(mut accept: F, stop: Arc<tokio::sync::Notify>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::io::Result<S>>,
{
    loop {
        let s = tokio::select! {
            r = accept() => match r {
                Ok(s) => s,
                Err(_) => break,
            },
            _ = stop.notified() => break,
        };
        tokio::task::spawn_local(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(s), hyper::service::service_fn(answer))
                .await;
        });
    }
}

/// hyper's client on one connection: requests back to back, each body
/// checked, counted in `done` until `stop`.
async fn hyper_client<S>(s: S, done: Rc<Cell<u64>>, stop: Rc<Cell<bool>>) -> anyhow::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s)).await?;
    tokio::task::spawn_local(conn);
    while !stop.get() {
        let req = Request::get("/")
            .header("host", "bench")
            .body(Empty::<Bytes>::new())?;
        let res = send.send_request(req).await?;
        anyhow::ensure!(res.status() == 200, "status {}", res.status());
        let b = res.into_body().collect().await?.to_bytes();
        anyhow::ensure!(b[..] == BODY[..], "body of {} bytes", b.len());
        done.set(done.get() + 1);
    }
    Ok(())
}

/// The client side of a hyper run: `conns` connections from `connect`,
/// counted over `d` after the warm-up; returns (requests, client CPU ns
/// in the interval).
async fn hyper_load<S, F, Fut>(
    mut connect: F,
    conns: usize,
    d: Duration,
) -> anyhow::Result<(u64, u64, Duration)>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::io::Result<S>>,
{
    let done = Rc::new(Cell::new(0u64));
    let stop = Rc::new(Cell::new(false));
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let s = connect().await?;
        tasks.push(tokio::task::spawn_local(hyper_client(
            s,
            done.clone(),
            stop.clone(),
        )));
    }
    tokio::time::sleep(WARMUP).await;
    let (n0, c0, t0) = (done.get(), thread_cpu_ns(), Instant::now());
    tokio::time::sleep(d).await;
    let (n1, c1, el) = (done.get(), thread_cpu_ns(), t0.elapsed());
    stop.set(true);
    for t in tasks {
        t.await??;
    }
    Ok((n1 - n0, c1 - c0, el))
}

/// hyper on lazynet-tokio, both ends on the wire.
fn hyper_lazynet(conns: usize, d: Duration, cpus: (usize, usize)) -> anyhow::Result<HyperRun> {
    let (a, b) = wire()?;
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let end = Arc::new(tokio::sync::Notify::new());
    let end2 = end.clone();
    // The server's CPU time is sampled by the client's clock: the server
    // thread reports its own at the window's edges.
    let (edge_tx, edge_rx) = std::sync::mpsc::channel::<u64>();
    let edges = Arc::new(AtomicBool::new(false));
    let e2 = edges.clone();
    let server = std::thread::spawn(move || -> anyhow::Result<()> {
        pin_thread(cpus.1);
        let (rt, local) = current_thread()?;
        local.block_on(&rt, async move {
            let (net, driver) = lazynet_tokio::new(Stack::new(b, stack_config(SERVER)))?;
            tokio::task::spawn_local(async move { driver.run().await });
            let l = lazynet_tokio::TcpListener::bind(
                &net,
                SocketAddrV4::new(SERVER, HTTP_PORT).into(),
            )?;
            let l = Rc::new(l);
            tokio::task::spawn_local(cpu_edges(e2, edge_tx, s2));
            hyper_server(
                || {
                    let l = l.clone();
                    async move {
                        let (s, _) = l.accept().await?;
                        s.set_nodelay(true)?;
                        Ok(s)
                    }
                },
                end2,
            )
            .await;
            anyhow::Ok(())
        })
    });
    pin_thread(cpus.0);
    let (rt, local) = current_thread()?;
    let r = local.block_on(&rt, async {
        let (net, driver) = lazynet_tokio::new(Stack::new(a, stack_config(CLIENT)))?;
        tokio::task::spawn_local(async move { driver.run().await });
        let dst: SocketAddr = SocketAddrV4::new(SERVER, HTTP_PORT).into();
        hyper_load(
            || {
                let net = net.clone();
                let e = edges.clone();
                async move {
                    let s = lazynet_tokio::TcpStream::connect(&net, dst).await?;
                    s.set_nodelay(true)?;
                    e.store(true, Ordering::Relaxed);
                    Ok(s)
                }
            },
            conns,
            d,
        )
        .await
    });
    let server_cpu = server_window(&edge_rx);
    stop.store(true, Ordering::Relaxed);
    end.notify_one();
    drop(local);
    server
        .join()
        .map_err(|_| anyhow::anyhow!("server panicked"))??;
    let (n, client_cpu, el) = r?;
    Ok(HyperRun {
        rps: n as f64 / el.as_secs_f64(),
        cpu_ns_per_req: (client_cpu + server_cpu?) as f64 / n.max(1) as f64,
    })
}

/// The server thread's CPU time over the client's window: the server
/// samples its own clock at the window's start and end (after the
/// warm-up, then `d` later), as the client does.
async fn cpu_edges(
    started: Arc<AtomicBool>,
    tx: std::sync::mpsc::Sender<u64>,
    stop: Arc<AtomicBool>,
) {
    while !started.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(WARMUP).await;
    let _ = tx.send(thread_cpu_ns());
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let _ = tx.send(thread_cpu_ns());
    }
}

/// The server's CPU over the window: its samples from the first (window
/// start) to the last before the stop.
fn server_window(rx: &std::sync::mpsc::Receiver<u64>) -> anyhow::Result<u64> {
    let first = rx.recv_timeout(Duration::from_secs(5))?;
    let mut last = first;
    while let Ok(x) = rx.try_recv() {
        last = x;
    }
    Ok(last - first)
}

/// hyper on tokio's sockets over Linux loopback.
fn hyper_tokio(conns: usize, d: Duration, cpus: (usize, usize)) -> anyhow::Result<HyperRun> {
    let std_l = std::net::TcpListener::bind("127.0.0.1:0")?;
    std_l.set_nonblocking(true)?;
    let addr = std_l.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let end = Arc::new(tokio::sync::Notify::new());
    let end2 = end.clone();
    let (edge_tx, edge_rx) = std::sync::mpsc::channel::<u64>();
    let edges = Arc::new(AtomicBool::new(false));
    let e2 = edges.clone();
    let server = std::thread::spawn(move || -> anyhow::Result<()> {
        pin_thread(cpus.1);
        let (rt, local) = current_thread()?;
        local.block_on(&rt, async move {
            let l = Rc::new(tokio::net::TcpListener::from_std(std_l)?);
            tokio::task::spawn_local(cpu_edges(e2, edge_tx, s2));
            hyper_server(
                || {
                    let l = l.clone();
                    async move {
                        let (s, _) = l.accept().await?;
                        s.set_nodelay(true)?;
                        Ok(s)
                    }
                },
                end2,
            )
            .await;
            anyhow::Ok(())
        })
    });
    pin_thread(cpus.0);
    let (rt, local) = current_thread()?;
    let r = local.block_on(&rt, async {
        hyper_load(
            || {
                let e = edges.clone();
                async move {
                    let s = tokio::net::TcpStream::connect(addr).await?;
                    s.set_nodelay(true)?;
                    e.store(true, Ordering::Relaxed);
                    Ok(s)
                }
            },
            conns,
            d,
        )
        .await
    });
    let server_cpu = server_window(&edge_rx);
    stop.store(true, Ordering::Relaxed);
    end.notify_one();
    drop(local);
    server
        .join()
        .map_err(|_| anyhow::anyhow!("server panicked"))??;
    let (n, client_cpu, el) = r?;
    Ok(HyperRun {
        rps: n as f64 / el.as_secs_f64(),
        cpu_ns_per_req: (client_cpu + server_cpu?) as f64 / n.max(1) as f64,
    })
}

// ----- echo -----

/// One echo run: round trips and their p50/p99 (µs).
#[derive(Clone, Copy, Debug)]
struct EchoRun {
    rtts: u64,
    p50_us: f64,
    p99_us: f64,
}

/// How an echo pair waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    /// Sleeps when idle (the doorbell; tokio's reactor).
    Sleep,
    /// Polls without sleeping.
    Poll,
}

/// Native blocking-style calls on both ends (polling: the non-blocking
/// calls in a loop with `poll`/`tcp_service`).
fn echo_native(
    size: usize,
    d: Duration,
    cpus: (usize, usize),
    wait: Wait,
) -> anyhow::Result<EchoRun> {
    let (a, b) = wire()?;
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let t = Some(Duration::from_secs(5));
    let server = std::thread::spawn(move || -> anyhow::Result<()> {
        pin_thread(cpus.1);
        let mut st = Stack::new(b, stack_config(SERVER));
        let l = NativeListener::bind(&mut st, SocketAddrV4::new(SERVER, ECHO_PORT), 4)?;
        let s = l.accept_blocking(&mut st, t)?;
        s.set_nodelay(&mut st, true)?;
        let mut buf = vec![0u8; size];
        while !s2.load(Ordering::Relaxed) {
            let n = match wait {
                Wait::Sleep => {
                    match s.recv_blocking(&mut st, &mut buf, Some(Duration::from_millis(100))) {
                        Err(SocketError::TimedOut) => continue,
                        r => r?,
                    }
                }
                Wait::Poll => match s.recv(&mut st, &mut buf) {
                    Err(SocketError::WouldBlock) => {
                        let now = st.now();
                        st.poll(now);
                        st.tcp_service(now, 64);
                        continue;
                    }
                    r => r?,
                },
            };
            if n == 0 {
                break;
            }
            s.send_all_blocking(&mut st, &buf[..n], t)?;
        }
        Ok(())
    });
    pin_thread(cpus.0);
    let mut st = Stack::new(a, stack_config(CLIENT));
    let c = NativeStream::connect(&mut st, SocketAddrV4::new(SERVER, ECHO_PORT), t)?;
    c.set_nodelay(&mut st, true)?;
    let msg = vec![0x42u8; size];
    let mut back = vec![0u8; size];
    let mut h = hist();
    let start = Instant::now();
    let mut measuring = false;
    while start.elapsed() < WARMUP + d {
        if !measuring && start.elapsed() >= WARMUP {
            h.reset();
            measuring = true;
        }
        let t0 = Instant::now();
        c.send_all_blocking(&mut st, &msg, t)?;
        let mut got = 0;
        while got < size {
            let n = match wait {
                Wait::Sleep => c.recv_blocking(&mut st, &mut back[got..], t)?,
                Wait::Poll => match c.recv(&mut st, &mut back[got..]) {
                    Err(SocketError::WouldBlock) => {
                        let now = st.now();
                        st.poll(now);
                        st.tcp_service(now, 64);
                        continue;
                    }
                    r => r?,
                },
            };
            anyhow::ensure!(n > 0, "echo ended early");
            got += n;
        }
        h.record(t0.elapsed().as_nanos() as u64)?;
        anyhow::ensure!(back == msg, "echo wrong");
    }
    stop.store(true, Ordering::Relaxed);
    c.shutdown(&mut st)?;
    let end = st.now() + 50_000_000;
    while lazynet::socket::wait_step(&mut st, Some(end)) {}
    server
        .join()
        .map_err(|_| anyhow::anyhow!("server panicked"))??;
    Ok(EchoRun {
        rtts: h.len(),
        p50_us: h.value_at_quantile(0.5) as f64 / 1000.0,
        p99_us: h.value_at_quantile(0.99) as f64 / 1000.0,
    })
}

/// lazynet-tokio on both ends (polling: the driver spins instead of
/// sleeping).
fn echo_async(
    size: usize,
    d: Duration,
    cpus: (usize, usize),
    wait: Wait,
) -> anyhow::Result<EchoRun> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (a, b) = wire()?;
    let cfg = lazynet_tokio::DriverConfig {
        spin_ns: (wait == Wait::Poll).then_some(u64::MAX),
        ..lazynet_tokio::DriverConfig::default()
    };
    let server = std::thread::spawn(move || -> anyhow::Result<()> {
        pin_thread(cpus.1);
        let (rt, local) = current_thread()?;
        local.block_on(&rt, async move {
            let (net, driver) =
                lazynet_tokio::with_config(Stack::new(b, stack_config(SERVER)), cfg)?;
            let dr = tokio::task::spawn_local(async move { driver.run().await });
            let l = lazynet_tokio::TcpListener::bind(
                &net,
                SocketAddrV4::new(SERVER, ECHO_PORT).into(),
            )?;
            let (mut s, _) = l.accept().await?;
            s.set_nodelay(true)?;
            // A task of its own, as a server's connection is: the future
            // `block_on` runs is polled only between batches of tasks.
            tokio::task::spawn_local(async move {
                let mut buf = vec![0u8; size];
                loop {
                    let n = s.read(&mut buf).await?;
                    if n == 0 {
                        break;
                    }
                    s.write_all(&buf[..n]).await?;
                }
                anyhow::Ok(())
            })
            .await??;
            tokio::time::sleep(Duration::from_millis(50)).await;
            dr.abort();
            anyhow::Ok(())
        })
    });
    pin_thread(cpus.0);
    let (rt, local) = current_thread()?;
    let r = local.block_on(&rt, async move {
        let (net, driver) = lazynet_tokio::with_config(Stack::new(a, stack_config(CLIENT)), cfg)?;
        let dr = tokio::task::spawn_local(async move { driver.run().await });
        let mut c =
            lazynet_tokio::TcpStream::connect(&net, SocketAddrV4::new(SERVER, ECHO_PORT).into())
                .await?;
        c.set_nodelay(true)?;
        let h = tokio::task::spawn_local(async move {
            let msg = vec![0x42u8; size];
            let mut back = vec![0u8; size];
            let mut h = hist();
            let start = Instant::now();
            let mut measuring = false;
            while start.elapsed() < WARMUP + d {
                if !measuring && start.elapsed() >= WARMUP {
                    h.reset();
                    measuring = true;
                }
                let t0 = Instant::now();
                c.write_all(&msg).await?;
                c.read_exact(&mut back).await?;
                h.record(t0.elapsed().as_nanos() as u64)?;
                anyhow::ensure!(back == msg, "echo wrong");
            }
            c.shutdown().await?;
            anyhow::Ok(h)
        })
        .await??;
        tokio::time::sleep(Duration::from_millis(50)).await;
        dr.abort();
        anyhow::Ok(EchoRun {
            rtts: h.len(),
            p50_us: h.value_at_quantile(0.5) as f64 / 1000.0,
            p99_us: h.value_at_quantile(0.99) as f64 / 1000.0,
        })
    });
    server
        .join()
        .map_err(|_| anyhow::anyhow!("server panicked"))??;
    r
}

// ----- the benchmark -----

/// A goal's verdict line.
fn verdict(what: &str, value: f64, goal: &str, met: bool) -> String {
    format!(
        "  {} {what}: {value:.2} — goal {goal}\n",
        if met { "met" } else { "MISSED" }
    )
}

/// Runs the benchmark and writes `async.{csv,txt,png}` into `out`: `runs`
/// hyper runs of `seconds` (the two series alternating), then
/// `echo_rounds` rounds of the four echo series, `echo_seconds` each, in
/// rotating order. The echo's ratios are judged per round (the two
/// series it compares measured back to back, under the same placement of
/// the two vCPUs) and the median of the rounds' ratios is the figure.
pub fn bench(
    seconds: f64,
    runs: usize,
    conns: usize,
    size: usize,
    echo_rounds: usize,
    echo_seconds: f64,
    out: &Path,
) -> anyhow::Result<()> {
    let d = Duration::from_secs_f64(seconds);
    let de = Duration::from_secs_f64(echo_seconds);
    let cp = cpus::pair();
    std::fs::create_dir_all(out)?;
    let mut csv = String::from("series,run,seconds,value,unit,cpu_ns_per_op,p99_us\n");
    let (mut lz, mut tk, mut lz_cpu, mut tk_cpu) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs.max(1) {
        for k in 0..2 {
            if (k + run) % 2 == 0 {
                let r = hyper_lazynet(conns, d, cp)?;
                let _ = writeln!(
                    csv,
                    "hyper lazynet-tokio wire,{run},{seconds},{:.0},requests/s,{:.0},",
                    r.rps, r.cpu_ns_per_req
                );
                lz.push(r.rps);
                lz_cpu.push(r.cpu_ns_per_req);
            } else {
                let r = hyper_tokio(conns, d, cp)?;
                let _ = writeln!(
                    csv,
                    "hyper tokio loopback,{run},{seconds},{:.0},requests/s,{:.0},",
                    r.rps, r.cpu_ns_per_req
                );
                tk.push(r.rps);
                tk_cpu.push(r.cpu_ns_per_req);
            }
        }
        crate::infra::report::progress(&format!("hyper run {run} done"));
    }
    let mut echo: [Vec<EchoRun>; 4] = Default::default();
    let series = [
        ("echo native sleeping", false, Wait::Sleep),
        ("echo async sleeping", true, Wait::Sleep),
        ("echo native polling", false, Wait::Poll),
        ("echo async polling", true, Wait::Poll),
    ];
    let (mut sleep_ratios, mut poll_ratios) = (Vec::new(), Vec::new());
    for round in 0..echo_rounds.max(1) {
        let mut r: [Option<EchoRun>; 4] = [None; 4];
        for k in 0..4 {
            let m = (k + round) % 4;
            let (name, is_async, wait) = series[m];
            let e = if is_async {
                echo_async(size, de, cp, wait)?
            } else {
                echo_native(size, de, cp, wait)?
            };
            anyhow::ensure!(e.rtts > 100, "{name}: only {} round trips", e.rtts);
            let _ = writeln!(
                csv,
                "{name},{round},{echo_seconds},{:.2},p50 us,,{:.2}",
                e.p50_us, e.p99_us
            );
            r[m] = Some(e);
            echo[m].push(e);
        }
        if let [Some(ns), Some(a_s), Some(np), Some(ap)] = r {
            sleep_ratios.push(a_s.p50_us / ns.p50_us);
            poll_ratios.push(ap.p50_us / np.p50_us);
        }
        crate::infra::report::progress(&format!("echo round {round} done"));
    }
    let p50 = |v: &[EchoRun]| median(&v.iter().map(|r| r.p50_us).collect::<Vec<_>>());
    let (mlz, mtk) = (median(&lz), median(&tk));
    let hyper_ratio = mlz / mtk;
    let sleep_ratio = median(&sleep_ratios);
    let poll_ratio = median(&poll_ratios);
    let mut txt = String::new();
    let _ = writeln!(
        txt,
        "hyper keep-alive, {conns} connections, 64-byte body, server and client one core each:"
    );
    let _ = writeln!(
        txt,
        "  lazynet-tokio on the wire: {mlz:.0} requests/s, {:.0} ns CPU per request (both threads)",
        median(&lz_cpu)
    );
    let _ = writeln!(
        txt,
        "  tokio over Linux loopback: {mtk:.0} requests/s, {:.0} ns CPU per request (both threads)",
        median(&tk_cpu)
    );
    let _ = writeln!(
        txt,
        "TCP echo of {size}-byte messages, one connection, round trip (µs, medians of {} rounds):",
        echo[0].len()
    );
    for (i, (name, _, _)) in series.iter().enumerate() {
        let _ = writeln!(
            txt,
            "  {name}: p50 {:.2}, p99 {:.2}",
            p50(&echo[i]),
            median(&echo[i].iter().map(|r| r.p99_us).collect::<Vec<_>>())
        );
    }
    txt.push_str("goals (medians of the runs):\n");
    txt.push_str(&verdict(
        "hyper requests/s, lazynet-tokio wire ÷ tokio loopback",
        hyper_ratio,
        "≥ 2",
        hyper_ratio >= 2.0,
    ));
    txt.push_str(&verdict(
        "async echo p50 ÷ native, both sleeping (median of the rounds' ratios)",
        sleep_ratio,
        "≤ 1.15",
        sleep_ratio <= 1.15,
    ));
    txt.push_str(&verdict(
        "async echo p50 ÷ native, both polling (median of the rounds' ratios)",
        poll_ratio,
        "≤ 1.15",
        poll_ratio <= 1.15,
    ));
    print!("{txt}");
    std::fs::write(out.join("async.csv"), &csv)?;
    let meta = crate::infra::report::txt_head(&crate::infra::report::command_line()) + &txt;
    std::fs::write(out.join("async.txt"), meta)?;
    let cats: Vec<String> = (1..=lz.len()).map(|r| r.to_string()).collect();
    let ecats: Vec<String> = (1..=echo[0].len()).map(|r| r.to_string()).collect();
    let rps = [
        ("hyper, lazynet-tokio, wire".to_string(), lz),
        ("hyper, tokio, Linux loopback".to_string(), tk),
    ];
    let lat: Vec<(String, Vec<f64>)> = series
        .iter()
        .enumerate()
        .map(|(i, (n, _, _))| (n.to_string(), echo[i].iter().map(|r| r.p50_us).collect()))
        .collect();
    crate::infra::plot::figure(
        &out.join("async.png"),
        &[
            crate::infra::plot::Panel::Bars {
                title: "hyper keep-alive requests/s per run",
                x_label: "run",
                y_label: "requests/s",
                categories: &cats,
                series: &rps,
            },
            crate::infra::plot::Panel::Bars {
                title: "TCP echo round trip p50 per round",
                x_label: "round",
                y_label: "us",
                categories: &ecats,
                series: &lat,
            },
        ],
    )
}
