//! Wire formats: zero-copy views and builders for Ethernet II, ARP, IPv4,
//! ICMPv4, UDP and TCP (header and options), and the Internet checksum.
//!
//! # What `wire` owns
//!
//! * For each protocol a *view*, `XxxPacket<T: AsRef<[u8]>>`, wrapping a
//!   buffer. Its `new_checked` constructor checks every length once (buffer
//!   length and the header's own length fields); after that no accessor can
//!   panic or read out of bounds ("parse once, then trust").
//!   With `T: AsMut<[u8]>` the view also has setters for fields that cannot
//!   break those checked lengths.
//! * For each protocol a *repr* (`XxxRepr`) or `emit_*` function that writes a
//!   header into a `&mut [u8]`, computing checksums, and returns the number of
//!   bytes written or a [`WireError`].
//! * [`checksum`]: the Internet checksum, partial sums that combine across
//!   discontiguous buffers, and RFC 1624 incremental updates.
//!
//! # What `wire` may not do
//!
//! No state, no I/O, no clock, no allocation, no `unsafe`: only pure functions
//! on bytes. No input panics; every rejection is a small `Copy` [`WireError`].
//! Policy (what to do with a bad checksum, a fragment, an unknown option)
//! belongs to `proto`, not here.

#![forbid(unsafe_code)]

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod icmp;
pub mod ipv4;
pub mod tcp;
pub mod udp;

pub use arp::{ArpOperation, ArpPacket, ArpRepr};
pub use ethernet::{EthernetAddress, EthernetFrame, EthernetRepr};
pub use icmp::{IcmpPacket, IcmpRepr};
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use tcp::{
    SackBlocks, SeqNumber, TcpFlags, TcpOption, TcpOptions, TcpPacket, TcpRepr, Timestamps,
};
pub use udp::{UdpPacket, UdpRepr};

/// Why a buffer was rejected by a view's `new_checked`, or why a builder could
/// not emit. Small and `Copy` so it can be counted as a drop reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireError {
    /// The buffer is shorter than the fixed header or than a length field says.
    Truncated,
    /// A length field is inconsistent (e.g. UDP length < 8, IPv4 total length
    /// < header length, a value that does not fit its field).
    BadLength,
    /// IPv4 version field is not 4.
    BadVersion,
    /// IPv4 IHL < 5 or TCP data offset < 5.
    BadHeaderLen,
    /// ARP hardware type is not Ethernet (1).
    BadHardwareType,
    /// ARP protocol type is not IPv4 (0x0800).
    BadProtocolType,
    /// ARP hardware/protocol address length is not 6/4.
    BadAddressLen,
    /// A TCP option has a length < 2, runs past the options, or has the wrong
    /// length for its kind.
    BadOption,
    /// TCP options to emit do not fit in 40 bytes.
    OptionsTooLong,
    /// IPv4 fragment offset not a multiple of 8 or too large.
    BadFragOffset,
    /// The output buffer is too small for what is to be emitted.
    BufferTooSmall,
}

impl WireError {
    /// A short static description, usable as a counter label.
    pub const fn as_str(self) -> &'static str {
        match self {
            WireError::Truncated => "truncated",
            WireError::BadLength => "bad length field",
            WireError::BadVersion => "bad IP version",
            WireError::BadHeaderLen => "bad header length",
            WireError::BadHardwareType => "bad ARP hardware type",
            WireError::BadProtocolType => "bad ARP protocol type",
            WireError::BadAddressLen => "bad ARP address length",
            WireError::BadOption => "bad TCP option",
            WireError::OptionsTooLong => "TCP options too long",
            WireError::BadFragOffset => "bad fragment offset",
            WireError::BufferTooSmall => "buffer too small",
        }
    }
}

impl core::fmt::Display for WireError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::error::Error for WireError {}

/// Reads a big-endian `u16` at `at`; callers guarantee `at + 2 <= b.len()`
/// by their constructor checks, and this still cannot panic: it returns 0 if
/// that guarantee were ever broken.
#[inline(always)]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    match b.get(at..at + 2) {
        Some(&[x, y]) => u16::from_be_bytes([x, y]),
        _ => 0,
    }
}

/// Reads a big-endian `u32` at `at` (see [`be16`]).
#[inline(always)]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    match b.get(at..at + 4) {
        Some(&[w, x, y, z]) => u32::from_be_bytes([w, x, y, z]),
        _ => 0,
    }
}

/// Writes a big-endian `u16` at `at`, if it fits.
#[inline(always)]
pub(crate) fn put16(b: &mut [u8], at: usize, v: u16) {
    if let Some(d) = b.get_mut(at..at + 2) {
        d.copy_from_slice(&v.to_be_bytes());
    }
}

/// Writes a big-endian `u32` at `at`, if it fits.
#[inline(always)]
pub(crate) fn put32(b: &mut [u8], at: usize, v: u32) {
    if let Some(d) = b.get_mut(at..at + 4) {
        d.copy_from_slice(&v.to_be_bytes());
    }
}

/// Reads one byte (0 if out of range; see [`be16`]).
#[inline(always)]
pub(crate) fn byte(b: &[u8], at: usize) -> u8 {
    b.get(at).copied().unwrap_or(0)
}

/// Sub-slice `b[from..to]`, empty if out of range (see [`be16`]).
#[inline(always)]
pub(crate) fn range(b: &[u8], from: usize, to: usize) -> &[u8] {
    b.get(from..to).unwrap_or(&[])
}

/// Mutable sub-slice `b[from..to]`, empty if out of range.
#[inline(always)]
pub(crate) fn range_mut(b: &mut [u8], from: usize, to: usize) -> &mut [u8] {
    b.get_mut(from..to).unwrap_or(&mut [])
}
