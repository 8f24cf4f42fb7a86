//! FaultNic: determinism, loss rate, duplication, reordering, corruption,
//! delay (virtual time), bounded queues and buffer conservation.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use lazynet::mem::Desc;
use lazynet::nic::fault::{FaultConfig, FaultNic, FaultSpec};
use lazynet::nic::Nic;

use crate::util::Mock;

fn frame(id: u32) -> [u8; 64] {
    let mut f = [0u8; 64];
    f[..4].copy_from_slice(&id.to_be_bytes());
    for (i, b) in f[4..].iter_mut().enumerate() {
        *b = (id as usize * 7 + i) as u8;
    }
    f
}

fn id_of(f: &[u8]) -> u32 {
    u32::from_be_bytes([f[0], f[1], f[2], f[3]])
}

/// Sends frames `0..n` through `nic`, one per call (batches of `batch`).
fn send_ids(nic: &mut FaultNic<Mock>, ids: std::ops::Range<u32>, batch: usize) {
    let ids: Vec<u32> = ids.collect();
    for chunk in ids.chunks(batch) {
        let mut bufs = vec![0u32; chunk.len()];
        assert_eq!(nic.alloc(&mut bufs), chunk.len(), "out of buffers");
        let mut descs = Vec::new();
        for (b, id) in bufs.iter().zip(chunk) {
            nic.buffers_mut().buf_mut(*b).unwrap()[..64].copy_from_slice(&frame(*id));
            descs.push(Desc::new(*b, 64));
        }
        let s = nic.send(&descs);
        assert_eq!(s, descs.len(), "unexpected back-pressure");
    }
}

/// Injects frames into the mock and receives everything through the
/// injector; returns the received frames' bytes.
fn recv_ids(nic: &mut FaultNic<Mock>, ids: std::ops::Range<u32>) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut out = [Desc::default(); 16];
    for id in ids {
        nic.inner_mut().inject(&frame(id));
        if nic.inner().rx.len() >= 32 {
            drain(nic, &mut out, &mut got);
        }
    }
    drain(nic, &mut out, &mut got);
    got
}

fn drain(nic: &mut FaultNic<Mock>, out: &mut [Desc], got: &mut Vec<Vec<u8>>) {
    loop {
        let n = nic.recv(out);
        if n == 0 && nic.inner().rx.is_empty() {
            break;
        }
        for d in &out[..n] {
            got.push(nic.buffers().frame(*d).unwrap().to_vec());
        }
        nic.release(&out[..n]);
    }
}

fn mixed() -> FaultSpec {
    FaultSpec {
        loss: 0.05,
        duplicate: 0.05,
        reorder: 0.05,
        reorder_gap: 3,
        corrupt: 0.05,
        delay: 0.05,
        delay_ns: 50,
    }
}

fn run_mixed(seed: u64) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let cfg = FaultConfig {
        seed,
        rx: mixed(),
        tx: mixed(),
        ..FaultConfig::default()
    };
    let mut nic = FaultNic::new(Mock::new(512), cfg);
    for t in 0..50u32 {
        nic.set_now(u64::from(t) * 10);
        send_ids(&mut nic, t * 40..t * 40 + 40, 8);
        nic.flush();
    }
    let rx = recv_ids(&mut nic, 0..2000);
    nic.set_now(1_000_000);
    nic.release_all();
    nic.flush();
    let tx = std::mem::take(&mut nic.inner_mut().sent);
    (tx, rx)
}

#[test]
fn fault_same_seed_same_sequence() {
    let a = run_mixed(42);
    let b = run_mixed(42);
    let c = run_mixed(43);
    assert_eq!(a, b);
    assert_ne!(a.0, c.0);
    assert_ne!(a.1, c.1);
    // The faults really happened: not just the identity.
    let ids: Vec<u32> = a.0.iter().map(|f| id_of(f)).collect();
    assert_ne!(ids, (0..2000).collect::<Vec<_>>());
}

#[test]
fn fault_loss_rate_over_10k_frames() {
    let cfg = FaultConfig {
        seed: 7,
        tx: FaultSpec {
            loss: 0.1,
            ..FaultSpec::default()
        },
        ..FaultConfig::default()
    };
    let mut nic = FaultNic::new(Mock::new(128), cfg);
    send_ids(&mut nic, 0..10_000, 32);
    let st = nic.stats().tx;
    let sent = nic.inner().sent.len() as u64;
    assert_eq!(st.frames_in, 10_000);
    assert_eq!(sent + st.lost, 10_000);
    assert_eq!(st.frames_out, sent);
    assert!((850..=1150).contains(&st.lost), "lost {}", st.lost);
    // Order preserved and no buffer leaked.
    let ids: Vec<u32> = nic.inner().sent.iter().map(|f| id_of(f)).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(nic.inner().free.len() as u32, nic.inner().count);
}

#[test]
fn fault_duplication_on_receive() {
    let cfg = FaultConfig {
        seed: 1,
        rx: FaultSpec {
            duplicate: 0.3,
            ..FaultSpec::default()
        },
        ..FaultConfig::default()
    };
    let mut nic = FaultNic::new(Mock::new(256), cfg);
    let got = recv_ids(&mut nic, 0..1000);
    let st = nic.stats().rx;
    assert!(st.duplicated > 200 && st.duplicated < 400, "{st:?}");
    assert_eq!(got.len() as u64, 1000 + st.duplicated);
    // Every frame is intact, and a duplicate directly follows its original.
    let mut dups = 0;
    for w in got.windows(2) {
        assert!(w[0] == frame(id_of(&w[0])));
        if w[0] == w[1] {
            dups += 1;
        }
    }
    assert_eq!(dups, st.duplicated);
    assert_eq!(nic.inner().free.len() as u32, nic.inner().count);
}

#[test]
fn fault_duplicate_without_free_buffer_is_counted() {
    let cfg = FaultConfig {
        seed: 1,
        tx: FaultSpec {
            duplicate: 1.0,
            ..FaultSpec::default()
        },
        ..FaultConfig::default()
    };
    let mut nic = FaultNic::new(Mock::new(4), cfg);
    let mut bufs = [0u32; 4];
    assert_eq!(nic.alloc(&mut bufs), 4); // pool now empty
    let descs: Vec<Desc> = bufs.iter().map(|b| Desc::new(*b, 64)).collect();
    assert_eq!(nic.send(&descs), 4);
    let st = nic.stats().tx;
    // The first send frees its buffer only after the batch: no duplicates.
    assert_eq!(st.duplicated + st.dup_no_buffer, 4);
    assert!(st.dup_no_buffer >= 1);
    assert_eq!(nic.inner().sent.len() as u64, 4 + st.duplicated);
}

#[test]
fn fault_reordering_keeps_every_frame_once() {
    let cfg = FaultConfig {
        seed: 9,
        tx: FaultSpec {
            reorder: 0.2,
            reorder_gap: 1,
            ..FaultSpec::default()
        },
        ..FaultConfig::default()
    };
    let mut nic = FaultNic::new(Mock::new(128), cfg);
    send_ids(&mut nic, 0..1000, 16);
    nic.release_all();
    let st = nic.stats().tx;
    assert!(st.reordered > 100, "{st:?}");
    let ids: Vec<u32> = nic.inner().sent.iter().map(|f| id_of(f)).collect();
    assert_ne!(ids, (0..1000).collect::<Vec<_>>(), "order changed");
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        (0..1000).collect::<Vec<_>>(),
        "each frame exactly once"
    );
    // gap 1: a held frame is overtaken by the next emitted frame(s).
    let inversions = ids.windows(2).filter(|w| w[0] > w[1]).count();
    assert!(inversions as u64 >= st.reordered / 2);
}

#[test]
fn fault_corruption_flips_exactly_one_bit() {
    let cfg = FaultConfig {
        seed: 3,
        rx: FaultSpec {
            corrupt: 1.0,
            ..FaultSpec::default()
        },
        ..FaultConfig::default()
    };
    let mut nic = FaultNic::new(Mock::new(64), cfg);
    // Corruption may hit the id, so match by position: order is kept.
    let got = recv_ids(&mut nic, 0..200);
    assert_eq!(got.len(), 200);
    for (i, f) in got.iter().enumerate() {
        let orig = frame(i as u32);
        let bits: u32 = f
            .iter()
            .zip(orig.iter())
            .map(|(a, b)| (a ^ b).count_ones())
            .sum();
        assert_eq!(bits, 1, "frame {i}");
    }
    assert_eq!(nic.stats().rx.corrupted, 200);
}

#[test]
fn fault_delay_uses_virtual_time() {
    let cfg = FaultConfig {
        seed: 5,
        tx: FaultSpec {
            delay: 1.0,
            delay_ns: 1_000,
            ..FaultSpec::default()
        },
        rx: FaultSpec {
            delay: 1.0,
            delay_ns: 500,
            ..FaultSpec::default()
        },
        ..FaultConfig::default()
    };
    let mut nic = FaultNic::new(Mock::new(64), cfg);
    nic.set_now(0);
    send_ids(&mut nic, 0..10, 10);
    assert!(nic.inner().sent.is_empty());
    nic.set_now(999);
    nic.flush();
    assert!(nic.inner().sent.is_empty());
    nic.set_now(1_000);
    nic.flush();
    let ids: Vec<u32> = nic.inner().sent.iter().map(|f| id_of(f)).collect();
    assert_eq!(ids, (0..10).collect::<Vec<_>>());
    assert_eq!(nic.stats().tx.delayed, 10);

    // Receive direction, with a clock function instead of set_now.
    let t = Arc::new(AtomicU64::new(0));
    let t2 = t.clone();
    let mut nic = FaultNic::with_clock(
        Mock::new(64),
        cfg,
        Box::new(move || t2.load(Ordering::Relaxed)),
    );
    for id in 0..5 {
        nic.inner_mut().inject(&frame(id));
    }
    let mut out = [Desc::default(); 8];
    assert_eq!(nic.recv(&mut out), 0);
    t.store(499, Ordering::Relaxed);
    assert_eq!(nic.recv(&mut out), 0);
    t.store(500, Ordering::Relaxed);
    let n = nic.recv(&mut out);
    assert_eq!(n, 5);
    nic.release(&out[..n]);
}

#[test]
fn fault_queues_are_bounded() {
    let cfg = FaultConfig {
        seed: 11,
        tx: FaultSpec {
            delay: 1.0,
            delay_ns: 1_000,
            ..FaultSpec::default()
        },
        queue_limit: 8,
        ..FaultConfig::default()
    };
    let mut nic = FaultNic::new(Mock::new(64), cfg);
    send_ids(&mut nic, 0..20, 20);
    let st = nic.stats().tx;
    assert_eq!(st.delayed, 8);
    assert_eq!(st.overflow, 12);
    assert_eq!(nic.queued(), (0, 8));
    // Dropped frames went back to the inner NIC's pool.
    assert_eq!(nic.inner().free.len(), 64 - 8);

    // Back-pressure: the inner NIC accepts nothing, the ready queue fills to
    // its limit and `send` accepts no more.
    let cfg = FaultConfig {
        queue_limit: 8,
        ..FaultConfig::default()
    };
    let mut mock = Mock::new(64);
    mock.tx_cap = 0;
    let mut nic = FaultNic::new(mock, cfg);
    let mut bufs = [0u32; 20];
    assert_eq!(nic.alloc(&mut bufs), 20);
    let descs: Vec<Desc> = bufs.iter().map(|b| Desc::new(*b, 64)).collect();
    assert_eq!(nic.send(&descs), 8);
    assert_eq!(nic.queued(), (0, 8));
    nic.inner_mut().tx_cap = usize::MAX;
    nic.flush();
    assert_eq!(nic.queued(), (0, 0));
    assert_eq!(nic.inner().sent.len(), 8);
    nic.release(&descs[8..]);
    drop(nic);
}

#[test]
fn fault_invalid_descriptors_and_odd_probabilities_do_not_panic() {
    let cfg = FaultConfig {
        seed: 0,
        tx: FaultSpec {
            loss: f64::NAN,
            duplicate: -3.0,
            reorder: 7.0,
            reorder_gap: 0,
            corrupt: f64::INFINITY,
            delay: 0.5,
            delay_ns: u64::MAX,
        },
        queue_limit: 0,
        batch: 0,
        ..FaultConfig::default()
    };
    let mut nic = FaultNic::new(Mock::new(8), cfg);
    nic.set_now(u64::MAX);
    let _ = nic.send(&[
        Desc::new(u32::MAX, 5),
        Desc {
            buf: 0,
            off: 2040,
            len: 100,
        },
    ]);
    send_ids(&mut nic, 0..3, 1);
    nic.flush();
    nic.release_all();
    let mut out = [Desc::default(); 4];
    let _ = nic.recv(&mut out);
    assert!(nic.stats().tx.invalid >= 2);
}
