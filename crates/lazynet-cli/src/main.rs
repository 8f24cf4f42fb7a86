//! `lazynet`: the command-line program — demo, servers, namespace tooling
//! and benchmarks. Programs live here, not in the library.

mod echo;
mod linux_send;
mod plot;
mod serve;
mod util;

use std::net::Ipv4Addr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "lazynet",
    version,
    about = "A user-space TCP/IP stack with lazy receiver processing"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run lazynet's main job on the in-memory wire (no root): a UDP echo
    /// service and a client on separate threads; prints rate, RTT and counters.
    Demo {
        /// How long to run, in seconds.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
    },
    /// Run a server.
    Serve {
        #[command(subcommand)]
        what: ServeCmd,
    },
    /// Create or remove the peer network namespace with a persistent TAP device.
    Netns {
        #[command(subcommand)]
        what: NetnsCmd,
    },
    /// A UDP echo client on the in-memory wire of a running `serve udp-echo --nic wire`.
    UdpClient {
        /// Path of the server's wire region (printed by the server).
        #[arg(long)]
        wire: PathBuf,
        /// Datagrams to send.
        #[arg(long, default_value_t = 100_000)]
        count: u64,
        /// Payload bytes.
        #[arg(long, default_value_t = 64)]
        size: usize,
        /// Server port.
        #[arg(long, default_value_t = 7)]
        port: u16,
    },
    /// Benchmarks measured side by side with Linux.
    Bench {
        #[command(subcommand)]
        what: BenchCmd,
    },
}

#[derive(Subcommand)]
enum ServeCmd {
    /// UDP echo server.
    UdpEcho {
        /// UDP port.
        #[arg(long, default_value_t = 7)]
        port: u16,
        #[command(flatten)]
        net: NetArgs,
    },
}

#[derive(Subcommand)]
enum NetnsCmd {
    /// Create the namespace and its persistent TAP device.
    Up(NsArgs),
    /// Remove them (no error if absent).
    Down(NsArgs),
}

#[derive(Subcommand)]
enum BenchCmd {
    /// UDP echo rate: lazynet on the in-memory wire vs Linux over loopback,
    /// server and client on separate cores, same client pattern.
    UdpEcho {
        /// Seconds per run.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Runs of each (median reported).
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Datagrams in flight.
        #[arg(long, default_value_t = 16)]
        window: usize,
        /// Payload bytes.
        #[arg(long, default_value_t = 64)]
        size: usize,
        /// Directory for the CSV.
        #[arg(long, default_value = "results/udp-echo")]
        out: PathBuf,
    },
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum NicKind {
    /// The in-memory wire (shared memory; no root).
    Wire,
    /// A Linux TAP device whose kernel side is in the peer namespace (root).
    Tap,
}

#[derive(Args, Clone, Debug)]
pub struct NsArgs {
    /// Peer network namespace.
    #[arg(long, default_value = "lazynet-peer")]
    pub peer_ns: String,
    /// TAP device name.
    #[arg(long, default_value = "lntap0")]
    pub dev: String,
    /// Kernel side's address/prefix in the namespace.
    #[arg(long, default_value = "10.201.0.1/24")]
    pub peer_addr: String,
}

#[derive(Args, Clone, Debug)]
pub struct NetArgs {
    /// Which NIC to serve on.
    #[arg(long, value_enum, default_value_t = NicKind::Wire)]
    pub nic: NicKind,
    /// lazynet's address/prefix.
    #[arg(long, default_value = "10.201.0.2/24")]
    pub addr: String,
    /// Record every frame to this pcap file.
    #[arg(long)]
    pub pcap: Option<PathBuf>,
    #[command(flatten)]
    pub ns: NsArgs,
}

/// Parses `a.b.c.d/len`.
pub fn parse_cidr(s: &str) -> anyhow::Result<(Ipv4Addr, u8)> {
    let (a, l) = s.split_once('/').unwrap_or((s, "24"));
    let len: u8 = l.parse()?;
    anyhow::ensure!(len <= 32, "prefix length {len} > 32");
    Ok((a.parse()?, len))
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Demo { seconds } => echo::demo(seconds),
        Cmd::Serve {
            what: ServeCmd::UdpEcho { port, net },
        } => serve::udp_echo(port, &net),
        Cmd::Netns { what } => serve::netns(what),
        Cmd::UdpClient {
            wire,
            count,
            size,
            port,
        } => echo::wire_client(&wire, count, size, port),
        Cmd::Bench {
            what:
                BenchCmd::UdpEcho {
                    seconds,
                    runs,
                    window,
                    size,
                    out,
                },
        } => echo::bench(seconds, runs, window, size, &out),
    }
}
