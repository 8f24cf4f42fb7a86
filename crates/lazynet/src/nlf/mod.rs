//! Network level framing (NLF): UDP packets prebuilt once per media file and
//! payload size, sent by filling in a few header fields and one folded
//! checksum, so the per-packet cost does not grow with the packet size
//! (Halvorsen, Plagemann, Goebel, "Network level framing in INSTANCE").
//!
//! # What `nlf` owns
//!
//! * [`meta`]: the meta-data file format, one file per (media file, payload
//!   size, RTP or not). Fixed-size little-endian records hold, per packet,
//!   the payload's place in the media file, its stored ones'-complement
//!   partial sum, its send time and its RTP timestamp. Versioned, with a
//!   magic number, a CRC-32 and a fingerprint of the media file.
//! * [`prebuild`](mod@prebuild): the prebuilder that reads a media file once (MPEG-TS with
//!   PCR-derived send times, or opaque bytes at a nominal bit rate) and writes
//!   a meta file next to it (the media is never copied or modified).
//! * [`paths`]: the four send paths measured against each other:
//!   `traditional` (copy and checksum everything), `v1` (stored payload sum,
//!   headers built at send time), `v2` (per-client header template block-copied
//!   and patched), `v3` (stored sums, header fields filled in one by one).
//!
//! # What `nlf` may not do
//!
//! It uses only [`crate::wire`] (builders, views and the Internet checksum).
//! The format, the prebuilder and the send paths never touch a NIC, a ring,
//! the demux or a protocol state machine. [`stream`] asks the `stack` for the
//! next hop's MAC and hands finished frames to its NIC — never running IP or
//! UDP code. No `unsafe` (files are mapped through [`crate::mem::MappedFile`];
//! unsafe code lives in `mem`, `nic` and `sys`). No input panics: every
//! bad file, size or buffer is a typed [`NlfError`]. The send paths `v1`–`v3` never read or write payload
//! bytes (the payload goes by reference) and never allocate.

#![forbid(unsafe_code)]

pub mod meta;
pub mod paths;
pub mod prebuild;
pub mod stream;

use std::fmt;
use std::io;
use std::path::PathBuf;

pub use meta::{MetaFile, MetaHeader, PacketMeta};
pub use paths::{ClientConfig, ClientHeader, RtpParams, SendPath};
pub use prebuild::{meta_path, prebuild, prebuild_with, PrebuildOptions, PrebuildSummary};

/// Everything that can go wrong in `nlf`, each with a message naming the
/// file or value at fault.
#[derive(Debug)]
pub enum NlfError {
    /// An I/O operation on `path` failed.
    Io {
        /// What was being done ("open", "read", "write", ...).
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The meta file does not start with the NLF magic number.
    BadMagic,
    /// The meta file's format version is not one this build reads.
    UnsupportedVersion {
        /// Version in the file.
        found: u32,
        /// Version this build reads.
        supported: u32,
    },
    /// The meta file is shorter or longer than its header says.
    BadFileLength {
        /// Length implied by the header (or the header's own length).
        expected: u64,
        /// Actual length.
        found: u64,
    },
    /// The header holds an impossible value.
    BadHeader(&'static str),
    /// The stored CRC-32 does not match the file's contents.
    CrcMismatch {
        /// CRC stored in the header.
        stored: u32,
        /// CRC computed over the file.
        computed: u32,
    },
    /// The meta file was built from a different media file (or the media
    /// file changed since).
    MediaMismatch {
        /// Media length recorded in the meta file.
        meta_len: u64,
        /// Actual media length.
        media_len: u64,
        /// Fingerprint recorded in the meta file.
        meta_fingerprint: u64,
        /// Fingerprint of the media file now.
        media_fingerprint: u64,
    },
    /// A record's payload range does not lie inside the media file, or
    /// records do not tile the media in order.
    BadRecord {
        /// Record index.
        index: u64,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The requested payload size cannot be used.
    BadPayloadSize {
        /// Requested size.
        payload: usize,
        /// Why not.
        reason: &'static str,
    },
    /// The media file is empty.
    EmptyMedia,
    /// The output buffer cannot hold the frame.
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A packet's payload is longer than one IPv4 datagram can carry.
    PayloadTooLong {
        /// Payload length.
        len: u64,
        /// The most this client's headers allow.
        max: usize,
    },
    /// A payload slice handed to a send path does not match the record.
    PayloadMismatch {
        /// Length from the record.
        expected: u64,
        /// Length of the slice.
        found: usize,
    },
}

impl fmt::Display for NlfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NlfError::Io { op, path, source } => {
                write!(f, "cannot {op} {}: {source}", path.display())
            }
            NlfError::BadMagic => f.write_str("not an NLF meta file (bad magic number)"),
            NlfError::UnsupportedVersion { found, supported } => write!(
                f,
                "NLF meta file version {found} is not supported (this build reads version {supported})"
            ),
            NlfError::BadFileLength { expected, found } => write!(
                f,
                "NLF meta file is {found} bytes long, its header implies {expected} (truncated or padded)"
            ),
            NlfError::BadHeader(what) => write!(f, "NLF meta file header is invalid: {what}"),
            NlfError::CrcMismatch { stored, computed } => write!(
                f,
                "NLF meta file is corrupt: CRC-32 is {computed:#010x}, header says {stored:#010x}"
            ),
            NlfError::MediaMismatch {
                meta_len,
                media_len,
                meta_fingerprint,
                media_fingerprint,
            } => write!(
                f,
                "NLF meta file belongs to a different media file: it was built for {meta_len} bytes \
                 (fingerprint {meta_fingerprint:#018x}), the media file is {media_len} bytes \
                 (fingerprint {media_fingerprint:#018x})"
            ),
            NlfError::BadRecord { index, reason } => {
                write!(f, "NLF meta file record {index} is invalid: {reason}")
            }
            NlfError::BadPayloadSize { payload, reason } => {
                write!(f, "payload size {payload} cannot be used: {reason}")
            }
            NlfError::EmptyMedia => f.write_str("the media file is empty"),
            NlfError::BufferTooSmall { need, have } => {
                write!(f, "frame buffer too small: need {need} bytes, have {have}")
            }
            NlfError::PayloadTooLong { len, max } => write!(
                f,
                "payload of {len} bytes does not fit one IPv4 datagram with these headers (at most {max})"
            ),
            NlfError::PayloadMismatch { expected, found } => write!(
                f,
                "payload slice is {found} bytes, the packet record says {expected}"
            ),
        }
    }
}

impl std::error::Error for NlfError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NlfError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl NlfError {
    pub(crate) fn io(op: &'static str, path: &std::path::Path, source: io::Error) -> Self {
        NlfError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }
}
