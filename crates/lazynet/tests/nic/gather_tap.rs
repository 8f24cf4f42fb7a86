//! TAP gather transmission against the real kernel (root only): an ARP
//! request whose Ethernet header is in a buffer and whose ARP body comes from
//! the ext area (one `writev`) gets the kernel's reply.
//!
//! Not root and `CI` != "true": prints "skipped: needs root".
#![cfg(not(loom))]

use std::time::{Duration, Instant};

use crate::util::Down;
use lazynet::mem::Desc;
use lazynet::nic::netns::{PeerNs, PeerNsConfig};
use lazynet::nic::tap::TapConfig;
use lazynet::nic::{ExtRef, Nic};

#[test]
fn tap_gather_arp_via_writev() {
    if !lazynet::sys::root_or_skip() {
        return;
    }
    let cfg = PeerNsConfig::unique(17);
    let peer = PeerNs::new(cfg);
    let _down = Down(peer.clone());
    let mac = [0x02, 0, 0, 0, 0x17, 0x02];
    let tcfg = TapConfig {
        mac,
        buf_count: 64,
        ext_bytes: 4096,
        ..TapConfig::default()
    };
    let (mut nic, _own) = peer.attach_or_create(&tcfg).expect("create");
    assert_eq!(nic.ext_capacity(), 4096);
    // ARP body (28 bytes) at an odd offset of the ext area.
    let mut body = [0u8; 28];
    body[..8].copy_from_slice(&[0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01]);
    body[8..14].copy_from_slice(&mac);
    body[14..18].copy_from_slice(&[10, 201, 17, 2]);
    body[24..28].copy_from_slice(&[10, 201, 17, 1]);
    let ext = ExtRef { off: 1001, len: 28 };
    nic.ext_area_mut().unwrap()[1001..1029].copy_from_slice(&body);
    let free0 = nic.free_buffers();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut next_send = Instant::now();
    let mut out = [Desc::default(); 16];
    let mut reply = false;
    while Instant::now() < deadline && !reply {
        if Instant::now() >= next_send {
            let mut b = [0u32; 1];
            assert_eq!(nic.alloc(&mut b), 1);
            let h = &mut nic.buffers_mut().buf_mut(b[0]).unwrap()[..14];
            h[..6].copy_from_slice(&[0xff; 6]);
            h[6..12].copy_from_slice(&mac);
            h[12..14].copy_from_slice(&[0x08, 0x06]);
            assert_eq!(nic.send_gather(&[(Desc::new(b[0], 14), ext)]), 1);
            next_send = Instant::now() + Duration::from_millis(250);
        }
        let _ = nic.wait_readable(Some(Duration::from_millis(100)));
        let n = nic.recv(&mut out);
        for d in &out[..n] {
            let f = nic.buffers().frame(*d).unwrap();
            reply |= f.len() >= 42
                && f[0..6] == mac
                && f[12..14] == [0x08, 0x06]
                && f[20..22] == [0x00, 0x02]
                && f[28..32] == [10, 201, 17, 1];
        }
        nic.release(&out[..n]);
    }
    assert!(reply, "no ARP reply to the gathered request within 5 s");
    assert_eq!(nic.free_buffers(), free0, "every buffer came back");
    // Out-of-range slices are refused; the frame stays the caller's.
    let mut b = [0u32; 1];
    assert_eq!(nic.alloc(&mut b), 1);
    let bad = ExtRef { off: 4090, len: 10 };
    assert_eq!(nic.send_gather(&[(Desc::new(b[0], 14), bad)]), 0);
    assert!(nic.stats().bad_desc >= 1);
    nic.release(&[Desc::new(b[0], 0)]);
    assert_eq!(nic.free_buffers(), free0);
}
