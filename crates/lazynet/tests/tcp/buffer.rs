//! The receive/send ring and the out-of-order interval set against simple
//! models.

use lazynet::proto::tcp::buffer::{Intervals, Ring, MAX_INTERVALS};
use lazynet::wire::tcp::SeqNumber;
use proptest::prelude::*;
use std::collections::VecDeque;

#[test]
fn ring_wraps_and_peeks() {
    let mut r = Ring::new(8);
    assert_eq!(r.push(b"abcdef"), 6);
    let mut o = [0; 4];
    assert_eq!(r.read(&mut o), 4);
    assert_eq!(&o, b"abcd");
    assert_eq!(r.push(b"ghijklmn"), 6);
    assert_eq!(r.len(), 8);
    assert_eq!(r.free(), 0);
    let mut p = [0; 8];
    assert_eq!(r.peek(2, &mut p), 6);
    assert_eq!(&p[..6], b"ghijkl");
}

#[test]
fn ring_out_of_order_write_survives_emptying() {
    let mut r = Ring::new(8);
    r.push(b"abc");
    r.write_at(2, b"XY"); // bytes 5..7 of the stream
    let mut o = [0; 3];
    r.read(&mut o); // ring empties: out-of-order bytes must stay in place
    assert_eq!(r.push(b"de"), 2);
    r.commit(2);
    let mut o = [0; 4];
    assert_eq!(r.read(&mut o), 4);
    assert_eq!(&o, b"deXY");
}

#[test]
fn ring_write_at_cut_to_free_space() {
    let mut r = Ring::new(8);
    r.push(b"abcd");
    assert_eq!(r.write_at(2, b"123456"), 2);
    assert_eq!(r.write_at(4, b"1"), 0);
}

fn s(x: u32) -> SeqNumber {
    SeqNumber(x.wrapping_add(u32::MAX - 500))
}

#[test]
fn intervals_merge_adjacent_and_overlapping() {
    let mut iv = Intervals::default();
    assert!(iv.add(s(10), s(20)));
    assert!(iv.add(s(20), s(30)));
    assert_eq!(iv.as_slice(), &[(s(10), s(30))]);
    assert!(iv.add(s(40), s(50)));
    assert!(iv.add(s(5), s(45)));
    assert_eq!(iv.as_slice(), &[(s(5), s(50))]);
}

#[test]
fn intervals_bounded() {
    let mut iv = Intervals::default();
    for k in 0..MAX_INTERVALS as u32 {
        assert!(iv.add(s(k * 10), s(k * 10 + 5)));
    }
    assert!(!iv.add(s(100), s(105)));
    // Merging into an existing interval still works when full.
    assert!(iv.add(s(5), s(10)));
    assert_eq!(iv.len(), MAX_INTERVALS - 1);
}

#[test]
fn intervals_advance() {
    let mut iv = Intervals::default();
    iv.add(s(10), s(20));
    iv.add(s(30), s(40));
    assert_eq!(iv.advance(s(5)), s(5));
    assert_eq!(iv.advance(s(10)), s(20));
    assert_eq!(iv.as_slice(), &[(s(30), s(40))]);
    assert_eq!(iv.advance(s(35)), s(40));
    assert!(iv.is_empty());
}

proptest! {
    #[test]
    fn ring_matches_vecdeque(ops in prop::collection::vec((any::<bool>(), 0usize..40), 1..200)) {
        let mut r = Ring::new(32);
        let mut m: VecDeque<u8> = VecDeque::new();
        let mut k = 0u8;
        for (push, n) in ops {
            if push {
                let d: Vec<u8> = (0..n).map(|_| { k = k.wrapping_add(1); k }).collect();
                let w = r.push(&d);
                prop_assert_eq!(w, n.min(32 - m.len()));
                m.extend(&d[..w]);
            } else {
                let mut o = vec![0; n];
                let got = r.read(&mut o);
                let want: Vec<u8> = m.drain(..n.min(m.len())).collect();
                prop_assert_eq!(&o[..got], &want[..]);
            }
            prop_assert_eq!(r.len(), m.len());
        }
    }

    #[test]
    fn intervals_match_bitmap(adds in prop::collection::vec((0u32..200, 1u32..30), 1..30)) {
        let mut iv = Intervals::default();
        let mut bits = [false; 240];
        for (a, l) in adds {
            let before = iv.as_slice().to_vec();
            if iv.add(s(a), s(a + l)) {
                for b in bits.iter_mut().skip(a as usize).take(l as usize) { *b = true; }
            } else {
                prop_assert_eq!(iv.as_slice(), &before[..]);
            }
            // Rebuild the bitmap view from the intervals and compare.
            let mut seen = [false; 240];
            let mut prev: Option<SeqNumber> = None;
            for &(x, y) in iv.as_slice() {
                if let Some(p) = prev { prop_assert!(p.diff(x) < 0, "sorted, non-adjacent"); }
                for i in x.diff(s(0))..y.diff(s(0)) { seen[i as usize] = true; }
                prev = Some(y);
            }
            prop_assert_eq!(seen, bits);
        }
    }
}
