//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! # Partial sums
//!
//! A *partial sum* is a `u32` that is congruent, modulo `0xFFFF`, to the
//! ones' complement sum of a sequence of big-endian 16-bit words. It is *not*
//! folded to 16 bits and *not* inverted. Because `2^16 ≡ 2^32 ≡ 1 (mod 0xFFFF)`,
//! any end-around-carry reduction preserves it, so partial sums can be added
//! freely with [`combine`] and turned into a checksum at the very end with
//! [`fold`] and `!`.
//!
//! [`partial`] always treats its `data` as starting at an *even* offset of the
//! summed stream; an odd trailing byte is taken as the high byte of a word
//! whose low byte is zero (RFC 1071 §1: "pad with a zero octet").
//!
//! ## Discontiguous buffers and odd-length pieces
//!
//! If a piece `b` follows pieces whose total length is odd, its bytes sit at
//! the other half of every 16-bit word, so its sum must be byte-swapped before
//! it is added (RFC 1071 §2(B), "byte order independence": swapping the bytes
//! of every word swaps the bytes of the sum). [`combine_at`] does this from the
//! length of the prefix, and [`Checksummer`] does it for you while streaming:
//!
//! ```
//! use lazynet::wire::checksum::{checksum, Checksummer};
//! let data = [1u8, 2, 3, 4, 5, 6, 7];
//! let mut c = Checksummer::new();
//! c.add(&data[..3]); // odd-length middle piece
//! c.add(&data[3..]);
//! assert_eq!(c.checksum(), checksum(&data));
//! ```
//!
//! # Speed
//!
//! The core loop sums native-endian `u16` words into sixteen `u32` lanes and
//! byte-swaps the folded result once at the end (valid by the same byte-order
//! independence). Plain loads and zero-extending adds are all SSE2 has, so it
//! autovectorizes on the baseline x86-64 target. A lane can absorb 65537 words
//! of at most `0xFFFF` before it could overflow (`65537 * 65535 < 2^32`), so
//! the lanes are folded into a `u64` every 65536 chunks (2 MiB).
//!
//! From 256 bytes on (payloads), the same loop runs in a copy
//! compiled for AVX-512BW or AVX2, picked once at run time by the
//! `multiversion` crate (feature detection and dispatch; this module has no
//! `unsafe`): 59 GB/s instead of ~24 at 1500 bytes here (`cargo bench
//! --bench checksum`). Shorter inputs (headers) keep the inlined baseline
//! loop, which beats a call through the dispatcher.
//!
//! **Owns:** the arithmetic of the Internet checksum. **May not touch:**
//! headers: callers say which bytes to sum.

use std::net::Ipv4Addr;

/// Number of `u32` lanes in the core loop.
const LANES: usize = 16;
/// Bytes per chunk in the core loop: one `u16` per lane.
const CHUNK: usize = LANES * 2;
/// Chunks summed before the lanes are folded; each lane then holds at most
/// `65536 * 0xFFFF < 2^32`.
const BLOCK_CHUNKS: usize = 65536;

/// Adds two 32-bit values in ones' complement arithmetic (end-around carry).
/// The result is congruent to `a + b` modulo `0xFFFF`.
#[inline]
const fn add32(a: u32, b: u32) -> u32 {
    let (s, carry) = a.overflowing_add(b);
    // If carry is set, s <= 2^32 - 2, so s + 1 cannot overflow.
    s + carry as u32
}

/// Sums `data` as native-endian 16-bit words (odd trailing byte padded with a
/// zero byte *after* it, i.e. at the next-higher address) and returns the sum
/// folded to 16 bits, still in native byte order.
#[inline]
fn sum_native(data: &[u8]) -> u16 {
    if data.len() <= SHORT_MAX {
        return sum_native_short(data);
    }
    sum_native_with(data, sum_block)
}

/// Longest input [`sum_native_short`] takes: any IPv4 or TCP header with
/// its options (at most 60 bytes), and a small segment's header and text.
const SHORT_MAX: usize = 64;

/// [`sum_native`] of at most [`SHORT_MAX`] bytes (headers): native-endian
/// `u32` words into a `u64`, which is congruent to the sum of their `u16`
/// halves modulo `0xFFFF` (`2^16 ≡ 1`), so the sixteen lanes and their
/// fold are skipped. A 20-byte IPv4 header is five loads and adds (the lane
/// loop cost ~90 instructions for it, callgrind).
#[inline]
fn sum_native_short(data: &[u8]) -> u16 {
    debug_assert!(data.len() <= SHORT_MAX);
    let mut total: u64 = 0;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        total += u64::from(u32::from_ne_bytes([w[0], w[1], w[2], w[3]]));
    }
    let rest = words.remainder();
    let mut pairs = rest.chunks_exact(2);
    for w in &mut pairs {
        total += u64::from(u16::from_ne_bytes([w[0], w[1]]));
    }
    if let [b] = pairs.remainder() {
        total += u64::from(u16::from_ne_bytes([*b, 0]));
    }
    fold64(total)
}

/// [`sum_native`] with the block loop `block` (the baseline [`sum_block`]
/// or the run-time chosen [`sum_block_wide`]).
#[inline(always)]
fn sum_native_with(data: &[u8], block: impl Fn(&[u8]) -> u64) -> u16 {
    let mut total: u64 = 0;
    let mut blocks = data.chunks_exact(CHUNK * BLOCK_CHUNKS);
    for b in &mut blocks {
        total += block(b);
    }
    let rest = blocks.remainder();
    total += block(rest);
    let mut tail = rest.chunks_exact(CHUNK).remainder();
    // The block loop only consumed whole chunks; sum the rest of the words here.
    let mut words = tail.chunks_exact(2);
    for w in &mut words {
        total += u64::from(u16::from_ne_bytes([w[0], w[1]]));
    }
    tail = words.remainder();
    if let [b] = tail {
        total += u64::from(u16::from_ne_bytes([*b, 0]));
    }
    fold64(total)
}

/// Shortest input worth the wider vector units: below it (headers,
/// request/response payloads) the inlined baseline loop wins over a call
/// through the dispatcher.
const WIDE_MIN: usize = 256;

/// [`sum_native`] with its core loop ([`sum_block`]) compiled for
/// AVX-512BW and for AVX2 besides the baseline,
/// the best chosen once at run time (the `multiversion` crate: feature
/// detection and dispatch without `unsafe` here). The same loop
/// autovectorizes to 2–3× the baseline's speed on a payload (AVX-512
/// against the baseline loop: docs/PERFORMANCE.md; `cargo bench --bench
/// checksum` measures the version chosen here), and both ends of a bulk
/// transfer spend much of their time here.
#[inline(never)]
fn sum_native_wide(data: &[u8]) -> u16 {
    sum_native_with(data, sum_block_wide)
}

#[multiversion::multiversion(targets("x86_64+avx512f+avx512bw", "x86_64+avx2"))]
fn sum_block_wide(block: &[u8]) -> u64 {
    sum_block(block)
}

/// [`copy_sum_block`] in the wide builds of [`sum_block_wide`].
#[multiversion::multiversion(targets("x86_64+avx512f+avx512bw", "x86_64+avx2"))]
fn copy_sum_block_wide(src: &[u8], dst: &mut [u8]) -> u64 {
    copy_sum_block(src, dst)
}

/// Sums the whole `CHUNK`-sized chunks of `block` (at most `BLOCK_CHUNKS` of
/// them) in `LANES` parallel `u32` accumulators. This is the loop that must
/// autovectorize.
#[inline]
fn sum_block(block: &[u8]) -> u64 {
    debug_assert!(block.len() <= CHUNK * BLOCK_CHUNKS);
    let mut lanes = [0u32; LANES];
    for chunk in block.chunks_exact(CHUNK) {
        for (lane, w) in lanes.iter_mut().zip(chunk.chunks_exact(2)) {
            *lane += u32::from(u16::from_ne_bytes([w[0], w[1]]));
        }
    }
    lanes.iter().map(|&l| u64::from(l)).sum()
}

/// Folds a 64-bit sum of 16-bit words to 16 bits with end-around carry (not
/// inverted). Each step keeps the value congruent mod 0xFFFF; after four the
/// value is at most 0xFFFF (bounds: 2^33, 2^32, 0x1FFFE, 0xFFFF).
#[inline]
pub const fn fold64(mut s: u64) -> u16 {
    s = (s & 0xFFFF_FFFF) + (s >> 32);
    s = (s & 0xFFFF_FFFF) + (s >> 32);
    s = (s & 0xFFFF) + (s >> 16);
    s = (s & 0xFFFF) + (s >> 16);
    s as u16
}

/// Returns `initial` plus the ones' complement sum of `data`'s big-endian
/// 16-bit words, as a partial sum (see the module doc). `data` is taken to
/// start at an even offset; an odd last byte is the high byte of a word whose
/// low byte is zero.
#[inline]
pub fn partial(data: &[u8], initial: u32) -> u32 {
    // Byte-order independence (RFC 1071 §2(B)): the big-endian sum is the
    // byte-swapped native-endian sum.
    let native = if data.len() >= WIDE_MIN {
        sum_native_wide(data)
    } else {
        sum_native(data)
    };
    let be = u16::from_be(native);
    add32(initial, u32::from(be))
}

/// Copies `src` to the front of `dst` and returns `initial` plus the partial
/// sum of `src` (exactly [`partial`]`(src, initial)`), reading `src` once:
/// the transmit path's payload copy computes its checksum contribution on
/// the way. Panics if `dst` is shorter than `src`.
#[inline]
pub fn copy_and_partial(src: &[u8], dst: &mut [u8], initial: u32) -> u32 {
    let dst = &mut dst[..src.len()];
    if src.len() < CHUNK {
        // Small payloads (request/response): no lanes to fold.
        return add32(initial, copy_sum_tail(src, dst, 0));
    }
    let mut total: u64 = 0;
    if src.len() <= CHUNK * BLOCK_CHUNKS {
        // Any packet: one block, no block iterators.
        total += if src.len() >= WIDE_MIN {
            copy_sum_block_wide(src, dst)
        } else {
            copy_sum_block(src, dst)
        };
        let whole = src.len() - src.len() % CHUNK;
        return add32(
            initial,
            copy_sum_tail(&src[whole..], &mut dst[whole..], total),
        );
    }
    let mut s_blocks = src.chunks_exact(CHUNK * BLOCK_CHUNKS);
    let mut d_blocks = dst.chunks_exact_mut(CHUNK * BLOCK_CHUNKS);
    for (s, d) in (&mut s_blocks).zip(&mut d_blocks) {
        total += copy_sum_block(s, d);
    }
    let (s, d) = (s_blocks.remainder(), d_blocks.into_remainder());
    total += copy_sum_block(s, d);
    let whole = s.len() - s.len() % CHUNK;
    add32(initial, copy_sum_tail(&s[whole..], &mut d[whole..], total))
}

/// Copies the last (less than a chunk) bytes, adds their native-endian
/// words to `total` and returns the big-endian folded sum.
#[inline]
fn copy_sum_tail(s: &[u8], d: &mut [u8], mut total: u64) -> u32 {
    d.copy_from_slice(s);
    let mut words = s.chunks_exact(2);
    for w in &mut words {
        total += u64::from(u16::from_ne_bytes([w[0], w[1]]));
    }
    if let [b] = words.remainder() {
        total += u64::from(u16::from_ne_bytes([*b, 0]));
    }
    u32::from(u16::from_be(fold64(total)))
}

/// [`sum_block`] that also copies each whole chunk of `src` to `dst` (same
/// length) as it sums it.
#[inline]
fn copy_sum_block(src: &[u8], dst: &mut [u8]) -> u64 {
    debug_assert!(src.len() <= CHUNK * BLOCK_CHUNKS && src.len() == dst.len());
    let mut lanes = [0u32; LANES];
    for (s, d) in src.chunks_exact(CHUNK).zip(dst.chunks_exact_mut(CHUNK)) {
        let s: &[u8; CHUNK] = s.try_into().unwrap_or(&[0; CHUNK]);
        d.copy_from_slice(s);
        for (lane, w) in lanes.iter_mut().zip(s.chunks_exact(2)) {
            *lane += u32::from(u16::from_ne_bytes([w[0], w[1]]));
        }
    }
    lanes.iter().map(|&l| u64::from(l)).sum()
}

/// Adds two partial sums of pieces that are both to be taken at even offsets.
#[inline]
pub const fn combine(a: u32, b: u32) -> u32 {
    add32(a, b)
}

/// Adds `sum_b`, the partial sum (from [`partial`]) of a piece that follows a
/// prefix of `len_a` bytes whose partial sum is `sum_a`. If `len_a` is odd, the
/// piece's bytes fall on the opposite halves of the words, so its folded sum
/// is byte-swapped before adding (RFC 1071 §2(B)).
#[inline]
pub const fn combine_at(sum_a: u32, len_a: usize, sum_b: u32) -> u32 {
    if len_a % 2 == 1 {
        add32(sum_a, fold(sum_b).swap_bytes() as u32)
    } else {
        add32(sum_a, sum_b)
    }
}

/// Folds a partial sum to 16 bits with end-around carry. Not inverted: the
/// result is the ones' complement sum (`0` only if the sum was `0`).
#[inline]
pub const fn fold(sum: u32) -> u16 {
    let s = (sum & 0xFFFF) + (sum >> 16);
    let s = (s & 0xFFFF) + (s >> 16);
    s as u16
}

/// The Internet checksum of `data`: the ones' complement of the ones'
/// complement sum of its big-endian 16-bit words (RFC 1071).
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !fold(partial(data, 0))
}

/// The partial sum of the IPv4 pseudo-header used by UDP (RFC 768) and TCP
/// (RFC 9293 §3.1): source, destination, zero, protocol, and the
/// transport-layer length (header + data) `len`.
#[inline]
pub fn pseudo_header_ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, len: u16) -> u32 {
    let s = src.octets();
    let d = dst.octets();
    let words = [
        u16::from_be_bytes([s[0], s[1]]),
        u16::from_be_bytes([s[2], s[3]]),
        u16::from_be_bytes([d[0], d[1]]),
        u16::from_be_bytes([d[2], d[3]]),
        u16::from(proto),
        len,
    ];
    // Six u16 values cannot overflow a u32.
    words.iter().map(|&w| u32::from(w)).sum()
}

/// RFC 1624 incremental update of a checksum `old_csum` when a 16-bit field
/// changes from `old_field` to `new_field`.
///
/// RFC 1624 §3, eqn. 3: `HC' = ~(~HC + ~m + m')`. Unlike RFC 1141's
/// `HC' = HC + m + ~m'` this never produces `0xFFFF` (−0) where a full
/// recomputation yields `0x0000`: for any data that is not all zero the result
/// equals recomputation exactly.
#[inline]
pub const fn update(old_csum: u16, old_field: u16, new_field: u16) -> u16 {
    let s = add32(!old_csum as u32, !old_field as u32);
    let s = add32(s, new_field as u32);
    !fold(s)
}

/// [`update`] for a 32-bit field (e.g. an IPv4 address or a TCP sequence
/// number that is 16-bit aligned), as two 16-bit words in one step.
#[inline]
pub const fn update32(old_csum: u16, old_field: u32, new_field: u32) -> u16 {
    let mut s = !old_csum as u32;
    s = add32(s, !(old_field >> 16) as u16 as u32);
    s = add32(s, !(old_field as u16) as u32);
    s = add32(s, new_field >> 16);
    s = add32(s, new_field & 0xFFFF);
    !fold(s)
}

/// A streaming checksum over discontiguous pieces of any lengths.
///
/// Tracks whether the bytes added so far have odd length and swaps the sum of
/// each following piece accordingly (see the module doc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checksummer {
    sum: u32,
    odd: bool,
}

impl Checksummer {
    /// An empty sum.
    pub const fn new() -> Self {
        Checksummer { sum: 0, odd: false }
    }

    /// Starts from an existing partial sum of an even-length prefix (e.g. a
    /// pseudo-header).
    pub const fn with_initial(sum: u32) -> Self {
        Checksummer { sum, odd: false }
    }

    /// Appends `data` to the summed stream.
    #[inline]
    pub fn add(&mut self, data: &[u8]) {
        let p = partial(data, 0);
        self.sum = combine_at(self.sum, self.odd as usize, p);
        self.odd ^= data.len() % 2 == 1;
    }

    /// The partial sum so far.
    pub const fn partial(&self) -> u32 {
        self.sum
    }

    /// The checksum of everything added (folded and inverted).
    pub const fn checksum(&self) -> u16 {
        !fold(self.sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slow, obviously correct reference (RFC 1071 §4.1 style).
    fn reference(data: &[u8]) -> u16 {
        let mut s: u64 = 0;
        for w in data.chunks(2) {
            let hi = u64::from(w[0]) << 8;
            let lo = w.get(1).map_or(0, |&b| u64::from(b));
            s += hi | lo;
        }
        while s > 0xFFFF {
            s = (s & 0xFFFF) + (s >> 16);
        }
        !(s as u16)
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3 numerical example: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(partial(&d, 0)), 0xddf2);
        assert_eq!(checksum(&d), !0xddf2);
    }

    #[test]
    fn matches_reference_various_lengths() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 13) as u8).collect();
        for len in (0..200).chain([1499, 1500, 1501, 4095, 4096, 5000]) {
            assert_eq!(checksum(&data[..len]), reference(&data[..len]), "len {len}");
        }
    }

    #[test]
    fn all_ones_large_buffer_does_not_overflow() {
        // 3 MiB of 0xFF exceeds one block and would overflow naive u32 lanes.
        let data = vec![0xFFu8; 3 * 1024 * 1024 + 3];
        assert_eq!(checksum(&data), reference(&data));
    }

    #[test]
    fn odd_middle_piece_uses_byte_swap() {
        let d = [0x12u8, 0x34, 0x56, 0x78, 0x9a];
        // Split 1 + 3 + 1: the middle piece starts at an odd offset.
        let a = partial(&d[..1], 0);
        let ab = combine_at(a, 1, partial(&d[1..4], 0));
        let abc = combine_at(ab, 4, partial(&d[4..], 0));
        assert_eq!(!fold(abc), checksum(&d));
        // Without the swap the result would be wrong for this input.
        let wrong = combine(combine(a, partial(&d[1..4], 0)), partial(&d[4..], 0));
        assert_ne!(!fold(wrong), checksum(&d));
    }

    #[test]
    fn fold_keeps_negative_zero_distinct() {
        assert_eq!(fold(0), 0);
        assert_eq!(fold(0xFFFF), 0xFFFF);
        assert_eq!(fold(0x1_FFFE), 0xFFFF);
        assert_eq!(fold(u32::MAX), 0xFFFF);
        assert_eq!(checksum(&[0, 0]), 0xFFFF);
        assert_eq!(checksum(&[0xFF, 0xFF]), 0x0000);
    }

    #[test]
    fn update_negative_zero_cases() {
        // Data whose new sum is 0xFFFF (−0): recomputation gives 0x0000,
        // RFC 1141's formula would give 0xFFFF.
        let old = [0x00u8, 0x01, 0xFF, 0xFE]; // sum 0xFFFF -> csum 0x0000
        let new = [0x00u8, 0x02, 0xFF, 0xFD]; // sum 0xFFFF -> csum 0x0000
        let c0 = checksum(&old);
        assert_eq!(c0, 0x0000);
        let c1 = update(c0, 0x0001, 0x0002);
        let c2 = update(c1, 0xFFFE, 0xFFFD);
        assert_eq!(c2, checksum(&new));
        assert_eq!(c2, 0x0000);
        // Going from checksum 0x0000 to a non-zero one.
        let new2 = [0x00u8, 0x03, 0xFF, 0xFD];
        assert_eq!(update(c2, 0x0002, 0x0003), checksum(&new2));
        // RFC 1624 §4 example: HC = 0xDD2F, m = 0x5555 -> m' = 0x3285.
        assert_eq!(update(0xDD2F, 0x5555, 0x3285), 0x0000);
    }

    #[test]
    fn update32_matches_recompute() {
        let mut d = [0x45u8, 0, 0, 20, 0xC0, 0xA8, 0x01, 0x02];
        let c0 = checksum(&d);
        d[4..8].copy_from_slice(&[10, 0, 0, 1]);
        let c1 = update32(c0, 0xC0A8_0102, 0x0A00_0001);
        assert_eq!(c1, checksum(&d));
    }

    #[test]
    fn pseudo_header_sum() {
        let p = pseudo_header_ipv4(
            Ipv4Addr::new(192, 168, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            17,
            12,
        );
        let bytes = [192, 168, 0, 1, 10, 0, 0, 2, 0, 17, 0, 12];
        assert_eq!(fold(p), fold(partial(&bytes, 0)));
    }
}
