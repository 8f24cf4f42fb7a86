//! Fixed-capacity byte ring and the out-of-order interval set (RFC 9293
//! §3.10.7.4 "segment text"; RFC 2018 for the SACK view of the intervals).
//!
//! Both allocate only in their constructors, and a ring's bytes are
//! recycled: a dropped ring's storage goes to a per-thread pool (at most
//! [`POOL_BYTES`]) from which the next ring of the same capacity is taken.
//! A server opening thousands of connections a second otherwise allocates,
//! zeroes and page-faults half a megabyte for each (its send and receive
//! buffers), which cost more than the connection's whole protocol work.
//! Recycled bytes are never zeroed, and need not be: a ring only ever
//! exposes bytes it wrote itself (`commit` follows `write_at`, and reads
//! stop at `len`), so nothing of an earlier connection is readable.
//!
//! **Owns:** the bytes of the send and receive buffers and the intervals
//! of out-of-order text. **May not touch:** windows or the TCB: offsets
//! and sequence numbers come from the connection.

use crate::wire::checksum;
use crate::wire::tcp::SeqNumber;

/// `x` reduced into `0..cap`, for `x < 2 * cap`: every position the ring
/// computes is the head (`< cap`) plus at most `cap` (offsets stay within
/// the readable or free bytes). A compare instead of a division: `%`
/// costs a 64-bit `div` (tens of cycles) at every read, write and sum.
#[inline(always)]
fn wrap(x: usize, cap: usize) -> usize {
    debug_assert!(x < 2 * cap.max(1));
    if x >= cap {
        x - cap
    } else {
        x
    }
}

/// Most bytes of ring storage a thread keeps for reuse (see the module
/// docs), and most pieces.
pub const POOL_BYTES: usize = 64 << 20;
const POOL_PIECES: usize = 1024;

thread_local! {
    /// Storage of dropped rings: the pieces and their total size.
    static POOL: std::cell::RefCell<(Vec<Box<[u8]>>, usize)> =
        const { std::cell::RefCell::new((Vec::new(), 0)) };
}

/// Storage of `cap` bytes from the pool, if it holds a piece of that size.
fn pooled(cap: usize) -> Option<Box<[u8]>> {
    POOL.try_with(|p| {
        let mut p = p.try_borrow_mut().ok()?;
        let i = p.0.iter().rposition(|b| b.len() == cap)?;
        let b = p.0.swap_remove(i);
        p.1 -= cap;
        Some(b)
    })
    .ok()
    .flatten()
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cap = self.buf.len();
        let first = self.len.min(cap - self.head.min(cap));
        let a = &self.buf[self.head.min(cap)..self.head.min(cap) + first];
        let b = &self.buf[..self.len - first];
        f.debug_struct("Ring")
            .field("cap", &cap)
            .field("head", &self.head)
            .field("len", &self.len)
            .field("bytes", &[a, b])
            .finish()
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        recycle(std::mem::take(&mut self.buf));
    }
}

/// Keeps `b` for a later ring, if the pool has room; frees it otherwise.
fn recycle(b: Box<[u8]>) {
    if b.is_empty() {
        return;
    }
    let _ = POOL.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            if p.1 + b.len() <= POOL_BYTES && p.0.len() < POOL_PIECES {
                p.1 += b.len();
                p.0.push(b);
            }
        }
    });
}

/// A byte ring of fixed capacity: `len` readable bytes starting at `head`;
/// the free space after them may hold out-of-order bytes written with
/// [`Ring::write_at`] before they become readable with [`Ring::commit`].
/// `Debug` shows the readable bytes, not the storage (whose other bytes
/// may be a recycled ring's).
#[derive(Clone)]
pub struct Ring {
    buf: Box<[u8]>,
    head: usize,
    len: usize,
}

impl Ring {
    /// A ring of `cap` bytes: recycled storage if the pool has some of
    /// this size, else the only allocation.
    pub fn new(cap: usize) -> Self {
        Ring {
            buf: pooled(cap).unwrap_or_else(|| vec![0; cap].into_boxed_slice()),
            head: 0,
            len: 0,
        }
    }
    /// Capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }
    /// Readable bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// No readable bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Free bytes after the readable ones.
    pub fn free(&self) -> usize {
        self.buf.len() - self.len
    }
    /// Copies `data` into the free space starting `off` bytes after the
    /// readable bytes; returns how many bytes fitted (the rest is cut).
    pub fn write_at(&mut self, off: usize, data: &[u8]) -> usize {
        let cap = self.buf.len();
        if off >= self.free() {
            return 0;
        }
        let n = data.len().min(self.free() - off);
        let start = wrap(self.head + self.len + off, cap);
        let first = n.min(cap - start);
        self.buf[start..start + first].copy_from_slice(&data[..first]);
        // The part after the wrap: usually none (an empty copy is still a
        // call to `memcpy`).
        if first < n {
            self.buf[..n - first].copy_from_slice(&data[first..n]);
        }
        n
    }
    /// Makes `n` more bytes (already written) readable.
    pub fn commit(&mut self, n: usize) {
        self.len += n.min(self.free());
    }
    /// Appends `n` bytes (as many as fit) that `fill(at, dst)` writes:
    /// `dst` is the free space for bytes `at..at + dst.len()` of them (one
    /// or two calls, the ring's storage on either side of its wrap).
    /// Returns the count.
    pub fn push_with(&mut self, n: usize, mut fill: impl FnMut(usize, &mut [u8])) -> usize {
        let cap = self.buf.len();
        let n = n.min(self.free());
        if n == 0 {
            return 0;
        }
        let start = wrap(self.head + self.len, cap);
        let first = n.min(cap - start);
        fill(0, &mut self.buf[start..start + first]);
        if first < n {
            fill(first, &mut self.buf[..n - first]);
        }
        self.len += n;
        n
    }
    /// Appends as much of `data` as fits; returns the count.
    pub fn push(&mut self, data: &[u8]) -> usize {
        let n = self.write_at(0, data);
        self.commit(n);
        n
    }
    /// Copies readable bytes starting `off` bytes after the head into
    /// `out` without consuming them; returns the count.
    pub fn peek(&self, off: usize, out: &mut [u8]) -> usize {
        if off >= self.len {
            return 0;
        }
        let cap = self.buf.len();
        let n = out.len().min(self.len - off);
        let start = wrap(self.head + off, cap);
        let first = n.min(cap - start);
        out[..first].copy_from_slice(&self.buf[start..start + first]);
        if first < n {
            out[first..n].copy_from_slice(&self.buf[..n - first]);
        }
        n
    }
    /// `initial` plus the partial checksum sum of the `n` readable bytes
    /// starting `off` bytes after the head (fewer if fewer are readable),
    /// read where they lie, without copying.
    pub fn sum(&self, off: usize, n: usize, initial: u32) -> u32 {
        if off >= self.len {
            return initial;
        }
        let cap = self.buf.len();
        let n = n.min(self.len - off);
        let start = wrap(self.head + off, cap);
        let first = n.min(cap - start);
        let a = checksum::partial(&self.buf[start..start + first], initial);
        if first == n {
            return a;
        }
        let b = checksum::partial(&self.buf[..n - first], 0);
        checksum::combine_at(a, first, b)
    }
    /// [`Ring::peek`] that also returns `initial` plus the partial
    /// checksum sum of the copied bytes (`checksum::partial(out[..n],
    /// initial)`), computed in the same pass as the copy.
    pub fn peek_with_sum(&self, off: usize, out: &mut [u8], initial: u32) -> (usize, u32) {
        if off >= self.len {
            return (0, initial);
        }
        let cap = self.buf.len();
        let n = out.len().min(self.len - off);
        let start = wrap(self.head + off, cap);
        let first = n.min(cap - start);
        let a = checksum::copy_and_partial(&self.buf[start..start + first], out, initial);
        if first == n {
            return (n, a);
        }
        let b = checksum::copy_and_partial(&self.buf[..n - first], &mut out[first..], 0);
        (n, checksum::combine_at(a, first, b))
    }
    /// Drops up to `n` readable bytes from the head; returns the count.
    pub fn consume(&mut self, n: usize) -> usize {
        let n = n.min(self.len);
        // The head must not jump back to 0 when the ring empties: bytes
        // may already sit beyond the readable ones (out-of-order data).
        if n > 0 {
            self.head = wrap(self.head + n, self.buf.len());
        }
        self.len -= n;
        n
    }
    /// Reads and consumes up to `out.len()` bytes.
    pub fn read(&mut self, out: &mut [u8]) -> usize {
        let n = self.peek(0, out);
        self.consume(n)
    }
    /// Gives back all storage beyond the readable bytes: the ring keeps
    /// exactly `len` bytes (none when empty; the old storage goes to the
    /// pool) and can take no more. Bytes written beyond the readable ones
    /// (out-of-order data) are dropped. For a connection nobody will read
    /// or write again (an orphan): its buffers shrink to what is still
    /// unacknowledged. One allocation and one copy of the readable bytes.
    pub fn shrink_to_len(&mut self) {
        if self.buf.len() == self.len {
            return;
        }
        let mut b = vec![0u8; self.len].into_boxed_slice();
        self.peek(0, &mut b);
        recycle(std::mem::replace(&mut self.buf, b));
        self.head = 0;
    }
}

/// Maximum number of disjoint out-of-order intervals kept (a segment that
/// would need a fifth is dropped and counted; the sender retransmits it).
pub const MAX_INTERVALS: usize = 4;

/// Out-of-order data received beyond `RCV.NXT`: up to [`MAX_INTERVALS`]
/// disjoint, non-adjacent `[start, end)` sequence ranges kept sorted, plus the
/// order in which they were last touched, for SACK (RFC 2018 §4: the first
/// block reports the most recently received segment).
#[derive(Debug, Clone, Copy, Default)]
pub struct Intervals {
    iv: [(SeqNumber, SeqNumber); MAX_INTERVALS],
    /// Recency stamp per interval (larger = more recent).
    age: [u32; MAX_INTERVALS],
    n: usize,
    clock: u32,
}

impl Intervals {
    /// Number of intervals.
    pub fn len(&self) -> usize {
        self.n
    }
    /// No out-of-order data.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// Sorted intervals.
    pub fn as_slice(&self) -> &[(SeqNumber, SeqNumber)] {
        &self.iv[..self.n]
    }
    /// Adds `[s, e)`, merging with overlapping or adjacent intervals.
    /// Returns `false` (and changes nothing) if it would need more than
    /// [`MAX_INTERVALS`] intervals.
    pub fn add(&mut self, s: SeqNumber, e: SeqNumber) -> bool {
        if s.diff(e) >= 0 {
            return true;
        }
        self.clock = self.clock.wrapping_add(1);
        // Find the intervals that touch [s, e).
        let mut lo = self.n;
        let mut hi = 0;
        for i in 0..self.n {
            let (a, b) = self.iv[i];
            if a.diff(e) <= 0 && s.diff(b) <= 0 {
                lo = lo.min(i);
                hi = i + 1;
            }
        }
        if lo < hi {
            let ns = s.min(self.iv[lo].0);
            let ne = e.max(self.iv[hi - 1].1);
            self.iv[lo] = (ns, ne);
            self.age[lo] = self.clock;
            let removed = hi - lo - 1;
            for j in hi..self.n {
                self.iv[j - removed] = self.iv[j];
                self.age[j - removed] = self.age[j];
            }
            self.n -= removed;
            return true;
        }
        if self.n == MAX_INTERVALS {
            return false;
        }
        let pos = (0..self.n)
            .find(|&i| e.diff(self.iv[i].0) < 0)
            .unwrap_or(self.n);
        for j in (pos..self.n).rev() {
            self.iv[j + 1] = self.iv[j];
            self.age[j + 1] = self.age[j];
        }
        self.iv[pos] = (s, e);
        self.age[pos] = self.clock;
        self.n += 1;
        true
    }
    /// With `RCV.NXT` advanced to `nxt`: removes intervals now at or below
    /// it and returns the new `RCV.NXT` (extended over an interval that
    /// starts at or before `nxt`).
    pub fn advance(&mut self, mut nxt: SeqNumber) -> SeqNumber {
        let mut k = 0;
        while k < self.n && self.iv[k].0.diff(nxt) <= 0 {
            nxt = nxt.max(self.iv[k].1);
            k += 1;
        }
        if k > 0 {
            for j in k..self.n {
                self.iv[j - k] = self.iv[j];
                self.age[j - k] = self.age[j];
            }
            self.n -= k;
        }
        nxt
    }
    /// Up to `max` intervals, most recently touched first (RFC 2018 §4).
    pub fn by_recency(
        &self,
        max: usize,
        out: &mut [(SeqNumber, SeqNumber); MAX_INTERVALS],
    ) -> usize {
        let mut idx = [0usize, 1, 2, 3];
        let idx = &mut idx[..self.n];
        idx.sort_unstable_by(|&a, &b| self.age[b].cmp(&self.age[a]));
        let n = self.n.min(max).min(MAX_INTERVALS);
        for (o, &i) in out.iter_mut().zip(idx.iter()).take(n) {
            *o = self.iv[i];
        }
        n
    }
    /// Drops everything.
    pub fn clear(&mut self) {
        self.n = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> (usize, usize) {
        POOL.with(|p| {
            let p = p.borrow();
            (p.0.len(), p.1)
        })
    }

    /// A ring on recycled storage shows none of its earlier owner's bytes:
    /// it starts empty, and reads give exactly what it was given.
    #[test]
    fn recycled_storage_exposes_nothing_old() {
        let mut a = Ring::new(4096);
        assert_eq!(a.push(&[0xAA; 4096]), 4096);
        drop(a);
        let mut b = Ring::new(4096);
        assert!(b.is_empty());
        let mut out = [0u8; 4096];
        assert_eq!(b.peek(0, &mut out), 0);
        assert_eq!(b.write_at(100, b"late"), 4); // out of order, not readable
        assert_eq!(b.read(&mut out), 0);
        assert_eq!(b.push(b"abc"), 3);
        assert_eq!(b.read(&mut out), 3);
        assert_eq!(&out[..3], b"abc");
        assert_eq!(b.sum(0, 0, 0), 0);
    }

    #[test]
    fn the_pool_keeps_its_bound() {
        let rings: Vec<Ring> = (0..(POOL_BYTES / (1 << 20) + 8))
            .map(|_| Ring::new(1 << 20))
            .collect();
        drop(rings);
        let (pieces, bytes) = pool();
        assert!(
            bytes <= POOL_BYTES && pieces <= POOL_PIECES,
            "{pieces} {bytes}"
        );
        assert_eq!(bytes, POOL_BYTES);
        // Taken back by rings of that size.
        let again: Vec<Ring> = (0..4).map(|_| Ring::new(1 << 20)).collect();
        assert_eq!(pool().1, POOL_BYTES - 4 * (1 << 20));
        drop(again);
    }
}
