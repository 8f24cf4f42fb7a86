//! Connection setup: SYN-SENT, SYN-RECEIVED, simultaneous open, and option
//! negotiation (MSS, window scale, timestamps, SACK-permitted).

use crate::util::*;

// ---- Tests for the SYN-SENT state (RFC 9293 §3.10.7.3) ----

#[test]
fn connect_sends_syn_with_options() {
    let mut c = Connection::connect(Config::default(), LOCAL, REMOTE, LOCAL_SEQ, 5 * MS);
    assert_eq!(c.state(), State::SynSent);
    let (r, d) = take(&mut c, 5 * MS);
    assert!(d.is_empty());
    assert_eq!(
        r,
        TcpRepr {
            seq: LOCAL_SEQ,
            flags: SYN,
            window: 65535,
            mss: Some(1460),
            window_scale: Some(1),
            sack_permitted: true,
            timestamps: Some(Timestamps { tsval: 5, tsecr: 0 }),
            ..RECV_TEMPL
        }
    );
    expect_none(&mut c, 5 * MS);
}

#[test]
fn syn_sent_plain_syn_has_only_mss() {
    let mut c = Connection::connect(cfg(), LOCAL, REMOTE, LOCAL_SEQ, 0);
    expect(
        &mut c,
        0,
        TcpRepr {
            seq: LOCAL_SEQ,
            flags: SYN,
            mss: Some(1000),
            ..RECV_TEMPL
        },
        &[],
    );
}

#[test]
fn syn_sent_syn_ack_establishes() {
    let mut c = conn_syn_sent(cfg());
    feed(
        &mut c,
        10 * MS,
        TcpRepr {
            seq: REMOTE_SEQ,
            ack: LOCAL_SEQ + 1,
            flags: SYN | ACK,
            mss: Some(900),
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.state(), State::Established);
    assert_eq!(c.eff_mss(), 900);
    expect(&mut c, 10 * MS, ack_out(0, 0), &[]);
    // RTT sampled from the SYN (10 ms).
    assert_eq!(c.srtt(), Some(10 * MS));
}

#[test]
fn syn_sent_bad_ack_sends_rst() {
    let mut c = conn_syn_sent(cfg());
    let r = feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ,
            ack: LOCAL_SEQ + 5,
            flags: SYN | ACK,
            ..SEND_TEMPL
        },
        &[],
    );
    assert_eq!(r, Err(TcpDrop::SynSentBadAck));
    expect(
        &mut c,
        0,
        TcpRepr {
            seq: LOCAL_SEQ + 5,
            flags: RST,
            ..RST_TEMPL
        },
        &[],
    );
    assert_eq!(c.state(), State::SynSent);
}

#[test]
fn syn_sent_ack_of_iss_is_bad() {
    let mut c = conn_syn_sent(cfg());
    let r = feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ,
            ack: LOCAL_SEQ,
            flags: ACK,
            ..SEND_TEMPL
        },
        &[],
    );
    assert_eq!(r, Err(TcpDrop::SynSentBadAck));
    assert!(poll(&mut c, 0).unwrap().0.flags.contains(RST));
}

#[test]
fn syn_sent_rst_with_bad_ack_ignored_silently() {
    let mut c = conn_syn_sent(cfg());
    let r = feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ,
            ack: LOCAL_SEQ + 9,
            flags: RST | ACK,
            ..SEND_TEMPL
        },
        &[],
    );
    assert_eq!(r, Err(TcpDrop::SynSentBadAck));
    expect_none(&mut c, 0);
    assert_eq!(c.state(), State::SynSent);
}

#[test]
fn syn_sent_rst_ack_refuses() {
    let mut c = conn_syn_sent(cfg());
    feed(
        &mut c,
        0,
        TcpRepr {
            seq: SeqNumber(0),
            ack: LOCAL_SEQ + 1,
            flags: RST | ACK,
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.error(), Some(ConnError::Refused));
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn syn_sent_rst_without_ack_ignored() {
    let mut c = conn_syn_sent(cfg());
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
        Err(TcpDrop::SynSentRstNoAck)
    );
    assert_eq!(c.state(), State::SynSent);
}

#[test]
fn syn_sent_plain_ack_less_segment_dropped() {
    let mut c = conn_syn_sent(cfg());
    assert_eq!(
        feed(
            &mut c,
            0,
            TcpRepr {
                seq: REMOTE_SEQ,
                ..SEND_TEMPL
            },
            &[]
        ),
        Err(TcpDrop::SynSentNoSyn)
    );
}

#[test]
fn syn_sent_close_goes_closed_silently() {
    let mut c = conn_syn_sent(cfg());
    c.close();
    assert_eq!(c.state(), State::Closed);
    expect_none(&mut c, 0);
}

#[test]
fn syn_sent_retransmits_syn_with_backoff_then_times_out() {
    let mut c = conn_syn_sent(Config {
        syn_retries: 2,
        ..cfg()
    });
    assert_eq!(c.poll_timeout(), Some(SEC));
    timeout(&mut c, SEC);
    expect(
        &mut c,
        SEC,
        TcpRepr {
            seq: LOCAL_SEQ,
            flags: SYN,
            mss: Some(1000),
            ..RECV_TEMPL
        },
        &[],
    );
    assert_eq!(c.poll_timeout(), Some(3 * SEC));
    timeout(&mut c, 3 * SEC);
    expect(
        &mut c,
        3 * SEC,
        TcpRepr {
            seq: LOCAL_SEQ,
            flags: SYN,
            mss: Some(1000),
            ..RECV_TEMPL
        },
        &[],
    );
    assert_eq!(c.poll_timeout(), Some(7 * SEC));
    timeout(&mut c, 7 * SEC);
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.error(), Some(ConnError::TimedOut));
}

#[test]
fn syn_sent_karn_no_rtt_sample_from_retransmitted_syn() {
    let mut c = conn_syn_sent(cfg());
    timeout(&mut c, SEC);
    take(&mut c, SEC);
    feed(
        &mut c,
        SEC + 5 * MS,
        TcpRepr {
            seq: REMOTE_SEQ,
            ack: LOCAL_SEQ + 1,
            flags: SYN | ACK,
            mss: Some(1000),
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.srtt(), None);
    // RFC 6298 §5.7: RTO re-initialized to 3 s after a SYN timeout.
    assert_eq!(c.rto(), 3 * SEC);
}

#[test]
fn simultaneous_open_rst_in_syn_received_is_refused() {
    let mut c = conn_syn_sent(cfg());
    feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ,
            flags: SYN,
            mss: Some(1000),
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    take(&mut c, 0);
    feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ + 1,
            flags: RST,
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.error(), Some(ConnError::Refused));
}

#[test]
fn syn_sent_data_queued_goes_after_handshake() {
    let mut c = Connection::connect(cfg(), LOCAL, REMOTE, LOCAL_SEQ, 0);
    assert_eq!(c.send(b"hello"), 5);
    let (r, d) = take(&mut c, 0);
    assert_eq!(r.flags, SYN);
    assert!(d.is_empty());
    expect_none(&mut c, 0);
    feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ,
            ack: LOCAL_SEQ + 1,
            flags: SYN | ACK,
            mss: Some(1000),
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    expect(
        &mut c,
        0,
        TcpRepr {
            flags: ACK | PSH,
            ..ack_out(0, 0)
        },
        b"hello",
    );
}

#[test]
fn syn_sent_syn_ack_with_data_is_received() {
    let mut c = conn_syn_sent(cfg());
    feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ,
            ack: LOCAL_SEQ + 1,
            flags: SYN | ACK,
            mss: Some(1000),
            ..SEND_TEMPL
        },
        b"abc",
    )
    .unwrap();
    let mut b = [0u8; 8];
    assert_eq!(c.recv(&mut b), 3);
    assert_eq!(&b[..3], b"abc");
    assert_eq!(c.rcv_nxt(), REMOTE_SEQ + 4);
}

// ---- Simultaneous open (RFC 9293 §3.5, Figure 7) ----

#[test]
fn simultaneous_open() {
    let mut c = conn_syn_sent(cfg());
    feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ,
            flags: SYN,
            mss: Some(1000),
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.state(), State::SynReceived);
    expect(
        &mut c,
        0,
        TcpRepr {
            seq: LOCAL_SEQ,
            ack: REMOTE_SEQ + 1,
            flags: SYN | ACK,
            mss: Some(1000),
            ..RECV_TEMPL
        },
        &[],
    );
    // The peer's SYN-ACK: its SYN is old (trimmed), its ACK establishes.
    feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ,
            ack: LOCAL_SEQ + 1,
            flags: SYN | ACK,
            mss: Some(1000),
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.state(), State::Established);
    expect_none(&mut c, 0);
}

#[test]
fn simultaneous_open_synack_arrives_first_as_ack() {
    let mut c = conn_syn_sent(cfg());
    feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ,
            flags: SYN,
            mss: Some(1000),
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    take(&mut c, 0);
    feed(&mut c, 0, TcpRepr { ..ack_in(0, 0) }, b"xy").unwrap();
    assert_eq!(c.state(), State::Established);
    assert_eq!(c.recv_queue(), 2);
}

// ---- Tests for the SYN-RECEIVED state ----

#[test]
fn accept_syn_sends_syn_ack() {
    let mut c = Connection::accept_syn(cfg(), LOCAL, REMOTE, &syn_in(), LOCAL_SEQ, 0).unwrap();
    assert_eq!(c.state(), State::SynReceived);
    expect(
        &mut c,
        0,
        TcpRepr {
            seq: LOCAL_SEQ,
            ack: REMOTE_SEQ + 1,
            flags: SYN | ACK,
            mss: Some(1000),
            ..RECV_TEMPL
        },
        &[],
    );
}

#[test]
fn accept_syn_rejects_non_syn() {
    for f in [ACK, SYN | ACK, SYN | RST, SYN | FIN, FIN] {
        assert!(Connection::accept_syn(
            cfg(),
            LOCAL,
            REMOTE,
            &TcpRepr {
                flags: f,
                ..syn_in()
            },
            LOCAL_SEQ,
            0
        )
        .is_none());
    }
    assert!(Connection::accept_syn(
        cfg(),
        LOCAL,
        REMOTE,
        &TcpRepr {
            dst_port: 81,
            ..syn_in()
        },
        LOCAL_SEQ,
        0
    )
    .is_none());
}

#[test]
fn syn_received_ack_establishes() {
    let c = conn_established(cfg());
    assert_eq!(c.send_window(), 8192);
}

#[test]
fn syn_received_bad_ack_sends_rst() {
    let mut c = conn_syn_received(cfg());
    let r = feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ + 1,
            ack: LOCAL_SEQ + 7,
            flags: ACK,
            ..SEND_TEMPL
        },
        &[],
    );
    assert_eq!(r, Err(TcpDrop::SynRcvdBadAck));
    expect(
        &mut c,
        0,
        TcpRepr {
            seq: LOCAL_SEQ + 7,
            flags: RST,
            ..RST_TEMPL
        },
        &[],
    );
    assert_eq!(c.state(), State::SynReceived);
}

#[test]
fn syn_received_duplicate_syn_resends_syn_ack() {
    let mut c = conn_syn_received(cfg());
    feed(&mut c, 0, syn_in(), &[]).unwrap();
    expect(
        &mut c,
        0,
        TcpRepr {
            seq: LOCAL_SEQ,
            ack: REMOTE_SEQ + 1,
            flags: SYN | ACK,
            mss: Some(1000),
            ..RECV_TEMPL
        },
        &[],
    );
}

#[test]
fn syn_received_different_syn_challenged() {
    let mut c = conn_syn_received(cfg());
    let r = feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ + 100,
            ..syn_in()
        },
        &[],
    );
    assert_eq!(r, Err(TcpDrop::SynChallenged));
    expect(
        &mut c,
        0,
        TcpRepr {
            seq: LOCAL_SEQ + 1,
            ack: REMOTE_SEQ + 1,
            flags: ACK,
            ..RECV_TEMPL
        },
        &[],
    );
}

#[test]
fn syn_received_rst_closes() {
    let mut c = conn_syn_received(cfg());
    feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ + 1,
            flags: RST,
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.error(), Some(ConnError::Reset));
}

#[test]
fn syn_received_retransmits_syn_ack_on_timeout() {
    let mut c = conn_syn_received(cfg());
    assert_eq!(c.poll_timeout(), Some(SEC));
    timeout(&mut c, SEC);
    expect(
        &mut c,
        SEC,
        TcpRepr {
            seq: LOCAL_SEQ,
            ack: REMOTE_SEQ + 1,
            flags: SYN | ACK,
            mss: Some(1000),
            ..RECV_TEMPL
        },
        &[],
    );
}

#[test]
fn syn_received_ack_with_data_delivers() {
    let mut c = conn_syn_received(cfg());
    feed(&mut c, 0, ack_in(0, 0), b"GET /").unwrap();
    assert_eq!(c.state(), State::Established);
    assert_eq!(c.recv_queue(), 5);
}

#[test]
fn syn_received_close_sends_fin_after_ack() {
    let mut c = conn_syn_received(cfg());
    c.close();
    assert_eq!(c.state(), State::FinWait1);
    // No FIN before the SYN is acknowledged.
    expect_none(&mut c, 0);
    feed(&mut c, 0, ack_in(0, 0), &[]).unwrap();
    expect(
        &mut c,
        0,
        TcpRepr {
            flags: FIN | ACK,
            ..ack_out(0, 0)
        },
        &[],
    );
}

// ---- Options ----

#[test]
fn mss_default_536_when_absent() {
    let c = conn_syn_received_with(
        cfg(),
        TcpRepr {
            mss: None,
            ..syn_in()
        },
    );
    assert_eq!(c.eff_mss(), 536);
}

#[test]
fn mss_is_min_of_both() {
    let c = conn_syn_received_with(
        cfg(),
        TcpRepr {
            mss: Some(9000),
            ..syn_in()
        },
    );
    assert_eq!(c.eff_mss(), 1000);
    let c = conn_syn_received_with(
        cfg(),
        TcpRepr {
            mss: Some(700),
            ..syn_in()
        },
    );
    assert_eq!(c.eff_mss(), 700);
}

#[test]
fn mss_reduced_by_timestamps() {
    let cf = Config {
        timestamps: true,
        ..cfg()
    };
    let c = conn_syn_received_with(
        cf,
        TcpRepr {
            timestamps: Some(Timestamps { tsval: 1, tsecr: 0 }),
            ..syn_in()
        },
    );
    assert!(c.timestamps_enabled());
    assert_eq!(c.eff_mss(), 988);
}

#[test]
fn wscale_negotiated_only_if_both() {
    let cf = Config {
        window_scale: true,
        recv_buf: 256 * 1024,
        ..cfg()
    };
    let mut c = Connection::accept_syn(cf, LOCAL, REMOTE, &syn_in(), LOCAL_SEQ, 0).unwrap();
    let (r, _) = take(&mut c, 0);
    assert_eq!(r.window_scale, None);
    assert_eq!(c.recv_wscale(), 0);
    assert_eq!(r.window, 65535);

    let mut c = Connection::accept_syn(
        cf,
        LOCAL,
        REMOTE,
        &TcpRepr {
            window_scale: Some(3),
            ..syn_in()
        },
        LOCAL_SEQ,
        0,
    )
    .unwrap();
    let (r, _) = take(&mut c, 0);
    assert_eq!(r.window_scale, Some(3));
    assert_eq!(c.recv_wscale(), 3);
    assert_eq!(c.send_wscale(), 3);
    // RFC 7323 §2.2: the SYN-ACK's window is not scaled.
    assert_eq!(r.window, 65535);
}

#[test]
fn wscale_not_offered_by_us_is_ignored() {
    let c = conn_syn_received_with(
        cfg(),
        TcpRepr {
            window_scale: Some(7),
            ..syn_in()
        },
    );
    assert_eq!(c.send_wscale(), 0);
}

#[test]
fn wscale_above_14_clamped() {
    let cf = Config {
        window_scale: true,
        ..cfg()
    };
    let c = conn_syn_received_with(
        cf,
        TcpRepr {
            window_scale: Some(20),
            ..syn_in()
        },
    );
    assert_eq!(c.send_wscale(), 14);
}

#[test]
fn wscale_syn_window_unscaled_then_scaled() {
    let cf = Config {
        window_scale: true,
        recv_buf: 256 * 1024,
        ..cfg()
    };
    let mut c = conn_syn_received_with(
        cf,
        TcpRepr {
            window_scale: Some(4),
            window: 1000,
            ..syn_in()
        },
    );
    assert_eq!(c.send_window(), 1000);
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
    assert_eq!(c.send_window(), 16000);
    // Our advertised window is shifted right by our scale (3 for 256 KiB).
    c.send(b"x");
    let (r, _) = take(&mut c, 0);
    assert_eq!(u32::from(r.window) << 3, 256 * 1024);
}

#[test]
fn wscale_active_open() {
    let cf = Config {
        window_scale: true,
        recv_buf: 128 * 1024,
        ..cfg()
    };
    let mut c = conn_syn_sent(cf);
    feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ,
            ack: LOCAL_SEQ + 1,
            flags: SYN | ACK,
            window: 2000,
            window_scale: Some(2),
            mss: Some(1000),
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.send_window(), 2000);
    assert_eq!(c.send_wscale(), 2);
    assert_eq!(c.recv_wscale(), 2);
    let (r, _) = take(&mut c, 0);
    assert_eq!(r.window, 32768);
    feed(
        &mut c,
        0,
        TcpRepr {
            window: 2000,
            ..ack_in(0, 0)
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.send_window(), 8000);
}

#[test]
fn wscale_active_open_peer_without_wscale() {
    let cf = Config {
        window_scale: true,
        recv_buf: 128 * 1024,
        ..cfg()
    };
    let mut c = conn_syn_sent(cf);
    feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ,
            ack: LOCAL_SEQ + 1,
            flags: SYN | ACK,
            mss: Some(1000),
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.send_wscale(), 0);
    assert_eq!(c.recv_wscale(), 0);
}

#[test]
fn sack_permitted_negotiation() {
    let cf = Config {
        sack: true,
        ..cfg()
    };
    let mut c = Connection::accept_syn(
        cf,
        LOCAL,
        REMOTE,
        &TcpRepr {
            sack_permitted: true,
            ..syn_in()
        },
        LOCAL_SEQ,
        0,
    )
    .unwrap();
    assert!(c.sack_enabled());
    assert!(take(&mut c, 0).0.sack_permitted);
    let mut c = Connection::accept_syn(cf, LOCAL, REMOTE, &syn_in(), LOCAL_SEQ, 0).unwrap();
    assert!(!c.sack_enabled());
    assert!(!take(&mut c, 0).0.sack_permitted);
    let c = Connection::accept_syn(
        cfg(),
        LOCAL,
        REMOTE,
        &TcpRepr {
            sack_permitted: true,
            ..syn_in()
        },
        LOCAL_SEQ,
        0,
    )
    .unwrap();
    assert!(!c.sack_enabled());
}

#[test]
fn timestamps_synack_echoes_tsval() {
    let cf = Config {
        timestamps: true,
        ts_offset: 1000,
        ..cfg()
    };
    let mut c = Connection::accept_syn(
        cf,
        LOCAL,
        REMOTE,
        &TcpRepr {
            timestamps: Some(Timestamps {
                tsval: 777,
                tsecr: 0,
            }),
            ..syn_in()
        },
        LOCAL_SEQ,
        3 * MS,
    )
    .unwrap();
    let (r, _) = take(&mut c, 3 * MS);
    assert_eq!(
        r.timestamps,
        Some(Timestamps {
            tsval: 1003,
            tsecr: 777
        })
    );
}

#[test]
fn timestamps_not_sent_if_peer_did_not() {
    let cf = Config {
        timestamps: true,
        ..cfg()
    };
    let mut c = Connection::accept_syn(cf, LOCAL, REMOTE, &syn_in(), LOCAL_SEQ, 0).unwrap();
    assert_eq!(take(&mut c, 0).0.timestamps, None);
    assert!(!c.timestamps_enabled());
}

#[test]
fn timestamps_rtt_sample_on_syn_ack() {
    let cf = Config {
        timestamps: true,
        ..cfg()
    };
    let mut c = conn_syn_sent(cf);
    // Retransmit the SYN: Karn forbids timing, but TSecr allows it.
    timeout(&mut c, SEC);
    take(&mut c, SEC);
    feed(
        &mut c,
        SEC + 30 * MS,
        TcpRepr {
            seq: REMOTE_SEQ,
            ack: LOCAL_SEQ + 1,
            flags: SYN | ACK,
            mss: Some(1000),
            timestamps: Some(Timestamps {
                tsval: 5,
                tsecr: 1000,
            }),
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.srtt(), Some(30 * MS));
}

#[test]
fn wrong_ports_dropped() {
    let mut c = conn_established(cfg());
    assert_eq!(
        feed(
            &mut c,
            0,
            TcpRepr {
                src_port: 1,
                ..ack_in(0, 0)
            },
            &[]
        ),
        Err(TcpDrop::WrongPorts)
    );
}

#[test]
fn payload_length_mismatch_dropped() {
    let mut c = conn_established(cfg());
    let r = TcpRepr {
        payload_len: 3,
        ..ack_in(0, 0)
    };
    assert_eq!(c.handle_segment(0, &r, b"ab"), Err(TcpDrop::BadLength));
    assert_eq!(c.counters().drop_count(TcpDrop::BadLength), 1);
}

// ---- Handshake losses ----

#[test]
fn established_retransmitted_syn_ack_reacked() {
    // Our ACK of the SYN-ACK was lost: the peer resends SYN-ACK.
    let mut c = conn_syn_sent(cfg());
    let synack = TcpRepr {
        seq: REMOTE_SEQ,
        ack: LOCAL_SEQ + 1,
        flags: SYN | ACK,
        mss: Some(1000),
        ..SEND_TEMPL
    };
    feed(&mut c, 0, synack, &[]).unwrap();
    take(&mut c, 0);
    assert_eq!(feed(&mut c, SEC, synack, &[]), Err(TcpDrop::NotAcceptable));
    expect(&mut c, SEC, ack_out(0, 0), &[]);
    assert_eq!(c.state(), State::Established);
}

#[test]
fn syn_ack_retransmission_keeps_options() {
    let cf = Config {
        window_scale: true,
        sack: true,
        timestamps: true,
        ..cfg()
    };
    let syn = TcpRepr {
        window_scale: Some(2),
        sack_permitted: true,
        timestamps: Some(Timestamps { tsval: 9, tsecr: 0 }),
        ..syn_in()
    };
    let mut c = Connection::accept_syn(cf, LOCAL, REMOTE, &syn, LOCAL_SEQ, 0).unwrap();
    let (first, _) = take(&mut c, 0);
    timeout(&mut c, SEC);
    let (again, _) = take(&mut c, SEC);
    assert_eq!(again.window_scale, first.window_scale);
    assert!(again.sack_permitted);
    assert_eq!(
        again.timestamps,
        Some(Timestamps {
            tsval: 1000,
            tsecr: 9
        })
    );
    assert_eq!(c.counters().retransmits, 1);
}

#[test]
fn syn_received_ack_lost_data_establishes() {
    // The handshake's ACK was lost, but the first data segment carries it.
    let mut c = conn_syn_received(cfg());
    feed(
        &mut c,
        5 * MS,
        TcpRepr {
            flags: ACK | PSH,
            ..ack_in(0, 0)
        },
        b"hello",
    )
    .unwrap();
    assert_eq!(c.state(), State::Established);
    assert_eq!(c.recv_queue(), 5);
}

#[test]
fn timestamps_in_every_segment_when_negotiated() {
    let cf = Config {
        timestamps: true,
        ..cfg()
    };
    let ts = Some(Timestamps { tsval: 1, tsecr: 0 });
    let mut c = conn_syn_received_with(
        cf,
        TcpRepr {
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
    c.send(&data(2500, 1));
    c.close();
    while let Some((r, _)) = poll(&mut c, 4 * MS) {
        assert_eq!(r.timestamps, Some(Timestamps { tsval: 4, tsecr: 1 }));
    }
}

#[test]
fn segment_without_timestamp_accepted_when_negotiated() {
    // RFC 7323 §3.2 allows dropping it; like Linux we accept it.
    let cf = Config {
        timestamps: true,
        ..cfg()
    };
    let ts = Some(Timestamps { tsval: 1, tsecr: 0 });
    let mut c = conn_syn_received_with(
        cf,
        TcpRepr {
            timestamps: ts,
            ..syn_in()
        },
    );
    feed(&mut c, 0, ack_in(0, 0), b"x").unwrap();
    assert_eq!(c.recv_queue(), 1);
}

#[test]
fn urgent_pointer_ignored_data_inline() {
    let mut c = conn_established(cfg());
    feed(
        &mut c,
        0,
        TcpRepr {
            flags: ACK | TcpFlags::URG,
            urgent: 2,
            ..ack_in(0, 0)
        },
        b"abc",
    )
    .unwrap();
    assert_eq!(c.recv_queue(), 3);
}

#[test]
fn effective_mss_bounds_segments_sent() {
    let mut c = conn_syn_received_with(
        cfg(),
        TcpRepr {
            mss: Some(300),
            ..syn_in()
        },
    );
    feed(&mut c, 0, ack_in(0, 0), &[]).unwrap();
    c.send(&data(700, 1));
    let lens: Vec<_> = std::iter::from_fn(|| poll(&mut c, 0).map(|(r, _)| r.payload_len)).collect();
    assert_eq!(lens, vec![300, 300, 100]);
}

#[test]
fn small_poll_buffer_limits_segment() {
    let mut c = conn_established(cfg());
    c.send(&data(500, 1));
    let mut buf = [0u8; 200];
    let r = c.poll_transmit(0, &mut buf).unwrap();
    assert_eq!(r.payload_len, 200);
    c.check_invariants().unwrap();
}
