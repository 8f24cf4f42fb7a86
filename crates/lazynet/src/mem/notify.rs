//! The "armed" flag of a notifying channel shared between two threads: the
//! producer (the NI) puts a channel's id on a ready ring only when it arms
//! the flag, so the id is on the ring at most once; the consumer (the host)
//! disarms it before it looks at the channel.
//!
//! **Owns:** the flag and the orderings of its two operations; and the
//! [`Applied`] counter by which the NI tells the host how many control
//! commands it has applied.
//!
//! **May not touch:** the rings themselves (their protocol is [`super::ring`]'s).
//!
//! Protocol, for one channel with data ring `D`, ready ring `R`, flag `F`:
//! * producer: push descriptors onto `D` (published with `Release`), then
//!   [`ReadyFlag::arm`]; if it returns true, push the id onto `R`;
//! * consumer: pop the id from `R`, [`ReadyFlag::disarm`], then read `D`.
//!
//! Why no frame is stranded (on `D` with nobody notified): both operations
//! are read-modify-writes of the same atomic, so they are totally ordered
//! in its modification order and each reads the value the previous one
//! wrote. If the producer's `arm` comes after the consumer's `disarm`, it
//! reads `false` and pushes the id again. If it comes before, the
//! consumer's `disarm` (`Acquire`) reads the value the `arm` (`Release`)
//! wrote, so the producer's push onto `D`, which happens before its `arm`,
//! happens before the consumer's read of `D`: the consumer sees the frame.
//! This is the lost-wake-up problem of the Dekker pattern without a second
//! variable to order against, so `AcqRel` suffices and no `SeqCst` fence is
//! needed. A plain `store(false)` in `disarm` would break the argument (a
//! store does not read the `arm` it follows); the loom model
//! (`tests/loom/notify.rs`) shows that variant strands a frame.

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, AtomicU64};

#[cfg(not(loom))]
use super::Region;

/// One channel's armed flag. One byte, valid for any bit pattern a peer
/// process may leave in shared memory (0 is disarmed, anything else armed).
#[derive(Debug)]
#[repr(transparent)]
pub struct ReadyFlag {
    armed: AtomicBool,
}

impl Default for ReadyFlag {
    fn default() -> Self {
        Self::new()
    }
}

impl ReadyFlag {
    /// A disarmed flag.
    pub fn new() -> Self {
        ReadyFlag {
            armed: AtomicBool::new(false),
        }
    }

    /// Producer side, after publishing data: true if the caller must put
    /// the channel's id on the ready ring (the flag was not armed).
    #[inline]
    pub fn arm(&self) -> bool {
        !self.armed.swap(true, AcqRel)
    }

    /// Consumer side, after taking the id off the ready ring and before
    /// reading the channel.
    #[inline]
    pub fn disarm(&self) {
        self.armed.swap(false, AcqRel);
    }

    /// True while armed (for diagnostics; racy by nature).
    pub fn is_armed(&self) -> bool {
        self.armed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Test knob (loom builds only): disarm with a plain `Relaxed` store,
    /// which is wrong; loom must find the stranded frame.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn disarm_weak(&self) {
        self.armed
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A handle on a [`ReadyFlag`] that lives either on the heap (an NI thread
/// of the same process) or inside a shared [`Region`] (an application's
/// communication area, shared with the daemon). Both sides hold one; a
/// dereference is one pointer load either way.
pub struct FlagRef {
    ptr: std::ptr::NonNull<ReadyFlag>,
    _keep: Keep,
}

#[allow(dead_code)] // Held only to keep the memory alive.
enum Keep {
    Heap(std::sync::Arc<ReadyFlag>),
    #[cfg(not(loom))]
    Region(std::sync::Arc<Region>),
}

// SAFETY: a `FlagRef` is a shared reference to an atomic (`Sync`) kept
// alive by the `Arc` it holds; sending or sharing it is sending or sharing
// that `Arc` and a `&ReadyFlag`.
unsafe impl Send for FlagRef {}
// SAFETY: as above; every access through it is atomic.
unsafe impl Sync for FlagRef {}

impl FlagRef {
    /// A new disarmed flag on the heap.
    pub fn heap() -> FlagRef {
        let a = std::sync::Arc::new(ReadyFlag::new());
        FlagRef {
            ptr: std::ptr::NonNull::from(&*a),
            _keep: Keep::Heap(a),
        }
    }

    /// The flag at byte `off` of `region` (any offset inside it: the flag
    /// is one byte). Its state is whatever the region holds.
    #[cfg(not(loom))]
    pub fn in_region(region: &std::sync::Arc<Region>, off: usize) -> std::io::Result<FlagRef> {
        if off >= region.len() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "ready flag outside its region",
            ));
        }
        // SAFETY: `off` is inside the mapping (checked above), which stays
        // mapped while the `Arc<Region>` we keep lives; a one-byte atomic
        // needs no alignment and is valid for any byte value, and the
        // peer only ever accesses it atomically.
        let p = unsafe { region.as_ptr().add(off) }.cast::<ReadyFlag>();
        Ok(FlagRef {
            ptr: std::ptr::NonNull::new(p).expect("a mapping is never at address 0"),
            _keep: Keep::Region(region.clone()),
        })
    }
}

#[cfg(loom)]
impl FlagRef {
    /// Under loom regions are not modelled.
    pub fn in_region(
        _region: &std::sync::Arc<super::Region>,
        _off: usize,
    ) -> std::io::Result<FlagRef> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "regions are not modelled under loom",
        ))
    }
}

impl Clone for FlagRef {
    fn clone(&self) -> Self {
        FlagRef {
            ptr: self.ptr,
            _keep: match &self._keep {
                Keep::Heap(a) => Keep::Heap(a.clone()),
                #[cfg(not(loom))]
                Keep::Region(r) => Keep::Region(r.clone()),
            },
        }
    }
}

impl std::ops::Deref for FlagRef {
    type Target = ReadyFlag;
    #[inline]
    fn deref(&self) -> &ReadyFlag {
        // SAFETY: see the constructors: the pointee is alive while `_keep` is.
        unsafe { self.ptr.as_ref() }
    }
}

impl std::fmt::Debug for FlagRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("FlagRef").field(&**self).finish()
    }
}

/// How many control commands the NI has applied (a running count, single
/// writer). The host retires a channel's inbound ring once the count
/// covers the unbind: the NI's last push onto that ring (published with
/// `Release` on the ring) happened before its [`Applied::publish`]
/// (`Release`), which the host's [`Applied::get`] (`Acquire`) reads, so the
/// host's drain sees every frame (loom model: `tests/loom/notify.rs`).
#[derive(Debug)]
pub struct Applied {
    n: AtomicU64,
}

impl Default for Applied {
    fn default() -> Self {
        Self::new()
    }
}

impl Applied {
    /// Zero commands applied.
    pub fn new() -> Self {
        Applied {
            n: AtomicU64::new(0),
        }
    }

    /// NI side: `n` commands are applied, with all their effects.
    #[inline]
    pub fn publish(&self, n: u64) {
        self.n.store(n, Release);
    }

    /// Host side: commands applied so far.
    #[inline]
    pub fn get(&self) -> u64 {
        self.n.load(Acquire)
    }
}
