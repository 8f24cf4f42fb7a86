//! `lazynet daemon`: the multi-process and offload placements' front end.

use std::path::PathBuf;

use lazynet::daemon::{Daemon, DaemonConfig, Placement};
use lazynet::nic::netns::Ownership;

use crate::args::NetArgs;

/// `--placement`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PlacementArg {
    /// Applications run their own TCP/IP; the daemon demultiplexes.
    MultiProcess,
    /// The daemon also runs TCP for MemNet clients, on its core.
    Offload,
}

/// What `lazynet daemon` was asked for.
#[derive(Debug, clap::Args)]
pub struct DaemonArgs {
    /// The control socket's path.
    #[arg(long, default_value = "/run/lazynet.sock")]
    pub socket: PathBuf,
    /// The control socket's file mode, octal (who may attach).
    #[arg(long, default_value = "660", value_parser = parse_octal)]
    pub socket_mode: u32,
    /// Applications attached at once, at most.
    #[arg(long, default_value_t = 16)]
    pub max_apps: usize,
    /// Microseconds the daemon keeps polling with nothing to do before
    /// it sleeps (long with a core of its own, short on a shared one).
    /// Default: 5 (multi-process), 1000 (offload).
    #[arg(long)]
    pub idle_spin_us: Option<u64>,
    /// While polling idle, yield the core to other threads instead of
    /// spinning (a polling daemon on a shared core).
    #[arg(long)]
    pub idle_yield: bool,
    /// Where protocol processing runs: in each application
    /// (multi-process), or also in the daemon for MemNet clients
    /// (offload).
    #[arg(long, value_enum, default_value_t = PlacementArg::MultiProcess)]
    pub placement: PlacementArg,
    /// Pin the daemon to this CPU (the offload placement's dedicated core).
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Orphans (connections a MemNet client closed that still close in
    /// the daemon) one client may leave at most; one more resets its
    /// oldest. All clients together stay within `--max-orphans`.
    #[arg(long, default_value_t = 1024)]
    pub max_orphans_per_client: usize,
    #[command(flatten)]
    pub net: NetArgs,
}

fn parse_octal(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s.trim_start_matches("0o"), 8).map_err(|e| format!("{s}: {e}"))
}

/// Opens the NIC `a.net` names and serves it as a daemon at `a.socket`
/// until SIGINT or SIGTERM; prints the counters at exit.
pub fn run(a: &DaemonArgs) -> anyhow::Result<()> {
    let net = &a.net;
    anyhow::ensure!(
        net.daemon.is_none(),
        "a daemon does not attach to another daemon"
    );
    let mut stack = net.stack_config()?;
    stack.max_orphans_per_tag = a.max_orphans_per_client;
    let (addr, prefix_len) = (stack.addr, stack.prefix_len);
    let stop = crate::util::stop_flag()?;
    if let Some(c) = a.cpu {
        anyhow::ensure!(lazynet::sys::pin_thread(c), "cannot pin to CPU {c}");
    }
    let (nic, owned_ns) = crate::serve::open_nic(net)?;
    let (placement, spin) = match a.placement {
        PlacementArg::MultiProcess => (Placement::MultiProcess, 5),
        PlacementArg::Offload => (Placement::Offload, 1000),
    };
    let (socket, socket_mode, max_apps) = (&a.socket, a.socket_mode, a.max_apps);
    let cfg = DaemonConfig {
        socket: socket.clone(),
        socket_mode,
        max_apps,
        idle_spin_ns: a.idle_spin_us.unwrap_or(spin).saturating_mul(1000),
        idle_yield: a.idle_yield,
        placement,
        stack,
        ..DaemonConfig::default()
    };
    let mut d = Daemon::new(nic, cfg)?;
    let waker = d.spawn_waker(stop.clone())?;
    eprintln!(
        "lazynet daemon ({placement:?}) on {addr}/{prefix_len}, control socket {} (mode {socket_mode:o}), up to {max_apps} applications",
        socket.display()
    );
    println!("ready");
    std::io::Write::flush(&mut std::io::stdout())?;
    d.run(&stop);
    let _ = waker.join();
    print!("{}", d.stats_text());
    println!("counters:\n{}", d.stack().stats());
    drop(d);
    if let Some(Ownership::Created(g)) = owned_ns {
        g.cleanup()?;
    }
    Ok(())
}
