//! The four send paths of NLF, each writing the headers of one prebuilt
//! packet for one client: Ethernet (14) + IPv4 (20, no options) + UDP (8)
//! [+ RTP (12)], with a correct IPv4 header checksum and a correct UDP
//! checksum over pseudo-header, UDP header, RTP header and payload.
//!
//! | path | payload | headers | UDP checksum |
//! |---|---|---|---|
//! | [`traditional`] | copied into the frame | built from scratch ([`Ipv4Repr`], [`UdpRepr`] emit) | full sum over header and payload |
//! | [`v1`] | by reference, not touched | built from scratch | header sum + stored payload sum |
//! | [`v2`] | by reference | per-client template block-copied, varying fields patched | template sum + varying fields + stored payload sum |
//! | [`v3`] | by reference | fields written one by one from the client's values | template sum + varying fields + stored payload sum |
//!
//! All sums are kept unfolded (32/64-bit partials) and folded once at the
//! end; a computed UDP checksum of 0 is sent as 0xFFFF (RFC 768). Because
//! the UDP header (8) and the RTP header (12) have even lengths, the payload
//! starts at an even offset of the datagram, so its stored sum
//! ([`PacketMeta::sum`], taken as starting at an even offset whatever its
//! offset in the media) adds in directly. `v1`–`v3` never allocate.
//!
//! The per-client IPv4 identification counter lives in [`ClientHeader`];
//! every call uses the current value and advances it.
//!
//! **Owns:** the four ways to write a packet's headers. **May not touch:**
//! the payload (read only, and not at all in `v1`–`v3`) or the stack.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use super::meta::{PacketMeta, RTP_PT_MP2T};
use super::NlfError;
use crate::wire::checksum;
use crate::wire::ethernet::{EthernetAddress, EthernetRepr, ETHERTYPE_IPV4};
use crate::wire::ipv4::{Ipv4Repr, PROTO_UDP};
use crate::wire::udp::UdpRepr;

/// Ethernet + IPv4 + UDP header length.
pub const UDP_FRAME_HEADER: usize = 14 + 20 + 8;
/// RTP fixed header length.
pub const RTP_HEADER: usize = 12;
/// The longest header this module writes.
pub const MAX_HEADER: usize = UDP_FRAME_HEADER + RTP_HEADER;

const IP: usize = 14;
const UDP: usize = 34;
const RTP: usize = 42;
const FLAG_DF: u16 = 0x4000;
const RTP_B0: u8 = 0x80; // V=2, P=0, X=0, CC=0
const RTP_B1: u8 = RTP_PT_MP2T; // M=0, PT=33

/// Which send path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendPath {
    /// Copy and checksum everything (the baseline).
    Traditional,
    /// Stored payload sum; headers built at send time.
    V1,
    /// Stored payload sum; template block copy, fields patched.
    V2,
    /// Stored payload and template sums; fields filled in one by one.
    V3,
}

impl SendPath {
    /// All paths, in order.
    pub const ALL: [SendPath; 4] = [
        SendPath::Traditional,
        SendPath::V1,
        SendPath::V2,
        SendPath::V3,
    ];

    /// The path's name.
    pub const fn name(self) -> &'static str {
        match self {
            SendPath::Traditional => "traditional",
            SendPath::V1 => "v1",
            SendPath::V2 => "v2",
            SendPath::V3 => "v3",
        }
    }
}

impl fmt::Display for SendPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown send path name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownSendPath(pub String);

impl fmt::Display for UnknownSendPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown send path {:?} (expected traditional, v1, v2 or v3)",
            self.0
        )
    }
}

impl std::error::Error for UnknownSendPath {}

impl FromStr for SendPath {
    type Err = UnknownSendPath;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SendPath::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownSendPath(s.to_string()))
    }
}

/// Per-client RTP parameters, random per RFC 3550.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtpParams {
    /// Synchronization source.
    pub ssrc: u32,
    /// Added to the packet's sequence offset (mod 2¹⁶).
    pub seq_base: u16,
    /// Added to the packet's 90 kHz timestamp (mod 2³²).
    pub ts_base: u32,
}

/// What a client's stream is sent with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientConfig {
    /// Our MAC address.
    pub src_mac: EthernetAddress,
    /// The next hop's MAC address.
    pub dst_mac: EthernetAddress,
    /// Our IPv4 address.
    pub src_ip: Ipv4Addr,
    /// The client's IPv4 address.
    pub dst_ip: Ipv4Addr,
    /// Our UDP port.
    pub src_port: u16,
    /// The client's UDP port.
    pub dst_port: u16,
    /// IPv4 time to live.
    pub ttl: u8,
    /// IPv4 Don't Fragment.
    pub dont_frag: bool,
    /// RTP framing, or plain UDP.
    pub rtp: Option<RtpParams>,
}

/// Per-client state built once at stream set-up: the header template, its
/// precomputed partial sums and the IPv4 identification counter.
#[derive(Debug, Clone)]
pub struct ClientHeader {
    cfg: ClientConfig,
    ident: u16,
    hlen: usize,
    rtp_len: usize,
    /// Max payload so that the IPv4 total length fits 16 bits.
    max_payload: usize,
    /// Eth + IPv4 + UDP [+ RTP] with total length, ident, both checksums,
    /// UDP length, RTP sequence and timestamp zero.
    template: [u8; MAX_HEADER],
    /// Unfolded sum of the template's IPv4 header.
    ip_sum: u32,
    /// Unfolded sum of the pseudo-header (without its length), the
    /// template's UDP header and RTP header.
    udp_sum: u32,
    // Field values in wire order, for v3.
    flags_ttl_proto: [u8; 4],
    ports: [u8; 4],
    ssrc: [u8; 4],
    seq_base: u16,
    ts_base: u32,
}

impl ClientHeader {
    /// Builds the template and its sums; the identification counter starts
    /// at `ident`.
    pub fn new(cfg: ClientConfig, ident: u16) -> ClientHeader {
        let rtp_len = if cfg.rtp.is_some() { RTP_HEADER } else { 0 };
        let hlen = UDP_FRAME_HEADER + rtp_len;
        let mut t = [0u8; MAX_HEADER];
        t[0..6].copy_from_slice(&cfg.dst_mac.0);
        t[6..12].copy_from_slice(&cfg.src_mac.0);
        t[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let flags: u16 = if cfg.dont_frag { FLAG_DF } else { 0 };
        let flags_ttl_proto = {
            let f = flags.to_be_bytes();
            [f[0], f[1], cfg.ttl, PROTO_UDP]
        };
        t[IP] = 0x45;
        t[IP + 6..IP + 10].copy_from_slice(&flags_ttl_proto);
        t[IP + 12..IP + 16].copy_from_slice(&cfg.src_ip.octets());
        t[IP + 16..IP + 20].copy_from_slice(&cfg.dst_ip.octets());
        let mut ports = [0u8; 4];
        ports[0..2].copy_from_slice(&cfg.src_port.to_be_bytes());
        ports[2..4].copy_from_slice(&cfg.dst_port.to_be_bytes());
        t[UDP..UDP + 4].copy_from_slice(&ports);
        let rtp = cfg.rtp.unwrap_or(RtpParams {
            ssrc: 0,
            seq_base: 0,
            ts_base: 0,
        });
        let ssrc = rtp.ssrc.to_be_bytes();
        if cfg.rtp.is_some() {
            t[RTP] = RTP_B0;
            t[RTP + 1] = RTP_B1;
            t[RTP + 8..RTP + 12].copy_from_slice(&ssrc);
        }
        let ip_sum = checksum::partial(&t[IP..UDP], 0);
        let ph = checksum::pseudo_header_ipv4(cfg.src_ip, cfg.dst_ip, PROTO_UDP, 0);
        let udp_sum = checksum::partial(&t[UDP..hlen], ph);
        ClientHeader {
            cfg,
            ident,
            hlen,
            rtp_len,
            max_payload: 65535 - 20 - 8 - rtp_len,
            template: t,
            ip_sum,
            udp_sum,
            flags_ttl_proto,
            ports,
            ssrc,
            seq_base: rtp.seq_base,
            ts_base: rtp.ts_base,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.cfg
    }
    /// Header length: 42, or 54 with RTP.
    pub fn header_len(&self) -> usize {
        self.hlen
    }
    /// The longest payload these headers can carry.
    pub fn max_payload(&self) -> usize {
        self.max_payload
    }
    /// The identification the next packet gets.
    pub fn ident(&self) -> u16 {
        self.ident
    }
    /// Sets the identification the next packet gets.
    pub fn set_ident(&mut self, ident: u16) {
        self.ident = ident;
    }
    /// The header template (varying fields zero).
    pub fn template(&self) -> &[u8] {
        &self.template[..self.hlen]
    }

    #[inline]
    fn next_ident(&mut self) -> u16 {
        let i = self.ident;
        self.ident = i.wrapping_add(1);
        i
    }

    /// Checks `out` and the payload length; returns (udp_len, ip_total).
    #[inline]
    fn lengths(
        &self,
        pkt: &PacketMeta,
        out_len: usize,
        need: usize,
    ) -> Result<(u16, u16), NlfError> {
        if pkt.len as usize > self.max_payload {
            return Err(payload_too_long(pkt, self.max_payload));
        }
        if out_len < need {
            return Err(buffer_too_small(need, out_len));
        }
        let udp_len = (8 + self.rtp_len + pkt.len as usize) as u16;
        Ok((udp_len, udp_len + 20))
    }

    /// RTP sequence number and timestamp of `pkt` for this client.
    #[inline]
    fn rtp_fields(&self, pkt: &PacketMeta) -> (u16, u32) {
        (
            self.seq_base.wrapping_add(pkt.rtp_seq as u16),
            self.ts_base.wrapping_add(pkt.rtp_ts),
        )
    }

    fn ip_repr(&self, ident: u16, payload_len: usize) -> Ipv4Repr {
        Ipv4Repr {
            src: self.cfg.src_ip,
            dst: self.cfg.dst_ip,
            protocol: PROTO_UDP,
            ttl: self.cfg.ttl,
            ident,
            dont_frag: self.cfg.dont_frag,
            more_frags: false,
            frag_offset: 0,
            payload_len,
        }
    }

    fn eth_repr(&self) -> EthernetRepr {
        EthernetRepr {
            src: self.cfg.src_mac,
            dst: self.cfg.dst_mac,
            ethertype: ETHERTYPE_IPV4,
        }
    }

    fn write_rtp(&self, r: &mut [u8], seq: u16, ts: u32) {
        if let Some(r) = r.get_mut(..RTP_HEADER) {
            r[0] = RTP_B0;
            r[1] = RTP_B1;
            r[2..4].copy_from_slice(&seq.to_be_bytes());
            r[4..8].copy_from_slice(&ts.to_be_bytes());
            r[8..12].copy_from_slice(&self.ssrc);
        }
    }

    /// Folded UDP checksum from the template sum, the varying fields and the
    /// stored payload sum; 0 is sent as 0xFFFF.
    #[inline]
    fn udp_csum(&self, udp_len: u16, seq: u16, ts: u32, payload_sum: u32) -> u16 {
        let rtp_mask = if self.rtp_len != 0 { u64::MAX } else { 0 };
        let rtp = (u64::from(seq) + u64::from(ts >> 16) + u64::from(ts & 0xFFFF)) & rtp_mask;
        let s = u64::from(self.udp_sum) + 2 * u64::from(udp_len) + u64::from(payload_sum) + rtp;
        finish(!checksum::fold64(s))
    }

    #[inline]
    fn ip_csum(&self, total: u16, ident: u16) -> u16 {
        !checksum::fold64(u64::from(self.ip_sum) + u64::from(total) + u64::from(ident))
    }
}

#[inline]
const fn finish(c: u16) -> u16 {
    if c == 0 {
        0xFFFF
    } else {
        c
    }
}

#[cfg_attr(lazynet_outline, cold, inline(never))]
fn payload_too_long(pkt: &PacketMeta, max: usize) -> NlfError {
    NlfError::PayloadTooLong {
        len: u64::from(pkt.len),
        max,
    }
}

#[cfg_attr(lazynet_outline, cold, inline(never))]
fn buffer_too_small(need: usize, have: usize) -> NlfError {
    NlfError::BufferTooSmall { need, have }
}

#[cfg_attr(lazynet_outline, cold, inline(never))]
fn wire_failed(need: usize, have: usize) -> NlfError {
    NlfError::BufferTooSmall { need, have }
}

/// Baseline: writes the headers and copies `payload` (which must be
/// `pkt.len` long) after them, building every header from scratch and
/// summing header and payload. Returns the whole frame's length.
pub fn traditional(
    c: &mut ClientHeader,
    pkt: &PacketMeta,
    payload: &[u8],
    out: &mut [u8],
) -> Result<usize, NlfError> {
    if payload.len() != pkt.len as usize {
        return Err(NlfError::PayloadMismatch {
            expected: u64::from(pkt.len),
            found: payload.len(),
        });
    }
    let frame_len = c.hlen + payload.len();
    let (udp_len, _) = c.lengths(pkt, out.len(), frame_len)?;
    let ident = c.next_ident();
    let have = out.len();
    let (seq, ts) = c.rtp_fields(pkt);
    c.eth_repr()
        .emit(out)
        .map_err(|_| wire_failed(frame_len, have))?;
    c.ip_repr(ident, usize::from(udp_len))
        .emit(&mut out[IP..])
        .map_err(|_| wire_failed(frame_len, have))?;
    if c.rtp_len != 0 {
        c.write_rtp(&mut out[RTP..], seq, ts);
    }
    out[c.hlen..frame_len].copy_from_slice(payload);
    UdpRepr {
        src_port: c.cfg.src_port,
        dst_port: c.cfg.dst_port,
        payload_len: usize::from(udp_len) - 8,
    }
    .emit(&mut out[UDP..frame_len], c.cfg.src_ip, c.cfg.dst_ip)
    .map_err(|_| wire_failed(frame_len, have))?;
    Ok(frame_len)
}

/// Version 1: headers built from scratch at send time; the UDP checksum is
/// the header's sum plus the stored payload sum. Writes only the headers
/// into `out`; returns the header length.
pub fn v1(c: &mut ClientHeader, pkt: &PacketMeta, out: &mut [u8]) -> Result<usize, NlfError> {
    let (udp_len, _) = c.lengths(pkt, out.len(), c.hlen)?;
    let ident = c.next_ident();
    let (hlen, have) = (c.hlen, out.len());
    let (seq, ts) = c.rtp_fields(pkt);
    c.eth_repr()
        .emit(out)
        .map_err(|_| wire_failed(hlen, have))?;
    c.ip_repr(ident, usize::from(udp_len))
        .emit(&mut out[IP..])
        .map_err(|_| wire_failed(hlen, have))?;
    let mut extra = pkt.sum;
    if c.rtp_len != 0 {
        c.write_rtp(&mut out[RTP..], seq, ts);
        extra = checksum::combine(checksum::partial(&out[RTP..hlen], 0), pkt.sum);
    }
    UdpRepr {
        src_port: c.cfg.src_port,
        dst_port: c.cfg.dst_port,
        payload_len: usize::from(udp_len) - 8,
    }
    .emit_header_with_payload_sum(&mut out[UDP..], c.cfg.src_ip, c.cfg.dst_ip, extra)
    .map_err(|_| wire_failed(hlen, have))?;
    Ok(hlen)
}

/// Version 2: the client's header template is block-copied, then the
/// varying fields (IPv4 total length, ident and checksum; UDP length and
/// checksum; RTP sequence and timestamp) are patched. Returns the header
/// length.
#[inline]
pub fn v2(c: &mut ClientHeader, pkt: &PacketMeta, out: &mut [u8]) -> Result<usize, NlfError> {
    let (udp_len, total) = c.lengths(pkt, out.len(), c.hlen)?;
    let ident = c.next_ident();
    let (seq, ts) = c.rtp_fields(pkt);
    let hlen = c.hlen;
    let h = &mut out[..hlen];
    h.copy_from_slice(&c.template[..hlen]);
    let ip_csum = c.ip_csum(total, ident);
    let udp_csum = c.udp_csum(udp_len, seq, ts, pkt.sum);
    let base: &mut [u8; UDP_FRAME_HEADER] = match (&mut h[..UDP_FRAME_HEADER]).try_into() {
        Ok(b) => b,
        Err(_) => return Err(buffer_too_small(hlen, hlen)),
    };
    base[IP + 2..IP + 4].copy_from_slice(&total.to_be_bytes());
    base[IP + 4..IP + 6].copy_from_slice(&ident.to_be_bytes());
    base[IP + 10..IP + 12].copy_from_slice(&ip_csum.to_be_bytes());
    base[UDP + 4..UDP + 6].copy_from_slice(&udp_len.to_be_bytes());
    base[UDP + 6..UDP + 8].copy_from_slice(&udp_csum.to_be_bytes());
    if let Some(r) = h.get_mut(RTP..RTP + RTP_HEADER) {
        r[2..4].copy_from_slice(&seq.to_be_bytes());
        r[4..8].copy_from_slice(&ts.to_be_bytes());
    }
    Ok(hlen)
}

/// Version 3: stored payload sum and template sum; every header field is
/// written one by one from the client's values (no block copy). Returns the
/// header length.
#[inline]
pub fn v3(c: &mut ClientHeader, pkt: &PacketMeta, out: &mut [u8]) -> Result<usize, NlfError> {
    let (udp_len, total) = c.lengths(pkt, out.len(), c.hlen)?;
    let ident = c.next_ident();
    let (seq, ts) = c.rtp_fields(pkt);
    let hlen = c.hlen;
    let ip_csum = c.ip_csum(total, ident);
    let udp_csum = c.udp_csum(udp_len, seq, ts, pkt.sum);
    let (base, rest) = out.split_at_mut(UDP_FRAME_HEADER.min(out.len()));
    let base: &mut [u8; UDP_FRAME_HEADER] = match base.try_into() {
        Ok(b) => b,
        Err(_) => return Err(buffer_too_small(hlen, hlen)),
    };
    base[0..6].copy_from_slice(&c.cfg.dst_mac.0);
    base[6..12].copy_from_slice(&c.cfg.src_mac.0);
    base[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    base[IP] = 0x45;
    base[IP + 1] = 0;
    base[IP + 2..IP + 4].copy_from_slice(&total.to_be_bytes());
    base[IP + 4..IP + 6].copy_from_slice(&ident.to_be_bytes());
    base[IP + 6..IP + 10].copy_from_slice(&c.flags_ttl_proto);
    base[IP + 10..IP + 12].copy_from_slice(&ip_csum.to_be_bytes());
    base[IP + 12..IP + 16].copy_from_slice(&c.cfg.src_ip.octets());
    base[IP + 16..IP + 20].copy_from_slice(&c.cfg.dst_ip.octets());
    base[UDP..UDP + 4].copy_from_slice(&c.ports);
    base[UDP + 4..UDP + 6].copy_from_slice(&udp_len.to_be_bytes());
    base[UDP + 6..UDP + 8].copy_from_slice(&udp_csum.to_be_bytes());
    if c.rtp_len != 0 {
        if let Some(r) = rest.get_mut(..RTP_HEADER) {
            r[0] = RTP_B0;
            r[1] = RTP_B1;
            r[2..4].copy_from_slice(&seq.to_be_bytes());
            r[4..8].copy_from_slice(&ts.to_be_bytes());
            r[8..12].copy_from_slice(&c.ssrc);
        }
    }
    Ok(hlen)
}

/// Runs `path`. `payload` is only read by [`SendPath::Traditional`], which
/// returns the whole frame length; the others return the header length and
/// leave the payload to be sent by reference after the header.
#[inline]
pub fn send(
    path: SendPath,
    c: &mut ClientHeader,
    pkt: &PacketMeta,
    payload: &[u8],
    out: &mut [u8],
) -> Result<usize, NlfError> {
    match path {
        SendPath::Traditional => traditional(c, pkt, payload, out),
        SendPath::V1 => v1(c, pkt, out),
        SendPath::V2 => v2(c, pkt, out),
        SendPath::V3 => v3(c, pkt, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_names_round_trip() {
        for p in SendPath::ALL {
            assert_eq!(p.to_string().parse::<SendPath>(), Ok(p));
        }
        assert!("v4".parse::<SendPath>().is_err());
    }

    #[test]
    fn fold64_handles_carries() {
        assert_eq!(checksum::fold64(0), 0);
        assert_eq!(checksum::fold64(0xFFFF), 0xFFFF);
        assert_eq!(checksum::fold64(0x1_0000), 1);
        assert_eq!(checksum::fold64(u64::MAX), 0xFFFF);
    }
}
