//! Arbitrary frames through a running stack: the input is split into frames
//! (2-byte big-endian length prefixes), injected on the in-memory wire,
//! polled, and read by two sockets. Checks that nothing panics, every frame
//! is accounted for and every buffer comes back.
#![no_main]

use std::net::{Ipv4Addr, SocketAddrV4};

use lazynet::mem::Desc;
use lazynet::nic::wirepair::{WireConfig, WirePair};
use lazynet::nic::Nic;
use lazynet::socket::UdpSocket;
use lazynet::stack::{Stack, StackConfig};
use libfuzzer_sys::fuzz_target;

const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fuzz_target!(|data: &[u8]| {
    let (mut a, b) = WirePair::new(WireConfig { buf_count: 256, ring_capacity: 64, ..WireConfig::default() }).unwrap();
    let mut stack = Stack::new(b, StackConfig { addr: B, seed: 1, ..StackConfig::default() });
    let s7 = UdpSocket::bind(&mut stack, SocketAddrV4::new(B, 7)).unwrap();
    let s9 = UdpSocket::bind(&mut stack, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9)).unwrap();
    let (a0, b0) = (a.free_buffers(), stack.nic().free_buffers());
    let mut rest = data;
    let mut now = 0u64;
    let mut buf = [0u8; 2048];
    let mut ds = [Desc::default(); 64];
    while rest.len() >= 2 {
        let len = (u16::from_be_bytes([rest[0], rest[1]]) as usize).min(rest.len() - 2).min(2048);
        let frame = &rest[2..2 + len];
        rest = &rest[2 + len..];
        let mut bi = [0u32];
        if a.alloc(&mut bi) == 1 {
            a.buffers_mut().buf_mut(bi[0]).unwrap()[..len].copy_from_slice(frame);
            if a.send(&[Desc::new(bi[0], len as u16)]) == 0 {
                a.release(&[Desc::new(bi[0], 0)]);
            }
        }
        now += 7_000_000;
        stack.poll(now);
        let _ = s7.recv_from(&mut stack, &mut buf);
        let _ = s9.recv_from(&mut stack, &mut buf);
        let n = a.recv(&mut ds);
        a.release(&ds[..n]);
    }
    for _ in 0..40 {
        now += 1_000_000_000;
        stack.poll(now);
    }
    while s7.recv_from(&mut stack, &mut buf).is_ok() || s9.recv_from(&mut stack, &mut buf).is_ok() {}
    let st = stack.stats();
    assert_eq!(st.frames_accounted() + stack.queued_frames() as u64, st.rx_frames);
    s7.close(&mut stack).unwrap();
    s9.close(&mut stack).unwrap();
    stack.poll(now);
    loop {
        let n = a.recv(&mut ds);
        a.release(&ds[..n]);
        if n == 0 {
            break;
        }
    }
    a.reclaim();
    stack.nic_mut().reclaim();
    assert_eq!((a.free_buffers(), stack.nic().free_buffers()), (a0, b0), "buffers leaked");
});
