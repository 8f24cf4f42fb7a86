//! The NLF meta file and prebuilder: synthetic MPEG-TS with PCRs and an
//! opaque file are prebuilt and reopened; records must tile the media, hold
//! the right sums and PCR-consistent send times; every kind of corrupt or
//! mismatched meta file must be refused with its own error.

use std::path::{Path, PathBuf};

use lazynet::nlf::meta::{self, MetaFile, CRC_OFFSET, HEADER_LEN, RECORD_LEN};
use lazynet::nlf::prebuild::prebuild_with;
use lazynet::nlf::PrebuildOptions;
use lazynet::nlf::{meta_path, prebuild, NlfError};
use lazynet::wire::checksum::partial;

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("lazynet-nlf-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// 216 ticks of the 27 MHz PCR clock per byte = 1 Mbit/s, 8000 ns per byte.
const TICKS_PER_BYTE: u64 = 216;
const NS_PER_BYTE: u64 = 8000;
const PCR_PID: u16 = 0x100;

fn ts_packet(pid: u16, cc: u8, pcr: Option<u64>, fill: u8) -> [u8; 188] {
    let mut p = [fill; 188];
    p[0] = 0x47;
    p[1] = (pid >> 8) as u8 & 0x1F;
    p[2] = pid as u8;
    match pcr {
        Some(pcr) => {
            p[3] = 0x30 | (cc & 0x0F); // adaptation field + payload
            p[4] = 7;
            p[5] = 0x10; // PCR flag
            let base = pcr / 300;
            let ext = pcr % 300;
            p[6] = (base >> 25) as u8;
            p[7] = (base >> 17) as u8;
            p[8] = (base >> 9) as u8;
            p[9] = (base >> 1) as u8;
            p[10] = (((base & 1) << 7) as u8) | 0x7E | ((ext >> 8) as u8);
            p[11] = ext as u8;
        }
        None => p[3] = 0x10 | (cc & 0x0F),
    }
    p
}

/// `n` TS packets at 1 Mbit/s; PCRs on PID 0x100 every 7th packet starting
/// at packet 3, starting at `pcr0`; a decoy PCR PID with nonsense values.
fn synthetic_ts(n: usize, pcr0: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(n * 188);
    for j in 0..n {
        let pos = (j * 188) as u64;
        let pcr = (pcr0 + pos * TICKS_PER_BYTE) % ((1u64 << 33) * 300);
        let p = if j % 7 == 3 {
            ts_packet(PCR_PID, j as u8, Some(pcr), j as u8)
        } else if j % 11 == 5 {
            ts_packet(0x200, j as u8, Some(12345 * j as u64), 0xEE)
        } else {
            ts_packet(0x101 + (j % 2) as u16, j as u8, None, (j * 13) as u8)
        };
        v.extend_from_slice(&p);
    }
    v
}

fn write(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, data).unwrap();
    p
}

fn check_tiling(mf: &MetaFile, media: &[u8], payload: usize) {
    assert_eq!(mf.media_len(), media.len() as u64);
    assert_eq!(mf.payload_size() as usize, payload);
    assert_eq!(mf.packets(), media.len().div_ceil(payload));
    let mut at = 0u64;
    let mut last_ns = 0;
    for (i, p) in mf.iter().enumerate() {
        assert_eq!(mf.get(i), Some(p));
        assert_eq!(p.offset, at, "record {i} does not follow the previous one");
        let r = p.range().unwrap();
        assert!(p.len as usize == payload || r.end == media.len());
        assert_eq!(p.sum, partial(&media[r.clone()], 0), "sum of record {i}");
        assert!(p.send_ns >= last_ns, "send times go backwards at {i}");
        last_ns = p.send_ns;
        assert_eq!(p.rtp_ts, (u128::from(p.send_ns) * 90 / 1_000_000) as u32);
        assert_eq!(p.rtp_seq, i as u32);
        at = r.end as u64;
    }
    assert_eq!(at, media.len() as u64, "records do not cover the media");
    assert_eq!(mf.get(mf.packets()), None);
}

#[test]
fn mpegts_prebuild_and_reopen() {
    let dir = TempDir::new("ts");
    for (pcr0, tag) in [
        (5_000_000u64, "plain"),
        ((1u64 << 33) * 300 - 50_000, "wrap"),
    ] {
        let media = synthetic_ts(300, pcr0);
        let path = write(&dir.0, &format!("{tag}.ts"), &media);
        for (req, payload) in [
            (1316usize, 1316usize),
            (2048, 1880),
            (188, 188),
            (1500, 1316),
        ] {
            for rtp in [false, true] {
                let mut calls = 0;
                let mut last = 0;
                let s = prebuild(&path, req, rtp, None, &mut |done, total| {
                    assert!(done >= last && done <= total);
                    assert_eq!(total, media.len() as u64);
                    last = done;
                    calls += 1;
                })
                .unwrap();
                assert_eq!(last, media.len() as u64);
                assert!(calls >= 2);
                assert_eq!(s.meta, meta_path(&path, req, rtp, None));
                assert!(s.mpegts);
                assert_eq!(s.payload_size, payload);
                assert_eq!(s.bytes, media.len() as u64);
                assert_eq!(s.bit_rate, 1_000_000, "{tag} {req}");
                assert_eq!(
                    s.duration.as_nanos() as u64,
                    media.len() as u64 * NS_PER_BYTE
                );
                assert!(s.pcrs > 40);

                let mf = MetaFile::open(&s.meta, &path).unwrap();
                assert!(mf.mpegts());
                assert_eq!(mf.rtp(), rtp);
                assert_eq!(mf.header().rtp_payload_type, 33);
                assert_eq!(mf.header().rtp_clock_hz, 90_000);
                assert_eq!(mf.bit_rate(), 1_000_000);
                check_tiling(&mf, &media, payload);
                // Constant-rate PCRs: send time is exactly 8000 ns per byte,
                // before the first PCR (extrapolated), between and after.
                for p in mf.iter() {
                    assert_eq!(
                        p.send_ns,
                        p.offset * NS_PER_BYTE,
                        "{tag} offset {}",
                        p.offset
                    );
                }
            }
        }
        assert!(dir.0.join(format!("{tag}.ts.nlf-1316")).exists());
        assert!(dir.0.join(format!("{tag}.ts.nlf-1316-rtp")).exists());
    }
}

#[test]
fn pcr_rate_change_is_followed_piecewise() {
    // First 100 packets at 1 Mbit/s, then 100 at 2 Mbit/s (108 ticks/byte).
    let dir = TempDir::new("rate");
    let mut media = Vec::new();
    let mut pcr = 1_000_000u64;
    for j in 0..200usize {
        let with_pcr = j % 10 == 0;
        media.extend_from_slice(&ts_packet(PCR_PID, j as u8, with_pcr.then_some(pcr), 0x11));
        pcr += 188 * if j < 100 { 216 } else { 108 };
    }
    let path = write(&dir.0, "rate.ts", &media);
    let s = prebuild(&path, 188, false, None, &mut |_, _| {}).unwrap();
    let mf = MetaFile::open(&s.meta, &path).unwrap();
    for (j, p) in mf.iter().enumerate() {
        let at = |j: u64| {
            if j <= 100 {
                j * 188 * 216
            } else {
                100 * 188 * 216 + (j - 100) * 188 * 108
            }
        };
        // After the last PCR (packet 190): the average rate between the
        // first and the last PCR.
        let j = j as u64;
        let ticks = if j <= 190 {
            at(j)
        } else {
            at(190) + (j - 190) * 188 * at(190) / (190 * 188)
        };
        assert_eq!(p.send_ns, ticks * 1000 / 27, "packet {j}");
    }
}

#[test]
fn opaque_prebuild_uses_nominal_rate() {
    let dir = TempDir::new("opaque");
    let media: Vec<u8> = (0..10_007u32).map(|i| (i * 7 + 1) as u8).collect();
    let path = write(&dir.0, "blob.bin", &media);
    let s = prebuild(&path, 1000, false, None, &mut |_, _| {}).unwrap();
    assert!(!s.mpegts);
    assert_eq!(s.packets, 11);
    assert_eq!(s.bit_rate, 3_000_000);
    let mf = MetaFile::open(&s.meta, &path).unwrap();
    assert!(!mf.mpegts());
    check_tiling(&mf, &media, 1000);
    for p in mf.iter() {
        assert_eq!(p.send_ns, p.offset * 8000 / 3);
    }
    // Other payload size, other bit rate, other directory: a second meta
    // file for the same media.
    let out = TempDir::new("opaque-out");
    let opts = PrebuildOptions {
        payload: 333,
        rtp: true,
        out_dir: Some(&out.0),
        nominal_bit_rate: 8_000_000,
    };
    let s2 = prebuild_with(&path, &opts, &mut |_, _| {}).unwrap();
    assert_eq!(s2.meta, out.0.join("blob.bin.nlf-333-rtp"));
    let mf2 = MetaFile::open(&s2.meta, &path).unwrap();
    check_tiling(&mf2, &media, 333);
    assert!(mf2.iter().all(|p| p.send_ns == p.offset * 1000));
    assert!(MetaFile::open(&s.meta, &path).is_ok());
}

#[test]
fn bad_inputs_to_prebuild() {
    let dir = TempDir::new("badin");
    let empty = write(&dir.0, "empty.ts", &[]);
    assert!(matches!(
        prebuild(&empty, 1316, false, None, &mut |_, _| {}),
        Err(NlfError::EmptyMedia)
    ));
    let ts = write(&dir.0, "a.ts", &synthetic_ts(10, 0));
    for bad in [0usize, 100, 187, 70_000] {
        let e = prebuild(&ts, bad, false, None, &mut |_, _| {}).unwrap_err();
        assert!(matches!(e, NlfError::BadPayloadSize { .. }), "{bad}: {e}");
        assert!(e.to_string().contains(&bad.to_string()));
    }
    let missing = dir.0.join("missing.ts");
    let e = prebuild(&missing, 1316, false, None, &mut |_, _| {}).unwrap_err();
    assert!(matches!(e, NlfError::Io { .. }), "{e}");
    assert!(e.to_string().contains("missing.ts"));
    // A TS with a trailing partial packet still tiles.
    let mut media = synthetic_ts(20, 0);
    media.extend_from_slice(&[1, 2, 3]);
    let p = write(&dir.0, "tail.ts", &media);
    let s = prebuild(&p, 1316, false, None, &mut |_, _| {}).unwrap();
    check_tiling(&MetaFile::open(&s.meta, &p).unwrap(), &media, 1316);
}

/// A valid meta image and its media, for the corruption tests.
fn sample(name: &str) -> (TempDir, PathBuf, PathBuf, Vec<u8>) {
    let dir = TempDir::new(name);
    let media = synthetic_ts(70, 0);
    let path = write(&dir.0, "m.ts", &media);
    let s = prebuild(&path, 1316, true, None, &mut |_, _| {}).unwrap();
    let bytes = std::fs::read(&s.meta).unwrap();
    (dir, path, s.meta, bytes)
}

fn open_image(dir: &Path, media: &Path, image: &[u8]) -> Result<MetaFile, NlfError> {
    let p = dir.join("edited.nlf");
    std::fs::write(&p, image).unwrap();
    MetaFile::open(&p, media)
}

#[test]
fn flipped_byte_anywhere_is_refused() {
    let (dir, media, _, bytes) = sample("flipped");
    let (len, fp) = meta::fingerprint(&media).unwrap();
    assert_eq!(bytes.len(), HEADER_LEN + 10 * RECORD_LEN);
    for pos in 0..bytes.len() {
        for bit in [0x01u8, 0x80] {
            let mut b = bytes.clone();
            b[pos] ^= bit;
            let e = MetaFile::from_bytes(b, len, fp).unwrap_err();
            let ok = match pos {
                0..=7 => matches!(e, NlfError::BadMagic),
                8..=11 => matches!(e, NlfError::UnsupportedVersion { .. }),
                12..=19 => matches!(e, NlfError::BadHeader(_)),
                32..=39 => matches!(e, NlfError::BadFileLength { .. } | NlfError::BadHeader(_)),
                _ => matches!(e, NlfError::CrcMismatch { .. }),
            };
            assert!(ok, "byte {pos} bit {bit:#x}: unexpected {e:?}");
            assert!(!e.to_string().is_empty());
        }
    }
    // Through the file API too.
    let mut b = bytes.clone();
    b[HEADER_LEN + 5] ^= 0x10;
    let e = open_image(&dir.0, &media, &b).unwrap_err();
    assert!(matches!(e, NlfError::CrcMismatch { .. }), "{e}");
    assert!(e.to_string().contains("corrupt"), "{e}");
}

#[test]
fn truncated_or_extended_is_refused() {
    let (dir, media, _, bytes) = sample("truncated");
    for cut in [
        0,
        1,
        8,
        12,
        127,
        128,
        129,
        bytes.len() - 32,
        bytes.len() - 1,
    ] {
        let e = open_image(&dir.0, &media, &bytes[..cut]).unwrap_err();
        assert!(
            matches!(e, NlfError::BadFileLength { .. }),
            "cut {cut}: {e:?}"
        );
        assert!(e.to_string().contains("truncated"), "{e}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    let e = open_image(&dir.0, &media, &longer).unwrap_err();
    assert!(matches!(e, NlfError::BadFileLength { .. }), "{e:?}");
}

#[test]
fn wrong_magic_and_version_are_refused() {
    let (dir, media, _, bytes) = sample("wrong");
    let mut b = bytes.clone();
    b[0..8].copy_from_slice(b"NOTNLF!\0");
    meta::reseal(&mut b);
    let e = open_image(&dir.0, &media, &b).unwrap_err();
    assert!(matches!(e, NlfError::BadMagic), "{e:?}");
    assert!(e.to_string().contains("magic"));

    let mut b = bytes.clone();
    b[8..12].copy_from_slice(&2u32.to_le_bytes());
    meta::reseal(&mut b);
    let e = open_image(&dir.0, &media, &b).unwrap_err();
    assert!(
        matches!(
            e,
            NlfError::UnsupportedVersion {
                found: 2,
                supported: 1
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("version 2"));

    // Unknown flags and reserved bytes, with a valid CRC.
    let mut b = bytes.clone();
    b[20] |= 0x80;
    meta::reseal(&mut b);
    assert!(matches!(
        open_image(&dir.0, &media, &b),
        Err(NlfError::BadHeader(_))
    ));
    let mut b = bytes.clone();
    b[100] = 1;
    meta::reseal(&mut b);
    assert!(matches!(
        open_image(&dir.0, &media, &b),
        Err(NlfError::BadHeader(_))
    ));
    // Reseal of an unmodified image is the identity.
    let mut b = bytes.clone();
    meta::reseal(&mut b);
    assert_eq!(b, bytes);
    assert_eq!(
        u32::from_le_bytes(b[CRC_OFFSET..CRC_OFFSET + 4].try_into().unwrap()),
        meta::compute_crc(&b)
    );
}

#[test]
fn meta_for_another_media_is_refused() {
    let (dir, media, meta_p, _) = sample("meta");
    assert!(MetaFile::open(&meta_p, &media).is_ok());
    // Same length, one byte different in the fingerprinted span.
    let mut other = std::fs::read(&media).unwrap();
    let last = other.len() - 1;
    other[last] ^= 1;
    let other_p = write(&dir.0, "other.ts", &other);
    let e = MetaFile::open(&meta_p, &other_p).unwrap_err();
    assert!(matches!(e, NlfError::MediaMismatch { .. }), "{e:?}");
    assert!(e.to_string().contains("different media"), "{e}");
    // Different length.
    other.truncate(other.len() - 188);
    let other_p = write(&dir.0, "shorter.ts", &other);
    let e = MetaFile::open(&meta_p, &other_p).unwrap_err();
    assert!(matches!(e, NlfError::MediaMismatch { .. }), "{e:?}");
    // Media gone.
    let e = MetaFile::open(&meta_p, &dir.0.join("gone.ts")).unwrap_err();
    assert!(matches!(e, NlfError::Io { .. }), "{e:?}");
}

#[test]
fn record_outside_media_is_refused() {
    let (dir, media, _, bytes) = sample("record");
    let media_len = std::fs::metadata(&media).unwrap().len();
    let rec = |i: usize| HEADER_LEN + i * RECORD_LEN;
    let cases: [(usize, u64, u32); 4] = [
        (9, media_len - 10, 1316), // runs past the end
        (3, media_len, 1),         // starts at the end
        (0, u64::MAX - 3, 1316),   // offset + len overflows
        (5, 0, 0),                 // empty
    ];
    for (i, off, len) in cases {
        let mut b = bytes.clone();
        b[rec(i)..rec(i) + 8].copy_from_slice(&off.to_le_bytes());
        b[rec(i) + 8..rec(i) + 12].copy_from_slice(&len.to_le_bytes());
        meta::reseal(&mut b);
        let e = open_image(&dir.0, &media, &b).unwrap_err();
        assert!(
            matches!(e, NlfError::BadRecord { index, .. } if index == i as u64),
            "{i}: {e:?}"
        );
        assert!(e.to_string().contains(&format!("record {i}")), "{e}");
    }
    // Longer than the header's payload size.
    let mut b = bytes.clone();
    b[rec(1) + 8..rec(1) + 12].copy_from_slice(&1317u32.to_le_bytes());
    meta::reseal(&mut b);
    assert!(matches!(
        open_image(&dir.0, &media, &b),
        Err(NlfError::BadRecord { index: 1, .. })
    ));
}

#[test]
fn ts_without_pcrs_uses_nominal_rate() {
    let dir = TempDir::new("nopcr");
    let media = synthetic_ts(5, 0); // packets 0..5 carry no PCR on PID 0x100
    let path = write(&dir.0, "n.ts", &media);
    let s = prebuild(&path, 376, false, None, &mut |_, _| {}).unwrap();
    assert!(s.mpegts);
    assert_eq!(s.bit_rate, 3_000_000);
    let mf = MetaFile::open(&s.meta, &path).unwrap();
    check_tiling(&mf, &media, 376);
    assert!(mf.iter().all(|p| p.send_ns == p.offset * 8000 / 3));
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    fn image() -> (Vec<u8>, u64, u64) {
        let media = synthetic_ts(30, 0);
        let dir = TempDir::new("fuzz-image");
        let path = write(&dir.0, "f.ts", &media);
        let s = prebuild(&path, 376, true, None, &mut |_, _| {}).unwrap();
        let (len, fp) = meta::fingerprint(&path).unwrap();
        (std::fs::read(&s.meta).unwrap(), len, fp)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Edited images (resealed or not) are either accepted or refused,
        /// never a panic; an accepted one only has records inside the media.
        #[test]
        fn edited_images_never_panic(
            edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
            cut in any::<Option<usize>>(),
            reseal in any::<bool>(),
        ) {
            let (mut b, len, fp) = image();
            for (at, v) in edits {
                let i = at % b.len();
                b[i] = v;
            }
            if let Some(c) = cut {
                b.truncate(c % (b.len() + 1));
            }
            if reseal {
                meta::reseal(&mut b);
            }
            if let Ok(mf) = MetaFile::from_bytes(b, len, fp) {
                for p in mf.iter() {
                    prop_assert!(p.len > 0 && p.offset + u64::from(p.len) <= len);
                }
            }
        }

        #[test]
        fn random_bytes_never_panic(mut b in proptest::collection::vec(any::<u8>(), 0..600), magic in any::<bool>()) {
            if magic && b.len() >= 12 {
                b[0..8].copy_from_slice(&meta::MAGIC);
                b[8..12].copy_from_slice(&meta::VERSION.to_le_bytes());
                meta::reseal(&mut b);
            }
            let _ = MetaFile::from_bytes(b, 5640, 0);
        }
    }
}
