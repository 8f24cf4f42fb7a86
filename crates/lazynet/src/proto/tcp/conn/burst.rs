//! The transmit fast path: a burst of full-sized segments of new data,
//! planned once and emitted as a run (segmentation in the stack, like
//! Linux's GSO or TAS's fast path, without a large-frame NIC).
//!
//! In bulk transfer almost every segment a sender emits is the same
//! decision repeated: ESTABLISHED, nothing to retransmit, the windows
//! allow another MSS, the send buffer holds another MSS. The slow path
//! (`emit_data`, the single source of truth) takes that decision anew for
//! every segment and builds every header from a [`TcpRepr`]. Here it is
//! taken once for `count` segments; they differ only in SEG.SEQ (and PSH
//! on a segment that empties the send buffer), so the stack builds the
//! first header normally and patches a copy of it for the others.
//!
//! **Provable subset.** [`Connection::burst_plan`] returns a plan only
//! where the slow path would emit exactly those `count` segments, one per
//! `poll_transmit` call, and [`Connection::burst_commit`] leaves the TCB
//! exactly as those calls would. The conditions:
//!
//! - `Config::fast_path` is set;
//! - state ESTABLISHED with the SYN acked; no RST, keep-alive, probe or
//!   single retransmission pending; not in loss recovery (RFC 6582, RFC
//!   6675) and no duplicate ACK counted (Limited Transmit's extra
//!   window stays with the slow path); `SND.NXT == SND.MAX` (not resending after an RTO, so no
//!   segment is a retransmission and Karn's rule is not involved);
//! - no FIN queued (the FIN goes by the slow path);
//! - no SACK blocks to send (no out-of-order data queued, RFC 2018 §4);
//! - each segment is a full MSS: the unsent bytes and the usable window
//!   `min(SND.WND, cwnd) − flight` (RFC 5681 §3.1) each hold `count`
//!   MSS, so neither Nagle nor SWS avoidance (RFC 9293 §3.7.4,
//!   §3.8.6.2.1) can hold a segment back.
//!
//! Everything else goes to `poll_transmit`. `tests/tcp/fastpath.rs` runs
//! random operation sequences against two connections, one sending by
//! bursts and one by `poll_transmit`, and requires identical segments,
//! payloads and TCBs.
//!
//! **Owns:** planning a burst and committing what was sent of it. **May
//! not touch:** frames: the stack builds them from the plan.

use super::{CongestionControl, Connection, State};
use crate::wire::tcp::{SeqNumber, TcpFlags, TcpRepr};

/// A planned burst: `count` full-sized segments of new data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Burst {
    /// The header of the first segment (`payload_len` = MSS, flags ACK).
    pub first: TcpRepr,
    /// Segments planned (at least 1).
    pub count: usize,
    /// Offset in the send buffer of the first segment's first byte.
    off: usize,
    /// Bytes in the send buffer when planned.
    buffered: usize,
}

impl Burst {
    /// The header of segment `i` (`i < count`): the first one's, with
    /// SEG.SEQ advanced by `i` MSS and PSH if it empties the send buffer
    /// (as `emit_data` sets it).
    #[inline]
    pub fn repr(&self, i: usize) -> TcpRepr {
        let mut r = self.first;
        r.seq = self.seq(i);
        if self.psh(i) {
            r.flags |= TcpFlags::PSH;
        }
        r
    }

    /// SEG.SEQ of segment `i`.
    #[inline]
    pub fn seq(&self, i: usize) -> SeqNumber {
        self.first.seq + (i * self.first.payload_len) as u32
    }

    /// True if segment `i` carries PSH (see [`Burst::repr`]).
    #[inline]
    pub fn psh(&self, i: usize) -> bool {
        self.off + (i + 1) * self.first.payload_len == self.buffered
    }
}

impl<C: CongestionControl> Connection<C> {
    /// Plans a burst of at most `max` full-sized segments of new data, or
    /// `None` where the slow path must decide (see the module docs). Pure:
    /// nothing changes until [`Connection::burst_commit`].
    #[cfg_attr(lazynet_pin, inline(always))]
    pub fn burst_plan(&self, now: u64, max: usize) -> Option<Burst> {
        // Cheapest and most discriminating first, inlined into the caller:
        // not two full segments buffered (request/response traffic) ends
        // it at once, without a call.
        if self.tx.len() < 2 * self.eff_mss as usize {
            return None;
        }
        self.burst_plan_full(now, max)
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn burst_plan_full(&self, now: u64, max: usize) -> Option<Burst> {
        if !self.cfg.fast_path
            || self.state != State::Established
            || !self.syn_acked
            || self.rst_out.is_some()
            || self.ka_now
            || self.rexmit_one
            || self.probe_now
            || self.in_recovery
            || self.dupacks != 0
            || self.fin_queued
            || self.snd_nxt != self.snd_max
            || (self.sack_ok && !self.ooo.is_empty())
            || self.idle_restart_due(now)
        {
            return None;
        }
        let mss = self.eff_mss as usize;
        if mss == 0 {
            return None;
        }
        let start = self.data_start();
        let off = self.snd_nxt.diff(start).max(0) as usize;
        let buffered = self.tx.len();
        let unsent = buffered.saturating_sub(off);
        let flight = self.snd_nxt.diff(self.snd_una).max(0) as u32;
        let usable = self.snd_wnd.min(self.cc.window()).saturating_sub(flight) as usize;
        let count = (unsent / mss).min(usable / mss).min(max);
        if count == 0 {
            return None;
        }
        let (window, _) = self.window_to_advertise();
        let first = TcpRepr {
            seq: self.snd_nxt,
            ack: self.rcv_nxt,
            flags: TcpFlags::ACK,
            window,
            payload_len: mss,
            timestamps: self.timestamps(now),
            ..self.repr_base()
        };
        Some(Burst {
            first,
            count,
            off,
            buffered,
        })
    }

    /// Copies the payload of segment `i` of `b` to the front of `out`
    /// (which must hold an MSS) and returns its partial checksum sum if
    /// `want_sum` (0 otherwise). Reads only; valid until the commit.
    #[inline]
    pub fn burst_payload(&self, b: &Burst, i: usize, out: &mut [u8], want_sum: bool) -> u32 {
        let mss = b.first.payload_len;
        let off = b.off + i * mss;
        let out = &mut out[..mss];
        if want_sum {
            self.tx.peek_with_sum(off, out, 0).1
        } else {
            self.tx.peek(off, out);
            0
        }
    }

    /// The partial checksum sum of segment `i`'s payload, read in the send
    /// buffer, not in the copy `burst_payload` makes: the send buffer is
    /// this core's, while the copy's destination (a NIC buffer the peer's
    /// core read last) may still be on its way here, and summing it would
    /// wait for it (docs/PERFORMANCE.md, "Findings"). Reads only.
    #[inline]
    pub fn burst_sum(&self, b: &Burst, i: usize) -> u32 {
        let mss = b.first.payload_len;
        self.tx.sum(b.off + i * mss, mss, 0)
    }

    /// Records that the first `n` segments of `b` (`n <= b.count`) were
    /// handed on: the TCB ends exactly as after `n` `poll_transmit` calls
    /// that returned them. `now` must be the time `b` was planned at, and
    /// nothing may have changed the connection since.
    pub fn burst_commit(&mut self, now: u64, b: &Burst, n: usize) {
        let n = n.min(b.count);
        if n == 0 {
            return;
        }
        let mss = b.first.payload_len as u32;
        // Every segment of the slow path runs these; their effect does not
        // depend on how many ran.
        let _ = self.advertise_window();
        let end = b.first.seq + n as u32 * mss;
        if self.rtt_timing.is_none() && !self.ts_enabled {
            self.rtt_timing = Some((b.first.seq + mss, now));
        }
        self.sent_up_to(end);
        self.ack_sent();
        self.counters.segs_out += n as u64;
        self.counters.fast_tx += n as u64;
        self.update_timers(now);
    }
}
