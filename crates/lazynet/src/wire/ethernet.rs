//! Ethernet II frames (IEEE 802.3 with an EtherType; no VLAN handling: a
//! tagged frame simply shows EtherType 0x8100).
//!
//! **Owns:** the Ethernet header view and builder, MAC addresses.
//! **May not touch:** state of any kind (as all of `wire`).

use super::{be16, put16, range, range_mut, WireError};

/// Length of the Ethernet II header: destination, source, EtherType.
pub const HEADER_LEN: usize = 14;
/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// EtherType of an IEEE 802.1Q VLAN tag (not interpreted here).
pub const ETHERTYPE_VLAN: u16 = 0x8100;

/// A 48-bit Ethernet MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xFF; 6]);

    /// Builds an address from the first 6 bytes of `b`, or `None` if shorter.
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        let a: [u8; 6] = b.get(..6)?.try_into().ok()?;
        Some(EthernetAddress(a))
    }

    /// The address bytes.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// All ones.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Group bit (I/G, least significant bit of the first octet) set; true
    /// for broadcast as well.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Individual (not group) address.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }
}

impl core::fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

#[inline(always)]
fn mac_at(b: &[u8], at: usize) -> EthernetAddress {
    EthernetAddress::from_bytes(range(b, at, at + 6)).unwrap_or_default()
}

/// A view of an Ethernet II frame. Checked: at least [`HEADER_LEN`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps `buf`, checking it holds a whole header.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        if buf.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(EthernetFrame { buf })
    }

    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buf
    }

    /// The whole frame.
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.as_ref()
    }

    /// Destination address.
    pub fn dst(&self) -> EthernetAddress {
        mac_at(self.buf.as_ref(), 0)
    }

    /// Source address.
    pub fn src(&self) -> EthernetAddress {
        mac_at(self.buf.as_ref(), 6)
    }

    /// EtherType.
    pub fn ethertype(&self) -> u16 {
        be16(self.buf.as_ref(), 12)
    }

    /// Everything after the header (including any Ethernet padding).
    pub fn payload(&self) -> &[u8] {
        let b = self.buf.as_ref();
        range(b, HEADER_LEN, b.len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination address.
    pub fn set_dst(&mut self, a: EthernetAddress) {
        range_mut(self.buf.as_mut(), 0, 6).copy_from_slice(&a.0);
    }

    /// Sets the source address.
    pub fn set_src(&mut self, a: EthernetAddress) {
        range_mut(self.buf.as_mut(), 6, 12).copy_from_slice(&a.0);
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, t: u16) {
        put16(self.buf.as_mut(), 12, t);
    }

    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let b = self.buf.as_mut();
        let n = b.len();
        range_mut(b, HEADER_LEN, n)
    }
}

/// The fields of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetRepr {
    /// Source address.
    pub src: EthernetAddress,
    /// Destination address.
    pub dst: EthernetAddress,
    /// EtherType.
    pub ethertype: u16,
}

impl EthernetRepr {
    /// Reads the header of a checked frame.
    pub fn parse<T: AsRef<[u8]>>(f: &EthernetFrame<T>) -> Self {
        EthernetRepr {
            src: f.src(),
            dst: f.dst(),
            ethertype: f.ethertype(),
        }
    }

    /// Writes the 14-byte header at the start of `buf`; returns [`HEADER_LEN`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = buf.get_mut(..HEADER_LEN).ok_or(WireError::BufferTooSmall)?;
        h[0..6].copy_from_slice(&self.dst.0);
        h[6..12].copy_from_slice(&self.src.0);
        h[12..14].copy_from_slice(&self.ethertype.to_be_bytes());
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: [u8; 18] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 1, 2,
        3, 4,
    ];

    #[test]
    fn parse_fields() {
        let f = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert!(f.dst().is_broadcast());
        assert!(f.dst().is_multicast());
        assert_eq!(f.src(), EthernetAddress([2, 0, 0, 0, 0, 1]));
        assert!(f.src().is_unicast());
        assert_eq!(f.ethertype(), ETHERTYPE_ARP);
        assert_eq!(f.payload(), &[1, 2, 3, 4]);
        assert_eq!(f.src().to_string(), "02:00:00:00:00:01");
    }

    #[test]
    fn truncated() {
        assert_eq!(
            EthernetFrame::new_checked(&FRAME[..13]),
            Err(WireError::Truncated)
        );
        assert!(EthernetFrame::new_checked(&FRAME[..14])
            .unwrap()
            .payload()
            .is_empty());
    }

    #[test]
    fn emit_roundtrip_and_setters() {
        let r = EthernetRepr {
            src: EthernetAddress([1, 2, 3, 4, 5, 6]),
            dst: EthernetAddress::BROADCAST,
            ethertype: ETHERTYPE_IPV4,
        };
        let mut b = [0u8; 20];
        assert_eq!(r.emit(&mut b), Ok(14));
        let mut f = EthernetFrame::new_checked(&mut b[..]).unwrap();
        assert_eq!(EthernetRepr::parse(&f), r);
        f.set_ethertype(ETHERTYPE_VLAN);
        f.set_src(EthernetAddress([9; 6]));
        f.set_dst(EthernetAddress([8; 6]));
        f.payload_mut()[0] = 7;
        assert_eq!(f.ethertype(), 0x8100);
        assert_eq!(f.src().0, [9; 6]);
        assert_eq!(f.dst().0, [8; 6]);
        assert_eq!(b[14], 7);
        assert_eq!(r.emit(&mut [0u8; 13]), Err(WireError::BufferTooSmall));
    }
}
