//! A doorbell: lets the consumer of a ring sleep until its producer
//! publishes, across threads or processes, with no system call on the
//! producer's side unless the consumer really sleeps.
//!
//! **Owns:** three words in one cache line of a [`Region`] — a wake
//! sequence number (the futex word), a "sleeping" flag and an "armed" flag
//! — and the orderings of the protocol below.
//!
//! **May not touch:** the ring it guards (the caller passes its emptiness
//! check in) or anything else in the region.
//!
//! # Protocol
//!
//! * The consumer **arms** the bell once, before it first sleeps: from then
//!   on producers look at the sleeping flag. An unarmed bell costs a
//!   producer one load of a line nobody writes, so busy-polling pairs (the
//!   benchmarks) pay nothing else.
//! * To **sleep**, the consumer reads the sequence number, sets `sleeping`,
//!   issues a `SeqCst` fence, checks the ring again and, only if it is still
//!   empty, waits on the futex for the sequence number to change.
//! * A producer, after publishing, **rings**: if armed, a `SeqCst` fence,
//!   then if `sleeping` is set it bumps the sequence number and wakes.
//!
//! Why no wake-up is lost: the two fences order the consumer's "sleeping =
//! 1; load ring" against the producer's "store ring; load sleeping" (the
//! Dekker pattern): at least one side sees the other's store. If the
//! consumer sees the frame it does not sleep; if the producer sees
//! `sleeping` it bumps the sequence number, and the futex call, which
//! compares that number atomically with going to sleep, returns at once or
//! is woken. The one exception is a producer that read "not armed" while
//! the consumer was arming: its frame can wait for the consumer's timeout,
//! once, at start-up. Sleepers always pass a timeout (the host's next
//! timer), so even a hostile peer that never rings only delays, never
//! strands, the consumer.

#[cfg(loom)]
use loom::sync::atomic::{fence, AtomicU32};
use std::io;
use std::sync::atomic::Ordering;
#[cfg(not(loom))]
use std::sync::atomic::{fence, AtomicU32};
use std::sync::Arc;

use super::Region;

/// Bytes a doorbell takes in a region (one cache line); its offset must be
/// a multiple of this.
pub const DOORBELL_BYTES: usize = 64;

/// Values of the sleeping word: a consumer asleep on the futex, or in
/// `poll`/`epoll` on an eventfd the producer's handle signals
/// ([`Doorbell::with_eventfd`]).
const SLEEP_FUTEX: u32 = 1;
const SLEEP_FD: u32 = 2;

#[repr(C, align(64))]
struct Words {
    seq: AtomicU32,
    sleeping: AtomicU32,
    armed: AtomicU32,
}

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Words>() == DOORBELL_BYTES);

/// A handle on one doorbell in a region; cheap to clone, `Send + Sync`.
#[derive(Clone)]
pub struct Doorbell {
    at: At,
    /// Wakes through this eventfd instead of the futex: for a consumer
    /// that sleeps in `epoll` on many bells and devices (the daemon).
    waker: Option<Arc<crate::sys::EventFd>>,
}

/// Where the words are.
#[derive(Clone)]
enum At {
    /// In a shared region, at this offset.
    Region(Arc<Region>, usize),
    /// Under loom: on the heap, with a mutex and condition variable in the
    /// futex's place (the futex's compare-and-sleep is atomic with respect
    /// to a wake, as the mutex makes it here).
    #[cfg(loom)]
    Model(loom::sync::Arc<Model>),
}

#[cfg(loom)]
struct Model {
    words: Words,
    lock: loom::sync::Mutex<()>,
    cv: loom::sync::Condvar,
}

impl std::fmt::Debug for Doorbell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let w = self.words();
        f.debug_struct("Doorbell")
            .field("seq", &w.seq.load(Ordering::Relaxed))
            .field("sleeping", &w.sleeping.load(Ordering::Relaxed))
            .field("armed", &w.armed.load(Ordering::Relaxed))
            .finish()
    }
}

impl Doorbell {
    /// The doorbell at byte `off` of `region`: `off` must be a multiple of
    /// [`DOORBELL_BYTES`] and the line inside the region. Its words start
    /// as the region holds them (zero in a new region: unarmed).
    pub fn attach(region: Arc<Region>, off: usize) -> io::Result<Doorbell> {
        let end = off.checked_add(DOORBELL_BYTES);
        if off % DOORBELL_BYTES != 0 || end.is_none_or(|e| e > region.len()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "doorbell outside its region or misaligned",
            ));
        }
        Ok(Doorbell {
            at: At::Region(region, off),
            waker: None,
        })
    }

    /// Under loom: a bell on the heap, for the model of its protocol
    /// (`tests/loom/doorbell.rs`); the same code as in a region.
    #[cfg(loom)]
    pub fn model() -> Doorbell {
        Doorbell {
            at: At::Model(loom::sync::Arc::new(Model {
                words: Words {
                    seq: AtomicU32::new(0),
                    sleeping: AtomicU32::new(0),
                    armed: AtomicU32::new(0),
                },
                lock: loom::sync::Mutex::new(()),
                cv: loom::sync::Condvar::new(),
            })),
            waker: None,
        }
    }

    /// Waits while the sequence number is `seq` (the futex call).
    fn wait_seq(&self, w: &Words, seq: u32, timeout_ns: Option<u64>) -> bool {
        match &self.at {
            #[cfg(not(loom))]
            At::Region(..) => crate::sys::futex_wait(&w.seq, seq, timeout_ns),
            #[cfg(loom)]
            At::Region(..) => unreachable!("regions are not modelled"),
            #[cfg(loom)]
            At::Model(m) => {
                // No time under loom: a lost wake-up is a deadlock it reports.
                let _ = timeout_ns;
                let g = m.lock.lock().unwrap();
                if w.seq.load(Ordering::Relaxed) != seq {
                    return false;
                }
                drop(m.cv.wait(g).unwrap());
                true
            }
        }
    }

    /// Wakes every waiter of [`Doorbell::wait_seq`] (the futex wake).
    fn wake_all(&self, w: &Words) {
        match &self.at {
            #[cfg(not(loom))]
            At::Region(..) => {
                crate::sys::futex_wake(&w.seq, i32::MAX);
            }
            #[cfg(loom)]
            At::Region(..) => unreachable!("regions are not modelled"),
            #[cfg(loom)]
            At::Model(m) => {
                let _ = w;
                let _g = m.lock.lock().unwrap();
                m.cv.notify_all();
            }
        }
    }

    /// This bell, waking a consumer that sleeps in `poll`/`epoll`
    /// ([`Doorbell::begin_sleep`]) through `waker`, the eventfd it polls; a
    /// consumer asleep on the futex ([`Doorbell::sleep`]) is still woken
    /// there. For the producer's handle.
    pub fn with_eventfd(mut self, waker: Arc<crate::sys::EventFd>) -> Doorbell {
        self.waker = Some(waker);
        self
    }

    /// Consumer sleeping on several bells at once (in `epoll`, woken
    /// through eventfds): announces the sleep on this one. Then, once for
    /// all of them, a `SeqCst` fence, the emptiness checks, the wait, and
    /// [`Doorbell::end_sleep`] on each. The same Dekker argument as
    /// [`Doorbell::sleep`], with the eventfd's counter in the futex's
    /// place: a producer that saw `sleeping` made the eventfd readable.
    pub fn begin_sleep(&self) {
        let w = self.words();
        w.armed.store(1, Ordering::Relaxed);
        w.sleeping.store(SLEEP_FD, Ordering::Relaxed);
    }

    /// Ends a sleep begun with [`Doorbell::begin_sleep`].
    pub fn end_sleep(&self) {
        self.words().sleeping.store(0, Ordering::Relaxed);
    }

    fn words(&self) -> &Words {
        let (region, off) = match &self.at {
            At::Region(r, o) => (r, *o),
            #[cfg(loom)]
            At::Model(m) => return &m.words,
        };
        #[cfg(loom)]
        {
            let _ = (region, off);
            unreachable!("regions are not modelled");
        }
        #[cfg(not(loom))]
        // SAFETY: `attach` checked that [off, off + 64) lies inside the
        // mapping, which lives as long as `self.region`, and that `off` is a
        // multiple of 64; the mapping is page-aligned, so the pointer is
        // aligned for `Words`. `Words` is three atomics, valid for any bytes,
        // and only ever accessed atomically (here and by the peer), so a
        // shared reference is sound even while another process writes them.
        unsafe {
            &*region.as_ptr().add(off).cast::<Words>()
        }
    }

    /// Consumer: from now on producers check whether it sleeps.
    pub fn arm(&self) {
        self.words().armed.store(1, Ordering::SeqCst);
    }

    /// Whether a consumer armed the bell.
    pub fn armed(&self) -> bool {
        self.words().armed.load(Ordering::Relaxed) != 0
    }

    /// Producer, after publishing: wakes the consumer if it sleeps. Costs
    /// one load while unarmed; a fence and a load while armed; a system
    /// call only when the consumer sleeps. Returns true if it woke it.
    #[inline]
    pub fn ring(&self) -> bool {
        let w = self.words();
        if w.armed.load(Ordering::Relaxed) == 0 {
            return false;
        }
        self.wake_if_sleeping(w)
    }

    /// Wakes the consumer if it sleeps, armed or not (a wake from another
    /// thread that has no ring of its own to publish on).
    pub fn wake(&self) -> bool {
        self.wake_if_sleeping(self.words())
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn wake_if_sleeping(&self, w: &Words) -> bool {
        fence(Ordering::SeqCst);
        let how = w.sleeping.load(Ordering::Relaxed);
        if how == 0 {
            return false;
        }
        w.seq.fetch_add(1, Ordering::Release);
        match &self.waker {
            Some(e) if how == SLEEP_FD => e.signal(),
            _ => self.wake_all(w),
        }
        true
    }

    /// Consumer: sleeps until a producer rings or `timeout_ns` passes,
    /// unless `idle()` — the ring's emptiness, checked after announcing
    /// the sleep — says there is work. Returns true if it slept.
    pub fn sleep(&self, timeout_ns: Option<u64>, idle: impl FnOnce() -> bool) -> bool {
        let w = self.words();
        let seq = w.seq.load(Ordering::Acquire);
        w.sleeping.store(SLEEP_FUTEX, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let slept = idle() && self.wait_seq(w, seq, timeout_ns);
        w.sleeping.store(0, Ordering::Relaxed);
        slept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn bell() -> Doorbell {
        let region = Region::create("doorbell-test", 4096).unwrap();
        Doorbell::attach(region, 64).unwrap()
    }

    #[test]
    fn attach_checks_bounds_and_alignment() {
        let region = Region::create("doorbell-test", 4096).unwrap();
        assert!(Doorbell::attach(region.clone(), 32).is_err());
        assert!(Doorbell::attach(region.clone(), 4096).is_err());
        assert!(Doorbell::attach(region.clone(), usize::MAX - 63).is_err());
        assert!(Doorbell::attach(region, 4032).is_ok());
    }

    #[test]
    fn sleep_times_out_without_a_ring_and_skips_when_not_idle() {
        let b = bell();
        b.arm();
        let t = Instant::now();
        assert!(b.sleep(Some(20_000_000), || true));
        assert!(t.elapsed() >= Duration::from_millis(15));
        let t = Instant::now();
        assert!(!b.sleep(Some(5_000_000_000), || false));
        assert!(t.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn an_unarmed_bell_costs_the_producer_nothing() {
        let b = bell();
        assert!(!b.ring());
        assert!(!b.armed());
    }

    #[test]
    fn a_ring_wakes_a_sleeper_on_another_thread() {
        let b = bell();
        b.arm();
        let flag = Arc::new(AtomicU32::new(0));
        let (b2, f2) = (b.clone(), flag.clone());
        let sleeper = std::thread::spawn(move || {
            let t = Instant::now();
            // A 10 s timeout: only the ring can end it early.
            while f2.load(Ordering::Acquire) == 0 {
                b2.sleep(Some(10_000_000_000), || f2.load(Ordering::Acquire) == 0);
            }
            t.elapsed()
        });
        std::thread::sleep(Duration::from_millis(50));
        flag.store(1, Ordering::Release);
        b.ring();
        let waited = sleeper.join().unwrap();
        assert!(waited < Duration::from_secs(5), "{waited:?}");
    }
}
