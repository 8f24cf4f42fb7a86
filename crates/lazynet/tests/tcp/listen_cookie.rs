//! SYN cookies (RFC 4987 §3.6), property tests of [`cookie::encode`] and
//! [`cookie::validate`]: round trips for any tuple, ISN, MSS and time;
//! forged ACKs practically never validate.

use std::net::{Ipv4Addr, SocketAddrV4};

use lazynet::proto::tcp::cookie::{self, MSS_TABLE, PERIOD_NS};
use lazynet::proto::tcp::Secret;
use lazynet::wire::tcp::SeqNumber;
use proptest::prelude::*;

fn addr() -> impl Strategy<Value = SocketAddrV4> {
    (any::<u32>(), any::<u16>()).prop_map(|(ip, p)| SocketAddrV4::new(Ipv4Addr::from(ip), p))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn round_trip_within_two_periods(
        key in any::<[u8; 16]>(),
        l in addr(),
        r in addr(),
        isn in any::<u32>(),
        mss in any::<u16>(),
        t0 in 0u64..(1u64 << 50),
        dt in 0u64..PERIOD_NS,
    ) {
        let s = Secret::new(key);
        let (iss, eff) = cookie::encode(&s, l, r, SeqNumber(isn), mss, t0);
        prop_assert!(MSS_TABLE.contains(&eff));
        prop_assert!(eff <= mss.max(536));
        // Valid now and for (at least) one more full period.
        prop_assert_eq!(cookie::validate(&s, l, r, iss + 1, SeqNumber(isn) + 1, t0 + dt), Some(eff));
        // Never two full periods later.
        let late = (t0 / PERIOD_NS + 2) * PERIOD_NS + dt;
        prop_assert_eq!(cookie::validate(&s, l, r, iss + 1, SeqNumber(isn) + 1, late), None);
    }

    #[test]
    fn forged_acks_almost_never_validate(
        key in any::<[u8; 16]>(),
        l in addr(),
        r in addr(),
        peer_seq in any::<u32>(),
        now in 0u64..(1u64 << 50),
        acks in prop::collection::vec(any::<u32>(), 4096),
    ) {
        // Chance per guess: 2/32 counters x 2^-24 hash = 2^-28; over
        // 512 x 4096 = 2^21 guesses the expected count is 2^-7.
        let s = Secret::new(key);
        let hits = acks
            .iter()
            .filter(|&&a| cookie::validate(&s, l, r, SeqNumber(a), SeqNumber(peer_seq), now).is_some())
            .count();
        prop_assert!(hits <= 1, "{} of {} forged cookies validated", hits, acks.len());
    }

    #[test]
    fn any_change_to_the_tuple_refuses(
        key in any::<[u8; 16]>(),
        l in addr(),
        r in addr(),
        isn in any::<u32>(),
        now in 0u64..(1u64 << 50),
        flip in 0u32..32,
    ) {
        let s = Secret::new(key);
        let (iss, _) = cookie::encode(&s, l, r, SeqNumber(isn), 1460, now);
        let r2 = SocketAddrV4::new(*r.ip(), r.port() ^ (1 << (flip % 16)));
        prop_assert_eq!(cookie::validate(&s, l, r2, iss + 1, SeqNumber(isn) + 1, now), None);
        let ip2 = Ipv4Addr::from(u32::from(*l.ip()) ^ (1 << flip));
        let l2 = SocketAddrV4::new(ip2, l.port());
        prop_assert_eq!(cookie::validate(&s, l2, r, iss + 1, SeqNumber(isn) + 1, now), None);
        let bad_ack = SeqNumber(iss.0 ^ (1 << flip)) + 1;
        prop_assert_eq!(cookie::validate(&s, l, r, bad_ack, SeqNumber(isn) + 1, now), None);
    }
}
