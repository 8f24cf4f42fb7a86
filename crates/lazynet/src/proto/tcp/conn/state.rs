//! The TCB's state changes and sequence-space arithmetic that input and
//! output share: entering CLOSED and TIME-WAIT, flight and window sizes,
//! acceptability (RFC 9293 §3.10.7.4), option negotiation, timestamps.
//!
//! **Owns:** nothing of its own; helpers over the TCB's fields.
//! **May not touch:** the order of processing (that is `input`'s).

use super::*;

impl<C: CongestionControl> Connection<C> {
    // ---------------------------------------------------------------
    // Helpers.

    pub(super) fn synchronized(&self) -> bool {
        !matches!(
            self.state,
            State::Closed | State::SynSent | State::SynReceived
        )
    }

    pub(super) fn flight(&self) -> u32 {
        self.snd_max.diff(self.snd_una).max(0) as u32
    }

    /// Sequence number of our FIN (valid once the SYN is acked).
    pub(super) fn fin_seq(&self) -> SeqNumber {
        self.data_start() + self.tx.len() as u32
    }

    /// Sequence number of the first byte in the send buffer.
    pub(super) fn data_start(&self) -> SeqNumber {
        if self.syn_acked {
            self.snd_una
        } else {
            self.iss + 1
        }
    }

    pub(super) fn fin_acked(&self) -> bool {
        self.fin_was_acked
    }

    /// RFC 5681 §4.1: before sending after a silence longer than the RTO
    /// (nothing in flight since everything was acknowledged more than an
    /// RTO ago, and something to send now, a FIN's data included), the congestion window decays
    /// ([`super::cc::idle_restart`]: halved per RTO of silence, not below
    /// min(IW, cwnd)). `poll_transmit` does it (and `burst_plan` plans
    /// nothing while it is due). Cheap when nothing is due: two
    /// comparisons.
    #[inline]
    pub(super) fn restart_if_idle(&mut self, now: u64) {
        if self.idle_restart_due(now) && self.has_unsent() {
            self.idle_restart(now);
        }
    }

    /// Nothing in flight since everything was acknowledged more than an
    /// RTO ago: sending now restarts after idle. (The transmit fast path
    /// declines then, so that `poll_transmit` restarts first.)
    #[inline]
    pub(super) fn idle_restart_due(&self, now: u64) -> bool {
        self.snd_una == self.snd_max
            && now.saturating_sub(self.drained_at) > self.rtt.rto()
            && self.syn_acked
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(super) fn idle_restart(&mut self, now: u64) {
        // Data left in a closed connection's buffer is never sent.
        if !self.may_send_data() {
            return;
        }
        let rto = self.rtt.rto().max(1);
        let halvings = ((now - self.drained_at - 1) / rto).min(32) as u32;
        self.cc.on_idle_restart(halvings, self.eff_mss);
        self.drained_at = now;
        self.counters.idle_restarts += 1;
    }

    /// In a state that sends data, its SYN acknowledged.
    pub(super) fn may_send_data(&self) -> bool {
        matches!(
            self.state,
            State::Established
                | State::CloseWait
                | State::FinWait1
                | State::Closing
                | State::LastAck
        ) && self.syn_acked
    }

    pub(super) fn has_unsent(&self) -> bool {
        let off = self.snd_nxt.diff(self.data_start()).max(0) as usize;
        off < self.tx.len()
            || (self.fin_queued && !self.fin_was_acked && self.snd_max.diff(self.fin_seq()) <= 0)
    }

    pub(super) fn ts_now(&self, now: u64) -> u32 {
        ((now / MS) as u32).wrapping_add(self.cfg.ts_offset)
    }

    /// The timestamps option of a segment sent at `now` (RFC 7323 §3.2),
    /// if the connection uses timestamps.
    pub(super) fn timestamps(&self, now: u64) -> Option<Timestamps> {
        self.ts_enabled.then(|| Timestamps {
            tsval: self.ts_now(now),
            tsecr: self.ts_recent,
        })
    }

    /// The largest window the buffer allows (scaled units not applied).
    pub(super) fn window_possible(&self) -> u32 {
        if self.orphaned {
            // No buffer behind it any more, and none needed: keep the edge
            // (new text resets the connection).
            return self.rcv_adv.diff(self.rcv_nxt).max(0) as u32;
        }
        let cap = 65535u32 << self.rcv_wscale;
        (self.rx.free().min(u32::MAX as usize) as u32).min(cap)
    }

    /// RFC 9293 §3.8.6.2.2: the right edge moves only by at least
    /// min(RCV.BUFF / 2, MSS).
    pub(super) fn sws_step(&self) -> u32 {
        ((self.rx.capacity() / 2) as u32).min(u32::from(self.cfg.mss))
    }

    /// Window field for an outgoing non-SYN segment; updates RCV.ADV.
    pub(super) fn advertise_window(&mut self) -> u16 {
        let (field, edge) = self.window_to_advertise();
        if let Some(edge) = edge {
            self.rcv_adv = edge;
        }
        field
    }

    /// What [`Connection::advertise_window`] returns, and the new RCV.ADV
    /// if it moves it, without changing anything.
    pub(super) fn window_to_advertise(&self) -> (u16, Option<SeqNumber>) {
        let cur = self.rcv_adv.diff(self.rcv_nxt).max(0) as u32;
        let possible = self.window_possible();
        let mut wnd = possible;
        if wnd > cur && wnd - cur < self.sws_step() {
            // Receiver SWS avoidance: keep the old right edge.
            wnd = cur;
        }
        let s = self.rcv_wscale;
        let mut field = wnd >> s;
        // Never shrink the window (RFC 9293 §3.8.6.2.2) when rounding
        // would, as long as the buffer holds the rounded-up window.
        if (field << s) < cur && ((field + 1) << s) <= possible {
            field += 1;
        }
        let field = field.min(65535);
        let edge = self.rcv_nxt + (field << s);
        let moved = edge.diff(self.rcv_adv) > 0 || self.rcv_adv.diff(self.rcv_nxt) < 0;
        (field as u16, moved.then_some(edge))
    }

    /// SEG.SEQ for a segment without data or FIN (pure ACK, RST): the
    /// RFC's SND.NXT (our SND.MAX, since an RTO rewinds SND.NXT), but not
    /// beyond the right edge of the peer's window as we know it (Linux
    /// tcp_acceptable_seq()), so that the peer's acceptability test admits
    /// it and processes its ACK.
    pub(super) fn acceptable_seq(&self) -> SeqNumber {
        if !self.syn_acked {
            return self.snd_max;
        }
        let edge = self.snd_una + self.snd_wnd;
        if seq_le(self.snd_max, edge) {
            self.snd_max
        } else {
            edge
        }
    }

    /// The window new data may fill outside loss recovery: the peer's
    /// window and cwnd, plus one segment for each of the first two
    /// duplicate ACKs (Limited Transmit, RFC 3042 §2: flight may reach
    /// cwnd + 2·SMSS; cwnd itself is not changed). RFC 6675 §5 wants it
    /// with SACK too; the third duplicate ACK starts recovery instead.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub(super) fn usable_window(&self) -> u32 {
        let mut cwnd = self.cc.window();
        if !self.in_recovery && self.dupacks > 0 && self.dupacks < DUP_THRESH {
            cwnd = cwnd.saturating_add(self.dupacks * self.eff_mss);
        }
        self.snd_wnd.min(cwnd)
    }

    /// SND.NXT and SND.MAX after a segment ending at `end` went out
    /// (`emit_data`, `burst_commit`).
    #[cfg_attr(lazynet_pin, inline(always))]
    pub(super) fn sent_up_to(&mut self, end: SeqNumber) {
        if seq_lt(self.snd_nxt, end) {
            self.snd_nxt = end;
        }
        if seq_lt(self.snd_max, end) {
            self.snd_max = end;
        }
    }

    /// A segment carrying the current ACK went out: nothing is left to
    /// acknowledge (`emit_data`, `burst_commit`).
    #[cfg_attr(lazynet_pin, inline(always))]
    pub(super) fn ack_sent(&mut self) {
        self.ack_now = false;
        self.ack_deadline = None;
        self.unacked_bytes = 0;
        self.last_ack_sent = self.rcv_nxt;
    }

    pub(super) fn repr_base(&self) -> TcpRepr {
        TcpRepr {
            src_port: self.local.port(),
            dst_port: self.remote.port(),
            ..TcpRepr::EMPTY
        }
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(super) fn challenge_ack(&mut self, now: u64) {
        // RFC 5961 §7: a per-connection limit of challenge ACKs per second.
        if now.saturating_sub(self.challenge_start) >= SEC {
            self.challenge_start = now;
            self.challenge_count = 0;
        }
        if self.challenge_count < self.cfg.challenge_ack_limit {
            self.challenge_count += 1;
            self.counters.challenge_acks += 1;
            self.ack_now = true;
        } else {
            self.counters.challenge_suppressed += 1;
        }
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(super) fn negotiate(&mut self, syn: &TcpRepr, now: u64) {
        let peer_mss = u32::from(syn.mss.unwrap_or(DEFAULT_MSS).max(64));
        if self.cfg.window_scale {
            if let Some(s) = syn.window_scale {
                // RFC 7323 §2.3: a shift above 14 is used as 14.
                self.snd_wscale = s.min(14);
                self.rcv_wscale = self.our_wscale;
                self.ws_ok = true;
            }
        }
        if self.cfg.timestamps {
            if let Some(ts) = syn.timestamps {
                self.ts_enabled = true;
                self.ts_recent = ts.tsval;
                self.ts_recent_at = now;
            }
        }
        self.sack_ok = self.cfg.sack && syn.sack_permitted;
        let overhead = if self.ts_enabled { TS_OVERHEAD } else { 0 };
        self.eff_mss = peer_mss
            .min(u32::from(self.cfg.mss))
            .saturating_sub(overhead)
            .max(32);
        self.rcv_mss = self.eff_mss;
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(super) fn on_established(&mut self) {
        self.state = State::Established;
        // RFC 6298 §5.7: after a SYN timeout, data starts with RTO >= 3 s
        // unless an RTT sample was taken since.
        if self.syn_rexmit && self.rtt.srtt().is_none() {
            self.rtt.raise_to(3 * SEC);
        }
        self.retries = 0;
        self.backoff = 0;
    }

    pub(super) fn rtt_sample_ts(&mut self, now: u64, seg: &TcpRepr) -> bool {
        if !self.ts_enabled {
            return false;
        }
        match seg.timestamps {
            Some(ts) if ts.tsecr != 0 => {
                let d = self.ts_now(now).wrapping_sub(ts.tsecr);
                if d < 0x8000_0000 {
                    self.rtt.sample(u64::from(d) * MS);
                }
                true
            }
            _ => false,
        }
    }
}
