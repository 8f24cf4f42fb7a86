//! Loom model of the cross-thread channel notification of `ni-lrp`
//! (`mem::notify`): the NI pushes a frame onto a channel's ring, then arms
//! the channel's flag and, if it was not armed, pushes the channel's id onto
//! the ready ring; the host pops the id, disarms, then drains the channel.
//! No frame may be left on the channel with nobody notified.
//!
//! Run with (separate target dir, to avoid rebuilding the normal build):
//! `CARGO_TARGET_DIR=target/loom RUSTFLAGS="--cfg loom" cargo test -p lazynet --release --test loom`
#![cfg(loom)]

use lazynet::mem::{ring, ReadyFlag};
use loom::sync::Arc;

/// Two frames from the NI thread; the host services notifications once
/// concurrently and once after the NI is done. `weak` disarms with a plain
/// store (a bug loom must catch: a frame is stranded).
fn model_body(weak: bool) {
    let (mut data_p, mut data_c) = ring::heap::<u32>(2);
    let (mut ready_p, mut ready_c) = ring::heap::<u32>(2);
    let flag = Arc::new(ReadyFlag::new());
    let ni_flag = flag.clone();
    let ni = loom::thread::spawn(move || {
        for v in [1u32, 2] {
            assert!(data_p.push_one(v).is_ok(), "room for both frames");
            if ni_flag.arm() {
                assert!(ready_p.push_one(7).is_ok(), "the id is on the ring once");
            }
        }
    });
    let mut got = Vec::new();
    let mut service = |ready_c: &mut ring::Consumer<u32>, data_c: &mut ring::Consumer<u32>| {
        while let Some(id) = ready_c.pop_one() {
            assert_eq!(id, 7);
            if weak {
                flag.disarm_weak();
            } else {
                flag.disarm();
            }
            while let Some(v) = data_c.pop_one() {
                got.push(v);
            }
        }
    };
    service(&mut ready_c, &mut data_c);
    ni.join().unwrap();
    // Only what was notified is looked at: a stranded frame stays behind.
    service(&mut ready_c, &mut data_c);
    assert_eq!(got, [1, 2], "a frame was left without a notification");
}

#[test]
fn no_frame_is_stranded() {
    loom::model(|| model_body(false));
}

#[test]
fn disarm_with_a_plain_store_strands_a_frame() {
    let r = std::panic::catch_unwind(|| loom::model(|| model_body(true)));
    let err = r.expect_err("loom must find the stranded frame");
    let msg = err
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| err.downcast_ref::<&str>().copied())
        .unwrap_or("");
    eprintln!("loom caught: {msg}");
    assert!(
        msg.contains("stranded") || msg.contains("without a notification"),
        "expected the stranded-frame assertion, got: {msg}"
    );
}

/// Retiring an unbound channel's ring: the NI pushes its last frames, then
/// publishes that it applied the unbind; the host drains the ring once it
/// reads the count, and must find every frame.
#[test]
fn a_retired_ring_is_drained_completely() {
    use lazynet::mem::Applied;
    loom::model(|| {
        let (mut p, mut c) = ring::heap::<u32>(2);
        let applied = Arc::new(Applied::new());
        let ni_applied = applied.clone();
        let ni = loom::thread::spawn(move || {
            assert!(p.push(&[1, 2]) == 2);
            ni_applied.publish(1);
        });
        while applied.get() < 1 {
            loom::thread::yield_now();
        }
        let mut got = Vec::new();
        while let Some(v) = c.pop_one() {
            got.push(v);
        }
        assert_eq!(got, [1, 2], "the drain missed a frame");
        ni.join().unwrap();
    });
}
