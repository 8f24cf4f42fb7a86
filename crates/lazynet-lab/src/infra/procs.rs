//! Programs an experiment starts: `lazynet` or this lab, pinned with
//! `taskset`, optionally inside a network namespace; read until their
//! `ready` line; stopped (SIGTERM, then kill) and reaped on drop. The CPU
//! time a process has used, and private network namespaces. Callers give
//! the core from [`super::cpus`].
//!
//! **Owns:** the processes and namespaces it starts, by handle (stopped,
//! reaped, removed on drop). **May not touch:** processes or namespaces it
//! did not start.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

/// A child process stopped (SIGTERM, then kill) and reaped on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        lazynet::sys::signal(self.0.id(), libc::SIGTERM);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(2) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The binary `name` built beside this one (`lazynet`, `lazynet-lab`).
pub fn exe(name: &str) -> anyhow::Result<PathBuf> {
    let p = std::env::current_exe()?.with_file_name(name);
    anyhow::ensure!(
        p.exists(),
        "{} not found: build it with `cargo build --release -p lazynet-cli -p lazynet-lab`",
        p.display()
    );
    Ok(p)
}

/// Starts `bin ARGS` on `cpu` (inside namespace `ns` if given, with `ip
/// netns exec`, which execs: the pid is the program's) and returns it with
/// the lines it printed before `ready`; the rest of its output is drained.
pub fn start_in(
    ns: Option<&str>,
    cpu: usize,
    bin: &Path,
    args: &[&str],
) -> anyhow::Result<(Proc, Vec<String>)> {
    let (p, lines, mut out) = spawn_ready(ns, cpu, bin, args)?;
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut out, &mut std::io::sink());
    });
    Ok((p, lines))
}

/// [`start`], keeping what the program prints after `ready` (its exit
/// report): the handle's thread returns it once the program has exited.
pub fn start_keep(
    cpu: usize,
    bin: &Path,
    args: &[&str],
) -> anyhow::Result<(Proc, std::thread::JoinHandle<String>)> {
    let (p, _, mut out) = spawn_ready(None, cpu, bin, args)?;
    let rest = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    Ok((p, rest))
}

/// Spawns `bin ARGS` pinned to `cpu` (in `ns` if given) and reads its
/// output up to the `ready` line: the process, the lines before `ready`
/// and the rest of its output, unread.
fn spawn_ready(
    ns: Option<&str>,
    cpu: usize,
    bin: &Path,
    args: &[&str],
) -> anyhow::Result<(Proc, Vec<String>, BufReader<std::process::ChildStdout>)> {
    let mut cmd = match ns {
        Some(n) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", n, "taskset"]);
            c
        }
        None => Command::new("taskset"),
    };
    let mut c = cmd
        .arg("-c")
        .arg(cpu.to_string())
        .arg(bin)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("taskset")?;
    let mut out = BufReader::new(c.stdout.take().context("stdout")?);
    let p = Proc(c);
    let mut lines = Vec::new();
    loop {
        let mut l = String::new();
        anyhow::ensure!(
            out.read_line(&mut l)? > 0,
            "{} {args:?} exited: {lines:?}",
            bin.display()
        );
        if l.trim() == "ready" {
            break;
        }
        lines.push(l.trim().to_string());
    }
    Ok((p, lines, out))
}

/// [`start_in`] outside any namespace.
pub fn start(cpu: usize, bin: &Path, args: &[&str]) -> anyhow::Result<(Proc, Vec<String>)> {
    start_in(None, cpu, bin, args)
}

/// Nanoseconds process `pid` has run, all its threads
/// (`/proc/PID/task/*/schedstat`).
pub fn cpu_ns(pid: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    dir.flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// A network namespace of our own with `lo` up and its receive work put
/// on the CPUs of `rps_mask` (RPS), removed on drop.
pub struct Ns(pub String);

impl Ns {
    /// Creates `PREFIX<pid>`.
    pub fn new(prefix: &str, rps_mask: u32) -> anyhow::Result<Ns> {
        let n = format!("{prefix}{}", std::process::id());
        let ok = Command::new("ip")
            .args(["netns", "add", &n])
            .status()?
            .success();
        anyhow::ensure!(ok, "ip netns add {n}");
        let ns = Ns(n);
        let sh = format!(
            "ip link set lo up && echo {rps_mask:x} > /sys/class/net/lo/queues/rx-0/rps_cpus"
        );
        let ok = Command::new("ip")
            .args(["netns", "exec", &ns.0, "sh", "-c", &sh])
            .status()?
            .success();
        anyhow::ensure!(ok, "lo and RPS in {}", ns.0);
        Ok(ns)
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// The in-memory wire's other end (side B), from the `wire /proc/PID/fd/N`
/// line a `lazynet` program on `--nic wire` prints before `ready`.
pub fn attach_wire(lines: &[String]) -> anyhow::Result<lazynet::nic::wirepair::WireEnd> {
    use lazynet::nic::wirepair::{Side, WireEnd};
    let p = lines
        .iter()
        .find_map(|l| l.strip_prefix("wire "))
        .context("no wire line")?;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(p)?;
    Ok(WireEnd::attach(std::os::fd::OwnedFd::from(f), Side::B)?)
}
