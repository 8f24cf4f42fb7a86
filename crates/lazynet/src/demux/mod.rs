//! Early demultiplexing: the classifier and its bounded channels.
//!
//! **Owns:** the channel table (which socket a frame is for), the per-channel
//! bounded queues of descriptors, and the counters of everything it dropped.
//!
//! **May not touch:** protocol state, clocks, the NIC, the allocator on the
//! per-frame path. [`Classifier::deliver`] neither allocates, blocks nor uses
//! timers, so it can run on a separate "NI" core (LRP §3.2). It reads only the
//! fixed header fields it needs to pick a channel and validates nothing else:
//! header checksums, UDP lengths and payload checksums are verified lazily by
//! the receiver (LRP §3.3), so a flood of bad packets costs one classification
//! each and lands in a bounded channel — never protocol work.
//!
//! Channels:
//! * [`CONTROL`] — ARP for our address, ICMP to us, UDP to a port nobody has
//!   bound (so the stack can answer with a rate-limited port unreachable);
//! * [`FRAGMENT`] — IPv4 fragments, which cannot be classified by port since
//!   only the first carries the transport header;
//! * one channel per bound UDP socket, found by (local address, local port)
//!   with a hash lookup, then (wildcard address, port): two probes at most,
//!   whatever the number of sockets;
//! * one channel per TCP connection, found by its 4-tuple, then one per TCP
//!   listener by (address, port) and (wildcard, port): three probes at most.
//!   TCP to no connection and no listener goes to [`CONTROL`] (the stack
//!   answers with a RST, RFC 9293 §3.10.7.1).
//!
//! TCP channels are *notifying*: the first frame queued on an empty one
//! puts its id on a ready list ([`Classifier::take_ready`]), so whoever runs
//! TCP processing visits only the connections that have input — O(active),
//! not O(connections). Each channel is on the list at most once, and the
//! list's capacity is reserved at bind time, so delivery never allocates.
//!
//! Every channel is a fixed-capacity ring allocated at bind time; a full
//! channel drops the frame right here (early discard) and counts it.
//!
//! The three tables (UDP, TCP connections, TCP listeners) hash with a keyed
//! hash (one folded multiply, [`Classifier::set_hash_key`]; the stack keys
//! it from its secret at start-up): a peer cannot choose 4-tuples that
//! collide and lengthen every lookup. Measured with `benches/classifier.rs`
//! against the FxHash used before (2026-11-21, 2-core VM, noisy): TCP
//! frames over 10 and 10,000 connections 11.3 → 10.8 and 12.3 → 12.5 ns
//! per frame (one multiply instead of four); UDP "hot" 8.8 → 9.4 ns, UDP
//! "spread" +0.1–0.2 ns.
//!
//! Before the 4-tuple table, `classify` compares the tuple with the last
//! connection it found (a memo holding only what the table holds, cleared
//! when a connection is unbound): a flow's segments come in runs. The
//! same bench's `tcp_hot` (one connection's run) and `tcp_spread` (every
//! frame misses the memo) cases measure both; a miss costs nothing beyond
//! noise (docs/PERFORMANCE.md). Per bulk segment, callgrind counts
//! 150 → 107 instructions in `classify` with the memo.
//!
//! **Across threads (`ni-lrp`).** A channel may carry a [`Link`]: on the NI's
//! classifier an *outbound* link makes every frame go onto an SPSC ring
//! whose consumer is the host's channel of the same socket (a full ring is
//! the full channel: `ChannelFull`, counted on the NI); on the host's
//! classifier the *inbound* link is that consumer, read by
//! [`Channel::pop`] after the channel's own (local) slots, which still take
//! what the host itself queues (reassembled datagrams, redirected TCP
//! segments). Notification crosses with a ready ring of channel ids and a
//! per-channel [`ReadyFlag`] (see [`crate::mem::notify`]); the host folds
//! it into its ready list in [`Classifier::take_ready`]. Without links
//! (the other modes) nothing changes: one never-taken branch per push, and
//! one when a channel is empty.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::net::{Ipv4Addr, SocketAddrV4};

use crate::keyhash::{folded_multiply, mix};
use crate::mem::{Consumer, Desc, FlagRef, Producer, ReadyFlag};

/// Identifies a channel in a [`Classifier`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChannelId(pub u32);

/// ARP, ICMP and UDP to unbound ports.
pub const CONTROL: ChannelId = ChannelId(0);
/// IPv4 fragments.
pub const FRAGMENT: ChannelId = ChannelId(1);

/// Why the classifier dropped a frame. Small and `Copy`: no allocation on a
/// drop path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DropReason {
    /// Shorter than the headers needed to classify it.
    Truncated = 0,
    /// Ethernet destination is neither us nor broadcast.
    NotOurMac,
    /// Ethertype other than IPv4 or ARP.
    UnknownEthertype,
    /// ARP that is malformed or not asking about our address.
    ArpNotForUs,
    /// IPv4 version, header length or total length inconsistent.
    BadIpHeader,
    /// IPv4 destination is not ours (we do not forward).
    NotOurIp,
    /// ICMP sent to a broadcast address (smurf amplification guard).
    BroadcastIcmp,
    /// UDP to a broadcast address and a port nobody bound.
    BroadcastNoSocket,
    /// TCP to a broadcast address.
    BroadcastTcp,
    /// IP protocol we do not speak.
    UnknownProtocol,
    /// The destination channel was full: early discard.
    ChannelFull,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 11] = [
        DropReason::Truncated,
        DropReason::NotOurMac,
        DropReason::UnknownEthertype,
        DropReason::ArpNotForUs,
        DropReason::BadIpHeader,
        DropReason::NotOurIp,
        DropReason::BroadcastIcmp,
        DropReason::BroadcastNoSocket,
        DropReason::BroadcastTcp,
        DropReason::UnknownProtocol,
        DropReason::ChannelFull,
    ];

    /// A short stable name for counters.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::NotOurMac => "not_our_mac",
            DropReason::UnknownEthertype => "unknown_ethertype",
            DropReason::ArpNotForUs => "arp_not_for_us",
            DropReason::BadIpHeader => "bad_ip_header",
            DropReason::NotOurIp => "not_our_ip",
            DropReason::BroadcastIcmp => "broadcast_icmp",
            DropReason::BroadcastNoSocket => "broadcast_no_socket",
            DropReason::BroadcastTcp => "broadcast_tcp",
            DropReason::UnknownProtocol => "unknown_protocol",
            DropReason::ChannelFull => "channel_full",
        }
    }
}

/// Counters of the classifier.
#[derive(Clone, Debug, Default)]
pub struct DemuxStats {
    /// Frames offered to [`Classifier::deliver`].
    pub frames: u64,
    /// Frames placed on a channel.
    pub enqueued: u64,
    /// Drops by reason, indexed by `DropReason as usize`.
    pub drops: [u64; DropReason::ALL.len()],
}

impl DemuxStats {
    /// Total frames dropped for any reason.
    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Drops for one reason.
    pub fn drops_for(&self, r: DropReason) -> u64 {
        self.drops[r as usize]
    }
}

/// The cross-thread part of a channel (`ni-lrp`; see the module docs).
#[derive(Debug)]
pub enum Link {
    /// Host side: frames the NI queued, taken after the local slots.
    Inbound {
        /// Consumer of the NI's ring for this channel.
        ring: Consumer<Desc>,
        /// Armed while the channel's id is on the ready ring.
        flag: FlagRef,
    },
    /// NI side: every frame goes onto the host's ring.
    Outbound {
        /// Producer of the host channel's inbound ring.
        ring: Producer<Desc>,
        /// The host channel's flag (notifying channels).
        flag: FlagRef,
        /// The host's id of the channel, which is what goes on the ready ring.
        host_id: u32,
    },
}

/// A bounded FIFO of descriptors. Capacity is fixed at creation; nothing
/// allocates afterwards.
#[derive(Debug)]
pub struct Channel {
    slots: Box<[Desc]>,
    head: u32,
    len: u32,
    /// Frames enqueued over the channel's life.
    pub enqueued: u64,
    /// Frames dropped because the channel was full.
    pub dropped_full: u64,
    /// Put the channel on the ready list when it becomes non-empty.
    notify: bool,
    /// On the ready list now.
    in_ready: bool,
    /// `ni-lrp` only: the ring to or from the other thread.
    link: Option<Box<Link>>,
}

impl Channel {
    fn new(cap: usize) -> Self {
        let cap = cap.clamp(1, 1 << 20);
        Channel {
            slots: vec![Desc::default(); cap].into_boxed_slice(),
            head: 0,
            len: 0,
            enqueued: 0,
            dropped_full: 0,
            notify: false,
            in_ready: false,
            link: None,
        }
    }

    /// Capacity in frames (of the local slots; an inbound ring adds its own).
    #[inline]
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Frames waiting (local slots and inbound ring).
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize + self.inbound_len()
    }

    /// True if nothing waits.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Frames waiting on the inbound ring (0 without one). They are all NIC
    /// buffers (the NI queues nothing else).
    #[inline]
    pub fn inbound_len(&self) -> usize {
        match self.link.as_deref() {
            Some(Link::Inbound { ring, .. }) => ring.peek_len(),
            _ => 0,
        }
    }

    #[inline]
    fn push(&mut self, d: Desc) -> bool {
        if let Some(Link::Outbound { ring, .. }) = self.link.as_deref_mut() {
            // The NI side: the host's ring is the channel.
            return if ring.push_one(d).is_ok() {
                self.enqueued += 1;
                true
            } else {
                self.dropped_full += 1;
                false
            };
        }
        let cap = self.slots.len() as u32;
        if self.len == cap {
            self.dropped_full += 1;
            return false;
        }
        let mut i = self.head + self.len;
        if i >= cap {
            i -= cap;
        }
        self.slots[i as usize] = d;
        self.len += 1;
        self.enqueued += 1;
        true
    }

    /// The `k`-th oldest descriptor in the local slots, if there is one.
    #[inline]
    pub fn peek(&self, k: usize) -> Option<Desc> {
        if k >= self.len as usize {
            return None;
        }
        let mut i = self.head as usize + k;
        if i >= self.slots.len() {
            i -= self.slots.len();
        }
        Some(self.slots[i])
    }

    /// Removes the oldest frame: local slots first, then the inbound ring.
    #[inline]
    pub fn pop(&mut self) -> Option<Desc> {
        if self.len == 0 {
            return match self.link.as_deref_mut() {
                Some(Link::Inbound { ring, .. }) => ring.pop_one(),
                _ => None,
            };
        }
        let d = self.slots[self.head as usize];
        self.head += 1;
        if self.head as usize == self.slots.len() {
            self.head = 0;
        }
        self.len -= 1;
        Some(d)
    }

    /// The descriptors queued in the local slots, oldest first (not those
    /// on an inbound ring: see [`Channel::inbound_len`]).
    pub fn iter(&self) -> impl Iterator<Item = Desc> + '_ {
        let cap = self.slots.len();
        (0..self.len as usize).map(move |i| self.slots[(self.head as usize + i) % cap])
    }
}

/// Errors of the control-path (bind/unbind) operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindError {
    /// Another socket has this (address, port), or a wildcard overlaps.
    AddrInUse,
    /// No such channel.
    NoChannel,
}

/// The keyed hash of the channel tables: one folded multiply (the 128-bit
/// product's halves XORed, as foldhash and `proto::tcp::tuple_index`) of
/// the key XOR a secret word by a secret multiplier, or, for a 4-tuple (a
/// `u128`), of its two halves each XOR a secret word. The stack keys it
/// from its secret ([`Classifier::set_hash_key`]), so a peer cannot
/// compute 4-tuples that collide in the connection table and make every
/// lookup (misses included: any frame it sends) walk a long probe
/// sequence, as it could with the FxHash used before. Cost as in
/// `tuple_index` (about FxHash's: one multiply where FxHash did four for
/// the old 4-field key).
#[derive(Clone, Copy)]
struct KeyedState {
    k0: u64,
    k1: u64,
}

impl KeyedState {
    /// The key of a classifier the stack has not keyed (tests, benches):
    /// fixed, so no protection against chosen collisions.
    const DEFAULT: KeyedState = KeyedState {
        k0: 0x243F_6A88_85A3_08D3,
        k1: 0x9E37_79B9_7F4A_7C15,
    };
}

impl core::fmt::Debug for KeyedState {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("KeyedState(..)")
    }
}

impl BuildHasher for KeyedState {
    type Hasher = KeyedHasher;
    #[inline(always)]
    fn build_hasher(&self) -> KeyedHasher {
        KeyedHasher {
            h: self.k0,
            k: self.k1,
        }
    }
}

struct KeyedHasher {
    h: u64,
    k: u64,
}

impl Hasher for KeyedHasher {
    #[inline(always)]
    fn write_u64(&mut self, x: u64) {
        self.h = folded_multiply(self.h ^ x, self.k);
    }
    #[inline(always)]
    fn write_u128(&mut self, x: u128) {
        // foldhash's 16-byte step: both halves whitened, then multiplied.
        self.h = folded_multiply(self.h ^ x as u64, self.k ^ (x >> 64) as u64);
    }
    #[inline(always)]
    fn write_u32(&mut self, x: u32) {
        self.write_u64(u64::from(x));
    }
    #[inline(always)]
    fn write_u16(&mut self, x: u16) {
        self.write_u64(u64::from(x));
    }
    #[inline(always)]
    fn write_u8(&mut self, x: u8) {
        self.write_u64(u64::from(x));
    }
    #[inline(always)]
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
    fn write(&mut self, bytes: &[u8]) {
        // Not used by our keys (integers only); complete for the trait.
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        self.write_usize(bytes.len());
    }
    #[inline(always)]
    fn finish(&self) -> u64 {
        self.h
    }
}

type KeyedMap<K, V> = HashMap<K, V, KeyedState>;

/// A TCP connection's key: [`key`] of the local address and port in the
/// high half, of the remote ones in the low half (one multiply).
type TcpKey = u128;

#[inline(always)]
fn tcp_key(local: SocketAddrV4, remote: SocketAddrV4) -> TcpKey {
    tcp_key_raw(
        u32::from(*local.ip()),
        local.port(),
        u32::from(*remote.ip()),
        remote.port(),
    )
}

#[inline(always)]
fn tcp_key_raw(laddr: u32, lport: u16, raddr: u32, rport: u16) -> TcpKey {
    (u128::from(key(laddr, lport)) << 64) | u128::from(key(raddr, rport))
}

#[inline]
fn key(addr: u32, port: u16) -> u64 {
    ((addr as u64) << 16) | port as u64
}

/// True if (`addr`, `port`) overlaps a binding in `map`: the same pair,
/// the wildcard on that port, or — for the wildcard — our address `ours`.
fn port_bound(map: &KeyedMap<u64, u32>, ours: u32, addr: Ipv4Addr, port: u16) -> bool {
    let a = u32::from(addr);
    map.contains_key(&key(a, port))
        || map.contains_key(&key(0, port))
        || (a == 0 && map.contains_key(&key(ours, port)))
}

/// The early-demultiplexing classifier.
#[derive(Debug)]
pub struct Classifier {
    mac: [u8; 6],
    addr: u32,
    /// Every local address, `addrs[0] == addr`; a multi-homed host has more.
    addrs: [u32; MAX_ADDRS],
    naddrs: usize,
    bcast: u32,
    udp: KeyedMap<u64, u32>,
    tcp: KeyedMap<TcpKey, u32>,
    /// The last connection `classify` found in `tcp` (4-tuple key,
    /// channel): a bulk or request/response flow's frames come in runs, and
    /// a compare costs less than hashing and probing. Holds only what `tcp`
    /// holds: cleared when a connection is unbound (bindings never move to
    /// another channel; rehashing keeps them).
    last_tcp: Cell<Option<(TcpKey, u32)>>,
    tcp_listen: KeyedMap<u64, u32>,
    channels: Vec<Option<Channel>>,
    ready: Vec<u32>,
    free: Vec<u32>,
    stats: DemuxStats,
    /// `ni-lrp` host: ids of channels the NI queued on (see [`Link`]).
    ready_in: Option<Consumer<u32>>,
    /// Links of freed channels, for the owner to retire.
    detached: Vec<(ChannelId, Link)>,
}

/// Where a frame goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Onto this channel.
    Channel(ChannelId),
    /// Dropped for this reason.
    Drop(DropReason),
}

const ETH_LEN: usize = 14;
/// Local addresses a classifier can hold.
pub const MAX_ADDRS: usize = 8;

#[inline(always)]
fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

#[inline(always)]
fn be32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 4)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

impl Classifier {
    /// A classifier for interface `mac` with address `addr/prefix_len`.
    /// `control_cap` and `fragment_cap` bound the two special channels.
    /// Its tables hash with a fixed key until [`Classifier::set_hash_key`].
    pub fn new(
        mac: [u8; 6],
        addr: Ipv4Addr,
        prefix_len: u8,
        control_cap: usize,
        fragment_cap: usize,
    ) -> Self {
        let a = u32::from(addr);
        let host_mask = if prefix_len >= 32 {
            0
        } else {
            u32::MAX >> prefix_len
        };
        let mut addrs = [0; MAX_ADDRS];
        addrs[0] = a;
        Classifier {
            mac,
            addr: a,
            addrs,
            naddrs: 1,
            bcast: a | host_mask,
            udp: KeyedMap::with_hasher(KeyedState::DEFAULT),
            tcp: KeyedMap::with_hasher(KeyedState::DEFAULT),
            last_tcp: Cell::new(None),
            tcp_listen: KeyedMap::with_hasher(KeyedState::DEFAULT),
            ready: Vec::new(),
            channels: vec![
                Some(Channel::new(control_cap)),
                Some(Channel::new(fragment_cap)),
            ],
            free: Vec::new(),
            stats: DemuxStats::default(),
            ready_in: None,
            detached: Vec::new(),
        }
    }

    /// Keys the hash of the channel tables (the stack does, once, from its
    /// secret; until then a fixed key). Rehashes what is bound: O(entries),
    /// control path.
    pub fn set_hash_key(&mut self, key: [u64; 2]) {
        let st = KeyedState {
            k0: mix(key[0]),
            // Odd and large: the multiplier never loses the high bits.
            k1: mix(key[1] ^ 0x5851_F42D_4C95_7F2D) | (1 << 63) | 1,
        };
        fn rekey<K: std::hash::Hash + Eq, V>(m: &mut KeyedMap<K, V>, st: KeyedState) {
            let mut n = KeyedMap::with_capacity_and_hasher(m.capacity(), st);
            n.extend(m.drain());
            *m = n;
        }
        rekey(&mut self.udp, st);
        rekey(&mut self.tcp, st);
        rekey(&mut self.tcp_listen, st);
    }

    /// Gives channel `id` a [`Link`] (control path). False if there is no
    /// such channel; the link is dropped then.
    pub fn attach_link(&mut self, id: ChannelId, link: Link) -> bool {
        match self.channel_mut(id) {
            Some(ch) => {
                ch.link = Some(Box::new(link));
                true
            }
            None => false,
        }
    }

    /// Makes channel `c` notifying (or not): it goes on the ready list
    /// when it becomes non-empty. False if there is no such channel.
    pub(crate) fn set_notify(&mut self, c: ChannelId, on: bool) -> bool {
        match self.channel_mut(c) {
            Some(ch) => {
                ch.notify = on;
                true
            }
            None => false,
        }
    }

    /// Host side of `ni-lrp`: the ring of ids of channels the NI queued on.
    pub fn set_ready_inbound(&mut self, ring: Consumer<u32>) {
        self.ready_in = Some(ring);
    }

    /// Host side of `ni-lrp`: a probe of the ready ring (see
    /// [`crate::mem::RingProbe`]), if there is one.
    pub fn ready_probe(&self) -> Option<crate::mem::RingProbe> {
        self.ready_in.as_ref().map(Consumer::probe)
    }

    /// Host side of `ni-lrp`: a probe of channel `c`'s inbound ring, if it
    /// has one.
    pub fn channel_probe(&self, c: ChannelId) -> Option<crate::mem::RingProbe> {
        match self.channel(c)?.link.as_deref()? {
            Link::Inbound { ring, .. } => Some(ring.probe()),
            Link::Outbound { .. } => None,
        }
    }

    /// Moves the links of channels freed since the last call to `out` (the
    /// host must retire an inbound ring only once the NI has stopped
    /// using it).
    pub fn take_detached(&mut self, out: &mut Vec<(ChannelId, Link)>) {
        out.append(&mut self.detached);
    }

    /// NI side: the flag and host id to notify for channel `id`, if it has
    /// an outbound link.
    pub fn notify_target(&self, id: u32) -> Option<(&ReadyFlag, u32)> {
        match self.channels.get(id as usize)?.as_ref()?.link.as_deref()? {
            Link::Outbound { flag, host_id, .. } => Some((flag, *host_id)),
            Link::Inbound { .. } => None,
        }
    }

    /// Our IPv4 address.
    pub fn addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.addr)
    }

    /// Adds a secondary local address (a multi-homed host). Returns false if
    /// [`MAX_ADDRS`] are in use already.
    pub fn add_addr(&mut self, addr: Ipv4Addr) -> bool {
        let a = u32::from(addr);
        if self.local(a) {
            return true;
        }
        if self.naddrs == MAX_ADDRS {
            return false;
        }
        self.addrs[self.naddrs] = a;
        self.naddrs += 1;
        true
    }

    /// True if `a` is one of our addresses.
    #[inline(always)]
    fn local(&self, a: u32) -> bool {
        self.addrs[..self.naddrs].contains(&a)
    }

    /// The channel bound to UDP (`a`, `port`), else to (any, `port`).
    #[inline(always)]
    fn udp_channel(&self, a: u32, port: u16) -> Option<ChannelId> {
        self.udp
            .get(&key(a, port))
            .or_else(|| self.udp.get(&key(0, port)))
            .map(|&c| ChannelId(c))
    }

    /// Counters.
    pub fn stats(&self) -> &DemuxStats {
        &self.stats
    }

    /// The channel `id`, if it exists.
    pub fn channel(&self, id: ChannelId) -> Option<&Channel> {
        self.channels.get(id.0 as usize)?.as_ref()
    }

    /// The channel `id` for consuming, if it exists.
    pub fn channel_mut(&mut self, id: ChannelId) -> Option<&mut Channel> {
        self.channels.get_mut(id.0 as usize)?.as_mut()
    }

    /// Number of channel slots (ids `0..channel_slots()`; freed ones are
    /// empty).
    pub fn channel_slots(&self) -> usize {
        self.channels.len()
    }

    /// Every existing channel.
    pub fn channels(&self) -> impl Iterator<Item = &Channel> + '_ {
        self.channels.iter().flatten()
    }

    /// Number of bound sockets (UDP sockets, TCP listeners and
    /// connections).
    pub fn sockets(&self) -> usize {
        self.udp.len() + self.tcp.len() + self.tcp_listen.len()
    }

    /// True if UDP `port` is bound on `addr` or on the wildcard address
    /// (or, for the wildcard, on any address).
    pub fn udp_port_used(&self, addr: Ipv4Addr, port: u16) -> bool {
        port_bound(&self.udp, self.addr, addr, port)
    }

    /// Frames queued on channel `c` (0 if it does not exist).
    #[inline]
    pub fn queued(&self, c: ChannelId) -> usize {
        self.channel(c).map_or(0, |ch| ch.len())
    }

    /// Binds UDP (`addr`, `port`) to a new channel of `cap` frames.
    /// `addr` may be `0.0.0.0` (any of our addresses). Control path: allocates.
    pub fn bind_udp(
        &mut self,
        addr: Ipv4Addr,
        port: u16,
        cap: usize,
    ) -> Result<ChannelId, BindError> {
        if self.udp_port_used(addr, port) {
            return Err(BindError::AddrInUse);
        }
        let id = self.new_channel(cap, false);
        self.udp.insert(key(u32::from(addr), port), id);
        Ok(ChannelId(id))
    }

    /// Allocates a channel (control path).
    fn new_channel(&mut self, cap: usize, notify: bool) -> u32 {
        let mut ch = Channel::new(cap);
        ch.notify = notify;
        let id = match self.free.pop() {
            Some(i) => {
                self.channels[i as usize] = Some(ch);
                i
            }
            None => {
                self.channels.push(Some(ch));
                (self.channels.len() - 1) as u32
            }
        };
        // Every channel fits on the ready list at once: no allocation when
        // one is put there.
        if self.ready.capacity() < self.channels.len() {
            self.ready.reserve(self.channels.len() - self.ready.len());
        }
        id
    }

    /// Frees channel `id`, writing its queued frames to `leftover`.
    fn free_channel(&mut self, id: u32, leftover: &mut Vec<Desc>) {
        if let Some(mut ch) = self.channels[id as usize].take() {
            while let Some(d) = ch.pop() {
                leftover.push(d);
            }
            if ch.in_ready {
                self.ready.retain(|&r| r != id);
            }
            if let Some(l) = ch.link.take() {
                self.detached.push((ChannelId(id), *l));
            }
        }
        self.free.push(id);
    }

    /// Removes the binding of (`addr`, `port`) and its channel; the frames
    /// still queued are written to `leftover` so the caller can release them.
    pub fn unbind_udp(
        &mut self,
        addr: Ipv4Addr,
        port: u16,
        leftover: &mut Vec<Desc>,
    ) -> Result<(), BindError> {
        let id = self
            .udp
            .remove(&key(u32::from(addr), port))
            .ok_or(BindError::NoChannel)?;
        self.free_channel(id, leftover);
        Ok(())
    }

    /// True if TCP `port` has a listener on `addr` or on the wildcard
    /// address (or, for the wildcard, on our address).
    pub fn tcp_listen_used(&self, addr: Ipv4Addr, port: u16) -> bool {
        port_bound(&self.tcp_listen, self.addr, addr, port)
    }

    /// True if a TCP connection `local`–`remote` has a channel.
    pub fn tcp_conn_used(&self, local: SocketAddrV4, remote: SocketAddrV4) -> bool {
        self.tcp.contains_key(&tcp_key(local, remote))
    }

    /// Binds a TCP listener on (`addr`, `port`) to a new notifying channel of
    /// `cap` frames. Control path: allocates.
    pub fn bind_tcp_listen(
        &mut self,
        addr: Ipv4Addr,
        port: u16,
        cap: usize,
    ) -> Result<ChannelId, BindError> {
        if self.tcp_listen_used(addr, port) {
            return Err(BindError::AddrInUse);
        }
        let id = self.new_channel(cap, true);
        self.tcp_listen.insert(key(u32::from(addr), port), id);
        Ok(ChannelId(id))
    }

    /// Removes a listener's binding and channel (queued frames go to
    /// `leftover`).
    pub fn unbind_tcp_listen(
        &mut self,
        addr: Ipv4Addr,
        port: u16,
        leftover: &mut Vec<Desc>,
    ) -> Result<(), BindError> {
        let id = self
            .tcp_listen
            .remove(&key(u32::from(addr), port))
            .ok_or(BindError::NoChannel)?;
        self.free_channel(id, leftover);
        Ok(())
    }

    /// Gives the TCP connection `local`–`remote` a notifying channel of
    /// `cap` frames. Control path: allocates.
    pub fn bind_tcp_conn(
        &mut self,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        cap: usize,
    ) -> Result<ChannelId, BindError> {
        if self.tcp_conn_used(local, remote) {
            return Err(BindError::AddrInUse);
        }
        let id = self.new_channel(cap, true);
        self.tcp.insert(tcp_key(local, remote), id);
        Ok(ChannelId(id))
    }

    /// Removes a connection's binding and channel (queued frames go to
    /// `leftover`).
    pub fn unbind_tcp_conn(
        &mut self,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        leftover: &mut Vec<Desc>,
    ) -> Result<(), BindError> {
        let id = self
            .tcp
            .remove(&tcp_key(local, remote))
            .ok_or(BindError::NoChannel)?;
        self.last_tcp.set(None);
        self.free_channel(id, leftover);
        Ok(())
    }

    /// The channel of TCP connection `local`–`remote`, if it has one.
    pub fn lookup_tcp_conn(&self, local: SocketAddrV4, remote: SocketAddrV4) -> Option<ChannelId> {
        self.tcp.get(&tcp_key(local, remote)).map(|&c| ChannelId(c))
    }

    /// Moves the ids of the channels that became non-empty since the last
    /// call to `out` (oldest first) and clears their ready marks. A channel
    /// emptied in between is still reported; its consumer finds nothing.
    pub fn take_ready(&mut self, out: &mut Vec<u32>) {
        // (`is_some` first: without a ring — every mode but ni-lrp — this
        // costs one test, not a move of the whole option.)
        if self.ready_in.is_some() {
            self.take_ready_inbound();
        }
        for &id in &self.ready {
            if let Some(Some(ch)) = self.channels.get_mut(id as usize) {
                ch.in_ready = false;
            }
        }
        out.append(&mut self.ready);
    }

    /// Folds the NI's ready ring into the ready list (`ni-lrp`).
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn take_ready_inbound(&mut self) {
        if let Some(mut rin) = self.ready_in.take() {
            // Each channel is on the ring at most once: one ring's worth.
            for _ in 0..rin.capacity() {
                let Some(id) = rin.pop_one() else { break };
                if let Some(Some(ch)) = self.channels.get(id as usize) {
                    if let Some(Link::Inbound { flag, .. }) = ch.link.as_deref() {
                        // Before looking at the channel: see mem::notify.
                        flag.disarm();
                    }
                }
                self.mark_ready(ChannelId(id));
            }
            self.ready_in = Some(rin);
        }
    }

    /// Puts channel `c` back on the ready list if it still holds frames (a
    /// consumer that stopped at its work bound).
    pub fn mark_ready(&mut self, c: ChannelId) {
        if let Some(Some(ch)) = self.channels.get_mut(c.0 as usize) {
            if ch.notify && !ch.in_ready && !ch.is_empty() {
                ch.in_ready = true;
                self.ready.push(c.0);
            }
        }
    }

    /// Classifies one Ethernet frame without side effects.
    ///
    /// Reads only: Ethernet destination and type; for ARP the target
    /// protocol address; for IPv4 version/IHL/total length, fragment field,
    /// protocol and destination; for UDP the destination port.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub fn classify(&self, f: &[u8]) -> Verdict {
        use DropReason::*;
        if f.len() < ETH_LEN {
            return Verdict::Drop(Truncated);
        }
        let dst = &f[0..6];
        if dst != self.mac && dst != [0xff; 6] {
            return Verdict::Drop(NotOurMac);
        }
        match u16::from_be_bytes([f[12], f[13]]) {
            0x0800 => {}
            0x0806 => {
                // Ethernet/IPv4 ARP: target protocol address at 24..28 of the ARP body.
                return match be32(f, ETH_LEN + 24) {
                    Some(tpa) if self.local(tpa) => Verdict::Channel(CONTROL),
                    Some(_) => Verdict::Drop(ArpNotForUs),
                    None => Verdict::Drop(Truncated),
                };
            }
            _ => return Verdict::Drop(UnknownEthertype),
        }
        let ip = &f[ETH_LEN..];
        if ip.len() < 20 {
            return Verdict::Drop(Truncated);
        }
        let ihl = ((ip[0] & 0x0f) as usize) * 4;
        let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
        if ip[0] >> 4 != 4 || ihl < 20 || total < ihl || total > ip.len() {
            return Verdict::Drop(BadIpHeader);
        }
        let daddr = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
        let bcast = daddr == u32::MAX || daddr == self.bcast;
        if daddr != self.addr && !bcast && !self.addrs[1..self.naddrs].contains(&daddr) {
            return Verdict::Drop(NotOurIp);
        }
        // More-fragments flag or a non-zero offset: only reassembly can tell
        // which socket it is for.
        if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
            return Verdict::Channel(FRAGMENT);
        }
        match ip[9] {
            17 => {
                let Some(dport) = (if total >= ihl + 8 {
                    be16(ip, ihl + 2)
                } else {
                    None
                }) else {
                    return Verdict::Drop(Truncated);
                };
                if let Some(c) = self.udp_channel(daddr, dport) {
                    return Verdict::Channel(c);
                }
                if bcast {
                    Verdict::Drop(BroadcastNoSocket)
                } else {
                    Verdict::Channel(CONTROL)
                }
            }
            1 if bcast => Verdict::Drop(BroadcastIcmp),
            1 => Verdict::Channel(CONTROL),
            6 => {
                let (Some(sport), Some(dport)) = (if total >= ihl + 20 {
                    (be16(ip, ihl), be16(ip, ihl + 2))
                } else {
                    (None, None)
                }) else {
                    return Verdict::Drop(Truncated);
                };
                if bcast {
                    return Verdict::Drop(BroadcastTcp);
                }
                let saddr = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
                let k = tcp_key_raw(daddr, dport, saddr, sport);
                if let Some((lk, c)) = self.last_tcp.get() {
                    if lk == k {
                        return Verdict::Channel(ChannelId(c));
                    }
                }
                if let Some(&c) = self.tcp.get(&k) {
                    self.last_tcp.set(Some((k, c)));
                    return Verdict::Channel(ChannelId(c));
                }
                match self
                    .tcp_listen
                    .get(&key(daddr, dport))
                    .or_else(|| self.tcp_listen.get(&key(0, dport)))
                {
                    Some(&c) => Verdict::Channel(ChannelId(c)),
                    None => Verdict::Channel(CONTROL),
                }
            }
            _ => Verdict::Drop(UnknownProtocol),
        }
    }

    /// Classifies `frame` (the bytes `d` names) and queues `d` on its
    /// channel. On `Err` the frame was dropped and counted, and the caller
    /// still owns `d` and must release it.
    #[inline]
    pub fn deliver(&mut self, d: Desc, frame: &[u8]) -> Result<ChannelId, DropReason> {
        let v = self.classify(frame);
        self.deliver_classified(d, v)
    }

    /// [`Classifier::deliver`] for a frame already classified (by
    /// [`Classifier::classify`], as the eager receive modes do before their
    /// protocol work): queues and counts exactly as `deliver` would.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub fn deliver_classified(&mut self, d: Desc, v: Verdict) -> Result<ChannelId, DropReason> {
        self.stats.frames += 1;
        let r = match v {
            Verdict::Channel(c) => self.push_to(c, d),
            Verdict::Drop(r) => Err(r),
        };
        match r {
            Ok(_) => self.stats.enqueued += 1,
            Err(reason) => self.stats.drops[reason as usize] += 1,
        }
        r
    }

    /// Queues a descriptor on a channel directly (used by the stack to hand a
    /// reassembled datagram to its socket). Counts a full channel as a drop.
    pub fn enqueue(&mut self, c: ChannelId, d: Desc) -> Result<(), DropReason> {
        self.push_to(c, d).map(|_| ())
    }

    /// Queues `d` on `c`, putting a notifying channel on the ready list.
    #[cfg_attr(lazynet_pin, inline(always))]
    fn push_to(&mut self, c: ChannelId, d: Desc) -> Result<ChannelId, DropReason> {
        match self.channels.get_mut(c.0 as usize) {
            Some(Some(ch)) => {
                if !ch.push(d) {
                    return Err(DropReason::ChannelFull);
                }
                if ch.notify && !ch.in_ready {
                    ch.in_ready = true;
                    // Capacity reserved at bind time: never reallocates.
                    self.ready.push(c.0);
                }
                Ok(c)
            }
            _ => Err(DropReason::ChannelFull),
        }
    }

    /// Looks up the channel of UDP (`addr`, `port`), for datagrams the stack
    /// reassembled.
    pub fn lookup_udp(&self, addr: Ipv4Addr, port: u16) -> Option<ChannelId> {
        self.udp_channel(u32::from(addr), port)
    }
}

#[cfg(test)]
mod tests;
