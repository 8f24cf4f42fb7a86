//! A TCP echo server on lazynet's server loop ([`lazynet::server::Server`]).
//!
//! ```text
//! cargo run --release --example tcp_echo                  # the in-memory wire
//! sudo cargo run --release --example tcp_echo -- --nic tap    # or xdp
//! ```
//!
//! Several clients at once each send a stream and read it back while
//! sending: on the wire, connections of a client stack in this process
//! (the blocking-style socket API, one thread); on `tap`/`xdp`, the Linux
//! kernel's TCP in a namespace the example creates. Every byte is checked;
//! the example exits 0 only if every stream came back whole.

mod common;

use std::io::{Read, Write};
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use common::NicKind;
use lazynet::nic::wirepair::{WireConfig, WirePair};
use lazynet::nic::Nic;
use lazynet::server::{EchoApp, Server, ServerConfig};
use lazynet::socket::{SocketError, TcpListener, TcpStream};
use lazynet::stack::Stack;

#[derive(Clone, Parser)]
struct Args {
    /// Where the server's stack runs.
    #[arg(long, value_enum, default_value = "wire")]
    nic: NicKind,
    /// Connections at once.
    #[arg(long, default_value_t = 4)]
    conns: usize,
    /// Bytes each connection sends (and gets back).
    #[arg(long, default_value_t = 4 << 20)]
    bytes: usize,
}

const PORT: u16 = 7;

fn serve<N: Nic>(stack: &mut Stack<N>, stop: &AtomicBool) -> anyhow::Result<u64> {
    let l = TcpListener::bind(stack, SocketAddrV4::new(stack.addr(), PORT), 64)?;
    let mut server = Server::new(stack, l, EchoApp::default, ServerConfig::default())?;
    let r = server.run(stack, stop, |_, _| {});
    anyhow::ensure!(
        r.open_at_exit == 0,
        "{} connections still open",
        r.open_at_exit
    );
    Ok(r.served)
}

/// The wire's client: `conns` connections driven round-robin by one
/// thread with the non-blocking calls, each writing its stream while
/// reading the echo.
fn wire_clients<N: Nic>(st: &mut Stack<N>, args: &Args) -> anyhow::Result<()> {
    let dst = SocketAddrV4::new(common::WIRE_OURS, PORT);
    let t = Some(Duration::from_secs(5));
    let conns: Vec<TcpStream> = (0..args.conns)
        .map(|_| TcpStream::connect(st, dst, t))
        .collect::<Result<_, _>>()?;
    let streams: Vec<Vec<u8>> = (0..args.conns)
        .map(|i| common::pattern(0, args.bytes, i as u8))
        .collect();
    let (mut sent, mut got) = (vec![0; args.conns], vec![0; args.conns]);
    let mut buf = vec![0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.iter().any(|&g| g < args.bytes) {
        anyhow::ensure!(Instant::now() < deadline, "echo stalled: got {got:?}");
        let mut progress = false;
        for (i, c) in conns.iter().enumerate() {
            if sent[i] < args.bytes {
                match c.send(st, &streams[i][sent[i]..]) {
                    Ok(n) => {
                        sent[i] += n;
                        progress = true;
                        if sent[i] == args.bytes {
                            c.shutdown(st)?;
                        }
                    }
                    Err(SocketError::WouldBlock) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            match c.recv(st, &mut buf) {
                Ok(0) => anyhow::ensure!(got[i] == args.bytes, "early end of stream {i}"),
                Ok(n) => {
                    anyhow::ensure!(
                        buf[..n] == streams[i][got[i]..got[i] + n],
                        "stream {i} wrong at {}",
                        got[i]
                    );
                    got[i] += n;
                    progress = true;
                }
                Err(SocketError::WouldBlock) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if !progress {
            lazynet::socket::wait_step(st, None);
        }
    }
    for c in conns {
        c.close(st)?;
    }
    // Our FINs' acknowledgements.
    let end = st.now() + 200_000_000;
    while lazynet::socket::wait_step(st, Some(end)) {}
    Ok(())
}

/// The kernel's clients: a thread per connection inside the namespace.
fn kernel_clients(ns: &str, dst: SocketAddrV4, args: &Args) -> std::io::Result<()> {
    let (conns, bytes) = (args.conns, args.bytes);
    lazynet::nic::netns::run_in_netns(ns, move || {
        let threads: Vec<_> = (0..conns)
            .map(|i| {
                std::thread::spawn(move || -> std::io::Result<()> {
                    let s =
                        std::net::TcpStream::connect_timeout(&dst.into(), Duration::from_secs(5))?;
                    s.set_read_timeout(Some(Duration::from_secs(10)))?;
                    let data = common::pattern(0, bytes, i as u8);
                    let mut w = s.try_clone()?;
                    let d = data.clone();
                    let writer = std::thread::spawn(move || -> std::io::Result<()> {
                        w.write_all(&d)?;
                        w.shutdown(std::net::Shutdown::Write)
                    });
                    let mut back = Vec::with_capacity(bytes);
                    (&s).read_to_end(&mut back)?;
                    writer
                        .join()
                        .map_err(|_| std::io::Error::other("writer panicked"))??;
                    if back != data {
                        return Err(std::io::Error::other(format!(
                            "stream {i}: {} bytes back, first difference at {:?}",
                            back.len(),
                            back.iter().zip(&data).position(|(a, b)| a != b)
                        )));
                    }
                    Ok(())
                })
            })
            .collect();
        for t in threads {
            t.join()
                .map_err(|_| std::io::Error::other("client panicked"))??;
        }
        Ok(())
    })
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let served = match args.nic {
        NicKind::Wire => {
            let (a, b) = WirePair::new(WireConfig {
                buf_count: 4096,
                ..WireConfig::default()
            })?;
            let s = stop.clone();
            let server = std::thread::spawn(move || {
                let mut st = Stack::new(b, common::config(common::WIRE_OURS, common::seed()));
                serve(&mut st, &s)
            });
            let mut st = Stack::new(a, common::config(common::WIRE_PEER, common::seed()));
            let r = wire_clients(&mut st, &args);
            stop.store(true, Ordering::Relaxed);
            let served = server
                .join()
                .map_err(|_| anyhow::anyhow!("server panicked"))??;
            r?;
            served
        }
        kind => {
            let (mut st, peer) = common::kernel_peer(kind, 42)?;
            let dst = SocketAddrV4::new(peer.ours, PORT);
            let s = stop.clone();
            let ns = peer.ns.clone();
            let a2 = args.clone();
            let client = std::thread::spawn(move || {
                let r = kernel_clients(&ns, dst, &a2);
                s.store(true, Ordering::Relaxed);
                r
            });
            let served = serve(&mut st, &stop)?;
            client
                .join()
                .map_err(|_| anyhow::anyhow!("client panicked"))??;
            drop(st);
            drop(peer);
            served
        }
    };
    anyhow::ensure!(
        served as usize == args.conns,
        "served {served} of {}",
        args.conns
    );
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "tcp echo over {:?}: {} connections × {} bytes each way, every byte checked, in {secs:.2} s ({:.2} Gbit/s each way)",
        args.nic,
        args.conns,
        args.bytes,
        (args.conns * args.bytes) as f64 * 8.0 / secs / 1e9
    );
    Ok(())
}
