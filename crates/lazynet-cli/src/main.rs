//! `lazynet`: the command-line program — demo, servers, namespace tooling
//! and benchmarks. Programs live here, not in the library.

mod echo;
mod exp;
mod http;
mod linux_send;
mod loadgen;
mod media;
mod nlf_cmd;
mod plot;
mod serve;
mod tcp_bench;
mod tcp_cmd;
mod util;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use lazynet::stack::ReceiveMode;

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
    /// Download a URL over lazynet (TAP into the peer namespace) to a file or stdout.
    Get {
        /// http://A.B.C.D[:PORT]/PATH
        url: String,
        /// Write the body here instead of stdout.
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
        /// Give up after this many seconds without progress.
        #[arg(long, default_value_t = 30.0)]
        timeout: f64,
        /// lazynet's address/prefix.
        #[arg(long, default_value = "10.201.0.2/24")]
        addr: String,
        /// Record every frame to this pcap file.
        #[arg(long)]
        pcap: Option<PathBuf>,
        /// Inject faults on lazynet's NIC (see `serve --help`).
        #[arg(long)]
        fault: Option<String>,
        /// Segmentation offload on the TAP device (see `serve --help`).
        #[arg(long, value_enum, default_value_t = OnOff::On)]
        tso: OnOff,
        #[command(flatten)]
        ns: NsArgs,
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
    /// Open-loop load generators (bounded in count and time).
    Loadgen {
        #[command(subcommand)]
        what: LoadgenCmd,
    },
    /// Programs the experiments run inside their namespaces (not for users).
    #[command(hide = true)]
    ExpHelper {
        #[command(subcommand)]
        what: exp::linux::HelperCmd,
    },
}

#[derive(Subcommand)]
enum LoadgenCmd {
    /// UDP datagrams from a Linux socket (sendmmsg) at an exact rate; run it
    /// in the peer namespace with `ip netns exec`. Frames the kernel does not
    /// take at once are counted as dropped, never waited for.
    Udp {
        /// Destination ADDR:PORT.
        #[arg(long)]
        dst: SocketAddrV4,
        /// Offered rate, datagrams per second.
        #[arg(long)]
        rate: u64,
        /// Duration bound.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Payload bytes (the first 4 are a sequence number).
        #[arg(long, default_value_t = 18)]
        size: usize,
        /// Count bound (default: rate × seconds).
        #[arg(long)]
        count: Option<u64>,
        /// Pin the sender to this CPU.
        #[arg(long)]
        cpu: Option<usize>,
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
    /// LRP Fig. 3: delivered vs offered UDP rate to 10x saturation, per
    /// receive mode, Linux beside them.
    Livelock(ExpArgs),
    /// LRP Fig. 4: ping-pong latency on one socket while another is blasted.
    LatencyUnderLoad(ExpArgs),
    /// LRP Table 2: a compute worker's CPU share beside two RPC servers.
    Fairness(ExpArgs),
    /// LRP Fig. 5: HTTP transfers/s while SYNs flood another port.
    SynFlood(ExpArgs),
}

/// Options of the overload experiments.
#[derive(clap::Args)]
struct ExpArgs {
    /// A reduced run for CI (under a minute) that checks the qualitative shape.
    #[arg(long)]
    quick: bool,
    /// Output directory (default: results/NAME).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Modes to run, comma-separated (default: all four).
    #[arg(long, value_delimiter = ',')]
    modes: Vec<String>,
    /// Leave out the Linux series.
    #[arg(long)]
    no_linux: bool,
}

impl ExpArgs {
    fn opts(self, name: &str) -> anyhow::Result<exp::ExpOpts> {
        for m in &self.modes {
            if !exp::MODES.contains(&m.as_str()) {
                anyhow::bail!("unknown mode {m:?} (modes: {})", exp::MODES.join(", "));
            }
        }
        Ok(exp::ExpOpts {
            quick: self.quick,
            out: self
                .out
                .unwrap_or_else(|| PathBuf::from(format!("results/{name}"))),
            modes: self.modes,
            no_linux: self.no_linux,
        })
    }
}

#[derive(Subcommand)]
enum ServeCmd {
    /// HTTP/1.1 server: /bytes/N (N generated bytes, byte i = i mod 251),
    /// POST|PUT /upload (answers with the body's length and SHA-256), and
    /// static files from --root.
    Http {
        /// TCP port.
        #[arg(long, default_value_t = 80)]
        port: u16,
        /// Serve files from this directory.
        #[arg(long)]
        root: Option<PathBuf>,
        /// Half-open connections the listener keeps (SYN queue); beyond
        /// them, SYN cookies. 0: every connection opens through a cookie.
        #[arg(long)]
        syn_queue: Option<usize>,
        #[command(flatten)]
        net: NetArgs,
    },
    /// TCP echo server.
    TcpEcho {
        /// TCP port.
        #[arg(long, default_value_t = 7)]
        port: u16,
        /// As for `serve http`.
        #[arg(long)]
        syn_queue: Option<usize>,
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
    /// TCP bulk goodput on the in-memory wire, one connection, sender and
    /// receiver on separate pinned cores; lazynet vs smoltcp (runs
    /// alternated; smoltcp needs `--features smoltcp-bench`).
    TcpBulk {
        /// Seconds per run (after a 300 ms warm-up).
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Runs of each stack (median reported).
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Stack(s) to measure.
        #[arg(long, value_enum, default_value_t = tcp_bench::Which::Both)]
        stack: tcp_bench::Which,
        /// Nagle off in both stacks (default: on, as for a plain socket).
        #[arg(long)]
        nodelay: bool,
        /// Send buffer in KiB, both stacks.
        #[arg(long, default_value_t = 256)]
        send_buf: usize,
        /// Receive buffer in KiB, both stacks.
        #[arg(long, default_value_t = 256)]
        recv_buf: usize,
        /// Run both threads SCHED_FIFO (root; takes ~95% of two cores from
        /// everything else while it runs).
        #[arg(long)]
        fifo: bool,
        /// lazynet's receiving end runs its protocol handler in every poll
        /// before reading (as smoltcp's poll does) instead of letting its
        /// reads process their segments (LRP), which places in-order text
        /// directly into the reader's buffer.
        #[arg(long)]
        eager_receiver: bool,
        /// Whether lazynet's receiver evicts the lines of frames it has
        /// copied out, so that the sending core need not take them back
        /// from its caches (`stack::handback`; default: measure and choose).
        #[arg(long, value_enum, default_value_t = Handback::Adaptive)]
        handback: Handback,
        /// Also run the wire reference series each run: the same bytes
        /// over the same wire with only the per-byte work (copies and
        /// checksums of a stack with copy semantics) and no protocol.
        #[arg(long)]
        wire: bool,
        /// Directory for tcp-bulk.csv and tcp-bulk.txt.
        #[arg(long, default_value = "results/tcp")]
        out: PathBuf,
    },
    /// TCP 1-byte request/response latency over one connection (nodelay),
    /// two pinned busy-polling threads; lazynet vs smoltcp.
    TcpRr {
        /// Seconds per run (after a 300 ms warm-up).
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Runs of each stack (median reported).
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Stack(s) to measure.
        #[arg(long, value_enum, default_value_t = tcp_bench::Which::Both)]
        stack: tcp_bench::Which,
        /// Run both threads SCHED_FIFO (root; takes ~95% of two cores from
        /// everything else while it runs).
        #[arg(long)]
        fifo: bool,
        /// Directory for tcp-rr.csv and tcp-rr.txt.
        #[arg(long, default_value = "results/tcp")]
        out: PathBuf,
    },
    /// BYTES of bulk transfer with both stacks in one thread (profiles).
    TcpBulkSingle {
        /// Bytes to move.
        #[arg(long, default_value_t = 100_000_000)]
        bytes: u64,
        /// Stack(s) to run.
        #[arg(long, value_enum, default_value_t = tcp_bench::Which::Lazynet)]
        stack: tcp_bench::Which,
        /// Runs of each stack (median reported).
        #[arg(long, default_value_t = 1)]
        runs: usize,
        /// lazynet's TCP fast paths (header prediction, bursts, direct
        /// placement) on or off.
        #[arg(long, value_enum, default_value_t = OnOff::On)]
        fast_path: OnOff,
    },
    /// COUNT 1-byte round trips with both stacks in one thread, ping-pong:
    /// deterministic work for instruction counts (callgrind).
    TcpRrSingle {
        /// Round trips.
        #[arg(long, default_value_t = 10_000)]
        count: u64,
        /// Stack(s) to run.
        #[arg(long, value_enum, default_value_t = tcp_bench::Which::Lazynet)]
        stack: tcp_bench::Which,
        /// Runs of each stack (median reported).
        #[arg(long, default_value_t = 1)]
        runs: usize,
        /// lazynet's TCP fast path (header prediction) on or off.
        #[arg(long, value_enum, default_value_t = OnOff::On)]
        fast_path: OnOff,
    },
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum OnOff {
    On,
    Off,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum Handback {
    Off,
    Adaptive,
    Always,
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
    /// With `--nic tap`: segmentation offload, runs of TCP segments written
    /// as one frame the kernel takes as a GSO packet (`IFF_VNET_HDR`).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub tso: OnOff,
    #[command(flatten)]
    pub ns: NsArgs,
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

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Demo { seconds } => {
            echo::demo(seconds)?;
            tcp_cmd::demo(seconds)?;
            media::demo(seconds)
        }
        Cmd::Serve {
            what:
                ServeCmd::Http {
                    port,
                    root,
                    syn_queue,
                    net,
                },
        } => tcp_cmd::serve_http(port, root.as_deref(), syn_queue, &net),
        Cmd::Get {
            url,
            output,
            timeout,
            addr,
            pcap,
            fault,
            tso,
            ns,
        } => tcp_cmd::get(
            &url,
            output.as_deref(),
            timeout,
            &NetArgs {
                nic: NicKind::Tap,
                addr,
                pcap,
                fault,
                mode: ReceiveMode::SoftLrp,
                tso,
                ns,
            },
        ),
        Cmd::Serve {
            what:
                ServeCmd::TcpEcho {
                    port,
                    syn_queue,
                    net,
                },
        } => tcp_cmd::serve(
            "TCP echo",
            port,
            syn_queue,
            &net,
            tcp_cmd::EchoSession::default,
        ),
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
        Cmd::Exp {
            what: ExpCmd::Livelock(a),
        } => exp::livelock::run(&a.opts("livelock")?),
        Cmd::Exp {
            what: ExpCmd::LatencyUnderLoad(a),
        } => exp::latency::run(&a.opts("latency-under-load")?),
        Cmd::Exp {
            what: ExpCmd::Fairness(a),
        } => exp::fairness::run(&a.opts("fairness")?),
        Cmd::Exp {
            what: ExpCmd::SynFlood(a),
        } => exp::synflood::run(&a.opts("syn-flood")?),
        Cmd::Loadgen {
            what:
                LoadgenCmd::Udp {
                    dst,
                    rate,
                    seconds,
                    size,
                    count,
                    cpu,
                },
        } => loadgen::udp_cmd(dst, rate, seconds, size, count, cpu),
        Cmd::ExpHelper { what } => exp::linux::helper(what),
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
        Cmd::Bench {
            what:
                BenchCmd::TcpBulk {
                    seconds,
                    runs,
                    stack,
                    nodelay,
                    send_buf,
                    recv_buf,
                    fifo,
                    wire,
                    eager_receiver,
                    handback,
                    out,
                },
        } => {
            tcp_bench::set_fifo(fifo);
            tcp_bench::set_eager_receiver(eager_receiver);
            tcp_bench::set_handback(match handback {
                Handback::Off => lazynet::stack::HandbackMode::Off,
                Handback::Adaptive => lazynet::stack::HandbackMode::Adaptive,
                Handback::Always => lazynet::stack::HandbackMode::Always,
            });
            tcp_bench::bench_bulk(
                &tcp_bench::BulkOpts {
                    seconds,
                    runs,
                    which: stack,
                    nodelay,
                    send_kib: send_buf,
                    recv_kib: recv_buf,
                    wire,
                },
                &out,
            )
        }
        Cmd::Bench {
            what:
                BenchCmd::TcpRr {
                    seconds,
                    runs,
                    stack,
                    fifo,
                    out,
                },
        } => {
            tcp_bench::set_fifo(fifo);
            tcp_bench::bench_rr(seconds, runs, stack, &out)
        }
        Cmd::Bench {
            what:
                BenchCmd::TcpBulkSingle {
                    bytes,
                    stack,
                    runs,
                    fast_path,
                },
        } => {
            tcp_bench::set_fast_path(fast_path == OnOff::On);
            tcp_bench::bench_bulk_single(bytes, stack, runs)
        }
        Cmd::Bench {
            what:
                BenchCmd::TcpRrSingle {
                    count,
                    stack,
                    runs,
                    fast_path,
                },
        } => {
            tcp_bench::set_fast_path(fast_path == OnOff::On);
            tcp_bench::bench_rr_single(count, stack, runs)
        }
    }
}
