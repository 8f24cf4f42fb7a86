//! The AF_XDP driver against the real kernel over a veth pair (root only;
//! under CI=true these always run).

use std::process::Command;
use std::time::Duration;

use crate::tap::{arp_round_trip, TapLike};
use crate::util::Down;
use lazynet::mem::Desc;
use lazynet::nic::netns::{Link, Ownership, PeerNs, PeerNsConfig};
use lazynet::nic::xdp::{XdpConfig, XdpNic};
use lazynet::nic::Nic;

impl TapLike for XdpNic {
    fn wait_for(&self, t: Duration) {
        let _ = self.wait_readable(Some(t));
    }
}

/// A veth pair in a fresh namespace for 10.201.`subnet`.0/24 and an
/// AF_XDP socket for 10.201.`subnet`.2 on our end. Bind the namespace's
/// guard first: it is dropped last, after the socket.
fn xdp_on(subnet: u8, buf_count: u32, ring_size: u32) -> (Down, PeerNsConfig, XdpNic, Ownership) {
    let mut cfg = PeerNsConfig::unique(subnet);
    cfg.link = Link::Veth;
    let peer = PeerNs::new(cfg.clone());
    let down = Down(peer.clone());
    let (nic, own) = peer
        .attach_or_create_xdp(&XdpConfig {
            addr: format!("10.201.{subnet}.2").parse().unwrap(),
            buf_count,
            ring_size,
            ..XdpConfig::default()
        })
        .expect("veth and AF_XDP socket");
    (down, cfg, nic, own)
}

/// ARP for lazynet's address reaches the socket; a ping to another address
/// of our end of the pair is passed to the kernel, which answers it.
#[test]
fn xdp_steers_our_address_and_passes_the_rest_to_the_kernel() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let (_down, cfg, mut nic, _own) = xdp_on(21, 512, 128);
    // ARP: the reply is for 10.201.21.2 and comes to us.
    let kernel_mac = arp_round_trip(&mut nic, 21);
    assert_ne!(kernel_mac, [0; 6]);
    // The kernel's own address on our end: its traffic is not ours.
    let ok = Command::new("ip")
        .args(["addr", "add", "10.201.21.9/24", "dev", &cfg.dev])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let ping = Command::new("ip")
        .args([
            "netns",
            "exec",
            &cfg.ns,
            "ping",
            "-c",
            "2",
            "-W",
            "2",
            "10.201.21.9",
        ])
        .output()
        .unwrap();
    assert!(
        ping.status.success(),
        "{}",
        String::from_utf8_lossy(&ping.stdout)
    );
    let st = nic.stats();
    assert!(st.rx_frames >= 1 && st.tx_frames >= 1, "{st:?}");
}

#[test]
fn xdp_nic_rejects_bad_descriptors_without_panicking() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let (_down, _cfg, mut nic, _own) = xdp_on(22, 256, 64);
    let free = nic.free_buffers();
    // Out of the area, or past the end of a buffer: refused, nothing sent.
    for bad in [
        Desc::new(u32::MAX, 10),
        Desc {
            buf: 0,
            off: 2047,
            len: 100,
        },
    ] {
        assert_eq!(nic.send(&[bad]), 0);
    }
    // Released twice, or never ours: counted, the free list unchanged.
    let mut b = [0u32; 2];
    assert_eq!(nic.alloc(&mut b), 2);
    nic.release(&[Desc::new(b[0], 0), Desc::new(b[1], 0)]);
    nic.release(&[Desc::new(b[0], 0), Desc::new(99_999, 0)]);
    assert_eq!(nic.free_buffers(), free);
    assert!(nic.stats().bad_desc >= 4, "{:?}", nic.stats());
    let mut out: [Desc; 0] = [];
    assert_eq!(nic.recv(&mut out), 0);
    // A good frame after all that still goes out and comes back complete.
    assert_eq!(nic.alloc(&mut b[..1]), 1);
    nic.buffers_mut().buf_mut(b[0]).unwrap()[..60].fill(0);
    assert_eq!(nic.send(&[Desc::new(b[0], 60)]), 1);
    for _ in 0..100 {
        nic.flush();
        if nic.stats().tx_completed == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(nic.stats().tx_completed, 1);
    assert_eq!(nic.free_buffers(), free);
}
