//! TCP header and options (RFC 9293 §3.1, RFC 7323, RFC 2018) and
//! wrap-aware sequence numbers.
//!
//! **Owns:** the TCP header and option views, their builders, the
//! checksum over the pseudo-header, and `SeqNumber`. **May not touch:**
//! state of any kind (as all of `wire`): what a segment means is
//! `proto::tcp`'s.

use core::cmp::Ordering;
use core::ops::{Add, AddAssign, Sub};
use std::net::Ipv4Addr;

use super::checksum;
use super::ipv4::PROTO_TCP;
use super::{be16, be32, byte, put16, put32, range, range_mut, WireError};

/// Length of the TCP header without options.
pub const MIN_HEADER_LEN: usize = 20;
/// Maximum length of the options (data offset 15 → 60-byte header).
pub const MAX_OPTIONS_LEN: usize = 40;

/// A TCP sequence number: arithmetic modulo 2^32 and comparison by signed
/// distance (RFC 9293 §3.4: "a sequence number ... can be as large as
/// 2**32 - 1 ... all arithmetic dealing with sequence numbers must be
/// performed modulo 2**32"; comparison as in RFC 1982 §3.2).
///
/// `a < b` iff `b - a`, taken modulo 2^32, lies in `1..2^31`. Two numbers
/// exactly 2^31 apart are unordered (`partial_cmp` is `None`, RFC 1982:
/// "undefined"). This ordering is not transitive over the whole ring; only
/// compare numbers that lie within one window of each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SeqNumber(pub u32);

impl SeqNumber {
    /// Signed distance `self - other`, in `-2^31..2^31`.
    #[inline]
    pub const fn diff(self, other: SeqNumber) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }
    /// The greater of two numbers (by wrap-aware order; `self` if unordered).
    #[inline]
    pub fn max(self, other: SeqNumber) -> SeqNumber {
        if other.diff(self) > 0 {
            other
        } else {
            self
        }
    }
    /// The lesser of two numbers (by wrap-aware order; `self` if unordered).
    #[inline]
    pub fn min(self, other: SeqNumber) -> SeqNumber {
        if other.diff(self) < 0 && other.diff(self) != i32::MIN {
            other
        } else {
            self
        }
    }
    /// `lo <= self < hi`, wrap-aware (RFC 9293 §3.4 acceptability tests):
    /// computed as `self - lo < hi - lo` modulo 2^32.
    #[inline]
    pub const fn in_window(self, lo: SeqNumber, hi: SeqNumber) -> bool {
        self.0.wrapping_sub(lo.0) < hi.0.wrapping_sub(lo.0)
    }
}

impl PartialOrd for SeqNumber {
    #[inline]
    fn partial_cmp(&self, other: &SeqNumber) -> Option<Ordering> {
        match self.diff(*other) {
            0 => Some(Ordering::Equal),
            i32::MIN => None,
            d if d < 0 => Some(Ordering::Less),
            _ => Some(Ordering::Greater),
        }
    }
}

impl Add<u32> for SeqNumber {
    type Output = SeqNumber;
    #[inline]
    fn add(self, rhs: u32) -> SeqNumber {
        SeqNumber(self.0.wrapping_add(rhs))
    }
}

impl AddAssign<u32> for SeqNumber {
    #[inline]
    fn add_assign(&mut self, rhs: u32) {
        self.0 = self.0.wrapping_add(rhs);
    }
}

impl Sub<u32> for SeqNumber {
    type Output = SeqNumber;
    #[inline]
    fn sub(self, rhs: u32) -> SeqNumber {
        SeqNumber(self.0.wrapping_sub(rhs))
    }
}

impl Sub<SeqNumber> for SeqNumber {
    type Output = i32;
    /// Signed distance, see [`SeqNumber::diff`].
    #[inline]
    fn sub(self, rhs: SeqNumber) -> i32 {
        self.diff(rhs)
    }
}

impl core::fmt::Display for SeqNumber {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.fmt(f)
    }
}

/// The eight TCP control bits (RFC 9293 §3.1, RFC 3168 for ECE/CWR).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x01);
    /// Synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x02);
    /// Reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x04);
    /// Push.
    pub const PSH: TcpFlags = TcpFlags(0x08);
    /// Acknowledgment field significant.
    pub const ACK: TcpFlags = TcpFlags(0x10);
    /// Urgent pointer significant.
    pub const URG: TcpFlags = TcpFlags(0x20);
    /// ECN-Echo.
    pub const ECE: TcpFlags = TcpFlags(0x40);
    /// Congestion Window Reduced.
    pub const CWR: TcpFlags = TcpFlags(0x80);
    /// No flags.
    pub const NONE: TcpFlags = TcpFlags(0);

    /// All bits of `other` are set in `self`.
    #[inline]
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }
    /// Some bit of `other` is set in `self`.
    #[inline]
    pub const fn intersects(self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }
    /// No bits set.
    #[inline]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// The raw bits.
    #[inline]
    pub const fn bits(self) -> u8 {
        self.0
    }
    /// Sets or clears the bits of `other`.
    #[inline]
    pub fn set(&mut self, other: TcpFlags, on: bool) {
        if on {
            self.0 |= other.0
        } else {
            self.0 &= !other.0
        }
    }
}

impl core::ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, r: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | r.0)
    }
}
impl core::ops::BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, r: TcpFlags) {
        self.0 |= r.0
    }
}
impl core::ops::BitAnd for TcpFlags {
    type Output = TcpFlags;
    fn bitand(self, r: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & r.0)
    }
}
impl core::ops::Not for TcpFlags {
    type Output = TcpFlags;
    fn not(self) -> TcpFlags {
        TcpFlags(!self.0)
    }
}

impl core::fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        const NAMES: [&str; 8] = ["FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR"];
        let mut first = true;
        for (i, n) in NAMES.iter().enumerate() {
            if self.0 & (1 << i) != 0 {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(n)?;
                first = false;
            }
        }
        if first {
            f.write_str("(none)")?;
        }
        Ok(())
    }
}

/// Up to four SACK blocks (RFC 2018 §3: at most 4 fit in 40 option bytes),
/// stored inline: no allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SackBlocks {
    blocks: [(SeqNumber, SeqNumber); 4],
    count: u8,
}

impl SackBlocks {
    /// No blocks.
    pub const EMPTY: SackBlocks = SackBlocks {
        blocks: [(SeqNumber(0), SeqNumber(0)); 4],
        count: 0,
    };

    /// Builds from up to four `(left edge, right edge)` blocks; `None` if more.
    pub fn new(blocks: &[(SeqNumber, SeqNumber)]) -> Option<Self> {
        let mut s = SackBlocks::EMPTY;
        for &b in blocks {
            s.push(b).ok()?;
        }
        Some(s)
    }

    /// Appends a block; `Err` if four are already present.
    pub fn push(&mut self, b: (SeqNumber, SeqNumber)) -> Result<(), WireError> {
        let slot = self
            .blocks
            .get_mut(usize::from(self.count))
            .ok_or(WireError::OptionsTooLong)?;
        *slot = b;
        self.count += 1;
        Ok(())
    }

    /// The blocks present.
    pub fn as_slice(&self) -> &[(SeqNumber, SeqNumber)] {
        self.blocks.get(..usize::from(self.count)).unwrap_or(&[])
    }

    /// Number of blocks.
    pub const fn len(&self) -> usize {
        self.count as usize
    }

    /// No blocks.
    pub const fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// Option kinds.
pub mod kind {
    /// End of option list.
    pub const END: u8 = 0;
    /// No-operation.
    pub const NOP: u8 = 1;
    /// Maximum segment size (RFC 9293 §3.2).
    pub const MSS: u8 = 2;
    /// Window scale (RFC 7323 §2).
    pub const WINDOW_SCALE: u8 = 3;
    /// SACK permitted (RFC 2018 §2).
    pub const SACK_PERMITTED: u8 = 4;
    /// SACK (RFC 2018 §3).
    pub const SACK: u8 = 5;
    /// Timestamps (RFC 7323 §3).
    pub const TIMESTAMPS: u8 = 8;
}

/// One TCP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// Kind 0; the iterator stops after it.
    EndOfList,
    /// Kind 1.
    Nop,
    /// Kind 2, length 4.
    Mss(u16),
    /// Kind 3, length 3.
    WindowScale(u8),
    /// Kind 4, length 2.
    SackPermitted,
    /// Kind 5, length 2 + 8n, n in 1..=4.
    Sack(SackBlocks),
    /// Kind 8, length 10.
    Timestamps {
        /// TSval.
        tsval: u32,
        /// TSecr.
        tsecr: u32,
    },
    /// Any other kind with a well-formed length; `data` excludes kind and length.
    Unknown {
        /// Kind.
        kind: u8,
        /// Option data.
        data: &'a [u8],
    },
}

impl TcpOption<'_> {
    /// Encoded length in bytes.
    pub fn len(&self) -> usize {
        match self {
            TcpOption::EndOfList | TcpOption::Nop => 1,
            TcpOption::Mss(_) => 4,
            TcpOption::WindowScale(_) => 3,
            TcpOption::SackPermitted => 2,
            TcpOption::Sack(s) => 2 + 8 * s.len(),
            TcpOption::Timestamps { .. } => 10,
            TcpOption::Unknown { data, .. } => 2 + data.len(),
        }
    }

    /// Never true (every option has at least its kind byte).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the option at the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let n = self.len();
        if n > 255 {
            return Err(WireError::OptionsTooLong);
        }
        let b = buf.get_mut(..n).ok_or(WireError::BufferTooSmall)?;
        match *self {
            TcpOption::EndOfList => b[0] = kind::END,
            TcpOption::Nop => b[0] = kind::NOP,
            TcpOption::Mss(m) => {
                b[..2].copy_from_slice(&[kind::MSS, 4]);
                b[2..4].copy_from_slice(&m.to_be_bytes());
            }
            TcpOption::WindowScale(s) => b.copy_from_slice(&[kind::WINDOW_SCALE, 3, s]),
            TcpOption::SackPermitted => b.copy_from_slice(&[kind::SACK_PERMITTED, 2]),
            TcpOption::Sack(s) => {
                b[..2].copy_from_slice(&[kind::SACK, n as u8]);
                for (i, (l, r)) in s.as_slice().iter().enumerate() {
                    put32(b, 2 + 8 * i, l.0);
                    put32(b, 6 + 8 * i, r.0);
                }
            }
            TcpOption::Timestamps { tsval, tsecr } => {
                b[..2].copy_from_slice(&[kind::TIMESTAMPS, 10]);
                put32(b, 2, tsval);
                put32(b, 6, tsecr);
            }
            TcpOption::Unknown { kind, data } => {
                b[0] = kind;
                b[1] = n as u8;
                b[2..].copy_from_slice(data);
            }
        }
        Ok(n)
    }
}

/// Iterator over the options bytes of a TCP header. Never panics. Yields
/// `Err(WireError::BadOption)` once and then ends if an option's length is
/// < 2, runs past the end, or is wrong for its kind (RFC 9293 §3.1: "a
/// TCP implementation MUST be prepared to handle an illegal option length
/// (e.g., zero); a suggested procedure is to reset the connection"). Ends
/// after `EndOfList`.
#[derive(Debug, Clone)]
pub struct TcpOptions<'a> {
    rest: &'a [u8],
}

impl<'a> TcpOptions<'a> {
    /// Iterates over raw options bytes.
    pub fn new(options: &'a [u8]) -> Self {
        TcpOptions { rest: options }
    }

    fn parse_one(&mut self) -> Result<TcpOption<'a>, WireError> {
        let rest = self.rest;
        let k = byte(rest, 0);
        match k {
            kind::END => {
                self.rest = &[];
                return Ok(TcpOption::EndOfList);
            }
            kind::NOP => {
                self.rest = range(rest, 1, rest.len());
                return Ok(TcpOption::Nop);
            }
            _ => {}
        }
        let len = match rest.get(1) {
            Some(&l) if l >= 2 && usize::from(l) <= rest.len() => usize::from(l),
            _ => return Err(WireError::BadOption),
        };
        let data = range(rest, 2, len);
        self.rest = range(rest, len, rest.len());
        let opt = match (k, len) {
            (kind::MSS, 4) => TcpOption::Mss(be16(data, 0)),
            (kind::WINDOW_SCALE, 3) => TcpOption::WindowScale(byte(data, 0)),
            (kind::SACK_PERMITTED, 2) => TcpOption::SackPermitted,
            (kind::SACK, 10 | 18 | 26 | 34) => {
                let mut s = SackBlocks::EMPTY;
                for blk in data.chunks_exact(8) {
                    s.push((SeqNumber(be32(blk, 0)), SeqNumber(be32(blk, 4))))?;
                }
                TcpOption::Sack(s)
            }
            (kind::TIMESTAMPS, 10) => TcpOption::Timestamps {
                tsval: be32(data, 0),
                tsecr: be32(data, 4),
            },
            (
                kind::MSS
                | kind::WINDOW_SCALE
                | kind::SACK_PERMITTED
                | kind::SACK
                | kind::TIMESTAMPS,
                _,
            ) => return Err(WireError::BadOption),
            (kind, _) => TcpOption::Unknown { kind, data },
        };
        Ok(opt)
    }
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = Result<TcpOption<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let r = self.parse_one();
        if r.is_err() {
            self.rest = &[];
        }
        Some(r)
    }
}

impl core::iter::FusedIterator for TcpOptions<'_> {}

/// A view of a TCP segment. Pass exactly the IPv4 payload (TCP has no length
/// field of its own). Checked: ≥ 20 bytes, `5 ≤ data offset` and
/// `data offset*4 ≤ buf.len()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buf: T,
    header_len: u8,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps and checks `buf`.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        if b.len() < MIN_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let header_len = (b[12] >> 4) * 4;
        if usize::from(header_len) < MIN_HEADER_LEN {
            return Err(WireError::BadHeaderLen);
        }
        if usize::from(header_len) > b.len() {
            return Err(WireError::Truncated);
        }
        Ok(TcpPacket { buf, header_len })
    }

    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buf
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.b(), 0)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.b(), 2)
    }
    /// Sequence number.
    pub fn seq_number(&self) -> SeqNumber {
        SeqNumber(be32(self.b(), 4))
    }
    /// Acknowledgment number (meaningful if ACK is set).
    pub fn ack_number(&self) -> SeqNumber {
        SeqNumber(be32(self.b(), 8))
    }
    /// Data offset in 32-bit words.
    pub fn data_offset(&self) -> u8 {
        self.header_len / 4
    }
    /// Header length in bytes (data offset × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.header_len)
    }
    /// The four reserved bits after the data offset (the old NS bit is the
    /// lowest).
    pub fn reserved(&self) -> u8 {
        byte(self.b(), 12) & 0x0F
    }
    /// Control bits.
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(byte(self.b(), 13))
    }
    /// Receive window (unscaled).
    pub fn window(&self) -> u16 {
        be16(self.b(), 14)
    }
    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.b(), 16)
    }
    /// Urgent pointer.
    pub fn urgent(&self) -> u16 {
        be16(self.b(), 18)
    }
    /// The raw options bytes.
    pub fn options(&self) -> &[u8] {
        range(self.b(), MIN_HEADER_LEN, self.header_len())
    }
    /// Iterator over the options.
    pub fn options_iter(&self) -> TcpOptions<'_> {
        TcpOptions::new(self.options())
    }
    /// The segment data.
    pub fn payload(&self) -> &[u8] {
        let b = self.b();
        range(b, self.header_len(), b.len())
    }
    /// Length of the whole segment (header + data).
    pub fn segment_len(&self) -> usize {
        self.b().len()
    }
    /// Sequence space the segment occupies: data length + 1 for SYN + 1 for
    /// FIN (RFC 9293 §3.4 "SEG.LEN").
    pub fn seq_len(&self) -> usize {
        let f = self.flags();
        self.payload().len()
            + usize::from(f.contains(TcpFlags::SYN))
            + usize::from(f.contains(TcpFlags::FIN))
    }
    /// True if the checksum over pseudo-header and segment is correct.
    /// A segment longer than 65535 bytes cannot verify.
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        let Ok(len) = u16::try_from(self.b().len()) else {
            return false;
        };
        let ph = checksum::pseudo_header_ipv4(src, dst, PROTO_TCP, len);
        checksum::fold(checksum::partial(self.b(), ph)) == 0xFFFF
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buf.as_mut()
    }
    /// Sets the source port.
    pub fn set_src_port(&mut self, p: u16) {
        put16(self.bm(), 0, p);
    }
    /// Sets the destination port.
    pub fn set_dst_port(&mut self, p: u16) {
        put16(self.bm(), 2, p);
    }
    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, s: SeqNumber) {
        put32(self.bm(), 4, s.0);
    }
    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, s: SeqNumber) {
        put32(self.bm(), 8, s.0);
    }
    /// Sets the control bits.
    pub fn set_flags(&mut self, f: TcpFlags) {
        if let Some(x) = self.bm().get_mut(13) {
            *x = f.0;
        }
    }
    /// Sets the window.
    pub fn set_window(&mut self, w: u16) {
        put16(self.bm(), 14, w);
    }
    /// Sets the checksum field.
    pub fn set_checksum(&mut self, c: u16) {
        put16(self.bm(), 16, c);
    }
    /// Sets the urgent pointer.
    pub fn set_urgent(&mut self, u: u16) {
        put16(self.bm(), 18, u);
    }
    /// Recomputes the checksum over pseudo-header and whole segment.
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let b = self.buf.as_ref();
        let len = u16::try_from(b.len()).unwrap_or(u16::MAX);
        let ph = checksum::pseudo_header_ipv4(src, dst, PROTO_TCP, len);
        let c = !checksum::fold(checksum::partial(b, ph));
        self.set_checksum(c);
    }
    /// The options bytes, writable.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        range_mut(self.bm(), MIN_HEADER_LEN, h)
    }
    /// The data, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        let b = self.bm();
        let n = b.len();
        range_mut(b, h, n)
    }
}

/// Timestamps option values (RFC 7323 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamps {
    /// TSval.
    pub tsval: u32,
    /// TSecr.
    pub tsecr: u32,
}

/// A TCP header to emit, with the options we send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: SeqNumber,
    /// Acknowledgment number (written as is; 0 unless ACK, by convention).
    pub ack: SeqNumber,
    /// Control bits.
    pub flags: TcpFlags,
    /// Window field (already scaled down by the caller).
    pub window: u16,
    /// Urgent pointer.
    pub urgent: u16,
    /// MSS option.
    pub mss: Option<u16>,
    /// Window scale option (shift count).
    pub window_scale: Option<u8>,
    /// SACK-permitted option.
    pub sack_permitted: bool,
    /// SACK blocks (none if empty).
    pub sack: SackBlocks,
    /// Timestamps option.
    pub timestamps: Option<Timestamps>,
    /// Data length after the header.
    pub payload_len: usize,
}

impl TcpRepr {
    /// A template with all fields zero / absent.
    pub const EMPTY: TcpRepr = TcpRepr {
        src_port: 0,
        dst_port: 0,
        seq: SeqNumber(0),
        ack: SeqNumber(0),
        flags: TcpFlags::NONE,
        window: 0,
        urgent: 0,
        mss: None,
        window_scale: None,
        sack_permitted: false,
        sack: SackBlocks::EMPTY,
        timestamps: None,
        payload_len: 0,
    };

    /// Reads a checked segment, interpreting the known options (later
    /// duplicates win; unknown ones are skipped). Fails on malformed options.
    pub fn parse<T: AsRef<[u8]>>(p: &TcpPacket<T>) -> Result<Self, WireError> {
        let mut r = TcpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq: p.seq_number(),
            ack: p.ack_number(),
            flags: p.flags(),
            window: p.window(),
            urgent: p.urgent(),
            payload_len: p.payload().len(),
            ..TcpRepr::EMPTY
        };
        // The options of nearly every segment of a connection with
        // timestamps: the timestamps option and two NOPs, after them (what
        // `write_header` emits) or before them (RFC 7323 Appendix A; what
        // Linux sends). Read in place: the same result as the loop below.
        let opts = p.options();
        if opts.len() == 12 {
            let at = match opts {
                [1, 1, 8, 10, ..] => Some(4),
                [8, 10, .., 1, 1] => Some(2),
                _ => None,
            };
            if let Some(at) = at {
                r.timestamps = Some(Timestamps {
                    tsval: be32(opts, at),
                    tsecr: be32(opts, at + 4),
                });
                return Ok(r);
            }
        }
        for o in p.options_iter() {
            match o? {
                TcpOption::Mss(m) => r.mss = Some(m),
                TcpOption::WindowScale(s) => r.window_scale = Some(s),
                TcpOption::SackPermitted => r.sack_permitted = true,
                TcpOption::Sack(s) => r.sack = s,
                TcpOption::Timestamps { tsval, tsecr } => {
                    r.timestamps = Some(Timestamps { tsval, tsecr })
                }
                TcpOption::EndOfList | TcpOption::Nop | TcpOption::Unknown { .. } => {}
            }
        }
        Ok(r)
    }

    fn options_len_unpadded(&self) -> usize {
        self.mss.map_or(0, |_| 4)
            + self.window_scale.map_or(0, |_| 3)
            + if self.sack_permitted { 2 } else { 0 }
            + if self.sack.is_empty() {
                0
            } else {
                2 + 8 * self.sack.len()
            }
            + self.timestamps.map_or(0, |_| 10)
    }

    /// Header length (20 + options padded to a multiple of 4); `Err` if the
    /// options exceed 40 bytes.
    pub fn header_len(&self) -> Result<usize, WireError> {
        let o = self.options_len_unpadded().next_multiple_of(4);
        if o > MAX_OPTIONS_LEN {
            return Err(WireError::OptionsTooLong);
        }
        Ok(MIN_HEADER_LEN + o)
    }

    /// Writes header and options (MSS, window scale, SACK-permitted, SACK,
    /// timestamps, in that order, then NOPs to a 4-byte boundary) at the start
    /// of `buf`, whose bytes `header_len..header_len + payload_len` must
    /// already hold the data, and the checksum over pseudo-header, header and
    /// data. Returns the segment length.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub fn emit(&self, buf: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr) -> Result<usize, WireError> {
        let hl = self.header_len()?;
        let total = hl + self.payload_len;
        let len16 = u16::try_from(total).map_err(|_| WireError::BadLength)?;
        let seg = buf.get_mut(..total).ok_or(WireError::BufferTooSmall)?;
        self.write_header(&mut seg[..hl])?;
        let ph = checksum::pseudo_header_ipv4(src, dst, PROTO_TCP, len16);
        let c = !checksum::fold(checksum::partial(seg, ph));
        put16(seg, 16, c);
        Ok(total)
    }

    /// Writes only the header (`header_len()` bytes at the front of `buf`),
    /// taking the payload's checksum contribution from `payload_sum`, a
    /// precomputed `checksum::partial(payload, 0)` (e.g. from
    /// `checksum::copy_and_partial`): the payload is not read. The checksum
    /// equals [`emit`](Self::emit)'s. Returns the header length.
    pub fn emit_header_with_payload_sum(
        &self,
        buf: &mut [u8],
        src: Ipv4Addr,
        dst: Ipv4Addr,
        payload_sum: u32,
    ) -> Result<usize, WireError> {
        let hl = self.header_len()?;
        let len16 = u16::try_from(hl + self.payload_len).map_err(|_| WireError::BadLength)?;
        let h = buf.get_mut(..hl).ok_or(WireError::BufferTooSmall)?;
        self.write_header(h)?;
        let ph = checksum::pseudo_header_ipv4(src, dst, PROTO_TCP, len16);
        // The header length is a multiple of 4: the payload starts at an
        // even offset, so its sum adds as is.
        let c = !checksum::fold(checksum::combine(checksum::partial(h, ph), payload_sum));
        put16(h, 16, c);
        Ok(hl)
    }

    /// Writes the header with a zero checksum into `seg` (exactly
    /// `header_len()` bytes).
    #[cfg_attr(lazynet_pin, inline(always))]
    fn write_header(&self, seg: &mut [u8]) -> Result<(), WireError> {
        let hl = seg.len();
        put16(seg, 0, self.src_port);
        put16(seg, 2, self.dst_port);
        put32(seg, 4, self.seq.0);
        put32(seg, 8, self.ack.0);
        seg[12] = ((hl / 4) as u8) << 4;
        seg[13] = self.flags.0;
        put16(seg, 14, self.window);
        put16(seg, 16, 0);
        put16(seg, 18, self.urgent);
        let opts = &mut seg[MIN_HEADER_LEN..hl];
        // Nearly every segment of a connection with timestamps carries
        // them alone: written in place, the same bytes as the loop below
        // (TS, then two NOPs).
        if let (Some(t), None, None, false, true, 12) = (
            self.timestamps,
            self.mss,
            self.window_scale,
            self.sack_permitted,
            self.sack.is_empty(),
            opts.len(),
        ) {
            opts[0] = kind::TIMESTAMPS;
            opts[1] = 10;
            put32(opts, 2, t.tsval);
            put32(opts, 6, t.tsecr);
            opts[10] = kind::NOP;
            opts[11] = kind::NOP;
            return Ok(());
        }
        let mut at = 0;
        let mut put = |o: TcpOption<'_>, opts: &mut [u8]| -> Result<(), WireError> {
            at += o.emit(opts.get_mut(at..).unwrap_or(&mut []))?;
            Ok(())
        };
        if let Some(m) = self.mss {
            put(TcpOption::Mss(m), opts)?;
        }
        if let Some(s) = self.window_scale {
            put(TcpOption::WindowScale(s), opts)?;
        }
        if self.sack_permitted {
            put(TcpOption::SackPermitted, opts)?;
        }
        if !self.sack.is_empty() {
            put(TcpOption::Sack(self.sack), opts)?;
        }
        if let Some(t) = self.timestamps {
            put(
                TcpOption::Timestamps {
                    tsval: t.tsval,
                    tsecr: t.tsecr,
                },
                opts,
            )?;
        }
        // Pad with NOPs to the 4-byte boundary the data offset requires.
        for b in opts.get_mut(at..).unwrap_or(&mut []) {
            *b = kind::NOP;
        }
        Ok(())
    }

    /// Copies `payload` (which must be `payload_len` long) after the header,
    /// then does [`emit`](Self::emit).
    pub fn emit_with_payload(
        &self,
        buf: &mut [u8],
        src: Ipv4Addr,
        dst: Ipv4Addr,
        payload: &[u8],
    ) -> Result<usize, WireError> {
        if payload.len() != self.payload_len {
            return Err(WireError::BadLength);
        }
        let hl = self.header_len()?;
        buf.get_mut(hl..hl + payload.len())
            .ok_or(WireError::BufferTooSmall)?
            .copy_from_slice(payload);
        self.emit(buf, src, dst)
    }
}

#[cfg(test)]
mod tests {
    /// The in-place read of the two usual timestamp layouts gives what the
    /// option loop gives.
    #[test]
    fn timestamp_layouts_parse_like_the_option_loop() {
        for opts in [
            [1u8, 1, 8, 10, 1, 2, 3, 4, 5, 6, 7, 8],
            [8u8, 10, 1, 2, 3, 4, 5, 6, 7, 8, 1, 1],
            [8u8, 10, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0],
            [1u8, 8, 10, 1, 2, 3, 4, 5, 6, 7, 8, 1],
        ] {
            let mut b = [0u8; 32];
            b[12] = 8 << 4;
            b[20..].copy_from_slice(&opts);
            let p = TcpPacket::new_checked(&b[..]).unwrap();
            let fast = TcpRepr::parse(&p).unwrap();
            let mut slow = None;
            for o in p.options_iter() {
                if let TcpOption::Timestamps { tsval, tsecr } = o.unwrap() {
                    slow = Some(Timestamps { tsval, tsecr });
                }
            }
            assert_eq!(fast.timestamps, slow, "{opts:?}");
            assert_eq!(fast.timestamps.map(|t| t.tsval), Some(0x0102_0304));
        }
    }

    /// The in-place write of a timestamps-only header gives what the
    /// option loop gives (TS option, then NOPs) and parses back.
    #[test]
    fn timestamps_alone_write_like_the_option_loop() {
        let r = TcpRepr {
            src_port: 7,
            dst_port: 9,
            seq: SeqNumber(0x1122_3344),
            ack: SeqNumber(0x5566_7788),
            flags: TcpFlags::ACK,
            window: 1000,
            timestamps: Some(Timestamps {
                tsval: 0x0102_0304,
                tsecr: 0xA0B0_C0D0,
            }),
            ..TcpRepr::EMPTY
        };
        let mut fast = [0u8; 32];
        r.emit(&mut fast, SRC, DST).unwrap();
        let mut slow = [0u8; 32];
        slow[..20].copy_from_slice(&fast[..20]);
        let n = TcpOption::Timestamps {
            tsval: 0x0102_0304,
            tsecr: 0xA0B0_C0D0,
        }
        .emit(&mut slow[20..])
        .unwrap();
        slow[20 + n..].fill(kind::NOP);
        assert_eq!(fast, slow);
        let p = TcpPacket::new_checked(&fast[..]).unwrap();
        assert!(p.verify_checksum(SRC, DST));
        assert_eq!(TcpRepr::parse(&p).unwrap(), r);
    }

    use super::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn opts(b: &[u8]) -> Vec<Result<TcpOption<'_>, WireError>> {
        TcpOptions::new(b).collect()
    }

    #[test]
    fn seq_number_wraps() {
        let a = SeqNumber(u32::MAX - 1);
        let b = a + 4;
        assert_eq!(b, SeqNumber(2));
        assert!(a < b);
        assert!(b > a);
        assert_eq!(b - a, 4);
        assert_eq!(a - b, -4);
        assert_eq!(b - 4u32, a);
        assert!(SeqNumber(0) < SeqNumber(0x7FFF_FFFF));
        assert!(SeqNumber(0) > SeqNumber(0x8000_0001));
        assert_eq!(SeqNumber(0).partial_cmp(&SeqNumber(0x8000_0000)), None);
        assert_eq!(a.max(b), b);
        assert_eq!(b.max(a), b);
        assert_eq!(a.min(b), a);
        assert_eq!(b.min(a), a);
        assert!(SeqNumber(1).in_window(a, b));
        assert!(a.in_window(a, b));
        assert!(!b.in_window(a, b));
        let mut c = a;
        c += 2;
        assert_eq!(c, SeqNumber(0));
        assert_eq!(c.to_string(), "0");
    }

    #[test]
    fn flags() {
        let f = TcpFlags::SYN | TcpFlags::ACK;
        assert!(f.contains(TcpFlags::SYN));
        assert!(!f.contains(TcpFlags::SYN | TcpFlags::FIN));
        assert!(f.intersects(TcpFlags::ACK | TcpFlags::RST));
        assert_eq!(format!("{f:?}"), "SYN|ACK");
        assert_eq!(format!("{:?}", TcpFlags::NONE), "(none)");
        let mut g = f;
        g.set(TcpFlags::SYN, false);
        assert_eq!(g, TcpFlags::ACK);
        assert_eq!((f & !TcpFlags::ACK), TcpFlags::SYN);
        assert_eq!(TcpFlags::CWR.bits(), 0x80);
        assert!(TcpFlags::default().is_empty());
    }

    #[test]
    fn options_parse_all_kinds() {
        let b = [
            2, 4, 0x05, 0xB4, // MSS 1460
            1, 3, 3, 7, // NOP, WS 7
            4, 2, // SACKP
            8, 10, 0, 0, 0, 1, 0, 0, 0, 2, // TS
            5, 10, 0, 0, 0, 10, 0, 0, 0, 20, // SACK 1 block
            99, 3, 0xAB, // unknown
            0, 0xFF, 0xFF, // EOL, then ignored garbage
        ];
        let o = opts(&b);
        assert_eq!(o.len(), 8);
        assert_eq!(o[0], Ok(TcpOption::Mss(1460)));
        assert_eq!(o[1], Ok(TcpOption::Nop));
        assert_eq!(o[2], Ok(TcpOption::WindowScale(7)));
        assert_eq!(o[3], Ok(TcpOption::SackPermitted));
        assert_eq!(o[4], Ok(TcpOption::Timestamps { tsval: 1, tsecr: 2 }));
        let sack = SackBlocks::new(&[(SeqNumber(10), SeqNumber(20))]).unwrap();
        assert_eq!(o[5], Ok(TcpOption::Sack(sack)));
        assert_eq!(
            o[6],
            Ok(TcpOption::Unknown {
                kind: 99,
                data: &[0xAB]
            })
        );
        assert_eq!(o[7], Ok(TcpOption::EndOfList));
    }

    #[test]
    fn options_malformed() {
        // Length 0 and 1.
        assert_eq!(opts(&[2, 0, 0, 0]), vec![Err(WireError::BadOption)]);
        assert_eq!(opts(&[99, 1]), vec![Err(WireError::BadOption)]);
        // Runs past the end.
        assert_eq!(
            opts(&[1, 8, 10, 0, 0]),
            vec![Ok(TcpOption::Nop), Err(WireError::BadOption)]
        );
        // Kind with no length byte.
        assert_eq!(opts(&[1, 1, 1, 2]).last(), Some(&Err(WireError::BadOption)));
        // Wrong length for a known kind.
        assert_eq!(opts(&[2, 3, 0]), vec![Err(WireError::BadOption)]);
        assert_eq!(
            opts(&[5, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            vec![Err(WireError::BadOption)]
        );
        assert_eq!(
            opts(&[8, 8, 0, 0, 0, 0, 0, 0]),
            vec![Err(WireError::BadOption)]
        );
        // SACK with 4 blocks is fine, 5 would not fit in 40 bytes anyway.
        let mut s = vec![5u8, 34];
        s.extend_from_slice(&[0u8; 32]);
        match opts(&s)[0] {
            Ok(TcpOption::Sack(b)) => assert_eq!(b.len(), 4),
            ref x => panic!("{x:?}"),
        }
        assert!(opts(&[]).is_empty());
    }

    fn syn() -> TcpRepr {
        TcpRepr {
            src_port: 40000,
            dst_port: 80,
            seq: SeqNumber(0xFFFF_FFF0),
            flags: TcpFlags::SYN,
            window: 65535,
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamps: Some(Timestamps {
                tsval: 12345,
                tsecr: 0,
            }),
            ..TcpRepr::EMPTY
        }
    }

    #[test]
    fn emit_parse_roundtrip() {
        let r = syn();
        assert_eq!(r.header_len(), Ok(20 + 20)); // 4+3+2+10 = 19 -> 20
        let mut b = [0u8; 64];
        let n = r.emit(&mut b, SRC, DST).unwrap();
        assert_eq!(n, 40);
        let p = TcpPacket::new_checked(&b[..n]).unwrap();
        assert!(p.verify_checksum(SRC, DST));
        assert!(!p.verify_checksum(SRC, SRC));
        assert_eq!(p.data_offset(), 10);
        assert_eq!(p.seq_len(), 1);
        assert_eq!(TcpRepr::parse(&p), Ok(r));
        assert_eq!(*p.options().last().unwrap(), kind::NOP);

        let d = TcpRepr {
            flags: TcpFlags::ACK | TcpFlags::PSH | TcpFlags::FIN,
            ack: SeqNumber(77),
            sack: SackBlocks::new(&[(SeqNumber(1), SeqNumber(2)), (SeqNumber(5), SeqNumber(9))])
                .unwrap(),
            mss: None,
            window_scale: None,
            sack_permitted: false,
            payload_len: 3,
            urgent: 4,
            ..syn()
        };
        let n = d.emit_with_payload(&mut b, SRC, DST, b"xyz").unwrap();
        let p = TcpPacket::new_checked(&b[..n]).unwrap();
        assert!(p.verify_checksum(SRC, DST));
        assert_eq!(p.payload(), b"xyz");
        assert_eq!(p.seq_len(), 4);
        assert_eq!(TcpRepr::parse(&p), Ok(d));
    }

    #[test]
    fn emit_errors() {
        let mut big = syn();
        big.sack = SackBlocks::new(&[(SeqNumber(0), SeqNumber(0)); 3]).unwrap();
        assert_eq!(big.header_len(), Err(WireError::OptionsTooLong));
        let mut b = [0u8; 39];
        assert_eq!(syn().emit(&mut b, SRC, DST), Err(WireError::BufferTooSmall));
        assert_eq!(
            syn().emit_with_payload(&mut [0u8; 64], SRC, DST, b"x"),
            Err(WireError::BadLength)
        );
        assert!(SackBlocks::new(&[(SeqNumber(0), SeqNumber(0)); 5]).is_none());
    }

    #[test]
    fn header_checks() {
        let mut b = [0u8; 24];
        b[12] = 0x40; // data offset 4
        assert_eq!(TcpPacket::new_checked(&b[..]), Err(WireError::BadHeaderLen));
        b[12] = 0x70; // 28 > 24
        assert_eq!(TcpPacket::new_checked(&b[..]), Err(WireError::Truncated));
        b[12] = 0x60;
        let p = TcpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.options().len(), 4);
        assert!(p.payload().is_empty());
        assert_eq!(TcpPacket::new_checked(&b[..19]), Err(WireError::Truncated));
    }

    #[test]
    fn setters() {
        let mut b = [0u8; 48];
        let n = syn().emit(&mut b, SRC, DST).unwrap();
        b[n..n + 8].copy_from_slice(b"payload!");
        let mut p = TcpPacket::new_checked(&mut b[..n + 8]).unwrap();
        p.set_src_port(1);
        p.set_dst_port(2);
        p.set_seq_number(SeqNumber(3));
        p.set_ack_number(SeqNumber(4));
        p.set_flags(TcpFlags::ACK);
        p.set_window(5);
        p.set_urgent(6);
        p.options_mut()[19] = kind::END;
        p.payload_mut()[0] = b'P';
        p.fill_checksum(SRC, DST);
        assert!(p.verify_checksum(SRC, DST));
        assert_eq!(
            (p.src_port(), p.dst_port(), p.seq_number(), p.ack_number()),
            (1, 2, SeqNumber(3), SeqNumber(4))
        );
        assert_eq!((p.flags(), p.window(), p.urgent()), (TcpFlags::ACK, 5, 6));
        assert_eq!(p.payload(), b"Payload!");
        assert_eq!(p.reserved(), 0);
        assert_eq!(p.segment_len(), 48);
        // Incremental update of the checksum when the window changes.
        let c = checksum::update(p.checksum(), 5, 1000);
        p.set_window(1000);
        p.set_checksum(c);
        assert!(p.verify_checksum(SRC, DST));
    }
}
