//! Arbitrary frames against an established TCP connection: the input is
//! split into frames (2-byte big-endian length prefixes), injected on the
//! in-memory wire, polled, and read by two UDP sockets and the connection.
//! Before the input, a TCP listener is set up on port 80 and a real
//! connection from a second stack (on the other end of the wire) is
//! established; frames whose first byte after the length is odd are
//! "steered": their Ethernet, IP and TCP addresses and ports are overwritten
//! with the connection's 4-tuple (or, with bit 1, the listener's port) so
//! that mutated segments land on the connection's and the listener's
//! channels (their IPv4 length and TCP checksum are fixed up unless
//! steering bits 4, 3 and 2 say not to, as in `common::steer`). Both ends keep exchanging data between
//! the frames. Checks that nothing panics, every frame is accounted for,
//! the connection's invariants hold, all connections are gone after close
//! and TIME-WAIT, and every buffer comes back.
//!
//! Each run sets up two stacks and a handshake and tears them down, which
//! is most of its cost; `stack_frames` fuzzes the same frames against one
//! stack without a connection, many times faster.
#![no_main]

use std::net::{Ipv4Addr, SocketAddrV4};

use lazynet::stack::Stack;
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fuzz_target!(|data: &[u8]| {
    let (a, b) = common::wire();
    let (a0, b0) = (a.free_buffers(), b.free_buffers());
    let mut sa = Stack::new(a, common::config(A, 2));
    let mut srv = common::Server::new(b, B);
    let l = srv.listener;
    let mut now = 1_000_000_000u64;
    let ca = sa.tcp_connect(SocketAddrV4::new(B, 80), None, now).unwrap();
    let mut cb = None;
    for _ in 0..10 {
        now += 1_000_000;
        sa.poll(now);
        sa.tcp_service(now, 256);
        srv.stack.poll(now);
        srv.stack.tcp_service(now, 256);
        if let Ok(h) = srv.stack.listener_mut(l).accept(now) {
            cb = Some(h);
            break;
        }
    }
    let cb = cb.expect("connection established");
    let (la, _) = sa.tcp(ca).addrs().unwrap();
    let mut buf = [0u8; 2048];
    for (steer, frame) in common::frames(data) {
        // Bit 1: the listener (any source port), else the connection.
        let sport = (steer & 2 == 0).then_some(la.port());
        common::inject(sa.nic_mut(), frame, steer, A, B, sport);
        now += 7_000_000;
        srv.stack.poll(now);
        srv.stack.tcp_service(now, 256);
        sa.poll(now);
        sa.tcp_service(now, 256);
        srv.read_udp(&mut buf);
        let _ = srv.stack.tcp_mut(cb).recv(&mut buf, now);
        let _ = srv.stack.tcp_mut(cb).send(&buf[..64], now);
        let _ = sa.tcp_mut(ca).recv(&mut buf, now);
        let _ = sa.tcp_mut(ca).send(&buf[..100], now);
        if let Ok(r) = srv.stack.tcp(cb).inspect(|c| c.check_invariants()) {
            r.unwrap();
        }
        if let Ok(h) = srv.stack.listener_mut(l).accept(now) {
            let _ = srv.stack.tcp_mut(h).close(now);
        }
    }
    let _ = sa.tcp_mut(ca).close(now);
    let _ = srv.stack.tcp_mut(cb).close(now);
    srv.stack.listener_mut(l).close(now).unwrap();
    for _ in 0..1000 {
        now += 1_000_000_000;
        sa.poll(now);
        sa.tcp_service(now, 256);
        srv.stack.poll(now);
        srv.stack.tcp_service(now, 256);
        if sa.tcp_connections() + srv.stack.tcp_connections() == 0 {
            break;
        }
    }
    assert_eq!(
        (sa.tcp_connections(), srv.stack.tcp_connections()),
        (0, 0),
        "connections left"
    );
    common::check_accounting(&sa);
    let mut stack = srv.close_udp(&mut buf);
    for _ in 0..4 {
        now += 1_000_000_000;
        sa.poll(now);
        stack.poll(now);
    }
    sa.nic_mut().reclaim();
    stack.nic_mut().reclaim();
    assert_eq!(
        (sa.nic().free_buffers(), stack.nic().free_buffers()),
        (a0, b0),
        "buffers leaked"
    );
    common::keep_wire(sa.into_nic(), stack.into_nic());
});
