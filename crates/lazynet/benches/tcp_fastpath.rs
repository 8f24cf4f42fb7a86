//! Header prediction (`proto/tcp/conn/fast.rs`): ns per in-order data segment
//! and per pure ACK through `Connection::handle_segment`, fast path on and
//! off. Only the `handle_segment` calls are timed (chunks of up to 32
//! segments); reading the data and sending our ACKs in between is not.
//!
//! Run: `cargo bench --bench tcp_fastpath -- --warm-up-time 1 --measurement-time 3`
//! Instructions per segment: `examples/tcp_segment_cost.rs`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

#[path = "common/tcp_seg.rs"]
mod tcp_seg;
use tcp_seg::{Driver, CHUNK};

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("tcp_handle_segment");
    g.throughput(Throughput::Elements(1));
    for (name, fast) in [("fast_path_on", true), ("fast_path_off", false)] {
        g.bench_function(BenchmarkId::new("data_1448", name), |b| {
            let mut d = Driver::new(fast);
            let mut segs = Vec::with_capacity(CHUNK);
            b.iter_custom(|iters| {
                let mut left = iters as usize;
                let mut t = Duration::ZERO;
                while left > 0 {
                    d.data_segs(left, &mut segs);
                    let payload = d.payload().to_vec();
                    let start = Instant::now();
                    for (now, r) in &segs {
                        let res = d.c.handle_segment(*now, black_box(r), black_box(&payload));
                        black_box(res).unwrap();
                    }
                    t += start.elapsed();
                    d.data_done(segs.len());
                    left -= segs.len();
                }
                t
            })
        });
        g.bench_function(BenchmarkId::new("pure_ack", name), |b| {
            let mut d = Driver::new(fast);
            let mut segs = Vec::with_capacity(CHUNK);
            b.iter_custom(|iters| {
                let mut left = iters as usize;
                let mut t = Duration::ZERO;
                while left > 0 {
                    d.ack_segs(left, &mut segs);
                    let start = Instant::now();
                    for (now, r) in &segs {
                        black_box(d.c.handle_segment(*now, black_box(r), &[])).unwrap();
                    }
                    t += start.elapsed();
                    d.acks_done(&segs);
                    left -= segs.len();
                }
                t
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
