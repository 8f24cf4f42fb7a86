//! What the examples share: where their stack runs. On the in-memory wire
//! (the default: no root, a peer stack in the same process), or on a TAP
//! device or an AF_XDP socket whose other end is the Linux kernel in a
//! network namespace the example creates and removes (root).

#![allow(dead_code)]

use std::io;
use std::net::Ipv4Addr;

use lazynet::nic::netns::{Link, Ownership, PeerNs, PeerNsConfig};
use lazynet::nic::tap::TapConfig;
use lazynet::nic::xdp::XdpConfig;
use lazynet::nic::Nic;
use lazynet::stack::{Stack, StackConfig};

/// Where the example's stack runs (`--nic`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum NicKind {
    /// The in-memory wire, a peer stack in this process.
    Wire,
    /// A TAP device; the peer is the kernel in a namespace (root).
    Tap,
    /// AF_XDP on a veth pair; the peer is the kernel in a namespace (root).
    Xdp,
}

/// Our address on the wire, and the peer stack's.
pub const WIRE_OURS: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub const WIRE_PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

/// A stack's configuration at `addr`, with buffers sized for bulk.
pub fn config(addr: Ipv4Addr, seed: u64) -> StackConfig {
    let mut cfg = StackConfig {
        addr,
        seed,
        ..StackConfig::default()
    };
    cfg.tcp.send_buf = 256 * 1024;
    cfg.tcp.recv_buf = 256 * 1024;
    cfg
}

/// The kernel in a namespace of our own, reached over a TAP device or a
/// veth pair: its name, its address and ours. Removed on drop.
pub struct KernelPeer {
    pub ns: String,
    pub kernel: Ipv4Addr,
    pub ours: Ipv4Addr,
    guard: Option<Ownership>,
}

impl Drop for KernelPeer {
    fn drop(&mut self) {
        if let Some(Ownership::Created(g)) = self.guard.take() {
            if let Err(e) = g.cleanup() {
                eprintln!("removing namespace {}: {e}", self.ns);
            }
        }
    }
}

/// Opens a NIC of `kind` (not `Wire`) with the kernel as its peer in a
/// namespace created here, and a stack on it. Drop the stack before the
/// peer (the device goes with the namespace).
pub fn kernel_peer(kind: NicKind, subnet: u8) -> io::Result<(Stack<Box<dyn Nic>>, KernelPeer)> {
    if !lazynet::sys::is_root() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "--nic tap|xdp creates a network namespace: run as root",
        ));
    }
    let mut cfg = PeerNsConfig::unique(subnet);
    let ours = Ipv4Addr::new(10, 201, subnet, 2);
    let kernel = Ipv4Addr::new(10, 201, subnet, 1);
    let (nic, own): (Box<dyn Nic>, Ownership) = match kind {
        NicKind::Wire => unreachable!("the wire has no kernel peer"),
        NicKind::Tap => {
            let (n, o) = PeerNs::new(cfg.clone()).attach_or_create(&TapConfig::default())?;
            (Box::new(n), o)
        }
        NicKind::Xdp => {
            cfg.link = Link::Veth;
            let (n, o) = PeerNs::new(cfg.clone()).attach_or_create_xdp(&XdpConfig {
                addr: ours,
                ..XdpConfig::default()
            })?;
            (Box::new(n), o)
        }
    };
    let peer = KernelPeer {
        ns: cfg.ns.clone(),
        kernel,
        ours,
        guard: Some(own),
    };
    let stack = Stack::new(nic, config(ours, seed()));
    Ok((stack, peer))
}

/// A seed for the stack's secrets (ISNs, ports) that differs per run.
pub fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

/// `len` bytes of stream `salt` from offset `off`: what the examples send
/// and check.
pub fn pattern(off: usize, len: usize, salt: u8) -> Vec<u8> {
    (off..off + len).map(|i| (i % 251) as u8 ^ salt).collect()
}

/// Percentile `p` (0..=100) of `v` (sorted here), in microseconds.
pub fn percentile_us(v: &mut [u64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable();
    let i = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
    v[i] as f64 / 1000.0
}
