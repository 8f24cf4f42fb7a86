//! Readiness through whole stacks: registrations, level and edge triggers,
//! each readiness bit from the TCP state that sets it (RFC 9293 §3.10.7:
//! data, FIN, reset), listeners and UDP sockets, the bound on one call, and
//! sleeping on the stack's descriptor until the peer sends.

use std::net::{Ipv4Addr, SocketAddrV4};

use lazynet::nic::wirepair::WireEnd;
use lazynet::socket::SocketError;
use lazynet::stack::ready::{Event, Interest, Readiness, Sleep, SocketId, Trigger};
use lazynet::stack::{Stack, TcpStream};

use lazynet::testkit::{connect_accept, pump, Pair, A, B, MS};

fn stacks() -> (Stack<WireEnd>, Stack<WireEnd>) {
    let p = Pair::new();
    (p.a, p.b)
}

/// An established connection A → B:80: (stacks, client, server, now).
fn connected() -> (Stack<WireEnd>, Stack<WireEnd>, TcpStream, TcpStream, u64) {
    let (mut sa, mut sb) = stacks();
    let l = sb
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), None, None)
        .unwrap();
    let mut now = 0;
    let (c, s) = connect_accept(&mut sa, &mut sb, l, 80, &mut now);
    (sa, sb, c, s, now)
}

fn ready_of(stack: &mut Stack<WireEnd>) -> Vec<Event> {
    let mut out = Vec::new();
    stack.ready(&mut out, 64);
    out
}

/// A few rounds of both stacks, a millisecond apart.
fn settle(sa: &mut Stack<WireEnd>, sb: &mut Stack<WireEnd>, now: &mut u64) {
    for _ in 0..5 {
        *now += MS;
        pump(sa, sb, *now);
    }
}

mod established {
    use super::*;

    #[test]
    fn a_new_registration_reports_the_current_state() {
        let (_sa, mut sb, _c, s, _) = connected();
        sb.register(s, 7, Interest::BOTH, Trigger::Edge).unwrap();
        let ev = ready_of(&mut sb);
        assert_eq!(
            ev,
            vec![Event {
                token: 7,
                socket: SocketId::Tcp(s),
                readiness: Readiness::WRITABLE,
            }]
        );
        // Edge: nothing happened since.
        assert!(ready_of(&mut sb).is_empty());
    }

    #[test]
    fn data_makes_it_readable_and_level_keeps_reporting_until_read() {
        let (mut sa, mut sb, c, s, mut now) = connected();
        sb.register(s, 1, Interest::READABLE, Trigger::Level)
            .unwrap();
        assert!(ready_of(&mut sb).is_empty(), "no data yet");
        sa.tcp_mut(c).send(b"hello", now).unwrap();
        settle(&mut sa, &mut sb, &mut now);
        for _ in 0..3 {
            let ev = ready_of(&mut sb);
            assert_eq!(ev.len(), 1);
            assert!(ev[0].readiness.is_readable());
            assert!(!ev[0].readiness.is_writable(), "masked by the interest");
        }
        let mut buf = [0u8; 16];
        assert_eq!(sb.tcp_mut(s).recv(&mut buf, now), Ok(5));
        assert!(ready_of(&mut sb).is_empty(), "read to the end: not ready");
    }

    #[test]
    fn edge_reports_once_per_arrival() {
        let (mut sa, mut sb, c, s, mut now) = connected();
        sb.register(s, 1, Interest::READABLE, Trigger::Edge)
            .unwrap();
        assert!(ready_of(&mut sb).is_empty());
        // Both segments go out at once (no Nagle wait for B's ACK).
        sa.tcp_mut(c).set_nodelay(true).unwrap();
        sa.tcp_mut(c).send(b"one", now).unwrap();
        settle(&mut sa, &mut sb, &mut now);
        assert_eq!(ready_of(&mut sb).len(), 1);
        assert!(ready_of(&mut sb).is_empty(), "not read, but nothing new");
        sa.tcp_mut(c).send(b"two", now).unwrap();
        settle(&mut sa, &mut sb, &mut now);
        let ev = ready_of(&mut sb);
        assert_eq!(ev.len(), 1, "more data: an edge again");
        assert!(ev[0].readiness.is_readable());
    }

    #[test]
    fn writable_returns_when_the_peer_acknowledges() {
        let (mut sa, mut sb, c, s, mut now) = connected();
        sa.register(c, 3, Interest::WRITABLE, Trigger::Edge)
            .unwrap();
        assert_eq!(ready_of(&mut sa).len(), 1);
        // Fill the send buffer without letting B read or acknowledge.
        let chunk = [0x5au8; 4096];
        while sa.tcp_mut(c).send(&chunk, now).is_ok() {}
        assert_eq!(sa.readiness(c), Ok(Readiness::EMPTY));
        assert!(ready_of(&mut sa).is_empty());
        // B reads everything; its ACKs give A room: an edge.
        let mut buf = vec![0u8; 65536];
        let mut writable = false;
        for _ in 0..200 {
            now += MS;
            pump(&mut sa, &mut sb, now);
            while sb.tcp_mut(s).recv(&mut buf, now).is_ok() {}
            if ready_of(&mut sa)
                .iter()
                .any(|e| e.token == 3 && e.readiness.is_writable())
            {
                writable = true;
                break;
            }
        }
        assert!(writable, "room again after the ACKs");
    }
}

mod closing {
    use super::*;

    #[test]
    fn the_peers_fin_is_readable_and_read_closed() {
        let (mut sa, mut sb, c, s, mut now) = connected();
        sb.register(s, 1, Interest::READABLE, Trigger::Edge)
            .unwrap();
        assert!(ready_of(&mut sb).is_empty());
        sa.tcp_mut(c).shutdown(now).unwrap();
        settle(&mut sa, &mut sb, &mut now);
        let ev = ready_of(&mut sb);
        assert_eq!(ev.len(), 1);
        let r = ev[0].readiness;
        assert!(
            r.is_readable() && r.is_read_closed() && !r.is_error(),
            "{r:?}"
        );
        let mut buf = [0u8; 4];
        assert_eq!(sb.tcp_mut(s).recv(&mut buf, now), Ok(0), "end of stream");
    }

    #[test]
    fn a_reset_is_an_error_readable_and_writable() {
        let (mut sa, mut sb, c, s, mut now) = connected();
        sb.register(s, 1, Interest::READABLE, Trigger::Edge)
            .unwrap();
        assert!(ready_of(&mut sb).is_empty());
        sa.tcp_mut(c).abort(now).unwrap();
        settle(&mut sa, &mut sb, &mut now);
        let ev = ready_of(&mut sb);
        assert_eq!(ev.len(), 1);
        let r = ev[0].readiness;
        assert!(r.is_error() && r.is_readable(), "{r:?}");
        assert!(!r.is_writable(), "masked by the interest");
        assert!(sb.readiness(s).unwrap().is_writable(), "unmasked");
    }

    #[test]
    fn closing_a_socket_forgets_its_registration() {
        let (mut sa, mut sb, c, s, mut now) = connected();
        sb.register(s, 1, Interest::BOTH, Trigger::Level).unwrap();
        assert_eq!(ready_of(&mut sb).len(), 1);
        sb.tcp_mut(s).abort(now).unwrap();
        settle(&mut sa, &mut sb, &mut now);
        assert!(ready_of(&mut sb).is_empty());
        assert_eq!(sb.readiness(s), Err(SocketError::BadHandle));
        // A later connection in the same slot is not reported under the
        // old token.
        let _ = c;
        assert_eq!(
            sb.register(s, 2, Interest::BOTH, Trigger::Level),
            Err(SocketError::BadHandle)
        );
    }

    #[test]
    fn deregistered_sockets_are_not_reported() {
        let (mut sa, mut sb, c, s, mut now) = connected();
        sb.register(s, 1, Interest::READABLE, Trigger::Level)
            .unwrap();
        sb.deregister(s);
        sa.tcp_mut(c).send(b"x", now).unwrap();
        settle(&mut sa, &mut sb, &mut now);
        assert!(ready_of(&mut sb).is_empty());
    }
}

mod listener {
    use super::*;

    #[test]
    fn a_completed_handshake_makes_the_listener_readable() {
        let (mut sa, mut sb) = stacks();
        let l = sb
            .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), None, None)
            .unwrap();
        sb.register(l, 9, Interest::READABLE, Trigger::Edge)
            .unwrap();
        assert!(ready_of(&mut sb).is_empty());
        let mut now = 0;
        sa.tcp_connect(SocketAddrV4::new(B, 80), None, now).unwrap();
        settle(&mut sa, &mut sb, &mut now);
        let ev = ready_of(&mut sb);
        assert_eq!(
            ev,
            vec![Event {
                token: 9,
                socket: SocketId::Listener(l),
                readiness: Readiness::READABLE,
            }]
        );
        sb.listener_mut(l).accept(now).unwrap();
        assert_eq!(sb.readiness(l), Ok(Readiness::EMPTY));
    }
}

mod udp {
    use super::*;

    #[test]
    fn a_datagram_is_an_edge_and_level_holds_while_queued() {
        let (mut sa, mut sb) = stacks();
        let ua = sa.udp_bind(SocketAddrV4::new(A, 5000), None).unwrap();
        let ub = sb.udp_bind(SocketAddrV4::new(B, 7), None).unwrap();
        let ul = sb.udp_bind(SocketAddrV4::new(B, 8), None).unwrap();
        sb.register(ub, 1, Interest::READABLE, Trigger::Edge)
            .unwrap();
        sb.register(ul, 2, Interest::READABLE, Trigger::Level)
            .unwrap();
        assert!(ready_of(&mut sb).is_empty(), "nothing queued");
        let mut now = 0;
        for port in [7, 8] {
            sa.udp_mut(ua)
                .send_to(b"ping", SocketAddrV4::new(B, port), now)
                .unwrap();
        }
        settle(&mut sa, &mut sb, &mut now);
        let mut tokens: Vec<u64> = ready_of(&mut sb).iter().map(|e| e.token).collect();
        tokens.sort();
        assert_eq!(tokens, vec![1, 2]);
        assert_eq!(
            ready_of(&mut sb)
                .iter()
                .map(|e| e.token)
                .collect::<Vec<_>>(),
            vec![2],
            "edge once; level while queued"
        );
        sb.udp_mut(ul).recv_with(|_, _| ()).unwrap();
        assert!(ready_of(&mut sb).is_empty());
    }
}

mod bounds {
    use super::*;

    #[test]
    fn one_call_reports_at_most_max_and_the_rest_next_time() {
        let (_sa, mut sb) = stacks();
        let socks: Vec<_> = (0..10)
            .map(|i| sb.udp_bind(SocketAddrV4::new(B, 100 + i), None).unwrap())
            .collect();
        // Writable: every one of them is ready now.
        for (i, &u) in socks.iter().enumerate() {
            sb.register(u, i as u64, Interest::WRITABLE, Trigger::Edge)
                .unwrap();
        }
        let mut out = Vec::new();
        assert_eq!(sb.ready(&mut out, 4), 4);
        assert_eq!(sb.ready(&mut out, 4), 4);
        assert_eq!(sb.ready(&mut out, 4), 2);
        let mut tokens: Vec<u64> = out.iter().map(|e| e.token).collect();
        tokens.sort();
        assert_eq!(tokens, (0..10).collect::<Vec<_>>(), "each exactly once");
        assert_eq!(sb.ready(&mut out, 4), 0);
    }
}

mod sleeping {
    use super::*;

    #[test]
    fn the_descriptor_wakes_when_the_peer_sends_and_not_before() {
        let (mut sa, mut sb) = stacks();
        let ua = sa.udp_bind(SocketAddrV4::new(A, 5000), None).unwrap();
        let ub = sb.udp_bind(SocketAddrV4::new(B, 7), None).unwrap();
        let poll = |stack: &Stack<WireEnd>, ms: i32| -> bool {
            use rustix::event::{poll, PollFd, PollFlags};
            let fd = stack.wait_fd().expect("a wire pair in one process has one");
            let mut fds = [PollFd::from_borrowed_fd(fd, PollFlags::IN)];
            let ts = rustix::event::Timespec {
                tv_sec: (ms / 1000) as i64,
                tv_nsec: (ms % 1000) as i64 * 1_000_000,
            };
            poll(&mut fds, Some(&ts)).unwrap() == 1
        };
        assert_eq!(sb.sleep_begin(), Sleep::Until(None), "idle: no deadline");
        assert!(!poll(&sb, 20), "nothing sent: no wake");
        sa.udp_mut(ua)
            .send_to(b"wake", SocketAddrV4::new(B, 7), 0)
            .unwrap();
        sa.sleep_begin(); // hands A's frame to the wire
        sa.sleep_end();
        // (A's first frame asks for B's address.)
        assert!(poll(&sb, 1000), "the peer's frame woke the descriptor");
        sb.sleep_end();
        let mut now = 0;
        while sb.udp(ub).pending() == Ok(0) && now < 100 * MS {
            now += MS;
            pump(&mut sa, &mut sb, now);
        }
        assert_eq!(sb.udp(ub).pending(), Ok(1));
        // The wake was drained: a new sleep waits again.
        assert_eq!(sb.sleep_begin(), Sleep::Until(None));
        assert!(!poll(&sb, 20));
        sb.sleep_end();
    }

    #[test]
    fn frames_already_waiting_mean_busy() {
        let (mut sa, mut sb) = stacks();
        let ua = sa.udp_bind(SocketAddrV4::new(A, 5000), None).unwrap();
        sb.udp_bind(SocketAddrV4::new(B, 7), None).unwrap();
        sa.udp_mut(ua)
            .send_to(b"early", SocketAddrV4::new(B, 7), 0)
            .unwrap();
        sa.sleep_begin();
        sa.sleep_end();
        assert_eq!(sb.sleep_begin(), Sleep::Busy);
    }

    #[test]
    fn a_connection_with_a_timer_gives_a_deadline() {
        let (mut sa, _sb, c, _s, now) = connected();
        sa.tcp_mut(c).send(b"unacknowledged", now).unwrap();
        match sa.sleep_begin() {
            Sleep::Until(Some(t)) => assert!(t > now, "retransmission later"),
            other => panic!("expected a deadline, got {other:?}"),
        }
        sa.sleep_end();
    }
}

/// `tcp_service_deferring`: the segments of a connection whose reader
/// waits are left to that reader's own receive call (LRP §3.4), and
/// processed by the next service call if it reads nothing.
mod deferring {
    use super::*;

    /// A sends `msg` and B's NIC has put the frames in the connection's
    /// channel, no protocol work done yet.
    fn sent_to_b(msg: &[u8]) -> (Stack<WireEnd>, Stack<WireEnd>, TcpStream, u64) {
        let (mut sa, mut sb, c, s, mut now) = connected();
        now += MS;
        assert_eq!(sa.tcp_mut(c).send(msg, now), Ok(msg.len()));
        sa.poll(now);
        sa.tcp_service(now, 1024);
        sb.poll(now);
        assert!(sb.tcp(s).pending().unwrap() > 0, "frames in the channel");
        (sa, sb, s, now)
    }

    #[test]
    fn a_waiting_readers_segments_are_left_to_its_receive_call() {
        let msg = b"left for the reader";
        let (_sa, mut sb, s, now) = sent_to_b(msg);
        let mut asked = Vec::new();
        let work = sb.tcp_service_deferring(now, 1024, |h| {
            asked.push(h);
            h == s
        });
        assert_eq!(asked, vec![s]);
        assert!(work > 0, "a deferral is work: the caller must turn again");
        assert!(sb.tcp(s).pending().unwrap() > 0, "still unprocessed");
        assert_eq!(sb.tcp(s).recv_queue(), Ok(0));
        let mut buf = [0u8; 64];
        assert_eq!(sb.tcp_mut(s).recv(&mut buf, now), Ok(msg.len()));
        assert_eq!(&buf[..msg.len()], msg);
        assert_eq!(sb.tcp(s).pending(), Ok(0));
    }

    #[test]
    fn a_reader_that_reads_nothing_gets_them_processed_by_the_next_call() {
        let msg = b"processed on the next turn";
        let (_sa, mut sb, s, now) = sent_to_b(msg);
        sb.tcp_service_deferring(now, 1024, |h| h == s);
        assert!(sb.tcp(s).pending().unwrap() > 0);
        // Its reader did not read (and no longer waits).
        sb.tcp_service_deferring(now, 1024, |_| false);
        assert_eq!(sb.tcp(s).pending(), Ok(0));
        assert_eq!(sb.tcp(s).recv_queue(), Ok(msg.len()));
    }

    #[test]
    fn a_reader_that_does_not_wait_gets_the_ordinary_service() {
        let msg = b"no one waits";
        let (_sa, mut sb, s, now) = sent_to_b(msg);
        sb.tcp_service_deferring(now, 1024, |_| false);
        assert_eq!(sb.tcp(s).pending(), Ok(0));
        assert_eq!(sb.tcp(s).recv_queue(), Ok(msg.len()));
    }
}
