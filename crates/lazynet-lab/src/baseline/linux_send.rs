//! What Linux's UDP send path costs per datagram — the baseline that the
//! `nlf` experiment puts beside lazynet's network-level framing (NLF paper,
//! Table 1: cycles per packet whatever its size).
//!
//! [`measure`] sends `datagrams` UDP datagrams of `payload` bytes with one of
//! the [`LinuxMethod`]s from a dedicated thread and reads that thread's CPU
//! time (`CLOCK_THREAD_CPUTIME_ID`) and the wall clock around the send loop.
//! The bytes are what a media server would send: consecutive `payload`-sized
//! slices of a media file (by default a synthetic MPEG-TS-like file of
//! [`DEFAULT_MEDIA_BYTES`] written to an unlinked temporary file), wrapping
//! around at its end.
//!
//! # Destination: a TAP device nobody reads, in a private network namespace
//!
//! We want the cost of the *send* path only, so the datagrams must go to a
//! place whose receive work is not charged to the sending thread:
//!
//! - (a) 127.0.0.1, no socket bound: the loopback "receive" (IP, UDP lookup,
//!   ICMP port-unreachable generation, rate limited) runs in softirq on the
//!   sender's CPU and in its syscall — not wanted.
//! - (b) a loopback UDP socket that is never read: the receive path up to the
//!   full socket queue (IP + UDP + socket lookup, then a drop) still runs on
//!   the sender's CPU, inside the `send` call, and is charged to the send
//!   (docs/PERFORMANCE.md). Used only as the fallback
//!   ([`LinuxDest::LoopbackUnread`]) when we cannot create a namespace.
//! - (d) a `dummy` device: would be ideal, but this kernel has no `dummy`
//!   driver ("Unknown device type") and modules cannot be loaded.
//! - (c) **chosen**: a TAP device created in a network namespace of our own.
//!   Nobody reads the TAP file descriptor, so the driver puts each frame on
//!   its ring and, once the ring is full, frees it (`tx_dropped`): no
//!   receive protocol work at all. The ring is set to one frame
//!   (`txqueuelen` 1), so after warm-up every frame is freed at once, in
//!   the sender's call — as a NIC's TX completion would free it, on the
//!   same CPU — and `tx_dropped` counts every frame that reached the driver
//!   ([`LinuxSendResult::device_frames`]). The packet goes through everything a real
//!   NIC's send path does — socket, UDP, IP, routing, neighbour (the device
//!   is `NOARP`, so no ARP exchange is needed), qdisc, `dev_queue_xmit`, and
//!   software GSO segmentation and checksums when the device does not offer
//!   them. MTU 9000 so that 8 KiB payloads (8220-byte IP packets) fit in one
//!   frame, as `UDP_SEGMENT` requires.
//!
//! The namespace is made with `unshare(CLONE_NEWNET)` in the measuring
//! thread only (network namespaces are per thread), so no name is shared
//! with anything else on the machine and nothing needs removing: when the
//! thread ends and the TAP descriptor closes, the kernel destroys the
//! device and the namespace. Needs root (`CAP_SYS_ADMIN`, `CAP_NET_ADMIN`).
//!
//! With [`LinuxSendConfig::offload`] the TAP device advertises checksum and
//! UDP segmentation offload (`TUNSETOFFLOAD` `TUN_F_CSUM | TUN_F_USO4 | TUN_F_USO6`; the kernel takes
//! USO only for both families), as
//! a NIC with USO would: the kernel then hands the driver one GSO
//! super-packet instead of segmenting and checksumming in software. The
//! default ([`measure`]) is *no* offload: the CPU pays for everything, as
//! lazynet does when it writes frames to a TAP device.
//!
//! The caller is `lazynet-lab nlf` ([`crate::papers::nlf`]).
//!
//! **Owns:** the measuring thread, its private namespace and TAP device,
//! and the temporary media file (all gone when a measurement returns).
//! **May not touch:** lazynet's stack; any other namespace or device.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};

use crate::infra::sys::{self, IfSetting};

/// How Linux is asked to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinuxMethod {
    /// One `send()` per datagram on a connected socket.
    Send,
    /// `sendmmsg()` with batches of [`MMSG_BATCH`] messages whose iovecs
    /// point into the media bytes (no copy in user space).
    SendMmsg,
    /// `sendfile()` from the media file to a connected UDP socket with
    /// `UDP_SEGMENT` = payload: one call sends up to [`GSO_MAX_SEGMENTS`]
    /// datagrams and at most [`GSO_MAX_BYTES`] bytes.
    SendfileUdpSegment,
}

impl LinuxMethod {
    /// All methods, cheapest-to-write first.
    pub const ALL: [LinuxMethod; 3] = [
        LinuxMethod::Send,
        LinuxMethod::SendMmsg,
        LinuxMethod::SendfileUdpSegment,
    ];

    /// A short name for tables and CSV.
    pub fn name(self) -> &'static str {
        match self {
            LinuxMethod::Send => "send",
            LinuxMethod::SendMmsg => "sendmmsg32",
            LinuxMethod::SendfileUdpSegment => "sendfile+udp_segment",
        }
    }
}

/// Where the datagrams went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinuxDest {
    /// A TAP device nobody reads, in a private network namespace (needs root).
    TapInPrivateNetns,
    /// A loopback UDP socket that is never read (receive work up to the
    /// socket queue is charged to the sender; fallback without root).
    LoopbackUnread,
}

impl LinuxDest {
    /// A short name for tables and CSV.
    pub fn name(self) -> &'static str {
        match self {
            LinuxDest::TapInPrivateNetns => "tap-netns",
            LinuxDest::LoopbackUnread => "loopback-unread",
        }
    }
}

/// Messages per `sendmmsg()` call.
pub const MMSG_BATCH: usize = 32;
/// Kernel limit on segments per UDP GSO super-packet (`UDP_MAX_SEGMENTS`).
pub const GSO_MAX_SEGMENTS: usize = 64;
/// Bytes of UDP payload per `sendfile()` call (an IPv4 datagram is at most
/// 64 KiB including headers).
pub const GSO_MAX_BYTES: usize = 65_000;
/// Size of the synthetic media file.
pub const DEFAULT_MEDIA_BYTES: usize = 4 << 20;
/// MTU of the TAP device: 8 KiB payloads plus 28 bytes of headers fit.
pub const TAP_MTU: i32 = 9000;

const TAP_ADDR: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 1);
const TAP_PEER: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 2);
const DISCARD_PORT: u16 = 9;

/// Everything [`measure_with`] needs.
#[derive(Clone, Debug)]
pub struct LinuxSendConfig {
    /// Send method.
    pub method: LinuxMethod,
    /// UDP payload bytes per datagram (1 ..= 8972).
    pub payload: usize,
    /// Datagrams to send in the measured loop.
    pub datagrams: u64,
    /// Media file to send from; `None` = synthetic TS-like bytes.
    pub media: Option<PathBuf>,
    /// Preferred destination; falls back to loopback if the TAP namespace
    /// cannot be made (the result says which was used).
    pub dest: LinuxDest,
    /// TAP only: advertise checksum + UDP segmentation offload (a NIC with USO).
    pub offload: bool,
}

/// What one measurement found.
#[derive(Clone, Debug)]
pub struct LinuxSendResult {
    /// Method used.
    pub method: LinuxMethod,
    /// Destination actually used.
    pub dest: LinuxDest,
    /// Whether the TAP device offered checksum/USO offload.
    pub offload: bool,
    /// Payload bytes per datagram.
    pub payload: usize,
    /// Datagrams the kernel accepted in the measured loop.
    pub datagrams: u64,
    /// Payload bytes the kernel accepted.
    pub bytes: u64,
    /// System calls made in the measured loop.
    pub calls: u64,
    /// CPU time of the sending thread (user + system) per datagram.
    pub cpu_ns_per_datagram: f64,
    /// Wall time per datagram.
    pub wall_ns_per_datagram: f64,
    /// TAP only: frames that reached the driver during the measured loop
    /// (its `tx_dropped`, from the namespace's `/proc/thread-self/net/dev`;
    /// the TAP counts `tx_packets` only when frames are read);
    /// equals `datagrams` without offload — proof that the datagrams were
    /// not lost before the driver. With offload a GSO super-packet is one frame.
    pub device_frames: Option<u64>,
    /// Failed calls.
    pub errors: u64,
    /// The first failure, if any.
    pub first_error: Option<String>,
    /// Why the preferred destination was not used, if it was not.
    pub note: Option<String>,
}

/// Measures `datagrams` datagrams of `payload` bytes sent with `method` to a
/// TAP device in a private namespace (loopback if that is impossible), no
/// offload, synthetic media.
#[cfg(test)]
pub fn measure(
    method: LinuxMethod,
    payload: usize,
    datagrams: u64,
) -> anyhow::Result<LinuxSendResult> {
    measure_with(&LinuxSendConfig {
        method,
        payload,
        datagrams,
        media: None,
        dest: LinuxDest::TapInPrivateNetns,
        offload: false,
    })
}

/// Measures as described by `cfg`.
pub fn measure_with(cfg: &LinuxSendConfig) -> anyhow::Result<LinuxSendResult> {
    if cfg.payload == 0 || cfg.payload + 28 > TAP_MTU as usize {
        bail!("payload {} out of range 1..={}", cfg.payload, TAP_MTU - 28);
    }
    let media = Media::open(cfg.media.as_deref(), cfg.payload)?;
    if cfg.dest == LinuxDest::TapInPrivateNetns {
        let r = std::thread::scope(|s| {
            s.spawn(|| -> anyhow::Result<LinuxSendResult> {
                let (_tap, sock) = tap_in_private_netns(cfg.offload)?;
                run(cfg, &media, &sock, LinuxDest::TapInPrivateNetns)
            })
            .join()
            .map_err(|_| anyhow::anyhow!("measuring thread panicked"))?
        });
        match r {
            Ok(r) => return Ok(r),
            Err(e) => {
                let mut r = measure_loopback(cfg, &media)?;
                r.note = Some(format!("TAP namespace unavailable: {e:#}"));
                return Ok(r);
            }
        }
    }
    measure_loopback(cfg, &media)
}

fn measure_loopback(cfg: &LinuxSendConfig, media: &Media) -> anyhow::Result<LinuxSendResult> {
    std::thread::scope(|s| {
        s.spawn(|| {
            let (_rx, sock) = loopback_unread()?;
            run(cfg, media, &sock, LinuxDest::LoopbackUnread)
        })
        .join()
        .map_err(|_| anyhow::anyhow!("measuring thread panicked"))?
    })
}

/// The media bytes: in memory (for iovecs) and as an open file (for sendfile).
struct Media {
    bytes: Vec<u8>,
    file: std::fs::File,
}

impl Media {
    fn open(path: Option<&Path>, payload: usize) -> anyhow::Result<Media> {
        let (bytes, file) = match path {
            Some(p) => {
                let mut f = std::fs::File::open(p).with_context(|| format!("open {p:?}"))?;
                let mut b = Vec::new();
                f.read_to_end(&mut b)?;
                (b, f)
            }
            None => {
                let b = synthetic_ts(DEFAULT_MEDIA_BYTES);
                static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let p = std::env::temp_dir().join(format!(
                    "lazynet-linux-send-{}-{seq}.ts",
                    std::process::id()
                ));
                let mut w = std::fs::File::create(&p).with_context(|| format!("create {p:?}"))?;
                w.write_all(&b)?;
                drop(w);
                let f = std::fs::File::open(&p);
                let _ = std::fs::remove_file(&p);
                (b, f?)
            }
        };
        if bytes.len() < payload {
            bail!(
                "media file holds {} bytes, less than one payload",
                bytes.len()
            );
        }
        Ok(Media { bytes, file })
    }
}

/// MPEG-TS-shaped bytes: 188-byte packets with sync byte 0x47, a PID and a
/// continuity counter, pseudo-random payload ([`lazynet_cli::media::noise`]).
fn synthetic_ts(len: usize) -> Vec<u8> {
    let mut b = lazynet_cli::media::noise(len);
    for (i, pkt) in b.chunks_mut(188).enumerate() {
        pkt[0] = 0x47;
        if pkt.len() >= 4 {
            pkt[1] = 0x01; // PID 0x100
            pkt[2] = 0x00;
            pkt[3] = 0x10 | (i as u8 & 0x0f);
        }
    }
    b
}

/// In the calling thread: a new network namespace holding a TAP device
/// (up, NOARP, MTU 9000, 10.201.0.1/24) and a UDP socket connected to
/// 10.201.0.2:9 through it. Returns (TAP fd, socket).
fn tap_in_private_netns(offload: bool) -> anyhow::Result<(OwnedFd, UdpSocket)> {
    sys::unshare_net().context("unshare(CLONE_NEWNET)")?;
    let name = "lnzsend0";
    // Nobody reads it, so a non-blocking descriptor is as good as any.
    let (tap, _) = lazynet::nic::tap::open_tap_fd(name, false).context("open TAP")?;
    if offload {
        let flags = libc::TUN_F_CSUM | libc::TUN_F_USO4 | libc::TUN_F_USO6;
        lazynet::nic::tap::set_offload(tap.as_raw_fd(), flags.into()).context("TUNSETOFFLOAD")?;
    }
    // Interface ioctls take any socket.
    let ctl = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    // A one-frame ring: after warm-up every frame is freed in the driver
    // at once, so each skb's free (a real NIC's TX completion) is charged
    // to the sender, and the drop counter counts every frame.
    for (setting, what) in [
        (IfSetting::Mtu(TAP_MTU), "MTU"),
        (IfSetting::TxQueueLen(1), "transmit queue length"),
        (IfSetting::Addr(TAP_ADDR), "address"),
        (
            IfSetting::Netmask(Ipv4Addr::new(255, 255, 255, 0)),
            "netmask",
        ),
        (IfSetting::Flags(libc::IFF_UP | libc::IFF_NOARP), "flags"),
    ] {
        sys::if_set(ctl.as_fd(), name, setting).with_context(|| format!("{name}: {what}"))?;
    }
    let sock = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    sock.connect(SocketAddrV4::new(TAP_PEER, DISCARD_PORT))
        .context("connect")?;
    Ok((tap, sock))
}

/// A bound loopback UDP socket with a minimal receive buffer that is never
/// read, and a socket connected to it. Returns (receiver, sender).
fn loopback_unread() -> anyhow::Result<(UdpSocket, UdpSocket)> {
    let rx = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).context("bind")?;
    // SO_RCVBUF is clamped to the kernel's minimum.
    sys::set_int_option(rx.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, 1)?;
    let tx = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
    tx.connect(rx.local_addr()?).context("connect")?;
    Ok((rx, tx))
}

/// TAP tx_packets + tx_dropped as this thread's namespace sees them.
fn device_frames(dest: LinuxDest) -> Option<u64> {
    if dest != LinuxDest::TapInPrivateNetns {
        return None;
    }
    let text = std::fs::read_to_string("/proc/thread-self/net/dev").ok()?;
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("lnzsend0:"))?;
    let f: Vec<u64> = line
        .split_once(':')?
        .1
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // rx: bytes packets errs drop fifo frame compressed multicast; tx: bytes packets errs drop ...
    // (tx packets counts frames read from the TAP: none here).
    Some(f.get(9)? + f.get(11)?)
}

/// Counts of one send loop.
#[derive(Default)]
struct Tally {
    datagrams: u64,
    bytes: u64,
    calls: u64,
    errors: u64,
    first_error: Option<String>,
}

impl Tally {
    fn error(&mut self, what: &str, e: std::io::Error) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(format!("{what}: {e}"));
        }
    }
}

fn run(
    cfg: &LinuxSendConfig,
    media: &Media,
    sock: &UdpSocket,
    dest: LinuxDest,
) -> anyhow::Result<LinuxSendResult> {
    if cfg.method == LinuxMethod::SendfileUdpSegment {
        sys::set_int_option(
            sock.as_fd(),
            libc::SOL_UDP,
            libc::UDP_SEGMENT,
            cfg.payload as libc::c_int,
        )
        .context("setsockopt UDP_SEGMENT")?;
    }
    // Warm up caches, the route and the neighbour entry.
    let warm = send_loop(cfg, media, sock, cfg.datagrams.clamp(1, 1024));
    if warm.datagrams == 0 {
        bail!(
            "{} sent nothing: {}",
            cfg.method.name(),
            warm.first_error.unwrap_or_default()
        );
    }
    let dev0 = device_frames(dest);
    let wall0 = Instant::now();
    let cpu0 = lazynet::sys::thread_cpu_ns();
    let t = send_loop(cfg, media, sock, cfg.datagrams);
    let cpu = lazynet::sys::thread_cpu_ns() - cpu0;
    let wall = wall0.elapsed().as_nanos() as f64;
    let device_frames = match (dev0, device_frames(dest)) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let n = t.datagrams.max(1) as f64;
    Ok(LinuxSendResult {
        method: cfg.method,
        dest,
        offload: cfg.offload && dest == LinuxDest::TapInPrivateNetns,
        payload: cfg.payload,
        datagrams: t.datagrams,
        bytes: t.bytes,
        calls: t.calls,
        cpu_ns_per_datagram: cpu as f64 / n,
        wall_ns_per_datagram: wall / n,
        device_frames,
        errors: t.errors,
        first_error: t.first_error,
        note: None,
    })
}

/// Sends `count` datagrams (gives up after `count` failed calls).
fn send_loop(cfg: &LinuxSendConfig, media: &Media, sock: &UdpSocket, count: u64) -> Tally {
    let fd = sock.as_fd();
    let p = cfg.payload;
    let m = &media.bytes;
    let mut off = 0usize;
    let mut t = Tally::default();
    match cfg.method {
        LinuxMethod::Send => {
            while t.datagrams < count && t.errors < count {
                if off + p > m.len() {
                    off = 0;
                }
                t.calls += 1;
                match sock.send(&m[off..off + p]) {
                    Ok(n) => {
                        t.datagrams += 1;
                        t.bytes += n as u64;
                        off += p;
                    }
                    Err(e) => t.error("send", e),
                }
            }
        }
        LinuxMethod::SendMmsg => {
            let mut mm = sys::MmsgSender::new(MMSG_BATCH, None);
            let mut batch: Vec<&[u8]> = Vec::with_capacity(MMSG_BATCH);
            while t.datagrams < count && t.errors < count {
                let n = (count - t.datagrams).min(MMSG_BATCH as u64) as usize;
                let mut o = off;
                batch.clear();
                for _ in 0..n {
                    if o + p > m.len() {
                        o = 0;
                    }
                    batch.push(&m[o..o + p]);
                    o += p;
                }
                t.calls += 1;
                let sent = match mm.send(fd, &batch, 0) {
                    Ok(sent) => sent,
                    Err(e) => {
                        t.error("sendmmsg", e);
                        continue;
                    }
                };
                for i in 0..sent {
                    t.bytes += u64::from(mm.sent_len(i));
                }
                t.datagrams += sent as u64;
                // Next batch starts after the last message the kernel took.
                for _ in 0..sent {
                    if off + p > m.len() {
                        off = 0;
                    }
                    off += p;
                }
            }
        }
        LinuxMethod::SendfileUdpSegment => {
            let per_call = (GSO_MAX_BYTES / p).clamp(1, GSO_MAX_SEGMENTS) as u64;
            let file = media.file.as_fd();
            while t.datagrams < count && t.errors < count {
                if off + p > m.len() {
                    off = 0;
                }
                let fit = ((m.len() - off) / p) as u64;
                let n = per_call.min(fit).min(count - t.datagrams);
                let mut foff = off as i64;
                t.calls += 1;
                match sys::sendfile(fd, file, &mut foff, n as usize * p) {
                    Ok(0) => t.error("sendfile", std::io::Error::other("sent nothing")),
                    Ok(r) => {
                        t.bytes += r as u64;
                        t.datagrams += r.div_ceil(p) as u64;
                        off += r;
                    }
                    Err(e) => t.error("sendfile", e),
                }
            }
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_media_is_ts_shaped() {
        let b = synthetic_ts(188 * 10);
        assert!(b.chunks(188).all(|p| p[0] == 0x47));
    }

    #[test]
    fn every_method_and_size_sends_with_sane_costs() {
        if !lazynet::sys::is_root() {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("needs root");
            }
            eprintln!("skipped: needs root");
            return;
        }
        for offload in [false, true] {
            for method in LinuxMethod::ALL {
                for payload in [1024, 1316, 2048, 4096, 8192] {
                    let r = if offload {
                        measure_with(&LinuxSendConfig {
                            method,
                            payload,
                            datagrams: 4000,
                            media: None,
                            dest: LinuxDest::TapInPrivateNetns,
                            offload,
                        })
                    } else {
                        measure(method, payload, 4000)
                    }
                    .unwrap();
                    assert_eq!((r.method, r.payload), (method, payload));
                    eprintln!(
                        "{:<22} {:>5} B {:<15} offload={:<5} cpu {:>8.1} ns/dgram  wall {:>8.1} ns/dgram  calls {:>5}  frames {:?}  errors {} {:?} {:?}",
                        method.name(),
                        payload,
                        r.dest.name(),
                        r.offload,
                        r.cpu_ns_per_datagram,
                        r.wall_ns_per_datagram,
                        r.calls,
                        r.device_frames,
                        r.errors,
                        r.first_error,
                        r.note,
                    );
                    assert_eq!(r.dest, LinuxDest::TapInPrivateNetns, "{:?}", r.note);
                    assert_eq!(r.datagrams, 4000);
                    assert_eq!(r.bytes, 4000 * payload as u64);
                    assert_eq!(r.errors, 0, "{:?}", r.first_error);
                    let frames = r.device_frames.expect("TAP statistics");
                    // One GSO super-packet per call with offload, else one
                    // frame per datagram. The kernel's own frames on a new
                    // interface (IPv6 MLD, router solicitations) can land in
                    // the same counter at any moment: allow a few.
                    let want = if offload && method == LinuxMethod::SendfileUdpSegment {
                        r.calls
                    } else {
                        r.datagrams
                    };
                    assert!(
                        (want..=want + 8).contains(&frames),
                        "{frames} frames at the device, {want} expected"
                    );
                    assert!(r.cpu_ns_per_datagram > 0.0);
                    assert!(r.cpu_ns_per_datagram < 1_000_000.0);
                    assert!(r.wall_ns_per_datagram > 0.0);
                }
            }
        }
    }

    #[test]
    fn loopback_fallback_sends() {
        let r = measure_with(&LinuxSendConfig {
            method: LinuxMethod::SendMmsg,
            payload: 1316,
            datagrams: 1000,
            media: None,
            dest: LinuxDest::LoopbackUnread,
            offload: false,
        })
        .unwrap();
        eprintln!(
            "loopback-unread sendmmsg32 1316 B: cpu {:.1} ns/dgram, wall {:.1} ns/dgram",
            r.cpu_ns_per_datagram, r.wall_ns_per_datagram
        );
        assert_eq!(r.dest, LinuxDest::LoopbackUnread);
        assert_eq!(r.device_frames, None);
        assert_eq!(r.datagrams, 1000);
        assert!(r.cpu_ns_per_datagram > 0.0);
    }
}
