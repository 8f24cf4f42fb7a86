//! The stack: wiring of NIC, classifier and protocol state.
//!
//! Its files, one concern each: `config` (start-up configuration and the
//! receive mode), `stats` (counters and typed reasons), `iface` (the
//! link: NIC, batches, neighbours, IP output, hand-back), `control` (ARP,
//! ICMP, fragments, sweeps), `udp` (UDP sockets), `tcp` (connection
//! tables, input, direct placement, output, timers, the protocol handler,
//! the socket calls), `ni` (the ni-lrp engine) and this file (the stack
//! itself and its receive loop, [`Stack::poll`]). The calls an application
//! makes on one socket are in `crate::socket`.
//!
//! **Owns:** one [`Nic`], the [`Classifier`] and its channels, the ARP cache,
//! the reassembler, the UDP socket table, the ICMP rate limiter, the
//! start-up-seeded RNG for ports and IP identifiers, and every counter.
//!
//! **Decides when protocol code runs** — nothing else does. The receive
//! mode ([`ReceiveMode`], chosen at start-up) says where: `eager` (4.4BSD:
//! a shared bounded IP queue, then IP/UDP checks, demultiplexing and TCP
//! input in the receive loop, excess dropped after the work), `early-demux`
//! (demultiplex first and drop at a full channel, then the same work in the
//! receive loop), `ni-lrp` (as `soft-lrp`, but the demultiplexing and the
//! early discard run on a separate NI thread that owns the real NIC: see
//! the `ni` submodule, [`Stack::new_ni_lrp`] and [`NiEngine`]; the host's
//! `poll` then only serves the control and fragment channels and timers),
//! or `soft-lrp`, the default, described here (LRP §3.2–3.3):
//!
//! * [`Stack::poll`] receives a bounded batch of frames and only
//!   demultiplexes them into channels. The two special channels (ARP/ICMP
//!   control, fragments) are drained by `poll` with a bounded budget, standing
//!   in for LRP's proxy daemons (§3.5).
//! * A UDP frame is not looked at again until its socket's receive call: IP
//!   header validation, the UDP checksum and delivery run inside
//!   [`UdpSocketRef::recv_with`](crate::socket::UdpSocketRef::recv_with), in the
//!   caller's context, and only for as many
//!   frames as the caller consumes.
//! * Sending runs IP and UDP in the sender's context and puts the frame on
//!   the NIC's transmit ring.
//!
//! **May not touch:** the wire bytes beyond what `wire` views expose; clocks
//! are read only by [`Stack::now`] (for blocking-style callers); everything
//! below takes `now` in nanoseconds.
//!
//! Work bound of [`Stack::poll`]: at most `rx_batch` frames received and
//! classified, at most `control_budget` control frames and `control_budget`
//! fragments processed, and one ARP/reassembly timer sweep (bounded by their
//! table sizes) every [`TIMER_INTERVAL_NS`].
//!
//! Accounting: every frame the NIC delivers ends in exactly one of the
//! counters named by [`StackStats::frames_accounted`], or is still queued in
//! a channel — a test checks this for random and hostile traffic. In
//! `ni-lrp` the NI's counters are merged in (exact when the engine is
//! quiescent) and channels' inbound rings count as queued.

use std::net::Ipv4Addr;

use rand::RngCore;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::demux::{Classifier, Verdict, CONTROL, FRAGMENT};
use crate::mem::Desc;
use crate::nic::Nic;
use crate::proto::arp::{ArpCache, ArpConfig};
use crate::proto::icmp::RateLimiter;
use crate::proto::ip::{IdentGen, Reassembler};
use crate::proto::udp::PortAllocator;

mod config;
mod control;
pub(crate) use control::frag_needed_quote;
mod attached;
pub mod evict;
mod iface;
mod ni;
mod port;
pub mod ready;
mod stats;
mod tcp;
#[cfg(test)]
mod tests;
mod udp;

pub use attached::AreaNic;
pub use config::{ReceiveMode, StackConfig};
pub use evict::EvictMode;
pub use ni::{
    NiEngine, NiProxy, NiStats, NI_CMDS_PER_STEP, NI_RELEASES_PER_STEP, NI_TX_RETRY_STEPS,
};
pub use stats::{SocketError, StackDrop, StackStats};
pub use tcp::{
    OrphanReset, TcpEvent, TcpListener, TcpStats, TcpStream, MAX_TX_PER_CALL, RX_AHEAD,
    SERVICE_PER_CHANNEL, TX_PAYLOAD_AT,
};
pub use udp::{UdpSocket, MAX_UDP_PAYLOAD};

use iface::{Iface, IfaceStats};
use udp::{parse_udp_frame, DgramStore};

/// Largest receive batch.
pub const MAX_BATCH: usize = 256;

/// Period of the ARP and reassembly timer sweeps.
pub const TIMER_INTERVAL_NS: u64 = 50_000_000;

/// Marks a channel entry that names a reassembled datagram in the stack's
/// datagram store rather than a NIC buffer.
const REASM_TAG: u32 = 0x8000_0000;

/// Marks a channel entry whose IP and UDP checks already ran in the receive
/// loop (`eager` and `early-demux` modes): `recv` does not repeat them.
const CHECKED_TAG: u32 = 0x4000_0000;

/// Work one [`Stack::poll`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollWork {
    /// Frames received from the NIC.
    pub received: usize,
    /// Control frames and fragments processed.
    pub processed: usize,
}

/// A lazynet stack on one NIC.
pub struct Stack<N: Nic> {
    iface: Iface<N>,
    demux: Classifier,
    reasm: Reassembler,
    udp: udp::Udp,
    icmp_limit: RateLimiter,
    ports: PortAllocator,
    tcp: tcp::Tcp,
    mode: ReceiveMode,
    ip_queue: std::collections::VecDeque<Desc>,
    ip_queue_cap: usize,
    rng: ChaCha8Rng,
    rxbuf: Box<[Desc]>,
    rx_batch: usize,
    control_budget: usize,
    next_timer: u64,
    /// [`crate::sched::clock::mono_ns`] when the stack was created.
    epoch_ns: u64,
    stats: StackStats,
    /// `ni-lrp`: the link to the NI thread.
    ni: Option<Box<ni::NiLink>>,
    /// Channels whose bind an attached stack's daemon refused, being
    /// failed (reused).
    refused: Vec<u32>,
    /// Readiness registrations (`ready`).
    registry: ready::Registry,
}

impl<N: Nic> Stack<N> {
    /// A stack on `nic` with configuration `cfg`.
    pub fn new(nic: N, cfg: StackConfig) -> Self {
        // Channel entries carry tags in the top two bits of the buffer index.
        debug_assert!(nic.buffers().count() < CHECKED_TAG, "too many NIC buffers");
        let mac = nic.mac();
        let mtu = nic.mtu();
        // Evicting consumed lines can only help where another core writes
        // the buffers again (`evict`).
        let warm_spare = nic.cross_core_buffers();
        let evict_mode = if warm_spare {
            cfg.rx_evict
        } else {
            EvictMode::Off
        };
        // A choice reaches the writer once its buffers come round: after
        // about as many bytes as the NIC has buffer memory.
        let settle_bytes = u64::from(nic.buffers().count()) * nic.buffers().buf_size() as u64;
        let mask = if cfg.prefix_len == 0 {
            0
        } else {
            u32::MAX << (32 - cfg.prefix_len.min(32) as u32)
        };
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let arp_cfg = ArpConfig {
            hash_seed: rng.next_u64(),
            ..cfg.arp
        };
        let ident = IdentGen::new(rng.next_u64());
        let tcp = tcp::Tcp::new(&cfg, &mut rng);
        let mut demux = Classifier::new(
            mac,
            cfg.addr,
            cfg.prefix_len,
            cfg.control_cap,
            cfg.fragment_cap,
        );
        let reasm = Reassembler::new(cfg.reasm);
        // Keyed from the TCP secret (no extra draw from `rng`): peers cannot
        // choose 4-tuples that collide in the classifier's tables.
        demux.set_hash_key(tcp.demux_key());
        Stack {
            tcp,
            // Without an NI thread, NI demux is soft demux (documented rule).
            mode: match cfg.mode {
                ReceiveMode::NiLrp => ReceiveMode::SoftLrp,
                m => m,
            },
            ip_queue: std::collections::VecDeque::with_capacity(cfg.ip_queue_cap.max(1)),
            ip_queue_cap: cfg.ip_queue_cap.max(1),
            iface: Iface {
                nic,
                mac,
                addr: cfg.addr,
                mask,
                gateway: cfg.gateway,
                ttl: cfg.ttl,
                mtu,
                arp: ArpCache::new(arp_cfg),
                ident,
                release: Vec::with_capacity(MAX_BATCH),
                spare: None,
                warm_spare,
                batch: iface::TxBatch::new(),
                evict: evict::Eviction::new(evict_mode, settle_bytes),
                stats: IfaceStats::default(),
            },
            demux,
            udp: udp::Udp {
                sockets: Vec::new(),
                free: Vec::new(),
                store: DgramStore::new(cfg.reasm_store, reasm.max_datagram()),
                channel_cap: cfg.udp_channel_cap,
            },
            reasm,
            icmp_limit: RateLimiter::new(cfg.icmp_rate.0, cfg.icmp_rate.1, 0),
            ports: PortAllocator::new(cfg.ephemeral_ports.0, cfg.ephemeral_ports.1, 1024),
            rng,
            rxbuf: vec![Desc::default(); MAX_BATCH].into_boxed_slice(),
            rx_batch: cfg.rx_batch.clamp(1, MAX_BATCH),
            control_budget: cfg.control_budget.max(1),
            next_timer: 0,
            epoch_ns: crate::sched::clock::mono_ns(),
            stats: StackStats::default(),
            ni: None,
            refused: Vec::new(),
            registry: ready::Registry::default(),
        }
    }

    /// Monotonic nanoseconds since the stack was created; for callers that
    /// have no clock of their own (blocking-style socket calls, programs).
    pub fn now(&self) -> u64 {
        crate::sched::clock::mono_ns().saturating_sub(self.epoch_ns)
    }

    /// Our IPv4 address.
    pub fn addr(&self) -> Ipv4Addr {
        self.iface.addr
    }

    /// `ni-lrp` (or attached): a probe of the ring on which the NI announces
    /// TCP channels that received frames, for a host's interrupt line.
    pub fn ni_ready_probe(&self) -> Option<crate::mem::RingProbe> {
        self.demux.ready_probe()
    }

    /// The next IPv4 identification for a datagram of `protocol` from our
    /// address to `dst`, from the generator the stack's own datagrams use
    /// (a daemon gives applications' fragmented datagrams theirs, so no
    /// two senders behind one address share one).
    pub fn next_ip_ident(&mut self, dst: Ipv4Addr, protocol: u8) -> u16 {
        let src = self.iface.addr;
        self.iface.ident.next(src, dst, protocol)
    }

    /// Our MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.iface.mac
    }

    /// The NIC.
    pub fn nic(&self) -> &N {
        &self.iface.nic
    }

    /// The NIC, mutably (e.g. to wait for it).
    pub fn nic_mut(&mut self) -> &mut N {
        &mut self.iface.nic
    }

    /// Takes the stack apart and gives back its NIC. Buffers the stack
    /// still holds (queued frames, the spare transmit buffer) are not given
    /// back to the NIC: for a NIC that is reset next, such as
    /// [`WirePair::reset`](crate::nic::wirepair::WirePair::reset).
    pub fn into_nic(self) -> N {
        self.iface.nic
    }

    /// The classifier (read-only: channels and counters).
    pub fn demux(&self) -> &Classifier {
        &self.demux
    }

    /// A snapshot of every counter.
    pub fn stats(&self) -> StackStats {
        let mut s = self.stats.clone();
        s.demux = self.demux.stats().clone();
        s.tx_frames = self.iface.stats.tx_frames;
        s.arp_requests_sent = self.iface.stats.arp_requests_sent;
        for (i, v) in self.iface.stats.drops.iter().enumerate() {
            s.drops[i] += v;
        }
        s.arp = self.iface.arp.counters();
        s.reasm = self.reasm.counters();
        s.tcp = self.tcp.sh.stats.clone();
        s.evict_switches = self.iface.evict.switches();
        self.ni_merge(&mut s);
        s
    }

    /// Received frames still waiting in channels (reassembled datagrams
    /// waiting for their sockets are not frames and are not counted). With
    /// [`StackStats::frames_accounted`] this accounts for every frame:
    /// `rx_frames == frames_accounted() + queued_frames()`. O(queued).
    pub fn queued_frames(&self) -> usize {
        self.ip_queue.len()
            + self
                .demux
                .channels()
                .map(|c| c.iter().filter(|d| d.buf & REASM_TAG == 0).count() + c.inbound_len())
                .sum::<usize>()
            + self.ni_retired_frames()
    }

    /// The receive mode chosen at start-up.
    pub fn mode(&self) -> ReceiveMode {
        self.mode
    }

    #[inline]
    pub(in crate::stack) fn drop_rx(&mut self, r: StackDrop) {
        self.stats.drops[r as usize] += 1;
        self.stats.rx_frame_drops += 1;
    }

    /// One step of the receive loop. Receives at most `rx_batch` frames and
    /// demultiplexes them; processes at most `control_budget` control frames
    /// and as many fragments; runs the timer sweep when due. Returns the work
    /// done (zero means idle).
    pub fn poll(&mut self, now: u64) -> PollWork {
        let mut work = PollWork::default();
        let n = self.iface.nic.recv(&mut self.rxbuf[..self.rx_batch]);
        work.received = n;
        self.stats.rx_frames += n as u64;
        if n > 1 {
            // Classification reads each frame's headers: fetch them all
            // first, so that the misses of a batch another core wrote
            // overlap instead of coming one frame at a time.
            for &d in &self.rxbuf[..n] {
                self.iface.nic.buffers().prefetch_headers(d);
            }
        }
        match self.mode {
            // ni-lrp: the proxy NIC delivers nothing; frames are on channels.
            ReceiveMode::SoftLrp | ReceiveMode::NiLrp => {
                for i in 0..n {
                    let d = self.rxbuf[i];
                    match self.iface.nic.buffers().frame(d) {
                        Some(f) => {
                            if self.demux.deliver(d, f).is_err() {
                                self.iface.release(d);
                            }
                        }
                        None => {
                            // Not a buffer we can name: nothing to release either.
                            self.drop_rx(StackDrop::BadDescriptor);
                        }
                    }
                }
            }
            ReceiveMode::EarlyDemux => {
                for i in 0..n {
                    let d = self.rxbuf[i];
                    self.rx_checked(d, true);
                }
            }
            ReceiveMode::Eager => {
                // The "interrupt": onto the shared IP queue, or dropped.
                for i in 0..n {
                    let d = self.rxbuf[i];
                    if self.ip_queue.len() < self.ip_queue_cap {
                        self.ip_queue.push_back(d);
                    } else if self.iface.nic.buffers().frame(d).is_some() {
                        self.rx_fail(d, StackDrop::IpQueueFull);
                    } else {
                        self.drop_rx(StackDrop::BadDescriptor);
                    }
                }
                // The "software interrupt": IP and UDP input for the whole
                // queue (bounded by its capacity), then demultiplexing.
                for _ in 0..self.ip_queue_cap {
                    let Some(d) = self.ip_queue.pop_front() else {
                        break;
                    };
                    self.rx_checked(d, false);
                }
            }
        }
        work.processed += self.serve_control(now);
        if self.mode.eager_protocol() {
            // TCP input at once, in the receive loop.
            work.processed += self.tcp_service(now, 2 * self.rx_batch);
        }
        if self.iface.warm_spare && self.tcp.has_conns() {
            // Where another core reads our frames, a buffer comes back with
            // its lines in that core's cache, and each store of the next
            // segment's headers would wait for its line to come back (the
            // request/response critical path). Take the next output call's
            // buffer now and fetch its header lines for writing.
            if self.iface.spare.is_none() {
                self.iface.spare = self.iface.alloc();
                if let Some(b) = self.iface.spare {
                    let bufs = self.iface.nic.buffers();
                    // The headers' two lines (and a small payload).
                    bufs.prefetch_write(b, 128);
                }
            }
        } else if let Some(b) = self.iface.spare.take() {
            self.iface.release(Desc::new(b, 0));
        }
        if self.ni.is_some() {
            self.ni_retire();
            self.ni_refusals(now);
        }
        self.iface.flush_release();
        self.iface.nic.flush();
        work
    }

    /// The control and fragment channels, bounded by the control budget,
    /// and the timer sweep when due: the part of [`Stack::poll`] after
    /// receiving. Returns the frames processed.
    fn serve_control(&mut self, now: u64) -> usize {
        let mut n = 0;
        for _ in 0..self.control_budget {
            let Some(d) = self.demux.channel_mut(CONTROL).and_then(|c| c.pop()) else {
                break;
            };
            self.control_input(d, now);
            n += 1;
        }
        for _ in 0..self.control_budget {
            let Some(d) = self.demux.channel_mut(FRAGMENT).and_then(|c| c.pop()) else {
                break;
            };
            self.fragment_input(d, now);
            n += 1;
        }
        if now >= self.next_timer {
            self.timers(now);
            self.next_timer = now + TIMER_INTERVAL_NS;
        }
        n
    }

    /// The daemon's step after it received and classified a batch itself:
    /// control, fragments and timers, then releases and the NIC's flush.
    pub(in crate::stack) fn poll_queued(&mut self, now: u64) -> usize {
        let n = self.serve_control(now);
        self.iface.flush_release();
        self.iface.nic.flush();
        n
    }

    /// Frees one entry the daemon took off a channel of this stack's
    /// classifier (counted as the socket's close).
    pub(in crate::stack) fn release_queued(&mut self, d: Desc) {
        self.drop_queued(d);
        self.iface.flush_release();
    }

    /// The daemon: takes the oldest entry its own stack queued on channel
    /// `c` (a datagram it reassembled for an application's socket) and
    /// copies the whole UDP datagram into `out`. Returns its length (0 if
    /// it did not fit `out`: dropped) and addresses; `None` when the
    /// channel is empty. Anything else queued there is released.
    pub(in crate::stack) fn pop_reassembled(
        &mut self,
        c: crate::demux::ChannelId,
        out: &mut [u8],
    ) -> Option<(usize, Ipv4Addr, Ipv4Addr)> {
        for _ in 0..self.demux.queued(c) + 1 {
            let d = self.demux.channel_mut(c)?.pop()?;
            if d.buf & REASM_TAG == 0 {
                self.drop_queued(d);
                continue;
            }
            let slot = d.buf & !REASM_TAG;
            let r = self.udp.store.get(slot).map(|(b, src, dst)| {
                let n = if b.len() <= out.len() {
                    out[..b.len()].copy_from_slice(b);
                    b.len()
                } else {
                    0
                };
                (n, src, dst)
            });
            self.udp.store.free(slot);
            if r.is_some() {
                self.stats.udp_delivered_reassembled += 1;
                return r;
            }
        }
        None
    }

    /// `eager` and `early-demux`: demultiplexes `d` and, for a UDP socket,
    /// runs the IP and UDP checks now. With `early_drop`, a full channel
    /// drops the frame before the checks; otherwise after them.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn rx_checked(&mut self, d: Desc, early_drop: bool) {
        let Some(f) = self.iface.nic.buffers().frame(d) else {
            self.drop_rx(StackDrop::BadDescriptor);
            return;
        };
        // Classified once; `deliver_classified` queues and counts.
        let v = self.demux.classify(f);
        let c = match v {
            Verdict::Channel(c) if c != CONTROL && c != FRAGMENT && !self.is_tcp_channel(c) => c,
            _ => {
                if self.demux.deliver_classified(d, v).is_err() {
                    self.iface.release(d);
                }
                return;
            }
        };
        let full = self
            .demux
            .channel(c)
            .is_none_or(|ch| ch.len() >= ch.capacity());
        if early_drop && full {
            // Counted as an early discard by the classifier.
            if self.demux.deliver_classified(d, v).is_err() {
                self.iface.release(d);
            }
            return;
        }
        self.stats.udp_checked_in_poll += 1;
        if let Err(e) = parse_udp_frame(f) {
            return self.rx_fail(d, e);
        }
        let tagged = Desc {
            buf: d.buf | CHECKED_TAG,
            ..d
        };
        if self.demux.deliver_classified(tagged, v).is_err() {
            self.stats.udp_dropped_after_work += 1;
            self.iface.release(d);
        }
    }

    /// Releases one entry of a closing socket's channel, counting it: a
    /// reassembled datagram's store slot or a NIC frame (its checked tag
    /// stripped).
    pub(in crate::stack) fn drop_queued(&mut self, d: Desc) {
        self.stats.drops[StackDrop::SocketClosed as usize] += 1;
        if d.buf & REASM_TAG != 0 {
            self.udp.store.free(d.buf & !REASM_TAG);
        } else {
            self.stats.rx_frame_drops += 1;
            self.iface.release(Desc {
                buf: d.buf & !CHECKED_TAG,
                ..d
            });
        }
    }

    #[inline]
    pub(in crate::stack) fn rx_fail(&mut self, d: Desc, r: StackDrop) {
        self.iface.release(d);
        self.drop_rx(r);
    }
}
