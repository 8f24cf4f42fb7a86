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
use crate::sched::{Cx, Periodic, Status};
use crate::stack::Stack;
use crate::wire::EthernetAddress;

/// Largest batch handed to the NIC at once.
pub const BATCH: usize = 64;
/// Most packets one [`Streamer::poll`] sends.
pub const MAX_PER_POLL: usize = 1024;
/// The default period of the streams' handler ([`Streamer::periodic`]):
/// a packet goes at most this early, and the host wakes this often. 2 ms
/// rather than 1: the release jitter and the system's burst that the
/// admission test must allow for weigh half as much against the period, so
/// one core admits more streams (6000 and more against 5000 at 1 ms, on
/// the machine of docs/PERFORMANCE.md), with half the wake-ups; a player's
/// jitter buffer holds far more than 2 ms.
pub const PERIOD_NS: u64 = 2_000_000;
/// The default declared cost of one iteration of the streams' handler (a
/// batch of [`BATCH`] packets): 250 ns a packet. With thousands of clients
/// a packet costs 100–250 ns on the machine of docs/PERFORMANCE.md (each
/// touches another client's header and place in the meta file).
pub const BATCH_COST_NS: u64 = 16_000;

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
    /// How early a packet may go (ns): a poll at `now` sends what is due
    /// by `now + lead_ns`. A periodic handler of period T sends each
    /// period's packets at its release with a lead of T (RTU: B PDUs per
    /// period); a poll-as-you-go sender uses 0.
    pub lead_ns: u64,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            path: SendPath::V3,
            src_port: 5004,
            ttl: 64,
            seed: 1,
            late_ns: 1_000_000,
            lead_ns: 0,
        }
    }
}

/// What one [`Streamer::poll_up_to`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Polled {
    /// Packets the NIC accepted.
    pub sent: usize,
    /// Clients whose next hop it resolved (their streams begin).
    pub resolved: usize,
    /// The next time there is work; `None` when the stream is finished.
    pub next: Option<u64>,
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
    /// Send time of packet `next` while in the wheel.
    due: u64,
    /// Packet `next`'s meta-data, read when it was scheduled; `build`
    /// takes it from here, beside the header, rather than from the meta
    /// file again.
    pkt: Option<PacketMeta>,
    /// When its stream began: when its next hop was resolved.
    start: u64,
}

/// Sends a prebuilt stream to several clients.
pub struct Streamer<M: AsRef<[u8]>> {
    meta: MetaFile,
    media: M,
    cfg: StreamConfig,
    clients: Vec<Client>,
    /// Resolved clients by the slot of their next send time.
    wheel: Wheel,
    /// Clients whose next hop is not resolved yet.
    unresolved: Vec<usize>,
    /// When the first client was resolved: the clock the others' starts
    /// are aligned to.
    start: Option<u64>,
    /// The stream's mean packet interval (the clients' offsets spread over
    /// one).
    interval_ns: u64,
    by_ref: bool,
    /// Free NIC buffers taken for the next packets (`spare[..nspare]`).
    spare: [u32; BATCH],
    nspare: usize,
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
                due: u64::MAX,
                pkt: None,
                start: 0,
            })
            .collect::<Vec<_>>();
        let n = clients.len();
        Ok(Streamer {
            meta,
            media,
            cfg,
            clients,
            wheel: Wheel::new(),
            unresolved: (0..n).collect(),
            start: None,
            interval_ns: interval,
            by_ref: false,
            spare: [0; BATCH],
            nspare: 0,
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

    /// Sends every packet that is due by `now` (plus the configured lead),
    /// batched across clients: at most [`MAX_PER_POLL`] packets per call,
    /// whatever the number of clients (a timing wheel holds the clients by
    /// the slot of their next send time; a packet costs one pop and one
    /// push, nothing is scanned or sorted). A client's stream starts when
    /// its address is resolved. Returns the next time there
    /// is work, or `None` when the stream is finished.
    pub fn poll<N: Nic>(&mut self, stack: &mut Stack<N>, now: u64) -> Option<u64> {
        self.poll_up_to(stack, now, MAX_PER_POLL).next
    }

    /// [`Streamer::poll`] sending at most `max` packets (a periodic
    /// handler's iteration is one batch).
    pub fn poll_up_to<N: Nic>(&mut self, stack: &mut Stack<N>, now: u64, max: usize) -> Polled {
        // Clients waiting for ARP: each try is one cache lookup and, once
        // resolved, a header template; at most a batch of tries per call,
        // so that a poll stays short however many clients start at once.
        let (mut i, mut resolved) = (0, 0);
        for _ in 0..BATCH {
            if i >= self.unresolved.len() {
                break;
            }
            let ci = self.unresolved[i];
            if self.resolve(stack, ci, now) {
                resolved += 1;
                // Its stream begins now, or at the next multiple of the
                // mean packet interval on the first client's clock: a
                // client that waited for ARP gets no burst of the packets
                // it missed, and the clients stay spread over the interval
                // (their offsets) whenever each was resolved.
                let first = *self.start.get_or_insert(now);
                let m = now.saturating_sub(first).div_ceil(self.interval_ns.max(1));
                self.clients[ci].start = first
                    .saturating_add(m.saturating_mul(self.interval_ns))
                    .max(now);
                self.unresolved.swap_remove(i);
                self.schedule(ci);
            } else {
                i += 1;
            }
        }
        // The ones not tried go first next time.
        self.unresolved.rotate_left(i);
        if !self.unresolved.is_empty() {
            self.stats.arp_waits += 1;
        }
        let before = self.stats.packets;
        let mut budget = max.min(MAX_PER_POLL);
        let cutoff = now.saturating_add(self.cfg.lead_ns);
        if self.flush(stack) {
            self.wheel.begin();
            while budget > 0 {
                let clients = &self.clients;
                let Some(ci) = self.wheel.pop(cutoff, |ci| clients[ci as usize].due) else {
                    break;
                };
                let due = self.clients[ci as usize].due;
                if self.nspare == 0 {
                    // Buffers are taken a batch at a time, once a packet is
                    // due, and what a poll does not use is kept for the
                    // next one ([`Streamer::release`] gives them back).
                    self.nspare = stack.nic_mut().alloc(&mut self.spare);
                    if self.nspare == 0 {
                        self.stats.backpressure += 1;
                        self.wheel.insert(ci, due);
                        break;
                    }
                }
                // The next client's state (header template, packet) is
                // wherever it is in memory: start fetching it now.
                if let Some(next) = self.wheel.peek() {
                    crate::mem::prefetch(&self.clients[next as usize]);
                }
                self.nspare -= 1;
                let b = self.spare[self.nspare];
                if !self.build(stack, ci as usize, b) {
                    // Not built (`build` gave the buffer back): the
                    // client's stream is over or broken.
                    continue;
                }
                let late = now.saturating_sub(due);
                self.stats.max_late_ns = self.stats.max_late_ns.max(late);
                if late > self.cfg.late_ns {
                    self.stats.late += 1;
                }
                self.schedule(ci as usize);
                budget -= 1;
                if self.pending_len() == BATCH && !self.flush(stack) {
                    break;
                }
            }
            self.flush(stack);
        }
        let sent = (self.stats.packets - before) as usize;
        if self.pending_len() > 0 || budget == 0 || (resolved > 0 && !self.unresolved.is_empty()) {
            return Polled {
                sent,
                resolved,
                next: Some(now),
            };
        }
        let clients = &self.clients;
        let next = match self.wheel.next_due(|ci| clients[ci as usize].due) {
            // Less the lead it sends ahead.
            Some(t) => Some(t.saturating_sub(self.cfg.lead_ns).max(now)),
            None if !self.unresolved.is_empty() => Some(now + 1_000_000),
            None => None,
        };
        Polled {
            sent,
            resolved,
            next,
        }
    }

    /// The periodic class that carries these streams (RTU §III-D, media on
    /// demand): period `period_ns`; a batch of [`BATCH`]-packet iterations,
    /// each declared at `batch_ns`, enough for a quarter more than the
    /// packets the clients send in a period on average, and one (a
    /// variable-rate stream's bursts, clients whose packets fall together).
    /// Also sets the lead to one period: each release sends the packets of
    /// the period it begins.
    pub fn periodic(&mut self, period_ns: u64, batch_ns: u64) -> Periodic {
        self.cfg.lead_ns = period_ns;
        let pps = self.meta.packets() as f64 * 1e9 / self.meta.duration_ns().max(1) as f64
            * self.clients.len() as f64;
        let per_period = pps * period_ns as f64 / 1e9;
        Periodic {
            period_ns,
            batch: (1.25 * per_period / BATCH as f64).ceil() as u32 + 1,
            iteration_ns: batch_ns.max(1),
        }
    }

    /// The body of the streams' periodic handler: sends what is due, one
    /// [`BATCH`] per iteration, until nothing is due, the batch is spent or
    /// a more urgent handler is released. `Done` when every client has
    /// every packet.
    pub fn serve_period<N: Nic>(&mut self, stack: &mut Stack<N>, cx: &mut Cx<'_>) -> Status {
        let now = stack.now();
        // Bounded by the period's batch (`iteration_done`), and for a
        // demoted (best-effort) handler by one poll's worth.
        for _ in 0..MAX_PER_POLL / BATCH {
            let p = self.poll_up_to(stack, now, BATCH);
            if p.next.is_none() {
                return Status::Done;
            }
            if p.sent < BATCH && p.resolved == 0 {
                // Nothing more due this period (or the NIC is full: the
                // next release retries). Clients resolved this time may
                // have packets due: one more round for them.
                return Status::Wait;
            }
            if !cx.iteration_done() {
                return Status::Ready;
            }
        }
        Status::Ready
    }

    /// Puts client `ci` in the wheel at its next packet's send time.
    fn schedule(&mut self, ci: usize) {
        let c = &mut self.clients[ci];
        if let Some(p) = self.meta.get(c.next) {
            c.due = c.start + c.offset_ns + p.send_ns;
            c.pkt = Some(p);
            self.wheel.insert(ci as u32, c.due);
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
        // Scheduled with its packet's meta-data, or (`send_batch`) not.
        let pkt = c.pkt.take().or_else(|| self.meta.get(c.next));
        let sent_len = match (
            c.header.as_mut(),
            pkt,
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

    /// Gives back the buffers of frames still queued and the free buffers
    /// kept for the next packets (after the last poll, before dropping the
    /// streamer).
    pub fn release<N: Nic>(&mut self, stack: &mut Stack<N>) {
        self.give_back_spares(stack);
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

    /// Returns the free buffers kept for the next packets to the NIC.
    fn give_back_spares<N: Nic>(&mut self, stack: &mut Stack<N>) {
        let mut back = [Desc::default(); BATCH];
        for (d, &b) in back.iter_mut().zip(&self.spare[..self.nspare]) {
            *d = Desc::new(b, 0);
        }
        stack.nic_mut().release(&back[..self.nspare]);
        self.nspare = 0;
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
    /// NIC accepted; 0 for a client not resolved yet. Not to be mixed with
    /// [`Streamer::poll`] on the same streamer: a paced client would keep
    /// the send time of the packet this one skipped ahead of.
    pub fn send_batch<N: Nic>(&mut self, stack: &mut Stack<N>, i: usize, count: usize) -> usize {
        let before = self.stats.packets;
        if self.clients.get(i).is_none_or(|c| c.header.is_none()) || !self.flush(stack) {
            return 0;
        }
        // Buffers a poll kept go back: this path takes its own.
        self.give_back_spares(stack);
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
            c.pkt = None;
        }
        self.wheel.clear();
        self.unresolved = (0..self.clients.len()).collect();
        self.start = None;
    }
}

/// Width of a wheel slot.
pub const SLOT_NS: u64 = 100_000;
/// Slots in the wheel: a span of 0.4 s. A client further ahead waits in its
/// slot and is passed over (looked at, not sent) once per revolution.
const SLOTS: usize = 4096;

/// Clients by the slot of their next send time: a timing wheel (Varghese
/// and Lauck's scheme 4, hashed by slot). A packet costs one pop and one
/// push; the slots' vectors grow to their largest occupancy once and are
/// reused, so nothing is allocated per packet. Written here rather than
/// taken from a crate: it holds client indices whose send times are
/// computed from the stream, not owned timers, and it is small and on
/// the pacing path.
struct Wheel {
    slots: Vec<Vec<u32>>,
    /// Absolute index of the slot being drained.
    cursor: u64,
    /// Popped from the current slot but not due by this poll's cutoff.
    deferred: Vec<u32>,
    len: usize,
}

impl Wheel {
    fn new() -> Self {
        Wheel {
            slots: (0..SLOTS).map(|_| Vec::new()).collect(),
            cursor: 0,
            deferred: Vec::new(),
            len: 0,
        }
    }

    fn clear(&mut self) {
        for s in &mut self.slots {
            s.clear();
        }
        self.deferred.clear();
        self.cursor = 0;
        self.len = 0;
    }

    fn insert(&mut self, ci: u32, due: u64) {
        let mut abs = due / SLOT_NS;
        if self.len == 0 || (abs < self.cursor && self.deferred.is_empty()) {
            // The cursor may move back: a slot only says when a client is
            // looked at, `pop` checks its send time, so a slot visited a
            // revolution early just passes it over. Not in the middle of a
            // slot's drain (`deferred` belongs to the cursor's slot); there
            // the cursor's slot has begun and the client is due at once.
            self.cursor = abs;
        }
        abs = abs.max(self.cursor);
        self.slots[(abs % SLOTS as u64) as usize].push(ci);
        self.len += 1;
    }

    /// Starts a poll: what the last poll deferred is looked at again.
    fn begin(&mut self) {
        let slot = &mut self.slots[(self.cursor % SLOTS as u64) as usize];
        slot.append(&mut self.deferred);
    }

    /// A client due by `cutoff`, if any; `due_of` gives a client's send
    /// time. Within one poll `cutoff` must not change.
    fn pop(&mut self, cutoff: u64, due_of: impl Fn(u32) -> u64) -> Option<u32> {
        // Slots are passed at most up to the cutoff: the walk is bounded by
        // the time since the last poll, and here by 2^20 slots (105 s of a
        // stalled sender; the next poll goes on).
        for _ in 0..1u32 << 20 {
            if self.len == 0 || self.cursor.saturating_mul(SLOT_NS) > cutoff {
                return None;
            }
            let i = (self.cursor % SLOTS as u64) as usize;
            while let Some(ci) = self.slots[i].pop() {
                if due_of(ci) <= cutoff {
                    self.len -= 1;
                    return Some(ci);
                }
                self.deferred.push(ci);
            }
            let slot_end = (self.cursor + 1).saturating_mul(SLOT_NS);
            // The slot is empty but for what is not due yet.
            std::mem::swap(&mut self.slots[i], &mut self.deferred);
            if cutoff < slot_end {
                return None;
            }
            // Passed: what is left belongs to later revolutions.
            self.cursor += 1;
        }
        None
    }

    /// The client the next pop looks at first, if any (for a prefetch).
    fn peek(&self) -> Option<u32> {
        self.slots[(self.cursor % SLOTS as u64) as usize]
            .last()
            .copied()
    }

    /// The earliest send time, if any client is in: the earliest of the
    /// first slot holding a client of this revolution (clients a revolution
    /// or more ahead are passed over; a client already late, in the
    /// cursor's slot, counts). At most one pass over the wheel, once per
    /// poll.
    fn next_due(&self, due_of: impl Fn(u32) -> u64) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        let mut far = u64::MAX;
        for k in 0..SLOTS as u64 {
            let abs = self.cursor + k;
            let slot = &self.slots[(abs % SLOTS as u64) as usize];
            let extra: &[u32] = if k == 0 { &self.deferred } else { &[] };
            let end = (abs + 1).saturating_mul(SLOT_NS);
            let mut best = u64::MAX;
            for &ci in slot.iter().chain(extra) {
                let d = due_of(ci);
                if d < end {
                    best = best.min(d);
                } else {
                    far = far.min(d);
                }
            }
            if best != u64::MAX {
                return Some(best);
            }
        }
        // Only clients more than a revolution ahead.
        Some(far)
    }
}

#[inline]
fn payload_of<'a>(media: &'a [u8], p: &PacketMeta) -> &'a [u8] {
    p.range().and_then(|r| media.get(r)).unwrap_or(&[])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against a plain list: every poll (a rising cutoff) pops exactly
        /// the clients due by its cutoff, each once, whatever the send
        /// times (within a slot, many slots ahead, beyond a revolution,
        /// already late) and however a poll is cut short.
        #[test]
        fn the_wheel_pops_exactly_what_is_due(
            dues in prop::collection::vec(0u64..2_000_000_000, 1..200),
            steps in prop::collection::vec((1u64..300_000_000, 1usize..64), 1..40),
        ) {
            let mut w = Wheel::new();
            for (ci, &d) in dues.iter().enumerate() {
                w.insert(ci as u32, d);
            }
            let mut left: Vec<u32> = (0..dues.len() as u32).collect();
            let mut cutoff = 0u64;
            for &(step, max) in &steps {
                cutoff += step;
                w.begin();
                let mut got = Vec::new();
                while got.len() < max {
                    match w.pop(cutoff, |ci| dues[ci as usize]) {
                        Some(ci) => got.push(ci),
                        None => break,
                    }
                }
                for ci in &got {
                    prop_assert!(dues[*ci as usize] <= cutoff, "{ci} popped before its time");
                    let k = left.iter().position(|x| x == ci);
                    prop_assert!(k.is_some(), "{ci} popped twice");
                    left.swap_remove(k.unwrap());
                }
                if got.len() < max {
                    // Not cut short: nothing due is left behind.
                    prop_assert!(left.iter().all(|&ci| dues[ci as usize] > cutoff));
                }
                prop_assert_eq!(w.len, left.len());
            }
        }
    }

    proptest! {
        /// As the streamer uses it: a popped client goes back in at its
        /// next packet's time (often in the slot being drained, sometimes
        /// already late). Every packet comes out once, in each client's
        /// order, never before its time, and a poll not cut short leaves
        /// nothing due behind.
        #[test]
        fn rescheduled_clients_come_out_in_order_and_on_time(
            gaps in prop::collection::vec(prop::collection::vec(0u64..3_000_000, 1..30), 1..40),
            start in 0u64..1_000_000_000,
            steps in prop::collection::vec((1u64..5_000_000, 1usize..100), 1..60),
        ) {
            // Client c's k-th packet is due at start + sum of its first k+1 gaps.
            let dues: Vec<Vec<u64>> = gaps
                .iter()
                .map(|g| g.iter().scan(start, |t, d| { *t += d; Some(*t) }).collect())
                .collect();
            let mut next = vec![0usize; dues.len()];
            let mut w = Wheel::new();
            for (ci, d) in dues.iter().enumerate() {
                w.insert(ci as u32, d[0]);
            }
            let mut cutoff = start;
            for &(step, max) in &steps {
                cutoff += step;
                w.begin();
                let mut n = 0;
                while n < max {
                    let due = |ci: u32| dues[ci as usize].get(next[ci as usize]).copied().unwrap_or(u64::MAX);
                    let Some(ci) = w.pop(cutoff, due) else { break };
                    let c = ci as usize;
                    prop_assert!(dues[c][next[c]] <= cutoff);
                    next[c] += 1;
                    if let Some(&d) = dues[c].get(next[c]) {
                        w.insert(ci, d);
                    }
                    n += 1;
                }
                if n < max {
                    for (c, d) in dues.iter().enumerate() {
                        prop_assert!(d.get(next[c]).is_none_or(|&t| t > cutoff), "client {c} left behind");
                    }
                }
            }
        }
    }

    #[test]
    fn the_wheel_reports_the_next_send_time() {
        let dues = [5 * SLOT_NS + 70, 5 * SLOT_NS + 7, 9 * SLOT_NS + 3];
        let due = |ci: u32| dues[ci as usize];
        let mut w = Wheel::new();
        assert_eq!(w.next_due(due), None);
        for (ci, &d) in dues.iter().enumerate() {
            w.insert(ci as u32, d);
        }
        assert_eq!(w.next_due(due), Some(5 * SLOT_NS + 7));
        w.begin();
        // A poll inside the slot: the one due at +7 goes, +70 waits.
        assert_eq!(w.pop(5 * SLOT_NS + 50, due), Some(1));
        assert_eq!(w.pop(5 * SLOT_NS + 50, due), None);
        assert_eq!(w.next_due(due), Some(5 * SLOT_NS + 70));
        w.begin();
        assert_eq!(w.pop(6 * SLOT_NS, due), Some(0));
        assert_eq!(w.pop(6 * SLOT_NS, due), None);
        assert_eq!(w.next_due(due), Some(9 * SLOT_NS + 3));
        // A client a revolution ahead in an earlier slot does not hide one
        // due sooner in a later slot.
        let dues = [(SLOTS as u64 + 12) * SLOT_NS, 20 * SLOT_NS + 1];
        let due = |ci: u32| dues[ci as usize];
        let mut w = Wheel::new();
        w.insert(1, dues[1]);
        w.insert(0, dues[0]);
        w.cursor = 0;
        assert_eq!(w.next_due(due), Some(20 * SLOT_NS + 1));
    }
}
