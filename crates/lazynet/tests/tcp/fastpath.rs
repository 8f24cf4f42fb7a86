//! Header prediction (`proto/tcp/conn/fast.rs`): when the fast
//! path is taken and when it is not, segment by segment; then a
//! differential property test: two connections, fast path on and off, fed
//! identical random sequences, must emit identical segments, deliver
//! identical bytes and hold identical TCBs after every step.

use std::cell::Cell;

use crate::util::*;
use lazynet::wire::checksum;
use proptest::prelude::*;
use proptest::test_runner::{Config as PropConfig, TestRunner};

fn hits(c: &Conn) -> u64 {
    c.counters().fast_path
}

/// Feeds `r` and asserts it took the fast path.
#[track_caller]
fn fast(c: &mut Conn, now: u64, r: TcpRepr, data: &[u8]) {
    let before = hits(c);
    feed(c, now, r, data).expect("accepted");
    assert_eq!(hits(c), before + 1, "expected the fast path for {r:?}");
}

/// Feeds `r` and asserts it took the slow path; returns its result.
#[track_caller]
fn slow(c: &mut Conn, now: u64, r: TcpRepr, data: &[u8]) -> Result<(), TcpDrop> {
    let before = hits(c);
    let res = feed(c, now, r, data);
    assert_eq!(hits(c), before, "expected the slow path for {r:?}");
    res
}

/// Sends `n` bytes and transmits them all.
fn send_all(c: &mut Conn, now: u64, n: usize) {
    assert_eq!(c.send(&data(n, 9)), n);
    while poll(c, now).is_some() {}
}

fn ts(v: u32, e: u32) -> Option<Timestamps> {
    Some(Timestamps { tsval: v, tsecr: e })
}

/// ESTABLISHED with timestamps; the peer's TS.Recent is 101.
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

// ---- ESTABLISHED: prediction on ----

#[test]
fn on_in_order_data_with_delayed_ack() {
    let mut c = conn_established(cfg());
    fast(&mut c, 0, ack_in(0, 0), &data(100, 1));
    fast(
        &mut c,
        0,
        TcpRepr {
            flags: ACK | PSH,
            ..ack_in(100, 0)
        },
        &data(50, 2),
    );
    assert_eq!(c.rcv_nxt(), REMOTE_SEQ + 151);
    // RFC 5681 §4.2: less than two full segments: the ACK is delayed.
    expect_none(&mut c, 0);
    assert_eq!(c.poll_timeout(), Some(40 * MS));
    expect(
        &mut c,
        40 * MS,
        TcpRepr {
            window: 4096 - 150,
            ..ack_out(0, 150)
        },
        &[],
    );
    let mut buf = [0u8; 200];
    assert_eq!(c.recv(&mut buf), 150);
    assert_eq!(&buf[..100], &data(100, 1)[..]);
}

#[test]
fn on_in_order_data_acks_every_second_full_segment() {
    let mut c = conn_established(cfg());
    fast(&mut c, 0, ack_in(0, 0), &data(1000, 1));
    expect_none(&mut c, 0);
    fast(&mut c, 0, ack_in(1000, 0), &data(1000, 2));
    expect(
        &mut c,
        0,
        TcpRepr {
            window: 2096,
            ..ack_out(0, 2000)
        },
        &[],
    );
}

#[test]
fn on_pure_ack_of_new_data() {
    let mut c = conn_established(cfg());
    send_all(&mut c, 0, 3000);
    fast(&mut c, 10 * MS, ack_in(0, 1000), &[]);
    assert_eq!(c.snd_una(), LOCAL_SEQ + 1001);
    assert_eq!(c.send_queue(), 2000);
    // Slow start grew the window; the timer restarted from 10 ms.
    assert_eq!(c.congestion().window(), 5000);
    assert_eq!(c.poll_timeout(), Some(210 * MS));
    fast(&mut c, 20 * MS, ack_in(0, 3000), &[]);
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn on_data_with_new_ack() {
    let mut c = conn_established(cfg());
    send_all(&mut c, 0, 500);
    fast(&mut c, 0, ack_in(0, 500), &data(10, 3));
    assert_eq!(c.send_queue(), 0);
    assert_eq!(c.recv_queue(), 10);
}

#[test]
fn on_with_timestamps_updates_ts_recent() {
    let mut c = conn_ts();
    fast(
        &mut c,
        5 * MS,
        TcpRepr {
            timestamps: ts(150, 0),
            ..ack_in(0, 0)
        },
        b"x",
    );
    c.send(b"y");
    // RFC 7323 §4.3: the segment was at Last.ACK.sent: TS.Recent = 150.
    assert_eq!(take(&mut c, 5 * MS).0.timestamps, ts(5, 150));
}

#[test]
fn on_equal_tsval_passes_paws() {
    let mut c = conn_ts();
    fast(
        &mut c,
        0,
        TcpRepr {
            timestamps: ts(101, 0),
            ..ack_in(0, 0)
        },
        b"x",
    );
}

// ---- ESTABLISHED: prediction off for the segment ----

#[test]
fn off_duplicate_ack() {
    let mut c = conn_established(cfg());
    send_all(&mut c, 0, 2000);
    slow(&mut c, 0, ack_in(0, 0), &[]).unwrap();
    // Nothing outstanding, SEG.ACK == SND.UNA: a window probe answer or
    // keep-alive answer, also slow.
    let mut c = conn_established(cfg());
    slow(&mut c, 0, ack_in(0, 0), &[]).unwrap();
}

#[test]
fn off_window_change_then_on() {
    let mut c = conn_established(cfg());
    slow(
        &mut c,
        0,
        TcpRepr {
            window: 4000,
            ..ack_in(0, 0)
        },
        b"ab",
    )
    .unwrap();
    assert_eq!(c.send_window(), 4000);
    fast(
        &mut c,
        0,
        TcpRepr {
            window: 4000,
            ..ack_in(2, 0)
        },
        b"cd",
    );
}

#[test]
fn off_zero_window_then_on_after_reopen() {
    let mut c = conn_established(cfg());
    slow(
        &mut c,
        0,
        TcpRepr {
            window: 0,
            ..ack_in(0, 0)
        },
        &[],
    )
    .unwrap();
    slow(
        &mut c,
        0,
        TcpRepr {
            window: 0,
            ..ack_in(0, 0)
        },
        b"x",
    )
    .unwrap();
    slow(&mut c, 0, ack_in(1, 0), &[]).unwrap(); // reopens
    fast(&mut c, 0, ack_in(1, 0), b"y");
}

#[test]
fn off_out_of_order_queued_then_on_after_hole_filled() {
    let mut c = conn_established(cfg());
    slow(&mut c, 0, ack_in(100, 0), &data(100, 2)).unwrap();
    assert_eq!(c.ooo_intervals().len(), 1);
    // In order, but reassembly is pending: slow (fills the hole).
    slow(&mut c, 0, ack_in(0, 0), &data(100, 1)).unwrap();
    assert!(c.ooo_intervals().is_empty());
    assert_eq!(c.rcv_nxt(), REMOTE_SEQ + 201);
    fast(&mut c, 0, ack_in(200, 0), &data(100, 3));
}

#[test]
fn off_old_and_future_segments() {
    let mut c = conn_established(cfg());
    fast(&mut c, 0, ack_in(0, 0), &data(100, 1));
    // A duplicate (SEG.SEQ < RCV.NXT), then one that overlaps RCV.NXT.
    assert_eq!(
        slow(&mut c, 0, ack_in(0, 0), &data(100, 1)),
        Err(TcpDrop::NotAcceptable)
    );
    slow(&mut c, 0, ack_in(50, 0), &data(100, 1)).unwrap();
    assert_eq!(c.rcv_nxt(), REMOTE_SEQ + 151);
    // Beyond the window.
    assert_eq!(
        slow(&mut c, 0, ack_in(9000, 0), b"z"),
        Err(TcpDrop::NotAcceptable)
    );
}

#[test]
fn off_data_beyond_window() {
    let mut c = conn_established(cfg());
    // The advertised window is 4096: 4097 bytes do not fit entirely.
    slow(&mut c, 0, ack_in(0, 0), &data(4097, 1)).unwrap();
    assert_eq!(c.recv_queue(), 4096);
}

#[test]
fn off_fin_rst_syn_urg() {
    let mut c = conn_established(cfg());
    slow(
        &mut c,
        0,
        TcpRepr {
            flags: ACK | TcpFlags::URG,
            ..ack_in(0, 0)
        },
        b"u",
    )
    .unwrap();
    slow(
        &mut c,
        0,
        TcpRepr {
            flags: ACK | TcpFlags::ECE,
            ..ack_in(1, 0)
        },
        b"e",
    )
    .unwrap();
    assert_eq!(
        slow(
            &mut c,
            0,
            TcpRepr {
                flags: ACK | SYN,
                ..ack_in(2, 0)
            },
            &[]
        ),
        Err(TcpDrop::SynChallenged)
    );
    slow(
        &mut c,
        0,
        TcpRepr {
            flags: ACK | FIN,
            ..ack_in(2, 0)
        },
        b"f",
    )
    .unwrap();
    assert_eq!(c.state(), State::CloseWait);
    // Not ESTABLISHED any more: in-order data after the FIN is not
    // predicted either (it is not valid text).
    slow(&mut c, 0, ack_in(4, 0), &[]).unwrap();
    let mut c = conn_established(cfg());
    slow(
        &mut c,
        0,
        TcpRepr {
            flags: RST,
            ..ack_in(0, 0)
        },
        &[],
    )
    .unwrap();
    assert_eq!(c.state(), State::Closed);
}

#[test]
fn off_no_ack_bit() {
    let mut c = conn_established(cfg());
    assert_eq!(
        slow(
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
}

#[test]
fn off_ack_outside_snd_una_snd_max() {
    let mut c = conn_established(cfg());
    send_all(&mut c, 0, 1000);
    assert_eq!(
        slow(&mut c, 0, ack_in(0, 2000), b"x"),
        Err(TcpDrop::AckUnacceptable)
    );
    fast(&mut c, 0, ack_in(0, 1000), b"x");
    // An old ACK below SND.UNA (still acceptable by RFC 5961 §5.2).
    slow(&mut c, 0, ack_in(1, 500), b"y").unwrap();
}

#[test]
fn off_sack_blocks() {
    let mut c = conn_established(cfg());
    send_all(&mut c, 0, 2000);
    let sack = SackBlocks::new(&[(LOCAL_SEQ + 1001, LOCAL_SEQ + 2001)]).unwrap();
    slow(
        &mut c,
        0,
        TcpRepr {
            sack,
            ..ack_in(0, 500)
        },
        &[],
    )
    .unwrap();
    fast(&mut c, 0, ack_in(0, 2000), &[]);
}

#[test]
fn off_paws_failure_then_on() {
    let mut c = conn_ts();
    assert_eq!(
        slow(
            &mut c,
            0,
            TcpRepr {
                timestamps: ts(50, 0),
                ..ack_in(0, 0)
            },
            b"x"
        ),
        Err(TcpDrop::Paws)
    );
    fast(
        &mut c,
        0,
        TcpRepr {
            timestamps: ts(102, 0),
            ..ack_in(0, 0)
        },
        b"x",
    );
}

#[test]
fn off_missing_timestamp_when_negotiated() {
    let mut c = conn_ts();
    // Accepted by the slow path (deviation: as Linux), never predicted.
    slow(&mut c, 0, ack_in(0, 0), b"x").unwrap();
    assert_eq!(c.recv_queue(), 1);
}

// ---- Loss recovery and retransmission: prediction off until over ----

#[test]
fn off_in_fast_recovery_until_full_ack() {
    let mut c = conn_established(cfg());
    send_all(&mut c, 0, 4000);
    for _ in 0..3 {
        slow(&mut c, 10 * MS, ack_in(0, 0), &[]).unwrap();
    }
    assert!(c.in_recovery());
    while poll(&mut c, 10 * MS).is_some() {}
    // In-order data and a partial ACK during recovery: slow.
    slow(&mut c, 20 * MS, ack_in(0, 0), b"a").unwrap();
    slow(&mut c, 20 * MS, ack_in(1, 1000), &[]).unwrap();
    assert!(c.in_recovery());
    while poll(&mut c, 20 * MS).is_some() {}
    // The full ACK ends recovery (slow); then prediction is back.
    slow(&mut c, 30 * MS, ack_in(1, 4000), &[]).unwrap();
    assert!(!c.in_recovery());
    fast(&mut c, 30 * MS, ack_in(1, 4000), b"b");
}

#[test]
fn off_after_rto_until_snd_nxt_caught_up() {
    let mut c = conn_established(cfg());
    send_all(&mut c, 0, 2000);
    let rto = c.poll_timeout().unwrap();
    timeout(&mut c, rto);
    // SND.NXT rewound to SND.UNA: go-back-N, not predicted.
    assert_eq!(c.snd_nxt(), c.snd_una());
    slow(&mut c, rto, ack_in(0, 1000), &[]).unwrap();
    while poll(&mut c, rto).is_some() {}
    fast(&mut c, rto, ack_in(0, 2000), &[]);
}

#[test]
fn off_after_rto_with_timestamps_until_past_stale_acks() {
    let mut c = conn_ts();
    let t = |n: u32| ts(101 + n, 0);
    c.send(&data(2000, 4));
    while poll(&mut c, 0).is_some() {}
    let rto = c.poll_timeout().unwrap();
    timeout(&mut c, rto);
    while poll(&mut c, rto).is_some() {}
    // ACKs up to what was outstanding at the RTO may echo stale TSvals.
    slow(
        &mut c,
        rto,
        TcpRepr {
            timestamps: t(1),
            ..ack_in(0, 1000)
        },
        &[],
    )
    .unwrap();
    // Past it, data flows fast again.
    c.send(b"more");
    while poll(&mut c, rto).is_some() {}
    slow(
        &mut c,
        rto,
        TcpRepr {
            timestamps: t(2),
            ..ack_in(0, 2002)
        },
        &[],
    )
    .unwrap();
    fast(
        &mut c,
        rto,
        TcpRepr {
            timestamps: t(3),
            ..ack_in(0, 2004)
        },
        &[],
    );
}

// ---- Other states and the switch ----

#[test]
fn off_outside_established() {
    let mut c = conn_fin_wait_1(cfg());
    slow(&mut c, 0, ack_in(0, 0), b"x").unwrap();
    let mut c = conn_close_wait(cfg());
    slow(&mut c, 0, ack_in(1, 0), &[]).unwrap();
    let mut c = conn_syn_received(cfg());
    slow(&mut c, 0, ack_in(0, 0), b"x").unwrap();
    assert_eq!(c.state(), State::Established);
}

#[test]
fn off_when_switched_off() {
    let mut c = conn_established(Config {
        fast_path: false,
        ..cfg()
    });
    slow(&mut c, 0, ack_in(0, 0), b"x").unwrap();
    assert_eq!(c.recv_queue(), 1);
}

// ---- Differential: fast path on == fast path off ----

#[derive(Debug, Clone)]
enum Op {
    /// In-order text from the peer; `ack` selects how much it acks.
    Data {
        len: usize,
        ack: u8,
        psh: bool,
    },
    /// The same, read at once by a reader with `room` bytes of buffer:
    /// `on` places it directly (`direct_ok`/`direct_commit`, or
    /// `direct_commit_part` when it does not all fit) where it may, `off`
    /// queues it and reads `room` bytes with `recv`.
    Direct {
        len: usize,
        ack: u8,
        room: usize,
    },
    /// A pure ACK from the peer.
    Ack {
        ack: u8,
    },
    /// Anything: flags (RST, SYN, FIN only if `keep_ctl`), offsets,
    /// window, timestamps, SACK.
    Odd {
        flags: u8,
        keep_ctl: bool,
        dseq: i16,
        dack: i16,
        window: Option<u16>,
        len: usize,
        ts: u8,
        sack: bool,
    },
    Send(usize),
    Recv(usize),
    Poll,
    Advance(u64),
    Close,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (1usize..1100, any::<u8>(), any::<bool>())
            .prop_map(|(len, ack, psh)| Op::Data { len, ack, psh }),
        8 => (1usize..1100, any::<u8>(), prop_oneof![3 => Just(usize::MAX), 1 => 1usize..1100])
            .prop_map(|(len, ack, room)| Op::Direct { len, ack, room }),
        6 => any::<u8>().prop_map(|ack| Op::Ack { ack }),
        3 => (
            any::<u8>(),
            prop::bool::weighted(0.1),
            -1500i16..3000,
            -1500i16..1500,
            prop::option::weighted(0.3, any::<u16>()),
            0usize..1200,
            any::<u8>(),
            prop::bool::weighted(0.2),
        )
            .prop_map(|(flags, keep_ctl, dseq, dack, window, len, ts, sack)| Op::Odd {
                flags,
                keep_ctl,
                dseq,
                dack,
                window,
                len,
                ts,
                sack,
            }),
        5 => (1usize..3000).prop_map(Op::Send),
        8 => (1usize..4000).prop_map(Op::Recv),
        10 => Just(Op::Poll),
        3 => (0u64..400).prop_map(|ms| Op::Advance(ms * MS)),
        // Rare: after it (as after FIN or RST) nothing is predicted.
        1 => prop::bool::weighted(0.02).prop_map(|c| if c { Op::Close } else { Op::Poll }),
    ]
}

/// A partial sum folded to 16 bits (+0 and −0 alike).
fn fold(mut x: u32) -> u16 {
    while x > 0xffff {
        x = (x & 0xffff) + (x >> 16);
    }
    if x == 0xffff {
        0
    } else {
        x as u16
    }
}

/// The remote peer, as far as the test needs one.
struct Peer {
    /// Next sequence number the peer sends (follows our RCV.NXT).
    nxt: SeqNumber,
    /// Highest SEG.ACK it sent.
    acked: SeqNumber,
    /// Highest sequence number the connection sent.
    max: SeqNumber,
    /// Right edge of the window the connection offered last.
    edge: SeqNumber,
    tsval: u32,
    tsecr: u32,
    window: u16,
}

/// Byte `i` of the peer's stream: the same at any retransmission.
fn stream(s: SeqNumber, len: usize) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (s.0.wrapping_add(i) as u8).wrapping_mul(7).wrapping_add(3))
        .collect()
}

/// Everything but the fast-path switch and its counter, via `Debug`: the
/// whole TCB including buffer contents, timers and congestion state.
fn tcb(c: &Conn) -> String {
    let k = c.counters();
    let s = format!("{c:?}")
        .replace("fast_path: true }", "fast_path: false }")
        .replace(
            &format!(
                "fast_path: {}, fast_tx: {}, direct: {},",
                k.fast_path, k.fast_tx, k.direct
            ),
            "fast_path: 0, fast_tx: 0, direct: 0,",
        );
    // The receive buffer by its length only: direct placement leaves it
    // untouched where `recv` moved its head past bytes it read.
    let at = s.find("rx: Ring {").expect("rx ring in Debug");
    let end = at + s[at..].find('}').expect("end of rx ring");
    format!(
        "{}rx: Ring {{ len: {} }}{}",
        &s[..at],
        c.recv_queue(),
        &s[end + 1..]
    )
}

struct Pair {
    on: Conn,
    off: Conn,
    now: u64,
    peer: Peer,
    ts: bool,
    /// Polls so far (varies the burst size and partial commits).
    turn: u32,
    /// Segments sent by the transmit fast path.
    burst_segs: u64,
    /// Segments placed directly into a reader's buffer.
    direct_segs: u64,
}

impl Pair {
    fn new(ts: bool, ws: bool, sack: bool, nodelay: bool) -> Self {
        let cf = Config {
            mss: 1000,
            send_buf: 4096,
            recv_buf: 4096,
            window_scale: ws,
            timestamps: ts,
            sack,
            nodelay,
            ..Config::default()
        };
        let syn = TcpRepr {
            window_scale: Some(2),
            timestamps: Some(Timestamps {
                tsval: 1000,
                tsecr: 0,
            }),
            sack_permitted: true,
            ..syn_in()
        };
        let mk = |fast_path| {
            Connection::accept_syn(
                Config { fast_path, ..cf },
                LOCAL,
                REMOTE,
                &syn,
                LOCAL_SEQ,
                0,
            )
            .unwrap()
        };
        let mut p = Pair {
            on: mk(true),
            off: mk(false),
            now: 0,
            peer: Peer {
                nxt: REMOTE_SEQ + 1,
                acked: LOCAL_SEQ,
                max: LOCAL_SEQ,
                edge: REMOTE_SEQ + 1,
                tsval: 1000,
                tsecr: 0,
                window: 2000,
            },
            ts,
            turn: 0,
            burst_segs: 0,
            direct_segs: 0,
        };
        p.poll();
        p.seg(ACK, p.peer.nxt, LOCAL_SEQ + 1, 0, None, false);
        assert_eq!(p.on.state(), State::Established);
        p
    }

    fn check(&self) {
        assert_eq!(tcb(&self.on), tcb(&self.off), "TCBs differ");
        self.on.check_invariants().unwrap();
        self.off.check_invariants().unwrap();
    }

    fn poll(&mut self) {
        let mut a = vec![0u8; 2048];
        let mut b = vec![0u8; 2048];
        for _ in 0..64 {
            // The transmit fast path: `on` sends a planned burst, `off`
            // the same segments one `poll_transmit` at a time; sometimes
            // only part of the burst is committed (the stack ran out of
            // buffers).
            self.turn += 1;
            let max = 1 + self.turn as usize % 4;
            if let Some(plan) = self.on.burst_plan(self.now, max) {
                assert!(plan.count >= 1 && plan.count <= max);
                let n = if self.turn % 5 == 0 {
                    plan.count.div_ceil(2)
                } else {
                    plan.count
                };
                for i in 0..n {
                    let ra = plan.repr(i);
                    let sum = self.on.burst_payload(&plan, i, &mut a, self.turn % 2 == 0);
                    let rb = self.off.poll_transmit(self.now, &mut b);
                    assert_eq!(Some(ra), rb, "burst segment {i} differs");
                    assert_eq!(a[..ra.payload_len], b[..ra.payload_len], "payloads differ");
                    if self.turn % 2 == 0 {
                        let want = checksum::partial(&a[..ra.payload_len], 0);
                        assert_eq!(fold(sum), fold(want), "payload sum differs");
                    }
                    self.note(&ra);
                }
                self.on.burst_commit(self.now, &plan, n);
                self.burst_segs += n as u64;
                continue;
            }
            let ra = self.on.poll_transmit(self.now, &mut a);
            let rb = self.off.poll_transmit(self.now, &mut b);
            assert_eq!(ra, rb, "emitted segments differ");
            let Some(r) = ra else { break };
            assert_eq!(a[..r.payload_len], b[..r.payload_len], "payloads differ");
            self.note(&r);
        }
    }

    /// The peer's view of a segment the connection sent.
    fn note(&mut self, r: &TcpRepr) {
        let end = r.seq + r.payload_len as u32 + u32::from(r.flags.contains(FIN));
        if end.diff(self.peer.max) > 0 && !r.flags.contains(RST) {
            self.peer.max = end;
        }
        if let Some(t) = r.timestamps {
            self.peer.tsecr = t.tsval;
        }
        if r.flags.contains(ACK) {
            let scale = if r.flags.contains(SYN) {
                0
            } else {
                self.on.recv_wscale()
            };
            self.peer.edge = r.ack + (u32::from(r.window) << scale);
        }
    }

    /// SEG.ACK chosen by `sel`: mostly all, sometimes none or part.
    fn ack_for(&self, sel: u8) -> SeqNumber {
        let out = self.peer.max.diff(self.peer.acked).max(0) as u32;
        let base = self.peer.acked;
        match sel {
            0..=139 => self.peer.max,
            140..=179 => base,
            _ => base + out * u32::from(sel - 180) / 76,
        }
    }

    fn seg(
        &mut self,
        flags: TcpFlags,
        seq: SeqNumber,
        ack: SeqNumber,
        len: usize,
        window: Option<u16>,
        sack: bool,
    ) {
        self.feed(flags, seq, ack, len, window, sack, 0);
    }

    #[allow(clippy::too_many_arguments)]
    fn feed(
        &mut self,
        flags: TcpFlags,
        seq: SeqNumber,
        ack: SeqNumber,
        len: usize,
        window: Option<u16>,
        sack: bool,
        ts_sel: u8,
    ) {
        self.peer.tsval = self.peer.tsval.wrapping_add(1);
        let timestamps = match ts_sel {
            // Old: PAWS rejects it.
            1..=20 => Some(Timestamps {
                tsval: self.peer.tsval.wrapping_sub(5000),
                tsecr: self.peer.tsecr,
            }),
            // Missing although negotiated.
            21..=30 => None,
            _ if self.ts => Some(Timestamps {
                tsval: self.peer.tsval,
                tsecr: self.peer.tsecr,
            }),
            _ => None,
        };
        if let Some(w) = window {
            self.peer.window = w;
        }
        let sack = if sack {
            SackBlocks::new(&[(ack + 1, ack + 500)]).unwrap()
        } else {
            SackBlocks::EMPTY
        };
        let payload = stream(seq, len);
        let r = TcpRepr {
            seq,
            ack,
            flags,
            window: self.peer.window,
            timestamps,
            sack,
            payload_len: len,
            ..SEND_TEMPL
        };
        let ra = self.on.handle_segment(self.now, &r, &payload);
        let rb = self.off.handle_segment(self.now, &r, &payload);
        assert_eq!(ra, rb, "results differ for {r:?}");
        // The peer learns RCV.NXT and SND.UNA (from our ACKs, eventually).
        self.peer.nxt = self.on.rcv_nxt();
        self.peer.acked = self.on.snd_una();
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::Data { len, ack, psh } => {
                let a = self.ack_for(ack);
                let f = if psh { ACK | PSH } else { ACK };
                // A well-behaved sender stays inside the offered window.
                let avail = self.peer.edge.diff(self.peer.nxt);
                let len = if avail > 0 {
                    len.min(avail as usize)
                } else {
                    len
                };
                self.seg(f, self.peer.nxt, a, len, None, false);
            }
            Op::Direct { len, ack, room } => {
                let a = self.ack_for(ack);
                let avail = self.peer.edge.diff(self.peer.nxt);
                let len = if avail > 0 {
                    len.min(avail as usize)
                } else {
                    len
                };
                let seq = self.peer.nxt;
                self.peer.tsval = self.peer.tsval.wrapping_add(1);
                let r = TcpRepr {
                    seq,
                    ack: a,
                    flags: ACK,
                    window: self.peer.window,
                    timestamps: self.ts.then_some(Timestamps {
                        tsval: self.peer.tsval,
                        tsecr: self.peer.tsecr,
                    }),
                    payload_len: len,
                    ..SEND_TEMPL
                };
                let payload = stream(seq, len);
                assert!(!self.off.direct_ok(&r, len), "direct without fast_path");
                let take = len.min(room);
                if self.on.direct_ok(&r, len) {
                    // A "tail" as long as the text is refused, changing nothing.
                    let before = tcb(&self.on);
                    assert!(!self.on.direct_commit_part(self.now, &r, len, &payload));
                    assert_eq!(
                        tcb(&self.on),
                        before,
                        "a refused part commit changed the TCB"
                    );
                }
                if self.on.direct_ok(&r, len) && self.on.direct_rest_fits(len - take) {
                    if take == len {
                        self.on.direct_commit(self.now, &r, len);
                    } else {
                        assert!(self
                            .on
                            .direct_commit_part(self.now, &r, len, &payload[take..]));
                    }
                    assert_eq!(self.off.handle_segment(self.now, &r, &payload), Ok(()));
                    let mut got = vec![0u8; take];
                    assert_eq!(self.off.recv(&mut got), take, "direct: not all read");
                    assert_eq!(got[..], payload[..take], "direct: other bytes");
                    self.direct_segs += 1;
                } else {
                    let ra = self.on.handle_segment(self.now, &r, &payload);
                    let rb = self.off.handle_segment(self.now, &r, &payload);
                    assert_eq!(ra, rb, "results differ for {r:?}");
                }
                self.peer.nxt = self.on.rcv_nxt();
                self.peer.acked = self.on.snd_una();
            }
            Op::Ack { ack } => {
                let a = self.ack_for(ack);
                self.seg(ACK, self.peer.nxt, a, 0, None, false);
            }
            Op::Odd {
                flags,
                keep_ctl,
                dseq,
                dack,
                window,
                len,
                ts,
                sack,
            } => {
                let mut f = TcpFlags(flags);
                if !keep_ctl {
                    f = TcpFlags(f.0 & !(RST.0 | SYN.0 | FIN.0));
                }
                let s = self.peer.nxt + (dseq as i32 as u32);
                let a = self.peer.acked + (dack as i32 as u32);
                self.feed(f, s, a, len, window, sack, ts);
            }
            Op::Send(n) => {
                let d = vec![0x5a; n];
                assert_eq!(self.on.send(&d), self.off.send(&d));
            }
            Op::Recv(n) => {
                let mut a = vec![0u8; n];
                let mut b = vec![0u8; n];
                let ka = self.on.recv(&mut a);
                let kb = self.off.recv(&mut b);
                assert_eq!((ka, &a[..ka]), (kb, &b[..kb]), "received bytes differ");
            }
            Op::Poll => self.poll(),
            Op::Advance(dt) => {
                self.now += dt;
                let t = self.on.poll_timeout();
                assert_eq!(t, self.off.poll_timeout());
                if t.is_some_and(|t| self.now >= t) {
                    self.on.handle_timeout(self.now);
                    self.off.handle_timeout(self.now);
                }
            }
            Op::Close => {
                self.on.close();
                self.off.close();
            }
        }
    }
}

#[test]
fn differential_fast_path_equals_slow_path() {
    // PROPTEST_CASES overrides, e.g. for a long run in release mode.
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256u32);
    // A manual runner (to sum the hits over all cases) has no source file
    // to persist failures next to; the failing input is printed instead.
    let mut runner = TestRunner::new(PropConfig {
        cases,
        failure_persistence: None,
        ..PropConfig::default()
    });
    let fast_total = Cell::new(0u64);
    let segs_total = Cell::new(0u64);
    let burst_total = Cell::new(0u64);
    let direct_total = Cell::new(0u64);
    let out_total = Cell::new(0u64);
    let strategy = (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(op(), 1..250),
    );
    runner
        .run(&strategy, |(ts, ws, sack, nodelay, ops)| {
            let mut p = Pair::new(ts, ws, sack, nodelay);
            p.check();
            for op in &ops {
                p.step(op);
                p.check();
            }
            fast_total.set(fast_total.get() + p.on.counters().fast_path);
            segs_total.set(segs_total.get() + p.on.counters().segs_in);
            burst_total.set(burst_total.get() + p.burst_segs);
            prop_assert_eq!(p.on.counters().fast_tx, p.burst_segs);
            prop_assert_eq!(p.off.counters().fast_tx, 0);
            prop_assert_eq!(p.on.counters().direct, p.direct_segs);
            direct_total.set(direct_total.get() + p.direct_segs);
            out_total.set(out_total.get() + p.on.counters().segs_out);
            prop_assert_eq!(p.off.counters().fast_path, 0);
            Ok(())
        })
        .unwrap();
    // The property is only worth something if the fast path ran often.
    let (f, s) = (fast_total.get(), segs_total.get());
    eprintln!("fast path taken {f} times of {s} segments");
    assert!(
        f * 3 >= s && f >= 15 * u64::from(cases),
        "fast path taken {f} times of {s} segments"
    );
    // Likewise the transmit fast path.
    let (b, o) = (burst_total.get(), out_total.get());
    eprintln!("{b} of {o} segments sent in bursts");
    let d = direct_total.get();
    eprintln!("{d} segments placed directly");
    assert!(d >= 2 * u64::from(cases), "{d} segments placed directly");
    assert!(
        b * 10 >= o && b >= 2 * u64::from(cases),
        "{b} of {o} segments sent in bursts"
    );
}
