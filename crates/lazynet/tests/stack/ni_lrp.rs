//! The `ni-lrp` receive mode end to end: a `ni-lrp` stack (B) and a
//! `soft-lrp` stack (A) on the in-memory wire, UDP echo and TCP bulk
//! transfer both ways, once with the NI engine stepped on the test's thread
//! (deterministic, virtual time) and once on its own thread (real time).

use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::nic::Nic;
use lazynet::stack::{NiEngine, NiProxy, ReceiveMode, Stack, StackConfig, TcpStream};

use lazynet::testkit::{data, A, B, MS};

fn pair() -> (Stack<WireEnd>, Stack<NiProxy>, NiEngine<WireEnd>) {
    let (a, b) = WirePair::new(WireConfig {
        buf_count: 2048,
        ..WireConfig::default()
    })
    .unwrap();
    let sa = Stack::new(
        a,
        StackConfig {
            addr: A,
            seed: 1,
            ..StackConfig::default()
        },
    );
    let (sb, e) = Stack::new_ni_lrp(
        b,
        StackConfig {
            addr: B,
            seed: 2,
            ..StackConfig::default()
        },
    );
    assert_eq!(sb.mode(), ReceiveMode::NiLrp);
    (sa, sb, e)
}

/// Drives the engine: stepped on this thread, or already running on its own.
enum Ni {
    Stepped(Box<NiEngine<WireEnd>>),
    Threaded(std::thread::JoinHandle<WireEnd>, Arc<AtomicBool>),
}

impl Ni {
    fn start(e: NiEngine<WireEnd>, threaded: bool) -> Ni {
        if threaded {
            let stop = Arc::new(AtomicBool::new(false));
            // Another CPU than this thread's when there are two.
            let cpu = std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1);
            let h = e
                .spawn((cpu >= 2).then_some(1), stop.clone())
                .expect("NI thread");
            Ni::Threaded(h, stop)
        } else {
            Ni::Stepped(Box::new(e))
        }
    }

    fn step(&mut self) {
        match self {
            Ni::Stepped(e) => {
                e.step();
            }
            Ni::Threaded(..) => std::thread::yield_now(),
        }
    }

    /// Quiesces the host, stops the engine, returns the NIC.
    fn stop(mut self, sb: &mut Stack<NiProxy>) -> WireEnd {
        let t0 = Instant::now();
        while !sb.ni_quiesce() {
            assert!(t0.elapsed() < Duration::from_secs(10), "quiesce");
            self.step();
        }
        match self {
            Ni::Stepped(e) => e.finish(),
            Ni::Threaded(h, stop) => {
                stop.store(true, Ordering::Release);
                h.join().unwrap()
            }
        }
    }
}

struct Clock {
    virt: bool,
    now: u64,
    t0: Instant,
}

impl Clock {
    fn tick(&mut self) -> u64 {
        if self.virt {
            self.now += 100_000;
        } else {
            self.now = self.t0.elapsed().as_nanos() as u64;
        }
        self.now
    }
}

fn pump(sa: &mut Stack<WireEnd>, sb: &mut Stack<NiProxy>, ni: &mut Ni, now: u64) {
    sa.poll(now);
    sa.tcp_service(now, 1024);
    ni.step();
    sb.poll(now);
    sb.tcp_service(now, 1024);
    ni.step();
}

fn accounted<N: Nic>(s: &Stack<N>) {
    let st = s.stats();
    assert_eq!(
        st.frames_accounted() + s.queued_frames() as u64,
        st.rx_frames,
        "every frame accounted for: {st}"
    );
}

fn dgram(i: u32) -> Vec<u8> {
    // Sizes up to 4000 bytes: some are fragmented and reassembled.
    let len = 4 + (i as usize * 397) % 4000;
    let mut v: Vec<u8> = (0..len)
        .map(|k| (k as u32 ^ i.wrapping_mul(31)) as u8)
        .collect();
    v[..4].copy_from_slice(&i.to_be_bytes());
    v
}

fn udp_echo(threaded: bool) {
    let (mut sa, mut sb, e) = pair();
    let mut ni = Ni::start(e, threaded);
    let mut clock = Clock {
        virt: !threaded,
        now: 0,
        t0: Instant::now(),
    };
    let srv = sb.udp_bind(SocketAddrV4::new(B, 7), None).unwrap();
    let cli = sa.udp_bind(SocketAddrV4::new(A, 9), None).unwrap();
    let mut buf = vec![0u8; 65536];
    let t0 = Instant::now();
    for i in 0..300u32 {
        let msg = dgram(i);
        let mut sent = false;
        let mut got = false;
        for _ in 0..200_000 {
            assert!(t0.elapsed() < Duration::from_secs(60), "stalled at {i}");
            let now = clock.tick();
            if !sent {
                sent = sa
                    .udp_mut(cli)
                    .send_to(&msg, SocketAddrV4::new(B, 7), now)
                    .is_ok();
            }
            pump(&mut sa, &mut sb, &mut ni, now);
            while let Ok((n, from)) = sb.udp_mut(srv).recv_with(|p, from| {
                buf[..p.len()].copy_from_slice(p);
                (p.len(), from)
            }) {
                sb.udp_mut(srv).send_to(&buf[..n], from, now).unwrap();
            }
            if let Ok(back) = sa.udp_mut(cli).recv_with(|p, _| p.to_vec()) {
                assert_eq!(back, msg, "echo of {i} byte-exact");
                got = true;
                break;
            }
        }
        assert!(got, "no echo of {i}");
    }
    let st = sb.stats();
    assert!(st.udp_delivered >= 300 - st.udp_delivered_reassembled);
    assert!(
        st.udp_delivered_reassembled > 0,
        "fragments took the NI path"
    );
    assert_eq!(sb.demux().stats().frames, 0, "the host classified nothing");
    let mut nic = ni.stop(&mut sb);
    accounted(&sb);
    accounted(&sa);
    // Every buffer is back where it belongs.
    for _ in 0..4 {
        sa.poll(clock.tick());
    }
    sa.nic_mut().reclaim();
    nic.reclaim();
    assert_eq!(nic.free_buffers(), 1024, "B's buffers all came back");
    assert_eq!(sa.nic().free_buffers(), 1024, "A's buffers all came back");
}

#[test]
fn udp_echo_ni_lrp_stepped() {
    udp_echo(false);
}

#[test]
fn udp_echo_ni_lrp_threaded() {
    udp_echo(true);
}

fn establish(
    sa: &mut Stack<WireEnd>,
    sb: &mut Stack<NiProxy>,
    ni: &mut Ni,
    clock: &mut Clock,
    b_listens: bool,
) -> (TcpStream, TcpStream) {
    let t0 = Instant::now();
    if b_listens {
        let l = sb.tcp_listen(SocketAddrV4::new(B, 80), None, None).unwrap();
        let c = sa
            .tcp_connect(SocketAddrV4::new(B, 80), None, clock.tick())
            .unwrap();
        while t0.elapsed() < Duration::from_secs(20) {
            let now = clock.tick();
            pump(sa, sb, ni, now);
            if let Ok(s) = sb.listener_mut(l).accept(now) {
                return (c, s);
            }
        }
    } else {
        let l = sa.tcp_listen(SocketAddrV4::new(A, 81), None, None).unwrap();
        let c = sb
            .tcp_connect(SocketAddrV4::new(A, 81), None, clock.tick())
            .unwrap();
        while t0.elapsed() < Duration::from_secs(20) {
            let now = clock.tick();
            pump(sa, sb, ni, now);
            if let Ok(s) = sa.listener_mut(l).accept(now) {
                return (s, c);
            }
        }
    }
    panic!("no connection");
}

/// 1 MiB each way over one connection, byte-exact; then close.
fn tcp_bulk(threaded: bool, b_listens: bool) {
    let (mut sa, mut sb, e) = pair();
    let mut ni = Ni::start(e, threaded);
    let mut clock = Clock {
        virt: !threaded,
        now: 0,
        t0: Instant::now(),
    };
    let (ca, cb) = establish(&mut sa, &mut sb, &mut ni, &mut clock, b_listens);
    let total = 1 << 20;
    let (mut sent_a, mut sent_b, mut got_a, mut got_b) = (0, 0, 0, 0);
    let mut buf = vec![0u8; 65536];
    let t0 = Instant::now();
    while got_a < total || got_b < total {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "stalled: a got {got_a}, b got {got_b}"
        );
        let now = clock.tick();
        if sent_a < total {
            if let Ok(n) = sa
                .tcp_mut(ca)
                .send(&data(sent_a, (total - sent_a).min(16384), 0), now)
            {
                sent_a += n;
            }
        }
        if sent_b < total {
            if let Ok(n) = sb
                .tcp_mut(cb)
                .send(&data(sent_b, (total - sent_b).min(16384), 0x5a), now)
            {
                sent_b += n;
            }
        }
        pump(&mut sa, &mut sb, &mut ni, now);
        while let Ok(n) = sb.tcp_mut(cb).recv(&mut buf, now) {
            assert!(n > 0);
            assert_eq!(&buf[..n], &data(got_b, n, 0)[..], "B got wrong bytes");
            got_b += n;
        }
        while let Ok(n) = sa.tcp_mut(ca).recv(&mut buf, now) {
            assert!(n > 0);
            assert_eq!(&buf[..n], &data(got_a, n, 0x5a)[..], "A got wrong bytes");
            got_a += n;
        }
    }
    sa.tcp_mut(ca).close(clock.tick()).unwrap();
    sb.tcp_mut(cb).close(clock.tick()).unwrap();
    for _ in 0..200 {
        let now = clock.tick() + if threaded { 0 } else { MS };
        clock.now = now;
        pump(&mut sa, &mut sb, &mut ni, now);
    }
    assert_eq!(sb.demux().stats().frames, 0, "the host classified nothing");
    assert!(sb.stats().tcp.segments_in > 500);
    let _nic = ni.stop(&mut sb);
    accounted(&sb);
    accounted(&sa);
    assert_eq!(sb.nic().lost_releases(), 0);
}

#[test]
fn tcp_bulk_both_ways_ni_lrp_stepped() {
    tcp_bulk(false, true);
}

#[test]
fn tcp_bulk_both_ways_ni_lrp_stepped_ni_side_connects() {
    tcp_bulk(false, false);
}

#[test]
fn tcp_bulk_both_ways_ni_lrp_threaded() {
    tcp_bulk(true, true);
}
