//! [`run`]: each command of the command line ([`super::Cli`]) to the
//! module that owns it, with the quick runs' fixed sizes and the full
//! runs' bounds.
//!
//! **May not touch:** the command line itself (`super`), or what a command
//! measures.

use lazynet_cli::args::OnOff;

use super::{helper, BenchCmd, Cli, Cmd, Eviction, LoadgenCmd, ReportCmd};
use crate::bench::{async_bench, multiproc, tcp, tcp_instructions, udp_echo, wakeup, web};
use crate::infra::exp::rejudged;
use crate::infra::report;
use crate::loadgen;
use crate::papers::{lrp, memnet, nlf, paths, rtu};

/// Runs the command `cli` names.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    report::set_verbose(cli.verbose);
    match cli.cmd {
        Cmd::Livelock(a) => {
            let o = a.opts("livelock");
            rejudged(o.quick, || lrp::livelock::run(&o))
        }
        Cmd::LatencyUnderLoad(a) => {
            let o = a.opts("latency-under-load");
            rejudged(o.quick, || lrp::latency::run(&o))
        }
        Cmd::Fairness(a) => {
            let o = a.opts("fairness");
            rejudged(o.quick, || lrp::fairness::run(&o))
        }
        Cmd::RtuQos(a) => {
            let o = a.opts("rtu-qos");
            rejudged(o.quick, || rtu::qos::run(&o))
        }
        Cmd::SynFlood(a) => {
            let o = a.exp.opts("syn-flood");
            rejudged(o.quick, || lrp::synflood::run(&o, &a.syn_rates))
        }
        Cmd::Nlf { quick, out } => nlf::exp(quick, &out),
        Cmd::Paths {
            quick,
            round_trips,
            pairs,
            timed_round_trips,
            rr_seconds,
            no_auto,
            out,
        } => paths::exp(&if quick {
            paths::Opts {
                quick,
                round_trips: 1000,
                pairs: 3,
                timed_round_trips: 50_000,
                rr_seconds: 0.3,
                auto: false,
                out,
            }
        } else {
            paths::Opts {
                quick,
                round_trips,
                pairs,
                timed_round_trips,
                rr_seconds,
                auto: !no_auto,
                out,
            }
        }),
        Cmd::Web {
            quick,
            rounds,
            seconds,
            big_mib,
            only,
            servers,
            out,
        } => web::exp(
            &if quick {
                web::Opts {
                    quick,
                    rounds: 1,
                    seconds: 1.0,
                    big_mib: 64,
                    only,
                    servers,
                }
            } else {
                web::Opts {
                    quick,
                    rounds: rounds.clamp(1, 20),
                    seconds: seconds.clamp(0.5, 60.0),
                    big_mib: big_mib.clamp(1, 4096),
                    only,
                    servers,
                }
            },
            &out,
        ),
        Cmd::Memnet {
            quick,
            work_us,
            parts,
            series,
            rates,
            out,
        } => memnet::exp(
            &memnet::Opts {
                quick,
                work_us,
                parts,
                series,
                rates,
            },
            &out,
        ),
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
        Cmd::ExpHelper { what } => helper::run(what),
        Cmd::Report {
            what:
                ReportCmd::Criterion {
                    name,
                    raw,
                    command,
                    out,
                },
        } => report::criterion(&name, &raw, &command, &out),
        Cmd::Report {
            what:
                ReportCmd::Bars {
                    name,
                    out,
                    command,
                    notes,
                    category,
                    series,
                    value,
                    title,
                    unit,
                },
        } => report::bars(
            &name,
            &out,
            &command,
            notes.as_deref(),
            (&category, &series, &value),
            (&title, &unit),
        ),
        Cmd::Bench {
            what:
                BenchCmd::TcpInstructions {
                    round_trips,
                    bytes,
                    out,
                },
        } => tcp_instructions::run(round_trips, bytes, &out),
        Cmd::Bench {
            what:
                BenchCmd::Multiproc {
                    seconds,
                    runs,
                    daemon_idle_spin_us,
                    out,
                },
        } => multiproc::bench(seconds, runs, daemon_idle_spin_us, &out),
        Cmd::Bench {
            what:
                BenchCmd::LrpShare {
                    seconds,
                    runs,
                    points,
                    out,
                },
        } => {
            let pts = points
                .iter()
                .map(|p| {
                    let (r, w) = p.split_once(':').unwrap_or((p, "0"));
                    Ok((r.parse()?, w.parse()?))
                })
                .collect::<anyhow::Result<Vec<(u64, u32)>>>()?;
            lrp::share::bench(seconds, runs, &pts, &out)
        }
        Cmd::Bench {
            what:
                BenchCmd::Async {
                    seconds,
                    runs,
                    conns,
                    size,
                    echo_rounds,
                    echo_seconds,
                    out,
                },
        } => async_bench::bench(seconds, runs, conns, size, echo_rounds, echo_seconds, &out),
        Cmd::Bench {
            what:
                BenchCmd::UdpEcho {
                    seconds,
                    runs,
                    window,
                    size,
                    out,
                },
        } => udp_echo::bench(seconds, runs, window, size, &out),
        Cmd::Bench {
            what:
                BenchCmd::Wakeup {
                    samples,
                    rounds,
                    gap_us,
                    out,
                },
        } => wakeup::bench(samples, rounds, gap_us, &out),
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
                    evict,
                    out,
                },
        } => tcp::bench_bulk(
            &tcp::BulkOpts {
                seconds,
                runs,
                which: stack,
                wire,
                setup: tcp::Setup {
                    send_buf: send_buf.max(4) * 1024,
                    recv_buf: recv_buf.max(4) * 1024,
                    nodelay,
                    fast_path: true,
                    eager_receiver,
                    evict: match evict {
                        Eviction::Off => lazynet::stack::EvictMode::Off,
                        Eviction::Adaptive => lazynet::stack::EvictMode::Adaptive,
                        Eviction::Always => lazynet::stack::EvictMode::Always,
                    },
                    fifo,
                },
            },
            &out,
        ),
        Cmd::Bench {
            what:
                BenchCmd::TcpRr {
                    seconds,
                    runs,
                    stack,
                    fifo,
                    out,
                },
        } => tcp::bench_rr(seconds, runs, stack, fifo, &out),
        Cmd::Bench {
            what:
                BenchCmd::TcpBulkSingle {
                    bytes,
                    stack,
                    runs,
                    fast_path,
                },
        } => tcp::bench_bulk_single(bytes, stack, runs, fast_path == OnOff::On),
        Cmd::Bench {
            what:
                BenchCmd::TcpRrSingle {
                    count,
                    stack,
                    runs,
                    fast_path,
                },
        } => tcp::bench_rr_single(count, stack, runs, fast_path == OnOff::On),
    }
}
