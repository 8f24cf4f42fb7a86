//! Network-namespace tooling for tests and experiments: a peer namespace
//! whose kernel stack sits on the far side of a TAP device or of a veth
//! pair.
//!
//! **Link kinds** ([`Link`]): with TAP, lazynet holds the device's file
//! descriptor and the device itself lives in the namespace. With veth, one
//! end (named like the device) is in the namespace and the other, of the
//! same name, stays in ours; lazynet's AF_XDP socket ([`super::xdp`]) binds
//! to that end. The namespace's end has transmit checksum offload turned
//! off: over veth a frame keeps the kernel's partial checksum, which an
//! AF_XDP reader has no metadata to complete (and with it goes segmentation
//! offload, which an XDP program on the other end turns off anyway).
//!
//! **Owns:** the namespaces, TAP devices and veth pairs it creates, named by the caller's
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
use super::xdp::{XdpConfig, XdpNic};

/// What joins lazynet to the peer namespace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Link {
    /// A TAP device in the namespace; lazynet holds its file descriptor.
    #[default]
    Tap,
    /// A veth pair: one end in the namespace, the other here for AF_XDP.
    Veth,
}

impl Link {
    /// `tap` or `veth`.
    pub fn name(self) -> &'static str {
        match self {
            Link::Tap => "tap",
            Link::Veth => "veth",
        }
    }
}

/// Where the peer namespace lives and how its kernel side is addressed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerNsConfig {
    /// Namespace name (under `/var/run/netns`).
    pub ns: String,
    /// TAP device name (at most 15 bytes).
    pub dev: String,
    /// Kernel side's address with prefix length, e.g. `10.201.0.1/24`.
    pub peer_addr: String,
    /// TAP device or veth pair.
    pub link: Link,
}

impl Default for PeerNsConfig {
    fn default() -> Self {
        PeerNsConfig {
            ns: "lazynet-peer".into(),
            dev: "lntap0".into(),
            peer_addr: "10.201.0.1/24".into(),
            link: Link::Tap,
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
            link: Link::Tap,
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

    /// True if the namespace exists and holds the device (and, for veth,
    /// its other end is here).
    pub fn exists(&self) -> bool {
        dev_exists_in(&self.cfg.ns, &self.cfg.dev)
            && (self.cfg.link == Link::Tap || ip(&["link", "show", "dev", &self.cfg.dev]).is_ok())
    }

    /// Creates the namespace (if absent) and a *persistent* TAP device in
    /// it (or a veth pair with one end in it), addressed and up, with `lo`
    /// up. Undoes its own steps on failure.
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
            if c.link == Link::Veth {
                return self.make_veth();
            }
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

    /// A veth pair named `dev` at both ends, one end in the namespace
    /// (configured as for TAP, checksum offload off), ours up with no
    /// address and IPv6 off (nothing of the kernel's own on it).
    fn make_veth(&self) -> io::Result<()> {
        let c = &self.cfg;
        self.refuse_existing_dev()?;
        ip(&[
            "link", "add", "dev", &c.dev, "type", "veth", "peer", "name", &c.dev, "netns", &c.ns,
        ])?;
        let _ = std::fs::write(
            format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", c.dev),
            "1",
        );
        ip(&["link", "set", "dev", &c.dev, "up"])?;
        set_tx_checksum_in(&c.ns, &c.dev, false)?;
        self.configure_inside()
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

    /// Deletes the device (for veth, both ends) and the namespace.
    /// Idempotent: absent things are not an error.
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
        self.refuse_existing_dev()?;
        let guard = self.ns_guard()?;
        // On any error below, `guard` drops and removes what we made; the
        // device itself vanishes when `nic` (its only fd) drops.
        let nic = TapNic::create(&tcfg)?;
        ip(&["link", "set", "dev", nic.name(), "netns", &c.ns])?;
        self.configure_inside()?;
        Ok((nic, Ownership::Created(guard)))
    }
}

impl PeerNs {
    /// An error if a device of the configured name exists in our
    /// namespace: creating ours would attach to it (TAP) or fail half-way
    /// (veth), and cleanup would then delete a device that is not ours.
    fn refuse_existing_dev(&self) -> io::Result<()> {
        let dev = &self.cfg.dev;
        if ip(&["link", "show", "dev", dev]).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("a device named {dev} already exists in this namespace"),
            ));
        }
        Ok(())
    }

    /// Creates the namespace if absent; the guard removes the device and
    /// (if it was created here) the namespace.
    fn ns_guard(&self) -> io::Result<NsGuard> {
        let c = &self.cfg;
        let created_ns = !netns_exists(&c.ns);
        if created_ns {
            ip(&["netns", "add", &c.ns])?;
        }
        Ok(NsGuard {
            ns: c.ns.clone(),
            dev: c.dev.clone(),
            created_ns,
            done: false,
        })
    }

    /// The AF_XDP counterpart of [`PeerNs::attach_or_create`]: if the
    /// namespace and its veth pair exist, binds to our end ([`Ownership::Attached`]);
    /// otherwise creates them and returns a guard that removes them.
    /// `xdp.ifname` is overridden by the configured device name.
    pub fn attach_or_create_xdp(&self, xdp: &XdpConfig) -> io::Result<(XdpNic, Ownership)> {
        let c = &self.cfg;
        let mut xcfg = xdp.clone();
        xcfg.ifname = c.dev.clone();
        if c.link != Link::Veth {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "AF_XDP needs a veth link to the peer namespace",
            ));
        }
        if self.exists() {
            let nic = XdpNic::open(&xcfg)?;
            self.wait_oper_up(std::time::Duration::from_secs(2));
            return Ok((nic, Ownership::Attached));
        }
        let guard = self.ns_guard()?;
        // On any error below, `guard` drops and removes what we made.
        self.make_veth()?;
        let nic = XdpNic::open(&xcfg)?;
        self.wait_oper_up(std::time::Duration::from_secs(2));
        Ok((nic, Ownership::Created(guard)))
    }
}

/// Runs `f` on a short-lived helper thread inside network namespace `ns`
/// (a name under `/var/run/netns`); the calling thread's namespace never
/// changes.
pub fn run_in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    use std::os::fd::AsRawFd;
    if ns.is_empty() || ns.contains('/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad namespace name {ns:?}"),
        ));
    }
    let path = format!("/var/run/netns/{ns}");
    let handle = std::thread::Builder::new()
        .name("lazynet-setns".into())
        .spawn(move || -> io::Result<T> {
            let nsfile = std::fs::File::open(&path)
                .map_err(|e| io::Error::new(e.kind(), format!("open {path}: {e}")))?;
            // SAFETY: plain syscall on a valid fd; it changes only this
            // (helper) thread's network namespace, and the thread ends
            // after `f`.
            let rc = unsafe { libc::setns(nsfile.as_raw_fd(), libc::CLONE_NEWNET) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                return Err(io::Error::new(e.kind(), format!("setns {path}: {e}")));
            }
            f()
        })?;
    handle
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("setns helper thread panicked")))
}

/// Turns transmit checksum offload of device `dev` in namespace `ns` on or
/// off (`ETHTOOL_STXCSUM`, what `ethtool -K dev tx off` does).
pub fn set_tx_checksum_in(ns: &str, dev: &str, on: bool) -> io::Result<()> {
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    const ETHTOOL_STXCSUM: u32 = 0x17;
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    #[repr(C)]
    struct IfReqData {
        name: [u8; 16],
        data: *mut EthtoolValue,
        _pad: [u8; 16],
    }
    let name = super::tap::name_bytes(dev)?;
    let dev = dev.to_owned();
    run_in_netns(ns, move || {
        use std::os::fd::AsRawFd;
        let sock = rustix::net::socket(
            rustix::net::AddressFamily::INET,
            rustix::net::SocketType::DGRAM,
            None,
        )?;
        let mut val = EthtoolValue {
            cmd: ETHTOOL_STXCSUM,
            data: u32::from(on),
        };
        let mut req = IfReqData {
            name,
            data: &mut val,
            _pad: [0; 16],
        };
        // SAFETY: SIOCETHTOOL reads a `struct ifreq` whose data pointer
        // names a live `struct ethtool_value` (8 bytes) it reads and may
        // write; both live across the call.
        let rc = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut req) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("ethtool tx checksum on {dev}: {e}"),
            ));
        }
        Ok(())
    })
}

/// Names of all network namespaces (`ip netns list`, first column).
pub fn list_netns() -> io::Result<Vec<String>> {
    Ok(ip(&["netns", "list"])?
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect())
}
