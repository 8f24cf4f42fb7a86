//! UDP protocol rules that are not parsing (RFC 768, RFC 6056, RFC 6335).
//!
//! **Owns:** the ephemeral port range and the choice of a local port
//! ([`PortAllocator`]). Checksum-field rules live in `wire::udp`; drop
//! reasons in `stack::StackDrop`.
//!
//! **May not touch:** datagram bytes (`wire`), the socket table (the caller
//! answers "is this port used?"), randomness (the caller passes a random
//! value drawn from its seeded generator), clocks or I/O.

/// First port of the IANA dynamic/private range (RFC 6335 §6).
pub const EPHEMERAL_FIRST: u16 = 49152;
/// Last port of the IANA dynamic/private range (RFC 6335 §6).
pub const EPHEMERAL_LAST: u16 = 65535;

/// Picks a free local port (RFC 6056 §3.3.1, Algorithm 1: random start,
/// then sequential search), with a bounded number of tries so that a nearly
/// full range cannot make one call expensive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortAllocator {
    first: u16,
    last: u16,
    max_tries: u32,
}

impl Default for PortAllocator {
    fn default() -> Self {
        PortAllocator::new(EPHEMERAL_FIRST, EPHEMERAL_LAST, 1024)
    }
}

impl PortAllocator {
    /// Ports `first..=last` (swapped if given in reverse; port 0 excluded),
    /// at most `max_tries` (≥ 1) probes per call.
    pub fn new(first: u16, last: u16, max_tries: u32) -> Self {
        let (a, b) = if first <= last {
            (first, last)
        } else {
            (last, first)
        };
        PortAllocator {
            first: a.max(1),
            last: b.max(1),
            max_tries: max_tries.max(1),
        }
    }

    /// Number of ports in the range.
    pub fn range_len(&self) -> u32 {
        u32::from(self.last) - u32::from(self.first) + 1
    }

    /// A port in the range for which `is_used` is false, starting at a
    /// position chosen by `random` and probing sequentially; `None` after
    /// `min(max_tries, range)` used ports. Work: at most that many calls of
    /// `is_used`.
    pub fn pick(&self, random: u32, is_used: impl Fn(u16) -> bool) -> Option<u16> {
        let n = self.range_len();
        let start = random % n;
        (0..self.max_tries.min(n))
            .map(|i| self.first + ((start + i) % n) as u16)
            .find(|&p| !is_used(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pick_skips_used_and_wraps() {
        let a = PortAllocator::default();
        assert_eq!(a.pick(0, |_| false), Some(EPHEMERAL_FIRST));
        assert_eq!(a.pick(16383, |p| p == 65535), Some(49152));
        assert_eq!(a.pick(7, |_| true), None);
        let small = PortAllocator::new(10, 12, 100);
        assert_eq!(small.pick(1, |p| p != 10), Some(10));
    }

    #[test]
    fn pick_bounded_tries() {
        use core::cell::Cell;
        let calls = Cell::new(0u32);
        let a = PortAllocator::new(EPHEMERAL_FIRST, EPHEMERAL_LAST, 5);
        assert_eq!(
            a.pick(123, |_| {
                calls.set(calls.get() + 1);
                true
            }),
            None
        );
        assert_eq!(calls.get(), 5);
    }
}
