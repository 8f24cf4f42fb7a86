//! A fault injector wrapping any [`Nic`]: seeded loss, duplication,
//! reordering, corruption and delay, configured per direction.
//!
//! **Owns:** its random generators (ChaCha8, seeded from a `u64`, one stream
//! per direction), three bounded queues per direction (ready, reorder hold,
//! delay line) and its counters. Buffers it holds still belong to the inner
//! NIC's area; frames it drops are released to the inner NIC.
//!
//! **May not touch:** anything but the bytes of frames it owns at the moment
//! (corruption flips one bit; duplication copies into a buffer allocated from
//! the inner NIC). It never parses a frame.
//!
//! **Gather frames** (`send_gather`) use the trait's default: each is
//! linearized (ext bytes copied after its header) and then faces every
//! transmit fault like any frame.
//!
//! **Crate choice:** `rand_chacha`'s `ChaCha8Rng` is portable and
//! reproducible across platforms and versions (the same seed gives the same
//! fault sequence everywhere), which `SmallRng` does not promise.
//!
//! **Time:** the injector has no clock. Either set virtual time with
//! [`FaultNic::set_now`] or pass a clock with [`FaultNic::with_clock`]; held
//! frames come out on `recv`/`send`/`flush` once due.
//!
//! **Cost:** no allocation after construction (queues and scratch space are
//! sized up front; excess is dropped and counted). Duplication copies one
//! frame — acceptable, this is a test tool.

use std::collections::VecDeque;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::Nic;
use crate::mem::{BufArea, Desc};

/// Faults for one direction. Probabilities are per frame, clamped to [0, 1]
/// (NaN counts as 0).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FaultSpec {
    /// Probability a frame is dropped.
    pub loss: f64,
    /// Probability a frame is sent twice (the copy follows the original).
    pub duplicate: f64,
    /// Probability a frame is held back and released after `reorder_gap`
    /// later frames (1 = swap with the next frame).
    pub reorder: f64,
    /// How many later frames overtake a reordered frame (0 is treated as 1).
    pub reorder_gap: u32,
    /// Probability one random bit of one random byte is flipped.
    pub corrupt: f64,
    /// Probability a frame is delayed by `delay_ns`.
    pub delay: f64,
    /// Delay in nanoseconds of the injector's clock.
    pub delay_ns: u64,
}

/// Configuration of a [`FaultNic`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaultConfig {
    /// Seed of the random generators.
    pub seed: u64,
    /// Faults on received frames.
    pub rx: FaultSpec,
    /// Faults on sent frames.
    pub tx: FaultSpec,
    /// Capacity of each queue (ready, held, delayed) per direction.
    pub queue_limit: usize,
    /// Frames fetched from the inner NIC per `recv` at most.
    pub batch: usize,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            seed: 0,
            rx: FaultSpec::default(),
            tx: FaultSpec::default(),
            queue_limit: 256,
            batch: 64,
        }
    }
}

/// Counters for one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaneStats {
    /// Frames that entered the injector.
    pub frames_in: u64,
    /// Frames that left it (delivered to the caller or the inner NIC).
    pub frames_out: u64,
    /// Dropped by the loss fault.
    pub lost: u64,
    /// Duplicates made.
    pub duplicated: u64,
    /// Duplicates skipped because the inner NIC had no free buffer.
    pub dup_no_buffer: u64,
    /// Frames held back for reordering.
    pub reordered: u64,
    /// Frames with a flipped bit.
    pub corrupted: u64,
    /// Frames put on the delay line.
    pub delayed: u64,
    /// Frames dropped because a queue was full.
    pub overflow: u64,
    /// Invalid descriptors passed through untouched.
    pub invalid: u64,
}

/// Counters of both directions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Received direction.
    pub rx: LaneStats,
    /// Sent direction.
    pub tx: LaneStats,
}

#[inline]
fn chance(rng: &mut ChaCha8Rng, p: f64) -> bool {
    if p.is_nan() || p <= 0.0 {
        return false;
    }
    if p >= 1.0 {
        return true;
    }
    ((rng.next_u64() >> 11) as f64) * (1.0 / (1u64 << 53) as f64) < p
}

/// One direction's generator, queues and counters.
struct Lane {
    spec: FaultSpec,
    rng: ChaCha8Rng,
    limit: usize,
    ready: VecDeque<Desc>,
    /// (release after this many emitted frames, frame)
    held: VecDeque<(u64, Desc)>,
    /// (due time, frame), in due order
    delayed: VecDeque<(u64, Desc)>,
    emitted: u64,
    stats: LaneStats,
}

impl Lane {
    fn new(spec: FaultSpec, seed: u64, limit: usize) -> Self {
        let limit = limit.max(1);
        Lane {
            spec,
            rng: ChaCha8Rng::seed_from_u64(seed),
            limit,
            ready: VecDeque::with_capacity(limit),
            held: VecDeque::with_capacity(limit),
            delayed: VecDeque::with_capacity(limit),
            emitted: 0,
            stats: LaneStats::default(),
        }
    }

    fn drop_frame<N: Nic>(&mut self, inner: &mut N, d: Desc) {
        self.stats.overflow += 1;
        inner.release(&[d]);
    }

    fn push_ready<N: Nic>(&mut self, inner: &mut N, d: Desc) {
        if self.ready.len() >= self.limit {
            self.drop_frame(inner, d);
        } else {
            self.ready.push_back(d);
        }
    }

    /// A frame goes out now; held frames whose gap has passed follow it.
    fn emit<N: Nic>(&mut self, inner: &mut N, d: Desc) {
        self.push_ready(inner, d);
        self.emitted += 1;
        while let Some(&(at, h)) = self.held.front() {
            if at > self.emitted {
                break;
            }
            self.held.pop_front();
            self.push_ready(inner, h);
        }
    }

    fn schedule<N: Nic>(&mut self, inner: &mut N, d: Desc, now: u64) {
        if self.spec.delay_ns > 0 && chance(&mut self.rng, self.spec.delay) {
            if self.delayed.len() >= self.limit {
                self.drop_frame(inner, d);
            } else {
                // Constant delay and a monotonic clock keep this in due order;
                // a clock going backwards only delays frames more.
                let due = now.saturating_add(self.spec.delay_ns);
                let due = self.delayed.back().map_or(due, |&(b, _)| due.max(b));
                self.delayed.push_back((due, d));
                self.stats.delayed += 1;
            }
            return;
        }
        if chance(&mut self.rng, self.spec.reorder) {
            if self.held.len() >= self.limit {
                self.drop_frame(inner, d);
            } else {
                let gap = u64::from(self.spec.reorder_gap.max(1));
                self.held.push_back((self.emitted + gap, d));
                self.stats.reordered += 1;
            }
            return;
        }
        self.emit(inner, d);
    }

    /// Applies this direction's faults to frame `d`, now owned by the lane.
    fn admit<N: Nic>(&mut self, inner: &mut N, scratch: &mut Vec<u8>, d: Desc, now: u64) {
        self.stats.frames_in += 1;
        if !inner.buffers().valid(d) {
            self.stats.invalid += 1;
            self.push_ready(inner, d);
            return;
        }
        if chance(&mut self.rng, self.spec.loss) {
            self.stats.lost += 1;
            inner.release(&[d]);
            return;
        }
        if d.len > 0 && chance(&mut self.rng, self.spec.corrupt) {
            let byte = (self.rng.next_u32() % u32::from(d.len)) as usize;
            let bit = self.rng.next_u32() % 8;
            if let Some(b) = inner
                .buffers_mut()
                .buf_mut(d.buf)
                .and_then(|b| b.get_mut(d.off as usize + byte))
            {
                *b ^= 1 << bit;
                self.stats.corrupted += 1;
            }
        }
        let mut dup = None;
        if chance(&mut self.rng, self.spec.duplicate) {
            dup = duplicate(inner, scratch, d);
            match dup {
                Some(_) => self.stats.duplicated += 1,
                None => self.stats.dup_no_buffer += 1,
            }
        }
        self.schedule(inner, d, now);
        if let Some(c) = dup {
            self.schedule(inner, c, now);
        }
    }

    fn release_due<N: Nic>(&mut self, inner: &mut N, now: u64) {
        while let Some(&(due, d)) = self.delayed.front() {
            if due > now {
                break;
            }
            self.delayed.pop_front();
            self.emit(inner, d);
        }
    }

    /// Moves every held and delayed frame to the ready queue.
    fn release_all<N: Nic>(&mut self, inner: &mut N) {
        while let Some((_, d)) = self.delayed.pop_front() {
            self.push_ready(inner, d);
        }
        while let Some((_, d)) = self.held.pop_front() {
            self.push_ready(inner, d);
        }
    }

    fn queued(&self) -> usize {
        self.ready.len() + self.held.len() + self.delayed.len()
    }

    fn release_everything<N: Nic>(&mut self, inner: &mut N) {
        for d in self
            .ready
            .drain(..)
            .chain(self.held.drain(..).map(|x| x.1))
            .chain(self.delayed.drain(..).map(|x| x.1))
        {
            inner.release(&[d]);
        }
    }
}

/// Copies frame `d` into a fresh buffer of the inner NIC (same offset).
fn duplicate<N: Nic>(inner: &mut N, scratch: &mut Vec<u8>, d: Desc) -> Option<Desc> {
    let mut b = [0u32; 1];
    if inner.alloc(&mut b) != 1 {
        return None;
    }
    scratch.clear();
    scratch.extend_from_slice(inner.buffers().frame(d)?);
    let start = d.off as usize;
    let end = start + scratch.len();
    match inner
        .buffers_mut()
        .buf_mut(b[0])
        .and_then(|x| x.get_mut(start..end))
    {
        Some(dst) => {
            dst.copy_from_slice(scratch);
            Some(Desc {
                buf: b[0],
                off: d.off,
                len: d.len,
            })
        }
        None => {
            inner.release(&[Desc::new(b[0], 0)]);
            None
        }
    }
}

/// Applies seeded faults to frames passing through `inner`.
pub struct FaultNic<N: Nic> {
    inner: N,
    rx: Lane,
    tx: Lane,
    now: u64,
    clock: Option<Box<dyn Fn() -> u64 + Send>>,
    fetch: Vec<Desc>,
    scratch: Vec<u8>,
}

impl<N: Nic> FaultNic<N> {
    /// An injector using virtual time set by [`FaultNic::set_now`] (starts
    /// at 0).
    pub fn new(inner: N, cfg: FaultConfig) -> Self {
        let buf = inner.buffers().buf_size();
        FaultNic {
            rx: Lane::new(cfg.rx, cfg.seed, cfg.queue_limit),
            tx: Lane::new(cfg.tx, cfg.seed ^ 0x9e37_79b9_7f4a_7c15, cfg.queue_limit),
            inner,
            now: 0,
            clock: None,
            fetch: vec![Desc::default(); cfg.batch.max(1)],
            scratch: Vec::with_capacity(buf),
        }
    }

    /// An injector reading time (nanoseconds) from `clock`.
    pub fn with_clock(inner: N, cfg: FaultConfig, clock: Box<dyn Fn() -> u64 + Send>) -> Self {
        let mut f = Self::new(inner, cfg);
        f.clock = Some(clock);
        f
    }

    /// Sets virtual time (ignored when a clock was given).
    pub fn set_now(&mut self, ns: u64) {
        self.now = ns;
    }

    fn now(&self) -> u64 {
        match &self.clock {
            Some(c) => c(),
            None => self.now,
        }
    }

    /// Counters.
    pub fn stats(&self) -> FaultStats {
        FaultStats {
            rx: self.rx.stats,
            tx: self.tx.stats,
        }
    }

    /// Frames currently inside the injector (rx, tx).
    pub fn queued(&self) -> (usize, usize) {
        (self.rx.queued(), self.tx.queued())
    }

    /// The earliest due time of a delayed frame in either direction (for a
    /// virtual-time driver that jumps its clock to the next event).
    pub fn next_due(&self) -> Option<u64> {
        let rx = self.rx.delayed.front().map(|x| x.0);
        let tx = self.tx.delayed.front().map(|x| x.0);
        match (rx, tx) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Releases every held and delayed frame now, in both directions (e.g.
    /// at the end of a test, when no later frame will overtake them).
    pub fn release_all(&mut self) {
        self.rx.release_all(&mut self.inner);
        self.tx.release_all(&mut self.inner);
        self.push_tx();
    }

    /// The wrapped NIC.
    pub fn inner(&self) -> &N {
        &self.inner
    }

    /// The wrapped NIC, mutably.
    pub fn inner_mut(&mut self) -> &mut N {
        &mut self.inner
    }

    fn push_tx(&mut self) {
        if self.tx.ready.is_empty() {
            return;
        }
        let n = self.inner.send(self.tx.ready.make_contiguous());
        let n = n.min(self.tx.ready.len());
        self.tx.ready.drain(..n);
        self.tx.stats.frames_out += n as u64;
    }
}

impl<N: Nic> Nic for FaultNic<N> {
    fn mac(&self) -> [u8; 6] {
        self.inner.mac()
    }

    fn mtu(&self) -> usize {
        self.inner.mtu()
    }

    fn buffers(&self) -> &BufArea {
        self.inner.buffers()
    }

    fn buffers_mut(&mut self) -> &mut BufArea {
        self.inner.buffers_mut()
    }

    fn recv(&mut self, out: &mut [Desc]) -> usize {
        let now = self.now();
        self.rx.release_due(&mut self.inner, now);
        let room = out.len().saturating_sub(self.rx.ready.len());
        let want = room.min(self.fetch.len());
        if want > 0 {
            let got = self.inner.recv(&mut self.fetch[..want]).min(want);
            for i in 0..got {
                let d = self.fetch[i];
                self.rx.admit(&mut self.inner, &mut self.scratch, d, now);
            }
        }
        let mut n = 0;
        while n < out.len() {
            let Some(d) = self.rx.ready.pop_front() else {
                break;
            };
            out[n] = d;
            n += 1;
        }
        self.rx.stats.frames_out += n as u64;
        n
    }

    fn alloc(&mut self, out: &mut [u32]) -> usize {
        self.inner.alloc(out)
    }

    fn send(&mut self, frames: &[Desc]) -> usize {
        let now = self.now();
        self.tx.release_due(&mut self.inner, now);
        let mut accepted = 0;
        for &d in frames {
            if self.tx.ready.len() >= self.tx.limit {
                self.push_tx();
                if self.tx.ready.len() >= self.tx.limit {
                    break;
                }
            }
            self.tx.admit(&mut self.inner, &mut self.scratch, d, now);
            accepted += 1;
        }
        self.push_tx();
        accepted
    }

    fn release(&mut self, bufs: &[Desc]) {
        self.inner.release(bufs)
    }

    fn ext_capacity(&self) -> usize {
        self.inner.ext_capacity()
    }

    fn cross_core_buffers(&self) -> bool {
        self.inner.cross_core_buffers()
    }

    fn driver_stats(&self) -> Option<String> {
        self.inner.driver_stats()
    }

    fn ext_area_mut(&mut self) -> Option<&mut [u8]> {
        self.inner.ext_area_mut()
    }

    fn ext_bytes(&self) -> Option<&[u8]> {
        self.inner.ext_bytes()
    }

    // `send_gather`: the trait's default. It linearizes each gather frame
    // (copies the ext bytes, read through `ext_bytes` from the inner NIC,
    // after the header) and calls our `send`, so every fault applies to
    // gather frames as to any frame. Zero-copy is lost under fault
    // injection; this is a test tool.

    fn flush(&mut self) {
        let now = self.now();
        self.rx.release_due(&mut self.inner, now);
        self.tx.release_due(&mut self.inner, now);
        self.push_tx();
        self.inner.flush();
    }

    fn doorbell(&self) -> Option<crate::mem::Doorbell> {
        self.inner.doorbell()
    }

    fn remote_waker(&self) -> Option<std::sync::Arc<crate::sys::EventFd>> {
        self.inner.remote_waker()
    }

    fn wait(&mut self, timeout_ns: Option<u64>) {
        // Held frames become due with time, not with device readiness:
        // never sleep on the device for long.
        self.inner
            .wait(Some(timeout_ns.unwrap_or(1_000_000).min(1_000_000)))
    }
}

impl<N: Nic> Drop for FaultNic<N> {
    fn drop(&mut self) {
        self.rx.release_everything(&mut self.inner);
        self.tx.release_everything(&mut self.inner);
    }
}
