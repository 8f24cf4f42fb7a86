//! Classifier cost per frame with 10 and with 100,000 bound UDP sockets.
//!
//! Goal: the two within 1.5× of each other — lookup cost must not
//! grow with the number of sockets. 100,000 sockets need two local addresses
//! (one address has at most 65,535 ports). "spread" classifies 4096 frames to
//! distinct random sockets (the table does not stay in L1); "hot" one frame.
//! "tcp_spread" does the same for TCP segments over 10 and 10,000
//! connections (the 4-tuple table); "tcp_hot" classifies one connection's
//! segment 4096 times (the last-hit memo).

use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddrV4};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lazynet::demux::{Classifier, Verdict};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const ADDRS: [Ipv4Addr; 2] = [Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(10, 0, 1, 2)];

fn frame(dst: Ipv4Addr, port: u16) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8 + 64];
    f[0..6].copy_from_slice(&MAC);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((20 + 8 + 64) as u16).to_be_bytes());
    f[23] = 17;
    f[30..34].copy_from_slice(&dst.octets());
    f[36..38].copy_from_slice(&port.to_be_bytes());
    f
}

fn setup(n: usize) -> (Classifier, Vec<Vec<u8>>) {
    let mut c = Classifier::new(MAC, ADDRS[0], 24, 64, 64);
    c.add_addr(ADDRS[1]);
    let mut bound = Vec::with_capacity(n);
    for i in 0..n {
        let (addr, port) = (ADDRS[i / 50_000], 1 + (i % 50_000) as u16);
        c.bind_udp(addr, port, 4).expect("bind");
        bound.push((addr, port));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let frames = (0..4096)
        .map(|_| {
            let (a, p) = bound[rng.random_range(0..n)];
            frame(a, p)
        })
        .collect();
    (c, frames)
}

/// A TCP segment from `src` to ADDRS[0]:80.
fn tcp_frame(src: SocketAddrV4) -> Vec<u8> {
    let mut f = frame(ADDRS[0], 80);
    f[23] = 6;
    f[16..18].copy_from_slice(&((20 + 20 + 52) as u16).to_be_bytes());
    f[26..30].copy_from_slice(&src.ip().octets());
    f[34..36].copy_from_slice(&src.port().to_be_bytes());
    f[36..38].copy_from_slice(&80u16.to_be_bytes());
    f
}

/// `n` TCP connections to ADDRS[0]:80 (the 4-tuple table).
fn setup_tcp(n: usize) -> (Classifier, Vec<Vec<u8>>) {
    let mut c = Classifier::new(MAC, ADDRS[0], 24, 64, 64);
    let local = SocketAddrV4::new(ADDRS[0], 80);
    let mut peers = Vec::with_capacity(n);
    for i in 0..n {
        let p = SocketAddrV4::new(
            Ipv4Addr::new(10, 0, 0, 100 + (i / 20_000) as u8),
            20_000 + (i % 20_000) as u16,
        );
        c.bind_tcp_conn(local, p, 2).expect("bind");
        peers.push(p);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let frames = (0..4096)
        .map(|_| tcp_frame(peers[rng.random_range(0..n)]))
        .collect();
    (c, frames)
}

fn bench(cr: &mut Criterion) {
    let mut g = cr.benchmark_group("classify");
    for n in [10usize, 100_000] {
        let (c, frames) = setup(n);
        assert!(frames
            .iter()
            .all(|f| matches!(c.classify(f), Verdict::Channel(_))));
        g.throughput(Throughput::Elements(frames.len() as u64));
        g.bench_function(format!("spread/{n}"), |b| {
            b.iter(|| {
                for f in &frames {
                    black_box(c.classify(black_box(f)));
                }
            })
        });
        g.throughput(Throughput::Elements(1));
        g.bench_function(format!("hot/{n}"), |b| {
            b.iter(|| black_box(c.classify(black_box(&frames[0]))))
        });
    }
    for n in [10usize, 10_000] {
        let (c, frames) = setup_tcp(n);
        assert!(frames
            .iter()
            .all(|f| matches!(c.classify(f), Verdict::Channel(ch) if ch.0 > 1)));
        g.throughput(Throughput::Elements(frames.len() as u64));
        g.bench_function(format!("tcp_spread/{n}"), |b| {
            b.iter(|| {
                for f in &frames {
                    black_box(c.classify(black_box(f)));
                }
            })
        });
        // One connection's run of segments (a bulk or request/response
        // flow): what the last-hit memo is for.
        g.bench_function(format!("tcp_hot/{n}"), |b| {
            b.iter(|| {
                for _ in &frames {
                    black_box(c.classify(black_box(&frames[0])));
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
