//! The stack: wiring of NIC, classifier and protocol state.
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
//!   [`Stack::udp_recv_with`], in the caller's context, and only for as many
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

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Instant;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::demux::{BindError, ChannelId, Classifier, DemuxStats, Verdict, CONTROL, FRAGMENT};
use crate::mem::Desc;
use crate::nic::Nic;
use crate::proto::arp::{ArpCache, ArpConfig, ArpCounters, ArpUpdate, Resolve};
use crate::proto::icmp::{may_send_error, ErrorContext, RateLimiter};
use crate::proto::ip::{
    fragment_plan, IdentGen, ReasmConfig, ReasmCounters, ReasmKey, Reassembler,
};
use crate::proto::udp::PortAllocator;
use crate::wire::checksum;
use crate::wire::ethernet::{
    EthernetAddress, EthernetRepr, ETHERTYPE_ARP, ETHERTYPE_IPV4, HEADER_LEN as ETH_LEN,
};
use crate::wire::icmp::{self, IcmpPacket};
use crate::wire::ipv4::{PROTO_ICMP, PROTO_UDP};
use crate::wire::{ArpOperation, ArpPacket, ArpRepr, Ipv4Packet, Ipv4Repr, UdpPacket, UdpRepr};

pub mod handback;
mod ni;
mod tcp;
#[cfg(test)]
mod tests;

pub use handback::HandbackMode;
pub use ni::{NiEngine, NiNic, NiStats, NI_CMDS_PER_STEP, NI_RELEASES_PER_STEP, NI_TX_RETRY_STEPS};

pub use tcp::{
    ListenHandle, TcpEvent, TcpHandle, TcpStats, MAX_TX_PER_CALL, RX_AHEAD, SERVICE_PER_CHANNEL,
    TX_PAYLOAD_AT,
};

/// Largest receive batch.
pub const MAX_BATCH: usize = 256;
/// Period of the ARP and reassembly timer sweeps.
pub const TIMER_INTERVAL_NS: u64 = 50_000_000;
/// Largest UDP payload (65535 − 20 − 8).
pub const MAX_UDP_PAYLOAD: usize = 65507;
/// Marks a channel entry that names a reassembled datagram in the stack's
/// datagram store rather than a NIC buffer.
const REASM_TAG: u32 = 0x8000_0000;
/// Marks a channel entry whose IP and UDP checks already ran in the receive
/// loop (`eager` and `early-demux` modes): `recv` does not repeat them.
const CHECKED_TAG: u32 = 0x4000_0000;

/// Where protocol processing of received packets runs (ARCHITECTURE.md
/// "Receive modes"; LRP §2–3). Chosen at start-up; all protocol code is
/// shared, only its place differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ReceiveMode {
    /// 4.4BSD: every frame goes first to one shared, bounded IP queue; the
    /// receive loop then runs IP and UDP checks and demultiplexes, and runs
    /// TCP input, at once — so excess is dropped at the IP queue or at a
    /// full socket channel *after* the work was spent.
    Eager,
    /// Demultiplexing first, dropping at a full channel before any work;
    /// then the receive loop runs IP/UDP checks and TCP input at once.
    EarlyDemux,
    /// Lazy receiver processing: the receive loop only demultiplexes; UDP
    /// checks run inside `recv`, TCP input in the owner's socket calls or
    /// protocol handler ([`Stack::tcp_service`]).
    #[default]
    SoftLrp,
    /// Lazy receiver processing with NI demux (LRP §3.2): demultiplexing
    /// and early discard run on a separate NI thread ([`NiEngine`], built by
    /// [`Stack::new_ni_lrp`]); the host spends nothing on a frame until its
    /// owner takes it; protocol work is placed as in `SoftLrp`. Given to
    /// [`Stack::new`], which has no NI thread to run it on, it means
    /// `SoftLrp` (and [`Stack::mode`] says so).
    NiLrp,
}

impl ReceiveMode {
    /// True if the receive loop runs protocol processing itself.
    pub const fn eager_protocol(self) -> bool {
        !matches!(self, ReceiveMode::SoftLrp | ReceiveMode::NiLrp)
    }

    /// Every mode, in the order of the table in ARCHITECTURE.md.
    pub const ALL: [ReceiveMode; 4] = [
        ReceiveMode::Eager,
        ReceiveMode::EarlyDemux,
        ReceiveMode::SoftLrp,
        ReceiveMode::NiLrp,
    ];

    /// The mode named `s` (as [`ReceiveMode::name`] writes it).
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == s)
    }

    /// The name used on command lines and in results.
    pub const fn name(self) -> &'static str {
        match self {
            ReceiveMode::Eager => "eager",
            ReceiveMode::EarlyDemux => "early-demux",
            ReceiveMode::SoftLrp => "soft-lrp",
            ReceiveMode::NiLrp => "ni-lrp",
        }
    }
}

/// Start-up configuration of a [`Stack`].
#[derive(Clone, Debug)]
pub struct StackConfig {
    /// Our IPv4 address.
    pub addr: Ipv4Addr,
    /// Prefix length of our subnet.
    pub prefix_len: u8,
    /// Next hop for destinations outside the subnet.
    pub gateway: Option<Ipv4Addr>,
    /// Frames received per [`Stack::poll`] (≤ [`MAX_BATCH`]).
    pub rx_batch: usize,
    /// Control frames, and separately fragments, processed per poll.
    pub control_budget: usize,
    /// Capacity of the control channel.
    pub control_cap: usize,
    /// Capacity of the fragment channel.
    pub fragment_cap: usize,
    /// Default capacity of a UDP socket's channel.
    pub udp_channel_cap: usize,
    /// ICMP error rate limit (per second) and burst.
    pub icmp_rate: (u32, u32),
    /// Reassembled datagrams that may wait for their sockets at once.
    pub reasm_store: usize,
    /// TTL of packets we send.
    pub ttl: u8,
    /// Seed of the RNG for ephemeral ports and IP identifiers. Tests fix it;
    /// programs take it from the OS at start-up.
    pub seed: u64,
    /// ARP cache limits.
    pub arp: ArpConfig,
    /// Reassembly limits.
    pub reasm: ReasmConfig,
    /// Default configuration of TCP connections (the MSS is lowered to fit
    /// the NIC's MTU).
    pub tcp: crate::proto::tcp::Config,
    /// Default configuration of TCP listeners.
    pub tcp_listen: crate::proto::tcp::ListenConfig,
    /// Capacity of a TCP connection's channel (a listener's is at least
    /// its backlog).
    pub tcp_channel_cap: usize,
    /// RSTs per second (and burst) for segments to closed ports.
    pub tcp_rst_rate: (u32, u32),
    /// Capacity of the TIME-WAIT table (the oldest entry is evicted when
    /// it is full).
    pub tcp_time_wait_cap: usize,
    /// Where received packets are processed.
    pub mode: ReceiveMode,
    /// Capacity of the shared IP queue of the `eager` mode (4.4BSD's
    /// `ipintrq` held 50).
    pub ip_queue_cap: usize,
    /// Whether the receiver evicts a consumed frame's cache lines where
    /// another core writes the NIC's buffers (see [`handback`]).
    pub rx_handback: HandbackMode,
}

impl Default for StackConfig {
    fn default() -> Self {
        StackConfig {
            addr: Ipv4Addr::new(10, 201, 0, 2),
            prefix_len: 24,
            gateway: None,
            rx_batch: 64,
            control_budget: 32,
            control_cap: 256,
            fragment_cap: 256,
            udp_channel_cap: 256,
            icmp_rate: (1000, 50),
            reasm_store: 16,
            ttl: 64,
            seed: 0x006c_617a_796e_6574,
            // Fragmented datagrams may wait for ARP as a whole: allow a
            // 64 KiB datagram's fragments per address.
            arp: ArpConfig {
                queue_per_addr: 48,
                ..ArpConfig::default()
            },
            reasm: ReasmConfig::default(),
            tcp: crate::proto::tcp::Config::default(),
            tcp_listen: crate::proto::tcp::ListenConfig::default(),
            tcp_channel_cap: 256,
            tcp_rst_rate: (1000, 50),
            tcp_time_wait_cap: 8192,
            mode: ReceiveMode::SoftLrp,
            ip_queue_cap: 50,
            rx_handback: HandbackMode::Adaptive,
        }
    }
}

/// Why the stack dropped a frame or datagram after demultiplexing, or could
/// not send. Small and `Copy`; each has a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum StackDrop {
    /// The NIC handed over a descriptor outside its buffers.
    BadDescriptor = 0,
    /// Malformed IPv4 header (found by the lazy receiver).
    IpHeader,
    /// IPv4 header checksum wrong.
    IpChecksum,
    /// UDP length field inconsistent.
    UdpHeader,
    /// UDP checksum wrong.
    UdpChecksum,
    /// A connected socket got a datagram from another peer.
    UdpNotFromPeer,
    /// UDP to a port nobody bound (answered with port unreachable if allowed).
    UdpNoSocket,
    /// ICMP message too short.
    IcmpMalformed,
    /// ICMP checksum wrong.
    IcmpChecksum,
    /// ICMP type we do not act on.
    IcmpUnhandled,
    /// ARP packet malformed or not Ethernet/IPv4.
    ArpMalformed,
    /// The reassembler refused a fragment (details in its counters).
    FragRefused,
    /// A reassembled datagram for no socket.
    ReasmNoSocket,
    /// The store of reassembled datagrams is full.
    ReasmStoreFull,
    /// The socket's channel was full for a reassembled datagram.
    ReasmChannelFull,
    /// A reassembled datagram of a protocol we do not handle.
    ReasmUnsupported,
    /// Still queued when its socket was closed.
    SocketClosed,
    /// No free transmit buffer.
    TxNoBuffer,
    /// The NIC's transmit ring was full.
    TxRingFull,
    /// Too many packets waiting for ARP resolution.
    ArpQueueFull,
    /// The ARP table is full of unresolved entries.
    ArpNoSpace,
    /// Waiting packets given up after unanswered ARP requests.
    ArpGiveUp,
    /// No route to the destination.
    NoRoute,
    /// TCP header malformed (data offset, options).
    TcpHeader,
    /// TCP checksum wrong.
    TcpChecksum,
    /// TCP to no connection and no listener (answered with a rate-limited
    /// RST unless it was a RST).
    TcpNoSocket,
    /// A segment for a just-accepted connection found its channel full.
    TcpRedirectFull,
    /// `eager` mode: the shared IP queue was full.
    IpQueueFull,
}

impl StackDrop {
    /// Every reason, in counter order.
    pub const ALL: [StackDrop; 28] = [
        StackDrop::BadDescriptor,
        StackDrop::IpHeader,
        StackDrop::IpChecksum,
        StackDrop::UdpHeader,
        StackDrop::UdpChecksum,
        StackDrop::UdpNotFromPeer,
        StackDrop::UdpNoSocket,
        StackDrop::IcmpMalformed,
        StackDrop::IcmpChecksum,
        StackDrop::IcmpUnhandled,
        StackDrop::ArpMalformed,
        StackDrop::FragRefused,
        StackDrop::ReasmNoSocket,
        StackDrop::ReasmStoreFull,
        StackDrop::ReasmChannelFull,
        StackDrop::ReasmUnsupported,
        StackDrop::SocketClosed,
        StackDrop::TxNoBuffer,
        StackDrop::TxRingFull,
        StackDrop::ArpQueueFull,
        StackDrop::ArpNoSpace,
        StackDrop::ArpGiveUp,
        StackDrop::NoRoute,
        StackDrop::TcpHeader,
        StackDrop::TcpChecksum,
        StackDrop::TcpNoSocket,
        StackDrop::TcpRedirectFull,
        StackDrop::IpQueueFull,
    ];

    /// A short stable name for counters.
    pub const fn name(self) -> &'static str {
        match self {
            StackDrop::BadDescriptor => "bad_descriptor",
            StackDrop::IpHeader => "ip_header",
            StackDrop::IpChecksum => "ip_checksum",
            StackDrop::UdpHeader => "udp_header",
            StackDrop::UdpChecksum => "udp_checksum",
            StackDrop::UdpNotFromPeer => "udp_not_from_peer",
            StackDrop::UdpNoSocket => "udp_no_socket",
            StackDrop::IcmpMalformed => "icmp_malformed",
            StackDrop::IcmpChecksum => "icmp_checksum",
            StackDrop::IcmpUnhandled => "icmp_unhandled",
            StackDrop::ArpMalformed => "arp_malformed",
            StackDrop::FragRefused => "frag_refused",
            StackDrop::ReasmNoSocket => "reasm_no_socket",
            StackDrop::ReasmStoreFull => "reasm_store_full",
            StackDrop::ReasmChannelFull => "reasm_channel_full",
            StackDrop::ReasmUnsupported => "reasm_unsupported",
            StackDrop::SocketClosed => "socket_closed",
            StackDrop::TxNoBuffer => "tx_no_buffer",
            StackDrop::TxRingFull => "tx_ring_full",
            StackDrop::ArpQueueFull => "arp_queue_full",
            StackDrop::ArpNoSpace => "arp_no_space",
            StackDrop::ArpGiveUp => "arp_give_up",
            StackDrop::NoRoute => "no_route",
            StackDrop::TcpHeader => "tcp_header",
            StackDrop::TcpChecksum => "tcp_checksum",
            StackDrop::TcpNoSocket => "tcp_no_socket",
            StackDrop::TcpRedirectFull => "tcp_redirect_full",
            StackDrop::IpQueueFull => "ip_queue_full",
        }
    }
}

/// Errors of socket operations. Small and `Copy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocketError {
    /// Nothing to receive yet (non-blocking call).
    WouldBlock,
    /// A blocking-style call ran out of time.
    TimedOut,
    /// The address and port are bound already.
    AddrInUse,
    /// The local address is not ours.
    AddrNotAvailable,
    /// No ephemeral port is free.
    NoPorts,
    /// The handle does not name an open socket.
    BadHandle,
    /// `send`/`recv` on a socket that is not connected.
    NotConnected,
    /// Payload larger than a UDP datagram can carry.
    TooBig,
    /// No route to the destination.
    NoRoute,
    /// No transmit buffer or ring space now; try again after a poll.
    NoBuffers,
    /// The datagram was dropped on the way out (see the counters).
    Dropped,
    /// The peer answered the SYN with a RST.
    ConnectionRefused,
    /// The peer reset the connection.
    ConnectionReset,
}

impl std::fmt::Display for SocketError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for SocketError {}

/// Counters of a [`Stack`], readable through [`Stack::stats`].
#[derive(Clone, Debug, Default)]
pub struct StackStats {
    /// Frames the NIC delivered.
    pub rx_frames: u64,
    /// Frames handed to the NIC for transmission.
    pub tx_frames: u64,
    /// The classifier's counters.
    pub demux: DemuxStats,
    /// UDP datagrams delivered to applications from single frames.
    pub udp_delivered: u64,
    /// UDP datagrams delivered to applications after reassembly.
    pub udp_delivered_reassembled: u64,
    /// UDP datagrams sent.
    pub udp_sent: u64,
    /// ARP frames processed.
    pub arp_handled: u64,
    /// ARP requests sent.
    pub arp_requests_sent: u64,
    /// ARP replies sent.
    pub arp_replies_sent: u64,
    /// ICMP echo requests answered.
    pub icmp_echo_replies: u64,
    /// ICMP echo requests answered after reassembly.
    pub icmp_echo_replies_reassembled: u64,
    /// ICMP time exceeded (reassembly timeout) messages sent.
    pub icmp_time_exceeded_sent: u64,
    /// ICMP port unreachable messages sent.
    pub icmp_unreach_sent: u64,
    /// ICMP errors not sent (RFC 1122 rules or rate limit).
    pub icmp_suppressed: u64,
    /// Fragments stored in (or completing) a reassembly.
    pub frags_absorbed: u64,
    /// Datagrams reassembled.
    pub reassembled: u64,
    /// Received frames dropped by the stack after demultiplexing.
    pub rx_frame_drops: u64,
    /// UDP frames whose IP and UDP checks ran in the receive loop
    /// (`eager`, `early-demux`).
    pub udp_checked_in_poll: u64,
    /// UDP frames whose IP and UDP checks ran inside `recv` (`soft-lrp`).
    pub udp_checked_in_recv: u64,
    /// UDP frames checked ahead of `recv` by [`Stack::udp_prepare`] (the
    /// idle-priority drain of `soft-lrp`, LRP §3.3).
    pub udp_checked_ahead: u64,
    /// Checked UDP frames dropped because their socket's channel was full
    /// (the work was spent; `eager`).
    pub udp_dropped_after_work: u64,
    /// Times the choice to keep or evict consumed receive buffers' lines
    /// changed (`handback`).
    pub handback_switches: u64,
    /// All stack drops by reason, indexed by `StackDrop as usize`.
    pub drops: [u64; StackDrop::ALL.len()],
    /// ARP cache counters.
    pub arp: ArpCounters,
    /// Reassembly counters.
    pub reasm: ReasmCounters,
    /// TCP counters.
    pub tcp: TcpStats,
}

impl StackStats {
    /// Drops for one reason.
    pub fn drops_for(&self, r: StackDrop) -> u64 {
        self.drops[r as usize]
    }

    /// Received frames whose fate is final: dropped by the classifier,
    /// consumed by control processing, absorbed by reassembly, delivered, or
    /// dropped by the stack. `rx_frames - frames_accounted()` frames are still
    /// queued in channels.
    pub fn frames_accounted(&self) -> u64 {
        self.demux.dropped()
            + self.arp_handled
            + self.icmp_echo_replies
            + self.frags_absorbed
            + self.udp_delivered
            + self.rx_frame_drops
            + self.tcp.segments_in
    }

    /// Writes every non-zero counter as `name value` lines.
    pub fn write_table(&self, out: &mut impl std::fmt::Write) -> std::fmt::Result {
        let rows: [(&str, u64); 36] = [
            ("rx_frames", self.rx_frames),
            ("tx_frames", self.tx_frames),
            ("demux_enqueued", self.demux.enqueued),
            ("udp_delivered", self.udp_delivered),
            ("udp_delivered_reassembled", self.udp_delivered_reassembled),
            ("udp_sent", self.udp_sent),
            ("arp_handled", self.arp_handled),
            ("arp_requests_sent", self.arp_requests_sent),
            ("arp_replies_sent", self.arp_replies_sent),
            ("icmp_echo_replies", self.icmp_echo_replies),
            (
                "icmp_echo_replies_reassembled",
                self.icmp_echo_replies_reassembled,
            ),
            ("icmp_unreach_sent", self.icmp_unreach_sent),
            ("icmp_time_exceeded_sent", self.icmp_time_exceeded_sent),
            ("icmp_suppressed", self.icmp_suppressed),
            ("frags_absorbed", self.frags_absorbed),
            ("reassembled", self.reassembled),
            ("rx_frame_drops", self.rx_frame_drops),
            ("udp_checked_in_poll", self.udp_checked_in_poll),
            ("udp_checked_in_recv", self.udp_checked_in_recv),
            ("udp_checked_ahead", self.udp_checked_ahead),
            ("udp_dropped_after_work", self.udp_dropped_after_work),
            ("tcp_segments_in", self.tcp.segments_in),
            ("tcp_segments_out", self.tcp.segments_out),
            ("tcp_redirected", self.tcp.redirected),
            ("tcp_resets_sent", self.tcp.resets_sent),
            ("tcp_resets_suppressed", self.tcp.resets_suppressed),
            ("tcp_close_resets_unsent", self.tcp.close_resets_unsent),
            ("tcp_connects", self.tcp.connects),
            ("tcp_accepted", self.tcp.accepted),
            ("tcp_closed", self.tcp.closed),
            ("tcp_timers", self.tcp.timers),
            ("tcp_time_wait_entered", self.tcp.time_wait_entered),
            ("tcp_time_wait_segments", self.tcp.time_wait_segments),
            ("tcp_time_wait_evicted", self.tcp.time_wait_evicted),
            ("tcp_frames_evicted", self.tcp.frames_evicted),
            ("handback_switches", self.handback_switches),
        ];
        for (k, v) in rows {
            writeln!(out, "  {k:<34} {v}")?;
        }
        for r in crate::demux::DropReason::ALL {
            let v = self.demux.drops_for(r);
            if v != 0 {
                writeln!(out, "  drop.demux.{:<23} {v}", r.name())?;
            }
        }
        for r in StackDrop::ALL {
            let v = self.drops_for(r);
            if v != 0 {
                writeln!(out, "  drop.stack.{:<23} {v}", r.name())?;
            }
        }
        for r in crate::proto::ip::ReasmDrop::ALL {
            let v = self.reasm.drops(r);
            if v != 0 {
                writeln!(out, "  drop.reasm.{:<23} {v}", r.name())?;
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for StackStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.write_table(f)
    }
}

/// Names an open UDP socket of a [`Stack`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UdpHandle(u32);

#[derive(Clone, Copy, Debug)]
struct UdpSock {
    local: SocketAddrV4,
    chan: ChannelId,
    peer: Option<SocketAddrV4>,
}

/// Reassembled datagrams waiting in socket channels. Fixed memory: slots of
/// 64 KiB allocated at start-up; a channel entry names a slot by index.
struct DgramStore {
    data: Box<[u8]>,
    len: Box<[u32]>,
    from: Box<[(Ipv4Addr, Ipv4Addr)]>,
    free: Vec<u32>,
}

const DGRAM_SLOT: usize = 65536;

impl DgramStore {
    fn new(slots: usize) -> Self {
        DgramStore {
            data: vec![0; slots * DGRAM_SLOT].into_boxed_slice(),
            len: vec![0; slots].into_boxed_slice(),
            from: vec![(Ipv4Addr::UNSPECIFIED, Ipv4Addr::UNSPECIFIED); slots].into_boxed_slice(),
            free: (0..slots as u32).rev().collect(),
        }
    }

    fn put(&mut self, bytes: &[u8], src: Ipv4Addr, dst: Ipv4Addr) -> Option<u32> {
        if bytes.len() > DGRAM_SLOT {
            return None;
        }
        let s = self.free.pop()?;
        let at = s as usize * DGRAM_SLOT;
        self.data[at..at + bytes.len()].copy_from_slice(bytes);
        self.len[s as usize] = bytes.len() as u32;
        self.from[s as usize] = (src, dst);
        Some(s)
    }

    fn get(&self, s: u32) -> Option<(&[u8], Ipv4Addr, Ipv4Addr)> {
        let i = s as usize;
        let len = *self.len.get(i)? as usize;
        let at = i * DGRAM_SLOT;
        let (src, dst) = self.from[i];
        Some((&self.data[at..at + len], src, dst))
    }

    fn free(&mut self, s: u32) {
        if (s as usize) < self.len.len() && !self.free.contains(&s) {
            self.free.push(s);
        }
    }
}

/// The transmit side: NIC, addresses, ARP, IP identifiers. Kept apart from
/// receive-side state so a borrowed received datagram can be answered.
struct Out<N: Nic> {
    nic: N,
    mac: [u8; 6],
    addr: Ipv4Addr,
    mask: u32,
    gateway: Option<Ipv4Addr>,
    ttl: u8,
    mtu: usize,
    arp: ArpCache,
    ident: IdentGen,
    release: Vec<Desc>,
    /// A transmit buffer TCP output allocated but did not need, or `poll`
    /// took ahead (`warm_spare`); the next output call uses it first.
    spare: Option<u32>,
    /// Whether `poll` keeps a spare transmit buffer, its header lines
    /// fetched for writing, while TCP connections exist; else it gives the
    /// spare back. On where the NIC's buffers cross cores
    /// ([`Nic::cross_core_buffers`]): request/response p50 −8% on the wire
    /// (`results/tcp/NOTES.md`, session 10).
    warm_spare: bool,
    /// Segments of the output call in progress (`tcp.rs`), empty between
    /// calls.
    batch: tcp::TxBatch,
    /// Keep or evict consumed receive buffers' lines (`handback`).
    handback: handback::Handback,
    stats: OutStats,
}

#[derive(Default)]
struct OutStats {
    tx_frames: u64,
    arp_requests_sent: u64,
    drops: [u64; StackDrop::ALL.len()],
}

impl<N: Nic> Out<N> {
    #[inline]
    fn drop_tx(&mut self, r: StackDrop) {
        self.stats.drops[r as usize] += 1;
    }

    /// Gives `d` back to the NIC, batched. Tagged store entries are not NIC
    /// buffers and are filtered out by the callers.
    #[inline]
    fn release(&mut self, d: Desc) {
        self.release.push(d);
        if self.release.len() >= MAX_BATCH {
            self.flush_release();
        }
    }

    fn flush_release(&mut self) {
        if !self.release.is_empty() {
            self.nic.release(&self.release);
            self.release.clear();
        }
    }

    fn is_broadcast(&self, dst: Ipv4Addr) -> bool {
        let d = u32::from(dst);
        d == u32::MAX || (self.mask != u32::MAX && d == (u32::from(self.addr) | !self.mask))
    }

    fn next_hop(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        if (u32::from(dst) ^ u32::from(self.addr)) & self.mask == 0 || dst == Ipv4Addr::BROADCAST {
            Some(dst)
        } else {
            self.gateway
        }
    }

    /// Finds the MAC for `next_hop`: `Ok(Some)` known, `Ok(None)` packets must
    /// wait for ARP (a request went out if due), `Err` cannot send.
    fn resolve(&mut self, next_hop: Ipv4Addr, now: u64) -> Result<Option<[u8; 6]>, StackDrop> {
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

    fn alloc(&mut self) -> Option<u32> {
        let mut b = [0u32; 1];
        if self.nic.alloc(&mut b) == 1 {
            Some(b[0])
        } else {
            None
        }
    }

    /// Sends one frame we own, or drops it (counted, buffer released).
    fn transmit(&mut self, d: Desc) -> bool {
        if self.nic.send(&[d]) == 1 {
            self.stats.tx_frames += 1;
            true
        } else {
            self.drop_tx(StackDrop::TxRingFull);
            self.release(d);
            false
        }
    }

    fn send_arp_request(&mut self, target: Ipv4Addr) {
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
    fn ip_output(
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
    fn send_waiting(&mut self, ip: Ipv4Addr, mac: [u8; 6]) {
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
fn emit_eth_ipv4(f: &mut [u8], src_mac: [u8; 6], dst_mac: [u8; 6], ip: &Ipv4Repr) -> bool {
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
fn checked_ipv4(frame: &[u8]) -> Result<Ipv4Packet<&[u8]>, StackDrop> {
    let ip = Ipv4Packet::new_checked(frame.get(ETH_LEN..).unwrap_or(&[]))
        .map_err(|_| StackDrop::IpHeader)?;
    if ip.verify_checksum() {
        Ok(ip)
    } else {
        Err(StackDrop::IpChecksum)
    }
}

/// Parses a received Ethernet/IPv4/UDP frame lazily: header checksum, UDP
/// length and checksum (RFC 768; a zero checksum means none, RFC 1122
/// §4.1.3.4). Returns (source, destination address, payload).
#[inline]
fn parse_udp_frame(frame: &[u8]) -> Result<(SocketAddrV4, Ipv4Addr, &[u8]), StackDrop> {
    let ip = Ipv4Packet::new_checked(frame.get(ETH_LEN..).unwrap_or(&[]))
        .map_err(|_| StackDrop::IpHeader)?;
    if !ip.verify_checksum() {
        return Err(StackDrop::IpChecksum);
    }
    let (src, dst) = (ip.src(), ip.dst());
    let bytes = ip.into_inner();
    let ihl = ((bytes[0] & 0x0f) as usize) * 4;
    let total = u16::from_be_bytes([bytes[2], bytes[3]]) as usize;
    parse_udp(&bytes[ihl..total], src, dst)
}

/// [`parse_udp_frame`] for a frame whose checks already ran (the eager
/// modes): lengths only, no checksums.
#[inline]
fn parse_udp_frame_checked(frame: &[u8]) -> Result<(SocketAddrV4, Ipv4Addr, &[u8]), StackDrop> {
    let ip = Ipv4Packet::new_checked(frame.get(ETH_LEN..).unwrap_or(&[]))
        .map_err(|_| StackDrop::IpHeader)?;
    let (src, dst) = (ip.src(), ip.dst());
    let bytes = ip.into_inner();
    let ihl = ((bytes[0] & 0x0f) as usize) * 4;
    let total = u16::from_be_bytes([bytes[2], bytes[3]]) as usize;
    let udp = UdpPacket::new_checked(&bytes[ihl..total]).map_err(|_| StackDrop::UdpHeader)?;
    let sport = udp.src_port();
    let len = udp.len() as usize;
    Ok((
        SocketAddrV4::new(src, sport),
        dst,
        &bytes[ihl + 8..ihl + len],
    ))
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
    out: Out<N>,
    demux: Classifier,
    reasm: Reassembler,
    store: DgramStore,
    sockets: Vec<Option<UdpSock>>,
    free_sockets: Vec<u32>,
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
    udp_channel_cap: usize,
    next_timer: u64,
    epoch: Instant,
    stats: StackStats,
    /// `ni-lrp`: the link to the NI thread.
    ni: Option<Box<ni::NiHost>>,
}

impl<N: Nic> Stack<N> {
    /// A stack on `nic` with configuration `cfg`.
    pub fn new(nic: N, cfg: StackConfig) -> Self {
        // Channel entries carry tags in the top two bits of the buffer index.
        debug_assert!(nic.buffers().count() < CHECKED_TAG, "too many NIC buffers");
        let mac = nic.mac();
        let mtu = nic.mtu();
        // Evicting consumed lines can only help where another core writes
        // the buffers again (`handback`).
        let warm_spare = nic.cross_core_buffers();
        let handback_mode = if warm_spare {
            cfg.rx_handback
        } else {
            HandbackMode::Off
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
        let tcp = tcp::Tcp::new(
            cfg.tcp,
            cfg.tcp_listen,
            cfg.tcp_channel_cap,
            cfg.tcp_rst_rate,
            cfg.tcp_time_wait_cap,
            &mut rng,
        );
        let mut demux = Classifier::new(
            mac,
            cfg.addr,
            cfg.prefix_len,
            cfg.control_cap,
            cfg.fragment_cap,
        );
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
            out: Out {
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
                batch: tcp::TxBatch::new(),
                handback: handback::Handback::new(handback_mode, settle_bytes),
                stats: OutStats::default(),
            },
            demux,
            reasm: Reassembler::new(cfg.reasm),
            store: DgramStore::new(cfg.reasm_store),
            sockets: Vec::new(),
            free_sockets: Vec::new(),
            icmp_limit: RateLimiter::new(cfg.icmp_rate.0, cfg.icmp_rate.1, 0),
            ports: PortAllocator::default(),
            rng,
            rxbuf: vec![Desc::default(); MAX_BATCH].into_boxed_slice(),
            rx_batch: cfg.rx_batch.clamp(1, MAX_BATCH),
            control_budget: cfg.control_budget.max(1),
            udp_channel_cap: cfg.udp_channel_cap,
            next_timer: 0,
            epoch: Instant::now(),
            stats: StackStats::default(),
            ni: None,
        }
    }

    /// Monotonic nanoseconds since the stack was created; for callers that
    /// have no clock of their own (blocking-style socket calls, programs).
    pub fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Our IPv4 address.
    pub fn addr(&self) -> Ipv4Addr {
        self.out.addr
    }

    /// Our MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.out.mac
    }

    /// The NIC.
    pub fn nic(&self) -> &N {
        &self.out.nic
    }

    /// The NIC, mutably (e.g. to wait for it).
    pub fn nic_mut(&mut self) -> &mut N {
        &mut self.out.nic
    }

    /// The classifier (read-only: channels and counters).
    pub fn demux(&self) -> &Classifier {
        &self.demux
    }

    /// A snapshot of every counter.
    pub fn stats(&self) -> StackStats {
        let mut s = self.stats.clone();
        s.demux = self.demux.stats().clone();
        s.tx_frames = self.out.stats.tx_frames;
        s.arp_requests_sent = self.out.stats.arp_requests_sent;
        for (i, v) in self.out.stats.drops.iter().enumerate() {
            s.drops[i] += v;
        }
        s.arp = self.out.arp.counters();
        s.reasm = self.reasm.counters();
        s.tcp = self.tcp.stats.clone();
        s.handback_switches = self.out.handback.switches();
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
    fn drop_rx(&mut self, r: StackDrop) {
        self.stats.drops[r as usize] += 1;
        self.stats.rx_frame_drops += 1;
    }

    /// One step of the receive loop. Receives at most `rx_batch` frames and
    /// demultiplexes them; processes at most `control_budget` control frames
    /// and as many fragments; runs the timer sweep when due. Returns the work
    /// done (zero means idle).
    pub fn poll(&mut self, now: u64) -> PollWork {
        let mut work = PollWork::default();
        let n = self.out.nic.recv(&mut self.rxbuf[..self.rx_batch]);
        work.received = n;
        self.stats.rx_frames += n as u64;
        if n > 1 {
            // Classification reads each frame's headers: fetch them all
            // first, so that the misses of a batch another core wrote
            // overlap instead of coming one frame at a time.
            for &d in &self.rxbuf[..n] {
                self.out.nic.buffers().prefetch_headers(d);
            }
        }
        match self.mode {
            // ni-lrp: the proxy NIC delivers nothing; frames are on channels.
            ReceiveMode::SoftLrp | ReceiveMode::NiLrp => {
                for i in 0..n {
                    let d = self.rxbuf[i];
                    match self.out.nic.buffers().frame(d) {
                        Some(f) => {
                            if self.demux.deliver(d, f).is_err() {
                                self.out.release(d);
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
                    } else if self.out.nic.buffers().frame(d).is_some() {
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
        for _ in 0..self.control_budget {
            let Some(d) = self.demux.channel_mut(CONTROL).and_then(|c| c.pop()) else {
                break;
            };
            self.control_input(d, now);
            work.processed += 1;
        }
        for _ in 0..self.control_budget {
            let Some(d) = self.demux.channel_mut(FRAGMENT).and_then(|c| c.pop()) else {
                break;
            };
            self.fragment_input(d, now);
            work.processed += 1;
        }
        if now >= self.next_timer {
            self.timers(now);
            self.next_timer = now + TIMER_INTERVAL_NS;
        }
        if self.mode.eager_protocol() {
            // TCP input at once, in the receive loop.
            work.processed += self.tcp_service(now, 2 * self.rx_batch);
        }
        if self.out.warm_spare && self.tcp.has_conns() {
            // Where another core reads our frames, a buffer comes back with
            // its lines in that core's cache, and each store of the next
            // segment's headers would wait for its line to come back (the
            // request/response critical path). Take the next output call's
            // buffer now and fetch its header lines for writing.
            if self.out.spare.is_none() {
                self.out.spare = self.out.alloc();
                if let Some(b) = self.out.spare {
                    let bufs = self.out.nic.buffers();
                    // The headers' two lines (and a small payload).
                    bufs.prefetch_write(b, 128);
                }
            }
        } else if let Some(b) = self.out.spare.take() {
            self.out.release(Desc::new(b, 0));
        }
        if self.ni.is_some() {
            self.ni_retire();
        }
        self.out.flush_release();
        self.out.nic.flush();
        work
    }

    /// `eager` and `early-demux`: demultiplexes `d` and, for a UDP socket,
    /// runs the IP and UDP checks now. With `early_drop`, a full channel
    /// drops the frame before the checks; otherwise after them.
    #[inline(never)]
    fn rx_checked(&mut self, d: Desc, early_drop: bool) {
        let Some(f) = self.out.nic.buffers().frame(d) else {
            self.drop_rx(StackDrop::BadDescriptor);
            return;
        };
        // Classified once; `deliver_classified` queues and counts.
        let v = self.demux.classify(f);
        let c = match v {
            Verdict::Channel(c) if c != CONTROL && c != FRAGMENT && !self.is_tcp_channel(c) => c,
            _ => {
                if self.demux.deliver_classified(d, v).is_err() {
                    self.out.release(d);
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
                self.out.release(d);
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
            self.out.release(d);
        }
    }

    #[inline(never)]
    fn timers(&mut self, now: u64) {
        let mut freed = [Desc::default(); 32];
        let mut reqs = [Ipv4Addr::UNSPECIFIED; 16];
        // Bounded: a few rounds of bounded sweeps; leftovers wait for the next tick.
        for _ in 0..4 {
            let p = self.out.arp.poll(now, &mut freed, &mut reqs);
            for &d in &freed[..p.freed] {
                self.out.release(d);
                self.out.drop_tx(StackDrop::ArpGiveUp);
            }
            for &ip in &reqs[..p.requests] {
                self.out.send_arp_request(ip);
            }
            if p.freed < freed.len() && p.requests < reqs.len() {
                break;
            }
        }
        // RFC 1122 §3.3.2: a reassembly that times out with its first
        // fragment present SHOULD be answered with Time Exceeded (code 1),
        // under the usual ICMP error rules and rate limit.
        let (out, limit, stats) = (&mut self.out, &mut self.icmp_limit, &mut self.stats);
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

    /// ARP, ICMP and UDP to unbound ports (LRP §3.5: work no socket owns).
    #[inline(never)]
    fn control_input(&mut self, d: Desc, now: u64) {
        let Some(f) = self.out.nic.buffers().frame(d) else {
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
        let frame = self.out.nic.buffers().frame(d).unwrap_or(&[]);
        let repr = match ArpPacket::new_checked(&frame[ETH_LEN.min(frame.len())..]) {
            Ok(p) => ArpRepr::parse(&p),
            Err(_) => {
                self.out.release(d);
                self.drop_rx(StackDrop::ArpMalformed);
                return;
            }
        };
        let for_us = repr.target_ip == self.out.addr;
        self.stats.arp_handled += 1;
        if let ArpUpdate::Resolved { .. } =
            self.out
                .arp
                .update(repr.sender_ip, repr.sender_hw.0, for_us, now)
        {
            self.out.send_waiting(repr.sender_ip, repr.sender_hw.0);
        }
        let valid_sender = repr.sender_hw.is_unicast() && !repr.sender_ip.is_unspecified();
        if repr.operation == ArpOperation::Request && for_us && valid_sender {
            let reply = ArpRepr {
                operation: ArpOperation::Reply,
                sender_hw: EthernetAddress(self.out.mac),
                sender_ip: self.out.addr,
                target_hw: repr.sender_hw,
                target_ip: repr.sender_ip,
            };
            let eth = EthernetRepr {
                src: EthernetAddress(self.out.mac),
                dst: repr.sender_hw,
                ethertype: ETHERTYPE_ARP,
            };
            let off = d.off as usize;
            if let Some(buf) = self.out.nic.buffers_mut().buf_mut(d.buf) {
                let b = &mut buf[off..];
                if eth.emit(b).is_ok() && reply.emit(&mut b[ETH_LEN..]).is_ok() {
                    let rd = Desc {
                        buf: d.buf,
                        off: d.off,
                        len: (ETH_LEN + crate::wire::arp::PACKET_LEN) as u16,
                    };
                    if self.out.transmit(rd) {
                        self.stats.arp_replies_sent += 1;
                    }
                    return;
                }
            }
        }
        self.out.release(d);
    }

    fn ip_control_input(&mut self, d: Desc, now: u64) {
        let frame = self.out.nic.buffers().frame(d).unwrap_or(&[]);
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
                } else {
                    self.rx_fail(d, StackDrop::IcmpUnhandled);
                }
            }
            PROTO_UDP => {
                // The classifier sends only unbound unicast UDP here.
                let src = ip.src();
                let bcast = frame[0] & 1 == 1 || self.out.is_broadcast(ip.dst());
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
                    let me = self.out.addr;
                    if self
                        .out
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

    #[inline]
    fn rx_fail(&mut self, d: Desc, r: StackDrop) {
        self.out.release(d);
        self.drop_rx(r);
    }

    /// Turns an echo request into its reply in the same buffer (RFC 792):
    /// swap addresses, type 8 → 0 with an RFC 1624 checksum update.
    fn echo_reply_in_place(&mut self, d: Desc, hl: usize, total: usize) {
        let me = self.out.addr;
        let mymac = self.out.mac;
        let ttl = self.out.ttl;
        let off = d.off as usize;
        let Some(buf) = self.out.nic.buffers_mut().buf_mut(d.buf) else {
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
        self.out.transmit(rd);
    }

    /// IPv4 fragments: reassembly (RFC 791 §3.2) with the bounds of
    /// [`Reassembler`]; a complete datagram goes to its socket's channel.
    #[inline(never)]
    fn fragment_input(&mut self, d: Desc, now: u64) {
        let frame = self.out.nic.buffers().frame(d).unwrap_or(&[]);
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
                            Some(ch) => match self.store.put(payload, key.src, key.dst) {
                                None => self.stats.drops[StackDrop::ReasmStoreFull as usize] += 1,
                                Some(slot) => {
                                    if self
                                        .demux
                                        .enqueue(ch, Desc::new(REASM_TAG | slot, 0))
                                        .is_err()
                                    {
                                        self.store.free(slot);
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
                        let me = self.out.addr;
                        if self
                            .out
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
                self.out.release(d);
                self.drop_rx(StackDrop::FragRefused);
                return;
            }
        }
        self.out.release(d);
    }

    // ----- Prebuilt frames (network level framing) -----

    /// The Ethernet address to send to `dst`: next-hop choice and ARP, for
    /// callers that build whole frames themselves (the NLF streamer).
    /// `Ok(None)` while resolution is pending (a request went out if due).
    pub fn neighbor(&mut self, dst: Ipv4Addr, now: u64) -> Result<Option<[u8; 6]>, SocketError> {
        let hop = self.out.next_hop(dst).ok_or(SocketError::NoRoute)?;
        self.out.resolve(hop, now).map_err(|_| SocketError::Dropped)
    }

    /// Sends whole frames the caller built in buffers it took from the NIC;
    /// returns how many the NIC accepted (the rest remain the caller's).
    pub fn transmit(&mut self, frames: &[Desc]) -> usize {
        let n = self.out.nic.send(frames);
        self.out.stats.tx_frames += n as u64;
        n
    }

    /// Sends header-plus-reference frames (see [`Nic::send_gather`]);
    /// returns how many the NIC accepted.
    pub fn transmit_gather(&mut self, frames: &[(Desc, crate::nic::ExtRef)]) -> usize {
        let n = self.out.nic.send_gather(frames);
        self.out.stats.tx_frames += n as u64;
        n
    }

    /// Records `mac` as `ip`'s link-layer address, as an ARP reply would
    /// (for links without an ARP peer, such as a discarding test wire).
    pub fn set_neighbor(&mut self, ip: Ipv4Addr, mac: [u8; 6]) {
        let now = self.now();
        let _ = self.out.arp.update(ip, mac, true, now);
    }

    // ----- UDP sockets (called by `socket`) -----

    fn sock(&self, h: UdpHandle) -> Result<UdpSock, SocketError> {
        self.sockets
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
    ) -> Result<UdpHandle, SocketError> {
        let addr = *local.ip();
        if !addr.is_unspecified() && addr != self.out.addr {
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
            .bind_udp(addr, port, cap.unwrap_or(self.udp_channel_cap))
            .map_err(|e| match e {
                BindError::AddrInUse => SocketError::AddrInUse,
                BindError::NoChannel => SocketError::BadHandle,
            })?;
        let cap = cap.unwrap_or(self.udp_channel_cap);
        self.ni_bind(chan, cap, ni::BindKind::Udp(addr, port));
        let s = UdpSock {
            local: SocketAddrV4::new(addr, port),
            chan,
            peer: None,
        };
        let idx = match self.free_sockets.pop() {
            Some(i) => {
                self.sockets[i as usize] = Some(s);
                i
            }
            None => {
                self.sockets.push(Some(s));
                (self.sockets.len() - 1) as u32
            }
        };
        Ok(UdpHandle(idx))
    }

    /// Local address of a socket.
    pub fn udp_local_addr(&self, h: UdpHandle) -> Result<SocketAddrV4, SocketError> {
        Ok(self.sock(h)?.local)
    }

    /// Sets (or clears) the peer of a socket: `send` goes there and only its
    /// datagrams are received.
    pub fn udp_connect(
        &mut self,
        h: UdpHandle,
        peer: Option<SocketAddrV4>,
    ) -> Result<(), SocketError> {
        self.sock(h)?;
        if let Some(Some(s)) = self.sockets.get_mut(h.0 as usize) {
            s.peer = peer;
        }
        Ok(())
    }

    /// The connected peer, if any.
    pub fn udp_peer(&self, h: UdpHandle) -> Result<Option<SocketAddrV4>, SocketError> {
        Ok(self.sock(h)?.peer)
    }

    /// Frames waiting in a socket's channel (not yet processed).
    pub fn udp_pending(&self, h: UdpHandle) -> Result<usize, SocketError> {
        let s = self.sock(h)?;
        Ok(self.demux.queued(s.chan))
    }

    /// Closes a socket; frames still queued are released and counted.
    pub fn udp_close(&mut self, h: UdpHandle) -> Result<(), SocketError> {
        let s = self.sock(h)?;
        let mut left = Vec::new();
        let _ = self
            .demux
            .unbind_udp(*s.local.ip(), s.local.port(), &mut left);
        self.ni_unbind(ni::BindKind::Udp(*s.local.ip(), s.local.port()));
        for d in left {
            self.stats.drops[StackDrop::SocketClosed as usize] += 1;
            if d.buf & REASM_TAG != 0 {
                self.store.free(d.buf & !REASM_TAG);
            } else {
                self.stats.rx_frame_drops += 1;
                self.out.release(Desc {
                    buf: d.buf & !CHECKED_TAG,
                    ..d
                });
            }
        }
        self.out.flush_release();
        self.sockets[h.0 as usize] = None;
        self.free_sockets.push(h.0);
        Ok(())
    }

    /// Receives one datagram, doing its protocol processing now, in the
    /// caller's context (LRP §3.3): IP header checksum, UDP length and
    /// checksum, peer filter. Frames that fail are dropped and counted, and
    /// the next is tried; at most the frames queued at entry are examined.
    /// `f` sees the payload in place (no copy) and the source.
    pub fn udp_recv_with<R>(
        &mut self,
        h: UdpHandle,
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
                let parsed = match self.store.get(slot) {
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
                        self.store.free(slot);
                        self.stats.udp_delivered_reassembled += 1;
                        return Ok(v);
                    }
                    Err(e) => {
                        self.store.free(slot);
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
            let Some(frame) = self.out.nic.buffers().frame(d) else {
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
                    self.out.release(d);
                    return Ok(r);
                }
                Err(e) => self.rx_fail(d, e),
            }
        }
        Err(SocketError::WouldBlock)
    }

    /// Runs the IP and UDP checks of at most `max` queued, not yet checked
    /// frames of socket `h` ahead of `recv`, leaving them queued, in order,
    /// marked as checked (so `recv` does not repeat the work); frames that
    /// fail are dropped and counted. Returns the frames checked. LRP §3.3:
    /// "an otherwise idle CPU should always perform protocol processing for
    /// any received packets" — the caller is an idle-priority task that
    /// charges the work to the socket's owner. O(queued) (the channel is
    /// rotated once), no allocation.
    pub fn udp_prepare(&mut self, h: UdpHandle, max: usize) -> Result<usize, SocketError> {
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
            let Some(frame) = self.out.nic.buffers().frame(d) else {
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
        self.out.flush_release();
        Ok(checked)
    }

    /// Sends `payload` from socket `h` to `dst` (UDP over IPv4, fragmented if
    /// larger than the MTU). Runs in the caller's context.
    pub fn udp_send_to(
        &mut self,
        h: UdpHandle,
        payload: &[u8],
        dst: SocketAddrV4,
        now: u64,
    ) -> Result<usize, SocketError> {
        let s = self.sock(h)?;
        if payload.len() > MAX_UDP_PAYLOAD {
            return Err(SocketError::TooBig);
        }
        let src = if s.local.ip().is_unspecified() {
            self.out.addr
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
            .out
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
