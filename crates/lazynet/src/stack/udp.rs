//! UDP: the socket table, the lazy receive and the send.
//!
//! **Owns:** the UDP socket entries (bound address, channel, peer), the
//! store of reassembled datagrams waiting for their sockets (fixed memory),
//! the receive path (RFC 768: IP header checksum, UDP length and checksum,
//! run in the receiver's call, LRP §3.3) and the send path. The calls on a
//! socket are made through `socket` (`stack.udp_mut(h)`).
//!
//! **May not touch:** the NIC other than through [`super::Iface`].

use std::net::{Ipv4Addr, SocketAddrV4};

use rand::RngCore;

use super::control::checked_ipv4;
use super::{ni, SocketError, Stack, StackDrop, CHECKED_TAG, REASM_TAG};
use crate::demux::{BindError, ChannelId};
use crate::mem::Desc;
use crate::nic::Nic;
use crate::wire::checksum;
use crate::wire::ethernet::HEADER_LEN as ETH_LEN;
use crate::wire::ipv4::PROTO_UDP;
use crate::wire::{Ipv4Packet, UdpPacket, UdpRepr};

/// Largest UDP payload (65535 − 20 − 8).
pub const MAX_UDP_PAYLOAD: usize = 65507;

/// Names an open UDP socket of a [`Stack`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UdpSocket(pub(in crate::stack) u32);

/// The UDP part of a stack: the socket table, and the datagrams
/// reassembled for its sockets.
pub(in crate::stack) struct Udp {
    pub(in crate::stack) sockets: Vec<Option<UdpEntry>>,
    pub(in crate::stack) free: Vec<u32>,
    pub(in crate::stack) store: DgramStore,
    /// Default channel capacity of a socket (frames).
    pub(in crate::stack) channel_cap: usize,
}

#[derive(Clone, Copy, Debug)]
pub(in crate::stack) struct UdpEntry {
    pub(in crate::stack) local: SocketAddrV4,
    pub(in crate::stack) chan: ChannelId,
    pub(in crate::stack) peer: Option<SocketAddrV4>,
}

/// Reassembled datagrams waiting in socket channels. Fixed memory: slots
/// allocated at start-up, each as large as the largest datagram the
/// reassembler can complete (an IPv4 payload, or its byte budget if
/// smaller); a channel entry names a slot by index.
pub(in crate::stack) struct DgramStore {
    data: Box<[u8]>,
    slot: usize,
    len: Box<[u32]>,
    from: Box<[(Ipv4Addr, Ipv4Addr)]>,
    free: Vec<u32>,
}

impl DgramStore {
    /// `slots` slots of `slot_bytes` bytes (at least 1): the reassembler's
    /// [`Reassembler::max_datagram`](crate::proto::ip::Reassembler::max_datagram).
    pub(in crate::stack) fn new(slots: usize, slot_bytes: usize) -> Self {
        let slot = slot_bytes.max(1);
        DgramStore {
            data: vec![0; slots * slot].into_boxed_slice(),
            slot,
            len: vec![0; slots].into_boxed_slice(),
            from: vec![(Ipv4Addr::UNSPECIFIED, Ipv4Addr::UNSPECIFIED); slots].into_boxed_slice(),
            free: (0..slots as u32).rev().collect(),
        }
    }

    pub(in crate::stack) fn put(
        &mut self,
        bytes: &[u8],
        src: Ipv4Addr,
        dst: Ipv4Addr,
    ) -> Option<u32> {
        if bytes.len() > self.slot {
            return None;
        }
        let s = self.free.pop()?;
        let at = s as usize * self.slot;
        self.data[at..at + bytes.len()].copy_from_slice(bytes);
        self.len[s as usize] = bytes.len() as u32;
        self.from[s as usize] = (src, dst);
        Some(s)
    }

    pub(in crate::stack) fn get(&self, s: u32) -> Option<(&[u8], Ipv4Addr, Ipv4Addr)> {
        let i = s as usize;
        let len = *self.len.get(i)? as usize;
        let at = i * self.slot;
        let (src, dst) = self.from[i];
        Some((&self.data[at..at + len], src, dst))
    }

    pub(in crate::stack) fn free(&mut self, s: u32) {
        if (s as usize) < self.len.len() && !self.free.contains(&s) {
            self.free.push(s);
        }
    }
}

/// The addresses and the datagram (up to the IPv4 total length) of a
/// packet whose lengths `Ipv4Packet::new_checked` has checked.
#[inline]
fn ip_datagram(ip: Ipv4Packet<&[u8]>) -> (Ipv4Addr, Ipv4Addr, &[u8]) {
    let (src, dst) = (ip.src(), ip.dst());
    let bytes = ip.into_inner();
    let ihl = ((bytes[0] & 0x0f) as usize) * 4;
    let total = u16::from_be_bytes([bytes[2], bytes[3]]) as usize;
    (src, dst, &bytes[ihl..total])
}

/// Parses a received Ethernet/IPv4/UDP frame lazily: header checksum, UDP
/// length and checksum (RFC 768; a zero checksum means none, RFC 1122
/// §4.1.3.4). Returns (source, destination address, payload).
#[inline]
pub(in crate::stack) fn parse_udp_frame(
    frame: &[u8],
) -> Result<(SocketAddrV4, Ipv4Addr, &[u8]), StackDrop> {
    let (src, dst, dgram) = ip_datagram(checked_ipv4(frame)?);
    parse_udp(dgram, src, dst)
}

/// [`parse_udp_frame`] for a frame whose checks already ran (the eager
/// modes): lengths only, no checksums.
#[inline]
fn parse_udp_frame_checked(frame: &[u8]) -> Result<(SocketAddrV4, Ipv4Addr, &[u8]), StackDrop> {
    let ip = Ipv4Packet::new_checked(frame.get(ETH_LEN..).unwrap_or(&[]))
        .map_err(|_| StackDrop::IpHeader)?;
    let (src, dst, dgram) = ip_datagram(ip);
    let udp = UdpPacket::new_checked(dgram).map_err(|_| StackDrop::UdpHeader)?;
    let len = udp.len() as usize;
    Ok((SocketAddrV4::new(src, udp.src_port()), dst, &dgram[8..len]))
}

#[inline]
fn parse_udp(
    dgram: &[u8],
    src: Ipv4Addr,
    dst: Ipv4Addr,
) -> Result<(SocketAddrV4, Ipv4Addr, &[u8]), StackDrop> {
    let udp = UdpPacket::new_checked(dgram).map_err(|_| StackDrop::UdpHeader)?;
    if !udp.verify_checksum(src, dst) {
        return Err(StackDrop::UdpChecksum);
    }
    let sport = udp.src_port();
    let len = udp.len() as usize;
    Ok((SocketAddrV4::new(src, sport), dst, &dgram[8..len]))
}

impl<N: Nic> Stack<N> {
    fn sock(&self, h: UdpSocket) -> Result<UdpEntry, SocketError> {
        self.udp
            .sockets
            .get(h.0 as usize)
            .copied()
            .flatten()
            .ok_or(SocketError::BadHandle)
    }

    /// Binds a UDP socket to `local` (address `0.0.0.0` for any, port 0 for
    /// an ephemeral port) with a channel of `cap` frames (`None`: default).
    pub fn udp_bind(
        &mut self,
        local: SocketAddrV4,
        cap: Option<usize>,
    ) -> Result<UdpSocket, SocketError> {
        let addr = *local.ip();
        if !addr.is_unspecified() && addr != self.iface.addr {
            return Err(SocketError::AddrNotAvailable);
        }
        let port = if local.port() == 0 {
            let r = self.rng.next_u32();
            let demux = &self.demux;
            self.ports
                .pick(r, |p| demux.udp_port_used(addr, p))
                .ok_or(SocketError::NoPorts)?
        } else {
            local.port()
        };
        let chan = self
            .demux
            .bind_udp(addr, port, cap.unwrap_or(self.udp.channel_cap))
            .map_err(|e| match e {
                BindError::AddrInUse => SocketError::AddrInUse,
                BindError::NoChannel => SocketError::BadHandle,
            })?;
        let cap = cap.unwrap_or(self.udp.channel_cap);
        self.ni_bind(chan, cap, ni::BindKind::Udp(addr, port))?;
        let s = UdpEntry {
            local: SocketAddrV4::new(addr, port),
            chan,
            peer: None,
        };
        let idx = match self.udp.free.pop() {
            Some(i) => {
                self.udp.sockets[i as usize] = Some(s);
                i
            }
            None => {
                self.udp.sockets.push(Some(s));
                (self.udp.sockets.len() - 1) as u32
            }
        };
        Ok(UdpSocket(idx))
    }

    /// The body of `UdpSocketRef::local_addr`.
    pub(crate) fn udp_local_addr(&self, h: UdpSocket) -> Result<SocketAddrV4, SocketError> {
        Ok(self.sock(h)?.local)
    }

    /// The body of `UdpSocketRef::connect`.
    pub(crate) fn udp_connect(
        &mut self,
        h: UdpSocket,
        peer: Option<SocketAddrV4>,
    ) -> Result<(), SocketError> {
        self.sock(h)?;
        if let Some(Some(s)) = self.udp.sockets.get_mut(h.0 as usize) {
            s.peer = peer;
        }
        Ok(())
    }

    /// The body of `UdpSocketRef::peer`.
    pub(crate) fn udp_peer(&self, h: UdpSocket) -> Result<Option<SocketAddrV4>, SocketError> {
        Ok(self.sock(h)?.peer)
    }

    /// The body of `UdpSocketRef::pending`.
    pub(crate) fn udp_pending(&self, h: UdpSocket) -> Result<usize, SocketError> {
        let s = self.sock(h)?;
        Ok(self.demux.queued(s.chan))
    }

    /// `ni-lrp` (or attached): a probe of the ring the NI queues this
    /// socket's frames on, for a host's interrupt line; `None` where frames
    /// are demultiplexed in this thread.
    pub fn udp_rx_probe(&self, h: UdpSocket) -> Option<crate::mem::RingProbe> {
        let s = self.sock(h).ok()?;
        self.demux.channel_probe(s.chan)
    }

    /// The body of `UdpSocketRef::close`.
    pub(crate) fn udp_close(&mut self, h: UdpSocket) -> Result<(), SocketError> {
        let s = self.sock(h)?;
        self.registry.forget(super::ready::SocketId::Udp(h));
        let mut left = Vec::new();
        let _ = self
            .demux
            .unbind_udp(*s.local.ip(), s.local.port(), &mut left);
        self.ni_unbind(ni::BindKind::Udp(*s.local.ip(), s.local.port()));
        for d in left {
            self.drop_queued(d);
        }
        self.iface.flush_release();
        self.udp.sockets[h.0 as usize] = None;
        self.udp.free.push(h.0);
        Ok(())
    }

    /// The body of `UdpSocketRef::recv_with`.
    pub(crate) fn udp_recv_with<R>(
        &mut self,
        h: UdpSocket,
        f: impl FnOnce(&[u8], SocketAddrV4) -> R,
    ) -> Result<R, SocketError> {
        let s = self.sock(h)?;
        let mut budget = self.demux.queued(s.chan);
        while budget > 0 {
            budget -= 1;
            let Some(d) = self.demux.channel_mut(s.chan).and_then(|c| c.pop()) else {
                break;
            };
            if d.buf & REASM_TAG != 0 {
                let slot = d.buf & !REASM_TAG;
                let parsed = match self.udp.store.get(slot) {
                    Some((bytes, src, dst)) => {
                        parse_udp(bytes, src, dst).and_then(|(from, _, p)| {
                            if s.peer.is_none_or(|x| x == from) {
                                Ok((from, p))
                            } else {
                                Err(StackDrop::UdpNotFromPeer)
                            }
                        })
                    }
                    None => Err(StackDrop::BadDescriptor),
                };
                match parsed {
                    Ok((from, payload)) => {
                        let v = f(payload, from);
                        self.udp.store.free(slot);
                        self.stats.udp_delivered_reassembled += 1;
                        return Ok(v);
                    }
                    Err(e) => {
                        self.udp.store.free(slot);
                        self.stats.drops[e as usize] += 1;
                        continue;
                    }
                }
            }
            // Checked in the receive loop already (eager modes)?
            let checked = d.buf & CHECKED_TAG != 0;
            let d = Desc {
                buf: d.buf & !CHECKED_TAG,
                ..d
            };
            let Some(frame) = self.iface.nic.buffers().frame(d) else {
                self.drop_rx(StackDrop::BadDescriptor);
                continue;
            };
            let parsed = if checked {
                parse_udp_frame_checked(frame)
            } else {
                self.stats.udp_checked_in_recv += 1;
                parse_udp_frame(frame)
            };
            match parsed {
                Ok((from, _, payload)) => {
                    if s.peer.is_some_and(|p| p != from) {
                        self.rx_fail(d, StackDrop::UdpNotFromPeer);
                        continue;
                    }
                    let r = f(payload, from);
                    self.stats.udp_delivered += 1;
                    self.iface.release(d);
                    return Ok(r);
                }
                Err(e) => self.rx_fail(d, e),
            }
        }
        Err(SocketError::WouldBlock)
    }

    /// The body of `UdpSocketRef::prepare`: frames stay queued in order, marked
    /// as checked (so `recv` does not repeat the work); frames that fail
    /// are dropped and counted. LRP §3.3:
    /// "an otherwise idle CPU should always perform protocol processing for
    /// any received packets" — the caller is an idle-priority task that
    /// charges the work to the socket's owner. O(queued) (the channel is
    /// rotated once), no allocation.
    pub(crate) fn udp_prepare(&mut self, h: UdpSocket, max: usize) -> Result<usize, SocketError> {
        let s = self.sock(h)?;
        let queued = self.demux.queued(s.chan);
        let mut checked = 0;
        for _ in 0..queued {
            let Some(d) = self.demux.channel_mut(s.chan).and_then(|c| c.pop()) else {
                break;
            };
            let done = d.buf & (CHECKED_TAG | REASM_TAG) != 0;
            if done || checked >= max {
                // Back at the tail: after the full rotation the order is kept.
                let _ = self.demux.enqueue(s.chan, d);
                continue;
            }
            let Some(frame) = self.iface.nic.buffers().frame(d) else {
                self.drop_rx(StackDrop::BadDescriptor);
                continue;
            };
            checked += 1;
            self.stats.udp_checked_ahead += 1;
            match parse_udp_frame(frame) {
                Ok(_) => {
                    let tagged = Desc {
                        buf: d.buf | CHECKED_TAG,
                        ..d
                    };
                    // Cannot fail: one entry was just popped.
                    let _ = self.demux.enqueue(s.chan, tagged);
                }
                Err(e) => self.rx_fail(d, e),
            }
        }
        self.iface.flush_release();
        Ok(checked)
    }

    /// The body of `UdpSocketRef::send_to`.
    pub(crate) fn udp_send_to(
        &mut self,
        h: UdpSocket,
        payload: &[u8],
        dst: SocketAddrV4,
        now: u64,
    ) -> Result<usize, SocketError> {
        let s = self.sock(h)?;
        if payload.len() > MAX_UDP_PAYLOAD {
            return Err(SocketError::TooBig);
        }
        let src = if s.local.ip().is_unspecified() {
            self.iface.addr
        } else {
            *s.local.ip()
        };
        let repr = UdpRepr {
            src_port: s.local.port(),
            dst_port: dst.port(),
            payload_len: payload.len(),
        };
        let mut hdr = [0u8; 8];
        let _ = repr.emit_header_with_payload_sum(
            &mut hdr,
            src,
            *dst.ip(),
            checksum::partial(payload, 0),
        );
        match self
            .iface
            .ip_output(src, *dst.ip(), PROTO_UDP, [&hdr, payload], now)
        {
            Ok(()) => {
                self.stats.udp_sent += 1;
                Ok(payload.len())
            }
            Err(StackDrop::NoRoute) => Err(SocketError::NoRoute),
            Err(StackDrop::TxNoBuffer | StackDrop::TxRingFull) => Err(SocketError::NoBuffers),
            Err(_) => Err(SocketError::Dropped),
        }
    }
}
