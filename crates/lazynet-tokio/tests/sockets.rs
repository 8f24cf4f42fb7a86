//! The async sockets through two stacks on the in-memory wire, both driven
//! by one current-thread runtime: TCP echo (every byte checked, both
//! directions at once), many connections at once, connect refused, UDP
//! echo, drop as close, and hyper serving HTTP/1.1 to hyper's client.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::stack::{Stack, StackConfig};
use lazynet_tokio::{Driver, Net, TcpListener, TcpStream, UdpSocket};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn stack(end: WireEnd, addr: Ipv4Addr, seed: u64) -> Stack<WireEnd> {
    let mut cfg = StackConfig {
        addr,
        seed,
        ..StackConfig::default()
    };
    cfg.tcp.send_buf = 256 * 1024;
    cfg.tcp.recv_buf = 256 * 1024;
    Stack::new(end, cfg)
}

/// Runs `f` with the sockets of A and B, each stack driven by its own
/// task, on one current-thread runtime; fails after `secs`.
fn with_pair<F, Fut>(secs: u64, f: F)
where
    F: FnOnce(Net, Net) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    with_pair_cfg(secs, lazynet_tokio::DriverConfig::default(), f)
}

/// [`with_pair`] with drivers configured by `cfg`.
fn with_pair_cfg<F, Fut>(secs: u64, cfg: lazynet_tokio::DriverConfig, f: F)
where
    F: FnOnce(Net, Net) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let (a, b) = WirePair::new(WireConfig {
            buf_count: 4096,
            ..WireConfig::default()
        })
        .unwrap();
        let (na, da) = lazynet_tokio::with_config(stack(a, A, 1), cfg).unwrap();
        let (nb, db) = lazynet_tokio::with_config(stack(b, B, 2), cfg).unwrap();
        let run =
            |d: Driver<WireEnd>| tokio::task::spawn_local(async move { d.run().await.unwrap() });
        let (ta, tb) = (run(da), run(db));
        tokio::time::timeout(Duration::from_secs(secs), f(na, nb))
            .await
            .expect("bounded");
        ta.abort();
        tb.abort();
    });
}

fn addr(ip: Ipv4Addr, port: u16) -> SocketAddr {
    SocketAddrV4::new(ip, port).into()
}

fn pattern(i: usize, salt: u8) -> u8 {
    (i % 251) as u8 ^ salt
}

async fn echo_server(l: TcpListener, conns: usize) {
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let (mut s, _) = l.accept().await.unwrap();
        tasks.push(tokio::task::spawn_local(async move {
            let mut buf = vec![0u8; 16384];
            loop {
                let n = s.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                s.write_all(&buf[..n]).await.unwrap();
            }
            s.shutdown().await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// Sends `len` bytes and reads them back at the same time; checks each.
async fn echo_client(net: &Net, len: usize, salt: u8) {
    let s = TcpStream::connect(net, addr(B, 7)).await.unwrap();
    let (mut r, mut w) = tokio::io::split(s);
    let writer = async move {
        let data: Vec<u8> = (0..len).map(|i| pattern(i, salt)).collect();
        for chunk in data.chunks(10_000) {
            w.write_all(chunk).await.unwrap();
        }
        w.shutdown().await.unwrap();
        w
    };
    let reader = async move {
        let mut got = 0;
        let mut buf = vec![0u8; 65536];
        loop {
            let n = r.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            for (k, &b) in buf[..n].iter().enumerate() {
                assert_eq!(b, pattern(got + k, salt), "byte {}", got + k);
            }
            got += n;
        }
        got
    };
    let (_w, got) = tokio::join!(writer, reader);
    assert_eq!(got, len);
}

mod tcp {
    use super::*;

    #[test]
    fn echo_of_a_megabyte_both_ways_at_once() {
        with_pair(30, |na, nb| async move {
            let l = TcpListener::bind(&nb, addr(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
            let server = tokio::task::spawn_local(echo_server(l, 1));
            echo_client(&na, 1 << 20, 0).await;
            server.await.unwrap();
        });
    }

    /// Drivers that sleep as soon as they are idle: the reading half's
    /// reads process the ACKs the writing half (another task) waits for,
    /// and only a turn of the sleeping driver reports them.
    #[test]
    fn echo_with_drivers_that_sleep_at_once() {
        let cfg = lazynet_tokio::DriverConfig {
            spin_ns: Some(0),
            ..lazynet_tokio::DriverConfig::default()
        };
        with_pair_cfg(30, cfg, |na, nb| async move {
            let l = TcpListener::bind(&nb, addr(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
            let server = tokio::task::spawn_local(echo_server(l, 2));
            let c = tokio::task::spawn_local({
                let na = na.clone();
                async move { echo_client(&na, 1 << 20, 1).await }
            });
            echo_client(&na, 1 << 20, 2).await;
            c.await.unwrap();
            server.await.unwrap();
        });
    }

    #[test]
    fn many_connections_at_once() {
        with_pair(30, |na, nb| async move {
            let l = TcpListener::bind(&nb, addr(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
            let server = tokio::task::spawn_local(echo_server(l, 16));
            let clients: Vec<_> = (0..16u8)
                .map(|i| {
                    let na = na.clone();
                    tokio::task::spawn_local(async move { echo_client(&na, 50_000, i).await })
                })
                .collect();
            for c in clients {
                c.await.unwrap();
            }
            server.await.unwrap();
        });
    }

    #[test]
    fn connecting_to_a_closed_port_is_refused() {
        with_pair(10, |na, _nb| async move {
            let e = TcpStream::connect(&na, addr(B, 9)).await.unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
        });
    }

    #[test]
    fn dropping_the_stream_closes_it_and_the_peer_reads_the_end() {
        with_pair(10, |na, nb| async move {
            let l = TcpListener::bind(&nb, addr(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
            let c = TcpStream::connect(&na, addr(B, 7)).await.unwrap();
            let (mut s, peer) = l.accept().await.unwrap();
            assert_eq!(peer, c.local_addr().unwrap());
            let mut c = c;
            c.write_all(b"last words").await.unwrap();
            drop(c);
            let mut got = Vec::new();
            s.read_to_end(&mut got).await.unwrap();
            assert_eq!(got, b"last words");
        });
    }

    #[test]
    fn a_read_waits_for_data_that_comes_later() {
        with_pair(10, |na, nb| async move {
            let l = TcpListener::bind(&nb, addr(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
            let mut c = TcpStream::connect(&na, addr(B, 7)).await.unwrap();
            let (mut s, _) = l.accept().await.unwrap();
            let reader = tokio::task::spawn_local(async move {
                let mut b = [0u8; 5];
                s.read_exact(&mut b).await.unwrap();
                b
            });
            // The reader is parked; the driver sleeps until the write.
            tokio::time::sleep(Duration::from_millis(50)).await;
            c.write_all(b"later").await.unwrap();
            assert_eq!(&reader.await.unwrap(), b"later");
        });
    }
}

mod udp {
    use super::*;

    #[test]
    fn echo_of_datagrams() {
        with_pair(10, |na, nb| async move {
            let server = UdpSocket::bind(&nb, addr(B, 7)).unwrap();
            let client = UdpSocket::bind(&na, addr(A, 0)).unwrap();
            let echo = tokio::task::spawn_local(async move {
                let mut buf = [0u8; 2048];
                for _ in 0..100 {
                    let (n, from) = server.recv_from(&mut buf).await.unwrap();
                    server.send_to(&buf[..n], from).await.unwrap();
                }
            });
            let mut buf = [0u8; 2048];
            for i in 0..100u32 {
                let msg = format!("datagram {i}");
                client.send_to(msg.as_bytes(), addr(B, 7)).await.unwrap();
                let (n, from) = client.recv_from(&mut buf).await.unwrap();
                assert_eq!(from, addr(B, 7));
                assert_eq!(&buf[..n], msg.as_bytes());
            }
            echo.await.unwrap();
        });
    }
}

mod hyper_http1 {
    use super::*;
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper::{Request, Response};
    use hyper_util::rt::TokioIo;

    async fn hello(
        req: Request<hyper::body::Incoming>,
    ) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
        let n: usize = req.uri().path()[1..].parse().unwrap_or(0);
        let body: Vec<u8> = (0..n).map(|i| pattern(i, 0x33)).collect();
        Ok(Response::new(Full::new(Bytes::from(body))))
    }

    #[test]
    fn hyper_serves_keep_alive_requests_to_hyper_client() {
        with_pair(30, |na, nb| async move {
            let l = TcpListener::bind(&nb, addr(Ipv4Addr::UNSPECIFIED, 80)).unwrap();
            let server = tokio::task::spawn_local(async move {
                let (s, _) = l.accept().await.unwrap();
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), hyper::service::service_fn(hello))
                    .await
                    .unwrap();
            });
            let s = TcpStream::connect(&na, addr(B, 80)).await.unwrap();
            let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
                .await
                .unwrap();
            let conn = tokio::task::spawn_local(conn);
            for n in [0usize, 1, 1000, 100_000, 17] {
                let req = Request::get(format!("/{n}"))
                    .header("host", "b")
                    .body(http_body_util::Empty::<Bytes>::new())
                    .unwrap();
                let res = send.send_request(req).await.unwrap();
                assert_eq!(res.status(), 200);
                let body = res.into_body().collect().await.unwrap().to_bytes();
                assert_eq!(body.len(), n);
                assert!(body.iter().enumerate().all(|(i, &b)| b == pattern(i, 0x33)));
            }
            drop(send);
            conn.await.unwrap().unwrap();
            server.await.unwrap();
        });
    }
}
