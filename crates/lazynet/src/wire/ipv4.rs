//! IPv4 headers (RFC 791).
//!
//! **Owns:** the IPv4 header view (options skipped, not parsed), its
//! builder and its checksum. **May not touch:** state of any kind (as all
//! of `wire`): fragments are reassembled in `proto::ip`.

use std::net::Ipv4Addr;

use super::arp::ip_at;
use super::checksum;
use super::{be16, byte, put16, range, range_mut, WireError};

/// Length of an IPv4 header without options.
pub const MIN_HEADER_LEN: usize = 20;
/// Protocol number of ICMP.
pub const PROTO_ICMP: u8 = 1;
/// Protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// Protocol number of UDP.
pub const PROTO_UDP: u8 = 17;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_MASK: u16 = 0x1FFF;

/// A view of an IPv4 packet.
///
/// Checked by [`new_checked`](Self::new_checked): buffer ≥ 20 bytes,
/// version 4, IHL ≥ 5, `IHL*4 ≤ total_len ≤ buf.len()`. Bytes beyond
/// `total_len` (Ethernet padding) are not part of the packet. The checksum is
/// *not* verified there: that is the caller's policy ([`verify_checksum`](Self::verify_checksum)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buf: T,
    header_len: u8,
    total_len: u16,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps and checks `buf` (RFC 791 §3.1 length fields).
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        if b.len() < MIN_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if b[0] >> 4 != 4 {
            return Err(WireError::BadVersion);
        }
        // RFC 791: "the minimum value for a correct header is 5".
        let header_len = (b[0] & 0x0F) * 4;
        if header_len < MIN_HEADER_LEN as u8 {
            return Err(WireError::BadHeaderLen);
        }
        let total_len = be16(b, 2);
        if usize::from(total_len) < usize::from(header_len) {
            return Err(WireError::BadLength);
        }
        if usize::from(total_len) > b.len() {
            return Err(WireError::Truncated);
        }
        Ok(Ipv4Packet {
            buf,
            header_len,
            total_len,
        })
    }

    /// Wraps the start of a datagram as an ICMP error quotes it (RFC 792:
    /// the header and at least 64 bits of its data): as
    /// [`Ipv4Packet::new_checked`], but the datagram may be cut anywhere
    /// after its header; [`Ipv4Packet::payload`] and
    /// [`Ipv4Packet::total_len`] are then what was quoted of it.
    pub fn new_quoted(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        if b.len() < MIN_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if b[0] >> 4 != 4 {
            return Err(WireError::BadVersion);
        }
        let header_len = (b[0] & 0x0F) * 4;
        if header_len < MIN_HEADER_LEN as u8 {
            return Err(WireError::BadHeaderLen);
        }
        if usize::from(header_len) > b.len() {
            return Err(WireError::Truncated);
        }
        let field = be16(b, 2);
        if usize::from(field) < usize::from(header_len) {
            return Err(WireError::BadLength);
        }
        let total_len = field.min(b.len().min(usize::from(u16::MAX)) as u16);
        Ok(Ipv4Packet {
            buf,
            header_len,
            total_len,
        })
    }

    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buf
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }

    /// Version (always 4 in a checked packet).
    pub fn version(&self) -> u8 {
        byte(self.b(), 0) >> 4
    }
    /// IHL in 32-bit words.
    pub fn ihl(&self) -> u8 {
        self.header_len / 4
    }
    /// Header length in bytes (IHL*4).
    pub fn header_len(&self) -> usize {
        usize::from(self.header_len)
    }
    /// DSCP (upper 6 bits of the old TOS byte).
    pub fn dscp(&self) -> u8 {
        byte(self.b(), 1) >> 2
    }
    /// ECN (lower 2 bits of the old TOS byte).
    pub fn ecn(&self) -> u8 {
        byte(self.b(), 1) & 0x03
    }
    /// Total length field (header + payload).
    pub fn total_len(&self) -> u16 {
        self.total_len
    }
    /// Identification.
    pub fn ident(&self) -> u16 {
        be16(self.b(), 4)
    }
    /// The reserved ("evil") flag bit.
    pub fn reserved_flag(&self) -> bool {
        byte(self.b(), 6) & 0x80 != 0
    }
    /// Don't Fragment.
    pub fn dont_frag(&self) -> bool {
        be16(self.b(), 6) & FLAG_DF != 0
    }
    /// More Fragments.
    pub fn more_frags(&self) -> bool {
        be16(self.b(), 6) & FLAG_MF != 0
    }
    /// Fragment offset in bytes (field × 8).
    pub fn frag_offset(&self) -> u16 {
        (be16(self.b(), 6) & FRAG_MASK) << 3
    }
    /// True for any fragment: MF set or a non-zero offset.
    pub fn is_fragment(&self) -> bool {
        be16(self.b(), 6) & (FLAG_MF | FRAG_MASK) != 0
    }
    /// Time to live.
    pub fn ttl(&self) -> u8 {
        byte(self.b(), 8)
    }
    /// Protocol number.
    pub fn protocol(&self) -> u8 {
        byte(self.b(), 9)
    }
    /// Header checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.b(), 10)
    }
    /// Source address.
    pub fn src(&self) -> Ipv4Addr {
        ip_at(self.b(), 12)
    }
    /// Destination address.
    pub fn dst(&self) -> Ipv4Addr {
        ip_at(self.b(), 16)
    }
    /// The options bytes (IHL*4 − 20 of them), not interpreted.
    pub fn options(&self) -> &[u8] {
        range(self.b(), MIN_HEADER_LEN, self.header_len())
    }
    /// The header bytes (including options).
    pub fn header(&self) -> &[u8] {
        range(self.b(), 0, self.header_len())
    }
    /// The payload: from the end of the header to `total_len` (not to the end
    /// of the buffer).
    pub fn payload(&self) -> &[u8] {
        range(self.b(), self.header_len(), usize::from(self.total_len))
    }
    /// The packet: header and payload, without trailing padding.
    pub fn packet(&self) -> &[u8] {
        range(self.b(), 0, usize::from(self.total_len))
    }
    /// True if the header checksum is correct (RFC 791 §3.1: the ones'
    /// complement sum over the header including its checksum is −0).
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(self.header()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buf.as_mut()
    }
    /// Sets the TTL (checksum not updated; see [`fill_checksum`](Self::fill_checksum)
    /// or [`checksum::update`]).
    pub fn set_ttl(&mut self, ttl: u8) {
        if let Some(x) = self.bm().get_mut(8) {
            *x = ttl;
        }
    }
    /// Sets the identification.
    pub fn set_ident(&mut self, v: u16) {
        put16(self.bm(), 4, v);
    }
    /// Sets the DSCP and ECN bits.
    pub fn set_dscp_ecn(&mut self, dscp: u8, ecn: u8) {
        if let Some(x) = self.bm().get_mut(1) {
            *x = (dscp << 2) | (ecn & 0x03);
        }
    }
    /// Sets the Don't Fragment flag.
    pub fn set_dont_frag(&mut self, df: bool) {
        let v = be16(self.bm(), 6);
        put16(self.bm(), 6, if df { v | FLAG_DF } else { v & !FLAG_DF });
    }
    /// Sets the protocol number.
    pub fn set_protocol(&mut self, p: u8) {
        if let Some(x) = self.bm().get_mut(9) {
            *x = p;
        }
    }
    /// Sets the checksum field.
    pub fn set_checksum(&mut self, c: u16) {
        put16(self.bm(), 10, c);
    }
    /// Sets the source address.
    pub fn set_src(&mut self, a: Ipv4Addr) {
        range_mut(self.bm(), 12, 16).copy_from_slice(&a.octets());
    }
    /// Sets the destination address.
    pub fn set_dst(&mut self, a: Ipv4Addr) {
        range_mut(self.bm(), 16, 20).copy_from_slice(&a.octets());
    }
    /// Recomputes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.header());
        self.set_checksum(c);
    }
    /// The options, writable.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        range_mut(self.bm(), MIN_HEADER_LEN, h)
    }
    /// The payload (up to `total_len`), writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len(), usize::from(self.total_len));
        range_mut(self.bm(), h, t)
    }
}

/// The fields of an option-less IPv4 header to emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol number ([`PROTO_TCP`], ...).
    pub protocol: u8,
    /// Time to live.
    pub ttl: u8,
    /// Identification.
    pub ident: u16,
    /// Don't Fragment.
    pub dont_frag: bool,
    /// More Fragments.
    pub more_frags: bool,
    /// Fragment offset in bytes; must be a multiple of 8, at most 65528.
    pub frag_offset: u16,
    /// Payload length in bytes; header + payload must fit in 65535.
    pub payload_len: usize,
}

impl Ipv4Repr {
    /// Reads a checked packet (DSCP/ECN and options are not represented).
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> Self {
        Ipv4Repr {
            src: p.src(),
            dst: p.dst(),
            protocol: p.protocol(),
            ttl: p.ttl(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            more_frags: p.more_frags(),
            frag_offset: p.frag_offset(),
            payload_len: p.payload().len(),
        }
    }

    /// Length of the emitted header: [`MIN_HEADER_LEN`].
    pub const fn header_len(&self) -> usize {
        MIN_HEADER_LEN
    }

    /// Writes a 20-byte header (no options, TOS 0) at the start of `buf`,
    /// with its checksum; returns 20. The payload is not touched. Inlined
    /// into the output paths, where the fields are mostly constants.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let total = MIN_HEADER_LEN + self.payload_len;
        let total = u16::try_from(total).map_err(|_| WireError::BadLength)?;
        if self.frag_offset % 8 != 0 {
            return Err(WireError::BadFragOffset);
        }
        let h = buf
            .get_mut(..MIN_HEADER_LEN)
            .ok_or(WireError::BufferTooSmall)?;
        let mut flags = self.frag_offset >> 3;
        if self.dont_frag {
            flags |= FLAG_DF;
        }
        if self.more_frags {
            flags |= FLAG_MF;
        }
        h[0] = 0x45;
        h[1] = 0;
        h[2..4].copy_from_slice(&total.to_be_bytes());
        h[4..6].copy_from_slice(&self.ident.to_be_bytes());
        h[6..8].copy_from_slice(&flags.to_be_bytes());
        h[8] = self.ttl;
        h[9] = self.protocol;
        h[10..12].copy_from_slice(&[0, 0]);
        h[12..16].copy_from_slice(&self.src.octets());
        h[16..20].copy_from_slice(&self.dst.octets());
        let c = checksum::checksum(h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        Ok(MIN_HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 20-byte header + 4 bytes options + 4 payload + 2 padding.
    fn sample() -> Vec<u8> {
        let mut v = vec![
            0x46, 0xB9, 0, 28, 0x12, 0x34, 0x40, 0x00, 64, 17, 0, 0, 192, 168, 1, 1, 10, 0, 0, 1,
            1, 1, 1, 0, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xEE,
        ];
        let c = checksum::checksum(&v[..24]);
        v[10..12].copy_from_slice(&c.to_be_bytes());
        v
    }

    #[test]
    fn parse_fields() {
        let v = sample();
        let p = Ipv4Packet::new_checked(&v[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.ihl(), 6);
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.dscp(), 0xB9 >> 2);
        assert_eq!(p.ecn(), 1);
        assert_eq!(p.total_len(), 28);
        assert_eq!(p.ident(), 0x1234);
        assert!(p.dont_frag());
        assert!(!p.more_frags());
        assert!(!p.is_fragment());
        assert!(!p.reserved_flag());
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), PROTO_UDP);
        assert_eq!(p.src(), Ipv4Addr::new(192, 168, 1, 1));
        assert_eq!(p.dst(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(p.options(), &[1, 1, 1, 0]);
        assert_eq!(p.payload(), &[0xAA, 0xBB, 0xCC, 0xDD]);
        assert_eq!(p.packet().len(), 28);
        assert!(p.verify_checksum());
    }

    #[test]
    fn rejects_malformed() {
        let v = sample();
        assert_eq!(Ipv4Packet::new_checked(&v[..19]), Err(WireError::Truncated));
        // total_len > buffer
        assert_eq!(Ipv4Packet::new_checked(&v[..27]), Err(WireError::Truncated));
        let mut b = v.clone();
        b[0] = 0x65;
        assert_eq!(Ipv4Packet::new_checked(&b[..]), Err(WireError::BadVersion));
        let mut b = v.clone();
        b[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]),
            Err(WireError::BadHeaderLen)
        );
        // IHL 15 (60 bytes) > total_len 28
        let mut b = v.clone();
        b[0] = 0x4F;
        assert_eq!(Ipv4Packet::new_checked(&b[..]), Err(WireError::BadLength));
        // total_len < 20
        let mut b = v.clone();
        b[2] = 0;
        b[3] = 10;
        assert_eq!(Ipv4Packet::new_checked(&b[..]), Err(WireError::BadLength));
        // IHL*4 == total_len: empty payload is fine
        let mut b = v.clone();
        b[3] = 24;
        assert!(Ipv4Packet::new_checked(&b[..])
            .unwrap()
            .payload()
            .is_empty());
    }

    #[test]
    fn bad_checksum_detected() {
        let mut v = sample();
        v[8] = 63;
        assert!(!Ipv4Packet::new_checked(&v[..]).unwrap().verify_checksum());
    }

    #[test]
    fn fragments() {
        let mut v = sample();
        v[6] = 0x20; // MF
        v[7] = 0x00;
        let p = Ipv4Packet::new_checked(&v[..]).unwrap();
        assert!(p.more_frags() && p.is_fragment() && !p.dont_frag());
        v[6] = 0x1F;
        v[7] = 0xFF;
        let p = Ipv4Packet::new_checked(&v[..]).unwrap();
        assert_eq!(p.frag_offset(), 0x1FFF * 8);
        assert!(p.is_fragment() && !p.more_frags());
    }

    #[test]
    fn setters_and_incremental_ttl() {
        let mut v = sample();
        let mut p = Ipv4Packet::new_checked(&mut v[..]).unwrap();
        // RFC 1624: decrement TTL with an incremental update.
        let old = u16::from_be_bytes([p.ttl(), p.protocol()]);
        p.set_ttl(63);
        let new = u16::from_be_bytes([p.ttl(), p.protocol()]);
        let c = checksum::update(p.checksum(), old, new);
        p.set_checksum(c);
        assert!(p.verify_checksum());
        p.set_ident(7);
        p.set_src(Ipv4Addr::new(1, 2, 3, 4));
        p.set_dst(Ipv4Addr::new(5, 6, 7, 8));
        p.set_dont_frag(false);
        p.set_protocol(PROTO_TCP);
        p.set_dscp_ecn(10, 2);
        p.options_mut()[0] = 1;
        p.payload_mut()[0] = 0;
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert_eq!(
            (p.ident(), p.dont_frag(), p.dscp(), p.ecn()),
            (7, false, 10, 2)
        );
        assert_eq!(p.protocol(), PROTO_TCP);
    }

    #[test]
    fn emit_roundtrip() {
        let r = Ipv4Repr {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            protocol: PROTO_TCP,
            ttl: 64,
            ident: 99,
            dont_frag: true,
            more_frags: true,
            frag_offset: 1480,
            payload_len: 8,
        };
        let mut b = [0u8; 28];
        assert_eq!(r.emit(&mut b), Ok(20));
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(Ipv4Repr::parse(&p), r);
        assert_eq!(
            Ipv4Repr {
                frag_offset: 3,
                ..r
            }
            .emit(&mut b),
            Err(WireError::BadFragOffset)
        );
        assert_eq!(
            Ipv4Repr {
                payload_len: 65516,
                ..r
            }
            .emit(&mut b),
            Err(WireError::BadLength)
        );
        assert_eq!(r.emit(&mut b[..19]), Err(WireError::BufferTooSmall));
    }
}
