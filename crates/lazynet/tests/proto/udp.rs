//! UDP protocol rules: ephemeral port choice (RFC 6056 §3.3.1, RFC 6335 §6)
//! and drop reasons.

use std::collections::HashSet;

use lazynet::proto::udp::{PortAllocator, EPHEMERAL_FIRST, EPHEMERAL_LAST};

#[test]
fn picks_stay_in_dynamic_range_and_spread() {
    let a = PortAllocator::default();
    assert_eq!(a.range_len(), 16384);
    let mut seen = HashSet::new();
    let mut x = 12345u32;
    for _ in 0..1000 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let p = a.pick(x, |_| false).unwrap();
        assert!((EPHEMERAL_FIRST..=EPHEMERAL_LAST).contains(&p));
        seen.insert(p);
    }
    assert!(seen.len() > 900);
}

#[test]
fn finds_the_only_free_port_when_tries_cover_range() {
    let a = PortAllocator::new(50000, 50099, 100);
    for r in [0u32, 1, 57, 99, u32::MAX] {
        assert_eq!(a.pick(r, |p| p != 50042), Some(50042));
    }
}

#[test]
fn full_range_gives_none_within_bound() {
    let a = PortAllocator::new(1, 65535, 10);
    assert_eq!(a.pick(u32::MAX, |_| true), None);
}
