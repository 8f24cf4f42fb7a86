//! The listener as it was before compact half-open entries (commit
//! cae3373, `proto/tcp/listen.rs`): every half-open entry a whole
//! `Connection`, linear scans. Kept as the reference model of
//! `listen_diff.rs`; only public APIs are used.

use std::collections::VecDeque;
use std::net::SocketAddrV4;

use lazynet::proto::tcp::cookie;
use lazynet::proto::tcp::Secret;
use lazynet::proto::tcp::{reset_for, Config, Connection, State};
use lazynet::wire::tcp::{TcpFlags, TcpRepr};

use lazynet::proto::tcp::{ListenConfig, ListenCounters, ListenDrop, ListenOutput};
const MAX_QUEUE: usize = 1 << 16;
struct HalfOpen {
    remote: SocketAddrV4,
    conn: Connection,
    /// The SYN that opened it (for resending the SYN-ACK).
    syn: TcpRepr,
    /// Connections rebuilt to resend the SYN-ACK on a duplicate SYN.
    resends: u32,
}

/// One listening socket: SYN queue, accept queue, SYN cookies.
pub struct OldListener {
    cfg: ListenConfig,
    tcp: Config,
    local: SocketAddrV4,
    /// Each connection's TSval offset is keyed from it (RFC 7323 §5.4).
    secret: Secret,
    syn_q: Vec<HalfOpen>,
    accept_q: VecDeque<(SocketAddrV4, Connection)>,
    replies: VecDeque<(SocketAddrV4, TcpRepr)>,
    counters: ListenCounters,
}

impl core::fmt::Debug for OldListener {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Listener")
            .field("local", &self.local)
            .field("syn_queue", &self.syn_q.len())
            .field("accept_queue", &self.accept_q.len())
            .field("replies", &self.replies.len())
            .finish()
    }
}

impl OldListener {
    /// A listener on `local` (LISTEN state). Connections it creates use
    /// `tcp`, with `syn_retries` replaced by `cfg.synack_retries`. Queue
    /// slots are allocated here; capacities are clamped to `1..=65536` (the SYN queue to `0..` with cookies).
    /// Each connection's TSval offset is `secret`'s for its 4-tuple.
    pub fn new(cfg: ListenConfig, tcp: Config, local: SocketAddrV4, secret: &Secret) -> Self {
        let mut cfg = cfg;
        cfg.backlog = cfg.backlog.clamp(1, MAX_QUEUE);
        cfg.syn_queue = cfg
            .syn_queue
            .clamp(usize::from(!cfg.syn_cookies), MAX_QUEUE);
        cfg.reply_queue = cfg.reply_queue.clamp(1, MAX_QUEUE);
        let mut tcp = tcp;
        tcp.syn_retries = cfg.synack_retries;
        OldListener {
            syn_q: Vec::with_capacity(cfg.syn_queue),
            accept_q: VecDeque::with_capacity(cfg.backlog),
            replies: VecDeque::with_capacity(cfg.reply_queue),
            cfg,
            tcp,
            local,
            secret: *secret,
            counters: ListenCounters::default(),
        }
    }

    /// `tcp` with the TSval offset of the connection with `remote`.
    fn conn_cfg(&self, remote: SocketAddrV4) -> Config {
        Config {
            ts_offset: self.secret.ts_offset(self.local, remote),
            ..self.tcp
        }
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
            let Some(conn) =
                Connection::accept_syn(self.conn_cfg(remote), self.local, remote, seg, iss, now)
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
        // RFC 4987 §3.6: stateless SYN-ACK, ISS = cookie (MSS); with
        // timestamps, the window shift and SACK-permitted in the TSval.
        let peer_mss = seg.mss.unwrap_or(lazynet::proto::tcp::DEFAULT_MSS);
        let (iss, _) = cookie::encode(secret, self.local, remote, seg.seq, peer_mss, now);
        let ts = if self.tcp.timestamps {
            seg.timestamps
        } else {
            None
        };
        let opts = cookie::SynOptions {
            wscale: if self.tcp.window_scale {
                seg.window_scale
            } else {
                None
            },
            sack: self.tcp.sack && seg.sack_permitted,
        };
        let mut our_shift = 0u8;
        while our_shift < 14 && (self.tcp.recv_buf >> our_shift) > 65535 {
            our_shift += 1;
        }
        let ts_now = ((now / 1_000_000) as u32).wrapping_add(self.conn_cfg(remote).ts_offset);
        let synack = TcpRepr {
            src_port: self.local.port(),
            dst_port: remote.port(),
            seq: iss,
            ack: seg.seq + 1,
            flags: TcpFlags::SYN | TcpFlags::ACK,
            window: self.tcp.recv_buf.clamp(1, 65535) as u16,
            mss: Some(self.tcp.mss.max(64)),
            window_scale: if ts.is_some() && opts.wscale.is_some() {
                Some(our_shift)
            } else {
                None
            },
            sack_permitted: ts.is_some() && opts.sack,
            timestamps: ts.map(|t| lazynet::wire::tcp::Timestamps {
                tsval: cookie::encode_ts(ts_now, opts),
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
        // Rebuild the SYN the cookie stands for: its ISN and MSS, and the
        // options an echo of a recent TSval of ours carries.
        let ts_now = ((now / 1_000_000) as u32).wrapping_add(self.conn_cfg(remote).ts_offset);
        let mut syn = TcpRepr {
            src_port: seg.src_port,
            dst_port: seg.dst_port,
            seq: seg.seq + u32::MAX,
            flags: TcpFlags::SYN,
            window: seg.window,
            mss: Some(mss),
            ..TcpRepr::EMPTY
        };
        if let Some(t) = seg.timestamps.filter(|_| self.tcp.timestamps) {
            if let Some(o) = cookie::decode_ts(t.tsecr, ts_now) {
                syn.window_scale = o.wscale;
                syn.sack_permitted = o.sack;
                syn.timestamps = Some(lazynet::wire::tcp::Timestamps {
                    tsval: t.tsval,
                    tsecr: 0,
                });
            }
        }
        let iss = seg.ack + u32::MAX;
        let Some(mut conn) =
            Connection::accept_syn(self.conn_cfg(remote), self.local, remote, &syn, iss, now)
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
        let cfg = match self.syn_q.get(i) {
            Some(h) => self.conn_cfg(h.remote),
            None => self.tcp,
        };
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
            if let Some(c) = Connection::accept_syn(cfg, self.local, h.remote, seg, iss, now) {
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
}
