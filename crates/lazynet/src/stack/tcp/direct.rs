//! Direct placement: in-order text from the NIC's buffers straight into
//! the reader's buffer (LRP §3.4; one copy instead of two).
//!
//! **Owns:** the rounds of `Cx::conn_direct`: protocol work of each
//! predicted segment (checksum, `Connection::direct_commit`), then the ACK,
//! then the copies.
//!
//! **May not touch:** segments that are not predicted in-order text: they
//! go the ordinary way (`input`).

use crate::mem::Desc;
use crate::nic::Nic;
use crate::stack::{StackDrop, MAX_BATCH};

use super::input::{parse_tcp_frame, pop_ahead};
use super::service::note_conn_event;
use super::{ConnSlot, Cx, Tcp};

/// Segments per round of direct placement (`Cx::conn_direct`).
const DIRECT_ROUND: usize = 32;

impl<N: Nic> Cx<'_, N> {
    /// Direct placement (`Connection::direct_ok`, LRP §3.4): while the
    /// receive buffer is empty and the next queued segments are predicted
    /// in-order text, their text goes from the NIC buffers straight into
    /// `buf`, never through the receive buffer. In rounds of at most
    /// [`DIRECT_ROUND`] segments: first the protocol work of each (checksum,
    /// `direct_commit`), then the output it calls for (the ACK leaves
    /// before the copies, as on the ordinary path, where the reader copies
    /// after the protocol handler ran; acknowledging only after the copies
    /// starved the sender of credit by the copy time, halving two-core
    /// throughput), then the copies. A segment that `buf` takes only in
    /// part leaves its tail in the receive buffer
    /// (`Connection::direct_commit_part`), where `tcp_recv` reads it first
    /// next time before placing directly again. Stops at the first segment
    /// that does not qualify, which it processes the ordinary way after the
    /// copies, at a full `buf`, or after [`MAX_BATCH`] frames. Returns the
    /// bytes placed.
    pub(in crate::stack) fn conn_direct(
        &mut self,
        s: &mut ConnSlot,
        idx: u32,
        buf: &mut [u8],
        now: u64,
    ) -> usize {
        let mut n = 0;
        let mut done = 0;
        let mut stop = false;
        while !stop && done < MAX_BATCH && n < buf.len() {
            // (frame, payload range, offset in `buf`) of this round.
            let mut round = [(Desc::default(), 0u16, 0u16, 0usize); DIRECT_ROUND];
            let mut k = 0;
            let mut other = None;
            let mut at = n;
            while k < DIRECT_ROUND && done < MAX_BATCH && at < buf.len() {
                let bufs = self.iface.nic.buffers();
                let Some(d) = pop_ahead(self.demux, bufs, s.chan, done == 0) else {
                    stop = true;
                    break;
                };
                done += 1;
                let Some(frame) = self.iface.nic.buffers().frame(d) else {
                    self.drop_rx(StackDrop::BadDescriptor);
                    continue;
                };
                let parsed = parse_tcp_frame(frame);
                if let Ok(seg) = &parsed {
                    let (a, b) = seg.payload;
                    let len = b - a;
                    // `at < buf.len()`: there is room for at least a byte.
                    let take = len.min(buf.len() - at);
                    if s.conn.direct_ok(&seg.repr, len) {
                        if take == len {
                            s.conn.direct_commit(now, &seg.repr, len);
                        } else if !s.conn.direct_commit_part(
                            now,
                            &seg.repr,
                            len,
                            &frame[a + take..b],
                        ) {
                            // The tail does not fit the receive buffer.
                            other = Some((d, parsed));
                            stop = true;
                            break;
                        }
                        // Else, if `take < len`, the reader's buffer ends
                        // inside this segment: its tail went to the receive
                        // buffer, which the next read empties first, and
                        // `at` reaches the end.
                        round[k] = (d, a as u16, (a + take) as u16, at);
                        k += 1;
                        at += take;
                        continue;
                    }
                }
                // The ordinary way (which also counts a malformed frame's
                // drop), after this round's copies; parsed once.
                other = Some((d, parsed));
                stop = true;
                break;
            }
            if k > 0 {
                self.tcp.stats.segments_in += k as u64;
                note_conn_event(&mut self.tcp.events, s, idx);
                if s.conn.wants_output(now) {
                    self.conn_settle_live(s, idx, now, false);
                    self.iface.nic.flush();
                }
                let evict = self.iface.evict.evict();
                for &(d, a, b, off) in &round[..k] {
                    if let Some(f) = self.iface.nic.buffers().frame(d) {
                        let p = &f[a as usize..b as usize];
                        buf[off..off + p.len()].copy_from_slice(p);
                    }
                    if evict {
                        self.iface.nic.buffers().evict(d);
                    }
                    self.iface.release(d);
                }
                if evict {
                    self.tcp.stats.frames_evicted += k as u64;
                }
                self.iface.evict.placed((at - n) as u64, now);
                n = at;
            }
            if let Some((d, parsed)) = other {
                self.conn_input_parsed(s, d, parsed, now);
                // What the ordinary way does after input: its output (the
                // ACK of a FIN, a duplicate ACK) and its timers.
                self.conn_settle_live(s, idx, now, true);
            }
        }
        if done > 0 {
            // Direct commits may set a deadline (a delayed ACK, the
            // retransmission timer after an ACK of ours) that no output
            // armed: the heap must know it.
            Tcp::arm(
                &mut self.tcp.timers,
                &mut s.armed,
                s.conn.poll_timeout(),
                idx,
                s.gen,
            );
        }
        n
    }
}
