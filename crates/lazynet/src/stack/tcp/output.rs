//! TCP output: segments built in place in NIC buffers and handed to the
//! NIC in batches.
//!
//! **Owns:** building one segment (payload copied once from the send
//! buffer to [`TX_PAYLOAD_AT`], headers written in front of it, DF set:
//! RFC 9293 §3.7.1), transmit bursts (runs of full segments decided once by
//! `Connection::burst_plan`, headers patched per segment with RFC 1624
//! checksum updates), buffers taken ahead and prefetched for writing, the
//! per-call batch, and the listener's output (SYN-ACKs, RSTs of a closing
//! listener).
//!
//! **May not touch:** the connection's state other than through its
//! transmit API; when to send is decided by the callers (`service`,
//! `calls`).

use std::net::Ipv4Addr;

use crate::mem::Desc;
use crate::nic::Nic;
use crate::proto::tcp::{Burst, Connection, Listener};
use crate::stack::iface::{emit_eth_ipv4, Iface};
use crate::stack::StackDrop;
use crate::wire::checksum;
use crate::wire::ethernet::HEADER_LEN as ETH_LEN;
use crate::wire::ipv4::PROTO_TCP;
use crate::wire::tcp::{TcpFlags, TcpRepr};
use crate::wire::Ipv4Repr;

/// Where a segment's payload starts in a transmit buffer: room for the
/// Ethernet, IPv4 and the largest TCP header (60 bytes) in front of it.
pub const TX_PAYLOAD_AT: usize = ETH_LEN + 20 + 60;

/// Segments one output call may emit for one connection (a bound; the
/// congestion and receive windows usually stop it earlier).
pub const MAX_TX_PER_CALL: usize = 64;

impl<N: Nic> Iface<N> {
    /// A transmit buffer: the spare one kept from the last output call, or
    /// a fresh one.
    #[inline]
    pub(in crate::stack) fn take_tx_buf(&mut self) -> Option<u32> {
        self.spare.take().or_else(|| self.alloc())
    }

    /// Gives back the buffers a burst took ahead and did not fill (only
    /// when it stopped early), at once rather than with the batch of
    /// released frames, so that the output that follows can take them as
    /// the slow path would.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn release_ahead(&mut self, ahead: &mut Ahead) {
        while let Some(b) = ahead.pop() {
            self.nic.release(&[Desc::new(b, 0)]);
        }
    }

    /// Builds Ethernet, IPv4 and TCP headers in front of the payload that
    /// `poll_transmit` wrote at [`TX_PAYLOAD_AT`] of buffer `b`, and sends
    /// the frame (or queues it for ARP). Consumes `b` in every case.
    /// `payload_sum`, if known, is the payload's partial checksum sum: the
    /// TCP checksum then reads only the header. `batched`: the frame goes
    /// onto `Iface::batch`, which the caller sends (`send_batch`) before it
    /// returns; otherwise it is handed to the NIC at once.
    #[cfg_attr(lazynet_pin, inline(always))]
    #[allow(clippy::too_many_arguments)]
    pub(in crate::stack) fn tcp_emit(
        &mut self,
        b: u32,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        repr: &TcpRepr,
        payload_sum: Option<u32>,
        ident: u16,
        now: u64,
        batched: bool,
    ) -> Result<(), StackDrop> {
        let hl = match repr.header_len() {
            Ok(h) => h,
            Err(_) => {
                self.release(Desc::new(b, 0));
                self.drop_tx(StackDrop::TxNoBuffer);
                return Err(StackDrop::TxNoBuffer);
            }
        };
        let Some(hop) = self.next_hop(dst) else {
            self.release(Desc::new(b, 0));
            self.drop_tx(StackDrop::NoRoute);
            return Err(StackDrop::NoRoute);
        };
        let mac = match self.resolve(hop, now) {
            Ok(m) => m,
            Err(r) => {
                self.release(Desc::new(b, 0));
                self.drop_tx(r);
                return Err(r);
            }
        };
        let (my_mac, ttl) = (self.mac, self.ttl);
        let start = TX_PAYLOAD_AT - hl - 20 - ETH_LEN;
        let end = TX_PAYLOAD_AT + repr.payload_len;
        let ok = match self.nic.buffers_mut().buf_mut(b) {
            Some(buf) if buf.len() >= end => {
                let f = &mut buf[start..end];
                let ip = Ipv4Repr {
                    src,
                    dst,
                    protocol: PROTO_TCP,
                    ttl,
                    ident,
                    dont_frag: true,
                    more_frags: false,
                    frag_offset: 0,
                    payload_len: hl + repr.payload_len,
                };
                emit_eth_ipv4(f, my_mac, mac.unwrap_or([0; 6]), &ip)
                    && match payload_sum {
                        Some(sum) => repr
                            .emit_header_with_payload_sum(&mut f[ETH_LEN + 20..], src, dst, sum)
                            .is_ok(),
                        None => repr.emit(&mut f[ETH_LEN + 20..], src, dst).is_ok(),
                    }
            }
            _ => false,
        };
        let d = Desc::new(b, (end - start) as u16);
        let d = Desc {
            off: start as u16,
            ..d
        };
        if !ok {
            self.release(Desc::new(b, 0));
            self.drop_tx(StackDrop::TxNoBuffer);
            return Err(StackDrop::TxNoBuffer);
        }
        match mac {
            Some(_) if batched => {
                self.batch_push(d);
                Ok(())
            }
            Some(_) => {
                if self.transmit(d) {
                    Ok(())
                } else {
                    Err(StackDrop::TxRingFull)
                }
            }
            None => match self.arp.enqueue(hop, d, now) {
                Ok(()) => Ok(()),
                Err(d) => {
                    self.release(d);
                    self.drop_tx(StackDrop::ArpQueueFull);
                    Err(StackDrop::ArpQueueFull)
                }
            },
        }
    }

    /// Sends what `conn` has to send: at most [`MAX_TX_PER_CALL`] segments.
    /// Returns the segments handed on, and whether it stopped for want of a
    /// transmit buffer with output still pending (the caller retries soon).
    #[cfg_attr(lazynet_pin, inline(always))]
    pub(in crate::stack) fn conn_output(
        &mut self,
        conn: &mut Connection,
        ident: &mut u16,
        now: u64,
    ) -> (usize, bool) {
        let (mut sent, mut ok) = (0, 0);
        let mut starved = false;
        debug_assert_eq!(self.batch.n, 0);
        let src = *conn.local().ip();
        let dst = *conn.remote().ip();
        while sent < MAX_TX_PER_CALL {
            // The transmit fast path: a run of full segments decided once
            // (`proto/tcp/conn/burst.rs`). A lone segment goes the slow way,
            // which costs the same.
            if let Some(plan) = conn.burst_plan(now, MAX_TX_PER_CALL - sent) {
                if plan.count >= 2 {
                    if let Some((n, out_of_bufs)) =
                        self.conn_burst(conn, &plan, src, dst, ident, now)
                    {
                        sent += n;
                        ok += n;
                        if out_of_bufs {
                            starved = true;
                            break;
                        }
                        continue;
                    }
                }
            }
            if !conn.wants_output(now) {
                // Nothing to send: skip the empty `poll_transmit` (most
                // calls on request/response traffic). A `poll_transmit`
                // that returned a segment already re-armed the timers.
                if sent == 0 {
                    conn.skip_transmit(now);
                }
                break;
            }
            let Some(b) = self.take_tx_buf() else {
                self.drop_tx(StackDrop::TxNoBuffer);
                starved = true;
                break;
            };
            // The payload is copied here and summed again by `tcp_emit`:
            // copying and summing in one pass
            // (`Connection::poll_transmit_with_sum`) was not faster with one
            // thread per end (docs/PERFORMANCE.md).
            let repr = match self.nic.buffers_mut().buf_mut(b) {
                Some(buf) if buf.len() > TX_PAYLOAD_AT => {
                    let room = (buf.len() - TX_PAYLOAD_AT).min(u16::MAX as usize);
                    conn.poll_transmit(now, &mut buf[TX_PAYLOAD_AT..TX_PAYLOAD_AT + room])
                }
                _ => {
                    self.release(Desc::new(b, 0));
                    break;
                }
            };
            let Some(repr) = repr else {
                self.spare = Some(b);
                break;
            };
            *ident = ident.wrapping_add(1);
            if self
                .tcp_emit(b, src, dst, &repr, None, *ident, now, true)
                .is_ok()
            {
                ok += 1;
            }
            sent += 1;
        }
        self.send_batch();
        (ok, starved)
    }

    /// Sends segments of burst `plan` (see `proto/tcp/conn/burst.rs`): the
    /// first with headers built as `tcp_emit` builds them, the others
    /// with a copy of those headers in which only the IP ident, SEG.SEQ,
    /// PSH and the two checksums change. Returns the segments sent and
    /// whether it stopped for want of a buffer, or `None` (nothing done)
    /// if the next hop is not resolved or a buffer cannot hold an MSS:
    /// the slow path then handles the segment (and queues it for ARP).
    #[allow(clippy::too_many_arguments)]
    fn conn_burst(
        &mut self,
        conn: &mut Connection,
        plan: &Burst,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        ident: &mut u16,
        now: u64,
    ) -> Option<(usize, bool)> {
        let first = plan.first;
        let mss = first.payload_len;
        let hl = first.header_len().ok()?;
        let my_mac = self.mac;
        // Only a known neighbour: resolving (and ARP requests) is the slow
        // path's business.
        let hop = self.next_hop(dst)?;
        let mac = if self.is_broadcast(hop) {
            [0xff; 6]
        } else {
            self.arp.lookup(hop, now)?
        };
        if self.nic.buffers().buf_size() < TX_PAYLOAD_AT + mss {
            return None;
        }
        let start = TX_PAYLOAD_AT - hl - 20 - ETH_LEN;
        let tcp_at = TX_PAYLOAD_AT - hl;
        let hlen = TX_PAYLOAD_AT - start;
        let ph = checksum::pseudo_header_ipv4(src, dst, PROTO_TCP, (hl + mss) as u16);
        let mut tmpl = [0u8; ETH_LEN + 20 + 60];
        // Partial sums of the template's IP and TCP headers without the
        // fields that change per segment (RFC 1624: a checksum is updated
        // from the words that change, not summed again).
        let (mut ip_base, mut tcp_base) = (0u32, 0u32);
        let mut n = 0;
        let mut starved = false;
        // Buffers taken TX_AHEAD segments before they are filled, with their
        // lines prefetched for writing (see `BufArea::prefetch_write`).
        let mut ahead = Ahead::default();
        while n < plan.count {
            while ahead.len < TX_AHEAD && n + ahead.len < plan.count {
                let Some(nb) = self.take_tx_buf() else { break };
                self.nic.buffers().prefetch_write(nb, TX_PAYLOAD_AT + mss);
                ahead.push(nb);
            }
            let Some(b) = ahead.pop() else {
                self.drop_tx(StackDrop::TxNoBuffer);
                starved = true;
                break;
            };
            let Some(buf) = self.nic.buffers_mut().buf_mut(b) else {
                self.release(Desc::new(b, 0));
                break;
            };
            let payload = &mut buf[TX_PAYLOAD_AT..TX_PAYLOAD_AT + mss];
            // Summed at the source (`Connection::burst_sum`), then copied.
            let sum = conn.burst_sum(plan, n);
            conn.burst_payload(plan, n, payload, false);
            *ident = ident.wrapping_add(1);
            let f = &mut buf[start..TX_PAYLOAD_AT];
            if n == 0 {
                let ip = Ipv4Repr {
                    src,
                    dst,
                    protocol: PROTO_TCP,
                    ttl: self.ttl,
                    ident: *ident,
                    dont_frag: true,
                    more_frags: false,
                    frag_offset: 0,
                    payload_len: hl + mss,
                };
                let ok = emit_eth_ipv4(f, my_mac, mac, &ip)
                    && plan
                        .repr(0)
                        .emit_header_with_payload_sum(&mut f[ETH_LEN + 20..], src, dst, sum)
                        .is_ok();
                if !ok {
                    self.release(Desc::new(b, 0));
                    *ident = ident.wrapping_sub(1);
                    self.release_ahead(&mut ahead);
                    return None;
                }
                tmpl[..hlen].copy_from_slice(f);
                let ip = &mut tmpl[ETH_LEN..ETH_LEN + 20];
                ip[4..6].fill(0);
                ip[10..12].fill(0);
                ip_base = checksum::partial(ip, 0);
                let t = &mut tmpl[tcp_at - start..hlen];
                t[4..8].fill(0);
                t[13] &= !TcpFlags::PSH.0;
                t[16..18].fill(0);
                tcp_base = checksum::partial(t, ph);
            } else {
                f.copy_from_slice(&tmpl[..hlen]);
                let ip = &mut f[ETH_LEN..ETH_LEN + 20];
                ip[4..6].copy_from_slice(&ident.to_be_bytes());
                let c = !checksum::fold(checksum::combine(ip_base, u32::from(*ident)));
                ip[10..12].copy_from_slice(&c.to_be_bytes());
                let t = &mut f[tcp_at - start..];
                let seq = plan.seq(n).0;
                t[4..8].copy_from_slice(&seq.to_be_bytes());
                let psh = plan.psh(n);
                if psh {
                    t[13] |= TcpFlags::PSH.0;
                }
                // The flags are the low byte of the word at offset 12.
                let words =
                    (seq >> 16) + (seq & 0xFFFF) + u32::from(psh) * u32::from(TcpFlags::PSH.0);
                let c = !checksum::fold(checksum::combine(checksum::combine(tcp_base, words), sum));
                t[16..18].copy_from_slice(&c.to_be_bytes());
            }
            self.batch_push(Desc {
                buf: b,
                off: start as u16,
                len: (hlen + mss) as u16,
            });
            n += 1;
        }
        if ahead.len > 0 {
            self.release_ahead(&mut ahead);
        }
        conn.burst_commit(now, plan, n);
        Some((n, starved))
    }

    /// Hands the batched segments to the NIC in one call (one ring
    /// publication instead of one per segment); those it refuses are
    /// dropped and counted like a refused single frame.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub(in crate::stack) fn send_batch(&mut self) {
        let n = self.batch.n;
        if n == 0 {
            return;
        }
        let k = self.nic.send(&self.batch.d[..n]);
        self.stats.tx_frames += k as u64;
        for i in k..n {
            self.drop_tx(StackDrop::TxRingFull);
            let d = self.batch.d[i];
            self.release(d);
        }
        self.batch.n = 0;
    }

    /// Adds `d` to the output batch, sending the batch first if full.
    #[inline]
    fn batch_push(&mut self, d: Desc) {
        if self.batch.n == self.batch.d.len() {
            self.send_batch();
        }
        self.batch.d[self.batch.n] = d;
        self.batch.n += 1;
    }

    /// Sends the RSTs of closing `l` ([`Listener::poll_close`]) until it is
    /// empty, in batches of [`TX_BATCH`]: at most `syn_queue + backlog`
    /// segments. Returns the RSTs handed on and those dropped for want of
    /// a transmit buffer (counted as `TxNoBuffer`, not retried).
    pub(in crate::stack) fn listen_close_output(
        &mut self,
        l: &mut Listener,
        now: u64,
    ) -> (usize, usize) {
        let (mut sent, mut unsent) = (0, 0);
        debug_assert_eq!(self.batch.n, 0);
        let src = *l.local().ip();
        while let Some((remote, repr)) = l.poll_close(now) {
            let Some(b) = self.take_tx_buf() else {
                self.drop_tx(StackDrop::TxNoBuffer);
                unsent += 1;
                continue;
            };
            if self
                .tcp_emit(b, src, *remote.ip(), &repr, None, 0, now, true)
                .is_ok()
            {
                sent += 1;
            }
        }
        self.send_batch();
        (sent, unsent)
    }

    /// Sends what `l` has to send (SYN-ACKs, cookie SYN-ACKs, RSTs, ACKs
    /// of queued connections): at most [`MAX_TX_PER_CALL`] segments.
    pub(in crate::stack) fn listen_output(&mut self, l: &mut Listener, now: u64) -> usize {
        let mut sent = 0;
        let src = *l.local().ip();
        while sent < MAX_TX_PER_CALL {
            let Some(b) = self.take_tx_buf() else {
                self.drop_tx(StackDrop::TxNoBuffer);
                break;
            };
            let r = match self.nic.buffers_mut().buf_mut(b) {
                Some(buf) if buf.len() > TX_PAYLOAD_AT => {
                    let room = (buf.len() - TX_PAYLOAD_AT).min(u16::MAX as usize);
                    l.poll_transmit(now, &mut buf[TX_PAYLOAD_AT..TX_PAYLOAD_AT + room])
                }
                _ => {
                    self.release(Desc::new(b, 0));
                    break;
                }
            };
            let Some((remote, repr)) = r else {
                self.spare = Some(b);
                break;
            };
            let _ = self.tcp_emit(b, src, *remote.ip(), &repr, None, 0, now, false);
            sent += 1;
        }
        sent
    }
}

/// How many buffers ahead of the segment being built a transmit burst
/// takes and prefetches for writing. Where the two cores do not share a
/// cache, a line the other core holds takes ~170 ns to come over, longer
/// than building one segment; of 0, 1, 2 and 4 ahead, four measured best,
/// by a small margin over two (`lazynet-lab bench tcp-bulk`, alternated;
/// docs/PERFORMANCE.md).
const TX_AHEAD: usize = 4;

/// A burst's buffers taken ahead, in the order they are filled.
#[derive(Default)]
struct Ahead {
    bufs: [u32; TX_AHEAD],
    head: usize,
    len: usize,
}

impl Ahead {
    #[inline]
    fn push(&mut self, b: u32) {
        self.bufs[(self.head + self.len) % TX_AHEAD] = b;
        self.len += 1;
    }

    #[inline]
    fn pop(&mut self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        let b = self.bufs[self.head];
        self.head = (self.head + 1) % TX_AHEAD;
        self.len -= 1;
        Some(b)
    }
}
