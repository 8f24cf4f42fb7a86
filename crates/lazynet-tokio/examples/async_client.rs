//! An async client on lazynet: several tasks, each with a connection to
//! an echo server, sending messages and awaiting their echoes.
//!
//! ```text
//! cargo run --release --example async_client                  # the in-memory wire
//! sudo cargo run --release --example async_client -- --nic tap    # or xdp
//! ```
//!
//! On the wire the server is lazynet's own server loop on a second stack
//! (another thread); on `tap`/`xdp` it is a Linux TCP echo server in a
//! namespace the example creates. Every echoed byte is checked; the
//! example exits 0 only if all came back.

#[path = "../../lazynet/examples/common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use common::NicKind;
use lazynet::nic::wirepair::{WireConfig, WirePair};
use lazynet::server::{EchoApp, Server, ServerConfig};
use lazynet::socket::TcpListener;
use lazynet::stack::Stack;
use lazynet_tokio::{Net, TcpStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Parser)]
struct Args {
    /// Where the client's stack runs.
    #[arg(long, value_enum, default_value = "wire")]
    nic: NicKind,
    /// Tasks (connections) at once.
    #[arg(long, default_value_t = 8)]
    tasks: usize,
    /// Messages per task.
    #[arg(long, default_value_t = 2000)]
    messages: usize,
}

const PORT: u16 = 7;

fn size_of(i: usize) -> usize {
    1 + (i * 131) % 8192
}

/// One task: `messages` messages, each written whole and read back whole
/// before the next; returns the round trips' durations (ns).
async fn task(net: Net, dst: SocketAddr, salt: u8, messages: usize) -> anyhow::Result<Vec<u64>> {
    let mut s = TcpStream::connect(&net, dst).await?;
    s.set_nodelay(true)?;
    let mut rtts = Vec::with_capacity(messages);
    let mut back = vec![0u8; 8192];
    for i in 0..messages {
        let msg = common::pattern(i, size_of(i), salt);
        let t0 = Instant::now();
        s.write_all(&msg).await?;
        s.read_exact(&mut back[..msg.len()]).await?;
        rtts.push(t0.elapsed().as_nanos() as u64);
        anyhow::ensure!(
            back[..msg.len()] == msg[..],
            "task {salt}: message {i} wrong"
        );
    }
    s.shutdown().await?;
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).await?;
    anyhow::ensure!(
        rest.is_empty(),
        "task {salt}: {} bytes after the end",
        rest.len()
    );
    Ok(rtts)
}

async fn clients<N: lazynet::nic::Nic + 'static>(
    stack: Stack<N>,
    dst: SocketAddr,
    args: &Args,
) -> anyhow::Result<Vec<u64>> {
    let (net, driver) = lazynet_tokio::new(stack)?;
    let d = tokio::task::spawn_local(async move { driver.run().await });
    let tasks: Vec<_> = (0..args.tasks)
        .map(|t| tokio::task::spawn_local(task(net.clone(), dst, t as u8, args.messages)))
        .collect();
    let mut rtts = Vec::new();
    for t in tasks {
        rtts.extend(tokio::time::timeout(Duration::from_secs(60), t).await???);
    }
    // Let the last FINs and ACKs go out.
    tokio::time::sleep(Duration::from_millis(50)).await;
    d.abort();
    Ok(rtts)
}

/// A Linux echo server in namespace `ns` for `conns` connections.
/// Says on `up` when it listens.
fn kernel_server(
    ns: &str,
    addr: SocketAddrV4,
    conns: usize,
    up: std::sync::mpsc::Sender<()>,
) -> std::io::Result<()> {
    lazynet::nic::netns::run_in_netns(ns, move || {
        let l = std::net::TcpListener::bind(addr)?;
        let _ = up.send(());
        let threads: Vec<_> = (0..conns)
            .map(|_| {
                let (mut s, _) = l.accept()?;
                Ok(std::thread::spawn(move || -> std::io::Result<()> {
                    s.set_nodelay(true)?;
                    s.set_read_timeout(Some(Duration::from_secs(20)))?;
                    let mut buf = vec![0u8; 65536];
                    loop {
                        let n = s.read(&mut buf)?;
                        if n == 0 {
                            return Ok(());
                        }
                        s.write_all(&buf[..n])?;
                    }
                }))
            })
            .collect::<std::io::Result<_>>()?;
        for t in threads {
            t.join()
                .map_err(|_| std::io::Error::other("server panicked"))??;
        }
        Ok(())
    })
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    let t0 = Instant::now();
    let mut rtts = match args.nic {
        NicKind::Wire => {
            let (a, b) = WirePair::new(WireConfig {
                buf_count: 4096,
                ..WireConfig::default()
            })?;
            let stop = Arc::new(AtomicBool::new(false));
            let s = stop.clone();
            let server = std::thread::spawn(move || -> anyhow::Result<u64> {
                let mut st = Stack::new(b, common::config(common::WIRE_OURS, common::seed()));
                let l = TcpListener::bind(&mut st, SocketAddrV4::new(common::WIRE_OURS, PORT), 64)?;
                let mut server =
                    Server::new(&mut st, l, EchoApp::default, ServerConfig::default())?;
                Ok(server.run(&mut st, &s, |_, _| {}).served)
            });
            let stack = Stack::new(a, common::config(common::WIRE_PEER, common::seed()));
            let dst = SocketAddrV4::new(common::WIRE_OURS, PORT).into();
            let r = local.block_on(&rt, clients(stack, dst, &args));
            stop.store(true, Ordering::Relaxed);
            let served = server
                .join()
                .map_err(|_| anyhow::anyhow!("server panicked"))??;
            let r = r?;
            anyhow::ensure!(served as usize == args.tasks, "served {served}");
            r
        }
        kind => {
            let (stack, peer) = common::kernel_peer(kind, 44)?;
            let dst = SocketAddrV4::new(peer.kernel, PORT);
            let (ns, n) = (peer.ns.clone(), args.tasks);
            let (up, listening) = std::sync::mpsc::channel();
            let server = std::thread::spawn(move || kernel_server(&ns, dst, n, up));
            // The listener is up before the first SYN.
            listening.recv_timeout(Duration::from_secs(5))?;
            let r = local.block_on(&rt, clients(stack, dst.into(), &args));
            server
                .join()
                .map_err(|_| anyhow::anyhow!("server panicked"))??;
            drop(local);
            drop(peer);
            r?
        }
    };
    anyhow::ensure!(
        rtts.len() == args.tasks * args.messages,
        "{} round trips",
        rtts.len()
    );
    println!(
        "async client over {:?}: {} tasks × {} messages of 1..8192 bytes, every byte checked, in {:.2} s; round trip p50 {:.1} µs, p99 {:.1} µs",
        args.nic,
        args.tasks,
        args.messages,
        t0.elapsed().as_secs_f64(),
        common::percentile_us(&mut rtts, 50.0),
        common::percentile_us(&mut rtts, 99.0)
    );
    Ok(())
}
