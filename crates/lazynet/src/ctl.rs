//! The lazynet daemon's control socket (between `stack`, whose attached
//! stacks speak it, and `daemon`, which serves it): a Unix `SOCK_SEQPACKET` socket (one
//! message per record, so no framing; the peer's credentials come with the
//! connection), and the fixed little-endian messages on it.
//!
//! **Owns:** the socket calls (through `rustix`, safely) and the codec.
//!
//! **May not touch:** areas, rings or the NIC. Everything per socket
//! (binding, listening, connecting) travels on the area's command ring;
//! this socket carries only the attach handshake, statistics, and the
//! application's lifetime: when it closes, for whatever reason, the daemon
//! reclaims everything the application had.
//!
//! | message | from | bytes |
//! |---|---|---|
//! | `Hello` | app | magic, version, kind 1 |
//! | `Welcome` | daemon | kind 2, app id, address, prefix, MAC, MTU, ephemeral ports; with the area's memfd and the daemon bell's eventfd |
//! | `Refused` | daemon | kind 3, a [`CtlError`] code |
//! | `StatsRequest` | anyone allowed to connect | kind 4 |
//! | `Stats` | daemon | kind 5, then UTF-8 text |
//! | `HelloOffload` | MemNet client | kind 6: attach to the offload placement (the daemon answers `Welcome` with a job area's memfd and its eventfd) |
//!
//! Every message starts with the magic `"LZCT"` and the version; a
//! message that does not decode is answered with `Refused(Garbage)` and
//! the connection closed.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

/// `"LZCT"`.
pub const CTL_MAGIC: u32 = u32::from_le_bytes(*b"LZCT");
/// Protocol version.
pub const CTL_VERSION: u32 = 3;
/// Largest message (the statistics text).
pub const MAX_MSG: usize = 64 * 1024;

/// What the daemon tells an attaching application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Welcome {
    /// The application's id in the daemon (its counters' name).
    pub app_id: u32,
    /// The daemon's (and so the application's) address.
    pub addr: Ipv4Addr,
    /// Its prefix length.
    pub prefix_len: u8,
    /// The router beyond the subnet, if any.
    pub gateway: Option<Ipv4Addr>,
    /// The NIC's MAC address.
    pub mac: [u8; 6],
    /// The NIC's MTU.
    pub mtu: u16,
    /// First port of the application's ephemeral range.
    pub eph_first: u16,
    /// Last port of it.
    pub eph_last: u16,
}

/// Why the daemon refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum CtlError {
    /// The message did not decode.
    Garbage = 1,
    /// Too many applications attached.
    Full = 2,
    /// The daemon could not build an area (memory).
    NoMemory = 3,
    /// A version this daemon does not speak.
    Version = 4,
    /// The daemon does not run that placement.
    Placement = 5,
}

impl CtlError {
    fn from_code(c: u32) -> CtlError {
        match c {
            2 => CtlError::Full,
            3 => CtlError::NoMemory,
            4 => CtlError::Version,
            5 => CtlError::Placement,
            _ => CtlError::Garbage,
        }
    }
}

/// One control message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    /// An application asks to attach.
    Hello,
    /// Attached (the descriptors travel beside it).
    Welcome(Welcome),
    /// Refused.
    Refused(CtlError),
    /// Asks for the per-application counters.
    StatsRequest,
    /// The counters, as text.
    Stats(String),
    /// A MemNet client asks to attach (offload placement).
    HelloOffload,
}

const HDR: usize = 12;

impl Msg {
    /// The message's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(40);
        b.extend_from_slice(&CTL_MAGIC.to_le_bytes());
        b.extend_from_slice(&CTL_VERSION.to_le_bytes());
        let kind: u32 = match self {
            Msg::Hello => 1,
            Msg::Welcome(_) => 2,
            Msg::Refused(_) => 3,
            Msg::StatsRequest => 4,
            Msg::Stats(_) => 5,
            Msg::HelloOffload => 6,
        };
        b.extend_from_slice(&kind.to_le_bytes());
        match self {
            Msg::Hello | Msg::StatsRequest | Msg::HelloOffload => {}
            Msg::Welcome(w) => {
                b.extend_from_slice(&w.app_id.to_le_bytes());
                b.extend_from_slice(&w.addr.octets());
                b.push(w.prefix_len);
                b.extend_from_slice(&w.gateway.unwrap_or(Ipv4Addr::UNSPECIFIED).octets());
                b.extend_from_slice(&w.mac);
                b.extend_from_slice(&w.mtu.to_le_bytes());
                b.extend_from_slice(&w.eph_first.to_le_bytes());
                b.extend_from_slice(&w.eph_last.to_le_bytes());
            }
            Msg::Refused(e) => b.extend_from_slice(&(*e as u32).to_le_bytes()),
            Msg::Stats(t) => {
                let t = t.as_bytes();
                b.extend_from_slice(&t[..t.len().min(MAX_MSG - HDR)]);
            }
        }
        b
    }

    /// Decodes one message; any other bytes are an error, never a panic.
    pub fn decode(b: &[u8]) -> Result<Msg, CtlError> {
        let u32_at = |i: usize| -> Result<u32, CtlError> {
            b.get(i..i + 4)
                .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
                .ok_or(CtlError::Garbage)
        };
        if u32_at(0)? != CTL_MAGIC {
            return Err(CtlError::Garbage);
        }
        if u32_at(4)? != CTL_VERSION {
            return Err(CtlError::Version);
        }
        let body = &b[HDR.min(b.len())..];
        let exact = |n: usize| {
            if body.len() == n {
                Ok(())
            } else {
                Err(CtlError::Garbage)
            }
        };
        match u32_at(8)? {
            1 => exact(0).map(|_| Msg::Hello),
            4 => exact(0).map(|_| Msg::StatsRequest),
            6 => exact(0).map(|_| Msg::HelloOffload),
            2 => {
                exact(25)?;
                let u16_at = |i: usize| u16::from_le_bytes([body[i], body[i + 1]]);
                let prefix_len = body[8];
                if prefix_len > 32 {
                    return Err(CtlError::Garbage);
                }
                let gateway = Ipv4Addr::new(body[9], body[10], body[11], body[12]);
                let mut mac = [0u8; 6];
                mac.copy_from_slice(&body[13..19]);
                Ok(Msg::Welcome(Welcome {
                    app_id: u32::from_le_bytes([body[0], body[1], body[2], body[3]]),
                    addr: Ipv4Addr::new(body[4], body[5], body[6], body[7]),
                    prefix_len,
                    gateway: (!gateway.is_unspecified()).then_some(gateway),
                    mac,
                    mtu: u16_at(19),
                    eph_first: u16_at(21),
                    eph_last: u16_at(23),
                }))
            }
            3 => {
                exact(4)?;
                Ok(Msg::Refused(CtlError::from_code(u32_at(HDR)?)))
            }
            5 => std::str::from_utf8(body)
                .map(|s| Msg::Stats(s.to_string()))
                .map_err(|_| CtlError::Garbage),
            _ => Err(CtlError::Garbage),
        }
    }
}

/// A new `SOCK_SEQPACKET` Unix socket.
fn seqpacket() -> io::Result<OwnedFd> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    Ok(rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// Binds and listens on `path` (an old socket file there is replaced),
/// its file mode set to `mode`: who may attach.
pub fn listen(path: &Path, mode: u32) -> io::Result<OwnedFd> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if m.file_type().is_socket() {
            std::fs::remove_file(path)?;
        }
    }
    let fd = seqpacket()?;
    rustix::net::bind(&fd, &rustix::net::SocketAddrUnix::new(path)?)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    rustix::net::listen(&fd, 64)?;
    Ok(fd)
}

/// Accepts one connection (non-blocking: `WouldBlock` when none waits).
pub fn accept(listener: impl AsFd) -> io::Result<OwnedFd> {
    use rustix::net::SocketFlags;
    Ok(rustix::net::accept_with(
        listener,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
    )?)
}

/// Makes `conn`'s calls non-blocking (`WouldBlock` instead of waiting).
pub fn set_nonblocking(conn: impl AsFd, on: bool) -> io::Result<()> {
    Ok(rustix::io::ioctl_fionbio(conn, on)?)
}

/// The process id of a connection's peer (from the kernel, not the peer).
pub fn peer_pid(conn: impl AsFd) -> Option<u32> {
    rustix::net::sockopt::socket_peercred(conn)
        .ok()
        .map(|c| c.pid.as_raw_nonzero().get() as u32)
}

/// Whether the other end of control connection `conn` has hung up (the
/// daemon, or the application, exited or was killed): one `poll` that does
/// not wait. A connection with a message waiting is not gone.
pub fn peer_gone(conn: impl AsFd) -> bool {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(&conn, PollFlags::RDHUP)];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match poll(&mut fds, Some(&zero)) {
        Ok(0) => false,
        Ok(_) => fds[0]
            .revents()
            .intersects(PollFlags::HUP | PollFlags::RDHUP | PollFlags::ERR),
        Err(_) => true,
    }
}

/// Connects to the daemon at `path` (blocking).
pub fn connect(path: &Path) -> io::Result<OwnedFd> {
    let fd = seqpacket()?;
    rustix::net::connect(&fd, &rustix::net::SocketAddrUnix::new(path)?)?;
    Ok(fd)
}

/// Sends one message with descriptors.
pub fn send(conn: impl AsFd, m: &Msg, fds: &[std::os::fd::BorrowedFd<'_>]) -> io::Result<()> {
    crate::sys::send_with_fds(conn, &m.encode(), fds).map(|_| ())
}

/// A message as received (it may not have decoded) and its descriptors.
pub type Received = (Result<Msg, CtlError>, Vec<OwnedFd>);

/// Receives one message (and up to [`crate::sys::MAX_FDS`] descriptors);
/// `Ok(None)` when the peer closed.
pub fn recv(conn: impl AsFd) -> io::Result<Option<Received>> {
    let mut buf = vec![0u8; MAX_MSG];
    recv_with(conn, &mut buf)
}

/// [`recv`] into the caller's buffer (the daemon's: a message longer than
/// it is refused as `InvalidData`, and its descriptors closed).
pub fn recv_with(conn: impl AsFd, buf: &mut [u8]) -> io::Result<Option<Received>> {
    let (n, fds) = crate::sys::recv_with_fds(conn, buf)?;
    if n == 0 && fds.is_empty() {
        return Ok(None);
    }
    Ok(Some((Msg::decode(&buf[..n]), fds)))
}

/// Asks the daemon at `path` for its statistics text.
pub fn stats(path: &Path) -> io::Result<String> {
    let c = connect(path)?;
    send(&c, &Msg::StatsRequest, &[])?;
    match recv(&c)? {
        Some((Ok(Msg::Stats(t)), _)) => Ok(t),
        other => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unexpected answer {other:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_message_round_trips() {
        let w = Welcome {
            app_id: 7,
            addr: Ipv4Addr::new(10, 0, 0, 2),
            prefix_len: 24,
            gateway: Some(Ipv4Addr::new(10, 0, 0, 1)),
            mac: [2, 0, 0, 0, 0, 9],
            mtu: 1500,
            eph_first: 49152,
            eph_last: 49663,
        };
        for m in [
            Msg::Hello,
            Msg::Welcome(w),
            Msg::Refused(CtlError::Full),
            Msg::StatsRequest,
            Msg::Stats("app 1: delivered 3\n".into()),
            Msg::HelloOffload,
            Msg::Refused(CtlError::Placement),
        ] {
            assert_eq!(Msg::decode(&m.encode()), Ok(m));
        }
    }

    #[test]
    fn wrong_magic_version_kind_or_length_is_refused() {
        let mut b = Msg::Hello.encode();
        b[0] ^= 1;
        assert_eq!(Msg::decode(&b), Err(CtlError::Garbage));
        let mut b = Msg::Hello.encode();
        b[4] = 9;
        assert_eq!(Msg::decode(&b), Err(CtlError::Version));
        let mut b = Msg::Hello.encode();
        b[8] = 77;
        assert_eq!(Msg::decode(&b), Err(CtlError::Garbage));
        let mut b = Msg::Hello.encode();
        b.push(0);
        assert_eq!(Msg::decode(&b), Err(CtlError::Garbage));
        assert_eq!(Msg::decode(&[]), Err(CtlError::Garbage));
    }

    proptest! {
        #[test]
        fn decoding_any_bytes_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Msg::decode(&b);
            let mut h = Msg::Hello.encode();
            h.truncate(12);
            h.extend_from_slice(&b);
            let _ = Msg::decode(&h);
        }
    }

    #[test]
    fn a_message_and_its_descriptors_cross_a_seqpacket_socket() {
        let dir = std::env::temp_dir().join(format!("lazynet-ctl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ctl");
        let l = listen(&path, 0o600).unwrap();
        let c = connect(&path).unwrap();
        let s = loop {
            match accept(&l) {
                Ok(s) => break s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(peer_pid(&s), Some(std::process::id()));
        let e = crate::sys::EventFd::new().unwrap();
        send(&c, &Msg::Hello, &[e.fd()]).unwrap();
        let recv_blocking = |s: &OwnedFd| loop {
            match recv(s) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                r => break r.unwrap(),
            }
        };
        let (m, fds) = recv_blocking(&s).unwrap();
        assert_eq!(m, Ok(Msg::Hello));
        assert_eq!(fds.len(), 1);
        drop(c);
        assert!(
            recv_blocking(&s).is_none(),
            "a closed peer reads as the end"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
