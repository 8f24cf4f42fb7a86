//! Property tests for `wire::checksum`: partial sums over arbitrary splits,
//! agreement with the `internet-checksum` crate, and RFC 1624 incremental
//! updates against full recomputation (including the −0 cases).

use lazynet::wire::checksum::{
    checksum, combine_at, copy_and_partial, fold, partial, pseudo_header_ipv4, update, update32,
    Checksummer,
};
use proptest::prelude::*;
use std::net::Ipv4Addr;

fn oracle(data: &[u8]) -> u16 {
    u16::from_be_bytes(internet_checksum::checksum(data))
}

fn be_bytes(w: &[u16]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

/// Splits `data` at the (sorted) cut points.
fn pieces<'a>(data: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0;
    for c in cuts {
        out.push(&data[at..c]);
        at = c;
    }
    out.push(&data[at..]);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The fused copy-and-sum copies exactly and sums exactly like
    /// `partial` (any length, any initial value, dst longer than src).
    #[test]
    fn copy_and_partial_equals_copy_then_partial(
        data in proptest::collection::vec(any::<u8>(), 0..5000),
        init in any::<u32>(),
        extra in 0usize..40,
    ) {
        let mut out = vec![0xA5u8; data.len() + extra];
        let s = copy_and_partial(&data, &mut out, init);
        prop_assert_eq!(&out[..data.len()], &data[..]);
        prop_assert!(out[data.len()..].iter().all(|&b| b == 0xA5));
        prop_assert_eq!(fold(s), fold(partial(&data, init)));
        prop_assert_eq!(s, partial(&data, init));
    }

    #[test]
    fn whole_buffer_matches_oracle(data in proptest::collection::vec(any::<u8>(), 0..3000)) {
        prop_assert_eq!(checksum(&data), oracle(&data));
    }

    /// Headers (up to 64 bytes) take their own loop: every length, every
    /// value, with an initial sum.
    #[test]
    fn short_buffers_match_oracle(
        data in proptest::collection::vec(any::<u8>(), 0..80),
        init in any::<u32>(),
    ) {
        prop_assert_eq!(checksum(&data), oracle(&data));
        let whole = !fold(partial(&data, init));
        let mut with = init.to_be_bytes().to_vec();
        with.extend_from_slice(&data);
        prop_assert_eq!(whole, oracle(&with));
    }

    #[test]
    fn arbitrary_splits_combine(
        data in proptest::collection::vec(any::<u8>(), 0..600),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let whole = checksum(&data);
        // Streaming with the Checksummer, and by hand with combine_at.
        let mut c = Checksummer::new();
        let mut sum = 0u32;
        let mut len = 0usize;
        for p in pieces(&data, &cuts) {
            c.add(p);
            sum = combine_at(sum, len, partial(p, 0));
            len += p.len();
        }
        prop_assert_eq!(c.checksum(), whole);
        prop_assert_eq!(!fold(sum), whole);
        prop_assert_eq!(fold(c.partial()), fold(partial(&data, 0)));
    }

    #[test]
    fn initial_value_is_added(
        data in proptest::collection::vec(any::<u8>(), 0..200),
        init in any::<u32>(),
    ) {
        // partial(data, init) ≡ init + sum(data)  (mod 0xFFFF)
        let a = u64::from(partial(&data, init));
        let b = u64::from(init) + u64::from(fold(partial(&data, 0)));
        prop_assert_eq!(a % 0xFFFF, b % 0xFFFF);
    }

    #[test]
    fn pseudo_header_matches_bytes(
        s in any::<[u8; 4]>(), d in any::<[u8; 4]>(), proto in any::<u8>(), len in any::<u16>(),
    ) {
        let mut b = Vec::new();
        b.extend_from_slice(&s);
        b.extend_from_slice(&d);
        b.extend_from_slice(&[0, proto]);
        b.extend_from_slice(&len.to_be_bytes());
        let p = pseudo_header_ipv4(Ipv4Addr::from(s), Ipv4Addr::from(d), proto, len);
        prop_assert_eq!(!fold(p), checksum(&b));
    }

    /// RFC 1624 eqn. 3 equals full recomputation for any data that is not
    /// all zeros (all-zero data is the one case where recomputation gives
    /// 0xFFFF, the complement of +0, which no incremental formula can know).
    #[test]
    fn update16_equals_recompute(
        mut words in proptest::collection::vec(any::<u16>(), 2..30),
        idx in any::<usize>(),
        new in prop_oneof![any::<u16>(), Just(0u16), Just(0xFFFFu16)],
    ) {
        prop_assume!(words.iter().any(|&w| w != 0));
        let i = idx % words.len();
        let c0 = checksum(&be_bytes(&words));
        let old = words[i];
        words[i] = new;
        prop_assume!(words.iter().any(|&w| w != 0));
        let inc = update(c0, old, new);
        prop_assert_eq!(inc, checksum(&be_bytes(&words)));
        let o = u16::from_be_bytes(internet_checksum::update(
            c0.to_be_bytes(), &old.to_be_bytes(), &new.to_be_bytes()));
        prop_assert_eq!(inc, o);
    }

    #[test]
    fn update32_equals_recompute(
        mut words in proptest::collection::vec(any::<u16>(), 4..30),
        idx in any::<usize>(),
        new in any::<u32>(),
    ) {
        prop_assume!(words.iter().any(|&w| w != 0));
        let i = idx % (words.len() - 1);
        let c0 = checksum(&be_bytes(&words));
        let old = (u32::from(words[i]) << 16) | u32::from(words[i + 1]);
        words[i] = (new >> 16) as u16;
        words[i + 1] = new as u16;
        prop_assume!(words.iter().any(|&w| w != 0));
        let inc = update32(c0, old, new);
        prop_assert_eq!(inc, checksum(&be_bytes(&words)));
        let o = u16::from_be_bytes(internet_checksum::update(
            c0.to_be_bytes(), &old.to_be_bytes(), &new.to_be_bytes()));
        prop_assert_eq!(inc, o);
    }

    /// The −0 case: choose the new field so the new sum is exactly 0xFFFF,
    /// where recomputation yields checksum 0x0000 (RFC 1141's formula would
    /// give 0xFFFF).
    #[test]
    fn update_to_negative_zero(
        mut words in proptest::collection::vec(any::<u16>(), 2..30),
        idx in any::<usize>(),
    ) {
        prop_assume!(words.iter().any(|&w| w != 0));
        let i = idx % words.len();
        let c0 = checksum(&be_bytes(&words));
        let old = words[i];
        words[i] = 0;
        let rest = fold(partial(&be_bytes(&words), 0));
        // rest + new = 0xFFFF (no carry), the ones' complement −0.
        let new = 0xFFFF - rest;
        words[i] = new;
        prop_assume!(words.iter().any(|&w| w != 0));
        let full = checksum(&be_bytes(&words));
        prop_assert_eq!(full, 0x0000);
        prop_assert_eq!(update(c0, old, new), full);
        let o = u16::from_be_bytes(internet_checksum::update(
            c0.to_be_bytes(), &old.to_be_bytes(), &new.to_be_bytes()));
        prop_assert_eq!(o, full);
        // And back from checksum 0x0000 to the original.
        prop_assert_eq!(update(full, new, old), c0);
    }
}

#[test]
fn negative_zero_examples() {
    // RFC 1624 §4: RFC 1141 gives 0xFFFF here; eqn. 3 gives the right 0x0000.
    assert_eq!(update(0xDD2F, 0x5555, 0x3285), 0x0000);
    // A field going from 0xFFFF (−0) to 0x0000 (+0) and back: same class.
    let d1 = [0x12u8, 0x34, 0xFF, 0xFF];
    let d2 = [0x12u8, 0x34, 0x00, 0x00];
    assert_eq!(update(checksum(&d1), 0xFFFF, 0x0000), checksum(&d2));
    assert_eq!(update(checksum(&d2), 0x0000, 0xFFFF), checksum(&d1));
    // Data summing to 0xFFFF has checksum 0x0000, never 0xFFFF.
    let d3 = [0xFFu8, 0x00, 0x00, 0xFF];
    assert_eq!(checksum(&d3), 0x0000);
    assert_eq!(oracle(&d3), 0x0000);
    // All-zero data: recomputation gives 0xFFFF.
    assert_eq!(checksum(&[0u8; 8]), 0xFFFF);
}

#[test]
fn short_buffers_of_ones_match_oracle() {
    for n in 0..80 {
        let ff = vec![0xFFu8; n];
        assert_eq!(checksum(&ff), oracle(&ff), "0xFF len {n}");
    }
}

#[test]
fn large_buffers_match_oracle() {
    for &n in &[65_535usize, 65_536 * 32 + 17, 3 * 1024 * 1024] {
        let data: Vec<u8> = (0..n).map(|i| (i * 251 + (i >> 8)) as u8).collect();
        assert_eq!(checksum(&data), oracle(&data), "len {n}");
        let ff = vec![0xFFu8; n];
        assert_eq!(checksum(&ff), oracle(&ff), "0xFF len {n}");
    }
}
