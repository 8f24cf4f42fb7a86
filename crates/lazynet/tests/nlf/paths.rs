//! The NLF send paths: v1, v2 and v3 must write headers byte-identical to
//! the traditional path's, and every assembled frame must verify with the
//! `wire` views, including the −0 cases (a UDP sum folding to 0xFFFF, which
//! is sent as checksum 0xFFFF; all-zero and all-0xFF payloads).

use std::net::Ipv4Addr;

use lazynet::nlf::paths::{self, MAX_HEADER};
use lazynet::nlf::{ClientConfig, ClientHeader, NlfError, PacketMeta, RtpParams, SendPath};
use lazynet::wire::checksum::{fold, partial, pseudo_header_ipv4};
use lazynet::wire::ipv4::PROTO_UDP;
use lazynet::wire::{EthernetAddress, EthernetFrame, Ipv4Packet, UdpPacket};
use proptest::prelude::*;

fn config(seed: u64, rtp: bool) -> ClientConfig {
    let b = seed.to_be_bytes();
    ClientConfig {
        src_mac: EthernetAddress([0x02, b[0], b[1], b[2], b[3], b[4]]),
        dst_mac: EthernetAddress([0x02, b[5], b[6], b[7], b[0], b[1]]),
        src_ip: Ipv4Addr::new(b[0], b[1], b[2], b[3]),
        dst_ip: Ipv4Addr::new(b[4], b[5], b[6], b[7]),
        src_port: u16::from_be_bytes([b[2], b[5]]),
        dst_port: u16::from_be_bytes([b[7], b[1]]),
        ttl: b[3] | 1,
        dont_frag: b[6] & 1 == 1,
        rtp: rtp.then_some(RtpParams {
            ssrc: (seed >> 13) as u32,
            seq_base: (seed >> 3) as u16,
            ts_base: (seed >> 29) as u32,
        }),
    }
}

fn packet(media: &[u8], offset: usize, len: usize, rtp_seq: u32, rtp_ts: u32) -> PacketMeta {
    PacketMeta {
        offset: offset as u64,
        len: len as u32,
        sum: partial(&media[offset..offset + len], 0),
        send_ns: 0,
        rtp_ts,
        rtp_seq,
    }
}

/// Checks a whole frame with the `wire` views and an independent full
/// recomputation; returns the UDP checksum field.
fn verify_frame(frame: &[u8], cfg: &ClientConfig, payload: &[u8]) -> u16 {
    let eth = EthernetFrame::new_checked(frame).expect("ethernet");
    assert_eq!(eth.dst(), cfg.dst_mac);
    assert_eq!(eth.src(), cfg.src_mac);
    assert_eq!(eth.ethertype(), 0x0800);
    let ip = Ipv4Packet::new_checked(eth.payload()).expect("ipv4");
    assert!(ip.verify_checksum(), "IPv4 header checksum");
    assert_eq!(ip.src(), cfg.src_ip);
    assert_eq!(ip.dst(), cfg.dst_ip);
    assert_eq!(ip.ttl(), cfg.ttl);
    assert_eq!(ip.dont_frag(), cfg.dont_frag);
    assert_eq!(ip.protocol(), PROTO_UDP);
    assert_eq!(ip.packet().len(), frame.len() - 14);
    let udp = UdpPacket::new_checked(ip.payload()).expect("udp");
    assert_eq!(udp.src_port(), cfg.src_port);
    assert_eq!(udp.dst_port(), cfg.dst_port);
    assert_ne!(udp.checksum(), 0, "a computed 0 must be sent as 0xFFFF");
    assert!(udp.verify_checksum(cfg.src_ip, cfg.dst_ip), "UDP checksum");
    let ph = pseudo_header_ipv4(cfg.src_ip, cfg.dst_ip, PROTO_UDP, udp.len());
    assert_eq!(fold(partial(udp.datagram(), ph)), 0xFFFF);
    let rtp_len = if cfg.rtp.is_some() { 12 } else { 0 };
    assert_eq!(&udp.payload()[rtp_len..], payload);
    udp.checksum()
}

/// Runs all four paths for one packet with the same starting ident;
/// asserts identical headers and valid frames; returns the UDP checksum.
fn check_all(cfg: ClientConfig, ident: u16, media: &[u8], pkt: &PacketMeta) -> u16 {
    let payload = &media[pkt.offset as usize..pkt.offset as usize + pkt.len as usize];
    let mut trad = vec![0u8; MAX_HEADER + payload.len()];
    let mut c = ClientHeader::new(cfg, ident);
    let n = paths::traditional(&mut c, pkt, payload, &mut trad).unwrap();
    let hlen = c.header_len();
    assert_eq!(n, hlen + payload.len());
    assert_eq!(c.ident(), ident.wrapping_add(1));
    let csum = verify_frame(&trad[..n], &cfg, payload);
    if let Some(r) = cfg.rtp {
        let rh = &trad[42..54];
        assert_eq!(rh[0], 0x80);
        assert_eq!(rh[1], 33);
        assert_eq!(
            u16::from_be_bytes([rh[2], rh[3]]),
            r.seq_base.wrapping_add(pkt.rtp_seq as u16)
        );
        assert_eq!(
            u32::from_be_bytes([rh[4], rh[5], rh[6], rh[7]]),
            r.ts_base.wrapping_add(pkt.rtp_ts)
        );
        assert_eq!(u32::from_be_bytes([rh[8], rh[9], rh[10], rh[11]]), r.ssrc);
    }
    for path in [SendPath::V1, SendPath::V2, SendPath::V3] {
        let mut c = ClientHeader::new(cfg, ident);
        // Dirty buffer: every header byte must be written.
        let mut hdr = [0xA5u8; MAX_HEADER + 3];
        let h = paths::send(path, &mut c, pkt, &[], &mut hdr).unwrap();
        assert_eq!(h, hlen, "{path}");
        assert_eq!(c.ident(), ident.wrapping_add(1));
        assert_eq!(
            &hdr[..h],
            &trad[..h],
            "{path} header differs from traditional"
        );
        assert!(
            hdr[h..].iter().all(|&b| b == 0xA5),
            "{path} wrote past the header"
        );
        let mut frame = hdr[..h].to_vec();
        frame.extend_from_slice(payload);
        assert_eq!(verify_frame(&frame, &cfg, payload), csum);
    }
    csum
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn paths_agree(
        seed in any::<u64>(),
        rtp in any::<bool>(),
        ident in any::<u16>(),
        len in 0usize..=9000,
        pre in 0usize..64,
        fill in any::<u8>(),
        media_seed in any::<u32>(),
        rtp_seq in any::<u32>(),
        rtp_ts in any::<u32>(),
    ) {
        let mut x = media_seed | 1;
        let media: Vec<u8> = (0..pre + len + 5)
            .map(|i| {
                x ^= x << 13; x ^= x >> 17; x ^= x << 5;
                if i % 7 == 0 { fill } else { x as u8 }
            })
            .collect();
        let pkt = packet(&media, pre, len, rtp_seq, rtp_ts);
        check_all(config(seed, rtp), ident, &media, &pkt);
    }
}

/// UDP sum of a frame with its checksum field zeroed (to craft −0 cases).
fn udp_sum_without_csum(frame: &[u8], cfg: &ClientConfig) -> u16 {
    let mut d = frame[34..].to_vec();
    d[6] = 0;
    d[7] = 0;
    let ph = pseudo_header_ipv4(cfg.src_ip, cfg.dst_ip, PROTO_UDP, d.len() as u16);
    fold(partial(&d, ph))
}

#[test]
fn negative_zero_udp_checksum_sent_as_ffff() {
    let mut found = 0;
    for seed in 0..40u64 {
        let rtp = seed % 2 == 0;
        let cfg = config(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), rtp);
        for &(pre, len) in &[
            (0usize, 2usize),
            (1, 3),
            (2, 100),
            (3, 1317),
            (0, 1316),
            (5, 9000),
        ] {
            // Media with a hole at an even payload position for the fix-up word.
            let mut media: Vec<u8> = (0..pre + len)
                .map(|i| (i * 31 + seed as usize) as u8)
                .collect();
            let pkt = packet(&media, pre, len, seed as u32, (seed * 3600) as u32);
            let mut c = ClientHeader::new(cfg, 7);
            let mut frame = vec![0u8; MAX_HEADER + len];
            // Zero the fix-up word, measure, then set it so the sum is 0xFFFF.
            media[pre] = 0;
            media[pre + 1] = 0;
            let pkt0 = packet(&media, pre, len, pkt.rtp_seq, pkt.rtp_ts);
            let n = paths::traditional(&mut c, &pkt0, &media[pre..pre + len], &mut frame).unwrap();
            let s = udp_sum_without_csum(&frame[..n], &cfg);
            let w = !s;
            media[pre..pre + 2].copy_from_slice(&w.to_be_bytes());
            let pkt1 = packet(&media, pre, len, pkt.rtp_seq, pkt.rtp_ts);
            let csum = check_all(cfg, 7, &media, &pkt1);
            assert_eq!(csum, 0xFFFF, "crafted sum must fold to 0xFFFF");
            found += 1;
        }
    }
    assert_eq!(found, 240);
}

#[test]
fn all_zero_and_all_ones_payloads() {
    for rtp in [false, true] {
        let cfg = config(0x0123_4567_89AB_CDEF, rtp);
        for fill in [0x00u8, 0xFF] {
            for len in [0usize, 1, 2, 3, 188, 1316, 1317, 8192, 9000] {
                let media = vec![fill; len + 1];
                for pre in [0, 1] {
                    if pre + len <= media.len() {
                        let pkt = packet(&media, pre, len, 0, 0);
                        check_all(cfg, 0xFFFF, &media, &pkt);
                    }
                }
            }
        }
    }
}

#[test]
fn every_ident_including_ip_checksum_zero() {
    // 65536 idents cover every IPv4 header checksum residue, among them the
    // header sum 0xFFFF (checksum field 0x0000).
    let cfg = config(42, true);
    let media = vec![0x5Au8; 1316];
    let pkt = packet(&media, 0, 1316, 1, 90);
    let mut zero_seen = false;
    let mut c2 = ClientHeader::new(cfg, 0);
    let mut c3 = ClientHeader::new(cfg, 0);
    let mut c1 = ClientHeader::new(cfg, 0);
    let mut ct = ClientHeader::new(cfg, 0);
    let mut t = vec![0u8; MAX_HEADER + 1316];
    for _ in 0..=u16::MAX {
        let (mut h1, mut h2, mut h3) = ([0u8; MAX_HEADER], [0u8; MAX_HEADER], [0u8; MAX_HEADER]);
        paths::traditional(&mut ct, &pkt, &media, &mut t).unwrap();
        paths::v1(&mut c1, &pkt, &mut h1).unwrap();
        paths::v2(&mut c2, &pkt, &mut h2).unwrap();
        paths::v3(&mut c3, &pkt, &mut h3).unwrap();
        assert_eq!(h1, t[..MAX_HEADER]);
        assert_eq!(h2, t[..MAX_HEADER]);
        assert_eq!(h3, t[..MAX_HEADER]);
        let ip = Ipv4Packet::new_checked(&t[14..]).unwrap();
        assert!(ip.verify_checksum());
        zero_seen |= ip.checksum() == 0;
    }
    assert!(zero_seen);
    assert_eq!(c3.ident(), 0);
}

#[test]
fn errors_not_panics() {
    let cfg = config(9, true);
    let media = vec![1u8; 100];
    let pkt = packet(&media, 0, 100, 0, 0);
    let mut c = ClientHeader::new(cfg, 0);
    let mut small = [0u8; 53];
    for path in SendPath::ALL {
        let e = paths::send(path, &mut c, &pkt, &media, &mut small).unwrap_err();
        assert!(matches!(e, NlfError::BufferTooSmall { .. }), "{path}: {e}");
    }
    let mut big = vec![0u8; 70_000];
    let huge = PacketMeta { len: 65_500, ..pkt };
    for path in [SendPath::V1, SendPath::V2, SendPath::V3] {
        let e = paths::send(path, &mut c, &huge, &[], &mut big).unwrap_err();
        assert!(matches!(e, NlfError::PayloadTooLong { .. }), "{path}: {e}");
    }
    let e = paths::traditional(&mut c, &pkt, &media[..99], &mut big).unwrap_err();
    assert!(matches!(e, NlfError::PayloadMismatch { .. }), "{e}");
    let max = PacketMeta {
        len: c.max_payload() as u32,
        sum: 0,
        ..pkt
    };
    assert_eq!(paths::v3(&mut c, &max, &mut big).unwrap(), 54);
    assert_eq!(c.ident(), 1, "failed calls do not consume idents");
}
