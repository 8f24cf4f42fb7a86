//! TCP timers: one heap of (deadline, slot, generation) with lazy deletion.
//!
//! **Owns:** firing a connection's or listener's timer (queued segments
//! first, so an ACK waiting on the channel stops the retransmission timer
//! instead of losing the race to it), the heap's compaction, and the
//! earliest deadline for callers that sleep.
//!
//! **May not touch:** what a timeout does to a connection: that is
//! `proto::tcp`'s `handle_timeout`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::service::After;
use super::{listener_stalled, LISTENER_BIT};
use crate::nic::Nic;
use crate::stack::{Stack, MAX_BATCH};

/// The timer heap is rebuilt without stale entries when it holds more
/// than this many per live slot (plus a constant): lazy deletion stays
/// bounded whatever the churn.
const TIMER_HEAP_SLACK: usize = 4;

impl<N: Nic> Stack<N> {
    /// Rebuilds the timer heap if it holds more than [`TIMER_HEAP_SLACK`]
    /// entries per live slot (plus a constant). Runs at every service call:
    /// always inlined, a compare (docs/PERFORMANCE.md, 4.2).
    #[inline(always)]
    pub(in crate::stack) fn compact_timers_if_stale(&mut self) {
        let live = self.tcp.conns.len() + self.tcp.listeners.len();
        if self.tcp.sh.timers.len() > TIMER_HEAP_SLACK * live + 1024 {
            self.compact_timers();
        }
    }

    /// Rebuilds the timer heap with only the entries a slot still has armed
    /// (control path: O(entries), amortized over the pushes that made them
    /// stale).
    #[cold]
    fn compact_timers(&mut self) {
        let tcp = &mut self.tcp;
        let (conns, listeners) = (&tcp.conns, &tcp.listeners);
        let live = |&Reverse((t, id, gen)): &Reverse<(u64, u32, u32)>| {
            if id & LISTENER_BIT != 0 {
                matches!(listeners.get((id & !LISTENER_BIT) as usize),
                    Some(Some(s)) if s.gen == gen && s.armed == Some(t))
            } else {
                matches!(conns.get(id as usize),
                    Some(Some(s)) if s.gen == gen && s.armed == Some(t))
            }
        };
        let kept: Vec<_> = tcp.sh.timers.drain().filter(live).collect();
        tcp.sh.timers = BinaryHeap::from(kept);
    }

    /// Handles one popped timer entry; false if it was stale.
    pub(in crate::stack) fn fire_timer(&mut self, id: u32, gen: u32, t: u64, now: u64) -> bool {
        if id & LISTENER_BIT != 0 {
            let idx = id & !LISTENER_BIT;
            let Some(Some(s)) = self.tcp.listeners.get_mut(idx as usize) else {
                return false;
            };
            if s.gen != gen || s.armed != Some(t) {
                return false;
            }
            s.armed = None;
            // As for connections (below): queued segments first, so that a
            // handshake's final ACK waiting on the channel completes it
            // instead of a SYN-ACK being retransmitted (or the half-open
            // entry expiring) first.
            // Forced: a listener stalled by its full SYN queue reads its
            // channel here, once per timer, so handshakes in progress
            // complete (module docs).
            let chan = s.chan;
            let queued = self.demux.queued(chan);
            if queued > 0 {
                self.listen_input(idx, now, queued.min(MAX_BATCH), true);
            }
            let Some(Some(s)) = self.tcp.listeners.get_mut(idx as usize) else {
                return false;
            };
            s.l.handle_timeout(now);
            self.tcp.sh.stats.timers += 1;
            // Expired entries may have made room: resume a listener that
            // was left off the ready list while stalled.
            let lazy = !self.mode.eager_protocol();
            let resume = !listener_stalled(&s.l, lazy);
            self.listen_settle(idx, now);
            if resume {
                self.demux.mark_ready(chan);
            }
            return true;
        }
        let Some((mut cx, s)) = self.conn_split(id) else {
            return false;
        };
        if s.gen != gen || s.armed != Some(t) {
            return false;
        }
        s.armed = None;
        // Segments already queued on the channel arrived before this timer
        // is handled: process them first. An ACK waiting there must stop
        // the retransmission timer instead of losing the race to it (a
        // spurious RTO: go-back-N and the window down to one segment). The
        // lazy design makes the gap as long as the caller's service
        // interval (found by tests/stack/tcp_netsim.rs: an RTO every 200 ms on a
        // steady 100 ms path, the ACK queued at the deadline).
        let queued = cx.demux.queued(s.chan);
        if queued > 0 {
            cx.conn_input(s, now, queued.min(MAX_BATCH));
        }
        if s.conn.poll_timeout().is_some_and(|d| d <= now) {
            s.conn.handle_timeout(now);
            cx.tcp.stats.timers += 1;
        }
        if let After::Free = cx.conn_settle(s, id, now, true) {
            self.free_conn(id);
        }
        true
    }

    /// The earliest TCP timer deadline (for a caller that sleeps).
    pub fn tcp_next_timeout(&self) -> Option<u64> {
        let t = self.tcp.sh.timers.peek().map(|r| r.0 .0);
        match (t, self.tcp.sh.tw.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Entries in the timer heap, stale ones included (for tests of its
    /// bound).
    pub fn tcp_timer_entries(&self) -> usize {
        self.tcp.sh.timers.len()
    }
}
