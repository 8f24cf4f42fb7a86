//! A hostile application against the daemon, for as long as the fuzzer
//! runs: one daemon (on the in-memory wire, stepped in this thread) and one
//! hostile application kept between runs; each input is a sequence of the
//! application's actions (see `crates/lazynet/tests/daemon/hostile.rs`:
//! arbitrary buffer numbers, descriptors, commands, bytes written anywhere
//! in its area, garbage on the control socket, silent connections,
//! detaching and attaching again) interleaved with frames from the peer
//! and the daemon's steps. After each run the daemon must still answer a
//! ping. A panic, a hang or a sanitizer report is a finding.
#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/lazynet/tests/daemon/hostile.rs"]
mod hostile;

thread_local! {
    static H: RefCell<Option<(hostile::Harness, u16)>> = const { RefCell::new(None) };
}

fuzz_target!(|data: &[u8]| {
    H.with(|h| {
        let mut h = h.borrow_mut();
        let (hh, n) = h.get_or_insert_with(|| {
            let mut x = hostile::Harness::new("fuzz");
            x.hostile = x.attach_raw();
            (x, 0)
        });
        hh.run(data);
        *n = n.wrapping_add(1);
        assert!(hh.daemon_answers_ping(*n), "the daemon stopped answering");
    })
});
