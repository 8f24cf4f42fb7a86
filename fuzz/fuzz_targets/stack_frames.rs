//! Arbitrary frames through a running stack: the input is split into frames
//! (2-byte big-endian length prefixes) and injected from the raw other end
//! of the in-memory wire into a stack with two UDP sockets (ports 7 and 9,
//! one on its address, one on any) and a TCP listener on port 80. Frames
//! whose first byte after the length is odd are "steered" onto the
//! listener: their Ethernet, IP addresses and destination port are written
//! over, the lengths and checksums fixed up unless steering bits 4, 3 and 2
//! say not to, so mutated SYNs, ACKs and data reach the listener's SYN
//! queue, cookies and accept path; everything else reaches the classifier,
//! the control and fragment channels, UDP and closed ports as it is. After
//! each frame the stack polls and services, the sockets read, connections
//! the listener completes are accepted and reset, and what the stack sent
//! is read and released on the other end. Checks that nothing panics,
//! every frame is accounted for, no connection is left after the listener
//! closes, and every buffer comes back.
//!
//! One stack, no handshake: a run costs a fraction of `stack_conn`'s, which
//! fuzzes an established connection.
#![no_main]

use std::net::Ipv4Addr;

use lazynet::mem::Desc;
use lazynet::nic::wirepair::WireEnd;
use lazynet::nic::Nic;
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fuzz_target!(|data: &[u8]| {
    let (mut raw, b) = common::wire();
    let (a0, b0) = (raw.free_buffers(), b.free_buffers());
    let mut srv = common::Server::new(b, B);
    let l = srv.listener;
    let mut now = 1_000_000_000u64;
    let mut buf = [0u8; 2048];
    for (steer, frame) in common::frames(data) {
        common::inject(&mut raw, frame, steer, A, B, None);
        now += 7_000_000;
        srv.stack.poll(now);
        srv.stack.tcp_service(now, 256);
        srv.read_udp(&mut buf);
        if let Ok(h) = srv.stack.listener_mut(l).accept(now) {
            let _ = srv.stack.tcp_mut(h).abort(now);
        }
        // What the stack sent (replies, SYN-ACKs, RSTs) goes back unread.
        drain(&mut raw);
    }
    srv.stack.listener_mut(l).close(now).unwrap();
    assert_eq!(srv.stack.tcp_connections(), 0, "connections left");
    let mut stack = srv.close_udp(&mut buf);
    // Frames waiting for ARP are given up after its retries (a few
    // seconds); most runs have none and stop at once.
    for _ in 0..8 {
        drain(&mut raw);
        raw.reclaim();
        stack.nic_mut().reclaim();
        if (raw.free_buffers(), stack.nic().free_buffers()) == (a0, b0) {
            break;
        }
        now += 1_000_000_000;
        stack.poll(now);
    }
    assert_eq!(
        (raw.free_buffers(), stack.nic().free_buffers()),
        (a0, b0),
        "buffers leaked"
    );
    common::keep_wire(raw, stack.into_nic());
});

/// Reads and releases everything waiting at `end`, unread.
fn drain(end: &mut WireEnd) {
    let mut got = [Desc::default(); 64];
    loop {
        let n = end.recv(&mut got);
        if n == 0 {
            break;
        }
        end.release(&got[..n]);
    }
}
