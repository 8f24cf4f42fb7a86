//! The hidden `lazynet-lab exp-helper …` subcommands ([`HelperCmd`]): the
//! programs the experiments start inside their namespaces, cgroups or on a
//! pinned core, and whole Linux or TAP points for tests; [`run`] hands each
//! to the module that owns it.
//!
//! **Owns:** the helpers' names, flags and defaults (the experiments build
//! these command lines). **May not touch:** what a helper does; that is in
//! [`crate::baseline::linux_helpers`] and the experiments' modules.

use std::net::SocketAddrV4;

use crate::baseline::{linux, linux_helpers, linux_web};
use crate::papers::lrp::share;
use crate::papers::lrp::tap::tap_livelock_point;
use crate::papers::memnet;

/// The hidden `lazynet-lab exp-helper …` subcommands: the programs the Linux
/// series runs inside its namespaces, and whole points for tests.
#[derive(clap::Subcommand, Debug)]
pub enum HelperCmd {
    /// A CPU-bound ordinary process: spins on `cpu` for `seconds` (or until
    /// killed), as the competing load of `rtu-qos`.
    Spin {
        /// Seconds to spin at most.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// CPU to pin to.
        #[arg(long)]
        cpu: Option<usize>,
    },
    /// UDP sink: receives (recvmmsg, up to 32 at a time), spends
    /// `work(W)` per datagram; prints `ready`, and at the end (SIGTERM or
    /// --seconds) `udp-sink received=N bytes=B`.
    UdpSink {
        /// Address to bind.
        #[arg(long)]
        bind: SocketAddrV4,
        /// Iterations of the per-datagram work.
        #[arg(long, default_value_t = 0)]
        work_iters: u32,
        /// Upper bound on the run.
        #[arg(long, default_value_t = 60.0)]
        seconds: f64,
        /// Pin to this CPU.
        #[arg(long)]
        cpu: Option<usize>,
    },
    /// `lrp-share`'s application: UDP echo spending `work(W)` per
    /// datagram, attached to the daemon at `--daemon` or on a Linux socket
    /// (127.0.0.1); prints `ready`, and at the end `share-echo echoed=N`.
    ShareEcho {
        /// The daemon's control socket (none: a Linux socket).
        #[arg(long)]
        daemon: Option<std::path::PathBuf>,
        /// UDP port.
        #[arg(long)]
        port: u16,
        /// Iterations of the per-datagram work.
        #[arg(long, default_value_t = 0)]
        work_iters: u32,
        /// Upper bound on the run.
        #[arg(long, default_value_t = 60.0)]
        seconds: f64,
    },
    /// `lrp-share`'s paced client of the Linux series (127.0.0.1).
    ShareClient {
        /// Datagrams per millisecond to each application.
        #[arg(long)]
        per_ms: usize,
        /// Warm-up before the window.
        #[arg(long, default_value_t = 1000)]
        warm_ms: u64,
        /// The window.
        #[arg(long, default_value_t = 4.0)]
        seconds: f64,
    },
    /// `memnet`'s Linux web server (epoll or io_uring), same HTTP code and
    /// work per request as `lazynet serve http`; prints `ready`.
    LinuxWeb {
        /// `epoll` or `uring`.
        #[arg(long)]
        kind: String,
        /// Address to listen on.
        #[arg(long)]
        bind: SocketAddrV4,
        /// Simulated work per request (µs).
        #[arg(long, default_value_t = 0)]
        work_us: u64,
        /// Upper bound on the run.
        #[arg(long, default_value_t = 600.0)]
        seconds: f64,
    },
    /// `memnet`'s Linux send costs (run inside a namespace whose loopback
    /// receive work is on CPU 1): prints `SERIES\tSIZE\tNS` lines.
    LinuxSendCost {
        /// Sizes, comma-separated.
        #[arg(long, value_delimiter = ',')]
        sizes: Vec<usize>,
        /// Calls per size.
        #[arg(long, default_value_t = 20000)]
        per: usize,
    },
    /// `memnet`'s client processes: 256-byte `async_send` jobs to the sink.
    MemnetSender {
        /// The offload daemon's control socket.
        #[arg(long)]
        daemon: std::path::PathBuf,
        /// Bytes per job.
        #[arg(long, default_value_t = 256)]
        size: usize,
        /// Jobs per second (0: as fast as the credits allow).
        #[arg(long, default_value_t = 0.0)]
        rate: f64,
        /// How long.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
    },
    /// Batched UDP echo server (`web`): `recvmmsg` up to 64 datagrams,
    /// `sendmmsg` them back to their senders.
    UdpEchoBatch {
        /// Address to bind.
        #[arg(long)]
        bind: SocketAddrV4,
        /// Upper bound on the run.
        #[arg(long, default_value_t = 60.0)]
        seconds: f64,
    },
    /// UDP echo (ping-pong) server: sends every datagram back.
    UdpEcho {
        /// Address to bind.
        #[arg(long)]
        bind: SocketAddrV4,
        /// Upper bound on the run.
        #[arg(long, default_value_t = 60.0)]
        seconds: f64,
        /// Pin to this CPU.
        #[arg(long)]
        cpu: Option<usize>,
    },
    /// Ping-pong client: one datagram outstanding; prints
    /// `ping-client samples=N lost=L p50_ns=.. p99_ns=.. p999_ns=.. max_ns=..`.
    PingClient {
        /// The echo server.
        #[arg(long)]
        dst: SocketAddrV4,
        /// Measured window.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Pings before the window, not recorded.
        #[arg(long, default_value_t = linux::PING_WARMUP_MS)]
        warmup_ms: u64,
        /// A ping without reply after this long is lost (and not retried).
        #[arg(long, default_value_t = linux::PING_TIMEOUT_MS)]
        timeout_ms: u64,
        /// Payload bytes (>= 8).
        #[arg(long, default_value_t = 16)]
        size: usize,
        /// Pin to this CPU.
        #[arg(long)]
        cpu: Option<usize>,
    },
    /// One Linux livelock point and one latency point in fresh namespaces
    /// (for tests and by hand); prints both, the namespaces and the pids.
    LinuxPoints {
        /// Offered rate of the livelock point.
        #[arg(long, default_value_t = 50_000)]
        rate: u64,
        /// Blast rate of the latency point (0: unloaded).
        #[arg(long, default_value_t = 50_000)]
        blast: u64,
        /// Seconds per point.
        #[arg(long, default_value_t = 1.0)]
        seconds: f64,
        /// Work per datagram (sink and blast sink).
        #[arg(long, default_value_t = 1000)]
        work_iters: u32,
        /// Leave RPS off (comparison: receive work on the sender's core).
        #[arg(long)]
        no_rps: bool,
    },
    /// One livelock point of lazynet over TAP, fed from a Linux peer
    /// namespace ([`tap_livelock_point`]); prints it.
    TapPoint {
        /// Receive mode: eager, early-demux, soft-lrp or ni-lrp.
        #[arg(long, default_value = "soft-lrp", value_parser = lazynet_cli::args::parse_mode)]
        mode: lazynet::stack::ReceiveMode,
        /// Offered rate.
        #[arg(long, default_value_t = 50_000)]
        rate: u64,
        /// Seconds.
        #[arg(long, default_value_t = 1.0)]
        seconds: f64,
        /// Work per datagram.
        #[arg(long, default_value_t = 1000)]
        work_iters: u32,
    },
}

/// Runs a helper subcommand.
pub fn run(cmd: HelperCmd) -> anyhow::Result<()> {
    match cmd {
        HelperCmd::Spin { seconds, cpu } => linux_helpers::spin(seconds, cpu),
        HelperCmd::UdpSink {
            bind,
            work_iters,
            seconds,
            cpu,
        } => linux_helpers::udp_sink(bind, work_iters, seconds, cpu),
        HelperCmd::UdpEcho { bind, seconds, cpu } => linux_helpers::udp_echo(bind, seconds, cpu),
        HelperCmd::UdpEchoBatch { bind, seconds } => linux_helpers::udp_echo_batch(bind, seconds),
        HelperCmd::ShareEcho {
            daemon,
            port,
            work_iters,
            seconds,
        } => share::share_echo(daemon.as_deref(), port, work_iters, seconds),
        HelperCmd::LinuxWeb {
            kind,
            bind,
            work_us,
            seconds,
        } => match kind.as_str() {
            "epoll" => linux_web::epoll(bind, work_us, seconds.clamp(0.1, 3600.0)),
            "uring" => linux_web::uring(bind, work_us, seconds.clamp(0.1, 3600.0)),
            k => anyhow::bail!("unknown server kind {k}"),
        },
        HelperCmd::LinuxSendCost { sizes, per } => {
            memnet::linux_send_cost(&sizes, per.clamp(1, 10_000_000))
        }
        HelperCmd::MemnetSender {
            daemon,
            size,
            rate,
            seconds,
        } => memnet::memnet_sender(
            &daemon,
            size.clamp(1, 65536),
            rate,
            seconds.clamp(0.1, 600.0),
        ),
        HelperCmd::ShareClient {
            per_ms,
            warm_ms,
            seconds,
        } => share::share_client(per_ms, warm_ms, seconds.clamp(0.1, 600.0)),
        HelperCmd::PingClient {
            dst,
            seconds,
            warmup_ms,
            timeout_ms,
            size,
            cpu,
        } => linux_helpers::ping_client(dst, seconds, warmup_ms, timeout_ms, size, cpu),
        HelperCmd::LinuxPoints {
            rate,
            blast,
            seconds,
            work_iters,
            no_rps,
        } => linux_helpers::linux_points(rate, blast, seconds, work_iters, !no_rps),
        HelperCmd::TapPoint {
            mode,
            rate,
            seconds,
            work_iters,
        } => {
            let p = tap_livelock_point(mode, rate, seconds, work_iters)?;
            println!("tap {}: {}", mode.name(), p.summary());
            println!(
                "tap offered={} delivered={} sink_drops={} tap_drops={}",
                p.offered, p.delivered, p.sink_drops, p.backlog_drops
            );
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_arguments_parse() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct T {
            #[command(subcommand)]
            h: HelperCmd,
        }
        let t = T::try_parse_from([
            "t",
            "udp-sink",
            "--bind",
            "10.203.0.1:9000",
            "--work-iters",
            "700",
            "--cpu",
            "1",
        ])
        .unwrap();
        match t.h {
            HelperCmd::UdpSink {
                bind,
                work_iters,
                seconds,
                cpu,
            } => {
                assert_eq!(bind, SocketAddrV4::new(linux::HOST_ADDR, 9000));
                assert_eq!((work_iters, seconds, cpu), (700, 60.0, Some(1)));
            }
            h => panic!("{h:?}"),
        }
        assert!(T::try_parse_from(["t", "udp-sink", "--bind", "nonsense"]).is_err());
    }
}
