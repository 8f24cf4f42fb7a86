//! UDP protocol rules that are not parsing (RFC 768, RFC 6056, RFC 6335).
//!
//! **Owns:** the ephemeral port range and the choice of a local port
//! ([`PortAllocator`]), the checksum-field rules, and the typed reasons a
//! UDP datagram is dropped ([`UdpDrop`]).
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

/// RFC 768: a received checksum field of 0 means "no checksum" (IPv4 only);
/// anything else must verify.
pub const fn rx_checksum_present(field: u16) -> bool {
    field != 0
}

/// RFC 768: a computed checksum of 0 is sent as 0xFFFF (0 would mean "none").
pub const fn tx_checksum_field(computed: u16) -> u16 {
    if computed == 0 {
        0xffff
    } else {
        computed
    }
}

/// Why a UDP datagram was dropped. Small, `Copy`, with a stable name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UdpDrop {
    /// Shorter than the 8-byte UDP header.
    Truncated,
    /// The UDP length field is below 8 or above the IP payload length.
    BadLength,
    /// The checksum did not verify.
    BadChecksum,
    /// Destination port 0 (not a valid destination).
    BadPort,
    /// No socket bound to the destination (answered with ICMP port
    /// unreachable, rate limited).
    NoSocket,
    /// The socket's channel was full (early discard).
    ChannelFull,
    /// The socket's receive buffer was full.
    RecvBufferFull,
    /// Addressed to a broadcast/multicast address nobody listens on.
    NoListener,
}

impl UdpDrop {
    /// Every reason, in counter order (`reason as usize` indexes it).
    pub const ALL: [UdpDrop; 8] = [
        UdpDrop::Truncated,
        UdpDrop::BadLength,
        UdpDrop::BadChecksum,
        UdpDrop::BadPort,
        UdpDrop::NoSocket,
        UdpDrop::ChannelFull,
        UdpDrop::RecvBufferFull,
        UdpDrop::NoListener,
    ];

    /// Stable name for statistics.
    pub const fn name(self) -> &'static str {
        match self {
            UdpDrop::Truncated => "udp_truncated",
            UdpDrop::BadLength => "udp_bad_length",
            UdpDrop::BadChecksum => "udp_bad_checksum",
            UdpDrop::BadPort => "udp_bad_port",
            UdpDrop::NoSocket => "udp_no_socket",
            UdpDrop::ChannelFull => "udp_channel_full",
            UdpDrop::RecvBufferFull => "udp_recv_buffer_full",
            UdpDrop::NoListener => "udp_no_listener",
        }
    }
}

/// One counter per [`UdpDrop`] reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpDropCounters(pub [u64; UdpDrop::ALL.len()]);

impl UdpDropCounters {
    /// Count one drop.
    pub fn inc(&mut self, why: UdpDrop) {
        self.0[why as usize] += 1;
    }

    /// The count for `why`.
    pub fn get(&self, why: UdpDrop) -> u64 {
        self.0[why as usize]
    }

    /// `(name, count)` pairs, for `lazynet stats`.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        UdpDrop::ALL.iter().map(|&r| (r.name(), self.get(r)))
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

    #[test]
    fn names_unique_and_indices_match() {
        for (i, r) in UdpDrop::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
        let mut names: Vec<_> = UdpDrop::ALL.iter().map(|r| r.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), UdpDrop::ALL.len());
        assert_eq!(tx_checksum_field(0), 0xffff);
        assert!(!rx_checksum_present(0));
    }
}
