//! The TCP protocol handler: what runs after input, a timer or a call, and
//! the bounded servicing of ready channels and expired timers.
//!
//! **Owns:** [`Stack::tcp_service`] and its per-owner form
//! [`Stack::tcp_service_tag`] (owner tags, ready tags, due timer tags), and
//! the step after any work on a connection or listener (`conn_settle`,
//! `listen_settle`): output, timer re-arm, events, freeing a finished
//! connection or moving it to the TIME-WAIT table.
//!
//! **May not touch:** segments themselves (`input`), frames (`output`).

use std::cmp::Reverse;

use super::{
    listener_stalled, ChannelOwner, ConnSlot, Cx, Tcp, TcpEvent, TcpListener, TcpStream,
    LISTENER_BIT,
};
use crate::demux::ChannelId;
use crate::nic::Nic;
use crate::proto::tcp::State;
use crate::stack::{SocketError, Stack};

/// Frames one [`Stack::tcp_service`] processes for one channel before
/// moving to the next ready channel (fairness between connections).
pub const SERVICE_PER_CHANNEL: usize = 32;

/// When output stopped for want of a transmit buffer, the connection is
/// tried again after this long (buffers come back as the NIC sends).
const TX_RETRY_NS: u64 = 1_000_000;

/// What is left after [`Cx::conn_settle`], to do once the slot's borrow
/// ends.
#[must_use]
pub(in crate::stack) enum After {
    /// The slot stays.
    Keep,
    /// The connection is finished (closed, or its TIME-WAIT entry made):
    /// free the slot ([`Stack::free_conn`]).
    Free,
}

impl<N: Nic> Cx<'_, N> {
    /// After input, a timer or an application call on slot `s` (index
    /// `idx`): send, re-arm its timer, note an event if `event`, and say
    /// whether it is finished.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub(in crate::stack) fn conn_settle(
        &mut self,
        s: &mut ConnSlot,
        idx: u32,
        now: u64,
        event: bool,
    ) -> After {
        let (sent, starved) = self.iface.conn_output(&mut s.conn, &mut s.ip_ident, now);
        self.tcp.stats.segments_out += sent as u64;
        if s.detached && s.conn.state() == State::Closed {
            return After::Free;
        }
        if s.detached && s.conn.state() == State::TimeWait {
            // Its last ACK went out above; a compact entry answers from
            // now on (RFC 9293 §3.10.7.4 TIME-WAIT, RFC 6191).
            if let Some(e) = s.conn.time_wait_entry() {
                if self.tcp.tw.insert(now, e).is_some() {
                    self.tcp.stats.time_wait_evicted += 1;
                }
                self.tcp.stats.time_wait_entered += 1;
                return After::Free;
            }
        }
        // Out of transmit buffers with output pending (a window update or
        // an ACK has no timer of its own): try again shortly.
        let retry = starved.then_some(now + TX_RETRY_NS);
        let t = match (s.conn.poll_timeout(), retry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Tcp::arm(&mut self.tcp.timers, &mut s.armed, t, idx, s.gen);
        if event {
            note_conn_event(&mut self.tcp.events, s, idx);
        }
        After::Keep
    }
}

/// Notes that something happened to slot `s` (index `idx`; input
/// processed, a timer): [`Stack::tcp_take_events`] names it next, once.
/// Also after input an application call processed itself (LRP §3.4): an
/// ACK in it may have freed send room the application waits for.
#[inline]
pub(in crate::stack) fn note_conn_event(events: &mut Vec<TcpEvent>, s: &mut ConnSlot, idx: u32) {
    if !s.detached && !s.in_events {
        s.in_events = true;
        events.push(TcpEvent::Conn(TcpStream { idx, gen: s.gen }));
    }
}

impl<N: Nic> Stack<N> {
    /// [`Cx::conn_settle`] for slot `idx`, then what it asks for: for the
    /// cold callers that hold no split of their own.
    pub(in crate::stack) fn conn_settle(&mut self, idx: u32, now: u64, event: bool) {
        let Some((mut cx, s)) = self.conn_split(idx) else {
            return;
        };
        if let After::Free = cx.conn_settle(s, idx, now, event) {
            self.free_conn(idx);
        }
    }

    pub(in crate::stack) fn listen_settle(&mut self, idx: u32, now: u64) {
        let Some(Some(s)) = self.tcp.listeners.get_mut(idx as usize) else {
            return;
        };
        let sent = self.iface.listen_output(&mut s.l, now);
        self.tcp.sh.stats.segments_out += sent as u64;
        Tcp::arm(
            &mut self.tcp.sh.timers,
            &mut s.armed,
            s.l.poll_timeout(),
            idx | LISTENER_BIT,
            s.gen,
        );
        if s.l.accept_queue_len() > 0 && !s.in_events {
            s.in_events = true;
            self.tcp
                .sh
                .events
                .push(TcpEvent::Listener(TcpListener { idx, gen: s.gen }));
        }
    }

    /// Runs TCP protocol work that is due: expired timers, then the
    /// channels that received segments (at most [`SERVICE_PER_CHANNEL`]
    /// each per round), until `budget` units of work are done. Returns the
    /// work done; a channel left non-empty stays on the ready list.
    pub fn tcp_service(&mut self, now: u64, budget: usize) -> usize {
        self.service(now, budget, None, |_| false)
    }

    /// [`Stack::tcp_service`] that leaves the received segments of every
    /// connection `reader_waits` names to that connection's reader: they
    /// stay queued for its own receive call, which does their protocol
    /// work in its context and places in-order text straight into its
    /// buffer (LRP §3.4), instead of this handler doing it and the reader
    /// copying from the receive buffer. For an event loop that knows which
    /// readers wait (an async runtime's parked reads); `reader_waits`
    /// should also wake that reader. A deferred channel stays on the
    /// ready list: if its reader reads nothing by the next call, its
    /// segments are processed then (a reader that waits again has emptied
    /// the channel, so it is not deferred twice). Same work bound.
    pub fn tcp_service_deferring(
        &mut self,
        now: u64,
        budget: usize,
        reader_waits: impl FnMut(TcpStream) -> bool,
    ) -> usize {
        self.service(now, budget, None, reader_waits)
    }

    /// [`Stack::tcp_service`] restricted to the connections and listeners
    /// tagged `tag` ([`TcpStreamRef::set_tag`](crate::socket::TcpStreamRef::set_tag)):
    /// the protocol handler of one owner (LRP §3.4: TCP input at the owner's priority, charged to it).
    /// Ready channels and expired timers of other tags are left for their
    /// own handlers; the TIME-WAIT table is swept only by tag 0 (and by
    /// `tcp_service`). Same work bound.
    pub fn tcp_service_tag(&mut self, now: u64, tag: u16, budget: usize) -> usize {
        self.service(now, budget, Some(tag), |_| false)
    }

    /// The body of `TcpStreamRef::set_tag`.
    pub(crate) fn tcp_set_tag(&mut self, h: TcpStream, tag: u16) -> Result<(), SocketError> {
        let c = self.tcp.conn(h)?.chan.0 as usize;
        self.tcp.tags[c] = tag;
        Ok(())
    }

    /// The body of `TcpListenerRef::set_tag`.
    pub(crate) fn tcp_listen_set_tag(
        &mut self,
        h: TcpListener,
        tag: u16,
    ) -> Result<(), SocketError> {
        let c = self.tcp.listener(h)?.chan.0 as usize;
        self.tcp.tags[c] = tag;
        Ok(())
    }

    /// Which tags have TCP input waiting: bit `t` for tag `t < 63`, bit 63
    /// for all larger tags. O(ready channels); allocation-free (the ready
    /// list is taken and put back in order).
    pub fn tcp_ready_tags(&mut self) -> u64 {
        let mut ready = std::mem::take(&mut self.tcp.sh.ready);
        self.demux.take_ready(&mut ready);
        let mut mask = 0u64;
        for &c in &ready {
            if self.tcp.is_owned(c) {
                mask |= 1 << self.tcp.tag_of(c).min(63);
            }
            self.demux.mark_ready(ChannelId(c));
        }
        ready.clear();
        self.tcp.sh.ready = ready;
        mask
    }

    /// The tag of the earliest TCP timer if it expired by `now` (`Some(0)`
    /// also for a stale entry or the TIME-WAIT table): whose handler should
    /// run for timers.
    pub fn tcp_due_timer_tag(&self, now: u64) -> Option<u16> {
        if self.tcp.sh.tw.poll_timeout().is_some_and(|t| t <= now) {
            return Some(0);
        }
        let &Reverse((t, id, _)) = self.tcp.sh.timers.peek()?;
        (t <= now).then(|| self.tcp.timer_tag(id).unwrap_or(0))
    }

    #[cfg_attr(lazynet_pin, inline(always))]
    pub(in crate::stack) fn service(
        &mut self,
        now: u64,
        budget: usize,
        only: Option<u16>,
        mut reader_waits: impl FnMut(TcpStream) -> bool,
    ) -> usize {
        let mine = |tag: u16| only.is_none_or(|o| o == tag);
        let lazy = !self.mode.eager_protocol();
        let mut work = 0;
        self.compact_timers_if_stale();
        if mine(0) && self.tcp.sh.tw.poll_timeout().is_some_and(|t| t <= now) {
            work += self.tcp.sh.tw.poll_expired(now, budget);
        }
        // Expired entries of other tags are set aside (a bounded number per
        // call) and pushed back after the loop.
        // (Only a tagged call looks at tags: the untagged one, the common
        // path, pays neither the lookups nor the set-aside array.)
        let mut others: Option<[Reverse<(u64, u32, u32)>; 32]> = None;
        let mut n_others = 0;
        while work < budget {
            let Some(&Reverse((t, id, gen))) = self.tcp.sh.timers.peek() else {
                break;
            };
            if t > now {
                break;
            }
            if only.is_some() && self.tcp.timer_tag(id).is_some_and(|tg| !mine(tg)) {
                let set = others.get_or_insert([Reverse((0, 0, 0)); 32]);
                if n_others == set.len() {
                    break;
                }
                set[n_others] = Reverse((t, id, gen));
                n_others += 1;
                self.tcp.sh.timers.pop();
                continue;
            }
            self.tcp.sh.timers.pop();
            if self.fire_timer(id, gen, t, now) {
                work += 1;
            }
        }
        if let Some(set) = &others {
            for e in &set[..n_others] {
                self.tcp.sh.timers.push(*e);
            }
        }
        let mut ready = std::mem::take(&mut self.tcp.sh.ready);
        self.demux.take_ready(&mut ready);
        let mut i = 0;
        while i < ready.len() {
            let c = ready[i];
            i += 1;
            if work >= budget
                || (only.is_some() && self.tcp.is_owned(c) && !mine(self.tcp.tag_of(c)))
            {
                self.demux.mark_ready(ChannelId(c));
                continue;
            }
            let max = SERVICE_PER_CHANNEL.min(budget - work);
            match self.tcp.owner_of(c) {
                ChannelOwner::Conn(idx) => {
                    let Some((mut cx, s)) = self.conn_split(idx) else {
                        continue;
                    };
                    if !s.detached && reader_waits(TcpStream { idx, gen: s.gen }) {
                        // Its reader does the work; back on the list in
                        // case it reads nothing, and counted as work so
                        // the caller turns again rather than sleeping on
                        // frames nobody will ring for.
                        self.demux.mark_ready(ChannelId(c));
                        work += 1;
                        continue;
                    }
                    let n = cx.conn_input(s, now, max);
                    work += n;
                    if n > 0 {
                        if let After::Free = cx.conn_settle(s, idx, now, true) {
                            self.free_conn(idx);
                        }
                    }
                }
                ChannelOwner::Listener(idx) => {
                    let n = self.listen_input(idx, now, max, false);
                    work += n;
                    if n > 0 {
                        self.listen_settle(idx, now);
                    }
                }
                ChannelOwner::None => {}
            }
            // Frames left over (work bound): back on the list. A stalled
            // listener stays off it until accept or its timer makes room.
            let resume = match self.tcp.owner_of(c) {
                ChannelOwner::Conn(_) => true,
                ChannelOwner::Listener(l) => self.tcp.listeners[l as usize]
                    .as_ref()
                    .is_some_and(|s| !listener_stalled(&s.l, lazy)),
                ChannelOwner::None => false,
            };
            if resume {
                self.demux.mark_ready(ChannelId(c));
            }
        }
        ready.clear();
        self.tcp.sh.ready = ready;
        self.iface.flush_release();
        self.iface.nic.flush();
        work
    }
}
