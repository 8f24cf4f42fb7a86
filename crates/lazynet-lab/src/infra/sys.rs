//! The Linux system calls the lab's baselines need and `std` lacks:
//! batched UDP send and receive (`sendmmsg`, `recvmmsg`), `sendfile` with
//! `UDP_SEGMENT`, socket options, a private network namespace, and the
//! `ioctl`s that configure an interface in it (the TAP device is opened by
//! `lazynet::nic::tap::open_tap_fd`). Linux at its best is what lazynet is
//! compared with, so the baselines use these calls directly; plain sockets
//! are `std::net::UdpSocket`.
//!
//! **Owns:** every `unsafe` block of the lab (the crate denies `unsafe_code`
//! elsewhere). Each wrapper is safe to call: it checks lengths, keeps the
//! pointers it hands the kernel alive for the call, and returns an
//! [`io::Error`] instead of a raw return code. OS helpers shared with the
//! library (pinning, thread CPU time, scheduling class, TSC, signals) are
//! in `lazynet::sys`.
//!
//! **May not touch:** anything beyond the descriptors and buffers a caller
//! passes; no global state.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, BorrowedFd};

fn check(r: libc::c_int) -> io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

const SOCKADDR_LEN: libc::socklen_t = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;

/// Sets an integer socket option (`SO_RCVBUF`, `UDP_SEGMENT`, …).
pub fn set_int_option(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the option value is one c_int we own, with its exact length.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
}

/// `sendfile(2)`: up to `len` bytes of `file` from `*offset` to `out`;
/// advances `*offset` by what was sent.
pub fn sendfile(
    out: BorrowedFd<'_>,
    file: BorrowedFd<'_>,
    offset: &mut i64,
    len: usize,
) -> io::Result<usize> {
    let mut off: libc::off_t = *offset;
    // SAFETY: `off` is a valid in/out offset; both descriptors are open for
    // the call (borrowed).
    let r = unsafe { libc::sendfile(out.as_raw_fd(), file.as_raw_fd(), &mut off, len) };
    let n = usize::try_from(r).map_err(|_| io::Error::last_os_error())?;
    *offset = off;
    Ok(n)
}

/// Batched UDP sends with `sendmmsg(2)`: up to `capacity` datagrams per
/// call, each one slice, to the connected peer, to a fixed destination, or
/// each to its own ([`Self::send_each`]).
pub struct MmsgSender {
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    dst: Option<libc::sockaddr_in>,
    /// Per-message destinations of [`Self::send_each`].
    names: Vec<libc::sockaddr_in>,
}

impl MmsgSender {
    /// Room for `capacity` datagrams per call; `dst` for an unconnected
    /// socket.
    pub fn new(capacity: usize, dst: Option<SocketAddrV4>) -> Self {
        let capacity = capacity.max(1);
        MmsgSender {
            iov: (0..capacity)
                .map(|_| libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                })
                .collect(),
            // SAFETY: mmsghdr is a plain C struct; all-zero is a valid value
            // (null pointers, zero lengths).
            msgs: (0..capacity)
                .map(|_| unsafe { std::mem::zeroed() })
                .collect(),
            dst: dst.map(sockaddr),
            names: vec![sockaddr(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0)); capacity],
        }
    }

    /// Sends `bufs` (at most the capacity given to [`Self::new`]; the
    /// rest are ignored) with one call and `flags` (e.g. `MSG_DONTWAIT`). Returns how
    /// many the kernel took, from the first; their lengths are
    /// [`Self::sent_len`].
    pub fn send(
        &mut self,
        fd: BorrowedFd<'_>,
        bufs: &[&[u8]],
        flags: libc::c_int,
    ) -> io::Result<usize> {
        let n = bufs.len().min(self.msgs.len());
        let name: *mut libc::c_void = match self.dst.as_mut() {
            Some(sa) => (sa as *mut libc::sockaddr_in).cast(),
            None => std::ptr::null_mut(),
        };
        for (i, b) in bufs[..n].iter().enumerate() {
            self.set(i, b, name);
        }
        self.submit(fd, n, flags)
    }

    /// Like [`Self::send`] on an unconnected socket, each datagram to its
    /// own destination (`dsts[i]` for `bufs[i]`; the shorter of the two
    /// bounds the batch).
    pub fn send_each(
        &mut self,
        fd: BorrowedFd<'_>,
        bufs: &[&[u8]],
        dsts: &[SocketAddrV4],
        flags: libc::c_int,
    ) -> io::Result<usize> {
        let n = bufs.len().min(dsts.len()).min(self.msgs.len());
        for i in 0..n {
            self.names[i] = sockaddr(dsts[i]);
            let name = (&mut self.names[i] as *mut libc::sockaddr_in).cast();
            self.set(i, bufs[i], name);
        }
        self.submit(fd, n, flags)
    }

    /// Message `i`: the one slice `b`, to `name` (null: the connected peer).
    fn set(&mut self, i: usize, b: &[u8], name: *mut libc::c_void) {
        // The kernel only reads through iov_base for a send.
        self.iov[i] = libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        };
        let m = &mut self.msgs[i];
        m.msg_hdr.msg_iov = &mut self.iov[i];
        m.msg_hdr.msg_iovlen = 1;
        m.msg_hdr.msg_name = name;
        m.msg_hdr.msg_namelen = if name.is_null() { 0 } else { SOCKADDR_LEN };
        m.msg_len = 0;
    }

    /// One `sendmmsg` of the first `n` messages [`Self::set`] built.
    fn submit(&mut self, fd: BorrowedFd<'_>, n: usize, flags: libc::c_int) -> io::Result<usize> {
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: msgs[..n] were set for this call: they point at iov[..n]
        // and at `dst` or `names` (ours), and iov points into the caller's
        // slices, borrowed for the call that built them and this one; the
        // kernel only reads them, and nothing moves meanwhile.
        let r = unsafe {
            libc::sendmmsg(
                fd.as_raw_fd(),
                self.msgs.as_mut_ptr(),
                n as libc::c_uint,
                flags,
            )
        };
        usize::try_from(r).map_err(|_| io::Error::last_os_error())
    }

    /// Bytes the kernel took of message `i` of the last [`Self::send`].
    pub fn sent_len(&self, i: usize) -> u32 {
        self.msgs.get(i).map_or(0, |m| m.msg_len)
    }
}

/// Batched UDP receives with `recvmmsg(2)` into buffers of its own.
pub struct MmsgReceiver {
    bufs: Vec<[u8; 2048]>,
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    /// The senders' addresses of the last [`Self::recv`].
    names: Vec<libc::sockaddr_in>,
}

impl MmsgReceiver {
    /// Room for `batch` datagrams of up to 2048 bytes per call.
    pub fn new(batch: usize) -> Self {
        let batch = batch.max(1);
        MmsgReceiver {
            bufs: vec![[0; 2048]; batch],
            iov: (0..batch)
                .map(|_| libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                })
                .collect(),
            // SAFETY: mmsghdr is a plain C struct; all-zero is a valid value.
            msgs: (0..batch).map(|_| unsafe { std::mem::zeroed() }).collect(),
            names: vec![sockaddr(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0)); batch],
        }
    }

    /// Like [`Self::recv`], returning how many datagrams came; they are
    /// [`Self::datagram`] and [`Self::sender`] `0..n`.
    pub fn recv_n(&mut self, fd: BorrowedFd<'_>, flags: libc::c_int) -> io::Result<usize> {
        Ok(self.recv(fd, flags)?.count())
    }

    /// Datagram `i` of the last receive (empty if there was none).
    pub fn datagram(&self, i: usize) -> &[u8] {
        match (self.msgs.get(i), self.bufs.get(i)) {
            (Some(m), Some(b)) => &b[..(m.msg_len as usize).min(b.len())],
            _ => &[],
        }
    }

    /// The sender of datagram `i` of the last [`Self::recv`] (IPv4).
    pub fn sender(&self, i: usize) -> Option<SocketAddrV4> {
        let sa = self.names.get(i)?;
        Some(SocketAddrV4::new(
            std::net::Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)),
            u16::from_be(sa.sin_port),
        ))
    }

    /// One `recvmmsg` with `flags` (e.g. `MSG_WAITFORONE`); returns the
    /// datagrams received (each truncated to 2048 bytes).
    pub fn recv(
        &mut self,
        fd: BorrowedFd<'_>,
        flags: libc::c_int,
    ) -> io::Result<impl Iterator<Item = &[u8]>> {
        for (((b, iov), m), name) in self
            .bufs
            .iter_mut()
            .zip(&mut self.iov)
            .zip(&mut self.msgs)
            .zip(&mut self.names)
        {
            *iov = libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            };
            m.msg_hdr.msg_iov = iov;
            m.msg_hdr.msg_iovlen = 1;
            m.msg_hdr.msg_name = (name as *mut libc::sockaddr_in).cast();
            m.msg_hdr.msg_namelen = SOCKADDR_LEN;
            m.msg_len = 0;
        }
        // SAFETY: msgs point at iov, which point into `bufs`, and at
        // `names`; all ours, alive and unmoved during the call; the kernel
        // writes at most iov_len bytes into each buffer and at most
        // msg_namelen into each name.
        let r = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                self.msgs.as_mut_ptr(),
                self.msgs.len() as libc::c_uint,
                flags,
                std::ptr::null_mut(),
            )
        };
        let n = usize::try_from(r).map_err(|_| io::Error::last_os_error())?;
        Ok(self.msgs[..n]
            .iter()
            .zip(&self.bufs)
            .map(|(m, b)| &b[..(m.msg_len as usize).min(b.len())]))
    }
}

/// Moves the calling thread into a new, empty network namespace.
pub fn unshare_net() -> io::Result<()> {
    // SAFETY: no memory effects; changes only this thread's namespaces.
    check(unsafe { libc::unshare(libc::CLONE_NEWNET) })
}

fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= ifr.ifr_name.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "interface name too long",
        ));
    }
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(ifr)
}

fn ioctl_ifreq(fd: BorrowedFd<'_>, req: libc::Ioctl, ifr: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: every request passed here reads or writes one ifreq, which we
    // own for the call.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), req, ifr as *mut libc::ifreq) })
}

/// Interface settings made with `ioctl`s on any socket (`ctl`).
pub enum IfSetting {
    /// `SIOCSIFMTU`.
    Mtu(i32),
    /// `SIOCSIFTXQLEN`: the transmit queue's length in frames.
    TxQueueLen(i32),
    /// `SIOCSIFADDR`.
    Addr(Ipv4Addr),
    /// `SIOCSIFNETMASK`.
    Netmask(Ipv4Addr),
    /// Adds these `IFF_*` flags (`SIOCGIFFLAGS`, then `SIOCSIFFLAGS`).
    Flags(libc::c_int),
}

/// Applies `setting` to interface `name`.
pub fn if_set(ctl: BorrowedFd<'_>, name: &str, setting: IfSetting) -> io::Result<()> {
    let mut ifr = ifreq(name)?;
    match setting {
        IfSetting::Mtu(m) => {
            ifr.ifr_ifru.ifru_mtu = m;
            ioctl_ifreq(ctl, libc::SIOCSIFMTU, &mut ifr)
        }
        IfSetting::TxQueueLen(q) => {
            // ifr_qlen shares the int slot of the union with the metric.
            ifr.ifr_ifru.ifru_metric = q;
            ioctl_ifreq(ctl, libc::SIOCSIFTXQLEN, &mut ifr)
        }
        IfSetting::Addr(a) => set_addr(ctl, libc::SIOCSIFADDR, &mut ifr, a),
        IfSetting::Netmask(a) => set_addr(ctl, libc::SIOCSIFNETMASK, &mut ifr, a),
        IfSetting::Flags(add) => {
            ioctl_ifreq(ctl, libc::SIOCGIFFLAGS, &mut ifr)?;
            // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
            let flags = unsafe { ifr.ifr_ifru.ifru_flags };
            ifr.ifr_ifru.ifru_flags = flags | add as libc::c_short;
            ioctl_ifreq(ctl, libc::SIOCSIFFLAGS, &mut ifr)
        }
    }
}

/// An address setting (`req`: `SIOCSIFADDR`, `SIOCSIFNETMASK`) of `a`.
fn set_addr(
    ctl: BorrowedFd<'_>,
    req: libc::Ioctl,
    ifr: &mut libc::ifreq,
    a: Ipv4Addr,
) -> io::Result<()> {
    let sa = sockaddr(SocketAddrV4::new(a, 0));
    // SAFETY: a sockaddr_in (16 bytes) fits the union's sockaddr
    // slot (16 bytes); write_unaligned needs no alignment.
    unsafe {
        std::ptr::write_unaligned(
            (&mut ifr.ifr_ifru.ifru_addr as *mut libc::sockaddr).cast::<libc::sockaddr_in>(),
            sa,
        )
    };
    ioctl_ifreq(ctl, req, ifr)
}

/// An io_uring with buffers of its own: the only memory operations it
/// hands the kernel are its buffers, each held (not writable, not reused)
/// while an operation on it is in flight, so every call is safe.
///
/// A completion's user data is `buffer << 32 | tag` (buffer `u32::MAX`:
/// none); [`Uring::complete`] returns `(tag, buffer, result)`.
pub struct Uring {
    ring: io_uring::IoUring,
    bufs: Vec<Box<[u8]>>,
    inflight: Vec<u32>,
    registered: bool,
}

/// No buffer.
pub const NO_BUF: u32 = u32::MAX;

impl Uring {
    /// A ring of `entries`, with `nbufs` buffers of `size` bytes; with
    /// `sqpoll_cpu`, a kernel thread on that CPU polls the submission queue
    /// (no system call per submission).
    pub fn new(
        entries: u32,
        nbufs: usize,
        size: usize,
        sqpoll_cpu: Option<u32>,
    ) -> io::Result<Uring> {
        let mut b = io_uring::IoUring::builder();
        if let Some(c) = sqpoll_cpu {
            b.setup_sqpoll(2000).setup_sqpoll_cpu(c);
        }
        let ring = b.build(entries)?;
        Ok(Uring {
            ring,
            bufs: (0..nbufs)
                .map(|_| vec![0u8; size].into_boxed_slice())
                .collect(),
            inflight: vec![0; nbufs],
            registered: false,
        })
    }

    /// Registers the buffers with the kernel (for `write_fixed`).
    pub fn register_buffers(&mut self) -> io::Result<()> {
        let iov: Vec<libc::iovec> = self
            .bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            })
            .collect();
        // SAFETY: the iovecs name our boxed buffers, which live (and never
        // move: boxed slices) as long as the ring; the kernel unregisters
        // them when the ring is dropped, before the buffers are (field
        // order: `ring` first).
        unsafe { self.ring.submitter().register_buffers(&iov)? };
        self.registered = true;
        Ok(())
    }

    /// Buffer `i` for writing, unless an operation holds it.
    pub fn buf_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        if self.inflight.get(i).copied()? > 0 {
            return None;
        }
        self.bufs.get_mut(i).map(|b| &mut b[..])
    }

    /// Buffer `i`, unless an operation holds it.
    pub fn buf(&self, i: usize) -> Option<&[u8]> {
        if self.inflight.get(i).copied()? > 0 {
            return None;
        }
        self.bufs.get(i).map(|b| &b[..])
    }

    fn push(&mut self, e: io_uring::squeue::Entry, buf: u32) -> io::Result<()> {
        // SAFETY: the entry's memory, if any, is buffer `buf`, held (see
        // `inflight`) until its completion is taken in `complete`; file
        // descriptors are the caller's and a stale one only fails the
        // operation.
        let r = unsafe { self.ring.submission().push(&e) };
        match r {
            Ok(()) => {
                if let Some(n) = self.inflight.get_mut(buf as usize) {
                    *n += 1;
                }
                Ok(())
            }
            Err(_) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "submission queue full",
            )),
        }
    }

    fn ud(buf: u32, tag: u32) -> u64 {
        u64::from(buf) << 32 | u64::from(tag)
    }

    fn check_buf(&self, i: usize, len: usize) -> io::Result<()> {
        match self.bufs.get(i) {
            Some(b) if len <= b.len() => Ok(()),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no such buffer range",
            )),
        }
    }

    /// Queues a send of `len` bytes of buffer `i` on socket `fd`.
    pub fn send(&mut self, fd: BorrowedFd<'_>, i: usize, len: usize, tag: u32) -> io::Result<()> {
        self.check_buf(i, len)?;
        let p = self.bufs[i].as_ptr();
        let e = io_uring::opcode::Send::new(io_uring::types::Fd(fd.as_raw_fd()), p, len as u32)
            .build()
            .user_data(Self::ud(i as u32, tag));
        self.push(e, i as u32)
    }

    /// Queues a write of `len` bytes of registered buffer `i` to `fd`.
    pub fn write_fixed(
        &mut self,
        fd: BorrowedFd<'_>,
        i: usize,
        len: usize,
        tag: u32,
    ) -> io::Result<()> {
        self.check_buf(i, len)?;
        if !self.registered {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "buffers not registered",
            ));
        }
        let p = self.bufs[i].as_ptr();
        let e = io_uring::opcode::WriteFixed::new(
            io_uring::types::Fd(fd.as_raw_fd()),
            p,
            len as u32,
            i as u16,
        )
        .offset(u64::MAX)
        .build()
        .user_data(Self::ud(i as u32, tag));
        self.push(e, i as u32)
    }

    /// Queues a receive of up to `len` bytes into buffer `i`.
    pub fn recv(&mut self, fd: BorrowedFd<'_>, i: usize, len: usize, tag: u32) -> io::Result<()> {
        self.check_buf(i, len)?;
        let p = self.bufs[i].as_mut_ptr();
        let e = io_uring::opcode::Recv::new(io_uring::types::Fd(fd.as_raw_fd()), p, len as u32)
            .build()
            .user_data(Self::ud(i as u32, tag));
        self.push(e, i as u32)
    }

    /// Queues an accept on listener `fd` (the result is the new descriptor).
    pub fn accept(&mut self, fd: BorrowedFd<'_>, tag: u32) -> io::Result<()> {
        let e = io_uring::opcode::Accept::new(
            io_uring::types::Fd(fd.as_raw_fd()),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
        .flags(libc::SOCK_CLOEXEC)
        .build()
        .user_data(Self::ud(NO_BUF, tag));
        self.push(e, NO_BUF)
    }

    /// Submits what is queued and waits for at least `want` completions.
    pub fn submit(&mut self, want: usize) -> io::Result<usize> {
        self.ring.submit_and_wait(want)
    }

    /// Takes the completions that are there: `(tag, buffer, result)`.
    pub fn complete(&mut self, out: &mut Vec<(u32, u32, i32)>) {
        for c in self.ring.completion() {
            let ud = c.user_data();
            let buf = (ud >> 32) as u32;
            if let Some(n) = self.inflight.get_mut(buf as usize) {
                *n = n.saturating_sub(1);
            }
            out.push((ud as u32, buf, c.result()));
        }
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        // The kernel cancels what is still in flight when the ring goes,
        // asynchronously: a buffer it may still touch is leaked, never freed.
        if self.inflight.iter().any(|&n| n > 0) {
            std::mem::forget(std::mem::take(&mut self.bufs));
        }
    }
}

/// Takes ownership of a descriptor the kernel returned (an accepted
/// socket from [`Uring::accept`]); `None` if `fd` is negative.
pub fn owned_fd(fd: i32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: a non-negative result of an accept completion is a new
    // descriptor the kernel gave this process and nobody else owns.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mmsg_batches_go_round_loopback() {
        use std::net::UdpSocket;
        use std::os::fd::AsFd;
        let rx = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let tx = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let mut s = MmsgSender::new(4, None);
        let bufs: [&[u8]; 3] = [b"one", b"two!", b"three"];
        assert_eq!(s.send(tx.as_fd(), &bufs, 0).unwrap(), 3);
        assert_eq!(s.sent_len(2), 5);
        let mut r = MmsgReceiver::new(8);
        let mut got = Vec::new();
        while got.len() < 3 {
            got.extend(
                r.recv(rx.as_fd(), libc::MSG_WAITFORONE)
                    .unwrap()
                    .map(<[u8]>::to_vec),
            );
        }
        assert_eq!(got, [b"one".to_vec(), b"two!".to_vec(), b"three".to_vec()]);
    }

    #[test]
    fn long_interface_names_are_refused() {
        assert!(ifreq("a-name-longer-than-sixteen").is_err());
    }
}
