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
//! * the socket calls of that connection ([`Stack::tcp_recv`],
//!   [`Stack::tcp_send`], ...) process its own channel first, in the
//!   caller's context;
//! * [`Stack::tcp_service`] processes the channels on the classifier's
//!   ready list and the expired timers — the owner's protocol handler (one
//!   per process in the embedded placement; the scheduler issue gives each
//!   owner its own).
//!
//! When the reader's own [`Stack::tcp_recv`] finds its connection's
//! segments still queued and its receive buffer empty, predicted in-order
//! text is placed directly into the reader's buffer (`conn_direct`,
//! [`Connection::direct_commit`]): one copy, from the NIC buffer, instead of
//! two through the receive buffer. It works in rounds: checksums and TCB
//! updates, then the ACK, then the copies, so the sender's credit does not
//! wait for the copying.
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
//! **Output.** A segment is built in place in one NIC buffer: the payload is
//! copied once, from the connection's send buffer to a fixed offset
//! ([`TX_PAYLOAD_AT`]) leaving room for the largest header, and the headers
//! are written in front of it; the descriptor's offset names where the
//! frame starts. TCP segments carry DF (RFC 9293 §3.7.1: the MSS is derived
//! from the MTU; we never fragment TCP). Runs of full segments of new data
//! ([`Connection::burst_plan`]) are built from the first one's headers,
//! patched per segment (`conn_burst`): the same frames, decided once.
//!
//! **Timers.** A binary heap of (deadline, slot, generation) with lazy
//! deletion: a slot remembers the deadline it armed; an entry that does not
//! match is stale and skipped. A deadline that moves later is not pushed
//! again until the earlier entry fires.
//!
//! **May not touch:** the connection internals (only `proto::tcp`'s API),
//! wire bytes other than through `wire` views.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{Ipv4Addr, SocketAddrV4};

use rand::RngCore;

use super::{
    checked_ipv4, emit_eth_ipv4, Out, SocketError, Stack, StackDrop, MAX_BATCH, REASM_TAG,
};
use crate::demux::{BindError, ChannelId, Classifier};
use crate::mem::{BufArea, Desc};
use crate::nic::Nic;
use crate::proto::icmp::RateLimiter;
use crate::proto::tcp::{
    reset_for, Burst, Config, ConnError, Connection, EphemeralPorts, ListenConfig, Listener,
    Secret, State, TimeWaitConfig, TimeWaitTable, TwAction, TwKey,
};
use crate::wire::checksum;
use crate::wire::ethernet::HEADER_LEN as ETH_LEN;
use crate::wire::ipv4::PROTO_TCP;
use crate::wire::tcp::{TcpFlags, TcpPacket, TcpRepr};
use crate::wire::Ipv4Repr;

/// How many frames ahead of the one it processes a reader of a TCP
/// channel asks the CPU to fetch ([`pop_ahead`]; frames in the channel's
/// own slots, not on an offload NI's inbound ring, which is not looked
/// into). Where another core wrote the frames (the wire), each of a frame's ~24 lines is a
/// cross-core transfer, and the checksum loop that first reads them keeps
/// only a few in flight: bulk receive spent half its time there. Two
/// frames ahead is about one transfer's latency of work at bulk rates
/// (`results/tcp/NOTES.md`, session 10: 1, 2, 3 and 4 measured).
pub const RX_AHEAD: usize = 2;

/// Takes the oldest frame of channel `c` and asks the CPU to fetch the
/// frame [`RX_AHEAD`] behind it (a hint; see [`BufArea::prefetch_read`]).
/// With `first` (a loop's first pop), the frames between too.
#[inline(always)]
fn pop_ahead(demux: &mut Classifier, bufs: &BufArea, c: ChannelId, first: bool) -> Option<Desc> {
    let ch = demux.channel_mut(c)?;
    let d = ch.pop()?;
    // Nothing behind it in the local slots (request/response): no further
    // look.
    if ch.peek(0).is_none() {
        return Some(d);
    }
    let from = if first { 0 } else { RX_AHEAD - 1 };
    for k in from..RX_AHEAD {
        let Some(next) = ch.peek(k) else { break };
        bufs.prefetch_read(next);
    }
    Some(d)
}

/// Where a segment's payload starts in a transmit buffer: room for the
/// Ethernet, IPv4 and the largest TCP header (60 bytes) in front of it.
pub const TX_PAYLOAD_AT: usize = ETH_LEN + 20 + 60;
/// Segments one output call may emit for one connection (a bound; the
/// congestion and receive windows usually stop it earlier).
pub const MAX_TX_PER_CALL: usize = 64;
/// Frames one [`Stack::tcp_service`] processes for one channel before
/// moving to the next ready channel (fairness between connections).
pub const SERVICE_PER_CHANNEL: usize = 32;
/// When output stopped for want of a transmit buffer, the connection is
/// tried again after this long (buffers come back as the NIC sends).
const TX_RETRY_NS: u64 = 1_000_000;
/// The timer heap is rebuilt without stale entries when it holds more
/// than this many per live slot (plus a constant): lazy deletion stays
/// bounded whatever the churn.
const TIMER_HEAP_SLACK: usize = 4;

/// Names a TCP connection of a [`Stack`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TcpHandle {
    idx: u32,
    gen: u32,
}

/// Names a TCP listener of a [`Stack`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ListenHandle {
    idx: u32,
    gen: u32,
}

/// Something happened to a connection or listener since the last
/// [`Stack::tcp_take_events`]: data or room may be there, it may have
/// closed, or connections may wait to be accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TcpEvent {
    /// A connection processed input or a timer.
    Conn(TcpHandle),
    /// A listener has connections to accept.
    Listener(ListenHandle),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    None,
    Conn(u32),
    Listener(u32),
}

struct ConnSlot {
    conn: Connection,
    chan: ChannelId,
    gen: u32,
    /// The application closed its handle; the slot goes when the
    /// connection reaches CLOSED.
    detached: bool,
    /// The deadline this slot has in the timer heap.
    armed: Option<u64>,
    in_events: bool,
    ip_ident: u16,
}

struct ListenSlot {
    l: Listener,
    chan: ChannelId,
    gen: u32,
    /// The address the classifier binding uses (may be the wildcard).
    bound: SocketAddrV4,
    armed: Option<u64>,
    in_events: bool,
}

/// True if a listener must not read its channel: its accept queue is full
/// (all modes), or — in the lazy modes — its SYN queue is full and it has
/// no SYN cookies, so every SYN would be dropped after the work (see the
/// module docs; RFC 4987 §3).
fn listener_stalled(l: &Listener, lazy: bool) -> bool {
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
    /// (`handback`).
    pub frames_evicted: u64,
}

pub(super) struct Tcp {
    conns: Vec<Option<ConnSlot>>,
    conn_gen: Vec<u32>,
    free_conns: Vec<u32>,
    listeners: Vec<Option<ListenSlot>>,
    listen_gen: Vec<u32>,
    free_listeners: Vec<u32>,
    owner: Vec<Owner>,
    /// Owner tag per channel (0: untagged), for per-owner servicing
    /// ([`Stack::tcp_service_tag`]). Indexed like `owner`.
    tags: Vec<u16>,
    secret: Secret,
    ports: EphemeralPorts,
    /// (deadline, slot id: bit 31 set for listeners, generation).
    timers: BinaryHeap<Reverse<(u64, u32, u32)>>,
    ready: Vec<u32>,
    events: Vec<TcpEvent>,
    cfg: Config,
    listen_cfg: ListenConfig,
    chan_cap: usize,
    rst_limit: RateLimiter,
    /// Closed connections in TIME-WAIT, as compact entries (the
    /// `Connection` is freed when it enters TIME-WAIT after its handle was
    /// closed).
    tw: TimeWaitTable,
    pub(super) stats: TcpStats,
}

const LISTENER_BIT: u32 = 1 << 31;

impl Tcp {
    /// Whether any connection exists (in any state but freed).
    pub(super) fn has_conns(&self) -> bool {
        self.conns.len() > self.free_conns.len()
    }

    pub(super) fn new(
        cfg: Config,
        listen_cfg: ListenConfig,
        chan_cap: usize,
        rst_rate: (u32, u32),
        tw_capacity: usize,
        rng: &mut impl RngCore,
    ) -> Self {
        let mut key = [0u8; 16];
        rng.fill_bytes(&mut key);
        let secret = Secret::new(key);
        Tcp {
            conns: Vec::new(),
            conn_gen: Vec::new(),
            free_conns: Vec::new(),
            listeners: Vec::new(),
            listen_gen: Vec::new(),
            free_listeners: Vec::new(),
            owner: Vec::new(),
            tags: Vec::new(),
            secret,
            ports: EphemeralPorts::default(),
            timers: BinaryHeap::new(),
            ready: Vec::new(),
            events: Vec::new(),
            cfg,
            listen_cfg,
            chan_cap: chan_cap.max(1),
            rst_limit: RateLimiter::new(rst_rate.0, rst_rate.1, 0),
            tw: TimeWaitTable::new(
                TimeWaitConfig {
                    capacity: tw_capacity,
                    time_wait: cfg.time_wait,
                    ..TimeWaitConfig::default()
                },
                &secret,
            ),
            stats: TcpStats::default(),
        }
    }

    /// The key of the classifier's hash tables, derived from the secret.
    pub(super) fn demux_key(&self) -> [u64; 2] {
        self.secret.table_key(Secret::TABLE_DEMUX)
    }

    fn set_owner(&mut self, c: ChannelId, o: Owner) {
        let i = c.0 as usize;
        if self.owner.len() <= i {
            self.owner.resize(i + 1, Owner::None);
            self.tags.resize(i + 1, 0);
        }
        self.owner[i] = o;
        // A new or freed channel starts untagged.
        self.tags[i] = 0;
    }

    fn tag_of(&self, c: u32) -> u16 {
        self.tags.get(c as usize).copied().unwrap_or(0)
    }

    /// The owner tag of the slot a timer entry names; `None` if the slot is
    /// gone (the entry is stale and anyone may discard it).
    fn timer_tag(&self, id: u32) -> Option<u16> {
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

    fn is_owned(&self, c: u32) -> bool {
        self.owner_of(c) != Owner::None
    }

    fn owner_of(&self, c: u32) -> Owner {
        self.owner.get(c as usize).copied().unwrap_or(Owner::None)
    }

    fn conn(&self, h: TcpHandle) -> Result<&ConnSlot, SocketError> {
        match self.conns.get(h.idx as usize) {
            Some(Some(s)) if s.gen == h.gen && !s.detached => Ok(s),
            _ => Err(SocketError::BadHandle),
        }
    }

    fn conn_mut(&mut self, h: TcpHandle) -> Result<&mut ConnSlot, SocketError> {
        match self.conns.get_mut(h.idx as usize) {
            Some(Some(s)) if s.gen == h.gen && !s.detached => Ok(s),
            _ => Err(SocketError::BadHandle),
        }
    }

    fn listener(&self, h: ListenHandle) -> Result<&ListenSlot, SocketError> {
        match self.listeners.get(h.idx as usize) {
            Some(Some(s)) if s.gen == h.gen => Ok(s),
            _ => Err(SocketError::BadHandle),
        }
    }

    /// Arms (or keeps) the timer of slot `id` for deadline `t`.
    fn arm(
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

/// A received TCP frame, parsed once: addresses, header, payload range.
struct Seg {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    repr: TcpRepr,
    payload: (usize, usize),
}

/// IP header checksum, TCP checksum over the pseudo-header (RFC 9293
/// §3.1), header and options — the receiver's lazy work for one segment.
#[inline]
fn parse_tcp_frame(frame: &[u8]) -> Result<Seg, StackDrop> {
    let ip = checked_ipv4(frame)?;
    let (src, dst) = (ip.src(), ip.dst());
    let hl = ip.header_len();
    let total = ip.total_len() as usize;
    let seg = frame
        .get(ETH_LEN + hl..ETH_LEN + total)
        .ok_or(StackDrop::IpHeader)?;
    let tcp = TcpPacket::new_checked(seg).map_err(|_| StackDrop::TcpHeader)?;
    if !tcp.verify_checksum(src, dst) {
        return Err(StackDrop::TcpChecksum);
    }
    let repr = TcpRepr::parse(&tcp).map_err(|_| StackDrop::TcpHeader)?;
    let start = ETH_LEN + hl + tcp.header_len();
    Ok(Seg {
        src,
        dst,
        repr,
        payload: (start, ETH_LEN + total),
    })
}

impl<N: Nic> Out<N> {
    /// A transmit buffer: the spare one kept from the last output call, or
    /// a fresh one.
    #[inline]
    fn take_tx_buf(&mut self) -> Option<u32> {
        self.spare.take().or_else(|| self.alloc())
    }

    /// Gives back the buffers a burst took ahead and did not fill (only
    /// when it stopped early), at once rather than with the batch of
    /// released frames, so that the output that follows can take them as
    /// the slow path would.
    #[cold]
    fn release_ahead(&mut self, ahead: &mut Ahead) {
        while let Some(b) = ahead.pop() {
            self.nic.release(&[Desc::new(b, 0)]);
        }
    }

    /// Builds Ethernet, IPv4 and TCP headers in front of the payload that
    /// `poll_transmit` wrote at [`TX_PAYLOAD_AT`] of buffer `b`, and sends
    /// the frame (or queues it for ARP). Consumes `b` in every case.
    /// `payload_sum`, if known, is the payload's partial checksum sum: the
    /// TCP checksum then reads only the header. `batched`: the frame goes
    /// onto `Out::batch`, which the caller sends (`send_batch`) before it
    /// returns; otherwise it is handed to the NIC at once.
    #[allow(clippy::too_many_arguments)]
    fn tcp_emit(
        &mut self,
        b: u32,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        repr: &TcpRepr,
        payload_sum: Option<u32>,
        ident: u16,
        now: u64,
        batched: bool,
    ) -> Result<(), StackDrop> {
        let hl = match repr.header_len() {
            Ok(h) => h,
            Err(_) => {
                self.release(Desc::new(b, 0));
                self.drop_tx(StackDrop::TxNoBuffer);
                return Err(StackDrop::TxNoBuffer);
            }
        };
        let Some(hop) = self.next_hop(dst) else {
            self.release(Desc::new(b, 0));
            self.drop_tx(StackDrop::NoRoute);
            return Err(StackDrop::NoRoute);
        };
        let mac = match self.resolve(hop, now) {
            Ok(m) => m,
            Err(r) => {
                self.release(Desc::new(b, 0));
                self.drop_tx(r);
                return Err(r);
            }
        };
        let (my_mac, ttl) = (self.mac, self.ttl);
        let start = TX_PAYLOAD_AT - hl - 20 - ETH_LEN;
        let end = TX_PAYLOAD_AT + repr.payload_len;
        let ok = match self.nic.buffers_mut().buf_mut(b) {
            Some(buf) if buf.len() >= end => {
                let f = &mut buf[start..end];
                let ip = Ipv4Repr {
                    src,
                    dst,
                    protocol: PROTO_TCP,
                    ttl,
                    ident,
                    dont_frag: true,
                    more_frags: false,
                    frag_offset: 0,
                    payload_len: hl + repr.payload_len,
                };
                emit_eth_ipv4(f, my_mac, mac.unwrap_or([0; 6]), &ip)
                    && match payload_sum {
                        Some(sum) => repr
                            .emit_header_with_payload_sum(&mut f[ETH_LEN + 20..], src, dst, sum)
                            .is_ok(),
                        None => repr.emit(&mut f[ETH_LEN + 20..], src, dst).is_ok(),
                    }
            }
            _ => false,
        };
        let d = Desc::new(b, (end - start) as u16);
        let d = Desc {
            off: start as u16,
            ..d
        };
        if !ok {
            self.release(Desc::new(b, 0));
            self.drop_tx(StackDrop::TxNoBuffer);
            return Err(StackDrop::TxNoBuffer);
        }
        match mac {
            Some(_) if batched => {
                self.batch_push(d);
                Ok(())
            }
            Some(_) => {
                if self.transmit(d) {
                    Ok(())
                } else {
                    Err(StackDrop::TxRingFull)
                }
            }
            None => match self.arp.enqueue(hop, d, now) {
                Ok(()) => Ok(()),
                Err(d) => {
                    self.release(d);
                    self.drop_tx(StackDrop::ArpQueueFull);
                    Err(StackDrop::ArpQueueFull)
                }
            },
        }
    }

    /// Sends what `conn` has to send: at most [`MAX_TX_PER_CALL`] segments.
    /// Sends what `conn` has to send: at most [`MAX_TX_PER_CALL`] segments.
    /// Returns the segments handed on, and whether it stopped for want of a
    /// transmit buffer with output still pending (the caller retries soon).
    fn conn_output(&mut self, conn: &mut Connection, ident: &mut u16, now: u64) -> (usize, bool) {
        let (mut sent, mut ok) = (0, 0);
        let mut starved = false;
        debug_assert_eq!(self.batch.n, 0);
        let src = *conn.local().ip();
        let dst = *conn.remote().ip();
        while sent < MAX_TX_PER_CALL {
            // The transmit fast path: a run of full segments decided once
            // (`proto/tcp/burst.rs`). A lone segment goes the slow way,
            // which costs the same.
            if let Some(plan) = conn.burst_plan(now, MAX_TX_PER_CALL - sent) {
                if plan.count >= 2 {
                    if let Some((n, out_of_bufs)) =
                        self.conn_burst(conn, &plan, src, dst, ident, now)
                    {
                        sent += n;
                        ok += n;
                        if out_of_bufs {
                            starved = true;
                            break;
                        }
                        continue;
                    }
                }
            }
            if !conn.wants_output(now) {
                // Nothing to send: skip the empty `poll_transmit` (most
                // calls on request/response traffic). A `poll_transmit`
                // that returned a segment already re-armed the timers.
                if sent == 0 {
                    conn.skip_transmit(now);
                }
                break;
            }
            let Some(b) = self.take_tx_buf() else {
                self.drop_tx(StackDrop::TxNoBuffer);
                starved = true;
                break;
            };
            let repr = match self.nic.buffers_mut().buf_mut(b) {
                Some(buf) if buf.len() > TX_PAYLOAD_AT => {
                    let room = (buf.len() - TX_PAYLOAD_AT).min(u16::MAX as usize);
                    let out = &mut buf[TX_PAYLOAD_AT..TX_PAYLOAD_AT + room];
                    if FUSED_TX_SUM {
                        conn.poll_transmit_with_sum(now, out)
                            .map(|(r, sum)| (r, Some(sum)))
                    } else {
                        conn.poll_transmit(now, out).map(|r| (r, None))
                    }
                }
                _ => {
                    self.release(Desc::new(b, 0));
                    break;
                }
            };
            let Some((repr, sum)) = repr else {
                self.spare = Some(b);
                break;
            };
            *ident = ident.wrapping_add(1);
            if self
                .tcp_emit(b, src, dst, &repr, sum, *ident, now, true)
                .is_ok()
            {
                ok += 1;
            }
            sent += 1;
        }
        self.send_batch();
        (ok, starved)
    }

    /// Sends segments of burst `plan` (see `proto/tcp/burst.rs`): the
    /// first with headers built as `tcp_emit` builds them, the others
    /// with a copy of those headers in which only the IP ident, SEG.SEQ,
    /// PSH and the two checksums change. Returns the segments sent and
    /// whether it stopped for want of a buffer, or `None` (nothing done)
    /// if the next hop is not resolved or a buffer cannot hold an MSS:
    /// the slow path then handles the segment (and queues it for ARP).
    #[allow(clippy::too_many_arguments)]
    fn conn_burst(
        &mut self,
        conn: &mut Connection,
        plan: &Burst,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        ident: &mut u16,
        now: u64,
    ) -> Option<(usize, bool)> {
        let first = plan.first;
        let mss = first.payload_len;
        let hl = first.header_len().ok()?;
        let my_mac = self.mac;
        // Only a known neighbour: resolving (and ARP requests) is the slow
        // path's business.
        let hop = self.next_hop(dst)?;
        let mac = if self.is_broadcast(hop) {
            [0xff; 6]
        } else {
            self.arp.lookup(hop, now)?
        };
        if self.nic.buffers().buf_size() < TX_PAYLOAD_AT + mss {
            return None;
        }
        let start = TX_PAYLOAD_AT - hl - 20 - ETH_LEN;
        let tcp_at = TX_PAYLOAD_AT - hl;
        let hlen = TX_PAYLOAD_AT - start;
        let ph = checksum::pseudo_header_ipv4(src, dst, PROTO_TCP, (hl + mss) as u16);
        let mut tmpl = [0u8; ETH_LEN + 20 + 60];
        // Partial sums of the template's IP and TCP headers without the
        // fields that change per segment (RFC 1624: a checksum is updated
        // from the words that change, not summed again).
        let (mut ip_base, mut tcp_base) = (0u32, 0u32);
        let mut n = 0;
        let mut starved = false;
        // Buffers taken TX_AHEAD segments before they are filled, with their
        // lines prefetched for writing (see `BufArea::prefetch_write`).
        let mut ahead = Ahead::default();
        while n < plan.count {
            while ahead.len < TX_AHEAD && n + ahead.len < plan.count {
                let Some(nb) = self.take_tx_buf() else { break };
                self.nic.buffers().prefetch_write(nb, TX_PAYLOAD_AT + mss);
                ahead.push(nb);
            }
            let Some(b) = ahead.pop() else {
                self.drop_tx(StackDrop::TxNoBuffer);
                starved = true;
                break;
            };
            let Some(buf) = self.nic.buffers_mut().buf_mut(b) else {
                self.release(Desc::new(b, 0));
                break;
            };
            let payload = &mut buf[TX_PAYLOAD_AT..TX_PAYLOAD_AT + mss];
            let sum = if FUSED_TX_SUM {
                conn.burst_payload(plan, n, payload, true)
            } else {
                // Summed at the source (`Connection::burst_sum`), then copied.
                let sum = conn.burst_sum(plan, n);
                conn.burst_payload(plan, n, payload, false);
                sum
            };
            *ident = ident.wrapping_add(1);
            let f = &mut buf[start..TX_PAYLOAD_AT];
            if n == 0 {
                let ip = Ipv4Repr {
                    src,
                    dst,
                    protocol: PROTO_TCP,
                    ttl: self.ttl,
                    ident: *ident,
                    dont_frag: true,
                    more_frags: false,
                    frag_offset: 0,
                    payload_len: hl + mss,
                };
                let ok = emit_eth_ipv4(f, my_mac, mac, &ip)
                    && plan
                        .repr(0)
                        .emit_header_with_payload_sum(&mut f[ETH_LEN + 20..], src, dst, sum)
                        .is_ok();
                if !ok {
                    self.release(Desc::new(b, 0));
                    *ident = ident.wrapping_sub(1);
                    self.release_ahead(&mut ahead);
                    return None;
                }
                tmpl[..hlen].copy_from_slice(f);
                let ip = &mut tmpl[ETH_LEN..ETH_LEN + 20];
                ip[4..6].fill(0);
                ip[10..12].fill(0);
                ip_base = checksum::partial(ip, 0);
                let t = &mut tmpl[tcp_at - start..hlen];
                t[4..8].fill(0);
                t[13] &= !TcpFlags::PSH.0;
                t[16..18].fill(0);
                tcp_base = checksum::partial(t, ph);
            } else {
                f.copy_from_slice(&tmpl[..hlen]);
                let ip = &mut f[ETH_LEN..ETH_LEN + 20];
                ip[4..6].copy_from_slice(&ident.to_be_bytes());
                let c = !checksum::fold(checksum::combine(ip_base, u32::from(*ident)));
                ip[10..12].copy_from_slice(&c.to_be_bytes());
                let t = &mut f[tcp_at - start..];
                let seq = plan.seq(n).0;
                t[4..8].copy_from_slice(&seq.to_be_bytes());
                let psh = plan.psh(n);
                if psh {
                    t[13] |= TcpFlags::PSH.0;
                }
                // The flags are the low byte of the word at offset 12.
                let words =
                    (seq >> 16) + (seq & 0xFFFF) + u32::from(psh) * u32::from(TcpFlags::PSH.0);
                let c = !checksum::fold(checksum::combine(checksum::combine(tcp_base, words), sum));
                t[16..18].copy_from_slice(&c.to_be_bytes());
            }
            self.batch_push(Desc {
                buf: b,
                off: start as u16,
                len: (hlen + mss) as u16,
            });
            n += 1;
        }
        if ahead.len > 0 {
            self.release_ahead(&mut ahead);
        }
        conn.burst_commit(now, plan, n);
        Some((n, starved))
    }

    /// Hands the batched segments to the NIC in one call (one ring
    /// publication instead of one per segment); those it refuses are
    /// dropped and counted like a refused single frame.
    fn send_batch(&mut self) {
        let n = self.batch.n;
        if n == 0 {
            return;
        }
        let k = self.nic.send(&self.batch.d[..n]);
        self.stats.tx_frames += k as u64;
        for i in k..n {
            self.drop_tx(StackDrop::TxRingFull);
            let d = self.batch.d[i];
            self.release(d);
        }
        self.batch.n = 0;
    }

    /// Adds `d` to the output batch, sending the batch first if full.
    #[inline]
    fn batch_push(&mut self, d: Desc) {
        if self.batch.n == self.batch.d.len() {
            self.send_batch();
        }
        self.batch.d[self.batch.n] = d;
        self.batch.n += 1;
    }

    /// Sends the RSTs of closing `l` ([`Listener::poll_close`]) until it is
    /// empty, in batches of [`TX_BATCH`]: at most `syn_queue + backlog`
    /// segments. Returns the RSTs handed on and those dropped for want of
    /// a transmit buffer (counted as `TxNoBuffer`, not retried).
    fn listen_close_output(&mut self, l: &mut Listener, now: u64) -> (usize, usize) {
        let (mut sent, mut unsent) = (0, 0);
        debug_assert_eq!(self.batch.n, 0);
        let src = *l.local().ip();
        while let Some((remote, repr)) = l.poll_close(now) {
            let Some(b) = self.take_tx_buf() else {
                self.drop_tx(StackDrop::TxNoBuffer);
                unsent += 1;
                continue;
            };
            if self
                .tcp_emit(b, src, *remote.ip(), &repr, None, 0, now, true)
                .is_ok()
            {
                sent += 1;
            }
        }
        self.send_batch();
        (sent, unsent)
    }

    /// Sends what `l` has to send (SYN-ACKs, cookie SYN-ACKs, RSTs, ACKs
    /// of queued connections): at most [`MAX_TX_PER_CALL`] segments.
    fn listen_output(&mut self, l: &mut Listener, now: u64) -> usize {
        let mut sent = 0;
        let src = *l.local().ip();
        while sent < MAX_TX_PER_CALL {
            let Some(b) = self.take_tx_buf() else {
                self.drop_tx(StackDrop::TxNoBuffer);
                break;
            };
            let r = match self.nic.buffers_mut().buf_mut(b) {
                Some(buf) if buf.len() > TX_PAYLOAD_AT => {
                    let room = (buf.len() - TX_PAYLOAD_AT).min(u16::MAX as usize);
                    l.poll_transmit(now, &mut buf[TX_PAYLOAD_AT..TX_PAYLOAD_AT + room])
                }
                _ => {
                    self.release(Desc::new(b, 0));
                    break;
                }
            };
            let Some((remote, repr)) = r else {
                self.spare = Some(b);
                break;
            };
            let _ = self.tcp_emit(b, src, *remote.ip(), &repr, None, 0, now, false);
            sent += 1;
        }
        sent
    }
}

/// How many buffers ahead of the segment being built a transmit burst
/// takes and prefetches for writing. Where the two cores do not share a
/// cache, a line the other core holds takes ~170 ns to come over, longer
/// than building one segment; of 0, 1, 2 and 4 ahead, four measured best,
/// by a small margin over two (`results/tcp/ab-session5.md`, ab_pf4).
const TX_AHEAD: usize = 4;

/// A burst's buffers taken ahead, in the order they are filled.
#[derive(Default)]
struct Ahead {
    bufs: [u32; TX_AHEAD],
    head: usize,
    len: usize,
}

impl Ahead {
    #[inline]
    fn push(&mut self, b: u32) {
        self.bufs[(self.head + self.len) % TX_AHEAD] = b;
        self.len += 1;
    }

    #[inline]
    fn pop(&mut self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        let b = self.bufs[self.head];
        self.head = (self.head + 1) % TX_AHEAD;
        self.len -= 1;
        Some(b)
    }
}

/// Segments per round of direct placement (`Stack::conn_direct`).
const DIRECT_ROUND: usize = 32;

/// Whether `conn_output` copies the payload and sums it in one pass
/// (`Connection::poll_transmit_with_sum` + `emit_header_with_payload_sum`)
/// instead of copying it and summing it again in `TcpRepr::emit`. The
/// fused path is ~7% cheaper in CPU with both ends in one thread, but not
/// faster with one thread per end: measured again with bursts and direct
/// placement (`results/tcp/ab-session3.txt`, fast-mode rounds) it gave
/// 38.8 / 31.6 Gbit/s against 58.5 / 54.8 with it off (AVX-512 `memcpy`
/// plus the separate sum beat the fused loop on data that is in L1 anyway). Earlier
/// "erratic" threaded runs were the host moving the two vCPUs between
/// its two placement modes (`results/tcp/NOTES.md`).
const FUSED_TX_SUM: bool = false;

/// Segments of one output call, sent to the NIC together (in groups of
/// [`TX_BATCH`]).
pub(super) struct TxBatch {
    d: [Desc; TX_BATCH],
    n: usize,
}

/// Segments handed to the NIC per call on the output path.
const TX_BATCH: usize = 16;

impl TxBatch {
    /// An empty batch. `Out` keeps one and reuses it: building one per
    /// output call cost ~40 instructions (callgrind), most calls on
    /// request/response traffic sending one segment or none.
    pub(super) fn new() -> Self {
        TxBatch {
            d: [Desc::default(); TX_BATCH],
            n: 0,
        }
    }
}

fn conn_error(e: ConnError) -> SocketError {
    match e {
        ConnError::Refused => SocketError::ConnectionRefused,
        ConnError::Reset => SocketError::ConnectionReset,
        ConnError::TimedOut => SocketError::TimedOut,
    }
}

impl<N: Nic> Stack<N> {
    // ----- TCP: tables -----

    fn install_conn(&mut self, conn: Connection) -> Result<TcpHandle, SocketError> {
        let (local, remote) = (conn.local(), conn.remote());
        let chan = self
            .demux
            .bind_tcp_conn(local, remote, self.tcp.chan_cap)
            .map_err(|e| match e {
                BindError::AddrInUse => SocketError::AddrInUse,
                BindError::NoChannel => SocketError::BadHandle,
            })?;
        let cap = self.tcp.chan_cap;
        self.ni_bind(chan, cap, super::ni::BindKind::Conn(local, remote));
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
        });
        self.tcp.set_owner(chan, Owner::Conn(idx));
        Ok(TcpHandle { idx, gen })
    }

    /// Frees a connection slot, its channel and the frames still queued.
    fn free_conn(&mut self, idx: u32) {
        let Some(slot) = self.tcp.conns.get_mut(idx as usize).and_then(|s| s.take()) else {
            return;
        };
        if slot.in_events {
            // Keep the event list bounded by live slots.
            let dead = TcpEvent::Conn(TcpHandle { idx, gen: slot.gen });
            self.tcp.events.retain(|e| *e != dead);
        }
        let mut left = Vec::new();
        let _ = self
            .demux
            .unbind_tcp_conn(slot.conn.local(), slot.conn.remote(), &mut left);
        self.ni_unbind(super::ni::BindKind::Conn(
            slot.conn.local(),
            slot.conn.remote(),
        ));
        self.tcp.set_owner(slot.chan, Owner::None);
        for d in left {
            self.stats.drops[StackDrop::SocketClosed as usize] += 1;
            if d.buf & REASM_TAG == 0 {
                self.stats.rx_frame_drops += 1;
                self.out.release(d);
            }
        }
        self.tcp.conn_gen[idx as usize] = self.tcp.conn_gen[idx as usize].wrapping_add(1);
        self.tcp.free_conns.push(idx);
        self.tcp.stats.closed += 1;
    }

    /// After input, a timer or an application call on connection `idx`:
    /// send, re-arm its timer, note an event, free it if it is finished.
    fn conn_after(&mut self, idx: u32, now: u64, event: bool) {
        let Some(Some(s)) = self.tcp.conns.get_mut(idx as usize) else {
            return;
        };
        let (sent, starved) = self.out.conn_output(&mut s.conn, &mut s.ip_ident, now);
        self.tcp.stats.segments_out += sent as u64;
        if s.detached && s.conn.state() == State::Closed {
            self.free_conn(idx);
            return;
        }
        if s.detached && s.conn.state() == State::TimeWait {
            // Its last ACK went out above; a compact entry answers from
            // now on (RFC 9293 §3.10.7.4 TIME-WAIT, RFC 6191).
            if let Some(e) = s.conn.time_wait_entry() {
                if self.tcp.tw.insert(now, e).is_some() {
                    self.tcp.stats.time_wait_evicted += 1;
                }
                self.tcp.stats.time_wait_entered += 1;
                self.free_conn(idx);
                return;
            }
        }
        // Out of transmit buffers with output pending (a window update or
        // an ACK has no timer of its own): try again shortly.
        let retry = starved.then_some(now + TX_RETRY_NS);
        let t = match (s.conn.poll_timeout(), retry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Tcp::arm(&mut self.tcp.timers, &mut s.armed, t, idx, s.gen);
        if event && !s.detached && !s.in_events {
            s.in_events = true;
            self.tcp
                .events
                .push(TcpEvent::Conn(TcpHandle { idx, gen: s.gen }));
        }
    }

    /// Processes at most `max` queued segments of connection `idx` (LRP:
    /// in the context of whoever calls). Returns the frames consumed.
    fn conn_input(&mut self, idx: u32, now: u64, max: usize) -> usize {
        let mut done = 0;
        while done < max {
            let Some(Some(s)) = self.tcp.conns.get_mut(idx as usize) else {
                break;
            };
            let bufs = self.out.nic.buffers();
            let Some(d) = pop_ahead(&mut self.demux, bufs, s.chan, done == 0) else {
                break;
            };
            done += 1;
            self.conn_input_frame(idx, d, now);
        }
        done
    }

    /// Processes frame `d`, just taken from connection `idx`'s channel.
    fn conn_input_frame(&mut self, idx: u32, d: Desc, now: u64) {
        let Some(frame) = self.out.nic.buffers().frame(d) else {
            self.drop_rx(StackDrop::BadDescriptor);
            return;
        };
        let parsed = parse_tcp_frame(frame);
        self.conn_input_parsed(idx, d, parsed, now);
    }

    /// [`Stack::conn_input_frame`] for a frame already parsed (and its
    /// checksums verified) by the caller.
    fn conn_input_parsed(&mut self, idx: u32, d: Desc, parsed: Result<Seg, StackDrop>, now: u64) {
        let Some(Some(s)) = self.tcp.conns.get_mut(idx as usize) else {
            self.rx_fail(d, StackDrop::SocketClosed);
            return;
        };
        let Some(frame) = self.out.nic.buffers().frame(d) else {
            self.drop_rx(StackDrop::BadDescriptor);
            return;
        };
        match parsed {
            Ok(seg) => {
                let payload = &frame[seg.payload.0..seg.payload.1];
                let _ = s.conn.handle_segment(now, &seg.repr, payload);
                self.tcp.stats.segments_in += 1;
                if !payload.is_empty() {
                    // Its text is in the receive buffer now (`handback`).
                    if self.out.handback.evict() {
                        self.out.nic.buffers().evict(d);
                        self.tcp.stats.frames_evicted += 1;
                    }
                    self.out.handback.placed(payload.len() as u64, now);
                }
                self.out.release(d);
                // RFC 5681 §4.2: an out-of-order segment (one that
                // arrives while a gap is open) is answered at once, one
                // duplicate ACK per segment. Output after the whole
                // batch would fold a window's worth of them into one
                // ACK, the sender would never count three and every
                // loss would wait for an RTO (found by
                // stack_tcp_netsim: zero fast retransmits at 1% loss).
                if !s.conn.ooo_intervals().is_empty() {
                    let (sent, _) = self.out.conn_output(&mut s.conn, &mut s.ip_ident, now);
                    self.tcp.stats.segments_out += sent as u64;
                }
            }
            Err(e) => self.rx_fail(d, e),
        }
    }

    /// Direct placement (`Connection::direct_ok`, LRP §3.4): while the
    /// receive buffer is empty and the next queued segments are predicted
    /// in-order text, their text goes from the NIC buffers straight into
    /// `buf`, never through the receive buffer. In rounds of at most
    /// [`DIRECT_ROUND`] segments: first the protocol work of each (checksum,
    /// `direct_commit`), then the output it calls for (the ACK leaves
    /// before the copies, as on the ordinary path, where the reader copies
    /// after the protocol handler ran; acknowledging only after the copies
    /// starved the sender of credit by the copy time, halving two-core
    /// throughput), then the copies. A segment that `buf` takes only in
    /// part leaves its tail in the receive buffer
    /// (`Connection::direct_commit_part`), where `tcp_recv` reads it first
    /// next time before placing directly again. Stops at the first segment
    /// that does not qualify, which it processes the ordinary way after the
    /// copies, at a full `buf`, or after [`MAX_BATCH`] frames. Returns the
    /// bytes placed.
    fn conn_direct(&mut self, idx: u32, buf: &mut [u8], now: u64) -> usize {
        let mut n = 0;
        let mut done = 0;
        let mut stop = false;
        while !stop && done < MAX_BATCH && n < buf.len() {
            // (frame, payload range, offset in `buf`) of this round.
            let mut round = [(Desc::default(), 0u16, 0u16, 0usize); DIRECT_ROUND];
            let mut k = 0;
            let mut other = None;
            let mut at = n;
            while k < DIRECT_ROUND && done < MAX_BATCH && at < buf.len() {
                let Some(Some(s)) = self.tcp.conns.get_mut(idx as usize) else {
                    stop = true;
                    break;
                };
                let bufs = self.out.nic.buffers();
                let Some(d) = pop_ahead(&mut self.demux, bufs, s.chan, done == 0) else {
                    stop = true;
                    break;
                };
                done += 1;
                let Some(frame) = self.out.nic.buffers().frame(d) else {
                    self.drop_rx(StackDrop::BadDescriptor);
                    continue;
                };
                let parsed = parse_tcp_frame(frame);
                if let Ok(seg) = &parsed {
                    let (a, b) = seg.payload;
                    let len = b - a;
                    // `at < buf.len()`: there is room for at least a byte.
                    let take = len.min(buf.len() - at);
                    if s.conn.direct_ok(&seg.repr, len) {
                        if take == len {
                            s.conn.direct_commit(now, &seg.repr, len);
                        } else if !s.conn.direct_commit_part(
                            now,
                            &seg.repr,
                            len,
                            &frame[a + take..b],
                        ) {
                            // The tail does not fit the receive buffer.
                            other = Some((d, parsed));
                            stop = true;
                            break;
                        }
                        // Else, if `take < len`, the reader's buffer ends
                        // inside this segment: its tail went to the receive
                        // buffer, which the next read empties first, and
                        // `at` reaches the end.
                        round[k] = (d, a as u16, (a + take) as u16, at);
                        k += 1;
                        at += take;
                        continue;
                    }
                }
                // The ordinary way (which also counts a malformed frame's
                // drop), after this round's copies; parsed once.
                other = Some((d, parsed));
                stop = true;
                break;
            }
            if k > 0 {
                self.tcp.stats.segments_in += k as u64;
                if self.tcp.conns[idx as usize]
                    .as_ref()
                    .is_some_and(|s| s.conn.wants_output(now))
                {
                    self.conn_after(idx, now, false);
                    self.out.nic.flush();
                }
                let evict = self.out.handback.evict();
                for &(d, a, b, off) in &round[..k] {
                    if let Some(f) = self.out.nic.buffers().frame(d) {
                        let p = &f[a as usize..b as usize];
                        buf[off..off + p.len()].copy_from_slice(p);
                    }
                    if evict {
                        self.out.nic.buffers().evict(d);
                    }
                    self.out.release(d);
                }
                if evict {
                    self.tcp.stats.frames_evicted += k as u64;
                }
                self.out.handback.placed((at - n) as u64, now);
                n = at;
            }
            if let Some((d, parsed)) = other {
                self.conn_input_parsed(idx, d, parsed, now);
            }
        }
        n
    }

    /// Processes at most `max` queued segments of listener `idx`, unless
    /// it is stalled ([`listener_stalled`]; `force`: the timer path, which
    /// reads a stalled-by-SYN-queue listener's channel anyway so that
    /// handshakes in progress complete). Segments of connections accepted
    /// since they were queued move to those connections' channels.
    fn listen_input(&mut self, idx: u32, now: u64, max: usize, force: bool) -> usize {
        let lazy = !self.mode.eager_protocol();
        let mut done = 0;
        while done < max {
            let Some(Some(s)) = self.tcp.listeners.get_mut(idx as usize) else {
                break;
            };
            if s.l.accept_queue_full() || (!force && listener_stalled(&s.l, lazy)) {
                // LRP §3.4: stop processing; SYNs fall off at the channel.
                break;
            }
            let Some(d) = self.demux.channel_mut(s.chan).and_then(|c| c.pop()) else {
                break;
            };
            done += 1;
            let Some(frame) = self.out.nic.buffers().frame(d) else {
                self.drop_rx(StackDrop::BadDescriptor);
                continue;
            };
            match parse_tcp_frame(frame) {
                Ok(seg) => {
                    let local = SocketAddrV4::new(seg.dst, seg.repr.dst_port);
                    let remote = SocketAddrV4::new(seg.src, seg.repr.src_port);
                    if let Some(ch) = self.demux.lookup_tcp_conn(local, remote) {
                        if self.demux.enqueue(ch, d).is_ok() {
                            self.tcp.stats.redirected += 1;
                        } else {
                            self.rx_fail(d, StackDrop::TcpRedirectFull);
                        }
                        continue;
                    }
                    let key = TwKey { local, remote };
                    match self.tcp.tw.handle_segment(now, &key, &seg.repr) {
                        // RFC 6191: an acceptable SYN for a 4-tuple in
                        // TIME-WAIT opens a new connection.
                        TwAction::NoEntry | TwAction::AllowSyn { .. } => {}
                        other => {
                            self.tcp.stats.segments_in += 1;
                            self.tcp.stats.time_wait_segments += 1;
                            self.out.release(d);
                            self.tw_reply(&key, other, now);
                            continue;
                        }
                    }
                    let Some(Some(s)) = self.tcp.listeners.get_mut(idx as usize) else {
                        self.rx_fail(d, StackDrop::SocketClosed);
                        break;
                    };
                    let payload = &frame[seg.payload.0..seg.payload.1];
                    s.l.handle_segment(now, remote, &seg.repr, payload, &self.tcp.secret);
                    self.tcp.stats.segments_in += 1;
                    self.out.release(d);
                }
                Err(e) => self.rx_fail(d, e),
            }
        }
        done
    }

    fn listen_after(&mut self, idx: u32, now: u64) {
        let Some(Some(s)) = self.tcp.listeners.get_mut(idx as usize) else {
            return;
        };
        let sent = self.out.listen_output(&mut s.l, now);
        self.tcp.stats.segments_out += sent as u64;
        Tcp::arm(
            &mut self.tcp.timers,
            &mut s.armed,
            s.l.poll_timeout(),
            idx | LISTENER_BIT,
            s.gen,
        );
        if s.l.accept_queue_len() > 0 && !s.in_events {
            s.in_events = true;
            self.tcp
                .events
                .push(TcpEvent::Listener(ListenHandle { idx, gen: s.gen }));
        }
    }

    // ----- TCP: the protocol handler -----

    /// Runs TCP protocol work that is due: expired timers, then the
    /// channels that received segments (at most [`SERVICE_PER_CHANNEL`]
    /// each per round), until `budget` units of work are done. Returns the
    /// work done; a channel left non-empty stays on the ready list.
    pub fn tcp_service(&mut self, now: u64, budget: usize) -> usize {
        self.service(now, budget, None)
    }

    /// [`Stack::tcp_service`] restricted to the connections and listeners
    /// tagged `tag` ([`Stack::tcp_set_tag`]): the protocol handler of one
    /// owner (LRP §3.4: TCP input at the owner's priority, charged to it).
    /// Ready channels and expired timers of other tags are left for their
    /// own handlers; the TIME-WAIT table is swept only by tag 0 (and by
    /// `tcp_service`). Same work bound.
    pub fn tcp_service_tag(&mut self, now: u64, tag: u16, budget: usize) -> usize {
        self.service(now, budget, Some(tag))
    }

    /// Tags a connection for [`Stack::tcp_service_tag`] (0: untagged).
    pub fn tcp_set_tag(&mut self, h: TcpHandle, tag: u16) -> Result<(), SocketError> {
        let c = self.tcp.conn(h)?.chan.0 as usize;
        self.tcp.tags[c] = tag;
        Ok(())
    }

    /// Tags a listener; connections it accepts inherit the tag.
    pub fn tcp_listen_set_tag(&mut self, h: ListenHandle, tag: u16) -> Result<(), SocketError> {
        let c = self.tcp.listener(h)?.chan.0 as usize;
        self.tcp.tags[c] = tag;
        Ok(())
    }

    /// Which tags have TCP input waiting: bit `t` for tag `t < 63`, bit 63
    /// for all larger tags. O(ready channels); allocation-free (the ready
    /// list is taken and put back in order).
    pub fn tcp_ready_tags(&mut self) -> u64 {
        let mut ready = std::mem::take(&mut self.tcp.ready);
        self.demux.take_ready(&mut ready);
        let mut mask = 0u64;
        for &c in &ready {
            if self.tcp.is_owned(c) {
                mask |= 1 << self.tcp.tag_of(c).min(63);
            }
            self.demux.mark_ready(ChannelId(c));
        }
        ready.clear();
        self.tcp.ready = ready;
        mask
    }

    /// The tag of the earliest TCP timer if it expired by `now` (`Some(0)`
    /// also for a stale entry or the TIME-WAIT table): whose handler should
    /// run for timers.
    pub fn tcp_due_timer_tag(&self, now: u64) -> Option<u16> {
        if self.tcp.tw.poll_timeout().is_some_and(|t| t <= now) {
            return Some(0);
        }
        let &Reverse((t, id, _)) = self.tcp.timers.peek()?;
        (t <= now).then(|| self.tcp.timer_tag(id).unwrap_or(0))
    }

    fn service(&mut self, now: u64, budget: usize, only: Option<u16>) -> usize {
        let mine = |tag: u16| only.is_none_or(|o| o == tag);
        let lazy = !self.mode.eager_protocol();
        let mut work = 0;
        let live = self.tcp.conns.len() + self.tcp.listeners.len();
        if self.tcp.timers.len() > TIMER_HEAP_SLACK * live + 1024 {
            self.compact_timers();
        }
        if mine(0) && self.tcp.tw.poll_timeout().is_some_and(|t| t <= now) {
            work += self.tcp.tw.poll_expired(now, budget);
        }
        // Expired entries of other tags are set aside (a bounded number per
        // call) and pushed back after the loop.
        // (Only a tagged call looks at tags: the untagged one, the common
        // path, pays neither the lookups nor the set-aside array.)
        let mut others: Option<[Reverse<(u64, u32, u32)>; 32]> = None;
        let mut n_others = 0;
        while work < budget {
            let Some(&Reverse((t, id, gen))) = self.tcp.timers.peek() else {
                break;
            };
            if t > now {
                break;
            }
            if only.is_some() && self.tcp.timer_tag(id).is_some_and(|tg| !mine(tg)) {
                let set = others.get_or_insert([Reverse((0, 0, 0)); 32]);
                if n_others == set.len() {
                    break;
                }
                set[n_others] = Reverse((t, id, gen));
                n_others += 1;
                self.tcp.timers.pop();
                continue;
            }
            self.tcp.timers.pop();
            if self.fire_timer(id, gen, t, now) {
                work += 1;
            }
        }
        if let Some(set) = &others {
            for e in &set[..n_others] {
                self.tcp.timers.push(*e);
            }
        }
        let mut ready = std::mem::take(&mut self.tcp.ready);
        self.demux.take_ready(&mut ready);
        let mut i = 0;
        while i < ready.len() {
            let c = ready[i];
            i += 1;
            if work >= budget
                || (only.is_some() && self.tcp.is_owned(c) && !mine(self.tcp.tag_of(c)))
            {
                self.demux.mark_ready(ChannelId(c));
                continue;
            }
            let max = SERVICE_PER_CHANNEL.min(budget - work);
            match self.tcp.owner_of(c) {
                Owner::Conn(idx) => {
                    let n = self.conn_input(idx, now, max);
                    work += n;
                    if n > 0 {
                        self.conn_after(idx, now, true);
                    }
                }
                Owner::Listener(idx) => {
                    let n = self.listen_input(idx, now, max, false);
                    work += n;
                    if n > 0 {
                        self.listen_after(idx, now);
                    }
                }
                Owner::None => {}
            }
            // Frames left over (work bound): back on the list. A stalled
            // listener stays off it until accept or its timer makes room.
            let resume = match self.tcp.owner_of(c) {
                Owner::Conn(_) => true,
                Owner::Listener(l) => self.tcp.listeners[l as usize]
                    .as_ref()
                    .is_some_and(|s| !listener_stalled(&s.l, lazy)),
                Owner::None => false,
            };
            if resume {
                self.demux.mark_ready(ChannelId(c));
            }
        }
        ready.clear();
        self.tcp.ready = ready;
        self.out.flush_release();
        self.out.nic.flush();
        work
    }

    /// Rebuilds the timer heap with only the entries a slot still has armed
    /// (control path: O(entries), amortized over the pushes that made them
    /// stale).
    fn compact_timers(&mut self) {
        let tcp = &mut self.tcp;
        let (conns, listeners) = (&tcp.conns, &tcp.listeners);
        let live = |&Reverse((t, id, gen)): &Reverse<(u64, u32, u32)>| {
            if id & LISTENER_BIT != 0 {
                matches!(listeners.get((id & !LISTENER_BIT) as usize),
                    Some(Some(s)) if s.gen == gen && s.armed == Some(t))
            } else {
                matches!(conns.get(id as usize),
                    Some(Some(s)) if s.gen == gen && s.armed == Some(t))
            }
        };
        let kept: Vec<_> = tcp.timers.drain().filter(live).collect();
        tcp.timers = BinaryHeap::from(kept);
    }

    /// Handles one popped timer entry; false if it was stale.
    fn fire_timer(&mut self, id: u32, gen: u32, t: u64, now: u64) -> bool {
        if id & LISTENER_BIT != 0 {
            let idx = id & !LISTENER_BIT;
            let Some(Some(s)) = self.tcp.listeners.get_mut(idx as usize) else {
                return false;
            };
            if s.gen != gen || s.armed != Some(t) {
                return false;
            }
            s.armed = None;
            // As for connections (below): queued segments first, so that a
            // handshake's final ACK waiting on the channel completes it
            // instead of a SYN-ACK being retransmitted (or the half-open
            // entry expiring) first.
            // Forced: a listener stalled by its full SYN queue reads its
            // channel here, once per timer, so handshakes in progress
            // complete (module docs).
            let chan = s.chan;
            let queued = self.demux.queued(chan);
            if queued > 0 {
                self.listen_input(idx, now, queued.min(MAX_BATCH), true);
            }
            let Some(Some(s)) = self.tcp.listeners.get_mut(idx as usize) else {
                return false;
            };
            s.l.handle_timeout(now);
            self.tcp.stats.timers += 1;
            // Expired entries may have made room: resume a listener that
            // was left off the ready list while stalled.
            let lazy = !self.mode.eager_protocol();
            let resume = !listener_stalled(&s.l, lazy);
            self.listen_after(idx, now);
            if resume {
                self.demux.mark_ready(chan);
            }
            return true;
        }
        let Some(Some(s)) = self.tcp.conns.get_mut(id as usize) else {
            return false;
        };
        if s.gen != gen || s.armed != Some(t) {
            return false;
        }
        s.armed = None;
        // Segments already queued on the channel arrived before this timer
        // is handled: process them first. An ACK waiting there must stop
        // the retransmission timer instead of losing the race to it (a
        // spurious RTO: go-back-N and the window down to one segment). The
        // lazy design makes the gap as long as the caller's service
        // interval (found by stack_tcp_netsim: an RTO every 200 ms on a
        // steady 100 ms path, the ACK queued at the deadline).
        let chan = s.chan;
        let queued = self.demux.queued(chan);
        if queued > 0 {
            self.conn_input(id, now, queued.min(MAX_BATCH));
        }
        let Some(Some(s)) = self.tcp.conns.get_mut(id as usize) else {
            return false;
        };
        if s.conn.poll_timeout().is_some_and(|d| d <= now) {
            s.conn.handle_timeout(now);
            self.tcp.stats.timers += 1;
        }
        self.conn_after(id, now, true);
        true
    }

    /// The earliest TCP timer deadline (for a caller that sleeps).
    pub fn tcp_next_timeout(&self) -> Option<u64> {
        let t = self.tcp.timers.peek().map(|r| r.0 .0);
        match (t, self.tcp.tw.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Entries in the timer heap, stale ones included (for tests of its
    /// bound).
    pub fn tcp_timer_entries(&self) -> usize {
        self.tcp.timers.len()
    }

    /// Entries in the TIME-WAIT table.
    pub fn tcp_time_wait_len(&self) -> usize {
        self.tcp.tw.len()
    }

    /// The TIME-WAIT table's counters.
    pub fn tcp_time_wait_counters(&self) -> crate::proto::tcp::TwCounters {
        *self.tcp.tw.counters()
    }

    /// Moves the connections and listeners that had something happen since
    /// the last call to `out` (each at most once).
    pub fn tcp_take_events(&mut self, out: &mut Vec<TcpEvent>) {
        let tcp = &mut self.tcp;
        let (conns, listeners) = (&mut tcp.conns, &mut tcp.listeners);
        // Events of handles freed meanwhile are dropped here.
        tcp.events.retain(|e| match *e {
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
        out.append(&mut tcp.events);
    }

    /// True if channel `c` belongs to a TCP connection or listener.
    pub(super) fn is_tcp_channel(&self, c: ChannelId) -> bool {
        self.tcp.is_owned(c.0)
    }

    /// Counters of the TCP part.
    pub fn tcp_stats(&self) -> &TcpStats {
        &self.tcp.stats
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

    // ----- TCP: control channel -----

    /// A segment to no connection and no listener (RFC 9293 §3.10.7.1,
    /// CLOSED): RST unless it is a RST, rate limited.
    pub(super) fn tcp_no_socket(&mut self, d: Desc, now: u64) {
        let Some(frame) = self.out.nic.buffers().frame(d) else {
            // Not a buffer we can name: nothing to release either.
            self.drop_rx(StackDrop::BadDescriptor);
            return;
        };
        let seg = match parse_tcp_frame(frame) {
            Ok(s) => s,
            Err(e) => return self.rx_fail(d, e),
        };
        let key = TwKey {
            local: SocketAddrV4::new(seg.dst, seg.repr.dst_port),
            remote: SocketAddrV4::new(seg.src, seg.repr.src_port),
        };
        match self.tcp.tw.handle_segment(now, &key, &seg.repr) {
            // No listener here, so an acceptable new SYN is answered as in
            // CLOSED (a RST).
            TwAction::NoEntry | TwAction::AllowSyn { .. } => {}
            other => {
                self.tcp.stats.segments_in += 1;
                self.tcp.stats.time_wait_segments += 1;
                self.out.release(d);
                self.tw_reply(&key, other, now);
                return;
            }
        }
        let reply = reset_for(&seg.repr);
        self.rx_fail(d, StackDrop::TcpNoSocket);
        let Some(r) = reply else { return };
        if !self.tcp.rst_limit.allow(now) {
            self.tcp.stats.resets_suppressed += 1;
            return;
        }
        let Some(b) = self.out.take_tx_buf() else {
            self.out.drop_tx(StackDrop::TxNoBuffer);
            return;
        };
        if self
            .out
            .tcp_emit(b, seg.dst, seg.src, &r, None, 0, now, false)
            .is_ok()
        {
            self.tcp.stats.resets_sent += 1;
        }
    }

    /// Sends the ACK the TIME-WAIT table asked for, if any.
    fn tw_reply(&mut self, key: &TwKey, a: TwAction, now: u64) {
        if let TwAction::SendAck(r) = a {
            let Some(b) = self.out.take_tx_buf() else {
                self.out.drop_tx(StackDrop::TxNoBuffer);
                return;
            };
            if self
                .out
                .tcp_emit(
                    b,
                    *key.local.ip(),
                    *key.remote.ip(),
                    &r,
                    None,
                    0,
                    now,
                    false,
                )
                .is_ok()
            {
                self.tcp.stats.segments_out += 1;
            }
        }
    }

    // ----- TCP: socket calls (used by `socket`) -----

    /// The default connection configuration, with the MSS fitted to the MTU.
    pub fn tcp_config(&self) -> Config {
        self.tcp.cfg
    }

    fn fit(&mut self, mut cfg: Config) -> Config {
        let mtu_mss = self.out.mtu.saturating_sub(40).clamp(64, u16::MAX as usize) as u16;
        cfg.mss = cfg.mss.min(mtu_mss);
        // RFC 7323 §5.4: a random offset per connection for TSval.
        cfg.ts_offset = self.rng.next_u32();
        cfg
    }

    /// Listens on `local` (address `0.0.0.0` for ours; port must not be 0).
    /// Connections get `cfg` (`None`: the stack's default).
    pub fn tcp_listen(
        &mut self,
        local: SocketAddrV4,
        lcfg: Option<ListenConfig>,
        cfg: Option<Config>,
    ) -> Result<ListenHandle, SocketError> {
        let addr = *local.ip();
        if !addr.is_unspecified() && addr != self.out.addr {
            return Err(SocketError::AddrNotAvailable);
        }
        if local.port() == 0 {
            return Err(SocketError::AddrNotAvailable);
        }
        let lcfg = lcfg.unwrap_or(self.tcp.listen_cfg);
        // The channel holds at least a backlog's worth of handshakes.
        let cap = self.tcp.chan_cap.max(lcfg.backlog.min(1 << 16));
        let chan = self
            .demux
            .bind_tcp_listen(addr, local.port(), cap)
            .map_err(|_| SocketError::AddrInUse)?;
        self.ni_bind(chan, cap, super::ni::BindKind::Listen(addr, local.port()));
        let cfg = cfg.unwrap_or(self.tcp.cfg);
        let mut cfg = self.fit(cfg);
        // Each passive connection gets its own offset from the listener's
        // SYN-ACK path; the fitted one serves as the listener's.
        cfg.ts_offset = 0;
        let me = SocketAddrV4::new(self.out.addr, local.port());
        let l = Listener::new(lcfg, cfg, me, &self.tcp.secret);
        let idx = match self.tcp.free_listeners.pop() {
            Some(i) => i,
            None => {
                self.tcp.listeners.push(None);
                self.tcp.listen_gen.push(0);
                (self.tcp.listeners.len() - 1) as u32
            }
        };
        let gen = self.tcp.listen_gen[idx as usize];
        self.tcp.listeners[idx as usize] = Some(ListenSlot {
            l,
            chan,
            gen,
            bound: local,
            armed: None,
            in_events: false,
        });
        self.tcp.set_owner(chan, Owner::Listener(idx));
        Ok(ListenHandle { idx, gen })
    }

    /// Accepts one established connection, after processing the listener's
    /// queued segments in the caller's context. `WouldBlock` if none.
    pub fn tcp_accept(&mut self, h: ListenHandle, now: u64) -> Result<TcpHandle, SocketError> {
        let s = self.tcp.listener(h)?;
        let chan = s.chan;
        let queued = self.demux.queued(chan);
        if self.listen_input(h.idx, now, queued.min(MAX_BATCH), false) > 0 {
            self.listen_after(h.idx, now);
        }
        let Some(Some(s)) = self.tcp.listeners.get_mut(h.idx as usize) else {
            return Err(SocketError::BadHandle);
        };
        let Some((_, conn)) = s.l.accept() else {
            return Err(SocketError::WouldBlock);
        };
        let tag = self.tcp.tag_of(chan.0);
        let c = self.install_conn(conn)?;
        if let Some(Some(s)) = self.tcp.conns.get(c.idx as usize) {
            self.tcp.tags[s.chan.0 as usize] = tag;
        }
        self.tcp.stats.accepted += 1;
        // Room in the accept queue again: resume the listener.
        self.demux.mark_ready(chan);
        self.conn_after(c.idx, now, false);
        Ok(c)
    }

    /// True if listener `h` is stalled: it will not read its channel until
    /// `accept` (full accept queue) or its timer (full SYN queue without
    /// cookies, lazy modes) makes room.
    pub fn tcp_listen_stalled(&self, h: ListenHandle) -> Result<bool, SocketError> {
        let s = self.tcp.listener(h)?;
        Ok(listener_stalled(&s.l, !self.mode.eager_protocol()))
    }

    /// Half-open connections (SYN-RECEIVED) of a listener.
    pub fn tcp_syn_queue_len(&self, h: ListenHandle) -> Result<usize, SocketError> {
        Ok(self.tcp.listener(h)?.l.syn_queue_len())
    }

    /// Connections waiting in a listener's accept queue.
    pub fn tcp_accept_queue_len(&self, h: ListenHandle) -> Result<usize, SocketError> {
        Ok(self.tcp.listener(h)?.l.accept_queue_len())
    }

    /// The listener's counters.
    pub fn tcp_listener_counters(
        &self,
        h: ListenHandle,
    ) -> Result<crate::proto::tcp::ListenCounters, SocketError> {
        Ok(*self.tcp.listener(h)?.l.counters())
    }

    /// Frames waiting in a listener's channel (not yet processed).
    pub fn tcp_listen_pending(&self, h: ListenHandle) -> Result<usize, SocketError> {
        let s = self.tcp.listener(h)?;
        Ok(self.demux.queued(s.chan))
    }

    /// The address a listener was bound to.
    pub fn tcp_listen_addr(&self, h: ListenHandle) -> Result<SocketAddrV4, SocketError> {
        Ok(self.tcp.listener(h)?.bound)
    }

    /// Closes a listener: its queued frames are released; every half-open
    /// entry and every connection not yet accepted is reset (RFC 9293
    /// §3.10.5 ABORT, see [`Listener::poll_close`]) and dropped, so nothing of
    /// the listener is left. Work: at most `syn_queue + backlog` RSTs, sent
    /// in batches; one that finds no transmit buffer is counted
    /// (`TxNoBuffer`) and not retried. Not rate limited: the RSTs answer
    /// our own close, not a peer's segments, and are bounded by the queues.
    pub fn tcp_listen_close(&mut self, h: ListenHandle, now: u64) -> Result<(), SocketError> {
        self.tcp.listener(h)?;
        let Some(mut s) = self.tcp.listeners[h.idx as usize].take() else {
            return Err(SocketError::BadHandle);
        };
        let mut left = Vec::new();
        let _ = self
            .demux
            .unbind_tcp_listen(*s.bound.ip(), s.bound.port(), &mut left);
        self.ni_unbind(super::ni::BindKind::Listen(*s.bound.ip(), s.bound.port()));
        self.tcp.set_owner(s.chan, Owner::None);
        for d in left {
            self.stats.drops[StackDrop::SocketClosed as usize] += 1;
            self.stats.rx_frame_drops += 1;
            self.out.release(d);
        }
        let (sent, unsent) = self.out.listen_close_output(&mut s.l, now);
        self.tcp.stats.resets_sent += sent as u64;
        self.tcp.stats.segments_out += sent as u64;
        self.tcp.stats.close_resets_unsent += unsent as u64;
        self.tcp.listen_gen[h.idx as usize] = self.tcp.listen_gen[h.idx as usize].wrapping_add(1);
        self.tcp.free_listeners.push(h.idx);
        self.out.flush_release();
        Ok(())
    }

    /// Active open to `remote` from our address and an ephemeral port
    /// (RFC 6056 Algorithm 3) with an RFC 6528 ISN; the SYN goes out now.
    pub fn tcp_connect(
        &mut self,
        remote: SocketAddrV4,
        cfg: Option<Config>,
        now: u64,
    ) -> Result<TcpHandle, SocketError> {
        if remote.port() == 0 || remote.ip().is_unspecified() || remote.ip().is_broadcast() {
            return Err(SocketError::AddrNotAvailable);
        }
        self.out
            .next_hop(*remote.ip())
            .ok_or(SocketError::NoRoute)?;
        let me = self.out.addr;
        let demux = &self.demux;
        let tw = &self.tcp.tw;
        let port = self
            .tcp
            .ports
            .allocate(&self.tcp.secret, me, remote, |p| {
                let local = SocketAddrV4::new(me, p);
                demux.tcp_conn_used(local, remote)
                    || demux.tcp_listen_used(me, p)
                    || tw.lookup(&TwKey { local, remote }).is_some()
            })
            .ok_or(SocketError::NoPorts)?;
        let local = SocketAddrV4::new(me, port);
        let cfg = self.fit(cfg.unwrap_or(self.tcp.cfg));
        let iss = self.tcp.secret.isn(local, remote, now);
        let conn = Connection::connect(cfg, local, remote, iss, now);
        let h = self.install_conn(conn)?;
        self.tcp.stats.connects += 1;
        self.conn_after(h.idx, now, false);
        self.out.flush_release();
        self.out.nic.flush();
        Ok(h)
    }

    /// Processes the connection's queued segments (bounded by what is
    /// queued at entry and [`MAX_BATCH`]) in the caller's context.
    fn conn_catch_up(&mut self, h: TcpHandle, now: u64) -> Result<(), SocketError> {
        let chan = self.tcp.conn(h)?.chan;
        let queued = self.demux.queued(chan);
        if queued > 0 {
            self.conn_input(h.idx, now, queued.min(MAX_BATCH));
            self.conn_after(h.idx, now, false);
        }
        Ok(())
    }

    /// Reads received bytes into `buf`. `Ok(0)` is end of stream (the peer
    /// sent FIN and everything was read); `WouldBlock` if nothing is there.
    ///
    /// The connection's queued segments are processed here, in the
    /// caller's context (LRP §3.4), in-order text going straight into `buf`
    /// where it can (direct placement). Once `buf` is full, segments
    /// still queued wait for the next read or for the connection's
    /// protocol handler ([`Stack::tcp_service`]).
    pub fn tcp_recv(
        &mut self,
        h: TcpHandle,
        buf: &mut [u8],
        now: u64,
    ) -> Result<usize, SocketError> {
        let s = self.tcp.conn(h)?;
        let mut n = 0;
        if !buf.is_empty() && self.demux.queued(s.chan) > 0 {
            let mut empty = s.conn.recv_queue() == 0;
            if !empty {
                // Bytes in the receive buffer come first (often the tail
                // of a segment the last read placed in part); once it is
                // empty, what is queued may still go straight to `buf`.
                let s = self.tcp.conn_mut(h)?;
                n = s.conn.recv(buf);
                empty = s.conn.recv_queue() == 0;
            }
            if empty && n < buf.len() {
                n += self.conn_direct(h.idx, &mut buf[n..], now);
            }
        }
        if n < buf.len() {
            self.conn_catch_up(h, now)?;
        }
        // Else `buf` is full: what is still queued waits for the next read
        // (or `tcp_service`), which may place it directly; catching up now
        // would move it all through the receive buffer.
        let s = self.tcp.conn_mut(h)?;
        n += s.conn.recv(&mut buf[n..]);
        if n > 0 {
            // A window update may be due (RFC 9293 §3.8.6.2.2). If not,
            // `recv` changed nothing a timer or `poll_transmit` depends on
            // (the last `conn_after` already ran after the last change), so
            // `conn_after` would send nothing and re-arm the same deadline.
            if s.conn.wants_output(now) {
                self.conn_after(h.idx, now, false);
            }
            self.out.flush_release();
            self.out.nic.flush();
            return Ok(n);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        if let Some(e) = s.conn.error() {
            return Err(conn_error(e));
        }
        if s.conn.recv_finished() {
            return Ok(0);
        }
        match s.conn.state() {
            State::Closed => Err(SocketError::NotConnected),
            _ => Err(SocketError::WouldBlock),
        }
    }

    /// Queues bytes for sending; returns how many fit in the send buffer.
    /// `WouldBlock` if none fit now.
    pub fn tcp_send(&mut self, h: TcpHandle, data: &[u8], now: u64) -> Result<usize, SocketError> {
        self.conn_catch_up(h, now)?;
        let s = self.tcp.conn_mut(h)?;
        if let Some(e) = s.conn.error() {
            return Err(conn_error(e));
        }
        if !s.conn.may_send() {
            return Err(match s.conn.state() {
                State::SynSent | State::SynReceived => SocketError::WouldBlock,
                _ => SocketError::NotConnected,
            });
        }
        let n = s.conn.send(data);
        if n > 0 {
            self.conn_after(h.idx, now, false);
            self.out.flush_release();
            self.out.nic.flush();
            Ok(n)
        } else if data.is_empty() {
            Ok(0)
        } else {
            Err(SocketError::WouldBlock)
        }
    }

    /// Bytes that fit in the send buffer now.
    pub fn tcp_send_space(&self, h: TcpHandle) -> Result<usize, SocketError> {
        let s = self.tcp.conn(h)?;
        Ok(s.conn.send_space())
    }

    /// Bytes sent but not yet acknowledged, plus bytes not yet sent.
    pub fn tcp_send_queue(&self, h: TcpHandle) -> Result<usize, SocketError> {
        Ok(self.tcp.conn(h)?.conn.send_queue())
    }

    /// Bytes received and not yet read.
    pub fn tcp_recv_queue(&self, h: TcpHandle) -> Result<usize, SocketError> {
        Ok(self.tcp.conn(h)?.conn.recv_queue())
    }

    /// Half-close: send FIN after the queued data (RFC 9293 §3.10.4).
    pub fn tcp_shutdown(&mut self, h: TcpHandle, now: u64) -> Result<(), SocketError> {
        let s = self.tcp.conn_mut(h)?;
        s.conn.close();
        self.conn_after(h.idx, now, false);
        self.out.flush_release();
        self.out.nic.flush();
        Ok(())
    }

    /// Closes the handle. The connection finishes in the background (FIN,
    /// TIME-WAIT); if received data was left unread it is reset instead
    /// (RFC 9293 §3.10.4, RFC 2525 §2.17), as Linux does.
    pub fn tcp_close(&mut self, h: TcpHandle, now: u64) -> Result<(), SocketError> {
        self.conn_catch_up(h, now)?;
        let s = self.tcp.conn_mut(h)?;
        if s.conn.recv_queue() > 0 {
            s.conn.abort();
        } else {
            s.conn.close();
        }
        s.detached = true;
        self.conn_after(h.idx, now, false);
        self.out.flush_release();
        self.out.nic.flush();
        Ok(())
    }

    /// Resets the connection and closes the handle.
    pub fn tcp_abort(&mut self, h: TcpHandle, now: u64) -> Result<(), SocketError> {
        let s = self.tcp.conn_mut(h)?;
        s.conn.abort();
        s.detached = true;
        self.conn_after(h.idx, now, false);
        self.out.flush_release();
        self.out.nic.flush();
        Ok(())
    }

    /// Processes queued input and reports the state.
    pub fn tcp_state(&mut self, h: TcpHandle, now: u64) -> Result<State, SocketError> {
        self.conn_catch_up(h, now)?;
        Ok(self.tcp.conn(h)?.conn.state())
    }

    /// The error that ended the connection, if any.
    pub fn tcp_error(&self, h: TcpHandle) -> Result<Option<SocketError>, SocketError> {
        Ok(self.tcp.conn(h)?.conn.error().map(conn_error))
    }

    /// True once the peer's FIN was received and all data read.
    pub fn tcp_recv_finished(&self, h: TcpHandle) -> Result<bool, SocketError> {
        Ok(self.tcp.conn(h)?.conn.recv_finished())
    }

    /// Local and remote address.
    pub fn tcp_addrs(&self, h: TcpHandle) -> Result<(SocketAddrV4, SocketAddrV4), SocketError> {
        let s = self.tcp.conn(h)?;
        Ok((s.conn.local(), s.conn.remote()))
    }

    /// Switches Nagle's algorithm off (`true`) or on.
    pub fn tcp_set_nodelay(&mut self, h: TcpHandle, on: bool) -> Result<(), SocketError> {
        self.tcp.conn_mut(h)?.conn.set_nodelay(on);
        Ok(())
    }

    /// The connection's counters.
    pub fn tcp_counters(
        &self,
        h: TcpHandle,
    ) -> Result<crate::proto::tcp::TcpCounters, SocketError> {
        Ok(*self.tcp.conn(h)?.conn.counters())
    }

    /// Frames waiting in a connection's channel (not yet processed).
    pub fn tcp_pending(&self, h: TcpHandle) -> Result<usize, SocketError> {
        let s = self.tcp.conn(h)?;
        Ok(self.demux.queued(s.chan))
    }

    /// Runs `f` on the connection (read-only), for tests and tools.
    pub fn tcp_inspect<R>(
        &self,
        h: TcpHandle,
        f: impl FnOnce(&Connection) -> R,
    ) -> Result<R, SocketError> {
        Ok(f(&self.tcp.conn(h)?.conn))
    }
}
