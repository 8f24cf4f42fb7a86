//! Host runtime tests: two stacks over the in-memory wire, the host's on a
//! clock that advances a fixed step per read, so every iteration costs
//! something and charging is exact in kind (who pays), not in amount.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::*;
use crate::nic::wirepair::{WireConfig, WireEnd, WirePair};
use crate::stack::StackConfig;

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// Every read moves time by 100 ns: an iteration (two reads) costs 100 ns
/// plus whatever reads happen inside it.
#[derive(Clone, Debug, Default)]
struct StepClock(Arc<AtomicU64>);

impl Clock for StepClock {
    fn now_ns(&self) -> u64 {
        self.0.fetch_add(100, Ordering::Relaxed)
    }
}

#[derive(Default)]
struct App {
    got: u64,
    burned: u64,
    /// The host's clock: a burner iteration "spends" 1 µs on it.
    clock: StepClock,
}

type H = Host<WireEnd, App>;
type St = HostState<WireEnd, App>;

fn cfg(addr: Ipv4Addr, mode: ReceiveMode) -> StackConfig {
    StackConfig {
        addr,
        prefix_len: 24,
        seed: 7,
        mode,
        ..StackConfig::default()
    }
}

/// A client stack (polled by hand) and a host in `mode`, neighbours known.
fn setup(mode: ReceiveMode) -> (Stack<WireEnd>, H) {
    setup_with(mode, HostConfig::for_mode(mode))
}

fn setup_with(mode: ReceiveMode, hcfg: HostConfig) -> (Stack<WireEnd>, H) {
    let (a, b) = WirePair::new(WireConfig::default()).unwrap();
    let mut client = Stack::new(a, cfg(A, ReceiveMode::SoftLrp));
    let mut server = Stack::new(b, cfg(B, mode));
    client.set_neighbor(B, server.mac());
    server.set_neighbor(A, client.mac());
    let clock = StepClock::default();
    let app = App {
        clock: clock.clone(),
        ..App::default()
    };
    let host = Host::new(server, app, clock, hcfg).unwrap();
    (client, host)
}

fn send_udp(client: &mut Stack<WireEnd>, port: u16) {
    let s = client
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0), None)
        .unwrap();
    client
        .udp_mut(s)
        .send_to(b"ping", SocketAddrV4::new(B, port), 0)
        .unwrap();
    client.poll(0);
}

/// A UDP server owner: its socket on `port` and a task that reads it.
fn udp_server(host: &mut H, port: u16, reads: bool) -> (OwnerId, UdpSocket) {
    let o = host.add_owner("server", Class::BestEffort).unwrap();
    let h = host
        .state_mut()
        .stack
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port), None)
        .unwrap();
    let t = host
        .spawn(o, move |_cx: &mut Cx<'_>, st: &mut St| {
            if !reads {
                return Status::Wait;
            }
            match st.stack.udp_mut(h).recv_with(|_, _| ()) {
                Ok(()) => {
                    st.app.got += 1;
                    Status::Ready
                }
                Err(_) => Status::Wait,
            }
        })
        .unwrap();
    host.state_mut().register_udp(h, o, t);
    (o, h)
}

/// A best-effort owner whose task burns `n` iterations, then finishes.
fn burner(host: &mut H, n: u64) -> (OwnerId, TaskId) {
    let o = host.add_owner("burner", Class::BestEffort).unwrap();
    let mut left = n;
    let t = host
        .spawn(o, move |_cx: &mut Cx<'_>, st: &mut St| {
            st.app.burned += 1;
            st.app.clock.0.fetch_add(1_000, Ordering::Relaxed);
            left -= 1;
            if left == 0 {
                Status::Done
            } else {
                Status::Ready
            }
        })
        .unwrap();
    (o, t)
}

#[test]
fn receive_task_runs_before_best_effort_work_when_frames_wait() {
    let (mut client, mut host) = setup(ReceiveMode::SoftLrp);
    let (_srv, _) = udp_server(&mut host, 7000, true);
    let (_b, bt) = burner(&mut host, 1_000);
    // Settle: start-up iterations, then the burner alone.
    for _ in 0..20 {
        host.step();
    }
    assert_eq!(host.step(), Some(bt));
    send_udp(&mut client, 7000);
    assert_eq!(host.step(), host.receive_task(), "the interrupt runs first");
    assert_eq!(host.stats().interrupts, 1);
    // Then the server (woken by the receive task, less recent usage than
    // the burner) reads it.
    host.run_until(u64::MAX, 5);
    assert_eq!(host.app().got, 1);
}

/// Interrupt coalescing: a busy soft-lrp host looks at the ring once per
/// `rx_check_ns`, so a frame waits behind best-effort iterations for at
/// most that long (and one iteration), not for ever.
#[test]
fn a_busy_host_looks_at_the_ring_once_per_check_interval() {
    let hcfg = HostConfig {
        rx_check_ns: 50_000,
        ..HostConfig::for_mode(ReceiveMode::SoftLrp)
    };
    let (mut client, mut host) = setup_with(ReceiveMode::SoftLrp, hcfg);
    let (_srv, _) = udp_server(&mut host, 7000, true);
    let (_b, bt) = burner(&mut host, 100_000);
    for _ in 0..20 {
        host.step();
    }
    assert_eq!(host.step(), Some(bt));
    send_udp(&mut client, 7000);
    let sent = host.now_ns();
    let mut burner_steps = 0;
    loop {
        let ran = host.step();
        if ran == host.receive_task() {
            break;
        }
        assert_eq!(ran, Some(bt));
        burner_steps += 1;
        assert!(burner_steps < 1_000, "the frame was never looked at");
    }
    let waited = host.now_ns() - sent;
    assert!(burner_steps >= 5, "only {burner_steps} burner steps first");
    assert!(waited <= 50_000 + 5_000, "waited {waited} ns");
    host.run_until(u64::MAX, 5);
    assert_eq!(host.app().got, 1);
}

#[test]
fn eager_charges_protocol_work_to_the_interrupted_owner() {
    let (mut client, mut host) = setup(ReceiveMode::Eager);
    let (srv, _) = udp_server(&mut host, 7000, true);
    let (victim, vt) = burner(&mut host, 1_000);
    for _ in 0..20 {
        host.step();
    }
    assert_eq!(host.step(), Some(vt));
    let before = host.usage(victim);
    send_udp(&mut client, 7000);
    assert_eq!(host.step(), host.receive_task());
    let st = host.stack().stats();
    assert_eq!(
        st.udp_checked_in_poll, 1,
        "eager: checks in the receive loop"
    );
    let after = host.usage(victim);
    assert!(
        after.charged_from_others_ns > before.charged_from_others_ns,
        "the receive task's protocol work lands on the victim: {after:?}"
    );
    assert_eq!(after.task_ns, before.task_ns, "the victim did not run");
    let net = host.usage(host.net_owner());
    assert!(net.charged_to_others_ns > 0 && net.task_ns > 0);
    host.run_until(u64::MAX, 10);
    assert_eq!(host.app().got, 1);
    assert_eq!(host.stack().stats().udp_checked_in_recv, 0);
    let _ = srv;
}

#[test]
fn soft_lrp_charges_a_sockets_protocol_work_to_its_owner() {
    let (mut client, mut host) = setup(ReceiveMode::SoftLrp);
    let (srv, _) = udp_server(&mut host, 7000, true);
    let (victim, vt) = burner(&mut host, 1_000);
    for _ in 0..20 {
        host.step();
    }
    assert_eq!(host.step(), Some(vt));
    let srv_before = host.usage(srv);
    let victim_before = host.usage(victim);
    let net_before = host.usage(host.net_owner());
    send_udp(&mut client, 7000);
    assert_eq!(host.step(), host.receive_task());
    assert_eq!(host.stack().stats().udp_checked_in_poll, 0, "demux only");
    // The demultiplexing of the server's frame went to the server, before
    // any of its tasks ran; the burner the receive task interrupted got
    // only the rest of the iteration.
    let srv_mid = host.usage(srv);
    assert!(srv_mid.charged_from_others_ns > srv_before.charged_from_others_ns);
    assert_eq!(srv_mid.task_ns, srv_before.task_ns);
    let net = host.usage(host.net_owner());
    assert_eq!(
        net.charged_to_others_ns - net_before.charged_to_others_ns,
        (srv_mid.charged_from_others_ns - srv_before.charged_from_others_ns)
            + (host.usage(victim).charged_from_others_ns - victim_before.charged_from_others_ns),
        "the receive iteration is split between the two"
    );
    assert_eq!(host.stack().stats().udp_checked_in_recv, 0);
    host.run_until(u64::MAX, 5);
    assert_eq!(host.app().got, 1);
    // The checks ran inside the server's recv, in its task, charged to it.
    assert_eq!(host.stack().stats().udp_checked_in_recv, 1);
    let srv_after = host.usage(srv);
    assert!(srv_after.cpu_ns > srv_before.cpu_ns);
    assert_eq!(
        srv_after.charged_to_others_ns,
        srv_before.charged_to_others_ns
    );
}

#[test]
fn idle_drain_runs_only_when_nothing_else_is_runnable() {
    let (mut client, mut host) = setup(ReceiveMode::SoftLrp);
    // A server that is busy elsewhere: registered, but does not read now.
    let (srv, h) = udp_server(&mut host, 7000, false);
    let (_b, _bt) = burner(&mut host, 200);
    for _ in 0..5 {
        host.step();
    }
    send_udp(&mut client, 7000);
    for _ in 0..50 {
        host.step();
    }
    assert!(host.app().burned < 200, "burner still running");
    assert_eq!(
        host.stack().stats().udp_checked_ahead,
        0,
        "no idle work while a best-effort task is runnable"
    );
    let srv_before = host.usage(srv);
    host.run_until(u64::MAX, 400);
    assert_eq!(host.app().burned, 200);
    let st = host.stack().stats();
    assert_eq!(st.udp_checked_ahead, 1, "the idle drain checked it");
    let srv_after = host.usage(srv);
    assert!(
        srv_after.charged_from_others_ns > srv_before.charged_from_others_ns,
        "charged to the socket's owner: {srv_after:?}"
    );
    // Still queued; recv finds it checked and does not repeat the work.
    assert_eq!(host.stack().udp(h).pending().unwrap(), 1);
    host.state_mut()
        .stack
        .udp_mut(h)
        .recv_with(|_, _| ())
        .unwrap();
    assert_eq!(host.stack().stats().udp_checked_in_recv, 0);
    assert_eq!(host.stack().stats().udp_delivered, 1);
}

#[test]
fn tcp_input_of_an_owners_connection_runs_in_that_owners_handler() {
    let (mut client, mut host) = setup(ReceiveMode::SoftLrp);
    let x = host.add_owner("x", Class::BestEffort).unwrap();
    let y = host.add_owner("y", Class::BestEffort).unwrap();
    let lx = host
        .state_mut()
        .stack
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), None, None)
        .unwrap();
    let ly = host
        .state_mut()
        .stack
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 81), None, None)
        .unwrap();
    let accepted = Arc::new(AtomicU64::new(0));
    let acc = accepted.clone();
    let xt = host
        .spawn(x, move |_cx: &mut Cx<'_>, st: &mut St| {
            let now = st.stack.now();
            if st.stack.listener_mut(lx).accept(now).is_ok() {
                acc.fetch_add(1, Ordering::Relaxed);
            }
            Status::Wait
        })
        .unwrap();
    let yt = host
        .spawn(y, |_cx: &mut Cx<'_>, _st: &mut St| Status::Wait)
        .unwrap();
    host.state_mut().register_listener(lx, x, xt);
    host.state_mut().register_listener(ly, y, yt);
    host.run_until_idle(100);
    let (x0, y0) = (host.usage(x).runs, host.usage(y).runs);

    client
        .tcp_connect(SocketAddrV4::new(B, 80), None, client.now())
        .unwrap();
    client.poll(client.now());
    // The receive task only queues the SYN on the listener's channel.
    assert_eq!(host.step(), host.receive_task());
    assert_eq!(host.stack().tcp_stats().segments_in, 0);
    for _ in 0..20 {
        host.run_until_idle(100);
        let now = client.now();
        client.poll(now);
        client.tcp_service(now, 64);
    }
    assert!(host.stack().tcp_stats().segments_in >= 2, "SYN and ACK");
    assert_eq!(accepted.load(Ordering::Relaxed), 1);
    assert!(host.usage(x).runs > x0 + 1, "x's handler and task ran");
    assert_eq!(host.usage(y).runs, y0, "y's handler never ran");
    assert!(host.usage(x).cpu_ns > 0);
}

#[test]
fn without_a_receive_task_owners_are_woken_by_their_channels() {
    // ni-lrp-style operation: nobody on the host receives; here the test
    // stands in for the NI core by polling the stack (demux only) itself.
    let (a, b) = WirePair::new(WireConfig::default()).unwrap();
    let mut client = Stack::new(a, cfg(A, ReceiveMode::SoftLrp));
    let mut server = Stack::new(b, cfg(B, ReceiveMode::SoftLrp));
    client.set_neighbor(B, server.mac());
    server.set_neighbor(A, client.mac());
    let mut host: H = Host::new(
        server,
        App::default(),
        StepClock::default(),
        HostConfig::ni_lrp(),
    )
    .unwrap();
    assert!(host.receive_task().is_none());
    let (_srv, _) = udp_server(&mut host, 7000, true);
    host.run_until_idle(100);
    send_udp(&mut client, 7000);
    host.run_until_idle(100);
    assert_eq!(host.app().got, 0, "nothing demultiplexed the frame yet");
    let now = host.stack().now();
    host.state_mut().stack.poll(now); // the "NI"
    host.run_until_idle(100);
    assert_eq!(host.app().got, 1);
}

/// Floods the host's ring (8 frames before every step, 2000 steps) beside
/// an always-ready burner; returns (receive-task ns, burner iterations,
/// elapsed ns, share of the classified frames that were dropped, longest
/// receive iteration).
fn flood(mode: ReceiveMode, hcfg: HostConfig) -> (u64, u64, u64, f64, u64) {
    let (mut client, mut host) = setup_with(mode, hcfg);
    let (_srv, _) = udp_server(&mut host, 7000, false);
    let (burn, _) = burner(&mut host, u64::MAX);
    host.run_until(u64::MAX, 10);
    host.reset_usage();
    let t0 = host.now_ns();
    let d0 = host.stack().demux().stats().clone();
    let s = client
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0), None)
        .unwrap();
    for _ in 0..2_000 {
        for _ in 0..8 {
            let _ = client
                .udp_mut(s)
                .send_to(b"x", SocketAddrV4::new(B, 7000), 0);
        }
        client.poll(0);
        host.step();
    }
    let net = host.usage(host.net_owner());
    let d1 = host.stack().demux().stats();
    let frames = (d1.frames - d0.frames).max(1);
    let dropped = d1.dropped() - d0.dropped();
    (
        net.task_ns,
        host.usage(burn).iterations,
        host.now_ns() - t0,
        dropped as f64 / frames as f64,
        net.max_iteration_ns,
    )
}

#[test]
fn soft_lrp_receive_budget_keeps_the_core_for_owners_and_leaves_frames_on_the_ring() {
    // A small burst, so that the share shows within the test.
    let budget = RxBudget {
        burst_ns: 1_000,
        ..RxBudget::SOFT_LRP
    };
    let soft = HostConfig {
        rx_budget: Some(budget),
        ..HostConfig::for_mode(ReceiveMode::SoftLrp)
    };
    let (rx_ns, burner_iters, elapsed, wasted, longest) = flood(ReceiveMode::SoftLrp, soft);
    let share = budget.share_ppm as f64 / 1e6;
    // The budget bounds the receive task's time on frames it then dropped
    // (the channel fills after its first 256 frames; the rest is waste),
    // give or take the burst, one iteration (a bucket is overdrawn by at
    // most the iteration that emptied it) and 10% (the bucket is charged
    // per iteration by that iteration's own share of drops, which this
    // test only knows in total).
    assert!(wasted > 0.9, "the flood is mostly dropped: {wasted}");
    assert!(
        rx_ns as f64 * wasted
            <= 1.1 * share * elapsed as f64 + budget.burst_ns as f64 + longest as f64 + 1_000.0,
        "receive task ran {rx_ns} of {elapsed} ns, {wasted:.3} of it wasted"
    );
    assert!(
        burner_iters >= 50,
        "the burner ran while frames waited: {burner_iters}"
    );
    // Eager has no budget: the flood keeps the receive task running.
    let (_, eager_burner, _, _, _) =
        flood(ReceiveMode::Eager, HostConfig::for_mode(ReceiveMode::Eager));
    assert_eq!(eager_burner, 0, "livelocked");
}

#[test]
fn ni_lrp_host_serves_arp_through_its_control_task_and_owners_through_their_channels() {
    let (a, b) = WirePair::new(WireConfig::default()).unwrap();
    // No neighbours set: the client must resolve the host by ARP.
    let mut client = Stack::new(a, cfg(A, ReceiveMode::SoftLrp));
    let (server, mut engine) = Stack::new_ni_lrp(b, cfg(B, ReceiveMode::NiLrp));
    let mut host: Host<crate::stack::NiProxy, App> = Host::new(
        server,
        App::default(),
        StepClock::default(),
        HostConfig::for_mode(ReceiveMode::NiLrp),
    )
    .unwrap();
    assert!(host.receive_task().is_none());
    let o = host.add_owner("server", Class::BestEffort).unwrap();
    let h = host
        .state_mut()
        .stack
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7000), None)
        .unwrap();
    let t = host
        .spawn(
            o,
            move |_cx: &mut Cx<'_>, st: &mut HostState<crate::stack::NiProxy, App>| match st
                .stack
                .udp_mut(h)
                .recv_with(|_, _| ())
            {
                Ok(()) => {
                    st.app.got += 1;
                    Status::Ready
                }
                Err(_) => Status::Wait,
            },
        )
        .unwrap();
    host.state_mut().register_udp(h, o, t);
    let s = client
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0), None)
        .unwrap();
    client
        .udp_mut(s)
        .send_to(b"ping", SocketAddrV4::new(B, 7000), 0)
        .unwrap();
    for i in 0..200u64 {
        client.poll(i * 1_000_000);
        engine.step();
        host.run_until_idle(100);
        if host.app().got == 1 {
            break;
        }
    }
    assert_eq!(
        host.app().got,
        1,
        "ARP answered by the host, then delivered"
    );
    assert!(host.stack().stats().arp_handled >= 1);
    // Shutdown as ni.rs asks: quiesce with the engine stepping.
    for _ in 0..100 {
        engine.step();
        if host.state_mut().stack.ni_quiesce() {
            break;
        }
    }
    engine.finish();
}

#[test]
fn soft_lrp_receive_budget_does_not_limit_demultiplexing_its_owners_take() {
    // The same flood, but the server reads everything: no frame is dropped,
    // so the budget (which counts only wasted demultiplexing) never stops
    // the receive task, whose time may exceed the share.
    let budget = RxBudget {
        burst_ns: 1_000,
        // 0.01%: were useful demultiplexing counted, the receive task would
        // run about once per 100 rounds and the ring would overflow.
        share_ppm: 100,
    };
    let (mut client, mut host) = setup_with(
        ReceiveMode::SoftLrp,
        HostConfig {
            rx_budget: Some(budget),
            ..HostConfig::for_mode(ReceiveMode::SoftLrp)
        },
    );
    let (_srv, _) = udp_server(&mut host, 7000, true);
    // An always-ready burner: the core is never idle, so only the budget
    // decides when the receive task runs.
    let (_burn, _) = burner(&mut host, u64::MAX);
    let s = client
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0), None)
        .unwrap();
    let mut sent = 0u64;
    for _ in 0..500 {
        for _ in 0..8 {
            if client
                .udp_mut(s)
                .send_to(b"x", SocketAddrV4::new(B, 7000), 0)
                .is_ok()
            {
                sent += 1;
            }
        }
        client.poll(0);
        for _ in 0..32 {
            host.step();
        }
    }
    for _ in 0..1_000 {
        host.step();
    }
    assert_eq!(host.stack().demux().stats().dropped(), 0);
    assert_eq!(host.app().got, sent, "every datagram delivered");
    assert_eq!(client.nic().stats().tx_full, 0, "the ring never overflowed");
}

/// A periodic owner's UDP handler (`HostState::serve_udp`): one datagram
/// per iteration, delivered to the application right there, at most its
/// batch per period; the rest waits for the next releases.
#[test]
fn a_periodic_udp_handler_takes_its_batch_per_period() {
    use crate::sched::Periodic;
    let (mut client, mut h) = setup(ReceiveMode::SoftLrp);
    let o = h
        .add_owner(
            "stream",
            Class::Periodic(Periodic {
                period_ns: 1_000_000,
                batch: 4,
                iteration_ns: 20_000,
            }),
        )
        .unwrap();
    let s = h
        .state_mut()
        .stack
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9000), None)
        .unwrap();
    let t = h
        .spawn(o, move |cx: &mut Cx<'_>, st: &mut St| {
            let n = st.serve_udp(cx, s, 64, |app, p, _from| {
                assert_eq!(p, b"ping");
                app.got += 1;
            });
            if n == 0 {
                Status::Wait
            } else {
                Status::Ready
            }
        })
        .unwrap();
    h.state_mut().register_udp(s, o, t);
    for _ in 0..20 {
        send_udp(&mut client, 9000);
    }
    let t0 = h.now_ns();
    h.run_until(t0 + 900_000, 1_000_000);
    assert_eq!(h.app().got, 4, "the first period's batch");
    h.run_until(t0 + 6_500_000, 10_000_000);
    assert_eq!(h.app().got, 20);
    let u = h.usage(o);
    assert!(u.iterations >= 20, "{u:?}");
    assert!(u.releases >= 5, "{u:?}");
    assert_eq!(u.deadline_misses, 0, "{u:?}");
}

/// RTU Fig. 7 in simulation: two TCP streams beside four best-effort
/// owners that always have work; each stream needs 20% of the core (a
/// 4-KiB message every millisecond, 200 µs of the receiving application's
/// work each, simulated time), more than a fair sixth. `send`: the host's
/// owners send the streams (the work produces each message, which the
/// handler then sends: TCP output as the handler's iteration), else they
/// receive them. Returns, per stream, the bytes delivered to the receiving
/// application over 100 periods and the bytes its rate specifies, and the
/// streams' deadline misses.
fn simulated_streams(periodic: bool, send: bool) -> (Vec<(u64, u64)>, u64) {
    use crate::sched::Periodic;
    const MSG: usize = 4096;
    const WORK_NS: u64 = 200_000;
    const PERIOD: u64 = 2_000_000;
    const BATCH: u32 = 2;
    let (mut client, mut host) = setup(ReceiveMode::SoftLrp);
    let consumed: Vec<Arc<AtomicU64>> = (0..2).map(|_| Arc::new(AtomicU64::new(0))).collect();
    let mut owners = Vec::new();
    for (i, c) in consumed.iter().enumerate() {
        let class = if periodic {
            Class::Periodic(Periodic {
                period_ns: PERIOD,
                batch: BATCH,
                iteration_ns: WORK_NS + 50_000,
            })
        } else {
            Class::BestEffort
        };
        let l = host
            .state_mut()
            .stack
            .tcp_listen(SocketAddrV4::new(B, 90 + i as u16), None, None)
            .unwrap();
        let c = c.clone();
        let mut conn = None;
        // The stream's TCP input handler, which calls the application
        // (RTU §IV-A: so that the window never stalls the guarantee).
        let (o, t) = host
            .add_owner_with_handler(
                &format!("stream{i}"),
                class,
                move |cx: &mut Cx<'_>, st: &mut St| {
                    for _ in 0..16 {
                        let mut served = st.serve_tcp(cx, 16);
                        let now = st.stack.now();
                        if conn.is_none() {
                            let Ok(h) = st.stack.listener_mut(l).accept(now) else {
                                return Status::Wait;
                            };
                            st.register_tcp(h, cx.owner(), cx.task());
                            conn = Some(h);
                        }
                        let Some(h) = conn else {
                            return Status::Wait;
                        };
                        if send {
                            // One message per iteration if the send
                            // buffer takes it (else woken when it does).
                            if served == 0 && st.stack.tcp(h).send_space().unwrap_or(0) < MSG {
                                return Status::Wait;
                            }
                            if st.stack.tcp(h).send_space().unwrap_or(0) >= MSG {
                                st.app.clock.0.fetch_add(WORK_NS, Ordering::Relaxed);
                                let msg = [0xa5u8; MSG];
                                let n = st.stack.tcp_mut(h).send(&msg, now).unwrap_or(0);
                                assert_eq!(n, MSG);
                            }
                            if !cx.iteration_done() {
                                return Status::Ready;
                            }
                            continue;
                        }
                        // One whole message per iteration, the application's
                        // work called from the input handler.
                        // Segments until a message is complete: waiting with
                        // segments queued would leave them for the next wake.
                        let mut rounds = 0;
                        while st.stack.tcp(h).recv_queue().unwrap_or(0) < MSG {
                            if served == 0 {
                                return Status::Wait;
                            }
                            if rounds == 8 {
                                return Status::Ready;
                            }
                            served = st.serve_tcp(cx, 16);
                            rounds += 1;
                        }
                        let mut buf = [0u8; MSG];
                        let mut got = 0;
                        while got < MSG {
                            match st.stack.tcp_mut(h).recv(&mut buf[got..], now) {
                                Ok(n) if n > 0 => got += n,
                                _ => break,
                            }
                        }
                        st.app.clock.0.fetch_add(WORK_NS, Ordering::Relaxed);
                        c.fetch_add(got as u64, Ordering::Relaxed);
                        if !cx.iteration_done() {
                            return Status::Ready;
                        }
                    }
                    Status::Ready
                },
            )
            .unwrap();
        owners.push(o);
        host.state_mut().register_listener(l, o, t);
    }
    for _ in 0..4 {
        burner(&mut host, u64::MAX);
    }
    let now = client.now();
    let conns: Vec<TcpStream> = (0..2)
        .map(|i| {
            client
                .tcp_connect(SocketAddrV4::new(B, 90 + i), None, now)
                .unwrap()
        })
        .collect();
    let data = [0x5au8; 16 * 1024];
    let per_period = MSG as u64 * u64::from(BATCH);
    let t0 = host.now_ns();
    let (warm, end) = (t0 + 20 * PERIOD, t0 + 120 * PERIOD);
    let mut sent = [0u64; 2];
    let mut at_warm: Option<(u64, Vec<u64>)> = None;
    let load = |c: &[Arc<AtomicU64>]| -> Vec<u64> {
        c.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    };
    // Bounded: each round moves the host's clock by at least 100 µs.
    let mut buf = [0u8; 16 * 1024];
    while host.now_ns() < end {
        // Whole messages, as the application writes them.
        let target = per_period * (host.now_ns() - t0) / PERIOD / MSG as u64 * MSG as u64;
        let now = client.now();
        for (i, &c) in conns.iter().enumerate() {
            if send {
                client.tcp_service(now, 256);
                while let Ok(n) = client.tcp_mut(c).recv(&mut buf, now) {
                    if n == 0 {
                        break;
                    }
                    consumed[i].fetch_add(n as u64, Ordering::Relaxed);
                }
                continue;
            }
            for _ in 0..4 {
                let want = target.saturating_sub(sent[i]).min(data.len() as u64) as usize;
                match client.tcp_mut(c).send(&data[..want], now) {
                    Ok(n) if n > 0 => sent[i] += n as u64,
                    _ => break,
                }
            }
        }
        client.poll(now);
        client.tcp_service(now, 256);
        if at_warm.is_none() && host.now_ns() >= warm {
            at_warm = Some((host.now_ns(), load(&consumed)));
        }
        host.run_until(host.now_ns() + 100_000, 1_000_000);
    }
    let (tw, c0) = at_warm.unwrap();
    let want = per_period * (host.now_ns() - tw) / PERIOD;
    let got = load(&consumed);
    let misses = owners.iter().map(|&o| host.usage(o).deadline_misses).sum();
    (
        got.iter().zip(c0).map(|(g, c0)| (g - c0, want)).collect(),
        misses,
    )
}

#[test]
fn periodic_tcp_streams_keep_their_rate_beside_best_effort_work() {
    let (streams, misses) = simulated_streams(true, false);
    for (i, &(got, want)) in streams.iter().enumerate() {
        // Within one batch (8 KiB) of the rate: the windows' phases.
        assert!(
            got + 8192 >= want && got <= want + 8192,
            "stream {i}: {got} bytes consumed, {want} specified"
        );
    }
    assert_eq!(misses, 0);
    // The same streams as best-effort owners get a fair share, less than
    // they need: the rate above is the periodic class's doing.
    let (streams, _) = simulated_streams(false, false);
    for (i, &(got, want)) in streams.iter().enumerate() {
        assert!(
            got * 10 < want * 9,
            "best-effort stream {i}: {got} bytes consumed, {want} specified"
        );
    }
}

#[test]
fn periodic_tcp_senders_keep_their_rate_beside_best_effort_work() {
    let (streams, misses) = simulated_streams(true, true);
    for (i, &(got, want)) in streams.iter().enumerate() {
        assert!(
            got + 8192 >= want && got <= want + 8192,
            "stream {i}: {got} bytes delivered, {want} specified"
        );
    }
    assert_eq!(misses, 0);
    let (streams, _) = simulated_streams(false, true);
    for (i, &(got, want)) in streams.iter().enumerate() {
        assert!(
            got * 10 < want * 9,
            "best-effort sender {i}: {got} bytes delivered, {want} specified"
        );
    }
}

// ---- frames preempt at the next iteration boundary (RTU §III-C) ----

/// What the mid-batch tests record: the periodic handler's iterations so
/// far, and the iteration during which the reactive handler got its
/// datagram.
struct Mid<C> {
    clock: StepClock,
    client: Option<C>,
    iterations: u64,
    reacted_at: Option<u64>,
}

impl<C> Mid<C> {
    fn new(clock: StepClock, client: C) -> Self {
        Mid {
            clock,
            client: Some(client),
            iterations: 0,
            reacted_at: None,
        }
    }
}

/// A periodic owner whose one long run is a batch of 40 iterations of
/// 10 µs; during its fifth, a datagram for a reactive owner leaves the
/// client (`send`: a real frame onto the wire, and whatever else must run
/// for it to reach the host's channels). Returns the periodic iteration
/// after which the reactive owner read the datagram.
fn mid_batch<N: Nic + 'static, C: 'static>(
    mut host: Host<N, Mid<C>>,
    send: impl Fn(&mut C) + 'static,
) -> (u64, u64) {
    let per = host
        .add_owner(
            "stream",
            Class::Periodic(crate::sched::Periodic {
                period_ns: 20_000_000,
                batch: 40,
                iteration_ns: 20_000,
            }),
        )
        .unwrap();
    let bucket = crate::sched::Bucket {
        share_ppm: 100_000,
        burst_ns: 1_000_000,
    };
    let echo = host.add_owner("echo", Class::Reactive(bucket)).unwrap();
    let h = host
        .state_mut()
        .stack
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7000), None)
        .unwrap();
    let t = host
        .spawn(
            echo,
            move |_cx: &mut Cx<'_>, st: &mut HostState<N, Mid<C>>| {
                if st.stack.udp_mut(h).recv_with(|_, _| ()).is_ok() {
                    st.app.reacted_at = Some(st.app.iterations);
                }
                Status::Wait
            },
        )
        .unwrap();
    host.state_mut().register_udp(h, echo, t);
    host.spawn(
        per,
        move |cx: &mut Cx<'_>, st: &mut HostState<N, Mid<C>>| {
            for _ in 0..64 {
                st.app.iterations += 1;
                st.app.clock.0.fetch_add(10_000, Ordering::Relaxed);
                if st.app.iterations == 5 {
                    if let Some(c) = st.app.client.as_mut() {
                        send(c);
                    }
                }
                if !cx.iteration_done() {
                    break;
                }
            }
            if st.app.iterations >= 40 {
                Status::Wait
            } else {
                Status::Ready
            }
        },
    )
    .unwrap();
    for _ in 0..10_000 {
        host.step();
        if host.app().reacted_at.is_some() && host.app().iterations >= 40 {
            break;
        }
    }
    let line_wakes = host.executor().stats().line_wakes;
    (
        host.app().reacted_at.expect("the datagram was read"),
        line_wakes,
    )
}

#[test]
fn a_frame_for_a_reactive_handler_preempts_a_periodic_batch_at_the_next_boundary() {
    let (mut client, host) = setup(ReceiveMode::SoftLrp);
    let s = client
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0), None)
        .unwrap();
    let clock = StepClock::default();
    let (stack, _) = host.into_parts();
    let host = Host::new(
        stack,
        Mid::new(clock.clone(), (client, s)),
        clock,
        HostConfig::for_mode(ReceiveMode::SoftLrp),
    )
    .unwrap();
    let (at, wakes) = mid_batch(host, |(c, s): &mut (Stack<WireEnd>, UdpSocket)| {
        c.udp_mut(*s)
            .send_to(b"now", SocketAddrV4::new(B, 7000), 0)
            .unwrap();
        c.poll(0);
    });
    // Sent during iteration 5: the receive task ran at its end (the NIC's
    // ring seen through the interrupt line), then the reactive handler,
    // before the periodic handler's sixth iteration — not after its
    // batch of 40.
    assert_eq!(at, 5, "read after periodic iteration {at}");
    assert!(wakes >= 1);
}

#[test]
fn in_ni_lrp_a_frame_on_a_reactive_handlers_channel_preempts_at_the_next_boundary() {
    let (a, b) = WirePair::new(WireConfig::default()).unwrap();
    let mut client = Stack::new(a, cfg(A, ReceiveMode::SoftLrp));
    let (server, engine) = Stack::new_ni_lrp(b, cfg(B, ReceiveMode::NiLrp));
    client.set_neighbor(B, server.mac());
    let s = client
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0), None)
        .unwrap();
    let clock = StepClock::default();
    let host = Host::new(
        server,
        Mid::new(clock.clone(), (client, s, engine)),
        clock,
        HostConfig::for_mode(ReceiveMode::NiLrp),
    )
    .unwrap();
    // The NI core's part happens at once, inside iteration 5: the frame
    // is on the socket's channel while the periodic batch runs.
    let (at, wakes) = mid_batch(
        host,
        |(c, s, e): &mut (Stack<WireEnd>, UdpSocket, crate::stack::NiEngine<WireEnd>)| {
            c.udp_mut(*s)
                .send_to(b"now", SocketAddrV4::new(B, 7000), 0)
                .unwrap();
            c.poll(0);
            for _ in 0..4 {
                e.step();
            }
        },
    );
    assert_eq!(at, 5, "read after periodic iteration {at}");
    assert!(wakes >= 1);
}
