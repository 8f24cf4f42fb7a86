//! Segmentation offload for the TAP driver: a run of consecutive TCP
//! segments of one connection, handed to one `send` call, leaves as *one*
//! frame carrying a virtio-net header (`IFF_VNET_HDR`) that says how to cut
//! it (`gso_size`) and where to finish its checksum. The kernel takes it as
//! one GSO packet: delivered locally, its TCP receives one large segment (as
//! after GRO); forwarded, it is cut up by the kernel's software GSO. One
//! `writev` then moves up to 64 KiB instead of one MSS, which is what bounds
//! a TAP sender (one system call per frame, ~0.8 Mpps per core).
//!
//! **Owns:** the decision whether frames merge ([`run_len`]), the merged
//! frame's headers ([`merged_header`]), cutting a GSO frame the kernel
//! handed over back into segments ([`Cutter`], receive offload), and the
//! virtio-net header layout ([`VnetHdr`]), including completing a checksum
//! the kernel left partial ([`complete_checksum`]).
//!
//! **May not touch:** protocol state. It reads the Ethernet, IPv4 and TCP
//! headers of frames it was asked to send, as a NIC's segmentation offload
//! does, and never changes a frame in a buffer: the merged header is built
//! in the caller's scratch array.
//!
//! Written here rather than taken from a crate: `virtio-bindings` has the
//! struct but none of the merging rules, which are the point; the header
//! is ten bytes.
//!
//! **Which frames merge** (Linux's `tcp_gso_segment` cuts a GSO packet back
//! into exactly these segments): IPv4 without options or fragmentation,
//! TCP with ACK (and PSH only on the last), no SYN, FIN, RST or URG; every
//! header byte the same as the first frame's except IP total length, ident
//! and checksum, TCP sequence number, checksum and the PSH bit; each
//! sequence number following the previous segment's data; every segment
//! but the last exactly as long as the first (the `gso_size`); at most
//! [`MAX_RUN`] segments and 64 KiB of IP packet.

use std::net::Ipv4Addr;

use crate::wire::checksum;
use crate::wire::ipv4::PROTO_TCP;
use crate::wire::tcp::{TcpFlags, TcpPacket};

/// Bytes of the virtio-net header (`struct virtio_net_hdr`, no
/// `num_buffers`): the tun driver's default `TUNSETVNETHDRSZ`.
pub const VNET_HDR_LEN: usize = 10;
/// Most segments merged into one frame (the iovec array is on the stack).
pub const MAX_RUN: usize = 64;
/// Largest merged header: Ethernet, IPv4 without options, TCP with 40
/// bytes of options.
pub const MAX_HDR: usize = ETH + IP + 60;

const ETH: usize = 14;
const IP: usize = 20;
/// Offsets inside the frame.
const IP_TOTAL: usize = ETH + 2;
const IP_CSUM: usize = ETH + 10;
const TCP: usize = ETH + IP;
const TCP_SEQ: usize = TCP + 4;
const TCP_OFF: usize = TCP + 12;
const TCP_FLAGS: usize = TCP + 13;
const TCP_CSUM: usize = TCP + 16;

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;
const URG: u8 = 0x20;
const CWR: u8 = 0x80;

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: checksum from `csum_start` to the end,
/// stored at `csum_start + csum_offset`.
const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_NONE`, `VIRTIO_NET_HDR_GSO_TCPV4`.
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;

/// `struct virtio_net_hdr` (legacy layout, host byte order, as the tun
/// driver reads and writes it without `IFF_VNET_LE`/`BE`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// `VIRTIO_NET_HDR_F_*`.
    pub flags: u8,
    /// `VIRTIO_NET_HDR_GSO_*`.
    pub gso_type: u8,
    /// Bytes of headers in front of the data (Ethernet included).
    pub hdr_len: u16,
    /// Data bytes per segment.
    pub gso_size: u16,
    /// Where the checksummed part starts.
    pub csum_start: u16,
    /// Where, from `csum_start`, the checksum goes.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// The header of a plain frame: nothing to do.
    pub const PLAIN: VnetHdr = VnetHdr {
        flags: 0,
        gso_type: GSO_NONE,
        hdr_len: 0,
        gso_size: 0,
        csum_start: 0,
        csum_offset: 0,
    };

    /// The ten bytes the tun driver expects.
    pub fn to_bytes(self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }

    /// Reads the ten bytes in front of a frame the tun driver handed us.
    pub fn from_bytes(b: &[u8; VNET_HDR_LEN]) -> VnetHdr {
        let u = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        }
    }

    /// True if the frame after this header is one plain frame (no GSO).
    pub fn is_plain_frame(&self) -> bool {
        self.gso_type == GSO_NONE
    }

    /// True if the kernel left the frame's transport checksum partial.
    pub fn needs_csum(&self) -> bool {
        self.flags & F_NEEDS_CSUM != 0
    }
}

/// What a segment contributes to a run: its header length (Ethernet to
/// the end of the TCP options), data length, sequence number and flags.
#[derive(Clone, Copy, Debug)]
struct Seg {
    hdr: usize,
    data: usize,
    seq: u32,
    flags: u8,
}

/// The TCP segment in `f`, if it could be part of a merged frame.
#[inline]
fn seg(f: &[u8]) -> Option<Seg> {
    let h = tcp_ipv4(f)?;
    // DF may be set; no MF, offset 0.
    if h[ETH + 6] & 0x3F != 0 || h[ETH + 7] != 0 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([h[IP_TOTAL], h[IP_TOTAL + 1]]));
    let hdr = header_len(h);
    let thl = hdr - TCP;
    if thl < 20 || total < IP + thl || f.len() != ETH + total {
        return None;
    }
    let flags = h[TCP_FLAGS];
    if flags & (SYN | FIN | RST | URG) != 0 || flags & ACK == 0 {
        return None;
    }
    let data = total - IP - thl;
    if data == 0 {
        return None;
    }
    Some(Seg {
        hdr,
        data,
        seq: u32::from_be_bytes([h[TCP_SEQ], h[TCP_SEQ + 1], h[TCP_SEQ + 2], h[TCP_SEQ + 3]]),
        flags,
    })
}

/// The fixed headers of `f` if it is TCP over IPv4 without IP options in
/// an Ethernet frame (type IPv4, version 4 and IHL 5, protocol TCP).
#[inline]
fn tcp_ipv4(f: &[u8]) -> Option<&[u8]> {
    let h = f.get(..TCP + 20)?;
    (h[12..14] == [0x08, 0x00] && h[ETH] == 0x45 && h[ETH + 9] == PROTO_TCP).then_some(h)
}

/// True if header bytes `a` and `b` (each the full header of a segment)
/// agree on everything a merged frame keeps from the first segment.
#[inline]
fn same_flow(a: &[u8], b: &[u8]) -> bool {
    // Skipped: IP total length and ident [16..20), IP checksum [24..26),
    // TCP seq [38..42), TCP flags [47] (compared without PSH), TCP checksum
    // [50..52).
    a.len() == b.len()
        && a[..IP_TOTAL] == b[..IP_TOTAL]
        && a[ETH + 6..IP_CSUM] == b[ETH + 6..IP_CSUM]
        && a[IP_CSUM + 2..TCP_SEQ] == b[IP_CSUM + 2..TCP_SEQ]
        && a[TCP_SEQ + 4..TCP_FLAGS] == b[TCP_SEQ + 4..TCP_FLAGS]
        && (a[TCP_FLAGS] ^ b[TCP_FLAGS]) & !PSH == 0
        && a[TCP_FLAGS + 1..TCP_CSUM] == b[TCP_FLAGS + 1..TCP_CSUM]
        && a[TCP_CSUM + 2..] == b[TCP_CSUM + 2..]
}

/// A run of segments [`run_len`] found: how many frames merge (1: the
/// first goes alone), the data bytes they carry together, and whether the
/// last has PSH (which the merged frame then carries).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// Frames in the run.
    pub n: usize,
    /// Data bytes of all of them (meaningful when `n > 1`).
    pub data: usize,
    /// The last segment has PSH.
    pub psh: bool,
}

/// Which frames, from `first` on, merge into one. `rest` are the frames
/// after it, in order (`None`: a descriptor that names no frame, which
/// ends the run).
pub fn run_len<'a>(first: &'a [u8], rest: impl Iterator<Item = Option<&'a [u8]>>) -> Run {
    let alone = Run {
        n: 1,
        data: 0,
        psh: false,
    };
    let Some(s0) = seg(first) else { return alone };
    if s0.flags & PSH != 0 {
        return alone;
    }
    let h0 = &first[..s0.hdr];
    let (mut n, mut prev, mut ip_len) = (1, s0, s0.hdr - ETH + s0.data);
    for f in rest {
        if n == MAX_RUN {
            break;
        }
        let Some(f) = f else { break };
        let Some(s) = seg(f) else { break };
        // Every segment but the last is a full `gso_size`.
        if prev.data != s0.data
            || s.data > s0.data
            || s.hdr != s0.hdr
            || s.seq != prev.seq.wrapping_add(prev.data as u32)
            || ip_len + s.data > usize::from(u16::MAX)
            || !same_flow(h0, &f[..s.hdr])
        {
            break;
        }
        n += 1;
        ip_len += s.data;
        prev = s;
        if s.flags & PSH != 0 {
            break;
        }
    }
    Run {
        n,
        data: ip_len - (s0.hdr - ETH),
        psh: prev.flags & PSH != 0,
    }
}

/// Writes into `out` the headers of the frame that merges the segments of
/// `run`, `first` and the `run.n - 1` after it; returns the header length
/// and the virtio-net header. Call only with a run [`run_len`] found.
///
/// The IP header is the first segment's with the merged total length and
/// its checksum redone. The TCP checksum field holds the pseudo-header sum
/// (RFC 9293 §3.1) of the merged length, folded and *not* inverted: the
/// partial form the kernel completes (`CHECKSUM_PARTIAL`), per segment when
/// it cuts the frame up.
pub fn merged_header(first: &[u8], run: &Run, out: &mut [u8; MAX_HDR]) -> (usize, VnetHdr) {
    let hl = header_len(first);
    let h = &mut out[..hl];
    h.copy_from_slice(&first[..hl]);
    let (src, dst) = set_ip_header(h, hl - ETH + run.data, 0);
    if run.psh {
        h[TCP_FLAGS] |= PSH;
    }
    let ph = checksum::pseudo_header_ipv4(src, dst, PROTO_TCP, (hl - TCP + run.data) as u16);
    h[TCP_CSUM..TCP_CSUM + 2].copy_from_slice(&checksum::fold(ph).to_be_bytes());
    let gso_size = (first.len() - hl) as u16;
    (
        hl,
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: hl as u16,
            gso_size,
            csum_start: TCP as u16,
            csum_offset: 16,
        },
    )
}

/// Ethernet, IP (without options) and TCP header bytes of frame `f`,
/// which holds at least the fixed headers.
pub fn header_len(f: &[u8]) -> usize {
    TCP + usize::from(f[TCP_OFF] >> 4) * 4
}

/// In the headers `h` of a frame (merged or cut), stores IP total length
/// `total`, adds `ident_add` to the ident and redoes the IP header
/// checksum; returns the addresses. (Written on the bytes: the headers
/// of a merged frame stand without the data its length counts, which
/// `Ipv4Packet::new_checked` would refuse.)
fn set_ip_header(h: &mut [u8], total: usize, ident_add: u16) -> (Ipv4Addr, Ipv4Addr) {
    h[IP_TOTAL..IP_TOTAL + 2].copy_from_slice(&(total as u16).to_be_bytes());
    let ident = u16::from_be_bytes([h[ETH + 4], h[ETH + 5]]).wrapping_add(ident_add);
    h[ETH + 4..ETH + 6].copy_from_slice(&ident.to_be_bytes());
    h[IP_CSUM..IP_CSUM + 2].copy_from_slice(&[0, 0]);
    let c = checksum::checksum(&h[ETH..TCP]);
    h[IP_CSUM..IP_CSUM + 2].copy_from_slice(&c.to_be_bytes());
    let a = |i: usize| Ipv4Addr::new(h[i], h[i + 1], h[i + 2], h[i + 3]);
    (a(ETH + 12), a(ETH + 16))
}

/// Cuts a GSO frame the kernel handed over (receive offload) back into
/// the segments it stands for, as Linux's `tcp_gso_segment` would: each
/// gets the frame's headers with its own IP total length, ident (the
/// frame's plus its index) and checksum, sequence number and full TCP
/// checksum; FIN and PSH stay on the last segment only, CWR on the first.
#[derive(Clone, Copy, Debug)]
pub struct Cutter {
    /// Header bytes (Ethernet to the end of the TCP options).
    hdr: usize,
    /// Data bytes per segment.
    gso: usize,
    /// Frame length.
    len: usize,
    /// Offset of the next segment's data in the frame.
    at: usize,
    /// Index of the next segment.
    j: u32,
}

impl Cutter {
    /// A cutter for the `len`-byte GSO frame `f` (`len > f.len()` is
    /// refused), or `None` if it is not a TCP/IPv4 GSO frame whose segments
    /// fit `max_frame` bytes each.
    pub fn new(f: &[u8], h: &VnetHdr, max_frame: usize) -> Option<Cutter> {
        if h.gso_type != GSO_TCPV4 || h.gso_size == 0 {
            return None;
        }
        let hdr = header_len(tcp_ipv4(f)?);
        let gso = usize::from(h.gso_size);
        if hdr < TCP + 20 || f.len() <= hdr || hdr + gso > max_frame {
            return None;
        }
        Some(Cutter {
            hdr,
            gso,
            len: f.len(),
            at: hdr,
            j: 0,
        })
    }

    /// Segments still to come.
    pub fn remaining(&self) -> usize {
        (self.len - self.at).div_ceil(self.gso)
    }

    /// Writes the next segment of `f` (the frame given to `new`, or a
    /// slice that starts with it) into
    /// `out` and returns its length, or `None` when all are out (or `out`
    /// is too short, which `max_frame` rules out).
    pub fn next_segment(&mut self, f: &[u8], out: &mut [u8]) -> Option<usize> {
        let f = f.get(..self.len)?;
        if self.at >= self.len {
            return None;
        }
        let data = self.gso.min(self.len - self.at);
        let total = self.hdr + data;
        let o = out.get_mut(..total)?;
        o[..self.hdr].copy_from_slice(&f[..self.hdr]);
        o[self.hdr..].copy_from_slice(&f[self.at..self.at + data]);
        let last = self.at + data == self.len;
        let (src, dst) = set_ip_header(o, total - ETH, self.j as u16);
        // `new` checked the TCP header length against the frame's.
        let mut t = TcpPacket::new_checked(&mut o[TCP..]).ok()?;
        t.set_seq_number(t.seq_number() + (self.at - self.hdr) as u32);
        let mut flags = t.flags().0;
        if !last {
            flags &= !(FIN | PSH);
        }
        if self.j > 0 {
            flags &= !CWR;
        }
        t.set_flags(TcpFlags(flags));
        t.fill_checksum(src, dst);
        self.at += data;
        self.j += 1;
        Some(total)
    }
}

/// Finishes a checksum the kernel left partial (`VIRTIO_NET_HDR_F_NEEDS_CSUM`:
/// the field holds the pseudo-header sum): sums from `csum_start` to the end
/// of `frame` and stores the result at `csum_start + csum_offset`. Returns
/// false, changing nothing, if those offsets do not fit the frame.
pub fn complete_checksum(frame: &mut [u8], h: &VnetHdr) -> bool {
    let start = usize::from(h.csum_start);
    let at = start + usize::from(h.csum_offset);
    if at + 2 > frame.len() || start > frame.len() {
        return false;
    }
    let c = checksum::checksum(&frame[start..]);
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ipv4::Ipv4Repr;
    use crate::wire::tcp::{SeqNumber, TcpFlags, TcpPacket, TcpRepr, Timestamps};
    use std::net::Ipv4Addr;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    /// A whole frame: Ethernet, IPv4, TCP with timestamps, `data` bytes of
    /// payload starting with byte `fill`.
    fn frame(seq: u32, data: usize, flags: TcpFlags, ident: u16, fill: u8) -> Vec<u8> {
        let t = TcpRepr {
            src_port: 80,
            dst_port: 40000,
            seq: SeqNumber(seq),
            ack: SeqNumber(7),
            flags,
            window: 500,
            timestamps: Some(Timestamps {
                tsval: 11,
                tsecr: 22,
            }),
            payload_len: data,
            ..TcpRepr::EMPTY
        };
        let thl = t.header_len().unwrap();
        let mut f = vec![0u8; TCP + thl + data];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = Ipv4Repr {
            src: A,
            dst: B,
            protocol: PROTO_TCP,
            ttl: 64,
            ident,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
            payload_len: thl + data,
        };
        ip.emit(&mut f[ETH..]).unwrap();
        for (i, b) in f[TCP + thl..].iter_mut().enumerate() {
            *b = fill.wrapping_add(i as u8);
        }
        t.emit(&mut f[TCP..], A, B).unwrap();
        f
    }

    fn run(frames: &[Vec<u8>]) -> usize {
        runs(frames).n
    }

    fn runs(frames: &[Vec<u8>]) -> Run {
        run_len(&frames[0], frames[1..].iter().map(|f| Some(&f[..])))
    }

    const ACK_: TcpFlags = TcpFlags::ACK;
    fn ack_psh() -> TcpFlags {
        TcpFlags(TcpFlags::ACK.0 | TcpFlags::PSH.0)
    }

    #[test]
    fn consecutive_full_segments_merge_up_to_a_short_last() {
        let f = [
            frame(1000, 100, ACK_, 1, 0),
            frame(1100, 100, ACK_, 2, 1),
            frame(1200, 100, ACK_, 3, 2),
            frame(1300, 40, ack_psh(), 4, 3),
            frame(1340, 100, ACK_, 5, 4),
        ];
        // PSH ends the run with the short segment in it.
        assert_eq!(run(&f), 4);
    }

    #[test]
    fn a_gap_a_short_middle_or_another_flow_ends_the_run() {
        let gap = [frame(1000, 100, ACK_, 1, 0), frame(1101, 100, ACK_, 2, 0)];
        assert_eq!(run(&gap), 1);
        let short = [
            frame(1000, 100, ACK_, 1, 0),
            frame(1100, 50, ACK_, 2, 0),
            frame(1150, 100, ACK_, 3, 0),
        ];
        assert_eq!(run(&short), 2);
        let longer = [frame(1000, 100, ACK_, 1, 0), frame(1100, 120, ACK_, 2, 0)];
        assert_eq!(run(&longer), 1);
        let mut other = frame(1100, 100, ACK_, 2, 0);
        other[TCP + 1] ^= 1; // another source port
        assert_eq!(run(&[frame(1000, 100, ACK_, 1, 0), other]), 1);
        let mut window = frame(1100, 100, ACK_, 2, 0);
        window[TCP + 14] ^= 1;
        assert_eq!(run(&[frame(1000, 100, ACK_, 1, 0), window]), 1);
    }

    #[test]
    fn control_flags_psh_first_and_empty_segments_go_alone() {
        let fin = TcpFlags(TcpFlags::ACK.0 | TcpFlags::FIN.0);
        assert_eq!(
            run(&[frame(1, 100, fin, 1, 0), frame(101, 100, ACK_, 2, 0)]),
            1
        );
        assert_eq!(
            run(&[frame(1, 100, ACK_, 1, 0), frame(101, 100, fin, 2, 0)]),
            1
        );
        assert_eq!(
            run(&[frame(1, 100, ack_psh(), 1, 0), frame(101, 100, ACK_, 2, 0)]),
            1
        );
        assert_eq!(run(&[frame(1, 0, ACK_, 1, 0), frame(1, 0, ACK_, 2, 0)]), 1);
        assert_eq!(
            run(&[frame(1, 100, ACK_, 1, 0), frame(101, 0, ACK_, 2, 0)]),
            1
        );
        // A frame that is not a frame (bad descriptor) ends the run.
        let f = frame(1, 100, ACK_, 1, 0);
        let g = frame(101, 100, ACK_, 2, 0);
        assert_eq!(run_len(&f, [None, Some(&g[..])].into_iter()).n, 1);
        // Truncated or garbage input never panics.
        assert_eq!(run_len(&f[..30], std::iter::empty()).n, 1);
        assert_eq!(run_len(&f, [Some(&g[..40])].into_iter()).n, 1);
    }

    #[test]
    fn runs_stop_at_64_kib_and_at_max_run() {
        let big: Vec<_> = (0..50)
            .map(|i| frame(i * 1448, 1448, ACK_, i as u16, 0))
            .collect();
        // 45 segments of 1448 plus headers exceed 65535 bytes of IP packet.
        let n = run(&big);
        assert_eq!(n, (65535 - 20 - 32) / 1448);
        let small: Vec<_> = (0..80)
            .map(|i| frame(i * 10, 10, ACK_, i as u16, 0))
            .collect();
        assert_eq!(run(&small), MAX_RUN);
    }

    #[test]
    fn merged_frame_is_the_segments_concatenated_with_a_partial_checksum() {
        let f = [
            frame(1000, 100, ACK_, 1, 0),
            frame(1100, 100, ACK_, 2, 100),
            frame(1200, 30, ack_psh(), 3, 200),
        ];
        assert_eq!(run(&f), 3);
        let mut hdr = [0u8; MAX_HDR];
        let (hl, v) = merged_header(&f[0], &runs(&f), &mut hdr);
        assert_eq!(hl, TCP + 32);
        assert_eq!(v.gso_size, 100);
        assert_eq!(usize::from(v.hdr_len), hl);
        // What the kernel sees, once it has finished the checksum.
        let mut m = hdr[..hl].to_vec();
        for x in &f {
            m.extend_from_slice(&x[hl..]);
        }
        assert!(complete_checksum(&mut m, &v));
        let ip = crate::wire::ipv4::Ipv4Packet::new_checked(&m[ETH..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(usize::from(ip.total_len()), m.len() - ETH);
        let t = TcpPacket::new_checked(&m[TCP..]).unwrap();
        assert!(t.verify_checksum(A, B));
        assert_eq!(t.seq_number(), SeqNumber(1000));
        assert_eq!(t.flags().0, ack_psh().0);
        let data: Vec<u8> = f.iter().flat_map(|x| x[hl..].to_vec()).collect();
        assert_eq!(t.payload(), &data[..]);
    }

    proptest::proptest! {
        /// Frames with any bytes changed (or cut short) never make the
        /// merge rules or the merged header panic, and what merges is
        /// still a run the kernel can cut back into the same segments.
        #[test]
        fn damaged_frames_never_panic(
            n in 2usize..6,
            cuts in proptest::collection::vec((0usize..6, 0usize..200, proptest::num::u8::ANY), 0..6),
            lens in proptest::collection::vec(0usize..200, 6),
        ) {
            let mut f: Vec<Vec<u8>> =
                (0..n).map(|i| frame(1000 + 100 * i as u32, 100, ACK_, i as u16, 0)).collect();
            for &(which, at, v) in &cuts {
                let x = &mut f[which % n];
                if at < x.len() {
                    x[at] = v;
                }
            }
            for (x, &l) in f.iter_mut().zip(&lens) {
                if l < 30 {
                    x.truncate(l);
                }
            }
            let r = runs(&f);
            let k = r.n;
            proptest::prop_assert!((1..=n).contains(&k));
            if k > 1 {
                let hl = header_len(&f[0]);
                let mut hdr = [0u8; MAX_HDR];
                let (h, v) = merged_header(&f[0], &r, &mut hdr);
                let mut m = hdr[..h].to_vec();
                for x in &f[..k] {
                    m.extend_from_slice(&x[hl..]);
                }
                proptest::prop_assert!(complete_checksum(&mut m, &v));
                let t = TcpPacket::new_checked(&m[TCP..]).unwrap();
                let ip = crate::wire::ipv4::Ipv4Packet::new_checked(&m[ETH..]).unwrap();
                proptest::prop_assert!(t.verify_checksum(ip.src(), ip.dst()));
            }
        }
    }

    #[test]
    fn a_gso_frame_is_cut_back_into_the_segments_it_was_made_of() {
        let cwr_psh = TcpFlags(TcpFlags::ACK.0 | TcpFlags::PSH.0 | 0x80);
        let f = [
            frame(5000, 100, ACK_, 9, 0),
            frame(5100, 100, ACK_, 10, 100),
            frame(5200, 60, ack_psh(), 11, 200),
        ];
        let mut hdr = [0u8; MAX_HDR];
        let (hl, v) = merged_header(&f[0], &runs(&f), &mut hdr);
        let mut m = hdr[..hl].to_vec();
        for x in &f {
            m.extend_from_slice(&x[hl..]);
        }
        // CWR on the frame: only the first segment keeps it.
        m[TCP_FLAGS] = cwr_psh.0;
        let mut c = Cutter::new(&m, &v, 2048).expect("a TCPv4 GSO frame");
        assert_eq!(c.remaining(), 3);
        let mut out = [0u8; 2048];
        for (j, want) in f.iter().enumerate() {
            let n = c.next_segment(&m, &mut out).expect("a segment");
            let got = &out[..n];
            let ip = crate::wire::ipv4::Ipv4Packet::new_checked(&got[ETH..]).unwrap();
            assert!(ip.verify_checksum());
            assert_eq!(ip.ident(), 9 + j as u16);
            let t = TcpPacket::new_checked(&got[TCP..]).unwrap();
            assert!(t.verify_checksum(A, B), "segment {j}");
            let w = TcpPacket::new_checked(&want[TCP..]).unwrap();
            assert_eq!(t.seq_number(), w.seq_number());
            assert_eq!(t.payload(), w.payload());
            let cwr = if j == 0 { 0x80 } else { 0 };
            assert_eq!(t.flags().0, w.flags().0 | cwr, "segment {j}");
        }
        assert_eq!(c.next_segment(&m, &mut out), None);
        // Not GSO, not TCP/IPv4, or segments that would not fit: refused.
        assert!(Cutter::new(&m, &VnetHdr::PLAIN, 2048).is_none());
        assert!(Cutter::new(&m, &v, hl + 99).is_none());
        assert!(Cutter::new(&m[..40], &v, 2048).is_none());
        let mut udp = m.clone();
        udp[ETH + 9] = 17;
        assert!(Cutter::new(&udp, &v, 2048).is_none());
    }

    #[test]
    fn vnet_header_round_trips_and_bad_offsets_are_refused() {
        let v = VnetHdr {
            flags: 1,
            gso_type: 1,
            hdr_len: 66,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        };
        assert_eq!(VnetHdr::from_bytes(&v.to_bytes()), v);
        assert!(VnetHdr::PLAIN.is_plain_frame() && !VnetHdr::PLAIN.needs_csum());
        let mut f = frame(1, 10, ACK_, 1, 0);
        let before = f.clone();
        let bad = VnetHdr {
            csum_start: 60,
            csum_offset: 16,
            ..v
        };
        assert!(!complete_checksum(&mut f, &bad));
        assert_eq!(f, before);
    }
}
