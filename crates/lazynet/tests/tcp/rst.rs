//! RST handling and the RFC 5961 mitigations; the RFC 9293 §3.10.7.4
//! acceptability test; abort.

use crate::util::*;

fn rst_in(rseq: u32) -> TcpRepr {
    TcpRepr {
        seq: REMOTE_SEQ + 1 + rseq,
        flags: RST,
        ..SEND_TEMPL
    }
}

#[test]
fn rst_exact_resets_established() {
    let mut c = conn_established(cfg());
    feed(&mut c, 0, rst_in(0), &[]).unwrap();
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.error(), Some(ConnError::Reset));
    expect_none(&mut c, 0);
}

#[test]
fn rst_with_ack_exact_resets() {
    let mut c = conn_established(cfg());
    feed(
        &mut c,
        0,
        TcpRepr {
            flags: RST | ACK,
            ..ack_in(0, 0)
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.error(), Some(ConnError::Reset));
}

#[test]
fn rst_in_window_not_exact_challenge_ack() {
    let mut c = conn_established(cfg());
    assert_eq!(
        feed(&mut c, 0, rst_in(100), &[]),
        Err(TcpDrop::RstChallenged)
    );
    assert_eq!(c.state(), State::Established);
    expect(&mut c, 0, ack_out(0, 0), &[]);
    assert_eq!(c.counters().challenge_acks, 1);
}

#[test]
fn rst_out_of_window_silently_dropped() {
    let mut c = conn_established(cfg());
    assert_eq!(
        feed(&mut c, 0, rst_in(5000), &[]),
        Err(TcpDrop::NotAcceptable)
    );
    expect_none(&mut c, 0);
    assert_eq!(
        feed(
            &mut c,
            0,
            TcpRepr {
                seq: REMOTE_SEQ,
                flags: RST,
                ..SEND_TEMPL
            },
            &[]
        ),
        Err(TcpDrop::NotAcceptable)
    );
    expect_none(&mut c, 0);
    assert_eq!(c.state(), State::Established);
}

#[test]
fn rst_at_right_edge_is_out_of_window() {
    let mut c = conn_established(cfg());
    assert_eq!(
        feed(&mut c, 0, rst_in(4096), &[]),
        Err(TcpDrop::NotAcceptable)
    );
    assert_eq!(
        feed(&mut c, 0, rst_in(4095), &[]),
        Err(TcpDrop::RstChallenged)
    );
}

#[test]
fn challenge_ack_rate_limited() {
    let mut c = conn_established(Config {
        challenge_ack_limit: 3,
        ..cfg()
    });
    for i in 0..5 {
        let _ = feed(&mut c, 100 * MS, rst_in(10 + i), &[]);
        if i < 3 {
            expect(&mut c, 100 * MS, ack_out(0, 0), &[]);
        } else {
            expect_none(&mut c, 100 * MS);
        }
    }
    assert_eq!(c.counters().challenge_suppressed, 2);
    // A new one-second interval allows more.
    let _ = feed(&mut c, 1100 * MS, rst_in(10), &[]);
    expect(&mut c, 1100 * MS, ack_out(0, 0), &[]);
}

#[test]
fn challenge_ack_limit_shared_by_syn_and_rst() {
    let mut c = conn_established(Config {
        challenge_ack_limit: 1,
        ..cfg()
    });
    let _ = feed(&mut c, 0, rst_in(10), &[]);
    take(&mut c, 0);
    let _ = feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ + 1,
            flags: SYN,
            ..SEND_TEMPL
        },
        &[],
    );
    expect_none(&mut c, 0);
}

#[test]
fn syn_in_established_challenge_ack() {
    let mut c = conn_established(cfg());
    let r = feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ + 1,
            flags: SYN,
            ..SEND_TEMPL
        },
        &[],
    );
    assert_eq!(r, Err(TcpDrop::SynChallenged));
    assert_eq!(c.state(), State::Established);
    expect(&mut c, 0, ack_out(0, 0), &[]);
}

#[test]
fn syn_outside_window_gets_plain_ack() {
    let mut c = conn_established(cfg());
    let r = feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ + 90_000,
            flags: SYN,
            ..SEND_TEMPL
        },
        &[],
    );
    assert_eq!(r, Err(TcpDrop::NotAcceptable));
    expect(&mut c, 0, ack_out(0, 0), &[]);
    assert_eq!(c.state(), State::Established);
}

#[test]
fn syn_ack_in_established_challenged() {
    let mut c = conn_established(cfg());
    let r = feed(
        &mut c,
        0,
        TcpRepr {
            flags: SYN | ACK,
            ..ack_in(0, 0)
        },
        &[],
    );
    assert_eq!(r, Err(TcpDrop::SynChallenged));
}

#[test]
fn syn_in_close_wait_challenged() {
    let mut c = conn_close_wait(cfg());
    let r = feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ + 2,
            flags: SYN,
            ..SEND_TEMPL
        },
        &[],
    );
    assert_eq!(r, Err(TcpDrop::SynChallenged));
}

#[test]
fn ack_beyond_snd_nxt_challenged_and_data_dropped() {
    let mut c = conn_established(cfg());
    assert_eq!(
        feed(&mut c, 0, ack_in(0, 50), b"data"),
        Err(TcpDrop::AckUnacceptable)
    );
    assert_eq!(c.recv_queue(), 0);
    expect(&mut c, 0, ack_out(0, 0), &[]);
}

#[test]
fn ack_too_old_challenged() {
    let mut c = conn_established(cfg());
    // MAX.SND.WND is 8192: an ACK 9000 below SND.UNA is too old.
    let r = feed(
        &mut c,
        0,
        TcpRepr {
            ack: LOCAL_SEQ + 1 - 9000,
            ..ack_in(0, 0)
        },
        &[],
    );
    assert_eq!(r, Err(TcpDrop::AckUnacceptable));
    // One within MAX.SND.WND is merely old: accepted (no-op).
    feed(
        &mut c,
        0,
        TcpRepr {
            ack: LOCAL_SEQ + 1 - 8000,
            ..ack_in(0, 0)
        },
        &[],
    )
    .unwrap();
}

#[test]
fn no_ack_bit_dropped() {
    let mut c = conn_established(cfg());
    assert_eq!(
        feed(
            &mut c,
            0,
            TcpRepr {
                flags: PSH,
                ..ack_in(0, 0)
            },
            b"x"
        ),
        Err(TcpDrop::NoAck)
    );
    assert_eq!(c.recv_queue(), 0);
}

#[test]
fn rst_in_fin_wait_1_resets() {
    let mut c = conn_fin_wait_1(cfg());
    feed(&mut c, 0, rst_in(0), &[]).unwrap();
    assert_eq!(c.error(), Some(ConnError::Reset));
}

#[test]
fn rst_in_fin_wait_2_resets() {
    let mut c = conn_fin_wait_2(cfg());
    feed(&mut c, 0, rst_in(0), &[]).unwrap();
    assert_eq!(c.error(), Some(ConnError::Reset));
}

#[test]
fn rst_in_close_wait_resets() {
    let mut c = conn_close_wait(cfg());
    feed(&mut c, 0, rst_in(1), &[]).unwrap();
    assert_eq!(c.error(), Some(ConnError::Reset));
}

#[test]
fn rst_in_closing_closes_without_error() {
    let mut c = conn_closing(cfg());
    feed(&mut c, 0, rst_in(1), &[]).unwrap();
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.error(), None);
}

#[test]
fn rst_in_last_ack_closes_without_error() {
    let mut c = conn_last_ack(cfg());
    feed(&mut c, 0, rst_in(1), &[]).unwrap();
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.error(), None);
}

#[test]
fn rst_in_time_wait_closes() {
    let mut c = conn_time_wait(cfg());
    feed(&mut c, 0, rst_in(1), &[]).unwrap();
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn rst_with_zero_window_exact_only() {
    let mut c = conn_established(cfg());
    feed(&mut c, 0, ack_in(0, 0), &data(4096, 0)).unwrap();
    take(&mut c, 0);
    assert_eq!(
        feed(&mut c, 0, rst_in(4097), &[]),
        Err(TcpDrop::NotAcceptable)
    );
    feed(&mut c, 0, rst_in(4096), &[]).unwrap();
    assert_eq!(c.error(), Some(ConnError::Reset));
}

#[test]
fn abort_sends_rst() {
    let mut c = conn_established(cfg());
    c.send(b"abc");
    take(&mut c, 0);
    c.abort();
    assert_eq!(c.state(), State::Closed);
    expect(
        &mut c,
        0,
        TcpRepr {
            flags: RST | ACK,
            window: 0,
            ..ack_out(3, 0)
        },
        &[],
    );
    expect_none(&mut c, 0);
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn abort_in_syn_sent_sends_nothing() {
    let mut c = conn_syn_sent(cfg());
    c.abort();
    assert_eq!(c.state(), State::Closed);
    expect_none(&mut c, 0);
}

#[test]
fn abort_in_time_wait_sends_nothing() {
    let mut c = conn_time_wait(cfg());
    c.abort();
    expect_none(&mut c, 0);
}

// ---- Acceptability test (RFC 9293 §3.10.7.4 table) ----

#[test]
fn acceptability_len0_wnd_positive() {
    let mut c = conn_established(cfg());
    feed(&mut c, 0, ack_in(0, 0), &[]).unwrap();
    feed(&mut c, 0, ack_in(4095, 0), &[]).unwrap();
    // Deviation as in Linux: a pure ACK exactly at the right edge passes.
    feed(&mut c, 0, ack_in(4096, 0), &[]).unwrap();
    assert_eq!(
        feed(&mut c, 0, ack_in(4097, 0), &[]),
        Err(TcpDrop::NotAcceptable)
    );
    assert_eq!(
        feed(
            &mut c,
            0,
            TcpRepr {
                seq: REMOTE_SEQ,
                ..ack_in(0, 0)
            },
            &[]
        ),
        Err(TcpDrop::NotAcceptable)
    );
}

#[test]
fn acceptability_len_positive_left_part_old() {
    let mut c = conn_established(cfg());
    feed(&mut c, 0, ack_in(0, 0), b"abc").unwrap();
    // Starts before RCV.NXT, ends inside: acceptable, new part kept.
    feed(&mut c, 0, ack_in(1, 0), b"bcde").unwrap();
    assert_eq!(c.recv_queue(), 5);
}

#[test]
fn acceptability_fin_counts_as_octet() {
    let mut c = conn_established(cfg());
    // A FIN exactly at the right edge's last octet is acceptable.
    feed(
        &mut c,
        0,
        TcpRepr {
            flags: FIN | ACK,
            ..ack_in(4095, 0)
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.state(), State::Established);
}

#[test]
fn unacceptable_counted_by_reason() {
    let mut c = conn_established(cfg());
    let _ = feed(&mut c, 0, ack_in(9999, 0), b"x");
    let _ = feed(&mut c, 0, ack_in(9999, 0), b"x");
    assert_eq!(c.counters().drop_count(TcpDrop::NotAcceptable), 2);
    assert_eq!(TcpDrop::NotAcceptable.as_str(), "sequence not acceptable");
}

// ---- Segments without a connection (RFC 9293 §3.10.7.1) ----

#[test]
fn reset_for_ack_uses_seg_ack() {
    let r = lazynet::proto::tcp::reset_for(&ack_in(0, 7)).unwrap();
    assert_eq!(
        r,
        TcpRepr {
            seq: LOCAL_SEQ + 8,
            flags: RST,
            ..RST_TEMPL
        }
    );
}

#[test]
fn reset_for_syn_acks_it() {
    let r = lazynet::proto::tcp::reset_for(&TcpRepr {
        payload_len: 3,
        ..syn_in()
    })
    .unwrap();
    assert_eq!(
        r,
        TcpRepr {
            seq: SeqNumber(0),
            ack: REMOTE_SEQ + 4,
            flags: RST | ACK,
            ..RST_TEMPL
        }
    );
}

#[test]
fn reset_for_rst_is_nothing() {
    assert_eq!(
        lazynet::proto::tcp::reset_for(&TcpRepr {
            flags: RST,
            ..SEND_TEMPL
        }),
        None
    );
}

#[test]
fn regression_full_window_pure_ack_deadlock() {
    // Both peers had filled each other's window; each one's pure ACK sat
    // exactly at the other's right edge and was dropped: found by tcp_sim.
    let mut c = conn_established(cfg());
    c.send(&data(2000, 1));
    while poll(&mut c, 0).is_some() {}
    feed(&mut c, MS, ack_in(4096, 2000), &[]).unwrap();
    assert_eq!(c.snd_una(), LOCAL_SEQ + 2001);
}

#[test]
fn pure_ack_after_rto_carries_highest_sequence() {
    let mut c = conn_established(cfg());
    c.send(&data(3000, 1));
    while poll(&mut c, 0).is_some() {}
    timeout(&mut c, 200 * MS);
    take(&mut c, 200 * MS);
    // Data arrives: the ACK uses SND.MAX (3000), not the rewound SND.NXT.
    feed(&mut c, 210 * MS, ack_in(0, 0), b"x").unwrap();
    timeout(&mut c, 260 * MS);
    let (r, _) = take(&mut c, 260 * MS);
    assert_eq!(r.payload_len, 0);
    assert_eq!(r.seq, LOCAL_SEQ + 3001);
}

#[test]
fn pure_ack_seq_capped_at_peer_right_edge() {
    let mut c = conn_established(cfg());
    c.send(&data(3000, 1));
    while poll(&mut c, 0).is_some() {}
    // The peer shrinks its window to 1000 (discouraged, but possible).
    feed(
        &mut c,
        0,
        TcpRepr {
            window: 1000,
            ..ack_in(0, 0)
        },
        &[],
    )
    .unwrap();
    feed(
        &mut c,
        0,
        TcpRepr {
            window: 1000,
            ..ack_in(0, 0)
        },
        b"x",
    )
    .unwrap();
    timeout(&mut c, 40 * MS);
    let (r, _) = take(&mut c, 40 * MS);
    assert_eq!(r.seq, LOCAL_SEQ + 1001);
}
