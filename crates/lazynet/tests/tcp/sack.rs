//! SACK-based loss recovery (RFC 6675) and the sender's scoreboard
//! (RFC 2018): entering recovery, NextSeg's rule order, pipe against
//! cwnd, recovery of several losses in one RTT, RTO clearing the
//! scoreboard, and received SACK blocks that cannot be right.
//!
//! The connection under test is the sender; the test plays a receiver
//! that SACKs. Offsets are bytes after our ISS + 1. Unless a test says
//! otherwise: MSS 1000, NewReno, no timestamps, peer window 16384.

use crate::util::*;
use lazynet::proto::tcp::sack::MAX_SACKED;

const W: u16 = 16384;

fn o(n: u32) -> SeqNumber {
    LOCAL_SEQ + 1 + n
}

/// An ACK of `acked` bytes carrying SACK blocks (offsets).
fn sack_ack(acked: u32, blocks: &[(u32, u32)]) -> TcpRepr {
    let v: Vec<_> = blocks.iter().map(|&(a, b)| (o(a), o(b))).collect();
    TcpRepr {
        window: W,
        sack: SackBlocks::new(&v).unwrap(),
        ..ack_in(0, acked)
    }
}

fn sent(c: &mut Conn, now: u64) -> Vec<(u32, usize)> {
    let mut v = Vec::new();
    while let Some((r, d)) = poll(c, now) {
        v.push((r.seq.diff(o(0)) as u32, d.len()));
    }
    v
}

fn sack_cfg() -> Config {
    Config {
        sack: true,
        send_buf: 32 * 1024,
        ..cfg()
    }
}

/// ESTABLISHED with SACK negotiated.
fn sack_conn(cf: Config) -> Conn {
    let mut c = conn_syn_received_with(
        cf,
        TcpRepr {
            sack_permitted: true,
            window: W,
            ..syn_in()
        },
    );
    feed(&mut c, 0, sack_ack(0, &[]), &[]).unwrap();
    assert!(c.sack_enabled());
    c
}

/// `total` bytes queued; the first 4000 sent at 0 and acked one segment at
/// a time at 10 ms (cwnd 4000 → 8000); then 4000..12000 (8 segments) in
/// flight since 10 ms.
fn flight_4k_12k(cf: Config, total: usize) -> Conn {
    let mut c = sack_conn(cf);
    c.send(&data(total, 1));
    assert_eq!(sent(&mut c, 0).len(), 4);
    for k in 1..=4 {
        feed(&mut c, 10 * MS, sack_ack(k * 1000, &[]), &[]).unwrap();
    }
    assert_eq!(c.congestion().window(), 8000);
    let s = sent(&mut c, 10 * MS);
    assert_eq!(s.first(), Some(&(4000, 1000)));
    assert_eq!(s.last(), Some(&(11000, 1000)));
    assert_eq!(s.len(), 8);
    c
}

fn ranges(c: &Conn) -> Vec<(u32, u32)> {
    c.scoreboard()
        .as_slice()
        .iter()
        .map(|&(a, b)| (a.diff(o(0)) as u32, b.diff(o(0)) as u32))
        .collect()
}

// ---- Scoreboard updates and entering recovery (RFC 6675 §5) ----

#[test]
fn sack_blocks_recorded_in_scoreboard() {
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    feed(&mut c, 20 * MS, sack_ack(4000, &[(5000, 6000)]), &[]).unwrap();
    feed(
        &mut c,
        20 * MS,
        sack_ack(4000, &[(7000, 8000), (5000, 6000)]),
        &[],
    )
    .unwrap();
    assert_eq!(ranges(&c), vec![(5000, 6000), (7000, 8000)]);
    assert!(!c.in_recovery());
    expect_none(&mut c, 20 * MS);
}

#[test]
fn sack_third_dupack_enters_recovery_cwnd_ssthresh() {
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    feed(&mut c, 20 * MS, sack_ack(4000, &[(5000, 6000)]), &[]).unwrap();
    feed(&mut c, 21 * MS, sack_ack(4000, &[(5000, 7000)]), &[]).unwrap();
    assert!(!c.in_recovery());
    feed(&mut c, 22 * MS, sack_ack(4000, &[(5000, 8000)]), &[]).unwrap();
    assert!(c.in_recovery());
    // RFC 6675 step 4.2: ssthresh = cwnd = FlightSize / 2, no inflation.
    assert_eq!(c.congestion().ssthresh(), 4000);
    assert_eq!(c.congestion().window(), 4000);
    assert_eq!(c.counters().fast_retransmits, 1);
    // Step 4.3: the segment at HighACK goes first.
    assert_eq!(sent(&mut c, 22 * MS)[0], (4000, 1000));
}

#[test]
fn sack_islost_enters_recovery_on_first_dupack() {
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    // One ACK (the others were lost) SACKing three segments above the
    // hole: IsLost(HighACK + 1) (RFC 6675 §5 step 2).
    feed(&mut c, 20 * MS, sack_ack(4000, &[(5000, 8000)]), &[]).unwrap();
    assert!(c.in_recovery());
    assert_eq!(sent(&mut c, 20 * MS)[0], (4000, 1000));
}

#[test]
fn sack_two_dupacks_two_segments_no_recovery() {
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    feed(&mut c, 20 * MS, sack_ack(4000, &[(5000, 6000)]), &[]).unwrap();
    feed(&mut c, 21 * MS, sack_ack(4000, &[(5000, 7000)]), &[]).unwrap();
    assert!(!c.in_recovery());
    expect_none(&mut c, 21 * MS);
}

#[test]
fn sack_repeated_old_information_is_not_a_dupack() {
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    for t in 0..5 {
        feed(&mut c, (20 + t) * MS, sack_ack(4000, &[(5000, 6000)]), &[]).unwrap();
    }
    assert!(!c.in_recovery());
    assert_eq!(c.counters().fast_retransmits, 0);
}

#[test]
fn sack_new_information_counts_even_if_window_changes() {
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    for (k, w) in [(6000, 9000u16), (7000, 10000), (8000, 11000)] {
        feed(
            &mut c,
            20 * MS,
            TcpRepr {
                window: w,
                ..sack_ack(4000, &[(5000, k)])
            },
            &[],
        )
        .unwrap();
    }
    assert!(c.in_recovery());
}

#[test]
fn sack_islost_from_ack_carrying_data() {
    // Bidirectional traffic: the peer's ACKs carry data, so they are not
    // duplicate ACKs, but their SACK blocks still show the loss.
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    feed(&mut c, 20 * MS, sack_ack(4000, &[(5000, 8000)]), b"hello").unwrap();
    assert!(c.in_recovery());
}

#[test]
fn sack_not_negotiated_falls_back_to_newreno() {
    // We offer SACK, the peer does not: RFC 6582 recovery with inflation.
    let mut c = conn_established(sack_cfg());
    assert!(!c.sack_enabled());
    c.send(&data(4000, 1));
    sent(&mut c, 0);
    for _ in 0..3 {
        feed(&mut c, MS, ack_in(0, 0), &[]).unwrap();
    }
    assert!(c.in_recovery());
    assert_eq!(c.congestion().window(), 2000 + 3000);
}

#[test]
fn sack_negotiated_but_no_blocks_still_recovers() {
    // A peer that negotiated SACK but sends plain duplicate ACKs.
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    for t in 0..3 {
        feed(&mut c, (20 + t) * MS, sack_ack(4000, &[]), &[]).unwrap();
    }
    assert!(c.in_recovery());
    assert_eq!(sent(&mut c, 22 * MS)[0], (4000, 1000));
    // A partial ACK without SACK information resends at SND.UNA.
    feed(&mut c, 40 * MS, sack_ack(5000, &[]), &[]).unwrap();
    assert_eq!(sent(&mut c, 40 * MS)[0], (5000, 1000));
}

// ---- Several losses in one window ----

/// Segments at 4000, 6000 and 8000 lost; the peer got the other five and
/// SACKed each as it arrived (20..24 ms).
fn three_losses(cf: Config) -> Conn {
    let mut c = flight_4k_12k(cf, 12000);
    let acks: [&[(u32, u32)]; 5] = [
        &[(5000, 6000)],
        &[(7000, 8000), (5000, 6000)],
        &[(9000, 10000), (7000, 8000), (5000, 6000)],
        &[(9000, 11000), (7000, 8000), (5000, 6000)],
        &[(9000, 12000), (7000, 8000), (5000, 6000)],
    ];
    for (i, b) in acks.iter().enumerate() {
        feed(&mut c, (20 + i as u64) * MS, sack_ack(4000, b), &[]).unwrap();
    }
    c
}

#[test]
fn sack_multiple_losses_recovered_in_one_rtt() {
    let mut c = three_losses(sack_cfg());
    assert!(c.in_recovery());
    // All three holes go out at once (NextSeg rule 1 while cwnd − pipe
    // >= 1 SMSS), not one per RTT.
    assert_eq!(
        sent(&mut c, 24 * MS),
        vec![(4000, 1000), (6000, 1000), (8000, 1000)]
    );
    // One RTT later the receiver has everything.
    feed(&mut c, 34 * MS, sack_ack(12000, &[]), &[]).unwrap();
    assert!(!c.in_recovery());
    assert_eq!(c.snd_una(), o(12000));
    assert_eq!(c.counters().rto_expired, 0);
    assert_eq!(c.counters().retransmits, 3);
}

#[test]
fn newreno_same_losses_need_one_rtt_per_hole() {
    // The contrast: without SACK, RFC 6582 repairs one hole per RTT.
    let mut c = conn_established(Config {
        send_buf: 32 * 1024,
        ..cfg()
    });
    c.send(&data(12000, 1));
    sent(&mut c, 0);
    for k in 1..=4 {
        feed(&mut c, 10 * MS, ack_in(0, k * 1000), &[]).unwrap();
    }
    sent(&mut c, 10 * MS);
    for t in 20..25 {
        feed(&mut c, t * MS, ack_in(0, 4000), &[]).unwrap();
    }
    assert_eq!(sent(&mut c, 24 * MS)[0], (4000, 1000));
    feed(&mut c, 34 * MS, ack_in(0, 6000), &[]).unwrap();
    assert_eq!(sent(&mut c, 34 * MS)[0], (6000, 1000));
    feed(&mut c, 44 * MS, ack_in(0, 8000), &[]).unwrap();
    assert_eq!(sent(&mut c, 44 * MS)[0], (8000, 1000));
    feed(&mut c, 54 * MS, ack_in(0, 12000), &[]).unwrap();
    assert!(!c.in_recovery());
}

#[test]
fn sack_partial_ack_keeps_cwnd() {
    let mut c = three_losses(sack_cfg());
    sent(&mut c, 24 * MS);
    // The first retransmission arrived; the others are still in flight.
    feed(
        &mut c,
        34 * MS,
        sack_ack(6000, &[(9000, 12000), (7000, 8000)]),
        &[],
    )
    .unwrap();
    assert!(c.in_recovery());
    // No RFC 6582 deflation: cwnd stays ssthresh.
    assert_eq!(c.congestion().window(), 4000);
    // pipe 2000 (two retransmissions out): room for one segment, and
    // HighACK passed RescueRxt, so rule 4 resends the highest hole once.
    assert_eq!(sent(&mut c, 34 * MS), vec![(8000, 1000)]);
    assert_eq!(c.congestion().window(), 4000);
    feed(
        &mut c,
        35 * MS,
        sack_ack(6000, &[(9000, 12000), (7000, 8000)]),
        &[],
    )
    .unwrap();
    expect_none(&mut c, 35 * MS);
}

#[test]
fn sack_recovery_exits_at_recovery_point() {
    let mut c = three_losses(sack_cfg());
    sent(&mut c, 24 * MS);
    feed(&mut c, 34 * MS, sack_ack(11000, &[(11000, 12000)]), &[]).unwrap();
    assert!(c.in_recovery(), "RecoveryPoint is 12000");
    feed(&mut c, 35 * MS, sack_ack(12000, &[]), &[]).unwrap();
    assert!(!c.in_recovery());
    // RFC 6582 §3.2 step 4 (1): min(ssthresh, max(FlightSize, SMSS) + SMSS).
    assert_eq!(c.congestion().window(), 2000);
    assert!(c.scoreboard().is_empty());
}

#[test]
fn sack_recovery_with_cubic_reduces_by_beta() {
    let mut c = three_losses(Config {
        cc: CcAlgo::Cubic,
        ..sack_cfg()
    });
    assert!(c.in_recovery());
    // RFC 9438 §4.6: cwnd 8000 · 0.7.
    assert_eq!(c.congestion().window(), 5600);
    assert_eq!(c.congestion().ssthresh(), 5600);
    // More room than NewReno: three holes and nothing else (no new data).
    assert_eq!(sent(&mut c, 24 * MS).len(), 3);
}

// ---- NextSeg (RFC 6675 §4) ----

/// Hole [4000,5000) lost (6 segments SACKed above); hole [10000,11000)
/// not lost (one segment above).
fn lost_and_unlost_hole(total: usize) -> Conn {
    let mut c = flight_4k_12k(sack_cfg(), total);
    feed(
        &mut c,
        20 * MS,
        sack_ack(4000, &[(5000, 10000), (11000, 12000)]),
        &[],
    )
    .unwrap();
    assert!(c.in_recovery());
    c
}

#[test]
fn next_seg_rule1_then_rule2_new_data() {
    let mut c = lost_and_unlost_hole(16000);
    // cwnd 4000; pipe = 1000 (the unlost hole). Fast retransmit (4.3),
    // then new data (rule 2) before the unlost hole (rule 3).
    assert_eq!(
        sent(&mut c, 20 * MS),
        vec![(4000, 1000), (12000, 1000), (13000, 1000)]
    );
}

#[test]
fn next_seg_rule3_when_no_new_data() {
    let mut c = lost_and_unlost_hole(12000);
    // Nothing new to send: rule 3 resends the hole not yet deemed lost.
    assert_eq!(sent(&mut c, 20 * MS), vec![(4000, 1000), (10000, 1000)]);
    assert_eq!(c.scoreboard().high_rxt(), o(11000));
    assert_eq!(c.counters().sack_retransmits, 1);
}

#[test]
fn next_seg_rule4_rescue_once_after_highack_passes_rescuerxt() {
    let mut c = lost_and_unlost_hole(12000);
    sent(&mut c, 20 * MS);
    // HighACK 5000 passes RescueRxt (5000 is one past the fast
    // retransmit, i.e. the RFC's octet 4999), HighRxt 11000.
    feed(&mut c, 30 * MS, sack_ack(10000, &[(11000, 12000)]), &[]).unwrap();
    // Rescue: the highest unSACKed outstanding segment, HighRxt untouched.
    assert_eq!(sent(&mut c, 30 * MS), vec![(10000, 1000)]);
    assert_eq!(c.scoreboard().rescue_rxt(), Some(o(12000)));
    assert_eq!(c.scoreboard().high_rxt(), o(11000));
    // Only one per recovery.
    feed(&mut c, 31 * MS, sack_ack(10000, &[(11000, 12000)]), &[]).unwrap();
    expect_none(&mut c, 31 * MS);
}

#[test]
fn sack_fast_retransmit_stops_at_sacked_data() {
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    // The receiver has everything from 4500: only 500 bytes are missing.
    feed(&mut c, 20 * MS, sack_ack(4000, &[(4500, 8000)]), &[]).unwrap();
    assert!(c.in_recovery());
    assert_eq!(sent(&mut c, 20 * MS)[0], (4000, 500));
}

// ---- pipe against cwnd ----

#[test]
fn sack_pipe_never_exceeds_cwnd_after_nextseg_sends() {
    // 16 segments in flight, every third lost; a receiver SACKs each
    // arrival (at most 4 blocks, most recent first), then the
    // retransmissions arrive one RTT later.
    let mut c = sack_conn(Config {
        send_buf: 64 * 1024,
        ..sack_cfg()
    });
    c.send(&data(40_000, 1));
    let mut t = 0;
    // Slow start to cwnd 16000 without loss.
    let mut acked = 0;
    while c.congestion().window() < 16_000 {
        let s = sent(&mut c, t);
        t += 10 * MS;
        for (off, len) in s {
            acked = acked.max(off + len as u32);
            feed(&mut c, t, sack_ack(acked, &[]), &[]).unwrap();
        }
    }
    let flight = sent(&mut c, t);
    assert!(flight.len() >= 8);
    let base = acked;
    let mut got: Vec<(u32, u32)> = Vec::new();
    let mut checked = 0;
    for (i, &(off, len)) in flight.iter().enumerate() {
        if i % 3 == 0 {
            continue; // lost
        }
        got.push((off, off + len as u32));
        // Blocks: the most recent first, then the others, merged.
        let mut merged: Vec<(u32, u32)> = Vec::new();
        for &(a, b) in &got {
            match merged.last_mut() {
                Some(l) if l.1 == a => l.1 = b,
                _ => merged.push((a, b)),
            }
        }
        merged.reverse();
        merged.truncate(4);
        t += MS;
        feed(&mut c, t, sack_ack(base, &merged), &[]).unwrap();
        let first = c.counters().retransmits;
        let s = sent(&mut c, t);
        if c.in_recovery() && !s.is_empty() {
            let entry = first == 0 && c.counters().retransmits > 0;
            // Apart from the fast retransmit that starts recovery (RFC
            // 6675 step 4.3), sending never takes pipe above cwnd.
            if !entry || s.len() > 1 {
                assert!(
                    c.pipe() <= c.congestion().window(),
                    "pipe {} cwnd {} after {s:?}",
                    c.pipe(),
                    c.congestion().window()
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 0);
}

#[test]
fn sack_pipe_accounts_sacked_and_retransmitted() {
    let mut c = three_losses(sack_cfg());
    // All holes lost, all else SACKed: nothing in the network.
    assert_eq!(c.pipe(), 0);
    sent(&mut c, 24 * MS);
    // Three retransmissions in flight.
    assert_eq!(c.pipe(), 3000);
}

// ---- RTO (RFC 6675 §5.1) ----

#[test]
fn sack_rto_clears_scoreboard_and_goes_back_to_snd_una() {
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    feed(&mut c, 20 * MS, sack_ack(4000, &[(5000, 7000)]), &[]).unwrap();
    assert_eq!(ranges(&c), vec![(5000, 7000)]);
    // Duplicate ACKs do not restart the timer (RFC 6298 §5.3).
    let t = c.poll_timeout().unwrap();
    assert_eq!(t, 210 * MS);
    timeout(&mut c, t);
    assert!(c.scoreboard().is_empty());
    assert!(!c.in_recovery());
    assert_eq!(sent(&mut c, t), vec![(4000, 1000)]);
}

#[test]
fn sack_rto_during_recovery_blocks_new_recovery_until_recovery_point() {
    let mut c = three_losses(sack_cfg());
    sent(&mut c, 24 * MS);
    let t = c.poll_timeout().unwrap();
    timeout(&mut c, t);
    assert!(!c.in_recovery());
    assert!(c.scoreboard().is_empty());
    sent(&mut c, t);
    // New SACK information below RecoveryPoint (= SND.MAX at the RTO).
    feed(
        &mut c,
        t + MS,
        sack_ack(4000, &[(9000, 12000), (5000, 6000)]),
        &[],
    )
    .unwrap();
    feed(
        &mut c,
        t + MS,
        sack_ack(4000, &[(7000, 8000), (5000, 6000)]),
        &[],
    )
    .unwrap();
    assert!(!c.in_recovery());
    assert_eq!(c.counters().fast_retransmits, 1);
}

#[test]
fn sack_reneged_data_resent_after_rto() {
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    // The peer SACKs 5000..8000, then (reneging, RFC 2018 §8) drops it
    // and stops reporting it.
    feed(&mut c, 20 * MS, sack_ack(4000, &[(5000, 8000)]), &[]).unwrap();
    sent(&mut c, 20 * MS);
    feed(&mut c, 30 * MS, sack_ack(5000, &[]), &[]).unwrap();
    // We keep the SACKed data until it is cumulatively acknowledged.
    assert_eq!(c.send_queue(), 7000);
    assert_eq!(ranges(&c), vec![(5000, 8000)]);
    let t = c.poll_timeout().unwrap();
    timeout(&mut c, t);
    assert!(c.scoreboard().is_empty());
    // Go-back-N resends the reneged data too.
    assert_eq!(sent(&mut c, t), vec![(5000, 1000)]);
    feed(&mut c, t + 10 * MS, sack_ack(6000, &[]), &[]).unwrap();
    assert_eq!(sent(&mut c, t + 10 * MS), vec![(6000, 1000), (7000, 1000)]);
}

#[test]
fn sack_cumulative_ack_into_sacked_range_trims_it() {
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    feed(&mut c, 20 * MS, sack_ack(4000, &[(6000, 9000)]), &[]).unwrap();
    feed(&mut c, 30 * MS, sack_ack(7000, &[]), &[]).unwrap();
    assert_eq!(ranges(&c), vec![(7000, 9000)]);
    c.check_invariants().unwrap();
}

// ---- Blocks that cannot be right (RFC 2018, RFC 2883) ----

#[test]
fn sack_block_below_snd_una_ignored() {
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    // D-SACK style: already cumulatively acknowledged.
    for _ in 0..3 {
        feed(&mut c, 20 * MS, sack_ack(4000, &[(2000, 3000)]), &[]).unwrap();
    }
    assert!(c.scoreboard().is_empty());
    assert_eq!(c.counters().sack_ignored, 3);
    assert!(!c.in_recovery());
}

#[test]
fn sack_block_above_snd_max_ignored() {
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    for _ in 0..3 {
        feed(&mut c, 20 * MS, sack_ack(4000, &[(11000, 13000)]), &[]).unwrap();
    }
    assert!(c.scoreboard().is_empty());
    assert_eq!(c.counters().sack_ignored, 3);
    assert!(!c.in_recovery());
    expect_none(&mut c, 20 * MS);
}

#[test]
fn sack_block_inverted_or_empty_ignored() {
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    feed(
        &mut c,
        20 * MS,
        sack_ack(4000, &[(8000, 6000), (7000, 7000), (5000, 6000)]),
        &[],
    )
    .unwrap();
    assert_eq!(ranges(&c), vec![(5000, 6000)]);
    assert_eq!(c.counters().sack_ignored, 2);
}

#[test]
fn sack_block_far_outside_window_ignored() {
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    let far = SeqNumber(o(0).0.wrapping_add(0x8000_0000));
    let r = TcpRepr {
        sack: SackBlocks::new(&[(far, far + 1000), (o(0) - 100_000, o(0) - 90_000)]).unwrap(),
        ..sack_ack(4000, &[])
    };
    feed(&mut c, 20 * MS, r, &[]).unwrap();
    assert!(c.scoreboard().is_empty());
    assert_eq!(c.counters().sack_ignored, 2);
}

#[test]
fn sack_blocks_ignored_without_negotiation() {
    let mut c = conn_established(cfg());
    c.send(&data(4000, 1));
    sent(&mut c, 0);
    let r = TcpRepr {
        sack: SackBlocks::new(&[(o(1000), o(2000))]).unwrap(),
        ..ack_in(0, 0)
    };
    feed(&mut c, MS, r, &[]).unwrap();
    assert!(c.scoreboard().is_empty());
    assert_eq!(c.counters().sack_ignored, 0);
}

// ---- A full scoreboard ----

#[test]
fn sack_scoreboard_full_keeps_lowest_ranges_and_recovers() {
    let mut c = sack_conn(Config {
        send_buf: 64 * 1024,
        ..sack_cfg()
    });
    c.send(&data(40_000, 1));
    let mut t = 0;
    let mut acked = 0;
    while c.congestion().window() < 16_000 {
        let s = sent(&mut c, t);
        t += 10 * MS;
        for (off, len) in s {
            acked = acked.max(off + len as u32);
            feed(&mut c, t, sack_ack(acked, &[]), &[]).unwrap();
        }
    }
    let flight = sent(&mut c, t);
    assert_eq!(flight.len(), 16);
    let base = acked;
    // Every other segment arrives: 8 holes and 8 SACKed ranges, then a
    // ninth range forces one out.
    let mut reported = Vec::new();
    for i in (1..16).step_by(2) {
        let (off, len) = flight[i];
        reported.push((off, off + len as u32));
        let last: Vec<_> = reported.iter().rev().take(4).copied().collect();
        t += MS;
        feed(&mut c, t, sack_ack(base, &last), &[]).unwrap();
    }
    assert_eq!(c.scoreboard().as_slice().len(), MAX_SACKED);
    assert_eq!(c.counters().sack_overflow, 0);
    // A range below the highest one (the peer's blocks may cover data we
    // trimmed): insert; the highest is forgotten.
    let (o0, _) = flight[0];
    feed(&mut c, t, sack_ack(base, &[(o0 + 500, o0 + 600)]), &[]).unwrap();
    assert_eq!(c.scoreboard().as_slice().len(), MAX_SACKED);
    assert_eq!(c.counters().sack_overflow, 1);
    c.check_invariants().unwrap();
    assert!(c.in_recovery());
    // Recovery still starts from the lowest hole.
    let s = sent(&mut c, t);
    assert_eq!(s[0], (base, 500));
}

// ---- The scoreboard against a byte-map model ----

mod model {
    use super::*;
    use lazynet::proto::tcp::sack::{Scoreboard, DUP_THRESH};
    use proptest::prelude::*;

    const MSS: u32 = 100;
    const SPAN: u32 = 3000;

    #[derive(Debug, Clone)]
    enum Op {
        Update(Vec<(i32, i32)>),
        Advance(u32),
        Send(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => prop::collection::vec((-500i32..3500, -500i32..3500), 1..5).prop_map(Op::Update),
            1 => (0u32..600).prop_map(Op::Advance),
            1 => (0u32..600).prop_map(Op::Send),
        ]
    }

    /// Octets SACKed, by offset from `base`; `una` and `max` likewise.
    struct Model {
        sacked: Vec<bool>,
        una: u32,
        max: u32,
    }

    impl Model {
        /// IsLost (RFC 6675 §4) for every octet in [una, max), from the
        /// SACKed octets above it and the maximal SACKed runs entirely
        /// above it; one backward pass.
        fn lost_map(&self) -> Vec<bool> {
            let n = (self.max - self.una) as usize;
            let mut lost = vec![false; n];
            let (mut bytes, mut runs) = (0u32, 0u32);
            for k in (0..n).rev() {
                let i = self.una as usize + k;
                lost[k] = runs >= DUP_THRESH || bytes > (DUP_THRESH - 1) * MSS;
                if self.sacked[i] {
                    bytes += 1;
                    // i starts a run (within [una, max)).
                    if k == 0 || !self.sacked[i - 1] {
                        runs += 1;
                    }
                }
            }
            lost
        }
    }

    fn check(sb: &Scoreboard, m: &Model, base: SeqNumber, exact: bool) {
        let mut have = vec![false; m.sacked.len()];
        for &(l, r) in sb.as_slice() {
            let (l, r) = (l.diff(base) as u32, r.diff(base) as u32);
            assert!(m.una <= l && l < r && r <= m.max, "range {l}..{r}");
            for i in l..r {
                assert!(m.sacked[i as usize], "octet {i} never SACKed");
                have[i as usize] = true;
            }
        }
        if !exact {
            return;
        }
        for i in m.una..m.max {
            assert_eq!(have[i as usize], m.sacked[i as usize], "octet {i}");
        }
        // SetPipe per octet, as RFC 6675 §4 writes it (HighRxt = SND.UNA).
        let lost = m.lost_map();
        let mut pipe = 0;
        for (k, &l) in lost.iter().enumerate() {
            if !m.sacked[m.una as usize + k] && !l {
                pipe += 1;
            }
        }
        assert_eq!(sb.pipe(base + m.una, base + m.max, MSS), pipe);
        if let Some(&l) = lost.first() {
            assert_eq!(sb.is_lost(base + m.una, MSS), l);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

        /// Random SACK blocks (valid or not), advances of SND.UNA and new
        /// data: the scoreboard never claims an octet the peer did not
        /// SACK, equals the model while nothing overflowed, and its pipe
        /// and IsLost match the RFC's per-octet definitions.
        #[test]
        fn scoreboard_matches_byte_model(start in any::<u32>(), ops in prop::collection::vec(op(), 1..60)) {
            let base = SeqNumber(start);
            let mut sb = Scoreboard::default();
            let mut m = Model { sacked: vec![false; 8 * SPAN as usize], una: 0, max: 2000 };
            let mut exact = true;
            sb.start_recovery(base);
            for op in ops {
                match op {
                    Op::Update(blocks) => {
                        let abs: Vec<_> = blocks
                            .iter()
                            .map(|&(a, b)| (base + m.una + a as u32, base + m.una + b as u32))
                            .collect();
                        let u = sb.update(base + m.una, base + m.max, &abs);
                        exact &= u.overflow == 0;
                        let mut valid = 0;
                        for &(a, b) in &blocks {
                            let (a, b) = (m.una as i64 + a as i64, m.una as i64 + b as i64);
                            if a < b && b > m.una as i64 && b <= m.max as i64 {
                                valid += 1;
                                for i in a.max(m.una as i64)..b {
                                    m.sacked[i as usize] = true;
                                }
                            }
                        }
                        prop_assert_eq!(u.ignored as usize, blocks.len() - valid);
                    }
                    Op::Advance(n) => {
                        m.una = (m.una + n).min(m.max);
                        sb.advance(base + m.una);
                        sb.start_recovery(base + m.una);
                    }
                    Op::Send(n) => {
                        m.max = (m.max + n).min(m.una + SPAN).min(m.sacked.len() as u32);
                    }
                }
                check(&sb, &m, base, exact);
            }
        }
    }
}

// ---- FIN ----

#[test]
fn sack_recovery_retransmits_fin_with_last_data() {
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    c.close();
    let (fin, d) = take(&mut c, 10 * MS);
    assert_eq!((fin.seq, fin.flags, d.len()), (o(12000), FIN | ACK, 0));
    // 4000 and the tail (11000.. and the FIN) lost.
    feed(&mut c, 20 * MS, sack_ack(4000, &[(5000, 11000)]), &[]).unwrap();
    assert!(c.in_recovery());
    assert_eq!(sent(&mut c, 20 * MS), vec![(4000, 1000)]);
    // The partial ACK leaves no SACK information: the segment at SND.UNA
    // goes again, with the FIN; no rescue repeats it.
    feed(&mut c, 30 * MS, sack_ack(11000, &[]), &[]).unwrap();
    let (r, d) = take(&mut c, 30 * MS);
    assert_eq!((r.seq, r.flags & FIN, d.len()), (o(11000), FIN, 1000));
    expect_none(&mut c, 30 * MS);
    feed(&mut c, 40 * MS, sack_ack(12001, &[]), &[]).unwrap();
    assert!(!c.in_recovery());
    assert_eq!(c.state(), State::FinWait2);
}

#[test]
fn sack_rescue_retransmission_includes_fin() {
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    c.close();
    take(&mut c, 10 * MS);
    // Holes at 4000 and 10000; 11000..12000 SACKed; the FIN lost.
    feed(
        &mut c,
        20 * MS,
        sack_ack(4000, &[(5000, 10000), (11000, 12000)]),
        &[],
    )
    .unwrap();
    assert!(c.in_recovery());
    // Fast retransmit, then rule 3 for the hole not deemed lost.
    assert_eq!(sent(&mut c, 20 * MS), vec![(4000, 1000), (10000, 1000)]);
    feed(&mut c, 30 * MS, sack_ack(10000, &[(11000, 12000)]), &[]).unwrap();
    // Rule 4: the highest unSACKed octet is the FIN, alone above 12000.
    let (r, d) = take(&mut c, 30 * MS);
    assert_eq!((r.seq, r.flags & FIN, d.len()), (o(12000), FIN, 0));
    expect_none(&mut c, 30 * MS);
}

// ---- With header prediction ----

/// Header prediction must stay off while the scoreboard holds ranges: a
/// pure ACK past them has to trim them (found merging with the fast
/// path: the predicted ACK skipped the scoreboard, leaving ranges below
/// SND.UNA).
#[test]
fn regression_predicted_ack_past_sacked_range_trims_scoreboard() {
    let mut c = flight_4k_12k(sack_cfg(), 12000);
    assert!(sack_cfg().fast_path);
    feed(&mut c, 20 * MS, sack_ack(4000, &[(5000, 6000)]), &[]).unwrap();
    let before = c.counters().fast_path;
    feed(&mut c, 30 * MS, sack_ack(7000, &[]), &[]).unwrap();
    assert_eq!(c.counters().fast_path, before, "took the fast path");
    assert!(c.scoreboard().is_empty());
    // Once the scoreboard is empty, prediction is back.
    feed(&mut c, 31 * MS, sack_ack(8000, &[]), &[]).unwrap();
    assert_eq!(c.counters().fast_path, before + 1);
}

/// RFC 9293 §3.7.1: the MSS counts no options. A data segment that
/// carries SACK blocks for data we hold out of order (RFC 2018 §4) gives
/// their room up from its text, so header and text stay within the
/// path (with path MTU discovery sizing segments exactly).
#[test]
fn data_segments_carrying_sack_blocks_shrink_by_their_room() {
    let mut c = sack_conn(sack_cfg());
    // The peer's bytes 0..100 are missing; 100..200 arrive out of order.
    let ooo = TcpRepr {
        seq: REMOTE_SEQ + 1 + 100,
        window: W,
        ..ack_in(0, 0)
    };
    feed(&mut c, 0, ooo, &data(100, 1)).unwrap();
    let _ = sent(&mut c, 0);
    c.send(&data(3000, 2));
    let mut segs = Vec::new();
    while let Some((r, d)) = poll(&mut c, MS) {
        segs.push((r.sack.len(), d.len()));
    }
    // One block: 2 + 8 bytes, padded to 12.
    assert_eq!(segs[..3], [(1, 988), (1, 988), (1, 988)], "{segs:?}");
    // The rest once the hole is filled: full segments, no blocks.
    let fill = TcpRepr {
        seq: REMOTE_SEQ + 1,
        window: W,
        ..ack_in(0, 0)
    };
    feed(&mut c, 2 * MS, fill, &data(100, 1)).unwrap();
    let ack = TcpRepr {
        seq: REMOTE_SEQ + 1 + 200,
        ..sack_ack(2964, &[])
    };
    feed(&mut c, 2 * MS, ack, &[]).unwrap();
    c.send(&data(1000, 3));
    let (r, d) = poll(&mut c, 3 * MS).expect("a segment");
    assert!(r.sack.is_empty() && d.len() == 1000, "{r:?}");
}
