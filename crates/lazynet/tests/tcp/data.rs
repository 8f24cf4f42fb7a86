//! ESTABLISHED data transfer: segmentation, windows, delayed ACKs, Nagle,
//! silly-window avoidance, out-of-order reassembly and SACK blocks,
//! timestamps and PAWS.

use crate::util::*;

fn pa() -> TcpFlags {
    ACK | PSH
}

// ---- Sending ----

#[test]
fn send_one_small_segment() {
    let mut c = conn_established(cfg());
    assert_eq!(c.send(b"abc"), 3);
    expect(
        &mut c,
        0,
        TcpRepr {
            flags: pa(),
            ..ack_out(0, 0)
        },
        b"abc",
    );
    expect_none(&mut c, 0);
    // The handshake's RTT sample (0) set RTO to its floor.
    assert_eq!(c.poll_timeout(), Some(200 * MS));
}

#[test]
fn send_splits_by_mss() {
    let mut c = conn_established(cfg());
    let d = data(2500, 1);
    c.send(&d);
    expect(&mut c, 0, ack_out(0, 0), &d[..1000]);
    expect(&mut c, 0, ack_out(1000, 0), &d[1000..2000]);
    expect(
        &mut c,
        0,
        TcpRepr {
            flags: pa(),
            ..ack_out(2000, 0)
        },
        &d[2000..],
    );
    expect_none(&mut c, 0);
}

#[test]
fn send_limited_by_initial_cwnd_then_slow_start() {
    let mut c = conn_established(cfg());
    let d = data(8000, 2);
    c.send(&d);
    for i in 0..4 {
        expect(
            &mut c,
            0,
            ack_out(i * 1000, 0),
            &d[i as usize * 1000..(i as usize + 1) * 1000],
        );
    }
    expect_none(&mut c, 0);
    assert_eq!(c.congestion().window(), 4000);
    feed(&mut c, 10 * MS, ack_in(0, 2000), &[]).unwrap();
    // Slow start: +min(acked, 2·SMSS).
    assert_eq!(c.congestion().window(), 6000);
    let mut n = 0;
    while let Some((r, _)) = poll(&mut c, 10 * MS) {
        assert_eq!(r.payload_len, 1000);
        n += 1;
    }
    assert_eq!(n, 4);
}

#[test]
fn send_limited_by_peer_window_no_small_segment() {
    let mut c = conn_established(cfg());
    feed(
        &mut c,
        0,
        TcpRepr {
            window: 1500,
            ..ack_in(0, 0)
        },
        &[],
    )
    .unwrap();
    c.send(&data(3000, 3));
    assert_eq!(take(&mut c, 0).0.payload_len, 1000);
    // 500 bytes of window remain: sender SWS avoidance holds them back.
    expect_none(&mut c, 0);
}

#[test]
fn send_small_tail_when_it_empties_buffer() {
    let mut c = conn_established(cfg());
    c.send(&data(1200, 4));
    assert_eq!(take(&mut c, 0).0.payload_len, 1000);
    assert_eq!(take(&mut c, 0).0.payload_len, 200);
}

#[test]
fn send_buffer_full_accepts_partially() {
    let mut c = conn_established(cfg());
    assert_eq!(c.send(&data(10000, 5)), 8192);
    assert_eq!(c.send(b"x"), 0);
    assert_eq!(c.send_queue(), 8192);
}

#[test]
fn acked_data_frees_send_buffer() {
    let mut c = conn_established(cfg());
    c.send(&data(8192, 5));
    while poll(&mut c, 0).is_some() {}
    feed(&mut c, 0, ack_in(0, 3000), &[]).unwrap();
    assert_eq!(c.send_queue(), 5192);
    assert_eq!(c.send(&data(5000, 6)), 3000);
}

#[test]
fn ack_of_unsent_data_challenged() {
    let mut c = conn_established(cfg());
    c.send(b"abc");
    take(&mut c, 0);
    assert_eq!(
        feed(&mut c, 0, ack_in(0, 10), &[]),
        Err(TcpDrop::AckUnacceptable)
    );
    expect(&mut c, 0, ack_out(3, 0), &[]);
    assert_eq!(c.snd_una(), LOCAL_SEQ + 1);
}

#[test]
fn old_ack_within_max_window_ignored_but_data_accepted() {
    let mut c = conn_established(cfg());
    c.send(&data(2000, 1));
    while poll(&mut c, 0).is_some() {}
    feed(&mut c, 0, ack_in(0, 2000), &[]).unwrap();
    // An old ACK (within MAX.SND.WND) carrying data.
    feed(&mut c, 0, ack_in(0, 1000), b"hi").unwrap();
    assert_eq!(c.recv_queue(), 2);
    assert_eq!(c.snd_una(), LOCAL_SEQ + 2001);
}

#[test]
fn window_update_ignores_older_segments() {
    let mut c = conn_established(cfg());
    c.send(&data(2000, 1));
    while poll(&mut c, 0).is_some() {}
    feed(
        &mut c,
        0,
        TcpRepr {
            window: 3000,
            ..ack_in(0, 1000)
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.send_window(), 3000);
    // Same SEG.SEQ, older SEG.ACK (SND.WL2 > SEG.ACK): no window update.
    feed(
        &mut c,
        0,
        TcpRepr {
            window: 100,
            ..ack_in(0, 500)
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.send_window(), 3000);
    feed(
        &mut c,
        0,
        TcpRepr {
            window: 100,
            ..ack_in(0, 1000)
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.send_window(), 100);
}

// ---- Receiving and delayed ACKs (RFC 5681 §4.2, RFC 9293 §3.8.6.3) ----

#[test]
fn recv_in_order_delayed_ack() {
    let mut c = conn_established(cfg());
    let d = data(500, 9);
    feed(&mut c, 0, ack_in(0, 0), &d).unwrap();
    expect_none(&mut c, 0);
    assert_eq!(c.poll_timeout(), Some(40 * MS));
    timeout(&mut c, 40 * MS);
    expect(
        &mut c,
        40 * MS,
        TcpRepr {
            window: 3596,
            ..ack_out(0, 500)
        },
        &[],
    );
    let mut b = vec![0; 1000];
    assert_eq!(c.recv(&mut b), 500);
    assert_eq!(&b[..500], &d[..]);
}

#[test]
fn recv_ack_every_second_full_segment() {
    let mut c = conn_established(cfg());
    feed(&mut c, 0, ack_in(0, 0), &data(1000, 1)).unwrap();
    expect_none(&mut c, 0);
    feed(&mut c, MS, ack_in(1000, 0), &data(1000, 2)).unwrap();
    expect(
        &mut c,
        MS,
        TcpRepr {
            window: 2096,
            ..ack_out(0, 2000)
        },
        &[],
    );
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn delayed_ack_piggybacks_on_data() {
    let mut c = conn_established(cfg());
    feed(&mut c, 0, ack_in(0, 0), b"req").unwrap();
    c.send(b"resp");
    expect(
        &mut c,
        MS,
        TcpRepr {
            flags: pa(),
            window: 4093,
            ..ack_out(0, 3)
        },
        b"resp",
    );
    // The delayed-ACK timer was cancelled by the piggy-backed ACK.
    assert_eq!(c.poll_timeout(), Some(MS + 200 * MS));
}

#[test]
fn delayed_ack_bound_configurable() {
    let mut c = conn_established(Config {
        ack_delay: 5 * MS,
        ..cfg()
    });
    feed(&mut c, 0, ack_in(0, 0), b"x").unwrap();
    assert_eq!(c.poll_timeout(), Some(5 * MS));
}

#[test]
fn recv_sequence_wraps() {
    let mut c = conn_established(cfg());
    // REMOTE_SEQ + 1 is 1000 below 2^32: this crosses the wrap.
    let d = data(3000, 7);
    for i in 0..3 {
        feed(
            &mut c,
            0,
            ack_in(i * 1000, 0),
            &d[i as usize * 1000..(i as usize + 1) * 1000],
        )
        .unwrap();
    }
    assert_eq!(c.rcv_nxt(), SeqNumber(REMOTE_SEQ.0.wrapping_add(3001)));
    let mut b = vec![0; 4000];
    assert_eq!(c.recv(&mut b), 3000);
    assert_eq!(&b[..3000], &d[..]);
}

#[test]
fn duplicate_old_segment_acked_immediately() {
    let mut c = conn_established(cfg());
    feed(&mut c, 0, ack_in(0, 0), b"abcd").unwrap();
    timeout(&mut c, 40 * MS);
    take(&mut c, 40 * MS);
    assert_eq!(
        feed(&mut c, 50 * MS, ack_in(0, 0), b"abcd"),
        Err(TcpDrop::NotAcceptable)
    );
    expect(
        &mut c,
        50 * MS,
        TcpRepr {
            window: 4092,
            ..ack_out(0, 4)
        },
        &[],
    );
    assert_eq!(c.recv_queue(), 4);
}

#[test]
fn overlapping_segment_takes_only_new_part() {
    let mut c = conn_established(cfg());
    feed(&mut c, 0, ack_in(0, 0), b"abcd").unwrap();
    feed(&mut c, 0, ack_in(2, 0), b"cdef").unwrap();
    let mut b = [0; 16];
    let n = c.recv(&mut b);
    assert_eq!(&b[..n], b"abcdef");
}

#[test]
fn segment_beyond_window_not_acceptable() {
    let mut c = conn_established(cfg());
    assert_eq!(
        feed(&mut c, 0, ack_in(4096, 0), b"x"),
        Err(TcpDrop::NotAcceptable)
    );
    expect(&mut c, 0, ack_out(0, 0), &[]);
}

#[test]
fn segment_straddling_right_edge_trimmed() {
    let mut c = conn_established(cfg());
    feed(&mut c, 0, ack_in(0, 0), &data(3000, 1)).unwrap();
    take(&mut c, 0);
    // 1096 bytes of window remain; send 1500 at the edge.
    feed(&mut c, 0, ack_in(3000, 0), &data(1500, 2)).unwrap();
    assert_eq!(c.recv_queue(), 4096);
    assert_eq!(c.rcv_nxt(), REMOTE_SEQ + 4097);
}

#[test]
fn zero_window_rejects_data_but_takes_ack() {
    let mut c = conn_established(cfg());
    c.send(b"zz");
    take(&mut c, 0);
    feed(&mut c, 0, ack_in(0, 0), &data(4096, 1)).unwrap();
    let (r, _) = take(&mut c, 0);
    assert_eq!(r.window, 0);
    // Data at RCV.NXT with zero window: text dropped, ACK processed.
    feed(&mut c, MS, ack_in(4096, 2), b"more").unwrap();
    assert_eq!(c.snd_una(), LOCAL_SEQ + 3);
    expect(
        &mut c,
        MS,
        TcpRepr {
            window: 0,
            ..ack_out(2, 4096)
        },
        &[],
    );
    assert_eq!(c.recv_queue(), 4096);
}

#[test]
fn zero_window_pure_ack_exact_seq_acceptable() {
    let mut c = conn_established(cfg());
    feed(&mut c, 0, ack_in(0, 0), &data(4096, 1)).unwrap();
    take(&mut c, 0);
    feed(&mut c, 0, ack_in(4096, 0), &[]).unwrap();
    assert_eq!(
        feed(&mut c, 0, ack_in(4097, 0), &[]),
        Err(TcpDrop::NotAcceptable)
    );
}

#[test]
fn window_update_after_reading_from_zero_window() {
    let mut c = conn_established(cfg());
    feed(&mut c, 0, ack_in(0, 0), &data(4096, 1)).unwrap();
    take(&mut c, 0);
    let mut b = vec![0; 2048];
    assert_eq!(c.recv(&mut b), 2048);
    expect(
        &mut c,
        0,
        TcpRepr {
            window: 2048,
            ..ack_out(0, 4096)
        },
        &[],
    );
}

#[test]
fn receiver_sws_small_read_no_window_update() {
    let mut c = conn_established(cfg());
    feed(&mut c, 0, ack_in(0, 0), &data(4096, 1)).unwrap();
    take(&mut c, 0);
    let mut b = vec![0; 100];
    c.recv(&mut b);
    expect_none(&mut c, 0);
    // Even a forced ACK keeps the window closed (edge moves < min(BUF/2, MSS)).
    let _ = feed(&mut c, 0, ack_in(4096, 0), b"q");
    expect(
        &mut c,
        0,
        TcpRepr {
            window: 0,
            ..ack_out(0, 4096)
        },
        &[],
    );
}

#[test]
fn receiver_window_never_shrinks() {
    let mut c = conn_established(cfg());
    feed(&mut c, 0, ack_in(0, 0), &data(1000, 1)).unwrap();
    feed(&mut c, 0, ack_in(1000, 0), &data(1000, 1)).unwrap();
    let (r, _) = take(&mut c, 0);
    assert_eq!(r.window, 2096);
    let mut b = vec![0; 2000];
    c.recv(&mut b);
    // A duplicate forces an ACK: the window reopened fully.
    feed(&mut c, 0, ack_in(0, 0), b"x").unwrap_err();
    let (r, _) = take(&mut c, 0);
    assert_eq!(r.window, 4096);
}

// ---- Nagle (RFC 9293 §3.7.4) ----

#[test]
fn nagle_holds_small_segment_while_unacked() {
    let mut c = conn_established(Config {
        nodelay: false,
        ..cfg()
    });
    c.send(b"a");
    expect(
        &mut c,
        0,
        TcpRepr {
            flags: pa(),
            ..ack_out(0, 0)
        },
        b"a",
    );
    c.send(b"b");
    expect_none(&mut c, 0);
    c.send(b"c");
    expect_none(&mut c, 0);
    feed(&mut c, MS, ack_in(0, 1), &[]).unwrap();
    expect(
        &mut c,
        MS,
        TcpRepr {
            flags: pa(),
            ..ack_out(1, 0)
        },
        b"bc",
    );
}

#[test]
fn nagle_full_segment_goes_anyway() {
    let mut c = conn_established(Config {
        nodelay: false,
        ..cfg()
    });
    c.send(b"a");
    take(&mut c, 0);
    c.send(&data(1500, 1));
    assert_eq!(take(&mut c, 0).0.payload_len, 1000);
    expect_none(&mut c, 0);
}

#[test]
fn nodelay_sends_small_segments_immediately() {
    let mut c = conn_established(cfg());
    c.send(b"a");
    take(&mut c, 0);
    c.send(b"b");
    expect(
        &mut c,
        0,
        TcpRepr {
            flags: pa(),
            ..ack_out(1, 0)
        },
        b"b",
    );
}

// ---- Out-of-order reassembly and SACK (RFC 2018) ----

#[test]
fn out_of_order_immediate_dup_ack_then_fill() {
    let mut c = conn_established(cfg());
    let d = data(3000, 1);
    feed(&mut c, 0, ack_in(1000, 0), &d[1000..2000]).unwrap();
    expect(&mut c, 0, ack_out(0, 0), &[]);
    feed(&mut c, 0, ack_in(2000, 0), &d[2000..]).unwrap();
    expect(&mut c, 0, ack_out(0, 0), &[]);
    assert_eq!(c.ooo_intervals().len(), 1);
    assert_eq!(c.recv_queue(), 0);
    feed(&mut c, 0, ack_in(0, 0), &d[..1000]).unwrap();
    // Gap filled: immediate ACK of everything.
    expect(
        &mut c,
        0,
        TcpRepr {
            window: 1096,
            ..ack_out(0, 3000)
        },
        &[],
    );
    let mut b = vec![0; 4000];
    assert_eq!(c.recv(&mut b), 3000);
    assert_eq!(&b[..3000], &d[..]);
}

#[test]
fn out_of_order_partial_fill() {
    let mut c = conn_established(cfg());
    let d = data(3000, 1);
    feed(&mut c, 0, ack_in(2000, 0), &d[2000..]).unwrap();
    take(&mut c, 0);
    feed(&mut c, 0, ack_in(0, 0), &d[..1000]).unwrap();
    expect(
        &mut c,
        0,
        TcpRepr {
            window: 3096,
            ..ack_out(0, 1000)
        },
        &[],
    );
    feed(&mut c, 0, ack_in(1000, 0), &d[1000..2000]).unwrap();
    expect(
        &mut c,
        0,
        TcpRepr {
            window: 1096,
            ..ack_out(0, 3000)
        },
        &[],
    );
    assert!(c.ooo_intervals().is_empty());
}

#[test]
fn out_of_order_interval_set_full_drops_and_counts() {
    let mut c = conn_established(Config {
        recv_buf: 8192,
        ..cfg()
    });
    for k in 0..5u32 {
        feed(&mut c, 0, ack_in(100 + k * 200, 0), &[1; 50]).unwrap();
    }
    assert_eq!(c.ooo_intervals().len(), 4);
    assert_eq!(c.counters().ooo_dropped, 1);
}

#[test]
fn out_of_order_overlapping_intervals_merge() {
    let mut c = conn_established(cfg());
    feed(&mut c, 0, ack_in(100, 0), &[1; 100]).unwrap();
    feed(&mut c, 0, ack_in(300, 0), &[1; 100]).unwrap();
    feed(&mut c, 0, ack_in(150, 0), &[1; 200]).unwrap();
    assert_eq!(c.ooo_intervals(), &[(REMOTE_SEQ + 101, REMOTE_SEQ + 401)]);
}

fn sack_cfg() -> Config {
    Config {
        sack: true,
        ..cfg()
    }
}

fn conn_sack() -> Conn {
    let mut c = conn_syn_received_with(
        sack_cfg(),
        TcpRepr {
            sack_permitted: true,
            ..syn_in()
        },
    );
    feed(&mut c, 0, ack_in(0, 0), &[]).unwrap();
    c
}

fn blocks(v: &[(u32, u32)]) -> SackBlocks {
    let b: Vec<_> = v
        .iter()
        .map(|&(a, b)| (REMOTE_SEQ + 1 + a, REMOTE_SEQ + 1 + b))
        .collect();
    SackBlocks::new(&b).unwrap()
}

#[test]
fn sack_block_for_out_of_order_data() {
    let mut c = conn_sack();
    feed(&mut c, 0, ack_in(1000, 0), &[1; 500]).unwrap();
    expect(
        &mut c,
        0,
        TcpRepr {
            sack: blocks(&[(1000, 1500)]),
            ..ack_out(0, 0)
        },
        &[],
    );
}

#[test]
fn sack_most_recent_block_first() {
    let mut c = conn_sack();
    feed(&mut c, 0, ack_in(1000, 0), &[1; 100]).unwrap();
    take(&mut c, 0);
    feed(&mut c, 0, ack_in(2000, 0), &[1; 100]).unwrap();
    take(&mut c, 0);
    feed(&mut c, 0, ack_in(500, 0), &[1; 100]).unwrap();
    expect(
        &mut c,
        0,
        TcpRepr {
            sack: blocks(&[(500, 600), (2000, 2100), (1000, 1100)]),
            ..ack_out(0, 0)
        },
        &[],
    );
    // Extending an older block makes it the first.
    feed(&mut c, 0, ack_in(1100, 0), &[1; 100]).unwrap();
    expect(
        &mut c,
        0,
        TcpRepr {
            sack: blocks(&[(1000, 1200), (500, 600), (2000, 2100)]),
            ..ack_out(0, 0)
        },
        &[],
    );
}

#[test]
fn sack_four_blocks_without_timestamps() {
    let mut c = conn_sack();
    for k in 1..=4u32 {
        feed(&mut c, 0, ack_in(k * 500, 0), &[1; 100]).unwrap();
        take(&mut c, 0);
    }
    feed(&mut c, 0, ack_in(2000, 0), &[1; 50]).unwrap();
    let (r, _) = take(&mut c, 0);
    assert_eq!(r.sack.len(), 4);
}

#[test]
fn sack_three_blocks_with_timestamps() {
    let cf = Config {
        sack: true,
        timestamps: true,
        ..cfg()
    };
    let ts = Some(Timestamps { tsval: 1, tsecr: 0 });
    let mut c = conn_syn_received_with(
        cf,
        TcpRepr {
            sack_permitted: true,
            timestamps: ts,
            ..syn_in()
        },
    );
    feed(
        &mut c,
        0,
        TcpRepr {
            timestamps: ts,
            ..ack_in(0, 0)
        },
        &[],
    )
    .unwrap();
    for k in 1..=4u32 {
        feed(
            &mut c,
            0,
            TcpRepr {
                timestamps: ts,
                ..ack_in(k * 500, 0)
            },
            &[1; 100],
        )
        .unwrap();
    }
    let (r, _) = take(&mut c, 0);
    assert_eq!(r.sack.len(), 3);
    assert!(r.header_len().is_ok());
    assert_eq!(r.sack.as_slice()[0], (REMOTE_SEQ + 2001, REMOTE_SEQ + 2101));
}

#[test]
fn sack_none_once_gap_filled() {
    let mut c = conn_sack();
    feed(&mut c, 0, ack_in(100, 0), &[1; 100]).unwrap();
    take(&mut c, 0);
    feed(&mut c, 0, ack_in(0, 0), &[1; 100]).unwrap();
    let (r, _) = take(&mut c, 0);
    assert!(r.sack.is_empty());
    assert_eq!(r.ack, REMOTE_SEQ + 201);
}

#[test]
fn sack_not_sent_when_not_negotiated() {
    let mut c = conn_established(sack_cfg());
    feed(&mut c, 0, ack_in(100, 0), &[1; 100]).unwrap();
    assert!(take(&mut c, 0).0.sack.is_empty());
}

// ---- Timestamps and PAWS (RFC 7323) ----

fn ts(v: u32, e: u32) -> Option<Timestamps> {
    Some(Timestamps { tsval: v, tsecr: e })
}

fn conn_ts() -> Conn {
    let cf = Config {
        timestamps: true,
        ..cfg()
    };
    let mut c = conn_syn_received_with(
        cf,
        TcpRepr {
            timestamps: ts(100, 0),
            ..syn_in()
        },
    );
    feed(
        &mut c,
        0,
        TcpRepr {
            timestamps: ts(101, 0),
            ..ack_in(0, 0)
        },
        &[],
    )
    .unwrap();
    c
}

#[test]
fn timestamps_echo_ts_recent() {
    let mut c = conn_ts();
    feed(
        &mut c,
        7 * MS,
        TcpRepr {
            timestamps: ts(150, 0),
            ..ack_in(0, 0)
        },
        b"x",
    )
    .unwrap();
    c.send(b"y");
    let (r, _) = take(&mut c, 7 * MS);
    assert_eq!(r.timestamps, ts(7, 150));
}

#[test]
fn paws_rejects_old_tsval_with_ack() {
    let mut c = conn_ts();
    feed(
        &mut c,
        0,
        TcpRepr {
            timestamps: ts(200, 0),
            ..ack_in(0, 0)
        },
        b"a",
    )
    .unwrap();
    assert_eq!(
        feed(
            &mut c,
            0,
            TcpRepr {
                timestamps: ts(150, 0),
                ..ack_in(1, 0)
            },
            b"b"
        ),
        Err(TcpDrop::Paws)
    );
    let (r, _) = take(&mut c, 0);
    assert_eq!(r.ack, REMOTE_SEQ + 2);
    assert_eq!(c.recv_queue(), 1);
}

#[test]
fn paws_handles_tsval_wrap() {
    let cf = Config {
        timestamps: true,
        ..cfg()
    };
    let mut c = conn_syn_received_with(
        cf,
        TcpRepr {
            timestamps: ts(u32::MAX - 5, 0),
            ..syn_in()
        },
    );
    feed(
        &mut c,
        0,
        TcpRepr {
            timestamps: ts(3, 0),
            ..ack_in(0, 0)
        },
        b"a",
    )
    .unwrap();
    assert_eq!(c.recv_queue(), 1);
}

#[test]
fn paws_does_not_apply_to_rst() {
    let mut c = conn_ts();
    feed(
        &mut c,
        0,
        TcpRepr {
            timestamps: ts(200, 0),
            ..ack_in(0, 0)
        },
        &[],
    )
    .unwrap();
    feed(
        &mut c,
        0,
        TcpRepr {
            flags: RST,
            timestamps: ts(5, 0),
            ..ack_in(0, 0)
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.state(), State::Closed);
}

#[test]
fn paws_ts_recent_expires_after_24_days() {
    let mut c = conn_ts();
    let later = 25 * 24 * 3600 * SEC;
    feed(
        &mut c,
        later,
        TcpRepr {
            timestamps: ts(50, 0),
            ..ack_in(0, 0)
        },
        b"a",
    )
    .unwrap();
    assert_eq!(c.recv_queue(), 1);
}

#[test]
fn timestamps_rtt_sample_from_tsecr() {
    let mut c = conn_ts();
    c.send(b"x");
    let (r, _) = take(&mut c, 10 * MS);
    let tsv = r.timestamps.unwrap().tsval;
    feed(
        &mut c,
        60 * MS,
        TcpRepr {
            timestamps: ts(120, tsv),
            ..ack_in(0, 1)
        },
        &[],
    )
    .unwrap();
    // First sample 0 (handshake at t=0), then 50 ms: SRTT = 50/8 ms.
    assert_eq!(c.srtt(), Some(6_250_000));
}

#[test]
fn rtt_sample_from_timed_segment_without_timestamps() {
    let mut c = conn_syn_sent(cfg());
    feed(
        &mut c,
        80 * MS,
        TcpRepr {
            seq: REMOTE_SEQ,
            ack: LOCAL_SEQ + 1,
            flags: SYN | ACK,
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.srtt(), Some(80 * MS));
    // RFC 6298: RTO = SRTT + 4·RTTVAR = 80 + 160 ms.
    assert_eq!(c.rto(), 240 * MS);
}

#[test]
fn rtt_rto_floor_is_rto_min() {
    let mut c = conn_established(cfg());
    c.send(b"abc");
    take(&mut c, 0);
    feed(&mut c, 10 * MS, ack_in(0, 3), &[]).unwrap();
    assert_eq!(c.rto(), 200 * MS);
}

#[test]
fn rtt_second_sample_smoothed() {
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
    c.send(b"b");
    take(&mut c, 100 * MS);
    feed(&mut c, 300 * MS, ack_in(0, 1), &[]).unwrap();
    // SRTT = 7/8·100 + 1/8·200 = 112.5; RTTVAR = 3/4·50 + 1/4·100 = 62.5.
    assert_eq!(c.srtt(), Some(112_500_000));
    assert_eq!(c.rto(), 112_500_000 + 250 * MS);
}
