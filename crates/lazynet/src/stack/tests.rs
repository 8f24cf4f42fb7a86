//! Stack tests over the in-memory wire, with explicit time. Grouped by
//! protocol: ARP, ICMP, UDP receive (lazy), UDP send, fragments, sockets.

use std::net::{Ipv4Addr, SocketAddrV4};

use super::*;
use crate::nic::wirepair::{WireConfig, WireEnd, WirePair};
use crate::proto::ip::{ReasmConfig, ReasmKey};
use crate::socket::UdpSocket;
use crate::wire::checksum;
use crate::wire::ethernet::EthernetFrame;
use crate::wire::ethernet::{EthernetAddress, EthernetRepr, ETHERTYPE_ARP, ETHERTYPE_IPV4};
use crate::wire::icmp::{self, IcmpPacket};
use crate::wire::ipv4::{PROTO_ICMP, PROTO_UDP};
use crate::wire::tcp::SeqNumber;
use crate::wire::{ArpOperation, ArpPacket, ArpRepr, Ipv4Packet, Ipv4Repr, UdpPacket, UdpRepr};

use crate::testkit::{capture, Pair, A, B, MAC_A, MAC_B, MS};

fn cfg(addr: Ipv4Addr) -> StackConfig {
    StackConfig {
        addr,
        prefix_len: 24,
        seed: 7,
        ..StackConfig::default()
    }
}

fn stacks() -> (Stack<WireEnd>, Stack<WireEnd>) {
    let p = Pair::with(WireConfig::default(), cfg(A), cfg(B));
    (p.a, p.b)
}

/// Stack B, and the raw wire end A to inject and capture frames by hand.
fn raw() -> (WireEnd, Stack<WireEnd>) {
    let (a, b) = WirePair::new(WireConfig::default()).unwrap();
    (a, Stack::new(b, cfg(B)))
}

fn inject(end: &mut WireEnd, frame: &[u8]) {
    assert!(
        crate::testkit::inject(end, frame),
        "the wire takes the frame"
    );
}

/// Receive rounds only (no TCP service): what UDP, ARP and ICMP need.
fn pump(a: &mut Stack<WireEnd>, b: &mut Stack<WireEnd>, now: u64) {
    for _ in 0..8 {
        a.poll(now);
        b.poll(now);
    }
}

/// Ethernet + IPv4 (checksummed) around `payload`.
fn ip_frame(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    proto: u8,
    ident: u16,
    frag_off: u16,
    more: bool,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + payload.len()];
    EthernetRepr {
        src: EthernetAddress(MAC_A),
        dst: EthernetAddress(MAC_B),
        ethertype: ETHERTYPE_IPV4,
    }
    .emit(&mut f)
    .unwrap();
    Ipv4Repr {
        src,
        dst,
        protocol: proto,
        ttl: 64,
        ident,
        dont_frag: false,
        more_frags: more,
        frag_offset: frag_off,
        payload_len: payload.len(),
    }
    .emit(&mut f[14..])
    .unwrap();
    f[34..].copy_from_slice(payload);
    f
}

fn udp_bytes(sport: u16, dport: u16, data: &[u8], src: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
    let mut u = vec![0u8; 8 + data.len()];
    UdpRepr {
        src_port: sport,
        dst_port: dport,
        payload_len: data.len(),
    }
    .emit_with_payload(&mut u, src, dst, data)
    .unwrap();
    u
}

fn udp_frame(sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    ip_frame(
        A,
        B,
        PROTO_UDP,
        1,
        0,
        false,
        &udp_bytes(sport, dport, data, A, B),
    )
}

fn arp_request_from_a() -> Vec<u8> {
    let mut f = vec![0u8; 42];
    EthernetRepr {
        src: EthernetAddress(MAC_A),
        dst: EthernetAddress::BROADCAST,
        ethertype: ETHERTYPE_ARP,
    }
    .emit(&mut f)
    .unwrap();
    ArpRepr {
        operation: ArpOperation::Request,
        sender_hw: EthernetAddress(MAC_A),
        sender_ip: A,
        target_hw: EthernetAddress([0; 6]),
        target_ip: B,
    }
    .emit(&mut f[14..])
    .unwrap();
    f
}

// ----- ARP -----

#[test]
fn arp_request_for_us_is_answered_in_place() {
    let (mut a, mut b) = raw();
    inject(&mut a, &arp_request_from_a());
    b.poll(0);
    let out = capture(&mut a);
    assert_eq!(out.len(), 1);
    let eth = EthernetFrame::new_checked(&out[0][..]).unwrap();
    assert_eq!(eth.dst().0, MAC_A);
    let arp = ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).unwrap());
    assert_eq!(arp.operation, ArpOperation::Reply);
    assert_eq!((arp.sender_ip, arp.sender_hw.0), (B, MAC_B));
    assert_eq!(arp.target_ip, A);
    assert_eq!(b.stats().arp_replies_sent, 1);
}

#[test]
fn arp_request_for_other_address_is_dropped_by_classifier() {
    let (mut a, mut b) = raw();
    let mut f = arp_request_from_a();
    f[14 + 27] = 9; // target 10.0.0.9
    inject(&mut a, &f);
    b.poll(0);
    assert!(capture(&mut a).is_empty());
    assert_eq!(
        b.stats()
            .demux
            .drops_for(crate::demux::DropReason::ArpNotForUs),
        1
    );
}

#[test]
fn send_to_unknown_neighbour_queues_until_arp_reply() {
    let (mut a, mut b) = stacks();
    let sa = UdpSocket::bind(&mut a, SocketAddrV4::new(A, 1000)).unwrap();
    let sb = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 2000)).unwrap();
    a.udp_mut(sa)
        .send_to(b"hello", SocketAddrV4::new(B, 2000), 0)
        .unwrap();
    assert_eq!(a.stats().arp_requests_sent, 1);
    pump(&mut a, &mut b, MS);
    let mut buf = [0u8; 64];
    let (n, from) = sb.recv_from(&mut b, &mut buf).unwrap();
    assert_eq!(&buf[..n], b"hello");
    assert_eq!(from, SocketAddrV4::new(A, 1000));
    // B learnt A from the request (RFC 826: target is us) and answers without ARP.
    sb.send_to(&mut b, b"back", from).unwrap();
    assert_eq!(b.stats().arp_requests_sent, 0);
    pump(&mut a, &mut b, 2 * MS);
    let (n, _) = sa.recv_from(&mut a, &mut buf).unwrap();
    assert_eq!(&buf[..n], b"back");
}

#[test]
fn unanswered_arp_gives_up_and_frees_waiting_buffers() {
    let (mut a, mut b) = raw();
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 5)).unwrap();
    let free0 = b.nic().free_buffers();
    for _ in 0..3 {
        b.udp_mut(s)
            .send_to(b"x", SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 77), 9), 0)
            .unwrap();
    }
    // Requests are retried once a second, then given up (RFC 1122 §2.3.2.1).
    for t in 0..10 {
        b.poll(t * 1000 * MS);
    }
    let reqs = capture(&mut a).len();
    assert!((2..=4).contains(&reqs), "{reqs} requests");
    assert_eq!(b.stats().drops_for(StackDrop::ArpGiveUp), 3);
    b.nic_mut().reclaim();
    assert_eq!(b.nic().free_buffers(), free0);
}

// ----- ICMP -----

fn echo_request(ident: u16, seq: u16, data: &[u8]) -> Vec<u8> {
    let mut m = vec![0u8; 8 + data.len()];
    icmp::emit_echo(&mut m, false, ident, seq, data).unwrap();
    ip_frame(A, B, PROTO_ICMP, 9, 0, false, &m)
}

#[test]
fn echo_request_gets_reply_with_same_data() {
    let (mut a, mut b) = raw();
    inject(&mut a, &echo_request(0x77, 3, b"ping payload"));
    b.poll(0);
    let out = capture(&mut a);
    assert_eq!(out.len(), 1);
    let ip = Ipv4Packet::new_checked(&out[0][14..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!((ip.src(), ip.dst()), (B, A));
    let ic = IcmpPacket::new_checked(ip.payload()).unwrap();
    assert!(ic.verify_checksum());
    assert_eq!(ic.msg_type(), icmp::TYPE_ECHO_REPLY);
    assert_eq!((ic.echo_ident(), ic.echo_seq()), (0x77, 3));
    assert_eq!(ic.data(), b"ping payload");
}

#[test]
fn echo_reply_checksum_is_right_for_every_ident_including_minus_zero_cases() {
    // RFC 1624 update with type 8 -> 0: sweep idents so that the original
    // checksum takes values near 0x0000/0xFFFF.
    let (mut a, mut b) = raw();
    for ident in (0..=0xFFFFu16)
        .step_by(257)
        .chain([0xF7FF, 0xF800, 0x07FF, 0x0800])
    {
        inject(&mut a, &echo_request(ident, 0, &[]));
        b.poll(0);
        for f in capture(&mut a) {
            let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
            let ic = IcmpPacket::new_checked(ip.payload()).unwrap();
            assert!(ic.verify_checksum(), "ident {ident:#x}");
            assert_eq!(
                ic.checksum(),
                !checksum::fold(checksum::partial(
                    &{
                        let mut m = ip.payload().to_vec();
                        m[2] = 0;
                        m[3] = 0;
                        m
                    },
                    0
                ))
            );
        }
    }
}

#[test]
fn bad_icmp_checksum_is_dropped_and_counted() {
    let (mut a, mut b) = raw();
    let mut f = echo_request(1, 1, b"abc");
    let last = f.len() - 1;
    f[last] ^= 0xff;
    inject(&mut a, &f);
    b.poll(0);
    assert!(capture(&mut a).is_empty());
    assert_eq!(b.stats().drops_for(StackDrop::IcmpChecksum), 1);
}

#[test]
fn udp_to_closed_port_gets_rate_limited_port_unreachable() {
    let (mut a, mut b) = raw();
    // Learn A's MAC first so the ICMP error needs no ARP.
    inject(&mut a, &arp_request_from_a());
    b.poll(0);
    capture(&mut a);
    for _ in 0..200 {
        inject(&mut a, &udp_frame(1, 4444, b"?"));
        b.poll(0);
    }
    let out = capture(&mut a);
    let s = b.stats();
    assert_eq!(s.drops_for(StackDrop::UdpNoSocket), 200);
    // Burst of 50 at time 0, the rest suppressed (RFC 1812 §4.3.2.8).
    assert_eq!(out.len() as u64, s.icmp_unreach_sent);
    assert_eq!(s.icmp_unreach_sent, 50);
    assert_eq!(s.icmp_suppressed, 150);
    let ip = Ipv4Packet::new_checked(&out[0][14..]).unwrap();
    let ic = IcmpPacket::new_checked(ip.payload()).unwrap();
    assert_eq!(
        (ic.msg_type(), ic.code()),
        (icmp::TYPE_DEST_UNREACHABLE, icmp::CODE_PORT_UNREACHABLE)
    );
    assert!(ic.verify_checksum());
    // The quote starts with the offending IP header.
    assert_eq!(&ic.data()[12..20], &[10, 0, 0, 1, 10, 0, 0, 2]);
}

// ----- UDP receive: lazy -----

#[test]
fn udp_is_not_processed_until_recv() {
    let (mut a, mut b) = raw();
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).unwrap();
    inject(&mut a, &udp_frame(9, 7, b"one"));
    inject(&mut a, &udp_frame(9, 7, b"two"));
    b.poll(0);
    assert_eq!(s.pending(&b).unwrap(), 2);
    assert_eq!(b.stats().udp_delivered, 0);
    let mut buf = [0u8; 8];
    assert_eq!(s.recv_from(&mut b, &mut buf).unwrap().0, 3);
    assert_eq!(&buf[..3], b"one");
    assert_eq!(b.stats().udp_delivered, 1);
    assert_eq!(s.pending(&b).unwrap(), 1);
}

#[test]
fn bad_checksums_are_found_in_recv_and_skipped() {
    let (mut a, mut b) = raw();
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).unwrap();
    let mut bad_udp = udp_frame(9, 7, b"bad");
    let n = bad_udp.len();
    bad_udp[n - 1] ^= 1;
    let mut bad_ip = udp_frame(9, 7, b"bad");
    bad_ip[14 + 8] ^= 1; // TTL: header checksum now wrong
    inject(&mut a, &bad_udp);
    inject(&mut a, &bad_ip);
    inject(&mut a, &udp_frame(9, 7, b"good"));
    b.poll(0);
    // The classifier took all three: validation is the receiver's work.
    assert_eq!(s.pending(&b).unwrap(), 3);
    let mut buf = [0u8; 8];
    let (n, _) = s.recv_from(&mut b, &mut buf).unwrap();
    assert_eq!(&buf[..n], b"good");
    let st = b.stats();
    assert_eq!(st.drops_for(StackDrop::UdpChecksum), 1);
    assert_eq!(st.drops_for(StackDrop::IpChecksum), 1);
    assert_eq!(st.frames_accounted(), st.rx_frames);
}

#[test]
fn zero_udp_checksum_means_none() {
    let (mut a, mut b) = raw();
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).unwrap();
    let mut f = udp_frame(9, 7, b"nochk");
    f[34 + 6] = 0;
    f[34 + 7] = 0;
    inject(&mut a, &f);
    b.poll(0);
    let mut buf = [0u8; 8];
    assert_eq!(s.recv_from(&mut b, &mut buf).unwrap().0, 5);
}

#[test]
fn full_channel_drops_before_any_protocol_work() {
    let (mut a, mut b) = raw();
    let s = UdpSocket::bind_with_capacity(&mut b, SocketAddrV4::new(B, 7), 4).unwrap();
    for i in 0..10u8 {
        inject(&mut a, &udp_frame(9, 7, &[i]));
    }
    b.poll(0);
    let st = b.stats();
    assert_eq!(st.demux.drops_for(crate::demux::DropReason::ChannelFull), 6);
    assert_eq!(s.pending(&b).unwrap(), 4);
    let mut buf = [0u8; 1];
    for i in 0..4u8 {
        s.recv_from(&mut b, &mut buf).unwrap();
        assert_eq!(buf[0], i);
    }
    assert_eq!(s.recv_from(&mut b, &mut buf), Err(SocketError::WouldBlock));
}

#[test]
fn short_buffer_truncates_like_recvfrom() {
    let (mut a, mut b) = raw();
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).unwrap();
    inject(&mut a, &udp_frame(9, 7, b"0123456789"));
    b.poll(0);
    let mut buf = [0u8; 4];
    assert_eq!(s.recv_from(&mut b, &mut buf).unwrap().0, 4);
    assert_eq!(&buf, b"0123");
}

#[test]
fn connected_socket_filters_other_peers() {
    let (mut a, mut b) = raw();
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).unwrap();
    s.connect(&mut b, SocketAddrV4::new(A, 100)).unwrap();
    inject(&mut a, &udp_frame(99, 7, b"stranger"));
    inject(&mut a, &udp_frame(100, 7, b"peer"));
    b.poll(0);
    let mut buf = [0u8; 16];
    let n = s.recv(&mut b, &mut buf).unwrap();
    assert_eq!(&buf[..n], b"peer");
    assert_eq!(b.stats().drops_for(StackDrop::UdpNotFromPeer), 1);
}

// ----- UDP send -----

#[test]
fn sent_datagram_has_valid_checksums_and_fields() {
    let (mut a, mut b) = raw();
    inject(&mut a, &arp_request_from_a());
    b.poll(0);
    capture(&mut a);
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 53)).unwrap();
    for len in [0usize, 1, 2, 3, 1471, 1472] {
        let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
        s.send_to(&mut b, &data, SocketAddrV4::new(A, 4000))
            .unwrap();
        let out = capture(&mut a);
        assert_eq!(out.len(), 1, "len {len}");
        let ip = Ipv4Packet::new_checked(&out[0][14..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!((ip.src(), ip.dst(), ip.ttl()), (B, A, 64));
        let u = UdpPacket::new_checked(ip.payload()).unwrap();
        assert!(u.verify_checksum(B, A));
        assert_ne!(u.checksum(), 0, "a computed 0 is sent as 0xFFFF");
        assert_eq!((u.src_port(), u.dst_port()), (53, 4000));
        assert_eq!(u.payload(), &data[..]);
    }
}

#[test]
fn oversized_payload_is_refused() {
    let (_a, mut b) = raw();
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 1)).unwrap();
    let big = vec![0u8; MAX_UDP_PAYLOAD + 1];
    assert_eq!(
        s.send_to(&mut b, &big, SocketAddrV4::new(A, 1)),
        Err(SocketError::TooBig)
    );
}

#[test]
fn off_subnet_without_gateway_has_no_route() {
    let (_a, mut b) = raw();
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 1)).unwrap();
    assert_eq!(
        s.send_to(
            &mut b,
            b"x",
            SocketAddrV4::new(Ipv4Addr::new(8, 8, 8, 8), 53)
        ),
        Err(SocketError::NoRoute)
    );
}

// ----- Fragments -----

#[test]
fn large_datagrams_are_fragmented_and_reassembled_both_ways() {
    let (mut a, mut b) = stacks();
    let sa = UdpSocket::bind(&mut a, SocketAddrV4::new(A, 1)).unwrap();
    let sb = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 2)).unwrap();
    let mut buf = vec![0u8; 70000];
    for (i, len) in [1473usize, 2960, 8000, 20000, MAX_UDP_PAYLOAD]
        .into_iter()
        .enumerate()
    {
        let data: Vec<u8> = (0..len).map(|j| (j * 7 + i) as u8).collect();
        sa.send_to(&mut a, &data, SocketAddrV4::new(B, 2)).unwrap();
        pump(&mut a, &mut b, i as u64 * MS);
        let (n, from) = sb.recv_from(&mut b, &mut buf).unwrap();
        assert_eq!(from, SocketAddrV4::new(A, 1));
        assert_eq!(&buf[..n], &data[..], "len {len}");
        sb.send_to(&mut b, &data, from).unwrap();
        pump(&mut a, &mut b, i as u64 * MS);
        let (n, _) = sa.recv_from(&mut a, &mut buf).unwrap();
        assert_eq!(&buf[..n], &data[..]);
    }
    assert_eq!(b.stats().udp_delivered_reassembled, 5);
}

#[test]
fn out_of_order_fragments_reassemble() {
    let (mut a, mut b) = raw();
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).unwrap();
    let data: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    let u = udp_bytes(9, 7, &data, A, B);
    let f0 = ip_frame(A, B, PROTO_UDP, 42, 0, true, &u[..1480]);
    let f1 = ip_frame(A, B, PROTO_UDP, 42, 1480, true, &u[1480..2960]);
    let f2 = ip_frame(A, B, PROTO_UDP, 42, 2960, false, &u[2960..]);
    for f in [&f2, &f1, &f1, &f0] {
        inject(&mut a, f);
    }
    b.poll(0);
    let mut buf = vec![0u8; 4000];
    let (n, _) = s.recv_from(&mut b, &mut buf).unwrap();
    assert_eq!(&buf[..n], &data[..]);
}

#[test]
fn large_ping_is_reassembled_and_answered_in_fragments() {
    let (mut a, mut b) = raw();
    inject(&mut a, &arp_request_from_a());
    b.poll(0);
    capture(&mut a);
    let data = vec![0x5au8; 3000];
    let mut m = vec![0u8; 8 + data.len()];
    icmp::emit_echo(&mut m, false, 1, 2, &data).unwrap();
    inject(&mut a, &ip_frame(A, B, PROTO_ICMP, 5, 0, true, &m[..1480]));
    inject(
        &mut a,
        &ip_frame(A, B, PROTO_ICMP, 5, 1480, false, &m[1480..]),
    );
    b.poll(0);
    let out = capture(&mut a);
    assert_eq!(out.len(), 3);
    let mut r = Reassembler::new(ReasmConfig::default());
    let mut got = None;
    for f in &out {
        let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
        assert!(ip.verify_checksum());
        let key = ReasmKey {
            src: ip.src(),
            dst: ip.dst(),
            ident: ip.ident(),
            protocol: ip.protocol(),
        };
        if let Ok(Some(d)) = r.insert(
            key,
            ip.frag_offset() as usize,
            ip.more_frags(),
            ip.header(),
            ip.payload(),
            0,
        ) {
            got = Some(d.payload.to_vec());
        }
    }
    let reply = got.expect("reply reassembles");
    assert_eq!(reply[0], icmp::TYPE_ECHO_REPLY);
    assert_eq!(checksum::checksum(&reply), 0);
    assert_eq!(&reply[8..], &data[..]);
}

// ----- Sockets -----

#[test]
fn bind_rules() {
    let (_a, mut b) = raw();
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).unwrap();
    assert_eq!(
        UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).err(),
        Some(SocketError::AddrInUse)
    );
    assert_eq!(
        UdpSocket::bind(&mut b, SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 9), 7)).err(),
        Some(SocketError::AddrNotAvailable)
    );
    let e = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 0)).unwrap();
    let p = e.local_addr(&b).unwrap().port();
    assert!(p >= crate::proto::udp::EPHEMERAL_FIRST, "{p}");
    s.close(&mut b).unwrap();
    UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).unwrap();
}

#[test]
fn close_releases_queued_frames() {
    let (mut a, mut b) = raw();
    let free0 = b.nic().free_buffers();
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).unwrap();
    for _ in 0..5 {
        inject(&mut a, &udp_frame(9, 7, b"q"));
    }
    b.poll(0);
    s.close(&mut b).unwrap();
    b.poll(0);
    let st = b.stats();
    assert_eq!(st.drops_for(StackDrop::SocketClosed), 5);
    assert_eq!(st.frames_accounted(), st.rx_frames);
    // A's buffers went back to A: capture on A pulls return-ring entries.
    capture(&mut a);
    b.nic_mut().reclaim();
    assert_eq!(b.nic().free_buffers(), free0);
}

#[test]
fn blocking_recv_times_out() {
    let (_a, mut b) = raw();
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).unwrap();
    let mut buf = [0u8; 4];
    let r = s.recv_from_blocking(&mut b, &mut buf, Some(std::time::Duration::from_millis(20)));
    assert_eq!(r, Err(SocketError::TimedOut));
}

#[test]
fn many_round_trips_leak_no_buffers() {
    let (mut a, mut b) = stacks();
    let sa = UdpSocket::bind(&mut a, SocketAddrV4::new(A, 1)).unwrap();
    let sb = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 2)).unwrap();
    let fa = a.nic().free_buffers();
    let mut buf = [0u8; 64];
    for i in 0..5000u32 {
        sa.send_to(&mut a, &i.to_be_bytes(), SocketAddrV4::new(B, 2))
            .unwrap();
        pump(&mut a, &mut b, MS);
        let (n, from) = sb.recv_from(&mut b, &mut buf).unwrap();
        sb.send_to(&mut b, &buf[..n], from).unwrap();
        pump(&mut a, &mut b, MS);
        let (n, _) = sa.recv_from(&mut a, &mut buf).unwrap();
        assert_eq!(&buf[..n], &i.to_be_bytes());
    }
    pump(&mut a, &mut b, MS);
    a.nic_mut().reclaim();
    assert_eq!(a.nic().free_buffers(), fa);
}

#[test]
fn reassembly_timeout_sends_time_exceeded_when_first_fragment_arrived() {
    let (mut a, mut b) = raw();
    inject(&mut a, &arp_request_from_a());
    b.poll(0);
    capture(&mut a);
    let _s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).unwrap();
    let u = udp_bytes(9, 7, &[1u8; 3000], A, B);
    // First fragment only, then a lone non-first fragment of another datagram.
    inject(&mut a, &ip_frame(A, B, PROTO_UDP, 77, 0, true, &u[..1480]));
    inject(
        &mut a,
        &ip_frame(A, B, PROTO_UDP, 78, 1480, true, &u[1480..2960]),
    );
    b.poll(0);
    assert!(capture(&mut a).is_empty());
    b.poll(16_000 * MS); // past the 15 s reassembly timeout
    let out = capture(&mut a);
    assert_eq!(
        out.len(),
        1,
        "one Time Exceeded, for the datagram whose first fragment came"
    );
    let ip = Ipv4Packet::new_checked(&out[0][14..]).unwrap();
    let ic = IcmpPacket::new_checked(ip.payload()).unwrap();
    assert!(ic.verify_checksum());
    assert_eq!((ic.msg_type(), ic.code()), (icmp::TYPE_TIME_EXCEEDED, 1));
    // Quote: the first fragment's header (ident 77) and 8 bytes of its data.
    assert_eq!(&ic.data()[4..6], &77u16.to_be_bytes());
    assert_eq!(ic.data().len(), 28);
    assert_eq!(b.stats().icmp_time_exceeded_sent, 1);
}

// ----- Receive modes: where the work runs and where packets are dropped -----

fn raw_mode(mode: ReceiveMode, chan_cap: usize, ipq: usize) -> (WireEnd, Stack<WireEnd>) {
    let (a, b) = WirePair::new(WireConfig::default()).unwrap();
    let c = StackConfig {
        mode,
        udp_channel_cap: chan_cap,
        ip_queue_cap: ipq,
        ..cfg(B)
    };
    (a, Stack::new(b, c))
}

fn assert_accounted<N: Nic>(b: &Stack<N>) {
    let st = b.stats();
    assert_eq!(
        st.frames_accounted() + b.queued_frames() as u64,
        st.rx_frames
    );
}

#[test]
fn soft_lrp_checks_udp_in_recv_not_in_the_receive_loop() {
    let (mut a, mut b) = raw_mode(ReceiveMode::SoftLrp, 8, 50);
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).unwrap();
    inject(&mut a, &udp_frame(9, 7, b"x"));
    b.poll(0);
    assert_eq!(b.stats().udp_checked_in_poll, 0);
    let mut buf = [0u8; 8];
    s.recv_from(&mut b, &mut buf).unwrap();
    assert_eq!(b.stats().udp_checked_in_recv, 1);
    assert_accounted(&b);
}

#[test]
fn early_demux_checks_in_the_receive_loop_and_recv_does_not_repeat_it() {
    let (mut a, mut b) = raw_mode(ReceiveMode::EarlyDemux, 8, 50);
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).unwrap();
    let mut bad = udp_frame(9, 7, b"bad");
    let n = bad.len();
    bad[n - 1] ^= 1;
    inject(&mut a, &bad);
    inject(&mut a, &udp_frame(9, 7, b"good"));
    b.poll(0);
    let st = b.stats();
    assert_eq!(st.udp_checked_in_poll, 2);
    assert_eq!(
        st.drops_for(StackDrop::UdpChecksum),
        1,
        "dropped in the loop"
    );
    assert_eq!(s.pending(&b).unwrap(), 1);
    let mut buf = [0u8; 8];
    let (n, from) = s.recv_from(&mut b, &mut buf).unwrap();
    assert_eq!((&buf[..n], from), (&b"good"[..], SocketAddrV4::new(A, 9)));
    assert_eq!(b.stats().udp_checked_in_recv, 0);
    assert_accounted(&b);
}

#[test]
fn early_demux_drops_at_a_full_channel_before_any_work() {
    let (mut a, mut b) = raw_mode(ReceiveMode::EarlyDemux, 2, 50);
    let _s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).unwrap();
    for i in 0..5u8 {
        inject(&mut a, &udp_frame(9, 7, &[i]));
    }
    b.poll(0);
    let st = b.stats();
    assert_eq!(
        st.udp_checked_in_poll, 2,
        "only the frames that fit were checked"
    );
    assert_eq!(st.demux.drops_for(crate::demux::DropReason::ChannelFull), 3);
    assert_eq!(st.udp_dropped_after_work, 0);
    assert_accounted(&b);
}

#[test]
fn eager_checks_everything_then_drops_at_the_full_socket() {
    let (mut a, mut b) = raw_mode(ReceiveMode::Eager, 2, 50);
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).unwrap();
    for i in 0..5u8 {
        inject(&mut a, &udp_frame(9, 7, &[i]));
    }
    b.poll(0);
    let st = b.stats();
    assert_eq!(st.udp_checked_in_poll, 5, "work spent on every frame");
    assert_eq!(st.udp_dropped_after_work, 3);
    assert_eq!(s.pending(&b).unwrap(), 2);
    let mut buf = [0u8; 8];
    assert_eq!(s.recv_from(&mut b, &mut buf).unwrap().0, 1);
    assert_eq!(buf[0], 0);
    assert_accounted(&b);
}

#[test]
fn eager_drops_beyond_the_shared_ip_queue() {
    let (mut a, mut b) = raw_mode(ReceiveMode::Eager, 64, 3);
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).unwrap();
    for i in 0..5u8 {
        inject(&mut a, &udp_frame(9, 7, &[i]));
    }
    b.poll(0);
    let st = b.stats();
    assert_eq!(st.drops_for(StackDrop::IpQueueFull), 2);
    assert_eq!(st.udp_checked_in_poll, 3);
    assert_eq!(s.pending(&b).unwrap(), 3);
    assert_accounted(&b);
}

#[test]
fn eager_modes_run_tcp_input_in_the_receive_loop_soft_lrp_does_not() {
    for mode in [
        ReceiveMode::Eager,
        ReceiveMode::EarlyDemux,
        ReceiveMode::SoftLrp,
    ] {
        let (a, b) = WirePair::new(WireConfig::default()).unwrap();
        let mut sa = Stack::new(a, cfg(A));
        let mut sb = Stack::new(b, StackConfig { mode, ..cfg(B) });
        let _l = sb.tcp_listen(SocketAddrV4::new(B, 80), None, None).unwrap();
        sa.tcp_connect(SocketAddrV4::new(B, 80), None, 0).unwrap();
        for t in 1..4 {
            sa.poll(t * MS);
            sa.tcp_service(t * MS, 64);
            sb.poll(t * MS);
        }
        let done = sb.stats().tcp.segments_in;
        if mode == ReceiveMode::SoftLrp {
            assert_eq!(done, 0, "{mode:?}: the SYN waits for the owner");
        } else {
            assert!(done >= 1, "{mode:?}: the SYN was processed in poll");
        }
        assert_accounted(&sb);
    }
}

// ----- ni-lrp: demultiplexing on the NI, nothing on the host -----

/// Raw wire end A, and stack B in `ni-lrp` with its engine (stepped here).
fn raw_ni(chan_cap: usize) -> (WireEnd, Stack<NiProxy>, NiEngine<WireEnd>) {
    let (a, b) = WirePair::new(WireConfig::default()).unwrap();
    let c = StackConfig {
        udp_channel_cap: chan_cap,
        ..cfg(B)
    };
    let (s, e) = Stack::new_ni_lrp(b, c);
    (a, s, e)
}

/// Gives everything back (quiesce, last NI pass) and checks that every
/// buffer of both ends is free again: none was lost on the way.
fn assert_all_buffers_back(mut a: WireEnd, mut b: Stack<NiProxy>, mut e: NiEngine<WireEnd>) {
    let mut done = false;
    for _ in 0..8 {
        e.step();
        if b.ni_quiesce() {
            done = true;
            break;
        }
    }
    assert!(done, "quiesce acknowledged");
    assert_eq!(b.nic().lost_releases(), 0);
    let mut nic = e.finish();
    capture(&mut a);
    a.reclaim();
    nic.reclaim();
    assert_eq!(a.free_buffers(), 512, "A's buffers all came back");
    assert_eq!(nic.free_buffers(), 512, "B's buffers all came back");
    assert_accounted(&b);
}

#[test]
fn ni_lrp_frames_reach_the_channel_without_the_host_polling() {
    let (mut a, mut b, mut e) = raw_ni(8);
    assert_eq!(b.mode(), ReceiveMode::NiLrp);
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).unwrap();
    e.step(); // applies the bind
    inject(&mut a, &udp_frame(9, 7, b"x"));
    inject(&mut a, &udp_frame(9, 7, b"y"));
    e.step();
    // No b.poll(): the frames are on the socket's channel already.
    assert_eq!(s.pending(&b).unwrap(), 2);
    assert_eq!(b.demux().stats().frames, 0, "the host classified nothing");
    let st = b.stats();
    assert_eq!(
        (st.rx_frames, st.demux.frames, st.demux.enqueued),
        (2, 2, 2)
    );
    assert_eq!((st.udp_checked_in_poll, st.udp_checked_in_recv), (0, 0));
    assert_accounted(&b);
    let mut buf = [0u8; 8];
    let (n, from) = s.recv_from(&mut b, &mut buf).unwrap();
    assert_eq!((&buf[..n], from), (&b"x"[..], SocketAddrV4::new(A, 9)));
    assert_eq!(b.stats().udp_checked_in_recv, 1, "checked in recv");
    assert_eq!(b.demux().stats().frames, 0);
    assert_accounted(&b);
    assert_all_buffers_back(a, b, e);
}

#[test]
fn ni_lrp_drops_at_the_full_channel_on_the_ni() {
    let (mut a, mut b, mut e) = raw_ni(2);
    let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, 7)).unwrap();
    e.step();
    for i in 0..5u8 {
        inject(&mut a, &udp_frame(9, 7, &[i]));
    }
    e.step();
    let st = b.stats();
    assert_eq!(st.demux.drops_for(crate::demux::DropReason::ChannelFull), 3);
    assert_eq!(
        b.ni_stats()
            .unwrap()
            .demux
            .drops_for(crate::demux::DropReason::ChannelFull),
        3,
        "counted on the NI"
    );
    assert_eq!(b.demux().stats().dropped(), 0, "no drop work on the host");
    assert_eq!(st.udp_checked_in_poll + st.udp_checked_in_recv, 0);
    assert_eq!(s.pending(&b).unwrap(), 2);
    assert_accounted(&b);
    let mut buf = [0u8; 8];
    assert_eq!(s.recv_from(&mut b, &mut buf).unwrap().0, 1);
    assert_eq!(buf[0], 0, "the first frames were kept");
    assert_accounted(&b);
    assert_all_buffers_back(a, b, e);
}

#[test]
fn ni_lrp_control_traffic_is_served_by_the_host_poll() {
    let (mut a, mut b, mut e) = raw_ni(8);
    inject(&mut a, &arp_request_from_a());
    inject(&mut a, &echo_request(1, 2, b"ping"));
    e.step();
    assert_eq!(b.queued_frames(), 2, "on the control channel");
    b.poll(0);
    e.step(); // forwards the replies
    let out = capture(&mut a);
    assert_eq!(out.len(), 2, "ARP reply and echo reply");
    assert_eq!(b.stats().icmp_echo_replies, 1);
    assert_accounted(&b);
    assert_all_buffers_back(a, b, e);
}

#[test]
fn ni_lrp_bind_and_unbind_with_frames_in_flight_lose_no_buffers() {
    let (mut a, mut b, mut e) = raw_ni(64);
    // Port unreachables must not wait for ARP (A is a raw end that never
    // answers): frames waiting for ARP are held by the host.
    b.set_neighbor(A, MAC_A);
    let mut now = 0;
    for round in 0..20u16 {
        let port = 7 + round % 3;
        let s = UdpSocket::bind(&mut b, SocketAddrV4::new(B, port)).unwrap();
        // Frames injected before the NI applied the bind go to the control
        // channel (port unreachable); after it, to the socket's ring.
        for i in 0..5u8 {
            inject(&mut a, &udp_frame(9, port, &[i]));
        }
        e.step();
        for i in 0..5u8 {
            inject(&mut a, &udp_frame(9, port, &[i]));
        }
        e.step();
        if round % 2 == 0 {
            let mut buf = [0u8; 8];
            let _ = s.recv_from(&mut b, &mut buf);
        }
        // Closed on the host while its ring still holds frames, and before
        // the NI knows: more frames still reach the old ring.
        s.close(&mut b).unwrap();
        inject(&mut a, &udp_frame(9, port, b"late"));
        assert_accounted(&b);
        now += MS;
        b.poll(now);
        assert_accounted(&b);
        e.step();
        b.poll(now);
        capture(&mut a);
        assert_accounted(&b);
    }
    let st = b.stats();
    assert!(st.drops_for(StackDrop::SocketClosed) > 0);
    assert_eq!(b.ni_stats().unwrap().command_errors, 0);
    assert_all_buffers_back(a, b, e);
}

#[test]
fn stack_new_with_ni_lrp_runs_soft_lrp() {
    let (a, _b) = WirePair::new(WireConfig::default()).unwrap();
    let s = Stack::new(
        a,
        StackConfig {
            mode: ReceiveMode::NiLrp,
            ..cfg(A)
        },
    );
    assert_eq!(s.mode(), ReceiveMode::SoftLrp);
    assert!(s.ni_stats().is_none());
    for m in ReceiveMode::ALL {
        assert_eq!(ReceiveMode::from_name(m.name()), Some(m));
    }
}

#[test]
fn tagged_tcp_service_processes_only_its_owners_listeners_and_connections() {
    let (a, b) = WirePair::new(WireConfig::default()).unwrap();
    let mut sa = Stack::new(a, cfg(A));
    let mut sb = Stack::new(b, cfg(B));
    let l1 = sb.tcp_listen(SocketAddrV4::new(B, 80), None, None).unwrap();
    let l2 = sb.tcp_listen(SocketAddrV4::new(B, 81), None, None).unwrap();
    sb.listener_mut(l1).set_tag(1).unwrap();
    sb.listener_mut(l2).set_tag(2).unwrap();
    sa.set_neighbor(B, sb.mac());
    sb.set_neighbor(A, sa.mac());
    sa.tcp_connect(SocketAddrV4::new(B, 80), None, 0).unwrap();
    sa.tcp_connect(SocketAddrV4::new(B, 81), None, 0).unwrap();
    sa.poll(MS);
    sb.poll(MS);
    assert_eq!(sb.tcp_ready_tags(), 0b110, "both owners have input");
    assert_eq!(sb.tcp_service_tag(MS, 1, 64), 1, "only owner 1's SYN");
    assert_eq!(sb.tcp_ready_tags(), 0b100, "owner 2's SYN still waits");
    assert_eq!(sb.tcp_service_tag(MS, 3, 64), 0, "nobody's");
    assert_eq!(sb.tcp_service_tag(MS, 2, 64), 1);
    assert_eq!(sb.tcp_ready_tags(), 0);
    // The handshakes complete; accepted connections inherit the tag.
    for t in 2..6 {
        sa.poll(t * MS);
        sa.tcp_service(t * MS, 64);
        sb.poll(t * MS);
        sb.tcp_service_tag(t * MS, 1, 64);
        sb.tcp_service_tag(t * MS, 2, 64);
    }
    let c1 = sb.listener_mut(l1).accept(6 * MS).unwrap();
    let c2 = sb.listener_mut(l2).accept(6 * MS).unwrap();
    // Data to connection 1 only: only tag 1 becomes ready.
    let mut ev = Vec::new();
    sa.tcp_take_events(&mut ev);
    let ca = ev
        .iter()
        .find_map(|e| match e {
            TcpEvent::Conn(h) => (sa.tcp(*h).addrs().unwrap().1.port() == 80).then_some(*h),
            _ => None,
        })
        .unwrap();
    sa.tcp_mut(ca).send(b"hello", 7 * MS).unwrap();
    sa.poll(7 * MS);
    sb.poll(7 * MS);
    assert_eq!(sb.tcp_ready_tags(), 0b10);
    assert_eq!(sb.tcp_service_tag(7 * MS, 2, 64), 0);
    assert_eq!(sb.tcp(c1).recv_queue().unwrap(), 0, "not processed yet");
    assert!(sb.tcp_service_tag(7 * MS, 1, 64) >= 1);
    assert_eq!(sb.tcp(c1).recv_queue().unwrap(), 5);
    assert_eq!(sb.tcp(c2).recv_queue().unwrap(), 0);
    assert_accounted(&sb);
}

#[test]
fn ni_lrp_tcp_input_waits_for_the_owner_and_is_found_through_the_ready_ring() {
    let (a, b) = WirePair::new(WireConfig::default()).unwrap();
    let mut sa = Stack::new(a, cfg(A));
    let (mut sb, mut e) = Stack::new_ni_lrp(b, cfg(B));
    let l = sb.tcp_listen(SocketAddrV4::new(B, 80), None, None).unwrap();
    e.step(); // the listener's binding reaches the NI
    let c = sa.tcp_connect(SocketAddrV4::new(B, 80), None, 0).unwrap();
    for t in 1..4 {
        sa.poll(t * MS);
        sa.tcp_service(t * MS, 64);
        e.step();
        sb.poll(t * MS);
    }
    // The SYN (and the ARP exchange's control frames) went past the host's
    // receive loop: the SYN waits on the listener's channel.
    assert_eq!(sb.stats().tcp.segments_in, 0, "the SYN waits for the owner");
    assert_eq!(sb.listener(l).pending().unwrap(), 1);
    assert_eq!(sb.demux().stats().frames, 0);
    // The owner's protocol handler finds the listener on the ready list
    // the NI fed, without scanning.
    assert!(sb.tcp_service(4 * MS, 64) >= 1);
    assert_eq!(sb.stats().tcp.segments_in, 1);
    let mut s = None;
    for t in 5..20 {
        e.step();
        sa.poll(t * MS);
        sa.tcp_service(t * MS, 64);
        e.step();
        sb.poll(t * MS);
        sb.tcp_service(t * MS, 64);
        if let Ok(h) = sb.listener_mut(l).accept(t * MS) {
            s = Some(h);
            break;
        }
    }
    let s = s.expect("accepted");
    assert_eq!(
        sa.tcp_mut(c).state(20 * MS),
        Ok(crate::proto::tcp::State::Established)
    );
    // Data to the accepted connection arrives on its own ring.
    sa.tcp_mut(c).send(b"hello", 21 * MS).unwrap();
    sa.poll(21 * MS);
    e.step();
    let mut buf = [0u8; 16];
    assert_eq!(sb.tcp_mut(s).recv(&mut buf, 22 * MS), Ok(5));
    assert_eq!(&buf[..5], b"hello");
    assert_accounted(&sb);
}

// ------------------------------------------------------------ TCP: reuse

/// A client that reuses its one port for connection after connection to a
/// server that closes first (so the server holds each 4-tuple in
/// TIME-WAIT) gets every new connection at once: its TSval for the 4-tuple
/// only grows (RFC 7323 §5.4 offset per 4-tuple), so the server's TIME-WAIT
/// entry accepts the new SYN (RFC 6191 §2) instead of answering it with an
/// ACK and leaving the client to retransmit a second later.
/// Stacks A and B, B listening on port 80; with `port`, A's connections
/// all come from that one port.
fn client_server(port: Option<u16>) -> (Stack<WireEnd>, Stack<WireEnd>, crate::stack::TcpListener) {
    let (mut sa, mut sb) = stacks();
    if let Some(p) = port {
        sa.tcp.sh.ports = crate::proto::tcp::EphemeralPorts::new(p, p, 4);
    }
    let l = sb
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), None, None)
        .unwrap();
    (sa, sb, l)
}

/// Both stacks' receive and TCP work at `now`.
fn tcp_pump(sa: &mut Stack<WireEnd>, sb: &mut Stack<WireEnd>, now: u64) {
    sa.poll(now);
    sa.tcp_service(now, 64);
    sb.poll(now);
    sb.tcp_service(now, 64);
}

/// A connects to B's listener `l` on port 80; 100 µs steps until B has
/// accepted (within 100 ms). Returns the client's and the server's handle.
fn tcp_open(
    sa: &mut Stack<WireEnd>,
    sb: &mut Stack<WireEnd>,
    l: crate::stack::TcpListener,
    now: &mut u64,
) -> (crate::stack::TcpStream, crate::stack::TcpStream) {
    let t0 = *now;
    let c = sa
        .tcp_connect(SocketAddrV4::new(B, 80), None, *now)
        .unwrap();
    loop {
        *now += 100_000;
        tcp_pump(sa, sb, *now);
        if let Ok(s) = sb.listener_mut(l).accept(*now) {
            return (c, s);
        }
        assert!(*now - t0 < 100 * MS, "no connection");
    }
}

/// B sends `data` on connection `s` and closes first; A reads its end `c`
/// to the end of the stream (within `limit` of virtual time) and closes;
/// then 2 ms more for the last segments. Returns the bytes A read.
fn send_and_close(
    sa: &mut Stack<WireEnd>,
    sb: &mut Stack<WireEnd>,
    (c, s): (crate::stack::TcpStream, crate::stack::TcpStream),
    data: &[u8],
    now: &mut u64,
    limit: u64,
) -> usize {
    let (mut sent, mut got) = (0, 0);
    let mut buf = [0u8; 8192];
    let t0 = *now;
    loop {
        if sent < data.len() {
            if let Ok(k) = sb.tcp_mut(s).send(&data[sent..], *now) {
                sent += k;
                if sent == data.len() {
                    sb.tcp_mut(s).close(*now).unwrap();
                }
            }
        }
        *now += 100_000;
        tcp_pump(sa, sb, *now);
        match sa.tcp_mut(c).recv(&mut buf, *now) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(_) => {}
        }
        assert!(*now - t0 < limit, "no end of stream");
    }
    sa.tcp_mut(c).close(*now).unwrap();
    for _ in 0..20 {
        *now += 100_000;
        tcp_pump(sa, sb, *now);
    }
    got
}

/// An ICMP "fragmentation needed" from a router at `from` to B, quoting
/// a TCP segment B sent to A (IP header and 8 bytes: ports and SEQ).
fn frag_needed_frame(from: Ipv4Addr, mtu: u16, sport: u16, dport: u16, seq: SeqNumber) -> Vec<u8> {
    let mut orig = vec![0u8; 20 + 20];
    Ipv4Repr {
        src: B,
        dst: A,
        protocol: crate::wire::ipv4::PROTO_TCP,
        ttl: 64,
        ident: 9,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
        payload_len: 1480,
    }
    .emit(&mut orig)
    .unwrap();
    orig[20..22].copy_from_slice(&sport.to_be_bytes());
    orig[22..24].copy_from_slice(&dport.to_be_bytes());
    orig[24..28].copy_from_slice(&seq.0.to_be_bytes());
    let mut msg = [0u8; 128];
    let n = icmp::emit_dest_unreachable(&mut msg, icmp::CODE_FRAG_NEEDED, mtu, &orig).unwrap();
    ip_frame(from, B, PROTO_ICMP, 3, 0, false, &msg[..n])
}

/// RFC 1191 through the stack: a router's "fragmentation needed" quoting
/// a segment in flight makes the connection send smaller segments at
/// once, and the transfer completes byte-exact; one quoting a sequence
/// number outside the flight, or no connection of ours, changes nothing
/// and is counted.
#[test]
fn icmp_frag_needed_shrinks_a_connections_segments_mid_transfer() {
    let (mut sa, mut sb, l) = client_server(None);
    let mut now = MS;
    let (c, s) = tcp_open(&mut sa, &mut sb, l, &mut now);
    let cport = sa.tcp(c).addrs().unwrap().0.port();
    let before = sb.tcp(s).inspect(|k| k.eff_mss()).unwrap();
    const N: usize = 300_000;
    let body: Vec<u8> = (0..N).map(|i| (i % 251) as u8).collect();
    let (mut sent, mut got) = (0, Vec::new());
    let mut buf = [0u8; 8192];
    let mut icmp_sent = false;
    let router = Ipv4Addr::new(10, 0, 0, 254);
    while got.len() < N {
        if sent < N {
            if let Ok(k) = sb.tcp_mut(s).send(&body[sent..], now) {
                sent += k;
            }
        }
        if !icmp_sent && sent > N / 3 {
            // Out of the flight, and for a port with no connection: ignored.
            let una = sb.tcp(s).inspect(|k| k.snd_una()).unwrap();
            inject(
                &mut sa.iface.nic,
                &frag_needed_frame(router, 1200, 80, cport, una + 10_000_000),
            );
            inject(
                &mut sa.iface.nic,
                &frag_needed_frame(router, 1200, 80, cport ^ 1, una),
            );
            // In the flight: taken.
            inject(
                &mut sa.iface.nic,
                &frag_needed_frame(router, 1200, 80, cport, una),
            );
            icmp_sent = true;
        }
        now += 50_000;
        tcp_pump(&mut sa, &mut sb, now);
        while let Ok(n) = sa.tcp_mut(c).recv(&mut buf, now) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        assert!(now < 5_000 * MS, "transfer stalled at {} of {N}", got.len());
    }
    assert!(got == body, "data differs");
    let (mss, k) = sb.tcp(s).inspect(|k| (k.eff_mss(), *k.counters())).unwrap();
    assert!(before > 1200 - 40, "{before}");
    assert_eq!(mss, 1200 - 40 - (1460 - before));
    assert_eq!((k.pmtu_reduced, k.pmtu_ignored), (1, 1), "{k:?}");
    let st = sb.stats();
    assert_eq!(st.icmp_frag_needed, 2, "{st}");
    assert_eq!(st.drops_for(StackDrop::IcmpNoConnection), 1, "{st}");
}

/// RFC 1122 §4.2.2.13 (a) through the whole stack: a client that reuses
/// its port at once reopens the server's TIME-WAIT entry, and the new
/// connection's ISS is above everything the old one sent, although the
/// old one sent far more bytes than RFC 6528's ISN clock moved meanwhile.
#[test]
fn a_reopened_time_wait_gets_an_iss_above_the_old_connection() {
    let (mut sa, mut sb, l) = client_server(Some(50_001));
    let mut now = MS;
    // The server's ISS: SND.UNA - 1 once established.
    let iss = |sb: &Stack<WireEnd>, s| sb.tcp(s).inspect(|k| k.snd_una()).unwrap() + u32::MAX;
    let (c, s) = tcp_open(&mut sa, &mut sb, l, &mut now);
    let iss1 = iss(&sb, s);
    // The server sends 200 kB and closes first; the client reads to the
    // end and closes: the server's side goes to TIME-WAIT.
    const N: usize = 200_000;
    let got = send_and_close(
        &mut sa,
        &mut sb,
        (c, s),
        &vec![7u8; N],
        &mut now,
        2_000 * MS,
    );
    assert_eq!(got, N);
    assert_eq!(sb.tcp.sh.tw.len(), 1);
    // The old connection's last sequence number: its FIN.
    let old_fin = iss1 + (N as u32 + 1);
    let ticks = (now - MS) / 4_000;
    assert!(ticks < N as u64, "the ISN clock moved {ticks}: no test");
    let (_, s2) = tcp_open(&mut sa, &mut sb, l, &mut now);
    let iss2 = iss(&sb, s2);
    assert_eq!(sb.tcp.sh.tw.len(), 0, "the entry was reopened");
    assert!(
        iss2.diff(old_fin) > 0,
        "new ISS {iss2:?} not above the old FIN {old_fin:?}"
    );
}

#[test]
fn a_reused_port_gets_through_the_servers_time_wait_at_once() {
    let (mut sa, mut sb, l) = client_server(Some(50_000));
    let mut now = MS;
    for round in 0..8 {
        let t0 = now;
        let c = sa.tcp_connect(SocketAddrV4::new(B, 80), None, now).unwrap();
        let s = loop {
            now += 100_000;
            tcp_pump(&mut sa, &mut sb, now);
            if let Ok(s) = sb.listener_mut(l).accept(now) {
                break s;
            }
            assert!(now - t0 < 100 * MS, "round {round}: no connection");
        };
        // Established within a few round trips of virtual time, not after
        // a one-second SYN retransmission.
        assert!(
            now - t0 < 10 * MS,
            "round {round}: took {} ms",
            (now - t0) / MS
        );
        assert_eq!(sa.tcp_mut(c).addrs().unwrap().0.port(), 50_000);
        // The server answers and closes first; the client reads to the end
        // and closes.
        let got = send_and_close(&mut sa, &mut sb, (c, s), b"reply", &mut now, 200 * MS);
        assert_eq!(got, 5);
        // The client's side is gone, the server's in TIME-WAIT.
        assert!(
            sa.tcp_states().is_empty(),
            "round {round}: {:?}",
            sa.tcp_states()
        );
        assert_eq!(sb.tcp.sh.tw.len(), 1, "round {round}");
        now += 50 * MS;
    }
}
