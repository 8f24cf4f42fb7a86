//! hyper serving HTTP/1.1 on lazynet's async sockets.
//!
//! ```text
//! cargo run --release --example hyper_server                  # the in-memory wire
//! sudo cargo run --release --example hyper_server -- --nic tap    # or xdp
//! ```
//!
//! `GET /N` answers N bytes of a known pattern. On the wire, hyper's own
//! client on a second lazynet stack in the same runtime makes keep-alive
//! requests over several connections at once; on `tap`/`xdp`, curl in a
//! namespace the example creates fetches through the Linux kernel's TCP
//! (several URLs per curl, so one connection carries them all). Every body
//! is checked; the example exits 0 only if all were right.

#[path = "../../lazynet/examples/common/mod.rs"]
mod common;

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use common::NicKind;
use http_body_util::{BodyExt, Empty, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use lazynet::nic::wirepair::{WireConfig, WirePair};
use lazynet::nic::Nic;
use lazynet::stack::Stack;
use lazynet_tokio::{Net, TcpListener, TcpStream};

#[derive(Parser)]
struct Args {
    /// Where the server's stack runs.
    #[arg(long, value_enum, default_value = "wire")]
    nic: NicKind,
    /// Connections at once (wire) or curl processes one after the other.
    #[arg(long, default_value_t = 4)]
    conns: usize,
    /// Requests per connection.
    #[arg(long, default_value_t = 500)]
    requests: usize,
}

const PORT: u16 = 80;

/// The body of `GET /N`.
fn body(n: usize) -> Vec<u8> {
    common::pattern(0, n, 0x5a)
}

/// A different size for every request, up to 64 KiB.
fn size_of(i: usize) -> usize {
    (i * 7919) % 65536
}

async fn answer(req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let n = req.uri().path()[1..].parse().unwrap_or(0).min(1 << 20);
    Ok(Response::new(Full::new(Bytes::from(body(n)))))
}

/// Accepts and serves connections (each on a task of its own) until
/// `conns` have been served to their end.
async fn serve(net: Net, conns: usize) -> anyhow::Result<()> {
    let l = TcpListener::bind(&net, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT).into())?;
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let (s, _) = l.accept().await?;
        s.set_nodelay(true)?;
        tasks.push(tokio::task::spawn_local(async move {
            hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(s), hyper::service::service_fn(answer))
                .await
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// hyper's client: `requests` keep-alive requests on one connection.
async fn client(net: Net, dst: SocketAddr, first: usize, requests: usize) -> anyhow::Result<()> {
    let s = TcpStream::connect(&net, dst).await?;
    s.set_nodelay(true)?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s)).await?;
    let conn = tokio::task::spawn_local(conn);
    for i in first..first + requests {
        let n = size_of(i);
        let req = Request::get(format!("/{n}"))
            .header("host", "lazynet")
            .body(Empty::<Bytes>::new())?;
        let res = send.send_request(req).await?;
        anyhow::ensure!(res.status() == 200, "status {}", res.status());
        let got = res.into_body().collect().await?.to_bytes();
        anyhow::ensure!(
            got[..] == body(n)[..],
            "request {i}: body of {} bytes wrong",
            got.len()
        );
    }
    drop(send);
    conn.await??;
    Ok(())
}

/// Spawns the driver of `stack`; returns its sockets.
fn start<N: Nic + 'static>(stack: Stack<N>) -> anyhow::Result<Net> {
    let (net, driver) = lazynet_tokio::new(stack)?;
    tokio::task::spawn_local(async move { driver.run().await });
    Ok(net)
}

/// curl in namespace `ns`: `requests` URLs on one command line (one
/// connection, kept alive), each body compared with what it must be.
fn curl(ns: &str, ours: Ipv4Addr, first: usize, requests: usize) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("lazynet-hyper-{}-{first}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut cmd = std::process::Command::new("ip");
    cmd.args([
        "netns",
        "exec",
        ns,
        "curl",
        "-sS",
        "--fail",
        "--max-time",
        "20",
    ]);
    for i in first..first + requests {
        cmd.arg(format!("http://{ours}:{PORT}/{}", size_of(i)));
        cmd.arg("-o").arg(dir.join(i.to_string()));
    }
    let out = cmd.output()?;
    let r = (|| {
        anyhow::ensure!(
            out.status.success(),
            "curl: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for i in first..first + requests {
            let got = std::fs::read(dir.join(i.to_string()))?;
            anyhow::ensure!(
                got == body(size_of(i)),
                "request {i}: body of {} bytes wrong",
                got.len()
            );
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    let t0 = Instant::now();
    match args.nic {
        NicKind::Wire => local.block_on(&rt, async {
            let (a, b) = WirePair::new(WireConfig {
                buf_count: 4096,
                ..WireConfig::default()
            })?;
            let server_net = start(Stack::new(
                b,
                common::config(common::WIRE_OURS, common::seed()),
            ))?;
            let client_net = start(Stack::new(
                a,
                common::config(common::WIRE_PEER, common::seed()),
            ))?;
            let server = tokio::task::spawn_local(serve(server_net, args.conns));
            let dst = SocketAddrV4::new(common::WIRE_OURS, PORT).into();
            let clients: Vec<_> = (0..args.conns)
                .map(|c| {
                    let net = client_net.clone();
                    tokio::task::spawn_local(client(net, dst, c * args.requests, args.requests))
                })
                .collect();
            for c in clients {
                c.await??;
            }
            tokio::time::timeout(Duration::from_secs(10), server).await???;
            anyhow::Ok(())
        })?,
        kind => {
            let (stack, peer) = common::kernel_peer(kind, 43)?;
            let (ns, ours, conns, requests) =
                (peer.ns.clone(), peer.ours, args.conns, args.requests);
            let curls = std::thread::spawn(move || -> anyhow::Result<()> {
                for c in 0..conns {
                    curl(&ns, ours, c * requests, requests)?;
                }
                Ok(())
            });
            local.block_on(&rt, async {
                let net = start(stack)?;
                tokio::time::timeout(Duration::from_secs(120), serve(net, args.conns)).await??;
                anyhow::Ok(())
            })?;
            curls
                .join()
                .map_err(|_| anyhow::anyhow!("curl thread panicked"))??;
            drop(local);
            drop(peer);
        }
    }
    println!(
        "hyper over {:?}: {} connections × {} keep-alive requests of 0..64 KiB, every body checked, in {:.2} s",
        args.nic,
        args.conns,
        args.requests,
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}
