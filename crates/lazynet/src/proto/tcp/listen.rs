//! A listening socket (RFC 9293 §3.10.7.2, LISTEN state), sans-IO.
//!
//! **Owns:** the SYN queue (half-open connections in SYN-RECEIVED), the
//! accept queue (connections that reached ESTABLISHED and wait for
//! [`Listener::accept`]), a small queue of stateless replies (cookie
//! SYN-ACKs and RSTs), and counters per drop reason ([`ListenDrop`]).
//!
//! **May not touch:** clocks, randomness, I/O, the caller's table of
//! established connections, demultiplexing. Time comes in as `now`
//! (nanoseconds), the hash key as a [`Secret`].
//!
//! **Contract with the caller (the stack):**
//! - [`Listener::handle_segment`] gets the segments to the listening port
//!   from 4-tuples that have no connection in the caller's table. That
//!   includes segments for connections still in either queue: until a
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
//! **Half-open entries are whole [`Connection`]s** in SYN-RECEIVED: one
//! state machine does the handshake, its SYN-ACK retransmission (RTO with
//! backoff, [`ListenConfig::synack_retries`] retries, then the entry is
//! removed) and its RFC 5961 checks. The slots of both queues are
//! allocated at construction; a connection's buffers are allocated when
//! its SYN is admitted, so memory is bounded by `syn_queue + backlog`
//! connections. A compact half-open entry (as Linux's request socks) would
//! be smaller; that is a possible later change behind the same API.
//!
//! **Accept queue full** (Linux semantics, `tcp_abort_on_overflow = 0`):
//! the final ACK of a half-open entry is dropped (counted) and the entry
//! stays half-open; its SYN-ACK retransmission makes the peer ACK again,
//! so the connection completes once there is room, or the entry times
//! out. New SYNs are dropped; a cookie ACK is dropped (the peer retries).
//!
//! **SYN cookies** (RFC 4987 §3.6, [`super::cookie`]): only when the SYN
//! queue is full and [`ListenConfig::syn_cookies`] is set. The cookie
//! SYN-ACK carries only MSS; a connection built from a cookie has no
//! window scaling, SACK or timestamps.
//!
//! **Segments without a half-open entry** (RFC 9293 §3.10.7.2): a RST is
//! ignored; an ACK that is not a valid cookie gets `<SEQ=SEG.ACK><CTL=RST>`
//! (via [`reset_for`]); a SYN opens an entry; anything else (no SYN, no
//! ACK, no RST) is dropped.
//!
//! **Work per call:** `handle_segment` scans both queues once (at most
//! `syn_queue + backlog` entries, compares 4-tuples) and feeds at most one
//! connection one segment; `handle_timeout`, `poll_timeout` and
//! `poll_transmit` visit each entry at most once.

use std::collections::VecDeque;
use std::net::SocketAddrV4;

use super::conn::{reset_for, Config, Connection, State};
use super::cookie;
use super::secret::Secret;
use crate::wire::tcp::{TcpFlags, TcpRepr};

/// Upper bound on any queue capacity (a configuration error guard).
const MAX_QUEUE: usize = 1 << 16;

/// Configuration of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenConfig {
    /// Accept queue capacity (the `listen()` backlog), at least 1.
    pub backlog: usize,
    /// SYN queue capacity (half-open connections), at least 1.
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
    /// RSTs sent by the listener itself.
    pub resets_sent: u64,
}

impl ListenCounters {
    /// Drops for one reason.
    pub fn drop_count(&self, r: ListenDrop) -> u64 {
        self.drops[r as usize]
    }
}

struct HalfOpen {
    remote: SocketAddrV4,
    conn: Connection,
    /// The SYN that opened it (for resending the SYN-ACK).
    syn: TcpRepr,
    /// Connections rebuilt to resend the SYN-ACK on a duplicate SYN.
    resends: u32,
}

/// One listening socket: SYN queue, accept queue, SYN cookies.
pub struct Listener {
    cfg: ListenConfig,
    tcp: Config,
    local: SocketAddrV4,
    syn_q: Vec<HalfOpen>,
    accept_q: VecDeque<(SocketAddrV4, Connection)>,
    replies: VecDeque<(SocketAddrV4, TcpRepr)>,
    counters: ListenCounters,
}

impl core::fmt::Debug for Listener {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Listener")
            .field("local", &self.local)
            .field("syn_queue", &self.syn_q.len())
            .field("accept_queue", &self.accept_q.len())
            .field("replies", &self.replies.len())
            .finish()
    }
}

impl Listener {
    /// A listener on `local` (LISTEN state). Connections it creates use
    /// `tcp`, with `syn_retries` replaced by `cfg.synack_retries`. Queue
    /// slots are allocated here; capacities are clamped to `1..=65536`.
    pub fn new(cfg: ListenConfig, tcp: Config, local: SocketAddrV4) -> Self {
        let mut cfg = cfg;
        cfg.backlog = cfg.backlog.clamp(1, MAX_QUEUE);
        cfg.syn_queue = cfg.syn_queue.clamp(1, MAX_QUEUE);
        cfg.reply_queue = cfg.reply_queue.clamp(1, MAX_QUEUE);
        let mut tcp = tcp;
        tcp.syn_retries = cfg.synack_retries;
        Listener {
            syn_q: Vec::with_capacity(cfg.syn_queue),
            accept_q: VecDeque::with_capacity(cfg.backlog),
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
        self.syn_q.len()
    }

    /// Established connections waiting for `accept`.
    pub fn accept_queue_len(&self) -> usize {
        self.accept_q.len()
    }

    /// True when the accept queue is at its backlog: the stack should stop
    /// processing this listener until `accept` makes room.
    pub fn accept_queue_full(&self) -> bool {
        self.accept_q.len() >= self.cfg.backlog
    }

    /// Takes the oldest established connection. The caller installs it in
    /// its table; from then on its segments go to it, not to the listener.
    pub fn accept(&mut self) -> Option<(SocketAddrV4, Connection)> {
        let r = self.accept_q.pop_front();
        if r.is_some() {
            self.counters.accepted += 1;
        }
        r
    }

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
    /// come out of [`Listener::poll_transmit`]. Work: one scan of both
    /// queues and at most one `Connection::handle_segment`.
    pub fn handle_segment(
        &mut self,
        now: u64,
        remote: SocketAddrV4,
        seg: &TcpRepr,
        payload: &[u8],
        secret: &Secret,
    ) -> ListenOutput {
        if payload.len() != seg.payload_len {
            return self.discard(ListenDrop::BadLength);
        }
        if seg.dst_port != self.local.port() || seg.src_port != remote.port() {
            return self.discard(ListenDrop::WrongPort);
        }
        if let Some(i) = self.accept_q.iter().position(|(r, _)| *r == remote) {
            return self.feed_queued(now, i, seg, payload);
        }
        if let Some(i) = self.syn_q.iter().position(|h| h.remote == remote) {
            return self.feed_half_open(now, i, seg, payload);
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
            return self.on_syn(now, remote, seg, secret);
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
    ) -> ListenOutput {
        if seg.flags.intersects(TcpFlags::FIN | TcpFlags::RST) {
            return self.discard(ListenDrop::BadSyn);
        }
        // Linux tcp_conn_request(): no new connections while the accept
        // queue is full (the stack should not even be calling us).
        if self.accept_queue_full() {
            return self.discard(ListenDrop::AcceptQueueFull);
        }
        if self.syn_q.len() < self.cfg.syn_queue {
            // RFC 6528 §3: ISS = M + F(4-tuple, key).
            let iss = secret.isn(self.local, remote, now);
            let Some(conn) = Connection::accept_syn(self.tcp, self.local, remote, seg, iss, now)
            else {
                return self.discard(ListenDrop::BadSyn);
            };
            self.syn_q.push(HalfOpen {
                remote,
                conn,
                syn: *seg,
                resends: 0,
            });
            self.counters.syns += 1;
            return ListenOutput::HalfOpen;
        }
        if !self.cfg.syn_cookies {
            return self.discard(ListenDrop::SynQueueFull);
        }
        // RFC 4987 §3.6: stateless SYN-ACK, ISS = cookie, MSS only.
        let peer_mss = seg.mss.unwrap_or(super::DEFAULT_MSS);
        let (iss, _) = cookie::encode(secret, self.local, remote, seg.seq, peer_mss, now);
        let synack = TcpRepr {
            src_port: self.local.port(),
            dst_port: remote.port(),
            seq: iss,
            ack: seg.seq + 1,
            flags: TcpFlags::SYN | TcpFlags::ACK,
            window: self.tcp.recv_buf.clamp(1, 65535) as u16,
            mss: Some(self.tcp.mss.max(64)),
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
        // Rebuild the SYN the cookie stands for: its ISN and MSS, nothing
        // else (the cookie carries no other option).
        let syn = TcpRepr {
            src_port: seg.src_port,
            dst_port: seg.dst_port,
            seq: seg.seq + u32::MAX,
            flags: TcpFlags::SYN,
            window: seg.window,
            mss: Some(mss),
            ..TcpRepr::EMPTY
        };
        let iss = seg.ack + u32::MAX;
        let Some(mut conn) = Connection::accept_syn(self.tcp, self.local, remote, &syn, iss, now)
        else {
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
        self.counters.established += 1;
        self.accept_q.push_back((remote, conn));
        ListenOutput::Established
    }

    fn feed_half_open(
        &mut self,
        now: u64,
        i: usize,
        seg: &TcpRepr,
        payload: &[u8],
    ) -> ListenOutput {
        let f = seg.flags;
        let full = self.accept_queue_full();
        let Some(h) = self.syn_q.get_mut(i) else {
            return ListenOutput::Dropped(ListenDrop::ConnDropped);
        };
        // A retransmitted SYN (same ISN): our SYN-ACK was probably lost;
        // send it again (as Linux tcp_check_req()), bounded per entry.
        if f.contains(TcpFlags::SYN)
            && !f.intersects(TcpFlags::ACK | TcpFlags::RST | TcpFlags::FIN)
            && seg.seq == h.syn.seq
        {
            if h.resends >= self.cfg.synack_retries {
                return self.discard(ListenDrop::DupSynLimit);
            }
            let iss = h.conn.snd_una();
            if let Some(c) = Connection::accept_syn(self.tcp, self.local, h.remote, seg, iss, now) {
                h.conn = c;
                h.resends += 1;
                return ListenOutput::SynAckResent;
            }
            return self.discard(ListenDrop::BadSyn);
        }
        // Linux semantics: the final ACK waits while the accept queue is
        // full (the entry stays half-open; SYN-ACK retransmission recurs).
        if f.contains(TcpFlags::ACK) && !f.contains(TcpFlags::RST) && full {
            return self.discard(ListenDrop::AcceptQueueFull);
        }
        let r = h.conn.handle_segment(now, seg, payload);
        match h.conn.state() {
            State::SynReceived => match r {
                Ok(()) => ListenOutput::Delivered,
                Err(_) => self.discard(ListenDrop::ConnDropped),
            },
            State::Closed => {
                // RFC 9293 §3.10.7.4: a RST in SYN-RECEIVED from a passive
                // OPEN returns to LISTEN: the entry goes.
                self.syn_q.swap_remove(i);
                self.counters.removed += 1;
                ListenOutput::Removed
            }
            _ => {
                let h = self.syn_q.swap_remove(i);
                self.accept_q.push_back((h.remote, h.conn));
                self.counters.established += 1;
                ListenOutput::Established
            }
        }
    }

    fn feed_queued(&mut self, now: u64, i: usize, seg: &TcpRepr, payload: &[u8]) -> ListenOutput {
        let Some((_, conn)) = self.accept_q.get_mut(i) else {
            return ListenOutput::Dropped(ListenDrop::ConnDropped);
        };
        let r = conn.handle_segment(now, seg, payload);
        if conn.state() == State::Closed {
            // Reset before accept: like Linux, the application never sees
            // it (the queue slot is freed).
            self.accept_q.remove(i);
            self.counters.removed += 1;
            return ListenOutput::Removed;
        }
        match r {
            Ok(()) => ListenOutput::Delivered,
            Err(_) => self.discard(ListenDrop::ConnDropped),
        }
    }

    /// The earliest time at which `handle_timeout` must be called.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.syn_q
            .iter()
            .map(|h| &h.conn)
            .chain(self.accept_q.iter().map(|(_, c)| c))
            .filter_map(|c| c.poll_timeout())
            .min()
    }

    /// Runs expired timers: SYN-ACK retransmissions are scheduled, and
    /// half-open entries past their last retry are removed (counted).
    pub fn handle_timeout(&mut self, now: u64) {
        let mut i = 0;
        while i < self.syn_q.len() {
            let h = &mut self.syn_q[i];
            if h.conn.poll_timeout().is_some_and(|t| t <= now) {
                h.conn.handle_timeout(now);
            }
            if h.conn.state() == State::Closed {
                self.syn_q.swap_remove(i);
                self.counters.synack_timeouts += 1;
            } else {
                i += 1;
            }
        }
        let mut i = 0;
        while i < self.accept_q.len() {
            let c = &mut self.accept_q[i].1;
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
            if c.state() == State::Closed {
                self.accept_q.remove(i);
                self.counters.removed += 1;
            } else {
                i += 1;
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
        for h in self.syn_q.iter_mut() {
            if let Some(r) = h.conn.poll_transmit(now, out) {
                return Some((h.remote, r));
            }
        }
        for (remote, c) in self.accept_q.iter_mut() {
            if let Some(r) = c.poll_transmit(now, out) {
                return Some((*remote, r));
            }
        }
        None
    }

    /// Checks the queue bounds (for tests).
    pub fn check_invariants(&self) -> Result<(), &'static str> {
        if self.syn_q.len() > self.cfg.syn_queue {
            return Err("SYN queue over capacity");
        }
        if self.accept_q.len() > self.cfg.backlog {
            return Err("accept queue over capacity");
        }
        if self.replies.len() > self.cfg.reply_queue {
            return Err("reply queue over capacity");
        }
        if self
            .syn_q
            .iter()
            .any(|h| h.conn.state() != State::SynReceived)
        {
            return Err("non-SYN-RECEIVED entry in the SYN queue");
        }
        for (i, h) in self.syn_q.iter().enumerate() {
            if self.syn_q[..i].iter().any(|o| o.remote == h.remote)
                || self.accept_q.iter().any(|(r, _)| *r == h.remote)
            {
                return Err("duplicate 4-tuple");
            }
        }
        Ok(())
    }
}
