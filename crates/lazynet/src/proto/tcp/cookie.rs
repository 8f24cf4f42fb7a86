//! SYN cookies (RFC 4987 §3.6): a listener whose SYN queue is full answers
//! a SYN with a SYN-ACK whose ISS encodes what it needs to rebuild the
//! connection from the final ACK, and keeps no state.
//!
//! **Owns:** the cookie layout and its checks. **May not touch:** clocks,
//! randomness, I/O, the listener's queues; the key is a [`Secret`].
//!
//! Layout of the 32-bit ISS (most significant bit first):
//!
//! ```text
//!  31      27 26  24 23                                0
//! +----------+------+-----------------------------------+
//! | t mod 32 | MSS  |  24-bit SipHash(4-tuple, peer ISN,|
//! |  5 bits  | idx  |             t, MSS idx)           |
//! +----------+------+-----------------------------------+
//! ```
//!
//! `t = now / 64 s`. A cookie is valid while its counter is the current or
//! the previous period (so 64..128 s of life), and only if the hash over
//! the full counter matches; the MSS index is under the hash too.
//!
//! **Options.** The ISS has room for the MSS only. When the SYN carries
//! timestamps (RFC 7323), the other options ride in the low
//! [`TS_OPT_BITS`] bits of the SYN-ACK's TSval, which the peer must echo
//! in the final ACK's TSecr (RFC 7323 §4.3) — the place Linux uses too:
//!
//! ```text
//!  TSval:  31 ............ 5 |    4     | 3 .. 0
//!         clock (ms), masked | SACK-OK  | peer's window shift (15 = none)
//! ```
//!
//! The SYN-ACK offers window scaling and SACK-permitted only then: without
//! timestamps nothing could carry the peer's shift back, and a connection
//! built from such a cookie runs with MSS only. The option bits are not
//! under the hash: a peer that alters them only changes its own
//! connection, and a TSecr that is not a recent TSval of ours
//! ([`decode_ts`]) is taken as no options at all. The TSval is never ahead
//! of the clock, so the connection's later TSvals do not go backwards
//! (RFC 7323 §5.4); its first RTT sample from the echo reads at most
//! 2^5 − 1 ms long.

use std::net::SocketAddrV4;

use super::secret::Secret;
use crate::wire::tcp::SeqNumber;

/// The MSS values a cookie can carry (3 bits), ascending.
pub const MSS_TABLE: [u16; 8] = [536, 1220, 1300, 1440, 1460, 4312, 8960, 9000];

/// Length of one counter period.
pub const PERIOD_NS: u64 = 64 * 1_000_000_000;

const HASH_MASK: u32 = 0x00ff_ffff;

/// Low bits of a cookie SYN-ACK's TSval that carry the SYN's options.
pub const TS_OPT_BITS: u32 = 5;
const TS_OPT_MASK: u32 = (1 << TS_OPT_BITS) - 1;
const TS_WS_NONE: u32 = 0xF;
const TS_SACK: u32 = 1 << 4;
/// How old (ms) an echoed TSval may be: a cookie lives two periods.
const TS_MAX_AGE_MS: u32 = (2 * PERIOD_NS / 1_000_000) as u32;

/// The options of a SYN that a cookie keeps beyond the MSS (in the
/// timestamp, see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SynOptions {
    /// The peer's window shift (RFC 7323 §2.2), if it offered scaling.
    pub wscale: Option<u8>,
    /// The peer sent SACK-permitted (RFC 2018).
    pub sack: bool,
}

/// The TSval of a cookie SYN-ACK sent at timestamp clock `ts_now` for a
/// SYN with options `o`: the clock with its low [`TS_OPT_BITS`] bits
/// replaced by `o`, moved one step back if that would be ahead of it.
pub fn encode_ts(ts_now: u32, o: SynOptions) -> u32 {
    let ws = o.wscale.map_or(TS_WS_NONE, |w| u32::from(w.min(14)));
    let bits = ws | if o.sack { TS_SACK } else { 0 };
    let v = (ts_now & !TS_OPT_MASK) | bits;
    if (v.wrapping_sub(ts_now) as i32) > 0 {
        v.wrapping_sub(TS_OPT_MASK + 1)
    } else {
        v
    }
}

/// The options in the TSecr of a cookie's final ACK received at
/// timestamp clock `ts_now`, or `None` if `tsecr` cannot be a TSval we
/// sent for a live cookie (from the future, or older than two periods).
pub fn decode_ts(tsecr: u32, ts_now: u32) -> Option<SynOptions> {
    let age = ts_now.wrapping_sub(tsecr);
    if (age as i32) < 0 || age > TS_MAX_AGE_MS {
        return None;
    }
    let ws = tsecr & 0xF;
    Some(SynOptions {
        wscale: (ws != TS_WS_NONE).then_some(ws as u8),
        sack: tsecr & TS_SACK != 0,
    })
}

fn counter(now: u64) -> u64 {
    now / PERIOD_NS
}

/// The largest table entry not above `mss` (536 if `mss` is below all).
pub fn mss_index(mss: u16) -> u8 {
    let mut idx = 0u8;
    for (i, &m) in MSS_TABLE.iter().enumerate() {
        if m <= mss {
            idx = i as u8;
        }
    }
    idx
}

fn cookie_bits(
    secret: &Secret,
    l: SocketAddrV4,
    r: SocketAddrV4,
    peer_isn: SeqNumber,
    t: u64,
    idx: u8,
) -> u32 {
    (secret.cookie_hash(l, r, peer_isn, t, idx) as u32) & HASH_MASK
}

/// Encodes a cookie ISS for a SYN from `remote` to `local` with sequence
/// number `peer_isn` and MSS option `mss` (536 if absent, RFC 9293
/// §3.7.1). Returns the ISS and the MSS the cookie carries (the largest
/// table entry not above `mss`).
pub fn encode(
    secret: &Secret,
    local: SocketAddrV4,
    remote: SocketAddrV4,
    peer_isn: SeqNumber,
    mss: u16,
    now: u64,
) -> (SeqNumber, u16) {
    let t = counter(now);
    let idx = mss_index(mss);
    let h = cookie_bits(secret, local, remote, peer_isn, t, idx);
    let iss = (((t % 32) as u32) << 27) | (u32::from(idx) << 24) | h;
    (SeqNumber(iss), MSS_TABLE[usize::from(idx)])
}

/// Checks the final ACK of a cookie handshake: `ack_number` is its ACK
/// field (our ISS + 1), `peer_seq` its SEQ (the peer's ISN + 1). Returns
/// the MSS the cookie carries if it was made by us for this 4-tuple in the
/// current or the previous period.
pub fn validate(
    secret: &Secret,
    local: SocketAddrV4,
    remote: SocketAddrV4,
    ack_number: SeqNumber,
    peer_seq: SeqNumber,
    now: u64,
) -> Option<u16> {
    let iss = (ack_number + u32::MAX).0; // ack - 1
    let peer_isn = peer_seq + u32::MAX; // seq - 1
    let t_now = counter(now);
    let t5 = u64::from(iss >> 27);
    let idx = ((iss >> 24) & 7) as u8;
    // The most recent full counter not after t_now with these low 5 bits.
    let age = (t_now % 32 + 32 - t5) % 32;
    if age > 1 || age > t_now {
        return None;
    }
    let t = t_now - age;
    if cookie_bits(secret, local, remote, peer_isn, t, idx) != iss & HASH_MASK {
        return None;
    }
    Some(MSS_TABLE[usize::from(idx)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const L: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80);
    const R: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 40000);
    const S: u64 = 1_000_000_000;

    fn secret() -> Secret {
        Secret::new(*b"cookie-test-key!")
    }

    #[test]
    fn round_trip_each_mss() {
        let s = secret();
        for (i, &m) in MSS_TABLE.iter().enumerate() {
            let now = 1000 * S + i as u64;
            let (iss, eff) = encode(&s, L, R, SeqNumber(777), m, now);
            assert_eq!(eff, m);
            assert_eq!(validate(&s, L, R, iss + 1, SeqNumber(778), now), Some(m));
        }
    }

    #[test]
    fn options_ride_in_the_timestamp() {
        for ts_now in [0u32, 31, 32, 1000, 1_000_000_007, u32::MAX, u32::MAX - 40] {
            for ws in (0..=14).map(Some).chain([None]) {
                for sack in [false, true] {
                    let o = SynOptions { wscale: ws, sack };
                    let v = encode_ts(ts_now, o);
                    // Never ahead of the clock, at most 2^5 + 31 ms behind.
                    let behind = ts_now.wrapping_sub(v);
                    assert!((behind as i32) >= 0 && behind < 64, "{ts_now} -> {v}");
                    assert_eq!(decode_ts(v, ts_now), Some(o));
                    assert_eq!(decode_ts(v, ts_now.wrapping_add(60_000)), Some(o));
                }
            }
        }
    }

    #[test]
    fn implausible_echo_carries_no_options() {
        let o = SynOptions {
            wscale: Some(7),
            sack: true,
        };
        let v = encode_ts(5_000_000, o);
        assert_eq!(decode_ts(v, 4_999_000), None, "from the future");
        assert_eq!(
            decode_ts(v, 5_000_000 + TS_MAX_AGE_MS + 64),
            None,
            "too old"
        );
        assert_eq!(decode_ts(0, 5_000_000), None);
    }

    #[test]
    fn mss_rounds_down() {
        assert_eq!(mss_index(0), 0);
        assert_eq!(mss_index(1459), 3);
        assert_eq!(mss_index(1460), 4);
        assert_eq!(mss_index(u16::MAX), 7);
        let (_, eff) = encode(&secret(), L, R, SeqNumber(1), 1000, 0);
        assert_eq!(eff, 536);
    }

    #[test]
    fn wrong_tuple_or_ack_refused() {
        let s = secret();
        let now = 5 * S;
        let (iss, _) = encode(&s, L, R, SeqNumber(777), 1460, now);
        let r2 = SocketAddrV4::new(*R.ip(), 40001);
        assert_eq!(validate(&s, L, r2, iss + 1, SeqNumber(778), now), None);
        assert_eq!(validate(&s, R, L, iss + 1, SeqNumber(778), now), None);
        assert_eq!(validate(&s, L, R, iss + 2, SeqNumber(778), now), None);
        assert_eq!(validate(&s, L, R, iss, SeqNumber(778), now), None);
        assert_eq!(validate(&s, L, R, iss + 1, SeqNumber(779), now), None);
        let other = Secret::new(*b"another-key-....");
        assert_eq!(validate(&other, L, R, iss + 1, SeqNumber(778), now), None);
        // Forging a larger MSS index breaks the hash.
        let forged = SeqNumber(iss.0 ^ (1 << 24));
        assert_eq!(validate(&s, L, R, forged + 1, SeqNumber(778), now), None);
    }

    #[test]
    fn counter_window() {
        let s = secret();
        let t0 = 100 * PERIOD_NS + 5;
        let (iss, _) = encode(&s, L, R, SeqNumber(1), 1460, t0);
        let ok = |now| validate(&s, L, R, iss + 1, SeqNumber(2), now);
        assert_eq!(ok(t0), Some(1460));
        assert_eq!(ok(t0 + PERIOD_NS), Some(1460)); // previous period
        assert_eq!(ok(t0 + 2 * PERIOD_NS), None); // expired
        assert_eq!(ok(t0 + 32 * PERIOD_NS), None); // counter wrapped: hash differs
        assert_eq!(ok(t0 - PERIOD_NS), None); // from the future
                                              // At time 0 there is no previous period.
        let (iss0, _) = encode(&s, L, R, SeqNumber(1), 1460, 0);
        assert_eq!(validate(&s, L, R, iss0 + 1, SeqNumber(2), 0), Some(1460));
    }

    #[test]
    fn forged_acks_rarely_validate() {
        // A deterministic LCG stands in for an attacker's guesses; a valid
        // guess needs the right counter (2/32) and 24 hash bits.
        let s = secret();
        let mut x: u64 = 0x1234_5678;
        let mut hits = 0;
        for _ in 0..200_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let ack = SeqNumber((x >> 32) as u32);
            if validate(&s, L, R, ack, SeqNumber(778), 10 * PERIOD_NS).is_some() {
                hits += 1;
            }
        }
        assert!(hits <= 2, "{hits} forged cookies validated");
    }
}
