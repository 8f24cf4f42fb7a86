//! The communication area: memory shared between the parts of lazynet and,
//! when needed, between processes.
//!
//! **Owns:** memfd-backed [`Region`]s, the fixed-size buffers inside them
//! ([`BufArea`]), packet descriptors ([`Desc`]), the `#[repr(C)]`
//! single-producer/single-consumer index rings ([`ring`]) and the doorbells
//! that let a ring's consumer sleep ([`doorbell`]).
//!
//! **May not touch:** anything about packets' contents or protocols. Nothing in
//! shared memory is a pointer: buffers are named by `u32` index, rings hold
//! descriptors, and every index read from shared memory is checked before use,
//! because the other side of a region may be another, untrusted, process.
//!
//! This module (with `nic` and `sys`) is one of the only places allowed to
//! use `unsafe`; each block says why it is sound.

pub mod area;
pub mod doorbell;
pub mod file;
pub mod jobs;
pub mod notify;
pub mod region;
pub mod ring;

pub use area::AppArea;
pub use doorbell::Doorbell;
pub use file::MappedFile;
pub use notify::{Applied, FlagRef, ReadyFlag};
pub use region::{prefetch, BufArea, Region};
pub use ring::{Consumer, Pod, Producer, Ring, RingError, RingProbe};

/// A packet descriptor: a byte range inside one buffer of a [`BufArea`].
///
/// Eight bytes, so eight descriptors fill a cache line. A buffer is at most
/// 64 KiB, which covers jumbo frames; larger segments use several buffers.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Desc {
    /// Buffer index inside the area.
    pub buf: u32,
    /// Offset of the first byte inside the buffer.
    pub off: u16,
    /// Length in bytes.
    pub len: u16,
}

impl Desc {
    /// A descriptor for `len` bytes at the start of buffer `buf`.
    #[inline]
    pub const fn new(buf: u32, len: u16) -> Self {
        Desc { buf, off: 0, len }
    }
}
