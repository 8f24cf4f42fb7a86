//! Control input: ARP, ICMP, fragments, and the periodic sweeps, the work
//! no socket owns (LRP §3.5: the stack's "proxies").
//!
//! **Owns:** answering ARP requests and learning from ARP (RFC 826), ICMP
//! echo in place (RFC 792, RFC 1624 checksum update), port unreachable for
//! UDP to closed ports and time exceeded for failed reassembly (RFC 1122
//! rules and a rate limit), reassembly of fragments (RFC 791 §3.2) into the
//! stack's datagram store, ICMP "fragmentation needed" (RFC 1191) handed
//! to the TCP connection it quotes, and the ARP and reassembly timer
//! sweeps. Each runs from [`Stack::poll`] with a budget; nothing here runs
//! per socket.
//!
//! **May not touch:** sockets' channels other than to enqueue a
//! reassembled datagram; TCP's state other than through
//! `Connection::path_mtu_reduced` (segments to closed ports go to `tcp`).

use std::net::{Ipv4Addr, SocketAddrV4};

use super::{Stack, StackDrop, REASM_TAG};
use crate::mem::Desc;
use crate::nic::Nic;
use crate::proto::arp::ArpUpdate;
use crate::proto::icmp::{may_send_error, ErrorContext};
use crate::proto::ip::ReasmKey;
use crate::wire::checksum;
use crate::wire::ethernet::{
    EthernetAddress, EthernetRepr, ETHERTYPE_ARP, ETHERTYPE_IPV4, HEADER_LEN as ETH_LEN,
};
use crate::wire::icmp::{self, IcmpPacket, IcmpRepr};
use crate::wire::ipv4::{PROTO_ICMP, PROTO_TCP, PROTO_UDP};
use crate::wire::tcp::SeqNumber;
use crate::wire::{ArpOperation, ArpPacket, ArpRepr, Ipv4Packet};

/// RFC 1624 eqn. 3 yields 0x0000 where a full computation gives 0xFFFF
/// exactly when every other byte of the message is zero (the sum is +0, not
/// −0, RFC 1624 §5). Only then: recompute. `msg` is an ICMP message whose
/// checksum field (bytes 2..4) was just updated.
#[inline]
fn fix_minus_zero(msg: &mut [u8]) {
    if msg.len() >= 4 && msg[2] == 0 && msg[3] == 0 {
        let c = checksum::checksum(msg);
        msg[2..4].copy_from_slice(&c.to_be_bytes());
    }
}

/// The IPv4 packet inside an Ethernet frame, with lengths checked and the
/// header checksum verified (RFC 791 §3.1) — the receiver's first step.
#[inline]
pub(in crate::stack) fn checked_ipv4(frame: &[u8]) -> Result<Ipv4Packet<&[u8]>, StackDrop> {
    let ip = Ipv4Packet::new_checked(frame.get(ETH_LEN..).unwrap_or(&[]))
        .map_err(|_| StackDrop::IpHeader)?;
    if ip.verify_checksum() {
        Ok(ip)
    } else {
        Err(StackDrop::IpChecksum)
    }
}

impl<N: Nic> Stack<N> {
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(in crate::stack) fn timers(&mut self, now: u64) {
        let mut freed = [Desc::default(); 32];
        let mut reqs = [Ipv4Addr::UNSPECIFIED; 16];
        // Bounded: a few rounds of bounded sweeps; leftovers wait for the next tick.
        for _ in 0..4 {
            let p = self.iface.arp.poll(now, &mut freed, &mut reqs);
            for &d in &freed[..p.freed] {
                self.iface.release(d);
                self.iface.drop_tx(StackDrop::ArpGiveUp);
            }
            for &ip in &reqs[..p.requests] {
                self.iface.send_arp_request(ip);
            }
            if p.freed < freed.len() && p.requests < reqs.len() {
                break;
            }
        }
        // RFC 1122 §3.3.2: a reassembly that times out with its first
        // fragment present SHOULD be answered with Time Exceeded (code 1),
        // under the usual ICMP error rules and rate limit.
        let (out, limit, stats) = (&mut self.iface, &mut self.icmp_limit, &mut self.stats);
        self.reasm.poll(now, |key, quote| {
            let Some(quote) = quote else { return };
            let src = key.src;
            let ctx = ErrorContext {
                is_icmp_error: key.protocol == PROTO_ICMP
                    && quote
                        .get(((quote[0] & 0x0f) as usize) * 4)
                        .is_some_and(|&t| crate::proto::icmp::is_error_type(t)),
                to_broadcast_or_multicast: out.is_broadcast(key.dst) || key.dst.is_multicast(),
                bad_source: src.is_unspecified()
                    || src.is_broadcast()
                    || src.is_multicast()
                    || src.is_loopback(),
                non_first_fragment: false,
            };
            if may_send_error(ctx, limit, now).is_err() {
                stats.icmp_suppressed += 1;
                return;
            }
            let mut msg = [0u8; icmp::HEADER_LEN + 60 + icmp::QUOTED_DATA_LEN];
            let repr = icmp::IcmpRepr::TimeExceeded {
                code: 1,
                original: quote,
            };
            if let Ok(n) = repr.emit(&mut msg) {
                let me = out.addr;
                if out
                    .ip_output(me, src, PROTO_ICMP, [&msg[..n], &[]], now)
                    .is_ok()
                {
                    stats.icmp_time_exceeded_sent += 1;
                }
            }
        });
    }

    /// RFC 1191 §6.3: an ICMP "fragmentation needed" (`mtu` the next hop's,
    /// 0 if the router did not say) quoting `quoted`, one of our TCP
    /// segments: its connection shrinks its segments
    /// ([`crate::proto::tcp::Connection::path_mtu_reduced`], which checks the quoted sequence
    /// number) and sends the unacknowledged data again at once.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn frag_needed(&mut self, d: Desc, mtu: u16, quoted: Option<QuotedTcp>, now: u64) {
        let Some(q) = quoted else {
            return self.rx_fail(d, StackDrop::IcmpNoConnection);
        };
        // RFC 1191 §5: a router that does not say guesses from the quoted
        // packet's length, the next plateau below it (§7).
        let mtu = if mtu == 0 {
            plateau_below(q.total_len)
        } else {
            mtu
        };
        if !self.tcp_path_mtu(q.local, q.remote, mtu, q.seq, now) {
            return self.rx_fail(d, StackDrop::IcmpNoConnection);
        }
        self.iface.release(d);
        self.stats.icmp_frag_needed += 1;
    }

    /// ARP, ICMP and UDP to unbound ports (LRP §3.5: work no socket owns).
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(in crate::stack) fn control_input(&mut self, d: Desc, now: u64) {
        let Some(f) = self.iface.nic.buffers().frame(d) else {
            self.drop_rx(StackDrop::BadDescriptor);
            return;
        };
        let ethertype = u16::from_be_bytes([f[12], f[13]]);
        if ethertype == ETHERTYPE_ARP {
            self.arp_input(d, now);
        } else {
            self.ip_control_input(d, now);
        }
    }

    /// RFC 826 packet reception, answering requests in the same buffer.
    fn arp_input(&mut self, d: Desc, now: u64) {
        let frame = self.iface.nic.buffers().frame(d).unwrap_or(&[]);
        let repr = match ArpPacket::new_checked(&frame[ETH_LEN.min(frame.len())..]) {
            Ok(p) => ArpRepr::parse(&p),
            Err(_) => {
                self.iface.release(d);
                self.drop_rx(StackDrop::ArpMalformed);
                return;
            }
        };
        let for_us = repr.target_ip == self.iface.addr;
        self.stats.arp_handled += 1;
        if let ArpUpdate::Resolved { .. } =
            self.iface
                .arp
                .update(repr.sender_ip, repr.sender_hw.0, for_us, now)
        {
            self.iface.send_waiting(repr.sender_ip, repr.sender_hw.0);
        }
        let valid_sender = repr.sender_hw.is_unicast() && !repr.sender_ip.is_unspecified();
        if repr.operation == ArpOperation::Request && for_us && valid_sender {
            let reply = ArpRepr {
                operation: ArpOperation::Reply,
                sender_hw: EthernetAddress(self.iface.mac),
                sender_ip: self.iface.addr,
                target_hw: repr.sender_hw,
                target_ip: repr.sender_ip,
            };
            let eth = EthernetRepr {
                src: EthernetAddress(self.iface.mac),
                dst: repr.sender_hw,
                ethertype: ETHERTYPE_ARP,
            };
            let off = d.off as usize;
            if let Some(buf) = self.iface.nic.buffers_mut().buf_mut(d.buf) {
                let b = &mut buf[off..];
                if eth.emit(b).is_ok() && reply.emit(&mut b[ETH_LEN..]).is_ok() {
                    let rd = Desc {
                        buf: d.buf,
                        off: d.off,
                        len: (ETH_LEN + crate::wire::arp::PACKET_LEN) as u16,
                    };
                    if self.iface.transmit(rd) {
                        self.stats.arp_replies_sent += 1;
                    }
                    return;
                }
            }
        }
        self.iface.release(d);
    }

    fn ip_control_input(&mut self, d: Desc, now: u64) {
        let frame = self.iface.nic.buffers().frame(d).unwrap_or(&[]);
        let ip = match checked_ipv4(frame) {
            Ok(p) => p,
            Err(e) => return self.rx_fail(d, e),
        };
        match ip.protocol() {
            PROTO_ICMP => {
                let icmp = match IcmpPacket::new_checked(ip.payload()) {
                    Ok(p) => p,
                    Err(_) => return self.rx_fail(d, StackDrop::IcmpMalformed),
                };
                if !icmp.verify_checksum() {
                    return self.rx_fail(d, StackDrop::IcmpChecksum);
                }
                if icmp.msg_type() == icmp::TYPE_ECHO_REQUEST && icmp.code() == 0 {
                    let total = ip.total_len() as usize;
                    let hl = ip.header_len();
                    self.echo_reply_in_place(d, hl, total);
                } else if let IcmpRepr::DestUnreachable {
                    code: icmp::CODE_FRAG_NEEDED,
                    next_hop_mtu,
                    original,
                } = IcmpRepr::parse(&icmp)
                {
                    let quoted = quoted_tcp(original, self.iface.addr);
                    self.frag_needed(d, next_hop_mtu, quoted, now);
                } else {
                    self.rx_fail(d, StackDrop::IcmpUnhandled);
                }
            }
            PROTO_UDP => {
                // The classifier sends only unbound unicast UDP here.
                let src = ip.src();
                let bcast = frame[0] & 1 == 1 || self.iface.is_broadcast(ip.dst());
                let ctx = ErrorContext {
                    is_icmp_error: false,
                    to_broadcast_or_multicast: bcast,
                    bad_source: src.is_unspecified()
                        || src.is_broadcast()
                        || src.is_multicast()
                        || src.is_loopback(),
                    non_first_fragment: false,
                };
                let mut msg = [0u8; icmp::HEADER_LEN + 60 + icmp::QUOTED_DATA_LEN];
                let n = match may_send_error(ctx, &mut self.icmp_limit, now) {
                    Ok(()) => icmp::emit_dest_unreachable(
                        &mut msg,
                        icmp::CODE_PORT_UNREACHABLE,
                        0,
                        ip.packet(),
                    )
                    .unwrap_or(0),
                    Err(_) => {
                        self.stats.icmp_suppressed += 1;
                        0
                    }
                };
                self.rx_fail(d, StackDrop::UdpNoSocket);
                if n > 0 {
                    let me = self.iface.addr;
                    if self
                        .iface
                        .ip_output(me, src, PROTO_ICMP, [&msg[..n], &[]], now)
                        .is_ok()
                    {
                        self.stats.icmp_unreach_sent += 1;
                    }
                }
            }
            crate::wire::ipv4::PROTO_TCP => self.tcp_no_socket(d, now),
            _ => self.rx_fail(d, StackDrop::IcmpUnhandled),
        }
    }

    /// Turns an echo request into its reply in the same buffer (RFC 792):
    /// swap addresses, type 8 → 0 with an RFC 1624 checksum update.
    fn echo_reply_in_place(&mut self, d: Desc, hl: usize, total: usize) {
        let me = self.iface.addr;
        let mymac = self.iface.mac;
        let ttl = self.iface.ttl;
        let off = d.off as usize;
        let Some(buf) = self.iface.nic.buffers_mut().buf_mut(d.buf) else {
            return;
        };
        let f = &mut buf[off..off + ETH_LEN + total];
        let peer_mac: [u8; 6] = [f[6], f[7], f[8], f[9], f[10], f[11]];
        f[0..6].copy_from_slice(&peer_mac);
        f[6..12].copy_from_slice(&mymac);
        let ipb = &mut f[ETH_LEN..];
        let src: [u8; 4] = [ipb[12], ipb[13], ipb[14], ipb[15]];
        ipb[12..16].copy_from_slice(&me.octets());
        ipb[16..20].copy_from_slice(&src);
        ipb[8] = ttl;
        ipb[10..12].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(&ipb[..hl]);
        ipb[10..12].copy_from_slice(&c.to_be_bytes());
        let ic = &mut ipb[hl..];
        let old = u16::from_be_bytes([ic[2], ic[3]]);
        let code = ic[1] as u16;
        ic[0] = icmp::TYPE_ECHO_REPLY;
        let new = checksum::update(old, (icmp::TYPE_ECHO_REQUEST as u16) << 8 | code, code);
        ic[2..4].copy_from_slice(&new.to_be_bytes());
        fix_minus_zero(&mut ic[..total - hl]);
        let rd = Desc {
            buf: d.buf,
            off: d.off,
            len: (ETH_LEN + total) as u16,
        };
        self.stats.icmp_echo_replies += 1;
        self.iface.transmit(rd);
    }

    /// IPv4 fragments: reassembly (RFC 791 §3.2) with the bounds of
    /// [`Reassembler`]; a complete datagram goes to its socket's channel.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(in crate::stack) fn fragment_input(&mut self, d: Desc, now: u64) {
        let frame = self.iface.nic.buffers().frame(d).unwrap_or(&[]);
        let ip = match checked_ipv4(frame) {
            Ok(p) => p,
            Err(e) => return self.rx_fail(d, e),
        };
        let key = ReasmKey {
            src: ip.src(),
            dst: ip.dst(),
            ident: ip.ident(),
            protocol: ip.protocol(),
        };
        let r = self.reasm.insert(
            key,
            ip.frag_offset() as usize,
            ip.more_frags(),
            ip.header(),
            ip.payload(),
            now,
        );
        match r {
            Ok(None) => self.stats.frags_absorbed += 1,
            Ok(Some(dg)) => {
                self.stats.frags_absorbed += 1;
                self.stats.reassembled += 1;
                let key = dg.key;
                let payload = dg.payload;
                match key.protocol {
                    PROTO_UDP => {
                        let port = if payload.len() >= 8 {
                            Some(u16::from_be_bytes([payload[2], payload[3]]))
                        } else {
                            None
                        };
                        match port.and_then(|p| self.demux.lookup_udp(key.dst, p)) {
                            None => self.stats.drops[StackDrop::ReasmNoSocket as usize] += 1,
                            Some(ch) => match self.udp.store.put(payload, key.src, key.dst) {
                                None => self.stats.drops[StackDrop::ReasmStoreFull as usize] += 1,
                                Some(slot) => {
                                    if self
                                        .demux
                                        .enqueue(ch, Desc::new(REASM_TAG | slot, 0))
                                        .is_err()
                                    {
                                        self.udp.store.free(slot);
                                        self.stats.drops[StackDrop::ReasmChannelFull as usize] += 1;
                                    }
                                }
                            },
                        }
                    }
                    PROTO_ICMP
                        if payload.len() >= 8
                            && payload[0] == icmp::TYPE_ECHO_REQUEST
                            && checksum::checksum(payload) == 0 =>
                    {
                        let mut hdr = [0u8; 8];
                        hdr.copy_from_slice(&payload[..8]);
                        let old = u16::from_be_bytes([hdr[2], hdr[3]]);
                        let code = hdr[1] as u16;
                        hdr[0] = icmp::TYPE_ECHO_REPLY;
                        let c = checksum::update(
                            old,
                            (icmp::TYPE_ECHO_REQUEST as u16) << 8 | code,
                            code,
                        );
                        hdr[2..4].copy_from_slice(&c.to_be_bytes());
                        if c == 0 && payload[4..].iter().all(|&x| x == 0) {
                            // All-zero message: see `fix_minus_zero`.
                            hdr[2..4].copy_from_slice(&[0xff, 0xff]);
                        }
                        let me = self.iface.addr;
                        if self
                            .iface
                            .ip_output(me, key.src, PROTO_ICMP, [&hdr, &payload[8..]], now)
                            .is_ok()
                        {
                            self.stats.icmp_echo_replies_reassembled += 1;
                        }
                    }
                    _ => self.stats.drops[StackDrop::ReasmUnsupported as usize] += 1,
                }
            }
            Err(_) => {
                self.iface.release(d);
                self.drop_rx(StackDrop::FragRefused);
                return;
            }
        }
        self.iface.release(d);
    }
}

/// For a frame that is an ICMP "fragmentation needed" (RFC 1191) quoting
/// a TCP segment we sent from `ours`: the segment's (local, remote)
/// addresses. The daemon hands such a message to the application that
/// holds the connection; checksums are left to that application's stack.
pub(crate) fn frag_needed_quote(
    frame: &[u8],
    ours: Ipv4Addr,
) -> Option<(SocketAddrV4, SocketAddrV4)> {
    if frame.get(12..14)? != ETHERTYPE_IPV4.to_be_bytes() {
        return None;
    }
    let ip = Ipv4Packet::new_checked(frame.get(ETH_LEN..)?).ok()?;
    if ip.protocol() != PROTO_ICMP || ip.frag_offset() != 0 || ip.more_frags() {
        return None;
    }
    let icmp = IcmpPacket::new_checked(ip.payload()).ok()?;
    match IcmpRepr::parse(&icmp) {
        IcmpRepr::DestUnreachable {
            code: icmp::CODE_FRAG_NEEDED,
            original,
            ..
        } => quoted_tcp(original, ours).map(|q| (q.local, q.remote)),
        _ => None,
    }
}

/// What an ICMP error quotes of one of our TCP segments.
#[derive(Clone, Copy, Debug)]
struct QuotedTcp {
    local: SocketAddrV4,
    remote: SocketAddrV4,
    seq: SeqNumber,
    total_len: u16,
}

/// The TCP segment an ICMP error quotes (RFC 792: the IP header and at
/// least 8 bytes of its data, enough for the ports and the sequence
/// number), if it is one we sent from `ours`.
fn quoted_tcp(original: &[u8], ours: Ipv4Addr) -> Option<QuotedTcp> {
    let ihl = usize::from(*original.first()? & 0x0f) * 4;
    if original[0] >> 4 != 4 || ihl < 20 || original.get(9) != Some(&PROTO_TCP) {
        return None;
    }
    let b = |i: usize| original.get(i).copied();
    let addr = |i: usize| Some(Ipv4Addr::new(b(i)?, b(i + 1)?, b(i + 2)?, b(i + 3)?));
    let u16_at = |i: usize| Some(u16::from_be_bytes([b(i)?, b(i + 1)?]));
    let (src, dst) = (addr(12)?, addr(16)?);
    if src != ours {
        return None;
    }
    let seq = u32::from_be_bytes([b(ihl + 4)?, b(ihl + 5)?, b(ihl + 6)?, b(ihl + 7)?]);
    Some(QuotedTcp {
        local: SocketAddrV4::new(src, u16_at(ihl)?),
        remote: SocketAddrV4::new(dst, u16_at(ihl + 2)?),
        seq: SeqNumber(seq),
        total_len: u16_at(2)?,
    })
}

/// RFC 1191 §7: the largest plateau MTU below `len` (a router that sent
/// no MTU dropped a packet of `len` bytes).
fn plateau_below(len: u16) -> u16 {
    const PLATEAUS: [u16; 10] = [32000, 17914, 8166, 4352, 2002, 1492, 1006, 508, 296, 68];
    PLATEAUS.into_iter().find(|&p| p < len).unwrap_or(68)
}
