//! Executor tests. Every test runs on a [`VirtualClock`] that moves only when
//! a task "spends CPU" by advancing it, so nothing here depends on real time.

use super::*;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

fn exec<St>(clock: &VirtualClock) -> Executor<St> {
    Executor::new(clock.clone(), SchedConfig::default())
}

/// A CPU-bound task: each iteration spends `ns` and wants more.
fn burner<St>(clock: &VirtualClock, ns: u64) -> impl FnMut(&mut Cx<'_>, &mut St) -> Status {
    let clock = clock.clone();
    move |_cx: &mut Cx<'_>, _st: &mut St| {
        clock.advance(ns);
        Status::Ready
    }
}

/// Runs one iteration at a time until the clock reaches `until`.
fn run_until<St>(ex: &mut Executor<St>, st: &mut St, clock: &VirtualClock, until: u64) {
    while clock.now_ns() < until {
        assert!(ex.run_once(st).is_some(), "went idle at {}", clock.now_ns());
    }
}

fn share(part: u64, whole: u64) -> f64 {
    part as f64 / whole as f64
}

fn check_invariant<St>(ex: &Executor<St>) {
    for o in ex.owners() {
        let u = ex.usage(o);
        assert_eq!(
            u.cpu_ns + u.charged_to_others_ns,
            u.task_ns + u.charged_from_others_ns + u.external_ns,
            "accounting identity for {o:?}: {u:?}"
        );
    }
}

// ---- priorities ----------------------------------------------------------

#[test]
fn fixed_priority_runs_strictly_first() {
    let clock = VirtualClock::new();
    let mut ex: Executor<Vec<&'static str>> = exec(&clock);
    let be = ex.add_owner("be", Class::BestEffort).unwrap();
    let low = ex.add_owner("p1", Class::Fixed(1)).unwrap();
    let high = ex.add_owner("p0", Class::Fixed(0)).unwrap();
    let idle = ex.add_owner("idle", Class::Idle).unwrap();
    let mk = |name: &'static str, n: u32| {
        let mut left = n;
        move |_cx: &mut Cx<'_>, log: &mut Vec<&'static str>| {
            log.push(name);
            left -= 1;
            if left == 0 {
                Status::Done
            } else {
                Status::Ready
            }
        }
    };
    // Spawned least urgent first, so queue order cannot explain the result.
    ex.spawn(idle, mk("idle", 2)).unwrap();
    ex.spawn(be, mk("be", 2)).unwrap();
    ex.spawn(low, mk("p1", 2)).unwrap();
    ex.spawn(high, mk("p0", 3)).unwrap();
    let mut log = Vec::new();
    let rep = ex.run_until_idle(&mut log, 100);
    assert!(rep.idle);
    assert_eq!(rep.iterations, 9);
    assert_eq!(
        log,
        ["p0", "p0", "p0", "p1", "p1", "be", "be", "idle", "idle"]
    );
}

#[test]
fn woken_higher_priority_task_runs_next_and_sets_yield_flag() {
    let clock = VirtualClock::new();
    #[derive(Default)]
    struct St {
        urgent: Option<TaskId>,
        log: Vec<&'static str>,
        saw_yield: bool,
    }
    let mut ex: Executor<St> = exec(&clock);
    let be = ex.add_owner("be", Class::BestEffort).unwrap();
    let rt = ex.add_owner("rt", Class::Fixed(0)).unwrap();
    let urgent = ex
        .spawn(rt, |_cx: &mut Cx<'_>, st: &mut St| {
            st.log.push("urgent");
            Status::Wait
        })
        .unwrap();
    ex.spawn(be, |cx: &mut Cx<'_>, st: &mut St| {
        st.log.push("be");
        assert!(!cx.should_yield());
        if let Some(t) = st.urgent.take() {
            cx.wake(t);
            st.saw_yield = cx.should_yield();
        }
        Status::Ready
    })
    .unwrap();
    let mut st = St::default();
    ex.run_once(&mut st); // urgent runs once at spawn, then waits
    st.urgent = Some(urgent);
    ex.run_until_idle(&mut st, 4);
    assert_eq!(st.log, ["urgent", "be", "urgent", "be", "be"]);
    assert!(st.saw_yield);
}

#[test]
fn same_priority_owners_take_turns() {
    let clock = VirtualClock::new();
    let mut ex: Executor<Vec<OwnerId>> = exec(&clock);
    let a = ex.add_owner("a", Class::Fixed(3)).unwrap();
    let b = ex.add_owner("b", Class::Fixed(3)).unwrap();
    for o in [a, b] {
        ex.spawn(o, |cx: &mut Cx<'_>, log: &mut Vec<OwnerId>| {
            log.push(cx.owner());
            Status::Ready
        })
        .unwrap();
    }
    let mut log = Vec::new();
    ex.run_until_idle(&mut log, 6);
    assert_eq!(log, [a, b, a, b, a, b]);
}

// ---- best-effort sharing ---------------------------------------------------

#[test]
fn three_cpu_bound_owners_get_a_third_each() {
    let clock = VirtualClock::new();
    let mut ex: Executor<()> = exec(&clock);
    // Very different iteration lengths: fairness is by time, not by turns.
    let lens = [50 * US, 100 * US, 700 * US];
    let owners: Vec<_> = lens
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let o = ex.add_owner(&format!("o{i}"), Class::BestEffort).unwrap();
            ex.spawn(o, burner(&clock, len)).unwrap();
            o
        })
        .collect();
    let rep = ex.run_for(&mut (), 30 * S);
    assert!(!rep.idle);
    let total = rep.elapsed_ns;
    for &o in &owners {
        let s = share(ex.usage(o).cpu_ns, total);
        assert!(
            (s - 1.0 / 3.0).abs() < 0.01,
            "{o:?} got {s}\n{}",
            ex.report()
        );
    }
    check_invariant(&ex);
}

#[test]
fn fair_share_holds_within_each_second_not_just_on_average() {
    let clock = VirtualClock::new();
    let mut ex: Executor<()> = exec(&clock);
    let owners: Vec<_> = (0..3)
        .map(|i| {
            let o = ex.add_owner(&format!("o{i}"), Class::BestEffort).unwrap();
            ex.spawn(o, burner(&clock, (i + 1) * 150 * US)).unwrap();
            o
        })
        .collect();
    for sec in 1..=5 {
        let before: Vec<u64> = owners.iter().map(|&o| ex.usage(o).cpu_ns).collect();
        run_until(&mut ex, &mut (), &clock, sec * S);
        for (i, &o) in owners.iter().enumerate() {
            let s = share(ex.usage(o).cpu_ns - before[i], S);
            assert!((s - 1.0 / 3.0).abs() < 0.02, "second {sec}: {o:?} got {s}");
        }
    }
}

#[test]
fn sleeping_owner_comes_back_first() {
    // BSD's preference for I/O-bound processes: little recent usage wins.
    let clock = VirtualClock::new();
    let mut ex: Executor<()> = exec(&clock);
    let busy = ex.add_owner("busy", Class::BestEffort).unwrap();
    let io = ex.add_owner("io", Class::BestEffort).unwrap();
    ex.spawn(busy, burner(&clock, MS)).unwrap();
    let c = clock.clone();
    let io_task = ex
        .spawn(io, move |_cx: &mut Cx<'_>, _: &mut ()| {
            c.advance(100 * US);
            Status::Wait
        })
        .unwrap();
    ex.run_for(&mut (), 2 * S);
    ex.wake(io_task);
    assert_eq!(ex.run_once(&mut ()), Some(io_task));
}

// ---- decay ----------------------------------------------------------------

/// `busy` runs alone for 5 s, then `late` arrives with no usage. Returns the
/// time `busy` first runs again after `late` arrived.
fn comeback_time(decay: Decay) -> (u64, Executor<()>, OwnerId, OwnerId, VirtualClock) {
    let clock = VirtualClock::new();
    let mut ex: Executor<()> = Executor::new(
        clock.clone(),
        SchedConfig {
            decay,
            ..SchedConfig::default()
        },
    );
    let busy = ex.add_owner("busy", Class::BestEffort).unwrap();
    let late = ex.add_owner("late", Class::BestEffort).unwrap();
    ex.spawn(busy, burner(&clock, MS)).unwrap();
    run_until(&mut ex, &mut (), &clock, 5 * S);
    ex.spawn(late, burner(&clock, MS)).unwrap();
    let before = ex.usage(busy).iterations;
    while ex.usage(busy).iterations == before {
        ex.run_once(&mut ());
        assert!(clock.now_ns() < 60 * S, "busy starved");
    }
    (clock.now_ns(), ex, busy, late, clock)
}

#[test]
fn busy_owner_is_not_starved_after_a_newcomer_arrives() {
    let (with_decay, mut ex, busy, late, clock) = comeback_time(Decay::Bsd);
    let (without_decay, ..) = comeback_time(Decay::None);
    // Without decay the newcomer must repay all 5 s of history; with BSD
    // decay busy's usage is at most ~3 s and shrinking.
    assert!(without_decay >= 9 * S + 900 * MS, "{without_decay}");
    assert!(with_decay <= 7 * S, "{with_decay}");
    // And afterwards they share evenly.
    let (b0, l0) = (ex.usage(busy).cpu_ns, ex.usage(late).cpu_ns);
    let t0 = clock.now_ns();
    run_until(&mut ex, &mut (), &clock, t0 + 10 * S);
    let span = clock.now_ns() - t0;
    let sb = share(ex.usage(busy).cpu_ns - b0, span);
    let sl = share(ex.usage(late).cpu_ns - l0, span);
    assert!(
        (sb - 0.5).abs() < 0.02 && (sl - 0.5).abs() < 0.02,
        "{sb} {sl}"
    );
}

#[test]
fn decay_follows_the_bsd_filter() {
    let clock = VirtualClock::new();
    let mut ex: Executor<()> = exec(&clock);
    let o = ex.add_owner("o", Class::BestEffort).unwrap();
    ex.charge_external(o, 900 * MS);
    // One runnable best-effort owner => load 1 => factor 2/3 per period.
    ex.spawn(o, |_cx: &mut Cx<'_>, _: &mut ()| Status::Wait)
        .unwrap();
    clock.set(S); // first decay is due at 1 s
    ex.run_once(&mut ()); // decays (load 1), then runs the task for 0 ns
    assert_eq!(ex.usage(o).recent_ns, 600 * MS);
    clock.set(3 * S + 10); // two more periods, nothing runnable: load 1
    ex.run_once(&mut ());
    assert_eq!(ex.usage(o).recent_ns, 600 * MS * 4 / 9);
    assert_eq!(ex.stats().decays, 3);
    // Total usage is never decayed.
    assert_eq!(ex.usage(o).cpu_ns, 900 * MS);
}

#[test]
fn fixed_decay_and_long_stall() {
    let clock = VirtualClock::new();
    let mut ex: Executor<()> = Executor::new(
        clock.clone(),
        SchedConfig {
            decay: Decay::Fixed { num: 1, den: 2 },
            decay_period_ns: 100 * MS,
            ..SchedConfig::default()
        },
    );
    let o = ex.add_owner("o", Class::BestEffort).unwrap();
    ex.charge_external(o, 800 * MS);
    clock.set(300 * MS);
    ex.run_once(&mut ());
    assert_eq!(ex.usage(o).recent_ns, 100 * MS);
    clock.set(3600 * S);
    ex.run_once(&mut ());
    assert_eq!(ex.usage(o).recent_ns, 0);
}

// ---- charging ---------------------------------------------------------------

#[test]
fn charge_to_moves_time_to_the_other_owner() {
    let clock = VirtualClock::new();
    let mut ex: Executor<()> = exec(&clock);
    let stack = ex.add_owner("stack", Class::Fixed(0)).unwrap();
    let app = ex.add_owner("app", Class::BestEffort).unwrap();
    let other = ex.add_owner("other", Class::BestEffort).unwrap();
    let c = clock.clone();
    ex.spawn(stack, move |cx: &mut Cx<'_>, _: &mut ()| {
        c.advance(10 * US); // demux: the stack's own work
        cx.charge_to(app, |cx| {
            assert_eq!(cx.charged_to(), app);
            c.advance(30 * US); // protocol work for app
            cx.charge_to(other, |_| c.advance(5 * US)); // nested
            c.advance(2 * US);
        });
        assert_eq!(cx.charged_to(), stack);
        c.advance(US);
        Status::Done
    })
    .unwrap();
    ex.run_until_idle(&mut (), 10);
    let (s, a, o) = (ex.usage(stack), ex.usage(app), ex.usage(other));
    assert_eq!(s.task_ns, 48 * US);
    assert_eq!(s.iterations, 1);
    assert_eq!(s.cpu_ns, 11 * US);
    assert_eq!(s.charged_to_others_ns, 37 * US);
    assert_eq!(a.cpu_ns, 32 * US);
    assert_eq!(a.charged_from_others_ns, 32 * US);
    assert_eq!((a.task_ns, a.iterations), (0, 0));
    assert_eq!(o.cpu_ns, 5 * US);
    assert_eq!(a.recent_ns, 32 * US);
    check_invariant(&ex);
}

#[test]
fn charge_measured_moves_part_of_a_section_to_an_owner_known_afterwards() {
    let clock = VirtualClock::new();
    let mut ex: Executor<()> = exec(&clock);
    let stack = ex.add_owner("stack", Class::Fixed(0)).unwrap();
    let app = ex.add_owner("app", Class::BestEffort).unwrap();
    let c = clock.clone();
    ex.spawn(stack, move |cx: &mut Cx<'_>, _: &mut ()| {
        let t0 = cx.now_ns();
        c.advance(40 * US); // demux of a batch: whose frames, known after
        let spent = cx.now_ns() - t0;
        cx.charge_measured(app, spent * 3 / 4); // three quarters were app's
        cx.charge_measured(app, 0); // nothing to move: no-op
        Status::Done
    })
    .unwrap();
    ex.run_until_idle(&mut (), 10);
    let (s, a) = (ex.usage(stack), ex.usage(app));
    assert_eq!(s.task_ns, 40 * US);
    assert_eq!(s.cpu_ns, 10 * US);
    assert_eq!(a.cpu_ns, 30 * US);
    assert_eq!(a.recent_ns, 30 * US);
    assert_eq!(s.charged_to_others_ns, 30 * US);
    check_invariant(&ex);
}

#[test]
fn interrupted_policy_charges_whoever_ran_last() {
    let clock = VirtualClock::new();
    let mut ex: Executor<()> = exec(&clock);
    let stack = ex.add_owner("stack", Class::Fixed(0)).unwrap();
    let a = ex.add_owner("a", Class::BestEffort).unwrap();
    let c = clock.clone();
    let irq = ex
        .spawn_with(
            stack,
            Charge::Interrupted,
            move |cx: &mut Cx<'_>, _: &mut ()| {
                c.advance(7 * US);
                let _ = cx.interrupted();
                Status::Wait
            },
        )
        .unwrap();
    // First run: core idle before => charged to the stack itself.
    ex.run_once(&mut ());
    assert_eq!(ex.usage(stack).cpu_ns, 7 * US);
    let ta = ex.spawn(a, burner(&clock, 100 * US)).unwrap();
    assert_eq!(ex.run_once(&mut ()), Some(ta));
    ex.wake(irq); // "interrupt" while a was running
    assert_eq!(ex.run_once(&mut ()), Some(irq));
    assert_eq!(ex.usage(a).cpu_ns, 107 * US);
    assert_eq!(ex.usage(a).charged_from_others_ns, 7 * US);
    assert_eq!(ex.usage(stack).cpu_ns, 7 * US);
    assert_eq!(ex.usage(stack).task_ns, 14 * US);
    // Two interrupts in a row both go to a: the interrupt task itself
    // does not count as "running".
    ex.wake(irq);
    ex.run_once(&mut ());
    assert_eq!(ex.usage(a).charged_from_others_ns, 14 * US);
    check_invariant(&ex);
}

/// The LRP fairness experiment (Table 2) in miniature: a worker and two
/// servers, all CPU-bound best-effort owners; requests for the servers
/// "arrive" every 150 µs of virtual time, waking a top-priority receive loop
/// that spends 60 µs of protocol work on each. Returns the worker's share of
/// the core spent on its *own* work.
fn worker_share(charge_correctly: bool) -> (f64, f64) {
    let clock = VirtualClock::new();
    #[derive(Default)]
    struct St {
        next_server: usize,
    }
    let mut ex: Executor<St> = exec(&clock);
    let stack = ex.add_owner("stack", Class::Fixed(0)).unwrap();
    let worker = ex.add_owner("worker", Class::BestEffort).unwrap();
    let servers = [
        ex.add_owner("rpc1", Class::BestEffort).unwrap(),
        ex.add_owner("rpc2", Class::BestEffort).unwrap(),
    ];
    for o in [worker, servers[0], servers[1]] {
        ex.spawn(o, burner(&clock, 200 * US)).unwrap();
    }
    let c = clock.clone();
    let rx = move |cx: &mut Cx<'_>, st: &mut St| {
        let dst = servers[st.next_server % 2];
        st.next_server += 1;
        if charge_correctly {
            cx.charge_to(dst, |_| c.advance(60 * US)); // LRP
        } else {
            c.advance(60 * US); // eager: charged to the interrupted owner
        }
        Status::Wait
    };
    let policy = if charge_correctly {
        Charge::Owner
    } else {
        Charge::Interrupted
    };
    let rx = ex.spawn_with(stack, policy, rx).unwrap();
    let mut st = St::default();
    ex.run_until_idle(&mut st, 10); // drain the spawn-time run of rx
    ex.reset_usage();
    let mut next_arrival = clock.now_ns();
    let t0 = clock.now_ns();
    while clock.now_ns() < t0 + 20 * S {
        ex.run_once(&mut st);
        while clock.now_ns() >= next_arrival {
            ex.wake(rx);
            next_arrival += 150 * US;
        }
    }
    check_invariant(&ex);
    let elapsed = clock.now_ns() - t0;
    let w = ex.usage(worker);
    let best_effort: u64 = [worker, servers[0], servers[1]]
        .iter()
        .map(|&o| ex.usage(o).cpu_ns)
        .sum();
    // The executor's own view (cpu_ns) stays at ~1/3 in both cases: the
    // damage is that part of the worker's "1/3" was not the worker's work.
    (share(w.task_ns, elapsed), share(w.cpu_ns, best_effort))
}

#[test]
fn mischarged_protocol_work_shows_up_as_unfairness() {
    let (lrp_own, lrp_charged) = worker_share(true);
    let (eager_own, eager_charged) = worker_share(false);
    eprintln!("worker own-work share: lrp {lrp_own:.3}, eager {eager_own:.3}");
    // Protocol work is 60/150 = 40% of the core; with it charged to the
    // servers, the worker gets 1/3 of everything, as real work.
    assert!((lrp_own - 1.0 / 3.0).abs() < 0.02, "lrp worker {lrp_own}");
    // Charged to whoever was interrupted, the worker pays for part of the
    // servers' packets and does visibly less of its own work.
    assert!(
        eager_own < lrp_own - 0.05,
        "eager {eager_own} vs lrp {lrp_own}"
    );
    // Yet the scheduler believes both are fair.
    assert!((lrp_charged - 1.0 / 3.0).abs() < 0.03, "{lrp_charged}");
    assert!((eager_charged - 1.0 / 3.0).abs() < 0.03, "{eager_charged}");
}

#[test]
fn run_on_behalf_of_charges_external_time() {
    let clock = VirtualClock::new();
    let mut ex: Executor<()> = exec(&clock);
    let o = ex.add_owner("o", Class::BestEffort).unwrap();
    let r = ex.run_on_behalf_of(o, || {
        clock.advance(42 * US);
        7
    });
    assert_eq!(r, 7);
    let u = ex.usage(o);
    assert_eq!((u.cpu_ns, u.external_ns, u.task_ns), (42 * US, 42 * US, 0));
    check_invariant(&ex);
}

// ---- waking and idling --------------------------------------------------------

#[test]
fn waiting_task_sleeps_until_woken() {
    let clock = VirtualClock::new();
    let mut ex: Executor<u32> = exec(&clock);
    let o = ex.add_owner("o", Class::BestEffort).unwrap();
    let t = ex
        .spawn(o, |_cx: &mut Cx<'_>, n: &mut u32| {
            *n += 1;
            Status::Wait
        })
        .unwrap();
    let mut n = 0;
    let rep = ex.run_until_idle(&mut n, 100);
    assert_eq!((rep.iterations, rep.idle, n), (1, true, 1));
    assert_eq!(ex.task_state(t), Some(TaskState::Waiting));
    assert!(ex.run_until_idle(&mut n, 100).idle);
    assert_eq!(n, 1);
    ex.wake(t);
    ex.wake(t); // a second wake before it runs is the same wake
    assert_eq!(ex.task_state(t), Some(TaskState::Queued));
    assert_eq!(ex.run_until_idle(&mut n, 100).iterations, 1);
    assert_eq!(n, 2);
    assert_eq!(ex.stats().idle, 3);
}

#[test]
fn wake_during_own_iteration_is_not_lost() {
    let clock = VirtualClock::new();
    let mut ex: Executor<u32> = exec(&clock);
    let o = ex.add_owner("o", Class::BestEffort).unwrap();
    ex.spawn(o, |cx: &mut Cx<'_>, n: &mut u32| {
        *n += 1;
        if *n < 3 {
            let me = cx.task();
            cx.wake(me); // e.g. more data arrived while processing
        }
        Status::Wait
    })
    .unwrap();
    let mut n = 0;
    let rep = ex.run_until_idle(&mut n, 100);
    assert_eq!((rep.iterations, n), (3, 3));
}

#[test]
fn done_task_frees_its_slot_and_stale_ids_are_ignored() {
    let clock = VirtualClock::new();
    let mut ex: Executor<u32> = Executor::new(
        clock.clone(),
        SchedConfig {
            max_tasks: 1,
            ..SchedConfig::default()
        },
    );
    let o = ex.add_owner("o", Class::BestEffort).unwrap();
    let once = |_cx: &mut Cx<'_>, n: &mut u32| {
        *n += 1;
        Status::Done
    };
    let t1 = ex.spawn(o, once).unwrap();
    assert_eq!(ex.spawn(o, once), Err(SchedError::TooManyTasks));
    let mut n = 0;
    ex.run_until_idle(&mut n, 10);
    assert_eq!(ex.task_state(t1), None);
    let t2 = ex
        .spawn(o, |_cx: &mut Cx<'_>, _: &mut u32| Status::Wait)
        .unwrap();
    assert_eq!(t1.index(), t2.index());
    ex.run_until_idle(&mut n, 10);
    ex.wake(t1); // stale: must not wake t2
    assert_eq!(ex.task_state(t2), Some(TaskState::Waiting));
    assert_eq!(ex.stats().stale_wakes, 1);
    assert_eq!(n, 1);
}

#[test]
fn remote_waker_wakes_from_another_thread() {
    let clock = VirtualClock::new();
    let mut ex: Executor<u32> = exec(&clock);
    let o = ex.add_owner("o", Class::BestEffort).unwrap();
    let tasks: Vec<TaskId> = (0..100)
        .map(|_| {
            ex.spawn(o, |_cx: &mut Cx<'_>, n: &mut u32| {
                *n += 1;
                Status::Wait
            })
            .unwrap()
        })
        .collect();
    let mut n = 0;
    ex.run_until_idle(&mut n, 1000);
    assert_eq!(n, 100);
    let waker = ex.remote_waker();
    let to_wake = [tasks[3], tasks[64], tasks[99]];
    std::thread::spawn(move || to_wake.iter().for_each(|&t| waker.wake(t)))
        .join()
        .unwrap();
    let rep = ex.run_until_idle(&mut n, 1000);
    assert_eq!((rep.iterations, n), (3, 103));
}

#[test]
fn unknown_owner_is_refused() {
    let clock = VirtualClock::new();
    let mut ex: Executor<()> = Executor::new(
        clock.clone(),
        SchedConfig {
            max_owners: 1,
            ..SchedConfig::default()
        },
    );
    let o = ex.add_owner("o", Class::BestEffort).unwrap();
    assert_eq!(
        ex.add_owner("p", Class::BestEffort),
        Err(SchedError::TooManyOwners)
    );
    let bogus = OwnerId(5);
    assert_eq!(
        ex.spawn(bogus, burner(&clock, 1)).err(),
        Some(SchedError::NoSuchOwner)
    );
    assert_eq!(ex.usage(bogus), OwnerUsage::default());
    assert_eq!(ex.owner_info(o), Some(("o", Class::BestEffort)));
}

// ---- bounded run loops ----------------------------------------------------------

#[test]
fn run_until_idle_stops_at_its_bound() {
    let clock = VirtualClock::new();
    let mut ex: Executor<()> = exec(&clock);
    let o = ex.add_owner("o", Class::BestEffort).unwrap();
    ex.spawn(o, burner(&clock, US)).unwrap();
    let rep = ex.run_until_idle(&mut (), 17);
    assert_eq!(
        rep,
        RunReport {
            iterations: 17,
            idle: false,
            elapsed_ns: 17 * US
        }
    );
}

#[test]
fn run_for_stops_once_the_budget_is_spent() {
    let clock = VirtualClock::new();
    let mut ex: Executor<()> = exec(&clock);
    let o = ex.add_owner("o", Class::BestEffort).unwrap();
    ex.spawn(o, burner(&clock, 300 * US)).unwrap();
    let rep = ex.run_for(&mut (), MS);
    // 4 iterations: the fourth starts at 900 µs and overshoots to 1.2 ms.
    assert_eq!(
        (rep.iterations, rep.idle, rep.elapsed_ns),
        (4, false, 1200 * US)
    );
    assert_eq!(ex.usage(o).max_iteration_ns, 300 * US);
}

#[test]
fn run_for_returns_at_once_when_idle() {
    let clock = VirtualClock::new();
    let mut ex: Executor<()> = exec(&clock);
    let rep = ex.run_for(&mut (), S);
    assert_eq!(
        rep,
        RunReport {
            iterations: 0,
            idle: true,
            elapsed_ns: 0
        }
    );
}

// ---- clocks and the report -------------------------------------------------------

#[test]
fn tsc_clock_is_monotonic() {
    // No timed assertion: only that it moves forward and calibrated to
    // something (1 GHz for the Instant fallback).
    let c = TscClock::calibrate(std::time::Duration::from_millis(1));
    assert!(c.ticks_per_sec() > 0);
    let mut last = c.now_ns();
    for _ in 0..1000 {
        let now = c.now_ns();
        assert!(now >= last);
        last = now;
    }
}

#[test]
fn report_prints_one_row_per_owner() {
    let clock = VirtualClock::new();
    let mut ex: Executor<()> = exec(&clock);
    for (name, class) in [
        ("stack", Class::Fixed(0)),
        ("worker", Class::BestEffort),
        ("idler", Class::Idle),
    ] {
        let o = ex.add_owner(name, class).unwrap();
        ex.spawn(o, burner(&clock, MS)).unwrap();
    }
    ex.run_until_idle(&mut (), 1);
    let text = ex.report().to_string();
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(text.contains("stack") && text.contains("fixed(0)"));
    assert!(text.contains("worker") && text.contains("best-eff"));
    assert!(text.lines().nth(1).unwrap().contains("100.0%"), "{text}");
}
