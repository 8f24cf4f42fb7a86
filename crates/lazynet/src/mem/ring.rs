//! Single-producer/single-consumer rings of plain-old-data entries, laid out
//! `#[repr(C)]` so they can live in a shared [`Region`] (or on the heap, for
//! in-process channels, through the very same code).
//!
//! **Owns:** the ring header layout (meta line, producer line, consumer line,
//! entry array), the index protocol and its memory orderings, and the
//! validation of everything read back from the shared header.
//!
//! **May not touch:** what the entries mean (descriptors, buffer indices) and
//! who owns the buffers they name; that is the caller's protocol.
//!
//! Why hand-written: `ringbuf` can be placed in shared memory but is not
//! `#[repr(C)]` and was about 4× slower here; `rtrb` and `crossbeam` queues live
//! on the heap and cannot be shared between processes. This ring follows
//! AF_XDP/DPDK: free-running `u32` indices, power-of-two capacity, each index on
//! its own 64-byte cache line, and each handle caches the other side's index so
//! the shared line is touched only when the cached view runs out.
//!
//! Orderings: the producer writes entries, then publishes `prod` with
//! `Release`; the consumer loads `prod` with `Acquire` before reading entries,
//! then publishes `cons` with `Release`; the producer loads `cons` with
//! `Acquire` before overwriting the slots it frees. Nothing else is ordered.
//!
//! Hostile peers: the handles copy capacity and mask at attach time and never
//! re-read them. An index read from the other side is accepted only if the
//! distance `prod - cons` is at most the capacity; otherwise the batch is
//! refused (0 entries) and [`Producer::corrupt`]/[`Consumer::corrupt`] counts
//! it. Entry slots are always addressed as `index & mask`, so no value written
//! by the peer can lead outside the entry array. Entries are [`Pod`], so any
//! bytes the peer writes are a valid `T`.

use std::alloc::Layout;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ptr;
use std::sync::atomic::AtomicU32 as MetaU32;
use std::sync::atomic::Ordering::{self, Acquire, Relaxed, Release};
use std::sync::Arc;

use super::{Desc, Region};

#[cfg(loom)]
use loom::cell::UnsafeCell as UnsafeSlot;
#[cfg(loom)]
use loom::sync::atomic::AtomicU32 as Atom;
#[cfg(not(loom))]
use std::cell::UnsafeCell as UnsafeSlot;
#[cfg(not(loom))]
use std::sync::atomic::AtomicU32 as Atom;

/// `"LZRG"`: marks an initialised ring header.
pub const RING_MAGIC: u32 = 0x4c5a_5247;
/// Layout version of the ring header.
pub const RING_VERSION: u32 = 1;
/// Largest capacity (keeps `prod - cons` unambiguous in `u32`).
pub const MAX_CAPACITY: u32 = 1 << 31;

/// Plain old data: `Copy`, no padding, and every bit pattern is a valid value.
///
/// # Safety
/// Implement only for types for which any sequence of `size_of::<Self>()`
/// bytes is a valid value and which have no padding bytes, because entries
/// are read from memory another (possibly hostile) process writes.
pub unsafe trait Pod: Copy + Send + 'static {}
// SAFETY: integers accept every bit pattern and have no padding.
unsafe impl Pod for u32 {}
// SAFETY: as above.
unsafe impl Pod for u64 {}
// SAFETY: Desc is #[repr(C)] {u32, u16, u16}: 8 bytes, no padding, all
// fields integers.
unsafe impl Pod for Desc {}

/// Why a ring header was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingError {
    /// Capacity is zero, not a power of two, or above [`MAX_CAPACITY`].
    BadCapacity(u32),
    /// The ring does not fit inside the region at that offset.
    OutOfBounds,
    /// The offset is not aligned to 64 bytes.
    Misaligned,
    /// Magic or version do not match: not an initialised ring.
    BadMagic,
    /// The ring was initialised for entries of another size.
    EntrySize(u32),
    /// Another handle already claims this side of the ring.
    Busy,
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RingError::BadCapacity(c) => {
                write!(f, "ring capacity {c} is not a power of two in 1..=2^31")
            }
            RingError::OutOfBounds => f.write_str("ring does not fit in region"),
            RingError::Misaligned => f.write_str("ring offset is not 64-byte aligned"),
            RingError::BadMagic => f.write_str("no ring header at this offset"),
            RingError::EntrySize(s) => write!(f, "ring holds entries of {s} bytes"),
            RingError::Busy => f.write_str("ring side already attached"),
        }
    }
}

impl std::error::Error for RingError {}

impl From<RingError> for io::Error {
    fn from(e: RingError) -> io::Error {
        let kind = match e {
            RingError::Busy => io::ErrorKind::AddrInUse,
            _ => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, e)
    }
}

/// Constant part of the header (written once by `init`).
#[repr(C, align(64))]
struct Meta {
    magic: MetaU32,
    version: MetaU32,
    capacity: MetaU32,
    entry_size: MetaU32,
}

/// One index and the claim flag of its side, alone on a cache line.
#[repr(C, align(64))]
struct IndexLine {
    index: Atom,
    claimed: MetaU32,
}

/// The ring header as it lies in memory, followed by the entry array.
#[repr(C)]
struct Header {
    meta: Meta,
    prod: IndexLine,
    cons: IndexLine,
}

const HDR_ALIGN: usize = 64;

/// Bytes a ring of `capacity` entries of `T` occupies (header + entries,
/// rounded up to a cache line). Ring offsets must be 64-byte aligned.
pub fn layout_size<T: Pod>(capacity: u32) -> usize {
    let raw = size_of::<Header>() + capacity as usize * size_of::<UnsafeSlot<T>>();
    raw.div_ceil(HDR_ALIGN) * HDR_ALIGN
}

fn check_capacity(capacity: u32) -> Result<(), RingError> {
    if capacity == 0 || !capacity.is_power_of_two() || capacity > MAX_CAPACITY {
        Err(RingError::BadCapacity(capacity))
    } else {
        Ok(())
    }
}

/// Checks that a ring of `capacity` entries of `T` fits `len` bytes at
/// `base + offset`; returns the header pointer.
fn place<T: Pod>(
    base: *mut u8,
    len: usize,
    offset: usize,
    capacity: u32,
) -> Result<*mut Header, RingError> {
    check_capacity(capacity)?;
    let end = offset.checked_add(layout_size::<T>(capacity));
    if !matches!(end, Some(e) if e <= len) {
        return Err(RingError::OutOfBounds);
    }
    let addr = (base as usize).wrapping_add(offset);
    if addr % HDR_ALIGN != 0 || addr % align_of::<UnsafeSlot<T>>() != 0 {
        return Err(RingError::Misaligned);
    }
    // SAFETY: offset + layout_size <= len, so the result stays inside the
    // allocation/mapping that `base` points to.
    Ok(unsafe { base.add(offset) }.cast::<Header>())
}

/// Writes a fresh index value into `p` (an atomic that may or may not have
/// been constructed yet).
///
/// # Safety
/// `p` must be valid and aligned for an `Atom`.
unsafe fn init_atom(p: *mut Atom, v: u32) {
    #[cfg(loom)]
    // SAFETY: caller guarantees `p` is valid; under loom the atomic must be
    // constructed in place (the memory was fresh from the heap constructor).
    unsafe {
        ptr::write(p, Atom::new(v))
    };
    #[cfg(not(loom))]
    // SAFETY: caller guarantees `p` is valid and aligned; zeroed or previously
    // used memory is a valid AtomicU32, and a store is race-free.
    unsafe {
        (*p).store(v, Relaxed)
    };
}

/// Writes a ring header at `hdr` with both indices at `start`.
///
/// # Safety
/// `hdr` must come from [`place`] for this `T` and capacity.
unsafe fn write_header<T: Pod>(hdr: *mut Header, capacity: u32, start: u32) {
    // SAFETY: `place` checked that the header and `capacity` slots are in
    // bounds and aligned. Meta and claim fields are std atomics (zeroed memory
    // is valid), written with atomic stores, so a concurrent reader cannot
    // cause a race; references are taken to those fields only, never to the
    // index atomics before `init_atom` has constructed them.
    unsafe {
        let meta = &*ptr::addr_of!((*hdr).meta);
        meta.magic.store(0, Relaxed);
        init_atom(ptr::addr_of_mut!((*hdr).prod.index), start);
        init_atom(ptr::addr_of_mut!((*hdr).cons.index), start);
        (*ptr::addr_of!((*hdr).prod.claimed)).store(0, Relaxed);
        (*ptr::addr_of!((*hdr).cons.claimed)).store(0, Relaxed);
        #[cfg(loom)]
        {
            let slots = hdr.add(1).cast::<UnsafeSlot<T>>();
            for i in 0..capacity as usize {
                ptr::write(slots.add(i), UnsafeSlot::new(std::mem::zeroed::<T>()));
            }
        }
        meta.version.store(RING_VERSION, Relaxed);
        meta.capacity.store(capacity, Relaxed);
        meta.entry_size.store(size_of::<T>() as u32, Relaxed);
        meta.magic.store(RING_MAGIC, Release);
    }
}

/// What keeps a ring's memory alive.
#[derive(Clone)]
enum Backing {
    Region(#[allow(dead_code)] Arc<Region>),
    Heap(#[allow(dead_code)] Arc<HeapBlock>),
}

/// A 64-byte aligned heap allocation holding one ring.
struct HeapBlock {
    ptr: *mut u8,
    layout: Layout,
    capacity: u32,
    drop_cells: unsafe fn(*mut u8, u32),
}

// SAFETY: the block is plain memory; access to it is governed by the ring
// protocol (atomics for indices, single producer / single consumer for slots).
unsafe impl Send for HeapBlock {}
// SAFETY: as above.
unsafe impl Sync for HeapBlock {}

/// Drops the loom objects constructed in place (no-op without loom).
///
/// # Safety
/// `p` must point at a header written by `write_header::<T>` with `cap` slots.
#[cfg_attr(not(loom), allow(clippy::extra_unused_type_parameters))]
unsafe fn drop_cells<T: Pod>(p: *mut u8, cap: u32) {
    #[cfg(loom)]
    // SAFETY: caller guarantees the header and slots were constructed by
    // write_header and are dropped once, here.
    unsafe {
        let hdr = p.cast::<Header>();
        ptr::drop_in_place(ptr::addr_of_mut!((*hdr).prod.index));
        ptr::drop_in_place(ptr::addr_of_mut!((*hdr).cons.index));
        let slots = hdr.add(1).cast::<UnsafeSlot<T>>();
        for i in 0..cap as usize {
            ptr::drop_in_place(slots.add(i));
        }
    }
    #[cfg(not(loom))]
    let _ = (p, cap);
}

impl Drop for HeapBlock {
    fn drop(&mut self) {
        // SAFETY: `ptr` was allocated with `layout` by `heap_at` and holds a
        // header written for `capacity` slots; both handles are gone.
        unsafe {
            (self.drop_cells)(self.ptr, self.capacity);
            std::alloc::dealloc(self.ptr, self.layout);
        }
    }
}

/// Which side a handle plays.
#[derive(Clone, Copy)]
enum Role {
    Prod,
    Cons,
}

/// A validated view of one ring: pointers into memory kept alive by `backing`.
struct RingRef<T> {
    hdr: *const Header,
    slots: *const UnsafeSlot<T>,
    capacity: u32,
    mask: u32,
    role: Role,
    _backing: Backing,
    _t: PhantomData<T>,
}

impl<T: Pod> RingRef<T> {
    /// Validates the header at `hdr` (read from possibly hostile memory) and
    /// claims `role`.
    ///
    /// # Safety
    /// `base..base+len` must be valid memory kept alive by `backing`.
    unsafe fn attach(
        base: *mut u8,
        len: usize,
        offset: usize,
        backing: Backing,
        role: Role,
    ) -> Result<Self, RingError> {
        // Place with the smallest capacity first, to read the meta line safely.
        let hdr = place::<T>(base, len, offset, 1)?;
        // SAFETY: `place` checked that a whole header lies in bounds, aligned.
        let h = unsafe { &*hdr };
        if h.meta.magic.load(Acquire) != RING_MAGIC || h.meta.version.load(Relaxed) != RING_VERSION
        {
            return Err(RingError::BadMagic);
        }
        let es = h.meta.entry_size.load(Relaxed);
        if es as usize != size_of::<T>() {
            return Err(RingError::EntrySize(es));
        }
        // Read the capacity once; from now on only our copy is used.
        let capacity = h.meta.capacity.load(Relaxed);
        place::<T>(base, len, offset, capacity)?;
        let claim = match role {
            Role::Prod => &h.prod.claimed,
            Role::Cons => &h.cons.claimed,
        };
        if claim.compare_exchange(0, 1, Acquire, Relaxed).is_err() {
            return Err(RingError::Busy);
        }
        Ok(RingRef {
            hdr,
            // SAFETY: the entry array follows the header, in bounds per `place`.
            slots: unsafe { hdr.add(1) }.cast::<UnsafeSlot<T>>(),
            capacity,
            mask: capacity - 1,
            role,
            _backing: backing,
            _t: PhantomData,
        })
    }

    #[inline]
    fn header(&self) -> &Header {
        // SAFETY: validated at attach; the backing keeps the memory alive.
        unsafe { &*self.hdr }
    }

    #[inline]
    fn prod(&self) -> &Atom {
        &self.header().prod.index
    }

    #[inline]
    fn cons(&self) -> &Atom {
        &self.header().cons.index
    }

    /// Copies `src` into the slots starting at ring index `at`.
    ///
    /// The caller (the single producer) must own those slots: they lie between
    /// `prod` and `cons + capacity`. `src.len() <= capacity`.
    #[inline]
    fn write_slots(&self, at: u32, src: &[T]) {
        debug_assert!(src.len() <= self.capacity as usize);
        let idx = (at & self.mask) as usize;
        #[cfg(not(loom))]
        {
            let first = src.len().min(self.capacity as usize - idx);
            // SAFETY: idx < capacity and first <= capacity - idx, and the rest
            // (src.len() - first <= idx) wraps to the array start: every slot
            // written lies inside the entry array. The producer owns those slots
            // (the consumer's Acquire-loaded index says it is done with them);
            // UnsafeCell<T> is repr(transparent) over T.
            // One entry (request/response traffic) is a plain store, and an
            // unwrapped run one copy: no library calls for nothing.
            unsafe {
                let base = UnsafeSlot::raw_get(self.slots);
                if let [one] = src {
                    ptr::write(base.add(idx), *one);
                } else {
                    ptr::copy_nonoverlapping(src.as_ptr(), base.add(idx), first);
                    if src.len() > first {
                        ptr::copy_nonoverlapping(src.as_ptr().add(first), base, src.len() - first);
                    }
                }
            }
        }
        #[cfg(loom)]
        for (k, v) in src.iter().enumerate() {
            let i = (idx + k) & self.mask as usize;
            // SAFETY: i <= mask < capacity, inside the entry array.
            let cell = unsafe { &*self.slots.add(i) };
            // SAFETY: the producer owns the slot (see above); loom checks it.
            cell.with_mut(|p| unsafe { *p = *v });
        }
    }

    /// Copies slots starting at ring index `at` into `dst`. The caller (the
    /// single consumer) must own them: they lie between `cons` and `prod`.
    #[inline]
    fn read_slots(&self, at: u32, dst: &mut [T]) {
        debug_assert!(dst.len() <= self.capacity as usize);
        let idx = (at & self.mask) as usize;
        #[cfg(not(loom))]
        {
            let first = dst.len().min(self.capacity as usize - idx);
            // SAFETY: bounds as in write_slots. The producer published these
            // slots with Release and we loaded `prod` with Acquire; a hostile
            // producer may still scribble on them, but T is Pod, so any bytes
            // form a valid T.
            unsafe {
                let base = UnsafeSlot::raw_get(self.slots).cast_const();
                if let [one] = dst {
                    *one = ptr::read(base.add(idx));
                } else {
                    ptr::copy_nonoverlapping(base.add(idx), dst.as_mut_ptr(), first);
                    if dst.len() > first {
                        ptr::copy_nonoverlapping(
                            base,
                            dst.as_mut_ptr().add(first),
                            dst.len() - first,
                        );
                    }
                }
            }
        }
        #[cfg(loom)]
        for (k, v) in dst.iter_mut().enumerate() {
            let i = (idx + k) & self.mask as usize;
            // SAFETY: i <= mask < capacity, inside the entry array.
            let cell = unsafe { &*self.slots.add(i) };
            // SAFETY: the consumer owns the slot; loom checks it.
            *v = cell.with(|p| unsafe { *p });
        }
    }
}

impl<T> Drop for RingRef<T> {
    fn drop(&mut self) {
        // SAFETY: memory kept alive by `_backing`, which drops after this.
        let h = unsafe { &*self.hdr };
        let claim = match self.role {
            Role::Prod => &h.prod.claimed,
            Role::Cons => &h.cons.claimed,
        };
        claim.store(0, Release);
    }
}

/// The producing end of a ring. `Send`, not `Clone`.
pub struct Producer<T: Pod> {
    ring: RingRef<T>,
    /// Our producer index (we are its only writer).
    head: u32,
    /// Last consumer index we loaded.
    cached_cons: u32,
    corrupt: u64,
    #[cfg(loom)]
    weak_publish: bool,
}

/// The consuming end of a ring. `Send`, not `Clone`.
pub struct Consumer<T: Pod> {
    ring: RingRef<T>,
    /// Our consumer index (we are its only writer).
    tail: u32,
    /// Last producer index we loaded.
    cached_prod: u32,
    corrupt: u64,
}

// SAFETY: a handle is the only user of its side of the ring in this process
// (claim flag); the memory it points to is kept alive by the Arc it holds, and
// T is Send. Moving the handle to another thread moves that side with it.
unsafe impl<T: Pod> Send for Producer<T> {}
// SAFETY: as above.
unsafe impl<T: Pod> Send for Consumer<T> {}

impl<T: Pod> fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("capacity", &self.ring.capacity)
            .field("head", &self.head)
            .field("corrupt", &self.corrupt)
            .finish()
    }
}

impl<T: Pod> fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("capacity", &self.ring.capacity)
            .field("tail", &self.tail)
            .field("corrupt", &self.corrupt)
            .finish()
    }
}

/// Namespace for creating rings in a [`Region`].
pub struct Ring<T>(PhantomData<T>);

impl<T: Pod> Ring<T> {
    /// Bytes the ring needs; see [`layout_size`].
    pub fn layout_size(capacity: u32) -> usize {
        layout_size::<T>(capacity)
    }

    /// Writes an empty ring header at `offset` (64-byte aligned) in `region`.
    /// Call before handing the region to the peer, with no handle attached.
    pub fn init(region: &Arc<Region>, offset: usize, capacity: u32) -> Result<(), RingError> {
        Self::init_at(region, offset, capacity, 0)
    }

    /// Like [`Ring::init`] but both indices start at `start` (tests use values
    /// near `u32::MAX` to exercise wraparound).
    pub fn init_at(
        region: &Arc<Region>,
        offset: usize,
        capacity: u32,
        start: u32,
    ) -> Result<(), RingError> {
        let hdr = place::<T>(region.as_ptr(), region.len(), offset, capacity)?;
        // SAFETY: `place` checked that a whole header lies in bounds, aligned;
        // we reference only its meta and claim fields, which are std atomics
        // (valid for any bytes).
        let (meta, pc, cc) = unsafe {
            (
                &*ptr::addr_of!((*hdr).meta),
                &*ptr::addr_of!((*hdr).prod.claimed),
                &*ptr::addr_of!((*hdr).cons.claimed),
            )
        };
        if meta.magic.load(Acquire) == RING_MAGIC
            && (pc.load(Acquire) != 0 || cc.load(Acquire) != 0)
        {
            return Err(RingError::Busy);
        }
        // SAFETY: `hdr` comes from `place` for this T and capacity.
        unsafe { write_header::<T>(hdr, capacity, start) };
        Ok(())
    }
}

/// A heap-backed ring for in-process channels (panics unless `capacity` is a
/// power of two in `1..=2^31`). Same layout and code as a shared ring.
pub fn heap<T: Pod>(capacity: u32) -> (Producer<T>, Consumer<T>) {
    heap_at(capacity, 0)
}

/// [`heap`] with both indices starting at `start`.
pub fn heap_at<T: Pod>(capacity: u32, start: u32) -> (Producer<T>, Consumer<T>) {
    check_capacity(capacity).expect("ring::heap capacity");
    let size = layout_size::<T>(capacity);
    let layout = Layout::from_size_align(size, HDR_ALIGN).expect("ring layout");
    // SAFETY: size >= size_of::<Header>() > 0.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    let hdr = place::<T>(p, size, 0, capacity).expect("ring place");
    // SAFETY: `hdr` comes from `place` over our fresh allocation.
    unsafe { write_header::<T>(hdr, capacity, start) };
    let block = Arc::new(HeapBlock {
        ptr: p,
        layout,
        capacity,
        drop_cells: drop_cells::<T>,
    });
    // SAFETY: the block (size bytes at p) lives as long as the Arc in each handle.
    let (pr, cr) = unsafe {
        (
            RingRef::attach(p, size, 0, Backing::Heap(block.clone()), Role::Prod),
            RingRef::attach(p, size, 0, Backing::Heap(block), Role::Cons),
        )
    };
    (
        Producer::new(pr.expect("fresh ring")),
        Consumer::new(cr.expect("fresh ring")),
    )
}

/// Distance `a - b` if it is a plausible fill level, else `None`.
#[inline]
fn distance(a: u32, b: u32, capacity: u32) -> Option<u32> {
    let d = a.wrapping_sub(b);
    (d <= capacity).then_some(d)
}

impl<T: Pod> Producer<T> {
    fn new(ring: RingRef<T>) -> Self {
        // Our own index: only we write it, so a relaxed load is enough; the
        // consumer index is validated on every use.
        let head = ring.prod().load(Relaxed);
        let cached_cons = ring.cons().load(Acquire);
        Producer {
            ring,
            head,
            cached_cons,
            corrupt: 0,
            #[cfg(loom)]
            weak_publish: false,
        }
    }

    /// Attaches to the ring at `offset` in `region`, validating its header.
    pub fn attach(region: &Arc<Region>, offset: usize) -> Result<Self, RingError> {
        // SAFETY: the region's mapping is valid for its length and kept alive
        // by the Arc stored in the handle.
        let r = unsafe {
            RingRef::attach(
                region.as_ptr(),
                region.len(),
                offset,
                Backing::Region(region.clone()),
                Role::Prod,
            )?
        };
        Ok(Self::new(r))
    }

    /// Entries the ring holds.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.ring.capacity as usize
    }

    /// Times the consumer index was implausible (hostile or corrupt peer).
    pub fn corrupt(&self) -> u64 {
        self.corrupt
    }

    /// Free slots, reloading the consumer index if the cached view shows
    /// fewer than `want`. Returns 0 (and counts) if the index is corrupt.
    #[inline]
    fn free_for(&mut self, want: u32) -> u32 {
        let cap = self.ring.capacity;
        let used = self.head.wrapping_sub(self.cached_cons);
        if used <= cap && cap - used >= want {
            return cap - used;
        }
        let cons = self.ring.cons().load(Acquire);
        match distance(self.head, cons, cap) {
            Some(used) => {
                self.cached_cons = cons;
                cap - used
            }
            None => {
                self.corrupt += 1;
                0
            }
        }
    }

    /// Pushes a prefix of `items`; returns how many were pushed.
    #[inline]
    pub fn push(&mut self, items: &[T]) -> usize {
        let want = items.len().min(self.ring.capacity as usize) as u32;
        let n = self.free_for(want).min(want);
        if n == 0 {
            return 0;
        }
        self.ring.write_slots(self.head, &items[..n as usize]);
        self.head = self.head.wrapping_add(n);
        self.ring.prod().store(self.head, self.publish_ordering());
        n as usize
    }

    /// Pushes one item; gives it back if the ring is full.
    #[inline]
    pub fn push_one(&mut self, item: T) -> Result<(), T> {
        if self.push(std::slice::from_ref(&item)) == 1 {
            Ok(())
        } else {
            Err(item)
        }
    }

    /// Free slots right now (reloads the consumer index).
    pub fn free(&mut self) -> usize {
        self.free_for(u32::MAX) as usize
    }

    /// Entries in the ring right now (capacity if the peer index is corrupt).
    pub fn len(&mut self) -> usize {
        self.capacity() - self.free()
    }

    /// Free slots right now, through a shared reference: loads the
    /// consumer index (`Acquire`) without caching it or counting a corrupt
    /// value (0 then). For a producer that waits for room.
    pub fn peek_free(&self) -> usize {
        let cons = self.ring.cons().load(Acquire);
        let cap = self.ring.capacity;
        distance(self.head, cons, cap).map_or(0, |used| (cap - used) as usize)
    }

    /// True if the consumer has taken everything.
    pub fn is_empty(&mut self) -> bool {
        self.len() == 0
    }

    #[inline]
    fn publish_ordering(&self) -> Ordering {
        #[cfg(loom)]
        if self.weak_publish {
            return Relaxed;
        }
        Release
    }

    /// Test knob (loom builds only): publish the producer index with `Relaxed`
    /// instead of `Release`, which is wrong; loom must catch it.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn weaken_publish_ordering(&mut self) {
        self.weak_publish = true;
    }
}

/// A look at whether a ring holds entries, from outside both of its
/// handles: its producer index against its consumer's, both as published
/// in the ring. For code on the consumer's thread that cannot reach the
/// consumer (an executor checking, between two iterations of another
/// task, whether frames wait for the task that owns the consumer). One
/// load of each index; no claim, no effect on the ring.
#[derive(Clone)]
pub struct RingProbe {
    hdr: *const Header,
    _backing: Backing,
}

// SAFETY: the header it points to is kept alive by the backing it holds,
// and it is only read through atomics.
unsafe impl Send for RingProbe {}

impl fmt::Debug for RingProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RingProbe")
            .field("nonempty", &self.nonempty())
            .finish()
    }
}

impl RingProbe {
    /// Whether entries wait: the producer has published more than the
    /// consumer has taken (a corrupt pair of indices reads as entries: a
    /// false `true` costs its reader one empty look).
    #[inline]
    pub fn nonempty(&self) -> bool {
        // SAFETY: validated when the consumer that made it attached; the
        // backing keeps the memory alive.
        let h = unsafe { &*self.hdr };
        h.prod.index.load(Acquire) != h.cons.index.load(Relaxed)
    }
}

impl<T: Pod> Consumer<T> {
    /// A [`RingProbe`] of this ring.
    pub fn probe(&self) -> RingProbe {
        RingProbe {
            hdr: self.ring.hdr,
            _backing: self.ring._backing.clone(),
        }
    }

    fn new(ring: RingRef<T>) -> Self {
        let tail = ring.cons().load(Relaxed);
        let cached_prod = ring.prod().load(Acquire);
        Consumer {
            ring,
            tail,
            cached_prod,
            corrupt: 0,
        }
    }

    /// Attaches to the ring at `offset` in `region`, validating its header.
    pub fn attach(region: &Arc<Region>, offset: usize) -> Result<Self, RingError> {
        // SAFETY: as in Producer::attach.
        let r = unsafe {
            RingRef::attach(
                region.as_ptr(),
                region.len(),
                offset,
                Backing::Region(region.clone()),
                Role::Cons,
            )?
        };
        Ok(Self::new(r))
    }

    /// Entries the ring holds.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.ring.capacity as usize
    }

    /// Times the producer index was implausible (hostile or corrupt peer).
    pub fn corrupt(&self) -> u64 {
        self.corrupt
    }

    /// Entries available, reloading the producer index if the cached view
    /// shows fewer than `want`. Returns 0 (and counts) if the index is corrupt.
    #[inline]
    fn avail_for(&mut self, want: u32) -> u32 {
        let cap = self.ring.capacity;
        let have = self.cached_prod.wrapping_sub(self.tail);
        if have <= cap && have >= want {
            return have;
        }
        let prod = self.ring.prod().load(Acquire);
        match distance(prod, self.tail, cap) {
            Some(have) => {
                self.cached_prod = prod;
                have
            }
            None => {
                self.corrupt += 1;
                0
            }
        }
    }

    /// Pops up to `out.len()` entries into `out`; returns how many.
    #[inline]
    pub fn pop(&mut self, out: &mut [T]) -> usize {
        let want = out.len().min(self.ring.capacity as usize) as u32;
        let n = self.avail_for(want).min(want);
        if n == 0 {
            return 0;
        }
        self.ring.read_slots(self.tail, &mut out[..n as usize]);
        self.tail = self.tail.wrapping_add(n);
        self.ring.cons().store(self.tail, Release);
        n as usize
    }

    /// Pops one entry.
    #[inline]
    pub fn pop_one(&mut self) -> Option<T> {
        // SAFETY: T is Pod, so all-zero bytes are a valid T.
        let mut v = [unsafe { std::mem::zeroed::<T>() }];
        (self.pop(&mut v) == 1).then_some(v[0])
    }

    /// Entries available right now (reloads the producer index; 0 if corrupt).
    pub fn len(&mut self) -> usize {
        self.avail_for(u32::MAX) as usize
    }

    /// True if nothing is available.
    pub fn is_empty(&mut self) -> bool {
        self.len() == 0
    }

    /// Entries available right now, through a shared reference: loads the
    /// producer index (`Acquire`) without caching it or counting a corrupt
    /// value (0 then). For length queries of a channel that is read-only.
    pub fn peek_len(&self) -> usize {
        let prod = self.ring.prod().load(Acquire);
        distance(prod, self.tail, self.ring.capacity).unwrap_or(0) as usize
    }

    /// Free slots from the consumer's view.
    pub fn free(&mut self) -> usize {
        self.capacity() - self.len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn heap_roundtrip_and_wrap() {
        let (mut p, mut c) = heap_at::<u32>(4, u32::MAX - 2);
        let mut out = [0u32; 8];
        for round in 0..10u32 {
            assert_eq!(p.push(&[round, round + 1, round + 2, round + 3, 99]), 4);
            assert_eq!(p.push_one(7), Err(7));
            assert_eq!(c.len(), 4);
            assert_eq!(c.pop(&mut out[..3]), 3);
            assert_eq!(&out[..3], &[round, round + 1, round + 2]);
            assert_eq!(c.pop_one(), Some(round + 3));
            assert_eq!(c.pop_one(), None);
            assert!(p.is_empty());
        }
    }

    #[test]
    fn region_attach_validates() {
        let r = Region::create("ring-test", 8192).unwrap();
        assert_eq!(
            Producer::<Desc>::attach(&r, 0).unwrap_err(),
            RingError::BadMagic
        );
        assert_eq!(
            Ring::<Desc>::init(&r, 0, 3).unwrap_err(),
            RingError::BadCapacity(3)
        );
        assert_eq!(
            Ring::<Desc>::init(&r, 8, 4).unwrap_err(),
            RingError::Misaligned
        );
        assert_eq!(
            Ring::<Desc>::init(&r, 0, 1024).unwrap_err(),
            RingError::OutOfBounds
        );
        Ring::<Desc>::init(&r, 64, 16).unwrap();
        assert_eq!(
            Producer::<u32>::attach(&r, 64).unwrap_err(),
            RingError::EntrySize(8)
        );
        let mut p = Producer::<Desc>::attach(&r, 64).unwrap();
        assert_eq!(
            Producer::<Desc>::attach(&r, 64).unwrap_err(),
            RingError::Busy
        );
        assert_eq!(Ring::<Desc>::init(&r, 64, 16).unwrap_err(), RingError::Busy);
        let mut c = Consumer::<Desc>::attach(&r, 64).unwrap();
        assert_eq!(p.push(&[Desc::new(1, 2), Desc::new(3, 4)]), 2);
        let mut out = [Desc::default(); 4];
        assert_eq!(c.pop(&mut out), 2);
        assert_eq!(out[1], Desc::new(3, 4));
        drop(c);
        // Re-attach after drop works.
        let _c = Consumer::<Desc>::attach(&r, 64).unwrap();
    }

    #[test]
    fn hostile_indices_are_refused() {
        let r = Region::create("ring-hostile", 8192).unwrap();
        Ring::<u32>::init(&r, 0, 8).unwrap();
        let mut c = Consumer::<u32>::attach(&r, 0).unwrap();
        let mut p = Producer::<u32>::attach(&r, 0).unwrap();
        // A hostile producer claims 1000 entries are ready.
        // SAFETY: offset 0 holds a ring header; the prod index is an atomic.
        let hdr = unsafe { &*(r.as_ptr() as *const Header) };
        hdr.prod.index.store(1000, Release);
        let mut out = [0u32; 16];
        assert_eq!(c.pop(&mut out), 0);
        assert_eq!(c.corrupt(), 1);
        // Capacity rewritten by the peer after attach is ignored.
        hdr.meta.capacity.store(1 << 30, Relaxed);
        hdr.prod.index.store(0, Release);
        hdr.cons.index.store(5000, Release);
        // The cached view still allows one ring's worth; then the reload fails.
        assert_eq!(p.push(&[0; 8]), 8);
        assert_eq!(p.push(&[1, 2, 3]), 0);
        assert_eq!(p.corrupt(), 1);
    }
}
