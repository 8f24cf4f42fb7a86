//! A hostile application against a daemon stepped in this thread: the
//! harness the property test (`tests/daemon`) and the fuzz target
//! (`fuzz/fuzz_targets/daemon_app.rs`) share.
//!
//! The hostile application attaches like any other (control socket, hello,
//! its area and eventfd), then does what an input says: pushes arbitrary
//! buffer numbers onto `free` (repeats, numbers outside the pool, buffers
//! never returned), arbitrary descriptors onto `tx` (outside the area, over
//! buffer ends, frames with another source), arbitrary commands (unknown
//! operations, slots out of range, ports others hold), writes arbitrary
//! bytes anywhere in its area through the memfd (ring indices and claims,
//! ready flags, the header, the published line), sends garbage on its
//! control connection, opens connections that never say hello, and
//! detaches and attaches again. The raw peer end of the wire meanwhile
//! sends frames to the ports involved, so the daemon delivers into the
//! hostile area while all of this happens.
#![allow(dead_code)] // Each includer uses a part.

use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use lazynet::ctl::{self, Msg, Welcome};
use lazynet::daemon::{Daemon, DaemonConfig};
use lazynet::mem::area::{AreaParams, Cmd, Reply};
use lazynet::mem::{AppArea, Consumer, Desc, Producer};
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::nic::Nic;
use lazynet::stack::StackConfig;
use lazynet::wire::checksum::{checksum, fold, partial, pseudo_header_ipv4};

pub const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const US: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The wire's side B (the daemon has side A).
pub const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];

static N: AtomicU32 = AtomicU32::new(0);

/// Small areas: attaching stays cheap and every limit is reachable.
pub fn small_area() -> AreaParams {
    AreaParams {
        slots: 16,
        slot_cap: 16,
        bufs: 64,
        buf_size: 2048,
        free_cap: 16,
        tx_cap: 16,
        done_cap: 64,
        ready_cap: 16,
        cmd_cap: 8,
    }
}

/// The hostile application's handles.
pub struct Raw {
    pub conn: OwnedFd,
    pub area: AppArea,
    pub file: File,
    pub free: Producer<u32>,
    pub tx: Producer<Desc>,
    pub cmd: Producer<Cmd>,
    pub done: Consumer<u32>,
    pub ready: Consumer<u32>,
    pub reply: Consumer<Reply>,
    /// What the daemon said (the application's id, ports, address).
    pub welcome: Welcome,
}

impl Raw {
    /// Attaches an application by hand (no library stack) to the daemon at
    /// `path`, stepping it until it has answered.
    pub fn attach(daemon: &mut Daemon<WireEnd>, path: &std::path::Path) -> Option<Raw> {
        let (conn, (m, mut fds)) = handshake(daemon, path, &Msg::Hello)?;
        let Ok(Msg::Welcome(welcome)) = m else {
            return None;
        };
        let _ev = fds.pop()?;
        let area = AppArea::open(fds.pop()?).unwrap();
        let file = File::from(area.region().fd().try_clone_to_owned().unwrap());
        let l = *area.layout();
        let r = area.region().clone();
        Some(Raw {
            conn,
            free: Producer::attach(&r, l.free).unwrap(),
            tx: Producer::attach(&r, l.tx).unwrap(),
            cmd: Producer::attach(&r, l.cmd).unwrap(),
            done: Consumer::attach(&r, l.done).unwrap(),
            ready: Consumer::attach(&r, l.ready).unwrap(),
            reply: Consumer::attach(&r, l.reply).unwrap(),
            area,
            file,
            welcome,
        })
    }
}

pub struct Harness {
    pub daemon: Daemon<WireEnd>,
    pub peer: WireEnd,
    pub dir: PathBuf,
    pub path: PathBuf,
    pub hostile: Option<Raw>,
    /// Connections that never say hello (at most four kept).
    pub silent: Vec<OwnedFd>,
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
            buf_count: 512,
            ring_capacity: 64,
            ..WireConfig::default()
        })
        .unwrap();
        let daemon = Daemon::new(
            a,
            DaemonConfig {
                socket: path.clone(),
                socket_mode: 0o600,
                max_apps: 3,
                area: small_area(),
                ports_per_app: 64,
                stack: StackConfig {
                    addr: US,
                    prefix_len: 24,
                    seed: 5,
                    ..StackConfig::default()
                },
                ..DaemonConfig::default()
            },
        )
        .unwrap();
        Harness {
            daemon,
            peer: b,
            dir,
            path,
            hostile: None,
            silent: Vec::new(),
        }
    }

    /// Steps the daemon `k` times, answering the peer's side.
    pub fn step(&mut self, k: usize) {
        for _ in 0..k {
            self.daemon.step();
            self.pump_peer(|_| {});
        }
    }

    /// Attaches an application by hand (no library stack), stepping the
    /// daemon until it has answered.
    pub fn attach_raw(&mut self) -> Option<Raw> {
        Raw::attach(&mut self.daemon, &self.path)
    }

    /// Reads what reached the peer: answers ARP requests for the peer and
    /// hands every other frame to `f`.
    pub fn pump_peer(&mut self, mut f: impl FnMut(&[u8])) {
        let mut ds = [Desc::default(); 64];
        let mut replies = Vec::new();
        for _ in 0..16 {
            let n = self.peer.recv(&mut ds);
            for d in &ds[..n] {
                let fr = self.peer.buffers().frame(*d).unwrap();
                if fr.len() >= 42
                    && fr[12..14] == [8, 6]
                    && fr[20..22] == [0, 1]
                    && fr[38..42] == PEER.octets()
                {
                    replies.push(arp_reply(fr));
                } else {
                    f(fr);
                }
            }
            self.peer.release(&ds[..n]);
            if n < ds.len() {
                break;
            }
        }
        for r in replies {
            self.inject(&r);
        }
    }

    /// Sends a frame from the peer.
    pub fn inject(&mut self, frame: &[u8]) -> bool {
        let mut b = [0u32];
        if self.peer.alloc(&mut b) != 1 {
            return false;
        }
        self.peer.buffers_mut().buf_mut(b[0]).unwrap()[..frame.len()].copy_from_slice(frame);
        self.peer.send(&[Desc::new(b[0], frame.len() as u16)]) == 1
    }

    /// Interprets `data` as the hostile application's actions (see the
    /// module docs). Every loop is bounded by the input's length.
    pub fn run(&mut self, data: &[u8]) {
        let mut i = 0;
        let mut next = |n: usize| -> Option<&[u8]> {
            let s = data.get(i..i + n)?;
            i += n;
            Some(s)
        };
        let dmac = self.daemon.stack().mac();
        while let Some(op) = next(1) {
            let op = op[0];
            match op % 12 {
                0 => {
                    let Some(b) = next(2) else { break };
                    if let Some(h) = &mut self.hostile {
                        let _ = h
                            .free
                            .push_one(u32::from(u16::from_le_bytes([b[0], b[1]])) % 80);
                    }
                }
                1 => {
                    let Some(b) = next(6) else { break };
                    if let Some(h) = &mut self.hostile {
                        let d = Desc {
                            buf: u32::from(b[0]) % 70,
                            off: u16::from_le_bytes([b[1], b[2]]) % 2100,
                            len: u16::from_le_bytes([b[3], b[4]]) % 2200,
                        };
                        if b[5] & 1 == 1 {
                            // A well-formed UDP frame, its source port from
                            // the input (ours, another's, anything).
                            let port = 7 + u16::from(b[5] >> 1) % 4;
                            let f = udp_frame(dmac, PEER_MAC, US, PEER, port, 5000, &b[..4]);
                            let off = (d.buf as u64 % 64) * 2048;
                            let at = h.area.layout().pool as u64 + off;
                            let _ = h.file.write_at(&f, at);
                            let _ = h.tx.push_one(Desc::new(d.buf % 64, f.len() as u16));
                        } else {
                            let _ = h.tx.push_one(d);
                        }
                    }
                }
                2 => {
                    let Some(b) = next(8) else { break };
                    if let Some(h) = &mut self.hostile {
                        let addr = match b[6] % 3 {
                            0 => 0,
                            1 => u32::from(US),
                            _ => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                        };
                        let c = Cmd {
                            seq: u32::from(b[7]),
                            op: u32::from(b[0] % 9),
                            slot: u32::from(b[1] % 20),
                            id: u32::from(b[2]),
                            laddr: addr,
                            raddr: u32::from(PEER),
                            lport: 7 + u16::from(b[3] % 4) + if b[4] & 1 == 1 { 49152 } else { 0 },
                            rport: 5000 + u16::from(b[5] % 2),
                            pad: 0,
                        };
                        let _ = h.cmd.push_one(c);
                    }
                }
                3 => {
                    // Arbitrary bytes anywhere in the area.
                    let Some(b) = next(6) else { break };
                    if let Some(h) = &mut self.hostile {
                        let len = h.area.layout().len as u64;
                        let at = u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])) % len;
                        let _ = h.file.write_at(&b[4..6], at);
                    }
                }
                4 => {
                    // A ring index or a ready flag (the likeliest targets).
                    let Some(b) = next(5) else { break };
                    if let Some(h) = &mut self.hostile {
                        let l = *h.area.layout();
                        let rings = [
                            l.free,
                            l.tx,
                            l.done,
                            l.ready,
                            l.cmd,
                            l.reply,
                            l.slot(u32::from(b[0]) % 16),
                        ];
                        let base = rings[usize::from(b[0]) % rings.len()] as u64;
                        // Producer index, its claim, consumer index, its claim.
                        let at = base + [64, 68, 128, 132, 8][usize::from(b[1]) % 5];
                        let _ = h.file.write_at(&b[1..5], at);
                        let _ = h
                            .file
                            .write_at(&b[2..3], (l.flags + usize::from(b[3]) % 16) as u64);
                    }
                }
                5 => {
                    // Frames from the peer to the ports involved.
                    let Some(b) = next(3) else { break };
                    let port = 7 + u16::from(b[0] % 4);
                    if b[1] & 3 == 3 {
                        // A datagram in fragments (the daemon reassembles),
                        // sometimes larger than the area's buffers.
                        let len = if b[2] & 1 == 1 { 1800 } else { 3000 };
                        for f in udp_fragments(dmac, PEER, US, port, len, u16::from(b[2])) {
                            self.inject(&f);
                        }
                        continue;
                    }
                    let f = if b[1] & 1 == 0 {
                        udp_frame(PEER_MAC, dmac, PEER, US, 5000, port, &b[1..3])
                    } else {
                        tcp_syn(PEER_MAC, dmac, PEER, US, 5000 + u16::from(b[2] % 2), port)
                    };
                    self.inject(&f);
                }
                6 => {
                    let Some(b) = next(4) else { break };
                    if let Some(h) = &self.hostile {
                        let _ = lazynet::sys::send_with_fds(&h.conn, b, &[]);
                    }
                }
                7 => {
                    if let Some(h) = &mut self.hostile {
                        let mut x = [0u32; 16];
                        let _ = h.done.pop(&mut x);
                        let _ = h.ready.pop(&mut x);
                        while h.reply.pop_one().is_some() {}
                    }
                }
                8 => {
                    // Leave (the daemon reclaims) or come back; one time in
                    // eight (building an area costs a run's worth of steps).
                    let Some(b) = next(1) else { break };
                    if b[0] % 8 != 0 {
                        continue;
                    }
                    self.hostile = match self.hostile.take() {
                        Some(_) => None,
                        None => self.attach_raw(),
                    };
                }
                9 => {
                    // A connection that never says hello, or says garbage.
                    let Some(b) = next(2) else { break };
                    if self.silent.len() < 4 {
                        // Let the daemon accept first: a blocking connect to
                        // a full backlog would hang this single thread.
                        self.daemon.poke();
                        self.step(1);
                        if let Ok(c) = ctl::connect(&self.path) {
                            if b[0] & 1 == 1 {
                                let _ = lazynet::sys::send_with_fds(&c, b, &[]);
                            }
                            self.silent.push(c);
                        }
                    } else {
                        self.silent.clear();
                    }
                }
                _ => {
                    let Some(b) = next(1) else { break };
                    self.step(1 + usize::from(b[0] % 4));
                }
            }
        }
        self.step(4);
    }

    /// Whether the daemon's own stack still answers a ping from the peer.
    pub fn daemon_answers_ping(&mut self, id: u16) -> bool {
        let f = icmp_echo(PEER_MAC, self.daemon.stack().mac(), PEER, US, id);
        for _ in 0..3 {
            if !self.inject(&f) {
                self.step(2);
                continue;
            }
            let mut ok = false;
            for _ in 0..200 {
                self.daemon.step();
                self.pump_peer(|fr| {
                    ok |= fr.len() >= 42
                        && fr[23] == 1
                        && fr[34] == 0
                        && fr[38..40] == id.to_be_bytes();
                });
                if ok {
                    return true;
                }
            }
        }
        false
    }
}

/// Connects to the daemon's control socket at `path`, says `hello`, and
/// steps the daemon until it answers (at most 5 s): the connection, the
/// answer and the descriptors that came with it.
pub fn handshake(
    daemon: &mut Daemon<WireEnd>,
    path: &std::path::Path,
    hello: &Msg,
) -> Option<(OwnedFd, ctl::Received)> {
    let conn = ctl::connect(path).ok()?;
    ctl::send(&conn, hello, &[]).ok()?;
    ctl::set_nonblocking(&conn, true).ok()?;
    let t0 = std::time::Instant::now();
    loop {
        daemon.poke();
        daemon.step();
        match ctl::recv(&conn) {
            Ok(Some(r)) => return Some((conn, r)),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            _ => return None,
        }
        if t0.elapsed().as_secs() > 5 {
            return None;
        }
    }
}

fn eth(dst: [u8; 6], src: [u8; 6], ty: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(64);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ty.to_be_bytes());
    f
}

fn ipv4(f: &mut Vec<u8>, src: Ipv4Addr, dst: Ipv4Addr, proto: u8, payload: &[u8]) {
    let total = (20 + payload.len()) as u16;
    let mut h = [0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[8] = 64;
    h[9] = proto;
    h[12..16].copy_from_slice(&src.octets());
    h[16..20].copy_from_slice(&dst.octets());
    let c = checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(payload);
}

/// Ethernet + IPv4 + UDP (checksummed).
pub fn udp_frame(
    smac: [u8; 6],
    dmac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    data: &[u8],
) -> Vec<u8> {
    let len = (8 + data.len()) as u16;
    let mut u = Vec::with_capacity(len as usize);
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&len.to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(data);
    let c = !fold(partial(&u, pseudo_header_ipv4(src, dst, 17, len)));
    let c = if c == 0 { 0xffff } else { c };
    u[6..8].copy_from_slice(&c.to_be_bytes());
    let mut f = eth(dmac, smac, 0x0800);
    ipv4(&mut f, src, dst, 17, &u);
    f
}

/// A UDP datagram of `len` payload bytes from the peer to `port`, cut
/// into IPv4 fragments of at most 1480 bytes (identifier `id`).
pub fn udp_fragments(
    dmac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    port: u16,
    len: usize,
    id: u16,
) -> Vec<Vec<u8>> {
    let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
    let whole = udp_frame(PEER_MAC, dmac, src, dst, 5000, port, &data);
    let dgram = &whole[34..];
    let mut out = Vec::new();
    let mut off = 0;
    while off < dgram.len() {
        let end = (off + 1480).min(dgram.len());
        let mut f = eth(dmac, PEER_MAC, 0x0800);
        let mut h = [0u8; 20];
        h[0] = 0x45;
        h[2..4].copy_from_slice(&((20 + end - off) as u16).to_be_bytes());
        h[4..6].copy_from_slice(&id.to_be_bytes());
        let more = if end < dgram.len() { 0x2000 } else { 0 };
        h[6..8].copy_from_slice(&(more | (off / 8) as u16).to_be_bytes());
        h[8] = 64;
        h[9] = 17;
        h[12..16].copy_from_slice(&src.octets());
        h[16..20].copy_from_slice(&dst.octets());
        let c = checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&h);
        f.extend_from_slice(&dgram[off..end]);
        out.push(f);
        off = end;
    }
    out
}

/// Ethernet + IPv4 + a TCP SYN (checksummed).
pub fn tcp_syn(
    smac: [u8; 6],
    dmac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
) -> Vec<u8> {
    let mut t = [0u8; 20];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[4..8].copy_from_slice(&1000u32.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = 0x02;
    t[14..16].copy_from_slice(&8192u16.to_be_bytes());
    let c = !fold(partial(&t, pseudo_header_ipv4(src, dst, 6, 20)));
    t[16..18].copy_from_slice(&c.to_be_bytes());
    let mut f = eth(dmac, smac, 0x0800);
    ipv4(&mut f, src, dst, 6, &t);
    f
}

/// An ICMP echo request with identifier `id`.
pub fn icmp_echo(smac: [u8; 6], dmac: [u8; 6], src: Ipv4Addr, dst: Ipv4Addr, id: u16) -> Vec<u8> {
    let mut m = vec![8u8, 0, 0, 0];
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&[0, 1, 1, 2, 3, 4]);
    let c = checksum(&m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    let mut f = eth(dmac, smac, 0x0800);
    ipv4(&mut f, src, dst, 1, &m);
    f
}

/// The peer's answer to an ARP request for it.
fn arp_reply(req: &[u8]) -> Vec<u8> {
    let mut f = eth(req[6..12].try_into().unwrap(), PEER_MAC, 0x0806);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&PEER.octets());
    f.extend_from_slice(&req[22..32]);
    f
}
