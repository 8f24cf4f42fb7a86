//! Ring throughput and round-trip latency between two processes pinned to
//! cores 0 and 1, sharing one memfd region (`cargo bench --bench ring`).
//!
//! The peer is this binary re-executed with `LAZYNET_RING_BENCH_FD` naming the
//! inherited memfd. Throughput: the parent pushes 50 M descriptors in
//! batches of `BATCH`, the child pops and checks them; timed from the first
//! push until the ring has drained. Latency: one `u32` ping, one pong.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::time::Instant;

use lazynet::mem::ring::{layout_size, Consumer, Producer, Ring};
use lazynet::mem::{Desc, Region};

const ENV_FD: &str = "LAZYNET_RING_BENCH_FD";
const CAP: u32 = 4096;
const BATCH: usize = 64;
const ENV_QUICK: &str = "LAZYNET_RING_BENCH_QUICK";

/// (descriptors per repetition, repetitions, pings). `cargo bench` passes
/// `--bench`; without it (`cargo test --benches`) a short smoke test runs,
/// and the parent tells its peer so through `ENV_QUICK`.
fn sizes(quick: bool) -> (u64, usize, usize) {
    if quick {
        (1_000_000, 1, 1_000)
    } else {
        (50_000_000, 5, 200_000)
    }
}
const PING_CAP: u32 = 64;

fn offsets() -> (usize, usize, usize, usize) {
    let data = 0;
    let ping = data + layout_size::<Desc>(CAP);
    let pong = ping + layout_size::<u32>(PING_CAP);
    let end = pong + layout_size::<u32>(PING_CAP);
    (data, ping, pong, end)
}

fn pin(cpu: usize) {
    if !lazynet::sys::pin_thread(cpu) {
        eprintln!("warning: could not pin to cpu {cpu}");
    }
}

fn child(fd: OwnedFd) {
    pin(1);
    let region = Region::open(fd).unwrap();
    let (data, ping, pong, _) = offsets();
    let mut rx = Consumer::<Desc>::attach(&region, data).unwrap();
    let mut pings = Consumer::<u32>::attach(&region, ping).unwrap();
    let mut pongs = Producer::<u32>::attach(&region, pong).unwrap();
    let mut buf = [Desc::default(); BATCH];
    let (per_rep, reps, pings_n) = sizes(std::env::var_os(ENV_QUICK).is_some());
    let total = per_rep * reps as u64;
    let mut expect = 0u64;
    while expect < total {
        let n = rx.pop(&mut buf);
        for d in &buf[..n] {
            if d.buf != expect as u32 {
                eprintln!("sequence error: got {} want {}", d.buf, expect as u32);
                std::process::exit(1);
            }
            expect += 1;
        }
        if n == 0 {
            std::hint::spin_loop();
        }
    }
    let mut done = 0;
    while done < pings_n {
        if let Some(v) = pings.pop_one() {
            while pongs.push_one(v).is_err() {}
            done += 1;
        } else {
            std::hint::spin_loop();
        }
    }
}

fn main() {
    if let Ok(fd) = std::env::var(ENV_FD) {
        // SAFETY: the parent passed us this inherited fd; nothing else owns it.
        child(unsafe { OwnedFd::from_raw_fd(fd.parse().unwrap()) });
        return;
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let quick = !std::env::args().any(|a| a == "--bench");
    let (per_rep, reps, pings_n) = sizes(quick);
    pin(0);
    let (data, ping, pong, end) = offsets();
    let region = Region::create("ring-bench", end).unwrap();
    Ring::<Desc>::init(&region, data, CAP).unwrap();
    Ring::<u32>::init(&region, ping, PING_CAP).unwrap();
    Ring::<u32>::init(&region, pong, PING_CAP).unwrap();
    let mut tx = Producer::<Desc>::attach(&region, data).unwrap();
    let mut pings = Producer::<u32>::attach(&region, ping).unwrap();
    let mut pongs = Consumer::<u32>::attach(&region, pong).unwrap();
    let fd = region.dup_inheritable().unwrap();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.env(ENV_FD, fd.as_raw_fd().to_string());
    if quick {
        cmd.env(ENV_QUICK, "1");
    }
    let mut peer = cmd.spawn().unwrap();
    drop(fd);

    println!(
        "ring bench: {reps} x {per_rep} descriptors, batch {BATCH}, capacity {CAP}, cores 0 -> 1"
    );
    let mut seq = 0u64;
    let mut batch = [Desc::default(); BATCH];
    let mut rates = Vec::new();
    for rep in 0..reps {
        let t0 = Instant::now();
        let end = seq + per_rep;
        while seq < end {
            let k = ((end - seq) as usize).min(BATCH);
            for (i, d) in batch[..k].iter_mut().enumerate() {
                *d = Desc::new((seq + i as u64) as u32, 64);
            }
            let mut off = 0;
            while off < k {
                let n = tx.push(&batch[off..k]);
                if n == 0 {
                    std::hint::spin_loop();
                }
                off += n;
            }
            seq += k as u64;
        }
        while !tx.is_empty() {
            std::hint::spin_loop();
        }
        let secs = t0.elapsed().as_secs_f64();
        let rate = per_rep as f64 / secs / 1e6;
        println!("  rep {rep}: {rate:.1} M desc/s ({secs:.3} s)");
        rates.push(rate);
    }
    rates.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "throughput median: {:.1} M descriptors/s (goal >= 20)",
        rates[reps / 2]
    );

    let mut lat = Vec::with_capacity(pings_n);
    for i in 0..pings_n {
        let t = Instant::now();
        while pings.push_one(i as u32).is_err() {}
        loop {
            if let Some(v) = pongs.pop_one() {
                assert_eq!(v, i as u32);
                break;
            }
            std::hint::spin_loop();
        }
        lat.push(t.elapsed().as_nanos() as u64);
    }
    lat.sort_unstable();
    let q = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    println!(
        "round trip ({pings_n} pings): p50 {} ns, p99 {} ns, p99.9 {} ns",
        q(0.5),
        q(0.99),
        q(0.999)
    );
    let st = peer.wait().unwrap();
    assert!(st.success(), "peer failed: {st}");
}
