//! Command-line arguments shared by the programs: which NIC, the addresses,
//! the peer namespace, faults, the receive mode, offloads.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use lazynet::stack::{ReceiveMode, StackConfig};

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum OnOff {
    On,
    Off,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum NicKind {
    /// The in-memory wire (shared memory; no root).
    Wire,
    /// A Linux TAP device whose kernel side is in the peer namespace (root).
    Tap,
    /// An AF_XDP socket on our end of a veth pair whose other end is in
    /// the peer namespace (root).
    Xdp,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug, Default)]
pub enum LinkKind {
    /// A TAP device (for `--nic tap`).
    #[default]
    Tap,
    /// A veth pair (for `--nic xdp`).
    Veth,
}

#[derive(Args, Clone, Debug)]
pub struct NsArgs {
    /// Peer network namespace.
    #[arg(long, default_value = "lazynet-peer")]
    pub peer_ns: String,
    /// Device name: the TAP device, or both ends of the veth pair
    /// [default: lntap0 for TAP, lnveth0 for veth].
    #[arg(long)]
    pub dev: Option<String>,
    /// Kernel side's address/prefix in the namespace.
    #[arg(long, default_value = "10.201.0.1/24")]
    pub peer_addr: String,
    /// For `netns up`/`down`: a TAP device or a veth pair. Programs pick
    /// it from `--nic` (`xdp` runs on veth).
    #[arg(long, value_enum, default_value_t = LinkKind::Tap)]
    pub link: LinkKind,
}

impl NsArgs {
    /// The device's name for a link of kind `link`.
    pub fn dev_for(&self, link: LinkKind) -> String {
        self.dev.clone().unwrap_or_else(|| match link {
            LinkKind::Tap => "lntap0".into(),
            LinkKind::Veth => "lnveth0".into(),
        })
    }
}

#[derive(Args, Clone, Debug)]
pub struct NetArgs {
    /// Which NIC to serve on.
    #[arg(long, value_enum, default_value_t = NicKind::Wire)]
    pub nic: NicKind,
    /// lazynet's address/prefix.
    #[arg(long, default_value = "10.201.0.2/24")]
    pub addr: String,
    /// The router for destinations outside `--addr`'s subnet (none: only
    /// the subnet is reachable).
    #[arg(long)]
    pub gateway: Option<Ipv4Addr>,
    /// Record every frame to this pcap file.
    #[arg(long)]
    pub pcap: Option<PathBuf>,
    /// Inject faults on lazynet's NIC, both directions, e.g.
    /// `loss=0.01,dup=0.005,reorder=0.02,gap=2,corrupt=0,delay=0.1,delay-us=2000,seed=1`
    /// (probabilities per frame). For tests over links without netem.
    #[arg(long)]
    pub fault: Option<String>,
    /// Receive mode: eager (4.4BSD), early-demux, soft-lrp, or ni-lrp
    /// (demultiplexing on a separate NI thread, pinned to another CPU when
    /// there are two or more; `serve media` runs ni-lrp as soft-lrp).
    #[arg(long, value_parser = parse_mode, default_value = "soft-lrp")]
    pub mode: ReceiveMode,
    /// Attach to the lazynet daemon listening at this control socket
    /// instead of opening a NIC (the multi-process placement: the daemon
    /// owns the NIC and its address; `--nic`, `--addr` and `--mode` are
    /// the daemon's then).
    #[arg(long)]
    pub daemon: Option<PathBuf>,
    /// With `--nic tap`: segmentation offload, runs of TCP segments written
    /// as one frame the kernel takes as a GSO packet (`IFF_VNET_HDR`).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub tso: OnOff,
    /// How long an idle TCP server keeps polling its NIC before it sleeps
    /// on it, in µs (Linux's `SO_BUSY_POLL`): a segment arriving within
    /// that time (the ACK and request after a SYN-ACK, the next request of
    /// a client) finds the server awake instead of costing a wake-up. 0:
    /// sleep at once.
    #[arg(long, default_value_t = 50)]
    pub busy_poll_us: u64,
    /// TCP connections closed by the program that may still be closing
    /// (orphans: waiting for the peer's acknowledgment or FIN) at most;
    /// one more resets the oldest (Linux's `tcp_max_orphans`).
    #[arg(long, default_value_t = 4096)]
    pub max_orphans: usize,
    /// How long an orphan waits in FIN-WAIT-2 for the peer's FIN, in
    /// seconds, before it is dropped (Linux's `tcp_fin_timeout`).
    #[arg(long, default_value_t = 60)]
    pub fin_timeout_s: u64,
    #[command(flatten)]
    pub ns: NsArgs,
}

impl NetArgs {
    /// The stack's configuration these arguments give: `--addr`,
    /// `--gateway`, the orphan bounds and a seed from the operating system;
    /// everything else the default.
    pub fn stack_config(&self) -> anyhow::Result<StackConfig> {
        let (addr, prefix_len) = parse_cidr(&self.addr)?;
        if let Some(g) = self.gateway {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(prefix_len))
                .unwrap_or(0);
            anyhow::ensure!(
                u32::from(g) & mask == u32::from(addr) & mask,
                "gateway {g} is not on {}",
                self.addr
            );
        }
        let mut cfg = StackConfig {
            addr,
            prefix_len,
            gateway: self.gateway,
            seed: crate::serve::seed_from_os(),
            max_orphans: self.max_orphans,
            ..StackConfig::default()
        };
        cfg.tcp.fin_timeout = self.fin_timeout_s.saturating_mul(1_000_000_000);
        Ok(cfg)
    }
}

/// Parses a receive mode name (`eager`, `early-demux`, `soft-lrp`, `ni-lrp`).
pub fn parse_mode(s: &str) -> Result<ReceiveMode, String> {
    ReceiveMode::from_name(s).ok_or_else(|| {
        let names: Vec<_> = ReceiveMode::ALL.iter().map(|m| m.name()).collect();
        format!("unknown mode `{s}` (one of: {})", names.join(", "))
    })
}

/// Parses `a.b.c.d/len`.
pub fn parse_cidr(s: &str) -> anyhow::Result<(Ipv4Addr, u8)> {
    let (a, l) = s.split_once('/').unwrap_or((s, "24"));
    let len: u8 = l.parse()?;
    anyhow::ensure!(len <= 32, "prefix length {len} > 32");
    Ok((a.parse()?, len))
}

/// `lazynet netns up|down`.
#[derive(Subcommand)]
pub enum NetnsCmd {
    /// Create the namespace and its persistent TAP device or veth pair.
    Up(NsArgs),
    /// Remove them (no error if absent).
    Down(NsArgs),
}
