//! The NLF meta-data file: one per media file, payload size and framing
//! (plain UDP or RTP), e.g. `test.ts.nlf-1316` and `test.ts.nlf-1316-rtp`
//! next to `test.ts`. The media file itself is never copied or modified.
//!
//! # Layout (version 1, all integers little-endian)
//!
//! A 128-byte header followed by `packets` fixed 32-byte records, so record
//! `i` sits at byte `128 + 32 i` and the file can be mmapped and indexed.
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0   | 8  | magic `b"LZNLFMD\0"` |
//! | 8   | 4  | format version, `1` |
//! | 12  | 4  | header length, `128` |
//! | 16  | 4  | record length, `32` |
//! | 20  | 4  | flags: bit 0 RTP framing, bit 1 MPEG-TS input; other bits 0 |
//! | 24  | 4  | payload size: the longest payload of any record (for MPEG-TS the requested size rounded down to a multiple of 188) |
//! | 28  | 4  | CRC-32 (IEEE) over the whole file with this field taken as zero |
//! | 32  | 8  | packet count |
//! | 40  | 8  | media length in bytes |
//! | 48  | 8  | media fingerprint (see below) |
//! | 56  | 8  | stream duration in ns |
//! | 64  | 8  | stream bit rate in bit/s |
//! | 72  | 1  | RTP payload type (`33`, MP2T) |
//! | 73  | 3  | reserved, 0 |
//! | 76  | 4  | RTP clock rate in Hz (`90000`) |
//! | 80  | 48 | reserved, 0 |
//!
//! Record (32 bytes):
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0  | 8 | payload offset in the media file |
//! | 8  | 4 | payload length (1 ..= payload size) |
//! | 12 | 4 | payload sum: the *unfolded* ones'-complement partial sum of the payload taken as starting at an even offset, [`checksum::partial(payload, 0)`](crate::wire::checksum::partial) |
//! | 16 | 8 | send time in ns from the start of the stream |
//! | 24 | 4 | RTP timestamp, 90 kHz, base 0 (`send_ns * 90 / 1_000_000`, wrapping) |
//! | 28 | 4 | RTP sequence offset (the packet index, wrapping) |
//!
//! The streamer adds its random per-client bases (RFC 3550) to the RTP
//! timestamp and sequence number.
//!
//! **Media fingerprint**: FNV-1a 64 over the media length as 8 little-endian
//! bytes, then the first `min(64 KiB, len)` bytes, then the last
//! `min(64 KiB, len)` bytes. Cheap (at most 128 KiB read) and catches a
//! different or re-encoded file; it cannot catch an edit in the middle of a
//! large file of the same length.
//!
//! [`MetaFile::open`] checks, in this order: length ≥ 128, magic, version,
//! header and record lengths, file length = 128 + 32 × packets, CRC, flags
//! and reserved bytes, media length and fingerprint, and that every record's
//! payload lies inside the media. [`MetaFile::open`] maps the file read-only
//! ([`crate::mem::MappedFile`]), so records are paged in as they are used.
//!
//! **Owns:** the meta file's format, its checks and its records.
//! **May not touch:** the media file, which it only refers to.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::mem::MappedFile;

use super::NlfError;

/// The magic number at the start of every meta file.
pub const MAGIC: [u8; 8] = *b"LZNLFMD\0";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;
/// Header length in bytes.
pub const HEADER_LEN: usize = 128;
/// Record length in bytes.
pub const RECORD_LEN: usize = 32;
/// Byte offset of the CRC-32 field in the header.
pub const CRC_OFFSET: usize = 28;
/// Flag: packets are framed as RTP (RFC 3550 / RFC 2250, payload type 33).
pub const FLAG_RTP: u32 = 1;
/// Flag: the media was parsed as MPEG-TS (send times from PCRs).
pub const FLAG_MPEGTS: u32 = 2;
/// RTP payload type for MPEG-2 transport streams (RFC 3551).
pub const RTP_PT_MP2T: u8 = 33;
/// RTP clock rate for MP2T.
pub const RTP_CLOCK_HZ: u32 = 90_000;
/// How much of each end of the media the fingerprint reads.
pub const FINGERPRINT_SPAN: u64 = 64 * 1024;

/// One packet: where its payload is and what was precomputed for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketMeta {
    /// Payload offset in the media file.
    pub offset: u64,
    /// Payload length.
    pub len: u32,
    /// Unfolded partial sum of the payload as if at an even offset.
    pub sum: u32,
    /// Send time in ns from the start of the stream.
    pub send_ns: u64,
    /// RTP timestamp (90 kHz, base 0).
    pub rtp_ts: u32,
    /// RTP sequence offset (packet index).
    pub rtp_seq: u32,
}

impl PacketMeta {
    /// The payload's byte range in the media, if it fits in `usize`.
    pub fn range(&self) -> Option<std::ops::Range<usize>> {
        let start = usize::try_from(self.offset).ok()?;
        let end = start.checked_add(self.len as usize)?;
        Some(start..end)
    }

    fn encode(&self, out: &mut [u8; RECORD_LEN]) {
        out[0..8].copy_from_slice(&self.offset.to_le_bytes());
        out[8..12].copy_from_slice(&self.len.to_le_bytes());
        out[12..16].copy_from_slice(&self.sum.to_le_bytes());
        out[16..24].copy_from_slice(&self.send_ns.to_le_bytes());
        out[24..28].copy_from_slice(&self.rtp_ts.to_le_bytes());
        out[28..32].copy_from_slice(&self.rtp_seq.to_le_bytes());
    }

    fn decode(r: &[u8; RECORD_LEN]) -> Self {
        PacketMeta {
            offset: le64(r, 0),
            len: le32(r, 8),
            sum: le32(r, 12),
            send_ns: le64(r, 16),
            rtp_ts: le32(r, 24),
            rtp_seq: le32(r, 28),
        }
    }
}

/// The header fields of a meta file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaHeader {
    /// Format version.
    pub version: u32,
    /// Flags ([`FLAG_RTP`], [`FLAG_MPEGTS`]).
    pub flags: u32,
    /// Longest payload of any record.
    pub payload_size: u32,
    /// Number of records.
    pub packets: u64,
    /// Media length in bytes.
    pub media_len: u64,
    /// Media fingerprint ([`fingerprint`]).
    pub fingerprint: u64,
    /// Stream duration in ns.
    pub duration_ns: u64,
    /// Stream bit rate in bit/s.
    pub bit_rate: u64,
    /// RTP payload type.
    pub rtp_payload_type: u8,
    /// RTP clock rate in Hz.
    pub rtp_clock_hz: u32,
}

impl MetaHeader {
    /// True if packets are framed as RTP.
    pub const fn rtp(&self) -> bool {
        self.flags & FLAG_RTP != 0
    }
    /// True if the media was parsed as MPEG-TS.
    pub const fn mpegts(&self) -> bool {
        self.flags & FLAG_MPEGTS != 0
    }

    fn encode(&self, h: &mut [u8; HEADER_LEN]) {
        h.fill(0);
        h[0..8].copy_from_slice(&MAGIC);
        h[8..12].copy_from_slice(&self.version.to_le_bytes());
        h[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
        h[16..20].copy_from_slice(&(RECORD_LEN as u32).to_le_bytes());
        h[20..24].copy_from_slice(&self.flags.to_le_bytes());
        h[24..28].copy_from_slice(&self.payload_size.to_le_bytes());
        h[32..40].copy_from_slice(&self.packets.to_le_bytes());
        h[40..48].copy_from_slice(&self.media_len.to_le_bytes());
        h[48..56].copy_from_slice(&self.fingerprint.to_le_bytes());
        h[56..64].copy_from_slice(&self.duration_ns.to_le_bytes());
        h[64..72].copy_from_slice(&self.bit_rate.to_le_bytes());
        h[72] = self.rtp_payload_type;
        h[76..80].copy_from_slice(&self.rtp_clock_hz.to_le_bytes());
    }
}

fn le32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        w.copy_from_slice(s);
    }
    u32::from_le_bytes(w)
}

fn le64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        w.copy_from_slice(s);
    }
    u64::from_le_bytes(w)
}

/// CRC-32 of a whole meta file image, with the CRC field taken as zero.
pub fn compute_crc(file: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    if file.len() < CRC_OFFSET + 4 {
        h.update(file);
        return h.finalize();
    }
    h.update(&file[..CRC_OFFSET]);
    h.update(&[0; 4]);
    h.update(&file[CRC_OFFSET + 4..]);
    h.finalize()
}

/// Recomputes and stores the CRC of a meta file image (after an edit).
/// Does nothing to an image shorter than the header.
pub fn reseal(file: &mut [u8]) {
    if file.len() >= HEADER_LEN {
        let c = compute_crc(file);
        file[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&c.to_le_bytes());
    }
}

/// Serializes a header and its records into a meta file image (CRC filled
/// in; `header.packets` is taken from `records`).
pub fn encode(header: &MetaHeader, records: &[PacketMeta]) -> Vec<u8> {
    let mut out = vec![0u8; HEADER_LEN + RECORD_LEN * records.len()];
    let mut h = [0u8; HEADER_LEN];
    let hdr = MetaHeader {
        packets: records.len() as u64,
        ..*header
    };
    hdr.encode(&mut h);
    out[..HEADER_LEN].copy_from_slice(&h);
    for (chunk, r) in out[HEADER_LEN..].chunks_exact_mut(RECORD_LEN).zip(records) {
        let mut rec = [0u8; RECORD_LEN];
        r.encode(&mut rec);
        chunk.copy_from_slice(&rec);
    }
    reseal(&mut out);
    out
}

/// FNV-1a 64-bit, continuing from `h`.
fn fnv1a(mut h: u64, data: &[u8]) -> u64 {
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// The media fingerprint of an in-memory media image (see the module docs).
pub fn fingerprint_bytes(media: &[u8]) -> u64 {
    let len = media.len();
    let span = (FINGERPRINT_SPAN as usize).min(len);
    let h = fnv1a(FNV_OFFSET, &(len as u64).to_le_bytes());
    let h = fnv1a(h, &media[..span]);
    fnv1a(h, &media[len - span..])
}

/// The length and fingerprint of a media file (reads at most 128 KiB).
pub fn fingerprint(media: &Path) -> Result<(u64, u64), NlfError> {
    let mut f = File::open(media).map_err(|e| NlfError::io("open", media, e))?;
    let len = f
        .metadata()
        .map_err(|e| NlfError::io("stat", media, e))?
        .len();
    let span = FINGERPRINT_SPAN.min(len);
    let mut buf = vec![0u8; span as usize];
    let h = fnv1a(FNV_OFFSET, &len.to_le_bytes());
    f.read_exact(&mut buf)
        .map_err(|e| NlfError::io("read", media, e))?;
    let h = fnv1a(h, &buf);
    f.seek(SeekFrom::Start(len - span))
        .map_err(|e| NlfError::io("seek", media, e))?;
    f.read_exact(&mut buf)
        .map_err(|e| NlfError::io("read", media, e))?;
    Ok((len, fnv1a(h, &buf)))
}

/// Where a meta file's bytes live: mapped read-only (files) or owned
/// (images built in memory, tests).
#[derive(Debug)]
enum Storage {
    Owned(Vec<u8>),
    Mapped(MappedFile),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Owned(v) => v,
            Storage::Mapped(m) => m.bytes(),
        }
    }
}

/// A validated meta file, mapped read-only (`open`) so a large stream's
/// records are paged in as they are used.
#[derive(Debug)]
pub struct MetaFile {
    header: MetaHeader,
    file: Storage,
}

impl MetaFile {
    /// Reads `meta` and validates it against `media` (see the module docs
    /// for the checks and their order).
    pub fn open(meta: &Path, media: &Path) -> Result<MetaFile, NlfError> {
        let map = MappedFile::open(meta).map_err(|e| NlfError::io("map", meta, e))?;
        let (media_len, fp) = fingerprint(media)?;
        Self::validate(Storage::Mapped(map), media_len, fp)
    }

    /// Validates a meta file image against a media file of `media_len`
    /// bytes with fingerprint `media_fingerprint`.
    pub fn from_bytes(
        bytes: Vec<u8>,
        media_len: u64,
        media_fingerprint: u64,
    ) -> Result<MetaFile, NlfError> {
        Self::validate(Storage::Owned(bytes), media_len, media_fingerprint)
    }

    fn validate(
        file: Storage,
        media_len: u64,
        media_fingerprint: u64,
    ) -> Result<MetaFile, NlfError> {
        let header = Self::check_header(file.bytes(), media_len, media_fingerprint)?;
        let mf = MetaFile { header, file };
        mf.check_records(media_len)?;
        Ok(mf)
    }

    fn check_header(
        bytes: &[u8],
        media_len: u64,
        media_fingerprint: u64,
    ) -> Result<MetaHeader, NlfError> {
        let found = bytes.len() as u64;
        if bytes.len() < HEADER_LEN {
            return Err(NlfError::BadFileLength {
                expected: HEADER_LEN as u64,
                found,
            });
        }
        if bytes[0..8] != MAGIC {
            return Err(NlfError::BadMagic);
        }
        let version = le32(bytes, 8);
        if version != VERSION {
            return Err(NlfError::UnsupportedVersion {
                found: version,
                supported: VERSION,
            });
        }
        if le32(bytes, 12) as usize != HEADER_LEN {
            return Err(NlfError::BadHeader("header length is not 128"));
        }
        if le32(bytes, 16) as usize != RECORD_LEN {
            return Err(NlfError::BadHeader("record length is not 32"));
        }
        let packets = le64(bytes, 32);
        let expected = packets
            .checked_mul(RECORD_LEN as u64)
            .and_then(|r| r.checked_add(HEADER_LEN as u64))
            .ok_or(NlfError::BadHeader("packet count overflows"))?;
        if expected != found {
            return Err(NlfError::BadFileLength { expected, found });
        }
        let stored = le32(bytes, CRC_OFFSET);
        let computed = compute_crc(bytes);
        if stored != computed {
            return Err(NlfError::CrcMismatch { stored, computed });
        }
        let flags = le32(bytes, 20);
        if flags & !(FLAG_RTP | FLAG_MPEGTS) != 0 {
            return Err(NlfError::BadHeader("unknown flag bits set"));
        }
        if bytes[73..76]
            .iter()
            .chain(&bytes[80..HEADER_LEN])
            .any(|&b| b != 0)
        {
            return Err(NlfError::BadHeader("reserved bytes are not zero"));
        }
        let header = MetaHeader {
            version,
            flags,
            payload_size: le32(bytes, 24),
            packets,
            media_len: le64(bytes, 40),
            fingerprint: le64(bytes, 48),
            duration_ns: le64(bytes, 56),
            bit_rate: le64(bytes, 64),
            rtp_payload_type: bytes[72],
            rtp_clock_hz: le32(bytes, 76),
        };
        if header.payload_size == 0 {
            return Err(NlfError::BadHeader("payload size is 0"));
        }
        if header.rtp_payload_type > 127 {
            return Err(NlfError::BadHeader("RTP payload type above 127"));
        }
        if header.media_len != media_len || header.fingerprint != media_fingerprint {
            return Err(NlfError::MediaMismatch {
                meta_len: header.media_len,
                media_len,
                meta_fingerprint: header.fingerprint,
                media_fingerprint,
            });
        }
        Ok(header)
    }

    fn check_records(&self, media_len: u64) -> Result<(), NlfError> {
        let header = self.header;
        for i in 0..self.packets() {
            let Some(p) = self.get(i) else {
                return Err(NlfError::BadRecord {
                    index: i as u64,
                    reason: "cannot be read",
                });
            };
            let reason = if p.len == 0 {
                Some("empty payload")
            } else if p.len > header.payload_size {
                Some("payload longer than the header's payload size")
            } else if p
                .offset
                .checked_add(u64::from(p.len))
                .is_none_or(|e| e > media_len)
            {
                Some("payload range lies outside the media file")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(NlfError::BadRecord {
                    index: i as u64,
                    reason,
                });
            }
        }
        Ok(())
    }

    fn records(&self) -> &[u8] {
        self.file.bytes().get(HEADER_LEN..).unwrap_or(&[])
    }

    /// The header.
    pub fn header(&self) -> &MetaHeader {
        &self.header
    }
    /// Number of packets.
    pub fn packets(&self) -> usize {
        self.records().len() / RECORD_LEN
    }
    /// Packet `i`, or `None` past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<PacketMeta> {
        let start = i.checked_mul(RECORD_LEN)?;
        let r: &[u8; RECORD_LEN] = self
            .records()
            .get(start..start + RECORD_LEN)?
            .try_into()
            .ok()?;
        Some(PacketMeta::decode(r))
    }
    /// All packets in order.
    pub fn iter(&self) -> impl Iterator<Item = PacketMeta> + '_ {
        self.records()
            .chunks_exact(RECORD_LEN)
            .filter_map(|r| r.try_into().ok().map(PacketMeta::decode))
    }
    /// True for RTP framing.
    pub fn rtp(&self) -> bool {
        self.header.rtp()
    }
    /// True if the media was parsed as MPEG-TS.
    pub fn mpegts(&self) -> bool {
        self.header.mpegts()
    }
    /// Longest payload.
    pub fn payload_size(&self) -> u32 {
        self.header.payload_size
    }
    /// Media length.
    pub fn media_len(&self) -> u64 {
        self.header.media_len
    }
    /// Stream duration in ns.
    pub fn duration_ns(&self) -> u64 {
        self.header.duration_ns
    }
    /// Stream bit rate in bit/s.
    pub fn bit_rate(&self) -> u64 {
        self.header.bit_rate
    }
}
