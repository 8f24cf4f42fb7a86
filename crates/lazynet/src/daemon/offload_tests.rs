//! The offload placement in one process: a daemon thread running TCP for
//! MemNet client threads, a plain lazynet stack as the peer on the wire.

use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::tests::{drive, wait_for_socket, Setup, US};
use super::*;
use crate::mem::jobs::{JobError, Req, ReqOp};
use crate::memnet::{Error, MemNet};
use crate::nic::wirepair::WireEnd;
use crate::socket::{wait_step, TcpStream};
use crate::stack::SocketError;
use crate::stack::Stack;

/// Connects from the peer, sends `data`, reads until `want` bytes came
/// back or the stream ends.
fn peer_exchange(peer: &mut Stack<WireEnd>, port: u16, data: &[u8], want: usize) -> Vec<u8> {
    let c = TcpStream::connect(
        peer,
        SocketAddrV4::new(US, port),
        Some(Duration::from_secs(5)),
    )
    .unwrap();
    let mut sent = 0;
    let mut back = Vec::new();
    let mut eof = false;
    drive(peer, |p| {
        if sent < data.len() {
            if let Ok(k) = c.send(p, &data[sent..]) {
                sent += k;
            }
        }
        let mut b = [0u8; 8192];
        loop {
            match c.recv(p, &mut b) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => back.extend_from_slice(&b[..n]),
                Err(_) => break,
            }
        }
        back.len() >= want || eof
    });
    let _ = c.close(peer);
    back
}

fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> std::thread::JoinHandle<T> {
    std::thread::spawn(f)
}

#[test]
fn memnet_echo_with_every_api_byte_exact() {
    let mut s = Setup::with("offload-echo", Placement::Offload);
    wait_for_socket(&s.path);
    let path = s.path.clone();
    // The server: three connections, one per API (sockets, direct, async).
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let server = spawn(move || {
        let mut m = MemNet::attach(&path).unwrap();
        let l = m.listen(80, 16).unwrap();
        ready_tx.send(()).unwrap();
        // Sockets API: copies.
        let c = m.accept(l).unwrap();
        let mut buf = vec![0u8; 10000];
        loop {
            let n = m.recv(c, &mut buf).unwrap();
            if n == 0 {
                break;
            }
            m.send(c, &buf[..n]).unwrap();
        }
        m.close(c).unwrap();
        // Direct: one registered range, no copy on our side.
        let h = m.register_mem(64 * 1024).unwrap();
        let c = m.accept(l).unwrap();
        loop {
            let n = m.recv_direct(c, h, 64 * 1024).unwrap();
            if n == 0 {
                break;
            }
            assert_eq!(m.send_direct(c, h, n).unwrap(), n);
        }
        m.close(c).unwrap();
        // Async: a receive posted, the range busy until it completes.
        let c = m.accept(l).unwrap();
        loop {
            let j = m.async_recv(c, h, 64 * 1024).unwrap();
            let n = m.job_wait(j, Some(Duration::from_secs(10))).unwrap() as usize;
            if n == 0 {
                break;
            }
            let j = m.async_send(c, h, n).unwrap();
            loop {
                if let Some(r) = m.job_done(j) {
                    assert_eq!(r.unwrap() as usize, n);
                    break;
                }
            }
        }
        m.close(c).unwrap();
        m.deregister_mem(h).unwrap();
        assert_eq!(m.in_flight(), 0);
        m.close(l).unwrap();
    });
    ready.recv_timeout(Duration::from_secs(10)).unwrap();
    for round in 0..3u8 {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8 ^ round).collect();
        let back = peer_exchange(&mut s.peer, 80, &data, data.len());
        assert!(
            back == data,
            "round {round}: echo differs ({} bytes)",
            back.len()
        );
    }
    // The server closes each connection after our FIN: let it finish.
    let t0 = Instant::now();
    while !server.is_finished() {
        assert!(t0.elapsed() < Duration::from_secs(10));
        let t = s.peer.now() + 1_000_000;
        wait_step(&mut s.peer, Some(t));
    }
    server.join().unwrap();
    let d = s.finish();
    assert_eq!(d.stats().attached, 1);
}

#[test]
fn hostile_requests_fail_cleanly_and_the_daemon_goes_on() {
    let mut s = Setup::with("offload-hostile", Placement::Offload);
    wait_for_socket(&s.path);
    let path = s.path.clone();
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let server = spawn(move || {
        let mut m = MemNet::attach(&path).unwrap();
        let raw = |m: &mut MemNet, r: Req| {
            let j = m.post_raw(r).unwrap();
            m.job_wait(j, Some(Duration::from_secs(5)))
        };
        let op = |o: ReqOp| Req {
            op: o as u32,
            ..Req::default()
        };
        let e = |x| Err(Error::Job(x));
        assert_eq!(
            raw(
                &mut m,
                Req {
                    op: 0,
                    ..Req::default()
                }
            ),
            e(JobError::Invalid)
        );
        assert_eq!(
            raw(
                &mut m,
                Req {
                    op: 77,
                    ..Req::default()
                }
            ),
            e(JobError::Invalid)
        );
        assert_eq!(
            raw(
                &mut m,
                Req {
                    sock: 5,
                    ..op(ReqOp::Recv)
                }
            ),
            e(JobError::BadSocket)
        );
        assert_eq!(
            raw(
                &mut m,
                Req {
                    sock: u32::MAX,
                    ..op(ReqOp::Close)
                }
            ),
            e(JobError::BadSocket)
        );
        assert_eq!(
            raw(
                &mut m,
                Req {
                    off: u32::MAX,
                    len: 10,
                    ..op(ReqOp::Register)
                }
            ),
            e(JobError::BadRange)
        );
        assert_eq!(
            raw(
                &mut m,
                Req {
                    off: 0,
                    len: 0,
                    ..op(ReqOp::Register)
                }
            ),
            e(JobError::BadRange)
        );
        assert_eq!(
            raw(
                &mut m,
                Req {
                    handle: 999,
                    ..op(ReqOp::Deregister)
                }
            ),
            e(JobError::BadHandle)
        );
        assert_eq!(
            raw(
                &mut m,
                Req {
                    port: 0,
                    ..op(ReqOp::Listen)
                }
            ),
            e(JobError::Invalid)
        );
        let l = m.listen(81, 4).unwrap();
        ready_tx.send(()).unwrap();
        let h = m.register_mem(8192).unwrap();
        // A forged generation of a real socket is refused.
        assert_eq!(
            m.recv_direct(crate::memnet::MemNet::socket_of(0x7fff_0000), h, 10),
            Err(Error::Job(JobError::BadSocket))
        );
        // Listening twice on one port.
        assert_eq!(m.listen(81, 4), Err(Error::Job(JobError::AddrInUse)));
        let c = m.accept(l).unwrap();
        // A receive on a listener.
        let r = Req {
            sock: l.id(),
            handle: h.id(),
            len: 10,
            ..op(ReqOp::Recv)
        };
        assert_eq!(raw(&mut m, r), e(JobError::BadSocket));
        // A range outside the registration, as a raw request.
        let r = Req {
            sock: c.id(),
            handle: h.id(),
            off: 8000,
            len: 1000,
            ..op(ReqOp::Send)
        };
        assert_eq!(raw(&mut m, r), e(JobError::BadRange));
        // A receive in flight, then its range deregistered behind the
        // library's back: the job fails cleanly.
        let j = m.async_recv(c, h, 100).unwrap();
        let hid = h.id();
        assert_eq!(
            raw(
                &mut m,
                Req {
                    handle: hid,
                    ..op(ReqOp::Deregister)
                }
            ),
            Ok(0)
        );
        assert_eq!(
            m.job_wait(j, Some(Duration::from_secs(5))),
            e(JobError::Deregistered)
        );
        let r = Req {
            sock: c.id(),
            handle: hid,
            len: 10,
            ..op(ReqOp::Send)
        };
        assert_eq!(raw(&mut m, r), e(JobError::BadHandle));
        // The daemon still serves: a nop, and a fresh range.
        m.nop().unwrap();
        let h3 = m.register_mem(4096).unwrap();
        m.buf_mut(h3).unwrap()[..5].copy_from_slice(b"still");
        assert_eq!(m.send_direct(c, h3, 5).unwrap(), 5);
        m.close(c).unwrap();
    });
    ready.recv_timeout(Duration::from_secs(10)).unwrap();
    let back = peer_exchange(&mut s.peer, 81, b"", 5);
    assert_eq!(back, b"still");
    server.join().unwrap();
    s.finish();
}

#[test]
fn more_jobs_than_credits_flow_and_a_dead_client_is_reclaimed() {
    let mut s = Setup::with("offload-credits", Placement::Offload);
    wait_for_socket(&s.path);
    let path = s.path.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let (ready_tx, ready) = std::sync::mpsc::channel();
    // 1000 asynchronous sends of 100 bytes through 32 credits.
    let server = spawn(move || {
        let mut m = MemNet::attach(&path).unwrap();
        assert_eq!(m.credits(), 32);
        let l = m.listen(82, 4).unwrap();
        ready_tx.send(()).unwrap();
        let c = m.accept(l).unwrap();
        let hs: Vec<_> = (0..8).map(|_| m.register_mem(100).unwrap()).collect();
        for (i, h) in hs.iter().enumerate() {
            m.buf_mut(*h).unwrap().fill(b'a' + i as u8);
        }
        let mut jobs = std::collections::VecDeque::new();
        for i in 0..1000 {
            let h = hs[i % 8];
            // Each range is resent only after its last send completed.
            while jobs.len() >= 8 {
                let j = jobs.pop_front().unwrap();
                assert_eq!(m.job_wait(j, Some(Duration::from_secs(10))).unwrap(), 100);
            }
            jobs.push_back(m.async_send(c, h, 100).unwrap());
        }
        for j in jobs {
            assert_eq!(m.job_wait(j, Some(Duration::from_secs(10))).unwrap(), 100);
        }
        // Then die holding the connection and the listener, with a
        // receive in flight.
        // (The peer sends nothing: the receive stays in flight, and its
        // range can be neither written nor deregistered.)
        let j = m.async_recv(c, hs[0], 100).unwrap();
        assert_eq!(m.buf_mut(hs[0]).err(), Some(Error::Busy));
        assert_eq!(m.deregister_mem(hs[0]), Err(Error::Busy));
        assert_eq!(m.job_done(j), None);
        assert!(m.buf_mut(hs[1]).is_ok());
        while !st.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(m);
    });
    let want: Vec<u8> = (0..1000)
        .flat_map(|i| vec![b'a' + (i % 8) as u8; 100])
        .collect();
    ready.recv_timeout(Duration::from_secs(10)).unwrap();
    let peer = &mut s.peer;
    let c = TcpStream::connect(
        peer,
        SocketAddrV4::new(US, 82),
        Some(Duration::from_secs(5)),
    )
    .unwrap();
    let mut back = Vec::new();
    drive(peer, |p| {
        let mut b = [0u8; 8192];
        while let Ok(n) = c.recv(p, &mut b) {
            if n == 0 {
                break;
            }
            back.extend_from_slice(&b[..n]);
        }
        back.len() >= want.len()
    });
    assert!(back == want);
    stop.store(true, Ordering::Release);
    server.join().unwrap();
    // Reclaimed within a control check: the connection is reset and the
    // port can be taken by a new client.
    let t0 = Instant::now();
    let mut reset = false;
    while t0.elapsed() < Duration::from_secs(5) && !reset {
        let t = peer.now() + 1_000_000;
        wait_step(peer, Some(t));
        let mut b = [0u8; 16];
        reset = matches!(
            c.recv(peer, &mut b),
            Err(crate::stack::SocketError::ConnectionReset)
        );
    }
    assert!(reset, "the dead client's connection was not reset");
    let path = s.path.clone();
    let again = spawn(move || {
        let t0 = Instant::now();
        let mut m = MemNet::attach(&path).unwrap();
        loop {
            match m.listen(82, 4) {
                Ok(_) => break,
                Err(e) => {
                    assert!(t0.elapsed() < Duration::from_secs(5), "{e}");
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    });
    again.join().unwrap();
    let d = s.finish();
    assert_eq!(d.stats().attached, 2);
    assert!(d.stats().detached >= 1);
}

#[test]
fn a_multi_process_daemon_refuses_memnet_clients() {
    let s = Setup::with("offload-refused", Placement::MultiProcess);
    wait_for_socket(&s.path);
    let e = MemNet::attach(&s.path).unwrap_err();
    assert!(e.to_string().contains("Placement"), "{e}");
    s.finish();
}

#[test]
fn a_clients_orphans_in_the_daemon_are_capped_and_counted_against_it() {
    // Each client may leave 4 orphans; the daemon 100 in all.
    let mut stack = super::tests::cfg(US, 1);
    stack.max_orphans_per_tag = 4;
    stack.max_orphans = 100;
    let mut s = Setup::with_stack("offload-orphans", Placement::Offload, stack);
    wait_for_socket(&s.path);
    let path = s.path.clone();
    let (ready_tx, ready) = std::sync::mpsc::channel();
    // The client serves one byte per connection and closes it; its peer
    // acknowledges the FIN and never sends its own.
    let server = spawn(move || {
        let mut m = MemNet::attach(&path).unwrap();
        let l = m.listen(83, 16).unwrap();
        ready_tx.send(()).unwrap();
        for _ in 0..10 {
            let c = m.accept(l).unwrap();
            m.send(c, b"x").unwrap();
            m.close(c).unwrap();
        }
        m
    });
    ready.recv_timeout(Duration::from_secs(10)).unwrap();
    let peer = &mut s.peer;
    let mut held = Vec::new();
    for _ in 0..10 {
        let c = TcpStream::connect(
            peer,
            SocketAddrV4::new(US, 83),
            Some(Duration::from_secs(5)),
        )
        .unwrap();
        let mut got = Vec::new();
        drive(peer, |p| {
            let mut b = [0u8; 8];
            match c.recv(p, &mut b) {
                Ok(0) => true,
                Ok(n) => {
                    got.extend_from_slice(&b[..n]);
                    false
                }
                Err(_) => false,
            }
        });
        assert_eq!(got, b"x");
        held.push(c);
    }
    // Let the last ACKs and resets settle.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(200) {
        let t = peer.now() + 1_000_000;
        wait_step(peer, Some(t));
    }
    let m = server.join().unwrap();
    let text = crate::daemon::stats(&s.path).unwrap();
    let line = text.lines().find(|l| l.starts_with("memnet ")).unwrap();
    assert!(line.contains(" orphans 4 "), "{line}");
    // The six oldest were reset: their peers learnt it.
    let mut b = [0u8; 8];
    let reset: Vec<bool> = held
        .iter()
        .map(|c| c.recv(peer, &mut b) == Err(SocketError::ConnectionReset))
        .collect();
    assert_eq!(reset, [[true; 6].as_slice(), &[false; 4]].concat());
    drop(m);
    let d = s.finish();
    let st = d.stack().tcp_stats();
    assert_eq!(
        st.orphans_reset[crate::stack::OrphanReset::OverTagCap as usize],
        6
    );
}

#[test]
fn jobs_queued_behind_a_failed_connect_fail_with_it_and_give_their_credits_back() {
    let s = Setup::with("offload-connect-fails", Placement::Offload);
    // (The peer is driven below, while the client waits.)
    wait_for_socket(&s.path);
    let path = s.path.clone();
    let client = spawn(move || {
        let mut m = MemNet::attach(&path).unwrap();
        let h = m.register_mem(4096).unwrap();
        // A client's first socket is slot 0 of generation 1: a raw client
        // may post jobs on it before its connect completes.
        let first = 1 << 16;
        let connect = m
            .post_raw(Req {
                op: ReqOp::Connect as u32,
                addr: u32::from(super::tests::PEER),
                port: 9999, // nobody listens: the peer refuses
                ..Req::default()
            })
            .unwrap();
        let data = |op: ReqOp| Req {
            op: op as u32,
            sock: first,
            handle: h.id(),
            len: 100,
            ..Req::default()
        };
        let send = m.post_raw(data(ReqOp::Send)).unwrap();
        let recv = m.post_raw(data(ReqOp::Recv)).unwrap();
        let t = Some(Duration::from_secs(5));
        let r = [
            m.job_wait(connect, t),
            m.job_wait(send, t),
            m.job_wait(recv, t),
        ];
        assert_eq!(m.in_flight(), 0, "every credit came back: {r:?}");
        r
    });
    // The peer answers the SYN with a RST.
    let mut s = s;
    let t0 = Instant::now();
    while !client.is_finished() && t0.elapsed() < Duration::from_secs(10) {
        let t = s.peer.now() + 1_000_000;
        wait_step(&mut s.peer, Some(t));
    }
    let r = client.join().unwrap();
    let refused = Err(Error::Job(JobError::ConnectionRefused));
    assert_eq!(r[0], refused);
    // The send went into TCP's buffer while the SYN was out (RFC 9293
    // §3.10.2 queues it); the receive waited behind the connect.
    assert!(matches!(
        r[1],
        Ok(100) | Err(Error::Job(JobError::ConnectionRefused))
    ));
    assert_eq!(r[2], refused);
    s.finish();
}

#[test]
fn a_memnet_client_learns_that_its_daemon_is_gone() {
    let s = Setup::with("offload-daemon-gone", Placement::Offload);
    wait_for_socket(&s.path);
    let mut m = MemNet::attach(&s.path).unwrap();
    let l = m.listen(84, 4).unwrap();
    // An accept that cannot complete, then the daemon stops.
    let j = m.async_accept(l).unwrap();
    let d = s.finish();
    drop(d);
    let t0 = Instant::now();
    assert_eq!(m.job_wait(j, None), Err(Error::DaemonGone));
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    // And a call that needs a credit does not wait for one for ever.
    let t0 = Instant::now();
    assert_eq!(m.nop(), Err(Error::DaemonGone));
    assert!(t0.elapsed() < Duration::from_secs(1));
}
