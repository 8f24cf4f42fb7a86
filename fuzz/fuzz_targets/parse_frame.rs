//! Parses arbitrary bytes as an Ethernet frame and everything inside it,
//! touching every accessor, iterating TCP options and verifying checksums.
//! Also re-emits what was parsed and checks that it parses back the same.
#![no_main]

use std::hint::black_box;
use std::net::Ipv4Addr;

use lazynet::wire::arp::ArpPacket;
use lazynet::wire::checksum;
use lazynet::wire::ethernet::{self, EthernetFrame, EthernetRepr};
use lazynet::wire::icmp::{self, IcmpPacket, IcmpRepr};
use lazynet::wire::ipv4::{self, Ipv4Packet, Ipv4Repr};
use lazynet::wire::tcp::{TcpPacket, TcpRepr};
use lazynet::wire::udp::{UdpPacket, UdpRepr};
use lazynet::wire::ArpRepr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Treat the input both as a frame and directly as each inner header, so
    // the fuzzer does not need to discover the outer layers first.
    parse_frame(data);
    parse_ipv4(data);
    parse_tcp(data, Ipv4Addr::LOCALHOST, Ipv4Addr::BROADCAST);
    parse_udp(data, Ipv4Addr::LOCALHOST, Ipv4Addr::BROADCAST);
    parse_icmp(data);
    let _ = checksum::checksum(data);
});

fn parse_frame(data: &[u8]) {
    let Ok(f) = EthernetFrame::new_checked(data) else {
        return;
    };
    let r = EthernetRepr::parse(&f);
    black_box((f.dst().is_broadcast(), f.src().is_multicast()));
    let mut out = [0u8; ethernet::HEADER_LEN];
    r.emit(&mut out).unwrap();
    assert_eq!(&out[..], &data[..ethernet::HEADER_LEN]);
    match f.ethertype() {
        ethernet::ETHERTYPE_ARP => parse_arp(f.payload()),
        ethernet::ETHERTYPE_IPV4 => parse_ipv4(f.payload()),
        _ => {}
    }
}

fn parse_arp(data: &[u8]) {
    let Ok(p) = ArpPacket::new_checked(data) else {
        return;
    };
    black_box((p.hardware_type(), p.protocol_type()));
    let r = ArpRepr::parse(&p);
    let mut out = [0u8; 28];
    r.emit(&mut out).unwrap();
    assert_eq!(&out[..], &data[..28]);
}

fn parse_ipv4(data: &[u8]) {
    let Ok(p) = Ipv4Packet::new_checked(data) else {
        return;
    };
    black_box((
        p.version(),
        p.ihl(),
        p.dscp(),
        p.ecn(),
        p.total_len(),
        p.reserved_flag(),
        p.is_fragment(),
        p.checksum(),
        p.options(),
        p.packet(),
        p.verify_checksum(),
    ));
    assert_eq!(
        p.header_len() + p.payload().len(),
        usize::from(p.total_len())
    );
    let r = Ipv4Repr::parse(&p);
    let mut out = [0u8; 20];
    if r.emit(&mut out).is_ok() {
        let q = Ipv4Packet::new_checked(&out[..]);
        // payload_len may exceed `out`; the header alone must still be sane.
        assert!(q.is_err() || q.unwrap().verify_checksum());
    }
    let (src, dst) = (p.src(), p.dst());
    match p.protocol() {
        ipv4::PROTO_ICMP => parse_icmp(p.payload()),
        ipv4::PROTO_UDP => parse_udp(p.payload(), src, dst),
        ipv4::PROTO_TCP => parse_tcp(p.payload(), src, dst),
        _ => {}
    }
}

fn parse_icmp(data: &[u8]) {
    let Ok(p) = IcmpPacket::new_checked(data) else {
        return;
    };
    black_box((
        p.msg_type(),
        p.code(),
        p.checksum(),
        p.rest_of_header(),
        p.echo_ident(),
        p.echo_seq(),
        p.next_hop_mtu(),
        p.data(),
        p.verify_checksum(),
    ));
    let mut out = [0u8; 64];
    let r = IcmpRepr::parse(&p);
    if let Ok(n) = r.emit(&mut out) {
        let q = IcmpPacket::new_checked(&out[..n]).unwrap();
        assert!(q.verify_checksum());
        if !matches!(
            r,
            IcmpRepr::DestUnreachable { .. } | IcmpRepr::TimeExceeded { .. }
        ) {
            assert_eq!(IcmpRepr::parse(&q), r);
        }
    }
    if p.msg_type() == icmp::TYPE_ECHO_REQUEST {
        if let Ok(n) = icmp::emit_echo(&mut out, true, p.echo_ident(), p.echo_seq(), p.data()) {
            assert!(IcmpPacket::new_checked(&out[..n])
                .unwrap()
                .verify_checksum());
        }
    }
    let n = icmp::emit_dest_unreachable(&mut out, icmp::CODE_PORT_UNREACHABLE, 0, data).unwrap();
    assert!(IcmpPacket::new_checked(&out[..n])
        .unwrap()
        .verify_checksum());
}

fn parse_udp(data: &[u8], src: Ipv4Addr, dst: Ipv4Addr) {
    let Ok(p) = UdpPacket::new_checked(data) else {
        return;
    };
    black_box((
        p.src_port(),
        p.dst_port(),
        p.len(),
        p.checksum(),
        p.datagram(),
    ));
    let ok = p.verify_checksum(src, dst);
    let r = UdpRepr::parse(&p);
    let mut out = vec![0u8; usize::from(p.len())];
    let n = r
        .emit_with_payload(&mut out, src, dst, p.payload())
        .unwrap();
    let q = UdpPacket::new_checked(&out[..n]).unwrap();
    assert!(q.verify_checksum(src, dst));
    assert_eq!(q.payload(), p.payload());
    if p.checksum() != 0 && q.checksum() == p.checksum() {
        assert!(ok);
    }
}

fn parse_tcp(data: &[u8], src: Ipv4Addr, dst: Ipv4Addr) {
    let Ok(p) = TcpPacket::new_checked(data) else {
        return;
    };
    black_box((
        p.src_port(),
        p.dst_port(),
        p.seq_number(),
        p.ack_number(),
        p.data_offset(),
        p.reserved(),
        p.flags(),
        p.window(),
        p.checksum(),
        p.urgent(),
        p.payload(),
        p.seq_len(),
        p.segment_len(),
        p.verify_checksum(src, dst),
    ));
    for o in p.options_iter() {
        if let Ok(o) = black_box(o) {
            let mut out = [0u8; 64];
            assert_eq!(o.emit(&mut out), Ok(o.len()));
        }
    }
    if let Ok(r) = TcpRepr::parse(&p) {
        let Ok(hl) = r.header_len() else { return };
        let mut out = vec![0u8; hl + p.payload().len()];
        let n = r
            .emit_with_payload(&mut out, src, dst, p.payload())
            .unwrap();
        let q = TcpPacket::new_checked(&out[..n]).unwrap();
        assert!(q.verify_checksum(src, dst));
        assert_eq!(TcpRepr::parse(&q), Ok(r));
    }
}
