//! The daemon and attached applications in one process (threads), on the
//! in-memory wire, with a plain lazynet stack as the peer. The real
//! processes (and the Linux peer) are in `crates/lazynet-cli/tests/daemon.rs`.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::*;
use crate::nic::wirepair::{WireConfig, WireEnd, WirePair};
use crate::socket::{wait_step, TcpListener, TcpStream, UdpSocket};
use crate::stack::{SocketError, Stack, StackConfig};

pub(super) const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub(super) const US: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

pub(super) fn cfg(addr: Ipv4Addr, seed: u64) -> StackConfig {
    StackConfig {
        addr,
        prefix_len: 24,
        seed,
        ..StackConfig::default()
    }
}

pub(super) struct Setup {
    dir: PathBuf,
    pub(super) path: PathBuf,
    stop: Arc<AtomicBool>,
    daemon: Option<JoinHandle<Daemon<WireEnd>>>,
    pub(super) peer: Stack<WireEnd>,
}

impl Setup {
    fn new(name: &str) -> Setup {
        Setup::with(name, Placement::MultiProcess)
    }

    pub(super) fn with(name: &str, placement: Placement) -> Setup {
        Setup::with_stack(name, placement, cfg(US, 1))
    }

    /// [`Setup::with`] whose daemon's own stack has configuration `stack`.
    pub(super) fn with_stack(name: &str, placement: Placement, stack: StackConfig) -> Setup {
        let dir = std::env::temp_dir().join(format!("lazynet-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("daemon.sock");
        let (a, b) = WirePair::new(WireConfig::default()).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let dcfg = DaemonConfig {
            socket: path.clone(),
            socket_mode: 0o600,
            max_apps: 4,
            stack,
            placement,
            jobs: crate::mem::jobs::JobParams {
                data_bytes: 4 << 20,
                credits: 32,
                ..Default::default()
            },
            ..DaemonConfig::default()
        };
        let st = stop.clone();
        let d = Daemon::new(a, dcfg).unwrap();
        let daemon = std::thread::spawn(move || {
            let mut d = d;
            let w = d.spawn_waker(st.clone()).unwrap();
            d.run(&st);
            w.join().unwrap();
            d
        });
        Setup {
            dir,
            path,
            stop,
            daemon: Some(daemon),
            peer: Stack::new(b, cfg(PEER, 2)),
        }
    }

    pub(super) fn finish(mut self) -> Daemon<WireEnd> {
        self.stop.store(true, Ordering::Release);
        self.daemon.take().unwrap().join().unwrap()
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An application thread: attaches, runs `f` until `stop`.
fn app<F>(path: &std::path::Path, stop: Arc<AtomicBool>, f: F) -> JoinHandle<()>
where
    F: FnOnce(&mut Stack<crate::stack::AreaNic>, &AtomicBool) + Send + 'static,
{
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let mut s = Stack::attach(&path, cfg(Ipv4Addr::UNSPECIFIED, 3)).unwrap();
        f(&mut s, &stop);
    })
}

fn udp_echo(s: &mut Stack<crate::stack::AreaNic>, stop: &AtomicBool) {
    let sock = UdpSocket::bind(s, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::Acquire) {
        while let Ok((n, from)) = sock.recv_from(s, &mut buf) {
            let _ = sock.send_to(s, &buf[..n], from);
        }
        wait_step(s, None);
    }
}

fn tcp_echo(s: &mut Stack<crate::stack::AreaNic>, stop: &AtomicBool) {
    let l = TcpListener::bind(s, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 64).unwrap();
    let mut conns: Vec<TcpStream> = Vec::new();
    let mut buf = vec![0u8; 16384];
    while !stop.load(Ordering::Acquire) {
        while let Ok(c) = l.accept(s) {
            conns.push(c);
        }
        for c in &conns {
            if let Ok(n) = c.recv(s, &mut buf) {
                let mut at = 0;
                let t0 = Instant::now();
                while at < n && t0.elapsed() < Duration::from_secs(5) {
                    match c.send(s, &buf[at..n]) {
                        Ok(k) => at += k,
                        Err(_) => {
                            wait_step(s, None);
                        }
                    }
                }
            }
        }
        wait_step(s, None);
    }
}

pub(super) fn wait_for_socket(p: &std::path::Path) {
    let t0 = Instant::now();
    while !p.exists() {
        assert!(t0.elapsed() < Duration::from_secs(5), "no daemon socket");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Drives the peer until `done` or 10 s.
pub(super) fn drive(peer: &mut Stack<WireEnd>, mut done: impl FnMut(&mut Stack<WireEnd>) -> bool) {
    let t0 = Instant::now();
    while !done(peer) {
        assert!(t0.elapsed() < Duration::from_secs(10), "timed out");
        wait_step(peer, None);
    }
}

#[test]
fn two_applications_serve_udp_and_tcp_through_one_daemon() {
    let mut s = Setup::new("daemon-two-apps");
    wait_for_socket(&s.path);
    let stop = Arc::new(AtomicBool::new(false));
    let a1 = app(&s.path, stop.clone(), udp_echo);
    let a2 = app(&s.path, stop.clone(), tcp_echo);

    // UDP: 200 datagrams of varied sizes, every byte back.
    let peer = &mut s.peer;
    let u = UdpSocket::bind(peer, SocketAddrV4::new(PEER, 5000)).unwrap();
    let dst = SocketAddrV4::new(US, 7);
    let mut got = 0;
    let mut buf = [0u8; 8192];
    // The last ones are fragmented both ways: the daemon reassembles them
    // and hands the application one frame, or, beyond one of its 2 KiB
    // buffers, fragments again; the application's stack fragments its
    // answer.
    let sizes = |i: usize| {
        if i < 195 {
            1 + i * 7 % 1400
        } else {
            [1473, 2000, 2015, 4000, 8000][i - 195]
        }
    };
    for i in 0..200usize {
        let msg: Vec<u8> = (0..sizes(i)).map(|k| (k + i) as u8).collect();
        let t0 = Instant::now();
        let mut echoed = false;
        let mut sent_at = None::<Instant>;
        while !echoed {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "datagram {i} not echoed"
            );
            if sent_at.is_none_or(|t| t.elapsed() > Duration::from_millis(200)) {
                let _ = u.send_to(peer, &msg, dst);
                sent_at = Some(Instant::now());
            }
            wait_step(peer, None);
            while let Ok((n, _)) = u.recv_from(peer, &mut buf) {
                if buf[..n] == msg[..] {
                    echoed = true;
                    got += 1;
                }
            }
        }
    }
    assert_eq!(got, 200);

    // TCP: 256 KiB echoed byte-exact.
    let c = TcpStream::connect(
        peer,
        SocketAddrV4::new(US, 80),
        Some(Duration::from_secs(5)),
    )
    .unwrap();
    let data: Vec<u8> = (0..256 * 1024).map(|i| (i % 251) as u8).collect();
    let mut sent = 0;
    let mut back = Vec::new();
    drive(peer, |p| {
        if sent < data.len() {
            if let Ok(k) = c.send(p, &data[sent..]) {
                sent += k;
            }
        }
        let mut b = [0u8; 8192];
        while let Ok(n) = c.recv(p, &mut b) {
            if n == 0 {
                break;
            }
            back.extend_from_slice(&b[..n]);
        }
        back.len() == data.len()
    });
    assert!(back == data, "TCP echo differs");

    // A third application cannot take the UDP port the first holds.
    let mut third = Stack::attach(&s.path, cfg(Ipv4Addr::UNSPECIFIED, 4)).unwrap();
    let r = UdpSocket::bind(&mut third, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7));
    assert_eq!(r.err(), Some(SocketError::AddrInUse));
    let r = UdpSocket::bind(&mut third, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9));
    assert!(r.is_ok());
    drop(third);

    stop.store(true, Ordering::Release);
    a1.join().unwrap();
    a2.join().unwrap();
    let d = s.finish();
    let st = d.stats();
    assert_eq!(st.attached, 3);
    assert!(st.delivered >= 200, "{st:?}");
    // The fragmented datagrams were reassembled by the daemon, and those
    // beyond a buffer handed on as fragments.
    assert!(d.stack().stats().reassembled >= 5, "{}", d.stack().stats());
    assert!(st.refragmented >= 3, "{st:?}");
}

#[test]
fn an_attached_stack_learns_at_once_that_its_daemon_is_gone() {
    let s = Setup::new("daemon-gone");
    wait_for_socket(&s.path);
    let mut app = Stack::attach(&s.path, cfg(Ipv4Addr::UNSPECIFIED, 3)).unwrap();
    UdpSocket::bind(&mut app, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
    drop(s.finish());
    // A bind waits for the daemon's answer: not for the two seconds a
    // stopped daemon is given, but until the hang-up is seen.
    let t0 = Instant::now();
    let r = UdpSocket::bind(&mut app, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 8));
    assert_eq!(r.err(), Some(SocketError::NotConnected));
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "{:?}",
        t0.elapsed()
    );
}

#[test]
fn a_frame_larger_than_an_area_buffer_is_counted_too_big() {
    let (a, b) = WirePair::new(WireConfig {
        buf_size: 4096,
        ..WireConfig::default()
    })
    .unwrap();
    let dir = std::env::temp_dir().join(format!("lazynet-too-big-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("d.sock");
    let mut d = Daemon::new(
        a,
        DaemonConfig {
            socket: path.clone(),
            socket_mode: 0o600,
            max_apps: 2,
            stack: cfg(US, 1),
            ..DaemonConfig::default()
        },
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let p2 = path.clone();
    let app = std::thread::spawn(move || {
        let mut s = Stack::attach(&p2, cfg(Ipv4Addr::UNSPECIFIED, 3)).unwrap();
        UdpSocket::bind(&mut s, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
        while !st.load(Ordering::Acquire) {
            wait_step(&mut s, None);
        }
        s.nic().area().published().counter(AppCounter::DropTooBig)
    });
    // Serve the attach and the bind.
    let t0 = Instant::now();
    while d.attached() == 0 || t0.elapsed() < Duration::from_millis(300) {
        d.step();
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
    // A 3,000-byte frame (the wire's buffers are 4 KiB, the area's 2).
    let mut peer = b;
    let f = crate::daemon::tests::udp_frame_to(d.stack().mac(), 7, 3000 - 42);
    let mut buf = [0u32];
    assert_eq!(peer.alloc(&mut buf), 1);
    peer.buffers_mut().buf_mut(buf[0]).unwrap()[..f.len()].copy_from_slice(&f);
    assert_eq!(
        peer.send(&[crate::mem::Desc::new(buf[0], f.len() as u16)]),
        1
    );
    for _ in 0..100 {
        d.step();
    }
    d.poke();
    d.step();
    stop.store(true, Ordering::Release);
    assert_eq!(app.join().unwrap(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An Ethernet, IPv4 and UDP frame from the peer to our `port` with
/// `len` bytes of payload (UDP checksum 0: none).
pub(super) fn udp_frame_to(mac: [u8; 6], port: u16, len: usize) -> Vec<u8> {
    use crate::wire::ethernet::{EthernetAddress, EthernetRepr};
    use crate::wire::ipv4::{Ipv4Repr, PROTO_UDP};
    let mut f = vec![0u8; 42 + len];
    EthernetRepr {
        src: EthernetAddress([2, 0, 0, 0, 0, 9]),
        dst: EthernetAddress(mac),
        ethertype: crate::wire::ethernet::ETHERTYPE_IPV4,
    }
    .emit(&mut f)
    .unwrap();
    Ipv4Repr {
        src: PEER,
        dst: US,
        protocol: PROTO_UDP,
        ttl: 64,
        ident: 1,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
        payload_len: 8 + len,
    }
    .emit(&mut f[14..])
    .unwrap();
    f[34..36].copy_from_slice(&5000u16.to_be_bytes());
    f[36..38].copy_from_slice(&port.to_be_bytes());
    f[38..40].copy_from_slice(&((8 + len) as u16).to_be_bytes());
    f
}
