//! Orphaned connections through whole stacks: B closes its handles while
//! its peer A acknowledges B's FIN and never sends its own (an HTTP/1.0
//! client holding its socket open), so B's connections wait in
//! FIN-WAIT-2 with nobody left to answer for them. Bounded by the
//! stack's caps (the oldest is reset) and by the FIN timeout.

use std::net::{Ipv4Addr, SocketAddrV4};

use lazynet::nic::wirepair::{WireConfig, WireEnd};
use lazynet::proto::tcp::{Config, State};
use lazynet::socket::SocketError;
use lazynet::stack::{OrphanReset, Stack, StackConfig, TcpStream};

use lazynet::testkit::{config, connect_accept, pump, Pair, A, B, MS};

const SEC: u64 = 1_000_000_000;

/// A and B on the wire; B with `max` orphans in all, `per_tag` per tag
/// and a 2-second FIN timeout.
fn stacks(max: usize, per_tag: usize) -> (Stack<WireEnd>, Stack<WireEnd>) {
    let p = Pair::with(
        WireConfig {
            buf_count: 4096,
            ..WireConfig::default()
        },
        config(A, 1),
        StackConfig {
            max_orphans: max,
            max_orphans_per_tag: per_tag,
            tcp: Config {
                fin_timeout: 2 * SEC,
                ..Config::default()
            },
            ..config(B, 2)
        },
    );
    (p.a, p.b)
}

/// `n` connections A → B:80: (client, server) handles.
fn connections(
    sa: &mut Stack<WireEnd>,
    sb: &mut Stack<WireEnd>,
    n: usize,
    now: &mut u64,
) -> Vec<(TcpStream, TcpStream)> {
    let l = sb
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), None, None)
        .unwrap();
    (0..n).map(|_| connect_accept(sa, sb, l, 80, now)).collect()
}

fn run(sa: &mut Stack<WireEnd>, sb: &mut Stack<WireEnd>, now: &mut u64, ms: u64) {
    for _ in 0..ms {
        *now += MS;
        pump(sa, sb, *now);
    }
}

#[test]
fn orphans_beyond_the_cap_reset_the_oldest_and_the_rest_leave_after_the_fin_timeout() {
    let (mut sa, mut sb) = stacks(3, 1024);
    let mut now = 0;
    let conns = connections(&mut sa, &mut sb, 5, &mut now);
    let buf_before = sb.tcp_buffer_bytes();
    for &(_, s) in &conns {
        sb.tcp_mut(s).close(now).unwrap();
        run(&mut sa, &mut sb, &mut now, 5);
    }
    // A acknowledged every FIN and sits in CLOSE-WAIT, never closing.
    assert_eq!(sb.tcp_orphans(), 3);
    assert_eq!(sb.tcp_stats().orphaned, 5);
    assert_eq!(
        sb.tcp_stats().orphans_reset[OrphanReset::OverCap as usize],
        2
    );
    for (k, &(c, _)) in conns.iter().enumerate() {
        let want = if k < 2 {
            // The two oldest were reset.
            Err(SocketError::ConnectionReset)
        } else {
            Ok(0)
        };
        assert_eq!(
            sa.tcp_mut(c).recv(&mut [0u8; 8], now),
            want,
            "connection {k}"
        );
    }
    // What is left holds no buffers: everything was acknowledged.
    assert!(sb.tcp_buffer_bytes() < buf_before);
    assert_eq!(sb.tcp_buffer_bytes(), 0);
    assert_eq!(sb.tcp_states(), vec![State::FinWait2; 3]);
    // The FIN timeout (2 s) frees them silently.
    run(&mut sa, &mut sb, &mut now, 2100);
    assert_eq!(sb.tcp_orphans(), 0);
    assert_eq!(sb.tcp_connections(), 0);
    assert_eq!(sb.tcp_stats().fin_timeouts, 3);
    // A never heard of it: its connections wait in CLOSE-WAIT.
    for &(c, _) in &conns[2..] {
        assert_eq!(sa.tcp_mut(c).state(now), Ok(State::CloseWait));
    }
}

#[test]
fn one_tags_orphans_cannot_push_out_anothers() {
    let (mut sa, mut sb) = stacks(100, 2);
    let mut now = 0;
    let conns = connections(&mut sa, &mut sb, 6, &mut now);
    // Connections 0 and 1 are tag 2's; 2..6 tag 1's.
    for (k, &(_, s)) in conns.iter().enumerate() {
        sb.tcp_mut(s).set_tag(if k < 2 { 2 } else { 1 }).unwrap();
    }
    for &(_, s) in &conns {
        sb.tcp_mut(s).close(now).unwrap();
        run(&mut sa, &mut sb, &mut now, 5);
    }
    assert_eq!(sb.tcp_orphans_of(1), 2);
    assert_eq!(sb.tcp_orphans_of(2), 2);
    assert_eq!(sb.tcp_orphans(), 4);
    assert_eq!(
        sb.tcp_stats().orphans_reset[OrphanReset::OverTagCap as usize],
        2
    );
    // Tag 1's two oldest (2 and 3) went; tag 2's stayed.
    for (k, &(c, _)) in conns.iter().enumerate() {
        let reset = k == 2 || k == 3;
        let got = sa.tcp_mut(c).recv(&mut [0u8; 8], now);
        assert_eq!(got.is_err(), reset, "connection {k}: {got:?}");
    }
}

#[test]
fn text_sent_to_an_orphan_resets_it() {
    let (mut sa, mut sb) = stacks(100, 100);
    let mut now = 0;
    let conns = connections(&mut sa, &mut sb, 1, &mut now);
    let (c, s) = conns[0];
    sb.tcp_mut(s).close(now).unwrap();
    run(&mut sa, &mut sb, &mut now, 5);
    assert_eq!(sb.tcp_orphans(), 1);
    // A goes on sending (it half-closed nothing): B has nobody to read it.
    sa.tcp_mut(c).send(b"are you there?", now).unwrap();
    run(&mut sa, &mut sb, &mut now, 5);
    assert_eq!(sb.tcp_orphans(), 0);
    assert_eq!(sb.tcp_connections(), 0);
    assert_eq!(sb.tcp_stats().data_after_close, 1);
    assert_eq!(
        sa.tcp_mut(c).recv(&mut [0u8; 8], now),
        Err(SocketError::ConnectionReset)
    );
}

#[test]
fn a_half_closed_connection_is_not_an_orphan() {
    let (mut sa, mut sb) = stacks(1, 1);
    let mut now = 0;
    let conns = connections(&mut sa, &mut sb, 3, &mut now);
    for &(_, s) in &conns {
        sb.tcp_mut(s).shutdown(now).unwrap();
    }
    run(&mut sa, &mut sb, &mut now, 3000);
    // Still B's, in FIN-WAIT-2 past the FIN timeout: B may yet read.
    assert_eq!(sb.tcp_orphans(), 0);
    assert_eq!(sb.tcp_states(), vec![State::FinWait2; 3]);
    sa.tcp_mut(conns[0].0).send(b"late reply", now).unwrap();
    run(&mut sa, &mut sb, &mut now, 5);
    let mut buf = [0u8; 16];
    assert_eq!(sb.tcp_mut(conns[0].1).recv(&mut buf, now), Ok(10));
}
