//! A Linux TAP device (`IFF_TAP | IFF_NO_PI`, and `IFF_VNET_HDR` for
//! segmentation offload) as a [`Nic`].
//!
//! **Owns:** one non-blocking file descriptor on `/dev/net/tun`, a private
//! [`BufArea`] and its free list (a `Vec<u32>` allocated once, plus a bitmap
//! that rejects double releases), the device's MAC/MTU as seen by lazynet.
//!
//! **May not touch:** frame contents (it parses nothing but the headers
//! segmentation offload compares, in [`super::tso`]), the kernel
//! side's addresses and links (that is [`super::netns`]'s job), the calling
//! thread's network namespace (attaching inside a namespace happens on a
//! short-lived helper thread).
//!
//! **Crate choice:** direct `ioctl`s through `libc` rather than `tun-rs`.
//! We need three things `tun-rs` does not expose cleanly: opening the device
//! on a helper thread that first `setns()`es into a named namespace (to attach
//! to a persistent device living there), `TUNSETPERSIST`, and the raw fd for
//! our own `poll`. The kernel interface is two ioctls and one 40-byte struct,
//! so the FFI surface stays tiny (and no extra dependency is pulled in).
//!
//! **Cost per packet:** TAP has no batched read/write for plain frames, so
//! `recv` makes one `read()` per frame (until `EAGAIN` or the batch is full)
//! and `send` one `write()` per frame. Nothing allocates on the data path.
//! This is the cost of the TAP interface (~0.8 Mpps per core);
//! AF_PACKET/AF_XDP drivers are the batched alternatives.
//!
//! **Segmentation offload** (`TapConfig::tso`, on by default): the device is
//! opened with `IFF_VNET_HDR`, so every frame read or written is preceded by
//! a ten-byte virtio-net header. `send` merges each run of consecutive TCP
//! segments of one connection in its batch (a TCP burst) into one frame
//! whose header asks the kernel to treat it as a GSO packet (rules and
//! layout in [`super::tso`]), written with one `writev`: the merged headers
//! from a scratch array, then each segment's data in place in its buffer. A
//! sender then makes one system call per burst (up to 64 KiB) instead of
//! one per MSS. On receive, `TUNSETOFFLOAD` (`TUN_F_CSUM | TUN_F_TSO4`)
//! lets the kernel hand over TCP GSO frames of up to 64 KiB and leave
//! checksums partial: a GSO frame is read into a scratch area allocated
//! once (its head lands in a buffer and is moved there) and cut into MSS
//! segments in our buffers ([`super::tso::Cutter`]), handed out over as
//! many `recv` calls as it takes; a partial checksum is completed in place.
//! One `read` then brings up to 64 KiB. With offload off the fd has no
//! virtio-net header and the device is told to offload nothing (a
//! persistent device keeps its last owner's setting).
//!
//! **Gather frames:** with `TapConfig::ext_bytes` > 0 the NIC has a private
//! ext area (heap memory, written once through `ext_area_mut`);
//! `send_gather` writes each frame with one `writev` of two iovecs (the
//! header in its buffer, the payload slice in the ext area). Nothing is
//! copied into our buffers; the kernel copies the frame once, as for any
//! TAP write.
//!
//! A frame longer than a buffer cannot be read whole: the kernel copies what
//! fits and silently reports the copied length, so `recv` reads with `readv`
//! into the buffer plus one spare byte; a frame that reaches the spare byte
//! is dropped and counted in
//! `rx_truncated`. Buffers hold at least MTU + 14 bytes, so this only happens
//! if the kernel side's MTU is raised above ours.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use super::free::FreeList;
use super::{tso, ExtRef, Nic};
use crate::mem::{BufArea, Desc};
use crate::sys::EventFd;
use rustix::event::{PollFd, PollFlags};

const IFNAMSIZ: usize = 16;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
/// `_IOW('T', 202, int)`
const TUNSETIFF: u64 = 0x4004_54ca;
/// `_IOW('T', 203, int)`
const TUNSETPERSIST: u64 = 0x4004_54cb;
/// `_IOR('T', 210, unsigned int)`
const TUNGETIFF: u64 = 0x8004_54d2;
/// `_IOW('T', 208, unsigned int)`
const TUNSETOFFLOAD: u64 = 0x4004_54d0;
/// `TUN_F_CSUM`, `TUN_F_TSO4`: what we can take from the kernel.
const TUN_F_CSUM: libc::c_ulong = 0x01;
const TUN_F_TSO4: libc::c_ulong = 0x02;
/// Largest GSO frame the kernel hands over (IPv4 total length is 16 bits).
const GSO_MAX: usize = 65536;

/// `struct ifreq` as far as TUNSETIFF needs it (name + flags), padded to the
/// kernel's 40 bytes.
#[repr(C)]
struct IfReq {
    name: [u8; IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// How to open a TAP device.
#[derive(Clone, Debug)]
pub struct TapConfig {
    /// Interface name (at most 15 bytes). Empty: the kernel picks `tapN`.
    pub name: String,
    /// Our MAC address (locally administered by default). Not the kernel
    /// side's address.
    pub mac: [u8; 6],
    /// Largest IP packet carried (Ethernet payload).
    pub mtu: usize,
    /// Size of every buffer (at least MTU + 14).
    pub buf_size: u32,
    /// Number of buffers.
    pub buf_count: u32,
    /// Frames read per `recv` call at most (besides `out.len()`).
    pub batch: usize,
    /// Bytes of the ext area for `send_gather` (0: none). Allocated once.
    pub ext_bytes: usize,
    /// Segmentation offload: open with `IFF_VNET_HDR` and send runs of TCP
    /// segments as one GSO frame (see the module docs).
    pub tso: bool,
}

impl Default for TapConfig {
    fn default() -> Self {
        TapConfig {
            name: String::new(),
            mac: [0x02, 0x6c, 0x6e, 0x00, 0x00, 0x01],
            mtu: 1500,
            buf_size: 2048,
            buf_count: 4096,
            batch: 64,
            ext_bytes: 0,
            tso: true,
        }
    }
}

/// Counters of a [`TapNic`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TapStats {
    /// Frames read from the device.
    pub rx_frames: u64,
    /// Frames written to the device.
    pub tx_frames: u64,
    /// `read()` failures other than `EAGAIN`.
    pub rx_errors: u64,
    /// `write()` failures other than `EAGAIN` (the frame is dropped).
    pub tx_errors: u64,
    /// Descriptors handed to `send`/`release` that were out of range or
    /// named a buffer the NIC already owned (ignored).
    pub bad_desc: u64,
    /// Frames longer than a buffer, dropped.
    pub rx_truncated: u64,
    /// `recv` found no free buffer.
    pub no_buffer: u64,
    /// Frames written that merged several TCP segments (segmentation
    /// offload); their segments are counted in `tx_frames` too.
    pub tso_frames: u64,
    /// Segments those frames carried.
    pub tso_segments: u64,
    /// Merged frames the kernel refused (segmentation offload is then
    /// switched off and the run sent again segment by segment).
    pub tso_refused: u64,
    /// Frames read whose partial checksum we completed.
    pub rx_csum_completed: u64,
    /// Frames read that we dropped for their virtio-net header: GSO frames
    /// we cannot cut (not TCP/IPv4, segments larger than a buffer) or
    /// checksum offsets outside the frame.
    pub rx_vnet_dropped: u64,
    /// GSO frames read (receive offload) and the segments cut from them;
    /// the segments are counted in `rx_frames` too.
    pub rx_gso_frames: u64,
    /// See `rx_gso_frames`.
    pub rx_gso_segments: u64,
}

/// A TAP device driven through a non-blocking fd.
#[derive(Debug)]
pub struct TapNic {
    fd: OwnedFd,
    name: String,
    mac: [u8; 6],
    mtu: usize,
    batch: usize,
    bufs: BufArea,
    free: FreeList,
    stats: TapStats,
    /// The ext area (`TapConfig::ext_bytes`; empty if none).
    ext: Vec<u8>,
    /// The fd was opened with `IFF_VNET_HDR`: a virtio-net header precedes
    /// every frame read and written.
    vnet: bool,
    /// Merge runs of TCP segments on `send` (`vnet` and `TapConfig::tso`).
    tso: bool,
    /// The kernel may hand over TCP GSO frames of up to 64 KiB (receive
    /// offload negotiated with `TUNSETOFFLOAD`); they are read into `big`
    /// and cut into segments in our buffers.
    rx_gso: bool,
    /// Where a GSO frame is read (`buf_size` + 64 KiB; empty without
    /// receive offload). Allocated once.
    big: Vec<u8>,
    /// The GSO frame in `big` whose segments are still to be handed out.
    cut: Option<tso::Cutter>,
    /// Polled beside the device in [`Nic::wait`]: another thread's wake.
    wake: Arc<EventFd>,
}

/// An interface name as `struct ifreq` holds it (checked: at most 15
/// bytes, no NUL or '/').
pub(super) fn name_bytes(name: &str) -> io::Result<[u8; IFNAMSIZ]> {
    let b = name.as_bytes();
    if b.len() >= IFNAMSIZ || b.contains(&0) || b.contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name {name:?} (at most 15 bytes, no NUL or '/')"),
        ));
    }
    let mut out = [0u8; IFNAMSIZ];
    out[..b.len()].copy_from_slice(b);
    Ok(out)
}

/// Opens `/dev/net/tun` and binds it to TAP device `name` (creating it if
/// absent) in the calling thread's network namespace, with `IFF_VNET_HDR`
/// if `vnet_hdr`. Returns the non-blocking fd and the device's actual name.
pub fn open_tap_fd(name: &str, vnet_hdr: bool) -> io::Result<(OwnedFd, String)> {
    let mut flags = IFF_TAP | IFF_NO_PI;
    if vnet_hdr {
        flags |= IFF_VNET_HDR;
    }
    let mut req = IfReq {
        name: name_bytes(name)?,
        flags,
        _pad: [0; 22],
    };
    let path = c"/dev/net/tun";
    // SAFETY: `path` is a valid NUL-terminated string; open has no other
    // memory effects.
    let raw = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("open /dev/net/tun: {e}")));
    }
    // SAFETY: `raw` is a freshly opened fd that nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: TUNSETIFF reads and writes a `struct ifreq`; `req` is a
    // properly sized (40 bytes), aligned, live `#[repr(C)]` value.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req as *mut IfReq) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("TUNSETIFF {name:?} (flags {flags:#x}): {e}"),
        ));
    }
    let end = req.name.iter().position(|&c| c == 0).unwrap_or(IFNAMSIZ);
    let actual = String::from_utf8_lossy(&req.name[..end]).into_owned();
    Ok((fd, actual))
}

/// Like [`open_tap_fd`], but inside network namespace `ns` (a name under
/// `/var/run/netns`). A helper thread enters the namespace, opens the device
/// and exits; the calling thread's namespace never changes.
pub fn open_tap_fd_in_netns(ns: &str, name: &str, vnet_hdr: bool) -> io::Result<(OwnedFd, String)> {
    let name = name.to_owned();
    super::netns::run_in_netns(ns, move || open_tap_fd(&name, vnet_hdr))
}

/// The flags the fd was bound with (`TUNGETIFF`).
fn tap_flags(fd: RawFd) -> io::Result<libc::c_short> {
    let mut req = IfReq {
        name: [0; IFNAMSIZ],
        flags: 0,
        _pad: [0; 22],
    };
    // SAFETY: TUNGETIFF writes a `struct ifreq` (name and flags) into `req`,
    // a properly sized (40 bytes), aligned, live `#[repr(C)]` value.
    let rc = unsafe { libc::ioctl(fd, TUNGETIFF as _, &mut req as *mut IfReq) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(req.flags)
}

/// Tells the kernel which offloads (`TUN_F_*`) the reader of TAP fd `fd`
/// takes (`TUNSETOFFLOAD`). The setting belongs to the device: an earlier
/// owner's stays unless replaced.
pub fn set_offload(fd: RawFd, flags: libc::c_ulong) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes an integer argument, no memory is accessed.
    let rc = unsafe { libc::ioctl(fd, TUNSETOFFLOAD as _, flags) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn set_persist_fd(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: TUNSETPERSIST takes an integer argument, no memory is accessed.
    let rc = unsafe { libc::ioctl(fd, TUNSETPERSIST as _, libc::c_ulong::from(on)) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl TapNic {
    /// Creates (or attaches to) TAP device `cfg.name` in the current network
    /// namespace. A device created here disappears when the fd closes unless
    /// [`TapNic::set_persist`] is used.
    pub fn create(cfg: &TapConfig) -> io::Result<TapNic> {
        let (fd, name) = open_tap_fd(&cfg.name, cfg.tso)?;
        Self::from_fd(fd, name, cfg)
    }

    /// Attaches to the existing device `cfg.name` inside namespace `ns`
    /// (see [`open_tap_fd_in_netns`]). Note: the kernel creates the device if
    /// it does not exist there; check first (as [`super::netns`] does).
    pub fn attach_in_netns(ns: &str, cfg: &TapConfig) -> io::Result<TapNic> {
        let (fd, name) = open_tap_fd_in_netns(ns, &cfg.name, cfg.tso)?;
        Self::from_fd(fd, name, cfg)
    }

    /// Wraps an fd already bound with TUNSETIFF (`IFF_TAP | IFF_NO_PI`,
    /// with or without `IFF_VNET_HDR`: the fd says which, and segmentation
    /// offload is used if it has one and `cfg.tso`). The fd is switched to
    /// non-blocking mode.
    pub fn from_fd(fd: OwnedFd, name: String, cfg: &TapConfig) -> io::Result<TapNic> {
        if (cfg.buf_size as usize) < cfg.mtu.saturating_add(14) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "buf_size must hold MTU + 14 bytes",
            ));
        }
        // SAFETY: fcntl on a valid fd, integer arguments only.
        let fl = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        if fl < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above.
        let rc = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let vnet = tap_flags(fd.as_raw_fd())? & IFF_VNET_HDR != 0;
        // Say what we take: GSO frames and partial checksums only with a
        // virtio-net header and offload on; otherwise nothing, which must
        // be said too, since a persistent device keeps its last owner's
        // setting (a reader without the header would get GSO frames).
        let rx_gso = if vnet && cfg.tso {
            set_offload(fd.as_raw_fd(), TUN_F_CSUM | TUN_F_TSO4).is_ok()
        } else {
            set_offload(fd.as_raw_fd(), 0)?;
            false
        };
        let bufs = BufArea::private("lazynet-tap", cfg.buf_size, cfg.buf_count)?;
        Ok(TapNic {
            fd,
            name,
            mac: cfg.mac,
            mtu: cfg.mtu,
            batch: cfg.batch.max(1),
            free: FreeList::full(cfg.buf_count),
            bufs,
            stats: TapStats::default(),
            ext: vec![0; cfg.ext_bytes],
            vnet,
            tso: vnet && cfg.tso,
            rx_gso,
            big: if rx_gso {
                vec![0; cfg.buf_size as usize + GSO_MAX]
            } else {
                Vec::new()
            },
            cut: None,
            wake: Arc::new(EventFd::new()?),
        })
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The fd, for poll/epoll-based waiting. Stays owned by the `TapNic`.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Waits until a frame can be read or `timeout` passes (`None`: forever).
    /// Returns whether the fd is readable.
    pub fn wait_readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        let mut pfd = [PollFd::new(&self.fd, PollFlags::IN)];
        loop {
            match poll(&mut pfd, timeout) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
                Ok(n) => return Ok(n > 0 && pfd[0].revents().contains(PollFlags::IN)),
            }
        }
    }

    /// Makes the device persistent (it outlives the fd) or not.
    pub fn set_persist(&self, on: bool) -> io::Result<()> {
        set_persist_fd(self.fd.as_raw_fd(), on)
    }

    /// Counters.
    pub fn stats(&self) -> TapStats {
        self.stats
    }

    /// Number of buffers the NIC currently owns (free).
    pub fn free_buffers(&self) -> usize {
        self.free.len()
    }

    /// Sets our MAC address (what [`Nic::mac`] reports).
    pub fn set_mac(&mut self, mac: [u8; 6]) {
        self.mac = mac;
    }

    /// True if segmentation offload is in use (see the module docs).
    pub fn tso(&self) -> bool {
        self.tso
    }

    /// Acts on the virtio-net header `h` (not `PLAIN`) of the `len`-byte
    /// frame just read into buffer `b`: completes a partial checksum.
    /// False: drop the frame (a GSO frame we did not ask for, or offsets
    /// outside it). With receive offload the kernel leaves most TCP
    /// checksums partial.
    #[inline]
    fn vnet_rx(&mut self, b: u32, len: usize, h: &tso::VnetHdr) -> bool {
        if !h.is_plain_frame() {
            return false;
        }
        if !h.needs_csum() {
            // DATA_VALID or nothing we act on.
            return true;
        }
        let Some(frame) = self.bufs.buf_mut(b).and_then(|f| f.get_mut(..len)) else {
            return false;
        };
        let ok = tso::complete_checksum(frame, h);
        self.stats.rx_csum_completed += u64::from(ok);
        ok
    }

    /// Hands out segments of the GSO frame in `big` into `out[n..want]`,
    /// each in a buffer of ours; returns the new `n` (the caller counts
    /// them in `rx_frames`). The frame stays pending (`cut`) while
    /// segments remain.
    fn drain_cut(&mut self, out: &mut [Desc], mut n: usize, want: usize) -> usize {
        let Some(mut c) = self.cut.take() else {
            return n;
        };
        while n < want && c.remaining() > 0 {
            let Some(b) = self.free.pop() else {
                self.stats.no_buffer += 1;
                break;
            };
            let seg = self
                .bufs
                .buf_mut(b)
                .and_then(|buf| c.next_segment(&self.big, buf));
            let Some(len) = seg.and_then(|l| u16::try_from(l).ok()) else {
                // Cannot happen: `Cutter::new` checked the segments fit.
                self.free.push(b);
                break;
            };
            out[n] = Desc::new(b, len);
            n += 1;
            self.stats.rx_gso_segments += 1;
        }
        if c.remaining() > 0 {
            self.cut = Some(c);
        }
        n
    }

    /// `send` with a virtio-net header on every frame: runs of TCP segments
    /// merge into one frame ([`tso::run_len`]) when `tso` is on. Same
    /// contract as [`Nic::send`]: stops at a full device queue (the frames
    /// from there stay the caller's), drops a frame the kernel refuses
    /// otherwise.
    fn send_vnet(&mut self, frames: &[Desc]) -> usize {
        let fd = self.fd.as_raw_fd();
        let plain = tso::VnetHdr::PLAIN.to_bytes();
        let mut vh: [u8; tso::VNET_HDR_LEN];
        let mut hdr = [0u8; tso::MAX_HDR];
        // Filled afresh for every write; only the first `n_iov` are passed.
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; tso::MAX_RUN + 2];
        let mut i = 0;
        while i < frames.len() {
            let d = frames[i];
            let Some(first) = self.bufs.frame(d) else {
                self.stats.bad_desc += 1;
                let _ = self.free.push(d.buf);
                i += 1;
                continue;
            };
            let run = if self.tso {
                tso::run_len(first, frames[i + 1..].iter().map(|&d| self.bufs.frame(d)))
            } else {
                tso::Run {
                    n: 1,
                    data: 0,
                    psh: false,
                }
            };
            let k = run.n;
            let n_iov = if k == 1 {
                iov[0] = iovec(&plain);
                iov[1] = iovec(first);
                2
            } else {
                let (hl, v) = tso::merged_header(first, &run, &mut hdr);
                vh = v.to_bytes();
                iov[0] = iovec(&vh);
                iov[1] = iovec(&hdr[..hl]);
                for (j, &d) in frames[i..i + k].iter().enumerate() {
                    // `run_len` checked every frame of the run.
                    let f = self.bufs.frame(d).unwrap_or(&[]);
                    iov[2 + j] = iovec(f.get(hl..).unwrap_or(&[]));
                }
                k + 2
            };
            loop {
                // SAFETY: the first `n_iov` iovecs describe readable slices
                // (`plain`/`vh`, `hdr`, frames in our buffers) that live
                // across the call; writev only reads them.
                let r = unsafe { libc::writev(fd, iov.as_ptr(), n_iov as libc::c_int) };
                if r >= 0 {
                    self.stats.tx_frames += k as u64;
                    if k > 1 {
                        self.stats.tso_frames += 1;
                        self.stats.tso_segments += k as u64;
                    }
                    break;
                }
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    // Queue full: the caller keeps this run and later frames.
                    io::ErrorKind::WouldBlock => return i,
                    _ if k > 1 => {
                        // A kernel that refuses GSO frames: stop merging
                        // and send this run again one segment at a time.
                        self.tso = false;
                        self.stats.tso_refused += 1;
                        break;
                    }
                    _ => {
                        self.stats.tx_errors += 1;
                        break;
                    }
                }
            }
            if k > 1 && !self.tso {
                continue;
            }
            for &d in &frames[i..i + k] {
                if !self.free.push(d.buf) {
                    self.stats.bad_desc += 1;
                }
            }
            i += k;
        }
        frames.len()
    }
}

/// An iovec for a slice writev only reads.
fn iovec(s: &[u8]) -> libc::iovec {
    libc::iovec {
        iov_base: s.as_ptr() as *mut libc::c_void,
        iov_len: s.len(),
    }
}

impl Nic for TapNic {
    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn mtu(&self) -> usize {
        self.mtu
    }

    fn buffers(&self) -> &BufArea {
        &self.bufs
    }

    fn buffers_mut(&mut self) -> &mut BufArea {
        &mut self.bufs
    }

    fn recv(&mut self, out: &mut [Desc]) -> usize {
        let want = out.len().min(self.batch);
        let fd = self.fd.as_raw_fd();
        // Segments of a GSO frame read earlier come first; nothing new is
        // read while some remain (`big` holds the frame).
        let mut n = self.drain_cut(out, 0, want);
        if self.cut.is_some() {
            self.stats.rx_frames += n as u64;
            return n;
        }
        // At most `want` reads per call, even if frames are being dropped
        // (truncated) or reads are interrupted.
        for _ in 0..want {
            if n == want {
                break;
            }
            let Some(b) = self.free.pop() else {
                self.stats.no_buffer += 1;
                break;
            };
            let Some(buf) = self.bufs.buf_mut(b) else {
                // Cannot happen: free list only holds valid indices.
                break;
            };
            let cap = buf.len().min(u16::MAX as usize);
            // One byte past the buffer tells a frame that did not fit (the
            // kernel truncates silently and reports the truncated length).
            let mut one = [0u8; 1];
            // With receive offload the rest of a GSO frame lands in `big`
            // after the first `cap` bytes' place.
            let tail: &mut [u8] = if self.rx_gso {
                &mut self.big[cap..]
            } else {
                &mut one
            };
            let mut vh = [0u8; tso::VNET_HDR_LEN];
            let iov = [
                libc::iovec {
                    iov_base: vh.as_mut_ptr().cast(),
                    iov_len: vh.len(),
                },
                libc::iovec {
                    iov_base: buf.as_mut_ptr().cast(),
                    iov_len: cap,
                },
                libc::iovec {
                    iov_base: tail.as_mut_ptr().cast(),
                    iov_len: tail.len(),
                },
            ];
            // Without a virtio-net header, the frame goes straight into the
            // buffer.
            let skip = usize::from(!self.vnet);
            // SAFETY: the iovecs describe live, writable memory this NIC
            // owns: `vh`, `cap` bytes of a buffer that came off the free
            // list, and `tail` (`one`, or `big` past `cap`); `skip` leaves
            // 2 or 3 of the 3.
            let r = unsafe { libc::readv(fd, iov[skip..].as_ptr(), (3 - skip) as libc::c_int) };
            let hl = if self.vnet {
                tso::VNET_HDR_LEN as isize
            } else {
                0
            };
            if r > 0 && r <= hl {
                // A header and no frame: nothing to deliver.
                self.free.push(b);
                self.stats.rx_vnet_dropped += 1;
                continue;
            }
            let r = if r > 0 { r - hl } else { r };
            if r <= 0 {
                self.free.push(b);
                if r < 0 {
                    let e = io::Error::last_os_error();
                    match e.kind() {
                        io::ErrorKind::WouldBlock => {}
                        io::ErrorKind::Interrupted => continue,
                        _ => self.stats.rx_errors += 1,
                    }
                }
                break;
            }
            let len = r as usize; // r > 0
            if self.rx_gso && len >= self.big.len() {
                // Filled to the last byte: possibly cut short by the read
                // (no GSO frame is that long); cutting it would make whole
                // segments of a part.
                self.stats.rx_truncated += 1;
                self.free.push(b);
                continue;
            }
            // All zeros (`PLAIN`) when the fd has no virtio-net header.
            let h = tso::VnetHdr::from_bytes(&vh);
            if self.rx_gso && !h.is_plain_frame() {
                // A GSO frame (short or long): its head is in buffer `b`,
                // the rest in `big` after `cap` bytes; put the head there
                // too and cut the frame into our buffers.
                let head = len.min(cap);
                if let Some(buf) = self.bufs.buf_mut(b) {
                    self.big[..head].copy_from_slice(&buf[..head]);
                }
                self.free.push(b);
                let max = self.bufs.buf_size();
                match tso::Cutter::new(&self.big[..len], &h, max) {
                    Some(c) => {
                        self.stats.rx_gso_frames += 1;
                        self.cut = Some(c);
                        n = self.drain_cut(out, n, want);
                        if self.cut.is_some() {
                            break;
                        }
                    }
                    None => self.stats.rx_vnet_dropped += 1,
                }
                continue;
            }
            if len > cap {
                self.stats.rx_truncated += 1;
                self.free.push(b);
                continue;
            }
            if h != tso::VnetHdr::PLAIN && !self.vnet_rx(b, len, &h) {
                self.free.push(b);
                self.stats.rx_vnet_dropped += 1;
                continue;
            }
            // len <= cap <= u16::MAX
            out[n] = Desc::new(b, u16::try_from(len).unwrap_or(0));
            n += 1;
        }
        self.stats.rx_frames += n as u64;
        n
    }

    fn alloc(&mut self, out: &mut [u32]) -> usize {
        let mut n = 0;
        while n < out.len() {
            let Some(b) = self.free.pop() else { break };
            out[n] = b;
            n += 1;
        }
        n
    }

    fn send(&mut self, frames: &[Desc]) -> usize {
        if self.vnet {
            return self.send_vnet(frames);
        }
        let fd = self.fd.as_raw_fd();
        for (i, &d) in frames.iter().enumerate() {
            let Some(frame) = self.bufs.frame(d) else {
                // Out of range: accept and drop (we cannot own a bad index;
                // a valid index with a bad range goes back to the free list).
                self.stats.bad_desc += 1;
                let _ = self.free.push(d.buf);
                continue;
            };
            loop {
                // SAFETY: `frame` is a readable slice of exactly `len` bytes.
                let r = unsafe { libc::write(fd, frame.as_ptr().cast(), frame.len()) };
                if r >= 0 {
                    self.stats.tx_frames += 1;
                    break;
                }
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    // Queue full: the caller keeps this and later frames.
                    io::ErrorKind::WouldBlock => return i,
                    _ => {
                        self.stats.tx_errors += 1;
                        break;
                    }
                }
            }
            if !self.free.push(d.buf) {
                self.stats.bad_desc += 1;
            }
        }
        frames.len()
    }

    fn ext_capacity(&self) -> usize {
        self.ext.len()
    }

    fn ext_area_mut(&mut self) -> Option<&mut [u8]> {
        (!self.ext.is_empty()).then_some(&mut self.ext[..])
    }

    fn ext_bytes(&self) -> Option<&[u8]> {
        (!self.ext.is_empty()).then_some(&self.ext[..])
    }

    /// One `writev` per frame: header buffer + ext slice (no copy on our
    /// side; the kernel copies once). Stops at the first frame whose header
    /// or slice is out of range (`bad_desc`) or when the device queue is
    /// full; those frames stay the caller's. A frame the kernel refuses with
    /// another error is dropped (`tx_errors`) and its buffer freed, as in
    /// `send`.
    fn send_gather(&mut self, frames: &[(Desc, ExtRef)]) -> usize {
        let fd = self.fd.as_raw_fd();
        for (i, &(d, e)) in frames.iter().enumerate() {
            let (Some(hdr), Some(pay)) = (self.bufs.frame(d), e.slice(&self.ext)) else {
                self.stats.bad_desc += 1;
                return i;
            };
            let vh = tso::VnetHdr::PLAIN.to_bytes();
            let iov = [
                libc::iovec {
                    iov_base: vh.as_ptr() as *mut libc::c_void,
                    iov_len: vh.len(),
                },
                libc::iovec {
                    iov_base: hdr.as_ptr() as *mut libc::c_void,
                    iov_len: hdr.len(),
                },
                libc::iovec {
                    iov_base: pay.as_ptr() as *mut libc::c_void,
                    iov_len: pay.len(),
                },
            ];
            let skip = usize::from(!self.vnet);
            loop {
                // SAFETY: the iovecs describe readable slices that live
                // across the call; writev only reads them.
                let r =
                    unsafe { libc::writev(fd, iov[skip..].as_ptr(), (3 - skip) as libc::c_int) };
                if r >= 0 {
                    self.stats.tx_frames += 1;
                    break;
                }
                let err = io::Error::last_os_error();
                match err.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => return i,
                    _ => {
                        self.stats.tx_errors += 1;
                        break;
                    }
                }
            }
            if !self.free.push(d.buf) {
                self.stats.bad_desc += 1;
            }
        }
        frames.len()
    }

    fn release(&mut self, bufs: &[Desc]) {
        for d in bufs {
            if !self.free.push(d.buf) {
                self.stats.bad_desc += 1;
            }
        }
    }

    /// A zero-timeout `poll(2)` on the device: one system call, no frame
    /// consumed. The default (`true`) would make a host's receive task
    /// (interrupt priority) run on every iteration and starve every other
    /// task of the core.
    fn rx_ready(&mut self) -> bool {
        self.cut.is_some() || self.wait_readable(Some(Duration::ZERO)).unwrap_or(true)
    }

    /// The device itself: readable when the kernel has a frame for us.
    fn wait_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        Some(std::os::fd::AsFd::as_fd(&self.fd))
    }

    /// Segments of a GSO frame already cut wait here, not in the kernel.
    fn wait_begin(&mut self) -> bool {
        self.cut.is_none()
    }

    fn driver_stats(&self) -> Option<String> {
        Some(format!(
            "{:?} (segmentation offload {})",
            self.stats,
            if self.tso { "on" } else { "off" }
        ))
    }

    fn wait(&mut self, timeout_ns: Option<u64>) {
        if self.cut.is_some() {
            // Segments of a GSO frame are waiting already.
            return;
        }
        // Sleep in poll(2) on the device and the wake eventfd; at most
        // 10 ms so timers still run.
        let t = Duration::from_nanos(timeout_ns.unwrap_or(10_000_000).min(10_000_000));
        let wake = self.wake.fd();
        let mut pfd = [
            PollFd::new(&self.fd, PollFlags::IN),
            PollFd::new(&wake, PollFlags::IN),
        ];
        // An error (EINTR) just ends the wait early, which callers allow.
        let rc = poll(&mut pfd, Some(t)).unwrap_or(0);
        if rc > 0 && pfd[1].revents().contains(PollFlags::IN) {
            self.wake.drain();
        }
    }

    fn remote_waker(&self) -> Option<Arc<EventFd>> {
        Some(self.wake.clone())
    }
}

/// `poll(2)` on `fds` for at most `timeout` (`None`: no limit); returns
/// how many are ready. `rustix` passes a nanosecond timeout (`ppoll`), so
/// a wait of less than a millisecond does not round down to a busy 0.
fn poll(fds: &mut [PollFd<'_>], timeout: Option<Duration>) -> io::Result<usize> {
    let ts = timeout.map(|t| rustix::event::Timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: i64::from(t.subsec_nanos()),
    });
    Ok(rustix::event::poll(fds, ts.as_ref())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_checks() {
        assert!(name_bytes("0123456789abcde").is_ok());
        assert!(name_bytes("0123456789abcdef").is_err());
        assert!(name_bytes("a/b").is_err());
    }
}
