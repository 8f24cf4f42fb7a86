//! Differential test of the listener's compact half-open entries against
//! the previous listener (`listen_ref`: whole `Connection`s in the SYN
//! queue): random segment sequences from a few peers, with and without
//! options, cookies and fast timers, must give the same outputs, the
//! same segments (as multisets after every call), the same queue lengths
//! and timers, and accepted connections in the same state (RTT, RTO,
//! timers). The caller follows the listener's contract (poll after every
//! input and timeout).
//!
//! Known, intended differences, kept out of the generator: a SYN+FIN
//! repeating the ISN (now bounded like a duplicate SYN, `SynAckResent`;
//! the reference answered `Delivered` without a bound); and the accept
//! queue's timer, which is now a lower bound (checked as such).

use std::net::SocketAddrV4;

use crate::listen_ref::OldListener;
use crate::util::*;
use lazynet::proto::tcp::{ListenConfig, Listener, Secret};
use proptest::prelude::*;

fn peer(n: u16) -> SocketAddrV4 {
    SocketAddrV4::new(*REMOTE.ip(), 49500 + n)
}

#[derive(Debug, Clone)]
enum Op {
    Syn(u16, u32, bool),
    AckSynAck(u16, u32, bool),
    Seg(u16, u8, u32, u32, u8, bool),
    Time(u64),
    Accept,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u16..4, 0u32..3, any::<bool>()).prop_map(|(n, s, t)| Op::Syn(n, s, t)),
        (0u16..4, 0u32..3, any::<bool>()).prop_map(|(n, d, t)| Op::AckSynAck(n, d, t)),
        (
            0u16..4,
            any::<u8>(),
            any::<u32>(),
            any::<u32>(),
            0u8..8,
            any::<bool>()
        )
            .prop_map(|(n, f, s, a, l, t)| Op::Seg(n, f, s, a, l, t)),
        (0u64..3_000).prop_map(|ms| Op::Time(ms * MS)),
        Just(Op::Accept),
    ]
}

/// Drains the new listener; records the ISS of SYN-ACKs per peer.
fn drain_new(l: &mut Listener, now: u64, iss: &mut [SeqNumber; 4]) -> Vec<String> {
    let mut v = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Some((to, r)) = l.poll_transmit(now, &mut buf) {
        v.push(format!("{to} {r:?}"));
        if r.flags.contains(SYN) {
            iss[usize::from(to.port() - 49500)] = r.seq;
        }
        assert!(v.len() < 1000);
    }
    v.sort();
    v
}

fn drain_ref(l: &mut OldListener, now: u64) -> Vec<String> {
    let mut v = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Some((to, r)) = l.poll_transmit(now, &mut buf) {
        v.push(format!("{to} {r:?}"));
        assert!(v.len() < 1000);
    }
    v.sort();
    v
}

fn ts(on: bool, v: u32) -> Option<Timestamps> {
    on.then_some(Timestamps { tsval: v, tsecr: 0 })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]
    #[test]
    fn compact_listener_matches_reference(
        ops in prop::collection::vec(op(), 1..60),
        cookies in any::<bool>(),
        backlog in 1usize..3,
        syn_queue in 0usize..4,
        options in any::<bool>(),
        fast in any::<bool>(),
    ) {
        let lc = ListenConfig {
            backlog,
            syn_queue,
            syn_cookies: cookies,
            // Fast timers with many retries reach the backoff cap (16).
            synack_retries: if fast { 25 } else { 2 },
            reply_queue: 64,
        };
        let mut tc = if options { Config::default() } else { cfg() };
        if fast {
            tc.rto_initial = MS;
            tc.rto_min = MS;
            tc.rto_max = 300 * MS;
        }
        let secret = Secret::new(*b"listen-test-key.");
        let mut a = Listener::new(lc, tc, LOCAL, &secret);
        let mut b = OldListener::new(lc, tc, LOCAL, &secret);
        let mut now = 0u64;
        let mut iss = [SeqNumber(0); 4];
        let data = [7u8; 8];
        for (k, op) in ops.iter().enumerate() {
            let tsv = 100 + (now / MS) as u32;
            let seg = match *op {
                Op::Syn(n, s, t) => Some((n, TcpRepr {
                    src_port: 49500 + n,
                    seq: REMOTE_SEQ + s,
                    flags: SYN,
                    mss: Some(1000),
                    window_scale: t.then_some(2),
                    sack_permitted: t,
                    timestamps: ts(t, tsv),
                    ..SEND_TEMPL
                }, 0usize)),
                Op::AckSynAck(n, d, t) => Some((n, TcpRepr {
                    src_port: 49500 + n,
                    seq: REMOTE_SEQ + 1,
                    ack: iss[usize::from(n)] + 1,
                    flags: ACK,
                    timestamps: ts(t, tsv),
                    ..SEND_TEMPL
                }, d as usize)),
                Op::Seg(n, f, s, ak, len, t) => {
                    let mut fl = TcpFlags(f);
                    if fl.contains(SYN | FIN) && !fl.intersects(ACK | RST) {
                        fl = TcpFlags(f & !FIN.0);
                    }
                    Some((n, TcpRepr {
                        src_port: 49500 + n,
                        seq: REMOTE_SEQ + (s % 64),
                        ack: if ak % 2 == 0 { iss[usize::from(n)] + (ak % 8) } else { SeqNumber(ak) },
                        flags: fl,
                        window: 1000,
                        timestamps: ts(t, tsv.wrapping_sub(s % 3)),
                        ..SEND_TEMPL
                    }, usize::from(len)))
                }
                Op::Time(dt) => {
                    now += dt;
                    a.handle_timeout(now);
                    b.handle_timeout(now);
                    None
                }
                Op::Accept => {
                    let (x, y) = (a.accept(), b.accept());
                    prop_assert_eq!(x.is_some(), y.is_some(), "op {} accept", k);
                    if let (Some((ra, ca)), Some((rb, cb))) = (x, y) {
                        prop_assert_eq!(ra, rb);
                        prop_assert_eq!(ca.state(), cb.state());
                        prop_assert_eq!(ca.snd_una(), cb.snd_una());
                        prop_assert_eq!(ca.rcv_nxt(), cb.rcv_nxt());
                        prop_assert_eq!(ca.srtt(), cb.srtt(), "op {} srtt", k);
                        prop_assert_eq!(ca.rto(), cb.rto(), "op {} rto", k);
                        prop_assert_eq!(ca.recv_queue(), cb.recv_queue());
                        prop_assert_eq!(ca.eff_mss(), cb.eff_mss());
                        prop_assert_eq!(ca.timestamps_enabled(), cb.timestamps_enabled());
                        prop_assert_eq!(ca.sack_enabled(), cb.sack_enabled());
                        prop_assert_eq!(ca.send_wscale(), cb.send_wscale());
                        prop_assert_eq!(ca.send_window(), cb.send_window());
                        prop_assert_eq!(ca.poll_timeout(), cb.poll_timeout(), "op {} timer", k);
                    }
                    None
                }
            };
            if let Some((n, r, len)) = seg {
                let r = TcpRepr { payload_len: len, ..r };
                let x = a.handle_segment(now, peer(n), &r, &data[..len], &secret);
                let y = b.handle_segment(now, peer(n), &r, &data[..len], &secret);
                prop_assert_eq!(x, y, "op {} {:?}", k, r);
            }
            a.check_invariants().unwrap();
            let x = drain_new(&mut a, now, &mut iss);
            let y = drain_ref(&mut b, now);
            prop_assert_eq!(&x, &y, "op {} output", k);
            prop_assert_eq!(a.syn_queue_len(), b.syn_queue_len(), "op {}", k);
            prop_assert_eq!(a.accept_queue_len(), b.accept_queue_len(), "op {}", k);
            prop_assert_eq!(a.counters(), b.counters(), "op {} counters", k);
            let (x, y) = (a.poll_timeout(), b.poll_timeout());
            if a.accept_queue_len() == 0 {
                prop_assert_eq!(x, y, "op {} timeout", k);
            } else {
                // A lower bound: never later than the reference.
                prop_assert!(y.is_none_or(|y| x.is_some_and(|x| x <= y)), "op {} {:?} {:?}", k, x, y);
            }
        }
    }
}
