//! Loss and timers: RTO (RFC 6298) with Karn's rule and backoff, giving up,
//! fast retransmit and NewReno fast recovery (RFC 5681, RFC 6582),
//! zero-window probing with backoff; segments lost to a smaller path MTU
//! (RFC 1191, RFC 5927).

use crate::util::*;
use lazynet::proto::tcp::cc::initial_window;
use lazynet::proto::tcp::{NewReno, MIN_PMTU};

fn sent(c: &mut Conn, now: u64) -> Vec<(u32, usize)> {
    let mut v = Vec::new();
    while let Some((r, d)) = poll(c, now) {
        v.push((r.seq.diff(LOCAL_SEQ + 1) as u32, d.len()));
    }
    v
}

fn conn_with_flight(n: usize) -> Conn {
    let mut c = conn_established(cfg());
    c.send(&data(n, 1));
    sent(&mut c, 0);
    c
}

fn dupack(c: &mut Conn, now: u64) {
    feed(c, now, ack_in(0, 0), &[]).unwrap();
}

// ---- RTO ----

#[test]
fn rto_retransmits_oldest_segment_only() {
    let mut c = conn_with_flight(3000);
    assert_eq!(c.poll_timeout(), Some(200 * MS));
    timeout(&mut c, 200 * MS);
    let d = data(3000, 1);
    expect(&mut c, 200 * MS, ack_out(0, 0), &d[..1000]);
    expect_none(&mut c, 200 * MS);
    assert_eq!(c.congestion().window(), 1000);
    assert_eq!(c.congestion().ssthresh(), 2000);
    assert_eq!(c.counters().rto_expired, 1);
    assert_eq!(c.counters().retransmits, 1);
}

#[test]
fn rto_backoff_doubles() {
    let mut c = conn_with_flight(1000);
    let mut t = 200 * MS;
    for k in 0..4 {
        assert_eq!(c.poll_timeout(), Some(t));
        timeout(&mut c, t);
        take(&mut c, t);
        t += (200 * MS) << (k + 1);
    }
}

#[test]
fn rto_capped_at_max() {
    let mut c = conn_established(Config {
        rto_max: 500 * MS,
        ..cfg()
    });
    c.send(b"x");
    take(&mut c, 0);
    let mut t = 200 * MS;
    timeout(&mut c, t);
    take(&mut c, t);
    t += 400 * MS;
    assert_eq!(c.poll_timeout(), Some(t));
    timeout(&mut c, t);
    take(&mut c, t);
    assert_eq!(c.poll_timeout(), Some(t + 500 * MS));
}

#[test]
fn rto_gives_up_after_max_retries() {
    let mut c = conn_established(Config {
        max_retries: 3,
        ..cfg()
    });
    c.send(b"x");
    take(&mut c, 0);
    for _ in 0..3 {
        let t = c.poll_timeout().unwrap();
        timeout(&mut c, t);
        take(&mut c, t);
    }
    let t = c.poll_timeout().unwrap();
    timeout(&mut c, t);
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.error(), Some(ConnError::TimedOut));
    assert_eq!(ConnError::TimedOut.as_str(), "connection timed out");
    expect_none(&mut c, t);
}

#[test]
fn rto_ack_resets_backoff() {
    let mut c = conn_with_flight(2000);
    timeout(&mut c, 200 * MS);
    sent(&mut c, 200 * MS);
    feed(&mut c, 300 * MS, ack_in(0, 1000), &[]).unwrap();
    assert_eq!(c.rto(), 200 * MS);
    // RFC 6298 §5.3: the timer restarts on an ACK of new data.
    assert_eq!(c.poll_timeout(), Some(500 * MS));
}

#[test]
fn rto_timer_stops_when_everything_acked() {
    let mut c = conn_with_flight(2000);
    feed(&mut c, MS, ack_in(0, 2000), &[]).unwrap();
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn rto_timer_restarts_on_partial_progress() {
    let mut c = conn_with_flight(2000);
    feed(&mut c, 100 * MS, ack_in(0, 1000), &[]).unwrap();
    assert_eq!(c.poll_timeout(), Some(300 * MS));
}

#[test]
fn rto_karn_no_sample_from_retransmission() {
    let mut c = conn_syn_sent(cfg());
    feed(
        &mut c,
        100 * MS,
        TcpRepr {
            seq: REMOTE_SEQ,
            ack: LOCAL_SEQ + 1,
            flags: SYN | ACK,
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    take(&mut c, 100 * MS);
    let rto = c.rto();
    c.send(b"abc");
    take(&mut c, 100 * MS);
    timeout(&mut c, 100 * MS + rto);
    take(&mut c, 100 * MS + rto);
    feed(&mut c, 100 * MS + rto + 5 * MS, ack_in(0, 3), &[]).unwrap();
    assert_eq!(c.srtt(), Some(100 * MS));
}

#[test]
fn rto_go_back_n_slow_start_after_timeout() {
    let mut c = conn_with_flight(4000);
    timeout(&mut c, 200 * MS);
    assert_eq!(sent(&mut c, 200 * MS), vec![(0, 1000)]);
    feed(&mut c, 250 * MS, ack_in(0, 1000), &[]).unwrap();
    // cwnd 1000 + 1000: two more segments, both retransmissions.
    assert_eq!(sent(&mut c, 250 * MS), vec![(1000, 1000), (2000, 1000)]);
    assert_eq!(c.counters().retransmits, 3);
}

#[test]
fn rto_late_ack_of_original_skips_retransmissions() {
    let mut c = conn_with_flight(3000);
    timeout(&mut c, 200 * MS);
    sent(&mut c, 200 * MS);
    // The originals were only delayed: everything is acked.
    feed(&mut c, 210 * MS, ack_in(0, 3000), &[]).unwrap();
    assert_eq!(c.snd_nxt(), LOCAL_SEQ + 3001);
    expect_none(&mut c, 210 * MS);
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn syn_received_gives_up_after_syn_retries() {
    let mut c = conn_syn_received(Config {
        syn_retries: 1,
        ..cfg()
    });
    timeout(&mut c, SEC);
    take(&mut c, SEC);
    timeout(&mut c, 3 * SEC);
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.error(), Some(ConnError::TimedOut));
}

// ---- Fast retransmit / fast recovery (RFC 5681 §3.2, RFC 6582) ----

#[test]
fn fast_retransmit_on_third_dupack() {
    let mut c = conn_with_flight(4000);
    dupack(&mut c, MS);
    dupack(&mut c, MS);
    expect_none(&mut c, MS);
    dupack(&mut c, MS);
    assert!(c.in_recovery());
    assert_eq!(sent(&mut c, MS), vec![(0, 1000)]);
    assert_eq!(c.congestion().ssthresh(), 2000);
    assert_eq!(c.congestion().window(), 5000);
    assert_eq!(c.counters().fast_retransmits, 1);
}

#[test]
fn dupack_needs_outstanding_data() {
    let mut c = conn_established(cfg());
    for _ in 0..5 {
        dupack(&mut c, 0);
    }
    assert!(!c.in_recovery());
}

#[test]
fn dupack_with_data_or_window_change_not_counted() {
    let mut c = conn_with_flight(4000);
    feed(&mut c, 0, ack_in(0, 0), b"a").unwrap();
    feed(
        &mut c,
        0,
        TcpRepr {
            window: 9000,
            ..ack_in(1, 0)
        },
        &[],
    )
    .unwrap();
    feed(
        &mut c,
        0,
        TcpRepr {
            window: 9000,
            ..ack_in(1, 0)
        },
        &[],
    )
    .unwrap();
    feed(
        &mut c,
        0,
        TcpRepr {
            window: 9000,
            ..ack_in(1, 0)
        },
        &[],
    )
    .unwrap();
    assert!(!c.in_recovery());
    feed(
        &mut c,
        0,
        TcpRepr {
            window: 9000,
            ..ack_in(1, 0)
        },
        &[],
    )
    .unwrap();
    assert!(c.in_recovery());
}

#[test]
fn fast_recovery_inflation_sends_new_data() {
    let mut c = conn_established(cfg());
    c.send(&data(6000, 1));
    assert_eq!(sent(&mut c, 0).len(), 4);
    for _ in 0..3 {
        dupack(&mut c, MS);
    }
    // Retransmission, then cwnd 5000 vs flight 4000: one new segment.
    assert_eq!(sent(&mut c, MS), vec![(0, 1000), (4000, 1000)]);
    dupack(&mut c, MS);
    assert_eq!(c.congestion().window(), 6000);
    assert_eq!(sent(&mut c, MS), vec![(5000, 1000)]);
}

#[test]
fn partial_ack_retransmits_next_hole() {
    let mut c = conn_with_flight(4000);
    for _ in 0..3 {
        dupack(&mut c, MS);
    }
    sent(&mut c, MS);
    feed(&mut c, 2 * MS, ack_in(0, 1000), &[]).unwrap();
    assert!(c.in_recovery());
    assert_eq!(sent(&mut c, 2 * MS)[0], (1000, 1000));
}

#[test]
fn full_ack_exits_recovery_with_deflated_window() {
    let mut c = conn_with_flight(4000);
    for _ in 0..3 {
        dupack(&mut c, MS);
    }
    sent(&mut c, MS);
    feed(&mut c, 2 * MS, ack_in(0, 4000), &[]).unwrap();
    assert!(!c.in_recovery());
    assert_eq!(c.congestion().window(), 2000);
}

#[test]
fn no_fast_retransmit_below_recover_after_rto() {
    let mut c = conn_with_flight(4000);
    timeout(&mut c, 200 * MS);
    sent(&mut c, 200 * MS);
    // Duplicate ACKs for data sent before the RTO must not trigger
    // another reduction (RFC 6582 §3.2 step 1, recover = SND.MAX).
    for _ in 0..4 {
        dupack(&mut c, 210 * MS);
    }
    assert!(!c.in_recovery());
    assert_eq!(c.counters().fast_retransmits, 0);
}

// ---- NewReno unit behaviour ----

#[test]
fn newreno_initial_window_rfc5681() {
    assert_eq!(initial_window(536), 2144);
    assert_eq!(initial_window(1460), 4380);
    assert_eq!(initial_window(9000), 18000);
}

#[test]
fn newreno_congestion_avoidance_one_mss_per_window() {
    let mut n = NewReno::default();
    n.on_established(1000);
    n.on_rto(8000, 1000);
    assert_eq!((n.window(), n.ssthresh()), (1000, 4000));
    n.on_ack(0, 1000, 1000);
    // Slow start grows by at most 2·SMSS per ACK (RFC 3465 L = 2).
    n.on_ack(0, 5000, 1000);
    assert_eq!(n.window(), 4000);
    // At ssthresh: +1 MSS per cwnd of acked bytes.
    n.on_ack(0, 3999, 1000);
    assert_eq!(n.window(), 4000);
    n.on_ack(0, 1, 1000);
    assert_eq!(n.window(), 5000);
}

#[test]
fn newreno_ssthresh_at_least_two_segments() {
    let mut n = NewReno::default();
    n.on_established(1000);
    n.on_fast_retransmit(0, 1000, 1000);
    assert_eq!(n.ssthresh(), 2000);
    assert_eq!(n.window(), 5000);
}

// ---- Zero-window probing (RFC 9293 §3.8.6.1) ----

fn conn_zero_window() -> Conn {
    let mut c = conn_established(cfg());
    feed(
        &mut c,
        0,
        TcpRepr {
            window: 0,
            ..ack_in(0, 0)
        },
        &[],
    )
    .unwrap();
    c.send(b"hello");
    expect_none(&mut c, 0);
    c
}

#[test]
fn zero_window_persist_timer_armed() {
    let c = conn_zero_window();
    assert_eq!(c.poll_timeout(), Some(200 * MS));
}

#[test]
fn zero_window_probe_one_byte() {
    let mut c = conn_zero_window();
    timeout(&mut c, 200 * MS);
    expect(&mut c, 200 * MS, ack_out(0, 0), b"h");
    assert_eq!(c.counters().window_probes, 1);
}

#[test]
fn zero_window_probe_backoff() {
    let mut c = conn_zero_window();
    let mut t = 200 * MS;
    for k in 1..5u32 {
        timeout(&mut c, t);
        assert_eq!(take(&mut c, t).1, b"h");
        // The peer keeps answering with a zero window.
        feed(
            &mut c,
            t,
            TcpRepr {
                window: 0,
                ..ack_in(0, 0)
            },
            &[],
        )
        .unwrap();
        let next = c.poll_timeout().unwrap();
        assert_eq!(next, t + ((200 * MS) << k));
        t = next;
    }
    assert_eq!(c.state(), State::Established);
}

#[test]
fn zero_window_never_gives_up_while_peer_answers() {
    let mut c = conn_zero_window();
    for _ in 0..40 {
        let t = c.poll_timeout().unwrap();
        timeout(&mut c, t);
        take(&mut c, t);
        feed(
            &mut c,
            t,
            TcpRepr {
                window: 0,
                ..ack_in(0, 0)
            },
            &[],
        )
        .unwrap();
    }
    assert_eq!(c.state(), State::Established);
}

#[test]
fn zero_window_gives_up_without_answers() {
    let mut c = conn_zero_window();
    for _ in 0..20 {
        let Some(t) = c.poll_timeout() else { break };
        timeout(&mut c, t);
        let _ = poll(&mut c, t);
    }
    assert_eq!(c.error(), Some(ConnError::TimedOut));
}

#[test]
fn zero_window_reopens_and_sends() {
    let mut c = conn_zero_window();
    timeout(&mut c, 200 * MS);
    take(&mut c, 200 * MS);
    // The probe byte was dropped; the window opens.
    feed(&mut c, 300 * MS, ack_in(0, 0), &[]).unwrap();
    expect(
        &mut c,
        300 * MS,
        TcpRepr {
            flags: ACK | PSH,
            ..ack_out(0, 0)
        },
        b"hello",
    );
}

#[test]
fn zero_window_probe_accepted() {
    let mut c = conn_zero_window();
    timeout(&mut c, 200 * MS);
    take(&mut c, 200 * MS);
    feed(
        &mut c,
        210 * MS,
        TcpRepr {
            window: 0,
            ..ack_in(0, 1)
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.snd_una(), LOCAL_SEQ + 2);
    assert_eq!(c.send_queue(), 4);
    feed(&mut c, 220 * MS, ack_in(0, 1), &[]).unwrap();
    expect(
        &mut c,
        220 * MS,
        TcpRepr {
            flags: ACK | PSH,
            ..ack_out(1, 0)
        },
        b"ello",
    );
}

// ---- Sender SWS deadlock avoidance ----

#[test]
fn small_window_with_nothing_in_flight_still_sends() {
    let mut c = conn_established(cfg());
    // The peer offers only 300 bytes (below half its maximum window) and
    // nothing is in flight: sending them is the only way forward.
    feed(
        &mut c,
        0,
        TcpRepr {
            window: 300,
            ..ack_in(0, 0)
        },
        &[],
    )
    .unwrap();
    c.send(&data(2000, 1));
    assert_eq!(sent(&mut c, 0), vec![(0, 300)]);
    expect_none(&mut c, 0);
}

// ---- Keep-alive (RFC 9293 §3.8.4) ----

fn ka_cfg() -> Config {
    Config {
        keepalive: Some(10 * SEC),
        keepalive_interval: SEC,
        keepalive_probes: 3,
        ..cfg()
    }
}

#[test]
fn keepalive_off_by_default() {
    let c = conn_established(cfg());
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn keepalive_probe_after_idle() {
    let mut c = conn_established(ka_cfg());
    assert_eq!(c.poll_timeout(), Some(10 * SEC));
    timeout(&mut c, 10 * SEC);
    expect(
        &mut c,
        10 * SEC,
        TcpRepr {
            seq: LOCAL_SEQ,
            ..ack_out(0, 0)
        },
        &[],
    );
    assert_eq!(c.counters().keepalives, 1);
    assert_eq!(c.poll_timeout(), Some(11 * SEC));
}

#[test]
fn keepalive_answer_resets() {
    let mut c = conn_established(ka_cfg());
    timeout(&mut c, 10 * SEC);
    take(&mut c, 10 * SEC);
    feed(&mut c, 10 * SEC + MS, ack_in(0, 0), &[]).unwrap();
    assert_eq!(c.poll_timeout(), Some(20 * SEC + MS));
}

#[test]
fn keepalive_gives_up() {
    let mut c = conn_established(ka_cfg());
    for _ in 0..3 {
        let t = c.poll_timeout().unwrap();
        timeout(&mut c, t);
        take(&mut c, t);
    }
    let t = c.poll_timeout().unwrap();
    assert_eq!(t, 13 * SEC);
    timeout(&mut c, t);
    assert_eq!(c.error(), Some(ConnError::TimedOut));
}

#[test]
fn keepalive_not_while_data_outstanding() {
    let mut c = conn_established(ka_cfg());
    c.send(b"x");
    take(&mut c, 0);
    assert_eq!(c.poll_timeout(), Some(200 * MS));
}

#[test]
fn keepalive_probe_from_peer_is_acked() {
    let mut c = conn_established(cfg());
    let r = feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ,
            ..ack_in(0, 0)
        },
        &[],
    );
    assert_eq!(r, Err(TcpDrop::NotAcceptable));
    expect(&mut c, 0, ack_out(0, 0), &[]);
}

#[test]
fn regression_stale_tsecr_after_rto_not_sampled() {
    let cf = Config {
        timestamps: true,
        ..cfg()
    };
    let ts = |v, e| Some(Timestamps { tsval: v, tsecr: e });
    let mut c = conn_syn_received_with(
        cf,
        TcpRepr {
            timestamps: ts(1, 0),
            ..syn_in()
        },
    );
    feed(
        &mut c,
        100 * MS,
        TcpRepr {
            timestamps: ts(2, 0),
            ..ack_in(0, 0)
        },
        &[],
    )
    .unwrap();
    let srtt = c.srtt().unwrap();
    c.send(&data(2000, 1));
    let first = take(&mut c, 100 * MS).0.timestamps.unwrap().tsval;
    take(&mut c, 100 * MS);
    let t = c.poll_timeout().unwrap();
    timeout(&mut c, t);
    take(&mut c, t);
    // The peer had the data; its ACK echoes the original TSval, 2 s old.
    feed(
        &mut c,
        t + 2 * SEC,
        TcpRepr {
            timestamps: ts(3, first),
            ..ack_in(0, 2 * 988)
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.srtt(), Some(srtt));
}

// ---- Limited Transmit (RFC 3042) ----

#[test]
fn limited_transmit_sends_one_new_segment_for_each_of_the_first_two_dupacks() {
    let mut c = conn_established(cfg());
    c.send(&data(8000, 1));
    // Initial window: 4 segments.
    assert_eq!(sent(&mut c, 0).len(), 4);
    dupack(&mut c, MS);
    assert_eq!(sent(&mut c, MS), vec![(4000, 1000)]);
    dupack(&mut c, MS);
    assert_eq!(sent(&mut c, MS), vec![(5000, 1000)]);
    // Flight is cwnd + 2 SMSS now: nothing more until the third.
    expect_none(&mut c, MS);
    // RFC 3042 §2: cwnd itself does not change.
    assert_eq!(c.congestion().window(), 4000);
    assert!(!c.in_recovery());
    dupack(&mut c, MS);
    assert!(c.in_recovery());
    assert_eq!(sent(&mut c, MS)[0], (0, 1000), "fast retransmit");
}

#[test]
fn limited_transmit_stays_inside_the_peers_window() {
    let mut c = conn_established(cfg());
    c.send(&data(8000, 1));
    assert_eq!(sent(&mut c, 0).len(), 4);
    // The peer's window is 4500: one ACK shrinks it (not a duplicate),
    // then duplicates with that window.
    let small = TcpRepr {
        window: 4500,
        ..ack_in(0, 0)
    };
    feed(&mut c, MS, small, &[]).unwrap();
    expect_none(&mut c, MS);
    feed(&mut c, MS, small, &[]).unwrap();
    // 500 bytes of window left: Nagle/SWS hold a short segment while
    // data is in flight, so nothing goes.
    expect_none(&mut c, MS);
    feed(&mut c, MS, small, &[]).unwrap();
    expect_none(&mut c, MS);
    assert_eq!(c.congestion().window(), 4000);
}

#[test]
fn limited_transmit_ends_with_a_new_ack() {
    let mut c = conn_established(cfg());
    c.send(&data(8000, 1));
    assert_eq!(sent(&mut c, 0).len(), 4);
    dupack(&mut c, MS);
    assert_eq!(sent(&mut c, MS), vec![(4000, 1000)]);
    // A new ACK resets the count: cwnd alone again (5000 after slow
    // start's growth by the 1000 acked) against a flight of 4000.
    feed(&mut c, MS, ack_in(0, 1000), &[]).unwrap();
    assert_eq!(sent(&mut c, MS), vec![(5000, 1000)]);
    assert_eq!(c.congestion().window(), 5000);
}

// ---- Path MTU (RFC 1191 §6.3, RFC 5927 §4.1) ----

#[test]
fn frag_needed_in_flight_shrinks_segments_and_resends_from_snd_una() {
    let mut c = conn_with_flight(3000);
    let cwnd = c.congestion().window();
    assert!(c.path_mtu_reduced(800, LOCAL_SEQ + 1 + 1000, MS));
    assert_eq!(c.eff_mss(), 760);
    assert_eq!(c.counters().pmtu_reduced, 1);
    // The path's size, not congestion: the window stays.
    assert_eq!(c.congestion().window(), cwnd);
    assert_eq!(c.counters().rto_expired, 0);
    // Everything unacknowledged goes again at once, from SND.UNA, in
    // segments of the new size.
    let s = sent(&mut c, MS);
    assert_eq!(s, vec![(0, 760), (760, 760), (1520, 760), (2280, 720)]);
    // New data too.
    c.send(&data(1000, 2));
    feed(&mut c, 2 * MS, ack_in(0, 3000), &[]).unwrap();
    assert_eq!(sent(&mut c, 2 * MS), vec![(3000, 760), (3760, 240)]);
}

#[test]
fn frag_needed_outside_the_flight_or_not_smaller_is_ignored() {
    let mut c = conn_with_flight(3000);
    // Below SND.UNA, at SND.MAX, far away: a blind guess (RFC 5927 §4.1).
    for seq in [LOCAL_SEQ, LOCAL_SEQ + 1 + 3000, LOCAL_SEQ + 1_000_000] {
        assert!(!c.path_mtu_reduced(800, seq, MS));
    }
    // An MTU that leaves the segments as they are.
    assert!(!c.path_mtu_reduced(1500, LOCAL_SEQ + 1, MS));
    assert_eq!(c.eff_mss(), 1000);
    assert_eq!(c.counters().pmtu_ignored, 4);
    assert_eq!(c.counters().pmtu_reduced, 0);
    expect_none(&mut c, MS);
}

#[test]
fn frag_needed_below_the_floor_stops_at_min_pmtu() {
    let mut c = conn_with_flight(3000);
    assert!(c.path_mtu_reduced(68, LOCAL_SEQ + 1, MS));
    assert_eq!(c.eff_mss(), u32::from(MIN_PMTU) - 40);
    // And no further.
    assert!(!c.path_mtu_reduced(300, LOCAL_SEQ + 1, MS));
}

// ---- Restart after idle (RFC 5681 §4.1) ----

/// A connection whose window grew to 16 segments (slow start from an IW
/// of 4), everything acknowledged at `t`; returns it and `t`.
fn grown_then_drained_with(cc: CcAlgo) -> (Conn, u64) {
    let mut c = conn_established(Config { cc, ..cfg() });
    let mut acked = 0u32;
    let mut now = 0;
    for round in [4000usize, 8000] {
        c.send(&data(round, 3));
        now += 10 * MS;
        let s = sent(&mut c, now);
        assert_eq!(s.iter().map(|&(_, n)| n).sum::<usize>(), round);
        // One ACK per segment: slow start adds one segment each.
        for &(_, n) in &s {
            acked += n as u32;
            now += MS;
            feed(&mut c, now, ack_in(0, acked), &[]).unwrap();
        }
    }
    assert_eq!(c.congestion().window(), 16_000);
    (c, now)
}

fn grown_then_drained() -> (Conn, u64) {
    grown_then_drained_with(CcAlgo::NewReno)
}

#[test]
fn sending_after_a_silence_of_several_rtos_restarts_from_the_initial_window() {
    for cc in [CcAlgo::NewReno, CcAlgo::Cubic] {
        let (mut c, t) = grown_then_drained_with(cc);
        let rto = c.rto();
        c.send(&data(8000, 4));
        // Three and a half RTOs of silence: halved three times (2000),
        // but not below the restart window min(IW, cwnd) = 4000.
        let now = t + rto * 7 / 2;
        let s = sent(&mut c, now);
        assert_eq!(s.len(), 4, "{cc:?}: {s:?}");
        assert_eq!(c.congestion().window(), 4000, "{cc:?}");
        let keeps = c.congestion().ssthresh() >= 12_000;
        assert!(keeps, "{cc:?}: ssthresh keeps 3/4 of the old window");
        assert_eq!(c.counters().idle_restarts, 1);
    }
}

#[test]
fn a_shorter_silence_halves_the_window_once_per_rto_beyond_the_first() {
    let (mut c, t) = grown_then_drained();
    let rto = c.rto();
    c.send(&data(8000, 4));
    let s = sent(&mut c, t + rto * 3 / 2);
    assert_eq!(c.congestion().window(), 8000);
    assert_eq!(s.len(), 8, "{s:?}");
}

#[test]
fn no_restart_within_an_rto_or_with_nothing_to_send() {
    let (mut c, t) = grown_then_drained();
    let rto = c.rto();
    // Data from the peer after a long silence: acknowledged, no restart.
    feed(&mut c, t + 10 * rto, ack_in(0, 12_000), b"hello").unwrap();
    let _ = sent(&mut c, t + 10 * rto);
    assert_eq!(c.counters().idle_restarts, 0);
    assert_eq!(c.congestion().window(), 16_000);
    // Sending again: the silence counts from the last acknowledgment of
    // ours, not from the peer's data.
    c.send(&data(8000, 5));
    let _ = sent(&mut c, t + 10 * rto + rto / 2);
    assert_eq!(c.counters().idle_restarts, 1);
    let (mut c, t) = grown_then_drained();
    c.send(&data(8000, 5));
    let half = t + c.rto() / 2;
    let s = sent(&mut c, half);
    assert_eq!(s.len(), 8);
    assert_eq!(c.counters().idle_restarts, 0);
    assert_eq!(c.congestion().window(), 16_000);
}
