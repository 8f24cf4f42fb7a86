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
//!
//! Gather transmission (network level framing): a NIC may have an *ext
//! area*, read-only bytes registered once (a prebuilt media stream). A
//! [`Nic::send_gather`] frame is a header in a buffer the caller owns (named
//! by a [`Desc`]) followed by a slice of the ext area (an [`ExtRef`]). Where
//! the driver can reference the slice (the in-memory wire: no copy on send;
//! TAP: `writev`, one copy by the kernel) the payload is never copied into a
//! buffer; otherwise the default implementation copies it after the header
//! (see [`linearize`]). Ext bytes are owned by nobody and must stay unchanged
//! while frames referencing them may be in flight.

pub mod bpf;
pub mod fault;
mod free;
pub mod netns;
pub mod pcap;
pub mod tap;
pub mod tso;
pub mod wirepair;
pub mod xdp;

use crate::mem::{BufArea, Desc};

/// A slice of a NIC's ext area (see [`Nic::ext_bytes`]): `len` bytes at
/// byte offset `off`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ExtRef {
    /// Byte offset inside the ext area.
    pub off: u64,
    /// Length in bytes.
    pub len: u16,
}

impl ExtRef {
    /// The bytes `self` names inside `ext`, or `None` if out of range.
    #[inline]
    pub fn slice(self, ext: &[u8]) -> Option<&[u8]> {
        let start = usize::try_from(self.off).ok()?;
        ext.get(start..start.checked_add(self.len as usize)?)
    }
}

/// Copies the ext bytes of a gather frame right after its header, inside the
/// header's buffer, and returns the descriptor of the whole frame. `None`
/// (nothing written) if the header descriptor is out of range, `ext` is
/// `None` or does not hold the slice, or the frame would not fit in the
/// buffer. The fallback used by drivers that cannot transmit by reference;
/// it costs one copy of the payload.
pub fn linearize(area: &mut BufArea, ext: Option<&[u8]>, frame: (Desc, ExtRef)) -> Option<Desc> {
    let (h, e) = frame;
    let src = e.slice(ext?)?;
    if !area.valid(h) {
        return None;
    }
    let start = h.off as usize + h.len as usize;
    let end = start + src.len();
    let len = u16::try_from(h.len as usize + src.len()).ok()?;
    let buf = area.buf_mut(h.buf)?;
    buf.get_mut(start..end)?.copy_from_slice(src);
    Some(Desc { len, ..h })
}

/// See [`Nic::rx_probe`]: true while received frames wait.
pub type RxProbe = Box<dyn Fn() -> bool + Send>;

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

    /// True if [`Nic::recv`] may return a frame now: the cheap "is an
    /// interrupt pending" check a host runs before every scheduling decision
    /// (`host`). It must not consume anything. A false `true` only costs one
    /// empty `recv`, so the default — for drivers that cannot tell without
    /// receiving — is `true`; a false `false` would delay frames.
    fn rx_ready(&mut self) -> bool {
        true
    }

    /// Waits until a frame may be ready or `timeout_ns` passes (`None`:
    /// driver's choice, short). Only an idle caller uses it; drivers without
    /// a way to sleep on their device just yield the CPU.
    fn wait(&mut self, timeout_ns: Option<u64>) {
        let _ = timeout_ns;
        std::thread::yield_now();
    }

    /// True if the frames this NIC receives were written into its buffers
    /// by another core that writes the same buffers again once they are
    /// given back (the in-memory wire, the offload NI); false where the
    /// kernel or a device fills them (TAP). Only then can evicting a
    /// consumed frame's lines help (`stack::evict`).
    fn cross_core_buffers(&self) -> bool {
        false
    }

    /// The driver's own counters, one line for people (a program's exit
    /// report); `None` if it keeps none beyond the stack's.
    fn driver_stats(&self) -> Option<String> {
        None
    }

    /// The doorbell [`Nic::wait`] sleeps on, if it sleeps on one that
    /// another thread can ring ([`crate::mem::Doorbell::wake`]) to end the
    /// wait early: how a remote wake reaches a sleeping host.
    fn doorbell(&self) -> Option<crate::mem::Doorbell> {
        None
    }

    /// A check, callable without the NIC (from an executor's iteration
    /// boundary, while a task holds the stack), that frames wait on the
    /// receive ring: one load of shared memory, no system call. `None`
    /// where the driver cannot tell that way (TAP must ask the kernel; a
    /// fault injector holds frames of its own); its host then looks at the
    /// NIC only between runs.
    fn rx_probe(&self) -> Option<RxProbe> {
        None
    }

    /// A descriptor for a caller that sleeps in a `poll`/`epoll` of its
    /// own (an async reactor, an `epoll` beside other descriptors): it
    /// becomes readable when frames may have arrived, between
    /// [`Nic::wait_begin`] and [`Nic::wait_end`]. `None` where the driver
    /// can sleep only in [`Nic::wait`].
    fn wait_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }

    /// Announces that the caller is about to sleep on [`Nic::wait_fd`];
    /// false (do not sleep) if frames already wait. The caller then checks
    /// its own work once more, sleeps, and calls [`Nic::wait_end`].
    fn wait_begin(&mut self) -> bool {
        true
    }

    /// Ends a sleep begun with [`Nic::wait_begin`] (and drains what made
    /// the descriptor readable).
    fn wait_end(&mut self) {}

    /// How long a caller that sleeps on [`Nic::wait_fd`] should keep
    /// polling first, as [`Nic::wait`] itself does: where the wake-up costs
    /// more than a peer's answer takes (the in-memory wire's doorbell),
    /// spinning for that cost first is the 2-competitive choice. 0 where
    /// `wait` sleeps at once.
    fn idle_spin_ns(&self) -> u64 {
        0
    }

    /// For drivers that sleep in `poll(2)` on a device rather than on a
    /// doorbell: an eventfd that [`Nic::wait`] polls beside the device, so
    /// that another thread can end the wait ([`crate::sys::EventFd::signal`]).
    fn remote_waker(&self) -> Option<std::sync::Arc<crate::sys::EventFd>> {
        None
    }

    /// Bytes of the ext area this NIC can transmit from (0: none). An
    /// [`ExtRef`] given to [`Nic::send_gather`] must lie inside it.
    fn ext_capacity(&self) -> usize {
        0
    }

    /// The ext area for writing. Setup only: the owner writes the prebuilt
    /// payload once, before sending any frame that references it (frames in
    /// flight, and a peer process, read it without synchronization). `None`
    /// if the NIC has no ext area or this end may not write it.
    fn ext_area_mut(&mut self) -> Option<&mut [u8]> {
        None
    }

    /// The ext area for reading (recorders, fallbacks, tests). `None` if the
    /// NIC has none. It never overlaps the NIC's buffers.
    fn ext_bytes(&self) -> Option<&[u8]> {
        None
    }

    /// Transmits gather frames in order: each is the header bytes `Desc`
    /// names (a buffer the caller owns; ownership passes as with `send`)
    /// followed by the ext bytes `ExtRef` names. Returns how many (a prefix)
    /// were accepted; the rest, including the first frame that could not be
    /// sent (ring full, ext slice out of range, frame larger than a buffer),
    /// still belong to the caller.
    ///
    /// Default: copies the ext bytes (from [`Nic::ext_bytes`]) after the
    /// header inside the header's buffer ([`linearize`]) and calls `send`.
    /// Bytes after the header in the caller's buffer are overwritten even for
    /// frames not accepted.
    fn send_gather(&mut self, frames: &[(Desc, ExtRef)]) -> usize {
        let mut area = self.buffers().clone();
        let mut batch = [Desc::default(); 32];
        let mut done = 0;
        while done < frames.len() {
            let mut n = 0;
            let mut stop = false;
            {
                let ext = self.ext_bytes();
                for &f in &frames[done..] {
                    if n == batch.len() {
                        break;
                    }
                    match linearize(&mut area, ext, f) {
                        Some(d) => {
                            batch[n] = d;
                            n += 1;
                        }
                        None => {
                            stop = true;
                            break;
                        }
                    }
                }
            }
            let k = if n > 0 { self.send(&batch[..n]) } else { 0 };
            done += k;
            if stop || k < n || n == 0 {
                break;
            }
        }
        done
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
    fn rx_ready(&mut self) -> bool {
        (**self).rx_ready()
    }
    fn wait(&mut self, timeout_ns: Option<u64>) {
        (**self).wait(timeout_ns)
    }
    fn ext_capacity(&self) -> usize {
        (**self).ext_capacity()
    }
    fn cross_core_buffers(&self) -> bool {
        (**self).cross_core_buffers()
    }
    fn driver_stats(&self) -> Option<String> {
        (**self).driver_stats()
    }
    fn doorbell(&self) -> Option<crate::mem::Doorbell> {
        (**self).doorbell()
    }
    fn rx_probe(&self) -> Option<RxProbe> {
        (**self).rx_probe()
    }
    fn wait_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        (**self).wait_fd()
    }
    fn wait_begin(&mut self) -> bool {
        (**self).wait_begin()
    }
    fn wait_end(&mut self) {
        (**self).wait_end()
    }
    fn idle_spin_ns(&self) -> u64 {
        (**self).idle_spin_ns()
    }
    fn remote_waker(&self) -> Option<std::sync::Arc<crate::sys::EventFd>> {
        (**self).remote_waker()
    }
    fn ext_area_mut(&mut self) -> Option<&mut [u8]> {
        (**self).ext_area_mut()
    }
    fn ext_bytes(&self) -> Option<&[u8]> {
        (**self).ext_bytes()
    }
    fn send_gather(&mut self, frames: &[(Desc, ExtRef)]) -> usize {
        (**self).send_gather(frames)
    }
}
