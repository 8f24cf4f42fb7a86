//! TCP input: a connection's or listener's queued segments, processed
//! lazily by whoever calls (a socket call or the owner's protocol handler),
//! and segments no connection or listener takes (RFC 9293 §3.10.7.1).
//!
//! **Owns:** parsing a received segment once ([`Seg`]: IP header checksum,
//! TCP checksum over the pseudo-header, header and options), fetching
//! frames ahead of the reader ([`RX_AHEAD`]), handing segments to
//! `proto::tcp` with the work bound the caller gives, moving a listener's
//! segments to a connection accepted meanwhile, the TIME-WAIT table's
//! answers and RSTs for closed ports (rate limited).
//!
//! **May not touch:** when a connection sends: `conn_settle` (`service`)
//! decides, except for the immediate duplicate ACK of an out-of-order
//! segment (RFC 5681 §4.2) and the replies for closed ports and TIME-WAIT,
//! sent from here; other connections' channels, except to move a
//! listener's segments to the connection they belong to.

use std::net::{Ipv4Addr, SocketAddrV4};

use super::{listener_stalled, ConnSlot, Cx};
use crate::demux::{ChannelId, Classifier};
use crate::mem::{BufArea, Desc};
use crate::nic::Nic;
use crate::proto::tcp::{reset_for, TwAction, TwKey};
use crate::stack::control::checked_ipv4;
use crate::stack::{Stack, StackDrop};
use crate::wire::ethernet::HEADER_LEN as ETH_LEN;
use crate::wire::tcp::{TcpPacket, TcpRepr};

/// How many frames ahead of the one it processes a reader of a TCP
/// channel asks the CPU to fetch (`pop_ahead`; frames in the channel's
/// own slots, not on an offload NI's inbound ring, which is not looked
/// into). Where another core wrote the frames (the wire), each of a
/// frame's ~24 lines is a cross-core transfer, and the checksum loop that
/// first reads them keeps only a few in flight: bulk receive spent half its
/// time there. Two frames ahead is about one transfer's latency of work at
/// bulk rates (`lazynet-lab bench tcp-bulk` with 1, 2, 3 and 4 ahead;
/// docs/PERFORMANCE.md).
pub const RX_AHEAD: usize = 2;

/// Takes the oldest frame of channel `c` and asks the CPU to fetch the
/// frame [`RX_AHEAD`] behind it (a hint; see [`BufArea::prefetch_read`]).
/// With `first` (a loop's first pop), the frames between too.
#[cfg_attr(lazynet_pin, inline(always))]
pub(in crate::stack) fn pop_ahead(
    demux: &mut Classifier,
    bufs: &BufArea,
    c: ChannelId,
    first: bool,
) -> Option<Desc> {
    let ch = demux.channel_mut(c)?;
    let d = ch.pop()?;
    // Nothing behind it in the local slots (request/response): no further
    // look.
    if ch.peek(0).is_none() {
        return Some(d);
    }
    let from = if first { 0 } else { RX_AHEAD - 1 };
    for k in from..RX_AHEAD {
        let Some(next) = ch.peek(k) else { break };
        bufs.prefetch_read(next);
    }
    Some(d)
}

/// A received TCP frame, parsed once: addresses, header, payload range.
pub(in crate::stack) struct Seg {
    pub(in crate::stack) src: Ipv4Addr,
    pub(in crate::stack) dst: Ipv4Addr,
    pub(in crate::stack) repr: TcpRepr,
    pub(in crate::stack) payload: (usize, usize),
}

/// IP header checksum, TCP checksum over the pseudo-header (RFC 9293
/// §3.1), header and options — the receiver's lazy work for one segment.
#[cfg_attr(lazynet_pin, inline(always))]
pub(in crate::stack) fn parse_tcp_frame(frame: &[u8]) -> Result<Seg, StackDrop> {
    let ip = checked_ipv4(frame)?;
    let (src, dst) = (ip.src(), ip.dst());
    let hl = ip.header_len();
    let total = ip.total_len() as usize;
    let seg = frame
        .get(ETH_LEN + hl..ETH_LEN + total)
        .ok_or(StackDrop::IpHeader)?;
    let tcp = TcpPacket::new_checked(seg).map_err(|_| StackDrop::TcpHeader)?;
    if !tcp.verify_checksum(src, dst) {
        return Err(StackDrop::TcpChecksum);
    }
    let repr = TcpRepr::parse(&tcp).map_err(|_| StackDrop::TcpHeader)?;
    let start = ETH_LEN + hl + tcp.header_len();
    Ok(Seg {
        src,
        dst,
        repr,
        payload: (start, ETH_LEN + total),
    })
}

impl<N: Nic> Cx<'_, N> {
    /// Processes at most `max` queued segments of connection slot `s`
    /// (LRP: in the context of whoever calls). Returns the frames consumed.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub(in crate::stack) fn conn_input(&mut self, s: &mut ConnSlot, now: u64, max: usize) -> usize {
        let mut done = 0;
        while done < max {
            let bufs = self.iface.nic.buffers();
            let Some(d) = pop_ahead(self.demux, bufs, s.chan, done == 0) else {
                break;
            };
            done += 1;
            let Some(frame) = self.iface.nic.buffers().frame(d) else {
                self.drop_rx(StackDrop::BadDescriptor);
                continue;
            };
            let parsed = parse_tcp_frame(frame);
            self.conn_input_parsed(s, d, parsed, now);
        }
        done
    }

    /// Processes frame `d` of slot `s`, parsed (and its checksums
    /// verified) once, by the caller.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub(in crate::stack) fn conn_input_parsed(
        &mut self,
        s: &mut ConnSlot,
        d: Desc,
        parsed: Result<Seg, StackDrop>,
        now: u64,
    ) {
        let Some(frame) = self.iface.nic.buffers().frame(d) else {
            self.drop_rx(StackDrop::BadDescriptor);
            return;
        };
        match parsed {
            Ok(seg) => {
                let payload = &frame[seg.payload.0..seg.payload.1];
                let _ = s.conn.handle_segment(now, &seg.repr, payload);
                self.tcp.stats.segments_in += 1;
                if !payload.is_empty() {
                    // Its text is in the receive buffer now (`evict`).
                    if self.iface.evict.evict() {
                        self.iface.nic.buffers().evict(d);
                        self.tcp.stats.frames_evicted += 1;
                    }
                    self.iface.evict.placed(payload.len() as u64, now);
                }
                self.iface.release(d);
                // RFC 5681 §4.2: an out-of-order segment (one that
                // arrives while a gap is open) is answered at once, one
                // duplicate ACK per segment. Output after the whole
                // batch would fold a window's worth of them into one
                // ACK, the sender would never count three and every
                // loss would wait for an RTO (found by
                // tests/stack/tcp_netsim.rs: zero fast retransmits at 1% loss).
                if !s.conn.ooo_intervals().is_empty() {
                    let (sent, _) = self.iface.conn_output(&mut s.conn, &mut s.ip_ident, now);
                    self.tcp.stats.segments_out += sent as u64;
                }
            }
            Err(e) => self.rx_fail(d, e),
        }
    }
}

impl<N: Nic> Stack<N> {
    /// Processes at most `max` queued segments of listener `idx`, unless
    /// it is stalled ([`listener_stalled`]; `force`: the timer path, which
    /// reads a stalled-by-SYN-queue listener's channel anyway so that
    /// handshakes in progress complete). Segments of connections accepted
    /// since they were queued move to those connections' channels.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(in crate::stack) fn listen_input(
        &mut self,
        idx: u32,
        now: u64,
        max: usize,
        force: bool,
    ) -> usize {
        let lazy = !self.mode.eager_protocol();
        let mut done = 0;
        while done < max {
            let Some(Some(s)) = self.tcp.listeners.get_mut(idx as usize) else {
                break;
            };
            if s.l.accept_queue_full() || (!force && listener_stalled(&s.l, lazy)) {
                // LRP §3.4: stop processing; SYNs fall off at the channel.
                break;
            }
            let Some(d) = self.demux.channel_mut(s.chan).and_then(|c| c.pop()) else {
                break;
            };
            done += 1;
            let Some(frame) = self.iface.nic.buffers().frame(d) else {
                self.drop_rx(StackDrop::BadDescriptor);
                continue;
            };
            match parse_tcp_frame(frame) {
                Ok(seg) => {
                    let local = SocketAddrV4::new(seg.dst, seg.repr.dst_port);
                    let remote = SocketAddrV4::new(seg.src, seg.repr.src_port);
                    if let Some(ch) = self.demux.lookup_tcp_conn(local, remote) {
                        if self.demux.enqueue(ch, d).is_ok() {
                            self.tcp.sh.stats.redirected += 1;
                        } else {
                            self.rx_fail(d, StackDrop::TcpRedirectFull);
                        }
                        continue;
                    }
                    let key = TwKey { local, remote };
                    // RFC 6191: an acceptable SYN for a 4-tuple in
                    // TIME-WAIT opens a new connection, with an ISS above
                    // the old one's (`Listener::handle_reopening_syn`).
                    let reopening = match self.tcp.sh.tw.handle_segment(now, &key, &seg.repr) {
                        TwAction::NoEntry => None,
                        TwAction::AllowSyn { snd_nxt } => Some(snd_nxt),
                        other => {
                            self.tcp.sh.stats.segments_in += 1;
                            self.tcp.sh.stats.time_wait_segments += 1;
                            self.iface.release(d);
                            self.tw_reply(&key, other, now);
                            continue;
                        }
                    };
                    let Some(Some(s)) = self.tcp.listeners.get_mut(idx as usize) else {
                        self.rx_fail(d, StackDrop::SocketClosed);
                        break;
                    };
                    let payload = &frame[seg.payload.0..seg.payload.1];
                    let secret = &self.tcp.sh.secret;
                    match reopening {
                        Some(old) => {
                            s.l.handle_reopening_syn(now, remote, &seg.repr, payload, secret, old)
                        }
                        None => s.l.handle_segment(now, remote, &seg.repr, payload, secret),
                    };
                    self.tcp.sh.stats.segments_in += 1;
                    self.iface.release(d);
                }
                Err(e) => self.rx_fail(d, e),
            }
        }
        done
    }

    /// RFC 1191 §6.3 for our connection `local`–`remote`: the next hop's
    /// MTU is `mtu`, learned from an ICMP error quoting a segment with
    /// sequence number `seq`; the connection shrinks its segments (if
    /// `seq` is one it has in flight: `Connection::path_mtu_reduced`) and
    /// sends the unacknowledged data again at once. False if there is no
    /// such connection.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(in crate::stack) fn tcp_path_mtu(
        &mut self,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        mtu: u16,
        seq: crate::wire::tcp::SeqNumber,
        now: u64,
    ) -> bool {
        let chan = self.demux.lookup_tcp_conn(local, remote);
        let Some(super::ChannelOwner::Conn(idx)) = chan.map(|c| self.tcp.owner_of(c.0)) else {
            return false;
        };
        let taken = match self.tcp.conns.get_mut(idx as usize) {
            Some(Some(s)) => s.conn.path_mtu_reduced(mtu, seq, now),
            _ => false,
        };
        if taken {
            self.conn_settle(idx, now, false);
        }
        true
    }

    /// The daemon, for a connection whose application died: a bare ACK
    /// with a sequence number outside the peer's window. The peer answers
    /// with an ACK (RFC 9293 §3.10.7.4) whose acknowledgment number is the
    /// dead connection's next sequence number; that ACK finds no connection
    /// here and gets a RST with exactly that number (§3.10.7.1), which the
    /// peer accepts. So a killed application's connections are reset
    /// within a round trip, as a killed Linux process's are.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(in crate::stack) fn tcp_probe_dead(
        &mut self,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        now: u64,
    ) {
        use crate::wire::tcp::SeqNumber;
        use crate::wire::tcp::TcpFlags;
        use rand::RngCore;
        let r = TcpRepr {
            src_port: local.port(),
            dst_port: remote.port(),
            seq: SeqNumber(self.rng.next_u32()),
            flags: TcpFlags::ACK,
            ..TcpRepr::EMPTY
        };
        let Some(b) = self.iface.take_tx_buf() else {
            self.iface.drop_tx(StackDrop::TxNoBuffer);
            return;
        };
        let _ = self
            .iface
            .tcp_emit(b, *local.ip(), *remote.ip(), &r, None, 0, now, false);
    }

    /// A segment to no connection and no listener (RFC 9293 §3.10.7.1,
    /// CLOSED): RST unless it is a RST, rate limited.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(in crate::stack) fn tcp_no_socket(&mut self, d: Desc, now: u64) {
        let Some(frame) = self.iface.nic.buffers().frame(d) else {
            // Not a buffer we can name: nothing to release either.
            self.drop_rx(StackDrop::BadDescriptor);
            return;
        };
        let seg = match parse_tcp_frame(frame) {
            Ok(s) => s,
            Err(e) => return self.rx_fail(d, e),
        };
        let key = TwKey {
            local: SocketAddrV4::new(seg.dst, seg.repr.dst_port),
            remote: SocketAddrV4::new(seg.src, seg.repr.src_port),
        };
        match self.tcp.sh.tw.handle_segment(now, &key, &seg.repr) {
            // No listener here, so an acceptable new SYN is answered as in
            // CLOSED (a RST).
            TwAction::NoEntry | TwAction::AllowSyn { .. } => {}
            other => {
                self.tcp.sh.stats.segments_in += 1;
                self.tcp.sh.stats.time_wait_segments += 1;
                self.iface.release(d);
                self.tw_reply(&key, other, now);
                return;
            }
        }
        let reply = reset_for(&seg.repr);
        self.rx_fail(d, StackDrop::TcpNoSocket);
        let Some(r) = reply else { return };
        if !self.tcp.sh.rst_limit.allow(now) {
            self.tcp.sh.stats.resets_suppressed += 1;
            return;
        }
        let Some(b) = self.iface.take_tx_buf() else {
            self.iface.drop_tx(StackDrop::TxNoBuffer);
            return;
        };
        if self
            .iface
            .tcp_emit(b, seg.dst, seg.src, &r, None, 0, now, false)
            .is_ok()
        {
            self.tcp.sh.stats.resets_sent += 1;
        }
    }

    /// Sends the ACK the TIME-WAIT table asked for, if any.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn tw_reply(&mut self, key: &TwKey, a: TwAction, now: u64) {
        if let TwAction::SendAck(r) = a {
            let Some(b) = self.iface.take_tx_buf() else {
                self.iface.drop_tx(StackDrop::TxNoBuffer);
                return;
            };
            if self
                .iface
                .tcp_emit(
                    b,
                    *key.local.ip(),
                    *key.remote.ip(),
                    &r,
                    None,
                    0,
                    now,
                    false,
                )
                .is_ok()
            {
                self.tcp.sh.stats.segments_out += 1;
            }
        }
    }
}
