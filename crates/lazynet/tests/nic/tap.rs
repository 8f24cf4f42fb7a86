//! TAP driver + namespace tooling against the real kernel (root only).
//!
//! Not root and `CI` != "true": prints "skipped: needs root". Under CI=true
//! these tests always run.

use std::time::{Duration, Instant};

use crate::util::Down;
use lazynet::mem::Desc;
use lazynet::nic::netns::{list_netns, netns_exists, Ownership, PeerNs, PeerNsConfig};
use lazynet::nic::tap::TapConfig;
use lazynet::nic::Nic;

fn arp_request(our_mac: [u8; 6], our_ip: [u8; 4], target_ip: [u8; 4]) -> [u8; 42] {
    let mut f = [0u8; 42];
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&our_mac);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    f[14..22].copy_from_slice(&[0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01]);
    f[22..28].copy_from_slice(&our_mac);
    f[28..32].copy_from_slice(&our_ip);
    // target MAC zero
    f[38..42].copy_from_slice(&target_ip);
    f
}

/// Sends an ARP request for `subnet.1` from `subnet.2` and waits for the
/// kernel's reply; returns the kernel side's MAC.
pub(crate) fn arp_round_trip(nic: &mut impl TapLike, subnet: u8) -> [u8; 6] {
    let mac = nic.mac();
    let req = arp_request(mac, [10, 201, subnet, 2], [10, 201, subnet, 1]);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut out = [Desc::default(); 16];
    let mut seen = 0;
    let mut next_send = Instant::now();
    while Instant::now() < deadline {
        // Resend every 250 ms: right after attaching, the kernel may still
        // drop its own transmissions until its link watcher has run.
        if Instant::now() >= next_send {
            let mut b = [0u32; 1];
            assert_eq!(nic.alloc(&mut b), 1);
            nic.buffers_mut().buf_mut(b[0]).unwrap()[..42].copy_from_slice(&req);
            assert_eq!(nic.send(&[Desc::new(b[0], 42)]), 1);
            next_send = Instant::now() + Duration::from_millis(250);
        }
        nic.wait_for(Duration::from_millis(100));
        let n = nic.recv(&mut out);
        let mut found = None;
        for d in &out[..n] {
            let f = nic.buffers().frame(*d).unwrap();
            seen += 1;
            if f.len() >= 42
                && f[0..6] == mac
                && f[12..14] == [0x08, 0x06]
                && f[20..22] == [0x00, 0x02]
                && f[28..32] == [10, 201, subnet, 1]
            {
                let mut m = [0u8; 6];
                m.copy_from_slice(&f[22..28]);
                found = Some(m);
            }
        }
        nic.release(&out[..n]);
        if let Some(m) = found {
            return m;
        }
    }
    panic!("no ARP reply within 5 s ({seen} other frames seen)");
}

pub(crate) trait TapLike: Nic {
    fn wait_for(&self, t: Duration);
}
impl TapLike for lazynet::nic::tap::TapNic {
    fn wait_for(&self, t: Duration) {
        let _ = self.wait_readable(Some(t));
    }
}

#[test]
fn tap_create_in_fresh_namespace_arp() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let cfg = PeerNsConfig::unique(11);
    let ns_name = cfg.ns.clone();
    let peer = PeerNs::new(cfg);
    let _down = Down(peer.clone());
    assert!(!peer.exists());
    let tcfg = TapConfig {
        mac: [0x02, 0, 0, 0, 0x11, 0x02],
        buf_count: 256,
        ..TapConfig::default()
    };
    let (mut nic, own) = peer.attach_or_create(&tcfg).expect("attach_or_create");
    assert!(matches!(own, Ownership::Created(_)));
    assert!(peer.exists());
    assert_eq!(nic.mtu(), 1500);
    let free0 = nic.free_buffers();
    let kmac = arp_round_trip(&mut nic, 11);
    assert_ne!(kmac, nic.mac(), "kernel side has its own MAC");
    assert_eq!(nic.free_buffers(), free0, "every buffer came back");
    assert!(nic.stats().rx_frames >= 1 && nic.stats().tx_frames >= 1);
    drop(nic);
    if let Ownership::Created(g) = own {
        g.cleanup().expect("cleanup");
    }
    assert!(!netns_exists(&ns_name));
    assert!(!list_netns().unwrap().contains(&ns_name));
}

#[test]
fn tap_attach_to_persistent_device() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let cfg = PeerNsConfig::unique(12);
    let ns_name = cfg.ns.clone();
    let peer = PeerNs::new(cfg);
    let _down = Down(peer.clone());
    peer.up().expect("up");
    assert!(peer.exists());
    let tcfg = TapConfig {
        mac: [0x02, 0, 0, 0, 0x12, 0x02],
        buf_count: 256,
        ..TapConfig::default()
    };
    {
        let (mut nic, own) = peer.attach_or_create(&tcfg).expect("attach");
        assert!(matches!(own, Ownership::Attached));
        arp_round_trip(&mut nic, 12);
    }
    // Still there after our fd closed (persistent), and attachable again.
    assert!(peer.exists());
    {
        let (mut nic, own) = peer.attach_or_create(&tcfg).expect("attach again");
        assert!(matches!(own, Ownership::Attached));
        arp_round_trip(&mut nic, 12);
    }
    peer.down().expect("down");
    peer.down().expect("down is idempotent");
    assert!(!peer.exists());
    assert!(!list_netns().unwrap().contains(&ns_name));
}

#[test]
fn tap_nic_rejects_bad_descriptors_without_panicking() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let cfg = PeerNsConfig::unique(13);
    let peer = PeerNs::new(cfg);
    let _down = Down(peer.clone());
    let tcfg = TapConfig {
        buf_count: 64,
        ..TapConfig::default()
    };
    let (mut nic, _own) = peer.attach_or_create(&tcfg).expect("create");
    let bad = [
        Desc::new(u32::MAX, 10),
        Desc {
            buf: 0,
            off: 2047,
            len: 100,
        },
    ];
    assert_eq!(nic.send(&bad), 2);
    nic.release(&[Desc::new(1, 0), Desc::new(99_999, 0)]); // already free / bogus
    assert_eq!(nic.free_buffers(), 64);
    assert!(nic.stats().bad_desc >= 3);
    let mut out: [Desc; 0] = [];
    assert_eq!(nic.recv(&mut out), 0);
}

#[test]
fn tap_oversized_frame_is_dropped_and_counted() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let cfg = PeerNsConfig::unique(14);
    let (ns, dev) = (cfg.ns.clone(), cfg.dev.clone());
    let peer = PeerNs::new(cfg);
    let _down = Down(peer.clone());
    let mac = [0x02, 0, 0, 0, 0x14, 0x02];
    let tcfg = TapConfig {
        mac,
        buf_count: 64,
        ..TapConfig::default()
    };
    let (mut nic, _own) = peer.attach_or_create(&tcfg).expect("create");
    // Kernel side: bigger MTU and a static neighbour entry for us, so a big
    // ping goes out as one 2542-byte frame (our buffers are 2048 bytes).
    let m = mac.map(|b| format!("{b:02x}")).join(":");
    lazynet::nic::netns::ip(&["-n", &ns, "link", "set", "dev", &dev, "mtu", "3000"]).unwrap();
    lazynet::nic::netns::ip(&[
        "-n",
        &ns,
        "neigh",
        "replace",
        "10.201.14.2",
        "lladdr",
        &m,
        "dev",
        &dev,
    ])
    .unwrap();
    let mut ping = std::process::Command::new("ip")
        .args([
            "netns", "exec", &ns, "ping", "-c", "1", "-W", "1", "-s", "2500",
        ])
        .arg("10.201.14.2")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("ping");
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut out = [Desc::default(); 8];
    while nic.stats().rx_truncated == 0 && Instant::now() < deadline {
        let _ = nic.wait_readable(Some(Duration::from_millis(100)));
        let n = nic.recv(&mut out);
        for d in &out[..n] {
            assert!(nic.buffers().valid(*d), "only whole frames are delivered");
        }
        nic.release(&out[..n]);
    }
    let _ = ping.wait();
    assert_eq!(nic.stats().rx_truncated, 1, "{:?}", nic.stats());
    assert_eq!(nic.free_buffers(), 64);
}

/// `rx_ready` tells, without consuming, whether a frame waits: a host's
/// interrupt-priority receive task is woken by it (a constant `true`
/// starved every other task of the core).
#[test]
fn tap_rx_ready_reports_waiting_frames_without_consuming() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let cfg = PeerNsConfig::unique(12);
    let peer = PeerNs::new(cfg);
    let _down = Down(peer.clone());
    let (mut nic, _own) = peer
        .attach_or_create(&TapConfig {
            mac: [0x02, 0, 0, 0, 0x12, 0x02],
            buf_count: 256,
            ..TapConfig::default()
        })
        .expect("attach_or_create");
    arp_round_trip(&mut nic, 12);
    let mut out = [Desc::default(); 16];
    // Idle: drained, nothing waits (the kernel may send something of its
    // own now and then, so a few tries).
    let idle = (0..10).any(|_| {
        loop {
            let n = nic.recv(&mut out);
            nic.release(&out[..n]);
            if n == 0 {
                break;
            }
        }
        !nic.rx_ready()
    });
    assert!(idle, "rx_ready is false on a drained device");
    // The kernel answers an ARP request: ready, and the frame is still there.
    let req = arp_request(nic.mac(), [10, 201, 12, 2], [10, 201, 12, 1]);
    let mut b = [0u32; 1];
    assert_eq!(nic.alloc(&mut b), 1);
    nic.buffers_mut().buf_mut(b[0]).unwrap()[..42].copy_from_slice(&req);
    assert_eq!(nic.send(&[Desc::new(b[0], 42)]), 1);
    assert!(nic.wait_readable(Some(Duration::from_secs(2))).unwrap());
    assert!(nic.rx_ready());
    assert!(nic.rx_ready(), "asking again consumes nothing");
    let n = nic.recv(&mut out);
    assert!(n >= 1);
    nic.release(&out[..n]);
}
