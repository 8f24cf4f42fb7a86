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

criterion_group!(benches, bench_checksum);
criterion_main!(benches);
