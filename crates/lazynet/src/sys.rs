//! Operating-system helpers that need `unsafe`: CPU pinning and the CPU
//! count, a thread's CPU time, its scheduling class and nice value, the
//! time-stamp counter, the effective user, signals to child processes, the
//! futex calls a sleeping thread and its waker use, an eventfd for
//! waking a thread that sleeps in `poll(2)` on a device, and passing
//! descriptors between processes over a Unix socket (`SCM_RIGHTS`, through
//! `rustix`'s safe control-message API rather than by hand).
//!
//! **Owns:** every such call of the library and of the programs built on it
//! (the `lazynet` program and the lab), so that each is written, and its
//! safety argued, once. `std` offers none of them; `libc` is the thinnest
//! way to reach them.
//!
//! **May not touch:** anything networking. These are thin wrappers: each
//! returns whether it worked (or an [`std::io::Error`]) and never panics.

use std::io;
use std::sync::atomic::AtomicU32;

/// Pins the calling thread to CPU `cpu`. Best effort: false if the machine
/// has no such CPU or the kernel refused.
pub fn pin_thread(cpu: usize) -> bool {
    if cpu >= libc::CPU_SETSIZE as usize {
        return false;
    }
    // SAFETY: cpu_set_t is plain data (zeroed is the empty set); CPU_SET
    // writes inside it, `cpu` was checked against its size; the system call
    // only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// The CPU the calling thread runs on now, if the kernel says.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no memory effects; it returns -1 on error.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}

/// CPUs online. Not [`std::thread::available_parallelism`], which reports
/// the calling thread's affinity mask and so shrinks once it is pinned.
pub fn cpus_online() -> usize {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}

/// CPU time the calling thread has used, in nanoseconds
/// (`CLOCK_THREAD_CPUTIME_ID`); 0 if the clock cannot be read. Against wall
/// time it tells how much of a window a thread really had its core.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec we own.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// A thread's scheduling class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedClass {
    /// `SCHED_OTHER`: the kernel's fair share.
    Normal,
    /// `SCHED_FIFO` at this priority (1–99; root). It runs before every
    /// normal thread until it blocks; Linux still leaves normal threads 5%
    /// of the core (RT throttling).
    Fifo(u8),
}

/// Puts the calling thread in `class`.
pub fn set_sched_class(class: SchedClass) -> io::Result<()> {
    let (policy, prio) = match class {
        SchedClass::Normal => (libc::SCHED_OTHER, 0),
        SchedClass::Fifo(p) => (libc::SCHED_FIFO, i32::from(p.clamp(1, 99))),
    };
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: sched_setscheduler on the calling thread (pid 0) only reads
    // the param we own.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets the calling thread's nice value (−20 … 19; lowering it needs root).
/// Under the fair scheduler a nice −20 thread outweighs a nice-0 one 87:1.
pub fn set_thread_nice(nice: i32) -> io::Result<()> {
    // SAFETY: gettid and setpriority have no memory effects; they change
    // only the calling thread's nice value.
    let r = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice.clamp(-20, 19))
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads the time-stamp counter (`RDTSC`).
///
/// Not serializing: the CPU may execute it a few instructions early or late,
/// noise of tens of cycles, far below what it is used to measure (one
/// scheduler iteration, one packet's send path). Ticks to time, calibration
/// and a fallback for other architectures: [`crate::sched::clock::TscClock`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC reads a register and touches no memory; every x86_64 CPU
    // has it, and user mode may execute it unless the OS sets CR4.TSD, which
    // Linux does not. The intrinsic is `unsafe` only because all
    // `core::arch` intrinsics are declared so.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// True if the process runs as root (effective user 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no memory effects and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Whether a test or tool step that needs root may run: true as root;
/// otherwise it prints "skipped: needs root" and returns false, except
/// under `CI=true`, where root-only tests must run and a missing root
/// panics.
pub fn root_or_skip() -> bool {
    if is_root() {
        return true;
    }
    assert_ne!(
        std::env::var("CI").as_deref(),
        Ok("true"),
        "under CI=true root tests must run"
    );
    println!("skipped: needs root");
    false
}

/// Sends signal `sig` (e.g. `libc::SIGTERM`) to process `pid`; false if the
/// kernel refused or `pid` is not a valid process id.
pub fn signal(pid: u32, sig: i32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        // 0 and negative ids name process groups: never what is meant here.
        return false;
    }
    // SAFETY: kill has no memory effects.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// Sleeps while `word` holds `expected`, at most `timeout_ns` (`None`: no
/// limit), or until [`futex_wake`] on the same word. The word may lie in
/// memory shared with other processes (a `MAP_SHARED` region): the calls
/// use the shared futex operations. Returns false if it returned at once
/// because the word no longer held `expected`; true otherwise (woken,
/// timed out or interrupted: callers re-check their condition anyway).
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout_ns: Option<u64>) -> bool {
    let ts = timeout_ns.map(|ns| libc::timespec {
        tv_sec: (ns / 1_000_000_000).min(i64::MAX as u64) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a valid, aligned 4-byte atomic for the duration of
    // the call (a shared reference); FUTEX_WAIT only reads it. `tsp` is null
    // or points to `ts`, which outlives the call. A relative timeout is
    // what FUTEX_WAIT takes.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            tsp,
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    !(r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN))
}

/// Wakes up to `n` threads sleeping in [`futex_wait`] on `word`; returns how
/// many were woken.
pub fn futex_wake(word: &AtomicU32, n: i32) -> usize {
    // SAFETY: `word` is a valid, aligned 4-byte atomic (a shared
    // reference); FUTEX_WAKE does not access it beyond its address.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            n,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    r.max(0) as usize
}

/// An eventfd (non-blocking): a counter another thread adds to, to end a
/// `poll(2)` that includes it ([`EventFd::fd`]) — how a remote wake
/// reaches a thread sleeping on a device such as TAP. Through `rustix`'s
/// safe calls.
#[derive(Debug)]
pub struct EventFd(std::os::fd::OwnedFd);

impl EventFd {
    /// A new eventfd, its counter 0.
    pub fn new() -> io::Result<EventFd> {
        use rustix::event::EventfdFlags;
        Ok(EventFd(rustix::event::eventfd(
            0,
            EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC,
        )?))
    }

    /// An eventfd received from another process.
    pub fn from_fd(fd: std::os::fd::OwnedFd) -> EventFd {
        EventFd(fd)
    }

    /// Makes the eventfd readable (adds 1): a poller wakes. A full counter
    /// (`EAGAIN`) is already readable.
    pub fn signal(&self) {
        let _ = rustix::io::write(&self.0, &1u64.to_ne_bytes());
    }

    /// Resets the counter (after a poll found it readable; `EAGAIN` when it
    /// is 0).
    pub fn drain(&self) {
        let mut v = [0u8; 8];
        let _ = rustix::io::read(&self.0, &mut v);
    }

    /// The descriptor, to poll beside others. Stays owned here.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.0)
    }
}

/// Most descriptors [`recv_with_fds`] takes with one message.
pub const MAX_FDS: usize = 4;

/// Sends `bytes` on the Unix socket `sock` with the descriptors `fds`
/// (`SCM_RIGHTS`, at most [`MAX_FDS`]): how a process hands another its
/// communication area (a memfd) and a doorbell (an eventfd). `rustix`
/// builds the control message, safely. Returns the bytes sent.
pub fn send_with_fds(
    sock: impl std::os::fd::AsFd,
    bytes: &[u8],
    fds: &[std::os::fd::BorrowedFd<'_>],
) -> io::Result<usize> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    if fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "too many descriptors",
        ));
    }
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "control message too large",
        ));
    }
    let iov = [io::IoSlice::new(bytes)];
    Ok(rustix::net::sendmsg(
        sock,
        &iov,
        &mut control,
        SendFlags::NOSIGNAL,
    )?)
}

/// Receives one message from the Unix socket `sock` into `buf`, with the
/// descriptors sent beside it, up to [`MAX_FDS`]. A message that carried
/// more descriptors than that, or more bytes than `buf` holds, is refused
/// (`InvalidData`) and every descriptor it carried is closed: a peer cannot
/// make this process keep descriptors it did not ask for. `Ok((0, []))` is
/// the end of the stream.
pub fn recv_with_fds(
    sock: impl std::os::fd::AsFd,
    buf: &mut [u8],
) -> io::Result<(usize, Vec<std::os::fd::OwnedFd>)> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut iov = [io::IoSliceMut::new(buf)];
    let got = rustix::net::recvmsg(sock, &mut iov, &mut control, RecvFlags::CMSG_CLOEXEC)?;
    let mut fds = Vec::new();
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = msg {
            fds.extend(rights);
        }
    }
    if got
        .flags
        .intersects(ReturnFlags::CTRUNC | ReturnFlags::TRUNC)
    {
        // `fds` (whatever arrived) is dropped, so closed, here.
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "message or descriptors truncated",
        ));
    }
    Ok((got.bytes, fds))
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixDatagram;

    use super::*;

    #[test]
    fn thread_cpu_time_moves_with_work() {
        let t0 = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        assert!(thread_cpu_ns() > t0, "{x}");
    }

    #[test]
    fn pinning_to_a_cpu_that_does_not_exist_fails() {
        assert!(!pin_thread(libc::CPU_SETSIZE as usize));
        assert!(cpus_online() >= 1);
    }

    #[test]
    fn signals_to_process_groups_are_refused() {
        assert!(!signal(0, 0));
        assert!(!signal(u32::MAX, 0));
        // Signal 0 checks that the process exists: this one does.
        assert!(signal(std::process::id(), 0));
    }

    /// Descriptors of this process open on memfds named `name` (other
    /// tests open descriptors meanwhile, so only these are counted).
    fn open_memfds(name: &str) -> usize {
        let want = format!("/memfd:{name} ");
        std::fs::read_dir("/proc/self/fd").map_or(0, |d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|l| l.to_string_lossy().starts_with(&want))
                .count()
        })
    }

    #[test]
    fn a_descriptor_passed_over_a_socket_reaches_the_same_file() {
        let (a, b) = UnixDatagram::pair().unwrap();
        let mut f = memfd::MemfdOptions::default()
            .create("pass")
            .unwrap()
            .into_file();
        f.write_all(b"area").unwrap();
        assert_eq!(send_with_fds(&a, b"hello", &[f.as_fd()]).unwrap(), 5);
        let mut buf = [0u8; 64];
        let (n, fds) = recv_with_fds(&b, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        assert_eq!(fds.len(), 1);
        let mut g = std::fs::File::from(fds.into_iter().next().unwrap());
        g.seek(SeekFrom::Start(0)).unwrap();
        let mut s = String::new();
        g.read_to_string(&mut s).unwrap();
        assert_eq!(s, "area");
    }

    #[test]
    fn a_message_too_long_for_the_buffer_is_refused_and_its_descriptors_closed() {
        let (a, b) = UnixDatagram::pair().unwrap();
        let name = "lazynet-truncated-message";
        let m = || {
            memfd::MemfdOptions::default()
                .create(name)
                .unwrap()
                .into_file()
        };
        let (f1, f2) = (m(), m());
        assert_eq!(open_memfds(name), 2);
        send_with_fds(&a, &[7u8; 100], &[f1.as_fd(), f2.as_fd()]).unwrap();
        let mut small = [0u8; 10];
        let e = recv_with_fds(&b, &mut small).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert_eq!(open_memfds(name), 2, "the received copies were closed");
        // More descriptors than allowed are refused on the sending side.
        let many: Vec<_> = (0..=MAX_FDS).map(|_| f1.as_fd()).collect();
        assert!(send_with_fds(&a, b"x", &many).is_err());
    }
}
