//! A listening socket (RFC 9293 §3.10.7.2, LISTEN state), sans-IO.
//!
//! **Owns:** the SYN queue (compact half-open entries, the state of
//! SYN-RECEIVED before the final ACK), the accept queue (connections that
//! reached ESTABLISHED and wait for [`Listener::accept`]), one hash index
//! over both queues by remote address, a small queue of stateless replies
//! (cookie SYN-ACKs, RSTs, ACKs of half-open entries), and counters per
//! drop reason ([`ListenDrop`]).
//!
//! **May not touch:** clocks, randomness, I/O, the caller's table of
//! established connections, demultiplexing. Time comes in as `now`
//! (nanoseconds, never decreasing), the hash key as a [`Secret`].
//!
//! **Contract with the caller (the stack):**
//! - [`Listener::handle_segment`] gets the segments to the listening port
//!   from 4-tuples that have no connection in the caller's table. That
//!   includes segments for entries still in either queue: until a
//!   connection is accepted and installed in the caller's table, the
//!   listener feeds it (data that arrives then is buffered in the
//!   connection and readable after `accept`).
//! - After every input, and when [`Listener::poll_timeout`] is due, call
//!   [`Listener::handle_timeout`] then [`Listener::poll_transmit`] until
//!   `None`.
//! - When [`Listener::accept_queue_full`] is true the stack stops
//!   processing this listener (LRP: further SYNs fall off at its channel);
//!   a SYN that reaches a full listener anyway is dropped and counted.
//!
//! **Half-open entries are compact** (as Linux's request socks): remote
//! address, ISS, IRS, the SYN's window and options (MSS, window scale,
//! SACK-permitted, TSval), retransmission and resend counts, timer,
//! challenge-ACK budget: 56 bytes ([`Listener::HALF_OPEN_BYTES`]). The
//! listener builds the SYN-ACK itself (the same segment
//! [`Connection::accept_syn`] would send, checked by a test) and runs the
//! SYN-RECEIVED checks of RFC 9293 §3.10.7.4 with RFC 5961 and PAWS on the
//! entry (`tests/tcp/listen_diff.rs` compares the whole listener with the
//! previous one, whose entries were Connections). Only the final ACK
//! builds the [`Connection`] (and allocates its buffers): from the SYN the
//! entry stands for, via `Connection::accept_syn`, replaying its SYN-ACK
//! transmissions (so RTT timing, Karn's rule and the RFC 6298 §5.7 3 s
//! rule after a retransmitted SYN-ACK come out as before), then feeding it
//! the ACK, as the cookie path does. All slots of both queues and the
//! index are allocated at construction: memory is `syn_queue` compact
//! entries plus `backlog` connections.
//!
//! **Lookups** of a remote address go through one open-addressing index
//! over both queues (`tuple_index`): expected O(1), no scans. Its hash
//! is keyed from the stack's [`Secret`] (given to [`Listener::new`]), so a
//! peer cannot choose remote addresses that collide; the worst case, were
//! it to, is a probe sequence of `syn_queue + backlog`.
//!
//! **SYN-ACK timers.** Each entry is on exactly one intrusive list: the
//! *pending* list (a SYN-ACK is due: new entry, duplicate SYN, or timer
//! expired) or the timer list of its backoff level (0..=16, as
//! Connection's backoff cap). All entries of one level wait the same RTO
//! (`rto_initial` doubled per level, capped at `rto_max`, RFC 6298 §5.5),
//! so each level list is in deadline order and `poll_timeout` looks at 17
//! heads. `handle_timeout` pops expired heads: retry
//! ([`ListenConfig::synack_retries`] times) or remove (counted).
//!
//! **Accept queue.** Queued connections keep their own timers (delayed
//! ACK etc.). `poll_timeout` adds a cached lower bound of their timers;
//! when it is due, `handle_timeout` visits the queue once (at most
//! `backlog` entries) and recomputes it. `poll_transmit` visits the queue
//! only after a queued connection was fed or had a timer (a flag), once.
//!
//! **Accept queue full** (Linux semantics, `tcp_abort_on_overflow = 0`):
//! the final ACK of a half-open entry is dropped (counted) and the entry
//! stays half-open; its SYN-ACK retransmission makes the peer ACK again,
//! so the connection completes once there is room, or the entry times
//! out. New SYNs are dropped; a cookie ACK is dropped (the peer retries).
//!
//! **SYN cookies** (RFC 4987 §3.6, [`super::cookie`]): only when the SYN
//! queue is full and [`ListenConfig::syn_cookies`] is set. The ISS keeps
//! the MSS; if the SYN has timestamps, the SYN-ACK's TSval keeps its window
//! shift and SACK-permitted, so that the connection built from the cookie
//! has the options a SYN-queue entry would have given it. Without
//! timestamps the cookie SYN-ACK offers MSS only.
//!
//! **Segments without an entry** (RFC 9293 §3.10.7.2): a RST is ignored;
//! an ACK that is not a valid cookie gets `<SEQ=SEG.ACK><CTL=RST>` (via
//! [`reset_for`]); a SYN opens an entry; anything else (no SYN, no ACK, no
//! RST) is dropped.
//!
//! **ACKs and RSTs from half-open entries** (not acceptable, PAWS, RFC
//! 5961 challenges, bad final ACK) go through the reply queue; challenge
//! ACKs are limited per entry to [`Config::challenge_ack_limit`] per
//! second (RFC 5961 §7; per entry, not shared: a shared counter is the
//! side channel of CVE-2016-5696). No ACK is queued while the entry's
//! SYN-ACK is pending (it acknowledges the same).
//!
//! **Closing** ([`Listener::poll_close`]; RFC 9293 §3.10.5, ABORT): each
//! half-open entry gets `<SEQ=ISS+1><ACK=IRS+1><CTL=RST,ACK>` and each
//! queued connection is aborted ([`Connection::abort`]'s RST), one per
//! call, until both queues are empty; the caller sends them and drops the
//! listener. Before, the half-open entries vanished silently (the peer
//! learned only from its next segment, or its timeout).
//!
//! **Work per call:** `handle_segment`: one index lookup, O(1) list
//! updates, and at most one `Connection::handle_segment` (plus, for a
//! final ACK, building the connection with at most 16 replayed
//! timeouts). `poll_timeout`: 17 list heads. `handle_timeout`: the expired
//! entries, plus one pass over the accept queue when one of its timers is
//! due. `poll_transmit`: O(1) per returned segment, plus one pass over the
//! accept queue after it was touched. `poll_close`: O(1) per returned RST.

use std::collections::VecDeque;
use std::net::SocketAddrV4;

use super::conn::{reset_for, Config, Connection, State};
use super::cookie;
use super::rtt::RttEstimator;
use super::secret::Secret;
use super::tuple_index::{TupleIndex, TupleKey};
use crate::wire::tcp::{SeqNumber, TcpFlags, TcpRepr, Timestamps};

/// Upper bound on any queue capacity (a configuration error guard).
const MAX_QUEUE: usize = 1 << 16;

/// Configuration of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenConfig {
    /// Accept queue capacity (the `listen()` backlog), at least 1.
    pub backlog: usize,
    /// SYN queue capacity (half-open connections), at least 1 — or 0 with
    /// `syn_cookies`: every connection opens through a cookie (as Linux's
    /// `tcp_syncookies = 2`).
    pub syn_queue: usize,
    /// Answer with SYN cookies when the SYN queue is full.
    pub syn_cookies: bool,
    /// SYN-ACK retransmissions before a half-open entry is removed
    /// (overrides [`Config::syn_retries`] for passive opens).
    pub synack_retries: u32,
    /// Stateless replies (cookie SYN-ACKs, RSTs) waiting for
    /// `poll_transmit`, at least 1; more are dropped and counted.
    pub reply_queue: usize,
}

impl Default for ListenConfig {
    fn default() -> Self {
        ListenConfig {
            backlog: 128,
            syn_queue: 256,
            syn_cookies: true,
            // Linux tcp_synack_retries.
            synack_retries: 5,
            reply_queue: 16,
        }
    }
}

/// Why the listener discarded a segment (or a reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ListenDrop {
    /// `payload.len() != repr.payload_len`.
    BadLength = 0,
    /// Destination port is not the listening port.
    WrongPort,
    /// SYN with the SYN queue full and cookies off.
    SynQueueFull,
    /// SYN or final ACK while the accept queue is full.
    AcceptQueueFull,
    /// A stateless reply did not fit the reply queue.
    ReplyQueueFull,
    /// SYN with FIN or RST set, or not acceptable to the connection core.
    BadSyn,
    /// ACK without an entry and without a valid cookie (RST sent).
    BadCookie,
    /// RST without an entry (ignored, RFC 9293 §3.10.7.2).
    RstNoEntry,
    /// Neither SYN, ACK nor RST without an entry.
    NoSynNoAck,
    /// A half-open or queued connection discarded the segment (its own
    /// counters say why).
    ConnDropped,
    /// A duplicate SYN beyond the SYN-ACK resend limit.
    DupSynLimit,
}

impl ListenDrop {
    /// Number of reasons.
    pub const COUNT: usize = 11;
    /// A static description.
    pub const fn as_str(self) -> &'static str {
        match self {
            ListenDrop::BadLength => "payload length mismatch",
            ListenDrop::WrongPort => "not the listening port",
            ListenDrop::SynQueueFull => "SYN queue full",
            ListenDrop::AcceptQueueFull => "accept queue full",
            ListenDrop::ReplyQueueFull => "reply queue full",
            ListenDrop::BadSyn => "bad SYN",
            ListenDrop::BadCookie => "ACK without entry or valid cookie",
            ListenDrop::RstNoEntry => "RST without entry",
            ListenDrop::NoSynNoAck => "no SYN, ACK or RST",
            ListenDrop::ConnDropped => "dropped by the connection",
            ListenDrop::DupSynLimit => "duplicate SYN over limit",
        }
    }
}

/// What [`Listener::handle_segment`] did with a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenOutput {
    /// A SYN opened a half-open entry (SYN-ACK pending).
    HalfOpen,
    /// A duplicate SYN: the SYN-ACK is sent again.
    SynAckResent,
    /// The SYN queue was full: a cookie SYN-ACK is pending, no state kept.
    CookieSent,
    /// A connection reached ESTABLISHED and is in the accept queue.
    Established,
    /// The segment went to an existing half-open or queued connection.
    Delivered,
    /// A RST removed a half-open (or queued) connection.
    Removed,
    /// A RST reply is pending.
    Reset,
    /// Discarded.
    Dropped(ListenDrop),
}

/// Counters of one listener.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListenCounters {
    /// Drops by [`ListenDrop`] reason (index = `reason as usize`).
    pub drops: [u64; ListenDrop::COUNT],
    /// SYNs that opened a half-open entry.
    pub syns: u64,
    /// Cookie SYN-ACKs sent.
    pub cookies_sent: u64,
    /// Connections built from a valid cookie.
    pub cookies_accepted: u64,
    /// Connections moved to the accept queue.
    pub established: u64,
    /// Connections handed out by `accept`.
    pub accepted: u64,
    /// Half-open entries removed after their last SYN-ACK retransmission.
    pub synack_timeouts: u64,
    /// Half-open or queued entries removed by a RST (or otherwise closed).
    pub removed: u64,
    /// RSTs sent by the listener itself (replies, and the RSTs of
    /// [`Listener::poll_close`]).
    pub resets_sent: u64,
    /// Half-open entries and queued connections reset by closing the
    /// listener ([`Listener::poll_close`]).
    pub close_resets: u64,
}

impl ListenCounters {
    /// Drops for one reason.
    pub fn drop_count(&self, r: ListenDrop) -> u64 {
        self.drops[r as usize]
    }
}

const NIL: u32 = u32::MAX;
/// Index values with this bit are accept-queue slots.
const ACCEPT_TAG: u32 = 1 << 31;
/// Backoff levels 0..=16 (Connection caps its backoff at 16 doublings).
const LEVELS: usize = 17;
/// List 0 is the pending list; list 1 + k the timer list of level k.
const LISTS: usize = 1 + LEVELS;
const PENDING: usize = 0;
const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;

// HalfOpen::flags.
const HAS_MSS: u8 = 1;
const HAS_WS: u8 = 2;
const SACK_PERM: u8 = 4;
const HAS_TS: u8 = 8;
const ON_PENDING: u8 = 16;

/// A half-open entry (SYN-RECEIVED before the final ACK): what the SYN
/// said and where the SYN-ACK timer stands.
#[derive(Debug, Clone, Copy)]
struct HalfOpen {
    /// Next SYN-ACK retransmission (while on a timer list).
    deadline: u64,
    remote: SocketAddrV4,
    iss: SeqNumber,
    irs: SeqNumber,
    /// The SYN's TSval (TS.Recent).
    ts_recent: u32,
    peer_mss: u16,
    peer_window: u16,
    peer_wscale: u8,
    flags: u8,
    /// SYN-ACK timeouts so far.
    retries: u16,
    /// SYN-ACKs resent for duplicate SYNs.
    resends: u16,
    /// Challenge ACKs sent in the current one-second window (RFC 5961
    /// §7), and when the window started: per entry, as per connection,
    /// since a shared counter is a side channel (CVE-2016-5696).
    challenge_count: u16,
    challenge_start: u64,
    prev: u32,
    next: u32,
}

impl HalfOpen {
    fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }

    /// Takes the options of a (possibly retransmitted) SYN.
    fn set_syn(&mut self, syn: &TcpRepr) {
        let keep = self.flags & ON_PENDING;
        self.flags = keep;
        if let Some(m) = syn.mss {
            self.flags |= HAS_MSS;
            self.peer_mss = m;
        }
        if let Some(w) = syn.window_scale {
            self.flags |= HAS_WS;
            self.peer_wscale = w;
        }
        if syn.sack_permitted {
            self.flags |= SACK_PERM;
        }
        if let Some(ts) = syn.timestamps {
            self.flags |= HAS_TS;
            self.ts_recent = ts.tsval;
        }
        self.peer_window = syn.window;
    }

    /// The SYN this entry stands for.
    fn syn(&self, local_port: u16) -> TcpRepr {
        TcpRepr {
            src_port: self.remote.port(),
            dst_port: local_port,
            seq: self.irs,
            flags: TcpFlags::SYN,
            window: self.peer_window,
            mss: self.has(HAS_MSS).then_some(self.peer_mss),
            window_scale: self.has(HAS_WS).then_some(self.peer_wscale),
            sack_permitted: self.has(SACK_PERM),
            timestamps: self.has(HAS_TS).then_some(Timestamps {
                tsval: self.ts_recent,
                tsecr: 0,
            }),
            ..TcpRepr::EMPTY
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
}

const EMPTY_LIST: List = List {
    head: NIL,
    tail: NIL,
};

#[derive(Debug)]
struct Queued {
    remote: SocketAddrV4,
    conn: Option<Connection>,
    prev: u32,
    next: u32,
}

/// The window scale we offer for a receive buffer (as Connection).
fn wscale_for(buf: usize) -> u8 {
    let mut s = 0u8;
    while s < 14 && (buf >> s) > 65535 {
        s += 1;
    }
    s
}

/// One listening socket: SYN queue, accept queue, SYN cookies.
pub struct Listener {
    cfg: ListenConfig,
    tcp: Config,
    local: SocketAddrV4,
    rto: RttEstimator,
    our_wscale: u8,
    // SYN queue: slots, free list (through `next`), lists.
    syn: Vec<HalfOpen>,
    syn_free: u32,
    syn_len: usize,
    lists: [List; LISTS],
    // Accept queue: slots, free list, FIFO.
    acc: Vec<Queued>,
    acc_free: u32,
    acc_len: usize,
    acc_fifo: List,
    /// Lower bound of the queued connections' timers.
    acc_timer: Option<u64>,
    /// A queued connection may have a segment to send.
    acc_tx: bool,
    index: TupleIndex,
    /// The stack's key, for each passive connection's TSval offset.
    secret: Secret,
    replies: VecDeque<(SocketAddrV4, TcpRepr)>,
    counters: ListenCounters,
}

impl core::fmt::Debug for Listener {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Listener")
            .field("local", &self.local)
            .field("syn_queue", &self.syn_len)
            .field("accept_queue", &self.acc_len)
            .field("replies", &self.replies.len())
            .finish()
    }
}

impl Listener {
    /// Bytes per half-open entry.
    pub const HALF_OPEN_BYTES: usize = core::mem::size_of::<HalfOpen>();

    /// A listener on `local` (LISTEN state). Connections it creates use
    /// `tcp`, with `syn_retries` replaced by `cfg.synack_retries`. Queue
    /// slots and the index are allocated here; capacities are clamped to
    /// `1..=65536` (the SYN queue to `0..` with cookies). The index's hash
    /// is keyed from `secret` (the stack's, seeded at start-up), so peers
    /// cannot choose colliding addresses.
    pub fn new(cfg: ListenConfig, tcp: Config, local: SocketAddrV4, secret: &Secret) -> Self {
        let mut cfg = cfg;
        cfg.backlog = cfg.backlog.clamp(1, MAX_QUEUE);
        let min_syn = usize::from(!cfg.syn_cookies);
        cfg.syn_queue = cfg.syn_queue.clamp(min_syn, MAX_QUEUE);
        cfg.reply_queue = cfg.reply_queue.clamp(1, MAX_QUEUE);
        let mut tcp = tcp;
        tcp.syn_retries = cfg.synack_retries;
        // The clamps of Connection::new, so our SYN-ACK matches its own.
        tcp.mss = tcp.mss.max(64);
        tcp.recv_buf = tcp.recv_buf.clamp(1, 1 << 30);
        let our_wscale = if tcp.window_scale {
            wscale_for(tcp.recv_buf)
        } else {
            0
        };
        Listener {
            rto: RttEstimator::new(tcp.rto_initial, tcp.rto_min, tcp.rto_max),
            our_wscale,
            syn: Vec::with_capacity(cfg.syn_queue),
            syn_free: NIL,
            syn_len: 0,
            lists: [EMPTY_LIST; LISTS],
            acc: Vec::with_capacity(cfg.backlog),
            acc_free: NIL,
            acc_len: 0,
            acc_fifo: EMPTY_LIST,
            acc_timer: None,
            acc_tx: false,
            index: TupleIndex::new(cfg.syn_queue + cfg.backlog, TupleKey::from_secret(secret)),
            secret: *secret,
            replies: VecDeque::with_capacity(cfg.reply_queue),
            cfg,
            tcp,
            local,
            counters: ListenCounters::default(),
        }
    }

    /// The listening address.
    pub fn local(&self) -> SocketAddrV4 {
        self.local
    }

    /// The configuration (after clamping).
    pub fn config(&self) -> &ListenConfig {
        &self.cfg
    }

    /// Counters.
    pub fn counters(&self) -> &ListenCounters {
        &self.counters
    }

    /// Half-open connections.
    pub fn syn_queue_len(&self) -> usize {
        self.syn_len
    }

    /// Established connections waiting for `accept`.
    pub fn accept_queue_len(&self) -> usize {
        self.acc_len
    }

    /// True when the accept queue is at its backlog: the stack should stop
    /// processing this listener until `accept` makes room.
    pub fn accept_queue_full(&self) -> bool {
        self.acc_len >= self.cfg.backlog
    }

    /// Takes the oldest established connection. The caller installs it in
    /// its table; from then on its segments go to it, not to the listener.
    pub fn accept(&mut self) -> Option<(SocketAddrV4, Connection)> {
        let a = self.acc_fifo.head;
        let q = self.acc.get_mut(a as usize)?;
        let remote = q.remote;
        let conn = q.conn.take()?;
        self.remove_queued(a);
        self.counters.accepted += 1;
        Some((remote, conn))
    }

    // ---------------------------------------------------------------
    // Slots, lists and the index.

    fn remote_of(syn: &[HalfOpen], acc: &[Queued], v: u32) -> SocketAddrV4 {
        if v & ACCEPT_TAG != 0 {
            acc[(v & !ACCEPT_TAG) as usize].remote
        } else {
            syn[v as usize].remote
        }
    }

    fn lookup(&self, remote: SocketAddrV4) -> Option<(usize, u32)> {
        let (syn, acc) = (&self.syn, &self.acc);
        self.index.find(self.index.key().addr(remote), |v| {
            Self::remote_of(syn, acc, v) == remote
        })
    }

    fn index_remove(&mut self, remote: SocketAddrV4, v: u32) {
        let (syn, acc) = (&self.syn, &self.acc);
        let k = self.index.key();
        if let Some(b) = self.index.bucket_of(k.addr(remote), v) {
            self.index
                .remove_at(b, |x| k.addr(Self::remote_of(syn, acc, x)));
        }
    }

    fn list_of(h: &HalfOpen) -> usize {
        if h.has(ON_PENDING) {
            PENDING
        } else {
            1 + usize::from(h.retries).min(LEVELS - 1)
        }
    }

    fn push_list(&mut self, l: usize, s: u32) {
        let t = self.lists[l].tail;
        let h = &mut self.syn[s as usize];
        h.prev = t;
        h.next = NIL;
        if l == PENDING {
            h.flags |= ON_PENDING;
        } else {
            h.flags &= !ON_PENDING;
        }
        match self.syn.get_mut(t as usize) {
            Some(p) => p.next = s,
            None => self.lists[l].head = s,
        }
        self.lists[l].tail = s;
    }

    fn unlink(&mut self, s: u32) {
        let h = self.syn[s as usize];
        let l = Self::list_of(&h);
        match self.syn.get_mut(h.prev as usize) {
            Some(p) => p.next = h.next,
            None => self.lists[l].head = h.next,
        }
        match self.syn.get_mut(h.next as usize) {
            Some(n) => n.prev = h.prev,
            None => self.lists[l].tail = h.prev,
        }
    }

    fn remove_half_open(&mut self, s: u32) {
        self.unlink(s);
        let remote = self.syn[s as usize].remote;
        self.index_remove(remote, s);
        self.free_half_open(s);
    }

    /// Returns slot `s` (already unlinked, index handled) to the free list.
    fn free_half_open(&mut self, s: u32) {
        let h = &mut self.syn[s as usize];
        h.flags = 0;
        h.prev = NIL;
        h.next = self.syn_free;
        self.syn_free = s;
        self.syn_len -= 1;
    }

    fn alloc_half_open(&mut self, h: HalfOpen) -> u32 {
        if self.syn_free != NIL {
            let s = self.syn_free;
            self.syn_free = self.syn[s as usize].next;
            self.syn[s as usize] = h;
            s
        } else {
            // syn_len < syn_queue and nothing free: the Vec has reserved
            // room (`new`), so this does not allocate.
            self.syn.push(h);
            (self.syn.len() - 1) as u32
        }
    }

    fn remove_queued(&mut self, a: u32) {
        let (remote, prev, next) = {
            let q = &self.acc[a as usize];
            (q.remote, q.prev, q.next)
        };
        match self.acc.get_mut(prev as usize) {
            Some(p) => p.next = next,
            None => self.acc_fifo.head = next,
        }
        match self.acc.get_mut(next as usize) {
            Some(n) => n.prev = prev,
            None => self.acc_fifo.tail = prev,
        }
        self.index_remove(remote, a | ACCEPT_TAG);
        let q = &mut self.acc[a as usize];
        q.conn = None;
        q.prev = NIL;
        q.next = self.acc_free;
        self.acc_free = a;
        self.acc_len -= 1;
        if self.acc_len == 0 {
            self.acc_timer = None;
            self.acc_tx = false;
        }
    }

    /// Appends a connection to the accept queue; `bucket` is the index
    /// bucket to point at it (a half-open entry's), or `None` to insert.
    fn enqueue(&mut self, remote: SocketAddrV4, conn: Connection, bucket: Option<usize>) {
        let t = conn.poll_timeout();
        let q = Queued {
            remote,
            conn: Some(conn),
            prev: self.acc_fifo.tail,
            next: NIL,
        };
        let a = if self.acc_free != NIL {
            let a = self.acc_free;
            self.acc_free = self.acc[a as usize].next;
            self.acc[a as usize] = q;
            a
        } else {
            // Reserved in `new` (acc_len < backlog): no allocation.
            self.acc.push(q);
            (self.acc.len() - 1) as u32
        };
        match self.acc.get_mut(self.acc_fifo.tail as usize) {
            Some(p) => p.next = a,
            None => self.acc_fifo.head = a,
        }
        self.acc_fifo.tail = a;
        match bucket {
            Some(b) => self.index.set(b, a | ACCEPT_TAG),
            None => {
                let hash = self.index.key().addr(remote);
                let ok = self.index.insert(hash, a | ACCEPT_TAG);
                debug_assert!(ok, "index sized for both queues");
            }
        }
        self.acc_len += 1;
        self.counters.established += 1;
        self.acc_touched(t);
    }

    /// A queued connection was fed or created: it may have output, and
    /// its timer may be earlier than the cached bound.
    fn acc_touched(&mut self, t: Option<u64>) {
        self.acc_tx = true;
        self.acc_timer = match (self.acc_timer, t) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    // ---------------------------------------------------------------
    // Input.

    fn discard(&mut self, r: ListenDrop) -> ListenOutput {
        self.counters.drops[r as usize] += 1;
        ListenOutput::Dropped(r)
    }

    fn push_reply(&mut self, remote: SocketAddrV4, r: TcpRepr) -> bool {
        if self.replies.len() >= self.cfg.reply_queue {
            self.counters.drops[ListenDrop::ReplyQueueFull as usize] += 1;
            return false;
        }
        self.replies.push_back((remote, r));
        true
    }

    /// Processes one segment to the listening port from `remote` (parsed
    /// from a checksum-verified segment; `payload` is its data). Replies
    /// come out of [`Listener::poll_transmit`]. Work: one index lookup and
    /// at most one `Connection::handle_segment`.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub fn handle_segment(
        &mut self,
        now: u64,
        remote: SocketAddrV4,
        seg: &TcpRepr,
        payload: &[u8],
        secret: &Secret,
    ) -> ListenOutput {
        self.segment(now, remote, seg, payload, secret, None)
    }

    /// [`Listener::handle_segment`] for a SYN that a TIME-WAIT entry of
    /// the same 4-tuple let through (RFC 6191 §2; the entry's
    /// `TwAction::AllowSyn`), whose old incarnation ended at `old_snd_nxt`:
    /// a new entry's ISS is above every sequence number the old one used
    /// (RFC 1122 §4.2.2.13 (a)), at least `old_snd_nxt + 65537` as Linux
    /// (`tw_snd_nxt + 65535 + 2`), so no old segment of ours can be taken
    /// for the new connection's; RFC 6528's ISS is kept if it is already
    /// beyond that. (A SYN cookie's ISS is the cookie: with a full SYN
    /// queue the rule is not kept, as in Linux.)
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub fn handle_reopening_syn(
        &mut self,
        now: u64,
        remote: SocketAddrV4,
        seg: &TcpRepr,
        payload: &[u8],
        secret: &Secret,
        old_snd_nxt: SeqNumber,
    ) -> ListenOutput {
        let floor = old_snd_nxt + 65537;
        self.segment(now, remote, seg, payload, secret, Some(floor))
    }

    fn segment(
        &mut self,
        now: u64,
        remote: SocketAddrV4,
        seg: &TcpRepr,
        payload: &[u8],
        secret: &Secret,
        iss_floor: Option<SeqNumber>,
    ) -> ListenOutput {
        if payload.len() != seg.payload_len {
            return self.discard(ListenDrop::BadLength);
        }
        if seg.dst_port != self.local.port() || seg.src_port != remote.port() {
            return self.discard(ListenDrop::WrongPort);
        }
        if let Some((bucket, v)) = self.lookup(remote) {
            if v & ACCEPT_TAG != 0 {
                return self.feed_queued(now, v & !ACCEPT_TAG, seg, payload);
            }
            return self.feed_half_open(now, bucket, v, seg, payload);
        }
        let f = seg.flags;
        // RFC 9293 §3.10.7.2, LISTEN: first check for a RST: ignore it.
        if f.contains(TcpFlags::RST) {
            return self.discard(ListenDrop::RstNoEntry);
        }
        // Second: any acknowledgment is bad in LISTEN; unless it is the
        // final ACK of a cookie handshake (RFC 4987 §3.6), reset.
        if f.contains(TcpFlags::ACK) {
            if !f.contains(TcpFlags::SYN) && self.cfg.syn_cookies {
                if let Some(mss) =
                    cookie::validate(secret, self.local, remote, seg.ack, seg.seq, now)
                {
                    return self.accept_cookie(now, remote, seg, payload, mss);
                }
            }
            self.counters.drops[ListenDrop::BadCookie as usize] += 1;
            return self.send_reset(remote, seg);
        }
        // Third: SYN.
        if f.contains(TcpFlags::SYN) {
            return self.on_syn(now, remote, seg, secret, iss_floor);
        }
        // Fourth: anything else is dropped.
        self.discard(ListenDrop::NoSynNoAck)
    }

    fn send_reset(&mut self, remote: SocketAddrV4, seg: &TcpRepr) -> ListenOutput {
        match reset_for(seg) {
            Some(r) if self.push_reply(remote, r) => {
                self.counters.resets_sent += 1;
                ListenOutput::Reset
            }
            Some(_) => ListenOutput::Dropped(ListenDrop::ReplyQueueFull),
            None => ListenOutput::Dropped(ListenDrop::BadCookie),
        }
    }

    fn on_syn(
        &mut self,
        now: u64,
        remote: SocketAddrV4,
        seg: &TcpRepr,
        secret: &Secret,
        iss_floor: Option<SeqNumber>,
    ) -> ListenOutput {
        if seg.flags.intersects(TcpFlags::FIN | TcpFlags::RST) {
            return self.discard(ListenDrop::BadSyn);
        }
        // Linux tcp_conn_request(): no new connections while the accept
        // queue is full (the stack should not even be calling us).
        if self.accept_queue_full() {
            return self.discard(ListenDrop::AcceptQueueFull);
        }
        if self.syn_len < self.cfg.syn_queue {
            // RFC 6528 §3: ISS = M + F(4-tuple, key), unless a TIME-WAIT
            // reopening needs more (`handle_reopening_syn`).
            let isn = secret.isn(self.local, remote, now);
            let iss = match iss_floor {
                Some(f) if isn.diff(f) < 0 => f,
                _ => isn,
            };
            let mut h = HalfOpen {
                deadline: 0,
                remote,
                iss,
                irs: seg.seq,
                ts_recent: 0,
                peer_mss: 0,
                peer_window: 0,
                peer_wscale: 0,
                flags: 0,
                retries: 0,
                resends: 0,
                challenge_count: 0,
                challenge_start: now,
                prev: NIL,
                next: NIL,
            };
            h.set_syn(seg);
            let s = self.alloc_half_open(h);
            let hash = self.index.key().addr(remote);
            let ok = self.index.insert(hash, s);
            debug_assert!(ok, "index sized for both queues");
            self.push_list(PENDING, s);
            self.syn_len += 1;
            self.counters.syns += 1;
            return ListenOutput::HalfOpen;
        }
        if !self.cfg.syn_cookies {
            return self.discard(ListenDrop::SynQueueFull);
        }
        // RFC 4987 §3.6: stateless SYN-ACK, ISS = cookie (with the MSS);
        // with timestamps, the other options in the TSval (`cookie`).
        let peer_mss = seg.mss.unwrap_or(super::DEFAULT_MSS);
        let (iss, _) = cookie::encode(secret, self.local, remote, seg.seq, peer_mss, now);
        let ts = seg.timestamps.filter(|_| self.tcp.timestamps);
        let opts = cookie::SynOptions {
            wscale: seg.window_scale.filter(|_| self.tcp.window_scale),
            sack: self.tcp.sack && seg.sack_permitted,
        };
        let synack = TcpRepr {
            src_port: self.local.port(),
            dst_port: remote.port(),
            seq: iss,
            ack: seg.seq + 1,
            flags: TcpFlags::SYN | TcpFlags::ACK,
            window: self.tcp.recv_buf.clamp(1, 65535) as u16,
            mss: Some(self.tcp.mss),
            window_scale: (ts.is_some() && opts.wscale.is_some()).then_some(self.our_wscale),
            sack_permitted: ts.is_some() && opts.sack,
            timestamps: ts.map(|t| Timestamps {
                tsval: cookie::encode_ts(self.ts_now(now, remote), opts),
                tsecr: t.tsval,
            }),
            ..TcpRepr::EMPTY
        };
        if !self.push_reply(remote, synack) {
            return ListenOutput::Dropped(ListenDrop::ReplyQueueFull);
        }
        self.counters.cookies_sent += 1;
        ListenOutput::CookieSent
    }

    fn accept_cookie(
        &mut self,
        now: u64,
        remote: SocketAddrV4,
        seg: &TcpRepr,
        payload: &[u8],
        mss: u16,
    ) -> ListenOutput {
        if self.accept_queue_full() {
            return self.discard(ListenDrop::AcceptQueueFull);
        }
        // Rebuild the SYN the cookie stands for: its ISN and MSS, and, if
        // the ACK echoes one of our recent TSvals, the options kept there
        // (`cookie`; TS.Recent starts from this ACK's TSval).
        let cfg = self.conn_cfg(remote);
        let echo = seg
            .timestamps
            .filter(|_| self.tcp.timestamps)
            .and_then(|t| cookie::decode_ts(t.tsecr, ts_at(now, cfg.ts_offset)).map(|o| (t, o)));
        let syn = TcpRepr {
            src_port: seg.src_port,
            dst_port: seg.dst_port,
            seq: seg.seq + u32::MAX,
            flags: TcpFlags::SYN,
            window: seg.window,
            mss: Some(mss),
            window_scale: echo.and_then(|(_, o)| o.wscale),
            sack_permitted: echo.is_some_and(|(_, o)| o.sack),
            timestamps: echo.map(|(t, _)| Timestamps {
                tsval: t.tsval,
                tsecr: 0,
            }),
            ..TcpRepr::EMPTY
        };
        let iss = seg.ack + u32::MAX;
        let Some(mut conn) = Connection::accept_syn(cfg, self.local, remote, &syn, iss, now) else {
            return self.discard(ListenDrop::BadSyn);
        };
        // The SYN-ACK went out statelessly: let the connection emit (and
        // discard) its own copy so that SND.NXT = ISS + 1. (Its RTT timer
        // starts now, so the first RTT sample is ~0 and the RTO starts at
        // `rto_min`; later samples correct it.)
        let _ = conn.poll_transmit(now, &mut []);
        if conn.handle_segment(now, seg, payload).is_err() || conn.state() == State::SynReceived {
            // Cannot happen for a valid cookie; counted, nothing kept.
            return self.discard(ListenDrop::ConnDropped);
        }
        if conn.state() == State::Closed {
            return self.discard(ListenDrop::ConnDropped);
        }
        self.counters.cookies_accepted += 1;
        self.enqueue(remote, conn, None);
        ListenOutput::Established
    }

    /// Our TSval for `remote` at `now` (RFC 7323 §5.4): a millisecond
    /// clock from the 4-tuple's own offset ([`Secret::ts_offset`]), as an
    /// active open's, so a passive connection's TSvals tell nothing of
    /// the clock or of other connections. Recomputed rather than kept per
    /// entry, which stays at [`Listener::HALF_OPEN_BYTES`].
    fn ts_now(&self, now: u64, remote: SocketAddrV4) -> u32 {
        ts_at(now, self.secret.ts_offset(self.local, remote))
    }

    /// The configuration of the connection with `remote`: ours, with its
    /// TSval offset.
    fn conn_cfg(&self, remote: SocketAddrV4) -> Config {
        Config {
            ts_offset: self.secret.ts_offset(self.local, remote),
            ..self.tcp
        }
    }

    fn ws_ok(&self, h: &HalfOpen) -> bool {
        self.tcp.window_scale && h.has(HAS_WS)
    }

    fn ts_ok(&self, h: &HalfOpen) -> bool {
        self.tcp.timestamps && h.has(HAS_TS)
    }

    /// The receive window of the SYN-ACK (RFC 7323 §2.2: never scaled).
    fn syn_window(&self) -> u32 {
        self.tcp.recv_buf.min(65535) as u32
    }

    /// The SYN-ACK of entry `h` (the segment `Connection::accept_syn`
    /// would send: RFC 9293 §3.10.7.2, options per RFC 7323 §2.2, §3.2
    /// and RFC 2018 only if the SYN offered them).
    fn synack(&self, h: &HalfOpen, now: u64) -> TcpRepr {
        TcpRepr {
            src_port: self.local.port(),
            dst_port: h.remote.port(),
            seq: h.iss,
            ack: h.irs + 1,
            flags: TcpFlags::SYN | TcpFlags::ACK,
            window: self.syn_window() as u16,
            mss: Some(self.tcp.mss),
            window_scale: self.ws_ok(h).then_some(self.our_wscale),
            sack_permitted: self.tcp.sack && h.has(SACK_PERM),
            timestamps: self.ts_ok(h).then(|| Timestamps {
                tsval: self.ts_now(now, h.remote),
                tsecr: h.ts_recent,
            }),
            ..TcpRepr::EMPTY
        }
    }

    /// A pure ACK of entry `h` (SYN-RECEIVED: SEQ = ISS + 1, ACK = IRS +
    /// 1), into the reply queue.
    fn queue_ack(&mut self, h: &HalfOpen, now: u64) {
        if h.has(ON_PENDING) {
            // Its SYN-ACK is about to go out and acknowledges the same.
            return;
        }
        let s = if self.ws_ok(h) { self.our_wscale } else { 0 };
        let wnd = (self.tcp.recv_buf as u64).min(65535u64 << s);
        let r = TcpRepr {
            src_port: self.local.port(),
            dst_port: h.remote.port(),
            seq: h.iss + 1,
            ack: h.irs + 1,
            flags: TcpFlags::ACK,
            window: (wnd >> s).min(65535) as u16,
            timestamps: self.ts_ok(h).then(|| Timestamps {
                tsval: self.ts_now(now, h.remote),
                tsecr: h.ts_recent,
            }),
            ..TcpRepr::EMPTY
        };
        self.push_reply(h.remote, r);
    }

    /// RFC 5961 §7: challenge ACKs, at most `challenge_ack_limit` per
    /// second per entry.
    fn challenge_ack(&mut self, s: u32, now: u64) {
        let limit = self.tcp.challenge_ack_limit;
        let e = &mut self.syn[s as usize];
        if now.saturating_sub(e.challenge_start) >= SEC {
            e.challenge_start = now;
            e.challenge_count = 0;
        }
        if u32::from(e.challenge_count) < limit {
            e.challenge_count = e.challenge_count.saturating_add(1);
            let h = *e;
            self.queue_ack(&h, now);
        }
    }

    /// RFC 9293 §3.10.7.4 in SYN-RECEIVED (passive open), on a compact
    /// entry: the checks of `Connection::handle_segment` up to the final
    /// ACK, which builds the connection.
    fn feed_half_open(
        &mut self,
        now: u64,
        bucket: usize,
        s: u32,
        seg: &TcpRepr,
        payload: &[u8],
    ) -> ListenOutput {
        let f = seg.flags;
        let h = self.syn[s as usize];
        let rcv_nxt = h.irs + 1;
        // A retransmitted SYN (same ISN): our SYN-ACK was probably lost;
        // send it again (as Linux tcp_check_req()), bounded per entry. Its
        // options replace the stored ones and the SYN-ACK timer restarts.
        // (A SYN+FIN repeating the ISN is treated the same way; a
        // Connection in SYN-RECEIVED also resends its SYN-ACK for it.)
        if f.contains(TcpFlags::SYN)
            && !f.intersects(TcpFlags::ACK | TcpFlags::RST)
            && seg.seq == h.irs
        {
            if u32::from(h.resends) >= self.cfg.synack_retries {
                return self.discard(ListenDrop::DupSynLimit);
            }
            self.unlink(s);
            let e = &mut self.syn[s as usize];
            e.set_syn(seg);
            e.resends = e.resends.saturating_add(1);
            e.retries = 0;
            // As the rebuilt connection of the reference listener.
            e.challenge_start = now;
            e.challenge_count = 0;
            self.push_list(PENDING, s);
            return ListenOutput::SynAckResent;
        }
        // Linux semantics: the final ACK waits while the accept queue is
        // full (the entry stays half-open; SYN-ACK retransmission recurs).
        if f.contains(TcpFlags::ACK) && !f.contains(TcpFlags::RST) && self.accept_queue_full() {
            return self.discard(ListenDrop::AcceptQueueFull);
        }
        let rst = f.contains(TcpFlags::RST);
        let mut seq = seg.seq;
        let mut syn = f.contains(TcpFlags::SYN);
        // Simultaneous open (RFC 9293 §3.5 Figure 7): a SYN-ACK repeating
        // the SYN; only its ACK is new.
        if syn && f.contains(TcpFlags::ACK) && !rst && seq == h.irs {
            syn = false;
            seq = rcv_nxt;
        }
        // RFC 7323 §5.3 R1: PAWS.
        if let (true, false, Some(ts)) = (self.ts_ok(&h), rst, seg.timestamps) {
            if (ts.tsval.wrapping_sub(h.ts_recent) as i32) < 0 {
                self.queue_ack(&h, now);
                return self.discard(ListenDrop::ConnDropped);
            }
        }
        // First: sequence number acceptability (RFC 9293 §3.4), against
        // the window of our SYN-ACK (as Connection, with Linux's
        // right-edge deviation).
        let fin = f.contains(TcpFlags::FIN);
        let seg_len = payload.len() as u32 + u32::from(syn) + u32::from(fin);
        let wnd = self.syn_window();
        let end = rcv_nxt + wnd;
        let acceptable = match seg_len {
            0 if !rst && seq == end => true,
            0 => seq.in_window(rcv_nxt, end),
            _ => seq.in_window(rcv_nxt, end) || (seq + (seg_len - 1)).in_window(rcv_nxt, end),
        };
        if !acceptable {
            if !rst {
                self.queue_ack(&h, now);
            }
            return self.discard(ListenDrop::ConnDropped);
        }
        // Second: RST (RFC 5961 §3.2). RFC 9293 §3.10.7.4: a RST in
        // SYN-RECEIVED from a passive OPEN returns to LISTEN: the entry
        // goes.
        if rst {
            if seq == rcv_nxt {
                self.remove_half_open(s);
                self.counters.removed += 1;
                return ListenOutput::Removed;
            }
            self.challenge_ack(s, now);
            return self.discard(ListenDrop::ConnDropped);
        }
        // Fourth: SYN (RFC 5961 §4.2).
        if syn {
            self.challenge_ack(s, now);
            return self.discard(ListenDrop::ConnDropped);
        }
        // Fifth: ACK.
        if !f.contains(TcpFlags::ACK) {
            return self.discard(ListenDrop::ConnDropped);
        }
        if seg.ack != h.iss + 1 {
            // "If the segment acknowledgment is not acceptable, form a
            // reset segment <SEQ=SEG.ACK><CTL=RST> and send it."
            let r = TcpRepr {
                src_port: self.local.port(),
                dst_port: h.remote.port(),
                seq: seg.ack,
                flags: TcpFlags::RST,
                ..TcpRepr::EMPTY
            };
            // Counted as ConnDropped (as when the connection sent it), not
            // in `resets_sent` (the listener's own replies to LISTEN).
            self.push_reply(h.remote, r);
            return self.discard(ListenDrop::ConnDropped);
        }
        // The final ACK: build the connection and let it process the ACK.
        let Some(mut conn) = self.build(&h, now) else {
            return self.discard(ListenDrop::BadSyn);
        };
        // Its own drop reason, if any, is in its counters.
        let _ = conn.handle_segment(now, seg, payload);
        match conn.state() {
            State::SynReceived | State::Closed => {
                // Not expected after the checks above; counted, the entry
                // stays (it times out).
                self.discard(ListenDrop::ConnDropped)
            }
            _ => {
                self.unlink(s);
                self.free_half_open(s);
                // Same remote, same bucket: it now points at the queue.
                self.enqueue(h.remote, conn, Some(bucket));
                ListenOutput::Established
            }
        }
    }

    /// The connection entry `h` stands for, in SYN-RECEIVED with its
    /// SYN-ACK sent (and retransmitted as often as the entry's was).
    fn build(&self, h: &HalfOpen, now: u64) -> Option<Connection> {
        let r = u32::from(h.retries).min(LEVELS as u32 - 1);
        let span: u64 = (0..r).map(|k| self.rto.backed_off(k)).sum();
        let last_sent = if h.has(ON_PENDING) {
            now
        } else {
            h.deadline.saturating_sub(self.rto.backed_off(r)).min(now)
        };
        let t0 = last_sent.saturating_sub(span);
        let syn = h.syn(self.local.port());
        let cfg = self.conn_cfg(h.remote);
        let mut c = Connection::accept_syn(cfg, self.local, h.remote, &syn, h.iss, t0)?;
        let _ = c.poll_transmit(t0, &mut []);
        for _ in 0..r {
            let t = c.poll_timeout()?;
            c.handle_timeout(t);
            let _ = c.poll_transmit(t, &mut []);
        }
        Some(c)
    }

    fn feed_queued(&mut self, now: u64, a: u32, seg: &TcpRepr, payload: &[u8]) -> ListenOutput {
        let Some(conn) = self.acc.get_mut(a as usize).and_then(|q| q.conn.as_mut()) else {
            return ListenOutput::Dropped(ListenDrop::ConnDropped);
        };
        let r = conn.handle_segment(now, seg, payload);
        let closed = conn.state() == State::Closed;
        let t = conn.poll_timeout();
        if closed {
            // Reset before accept: like Linux, the application never sees
            // it (the queue slot is freed).
            self.remove_queued(a);
            self.counters.removed += 1;
            return ListenOutput::Removed;
        }
        self.acc_touched(t);
        match r {
            Ok(()) => ListenOutput::Delivered,
            Err(_) => self.discard(ListenDrop::ConnDropped),
        }
    }

    // ---------------------------------------------------------------
    // Timers and output.

    /// The earliest time at which `handle_timeout` must be called. Work:
    /// 17 list heads.
    pub fn poll_timeout(&self) -> Option<u64> {
        let mut t = self.acc_timer;
        for l in &self.lists[1..] {
            if let Some(h) = self.syn.get(l.head as usize) {
                t = Some(t.map_or(h.deadline, |x| x.min(h.deadline)));
            }
        }
        t
    }

    /// Runs expired timers: SYN-ACK retransmissions are scheduled, and
    /// half-open entries past their last retry are removed (counted).
    /// Queued connections run their timers when one may be due.
    pub fn handle_timeout(&mut self, now: u64) {
        for l in 1..LISTS {
            // Bounded: each entry leaves its level list when it expires.
            for _ in 0..self.syn_len {
                let s = self.lists[l].head;
                match self.syn.get(s as usize) {
                    Some(h) if h.deadline <= now => {}
                    _ => break,
                }
                let retries = self.syn[s as usize].retries.saturating_add(1);
                if u32::from(retries) > self.cfg.synack_retries {
                    self.remove_half_open(s);
                    self.counters.synack_timeouts += 1;
                } else {
                    self.unlink(s);
                    self.syn[s as usize].retries = retries;
                    self.push_list(PENDING, s);
                }
            }
        }
        if self.acc_timer.is_some_and(|t| t <= now) {
            self.acc_timer = None;
            let mut a = self.acc_fifo.head;
            for _ in 0..self.acc_len {
                let Some(q) = self.acc.get_mut(a as usize) else {
                    break;
                };
                let next = q.next;
                if let Some(c) = q.conn.as_mut() {
                    if c.poll_timeout().is_some_and(|t| t <= now) {
                        c.handle_timeout(now);
                        self.acc_tx = true;
                    }
                    if c.state() == State::Closed {
                        self.remove_queued(a);
                        self.counters.removed += 1;
                    } else if let Some(t) = c.poll_timeout() {
                        self.acc_timer = Some(self.acc_timer.map_or(t, |x| x.min(t)));
                    }
                }
                a = next;
            }
        }
    }

    /// The next segment to send and its destination: stateless replies
    /// first, then SYN-ACKs (and their retransmissions) of half-open
    /// entries, then anything a queued connection has to send (ACKs).
    /// A payload, if any, is written to the front of `out`. Call until
    /// `None`.
    pub fn poll_transmit(&mut self, now: u64, out: &mut [u8]) -> Option<(SocketAddrV4, TcpRepr)> {
        if let Some(r) = self.replies.pop_front() {
            return Some(r);
        }
        let s = self.lists[PENDING].head;
        if let Some(h) = self.syn.get(s as usize).copied() {
            self.unlink(s);
            let level = u32::from(h.retries).min(LEVELS as u32 - 1);
            self.syn[s as usize].deadline = now.saturating_add(self.rto.backed_off(level));
            self.push_list(1 + level as usize, s);
            return Some((h.remote, self.synack(&h, now)));
        }
        if self.acc_tx {
            let mut a = self.acc_fifo.head;
            for _ in 0..self.acc_len {
                let Some(q) = self.acc.get_mut(a as usize) else {
                    break;
                };
                if let Some(c) = q.conn.as_mut() {
                    if let Some(r) = c.poll_transmit(now, out) {
                        let (remote, t) = (q.remote, c.poll_timeout());
                        self.acc_touched(t);
                        return Some((remote, r));
                    }
                    let t = c.poll_timeout();
                    self.acc_timer = match (self.acc_timer, t) {
                        (Some(x), Some(y)) => Some(x.min(y)),
                        (x, y) => x.or(y),
                    };
                }
                a = q.next;
            }
            self.acc_tx = false;
        }
        None
    }

    /// Closing the listener (the user's CLOSE in LISTEN, RFC 9293
    /// §3.10.4): every half-open entry and every queued connection, which
    /// the user never accepted, is aborted (§3.10.5, as Linux does), so
    /// that its peer learns at once instead of after its own timeouts. Each call removes one of them and returns the RST to send
    /// for it (half-open entries first, then the accept queue in order);
    /// `None` once both queues are empty. Pending replies are discarded.
    ///
    /// After the first call the listener is closing: call until `None`
    /// (at most `syn_queue + backlog` calls, each O(1): 18 list heads or
    /// the accept FIFO's head), then drop it. Feeding it segments
    /// meanwhile is not supported.
    pub fn poll_close(&mut self, now: u64) -> Option<(SocketAddrV4, TcpRepr)> {
        self.replies.clear();
        if let Some(s) = self.lists.iter().map(|l| l.head).find(|&s| s != NIL) {
            let h = self.syn[s as usize];
            self.remove_half_open(s);
            self.counters.resets_sent += 1;
            self.counters.close_resets += 1;
            // RFC 9293 §3.10.5, ABORT in SYN-RECEIVED: <SEQ=SND.NXT><CTL=RST>,
            // SND.NXT = ISS + 1. With ACK = RCV.NXT (IRS + 1), as
            // Connection::abort and Linux (tcp_send_active_reset): a peer
            // that has not seen our SYN-ACK is in SYN-SENT and accepts a RST
            // only with an acceptable ACK (§3.10.7.3, §3.5.2); one in
            // ESTABLISHED accepts it because SEQ is exactly its RCV.NXT
            // (§3.10.7.4, RFC 5961 §3.2).
            let r = TcpRepr {
                src_port: self.local.port(),
                dst_port: h.remote.port(),
                seq: h.iss + 1,
                ack: h.irs + 1,
                flags: TcpFlags::RST | TcpFlags::ACK,
                window: 0,
                timestamps: self.ts_ok(&h).then(|| Timestamps {
                    tsval: self.ts_now(now, h.remote),
                    tsecr: h.ts_recent,
                }),
                ..TcpRepr::EMPTY
            };
            return Some((h.remote, r));
        }
        // Bounded: each pass removes the head of the accept queue.
        for _ in 0..self.acc_len {
            let a = self.acc_fifo.head;
            let q = self.acc.get_mut(a as usize)?;
            let remote = q.remote;
            let conn = q.conn.take();
            self.remove_queued(a);
            let Some(mut c) = conn else { continue };
            // Connection::abort: <SEQ=SND.NXT><ACK=RCV.NXT><CTL=RST,ACK>
            // in every synchronized state a queued connection can be in.
            c.abort();
            if let Some(r) = c.poll_transmit(now, &mut []) {
                self.counters.resets_sent += 1;
                self.counters.close_resets += 1;
                return Some((remote, r));
            }
            self.counters.removed += 1;
        }
        None
    }

    /// Checks the queues, lists and index (for tests; O(entries)).
    pub fn check_invariants(&self) -> Result<(), &'static str> {
        if self.syn_len > self.cfg.syn_queue {
            return Err("SYN queue over capacity");
        }
        if self.acc_len > self.cfg.backlog {
            return Err("accept queue over capacity");
        }
        if self.replies.len() > self.cfg.reply_queue {
            return Err("reply queue over capacity");
        }
        if self.index.len() != self.syn_len + self.acc_len {
            return Err("index count differs from the queues");
        }
        let mut n = 0;
        for (l, list) in self.lists.iter().enumerate() {
            let mut prev = NIL;
            let mut s = list.head;
            let mut last = 0u64;
            while s != NIL {
                n += 1;
                if n > self.syn_len {
                    return Err("SYN lists longer than the queue");
                }
                let h = &self.syn[s as usize];
                if h.prev != prev || Self::list_of(h) != l {
                    return Err("half-open entry on the wrong list");
                }
                if l != PENDING {
                    if h.deadline < last {
                        return Err("timer list out of deadline order");
                    }
                    last = h.deadline;
                }
                if self.lookup(h.remote).map(|p| p.1) != Some(s) {
                    return Err("duplicate or unindexed half-open entry");
                }
                prev = s;
                s = h.next;
            }
            if prev != list.tail {
                return Err("list tail is not its last entry");
            }
        }
        if n != self.syn_len {
            return Err("SYN lists shorter than the queue");
        }
        let mut n = 0;
        let mut a = self.acc_fifo.head;
        while a != NIL {
            n += 1;
            if n > self.acc_len {
                return Err("accept FIFO longer than the queue");
            }
            let q = &self.acc[a as usize];
            match &q.conn {
                Some(c) if c.state() != State::Closed && c.state() != State::SynReceived => {}
                _ => return Err("accept queue entry without a live connection"),
            }
            if self.lookup(q.remote).map(|p| p.1) != Some(a | ACCEPT_TAG) {
                return Err("duplicate or unindexed queued connection");
            }
            a = q.next;
        }
        if n != self.acc_len {
            return Err("accept FIFO shorter than the queue");
        }
        Ok(())
    }
}

/// Our TSval at `now` from offset `off` (RFC 7323 §5.4).
fn ts_at(now: u64, off: u32) -> u32 {
    ((now / MS) as u32).wrapping_add(off)
}
