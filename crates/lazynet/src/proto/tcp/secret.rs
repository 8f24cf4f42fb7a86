//! The keyed hash behind initial sequence numbers (RFC 6528), ephemeral
//! ports (RFC 6056) and SYN cookies (RFC 4987, see [`super::cookie`]), and
//! the source of the key of the listener's and TIME-WAIT table's hash
//! index (`tuple_index`, a cheaper keyed hash for the per-segment path).
//!
//! **Owns:** a 128-bit SipHash-2-4 key, given at construction (the caller
//! seeds it once at start-up from its RNG), and the per-table counter of
//! RFC 6056 Algorithm 3 ([`EphemeralPorts`]).
//!
//! **May not touch:** clocks, randomness, I/O. Time comes in as `now`
//! (nanoseconds); which ports are in use is asked through a predicate.
//!
//! Every use of the hash is domain-separated by a leading tag byte, so an
//! ISN never reveals a port offset or a cookie hash of the same tuple.

use core::hash::Hasher;
use std::net::{Ipv4Addr, SocketAddrV4};

use siphasher::sip::SipHasher24;

use crate::wire::tcp::SeqNumber;

const TAG_ISN: u8 = 1;
const TAG_PORT: u8 = 2;
const TAG_COOKIE: u8 = 3;
const TAG_INDEX: u8 = 4;
const TAG_TS: u8 = 5;

/// RFC 6528 §3: M is a timer incremented every 4 µs.
const ISN_TICK_NS: u64 = 4_000;

/// A secret key for the stack's keyed hashes (SipHash-2-4).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Secret {
    k0: u64,
    k1: u64,
}

impl core::fmt::Debug for Secret {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Never print the key.
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// A secret from a 128-bit key (seed it from a CSPRNG at start-up).
    pub fn new(key: [u8; 16]) -> Self {
        let mut a = [0u8; 8];
        let mut b = [0u8; 8];
        a.copy_from_slice(&key[..8]);
        b.copy_from_slice(&key[8..]);
        Secret {
            k0: u64::from_le_bytes(a),
            k1: u64::from_le_bytes(b),
        }
    }

    fn hasher(&self, tag: u8) -> SipHasher24 {
        let mut h = SipHasher24::new_with_keys(self.k0, self.k1);
        h.write_u8(tag);
        h
    }

    /// RFC 6528 §3: `ISN = M + F(localip, localport, remoteip, remoteport,
    /// secretkey)`, M a 4 µs timer derived from `now` (ns), F SipHash-2-4.
    pub fn isn(&self, local: SocketAddrV4, remote: SocketAddrV4, now: u64) -> SeqNumber {
        let mut h = self.hasher(TAG_ISN);
        write_addr(&mut h, local);
        write_addr(&mut h, remote);
        let f = h.finish() as u32;
        let m = (now / ISN_TICK_NS) as u32;
        SeqNumber(m.wrapping_add(f))
    }

    /// The TSval offset of a connection (RFC 7323 §5.4): a keyed hash of
    /// the 4-tuple, like the ISN's `F`, so that every incarnation of one
    /// 4-tuple counts on from the last. A new SYN then carries a TSval above
    /// the one a peer's TIME-WAIT entry holds, which is what lets the peer
    /// accept it (RFC 6191 §2); a fresh random offset per connection would
    /// make about half of them be refused and wait out a retransmission.
    pub fn ts_offset(&self, local: SocketAddrV4, remote: SocketAddrV4) -> u32 {
        let mut h = self.hasher(TAG_TS);
        write_addr(&mut h, local);
        write_addr(&mut h, remote);
        h.finish() as u32
    }

    /// RFC 6056 §3.3.3 (Algorithm 3): `F(local IP, remote IP, remote port,
    /// secret_key)`, the per-destination offset into the port range.
    pub fn port_offset(&self, local_ip: Ipv4Addr, remote: SocketAddrV4) -> u32 {
        let mut h = self.hasher(TAG_PORT);
        h.write(&local_ip.octets());
        write_addr(&mut h, remote);
        h.finish() as u32
    }

    /// The SYN-cookie hash (RFC 4987 §3.6) of the 4-tuple, the peer's ISN,
    /// the full time counter and the MSS index; 64 bits, callers truncate.
    pub(crate) fn cookie_hash(
        &self,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        peer_isn: SeqNumber,
        counter: u64,
        mss_index: u8,
    ) -> u64 {
        let mut h = self.hasher(TAG_COOKIE);
        write_addr(&mut h, local);
        write_addr(&mut h, remote);
        h.write_u32(peer_isn.0);
        h.write_u64(counter);
        h.write_u8(mss_index);
        h.finish()
    }
}

impl Secret {
    /// A 128-bit key for a hash table (`tuple_index`: [`Secret::TABLE_INDEX`];
    /// the classifier: [`Secret::TABLE_DEMUX`]), derived once per table:
    /// SipHash-2-4 of domain-separated counters, so it reveals nothing of
    /// the ISN, port or cookie hashes, nor one table's key another's.
    pub(crate) fn table_key(&self, table: u8) -> [u64; 2] {
        let word = |i: u8| {
            let mut h = self.hasher(TAG_INDEX);
            h.write_u8(table);
            h.write_u8(i);
            h.finish()
        };
        [word(0), word(1)]
    }

    /// [`Secret::table_key`] of the listener's and TIME-WAIT table's index.
    pub(crate) const TABLE_INDEX: u8 = 0;
    /// [`Secret::table_key`] of the demux classifier's tables.
    pub(crate) const TABLE_DEMUX: u8 = 1;
}

fn write_addr(h: &mut SipHasher24, a: SocketAddrV4) {
    h.write(&a.ip().octets());
    h.write_u16(a.port());
}

/// RFC 6056 §3.3.3 Algorithm 3 ("simple hash-based") port selection, one
/// per table of connections: `port = min + (next_ephemeral + offset) mod
/// num_ephemeral`, trying at most `max_tries` candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EphemeralPorts {
    min: u16,
    max: u16,
    next: u32,
    max_tries: u32,
}

impl EphemeralPorts {
    /// The IANA range (RFC 6335 §6) 49152..=65535 with up to 64 tries.
    pub const DEFAULT: EphemeralPorts = EphemeralPorts {
        min: 49152,
        max: 65535,
        next: 0,
        max_tries: 64,
    };

    /// A range `min..=max` (swapped if reversed; port 0 is never chosen)
    /// and a bound on candidates per call (at least 1).
    pub fn new(min: u16, max: u16, max_tries: u32) -> Self {
        let (min, max) = if min <= max { (min, max) } else { (max, min) };
        EphemeralPorts {
            min: min.max(1),
            max: max.max(1),
            next: 0,
            max_tries: max_tries.max(1),
        }
    }

    /// The range's bounds.
    pub fn range(&self) -> (u16, u16) {
        (self.min, self.max)
    }

    /// Picks a port for a connection from `local_ip` to `remote`: the first
    /// candidate for which `is_used` is false. Work: at most
    /// `min(max_tries, range size)` calls of `is_used`. `None` if all tried
    /// candidates are in use.
    pub fn allocate(
        &mut self,
        secret: &Secret,
        local_ip: Ipv4Addr,
        remote: SocketAddrV4,
        mut is_used: impl FnMut(u16) -> bool,
    ) -> Option<u16> {
        let num = u32::from(self.max) - u32::from(self.min) + 1;
        let offset = secret.port_offset(local_ip, remote);
        let tries = self.max_tries.min(num);
        for _ in 0..tries {
            let port = u32::from(self.min) + self.next.wrapping_add(offset) % num;
            // RFC 6056 Algorithm 3: next_ephemeral++ for every candidate.
            self.next = self.next.wrapping_add(1);
            let port = port as u16; // min + (x mod num) <= max <= u16::MAX
            if !is_used(port) {
                return Some(port);
            }
        }
        None
    }
}

impl Default for EphemeralPorts {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 16] = *b"0123456789abcdef";
    fn a(ip: u8, port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, ip), port)
    }

    #[test]
    fn isn_deterministic_for_fixed_key() {
        let s = Secret::new(KEY);
        assert_eq!(
            s.isn(a(1, 80), a(2, 5000), 0),
            s.isn(a(1, 80), a(2, 5000), 0)
        );
        let s2 = Secret::new(*b"fedcba9876543210");
        assert_ne!(
            s.isn(a(1, 80), a(2, 5000), 0),
            s2.isn(a(1, 80), a(2, 5000), 0)
        );
    }

    #[test]
    fn isn_differs_per_tuple() {
        let s = Secret::new(KEY);
        let base = s.isn(a(1, 80), a(2, 5000), 0);
        let others = [
            s.isn(a(1, 80), a(2, 5001), 0),
            s.isn(a(1, 81), a(2, 5000), 0),
            s.isn(a(1, 80), a(3, 5000), 0),
            s.isn(a(2, 5000), a(1, 80), 0),
        ];
        for o in others {
            // Unrelated: not merely a small offset from each other.
            assert!(o.diff(base).unsigned_abs() > 1 << 16, "{o:?} vs {base:?}");
        }
    }

    #[test]
    fn isn_advances_every_4us() {
        let s = Secret::new(KEY);
        let i0 = s.isn(a(1, 80), a(2, 5000), 0);
        assert_eq!(s.isn(a(1, 80), a(2, 5000), 3_999), i0);
        assert_eq!(s.isn(a(1, 80), a(2, 5000), 4_000), i0 + 1);
        assert_eq!(s.isn(a(1, 80), a(2, 5000), 1_000_000_000), i0 + 250_000);
        let mut prev = i0;
        for k in 1..100u64 {
            let i = s.isn(a(1, 80), a(2, 5000), k * 1_000_000);
            assert!(i.diff(prev) > 0);
            prev = i;
        }
    }

    #[test]
    fn ports_in_range_and_skip_used() {
        let s = Secret::new(KEY);
        let mut p = EphemeralPorts::new(40000, 40009, 100);
        let mut used = std::collections::HashSet::new();
        for _ in 0..10 {
            let port = p
                .allocate(&s, Ipv4Addr::new(10, 0, 0, 1), a(2, 80), |x| {
                    used.contains(&x)
                })
                .expect("free port");
            assert!((40000..=40009).contains(&port));
            assert!(used.insert(port));
        }
        // All ten in use: none left.
        assert_eq!(
            p.allocate(&s, Ipv4Addr::new(10, 0, 0, 1), a(2, 80), |x| used
                .contains(&x)),
            None
        );
    }

    #[test]
    fn ports_bounded_tries() {
        let s = Secret::new(KEY);
        let mut p = EphemeralPorts::new(1024, 65535, 7);
        let mut calls = 0;
        let r = p.allocate(&s, Ipv4Addr::new(10, 0, 0, 1), a(2, 80), |_| {
            calls += 1;
            true
        });
        assert_eq!(r, None);
        assert_eq!(calls, 7);
    }

    #[test]
    fn ports_sequential_for_same_destination_differ_across() {
        let s = Secret::new(KEY);
        let mut p = EphemeralPorts::DEFAULT;
        let ip = Ipv4Addr::new(10, 0, 0, 1);
        let x = p.allocate(&s, ip, a(2, 80), |_| false).unwrap();
        let y = p.allocate(&s, ip, a(2, 80), |_| false).unwrap();
        // Algorithm 3: same destination, consecutive candidates.
        let (lo, hi) = p.range();
        let n = u32::from(hi - lo) + 1;
        assert_eq!((u32::from(y - lo)) % n, (u32::from(x - lo) + 1) % n);
        let z = p.allocate(&s, ip, a(3, 80), |_| false).unwrap();
        assert!((lo..=hi).contains(&z));
    }

    #[test]
    fn degenerate_ranges() {
        let s = Secret::new(KEY);
        let mut p = EphemeralPorts::new(0, 0, 0);
        assert_eq!(p.range(), (1, 1));
        assert_eq!(
            p.allocate(&s, Ipv4Addr::LOCALHOST, a(2, 80), |_| false),
            Some(1)
        );
        let mut p = EphemeralPorts::new(65535, 1, 5);
        let port = p
            .allocate(&s, Ipv4Addr::LOCALHOST, a(2, 80), |_| false)
            .unwrap();
        assert!(port >= 1);
    }
}
