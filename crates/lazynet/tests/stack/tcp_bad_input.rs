//! Hostile TCP input through a running stack that has a listener and live
//! connections: random and mutated segments carrying the 4-tuples of the
//! real connections (so they land on the connections' channels), SYNs,
//! ACKs and junk to the listener, and segments to closed ports; random
//! flags, sequence and acknowledgment numbers near and far from the
//! connections' own, garbage and truncated options, bad checksums, bad
//! lengths. The real peer keeps talking meanwhile. No panic, every frame
//! accounted for after every batch, channels bounded, the connections'
//! invariants hold, and every buffer comes back at the end.

use std::net::{Ipv4Addr, SocketAddrV4};

use lazynet::demux::{CONTROL, FRAGMENT};
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::stack::{Stack, StackConfig, TcpListener, TcpStream};
use lazynet::wire::checksum;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use lazynet::testkit::{inject, settle, A, B, MAC_A, MAC_B, MS};

const SEC: u64 = 1_000_000_000;
const PORT: u16 = 80;
const CHAN_CAP: usize = 64;

fn frames_total() -> usize {
    if cfg!(debug_assertions) {
        60_000
    } else {
        300_000
    }
}

/// Ethernet + IPv4 around `l4`.
fn ipv4(rng: &mut ChaCha8Rng, src: Ipv4Addr, dst: Ipv4Addr, l4: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + l4.len()];
    f[0..6].copy_from_slice(&MAC_B);
    f[6..12].copy_from_slice(&MAC_A);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&(rng.next_u32() as u16).to_be_bytes());
    if rng.random_bool(0.5) {
        ip[6] = 0x40; // DF
    }
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let c = checksum::checksum(&ip[..20]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    ip[20..].copy_from_slice(l4);
    f
}

/// Random TCP options: valid ones, SACK blocks near `seq`, garbage,
/// zero and overlong lengths.
fn options(rng: &mut ChaCha8Rng, seq: u32) -> Vec<u8> {
    let mut o = Vec::new();
    for _ in 0..rng.random_range(0..4) {
        match rng.random_range(0..9) {
            0 => o.extend_from_slice(&[2, 4, rng.random(), rng.random()]),
            1 => o.extend_from_slice(&[3, 3, rng.random_range(0..20)]),
            2 => o.extend_from_slice(&[4, 2]),
            3 => {
                let n = rng.random_range(1..5);
                o.extend_from_slice(&[5, 2 + 8 * n]);
                for _ in 0..n {
                    let l = seq
                        .wrapping_add(rng.random_range(0..200_000))
                        .wrapping_sub(100_000);
                    let r = l.wrapping_add(rng.random_range(0..70_000));
                    o.extend_from_slice(&l.to_be_bytes());
                    o.extend_from_slice(&r.to_be_bytes());
                }
            }
            4 => {
                o.extend_from_slice(&[8, 10]);
                o.extend_from_slice(&rng.next_u32().to_be_bytes());
                o.extend_from_slice(&rng.next_u32().to_be_bytes());
            }
            5 => o.push(1),
            6 => o.extend_from_slice(&[rng.random(), rng.random_range(0..3)]),
            7 => o.extend_from_slice(&[rng.random(), 40]),
            _ => o.extend((0..rng.random_range(1..12)).map(|_| rng.random::<u8>())),
        }
    }
    o.truncate(40);
    while o.len() % 4 != 0 {
        o.push(0);
    }
    o
}

/// A TCP segment from `src` to `dst`, correct checksum unless `bad_sum`.
#[allow(clippy::too_many_arguments)]
fn tcp(
    rng: &mut ChaCha8Rng,
    src: SocketAddrV4,
    dst: SocketAddrV4,
    seq: u32,
    ack: u32,
    flags: u8,
    payload: usize,
    bad_sum: bool,
) -> Vec<u8> {
    let opts = options(rng, seq);
    let hl = 20 + opts.len();
    let mut t = vec![0u8; hl + payload];
    t[0..2].copy_from_slice(&src.port().to_be_bytes());
    t[2..4].copy_from_slice(&dst.port().to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&ack.to_be_bytes());
    t[12] = ((hl / 4) as u8) << 4;
    t[13] = flags;
    let wnd: u16 = if rng.random_bool(0.2) {
        0
    } else {
        rng.random()
    };
    t[14..16].copy_from_slice(&wnd.to_be_bytes());
    if rng.random_bool(0.1) {
        t[18..20].copy_from_slice(&rng.random::<u16>().to_be_bytes()); // urgent pointer
    }
    t[20..hl].copy_from_slice(&opts);
    rng.fill_bytes(&mut t[hl..]);
    let s = checksum::partial(
        &t,
        checksum::pseudo_header_ipv4(*src.ip(), *dst.ip(), 6, t.len() as u16),
    );
    let mut c = !checksum::fold(s);
    if bad_sum {
        c ^= 1 + rng.random::<u16>() % 0xfffe;
    }
    t[16..18].copy_from_slice(&c.to_be_bytes());
    t
}

/// What the attacker knows of one real connection (from A's side).
#[derive(Clone, Copy)]
struct Tuple {
    a: SocketAddrV4,
    /// A's SND.NXT and RCV.NXT: B's RCV.NXT and SND.NXT, roughly.
    snd: u32,
    rcv: u32,
}

fn random_flags(rng: &mut ChaCha8Rng) -> u8 {
    const F: [u8; 10] = [
        0x10, // ACK
        0x18, // PSH ACK
        0x02, // SYN
        0x12, // SYN ACK
        0x04, // RST
        0x14, // RST ACK
        0x11, // FIN ACK
        0x01, // FIN
        0x00, // none
        0x30, // URG ACK
    ];
    if rng.random_bool(0.1) {
        rng.random()
    } else {
        F[rng.random_range(0..F.len())]
    }
}

fn near(rng: &mut ChaCha8Rng, x: u32) -> u32 {
    match rng.random_range(0..4) {
        0 => x,
        1 => x.wrapping_add(rng.random_range(0..70_000)),
        2 => x.wrapping_sub(rng.random_range(0..70_000)),
        _ => rng.random(),
    }
}

fn hostile(rng: &mut ChaCha8Rng, tuples: &[Tuple]) -> Vec<u8> {
    let b = SocketAddrV4::new(B, PORT);
    let kind = rng.random_range(0..10);
    let mut f = match kind {
        // On a connection's channel: flags, numbers, options, payload.
        0..=5 if !tuples.is_empty() => {
            let t = tuples[rng.random_range(0..tuples.len())];
            let payload = if rng.random_bool(0.5) {
                0
            } else {
                rng.random_range(0..1460)
            };
            let (seq, ack) = (near(rng, t.snd), near(rng, t.rcv));
            let (flags, bad) = (random_flags(rng), rng.random_bool(0.1));
            let l4 = tcp(rng, t.a, b, seq, ack, flags, payload, bad);
            ipv4(rng, *t.a.ip(), B, &l4)
        }
        // To the listener: SYN floods, stray ACKs (cookie checks), junk.
        0..=7 => {
            let src = SocketAddrV4::new(
                Ipv4Addr::new(10, 0, rng.random_range(0..2), rng.random()),
                rng.random_range(1024..1100),
            );
            let flags = if rng.random_bool(0.5) {
                0x02
            } else {
                random_flags(rng)
            };
            let (seq, ack, len) = (rng.random(), rng.random(), rng.random_range(0..64));
            let bad = rng.random_bool(0.05);
            let l4 = tcp(rng, src, b, seq, ack, flags, len, bad);
            ipv4(rng, *src.ip(), B, &l4)
        }
        // Closed ports.
        _ => {
            let src = SocketAddrV4::new(A, rng.random_range(1..65535));
            let dst = SocketAddrV4::new(B, rng.random_range(81..200));
            let (seq, ack, len) = (rng.random(), rng.random(), rng.random_range(0..64));
            let flags = random_flags(rng);
            let l4 = tcp(rng, src, dst, seq, ack, flags, len, false);
            ipv4(rng, A, B, &l4)
        }
    };
    // Mutations after the checksum.
    match rng.random_range(0..10) {
        0 => {
            let n = rng.random_range(14..=f.len());
            f.truncate(n);
        }
        1 => {
            let i = rng.random_range(34..f.len());
            f[i] ^= 1 << rng.random_range(0..8);
        }
        2 => {
            let v: u16 = rng.random();
            f[16..18].copy_from_slice(&v.to_be_bytes()); // IP total length
        }
        3 => f[34 + 12] = rng.random(), // TCP data offset
        _ => {}
    }
    f
}

fn pump(sa: &mut Stack<WireEnd>, sb: &mut Stack<WireEnd>, now: u64) {
    settle(sa, sb, now, 8);
}

fn check(s: &Stack<WireEnd>, conns: &[TcpStream], tag: &str) {
    let st = s.stats();
    assert_eq!(
        st.frames_accounted() + s.queued_frames() as u64,
        st.rx_frames,
        "{tag}: every frame accounted for: {st}"
    );
    for &h in conns {
        if let Ok(r) = s.tcp(h).inspect(|c| c.check_invariants()) {
            r.unwrap_or_else(|e| panic!("{tag}: connection invariant: {e}"));
        }
    }
}

struct World {
    sa: Stack<WireEnd>,
    sb: Stack<WireEnd>,
    l: TcpListener,
    /// A's connections (live or dead; dead ones are closed and dropped).
    ca: Vec<TcpStream>,
    /// B's accepted connections.
    cb: Vec<TcpStream>,
}

impl World {
    fn tuples(&mut self) -> Vec<Tuple> {
        self.ca
            .iter()
            .filter_map(|&h| {
                self.sa
                    .tcp(h)
                    .inspect(|c| Tuple {
                        a: c.local(),
                        snd: c.snd_nxt().0,
                        rcv: c.rcv_nxt().0,
                    })
                    .ok()
            })
            .collect()
    }

    /// The applications: A keeps two connections open and writes, B
    /// accepts, reads and writes back; handles that failed are closed.
    fn apps(&mut self, rng: &mut ChaCha8Rng, now: u64, buf: &mut [u8]) {
        if self.ca.len() < 3 {
            if let Ok(h) = self.sa.tcp_connect(SocketAddrV4::new(B, PORT), None, now) {
                self.ca.push(h);
            }
        }
        while let Ok(h) = self.sb.listener_mut(self.l).accept(now) {
            self.cb.push(h);
        }
        let msg = [0x42u8; 3000];
        for (s, hs) in [(&mut self.sa, &mut self.ca), (&mut self.sb, &mut self.cb)] {
            hs.retain(|&h| {
                let _ = s.tcp_mut(h).send(&msg[..rng.random_range(0..3000)], now);
                let mut ok = true;
                for _ in 0..8 {
                    match s.tcp_mut(h).recv(buf, now) {
                        Ok(n) if n > 0 => {}
                        Err(lazynet::socket::SocketError::WouldBlock) => break,
                        _ => {
                            ok = false;
                            break;
                        }
                    }
                }
                if !ok || s.tcp(h).error().ok().flatten().is_some() {
                    let _ = s.tcp_mut(h).close(now);
                    return false;
                }
                true
            });
        }
    }
}

#[test]
fn hostile_tcp_segments_on_live_connections_and_a_listener() {
    let (a, b) = WirePair::new(WireConfig {
        buf_count: 4096,
        ..WireConfig::default()
    })
    .unwrap();
    let (a_free0, b_free0) = (a.free_buffers(), b.free_buffers());
    let sa = Stack::new(
        a,
        StackConfig {
            addr: A,
            seed: 3,
            ..StackConfig::default()
        },
    );
    let mut sb = Stack::new(
        b,
        StackConfig {
            addr: B,
            seed: 4,
            tcp_channel_cap: CHAN_CAP,
            ..StackConfig::default()
        },
    );
    let l = sb
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT), None, None)
        .unwrap();
    let mut w = World {
        sa,
        sb,
        l,
        ca: Vec::new(),
        cb: Vec::new(),
    };
    let mut rng = ChaCha8Rng::seed_from_u64(0x7c9);
    let mut buf = vec![0u8; 65536];
    let mut now = SEC;
    let (mut sent, mut batches, mut max_queued) = (0usize, 0u64, 0usize);
    let mut connected = 0u64;
    while sent < frames_total() {
        batches += 1;
        w.apps(&mut rng, now, &mut buf);
        let tuples = w.tuples();
        if !tuples.is_empty() {
            connected += 1;
        }
        for _ in 0..16 {
            let f = hostile(&mut rng, &tuples);
            if inject(w.sa.nic_mut(), &f) {
                sent += 1;
            }
        }
        now += rng.random_range(0..20) * MS;
        pump(&mut w.sa, &mut w.sb, now);
        max_queued = max_queued.max(w.sb.queued_frames());
        check(&w.sb, &w.cb, "B");
        check(&w.sa, &w.ca, "A");
    }
    // Bounded: control, fragments, the listener and each connection's
    // channel (at most three of A's plus whatever B accepted meanwhile,
    // each capped at CHAN_CAP).
    let d = w.sb.demux();
    let cap = d.channel(CONTROL).unwrap().capacity()
        + d.channel(FRAGMENT).unwrap().capacity()
        + CHAN_CAP * (1 + 64);
    assert!(max_queued <= cap, "{max_queued} > {cap}");
    assert!(
        connected * 2 > batches,
        "connections were mostly up: {connected}/{batches}"
    );
    let st = w.sb.stats();
    println!("{sent} hostile frames, {batches} batches\n{st}");
    assert!(st.tcp.segments_in > 10_000 && st.tcp.resets_sent > 100);

    // Close everything; let retransmissions and TIME-WAIT run out.
    for h in w.ca.drain(..) {
        let _ = w.sa.tcp_mut(h).close(now);
    }
    for h in w.cb.drain(..) {
        let _ = w.sb.tcp_mut(h).close(now);
    }
    w.sb.listener_mut(w.l).close(now).unwrap();
    for _ in 0..2000 {
        if w.sa.tcp_connections() + w.sb.tcp_connections() == 0 {
            break;
        }
        now += SEC;
        pump(&mut w.sa, &mut w.sb, now);
    }
    assert_eq!(
        (w.sa.tcp_connections(), w.sb.tcp_connections()),
        (0, 0),
        "connections gone"
    );
    for _ in 0..4 {
        now += SEC;
        pump(&mut w.sa, &mut w.sb, now);
    }
    check(&w.sa, &[], "A");
    check(&w.sb, &[], "B");
    assert_eq!(w.sb.queued_frames(), 0);
    w.sa.nic_mut().reclaim();
    w.sb.nic_mut().reclaim();
    assert_eq!(
        w.sa.nic().free_buffers(),
        a_free0,
        "A's buffers all came back"
    );
    assert_eq!(
        w.sb.nic().free_buffers(),
        b_free0,
        "B's buffers all came back"
    );
}
