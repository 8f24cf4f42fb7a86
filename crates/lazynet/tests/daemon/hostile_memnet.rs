//! A hostile MemNet client against a daemon in the offload placement,
//! stepped in this thread: the harness the property test (`tests/daemon`)
//! and the fuzz target (`fuzz/fuzz_targets/memnet_client.rs`) share.
//!
//! The hostile client attaches like any other (control socket,
//! `HelloOffload`, its job area and eventfd), then does what an input
//! says: posts arbitrary requests (unknown operations; socket and range
//! ids real, stale, forged or out of range; offsets and lengths anywhere;
//! listens, connects, accepts, sends and receives that make sense), takes
//! or ignores completions, writes arbitrary bytes anywhere in its area
//! (ring indices and claims, the header, the data), sends garbage on its
//! control connection, and detaches and attaches again. A lazynet stack
//! on the wire's other end is the network: it echoes what connects to its
//! port 5000 and connects to the client's ports now and then. A second,
//! well-behaved raw client beside them posts a no-op after each run; it
//! must complete.
#![allow(dead_code)] // Each includer uses a part.

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use lazynet::ctl::Msg;
use lazynet::daemon::{Daemon, DaemonConfig, Placement};
use lazynet::mem::jobs::{Cpl, JobArea, JobParams, Req, ReqOp};
use lazynet::mem::{Consumer, Producer};
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::socket::{TcpListener, TcpStream};
use lazynet::stack::{Stack, StackConfig};

pub const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const US: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The peer's echo port.
pub const ECHO: u16 = 5000;

static N: AtomicU32 = AtomicU32::new(0);

/// Small bounds: every limit is reachable.
pub fn small_jobs() -> JobParams {
    JobParams {
        req_cap: 16,
        credits: 8,
        data_bytes: 64 * 1024,
        max_regions: 8,
        max_socks: 8,
    }
}

/// A raw client's handles.
pub struct RawClient {
    pub conn: OwnedFd,
    pub area: JobArea,
    pub file: File,
    pub req: Producer<Req>,
    pub cpl: Consumer<Cpl>,
    /// Values completions carried (socket and range ids to reuse).
    pub seen: Vec<u32>,
    pub next_job: u32,
}

pub struct Harness {
    pub daemon: Daemon<WireEnd>,
    pub peer: Stack<WireEnd>,
    pub echo: TcpListener,
    pub peer_conns: Vec<TcpStream>,
    pub dir: PathBuf,
    pub path: PathBuf,
    pub hostile: Option<RawClient>,
    pub good: Option<RawClient>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Harness {
    pub fn new(tag: &str) -> Harness {
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("lazynet-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ctl.sock");
        let (a, b) = WirePair::new(WireConfig {
            buf_count: 1024,
            ring_capacity: 128,
            ..WireConfig::default()
        })
        .unwrap();
        let cfg = |addr, seed| StackConfig {
            addr,
            prefix_len: 24,
            seed,
            ..StackConfig::default()
        };
        let daemon = Daemon::new(
            a,
            DaemonConfig {
                socket: path.clone(),
                socket_mode: 0o600,
                max_apps: 3,
                placement: Placement::Offload,
                jobs: small_jobs(),
                stack: cfg(US, 5),
                ..DaemonConfig::default()
            },
        )
        .unwrap();
        let mut peer = Stack::new(b, cfg(PEER, 6));
        let echo = TcpListener::bind(&mut peer, SocketAddrV4::new(PEER, ECHO), 16).unwrap();
        Harness {
            daemon,
            peer,
            echo,
            peer_conns: Vec::new(),
            dir,
            path,
            hostile: None,
            good: None,
        }
    }

    /// Steps the daemon and the peer `k` times.
    pub fn step(&mut self, k: usize) {
        let mut buf = [0u8; 4096];
        for _ in 0..k {
            self.daemon.step();
            let now = self.peer.now();
            self.peer.poll(now);
            self.peer.tcp_service(now, 256);
            while let Ok(c) = self.echo.accept(&mut self.peer) {
                if self.peer_conns.len() < 16 {
                    self.peer_conns.push(c);
                } else {
                    let _ = c.abort(&mut self.peer);
                }
            }
            let peer = &mut self.peer;
            self.peer_conns.retain(|c| match c.recv(peer, &mut buf) {
                Ok(0) => {
                    // The client finished: finish too (a peer that never
                    // closes leaves the daemon's side in FIN-WAIT-2).
                    let _ = c.close(peer);
                    false
                }
                Ok(n) => {
                    let _ = c.send(peer, &buf[..n]);
                    true
                }
                Err(lazynet::socket::SocketError::WouldBlock) => true,
                Err(_) => false,
            });
        }
    }

    /// Attaches a client by hand (no library), stepping the daemon until
    /// it has answered.
    pub fn attach_raw(&mut self) -> Option<RawClient> {
        let (conn, (m, mut fds)) =
            crate::hostile::handshake(&mut self.daemon, &self.path, &Msg::HelloOffload)?;
        let Ok(Msg::Welcome(_)) = m else {
            return None;
        };
        let _ev = fds.pop()?;
        let area = JobArea::open(fds.pop()?).unwrap();
        let file = File::from(area.region().fd().try_clone_to_owned().unwrap());
        let l = *area.layout();
        let r = area.region().clone();
        Some(RawClient {
            conn,
            req: Producer::attach(&r, l.req).unwrap(),
            cpl: Consumer::attach(&r, l.cpl).unwrap(),
            area,
            file,
            seen: Vec::new(),
            next_job: 0,
        })
    }

    /// Attaches an application (the multi-process kind) by hand to the
    /// same daemon.
    pub fn attach_app(&mut self) -> Option<crate::hostile::Raw> {
        crate::hostile::Raw::attach(&mut self.daemon, &self.path)
    }

    /// The well-behaved client (attached first if needed) listens on
    /// `port`: the completion's code, `None` if none came.
    pub fn listen(&mut self, port: u16) -> Option<u32> {
        if self.good.is_none() {
            self.good = self.attach_raw();
        }
        let g = self.good.as_mut()?;
        g.next_job += 1;
        let r = Req {
            job: 1000 + g.next_job,
            op: ReqOp::Listen as u32,
            port,
            ..Req::default()
        };
        g.req.push_one(r).ok()?;
        for _ in 0..100 {
            self.step(1);
            if let Some(c) = self.good.as_mut()?.cpl.pop_one() {
                return Some(c.code);
            }
        }
        None
    }

    /// Interprets `data` as the hostile client's actions. Every loop is
    /// bounded by the input's length.
    pub fn run(&mut self, data: &[u8]) {
        let mut i = 0;
        let mut next = |n: usize| -> Option<&[u8]> {
            let s = data.get(i..i + n)?;
            i += n;
            Some(s)
        };
        while let Some(op) = next(1) {
            match op[0] % 10 {
                0..=2 => {
                    // A request, its fields from the input.
                    let Some(b) = next(10) else { break };
                    let Some(h) = &mut self.hostile else { continue };
                    let pick = |x: u8, seen: &[u32]| -> u32 {
                        match (x % 4, seen.is_empty()) {
                            (0 | 1, false) => seen[usize::from(x) / 4 % seen.len()],
                            (2, false) => seen[usize::from(x) % seen.len()] ^ 0x1_0000,
                            _ => u32::from(x) * 0x0101,
                        }
                    };
                    let op = u32::from(b[0] % 12);
                    let r = Req {
                        job: h.next_job,
                        op,
                        sock: pick(b[1], &h.seen),
                        handle: pick(b[2], &h.seen),
                        off: match b[3] % 4 {
                            0 => 0,
                            1 => u32::from(b[4]) * 256,
                            2 => u32::from_le_bytes([b[4], b[5], b[6], 0]),
                            _ => u32::MAX - u32::from(b[4]),
                        },
                        len: match b[7] % 4 {
                            0 => 0,
                            1 => u32::from(b[8]) + 1,
                            2 => u32::from(b[8]) * 256,
                            _ => u32::MAX - u32::from(b[8]),
                        },
                        addr: if b[9] & 1 == 0 {
                            u32::from(PEER)
                        } else {
                            u32::from(b[9]) << 24
                        },
                        port: if op == ReqOp::Connect as u32 {
                            if b[9] & 2 == 0 {
                                ECHO
                            } else {
                                u16::from(b[9])
                            }
                        } else {
                            80 + u16::from(b[9] % 3)
                        },
                        flags: u16::from(b[9]),
                    };
                    h.next_job = h.next_job.wrapping_add(1);
                    let _ = h.req.push_one(r);
                }
                3 => {
                    // Take completions (or leave them).
                    if let Some(h) = &mut self.hostile {
                        let mut c = [Cpl::default(); 8];
                        let n = h.cpl.pop(&mut c);
                        for x in &c[..n] {
                            if x.code == 0 && x.value != 0 && h.seen.len() < 32 {
                                h.seen.push(x.value as u32);
                            }
                        }
                    }
                }
                4 => {
                    // Arbitrary bytes anywhere in the area.
                    let Some(b) = next(6) else { break };
                    if let Some(h) = &mut self.hostile {
                        let len = h.area.layout().len as u64;
                        let at = u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])) % len;
                        let _ = h.file.write_at(&b[4..6], at);
                    }
                }
                5 => {
                    // A ring index or claim.
                    let Some(b) = next(5) else { break };
                    if let Some(h) = &mut self.hostile {
                        let l = *h.area.layout();
                        let base = if b[0] & 1 == 0 { l.req } else { l.cpl } as u64;
                        let at = base + [64, 68, 128, 132, 8][usize::from(b[1]) % 5];
                        let _ = h.file.write_at(&b[1..5], at);
                    }
                }
                6 => {
                    // The peer connects to one of the client's ports.
                    let Some(b) = next(1) else { break };
                    let to = SocketAddrV4::new(US, 80 + u16::from(b[0] % 3));
                    if let Ok(c) = TcpStream::connect_nonblocking(&mut self.peer, to, None) {
                        if self.peer_conns.len() < 16 {
                            let _ = c.send(&mut self.peer, b"GET / HTTP/1.0\r\n\r\n");
                            self.peer_conns.push(c);
                        } else {
                            let _ = c.abort(&mut self.peer);
                        }
                    }
                }
                7 => {
                    let Some(b) = next(4) else { break };
                    if let Some(h) = &self.hostile {
                        let _ = lazynet::sys::send_with_fds(&h.conn, b, &[]);
                    }
                }
                8 => {
                    // Leave (the daemon reclaims) or come back, one time in
                    // eight.
                    let Some(b) = next(1) else { break };
                    if b[0] % 8 != 0 {
                        continue;
                    }
                    self.hostile = match self.hostile.take() {
                        Some(_) => None,
                        None => self.attach_raw(),
                    };
                }
                _ => {
                    let Some(b) = next(1) else { break };
                    self.step(1 + usize::from(b[0] % 4));
                }
            }
        }
        self.step(4);
    }

    /// Whether the well-behaved client's no-op completes (attaching it
    /// first if needed).
    pub fn good_client_served(&mut self, id: u32) -> bool {
        if self.good.is_none() {
            self.good = self.attach_raw();
        }
        let Some(g) = &mut self.good else {
            return false;
        };
        let r = Req {
            job: id,
            op: ReqOp::Nop as u32,
            ..Req::default()
        };
        if g.req.push_one(r).is_err() {
            return false;
        }
        for _ in 0..200 {
            self.step(1);
            let g = self.good.as_mut().expect("attached");
            while let Some(c) = g.cpl.pop_one() {
                if c.job == id && c.code == 0 {
                    return true;
                }
            }
        }
        false
    }
}
