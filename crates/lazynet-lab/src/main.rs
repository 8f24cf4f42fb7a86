//! `lazynet-lab`: lazynet's laboratory. The experiments that reproduce the
//! papers' figures, the benchmarks that compare lazynet with Linux and
//! smoltcp side by side, and the load generators they use. The experiments
//! and benchmarks write `results/NAME/NAME.{csv,txt,png}` (or into
//! `--out`), as `report` does for a benchmark a script runs; the
//! single-thread runs that profiles and instruction counts use
//! (`bench tcp-*-single`) and `loadgen` only print.
//!
//! Laid out by what it holds:
//!
//! - [`papers`]: each paper's experiments in one place (LRP, RTU, NLF,
//!   MemNet, the latency paper's build variants);
//! - [`baseline`]: the Linux and smoltcp counterparts;
//! - [`bench`](mod@bench): the benchmarks of `bench` and `web`;
//! - [`loadgen`]: the load generators;
//! - [`infra`]: what they all share — the core of each role
//!   ([`infra::cpus`]), options, result files and judging, reports, plots,
//!   child processes, system calls;
//! - [`cli`]: the command line and which module runs each command.
//!
//! **Owns:** everything that measures; nothing a user of lazynet runs in
//! production. The servers measured are the `lazynet` program's own
//! (`lazynet_cli`), driven through the library's public API.
//!
//! Unsafe code (Linux sockets for the baselines: `sendmmsg`, `recvmmsg`,
//! `sendfile`, TAP and namespace set-up) is confined by the compiler to
//! [`infra::sys`].
#![deny(unsafe_code)]

mod baseline;
mod bench;
mod cli;
mod infra;
mod loadgen;
mod papers;

fn main() -> anyhow::Result<()> {
    cli::run()
}
