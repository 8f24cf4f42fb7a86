//! Temporary: the ceiling of moving TCP-sized payloads between two cores
//! over the in-memory wire with the minimal per-byte work.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lazynet::mem::Desc;
use lazynet::nic::wirepair::{WireConfig, WirePair};
use lazynet::nic::{pin_thread, Nic};
use lazynet::wire::checksum::{copy_and_partial, partial};

const PAY: usize = 1448;
const HDR: usize = 66;
const RING: usize = 256 * 1024;

fn main() {
    let mode: String = std::env::args().nth(1).unwrap_or("sep".into());
    let rxmode: String = std::env::args().nth(2).unwrap_or("sep".into());
    let (mut a, mut b) = WirePair::new(WireConfig {
        buf_count: 2048,
        ring_capacity: 512,
        ..Default::default()
    })
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let bytes = Arc::new(AtomicU64::new(0));
    let (s2, by2) = (stop.clone(), bytes.clone());
    let (m2, r2) = (mode.clone(), rxmode.clone());
    let rx = std::thread::spawn(move || {
        let rxmode = r2;
        pin_thread(1);
        let mut ring = vec![0u8; RING];
        let mut app = vec![0u8; 65536];
        let mut wpos = 0usize;
        let mut fill = 0usize;
        let mut total = 0u64;
        let mut d = [Desc::default(); 64];
        let mut sink = 0u32;
        while !s2.load(Ordering::Relaxed) {
            let n = b.recv(&mut d);
            for x in &d[..n] {
                let f = b.buffers().frame(*x).unwrap();
                let p = if rxmode == "nt" { &f[128..] } else { &f[HDR..] };
                if wpos + p.len() > RING {
                    wpos = 0;
                }
                if rxmode == "fused" {
                    sink =
                        sink.wrapping_add(copy_and_partial(p, &mut ring[wpos..wpos + p.len()], 0));
                } else {
                    sink = sink.wrapping_add(partial(p, 0));
                    ring[wpos..wpos + p.len()].copy_from_slice(p);
                }
                wpos += p.len();
                fill += p.len();
                total += p.len() as u64;
                if fill >= 65536 {
                    let st = wpos.saturating_sub(65536);
                    app.copy_from_slice(&ring[st..st + 65536]);
                    fill -= 65536;
                }
            }
            b.release(&d[..n]);
            b.flush();
            by2.store(total, Ordering::Relaxed);
        }
        std::hint::black_box((sink, app[7]));
    });
    let s3 = stop.clone();
    let tx = std::thread::spawn(move || {
        let mode = m2;
        pin_thread(0);
        let src = vec![0x5au8; 65536];
        let mut sbuf = vec![0u8; RING];
        let mut spos = 0usize;
        let mut rpos = 0usize;
        let hdr = [0x11u8; HDR];
        let mut ids = [0u32; 16];
        let mut d = [Desc::default(); 16];
        while !s3.load(Ordering::Relaxed) {
            let t_end = Instant::now();
            // app write: 64 KiB into the send ring
            if spos + 65536 > RING {
                spos = 0;
            }
            sbuf[spos..spos + 65536].copy_from_slice(&src);
            spos += 65536;
            let mut left = 65536usize;
            while left > 0 {
                let k = a.alloc(&mut ids);
                if k == 0 {
                    if s3.load(Ordering::Relaxed) || t_end.elapsed() > Duration::from_secs(3) {
                        break;
                    }
                    let _ = a.recv(&mut []);
                    continue;
                }
                let mut m = 0;
                if mode == "pw" {
                    for &id in &ids[..k] {
                        let b = a.buffers_mut().buf_mut(id).unwrap();
                        for off in (0..HDR + PAY).step_by(64) {
                            unsafe {
                                core::arch::x86_64::_mm_prefetch::<
                                    { core::arch::x86_64::_MM_HINT_ET0 },
                                >(b.as_ptr().add(off) as *const i8)
                            }
                        }
                    }
                }
                for &id in &ids[..k] {
                    if left == 0 {
                        a.release(&[Desc {
                            buf: id,
                            off: 0,
                            len: 0,
                        }]);
                        continue;
                    }
                    let take = left.min(PAY);
                    if rpos + take > RING {
                        rpos = 0;
                    }
                    let buf = a.buffers_mut().buf_mut(id).unwrap();
                    buf[..HDR].copy_from_slice(&hdr);
                    let s = &sbuf[rpos..rpos + take];
                    let sum = match mode.as_str() {
                        "fused" => copy_and_partial(s, &mut buf[HDR..HDR + take], 0),
                        "nosum" => {
                            buf[HDR..HDR + take].copy_from_slice(s);
                            0
                        }
                        "nt" => {
                            let sm = partial(s, 0);
                            nt_copy(s, &mut buf[128..128 + take]);
                            sm
                        }
                        _ => {
                            buf[HDR..HDR + take].copy_from_slice(s);
                            partial(s, 0)
                        }
                    };
                    buf[0] = sum as u8;
                    rpos += take;
                    left -= take;
                    d[m] = Desc {
                        buf: id,
                        off: 0,
                        len: (if mode == "nt" { 128 } else { HDR } + take) as u16,
                    };
                    m += 1;
                }
                if mode == "nt" {
                    unsafe { core::arch::x86_64::_mm_sfence() }
                }
                let mut sent = 0;
                while sent < m {
                    sent += a.send(&d[sent..m]);
                    if sent < m {
                        a.flush();
                    }
                }
                a.flush();
            }
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let b0 = bytes.load(Ordering::Relaxed);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(2));
    let b1 = bytes.load(Ordering::Relaxed);
    let el = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    println!(
        "tx={mode} rx={rxmode}: {:.2} Gbit/s",
        (b1 - b0) as f64 * 8.0 / el.as_secs_f64() / 1e9
    );
    rx.join().unwrap();
    tx.join().unwrap();
}

fn nt_copy(src: &[u8], dst: &mut [u8]) {
    use core::arch::x86_64::*;
    let n = src.len() / 32 * 32;
    unsafe {
        for i in (0..n).step_by(32) {
            let v = _mm256_loadu_si256(src.as_ptr().add(i) as *const __m256i);
            _mm256_stream_si256(dst.as_mut_ptr().add(i) as *mut __m256i, v);
        }
    }
    dst[n..].copy_from_slice(&src[n..]);
}
