//! A fixed-size open-addressing hash index from a key (a 4-tuple, or the
//! remote address of a listener's entry) to a slot number, shared by the
//! TIME-WAIT table ([`super::timewait`]) and the listener
//! ([`super::listen`]).
//!
//! **Owns:** an array of buckets, allocated at construction (at least
//! twice the number of entries it will hold, a power of two), linear
//! probing, deletion by backward shift (Knuth vol. 3, Algorithm 6.4R): no
//! tombstones, so lookups never slow down with churn.
//!
//! **May not touch:** the slots themselves. The caller keeps the keys; the
//! index asks the caller to compare (`is`) or to rehash (`hash_of`) a slot.
//!
//! **Work per call:** one probe sequence. With the load factor at most
//! 1/2, the expected probe length is below 2.5 for uniformly distributed
//! hashes. The hash (FxHash, then Fibonacci hashing) is not keyed: a peer
//! that chooses many colliding keys can lengthen one cluster up to the
//! number of entries, which bounds every loop here (never more than
//! `buckets` iterations). Keying it is a possible later change.

use core::hash::Hasher;
use std::net::SocketAddrV4;

use rustc_hash::FxHasher;

const EMPTY: u32 = 0;
/// 2^64 / golden ratio (Fibonacci hashing).
const FIB: u64 = 0x9E37_79B9_7F4A_7C15;

fn addr_word(a: SocketAddrV4) -> u64 {
    (u64::from(u32::from(*a.ip())) << 16) | u64::from(a.port())
}

/// The hash of one address (the listener's key: the local side is fixed).
pub(crate) fn hash_addr(a: SocketAddrV4) -> u64 {
    let mut h = FxHasher::default();
    h.write_u64(addr_word(a));
    h.finish()
}

/// The hash of a 4-tuple.
pub(crate) fn hash_tuple(local: SocketAddrV4, remote: SocketAddrV4) -> u64 {
    let mut h = FxHasher::default();
    h.write_u64(addr_word(local));
    h.write_u64(addr_word(remote));
    h.finish()
}

/// Open-addressing index: key hash -> slot number (`< u32::MAX`).
#[derive(Debug)]
pub(crate) struct TupleIndex {
    /// `slot + 1`, or [`EMPTY`].
    buckets: Box<[u32]>,
    mask: usize,
    shift: u32,
    len: usize,
}

impl TupleIndex {
    /// An index for up to `entries` entries (at least 1).
    pub(crate) fn new(entries: usize) -> Self {
        let n = (entries.max(1) * 2).next_power_of_two().max(4);
        TupleIndex {
            buckets: vec![EMPTY; n].into_boxed_slice(),
            mask: n - 1,
            shift: 64 - n.trailing_zeros(),
            len: 0,
        }
    }

    fn home(&self, hash: u64) -> usize {
        (hash.wrapping_mul(FIB) >> self.shift) as usize & self.mask
    }

    /// Entries in the index.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The bucket and slot of the entry with hash `hash` for which `is`
    /// holds.
    pub(crate) fn find(&self, hash: u64, mut is: impl FnMut(u32) -> bool) -> Option<(usize, u32)> {
        let mut i = self.home(hash);
        for _ in 0..self.buckets.len() {
            let v = self.buckets[i];
            if v == EMPTY {
                return None;
            }
            if is(v - 1) {
                return Some((i, v - 1));
            }
            i = (i + 1) & self.mask;
        }
        None
    }

    /// The bucket holding `slot` (whose key hashes to `hash`).
    pub(crate) fn bucket_of(&self, hash: u64, slot: u32) -> Option<usize> {
        self.find(hash, |s| s == slot).map(|(b, _)| b)
    }

    /// Adds `slot` under `hash` (the caller checked it is not present).
    /// Returns false if the index is full (cannot happen while the caller
    /// holds at most the `entries` given to [`TupleIndex::new`]).
    pub(crate) fn insert(&mut self, hash: u64, slot: u32) -> bool {
        if slot == u32::MAX || self.len >= self.buckets.len() - 1 {
            return false;
        }
        let mut i = self.home(hash);
        for _ in 0..self.buckets.len() {
            if self.buckets[i] == EMPTY {
                self.buckets[i] = slot + 1;
                self.len += 1;
                return true;
            }
            i = (i + 1) & self.mask;
        }
        false
    }

    /// Replaces the slot stored in `bucket` (same key, so same hash).
    pub(crate) fn set(&mut self, bucket: usize, slot: u32) {
        if let Some(b) = self.buckets.get_mut(bucket) {
            if *b != EMPTY && slot != u32::MAX {
                *b = slot + 1;
            }
        }
    }

    /// Empties `bucket` and shifts the rest of its cluster back so that
    /// every entry stays reachable from its home bucket. `hash_of` gives
    /// the hash of the key of a slot.
    pub(crate) fn remove_at(&mut self, bucket: usize, hash_of: impl Fn(u32) -> u64) {
        if self.buckets.get(bucket).is_none_or(|&v| v == EMPTY) {
            return;
        }
        let mut hole = bucket;
        self.buckets[hole] = EMPTY;
        self.len -= 1;
        let mut j = hole;
        for _ in 0..self.buckets.len() {
            j = (j + 1) & self.mask;
            let v = self.buckets[j];
            if v == EMPTY {
                return;
            }
            let h = self.home(hash_of(v - 1));
            // The entry at j may move into the hole if the hole lies on
            // its probe path, i.e. cyclically within [h, j].
            if (j.wrapping_sub(h) & self.mask) >= (j.wrapping_sub(hole) & self.mask) {
                self.buckets[hole] = v;
                self.buckets[j] = EMPTY;
                hole = j;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_find_remove_with_collisions() {
        // All keys in one cluster: hash constant.
        let mut ix = TupleIndex::new(8);
        let hash_of = |_s: u32| 7u64;
        for s in 0..8 {
            assert!(ix.insert(7, s));
        }
        for s in 0..8 {
            assert_eq!(ix.find(7, |x| x == s).map(|p| p.1), Some(s));
        }
        let b = ix.bucket_of(7, 3).unwrap();
        ix.remove_at(b, hash_of);
        assert!(ix.find(7, |x| x == 3).is_none());
        for s in (0..8).filter(|&s| s != 3) {
            assert!(ix.find(7, |x| x == s).is_some(), "{s} lost");
        }
        assert_eq!(ix.len(), 7);
    }

    #[test]
    fn random_churn_keeps_every_entry_reachable() {
        let mut ix = TupleIndex::new(64);
        // slot -> hash; a few distinct hashes so clusters overlap and wrap.
        let h = |s: u32| u64::from(s % 5).wrapping_mul(0x1234_5678_9abc_def1);
        let mut live = [false; 64];
        let mut x: u32 = 1;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let s = x % 64;
            if live[s as usize] {
                let b = ix.bucket_of(h(s), s).expect("live entry found");
                ix.remove_at(b, h);
                live[s as usize] = false;
            } else {
                assert!(ix.insert(h(s), s));
                live[s as usize] = true;
            }
            if x % 97 == 0 {
                for t in 0..64u32 {
                    assert_eq!(ix.bucket_of(h(t), t).is_some(), live[t as usize]);
                }
            }
        }
    }
}
