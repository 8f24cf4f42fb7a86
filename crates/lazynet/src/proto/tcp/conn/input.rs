//! Segment input (RFC 9293 §3.10.7): SYN-SENT, then the synchronized
//! states' sequence of checks, ACK processing (RFC 5681, RFC 6675 SACK
//! recovery, RFC 7323 timestamps), text and FIN.
//!
//! **Owns:** what one received segment does to the TCB.
//! **May not touch:** building segments (`output`); header prediction is
//! `fast`'s, tried first.

use super::*;

impl<C: CongestionControl> Connection<C> {
    // ---------------------------------------------------------------
    // Input (RFC 9293 §3.10.7).

    /// Processes one received segment of this connection. `seg` was
    /// parsed from a checksum-verified segment and `payload` is its data.
    /// Returns why (part of) it was discarded; every drop is also counted.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub fn handle_segment(
        &mut self,
        now: u64,
        seg: &TcpRepr,
        payload: &[u8],
    ) -> Result<(), TcpDrop> {
        self.counters.segs_in += 1;
        if self.cfg.fast_path && self.fast_path(now, seg, payload) {
            return Ok(());
        }
        let r = self.segment_inner(now, seg, payload);
        if let Err(d) = r {
            self.counters.drops[d as usize] += 1;
        }
        self.update_timers(now);
        r
    }

    #[cfg_attr(lazynet_pin, inline(always))]
    pub(super) fn segment_inner(
        &mut self,
        now: u64,
        seg: &TcpRepr,
        payload: &[u8],
    ) -> Result<(), TcpDrop> {
        if payload.len() != seg.payload_len {
            return Err(TcpDrop::BadLength);
        }
        if seg.src_port != self.remote.port() || seg.dst_port != self.local.port() {
            return Err(TcpDrop::WrongPorts);
        }
        match self.state {
            State::Closed => Err(TcpDrop::Closed),
            State::SynSent => self.on_syn_sent(now, seg, payload),
            _ => self.on_synchronized(now, seg, payload),
        }
    }

    /// RFC 9293 §3.10.7.3.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(super) fn on_syn_sent(
        &mut self,
        now: u64,
        seg: &TcpRepr,
        payload: &[u8],
    ) -> Result<(), TcpDrop> {
        let f = seg.flags;
        if f.contains(TcpFlags::ACK) {
            // "If SEG.ACK =< ISS or SEG.ACK > SND.NXT, send a reset
            // (unless the RST bit is set) and discard the segment."
            if seq_le(seg.ack, self.iss) || seg.ack.diff(self.snd_max) > 0 {
                if !f.contains(TcpFlags::RST) {
                    self.rst_out = Some(TcpRepr {
                        seq: seg.ack,
                        flags: TcpFlags::RST,
                        ..self.repr_base()
                    });
                }
                return Err(TcpDrop::SynSentBadAck);
            }
        }
        if f.contains(TcpFlags::RST) {
            // RFC 5961 §3.2 for SYN-SENT: acceptable iff the ACK acks our SYN.
            if f.contains(TcpFlags::ACK) {
                self.error = Some(ConnError::Refused);
                self.enter_closed();
                return Ok(());
            }
            return Err(TcpDrop::SynSentRstNoAck);
        }
        if !f.contains(TcpFlags::SYN) {
            return Err(TcpDrop::SynSentNoSyn);
        }
        self.irs = seg.seq;
        self.rcv_nxt = seg.seq + 1;
        // The window our SYN advertised (unscaled).
        self.rcv_adv = self.rcv_nxt + self.rx.free().min(65535) as u32;
        self.negotiate(seg, now);
        // RFC 7323 §2.2: the window in a SYN is not scaled.
        self.snd_wnd = u32::from(seg.window);
        self.max_snd_wnd = self.snd_wnd;
        self.snd_wl1 = seg.seq;
        self.snd_wl2 = seg.ack;
        if f.contains(TcpFlags::ACK) {
            self.snd_una = seg.ack;
            self.drained_at = now;
            self.syn_acked = true;
            self.cc.on_established(self.eff_mss);
            if self.snd_nxt.diff(self.snd_una) < 0 {
                self.snd_nxt = self.snd_una;
            }
            if !self.rtt_sample_ts(now, seg) {
                if let Some((_, t)) = self.rtt_timing.take() {
                    self.rtt.sample(now.saturating_sub(t));
                }
            }
            self.rtt_timing = None;
            self.rtx = Timer::Idle;
            self.on_established();
            self.ack_now = true;
        } else {
            // Simultaneous open: "enter SYN-RECEIVED, form a SYN,ACK".
            self.state = State::SynReceived;
            self.snd_nxt = self.iss;
            self.rtt_timing = None;
        }
        if !payload.is_empty() {
            self.process_data(now, seg.seq + 1, payload);
        }
        if f.contains(TcpFlags::FIN) {
            self.process_fin(now, seg.seq + 1 + payload.len() as u32);
        }
        Ok(())
    }

    /// RFC 9293 §3.10.7.4 for SYN-RECEIVED and the synchronized states.
    pub(super) fn on_synchronized(
        &mut self,
        now: u64,
        seg: &TcpRepr,
        payload: &[u8],
    ) -> Result<(), TcpDrop> {
        let mut trimmed;
        let mut seg = seg;
        // Simultaneous open (RFC 9293 §3.5 Figure 7): the peer's SYN-ACK
        // repeats its SYN; only the new part (the ACK) is processed.
        if self.state == State::SynReceived
            && seg.flags.contains(TcpFlags::SYN | TcpFlags::ACK)
            && !seg.flags.contains(TcpFlags::RST)
            && seg.seq == self.irs
        {
            trimmed = *seg;
            trimmed.flags = trimmed.flags & !TcpFlags::SYN;
            trimmed.seq = seg.seq + 1;
            seg = &trimmed;
        }
        let f = seg.flags;
        let rst = f.contains(TcpFlags::RST);
        // A retransmitted SYN of the handshake in progress: resend SYN-ACK.
        if self.state == State::SynReceived
            && f.contains(TcpFlags::SYN)
            && !f.intersects(TcpFlags::ACK | TcpFlags::RST)
            && seg.seq == self.irs
        {
            self.snd_nxt = self.iss;
            return Ok(());
        }
        // RFC 7323 §5.3 R1: PAWS.
        if self.ts_enabled && !rst {
            if let Some(ts) = seg.timestamps {
                let older = (ts.tsval.wrapping_sub(self.ts_recent) as i32) < 0;
                if older && now.saturating_sub(self.ts_recent_at) <= PAWS_IDLE {
                    self.ack_now = true;
                    return Err(TcpDrop::Paws);
                }
            }
        }
        // First: sequence number acceptability.
        let seg_len = payload.len() as u32
            + u32::from(f.contains(TcpFlags::SYN))
            + u32::from(f.contains(TcpFlags::FIN));
        let wnd = self.rcv_adv.diff(self.rcv_nxt).max(0) as u32;
        let wnd_end = self.rcv_nxt + wnd;
        let acceptable = match (seg_len, wnd) {
            (0, 0) => seg.seq == self.rcv_nxt,
            // Deviation (as Linux tcp_sequence()): a zero-length non-RST
            // segment exactly at the right edge is accepted. A peer whose
            // data filled our window sends its ACKs with SEG.SEQ = SND.NXT
            // = our right edge; dropping them can deadlock two peers that
            // both filled each other's window (found by tcp_sim).
            (0, _) if !rst && seg.seq == wnd_end => true,
            (0, _) => seg.seq.in_window(self.rcv_nxt, wnd_end),
            (_, 0) => false,
            _ => {
                seg.seq.in_window(self.rcv_nxt, wnd_end)
                    || (seg.seq + (seg_len - 1)).in_window(self.rcv_nxt, wnd_end)
            }
        };
        // RFC 9293: with a zero window, still process valid ACKs and RSTs
        // of a segment starting at RCV.NXT; its text is trimmed away.
        let zero_wnd_at_edge = wnd == 0 && seg.seq == self.rcv_nxt;
        if !acceptable && !zero_wnd_at_edge {
            if !rst {
                self.ack_now = true;
            }
            // RFC 9293 §3.10.7.4 TIME-WAIT: a retransmitted remote FIN is
            // acknowledged and restarts the 2·MSL timeout.
            if self.state == State::TimeWait
                && f.contains(TcpFlags::FIN)
                && seg.seq + payload.len() as u32 + 1 == self.rcv_nxt
            {
                self.tw_deadline = Some(now.saturating_add(self.cfg.time_wait));
            }
            return Err(TcpDrop::NotAcceptable);
        }
        // Second: RST (RFC 5961 §3.2).
        if rst {
            if seg.seq == self.rcv_nxt {
                match self.state {
                    // RFC 9293 §3.10.7.4: from an active OPEN the
                    // connection was refused.
                    State::SynReceived if self.active_open => self.error = Some(ConnError::Refused),
                    State::SynReceived
                    | State::Established
                    | State::FinWait1
                    | State::FinWait2
                    | State::CloseWait => self.error = Some(ConnError::Reset),
                    _ => {}
                }
                self.enter_closed();
                return Ok(());
            }
            self.challenge_ack(now);
            return Err(TcpDrop::RstChallenged);
        }
        // Fourth: SYN (RFC 5961 §4.2).
        if f.contains(TcpFlags::SYN) {
            self.challenge_ack(now);
            return Err(TcpDrop::SynChallenged);
        }
        // Fifth: ACK.
        if !f.contains(TcpFlags::ACK) {
            return Err(TcpDrop::NoAck);
        }
        if self.state == State::SynReceived {
            if seg.ack.diff(self.snd_una) > 0 && seg.ack.diff(self.snd_max) <= 0 {
                self.snd_wnd = u32::from(seg.window) << self.snd_wscale;
                self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
                self.snd_wl1 = seg.seq;
                self.snd_wl2 = seg.ack;
                self.on_established();
            } else {
                self.rst_out = Some(TcpRepr {
                    seq: seg.ack,
                    flags: TcpFlags::RST,
                    ..self.repr_base()
                });
                return Err(TcpDrop::SynRcvdBadAck);
            }
        }
        // RFC 5961 §5.2: (SND.UNA - MAX.SND.WND) <= SEG.ACK <= SND.NXT.
        if seg.ack.diff(self.snd_max) > 0 || seg.ack.diff(self.snd_una - self.max_snd_wnd) < 0 {
            self.challenge_ack(now);
            return Err(TcpDrop::AckUnacceptable);
        }
        // RFC 7323 §4.3: update TS.Recent.
        if let (true, Some(ts)) = (self.ts_enabled, seg.timestamps) {
            if seq_le(seg.seq, self.last_ack_sent)
                && (ts.tsval.wrapping_sub(self.ts_recent) as i32) >= 0
            {
                self.ts_recent = ts.tsval;
                self.ts_recent_at = now;
            }
        }
        self.last_rx = now;
        self.ka_sent = 0;
        self.established_in_order_or(now, seg, payload)
    }

    /// Steps five to eight for a segment that passed the checks. An
    /// ESTABLISHED in-order segment without FIN goes through
    /// [`Self::established_in_order`]; everything else runs the full
    /// sequence. Both share the same helpers, so the slow path stays the
    /// single source of truth (the predicted subset is in `fast.rs`).
    pub(super) fn established_in_order_or(
        &mut self,
        now: u64,
        seg: &TcpRepr,
        payload: &[u8],
    ) -> Result<(), TcpDrop> {
        if self.state == State::Established
            && seg.seq == self.rcv_nxt
            && !seg
                .flags
                .intersects(TcpFlags::FIN | TcpFlags::SYN | TcpFlags::RST)
        {
            self.established_in_order(now, seg, payload);
            return Ok(());
        }
        self.process_ack(now, seg, payload.len());
        match self.state {
            State::FinWait1 if self.fin_acked() => {
                self.state = State::FinWait2;
                if self.orphaned {
                    self.arm_fin_timeout(now);
                }
            }
            State::Closing if self.fin_acked() => {
                self.enter_time_wait(now);
            }
            State::LastAck if self.fin_acked() => {
                self.enter_closed();
                return Ok(());
            }
            _ => {}
        }
        // Seventh: segment text.
        if self.orphaned && self.new_text(seg.seq, payload.len()) {
            // RFC 1122 §4.2.2.13: nobody will read it; tell the peer.
            self.counters.data_after_close += 1;
            self.abort();
            return Ok(());
        }
        if !payload.is_empty() {
            if matches!(
                self.state,
                State::Established | State::FinWait1 | State::FinWait2
            ) && !self.fin_rcvd
            {
                self.process_data(now, seg.seq, payload);
            } else {
                // After the peer's FIN no text can be valid; ACK it.
                self.ack_now = true;
            }
        }
        // Eighth: FIN.
        if seg.flags.contains(TcpFlags::FIN) {
            self.process_fin(now, seg.seq + payload.len() as u32);
        }
        Ok(())
    }

    /// ESTABLISHED, `SEG.SEQ == RCV.NXT`, ACK set, no SYN/FIN/RST, all
    /// checks passed: a pure ACK and/or in-order data. `fast.rs` handles
    /// the predicted part of this without the rare branches.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub(super) fn established_in_order(&mut self, now: u64, seg: &TcpRepr, payload: &[u8]) {
        self.process_ack(now, seg, payload.len());
        if !payload.is_empty() {
            self.process_data(now, seg.seq, payload);
        }
    }

    pub(super) fn process_ack(&mut self, now: u64, seg: &TcpRepr, payload_len: usize) {
        let ack = seg.ack;
        let mss = self.eff_mss;
        if ack.diff(self.snd_una) > 0 {
            let mut acked = ack.diff(self.snd_una) as u32;
            if !self.syn_acked {
                self.syn_acked = true;
                acked -= 1;
                self.cc.on_established(mss);
            }
            let data = (acked as usize).min(self.tx.len());
            self.tx.consume(data);
            if self.orphaned && self.tx.is_empty() {
                // Everything acknowledged: nothing of the send buffer is
                // needed again.
                self.tx.shrink_to_len();
            }
            if acked as usize > data && self.fin_queued {
                self.fin_was_acked = true;
            }
            self.snd_una = ack;
            if self.snd_nxt.diff(self.snd_una) < 0 {
                self.snd_nxt = self.snd_una;
            }
            if ack == self.snd_max {
                self.drained_at = now;
            }
            // RTT: timestamps (RFC 7323 §4.1) or one timed segment (Karn).
            // After an RTO, ACKs up to what was outstanding then may echo
            // a TSval from before the timeout (the peer does not update
            // TS.Recent from our go-back-N duplicates), which would fold
            // the whole backoff into SRTT: no TS samples until past it
            // (found by tcp_sim: SRTT of 2 s on a 100 ms path).
            let stale = match self.ts_stale_until {
                Some(h) if seq_le(ack, h) => true,
                Some(_) => {
                    self.ts_stale_until = None;
                    false
                }
                None => false,
            };
            if stale {
                // Neither sample: Karn's rule covers the timed segment.
            } else if !self.rtt_sample_ts(now, seg) {
                if let Some((end, t)) = self.rtt_timing {
                    if seq_le(end, ack) {
                        self.rtt.sample(now.saturating_sub(t));
                        self.rtt_timing = None;
                    }
                }
            }
            self.backoff = 0;
            self.retries = 0;
            // RFC 6298 §5.3: restart the timer when new data is acked.
            self.rtx = Timer::Idle;
            // RFC 6675 §5: "If the incoming ACK is a cumulative
            // acknowledgment, the TCP MUST reset DupAcks to zero"; the
            // scoreboard forgets what is now acknowledged, then takes the
            // ACK's blocks.
            self.sb.advance(ack);
            self.sack_update(seg);
            if self.in_recovery {
                if ack.diff(self.recover) >= 0 {
                    // RFC 6582 §3.2 step 3: full acknowledgment; RFC 6675
                    // §5 (A): an ACK beyond RecoveryPoint ends recovery.
                    self.in_recovery = false;
                    self.dupacks = 0;
                    let flight = self.flight();
                    self.cc.on_recovery_exit(flight, mss);
                } else if self.sack_ok {
                    // RFC 6675 §5 (B): the window stays at ssthresh;
                    // poll_transmit sends per NextSeg while cwnd − pipe
                    // >= 1 SMSS (C). Without any SACK information the
                    // scoreboard has no hole to offer: resend the segment
                    // at SND.UNA as RFC 6582 step 5 would, in place of
                    // NextSeg rule 4's rescue (which would repeat it).
                    self.dupacks = 0;
                    if self.sb.is_empty() {
                        self.rexmit_one = true;
                        self.sb.rescued(self.recover);
                    }
                } else {
                    // Step 5: partial ACK: retransmit the next hole.
                    self.cc.on_partial_ack(acked, mss);
                    self.rexmit_one = true;
                }
            } else {
                self.dupacks = 0;
                if let Some(srtt) = self.rtt.srtt() {
                    self.cc.on_rtt(srtt);
                }
                self.cc.on_ack(now, acked, mss);
                // RFC 6675 §5 step (2): IsLost(HighACK + 1) also starts
                // recovery.
                self.maybe_enter_sack_recovery(now);
            }
        } else if ack == self.snd_una {
            // RFC 5681 §2 "duplicate acknowledgment"; with SACK, RFC 6675
            // §2: an ACK that SACKs new data (the window may differ).
            let new_sack = self.sack_update(seg);
            let f = seg.flags;
            let same_window = (u32::from(seg.window) << self.snd_wscale) == self.snd_wnd;
            // Answers to zero-window probes are not duplicate ACKs.
            if self.snd_max != self.snd_una
                && self.snd_wnd != 0
                && payload_len == 0
                && !f.intersects(TcpFlags::SYN | TcpFlags::FIN)
                && (new_sack || (same_window && (!self.sack_ok || seg.sack.is_empty())))
            {
                self.dupacks += 1;
                if self.sack_ok {
                    // RFC 6675 §5 steps (1), (2); in recovery, pipe
                    // accounts for the ACK (no window inflation).
                    self.maybe_enter_sack_recovery(now);
                } else if self.in_recovery {
                    self.cc.on_dup_ack_in_recovery(mss);
                } else if self.dupacks == 3 && ack.diff(self.recover) > 0 {
                    // RFC 6582 §3.2 step 2: enter fast recovery.
                    self.in_recovery = true;
                    self.recover = self.snd_max;
                    let flight = self.flight();
                    self.cc.on_fast_retransmit(now, flight, mss);
                    self.rexmit_one = true;
                    self.rtt_timing = None;
                    self.counters.fast_retransmits += 1;
                }
            } else if new_sack {
                // Not a duplicate ACK (it carries data, or the window
                // moved), but its SACK blocks may make IsLost(HighACK + 1)
                // true: RFC 6675 §5 step (2).
                self.maybe_enter_sack_recovery(now);
            }
            if self.snd_wnd == 0 {
                // The peer answers our probes: it is alive.
                self.retries = 0;
            }
        }
        // RFC 9293 §3.10.7.4: update the send window.
        if seq_lt(self.snd_wl1, seg.seq) || (self.snd_wl1 == seg.seq && seq_le(self.snd_wl2, ack)) {
            let old = self.snd_wnd;
            self.snd_wnd = u32::from(seg.window) << self.snd_wscale;
            self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = ack;
            if old == 0 && self.snd_wnd > 0 {
                // The window reopened: resend the probe byte if unacked.
                self.probe_now = false;
                self.snd_nxt = self.snd_una;
                self.backoff = 0;
                self.rtx = Timer::Idle;
            }
        }
    }

    /// RFC 6675 §4 `Update()` with the SACK blocks of `seg` (if SACK was
    /// negotiated); true if they SACKed new data.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(super) fn sack_update(&mut self, seg: &TcpRepr) -> bool {
        if !self.sack_ok || !self.syn_acked || seg.sack.is_empty() {
            return false;
        }
        let u = self
            .sb
            .update(self.snd_una, self.snd_max, seg.sack.as_slice());
        self.counters.sack_ignored += u64::from(u.ignored);
        self.counters.sack_overflow += u64::from(u.overflow);
        u.new_data
    }

    /// RFC 6675 §5 steps (1), (2) and (4): with SACK, enter loss recovery
    /// on DupThresh duplicate ACKs or when IsLost(HighACK + 1), unless a
    /// recovery (or an RTO, §5.1) is still covering SND.UNA.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(super) fn maybe_enter_sack_recovery(&mut self, now: u64) {
        let mss = self.eff_mss;
        if !self.sack_ok
            || self.in_recovery
            || !self.syn_acked
            || self.snd_max == self.snd_una
            // "the cumulative acknowledgment point is beyond the last
            // value of RecoveryPoint" (§5; §5.1 after an RTO).
            || self.snd_una.diff(self.recover) < 0
            || (self.dupacks < DUP_THRESH && !self.sb.is_lost(self.snd_una, mss))
        {
            return;
        }
        // (4.1) RecoveryPoint = HighData.
        self.in_recovery = true;
        self.recover = self.snd_max;
        // (4.2) ssthresh and cwnd, by the controller.
        let flight = self.flight();
        self.cc.on_enter_recovery(now, flight, mss);
        // (4.3) retransmit the first segment at HighACK; HighRxt and
        // RescueRxt follow from it when it is sent.
        self.sb.start_recovery(self.snd_una);
        self.rexmit_one = true;
        self.rtt_timing = None;
        self.counters.fast_retransmits += 1;
    }

    /// Whether `len` bytes of text at `seq` reach beyond RCV.NXT.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(super) fn new_text(&self, seq: SeqNumber, len: usize) -> bool {
        len > 0 && (seq + len as u32).diff(self.rcv_nxt) > 0
    }

    /// Seventh step: queue text in order, or out of order into the
    /// interval set (RFC 9293 §3.10.7.4; immediate ACK per RFC 5681 §4.2).
    pub(super) fn process_data(&mut self, now: u64, seq: SeqNumber, payload: &[u8]) {
        let mut s = seq;
        let mut data = payload;
        if seq_lt(s, self.rcv_nxt) {
            let cut = self.rcv_nxt.diff(s) as usize;
            if cut >= data.len() {
                self.ack_now = true;
                return;
            }
            data = &data[cut..];
            s = self.rcv_nxt;
        }
        // Accept only up to the right edge we advertised.
        let wnd = self.rcv_adv.diff(self.rcv_nxt).max(0) as usize;
        let off = s.diff(self.rcv_nxt) as usize;
        if off >= wnd {
            self.ack_now = true;
            return;
        }
        let data = &data[..data.len().min(wnd - off)];
        self.rcv_mss = self
            .rcv_mss
            .max(data.len() as u32)
            .min(u32::from(self.cfg.mss));
        if off == 0 {
            let n = self.rx.write_at(0, data);
            self.rx.commit(n);
            self.rcv_nxt += n as u32;
            let had_ooo = !self.ooo.is_empty();
            let nxt = self.ooo.advance(self.rcv_nxt);
            let extra = nxt.diff(self.rcv_nxt).max(0) as usize;
            self.rx.commit(extra);
            self.rcv_nxt = nxt;
            if had_ooo {
                // Gap filled (partly): ACK at once.
                self.ack_now = true;
            } else {
                self.unacked_bytes = self.unacked_bytes.saturating_add(n as u32);
                if self.unacked_bytes >= 2 * self.rcv_mss {
                    // RFC 5681 §4.2: ACK at least every second full segment.
                    self.ack_now = true;
                } else if self.ack_deadline.is_none() {
                    self.ack_deadline = Some(now.saturating_add(self.cfg.ack_delay));
                }
            }
        } else {
            let n = self.rx.write_at(off, data);
            if n > 0 && !self.ooo.add(s, s + n as u32) {
                self.counters.ooo_dropped += 1;
            }
            self.ack_now = true;
        }
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(super) fn process_fin(&mut self, now: u64, fin_seq: SeqNumber) {
        if self.fin_rcvd {
            // A retransmitted FIN: ACK it; in TIME-WAIT restart 2·MSL.
            if fin_seq + 1 == self.rcv_nxt {
                self.ack_now = true;
                if self.state == State::TimeWait {
                    self.tw_deadline = Some(now.saturating_add(self.cfg.time_wait));
                }
            }
            return;
        }
        if fin_seq != self.rcv_nxt {
            // Out of order FIN: the text before it is missing.
            self.ack_now = true;
            return;
        }
        self.fin_rcvd = true;
        self.rcv_nxt += 1;
        // The FIN takes no buffer space: keep the window's size.
        self.rcv_adv += 1;
        self.ack_now = true;
        match self.state {
            State::SynReceived | State::Established => self.state = State::CloseWait,
            State::FinWait1 => {
                if self.fin_acked() {
                    self.enter_time_wait(now);
                } else {
                    self.state = State::Closing;
                }
            }
            State::FinWait2 => self.enter_time_wait(now),
            _ => {}
        }
    }
}
