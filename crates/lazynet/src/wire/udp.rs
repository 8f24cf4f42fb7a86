//! UDP (RFC 768).
//!
//! **Owns:** the UDP header view, its builder and its checksum over the
//! pseudo-header. **May not touch:** state of any kind (as all of `wire`).

use std::net::Ipv4Addr;

use super::checksum;
use super::ipv4::PROTO_UDP;
use super::{be16, put16, range, range_mut, WireError};

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

/// A view of a UDP datagram. Pass the IPv4 payload. Checked:
/// `8 ≤ length field ≤ buf.len()`; bytes beyond the length field are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buf: T,
    len: u16,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps and checks `buf`.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let len = be16(b, 4);
        if usize::from(len) < HEADER_LEN {
            return Err(WireError::BadLength);
        }
        if usize::from(len) > b.len() {
            return Err(WireError::Truncated);
        }
        Ok(UdpPacket { buf, len })
    }

    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buf
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buf.as_ref(), 0)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }
    /// Length field (header + data).
    pub fn len(&self) -> u16 {
        self.len
    }
    /// Always false: a checked datagram has at least its 8-byte header.
    pub fn is_empty(&self) -> bool {
        false
    }
    /// Checksum field (0 = none transmitted).
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), 6)
    }
    /// The data, bounded by the length field.
    pub fn payload(&self) -> &[u8] {
        range(self.buf.as_ref(), HEADER_LEN, usize::from(self.len))
    }
    /// The datagram (header + data) bounded by the length field.
    pub fn datagram(&self) -> &[u8] {
        range(self.buf.as_ref(), 0, usize::from(self.len))
    }
    /// RFC 768: a zero checksum means none was computed, so it verifies;
    /// otherwise the sum over pseudo-header and datagram must be −0.
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let ph = checksum::pseudo_header_ipv4(src, dst, PROTO_UDP, self.len);
        checksum::fold(checksum::partial(self.datagram(), ph)) == 0xFFFF
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, p: u16) {
        put16(self.buf.as_mut(), 0, p);
    }
    /// Sets the destination port.
    pub fn set_dst_port(&mut self, p: u16) {
        put16(self.buf.as_mut(), 2, p);
    }
    /// Sets the checksum field.
    pub fn set_checksum(&mut self, c: u16) {
        put16(self.buf.as_mut(), 6, c);
    }
    /// Recomputes the checksum (a computed 0 is sent as 0xFFFF, RFC 768).
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let ph = checksum::pseudo_header_ipv4(src, dst, PROTO_UDP, self.len);
        let c = finish(checksum::partial(self.datagram(), ph));
        self.set_checksum(c);
    }
    /// The data, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let l = usize::from(self.len);
        range_mut(self.buf.as_mut(), HEADER_LEN, l)
    }
}

/// RFC 768: "If the computed checksum is zero, it is transmitted as all ones".
#[inline]
fn finish(sum: u32) -> u16 {
    match !checksum::fold(sum) {
        0 => 0xFFFF,
        c => c,
    }
}

/// The fields of a UDP header to emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Length of the data after the header.
    pub payload_len: usize,
}

impl UdpRepr {
    /// Reads a checked datagram.
    pub fn parse<T: AsRef<[u8]>>(p: &UdpPacket<T>) -> Self {
        UdpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            payload_len: p.payload().len(),
        }
    }

    fn total(&self) -> Result<u16, WireError> {
        u16::try_from(HEADER_LEN + self.payload_len).map_err(|_| WireError::BadLength)
    }

    fn write_header(&self, buf: &mut [u8], len: u16, csum: u16) {
        put16(buf, 0, self.src_port);
        put16(buf, 2, self.dst_port);
        put16(buf, 4, len);
        put16(buf, 6, csum);
    }

    /// Writes the header at the start of `buf`, whose bytes
    /// `8..8 + payload_len` must already hold the data, and the checksum over
    /// pseudo-header, header and data. Returns the datagram length.
    pub fn emit(&self, buf: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr) -> Result<usize, WireError> {
        let len = self.total()?;
        let d = buf
            .get_mut(..usize::from(len))
            .ok_or(WireError::BufferTooSmall)?;
        self.write_header(d, len, 0);
        let ph = checksum::pseudo_header_ipv4(src, dst, PROTO_UDP, len);
        let c = finish(checksum::partial(d, ph));
        put16(d, 6, c);
        Ok(usize::from(len))
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
        let dst_buf = buf
            .get_mut(HEADER_LEN..HEADER_LEN + payload.len())
            .ok_or(WireError::BufferTooSmall)?;
        dst_buf.copy_from_slice(payload);
        self.emit(buf, src, dst)
    }

    /// Writes only the 8-byte header, taking the data's checksum contribution
    /// from `payload_sum`, a precomputed [`checksum::partial`] of the data
    /// (network-level framing: the data is never touched). Returns 8.
    pub fn emit_header_with_payload_sum(
        &self,
        buf: &mut [u8],
        src: Ipv4Addr,
        dst: Ipv4Addr,
        payload_sum: u32,
    ) -> Result<usize, WireError> {
        let len = self.total()?;
        let h = buf.get_mut(..HEADER_LEN).ok_or(WireError::BufferTooSmall)?;
        self.write_header(h, len, 0);
        let ph = checksum::pseudo_header_ipv4(src, dst, PROTO_UDP, len);
        let c = finish(checksum::combine(checksum::partial(h, ph), payload_sum));
        put16(h, 6, c);
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 2);

    #[test]
    fn parse_and_verify() {
        let r = UdpRepr {
            src_port: 1234,
            dst_port: 53,
            payload_len: 5,
        };
        let mut b = [0u8; 16]; // 3 bytes of padding after the datagram
        assert_eq!(r.emit_with_payload(&mut b, SRC, DST, b"abcde"), Ok(13));
        b[13..].copy_from_slice(&[9, 9, 9]);
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.src_port(), 1234);
        assert_eq!(p.dst_port(), 53);
        assert_eq!(p.len(), 13);
        assert!(!p.is_empty());
        assert_eq!(p.payload(), b"abcde");
        assert!(p.verify_checksum(SRC, DST));
        assert!(!p.verify_checksum(SRC, Ipv4Addr::new(192, 168, 0, 3)));
        assert_eq!(UdpRepr::parse(&p), r);
    }

    #[test]
    fn zero_checksum_means_none() {
        let mut b = [0u8, 1, 0, 2, 0, 8, 0, 0];
        assert!(UdpPacket::new_checked(&b[..])
            .unwrap()
            .verify_checksum(SRC, DST));
        let mut p = UdpPacket::new_checked(&mut b[..]).unwrap();
        p.set_src_port(5);
        p.set_dst_port(6);
        p.fill_checksum(SRC, DST);
        assert_ne!(p.checksum(), 0);
        assert!(p.verify_checksum(SRC, DST));
        p.payload_mut(); // empty, must not panic
    }

    #[test]
    fn computed_zero_sent_as_ffff() {
        // Pick a data word so that the total sum is 0xFFFF -> checksum 0.
        let r = UdpRepr {
            src_port: 0,
            dst_port: 0,
            payload_len: 2,
        };
        let mut b = [0u8; 10];
        r.emit(&mut b, SRC, DST).unwrap();
        b[6..8].copy_from_slice(&[0, 0]);
        let ph = checksum::pseudo_header_ipv4(SRC, DST, PROTO_UDP, 10);
        let s = checksum::fold(checksum::partial(&b[..8], ph));
        let w = 0xFFFF - s; // makes the sum 0xFFFF
        b[8..10].copy_from_slice(&w.to_be_bytes());
        let n = r.emit(&mut b, SRC, DST).unwrap();
        let p = UdpPacket::new_checked(&b[..n]).unwrap();
        assert_eq!(p.checksum(), 0xFFFF);
        assert!(p.verify_checksum(SRC, DST));
    }

    #[test]
    fn payload_sum_variant_matches() {
        let data = b"some media payload!";
        let r = UdpRepr {
            src_port: 9,
            dst_port: 10,
            payload_len: data.len(),
        };
        let mut a = [0u8; 64];
        let n = r.emit_with_payload(&mut a, SRC, DST, data).unwrap();
        let mut h = [0u8; 8];
        r.emit_header_with_payload_sum(&mut h, SRC, DST, checksum::partial(data, 0))
            .unwrap();
        assert_eq!(&h, &a[..8]);
        assert_eq!(n, 8 + data.len());
    }

    #[test]
    fn rejects_malformed() {
        let b = [0u8, 1, 0, 2, 0, 7, 0, 0];
        assert_eq!(UdpPacket::new_checked(&b[..]), Err(WireError::BadLength));
        let b = [0u8, 1, 0, 2, 0, 9, 0, 0];
        assert_eq!(UdpPacket::new_checked(&b[..]), Err(WireError::Truncated));
        assert_eq!(UdpPacket::new_checked(&b[..7]), Err(WireError::Truncated));
        let r = UdpRepr {
            src_port: 0,
            dst_port: 0,
            payload_len: 65528,
        };
        assert_eq!(r.emit(&mut [0u8; 8], SRC, DST), Err(WireError::BadLength));
        let r = UdpRepr {
            payload_len: 4,
            ..r
        };
        assert_eq!(
            r.emit(&mut [0u8; 11], SRC, DST),
            Err(WireError::BufferTooSmall)
        );
        assert_eq!(
            r.emit_with_payload(&mut [0u8; 12], SRC, DST, b"abc"),
            Err(WireError::BadLength)
        );
    }
}
