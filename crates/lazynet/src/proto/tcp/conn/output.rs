//! Segment output: whether there is anything to send, and building the
//! next segment (SYN, data and FIN, retransmissions in SACK recovery,
//! keep-alives, ACKs and window updates; RFC 9293 §3.8, RFC 5681, RFC 6675
//! NextSeg, RFC 896 Nagle, RFC 1122 SWS avoidance).
//!
//! **Owns:** the choice of the next segment and its header fields.
//! **May not touch:** received segments (`input`).

use super::*;

impl<C: CongestionControl> Connection<C> {
    // ---------------------------------------------------------------
    // Output.

    /// Cheap test whether [`Connection::poll_transmit`]`(now, ..)` could
    /// return a segment: `false` guarantees it would return `None` (a
    /// conservative superset of "it returns `Some`": Nagle and SACK
    /// recovery are not decided here). When it is `false` the caller may
    /// skip `poll_transmit` and call [`Connection::skip_transmit`] instead,
    /// which leaves the connection exactly as the empty `poll_transmit`
    /// would (property-tested in `tests/tcp/prop.rs`).
    #[cfg_attr(lazynet_pin, inline(always))]
    pub fn wants_output(&self, now: u64) -> bool {
        if self.rst_out.is_some()
            || self.ack_now
            || self.ka_now
            || self.ack_deadline.is_some_and(|t| now >= t)
        {
            return true;
        }
        match self.state {
            State::Closed | State::FinWait2 | State::TimeWait => false,
            State::SynSent | State::SynReceived => self.snd_nxt == self.iss,
            State::Established
            | State::CloseWait
            | State::FinWait1
            | State::Closing
            | State::LastAck => {
                if !self.syn_acked {
                    return false;
                }
                if self.rexmit_one || self.probe_now || (self.in_recovery && self.sack_ok) {
                    return true;
                }
                let start = self.data_start();
                let off = self.snd_nxt.diff(start).max(0) as usize;
                let buffered = self.tx.len();
                if off < buffered {
                    // Unsent bytes: only the windows can hold them back.
                    let flight = self.snd_nxt.diff(self.snd_una).max(0) as u32;
                    let win = self.usable_window();
                    if win > flight {
                        return true;
                    }
                }
                // A FIN still to send (also after an RTO rewound SND.NXT).
                self.fin_queued && !self.fin_was_acked && self.snd_nxt.diff(self.fin_seq()) <= 0
            }
        }
    }

    /// What an empty [`Connection::poll_transmit`] does besides returning
    /// `None`: re-arms the timers for the current state (e.g. the persist
    /// timer after `send` into a zero window). Call it instead of
    /// `poll_transmit` when [`Connection::wants_output`] is `false`.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub fn skip_transmit(&mut self, now: u64) {
        self.restart_if_idle(now);
        self.update_timers(now);
    }

    /// The next segment to send, if any: its header is returned and its
    /// payload (`repr.payload_len` bytes) written to the front of
    /// `payload`. Call until `None`.
    pub fn poll_transmit(&mut self, now: u64, payload: &mut [u8]) -> Option<TcpRepr> {
        self.poll_transmit_inner(now, payload, false)
            .map(|(r, _)| r)
    }

    /// [`Connection::poll_transmit`] that also returns the partial checksum
    /// sum of the payload it wrote (congruent mod 0xFFFF to
    /// `wire::checksum::partial(&payload[..repr.payload_len], 0)`, not
    /// always equal to it), computed while copying it: the caller emits
    /// the header with `TcpRepr::emit_header_with_payload_sum` and the
    /// payload is read once.
    pub fn poll_transmit_with_sum(
        &mut self,
        now: u64,
        payload: &mut [u8],
    ) -> Option<(TcpRepr, u32)> {
        self.poll_transmit_inner(now, payload, true)
    }

    #[cfg_attr(lazynet_pin, inline(always))]
    pub(super) fn poll_transmit_inner(
        &mut self,
        now: u64,
        payload: &mut [u8],
        want_sum: bool,
    ) -> Option<(TcpRepr, u32)> {
        if let Some(r) = self.rst_out.take() {
            self.counters.segs_out += 1;
            return Some((r, 0));
        }
        if let Some(t) = self.ack_deadline {
            if now >= t {
                self.ack_deadline = None;
                self.ack_now = true;
            }
        }
        self.restart_if_idle(now);
        let r = match self.state {
            State::Closed => None,
            State::SynSent | State::SynReceived if self.snd_nxt == self.iss => {
                Some((self.emit_syn(now), 0))
            }
            State::SynSent => None,
            _ => self.emit_data(now, payload, want_sum),
        };
        if r.is_some() {
            self.counters.segs_out += 1;
        }
        self.update_timers(now);
        r
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(super) fn emit_syn(&mut self, now: u64) -> TcpRepr {
        let synack = self.state == State::SynReceived;
        if self.snd_max != self.iss {
            self.counters.retransmits += 1;
        } else if !synack || self.rtt_timing.is_none() {
            self.rtt_timing = Some((self.iss + 1, now));
        }
        let mut r = TcpRepr {
            seq: self.iss,
            flags: TcpFlags::SYN,
            // RFC 7323 §2.2: the SYN window is never scaled.
            window: self.rx.free().min(65535) as u16,
            mss: Some(self.cfg.mss),
            ..self.repr_base()
        };
        if synack {
            r.flags |= TcpFlags::ACK;
            r.ack = self.rcv_nxt;
            // RFC 7323 §2.2: only in answer to a SYN that carried it.
            if self.ws_ok {
                r.window_scale = Some(self.our_wscale);
            }
            r.sack_permitted = self.sack_ok;
            r.timestamps = self.timestamps(now);
            self.rcv_adv = self.rcv_nxt + u32::from(r.window);
            self.last_ack_sent = self.rcv_nxt;
            self.ack_now = false;
        } else {
            r.window_scale = self.cfg.window_scale.then_some(self.our_wscale);
            r.sack_permitted = self.cfg.sack;
            if self.cfg.timestamps {
                r.timestamps = Some(Timestamps {
                    tsval: self.ts_now(now),
                    tsecr: 0,
                });
            }
        }
        self.snd_nxt = self.iss + 1;
        if self.snd_max == self.iss {
            self.snd_max = self.snd_nxt;
        }
        r
    }

    /// What to send next at SND.NXT outside recovery: new data within the
    /// usable window, Nagle and SWS avoidance applied, or a zero-window
    /// probe. `sack` is (cwnd − pipe, NextSeg) in SACK recovery.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub(super) fn pick_new(
        &mut self,
        start: SeqNumber,
        buffered: usize,
        cap: usize,
        sack: Option<(u32, NextSeg)>,
    ) -> Pick {
        let mss = self.eff_mss as usize;
        let seq = self.snd_nxt;
        let off = seq.diff(start).max(0) as usize;
        let unsent = buffered.saturating_sub(off);
        let flight = seq.diff(self.snd_una).max(0) as u32;
        let usable = match sack {
            // RFC 6675 NextSeg rule 2: new data within cwnd − pipe.
            Some((room, NextSeg::NewData)) => {
                room.min(self.snd_wnd.saturating_sub(flight)) as usize
            }
            Some(_) => 0,
            None => self.usable_window().saturating_sub(flight) as usize,
        };
        let mut len = unsent.min(usable).min(mss);
        let mut probe = false;
        if len == 0 && unsent > 0 && self.probe_now && self.snd_wnd == 0 {
            // RFC 9293 §3.8.6.1: zero-window probe of one byte.
            len = 1.min(cap);
            probe = true;
        }
        if len > 0 && len < mss && !probe {
            // Nagle (RFC 9293 §3.7.4) and sender SWS avoidance
            // (§3.8.6.2.1): send a short segment only if it empties the
            // buffer and nothing is in flight (or no-delay), or it is at
            // least half the largest window the peer offered.
            // With nothing in flight, a window-limited short segment
            // goes anyway: no ACK could otherwise open the window (the
            // role of §3.8.6.2.1's override timeout).
            let all = len == unsent;
            let ok = (all && (self.cfg.nodelay || flight == 0))
                || (self.max_snd_wnd > 0 && len as u32 >= self.max_snd_wnd / 2)
                || (flight == 0 && len == usable);
            if !ok {
                len = 0;
            }
        }
        // The caller's buffer limits the segment, not the decision.
        len = len.min(cap);
        let fin = self.fin_queued
            && !self.fin_was_acked
            && off + len == buffered
            && seq.diff(self.fin_seq()) <= 0;
        Pick {
            seq,
            len,
            fin,
            is_rexmit: (len > 0 || fin) && seq_lt(seq, self.snd_max),
            probe,
            sack_next: sack.map_or(NextSeg::Nothing, |s| s.1),
            sack_recovery: sack.is_some(),
        }
    }

    /// What to send in loss recovery: the fast retransmission or NewReno
    /// partial-ACK resend at SND.UNA, or (RFC 6675 §5 (C)) what NextSeg
    /// chooses while cwnd − pipe >= 1 SMSS.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(super) fn pick_in_recovery(
        &mut self,
        start: SeqNumber,
        buffered: usize,
        cap: usize,
    ) -> Pick {
        let mss = self.eff_mss as usize;
        let sack_recovery = self.in_recovery && self.sack_ok;
        let fin_at = |c: &Self, seq: SeqNumber, len: usize| {
            c.fin_queued && seq + len as u32 == c.fin_seq() && c.snd_max.diff(c.fin_seq()) > 0
        };
        if self.rexmit_one {
            // Fast retransmit / NewReno partial ACK: resend at SND.UNA
            // (RFC 6675 step 4.3: not into SACKed data).
            self.rexmit_one = false;
            let seq = self.snd_una;
            let off = seq.diff(start).max(0) as usize;
            let mut max = mss;
            if let (true, Some(l)) = (sack_recovery, self.sb.first_start()) {
                max = max.min(l.diff(seq).max(0) as usize);
            }
            let len = max.min(buffered.saturating_sub(off)).min(cap);
            return Pick::resend(
                seq,
                len,
                fin_at(self, seq, len),
                NextSeg::Nothing,
                sack_recovery,
            );
        }
        // `sack_recovery` holds here. `room` is cwnd − pipe.
        let room =
            self.cc
                .window()
                .saturating_sub(self.sb.pipe(self.snd_una, self.snd_max, self.eff_mss));
        let mut next = NextSeg::Nothing;
        if room >= self.eff_mss {
            let flight = self.snd_nxt.diff(self.snd_una).max(0) as u32;
            let new_ok = self.has_unsent() && self.snd_wnd > flight;
            next = self
                .sb
                .next_seg(self.snd_una, self.snd_max, self.eff_mss, new_ok);
        }
        if let NextSeg::Retransmit { seq, len: l, .. } | NextSeg::Rescue { seq, len: l } = next {
            // RFC 6675 NextSeg rules 1, 3, 4: a hole below SND.MAX.
            let off = seq.diff(start).max(0) as usize;
            let len = (l as usize).min(buffered.saturating_sub(off)).min(cap);
            return Pick::resend(seq, len, fin_at(self, seq, len), next, true);
        }
        self.pick_new(start, buffered, cap, Some((room, next)))
    }

    /// RFC 9293 §3.8.4: a keep-alive carries SEG.SEQ = SND.NXT - 1 and no
    /// data, which the peer must answer with an ACK.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(super) fn emit_keepalive(&mut self, now: u64) -> (TcpRepr, u32) {
        let window = self.advertise_window();
        let r = TcpRepr {
            seq: self.snd_una - 1,
            ack: self.rcv_nxt,
            flags: TcpFlags::ACK,
            window,
            timestamps: self.timestamps(now),
            ..self.repr_base()
        };
        self.counters.keepalives += 1;
        self.ack_now = false;
        self.ack_deadline = None;
        self.last_ack_sent = self.rcv_nxt;
        (r, 0)
    }

    /// RFC 2018 §4: the SACK blocks of the out-of-order queue, most recent
    /// first; 3 fit with timestamps.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(super) fn sack_blocks(&self) -> SackBlocks {
        let max = if self.ts_enabled { 3 } else { 4 };
        let mut blocks = [(SeqNumber(0), SeqNumber(0)); MAX_INTERVALS];
        let k = self.ooo.by_recency(max, &mut blocks);
        SackBlocks::new(&blocks[..k]).unwrap_or(SackBlocks::EMPTY)
    }

    /// The bookkeeping of a retransmission ending at `end`.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(super) fn note_retransmit(&mut self, p: &Pick, end: SeqNumber) {
        if p.sack_recovery {
            // RFC 6675 (C.2) and step 4.3: HighRxt (and the first
            // time RescueRxt); rule 4 sets RescueRxt = RecoveryPoint
            // and leaves HighRxt alone.
            match p.sack_next {
                NextSeg::Rescue { .. } => {
                    self.sb.rescued(self.recover);
                    self.counters.sack_retransmits += 1;
                }
                NextSeg::Retransmit { .. } => {
                    self.sb.retransmitted(end);
                    self.counters.sack_retransmits += 1;
                }
                _ => self.sb.retransmitted(end),
            }
        }
        self.counters.retransmits += 1;
        if self.rtt_timing.is_some_and(|(e, _)| seq_lt(p.seq, e)) {
            self.rtt_timing = None;
        }
    }

    #[cfg_attr(lazynet_pin, inline(always))]
    pub(super) fn emit_data(
        &mut self,
        now: u64,
        payload: &mut [u8],
        want_sum: bool,
    ) -> Option<(TcpRepr, u32)> {
        let can_send = self.may_send_data();
        let start = self.data_start();
        let buffered = self.tx.len();
        let p = if !can_send {
            Pick::nothing(self.snd_nxt)
        } else if self.rexmit_one || (self.in_recovery && self.sack_ok) {
            self.pick_in_recovery(start, buffered, payload.len())
        } else {
            self.pick_new(start, buffered, payload.len(), None)
        };
        if p.probe {
            self.probe_now = false;
            self.counters.window_probes += 1;
        }
        if self.ka_now {
            self.ka_now = false;
            if p.len == 0 && !p.fin {
                return Some(self.emit_keepalive(now));
            }
        }
        let (mut seq, mut fin) = (p.seq, p.fin);
        if p.len == 0 && !fin && !self.ack_now {
            return None;
        }
        let off = seq.diff(start).max(0) as usize;
        // SACK blocks ride in the header: the text shrinks by their room
        // (RFC 9293 §3.7.1: the MSS counts no options; with path MTU
        // discovery a full segment plus blocks would exceed the path).
        let sack = if self.sack_ok && !self.ooo.is_empty() {
            self.sack_blocks()
        } else {
            SackBlocks::EMPTY
        };
        let plen = if sack.is_empty() {
            p.len
        } else {
            let room = (2 + 8 * sack.len() + 3) & !3;
            let cut = p
                .len
                .min((self.eff_mss as usize).saturating_sub(room).max(1));
            fin &= cut == p.len;
            cut
        };
        let (len, payload_sum) = if plen == 0 {
            (0, 0)
        } else if want_sum {
            self.tx.peek_with_sum(off, &mut payload[..plen], 0)
        } else {
            (self.tx.peek(off, &mut payload[..plen]), 0)
        };
        if len == 0 && !fin {
            // Not the rewound SND.NXT: after an RTO a lower number could
            // fall left of the peer's window, be unacceptable, and its ACK
            // never processed (found by tcp_sim: ACK ping-pong until both
            // sides timed out).
            seq = self.acceptable_seq();
        }
        let mut flags = TcpFlags::ACK;
        if fin {
            flags |= TcpFlags::FIN;
        }
        if len > 0 && off + len == buffered {
            flags |= TcpFlags::PSH;
        }
        let window = self.advertise_window();
        let mut r = TcpRepr {
            seq,
            ack: self.rcv_nxt,
            flags,
            window,
            payload_len: len,
            ..self.repr_base()
        };
        r.timestamps = self.timestamps(now);
        r.sack = sack;
        // Sequence bookkeeping.
        let end = seq + len as u32 + u32::from(fin);
        if len > 0 || fin {
            if p.is_rexmit {
                self.note_retransmit(&p, end);
            } else if self.rtt_timing.is_none() && !self.ts_enabled {
                self.rtt_timing = Some((end, now));
            }
            self.sent_up_to(end);
        }
        self.ack_sent();
        Some((r, payload_sum))
    }
}
