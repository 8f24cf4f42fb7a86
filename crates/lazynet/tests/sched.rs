//! The executor allocates nothing per iteration after setup: spawning boxes
//! the task once; running, waking, requeueing, charging and decaying do not.
//! Its own test binary, because it installs a counting global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use lazynet::sched::{Charge, Class, Cx, Executor, SchedConfig, Status, TaskId, VirtualClock};

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[derive(Default)]
struct St {
    sleeper: Option<TaskId>,
    n: u64,
}

#[test]
fn sched_allocates_nothing_per_iteration() {
    let clock = VirtualClock::new();
    let mut ex: Executor<St> = Executor::new(
        clock.clone(),
        SchedConfig {
            decay_period_ns: 1_000_000,
            ..SchedConfig::default()
        },
    );
    let stack = ex.add_owner("stack", Class::Fixed(0)).unwrap();
    let a = ex.add_owner("a", Class::BestEffort).unwrap();
    let b = ex.add_owner("b", Class::BestEffort).unwrap();
    let c1 = clock.clone();
    let sleeper = ex
        .spawn_with(
            stack,
            Charge::Interrupted,
            move |_cx: &mut Cx<'_>, st: &mut St| {
                c1.advance(3_000);
                st.n += 1;
                Status::Wait
            },
        )
        .unwrap();
    for (o, len) in [(a, 10_000), (b, 25_000)] {
        let c = clock.clone();
        ex.spawn(o, move |cx: &mut Cx<'_>, st: &mut St| {
            c.advance(len);
            if let Some(t) = st.sleeper {
                cx.wake(t);
            }
            cx.charge_to(a, |_| c.advance(1_000));
            let _ = cx.should_yield();
            Status::Ready
        })
        .unwrap();
    }
    let waker = ex.remote_waker();
    let mut st = St {
        sleeper: Some(sleeper),
        n: 0,
    };
    ex.run_until_idle(&mut st, 10); // warm up

    COUNTING.with(|c| c.set(true));
    for _ in 0..1000 {
        ex.run_until_idle(&mut st, 10);
        waker.wake(sleeper);
        ex.run_for(&mut st, 200_000);
        let _ = ex.usage(a);
    }
    COUNTING.with(|c| c.set(false));

    assert!(st.n > 1000);
    assert!(ex.stats().decays > 100);
    assert_eq!(ALLOCS.load(Ordering::Relaxed), 0);
}
