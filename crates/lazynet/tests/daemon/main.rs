//! The daemon against a hostile application (a property test; the fuzz
//! target `daemon_app` drives the same harness): whatever the hostile
//! application does, the daemon does not panic, keeps answering, a
//! well-behaved application beside it keeps echoing byte-exact, and when
//! the hostile one leaves, everything it held is reclaimed. The same for a
//! hostile MemNet client of the offload placement (fuzz target
//! `memnet_client`).

mod hostile;
mod hostile_memnet;
mod trust;

use std::net::{Ipv4Addr, SocketAddrV4};

use hostile::*;
use lazynet::socket::UdpSocket;
use lazynet::stack::{AreaNic, Stack, StackConfig};
use proptest::prelude::*;

/// Runs `f` on another thread while this one steps the daemon (attaching
/// and binding wait for the daemon's answers).
fn beside<T: Send>(h: &mut Harness, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        let t = s.spawn(f);
        while !t.is_finished() {
            h.step(1);
        }
        t.join().unwrap()
    })
}

/// The well-behaved application: attached, echoing UDP on port 7.
fn good_app(h: &mut Harness) -> (Stack<AreaNic>, UdpSocket) {
    let path = h.path.clone();
    beside(h, move || {
        let mut s = Stack::attach(
            &path,
            StackConfig {
                seed: 9,
                ..StackConfig::default()
            },
        )
        .unwrap();
        let u = UdpSocket::bind(&mut s, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
        (s, u)
    })
}

/// Sends `n` datagrams from the peer to the good application and checks
/// each comes back byte-exact (the daemon and the application stepped
/// here, in turn).
fn echo_checks(h: &mut Harness, app: &mut Stack<AreaNic>, u: &UdpSocket, n: u16) -> bool {
    let mac = h.daemon.stack().mac();
    let mut buf = [0u8; 2048];
    for i in 0..n {
        let payload: Vec<u8> = (0..(1 + i as usize * 37 % 1000))
            .map(|k| (k as u16 ^ i) as u8)
            .collect();
        let f = udp_frame(PEER_MAC, mac, PEER, US, 6000, 7, &payload);
        let mut back = false;
        'tries: for _ in 0..5 {
            h.inject(&f);
            for _ in 0..400 {
                h.daemon.step();
                let now = app.now();
                app.poll(now);
                while let Ok((k, from)) = u.recv_from(app, &mut buf) {
                    let _ = u.send_to(app, &buf[..k], from);
                }
                app.poll(now);
                h.pump_peer(|fr| {
                    back |= fr.len() == 42 + payload.len()
                        && fr[23] == 17
                        && fr[34..36] == 7u16.to_be_bytes()
                        && fr[42..] == payload[..];
                });
                if back {
                    break 'tries;
                }
            }
        }
        if !back {
            return false;
        }
    }
    true
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn a_hostile_application_is_contained(ops in proptest::collection::vec(any::<u8>(), 0..600)) {
        let mut h = Harness::new("hostile-prop");
        let (mut app, u) = good_app(&mut h);
        h.step(4);
        h.daemon.nic_mut().reclaim();
        let free0 = h.daemon.stack().nic().free_buffers();
        h.hostile = h.attach_raw();
        prop_assert!(h.hostile.is_some());
        h.run(&ops);
        prop_assert!(h.daemon_answers_ping(1), "the daemon stopped answering");
        prop_assert!(echo_checks(&mut h, &mut app, &u, 20), "the good application was disturbed");
        // The hostile application leaves: within one control check it is
        // gone, and so is everything it held.
        h.hostile = None;
        h.silent.clear();
        let t0 = std::time::Instant::now();
        while h.daemon.attached() != 1 && t0.elapsed().as_secs() < 2 {
            h.step(1);
        }
        prop_assert_eq!(h.daemon.attached(), 1);
        // Ports the hostile application may have bound are free again.
        let p9 = beside(&mut h, || UdpSocket::bind(&mut app, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9)));
        prop_assert!(p9.is_ok(), "{:?}", p9.err());
        prop_assert!(echo_checks(&mut h, &mut app, &u, 5));
        // Buffers the hostile application never gave back are its own
        // loss: every buffer of the daemon's NIC comes home.
        h.step(8);
        h.daemon.nic_mut().reclaim();
        prop_assert_eq!(h.daemon.stack().nic().free_buffers(), free0);
    }
}

#[test]
fn the_daemon_refuses_more_applications_than_it_serves() {
    let mut h = Harness::new("hostile-full");
    let a = h.attach_raw();
    let b = h.attach_raw();
    let c = h.attach_raw();
    assert!(a.is_some() && b.is_some() && c.is_some());
    assert!(
        h.attach_raw().is_none(),
        "a fourth application over max_apps 3"
    );
    assert_eq!(h.daemon.attached(), 3);
    assert_eq!(h.daemon.stats().refused, 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn a_hostile_memnet_client_is_contained(ops in proptest::collection::vec(any::<u8>(), 0..600)) {
        let mut h = hostile_memnet::Harness::new("memnet-prop");
        prop_assert!(h.good_client_served(1));
        h.hostile = h.attach_raw();
        prop_assert!(h.hostile.is_some());
        h.run(&ops);
        prop_assert!(h.good_client_served(2), "the well-behaved client was not served");
        // The hostile client leaves: within one control check it is gone,
        // its connections reset and its listeners closed.
        h.hostile = None;
        let t0 = std::time::Instant::now();
        while h.daemon.attached() != 1 && t0.elapsed().as_secs() < 2 {
            h.daemon.poke();
            h.step(1);
        }
        prop_assert_eq!(h.daemon.attached(), 1);
        h.step(50);
        let states = h.daemon.stack().tcp_states();
        prop_assert_eq!(states.len(), 0, "connections left: {:?}", states);
        // Its ports are free: the good client listens on all three.
        for (k, port) in [80u16, 81, 82].into_iter().enumerate() {
            let g = h.good.as_mut().unwrap();
            let r = lazynet::mem::jobs::Req {
                job: 100 + k as u32,
                op: lazynet::mem::jobs::ReqOp::Listen as u32,
                port,
                ..Default::default()
            };
            prop_assert!(g.req.push_one(r).is_ok());
            let mut ok = None;
            for _ in 0..100 {
                h.step(1);
                if let Some(c) = h.good.as_mut().unwrap().cpl.pop_one() {
                    ok = Some(c.code);
                    break;
                }
            }
            prop_assert_eq!(ok, Some(0), "port {} not free again", port);
        }
    }
}

#[test]
fn the_offload_daemon_refuses_more_clients_than_it_serves() {
    let mut h = hostile_memnet::Harness::new("memnet-full");
    let a = h.attach_raw();
    let b = h.attach_raw();
    let c = h.attach_raw();
    assert!(a.is_some() && b.is_some() && c.is_some());
    assert!(h.attach_raw().is_none(), "a fourth client over max_apps 3");
    assert_eq!(h.daemon.stats().refused, 1);
}
