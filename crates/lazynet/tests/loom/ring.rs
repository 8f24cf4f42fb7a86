//! Loom model checks of the SPSC ring's memory orderings.
//!
//! Run with (separate target dir, to avoid rebuilding the normal build):
//! `CARGO_TARGET_DIR=target/loom RUSTFLAGS="--cfg loom" cargo test -p lazynet --release --test loom`
#![cfg(loom)]

use lazynet::mem::ring;

/// Producer pushes 1, 2, 3 through a capacity-2 ring; the consumer must see
/// them in order. `weak` publishes with Relaxed (a bug loom must catch).
fn model_body(weak: bool, batched: bool) {
    model_at(weak, batched, 0);
}

fn model_at(weak: bool, batched: bool, start: u32) {
    let (mut p, mut c) = ring::heap_at::<u32>(2, start);
    if weak {
        p.weaken_publish_ordering();
    }
    let t = loom::thread::spawn(move || {
        let items = [1u32, 2, 3];
        let mut sent = 0;
        while sent < items.len() {
            let n = p.push(&items[sent..]);
            if n == 0 {
                loom::thread::yield_now();
            }
            sent += n;
        }
    });
    let mut got = Vec::new();
    let mut buf = [0u32; 2];
    while got.len() < 3 {
        if batched {
            let n = c.pop(&mut buf);
            got.extend_from_slice(&buf[..n]);
            if n == 0 {
                loom::thread::yield_now();
            }
        } else if let Some(v) = c.pop_one() {
            got.push(v);
        } else {
            loom::thread::yield_now();
        }
    }
    assert_eq!(got, [1, 2, 3]);
    t.join().unwrap();
}

#[test]
fn correct_ring_single_pop() {
    loom::model(|| model_body(false, false));
}

#[test]
fn correct_ring_batched_pop() {
    loom::model(|| model_body(false, true));
}

#[test]
fn correct_ring_across_u32_wraparound() {
    loom::model(|| model_at(false, true, u32::MAX - 1));
}

#[test]
fn weakened_publish_is_caught() {
    // Loom reports the race on the entry cell (the consumer reads a slot the
    // producer's write to which is not ordered before the read) as a panic.
    let r = std::panic::catch_unwind(|| loom::model(|| model_body(true, true)));
    let err = r.expect_err("loom must catch the Relaxed publish");
    let msg = err
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| err.downcast_ref::<&str>().copied())
        .unwrap_or("");
    eprintln!("loom caught: {msg}");
    assert!(
        msg.contains("Causality violation") || msg.contains("causality"),
        "expected a data race on an entry, got: {msg}"
    );
}
