//! IPv4 reassembly and fragmentation tests (RFC 791, RFC 815, RFC 1122
//! §3.3.2): property tests for correctness, hostile sequences for bounds.

use core::net::Ipv4Addr;

use lazynet::proto::ip::{
    fragment_plan, FragError, ReasmConfig, ReasmDrop, ReasmKey, Reassembler, MAX_PAYLOAD,
};
use proptest::prelude::*;

const S: u64 = 1_000_000_000;

fn key(ident: u16) -> ReasmKey {
    ReasmKey {
        src: Ipv4Addr::new(192, 0, 2, 1),
        dst: Ipv4Addr::new(192, 0, 2, 2),
        ident,
        protocol: 17,
    }
}

/// Small deterministic generator for data and shuffles inside a case.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn data(len: usize, seed: u64) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    (0..len).map(|_| r.next() as u8).collect()
}

/// Split `len` bytes into fragments whose sizes come from `sizes` (in
/// 8-byte units, cycled); all but the last are multiples of 8.
fn split(len: usize, sizes: &[usize]) -> Vec<(usize, usize, bool)> {
    let mut v = Vec::new();
    let mut off = 0;
    let mut i = 0;
    while off < len {
        let n = (sizes[i % sizes.len()] * 8).min(len - off);
        v.push((off, n, off + n < len));
        off += n;
        i += 1;
    }
    v
}

fn assert_bounded(r: &Reassembler) {
    assert!(r.in_progress() <= r.config().slots);
    assert!(r.bytes_in_use() <= r.config().byte_budget);
}

// ---- Correct input: any order, duplicates, partial identical overlaps ----

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn shuffled_duplicated_fragments_reassemble_exactly(
        len in 1usize..=65000,
        sizes_a in prop::collection::vec(1usize..=200, 1..8),
        sizes_b in prop::collection::vec(1usize..=200, 1..8),
        seed in any::<u64>(),
    ) {
        let orig = data(len, seed);
        let mut rng = Rng(seed ^ 0x5555 | 1);
        // All of one fragmentation, plus a random part of another one, plus
        // exact duplicates: every overlap is identical.
        let mut frags = split(len, &sizes_a);
        let other = split(len, &sizes_b);
        for f in &other {
            if rng.below(2) == 0 { frags.push(*f); }
        }
        for _ in 0..rng.below(4) {
            let f = frags[rng.below(frags.len())];
            frags.push(f);
        }
        for i in (1..frags.len()).rev() {
            frags.swap(i, rng.below(i + 1));
        }
        let mut r = Reassembler::new(ReasmConfig::default());
        let mut got = None;
        for &(off, n, more) in &frags {
            match r.insert(key(7), off, more, &[0x45; 20], &orig[off..off + n], 0) {
                Ok(Some(d)) => {
                    prop_assert!(got.is_none(), "completed twice");
                    got = Some(d.payload.to_vec());
                    break;
                }
                Ok(None) => {}
                Err(e) => prop_assert!(false, "unexpected drop {e:?}"),
            }
            assert_bounded(&r);
        }
        prop_assert_eq!(got.as_deref(), Some(&orig[..]));
        prop_assert_eq!(r.in_progress(), 0);
        prop_assert_eq!(r.bytes_in_use(), 0);
    }

    #[test]
    fn conflicting_overlap_drops_whole_datagram(
        len in 64usize..=20000,
        sizes in prop::collection::vec(1usize..=100, 1..5),
        seed in any::<u64>(),
    ) {
        let orig = data(len, seed);
        let frags = split(len, &sizes);
        prop_assume!(frags.len() >= 2);
        let mut r = Reassembler::new(ReasmConfig::default());
        // Receive all but the last fragment.
        for &(off, n, more) in &frags[..frags.len() - 1] {
            prop_assert!(r.insert(key(1), off, more, &[], &orig[off..off + n], 0).unwrap().is_none());
        }
        // A fragment over received data with one byte changed.
        let mut rng = Rng(seed | 1);
        let (off, n, _) = frags[rng.below(frags.len() - 1)];
        let mut bad = orig[off..off + n].to_vec();
        let at = rng.below(n);
        bad[at] ^= 0xff;
        prop_assert_eq!(r.insert(key(1), off, true, &[], &bad, 0).err(), Some(ReasmDrop::Overlap));
        prop_assert_eq!(r.in_progress(), 0);
        prop_assert_eq!(r.bytes_in_use(), 0);
        prop_assert_eq!(r.counters().drops(ReasmDrop::Overlap), 1);
        // The last fragment alone now starts a new, incomplete datagram.
        let &(off, n, more) = frags.last().unwrap();
        prop_assert!(r.insert(key(1), off, more, &[], &orig[off..off + n], 0).unwrap().is_none());
    }

    #[test]
    fn hostile_sequences_never_panic_and_stay_bounded(
        ops in prop::collection::vec(
            (0u16..6, 0usize..70000, 0usize..3000, any::<bool>(), any::<u8>(), 0u64..4 * S),
            1..300,
        ),
        slots in 1usize..8,
        budget_blocks in 1usize..40,
    ) {
        let mut r = Reassembler::new(ReasmConfig {
            slots,
            byte_budget: budget_blocks * 1024,
            timeout_ns: 5 * S,
        });
        let buf = [0xa5u8; 3000];
        let mut now = 0;
        for (ident, off, len, more, fill, dt) in ops {
            now += dt;
            let mut payload = buf;
            payload[..len].iter_mut().for_each(|b| *b ^= fill & 1);
            // Offsets as the wire gives them (multiples of 8) most of the
            // time, arbitrary sometimes.
            let off = if fill & 2 == 0 { off & !7 } else { off };
            let _ = r.insert(key(ident), off, more, &[], &payload[..len], now);
            assert_bounded(&r);
            if fill & 0xf0 == 0 {
                r.poll(now, |_, _| {});
            }
        }
        r.poll(u64::MAX, |_, _| {});
        prop_assert_eq!(r.in_progress(), 0);
        prop_assert_eq!(r.bytes_in_use(), 0);
    }

    #[test]
    fn hostile_dense_sequences_complete_only_consistent_data(
        ops in prop::collection::vec((0u16..3, 0usize..40, 0usize..12, any::<bool>(), any::<bool>()), 1..400),
    ) {
        // Small offsets so that overlaps, conflicting ends and completions
        // are frequent. Data is a function of the byte position, optionally
        // corrupted: anything that completes must be the uncorrupted data.
        let mut r = Reassembler::new(ReasmConfig { slots: 2, ..ReasmConfig::default() });
        // Data depends on (ident, position) so that bytes leaking between
        // datagrams or from stale arena blocks would show.
        let truth = |ident: u16, i: usize| (i as u32 * 7 + 3 + u32::from(ident) * 50) as u8;
        for (ident, unit, units, more, corrupt) in ops {
            let off = unit * 8;
            let len = if more { units * 8 } else { units * 8 + (unit % 8) };
            let mut p: Vec<u8> = (off..off + len).map(|i| truth(ident, i)).collect();
            if corrupt && len > 0 { p[len / 2] ^= 1; }
            if let Ok(Some(d)) = r.insert(key(ident), off, more, &[], &p, 0) {
                prop_assert_eq!(d.key.ident, ident);
                prop_assert!(d.payload.len() <= 40 * 8 + 12 * 8);
                for (i, &b) in d.payload.iter().enumerate() {
                    prop_assert!(b == truth(ident, i) || b == truth(ident, i) ^ 1, "byte {} = {}", i, b);
                }
            }
            assert_bounded(&r);
        }
    }

    #[test]
    fn fragment_plan_covers_payload_within_mtu(
        len in 0usize..=65515,
        mtu in 68usize..=9000,
        ihl in prop::sample::select(vec![20usize, 24, 40, 60]),
    ) {
        let plan: Vec<_> = match fragment_plan(len, mtu, ihl) {
            Ok(p) => p.collect(),
            Err(FragError::TooBig) => { prop_assert!(len + ihl > 65535); return Ok(()); }
            Err(e) => { prop_assert!(false, "{e:?}"); unreachable!() }
        };
        let mut pos = 0;
        for (i, &(off, n, more)) in plan.iter().enumerate() {
            prop_assert_eq!(off, pos);
            prop_assert!(n + ihl <= mtu);
            prop_assert_eq!(off % 8, 0);
            prop_assert_eq!(more, i + 1 < plan.len());
            if more { prop_assert!(n % 8 == 0 && n > 0); }
            pos += n;
        }
        prop_assert_eq!(pos, len);
    }

    #[test]
    fn plan_then_reassemble_round_trip(len in 0usize..=30000, mtu in 68usize..=1500, seed in any::<u64>()) {
        let orig = data(len, seed);
        let mut r = Reassembler::new(ReasmConfig::default());
        let mut frags: Vec<_> = fragment_plan(len, mtu, 20).unwrap().collect();
        frags.reverse();
        let n = frags.len();
        for (i, (off, l, more)) in frags.into_iter().enumerate() {
            let res = r.insert(key(3), off, more, &[], &orig[off..off + l], 0).unwrap();
            if i + 1 == n {
                prop_assert_eq!(res.map(|d| d.payload.to_vec()), Some(orig.clone()));
            } else {
                prop_assert!(res.is_none());
            }
        }
    }
}

// ---- Limits: slots, memory, time ----

#[test]
fn endless_distinct_idents_never_grow_memory() {
    let cfg = ReasmConfig::default();
    let mut r = Reassembler::new(cfg);
    let mut refused = 0;
    for i in 0..200_000u32 {
        let k = ReasmKey {
            ident: i as u16,
            src: Ipv4Addr::from(i),
            ..key(0)
        };
        // A middle fragment that can never complete its datagram.
        if r.insert(k, 8 * (i as usize % 8000), true, &[], &[1; 8], u64::from(i))
            .is_err()
        {
            refused += 1;
        }
        assert_bounded(&r);
    }
    assert_eq!(r.in_progress(), cfg.slots);
    assert_eq!(refused, 200_000 - 64);
    assert_eq!(r.counters().drops(ReasmDrop::NoSlot), 200_000 - 64);
    // Timeouts free everything; a real datagram then goes through.
    assert_eq!(r.poll(200_000 + 15 * S, |_, _| {}), 64);
    assert_eq!((r.in_progress(), r.bytes_in_use()), (0, 0));
    r.insert(key(1), 0, true, &[], &[2; 8], 16 * S).unwrap();
    assert!(r
        .insert(key(1), 8, false, &[], &[3; 5], 16 * S)
        .unwrap()
        .is_some());
}

#[test]
fn arena_exhaustion_drops_the_datagram_that_ran_out() {
    let mut r = Reassembler::new(ReasmConfig {
        byte_budget: 4 * 1024,
        ..ReasmConfig::default()
    });
    // Datagram 1 takes three blocks with three tiny, spread fragments.
    for b in 0..3 {
        r.insert(key(1), b * 1024, true, &[], &[1; 8], 0).unwrap();
    }
    // Datagram 2 needs two blocks at once: only one is free.
    assert_eq!(
        r.insert(key(2), 1016, true, &[], &[1; 16], 0).err(),
        Some(ReasmDrop::NoMemory)
    );
    assert_eq!(r.in_progress(), 1);
    assert_eq!(r.bytes_in_use(), 3 * 1024);
    // Datagram 1 completes and frees its blocks.
    let last = vec![4u8; 3 * 1024 - 8];
    r.insert(key(1), 8, true, &[], &last[..1016], 0).unwrap();
    r.insert(key(1), 1032, true, &[], &last[..1016], 0).unwrap();
    let d = r
        .insert(key(1), 2056, false, &[], &last[..1000], 0)
        .unwrap()
        .unwrap();
    assert_eq!(d.payload.len(), 3056);
    assert_eq!(r.bytes_in_use(), 0);
}

#[test]
fn timeout_is_from_first_fragment_not_extended() {
    let mut r = Reassembler::new(ReasmConfig {
        timeout_ns: 10 * S,
        ..ReasmConfig::default()
    });
    r.insert(key(1), 0, true, &[], &[0; 8], 0).unwrap();
    for t in 1..10 {
        r.insert(key(1), 8 * t, true, &[], &[0; 8], t as u64 * S)
            .unwrap();
        assert_eq!(r.poll(t as u64 * S, |_, _| {}), 0);
    }
    assert_eq!(r.poll(10 * S, |_, _| {}), 1);
    assert_eq!(r.in_progress(), 0);
}

#[test]
fn oversized_datagrams_refused() {
    // Ping of death: offset 65528 + 8 bytes.
    let mut r = Reassembler::new(ReasmConfig::default());
    assert_eq!(
        r.insert(key(1), 65528, false, &[], &[0; 8], 0).err(),
        Some(ReasmDrop::TooBig)
    );
    assert_eq!(
        r.insert(key(1), MAX_PAYLOAD - 7, false, &[], &[0; 7], 0)
            .err(),
        Some(ReasmDrop::Malformed)
    );
    assert_eq!(
        r.insert(key(1), MAX_PAYLOAD - 3, false, &[], &[0; 4], 0)
            .err(),
        Some(ReasmDrop::TooBig)
    );
    assert!(r
        .insert(key(2), MAX_PAYLOAD - 11, false, &[], &[0; 11], 0)
        .unwrap()
        .is_none());
    assert_eq!(
        r.insert(key(2), usize::MAX & !7, true, &[], &[0; 8], 0)
            .err(),
        Some(ReasmDrop::TooBig)
    );
}

#[test]
fn identical_duplicate_is_ignored_and_counted() {
    let mut r = Reassembler::new(ReasmConfig::default());
    r.insert(key(1), 0, true, &[], &[9; 16], 0).unwrap();
    assert!(r
        .insert(key(1), 0, true, &[], &[9; 16], 0)
        .unwrap()
        .is_none());
    assert!(r
        .insert(key(1), 8, true, &[], &[9; 8], 0)
        .unwrap()
        .is_none());
    assert_eq!(r.counters().duplicates, 2);
    assert_eq!(r.in_progress(), 1);
}
