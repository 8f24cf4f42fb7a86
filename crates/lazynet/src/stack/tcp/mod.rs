//! TCP in the stack: the tables of connections and listeners, lazy input
//! processing, segment output and the timer queue.
//!
//! **Owns:** one slot per connection (its [`Connection`], its demux channel,
//! its handle generation), one slot per listener, the map from channel to
//! owner, the keyed [`Secret`] for ISNs, ports and cookies (seeded from the
//! stack's RNG at start-up), the ephemeral port allocator (RFC 6056), the
//! timer heap, the RST rate limiter and the event list.
//!
//! **When protocol code runs (LRP §3.4).** Arrival does nothing but queue a
//! descriptor on the connection's (or listener's) channel — the classifier
//! finds it by 4-tuple, then by listening port. The segments are processed
//! later, with an explicit work bound, by whoever calls:
//! * the socket calls of that connection (`stack.tcp_mut(h).recv(…)`,
//!   `.send(…)`, …; their bodies are in `calls`) process its own channel
//!   first, in the caller's context;
//! * [`Stack::tcp_service`] processes the channels on the classifier's
//!   ready list and the expired timers — the owner's protocol handler (one
//!   per process in the embedded placement; with owner tags,
//!   [`Stack::tcp_service_tag`], one per owner, as `host` runs them).
//!
//! When the reader's own `recv` finds its connection's segments still
//! queued and its receive buffer empty, predicted in-order text is placed
//! directly into the reader's buffer (`direct`).
//!
//! A listener whose accept queue is full is not processed at all: its
//! channel fills and further SYNs are dropped there, early, before any
//! protocol work (LRP §3.4, the SYN-flood defence), until `accept` makes
//! room.
//!
//! **A listener whose SYN queue is full, with SYN cookies off, is not
//! processed either — in the lazy modes** (soft-lrp, ni-lrp). Every
//! SYN it could read would be dropped (`ListenDrop::SynQueueFull`) after its
//! checksum, lookups and listener work: the host would burn CPU per spoofed
//! SYN for nothing. RFC 9293 leaves the SYN queue's overflow policy to the
//! implementation; RFC 4987 §3 (and §3.2, "Increasing backlog") lists the
//! usual answers (bigger backlog, recycling the oldest half-open entry, SYN
//! cookies); ours is LRP's: stop, and let the excess fall off at the channel
//! (the 4.4BSD listen backlog of the LRP paper counted half-open entries
//! too). The listener is *stalled* until a SYN-queue slot is freed: its
//! timer path ([`Stack::tcp_service`] firing the listener's SYN-ACK timer)
//! always processes what is queued on its channel first (bounded by the
//! channel and [`MAX_BATCH`]) — so a final ACK of a handshake in progress
//! completes it there, and an ACK that fell off the full channel is
//! repeated by the peer when the SYN-ACK is retransmitted — then expires
//! entries; when that leaves room the listener resumes. The eager modes
//! (`eager`, `early-demux`) keep 4.4BSD's behaviour: every SYN is processed
//! and dropped after the work.
//!
//! The files: `input` (segments in, once parsed), `direct` (direct
//! placement), `output` (segments built in place in NIC buffers, bursts),
//! `timers` (the heap), `service` (the protocol handler and the step after
//! any work), `calls` (the bodies of the socket calls).
//!
//! **May not touch:** the connection internals (only `proto::tcp`'s API),
//! wire bytes other than through `wire` views.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddrV4;

use rand::RngCore;

use super::iface::Iface;
use super::{SocketError, Stack, StackDrop, StackStats, REASM_TAG};
use crate::demux::{BindError, ChannelId, Classifier};
use crate::mem::Desc;
use crate::nic::Nic;
use crate::proto::icmp::RateLimiter;
use crate::proto::tcp::{
    Config, Connection, EphemeralPorts, ListenConfig, Listener, Secret, State, TimeWaitConfig,
    TimeWaitTable,
};

mod calls;
mod direct;
mod input;
mod orphans;
mod output;
mod service;
mod timers;

pub use input::RX_AHEAD;
pub use orphans::OrphanReset;
pub use output::{MAX_TX_PER_CALL, TX_PAYLOAD_AT};
pub use service::SERVICE_PER_CHANNEL;

/// Names a TCP connection of a [`Stack`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TcpStream {
    pub(in crate::stack) idx: u32,
    pub(in crate::stack) gen: u32,
}

/// Names a TCP listener of a [`Stack`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TcpListener {
    pub(in crate::stack) idx: u32,
    pub(in crate::stack) gen: u32,
}

impl TcpStream {
    /// The connection's slot in the stack's table (unique among live
    /// connections; reused after close): an index for callers' own tables.
    pub fn index(&self) -> u32 {
        self.idx
    }
}

impl TcpListener {
    /// The listener's slot in the stack's table (unique among live
    /// listeners; reused after close).
    pub fn index(&self) -> u32 {
        self.idx
    }
}

/// Something happened to a connection or listener since the last
/// [`Stack::tcp_take_events`]: data or room may be there, it may have
/// closed, or connections may wait to be accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TcpEvent {
    /// A connection processed input or a timer.
    Conn(TcpStream),
    /// A listener has connections to accept.
    Listener(TcpListener),
}

/// Who a TCP channel of the classifier belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::stack) enum ChannelOwner {
    None,
    Conn(u32),
    Listener(u32),
}

pub(in crate::stack) struct ConnSlot {
    pub(in crate::stack) conn: Connection,
    pub(in crate::stack) chan: ChannelId,
    pub(in crate::stack) gen: u32,
    /// The application closed its handle; the slot goes when the
    /// connection reaches CLOSED.
    pub(in crate::stack) detached: bool,
    /// The deadline this slot has in the timer heap.
    pub(in crate::stack) armed: Option<u64>,
    pub(in crate::stack) in_events: bool,
    pub(in crate::stack) ip_ident: u16,
    /// Its place on the orphan lists (`orphans`) once detached.
    pub(in crate::stack) orphan: orphans::Links,
}

pub(in crate::stack) struct ListenSlot {
    pub(in crate::stack) l: Listener,
    pub(in crate::stack) chan: ChannelId,
    pub(in crate::stack) gen: u32,
    /// The address the classifier binding uses (may be the wildcard).
    pub(in crate::stack) bound: SocketAddrV4,
    pub(in crate::stack) armed: Option<u64>,
    pub(in crate::stack) in_events: bool,
}

/// True if a listener must not read its channel: its accept queue is full
/// (all modes), or — in the lazy modes — its SYN queue is full and it has
/// no SYN cookies, so every SYN would be dropped after the work (see the
/// module docs; RFC 4987 §3).
pub(in crate::stack) fn listener_stalled(l: &Listener, lazy: bool) -> bool {
    l.accept_queue_full()
        || (lazy && !l.config().syn_cookies && l.syn_queue_len() >= l.config().syn_queue)
}

/// Counters of the TCP part of a stack.
#[derive(Clone, Debug, Default)]
pub struct TcpStats {
    /// Received segments handed to a connection or listener.
    pub segments_in: u64,
    /// Segments sent.
    pub segments_out: u64,
    /// Frames moved from a listener's channel to the channel of the
    /// connection accepted meanwhile (still queued, not yet processed).
    pub redirected: u64,
    /// RSTs sent for segments to no connection and no listener, and for
    /// the half-open and queued connections of a closed listener.
    pub resets_sent: u64,
    /// RSTs of a closed listener not sent for want of a transmit buffer
    /// (also in the stack's `TxNoBuffer` drops).
    pub close_resets_unsent: u64,
    /// RSTs not sent because of the rate limit.
    pub resets_suppressed: u64,
    /// Active opens.
    pub connects: u64,
    /// Connections handed out by accept.
    pub accepted: u64,
    /// Connection slots freed.
    pub closed: u64,
    /// Timer expirations handled.
    pub timers: u64,
    /// Connections moved to the TIME-WAIT table.
    pub time_wait_entered: u64,
    /// Segments answered or absorbed by the TIME-WAIT table (counted in
    /// `segments_in` too).
    pub time_wait_segments: u64,
    /// TIME-WAIT entries evicted because the table was full.
    pub time_wait_evicted: u64,
    /// Received frames whose cache lines were evicted after their text was
    /// copied out, into the reader's buffer or the receive buffer
    /// (`evict`).
    pub frames_evicted: u64,
    /// Connections whose handle was closed while they still closed
    /// (orphans; see [`Stack::tcp_orphans`]).
    pub orphaned: u64,
    /// Orphans reset to keep a cap, by [`OrphanReset`] reason.
    pub orphans_reset: [u64; OrphanReset::COUNT],
    /// Orphans dropped after the FIN-WAIT-2 timeout
    /// ([`Config::fin_timeout`]).
    pub fin_timeouts: u64,
    /// Orphans reset because text arrived that nobody would read
    /// (RFC 1122 §4.2.2.13).
    pub data_after_close: u64,
}

/// The TCP part of a stack: the table of slots, and what code working on
/// one slot shares with the others ([`Shared`]), apart so that such code
/// borrows its slot and the rest at once (`Stack::conn_split`) instead of
/// looking the slot up again after each step.
pub(in crate::stack) struct Tcp {
    pub(in crate::stack) conns: Vec<Option<ConnSlot>>,
    pub(in crate::stack) conn_gen: Vec<u32>,
    pub(in crate::stack) free_conns: Vec<u32>,
    pub(in crate::stack) listeners: Vec<Option<ListenSlot>>,
    pub(in crate::stack) listen_gen: Vec<u32>,
    pub(in crate::stack) free_listeners: Vec<u32>,
    pub(in crate::stack) owner: Vec<ChannelOwner>,
    /// ChannelOwner tag per channel (0: untagged), for per-owner servicing
    /// ([`Stack::tcp_service_tag`]). Indexed like `owner`.
    pub(in crate::stack) tags: Vec<u16>,
    pub(in crate::stack) orphans: orphans::Orphans,
    pub(in crate::stack) sh: Shared,
}

/// What the TCP code of one slot shares with the others: secrets and
/// ports, the timer heap and event list, the TIME-WAIT table, defaults,
/// limits and counters.
pub(in crate::stack) struct Shared {
    pub(in crate::stack) secret: Secret,
    pub(in crate::stack) ports: EphemeralPorts,
    /// (deadline, slot id: bit 31 set for listeners, generation).
    pub(in crate::stack) timers: BinaryHeap<Reverse<(u64, u32, u32)>>,
    pub(in crate::stack) ready: Vec<u32>,
    pub(in crate::stack) events: Vec<TcpEvent>,
    pub(in crate::stack) cfg: Config,
    pub(in crate::stack) listen_cfg: ListenConfig,
    pub(in crate::stack) chan_cap: usize,
    pub(in crate::stack) rst_limit: RateLimiter,
    /// Closed connections in TIME-WAIT, as compact entries (the
    /// `Connection` is freed when it enters TIME-WAIT after its handle was
    /// closed).
    pub(in crate::stack) tw: TimeWaitTable,
    pub(in crate::stack) stats: TcpStats,
}

pub(in crate::stack) const LISTENER_BIT: u32 = 1 << 31;

impl Tcp {
    /// Whether any connection exists (in any state but freed).
    pub(in crate::stack) fn has_conns(&self) -> bool {
        self.conns.len() > self.free_conns.len()
    }

    pub(in crate::stack) fn new(c: &super::StackConfig, rng: &mut impl RngCore) -> Self {
        let mut key = [0u8; 16];
        rng.fill_bytes(&mut key);
        let secret = Secret::new(key);
        let (first, last) = c.ephemeral_ports;
        Tcp {
            conns: Vec::new(),
            conn_gen: Vec::new(),
            free_conns: Vec::new(),
            listeners: Vec::new(),
            listen_gen: Vec::new(),
            free_listeners: Vec::new(),
            owner: Vec::new(),
            tags: Vec::new(),
            orphans: orphans::Orphans::new(c.max_orphans, c.max_orphans_per_tag),
            sh: Shared {
                secret,
                ports: EphemeralPorts::new(first, last, 64),
                timers: BinaryHeap::new(),
                ready: Vec::new(),
                events: Vec::new(),
                cfg: c.tcp,
                listen_cfg: c.tcp_listen,
                chan_cap: c.tcp_channel_cap.max(1),
                rst_limit: RateLimiter::new(c.tcp_rst_rate.0, c.tcp_rst_rate.1, 0),
                tw: TimeWaitTable::new(
                    TimeWaitConfig {
                        capacity: c.tcp_time_wait_cap,
                        time_wait: c.tcp.time_wait,
                        ..TimeWaitConfig::default()
                    },
                    &secret,
                ),
                stats: TcpStats::default(),
            },
        }
    }

    /// The key of the classifier's hash tables, derived from the secret.
    pub(in crate::stack) fn demux_key(&self) -> [u64; 2] {
        self.sh.secret.table_key(Secret::TABLE_DEMUX)
    }

    pub(in crate::stack) fn set_owner(&mut self, c: ChannelId, o: ChannelOwner) {
        let i = c.0 as usize;
        if self.owner.len() <= i {
            self.owner.resize(i + 1, ChannelOwner::None);
            self.tags.resize(i + 1, 0);
        }
        self.owner[i] = o;
        // A new or freed channel starts untagged.
        self.tags[i] = 0;
    }

    pub(in crate::stack) fn tag_of(&self, c: u32) -> u16 {
        self.tags.get(c as usize).copied().unwrap_or(0)
    }

    /// The owner tag of the slot a timer entry names; `None` if the slot is
    /// gone (the entry is stale and anyone may discard it).
    pub(in crate::stack) fn timer_tag(&self, id: u32) -> Option<u16> {
        let chan = if id & LISTENER_BIT != 0 {
            self.listeners
                .get((id & !LISTENER_BIT) as usize)?
                .as_ref()?
                .chan
        } else {
            self.conns.get(id as usize)?.as_ref()?.chan
        };
        Some(self.tag_of(chan.0))
    }

    pub(in crate::stack) fn is_owned(&self, c: u32) -> bool {
        self.owner_of(c) != ChannelOwner::None
    }

    pub(in crate::stack) fn owner_of(&self, c: u32) -> ChannelOwner {
        self.owner
            .get(c as usize)
            .copied()
            .unwrap_or(ChannelOwner::None)
    }

    pub(in crate::stack) fn conn(&self, h: TcpStream) -> Result<&ConnSlot, SocketError> {
        match self.conns.get(h.idx as usize) {
            Some(Some(s)) if s.gen == h.gen && !s.detached => Ok(s),
            _ => Err(SocketError::BadHandle),
        }
    }

    pub(in crate::stack) fn conn_mut(
        &mut self,
        h: TcpStream,
    ) -> Result<&mut ConnSlot, SocketError> {
        match self.conns.get_mut(h.idx as usize) {
            Some(Some(s)) if s.gen == h.gen && !s.detached => Ok(s),
            _ => Err(SocketError::BadHandle),
        }
    }

    pub(in crate::stack) fn listener(&self, h: TcpListener) -> Result<&ListenSlot, SocketError> {
        match self.listeners.get(h.idx as usize) {
            Some(Some(s)) if s.gen == h.gen => Ok(s),
            _ => Err(SocketError::BadHandle),
        }
    }

    /// Arms (or keeps) the timer of slot `id` for deadline `t`.
    pub(in crate::stack) fn arm(
        timers: &mut BinaryHeap<Reverse<(u64, u32, u32)>>,
        armed: &mut Option<u64>,
        t: Option<u64>,
        id: u32,
        gen: u32,
    ) {
        if let Some(t) = t {
            if armed.is_none_or(|a| t < a) {
                *armed = Some(t);
                timers.push(Reverse((t, id, gen)));
            }
        }
    }
}

/// What code working on one connection slot may use besides the slot:
/// the link, the classifier, the TCP part's shared state and the stack's
/// counters. Split borrows of the stack (smoltcp's `InterfaceInner`),
/// taken together with the slot once per call, per channel serviced or per
/// timer ([`Stack::conn_split`]): the slot is not looked up again after
/// each step.
pub(in crate::stack) struct Cx<'a, N: Nic> {
    pub(in crate::stack) iface: &'a mut Iface<N>,
    pub(in crate::stack) demux: &'a mut Classifier,
    pub(in crate::stack) tcp: &'a mut Shared,
    pub(in crate::stack) stats: &'a mut StackStats,
}

impl<N: Nic> Cx<'_, N> {
    /// Counts a received frame dropped for `r` (nothing to release).
    pub(in crate::stack) fn drop_rx(&mut self, r: StackDrop) {
        self.stats.drops[r as usize] += 1;
        self.stats.rx_frame_drops += 1;
    }

    /// Releases received frame `d`, dropped for `r`, and counts it.
    pub(in crate::stack) fn rx_fail(&mut self, d: Desc, r: StackDrop) {
        self.iface.release(d);
        self.drop_rx(r);
    }
}

impl<N: Nic> Stack<N> {
    /// Connection slot `idx` and the rest of the stack its code uses
    /// ([`Cx`]), in one lookup; `None` if the slot is free.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub(in crate::stack) fn conn_split(&mut self, idx: u32) -> Option<(Cx<'_, N>, &mut ConnSlot)> {
        let s = self.tcp.conns.get_mut(idx as usize)?.as_mut()?;
        Some((
            Cx {
                iface: &mut self.iface,
                demux: &mut self.demux,
                tcp: &mut self.tcp.sh,
                stats: &mut self.stats,
            },
            s,
        ))
    }

    /// [`Stack::conn_split`] for the application's handle `h`: its
    /// generation and that its handle is not closed checked once.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub(in crate::stack) fn conn_split_handle(
        &mut self,
        h: TcpStream,
    ) -> Result<(Cx<'_, N>, &mut ConnSlot), SocketError> {
        match self.conn_split(h.idx) {
            Some((cx, s)) if s.gen == h.gen && !s.detached => Ok((cx, s)),
            _ => Err(SocketError::BadHandle),
        }
    }

    pub(in crate::stack) fn install_conn(
        &mut self,
        conn: Connection,
    ) -> Result<TcpStream, SocketError> {
        let (local, remote) = (conn.local(), conn.remote());
        let chan = self
            .demux
            .bind_tcp_conn(local, remote, self.tcp.sh.chan_cap)
            .map_err(|e| match e {
                BindError::AddrInUse => SocketError::AddrInUse,
                BindError::NoChannel => SocketError::BadHandle,
            })?;
        let cap = self.tcp.sh.chan_cap;
        self.ni_bind(chan, cap, super::ni::BindKind::Conn(local, remote))?;
        let idx = match self.tcp.free_conns.pop() {
            Some(i) => i,
            None => {
                self.tcp.conns.push(None);
                self.tcp.conn_gen.push(0);
                (self.tcp.conns.len() - 1) as u32
            }
        };
        let gen = self.tcp.conn_gen[idx as usize];
        self.tcp.conns[idx as usize] = Some(ConnSlot {
            conn,
            chan,
            gen,
            detached: false,
            armed: None,
            in_events: false,
            ip_ident: self.rng.next_u32() as u16,
            orphan: orphans::Links::default(),
        });
        self.tcp.set_owner(chan, ChannelOwner::Conn(idx));
        Ok(TcpStream { idx, gen })
    }

    /// Frees a connection slot, its channel and the frames still queued.
    pub(in crate::stack) fn free_conn(&mut self, idx: u32) {
        self.tcp.orphan_remove(idx);
        let Some(slot) = self.tcp.conns.get_mut(idx as usize).and_then(|s| s.take()) else {
            return;
        };
        self.registry.forget(super::ready::SocketId::Tcp(TcpStream {
            idx,
            gen: slot.gen,
        }));
        let c = slot.conn.counters();
        self.tcp.sh.stats.fin_timeouts += c.fin_timeouts;
        self.tcp.sh.stats.data_after_close += c.data_after_close;
        if slot.in_events {
            // Keep the event list bounded by live slots.
            let dead = TcpEvent::Conn(TcpStream { idx, gen: slot.gen });
            self.tcp.sh.events.retain(|e| *e != dead);
        }
        let mut left = Vec::new();
        let _ = self
            .demux
            .unbind_tcp_conn(slot.conn.local(), slot.conn.remote(), &mut left);
        self.ni_unbind(super::ni::BindKind::Conn(
            slot.conn.local(),
            slot.conn.remote(),
        ));
        self.tcp.set_owner(slot.chan, ChannelOwner::None);
        for d in left {
            self.stats.drops[StackDrop::SocketClosed as usize] += 1;
            if d.buf & REASM_TAG == 0 {
                self.stats.rx_frame_drops += 1;
                self.iface.release(d);
            }
        }
        self.tcp.conn_gen[idx as usize] = self.tcp.conn_gen[idx as usize].wrapping_add(1);
        self.tcp.free_conns.push(idx);
        self.tcp.sh.stats.closed += 1;
    }

    /// Entries in the TIME-WAIT table.
    pub fn tcp_time_wait_len(&self) -> usize {
        self.tcp.sh.tw.len()
    }

    /// The TIME-WAIT table's counters.
    pub fn tcp_time_wait_counters(&self) -> crate::proto::tcp::TwCounters {
        *self.tcp.sh.tw.counters()
    }

    /// Moves the connections and listeners that had something happen since
    /// the last call to `out` (each at most once).
    pub fn tcp_take_events(&mut self, out: &mut Vec<TcpEvent>) {
        let tcp = &mut self.tcp;
        let (conns, listeners) = (&mut tcp.conns, &mut tcp.listeners);
        // Events of handles freed meanwhile are dropped here.
        tcp.sh.events.retain(|e| match *e {
            TcpEvent::Conn(h) => match conns.get_mut(h.idx as usize) {
                Some(Some(s)) if s.gen == h.gen => {
                    s.in_events = false;
                    true
                }
                _ => false,
            },
            TcpEvent::Listener(h) => match listeners.get_mut(h.idx as usize) {
                Some(Some(s)) if s.gen == h.gen => {
                    s.in_events = false;
                    true
                }
                _ => false,
            },
        });
        out.append(&mut tcp.sh.events);
    }

    /// True if channel `c` belongs to a TCP connection or listener.
    pub(in crate::stack) fn is_tcp_channel(&self, c: ChannelId) -> bool {
        self.tcp.is_owned(c.0)
    }

    /// Counters of the TCP part.
    pub fn tcp_stats(&self) -> &TcpStats {
        &self.tcp.sh.stats
    }

    /// Orphans now: connections whose handle was closed and that still
    /// close (bounded by [`StackConfig::max_orphans`](crate::stack::StackConfig::max_orphans)).
    pub fn tcp_orphans(&self) -> usize {
        self.tcp.orphans_len()
    }

    /// Orphans of owner tag `tag` now (bounded by
    /// [`StackConfig::max_orphans_per_tag`](crate::stack::StackConfig::max_orphans_per_tag);
    /// 0 for tag 0).
    pub fn tcp_orphans_of(&self, tag: u16) -> usize {
        self.tcp.orphans_of(tag)
    }

    /// Bytes of send and receive buffers held by connection slots in use
    /// (orphans included), for reports and tests of their bounds.
    pub fn tcp_buffer_bytes(&self) -> usize {
        self.tcp
            .conns
            .iter()
            .flatten()
            .map(|s| s.conn.buffer_bytes())
            .sum()
    }

    /// Connection slots in use (including detached ones still closing).
    pub fn tcp_connections(&self) -> usize {
        self.tcp.conns.iter().flatten().count()
    }

    /// The state of every connection slot in use, for reports (allocates).
    pub fn tcp_states(&self) -> Vec<State> {
        self.tcp
            .conns
            .iter()
            .flatten()
            .map(|s| s.conn.state())
            .collect()
    }
}
