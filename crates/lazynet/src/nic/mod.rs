//! Network interfaces: the [`Nic`] trait and its drivers.
//!
//! **Owns:** moving frames between a device (or a peer endpoint) and
//! descriptors in a [`BufArea`]; the buffers' free lists of a device.
//!
//! **May not touch:** protocol state. A driver never parses a frame beyond
//! what it must (the pcap recorder and fault injector do not parse at all).
//!
//! Buffer ownership: `recv` hands buffers to the caller; the caller gives every
//! buffer back exactly once, either by `send` (ownership passes to the NIC) or
//! by `release`. Buffers from `alloc` follow the same rule. A buffer received
//! may be sent again unchanged or rewritten in place (zero-copy echo).

pub mod fault;
pub mod netns;
pub mod pcap;
pub mod tap;
pub mod wirepair;

use crate::mem::{BufArea, Desc};

/// A network interface that moves Ethernet frames in batches.
pub trait Nic {
    /// The interface's MAC address.
    fn mac(&self) -> [u8; 6];

    /// Largest IP packet (Ethernet payload) the link carries, e.g. 1500.
    fn mtu(&self) -> usize;

    /// The buffers that descriptors of this NIC refer to.
    fn buffers(&self) -> &BufArea;

    /// The buffers, for writing a frame into a buffer the caller owns.
    fn buffers_mut(&mut self) -> &mut BufArea;

    /// Receives up to `out.len()` frames; returns how many were written.
    fn recv(&mut self, out: &mut [Desc]) -> usize;

    /// Takes up to `out.len()` free buffers for transmission; returns how many.
    fn alloc(&mut self, out: &mut [u32]) -> usize;

    /// Transmits frames in order; returns how many (a prefix of `frames`) the
    /// NIC accepted. Buffers of frames not accepted still belong to the caller.
    fn send(&mut self, frames: &[Desc]) -> usize;

    /// Gives back buffers the caller owns and no longer needs.
    fn release(&mut self, bufs: &[Desc]);

    /// Moves any batched work forward (flush pending transmissions, refill
    /// receive buffers). Drivers that do everything eagerly need not override.
    fn flush(&mut self) {}

    /// Waits until a frame may be ready or `timeout_ns` passes (`None`:
    /// driver's choice, short). Only an idle caller uses it; drivers without
    /// a way to sleep on their device just yield the CPU.
    fn wait(&mut self, timeout_ns: Option<u64>) {
        let _ = timeout_ns;
        std::thread::yield_now();
    }
}

/// A boxed NIC is a NIC, so programs can pick drivers at run time. The
/// extra indirection is per batch call, not per frame.
impl<T: Nic + ?Sized> Nic for Box<T> {
    fn mac(&self) -> [u8; 6] {
        (**self).mac()
    }
    fn mtu(&self) -> usize {
        (**self).mtu()
    }
    fn buffers(&self) -> &BufArea {
        (**self).buffers()
    }
    fn buffers_mut(&mut self) -> &mut BufArea {
        (**self).buffers_mut()
    }
    fn recv(&mut self, out: &mut [Desc]) -> usize {
        (**self).recv(out)
    }
    fn alloc(&mut self, out: &mut [u32]) -> usize {
        (**self).alloc(out)
    }
    fn send(&mut self, frames: &[Desc]) -> usize {
        (**self).send(frames)
    }
    fn release(&mut self, bufs: &[Desc]) {
        (**self).release(bufs)
    }
    fn flush(&mut self) {
        (**self).flush()
    }
    fn wait(&mut self, timeout_ns: Option<u64>) {
        (**self).wait(timeout_ns)
    }
}
