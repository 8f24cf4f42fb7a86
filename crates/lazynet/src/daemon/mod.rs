//! The lazynet daemon: the multi-process placement's NI. One process owns
//! the NIC and only demultiplexes; every application process attaches
//! ([`crate::stack::Stack::attach`]) and runs its own protocol work in its
//! own communication area ([`crate::mem::area`]), at its own priority
//! (LRP's NI demultiplexing; RTU's one area per process).
//!
//! **[`Daemon`] owns:** the NIC, a [`Stack`] of its own on it (which
//! answers ARP and ICMP echo, reassembles fragments, and sends resets and
//! port-unreachables for ports nobody holds), the table of which
//! application holds which port and channel, each attached application's
//! area and the daemon's ends of its rings, the control socket, and the
//! per-application counters.
//!
//! **May not touch:** an application's protocol state, or any memory of an
//! application but its area. It never runs TCP or UDP for an application.
//!
//! # The data path (one [`Daemon::step`])
//!
//! 1. **Commands.** Up to [`CMDS_PER_STEP`] per application from its `cmd`
//!    ring: binds go into the daemon's classifier, a port another
//!    application holds is refused ([`Refusal::InUse`]), a connection's
//!    local port must be one of the application's (its ephemeral range or a
//!    port it listens on). The count applied is published.
//! 2. **Receive.** A batch from the NIC; each frame is classified once.
//!    A frame for an application's channel is *copied* into one of that
//!    application's free buffers and its descriptor pushed onto the slot's
//!    ring (a full ring, or no free buffer, drops it right there, counted
//!    for that application: early discard); a notifying channel's slot id
//!    goes onto the `ready` ring when its flag arms. Everything else goes
//!    to the daemon's own stack; ARP replies are also copied to every
//!    application's control slot (their stacks resolve neighbours
//!    themselves). The NIC's buffer is released at once.
//! 3. **Control.** The daemon's stack serves its control and fragment
//!    channels and timers. A UDP datagram it reassembled for an
//!    application's socket goes to that socket's slot as one frame, or,
//!    too big for one of the application's buffers, cut again into
//!    fragments that fit them onto the application's fragment slot, where
//!    its own stack reassembles it (fragments carry no ports: only the
//!    daemon's reassembly can tell whose datagram it is).
//! 4. **Transmit.** Up to [`TX_PER_STEP`] frames per application from its
//!    `tx` ring: each is copied into a NIC buffer, *then* checked (source
//!    MAC and address ours; a TCP or UDP source port the application holds;
//!    ARP as ourselves; ICMP), so the application cannot change it after
//!    the check; its buffer goes back on `done`.
//! 5. **Publish.** Per application that got frames: the delivery count
//!    and a ring of its doorbell. (Its counters are published at each
//!    control check, at most [`CTL_CHECK_NS`] old.)
//!
//! Nothing on it allocates or locks; its system calls are the NIC's. Every
//! loop is bounded by a batch or a ring's capacity.
//!
//! # Why a copy
//!
//! TAP (and the in-memory wire) receive into the daemon's own buffers
//! before anyone knows whose frame it is; only a NIC that steers by flow
//! into per-application buffer pools could avoid it. One copy of each
//! frame into the application's area is the price of isolation: an
//! application's area holds only its own frames, and nothing the
//! application writes there can reach another application or the daemon's
//! memory. It is charged to the daemon.
//!
//! # Isolation and reclaim
//!
//! The daemon keeps no state inside an area it relies on: ring capacities
//! and claims are read once at creation, indices the application writes
//! are checked by the rings ([`AppCounter::RingCorrupt`]), every buffer
//! number and descriptor by the area ([`AppCounter::BadDescriptor`]), and a
//! buffer an application lies about only corrupts that application's own
//! frames. Nothing in the daemon grows with what an application does:
//! bindings are bounded by its slots, pending notifications by its slots,
//! and connections that have not said hello by [`MAX_PENDING`]. When an
//! application's control connection closes (exit, crash, `kill -9`), the
//! daemon unbinds all it had and drops its area within one control check
//! (at most [`CTL_CHECK_NS`] while busy, the sleep timeout while idle). A
//! stopped application (`SIGSTOP`) fills its own rings and loses its own
//! frames, nobody else's.

pub use crate::ctl;

mod app;
mod control;
mod datapath;
mod offload;
mod ports;
mod txcheck;

use app::{App, Binding, Recipient};
pub use offload::REQS_PER_STEP;

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::demux::{ChannelId, Verdict, CONTROL, FRAGMENT};
use crate::mem::area::{AppCounter, AreaParams, Cmd, Op, Refusal, Reply, COUNTERS};
use crate::mem::jobs::{JobArea, JobCounter, JobParams};
use crate::mem::{AppArea, BufArea, Consumer, Desc, Doorbell, FlagRef, Producer};
use crate::nic::Nic;
use crate::proto::ip::fragment_plan;
use crate::stack::{Stack, StackConfig};
use crate::sys::EventFd;
use crate::wire::ethernet::{EthernetAddress, EthernetRepr, ETHERTYPE_IPV4};
use crate::wire::ipv4::{Ipv4Repr, PROTO_UDP};
use ctl::{CtlError, Msg, Welcome};

/// Commands applied per application per step.
pub const CMDS_PER_STEP: usize = 32;
/// Frames taken from one application's `tx` ring per step.
pub const TX_PER_STEP: usize = 32;
/// Frames received from the NIC per step.
pub const RX_BATCH: usize = 32;
/// The slot of an application's fragment channel (slot 0 is its control
/// channel's; sockets have the others).
const FRAGMENT_SLOT: usize = 1;
/// Connections that have not yet said hello, at most.
pub const MAX_PENDING: usize = 16;
/// Time between control checks (accepts, hang-ups) while busy.
pub const CTL_CHECK_NS: u64 = 1_000_000;
/// First ephemeral port handed out; each application gets its own range.
pub const EPHEMERAL_BASE: u16 = 49152;
/// Frames the daemon's classifier keeps per application channel (only
/// reassembled datagrams ever wait there).
const DAEMON_CHAN_CAP: usize = 16;
/// How long [`Daemon::run`] sleeps at most (timers, hang-ups).
const MAX_SLEEP_NS: u64 = 50_000_000;

/// How a daemon is set up.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// The control socket's path.
    pub socket: PathBuf,
    /// Its file mode (who may attach).
    pub socket_mode: u32,
    /// Applications attached at once, at most.
    pub max_apps: usize,
    /// The areas' sizes.
    pub area: AreaParams,
    /// Ephemeral ports per application.
    pub ports_per_app: u16,
    /// The daemon's own stack (address, prefix, seed, control budget).
    pub stack: StackConfig,
    /// How long [`Daemon::run`] keeps polling with nothing to do before it
    /// sleeps. A daemon with a core of its own may poll for long (each
    /// frame then costs no wake-up); one that shares a core with
    /// applications must sleep soon, or a woken application waits for the
    /// end of the daemon's time slice (milliseconds under EEVDF).
    pub idle_spin_ns: u64,
    /// While polling idle, yield the core to other runnable threads
    /// (`sched_yield`) instead of spinning: for a daemon that must poll
    /// but shares its core (a two-core machine, where the core also runs
    /// a client or a NIC's stand-in).
    pub idle_yield: bool,
    /// Where protocol processing runs for attached programs: in each
    /// application ([`Placement::MultiProcess`], the only kind of client
    /// then) or, as well, in the daemon for MemNet clients
    /// ([`Placement::Offload`]).
    pub placement: Placement,
    /// The job areas' sizes and per-client bounds (offload).
    pub jobs: JobParams,
    /// The ephemeral ports of the daemon's own stack (its MemNet clients'
    /// connections), inclusive; apart from every application's range, and
    /// bound by no application.
    pub own_ports: (u16, u16),
}

/// Where a daemon runs protocol processing for the programs it serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// Applications attach with a communication area and run their own
    /// TCP/IP; the daemon only demultiplexes.
    #[default]
    MultiProcess,
    /// As well, MemNet clients attach with a job area and the daemon runs
    /// TCP for them on its core ([`crate::memnet`]).
    Offload,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            socket: PathBuf::from("/run/lazynet.sock"),
            socket_mode: 0o660,
            max_apps: 16,
            area: AreaParams::default(),
            ports_per_app: 1024,
            stack: StackConfig::default(),
            idle_spin_ns: 5_000,
            idle_yield: false,
            placement: Placement::MultiProcess,
            jobs: JobParams::default(),
            own_ports: (40960, EPHEMERAL_BASE - 1),
        }
    }
}

/// Daemon-wide counters.
#[derive(Clone, Debug, Default)]
pub struct DaemonStats {
    /// Applications attached over the daemon's life.
    pub attached: u64,
    /// Applications whose control connection closed (reclaimed).
    pub detached: u64,
    /// Attach requests refused (full, garbage, out of memory).
    pub refused: u64,
    /// Frames received from the NIC.
    pub rx_frames: u64,
    /// Frames copied into applications' areas.
    pub delivered: u64,
    /// Frames sent for applications.
    pub tx_frames: u64,
    /// Reassembled datagrams handed to applications as fragments (too big
    /// for one of their buffers).
    pub refragmented: u64,
    /// Nanoseconds [`Daemon::run`] spent in steps that did work (its useful
    /// time: a polling core is always busy to the operating system).
    pub busy_ns: u64,
    /// Nanoseconds [`Daemon::run`] ran in all.
    pub run_ns: u64,
    /// Steps [`Daemon::run`] took, and of them those that did work.
    pub steps: u64,
    /// See `steps`.
    pub worked_steps: u64,
}

/// The daemon (see the module docs).
pub struct Daemon<N: Nic> {
    stack: Stack<N>,
    cfg: DaemonConfig,
    listener: OwnedFd,
    pending: Vec<(OwnedFd, Instant)>,
    apps: Vec<Option<App>>,
    offload: offload::Offload,
    next_id: u32,
    chans: Vec<Option<Recipient>>,
    ports: ports::Ports,
    /// The eventfd every application's ring of the daemon bell signals.
    wake: Arc<EventFd>,
    rx: Vec<Desc>,
    rel: Vec<Desc>,
    txb: Vec<Desc>,
    txa: Vec<u32>,
    ready_ids: Vec<u32>,
    /// Control messages as received (the daemon expects only short ones).
    ctl_buf: [u8; 256],
    /// One rebuilt frame (the largest IPv4 datagram and its headers).
    scratch: Box<[u8]>,
    next_ctl: u64,
    stats: DaemonStats,
}

impl<N: Nic> std::fmt::Debug for Daemon<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("socket", &self.cfg.socket)
            .field("apps", &self.attached())
            .finish()
    }
}

impl<N: Nic> Daemon<N> {
    /// A daemon on `nic`, listening at `cfg.socket`.
    pub fn new(nic: N, cfg: DaemonConfig) -> io::Result<Daemon<N>> {
        cfg.area.check()?;
        cfg.jobs.check()?;
        let max_apps = cfg.max_apps.clamp(1, 1024);
        let ports = ports::Ports::new(
            EPHEMERAL_BASE,
            cfg.ports_per_app,
            max_apps as u16,
            cfg.own_ports,
        )
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "max_apps × ports_per_app does not fit the ephemeral ports, or meets the daemon's own",
            )
        })?;
        let listener = ctl::listen(&cfg.socket, cfg.socket_mode)?;
        rustix::io::ioctl_fionbio(&listener, true)?;
        // The daemon's own stack draws its connections' ports from its
        // range alone.
        let stack = Stack::new(
            nic,
            StackConfig {
                ephemeral_ports: ports.own_range(),
                ..cfg.stack.clone()
            },
        );
        Ok(Daemon {
            stack,
            listener,
            pending: Vec::with_capacity(MAX_PENDING),
            apps: (0..max_apps).map(|_| None).collect(),
            offload: offload::Offload::new(if cfg.placement == Placement::Offload {
                max_apps
            } else {
                0
            }),
            next_id: 1,
            chans: Vec::new(),
            ports,
            wake: Arc::new(EventFd::new()?),
            rx: vec![Desc::default(); RX_BATCH],
            rel: Vec::with_capacity(RX_BATCH + TX_PER_STEP),
            txb: Vec::with_capacity(TX_PER_STEP),
            txa: Vec::with_capacity(TX_PER_STEP),
            ready_ids: Vec::with_capacity(64),
            ctl_buf: [0; 256],
            scratch: vec![0u8; 65536].into_boxed_slice(),
            next_ctl: 0,
            stats: DaemonStats::default(),
            cfg: DaemonConfig { max_apps, ..cfg },
        })
    }

    /// The daemon's own stack (its counters, its NIC).
    pub fn stack(&self) -> &Stack<N> {
        &self.stack
    }

    /// Makes the next step check the control socket (accepts, hellos,
    /// hang-ups) whatever the time since the last check.
    pub fn poke(&mut self) {
        self.next_ctl = 0;
    }

    /// The NIC, mutably (tests and accounting checks between steps).
    pub fn nic_mut(&mut self) -> &mut N {
        self.stack.nic_mut()
    }

    /// Applications and MemNet clients attached now.
    pub fn attached(&self) -> usize {
        self.apps.iter().filter(|a| a.is_some()).count() + self.offload.attached()
    }

    /// The daemon-wide counters.
    pub fn stats(&self) -> &DaemonStats {
        &self.stats
    }

    /// The statistics text (`lazynet stats --daemon`): one line per
    /// application, then the daemon's.
    pub fn stats_text(&self) -> String {
        let mut s = String::new();
        for a in self.apps.iter().flatten() {
            s.push_str(&format!(
                "app {} pid {} sockets {}",
                a.id,
                a.pid.map_or("?".into(), |p| p.to_string()),
                a.bound.iter().filter(|b| b.is_some()).count()
            ));
            for c in AppCounter::ALL {
                s.push_str(&format!(" {}={}", c.name(), a.counters[c as usize]));
            }
            s.push('\n');
        }
        for c in self.offload.clients.iter().flatten() {
            s.push_str(&format!(
                "memnet {} pid {} sockets {} orphans {}",
                c.id,
                c.pid.map_or("?".into(), |p| p.to_string()),
                c.sockets(),
                self.stack.tcp_orphans_of(c.tag)
            ));
            for k in JobCounter::ALL {
                s.push_str(&format!(" {}={}", k.name(), c.counters[k as usize]));
            }
            s.push('\n');
        }
        let d = &self.stats;
        let st = self.stack.stats();
        s.push_str(&format!(
            "daemon apps={} attached={} detached={} refused={} rx_frames={} delivered={} tx_frames={} refragmented={} own_rx_frames={} own_tx_frames={} classifier_drops={} busy_ns={} run_ns={} steps={} worked_steps={}\n",
            self.attached(),
            d.attached,
            d.detached,
            d.refused,
            d.rx_frames,
            d.delivered,
            d.tx_frames,
            d.refragmented,
            st.rx_frames,
            st.tx_frames,
            st.demux.dropped(),
            d.busy_ns,
            d.run_ns,
            d.steps,
            d.worked_steps,
        ));
        s
    }

    /// One bounded step (see the module docs). Returns the work done.
    pub fn step(&mut self) -> usize {
        let now = self.stack.now();
        let mut work = 0;
        if now >= self.next_ctl {
            self.next_ctl = now + CTL_CHECK_NS;
            work += self.control();
        }
        for k in 0..self.apps.len() {
            if self.apps[k].is_some() {
                work += self.commands(k);
            }
        }
        work += self.receive();
        work += self.stack.daemon_port().after_batch(now);
        work += self.reassembled();
        if self.cfg.placement == Placement::Offload {
            work += self.offload.step(&mut self.stack, &mut self.ports, now);
            self.stack.nic_mut().flush();
        }
        let mut sent = 0;
        for k in 0..self.apps.len() {
            if self.apps[k].is_some() {
                sent += self.transmit(k);
            }
        }
        if sent > 0 {
            // Once per step, whatever the number of applications.
            self.stack.nic_mut().flush();
        }
        work += sent;
        for a in self.apps.iter_mut().flatten() {
            a.flush_ready();
            a.publish();
        }
        work
    }

    /// Runs until `stop`: steps while there is work, polls for
    /// `idle_spin_ns` when there is none, then sleeps (see
    /// [`Daemon::sleep`]) until a frame, an application or a timer needs it.
    pub fn run(&mut self, stop: &AtomicBool) {
        let mut idle_since = None;
        let start = crate::sched::clock::mono_ns();
        // Useful time: the wall time of steps that did work on a core of
        // its own; the thread's CPU time when it yields a shared core (a
        // step may then be preempted, and the wall would count the other
        // thread's time).
        let clock: fn() -> u64 = if self.cfg.idle_yield {
            crate::sys::thread_cpu_ns
        } else {
            crate::sched::clock::mono_ns
        };
        let mut t0 = clock();
        while !stop.load(Ordering::Acquire) {
            let worked = self.step() > 0;
            let t1 = clock();
            self.stats.steps += 1;
            if worked {
                self.stats.busy_ns += t1.saturating_sub(t0);
                self.stats.worked_steps += 1;
            }
            t0 = t1;
            let now = crate::sched::clock::mono_ns();
            self.stats.run_ns = now.saturating_sub(start);
            if worked {
                idle_since = None;
                continue;
            }
            let since = *idle_since.get_or_insert(now);
            if now.saturating_sub(since) >= self.cfg.idle_spin_ns {
                self.sleep(MAX_SLEEP_NS);
                idle_since = None;
                // The sleep is not the next step's work.
                t0 = clock();
            } else if self.cfg.idle_yield {
                std::thread::yield_now();
                t0 = clock();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Sleeps until the NIC may have a frame, an application rings, or
    /// `timeout_ns` passes: announces the sleep on every application's
    /// bell, fences, checks their rings once more, then waits on the NIC
    /// (whose wait a helper thread ends when the daemon's eventfd fires).
    /// Hang-ups and new connections are seen at the next control check,
    /// at most `timeout_ns` later.
    pub fn sleep(&mut self, timeout_ns: u64) {
        for a in self.apps.iter().flatten() {
            a.bell.begin_sleep();
        }
        for c in self.offload.clients.iter().flatten() {
            c.bell.begin_sleep();
        }
        fence(Ordering::SeqCst);
        let busy = self
            .apps
            .iter()
            .flatten()
            .any(|a| a.tx.peek_len() > 0 || a.cmd.peek_len() > 0)
            || self
                .offload
                .clients
                .iter()
                .flatten()
                .any(|c| c.req.peek_len() > 0)
            || self.stack.nic_mut().rx_ready();
        if !busy {
            // The daemon's own TCP (offload) has timers too.
            let now = self.stack.now();
            let t = self
                .stack
                .tcp_next_timeout()
                .map_or(timeout_ns, |w| w.saturating_sub(now).min(timeout_ns));
            self.stack.nic_mut().wait(Some(t));
        }
        for a in self.apps.iter().flatten() {
            a.bell.end_sleep();
        }
        for c in self.offload.clients.iter().flatten() {
            c.bell.end_sleep();
        }
        self.wake.drain();
        self.next_ctl = 0;
    }

    /// A thread that ends the NIC's wait whenever an application rings
    /// the daemon's bell or someone connects to the control socket; it
    /// runs until `stop`. Needed only by [`Daemon::run`]'s sleeps.
    pub fn spawn_waker(
        &mut self,
        stop: Arc<AtomicBool>,
    ) -> io::Result<std::thread::JoinHandle<()>> {
        let ev = self.wake.clone();
        let bell = self.stack.nic().doorbell();
        let remote = self.stack.nic().remote_waker();
        let listener = rustix::io::dup(&self.listener)?;
        std::thread::Builder::new()
            .name("lazynet-waker".into())
            .spawn(move || {
                use rustix::event::{poll, PollFd, PollFlags};
                while !stop.load(Ordering::Acquire) {
                    let evfd = ev.fd();
                    let mut fds = [
                        PollFd::new(&evfd, PollFlags::IN),
                        PollFd::new(&listener, PollFlags::IN),
                    ];
                    let t = rustix::event::Timespec {
                        tv_sec: 0,
                        tv_nsec: 100_000_000,
                    };
                    let n = poll(&mut fds, Some(&t)).unwrap_or(0);
                    if n == 0 {
                        continue;
                    }
                    let conn = fds[1].revents().contains(PollFlags::IN);
                    ev.drain();
                    if let Some(b) = &bell {
                        b.wake();
                    }
                    if let Some(r) = &remote {
                        r.signal();
                    }
                    if conn {
                        // The daemon accepts at its next check; do not spin
                        // on a listener that stays readable until then.
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                }
            })
    }
}

impl<N: Nic> Drop for Daemon<N> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.cfg.socket);
    }
}

/// Serves `nic` as a daemon at `cfg.socket` until `stop` (the program's
/// loop: the waker thread and [`Daemon::run`]).
pub fn serve<N: Nic>(nic: N, cfg: DaemonConfig, stop: Arc<AtomicBool>) -> io::Result<Daemon<N>> {
    let mut d = Daemon::new(nic, cfg)?;
    let waker = d.spawn_waker(stop.clone())?;
    d.run(&stop);
    let _ = waker.join();
    Ok(d)
}

/// Asks the daemon at `path` for its statistics.
pub fn stats(path: &Path) -> io::Result<String> {
    ctl::stats(path)
}

#[allow(dead_code)]
fn _assert_send<N: Nic + Send>(d: Daemon<N>) -> impl Send {
    let _ = d.listener.as_fd();
    d
}

#[cfg(test)]
mod offload_tests;
#[cfg(test)]
mod tests;
