//! Arbitrary frames through a running stack: the input is split into frames
//! (2-byte big-endian length prefixes), injected on the in-memory wire,
//! polled, and read by two UDP sockets and a TCP connection. Before the
//! input, a TCP listener is set up on port 80 and a real connection from a
//! second stack (on the other end of the wire) is established; frames whose
//! first byte after the length is odd are "steered": their Ethernet, IP and
//! TCP addresses and ports are overwritten with the connection's 4-tuple
//! (or the listener's port) so that mutated segments land on the
//! connection's and the listener's channels, not only on the closed-port
//! path (their IPv4 length and TCP checksum are fixed up unless steering
//! bits 4 and 3 are set). Checks that nothing panics, every frame is accounted for, the
//! connection's invariants hold, and every buffer comes back.
//!
//! The wire is made once per process and reset before each run
//! (`WirePair::reset`), and the stacks are configured with small tables and
//! buffers: set-up, not the frames, is most of a run's cost.
#![no_main]

use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddrV4};

use lazynet::mem::Desc;
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::nic::Nic;
use lazynet::socket::UdpSocket;
use lazynet::stack::{Stack, StackConfig};
use libfuzzer_sys::fuzz_target;

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

thread_local! {
    /// The wire between runs.
    static WIRE: RefCell<Option<(WireEnd, WireEnd)>> = const { RefCell::new(None) };
}

/// The wire for one run: the last run's, reset, or a new one.
fn wire() -> (WireEnd, WireEnd) {
    match WIRE.with(|w| w.borrow_mut().take()) {
        Some((a, b)) => WirePair::reset(a, b).unwrap(),
        None => WirePair::new(WireConfig { buf_count: 512, ring_capacity: 64, ..WireConfig::default() }).unwrap(),
    }
}

fuzz_target!(|data: &[u8]| {
    let (a, b) = wire();
    let (a0, b0) = (a.free_buffers(), b.free_buffers());
    // A short TIME-WAIT keeps the closing phase (and each run) short; small
    // tables keep each stack's set-up and its periodic sweeps cheap, and
    // their limits reachable by a short input.
    let tcp = lazynet::proto::tcp::Config {
        time_wait: 2_000_000_000,
        send_buf: 4096,
        recv_buf: 4096,
        ..Default::default()
    };
    let cfg = |addr, seed| StackConfig {
        addr,
        seed,
        tcp,
        reasm_store: 1,
        reasm: lazynet::proto::ip::ReasmConfig { slots: 4, byte_budget: 8 * 1024, ..Default::default() },
        arp: lazynet::proto::arp::ArpConfig { capacity: 8, queue_per_addr: 8, queue_total: 16, ..Default::default() },
        tcp_listen: lazynet::proto::tcp::ListenConfig { backlog: 4, syn_queue: 8, ..Default::default() },
        tcp_time_wait_cap: 16,
        tcp_channel_cap: 32,
        udp_channel_cap: 32,
        control_cap: 32,
        fragment_cap: 32,
        ..StackConfig::default()
    };
    let mut sa = Stack::new(a, cfg(A, 2));
    let mut stack = Stack::new(b, cfg(B, 1));
    let s7 = UdpSocket::bind(&mut stack, SocketAddrV4::new(B, 7)).unwrap();
    let s9 = UdpSocket::bind(&mut stack, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9)).unwrap();
    let l = stack.tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), None, None).unwrap();
    let mut now = 1_000_000_000u64;
    let ca = sa.tcp_connect(SocketAddrV4::new(B, 80), None, now).unwrap();
    let mut cb = None;
    for _ in 0..10 {
        now += 1_000_000;
        sa.poll(now);
        sa.tcp_service(now, 256);
        stack.poll(now);
        stack.tcp_service(now, 256);
        if let Ok(h) = stack.listener_mut(l).accept(now) {
            cb = Some(h);
            break;
        }
    }
    let cb = cb.expect("connection established");
    let (la, _) = sa.tcp(ca).addrs().unwrap();
    let mut rest = data;
    let mut buf = [0u8; 2048];
    while rest.len() >= 3 {
        let len = (u16::from_be_bytes([rest[0], rest[1]]) as usize).min(rest.len() - 3).min(2048);
        let steer = rest[2];
        let frame = &rest[3..3 + len];
        rest = &rest[3 + len..];
        let mut bi = [0u32];
        let a = sa.nic_mut();
        if a.alloc(&mut bi) == 1 {
            let f = &mut a.buffers_mut().buf_mut(bi[0]).unwrap()[..len];
            f.copy_from_slice(frame);
            if steer & 1 == 1 && len >= 38 {
                f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
                f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
                f[12..14].copy_from_slice(&[8, 0]);
                let ihl = ((f[14] & 0x0f) as usize * 4).max(20);
                f[14 + 9] = 6;
                f[14 + 12..14 + 16].copy_from_slice(&A.octets());
                f[14 + 16..14 + 20].copy_from_slice(&B.octets());
                if len >= 14 + ihl + 4 {
                    // Bit 1: the listener (any source port), else the connection.
                    if steer & 2 == 0 {
                        f[14 + ihl..14 + ihl + 2].copy_from_slice(&la.port().to_be_bytes());
                    }
                    f[14 + ihl + 2..14 + ihl + 4].copy_from_slice(&80u16.to_be_bytes());
                }
                if steer & 16 == 0 {
                    // Consistent IPv4 total length.
                    f[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
                }
                if steer & 8 == 0 && len >= 14 + ihl + 20 {
                    // A valid TCP checksum, so the segment reaches the protocol.
                    use lazynet::wire::checksum::{fold, partial, pseudo_header_ipv4};
                    let t = &mut f[14 + ihl..];
                    t[16..18].copy_from_slice(&[0, 0]);
                    let c = !fold(partial(t, pseudo_header_ipv4(A, B, 6, t.len() as u16)));
                    t[16..18].copy_from_slice(&c.to_be_bytes());
                }
                if steer & 4 == 0 {
                    // Fix the IPv4 header checksum (over the header present).
                    let h = 14 + ihl.min(len - 14);
                    f[24..26].copy_from_slice(&[0, 0]);
                    let c = lazynet::wire::checksum::checksum(&f[14..h]);
                    f[24..26].copy_from_slice(&c.to_be_bytes());
                }
            }
            if a.send(&[Desc::new(bi[0], len as u16)]) == 0 {
                a.release(&[Desc::new(bi[0], 0)]);
            }
        }
        now += 7_000_000;
        stack.poll(now);
        stack.tcp_service(now, 256);
        sa.poll(now);
        sa.tcp_service(now, 256);
        let _ = s7.recv_from(&mut stack, &mut buf);
        let _ = s9.recv_from(&mut stack, &mut buf);
        let _ = stack.tcp_mut(cb).recv(&mut buf, now);
        let _ = stack.tcp_mut(cb).send(&buf[..64], now);
        let _ = sa.tcp_mut(ca).recv(&mut buf, now);
        let _ = sa.tcp_mut(ca).send(&buf[..100], now);
        if let Ok(r) = stack.tcp(cb).inspect(|c| c.check_invariants()) {
            r.unwrap();
        }
        if let Ok(h) = stack.listener_mut(l).accept(now) {
            let _ = stack.tcp_mut(h).close(now);
        }
    }
    let _ = sa.tcp_mut(ca).close(now);
    let _ = stack.tcp_mut(cb).close(now);
    stack.listener_mut(l).close(now).unwrap();
    for _ in 0..1000 {
        now += 1_000_000_000;
        sa.poll(now);
        sa.tcp_service(now, 256);
        stack.poll(now);
        stack.tcp_service(now, 256);
        if sa.tcp_connections() + stack.tcp_connections() == 0 {
            break;
        }
    }
    while s7.recv_from(&mut stack, &mut buf).is_ok() || s9.recv_from(&mut stack, &mut buf).is_ok() {}
    for s in [&sa, &stack] {
        let st = s.stats();
        assert_eq!(st.frames_accounted() + s.queued_frames() as u64, st.rx_frames);
    }
    assert_eq!((sa.tcp_connections(), stack.tcp_connections()), (0, 0), "connections left");
    s7.close(&mut stack).unwrap();
    s9.close(&mut stack).unwrap();
    for _ in 0..4 {
        now += 1_000_000_000;
        sa.poll(now);
        stack.poll(now);
    }
    sa.nic_mut().reclaim();
    stack.nic_mut().reclaim();
    assert_eq!((sa.nic().free_buffers(), stack.nic().free_buffers()), (a0, b0), "buffers leaked");
    WIRE.with(|w| *w.borrow_mut() = Some((sa.into_nic(), stack.into_nic())));
});
