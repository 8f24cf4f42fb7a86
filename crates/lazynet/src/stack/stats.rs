//! The stack's counters and its typed reasons.
//!
//! **Owns:** [`StackDrop`] (why the stack dropped a frame or could not
//! send: each has a counter), [`SocketError`] (what a socket call returns)
//! and [`StackStats`] (every counter, with the accounting rule
//! [`StackStats::frames_accounted`]). Plain data: the counting happens where
//! the drops happen.

use crate::demux::DemuxStats;
use crate::proto::arp::ArpCounters;
use crate::proto::ip::ReasmCounters;

use super::TcpStats;

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
    /// ICMP "fragmentation needed" quoting no TCP connection of ours (or
    /// too little of the segment to tell).
    IcmpNoConnection,
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
    pub const ALL: [StackDrop; 29] = [
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
        StackDrop::IcmpNoConnection,
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
            StackDrop::IcmpNoConnection => "icmp_no_connection",
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

/// The `std::io` kind a POSIX program would see (`EAGAIN`, `ECONNRESET`,
/// `EADDRNOTAVAIL` for a full ephemeral range, `EBADF` as invalid input).
impl From<SocketError> for std::io::Error {
    fn from(e: SocketError) -> Self {
        use std::io::ErrorKind as K;
        let kind = match e {
            SocketError::WouldBlock | SocketError::NoBuffers => K::WouldBlock,
            SocketError::TimedOut => K::TimedOut,
            SocketError::AddrInUse => K::AddrInUse,
            SocketError::AddrNotAvailable | SocketError::NoPorts => K::AddrNotAvailable,
            SocketError::BadHandle | SocketError::TooBig => K::InvalidInput,
            SocketError::NotConnected => K::NotConnected,
            SocketError::NoRoute => K::HostUnreachable,
            SocketError::Dropped => K::Other,
            SocketError::ConnectionRefused => K::ConnectionRefused,
            SocketError::ConnectionReset => K::ConnectionReset,
        };
        std::io::Error::new(kind, e)
    }
}

/// Counters of a [`Stack`](crate::stack::Stack), readable through [`Stack::stats`](crate::stack::Stack::stats).
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
    /// ICMP "fragmentation needed" messages handed to the TCP connection
    /// they quote ([`crate::proto::tcp::Connection::path_mtu_reduced`]).
    pub icmp_frag_needed: u64,
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
    /// UDP frames checked ahead of `recv` by [`UdpSocketRef::prepare`](crate::socket::UdpSocketRef::prepare) (the
    /// idle-priority drain of `soft-lrp`, LRP §3.3).
    pub udp_checked_ahead: u64,
    /// Checked UDP frames dropped because their socket's channel was full
    /// (the work was spent; `eager`).
    pub udp_dropped_after_work: u64,
    /// Times the choice to keep or evict consumed receive buffers' lines
    /// changed (`evict`).
    pub evict_switches: u64,
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
            + self.icmp_frag_needed
            + self.frags_absorbed
            + self.udp_delivered
            + self.rx_frame_drops
            + self.tcp.segments_in
    }

    /// Writes every non-zero counter as `name value` lines.
    pub fn write_table(&self, out: &mut impl std::fmt::Write) -> std::fmt::Result {
        let rows: [(&str, u64); 40] = [
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
            ("icmp_frag_needed", self.icmp_frag_needed),
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
            ("tcp_orphaned", self.tcp.orphaned),
            ("tcp_fin_timeouts", self.tcp.fin_timeouts),
            ("tcp_data_after_close", self.tcp.data_after_close),
            ("evict_switches", self.evict_switches),
        ];
        for (k, v) in rows {
            writeln!(out, "  {k:<34} {v}")?;
        }
        for r in crate::stack::OrphanReset::ALL {
            let v = self.tcp.orphans_reset[r as usize];
            if v != 0 {
                writeln!(out, "  reset.{:<28} {v}", r.name())?;
            }
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
