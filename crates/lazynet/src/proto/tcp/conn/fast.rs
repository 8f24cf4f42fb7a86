//! Header prediction: the ESTABLISHED fast path (Van Jacobson, "4BSD
//! header prediction", 1990; Linux `tcp_rcv_established()`).
//!
//! [`Connection::handle_segment`] first asks [`Connection::fast_path`]
//! whether the segment is the one the steady state predicts. If so, it is
//! handled here in a few dozen instructions; if not, nothing was changed
//! and the full RFC 9293 §3.10.7.4 sequence in `input` (the slow path,
//! the single source of truth) runs instead. The fast path is a subset of
//! the slow path: for every segment it admits, it leaves the TCB exactly
//! as the slow path would (`tests/tcp/fastpath.rs` checks this
//! differentially, with `Config::fast_path` off as the reference).
//!
//! # When prediction is on
//!
//! All of the following hold (one comparison chain, no precomputed flag
//! word: the prediction is derived from the TCB each time, so no slow-path
//! branch has to remember to switch it off or on again):
//!
//! - state ESTABLISHED (so the SYN is acked, no FIN was sent or received);
//! - `Config::fast_path` is set;
//! - flags exactly ACK, or ACK|PSH (no SYN, FIN, RST, URG, ECE, CWR);
//! - `SEG.SEQ == RCV.NXT`, ports and payload length as the slow path's
//!   first checks require;
//! - the scaled window equals SND.WND and is not zero (no window update,
//!   no zero-window probing; RFC 9293 §3.8.6.1);
//! - no SACK blocks;
//! - timestamps, if negotiated, present with `TSval >= TS.Recent` (PAWS,
//!   RFC 7323 §5.3, passes trivially);
//! - not in loss recovery (RFC 6582 or RFC 6675), the SACK scoreboard
//!   empty, and `SND.NXT == SND.MAX` (not resending after an RTO, no
//!   probe rewound SND.NXT);
//! - `SND.UNA <= SEG.ACK <= SND.MAX` and the segment does something:
//!   - `SEG.ACK > SND.UNA` (new data acked; "pure ACK" when no text): the
//!     ACK covers buffered data only and no RTO left timestamps stale
//!     (`ts_stale_until`);
//!   - text (with or without new ACK): it fits the advertised window
//!     entirely and no out-of-order data is queued.
//!
//! # When prediction is off
//!
//! Everything else, in particular: any state but ESTABLISHED (handshake,
//! closing states, TIME-WAIT); SYN, FIN, RST or URG; a segment not at
//! RCV.NXT (old, duplicate, out of order); out-of-order data queued (the
//! segment that fills the hole goes slow, the next in-order one fast
//! again); a window change or a zero window (window updates and persist);
//! a duplicate ACK (`SEG.ACK == SND.UNA` without text, RFC 5681 §2) or an
//! ACK outside `[SND.UNA, SND.MAX]` (RFC 5961 §5.2); loss recovery until
//! the full ACK; SACKed data above SND.UNA held in the scoreboard (the
//! slow path trims it and checks IsLost, RFC 6675 §5); go-back-N after an RTO until SND.NXT is back at SND.MAX;
//! ACKs up to the data outstanding at an RTO when timestamps are on;
//! PAWS failure, or a missing timestamp when negotiated; SACK blocks;
//! text beyond the window. Prediction comes back by itself as soon as
//! the slow path has restored the state above.
//!
//! # Direct placement
//!
//! When the reader's own `recv` processes its segments (the stack's
//! `tcp_recv`, LRP §3.4) and the receive buffer is empty, a predicted
//! segment's text is copied from the NIC buffer straight into the
//! reader's buffer ([`Connection::direct_ok`],
//! [`Connection::direct_commit`]): one copy of the text instead of two,
//! and the receive buffer stays empty, so the window offered stays open.
//!
//! **Owns:** the prediction test and the two predicted cases. **May not
//! touch:** anything the slow path would not change the same way (the
//! differential test compares them).

use super::{seq_le, seq_lt, CongestionControl, Connection, State, Timer};
use crate::wire::tcp::{TcpFlags, TcpRepr};

impl<C: CongestionControl> Connection<C> {
    /// Handles `seg` if header prediction holds and returns `true`;
    /// otherwise changes nothing and returns `false`.
    #[inline]
    pub(super) fn fast_path(&mut self, now: u64, seg: &TcpRepr, payload: &[u8]) -> bool {
        if !self.predicted(seg, payload.len()) {
            return false;
        }
        self.fast_common(now, seg);
        if !payload.is_empty() {
            self.fast_data(now, payload);
        }
        self.update_timers(now);
        true
    }

    /// Header prediction for `seg` carrying `len` bytes of text (see the
    /// module docs).
    #[cfg_attr(lazynet_pin, inline(always))]
    fn predicted(&self, seg: &TcpRepr, len: usize) -> bool {
        let acked = seg.ack.diff(self.snd_una);
        // Most discriminating and cheapest tests first.
        seg.seq == self.rcv_nxt
            && seg.flags.0 & !TcpFlags::PSH.0 == TcpFlags::ACK.0
            && self.state == State::Established
            && seg.window != 0
            && (u32::from(seg.window) << self.snd_wscale) == self.snd_wnd
            && acked >= 0
            && seg.ack.diff(self.snd_max) <= 0
            && self.snd_nxt == self.snd_max
            && !self.in_recovery
            && self.sb.is_empty()
            && len == seg.payload_len
            && seg.src_port == self.remote.port()
            && seg.dst_port == self.local.port()
            && seg.sack.is_empty()
            && self.ts_predicted(seg)
            && if acked > 0 {
                // A new ACK: data only (not a FIN), no stale timestamps.
                acked as usize <= self.tx.len()
                    && self.ts_stale_until.is_none()
                    && (len == 0 || self.data_predicted(len))
            } else {
                // SEG.ACK == SND.UNA without text is a duplicate ACK or a
                // window probe answer: slow path (RFC 5681 §2).
                len != 0 && self.data_predicted(len)
            }
    }

    /// What every predicted segment does besides queueing its text.
    #[cfg_attr(lazynet_pin, inline(always))]
    fn fast_common(&mut self, now: u64, seg: &TcpRepr) {
        let acked = seg.ack.diff(self.snd_una);
        self.counters.fast_path += 1;
        // RFC 7323 §4.3: TSval >= TS.Recent holds (predicted).
        if let (true, Some(ts)) = (self.ts_enabled, seg.timestamps) {
            if seq_le(seg.seq, self.last_ack_sent) {
                self.ts_recent = ts.tsval;
                self.ts_recent_at = now;
            }
        }
        self.last_rx = now;
        self.ka_sent = 0;
        if acked > 0 {
            self.fast_ack(now, seg, acked as u32);
        }
        // RFC 9293 §3.10.7.4 window update: the window itself is unchanged
        // (predicted), so only SND.WL1/SND.WL2 may move.
        if seq_lt(self.snd_wl1, seg.seq)
            || (self.snd_wl1 == seg.seq && seq_le(self.snd_wl2, seg.ack))
        {
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = seg.ack;
        }
    }

    /// Direct delivery, the receive fast path's last step: whether `seg`,
    /// with `len > 0` bytes of text, may be placed straight into a
    /// reader's buffer instead of the receive buffer. It must be predicted
    /// (see the module docs) and nothing may be waiting in the receive
    /// buffer (the reader gets the bytes in order). Pure.
    #[inline]
    pub fn direct_ok(&self, seg: &TcpRepr, len: usize) -> bool {
        self.cfg.fast_path && len != 0 && self.rx.is_empty() && self.predicted(seg, len)
    }

    /// Accounts for `seg`, whose `len` bytes of text go straight into the
    /// reader's buffer (after [`Connection::direct_ok`]; the caller has
    /// verified the checksum and copies the text before the reader sees
    /// anything): the TCB ends exactly as after `handle_segment(seg)`
    /// followed by a `recv` that took those bytes (`tests/tcp/fastpath.rs`
    /// checks this differentially). LRP §3.4: the receiver's own read does
    /// the protocol work, and the text is copied once, from the NIC buffer
    /// to the reader, never through the receive buffer.
    #[inline]
    pub fn direct_commit(&mut self, now: u64, seg: &TcpRepr, len: usize) {
        let done = self.direct_commit_part(now, seg, len, &[]);
        debug_assert!(done);
    }

    /// Whether the last `rest` bytes of a segment that [`direct_ok`]
    /// admitted fit the receive buffer, for [`direct_commit_part`] (the
    /// reader's buffer took the others). Pure.
    ///
    /// [`direct_ok`]: Connection::direct_ok
    /// [`direct_commit_part`]: Connection::direct_commit_part
    #[inline]
    pub fn direct_rest_fits(&self, rest: usize) -> bool {
        rest <= self.rx.free()
    }

    /// [`Connection::direct_commit`] for a segment whose text the reader's
    /// buffer took only in part: its last bytes, `rest`, go into the
    /// receive buffer, where the reader's next call finds them first. The
    /// TCB ends exactly as after `handle_segment(seg)` followed by a `recv`
    /// that took the first `len - rest.len()` bytes (`tests/tcp/fastpath.rs`).
    /// Returns false, changing nothing, if `rest` does not fit
    /// ([`Connection::direct_rest_fits`]) or is not shorter than the text:
    /// the caller then processes the segment the ordinary way.
    #[inline]
    #[must_use]
    pub fn direct_commit_part(&mut self, now: u64, seg: &TcpRepr, len: usize, rest: &[u8]) -> bool {
        if (!rest.is_empty() && rest.len() >= len) || !self.direct_rest_fits(rest.len()) {
            return false;
        }
        debug_assert!(self.rx.is_empty());
        self.counters.segs_in += 1;
        self.counters.direct += 1;
        self.fast_common(now, seg);
        self.rcv_mss = self.rcv_mss.max(len as u32).min(u32::from(self.cfg.mss));
        if !rest.is_empty() {
            let queued = self.rx.push(rest);
            debug_assert_eq!(queued, rest.len());
        }
        self.rcv_nxt += len as u32;
        self.delayed_ack(now, len as u32);
        self.update_timers(now);
        // `recv`'s window update (RFC 9293 §3.8.6.2.2), the buffer holding
        // only `rest`.
        let before = self.rcv_adv.diff(self.rcv_nxt).max(0) as u32;
        let possible = self.window_possible();
        let step = self.sws_step();
        if possible >= before.saturating_mul(2) && possible - before >= step {
            self.ack_now = true;
        }
        true
    }

    /// Timestamps not negotiated, or present and not older than TS.Recent
    /// (RFC 7323 §5.3 R1 passes without looking at the idle time).
    #[inline]
    fn ts_predicted(&self, seg: &TcpRepr) -> bool {
        if !self.ts_enabled {
            return true;
        }
        match seg.timestamps {
            Some(ts) => (ts.tsval.wrapping_sub(self.ts_recent) as i32) >= 0,
            None => false,
        }
    }

    /// `len > 0` bytes at RCV.NXT fit the window we advertised, and nothing
    /// is queued out of order (so no reassembly, no immediate ACK).
    #[inline]
    fn data_predicted(&self, len: usize) -> bool {
        let wnd = self.rcv_adv.diff(self.rcv_nxt);
        wnd > 0 && len <= wnd as usize && self.ooo.is_empty() && !self.fin_rcvd
    }

    /// New data acked outside recovery: the `ack > SND.UNA` branch of
    /// `process_ack` with its rare cases predicted away.
    #[cfg_attr(lazynet_pin, inline(always))]
    fn fast_ack(&mut self, now: u64, seg: &TcpRepr, acked: u32) {
        let ack = seg.ack;
        self.tx.consume(acked as usize);
        self.snd_una = ack;
        if ack == self.snd_max {
            self.drained_at = now;
        }
        // RTT: timestamps (RFC 7323 §4.1) or the one timed segment (Karn);
        // no stale-TS check needed (predicted `ts_stale_until == None`).
        if !self.rtt_sample_ts(now, seg) {
            if let Some((end, t)) = self.rtt_timing {
                if seq_le(end, ack) {
                    self.rtt.sample(now.saturating_sub(t));
                    self.rtt_timing = None;
                }
            }
        }
        self.backoff = 0;
        self.retries = 0;
        // RFC 6298 §5.3: restart the timer (re-armed by update_timers).
        self.rtx = Timer::Idle;
        self.dupacks = 0;
        if let Some(srtt) = self.rtt.srtt() {
            self.cc.on_rtt(srtt);
        }
        self.cc.on_ack(now, acked, self.eff_mss);
    }

    /// In-order text that fits: the `off == 0` branch of `process_data`
    /// without the out-of-order queue (predicted empty).
    #[cfg_attr(lazynet_pin, inline(always))]
    fn fast_data(&mut self, now: u64, payload: &[u8]) {
        self.rcv_mss = self
            .rcv_mss
            .max(payload.len() as u32)
            .min(u32::from(self.cfg.mss));
        let n = self.rx.write_at(0, payload);
        self.rx.commit(n);
        self.rcv_nxt += n as u32;
        self.delayed_ack(now, n as u32);
    }

    /// Delayed ACK, RFC 5681 §4.2 / RFC 9293 §3.8.6.3: at least every
    /// second full segment, else within `ack_delay`.
    #[inline]
    fn delayed_ack(&mut self, now: u64, n: u32) {
        self.unacked_bytes = self.unacked_bytes.saturating_add(n);
        if self.unacked_bytes >= 2 * self.rcv_mss {
            self.ack_now = true;
        } else if self.ack_deadline.is_none() {
            self.ack_deadline = Some(now.saturating_add(self.cfg.ack_delay));
        }
    }
}
