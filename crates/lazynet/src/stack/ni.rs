//! The `ni-lrp` receive mode: demultiplexing on a separate "NI" thread.
//!
//! LRP with NI demux (§3, §3.2) lets the network adapter's own processor
//! classify every frame onto its socket's channel and drop excess at a full
//! channel, so the host spends nothing on a packet until its owner runs.
//! Here a thread pinned to its own core plays the adapter: [`NiEngine`].
//!
//! **[`NiEngine`] owns:** the real NIC, a [`Classifier`] of its own (the
//! same code as the host's; its channels push into the host's rings), the
//! producer ends of the free-buffer ring and of every channel's inbound
//! ring and of the ready ring, the consumer ends of the transmit and
//! release rings, and its counters. It runs no protocol code.
//!
//! **[`NiProxy`] (the host's proxy NIC) owns:** the other ends of the free,
//! transmit and release rings. `recv` returns nothing (frames arrive on
//! channels); `alloc` takes indices from the free ring the NI keeps topped
//! up; `send` and `release` push onto rings the NI forwards to the real NIC
//! in batches. Its [`BufArea`] is a clone of the real NIC's: both threads
//! address the same buffers, and a buffer's ownership moves only with its
//! descriptor through a ring (`Release` push, `Acquire` pop), which orders
//! the previous owner's accesses before the next owner's.
//!
//! **May not touch:** the NI never touches protocol state, sockets, or a
//! buffer it has handed over; the host never touches the real NIC.
//!
//! **Control path.** The host's classifier stays authoritative: bind
//! conflicts and channel ids are decided there. Each bind or unbind is then
//! mirrored to the NI as a command on an `mpsc` queue (control path: it
//! allocates), applied in order at the start of the NI's next step, which
//! then publishes how many it applied (`applied`, `Release`). A bind carries
//! the producer of the new channel's inbound ring and its ready flag. After
//! an unbind the NI may still have pushed frames onto the old ring before it
//! applied the command, so the host keeps the old consumer as *retired*
//! with the command's sequence number and drains it (each frame released
//! and counted as `SocketClosed`) once `applied` reaches that number
//! (`Acquire`: every push onto the ring happened before). Commands are FIFO,
//! so a channel id the host reuses is bound on the NI only after the old
//! binding is gone; a stale id on the ready ring only causes a spurious
//! visit.
//!
//! **Notification.** TCP channels are notifying: after each batch the NI
//! takes its classifier's ready list and, for each channel whose shared
//! [`ReadyFlag`] it arms, pushes the host's channel id onto the ready ring
//! (kept and retried next step if the ring is full). The host's
//! [`Classifier::take_ready`] pops the ids, disarms, and puts channels that
//! hold frames on its own ready list. Why this cannot strand a frame:
//! [`crate::mem::notify`] (and `tests/loom/notify.rs`).
//!
//! **Counters.** The NI's [`DemuxStats`], the frames it received, the bad
//! descriptors it met and its transmit counters are published once per
//! step (atomic stores of running totals) and merged into
//! [`Stack::stats`], so `frames_accounted` still covers every frame the
//! real NIC delivered. They are exact when the engine is quiescent (between
//! steps of a stepped engine, or after it stopped); while it runs they lag
//! by at most one batch.
//!
//! **Work bound of [`NiEngine::step`]:** at most [`NI_CMDS_PER_STEP`]
//! commands, `rx_batch` frames received and classified, [`MAX_BATCH`] frames
//! transmitted, [`NI_RELEASES_PER_STEP`] buffers released, one ready-ring
//! sweep over the channels that received frames, and one refill of the free
//! ring. Nothing on the data path allocates, locks or makes a system call
//! of its own (the real NIC's driver may).
//!
//! **Shutdown.** Buffers are never lost, but a buffer the host holds can
//! only go back to the NIC through the NI: call [`Stack::ni_quiesce`] until
//! it returns true (the NI stops receiving and refilling; the host gives
//! back everything queued on rings and channels), then stop the engine
//! ([`NiEngine::run`] returns the NIC after a last forwarding pass). A
//! frame the real NIC still refuses to send at that point is released and
//! counted as dropped. Dropping an engine without this drops its NIC with
//! whatever the host held still outstanding (the memory itself stays valid:
//! it is kept alive by every clone of the area).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::{ReceiveMode, Stack, StackConfig, StackDrop, MAX_BATCH};
use crate::demux::{ChannelId, Classifier, DemuxStats, DropReason, Link, CONTROL, FRAGMENT};
use crate::mem::ring::{self, Consumer, Producer};
use crate::mem::{Applied, BufArea, Desc, FlagRef};
use crate::nic::Nic;

/// Commands the NI applies per step (the rest wait for the next one).
pub const NI_CMDS_PER_STEP: usize = 64;
/// Buffers the NI forwards from the release ring per step.
pub const NI_RELEASES_PER_STEP: usize = 4 * MAX_BATCH;
/// Steps the NI retries frames the real NIC refused before it drops them.
pub const NI_TX_RETRY_STEPS: u32 = 1024;
/// Idle steps after which [`NiEngine::run`] yields its CPU between steps.
const NI_IDLE_YIELD_AFTER: u32 = 1 << 10;
/// Idle steps after which [`NiEngine::run`] naps 20 µs between steps.
const NI_IDLE_NAP_AFTER: u32 = 1 << 16;
/// Capacity of the ready ring (channels notified at once; more wait on the NI).
const READY_RING: u32 = 1024;

/// Smallest power of two ≥ `n`, within the ring limits.
fn ring_cap(n: usize) -> u32 {
    (n.clamp(1, 1 << 20) as u32).next_power_of_two()
}

/// The NI's end of one channel's link, carried by a bind command.
pub(super) struct OutLink {
    ring: Producer<Desc>,
    flag: FlagRef,
    host_id: u32,
}

impl OutLink {
    fn into_link(self) -> Link {
        Link::Outbound {
            ring: self.ring,
            flag: self.flag,
            host_id: self.host_id,
        }
    }
}

/// A binding change mirrored from the host's classifier to the NI's.
pub(super) enum Cmd {
    Udp(Ipv4Addr, u16, OutLink),
    UdpOff(Ipv4Addr, u16),
    Listen(Ipv4Addr, u16, OutLink),
    ListenOff(Ipv4Addr, u16),
    Conn(SocketAddrV4, SocketAddrV4, OutLink),
    ConnOff(SocketAddrV4, SocketAddrV4),
    /// Stop receiving and refilling the free ring (shutdown).
    Quiesce,
}

/// Counters the NI publishes (running totals, single writer).
pub(super) struct Shared {
    applied: Applied,
    rx_frames: AtomicU64,
    demux_frames: AtomicU64,
    demux_enqueued: AtomicU64,
    drops: [AtomicU64; DropReason::ALL.len()],
    bad_desc: AtomicU64,
    tx_forwarded: AtomicU64,
    tx_dropped: AtomicU64,
    tx_retries: AtomicU64,
    cmd_errors: AtomicU64,
}

impl Shared {
    fn new() -> Self {
        Shared {
            applied: Applied::new(),
            rx_frames: AtomicU64::new(0),
            demux_frames: AtomicU64::new(0),
            demux_enqueued: AtomicU64::new(0),
            drops: std::array::from_fn(|_| AtomicU64::new(0)),
            bad_desc: AtomicU64::new(0),
            tx_forwarded: AtomicU64::new(0),
            tx_dropped: AtomicU64::new(0),
            tx_retries: AtomicU64::new(0),
            cmd_errors: AtomicU64::new(0),
        }
    }
}

/// A snapshot of the NI's counters ([`Stack::ni_stats`]).
#[derive(Clone, Debug, Default)]
pub struct NiStats {
    /// Frames the real NIC delivered to the NI.
    pub rx_frames: u64,
    /// The NI classifier's counters (its drops are the early discards).
    pub demux: DemuxStats,
    /// Descriptors from the real NIC that name no buffer.
    pub bad_descriptors: u64,
    /// Frames forwarded to the real NIC.
    pub tx_forwarded: u64,
    /// Frames the real NIC kept refusing, released (counted as `TxRingFull`).
    pub tx_dropped: u64,
    /// Steps in which the real NIC refused some frames.
    pub tx_retries: u64,
    /// Commands applied.
    pub commands_applied: u64,
    /// Commands the NI could not apply (should stay 0: the host decides).
    pub command_errors: u64,
}

fn snapshot(s: &Shared) -> NiStats {
    let mut d = DemuxStats {
        frames: s.demux_frames.load(Relaxed),
        enqueued: s.demux_enqueued.load(Relaxed),
        ..DemuxStats::default()
    };
    for (i, v) in s.drops.iter().enumerate() {
        d.drops[i] = v.load(Relaxed);
    }
    NiStats {
        rx_frames: s.rx_frames.load(Relaxed),
        demux: d,
        bad_descriptors: s.bad_desc.load(Relaxed),
        tx_forwarded: s.tx_forwarded.load(Relaxed),
        tx_dropped: s.tx_dropped.load(Relaxed),
        tx_retries: s.tx_retries.load(Relaxed),
        commands_applied: s.applied.get(),
        command_errors: s.cmd_errors.load(Relaxed),
    }
}

/// The host's proxy for the NIC the NI owns (see the module docs).
pub struct NiProxy {
    mac: [u8; 6],
    mtu: usize,
    area: BufArea,
    free: Consumer<u32>,
    tx: Producer<Desc>,
    rel: Producer<Desc>,
    /// Releases the ring refused (cannot happen: it holds every buffer).
    lost_releases: u64,
}

impl NiProxy {
    /// Buffers the release ring refused; 0 unless something is badly wrong
    /// (the ring is sized to hold every buffer of the NIC).
    pub fn lost_releases(&self) -> u64 {
        self.lost_releases
    }
}

impl std::fmt::Debug for NiProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NiProxy").field("mac", &self.mac).finish()
    }
}

impl Nic for NiProxy {
    fn mac(&self) -> [u8; 6] {
        self.mac
    }
    fn mtu(&self) -> usize {
        self.mtu
    }
    fn buffers(&self) -> &BufArea {
        &self.area
    }
    fn buffers_mut(&mut self) -> &mut BufArea {
        &mut self.area
    }
    /// Nothing: in `ni-lrp` every frame arrives on a channel.
    fn recv(&mut self, _out: &mut [Desc]) -> usize {
        0
    }
    fn alloc(&mut self, out: &mut [u32]) -> usize {
        self.free.pop(out)
    }
    fn send(&mut self, frames: &[Desc]) -> usize {
        self.tx.push(frames)
    }
    fn release(&mut self, bufs: &[Desc]) {
        let n = self.rel.push(bufs);
        self.lost_releases += (bufs.len() - n) as u64;
    }
    /// The NI thread wrote the frames and refills the buffers given back.
    fn cross_core_buffers(&self) -> bool {
        true
    }
}

/// The host's side of the link to the NI, kept in its [`Stack`].
pub(super) struct NiLink {
    to: NiTo,
    /// Commands sent so far (the last one's sequence number).
    sent: u64,
    /// Inbound rings of unbound channels, with the unbind's sequence number
    /// (and, attached to a daemon, the slot the ring is in).
    retired: Vec<(u64, Consumer<Desc>, Option<u32>)>,
    detached: Vec<(ChannelId, Link)>,
    /// Sequence number of the quiesce command, once sent.
    quiesce: Option<u64>,
}

/// Where the NI is: a thread of this process, or a daemon this process is
/// attached to ([`RemoteNi`]).
pub(super) enum NiTo {
    Thread {
        cmds: Sender<Cmd>,
        shared: Arc<Shared>,
    },
    Daemon(Box<dyn RemoteNi>),
}

/// An NI in another process (the daemon an attached stack talks to,
/// `attached`): what the host's side of `ni-lrp` asks of it. A trait, so
/// that this module does not name the attached placement's types (and
/// the two do not import each other).
pub(super) trait RemoteNi: Send {
    /// Commands sent so far (their sequence numbers run up to this).
    fn sent(&self) -> u64;
    /// The sequence number of the last command the daemon applied.
    fn applied(&self) -> u64;
    /// Binds host channel `chan` there; its inbound link, or the refusal.
    fn bind(&mut self, chan: ChannelId, kind: &BindKind)
        -> Result<Link, crate::stack::SocketError>;
    /// Mirrors an unbind.
    fn unbind(&mut self, kind: &BindKind);
    /// The slot of the shared area channel `c`'s ring is in.
    fn slot_of(&mut self, c: ChannelId) -> Option<u32>;
    /// Gives slot `s` back (its ring drained and detached).
    fn free_slot(&mut self, s: u32);
    /// Moves the channels whose bind was refused to `out`.
    fn take_refused(&mut self, out: &mut Vec<u32>);
    /// The NI's published counters.
    fn snapshot(&self) -> NiStats;
}

impl NiLink {
    pub(super) fn remote(link: Box<dyn RemoteNi>) -> NiLink {
        NiLink {
            to: NiTo::Daemon(link),
            sent: 0,
            retired: Vec::new(),
            detached: Vec::new(),
            quiesce: None,
        }
    }

    fn send(&mut self, c: Cmd) -> u64 {
        self.sent += 1;
        if let NiTo::Thread { cmds, .. } = &self.to {
            // A closed queue means the engine is gone; nothing will push then.
            let _ = cmds.send(c);
        }
        self.sent
    }

    fn applied(&self) -> u64 {
        match &self.to {
            NiTo::Thread { shared, .. } => shared.applied.get(),
            NiTo::Daemon(d) => d.applied(),
        }
    }
}

/// A fresh link pair for host channel `id` with room for `cap` frames
/// (rounded up to a power of two).
fn link_pair(id: ChannelId, cap: usize) -> (Link, OutLink) {
    let (p, c) = ring::heap::<Desc>(ring_cap(cap));
    let flag = FlagRef::heap();
    (
        Link::Inbound {
            ring: c,
            flag: flag.clone(),
        },
        OutLink {
            ring: p,
            flag,
            host_id: id.0,
        },
    )
}

/// What a host-side bind mirrors.
pub(super) enum BindKind {
    Udp(Ipv4Addr, u16),
    Listen(Ipv4Addr, u16),
    Conn(SocketAddrV4, SocketAddrV4),
}

impl<N: Nic> Stack<N> {
    /// `ni-lrp`: gives the new host channel `chan` (of `cap` frames) an
    /// inbound ring and mirrors the binding to the NI. No-op in other modes.
    /// Attached to a daemon, the daemon may refuse (a port another
    /// application holds): the local binding is undone and the error
    /// returned.
    pub(super) fn ni_bind(
        &mut self,
        chan: ChannelId,
        cap: usize,
        kind: BindKind,
    ) -> Result<(), crate::stack::SocketError> {
        let Some(ni) = self.ni.as_deref_mut() else {
            return Ok(());
        };
        if let NiTo::Daemon(d) = &mut ni.to {
            let r = d.bind(chan, &kind);
            ni.sent = d.sent();
            match r {
                Ok(inb) => {
                    self.demux.attach_link(chan, inb);
                    return Ok(());
                }
                Err(e) => {
                    let mut left = Vec::new();
                    let _ = match kind {
                        BindKind::Udp(a, p) => self.demux.unbind_udp(a, p, &mut left),
                        BindKind::Listen(a, p) => self.demux.unbind_tcp_listen(a, p, &mut left),
                        BindKind::Conn(l, r) => self.demux.unbind_tcp_conn(l, r, &mut left),
                    };
                    // Nothing was queued yet: the channel was just made.
                    let mut gone = Vec::new();
                    self.demux.take_detached(&mut gone);
                    for d in left {
                        self.drop_queued(d);
                    }
                    return Err(e);
                }
            }
        }
        let (inb, out) = link_pair(chan, cap);
        self.demux.attach_link(chan, inb);
        ni.send(match kind {
            BindKind::Udp(a, p) => Cmd::Udp(a, p, out),
            BindKind::Listen(a, p) => Cmd::Listen(a, p, out),
            BindKind::Conn(l, r) => Cmd::Conn(l, r, out),
        });
        Ok(())
    }

    /// `ni-lrp`: mirrors an unbind the host just did and retires the old
    /// channel's inbound ring. No-op in other modes.
    pub(super) fn ni_unbind(&mut self, kind: BindKind) {
        let Some(ni) = self.ni.as_deref_mut() else {
            return;
        };
        let seq = match &mut ni.to {
            NiTo::Daemon(d) => {
                d.unbind(&kind);
                ni.sent = d.sent();
                ni.sent
            }
            NiTo::Thread { .. } => ni.send(match kind {
                BindKind::Udp(a, p) => Cmd::UdpOff(a, p),
                BindKind::Listen(a, p) => Cmd::ListenOff(a, p),
                BindKind::Conn(l, r) => Cmd::ConnOff(l, r),
            }),
        };
        self.demux.take_detached(&mut ni.detached);
        for (c, l) in ni.detached.drain(..) {
            if let Link::Inbound { ring, .. } = l {
                let slot = match &mut ni.to {
                    NiTo::Daemon(d) => d.slot_of(c),
                    NiTo::Thread { .. } => None,
                };
                ni.retired.push((seq, ring, slot));
            }
        }
        self.ni_retire();
    }

    /// `ni-lrp`: drains the retired rings the NI no longer uses, releasing
    /// and counting their frames. Bounded by the retired rings' capacities.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(super) fn ni_retire(&mut self) {
        let Some(ni) = self.ni.as_deref_mut() else {
            return;
        };
        if ni.retired.is_empty() {
            return;
        }
        let applied = ni.applied();
        let mut i = 0;
        while i < ni.retired.len() {
            if ni.retired[i].0 > applied {
                i += 1;
                continue;
            }
            let (_, mut ring, slot) = ni.retired.swap_remove(i);
            for _ in 0..ring.capacity() {
                let Some(d) = ring.pop_one() else { break };
                self.stats.drops[StackDrop::SocketClosed as usize] += 1;
                self.stats.rx_frame_drops += 1;
                self.iface.release(d);
            }
            if let (Some(s), NiTo::Daemon(d)) = (slot, &mut ni.to) {
                // Drained and detached: the slot may serve another socket.
                drop(ring);
                d.free_slot(s);
            }
        }
        self.iface.flush_release();
    }

    /// Attached to a daemon: the connections whose binding it refused (a
    /// 4-tuple another socket holds) fail with `AddrInUse`, silently (the
    /// 4-tuple is not theirs to answer for). One look at the reply ring
    /// when there is nothing; bounded by the ring.
    pub(super) fn ni_refusals(&mut self, now: u64) {
        let Some(ni) = self.ni.as_deref_mut() else {
            return;
        };
        let NiTo::Daemon(d) = &mut ni.to else {
            return;
        };
        let mut refused = std::mem::take(&mut self.refused);
        d.take_refused(&mut refused);
        for &id in &refused {
            self.fail_refused(ChannelId(id), now);
        }
        refused.clear();
        self.refused = refused;
    }

    /// Frames on retired rings (still queued, for [`Stack::queued_frames`]).
    pub(super) fn ni_retired_frames(&self) -> usize {
        self.ni.as_deref().map_or(0, |ni| {
            ni.retired.iter().map(|(_, r, _)| r.peek_len()).sum()
        })
    }

    /// Adds the NI's published counters to `s` (see the module docs).
    pub(super) fn ni_merge(&self, s: &mut super::StackStats) {
        let Some(ni) = self.ni.as_deref() else {
            return;
        };
        let n = match &ni.to {
            NiTo::Thread { shared, .. } => snapshot(shared),
            NiTo::Daemon(d) => d.snapshot(),
        };
        s.rx_frames += n.rx_frames;
        s.demux.frames += n.demux.frames;
        s.demux.enqueued += n.demux.enqueued;
        for (a, b) in s.demux.drops.iter_mut().zip(n.demux.drops) {
            *a += b;
        }
        s.drops[StackDrop::BadDescriptor as usize] += n.bad_descriptors;
        s.rx_frame_drops += n.bad_descriptors;
        s.drops[StackDrop::TxRingFull as usize] += n.tx_dropped;
    }

    /// The NI's counters, in `ni-lrp` mode.
    pub fn ni_stats(&self) -> Option<NiStats> {
        self.ni.as_deref().map(|ni| match &ni.to {
            NiTo::Thread { shared, .. } => snapshot(shared),
            NiTo::Daemon(d) => d.snapshot(),
        })
    }

    /// Shutdown step of `ni-lrp` (see the module docs): asks the NI to stop
    /// receiving (first call), and once it has, gives back every buffer the
    /// host holds on rings and channels (queued frames are counted as
    /// `SocketClosed`). Returns true when that is done; call it again until
    /// then, with the engine running or stepped. Receiving stops for good.
    /// True at once in the other modes.
    pub fn ni_quiesce(&mut self) -> bool {
        let Some(ni) = self.ni.as_deref_mut() else {
            return true;
        };
        if matches!(ni.to, NiTo::Daemon(_)) {
            // The area is this process's: leaving the daemon gives it all back.
            return true;
        }
        let seq = match ni.quiesce {
            Some(s) => s,
            None => {
                let s = ni.send(Cmd::Quiesce);
                ni.quiesce = Some(s);
                s
            }
        };
        if ni.applied() < seq {
            return false;
        }
        // The NI pushes nothing any more: drain everything.
        let mut b = [0u32; 64];
        for _ in 0..(1 << 20) / 64 {
            let n = self.iface.nic.alloc(&mut b);
            for &x in &b[..n] {
                self.iface.release(Desc::new(x, 0));
            }
            if n == 0 {
                break;
            }
        }
        if let Some(x) = self.iface.spare.take() {
            self.iface.release(Desc::new(x, 0));
        }
        for i in 0..self.demux.channel_slots() {
            let c = ChannelId(i as u32);
            // Local slots and inbound ring; nothing is added meanwhile.
            let n = self.demux.queued(c);
            for _ in 0..n {
                let Some(d) = self.demux.channel_mut(c).and_then(|ch| ch.pop()) else {
                    break;
                };
                self.drop_queued(d);
            }
        }
        // Every earlier unbind was applied before the quiesce (FIFO).
        self.ni_retire();
        self.iface.flush_release();
        true
    }
}

impl Stack<NiProxy> {
    /// A stack in the `ni-lrp` receive mode: the returned [`NiEngine`] owns
    /// `nic` and must be stepped ([`NiEngine::step`]) or run on its own
    /// thread ([`NiEngine::spawn`]); the stack talks to it through a
    /// [`NiProxy`]. `cfg.mode` is ignored (it is `NiLrp`).
    pub fn new_ni_lrp<M: Nic>(nic: M, cfg: StackConfig) -> (Stack<NiProxy>, NiEngine<M>) {
        let area = nic.buffers().clone();
        let count = area.count() as usize;
        let (mac, mtu) = (nic.mac(), nic.mtu());
        // The free ring holds at most a quarter of the buffers (and 256), so
        // the NI does not hoard buffers a driver may also receive into.
        let q = (count / 4).clamp(1, 256) as u32;
        let (free_p, free_c) = ring::heap::<u32>(1 << (31 - q.leading_zeros()));
        // Release ring: every buffer fits, so a release never fails.
        let (rel_p, rel_c) = ring::heap::<Desc>(ring_cap(count.max(MAX_BATCH)));
        let (tx_p, tx_c) = ring::heap::<Desc>(ring_cap(count.clamp(MAX_BATCH, 4096)));
        let (ready_p, ready_c) = ring::heap::<u32>(READY_RING);
        let (cmd_tx, cmd_rx) = mpsc::channel();
        let shared = Arc::new(Shared::new());
        let proxy = NiProxy {
            mac,
            mtu,
            area,
            free: free_c,
            tx: tx_p,
            rel: rel_p,
            lost_releases: 0,
        };
        let (control_cap, fragment_cap, rx_batch) =
            (cfg.control_cap, cfg.fragment_cap, cfg.rx_batch);
        let mut ni_demux = Classifier::new(mac, cfg.addr, cfg.prefix_len, 1, 1);
        let mut stack = Stack::new(
            proxy,
            StackConfig {
                mode: ReceiveMode::SoftLrp,
                ..cfg
            },
        );
        stack.mode = ReceiveMode::NiLrp;
        // The NI's tables are keyed as the host's (see `Stack::new`).
        ni_demux.set_hash_key(stack.tcp.demux_key());
        for (c, cap) in [(CONTROL, control_cap), (FRAGMENT, fragment_cap)] {
            let (inb, out) = link_pair(c, cap);
            stack.demux.attach_link(c, inb);
            ni_demux.attach_link(c, out.into_link());
        }
        stack.demux.set_ready_inbound(ready_c);
        stack.ni = Some(Box::new(NiLink {
            to: NiTo::Thread {
                cmds: cmd_tx,
                shared: shared.clone(),
            },
            sent: 0,
            retired: Vec::new(),
            detached: Vec::new(),
            quiesce: None,
        }));
        let engine = NiEngine {
            nic,
            demux: ni_demux,
            cmds: cmd_rx,
            shared,
            free: free_p,
            tx: tx_c,
            rel: rel_c,
            ready: ready_p,
            rx: vec![Desc::default(); MAX_BATCH].into_boxed_slice(),
            rx_batch: rx_batch.clamp(1, MAX_BATCH),
            tx_pend: [Desc::default(); MAX_BATCH],
            tx_pend_at: 0,
            tx_pend_len: 0,
            tx_tries: 0,
            drop_rel: Vec::with_capacity(MAX_BATCH),
            ready_ids: Vec::new(),
            ready_pend: Vec::new(),
            leftover: Vec::new(),
            applied: 0,
            quiesced: false,
            rx_frames: 0,
            bad_desc: 0,
            tx_forwarded: 0,
            tx_dropped: 0,
            tx_retries: 0,
            cmd_errors: 0,
        };
        (stack, engine)
    }
}

/// The NI: demultiplexes the real NIC's frames onto the host's channels and
/// forwards the host's transmissions and releases (see the module docs).
pub struct NiEngine<N: Nic> {
    nic: N,
    demux: Classifier,
    cmds: Receiver<Cmd>,
    shared: Arc<Shared>,
    free: Producer<u32>,
    tx: Consumer<Desc>,
    rel: Consumer<Desc>,
    ready: Producer<u32>,
    rx: Box<[Desc]>,
    rx_batch: usize,
    /// Frames the real NIC refused, in order, retried first.
    tx_pend: [Desc; MAX_BATCH],
    tx_pend_at: usize,
    tx_pend_len: usize,
    tx_tries: u32,
    drop_rel: Vec<Desc>,
    ready_ids: Vec<u32>,
    /// Host ids whose flag we armed but that did not fit on the ready ring.
    ready_pend: Vec<u32>,
    leftover: Vec<Desc>,
    applied: u64,
    quiesced: bool,
    rx_frames: u64,
    bad_desc: u64,
    tx_forwarded: u64,
    tx_dropped: u64,
    tx_retries: u64,
    cmd_errors: u64,
}

impl<N: Nic> std::fmt::Debug for NiEngine<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NiEngine")
            .field("applied", &self.applied)
            .field("rx_frames", &self.rx_frames)
            .finish()
    }
}

impl<N: Nic> NiEngine<N> {
    /// The real NIC.
    pub fn nic(&self) -> &N {
        &self.nic
    }

    /// The real NIC, mutably (tests; the engine must not be running).
    pub fn nic_mut(&mut self) -> &mut N {
        &mut self.nic
    }

    /// The NI's classifier (read-only).
    pub fn demux(&self) -> &Classifier {
        &self.demux
    }

    /// One bounded batch (see the module docs for the bound): apply
    /// commands, receive and classify, notify, forward transmissions and
    /// releases, refill the free ring, publish counters. Returns the units
    /// of work done (0: idle).
    pub fn step(&mut self) -> usize {
        let mut work = self.apply_commands();
        if !self.quiesced {
            work += self.receive();
        }
        self.notify();
        work += self.forward_tx();
        work += self.forward_releases();
        if !self.quiesced {
            self.refill();
        }
        self.nic.flush();
        self.publish();
        work
    }

    fn apply_commands(&mut self) -> usize {
        let mut n = 0;
        while n < NI_CMDS_PER_STEP {
            let Ok(c) = self.cmds.try_recv() else { break };
            n += 1;
            let d = &mut self.demux;
            let left = &mut self.leftover;
            let ok = match c {
                Cmd::Udp(a, p, l) => d
                    .bind_udp(a, p, 1)
                    .map(|id| d.attach_link(id, l.into_link()))
                    .is_ok(),
                Cmd::Listen(a, p, l) => d
                    .bind_tcp_listen(a, p, 1)
                    .map(|id| d.attach_link(id, l.into_link()))
                    .is_ok(),
                Cmd::Conn(lo, r, l) => d
                    .bind_tcp_conn(lo, r, 1)
                    .map(|id| d.attach_link(id, l.into_link()))
                    .is_ok(),
                Cmd::UdpOff(a, p) => d.unbind_udp(a, p, left).is_ok(),
                Cmd::ListenOff(a, p) => d.unbind_tcp_listen(a, p, left).is_ok(),
                Cmd::ConnOff(lo, r) => d.unbind_tcp_conn(lo, r, left).is_ok(),
                Cmd::Quiesce => {
                    self.quiesced = true;
                    true
                }
            };
            if !ok {
                self.cmd_errors += 1;
            }
            // Outbound links of freed channels: dropping the producer is all
            // (their local slots are never used on the NI).
            let mut gone = Vec::new();
            self.demux.take_detached(&mut gone);
            drop(gone);
            self.leftover.clear();
        }
        if n > 0 {
            // Room for every channel in the notification lists, reserved
            // here on the control path so that `notify` never allocates.
            let want = self.demux.channel_slots() + 2;
            for v in [&mut self.ready_ids, &mut self.ready_pend] {
                if v.capacity() < want {
                    v.reserve(want - v.len());
                }
            }
            self.applied += n as u64;
            // Every push onto a ring unbound by these commands happened
            // before: the host may drain it (mem::notify::Applied).
            self.shared.applied.publish(self.applied);
        }
        n
    }

    fn receive(&mut self) -> usize {
        let n = self.nic.recv(&mut self.rx[..self.rx_batch]);
        self.rx_frames += n as u64;
        for i in 0..n {
            let d = self.rx[i];
            match self.nic.buffers().frame(d) {
                Some(f) => {
                    if self.demux.deliver(d, f).is_err() {
                        // Early discard on the NI: the host never sees it.
                        self.drop_rel.push(d);
                    }
                }
                None => self.bad_desc += 1,
            }
        }
        if !self.drop_rel.is_empty() {
            self.nic.release(&self.drop_rel);
            self.drop_rel.clear();
        }
        n
    }

    /// Puts channels that received frames on the host's ready ring, each at
    /// most once (see [`crate::mem::notify`]).
    fn notify(&mut self) {
        // Earlier ids that did not fit first, in order.
        let mut k = 0;
        while k < self.ready_pend.len() {
            if self.ready.push_one(self.ready_pend[k]).is_err() {
                break;
            }
            k += 1;
        }
        self.ready_pend.drain(..k);
        self.demux.take_ready(&mut self.ready_ids);
        for &id in &self.ready_ids {
            if let Some((flag, host)) = self.demux.notify_target(id) {
                // After the frames were published on the channel's ring.
                if flag.arm() && (!self.ready_pend.is_empty() || self.ready.push_one(host).is_err())
                {
                    self.ready_pend.push(host);
                }
            }
        }
        self.ready_ids.clear();
    }

    fn forward_tx(&mut self) -> usize {
        if self.tx_pend_len == 0 {
            self.tx_pend_at = 0;
            self.tx_pend_len = self.tx.pop(&mut self.tx_pend);
            self.tx_tries = 0;
        }
        if self.tx_pend_len == 0 {
            return 0;
        }
        let at = self.tx_pend_at;
        let k = self.nic.send(&self.tx_pend[at..at + self.tx_pend_len]);
        self.tx_forwarded += k as u64;
        self.tx_pend_at += k;
        self.tx_pend_len -= k;
        if self.tx_pend_len > 0 {
            self.tx_retries += 1;
            self.tx_tries += 1;
            if self.tx_tries > NI_TX_RETRY_STEPS {
                self.drop_pending_tx();
            }
        }
        k
    }

    /// Gives up on the frames the real NIC keeps refusing (counted).
    fn drop_pending_tx(&mut self) {
        let at = self.tx_pend_at;
        self.nic.release(&self.tx_pend[at..at + self.tx_pend_len]);
        self.tx_dropped += self.tx_pend_len as u64;
        self.tx_pend_len = 0;
        self.tx_pend_at = 0;
    }

    fn forward_releases(&mut self) -> usize {
        let mut buf = [Desc::default(); MAX_BATCH];
        let mut done = 0;
        while done < NI_RELEASES_PER_STEP {
            let n = self.rel.pop(&mut buf);
            if n == 0 {
                break;
            }
            self.nic.release(&buf[..n]);
            done += n;
        }
        done
    }

    fn refill(&mut self) {
        let want = self.free.free().min(64);
        if want == 0 {
            return;
        }
        let mut b = [0u32; 64];
        let n = self.nic.alloc(&mut b[..want]);
        let k = self.free.push(&b[..n]);
        if k < n {
            // Cannot happen (we checked the room); never lose a buffer.
            let back: Vec<Desc> = b[k..n].iter().map(|&x| Desc::new(x, 0)).collect();
            self.nic.release(&back);
        }
    }

    fn publish(&self) {
        let s = &self.shared;
        let d = self.demux.stats();
        s.rx_frames.store(self.rx_frames, Relaxed);
        s.demux_frames.store(d.frames, Relaxed);
        s.demux_enqueued.store(d.enqueued, Relaxed);
        for (a, &v) in s.drops.iter().zip(d.drops.iter()) {
            a.store(v, Relaxed);
        }
        s.bad_desc.store(self.bad_desc, Relaxed);
        s.tx_forwarded.store(self.tx_forwarded, Relaxed);
        s.tx_dropped.store(self.tx_dropped, Relaxed);
        s.tx_retries.store(self.tx_retries, Relaxed);
        s.cmd_errors.store(self.cmd_errors, Relaxed);
    }

    /// Busy-polls [`NiEngine::step`] until `stop` is raised, then makes a
    /// last pass (commands, transmissions, releases; frames the NIC still
    /// refuses are released and counted) and returns the NIC.
    pub fn run(mut self, stop: &AtomicBool) -> N {
        let mut idle = 0u32;
        while !stop.load(Acquire) {
            if self.step() == 0 {
                idle = idle.saturating_add(1);
                // A spinning NI core is the model; still let a shared core
                // breathe when there has been nothing to do for a while:
                // yield after ~1k idle steps, nap briefly after ~64k (a
                // long idle period; the nap bounds the added latency).
                if idle > NI_IDLE_NAP_AFTER {
                    std::thread::sleep(std::time::Duration::from_micros(20));
                } else if idle > NI_IDLE_YIELD_AFTER {
                    std::thread::yield_now();
                }
            } else {
                idle = 0;
            }
        }
        self.finish()
    }

    /// The last pass of [`NiEngine::run`], for a stepped engine too.
    pub fn finish(mut self) -> N {
        self.apply_commands();
        self.publish();
        for _ in 0..4 {
            self.forward_tx();
        }
        if self.tx_pend_len > 0 {
            self.drop_pending_tx();
        }
        // The release ring holds at most every buffer: bounded.
        for _ in 0..(1 << 20) / NI_RELEASES_PER_STEP {
            if self.forward_releases() == 0 {
                break;
            }
        }
        self.nic.flush();
        self.publish();
        self.nic
    }

    /// Runs the engine on a new thread, pinned to `cpu` if given (best
    /// effort), until `stop`; the handle yields the NIC.
    pub fn spawn(self, cpu: Option<usize>, stop: Arc<AtomicBool>) -> std::io::Result<JoinHandle<N>>
    where
        N: Send + 'static,
    {
        std::thread::Builder::new()
            .name("lazynet-ni".into())
            .spawn(move || {
                if let Some(c) = cpu {
                    crate::sys::pin_thread(c);
                }
                self.run(&stop)
            })
    }
}
