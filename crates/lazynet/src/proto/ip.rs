//! IPv4 reassembly, fragmentation planning and identification (RFC 791,
//! RFC 815, RFC 1122 §3.3.2, RFC 6864/7739).
//!
//! **Owns:** the partially received datagrams ([`Reassembler`]), the arena
//! their fragment payloads are copied into, their timers, and the rules for
//! splitting a payload into fragments ([`fragment_plan`]) and numbering
//! datagrams ([`IdentGen`]).
//!
//! **May not touch:** header parsing or building (the caller passes parsed
//! fields and payload slices), buffers of the communication area, clocks or
//! I/O.
//!
//! # Reassembly limits
//!
//! * [`ReasmConfig::slots`] datagrams in progress (default 64).
//! * [`ReasmConfig::byte_budget`] bytes of fragment storage (default
//!   256 KiB), as [`BLOCK`]-byte blocks of one arena. A datagram holds the
//!   blocks its fragments touch, so its cost is at most
//!   ⌈65515 / 1024⌉ = 64 blocks. A fragment that would need a block when
//!   none is free drops its whole datagram ([`ReasmDrop::NoMemory`]); a
//!   fragment of a new datagram when all slots are busy is refused
//!   ([`ReasmDrop::NoSlot`]). Policy: *refuse new work*, never evict
//!   (like Linux since 4.17): an attacker can then only delay reassembly
//!   until the timeout, not make us drop datagrams that were progressing.
//! * [`ReasmConfig::timeout_ns`] (default 15 s, shorter than the 60 s that
//!   RFC 1122 §3.3.2 suggests, to bound the damage of a flood). The timer
//!   starts at the first fragment and is *not* extended by later ones, so
//!   trickling fragments cannot keep a slot forever.
//! * Fixed memory besides the arena: per slot ~1.3 KiB (a bitmap of 8-byte
//!   units, a block map, the first fragment's header), plus one 64 KiB
//!   output buffer. Everything is allocated in [`Reassembler::new`].
//! * Work per [`Reassembler::insert`]: O(slots) to find the datagram plus
//!   O(fragment length) to compare and copy, plus O(datagram length) to copy
//!   it out on completion. [`Reassembler::poll`] is O(slots).

use core::net::Ipv4Addr;

const NS_PER_SEC: u64 = 1_000_000_000;

/// Largest IPv4 payload: 65535 total length minus a minimal 20-byte header
/// (RFC 791). A fragment ending beyond it is [`ReasmDrop::TooBig`].
pub const MAX_PAYLOAD: usize = 65535 - 20;
/// Size of one storage block of the reassembly arena.
pub const BLOCK: usize = 1024;
/// Longest IPv4 header (IHL 15).
pub const MAX_HEADER: usize = 60;

const UNITS: usize = MAX_PAYLOAD.div_ceil(8);
const WORDS: usize = UNITS.div_ceil(64);
const BLOCKS_PER_DGRAM: usize = MAX_PAYLOAD.div_ceil(BLOCK);
const NO_BLOCK: u16 = u16::MAX;

/// Identity of a datagram being reassembled (RFC 791: source, destination,
/// protocol, identification).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReasmKey {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Identification field.
    pub ident: u16,
    /// Protocol field.
    pub protocol: u8,
}

/// Why a fragment was not accepted. Small and `Copy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReasmDrop {
    /// A non-last fragment whose length is zero or not a multiple of 8, or an
    /// offset that is not a multiple of 8 (RFC 791).
    Malformed,
    /// The fragment ends beyond the largest possible datagram (65535 bytes).
    TooBig,
    /// The fragment overlaps received data with different bytes; the whole
    /// datagram was dropped.
    Overlap,
    /// The fragment carries data beyond the datagram's end learnt from its
    /// last fragment (or a last fragment ends before data already received);
    /// the whole datagram was dropped.
    BeyondEnd,
    /// Two last fragments with different ends; the whole datagram was dropped.
    ConflictingEnd,
    /// All slots are in use; the fragment of a new datagram was refused.
    NoSlot,
    /// The arena is exhausted; the whole datagram was dropped.
    NoMemory,
}

impl ReasmDrop {
    /// Every reason, in counter order.
    pub const ALL: [ReasmDrop; 7] = [
        ReasmDrop::Malformed,
        ReasmDrop::TooBig,
        ReasmDrop::Overlap,
        ReasmDrop::BeyondEnd,
        ReasmDrop::ConflictingEnd,
        ReasmDrop::NoSlot,
        ReasmDrop::NoMemory,
    ];

    /// Stable name for statistics.
    pub const fn name(self) -> &'static str {
        match self {
            ReasmDrop::Malformed => "frag_malformed",
            ReasmDrop::TooBig => "frag_too_big",
            ReasmDrop::Overlap => "frag_overlap",
            ReasmDrop::BeyondEnd => "frag_beyond_end",
            ReasmDrop::ConflictingEnd => "frag_conflicting_end",
            ReasmDrop::NoSlot => "frag_no_slot",
            ReasmDrop::NoMemory => "frag_no_memory",
        }
    }

    /// True when the datagram the fragment belonged to was discarded too.
    pub const fn drops_datagram(self) -> bool {
        matches!(
            self,
            ReasmDrop::Overlap
                | ReasmDrop::BeyondEnd
                | ReasmDrop::ConflictingEnd
                | ReasmDrop::NoMemory
        )
    }
}

/// Construction-time limits of a [`Reassembler`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReasmConfig {
    /// Datagrams in progress at once (clamped to 1..=4096).
    pub slots: usize,
    /// Bytes of fragment storage (rounded down to whole [`BLOCK`]s, clamped
    /// to 1..=65534 blocks).
    pub byte_budget: usize,
    /// Time from a datagram's first fragment to its discard (ns).
    pub timeout_ns: u64,
}

impl Default for ReasmConfig {
    fn default() -> Self {
        ReasmConfig {
            slots: 64,
            byte_budget: 256 * 1024,
            timeout_ns: 15 * NS_PER_SEC,
        }
    }
}

/// Counters of a [`Reassembler`]; all monotonically increasing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReasmCounters {
    /// Fragments offered to `insert`.
    pub fragments: u64,
    /// Datagrams completed.
    pub reassembled: u64,
    /// Fragments ignored because every byte was already received, identical.
    pub duplicates: u64,
    /// Datagrams discarded by the timeout.
    pub timeouts: u64,
    /// Drops by reason, indexed like [`ReasmDrop::ALL`].
    pub drops: [u64; ReasmDrop::ALL.len()],
}

impl ReasmCounters {
    /// The drop counter for `reason`.
    pub fn drops(&self, reason: ReasmDrop) -> u64 {
        self.drops[reason as usize]
    }
}

/// A completed datagram, borrowed from the reassembler until its next
/// mutable use (the borrow checker makes a "forgot to release" leak
/// impossible).
#[derive(Debug)]
pub struct Reassembled<'a> {
    /// The datagram's identity.
    pub key: ReasmKey,
    /// The IP header of its first fragment (offset 0), as passed in.
    pub header: &'a [u8],
    /// The reassembled payload.
    pub payload: &'a [u8],
}

#[derive(Clone, Copy)]
struct Slot {
    used: bool,
    key: ReasmKey,
    deadline: u64,
    /// Payload length, once the last fragment was received.
    end: Option<u32>,
    /// Largest end of any received fragment.
    max_end: u32,
    units: u32,
    header_len: u8,
    header: [u8; MAX_HEADER],
    blocks: [u16; BLOCKS_PER_DGRAM],
    bitmap: [u64; WORDS],
}

const EMPTY: Slot = Slot {
    used: false,
    key: ReasmKey {
        src: Ipv4Addr::UNSPECIFIED,
        dst: Ipv4Addr::UNSPECIFIED,
        ident: 0,
        protocol: 0,
    },
    deadline: 0,
    end: None,
    max_end: 0,
    units: 0,
    header_len: 0,
    header: [0; MAX_HEADER],
    blocks: [NO_BLOCK; BLOCKS_PER_DGRAM],
    bitmap: [0; WORDS],
};

#[inline]
fn bit(bm: &[u64; WORDS], u: usize) -> bool {
    bm[u / 64] & (1 << (u % 64)) != 0
}

/// Bounded IPv4 reassembly (RFC 791 §3.2, RFC 815 with a bitmap of 8-byte
/// units in place of the hole list).
///
/// Calling order: [`Reassembler::insert`] for every fragment (a packet with
/// MF set or a non-zero offset); when it returns `Ok(Some(d))`, process
/// `d.payload` before the next call. Call [`Reassembler::poll`] at the
/// latest at [`Reassembler::poll_timeout`].
pub struct Reassembler {
    cfg: ReasmConfig,
    slots: Vec<Slot>,
    in_use: usize,
    arena: Vec<u8>,
    free_blocks: Vec<u16>,
    out: Vec<u8>,
    out_header: [u8; MAX_HEADER],
    counters: ReasmCounters,
}

impl core::fmt::Debug for Reassembler {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Reassembler")
            .field("cfg", &self.cfg)
            .field("in_use", &self.in_use)
            .field("free_blocks", &self.free_blocks.len())
            .field("counters", &self.counters)
            .finish()
    }
}

impl Reassembler {
    /// A reassembler with the given limits; allocates all it will ever use.
    pub fn new(mut cfg: ReasmConfig) -> Self {
        cfg.slots = cfg.slots.clamp(1, 4096);
        let nblocks = (cfg.byte_budget / BLOCK).clamp(1, NO_BLOCK as usize - 1);
        cfg.byte_budget = nblocks * BLOCK;
        Reassembler {
            cfg,
            slots: vec![EMPTY; cfg.slots],
            in_use: 0,
            arena: vec![0; nblocks * BLOCK],
            free_blocks: (0..nblocks as u16).rev().collect(),
            // A complete datagram is held in the arena first: it is never
            // longer than the budget.
            out: vec![0; MAX_PAYLOAD.min(nblocks * BLOCK)],
            out_header: [0; MAX_HEADER],
            counters: ReasmCounters::default(),
        }
    }

    /// The longest datagram payload it can complete: an IPv4 payload, or
    /// its byte budget if smaller.
    pub fn max_datagram(&self) -> usize {
        self.out.len()
    }

    /// The configuration in force (after clamping).
    pub fn config(&self) -> &ReasmConfig {
        &self.cfg
    }

    /// Datagrams in progress.
    pub fn in_progress(&self) -> usize {
        self.in_use
    }

    /// Bytes of arena in use (whole blocks).
    pub fn bytes_in_use(&self) -> usize {
        self.cfg.byte_budget - self.free_blocks.len() * BLOCK
    }

    /// The counters.
    pub fn counters(&self) -> ReasmCounters {
        self.counters
    }

    fn drop_slot(&mut self, i: usize) {
        let s = &mut self.slots[i];
        for b in s.blocks.iter_mut() {
            if *b != NO_BLOCK {
                self.free_blocks.push(*b);
                *b = NO_BLOCK;
            }
        }
        *s = EMPTY;
        self.in_use -= 1;
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn fail(&mut self, slot: Option<usize>, why: ReasmDrop) -> ReasmDrop {
        self.counters.drops[why as usize] += 1;
        if let Some(i) = slot {
            self.drop_slot(i);
        }
        why
    }

    /// Offer one fragment. `offset` is in bytes (fragment offset × 8),
    /// `more` is the MF flag, `header` the fragment's IP header (kept only
    /// from the fragment at offset 0, up to 60 bytes), `payload` its data,
    /// which is copied.
    ///
    /// Returns `Ok(Some(_))` when this fragment completed its datagram,
    /// `Ok(None)` when it was stored (or was an identical duplicate), and
    /// `Err` when it was dropped — see [`ReasmDrop::drops_datagram`].
    pub fn insert(
        &mut self,
        key: ReasmKey,
        offset: usize,
        more: bool,
        header: &[u8],
        payload: &[u8],
        now: u64,
    ) -> Result<Option<Reassembled<'_>>, ReasmDrop> {
        self.counters.fragments += 1;
        let len = payload.len();
        // RFC 791: offsets are in 8-byte units and every fragment but the
        // last carries a multiple of 8 bytes.
        if offset % 8 != 0 || (more && (len == 0 || len % 8 != 0)) {
            return Err(self.fail(None, ReasmDrop::Malformed));
        }
        let end = match offset.checked_add(len) {
            Some(e) if e <= MAX_PAYLOAD => e,
            _ => return Err(self.fail(None, ReasmDrop::TooBig)),
        };
        let i = match self.slots.iter().position(|s| s.used && s.key == key) {
            Some(i) => i,
            None => {
                let Some(i) = self.slots.iter().position(|s| !s.used) else {
                    return Err(self.fail(None, ReasmDrop::NoSlot));
                };
                let s = &mut self.slots[i];
                *s = EMPTY;
                s.used = true;
                s.key = key;
                // RFC 1122 §3.3.2: the timer starts with the first fragment.
                s.deadline = now.saturating_add(self.cfg.timeout_ns);
                self.in_use += 1;
                i
            }
        };
        let (u0, u1) = (offset / 8, end.div_ceil(8));
        {
            let s = &self.slots[i];
            if more {
                if s.end.is_some_and(|e| end > e as usize) {
                    return Err(self.fail(Some(i), ReasmDrop::BeyondEnd));
                }
            } else {
                if s.end.is_some_and(|e| e as usize != end) {
                    return Err(self.fail(Some(i), ReasmDrop::ConflictingEnd));
                }
                if s.max_end as usize > end {
                    return Err(self.fail(Some(i), ReasmDrop::BeyondEnd));
                }
            }
            // RFC 791 leaves overlaps open; RFC 5722's spirit for IPv6:
            // overlapping data must be identical or the datagram is dropped.
            let mut new_units = 0usize;
            for u in u0..u1 {
                if !bit(&s.bitmap, u) {
                    new_units += 1;
                    continue;
                }
                let (a, b) = ((u * 8).max(offset), (u * 8 + 8).min(end));
                let blk = s.blocks[a / BLOCK] as usize;
                let at = blk * BLOCK + a % BLOCK;
                if self.arena[at..at + (b - a)] != payload[a - offset..b - offset] {
                    return Err(self.fail(Some(i), ReasmDrop::Overlap));
                }
            }
            if new_units == 0 && !(len == 0 && s.end.is_none()) {
                self.counters.duplicates += 1;
                return Ok(None);
            }
            let need = if len == 0 {
                0
            } else {
                (offset / BLOCK..end.div_ceil(BLOCK))
                    .filter(|&b| s.blocks[b] == NO_BLOCK)
                    .count()
            };
            if need > self.free_blocks.len() {
                return Err(self.fail(Some(i), ReasmDrop::NoMemory));
            }
        }
        // Committed: nothing below can fail.
        let s = &mut self.slots[i];
        let mut pos = offset;
        while pos < end {
            let b = pos / BLOCK;
            if s.blocks[b] == NO_BLOCK {
                // `need` blocks were checked free above.
                s.blocks[b] = self.free_blocks.pop().unwrap_or(NO_BLOCK);
            }
            let n = (BLOCK - pos % BLOCK).min(end - pos);
            let at = s.blocks[b] as usize * BLOCK + pos % BLOCK;
            self.arena[at..at + n].copy_from_slice(&payload[pos - offset..pos - offset + n]);
            pos += n;
        }
        for u in u0..u1 {
            if !bit(&s.bitmap, u) {
                s.bitmap[u / 64] |= 1 << (u % 64);
                s.units += 1;
            }
        }
        s.max_end = s.max_end.max(end as u32);
        if !more {
            s.end = Some(end as u32);
        }
        if offset == 0 {
            let h = header.len().min(MAX_HEADER);
            s.header[..h].copy_from_slice(&header[..h]);
            s.header_len = h as u8;
        }
        let total = match s.end {
            Some(t) if s.units as usize == (t as usize).div_ceil(8) => t as usize,
            _ => return Ok(None),
        };
        // Complete: copy out and free the slot.
        let s = self.slots[i];
        let mut pos = 0;
        while pos < total {
            let n = BLOCK.min(total - pos);
            let at = s.blocks[pos / BLOCK] as usize * BLOCK;
            self.out[pos..pos + n].copy_from_slice(&self.arena[at..at + n]);
            pos += n;
        }
        let hl = s.header_len as usize;
        self.out_header[..hl].copy_from_slice(&s.header[..hl]);
        self.drop_slot(i);
        self.counters.reassembled += 1;
        Ok(Some(Reassembled {
            key: s.key,
            header: &self.out_header[..hl],
            payload: &self.out[..total],
        }))
    }

    /// Discard datagrams whose timer ran out. For each one, `expired` gets
    /// its key and, if its fragment zero had arrived, that fragment's header
    /// followed by up to 8 bytes of its data — what RFC 1122 §3.3.2 / RFC 792
    /// need for an ICMP Time Exceeded (code 1), which the caller sends
    /// (rate limited). Returns how many were discarded. O(slots).
    pub fn poll(&mut self, now: u64, mut expired: impl FnMut(&ReasmKey, Option<&[u8]>)) -> usize {
        let mut n = 0;
        let mut scratch = [0u8; MAX_HEADER + 8];
        for i in 0..self.slots.len() {
            let s = &self.slots[i];
            if !s.used || now < s.deadline {
                continue;
            }
            let first = if bit(&s.bitmap, 0) {
                let hl = s.header_len as usize;
                scratch[..hl].copy_from_slice(&s.header[..hl]);
                let d = (s.max_end as usize).min(8);
                let at = s.blocks[0] as usize * BLOCK;
                scratch[hl..hl + d].copy_from_slice(&self.arena[at..at + d]);
                Some(hl + d)
            } else {
                None
            };
            expired(&s.key, first.map(|l| &scratch[..l]));
            self.drop_slot(i);
            self.counters.timeouts += 1;
            n += 1;
        }
        n
    }

    /// The earliest deadline of a datagram in progress. O(slots).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.slots
            .iter()
            .filter(|s| s.used)
            .map(|s| s.deadline)
            .min()
    }
}

/// Why a payload cannot be fragmented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FragError {
    /// The MTU leaves less than 8 bytes of data after the header.
    MtuTooSmall,
    /// Header plus payload exceed 65535 bytes.
    TooBig,
}

/// Iterator over `(offset_bytes, len, more_fragments)` of a fragmentation
/// plan; see [`fragment_plan`].
#[derive(Clone, Debug)]
pub struct FragmentPlan {
    total: usize,
    step: usize,
    pos: usize,
    done: bool,
}

impl Iterator for FragmentPlan {
    type Item = (usize, usize, bool);

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let len = self.step.min(self.total - self.pos);
        let off = self.pos;
        self.pos += len;
        let more = self.pos < self.total;
        self.done = !more;
        Some((off, len, more))
    }
}

/// Plan the fragments of an IP payload of `payload_len` bytes for a link of
/// `mtu` bytes with an `ihl_bytes` header in every fragment (RFC 791 §3.2:
/// every fragment but the last carries a multiple of 8 data bytes; each
/// fragment's header + data ≤ mtu). A payload that fits yields one
/// fragment `(0, payload_len, false)`. Options not copied into later
/// fragments only make those smaller, so using the first header's length
/// for all is safe.
pub fn fragment_plan(
    payload_len: usize,
    mtu: usize,
    ihl_bytes: usize,
) -> Result<FragmentPlan, FragError> {
    if payload_len.saturating_add(ihl_bytes) > 65535 {
        return Err(FragError::TooBig);
    }
    if mtu < ihl_bytes {
        return Err(FragError::MtuTooSmall);
    }
    let room = mtu - ihl_bytes;
    if payload_len <= room {
        return Ok(FragmentPlan {
            total: payload_len,
            step: payload_len.max(1),
            pos: 0,
            done: false,
        });
    }
    let step = room & !7;
    if step == 0 {
        return Err(FragError::MtuTooSmall);
    }
    Ok(FragmentPlan {
        total: payload_len,
        step,
        pos: 0,
        done: false,
    })
}

/// IPv4 Identification generator (RFC 6864 §4.1, RFC 7739 §5.3 style):
/// a keyed hash of (source, destination, protocol) picks one of 256
/// counters and an offset, so values are unique per flow for a while yet do
/// not reveal a global packet count. Deterministic for a given `key`, which
/// the caller draws from its seeded randomness.
#[derive(Clone, Debug)]
pub struct IdentGen {
    key: u64,
    counters: Vec<u16>,
}

impl IdentGen {
    /// Number of counters.
    pub const BUCKETS: usize = 256;

    /// A generator keyed with `key`.
    pub fn new(key: u64) -> Self {
        IdentGen {
            key,
            counters: vec![0; Self::BUCKETS],
        }
    }

    /// The next Identification for a datagram from `src` to `dst`.
    pub fn next(&mut self, src: Ipv4Addr, dst: Ipv4Addr, protocol: u8) -> u16 {
        let mut x = (u64::from(u32::from(src)) << 32 | u64::from(u32::from(dst))) ^ self.key;
        x ^= u64::from(protocol).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
        let b = (x as usize) & (Self::BUCKETS - 1);
        self.counters[b] = self.counters[b].wrapping_add(1);
        ((x >> 32) as u16).wrapping_add(self.counters[b])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ident: u16) -> ReasmKey {
        ReasmKey {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            ident,
            protocol: 17,
        }
    }

    #[test]
    fn two_fragments_in_reverse_order() {
        let mut r = Reassembler::new(ReasmConfig::default());
        let data: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        assert_eq!(
            r.insert(key(1), 1480, false, &[], &data[1480..], 0)
                .unwrap()
                .map(|_| ()),
            None
        );
        let d = r
            .insert(key(1), 0, true, &[0x45; 20], &data[..1480], 1)
            .unwrap()
            .unwrap();
        assert_eq!(d.payload, &data[..]);
        assert_eq!(d.header, &[0x45; 20]);
        assert_eq!(r.in_progress(), 0);
        assert_eq!(r.bytes_in_use(), 0);
    }

    #[test]
    fn malformed_and_too_big() {
        let mut r = Reassembler::new(ReasmConfig::default());
        assert_eq!(
            r.insert(key(1), 0, true, &[], &[0; 7], 0).err(),
            Some(ReasmDrop::Malformed)
        );
        assert_eq!(
            r.insert(key(1), 3, false, &[], &[0; 8], 0).err(),
            Some(ReasmDrop::Malformed)
        );
        assert_eq!(
            r.insert(key(1), 65528, false, &[], &[0; 8], 0).err(),
            Some(ReasmDrop::TooBig)
        );
        assert_eq!(r.in_progress(), 0);
    }

    #[test]
    fn conflicting_ends_drop_datagram() {
        let mut r = Reassembler::new(ReasmConfig::default());
        r.insert(key(1), 16, false, &[], &[1; 8], 0).unwrap();
        assert_eq!(
            r.insert(key(1), 16, false, &[], &[1; 9], 0).err(),
            Some(ReasmDrop::ConflictingEnd)
        );
        assert_eq!(r.in_progress(), 0);
        r.insert(key(2), 16, false, &[], &[1; 8], 0).unwrap();
        assert_eq!(
            r.insert(key(2), 16, true, &[], &[1; 16], 0).err(),
            Some(ReasmDrop::BeyondEnd)
        );
        r.insert(key(3), 64, true, &[], &[1; 8], 0).unwrap();
        assert_eq!(
            r.insert(key(3), 8, false, &[], &[1; 8], 0).err(),
            Some(ReasmDrop::BeyondEnd)
        );
        assert_eq!(r.in_progress(), 0);
        assert_eq!(r.bytes_in_use(), 0);
    }

    #[test]
    fn timeout_reports_first_fragment() {
        let mut r = Reassembler::new(ReasmConfig::default());
        r.insert(key(1), 0, true, &[0x45; 20], &[7; 16], 5).unwrap();
        r.insert(key(2), 8, true, &[], &[7; 16], 6).unwrap();
        assert_eq!(r.poll_timeout(), Some(5 + 15 * NS_PER_SEC));
        let mut seen = Vec::new();
        assert_eq!(
            r.poll(5 + 15 * NS_PER_SEC, |k, f| seen
                .push((k.ident, f.map(|f| f.to_vec())))),
            1
        );
        let mut want = vec![0x45; 20];
        want.extend([7; 8]);
        assert_eq!(seen, vec![(1, Some(want))]);
        assert_eq!(r.poll(u64::MAX, |_, f| assert!(f.is_none())), 1);
        assert_eq!(r.in_progress(), 0);
        assert_eq!(r.counters().timeouts, 2);
    }

    #[test]
    fn plan_small_payload_single_fragment() {
        assert_eq!(
            fragment_plan(0, 1500, 20).unwrap().collect::<Vec<_>>(),
            vec![(0, 0, false)]
        );
        assert_eq!(
            fragment_plan(1480, 1500, 20).unwrap().collect::<Vec<_>>(),
            vec![(0, 1480, false)]
        );
        assert_eq!(
            fragment_plan(1481, 1500, 20).unwrap().collect::<Vec<_>>(),
            vec![(0, 1480, true), (1480, 1, false)]
        );
        assert_eq!(
            fragment_plan(100, 27, 20).err(),
            Some(FragError::MtuTooSmall)
        );
        assert_eq!(
            fragment_plan(65516, 1500, 20).err(),
            Some(FragError::TooBig)
        );
    }

    #[test]
    fn ident_gen_is_deterministic_and_per_flow() {
        let (a, b) = (Ipv4Addr::new(1, 2, 3, 4), Ipv4Addr::new(5, 6, 7, 8));
        let mut g1 = IdentGen::new(42);
        let mut g2 = IdentGen::new(42);
        let x: Vec<u16> = (0..5).map(|_| g1.next(a, b, 17)).collect();
        let y: Vec<u16> = (0..5).map(|_| g2.next(a, b, 17)).collect();
        assert_eq!(x, y);
        for w in x.windows(2) {
            assert_eq!(w[1], w[0].wrapping_add(1));
        }
    }
}
