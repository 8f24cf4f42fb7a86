//! The cost of delayed preemption: one `Cx::iteration_done` per iteration
//! (a clock read, the iteration's accounting, the check for due releases
//! and remote wakes), against the same handler loop without it, for a
//! best-effort and a periodic owner. The executor's own cost per run
//! (picking an owner, timing and charging the run) is the "one iteration
//! per run" case.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lazynet::sched::{Class, Cx, Executor, Periodic, SchedConfig, Status, TscClock};

const ITERS: u64 = 1024;

/// A unit of handler work: a few dependent operations, like touching a
/// descriptor.
#[inline(always)]
fn work(x: &mut u64) {
    *x = black_box(x.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(7));
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("sched");
    g.throughput(Throughput::Elements(ITERS));
    // The periodic owner declares no cost (so admission takes it and its
    // batch never runs out within the measurement); every iteration then
    // counts as an overrun, which only costs the check it would cost
    // anyway, and demotion is off.
    let cfg = SchedConfig {
        demote_after: u32::MAX,
        ..SchedConfig::default()
    };
    for (name, class) in [
        ("best_effort", Class::BestEffort),
        (
            "periodic",
            Class::Periodic(Periodic {
                period_ns: 1_000_000_000,
                batch: u32::MAX,
                iteration_ns: 0,
            }),
        ),
    ] {
        let mut ex: Executor<u64> = Executor::new(TscClock::new(), cfg);
        let o = ex.add_owner(name, class).expect("admitted");
        ex.spawn(o, |cx: &mut Cx<'_>, x: &mut u64| {
            for _ in 0..ITERS {
                work(x);
                if !cx.iteration_done() {
                    break;
                }
            }
            Status::Ready
        })
        .expect("spawn");
        let mut st = 1u64;
        g.bench_function(format!("{name}/iteration_done_per_iteration"), |b| {
            b.iter(|| ex.run_once(&mut st))
        });
    }
    let mut ex: Executor<u64> = Executor::new(TscClock::new(), cfg);
    let o = ex.add_owner("plain", Class::BestEffort).expect("owner");
    ex.spawn(o, |_cx: &mut Cx<'_>, x: &mut u64| {
        for _ in 0..ITERS {
            work(x);
        }
        Status::Ready
    })
    .expect("spawn");
    let mut st = 1u64;
    g.bench_function("best_effort/no_check", |b| b.iter(|| ex.run_once(&mut st)));
    let mut ex: Executor<u64> = Executor::new(TscClock::new(), cfg);
    let o = ex.add_owner("runs", Class::BestEffort).expect("owner");
    ex.spawn(o, |_cx: &mut Cx<'_>, x: &mut u64| {
        work(x);
        Status::Ready
    })
    .expect("spawn");
    g.throughput(Throughput::Elements(1));
    g.bench_function("best_effort/one_iteration_per_run", |b| {
        b.iter(|| ex.run_once(&mut st))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
