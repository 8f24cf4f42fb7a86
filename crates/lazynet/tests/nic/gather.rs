//! Gather transmission (network level framing): per-client headers in
//! buffers, payload referenced from the sender's ext area. The receiver gets
//! ordinary contiguous frames, byte-exact; buffers are conserved.
#![cfg(not(loom))]

use std::io::Write;

use lazynet::mem::Desc;
use lazynet::nic::fault::{FaultConfig, FaultNic, FaultSpec};
use lazynet::nic::pcap::{PcapNic, Resolution};
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::nic::{ExtRef, Nic};

use crate::util::Mock;

const EXT: usize = 100_000;

fn ext_pattern(k: usize) -> u8 {
    (k.wrapping_mul(131) ^ (k >> 9)) as u8
}

fn hdr_pattern(seq: u32, k: usize) -> u8 {
    (seq as usize).wrapping_mul(29).wrapping_add(k * 3) as u8
}

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as usize
    }
}

fn pair(buf_size: u32, buf_count: u32, ring: u32) -> (WireEnd, WireEnd) {
    let cfg = WireConfig {
        buf_count,
        buf_size,
        ring_capacity: ring,
        ext_bytes: EXT as u64,
        ..WireConfig::default()
    };
    let (mut a, b) = WirePair::new(cfg).unwrap();
    let ext = a.ext_area_mut().unwrap();
    assert_eq!(ext.len(), EXT);
    for (k, x) in ext.iter_mut().enumerate() {
        *x = ext_pattern(k);
    }
    (a, b)
}

/// Expected bytes of a gather frame.
fn expected(seq: u32, hlen: usize, e: ExtRef) -> Vec<u8> {
    let mut v: Vec<u8> = (0..hlen).map(|k| hdr_pattern(seq, k)).collect();
    v.extend((0..e.len as usize).map(|k| ext_pattern(e.off as usize + k)));
    v
}

/// Writes a header for `seq` into buffer `id` at offset `off`.
fn header<N: Nic + ?Sized>(nic: &mut N, id: u32, off: usize, hlen: usize, seq: u32) -> Desc {
    let buf = nic.buffers_mut().buf_mut(id).unwrap();
    for (k, x) in buf[off..off + hlen].iter_mut().enumerate() {
        *x = hdr_pattern(seq, k);
    }
    buf[off..off + 4].copy_from_slice(&seq.to_le_bytes());
    Desc {
        buf: id,
        off: off as u16,
        len: hlen as u16,
    }
}

fn check(frame: &[u8], seq_expected: u32, meta: &[(usize, ExtRef)]) {
    let seq = u32::from_le_bytes(frame[..4].try_into().unwrap());
    assert_eq!(seq, seq_expected, "frame lost or reordered");
    let (hlen, e) = meta[seq as usize];
    let mut want = expected(seq, hlen, e);
    want[..4].copy_from_slice(&seq.to_le_bytes());
    assert_eq!(frame.len(), want.len(), "frame {seq} length");
    assert!(frame == want.as_slice(), "frame {seq} bytes differ");
}

/// Random headers (14..=64 bytes, sometimes deep inside their buffer so the
/// receiver must copy), random odd-offset payload slices (1..=8192 bytes),
/// random batch sizes on both sides (1-slot receives split pairs), rings
/// wrapping many times; then every buffer is back where it belongs.
#[test]
fn gather_frames_arrive_byte_exact_and_buffers_are_conserved() {
    let (mut a, mut b) = pair(16384, 64, 16);
    let mut rng = Lcg(7);
    let mut meta: Vec<(usize, ExtRef)> = Vec::new();
    let mut ids = [0u32; 12];
    let mut rx = [Desc::default(); 16];
    let mut next_rx = 0u32;
    let rounds = if cfg!(debug_assertions) { 400 } else { 4000 };
    for _ in 0..rounds {
        let n = a.alloc(&mut ids[..1 + rng.next() % 12]);
        let mut frames = Vec::new();
        for &id in &ids[..n] {
            let seq = meta.len() as u32;
            let hlen = 14 + rng.next() % 51;
            let plen = 1 + rng.next() % 8192;
            let off = (rng.next() % (EXT - plen)) | 1;
            let off = off.min(EXT - plen);
            let e = ExtRef {
                off: off as u64,
                len: plen as u16,
            };
            // One in five headers sits where the payload cannot follow it.
            let hoff = if rng.next() % 5 == 0 {
                16384 - hlen - rng.next() % 64
            } else {
                rng.next() % 64
            };
            frames.push((header(&mut a, id, hoff, hlen, seq), e));
            meta.push((hlen, e));
        }
        let sent = a.send_gather(&frames);
        // Not accepted (ring full): still ours; give them back, forget them.
        let unsent: Vec<Desc> = frames[sent..].iter().map(|f| f.0).collect();
        a.release(&unsent);
        meta.truncate(meta.len() - unsent.len());
        let want = 1 + rng.next() % 16;
        let got = b.recv(&mut rx[..want]);
        for d in &rx[..got] {
            check(b.buffers().frame(*d).unwrap(), next_rx, &meta);
            next_rx += 1;
        }
        b.release(&rx[..got]);
    }
    // Drain.
    loop {
        let got = b.recv(&mut rx);
        if got == 0 {
            break;
        }
        for d in &rx[..got] {
            check(b.buffers().frame(*d).unwrap(), next_rx, &meta);
            next_rx += 1;
        }
        b.release(&rx[..got]);
    }
    assert_eq!(next_rx as usize, meta.len());
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(sa.tx_gather, meta.len() as u64);
    assert_eq!(sb.rx_gather, meta.len() as u64);
    assert!(sb.rx_gather_copied > 0, "copy path not exercised: {sb:?}");
    assert!(sb.rx_gather_copied < sb.rx_gather, "{sb:?}");
    assert_eq!(
        sb.rx_gather_bad + sb.rx_gather_dropped + sb.rx_bad_desc + sb.ret_bad,
        0,
        "{sb:?}"
    );
    assert_eq!(sa.tx_gather_bad + sa.ret_bad + sa.release_bad, 0, "{sa:?}");
    a.reclaim();
    b.reclaim();
    assert_eq!(a.free_buffers(), 32);
    assert_eq!(b.free_buffers(), 32);
    eprintln!(
        "{} gather frames, {} copied at the receiver",
        meta.len(),
        sb.rx_gather_copied
    );
}

/// The receiver echoes linearized frames back (zero-copy, in the buffers it
/// got them in, some of them its own after a copy); ownership stays exact.
#[test]
fn linearized_frames_can_be_echoed() {
    let (mut a, mut b) = pair(2048, 32, 8);
    let mut ids = [0u32; 4];
    let mut rx = [Desc::default(); 8];
    let mut back = [Desc::default(); 8];
    for round in 0..200u32 {
        let n = a.alloc(&mut ids);
        assert_eq!(n, 4, "round {round}: {a:?}");
        let frames: Vec<(Desc, ExtRef)> = ids
            .iter()
            .enumerate()
            .map(|(k, &id)| {
                let hoff = if k == 0 { 2000 } else { 0 };
                let d = header(&mut a, id, hoff, 42, round);
                let e = ExtRef {
                    off: (round * 37 + k as u32) as u64,
                    len: 1000,
                };
                (d, e)
            })
            .collect();
        assert_eq!(a.send_gather(&frames), 4);
        assert_eq!(b.recv(&mut rx), 4);
        assert_eq!(b.send(&rx[..4]), 4);
        assert_eq!(a.recv(&mut back), 4);
        for (k, d) in back[..4].iter().enumerate() {
            let f = a.buffers().frame(*d).unwrap();
            assert_eq!(f.len(), 1042);
            assert_eq!(&f[42..], &expected(round, 0, frames[k].1)[..]);
        }
        a.release(&back[..4]);
    }
    a.reclaim();
    b.reclaim();
    assert_eq!(a.free_buffers(), 16);
    assert_eq!(b.free_buffers(), 16);
    assert_eq!(b.stats().rx_gather_copied, 200);
}

/// The copy path needs a free buffer of the receiver's: without one the
/// frame is dropped and counted, and the header buffer still goes home.
#[test]
fn receiver_without_free_buffers_drops_and_counts() {
    let (mut a, mut b) = pair(2048, 8, 8);
    let mut mine = [0u32; 4];
    assert_eq!(b.alloc(&mut mine), 4); // B holds all its buffers
    let mut ids = [0u32; 2];
    assert_eq!(a.alloc(&mut ids), 2);
    let frames = [
        (
            header(&mut a, ids[0], 2000, 20, 0),
            ExtRef { off: 3, len: 100 },
        ),
        (
            header(&mut a, ids[1], 0, 20, 1),
            ExtRef { off: 3, len: 100 },
        ),
    ];
    assert_eq!(a.send_gather(&frames), 2);
    let mut rx = [Desc::default(); 4];
    assert_eq!(b.recv(&mut rx), 1, "in-place frame still delivered");
    assert_eq!(b.stats().rx_gather_dropped, 1);
    b.release(&rx[..1]);
    b.release(&mine.map(|i| Desc::new(i, 0)));
    a.reclaim();
    b.reclaim();
    assert_eq!((a.free_buffers(), b.free_buffers()), (4, 4));
}

/// A driver without an ext area: the default `send_gather` accepts nothing
/// and leaves the frames with the caller.
#[test]
fn default_send_gather_without_ext_area_accepts_nothing() {
    let mut m = Mock::new(8);
    let mut ids = [0u32; 1];
    assert_eq!(m.alloc(&mut ids), 1);
    let f = (Desc::new(ids[0], 14), ExtRef { off: 0, len: 1 });
    assert_eq!(m.ext_capacity(), 0);
    assert!(m.ext_bytes().is_none());
    assert_eq!(m.send_gather(&[f]), 0);
    assert!(m.sent.is_empty());
}

/// Through a boxed NIC and the fault injector (loss 30%, which linearizes
/// and applies faults): what arrives is byte-exact; buffers are conserved.
#[test]
fn fault_injector_and_box_forward_gather_frames() {
    let (a, mut b) = pair(16384, 32, 32);
    let cfg = FaultConfig {
        seed: 5,
        tx: FaultSpec {
            loss: 0.3,
            ..FaultSpec::default()
        },
        ..FaultConfig::default()
    };
    let mut a: Box<dyn Nic> = Box::new(FaultNic::new(a, cfg));
    assert_eq!(a.ext_capacity(), EXT);
    assert_eq!(
        a.ext_bytes().unwrap()[..2],
        [ext_pattern(0), ext_pattern(1)]
    );
    let mut ids = [0u32; 8];
    let mut rx = [Desc::default(); 16];
    let mut meta = Vec::new();
    let mut got_total = 0;
    for round in 0..50u32 {
        let n = a.alloc(&mut ids);
        let frames: Vec<(Desc, ExtRef)> = ids[..n]
            .iter()
            .map(|&id| {
                let seq = meta.len() as u32;
                let e = ExtRef {
                    off: (seq as u64 * 977) % 90_000 + 1,
                    len: 1 + (seq as u16 * 61) % 8000,
                };
                meta.push((33, e));
                (header(&mut *a, id, 0, 33, seq), e)
            })
            .collect();
        assert_eq!(a.send_gather(&frames), n, "round {round}");
        let got = b.recv(&mut rx);
        for d in &rx[..got] {
            let f = b.buffers().frame(*d).unwrap();
            let seq = u32::from_le_bytes(f[..4].try_into().unwrap());
            check(f, seq, &meta);
        }
        got_total += got;
        b.release(&rx[..got]);
    }
    assert!(got_total > 200 && got_total < 400, "{got_total}");
    drop(a);
    b.reclaim();
    assert_eq!(b.free_buffers(), 16);
}

/// PcapNic records a gather frame whole: header followed by the ext bytes.
#[test]
fn pcap_records_whole_gather_frames() {
    let (a, mut b) = pair(16384, 16, 16);
    let path = std::env::temp_dir().join(format!("lazynet-{}-gather.pcap", std::process::id()));
    let mut a = PcapNic::create(a, &path, Resolution::Micro).unwrap();
    let mut ids = [0u32; 3];
    assert_eq!(a.alloc(&mut ids), 3);
    let metas = [
        (14, ExtRef { off: 1, len: 1 }),
        (
            42,
            ExtRef {
                off: 777,
                len: 1400,
            },
        ),
        (
            64,
            ExtRef {
                off: 91_001,
                len: 8192,
            },
        ),
    ];
    let frames: Vec<(Desc, ExtRef)> = metas
        .iter()
        .enumerate()
        .map(|(k, &(h, e))| (header(&mut a, ids[k], 0, h, k as u32), e))
        .collect();
    assert_eq!(a.send_gather(&frames), 3, "{:?}", a.inner().stats());
    assert_eq!(a.stats().tx_frames, 3, "{:?}", a.stats());
    a.flush_file().unwrap();
    drop(a);
    let file = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).ok();
    // The writer uses the machine's byte order or big endian; the magic says.
    let le = file[..4] == [0xd4, 0xc3, 0xb2, 0xa1];
    let rd = |b: &[u8]| {
        let v: [u8; 4] = b.try_into().unwrap();
        (if le {
            u32::from_le_bytes(v)
        } else {
            u32::from_be_bytes(v)
        }) as usize
    };
    let mut at = 24;
    let mut rx = [Desc::default(); 4];
    assert_eq!(b.recv(&mut rx), 3);
    for (k, &(h, e)) in metas.iter().enumerate() {
        let caplen = rd(&file[at + 8..at + 12]);
        let origlen = rd(&file[at + 12..at + 16]);
        let rec = &file[at + 16..at + 16 + caplen];
        let mut want = expected(k as u32, h, e);
        want[..4].copy_from_slice(&(k as u32).to_le_bytes());
        assert_eq!(caplen, want.len());
        assert_eq!(origlen, want.len());
        assert!(rec == want.as_slice(), "record {k}");
        assert_eq!(b.buffers().frame(rx[k]).unwrap(), rec);
        at += 16 + caplen;
    }
    assert_eq!(at, file.len());
    b.release(&rx[..3]);
    let _ = std::io::stderr().flush();
}
