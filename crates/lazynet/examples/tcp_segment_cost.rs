//! Instructions per segment through `Connection::handle_segment`, fast path
//! on or off, for valgrind: every `handle_segment` call goes through the
//! never-inlined `feed_data` / `feed_ack`, so callgrind can count exactly
//! them:
//!
//! ```text
//! cargo build --release -p lazynet --example tcp_segment_cost
//! valgrind --tool=callgrind --collect-atstart=no \
//!     --toggle-collect='tcp_segment_cost::feed_data*' \
//!     target/release/examples/tcp_segment_cost data on 100000
//! ```
//!
//! (`Ir` divided by N; `feed_ack` and `ack` for pure ACKs.) Whole-program
//! counts for N and 2N differenced give the same per-segment cost plus the
//! unmeasured bookkeeping (reading, our ACKs, queueing data).
//!
//! Usage: `tcp_segment_cost data|ack on|off N`

use std::hint::black_box;

use lazynet::proto::tcp::Connection;
use lazynet::wire::tcp::TcpRepr;

#[path = "../benches/common/tcp_seg.rs"]
mod tcp_seg;
use tcp_seg::{Driver, CHUNK};

#[inline(never)]
fn feed_data(c: &mut Connection, now: u64, r: &TcpRepr, p: &[u8]) {
    black_box(c.handle_segment(now, r, p)).unwrap();
}

#[inline(never)]
fn feed_ack(c: &mut Connection, now: u64, r: &TcpRepr) {
    black_box(c.handle_segment(now, r, &[])).unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: tcp_segment_cost data|ack on|off N";
    let kind = args.get(1).expect(usage).as_str();
    let fast = match args.get(2).map(String::as_str) {
        Some("on") => true,
        Some("off") => false,
        _ => panic!("{usage}"),
    };
    let n: usize = args.get(3).and_then(|s| s.parse().ok()).expect(usage);
    let mut d = Driver::new(fast);
    let mut segs = Vec::with_capacity(CHUNK);
    let mut left = n;
    while left > 0 {
        match kind {
            "data" => {
                d.data_segs(left, &mut segs);
                let payload = d.payload().to_vec();
                for (now, r) in &segs {
                    feed_data(&mut d.c, *now, r, &payload);
                }
                d.data_done(segs.len());
            }
            "ack" => {
                d.ack_segs(left, &mut segs);
                for (now, r) in &segs {
                    feed_ack(&mut d.c, *now, r);
                }
                d.acks_done(&segs);
            }
            _ => panic!("{usage}"),
        }
        left -= segs.len();
    }
    let k = d.c.counters();
    println!(
        "{kind} fast_path={fast}: {n} segments, {} taken by the fast path, {} in",
        k.fast_path, k.segs_in
    );
}
