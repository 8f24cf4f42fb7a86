//! Closing: FIN-WAIT-1/2, CLOSING, TIME-WAIT, CLOSE-WAIT, LAST-ACK,
//! half-close and simultaneous close (RFC 9293 §3.6).

use crate::util::*;

fn fin_in(rseq: u32, acked: u32) -> TcpRepr {
    TcpRepr {
        flags: FIN | ACK,
        ..ack_in(rseq, acked)
    }
}

// ---- ESTABLISHED → FIN-WAIT-1 ----

#[test]
fn close_sends_fin() {
    let c = conn_fin_wait_1(cfg());
    assert_eq!(c.state(), State::FinWait1);
}

#[test]
fn close_sends_fin_after_queued_data_on_last_segment() {
    let mut c = conn_established(cfg());
    let d = data(1500, 1);
    c.send(&d);
    c.close();
    expect(&mut c, 0, ack_out(0, 0), &d[..1000]);
    expect(
        &mut c,
        0,
        TcpRepr {
            flags: FIN | PSH | ACK,
            ..ack_out(1000, 0)
        },
        &d[1000..],
    );
    expect_none(&mut c, 0);
}

#[test]
fn send_after_close_refused() {
    let mut c = conn_fin_wait_1(cfg());
    assert_eq!(c.send(b"late"), 0);
    assert!(!c.may_send());
}

#[test]
fn close_twice_is_harmless() {
    let mut c = conn_fin_wait_1(cfg());
    c.close();
    assert_eq!(c.state(), State::FinWait1);
    expect_none(&mut c, 0);
}

#[test]
fn fin_wait_1_ack_of_fin_to_fin_wait_2() {
    let c = conn_fin_wait_2(cfg());
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn fin_wait_1_ack_of_data_only_stays() {
    let mut c = conn_established(cfg());
    c.send(b"abc");
    c.close();
    take(&mut c, 0);
    feed(&mut c, 0, ack_in(0, 3), &[]).unwrap();
    assert_eq!(c.state(), State::FinWait1);
    feed(&mut c, 0, ack_in(0, 4), &[]).unwrap();
    assert_eq!(c.state(), State::FinWait2);
}

#[test]
fn fin_wait_1_retransmits_fin_on_rto() {
    let mut c = conn_fin_wait_1(cfg());
    let t = c.poll_timeout().unwrap();
    timeout(&mut c, t);
    expect(
        &mut c,
        t,
        TcpRepr {
            flags: FIN | ACK,
            ..ack_out(0, 0)
        },
        &[],
    );
}

#[test]
fn fin_wait_1_fin_ack_together_to_time_wait() {
    let mut c = conn_fin_wait_1(cfg());
    feed(&mut c, 0, fin_in(0, 1), &[]).unwrap();
    assert_eq!(c.state(), State::TimeWait);
    expect(&mut c, 0, ack_out(1, 1), &[]);
}

#[test]
fn fin_wait_1_recv_data_half_close() {
    let mut c = conn_fin_wait_1(cfg());
    feed(&mut c, 0, ack_in(0, 1), b"still here").unwrap();
    assert_eq!(c.state(), State::FinWait2);
    let mut b = [0; 32];
    assert_eq!(c.recv(&mut b), 10);
}

// ---- FIN-WAIT-2 ----

#[test]
fn fin_wait_2_recv_data_then_fin() {
    let mut c = conn_fin_wait_2(cfg());
    feed(&mut c, 0, ack_in(0, 1), b"tail").unwrap();
    feed(&mut c, 0, fin_in(4, 1), &[]).unwrap();
    assert_eq!(c.state(), State::TimeWait);
    expect(
        &mut c,
        0,
        TcpRepr {
            window: 4092,
            ..ack_out(1, 5)
        },
        &[],
    );
    let mut b = [0; 8];
    assert_eq!(c.recv(&mut b), 4);
    assert!(c.recv_finished());
}

#[test]
fn fin_wait_2_fin_with_data() {
    let mut c = conn_fin_wait_2(cfg());
    feed(&mut c, 0, fin_in(0, 1), b"bye").unwrap();
    assert_eq!(c.state(), State::TimeWait);
    assert_eq!(c.rcv_nxt(), REMOTE_SEQ + 5);
}

#[test]
fn fin_wait_2_out_of_order_fin_waits_for_gap() {
    let mut c = conn_fin_wait_2(cfg());
    feed(&mut c, 0, fin_in(3, 1), &[]).unwrap();
    assert_eq!(c.state(), State::FinWait2);
    expect(&mut c, 0, ack_out(1, 0), &[]);
    feed(&mut c, 0, ack_in(0, 1), b"abc").unwrap();
    assert_eq!(c.state(), State::FinWait2);
    // The peer retransmits its FIN.
    feed(&mut c, 0, fin_in(3, 1), &[]).unwrap();
    assert_eq!(c.state(), State::TimeWait);
}

// ---- CLOSING (simultaneous close) ----

#[test]
fn simultaneous_close_via_closing() {
    let mut c = conn_closing(cfg());
    feed(&mut c, 0, ack_in(1, 1), &[]).unwrap();
    assert_eq!(c.state(), State::TimeWait);
}

#[test]
fn closing_retransmits_fin() {
    let mut c = conn_closing(cfg());
    let t = c.poll_timeout().unwrap();
    timeout(&mut c, t);
    expect(
        &mut c,
        t,
        TcpRepr {
            flags: FIN | ACK,
            ..ack_out(0, 1)
        },
        &[],
    );
    assert_eq!(c.state(), State::Closing);
}

#[test]
fn closing_ack_without_fin_ack_stays() {
    let mut c = conn_closing(cfg());
    feed(&mut c, 0, ack_in(1, 0), &[]).unwrap();
    assert_eq!(c.state(), State::Closing);
}

// ---- TIME-WAIT ----

#[test]
fn time_wait_expires_after_2msl() {
    let mut c = conn_time_wait(cfg());
    assert_eq!(c.poll_timeout(), Some(10 * SEC));
    timeout(&mut c, 10 * SEC - 1);
    assert_eq!(c.state(), State::TimeWait);
    timeout(&mut c, 10 * SEC);
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.error(), None);
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn time_wait_duration_configurable() {
    let c = conn_time_wait(Config {
        time_wait: 2 * MS,
        ..cfg()
    });
    assert_eq!(c.poll_timeout(), Some(2 * MS));
}

#[test]
fn time_wait_retransmitted_fin_acked_and_timer_restarted() {
    let mut c = conn_time_wait(cfg());
    feed(&mut c, 5 * SEC, fin_in(0, 1), &[]).unwrap_err();
    expect(&mut c, 5 * SEC, ack_out(1, 1), &[]);
    assert_eq!(c.poll_timeout(), Some(15 * SEC));
}

#[test]
fn time_wait_new_data_acked_not_accepted() {
    let mut c = conn_time_wait(cfg());
    feed(&mut c, SEC, ack_in(1, 1), b"zzz").unwrap();
    assert_eq!(c.recv_queue(), 0);
    expect(&mut c, SEC, ack_out(1, 1), &[]);
}

#[test]
fn time_wait_syn_challenged() {
    let mut c = conn_time_wait(cfg());
    assert_eq!(
        feed(
            &mut c,
            SEC,
            TcpRepr {
                seq: REMOTE_SEQ + 100,
                flags: SYN,
                ..SEND_TEMPL
            },
            &[]
        ),
        Err(TcpDrop::SynChallenged)
    );
    expect(&mut c, SEC, ack_out(1, 1), &[]);
}

#[test]
fn time_wait_sends_nothing_unprompted() {
    let mut c = conn_time_wait(cfg());
    expect_none(&mut c, SEC);
}

// ---- CLOSE-WAIT and LAST-ACK ----

#[test]
fn close_wait_on_peer_fin() {
    let c = conn_close_wait(cfg());
    assert!(c.recv_finished());
    assert!(c.may_send());
}

#[test]
fn close_wait_send_after_peer_fin_half_close() {
    let mut c = conn_close_wait(cfg());
    assert_eq!(c.send(b"response"), 8);
    expect(
        &mut c,
        0,
        TcpRepr {
            flags: PSH | ACK,
            ..ack_out(0, 1)
        },
        b"response",
    );
    feed(&mut c, 0, ack_in(1, 8), &[]).unwrap();
    assert_eq!(c.send_queue(), 0);
}

#[test]
fn close_wait_recv_data_before_eof() {
    let mut c = conn_established(cfg());
    feed(&mut c, 0, fin_in(0, 0), b"last").unwrap();
    assert_eq!(c.state(), State::CloseWait);
    assert!(!c.recv_finished());
    let mut b = [0; 8];
    assert_eq!(c.recv(&mut b), 4);
    assert!(c.recv_finished());
    assert_eq!(c.recv(&mut b), 0);
}

#[test]
fn close_wait_peer_fin_retransmit_acked() {
    let mut c = conn_close_wait(cfg());
    let _ = feed(&mut c, 0, fin_in(0, 0), &[]);
    expect(&mut c, 0, ack_out(0, 1), &[]);
}

#[test]
fn close_wait_data_beyond_fin_ignored() {
    let mut c = conn_close_wait(cfg());
    feed(&mut c, 0, ack_in(1, 0), b"bogus").unwrap();
    assert_eq!(c.recv_queue(), 0);
    expect(&mut c, 0, ack_out(0, 1), &[]);
}

#[test]
fn last_ack_ack_closes() {
    let mut c = conn_last_ack(cfg());
    feed(&mut c, 0, ack_in(1, 1), &[]).unwrap();
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.error(), None);
    expect_none(&mut c, 0);
}

#[test]
fn last_ack_retransmits_fin() {
    let mut c = conn_last_ack(cfg());
    let t = c.poll_timeout().unwrap();
    timeout(&mut c, t);
    expect(
        &mut c,
        t,
        TcpRepr {
            flags: FIN | ACK,
            ..ack_out(0, 1)
        },
        &[],
    );
}

#[test]
fn last_ack_after_data_then_fin() {
    let mut c = conn_close_wait(cfg());
    c.send(b"xyz");
    c.close();
    expect(
        &mut c,
        0,
        TcpRepr {
            flags: FIN | PSH | ACK,
            ..ack_out(0, 1)
        },
        b"xyz",
    );
    feed(&mut c, 0, ack_in(1, 3), &[]).unwrap();
    assert_eq!(c.state(), State::LastAck);
    feed(&mut c, 0, ack_in(1, 4), &[]).unwrap();
    assert_eq!(c.state(), State::Closed);
}

#[test]
fn fin_in_syn_received_goes_close_wait() {
    let mut c = conn_syn_received(cfg());
    feed(&mut c, 0, fin_in(0, 0), &[]).unwrap();
    assert_eq!(c.state(), State::CloseWait);
}

#[test]
fn closed_connection_drops_everything() {
    let mut c = conn_last_ack(cfg());
    feed(&mut c, 0, ack_in(1, 1), &[]).unwrap();
    assert_eq!(feed(&mut c, 0, ack_in(1, 1), b"x"), Err(TcpDrop::Closed));
    expect_none(&mut c, 0);
}

#[test]
fn full_close_sequence_both_directions() {
    // Active close with data both ways, ending in TIME-WAIT and CLOSED.
    let mut c = conn_established(cfg());
    c.send(b"ping");
    take(&mut c, 0);
    feed(&mut c, MS, ack_in(0, 4), b"pong").unwrap();
    c.close();
    expect(
        &mut c,
        MS,
        TcpRepr {
            flags: FIN | ACK,
            window: 4092,
            ..ack_out(4, 4)
        },
        &[],
    );
    feed(&mut c, 2 * MS, fin_in(4, 5), &[]).unwrap();
    assert_eq!(c.state(), State::TimeWait);
    expect(
        &mut c,
        2 * MS,
        TcpRepr {
            window: 4092,
            ..ack_out(5, 5)
        },
        &[],
    );
    timeout(&mut c, 2 * MS + 10 * SEC);
    assert_eq!(c.state(), State::Closed);
}

// ---- Orphans: the application closed its handle (RFC 1122 §4.2.2.13) ----

#[test]
fn an_orphan_in_fin_wait_2_is_dropped_after_the_fin_timeout() {
    let c = Config {
        fin_timeout: 3 * SEC,
        ..cfg()
    };
    let mut c = conn_fin_wait_2(c);
    // Not orphaned (a half-close): FIN-WAIT-2 waits for the peer's FIN.
    assert_eq!(c.poll_timeout(), None);
    c.orphan(5 * SEC);
    assert_eq!(c.poll_timeout(), Some(8 * SEC));
    timeout(&mut c, 8 * SEC - 1);
    assert_eq!(c.state(), State::FinWait2);
    timeout(&mut c, 8 * SEC);
    // Silently: the peer has acknowledged our FIN; nothing to tell it.
    assert_eq!(c.state(), State::Closed);
    expect_none(&mut c, 8 * SEC);
    assert_eq!(c.counters().fin_timeouts, 1);
    assert_eq!(c.error(), None);
}

#[test]
fn an_orphan_reaching_fin_wait_2_arms_the_fin_timeout_then() {
    let c = Config {
        fin_timeout: 3 * SEC,
        ..cfg()
    };
    let mut c = conn_fin_wait_1(c);
    c.orphan(0);
    // Our FIN is acknowledged at 2 s: the timeout counts from there.
    feed(&mut c, 2 * SEC, ack_in(0, 1), &[]).unwrap();
    assert_eq!(c.state(), State::FinWait2);
    assert_eq!(c.poll_timeout(), Some(5 * SEC));
    // The peer's FIN before it: TIME-WAIT as usual, 2·MSL from now.
    feed(&mut c, 4 * SEC, fin_in(0, 1), &[]).unwrap();
    assert_eq!(c.state(), State::TimeWait);
    assert_eq!(c.poll_timeout(), Some(14 * SEC));
    expect(&mut c, 4 * SEC, ack_out(1, 1), &[]);
    assert_eq!(c.counters().fin_timeouts, 0);
}

#[test]
fn text_for_an_orphan_resets_it() {
    let mut c = conn_fin_wait_2(cfg());
    c.orphan(0);
    feed(&mut c, 0, ack_in(0, 1), b"nobody reads this").unwrap();
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.counters().data_after_close, 1);
    expect(
        &mut c,
        0,
        TcpRepr {
            seq: LOCAL_SEQ + 2,
            ack: REMOTE_SEQ + 1,
            flags: RST | ACK,
            window: 0,
            ..RST_TEMPL
        },
        &[],
    );
    expect_none(&mut c, 0);
}

#[test]
fn a_retransmission_of_text_read_before_the_close_does_not_reset_an_orphan() {
    let mut c = conn_established(cfg());
    feed(&mut c, 0, ack_in(0, 0), b"read").unwrap();
    let mut b = [0u8; 8];
    assert_eq!(c.recv(&mut b), 4);
    c.close();
    take(&mut c, 0);
    c.orphan(0);
    // The same four bytes again (our ACK was lost): below the window,
    // answered with an ACK, no RST.
    assert_eq!(
        feed(&mut c, 0, ack_in(0, 1), b"read"),
        Err(TcpDrop::NotAcceptable)
    );
    assert_eq!(c.state(), State::FinWait1);
    let (r, _) = take(&mut c, 0);
    assert!(!r.flags.contains(RST), "{r:?}");
    assert_eq!(c.counters().data_after_close, 0);
}

#[test]
fn an_orphan_gives_its_receive_buffer_back_and_keeps_its_window_edge() {
    let mut c = conn_fin_wait_1(cfg());
    let before = c.buffer_bytes();
    c.orphan(0);
    // Receive buffer gone; the send buffer holds nothing unacknowledged
    // but the FIN, so it is gone too.
    assert!(c.buffer_bytes() < before);
    assert_eq!(c.buffer_bytes(), 0);
    // Its FIN retransmission still advertises the same window.
    let t = c.poll_timeout().unwrap();
    timeout(&mut c, t);
    expect(
        &mut c,
        t,
        TcpRepr {
            flags: FIN | ACK,
            ..ack_out(0, 0)
        },
        &[],
    );
}

#[test]
fn an_orphans_send_buffer_shrinks_to_what_is_unacknowledged() {
    let mut c = conn_established(cfg());
    let d = data(3000, 3);
    assert_eq!(c.send(&d), 3000);
    c.close();
    // One segment out; the rest waits.
    expect(&mut c, 0, ack_out(0, 0), &d[..1000]);
    feed(&mut c, 0, ack_in(0, 1000), &[]).unwrap();
    c.orphan(0);
    assert_eq!(c.buffer_bytes(), 2000);
    // The rest goes out intact from the shrunk buffer, then the FIN.
    let mut sent = Vec::new();
    while let Some((r, p)) = poll(&mut c, 0) {
        sent.extend_from_slice(&p);
        if r.flags.contains(FIN) {
            break;
        }
    }
    assert_eq!(sent, &d[1000..]);
    feed(&mut c, 0, ack_in(0, 3001), &[]).unwrap();
    assert_eq!(c.state(), State::FinWait2);
    assert_eq!(c.buffer_bytes(), 0);
}
