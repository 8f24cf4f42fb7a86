//! The command line: every `lazynet-lab` subcommand, flag and default,
//! as clap reads them ([`Cli`]), and [`run`], which hands each command to
//! the module that owns it ([`dispatch`]); the hidden `exp-helper`
//! programs are in [`helper`].
//!
//! **Owns:** the names, flags, defaults and help texts of the command line
//! (CI scripts, docs and result files use them: they change only on
//! purpose). **May not touch:** what a command measures or writes; that
//! belongs to its module.

mod dispatch;
pub mod helper;

use std::net::SocketAddrV4;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use lazynet::stack::ReceiveMode;
use lazynet_cli::args::{parse_mode, OnOff};

use crate::bench::tcp::Which;
use crate::infra::exp::ExpOpts;

/// Parses the command line and runs the command.
pub fn run() -> anyhow::Result<()> {
    dispatch::run(Cli::parse())
}

#[derive(Parser)]
#[command(
    name = "lazynet-lab",
    version,
    about = "lazynet's lab: experiments reproducing the papers, benchmarks against Linux and smoltcp, load generators"
)]
pub struct Cli {
    /// Diagnostics on stderr: counters, stalls, the host's report.
    #[arg(long, short, global = true)]
    verbose: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// LRP Fig. 3: delivered vs offered UDP rate to 10x saturation, per
    /// receive mode, Linux beside them.
    Livelock(ExpArgs),
    /// LRP Fig. 4: ping-pong latency on one socket while another is blasted.
    LatencyUnderLoad(ExpArgs),
    /// LRP Table 2: a compute worker's CPU share beside two RPC servers.
    Fairness(ExpArgs),
    /// LRP Fig. 5: HTTP transfers/s while SYNs flood another port.
    SynFlood(SynFloodArgs),
    /// RTU Fig. 7 and admission: guaranteed TCP streams on periodic
    /// handlers beside spinning processes, Linux TCP under CFS and
    /// SCHED_FIFO beside them (root for the SCHED_FIFO series).
    RtuQos(ExpArgs),
    /// NLF Table 1 / Fig. 4: cycles per packet of the four send paths, beside Linux.
    Nlf {
        /// A reduced run for CI (under a minute).
        #[arg(long)]
        quick: bool,
        /// Output directory.
        #[arg(long, default_value = "results/nlf")]
        out: PathBuf,
    },
    /// The latency paper's build variants (STD, OUT, CLO, LIN, PIN, ALL,
    /// BAD, hot/cold splitting, PGO) built from this tree and measured with
    /// callgrind, cachegrind and alternated timing (run from the repository
    /// root; needs valgrind, binutils and rustup's llvm-tools for PGO).
    Paths {
        /// A short run for CI: STD and the default build, fewer round trips.
        #[arg(long)]
        quick: bool,
        /// Round trips of the smaller callgrind run (the larger does 2N).
        #[arg(long, default_value_t = 5000)]
        round_trips: u64,
        /// Alternated timing rounds (each variant and smoltcp once each).
        #[arg(long, default_value_t = 20)]
        pairs: usize,
        /// Round trips per one-thread timing run.
        #[arg(long, default_value_t = 200_000)]
        timed_round_trips: u64,
        /// Seconds per two-core request/response run.
        #[arg(long, default_value_t = 1.0)]
        rr_seconds: f64,
        /// Leave out LLVM's hot/cold splitting and PGO (two full builds).
        #[arg(long)]
        no_auto: bool,
        /// Output directory.
        #[arg(long, default_value = "results/paths")]
        out: PathBuf,
    },
    /// MemNet Figs. 5–8: the offload placement's API costs, a web server's
    /// throughput and host CPU, and several clients on one offload core,
    /// beside Linux sockets, io_uring and lazynet's other placements.
    Memnet {
        /// A reduced run for CI (about a minute).
        #[arg(long)]
        quick: bool,
        /// Simulated application work per web request (µs): enough that
        /// the host core, not the client's, is the bottleneck.
        #[arg(long, default_value_t = 150)]
        work_us: u64,
        /// Parts to run: send, web, clients (default: all).
        #[arg(long, value_delimiter = ',')]
        parts: Vec<String>,
        /// Web servers to run: linux-epoll, linux-uring, in-process,
        /// multi-process, memnet-sockets, memnet-direct, memnet-async
        /// (default: all).
        #[arg(long, value_delimiter = ',')]
        series: Vec<String>,
        /// Offered web loads in requests/s (default: the sweep).
        #[arg(long, value_delimiter = ',')]
        rates: Vec<f64>,
        /// Output directory.
        #[arg(long, default_value = "results/memnet")]
        out: PathBuf,
    },
    /// lazynet's web server on a real NIC path (AF_XDP on veth, TAP)
    /// against nginx over veth, driven by wrk, ab, curl and lazynet's load
    /// generator; UDP echo against Linux's batched server (root).
    Web {
        /// A short run for CI (one round, 1 s per workload, a 64 MiB file).
        #[arg(long)]
        quick: bool,
        /// Rounds (each server once per round, in rotating order).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Seconds per timed workload.
        #[arg(long, default_value_t = 4.0)]
        seconds: f64,
        /// Size of the large file, MiB.
        #[arg(long, default_value_t = 1024)]
        big_mib: u64,
        /// Workloads to run: gen-close, gen-keepalive, wrk-keepalive,
        /// wrk-close, ab-c1, ab-c8, download, udp-echo (default: all).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Servers to run: lazynet-xdp, lazynet-tap, nginx (default: all).
        #[arg(long, value_delimiter = ',')]
        servers: Vec<String>,
        /// Output directory.
        #[arg(long, default_value = "results/web")]
        out: PathBuf,
    },
    /// Benchmarks measured side by side with Linux and smoltcp.
    Bench {
        #[command(subcommand)]
        what: BenchCmd,
    },
    /// Open-loop load generators (bounded in count and time).
    Loadgen {
        #[command(subcommand)]
        what: LoadgenCmd,
    },
    /// The NAME.{csv,txt,png} of a benchmark a script runs.
    Report {
        #[command(subcommand)]
        what: ReportCmd,
    },
    /// Programs the experiments run inside their namespaces (not for users).
    #[command(hide = true)]
    ExpHelper {
        #[command(subcommand)]
        what: helper::HelperCmd,
    },
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
    #[arg(long, value_delimiter = ',', value_parser = parse_mode)]
    modes: Vec<ReceiveMode>,
    /// Leave out the Linux series.
    #[arg(long)]
    no_linux: bool,
}

impl ExpArgs {
    fn opts(self, name: &str) -> ExpOpts {
        ExpOpts {
            quick: self.quick,
            out: self
                .out
                .unwrap_or_else(|| PathBuf::from(format!("results/{name}"))),
            modes: self.modes,
            no_linux: self.no_linux,
        }
    }
}

/// Options of `syn-flood`.
#[derive(clap::Args)]
struct SynFloodArgs {
    #[command(flatten)]
    exp: ExpArgs,
    /// SYN rates to sweep (SYN/s, comma-separated; `max` for as fast as the
    /// generator can). Default: the experiment's own sweep.
    #[arg(long, value_delimiter = ',')]
    syn_rates: Vec<String>,
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
enum ReportCmd {
    /// Criterion's output (saved to a file) to NAME.csv, NAME.txt, NAME.png.
    Criterion {
        /// The benchmark's name (the files' stem).
        #[arg(long)]
        name: String,
        /// Criterion's output.
        #[arg(long)]
        raw: PathBuf,
        /// The command that produced it (for NAME.txt).
        #[arg(long)]
        command: String,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
    },
    /// OUT/NAME.csv (written by a script) gets NAME.txt and NAME.png:
    /// grouped bars of the median of VALUE per (CATEGORY, SERIES).
    Bars {
        /// The benchmark's name (the files' stem).
        #[arg(long)]
        name: String,
        /// The folder holding NAME.csv.
        #[arg(long)]
        out: PathBuf,
        /// The command that produced it (for NAME.txt).
        #[arg(long)]
        command: String,
        /// A file whose text ends NAME.txt (parameters, summary).
        #[arg(long)]
        notes: Option<PathBuf>,
        /// Column for the x axis.
        #[arg(long)]
        category: String,
        /// Column naming the bars of a group.
        #[arg(long)]
        series: String,
        /// Column of values.
        #[arg(long)]
        value: String,
        /// The chart's title.
        #[arg(long)]
        title: String,
        /// The y axis' label.
        #[arg(long)]
        unit: String,
    },
}

#[derive(Subcommand)]
enum BenchCmd {
    /// The async sockets (lazynet-tokio): hyper keep-alive requests/s on
    /// them over the wire beside hyper on tokio over Linux loopback, and a
    /// TCP echo's round trip on them beside the native socket API's.
    Async {
        /// Seconds per hyper measure (after a 300 ms warm-up).
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// hyper runs (the two series alternating; medians judged).
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// hyper client connections.
        #[arg(long, default_value_t = 8)]
        conns: usize,
        /// Echo message bytes.
        #[arg(long, default_value_t = 64)]
        size: usize,
        /// Echo rounds (the four series each, in rotating order).
        #[arg(long, default_value_t = 15)]
        echo_rounds: usize,
        /// Seconds per echo measure (after a 300 ms warm-up).
        #[arg(long, default_value_t = 0.5)]
        echo_seconds: f64,
        /// Directory for async.csv, async.txt and async.png.
        #[arg(long, default_value = "results/async")]
        out: PathBuf,
    },
    /// Wake-up latency of a sleeping receiver: a lazynet host sleeping on
    /// the in-memory wire, the same host polling, a Linux thread blocked on
    /// a UDP socket over loopback, and a bare futex wake.
    Wakeup {
        /// Wakes per series per round.
        #[arg(long, default_value_t = 300)]
        samples: usize,
        /// Rounds (the series' order rotates).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Microseconds between wakes.
        #[arg(long, default_value_t = 1000)]
        gap_us: u64,
        /// Directory for wakeup.csv, wakeup.txt and wakeup.png.
        #[arg(long, default_value = "results/wakeup")]
        out: PathBuf,
    },
    /// The multi-process placement (daemon + attached application) beside
    /// the in-process one and Linux: UDP echo rate and round trip, TCP
    /// request/response and bulk (needs the `lazynet` binary built beside
    /// this one).
    Multiproc {
        /// Seconds per measure.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Runs (series in rotating order; medians reported).
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// The daemon's `--idle-spin-us` (how long it polls before it
        /// sleeps).
        #[arg(long, default_value_t = 5)]
        daemon_idle_spin_us: u64,
        /// Directory for multiproc.csv, multiproc.txt and multiproc.png.
        #[arg(long, default_value = "results/multiproc")]
        out: PathBuf,
    },
    /// LRP's claim for the multi-process placement: two attached
    /// applications with cgroup cpu.shares 2:1 under equal offered load
    /// share CPU 1 2:1, protocol work included; Linux beside (root).
    LrpShare {
        /// Seconds per window (after 1 s of warm-up).
        #[arg(long, default_value_t = 4.0)]
        seconds: f64,
        /// Runs (lazynet and Linux alternate; medians reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Points RATE:WORK, comma-separated: datagrams/s offered to each
        /// application, and work iterations per datagram in each.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "20000:30000,50000:6000,40000:3000"
        )]
        points: Vec<String>,
        /// Directory for lrp-share.csv, lrp-share.txt and lrp-share.png.
        #[arg(long, default_value = "results/lrp-share")]
        out: PathBuf,
    },
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
        /// Directory for udp-echo.csv, udp-echo.txt and udp-echo.png.
        #[arg(long, default_value = "results/udp-echo")]
        out: PathBuf,
    },
    /// TCP bulk goodput on the in-memory wire, one connection, sender and
    /// receiver on separate pinned cores; lazynet vs smoltcp (runs
    /// alternated).
    TcpBulk {
        /// Seconds per run (after a 300 ms warm-up).
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Runs of each stack (median reported).
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Stack(s) to measure.
        #[arg(long, value_enum, default_value_t = Which::Both)]
        stack: Which,
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
        /// from its caches (`stack::evict`; default: measure and choose).
        #[arg(long, value_enum, default_value_t = Eviction::Adaptive)]
        evict: Eviction,
        /// Also run the wire reference series each run: the same bytes
        /// over the same wire with only the per-byte work (copies and
        /// checksums of a stack with copy semantics) and no protocol.
        #[arg(long)]
        wire: bool,
        /// Directory for tcp-bulk.csv, tcp-bulk.txt and tcp-bulk.png.
        #[arg(long, default_value = "results/tcp-bulk")]
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
        #[arg(long, value_enum, default_value_t = Which::Both)]
        stack: Which,
        /// Run both threads SCHED_FIFO (root; takes ~95% of two cores from
        /// everything else while it runs).
        #[arg(long)]
        fifo: bool,
        /// Directory for tcp-rr.csv, tcp-rr.txt and tcp-rr.png.
        #[arg(long, default_value = "results/tcp-rr")]
        out: PathBuf,
    },
    /// Instructions per TCP round trip and per byte (callgrind), lazynet
    /// with its fast paths on and off, and smoltcp; needs valgrind.
    TcpInstructions {
        /// Round trips of the smaller run (the larger does twice as many).
        #[arg(long, default_value_t = 5000)]
        round_trips: u64,
        /// Bytes of the smaller bulk run.
        #[arg(long, default_value_t = 20_000_000)]
        bytes: u64,
        /// Output directory.
        #[arg(long, default_value = "results/tcp-instructions")]
        out: PathBuf,
    },
    /// BYTES of bulk transfer with both stacks in one thread (profiles).
    TcpBulkSingle {
        /// Bytes to move.
        #[arg(long, default_value_t = 100_000_000)]
        bytes: u64,
        /// Stack(s) to run.
        #[arg(long, value_enum, default_value_t = Which::Lazynet)]
        stack: Which,
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
        #[arg(long, value_enum, default_value_t = Which::Lazynet)]
        stack: Which,
        /// Runs of each stack (median reported).
        #[arg(long, default_value_t = 1)]
        runs: usize,
        /// lazynet's TCP fast path (header prediction) on or off.
        #[arg(long, value_enum, default_value_t = OnOff::On)]
        fast_path: OnOff,
    },
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum Eviction {
    Off,
    Adaptive,
    Always,
}
