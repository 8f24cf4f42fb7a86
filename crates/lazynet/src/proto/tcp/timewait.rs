//! A bounded table of connections in TIME-WAIT (RFC 9293 §3.10.7.4,
//! §3.6), sans-IO.
//!
//! **Owns:** one compact [`TimeWaitEntry`] per 4-tuple (40 bytes, 56 with
//! the table's links and expiry, [`TimeWaitTable::SLOT_BYTES`]) instead of
//! a whole [`super::Connection`] with its buffers; a hash index by 4-tuple
//! (`tuple_index`, O(1) expected); the expiry order; counters.
//! Every slot and bucket is allocated at construction
//! ([`TimeWaitConfig::capacity`]); nothing is allocated per segment.
//!
//! **May not touch:** clocks, randomness, I/O, the listener, the caller's
//! table of connections. Time comes in as `now` (nanoseconds) and must not
//! go backwards between calls.
//!
//! **Contract with the caller (the stack):**
//! - When a connection enters TIME-WAIT ([`super::Connection::state`] is
//!   [`super::State::TimeWait`] after any call), take
//!   [`super::Connection::time_wait_entry`], [`TimeWaitTable::insert`] it
//!   and drop the connection (after draining its `poll_transmit`: the ACK
//!   of the peer's FIN is still in it).
//! - A segment whose 4-tuple has no connection goes to
//!   [`TimeWaitTable::handle_segment`] first. [`TwAction::NoEntry`]: go on
//!   (listener, or RST for CLOSED). [`TwAction::SendAck`]: send it.
//!   [`TwAction::AllowSyn`]: the entry is gone; hand the same SYN to the
//!   listener. [`TwAction::Closed`] and [`TwAction::Drop`]: nothing.
//! - When [`TimeWaitTable::poll_timeout`] is due, call
//!   [`TimeWaitTable::poll_expired`] (with a bound on the work).
//!
//! **Expiry.** All entries live the same 2·MSL ([`TimeWaitConfig::time_wait`]),
//! so insertion order is expiry order: the entries form a FIFO (an
//! intrusive doubly linked list over the slots). A retransmitted FIN
//! restarts 2·MSL, which moves its entry to the tail, in O(1). Expiry pops
//! from the head: O(expired).
//!
//! **Table full: the oldest entry is evicted** (counted as
//! [`TwEvict::Full`]). Linux instead refuses the new one
//! (`tcp_max_tw_buckets`, "time wait bucket table overflow": the socket is
//! closed without TIME-WAIT). We evict because the oldest entry has
//! already served most of its 2·MSL, so old duplicates of its connection
//! are the least likely to still be in the network, while refusing the new
//! one leaves the most recent connection (whose duplicates are the most
//! likely) unprotected for the whole 2·MSL. Both choices are bounded.
//!
//! **RST in TIME-WAIT: closes the entry** when its sequence number is
//! exactly RCV.NXT (RFC 9293 §3.10.7.4 second check, with the RFC 5961
//! §3.2 exact-match rule); an in-window but inexact RST gets a challenge
//! ACK; others are dropped. RFC 1337 §3 recommends ignoring RSTs in
//! TIME-WAIT against "TIME-WAIT assassination". We follow RFC 9293 and
//! Linux's default (`net.ipv4.tcp_rfc1337 = 0` kills TIME-WAIT on a RST;
//! Linux ignores it only when that sysctl is 1) because: the exact-match
//! rule already makes an old duplicate RST unlikely to be accepted
//! (hazard H1 needs RCV.NXT exactly); and it lets a client whose new SYN
//! we answered with an ACK (below) reset the entry and retry at once
//! instead of waiting up to 2·MSL.
//!
//! **A new SYN for the same 4-tuple** (no ACK, no RST) is accepted, the
//! entry removed and [`TwAction::AllowSyn`] returned, per RFC 6191 §2:
//! if the connection used timestamps and the SYN carries one, when its
//! TSval is greater than TS.Recent; otherwise (RFC 9293 §3.10.7.4 and
//! RFC 1122 §4.2.2.13), when its sequence number is greater than the final
//! RCV.NXT (as Linux `tcp_timewait_state_process()`: `after(seq,
//! rcv_nxt)`). A SYN that is not acceptable is not silently dropped (RFC
//! 6191's text) but answered with an ACK like any other segment in a
//! synchronized state (RFC 9293 §3.10.7.4 first/fourth checks, RFC 5961
//! §4.2, and Linux): a live client then resets the entry (above). RFC 1122
//! (1) also asks that the new ISS be above the old SND.NXT;
//! [`TwAction::AllowSyn`] carries it for the caller, and the stack hands
//! it to [`super::Listener::handle_reopening_syn`].
//!
//! **Other segments** (RFC 9293 §3.10.7.4): PAWS (RFC 7323 §5.3 R1)
//! first: an old TSval gets an ACK. A retransmitted FIN (ending exactly at
//! RCV.NXT) gets an ACK and restarts 2·MSL. Any other unacceptable
//! segment, an in-window SYN, and an acceptable segment with text or FIN
//! get an ACK. An acceptable bare ACK is dropped silently (nothing to
//! acknowledge; answering ACKs with ACKs can loop), as Linux does, and
//! does not restart the timer (RFC 9293 restarts only on a FIN). Every ACK
//! the table sends counts against a table-wide limit per second
//! ([`TimeWaitConfig::ack_limit`], in the spirit of RFC 5961 §7).
//!
//! The ACK: `<SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>`, the last window we
//! advertised (scaled as negotiated), and `TSval = now_ms + offset,
//! TSecr = TS.Recent` if timestamps were in use. TS.Recent is updated by
//! RFC 7323 §4.3 (SEG.SEQ ≤ RCV.NXT and a newer TSval); its 24-day idle
//! rule (§5.5) cannot apply within 2·MSL and is not checked.
//!
//! **Work per call:** `handle_segment`, `insert`, `lookup`, `remove`: one
//! index probe sequence and O(1) list updates; `poll_expired(now, max)`:
//! at most `max` entries; `poll_timeout`: O(1).

use std::net::SocketAddrV4;

use super::secret::Secret;
use super::tuple_index::{TupleIndex, TupleKey};
use crate::wire::tcp::{SeqNumber, TcpFlags, TcpRepr, Timestamps};

const NIL: u32 = u32::MAX;
const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
/// Upper bound on the capacity (a configuration error guard).
const MAX_CAPACITY: usize = 1 << 24;

/// A 4-tuple as seen from our side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TwKey {
    /// Our address and port.
    pub local: SocketAddrV4,
    /// The peer's address and port.
    pub remote: SocketAddrV4,
}

/// Timestamp state kept in TIME-WAIT (RFC 7323 §3, §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TwTimestamps {
    /// TS.Recent: the peer's latest TSval we accepted.
    pub ts_recent: u32,
    /// Offset of our timestamp clock: TSval = now in ms + offset
    /// ([`super::Config::ts_offset`]).
    pub ts_offset: u32,
}

/// What remains of a connection in TIME-WAIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWaitEntry {
    /// The 4-tuple.
    pub key: TwKey,
    /// SND.NXT: one past our FIN.
    pub snd_nxt: SeqNumber,
    /// RCV.NXT: one past the peer's FIN.
    pub rcv_nxt: SeqNumber,
    /// The receive window we last advertised, in bytes (RCV.WND).
    pub rcv_wnd: u32,
    /// Our window scale shift (RFC 7323 §2), 0 if not negotiated.
    pub rcv_wscale: u8,
    /// Timestamps, if they were in use.
    pub ts: Option<TwTimestamps>,
}

/// Configuration of a [`TimeWaitTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWaitConfig {
    /// Entries, clamped to `1..=2^24`; slots are allocated up front.
    pub capacity: usize,
    /// 2·MSL in nanoseconds (RFC 9293 §3.3.2); the same for all entries.
    pub time_wait: u64,
    /// ACKs the table sends per second, all entries together.
    pub ack_limit: u32,
}

impl Default for TimeWaitConfig {
    fn default() -> Self {
        TimeWaitConfig {
            capacity: 8192,
            // As Linux TCP_TIMEWAIT_LEN and Config::time_wait.
            time_wait: 60 * SEC,
            ack_limit: 1000,
        }
    }
}

/// Why an entry left the table before its 2·MSL ended (besides a RST or
/// an accepted SYN, which are counted separately).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum TwEvict {
    /// The table was full: the oldest entry made room for a new one.
    Full = 0,
    /// An entry for the same 4-tuple was inserted again.
    Replaced,
}

impl TwEvict {
    /// Number of reasons.
    pub const COUNT: usize = 2;
    /// A static description.
    pub const fn as_str(self) -> &'static str {
        match self {
            TwEvict::Full => "table full, oldest evicted",
            TwEvict::Replaced => "same 4-tuple inserted again",
        }
    }
}

/// Why a segment for an entry got no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum TwDrop {
    /// RST outside the receive window (RFC 5961 §3.2).
    RstOutOfWindow = 0,
    /// Acceptable segment without ACK bit (RFC 9293 fifth check).
    NoAck,
    /// Acceptable bare ACK: nothing to acknowledge.
    PureAck,
    /// An ACK was due but the table's ACK limit was reached.
    RateLimited,
}

impl TwDrop {
    /// Number of reasons.
    pub const COUNT: usize = 4;
    /// A static description.
    pub const fn as_str(self) -> &'static str {
        match self {
            TwDrop::RstOutOfWindow => "RST outside the window",
            TwDrop::NoAck => "no ACK bit",
            TwDrop::PureAck => "bare ACK, nothing to answer",
            TwDrop::RateLimited => "ACK rate limit",
        }
    }
}

/// What [`TimeWaitTable::handle_segment`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TwAction {
    /// No entry for this 4-tuple: the segment goes on to the listener (or
    /// gets a RST as in CLOSED).
    NoEntry,
    /// Send this ACK from `key.local` to `key.remote`.
    SendAck(TcpRepr),
    /// An acceptable new SYN (RFC 6191): the entry was removed; hand the
    /// SYN to the listener. RFC 1122 §4.2.2.13 (1): the new connection's
    /// ISS should be after `snd_nxt`, the old connection's last sequence.
    AllowSyn {
        /// SND.NXT of the old incarnation.
        snd_nxt: SeqNumber,
    },
    /// A RST closed the entry (removed).
    Closed,
    /// Nothing to send.
    Drop(TwDrop),
}

/// Counters of a [`TimeWaitTable`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TwCounters {
    /// Entries inserted (including replacements).
    pub inserted: u64,
    /// Entries removed at the end of their 2·MSL.
    pub expired: u64,
    /// Early removals by [`TwEvict`] reason (index = `reason as usize`).
    pub evicted: [u64; TwEvict::COUNT],
    /// Segments without reply by [`TwDrop`] reason.
    pub drops: [u64; TwDrop::COUNT],
    /// Segments for an entry.
    pub segs_in: u64,
    /// ACKs returned in [`TwAction::SendAck`].
    pub acks_sent: u64,
    /// Retransmitted FINs (each restarted 2·MSL).
    pub fin_restarts: u64,
    /// Segments that failed PAWS (RFC 7323 §5.3; ACK sent unless limited).
    pub paws_rejected: u64,
    /// SYNs accepted for a new incarnation (RFC 6191).
    pub syn_accepted: u64,
    /// SYNs not acceptable (old TSval or sequence; ACK sent unless limited).
    pub syn_rejected: u64,
    /// Entries closed by a RST.
    pub rst_closed: u64,
    /// Entries removed by [`TimeWaitTable::remove`].
    pub removed: u64,
}

impl TwCounters {
    /// Drops for one reason.
    pub fn drop_count(&self, r: TwDrop) -> u64 {
        self.drops[r as usize]
    }
    /// Evictions for one reason.
    pub fn evict_count(&self, r: TwEvict) -> u64 {
        self.evicted[r as usize]
    }
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    entry: TimeWaitEntry,
    expires: u64,
    prev: u32,
    next: u32,
}

/// The TIME-WAIT table. See the module documentation.
#[derive(Debug)]
pub struct TimeWaitTable {
    cfg: TimeWaitConfig,
    slots: Vec<Slot>,
    /// Free slots, linked through `next`.
    free: u32,
    /// Oldest (first to expire) and newest entries.
    head: u32,
    tail: u32,
    len: usize,
    index: TupleIndex,
    ack_window_start: u64,
    acks_in_window: u32,
    counters: TwCounters,
}

fn seq_in(s: SeqNumber, lo: SeqNumber, hi: SeqNumber) -> bool {
    s.in_window(lo, hi)
}

impl TimeWaitTable {
    /// Bytes per entry, including the table's links and expiry time.
    pub const SLOT_BYTES: usize = core::mem::size_of::<Slot>();

    /// An empty table; its slots and index are allocated here. The
    /// index's hash is keyed from `secret` (the stack's, seeded at
    /// start-up), so peers cannot choose colliding 4-tuples.
    pub fn new(cfg: TimeWaitConfig, secret: &Secret) -> Self {
        let mut cfg = cfg;
        cfg.capacity = cfg.capacity.clamp(1, MAX_CAPACITY);
        TimeWaitTable {
            slots: Vec::with_capacity(cfg.capacity),
            free: NIL,
            head: NIL,
            tail: NIL,
            len: 0,
            index: TupleIndex::new(cfg.capacity, TupleKey::from_secret(secret)),
            ack_window_start: 0,
            acks_in_window: 0,
            counters: TwCounters::default(),
            cfg,
        }
    }

    /// The configuration (after clamping).
    pub fn config(&self) -> &TimeWaitConfig {
        &self.cfg
    }

    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Counters.
    pub fn counters(&self) -> &TwCounters {
        &self.counters
    }

    fn find(&self, key: &TwKey) -> Option<(usize, u32)> {
        let slots = &self.slots;
        let k = self.index.key();
        self.index.find(k.tuple(key.local, key.remote), |s| {
            slots.get(s as usize).is_some_and(|x| x.entry.key == *key)
        })
    }

    /// The entry for `key`, if any.
    pub fn lookup(&self, key: &TwKey) -> Option<&TimeWaitEntry> {
        self.find(key).map(|(_, s)| &self.slots[s as usize].entry)
    }

    /// When the entry for `key` expires, if there is one.
    pub fn expires_at(&self, key: &TwKey) -> Option<u64> {
        self.find(key).map(|(_, s)| self.slots[s as usize].expires)
    }

    /// The earliest expiry, if any: when [`TimeWaitTable::poll_expired`]
    /// has work.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.slots.get(self.head as usize).map(|s| s.expires)
    }

    /// Adds `entry`, expiring at `now + time_wait`. If its 4-tuple is
    /// already there, the entry is replaced (and restarted); if the table
    /// is full, the oldest entry is evicted. Returns the eviction, if any.
    pub fn insert(&mut self, now: u64, entry: TimeWaitEntry) -> Option<TwEvict> {
        self.counters.inserted += 1;
        let expires = now.saturating_add(self.cfg.time_wait);
        if let Some((_, s)) = self.find(&entry.key) {
            self.slots[s as usize].entry = entry;
            self.restart(s, expires);
            self.counters.evicted[TwEvict::Replaced as usize] += 1;
            return Some(TwEvict::Replaced);
        }
        let mut evicted = None;
        if self.len >= self.cfg.capacity {
            let oldest = self.head;
            self.remove_slot(oldest);
            self.counters.evicted[TwEvict::Full as usize] += 1;
            evicted = Some(TwEvict::Full);
        }
        let slot = Slot {
            entry,
            expires,
            prev: NIL,
            next: NIL,
        };
        let s = if self.free != NIL {
            let s = self.free;
            self.free = self.slots[s as usize].next;
            self.slots[s as usize] = slot;
            s
        } else {
            // len < capacity and no free slot: the Vec has room (its
            // capacity was reserved in `new`), so this does not allocate.
            self.slots.push(slot);
            (self.slots.len() - 1) as u32
        };
        let hash = self.index.key().tuple(entry.key.local, entry.key.remote);
        let inserted = self.index.insert(hash, s);
        debug_assert!(inserted, "index sized for capacity");
        self.push_tail(s);
        self.len += 1;
        evicted
    }

    /// Removes the entry for `key` (e.g. the caller reuses the 4-tuple
    /// under its own rule). Returns it.
    pub fn remove(&mut self, key: &TwKey) -> Option<TimeWaitEntry> {
        let (_, s) = self.find(key)?;
        let e = self.slots[s as usize].entry;
        self.remove_slot(s);
        self.counters.removed += 1;
        Some(e)
    }

    /// Removes up to `max` entries whose 2·MSL ended at or before `now`;
    /// returns how many.
    pub fn poll_expired(&mut self, now: u64, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let h = self.head;
            match self.slots.get(h as usize) {
                Some(s) if s.expires <= now => {
                    self.remove_slot(h);
                    self.counters.expired += 1;
                    n += 1;
                }
                _ => break,
            }
        }
        n
    }

    /// Processes one segment (parsed from a checksum-verified packet) from
    /// `key.remote` to `key.local`. See the module documentation for the
    /// rules.
    pub fn handle_segment(&mut self, now: u64, key: &TwKey, seg: &TcpRepr) -> TwAction {
        let Some((_, s)) = self.find(key) else {
            return TwAction::NoEntry;
        };
        self.counters.segs_in += 1;
        let e = self.slots[s as usize].entry;
        let f = seg.flags;
        let rst = f.contains(TcpFlags::RST);
        let syn = f.contains(TcpFlags::SYN);
        let fin = f.contains(TcpFlags::FIN);
        // RFC 6191 §2 / RFC 1122 §4.2.2.13: a new SYN may reopen.
        if syn && !f.intersects(TcpFlags::ACK | TcpFlags::RST) {
            let newer = match (e.ts, seg.timestamps) {
                (Some(t), Some(ts)) => (ts.tsval.wrapping_sub(t.ts_recent) as i32) > 0,
                _ => seg.seq.diff(e.rcv_nxt) > 0,
            };
            if newer {
                self.remove_slot(s);
                self.counters.syn_accepted += 1;
                return TwAction::AllowSyn { snd_nxt: e.snd_nxt };
            }
            self.counters.syn_rejected += 1;
            // Falls through: answered with an ACK below.
        }
        // RFC 7323 §5.3 R1: PAWS (not for RSTs).
        if let (Some(t), Some(ts), false) = (e.ts, seg.timestamps, rst) {
            if (ts.tsval.wrapping_sub(t.ts_recent) as i32) < 0 {
                self.counters.paws_rejected += 1;
                return self.ack(now, s);
            }
        }
        // First check: sequence number acceptability (RFC 9293 §3.4).
        let seg_len = seg.payload_len as u32 + u32::from(syn) + u32::from(fin);
        let wnd = e.rcv_wnd;
        let end = e.rcv_nxt + wnd;
        let acceptable = match (seg_len, wnd) {
            (0, 0) => seg.seq == e.rcv_nxt,
            // As Connection (and Linux tcp_sequence()): a zero-length
            // non-RST segment at the right edge is accepted.
            (0, _) if !rst && seg.seq == end => true,
            (0, _) => seq_in(seg.seq, e.rcv_nxt, end),
            (_, 0) => false,
            _ => seq_in(seg.seq, e.rcv_nxt, end) || seq_in(seg.seq + (seg_len - 1), e.rcv_nxt, end),
        };
        if !acceptable {
            if rst {
                return self.drop(TwDrop::RstOutOfWindow);
            }
            // RFC 9293 §3.10.7.4 TIME-WAIT: a retransmission of the
            // remote FIN: acknowledge it and restart the 2·MSL timeout.
            if fin && seg.seq + (seg.payload_len as u32 + 1) == e.rcv_nxt {
                self.counters.fin_restarts += 1;
                self.update_ts_recent(s, seg);
                self.restart(s, now.saturating_add(self.cfg.time_wait));
            }
            // "If an incoming segment is not acceptable, an
            // acknowledgment should be sent in reply."
            return self.ack(now, s);
        }
        // Second check: RST (RFC 5961 §3.2: exactly RCV.NXT resets,
        // otherwise a challenge ACK).
        if rst {
            if seg.seq == e.rcv_nxt {
                self.remove_slot(s);
                self.counters.rst_closed += 1;
                return TwAction::Closed;
            }
            return self.ack(now, s);
        }
        // Fourth check: SYN (RFC 5961 §4.2): challenge ACK.
        if syn {
            return self.ack(now, s);
        }
        // Fifth check: no ACK bit, drop.
        if !f.contains(TcpFlags::ACK) {
            return self.drop(TwDrop::NoAck);
        }
        self.update_ts_recent(s, seg);
        // Seventh and eighth: text and FIN after the peer's FIN are not
        // valid; acknowledge what we have.
        if seg.payload_len > 0 || fin {
            return self.ack(now, s);
        }
        self.drop(TwDrop::PureAck)
    }

    /// RFC 7323 §4.3: TS.Recent follows a newer TSval of a segment that
    /// starts at or before RCV.NXT (our Last.ACK.sent).
    fn update_ts_recent(&mut self, s: u32, seg: &TcpRepr) {
        let slot = &mut self.slots[s as usize];
        if let (Some(t), Some(ts)) = (slot.entry.ts.as_mut(), seg.timestamps) {
            if seg.seq.diff(slot.entry.rcv_nxt) <= 0
                && (ts.tsval.wrapping_sub(t.ts_recent) as i32) >= 0
            {
                t.ts_recent = ts.tsval;
            }
        }
    }

    fn drop(&mut self, r: TwDrop) -> TwAction {
        self.counters.drops[r as usize] += 1;
        TwAction::Drop(r)
    }

    fn ack(&mut self, now: u64, s: u32) -> TwAction {
        if now.saturating_sub(self.ack_window_start) >= SEC {
            self.ack_window_start = now;
            self.acks_in_window = 0;
        }
        if self.acks_in_window >= self.cfg.ack_limit {
            return self.drop(TwDrop::RateLimited);
        }
        self.acks_in_window += 1;
        self.counters.acks_sent += 1;
        let e = &self.slots[s as usize].entry;
        let window = (e.rcv_wnd >> e.rcv_wscale.min(14)).min(65535) as u16;
        TwAction::SendAck(TcpRepr {
            src_port: e.key.local.port(),
            dst_port: e.key.remote.port(),
            seq: e.snd_nxt,
            ack: e.rcv_nxt,
            flags: TcpFlags::ACK,
            window,
            timestamps: e.ts.map(|t| Timestamps {
                tsval: ((now / MS) as u32).wrapping_add(t.ts_offset),
                tsecr: t.ts_recent,
            }),
            ..TcpRepr::EMPTY
        })
    }

    fn restart(&mut self, s: u32, expires: u64) {
        self.unlink(s);
        self.slots[s as usize].expires = expires;
        self.push_tail(s);
    }

    fn push_tail(&mut self, s: u32) {
        let t = self.tail;
        {
            let slot = &mut self.slots[s as usize];
            slot.prev = t;
            slot.next = NIL;
        }
        match self.slots.get_mut(t as usize) {
            Some(ts) => ts.next = s,
            None => self.head = s,
        }
        self.tail = s;
    }

    fn unlink(&mut self, s: u32) {
        let (p, n) = {
            let slot = &self.slots[s as usize];
            (slot.prev, slot.next)
        };
        match self.slots.get_mut(p as usize) {
            Some(ps) => ps.next = n,
            None => self.head = n,
        }
        match self.slots.get_mut(n as usize) {
            Some(ns) => ns.prev = p,
            None => self.tail = p,
        }
    }

    fn remove_slot(&mut self, s: u32) {
        let Some(slot) = self.slots.get(s as usize) else {
            return;
        };
        let key = slot.entry.key;
        let slots = &self.slots;
        let hk = self.index.key();
        if let Some(b) = self.index.bucket_of(hk.tuple(key.local, key.remote), s) {
            self.index.remove_at(b, |x| {
                let k = slots[x as usize].entry.key;
                hk.tuple(k.local, k.remote)
            });
        }
        self.unlink(s);
        self.slots[s as usize].next = self.free;
        self.slots[s as usize].prev = NIL;
        self.free = s;
        self.len -= 1;
    }

    /// Checks the table's invariants (for tests; O(capacity)).
    pub fn check_invariants(&self) -> Result<(), &'static str> {
        if self.len > self.cfg.capacity || self.slots.len() > self.cfg.capacity {
            return Err("over capacity");
        }
        if self.index.len() != self.len {
            return Err("index and list disagree on the count");
        }
        let mut n = 0;
        let mut prev = NIL;
        let mut last = 0u64;
        let mut s = self.head;
        while s != NIL {
            n += 1;
            if n > self.len {
                return Err("expiry list longer than len (cycle?)");
            }
            let slot = &self.slots[s as usize];
            if slot.prev != prev {
                return Err("broken back link");
            }
            if slot.expires < last {
                return Err("expiry list out of order");
            }
            last = slot.expires;
            if self.find(&slot.entry.key).map(|p| p.1) != Some(s) {
                return Err("entry not reachable through the index");
            }
            prev = s;
            s = slot.next;
        }
        if prev != self.tail {
            return Err("tail is not the last entry");
        }
        if n != self.len {
            return Err("expiry list shorter than len");
        }
        Ok(())
    }
}
