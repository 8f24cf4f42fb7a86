//! ICMP error rate limiting (RFC 1812 §4.3.2.8) and suppression rules
//! (RFC 1122 §3.2.2), with explicit time.

use lazynet::proto::icmp::{
    is_error_type, may_send_error, ErrorContext, IcmpSuppress, RateLimiter,
};

const S: u64 = 1_000_000_000;

#[test]
fn starts_full_allows_burst_then_suppresses() {
    let mut l = RateLimiter::new(100, 5, 0);
    assert_eq!((0..10).filter(|_| l.allow(0)).count(), 5);
    assert_eq!((l.allowed(), l.suppressed()), (5, 5));
}

#[test]
fn refills_at_rate_without_drift() {
    let mut l = RateLimiter::new(100, 1, 0);
    assert!(l.allow(0));
    // One token every 10 ms, exactly.
    let mut sent = 0;
    for t in (0..=S).step_by(1_000_000) {
        if l.allow(t) {
            sent += 1;
        }
    }
    assert_eq!(sent, 100);
}

#[test]
fn long_idle_refills_only_to_burst() {
    let mut l = RateLimiter::new(1000, 50, 0);
    for _ in 0..50 {
        assert!(l.allow(0));
    }
    assert!(!l.allow(0));
    assert_eq!((0..100).filter(|_| l.allow(u64::MAX)).count(), 50);
}

#[test]
fn time_going_backwards_adds_nothing() {
    let mut l = RateLimiter::new(1, 1, 10 * S);
    assert!(l.allow(10 * S));
    assert!(!l.allow(0));
    assert!(!l.allow(10 * S + S - 1));
    assert!(l.allow(11 * S));
}

#[test]
fn zero_rate_or_burst_suppresses_all() {
    let mut l = RateLimiter::new(0, 2, 0);
    assert!(l.allow(0) && l.allow(0) && !l.allow(100 * S));
    let mut l = RateLimiter::new(1000, 0, 0);
    assert!(!l.allow(S));
}

#[test]
fn suppression_rules_do_not_spend_tokens() {
    let mut l = RateLimiter::new(1, 1, 0);
    for ctx in [
        ErrorContext {
            to_broadcast_or_multicast: true,
            ..Default::default()
        },
        ErrorContext {
            bad_source: true,
            ..Default::default()
        },
        ErrorContext {
            non_first_fragment: true,
            ..Default::default()
        },
    ] {
        assert!(may_send_error(ctx, &mut l, 0).is_err());
    }
    assert_eq!(may_send_error(ErrorContext::default(), &mut l, 0), Ok(()));
    assert_eq!(
        may_send_error(ErrorContext::default(), &mut l, 0),
        Err(IcmpSuppress::RateLimited)
    );
    assert_eq!(l.suppressed(), 1);
}

#[test]
fn error_types_per_rfc_792() {
    for t in [0u8, 8, 13, 14, 17, 18] {
        assert!(!is_error_type(t), "{t} is a query");
    }
    for t in [3u8, 4, 5, 11, 12, 42] {
        assert!(is_error_type(t), "{t} must not be answered");
    }
}
