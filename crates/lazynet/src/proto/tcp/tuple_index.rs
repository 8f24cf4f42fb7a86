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
//! hashes; every loop here is bounded by `buckets` iterations whatever the
//! hashes.
//!
//! **The hash is keyed** ([`TupleKey`], derived once at construction from
//! the stack's [`Secret`], which is seeded at start-up): one folded
//! multiply (the 128-bit product of the two key-whitened address words,
//! high half XOR low half, as foldhash does for 16 bytes), then Fibonacci
//! hashing picks the home bucket. A peer that does not know the key cannot
//! choose remote addresses that share a home bucket, so it cannot grow one
//! probe cluster towards the number of entries (hash flooding); before,
//! the hash was FxHash, the same for every stack, and a set of colliding
//! ports could be computed offline (the test
//! `old_fx_collisions_do_not_cluster_under_key` builds one). This is not a
//! MAC: it resists peers choosing inputs blind, not one that can read
//! hash values (only timing leaks them here, a little per probe).
//! Cost, measured with `hash_cost` (`cargo test --release --lib
//! tuple_index::tests::hash_cost -- --ignored --nocapture`, one 4-tuple
//! hash in a dependent chain, 2-core x86-64 VM, 2026-11-21, the loop
//! alone 0.8 ns): FxHash (the old hash) 2.5 ns, this one 2.7 ns,
//! SipHash-1-3 8.5 ns, SipHash-2-4 12.3 ns. So keying costs about 0.2 ns
//! per lookup; SipHash would have added 6–10 ns.

use std::net::SocketAddrV4;

use super::secret::Secret;
use crate::keyhash::{folded_multiply, mix};

const EMPTY: u32 = 0;
/// 2^64 / golden ratio (Fibonacci hashing).
const FIB: u64 = 0x9E37_79B9_7F4A_7C15;

fn addr_word(a: SocketAddrV4) -> u64 {
    (u64::from(u32::from(*a.ip())) << 16) | u64::from(a.port())
}

/// The key of a [`TupleIndex`]'s hash (128 bits, secret).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct TupleKey {
    k0: u64,
    k1: u64,
}

impl core::fmt::Debug for TupleKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("TupleKey(..)")
    }
}

impl TupleKey {
    /// The key derived from the stack's secret (once, at construction).
    pub(crate) fn from_secret(secret: &Secret) -> Self {
        let [k0, k1] = secret.table_key(Secret::TABLE_INDEX);
        Self::from_words(k0, k1)
    }

    /// A key from two words, mixed first (splitmix64's finaliser) so that
    /// no choice of words (`0`, `u64::MAX`, ...) gives a weak multiplier.
    /// The address words are 48 bits, so the top bit of each key word
    /// keeps the multiplied operands nonzero.
    pub(crate) fn from_words(k0: u64, k1: u64) -> Self {
        TupleKey {
            k0: mix(k0) | (1 << 63),
            k1: mix(k1 ^ 0x5851_F42D_4C95_7F2D) | (1 << 63) | 1,
        }
    }

    /// The hash of one address (the listener's key: the local side is
    /// fixed).
    #[inline]
    pub(crate) fn addr(&self, a: SocketAddrV4) -> u64 {
        folded_multiply(addr_word(a) ^ self.k0, self.k1)
    }

    /// The hash of a 4-tuple.
    #[inline]
    pub(crate) fn tuple(&self, local: SocketAddrV4, remote: SocketAddrV4) -> u64 {
        folded_multiply(addr_word(local) ^ self.k0, addr_word(remote) ^ self.k1)
    }
}

/// Open-addressing index: key hash -> slot number (`< u32::MAX`).
#[derive(Debug)]
pub(crate) struct TupleIndex {
    /// `slot + 1`, or [`EMPTY`].
    buckets: Box<[u32]>,
    mask: usize,
    shift: u32,
    len: usize,
    key: TupleKey,
}

impl TupleIndex {
    /// An index for up to `entries` entries (at least 1), hashing with
    /// `key`.
    pub(crate) fn new(entries: usize, key: TupleKey) -> Self {
        let n = (entries.max(1) * 2).next_power_of_two().max(4);
        TupleIndex {
            buckets: vec![EMPTY; n].into_boxed_slice(),
            mask: n - 1,
            shift: 64 - n.trailing_zeros(),
            len: 0,
            key,
        }
    }

    /// The key to hash with (callers hash, then probe).
    pub(crate) fn key(&self) -> TupleKey {
        self.key
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
        let mut ix = TupleIndex::new(8, TupleKey::from_words(1, 2));
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
        let mut ix = TupleIndex::new(64, TupleKey::from_words(1, 2));
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

    use core::hash::Hasher;
    use std::net::Ipv4Addr;

    use rustc_hash::FxHasher;

    /// The hash before it was keyed (FxHash of the address word).
    fn old_fx_addr(a: SocketAddrV4) -> u64 {
        let mut h = FxHasher::default();
        h.write_u64(addr_word(a));
        h.finish()
    }

    fn old_fx_tuple(l: SocketAddrV4, r: SocketAddrV4) -> u64 {
        let mut h = FxHasher::default();
        h.write_u64(addr_word(l));
        h.write_u64(addr_word(r));
        h.finish()
    }

    fn peer(port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::new(198, 51, 100, 7), port)
    }

    const LOCAL: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80);

    /// The longest distance of an entry from its home bucket, plus one
    /// (the probes a lookup of it takes).
    fn max_probe(ix: &TupleIndex, hash_of: impl Fn(u32) -> u64) -> usize {
        let n = ix.buckets.len();
        (0..n)
            .filter(|&b| ix.buckets[b] != EMPTY)
            .map(|b| {
                let home = ix.home(hash_of(ix.buckets[b] - 1));
                ((b + n - home) & ix.mask) + 1
            })
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn hash_depends_on_key() {
        let a = TupleKey::from_words(0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210);
        let b = TupleKey::from_words(0x0123_4567_89ab_cdee, 0xfedc_ba98_7654_3210);
        let c = TupleKey::from_words(0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3211);
        let s1 = Secret::new(*b"stack-one-key...");
        let s2 = Secret::new(*b"stack-two-key...");
        let (d, e) = (TupleKey::from_secret(&s1), TupleKey::from_secret(&s2));
        assert_eq!(d, TupleKey::from_secret(&s1), "same secret, same key");
        assert_ne!(d, e);
        // Every key changes (nearly) every hash, and so the home buckets:
        // the same set of entries lands in different buckets per stack.
        let ix = TupleIndex::new(512, a);
        for (x, y) in [(a, b), (a, c), (d, e)] {
            let mut same_hash = 0;
            let mut same_home = 0;
            for p in 0..1024u16 {
                let r = peer(40000 + p);
                for (hx, hy) in [
                    (x.addr(r), y.addr(r)),
                    (x.tuple(LOCAL, r), y.tuple(LOCAL, r)),
                ] {
                    same_hash += usize::from(hx == hy);
                    same_home += usize::from(ix.home(hx) == ix.home(hy));
                }
            }
            assert_eq!(same_hash, 0);
            // 2048 pairs over 1024 buckets: about 2 equal by chance.
            assert!(same_home < 16, "{same_home} entries kept their bucket");
        }
    }

    #[test]
    fn old_fx_collisions_do_not_cluster_under_key() {
        // A peer's view of the old, unkeyed hash: it can compute offline
        // which of its ports land in bucket 0 of a 64-entry index (128
        // buckets), for the listener (remote address) and for TIME-WAIT
        // (4-tuple with our well-known local address).
        const N: usize = 64;
        let unkeyed = TupleIndex::new(N, TupleKey::from_words(0, 0));
        let pick = |f: &dyn Fn(SocketAddrV4) -> u64| -> Vec<SocketAddrV4> {
            (1024..=u16::MAX)
                .map(peer)
                .filter(|&r| unkeyed.home(f(r)) == 0)
                .take(N)
                .collect()
        };
        let fx_listen = pick(&old_fx_addr);
        let fx_tw = pick(&|r| old_fx_tuple(LOCAL, r));
        assert_eq!(fx_listen.len(), N, "enough colliding ports");
        assert_eq!(fx_tw.len(), N, "enough colliding ports");

        // Under the old hash they form one cluster of N.
        let mut old = TupleIndex::new(N, TupleKey::from_words(0, 0));
        for (s, &r) in fx_listen.iter().enumerate() {
            assert!(old.insert(old_fx_addr(r), s as u32));
        }
        assert_eq!(max_probe(&old, |s| old_fx_addr(fx_listen[s as usize])), N);

        // Under keyed hashes (several keys) the longest probe is short.
        for seed in 1..=8u8 {
            let key = TupleKey::from_secret(&Secret::new([seed; 16]));
            let mut ix = TupleIndex::new(N, key);
            for (s, &r) in fx_listen.iter().enumerate() {
                assert!(ix.insert(key.addr(r), s as u32));
            }
            let m = max_probe(&ix, |s| key.addr(fx_listen[s as usize]));
            assert!(m <= 12, "listener: probe of {m} with key {seed}");
            let mut ix = TupleIndex::new(N, key);
            for (s, &r) in fx_tw.iter().enumerate() {
                assert!(ix.insert(key.tuple(LOCAL, r), s as u32));
            }
            let m = max_probe(&ix, |s| key.tuple(LOCAL, fx_tw[s as usize]));
            assert!(m <= 12, "TIME-WAIT: probe of {m} with key {seed}");
        }
    }

    #[test]
    fn sequential_ports_spread_evenly() {
        // The common, benign case: one client, consecutive ports, a full
        // index (load 1/2). The keyed hash must not do worse than random.
        let key = TupleKey::from_secret(&Secret::new(*b"sequential-ports"));
        for n in [16usize, 256, 4096] {
            let mut ix = TupleIndex::new(n, key);
            let rs: Vec<_> = (0..n as u16).map(|p| peer(32768 + p)).collect();
            for (s, &r) in rs.iter().enumerate() {
                assert!(ix.insert(key.tuple(LOCAL, r), s as u32));
            }
            let m = max_probe(&ix, |s| key.tuple(LOCAL, rs[s as usize]));
            assert!(m <= 24, "{n} entries: probe of {m}");
        }
    }

    /// Cost of one hash (ns), old and new, with SipHash for reference.
    /// Run: `cargo test --release -p lazynet --lib tuple_index::tests::hash_cost
    /// -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn hash_cost() {
        use std::hint::black_box;
        use std::time::Instant;

        use siphasher::sip::{SipHasher13, SipHasher24};

        const ROUNDS: u32 = 20_000_000;
        fn run(name: &str, f: impl Fn(SocketAddrV4, SocketAddrV4) -> u64) {
            let mut best = f64::MAX;
            for _ in 0..5 {
                let t = Instant::now();
                let mut acc = 0u64;
                for i in 0..ROUNDS {
                    // A dependent chain: each tuple depends on the last hash.
                    let port = (i as u16) ^ (acc as u16);
                    let r = SocketAddrV4::new(Ipv4Addr::from(black_box(0xc633_6407u32)), port);
                    acc = acc.wrapping_add(f(black_box(LOCAL), r));
                }
                black_box(acc);
                best = best.min(t.elapsed().as_nanos() as f64 / f64::from(ROUNDS));
            }
            println!("{name:>28}: {best:.2} ns/hash (incl. loop)");
        }
        let key = TupleKey::from_secret(&Secret::new(*b"hash-cost-key..."));
        let (k0, k1) = (0x0123_4567_89ab_cdefu64, 0xfedc_ba98_7654_3210u64);
        run("empty loop", |_, r| u64::from(r.port()));
        run("FxHash (old, unkeyed)", old_fx_tuple);
        run("folded multiply (new, keyed)", |l, r| key.tuple(l, r));
        run("SipHash-1-3", |l, r| {
            let mut h = SipHasher13::new_with_keys(k0, k1);
            h.write_u64(addr_word(l));
            h.write_u64(addr_word(r));
            h.finish()
        });
        run("SipHash-2-4", |l, r| {
            let mut h = SipHasher24::new_with_keys(k0, k1);
            h.write_u64(addr_word(l));
            h.write_u64(addr_word(r));
            h.finish()
        });
    }
}
