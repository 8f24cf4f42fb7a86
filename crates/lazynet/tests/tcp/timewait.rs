//! The TIME-WAIT table (RFC 9293 §3.10.7.4): retransmitted FINs, RSTs
//! (RFC 5961 §3.2), new SYNs (RFC 6191, RFC 1122 §4.2.2.13), PAWS (RFC 7323
//! §5.3), expiry, eviction, and many entries. Explicit time everywhere.

use std::net::{Ipv4Addr, SocketAddrV4};

use crate::util::*;
use lazynet::proto::tcp::{
    Secret, TimeWaitConfig, TimeWaitEntry, TimeWaitTable, TwAction, TwDrop, TwEvict, TwKey,
    TwTimestamps,
};

const TW: u64 = 60 * SEC;
/// Our SND.NXT (one past our FIN) and RCV.NXT (one past the peer's FIN).
const SND: SeqNumber = SeqNumber(5_000);
const RCV: SeqNumber = SeqNumber(u32::MAX - 10); // wraps in some tests

fn key() -> TwKey {
    TwKey {
        local: LOCAL,
        remote: REMOTE,
    }
}

fn key_n(n: u32) -> TwKey {
    TwKey {
        local: LOCAL,
        remote: SocketAddrV4::new(Ipv4Addr::from(0x0a00_0000 + (n >> 16)), n as u16),
    }
}

fn entry() -> TimeWaitEntry {
    TimeWaitEntry {
        key: key(),
        snd_nxt: SND,
        rcv_nxt: RCV,
        rcv_wnd: 4096,
        rcv_wscale: 0,
        ts: None,
    }
}

fn entry_ts(ts_recent: u32) -> TimeWaitEntry {
    TimeWaitEntry {
        ts: Some(TwTimestamps {
            ts_recent,
            ts_offset: 7,
        }),
        ..entry()
    }
}

fn table(capacity: usize) -> TimeWaitTable {
    TimeWaitTable::new(
        TimeWaitConfig {
            capacity,
            time_wait: TW,
            ack_limit: 1000,
        },
        &Secret::new(*b"timewait-key...."),
    )
}

fn input(t: &mut TimeWaitTable, now: u64, seg: TcpRepr) -> TwAction {
    let a = t.handle_segment(now, &key(), &seg);
    t.check_invariants().expect("table invariants");
    a
}

/// A segment from the peer (payload_len set by the caller if any).
fn seg(flags: TcpFlags, seq: SeqNumber) -> TcpRepr {
    TcpRepr {
        seq,
        ack: SND,
        flags,
        ..SEND_TEMPL
    }
}

/// The ACK the table sends without timestamps.
fn our_ack() -> TcpRepr {
    TcpRepr {
        seq: SND,
        ack: RCV,
        flags: ACK,
        window: 4096,
        ..RECV_TEMPL
    }
}

fn peer_fin() -> TcpRepr {
    // The peer's FIN occupied RCV - 1.
    seg(FIN | ACK, RCV + u32::MAX)
}

// ---- Retransmitted FIN ----

#[test]
fn retransmitted_fin_reacked_and_restarts_2msl() {
    let mut t = table(4);
    t.insert(0, entry());
    assert_eq!(t.expires_at(&key()), Some(TW));
    assert_eq!(
        input(&mut t, 10 * SEC, peer_fin()),
        TwAction::SendAck(our_ack())
    );
    assert_eq!(t.expires_at(&key()), Some(10 * SEC + TW));
    assert_eq!(t.poll_timeout(), Some(10 * SEC + TW));
    assert_eq!(t.counters().fin_restarts, 1);
    // Not expired at the old deadline.
    assert_eq!(t.poll_expired(TW, 10), 0);
    assert_eq!(t.poll_expired(10 * SEC + TW, 10), 1);
    assert!(t.is_empty());
}

#[test]
fn retransmitted_fin_with_data_reacked_and_restarts() {
    let mut t = table(4);
    t.insert(0, entry());
    let s = TcpRepr {
        payload_len: 3,
        ..seg(FIN | ACK, RCV + (u32::MAX - 3))
    };
    assert_eq!(input(&mut t, SEC, s), TwAction::SendAck(our_ack()));
    assert_eq!(t.expires_at(&key()), Some(SEC + TW));
}

#[test]
fn restarted_entry_moves_behind_younger_ones() {
    let mut t = table(4);
    t.insert(0, entry());
    t.insert(
        SEC,
        TimeWaitEntry {
            key: key_n(1),
            ..entry()
        },
    );
    input(&mut t, 2 * SEC, peer_fin());
    // key_n(1) now expires first.
    assert_eq!(t.poll_timeout(), Some(SEC + TW));
    assert_eq!(t.poll_expired(SEC + TW, 10), 1);
    assert!(t.lookup(&key()).is_some());
    assert!(t.lookup(&key_n(1)).is_none());
}

// ---- RST (RFC 9293 §3.10.7.4 second check, RFC 5961 §3.2) ----

#[test]
fn rst_at_rcv_nxt_closes_entry() {
    let mut t = table(4);
    t.insert(0, entry());
    assert_eq!(input(&mut t, SEC, seg(RST, RCV)), TwAction::Closed);
    assert!(t.lookup(&key()).is_none());
    assert_eq!(t.counters().rst_closed, 1);
    assert_eq!(t.poll_timeout(), None);
}

#[test]
fn rst_in_window_not_exact_gets_challenge_ack() {
    let mut t = table(4);
    t.insert(0, entry());
    assert_eq!(
        input(&mut t, SEC, seg(RST, RCV + 100)),
        TwAction::SendAck(our_ack())
    );
    assert!(t.lookup(&key()).is_some());
}

#[test]
fn rst_outside_window_ignored() {
    let mut t = table(4);
    t.insert(0, entry());
    // An old duplicate RST from before the FIN, and one far ahead.
    for s in [RCV + (u32::MAX - 50), RCV + 100_000] {
        assert_eq!(
            input(&mut t, SEC, seg(RST, s)),
            TwAction::Drop(TwDrop::RstOutOfWindow)
        );
    }
    assert_eq!(t.counters().drop_count(TwDrop::RstOutOfWindow), 2);
    assert!(t.lookup(&key()).is_some());
}

// ---- New SYN (RFC 6191, RFC 1122 §4.2.2.13) ----

#[test]
fn syn_with_greater_tsval_allowed() {
    let mut t = table(4);
    t.insert(0, entry_ts(1000));
    let syn = TcpRepr {
        // Sequence number lower than RCV.NXT: the timestamp decides.
        timestamps: Some(Timestamps {
            tsval: 1001,
            tsecr: 0,
        }),
        ..seg(SYN, RCV + (u32::MAX - 5000))
    };
    assert_eq!(
        input(
            &mut t,
            SEC,
            TcpRepr {
                ack: SeqNumber(0),
                ..syn
            }
        ),
        TwAction::AllowSyn { snd_nxt: SND }
    );
    assert!(t.lookup(&key()).is_none());
    assert_eq!(t.counters().syn_accepted, 1);
}

#[test]
fn syn_with_older_or_equal_tsval_rejected_with_ack() {
    let mut t = table(4);
    t.insert(0, entry_ts(1000));
    for tsval in [1000, 999, 1000u32.wrapping_sub(0x7000_0000)] {
        let syn = TcpRepr {
            ack: SeqNumber(0),
            // A greater sequence number does not help once timestamps
            // were in use and the SYN carries one (RFC 6191 §2).
            timestamps: Some(Timestamps { tsval, tsecr: 0 }),
            ..seg(SYN, RCV + 1_000_000)
        };
        match input(&mut t, SEC, syn) {
            TwAction::SendAck(a) => {
                assert_eq!(a.seq, SND);
                assert_eq!(a.ack, RCV);
                let ts = a.timestamps.unwrap();
                assert_eq!(ts.tsecr, 1000);
                assert_eq!(ts.tsval, 1000 + 7); // 1 s in ms + offset 7
            }
            o => panic!("tsval {tsval}: {o:?}"),
        }
    }
    assert!(t.lookup(&key()).is_some());
    assert_eq!(t.counters().syn_rejected, 3);
}

#[test]
fn syn_without_timestamps_needs_greater_isn() {
    let mut t = table(4);
    t.insert(0, entry());
    let syn = |s| TcpRepr {
        ack: SeqNumber(0),
        ..seg(SYN, s)
    };
    // ISN == RCV.NXT and below: rejected (an ACK is sent).
    assert_eq!(input(&mut t, SEC, syn(RCV)), TwAction::SendAck(our_ack()));
    assert_eq!(
        input(&mut t, SEC, syn(RCV + u32::MAX)),
        TwAction::SendAck(our_ack())
    );
    // Greater (across the wrap of RCV): allowed.
    assert_eq!(
        input(&mut t, SEC, syn(RCV + 20)),
        TwAction::AllowSyn { snd_nxt: SND }
    );
}

#[test]
fn syn_without_ts_option_after_ts_connection_uses_isn_rule() {
    let mut t = table(4);
    t.insert(0, entry_ts(1000));
    let syn = TcpRepr {
        ack: SeqNumber(0),
        ..seg(SYN, RCV + 1)
    };
    assert_eq!(input(&mut t, SEC, syn), TwAction::AllowSyn { snd_nxt: SND });
}

#[test]
fn syn_ack_or_syn_rst_never_reopens() {
    let mut t = table(4);
    t.insert(0, entry());
    assert_eq!(
        input(&mut t, SEC, seg(SYN | ACK, RCV + 20)),
        TwAction::SendAck(our_ack())
    );
    assert!(matches!(
        input(&mut t, SEC, seg(SYN | RST, RCV + 20)),
        TwAction::SendAck(_) | TwAction::Drop(_)
    ));
    assert!(t.lookup(&key()).is_some());
}

// ---- Other segments ----

#[test]
fn in_window_data_gets_ack() {
    let mut t = table(4);
    t.insert(0, entry());
    let s = TcpRepr {
        payload_len: 10,
        ..seg(ACK, RCV)
    };
    assert_eq!(input(&mut t, SEC, s), TwAction::SendAck(our_ack()));
    // No timer restart for anything but a FIN.
    assert_eq!(t.expires_at(&key()), Some(TW));
}

#[test]
fn bare_ack_in_window_dropped_silently() {
    let mut t = table(4);
    t.insert(0, entry());
    assert_eq!(
        input(&mut t, SEC, seg(ACK, RCV)),
        TwAction::Drop(TwDrop::PureAck)
    );
    assert_eq!(
        input(&mut t, SEC, seg(NONE_FLAGS, RCV)),
        TwAction::Drop(TwDrop::NoAck)
    );
    assert_eq!(t.counters().acks_sent, 0);
}

const NONE_FLAGS: TcpFlags = TcpFlags::NONE;

#[test]
fn old_duplicate_segment_gets_ack() {
    let mut t = table(4);
    t.insert(0, entry());
    // Data from long before the FIN.
    let s = TcpRepr {
        payload_len: 100,
        ..seg(ACK, RCV + (u32::MAX - 5000))
    };
    assert_eq!(input(&mut t, SEC, s), TwAction::SendAck(our_ack()));
    assert_eq!(t.expires_at(&key()), Some(TW));
}

#[test]
fn paws_rejects_old_timestamp_with_ack() {
    let mut t = table(4);
    t.insert(0, entry_ts(1000));
    let s = TcpRepr {
        timestamps: Some(Timestamps {
            tsval: 900,
            tsecr: 1,
        }),
        payload_len: 1,
        ..seg(ACK, RCV)
    };
    assert!(matches!(input(&mut t, 2 * SEC, s), TwAction::SendAck(_)));
    assert_eq!(t.counters().paws_rejected, 1);
    assert_eq!(t.lookup(&key()).unwrap().ts.unwrap().ts_recent, 1000);
}

#[test]
fn fin_retransmit_updates_ts_recent_and_echoes_it() {
    let mut t = table(4);
    t.insert(0, entry_ts(1000));
    let s = TcpRepr {
        timestamps: Some(Timestamps {
            tsval: 1500,
            tsecr: 1,
        }),
        ..peer_fin()
    };
    match input(&mut t, 3 * SEC, s) {
        TwAction::SendAck(a) => {
            assert_eq!(
                a.timestamps,
                Some(Timestamps {
                    tsval: 3007,
                    tsecr: 1500
                })
            );
        }
        o => panic!("{o:?}"),
    }
}

#[test]
fn window_scaled_in_ack() {
    let mut t = table(4);
    t.insert(
        0,
        TimeWaitEntry {
            rcv_wnd: 1 << 20,
            rcv_wscale: 7,
            ..entry()
        },
    );
    match input(&mut t, SEC, peer_fin()) {
        TwAction::SendAck(a) => assert_eq!(a.window, 8192),
        o => panic!("{o:?}"),
    }
}

#[test]
fn ack_rate_limited_table_wide() {
    let mut t = TimeWaitTable::new(
        TimeWaitConfig {
            capacity: 4,
            time_wait: TW,
            ack_limit: 2,
        },
        &Secret::new(*b"timewait-key...."),
    );
    t.insert(0, entry());
    assert!(matches!(
        input(&mut t, SEC, peer_fin()),
        TwAction::SendAck(_)
    ));
    assert!(matches!(
        input(&mut t, SEC, peer_fin()),
        TwAction::SendAck(_)
    ));
    assert_eq!(
        input(&mut t, SEC, peer_fin()),
        TwAction::Drop(TwDrop::RateLimited)
    );
    // A second later the budget is back.
    assert!(matches!(
        input(&mut t, 2 * SEC, peer_fin()),
        TwAction::SendAck(_)
    ));
    assert_eq!(t.counters().drop_count(TwDrop::RateLimited), 1);
}

// ---- Lookup, expiry, eviction ----

#[test]
fn unrelated_tuples_not_found() {
    let mut t = table(4);
    t.insert(0, entry());
    let others = [
        TwKey {
            local: LOCAL,
            remote: SocketAddrV4::new(*REMOTE.ip(), REMOTE.port() + 1),
        },
        TwKey {
            local: SocketAddrV4::new(*LOCAL.ip(), 81),
            remote: REMOTE,
        },
        TwKey {
            local: REMOTE,
            remote: LOCAL,
        },
    ];
    for k in others {
        assert!(t.lookup(&k).is_none());
        assert_eq!(t.handle_segment(SEC, &k, &peer_fin()), TwAction::NoEntry);
    }
    assert_eq!(t.counters().segs_in, 0);
}

#[test]
fn expiry_at_exactly_2msl_and_bounded_per_call() {
    let mut t = table(16);
    for n in 0..10 {
        t.insert(
            n * SEC,
            TimeWaitEntry {
                key: key_n(n as u32),
                ..entry()
            },
        );
    }
    assert_eq!(t.poll_timeout(), Some(TW));
    assert_eq!(t.poll_expired(TW - 1, 100), 0);
    assert_eq!(t.poll_expired(TW + 5 * SEC, 3), 3);
    assert_eq!(t.poll_expired(TW + 5 * SEC, 100), 3);
    assert_eq!(t.len(), 4);
    assert_eq!(t.poll_timeout(), Some(TW + 6 * SEC));
    assert_eq!(t.counters().expired, 6);
    t.check_invariants().unwrap();
}

#[test]
fn full_table_evicts_oldest() {
    let mut t = table(3);
    for n in 0..3 {
        assert_eq!(
            t.insert(
                n * SEC,
                TimeWaitEntry {
                    key: key_n(n as u32),
                    ..entry()
                }
            ),
            None
        );
    }
    assert_eq!(
        t.insert(
            10 * SEC,
            TimeWaitEntry {
                key: key_n(3),
                ..entry()
            }
        ),
        Some(TwEvict::Full)
    );
    assert_eq!(t.len(), 3);
    assert!(t.lookup(&key_n(0)).is_none());
    for n in 1..4 {
        assert!(t.lookup(&key_n(n)).is_some());
    }
    assert_eq!(t.counters().evict_count(TwEvict::Full), 1);
    t.check_invariants().unwrap();
}

#[test]
fn reinsert_same_tuple_replaces() {
    let mut t = table(3);
    t.insert(0, entry());
    let e2 = TimeWaitEntry {
        snd_nxt: SND + 10,
        ..entry()
    };
    assert_eq!(t.insert(SEC, e2), Some(TwEvict::Replaced));
    assert_eq!(t.len(), 1);
    assert_eq!(t.lookup(&key()), Some(&e2));
    assert_eq!(t.expires_at(&key()), Some(SEC + TW));
}

#[test]
fn capacity_one_and_zero_clamped() {
    let mut t = table(0);
    assert_eq!(t.config().capacity, 1);
    t.insert(0, entry());
    t.insert(
        1,
        TimeWaitEntry {
            key: key_n(9),
            ..entry()
        },
    );
    assert_eq!(t.len(), 1);
    assert!(t.lookup(&key_n(9)).is_some());
}

#[test]
fn many_entries_compact_lookup_expire_churn() {
    const { assert!(TimeWaitTable::SLOT_BYTES <= 64) };
    const { assert!(std::mem::size_of::<TimeWaitEntry>() <= 40) };
    const N: u32 = 20_000;
    let mut t = table(N as usize);
    for n in 0..N {
        t.insert(
            u64::from(n) * MS,
            TimeWaitEntry {
                key: key_n(n),
                snd_nxt: SeqNumber(n),
                ..entry()
            },
        );
    }
    assert_eq!(t.len(), N as usize);
    t.check_invariants().unwrap();
    for n in (0..N).step_by(7) {
        assert_eq!(t.lookup(&key_n(n)).unwrap().snd_nxt, SeqNumber(n));
    }
    assert!(t.lookup(&key_n(N + 1)).is_none());
    // Churn: expire half, close some by RST, insert new ones into the
    // freed slots (with the old ones evicted when full).
    assert_eq!(
        t.poll_expired(TW + u64::from(N / 2) * MS - 1, usize::MAX),
        (N / 2) as usize
    );
    for n in (N / 2..N).step_by(3) {
        let k = key_n(n);
        let rst = TcpRepr {
            seq: RCV,
            flags: RST,
            src_port: k.remote.port(),
            ..SEND_TEMPL
        };
        assert_eq!(t.handle_segment(TW, &k, &rst), TwAction::Closed);
    }
    for n in N..N + N {
        t.insert(
            TW + u64::from(n) * MS,
            TimeWaitEntry {
                key: key_n(n),
                ..entry()
            },
        );
    }
    assert_eq!(t.len(), N as usize);
    t.check_invariants().unwrap();
    assert!(t.lookup(&key_n(2 * N - 1)).is_some());
}

// ---- From a Connection ----

#[test]
fn entry_from_connection_answers_like_the_connection() {
    let mut c = conn_time_wait(cfg());
    let e = c.time_wait_entry().expect("TIME-WAIT entry");
    assert_eq!(e.key.local, LOCAL);
    assert_eq!(e.key.remote, REMOTE);
    assert_eq!(e.snd_nxt, LOCAL_SEQ + 2);
    assert_eq!(e.rcv_nxt, REMOTE_SEQ + 2);
    assert_eq!(e.ts, None);
    let mut t = table(4);
    t.insert(5 * SEC, e);
    // The peer retransmits its FIN: both answer with the same ACK.
    let fin = TcpRepr {
        seq: REMOTE_SEQ + 1,
        ack: LOCAL_SEQ + 2,
        flags: FIN | ACK,
        ..SEND_TEMPL
    };
    feed(&mut c, 6 * SEC, fin, &[]).unwrap_err();
    let (want, _) = take(&mut c, 6 * SEC);
    assert_eq!(
        t.handle_segment(6 * SEC, &e.key, &fin),
        TwAction::SendAck(want)
    );
}

#[test]
fn entry_from_connection_with_timestamps() {
    let cfg = Config {
        timestamps: true,
        ts_offset: 99,
        ..cfg()
    };
    let syn = TcpRepr {
        timestamps: Some(Timestamps {
            tsval: 50,
            tsecr: 0,
        }),
        ..syn_in()
    };
    let mut c = conn_syn_received_with(cfg, syn);
    let mut tsv = 51;
    let mut next = |c: &mut Conn, flags, seq_off, ack_off| {
        tsv += 1;
        feed(
            c,
            0,
            TcpRepr {
                seq: REMOTE_SEQ + seq_off,
                ack: LOCAL_SEQ + ack_off,
                flags,
                timestamps: Some(Timestamps {
                    tsval: tsv,
                    tsecr: 99,
                }),
                ..SEND_TEMPL
            },
            &[],
        )
    };
    next(&mut c, ACK, 1, 1).unwrap();
    c.close();
    while poll(&mut c, 0).is_some() {}
    next(&mut c, ACK, 1, 2).unwrap();
    next(&mut c, FIN | ACK, 1, 2).unwrap();
    assert_eq!(c.state(), State::TimeWait);
    assert!(c.time_wait_entry().is_some());
    let e = c.time_wait_entry().unwrap();
    assert_eq!(
        e.ts,
        Some(TwTimestamps {
            ts_recent: 54,
            ts_offset: 99
        })
    );
    // Not in TIME-WAIT: no entry.
    assert!(conn_established(cfg).time_wait_entry().is_none());
}

// ---- Random operations against a model of the FIFO ----

mod model {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    pub enum Op {
        Insert(u32),
        Seg(u32, u8, i32, bool),
        Advance(u64),
        Expire(usize),
        Remove(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u32..8).prop_map(Op::Insert),
            (0u32..8, any::<u8>(), -3i32..3, any::<bool>())
                .prop_map(|(k, f, d, t)| Op::Seg(k, f, d, t)),
            (0u64..40).prop_map(|s| Op::Advance(s * SEC)),
            (0usize..4).prop_map(Op::Expire),
            (0u32..8).prop_map(Op::Remove),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn table_follows_fifo_model(ops in prop::collection::vec(op(), 1..120), cap in 1usize..6) {
            let mut t = table(cap);
            // FIFO order of (key, expiry), oldest first.
            let mut m: Vec<(u32, u64)> = Vec::new();
            let mut now = 0u64;
            for op in ops {
                match op {
                    Op::Insert(k) => {
                        let e = TimeWaitEntry { key: key_n(k), ts: (k % 2 == 0).then_some(TwTimestamps { ts_recent: 1000, ts_offset: 0 }), ..entry() };
                        let r = t.insert(now, e);
                        if let Some(i) = m.iter().position(|x| x.0 == k) {
                            prop_assert_eq!(r, Some(TwEvict::Replaced));
                            m.remove(i);
                        } else if m.len() == cap {
                            prop_assert_eq!(r, Some(TwEvict::Full));
                            m.remove(0);
                        } else {
                            prop_assert_eq!(r, None);
                        }
                        m.push((k, now + TW));
                    }
                    Op::Seg(k, f, d, ts) => {
                        let restarts = t.counters().fin_restarts;
                        let s = TcpRepr {
                            src_port: key_n(k).remote.port(),
                            seq: RCV + (d as u32),
                            ack: SND,
                            flags: TcpFlags(f),
                            timestamps: ts.then_some(Timestamps { tsval: 1000u32.wrapping_add(d as u32), tsecr: 0 }),
                            ..SEND_TEMPL
                        };
                        let a = t.handle_segment(now, &key_n(k), &s);
                        let pos = m.iter().position(|x| x.0 == k);
                        match a {
                            TwAction::NoEntry => prop_assert!(pos.is_none()),
                            TwAction::Closed | TwAction::AllowSyn { .. } => {
                                m.remove(pos.unwrap());
                            }
                            TwAction::SendAck(r) => {
                                prop_assert_eq!(r.seq, SND);
                                prop_assert_eq!(r.ack, RCV);
                                prop_assert_eq!(r.flags, ACK);
                            }
                            TwAction::Drop(_) => prop_assert!(pos.is_some()),
                        }
                        if t.counters().fin_restarts > restarts {
                            let i = pos.unwrap();
                            m.remove(i);
                            m.push((k, now + TW));
                        }
                    }
                    Op::Advance(dt) => now += dt,
                    Op::Expire(max) => {
                        let n = t.poll_expired(now, max);
                        let due = m.iter().take_while(|x| x.1 <= now).count().min(max);
                        prop_assert_eq!(n, due);
                        m.drain(..due);
                    }
                    Op::Remove(k) => {
                        let pos = m.iter().position(|x| x.0 == k);
                        prop_assert_eq!(t.remove(&key_n(k)).is_some(), pos.is_some());
                        if let Some(i) = pos {
                            m.remove(i);
                        }
                    }
                }
                t.check_invariants().unwrap();
                prop_assert_eq!(t.len(), m.len());
                prop_assert_eq!(t.poll_timeout(), m.first().map(|x| x.1));
                for k in 0..8 {
                    let want = m.iter().find(|x| x.0 == k).map(|x| x.1);
                    prop_assert_eq!(t.expires_at(&key_n(k)), want);
                }
            }
        }
    }
}
