//! The host side shared by `exp fairness` and `exp syn-flood`: a stack and
//! the `sched` executor on one core, in the four receive modes.
//!
//! **Stand-in.** The host runtime (`lazynet::host`, branch `exp1`: the
//! receive loop as a `Fixed(0)` task, `Charge::Interrupted` in the eager
//! modes, per-owner protocol handlers) had not landed when these two
//! experiments were written, so this module mirrors its design in the
//! smallest form the two experiments need; it is meant to be replaced by
//! it. What it does:
//!
//! * The stack is owner `stack`, class `Fixed(0)`; its receive loop is one
//!   task that calls [`Stack::poll`] and then lets the experiment wake the
//!   owners whose sockets got input ([`HostState::after_poll`]). In `eager`
//!   and `early-demux` that task is spawned with [`Charge::Interrupted`]:
//!   the protocol work `poll` does there is charged to whichever owner ran
//!   last, as 4.4BSD charges interrupt and softnet time; in `soft-lrp` and
//!   `ni-lrp` it is charged to `stack` and does only demultiplexing.
//! * Interrupt priority is emulated at iteration boundaries ([`run`]):
//!   before every iteration of any task the receive loop is woken, so it
//!   runs first (delayed preemption: an iteration is never cut short).
//!   After a poll that received nothing it is not woken again until one
//!   other iteration ran or the executor found nothing to do — so an idle
//!   core is seen as idle (and interrupt time on an idle core is charged to
//!   `stack`, as [`Charge::Interrupted`] specifies).
//! * In the lazy modes the receive loop has a bounded budget
//!   (ARCHITECTURE.md, "Receive modes": soft-lrp demultiplexes "at top
//!   priority, bounded budget"): after [`LAZY_RX_POLLS`] polls in a row that
//!   received frames, one iteration of another runnable task comes first —
//!   the excess waits in, and beyond its capacity is dropped by, the NIC's
//!   ring, before any host work. The eager modes have no budget: 4.4BSD's
//!   interrupts always win, which is what livelocks them.
//! * `ni-lrp`: the NI engine runs on the load core; the experiments' load
//!   threads take an optional [`NiStep`] and call it every turn of their
//!   loop (standing for the adapter's processor).
//!
//! **May not touch:** the stack's internals (public API only).

use lazynet::nic::Nic;
use lazynet::sched::{Charge, Class, Cx, Executor, OwnerId, SchedConfig, Status, TaskId};
use lazynet::stack::{ReceiveMode, Stack};

/// One of the four receive modes of ARCHITECTURE.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// 4.4BSD.
    Eager,
    /// Early demultiplexing, eager protocol work.
    EarlyDemux,
    /// Lazy receiver processing, demultiplexing on the host.
    SoftLrp,
    /// Lazy receiver processing, demultiplexing on the NI core.
    NiLrp,
}

impl Mode {
    /// All four, in result order.
    pub const ALL: [Mode; 4] = [Mode::Eager, Mode::EarlyDemux, Mode::SoftLrp, Mode::NiLrp];

    /// The name used on command lines and in results.
    pub const fn name(self) -> &'static str {
        match self {
            Mode::Eager => "eager",
            Mode::EarlyDemux => "early-demux",
            Mode::SoftLrp => "soft-lrp",
            Mode::NiLrp => "ni-lrp",
        }
    }

    /// The stack's receive mode; `None` for `ni-lrp` until the `ni` branch
    /// is merged (its stack is built with `Stack::new_ni_lrp`).
    pub const fn receive_mode(self) -> ReceiveMode {
        match self {
            Mode::Eager => ReceiveMode::Eager,
            Mode::EarlyDemux => ReceiveMode::EarlyDemux,
            Mode::SoftLrp => ReceiveMode::SoftLrp,
            Mode::NiLrp => ReceiveMode::NiLrp,
        }
    }

    /// True for the lazy modes (LRP).
    pub const fn lazy(self) -> bool {
        matches!(self, Mode::SoftLrp | Mode::NiLrp)
    }

    /// Whom the receive loop's time is charged to.
    pub const fn rx_charge(self) -> Charge {
        if self.lazy() {
            Charge::Owner
        } else {
            Charge::Interrupted
        }
    }
}

/// Polls in a row (each up to the stack's `rx_batch` frames) the receive
/// loop may run in the lazy modes before another task gets an iteration.
pub const LAZY_RX_POLLS: u32 = 2;

/// One bounded step of the NI engine (`ni-lrp`), run by a load thread.
pub type NiStep = Box<dyn FnMut() -> usize + Send>;

/// What the receive-loop task needs from an experiment's host state.
pub trait HostState {
    /// The NIC of the host stack.
    type N: Nic;
    /// The host stack.
    fn stack(&mut self) -> &mut Stack<Self::N>;
    /// Called after every poll: wake the tasks of owners with input.
    fn after_poll(&mut self, cx: &mut Cx<'_>, now: u64);
    /// Where the receive loop records whether its last poll got frames.
    fn rx_flag(&mut self) -> &mut bool;
}

/// The executor of a host, with the stack's owner and its receive loop.
pub struct Host<S> {
    /// The executor (owners are added by the experiment).
    pub ex: Executor<S>,
    /// Owner `stack` (`Fixed(0)`).
    pub stack_owner: OwnerId,
    /// The receive-loop task.
    pub rx: TaskId,
    /// Budget of consecutive busy polls (`u32::MAX`: none, eager modes).
    rx_budget: u32,
}

impl<S: HostState + 'static> Host<S> {
    /// An executor on the TSC clock with owner `stack` and its receive-loop
    /// task, charged as `mode` says.
    pub fn new(mode: Mode) -> anyhow::Result<Self> {
        let mut ex: Executor<S> =
            Executor::new(lazynet::sched::TscClock::new(), SchedConfig::default());
        let stack_owner = ex.add_owner("stack", Class::Fixed(0))?;
        let rx = ex.spawn_with(
            stack_owner,
            mode.rx_charge(),
            |cx: &mut Cx<'_>, st: &mut S| {
                let now = cx.now_ns();
                let w = st.stack().poll(now);
                *st.rx_flag() = w.received > 0 || w.processed > 0;
                st.after_poll(cx, now);
                Status::Wait
            },
        )?;
        Ok(Host {
            ex,
            stack_owner,
            rx,
            rx_budget: if mode.lazy() { LAZY_RX_POLLS } else { u32::MAX },
        })
    }

    /// Runs the host until `done(state)` or `max_ns` of executor time; the
    /// receive loop is woken before every other iteration (module docs).
    /// Returns the executor time at the end.
    pub fn run(&mut self, st: &mut S, max_ns: u64, mut done: impl FnMut(&S) -> bool) -> u64 {
        let t0 = self.ex.now_ns();
        let mut wake_rx = true;
        let mut busy_polls = 0u32;
        let mut turn = 0u32;
        loop {
            turn = turn.wrapping_add(1);
            if turn % 64 == 0 {
                let now = self.ex.now_ns();
                if done(st) || now.saturating_sub(t0) >= max_ns {
                    return now;
                }
            }
            if wake_rx {
                self.ex.wake(self.rx);
            }
            match self.ex.run_once(st) {
                // A poll that found nothing: let others run (or the core
                // idle) before the next "interrupt" check. A busy one: again
                // at once, unless the budget is spent.
                Some(t) if t == self.rx => {
                    busy_polls = if *st.rx_flag() { busy_polls + 1 } else { 0 };
                    wake_rx = *st.rx_flag() && busy_polls < self.rx_budget;
                }
                _ => {
                    busy_polls = 0;
                    wake_rx = true;
                }
            }
        }
    }
}

/// Frames per [`send_frames`] call.
pub const SEND_BATCH: usize = 32;

/// Load side: writes up to `n` (at most [`SEND_BATCH`]) frames with `write`
/// (which fills a buffer and returns the frame length) into buffers of
/// `nic` and sends them; returns how many the NIC took. Unsent buffers go
/// back at once. No allocation: the batch lives on the stack.
pub fn send_frames<N: Nic>(
    nic: &mut N,
    n: usize,
    mut write: impl FnMut(&mut [u8]) -> usize,
) -> usize {
    use lazynet::mem::Desc;
    let n = n.min(SEND_BATCH);
    let mut bufs = [0u32; SEND_BATCH];
    let mut descs = [Desc::default(); SEND_BATCH];
    let got = nic.alloc(&mut bufs[..n]);
    let area = nic.buffers_mut();
    let mut ready = 0;
    for &b in &bufs[..got] {
        let len = area.buf_mut(b).map_or(0, &mut write);
        descs[ready] = Desc::new(b, len as u16);
        ready += 1;
    }
    let k = nic.send(&descs[..ready]);
    if k < ready {
        nic.release(&descs[k..ready]);
    }
    nic.flush();
    k
}

/// The non-zero drop counters of a stack on one line (`name=count ...`),
/// or `none`.
pub fn drops_line(st: &lazynet::stack::StackStats) -> String {
    let mut out = String::new();
    for r in lazynet::demux::DropReason::ALL {
        let v = st.demux.drops_for(r);
        if v != 0 {
            out.push_str(&format!("demux.{}={v} ", r.name()));
        }
    }
    for r in lazynet::stack::StackDrop::ALL {
        let v = st.drops_for(r);
        if v != 0 {
            out.push_str(&format!("stack.{}={v} ", r.name()));
        }
    }
    if out.is_empty() {
        out.push_str("none");
    }
    out.trim_end().to_string()
}

/// CPU time of the calling thread (ns), to tell whether a thread had its
/// core to itself: on a busy machine the comparisons of an experiment are
/// not judged (see [`QUIET`]).
pub fn thread_cpu_ns() -> u64 {
    // SAFETY: clock_gettime writes only the timespec we pass.
    unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}

/// A busy-polling thread that was on its CPU for at least this fraction of
/// its wall time had a quiet machine; below it, other programs took its
/// core and timing comparisons mean little.
pub const QUIET: f64 = 0.9;

/// Measures the fraction of wall time the calling thread spends on a CPU.
#[derive(Clone, Copy, Debug)]
pub struct OnCpu {
    wall: std::time::Instant,
    cpu: u64,
}

impl OnCpu {
    /// Starts measuring (call on the measured thread).
    pub fn start() -> Self {
        OnCpu {
            wall: std::time::Instant::now(),
            cpu: thread_cpu_ns(),
        }
    }

    /// On-CPU fraction since `start` (call on the same thread).
    pub fn fraction(&self) -> f64 {
        let wall = self.wall.elapsed().as_nanos().max(1) as f64;
        (thread_cpu_ns().saturating_sub(self.cpu)) as f64 / wall
    }
}
