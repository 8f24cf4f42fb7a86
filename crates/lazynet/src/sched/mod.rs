//! The per-core executor: tasks that belong to owners, scheduled by class —
//! the real-time upcall (RTU) classes, reactive and periodic with
//! rate-monotonic priority and admission control, then best-effort by
//! recent CPU usage — with delayed preemption at iteration boundaries and
//! every nanosecond charged to an owner (docs/DESIGN.md, "Scheduling").
//!
//! **Owns:** the task table (boxed [`Task`]s, set up before running), the
//! owners with their [`Class`] and [`OwnerUsage`], one FIFO run queue per
//! owner (an intrusive list through the task table: no allocation when a task
//! is woken or requeued), the decayed-usage state, the periodic releases and
//! reactive token buckets, the admission test ([`admission`]), and the
//! [`Clock`] that measures CPU time.
//!
//! **May not touch:** anything about networking — packets, sockets, channels,
//! protocol state. Those live in the state `S` that the executor lends, by
//! `&mut`, to each iteration; the executor never looks inside it. It reads no
//! clock but its own and does no I/O; it never blocks: when nothing is
//! runnable the run loops return and the caller decides whether to poll a NIC
//! or sleep.
//!
//! # The model
//!
//! * An **owner** ([`OwnerId`]) is what CPU time is charged to: an
//!   application, the stack itself, a server process in an experiment.
//!   Owners are few (tens); picking the next owner scans them, O(owners).
//! * A **task** ([`TaskId`]) belongs to one owner and is a handler that does
//!   one bounded *iteration* per [`Task::run`] call and answers
//!   [`Status::Ready`] (more work: requeue me), [`Status::Wait`] (sleep until
//!   someone calls `wake`) or [`Status::Done`]. Tasks are many (one per
//!   connection is fine); a task is on its owner's run queue at most once.
//! * The executor is **cooperative** and single-threaded; preemption is
//!   delayed to the end of the current iteration (RTU's RMDP). A handler
//!   that does several units of work in one run marks each with
//!   [`Cx::iteration_done`], which answers whether to go on; a run that
//!   marks none is one iteration.
//!
//! # Scheduling
//!
//! The runnable owner with the smallest key runs next, one run of the
//! task at the head of its queue:
//!
//! 1. [`Class::Fixed`]`(p)` owners, lower `p` first (strict priority): the
//!    system's own work;
//! 2. [`Class::Reactive`] owners while their token bucket holds tokens
//!    (RTU's reactive upcalls, period 0: above every periodic one);
//! 3. [`Class::Periodic`] owners with batch left in their period, shorter
//!    period first (rate-monotonic);
//! 4. [`Class::BestEffort`] owners — and reactive owners whose bucket is
//!    empty — least *recent usage* first;
//! 5. [`Class::Idle`] owners, only when nothing else is runnable
//!    (soft-LRP's "an otherwise idle core processes queued packets", §3.3).
//!
//! Ties go to the owner picked longest ago (round robin). A wake or a
//! release of a more urgent (levels 1–3) owner raises the yield flag that
//! [`Cx::iteration_done`] and [`Cx::should_yield`] read.
//!
//! # Real-time classes
//!
//! A periodic owner `(T, B, c)` is released every `T` by the executor's
//! own timer (checked at every scheduling decision and iteration boundary;
//! [`Executor::next_release_ns`] tells a sleeping host when to wake): its
//! batch is refilled to `B` and its waiting tasks are woken (the handler
//! is upcalled every period). Each iteration spends one unit of the
//! batch; with none left the owner waits for its next release, so the
//! class is not work-conserving and the rest of the core goes to others.
//! A batch unfinished at the next release is a deadline miss; the time
//! from a release (or the first wake after it) to the batch's end is its
//! response, whose maximum is kept. An iteration longer than `c` is an
//! overrun (counted); a period in which the owner used more than `B·c`, or
//! one iteration more than `2c` (plus the configured release jitter),
//! overran, and [`SchedConfig::demote_after`] such periods in a row demote
//! the owner to best-effort with a log line (RTU's first security issue: an
//! admitted set must stay schedulable). A demoted owner keeps its period as
//! a timer: its tasks are still woken every period, at best-effort
//! priority, while it has any. A reactive owner spends its bucket's tokens
//! with its iterations' time and refills at its share.
//! [`Executor::add_owner`] admits a real-time owner only if the
//! [`admission`] test passes for the set with it.
//!
//! **Recent usage** is 4.4BSD's `p_estcpu` (McKusick, Bostic, Karels and
//! Quarterman, *The Design and Implementation of the 4.4BSD Operating
//! System*, §4.4 "Process Scheduling"; `schedcpu()` in `kern/kern_synch.c`):
//! every nanosecond charged to an owner is added to it, and once per
//! [`SchedConfig::decay_period_ns`] (1 s, as `schedcpu`) every owner's usage
//! is multiplied by `2·load / (2·load + 1)`, where `load` is the number of
//! runnable best-effort owners (BSD uses the load average; an instantaneous
//! count keeps the executor free of a second filter). With one CPU-bound
//! owner 90% of usage is forgotten in about 5 periods, as in BSD. Unlike BSD
//! we keep usage in exact nanoseconds and compare it directly instead of
//! quantizing it into 32 run queues, and there is no `nice` yet. Because the
//! scheduler favours whoever has been *charged* least, work charged to the
//! wrong owner shows up as unfairness — exactly the BSD mis-accounting the
//! LRP paper measures in Table 2 (a worker's share of 23–26% instead of 1/3).
//! An owner that sleeps comes back with little usage and runs at once, which
//! is BSD's (intended) preference for I/O-bound processes.
//!
//! # Charging
//!
//! Each iteration is timed with the clock ([`TscClock`] in production) and
//! charged, by default, to the task's owner. Two ways to charge elsewhere:
//!
//! * [`Cx::charge_to`]`(owner, f)` times `f` and charges it to `owner`
//!   instead (nesting works; the time is subtracted from the enclosing
//!   section). In the LRP modes the stack's receive loop uses it to charge
//!   any protocol work it does for a socket to that socket's owner.
//! * [`Charge::Interrupted`], chosen when spawning a task, charges its
//!   iterations to the owner whose task ran last (the one "interrupted"),
//!   or to the task's own owner if the core was idle — what 4.4BSD does with
//!   interrupt and softnet time. The `eager` mode spawns its receive loop
//!   this way. [`Cx::interrupted`] exposes the same owner for finer choices.
//!
//! [`Executor::run_on_behalf_of`] charges work done outside any task.
//! Accounting is in [`OwnerUsage`]; for every owner
//! `cpu_ns = task_ns − charged_to_others_ns + charged_from_others_ns + external_ns`.
//!
//! # How the receive modes will use it
//!
//! The stack is an owner with a `Fixed(0)` receive-loop task, woken when the
//! NIC has frames. Applications are best-effort owners (or, later, reactive
//! and periodic ones); each has a protocol-handler task woken when one of its
//! channels gets data (TCP's ready list), so its protocol work runs at its
//! priority and is charged to it. In `eager` and `early-demux` the receive
//! loop does the protocol work itself and is spawned with
//! [`Charge::Interrupted`]; in `soft-lrp` it only demultiplexes (charged to
//! the stack) and an [`Class::Idle`] task drains channels nobody is reading;
//! in `ni-lrp` demultiplexing runs on another core, which wakes the owners'
//! tasks through a [`RemoteWaker`].
//!
//! Timers other than releases: a task that wants to run at a time returns
//! `Wait` and is woken by whoever owns the timer (the stack's TCP timers,
//! the host's tick).

pub mod admission;
pub mod clock;
#[cfg(test)]
mod rt_tests;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

pub use admission::{Bucket, Periodic, Refusal, ResponseTime};
pub use clock::{Clock, InstantClock, TscClock, VirtualClock};

/// An owner: what CPU time is charged to. Index into the executor's owners.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OwnerId(u16);

impl OwnerId {
    /// The owner's index (0, 1, … in order of [`Executor::add_owner`]).
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// A task: slot index plus a generation, so a stale id never wakes the task
/// that reused its slot (except through [`RemoteWaker`], see there).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TaskId {
    idx: u32,
    gen: u32,
}

impl TaskId {
    /// The slot index (stable while the task lives).
    pub const fn index(self) -> usize {
        self.idx as usize
    }
}

/// How an owner competes for the core, most urgent first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// The system's own work (the host's receive loop): strict priority
    /// above everything else; lower number = more urgent. Same-priority
    /// owners take turns. Admission counts it as
    /// [`SchedConfig::system`].
    Fixed(u8),
    /// A reactive handler (RTU §III-C): runnable on an event, it runs
    /// before all periodic work while its token bucket of CPU time holds
    /// tokens; with the bucket empty it competes as best-effort until the
    /// bucket refills (limited hijacking), so it cannot take the core.
    Reactive(Bucket),
    /// A periodic handler (RTU §II–III): released every period with a
    /// batch of iterations; rate-monotonic priority (shorter period first);
    /// not runnable once its batch is spent until the next release.
    /// Added only if the admission test passes.
    Periodic(Periodic),
    /// Shares the core by recent (decayed) CPU usage.
    BestEffort,
    /// Runs only when nothing else is runnable.
    Idle,
}

impl Class {
    /// Whether admission control accounts for this class.
    pub fn is_real_time(&self) -> bool {
        matches!(self, Class::Reactive(_) | Class::Periodic(_))
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Class::Fixed(p) => write!(f, "fixed({p})"),
            Class::Reactive(b) => write!(f, "react({}%)", b.share_ppm / 10_000),
            Class::Periodic(p) => write!(f, "T{}us/B{}", p.period_ns / 1_000, p.batch),
            Class::BestEffort => f.write_str("best-eff"),
            Class::Idle => f.write_str("idle"),
        }
    }
}

/// What a task says after one iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// It has more work: put it back at the tail of its owner's queue.
    Ready,
    /// Nothing to do until woken. A wake that arrived during the iteration
    /// is not lost: the task is requeued.
    Wait,
    /// Finished: its slot is freed and its id goes stale.
    Done,
}

/// Whom a task's iterations are charged to (besides [`Cx::charge_to`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Charge {
    /// The task's owner.
    #[default]
    Owner,
    /// The owner whose [`Charge::Owner`] task ran last — the one this
    /// iteration "interrupted", as 4.4BSD charges interrupt time — or the
    /// task's own owner if the core was idle in between.
    Interrupted,
}

/// A handler run one bounded iteration at a time.
///
/// `S` is the state the executor lends to every iteration (the stack, the
/// application's data): tasks share it by `&mut`, one at a time, instead of
/// through `Rc<RefCell<_>>`.
pub trait Task<S> {
    /// Does one bounded piece of work. Must not block.
    fn run(&mut self, cx: &mut Cx<'_>, state: &mut S) -> Status;
}

impl<S, F> Task<S> for F
where
    F: FnMut(&mut Cx<'_>, &mut S) -> Status,
{
    fn run(&mut self, cx: &mut Cx<'_>, state: &mut S) -> Status {
        self(cx, state)
    }
}

/// CPU accounting of one owner, all in nanoseconds of the executor's clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OwnerUsage {
    /// Everything charged to this owner: what the scheduler sees.
    pub cpu_ns: u64,
    /// Time this owner's tasks ran, whoever it was charged to.
    pub task_ns: u64,
    /// Iterations of this owner's tasks: the boundaries its handlers
    /// marked ([`Cx::iteration_done`]), or one per run of a task that marks
    /// none and answers `Ready` or `Done`.
    pub iterations: u64,
    /// Runs ([`Task::run`] calls) of this owner's tasks.
    pub runs: u64,
    /// Charged to this owner while another owner's task was running
    /// (`charge_to` this owner, or [`Charge::Interrupted`] landing here).
    pub charged_from_others_ns: u64,
    /// Ran in this owner's tasks but was charged to another owner.
    pub charged_to_others_ns: u64,
    /// Charged from outside any task ([`Executor::run_on_behalf_of`],
    /// [`Executor::charge_external`]).
    pub external_ns: u64,
    /// Recent, decayed usage: the best-effort scheduling key.
    pub recent_ns: u64,
    /// The longest stretch one of this owner's tasks ran without an
    /// iteration boundary: its longest iteration (the blocking term of
    /// admission control).
    pub max_iteration_ns: u64,
    /// Periodic: releases (periods begun).
    pub releases: u64,
    /// Periodic: releases that found the previous period's job unfinished:
    /// work queued at that release and runnable through the whole period,
    /// not done. (Work that arrives later in a period runs on what is left
    /// of the batch; if it is unfinished at the next release it carries
    /// over without counting.)
    pub deadline_misses: u64,
    /// Periodic: releases the executor saw only after a later one was due
    /// (it was stalled for more than a period); each counts as a miss.
    pub skipped_releases: u64,
    /// Periodic: the longest time from a release (or the first wake after
    /// it) until the batch was done or the work ran out.
    pub max_response_ns: u64,
    /// Iterations longer than admission assumed: periodic, its declared
    /// cost; reactive, [`SchedConfig::nonrt_iteration_ns`]; fixed,
    /// [`SchedConfig::system_iteration_ns`].
    pub overruns: u64,
    /// Reactive: runs made at best-effort priority because the token
    /// bucket was empty.
    pub throttled_runs: u64,
}

/// How recent usage is forgotten.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decay {
    /// 4.4BSD's filter: multiply by `2·load / (2·load + 1)` per period,
    /// `load` = runnable best-effort owners (at least 1).
    Bsd,
    /// Multiply by `num / den` per period.
    Fixed {
        /// Numerator.
        num: u32,
        /// Denominator (> `num`).
        den: u32,
    },
    /// Never forget: pure least-attained-service (for comparison).
    None,
}

/// Executor limits and policy.
#[derive(Clone, Copy, Debug)]
pub struct SchedConfig {
    /// Owners that can be added.
    pub max_owners: usize,
    /// Tasks that can exist at once (also sizes the [`RemoteWaker`] bitmap).
    pub max_tasks: usize,
    /// How often recent usage decays.
    pub decay_period_ns: u64,
    /// The decay filter.
    pub decay: Decay,
    /// Admission: the most of the core that periodic handlers and the
    /// reactive and system buckets may take together, ppm (RTU footnote 3:
    /// never all of it).
    pub utilisation_bound_ppm: u32,
    /// Admission: the interference assumed from [`Class::Fixed`] work. It
    /// is enforced while real-time owners exist: Fixed iterations spend
    /// its tokens, and with none left a Fixed owner runs below the
    /// periodic ones (above best-effort) until it refills. With no
    /// real-time owner there is nothing to protect, and Fixed work is
    /// unbounded (4.4BSD's interrupts).
    pub system: Bucket,
    /// Admission: the longest iteration assumed of [`Class::Fixed`] work
    /// (its overdraft of the system bucket; measured iterations replace it
    /// when longer, and longer ones count as its overruns).
    pub system_iteration_ns: u64,
    /// Admission: the longest iteration assumed of best-effort and idle
    /// work, and of a reactive handler (its bucket's overdraft): measured
    /// iterations replace it when longer, and a reactive iteration longer
    /// counts as its overrun.
    pub nonrt_iteration_ns: u64,
    /// Admission: how late a release may be seen (a sleeping executor's
    /// wake-up latency).
    pub release_jitter_ns: u64,
    /// A periodic handler that overruns in this many consecutive periods —
    /// uses more than its declared `B·c` in the period, or takes more than
    /// twice `c` (plus [`SchedConfig::release_jitter_ns`], the stalls the
    /// platform is known for) in one iteration — is demoted to best-effort.
    /// Also: admission re-checked with the costs measured over a decay
    /// period that fails in this many periods in a row demotes the
    /// lowest-priority handler that misses.
    pub demote_after: u32,
    /// How often, at most, an iteration boundary looks at the interrupt
    /// lines ([`Executor::add_line`]): each look is a load of a cache line
    /// another core writes (a NIC ring's producer index).
    pub line_check_ns: u64,
}

impl Default for SchedConfig {
    fn default() -> Self {
        SchedConfig {
            max_owners: 64,
            max_tasks: 4096,
            decay_period_ns: 1_000_000_000,
            decay: Decay::Bsd,
            utilisation_bound_ppm: 800_000,
            system: Bucket {
                share_ppm: 100_000,
                burst_ns: 200_000,
            },
            system_iteration_ns: 50_000,
            nonrt_iteration_ns: 50_000,
            release_jitter_ns: 0,
            demote_after: 3,
            line_check_ns: 2_000,
        }
    }
}

/// Why the executor refused something (setup-time only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchedError {
    /// [`SchedConfig::max_owners`] reached.
    TooManyOwners,
    /// [`SchedConfig::max_tasks`] reached.
    TooManyTasks,
    /// No such owner.
    NoSuchOwner,
    /// No such task (done, or never spawned).
    NoSuchTask,
    /// Admission control refused a real-time owner.
    Unschedulable(Refusal),
    /// A class the executor cannot run (a period or batch of zero, a bucket
    /// share of 100% or more).
    BadClass,
}

impl fmt::Display for SchedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchedError::TooManyOwners => f.write_str("too many owners"),
            SchedError::TooManyTasks => f.write_str("too many tasks"),
            SchedError::NoSuchOwner => f.write_str("no such owner"),
            SchedError::NoSuchTask => f.write_str("no such task"),
            SchedError::Unschedulable(r) => write!(f, "not admitted: {r}"),
            SchedError::BadClass => f.write_str("invalid class parameters"),
        }
    }
}

impl std::error::Error for SchedError {}

/// The state of a task as seen from outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskState {
    /// On its owner's run queue.
    Queued,
    /// Waiting to be woken.
    Waiting,
    /// In the middle of an iteration (only observable from inside one).
    Running,
}

/// What a run loop did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunReport {
    /// Iterations run.
    pub iterations: u64,
    /// It stopped because nothing was runnable (not because of its bound).
    pub idle: bool,
    /// Clock time the loop took.
    pub elapsed_ns: u64,
}

/// Executor-wide counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecStats {
    /// Iterations run.
    pub iterations: u64,
    /// Times a run loop found nothing runnable.
    pub idle: u64,
    /// Wakes that were ignored because the id was stale.
    pub stale_wakes: u64,
    /// Decay periods applied.
    pub decays: u64,
    /// Periodic releases.
    pub releases: u64,
    /// Periodic owners demoted to best-effort for overrunning.
    pub demotions: u64,
    /// Yield requests raised (a more urgent owner became runnable while
    /// another ran).
    pub yield_requests: u64,
    /// The latest a periodic release was seen, at a scheduling decision
    /// between runs, after it was due: how late an idle or sleeping
    /// executor noticed it (a sleep's overshoot), which admission assumes
    /// as [`SchedConfig::release_jitter_ns`]. (A release that comes while
    /// a handler runs is seen at its next iteration boundary: that wait is
    /// the blocking term, not jitter.)
    pub max_release_late_ns: u64,
    /// Tasks woken at an iteration boundary by an interrupt line (work for
    /// them arrived while another owner ran: a frame on a NIC's ring).
    pub line_wakes: u64,
    /// Runs of [`Class::Fixed`] owners made below the periodic level
    /// because the system bucket was empty.
    pub system_throttled_runs: u64,
    /// Admission re-checked with a decay period's measured costs because
    /// one exceeded what admission assumed.
    pub readmission_checks: u64,
    /// Of those, checks the set failed.
    pub readmission_failures: u64,
    /// Real-time owners demoted to best-effort because the re-checked set
    /// failed [`SchedConfig::demote_after`] periods in a row.
    pub readmission_demotions: u64,
}

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Free,
    Waiting,
    Queued,
    /// Running; `woken` records a wake that arrived meanwhile.
    Running {
        woken: bool,
    },
}

#[derive(Clone, Copy, Debug)]
struct TaskMeta {
    owner: OwnerId,
    gen: u32,
    slot: Slot,
    charge: Charge,
    /// Next task on the same owner's run queue, or free list.
    next: u32,
    /// The owner's other tasks, queued or not (a doubly linked list, so a
    /// periodic release can wake them all and a finished task leaves in
    /// O(1)).
    mnext: u32,
    mprev: u32,
}

/// A real-time owner's state between scheduling decisions.
#[derive(Clone, Copy, Debug, Default)]
struct Rt {
    /// Periodic: the next release.
    next_release_ns: u64,
    /// Periodic: iterations left in this period's batch.
    budget: u32,
    /// Periodic: when the current job (work released or woken in this
    /// period, not yet done) began.
    job_start: Option<u64>,
    /// Periodic: the current job was queued at its release (only such a job
    /// has the period as its deadline; work that arrives later in the
    /// period runs on what is left of the batch and otherwise carries over).
    job_released: bool,
    /// Periodic: time its iterations took in this period.
    used_ns: u64,
    /// Periodic: an iteration took more than twice its declared cost (and
    /// the configured release jitter) in this period.
    gross: bool,
    /// Periodic: consecutive periods that overran (see `release`).
    streak: u32,
    /// Demoted from periodic: its period, at which its tasks are still
    /// woken (0: none).
    timer_ns: u64,
    /// Reactive: tokens, ns (negative after an overdraft).
    tokens: i64,
    /// Reactive: when tokens were last added.
    refilled_ns: u64,
    /// The longest iterations in the current decay period, longest first:
    /// admission is re-checked with the last of them (the longest but
    /// [`READMIT_SET_ASIDE`], which may be stalls of the machine).
    win_top_ns: [u64; READMIT_SET_ASIDE + 1],
}

#[derive(Debug)]
struct Owner {
    name: String,
    class: Class,
    usage: OwnerUsage,
    head: u32,
    tail: u32,
    /// Tasks on the run queue.
    queued: u32,
    /// Sequence number of the last pick, for round robin among equals.
    last_pick: u64,
    /// First of all its tasks (see [`TaskMeta::mnext`]).
    members: u32,
    rt: Rt,
}

/// Shared with [`RemoteWaker`]s: one bit per task slot.
#[derive(Debug)]
struct RemoteShared {
    pending: AtomicBool,
    bits: Box<[AtomicU64]>,
}

/// Wakes tasks from another thread (the NI core in `ni-lrp`). `Send + Sync`,
/// cheap to clone; a wake is one `fetch_or` and one store.
///
/// It names tasks by slot only, so a wake racing with the task finishing can
/// wake whatever task reuses the slot: tasks must tolerate spurious wakes
/// (return `Wait` when they find nothing to do), which they must anyway.
#[derive(Clone, Debug)]
pub struct RemoteWaker {
    shared: Arc<RemoteShared>,
}

impl RemoteWaker {
    /// Marks `task` runnable; the executor notices at its next scheduling
    /// decision (or [`Cx::should_yield`]).
    pub fn wake(&self, task: TaskId) {
        let i = task.index();
        if let Some(word) = self.shared.bits.get(i / 64) {
            word.fetch_or(1 << (i % 64), Ordering::Release);
            self.shared.pending.store(true, Ordering::Release);
        }
    }
}

/// Everything but the task bodies, so an iteration can borrow it (through
/// [`Cx`]) while its own task body is borrowed.
struct Core {
    clock: Box<dyn Clock>,
    cfg: SchedConfig,
    owners: Vec<Owner>,
    meta: Vec<TaskMeta>,
    free_head: u32,
    live_tasks: usize,
    remote: Arc<RemoteShared>,
    next_decay_ns: u64,
    /// Owner of the last [`Charge::Owner`] iteration; `None` after idling.
    last_process_owner: Option<OwnerId>,
    /// Scheduling key of the running owner, for `should_yield`.
    running_key: Option<(u8, u64)>,
    yield_flag: bool,
    pick_seq: u64,
    stats: ExecStats,
    /// The earliest release of any periodic owner, or timer of a demoted
    /// one (`u64::MAX`: none).
    next_release_ns: u64,
    /// The owner of the last run and how long it took.
    last_run: Option<(OwnerId, u64)>,
    /// The clock as [`Executor::run_once`] last read it (at its start when
    /// nothing ran, at the end of the run otherwise).
    last_now_ns: u64,
    /// Whether any owner is reactive (else a run skips the bucket refill).
    any_reactive: bool,
    /// Real-time owners (periodic and reactive, not demoted): while there
    /// are any, the system bucket is enforced.
    rt_owners: usize,
    /// The system bucket's tokens (ns; negative after an overdraft) and
    /// when they were last added.
    sys_tokens: i64,
    sys_refilled_ns: u64,
    /// Interrupt lines ([`Executor::add_line`]) and when they may next be
    /// looked at from an iteration boundary.
    lines: Vec<Line>,
    next_line_check_ns: u64,
    /// Consecutive decay periods whose re-checked admission failed.
    readmit_streak: u32,
    /// Reused by the re-check (no allocation while running): periodic
    /// owners' loads and indices, and the buckets.
    scratch_loads: Vec<Periodic>,
    scratch_owners: Vec<usize>,
    scratch_buckets: Vec<(Bucket, u64)>,
}

/// A check that work for `task` waits (a frame on a ring), cheap enough to
/// make between two iterations of another task (see [`Executor::add_line`]).
struct Line {
    task: TaskId,
    probe: Box<dyn Fn() -> bool>,
}

/// The single-threaded executor of one core. `S` is the state lent to tasks.
pub struct Executor<S> {
    core: Core,
    bodies: Vec<Option<Box<dyn Task<S>>>>,
}

impl<S> fmt::Debug for Executor<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executor")
            .field("owners", &self.core.owners.len())
            .field("tasks", &self.core.live_tasks)
            .field("stats", &self.core.stats)
            .finish()
    }
}

/// What an iteration can do besides its own work.
pub struct Cx<'a> {
    core: &'a mut Core,
    task: TaskId,
    owner: OwnerId,
    target: OwnerId,
    /// Time of the current section already charged by nested `charge_to`s.
    excluded_ns: u64,
    /// The last iteration boundary (the run's start at first).
    mark_ns: u64,
    /// Boundaries marked in this run.
    marks: u32,
}

impl fmt::Debug for Cx<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cx")
            .field("task", &self.task)
            .field("owner", &self.owner)
            .field("target", &self.target)
            .finish()
    }
}

impl<'a> Cx<'a> {
    /// The running task.
    pub fn task(&self) -> TaskId {
        self.task
    }

    /// The running task's owner.
    pub fn owner(&self) -> OwnerId {
        self.owner
    }

    /// Whom the code running right now is charged to.
    pub fn charged_to(&self) -> OwnerId {
        self.target
    }

    /// The owner whose ordinary ([`Charge::Owner`]) task ran last before this
    /// iteration, `None` if the core was idle since (or at start).
    pub fn interrupted(&self) -> Option<OwnerId> {
        self.core.last_process_owner
    }

    /// The executor's clock.
    pub fn now_ns(&self) -> u64 {
        self.core.clock.now_ns()
    }

    /// Wakes a task of any owner (including the running one).
    pub fn wake(&mut self, task: TaskId) {
        self.core.wake(task);
    }

    /// Runs `f` and charges the time it takes to `owner` instead of the
    /// current target. Sections nest. An unknown owner is charged nothing
    /// (the time stays with the enclosing section's target).
    pub fn charge_to<R>(&mut self, owner: OwnerId, f: impl FnOnce(&mut Self) -> R) -> R {
        if owner.index() >= self.core.owners.len() {
            return f(self);
        }
        let t0 = self.core.clock.now_ns();
        let outer_target = std::mem::replace(&mut self.target, owner);
        let outer_excluded = std::mem::replace(&mut self.excluded_ns, 0);
        let r = f(self);
        let elapsed = self.core.clock.now_ns().saturating_sub(t0);
        let inner = elapsed.saturating_sub(self.excluded_ns);
        self.core.charge(owner, inner, Some(self.owner));
        self.target = outer_target;
        self.excluded_ns = outer_excluded + elapsed;
        r
    }

    /// Charges `ns` of the current section, measured by the caller, to
    /// `owner` instead of the current target — for work whose beneficiary
    /// is known only after it was done (the receive loop learns whose
    /// frames it demultiplexed afterwards). `ns` must lie inside the
    /// section; whatever exceeds it is taken from nobody. An unknown owner
    /// is charged nothing.
    pub fn charge_measured(&mut self, owner: OwnerId, ns: u64) {
        if owner.index() >= self.core.owners.len() || ns == 0 {
            return;
        }
        self.core.charge(owner, ns, Some(self.owner));
        self.excluded_ns += ns;
    }

    /// Whether a more urgent owner became runnable during this iteration
    /// (delayed preemption: a long iteration should finish up and return
    /// `Ready`). Also picks up wakes from other threads.
    pub fn should_yield(&mut self) -> bool {
        let now = self.core.clock.now_ns();
        self.core.release_due(now);
        self.core.drain_remote();
        self.core.check_lines(now);
        self.core.yield_flag
    }

    /// Marks the end of one iteration (one PDU's work: a segment in or
    /// out, a datagram, a media packet) and answers whether the handler may
    /// start another now: `false` when a more urgent owner became runnable
    /// (delayed preemption: the handler returns [`Status::Ready`] and is
    /// resumed later), when a periodic owner's batch is spent, or when a
    /// reactive owner's bucket is empty. Every loop in a handler calls it.
    ///
    /// The iteration's time is checked against the owner's declared cost
    /// (overruns) and recorded as its longest iteration; a periodic
    /// owner's batch shrinks by one. A run that marks no boundary counts as
    /// one iteration, unless it answers [`Status::Wait`] (it found nothing
    /// to do).
    pub fn iteration_done(&mut self) -> bool {
        let now = self.core.clock.now_ns();
        let cost = now.saturating_sub(self.mark_ns);
        self.mark_ns = now;
        self.marks += 1;
        let o = self.owner.index();
        self.core.end_iteration(o, cost, true);
        self.core.release_due(now);
        self.core.drain_remote();
        self.core.check_lines(now);
        if self.core.yield_flag {
            return false;
        }
        let owner = &self.core.owners[o];
        match owner.class {
            Class::Periodic(_) => owner.rt.budget > 0,
            Class::Reactive(_) => owner.rt.tokens > 0,
            _ => true,
        }
    }
}

/// The longest iterations of each owner in a decay period that the
/// re-check of admission sets aside: a vCPU the hypervisor stops, or an
/// interrupt, makes one iteration long through no fault of its own (this
/// machine's guest loses tens of milliseconds a minute); a handler that
/// lies is long in more than two.
pub const READMIT_SET_ASIDE: usize = 2;

/// Scheduling levels, most urgent first (the first half of an owner's key).
const LEVEL_FIXED: u8 = 0;
const LEVEL_REACTIVE: u8 = 1;
const LEVEL_PERIODIC: u8 = 2;
/// A [`Class::Fixed`] owner with the system bucket spent (while real-time
/// owners exist): below every guarantee, above best-effort.
const LEVEL_SYSTEM_SPENT: u8 = 3;
const LEVEL_BEST_EFFORT: u8 = 4;
const LEVEL_IDLE: u8 = 5;

/// Moves a release due at `*next` (≤ `now`) past `now` by whole periods;
/// returns how many periods began (1, or more if releases were skipped).
fn catch_up(next: &mut u64, period: u64, now: u64) -> u64 {
    let period = period.max(1);
    let periods = (now - *next) / period + 1;
    *next += periods * period;
    periods
}

impl Core {
    /// The owner's scheduling key (smaller runs first), `None` if it may not
    /// run now (a periodic owner whose batch is spent).
    fn key(&self, o: usize) -> Option<(u8, u64)> {
        let owner = &self.owners[o];
        Some(match owner.class {
            Class::Fixed(p) if self.rt_owners > 0 && self.sys_tokens <= 0 => {
                (LEVEL_SYSTEM_SPENT, u64::from(p))
            }
            Class::Fixed(p) => (LEVEL_FIXED, u64::from(p)),
            Class::Reactive(_) if owner.rt.tokens > 0 => (LEVEL_REACTIVE, 0),
            Class::Periodic(p) if owner.rt.budget > 0 => (LEVEL_PERIODIC, p.period_ns),
            Class::Periodic(_) => return None,
            Class::Reactive(_) | Class::BestEffort => (LEVEL_BEST_EFFORT, owner.usage.recent_ns),
            Class::Idle => (LEVEL_IDLE, 0),
        })
    }

    /// Raises the yield flag if owner `o` just became runnable and is more
    /// urgent than the running owner. Best-effort owners never preempt each
    /// other: their keys move with every charge.
    fn maybe_request_yield(&mut self, o: usize) {
        if let (Some(running), Some(k)) = (self.running_key, self.key(o)) {
            if k.0 < LEVEL_BEST_EFFORT && k < running && !self.yield_flag {
                self.yield_flag = true;
                self.stats.yield_requests += 1;
            }
        }
    }

    /// Starts every periodic period that is due at `now`: counts a miss for
    /// each batch left unfinished, refills the batch, wakes the owner's
    /// tasks (the handler is upcalled every period, RTU §III-B) and applies
    /// overrun demotion. O(owners), and only when a release is due.
    fn release_due(&mut self, now: u64) {
        if now < self.next_release_ns {
            return;
        }
        if self.running_key.is_none() {
            let late = now - self.next_release_ns;
            self.stats.max_release_late_ns = self.stats.max_release_late_ns.max(late);
        }
        let mut next = u64::MAX;
        for o in 0..self.owners.len() {
            match self.owners[o].class {
                Class::Periodic(p) if self.owners[o].rt.next_release_ns <= now => {
                    self.release(o, p, now);
                }
                Class::BestEffort if self.owners[o].rt.timer_ns > 0 => {
                    // Demoted: still woken every period (below), until it
                    // has no task left.
                    if self.owners[o].members == NIL {
                        self.owners[o].rt.timer_ns = 0;
                        continue;
                    }
                    let rt = &mut self.owners[o].rt;
                    if rt.next_release_ns <= now {
                        catch_up(&mut rt.next_release_ns, rt.timer_ns, now);
                        self.wake_members(o);
                    }
                }
                _ => {}
            }
            let owner = &self.owners[o];
            if matches!(owner.class, Class::Periodic(_)) || owner.rt.timer_ns > 0 {
                next = next.min(owner.rt.next_release_ns);
            }
        }
        self.next_release_ns = next;
    }

    /// Makes every waiting task of owner `o` runnable (a running one is
    /// requeued when it returns); returns whether one was running.
    fn wake_members(&mut self, o: usize) -> bool {
        let mut t = self.owners[o].members;
        let mut running = false;
        while t != NIL {
            let m = self.meta[t as usize];
            match m.slot {
                Slot::Waiting => self.enqueue(t),
                Slot::Running { .. } => {
                    self.meta[t as usize].slot = Slot::Running { woken: true };
                    running = true;
                }
                Slot::Queued | Slot::Free => {}
            }
            t = m.mnext;
        }
        running
    }

    fn release(&mut self, o: usize, p: Periodic, now: u64) {
        let period = p.period_ns.max(1);
        let owner = &mut self.owners[o];
        let due = owner.rt.next_release_ns;
        let periods = catch_up(&mut owner.rt.next_release_ns, period, now);
        let release_at = due + (periods - 1) * period;
        owner.usage.releases += 1;
        self.stats.releases += 1;
        if let Some(start) = owner.rt.job_start.take() {
            if owner.rt.job_released {
                owner.usage.deadline_misses += 1;
                // Its response is at least this long.
                let r = due.saturating_sub(start);
                owner.usage.max_response_ns = owner.usage.max_response_ns.max(r);
            }
        }
        owner.usage.skipped_releases += periods - 1;
        owner.usage.deadline_misses += periods - 1;
        owner.rt.budget = p.batch;
        // A period overran if the owner used more than its declared demand
        // `B·c`, or if one iteration took more than twice `c` plus the
        // release jitter (it holds everyone below it up). Single iterations a little over `c` are
        // counted (`overruns`) but do not demote: they are measurement
        // noise (an interrupt) as often as a lie, and admission already
        // uses the measured maximum.
        // A release seen more than a period late means the whole executor
        // stalled (a stopped vCPU, a process that took the core): the
        // iteration that spanned the stall looks long through no fault of
        // its own, so that period neither counts nor breaks the streak.
        if periods == 1 {
            if owner.rt.used_ns > p.demand_ns() || owner.rt.gross {
                owner.rt.streak += 1;
            } else {
                owner.rt.streak = 0;
            }
        }
        owner.rt.used_ns = 0;
        owner.rt.gross = false;
        if owner.rt.streak >= self.cfg.demote_after.max(1) {
            // Best-effort from now on, without a guarantee or a batch; its
            // releases stay as a timer (a handler whose work is the passing
            // of time, a media stream's, waits for them).
            owner.class = Class::BestEffort;
            owner.rt = Rt {
                next_release_ns: owner.rt.next_release_ns,
                timer_ns: period,
                ..Rt::default()
            };
            self.rt_owners = self.rt_owners.saturating_sub(1);
            self.stats.demotions += 1;
            log::warn!(
                "sched: periodic handler `{}` overran its declared {} ns iterations in {} periods in a row (longest {} ns); demoted to best-effort",
                owner.name,
                p.iteration_ns,
                self.cfg.demote_after.max(1),
                owner.usage.max_iteration_ns
            );
            self.wake_members(o);
            return;
        }
        // Wake every waiting task of the owner: the release is its event.
        let running = self.wake_members(o);
        let owner = &mut self.owners[o];
        // Released while one of its tasks runs (a release seen at an
        // iteration boundary): that work is this period's job too.
        if owner.queued > 0 || running {
            owner.rt.job_start = Some(release_at);
            owner.rt.job_released = true;
        }
        self.maybe_request_yield(o);
    }

    /// Closes one iteration of owner `o` that took `cost` ns: longest
    /// iteration, overrun check against a periodic declaration, batch and
    /// token spending. `counted`: it was a marked iteration (or the only
    /// one of its run), not the tail after the last mark.
    fn end_iteration(&mut self, o: usize, cost: u64, counted: bool) {
        let owner = &mut self.owners[o];
        owner.usage.max_iteration_ns = owner.usage.max_iteration_ns.max(cost);
        let top = &mut owner.rt.win_top_ns;
        if cost > top[READMIT_SET_ASIDE] {
            // Insertion into a three-entry array, longest first.
            let mut at = READMIT_SET_ASIDE;
            while at > 0 && top[at - 1] < cost {
                top[at] = top[at - 1];
                at -= 1;
            }
            top[at] = cost;
        }
        if counted {
            owner.usage.iterations += 1;
        }
        match owner.class {
            Class::Fixed(_) => {
                if cost > self.cfg.system_iteration_ns {
                    owner.usage.overruns += 1;
                }
                if self.rt_owners > 0 {
                    self.sys_tokens = self
                        .sys_tokens
                        .saturating_sub(cost.min(i64::MAX as u64) as i64);
                }
            }
            Class::Periodic(p) => {
                owner.rt.used_ns = owner.rt.used_ns.saturating_add(cost);
                if cost > p.iteration_ns {
                    owner.usage.overruns += 1;
                    // Beyond twice `c` and the platform's jitter: a stall
                    // of the machine the analysis already allows for is
                    // not the handler's lie.
                    owner.rt.gross |= cost
                        > p.iteration_ns
                            .saturating_mul(2)
                            .saturating_add(self.cfg.release_jitter_ns);
                }
                if counted {
                    owner.rt.budget = owner.rt.budget.saturating_sub(1);
                }
            }
            Class::Reactive(_) => {
                if cost > self.cfg.nonrt_iteration_ns {
                    owner.usage.overruns += 1;
                }
                owner.rt.tokens = owner
                    .rt
                    .tokens
                    .saturating_sub(cost.min(i64::MAX as u64) as i64);
            }
            _ => {}
        }
    }

    /// At an iteration boundary: looks at the interrupt lines (at most
    /// every [`SchedConfig::line_check_ns`]) and wakes the task of each
    /// that has work, if that task waits and its owner is more urgent than
    /// the one running — which raises the yield flag (delayed preemption:
    /// a frame for a more urgent handler waits one iteration at most).
    /// One load per line and a compare otherwise; no system call.
    fn check_lines(&mut self, now: u64) {
        if self.lines.is_empty() || now < self.next_line_check_ns {
            return;
        }
        self.next_line_check_ns = now.saturating_add(self.cfg.line_check_ns);
        let Some(running) = self.running_key else {
            return;
        };
        for i in 0..self.lines.len() {
            let t = self.lines[i].task;
            let Some(m) = self.meta_of(t) else { continue };
            if m.slot != Slot::Waiting {
                continue;
            }
            let urgent = self.key(m.owner.index()).is_some_and(|k| k < running);
            if urgent && (self.lines[i].probe)() {
                self.stats.line_wakes += 1;
                self.wake_index(t.idx);
            }
        }
    }

    /// Once per decay period, with real-time owners: if the period's
    /// iterations exceeded what admission assumed (the longest but the
    /// [`READMIT_SET_ASIDE`] longest of each owner: a periodic
    /// handler's declared cost, a reactive handler's or best-effort
    /// work's [`SchedConfig::nonrt_iteration_ns`], Fixed work's
    /// [`SchedConfig::system_iteration_ns`]), admission is run again with
    /// those iterations. A set that fails in
    /// [`SchedConfig::demote_after`] periods in a row (one period can be a
    /// stall of the machine, not a lie) gives up the real-time owner whose
    /// iterations broke its declaration — the lowest-priority one, a
    /// periodic handler before a reactive one — demoted to best-effort
    /// with a log line. Its victims keep their class: demoting a handler
    /// that is blocked by another's long iterations would not shorten
    /// them. Where no real-time owner exceeded its own (best-effort or
    /// system work did), the failure is counted and the analysis
    /// ([`Executor::analysis`]) shows who may miss. Allocation-free
    /// (`scratch_*`); O(owners²).
    fn readmit(&mut self) {
        let cfg = self.cfg;
        let mut exceeded = false;
        // The real-time owner that exceeded its declaration with the
        // lowest priority: ((periodic 1 or reactive 0, period), index).
        let mut liar: Option<((u8, u64), usize)> = None;
        self.scratch_loads.clear();
        self.scratch_owners.clear();
        self.scratch_buckets.clear();
        let mut system_c = cfg.system_iteration_ns;
        let mut nonrt = cfg.nonrt_iteration_ns;
        for (i, o) in self.owners.iter().enumerate() {
            let m = o.rt.win_top_ns[READMIT_SET_ASIDE];
            let mut lied = |key: (u8, u64)| {
                exceeded = true;
                if liar.is_none_or(|(k, _)| key >= k) {
                    liar = Some((key, i));
                }
            };
            match o.class {
                Class::Periodic(mut p) => {
                    if m > p.iteration_ns {
                        lied((1, p.period_ns));
                    }
                    p.iteration_ns = p.iteration_ns.max(m);
                    self.scratch_loads.push(p);
                    self.scratch_owners.push(i);
                }
                Class::Reactive(b) => {
                    if m > cfg.nonrt_iteration_ns {
                        lied((0, 0));
                    }
                    self.scratch_buckets
                        .push((b, m.max(cfg.nonrt_iteration_ns)));
                }
                Class::Fixed(_) => {
                    exceeded |= m > cfg.system_iteration_ns;
                    system_c = system_c.max(m);
                }
                Class::BestEffort | Class::Idle => {
                    exceeded |= m > cfg.nonrt_iteration_ns;
                    nonrt = nonrt.max(m);
                }
            }
        }
        for o in &mut self.owners {
            o.rt.win_top_ns = [0; READMIT_SET_ASIDE + 1];
        }
        if !exceeded || self.scratch_loads.is_empty() {
            self.readmit_streak = 0;
            return;
        }
        self.stats.readmission_checks += 1;
        self.scratch_buckets.push((cfg.system, system_c));
        let sums = admission::BucketSums::of(&self.scratch_buckets);
        let fails = (0..self.scratch_loads.len()).any(|k| {
            let (r, _) =
                admission::response(&self.scratch_loads, k, sums, nonrt, cfg.release_jitter_ns);
            r > self.scratch_loads[k].period_ns
        });
        if !fails {
            self.readmit_streak = 0;
            return;
        }
        self.stats.readmission_failures += 1;
        self.readmit_streak += 1;
        let Some((_, o)) = liar else {
            return;
        };
        if self.readmit_streak < cfg.demote_after.max(1) {
            return;
        }
        self.readmit_streak = 0;
        let owner = &mut self.owners[o];
        let timer_ns = match owner.class {
            Class::Periodic(p) => p.period_ns.max(1),
            _ => 0,
        };
        log::warn!(
            "sched: with the iterations measured in {} periods in a row the admitted set fails; `{}` ({}) ran longer than declared (longest {} ns): demoted to best-effort",
            cfg.demote_after.max(1),
            owner.name,
            owner.class,
            owner.usage.max_iteration_ns
        );
        owner.class = Class::BestEffort;
        owner.rt = Rt {
            next_release_ns: owner.rt.next_release_ns,
            timer_ns,
            ..Rt::default()
        };
        self.rt_owners = self.rt_owners.saturating_sub(1);
        self.stats.readmission_demotions += 1;
        self.wake_members(o);
    }

    /// Adds the tokens reactive owners earned since their last refill.
    fn refill(&mut self, now: u64) {
        if self.rt_owners > 0 {
            let b = self.cfg.system;
            let dt = now.saturating_sub(self.sys_refilled_ns);
            self.sys_refilled_ns = now;
            let add =
                (u128::from(dt) * u128::from(b.share_ppm) / 1_000_000).min(i64::MAX as u128) as i64;
            self.sys_tokens = self
                .sys_tokens
                .saturating_add(add)
                .min(b.burst_ns.min(i64::MAX as u64) as i64);
        }
        if !self.any_reactive {
            return;
        }
        for owner in &mut self.owners {
            if let Class::Reactive(b) = owner.class {
                let dt = now.saturating_sub(owner.rt.refilled_ns);
                owner.rt.refilled_ns = now;
                let add = (u128::from(dt) * u128::from(b.share_ppm) / 1_000_000)
                    .min(i64::MAX as u128) as i64;
                owner.rt.tokens = owner
                    .rt
                    .tokens
                    .saturating_add(add)
                    .min(b.burst_ns.min(i64::MAX as u64) as i64);
            }
        }
    }

    /// After a run of periodic owner `o`: the job is done when its batch is
    /// spent or it has nothing left to run.
    fn close_job(&mut self, o: usize, now: u64) {
        let owner = &mut self.owners[o];
        if owner.rt.budget == 0 || owner.queued == 0 {
            if let Some(start) = owner.rt.job_start.take() {
                let r = now.saturating_sub(start);
                owner.usage.max_response_ns = owner.usage.max_response_ns.max(r);
            }
        }
    }

    fn meta_of(&self, task: TaskId) -> Option<&TaskMeta> {
        self.meta
            .get(task.index())
            .filter(|m| m.gen == task.gen && m.slot != Slot::Free)
    }

    fn wake(&mut self, task: TaskId) {
        if self.meta_of(task).is_none() {
            self.stats.stale_wakes += 1;
            return;
        }
        self.wake_index(task.idx);
    }

    fn wake_index(&mut self, idx: u32) {
        let m = &mut self.meta[idx as usize];
        match m.slot {
            Slot::Free | Slot::Queued | Slot::Running { woken: true } => {}
            Slot::Running { woken: false } => m.slot = Slot::Running { woken: true },
            Slot::Waiting => {
                let owner = m.owner.index();
                self.enqueue(idx);
                self.maybe_request_yield(owner);
            }
        }
    }

    fn enqueue(&mut self, idx: u32) {
        let m = &mut self.meta[idx as usize];
        m.slot = Slot::Queued;
        m.next = NIL;
        let o = &mut self.owners[m.owner.index()];
        if o.queued == 0 && o.rt.job_start.is_none() && o.rt.budget > 0 {
            // Work arriving in a period with batch left opens a job.
            if let Class::Periodic(_) = o.class {
                o.rt.job_start = Some(self.clock.now_ns());
                o.rt.job_released = false;
            }
        }
        if o.tail == NIL {
            o.head = idx;
        } else {
            self.meta[o.tail as usize].next = idx;
        }
        o.tail = idx;
        o.queued += 1;
    }

    fn dequeue(&mut self, owner: usize) -> u32 {
        let o = &mut self.owners[owner];
        let idx = o.head;
        debug_assert_ne!(idx, NIL);
        o.head = self.meta[idx as usize].next;
        if o.head == NIL {
            o.tail = NIL;
        }
        o.queued -= 1;
        idx
    }

    fn drain_remote(&mut self) {
        if !self.remote.pending.swap(false, Ordering::Acquire) {
            return;
        }
        for w in 0..self.remote.bits.len() {
            let mut bits = self.remote.bits[w].swap(0, Ordering::Acquire);
            while bits != 0 {
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                let idx = (w as u32) * 64 + b;
                if (idx as usize) < self.meta.len() {
                    self.wake_index(idx);
                }
            }
        }
    }

    /// Charges `ns` to `target`; `runner` is the owner whose task was
    /// running (`None` outside any task).
    fn charge(&mut self, target: OwnerId, ns: u64, runner: Option<OwnerId>) {
        let u = &mut self.owners[target.index()].usage;
        u.cpu_ns += ns;
        u.recent_ns += ns;
        match runner {
            None => u.external_ns += ns,
            Some(r) if r != target => {
                u.charged_from_others_ns += ns;
                self.owners[r.index()].usage.charged_to_others_ns += ns;
            }
            Some(_) => {}
        }
    }

    fn maybe_decay(&mut self, now: u64) {
        let period = self.cfg.decay_period_ns.max(1);
        if now < self.next_decay_ns {
            return;
        }
        let periods = (now - self.next_decay_ns) / period + 1;
        self.next_decay_ns += periods * period;
        self.stats.decays += periods;
        if self.rt_owners > 0 {
            self.readmit();
        }
        let (num, den) = match self.cfg.decay {
            Decay::None => return,
            Decay::Fixed { num, den } => (u64::from(num), u64::from(den.max(1))),
            Decay::Bsd => {
                let load = self
                    .owners
                    .iter()
                    .filter(|o| o.class == Class::BestEffort && o.queued > 0)
                    .count()
                    .max(1) as u64;
                (2 * load, 2 * load + 1)
            }
        };
        for o in &mut self.owners {
            let mut r = o.usage.recent_ns;
            // Period by period (the BSD factor depends on nothing that
            // changes in between); usage reaches zero long before the cap
            // unless the factor is very close to 1, when the cap just
            // under-forgets after a very long stall.
            for _ in 0..periods.min(1024) {
                if r == 0 {
                    break;
                }
                r = (u128::from(r) * u128::from(num) / u128::from(den)) as u64;
            }
            o.usage.recent_ns = r;
        }
    }

    /// The most urgent runnable owner.
    fn pick(&self) -> Option<usize> {
        let mut best: Option<((u8, u64), u64, usize)> = None;
        for (i, o) in self.owners.iter().enumerate() {
            if o.queued == 0 {
                continue;
            }
            let Some(key) = self.key(i) else { continue };
            let cand = (key, o.last_pick, i);
            if best.is_none_or(|b| (cand.0, cand.1) < (b.0, b.1)) {
                best = Some(cand);
            }
        }
        best.map(|b| b.2)
    }
}

impl<S> Executor<S> {
    /// An executor measuring time with `clock`. Allocates everything the
    /// limits in `cfg` call for, up front.
    pub fn new(clock: impl Clock + 'static, cfg: SchedConfig) -> Self {
        let words = cfg.max_tasks.div_ceil(64);
        let remote = Arc::new(RemoteShared {
            pending: AtomicBool::new(false),
            bits: (0..words).map(|_| AtomicU64::new(0)).collect(),
        });
        let now = clock.now_ns();
        Executor {
            core: Core {
                clock: Box::new(clock),
                cfg,
                owners: Vec::with_capacity(cfg.max_owners),
                meta: Vec::with_capacity(cfg.max_tasks),
                free_head: NIL,
                live_tasks: 0,
                remote,
                next_decay_ns: now + cfg.decay_period_ns.max(1),
                last_process_owner: None,
                running_key: None,
                yield_flag: false,
                pick_seq: 0,
                stats: ExecStats::default(),
                next_release_ns: u64::MAX,
                last_run: None,
                last_now_ns: now,
                any_reactive: false,
                rt_owners: 0,
                sys_tokens: 0,
                sys_refilled_ns: now,
                lines: Vec::new(),
                next_line_check_ns: 0,
                readmit_streak: 0,
                scratch_loads: Vec::with_capacity(cfg.max_owners),
                scratch_owners: Vec::with_capacity(cfg.max_owners),
                scratch_buckets: Vec::with_capacity(cfg.max_owners + 1),
            },
            bodies: Vec::with_capacity(cfg.max_tasks),
        }
    }

    /// Adds an owner. A real-time owner ([`Class::Periodic`],
    /// [`Class::Reactive`]) is added only if the set with it passes the
    /// admission test ([`admission`]); the refusal names the handler that
    /// would miss and by how much. A periodic owner's first period begins
    /// now.
    pub fn add_owner(&mut self, name: &str, class: Class) -> Result<OwnerId, SchedError> {
        let n = self.core.owners.len();
        if n >= self.core.cfg.max_owners || n > usize::from(u16::MAX) {
            return Err(SchedError::TooManyOwners);
        }
        match class {
            Class::Periodic(p) if p.period_ns == 0 || p.batch == 0 => {
                return Err(SchedError::BadClass)
            }
            Class::Reactive(b) if b.share_ppm >= 1_000_000 => return Err(SchedError::BadClass),
            _ => {}
        }
        if class.is_real_time() {
            let (loads, interference) = self.admission_input(Some((name, class)));
            admission::admit(&loads, &interference, self.core.cfg.utilisation_bound_ppm)
                .map_err(SchedError::Unschedulable)?;
        }
        let now = self.core.clock.now_ns();
        if class.is_real_time() {
            if self.core.rt_owners == 0 {
                // The system bucket starts full with the first guarantee.
                self.core.sys_tokens = self.core.cfg.system.burst_ns.min(i64::MAX as u64) as i64;
                self.core.sys_refilled_ns = now;
            }
            self.core.rt_owners += 1;
        }
        let mut rt = Rt::default();
        match class {
            Class::Periodic(p) => {
                rt.budget = p.batch;
                rt.next_release_ns = now.saturating_add(p.period_ns);
                self.core.next_release_ns = self.core.next_release_ns.min(rt.next_release_ns);
            }
            Class::Reactive(b) => {
                rt.tokens = b.burst_ns.min(i64::MAX as u64) as i64;
                rt.refilled_ns = now;
                self.core.any_reactive = true;
            }
            _ => {}
        }
        self.core.owners.push(Owner {
            name: name.to_owned(),
            class,
            usage: OwnerUsage::default(),
            head: NIL,
            tail: NIL,
            queued: 0,
            last_pick: 0,
            members: NIL,
            rt,
        });
        Ok(OwnerId(n as u16))
    }

    /// The admission test's input: the periodic owners (and `extra`, one
    /// about to be added), each with its declared iteration cost or its
    /// measured longest iteration if larger; the reactive owners' buckets
    /// (each with one iteration of overdraft) and the system's (its burst
    /// covers its iterations); the longest best-effort iteration.
    fn admission_input(
        &self,
        extra: Option<(&str, Class)>,
    ) -> (Vec<admission::Load>, admission::Interference) {
        let cfg = &self.core.cfg;
        let mut loads = Vec::new();
        // The system bucket's overdraft: the longest Fixed iteration,
        // declared or measured.
        let system_c = self
            .core
            .owners
            .iter()
            .filter(|o| matches!(o.class, Class::Fixed(_)))
            .map(|o| o.usage.max_iteration_ns)
            .fold(cfg.system_iteration_ns, u64::max);
        let mut interference = admission::Interference {
            buckets: vec![(cfg.system, system_c)],
            nonrt_iteration_ns: cfg.nonrt_iteration_ns,
            release_jitter_ns: cfg.release_jitter_ns,
        };
        let owners = self
            .core
            .owners
            .iter()
            .map(|o| (o.name.as_str(), o.class, o.usage.max_iteration_ns))
            .chain(extra.map(|(n, c)| (n, c, 0)));
        for (name, class, measured) in owners {
            match class {
                Class::Periodic(mut p) => {
                    p.iteration_ns = p.iteration_ns.max(measured);
                    loads.push(admission::Load {
                        name: name.to_owned(),
                        periodic: p,
                    });
                }
                // A reactive handler declares no iteration cost: its
                // overdraft is assumed as long as any non-real-time one.
                Class::Reactive(b) => interference
                    .buckets
                    .push((b, measured.max(cfg.nonrt_iteration_ns))),
                Class::BestEffort | Class::Idle => {
                    interference.nonrt_iteration_ns = interference.nonrt_iteration_ns.max(measured);
                }
                Class::Fixed(_) => {}
            }
        }
        (loads, interference)
    }

    /// The response-time analysis of the admitted periodic owners as they
    /// stand (declared costs, or measured ones where larger): each one's
    /// worst-case response beside its deadline.
    pub fn analysis(&self) -> Vec<ResponseTime> {
        let (loads, interference) = self.admission_input(None);
        admission::analyse(&loads, &interference)
    }

    /// The analysis of what the executor has seen so far: [`analysis`]
    /// with the latest release seen as the release jitter, where later than
    /// configured. A worst response beyond it means the scheduler broke
    /// its own rules; within it but beyond [`analysis`] at admission, the
    /// declarations (costs, jitter) did not hold on this machine.
    ///
    /// [`analysis`]: Executor::analysis
    pub fn observed_analysis(&self) -> Vec<ResponseTime> {
        let (loads, mut interference) = self.admission_input(None);
        interference.release_jitter_ns = interference
            .release_jitter_ns
            .max(self.core.stats.max_release_late_ns);
        admission::analyse(&loads, &interference)
    }

    /// The earliest periodic release (or demoted owner's timer) still to
    /// come (`None`: none). A sleeping host wakes for it.
    pub fn next_release_ns(&self) -> Option<u64> {
        (self.core.next_release_ns != u64::MAX).then_some(self.core.next_release_ns)
    }

    /// Whether a task may run now: one is queued (and allowed to run), or
    /// another thread's wake is pending. A host checks it after announcing
    /// that it is going to sleep.
    pub fn has_runnable(&self) -> bool {
        self.core.remote.pending.load(Ordering::Acquire)
            || self
                .core
                .owners
                .iter()
                .enumerate()
                .any(|(i, o)| o.queued > 0 && self.core.key(i).is_some())
    }

    /// The owner of the last task run and how long the run took.
    pub fn last_run(&self) -> Option<(OwnerId, u64)> {
        self.core.last_run
    }

    /// The time [`Executor::run_once`] last read: the end of the last run,
    /// or the start of the last call that ran nothing. Saves a caller that
    /// steps the executor in a loop a clock read per step.
    pub fn last_now_ns(&self) -> u64 {
        self.core.last_now_ns
    }

    /// Spawns a task of `owner`, charged to its owner, runnable at once.
    pub fn spawn(
        &mut self,
        owner: OwnerId,
        task: impl Task<S> + 'static,
    ) -> Result<TaskId, SchedError> {
        self.spawn_with(owner, Charge::Owner, task)
    }

    /// Spawns a task with a charging policy, runnable at once.
    pub fn spawn_with(
        &mut self,
        owner: OwnerId,
        charge: Charge,
        task: impl Task<S> + 'static,
    ) -> Result<TaskId, SchedError> {
        if owner.index() >= self.core.owners.len() {
            return Err(SchedError::NoSuchOwner);
        }
        let body: Box<dyn Task<S>> = Box::new(task);
        let idx = if self.core.free_head != NIL {
            let idx = self.core.free_head;
            self.core.free_head = self.core.meta[idx as usize].next;
            let m = &mut self.core.meta[idx as usize];
            m.gen = m.gen.wrapping_add(1);
            m.owner = owner;
            m.charge = charge;
            m.slot = Slot::Waiting;
            m.mprev = NIL;
            m.mnext = NIL;
            self.bodies[idx as usize] = Some(body);
            idx
        } else {
            if self.core.meta.len() >= self.core.cfg.max_tasks {
                return Err(SchedError::TooManyTasks);
            }
            self.core.meta.push(TaskMeta {
                owner,
                gen: 0,
                slot: Slot::Waiting,
                charge,
                next: NIL,
                mnext: NIL,
                mprev: NIL,
            });
            self.bodies.push(Some(body));
            (self.core.meta.len() - 1) as u32
        };
        let o = &mut self.core.owners[owner.index()];
        let first = std::mem::replace(&mut o.members, idx);
        self.core.meta[idx as usize].mnext = first;
        if first != NIL {
            self.core.meta[first as usize].mprev = idx;
        }
        self.core.live_tasks += 1;
        self.core.enqueue(idx);
        Ok(TaskId {
            idx,
            gen: self.core.meta[idx as usize].gen,
        })
    }

    /// Adds an interrupt line: `probe` says, cheaply (one load of shared
    /// memory, no system call), whether work for `task` waits — a frame on
    /// a NIC's receive ring for a receive task, a socket channel holding
    /// datagrams for its owner's task. Iteration boundaries of other tasks
    /// look at it ([`Cx::iteration_done`], [`Cx::should_yield`]; at most
    /// every [`SchedConfig::line_check_ns`]) and wake `task` when its owner
    /// is more urgent than the one running, which then yields: work for a
    /// more urgent owner waits for the end of one iteration, not of a
    /// whole batch. Set-up only (it allocates).
    pub fn add_line(
        &mut self,
        task: TaskId,
        probe: impl Fn() -> bool + 'static,
    ) -> Result<(), SchedError> {
        if self.core.meta_of(task).is_none() {
            return Err(SchedError::NoSuchTask);
        }
        self.core.lines.push(Line {
            task,
            probe: Box::new(probe),
        });
        Ok(())
    }

    /// Makes a waiting task runnable. Stale ids are counted and ignored.
    pub fn wake(&mut self, task: TaskId) {
        self.core.wake(task);
    }

    /// A handle that wakes tasks from other threads.
    pub fn remote_waker(&self) -> RemoteWaker {
        RemoteWaker {
            shared: self.core.remote.clone(),
        }
    }

    /// The task's state, `None` if it is done (or the id is stale).
    pub fn task_state(&self, task: TaskId) -> Option<TaskState> {
        self.core.meta_of(task).map(|m| match m.slot {
            Slot::Queued => TaskState::Queued,
            Slot::Running { .. } => TaskState::Running,
            Slot::Waiting | Slot::Free => TaskState::Waiting,
        })
    }

    /// The executor's clock.
    pub fn now_ns(&self) -> u64 {
        self.core.clock.now_ns()
    }

    /// Runs `f` outside any task and charges its time to `owner`.
    pub fn run_on_behalf_of<R>(&mut self, owner: OwnerId, f: impl FnOnce() -> R) -> R {
        let t0 = self.core.clock.now_ns();
        let r = f();
        let ns = self.core.clock.now_ns().saturating_sub(t0);
        self.charge_external(owner, ns);
        r
    }

    /// Charges `ns` measured elsewhere to `owner` (ignored for unknown owners).
    pub fn charge_external(&mut self, owner: OwnerId, ns: u64) {
        if owner.index() < self.core.owners.len() {
            self.core.charge(owner, ns, None);
        }
    }

    /// One owner's accounting (all zero for an unknown owner).
    pub fn usage(&self, owner: OwnerId) -> OwnerUsage {
        self.core
            .owners
            .get(owner.index())
            .map(|o| o.usage)
            .unwrap_or_default()
    }

    /// One owner's name and class.
    pub fn owner_info(&self, owner: OwnerId) -> Option<(&str, Class)> {
        self.core
            .owners
            .get(owner.index())
            .map(|o| (o.name.as_str(), o.class))
    }

    /// All owners, in order of creation.
    pub fn owners(&self) -> impl Iterator<Item = OwnerId> + '_ {
        (0..self.core.owners.len()).map(|i| OwnerId(i as u16))
    }

    /// Executor-wide counters.
    pub fn stats(&self) -> ExecStats {
        self.core.stats
    }

    /// Forgets all accounting (e.g. after a warm-up), keeping tasks; also
    /// the longest release lateness.
    pub fn reset_usage(&mut self) {
        for o in &mut self.core.owners {
            o.usage = OwnerUsage::default();
        }
        self.core.stats.max_release_late_ns = 0;
    }

    /// A printable table of every owner's accounting.
    pub fn report(&self) -> UsageReport<'_> {
        UsageReport { core: &self.core }
    }

    /// Runs one iteration of the most urgent runnable task; `None` if
    /// nothing was runnable. Bounded by that one iteration.
    pub fn run_once(&mut self, state: &mut S) -> Option<TaskId> {
        let core = &mut self.core;
        let now = core.clock.now_ns();
        core.maybe_decay(now);
        core.release_due(now);
        core.refill(now);
        core.drain_remote();
        core.last_now_ns = now;
        let Some(o) = core.pick() else {
            core.last_process_owner = None;
            core.stats.idle += 1;
            return None;
        };
        core.pick_seq += 1;
        core.owners[o].last_pick = core.pick_seq;
        let idx = core.dequeue(o);
        let meta = core.meta[idx as usize];
        let owner = meta.owner;
        let target = match meta.charge {
            Charge::Owner => owner,
            Charge::Interrupted => core.last_process_owner.unwrap_or(owner),
        };
        core.meta[idx as usize].slot = Slot::Running { woken: false };
        let key = core.key(o);
        if key.is_some_and(|k| k.0 == LEVEL_BEST_EFFORT)
            && matches!(core.owners[o].class, Class::Reactive(_))
        {
            core.owners[o].usage.throttled_runs += 1;
        }
        if key.is_some_and(|k| k.0 == LEVEL_SYSTEM_SPENT) {
            core.stats.system_throttled_runs += 1;
        }
        core.running_key = key;
        core.yield_flag = false;
        let task = TaskId { idx, gen: meta.gen };
        let mut body = self.bodies[idx as usize]
            .take()
            .expect("a queued task has a body");

        let t0 = core.clock.now_ns();
        let mut cx = Cx {
            core: &mut *core,
            task,
            owner,
            target,
            excluded_ns: 0,
            mark_ns: t0,
            marks: 0,
        };
        let status = body.run(&mut cx, state);
        let (excluded, mark_ns, marks) = (cx.excluded_ns, cx.mark_ns, cx.marks);
        let t1 = core.clock.now_ns();
        core.last_now_ns = t1;
        let elapsed = t1.saturating_sub(t0);

        core.charge(target, elapsed.saturating_sub(excluded), Some(owner));
        // The stretch after the last boundary: the whole run if it marked
        // none, then counted as one iteration — unless it answered `Wait`,
        // an empty poll (a handler woken by a release with nothing to do
        // must not spend its batch).
        let counted = marks == 0 && status != Status::Wait;
        core.end_iteration(o, t1.saturating_sub(mark_ns), counted);
        core.last_run = Some((owner, elapsed));
        let u = &mut core.owners[o].usage;
        u.task_ns += elapsed;
        u.runs += 1;
        core.stats.iterations += 1;
        core.running_key = None;
        if meta.charge == Charge::Owner {
            core.last_process_owner = Some(owner);
        }
        let woken = matches!(core.meta[idx as usize].slot, Slot::Running { woken: true });
        match status {
            Status::Done => {
                let m = core.meta[idx as usize];
                if m.mprev == NIL {
                    core.owners[o].members = m.mnext;
                } else {
                    core.meta[m.mprev as usize].mnext = m.mnext;
                }
                if m.mnext != NIL {
                    core.meta[m.mnext as usize].mprev = m.mprev;
                }
                let m = &mut core.meta[idx as usize];
                m.slot = Slot::Free;
                m.next = core.free_head;
                m.mnext = NIL;
                m.mprev = NIL;
                core.free_head = idx;
                core.live_tasks -= 1;
                // Dropping the body frees its allocation: once per task,
                // not per iteration.
                drop(body);
            }
            Status::Ready => {
                self.bodies[idx as usize] = Some(body);
                core.enqueue(idx);
            }
            Status::Wait if woken => {
                self.bodies[idx as usize] = Some(body);
                core.enqueue(idx);
            }
            Status::Wait => {
                self.bodies[idx as usize] = Some(body);
                core.meta[idx as usize].slot = Slot::Waiting;
            }
        }
        if let Class::Periodic(_) = core.owners[o].class {
            core.close_job(o, t1);
        }
        Some(task)
    }

    /// Runs iterations until nothing is runnable or `max_iterations` ran.
    pub fn run_until_idle(&mut self, state: &mut S, max_iterations: u64) -> RunReport {
        let t0 = self.core.clock.now_ns();
        let mut rep = RunReport::default();
        while rep.iterations < max_iterations {
            if self.run_once(state).is_none() {
                rep.idle = true;
                break;
            }
            rep.iterations += 1;
        }
        rep.elapsed_ns = self.core.clock.now_ns().saturating_sub(t0);
        rep
    }

    /// Runs iterations until `budget_ns` of clock time has passed (the last
    /// iteration may overshoot by its own length) or nothing is runnable.
    /// Never waits: an idle executor returns at once.
    pub fn run_for(&mut self, state: &mut S, budget_ns: u64) -> RunReport {
        let t0 = self.core.clock.now_ns();
        let mut rep = RunReport::default();
        loop {
            let now = self.core.clock.now_ns();
            if now.saturating_sub(t0) >= budget_ns {
                break;
            }
            if self.run_once(state).is_none() {
                rep.idle = true;
                break;
            }
            rep.iterations += 1;
        }
        rep.elapsed_ns = self.core.clock.now_ns().saturating_sub(t0);
        rep
    }
}

/// The per-owner accounting table ([`Executor::report`]); `Display` prints
/// one row per owner with times in milliseconds and each owner's share of
/// all charged time.
#[derive(Clone, Copy)]
pub struct UsageReport<'a> {
    core: &'a Core,
}

impl fmt::Debug for UsageReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UsageReport").finish_non_exhaustive()
    }
}

impl fmt::Display for UsageReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total: u64 = self.core.owners.iter().map(|o| o.usage.cpu_ns).sum();
        let ms = |ns: u64| ns as f64 / 1e6;
        writeln!(
            f,
            "{:<16} {:>10} {:>11} {:>7} {:>11} {:>11} {:>11} {:>10} {:>10} {:>10}",
            "owner",
            "class",
            "cpu_ms",
            "share",
            "own_ms",
            "to_oth_ms",
            "from_oth_ms",
            "ext_ms",
            "recent_ms",
            "iters"
        )?;
        for o in &self.core.owners {
            let u = &o.usage;
            let class = o.class.to_string();
            let share = if total == 0 {
                0.0
            } else {
                100.0 * u.cpu_ns as f64 / total as f64
            };
            writeln!(
                f,
                "{:<16} {:>10} {:>11.3} {:>6.1}% {:>11.3} {:>11.3} {:>11.3} {:>10.3} {:>10.3} {:>10}",
                o.name,
                class,
                ms(u.cpu_ns),
                share,
                ms(u.task_ns),
                ms(u.charged_to_others_ns),
                ms(u.charged_from_others_ns),
                ms(u.external_ns),
                ms(u.recent_ns),
                u.iterations
            )?;
        }
        Ok(())
    }
}
