//! ICMP protocol rules: error rate limiting (RFC 1812 §4.3.2.8) and when an
//! error may be sent at all (RFC 1122 §3.2.2).
//!
//! **Owns:** the token bucket that limits the ICMP errors we originate, and
//! the rules deciding whether a received packet may be answered with an
//! ICMP error.
//!
//! **May not touch:** ICMP message bytes (built by `wire`), clocks (time is
//! the `now` argument, monotonic nanoseconds) or I/O.
//!
//! Limits: O(1) memory and work per call.

const NS_PER_SEC: u64 = 1_000_000_000;

/// Token-bucket limiter for ICMP error messages (RFC 1812 §4.3.2.8: a
/// router/host SHOULD limit the rate of ICMP errors it sends; RFC 1122
/// §3.2.2 gives the same advice for hosts).
///
/// `rate_per_sec` tokens are added per second, up to `burst`; each allowed
/// message takes one. Integer arithmetic in nano-tokens, no drift. A `now`
/// that goes backwards adds nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimiter {
    rate_per_sec: u64,
    cap: u64,
    tokens: u64,
    last: u64,
    allowed: u64,
    suppressed: u64,
}

impl RateLimiter {
    /// Default rate, like Linux `icmp_msgs_per_sec`.
    pub const DEFAULT_RATE: u32 = 1000;
    /// Default burst, like Linux `icmp_msgs_burst`.
    pub const DEFAULT_BURST: u32 = 50;

    /// A full bucket of `burst` tokens refilled at `rate_per_sec`, starting
    /// at time `now`. `burst` 0 suppresses everything.
    pub fn new(rate_per_sec: u32, burst: u32, now: u64) -> Self {
        let cap = u64::from(burst) * NS_PER_SEC;
        RateLimiter {
            rate_per_sec: u64::from(rate_per_sec),
            cap,
            tokens: cap,
            last: now,
            allowed: 0,
            suppressed: 0,
        }
    }

    /// May one more message be sent at `now`? Takes a token if so.
    #[must_use]
    pub fn allow(&mut self, now: u64) -> bool {
        if now > self.last {
            let add = (now - self.last).saturating_mul(self.rate_per_sec);
            self.tokens = self.tokens.saturating_add(add).min(self.cap);
            self.last = now;
        }
        if self.tokens >= NS_PER_SEC {
            self.tokens -= NS_PER_SEC;
            self.allowed += 1;
            true
        } else {
            self.suppressed += 1;
            false
        }
    }

    /// Messages allowed so far.
    pub fn allowed(&self) -> u64 {
        self.allowed
    }

    /// Messages suppressed so far.
    pub fn suppressed(&self) -> u64 {
        self.suppressed
    }
}

/// Facts about a received packet that decide whether it may be answered
/// with an ICMP error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorContext {
    /// The packet is itself an ICMP error message (or an ICMP message of
    /// unknown type).
    pub is_icmp_error: bool,
    /// Its destination was a broadcast or multicast address (IP or link).
    pub to_broadcast_or_multicast: bool,
    /// Its source does not name a single host (0.0.0.0, broadcast,
    /// multicast, class E, loopback from the wire).
    pub bad_source: bool,
    /// It is a fragment other than the first.
    pub non_first_fragment: bool,
}

/// Why no ICMP error may be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IcmpSuppress {
    /// RFC 1122 §3.2.2: never about an ICMP error.
    AboutIcmpError,
    /// RFC 1122 §3.2.2: never about a broadcast/multicast datagram.
    ToBroadcast,
    /// RFC 1122 §3.2.2: never about a datagram whose source is not a
    /// single host.
    BadSource,
    /// RFC 1122 §3.2.2: never about a non-initial fragment.
    NonFirstFragment,
    /// RFC 1812 §4.3.2.8: rate limited.
    RateLimited,
}

impl IcmpSuppress {
    /// Stable name for statistics.
    pub const fn name(self) -> &'static str {
        match self {
            IcmpSuppress::AboutIcmpError => "icmp_err_about_icmp_error",
            IcmpSuppress::ToBroadcast => "icmp_err_to_broadcast",
            IcmpSuppress::BadSource => "icmp_err_bad_source",
            IcmpSuppress::NonFirstFragment => "icmp_err_non_first_fragment",
            IcmpSuppress::RateLimited => "icmp_err_rate_limited",
        }
    }
}

/// RFC 1122 §3.2.2 then RFC 1812 §4.3.2.8: may an ICMP error be sent about
/// a packet described by `ctx`? Takes a token from `limiter` only when all
/// the other rules pass.
pub fn may_send_error(
    ctx: ErrorContext,
    limiter: &mut RateLimiter,
    now: u64,
) -> Result<(), IcmpSuppress> {
    if ctx.is_icmp_error {
        return Err(IcmpSuppress::AboutIcmpError);
    }
    if ctx.to_broadcast_or_multicast {
        return Err(IcmpSuppress::ToBroadcast);
    }
    if ctx.bad_source {
        return Err(IcmpSuppress::BadSource);
    }
    if ctx.non_first_fragment {
        return Err(IcmpSuppress::NonFirstFragment);
    }
    if !limiter.allow(now) {
        return Err(IcmpSuppress::RateLimited);
    }
    Ok(())
}

/// Is an ICMP message of `icmp_type` an error message (RFC 792, RFC 1122
/// §3.2.2)? Unknown types count as errors so we never answer them.
pub const fn is_error_type(icmp_type: u8) -> bool {
    !matches!(icmp_type, 0 | 8 | 13 | 14 | 17 | 18)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_rate() {
        let mut l = RateLimiter::new(10, 3, 0);
        assert!(l.allow(0) && l.allow(0) && l.allow(0));
        assert!(!l.allow(0));
        assert!(!l.allow(NS_PER_SEC / 10 - 1));
        assert!(l.allow(NS_PER_SEC / 10));
        assert_eq!((l.allowed(), l.suppressed()), (4, 2));
    }

    #[test]
    fn rules_before_tokens() {
        let mut l = RateLimiter::new(1, 1, 0);
        let bad = ErrorContext {
            is_icmp_error: true,
            ..Default::default()
        };
        assert_eq!(
            may_send_error(bad, &mut l, 0),
            Err(IcmpSuppress::AboutIcmpError)
        );
        assert_eq!(may_send_error(ErrorContext::default(), &mut l, 0), Ok(()));
        assert_eq!(
            may_send_error(ErrorContext::default(), &mut l, 0),
            Err(IcmpSuppress::RateLimited)
        );
        assert!(!is_error_type(8) && is_error_type(3) && is_error_type(200));
    }
}
