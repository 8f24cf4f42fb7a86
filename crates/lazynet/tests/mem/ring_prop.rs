//! Property test: batched push/pop on the ring behaves like a bounded
//! `VecDeque`, including across `u32` index wraparound.
#![cfg(not(loom))]

use std::collections::VecDeque;

use lazynet::mem::ring::{self, Consumer, Producer, Ring};
use lazynet::mem::{Desc, Region};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Push(usize),
    Pop(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..40).prop_map(Op::Push),
        (0usize..40).prop_map(Op::Pop)
    ]
}

fn run(
    mut p: Producer<Desc>,
    mut c: Consumer<Desc>,
    cap: usize,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let mut model: VecDeque<Desc> = VecDeque::new();
    let mut next = 0u32;
    let mut buf = vec![Desc::default(); 64];
    for op in ops {
        match *op {
            Op::Push(n) => {
                let items: Vec<Desc> = (0..n as u32)
                    .map(|i| Desc::new(next + i, (next + i) as u16))
                    .collect();
                let pushed = p.push(&items);
                let expect = n.min(cap - model.len());
                prop_assert_eq!(pushed, expect);
                model.extend(&items[..pushed]);
                next += pushed as u32;
            }
            Op::Pop(n) => {
                let got = c.pop(&mut buf[..n]);
                let expect = n.min(model.len());
                prop_assert_eq!(got, expect);
                for d in &buf[..got] {
                    prop_assert_eq!(Some(*d), model.pop_front());
                }
            }
        }
        prop_assert!(model.len() <= cap);
        prop_assert_eq!(c.len(), model.len());
        prop_assert_eq!(p.len(), model.len());
        prop_assert_eq!(p.free(), cap - model.len());
    }
    prop_assert_eq!(p.corrupt() + c.corrupt(), 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn heap_ring_matches_vecdeque(cap_log in 0u32..6, start in prop_oneof![Just(0u32), (u32::MAX - 100)..=u32::MAX, any::<u32>()], ops in prop::collection::vec(op(), 0..200)) {
        let cap = 1u32 << cap_log;
        let (p, c) = ring::heap_at::<Desc>(cap, start);
        run(p, c, cap as usize, &ops)?;
    }

    #[test]
    fn region_ring_matches_vecdeque(cap_log in 0u32..6, start in (u32::MAX - 100)..=u32::MAX, ops in prop::collection::vec(op(), 0..200)) {
        let cap = 1u32 << cap_log;
        let region = Region::create("prop", 64 + ring::layout_size::<Desc>(cap)).unwrap();
        Ring::<Desc>::init_at(&region, 64, cap, start).unwrap();
        let p = Producer::attach(&region, 64).unwrap();
        let c = Consumer::attach(&region, 64).unwrap();
        run(p, c, cap as usize, &ops)?;
    }
}
