//! A connection's timers (RFC 9293 §3.8.1, RFC 6298 retransmission,
//! RFC 1122 §4.2.3.6 keep-alive, §3.10.8 user timeout, the persist and
//! TIME-WAIT timers, the orphans' FIN-WAIT-2 timeout) and path MTU changes
//! (RFC 1191).
//!
//! **Owns:** when each timer is due and what its expiry does to the TCB.
//! **May not touch:** segments (`input`, `output` build and read them).

use super::*;

impl<C: CongestionControl> Connection<C> {
    // ---------------------------------------------------------------
    // Timers.

    /// The earliest time at which `handle_timeout` must be called.
    pub fn poll_timeout(&self) -> Option<u64> {
        // Straight-line min (no iterator): called after every stack event.
        #[inline(always)]
        fn min(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            match (a, b) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, None) => x,
                (None, y) => y,
            }
        }
        let rtx = match self.rtx {
            Timer::Idle => None,
            Timer::Retransmit(t) | Timer::Persist(t) => Some(t),
        };
        min(
            min(rtx, self.ack_deadline),
            min(self.tw_deadline, self.ka_deadline),
        )
    }

    /// Runs the timers that expired at `now`.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub fn handle_timeout(&mut self, now: u64) {
        if let Some(t) = self.tw_deadline {
            if now >= t {
                // TIME-WAIT's 2·MSL, or an orphan's FIN timeout.
                if self.state == State::FinWait2 {
                    self.counters.fin_timeouts += 1;
                }
                self.enter_closed();
                return;
            }
        }
        if let Some(t) = self.ack_deadline {
            if now >= t {
                self.ack_deadline = None;
                self.ack_now = true;
            }
        }
        if let Some(t) = self.ka_deadline {
            if now >= t {
                if self.ka_sent >= self.cfg.keepalive_probes {
                    self.error = Some(ConnError::TimedOut);
                    self.enter_closed();
                    return;
                }
                self.ka_sent += 1;
                self.ka_now = true;
                self.ka_deadline = None;
            }
        }
        match self.rtx {
            Timer::Retransmit(t) if now >= t => self.on_rto(now),
            Timer::Persist(t) if now >= t => {
                // RFC 9293 §3.8.6.1: probe the zero window; back off.
                self.retries += 1;
                if self.retries > self.cfg.max_retries {
                    self.error = Some(ConnError::TimedOut);
                    self.enter_closed();
                    return;
                }
                self.backoff = (self.backoff + 1).min(16);
                self.probe_now = true;
                // The probe repeats the first unacknowledged byte.
                self.snd_nxt = self.snd_una;
                self.rtx = Timer::Idle;
            }
            _ => {}
        }
        self.update_timers(now);
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(super) fn on_rto(&mut self, now: u64) {
        self.counters.rto_expired += 1;
        self.retries += 1;
        let limit = if self.synchronized() && self.syn_acked {
            self.cfg.max_retries
        } else {
            self.cfg.syn_retries
        };
        if self.retries > limit {
            self.error = Some(ConnError::TimedOut);
            self.enter_closed();
            return;
        }
        // RFC 6298 §5.5: back off; §5.4: retransmit the earliest segment.
        self.backoff = (self.backoff + 1).min(16);
        if !self.syn_acked {
            self.syn_rexmit = true;
        }
        if self.syn_acked {
            let flight = self.flight();
            self.cc.on_rto(flight, self.eff_mss);
            // RFC 6582 §3.2 step 4 note: after RTO, recover = highest sent.
            self.recover = self.snd_max;
        }
        self.in_recovery = false;
        self.dupacks = 0;
        self.rexmit_one = false;
        // RFC 6675 §5.1 (RFC 2018 §8): the receiver may have reneged;
        // forget what was SACKed and retransmit from SND.UNA.
        self.sb.clear();
        if self.ts_enabled && self.syn_acked {
            self.ts_stale_until = Some(self.snd_max);
        }
        // Karn: no RTT sample from retransmitted data.
        self.rtt_timing = None;
        self.snd_nxt = self.snd_una;
        self.rtx = Timer::Idle;
        let _ = now;
    }

    /// An ICMP "fragmentation needed and DF set" (RFC 1191) quoting one of
    /// our segments: `mtu` is the next hop's MTU and `seq` the quoted
    /// sequence number. Taken only if `seq` is in flight, `[SND.UNA,
    /// SND.MAX)` (RFC 5927 §4.1: a blind attacker must guess it), and only
    /// to shrink: the MTU is taken at [`MIN_PMTU`] or more (Linux's
    /// `min_pmtu`, so a forged message cannot make segments tiny), the
    /// MSS becomes what it leaves after the IPv4 and TCP headers (and our
    /// timestamps), and everything unacknowledged is sent again from
    /// SND.UNA in the new size at once, without a congestion response
    /// (the loss was the path's size, not congestion: RFC 1191 §6.5,
    /// Linux `tcp_simple_retransmit`). Returns whether it was taken.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub fn path_mtu_reduced(&mut self, mtu: u16, seq: SeqNumber, now: u64) -> bool {
        let in_flight = self.syn_acked
            && self.synchronized()
            && seq.diff(self.snd_una) >= 0
            && seq.diff(self.snd_max) < 0;
        let overhead = if self.ts_enabled { TS_OVERHEAD } else { 0 };
        let mss = (u32::from(mtu.max(MIN_PMTU)) - 40).saturating_sub(overhead);
        if !in_flight || mss >= self.eff_mss {
            self.counters.pmtu_ignored += 1;
            return false;
        }
        self.counters.pmtu_reduced += 1;
        self.eff_mss = mss;
        // Go back to SND.UNA as after an RTO, but keep the window and the
        // timer's backoff: nothing was congested.
        self.in_recovery = false;
        self.dupacks = 0;
        self.rexmit_one = false;
        self.recover = self.snd_max;
        self.sb.clear();
        if self.ts_enabled {
            self.ts_stale_until = Some(self.snd_max);
        }
        self.rtt_timing = None;
        self.snd_nxt = self.snd_una;
        self.update_timers(now);
        true
    }

    #[cfg_attr(lazynet_pin, inline(always))]
    pub(super) fn update_timers(&mut self, now: u64) {
        match self.state {
            State::Closed => {
                self.rtx = Timer::Idle;
                self.ack_deadline = None;
                return;
            }
            State::TimeWait => {
                self.rtx = Timer::Idle;
                return;
            }
            _ => {}
        }
        let outstanding = self.snd_max != self.snd_una;
        let persist = self.syn_acked
            && self.snd_wnd == 0
            && self.has_unsent()
            && self.snd_max.diff(self.snd_una) <= 1;
        if persist {
            if !matches!(self.rtx, Timer::Persist(_)) {
                self.rtx = Timer::Persist(now.saturating_add(self.rtt.backed_off(self.backoff)));
            }
        } else if outstanding {
            if !matches!(self.rtx, Timer::Retransmit(_)) {
                self.rtx = Timer::Retransmit(now.saturating_add(self.rtt.backed_off(self.backoff)));
            }
        } else {
            self.rtx = Timer::Idle;
        }
        // Keep-alive only while idle: nothing outstanding, no other timer.
        self.ka_deadline = match self.cfg.keepalive {
            Some(idle)
                if self.rtx == Timer::Idle
                    && matches!(self.state, State::Established | State::CloseWait) =>
            {
                let wait = if self.ka_sent == 0 {
                    idle
                } else {
                    idle.saturating_add(
                        u64::from(self.ka_sent).saturating_mul(self.cfg.keepalive_interval),
                    )
                };
                Some(self.last_rx.saturating_add(wait))
            }
            _ => None,
        };
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(super) fn enter_closed(&mut self) {
        self.state = State::Closed;
        self.rtx = Timer::Idle;
        self.ack_deadline = None;
        self.tw_deadline = None;
        self.ka_deadline = None;
        self.ka_now = false;
        self.ack_now = false;
        self.probe_now = false;
        self.rexmit_one = false;
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(super) fn enter_time_wait(&mut self, now: u64) {
        self.state = State::TimeWait;
        self.rtx = Timer::Idle;
        self.tw_deadline = Some(now.saturating_add(self.cfg.time_wait));
    }
}
