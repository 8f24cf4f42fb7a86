//! The link: the NIC and what sending over it needs.
//!
//! **Owns:** [`Iface`]: the NIC (both directions), our MAC and IPv4 address,
//! the subnet and gateway, the ARP cache (RFC 826 resolution and the frames
//! waiting for it), IP identifiers, the batch of buffers to give back to the
//! NIC, the spare transmit buffer kept warm, the batch of TCP segments of an
//! output call, and hand-back of consumed receive buffers' lines; IP output
//! with fragmentation (RFC 791 §3.2); and the stack's calls for prebuilt
//! frames (network level framing).
//!
//! **May not touch:** protocol state above IP (TCP builds its own headers in
//! `tcp::output` and hands finished frames here).

use std::net::Ipv4Addr;

use super::{evict, SocketError, Stack, StackDrop, MAX_BATCH};
use crate::mem::Desc;
use crate::nic::Nic;
use crate::proto::arp::{ArpCache, Resolve};
use crate::proto::ip::{fragment_plan, IdentGen};
use crate::wire::ethernet::{
    EthernetAddress, EthernetRepr, ETHERTYPE_ARP, ETHERTYPE_IPV4, HEADER_LEN as ETH_LEN,
};
use crate::wire::{ArpOperation, ArpRepr, Ipv4Repr};

/// The interface: the NIC (both directions), our addresses, the neighbour
/// (ARP) cache, IP identifiers, batches of released and transmitted
/// buffers, and hand-back. Kept apart from the stack's receive-side state
/// so that a borrowed received datagram can be answered.
pub(in crate::stack) struct Iface<N: Nic> {
    pub(in crate::stack) nic: N,
    pub(in crate::stack) mac: [u8; 6],
    pub(in crate::stack) addr: Ipv4Addr,
    pub(in crate::stack) mask: u32,
    pub(in crate::stack) gateway: Option<Ipv4Addr>,
    pub(in crate::stack) ttl: u8,
    pub(in crate::stack) mtu: usize,
    pub(in crate::stack) arp: ArpCache,
    pub(in crate::stack) ident: IdentGen,
    pub(in crate::stack) release: Vec<Desc>,
    /// A transmit buffer TCP output allocated but did not need, or `poll`
    /// took ahead (`warm_spare`); the next output call uses it first.
    pub(in crate::stack) spare: Option<u32>,
    /// Whether `poll` keeps a spare transmit buffer, its header lines
    /// fetched for writing, while TCP connections exist; else it gives the
    /// spare back. On where the NIC's buffers cross cores
    /// ([`Nic::cross_core_buffers`]): request/response p50 −8% on the wire
    /// (`lazynet-lab bench tcp-rr`, alternated; docs/PERFORMANCE.md).
    pub(in crate::stack) warm_spare: bool,
    /// Segments of the output call in progress (`tcp::output`), empty between
    /// calls.
    pub(in crate::stack) batch: TxBatch,
    /// Keep or evict consumed receive buffers' lines (`evict`).
    pub(in crate::stack) evict: evict::Eviction,
    pub(in crate::stack) stats: IfaceStats,
}

#[derive(Default)]
pub(in crate::stack) struct IfaceStats {
    pub(in crate::stack) tx_frames: u64,
    pub(in crate::stack) arp_requests_sent: u64,
    pub(in crate::stack) drops: [u64; StackDrop::ALL.len()],
}

impl<N: Nic> Iface<N> {
    #[inline]
    pub(in crate::stack) fn drop_tx(&mut self, r: StackDrop) {
        self.stats.drops[r as usize] += 1;
    }

    /// Gives `d` back to the NIC, batched. Tagged store entries are not NIC
    /// buffers and are filtered out by the callers.
    #[inline]
    pub(in crate::stack) fn release(&mut self, d: Desc) {
        self.release.push(d);
        if self.release.len() >= MAX_BATCH {
            self.flush_release();
        }
    }

    pub(in crate::stack) fn flush_release(&mut self) {
        if !self.release.is_empty() {
            self.nic.release(&self.release);
            self.release.clear();
        }
    }

    pub(in crate::stack) fn is_broadcast(&self, dst: Ipv4Addr) -> bool {
        let d = u32::from(dst);
        d == u32::MAX || (self.mask != u32::MAX && d == (u32::from(self.addr) | !self.mask))
    }

    pub(in crate::stack) fn next_hop(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        if (u32::from(dst) ^ u32::from(self.addr)) & self.mask == 0 || dst == Ipv4Addr::BROADCAST {
            Some(dst)
        } else {
            self.gateway
        }
    }

    /// Finds the MAC for `next_hop`: `Ok(Some)` known, `Ok(None)` packets must
    /// wait for ARP (a request went out if due), `Err` cannot send. Always
    /// inlined: on the output path it is the ARP cache's memo compare for a
    /// known neighbour, and as a call it cost more than that compare.
    #[inline(always)]
    pub(in crate::stack) fn resolve(
        &mut self,
        next_hop: Ipv4Addr,
        now: u64,
    ) -> Result<Option<[u8; 6]>, StackDrop> {
        if self.is_broadcast(next_hop) {
            return Ok(Some([0xff; 6]));
        }
        match self.arp.resolve(next_hop, now) {
            Resolve::Reachable(m) => Ok(Some(m)),
            Resolve::SendRequest => {
                self.send_arp_request(next_hop);
                Ok(None)
            }
            Resolve::Pending => Ok(None),
            Resolve::NoSpace => Err(StackDrop::ArpNoSpace),
        }
    }

    pub(in crate::stack) fn alloc(&mut self) -> Option<u32> {
        let mut b = [0u32; 1];
        if self.nic.alloc(&mut b) == 1 {
            Some(b[0])
        } else {
            None
        }
    }

    /// Sends one frame we own, or drops it (counted, buffer released).
    pub(in crate::stack) fn transmit(&mut self, d: Desc) -> bool {
        if self.nic.send(&[d]) == 1 {
            self.stats.tx_frames += 1;
            true
        } else {
            self.drop_tx(StackDrop::TxRingFull);
            self.release(d);
            false
        }
    }

    pub(in crate::stack) fn send_arp_request(&mut self, target: Ipv4Addr) {
        let Some(b) = self.alloc() else {
            self.drop_tx(StackDrop::TxNoBuffer);
            return;
        };
        let mac = self.mac;
        let addr = self.addr;
        let Some(buf) = self.nic.buffers_mut().buf_mut(b) else {
            self.release(Desc::new(b, 0));
            return;
        };
        let eth = EthernetRepr {
            src: EthernetAddress(mac),
            dst: EthernetAddress::BROADCAST,
            ethertype: ETHERTYPE_ARP,
        };
        let arp = ArpRepr {
            operation: ArpOperation::Request,
            sender_hw: EthernetAddress(mac),
            sender_ip: addr,
            target_hw: EthernetAddress([0; 6]),
            target_ip: target,
        };
        let ok = eth.emit(buf).is_ok() && arp.emit(&mut buf[ETH_LEN..]).is_ok();
        let d = Desc::new(b, (ETH_LEN + crate::wire::arp::PACKET_LEN) as u16);
        if ok && self.transmit(d) {
            self.stats.arp_requests_sent += 1;
        } else if !ok {
            self.release(d);
        }
    }

    /// Sends an IP packet whose payload is `parts` concatenated, fragmenting
    /// it to the link MTU (RFC 791 §3.2). Copies the payload once into
    /// transmit buffers. `Err` names why it was dropped (counted).
    pub(in crate::stack) fn ip_output(
        &mut self,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        proto: u8,
        parts: [&[u8]; 2],
        now: u64,
    ) -> Result<(), StackDrop> {
        let total = parts[0].len() + parts[1].len();
        let Some(hop) = self.next_hop(dst) else {
            self.drop_tx(StackDrop::NoRoute);
            return Err(StackDrop::NoRoute);
        };
        let mac = match self.resolve(hop, now) {
            Ok(m) => m,
            Err(r) => {
                self.drop_tx(r);
                return Err(r);
            }
        };
        let plan = match fragment_plan(total, self.mtu, 20) {
            Ok(p) => p,
            Err(_) => return Err(StackDrop::NoRoute),
        };
        let ident = self.ident.next(src, dst, proto);
        for (off, len, more) in plan {
            let Some(b) = self.alloc() else {
                self.drop_tx(StackDrop::TxNoBuffer);
                return Err(StackDrop::TxNoBuffer);
            };
            let my_mac = self.mac;
            let ttl = self.ttl;
            let Some(buf) = self.nic.buffers_mut().buf_mut(b) else {
                self.release(Desc::new(b, 0));
                self.drop_tx(StackDrop::TxNoBuffer);
                return Err(StackDrop::TxNoBuffer);
            };
            let frame_len = ETH_LEN + 20 + len;
            if buf.len() < frame_len {
                self.release(Desc::new(b, 0));
                self.drop_tx(StackDrop::TxNoBuffer);
                return Err(StackDrop::TxNoBuffer);
            }
            let ip = Ipv4Repr {
                src,
                dst,
                protocol: proto,
                ttl,
                ident,
                dont_frag: false,
                more_frags: more,
                frag_offset: off as u16,
                payload_len: len,
            };
            let _ = emit_eth_ipv4(buf, my_mac, mac.unwrap_or([0; 6]), &ip);
            copy_range(parts, off, &mut buf[ETH_LEN + 20..frame_len]);
            let d = Desc::new(b, frame_len as u16);
            match mac {
                Some(_) => {
                    if !self.transmit(d) {
                        return Err(StackDrop::TxRingFull);
                    }
                }
                None => {
                    if let Err(d) = self.arp.enqueue(hop, d, now) {
                        self.release(d);
                        self.drop_tx(StackDrop::ArpQueueFull);
                        return Err(StackDrop::ArpQueueFull);
                    }
                }
            }
        }
        Ok(())
    }

    /// Sends the frames that waited for `ip`'s MAC.
    pub(in crate::stack) fn send_waiting(&mut self, ip: Ipv4Addr, mac: [u8; 6]) {
        let mut tmp = [Desc::default(); 16];
        loop {
            let n = self.arp.take_waiting(ip, &mut tmp);
            for &d in &tmp[..n] {
                if let Some(buf) = self.nic.buffers_mut().buf_mut(d.buf) {
                    if let Some(dst) = buf.get_mut(d.off as usize..d.off as usize + 6) {
                        dst.copy_from_slice(&mac);
                    }
                }
                self.transmit(d);
            }
            if n < tmp.len() {
                break;
            }
        }
    }
}

/// Writes the Ethernet header (from `src_mac` to `dst_mac`, IPv4) and the
/// IPv4 header `ip` at the start of `f`. False if `f` is too short.
#[inline]
pub(in crate::stack) fn emit_eth_ipv4(
    f: &mut [u8],
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    ip: &Ipv4Repr,
) -> bool {
    let eth = EthernetRepr {
        src: EthernetAddress(src_mac),
        dst: EthernetAddress(dst_mac),
        ethertype: ETHERTYPE_IPV4,
    };
    eth.emit(f).is_ok() && ip.emit(f.get_mut(ETH_LEN..).unwrap_or(&mut [])).is_ok()
}

/// Copies bytes `off..off + out.len()` of the concatenation of `parts`.
fn copy_range(parts: [&[u8]; 2], off: usize, out: &mut [u8]) {
    let a = parts[0];
    let mut pos = 0;
    if off < a.len() {
        let n = (a.len() - off).min(out.len());
        out[..n].copy_from_slice(&a[off..off + n]);
        pos = n;
    }
    if pos < out.len() {
        let start = off + pos - a.len();
        let n = out.len() - pos;
        out[pos..].copy_from_slice(&parts[1][start..start + n]);
    }
}

impl<N: Nic> Stack<N> {
    /// The Ethernet address to send to `dst`: next-hop choice and ARP, for
    /// callers that build whole frames themselves (the NLF streamer).
    /// `Ok(None)` while resolution is pending (a request went out if due).
    pub fn neighbor(&mut self, dst: Ipv4Addr, now: u64) -> Result<Option<[u8; 6]>, SocketError> {
        let hop = self.iface.next_hop(dst).ok_or(SocketError::NoRoute)?;
        self.iface
            .resolve(hop, now)
            .map_err(|_| SocketError::Dropped)
    }

    /// Sends whole frames the caller built in buffers it took from the NIC;
    /// returns how many the NIC accepted (the rest remain the caller's).
    pub fn transmit(&mut self, frames: &[Desc]) -> usize {
        let n = self.iface.nic.send(frames);
        self.iface.stats.tx_frames += n as u64;
        n
    }

    /// Sends header-plus-reference frames (see [`Nic::send_gather`]);
    /// returns how many the NIC accepted.
    pub fn transmit_gather(&mut self, frames: &[(Desc, crate::nic::ExtRef)]) -> usize {
        let n = self.iface.nic.send_gather(frames);
        self.iface.stats.tx_frames += n as u64;
        n
    }

    /// Records `mac` as `ip`'s link-layer address, as an ARP reply would
    /// (for links without an ARP peer, such as a discarding test wire).
    pub fn set_neighbor(&mut self, ip: Ipv4Addr, mac: [u8; 6]) {
        let now = self.now();
        let _ = self.iface.arp.update(ip, mac, true, now);
    }
}

/// Segments of one output call, sent to the NIC together (in groups of
/// [`TX_BATCH`]).
pub(in crate::stack) struct TxBatch {
    pub(in crate::stack) d: [Desc; TX_BATCH],
    pub(in crate::stack) n: usize,
}

/// Segments handed to the NIC per call on the output path.
const TX_BATCH: usize = 16;

impl TxBatch {
    /// An empty batch. `Iface` keeps one and reuses it: building one per
    /// output call cost ~40 instructions (callgrind), most calls on
    /// request/response traffic sending one segment or none.
    pub(in crate::stack) fn new() -> Self {
        TxBatch {
            d: [Desc::default(); TX_BATCH],
            n: 0,
        }
    }
}
