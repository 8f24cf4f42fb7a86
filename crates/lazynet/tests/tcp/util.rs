//! Shared helpers for the segment-level TCP tests (smoltcp style): the
//! connection under test is "local"; the test plays the remote peer.

use std::net::{Ipv4Addr, SocketAddrV4};

pub use lazynet::proto::tcp::{
    CcAlgo, Config, CongestionControl, ConnError, Connection, State, TcpDrop,
};
pub use lazynet::wire::tcp::{SackBlocks, SeqNumber, TcpFlags, TcpRepr, Timestamps};

pub const MS: u64 = 1_000_000;
pub const SEC: u64 = 1_000_000_000;

pub const LOCAL: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80);
pub const REMOTE: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 49500);
pub const LOCAL_SEQ: SeqNumber = SeqNumber(10_000);
pub const REMOTE_SEQ: SeqNumber = SeqNumber(u32::MAX - 1_000); // wraps during tests

pub const ACK: TcpFlags = TcpFlags::ACK;
pub const SYN: TcpFlags = TcpFlags::SYN;
pub const FIN: TcpFlags = TcpFlags::FIN;
pub const RST: TcpFlags = TcpFlags::RST;
pub const PSH: TcpFlags = TcpFlags::PSH;

/// A segment from the remote peer to the connection.
pub const SEND_TEMPL: TcpRepr = TcpRepr {
    src_port: 49500,
    dst_port: 80,
    window: 8192,
    ..TcpRepr::EMPTY
};
/// A segment from the connection to the remote peer.
pub const RECV_TEMPL: TcpRepr = TcpRepr {
    src_port: 80,
    dst_port: 49500,
    window: 4096,
    ..TcpRepr::EMPTY
};

/// A RST from the connection (no ACK, window 0).
pub const RST_TEMPL: TcpRepr = TcpRepr {
    src_port: 80,
    dst_port: 49500,
    ..TcpRepr::EMPTY
};

/// Plain configuration: no options beyond MSS, small buffers, no Nagle,
/// NewReno (the tests check RFC 5681 window arithmetic; CUBIC has its own).
pub fn cfg() -> Config {
    Config {
        mss: 1000,
        send_buf: 8192,
        recv_buf: 4096,
        window_scale: false,
        timestamps: false,
        sack: false,
        nodelay: true,
        time_wait: 10 * SEC,
        cc: CcAlgo::NewReno,
        ..Config::default()
    }
}

pub type Conn = Connection;

/// Feeds a segment (payload_len set from `data`); checks invariants.
pub fn feed(c: &mut Conn, now: u64, r: TcpRepr, data: &[u8]) -> Result<(), TcpDrop> {
    let r = TcpRepr {
        payload_len: data.len(),
        ..r
    };
    let res = c.handle_segment(now, &r, data);
    c.check_invariants()
        .expect("invariants after handle_segment");
    res
}

/// Polls one segment.
pub fn poll(c: &mut Conn, now: u64) -> Option<(TcpRepr, Vec<u8>)> {
    let mut buf = vec![0u8; 65536];
    let r = c.poll_transmit(now, &mut buf);
    c.check_invariants()
        .expect("invariants after poll_transmit");
    r.map(|r| {
        buf.truncate(r.payload_len);
        (r, buf)
    })
}

/// Expects exactly this segment next.
#[track_caller]
pub fn expect(c: &mut Conn, now: u64, want: TcpRepr, data: &[u8]) {
    let want = TcpRepr {
        payload_len: data.len(),
        ..want
    };
    match poll(c, now) {
        Some((r, d)) => {
            assert_eq!(r, want, "segment header");
            assert_eq!(d, data, "segment payload");
        }
        None => panic!("expected {want:?}, got nothing"),
    }
}

/// Expects no segment.
#[track_caller]
pub fn expect_none(c: &mut Conn, now: u64) {
    if let Some((r, _)) = poll(c, now) {
        panic!("expected nothing, got {r:?}");
    }
}

/// Polls one segment, which must exist.
#[track_caller]
pub fn take(c: &mut Conn, now: u64) -> (TcpRepr, Vec<u8>) {
    poll(c, now).expect("a segment")
}

pub fn timeout(c: &mut Conn, now: u64) {
    c.handle_timeout(now);
    c.check_invariants()
        .expect("invariants after handle_timeout");
}

pub fn syn_in() -> TcpRepr {
    TcpRepr {
        seq: REMOTE_SEQ,
        flags: SYN,
        mss: Some(1000),
        ..SEND_TEMPL
    }
}

/// SYN-SENT, SYN already transmitted.
pub fn conn_syn_sent(cfg: Config) -> Conn {
    let mut c = Connection::connect(cfg, LOCAL, REMOTE, LOCAL_SEQ, 0);
    let (r, _) = take(&mut c, 0);
    assert_eq!(r.flags, SYN);
    c
}

/// SYN-RECEIVED from `syn`, SYN-ACK already transmitted.
pub fn conn_syn_received_with(cfg: Config, syn: TcpRepr) -> Conn {
    let mut c = Connection::accept_syn(cfg, LOCAL, REMOTE, &syn, LOCAL_SEQ, 0).unwrap();
    let (r, _) = take(&mut c, 0);
    assert_eq!(r.flags, SYN | ACK);
    c
}

pub fn conn_syn_received(cfg: Config) -> Conn {
    conn_syn_received_with(cfg, syn_in())
}

/// ESTABLISHED by passive open; no segment pending.
pub fn conn_established(cfg: Config) -> Conn {
    let mut c = conn_syn_received(cfg);
    feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ + 1,
            ack: LOCAL_SEQ + 1,
            flags: ACK,
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.state(), State::Established);
    c
}

/// ESTABLISHED, then close(): FIN-WAIT-1 with the FIN sent.
pub fn conn_fin_wait_1(cfg: Config) -> Conn {
    let mut c = conn_established(cfg);
    c.close();
    expect(
        &mut c,
        0,
        TcpRepr {
            seq: LOCAL_SEQ + 1,
            ack: REMOTE_SEQ + 1,
            flags: FIN | ACK,
            ..RECV_TEMPL
        },
        &[],
    );
    assert_eq!(c.state(), State::FinWait1);
    c
}

/// FIN-WAIT-2: our FIN acked.
pub fn conn_fin_wait_2(cfg: Config) -> Conn {
    let mut c = conn_fin_wait_1(cfg);
    feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ + 1,
            ack: LOCAL_SEQ + 2,
            flags: ACK,
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.state(), State::FinWait2);
    c
}

/// CLOSE-WAIT: the peer's FIN received and acked.
pub fn conn_close_wait(cfg: Config) -> Conn {
    let mut c = conn_established(cfg);
    feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ + 1,
            ack: LOCAL_SEQ + 1,
            flags: FIN | ACK,
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.state(), State::CloseWait);
    expect(
        &mut c,
        0,
        TcpRepr {
            seq: LOCAL_SEQ + 1,
            ack: REMOTE_SEQ + 2,
            flags: ACK,
            ..RECV_TEMPL
        },
        &[],
    );
    c
}

/// LAST-ACK: CLOSE-WAIT, then close(); FIN sent.
pub fn conn_last_ack(cfg: Config) -> Conn {
    let mut c = conn_close_wait(cfg);
    c.close();
    expect(
        &mut c,
        0,
        TcpRepr {
            seq: LOCAL_SEQ + 1,
            ack: REMOTE_SEQ + 2,
            flags: FIN | ACK,
            ..RECV_TEMPL
        },
        &[],
    );
    assert_eq!(c.state(), State::LastAck);
    c
}

/// CLOSING: FIN-WAIT-1, then the peer's FIN without ACK of ours.
pub fn conn_closing(cfg: Config) -> Conn {
    let mut c = conn_fin_wait_1(cfg);
    feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ + 1,
            ack: LOCAL_SEQ + 1,
            flags: FIN | ACK,
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.state(), State::Closing);
    expect(
        &mut c,
        0,
        TcpRepr {
            seq: LOCAL_SEQ + 2,
            ack: REMOTE_SEQ + 2,
            flags: ACK,
            ..RECV_TEMPL
        },
        &[],
    );
    c
}

/// TIME-WAIT via FIN-WAIT-2 at time 0.
pub fn conn_time_wait(cfg: Config) -> Conn {
    let mut c = conn_fin_wait_2(cfg);
    feed(
        &mut c,
        0,
        TcpRepr {
            seq: REMOTE_SEQ + 1,
            ack: LOCAL_SEQ + 2,
            flags: FIN | ACK,
            ..SEND_TEMPL
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.state(), State::TimeWait);
    expect(
        &mut c,
        0,
        TcpRepr {
            seq: LOCAL_SEQ + 2,
            ack: REMOTE_SEQ + 2,
            flags: ACK,
            ..RECV_TEMPL
        },
        &[],
    );
    c
}

/// An ACK from the peer in ESTABLISHED acking `acked` of our bytes, with
/// its own `rseq` offset.
pub fn ack_in(rseq: u32, acked: u32) -> TcpRepr {
    TcpRepr {
        seq: REMOTE_SEQ + 1 + rseq,
        ack: LOCAL_SEQ + 1 + acked,
        flags: ACK,
        ..SEND_TEMPL
    }
}

/// The pure ACK the connection sends in ESTABLISHED.
pub fn ack_out(sent: u32, rcvd: u32) -> TcpRepr {
    TcpRepr {
        seq: LOCAL_SEQ + 1 + sent,
        ack: REMOTE_SEQ + 1 + rcvd,
        flags: ACK,
        ..RECV_TEMPL
    }
}

/// Deterministic test data.
pub fn data(n: usize, salt: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt))
        .collect()
}
