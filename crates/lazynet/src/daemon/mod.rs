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

mod offload;
mod ports;
mod txcheck;
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

/// What one application's socket is bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Binding {
    Udp(Ipv4Addr, u16),
    Listen(Ipv4Addr, u16),
    Conn(SocketAddrV4, SocketAddrV4),
}

/// Who a channel of the daemon's classifier delivers to.
#[derive(Clone, Copy, Debug)]
struct Owner {
    app: u16,
    slot: u32,
    id: u32,
    notify: bool,
}

/// One attached application (see the module docs).
struct App {
    id: u32,
    pid: Option<u32>,
    conn: OwnedFd,
    area: AppArea,
    bufs: BufArea,
    bell: Doorbell,
    app_bell: Doorbell,
    free: Consumer<u32>,
    tx: Consumer<Desc>,
    done: Producer<u32>,
    ready: Producer<u32>,
    cmd: Consumer<Cmd>,
    reply: Producer<Reply>,
    slots: Vec<Producer<Desc>>,
    flags: Vec<FlagRef>,
    /// Per slot: what it is bound to and the daemon's channel.
    bound: Vec<Option<(Binding, ChannelId)>>,
    eph: (u16, u16),
    applied: u64,
    delivered: u64,
    counters: [u64; COUNTERS],
    /// Ids armed but not yet on the `ready` ring (at most one per slot).
    ready_pend: Vec<u32>,
    dirty: bool,
    /// IP identification of the next datagram handed on as fragments.
    frag_ident: u16,
    /// Its fragmented datagrams on the way out (`txcheck`).
    frags: txcheck::Frags,
}

impl App {
    fn count(&mut self, c: AppCounter) {
        self.counters[c as usize] += 1;
    }

    /// Copies `frame` into a free buffer of this application and queues it
    /// on `slot` (see step 2).
    #[inline]
    fn deliver(&mut self, slot: u32, id: u32, notify: bool, frame: &[u8]) -> bool {
        self.deliver_parts(slot, id, notify, frame, &[])
    }

    /// [`App::deliver`] of the frame `head` followed by `body`. Returns
    /// whether it was queued (else it was counted as dropped).
    #[inline]
    fn deliver_parts(
        &mut self,
        slot: u32,
        id: u32,
        notify: bool,
        head: &[u8],
        body: &[u8],
    ) -> bool {
        let s = slot as usize;
        let len = head.len() + body.len();
        if len > self.bufs.buf_size() || len > usize::from(u16::MAX) {
            self.count(AppCounter::DropTooBig);
            return false;
        }
        if self.slots[s].free() == 0 {
            self.count(AppCounter::DropSlotFull);
            return false;
        }
        let buf = loop {
            match self.free.pop_one() {
                Some(b) if b < self.bufs.count() => break b,
                Some(_) => self.count(AppCounter::BadDescriptor),
                None => {
                    self.count(AppCounter::DropNoBuffer);
                    return false;
                }
            }
        };
        let Some(dst) = self.bufs.buf_mut(buf) else {
            self.count(AppCounter::BadDescriptor);
            return false;
        };
        dst[..head.len()].copy_from_slice(head);
        dst[head.len()..len].copy_from_slice(body);
        let d = Desc::new(buf, len as u16);
        if self.slots[s].push_one(d).is_err() {
            // Checked above; an application that moved the index meanwhile
            // loses the buffer to itself only.
            let _ = self.done.push_one(buf);
            self.count(AppCounter::DropSlotFull);
            return false;
        }
        self.count(AppCounter::Delivered);
        self.dirty = true;
        if notify && self.flags[s].arm() {
            // After the push (mem::notify).
            if (!self.ready_pend.is_empty() || self.ready.push_one(id).is_err())
                && self.ready_pend.len() < self.slots.len()
            {
                self.ready_pend.push(id);
            }
        }
        true
    }

    /// Hands a UDP datagram the daemon reassembled (`udp`: its header and
    /// payload) to this application: as one unfragmented frame on `slot`
    /// if it fits a buffer, else cut again into fragments that do (RFC 791
    /// §3.2), queued on the fragment slot for the application's own stack
    /// to reassemble (IPv4 headers checksummed afresh; the UDP checksum,
    /// over the same pseudo-header, still holds). The fragments carry an
    /// identification of this application's own sequence (only the
    /// daemon's re-cut datagrams reach that slot), and go all or none:
    /// without room on the slot's ring and free buffers for every one, the
    /// datagram is dropped and counted there (an application that hands
    /// back bad buffers can still cut its own datagrams short; its stack's
    /// reassembly times them out). Returns the frames queued and whether
    /// that was the whole datagram.
    fn deliver_datagram(
        &mut self,
        (slot, id, notify): (u32, u32, bool),
        mac: [u8; 6],
        (src, dst): (Ipv4Addr, Ipv4Addr),
        udp: &[u8],
    ) -> (usize, bool) {
        let head = |ident, more_frags, frag_offset: usize, len| {
            let mut h = [0u8; 34];
            let eth = EthernetRepr {
                src: EthernetAddress(mac),
                dst: EthernetAddress(mac),
                ethertype: ETHERTYPE_IPV4,
            };
            let ip = Ipv4Repr {
                src,
                dst,
                protocol: PROTO_UDP,
                ttl: 64,
                ident,
                dont_frag: false,
                more_frags,
                frag_offset: frag_offset as u16,
                payload_len: len,
            };
            (eth.emit(&mut h).is_ok() && ip.emit(&mut h[14..]).is_ok()).then_some(h)
        };
        if udp.is_empty() {
            self.count(AppCounter::DropTooBig);
            return (0, false);
        }
        if 34 + udp.len() <= self.bufs.buf_size() {
            let Some(h) = head(0, false, 0, udp.len()) else {
                self.count(AppCounter::DropTooBig);
                return (0, false);
            };
            let ok = self.deliver_parts(slot, id, notify, &h, udp);
            return (usize::from(ok), ok);
        }
        let Ok(plan) = fragment_plan(udp.len(), self.bufs.buf_size() - 14, 20) else {
            self.count(AppCounter::DropTooBig);
            return (0, false);
        };
        let frag = FRAGMENT_SLOT;
        let k = plan.clone().count();
        if self.slots[frag].free() < k {
            self.count(AppCounter::DropSlotFull);
            return (0, false);
        }
        if self.free.len() < k {
            self.count(AppCounter::DropNoBuffer);
            return (0, false);
        }
        let ident = self.frag_ident;
        self.frag_ident = ident.wrapping_add(1);
        let mut n = 0;
        for (off, len, more) in plan {
            let Some(h) = head(ident, more, off, len) else {
                self.count(AppCounter::DropTooBig);
                break;
            };
            if !self.deliver_parts(frag as u32, FRAGMENT.0, false, &h, &udp[off..off + len]) {
                break;
            }
            n += 1;
        }
        (n, n == k)
    }

    fn flush_ready(&mut self) {
        let mut k = 0;
        while k < self.ready_pend.len() && self.ready.push_one(self.ready_pend[k]).is_ok() {
            k += 1;
        }
        self.ready_pend.drain(..k);
    }

    /// After each step: a delivery count and a ring of the application's
    /// bell if it got frames.
    #[inline]
    fn publish(&mut self) {
        if self.dirty {
            self.dirty = false;
            self.delivered += 1;
            self.area.published().set_delivered(self.delivered);
            self.app_bell.ring();
        }
    }

    /// At each control check (not each step: it reads every slot ring's
    /// corruption count): the counters into the published line.
    fn publish_counters(&mut self) {
        let corrupt = self.free.corrupt()
            + self.tx.corrupt()
            + self.cmd.corrupt()
            + self.done.corrupt()
            + self.ready.corrupt()
            + self.reply.corrupt()
            + self.slots.iter().map(|p| p.corrupt()).sum::<u64>();
        self.counters[AppCounter::RingCorrupt as usize] = corrupt;
        let p = self.area.published();
        for c in AppCounter::ALL {
            p.set_counter(c, self.counters[c as usize]);
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
    chans: Vec<Option<Owner>>,
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

    // ---- control path -------------------------------------------------

    /// Accepts connections, answers hellos and statistics requests, and
    /// reclaims applications whose connection closed. Bounded by
    /// [`MAX_PENDING`] and the number of applications.
    fn control(&mut self) -> usize {
        let mut work = 0;
        for _ in 0..MAX_PENDING {
            match ctl::accept(&self.listener) {
                Ok(c) => {
                    if self.pending.len() == MAX_PENDING {
                        // The oldest silent connection makes room.
                        self.pending.remove(0);
                        self.stats.refused += 1;
                    }
                    self.pending.push((c, Instant::now()));
                    work += 1;
                }
                Err(_) => break,
            }
        }
        let mut i = 0;
        while i < self.pending.len() {
            let got = ctl::recv_with(&self.pending[i].0, &mut self.ctl_buf);
            match got {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if self.pending[i].1.elapsed().as_secs() >= 1 {
                        self.pending.swap_remove(i);
                        self.stats.refused += 1;
                    } else {
                        i += 1;
                    }
                }
                Ok(Some((Ok(Msg::Hello), _fds))) => {
                    let (c, _) = self.pending.swap_remove(i);
                    work += 1;
                    if let Err(e) = self.admit(c) {
                        self.stats.refused += 1;
                        let _ = e;
                    }
                }
                Ok(Some((Ok(Msg::HelloOffload), _fds))) => {
                    let (c, _) = self.pending.swap_remove(i);
                    work += 1;
                    if self.admit_client(c).is_err() {
                        self.stats.refused += 1;
                    }
                }
                Ok(Some((Ok(Msg::StatsRequest), _))) => {
                    let (c, _) = self.pending.swap_remove(i);
                    let _ = ctl::send(&c, &Msg::Stats(self.stats_text()), &[]);
                    work += 1;
                }
                Ok(Some((m, _))) => {
                    let (c, _) = self.pending.swap_remove(i);
                    let e = match m {
                        Err(e) => e,
                        Ok(_) => CtlError::Garbage,
                    };
                    let _ = ctl::send(&c, &Msg::Refused(e), &[]);
                    self.stats.refused += 1;
                }
                Ok(None) | Err(_) => {
                    self.pending.swap_remove(i);
                }
            }
        }
        for a in self.apps.iter_mut().flatten() {
            a.publish_counters();
        }
        for c in self.offload.clients.iter_mut().flatten() {
            c.publish_counters();
        }
        for k in 0..self.offload.clients.len() {
            let gone = match &self.offload.clients[k] {
                None => false,
                Some(c) => match ctl::recv_with(&c.conn, &mut self.ctl_buf) {
                    Err(e) => e.kind() != io::ErrorKind::WouldBlock,
                    Ok(None) => true,
                    Ok(Some(_)) => false,
                },
            };
            if gone && self.offload.reclaim(&mut self.stack, &mut self.ports, k) {
                self.stats.detached += 1;
                work += 1;
            }
        }
        for k in 0..self.apps.len() {
            let gone = match &self.apps[k] {
                None => false,
                Some(a) => match ctl::recv_with(&a.conn, &mut self.ctl_buf) {
                    Err(e) => e.kind() != io::ErrorKind::WouldBlock,
                    Ok(None) => true,
                    // An attached application has nothing more to say.
                    Ok(Some(_)) => false,
                },
            };
            if gone {
                self.reclaim(k);
                work += 1;
            }
        }
        work
    }

    /// Builds an area for a new application and sends it over.
    fn admit(&mut self, conn: OwnedFd) -> io::Result<()> {
        let Some(k) = self.apps.iter().position(|a| a.is_none()) else {
            let _ = ctl::send(&conn, &Msg::Refused(CtlError::Full), &[]);
            return Err(io::Error::other("full"));
        };
        let id = self.next_id;
        let app = match self.build_app(k, id, conn) {
            Ok(a) => a,
            Err((conn, e)) => {
                let _ = ctl::send(&conn, &Msg::Refused(CtlError::NoMemory), &[]);
                return Err(e);
            }
        };
        let w = Welcome {
            app_id: id,
            addr: self.stack.addr(),
            prefix_len: self.cfg.stack.prefix_len,
            gateway: self.cfg.stack.gateway,
            mac: self.stack.mac(),
            mtu: self.stack.nic().mtu().min(u16::MAX as usize) as u16,
            eph_first: app.eph.0,
            eph_last: app.eph.1,
        };
        ctl::send(
            &app.conn,
            &Msg::Welcome(w),
            &[app.area.region().fd(), self.wake.fd()],
        )?;
        self.next_id += 1;
        self.stats.attached += 1;
        self.apps[k] = Some(app);
        Ok(())
    }

    /// Builds a job area for a new MemNet client and sends it over.
    fn admit_client(&mut self, conn: OwnedFd) -> io::Result<()> {
        if self.cfg.placement != Placement::Offload {
            let _ = ctl::send(&conn, &Msg::Refused(CtlError::Placement), &[]);
            return Err(io::Error::other("not offload"));
        }
        let Some(k) = self.offload.clients.iter().position(|c| c.is_none()) else {
            let _ = ctl::send(&conn, &Msg::Refused(CtlError::Full), &[]);
            return Err(io::Error::other("full"));
        };
        let id = self.next_id;
        let area = match JobArea::create(&format!("lazynet-memnet-{id}"), self.cfg.jobs) {
            Ok(a) => a,
            Err(e) => {
                let _ = ctl::send(&conn, &Msg::Refused(CtlError::NoMemory), &[]);
                return Err(e);
            }
        };
        let w = Welcome {
            app_id: id,
            addr: self.stack.addr(),
            prefix_len: self.cfg.stack.prefix_len,
            gateway: self.cfg.stack.gateway,
            mac: self.stack.mac(),
            mtu: self.stack.nic().mtu().min(u16::MAX as usize) as u16,
            eph_first: 0,
            eph_last: 0,
        };
        ctl::send(
            &conn,
            &Msg::Welcome(w),
            &[area.region().fd(), self.wake.fd()],
        )?;
        let c = offload::Client::new(id, conn, area, self.wake.clone())?;
        self.next_id += 1;
        self.stats.attached += 1;
        self.offload.clients[k] = Some(c);
        Ok(())
    }

    fn build_app(&mut self, k: usize, id: u32, conn: OwnedFd) -> Result<App, (OwnedFd, io::Error)> {
        let p = self.cfg.area;
        let area = match AppArea::create(&format!("lazynet-app-{id}"), p) {
            Ok(a) => a,
            Err(e) => return Err((conn, e)),
        };
        let r = (|| -> io::Result<_> {
            let l = *area.layout();
            let reg = area.region();
            let mut slots = Vec::with_capacity(p.slots as usize);
            let mut flags = Vec::with_capacity(p.slots as usize);
            for s in 0..p.slots {
                slots.push(Producer::attach(reg, l.slot(s))?);
                flags.push(area.flag(s)?);
            }
            Ok((
                area.bufs()?,
                area.daemon_bell(self.wake.clone())?,
                area.app_bell()?,
                Consumer::attach(reg, l.free)?,
                Consumer::attach(reg, l.tx)?,
                Producer::attach(reg, l.done)?,
                Producer::attach(reg, l.ready)?,
                Consumer::attach(reg, l.cmd)?,
                Producer::attach(reg, l.reply)?,
                slots,
                flags,
            ))
        })();
        let (bufs, bell, app_bell, free, tx, done, ready, cmd, reply, slots, flags) = match r {
            Ok(v) => v,
            Err(e) => return Err((conn, e)),
        };
        let eph = self.ports.app_range(k as u16);
        Ok(App {
            id,
            pid: ctl::peer_pid(&conn),
            conn,
            area,
            bufs,
            bell,
            app_bell,
            free,
            tx,
            done,
            ready,
            cmd,
            reply,
            slots,
            flags,
            bound: vec![None; p.slots as usize],
            eph,
            applied: 0,
            delivered: 0,
            counters: [0; COUNTERS],
            ready_pend: Vec::with_capacity(p.slots as usize),
            dirty: false,
            frag_ident: 0,
            frags: txcheck::Frags::default(),
        })
    }

    /// Unbinds everything application `k` had and drops its area.
    fn reclaim(&mut self, k: usize) {
        let Some(mut a) = self.apps[k].take() else {
            return;
        };
        let now = self.stack.now();
        for s in 0..a.bound.len() {
            if let Some((b, c)) = a.bound[s].take() {
                self.unbind(k, b, c);
                if let Binding::Conn(l, r) = b {
                    self.stack.daemon_port().probe_dead(l, r, now);
                }
            }
        }
        self.stack.nic_mut().flush();
        self.stats.detached += 1;
        drop(a);
    }

    /// Removes one binding from the classifier and the port tables.
    fn unbind(&mut self, k: usize, b: Binding, c: ChannelId) {
        let mut left = Vec::new();
        let d = self.stack.daemon_port().classifier();
        let _ = match b {
            Binding::Udp(a, p) => d.unbind_udp(a, p, &mut left),
            Binding::Listen(a, p) => d.unbind_tcp_listen(a, p, &mut left),
            Binding::Conn(l, r) => d.unbind_tcp_conn(l, r, &mut left),
        };
        let mut gone = Vec::new();
        d.take_detached(&mut gone);
        self.release_queued(&left);
        if let Some(o) = self.chans.get_mut(c.0 as usize) {
            *o = None;
        }
        let me = ports::Holder::App(k as u16);
        match b {
            Binding::Udp(_, p) => self.ports.release(false, p, me),
            Binding::Listen(_, p) => self.ports.release(true, p, me),
            Binding::Conn(..) => {}
        }
    }

    /// Frames left on a daemon channel (reassembled datagrams the stack
    /// queued there) are the stack's to free: give them back through it.
    fn release_queued(&mut self, left: &[Desc]) {
        for &d in left {
            self.stack.daemon_port().release(d);
        }
    }

    /// Applies up to [`CMDS_PER_STEP`] commands of application `k`.
    fn commands(&mut self, k: usize) -> usize {
        let mut n = 0;
        while n < CMDS_PER_STEP {
            let Some(c) = self.apps[k].as_mut().and_then(|a| a.cmd.pop_one()) else {
                break;
            };
            n += 1;
            let op = Op::from_u32(c.op);
            let r = self.apply(k, op, &c);
            let a = self.apps[k].as_mut().expect("checked");
            if r.is_err() {
                a.count(AppCounter::CmdRefused);
            }
            // Every refusal is answered, typed: a command the application
            // waits for, and one it did not (a connection whose 4-tuple
            // is taken learns it from the reply's channel id).
            if op.is_some_and(Op::needs_reply) || r.is_err() {
                let code = r.err().map_or(0, |e| e as u32);
                // A full reply ring is the application's own doing.
                let _ = a.reply.push_one(Reply {
                    seq: c.seq,
                    code,
                    id: c.id,
                    op: c.op,
                });
                a.dirty = true;
            }
            a.applied += 1;
        }
        if n > 0 {
            let a = self.apps[k].as_mut().expect("checked");
            a.area.published().set_applied(a.applied);
            a.app_bell.ring();
        }
        n
    }

    fn apply(&mut self, k: usize, op: Option<Op>, c: &Cmd) -> Result<(), Refusal> {
        let op = op.ok_or(Refusal::Invalid)?;
        let ours = self.stack.addr();
        let laddr = Ipv4Addr::from(c.laddr);
        if !laddr.is_unspecified() && laddr != ours {
            return Err(Refusal::NotOurAddress);
        }
        let me = ports::Holder::App(k as u16);
        let a = self.apps[k].as_ref().expect("checked");
        let slot = c.slot as usize;
        let (lport, raddr, rport) = (c.lport, Ipv4Addr::from(c.raddr), c.rport);
        let binding = match op {
            Op::BindUdp | Op::UnbindUdp => Binding::Udp(laddr, lport),
            Op::Listen | Op::Unlisten => Binding::Listen(laddr, lport),
            Op::Conn | Op::Unconn => Binding::Conn(
                SocketAddrV4::new(ours, lport),
                SocketAddrV4::new(raddr, rport),
            ),
        };
        if matches!(op, Op::UnbindUdp | Op::Unlisten | Op::Unconn) {
            let s = a
                .bound
                .iter()
                .position(|b| matches!(b, Some((x, _)) if *x == binding))
                .ok_or(Refusal::Invalid)?;
            let (b, ch) = self.apps[k].as_mut().expect("checked").bound[s]
                .take()
                .expect("found");
            self.unbind(k, b, ch);
            return Ok(());
        }
        // Slots 0 and 1 are the control and fragment channels.
        if !(2..a.bound.len()).contains(&slot) || a.bound[slot].is_some() || lport == 0 {
            return Err(Refusal::Invalid);
        }
        let (ch, notify) = match binding {
            Binding::Udp(addr, p) => {
                self.ports.claim(false, p, me)?;
                let d = self.stack.daemon_port().classifier();
                let Ok(ch) = d.bind_udp(addr, p, DAEMON_CHAN_CAP) else {
                    self.ports.release(false, p, me);
                    return Err(Refusal::InUse);
                };
                // The daemon's stack queues reassembled datagrams here:
                // the ready list says which channels have some.
                d.set_notify(ch, true);
                (ch, false)
            }
            Binding::Listen(addr, p) => {
                self.ports.claim(true, p, me)?;
                let Ok(ch) =
                    self.stack
                        .daemon_port()
                        .classifier()
                        .bind_tcp_listen(addr, p, DAEMON_CHAN_CAP)
                else {
                    self.ports.release(true, p, me);
                    return Err(Refusal::InUse);
                };
                (ch, true)
            }
            Binding::Conn(l, r) => {
                if !self.ports.app_may_use(k as u16, true, l.port()) {
                    return Err(Refusal::InUse);
                }
                // A 4-tuple already bound (only a misbehaving application
                // repeats its own) is refused, and the refusal answered.
                let ch = self
                    .stack
                    .daemon_port()
                    .classifier()
                    .bind_tcp_conn(l, r, DAEMON_CHAN_CAP)
                    .map_err(|_| Refusal::InUse)?;
                (ch, true)
            }
        };
        let i = ch.0 as usize;
        if self.chans.len() <= i {
            self.chans.resize(i + 1, None);
        }
        self.chans[i] = Some(Owner {
            app: k as u16,
            slot: c.slot,
            id: c.id,
            notify,
        });
        self.apps[k].as_mut().expect("checked").bound[slot] = Some((binding, ch));
        Ok(())
    }

    // ---- data path ----------------------------------------------------

    /// Datagrams the daemon's stack reassembled for applications' sockets
    /// (step 3): each is handed on as one unfragmented frame, or cut again
    /// into fragments that fit the application's buffers
    /// ([`App::deliver_datagram`]), copied into the application's area like
    /// any other frame. Bounded by the channels' capacities.
    fn reassembled(&mut self) -> usize {
        self.ready_ids.clear();
        self.stack
            .daemon_port()
            .classifier()
            .take_ready(&mut self.ready_ids);
        let mut work = 0;
        for i in 0..self.ready_ids.len() {
            let c = ChannelId(self.ready_ids[i]);
            let Some(Some(o)) = self.chans.get(c.0 as usize).copied() else {
                // The daemon's own sockets (offload): TCP's service finds
                // the channel on the ready list.
                self.stack.daemon_port().classifier().mark_ready(c);
                continue;
            };
            let mac = self.stack.mac();
            for _ in 0..DAEMON_CHAN_CAP {
                let Some((n, src, dst)) = self
                    .stack
                    .daemon_port()
                    .pop_reassembled(c, &mut self.scratch)
                else {
                    break;
                };
                work += 1;
                let Some(a) = self.apps[o.app as usize].as_mut() else {
                    continue;
                };
                let (k, whole) = a.deliver_datagram(
                    (o.slot, o.id, o.notify),
                    mac,
                    (src, dst),
                    &self.scratch[..n],
                );
                self.stats.delivered += k as u64;
                if whole && k > 1 {
                    self.stats.refragmented += 1;
                }
            }
        }
        work
    }

    /// Receives one batch and delivers it (step 2).
    fn receive(&mut self) -> usize {
        let n = self.stack.nic_mut().recv(&mut self.rx[..RX_BATCH]);
        self.stats.rx_frames += n as u64;
        for i in 0..n {
            let d = self.rx[i];
            let Some(f) = self.stack.nic().buffers().frame(d) else {
                continue;
            };
            let v = self.stack.demux().classify(f);
            if let Verdict::Channel(c) = v {
                if let Some(Some(o)) = self.chans.get(c.0 as usize) {
                    let o = *o;
                    if let Some(a) = self.apps[o.app as usize].as_mut() {
                        self.stats.delivered += u64::from(a.deliver(o.slot, o.id, o.notify, f));
                    }
                    self.rel.push(d);
                    continue;
                }
                if c == CONTROL && is_arp_reply(f) {
                    for a in self.apps.iter_mut().flatten() {
                        a.deliver(0, 0, false, f);
                    }
                }
                // An ICMP "fragmentation needed" about an application's
                // connection is that application's (its TCP shrinks its
                // segments): onto its control slot, as its own stack
                // would have received it.
                if c == CONTROL {
                    let ours = self.stack.addr();
                    let quoted = crate::stack::frag_needed_quote(f, ours);
                    let owner = quoted
                        .and_then(|(l, r)| self.stack.demux().lookup_tcp_conn(l, r))
                        .and_then(|ch| self.chans.get(ch.0 as usize).copied().flatten());
                    if let Some(o) = owner {
                        if let Some(a) = self.apps[o.app as usize].as_mut() {
                            self.stats.delivered += u64::from(a.deliver(0, 0, false, f));
                        }
                        self.rel.push(d);
                        continue;
                    }
                }
            }
            if self
                .stack
                .daemon_port()
                .classifier()
                .deliver_classified(d, v)
                .is_err()
            {
                self.rel.push(d);
            }
        }
        if !self.rel.is_empty() {
            self.stack.nic_mut().release(&self.rel);
            self.rel.clear();
        }
        n
    }

    /// Forwards up to [`TX_PER_STEP`] frames of application `k` (step 4).
    fn transmit(&mut self, k: usize) -> usize {
        let mut ds = [Desc::default(); TX_PER_STEP];
        let n = match self.apps[k].as_mut() {
            Some(a) => a.tx.pop(&mut ds),
            None => 0,
        };
        if n == 0 {
            return 0;
        }
        self.txa.resize(n, 0);
        let got = self.stack.nic_mut().alloc(&mut self.txa[..n]);
        self.txa.truncate(got);
        let us = txcheck::Us {
            mac: self.stack.mac(),
            addr: self.stack.addr(),
        };
        let max_len = self.stack.nic().mtu() + 14;
        // NIC buffers are taken in order by the frames that pass the
        // descriptor check; those left over go back.
        let mut next_nb = 0;
        for &d in &ds[..n] {
            let a = self.apps[k].as_mut().expect("checked");
            a.count(AppCounter::TxFrames);
            if !a.area.valid(d) || (d.len as usize) < 14 || d.len as usize > max_len {
                a.count(AppCounter::BadDescriptor);
                if d.buf < a.bufs.count() && a.done.push_one(d.buf).is_err() {
                    a.count(AppCounter::DoneFull);
                }
                continue;
            }
            let Some(&nb) = self.txa.get(next_nb) else {
                a.count(AppCounter::TxDropped);
                if a.done.push_one(d.buf).is_err() {
                    a.count(AppCounter::DoneFull);
                }
                continue;
            };
            next_nb += 1;
            let len = d.len as usize;
            let verdict = match (
                a.bufs.frame(d),
                self.stack.nic_mut().buffers_mut().buf_mut(nb),
            ) {
                (Some(src), Some(dst)) if dst.len() >= len => {
                    dst[..len].copy_from_slice(src);
                    // Checked on our copy: the application cannot change it now.
                    let who = txcheck::Sender {
                        k: k as u16,
                        ports: &self.ports,
                        frags: &a.frags,
                    };
                    txcheck::check(&dst[..len], us, who)
                }
                _ => Err(AppCounter::BadDescriptor),
            };
            if a.done.push_one(d.buf).is_err() {
                a.count(AppCounter::DoneFull);
            }
            let ident = match verdict {
                Ok(txcheck::Pass::AsIs) => None,
                Ok(txcheck::Pass::Ident(i)) => Some(i),
                Ok(txcheck::Pass::First {
                    app_ident,
                    dst,
                    proto,
                }) => {
                    let i = self.stack.next_ip_ident(dst, proto);
                    let a = self.apps[k].as_mut().expect("checked");
                    a.frags.insert(app_ident, dst, proto, i);
                    Some(i)
                }
                Err(c) => {
                    let a = self.apps[k].as_mut().expect("checked");
                    a.count(c);
                    self.rel.push(Desc::new(nb, 0));
                    continue;
                }
            };
            if let (Some(i), Some(f)) = (ident, self.stack.nic_mut().buffers_mut().buf_mut(nb)) {
                txcheck::set_ident(&mut f[..len], i);
            }
            self.txb.push(Desc::new(nb, len as u16));
        }
        for &nb in &self.txa[next_nb.min(self.txa.len())..] {
            self.rel.push(Desc::new(nb, 0));
        }
        let sent = self.stack.nic_mut().send(&self.txb);
        self.stats.tx_frames += sent as u64;
        if sent < self.txb.len() {
            let a = self.apps[k].as_mut().expect("checked");
            a.counters[AppCounter::TxDropped as usize] += (self.txb.len() - sent) as u64;
            for &d in &self.txb[sent..] {
                self.rel.push(Desc::new(d.buf, 0));
            }
        }
        self.txb.clear();
        if !self.rel.is_empty() {
            self.stack.nic_mut().release(&self.rel);
            self.rel.clear();
        }
        n
    }
}

impl<N: Nic> Drop for Daemon<N> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.cfg.socket);
    }
}

fn is_arp_reply(f: &[u8]) -> bool {
    f.len() >= 42 && f[12..14] == [0x08, 0x06] && f[20..22] == [0, 2]
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
