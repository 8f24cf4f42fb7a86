//! `lazynet`: the program users run. The demo, the servers (UDP and TCP
//! echo, HTTP, media), a downloader, the peer namespace, and the NLF
//! prebuilder. Experiments, comparisons and load generators are in the lab
//! (`lazynet-lab`).
#![deny(unsafe_code)]

use std::net::SocketAddrV4;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use lazynet::stack::ReceiveMode;
use lazynet_cli::args::{NetArgs, NetnsCmd, NicKind, NsArgs, OnOff};
use lazynet_cli::{daemon_cmd, echo, http, media, memnet_http, nlf_cmd, serve, tcp_cmd};

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
        /// Print every counter of the TCP part's stacks too.
        #[arg(long)]
        verbose: bool,
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
    /// Download a URL over lazynet (TAP or AF_XDP into the peer namespace) to a file or stdout.
    Get {
        /// http://A.B.C.D[:PORT]/PATH
        url: String,
        /// The NIC: `tap` or `xdp` (a veth pair into the peer namespace).
        #[arg(long, value_enum, default_value_t = NicKind::Tap)]
        nic: NicKind,
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
        /// Attach to the lazynet daemon at this control socket (see
        /// `serve --help`).
        #[arg(long)]
        daemon: Option<PathBuf>,
        #[command(flatten)]
        ns: NsArgs,
    },
    /// The multi-process and offload placements: own the NIC, demultiplex,
    /// and serve applications that attach (`serve … --daemon PATH`, `get
    /// --daemon PATH`), each in a communication area of its own; with
    /// `--placement offload`, also run TCP on the daemon's core for MemNet
    /// clients (`lazynet::memnet`).
    Daemon {
        /// The control socket's path.
        #[arg(long, default_value = "/run/lazynet.sock")]
        socket: PathBuf,
        /// The control socket's file mode, octal (who may attach).
        #[arg(long, default_value = "660", value_parser = parse_octal)]
        socket_mode: u32,
        /// Applications attached at once, at most.
        #[arg(long, default_value_t = 16)]
        max_apps: usize,
        /// Microseconds the daemon keeps polling with nothing to do before
        /// it sleeps (long with a core of its own, short on a shared one).
        /// Default: 5 (multi-process), 1000 (offload).
        #[arg(long)]
        idle_spin_us: Option<u64>,
        /// While polling idle, yield the core to other threads instead of
        /// spinning (a polling daemon on a shared core).
        #[arg(long)]
        idle_yield: bool,
        /// Where protocol processing runs: in each application
        /// (multi-process), or also in the daemon for MemNet clients
        /// (offload).
        #[arg(long, value_enum, default_value_t = daemon_cmd::PlacementArg::MultiProcess)]
        placement: daemon_cmd::PlacementArg,
        /// Pin the daemon to this CPU (the offload placement's dedicated core).
        #[arg(long)]
        cpu: Option<usize>,
        #[command(flatten)]
        net: NetArgs,
    },
    /// Print a running daemon's per-application counters and drops.
    Stats {
        /// The daemon's control socket.
        #[arg(long, default_value = "/run/lazynet.sock")]
        daemon: PathBuf,
    },
    /// Network level framing: prebuild media packets.
    Nlf {
        #[command(subcommand)]
        what: NlfCmd,
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
        /// Be a MemNet client of the offload daemon at `--daemon PATH`
        /// (which then runs TCP), with these calls.
        #[arg(long, value_enum, requires = "daemon")]
        memnet: Option<memnet_http::Api>,
        /// MemNet: how long a wait polls for a completion before it sleeps
        /// on the doorbell (µs).
        #[arg(long, default_value_t = 50)]
        memnet_spin_us: u64,
        /// Simulated application work per request, in microseconds of busy
        /// CPU (experiments: makes the server's core the bottleneck).
        #[arg(long, default_value_t = 0)]
        work_us: u64,
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

fn parse_octal(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s.trim_start_matches("0o"), 8).map_err(|e| format!("{s}: {e}"))
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Demo { seconds, verbose } => {
            echo::demo(seconds)?;
            tcp_cmd::demo(seconds, verbose)?;
            media::demo(seconds)
        }
        Cmd::Serve {
            what:
                ServeCmd::Http {
                    port,
                    root,
                    syn_queue,
                    memnet,
                    memnet_spin_us,
                    work_us,
                    net,
                },
        } => {
            let cfg = std::rc::Rc::new(
                http::ServerConfig::new(root.as_deref())?.with_work_ns(work_us * 1000),
            );
            match (memnet, &net.daemon) {
                (Some(api), Some(path)) => memnet_http::run(path, port, api, cfg, memnet_spin_us),
                _ => tcp_cmd::serve_http(port, cfg, syn_queue, &net),
            }
        }
        Cmd::Get {
            url,
            nic,
            output,
            timeout,
            addr,
            pcap,
            fault,
            tso,
            daemon,
            ns,
        } => tcp_cmd::get(
            &url,
            output.as_deref(),
            timeout,
            &NetArgs {
                nic,
                addr,
                pcap,
                fault,
                mode: ReceiveMode::SoftLrp,
                tso,
                daemon,
                busy_poll_us: 0,
                ns,
            },
        ),
        Cmd::Daemon {
            socket,
            socket_mode,
            max_apps,
            idle_spin_us,
            idle_yield,
            placement,
            cpu,
            net,
        } => daemon_cmd::run(&daemon_cmd::DaemonArgs {
            socket,
            socket_mode,
            max_apps,
            idle_spin_us,
            idle_yield,
            placement,
            cpu,
            net,
        }),
        Cmd::Stats { daemon } => {
            print!("{}", lazynet::daemon::stats(&daemon)?);
            Ok(())
        }
        Cmd::Serve {
            what:
                ServeCmd::TcpEcho {
                    port,
                    syn_queue,
                    net,
                },
        } => tcp_cmd::serve("TCP echo", port, syn_queue, &net, tcp_cmd::EchoApp::default),
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
        Cmd::Netns { what } => serve::netns(what),
        Cmd::UdpClient {
            wire,
            count,
            size,
            port,
        } => echo::wire_client(&wire, count, size, port),
    }
}
