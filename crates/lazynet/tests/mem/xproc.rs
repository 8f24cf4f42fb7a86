//! Cross-process tests: two processes map one memfd region. The peer is this
//! test binary re-executed (no fork in a multithreaded harness) with an
//! environment variable naming its role and the inherited memfd's number.
#![cfg(not(loom))]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lazynet::mem::ring::{self, Consumer, Producer, Ring};
use lazynet::mem::{Desc, Region};
use lazynet::nic::wirepair::{Side, WireConfig, WireEnd, WirePair};
use lazynet::nic::{ExtRef, Nic};

const ENV_ROLE: &str = "LAZYNET_XPROC_ROLE";
const ENV_FD: &str = "LAZYNET_XPROC_FD";
const TIMEOUT: Duration = Duration::from_secs(60);

/// Starts this binary running only `test`, as `role`, with the region's fd.
fn spawn_peer(test: &str, role: &str, region: &Region) -> Child {
    // The duplicate has FD_CLOEXEC clear, so the child inherits it; our copy
    // is closed when `fd` drops after spawning.
    let fd = region.dup_inheritable().unwrap();
    Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(ENV_ROLE, role)
        .env(ENV_FD, fd.as_raw_fd().to_string())
        .spawn()
        .unwrap()
}

/// In the peer process: the inherited fd, if we are `role`.
fn peer_fd(role: &str) -> Option<OwnedFd> {
    if std::env::var(ENV_ROLE).ok()? != role {
        return None;
    }
    let fd: i32 = std::env::var(ENV_FD).ok()?.parse().ok()?;
    // SAFETY: the parent passed us this inherited fd, which nothing else in
    // this process owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn wait_ok(mut child: Child) {
    let st = child.wait().unwrap();
    assert!(st.success(), "peer failed: {st}");
}

fn backoff(spins: &mut u32, start: Instant) {
    *spins += 1;
    if *spins % 64 == 0 {
        std::thread::yield_now();
        assert!(start.elapsed() < TIMEOUT, "cross-process test timed out");
    } else {
        std::hint::spin_loop();
    }
}

const RING_CAP: u32 = 4096;
const DATA_OFF: usize = 0;

fn ret_off() -> usize {
    ring::layout_size::<u32>(RING_CAP)
}

fn items() -> u32 {
    if cfg!(debug_assertions) {
        500_000
    } else {
        5_000_000
    }
}

/// Parent pushes 0..N on the data ring; the child checks the sequence and
/// pushes every value back on the return ring; the parent checks it too.
#[test]
fn ring_moves_millions_between_processes() {
    const ROLE: &str = "ring-peer";
    if let Some(fd) = peer_fd(ROLE) {
        let region = Region::open(fd).unwrap();
        let mut rx = Consumer::<u32>::attach(&region, DATA_OFF).unwrap();
        let mut tx = Producer::<u32>::attach(&region, ret_off()).unwrap();
        let n = items();
        let mut expect = 0u32;
        let mut buf = [0u32; 256];
        let (start, mut spins) = (Instant::now(), 0);
        while expect < n {
            let room = tx.free().min(buf.len());
            let got = rx.pop(&mut buf[..room]);
            if got == 0 {
                backoff(&mut spins, start);
                continue;
            }
            for &v in &buf[..got] {
                assert_eq!(v, expect, "lost or duplicated index");
                expect += 1;
            }
            assert_eq!(tx.push(&buf[..got]), got);
        }
        assert_eq!(rx.corrupt() + tx.corrupt(), 0);
        return;
    }
    let region = Region::create("xproc-ring", ret_off() * 2).unwrap();
    Ring::<u32>::init(&region, DATA_OFF, RING_CAP).unwrap();
    Ring::<u32>::init(&region, ret_off(), RING_CAP).unwrap();
    let mut tx = Producer::<u32>::attach(&region, DATA_OFF).unwrap();
    let mut rx = Consumer::<u32>::attach(&region, ret_off()).unwrap();
    let child = spawn_peer(
        "xproc::ring_moves_millions_between_processes",
        ROLE,
        &region,
    );
    let n = items();
    let (mut sent, mut back) = (0u32, 0u32);
    let mut out = [0u32; 256];
    let mut buf = [0u32; 256];
    let t0 = Instant::now();
    let mut spins = 0;
    while back < n {
        let mut progress = false;
        if sent < n {
            let k = (n - sent).min(out.len() as u32) as usize;
            for (i, v) in out[..k].iter_mut().enumerate() {
                *v = sent + i as u32;
            }
            let pushed = tx.push(&out[..k]);
            sent += pushed as u32;
            progress |= pushed > 0;
        }
        let got = rx.pop(&mut buf);
        for &v in &buf[..got] {
            assert_eq!(v, back, "return ring lost or duplicated an index");
            back += 1;
        }
        progress |= got > 0;
        if !progress {
            backoff(&mut spins, t0);
        }
    }
    wait_ok(child);
    eprintln!("{n} indices each way in {:?}", t0.elapsed());
}

const FRAMES: u32 = 20_000;

fn pattern(seq: u32, k: usize) -> u8 {
    (seq as usize).wrapping_mul(7).wrapping_add(k) as u8
}

/// A sends numbered frames to B in another process; B checks each byte,
/// rewrites the first byte and echoes the same buffer back; A checks it.
#[test]
fn wirepair_between_processes() {
    const ROLE: &str = "wire-peer";
    if let Some(fd) = peer_fd(ROLE) {
        let mut b = WireEnd::attach(fd, Side::B).unwrap();
        let mut rx = [Desc::default(); 32];
        let mut seen = 0u32;
        let (start, mut spins) = (Instant::now(), 0);
        while seen < FRAMES {
            let got = b.recv(&mut rx);
            if got == 0 {
                backoff(&mut spins, start);
                continue;
            }
            for d in &rx[..got] {
                let f = b.buffers().frame(*d).unwrap();
                let seq = u32::from_le_bytes(f[..4].try_into().unwrap());
                assert_eq!(seq, seen, "frame lost or reordered");
                assert!(f[4..]
                    .iter()
                    .enumerate()
                    .all(|(k, &x)| x == pattern(seq, k + 4)));
                b.buffers_mut().buf_mut(d.buf).unwrap()[4] ^= 0xff;
                seen += 1;
            }
            let mut off = 0;
            while off < got {
                off += b.send(&rx[off..got]);
                if off < got {
                    backoff(&mut spins, start);
                }
            }
        }
        let s = b.stats();
        assert_eq!(s.rx_bad_desc + s.ret_bad + s.ring_corrupt, 0, "{s:?}");
        return;
    }
    let cfg = WireConfig {
        buf_count: 256,
        ring_capacity: 64,
        ..WireConfig::default()
    };
    let (mut a, region): (WireEnd, Arc<Region>) = WirePair::create(cfg).unwrap();
    let child = spawn_peer("xproc::wirepair_between_processes", ROLE, &region);
    let (mut sent, mut back) = (0u32, 0u32);
    let mut ids = [0u32; 16];
    let mut pending: Vec<Desc> = Vec::with_capacity(16);
    let mut rx = [Desc::default(); 32];
    let (t0, mut spins) = (Instant::now(), 0);
    while back < FRAMES {
        if pending.is_empty() && sent < FRAMES {
            let want = ((FRAMES - sent) as usize).min(ids.len());
            let n = a.alloc(&mut ids[..want]);
            for (i, &id) in ids[..n].iter().enumerate() {
                let seq = sent + i as u32;
                let len = 64 + (seq as usize % 1400);
                let buf = a.buffers_mut().buf_mut(id).unwrap();
                buf[..4].copy_from_slice(&seq.to_le_bytes());
                for (k, x) in buf[4..len].iter_mut().enumerate() {
                    *x = pattern(seq, k + 4);
                }
                pending.push(Desc::new(id, len as u16));
            }
            sent += n as u32;
        }
        let k = a.send(&pending);
        pending.drain(..k);
        let got = a.recv(&mut rx);
        for d in &rx[..got] {
            let f = a.buffers().frame(*d).unwrap();
            let seq = u32::from_le_bytes(f[..4].try_into().unwrap());
            assert_eq!(seq, back);
            assert_eq!(f[4], pattern(seq, 4) ^ 0xff);
            back += 1;
        }
        a.release(&rx[..got]);
        if k == 0 && got == 0 {
            backoff(&mut spins, t0);
        }
    }
    wait_ok(child);
    let s = a.stats();
    assert_eq!(
        s.rx_bad_desc + s.ret_bad + s.release_bad + s.ring_corrupt,
        0,
        "{s:?}"
    );
    let mut all = vec![0u32; 256];
    assert_eq!(a.alloc(&mut all), 128, "A's buffers all came home");
}

const GATHER_EXT: usize = 64 * 1024;

fn ext_pattern(k: usize) -> u8 {
    (k.wrapping_mul(131) ^ (k >> 9)) as u8
}

/// The slice and header length of gather frame `seq` (both sides compute it).
fn gather_shape(seq: u32) -> (usize, ExtRef) {
    let s = seq as usize;
    let hlen = 14 + s % 51;
    let len = 1 + (s * 997) % 8192;
    let off = ((s * 7919) % (GATHER_EXT - len)) | 1;
    (
        hlen,
        ExtRef {
            off: off.min(GATHER_EXT - len) as u64,
            len: len as u16,
        },
    )
}

/// A streams gather frames (header in a buffer, payload referenced in the
/// ext area of the shared region); B, in another process, checks that every
/// frame arrives contiguous and byte-exact; A's buffers all come home.
#[test]
fn wirepair_gather_between_processes() {
    const ROLE: &str = "gather-peer";
    if let Some(fd) = peer_fd(ROLE) {
        let mut b = WireEnd::attach(fd, Side::B).unwrap();
        let ext = b.ext_bytes().unwrap();
        assert_eq!(ext.len(), GATHER_EXT);
        assert!(ext.iter().enumerate().all(|(k, &x)| x == ext_pattern(k)));
        let mut rx = [Desc::default(); 32];
        let mut seen = 0u32;
        let (start, mut spins) = (Instant::now(), 0);
        while seen < FRAMES {
            let got = b.recv(&mut rx);
            if got == 0 {
                backoff(&mut spins, start);
                continue;
            }
            for d in &rx[..got] {
                let f = b.buffers().frame(*d).unwrap();
                let seq = u32::from_le_bytes(f[..4].try_into().unwrap());
                assert_eq!(seq, seen, "frame lost or reordered");
                let (hlen, e) = gather_shape(seq);
                assert_eq!(f.len(), hlen + e.len as usize);
                assert!(f[4..hlen]
                    .iter()
                    .enumerate()
                    .all(|(k, &x)| x == pattern(seq, k + 4)));
                assert!(f[hlen..]
                    .iter()
                    .enumerate()
                    .all(|(k, &x)| x == ext_pattern(e.off as usize + k)));
                seen += 1;
            }
            b.release(&rx[..got]);
        }
        let s = b.stats();
        assert_eq!(s.rx_gather, FRAMES as u64, "{s:?}");
        assert_eq!(
            s.rx_bad_desc + s.rx_gather_bad + s.rx_gather_dropped + s.ret_full + s.ring_corrupt,
            0,
            "{s:?}"
        );
        return;
    }
    let cfg = WireConfig {
        buf_count: 256,
        buf_size: 16384,
        ring_capacity: 64,
        ext_bytes: GATHER_EXT as u64,
        ..WireConfig::default()
    };
    let (mut a, region): (WireEnd, Arc<Region>) = WirePair::create(cfg).unwrap();
    for (k, x) in a.ext_area_mut().unwrap().iter_mut().enumerate() {
        *x = ext_pattern(k);
    }
    let child = spawn_peer("xproc::wirepair_gather_between_processes", ROLE, &region);
    let mut sent = 0u32;
    let mut ids = [0u32; 16];
    let mut pending: Vec<(Desc, ExtRef)> = Vec::with_capacity(16);
    let (t0, mut spins) = (Instant::now(), 0);
    while sent < FRAMES || !pending.is_empty() {
        if pending.is_empty() {
            let want = ((FRAMES - sent) as usize).min(ids.len());
            let n = a.alloc(&mut ids[..want]);
            for (i, &id) in ids[..n].iter().enumerate() {
                let seq = sent + i as u32;
                let (hlen, e) = gather_shape(seq);
                let buf = a.buffers_mut().buf_mut(id).unwrap();
                buf[..4].copy_from_slice(&seq.to_le_bytes());
                for (k, x) in buf[4..hlen].iter_mut().enumerate() {
                    *x = pattern(seq, k + 4);
                }
                pending.push((Desc::new(id, hlen as u16), e));
            }
            sent += n as u32;
        }
        let k = a.send_gather(&pending);
        pending.drain(..k);
        if k == 0 {
            backoff(&mut spins, t0);
        }
    }
    wait_ok(child);
    let s = a.stats();
    assert_eq!(s.tx_gather, FRAMES as u64);
    assert_eq!(s.ret_bad + s.tx_gather_bad + s.ring_corrupt, 0, "{s:?}");
    a.reclaim();
    assert_eq!(a.free_buffers(), 128, "A's buffers all came home");
    eprintln!(
        "{FRAMES} gather frames to another process in {:?}",
        t0.elapsed()
    );
}
