//! Send areas: bytes of a shared region that one side writes at any time
//! and transmits from *by reference* (a gather frame names a slice of them
//! instead of carrying a copy; `nic` module docs).
//!
//! A NIC whose peer can read its memory (the in-memory wire) lends its
//! owner a [`SendArea`] once; the stack cuts it into fixed-size [`SendBuf`]
//! chunks, one per connection, that back the connections' send rings. The
//! bytes of a segment then go from the application's write straight into
//! memory the receiver reads: the copy into a NIC buffer is gone
//! (ARCHITECTURE.md, *Memory*: headers and payload split).
//!
//! **Rule that keeps it sound:** the holder writes only bytes that no frame
//! in flight names. Frames name bytes the send ring holds (unacknowledged,
//! or acknowledged but still lent to the NIC); the ring never hands out
//! that space for writing, and the stack lends acknowledged bytes back only
//! when the NIC reports the frames naming them complete (`Nic::tx_done`).
//! The peer only reads. A hostile peer in another process can write the
//! memory too; bytes are plain `u8`, so that changes values (the frames it
//! receives), never soundness.

use std::sync::Arc;

use super::Region;

/// A byte range of a region lent to one writer (see the module docs).
#[derive(Debug)]
pub struct SendArea {
    region: Arc<Region>,
    off: usize,
    len: usize,
    ext_base: u64,
}

impl SendArea {
    /// The `len` bytes at `off` in `region`; `ext_base` is the ext-area
    /// offset ([`crate::nic::ExtRef::off`]) of the first of them.
    ///
    /// # Safety
    /// `[off, off + len)` must lie inside `region`, and nothing else in this
    /// process may write it while the area or any chunk of it lives (the
    /// NIC that lends it reads it only for frames in flight).
    pub unsafe fn new(region: Arc<Region>, off: usize, len: usize, ext_base: u64) -> SendArea {
        SendArea {
            region,
            off,
            len,
            ext_base,
        }
    }

    /// Bytes in the area.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty area.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Cuts the area into `len / size` chunks of `size` bytes (the rest is
    /// not used). The only way to make a [`SendBuf`]: chunks never overlap.
    pub fn into_chunks(self, size: usize) -> Vec<SendBuf> {
        if size == 0 {
            return Vec::new();
        }
        (0..self.len / size)
            .map(|i| SendBuf {
                region: self.region.clone(),
                off: self.off + i * size,
                len: size,
                ext_off: self.ext_base + (i * size) as u64,
            })
            .collect()
    }
}

/// One chunk of a [`SendArea`]: the storage of one send ring. Not `Clone`:
/// exactly one holder writes it.
#[derive(Debug)]
pub struct SendBuf {
    region: Arc<Region>,
    off: usize,
    len: usize,
    ext_off: u64,
}

// SAFETY: a SendBuf is the only writer handle of its bytes (made only by
// `SendArea::into_chunks`, never cloned); moving it to another thread moves
// that right with it. The region mapping is valid on any thread.
unsafe impl Send for SendBuf {}
// SAFETY: `&SendBuf` gives only reads (`bytes`); writes need `&mut`.
unsafe impl Sync for SendBuf {}

impl SendBuf {
    /// Bytes in the chunk.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty chunk.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Ext-area offset of the chunk's first byte: the [`crate::nic::ExtRef`]
    /// of bytes `[a, a + n)` is `{ off: ext_off() + a, len: n }`.
    #[inline]
    pub fn ext_off(&self) -> u64 {
        self.ext_off
    }

    /// The chunk's bytes, for reading.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the range lies inside the mapping (`SendArea::new`'s
        // contract), which lives as long as `self.region`. While this shared
        // borrow lives `&mut self` (our only way to write) is unavailable;
        // the peer only reads.
        unsafe { std::slice::from_raw_parts(self.region.as_ptr().add(self.off), self.len) }
    }

    /// Copies `src` to byte `at` of the chunk; returns the bytes copied
    /// (cut at the chunk's end).
    #[inline]
    pub fn write(&mut self, at: usize, src: &[u8]) -> usize {
        let n = src.len().min(self.len.saturating_sub(at));
        if n == 0 {
            return 0;
        }
        // SAFETY: [off + at, off + at + n) lies inside the chunk, so inside
        // the mapping. Only the bytes written are touched (no reference
        // over the whole chunk is made), and the send ring writes only
        // bytes no frame in flight names (module docs), so no one else
        // accesses them now. `src` cannot overlap: it is borrowed from
        // elsewhere while `self` is borrowed mutably.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.region.as_ptr().add(self.off + at), n)
        };
        n
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_disjoint_and_named_by_ext_offset() {
        let r = Region::create("send-test", 10_000).unwrap();
        // SAFETY: fresh region, nobody else writes it.
        let area = unsafe { SendArea::new(r.clone(), 1000, 9000, 4096) };
        let mut chunks = area.into_chunks(4000);
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].ext_off(), 4096);
        assert_eq!(chunks[1].ext_off(), 4096 + 4000);
        assert_eq!(chunks[0].write(3998, &[1, 2, 3, 4]), 2);
        assert_eq!(chunks[1].write(0, &[9]), 1);
        assert_eq!(&chunks[0].bytes()[3998..], &[1, 2]);
        assert_eq!(chunks[1].bytes()[0], 9);
        assert_eq!(chunks[1].write(4000, &[1]), 0);
        // SAFETY: as above; an empty area yields no chunks.
        let empty = unsafe { SendArea::new(r, 0, 0, 0) };
        assert!(empty.is_empty() && empty.into_chunks(16).is_empty());
    }
}
