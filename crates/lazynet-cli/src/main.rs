//! `lazynet`: the command-line program — demo, servers, namespace tooling
//! and benchmarks. Programs live here, not in the library.

mod echo;
mod http;
mod linux_send;
mod media;
mod nlf_cmd;
mod plot;
mod serve;
mod tcp_cmd;
mod util;

use std::net::{Ipv4Addr, SocketAddrV4};
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
    /// Network level framing: prebuild media packets.
    Nlf {
        #[command(subcommand)]
        what: NlfCmd,
    },
    /// Experiments reproducing the papers' results; each writes results/NAME/.
    Exp {
        #[command(subcommand)]
        what: ExpCmd,
    },
}

#[derive(Subcommand)]
enum NlfCmd {
    /// Write the meta-data files of MEDIA for each payload size.
    Prebuild {
        /// The media file (MPEG-TS is packetized on 188-byte boundaries).
        media: PathBuf,
        /// Payload sizes, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "1316")]
        payload: Vec<usize>,
        /// Prebuild for RTP (RFC 2250, payload type 33).
        #[arg(long)]
        rtp: bool,
        /// Directory for the meta files (default: beside the media).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Bit rate (bit/s) that paces files without PCRs (not MPEG-TS, or no PCR).
        #[arg(long, default_value_t = 3_000_000)]
        bit_rate: u64,
    },
}

#[derive(Subcommand)]
enum ExpCmd {
    /// NLF Table 1 / Fig. 4: cycles per packet of the four send paths, beside Linux.
    Nlf {
        /// A reduced run for CI (under a minute).
        #[arg(long)]
        quick: bool,
        /// Output directory.
        #[arg(long, default_value = "results/nlf")]
        out: PathBuf,
    },
}

#[derive(Subcommand)]
enum ServeCmd {
    /// TCP echo server.
    TcpEcho {
        /// TCP port.
        #[arg(long, default_value_t = 7)]
        port: u16,
        #[command(flatten)]
        net: NetArgs,
    },
    /// UDP echo server.
    UdpEcho {
        /// UDP port.
        #[arg(long, default_value_t = 7)]
        port: u16,
        #[command(flatten)]
        net: NetArgs,
    },
    /// Media server: streams a prebuilt file to unicast clients (network level framing).
    Media {
        /// The media file (prebuilt with `lazynet nlf prebuild`).
        media: PathBuf,
        /// A client ADDR:PORT (repeat for more).
        #[arg(long = "client", required = true)]
        clients: Vec<SocketAddrV4>,
        /// RTP framing (RFC 2250; the meta file must be prebuilt with --rtp).
        #[arg(long)]
        rtp: bool,
        /// Send path: traditional, v1, v2 or v3.
        #[arg(long, default_value = "v3")]
        path: lazynet::nlf::SendPath,
        /// Payload size the meta file was prebuilt for.
        #[arg(long, default_value_t = 1316)]
        payload: usize,
        /// The meta file (default: derived from the media, payload and --rtp).
        #[arg(long)]
        meta: Option<PathBuf>,
        /// Start over when the stream ends (until SIGINT/SIGTERM).
        #[arg(long = "loop")]
        repeat: bool,
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
        Cmd::Demo { seconds } => {
            echo::demo(seconds)?;
            tcp_cmd::demo(seconds)?;
            media::demo(seconds)
        }
        Cmd::Serve {
            what: ServeCmd::TcpEcho { port, net },
        } => tcp_cmd::serve("TCP echo", port, &net, tcp_cmd::EchoSession::default),
        Cmd::Serve {
            what: ServeCmd::UdpEcho { port, net },
        } => serve::udp_echo(port, &net),
        Cmd::Serve {
            what:
                ServeCmd::Media {
                    media,
                    clients,
                    rtp,
                    path,
                    payload,
                    meta,
                    repeat,
                    net,
                },
        } => media::serve(
            &media::MediaArgs {
                media,
                meta,
                clients,
                rtp,
                path,
                payload,
                repeat,
            },
            &net,
        ),
        Cmd::Nlf {
            what:
                NlfCmd::Prebuild {
                    media,
                    payload,
                    rtp,
                    out,
                    bit_rate,
                },
        } => nlf_cmd::prebuild_cmd(&media, &payload, rtp, out.as_deref(), bit_rate),
        Cmd::Exp {
            what: ExpCmd::Nlf { quick, out },
        } => media::exp(quick, &out),
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
