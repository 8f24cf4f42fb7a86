//! Passive open through a [`Listener`] (RFC 9293 §3.10.7.2, LISTEN): the
//! SYN queue, the accept queue, SYN cookies (RFC 4987 §3.6), SYN-ACK
//! retransmission, RST handling, and random segment sequences.

use std::net::SocketAddrV4;

use crate::util::*;
use lazynet::proto::tcp::cookie;
use lazynet::proto::tcp::{ListenConfig, ListenDrop, ListenOutput, Listener, Secret};
use proptest::prelude::*;

const SECRET_KEY: [u8; 16] = *b"listen-test-key.";

fn secret() -> Secret {
    Secret::new(SECRET_KEY)
}

fn lcfg() -> ListenConfig {
    ListenConfig {
        backlog: 4,
        syn_queue: 4,
        syn_cookies: false,
        synack_retries: 2,
        reply_queue: 4,
    }
}

fn listener(l: ListenConfig) -> Listener {
    Listener::new(l, cfg(), LOCAL, &secret())
}

/// The n-th remote peer (port 49500 + n).
fn peer(n: u16) -> SocketAddrV4 {
    SocketAddrV4::new(*REMOTE.ip(), 49500 + n)
}

fn syn_from(n: u16) -> TcpRepr {
    TcpRepr {
        src_port: 49500 + n,
        ..syn_in()
    }
}

fn ack_from(n: u16, ack: SeqNumber) -> TcpRepr {
    TcpRepr {
        src_port: 49500 + n,
        seq: REMOTE_SEQ + 1,
        ack,
        flags: ACK,
        ..SEND_TEMPL
    }
}

fn input(l: &mut Listener, now: u64, from: SocketAddrV4, r: TcpRepr, data: &[u8]) -> ListenOutput {
    let r = TcpRepr {
        payload_len: data.len(),
        ..r
    };
    let o = l.handle_segment(now, from, &r, data, &secret());
    l.check_invariants().expect("listener invariants");
    o
}

fn drain(l: &mut Listener, now: u64) -> Vec<(SocketAddrV4, TcpRepr, Vec<u8>)> {
    let mut v = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Some((to, r)) = l.poll_transmit(now, &mut buf) {
        v.push((to, r, buf[..r.payload_len].to_vec()));
        assert!(v.len() < 1000, "poll_transmit does not end");
    }
    l.check_invariants().expect("listener invariants");
    v
}

/// The SYN-ACK the listener sends `n` (the only segment pending).
#[track_caller]
fn synack_to(l: &mut Listener, now: u64, n: u16) -> TcpRepr {
    let out = drain(l, now);
    assert_eq!(out.len(), 1, "{out:?}");
    let (to, r, _) = out[0];
    assert_eq!(to, peer(n));
    assert_eq!(r.flags, SYN | ACK);
    assert_eq!(r.ack, REMOTE_SEQ + 1);
    r
}

/// Opens and completes the handshake for peer `n`.
fn establish(l: &mut Listener, now: u64, n: u16) {
    assert_eq!(
        input(l, now, peer(n), syn_from(n), &[]),
        ListenOutput::HalfOpen
    );
    let sa = synack_to(l, now, n);
    assert_eq!(
        input(l, now, peer(n), ack_from(n, sa.seq + 1), &[]),
        ListenOutput::Established
    );
}

// ---- Tests for the LISTEN state: handshake to accept ----

#[test]
fn handshake_to_accept() {
    let mut l = listener(lcfg());
    assert_eq!(
        input(&mut l, 0, REMOTE, syn_in(), &[]),
        ListenOutput::HalfOpen
    );
    assert_eq!(l.syn_queue_len(), 1);
    let sa = synack_to(&mut l, 0, 0);
    // RFC 6528: the ISS comes from the keyed hash.
    assert_eq!(sa.seq, secret().isn(LOCAL, REMOTE, 0));
    assert_eq!(sa.mss, Some(1000));
    assert_eq!(l.accept().map(|_| ()), None);
    assert_eq!(
        input(&mut l, 5 * MS, REMOTE, ack_from(0, sa.seq + 1), &[]),
        ListenOutput::Established
    );
    assert_eq!(l.syn_queue_len(), 0);
    assert_eq!(l.accept_queue_len(), 1);
    let (from, c) = l.accept().expect("accepted");
    assert_eq!(from, REMOTE);
    assert_eq!(c.state(), State::Established);
    assert_eq!(c.snd_una(), sa.seq + 1);
    assert_eq!(c.rcv_nxt(), REMOTE_SEQ + 1);
    assert!(l.accept().is_none());
    assert_eq!(l.counters().accepted, 1);
    assert_eq!(l.counters().established, 1);
    assert!(drain(&mut l, 5 * MS).is_empty());
}

#[test]
fn final_ack_with_data_is_buffered_for_accept() {
    let mut l = listener(lcfg());
    input(&mut l, 0, REMOTE, syn_in(), &[]);
    let sa = synack_to(&mut l, 0, 0);
    let o = input(&mut l, 0, REMOTE, ack_from(0, sa.seq + 1), b"hello");
    assert_eq!(o, ListenOutput::Established);
    // Data after ESTABLISHED but before accept goes to the queued connection.
    let more = TcpRepr {
        seq: REMOTE_SEQ + 6,
        ..ack_from(0, sa.seq + 1)
    };
    assert_eq!(
        input(&mut l, 0, REMOTE, more, b" you"),
        ListenOutput::Delivered
    );
    let (_, mut c) = l.accept().unwrap();
    let mut buf = [0u8; 32];
    let n = c.recv(&mut buf);
    assert_eq!(&buf[..n], b"hello you");
}

#[test]
fn several_peers_accepted_in_order() {
    let mut l = listener(lcfg());
    for n in 0..3 {
        input(&mut l, 0, peer(n), syn_from(n), &[]);
    }
    let out = drain(&mut l, 0);
    assert_eq!(out.len(), 3);
    // Distinct 4-tuples get unrelated ISSs.
    assert_ne!(out[0].1.seq, out[1].1.seq);
    for n in [2u16, 0, 1] {
        let sa = out.iter().find(|o| o.0 == peer(n)).unwrap().1;
        assert_eq!(
            input(&mut l, 0, peer(n), ack_from(n, sa.seq + 1), &[]),
            ListenOutput::Established
        );
    }
    let order: Vec<_> = std::iter::from_fn(|| l.accept().map(|(r, _)| r)).collect();
    assert_eq!(order, vec![peer(2), peer(0), peer(1)]);
}

// ---- Accept queue (backlog) full ----

#[test]
fn backlog_full_drops_syn_and_holds_final_ack() {
    let mut l = listener(ListenConfig {
        backlog: 1,
        ..lcfg()
    });
    input(&mut l, 0, peer(0), syn_from(0), &[]);
    input(&mut l, 0, peer(1), syn_from(1), &[]);
    let out = drain(&mut l, 0);
    let iss = |n| out.iter().find(|o| o.0 == peer(n)).unwrap().1.seq;
    assert_eq!(
        input(&mut l, 0, peer(0), ack_from(0, iss(0) + 1), &[]),
        ListenOutput::Established
    );
    assert!(l.accept_queue_full());
    // Linux semantics: the final ACK is dropped, the entry stays half-open.
    assert_eq!(
        input(&mut l, 0, peer(1), ack_from(1, iss(1) + 1), &[]),
        ListenOutput::Dropped(ListenDrop::AcceptQueueFull)
    );
    assert_eq!(l.syn_queue_len(), 1);
    // New SYNs are dropped while the accept queue is full.
    assert_eq!(
        input(&mut l, 0, peer(2), syn_from(2), &[]),
        ListenOutput::Dropped(ListenDrop::AcceptQueueFull)
    );
    assert_eq!(l.counters().drop_count(ListenDrop::AcceptQueueFull), 2);
    // Room again: the peer's next ACK completes the handshake.
    assert!(l.accept().is_some());
    assert!(!l.accept_queue_full());
    assert_eq!(
        input(&mut l, MS, peer(1), ack_from(1, iss(1) + 1), &[]),
        ListenOutput::Established
    );
    assert_eq!(l.accept().unwrap().0, peer(1));
}

#[test]
fn backlog_full_half_open_keeps_retransmitting_synack() {
    let mut l = listener(ListenConfig {
        backlog: 1,
        ..lcfg()
    });
    input(&mut l, 0, peer(1), syn_from(1), &[]);
    let sa = synack_to(&mut l, 0, 1);
    establish(&mut l, 0, 0);
    assert_eq!(
        input(&mut l, 0, peer(1), ack_from(1, sa.seq + 1), &[]),
        ListenOutput::Dropped(ListenDrop::AcceptQueueFull)
    );
    assert!(l.poll_timeout().is_some());
    // RTO (initial 1 s) later the SYN-ACK goes again.
    l.handle_timeout(SEC + MS);
    let out = drain(&mut l, SEC + MS);
    let again: Vec<_> = out.iter().filter(|o| o.1.flags == SYN | ACK).collect();
    assert_eq!(again.len(), 1, "{out:?}");
    assert_eq!(again[0].0, peer(1));
    assert_eq!(again[0].1.seq, sa.seq);
    assert_eq!(l.syn_queue_len(), 1);
}

// ---- SYN queue full ----

#[test]
fn syn_queue_full_without_cookies_drops() {
    let mut l = listener(ListenConfig {
        syn_queue: 2,
        ..lcfg()
    });
    input(&mut l, 0, peer(0), syn_from(0), &[]);
    input(&mut l, 0, peer(1), syn_from(1), &[]);
    assert_eq!(
        input(&mut l, 0, peer(2), syn_from(2), &[]),
        ListenOutput::Dropped(ListenDrop::SynQueueFull)
    );
    assert_eq!(l.syn_queue_len(), 2);
    assert_eq!(l.counters().drop_count(ListenDrop::SynQueueFull), 1);
    assert_eq!(drain(&mut l, 0).len(), 2);
}

fn cookie_listener() -> Listener {
    listener(ListenConfig {
        syn_queue: 1,
        syn_cookies: true,
        ..lcfg()
    })
}

#[test]
fn syn_queue_full_with_cookies_sends_stateless_synack() {
    let mut l = cookie_listener();
    input(&mut l, 0, peer(0), syn_from(0), &[]);
    drain(&mut l, 0);
    let syn = TcpRepr {
        mss: Some(1460),
        window_scale: Some(7),
        sack_permitted: true,
        timestamps: Some(Timestamps { tsval: 1, tsecr: 0 }),
        ..syn_from(1)
    };
    assert_eq!(
        input(&mut l, 0, peer(1), syn, &[]),
        ListenOutput::CookieSent
    );
    assert_eq!(l.syn_queue_len(), 1);
    let out = drain(&mut l, 0);
    assert_eq!(out.len(), 1);
    let (to, sa, _) = out[0];
    assert_eq!(to, peer(1));
    // Only MSS: no window scale, SACK-permitted or timestamps.
    assert_eq!(
        sa,
        TcpRepr {
            src_port: 80,
            dst_port: 49501,
            seq: sa.seq,
            ack: REMOTE_SEQ + 1,
            flags: SYN | ACK,
            window: 4096,
            mss: Some(1000),
            ..TcpRepr::EMPTY
        }
    );
    assert_eq!(
        cookie::validate(&secret(), LOCAL, peer(1), sa.seq + 1, REMOTE_SEQ + 1, 0),
        Some(1460)
    );
    // The final ACK creates the connection directly in the accept queue.
    assert_eq!(
        input(&mut l, 10 * MS, peer(1), ack_from(1, sa.seq + 1), b"GET"),
        ListenOutput::Established
    );
    assert_eq!(l.syn_queue_len(), 1);
    let (from, mut c) = l.accept().unwrap();
    assert_eq!(from, peer(1));
    assert_eq!(c.state(), State::Established);
    assert_eq!(c.eff_mss(), 1000);
    assert!(!c.timestamps_enabled() && !c.sack_enabled());
    assert_eq!(c.send_wscale(), 0);
    let mut buf = [0u8; 8];
    assert_eq!(c.recv(&mut buf), 3);
    assert_eq!(l.counters().cookies_sent, 1);
    assert_eq!(l.counters().cookies_accepted, 1);
}

/// A cookie listener with window scaling (256 KiB buffer: shift 3),
/// timestamps and SACK on.
fn cookie_listener_with_options() -> Listener {
    let tcp = Config {
        recv_buf: 256 * 1024,
        window_scale: true,
        timestamps: true,
        sack: true,
        ..cfg()
    };
    Listener::new(
        ListenConfig {
            syn_queue: 1,
            syn_cookies: true,
            ..lcfg()
        },
        tcp,
        LOCAL,
        &secret(),
    )
}

/// Fills the SYN queue (peer 0) so that the next SYN gets a cookie.
fn fill_syn_queue(l: &mut Listener) {
    input(l, 0, peer(0), syn_from(0), &[]);
    drain(l, 0);
}

/// Peer 1's SYN offering MSS 1460, window shift 7, SACK and, if given,
/// timestamps with `tsval`.
fn syn_with_options(tsval: Option<u32>) -> TcpRepr {
    TcpRepr {
        mss: Some(1460),
        window_scale: Some(7),
        sack_permitted: true,
        timestamps: tsval.map(|tsval| Timestamps { tsval, tsecr: 0 }),
        ..syn_from(1)
    }
}

/// Fills the SYN queue, then sends peer 1's SYN with options and TSval
/// 777 at `now`; returns the cookie SYN-ACK.
fn cookie_synack_with_options(l: &mut Listener, now: u64) -> TcpRepr {
    fill_syn_queue(l);
    let syn = syn_with_options(Some(777));
    assert_eq!(input(l, now, peer(1), syn, &[]), ListenOutput::CookieSent);
    drain(l, now)[0].1
}

#[test]
fn cookie_keeps_window_scale_and_sack_in_the_timestamp() {
    let mut l = cookie_listener_with_options();
    let now = 5 * SEC;
    let sa = cookie_synack_with_options(&mut l, now);
    // The SYN-ACK offers what a SYN-queue entry would: our shift, SACK,
    // and a TSval no later than the peer's clock (5000 ms from its
    // offset) echoing the SYN's.
    assert_eq!(sa.window_scale, Some(3));
    assert!(sa.sack_permitted);
    let ts = sa.timestamps.expect("timestamps");
    assert_eq!(ts.tsecr, 777);
    let clock = 5000u32.wrapping_add(secret().ts_offset(LOCAL, peer(1)));
    assert!(clock.wrapping_sub(ts.tsval) < 64, "{}", ts.tsval);
    // The final ACK echoes it; its window is in the peer's units (<< 7).
    let ack = TcpRepr {
        window: 100,
        timestamps: Some(Timestamps {
            tsval: 780,
            tsecr: ts.tsval,
        }),
        ..ack_from(1, sa.seq + 1)
    };
    let later = now + 40 * MS;
    assert_eq!(
        input(&mut l, later, peer(1), ack, b"GET"),
        ListenOutput::Established
    );
    let (_, mut c) = l.accept().unwrap();
    assert_eq!(c.state(), State::Established);
    // Our MSS (1000) less the 12 bytes of the timestamp option.
    assert_eq!(c.eff_mss(), 988);
    assert!(c.timestamps_enabled() && c.sack_enabled());
    assert_eq!((c.send_wscale(), c.recv_wscale()), (7, 3));
    // Our window goes out scaled, and our timestamps go on from the clock.
    let mut buf = [0u8; 8];
    assert_eq!(c.recv(&mut buf), 3);
    let mut out = [0u8; 64];
    let r = c.poll_transmit(later, &mut out).expect("ACK of the data");
    assert!(u32::from(r.window) << 3 > 65535, "window {}", r.window);
    let t = r.timestamps.expect("timestamps");
    assert_eq!(t.tsecr, 780);
    assert!(t.tsval >= ts.tsval);
    assert_eq!(l.counters().cookies_accepted, 1);
}

/// RFC 7323 §5.4: each passive connection's TSvals count from an offset
/// of its own (a keyed hash of the 4-tuple, as an active open's), from
/// the SYN-ACK on, so they reveal neither the clock nor other
/// connections; the same 4-tuple gets the same offset, so a later
/// incarnation's TSvals continue above the last (RFC 6191 §2).
#[test]
fn passive_connections_count_timestamps_from_their_own_offsets() {
    let mut l = Listener::new(lcfg(), Config::default(), LOCAL, &secret());
    let now = 7 * SEC;
    let clock = (now / MS) as u32;
    let syn = |n: u16| TcpRepr {
        src_port: 49500 + n,
        timestamps: Some(Timestamps {
            tsval: 900,
            tsecr: 0,
        }),
        ..syn_in()
    };
    let mut tsvals = Vec::new();
    for n in 1..=2 {
        assert_eq!(
            input(&mut l, now, peer(n), syn(n), &[]),
            ListenOutput::HalfOpen
        );
        let sa = synack_to(&mut l, now, n);
        let ts = sa.timestamps.expect("timestamps");
        let off = secret().ts_offset(LOCAL, peer(n));
        assert_eq!(ts.tsval, clock.wrapping_add(off), "peer {n}");
        assert_ne!(ts.tsval, clock, "peer {n}: the bare clock");
        tsvals.push(ts.tsval);
        let ack = TcpRepr {
            timestamps: Some(Timestamps {
                tsval: 901,
                tsecr: ts.tsval,
            }),
            ..ack_from(n, sa.seq + 1)
        };
        assert_eq!(
            input(&mut l, now, peer(n), ack, &[]),
            ListenOutput::Established
        );
    }
    assert_ne!(tsvals[0], tsvals[1], "two peers share an offset");
    // The accepted connections go on from their SYN-ACK's offset.
    let later = now + 250 * MS;
    for n in 1..=2 {
        let (remote, mut c) = l.accept().unwrap();
        assert_eq!(remote, peer(n));
        c.send(b"hi");
        let mut out = [0u8; 64];
        let r = c.poll_transmit(later, &mut out).expect("data");
        let ts = r.timestamps.expect("timestamps");
        assert_eq!(ts.tsval, tsvals[usize::from(n - 1)].wrapping_add(250));
    }
}

/// RFC 1122 §4.2.2.13 (a): a SYN a TIME-WAIT entry let through gets an
/// ISS above every sequence number of the old incarnation (at least its
/// SND.NXT + 65537, as Linux); RFC 6528's ISS stands when it is already
/// beyond that.
#[test]
fn reopening_syn_gets_an_iss_above_the_old_incarnation() {
    let mut l = listener(lcfg());
    let now = 3 * SEC;
    // The old incarnation sent far more than the ISN clock moved.
    let isn = secret().isn(LOCAL, peer(1), now);
    let old = isn + 1_000_000;
    assert_eq!(
        l.handle_reopening_syn(now, peer(1), &syn_from(1), &[], &secret(), old),
        ListenOutput::HalfOpen
    );
    let sa = synack_to(&mut l, now, 1);
    assert_eq!(sa.seq, old + 65537);
    assert!(sa.seq.diff(old) > 0);
    // The handshake completes from that ISS.
    assert_eq!(
        input(&mut l, now, peer(1), ack_from(1, sa.seq + 1), &[]),
        ListenOutput::Established
    );
    let (_, c) = l.accept().unwrap();
    assert_eq!(c.snd_una(), sa.seq + 1);
    // An old incarnation well behind the clock: RFC 6528's ISS.
    let isn = secret().isn(LOCAL, peer(2), now);
    let old = isn + (u32::MAX - 199_999);
    assert_eq!(
        l.handle_reopening_syn(now, peer(2), &syn_from(2), &[], &secret(), old),
        ListenOutput::HalfOpen
    );
    assert_eq!(synack_to(&mut l, now, 2).seq, isn);
}

#[test]
fn syn_queue_of_zero_with_cookies_answers_every_syn_with_a_cookie() {
    let mut l = listener(ListenConfig {
        syn_queue: 0,
        syn_cookies: true,
        ..lcfg()
    });
    assert_eq!(
        input(&mut l, 0, peer(1), syn_from(1), &[]),
        ListenOutput::CookieSent
    );
    assert_eq!(l.syn_queue_len(), 0);
    let sa = drain(&mut l, 0)[0].1;
    assert_eq!(
        input(&mut l, 0, peer(1), ack_from(1, sa.seq + 1), &[]),
        ListenOutput::Established
    );
    // Without cookies a SYN queue cannot be empty: it holds at least one.
    let mut l = listener(ListenConfig {
        syn_queue: 0,
        ..lcfg()
    });
    assert_eq!(
        input(&mut l, 0, peer(1), syn_from(1), &[]),
        ListenOutput::HalfOpen
    );
}

#[test]
fn cookie_without_timestamps_offers_mss_only() {
    let mut l = cookie_listener_with_options();
    fill_syn_queue(&mut l);
    input(&mut l, 0, peer(1), syn_with_options(None), &[]);
    let sa = drain(&mut l, 0)[0].1;
    // Nothing could carry the peer's shift back: no options offered.
    assert_eq!(sa.window_scale, None);
    assert!(!sa.sack_permitted && sa.timestamps.is_none());
    assert_eq!(
        input(&mut l, 0, peer(1), ack_from(1, sa.seq + 1), &[]),
        ListenOutput::Established
    );
    let (_, c) = l.accept().unwrap();
    assert!(!c.timestamps_enabled() && !c.sack_enabled());
    assert_eq!((c.send_wscale(), c.recv_wscale()), (0, 0));
}

#[test]
fn cookie_ack_with_a_foreign_echo_gets_no_options() {
    let mut l = cookie_listener_with_options();
    let now = 5 * SEC;
    let sa = cookie_synack_with_options(&mut l, now);
    // A TSecr from the future is no TSval of ours: the cookie still
    // opens the connection (its ISS is valid), with MSS only.
    let ack = TcpRepr {
        timestamps: Some(Timestamps {
            tsval: 780,
            tsecr: 9_000_000,
        }),
        ..ack_from(1, sa.seq + 1)
    };
    assert_eq!(
        input(&mut l, now, peer(1), ack, &[]),
        ListenOutput::Established
    );
    let (_, c) = l.accept().unwrap();
    assert!(!c.timestamps_enabled() && !c.sack_enabled());
    assert_eq!(c.send_wscale(), 0);
}

#[test]
fn cookie_mss_rounds_down_to_table() {
    let mut l = cookie_listener();
    input(&mut l, 0, peer(0), syn_from(0), &[]);
    drain(&mut l, 0);
    input(
        &mut l,
        0,
        peer(1),
        TcpRepr {
            mss: Some(600),
            ..syn_from(1)
        },
        &[],
    );
    let sa = drain(&mut l, 0)[0].1;
    input(&mut l, 0, peer(1), ack_from(1, sa.seq + 1), &[]);
    assert_eq!(l.accept().unwrap().1.eff_mss(), 536);
}

#[test]
fn forged_cookie_ack_gets_rst() {
    let mut l = cookie_listener();
    let bad = ack_from(3, SeqNumber(0xdead_beef));
    assert_eq!(input(&mut l, 0, peer(3), bad, &[]), ListenOutput::Reset);
    let out = drain(&mut l, 0);
    assert_eq!(
        out[0].1,
        TcpRepr {
            src_port: 80,
            dst_port: 49503,
            seq: SeqNumber(0xdead_beef),
            flags: RST,
            ..TcpRepr::EMPTY
        }
    );
    assert_eq!(l.accept_queue_len(), 0);
    assert_eq!(l.counters().drop_count(ListenDrop::BadCookie), 1);
}

#[test]
fn expired_cookie_refused() {
    let mut l = cookie_listener();
    input(&mut l, 0, peer(0), syn_from(0), &[]);
    drain(&mut l, 0);
    input(&mut l, 0, peer(1), syn_from(1), &[]);
    let sa = drain(&mut l, 0)[0].1;
    let late = 2 * cookie::PERIOD_NS;
    // Keep the half-open entry from timing out to keep the queue full is not
    // needed: an ACK without an entry is checked as a cookie either way.
    assert_eq!(
        input(&mut l, late, peer(1), ack_from(1, sa.seq + 1), &[]),
        ListenOutput::Reset
    );
    assert_eq!(l.accept_queue_len(), 0);
}

#[test]
fn cookie_ack_from_other_tuple_refused() {
    let mut l = cookie_listener();
    input(&mut l, 0, peer(0), syn_from(0), &[]);
    drain(&mut l, 0);
    input(&mut l, 0, peer(1), syn_from(1), &[]);
    let sa = drain(&mut l, 0)[0].1;
    assert_eq!(
        input(&mut l, 0, peer(2), ack_from(2, sa.seq + 1), &[]),
        ListenOutput::Reset
    );
}

#[test]
fn cookie_ack_dropped_when_backlog_full() {
    let mut l = listener(ListenConfig {
        syn_queue: 1,
        backlog: 1,
        syn_cookies: true,
        ..lcfg()
    });
    input(&mut l, 0, peer(0), syn_from(0), &[]);
    drain(&mut l, 0);
    input(&mut l, 0, peer(1), syn_from(1), &[]);
    let sa = drain(&mut l, 0)[0].1;
    establish_other(&mut l);
    assert!(l.accept_queue_full());
    assert_eq!(
        input(&mut l, 0, peer(1), ack_from(1, sa.seq + 1), &[]),
        ListenOutput::Dropped(ListenDrop::AcceptQueueFull)
    );
}

/// Completes peer 0's pending half-open entry (its SYN-ACK already drained).
fn establish_other(l: &mut Listener) {
    let iss = secret().isn(LOCAL, peer(0), 0);
    assert_eq!(
        input(l, 0, peer(0), ack_from(0, iss + 1), &[]),
        ListenOutput::Established
    );
}

#[test]
fn cookie_connection_exchanges_data_with_client() {
    let mut l = cookie_listener();
    // Fill the SYN queue so the client gets a cookie.
    input(&mut l, 0, peer(9), syn_from(9), &[]);
    drain(&mut l, 0);
    let mut cli_cfg = cfg();
    cli_cfg.window_scale = true;
    cli_cfg.timestamps = true;
    cli_cfg.sack = true;
    let mut cli = Connection::connect(cli_cfg, REMOTE, LOCAL, SeqNumber(77), 0);
    let mut buf = vec![0u8; 65536];
    let mut now = 0;
    let mut srv: Option<Connection> = None;
    let mut got_srv = Vec::new();
    let mut got_cli = Vec::new();
    let mut sent = false;
    for _ in 0..200 {
        now += MS;
        // Client -> listener or accepted server connection.
        while let Some(r) = cli.poll_transmit(now, &mut buf) {
            let d = buf[..r.payload_len].to_vec();
            match srv.as_mut() {
                Some(s) => {
                    let _ = s.handle_segment(now, &r, &d);
                }
                None => {
                    input(&mut l, now, REMOTE, r, &d);
                }
            }
        }
        if srv.is_none() {
            if let Some((from, c)) = l.accept() {
                assert_eq!(from, REMOTE);
                srv = Some(c);
            }
        }
        // Listener / server -> client.
        for (to, r, d) in drain(&mut l, now) {
            if to == REMOTE {
                let _ = cli.handle_segment(now, &r, &d);
            }
        }
        if let Some(s) = srv.as_mut() {
            while let Some(r) = s.poll_transmit(now, &mut buf) {
                let d = buf[..r.payload_len].to_vec();
                let _ = cli.handle_segment(now, &r, &d);
            }
            if !sent {
                assert_eq!(s.send(b"from server"), 11);
                assert_eq!(cli.send(b"from client"), 11);
                sent = true;
            }
            let mut b = [0u8; 64];
            let n = s.recv(&mut b);
            got_srv.extend_from_slice(&b[..n]);
        }
        let mut b = [0u8; 64];
        let n = cli.recv(&mut b);
        got_cli.extend_from_slice(&b[..n]);
        if got_srv.len() == 11 && got_cli.len() == 11 {
            break;
        }
    }
    assert_eq!(l.counters().cookies_accepted, 1);
    assert_eq!(cli.state(), State::Established);
    assert!(!cli.timestamps_enabled(), "options other than MSS are lost");
    assert_eq!(got_srv, b"from client");
    assert_eq!(got_cli, b"from server");
}

// ---- SYN-ACK retransmission (RFC 6298 backoff) and give-up ----

#[test]
fn synack_retransmitted_then_given_up() {
    let mut l = listener(lcfg()); // synack_retries: 2
    input(&mut l, 0, REMOTE, syn_in(), &[]);
    let first = synack_to(&mut l, 0, 0);
    let mut times = Vec::new();
    let mut last = 0;
    while let Some(t) = l.poll_timeout() {
        assert!(t > last, "timer must advance");
        last = t;
        l.handle_timeout(t);
        for (_, r, _) in drain(&mut l, t) {
            assert_eq!(r.flags, SYN | ACK);
            assert_eq!(r.seq, first.seq);
            times.push(t);
        }
        assert!(times.len() < 20);
    }
    assert_eq!(times.len(), 2, "{times:?}");
    // Exponential backoff.
    assert!(times[1] - times[0] > times[0]);
    assert_eq!(l.syn_queue_len(), 0);
    assert_eq!(l.counters().synack_timeouts, 1);
    // A late ACK now gets a RST (no entry, no cookies).
    assert_eq!(
        input(&mut l, last, REMOTE, ack_from(0, first.seq + 1), &[]),
        ListenOutput::Reset
    );
}

// ---- RST and duplicate SYN on a half-open entry ----

#[test]
fn rst_removes_half_open() {
    let mut l = listener(lcfg());
    input(&mut l, 0, REMOTE, syn_in(), &[]);
    drain(&mut l, 0);
    let rst = TcpRepr {
        seq: REMOTE_SEQ + 1,
        flags: RST,
        ..SEND_TEMPL
    };
    assert_eq!(input(&mut l, 0, REMOTE, rst, &[]), ListenOutput::Removed);
    assert_eq!(l.syn_queue_len(), 0);
    assert!(drain(&mut l, 0).is_empty());
    assert_eq!(l.poll_timeout(), None);
}

#[test]
fn inexact_rst_on_half_open_challenged() {
    let mut l = listener(lcfg());
    input(&mut l, 0, REMOTE, syn_in(), &[]);
    drain(&mut l, 0);
    let rst = TcpRepr {
        seq: REMOTE_SEQ + 100,
        flags: RST,
        ..SEND_TEMPL
    };
    assert_eq!(
        input(&mut l, 0, REMOTE, rst, &[]),
        ListenOutput::Dropped(ListenDrop::ConnDropped)
    );
    assert_eq!(l.syn_queue_len(), 1);
    let out = drain(&mut l, 0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1.flags, ACK, "RFC 5961 §3.2 challenge ACK");
}

/// RFC 5961 §7: challenge ACKs at most `challenge_ack_limit` per second,
/// counted per half-open entry (a counter shared by the listener would be
/// a side channel, CVE-2016-5696): another entry has its own budget, and a
/// second later the entry has it again.
#[test]
fn challenge_acks_are_limited_per_entry_and_per_second() {
    let c = Config {
        challenge_ack_limit: 3,
        ..cfg()
    };
    let mut l = Listener::new(lcfg(), c, LOCAL, &secret());
    for n in 1..=2 {
        assert_eq!(
            input(&mut l, 0, peer(n), syn_from(n), &[]),
            ListenOutput::HalfOpen
        );
    }
    drain(&mut l, 0);
    // In-window, inexact RSTs: each asks for a challenge ACK.
    let acks = |l: &mut Listener, now: u64, n: u16| {
        let rst = TcpRepr {
            src_port: 49500 + n,
            seq: REMOTE_SEQ + 100,
            flags: RST,
            ..SEND_TEMPL
        };
        let mut k = 0;
        for _ in 0..10 {
            input(l, now, peer(n), rst, &[]);
            k += drain(l, now)
                .iter()
                .filter(|(to, r, _)| *to == peer(n) && r.flags == ACK)
                .count();
        }
        k
    };
    assert_eq!(acks(&mut l, MS, 1), 3);
    assert_eq!(acks(&mut l, 2 * MS, 2), 3, "the other entry's own budget");
    assert_eq!(acks(&mut l, 500 * MS, 1), 0, "the same second");
    assert_eq!(acks(&mut l, SEC + 2 * MS, 1), 3, "the next second");
    assert_eq!(l.syn_queue_len(), 2);
}

#[test]
fn duplicate_syn_resends_synack() {
    let mut l = listener(lcfg()); // synack_retries: 2
    input(&mut l, 0, REMOTE, syn_in(), &[]);
    let sa = synack_to(&mut l, 0, 0);
    for _ in 0..2 {
        assert_eq!(
            input(&mut l, MS, REMOTE, syn_in(), &[]),
            ListenOutput::SynAckResent
        );
        assert_eq!(synack_to(&mut l, MS, 0).seq, sa.seq);
        assert_eq!(l.syn_queue_len(), 1);
    }
    assert_eq!(
        input(&mut l, MS, REMOTE, syn_in(), &[]),
        ListenOutput::Dropped(ListenDrop::DupSynLimit)
    );
    assert!(drain(&mut l, MS).is_empty());
    // The handshake still completes.
    assert_eq!(
        input(&mut l, MS, REMOTE, ack_from(0, sa.seq + 1), &[]),
        ListenOutput::Established
    );
}

#[test]
fn syn_with_new_isn_on_half_open_challenged() {
    let mut l = listener(lcfg());
    input(&mut l, 0, REMOTE, syn_in(), &[]);
    drain(&mut l, 0);
    let syn = TcpRepr {
        seq: REMOTE_SEQ + 5,
        ..syn_in()
    };
    assert_eq!(
        input(&mut l, 0, REMOTE, syn, &[]),
        ListenOutput::Dropped(ListenDrop::ConnDropped)
    );
    assert_eq!(l.syn_queue_len(), 1);
}

#[test]
fn rst_before_accept_removes_queued_connection() {
    let mut l = listener(lcfg());
    input(&mut l, 0, REMOTE, syn_in(), &[]);
    let sa = synack_to(&mut l, 0, 0);
    input(&mut l, 0, REMOTE, ack_from(0, sa.seq + 1), &[]);
    let rst = TcpRepr {
        seq: REMOTE_SEQ + 1,
        flags: RST,
        ..SEND_TEMPL
    };
    assert_eq!(input(&mut l, 0, REMOTE, rst, &[]), ListenOutput::Removed);
    assert!(l.accept().is_none());
}

// ---- Closing the listener (RFC 9293 §3.10.5, ABORT): RSTs for what it holds ----

/// Drains `poll_close`, checking the invariants after every call.
fn close_all(l: &mut Listener, now: u64) -> Vec<(SocketAddrV4, TcpRepr)> {
    let mut v = Vec::new();
    while let Some(r) = l.poll_close(now) {
        l.check_invariants()
            .expect("listener invariants while closing");
        v.push(r);
        assert!(v.len() <= 8, "poll_close bounded by the queues");
    }
    v
}

#[test]
fn close_resets_half_open_entries() {
    let mut l = listener(lcfg());
    let mut iss = Vec::new();
    for n in 0..3 {
        input(&mut l, 0, peer(n), syn_from(n), &[]);
        iss.push(synack_to(&mut l, 0, n).seq);
    }
    assert_eq!(l.syn_queue_len(), 3);
    let out = close_all(&mut l, 10 * MS);
    assert_eq!(out.len(), 3);
    for n in 0..3u16 {
        let (_, r) = out
            .iter()
            .find(|(to, _)| *to == peer(n))
            .expect("a RST for every half-open entry");
        // <SEQ=SND.NXT = ISS + 1><ACK=RCV.NXT = IRS + 1><CTL=RST,ACK>.
        assert_eq!(r.flags, RST | ACK);
        assert_eq!(r.seq, iss[n as usize] + 1);
        assert_eq!(r.ack, REMOTE_SEQ + 1);
        assert_eq!((r.src_port, r.dst_port), (LOCAL.port(), 49500 + n));
        assert_eq!(r.payload_len, 0);
    }
    assert_eq!((l.syn_queue_len(), l.accept_queue_len()), (0, 0));
    assert_eq!(l.counters().close_resets, 3);
    assert_eq!(l.counters().resets_sent, 3);
    assert!(l.poll_timeout().is_none(), "no timer left");
    assert!(drain(&mut l, 20 * MS).is_empty(), "no SYN-ACK left");
}

#[test]
fn close_resets_queued_connections_then_half_open() {
    let mut l = listener(lcfg());
    establish(&mut l, 0, 0);
    establish(&mut l, 0, 1);
    input(&mut l, 0, peer(2), syn_from(2), &[]);
    let iss2 = synack_to(&mut l, 0, 2).seq;
    assert_eq!((l.syn_queue_len(), l.accept_queue_len()), (1, 2));
    let out = close_all(&mut l, 10 * MS);
    assert_eq!(out.len(), 3);
    // Half-open entries first, then the accept queue in order.
    assert_eq!(out[0].0, peer(2));
    assert_eq!(out[0].1.seq, iss2 + 1);
    for (k, n) in [(1, 0u16), (2, 1)] {
        let (to, r) = out[k];
        assert_eq!(to, peer(n));
        assert_eq!(r.flags, RST | ACK);
        // ESTABLISHED, nothing sent since the SYN-ACK: SND.NXT = ISS + 1.
        assert_eq!(r.seq, secret().isn(LOCAL, peer(n), 0) + 1);
        assert_eq!(r.ack, REMOTE_SEQ + 1);
    }
    assert_eq!((l.syn_queue_len(), l.accept_queue_len()), (0, 0));
    assert!(l.accept().is_none());
    assert_eq!(l.counters().close_resets, 3);
    assert!(l.poll_timeout().is_none());
    assert!(drain(&mut l, 20 * MS).is_empty());
}

#[test]
fn close_of_an_empty_listener_sends_nothing() {
    let mut l = listener(lcfg());
    // A pending stateless reply is discarded, not sent as a close RST.
    input(&mut l, 0, peer(0), ack_from(0, SeqNumber(1234)), &[]);
    assert!(close_all(&mut l, 0).is_empty());
    assert_eq!(l.counters().close_resets, 0);
    assert!(drain(&mut l, 0).is_empty());
}

// ---- Segments without an entry (RFC 9293 §3.10.7.2) ----

#[test]
fn no_entry_segments() {
    let mut l = listener(lcfg());
    let rst = TcpRepr {
        flags: RST,
        ..SEND_TEMPL
    };
    assert_eq!(
        input(&mut l, 0, REMOTE, rst, &[]),
        ListenOutput::Dropped(ListenDrop::RstNoEntry)
    );
    let fin = TcpRepr {
        flags: FIN,
        ..SEND_TEMPL
    };
    assert_eq!(
        input(&mut l, 0, REMOTE, fin, &[]),
        ListenOutput::Dropped(ListenDrop::NoSynNoAck)
    );
    assert_eq!(
        input(
            &mut l,
            0,
            REMOTE,
            TcpRepr {
                flags: SYN | FIN,
                ..syn_in()
            },
            &[]
        ),
        ListenOutput::Dropped(ListenDrop::BadSyn)
    );
    assert_eq!(
        input(
            &mut l,
            0,
            REMOTE,
            TcpRepr {
                dst_port: 81,
                ..syn_in()
            },
            &[]
        ),
        ListenOutput::Dropped(ListenDrop::WrongPort)
    );
    let bad_len = TcpRepr {
        payload_len: 3,
        ..syn_in()
    };
    assert_eq!(
        l.handle_segment(0, REMOTE, &bad_len, &[], &secret()),
        ListenOutput::Dropped(ListenDrop::BadLength)
    );
    assert!(drain(&mut l, 0).is_empty());
    // SYN-ACK to a listener: <SEQ=SEG.ACK><CTL=RST>.
    let synack = TcpRepr {
        seq: REMOTE_SEQ,
        ack: SeqNumber(1234),
        flags: SYN | ACK,
        ..SEND_TEMPL
    };
    assert_eq!(input(&mut l, 0, REMOTE, synack, &[]), ListenOutput::Reset);
    let out = drain(&mut l, 0);
    assert_eq!(out[0].1.seq, SeqNumber(1234));
    assert_eq!(out[0].1.flags, RST);
    assert_eq!(l.syn_queue_len(), 0);
}

#[test]
fn reply_queue_bounded() {
    let mut l = listener(ListenConfig {
        reply_queue: 2,
        ..lcfg()
    });
    for n in 0..5 {
        input(&mut l, 0, peer(n), ack_from(n, SeqNumber(5)), &[]);
    }
    assert_eq!(drain(&mut l, 0).len(), 2);
    assert_eq!(l.counters().drop_count(ListenDrop::ReplyQueueFull), 3);
}

#[test]
fn zero_capacities_clamped() {
    let l = listener(ListenConfig {
        backlog: 0,
        syn_queue: 0,
        reply_queue: 0,
        ..lcfg()
    });
    assert_eq!(l.config().backlog, 1);
    assert_eq!(l.config().syn_queue, 1);
    assert!(!l.accept_queue_full());
}

// ---- Random segment sequences ----

#[derive(Debug, Clone)]
enum Op {
    Syn(u16, u32),
    AckSynAck(u16, u32),
    Seg(u16, u8, u32, u32, u8),
    Time(u64),
    Poll,
    Accept,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u16..6, 0u32..3).prop_map(|(n, s)| Op::Syn(n, s)),
        (0u16..6, 0u32..3).prop_map(|(n, d)| Op::AckSynAck(n, d)),
        (0u16..6, any::<u8>(), any::<u32>(), any::<u32>(), 0u8..8)
            .prop_map(|(n, f, s, a, l)| Op::Seg(n, f, s, a, l)),
        (0u64..5_000).prop_map(|ms| Op::Time(ms * MS)),
        Just(Op::Poll),
        Just(Op::Accept),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn random_segments_never_panic(
        ops in prop::collection::vec(op(), 1..80),
        cookies in any::<bool>(),
        backlog in 1usize..4,
        syn_queue in 1usize..4,
    ) {
        let mut l = listener(ListenConfig {
            backlog,
            syn_queue,
            syn_cookies: cookies,
            synack_retries: 2,
            reply_queue: 3,
        });
        let mut now = 0u64;
        let mut last_synack = [SeqNumber(0); 6];
        let data = [7u8; 8];
        for op in ops {
            match op {
                Op::Syn(n, s) => {
                    let r = TcpRepr { seq: REMOTE_SEQ + s, ..syn_from(n) };
                    input(&mut l, now, peer(n), r, &[]);
                }
                Op::AckSynAck(n, d) => {
                    let r = ack_from(n, last_synack[usize::from(n)] + 1);
                    let len = d as usize;
                    input(&mut l, now, peer(n), r, &data[..len]);
                }
                Op::Seg(n, f, s, a, len) => {
                    let r = TcpRepr {
                        src_port: 49500 + n,
                        seq: REMOTE_SEQ + (s % 64),
                        ack: if a % 2 == 0 { last_synack[usize::from(n)] + (a % 8) } else { SeqNumber(a) },
                        flags: TcpFlags(f),
                        window: 1000,
                        ..SEND_TEMPL
                    };
                    input(&mut l, now, peer(n), r, &data[..usize::from(len)]);
                }
                Op::Time(dt) => {
                    now += dt;
                    l.handle_timeout(now);
                    l.check_invariants().unwrap();
                }
                Op::Poll => {
                    for (to, r, _) in drain(&mut l, now) {
                        if r.flags.contains(SYN) {
                            let n = to.port() - 49500;
                            last_synack[usize::from(n)] = r.seq;
                        }
                    }
                }
                Op::Accept => {
                    if let Some((_, c)) = l.accept() {
                        c.check_invariants().unwrap();
                    }
                }
            }
            prop_assert!(l.syn_queue_len() <= syn_queue);
            prop_assert!(l.accept_queue_len() <= backlog);
        }
        // Liveness: once the caller follows the contract (poll after input,
        // run the timers), no half-open entry outlives its retries.
        drain(&mut l, now);
        let end = now + 200 * SEC;
        let mut rounds = 0;
        while let Some(t) = l.poll_timeout() {
            rounds += 1;
            prop_assert!(rounds < 10_000, "timers do not advance");
            if t > end {
                break;
            }
            now = now.max(t);
            l.handle_timeout(now);
            drain(&mut l, now);
        }
        prop_assert_eq!(l.syn_queue_len(), 0);
    }
}

// ---- ISS, options, timers of several entries ----

#[test]
fn iss_advances_with_time_for_same_tuple() {
    let mut l = listener(lcfg());
    input(&mut l, 0, REMOTE, syn_in(), &[]);
    let a = synack_to(&mut l, 0, 0).seq;
    let rst = TcpRepr {
        seq: REMOTE_SEQ + 1,
        flags: RST,
        ..SEND_TEMPL
    };
    input(&mut l, 0, REMOTE, rst, &[]);
    input(&mut l, SEC, REMOTE, syn_in(), &[]);
    let b = synack_to(&mut l, SEC, 0).seq;
    // RFC 6528: M ticks every 4 µs.
    assert_eq!(b, a + 250_000);
}

#[test]
fn options_negotiated_on_normal_path() {
    let mut l = Listener::new(lcfg(), Config::default(), LOCAL, &secret());
    let syn = TcpRepr {
        mss: Some(1460),
        window_scale: Some(2),
        sack_permitted: true,
        timestamps: Some(Timestamps {
            tsval: 100,
            tsecr: 0,
        }),
        ..syn_in()
    };
    input(&mut l, 0, REMOTE, syn, &[]);
    let sa = synack_to(&mut l, 0, 0);
    assert!(sa.window_scale.is_some());
    assert!(sa.sack_permitted);
    let ts = sa.timestamps.expect("timestamps echoed");
    assert_eq!(ts.tsecr, 100);
    let ack = TcpRepr {
        timestamps: Some(Timestamps {
            tsval: 101,
            tsecr: ts.tsval,
        }),
        ..ack_from(0, sa.seq + 1)
    };
    assert_eq!(
        input(&mut l, MS, REMOTE, ack, &[]),
        ListenOutput::Established
    );
    let (_, c) = l.accept().unwrap();
    assert!(c.timestamps_enabled() && c.sack_enabled());
    assert_eq!(c.send_wscale(), 2);
}

#[test]
fn idle_listener_has_no_timer() {
    let mut l = listener(lcfg());
    assert_eq!(l.poll_timeout(), None);
    l.handle_timeout(100 * SEC);
    assert!(drain(&mut l, 100 * SEC).is_empty());
}

#[test]
fn entries_time_out_independently() {
    let mut l = listener(lcfg()); // synack_retries: 2, RTO 1 s then 2 s, 4 s
    input(&mut l, 0, peer(0), syn_from(0), &[]);
    let mut now = 0;
    while now < 8 * SEC {
        if now == 2 * SEC {
            input(&mut l, now, peer(1), syn_from(1), &[]);
        }
        l.handle_timeout(now);
        drain(&mut l, now);
        now += 100 * MS;
    }
    // Peer 0 (SYN at 0) gave up at 7 s; peer 1 (SYN at 2 s) lives until 9 s.
    assert_eq!(l.syn_queue_len(), 1);
    assert_eq!(l.counters().synack_timeouts, 1);
    let iss1 = secret().isn(LOCAL, peer(1), 2 * SEC);
    assert_eq!(
        input(&mut l, now, peer(1), ack_from(1, iss1 + 1), &[]),
        ListenOutput::Established
    );
}

#[test]
fn syn_queue_slot_reused_after_timeout() {
    let mut l = listener(ListenConfig {
        syn_queue: 1,
        ..lcfg()
    });
    input(&mut l, 0, peer(0), syn_from(0), &[]);
    assert_eq!(
        input(&mut l, 0, peer(1), syn_from(1), &[]),
        ListenOutput::Dropped(ListenDrop::SynQueueFull)
    );
    drain(&mut l, 0);
    let mut now = 0;
    while let Some(t) = l.poll_timeout() {
        now = t;
        l.handle_timeout(t);
        drain(&mut l, t);
    }
    assert_eq!(
        input(&mut l, now, peer(1), syn_from(1), &[]),
        ListenOutput::HalfOpen
    );
}

// ---- SYN-RECEIVED: unusual final segments ----

#[test]
fn bad_final_ack_gets_rst_entry_stays() {
    let mut l = listener(lcfg());
    input(&mut l, 0, REMOTE, syn_in(), &[]);
    let sa = synack_to(&mut l, 0, 0);
    // RFC 9293 §3.10.7.4 SYN-RECEIVED: an unacceptable ACK gets
    // <SEQ=SEG.ACK><CTL=RST>; the entry stays.
    assert_eq!(
        input(&mut l, 0, REMOTE, ack_from(0, sa.seq + 100), &[]),
        ListenOutput::Dropped(ListenDrop::ConnDropped)
    );
    let out = drain(&mut l, 0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1.flags, RST);
    assert_eq!(out[0].1.seq, sa.seq + 100);
    assert_eq!(l.syn_queue_len(), 1);
    assert_eq!(
        input(&mut l, 0, REMOTE, ack_from(0, sa.seq + 1), &[]),
        ListenOutput::Established
    );
}

#[test]
fn final_ack_with_fin_queues_close_wait() {
    let mut l = listener(lcfg());
    input(&mut l, 0, REMOTE, syn_in(), &[]);
    let sa = synack_to(&mut l, 0, 0);
    let ackfin = TcpRepr {
        flags: ACK | FIN,
        ..ack_from(0, sa.seq + 1)
    };
    assert_eq!(
        input(&mut l, 0, REMOTE, ackfin, &[]),
        ListenOutput::Established
    );
    let (_, c) = l.accept().unwrap();
    assert_eq!(c.state(), State::CloseWait);
}

#[test]
fn final_ack_without_ack_bit_dropped() {
    let mut l = listener(lcfg());
    input(&mut l, 0, REMOTE, syn_in(), &[]);
    drain(&mut l, 0);
    let noack = TcpRepr {
        seq: REMOTE_SEQ + 1,
        ..SEND_TEMPL
    };
    assert_eq!(
        input(&mut l, 0, REMOTE, noack, b"x"),
        ListenOutput::Dropped(ListenDrop::ConnDropped)
    );
    assert_eq!(l.syn_queue_len(), 1);
}

#[test]
fn syn_for_queued_connection_is_challenged() {
    let mut l = listener(lcfg());
    establish(&mut l, 0, 0);
    assert_eq!(
        input(&mut l, MS, peer(0), syn_from(0), &[]),
        ListenOutput::Dropped(ListenDrop::ConnDropped)
    );
    let out = drain(&mut l, MS);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1.flags, ACK, "RFC 5961 §4.2 challenge ACK");
    assert_eq!(l.accept_queue_len(), 1);
    assert_eq!(l.syn_queue_len(), 0);
}

#[test]
fn drop_reasons_are_distinct_and_counted() {
    let all = [
        ListenDrop::BadLength,
        ListenDrop::WrongPort,
        ListenDrop::SynQueueFull,
        ListenDrop::AcceptQueueFull,
        ListenDrop::ReplyQueueFull,
        ListenDrop::BadSyn,
        ListenDrop::BadCookie,
        ListenDrop::RstNoEntry,
        ListenDrop::NoSynNoAck,
        ListenDrop::ConnDropped,
        ListenDrop::DupSynLimit,
    ];
    assert_eq!(all.len(), ListenDrop::COUNT);
    for (i, d) in all.iter().enumerate() {
        assert_eq!(*d as usize, i);
        assert!(all[..i].iter().all(|o| o.as_str() != d.as_str()));
    }
    assert!(std::mem::size_of::<ListenOutput>() <= 2);
}

// ---- Compact half-open entries: size, many entries, SYN-ACK equivalence ----

/// Peer number `n` of many: distinct addresses and ports.
fn many_peer(n: u32) -> SocketAddrV4 {
    SocketAddrV4::new(
        std::net::Ipv4Addr::from(0x0a01_0000 + (n / 1000)),
        20_000 + (n % 1000) as u16,
    )
}

fn many_syn(n: u32) -> TcpRepr {
    TcpRepr {
        src_port: many_peer(n).port(),
        seq: SeqNumber(n.wrapping_mul(7919)),
        ..syn_in()
    }
}

fn raw_input(l: &mut Listener, now: u64, from: SocketAddrV4, r: TcpRepr) -> ListenOutput {
    l.handle_segment(now, from, &r, &[], &secret())
}

fn big_listener(n: usize, retries: u32) -> Listener {
    listener(ListenConfig {
        backlog: n,
        syn_queue: n,
        syn_cookies: false,
        synack_retries: retries,
        reply_queue: 16,
    })
}

#[test]
fn half_open_entry_is_compact() {
    const { assert!(Listener::HALF_OPEN_BYTES <= 56) };
    // 10,000 half-open entries: 560 KB instead of 10,000 connections with
    // their buffers.
    let n = 10_000u32;
    let mut l = big_listener(n as usize, 2);
    for i in 0..n {
        assert_eq!(
            raw_input(&mut l, 0, many_peer(i), many_syn(i)),
            ListenOutput::HalfOpen
        );
    }
    assert_eq!(l.syn_queue_len(), n as usize);
    l.check_invariants().unwrap();
}

#[test]
fn lookups_with_many_entries() {
    let n = 10_000u32;
    let mut l = big_listener(n as usize, 3);
    for i in 0..n {
        raw_input(&mut l, 0, many_peer(i), many_syn(i));
    }
    let mut buf = [0u8; 64];
    let mut iss = vec![SeqNumber(0); n as usize];
    let mut sent = 0;
    while let Some((to, r)) = l.poll_transmit(0, &mut buf) {
        assert_eq!(r.flags, SYN | ACK);
        let i = (u32::from(*to.ip()) - 0x0a01_0000) * 1000 + u32::from(to.port() - 20_000);
        assert_eq!(r.ack, SeqNumber(i.wrapping_mul(7919)) + 1);
        iss[i as usize] = r.seq;
        sent += 1;
    }
    assert_eq!(sent, n);
    // Duplicate SYNs find their entries.
    for i in (0..n).step_by(101) {
        assert_eq!(
            raw_input(&mut l, MS, many_peer(i), many_syn(i)),
            ListenOutput::SynAckResent
        );
    }
    // Final ACKs for every third peer, in a scattered order.
    let mut done = 0;
    for k in 0..n {
        let i = (k * 7_001) % n;
        if i % 3 != 0 {
            continue;
        }
        let p = many_peer(i);
        let ack = TcpRepr {
            src_port: p.port(),
            seq: SeqNumber(i.wrapping_mul(7919)) + 1,
            ack: iss[i as usize] + 1,
            flags: ACK,
            ..SEND_TEMPL
        };
        assert_eq!(raw_input(&mut l, 2 * MS, p, ack), ListenOutput::Established);
        done += 1;
        // The same ACK again now reaches the queued connection.
        assert_eq!(raw_input(&mut l, 2 * MS, p, ack), ListenOutput::Delivered);
    }
    assert_eq!(l.accept_queue_len(), done);
    assert_eq!(l.syn_queue_len(), n as usize - done);
    l.check_invariants().unwrap();
    // An unknown peer still gets the LISTEN treatment.
    let stranger = many_peer(n + 5);
    let ack = TcpRepr {
        src_port: stranger.port(),
        ack: SeqNumber(1),
        flags: ACK,
        ..SEND_TEMPL
    };
    assert_eq!(
        raw_input(&mut l, 2 * MS, stranger, ack),
        ListenOutput::Reset
    );
    // Accept order is the order of establishment.
    let first = l.accept().unwrap().0;
    assert_eq!(first, many_peer(0));
}

#[test]
fn timers_with_many_entries() {
    // 10,000 entries opened over 10 s: each gets its SYN-ACK retransmitted
    // twice (1 s, then 2 s later) and is removed 4 s after that, on time.
    let n = 10_000u32;
    let mut l = big_listener(n as usize, 2);
    let mut buf = [0u8; 64];
    let mut synacks = 0u32;
    for i in 0..n {
        let t = u64::from(i) * MS;
        raw_input(&mut l, t, many_peer(i), many_syn(i));
        while l.poll_transmit(t, &mut buf).is_some() {
            synacks += 1;
        }
    }
    assert_eq!(synacks, n);
    assert_eq!(l.poll_timeout(), Some(SEC));
    let mut rounds = 0;
    let mut last = 0;
    while let Some(t) = l.poll_timeout() {
        assert!(t >= last, "timer went back");
        last = t;
        l.handle_timeout(t);
        while let Some((_, r)) = l.poll_transmit(t, &mut buf) {
            assert_eq!(r.flags, SYN | ACK);
            synacks += 1;
        }
        rounds += 1;
        assert!(rounds <= 3 * n, "timers do not advance");
        if rounds % 2_500 == 0 {
            l.check_invariants().unwrap();
        }
    }
    assert_eq!(synacks, 3 * n);
    assert_eq!(l.syn_queue_len(), 0);
    assert_eq!(l.counters().synack_timeouts, u64::from(n));
    // The last entry (SYN at n-1 ms) gave up at n-1 ms + 1 + 2 + 4 s.
    assert_eq!(last, u64::from(n - 1) * MS + 7 * SEC);
    l.check_invariants().unwrap();
}

#[test]
fn compact_synack_matches_connection_synack() {
    let cfgs = [
        cfg(),
        Config::default(),
        Config {
            recv_buf: 1 << 20,
            ts_offset: 12345,
            mss: 9000,
            ..Config::default()
        },
        Config {
            sack: false,
            timestamps: false,
            ..Config::default()
        },
    ];
    let syns = [
        syn_in(),
        TcpRepr {
            mss: None,
            window: 65535,
            ..syn_in()
        },
        TcpRepr {
            mss: Some(1460),
            window_scale: Some(9),
            sack_permitted: true,
            timestamps: Some(Timestamps {
                tsval: 4242,
                tsecr: 0,
            }),
            ..syn_in()
        },
        TcpRepr {
            window_scale: Some(20),
            timestamps: Some(Timestamps { tsval: 1, tsecr: 0 }),
            ..syn_in()
        },
    ];
    let now = 1234 * MS;
    for (ci, c) in cfgs.iter().enumerate() {
        for (si, syn) in syns.iter().enumerate() {
            let mut l = Listener::new(lcfg(), *c, LOCAL, &secret());
            input(&mut l, now, REMOTE, *syn, &[]);
            let got = synack_to(&mut l, now, 0);
            let iss = secret().isn(LOCAL, REMOTE, now);
            let mut conn = Connection::accept_syn(
                Config {
                    syn_retries: 2,
                    ts_offset: secret().ts_offset(LOCAL, REMOTE),
                    ..*c
                },
                LOCAL,
                REMOTE,
                syn,
                iss,
                now,
            )
            .unwrap();
            let want = conn.poll_transmit(now, &mut []).unwrap();
            assert_eq!(got, want, "config {ci}, SYN {si}");
        }
    }
}

#[test]
fn paws_ack_on_half_open_matches_connection() {
    // The ACK a half-open entry sends equals the one its connection sends.
    let c = Config::default();
    let syn = TcpRepr {
        window_scale: Some(3),
        timestamps: Some(Timestamps {
            tsval: 500,
            tsecr: 0,
        }),
        ..syn_in()
    };
    let mut l = Listener::new(lcfg(), c, LOCAL, &secret());
    input(&mut l, 0, REMOTE, syn, &[]);
    let sa = synack_to(&mut l, 0, 0);
    let mut conn = Connection::accept_syn(
        Config {
            syn_retries: 2,
            ts_offset: secret().ts_offset(LOCAL, REMOTE),
            ..c
        },
        LOCAL,
        REMOTE,
        &syn,
        sa.seq,
        0,
    )
    .unwrap();
    conn.poll_transmit(0, &mut []).unwrap();
    // PAWS: an old TSval.
    let old = TcpRepr {
        seq: REMOTE_SEQ + 1,
        ack: sa.seq + 1,
        flags: ACK,
        timestamps: Some(Timestamps {
            tsval: 400,
            tsecr: 0,
        }),
        ..SEND_TEMPL
    };
    assert_eq!(
        input(&mut l, 3 * MS, REMOTE, old, b"x"),
        ListenOutput::Dropped(ListenDrop::ConnDropped)
    );
    let out = drain(&mut l, 3 * MS);
    let _ = conn.handle_segment(
        3 * MS,
        &TcpRepr {
            payload_len: 1,
            ..old
        },
        b"x",
    );
    let want = conn.poll_transmit(3 * MS, &mut [0u8; 16]).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1, want);
}

#[test]
fn rtt_from_synack_and_karn_after_retransmission() {
    // No timestamps: the RTT sample is the time from the SYN-ACK to the
    // final ACK, unless the SYN-ACK was retransmitted (Karn); then RFC
    // 6298 §5.7 holds the RTO at 3 s.
    let mut l = listener(lcfg());
    input(&mut l, 0, peer(0), syn_from(0), &[]);
    let sa0 = synack_to(&mut l, 10 * MS, 0);
    input(&mut l, 0, peer(1), syn_from(1), &[]);
    synack_to(&mut l, 10 * MS, 1);
    l.handle_timeout(SEC + 10 * MS);
    assert_eq!(drain(&mut l, SEC + 10 * MS).len(), 2);
    // Peer 0 ACKs the first SYN-ACK late (it was retransmitted since).
    input(
        &mut l,
        SEC + 50 * MS,
        peer(0),
        ack_from(0, sa0.seq + 1),
        &[],
    );
    let (_, c0) = l.accept().unwrap();
    assert_eq!(c0.srtt(), None);
    assert!(c0.rto() >= 3 * SEC, "rto {}", c0.rto());
    // A fresh entry ACKed 30 ms after its only SYN-ACK.
    input(&mut l, 2 * SEC, peer(2), syn_from(2), &[]);
    let sa2 = synack_to(&mut l, 2 * SEC, 2);
    input(
        &mut l,
        2 * SEC + 30 * MS,
        peer(2),
        ack_from(2, sa2.seq + 1),
        &[],
    );
    let (_, c2) = l.accept().unwrap();
    assert_eq!(c2.srtt(), Some(30 * MS));
}

#[test]
fn syn_fin_repeating_isn_resends_synack_bounded() {
    let mut l = listener(lcfg()); // synack_retries: 2
    input(&mut l, 0, REMOTE, syn_in(), &[]);
    let sa = synack_to(&mut l, 0, 0);
    let synfin = TcpRepr {
        flags: SYN | FIN,
        ..syn_in()
    };
    for _ in 0..2 {
        assert_eq!(
            input(&mut l, MS, REMOTE, synfin, &[]),
            ListenOutput::SynAckResent
        );
        assert_eq!(synack_to(&mut l, MS, 0).seq, sa.seq);
    }
    assert_eq!(
        input(&mut l, MS, REMOTE, synfin, &[]),
        ListenOutput::Dropped(ListenDrop::DupSynLimit)
    );
}
