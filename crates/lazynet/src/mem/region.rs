//! memfd-backed regions and the fixed-size buffers carved out of them.
//!
//! `memfd` + `memmap2` are used rather than raw `memfd_create`/`mmap` calls:
//! both are small, well-kept crates and give us sealing and safe unmapping.
//!
//! **Owns:** the mapping, its length and the buffer geometry; every
//! index and range handed in is checked against them. **May not touch:**
//! what the bytes mean.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use memmap2::MmapRaw;

use super::Desc;

/// A shared-memory region backed by a memfd. Another process can map the
/// same memory through [`Region::fd`] and [`Region::open`].
#[derive(Debug)]
pub struct Region {
    map: MmapRaw,
    file: File,
}

impl Region {
    /// Creates a zero-filled region of `len` bytes.
    pub fn create(name: &str, len: usize) -> io::Result<Arc<Region>> {
        let mfd = memfd::MemfdOptions::default()
            .close_on_exec(true)
            .allow_sealing(true)
            .create(name)
            .map_err(io::Error::other)?;
        let file = mfd.into_file();
        file.set_len(len as u64)?;
        Self::map(file)
    }

    /// Creates a zero-filled region of `len` bytes whose size can never
    /// change again (memfd seals: no shrinking, no growing, no more seals),
    /// for memory shared with a process that is not trusted. A process
    /// that could shrink the file would make this one's next access beyond
    /// the new end a `SIGBUS`; sealed, its `ftruncate` fails with `EPERM`.
    pub fn create_sealed(name: &str, len: usize) -> io::Result<Arc<Region>> {
        let mfd = memfd::MemfdOptions::default()
            .close_on_exec(true)
            .allow_sealing(true)
            .create(name)
            .map_err(io::Error::other)?;
        mfd.as_file().set_len(len as u64)?;
        mfd.add_seals(&[
            memfd::FileSeal::SealShrink,
            memfd::FileSeal::SealGrow,
            memfd::FileSeal::SealSeal,
        ])
        .map_err(io::Error::other)?;
        Self::map(mfd.into_file())
    }

    /// Maps a region created by another process (or an earlier call) from
    /// its file descriptor. The length is the file's length.
    pub fn open(fd: OwnedFd) -> io::Result<Arc<Region>> {
        Self::map(File::from(fd))
    }

    /// [`Region::open`] for a descriptor handed over by a process that is
    /// not trusted: refused (`PermissionDenied`) unless it is a memfd
    /// whose size is sealed (see [`Region::create_sealed`]), so that the
    /// sender cannot shrink it under this process's mapping.
    pub fn open_sealed(fd: OwnedFd) -> io::Result<Arc<Region>> {
        let file = File::from(fd);
        if !size_sealed(&file) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "region not sealed against resizing",
            ));
        }
        Self::map(file)
    }

    /// Whether the region's size is sealed (it can neither shrink nor
    /// grow).
    pub fn is_size_sealed(&self) -> bool {
        size_sealed(&self.file)
    }

    fn map(file: File) -> io::Result<Arc<Region>> {
        // Populated (MAP_POPULATE) at once: the pages are faulted in here,
        // at set-up, not one by one on the data path the first time each
        // buffer is used (a page fault per two fresh buffers made the first
        // hundred milliseconds of a stream send late). So a region is
        // resident from creation (or from `open`) to its end.
        let map = memmap2::MmapOptions::new().populate().map_raw(&file)?;
        Ok(Arc::new(Region { map, file }))
    }

    /// The memfd, to hand to another process (clear `FD_CLOEXEC` on a
    /// duplicate first when passing it through `exec`).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// A duplicate of the memfd with `FD_CLOEXEC` clear, so that a child
    /// started with `exec` inherits it (pass its number to the child; drop it
    /// here after spawning).
    pub fn dup_inheritable(&self) -> io::Result<OwnedFd> {
        // SAFETY: F_DUPFD on an fd we own has no memory effects; it returns a
        // new descriptor (without FD_CLOEXEC) or -1.
        let fd = unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_DUPFD, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True for a zero-length region.
    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    /// Base address of the mapping. Valid for as long as the region lives.
    pub fn as_ptr(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }
}

/// Whether `file` is a memfd whose size can neither shrink nor grow.
fn size_sealed(file: &File) -> bool {
    let Ok(dup) = file.try_clone() else {
        return false;
    };
    match memfd::Memfd::try_from_file(dup) {
        Ok(m) => m.seals().is_ok_and(|s| {
            s.contains(&memfd::FileSeal::SealShrink) && s.contains(&memfd::FileSeal::SealGrow)
        }),
        Err(_) => false,
    }
}

/// `count` buffers of `buf_size` bytes each, laid out back to back at
/// `offset` inside a [`Region`].
///
/// Ownership protocol: a buffer belongs to exactly one party at a time (the
/// NIC, the demux channel, a socket, the peer process); ownership moves only
/// with the descriptor that names it. [`BufArea::frame`] and
/// [`BufArea::buf_mut`] may only be used by the current owner. All indices and
/// ranges are checked, so a wrong descriptor (for example one written by a
/// hostile peer) yields `None`, never an out-of-bounds access.
#[derive(Clone, Debug)]
pub struct BufArea {
    region: Arc<Region>,
    offset: usize,
    buf_size: u32,
    count: u32,
}

// SAFETY: BufArea only hands out byte slices inside its region under the
// ownership protocol above; the region mapping itself is valid on any thread.
// Clones used on two threads at once (the `ni-lrp` NI and host) are sound
// under the same protocol, provided a buffer's ownership passes from one
// thread to the other only through a synchronizing hand-over: every queue
// between them is an SPSC ring whose push publishes with `Release` and whose
// pop loads with `Acquire`, so the previous owner's accesses to the buffer
// happen before the next owner's, and no two threads hold slices of the
// same buffer at the same time.
unsafe impl Send for BufArea {}
// SAFETY: shared references give read access to buffers the caller owns.
unsafe impl Sync for BufArea {}

impl BufArea {
    /// Describes `count` buffers of `buf_size` bytes starting at `offset`.
    /// Fails if they do not fit inside the region.
    pub fn new(region: Arc<Region>, offset: usize, buf_size: u32, count: u32) -> io::Result<Self> {
        let need = (buf_size as usize)
            .checked_mul(count as usize)
            .and_then(|n| n.checked_add(offset));
        match need {
            Some(end) if end <= region.len() && buf_size > 0 && buf_size <= 65536 => Ok(BufArea {
                region,
                offset,
                buf_size,
                count,
            }),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "buffer area does not fit region",
            )),
        }
    }

    /// A process-private area of `count` buffers (memfd-backed all the same).
    pub fn private(name: &str, buf_size: u32, count: u32) -> io::Result<Self> {
        let region = Region::create(name, buf_size as usize * count as usize)?;
        Self::new(region, 0, buf_size, count)
    }

    /// Size of every buffer.
    #[inline]
    pub fn buf_size(&self) -> usize {
        self.buf_size as usize
    }

    /// Number of buffers.
    #[inline]
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The region the buffers live in.
    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }

    /// True if `d` names a byte range inside one buffer of this area.
    #[inline]
    pub fn valid(&self, d: Desc) -> bool {
        d.buf < self.count && d.off as u32 + d.len as u32 <= self.buf_size
    }

    /// The bytes `d` describes, or `None` if `d` is out of range.
    #[inline]
    pub fn frame(&self, d: Desc) -> Option<&[u8]> {
        if !self.valid(d) {
            return None;
        }
        let start = self.offset + d.buf as usize * self.buf_size as usize + d.off as usize;
        // SAFETY: `valid` checked that [start, start+len) lies inside the
        // mapping (checked at construction). The caller owns the buffer per the
        // ownership protocol, so no one writes it while the slice lives.
        Some(unsafe { std::slice::from_raw_parts(self.region.as_ptr().add(start), d.len as usize) })
    }

    /// Asks the CPU to fetch the first `len` bytes of buffer `buf` into
    /// this core's cache for writing (`prefetchw`; a hint: nothing happens
    /// if `buf` is out of range, and memory is never changed). A transmit
    /// burst calls it a few buffers ahead of the one it fills: a free buffer
    /// was last read by the core that received it, and without the hint the
    /// copy into it stops at every line until that core gives the line up.
    #[inline]
    pub fn prefetch_write(&self, buf: u32, len: usize) {
        if buf >= self.count {
            return;
        }
        let start = self.offset + buf as usize * self.buf_size as usize;
        let end = start + len.min(self.buf_size as usize);
        let base = self.region.as_ptr();
        let mut at = start;
        while at < end {
            prefetch_write_line(base.wrapping_add(at));
            at += 64;
        }
    }

    /// Asks the CPU to fetch the lines of the frame `d` describes into this
    /// core's cache for reading (`prefetcht0`; a hint: nothing happens if
    /// `d` is out of range, and memory is never changed).
    ///
    /// For a receiver whose frames another core wrote (the in-memory wire):
    /// each line is a cross-core transfer (~100 ns on an Intel host), and the
    /// checksum loop, reading a frame line by line, has only a few of them
    /// in flight at once. Fetching a frame while an earlier one is summed
    /// overlaps the transfers (`stack::RX_AHEAD`).
    #[inline]
    pub fn prefetch_read(&self, d: Desc) {
        let Some(f) = self.frame(d) else { return };
        for_each_line(f, prefetch_read_line);
    }

    /// [`BufArea::prefetch_read`] for the first 128 bytes of the frame
    /// only (Ethernet, IP and TCP or UDP headers: what classification
    /// reads), so that a received batch's header misses overlap.
    #[inline]
    pub fn prefetch_headers(&self, d: Desc) {
        let Some(f) = self.frame(d) else { return };
        let p = f.as_ptr();
        prefetch_read_line(p);
        // The headers of a frame not starting on a line cross into the next.
        prefetch_read_line(p.wrapping_add(64));
    }

    /// Evicts the lines of the frame `d` describes from every cache
    /// (`clflushopt`, or `clflush` on CPUs without it; a no-op off x86_64
    /// and for an out-of-range `d`). Memory keeps its contents: this
    /// changes where the lines live, never what they hold.
    ///
    /// For a receiver that has copied a frame out of a buffer another core
    /// wrote and will write again (`stack::evict`): where the two cores
    /// do not share a cache, that core's next write must first take the
    /// lines back from this core's caches, one slow cross-core transfer per
    /// line; once they are evicted it fetches them from memory instead.
    /// Whether that pays depends on where the host put the cores, so the
    /// stack decides by measuring.
    #[inline]
    pub fn evict(&self, d: Desc) {
        let Some(f) = self.frame(d) else { return };
        let opt = has_clflushopt();
        for_each_line(f, |p| evict_line(p, opt));
    }

    /// The whole buffer `buf` for writing, or `None` if out of range.
    #[inline]
    pub fn buf_mut(&mut self, buf: u32) -> Option<&mut [u8]> {
        if buf >= self.count {
            return None;
        }
        let start = self.offset + buf as usize * self.buf_size as usize;
        // SAFETY: in bounds as above; `&mut self` rules out other slices from
        // this handle, and the ownership protocol rules out other owners.
        Some(unsafe {
            std::slice::from_raw_parts_mut(self.region.as_ptr().add(start), self.buf_size as usize)
        })
    }
}

/// Calls `op` with the start of each cache line that holds a byte of `f`,
/// first to last (the first rounded down to its line).
#[inline(always)]
fn for_each_line(f: &[u8], mut op: impl FnMut(*const u8)) {
    let end = f.as_ptr_range().end;
    let mut p = f.as_ptr().wrapping_sub(f.as_ptr() as usize & 63);
    while p < end {
        op(p);
        p = p.wrapping_add(64);
    }
}

/// Whether the CPU has `clflushopt` (CPUID leaf 7, EBX bit 23), asked once.
#[cfg(target_arch = "x86_64")]
fn has_clflushopt() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        // Leaf 7 is asked only if the highest basic leaf (leaf 0's EAX)
        // reaches it.
        let max = std::arch::x86_64::__cpuid(0).eax;
        max >= 7 && std::arch::x86_64::__cpuid_count(7, 0).ebx & (1 << 23) != 0
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn has_clflushopt() -> bool {
    false
}

/// Evicts the line holding `p` from every cache (`clflushopt` if `opt`,
/// else `clflush`), writing it back first if it is dirty.
#[inline]
fn evict_line(p: *const u8, opt: bool) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `p` lies inside the mapping: callers take it from a frame
    // inside it (`BufArea::frame`) and round down to a line, and the mapping
    // starts on a page (so on a line) and ends on one. It is readable, so neither instruction
    // can fault. Both
    // keep the line's contents (written back if dirty) and change no register
    // or flag; `clflushopt` is weakly ordered, which only affects when the
    // line leaves the caches, never what any core reads.
    unsafe {
        if opt {
            std::arch::asm!("clflushopt [{0}]", in(reg) p, options(nostack, preserves_flags));
        } else {
            std::arch::asm!("clflush [{0}]", in(reg) p, options(nostack, preserves_flags));
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, opt);
}

/// Asks the CPU to fetch `*r` (up to its first four cache lines) into this
/// core's cache for reading: a hint, issued one item ahead of its use
/// where items are touched in an order the hardware cannot guess (the
/// streamer's clients, one per packet). Never faults, changes nothing.
#[inline]
pub fn prefetch<T>(r: &T) {
    let p = (r as *const T).cast::<u8>();
    let len = std::mem::size_of::<T>().min(256);
    if len == 0 {
        return;
    }
    // Every line the object touches, from the one holding its first byte.
    let base = p.wrapping_sub(p as usize & 63);
    let lines = ((p as usize & 63) + len).div_ceil(64);
    for k in 0..lines {
        prefetch_read_line(base.wrapping_add(k * 64));
    }
}

/// `prefetcht0` for the line holding `p` (std's `_mm_prefetch`).
#[inline]
fn prefetch_read_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 CPU has. Its
    // `prefetcht0` is a hint: it never faults, whatever the address (so a
    // line past a frame's end is harmless), and writes no memory.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// `prefetchw` for the line holding `p`. In asm, not `_mm_prefetch`: its
/// `_MM_HINT_ET0` lowers to `prefetcht0` unless the build enables the
/// `prfchw` target feature, which baseline x86_64 lacks.
#[inline]
fn prefetch_write_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetchw` is a hint: it never faults, whatever the address,
    // and writes no memory, register or flag (CPUs without it execute it as
    // a no-op). Callers pass addresses inside the mapping anyway.
    unsafe {
        std::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_region_cannot_be_resized_through_any_descriptor() {
        let r = Region::create_sealed("sealed", 8192).unwrap();
        assert!(r.is_size_sealed());
        // Another descriptor of the same memfd, as a peer would hold it.
        let peer = File::from(r.fd().try_clone_to_owned().unwrap());
        for len in [0, 4096, 1 << 20] {
            let e = peer.set_len(len).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EPERM), "set_len({len})");
        }
        assert_eq!(r.len(), 8192);
        let other = Region::open_sealed(r.fd().try_clone_to_owned().unwrap()).unwrap();
        assert_eq!(other.len(), 8192);
    }

    #[test]
    fn an_unsealed_region_is_refused_where_a_sealed_one_is_required() {
        let r = Region::create("plain", 4096).unwrap();
        assert!(!r.is_size_sealed());
        let e = Region::open_sealed(r.fd().try_clone_to_owned().unwrap()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        // Not a memfd at all: refused too.
        let f = File::open("/proc/self/status").unwrap();
        assert!(Region::open_sealed(OwnedFd::from(f)).is_err());
    }

    #[test]
    fn read_prefetches_change_nothing_and_ignore_descriptors_out_of_range() {
        let mut area = BufArea::private("pf", 2048, 4).unwrap();
        for b in 0..4 {
            area.buf_mut(b).unwrap().fill(b as u8 + 1);
        }
        let at = |buf, off, len| Desc { buf, off, len };
        let hints = [
            at(0, 0, 1514),
            // The last byte of the area, and an empty frame there.
            at(3, 2047, 1),
            at(3, 2048, 0),
            // Out of range: past the last buffer, past a buffer's end.
            at(4, 0, 64),
            at(1, 2000, 100),
            at(u32::MAX, u16::MAX, u16::MAX),
        ];
        for d in hints {
            area.prefetch_read(d);
            area.prefetch_headers(d);
        }
        for b in 0..4 {
            assert!(area.buf_mut(b).unwrap().iter().all(|&x| x == b as u8 + 1));
        }
    }
}
