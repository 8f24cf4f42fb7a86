//! Network-namespace tooling for TAP tests and experiments: a peer namespace
//! whose kernel stack sits on the far side of a TAP device.
//!
//! **Owns:** the namespaces and TAP devices it creates, named by the caller's
//! configuration; it runs `ip` (iproute2) through [`std::process::Command`]
//! and reports the failing command with its stderr.
//!
//! **May not touch:** anything it did not create. Cleanup (both
//! [`PeerNs::down`] and [`NsGuard`]'s `Drop`) deletes exactly the configured
//! device and namespace by name, nothing else; the caller's thread never
//! changes namespace (see [`super::tap::open_tap_fd_in_netns`]).
//!
//! **Why `ip` and not netlink by hand:** this is set-up code, never on the
//! data path; iproute2 is installed everywhere we run (CI too), its error
//! messages are clear, and a netlink client would be hundreds of lines.
//!
//! Interface names are limited to 15 bytes; [`PeerNsConfig::unique`] builds
//! short names from the process id and a counter so parallel tests do not
//! collide.

use std::io;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use super::tap::{TapConfig, TapNic};

/// Where the peer namespace lives and how its kernel side is addressed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerNsConfig {
    /// Namespace name (under `/var/run/netns`).
    pub ns: String,
    /// TAP device name (at most 15 bytes).
    pub dev: String,
    /// Kernel side's address with prefix length, e.g. `10.201.0.1/24`.
    pub peer_addr: String,
}

impl Default for PeerNsConfig {
    fn default() -> Self {
        PeerNsConfig {
            ns: "lazynet-peer".into(),
            dev: "lntap0".into(),
            peer_addr: "10.201.0.1/24".into(),
        }
    }
}

static UNIQUE: AtomicU32 = AtomicU32::new(0);

impl PeerNsConfig {
    /// Names unique to this process and call: namespace and device
    /// `lnt<pid>-<n>` (at most 15 bytes), address `10.201.<subnet>.1/24`.
    pub fn unique(subnet: u8) -> Self {
        let pid = std::process::id() % 10_000_000;
        let n = UNIQUE.fetch_add(1, Ordering::Relaxed) % 1000;
        let name = format!("lnt{pid}-{n}");
        PeerNsConfig {
            ns: name.clone(),
            dev: name,
            peer_addr: format!("10.201.{subnet}.1/24"),
        }
    }
}

/// Runs `ip ARGS`; an error names the command and carries its stderr.
pub fn ip(args: &[&str]) -> io::Result<String> {
    let out = Command::new("ip").args(args).output().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot run `ip` (is iproute2 installed?): {e}"),
        )
    })?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "`ip {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// True if network namespace `ns` exists (by name).
pub fn netns_exists(ns: &str) -> bool {
    !ns.is_empty() && !ns.contains('/') && Path::new("/var/run/netns").join(ns).exists()
}

/// True if device `dev` exists inside namespace `ns`.
pub fn dev_exists_in(ns: &str, dev: &str) -> bool {
    netns_exists(ns) && ip(&["-n", ns, "link", "show", "dev", dev]).is_ok()
}

/// Who owns the device and namespace behind a [`TapNic`] from
/// [`PeerNs::attach_or_create`].
#[derive(Debug)]
pub enum Ownership {
    /// We attached to an existing device; it stays when we exit.
    Attached,
    /// We created them; the guard removes what it created when dropped.
    Created(NsGuard),
}

/// Removes, on drop, the device and (if it created it) the namespace it was
/// made for — by name, nothing else. Errors are ignored in `Drop`; call
/// [`NsGuard::cleanup`] to see them.
#[derive(Debug)]
pub struct NsGuard {
    ns: String,
    dev: String,
    created_ns: bool,
    done: bool,
}

impl NsGuard {
    /// Cleans up now, reporting the first error.
    pub fn cleanup(mut self) -> io::Result<()> {
        self.run()
    }

    fn run(&mut self) -> io::Result<()> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let mut first = Ok(());
        if dev_exists_in(&self.ns, &self.dev) {
            if let Err(e) = ip(&["-n", &self.ns, "link", "del", "dev", &self.dev]) {
                first = Err(e);
            }
        }
        if self.created_ns && netns_exists(&self.ns) {
            if let Err(e) = ip(&["netns", "del", &self.ns]) {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }
}

impl Drop for NsGuard {
    fn drop(&mut self) {
        let _ = self.run();
    }
}

/// A peer network namespace with a TAP device whose kernel side is
/// configured with `peer_addr`.
#[derive(Clone, Debug, Default)]
pub struct PeerNs {
    cfg: PeerNsConfig,
}

impl PeerNs {
    /// A handle; nothing is created yet.
    pub fn new(cfg: PeerNsConfig) -> Self {
        PeerNs { cfg }
    }

    /// The configuration.
    pub fn config(&self) -> &PeerNsConfig {
        &self.cfg
    }

    /// True if the namespace exists and holds the device.
    pub fn exists(&self) -> bool {
        dev_exists_in(&self.cfg.ns, &self.cfg.dev)
    }

    /// Creates the namespace (if absent) and a *persistent* TAP device in
    /// it, addressed and up, with `lo` up. Undoes its own steps on failure.
    pub fn up(&self) -> io::Result<()> {
        let c = &self.cfg;
        if self.exists() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("device {} already exists in namespace {}", c.dev, c.ns),
            ));
        }
        let created_ns = !netns_exists(&c.ns);
        if created_ns {
            ip(&["netns", "add", &c.ns])?;
        }
        let mut guard = NsGuard {
            ns: c.ns.clone(),
            dev: c.dev.clone(),
            created_ns,
            done: false,
        };
        let r = (|| {
            ip(&["tuntap", "add", "dev", &c.dev, "mode", "tap"])?;
            if let Err(e) = ip(&["link", "set", "dev", &c.dev, "netns", &c.ns]) {
                let _ = ip(&["link", "del", "dev", &c.dev]);
                return Err(e);
            }
            self.configure_inside()
        })();
        match r {
            Ok(()) => {
                guard.done = true; // keep everything
                Ok(())
            }
            Err(e) => {
                let _ = guard.run();
                Err(e)
            }
        }
    }

    fn configure_inside(&self) -> io::Result<()> {
        let c = &self.cfg;
        ip(&["-n", &c.ns, "addr", "add", &c.peer_addr, "dev", &c.dev])?;
        ip(&["-n", &c.ns, "link", "set", "dev", &c.dev, "up"])?;
        ip(&["-n", &c.ns, "link", "set", "dev", "lo", "up"])?;
        Ok(())
    }

    /// Waits (bounded) until the kernel reports the device's operational
    /// state as UP; returns whether it did. Even then, transmissions of the
    /// kernel side may lag a few milliseconds: protocols retry anyway.
    pub fn wait_oper_up(&self, timeout: std::time::Duration) -> bool {
        let c = &self.cfg;
        let end = std::time::Instant::now() + timeout;
        loop {
            if let Ok(s) = ip(&["-n", &c.ns, "-o", "link", "show", "dev", &c.dev]) {
                if s.contains("state UP") {
                    return true;
                }
            }
            if std::time::Instant::now() >= end {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Deletes the device and the namespace. Idempotent: absent things are
    /// not an error.
    pub fn down(&self) -> io::Result<()> {
        NsGuard {
            ns: self.cfg.ns.clone(),
            dev: self.cfg.dev.clone(),
            created_ns: true,
            done: false,
        }
        .cleanup()
    }

    /// If the namespace and device exist, attaches to the device inside it
    /// ([`Ownership::Attached`]: it stays on exit). Otherwise creates a
    /// non-persistent TAP device here, moves it into the namespace (created
    /// if absent), configures it, and returns a guard that removes what was
    /// created. `tap.name` is overridden by the configured device name.
    ///
    /// Drop the [`TapNic`] before (or together with) the guard.
    pub fn attach_or_create(&self, tap: &TapConfig) -> io::Result<(TapNic, Ownership)> {
        let c = &self.cfg;
        let mut tcfg = tap.clone();
        tcfg.name = c.dev.clone();
        if self.exists() {
            let nic = TapNic::attach_in_netns(&c.ns, &tcfg)?;
            // Attaching turns the carrier on; the kernel activates the
            // device's queue (and starts transmitting) only when its link
            // watcher runs, up to ~1 s later. Wait for that, bounded.
            self.wait_oper_up(std::time::Duration::from_secs(2));
            return Ok((nic, Ownership::Attached));
        }
        // TUNSETIFF would silently attach to a same-named device here (for
        // example a stale persistent one) and we would then move and later
        // delete it: refuse instead.
        if ip(&["link", "show", "dev", &c.dev]).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("a device named {} already exists in this namespace", c.dev),
            ));
        }
        let created_ns = !netns_exists(&c.ns);
        if created_ns {
            ip(&["netns", "add", &c.ns])?;
        }
        let guard = NsGuard {
            ns: c.ns.clone(),
            dev: c.dev.clone(),
            created_ns,
            done: false,
        };
        // On any error below, `guard` drops and removes what we made; the
        // device itself vanishes when `nic` (its only fd) drops.
        let nic = TapNic::create(&tcfg)?;
        ip(&["link", "set", "dev", nic.name(), "netns", &c.ns])?;
        self.configure_inside()?;
        Ok((nic, Ownership::Created(guard)))
    }
}

/// Names of all network namespaces (`ip netns list`, first column).
pub fn list_netns() -> io::Result<Vec<String>> {
    Ok(ip(&["netns", "list"])?
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect())
}
