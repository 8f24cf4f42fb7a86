//! Differential tests of `lazynet::wire` against `etherparse` 0.21 as an
//! oracle: random packets built with etherparse must read the same through
//! our views, what our builders emit must parse the same with etherparse,
//! and arbitrary bytes must never make a view or accessor panic.

use std::net::Ipv4Addr;

use etherparse::{
    ArpHardwareId, ArpOperation as EpArpOp, ArpPacket as EpArp, ArpPacketSlice, EtherType,
    Ethernet2Header, Ethernet2HeaderSlice, IcmpEchoHeader, Icmpv4Header, Icmpv4Slice, Icmpv4Type,
    IpDscp, IpEcn, IpFragOffset, IpNumber, Ipv4Header, Ipv4Slice, TcpHeader, TcpOptionElement,
    TcpOptionsIterator, TcpSlice, UdpHeader, UdpSlice,
};
use lazynet::wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use lazynet::wire::ethernet::{EthernetAddress, EthernetFrame, EthernetRepr};
use lazynet::wire::icmp::{self, IcmpPacket};
use lazynet::wire::ipv4::{Ipv4Packet, Ipv4Repr};
use lazynet::wire::tcp::{
    SackBlocks, SeqNumber, TcpFlags, TcpOption, TcpOptions, TcpPacket, TcpRepr, Timestamps,
};
use lazynet::wire::udp::{UdpPacket, UdpRepr};
use proptest::prelude::*;

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

// ---------------------------------------------------------------- Ethernet

proptest! {
    #[test]
    fn ethernet_matches_etherparse(
        src in any::<[u8; 6]>(), dst in any::<[u8; 6]>(), et in any::<u16>(), payload in bytes(64),
    ) {
        let h = Ethernet2Header { source: src, destination: dst, ether_type: EtherType(et) };
        let mut frame = h.to_bytes().to_vec();
        frame.extend_from_slice(&payload);

        let ours = EthernetFrame::new_checked(&frame[..]).unwrap();
        let theirs = Ethernet2HeaderSlice::from_slice(&frame).unwrap();
        prop_assert_eq!(ours.src().0, theirs.source());
        prop_assert_eq!(ours.dst().0, theirs.destination());
        prop_assert_eq!(ours.ethertype(), theirs.ether_type().0);
        prop_assert_eq!(ours.payload(), &payload[..]);
        prop_assert_eq!(ours.dst().is_multicast(), dst[0] & 1 == 1);

        let mut out = [0u8; 14];
        EthernetRepr { src: EthernetAddress(src), dst: EthernetAddress(dst), ethertype: et }
            .emit(&mut out)
            .unwrap();
        prop_assert_eq!(&out[..], &h.to_bytes()[..]);
    }
}

// ---------------------------------------------------------------- ARP

proptest! {
    #[test]
    fn arp_matches_etherparse(
        op in any::<u16>(),
        sha in any::<[u8; 6]>(), spa in any::<[u8; 4]>(),
        tha in any::<[u8; 6]>(), tpa in any::<[u8; 4]>(),
        pad in bytes(18),
    ) {
        let ep = EpArp::new(
            ArpHardwareId::ETHERNET, EtherType::IPV4, EpArpOp(op), &sha, &spa, &tha, &tpa,
        ).unwrap();
        let mut b = ep.to_bytes().to_vec();
        b.extend_from_slice(&pad); // Ethernet padding
        let ours = ArpPacket::new_checked(&b[..]).unwrap();
        let theirs = ArpPacketSlice::from_slice(&b).unwrap();
        prop_assert_eq!(ours.hardware_type(), theirs.hw_addr_type().0);
        prop_assert_eq!(ours.protocol_type(), theirs.proto_addr_type().0);
        prop_assert_eq!(u16::from(ours.operation()), theirs.operation().0);
        prop_assert_eq!(&ours.sender_hw().0[..], theirs.sender_hw_addr());
        prop_assert_eq!(&ours.sender_ip().octets()[..], theirs.sender_protocol_addr());
        prop_assert_eq!(&ours.target_hw().0[..], theirs.target_hw_addr());
        prop_assert_eq!(&ours.target_ip().octets()[..], theirs.target_protocol_addr());

        let r = ArpRepr {
            operation: ArpOperation::from(op),
            sender_hw: EthernetAddress(sha),
            sender_ip: Ipv4Addr::from(spa),
            target_hw: EthernetAddress(tha),
            target_ip: Ipv4Addr::from(tpa),
        };
        prop_assert_eq!(ArpRepr::parse(&ours), r);
        let mut out = [0u8; 28];
        r.emit(&mut out).unwrap();
        prop_assert_eq!(&out[..], &ep.to_bytes()[..]);
    }

    #[test]
    fn arp_other_types_rejected(
        htype in any::<u16>(), ptype in any::<u16>(), hlen in any::<u8>(), plen in any::<u8>(),
        rest in proptest::collection::vec(any::<u8>(), 20..40),
    ) {
        let mut b = Vec::new();
        b.extend_from_slice(&htype.to_be_bytes());
        b.extend_from_slice(&ptype.to_be_bytes());
        b.extend_from_slice(&[hlen, plen]);
        b.extend_from_slice(&rest);
        let ours = ArpPacket::new_checked(&b[..]);
        let eth_ipv4 = htype == 1 && ptype == 0x0800 && hlen == 6 && plen == 4;
        prop_assert_eq!(ours.is_ok(), eth_ipv4);
        if eth_ipv4 {
            // etherparse accepts it too and agrees on the addresses.
            let theirs = ArpPacketSlice::from_slice(&b).unwrap();
            prop_assert_eq!(&ours.unwrap().target_ip().octets()[..], theirs.target_protocol_addr());
        }
    }
}

// ---------------------------------------------------------------- IPv4

prop_compose! {
    fn ipv4_header()(
        dscp in 0u8..64, ecn in 0u8..4, ident in any::<u16>(), df in any::<bool>(),
        mf in any::<bool>(), frag in 0u16..8192, ttl in any::<u8>(), proto in any::<u8>(),
        src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(), opt_words in 0usize..=10,
        opt_seed in any::<u8>(), payload in bytes(80),
    ) -> (Ipv4Header, Vec<u8>) {
        let mut h = Ipv4Header::new(payload.len() as u16, ttl, IpNumber(proto), src, dst).unwrap();
        h.dscp = IpDscp::try_new(dscp).unwrap();
        h.ecn = IpEcn::try_new(ecn).unwrap();
        h.identification = ident;
        h.dont_fragment = df;
        h.more_fragments = mf;
        h.fragment_offset = IpFragOffset::try_new(frag).unwrap();
        let opts: Vec<u8> = (0..opt_words * 4).map(|i| opt_seed.wrapping_add(i as u8)).collect();
        h.options = opts[..].try_into().unwrap();
        h.total_len = (h.header_len() + payload.len()) as u16;
        // Protocol 51 (AH) would make etherparse parse an extension header.
        if proto == 51 {
            h.protocol = IpNumber(50);
        }
        h.header_checksum = h.calc_header_checksum();
        (h, payload)
    }
}

proptest! {
    #[test]
    fn ipv4_matches_etherparse((h, payload) in ipv4_header(), pad in bytes(10)) {
        let mut b = h.to_bytes().to_vec();
        b.extend_from_slice(&payload);
        b.extend_from_slice(&pad);

        let ours = Ipv4Packet::new_checked(&b[..]).unwrap();
        let s = Ipv4Slice::from_slice(&b).unwrap();
        let t = s.header();
        prop_assert_eq!(ours.version(), t.version());
        prop_assert_eq!(ours.ihl(), t.ihl());
        prop_assert_eq!(ours.dscp(), t.dcp().value());
        prop_assert_eq!(ours.ecn(), t.ecn().value());
        prop_assert_eq!(ours.total_len(), t.total_len());
        prop_assert_eq!(ours.ident(), t.identification());
        prop_assert_eq!(ours.dont_frag(), t.dont_fragment());
        prop_assert_eq!(ours.more_frags(), t.more_fragments());
        prop_assert_eq!(ours.frag_offset(), t.fragments_offset().value() * 8);
        prop_assert_eq!(ours.is_fragment(), t.is_fragmenting_payload());
        prop_assert_eq!(ours.ttl(), t.ttl());
        prop_assert_eq!(ours.protocol(), t.protocol().0);
        prop_assert_eq!(ours.checksum(), t.header_checksum());
        prop_assert_eq!(ours.src(), t.source_addr());
        prop_assert_eq!(ours.dst(), t.destination_addr());
        prop_assert_eq!(ours.options(), t.options());
        prop_assert_eq!(ours.payload(), &payload[..]);
        prop_assert!(ours.verify_checksum());

        // Re-emit through our builder; etherparse must read back the same.
        let r = Ipv4Repr::parse(&ours);
        let mut out = vec![0u8; 20 + payload.len()];
        r.emit(&mut out).unwrap();
        out[20..].copy_from_slice(&payload);
        let back = Ipv4Slice::from_slice(&out).unwrap();
        let bh = back.header();
        prop_assert_eq!(bh.identification(), h.identification);
        prop_assert_eq!(bh.dont_fragment(), h.dont_fragment);
        prop_assert_eq!(bh.more_fragments(), h.more_fragments);
        prop_assert_eq!(bh.fragments_offset(), h.fragment_offset);
        prop_assert_eq!(bh.ttl(), h.time_to_live);
        prop_assert_eq!(bh.protocol(), h.protocol);
        prop_assert_eq!(bh.source(), h.source);
        prop_assert_eq!(bh.destination(), h.destination);
        prop_assert_eq!(back.payload().payload, &payload[..]);
        prop_assert_eq!(bh.header_checksum(), bh.to_header().calc_header_checksum());
        // Without DSCP/ECN/options the bytes are identical to etherparse's.
        let mut plain = h.clone();
        plain.dscp = IpDscp::try_new(0).unwrap();
        plain.ecn = IpEcn::try_new(0).unwrap();
        plain.options = Default::default();
        plain.total_len = (20 + payload.len()) as u16;
        plain.header_checksum = plain.calc_header_checksum();
        prop_assert_eq!(&out[..20], &plain.to_bytes()[..]);
    }

    #[test]
    fn ipv4_emit_matches_etherparse(
        src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(), proto in any::<u8>(), ttl in any::<u8>(),
        ident in any::<u16>(), df in any::<bool>(), mf in any::<bool>(), frag in 0u16..8192,
        payload_len in 0usize..=65515,
    ) {
        let r = Ipv4Repr {
            src: Ipv4Addr::from(src), dst: Ipv4Addr::from(dst), protocol: proto, ttl, ident,
            dont_frag: df, more_frags: mf, frag_offset: frag * 8, payload_len,
        };
        let mut out = [0u8; 20];
        prop_assert_eq!(r.emit(&mut out), Ok(20));
        let mut h = Ipv4Header::new(payload_len as u16, ttl, IpNumber(proto), src, dst).unwrap();
        h.identification = ident;
        h.dont_fragment = df;
        h.more_fragments = mf;
        h.fragment_offset = IpFragOffset::try_new(frag).unwrap();
        h.header_checksum = h.calc_header_checksum();
        prop_assert_eq!(&out[..], &h.to_bytes()[..]);
    }
}

// ---------------------------------------------------------------- TCP

fn tcp_option() -> impl Strategy<Value = TcpOptionElement> {
    prop_oneof![
        Just(TcpOptionElement::Noop),
        any::<u16>().prop_map(TcpOptionElement::MaximumSegmentSize),
        any::<u8>().prop_map(TcpOptionElement::WindowScale),
        Just(TcpOptionElement::SelectiveAcknowledgementPermitted),
        (
            any::<(u32, u32)>(),
            proptest::collection::vec(any::<(u32, u32)>(), 0..=3)
        )
            .prop_map(|(first, more)| {
                let mut rest = [None; 3];
                for (slot, b) in rest.iter_mut().zip(more) {
                    *slot = Some(b);
                }
                TcpOptionElement::SelectiveAcknowledgement(first, rest)
            }),
        any::<(u32, u32)>().prop_map(|(a, b)| TcpOptionElement::Timestamp(a, b)),
    ]
}

/// Maps one of our options to etherparse's representation (None for options
/// etherparse has no element for).
fn to_ep(o: &TcpOption<'_>) -> Option<TcpOptionElement> {
    Some(match *o {
        TcpOption::Nop => TcpOptionElement::Noop,
        TcpOption::Mss(m) => TcpOptionElement::MaximumSegmentSize(m),
        TcpOption::WindowScale(s) => TcpOptionElement::WindowScale(s),
        TcpOption::SackPermitted => TcpOptionElement::SelectiveAcknowledgementPermitted,
        TcpOption::Sack(s) => {
            let v: Vec<(u32, u32)> = s.as_slice().iter().map(|(l, r)| (l.0, r.0)).collect();
            let mut rest = [None; 3];
            for (slot, b) in rest.iter_mut().zip(v.iter().skip(1)) {
                *slot = Some(*b);
            }
            TcpOptionElement::SelectiveAcknowledgement(v[0], rest)
        }
        TcpOption::Timestamps { tsval, tsecr } => TcpOptionElement::Timestamp(tsval, tsecr),
        TcpOption::EndOfList | TcpOption::Unknown { .. } => return None,
    })
}

/// What `TcpRepr::parse` should make of a list of etherparse options.
fn repr_from_ep(h: &TcpHeader, elems: &[TcpOptionElement], payload_len: usize) -> TcpRepr {
    let mut r = TcpRepr {
        src_port: h.source_port,
        dst_port: h.destination_port,
        seq: SeqNumber(h.sequence_number),
        ack: SeqNumber(h.acknowledgment_number),
        flags: ep_flags(h),
        window: h.window_size,
        urgent: h.urgent_pointer,
        payload_len,
        ..TcpRepr::EMPTY
    };
    for e in elems {
        match *e {
            TcpOptionElement::Noop => {}
            TcpOptionElement::MaximumSegmentSize(m) => r.mss = Some(m),
            TcpOptionElement::WindowScale(s) => r.window_scale = Some(s),
            TcpOptionElement::SelectiveAcknowledgementPermitted => r.sack_permitted = true,
            TcpOptionElement::SelectiveAcknowledgement(first, rest) => {
                let mut s = SackBlocks::EMPTY;
                for (a, b) in std::iter::once(first).chain(rest.into_iter().flatten()) {
                    s.push((SeqNumber(a), SeqNumber(b))).unwrap();
                }
                r.sack = s;
            }
            TcpOptionElement::Timestamp(a, b) => {
                r.timestamps = Some(Timestamps { tsval: a, tsecr: b })
            }
        }
    }
    r
}

fn ep_flags(h: &TcpHeader) -> TcpFlags {
    let mut f = TcpFlags::NONE;
    f.set(TcpFlags::FIN, h.fin);
    f.set(TcpFlags::SYN, h.syn);
    f.set(TcpFlags::RST, h.rst);
    f.set(TcpFlags::PSH, h.psh);
    f.set(TcpFlags::ACK, h.ack);
    f.set(TcpFlags::URG, h.urg);
    f.set(TcpFlags::ECE, h.ece);
    f.set(TcpFlags::CWR, h.cwr);
    f
}

prop_compose! {
    fn tcp_segment()(
        sp in any::<u16>(), dp in any::<u16>(), seq in any::<u32>(), ack in any::<u32>(),
        flags in any::<u8>(), ns in any::<bool>(), win in any::<u16>(), urg in any::<u16>(),
        opts in proptest::collection::vec(tcp_option(), 0..6), payload in bytes(64),
        src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(),
    ) -> (TcpHeader, Vec<TcpOptionElement>, Vec<u8>, [u8; 4], [u8; 4]) {
        let mut h = TcpHeader::new(sp, dp, seq, win);
        h.acknowledgment_number = ack;
        h.fin = flags & 0x01 != 0;
        h.syn = flags & 0x02 != 0;
        h.rst = flags & 0x04 != 0;
        h.psh = flags & 0x08 != 0;
        h.ack = flags & 0x10 != 0;
        h.urg = flags & 0x20 != 0;
        h.ece = flags & 0x40 != 0;
        h.cwr = flags & 0x80 != 0;
        h.ns = ns;
        h.urgent_pointer = urg;
        // Keep the longest prefix of options that fits in 40 bytes.
        let mut used = Vec::new();
        for o in opts {
            let mut t = used.clone();
            t.push(o);
            if h.set_options(&t).is_ok() {
                used = t;
            }
        }
        h.set_options(&used).unwrap();
        h.checksum = h.calc_checksum_ipv4_raw(src, dst, &payload).unwrap();
        (h, used, payload, src, dst)
    }
}

proptest! {
    #[test]
    fn tcp_matches_etherparse((h, elems, payload, src, dst) in tcp_segment()) {
        let mut b = h.to_bytes().to_vec();
        b.extend_from_slice(&payload);
        let (src, dst) = (Ipv4Addr::from(src), Ipv4Addr::from(dst));

        let ours = TcpPacket::new_checked(&b[..]).unwrap();
        let t = TcpSlice::from_slice(&b).unwrap();
        prop_assert_eq!(ours.src_port(), t.source_port());
        prop_assert_eq!(ours.dst_port(), t.destination_port());
        prop_assert_eq!(ours.seq_number(), SeqNumber(t.sequence_number()));
        prop_assert_eq!(ours.ack_number(), SeqNumber(t.acknowledgment_number()));
        prop_assert_eq!(ours.data_offset(), t.data_offset());
        prop_assert_eq!(ours.reserved() & 1 == 1, t.ns());
        let f = ours.flags();
        prop_assert_eq!(f.contains(TcpFlags::FIN), t.fin());
        prop_assert_eq!(f.contains(TcpFlags::SYN), t.syn());
        prop_assert_eq!(f.contains(TcpFlags::RST), t.rst());
        prop_assert_eq!(f.contains(TcpFlags::PSH), t.psh());
        prop_assert_eq!(f.contains(TcpFlags::ACK), t.ack());
        prop_assert_eq!(f.contains(TcpFlags::URG), t.urg());
        prop_assert_eq!(f.contains(TcpFlags::ECE), t.ece());
        prop_assert_eq!(f.contains(TcpFlags::CWR), t.cwr());
        prop_assert_eq!(ours.window(), t.window_size());
        prop_assert_eq!(ours.checksum(), t.checksum());
        prop_assert_eq!(ours.urgent(), t.urgent_pointer());
        prop_assert_eq!(ours.options(), t.options());
        prop_assert_eq!(ours.payload(), t.payload());
        prop_assert!(ours.verify_checksum(src, dst));

        // Options: same elements, in order (etherparse pads with END, which it
        // does not report; we report EndOfList and stop).
        let mine: Vec<TcpOptionElement> = ours
            .options_iter()
            .map(|o| o.unwrap())
            .filter_map(|o| to_ep(&o))
            .collect();
        let theirs: Vec<TcpOptionElement> = t.options_iterator().map(|o| o.unwrap()).collect();
        prop_assert_eq!(&mine, &theirs);
        prop_assert_eq!(&mine, &elems);

        // Repr and re-emit: etherparse reads back the same values.
        let r = TcpRepr::parse(&ours).unwrap();
        prop_assert_eq!(r, repr_from_ep(&h, &elems, payload.len()));
        let mut out = vec![0u8; 60 + payload.len()];
        let n = r.emit_with_payload(&mut out, src, dst, &payload).unwrap();
        let back = TcpSlice::from_slice(&out[..n]).unwrap();
        let bh = back.to_header();
        let back_elems: Vec<TcpOptionElement> =
            back.options_iterator().map(|o| o.unwrap()).collect();
        let mut h2 = h.clone();
        h2.ns = false; // we do not emit the old NS bit
        prop_assert_eq!(repr_from_ep(&bh, &back_elems, back.payload().len()), r);
        prop_assert_eq!(back.payload(), &payload[..]);
        prop_assert_eq!(bh.checksum, bh.calc_checksum_ipv4_raw(
            src.octets(), dst.octets(), back.payload()).unwrap());
        prop_assert_eq!(ep_flags(&bh), ep_flags(&h2));
    }

    /// Arbitrary option bytes: wherever etherparse reads an option, we read
    /// the same; where etherparse reports an error, we report one too or an
    /// unknown kind (etherparse has no element for unknown kinds).
    #[test]
    fn tcp_options_bytes_match_etherparse(raw in proptest::collection::vec(
        prop_oneof![0u8..12, any::<u8>()], 0..40)
    ) {
        let mut ours = TcpOptions::new(&raw);
        let theirs = TcpOptionsIterator::from_slice(&raw);
        for t in theirs {
            match t {
                Ok(e) => {
                    let o = ours.next().expect("we stopped early").unwrap();
                    prop_assert_eq!(to_ep(&o), Some(e));
                }
                Err(_) => {
                    match ours.next() {
                        Some(Err(_)) | Some(Ok(TcpOption::Unknown { .. })) => {}
                        other => prop_assert!(false, "etherparse error, we gave {:?}", other),
                    }
                    break;
                }
            }
        }
    }
}

// ---------------------------------------------------------------- UDP

proptest! {
    #[test]
    fn udp_matches_etherparse(
        sp in any::<u16>(), dp in any::<u16>(), payload in bytes(100), pad in bytes(8),
        src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(),
    ) {
        let ip = Ipv4Header::new(
            (8 + payload.len()) as u16, 64, IpNumber::UDP, src, dst).unwrap();
        let h = UdpHeader::with_ipv4_checksum(sp, dp, &ip, &payload).unwrap();
        let mut b = h.to_bytes().to_vec();
        b.extend_from_slice(&payload);
        b.extend_from_slice(&pad);
        let (s, d) = (Ipv4Addr::from(src), Ipv4Addr::from(dst));

        let ours = UdpPacket::new_checked(&b[..]).unwrap();
        let t = UdpSlice::from_slice(&b).unwrap();
        prop_assert_eq!(ours.src_port(), t.source_port());
        prop_assert_eq!(ours.dst_port(), t.destination_port());
        prop_assert_eq!(ours.len(), t.length());
        prop_assert_eq!(ours.checksum(), t.checksum());
        prop_assert_eq!(ours.payload(), t.payload());
        prop_assert!(ours.verify_checksum(s, d));

        let r = UdpRepr::parse(&ours);
        let mut out = vec![0u8; 8 + payload.len()];
        let n = r.emit_with_payload(&mut out, s, d, &payload).unwrap();
        prop_assert_eq!(&out[..n], &b[..n]);
    }
}

// ---------------------------------------------------------------- ICMP

proptest! {
    #[test]
    fn icmp_echo_matches_etherparse(
        reply in any::<bool>(), id in any::<u16>(), seq in any::<u16>(), data in bytes(100),
    ) {
        let echo = IcmpEchoHeader { id, seq };
        let ty = if reply { Icmpv4Type::EchoReply(echo) } else { Icmpv4Type::EchoRequest(echo) };
        let h = Icmpv4Header::with_checksum(ty, &data);
        let mut b = h.to_bytes().to_vec();
        b.extend_from_slice(&data);

        let ours = IcmpPacket::new_checked(&b[..]).unwrap();
        let t = Icmpv4Slice::from_slice(&b).unwrap();
        prop_assert_eq!(ours.msg_type(), t.type_u8());
        prop_assert_eq!(ours.code(), t.code_u8());
        prop_assert_eq!(ours.checksum(), t.checksum());
        prop_assert_eq!(ours.rest_of_header(), t.bytes5to8());
        prop_assert_eq!(ours.echo_ident(), id);
        prop_assert_eq!(ours.echo_seq(), seq);
        prop_assert_eq!(ours.data(), t.payload());
        prop_assert!(ours.verify_checksum());

        let mut out = vec![0u8; 8 + data.len()];
        let n = icmp::emit_echo(&mut out, reply, id, seq, &data).unwrap();
        prop_assert_eq!(&out[..n], &b[..]);
    }

    #[test]
    fn icmp_dest_unreachable_parses_in_etherparse(
        (h, payload) in ipv4_header(), code in 0u8..16, mtu in any::<u16>(), room in 8usize..120,
    ) {
        let mut orig = h.to_bytes().to_vec();
        orig.extend_from_slice(&payload);
        let mut out = vec![0u8; room];
        let mtu = if code == icmp::CODE_FRAG_NEEDED { mtu } else { 0 };
        let n = icmp::emit_dest_unreachable(&mut out, code, mtu, &orig).unwrap();
        let quoted = (h.header_len() + 8).min(orig.len()).min(room - 8);
        prop_assert_eq!(n, 8 + quoted);
        let t = Icmpv4Slice::from_slice(&out[..n]).unwrap();
        prop_assert_eq!(t.type_u8(), icmp::TYPE_DEST_UNREACHABLE);
        prop_assert_eq!(t.code_u8(), code);
        prop_assert_eq!(t.payload(), &orig[..quoted]);
        prop_assert_eq!(t.checksum(), t.icmp_type().calc_checksum(t.payload()));
        if code == icmp::CODE_FRAG_NEEDED {
            match t.icmp_type() {
                Icmpv4Type::DestinationUnreachable(
                    etherparse::icmpv4::DestUnreachableHeader::FragmentationNeeded { next_hop_mtu },
                ) => prop_assert_eq!(next_hop_mtu, mtu),
                other => prop_assert!(false, "{:?}", other),
            }
        }
        prop_assert!(IcmpPacket::new_checked(&out[..n]).unwrap().verify_checksum());
    }
}

// ---------------------------------------------------------------- arbitrary bytes

/// Touches every accessor of every view that accepts `b`.
fn touch_all(b: &[u8]) {
    let (s, d) = (Ipv4Addr::LOCALHOST, Ipv4Addr::BROADCAST);
    if let Ok(f) = EthernetFrame::new_checked(b) {
        let _ = (f.src(), f.dst(), f.ethertype(), f.payload());
    }
    if let Ok(p) = ArpPacket::new_checked(b) {
        let _ = (
            p.operation(),
            p.sender_hw(),
            p.sender_ip(),
            p.target_hw(),
            p.target_ip(),
        );
    }
    if let Ok(p) = Ipv4Packet::new_checked(b) {
        let _ = (
            p.version(),
            p.ihl(),
            p.dscp(),
            p.ecn(),
            p.total_len(),
            p.ident(),
            p.dont_frag(),
            p.more_frags(),
            p.frag_offset(),
            p.ttl(),
            p.protocol(),
            p.checksum(),
            p.src(),
            p.dst(),
            p.options(),
            p.payload(),
            p.verify_checksum(),
            p.is_fragment(),
        );
    }
    if let Ok(p) = IcmpPacket::new_checked(b) {
        let _ = (
            p.msg_type(),
            p.code(),
            p.checksum(),
            p.echo_ident(),
            p.echo_seq(),
            p.next_hop_mtu(),
            p.data(),
            p.verify_checksum(),
        );
    }
    if let Ok(p) = UdpPacket::new_checked(b) {
        let _ = (
            p.src_port(),
            p.dst_port(),
            p.len(),
            p.checksum(),
            p.payload(),
        );
        let _ = p.verify_checksum(s, d);
    }
    if let Ok(p) = TcpPacket::new_checked(b) {
        let _ = (
            p.src_port(),
            p.dst_port(),
            p.seq_number(),
            p.ack_number(),
            p.flags(),
            p.window(),
            p.checksum(),
            p.urgent(),
            p.payload(),
            p.seq_len(),
            p.verify_checksum(s, d),
        );
        let _ = p.options_iter().count();
        let _ = TcpRepr::parse(&p);
    }
}

/// Random bytes biased towards passing the first checks.
fn nearly_valid() -> impl Strategy<Value = Vec<u8>> {
    (bytes(120), any::<u8>(), any::<u8>(), any::<bool>()).prop_map(|(mut b, first, lenb, fix)| {
        if fix && b.len() >= 20 {
            b[0] = 0x40 | (first & 0x0F); // IPv4, random IHL
            b[2] = 0;
            b[3] = lenb % (b.len() as u8 + 8); // total_len near the buffer length
            b[4] = 0;
            b[5] = lenb % (b.len() as u8 + 8); // UDP length near the buffer length
            b[12] = first & 0xF0; // TCP data offset
        }
        b
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(b in prop_oneof![bytes(120), nearly_valid()]) {
        touch_all(&b);
        for i in 0..b.len().min(40) {
            touch_all(&b[i..]);
        }
    }

    /// Where the checks are the same, we accept exactly what etherparse
    /// accepts, and read the same values.
    #[test]
    fn acceptance_matches_etherparse(b in nearly_valid()) {
        // IPv4 (etherparse would go on to parse an AH extension for proto 51).
        if b.get(9) != Some(&51) {
            let ours = Ipv4Packet::new_checked(&b[..]);
            let theirs = Ipv4Slice::from_slice(&b);
            prop_assert_eq!(ours.is_ok(), theirs.is_ok());
            if let (Ok(o), Ok(t)) = (ours, theirs) {
                prop_assert_eq!(o.payload(), t.payload().payload);
                prop_assert_eq!(o.options(), t.header().options());
            }
        }
        // TCP.
        let ours = TcpPacket::new_checked(&b[..]);
        let theirs = TcpSlice::from_slice(&b);
        prop_assert_eq!(ours.is_ok(), theirs.is_ok());
        if let (Ok(o), Ok(t)) = (ours, theirs) {
            prop_assert_eq!(o.payload(), t.payload());
            prop_assert_eq!(o.options(), t.options());
        }
        // UDP (etherparse accepts length 0 as "use the buffer length").
        if b.len() < 6 || b[4..6] != [0, 0] {
            let ours = UdpPacket::new_checked(&b[..]);
            let theirs = UdpSlice::from_slice(&b);
            prop_assert_eq!(ours.is_ok(), theirs.is_ok());
            if let (Ok(o), Ok(t)) = (ours, theirs) {
                prop_assert_eq!(o.payload(), t.payload());
            }
        }
        // ICMP (etherparse also checks the fixed 20-byte length of timestamp
        // messages, types 13/14, RFC 792; our view does not interpret them).
        if !matches!(b.first(), Some(13 | 14)) {
            prop_assert_eq!(IcmpPacket::new_checked(&b[..]).is_ok(), Icmpv4Slice::from_slice(&b).is_ok());
        }
        // Ethernet.
        prop_assert_eq!(
            EthernetFrame::new_checked(&b[..]).is_ok(),
            Ethernet2HeaderSlice::from_slice(&b).is_ok()
        );
    }
}
