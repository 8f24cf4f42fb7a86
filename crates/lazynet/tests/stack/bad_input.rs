//! Hostile input through a running stack: random and mutated frames
//! (truncated headers, bad lengths, bad checksums, IP options, overlapping and
//! endless fragments, broadcast floods). No panic, bounded memory, every frame
//! accounted for, and every buffer back where it belongs at the end.

use std::net::{Ipv4Addr, SocketAddrV4};

use lazynet::demux::{CONTROL, FRAGMENT};
use lazynet::mem::Desc;
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::nic::Nic;
use lazynet::socket::UdpSocket;
use lazynet::stack::{ReceiveMode, Stack, StackConfig};
use lazynet::wire::checksum;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use lazynet::testkit::{inject, A, B, MAC_A, MAC_B};

fn frames_total() -> usize {
    if cfg!(debug_assertions) {
        100_000
    } else {
        400_000
    }
}

/// A valid-looking Ethernet/IPv4 frame with `proto` and transport bytes.
fn ipv4(
    rng: &mut ChaCha8Rng,
    proto: u8,
    frag: u16,
    opts: usize,
    l4: &[u8],
    dst_mac: [u8; 6],
    dst: Ipv4Addr,
) -> Vec<u8> {
    let ihl = 20 + opts;
    let mut f = vec![0u8; 14 + ihl + l4.len()];
    f[0..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&MAC_A);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..];
    ip[0] = 0x40 | (ihl / 4) as u8;
    ip[2..4].copy_from_slice(&((ihl + l4.len()) as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&(rng.next_u32() as u16 & 0x3f).to_be_bytes());
    ip[6..8].copy_from_slice(&frag.to_be_bytes());
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&A.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    for b in &mut ip[20..ihl] {
        *b = rng.random();
    }
    let c = checksum::checksum(&ip[..ihl]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    ip[ihl..].copy_from_slice(l4);
    f
}

fn udp(rng: &mut ChaCha8Rng, dport: u16, len: usize) -> Vec<u8> {
    let mut u = vec![0u8; 8 + len];
    u[0..2].copy_from_slice(&1234u16.to_be_bytes());
    u[2..4].copy_from_slice(&dport.to_be_bytes());
    u[4..6].copy_from_slice(&((8 + len) as u16).to_be_bytes());
    rng.fill_bytes(&mut u[8..]);
    let s = checksum::partial(&u, checksum::pseudo_header_ipv4(A, B, 17, (8 + len) as u16));
    let c = match !checksum::fold(s) {
        0 => 0xffff,
        c => c,
    };
    u[6..8].copy_from_slice(&c.to_be_bytes());
    u
}

fn arp(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut f = vec![0u8; 42];
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&MAC_A);
    f[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    let a = &mut f[14..];
    a[0..8].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, rng.random_range(0..4)]);
    a[8..14].copy_from_slice(&MAC_A);
    // Spoofed senders: many addresses in our subnet and beyond.
    a[14..18].copy_from_slice(&[10, 0, rng.random_range(0..2), rng.random()]);
    a[24..28].copy_from_slice(&B.octets());
    f
}

/// A valid datagram to port 7 in two fragments, sometimes reversed.
fn fragmented(rng: &mut ChaCha8Rng) -> Vec<Vec<u8>> {
    let l4 = udp(rng, 7, 2000);
    let ident = [rng.random::<u8>() | 0x80, rng.random()];
    let mut f0 = ipv4(rng, 17, 0x2000, 0, &l4[..1480], MAC_B, B);
    let mut f1 = ipv4(rng, 17, 1480 / 8, 0, &l4[1480..], MAC_B, B);
    for f in [&mut f0, &mut f1] {
        f[18..20].copy_from_slice(&ident);
        f[24..26].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
    }
    if rng.random_bool(0.5) {
        vec![f0, f1]
    } else {
        vec![f1, f0]
    }
}

/// One hostile frame (or a valid fragment pair).
fn frames(rng: &mut ChaCha8Rng) -> Vec<Vec<u8>> {
    if rng.random_bool(0.02) {
        return fragmented(rng);
    }
    vec![frame(rng)]
}

fn frame(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let kind = rng.random_range(0..12);
    let mut f = match kind {
        // Valid UDP to bound and unbound ports.
        0 | 1 => {
            let port = if kind == 0 {
                7
            } else {
                rng.random_range(1..100)
            };
            let len = rng.random_range(0..1400);
            let l4 = udp(rng, port, len);
            ipv4(rng, 17, 0, 0, &l4, MAC_B, B)
        }
        // ICMP echo requests (some with bad checksums after mutation).
        2 => {
            let mut m = vec![8u8, 0, 0, 0, 0, 1, 0, 1];
            m.extend((0..rng.random_range(0..64)).map(|_| rng.random::<u8>()));
            let c = checksum::checksum(&m);
            m[2..4].copy_from_slice(&c.to_be_bytes());
            ipv4(rng, 1, 0, 0, &m, MAC_B, B)
        }
        3 => arp(rng),
        // Fragments: overlapping, endless, out of range.
        4 | 5 => {
            let off = rng.random_range(0..8192u16); // in 8-byte units
            let more = if rng.random_bool(0.7) { 0x2000 } else { 0 };
            let len = rng.random_range(1..1400) & !7;
            let l4: Vec<u8> = (0..len.max(8)).map(|_| rng.random()).collect();
            ipv4(rng, 17, more | (off & 0x1fff), 0, &l4, MAC_B, B)
        }
        // IP options, valid and garbage.
        6 => {
            let l4 = udp(rng, 7, 32);
            let opts = 4 * rng.random_range(1..=10);
            ipv4(rng, 17, 0, opts, &l4, MAC_B, B)
        }
        // Broadcast floods.
        7 => {
            let port = rng.random_range(1..100);
            let l4 = udp(rng, port, 16);
            let dst = if rng.random_bool(0.5) {
                Ipv4Addr::BROADCAST
            } else {
                Ipv4Addr::new(10, 0, 0, 255)
            };
            let proto = if rng.random_bool(0.5) { 17 } else { 1 };
            ipv4(rng, proto, 0, 0, &l4, [0xff; 6], dst)
        }
        // Other protocols, other hosts.
        8 => {
            let l4: Vec<u8> = (0..40).map(|_| rng.random()).collect();
            let (proto, host) = (rng.random(), rng.random());
            ipv4(rng, proto, 0, 0, &l4, MAC_B, Ipv4Addr::new(10, 0, 0, host))
        }
        // Pure noise.
        _ => (0..rng.random_range(0..1600))
            .map(|_| rng.random())
            .collect(),
    };
    // Mutations.
    match rng.random_range(0..8) {
        0 => {
            let n = rng.random_range(0..=f.len());
            f.truncate(n);
        }
        1 if f.len() > 14 => {
            for _ in 0..rng.random_range(1..4) {
                let i = rng.random_range(14..f.len());
                f[i] ^= 1 << rng.random_range(0..8);
            }
        }
        2 if f.len() > 18 => {
            let v: u16 = rng.random();
            f[16..18].copy_from_slice(&v.to_be_bytes()); // IP total length
        }
        3 if f.len() > 14 => f[14] = rng.random(), // version / IHL
        4 if f.len() > 34 + 6 => {
            let v: u16 = rng.random();
            f[34 + 4..34 + 6].copy_from_slice(&v.to_be_bytes()); // UDP length
        }
        _ => {}
    }
    f.truncate(2048);
    f
}

fn drain(end: &mut WireEnd) -> usize {
    let mut ds = [Desc::default(); 64];
    let mut total = 0;
    loop {
        let n = end.recv(&mut ds);
        end.release(&ds[..n]);
        total += n;
        if n == 0 {
            return total;
        }
    }
}

#[test]
fn hostile_frames_never_hurt_the_stack() {
    hostile_frames_in_mode(ReceiveMode::SoftLrp, frames_total());
}

/// The eager modes run the same protocol code in the receive loop; the
/// same hostile mix must hold the same invariants there (shorter runs).
#[test]
fn hostile_frames_never_hurt_the_stack_in_the_eager_modes() {
    for mode in [ReceiveMode::Eager, ReceiveMode::EarlyDemux] {
        hostile_frames_in_mode(mode, frames_total() / 4);
    }
}

fn hostile_frames_in_mode(mode: ReceiveMode, total: usize) {
    let (mut a, b) = WirePair::new(WireConfig {
        buf_count: 2048,
        ..WireConfig::default()
    })
    .unwrap();
    let cfg = StackConfig {
        addr: B,
        prefix_len: 24,
        seed: 1,
        mode,
        ..StackConfig::default()
    };
    let mut stack = Stack::new(b, cfg);
    let s7 = UdpSocket::bind_with_capacity(&mut stack, SocketAddrV4::new(B, 7), 64).unwrap();
    let s9 = UdpSocket::bind(&mut stack, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9)).unwrap();
    let b_free0 = stack.nic().free_buffers();
    let a_free0 = a.free_buffers();
    let mut rng = ChaCha8Rng::seed_from_u64(0x1a2b);
    let mut buf = vec![0u8; 65536];
    let (mut sent, mut now) = (0usize, 0u64);
    let mut max_queued = 0;
    while sent < total {
        for _ in 0..32 {
            for f in frames(&mut rng) {
                if inject(&mut a, &f) {
                    sent += 1;
                }
            }
        }
        now += 100_000; // 100 µs of virtual time per batch
        stack.poll(now);
        // The application reads only sometimes, so channels fill and drop.
        if rng.random_bool(0.3) {
            for _ in 0..rng.random_range(0..48) {
                let _ = s7.recv_from(&mut stack, &mut buf);
                let _ = s9.recv_from(&mut stack, &mut buf);
            }
        }
        drain(&mut a);
        let st = stack.stats();
        let queued = stack.queued_frames();
        max_queued = max_queued.max(queued);
        assert_eq!(
            st.frames_accounted() + queued as u64,
            st.rx_frames,
            "every frame accounted for"
        );
    }
    // Bounded: channels never beyond their capacities.
    let d = stack.demux();
    let cap =
        d.channel(CONTROL).unwrap().capacity() + d.channel(FRAGMENT).unwrap().capacity() + 64 + 256;
    assert!(max_queued <= cap, "{max_queued} > {cap}");
    // Let reassembly time out, read everything, close.
    for _ in 0..20 {
        now += 1_000_000_000;
        stack.poll(now);
    }
    while s7.recv_from(&mut stack, &mut buf).is_ok() {}
    while s9.recv_from(&mut stack, &mut buf).is_ok() {}
    let st = stack.stats();
    assert_eq!(st.rx_frames as usize, sent);
    assert_eq!(st.frames_accounted(), st.rx_frames);
    s7.close(&mut stack).unwrap();
    s9.close(&mut stack).unwrap();
    stack.poll(now);
    drain(&mut a);
    a.reclaim();
    stack.nic_mut().reclaim();
    assert_eq!(a.free_buffers(), a_free0, "A's buffers all came back");
    assert_eq!(
        stack.nic().free_buffers(),
        b_free0,
        "B's buffers all came back"
    );
    println!("{sent} frames\n{st}");
    assert!(
        st.udp_delivered > 1000 && st.demux.dropped() > 10_000 && st.reassembled > 0,
        "the mix exercised every path"
    );
}

/// `ni-lrp`: the same hostile mix classified on the NI (engine stepped on
/// this thread, so the run is deterministic). The same invariants, and the
/// host classifies nothing.
#[test]
fn hostile_frames_never_hurt_the_stack_in_ni_lrp() {
    let total = frames_total() / 4;
    let (mut a, b) = WirePair::new(WireConfig {
        buf_count: 2048,
        ..WireConfig::default()
    })
    .unwrap();
    let b_free0 = b.free_buffers();
    let a_free0 = a.free_buffers();
    let cfg = StackConfig {
        addr: B,
        prefix_len: 24,
        seed: 1,
        ..StackConfig::default()
    };
    let (mut stack, mut ni) = Stack::new_ni_lrp(b, cfg);
    let s7 = UdpSocket::bind_with_capacity(&mut stack, SocketAddrV4::new(B, 7), 64).unwrap();
    let s9 = UdpSocket::bind(&mut stack, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9)).unwrap();
    ni.step();
    let mut rng = ChaCha8Rng::seed_from_u64(0x1a2b);
    let mut buf = vec![0u8; 65536];
    let (mut sent, mut now) = (0usize, 0u64);
    let mut max_queued = 0;
    while sent < total {
        for _ in 0..32 {
            for f in frames(&mut rng) {
                if inject(&mut a, &f) {
                    sent += 1;
                }
            }
        }
        now += 100_000;
        ni.step();
        stack.poll(now);
        ni.step();
        if rng.random_bool(0.3) {
            for _ in 0..rng.random_range(0..48) {
                let _ = s7.recv_from(&mut stack, &mut buf);
                let _ = s9.recv_from(&mut stack, &mut buf);
            }
        }
        drain(&mut a);
        let st = stack.stats();
        let queued = stack.queued_frames();
        max_queued = max_queued.max(queued);
        assert_eq!(
            st.frames_accounted() + queued as u64,
            st.rx_frames,
            "every frame accounted for"
        );
    }
    // Bounded: each channel holds its local slots plus its inbound ring.
    let d = stack.demux();
    let cap = 2
        * (d.channel(CONTROL).unwrap().capacity()
            + d.channel(FRAGMENT).unwrap().capacity()
            + 64
            + 256);
    assert!(max_queued <= cap, "{max_queued} > {cap}");
    assert_eq!(
        stack.demux().stats().frames,
        0,
        "the host classified nothing"
    );
    for _ in 0..20 {
        now += 1_000_000_000;
        // Until the wire is empty: the NI takes a batch per step.
        for _ in 0..64 {
            if ni.step() == 0 {
                break;
            }
            stack.poll(now);
        }
        stack.poll(now);
    }
    while s7.recv_from(&mut stack, &mut buf).is_ok() {}
    while s9.recv_from(&mut stack, &mut buf).is_ok() {}
    let st = stack.stats();
    assert_eq!(st.rx_frames as usize, sent);
    assert_eq!(st.frames_accounted(), st.rx_frames);
    s7.close(&mut stack).unwrap();
    s9.close(&mut stack).unwrap();
    let mut ok = false;
    for _ in 0..8 {
        ni.step();
        stack.poll(now);
        if stack.ni_quiesce() {
            ok = true;
            break;
        }
    }
    assert!(ok, "quiesced");
    let mut nic = ni.finish();
    drain(&mut a);
    a.reclaim();
    nic.reclaim();
    assert_eq!(a.free_buffers(), a_free0, "A's buffers all came back");
    assert_eq!(nic.free_buffers(), b_free0, "B's buffers all came back");
    println!("{sent} frames\n{st}");
    assert!(
        st.udp_delivered > 100 && st.demux.dropped() > 1000 && st.reassembled > 0,
        "the mix exercised every path"
    );
}
