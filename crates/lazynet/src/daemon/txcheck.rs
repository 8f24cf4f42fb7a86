//! The check of every frame an attached application asks the daemon to
//! send: the trust boundary on the way out (DESIGN §6.1).
//!
//! **Owns:** the rules, each a typed refusal counted per application
//! ([`AppCounter`]), and the table of each application's fragmented
//! datagrams in flight with the identification the daemon gave them.
//!
//! The frame checked is the daemon's own copy, in a NIC buffer: the
//! application cannot change it after the check. Everything is read
//! through the `wire` views. An application may send:
//!
//! * ARP as the daemon (its MAC and address as the sender), requests and
//!   replies;
//! * TCP and UDP from our address and a port it may use (its ephemeral
//!   range or a port it holds: [`Ports::app_may_use`]);
//! * ICMP errors (destination unreachable, time exceeded, parameter
//!   problem) about a datagram of one of its own flows — the quoted header
//!   must name our address as destination and one of its ports, and the
//!   error must go back to the quoted source — so it cannot speak for
//!   another's connections ("fragmentation needed" or "port unreachable"
//!   about them). Nothing else of ICMP: the daemon's stack answers echo
//!   requests for the address.
//! * Fragments: the first one (offset 0) carries the ports and is checked
//!   as above; its datagram gets an identification of the daemon's (the
//!   IPv4 header checksum redone), recorded with the application's own
//!   identification and destination, and its later fragments pass only
//!   with a recorded key, rewritten the same way. Because all applications
//!   share one source address, a receiver reassembles by identification
//!   alone: with the daemon choosing it, no application can poison
//!   another's fragmented datagrams. The application's stack sends the
//!   first fragment first (lazynet's does); a later fragment sent before
//!   it, or after [`FRAG_SLOTS`] newer datagrams, is refused.
//!
//! **May not touch:** anything but the frame and the table.

use std::net::Ipv4Addr;

use super::ports::Ports;
use crate::mem::area::AppCounter;
use crate::wire::arp::{ArpOperation, ArpPacket};
use crate::wire::ethernet::{
    EthernetFrame, ETHERTYPE_ARP, ETHERTYPE_IPV4, HEADER_LEN as ETH_HEADER_LEN,
};
use crate::wire::icmp::{IcmpPacket, TYPE_DEST_UNREACHABLE, TYPE_TIME_EXCEEDED};
use crate::wire::ipv4::{Ipv4Packet, PROTO_ICMP, PROTO_TCP, PROTO_UDP};

/// ICMP type 12 (RFC 792): parameter problem.
const TYPE_PARAMETER_PROBLEM: u8 = 12;

/// Fragmented datagrams remembered per application (the newest).
pub(super) const FRAG_SLOTS: usize = 16;

/// One fragmented datagram an application is sending.
#[derive(Clone, Copy, Debug)]
struct Frag {
    used: bool,
    app_ident: u16,
    dst: Ipv4Addr,
    proto: u8,
    ident: u16,
}

/// An application's fragmented datagrams in flight (a ring: the oldest is
/// overwritten).
#[derive(Debug)]
pub(super) struct Frags {
    slots: [Frag; FRAG_SLOTS],
    next: usize,
}

impl Default for Frags {
    fn default() -> Self {
        Frags {
            slots: [Frag {
                used: false,
                app_ident: 0,
                dst: Ipv4Addr::UNSPECIFIED,
                proto: 0,
                ident: 0,
            }; FRAG_SLOTS],
            next: 0,
        }
    }
}

impl Frags {
    fn find(&self, app_ident: u16, dst: Ipv4Addr, proto: u8) -> Option<u16> {
        self.slots
            .iter()
            .find(|f| f.used && f.app_ident == app_ident && f.dst == dst && f.proto == proto)
            .map(|f| f.ident)
    }

    /// Records the daemon's `ident` for the datagram `app_ident` to `dst`.
    pub(super) fn insert(&mut self, app_ident: u16, dst: Ipv4Addr, proto: u8, ident: u16) {
        // A first fragment sent again (a retransmitted datagram) keeps its
        // slot.
        let at = self
            .slots
            .iter()
            .position(|f| f.used && f.app_ident == app_ident && f.dst == dst && f.proto == proto)
            .unwrap_or_else(|| {
                let i = self.next;
                self.next = (i + 1) % FRAG_SLOTS;
                i
            });
        self.slots[at] = Frag {
            used: true,
            app_ident,
            dst,
            proto,
            ident,
        };
    }
}

/// Who is asking, and what the daemon knows of it.
pub(super) struct Sender<'a> {
    /// Its index in the daemon's table.
    pub k: u16,
    pub ports: &'a Ports,
    pub frags: &'a Frags,
}

/// The daemon's identity.
#[derive(Clone, Copy)]
pub(super) struct Us {
    pub mac: [u8; 6],
    pub addr: Ipv4Addr,
}

/// A frame that passed, and what becomes of its IPv4 identification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pass {
    /// Sent as it is.
    AsIs,
    /// A later fragment: its identification becomes this one.
    Ident(u16),
    /// The first fragment of a datagram: it needs an identification of
    /// the daemon's ([`Frags::insert`] records it, [`set_ident`] writes it).
    First {
        app_ident: u16,
        dst: Ipv4Addr,
        proto: u8,
    },
}

/// Checks frame `f` (see the module docs). `Err` names the counter of the
/// refusal.
pub(super) fn check(f: &[u8], us: Us, who: Sender<'_>) -> Result<Pass, AppCounter> {
    let eth = EthernetFrame::new_checked(f).map_err(|_| AppCounter::TxSpoofed)?;
    if eth.src().0 != us.mac {
        return Err(AppCounter::TxSpoofed);
    }
    match eth.ethertype() {
        ETHERTYPE_ARP => {
            let arp = ArpPacket::new_checked(eth.payload()).map_err(|_| AppCounter::TxSpoofed)?;
            let op_ok = matches!(arp.operation(), ArpOperation::Request | ArpOperation::Reply);
            if op_ok && arp.sender_hw().0 == us.mac && arp.sender_ip() == us.addr {
                Ok(Pass::AsIs)
            } else {
                Err(AppCounter::TxSpoofed)
            }
        }
        ETHERTYPE_IPV4 => ipv4(eth.payload(), us, who),
        _ => Err(AppCounter::TxSpoofed),
    }
}

fn ipv4(b: &[u8], us: Us, who: Sender<'_>) -> Result<Pass, AppCounter> {
    let ip = Ipv4Packet::new_checked(b).map_err(|_| AppCounter::TxSpoofed)?;
    if ip.src() != us.addr {
        return Err(AppCounter::TxSpoofed);
    }
    let (proto, dst, app_ident) = (ip.protocol(), ip.dst(), ip.ident());
    if ip.frag_offset() != 0 {
        // A later fragment: of a datagram whose first fragment passed.
        return who
            .frags
            .find(app_ident, dst, proto)
            .map(Pass::Ident)
            .ok_or(AppCounter::TxBadFragment);
    }
    match proto {
        PROTO_TCP | PROTO_UDP => {
            let l4 = ip.payload();
            if l4.len() < 4 {
                return Err(AppCounter::TxSpoofed);
            }
            let port = u16::from_be_bytes([l4[0], l4[1]]);
            if !who.ports.app_may_use(who.k, proto == PROTO_TCP, port) {
                return Err(AppCounter::TxBadPort);
            }
        }
        PROTO_ICMP => icmp_error_about_own_flow(ip.payload(), dst, us, &who)?,
        _ => return Err(AppCounter::TxSpoofed),
    }
    Ok(if ip.more_frags() {
        Pass::First {
            app_ident,
            dst,
            proto,
        }
    } else {
        Pass::AsIs
    })
}

/// An ICMP error (RFC 792) going back to `dst` about a datagram `dst` sent
/// us on one of the application's ports.
fn icmp_error_about_own_flow(
    icmp: &[u8],
    dst: Ipv4Addr,
    us: Us,
    who: &Sender<'_>,
) -> Result<(), AppCounter> {
    let m = IcmpPacket::new_checked(icmp).map_err(|_| AppCounter::TxBadIcmp)?;
    if !matches!(
        m.msg_type(),
        TYPE_DEST_UNREACHABLE | TYPE_TIME_EXCEEDED | TYPE_PARAMETER_PROBLEM
    ) {
        return Err(AppCounter::TxBadIcmp);
    }
    // The quoted header and at least the ports after it (RFC 792: the
    // header plus 64 bits of data).
    let q = Ipv4Packet::new_quoted(m.data()).map_err(|_| AppCounter::TxBadIcmp)?;
    let l4 = q.payload();
    let own = q.dst() == us.addr
        && q.src() == dst
        && matches!(q.protocol(), PROTO_TCP | PROTO_UDP)
        && l4.len() >= 4
        && who.ports.app_may_use(
            who.k,
            q.protocol() == PROTO_TCP,
            u16::from_be_bytes([l4[2], l4[3]]),
        );
    if own {
        Ok(())
    } else {
        Err(AppCounter::TxBadIcmp)
    }
}

/// Writes `ident` into the IPv4 header of frame `f` (checked before) and
/// redoes the header checksum.
pub(super) fn set_ident(f: &mut [u8], ident: u16) {
    if let Ok(mut p) = Ipv4Packet::new_checked(&mut f[ETH_HEADER_LEN..]) {
        p.set_ident(ident);
        p.fill_checksum();
    }
}
