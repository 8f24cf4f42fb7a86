//! The transmit checksums: `Ring::peek_with_sum` copies like `Ring::peek`
//! and sums like `checksum::partial` (also across the ring's wrap),
//! `Ring::sum` sums in place like `partial` over a peek, and `TcpRepr::emit_header_with_payload_sum` with that sum writes
//! the same bytes as `TcpRepr::emit` over the payload.

use std::net::Ipv4Addr;

use lazynet::proto::tcp::buffer::Ring;
use lazynet::wire::checksum;
use lazynet::wire::tcp::{SackBlocks, SeqNumber, TcpFlags, TcpRepr, Timestamps};
use proptest::prelude::*;

/// A ring of `cap` bytes holding `fill` (as much as fits), its head moved
/// by `pre` bytes first so that reads wrap.
fn ring(cap: usize, pre: usize, fill: &[u8]) -> Ring {
    let mut r = Ring::new(cap);
    let k = r.push(&vec![0x55u8; pre.min(cap)]);
    r.consume(k);
    r.push(fill);
    r
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn peek_with_sum_equals_peek_then_partial(
        cap in 1usize..300,
        pre in 0usize..300,
        fill in proptest::collection::vec(any::<u8>(), 0..300),
        off in 0usize..300,
        want in 0usize..300,
        init in any::<u32>(),
    ) {
        let r = ring(cap, pre, &fill);
        let mut a = vec![0u8; want];
        let mut b = vec![0u8; want];
        let n = r.peek(off, &mut a);
        let (m, sum) = r.peek_with_sum(off, &mut b, init);
        prop_assert_eq!(n, m);
        prop_assert_eq!(&a, &b);
        prop_assert_eq!(checksum::fold(sum), checksum::fold(checksum::partial(&a[..n], init)));
    }

    /// `Ring::sum` (the burst path sums the payload where it lies, then
    /// copies it) equals `partial` over what `peek` copies, across the
    /// wrap too, and for runs long enough for the wide checksum loop.
    #[test]
    fn sum_in_place_equals_peek_then_partial(
        cap in 1usize..3000,
        pre in 0usize..3000,
        fill in proptest::collection::vec(any::<u8>(), 0..3000),
        off in 0usize..3000,
        want in 0usize..3000,
        init in any::<u32>(),
    ) {
        let r = ring(cap, pre, &fill);
        let mut a = vec![0u8; want];
        let n = r.peek(off, &mut a);
        let sum = r.sum(off, want, init);
        prop_assert_eq!(checksum::fold(sum), checksum::fold(checksum::partial(&a[..n], init)));
    }

    #[test]
    fn header_with_payload_sum_equals_emit(
        seq in any::<u32>(),
        ack in any::<u32>(),
        flags in any::<u8>(),
        window in any::<u16>(),
        ts in proptest::option::of((any::<u32>(), any::<u32>())),
        nsack in 0usize..4,
        payload in proptest::collection::vec(any::<u8>(), 0..1600),
        src in any::<u32>(),
        dst in any::<u32>(),
    ) {
        let blocks: Vec<_> = (0..nsack)
            .map(|i| (SeqNumber(seq ^ i as u32), SeqNumber(ack ^ (i as u32 * 7))))
            .collect();
        let r = TcpRepr {
            src_port: 1234,
            dst_port: 80,
            seq: SeqNumber(seq),
            ack: SeqNumber(ack),
            flags: TcpFlags(flags & 0x3f),
            window,
            urgent: 0,
            mss: None,
            window_scale: None,
            sack_permitted: false,
            sack: SackBlocks::new(&blocks[..nsack.min(if ts.is_some() { 3 } else { 4 })])
                .unwrap_or(SackBlocks::EMPTY),
            timestamps: ts.map(|(v, e)| Timestamps { tsval: v, tsecr: e }),
            payload_len: payload.len(),
        };
        let (src, dst) = (Ipv4Addr::from(src), Ipv4Addr::from(dst));
        let hl = r.header_len().unwrap();
        let mut a = vec![0u8; hl + payload.len()];
        r.emit_with_payload(&mut a, src, dst, &payload).unwrap();
        let mut b = vec![0u8; hl + payload.len()];
        let sum = checksum::copy_and_partial(&payload, &mut b[hl..], 0);
        prop_assert_eq!(r.emit_header_with_payload_sum(&mut b, src, dst, sum).unwrap(), hl);
        prop_assert_eq!(a, b);
    }
}
