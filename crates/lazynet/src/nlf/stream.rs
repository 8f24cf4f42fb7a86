//! The streamer: sends one prebuilt stream to N unicast clients, each with
//! its own destination, paced by the packets' send times.
//!
//! **Owns:** per-client stream state (header template, next packet, RTP
//! parameters), the pacing, and the choice between sending payloads by
//! reference or by copy.
//!
//! **May not touch:** protocol state: it asks the [`Stack`] for the next
//! hop's MAC (ARP) and hands finished frames to the stack's NIC; it never
//! runs IP or UDP code (that is the point of network level framing).
//!
//! Payload bytes: at [`Streamer::attach`] the media is placed once in the
//! NIC's ext area when the NIC has one big enough (the in-memory wire; TAP
//! with `ext_bytes`), and every frame is then a header buffer plus a
//! reference ([`ExtRef`]) to its payload: no payload copy per packet or per
//! client. Where the NIC has no ext area the payload is copied after the
//! header (one copy per packet). The `traditional` path always copies, by
//! definition. TAP's `writev` copies into the kernel in every case.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddrV4;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::paths::{self, ClientConfig, ClientHeader, RtpParams, SendPath};
use super::{MetaFile, NlfError, PacketMeta};
use crate::mem::Desc;
use crate::nic::{ExtRef, Nic};
use crate::stack::Stack;
use crate::wire::EthernetAddress;

/// Largest batch handed to the NIC at once.
pub const BATCH: usize = 64;
/// Most packets one [`Streamer::poll`] sends.
pub const MAX_PER_POLL: usize = 1024;

/// How a stream is sent.
#[derive(Clone, Copy, Debug)]
pub struct StreamConfig {
    /// Send path.
    pub path: SendPath,
    /// Our UDP source port.
    pub src_port: u16,
    /// IPv4 TTL.
    pub ttl: u8,
    /// Seed for RTP SSRC, sequence and timestamp bases and IP identifiers.
    pub seed: u64,
    /// Lateness (ns) beyond which a packet counts as a missed send time.
    pub late_ns: u64,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            path: SendPath::V3,
            src_port: 5004,
            ttl: 64,
            seed: 1,
            late_ns: 1_000_000,
        }
    }
}

/// Counters of a [`Streamer`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Packets handed to the NIC.
    pub packets: u64,
    /// Payload bytes sent.
    pub payload_bytes: u64,
    /// Packets whose payload went by reference.
    pub by_reference: u64,
    /// Packets whose payload was copied.
    pub copied: u64,
    /// Packets sent later than `late_ns` after their send time.
    pub late: u64,
    /// Largest lateness seen (ns).
    pub max_late_ns: u64,
    /// Times the NIC had no buffer or ring space (retried later).
    pub backpressure: u64,
    /// Polls that waited for ARP.
    pub arp_waits: u64,
}

struct Client {
    dst: SocketAddrV4,
    /// Start offset from the stream's clock (clients are staggered).
    offset_ns: u64,
    rtp: Option<RtpParams>,
    ident: u16,
    header: Option<ClientHeader>,
    next: usize,
}

/// Sends a prebuilt stream to several clients.
pub struct Streamer<M: AsRef<[u8]>> {
    meta: MetaFile,
    media: M,
    cfg: StreamConfig,
    clients: Vec<Client>,
    /// Resolved clients by next send time (capacity = clients, allocated once).
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    /// Clients whose next hop is not resolved yet.
    unresolved: Vec<usize>,
    start: Option<u64>,
    by_ref: bool,
    /// Frames built but not yet accepted by the NIC (one form per stream).
    plain: [Desc; BATCH],
    np: usize,
    gather: [(Desc, ExtRef); BATCH],
    ng: usize,
    stats: StreamStats,
}

impl<M: AsRef<[u8]>> Streamer<M> {
    /// A streamer of `media` (whose meta-data is `meta`) to `clients`.
    pub fn new(
        meta: MetaFile,
        media: M,
        clients: &[SocketAddrV4],
        cfg: StreamConfig,
    ) -> Result<Self, NlfError> {
        if media.as_ref().len() as u64 != meta.media_len() {
            return Err(NlfError::BadHeader(
                "media length differs from the meta file's",
            ));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let rtp = meta.rtp();
        // Spread the clients' starts over one mean packet interval, as
        // clients that join at different times would be, so that N clients
        // do not make N packets due at the same instant.
        let interval = meta.duration_ns() / (meta.packets().max(1) as u64);
        let n = clients.len().max(1) as u64;
        let clients = clients
            .iter()
            .enumerate()
            .map(|(i, &dst)| Client {
                dst,
                offset_ns: interval * i as u64 / n,
                // RFC 3550 §5.1: random SSRC, initial sequence number and timestamp.
                rtp: rtp.then(|| RtpParams {
                    ssrc: rng.next_u32(),
                    seq_base: rng.next_u32() as u16,
                    ts_base: rng.next_u32(),
                }),
                ident: rng.next_u32() as u16,
                header: None,
                next: 0,
            })
            .collect::<Vec<_>>();
        let n = clients.len();
        Ok(Streamer {
            meta,
            media,
            cfg,
            clients,
            heap: BinaryHeap::with_capacity(n),
            unresolved: (0..n).collect(),
            start: None,
            by_ref: false,
            plain: [Desc::default(); BATCH],
            np: 0,
            gather: [(Desc::default(), ExtRef::default()); BATCH],
            ng: 0,
            stats: StreamStats::default(),
        })
    }

    /// Prepares sending on `stack`'s NIC: places the media in the NIC's ext
    /// area if it fits (payloads then go by reference). Returns whether they
    /// will. Call once, before the first poll.
    pub fn attach<N: Nic>(&mut self, stack: &mut Stack<N>) -> bool {
        let media = self.media.as_ref();
        let nic = stack.nic_mut();
        self.by_ref = false;
        if self.cfg.path != SendPath::Traditional && nic.ext_capacity() >= media.len() {
            if let Some(area) = nic.ext_area_mut() {
                area[..media.len()].copy_from_slice(media);
                self.by_ref = true;
            }
        }
        self.by_ref
    }

    /// Counters.
    pub fn stats(&self) -> StreamStats {
        self.stats
    }

    /// The meta-data.
    pub fn meta(&self) -> &MetaFile {
        &self.meta
    }

    /// True once every client has been sent every packet.
    pub fn finished(&self) -> bool {
        self.pending_len() == 0 && self.clients.iter().all(|c| c.next >= self.meta.packets())
    }

    /// Sends every packet that is due at `now`, earliest first, batched
    /// across clients: at most [`MAX_PER_POLL`] packets per call, whatever
    /// the number of clients (a heap orders clients by their next send
    /// time; nothing is scanned). The stream's clock starts when the first
    /// client's address is resolved. Returns the next time there is work,
    /// or `None` when the stream is finished.
    pub fn poll<N: Nic>(&mut self, stack: &mut Stack<N>, now: u64) -> Option<u64> {
        // Clients waiting for ARP: each try is one cache lookup.
        let mut i = 0;
        while i < self.unresolved.len() {
            let ci = self.unresolved[i];
            if self.resolve(stack, ci, now) {
                let start = *self.start.get_or_insert(now);
                self.unresolved.swap_remove(i);
                self.schedule(ci, start);
            } else {
                i += 1;
            }
        }
        if !self.unresolved.is_empty() {
            self.stats.arp_waits += 1;
        }
        let mut budget = MAX_PER_POLL;
        if self.flush(stack) {
            let start = self.start.unwrap_or(now);
            let mut bufs = [0u32; BATCH];
            let (mut nb, mut used) = (0, 0);
            while budget > 0 {
                let Some(&Reverse((due, ci))) = self.heap.peek() else {
                    break;
                };
                if due > now {
                    break;
                }
                if used == nb {
                    nb = stack.nic_mut().alloc(&mut bufs[..BATCH.min(budget)]);
                    used = 0;
                    if nb == 0 {
                        self.stats.backpressure += 1;
                        break;
                    }
                }
                self.heap.pop();
                if !self.build(stack, ci as usize, bufs[used]) {
                    // Not built: the client's stream is over or broken.
                    continue;
                }
                used += 1;
                let late = now - due;
                self.stats.max_late_ns = self.stats.max_late_ns.max(late);
                if late > self.cfg.late_ns {
                    self.stats.late += 1;
                }
                self.schedule(ci as usize, start);
                budget -= 1;
                if self.pending_len() == BATCH && !self.flush(stack) {
                    break;
                }
            }
            if used < nb {
                let mut back = [Desc::default(); BATCH];
                for (k, &b) in bufs[used..nb].iter().enumerate() {
                    back[k] = Desc::new(b, 0);
                }
                stack.nic_mut().release(&back[..nb - used]);
            }
            self.flush(stack);
        }
        if self.pending_len() > 0 || budget == 0 {
            return Some(now);
        }
        match self.heap.peek() {
            Some(&Reverse((due, _))) => Some(due),
            None if !self.unresolved.is_empty() => Some(now + 1_000_000),
            None => None,
        }
    }

    /// Puts client `ci` in the heap at its next packet's send time.
    fn schedule(&mut self, ci: usize, start: u64) {
        let c = &self.clients[ci];
        if let Some(p) = self.meta.get(c.next) {
            self.heap
                .push(Reverse((start + c.offset_ns + p.send_ns, ci as u32)));
        }
    }

    fn pending_len(&self) -> usize {
        self.np + self.ng
    }

    /// Writes client `ci`'s next packet into buffer `b` (which it consumes)
    /// and queues the frame.
    fn build<N: Nic>(&mut self, stack: &mut Stack<N>, ci: usize, b: u32) -> bool {
        let media = self.media.as_ref();
        let c = &mut self.clients[ci];
        let sent_len = match (
            c.header.as_mut(),
            self.meta.get(c.next),
            stack.nic_mut().buffers_mut().buf_mut(b),
        ) {
            (Some(hdr), Some(p), Some(buf)) => {
                let payload = payload_of(media, &p);
                let off = 0u16;
                let out = buf;
                match paths::send(self.cfg.path, hdr, &p, payload, out) {
                    Ok(n) if self.cfg.path == SendPath::Traditional => {
                        self.plain[self.np] = Desc {
                            buf: b,
                            off,
                            len: n as u16,
                        };
                        self.np += 1;
                        Some(p.len)
                    }
                    Ok(hl) if self.by_ref => {
                        let ext = ExtRef {
                            off: p.offset,
                            len: p.len as u16,
                        };
                        self.gather[self.ng] = (
                            Desc {
                                buf: b,
                                off,
                                len: hl as u16,
                            },
                            ext,
                        );
                        self.ng += 1;
                        Some(p.len)
                    }
                    Ok(hl) if hl + payload.len() <= out.len() => {
                        out[hl..hl + payload.len()].copy_from_slice(payload);
                        self.plain[self.np] = Desc {
                            buf: b,
                            off,
                            len: (hl + payload.len()) as u16,
                        };
                        self.np += 1;
                        Some(p.len)
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        match sent_len {
            Some(len) => {
                c.next += 1;
                self.stats.payload_bytes += u64::from(len);
                true
            }
            None => {
                stack.nic_mut().release(&[Desc::new(b, 0)]);
                c.next = self.meta.packets();
                false
            }
        }
    }

    /// Hands the queued frames to the NIC; keeps what it refused for the
    /// next call. Returns true if nothing is left queued.
    fn flush<N: Nic>(&mut self, stack: &mut Stack<N>) -> bool {
        if self.ng > 0 {
            let n = stack.transmit_gather(&self.gather[..self.ng]);
            self.gather.copy_within(n..self.ng, 0);
            self.ng -= n;
            self.stats.packets += n as u64;
            self.stats.by_reference += n as u64;
        }
        if self.np > 0 {
            let n = stack.transmit(&self.plain[..self.np]);
            self.plain.copy_within(n..self.np, 0);
            self.np -= n;
            self.stats.packets += n as u64;
            self.stats.copied += n as u64;
        }
        if self.pending_len() > 0 {
            self.stats.backpressure += 1;
        }
        self.pending_len() == 0
    }

    /// Gives back the buffers of frames still queued (after the last poll,
    /// before dropping the streamer).
    pub fn release<N: Nic>(&mut self, stack: &mut Stack<N>) {
        let mut back = [Desc::default(); BATCH];
        let mut n = 0;
        for &(d, _) in &self.gather[..self.ng] {
            back[n] = d;
            n += 1;
        }
        for &d in &self.plain[..self.np] {
            back[n] = d;
            n += 1;
        }
        stack.nic_mut().release(&back[..n]);
        self.ng = 0;
        self.np = 0;
    }

    fn resolve<N: Nic>(&mut self, stack: &mut Stack<N>, i: usize, now: u64) -> bool {
        let c = &mut self.clients[i];
        if c.header.is_some() {
            return true;
        }
        let Ok(Some(mac)) = stack.neighbor(*c.dst.ip(), now) else {
            return false;
        };
        let cfg = ClientConfig {
            src_mac: EthernetAddress(stack.mac()),
            dst_mac: EthernetAddress(mac),
            src_ip: stack.addr(),
            dst_ip: *c.dst.ip(),
            src_port: self.cfg.src_port,
            dst_port: c.dst.port(),
            ttl: self.cfg.ttl,
            dont_frag: false,
            rtp: c.rtp,
        };
        c.header = Some(ClientHeader::new(cfg, c.ident));
        true
    }

    /// Sends up to `count` (at most [`BATCH`]) packets of client `i` now,
    /// regardless of their send times: the send path `poll` uses, without
    /// the pacing (what the `nlf` experiment measures). Returns how many the
    /// NIC accepted.
    pub fn send_batch<N: Nic>(&mut self, stack: &mut Stack<N>, i: usize, count: usize) -> usize {
        let before = self.stats.packets;
        if i >= self.clients.len() || !self.flush(stack) {
            return 0;
        }
        let mut bufs = [0u32; BATCH];
        let got = stack.nic_mut().alloc(&mut bufs[..count.min(BATCH)]);
        let mut used = 0;
        while used < got {
            let b = bufs[used];
            used += 1;
            // `build` consumes `b` either way.
            if !self.build(stack, i, b) {
                break;
            }
        }
        if used < got {
            let mut back = [Desc::default(); BATCH];
            for (k, &b) in bufs[used..got].iter().enumerate() {
                back[k] = Desc::new(b, 0);
            }
            stack.nic_mut().release(&back[..got - used]);
        }
        self.flush(stack);
        (self.stats.packets - before) as usize
    }

    /// Restarts every client's stream from the first packet (for loops and
    /// measurements); pacing restarts at the next poll.
    pub fn rewind(&mut self) {
        for c in &mut self.clients {
            c.next = 0;
        }
        self.heap.clear();
        self.unresolved = (0..self.clients.len()).collect();
        self.start = None;
    }
}

#[inline]
fn payload_of<'a>(media: &'a [u8], p: &PacketMeta) -> &'a [u8] {
    p.range().and_then(|r| media.get(r)).unwrap_or(&[])
}
