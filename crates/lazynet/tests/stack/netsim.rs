//! A deterministic simulated network: two lazynet stacks over the in-memory
//! wire with the fault injector on both ends (seeded loss, duplication,
//! reordering, corruption and delay in virtual time). UDP promises nothing
//! about delivery, so the checks are what UDP does promise: a datagram that
//! arrives is byte-exact (corruption is caught by the checksums, including
//! in fragments), ARP and reassembly recover, nothing leaks, and every frame
//! is accounted for.

use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use lazynet::nic::fault::{FaultConfig, FaultNic, FaultSpec};
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::socket::UdpSocket;
use lazynet::stack::{Stack, StackConfig};

use lazynet::testkit::{A, B};

fn faulty(end: WireEnd, seed: u64, p: f64, clock: &Arc<AtomicU64>) -> FaultNic<WireEnd> {
    let spec = FaultSpec {
        loss: p,
        duplicate: p / 2.0,
        reorder: p,
        reorder_gap: 2,
        corrupt: p,
        delay: p,
        delay_ns: 3_000_000,
    };
    let c = clock.clone();
    let cfg = FaultConfig {
        seed,
        rx: FaultSpec::default(),
        tx: spec,
        ..FaultConfig::default()
    };
    FaultNic::with_clock(end, cfg, Box::new(move || c.load(Ordering::Relaxed)))
}

/// The payload of datagram `seq`: its length and every byte derive from `seq`.
fn payload(seq: u32) -> Vec<u8> {
    let len = [8usize, 100, 1472, 3000, 9000][seq as usize % 5];
    let mut v: Vec<u8> = (0..len)
        .map(|i| (seq as usize * 31 + i * 7) as u8)
        .collect();
    v[..4].copy_from_slice(&seq.to_be_bytes());
    v
}

fn run(seed: u64, p: f64) {
    let (a, b) = WirePair::new(WireConfig {
        buf_count: 2048,
        ..WireConfig::default()
    })
    .unwrap();
    let clock = Arc::new(AtomicU64::new(0));
    let mut sa = Stack::new(
        faulty(a, seed, p, &clock),
        StackConfig {
            addr: A,
            seed,
            ..StackConfig::default()
        },
    );
    let mut sb = Stack::new(
        faulty(b, seed + 1, p, &clock),
        StackConfig {
            addr: B,
            seed: seed + 2,
            ..StackConfig::default()
        },
    );
    let ua = UdpSocket::bind(&mut sa, SocketAddrV4::new(A, 1000)).unwrap();
    let ub = UdpSocket::bind(&mut sb, SocketAddrV4::new(B, 7)).unwrap();
    let mut buf = vec![0u8; 65536];
    let (mut echoed, mut got) = (0u32, 0u32);
    let n = 3000u32;
    for seq in 0..n {
        let now = clock.fetch_add(200_000, Ordering::Relaxed) + 200_000; // 200 µs per datagram
        let _ = sa
            .udp_mut(ua)
            .send_to(&payload(seq), SocketAddrV4::new(B, 7), now);
        for _ in 0..4 {
            sa.poll(now);
            sb.poll(now);
            while let Ok((len, from)) = ub.recv_from(&mut sb, &mut buf) {
                let s = u32::from_be_bytes(buf[..4].try_into().unwrap());
                assert_eq!(&buf[..len], &payload(s)[..], "B got a damaged datagram");
                if sb.udp_mut(ub).send_to(&buf[..len], from, now).is_ok() {
                    echoed += 1;
                }
            }
            while let Ok((len, _)) = ua.recv_from(&mut sa, &mut buf) {
                let s = u32::from_be_bytes(buf[..4].try_into().unwrap());
                assert_eq!(&buf[..len], &payload(s)[..], "A got a damaged datagram");
                got += 1;
            }
        }
    }
    // Let delayed frames and timers run out.
    for _ in 0..100 {
        let now = clock.fetch_add(50_000_000, Ordering::Relaxed);
        sa.poll(now);
        sb.poll(now);
        while ua.recv_from(&mut sa, &mut buf).is_ok() {
            got += 1;
        }
    }
    for s in [&sa, &sb] {
        let st = s.stats();
        assert_eq!(
            st.frames_accounted() + s.queued_frames() as u64,
            st.rx_frames,
            "every frame accounted for"
        );
    }
    let (fa, fb) = (sa.nic().stats(), sb.nic().stats());
    // With p = 0 everything arrives exactly once.
    if p == 0.0 {
        assert_eq!((echoed, got), (n, n));
    } else {
        // Large datagrams (several fragments) are lost more often; most small ones arrive.
        assert!(
            got > n / 3,
            "seed {seed} p {p}: only {got} of {n} round trips"
        );
        assert!(
            fa.tx.corrupted > 0 && fb.tx.corrupted > 0,
            "faults were injected"
        );
        let drops = sa.stats().drops_for(lazynet::stack::StackDrop::UdpChecksum)
            + sb.stats().drops_for(lazynet::stack::StackDrop::UdpChecksum)
            + sa.stats().drops_for(lazynet::stack::StackDrop::IpChecksum)
            + sb.stats().drops_for(lazynet::stack::StackDrop::IpChecksum);
        assert!(drops > 0, "corruption was caught by checksums");
    }
}

#[test]
fn clean_wire_delivers_everything_once() {
    run(1, 0.0);
}

#[test]
fn faults_matrix_never_deliver_damage() {
    for (seed, p) in [(11, 0.01), (12, 0.03), (13, 0.05), (14, 0.10)] {
        run(seed, p);
    }
}
