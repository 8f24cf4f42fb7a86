//! The stack's start-up configuration and its receive mode.
//!
//! **Owns:** [`StackConfig`] (addresses, batch sizes, budgets, queue and
//! table limits, the seed, TCP defaults) and [`ReceiveMode`], the one type
//! that names where received packets are processed. Plain data: nothing
//! here runs.

use std::net::Ipv4Addr;

use super::EvictMode;
use crate::proto::arp::ArpConfig;
use crate::proto::ip::ReasmConfig;

/// Where protocol processing of received packets runs (docs/DESIGN.md,
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
    /// protocol handler ([`Stack::tcp_service`](crate::stack::Stack::tcp_service)).
    #[default]
    SoftLrp,
    /// Lazy receiver processing with NI demux (LRP §3.2): demultiplexing
    /// and early discard run on a separate NI thread ([`NiEngine`](crate::stack::NiEngine), built by
    /// [`Stack::new_ni_lrp`](crate::stack::Stack::new_ni_lrp)); the host spends nothing on a frame until its
    /// owner takes it; protocol work is placed as in `SoftLrp`. Given to
    /// [`Stack::new`](crate::stack::Stack::new), which has no NI thread to run it on, it means
    /// `SoftLrp` (and [`Stack::mode`](crate::stack::Stack::mode) says so).
    NiLrp,
}

impl ReceiveMode {
    /// True if the receive loop runs protocol processing itself.
    pub const fn eager_protocol(self) -> bool {
        !matches!(self, ReceiveMode::SoftLrp | ReceiveMode::NiLrp)
    }

    /// Every mode, in the order of the table in docs/DESIGN.md.
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

/// Start-up configuration of a [`Stack`](crate::stack::Stack).
#[derive(Clone, Debug)]
pub struct StackConfig {
    /// Our IPv4 address.
    pub addr: Ipv4Addr,
    /// Prefix length of our subnet.
    pub prefix_len: u8,
    /// Next hop for destinations outside the subnet.
    pub gateway: Option<Ipv4Addr>,
    /// Frames received per [`Stack::poll`](crate::stack::Stack::poll) (≤ [`MAX_BATCH`](crate::stack::MAX_BATCH)).
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
    /// Orphans (connections whose handle was closed while they still
    /// close) the stack keeps at most; one more resets the oldest (Linux's
    /// `tcp_max_orphans`). Each also waits at most
    /// [`Config::fin_timeout`](crate::proto::tcp::Config::fin_timeout) in
    /// FIN-WAIT-2.
    pub max_orphans: usize,
    /// The same cap per owner tag (a daemon's MemNet client, a host's
    /// owner): one tag's closes cannot push out another's orphans.
    pub max_orphans_per_tag: usize,
    /// The local ports TCP connections and UDP sockets bound to port 0
    /// are given (RFC 6056), inclusive. An attached stack's are the range
    /// its daemon hands it; a daemon's own stack has one apart from every
    /// application's.
    pub ephemeral_ports: (u16, u16),
    /// Where received packets are processed.
    pub mode: ReceiveMode,
    /// Capacity of the shared IP queue of the `eager` mode (4.4BSD's
    /// `ipintrq` held 50).
    pub ip_queue_cap: usize,
    /// Whether the receiver evicts a consumed frame's cache lines where
    /// another core writes the NIC's buffers (see [`evict`](crate::stack::evict)).
    pub rx_evict: EvictMode,
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
            max_orphans: 4096,
            max_orphans_per_tag: 1024,
            ephemeral_ports: (49152, 65535),
            mode: ReceiveMode::SoftLrp,
            ip_queue_cap: 50,
            rx_evict: EvictMode::Adaptive,
        }
    }
}
