//! TCP through whole stacks: two lazynet stacks on the in-memory wire, in
//! virtual time (driven through the `Stack` calls that take `now`) and in
//! real time (through the blocking socket API, one thread per stack).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use lazynet::demux::DropReason;
use lazynet::mem::Desc;
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::nic::Nic;
use lazynet::proto::tcp::{ListenConfig, State};
use lazynet::socket::{SocketError, TcpListener, TcpStream};
use lazynet::stack::{EvictMode, Stack, StackConfig, StackDrop, TcpEvent};
use lazynet::wire::ethernet::EthernetFrame;
use lazynet::wire::ipv4::Ipv4Packet;
use lazynet::wire::tcp::{TcpFlags, TcpPacket, TcpRepr};

use lazynet::testkit::{config, connect_accept, data, pump, Pair, A, B, MS};

fn pair() -> (Stack<WireEnd>, Stack<WireEnd>) {
    pair_receiving(EvictMode::Adaptive)
}

/// [`pair`] with B's `rx_evict` set.
fn pair_receiving(mode: EvictMode) -> (Stack<WireEnd>, Stack<WireEnd>) {
    let p = Pair::with(
        WireConfig {
            buf_count: 2048,
            ..WireConfig::default()
        },
        config(A, 1),
        StackConfig {
            rx_evict: mode,
            ..config(B, 2)
        },
    );
    (p.a, p.b)
}

/// Connects A → B:80 in virtual time; returns (client, server) handles.
fn establish<N: Nic>(
    sa: &mut Stack<WireEnd>,
    sb: &mut Stack<N>,
    now: &mut u64,
) -> (TcpStream, TcpStream) {
    let l = sb
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), None, None)
        .unwrap();
    connect_accept(sa, sb, l, 80, now)
}

fn check_accounting<N: Nic>(s: &Stack<N>) {
    let st = s.stats();
    assert_eq!(
        st.frames_accounted() + s.queued_frames() as u64,
        st.rx_frames,
        "every frame accounted for: {st}"
    );
}

#[test]
fn bulk_both_ways_then_close_frees_everything() {
    let (mut sa, mut sb) = pair();
    let mut now = 0;
    let (c, s) = establish(&mut sa, &mut sb, &mut now);
    let total = 2 << 20;
    let (mut sent_a, mut sent_b, mut got_a, mut got_b) = (0, 0, 0, 0);
    let mut buf = vec![0u8; 65536];
    let mut rounds = 0;
    while got_a < total || got_b < total {
        rounds += 1;
        assert!(rounds < 200_000, "stalled: a got {got_a}, b got {got_b}");
        now += 10_000;
        if sent_a < total {
            if let Ok(n) = sa
                .tcp_mut(c)
                .send(&data(sent_a, (total - sent_a).min(16384), 0), now)
            {
                sent_a += n;
            }
        }
        if sent_b < total {
            if let Ok(n) = sb
                .tcp_mut(s)
                .send(&data(sent_b, (total - sent_b).min(16384), 0x5a), now)
            {
                sent_b += n;
            }
        }
        pump(&mut sa, &mut sb, now);
        while let Ok(n) = sb.tcp_mut(s).recv(&mut buf, now) {
            assert!(n > 0);
            assert_eq!(&buf[..n], &data(got_b, n, 0)[..], "B got wrong bytes");
            got_b += n;
        }
        while let Ok(n) = sa.tcp_mut(c).recv(&mut buf, now) {
            assert!(n > 0);
            assert_eq!(&buf[..n], &data(got_a, n, 0x5a)[..], "A got wrong bytes");
            got_a += n;
        }
    }
    sa.tcp_mut(c).close(now).unwrap();
    for _ in 0..50 {
        now += MS;
        pump(&mut sa, &mut sb, now);
    }
    assert_eq!(sb.tcp_mut(s).recv(&mut buf, now), Ok(0), "EOF after FIN");
    sb.tcp_mut(s).close(now).unwrap();
    for _ in 0..50 {
        now += MS;
        pump(&mut sa, &mut sb, now);
    }
    // B closed second: its connection is gone; A's waits in TIME-WAIT, as
    // a compact entry of the TIME-WAIT table (the Connection is freed).
    assert_eq!(sb.tcp_connections(), 0);
    assert_eq!(sa.tcp_connections(), 0);
    assert_eq!(sa.tcp_time_wait_len(), 1);
    assert_eq!(sa.stats().tcp.time_wait_entered, 1);
    now += 61_000 * MS;
    pump(&mut sa, &mut sb, now);
    assert_eq!(sa.tcp_time_wait_len(), 0, "TIME-WAIT over");
    assert_eq!(sa.tcp_mut(c).state(now), Err(SocketError::BadHandle));
    check_accounting(&sa);
    check_accounting(&sb);
    assert_eq!(sa.stats().drops_for(StackDrop::TcpChecksum), 0);
}

/// Sends `total` bytes from `sa` to `sb`, which reads `read` bytes at a
/// time, and checks every byte. Unless `service_first`, B's reads do the
/// protocol work (it services only once a read finds nothing); with it,
/// B's protocol handler runs before every read, so text goes through the
/// receive buffer. Returns B's connection counters.
fn send_to_reader<N: Nic>(
    sa: &mut Stack<WireEnd>,
    sb: &mut Stack<N>,
    total: usize,
    read: usize,
    service_first: bool,
) -> lazynet::proto::tcp::TcpCounters {
    let mut now = 0;
    let (c, s) = establish(sa, sb, &mut now);
    let (mut sent, mut got) = (0, 0);
    let mut buf = vec![0u8; read];
    let mut rounds = 0;
    while got < total {
        rounds += 1;
        assert!(rounds < 100_000, "stalled at {got}");
        now += 10_000;
        if sent < total {
            if let Ok(n) = sa
                .tcp_mut(c)
                .send(&data(sent, (total - sent).min(16384), 3), now)
            {
                sent += n;
            }
        }
        sa.poll(now);
        sa.tcp_service(now, 1024);
        sb.poll(now);
        if service_first {
            sb.tcp_service(now, 1024);
        }
        loop {
            match sb.tcp_mut(s).recv(&mut buf, now) {
                Ok(n) => {
                    assert!(n > 0 && n <= buf.len());
                    assert_eq!(&buf[..n], &data(got, n, 3)[..], "wrong bytes at {got}");
                    got += n;
                }
                Err(SocketError::WouldBlock) => {
                    sb.tcp_service(now, 1024);
                    break;
                }
                Err(e) => panic!("recv: {e}"),
            }
        }
    }
    check_accounting(sb);
    assert_eq!(sb.stats().drops_for(StackDrop::TcpChecksum), 0);
    sb.tcp(s).counters().unwrap()
}

#[test]
fn a_reader_with_less_room_than_a_segment_still_gets_text_placed_directly() {
    // Each read has room for 1000 bytes, less than a segment: each
    // segment's head goes straight into the reader's buffer, its tail into
    // the receive buffer, which the next read empties before placing
    // directly again. Before, such a segment took the ordinary path, and
    // everything queued behind it followed.
    let (mut sa, mut sb) = pair();
    let k = send_to_reader(&mut sa, &mut sb, 512 * 1024, 1000, false);
    let segs = k.segs_in;
    assert!(
        k.direct * 10 >= segs * 9,
        "only {} of {segs} segments placed directly",
        k.direct
    );
}

/// B's stack with `rx_evict` set.
fn receiver<N: Nic>(nic: N, mode: EvictMode) -> Stack<N> {
    Stack::new(
        nic,
        StackConfig {
            rx_evict: mode,
            ..config(B, 2)
        },
    )
}

#[test]
fn evict_always_evicts_every_frame_placed_directly_and_keeps_the_bytes() {
    let (mut sa, mut sb) = pair_receiving(EvictMode::Always);
    let k = send_to_reader(&mut sa, &mut sb, 1 << 20, 65536, false);
    let evicted = sb.stats().tcp.frames_evicted;
    assert!(k.direct > 500, "{} placed directly", k.direct);
    assert_eq!(evicted, k.direct, "every frame placed directly was evicted");
    assert_eq!(sb.stats().evict_switches, 0);
}

#[test]
fn evict_always_evicts_frames_whose_text_went_to_the_receive_buffer() {
    // B's protocol handler runs before it reads: every segment takes the
    // ordinary path, its text copied into the receive buffer.
    let (mut sa, mut sb) = pair_receiving(EvictMode::Always);
    let total = 1 << 20;
    let k = send_to_reader(&mut sa, &mut sb, total, 65536, true);
    assert_eq!(k.direct, 0, "all through the receive buffer");
    let evicted = sb.stats().tcp.frames_evicted as usize;
    assert!(
        evicted >= total / 1448 && evicted <= k.segs_in as usize,
        "{evicted} evicted of {} segments",
        k.segs_in
    );
}

#[test]
fn evict_off_evicts_nothing() {
    let (mut sa, mut sb) = pair_receiving(EvictMode::Off);
    let k = send_to_reader(&mut sa, &mut sb, 1 << 20, 65536, false);
    assert!(k.direct > 500);
    assert_eq!(sb.stats().tcp.frames_evicted, 0);
}

/// A wire end that does not say its buffers are shared with another core
/// (as a TAP device's are not).
struct Local(WireEnd);

impl Nic for Local {
    fn mac(&self) -> [u8; 6] {
        self.0.mac()
    }
    fn mtu(&self) -> usize {
        self.0.mtu()
    }
    fn buffers(&self) -> &lazynet::mem::BufArea {
        self.0.buffers()
    }
    fn buffers_mut(&mut self) -> &mut lazynet::mem::BufArea {
        self.0.buffers_mut()
    }
    fn recv(&mut self, out: &mut [Desc]) -> usize {
        self.0.recv(out)
    }
    fn alloc(&mut self, out: &mut [u32]) -> usize {
        self.0.alloc(out)
    }
    fn send(&mut self, frames: &[Desc]) -> usize {
        self.0.send(frames)
    }
    fn release(&mut self, bufs: &[Desc]) {
        self.0.release(bufs)
    }
    fn flush(&mut self) {
        self.0.flush()
    }
}

#[test]
fn evict_never_evicts_where_the_nic_fills_its_own_buffers() {
    let (a, b) = WirePair::new(WireConfig::default()).unwrap();
    assert!(b.cross_core_buffers());
    let mut sa = Stack::new(a, config(A, 1));
    let local = Local(b);
    assert!(!local.cross_core_buffers());
    let mut sb = receiver(local, EvictMode::Always);
    let k = send_to_reader(&mut sa, &mut sb, 1 << 20, 65536, false);
    assert!(k.direct > 500);
    assert_eq!(sb.stats().tcp.frames_evicted, 0);
}

#[test]
fn closed_port_is_refused_with_rst() {
    let (mut sa, mut sb) = pair();
    let c = sa.tcp_connect(SocketAddrV4::new(B, 81), None, 0).unwrap();
    let mut now = 0;
    for _ in 0..10 {
        now += MS;
        pump(&mut sa, &mut sb, now);
    }
    assert_eq!(sb.stats().tcp.resets_sent, 1);
    assert_eq!(sb.stats().drops_for(StackDrop::TcpNoSocket), 1);
    assert_eq!(sa.tcp(c).error(), Ok(Some(SocketError::ConnectionRefused)));
    let mut buf = [0u8; 8];
    assert_eq!(
        sa.tcp_mut(c).recv(&mut buf, now),
        Err(SocketError::ConnectionRefused)
    );
    check_accounting(&sb);
}

#[test]
fn full_accept_queue_stops_the_listener_and_syns_fall_off_at_its_channel() {
    let (mut sa, mut sb) = pair();
    let lcfg = ListenConfig {
        backlog: 2,
        ..ListenConfig::default()
    };
    let l = sb
        .tcp_listen(SocketAddrV4::new(B, 80), Some(lcfg), None)
        .unwrap();
    let mut now = 0;
    let mut clients = Vec::new();
    for _ in 0..2 {
        clients.push(sa.tcp_connect(SocketAddrV4::new(B, 80), None, now).unwrap());
    }
    for _ in 0..10 {
        now += MS;
        pump(&mut sa, &mut sb, now);
    }
    assert_eq!(sb.listener(l).accept_queue_len(), Ok(2));
    let before = sb.listener(l).counters().unwrap();
    // The queue is full: further SYNs wait in the channel, unprocessed.
    for _ in 0..3 {
        clients.push(sa.tcp_connect(SocketAddrV4::new(B, 80), None, now).unwrap());
    }
    for _ in 0..10 {
        now += MS;
        pump(&mut sa, &mut sb, now);
    }
    assert_eq!(
        sb.listener(l).counters().unwrap(),
        before,
        "no protocol work"
    );
    assert_eq!(sb.listener(l).pending(), Ok(3));
    for c in &clients[2..] {
        assert_eq!(sa.tcp_mut(*c).state(now), Ok(State::SynSent));
    }
    // accept makes room: the listener resumes.
    let s1 = sb.listener_mut(l).accept(now).unwrap();
    let s2 = sb.listener_mut(l).accept(now).unwrap();
    assert_ne!(s1, s2);
    let mut accepted = 2;
    for _ in 0..20 {
        now += MS;
        pump(&mut sa, &mut sb, now);
        while sb.listener_mut(l).accept(now).is_ok() {
            accepted += 1;
        }
    }
    assert_eq!(accepted, 5);
    for c in &clients {
        assert_eq!(sa.tcp_mut(*c).state(now), Ok(State::Established));
    }
    check_accounting(&sa);
    check_accounting(&sb);
}

#[test]
fn a_full_listener_channel_drops_syns_early() {
    let (a, b) = WirePair::new(WireConfig {
        buf_count: 2048,
        ..WireConfig::default()
    })
    .unwrap();
    let mut sa = Stack::new(
        a,
        StackConfig {
            addr: A,
            ..StackConfig::default()
        },
    );
    let mut sb = Stack::new(
        b,
        StackConfig {
            addr: B,
            tcp_channel_cap: 4,
            ..StackConfig::default()
        },
    );
    let lcfg = ListenConfig {
        backlog: 1,
        ..ListenConfig::default()
    };
    let l = sb
        .tcp_listen(SocketAddrV4::new(B, 80), Some(lcfg), None)
        .unwrap();
    let mut now = 0;
    sa.tcp_connect(SocketAddrV4::new(B, 80), None, now).unwrap();
    for _ in 0..5 {
        now += MS;
        pump(&mut sa, &mut sb, now);
    }
    assert_eq!(sb.listener(l).accept_queue_len(), Ok(1));
    for _ in 0..10 {
        sa.tcp_connect(SocketAddrV4::new(B, 80), None, now).unwrap();
    }
    for _ in 0..5 {
        now += MS;
        pump(&mut sa, &mut sb, now);
    }
    assert_eq!(sb.listener(l).pending(), Ok(4));
    assert_eq!(sb.stats().demux.drops_for(DropReason::ChannelFull), 6);
    check_accounting(&sb);
}

#[test]
fn events_name_connections_with_input_once() {
    let (mut sa, mut sb) = pair();
    let mut now = 0;
    let (c, s) = establish(&mut sa, &mut sb, &mut now);
    let mut ev = Vec::new();
    sb.tcp_take_events(&mut ev);
    ev.clear();
    sa.tcp_mut(c).set_nodelay(true).unwrap();
    for _ in 0..3 {
        sa.tcp_mut(c).send(b"hello", now).unwrap();
        now += MS;
        pump(&mut sa, &mut sb, now);
    }
    sb.tcp_take_events(&mut ev);
    assert_eq!(ev, vec![TcpEvent::Conn(s)]);
    let mut buf = [0u8; 64];
    assert_eq!(sb.tcp_mut(s).recv(&mut buf, now), Ok(15));
}

#[test]
fn data_queued_behind_a_full_listener_reaches_the_accepted_connection() {
    // Backlog 1 and one connection waiting: the listener is not processed,
    // so the client's data lands in the listener's channel. After accept
    // installs the connection, those frames move to its channel.
    let (mut sa, mut sb) = pair();
    let lcfg = ListenConfig {
        backlog: 1,
        ..ListenConfig::default()
    };
    let l = sb
        .tcp_listen(SocketAddrV4::new(B, 80), Some(lcfg), None)
        .unwrap();
    let mut now = 0;
    let c = sa.tcp_connect(SocketAddrV4::new(B, 80), None, now).unwrap();
    for _ in 0..5 {
        now += MS;
        pump(&mut sa, &mut sb, now);
    }
    assert_eq!(sb.listener(l).accept_queue_len(), Ok(1));
    sa.tcp_mut(c).set_nodelay(true).unwrap();
    sa.tcp_mut(c).send(b"early ", now).unwrap();
    sa.tcp_mut(c).send(b"data", now).unwrap();
    now += MS;
    pump(&mut sa, &mut sb, now);
    assert_eq!(
        sb.listener(l).pending(),
        Ok(2),
        "waiting behind the full queue"
    );
    let s = sb.listener_mut(l).accept(now).unwrap();
    for _ in 0..5 {
        now += MS;
        pump(&mut sa, &mut sb, now);
    }
    assert_eq!(sb.stats().tcp.redirected, 2);
    let mut buf = [0u8; 64];
    assert_eq!(sb.tcp_mut(s).recv(&mut buf, now), Ok(10));
    assert_eq!(&buf[..10], b"early data");
    check_accounting(&sb);
}

#[test]
fn unread_data_on_close_resets_the_peer() {
    let (mut sa, mut sb) = pair();
    let mut now = 0;
    let (c, s) = establish(&mut sa, &mut sb, &mut now);
    sa.tcp_mut(c).send(b"unread", now).unwrap();
    for _ in 0..5 {
        now += MS;
        pump(&mut sa, &mut sb, now);
    }
    sb.tcp_mut(s).close(now).unwrap();
    for _ in 0..5 {
        now += MS;
        pump(&mut sa, &mut sb, now);
    }
    assert_eq!(sa.tcp(c).error(), Ok(Some(SocketError::ConnectionReset)));
    assert_eq!(sb.tcp_connections(), 0);
}

#[test]
fn listener_close_resets_unaccepted_connections() {
    let (mut sa, mut sb) = pair();
    let l = sb.tcp_listen(SocketAddrV4::new(B, 80), None, None).unwrap();
    let mut now = 0;
    let c = sa.tcp_connect(SocketAddrV4::new(B, 80), None, now).unwrap();
    for _ in 0..5 {
        now += MS;
        pump(&mut sa, &mut sb, now);
    }
    assert_eq!(sb.listener(l).accept_queue_len(), Ok(1));
    sb.listener_mut(l).close(now).unwrap();
    for _ in 0..5 {
        now += MS;
        pump(&mut sa, &mut sb, now);
    }
    assert_eq!(sa.tcp(c).error(), Ok(Some(SocketError::ConnectionReset)));
    assert_eq!(sb.tcp_connections(), 0);
    assert_eq!(sb.listener_mut(l).accept(now), Err(SocketError::BadHandle));
    // The port is free again.
    sb.tcp_listen(SocketAddrV4::new(B, 80), None, None).unwrap();
}

/// Takes every frame waiting for A off its wire end (A never sees them)
/// and returns the TCP segments among them.
fn take_segments(sa: &mut Stack<WireEnd>) -> Vec<TcpRepr> {
    let nic = sa.nic_mut();
    let mut d = [Desc::default(); 64];
    let mut v = Vec::new();
    loop {
        let n = nic.recv(&mut d);
        if n == 0 {
            return v;
        }
        for x in &d[..n] {
            let f = nic.buffers().frame(*x).expect("a frame");
            let eth = EthernetFrame::new_checked(f).unwrap();
            if eth.ethertype() != 0x0800 {
                continue;
            }
            let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
            if ip.protocol() != 6 {
                continue;
            }
            let t = TcpPacket::new_checked(ip.payload()).unwrap();
            v.push(TcpRepr::parse(&t).unwrap());
        }
        nic.release(&d[..n]);
    }
}

/// A connects to B's listener `l` (port 80); B's SYN-ACK is taken off the
/// wire before A sees it, so B holds a half-open entry. Returns A's handle
/// and the SYN-ACK.
fn half_open(
    sa: &mut Stack<WireEnd>,
    sb: &mut Stack<WireEnd>,
    l: TcpListener,
    now: &mut u64,
) -> (TcpStream, TcpRepr) {
    let before = sb.listener(l).syn_queue_len().unwrap();
    let c = sa
        .tcp_connect(SocketAddrV4::new(B, 80), None, *now)
        .unwrap();
    for _ in 0..10 {
        *now += MS;
        sa.poll(*now);
        sa.tcp_service(*now, 1024);
        sb.poll(*now);
        sb.tcp_service(*now, 1024);
        if sb.listener(l).syn_queue_len() == Ok(before + 1) {
            let segs = take_segments(sa);
            assert_eq!(segs.len(), 1, "{segs:?}");
            assert_eq!(segs[0].flags, TcpFlags::SYN | TcpFlags::ACK);
            return (c, segs[0]);
        }
    }
    panic!("no half-open entry");
}

#[test]
fn listener_close_resets_half_open_entries() {
    let (mut sa, mut sb) = pair();
    let l = sb.tcp_listen(SocketAddrV4::new(B, 80), None, None).unwrap();
    let mut now = 0;
    let (_c, synack) = half_open(&mut sa, &mut sb, l, &mut now);
    assert_eq!(sb.listener(l).syn_queue_len(), Ok(1));
    let resets0 = sb.stats().tcp.resets_sent;
    sb.listener_mut(l).close(now).unwrap();
    // RFC 9293 §3.10.5 (ABORT): <SEQ=SND.NXT = ISS + 1>, with <ACK=RCV.NXT> so that
    // A, still in SYN-SENT, accepts it (§3.10.7.3).
    let segs = take_segments(&mut sa);
    assert_eq!(segs.len(), 1, "{segs:?}");
    let r = segs[0];
    assert_eq!(r.flags, TcpFlags::RST | TcpFlags::ACK);
    assert_eq!(r.seq, synack.seq + 1);
    assert_eq!(r.ack, synack.ack);
    assert_eq!((r.src_port, r.dst_port), (80, synack.dst_port));
    assert_eq!(sb.stats().tcp.resets_sent, resets0 + 1);
    assert_eq!(sb.stats().tcp.close_resets_unsent, 0);
    assert_eq!(sb.listener(l).syn_queue_len(), Err(SocketError::BadHandle));
    assert_eq!(sb.tcp_connections(), 0);
    check_accounting(&sb);
    // The port is free again.
    sb.tcp_listen(SocketAddrV4::new(B, 80), None, None).unwrap();
}

#[test]
fn listener_close_resets_queued_connections_with_snd_nxt() {
    let (mut sa, mut sb) = pair();
    let l = sb.tcp_listen(SocketAddrV4::new(B, 80), None, None).unwrap();
    let mut now = 0;
    // The first SYN-ACK is lost; the retransmitted one (same ISS) completes
    // the handshake, and the connection waits in the accept queue.
    let (c, synack) = half_open(&mut sa, &mut sb, l, &mut now);
    for _ in 0..5000 {
        now += MS;
        pump(&mut sa, &mut sb, now);
        if sb.listener(l).accept_queue_len() == Ok(1) {
            break;
        }
    }
    assert_eq!(sb.listener(l).accept_queue_len(), Ok(1));
    assert_eq!(sa.tcp_mut(c).state(now), Ok(State::Established));
    let resets0 = sb.stats().tcp.resets_sent;
    sb.listener_mut(l).close(now).unwrap();
    let segs = take_segments(&mut sa);
    assert_eq!(segs.len(), 1, "{segs:?}");
    let r = segs[0];
    assert_eq!(r.flags, TcpFlags::RST | TcpFlags::ACK);
    // ESTABLISHED, nothing sent: SND.NXT = ISS + 1, exactly A's RCV.NXT.
    assert_eq!(r.seq, synack.seq + 1);
    assert_eq!(r.ack, synack.ack);
    assert_eq!(sb.stats().tcp.resets_sent, resets0 + 1);
    assert_eq!(sb.tcp_connections(), 0, "nothing installed, nothing left");
    assert_eq!(sb.listener_mut(l).accept(now), Err(SocketError::BadHandle));
    check_accounting(&sb);
}

#[test]
fn listener_close_counts_resets_without_buffers() {
    let (mut sa, mut sb) = pair();
    let l = sb.tcp_listen(SocketAddrV4::new(B, 80), None, None).unwrap();
    let mut now = 0;
    for _ in 0..3 {
        half_open(&mut sa, &mut sb, l, &mut now);
    }
    assert_eq!(sb.listener(l).syn_queue_len(), Ok(3));
    // Hold every free transmit buffer of B.
    let mut held = Vec::new();
    loop {
        let mut b = [0u32; 64];
        let n = sb.nic_mut().alloc(&mut b);
        if n == 0 {
            break;
        }
        held.extend(b[..n].iter().map(|&x| Desc::new(x, 0)));
    }
    let resets0 = sb.stats().tcp.resets_sent;
    let nobuf0 = sb.stats().drops[StackDrop::TxNoBuffer as usize];
    sb.listener_mut(l).close(now).unwrap();
    let sent = sb.stats().tcp.resets_sent - resets0;
    let unsent = sb.stats().tcp.close_resets_unsent;
    // At most the one spare buffer the stack keeps; the rest are counted
    // once each, not retried.
    assert!(sent <= 1, "{sent} sent");
    assert_eq!(sent + unsent, 3);
    assert_eq!(
        sb.stats().drops[StackDrop::TxNoBuffer as usize] - nobuf0,
        unsent
    );
    assert_eq!(take_segments(&mut sa).len() as u64, sent);
    sb.nic_mut().release(&held);
    assert_eq!(sb.tcp_connections(), 0);
    assert_eq!(sb.listener(l).syn_queue_len(), Err(SocketError::BadHandle));
}

#[test]
fn blocking_sockets_echo_between_two_threads() {
    let (a, b) = WirePair::new(WireConfig::default()).unwrap();
    let server = std::thread::spawn(move || {
        let mut sb = Stack::new(
            b,
            StackConfig {
                addr: B,
                ..StackConfig::default()
            },
        );
        let l = TcpListener::bind(&mut sb, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7), 8).unwrap();
        let t = Some(Duration::from_secs(20));
        let s = l.accept_blocking(&mut sb, t).unwrap();
        assert_eq!(s.local_addr(&sb).unwrap(), SocketAddrV4::new(B, 7));
        let mut buf = vec![0u8; 8192];
        let mut total = 0;
        loop {
            let n = s.recv_blocking(&mut sb, &mut buf, t).unwrap();
            if n == 0 {
                break;
            }
            total += n;
            s.send_all_blocking(&mut sb, &buf[..n], t).unwrap();
        }
        s.flush_blocking(&mut sb, t).unwrap();
        s.close(&mut sb).unwrap();
        // Let the FIN exchange finish.
        let end = sb.now() + 200 * MS;
        while lazynet::socket::wait_step(&mut sb, Some(end)) {}
        total
    });
    let mut sa = Stack::new(
        a,
        StackConfig {
            addr: A,
            ..StackConfig::default()
        },
    );
    let t = Some(Duration::from_secs(20));
    let c = TcpStream::connect(&mut sa, SocketAddrV4::new(B, 7), t).unwrap();
    c.set_nodelay(&mut sa, true).unwrap();
    assert_eq!(c.peer_addr(&sa).unwrap(), SocketAddrV4::new(B, 7));
    let msg = data(0, 300_000, 3);
    let mut back = Vec::new();
    let mut buf = vec![0u8; 8192];
    for chunk in msg.chunks(10_000) {
        c.send_all_blocking(&mut sa, chunk, t).unwrap();
        while back.len() < msg.len() && c.recv_queue(&sa).unwrap() > 0 {
            let n = c.recv(&mut sa, &mut buf).unwrap();
            back.extend_from_slice(&buf[..n]);
        }
    }
    c.shutdown(&mut sa).unwrap();
    loop {
        let n = c.recv_blocking(&mut sa, &mut buf, t).unwrap();
        if n == 0 {
            break;
        }
        back.extend_from_slice(&buf[..n]);
    }
    assert_eq!(back.len(), msg.len());
    assert!(back == msg, "echo differs");
    c.close(&mut sa).unwrap();
    assert_eq!(server.join().unwrap(), msg.len());
    let _ = sa.nic_mut().mtu();
}

#[test]
fn an_ack_queued_before_the_retransmission_deadline_wins_over_the_timer() {
    // Regression: `tcp_service` ran expired timers before the channels, so
    // an ACK already queued on the connection's channel lost the race to
    // the retransmission timer: a spurious RTO (go-back-N, window down to
    // one segment). Found by tests/stack/tcp_netsim.rs (an RTO every 200 ms on a
    // steady 100 ms path).
    let (mut sa, mut sb) = pair();
    let mut now = 0;
    let (c, s) = establish(&mut sa, &mut sb, &mut now);
    sa.tcp_mut(c).set_nodelay(true).unwrap();
    assert_eq!(sa.tcp_mut(c).send(b"ping", now), Ok(4));
    // B receives and (after its delayed-ACK timer) acknowledges.
    for _ in 0..100 {
        now += MS;
        sb.poll(now);
        sb.tcp_service(now, 1024);
    }
    let mut buf = [0u8; 8];
    assert_eq!(sb.tcp_mut(s).recv(&mut buf, now), Ok(4));
    // A only gets to run long after its RTO deadline: the ACK is queued
    // first, then the service finds both the ACK and the expired timer.
    now += 10_000 * MS;
    sa.poll(now);
    assert_eq!(sa.tcp(c).pending(), Ok(1));
    sa.tcp_service(now, 1024);
    let k = sa.tcp(c).counters().unwrap();
    assert_eq!((k.rto_expired, k.retransmits), (0, 0), "{k:?}");
    assert_eq!(sa.tcp(c).send_queue(), Ok(0));
}

#[test]
fn a_handshake_ack_queued_before_the_synack_deadline_wins_over_the_timer() {
    // Regression (same race as above, on the listener): the SYN-ACK timer
    // ran before the final ACK already queued on the listener's channel,
    // so a SYN-ACK was retransmitted needlessly.
    let (mut sa, mut sb) = pair();
    let l = sb.tcp_listen(SocketAddrV4::new(B, 80), None, None).unwrap();
    let mut now = 0;
    let c = sa.tcp_connect(SocketAddrV4::new(B, 80), None, now).unwrap();
    let mut up = false;
    for _ in 0..100 {
        now += MS;
        sa.poll(now);
        sa.tcp_service(now, 1024);
        if sa.tcp_mut(c).state(now) == Ok(State::Established) {
            up = true;
            break;
        }
        sb.poll(now);
        sb.tcp_service(now, 1024);
    }
    assert!(up);
    // B runs again only long after its SYN-ACK retransmission deadline.
    now += 10_000 * MS;
    sb.poll(now);
    assert_eq!(sb.listener(l).pending(), Ok(1));
    let before = sb.stats().tcp.segments_out;
    sb.tcp_service(now, 1024);
    assert_eq!(
        sb.stats().tcp.segments_out,
        before,
        "no SYN-ACK retransmission"
    );
    assert!(sb.listener_mut(l).accept(now).is_ok());
}

#[test]
fn the_timer_heap_stays_bounded_under_connection_churn() {
    // Each aborted attempt leaves its SYN retransmission deadline (1 s
    // ahead) in the heap as a stale entry; thousands of attempts within
    // that second must not grow the heap without bound.
    let (mut sa, mut sb) = pair();
    let mut now = 0;
    let mut max = 0;
    for _ in 0..5000 {
        let c = sa.tcp_connect(SocketAddrV4::new(B, 81), None, now).unwrap();
        sa.tcp_mut(c).abort(now).unwrap();
        now += 100_000; // 100 µs: all 5000 within 0.5 s
        pump(&mut sa, &mut sb, now);
        max = max.max(sa.tcp_timer_entries());
    }
    assert_eq!(sa.tcp_connections(), 0);
    assert!(max <= 4 * 2 + 1024 + 2, "timer heap grew to {max}");
}

// ---- A full SYN queue without cookies (LRP §3.4, RFC 4987 §3) ----------

/// A bare SYN from `src` (spoofed: nobody answers for it) to B:80, as an
/// Ethernet frame from `src_mac` to `dst_mac`.
fn spoofed_syn(src: SocketAddrV4, src_mac: [u8; 6], dst_mac: [u8; 6]) -> Vec<u8> {
    use lazynet::wire::checksum;
    let mut f = vec![0u8; 14 + 20 + 20];
    f[0..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&src_mac);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&40u16.to_be_bytes());
    ip[6] = 0x40;
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&src.ip().octets());
    ip[16..20].copy_from_slice(&B.octets());
    let c = checksum::checksum(&ip[..20]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let t = &mut ip[20..];
    t[0..2].copy_from_slice(&src.port().to_be_bytes());
    t[2..4].copy_from_slice(&80u16.to_be_bytes());
    t[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = 0x02;
    t[14..16].copy_from_slice(&8192u16.to_be_bytes());
    let ph = checksum::pseudo_header_ipv4(*src.ip(), B, 6, 20);
    let s = !checksum::fold(checksum::partial(t, ph));
    t[16..18].copy_from_slice(&s.to_be_bytes());
    f
}

/// Puts `n` spoofed SYNs (sources 10.0.0.100+`first`..) on the wire from A
/// to B; B gets a static neighbour entry for each so that its SYN-ACKs go
/// out at once (to a MAC nobody has) instead of waiting for ARP.
fn spoof_syns(sa: &mut Stack<WireEnd>, sb: &mut Stack<WireEnd>, first: u8, n: u8) {
    let (ma, mb) = (sa.mac(), sb.mac());
    for i in first..first + n {
        let src = Ipv4Addr::new(10, 0, 0, 100 + i);
        sb.set_neighbor(src, [2, 0xee, 0, 0, 0, i]);
        let f = spoofed_syn(SocketAddrV4::new(src, 5000), ma, mb);
        let end = sa.nic_mut();
        let mut b = [0u32];
        assert_eq!(end.alloc(&mut b), 1);
        end.buffers_mut().buf_mut(b[0]).unwrap()[..f.len()].copy_from_slice(&f);
        assert_eq!(
            end.send(&[lazynet::mem::Desc::new(b[0], f.len() as u16)]),
            1
        );
    }
    sa.nic_mut().flush();
}

fn no_cookies(syn_queue: usize, synack_retries: u32) -> ListenConfig {
    ListenConfig {
        syn_queue,
        syn_cookies: false,
        synack_retries,
        ..ListenConfig::default()
    }
}

#[test]
fn full_syn_queue_without_cookies_stalls_the_listener_and_a_handshake_in_progress_completes() {
    use lazynet::proto::tcp::ListenDrop;
    let (mut sa, mut sb) = pair();
    let l = sb
        .tcp_listen(SocketAddrV4::new(B, 80), Some(no_cookies(4, 5)), None)
        .unwrap();
    let (ma, mb) = (sa.mac(), sb.mac());
    sa.set_neighbor(B, mb);
    sb.set_neighbor(A, ma);
    let mut now = MS;
    // A legitimate handshake starts: B keeps its half-open entry.
    let c = sa.tcp_connect(SocketAddrV4::new(B, 80), None, now).unwrap();
    sb.poll(now);
    sb.tcp_service(now, 1024);
    // Three spoofed SYNs fill the SYN queue.
    spoof_syns(&mut sa, &mut sb, 0, 3);
    now += MS;
    sb.poll(now);
    sb.tcp_service(now, 1024);
    assert_eq!(sb.listener(l).counters().unwrap().syns, 4);
    assert_eq!(sb.listener(l).stalled(), Ok(true));
    // The client's final ACK arrives behind it, then more spoofed SYNs.
    sa.poll(now);
    sa.tcp_service(now, 1024);
    assert_eq!(sa.tcp_mut(c).state(now), Ok(State::Established));
    spoof_syns(&mut sa, &mut sb, 3, 10);
    let before = sb.listener(l).counters().unwrap();
    for _ in 0..10 {
        now += MS;
        sb.poll(now);
        sb.tcp_service(now, 1024);
        assert_eq!(sb.listener_mut(l).accept(now), Err(SocketError::WouldBlock));
    }
    // Stalled: nothing was read, no work spent; the frames wait.
    assert_eq!(sb.listener(l).counters().unwrap(), before, "no work");
    assert_eq!(sb.listener(l).pending(), Ok(11));
    // The SYN-ACK timer (1 s) reads the channel once: the ACK completes
    // the handshake; of the SYNs one takes the freed slot, nine are dropped.
    now += 1_100 * MS;
    sb.poll(now);
    sb.tcp_service(now, 1024);
    let s = sb
        .listener_mut(l)
        .accept(now)
        .expect("the handshake in progress completed");
    let k = sb.listener(l).counters().unwrap();
    assert_eq!(k.drop_count(ListenDrop::SynQueueFull), 9);
    assert_eq!(sb.listener(l).pending(), Ok(0));
    assert_eq!(sb.listener(l).stalled(), Ok(true));
    // And the connection works.
    assert_eq!(sa.tcp_mut(c).send(b"hello", now), Ok(5));
    let mut buf = [0u8; 16];
    for _ in 0..10 {
        now += MS;
        pump(&mut sa, &mut sb, now);
    }
    assert_eq!(sb.tcp_mut(s).recv(&mut buf, now), Ok(5));
    check_accounting(&sb);
}

#[test]
fn a_syn_refused_by_a_stalled_listener_is_retried_and_accepted_once_entries_expire() {
    let (mut sa, mut sb) = pair();
    // One SYN-ACK retransmission: spoofed entries expire after 1 s + 2 s.
    let l = sb
        .tcp_listen(SocketAddrV4::new(B, 80), Some(no_cookies(4, 1)), None)
        .unwrap();
    let mut now = MS;
    spoof_syns(&mut sa, &mut sb, 0, 4);
    sb.poll(now);
    sb.tcp_service(now, 1024);
    assert_eq!(sb.listener(l).stalled(), Ok(true));
    let c = sa.tcp_connect(SocketAddrV4::new(B, 80), None, now).unwrap();
    let mut accepted = None;
    for _ in 0..2_000 {
        now += 10 * MS;
        pump(&mut sa, &mut sb, now);
        if let Ok(s) = sb.listener_mut(l).accept(now) {
            accepted = Some(s);
            break;
        }
    }
    assert!(accepted.is_some(), "the client's retransmitted SYN got in");
    assert_eq!(sa.tcp_mut(c).state(now), Ok(State::Established));
    let k = sb.listener(l).counters().unwrap();
    assert_eq!(k.synack_timeouts, 4, "{k:?}");
    assert!(now > 3_000 * MS, "not before the spoofed entries expired");
    check_accounting(&sb);
}

#[test]
fn eager_mode_processes_every_syn_and_drops_it_after_the_work() {
    use lazynet::proto::tcp::ListenDrop;
    use lazynet::stack::ReceiveMode;
    let (a, b) = WirePair::new(WireConfig::default()).unwrap();
    let mut sa = Stack::new(
        a,
        StackConfig {
            addr: A,
            ..StackConfig::default()
        },
    );
    let mut sb = Stack::new(
        b,
        StackConfig {
            addr: B,
            mode: ReceiveMode::Eager,
            ..StackConfig::default()
        },
    );
    let l = sb
        .tcp_listen(SocketAddrV4::new(B, 80), Some(no_cookies(4, 5)), None)
        .unwrap();
    spoof_syns(&mut sa, &mut sb, 0, 10);
    sb.poll(MS);
    // 4.4BSD: no stall, the six SYNs beyond the queue were read and dropped.
    assert_eq!(sb.listener(l).stalled(), Ok(false));
    assert_eq!(sb.listener(l).pending(), Ok(0));
    let k = sb.listener(l).counters().unwrap();
    assert_eq!(k.drop_count(ListenDrop::SynQueueFull), 6);
}

#[test]
fn text_placed_directly_is_acknowledged_though_nothing_else_is_sent() {
    // The read places the segment straight into its buffer and owes its
    // ACK (delayed, RFC 9293 §3.8.6.3): that deadline must reach the timer
    // heap, or A retransmits into a receiver that never answers.
    let (mut sa, mut sb) = pair();
    let mut now = 0;
    let (c, s) = establish(&mut sa, &mut sb, &mut now);
    let msg = data(0, 100, 9);
    now += MS;
    assert_eq!(sa.tcp_mut(c).send(&msg, now), Ok(msg.len()));
    sa.poll(now);
    sa.tcp_service(now, 1024);
    sb.poll(now);
    let mut buf = [0u8; 256];
    assert_eq!(sb.tcp_mut(s).recv(&mut buf, now), Ok(msg.len()));
    assert_eq!(sb.tcp(s).counters().unwrap().direct, 1, "placed directly");
    // Well inside A's first retransmission timeout (1 s, RFC 6298 §2).
    for _ in 0..300 {
        now += MS;
        pump(&mut sa, &mut sb, now);
    }
    assert_eq!(sa.tcp(c).send_queue(), Ok(0), "A's data acknowledged");
    assert_eq!(sa.tcp(c).counters().unwrap().retransmits, 0);
}
