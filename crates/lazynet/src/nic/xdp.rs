//! An AF_XDP socket on one queue of a Linux interface as a [`Nic`].
//!
//! **Owns:** the socket, its four rings (fill, completion, receive,
//! transmit) mapped from the kernel, the UMEM — which *is* this NIC's
//! [`BufArea`]: buffer `i` is UMEM frame `i`, so a frame received is
//! already in the buffer the stack reads, and a frame the stack builds is
//! transmitted from where it lies (no copy on our side in either
//! direction) — the buffers' free list, and the [`Steering`] program that
//! sends lazynet's frames to the socket.
//!
//! **May not touch:** frame contents, the interface's configuration (that is
//! [`super::netns`]'s), frames for other addresses (the program passes
//! them to the kernel).
//!
//! **Rings.** Each ring is a power-of-two array of descriptors with a
//! producer and a consumer index shared with the kernel; one side writes
//! each. We produce on fill (free buffers the kernel may receive into) and
//! transmit, and consume receive and completion (buffers whose
//! transmission finished). Indices are loaded with `Acquire` and stored
//! with `Release`, the protocol of the kernel's `xsk_queue.h`. Every
//! descriptor the kernel writes is checked before it becomes a [`Desc`].
//!
//! **Cost per packet:** none beyond reading or writing one descriptor. A
//! receive takes a batch with no system call; a transmit batch needs one
//! `sendto` "kick" when the kernel asks for it (`need_wakeup`; in copy mode
//! the kernel transmits inside that call, 32 frames at a time, so a large
//! batch takes a few). An idle driver sleeps in `poll(2)` on the socket.
//!
//! **Zero-copy or copy.** Binding asks for zero-copy first (the NIC's DMA
//! writes our buffers); drivers without it (veth, TAP, most virtual NICs)
//! refuse, and the socket binds in copy mode (the kernel copies each frame
//! once between its own buffer and ours). [`XdpNic::zero_copy`] says which,
//! and programs print it at start.
//!
//! **Crate choice:** `rustix` for the socket, its options and `bind` (it has
//! typed AF_XDP support), `libc` for `mmap` and the kicks. The `xdp` and
//! `xdpilone` crates build here, but own their UMEM memory; ours must be the
//! stack's buffer region, and the rings are a few dozen lines each.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags};
use rustix::net::xdp::{
    SocketAddrXdp, SocketAddrXdpFlags, XdpDesc, XdpDescOptions, XdpRingOffset, XdpUmemReg,
    XdpUmemRegFlags, XDP_PGOFF_RX_RING, XDP_PGOFF_TX_RING, XDP_UMEM_PGOFF_COMPLETION_RING,
    XDP_UMEM_PGOFF_FILL_RING,
};
use rustix::net::{sockopt, AddressFamily, SocketType};

use super::bpf::{Hook, Steering};
use super::free::FreeList;
use super::Nic;
use crate::mem::{BufArea, Desc};
use crate::sys::EventFd;

/// `XDP_PACKET_HEADROOM`: where the kernel puts a received frame inside its
/// UMEM frame (room for an XDP program to grow headers).
const XDP_HEADROOM: usize = 256;
/// `XDP_RING_NEED_WAKEUP`.
const NEED_WAKEUP: u32 = 1;

/// How to open an AF_XDP NIC.
#[derive(Clone, Debug)]
pub struct XdpConfig {
    /// The interface (in this process's namespace).
    pub ifname: String,
    /// Its receive queue to bind to.
    pub queue: u32,
    /// lazynet's address: the program steers IPv4 to it and ARP for it.
    pub addr: Ipv4Addr,
    /// Number of buffers (UMEM frames) of `2048` bytes.
    pub buf_count: u32,
    /// Entries of each ring (a power of two).
    pub ring_size: u32,
    /// Frames taken per `recv` at most (besides the caller's slice).
    pub batch: usize,
    /// Insist on copy mode even where zero-copy is offered.
    pub force_copy: bool,
}

impl Default for XdpConfig {
    fn default() -> Self {
        XdpConfig {
            ifname: String::new(),
            queue: 0,
            addr: Ipv4Addr::UNSPECIFIED,
            buf_count: 8192,
            ring_size: 2048,
            batch: 64,
            force_copy: false,
        }
    }
}

/// UMEM frame size, and so buffer size: the kernel's aligned mode needs a
/// power of two between 2 KiB and a page.
pub const FRAME: u32 = 2048;

/// Counters of an [`XdpNic`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpStats {
    /// Frames taken from the receive ring.
    pub rx_frames: u64,
    /// Frames put on the transmit ring.
    pub tx_frames: u64,
    /// Transmissions the kernel reported complete.
    pub tx_completed: u64,
    /// `send` stopped because the transmit ring was full.
    pub tx_ring_full: u64,
    /// `sendto` kicks made.
    pub tx_kicks: u64,
    /// Kicks that failed with an error other than "try again".
    pub tx_errors: u64,
    /// Descriptors from the kernel naming no buffer we gave it, and
    /// descriptors from the caller out of range or released twice.
    pub bad_desc: u64,
    /// Received frames found longer than the buffer holds (dropped).
    pub rx_truncated: u64,
    /// Fill-ring wakeups (`recvfrom`) made.
    pub rx_kicks: u64,
}

/// One ring mapped from the socket: `T` is [`XdpDesc`] (receive, transmit)
/// or `u64` (fill, completion: UMEM addresses).
struct XRing<T> {
    map: *mut libc::c_void,
    map_len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    descs: *mut T,
    size: u32,
    /// Our copy of the index we write (producer or consumer).
    local: u32,
    /// Our last look at the index the kernel writes.
    cached: u32,
}

// SAFETY: the ring's memory is a private mapping of this NIC's socket,
// reached only through `&mut XdpNic`; moving it to another thread moves
// the only user.
unsafe impl<T> Send for XRing<T> {}

impl<T: Copy> XRing<T> {
    /// Maps ring `pgoff` of socket `fd` with `size` entries laid out at `off`.
    fn map(fd: &OwnedFd, pgoff: u64, off: &XdpRingOffset, size: u32) -> io::Result<XRing<T>> {
        let map_len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        // SAFETY: a fresh shared mapping of the socket's ring, whose length
        // the kernel's offsets give; no existing memory is affected.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff as libc::off_t,
            )
        };
        if map == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("mmap XDP ring: {e}")));
        }
        let base = map.cast::<u8>();
        let flags = off.flags.unwrap_or(off.consumer + 4);
        // SAFETY: the kernel's offsets lie inside the mapping, and its index
        // words are 4-byte aligned u32s that the kernel accesses atomically.
        let r = unsafe {
            XRing {
                map,
                map_len,
                producer: base.add(off.producer as usize).cast(),
                consumer: base.add(off.consumer as usize).cast(),
                flags: base.add(flags as usize).cast(),
                descs: base.add(off.desc as usize).cast(),
                size,
                local: 0,
                cached: 0,
            }
        };
        Ok(r)
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping (see `map`); atomics make the
        // kernel's concurrent accesses well-defined.
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as in `producer`.
        unsafe { &*self.consumer }
    }

    fn needs_wakeup(&self) -> bool {
        // SAFETY: as in `producer`.
        unsafe { &*self.flags }.load(Ordering::Relaxed) & NEED_WAKEUP != 0
    }

    /// Entries this side may consume now (a consumer ring).
    fn available(&mut self) -> u32 {
        if self.cached == self.local {
            self.cached = self.producer().load(Ordering::Acquire);
        }
        // A kernel index more than `size` ahead would be a kernel bug;
        // clamping keeps us inside the array regardless.
        self.cached.wrapping_sub(self.local).min(self.size)
    }

    /// Free entries this side may produce into (a producer ring).
    fn room(&mut self) -> u32 {
        self.cached = self.consumer().load(Ordering::Acquire);
        self.size
            .saturating_sub(self.local.wrapping_sub(self.cached).min(self.size))
    }

    fn read(&self, i: u32) -> T {
        // SAFETY: `i & (size - 1)` indexes inside the array of `size`
        // entries; the kernel published this entry before the producer index
        // we loaded with Acquire.
        unsafe {
            self.descs
                .add((i & (self.size - 1)) as usize)
                .read_volatile()
        }
    }

    fn write(&mut self, i: u32, v: T) {
        // SAFETY: as in `read`; the entry is ours to write until we publish
        // the producer index.
        unsafe {
            self.descs
                .add((i & (self.size - 1)) as usize)
                .write_volatile(v)
        }
    }

    /// Publishes entries written up to `self.local` (a producer ring).
    fn publish_producer(&self) {
        self.producer().store(self.local, Ordering::Release);
    }

    /// Gives back entries read up to `self.local` (a consumer ring).
    fn publish_consumer(&self) {
        self.consumer().store(self.local, Ordering::Release);
    }
}

impl<T> Drop for XRing<T> {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`; no reference
        // into it outlives the ring.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}

impl<T> std::fmt::Debug for XRing<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "XRing(size {})", self.size)
    }
}

/// An AF_XDP socket as a NIC.
#[derive(Debug)]
pub struct XdpNic {
    // Drop order: the program first (no more frames steered), the rings,
    // then the socket.
    steering: Steering,
    rx: XRing<XdpDesc>,
    tx: XRing<XdpDesc>,
    fill: XRing<u64>,
    comp: XRing<u64>,
    fd: OwnedFd,
    bufs: BufArea,
    free: FreeList,
    ifname: String,
    mac: [u8; 6],
    mtu: usize,
    batch: usize,
    zero_copy: bool,
    stats: XdpStats,
    wake: Arc<EventFd>,
}

/// The interface's index, MAC and MTU, asked of the kernel with
/// `ioctl`s on a socket: they answer for the calling thread's network
/// namespace (sysfs would show the namespace it was mounted in).
fn iface(name: &str) -> io::Result<(u32, [u8; 6], usize)> {
    const SIOCGIFMTU: libc::c_ulong = 0x8921;
    const SIOCGIFHWADDR: libc::c_ulong = 0x8927;
    const SIOCGIFINDEX: libc::c_ulong = 0x8933;
    let ifname = super::tap::name_bytes(name)?;
    let sock = rustix::net::socket(AddressFamily::INET, SocketType::DGRAM, None)?;
    let ask = |req: libc::c_ulong, what: &str| -> io::Result<[u8; 24]> {
        // `struct ifreq`: the name, then a 24-byte union.
        let mut ifr = [0u8; 40];
        ifr[..16].copy_from_slice(&ifname);
        // SAFETY: these ioctls read the name from and write their answer
        // into a 40-byte `struct ifreq`, which `ifr` is (live, writable).
        let rc = unsafe { libc::ioctl(sock.as_raw_fd(), req as _, ifr.as_mut_ptr()) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("interface {name}: {what}: {e}"),
            ));
        }
        let mut u = [0u8; 24];
        u.copy_from_slice(&ifr[16..]);
        Ok(u)
    };
    let idx = ask(SIOCGIFINDEX, "index")?;
    let index = u32::from_ne_bytes([idx[0], idx[1], idx[2], idx[3]]);
    let m = ask(SIOCGIFMTU, "MTU")?;
    let mtu = i32::from_ne_bytes([m[0], m[1], m[2], m[3]]).max(0) as usize;
    // A `struct sockaddr`: family (2 bytes), then the address.
    let hw = ask(SIOCGIFHWADDR, "MAC address")?;
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&hw[2..8]);
    Ok((index, mac, mtu))
}

impl XdpNic {
    /// Opens the socket on `cfg.ifname` queue `cfg.queue`, registers a new
    /// buffer area as its UMEM, binds (zero-copy if the driver offers it)
    /// and attaches the steering program. lazynet takes the interface's MAC
    /// address and MTU. Needs `CAP_NET_ADMIN` and `CAP_BPF` (root).
    pub fn open(cfg: &XdpConfig) -> io::Result<XdpNic> {
        let (ifindex, mac, mtu) = iface(&cfg.ifname)?;
        if mtu + 14 > FRAME as usize - XDP_HEADROOM {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: MTU {mtu} does not fit a {FRAME}-byte frame after {XDP_HEADROOM} bytes of headroom",
                    cfg.ifname
                ),
            ));
        }
        if !cfg.ring_size.is_power_of_two() || cfg.ring_size > cfg.buf_count / 2 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "ring size must be a power of two, at most half the buffers",
            ));
        }
        let bufs = BufArea::private("lazynet-xdp", FRAME, cfg.buf_count)?;
        let steering = Steering::attach(ifindex, cfg.addr)?;
        let mut last = None;
        let modes: &[bool] = if cfg.force_copy {
            &[false]
        } else {
            &[true, false]
        };
        for &zc in modes {
            match Self::bind(cfg, ifindex, &bufs, zc) {
                Ok((fd, rings)) => {
                    steering.insert(cfg.queue, fd.as_raw_fd())?;
                    let [rx, tx] = rings.0;
                    let [fill, comp] = rings.1;
                    let mut nic = XdpNic {
                        steering,
                        rx,
                        tx,
                        fill,
                        comp,
                        fd,
                        free: FreeList::full(cfg.buf_count),
                        bufs,
                        ifname: cfg.ifname.clone(),
                        mac,
                        mtu,
                        batch: cfg.batch.max(1),
                        zero_copy: zc,
                        stats: XdpStats::default(),
                        wake: Arc::new(EventFd::new()?),
                    };
                    nic.refill();
                    return Ok(nic);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("AF_XDP bind")))
    }

    #[allow(clippy::type_complexity)]
    fn bind(
        cfg: &XdpConfig,
        ifindex: u32,
        bufs: &BufArea,
        zero_copy: bool,
    ) -> io::Result<(OwnedFd, ([XRing<XdpDesc>; 2], [XRing<u64>; 2]))> {
        let ctx = |what: &'static str| {
            move |e: rustix::io::Errno| -> io::Error {
                let e = io::Error::from(e);
                io::Error::new(e.kind(), format!("AF_XDP {what}: {e}"))
            }
        };
        let fd = rustix::net::socket(AddressFamily::XDP, SocketType::RAW, None)
            .map_err(ctx("socket"))?;
        let reg = XdpUmemReg {
            addr: bufs.region().as_ptr() as u64,
            len: FRAME as u64 * cfg.buf_count as u64,
            chunk_size: FRAME,
            headroom: 0,
            flags: XdpUmemRegFlags::empty(),
            tx_metadata_len: 0,
        };
        sockopt::set_xdp_umem_reg(&fd, reg).map_err(ctx("register UMEM"))?;
        let n = cfg.ring_size;
        sockopt::set_xdp_umem_fill_ring_size(&fd, n).map_err(ctx("fill ring"))?;
        sockopt::set_xdp_umem_completion_ring_size(&fd, n).map_err(ctx("completion ring"))?;
        sockopt::set_xdp_rx_ring_size(&fd, n).map_err(ctx("receive ring"))?;
        sockopt::set_xdp_tx_ring_size(&fd, n).map_err(ctx("transmit ring"))?;
        let off = sockopt::xdp_mmap_offsets(&fd).map_err(ctx("ring offsets"))?;
        let rx = XRing::map(&fd, XDP_PGOFF_RX_RING, &off.rx, n)?;
        let tx = XRing::map(&fd, XDP_PGOFF_TX_RING, &off.tx, n)?;
        let fill = XRing::map(&fd, XDP_UMEM_PGOFF_FILL_RING, &off.fr, n)?;
        let comp = XRing::map(&fd, XDP_UMEM_PGOFF_COMPLETION_RING, &off.cr, n)?;
        let mode = if zero_copy {
            SocketAddrXdpFlags::XDP_ZEROCOPY
        } else {
            SocketAddrXdpFlags::XDP_COPY
        };
        let addr = SocketAddrXdp::new(
            mode | SocketAddrXdpFlags::XDP_USE_NEED_WAKEUP,
            ifindex,
            cfg.queue,
        );
        rustix::net::bind(&fd, &addr).map_err(ctx(if zero_copy {
            "bind (zero-copy)"
        } else {
            "bind (copy mode)"
        }))?;
        Ok((fd, ([rx, tx], [fill, comp])))
    }

    /// [`XdpNic::open`] on an interface inside network namespace `ns` (a
    /// name under `/var/run/netns`); the calling thread stays where it is,
    /// and the NIC works from any thread.
    pub fn open_in_netns(ns: &str, cfg: &XdpConfig) -> io::Result<XdpNic> {
        let cfg = cfg.clone();
        super::netns::run_in_netns(ns, move || XdpNic::open(&cfg))
    }

    /// The interface bound to.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// True if the socket runs in zero-copy mode.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Where the steering program runs.
    pub fn hook(&self) -> Hook {
        self.steering.hook()
    }

    /// One line for a program's start: interface, queue mode, hook.
    pub fn describe(&self) -> String {
        format!(
            "AF_XDP on {} ({} mode, XDP program at the {} hook)",
            self.ifname,
            if self.zero_copy { "zero-copy" } else { "copy" },
            self.hook().name()
        )
    }

    /// The driver's counters.
    pub fn stats(&self) -> XdpStats {
        self.stats
    }

    /// Buffers on the free list.
    pub fn free_buffers(&self) -> usize {
        self.free.len()
    }

    /// Gives the kernel free buffers to receive into, as many as the fill
    /// ring takes, keeping at least a quarter of all buffers for
    /// transmission.
    fn refill(&mut self) {
        let keep = self.bufs.count() as usize / 4;
        let room = self.fill.room() as usize;
        let n = room.min(self.free.len().saturating_sub(keep));
        if n == 0 {
            return;
        }
        for _ in 0..n {
            let Some(b) = self.free.pop() else { break };
            let i = self.fill.local;
            self.fill.write(i, u64::from(b) * u64::from(FRAME));
            self.fill.local = i.wrapping_add(1);
        }
        self.fill.publish_producer();
        if self.fill.needs_wakeup() {
            self.kick_rx();
        }
    }

    fn kick_rx(&mut self) {
        self.stats.rx_kicks += 1;
        // SAFETY: a zero-length recvfrom on our socket: no memory is
        // written (null buffer, length 0); it only wakes the driver.
        unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    /// Takes finished transmissions back onto the free list.
    fn reap(&mut self) {
        let n = self.comp.available();
        for _ in 0..n {
            let i = self.comp.local;
            let addr = self.comp.read(i);
            self.comp.local = i.wrapping_add(1);
            let b = addr / u64::from(FRAME);
            if b >= u64::from(self.bufs.count()) || !self.free.push(b as u32) {
                self.stats.bad_desc += 1;
            }
        }
        if n > 0 {
            self.comp.publish_consumer();
            self.stats.tx_completed += u64::from(n);
        }
    }

    /// Asks the kernel to transmit what is on the ring. In copy mode the
    /// kernel sends at most 32 frames per call, so this repeats while the
    /// ring drains, bounded by the ring's size.
    fn kick_tx(&mut self) {
        for _ in 0..(self.tx.size / 32 + 2) {
            if !self.tx.needs_wakeup() {
                return;
            }
            let before = self.tx.consumer().load(Ordering::Acquire);
            self.stats.tx_kicks += 1;
            // SAFETY: a zero-length sendto on our socket: no memory is
            // read (null buffer, length 0); it only starts transmission.
            let r = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if r < 0 {
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS)
                    | Some(libc::EINTR) => {}
                    _ => {
                        self.stats.tx_errors += 1;
                        return;
                    }
                }
            }
            let after = self.tx.consumer().load(Ordering::Acquire);
            if after == self.tx.local || after == before {
                return;
            }
        }
    }

    /// Sleeps in `poll(2)` on the socket (and the wake eventfd) up to
    /// `timeout`; true if the socket has frames.
    pub fn wait_readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        let mut pfd = [PollFd::new(&self.fd, PollFlags::IN)];
        let ts = timeout.map(timespec);
        Ok(rustix::event::poll(&mut pfd, ts.as_ref())? > 0)
    }
}

fn timespec(t: Duration) -> rustix::event::Timespec {
    rustix::event::Timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: i64::from(t.subsec_nanos()),
    }
}

impl Nic for XdpNic {
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
        let want = out.len().min(self.batch) as u32;
        let n = self.rx.available().min(want);
        let mut got = 0;
        for _ in 0..n {
            let i = self.rx.local;
            let d = self.rx.read(i);
            self.rx.local = i.wrapping_add(1);
            let b = d.addr / u64::from(FRAME);
            let off = d.addr % u64::from(FRAME);
            if b >= u64::from(self.bufs.count()) {
                self.stats.bad_desc += 1;
                continue;
            }
            let desc = Desc {
                buf: b as u32,
                off: off as u16,
                len: d.len.min(u32::from(u16::MAX)) as u16,
            };
            if d.len > u32::from(u16::MAX) || !self.bufs.valid(desc) {
                self.stats.rx_truncated += 1;
                if !self.free.push(desc.buf) {
                    self.stats.bad_desc += 1;
                }
                continue;
            }
            out[got] = desc;
            got += 1;
        }
        if n > 0 {
            self.rx.publish_consumer();
            self.stats.rx_frames += got as u64;
        }
        self.refill();
        got
    }

    fn alloc(&mut self, out: &mut [u32]) -> usize {
        if self.free.len() < out.len() {
            self.reap();
        }
        let mut n = 0;
        for slot in out.iter_mut() {
            let Some(b) = self.free.pop() else { break };
            *slot = b;
            n += 1;
        }
        n
    }

    fn send(&mut self, frames: &[Desc]) -> usize {
        self.reap();
        let mut room = self.tx.room() as usize;
        if room < frames.len() {
            // In copy mode the kernel transmits inside the kick: push what
            // is queued out before refusing frames (a refused TCP segment
            // waits for a retransmission).
            self.kick_tx();
            self.reap();
            room = self.tx.room() as usize;
        }
        if room < frames.len() {
            self.stats.tx_ring_full += 1;
        }
        let mut n = 0;
        for &d in frames.iter().take(room) {
            if !self.bufs.valid(d) {
                self.stats.bad_desc += 1;
                break;
            }
            let i = self.tx.local;
            self.tx.write(
                i,
                XdpDesc {
                    addr: u64::from(d.buf) * u64::from(FRAME) + u64::from(d.off),
                    len: u32::from(d.len),
                    options: XdpDescOptions::empty(),
                },
            );
            self.tx.local = i.wrapping_add(1);
            n += 1;
        }
        if n > 0 {
            self.tx.publish_producer();
            self.stats.tx_frames += n as u64;
            self.kick_tx();
        }
        n
    }

    fn release(&mut self, bufs: &[Desc]) {
        for d in bufs {
            if !self.free.push(d.buf) {
                self.stats.bad_desc += 1;
            }
        }
    }

    fn flush(&mut self) {
        self.reap();
        if self.tx.consumer().load(Ordering::Acquire) != self.tx.local {
            self.kick_tx();
        }
        self.refill();
    }

    /// A look at the receive ring's producer index: no system call.
    fn rx_ready(&mut self) -> bool {
        self.rx.available() > 0
    }

    /// The socket: readable when the kernel has filled a receive entry.
    fn wait_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        Some(std::os::fd::AsFd::as_fd(&self.fd))
    }

    /// Gives the kernel fill entries and transmit kicks first.
    fn wait_begin(&mut self) -> bool {
        self.flush();
        self.rx.available() == 0
    }

    fn wait(&mut self, timeout_ns: Option<u64>) {
        self.flush();
        if self.rx.available() > 0 {
            return;
        }
        // At most 10 ms so timers still run.
        let t = Duration::from_nanos(timeout_ns.unwrap_or(10_000_000).min(10_000_000));
        let wake = self.wake.fd();
        let mut pfd = [
            PollFd::new(&self.fd, PollFlags::IN),
            PollFd::new(&wake, PollFlags::IN),
        ];
        let ts = timespec(t);
        // An error (EINTR) just ends the wait early, which callers allow.
        let rc = rustix::event::poll(&mut pfd, Some(&ts)).unwrap_or(0);
        if rc > 0 && pfd[1].revents().contains(PollFlags::IN) {
            self.wake.drain();
        }
    }

    fn remote_waker(&self) -> Option<Arc<EventFd>> {
        Some(self.wake.clone())
    }

    fn driver_stats(&self) -> Option<String> {
        let k = sockopt::xdp_statistics(self.fd.as_fd())
            .map(|s| {
                format!(
                    ", kernel: rx_dropped {} rx_ring_full {:?} fill_ring_empty {:?} tx_invalid {}",
                    s.rx_dropped, s.rx_ring_full, s.rx_fill_ring_empty_descs, s.tx_invalid_descs
                )
            })
            .unwrap_or_default();
        Some(format!("{} {:?}{k}", self.describe(), self.stats))
    }
}
