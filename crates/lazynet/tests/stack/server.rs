//! The library's server loop through whole stacks: echo apps on B served
//! turn by turn, clients on A in virtual time; its bounds (connections at
//! once, the drain on stop).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::AtomicBool;

use lazynet::nic::wirepair::WireEnd;
use lazynet::proto::tcp::State;
use lazynet::server::{EchoApp, Server, ServerConfig};
use lazynet::socket::SocketError;
use lazynet::stack::{Stack, TcpStream};

use lazynet::testkit::{data, Pair, B, MS};

fn stacks() -> (Stack<WireEnd>, Stack<WireEnd>) {
    let p = Pair::new();
    (p.a, p.b)
}

/// `n` clients each send `len` bytes (varied per client) through B's
/// echo server and read them back; returns what each got and the server.
fn echo_through(n: usize, len: usize, cfg: ServerConfig) -> (Vec<Vec<u8>>, u64, u64) {
    let (mut sa, mut sb) = stacks();
    let l = sb
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7), None, None)
        .unwrap();
    let mut server = Server::new(&mut sb, l, EchoApp::default, cfg).unwrap();
    let mut now = 0;
    let clients: Vec<TcpStream> = (0..n)
        .map(|_| sa.tcp_connect(SocketAddrV4::new(B, 7), None, now).unwrap())
        .collect();
    let streams: Vec<Vec<u8>> = (0..n).map(|i| data(0, len, i as u8)).collect();
    let mut sent = vec![0usize; n];
    let mut got: Vec<Vec<u8>> = vec![Vec::new(); n];
    let mut buf = vec![0u8; 65536];
    for _ in 0..5000 {
        now += MS;
        sa.poll(now);
        sa.tcp_service(now, 1024);
        sb.poll(now);
        sb.tcp_service(now, 1024);
        server.turn(&mut sb);
        let mut done = true;
        for (i, &c) in clients.iter().enumerate() {
            // Once established: a close in SYN-SENT would delete the
            // connection (RFC 9293 §3.10.4).
            let up = sa.tcp_mut(c).state(now) == Ok(State::Established);
            if up && sent[i] < len {
                if let Ok(k) = sa.tcp_mut(c).send(&streams[i][sent[i]..], now) {
                    sent[i] += k;
                    if sent[i] == len {
                        sa.tcp_mut(c).shutdown(now).unwrap();
                    }
                }
            }
            loop {
                match sa.tcp_mut(c).recv(&mut buf, now) {
                    Ok(0) | Err(SocketError::WouldBlock) => break,
                    Ok(k) => got[i].extend_from_slice(&buf[..k]),
                    Err(_) => break,
                }
            }
            done &= got[i].len() == len || sa.tcp(c).error().ok().flatten().is_some();
        }
        if done && server.serving() == 0 {
            break;
        }
    }
    (got, server.served(), server.serving() as u64)
}

#[test]
fn echo_apps_return_every_byte_of_every_connection() {
    let len = 200_000; // staging buffers' worth each, several times
    let (got, served, open) = echo_through(4, len, ServerConfig::default());
    for (i, g) in got.iter().enumerate() {
        assert!(
            *g == data(0, len, i as u8),
            "connection {i}: {} bytes",
            g.len()
        );
    }
    assert_eq!((served, open), (4, 0), "all served, all closed at EOF");
}

#[test]
fn connections_beyond_the_cap_are_reset() {
    let cfg = ServerConfig {
        max_conns: 3,
        ..ServerConfig::default()
    };
    let (got, served, _) = echo_through(5, 1000, cfg);
    let full = (0..5).filter(|&i| got[i] == data(0, 1000, i as u8)).count();
    assert_eq!(served, 3);
    assert_eq!(full, 3, "three echoed, two reset");
}

#[test]
fn run_drains_then_returns_after_stop() {
    let (mut sa, mut sb) = stacks();
    let l = sb
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7), None, None)
        .unwrap();
    let cfg = ServerConfig {
        drain_ns: 50 * MS,
        ..ServerConfig::default()
    };
    let mut server = Server::new(&mut sb, l, EchoApp::default, cfg).unwrap();
    // A client that connects and then says nothing: open at the stop.
    let c = sa
        .tcp_connect(SocketAddrV4::new(B, 7), None, sa.now())
        .unwrap();
    for _ in 0..50 {
        let now = sa.now();
        sa.poll(now);
        sa.tcp_service(now, 64);
        let now = sb.now();
        sb.poll(now);
        sb.tcp_service(now, 64);
        server.turn(&mut sb);
        if server.serving() == 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(server.serving(), 1);
    let stop = AtomicBool::new(true);
    let t0 = std::time::Instant::now();
    let mut turns = 0u64;
    let r = server.run(&mut sb, &stop, |_, _| turns += 1);
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(5),
        "bounded drain"
    );
    assert!(turns > 0);
    assert_eq!((r.served, r.open_at_exit), (1, 1), "reset after the drain");
    let _ = c;
}
