//! Loom model of the doorbell (`mem::doorbell`): a consumer that sleeps
//! when its ring is empty and a producer that publishes and rings. The
//! bell's own code runs, on the heap, with a mutex and condition variable
//! in the futex's place (`Doorbell::model`); a wake-up the protocol lost
//! would leave the consumer asleep forever, which loom reports as a
//! deadlock. The model can fail: a consumer that sleeps without its second
//! look at the ring (`sleep(None, || true)`) makes loom report
//! `deadlock; threads = [(Id(0), Blocked…), (Id(1), Terminated)]` (that
//! report cannot be caught as a test: loom's blocked thread panics again
//! while it unwinds, and the process aborts). (The daemon's sleep on many bells, `begin_sleep` and an
//! eventfd in `epoll`, follows the same argument but waits in the kernel,
//! which loom cannot run.)

#![cfg(loom)]

use lazynet::mem::Doorbell;
use loom::sync::atomic::AtomicU32;
use loom::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Release};

#[test]
fn a_consumer_that_sleeps_is_always_woken() {
    loom::model(|| {
        let bell = Doorbell::model();
        bell.arm();
        let data = Arc::new(AtomicU32::new(0));
        let (b2, d2) = (bell.clone(), data.clone());
        let producer = loom::thread::spawn(move || {
            d2.store(1, Release);
            b2.ring();
        });
        while data.load(Acquire) == 0 {
            bell.sleep(None, || data.load(Acquire) == 0);
        }
        producer.join().unwrap();
    });
}

#[test]
fn two_publications_wake_the_consumer_twice_or_find_it_awake() {
    loom::model(|| {
        let bell = Doorbell::model();
        bell.arm();
        let data = Arc::new(AtomicU32::new(0));
        let (b2, d2) = (bell.clone(), data.clone());
        let producer = loom::thread::spawn(move || {
            for v in 1..=2 {
                d2.store(v, Release);
                b2.ring();
            }
        });
        let mut seen = 0;
        while seen < 2 {
            let v = data.load(Acquire);
            if v > seen {
                seen = v;
                continue;
            }
            bell.sleep(None, || data.load(Acquire) == seen);
        }
        producer.join().unwrap();
    });
}
