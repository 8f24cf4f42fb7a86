//! Keyed hashing primitives for tables indexed by what a peer chooses
//! (4-tuples, ports): the demux classifier's tables and the TCP tuple index
//! (listener entries, TIME-WAIT). A peer who cannot learn the key cannot
//! choose keys that collide (hash flooding).
//!
//! **Owns:** the two primitives; each table keeps its own key words.
//! **May not touch:** anything else. Written here rather than taken from a
//! crate because a table needs one multiply per lookup on the per-frame
//! path (foldhash's folded multiply, with key words from the stack's
//! secret), not a general `Hasher`; see `proto/tcp/tuple_index.rs` for the
//! measured cost.

/// The 128-bit product of `a` and `b`, high half XOR low half (the
/// folded multiply of foldhash and wyhash).
#[inline(always)]
pub(crate) fn folded_multiply(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// splitmix64's finaliser, for key set-up only: turns any key words
/// (`[1, 2]` too) into well-mixed ones, so no caller can pick a weak
/// multiplier.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
