//! The daemon's trust boundary, one forged kind at a time: a hostile
//! application (attached by hand, no stack) asks the daemon to send
//! frames it has no right to — ICMP about another's flows, fragments of
//! datagrams it did not start, segments from another's ports — and binds
//! ports that are not its own; the peer must see none of it, every refusal
//! counted by its kind. And one port authority: MemNet clients and
//! applications cannot take each other's ports.

use std::net::Ipv4Addr;

use lazynet::mem::area::{AppCounter, Cmd, Op, Refusal};
use lazynet::mem::Desc;
use lazynet::wire::checksum::checksum;

use crate::hostile::*;

/// Writes `f` into buffer `buf` of `h`'s area and asks the daemon to
/// send it.
fn send(h: &mut Harness, buf: u32, f: &[u8]) {
    let raw = h.hostile.as_mut().unwrap();
    let at = raw.area.layout().pool as u64 + u64::from(buf) * 2048;
    std::os::unix::fs::FileExt::write_at(&raw.file, f, at).unwrap();
    raw.tx.push_one(Desc::new(buf, f.len() as u16)).unwrap();
}

/// Steps the daemon and collects what reached the peer.
fn sent_to_peer(h: &mut Harness) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for _ in 0..8 {
        h.daemon.step();
        h.pump_peer(|f| out.push(f.to_vec()));
    }
    out
}

fn counter(h: &mut Harness, c: AppCounter) -> u64 {
    h.daemon.poke();
    h.step(1);
    h.hostile.as_ref().unwrap().area.published().counter(c)
}

/// An IPv4 frame from us with `ident`, fragment fields and `payload`
/// (header checksummed).
fn ip_frame(mac: [u8; 6], proto: u8, ident: u16, frag: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let mut h = [0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
    h[4..6].copy_from_slice(&ident.to_be_bytes());
    h[6..8].copy_from_slice(&frag.to_be_bytes());
    h[8] = 64;
    h[9] = proto;
    h[12..16].copy_from_slice(&US.octets());
    h[16..20].copy_from_slice(&PEER.octets());
    let c = checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(payload);
    f
}

/// ICMP destination unreachable (port unreachable) quoting a UDP datagram
/// from the peer's port 5000 to our `port`.
fn port_unreachable(mac: [u8; 6], port: u16) -> Vec<u8> {
    let quoted = udp_frame(PEER_MAC, mac, PEER, US, 5000, port, b"hi");
    let mut m = vec![3u8, 3, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(&quoted[14..14 + 28]);
    let c = checksum(&m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    ip_frame(mac, 1, 1, 0, &m)
}

#[test]
fn forged_icmp_fragments_and_ports_never_reach_the_wire() {
    let mut h = Harness::new("trust-forged");
    // A well-behaved application holds UDP port 7.
    let mut good = h.attach_raw().unwrap();
    good.cmd
        .push_one(Cmd {
            seq: 1,
            op: Op::BindUdp as u32,
            slot: 2,
            id: 2,
            lport: 7,
            ..Cmd::default()
        })
        .unwrap();
    h.step(4);
    assert_eq!(good.reply.pop_one().map(|r| r.code), Some(0));
    h.hostile = h.attach_raw();
    let mac = h.daemon.stack().mac();
    let (mine, _) = {
        let w = h.hostile.as_ref().unwrap().welcome;
        (w.eph_first, w.eph_last)
    };
    // "Port unreachable" about the good application's port 7, and an
    // echo request: ICMP that is not the hostile application's to send.
    send(&mut h, 0, &port_unreachable(mac, 7));
    let mut echo = vec![8u8, 0, 0, 0, 0, 1, 0, 1];
    let c = checksum(&echo);
    echo[2..4].copy_from_slice(&c.to_be_bytes());
    send(&mut h, 1, &ip_frame(mac, 1, 2, 0, &echo));
    // A later fragment of a datagram it never began.
    send(&mut h, 2, &ip_frame(mac, 17, 77, 185, &[0u8; 64]));
    // UDP from the good application's port.
    send(
        &mut h,
        3,
        &udp_frame(mac, PEER_MAC, US, PEER, 7, 5000, b"x"),
    );
    assert!(sent_to_peer(&mut h).is_empty(), "a forged frame was sent");
    assert_eq!(counter(&mut h, AppCounter::TxBadIcmp), 2);
    assert_eq!(counter(&mut h, AppCounter::TxBadFragment), 1);
    assert_eq!(counter(&mut h, AppCounter::TxBadPort), 1);

    // What is its own passes: an ICMP error about its own port, and a
    // datagram in two fragments from its own port, whose identification
    // the daemon replaces, the same in both.
    send(&mut h, 4, &port_unreachable(mac, mine));
    let whole = udp_frame(mac, PEER_MAC, US, PEER, mine, 5000, &[7u8; 100]);
    let udp = &whole[34..];
    send(&mut h, 5, &ip_frame(mac, 17, 0x4242, 0x2000, &udp[..64]));
    send(&mut h, 6, &ip_frame(mac, 17, 0x4242, 64 / 8, &udp[64..]));
    let got = sent_to_peer(&mut h);
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[0][23], 1);
    let ident = |f: &[u8]| u16::from_be_bytes([f[18], f[19]]);
    assert_eq!(ident(&got[1]), ident(&got[2]));
    assert_ne!(
        ident(&got[1]),
        0x4242,
        "the daemon chose the identification"
    );
    for f in &got {
        assert_eq!(checksum(&f[14..34]), 0, "IPv4 header checksum redone");
    }
}

#[test]
fn applications_bind_only_outside_others_ranges_and_a_taken_4_tuple_is_answered() {
    let mut h = Harness::new("trust-ports");
    h.hostile = h.attach_raw();
    let raw = h.hostile.as_mut().unwrap();
    let (first, last) = (raw.welcome.eph_first, raw.welcome.eph_last);
    let cmd = |seq, op: Op, slot, lport, rport| Cmd {
        seq,
        op: op as u32,
        slot,
        id: slot,
        laddr: 0,
        raddr: u32::from(PEER),
        lport,
        rport,
        pad: 0,
    };
    // In the next application's range, and in the daemon's own (its
    // MemNet clients' connections): refused. Its own range: taken.
    raw.cmd
        .push_one(cmd(1, Op::Listen, 2, last + 1, 0))
        .unwrap();
    raw.cmd.push_one(cmd(2, Op::BindUdp, 3, 45000, 0)).unwrap();
    raw.cmd.push_one(cmd(3, Op::Listen, 4, first, 0)).unwrap();
    // A connection, then the same 4-tuple again (an application repeating
    // its own): the second is refused, and the refusal is answered with
    // the channel it was for, though connections are not waited for.
    raw.cmd
        .push_one(cmd(4, Op::Conn, 5, first + 1, 5000))
        .unwrap();
    raw.cmd
        .push_one(cmd(5, Op::Conn, 6, first + 1, 5000))
        .unwrap();
    // A connection from a port that is not its own.
    raw.cmd.push_one(cmd(6, Op::Conn, 7, 80, 5000)).unwrap();
    h.step(4);
    let raw = h.hostile.as_mut().unwrap();
    let mut replies = Vec::new();
    while let Some(r) = raw.reply.pop_one() {
        replies.push((r.seq, Refusal::from_code(r.code), r.id));
    }
    assert_eq!(
        replies,
        vec![
            (1, Some(Refusal::InUse), 2),
            (2, Some(Refusal::InUse), 3),
            (3, None, 4),
            (5, Some(Refusal::InUse), 6),
            (6, Some(Refusal::InUse), 7),
        ]
    );
}

#[test]
fn memnet_clients_and_applications_cannot_take_each_others_ports() {
    let mut h = crate::hostile_memnet::Harness::new("trust-memnet-ports");
    // An application attached to the same daemon holds TCP port 80.
    let mut app = h.attach_app().unwrap();
    let (first, _) = (app.welcome.eph_first, app.welcome.eph_last);
    app.cmd
        .push_one(Cmd {
            seq: 1,
            op: Op::Listen as u32,
            slot: 2,
            id: 2,
            lport: 80,
            ..Cmd::default()
        })
        .unwrap();
    h.step(4);
    assert_eq!(app.reply.pop_one().map(|r| r.code), Some(0));
    // The MemNet client may take neither port 80 nor one of the
    // application's range.
    assert_eq!(
        h.listen(80),
        Some(lazynet::mem::jobs::JobError::AddrInUse as u32)
    );
    assert_eq!(
        h.listen(first),
        Some(lazynet::mem::jobs::JobError::AddrInUse as u32)
    );
    assert_eq!(h.listen(8080), Some(0));
    // And the application may not take the client's.
    app.cmd
        .push_one(Cmd {
            seq: 2,
            op: Op::Listen as u32,
            slot: 3,
            id: 3,
            lport: 8080,
            ..Cmd::default()
        })
        .unwrap();
    h.step(4);
    assert_eq!(
        app.reply.pop_one().map(|r| Refusal::from_code(r.code)),
        Some(Some(Refusal::InUse))
    );
    let _ = Ipv4Addr::UNSPECIFIED;
}
