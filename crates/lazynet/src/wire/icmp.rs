//! ICMPv4 (RFC 792): echo and destination unreachable, plus generic access
//! to any message's type, code and checksum.
//!
//! **Owns:** the ICMP message view and builders. **May not touch:** state
//! of any kind (as all of `wire`): the error rules are `proto::icmp`.

use super::checksum;
use super::{be16, byte, put16, range, range_mut, WireError};

/// Length of the ICMP header (type, code, checksum, 4 bytes rest-of-header).
pub const HEADER_LEN: usize = 8;
/// Echo reply.
pub const TYPE_ECHO_REPLY: u8 = 0;
/// Destination unreachable.
pub const TYPE_DEST_UNREACHABLE: u8 = 3;
/// Echo request.
pub const TYPE_ECHO_REQUEST: u8 = 8;
/// Time exceeded.
pub const TYPE_TIME_EXCEEDED: u8 = 11;
/// Dest. unreachable code: net unreachable.
pub const CODE_NET_UNREACHABLE: u8 = 0;
/// Dest. unreachable code: host unreachable.
pub const CODE_HOST_UNREACHABLE: u8 = 1;
/// Dest. unreachable code: protocol unreachable.
pub const CODE_PROTOCOL_UNREACHABLE: u8 = 2;
/// Dest. unreachable code: port unreachable.
pub const CODE_PORT_UNREACHABLE: u8 = 3;
/// Dest. unreachable code: fragmentation needed and DF set (RFC 1191 adds the
/// next-hop MTU).
pub const CODE_FRAG_NEEDED: u8 = 4;

/// Bytes of the original datagram's data quoted after its IP header
/// (RFC 792: "the internet header plus the first 64 bits of the original
/// datagram's data").
pub const QUOTED_DATA_LEN: usize = 8;

/// A view of an ICMPv4 message: the whole IPv4 payload. Checked: ≥ 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcmpPacket<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> IcmpPacket<T> {
    /// Wraps and checks `buf` (pass exactly the IPv4 payload).
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        if buf.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(IcmpPacket { buf })
    }

    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buf
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }

    /// Message type.
    pub fn msg_type(&self) -> u8 {
        byte(self.b(), 0)
    }
    /// Code.
    pub fn code(&self) -> u8 {
        byte(self.b(), 1)
    }
    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.b(), 2)
    }
    /// Bytes 4..8, whose meaning depends on the type.
    pub fn rest_of_header(&self) -> [u8; 4] {
        let b = self.b();
        [byte(b, 4), byte(b, 5), byte(b, 6), byte(b, 7)]
    }
    /// Echo identifier (bytes 4..6; meaningful for echo request/reply).
    pub fn echo_ident(&self) -> u16 {
        be16(self.b(), 4)
    }
    /// Echo sequence number (bytes 6..8; meaningful for echo request/reply).
    pub fn echo_seq(&self) -> u16 {
        be16(self.b(), 6)
    }
    /// Next-hop MTU (bytes 6..8; meaningful for dest. unreachable code 4,
    /// RFC 1191 §4).
    pub fn next_hop_mtu(&self) -> u16 {
        be16(self.b(), 6)
    }
    /// Everything after the 8-byte header: echo data, or for errors the quoted
    /// original IP header + first 8 data bytes.
    pub fn data(&self) -> &[u8] {
        let b = self.b();
        range(b, HEADER_LEN, b.len())
    }
    /// True if the checksum over the whole message is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(self.b()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpPacket<T> {
    /// Sets the type.
    pub fn set_msg_type(&mut self, t: u8) {
        if let Some(x) = self.buf.as_mut().get_mut(0) {
            *x = t;
        }
    }
    /// Sets the code.
    pub fn set_code(&mut self, c: u8) {
        if let Some(x) = self.buf.as_mut().get_mut(1) {
            *x = c;
        }
    }
    /// Sets the checksum field.
    pub fn set_checksum(&mut self, c: u16) {
        put16(self.buf.as_mut(), 2, c);
    }
    /// Recomputes the checksum over the whole message.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buf.as_ref());
        self.set_checksum(c);
    }
    /// The data after the header, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let b = self.buf.as_mut();
        let n = b.len();
        range_mut(b, HEADER_LEN, n)
    }
}

/// The ICMPv4 messages `proto` handles, read from a checked packet.
/// Borrowed: `data` points into the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpRepr<'a> {
    /// Type 8 (RFC 792 "Echo or Echo Reply Message").
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq: u16,
        /// Echo data.
        data: &'a [u8],
    },
    /// Type 0.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq: u16,
        /// Echo data.
        data: &'a [u8],
    },
    /// Type 3.
    DestUnreachable {
        /// Code (e.g. [`CODE_PORT_UNREACHABLE`], [`CODE_FRAG_NEEDED`]).
        code: u8,
        /// Next-hop MTU (RFC 1191), 0 unless code 4.
        next_hop_mtu: u16,
        /// Quoted original IP header + at least 8 data bytes (maybe fewer
        /// if the sender truncated).
        original: &'a [u8],
    },
    /// Type 11.
    TimeExceeded {
        /// Code (0 TTL exceeded in transit, 1 reassembly time exceeded).
        code: u8,
        /// Quoted original IP header + data.
        original: &'a [u8],
    },
    /// Any other type; the caller only counts it.
    Other {
        /// Type.
        msg_type: u8,
        /// Code.
        code: u8,
    },
}

impl<'a> IcmpRepr<'a> {
    /// Classifies a checked packet (the checksum is not verified here).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &IcmpPacket<&'a T>) -> Self {
        let (t, code) = (p.msg_type(), p.code());
        let buf: &'a [u8] = p.buf.as_ref();
        let data = range(buf, HEADER_LEN, buf.len());
        match (t, code) {
            (TYPE_ECHO_REQUEST, 0) => IcmpRepr::EchoRequest {
                ident: p.echo_ident(),
                seq: p.echo_seq(),
                data,
            },
            (TYPE_ECHO_REPLY, 0) => IcmpRepr::EchoReply {
                ident: p.echo_ident(),
                seq: p.echo_seq(),
                data,
            },
            (TYPE_DEST_UNREACHABLE, _) => IcmpRepr::DestUnreachable {
                code,
                next_hop_mtu: if code == CODE_FRAG_NEEDED {
                    p.next_hop_mtu()
                } else {
                    0
                },
                original: data,
            },
            (TYPE_TIME_EXCEEDED, _) => IcmpRepr::TimeExceeded {
                code,
                original: data,
            },
            _ => IcmpRepr::Other { msg_type: t, code },
        }
    }

    /// Writes this message into `buf` with its checksum; returns its length.
    /// For the error messages, `original` is taken as the offending packet
    /// and quoted as [`emit_dest_unreachable`] does. `Other` cannot be
    /// emitted (it has no body): [`WireError::BadLength`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        match *self {
            IcmpRepr::EchoRequest { ident, seq, data } => emit_echo(buf, false, ident, seq, data),
            IcmpRepr::EchoReply { ident, seq, data } => emit_echo(buf, true, ident, seq, data),
            IcmpRepr::DestUnreachable {
                code,
                next_hop_mtu,
                original,
            } => emit_dest_unreachable(buf, code, next_hop_mtu, original),
            IcmpRepr::TimeExceeded { code, original } => {
                let n = emit_dest_unreachable(buf, code, 0, original)?;
                let mut p = IcmpPacket { buf: &mut buf[..n] };
                p.set_msg_type(TYPE_TIME_EXCEEDED);
                p.fill_checksum();
                Ok(n)
            }
            IcmpRepr::Other { .. } => Err(WireError::BadLength),
        }
    }
}

/// Writes an echo request (`reply == false`) or reply with `data` into `buf`,
/// with its checksum; returns the message length (8 + `data.len()`).
pub fn emit_echo(
    buf: &mut [u8],
    reply: bool,
    ident: u16,
    seq: u16,
    data: &[u8],
) -> Result<usize, WireError> {
    let len = HEADER_LEN + data.len();
    let m = buf.get_mut(..len).ok_or(WireError::BufferTooSmall)?;
    m[0] = if reply {
        TYPE_ECHO_REPLY
    } else {
        TYPE_ECHO_REQUEST
    };
    m[1] = 0;
    m[2..4].copy_from_slice(&[0, 0]);
    m[4..6].copy_from_slice(&ident.to_be_bytes());
    m[6..8].copy_from_slice(&seq.to_be_bytes());
    m[8..].copy_from_slice(data);
    let c = checksum::checksum(m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    Ok(len)
}

/// Writes a destination-unreachable message (type 3) with `code` into `buf`,
/// quoting the offending IPv4 packet `original` as RFC 792 says: its IP
/// header (IHL*4 bytes, or 20 if the IHL is unusable) plus the first
/// [`QUOTED_DATA_LEN`] bytes of its data, further truncated to what
/// `original` holds and to what fits in `buf`. `next_hop_mtu` is written to
/// bytes 6..8 (RFC 1191; pass 0 unless `code` is [`CODE_FRAG_NEEDED`]).
/// Returns the message length. Fails only if `buf` is shorter than 8 bytes.
pub fn emit_dest_unreachable(
    buf: &mut [u8],
    code: u8,
    next_hop_mtu: u16,
    original: &[u8],
) -> Result<usize, WireError> {
    if buf.len() < HEADER_LEN {
        return Err(WireError::BufferTooSmall);
    }
    let ihl = usize::from(original.first().map_or(5, |b| b & 0x0F));
    let hdr = if ihl >= 5 { ihl * 4 } else { 20 };
    let quoted = (hdr + QUOTED_DATA_LEN)
        .min(original.len())
        .min(buf.len() - HEADER_LEN);
    let len = HEADER_LEN + quoted;
    let m = &mut buf[..len];
    m[0] = TYPE_DEST_UNREACHABLE;
    m[1] = code;
    m[2..4].copy_from_slice(&[0, 0]);
    m[4..6].copy_from_slice(&[0, 0]);
    m[6..8].copy_from_slice(&next_hop_mtu.to_be_bytes());
    m[8..].copy_from_slice(&original[..quoted]);
    let c = checksum::checksum(m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_roundtrip() {
        let mut b = [0u8; 64];
        let n = emit_echo(&mut b, false, 0x1234, 7, b"hello").unwrap();
        assert_eq!(n, 13);
        let p = IcmpPacket::new_checked(&b[..n]).unwrap();
        assert_eq!(p.msg_type(), TYPE_ECHO_REQUEST);
        assert_eq!(p.code(), 0);
        assert_eq!(p.echo_ident(), 0x1234);
        assert_eq!(p.echo_seq(), 7);
        assert_eq!(p.data(), b"hello");
        assert!(p.verify_checksum());
        // Turn it into a reply in place (RFC 792 echo reply).
        let mut q = IcmpPacket::new_checked(&mut b[..n]).unwrap();
        q.set_msg_type(TYPE_ECHO_REPLY);
        assert!(!q.verify_checksum());
        q.fill_checksum();
        assert!(q.verify_checksum());
        q.set_code(1);
        q.data_mut()[0] = b'j';
        assert_eq!(q.data(), b"jello");
        assert_eq!(
            emit_echo(&mut [0u8; 12], true, 0, 0, b"hello"),
            Err(WireError::BufferTooSmall)
        );
    }

    #[test]
    fn repr_roundtrip() {
        let mut b = [0u8; 64];
        let orig = [0x45u8; 40];
        let cases = [
            IcmpRepr::EchoRequest {
                ident: 1,
                seq: 2,
                data: b"abc",
            },
            IcmpRepr::EchoReply {
                ident: 3,
                seq: 4,
                data: b"",
            },
            IcmpRepr::DestUnreachable {
                code: CODE_FRAG_NEEDED,
                next_hop_mtu: 576,
                original: &orig[..28],
            },
            IcmpRepr::TimeExceeded {
                code: 0,
                original: &orig[..28],
            },
        ];
        for r in cases {
            let n = r.emit(&mut b).unwrap();
            let p = IcmpPacket::new_checked(&b[..n]).unwrap();
            assert!(p.verify_checksum());
            assert_eq!(IcmpRepr::parse(&p), r);
        }
        let other = [13u8, 0, 0, 0, 0, 0, 0, 0];
        let p = IcmpPacket::new_checked(&other[..]).unwrap();
        let r = IcmpRepr::parse(&p);
        assert_eq!(
            r,
            IcmpRepr::Other {
                msg_type: 13,
                code: 0
            }
        );
        assert_eq!(r.emit(&mut b), Err(WireError::BadLength));
    }

    #[test]
    fn truncated() {
        assert_eq!(
            IcmpPacket::new_checked(&[0u8; 7][..]),
            Err(WireError::Truncated)
        );
    }

    #[test]
    fn dest_unreachable_quotes_header_plus_8() {
        // An IPv4 packet with 4 bytes of options and 20 bytes of payload.
        let mut orig = vec![0u8; 48];
        orig[0] = 0x46;
        for (i, x) in orig.iter_mut().enumerate().skip(1) {
            *x = i as u8;
        }
        let mut b = [0u8; 100];
        let n = emit_dest_unreachable(&mut b, CODE_FRAG_NEEDED, 1400, &orig).unwrap();
        assert_eq!(n, 8 + 24 + 8);
        let p = IcmpPacket::new_checked(&b[..n]).unwrap();
        assert_eq!(p.msg_type(), TYPE_DEST_UNREACHABLE);
        assert_eq!(p.code(), CODE_FRAG_NEEDED);
        assert_eq!(p.next_hop_mtu(), 1400);
        assert_eq!(p.rest_of_header(), [0, 0, 0x05, 0x78]);
        assert_eq!(p.data(), &orig[..32]);
        assert!(p.verify_checksum());
        // Truncated to fit the output buffer.
        let n = emit_dest_unreachable(&mut b[..20], CODE_PORT_UNREACHABLE, 0, &orig).unwrap();
        assert_eq!(n, 20);
        assert!(IcmpPacket::new_checked(&b[..n]).unwrap().verify_checksum());
        // Short or garbage original.
        let n = emit_dest_unreachable(&mut b, 3, 0, &[0x40, 1, 2]).unwrap();
        assert_eq!(n, 11);
        let n = emit_dest_unreachable(&mut b, 3, 0, &[]).unwrap();
        assert_eq!(n, 8);
        assert_eq!(
            emit_dest_unreachable(&mut b[..7], 3, 0, &orig),
            Err(WireError::BufferTooSmall)
        );
    }
}
