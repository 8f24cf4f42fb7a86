//! The host runtime: one core running a [`Stack`] and the applications'
//! tasks on the [`Executor`], with each receive mode's placement of protocol
//! work (LRP §3; the executor docs, "How the receive modes will use it").
//!
//! **Owns:** the executor, the [`HostState`] it lends to every task (the
//! stack, the applications' state `A`, the registry of sockets → owner and
//! task), the "net" owner with its receive task, the "net-idle" owner with
//! its drain task, and one TCP protocol-handler task per application owner.
//!
//! **May not touch:** protocol internals (it calls the stack's public API
//! only), other cores (in `ni-lrp` the NI engine runs elsewhere; the host
//! only looks at channel lengths), the OS: the run loop makes no system
//! call while it has work. When nothing is runnable it polls the NIC again
//! or, with [`HostConfig::sleep`], sleeps (see "Sleeping").
//!
//! # Interrupts inside one event loop
//!
//! Before every executor iteration the host asks the NIC, cheaply
//! ([`Nic::rx_ready`]: one load of the ring's producer index), whether
//! frames wait; if so it wakes the receive task, which belongs to an owner
//! of class `Fixed(0)`, so it runs before anything else: the next
//! scheduling decision is the "interrupt". Preemption is delayed to the end
//! of the current iteration, as everywhere in the executor, so application
//! iterations must be short (one datagram, one request).
//!
//! # Placement per mode
//!
//! | mode | receive task (`net`, `Fixed(0)`, [`Charge::Interrupted`]) | UDP protocol work | TCP input | `net-idle` (`Idle`) task |
//! |---|---|---|---|---|
//! | `eager` | IP queue, IP/UDP checks, demux, TCP input ([`Stack::poll`]) | in the receive task, charged to whoever was interrupted | in the receive task | — |
//! | `early-demux` | demux, then IP/UDP checks and TCP input | in the receive task, charged to the interrupted owner | in the receive task | — |
//! | `soft-lrp` | demux only, charged to the owners of the UDP sockets it fed (the rest as an interrupt); demultiplexing wasted on dropped frames within a CPU budget ([`RxBudget`]) | in the owner's `recv`, at its priority | the owner's protocol handler ([`Stack::tcp_service_tag`]), charged to it | checks queued datagrams nobody is reading ([`UdpSocketRef::prepare`](crate::socket::UdpSocketRef::prepare)), each socket's work charged to its owner ([`Cx::charge_to`]); untagged TCP |
//! | `ni-lrp` ([`HostConfig::ni_lrp`]) | none: the NI engine demultiplexes on another core; a `net` control task serves the ARP/ICMP and fragment channels and the timers when they hold frames (LRP §3.5) | as `soft-lrp` | as `soft-lrp` | — (the channels' producer is the NI core) |
//!
//! # Ownership and wake-ups
//!
//! Applications register their sockets with an owner and the task to wake
//! ([`HostState::register_udp`], [`HostState::register_tcp`],
//! [`HostState::register_listener`]). After each receive-task iteration
//! (or, with no receive task, before every iteration) the host wakes the
//! task of every registered UDP socket whose channel holds datagrams, and
//! the protocol handler of every owner with TCP input on the ready list
//! ([`Stack::tcp_ready_tags`]) or a due timer ([`Stack::tcp_due_timer_tag`]).
//! TCP events ([`Stack::tcp_take_events`]) belong to the host: it turns them
//! into wakes of the registered tasks. An owner's TCP tag is its index + 1;
//! tag 0 (unregistered sockets) is served by the idle task (lazy modes) or
//! the receive task (eager modes).
//!
//! Work bounds: one executor iteration per loop step; the receive task does
//! one [`Stack::poll`]; a handler iteration at most
//! [`HostConfig::tcp_budget`] units; the idle task at most
//! [`HostConfig::prepare_budget`] datagrams per socket. Notification is
//! O(registered UDP sockets + ready TCP channels) and allocation-free
//! (buffers are reserved at start-up).
//!
//! Accounting: [`Host::usage`] gives each owner's [`OwnerUsage`]: `task_ns`
//! (time its tasks really ran) beside `cpu_ns` (what it was charged).
//! Nothing is charged to nobody: the loop's own work around an iteration
//! (the pre-checks, the scheduling decision) is charged to the `net`
//! owner, the system ([`HostReport::overhead_ns`]); steps that found
//! nothing to run are idle time ([`HostReport::idle_ns`]), not anyone's
//! work. (Charged instead to the owner whose iteration it led to, as a
//! kernel charges a context switch, it would make owners with many short
//! iterations, such as RPC servers, pay for the loop as much as for their
//! work, and the best-effort scheduler would favour the others.)
//!
//! # Sleeping
//!
//! With [`HostConfig::sleep`], an idle host blocks until the earliest of:
//! the next periodic release ([`Executor::next_release_ns`]), the next TCP
//! timer, the next tick, the deadline of its run — or a frame, or a wake
//! from another thread. On a NIC with a doorbell (the in-memory wire) it
//! announces the sleep, checks the NIC's ring and pending remote wakes once
//! more, and waits on the doorbell's futex; the peer's send and
//! [`HostWaker::wake`] ring it ([`crate::mem::doorbell`] gives the
//! ordering argument). Other NICs sleep in [`Nic::wait`] (TAP: `ppoll` on
//! its fd and on an eventfd that [`HostWaker::wake`] signals). So
//! an idle host costs the machine nothing, and the leftover CPU goes to
//! other processes.

#[cfg(test)]
mod sleep_tests;
#[cfg(test)]
mod tests;

use std::cell::RefCell;
use std::net::SocketAddrV4;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::demux::{CONTROL, FRAGMENT};
use crate::mem::{Doorbell, RingProbe};
use crate::nic::Nic;
use crate::sched::{
    Charge, Class, Clock, Cx, Executor, OwnerId, OwnerUsage, RemoteWaker, SchedConfig, SchedError,
    Status, Task, TaskId, TaskState, UsageReport,
};
use crate::stack::{ReceiveMode, Stack, TcpEvent, TcpListener, TcpStream, UdpSocket};

/// The receive task is woken at least this often by default
/// ([`HostConfig::tick_ns`]), so the stack's ARP and reassembly timers run
/// even without traffic.
pub const TICK_NS: u64 = 10_000_000;

/// How often a busy `soft-lrp` host looks at the NIC's receive ring (a
/// busy `ni-lrp` host at its sockets' channels) by default
/// ([`HostConfig::rx_check_ns`]): interrupt coalescing. The ring's
/// producer index is a cache line the sending core keeps writing, so every
/// look costs a miss; looking every step cost a busy `soft-lrp` host ~15% of
/// its core between iterations (LRP Table 2's worker lost that share).
/// Frames wait at most this much longer, and are then demultiplexed in a
/// bigger batch. An idle host looks at every step. The eager modes keep
/// looking at every step: they model 4.4BSD's interrupt per frame.
pub const RX_CHECK_NS: u64 = 2_000;

/// How a host places protocol work (see the module table).
#[derive(Clone, Copy, Debug)]
pub struct HostConfig {
    /// Executor limits and policy.
    pub sched: SchedConfig,
    /// Run a receive task (all modes but `ni-lrp`).
    pub receive_task: bool,
    /// Run the idle-priority drain of queued datagrams (`soft-lrp`).
    pub idle_drain: bool,
    /// TCP work units per protocol-handler iteration.
    pub tcp_budget: usize,
    /// Datagrams per socket the idle drain checks per iteration.
    pub prepare_budget: usize,
    /// A CPU budget for the receive task (`None`: unbounded, as 4.4BSD's
    /// interrupts). See [`RxBudget`].
    pub rx_budget: Option<RxBudget>,
    /// Sleep when idle instead of polling (see "Sleeping"; not with
    /// `ni-lrp`, whose NIC belongs to the NI core). Off by default: the
    /// overload experiments measure a busy-polling core.
    pub sleep: bool,
    /// With `sleep`: how long an idle host keeps polling before it sleeps
    /// (see [`crate::nic::wirepair::SPIN_BEFORE_SLEEP_NS`] for the choice).
    pub spin_ns: u64,
    /// How often the receive task runs without traffic ([`TICK_NS`]).
    pub tick_ns: u64,
    /// How often a busy host looks at the receive ring, or in `ni-lrp` at
    /// the channels ([`RX_CHECK_NS`]; 0: at every step).
    pub rx_check_ns: u64,
}

/// The bounded budget of `soft-lrp`'s demultiplexing (docs/DESIGN.md,
/// "Receive modes": in the receive loop, at top priority, with a cap on
/// wasted work; as the RTU reactive class, rate-limited by a token bucket
/// so that it cannot take the core). A token bucket of CPU time: it fills at `share`
/// of the clock (ppm) up to `burst_ns`. While the bucket is empty the
/// receive task is not woken: frames wait on the NIC's ring and, if it
/// overflows, are dropped there — at the NIC, before the host spent
/// anything on them. An idle core does not need the budget: when nothing
/// else is runnable the receive task runs anyway.
///
/// What it limits is **wasted** demultiplexing: each receive-task
/// iteration spends from the bucket only the share of its time that went
/// to frames the classifier then dropped (a full channel above all — the
/// symptom of overload, as in Mogul and Ramakrishnan's livelock feedback),
/// `spent × dropped / frames`. Demultiplexing that put a frame on a
/// channel is work its owner asked for (a busy server of cheap requests
/// needs a lot of it) and is not limited. So whatever the offered load,
/// the host wastes at most `share` of the core on frames nobody will take
/// (soft LRP no longer only postpones livelock, LRP §4.2), and one
/// default serves every workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxBudget {
    /// Share of the core, parts per million.
    pub share_ppm: u32,
    /// Largest saving, ns.
    pub burst_ns: u64,
}

impl RxBudget {
    /// The default of `soft-lrp`: 10% of the core, 200 µs of burst. The
    /// trade-off: owners keep at least 90% of the core under any load (the
    /// livelock goal, ≥ 85% of peak), while beyond 10% of the core's worth
    /// of *dropped* frames (about 0.6 Mpps for frames written by another
    /// core, ~170 ns each to demultiplex) frames queue on the NIC ring, and
    /// so do other sockets' frames behind them (latency under a blast, the
    /// legitimate connections of a SYN flood). `ni-lrp` has neither cost.
    pub const SOFT_LRP: RxBudget = RxBudget {
        share_ppm: 100_000,
        burst_ns: 200_000,
    };
}

impl HostConfig {
    /// The placement of `mode` (see the module table).
    pub fn for_mode(mode: ReceiveMode) -> Self {
        if mode == ReceiveMode::NiLrp {
            return Self::ni_lrp();
        }
        HostConfig {
            sched: SchedConfig::default(),
            receive_task: true,
            idle_drain: !mode.eager_protocol(),
            tcp_budget: 64,
            prepare_budget: 32,
            rx_budget: (mode == ReceiveMode::SoftLrp).then_some(RxBudget::SOFT_LRP),
            sleep: false,
            spin_ns: crate::nic::wirepair::SPIN_BEFORE_SLEEP_NS,
            tick_ns: TICK_NS,
            // The eager modes model 4.4BSD, an interrupt per frame.
            rx_check_ns: if mode == ReceiveMode::SoftLrp {
                RX_CHECK_NS
            } else {
                0
            },
        }
    }

    /// The same placement, sleeping when idle.
    pub fn sleeping(self) -> Self {
        HostConfig {
            sleep: true,
            ..self
        }
    }

    /// `ni-lrp`: no receive task (the NI engine receives and demultiplexes
    /// on another core); owners are woken by checking their channels.
    pub fn ni_lrp() -> Self {
        HostConfig {
            receive_task: false,
            idle_drain: false,
            ..Self::for_mode(ReceiveMode::SoftLrp)
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct UdpReg {
    h: UdpSocket,
    owner: OwnerId,
    task: TaskId,
}

/// Sockets → owners and tasks.
#[derive(Debug, Default)]
struct Registry {
    udp: Vec<UdpReg>,
    /// Queued datagrams of each `udp` entry before a receive iteration
    /// (reused; for charging demultiplexing to the receivers).
    pending_before: Vec<usize>,
    /// Frames the last receive iteration classified, and of those dropped
    /// (soft-lrp's budget counts the dropped share of its time).
    rx_classified: u64,
    rx_dropped: u64,
    tcp: FxHashMap<TcpStream, TaskId>,
    listeners: FxHashMap<TcpListener, TaskId>,
    /// Protocol-handler task per owner index (`None` for the host's own).
    handlers: Vec<Option<TaskId>>,
    /// Reused buffer for TCP events.
    events: Vec<TcpEvent>,
    /// The idle drain task, if any.
    idle: Option<TaskId>,
    /// The receive task, if any.
    rx: Option<TaskId>,
    /// Without a receive task (`ni-lrp`): the task that serves the control
    /// and fragment channels and the stack's timers ([`Stack::poll`]; LRP
    /// §3.5's proxy daemons), owned by `net`.
    control: Option<TaskId>,
    eager: bool,
    /// `ni-lrp`: probes of the registered UDP sockets' inbound rings, which
    /// the control task's interrupt line looks at (shared with it).
    ni_udp: Rc<RefCell<Vec<(UdpSocket, RingProbe)>>>,
}

/// What every task of a host gets: the stack, the applications' state, and
/// the socket registry.
pub struct HostState<N: Nic, A> {
    /// The stack (socket calls do their lazy work in the caller's task).
    pub stack: Stack<N>,
    /// The applications' state.
    pub app: A,
    reg: Registry,
}

impl<N: Nic, A> std::fmt::Debug for HostState<N, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostState")
            .field("udp_sockets", &self.reg.udp.len())
            .field("tcp", &self.reg.tcp.len())
            .finish_non_exhaustive()
    }
}

impl<N: Nic, A> HostState<N, A> {
    /// Registers a UDP socket: `task` is woken when datagrams wait, and
    /// protocol work done for it outside its owner's tasks is charged to
    /// `owner`.
    pub fn register_udp(&mut self, h: UdpSocket, owner: OwnerId, task: TaskId) {
        self.reg.udp.retain(|r| r.h != h);
        self.reg.udp.push(UdpReg { h, owner, task });
        if let Some(p) = self.stack.udp_rx_probe(h) {
            let mut v = self.reg.ni_udp.borrow_mut();
            v.retain(|(x, _)| *x != h);
            v.push((h, p));
        }
    }

    /// Registers a TCP connection: its input runs in `owner`'s protocol
    /// handler, and `task` is woken on its events (data, room, close).
    pub fn register_tcp(&mut self, h: TcpStream, owner: OwnerId, task: TaskId) {
        let _ = self.stack.tcp_mut(h).set_tag(tag_of(owner));
        self.reg.tcp.insert(h, task);
    }

    /// Registers a listener: its SYNs run in `owner`'s protocol handler
    /// (accepted connections inherit the owner; register them with
    /// [`HostState::register_tcp`] to name their task), and `task` is woken
    /// when connections wait to be accepted.
    pub fn register_listener(&mut self, h: TcpListener, owner: OwnerId, task: TaskId) {
        let _ = self.stack.listener_mut(h).set_tag(tag_of(owner));
        self.reg.listeners.insert(h, task);
    }

    /// The running task's owner's TCP work: expired timers and received
    /// segments of its connections and listeners, at most `budget` units;
    /// wakes the tasks registered for the resulting events. Returns the
    /// units done. For TCP protocol handlers
    /// ([`Host::add_owner_with_handler`]).
    pub fn serve_tcp(&mut self, cx: &mut Cx<'_>, budget: usize) -> usize {
        let now = self.stack.now();
        let n = self.stack.tcp_service_tag(now, tag_of(cx.owner()), budget);
        self.dispatch_tcp_events(&mut |t| cx.wake(t));
        n
    }

    /// The running task's owner's UDP input on socket `h`: one datagram per
    /// iteration, its IP and UDP checks done here, in the receiver's task
    /// (LRP), and its payload handed in place to `f` with the application's
    /// state (RTU §VI: the input handler delivers to the application), until
    /// the socket is empty, `budget` datagrams are done or
    /// [`Cx::iteration_done`] says to stop (a more urgent owner, the batch
    /// spent). Returns the datagrams handled.
    pub fn serve_udp(
        &mut self,
        cx: &mut Cx<'_>,
        h: UdpSocket,
        budget: usize,
        mut f: impl FnMut(&mut A, &[u8], SocketAddrV4),
    ) -> usize {
        let mut n = 0;
        while n < budget {
            let app = &mut self.app;
            if self
                .stack
                .udp_mut(h)
                .recv_with(|p, from| f(app, p, from))
                .is_err()
            {
                break;
            }
            n += 1;
            if !cx.iteration_done() {
                break;
            }
        }
        n
    }

    /// Forgets a UDP socket (call before closing it).
    pub fn unregister_udp(&mut self, h: UdpSocket) {
        self.reg.udp.retain(|r| r.h != h);
        self.reg.ni_udp.borrow_mut().retain(|(x, _)| *x != h);
    }

    /// Forgets a TCP connection.
    pub fn unregister_tcp(&mut self, h: TcpStream) {
        self.reg.tcp.remove(&h);
    }

    /// Forgets a listener.
    pub fn unregister_listener(&mut self, h: TcpListener) {
        self.reg.listeners.remove(&h);
    }

    /// Wakes the tasks whose sockets have input, through `wake`: registered
    /// UDP sockets with queued datagrams (and the idle drain), and the
    /// protocol handlers of owners with ready TCP channels. Returns true if
    /// any UDP datagram waits.
    fn notify(&mut self, wake: &mut impl FnMut(TaskId)) -> bool {
        let mut any = false;
        for r in &self.reg.udp {
            if self.stack.udp(r.h).pending().unwrap_or(0) > 0 {
                wake(r.task);
                any = true;
            }
        }
        if any {
            if let Some(t) = self.reg.idle {
                wake(t);
            }
        }
        self.notify_tcp(wake);
        any
    }

    /// The TCP half of [`HostState::notify`]: wakes the protocol handlers
    /// of owners with ready TCP channels (lazy modes).
    fn notify_tcp(&mut self, wake: &mut impl FnMut(TaskId)) {
        if !self.reg.eager {
            let mask = self.stack.tcp_ready_tags();
            if mask != 0 {
                self.wake_tags(mask, wake);
            }
        }
    }

    /// `ni-lrp`: wakes the tasks whose channels the NI core filled — the
    /// registered UDP sockets with datagrams (skipping tasks `queued` says
    /// run anyway: a channel's length is a line the NI core keeps writing)
    /// and the handlers of owners with TCP channels on the ready ring.
    fn wake_ni_channels(&mut self, w: &mut impl Wakes) {
        let mut any = false;
        for r in &self.reg.udp {
            if w.is_queued(r.task) {
                continue;
            }
            if self.stack.udp(r.h).pending().unwrap_or(0) > 0 {
                w.wake_task(r.task);
                any = true;
            }
        }
        if let (true, Some(t)) = (any, self.reg.idle) {
            w.wake_task(t);
        }
        let mask = self.stack.tcp_ready_tags();
        if mask != 0 {
            self.wake_tags(mask, &mut |t| w.wake_task(t));
        }
    }

    /// Wakes the handlers of the tags in `mask` (bit 0: untagged → the idle
    /// task in lazy modes).
    fn wake_tags(&self, mask: u64, wake: &mut impl FnMut(TaskId)) {
        if mask & 1 != 0 {
            if let Some(t) = self.reg.idle.or(self.reg.rx) {
                wake(t);
            }
        }
        for (i, h) in self.reg.handlers.iter().enumerate() {
            let bit = (i + 1).min(63);
            if mask & (1 << bit) != 0 {
                if let Some(t) = *h {
                    wake(t);
                }
            }
        }
    }

    /// Turns the stack's TCP events into wakes of the registered tasks.
    fn dispatch_tcp_events(&mut self, wake: &mut impl FnMut(TaskId)) {
        let mut ev = std::mem::take(&mut self.reg.events);
        self.stack.tcp_take_events(&mut ev);
        for e in ev.drain(..) {
            let t = match e {
                TcpEvent::Conn(h) => self.reg.tcp.get(&h),
                TcpEvent::Listener(h) => self.reg.listeners.get(&h),
            };
            if let Some(&t) = t {
                wake(t);
            }
        }
        self.reg.events = ev;
    }
}

/// Who wakes tasks: the executor between runs, an iteration's `Cx` inside
/// one.
trait Wakes {
    /// Whether `t` is queued already (then its channels need no look).
    fn is_queued(&self, t: TaskId) -> bool;
    fn wake_task(&mut self, t: TaskId);
}

impl<S> Wakes for Executor<S> {
    fn is_queued(&self, t: TaskId) -> bool {
        self.task_state(t) == Some(TaskState::Queued)
    }
    fn wake_task(&mut self, t: TaskId) {
        self.wake(t);
    }
}

impl Wakes for Cx<'_> {
    fn is_queued(&self, _t: TaskId) -> bool {
        false
    }
    fn wake_task(&mut self, t: TaskId) {
        self.wake(t);
    }
}

/// An owner's TCP tag: its index + 1 (0 means untagged).
fn tag_of(owner: OwnerId) -> u16 {
    (owner.index() + 1).min(usize::from(u16::MAX)) as u16
}

/// What a run of the host loop did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostReport {
    /// Executor iterations run.
    pub iterations: u64,
    /// Loop steps that found nothing runnable (the core polled the NIC).
    pub idle_steps: u64,
    /// Times the receive task was woken by pending frames ("interrupts").
    pub interrupts: u64,
    /// The loop's own time around iterations, charged to the `net` owner.
    pub overhead_ns: u64,
    /// Time in steps that found nothing to run, sleeping included.
    pub idle_ns: u64,
    /// Times the host slept ([`HostConfig::sleep`]).
    pub sleeps: u64,
    /// Time it slept.
    pub slept_ns: u64,
}

/// Wakes a task of a host from another thread, and the host itself if it
/// sleeps ([`Host::waker`]). `Send + Sync`, cheap to clone.
#[derive(Clone, Debug)]
pub struct HostWaker {
    tasks: RemoteWaker,
    bell: Option<Doorbell>,
    fd: Option<std::sync::Arc<crate::sys::EventFd>>,
}

impl HostWaker {
    /// Marks `task` runnable and wakes the host if it sleeps: on a doorbell
    /// (a system call only when it really sleeps), or in `poll(2)` on a
    /// device such as TAP (its eventfd: one system call per wake).
    pub fn wake(&self, task: TaskId) {
        self.tasks.wake(task);
        if let Some(b) = &self.bell {
            b.wake();
        }
        if let Some(f) = &self.fd {
            f.signal();
        }
    }
}

/// One core: a stack, its owners and tasks, and the loop that runs them.
pub struct Host<N: Nic, A> {
    exec: Executor<HostState<N, A>>,
    st: HostState<N, A>,
    cfg: HostConfig,
    net: OwnerId,
    idle_owner: Option<OwnerId>,
    next_tick: u64,
    /// When a busy host next looks at the receive ring; whether the last
    /// step ran nothing (then it looks at once).
    next_rx_check: u64,
    idle_last: bool,
    /// Receive budget: tokens (ns, may go negative after an iteration)
    /// and when they were last refilled.
    rx_tokens: i64,
    rx_refilled: u64,
    /// Whether the receive task's interrupt line may wake it (the receive
    /// budget has tokens), read by the line at iteration boundaries.
    rx_allowed: Arc<AtomicBool>,
    stats: HostReport,
}

impl<N: Nic, A> std::fmt::Debug for Host<N, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("exec", &self.exec)
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

impl<N: Nic + 'static, A: 'static> Host<N, A> {
    /// A host running `stack` with application state `app`; `clock`
    /// measures CPU time ([`crate::sched::TscClock`] in production) and the
    /// deadlines of [`Host::run_for`]. Creates the `net` owner (`Fixed(0)`)
    /// with its receive task and, if configured, the `net-idle` owner.
    pub fn new(
        stack: Stack<N>,
        app: A,
        clock: impl Clock + 'static,
        cfg: HostConfig,
    ) -> Result<Self, SchedError> {
        let eager = stack.mode().eager_protocol();
        let mut exec = Executor::new(clock, cfg.sched);
        let net = exec.add_owner("net", Class::Fixed(0))?;
        let mut reg = Registry {
            eager,
            events: Vec::with_capacity(1024),
            ..Registry::default()
        };
        reg.handlers.push(None);
        let rx_allowed = Arc::new(AtomicBool::new(true));
        if cfg.receive_task {
            // An interrupt in every mode: charged to whoever it interrupted
            // (LRP §2.1); in soft-lrp it only demultiplexes, so it is small.
            let rx = exec.spawn_with(net, Charge::Interrupted, receive_task::<N, A>)?;
            reg.rx = Some(rx);
            // A frame arriving while another owner's handler runs wakes
            // the receive task at that handler's next iteration boundary
            // (within the receive budget), not at the end of its run.
            if let Some(probe) = stack.nic().rx_probe() {
                let allowed = rx_allowed.clone();
                exec.add_line(rx, move || allowed.load(Ordering::Relaxed) && probe())?;
            }
        } else {
            // ni-lrp: the NI queues ARP, ICMP and fragments on their
            // channels; the host serves them (and the timers) in a task of
            // its own, woken when they hold frames and on the tick; it also
            // wakes the owners whose channels the NI filled, when its
            // interrupt line (the ready ring, the UDP sockets' rings) saw
            // them fill during another owner's run.
            let control = exec.spawn(net, |cx: &mut Cx<'_>, st: &mut HostState<N, A>| {
                let now = st.stack.now();
                st.stack.poll(now);
                st.wake_ni_channels(cx);
                Status::Wait
            })?;
            reg.control = Some(control);
            let ready = stack.ni_ready_probe();
            let udp = reg.ni_udp.clone();
            exec.add_line(control, move || {
                ready.as_ref().is_some_and(RingProbe::nonempty)
                    || udp.borrow().iter().any(|(_, p)| p.nonempty())
            })?;
        }
        let mut idle_owner = None;
        if cfg.idle_drain {
            let o = exec.add_owner("net-idle", Class::Idle)?;
            reg.handlers.push(None);
            let budget = cfg.prepare_budget.max(1);
            let tcp_budget = cfg.tcp_budget.max(1);
            reg.idle = Some(
                exec.spawn(o, move |cx: &mut Cx<'_>, st: &mut HostState<N, A>| {
                    idle_drain(cx, st, budget, tcp_budget)
                })?,
            );
            idle_owner = Some(o);
        }
        Ok(Host {
            exec,
            st: HostState { stack, app, reg },
            cfg,
            net,
            idle_owner,
            next_tick: 0,
            next_rx_check: 0,
            idle_last: true,
            rx_tokens: cfg.rx_budget.map_or(0, |b| b.burst_ns as i64),
            rx_refilled: 0,
            rx_allowed,
            stats: HostReport::default(),
        })
    }

    /// Adds an application owner and its TCP protocol handler (a task of
    /// that owner, run at its priority and charged to it, woken when one of
    /// its connections or listeners has input or a due timer). A real-time
    /// owner's handler marks one iteration per unit of TCP work (a segment
    /// in, a timer), so its batch counts segments and a more urgent owner
    /// preempts it between two.
    pub fn add_owner(&mut self, name: &str, class: Class) -> Result<OwnerId, SchedError> {
        let budget = self.cfg.tcp_budget.max(1);
        if class.is_real_time() {
            return self
                .add_owner_with_handler(
                    name,
                    class,
                    move |cx: &mut Cx<'_>, st: &mut HostState<N, A>| {
                        for _ in 0..budget {
                            if st.serve_tcp(cx, 1) == 0 {
                                return Status::Wait;
                            }
                            if !cx.iteration_done() {
                                break;
                            }
                        }
                        Status::Ready
                    },
                )
                .map(|(o, _)| o);
        }
        self.add_owner_with_handler(
            name,
            class,
            move |cx: &mut Cx<'_>, st: &mut HostState<N, A>| {
                if st.serve_tcp(cx, budget) >= budget {
                    Status::Ready
                } else {
                    Status::Wait
                }
            },
        )
        .map(|(o, _)| o)
    }

    /// Adds an application owner whose TCP protocol handler is `handler`:
    /// woken when one of the owner's connections or listeners has input or
    /// a due timer (and, for a periodic owner, at every release). The
    /// handler does the owner's TCP work with [`HostState::serve_tcp`] and
    /// may call the application's function right there, one message per
    /// iteration (RTU §VI: the input handler delivers to the application,
    /// so a full receive window cannot stall a guaranteed stream).
    pub fn add_owner_with_handler(
        &mut self,
        name: &str,
        class: Class,
        handler: impl Task<HostState<N, A>> + 'static,
    ) -> Result<(OwnerId, TaskId), SchedError> {
        let o = self.exec.add_owner(name, class)?;
        let h = self.exec.spawn(o, handler)?;
        let reg = &mut self.st.reg;
        if reg.handlers.len() <= o.index() {
            reg.handlers.resize(o.index() + 1, None);
        }
        reg.handlers[o.index()] = Some(h);
        Ok((o, h))
    }

    /// Spawns an application task of `owner` (runnable at once).
    pub fn spawn(
        &mut self,
        owner: OwnerId,
        task: impl Task<HostState<N, A>> + 'static,
    ) -> Result<TaskId, SchedError> {
        self.exec.spawn(owner, task)
    }

    /// Makes a task runnable.
    pub fn wake(&mut self, task: TaskId) {
        self.exec.wake(task);
    }

    /// The state lent to tasks (stack, application state, registry).
    pub fn state(&self) -> &HostState<N, A> {
        &self.st
    }

    /// The state, mutably (set-up: bind sockets, register them).
    pub fn state_mut(&mut self) -> &mut HostState<N, A> {
        &mut self.st
    }

    /// The stack.
    pub fn stack(&self) -> &Stack<N> {
        &self.st.stack
    }

    /// The applications' state.
    pub fn app(&self) -> &A {
        &self.st.app
    }

    /// The applications' state, mutably.
    pub fn app_mut(&mut self) -> &mut A {
        &mut self.st.app
    }

    /// The executor (accounting, owners).
    pub fn executor(&self) -> &Executor<HostState<N, A>> {
        &self.exec
    }

    /// The `net` owner (receive task).
    pub fn net_owner(&self) -> OwnerId {
        self.net
    }

    /// The `net-idle` owner, if the idle drain runs.
    pub fn idle_owner(&self) -> Option<OwnerId> {
        self.idle_owner
    }

    /// The receive task, if any.
    pub fn receive_task(&self) -> Option<TaskId> {
        self.st.reg.rx
    }

    /// One owner's accounting: `task_ns` is what its tasks really ran,
    /// `cpu_ns` what it was charged.
    pub fn usage(&self, owner: OwnerId) -> OwnerUsage {
        self.exec.usage(owner)
    }

    /// The accounting table of every owner.
    pub fn report(&self) -> UsageReport<'_> {
        self.exec.report()
    }

    /// Forgets all accounting (after a warm-up).
    pub fn reset_usage(&mut self) {
        self.exec.reset_usage();
    }

    /// Counters of the host loop since creation.
    pub fn stats(&self) -> HostReport {
        self.stats
    }

    /// The executor's clock.
    pub fn now_ns(&self) -> u64 {
        self.exec.now_ns()
    }

    /// Gives the stack and application state back.
    pub fn into_parts(self) -> (Stack<N>, A) {
        (self.st.stack, self.st.app)
    }

    /// Wakes what the core's "interrupt lines" and timers call for, before
    /// a scheduling decision: cheap checks only.
    fn pre_step(&mut self, now: u64) {
        let exec = &mut self.exec;
        let st = &mut self.st;
        // Whether to look at the ring (or the channels) in this step:
        // coalesced while busy (see [`RX_CHECK_NS`]).
        let look = self.idle_last || now >= self.next_rx_check;
        if look {
            self.next_rx_check = now + self.cfg.rx_check_ns;
        }
        match st.reg.rx {
            Some(rx) => {
                let allowed = match self.cfg.rx_budget {
                    None => true,
                    Some(b) => {
                        let dt = now.saturating_sub(self.rx_refilled);
                        self.rx_refilled = now;
                        let add = (u128::from(dt) * u128::from(b.share_ppm) / 1_000_000) as i64;
                        self.rx_tokens = self.rx_tokens.saturating_add(add).min(b.burst_ns as i64);
                        self.rx_tokens > 0
                    }
                };
                self.rx_allowed.store(allowed, Ordering::Relaxed);
                // (A queued receive task runs next anyway: no need to
                // touch the ring's index, a line the sender keeps writing.)
                if look
                    && allowed
                    && exec.task_state(rx) != Some(TaskState::Queued)
                    && st.stack.nic_mut().rx_ready()
                {
                    exec.wake(rx);
                    self.stats.interrupts += 1;
                }
                if now >= self.next_tick {
                    self.next_tick = now + self.cfg.tick_ns.max(1);
                    exec.wake(rx);
                }
            }
            // ni-lrp: the NI core filled the channels; look at them — but
            // not at those whose task is queued anyway: a channel's length
            // is a cache line the NI core keeps writing, and a busy owner
            // would pay a miss per step for nothing.
            None => {
                if look {
                    if let Some(c) = st.reg.control {
                        let d = st.stack.demux();
                        if now >= self.next_tick {
                            self.next_tick = now + self.cfg.tick_ns.max(1);
                            exec.wake(c);
                        } else if d.queued(CONTROL) > 0 || d.queued(FRAGMENT) > 0 {
                            exec.wake(c);
                        }
                    }
                    st.wake_ni_channels(exec);
                }
            }
        }
        let now = st.stack.now();
        if let Some(tag) = st.stack.tcp_due_timer_tag(now) {
            if st.reg.eager {
                if let Some(rx) = st.reg.rx {
                    exec.wake(rx);
                }
            } else {
                let mask = 1u64 << tag.min(63);
                st.wake_tags(mask, &mut |t| exec.wake(t));
            }
        }
    }

    /// One step of the loop: the pre-checks, then at most one executor
    /// iteration. Returns the task that ran, `None` if the core was idle.
    pub fn step(&mut self) -> Option<TaskId> {
        let t0 = self.exec.now_ns();
        self.step_at(t0).0
    }

    /// [`Host::step`] begun at `t0` (the end of the previous step, so that
    /// consecutive steps leave no time unaccounted between them); returns
    /// what ran and when the step ended.
    fn step_at(&mut self, t0: u64) -> (Option<TaskId>, u64) {
        let ran = self.step_inner(t0);
        // The end of the run (the executor's last read), or now when
        // nothing ran: the pre-checks' time is then idle time.
        let t1 = match ran {
            Some(_) => self.exec.last_now_ns(),
            None => self.exec.now_ns(),
        };
        let spent = t1.saturating_sub(t0);
        match (ran, self.exec.last_run()) {
            (Some(_), Some((_, ns))) => {
                let overhead = spent.saturating_sub(ns);
                self.exec.charge_external(self.net, overhead);
                self.stats.overhead_ns += overhead;
            }
            _ => self.stats.idle_ns += spent,
        }
        (ran, t1)
    }

    fn step_inner(&mut self, now: u64) -> Option<TaskId> {
        self.pre_step(now);
        let before = self.exec.usage(self.net).task_ns;
        let mut ran = self.exec.run_once(&mut self.st);
        if ran.is_none() && self.cfg.rx_budget.is_some() {
            // Idle core: the budget protects owners, and there are none
            // waiting; receive now if frames wait.
            if let Some(rx) = self.st.reg.rx {
                if self.st.stack.nic_mut().rx_ready() {
                    self.exec.wake(rx);
                    ran = self.exec.run_once(&mut self.st);
                }
            }
        }
        if ran.is_some() && ran == self.st.reg.rx {
            let spent = self.exec.usage(self.net).task_ns.saturating_sub(before);
            let frames = self.st.reg.rx_classified;
            let dropped = self.st.reg.rx_dropped.min(frames);
            // Only the wasted share counts (see `RxBudget`); an iteration
            // that classified nothing (timers, control) counts in full.
            let waste = if frames == 0 {
                spent
            } else {
                (u128::from(spent) * u128::from(dropped) / u128::from(frames)) as u64
            };
            self.rx_tokens = self.rx_tokens.saturating_sub(waste as i64);
        }
        match ran {
            Some(_) => self.stats.iterations += 1,
            None => self.stats.idle_steps += 1,
        }
        self.idle_last = ran.is_none();
        ran
    }

    /// Runs steps until nothing is runnable (after the pre-checks) or
    /// `max_steps` ran.
    pub fn run_until_idle(&mut self, max_steps: u64) -> HostReport {
        let before = self.stats;
        for _ in 0..max_steps {
            if self.step().is_none() {
                break;
            }
        }
        self.since(before)
    }

    /// Runs the loop until the executor's clock reaches `deadline_ns`, or
    /// `max_steps` steps ran (a bound for clocks that do not move by
    /// themselves). An idle core polls the NIC again or, with
    /// [`HostConfig::sleep`], sleeps until its next event.
    pub fn run_until(&mut self, deadline_ns: u64, max_steps: u64) -> HostReport {
        let before = self.stats;
        let mut now = self.exec.now_ns();
        for _ in 0..max_steps {
            if now >= deadline_ns {
                break;
            }
            let (ran, t1) = self.step_at(now);
            now = t1;
            if ran.is_none() && self.cfg.sleep {
                now = self.sleep(now, deadline_ns);
            }
        }
        self.since(before)
    }

    /// A handle that wakes this host's tasks from other threads, and the
    /// host if it sleeps.
    pub fn waker(&self) -> HostWaker {
        HostWaker {
            tasks: self.exec.remote_waker(),
            bell: self.st.stack.nic().doorbell(),
            fd: self.st.stack.nic().remote_waker(),
        }
    }

    /// Sleeps from `now` until the next event the host knows of, at most
    /// until `deadline_ns` (see "Sleeping"); returns at once if work is
    /// pending. Returns the time it woke.
    fn sleep(&mut self, now: u64, deadline_ns: u64) -> u64 {
        if self.st.reg.rx.is_none() {
            return now; // ni-lrp: the NIC is the NI core's
        }
        let mut until = deadline_ns.min(self.next_tick);
        if let Some(r) = self.exec.next_release_ns() {
            until = until.min(r);
        }
        let mut timeout = until.saturating_sub(now);
        let snow = self.st.stack.now();
        if let Some(t) = self.st.stack.tcp_next_timeout() {
            timeout = timeout.min(t.saturating_sub(snow));
        }
        if timeout == 0 || self.exec.has_runnable() {
            return now;
        }
        let exec = &self.exec;
        let nic = self.st.stack.nic_mut();
        // Poll a little first: a partner that answers within the cost of a
        // sleep and a wake-up is never slept on.
        let spin = self.cfg.spin_ns.min(timeout);
        loop {
            if nic.rx_ready() || exec.has_runnable() {
                let t = exec.now_ns();
                self.stats.idle_ns += t.saturating_sub(now);
                return t;
            }
            let t = exec.now_ns();
            if t.saturating_sub(now) >= spin {
                break;
            }
            std::hint::spin_loop();
        }
        let spun_until = exec.now_ns();
        timeout = timeout.saturating_sub(spin);
        if timeout == 0 {
            self.stats.idle_ns += spun_until.saturating_sub(now);
            return spun_until;
        }
        match nic.doorbell() {
            Some(bell) => {
                bell.arm();
                bell.sleep(Some(timeout), || !nic.rx_ready() && !exec.has_runnable());
            }
            None => nic.wait(Some(timeout)),
        }
        let woke = self.exec.now_ns();
        self.stats.sleeps += 1;
        self.stats.slept_ns += woke.saturating_sub(spun_until);
        self.stats.idle_ns += woke.saturating_sub(now);
        woke
    }

    /// [`Host::run_until`] `budget_ns` from now, with no step bound but time.
    pub fn run_for(&mut self, budget_ns: u64) -> HostReport {
        let deadline = self.exec.now_ns().saturating_add(budget_ns);
        self.run_until(deadline, u64::MAX)
    }

    fn since(&self, b: HostReport) -> HostReport {
        let s = self.stats;
        HostReport {
            iterations: s.iterations - b.iterations,
            idle_steps: s.idle_steps - b.idle_steps,
            interrupts: s.interrupts - b.interrupts,
            overhead_ns: s.overhead_ns - b.overhead_ns,
            idle_ns: s.idle_ns - b.idle_ns,
            sleeps: s.sleeps - b.sleeps,
            slept_ns: s.slept_ns - b.slept_ns,
        }
    }
}

/// How late a sleeping host wakes on `nic`: the longest overshoot of
/// `samples` sleeps of `sleep_ns` each, slept as [`Host`] sleeps (on the
/// NIC's doorbell, or in [`Nic::wait`]). A periodic owner's release is seen
/// up to this late, which admission must assume
/// ([`SchedConfig::release_jitter_ns`]): measured on the machine that runs,
/// not guessed. A sleep that a frame ends early is not counted, and while a
/// frame waits no sleep is taken (the frame is left where it is): `None`
/// if no sample could be taken (a kernel peer's neighbour discovery reaches
/// a TAP device before anything else), which the caller must not read as
/// "on time". Blocks for about `samples × sleep_ns`.
pub fn wakeup_overshoot<N: Nic>(nic: &mut N, samples: u32, sleep_ns: u64) -> Option<u64> {
    let clock = crate::sched::clock::mono_ns;
    let mut worst = None;
    for _ in 0..samples {
        if nic.rx_ready() {
            continue;
        }
        let t0 = clock();
        match nic.doorbell() {
            Some(bell) => {
                bell.arm();
                bell.sleep(Some(sleep_ns), || !nic.rx_ready());
            }
            None => nic.wait(Some(sleep_ns)),
        }
        let slept = clock().saturating_sub(t0);
        if slept >= sleep_ns {
            worst = Some(worst.unwrap_or(0).max(slept - sleep_ns));
        }
    }
    worst
}

/// Frames the host's classifier has seen, and dropped, so far.
#[inline]
fn demux_counts<N: Nic>(stack: &Stack<N>) -> (u64, u64) {
    let s = stack.demux().stats();
    (s.frames, s.dropped())
}

/// The receive task: one bounded [`Stack::poll`] (which does all protocol
/// work in the eager modes and only demultiplexing in soft-lrp), then the
/// wakes of the owners whose sockets got input — the interrupt handler
/// waking processes. Always waits: the host wakes it again while the NIC
/// has frames.
fn receive_task<N: Nic, A>(cx: &mut Cx<'_>, st: &mut HostState<N, A>) -> Status {
    let now = st.stack.now();
    if st.reg.eager {
        st.stack.poll(now);
        let mut wake = |t| cx.wake(t);
        st.notify(&mut wake);
        st.dispatch_tcp_events(&mut wake);
    } else {
        demux_charged_to_receivers(cx, st, now);
        st.notify_tcp(&mut |t| cx.wake(t));
    }
    Status::Wait
}

/// soft-lrp's receive iteration: [`Stack::poll`] (demultiplexing only),
/// with the time it took charged to the owners of the UDP sockets whose
/// channels it fed, in proportion to their frames — LRP charges protocol
/// work to the receiver; here even the demultiplexing is, once it is
/// known whose frames they were. The rest (frames dropped, TCP, control)
/// stays with the interrupted owner, as LRP's interrupt does. Costs two
/// looks at each registered socket's queue length per iteration, not per
/// frame.
fn demux_charged_to_receivers<N: Nic, A>(cx: &mut Cx<'_>, st: &mut HostState<N, A>, now: u64) {
    let reg = &mut st.reg;
    reg.pending_before.clear();
    for r in &reg.udp {
        reg.pending_before
            .push(st.stack.udp(r.h).pending().unwrap_or(0));
    }
    let (frames0, dropped0) = demux_counts(&st.stack);
    let t0 = cx.now_ns();
    st.stack.poll(now);
    let spent = cx.now_ns().saturating_sub(t0);
    let (frames1, dropped1) = demux_counts(&st.stack);
    let frames = frames1 - frames0;
    reg.rx_classified = frames;
    reg.rx_dropped = dropped1 - dropped0;
    // One look at each socket's queue after the poll: it both charges the
    // demultiplexing and wakes the socket's task (the interrupt handler
    // waking processes).
    let mut any = false;
    for (r, &before) in reg.udp.iter().zip(&reg.pending_before) {
        let pending = st.stack.udp(r.h).pending().unwrap_or(0);
        if pending == 0 {
            continue;
        }
        cx.wake(r.task);
        any = true;
        let fed = pending.saturating_sub(before) as u64;
        if fed > 0 && frames > 0 {
            let ns = (u128::from(spent) * u128::from(fed.min(frames)) / u128::from(frames)) as u64;
            cx.charge_measured(r.owner, ns);
        }
    }
    if let (true, Some(t)) = (any, reg.idle) {
        cx.wake(t);
    }
}

/// The idle drain (soft-lrp, LRP §3.3): checks datagrams queued for sockets
/// nobody is reading right now, each socket's work charged to its owner,
/// and serves untagged TCP sockets. Waits when it found nothing new.
fn idle_drain<N: Nic, A>(
    cx: &mut Cx<'_>,
    st: &mut HostState<N, A>,
    budget: usize,
    tcp_budget: usize,
) -> Status {
    let mut done = 0;
    for i in 0..st.reg.udp.len() {
        let r = st.reg.udp[i];
        if st.stack.udp(r.h).pending().unwrap_or(0) == 0 {
            continue;
        }
        let stack = &mut st.stack;
        done += cx.charge_to(r.owner, |_| stack.udp_mut(r.h).prepare(budget).unwrap_or(0));
    }
    let now = st.stack.now();
    let tcp = st.stack.tcp_service_tag(now, 0, tcp_budget);
    st.dispatch_tcp_events(&mut |t| cx.wake(t));
    done += tcp;
    // Ready while it finds work: as an `Idle` owner it runs again only
    // when nothing else is runnable.
    if done > 0 {
        Status::Ready
    } else {
        Status::Wait
    }
}
