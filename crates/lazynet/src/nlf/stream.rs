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
pub const BATCH: usize = 32;

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
    start: Option<u64>,
    by_ref: bool,
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
            .collect();
        Ok(Streamer {
            meta,
            media,
            cfg,
            clients,
            start: None,
            by_ref: false,
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
        self.clients.iter().all(|c| c.next >= self.meta.packets())
    }

    /// Sends every packet that is due at `now` (at most [`BATCH`] per client
    /// per call, so one call's work is bounded by clients × BATCH). The
    /// stream's clock starts when the first client's address is resolved.
    /// Returns the next send time, or `None`
    /// when the stream is finished.
    pub fn poll<N: Nic>(&mut self, stack: &mut Stack<N>, now: u64) -> Option<u64> {
        let mut next_due = None::<u64>;
        for i in 0..self.clients.len() {
            if self.clients[i].next >= self.meta.packets() {
                continue;
            }
            if self.clients[i].header.is_none() && !self.resolve(stack, i, now) {
                self.stats.arp_waits += 1;
                next_due = Some(next_due.map_or(now + 1_000_000, |d| d.min(now + 1_000_000)));
                continue;
            }
            // The stream's clock starts when the first client is resolved,
            // so waiting for ARP does not count as lateness.
            let start = *self.start.get_or_insert(now);
            self.send_due(stack, i, start, now);
            let c = &self.clients[i];
            if let Some(p) = self.meta.get(c.next) {
                let t = self.start.unwrap_or(now) + c.offset_ns + p.send_ns;
                next_due = Some(next_due.map_or(t, |d| d.min(t)));
            }
        }
        next_due
    }

    fn resolve<N: Nic>(&mut self, stack: &mut Stack<N>, i: usize, now: u64) -> bool {
        let c = &mut self.clients[i];
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

    /// Sends client `i`'s due packets, in batches, without waiting.
    fn send_due<N: Nic>(&mut self, stack: &mut Stack<N>, i: usize, start: u64, now: u64) {
        let mut due = 0;
        let first = self.clients[i].next;
        while due < BATCH {
            match self.meta.get(first + due) {
                Some(p) if start + self.clients[i].offset_ns + p.send_ns <= now => due += 1,
                _ => break,
            }
        }
        if due > 0 {
            let sent = self.send_batch(stack, i, due);
            for k in 0..sent {
                if let Some(p) = self.meta.get(first + k) {
                    let late = now.saturating_sub(start + self.clients[i].offset_ns + p.send_ns);
                    self.stats.max_late_ns = self.stats.max_late_ns.max(late);
                    if late > self.cfg.late_ns {
                        self.stats.late += 1;
                    }
                }
            }
        }
    }

    /// Sends up to `count` packets of client `i` now, regardless of their
    /// send times (the measured send path). Returns how many went out.
    pub fn send_batch<N: Nic>(&mut self, stack: &mut Stack<N>, i: usize, count: usize) -> usize {
        let count = count.min(BATCH);
        let mut bufs = [0u32; BATCH];
        let got = stack.nic_mut().alloc(&mut bufs[..count]);
        let mut plain = [Desc::default(); BATCH];
        let mut gather = [(Desc::default(), ExtRef { off: 0, len: 0 }); BATCH];
        let (mut np, mut ng) = (0, 0);
        let media = self.media.as_ref();
        let Some(c) = self.clients.get_mut(i) else {
            return 0;
        };
        let Some(hdr) = c.header.as_mut() else {
            return 0;
        };
        for &b in &bufs[..got] {
            let Some(p) = self.meta.get(c.next + np + ng) else {
                break;
            };
            let Some(out) = stack.nic_mut().buffers_mut().buf_mut(b) else {
                break;
            };
            let payload = payload_of(media, &p);
            match paths::send(self.cfg.path, hdr, &p, payload, out) {
                Ok(n) if self.cfg.path == SendPath::Traditional => {
                    plain[np] = Desc::new(b, n as u16);
                    np += 1;
                }
                Ok(hl) if self.by_ref => {
                    gather[ng] = (
                        Desc::new(b, hl as u16),
                        ExtRef {
                            off: p.offset,
                            len: p.len as u16,
                        },
                    );
                    ng += 1;
                }
                Ok(hl) if hl + payload.len() <= out.len() => {
                    out[hl..hl + payload.len()].copy_from_slice(payload);
                    plain[np] = Desc::new(b, (hl + payload.len()) as u16);
                    np += 1;
                }
                _ => break,
            }
        }
        // A stream uses one of the two forms; never both in one batch.
        let (sent, built) = if ng > 0 {
            (stack.transmit_gather(&gather[..ng]), ng)
        } else {
            (stack.transmit(&plain[..np]), np)
        };
        // Buffers not built or not accepted go back; the identifiers they
        // consumed are simply skipped (IP identifiers need only be unique).
        let mut back = [Desc::default(); BATCH];
        let mut nb = 0;
        for &b in &bufs[built..got] {
            back[nb] = Desc::new(b, 0);
            nb += 1;
        }
        for k in sent..built {
            back[nb] = if ng > 0 { gather[k].0 } else { plain[k] };
            nb += 1;
        }
        if nb > 0 {
            stack.nic_mut().release(&back[..nb]);
        }
        if sent < count {
            self.stats.backpressure += 1;
        }
        for k in 0..sent {
            if let Some(p) = self.meta.get(c.next + k) {
                self.stats.payload_bytes += u64::from(p.len);
            }
        }
        c.next += sent;
        self.stats.packets += sent as u64;
        if ng > 0 {
            self.stats.by_reference += sent as u64;
        } else {
            self.stats.copied += sent as u64;
        }
        sent
    }

    /// Restarts every client's stream from the first packet (for loops and
    /// measurements); pacing restarts at the next poll.
    pub fn rewind(&mut self) {
        for c in &mut self.clients {
            c.next = 0;
        }
        self.start = None;
    }
}

#[inline]
fn payload_of<'a>(media: &'a [u8], p: &PacketMeta) -> &'a [u8] {
    p.range().and_then(|r| media.get(r)).unwrap_or(&[])
}
