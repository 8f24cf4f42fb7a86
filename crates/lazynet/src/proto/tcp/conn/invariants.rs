//! The TCB's invariants, checked by tests and fuzzers after every step.
//!
//! **Owns:** the list of what must always hold.
//! **May not touch:** anything: it only reads.

use super::*;

impl<C: CongestionControl> Connection<C> {
    // ---------------------------------------------------------------
    // Invariants.

    /// Checks the TCB's invariants; `Err` names the first one broken.
    /// Not a `debug_assert`: tests and fuzzers call it after every step.
    pub fn check_invariants(&self) -> Result<(), &'static str> {
        if self.state == State::Closed {
            if self.poll_timeout().is_some() {
                return Err("CLOSED with a timer armed");
            }
            return Ok(());
        }
        if !seq_le(self.snd_una, self.snd_nxt) {
            return Err("SND.UNA > SND.NXT");
        }
        if !seq_le(self.snd_nxt, self.snd_max) {
            return Err("SND.NXT > SND.MAX");
        }
        let flight = self.snd_max.diff(self.snd_una);
        if flight < 0 || flight as usize > self.tx.len() + 2 {
            return Err("flight exceeds buffered data + SYN + FIN");
        }
        if self.tx.len() > self.tx.capacity() || self.rx.len() > self.rx.capacity() {
            return Err("buffer over capacity");
        }
        if self.state == State::TimeWait && self.tw_deadline.is_none() {
            return Err("TIME-WAIT without its timer");
        }
        if matches!(
            self.state,
            State::FinWait1 | State::FinWait2 | State::Closing | State::LastAck | State::TimeWait
        ) && !self.fin_queued
        {
            return Err("FIN state without FIN queued");
        }
        if matches!(
            self.state,
            State::CloseWait | State::Closing | State::LastAck | State::TimeWait
        ) && !self.fin_rcvd
        {
            return Err("state implies the peer's FIN, but none was received");
        }
        if self.state == State::FinWait2 && !self.fin_acked() {
            return Err("FIN-WAIT-2 with our FIN unacked");
        }
        if self.state == State::FinWait2 && self.orphaned && self.tw_deadline.is_none() {
            return Err("an orphan in FIN-WAIT-2 without its FIN timeout");
        }
        if self.orphaned && (!self.rx.is_empty() || !self.ooo.is_empty()) {
            return Err("an orphan holds received text");
        }
        if self.state != State::SynSent {
            let mut prev = self.rcv_nxt;
            for &(a, b) in self.ooo.as_slice() {
                if !seq_lt(prev, a) || !seq_lt(a, b) {
                    return Err("out-of-order intervals not sorted above RCV.NXT");
                }
                if b.diff(self.rcv_nxt) as usize > self.rx.capacity() - self.rx.len() {
                    return Err("out-of-order data beyond the receive buffer");
                }
                prev = b;
            }
            // An orphan keeps its last edge without a buffer behind it.
            if !self.orphaned && (self.rcv_adv.diff(self.rcv_nxt).max(0) as usize) > self.rx.free()
            {
                return Err("advertised window exceeds free buffer");
            }
        }
        if self.syn_acked && self.eff_mss == 0 {
            return Err("zero MSS");
        }
        // Liveness: sequence space in flight always has a timer behind it.
        if self.state != State::TimeWait && self.snd_max != self.snd_una && self.rtx == Timer::Idle
        {
            return Err("data in flight without a retransmission or persist timer");
        }
        if self.rcv_wscale > 14 || self.snd_wscale > 14 {
            return Err("window scale above 14");
        }
        let mut prev = self.snd_una;
        for &(l, r) in self.sb.as_slice() {
            if !seq_le(prev, l) || !seq_lt(l, r) || !seq_le(r, self.snd_max) {
                return Err("SACK scoreboard not sorted within [SND.UNA, SND.MAX]");
            }
            prev = r;
        }
        if self.in_recovery && self.sack_ok && !seq_lt(self.snd_una, self.recover) {
            return Err("SACK recovery past its RecoveryPoint");
        }
        Ok(())
    }
}
