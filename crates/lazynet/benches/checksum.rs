//! Internet checksum throughput (`wire::checksum`) at minimum-frame, MTU and
//! jumbo sizes, against the `internet-checksum` crate as a baseline.
//!
//! Run: `cargo bench --bench checksum -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lazynet::wire::checksum;

fn bench_checksum(c: &mut Criterion) {
    let mut g = c.benchmark_group("checksum");
    for size in [64usize, 1500, 9000] {
        let data: Vec<u8> = (0..size).map(|i| (i * 31 + 7) as u8).collect();
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_with_input(BenchmarkId::new("lazynet", size), &data, |b, d| {
            b.iter(|| checksum::checksum(black_box(d)))
        });
        g.bench_with_input(
            BenchmarkId::new("internet-checksum", size),
            &data,
            |b, d| b.iter(|| internet_checksum::checksum(black_box(d))),
        );
    }
    g.finish();
}

/// The transmit path's payload copy: `copy_from_slice` then `partial`
/// (two passes) against the fused `copy_and_partial` (one pass).
fn bench_copy_sum(c: &mut Criterion) {
    let mut g = c.benchmark_group("copy_sum");
    for size in [1usize, 64, 1448, 9000] {
        let data: Vec<u8> = (0..size).map(|i| (i * 31 + 7) as u8).collect();
        let mut out = vec![0u8; size];
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_function(BenchmarkId::new("copy+partial", size), |b| {
            b.iter(|| {
                out.copy_from_slice(black_box(&data));
                checksum::partial(black_box(&out), 0)
            })
        });
        g.bench_function(BenchmarkId::new("copy_and_partial", size), |b| {
            b.iter(|| checksum::copy_and_partial(black_box(&data), black_box(&mut out), 0))
        });
    }
    g.finish();
}

criterion_group!(benches, bench_checksum, bench_copy_sum);
criterion_main!(benches);
