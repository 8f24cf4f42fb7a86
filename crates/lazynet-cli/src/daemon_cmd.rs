//! `lazynet daemon`: the multi-process placement's front end.

use std::path::Path;

use lazynet::daemon::{Daemon, DaemonConfig};
use lazynet::nic::netns::Ownership;
use lazynet::stack::StackConfig;

use crate::args::{parse_cidr, NetArgs};

/// Opens the NIC `net` names and serves it as a daemon at `socket` until
/// SIGINT or SIGTERM; prints the counters at exit.
pub fn run(
    socket: &Path,
    socket_mode: u32,
    max_apps: usize,
    idle_spin_us: u64,
    net: &NetArgs,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        net.daemon.is_none(),
        "a daemon does not attach to another daemon"
    );
    let (addr, prefix_len) = parse_cidr(&net.addr)?;
    let stop = crate::util::stop_flag()?;
    let (nic, owned_ns) = crate::serve::open_nic(net)?;
    let cfg = DaemonConfig {
        socket: socket.to_path_buf(),
        socket_mode,
        max_apps,
        idle_spin_ns: idle_spin_us.saturating_mul(1000),
        stack: StackConfig {
            addr,
            prefix_len,
            seed: crate::serve::seed_from_os(),
            ..StackConfig::default()
        },
        ..DaemonConfig::default()
    };
    let mut d = Daemon::new(nic, cfg)?;
    let waker = d.spawn_waker(stop.clone())?;
    eprintln!(
        "lazynet daemon on {addr}/{prefix_len}, control socket {} (mode {socket_mode:o}), up to {max_apps} applications",
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
