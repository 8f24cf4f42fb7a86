//! ARP for IPv4 over Ethernet (RFC 826). Other hardware/protocol types are
//! rejected by [`ArpPacket::new_checked`] with a typed error.
//!
//! **Owns:** the ARP packet view and its builder. **May not touch:** state
//! of any kind (as all of `wire`): the cache is `proto::arp`.

use std::net::Ipv4Addr;

use super::ethernet::EthernetAddress;
use super::{be16, put16, range, range_mut, WireError};

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = 28;
/// Hardware type Ethernet.
pub const HTYPE_ETHERNET: u16 = 1;
/// Protocol type IPv4.
pub const PTYPE_IPV4: u16 = 0x0800;

/// The ARP operation field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpOperation {
    /// 1.
    Request,
    /// 2.
    Reply,
    /// Anything else (RARP etc.), kept so a caller can count it.
    Unknown(u16),
}

impl From<u16> for ArpOperation {
    fn from(v: u16) -> Self {
        match v {
            1 => ArpOperation::Request,
            2 => ArpOperation::Reply,
            x => ArpOperation::Unknown(x),
        }
    }
}

impl From<ArpOperation> for u16 {
    fn from(op: ArpOperation) -> u16 {
        match op {
            ArpOperation::Request => 1,
            ArpOperation::Reply => 2,
            ArpOperation::Unknown(x) => x,
        }
    }
}

/// A view of an ARP packet. Checked: ≥ 28 bytes, htype 1, ptype 0x0800,
/// hlen 6, plen 4. Trailing bytes (Ethernet padding) are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps and checks `buf`.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        if b.len() < 8 {
            return Err(WireError::Truncated);
        }
        if be16(b, 0) != HTYPE_ETHERNET {
            return Err(WireError::BadHardwareType);
        }
        if be16(b, 2) != PTYPE_IPV4 {
            return Err(WireError::BadProtocolType);
        }
        if b[4] != 6 || b[5] != 4 {
            return Err(WireError::BadAddressLen);
        }
        if b.len() < PACKET_LEN {
            return Err(WireError::Truncated);
        }
        Ok(ArpPacket { buf })
    }

    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buf
    }

    /// Hardware type (always 1 in a checked packet).
    pub fn hardware_type(&self) -> u16 {
        be16(self.buf.as_ref(), 0)
    }

    /// Protocol type (always 0x0800 in a checked packet).
    pub fn protocol_type(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }

    /// Operation.
    pub fn operation(&self) -> ArpOperation {
        be16(self.buf.as_ref(), 6).into()
    }

    /// Sender hardware address.
    pub fn sender_hw(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(range(self.buf.as_ref(), 8, 14)).unwrap_or_default()
    }

    /// Sender protocol (IPv4) address.
    pub fn sender_ip(&self) -> Ipv4Addr {
        ip_at(self.buf.as_ref(), 14)
    }

    /// Target hardware address.
    pub fn target_hw(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(range(self.buf.as_ref(), 18, 24)).unwrap_or_default()
    }

    /// Target protocol (IPv4) address.
    pub fn target_ip(&self) -> Ipv4Addr {
        ip_at(self.buf.as_ref(), 24)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Sets the operation.
    pub fn set_operation(&mut self, op: ArpOperation) {
        put16(self.buf.as_mut(), 6, op.into());
    }
    /// Sets the sender hardware address.
    pub fn set_sender_hw(&mut self, a: EthernetAddress) {
        range_mut(self.buf.as_mut(), 8, 14).copy_from_slice(&a.0);
    }
    /// Sets the sender IPv4 address.
    pub fn set_sender_ip(&mut self, a: Ipv4Addr) {
        range_mut(self.buf.as_mut(), 14, 18).copy_from_slice(&a.octets());
    }
    /// Sets the target hardware address.
    pub fn set_target_hw(&mut self, a: EthernetAddress) {
        range_mut(self.buf.as_mut(), 18, 24).copy_from_slice(&a.0);
    }
    /// Sets the target IPv4 address.
    pub fn set_target_ip(&mut self, a: Ipv4Addr) {
        range_mut(self.buf.as_mut(), 24, 28).copy_from_slice(&a.octets());
    }
}

pub(crate) fn ip_at(b: &[u8], at: usize) -> Ipv4Addr {
    match b.get(at..at + 4) {
        Some(&[w, x, y, z]) => Ipv4Addr::new(w, x, y, z),
        _ => Ipv4Addr::UNSPECIFIED,
    }
}

/// An Ethernet/IPv4 ARP packet's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpRepr {
    /// Request, reply, ...
    pub operation: ArpOperation,
    /// Sender hardware address.
    pub sender_hw: EthernetAddress,
    /// Sender IPv4 address.
    pub sender_ip: Ipv4Addr,
    /// Target hardware address (zero in a request).
    pub target_hw: EthernetAddress,
    /// Target IPv4 address.
    pub target_ip: Ipv4Addr,
}

impl ArpRepr {
    /// Reads a checked packet.
    pub fn parse<T: AsRef<[u8]>>(p: &ArpPacket<T>) -> Self {
        ArpRepr {
            operation: p.operation(),
            sender_hw: p.sender_hw(),
            sender_ip: p.sender_ip(),
            target_hw: p.target_hw(),
            target_ip: p.target_ip(),
        }
    }

    /// Writes the 28-byte packet at the start of `buf`; returns [`PACKET_LEN`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let b = buf.get_mut(..PACKET_LEN).ok_or(WireError::BufferTooSmall)?;
        b[0..2].copy_from_slice(&HTYPE_ETHERNET.to_be_bytes());
        b[2..4].copy_from_slice(&PTYPE_IPV4.to_be_bytes());
        b[4] = 6;
        b[5] = 4;
        b[6..8].copy_from_slice(&u16::from(self.operation).to_be_bytes());
        b[8..14].copy_from_slice(&self.sender_hw.0);
        b[14..18].copy_from_slice(&self.sender_ip.octets());
        b[18..24].copy_from_slice(&self.target_hw.0);
        b[24..28].copy_from_slice(&self.target_ip.octets());
        Ok(PACKET_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQ: [u8; 28] = [
        0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
    ];

    #[test]
    fn parse_request() {
        let p = ArpPacket::new_checked(&REQ[..]).unwrap();
        assert_eq!(p.operation(), ArpOperation::Request);
        assert_eq!(p.sender_hw(), EthernetAddress([2, 0, 0, 0, 0, 1]));
        assert_eq!(p.sender_ip(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(p.target_hw(), EthernetAddress([0; 6]));
        assert_eq!(p.target_ip(), Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(p.hardware_type(), 1);
        assert_eq!(p.protocol_type(), 0x0800);
    }

    #[test]
    fn rejects_malformed() {
        assert_eq!(
            ArpPacket::new_checked(&REQ[..27]),
            Err(WireError::Truncated)
        );
        assert_eq!(ArpPacket::new_checked(&REQ[..3]), Err(WireError::Truncated));
        let mut b = REQ;
        b[1] = 6; // IEEE 802
        assert_eq!(
            ArpPacket::new_checked(&b[..]),
            Err(WireError::BadHardwareType)
        );
        let mut b = REQ;
        b[2] = 0x86;
        b[3] = 0xDD;
        assert_eq!(
            ArpPacket::new_checked(&b[..]),
            Err(WireError::BadProtocolType)
        );
        let mut b = REQ;
        b[5] = 16;
        assert_eq!(
            ArpPacket::new_checked(&b[..]),
            Err(WireError::BadAddressLen)
        );
    }

    #[test]
    fn emit_roundtrip_and_setters() {
        let p = ArpPacket::new_checked(&REQ[..]).unwrap();
        let r = ArpRepr::parse(&p);
        let mut out = [0u8; 28];
        assert_eq!(r.emit(&mut out), Ok(28));
        assert_eq!(out, REQ);
        let mut q = ArpPacket::new_checked(&mut out[..]).unwrap();
        q.set_operation(ArpOperation::Reply);
        q.set_sender_hw(EthernetAddress([1; 6]));
        q.set_sender_ip(Ipv4Addr::new(1, 1, 1, 1));
        q.set_target_hw(EthernetAddress([2; 6]));
        q.set_target_ip(Ipv4Addr::new(2, 2, 2, 2));
        let r2 = ArpRepr::parse(&q);
        assert_eq!(r2.operation, ArpOperation::Reply);
        assert_eq!(r2.target_ip, Ipv4Addr::new(2, 2, 2, 2));
        assert_eq!(r.emit(&mut [0u8; 27]), Err(WireError::BufferTooSmall));
        assert_eq!(u16::from(ArpOperation::from(7)), 7);
    }
}
