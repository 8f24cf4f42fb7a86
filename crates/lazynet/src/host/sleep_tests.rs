//! A sleeping host on real time: it costs no CPU while idle, wakes for a
//! frame, for a wake from another thread and for its periodic releases,
//! and charges its own loop to the system (`net`) owner. The host's tick is
//! stretched to 200 ms, and the bounds are wide (hundreds of times what a
//! wake-up takes on an idle machine): they separate "woken by the event"
//! from "woken by the next tick", not fast from slow, and hold on a loaded
//! test machine.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;
use crate::nic::wirepair::{WireConfig, WireEnd};
use crate::sched::{InstantClock, Periodic};
use crate::stack::StackConfig;

use crate::testkit::{Pair, A, B};
const MS: u64 = 1_000_000;

#[derive(Default)]
struct App {
    /// When each datagram or wake was seen.
    seen: Vec<Instant>,
    runs: u64,
}

type H = Host<WireEnd, App>;
type St = HostState<WireEnd, App>;

fn stacks() -> (Stack<WireEnd>, Stack<WireEnd>) {
    let cfg = |addr| StackConfig {
        prefix_len: 24,
        mode: ReceiveMode::SoftLrp,
        ..crate::testkit::config(addr, 7)
    };
    let Pair {
        a: mut client,
        b: mut server,
        ..
    } = Pair::with(WireConfig::default(), cfg(A), cfg(B));
    client.set_neighbor(B, server.mac());
    server.set_neighbor(A, client.mac());
    (client, server)
}

/// Without the event, a sleeping host would wake at this tick.
const TICK: u64 = 200 * MS;

fn host(server: Stack<WireEnd>) -> H {
    let mut cfg = HostConfig::for_mode(ReceiveMode::SoftLrp).sleeping();
    cfg.tick_ns = TICK;
    Host::new(server, App::default(), InstantClock::new(), cfg).unwrap()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[test]
fn an_idle_sleeping_host_uses_almost_no_cpu() {
    let (_client, server) = stacks();
    let mut h = host(server);
    let cpu0 = crate::sys::thread_cpu_ns();
    let t0 = Instant::now();
    let rep = h.run_for(300 * MS);
    let cpu = crate::sys::thread_cpu_ns() - cpu0;
    let wall = t0.elapsed().as_nanos() as u64;
    assert!(rep.sleeps > 0);
    // A polling host would use all of it; a sleeping one wakes for its
    // tick only.
    assert!(cpu * 10 < wall, "cpu {cpu} ns of {wall} ns");
}

#[test]
fn a_frame_wakes_a_sleeping_host_before_its_tick() {
    let (mut client, server) = stacks();
    let mut h = host(server);
    let o = h.add_owner("sink", Class::BestEffort).unwrap();
    let s = h
        .state_mut()
        .stack
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7000), None)
        .unwrap();
    let t = h
        .spawn(o, move |_cx: &mut Cx<'_>, st: &mut St| {
            match st.stack.udp_mut(s).recv_with(|_, _| ()) {
                Ok(()) => {
                    st.app.seen.push(Instant::now());
                    Status::Ready
                }
                Err(_) => Status::Wait,
            }
        })
        .unwrap();
    h.state_mut().register_udp(s, o, t);
    const N: usize = 15;
    let sent = Arc::new(Mutex::new(Vec::new()));
    let sent2 = sent.clone();
    let sender = std::thread::spawn(move || {
        let sock = client
            .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0), None)
            .unwrap();
        for _ in 0..N {
            // Off the host's tick: between two ticks, not on one.
            std::thread::sleep(Duration::from_millis(23));
            sent2.lock().unwrap().push(Instant::now());
            client
                .udp_mut(sock)
                .send_to(b"ping", SocketAddrV4::new(B, 7000), 0)
                .unwrap();
            client.poll(0);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while h.app().seen.len() < N && Instant::now() < deadline {
        h.run_for(500 * MS);
    }
    sender.join().unwrap();
    let sent = sent.lock().unwrap();
    assert_eq!(h.app().seen.len(), N);
    let lat: Vec<Duration> = sent
        .iter()
        .zip(&h.app().seen)
        .map(|(s, r)| r.saturating_duration_since(*s))
        .collect();
    // Woken by the tick instead, the median would be ~100 ms.
    assert!(median(lat.clone()) < Duration::from_millis(20), "{lat:?}");
    assert!(h.stats().sleeps >= N as u64);
}

/// Wakes a task of `h` from another thread 15 times, 23 ms apart, and
/// returns each wake's latency to the task's run, and the host's report.
fn remote_wake_latencies<N: Nic + 'static>(mut h: Host<N, App>) -> (Vec<Duration>, HostReport) {
    let o = h.add_owner("woken", Class::BestEffort).unwrap();
    let t = h
        .spawn(o, |_cx: &mut Cx<'_>, st: &mut HostState<N, App>| {
            st.app.runs += 1;
            if st.app.runs > 1 {
                st.app.seen.push(Instant::now());
            }
            Status::Wait
        })
        .unwrap();
    const N: usize = 15;
    let waker = h.waker();
    let sent = Arc::new(Mutex::new(Vec::new()));
    let sent2 = sent.clone();
    let th = std::thread::spawn(move || {
        for _ in 0..N {
            std::thread::sleep(Duration::from_millis(23));
            sent2.lock().unwrap().push(Instant::now());
            waker.wake(t);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while h.app().seen.len() < N && Instant::now() < deadline {
        h.run_for(100 * MS);
    }
    th.join().unwrap();
    let sent = sent.lock().unwrap();
    assert_eq!(h.app().seen.len(), N);
    let lat = sent
        .iter()
        .zip(&h.app().seen)
        .map(|(s, r)| r.saturating_duration_since(*s))
        .collect();
    (lat, h.stats())
}

#[test]
fn a_remote_wake_ends_the_sleep_and_runs_the_task() {
    let (_client, server) = stacks();
    let (lat, _) = remote_wake_latencies(host(server));
    assert!(median(lat.clone()) < Duration::from_millis(20), "{lat:?}");
}

/// The same on TAP (root), where the host sleeps in `ppoll` on the device:
/// the wake signals the eventfd polled beside it. The bound is a third of
/// the device's 10-ms wait (the tick is 200 ms): it separates "woken by
/// the eventfd" from "woke by itself", not fast from slow.
#[test]
fn a_remote_wake_ends_a_host_sleeping_on_tap() {
    use crate::nic::netns::{PeerNs, PeerNsConfig};
    use crate::nic::tap::TapConfig;
    if !crate::sys::root_or_skip() {
        return;
    }
    struct Down(PeerNs);
    impl Drop for Down {
        fn drop(&mut self) {
            let _ = self.0.down();
        }
    }
    let peer = PeerNs::new(PeerNsConfig::unique(15));
    let _down = Down(peer.clone());
    let (nic, _own) = peer
        .attach_or_create(&TapConfig {
            mac: [0x02, 0, 0, 0, 0x15, 0x02],
            buf_count: 256,
            ..TapConfig::default()
        })
        .expect("attach_or_create");
    let stack = Stack::new(
        nic,
        StackConfig {
            addr: Ipv4Addr::new(10, 201, 15, 2),
            prefix_len: 24,
            seed: 3,
            ..StackConfig::default()
        },
    );
    let mut cfg = HostConfig::for_mode(ReceiveMode::SoftLrp).sleeping();
    cfg.tick_ns = TICK;
    let h = Host::new(stack, App::default(), InstantClock::new(), cfg).unwrap();
    let (lat, report) = remote_wake_latencies(h);
    assert!(median(lat.clone()) < Duration::from_millis(3), "{lat:?}");
    assert!(report.sleeps > 0, "the host slept");
}

#[test]
fn a_sleeping_host_wakes_for_its_periodic_releases() {
    let (_client, server) = stacks();
    let mut h = host(server);
    let p = Periodic {
        period_ns: 4 * MS,
        batch: 1,
        iteration_ns: MS,
    };
    let o = h.add_owner("media", Class::Periodic(p)).unwrap();
    h.spawn(o, |cx: &mut Cx<'_>, st: &mut St| {
        st.app.runs += 1;
        cx.iteration_done();
        Status::Wait
    })
    .unwrap();
    let cpu0 = crate::sys::thread_cpu_ns();
    let t0 = Instant::now();
    h.run_for(400 * MS);
    let cpu = crate::sys::thread_cpu_ns() - cpu0;
    let wall = t0.elapsed().as_nanos() as u64;
    let u = h.usage(o);
    // 100 periods (the tick would give 2); a loaded test machine may
    // delay wake-ups.
    assert!(h.app().runs >= 50, "{} runs, {u:?}", h.app().runs);
    assert!(u.releases >= 50);
    assert!(cpu * 5 < wall, "cpu {cpu} ns of {wall} ns");
    assert!(h.stats().sleeps >= 50);
}

#[test]
fn the_loop_charges_its_own_time_to_the_system() {
    let (_client, server) = stacks();
    let cfg = HostConfig::for_mode(ReceiveMode::SoftLrp);
    let mut h: H = Host::new(server, App::default(), InstantClock::new(), cfg).unwrap();
    for name in ["x", "y"] {
        let o = h.add_owner(name, Class::BestEffort).unwrap();
        h.spawn(o, |_cx: &mut Cx<'_>, st: &mut St| {
            // About a microsecond of work.
            let mut x = st.app.runs;
            for i in 0..200 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
            st.app.runs = x | 1;
            Status::Ready
        })
        .unwrap();
    }
    let t0 = h.now_ns();
    let rep = h.run_for(100 * MS);
    let wall = h.now_ns() - t0;
    let charged: u64 = h
        .executor()
        .owners()
        .map(|o| h.usage(o).cpu_ns)
        .sum::<u64>();
    assert!(rep.overhead_ns > 0);
    assert!(h.usage(h.net_owner()).external_ns >= rep.overhead_ns);
    // What the owners were charged plus the idle steps covers the run:
    // under 3% of the core goes unaccounted.
    let accounted = charged + rep.idle_ns;
    assert!(
        accounted * 100 >= wall * 97,
        "accounted {accounted} of {wall} ns\n{}",
        h.report()
    );
}

#[test]
fn wakeup_overshoot_measures_real_sleeps_and_leaves_waiting_frames_alone() {
    let (mut a, mut b) = stacks();
    // Idle: every sleep is slept, and wakes late by something.
    let t0 = Instant::now();
    let o = wakeup_overshoot(b.nic_mut(), 20, MS).expect("samples taken");
    assert!(t0.elapsed() >= Duration::from_millis(20));
    assert!(o > 0 && o < 200 * MS, "{o}");
    // A frame waits: no sleep is taken, nothing is measured (not "0 late"),
    // and the frame is still there.
    let s = a
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0), None)
        .unwrap();
    a.udp_mut(s)
        .send_to(b"x", SocketAddrV4::new(B, 9), 0)
        .unwrap();
    a.poll(0);
    let t0 = Instant::now();
    assert_eq!(wakeup_overshoot(b.nic_mut(), 20, 100 * MS), None);
    assert!(t0.elapsed() < Duration::from_millis(100));
    assert!(b.nic_mut().rx_ready());
}
