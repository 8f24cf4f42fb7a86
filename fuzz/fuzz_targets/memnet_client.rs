//! A hostile MemNet client against a daemon in the offload placement, for
//! as long as the fuzzer runs: one daemon (on the in-memory wire, stepped
//! in this thread, a lazynet stack as the network) and one hostile client
//! kept between runs; each input is a sequence of the client's actions
//! (see `crates/lazynet/tests/daemon/hostile_memnet.rs`: arbitrary
//! requests with real, stale, forged and out-of-range ids, offsets and
//! lengths; completions taken or not; bytes written anywhere in its job
//! area; garbage on the control socket; detaching and attaching again).
//! After each run a well-behaved client's no-op must complete. A panic, a
//! hang or a sanitizer report is a finding.
#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;

// The MemNet harness shares the control-socket handshake of the
// multi-process one.
#[allow(dead_code)]
#[path = "../../crates/lazynet/tests/daemon/hostile.rs"]
mod hostile;
#[path = "../../crates/lazynet/tests/daemon/hostile_memnet.rs"]
mod hostile_memnet;

thread_local! {
    static H: RefCell<Option<(hostile_memnet::Harness, u32)>> = const { RefCell::new(None) };
}

fuzz_target!(|data: &[u8]| {
    H.with(|h| {
        let mut h = h.borrow_mut();
        let (hh, n) = h.get_or_insert_with(|| {
            let mut x = hostile_memnet::Harness::new("fuzz-memnet");
            x.hostile = x.attach_raw();
            (x, 0)
        });
        hh.run(data);
        *n = n.wrapping_add(1);
        assert!(hh.good_client_served(*n), "the well-behaved client was not served");
    })
});
