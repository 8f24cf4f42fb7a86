//! ARP cache and resolution queue (RFC 826, RFC 1122 §2.3.2).
//!
//! **Owns:** the IPv4 → MAC translation table, the per-address resolution
//! state (request rate limiting, retries, give-up) and the bounded queue of
//! packets ([`Desc`]s) waiting for an address to resolve.
//!
//! **May not touch:** packet bytes (the caller parses ARP packets and builds
//! requests), buffers (a [`Desc`] handed in is only stored and handed back;
//! the caller frees it), clocks (time is the `now` argument, monotonic
//! nanoseconds) or I/O.
//!
//! # Limits
//!
//! * At most [`ArpConfig::capacity`] entries (default 256). The open-addressed
//!   table has twice that many (power-of-two) buckets, so the load factor
//!   stays ≤ 0.5; lookups use linear probing with backward-shift deletion
//!   (no tombstones), keyed by a seeded hash.
//! * At most [`ArpConfig::queue_per_addr`] (default 3, like Linux
//!   `unres_qlen`) waiting packets per address and
//!   [`ArpConfig::queue_total`] (default 256) in all. A packet over a limit is
//!   refused and handed back; the *new* packet is refused, queued ones stay.
//! * Work per call: [`ArpCache::lookup`], [`ArpCache::resolve`],
//!   [`ArpCache::enqueue`] and [`ArpCache::update`] are O(probe length),
//!   except that creating an entry in a full table scans it once to find the
//!   oldest evictable entry (O(capacity)). Evictable: reachable, with no
//!   undrained waiting packets; incomplete entries are never evicted, so a
//!   table full of them refuses new addresses ([`Resolve::NoSpace`]). [`ArpCache::poll`] scans the whole
//!   table (O(buckets)) and its output is bounded by the slices passed in.
//!
//! # Calling order
//!
//! Sending to a neighbour `ip`:
//! 1. [`ArpCache::resolve`]`(ip, now)`: [`Resolve::Reachable`] → send; else
//!    [`Resolve::SendRequest`] → broadcast an ARP request and
//!    [`ArpCache::enqueue`] the packet; [`Resolve::Pending`] → only enqueue;
//!    [`Resolve::NoSpace`] → drop the packet.
//!
//! Receiving any ARP packet (request or reply) from `spa`/`sha`:
//! 2. [`ArpCache::update`]`(spa, sha, targets_us, now)`; when it returns
//!    [`ArpUpdate::Resolved`], drain [`ArpCache::take_waiting`] and send
//!    the drained packets to the now-known MAC.
//!
//! Periodically (at the latest at [`ArpCache::poll_timeout`]):
//! 3. [`ArpCache::poll`]: re-send the requests it lists and free the
//!    descriptors it returns (give-ups and entries that had to be dropped).

use core::net::Ipv4Addr;

use crate::mem::Desc;

const NS_PER_SEC: u64 = 1_000_000_000;
const NIL: u32 = u32::MAX;

/// Construction-time limits and timers of an [`ArpCache`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArpConfig {
    /// Maximum number of entries (clamped to 1..=65536).
    pub capacity: usize,
    /// How long a learnt MAC stays usable without being refreshed (ns).
    pub reachable_ns: u64,
    /// Minimum time between two requests for the same address (ns).
    /// RFC 1122 §2.3.2.1: at most one request per second per address.
    pub retrans_ns: u64,
    /// Requests sent before giving up on an address.
    pub max_probes: u8,
    /// Packets that may wait for one address (RFC 1122 §2.3.2.2: SHOULD
    /// keep at least one).
    pub queue_per_addr: u16,
    /// Packets that may wait for all addresses together (clamped to
    /// 0..=65535).
    pub queue_total: usize,
    /// Seed of the table's hash, so that neighbours cannot pick colliding
    /// addresses offline.
    pub hash_seed: u64,
}

impl Default for ArpConfig {
    fn default() -> Self {
        ArpConfig {
            capacity: 256,
            reachable_ns: 60 * NS_PER_SEC,
            retrans_ns: NS_PER_SEC,
            max_probes: 3,
            queue_per_addr: 3,
            queue_total: 256,
            hash_seed: 0x9e37_79b9_7f4a_7c15,
        }
    }
}

/// State of one cache entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArpState {
    /// A request was sent; no answer yet. Packets may wait.
    Incomplete,
    /// The MAC is known and valid until `expires`.
    Reachable,
}

/// What the caller must do to send to an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolve {
    /// The MAC is known: send now.
    Reachable([u8; 6]),
    /// Broadcast an ARP request for the address now, then enqueue the packet.
    SendRequest,
    /// A request is outstanding (rate limited): enqueue the packet only.
    Pending,
    /// The table is full of unresolved addresses: drop the packet.
    NoSpace,
}

/// Result of [`ArpCache::update`] (RFC 826 merge rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArpUpdate {
    /// An existing reachable entry was refreshed (MAC possibly changed).
    Refreshed,
    /// An incomplete entry became reachable; `waiting` packets can now be
    /// drained with [`ArpCache::take_waiting`].
    Resolved {
        /// Number of packets waiting for this address.
        waiting: u16,
    },
    /// No entry existed and the packet targeted us: one was created.
    Created,
    /// No entry existed and the packet did not target us: nothing cached.
    NotCached,
    /// Sender address or MAC is not a valid unicast neighbour
    /// (0.0.0.0, broadcast/multicast MAC): ignored.
    Invalid,
    /// The packet targeted us but no entry could be made room for.
    NoSpace,
}

/// Counters of an [`ArpCache`]; all monotonically increasing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArpCounters {
    /// Requests the caller was told to send (first and retries).
    pub requests: u64,
    /// Addresses given up after `max_probes` unanswered requests.
    pub give_ups: u64,
    /// Waiting packets dropped because their address was given up or their
    /// entry removed.
    pub dropped_waiting: u64,
    /// Packets refused by `enqueue` because of the per-address limit.
    pub queue_full_addr: u64,
    /// Packets refused by `enqueue` because of the global limit.
    pub queue_full_total: u64,
    /// Packets refused by `enqueue` because the address had no incomplete
    /// entry (caller error, or the entry was reused).
    pub queue_no_entry: u64,
    /// Reachable entries evicted to make room.
    pub evictions: u64,
    /// Entries that could not be created (table full of incomplete ones).
    pub no_space: u64,
    /// Reachable entries that expired.
    pub expired: u64,
    /// Updates ignored as invalid.
    pub invalid: u64,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    ip: u32,
    used: bool,
    state: ArpState,
    mac: [u8; 6],
    probes: u8,
    /// Reachable: time the MAC was learnt (eviction order). Incomplete: creation.
    created: u64,
    /// Reachable: expiry. Incomplete: time the last request was sent.
    stamp: u64,
    q_head: u32,
    q_tail: u32,
    q_len: u16,
}

const EMPTY: Entry = Entry {
    ip: 0,
    used: false,
    state: ArpState::Incomplete,
    mac: [0; 6],
    probes: 0,
    created: 0,
    stamp: 0,
    q_head: NIL,
    q_tail: NIL,
    q_len: 0,
};

#[derive(Clone, Copy, Debug)]
struct QNode {
    desc: Desc,
    next: u32,
}

/// The last address [`ArpCache::resolve`] found reachable: a stack sends
/// most segments to one next hop (the peer on a link, or the gateway), and
/// comparing two words is cheaper than hashing and probing
/// (docs/PERFORMANCE.md, 4.2). Any change to an entry
/// clears it; `until` is that entry's expiry, so an expired neighbour is
/// never answered from here.
#[derive(Clone, Copy, Debug)]
struct Memo {
    key: u32,
    mac: [u8; 6],
    until: u64,
}

/// The memo that matches nothing (`until` 0: no `now` is below it).
const NO_MEMO: Memo = Memo {
    key: 0,
    mac: [0; 6],
    until: 0,
};

/// A fixed-capacity ARP cache with a bounded resolution queue.
///
/// All memory is allocated in [`ArpCache::new`]; no call allocates.
#[derive(Debug)]
pub struct ArpCache {
    cfg: ArpConfig,
    buckets: Vec<Entry>,
    mask: usize,
    len: usize,
    qnodes: Vec<QNode>,
    q_free: u32,
    q_used: usize,
    counters: ArpCounters,
    memo: Memo,
}

impl ArpCache {
    /// A cache with the given limits; allocates everything it will ever use.
    pub fn new(mut cfg: ArpConfig) -> Self {
        cfg.capacity = cfg.capacity.clamp(1, 1 << 16);
        cfg.queue_total = cfg.queue_total.min(u16::MAX as usize);
        cfg.max_probes = cfg.max_probes.max(1);
        let nb = (cfg.capacity * 2).next_power_of_two();
        let mut qnodes = Vec::with_capacity(cfg.queue_total);
        for i in 0..cfg.queue_total {
            let next = if i + 1 < cfg.queue_total {
                i as u32 + 1
            } else {
                NIL
            };
            qnodes.push(QNode {
                desc: Desc::default(),
                next,
            });
        }
        ArpCache {
            cfg,
            buckets: vec![EMPTY; nb],
            mask: nb - 1,
            len: 0,
            q_free: if cfg.queue_total > 0 { 0 } else { NIL },
            q_used: 0,
            qnodes,
            counters: ArpCounters::default(),
            memo: NO_MEMO,
        }
    }

    /// The configuration in force (after clamping).
    pub fn config(&self) -> &ArpConfig {
        &self.cfg
    }

    /// Number of entries (incomplete and reachable).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the cache holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Packets waiting for resolution, over all addresses.
    pub fn waiting_total(&self) -> usize {
        self.q_used
    }

    /// The counters.
    pub fn counters(&self) -> ArpCounters {
        self.counters
    }

    /// State of the entry for `ip`, if any (for diagnostics and tests).
    pub fn state(&self, ip: Ipv4Addr) -> Option<ArpState> {
        self.find(u32::from(ip)).map(|i| self.buckets[i].state)
    }

    #[inline]
    fn hash(&self, ip: u32) -> usize {
        let mut x = (ip as u64) ^ self.cfg.hash_seed;
        x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        x ^= x >> 29;
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x ^= x >> 32;
        (x as usize) & self.mask
    }

    fn find(&self, ip: u32) -> Option<usize> {
        let mut i = self.hash(ip);
        // Load factor ≤ 0.5 guarantees an empty bucket; the bound is a belt.
        for _ in 0..self.buckets.len() {
            let e = &self.buckets[i];
            if !e.used {
                return None;
            }
            if e.ip == ip {
                return Some(i);
            }
            i = (i + 1) & self.mask;
        }
        None
    }

    /// Remove bucket `i` with backward-shift deletion. Its queue must be empty.
    fn remove_at(&mut self, mut i: usize) {
        debug_assert_eq!(self.buckets[i].q_len, 0);
        self.memo = NO_MEMO;
        self.buckets[i] = EMPTY;
        self.len -= 1;
        let mut j = (i + 1) & self.mask;
        for _ in 0..self.buckets.len() {
            if !self.buckets[j].used {
                return;
            }
            let home = self.hash(self.buckets[j].ip);
            // Move j back to i if its home is not cyclically in (i, j].
            let dist_ij = j.wrapping_sub(i) & self.mask;
            let dist_hj = j.wrapping_sub(home) & self.mask;
            if dist_hj >= dist_ij {
                self.buckets[i] = self.buckets[j];
                self.buckets[j] = EMPTY;
                i = j;
            }
            j = (j + 1) & self.mask;
        }
    }

    /// Insert a fresh entry for `ip` (not present); evicts the oldest
    /// reachable entry when full. Returns its bucket.
    fn insert(&mut self, ip: u32, state: ArpState, now: u64) -> Option<usize> {
        if self.len >= self.cfg.capacity {
            // Evict the oldest reachable entry with no packets still waiting
            // (those must be drained, not leaked). O(capacity), rare.
            let victim = self
                .buckets
                .iter()
                .enumerate()
                .filter(|(_, e)| e.used && e.state == ArpState::Reachable && e.q_len == 0)
                .min_by_key(|(_, e)| e.created)
                .map(|(i, _)| i);
            match victim {
                Some(v) => {
                    self.remove_at(v);
                    self.counters.evictions += 1;
                }
                None => {
                    self.counters.no_space += 1;
                    return None;
                }
            }
        }
        let mut i = self.hash(ip);
        while self.buckets[i].used {
            i = (i + 1) & self.mask;
        }
        self.buckets[i] = Entry {
            ip,
            used: true,
            state,
            created: now,
            ..EMPTY
        };
        self.len += 1;
        Some(i)
    }

    /// The MAC for `ip` if it is reachable and not expired. No side effects.
    pub fn lookup(&self, ip: Ipv4Addr, now: u64) -> Option<[u8; 6]> {
        let e = &self.buckets[self.find(u32::from(ip))?];
        (e.state == ArpState::Reachable && now < e.stamp).then_some(e.mac)
    }

    /// What to do to send a packet to `ip` now; creates an incomplete entry
    /// and counts a request when the caller must send one.
    ///
    /// RFC 1122 §2.3.2.1: requests for one address are rate limited to one
    /// per `retrans_ns`; an expired reachable entry is re-probed.
    #[must_use]
    #[inline]
    pub fn resolve(&mut self, ip: Ipv4Addr, now: u64) -> Resolve {
        let key = u32::from(ip);
        let m = self.memo;
        if m.key == key && now < m.until {
            return Resolve::Reachable(m.mac);
        }
        self.resolve_table(key, now)
    }

    /// [`ArpCache::resolve`] past the memo: the table itself.
    #[inline(never)]
    fn resolve_table(&mut self, key: u32, now: u64) -> Resolve {
        let Some(i) = self.find(key) else {
            return match self.insert(key, ArpState::Incomplete, now) {
                Some(i) => {
                    self.mark_request(i, now);
                    Resolve::SendRequest
                }
                None => Resolve::NoSpace,
            };
        };
        let e = self.buckets[i];
        match e.state {
            ArpState::Reachable if now < e.stamp => {
                self.memo = Memo {
                    key,
                    mac: e.mac,
                    until: e.stamp,
                };
                Resolve::Reachable(e.mac)
            }
            ArpState::Reachable => {
                // Expired: start resolving again.
                self.memo = NO_MEMO;
                self.counters.expired += 1;
                let e = &mut self.buckets[i];
                e.state = ArpState::Incomplete;
                e.probes = 0;
                e.created = now;
                self.mark_request(i, now);
                Resolve::SendRequest
            }
            ArpState::Incomplete => {
                if e.probes < self.cfg.max_probes
                    && now >= e.stamp.saturating_add(self.cfg.retrans_ns)
                {
                    self.mark_request(i, now);
                    Resolve::SendRequest
                } else {
                    Resolve::Pending
                }
            }
        }
    }

    fn mark_request(&mut self, i: usize, now: u64) {
        let e = &mut self.buckets[i];
        e.probes = e.probes.saturating_add(1);
        e.stamp = now;
        self.counters.requests += 1;
    }

    /// Learn `ip` → `mac` from any ARP packet whose sender is `ip`.
    ///
    /// RFC 826 merge rule: an existing entry is updated whatever the packet's
    /// target; a new entry is created only when `targets_us` (the target
    /// protocol address is ours).
    #[must_use]
    pub fn update(&mut self, ip: Ipv4Addr, mac: [u8; 6], targets_us: bool, now: u64) -> ArpUpdate {
        let key = u32::from(ip);
        if key == 0 || ip.is_broadcast() || ip.is_multicast() || mac[0] & 1 != 0 || mac == [0; 6] {
            self.counters.invalid += 1;
            return ArpUpdate::Invalid;
        }
        let expires = now.saturating_add(self.cfg.reachable_ns);
        self.memo = NO_MEMO;
        let i = match self.find(key) {
            Some(i) => i,
            None if targets_us => match self.insert(key, ArpState::Reachable, now) {
                Some(i) => {
                    let e = &mut self.buckets[i];
                    e.mac = mac;
                    e.stamp = expires;
                    return ArpUpdate::Created;
                }
                None => return ArpUpdate::NoSpace,
            },
            None => return ArpUpdate::NotCached,
        };
        let e = &mut self.buckets[i];
        let was = e.state;
        e.mac = mac;
        e.state = ArpState::Reachable;
        e.stamp = expires;
        e.created = now;
        e.probes = 0;
        match was {
            ArpState::Incomplete => ArpUpdate::Resolved { waiting: e.q_len },
            ArpState::Reachable => ArpUpdate::Refreshed,
        }
    }

    /// Queue a packet for `ip`, which must have an incomplete entry (after
    /// [`Resolve::SendRequest`] or [`Resolve::Pending`]). On refusal the
    /// descriptor is handed back for the caller to free.
    ///
    /// RFC 1122 §2.3.2.2: at least one packet per unresolved address SHOULD
    /// be kept; we keep up to `queue_per_addr`.
    pub fn enqueue(&mut self, ip: Ipv4Addr, desc: Desc, _now: u64) -> Result<(), Desc> {
        let Some(i) = self
            .find(u32::from(ip))
            .filter(|&i| self.buckets[i].state == ArpState::Incomplete)
        else {
            self.counters.queue_no_entry += 1;
            return Err(desc);
        };
        if self.buckets[i].q_len >= self.cfg.queue_per_addr {
            self.counters.queue_full_addr += 1;
            return Err(desc);
        }
        let n = self.q_free;
        if n == NIL {
            self.counters.queue_full_total += 1;
            return Err(desc);
        }
        self.q_free = self.qnodes[n as usize].next;
        self.qnodes[n as usize] = QNode { desc, next: NIL };
        self.q_used += 1;
        let e = &mut self.buckets[i];
        if e.q_tail == NIL {
            e.q_head = n;
        } else {
            self.qnodes[e.q_tail as usize].next = n;
        }
        e.q_tail = n;
        e.q_len += 1;
        Ok(())
    }

    /// Move up to `out.len()` packets waiting for `ip` into `out` (oldest
    /// first); returns how many. Call again while it returns `out.len()`.
    pub fn take_waiting(&mut self, ip: Ipv4Addr, out: &mut [Desc]) -> usize {
        match self.find(u32::from(ip)) {
            Some(i) => self.drain(i, out),
            None => 0,
        }
    }

    fn drain(&mut self, i: usize, out: &mut [Desc]) -> usize {
        let mut n = 0;
        while n < out.len() {
            let e = &mut self.buckets[i];
            let h = e.q_head;
            if h == NIL {
                break;
            }
            let node = self.qnodes[h as usize];
            out[n] = node.desc;
            n += 1;
            e.q_head = node.next;
            if node.next == NIL {
                e.q_tail = NIL;
            }
            e.q_len -= 1;
            self.qnodes[h as usize].next = self.q_free;
            self.q_free = h;
            self.q_used -= 1;
        }
        n
    }

    /// Forget `ip`; its waiting packets go to `out` (as many as fit — the
    /// entry stays, with the rest, if `out` is too small). Returns how many
    /// were written. For administrative flushes.
    pub fn remove(&mut self, ip: Ipv4Addr, out: &mut [Desc]) -> usize {
        let Some(i) = self.find(u32::from(ip)) else {
            return 0;
        };
        let n = self.drain(i, out);
        self.counters.dropped_waiting += n as u64;
        if self.buckets[i].q_len == 0 {
            self.remove_at(i);
        }
        n
    }

    /// Drive timers: retransmit requests, give up on addresses that did not
    /// answer `max_probes` requests (freeing their waiting packets into
    /// `freed`), and drop expired reachable entries.
    ///
    /// Addresses to send a request for are written to `requests`. Work and
    /// output are bounded by the table size and the two slices; anything
    /// that did not fit is done by the next call (call again while the
    /// result says a slice filled up).
    #[must_use]
    pub fn poll(&mut self, now: u64, freed: &mut [Desc], requests: &mut [Ipv4Addr]) -> ArpPoll {
        let mut out = ArpPoll::default();
        let mut i = 0;
        while i < self.buckets.len() {
            let e = self.buckets[i];
            if !e.used {
                i += 1;
                continue;
            }
            match e.state {
                ArpState::Reachable => {
                    if now >= e.stamp {
                        // Packets left undrained after resolution are freed too.
                        let n = self.drain(i, &mut freed[out.freed..]);
                        out.freed += n;
                        self.counters.dropped_waiting += n as u64;
                        if self.buckets[i].q_len == 0 {
                            self.counters.expired += 1;
                            self.remove_at(i);
                            // Backward shift may have moved an entry into i.
                            continue;
                        }
                    }
                }
                ArpState::Incomplete => {
                    if now >= e.stamp.saturating_add(self.cfg.retrans_ns) {
                        if e.probes >= self.cfg.max_probes {
                            // Give up (RFC 1122 §2.3.2.1): free waiting packets.
                            let n = self.drain(i, &mut freed[out.freed..]);
                            out.freed += n;
                            self.counters.dropped_waiting += n as u64;
                            if self.buckets[i].q_len == 0 {
                                self.counters.give_ups += 1;
                                self.remove_at(i);
                                continue;
                            }
                        } else if out.requests < requests.len() {
                            requests[out.requests] = Ipv4Addr::from(e.ip);
                            out.requests += 1;
                            self.mark_request(i, now);
                        }
                    }
                }
            }
            i += 1;
        }
        out
    }

    /// The earliest time at which [`ArpCache::poll`] has work, if any.
    /// O(buckets).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.buckets
            .iter()
            .filter(|e| e.used)
            .map(|e| match e.state {
                ArpState::Reachable => e.stamp,
                ArpState::Incomplete => e.stamp.saturating_add(self.cfg.retrans_ns),
            })
            .min()
    }
}

/// What one [`ArpCache::poll`] call produced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArpPoll {
    /// Descriptors written to `freed` (the caller frees them).
    pub freed: usize,
    /// Addresses written to `requests` (the caller broadcasts a request each).
    pub requests: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

    fn ip(n: u32) -> Ipv4Addr {
        Ipv4Addr::from(0x0a00_0000 + n)
    }

    /// A cache of `capacity` entries, the other limits as by default.
    fn cache(capacity: usize) -> ArpCache {
        ArpCache::new(ArpConfig {
            capacity,
            ..ArpConfig::default()
        })
    }

    #[test]
    fn backward_shift_keeps_all_findable() {
        let mut c = cache(64);
        for n in 1..=64 {
            assert_eq!(c.update(ip(n), MAC, true, 0), ArpUpdate::Created);
        }
        for n in (1..=64).step_by(3) {
            let mut out = [];
            c.remove(ip(n), &mut out);
        }
        for n in 1..=64 {
            assert_eq!(c.lookup(ip(n), 1).is_some(), (n - 1) % 3 != 0, "{n}");
        }
    }

    #[test]
    fn invalid_senders_ignored() {
        let mut c = ArpCache::new(ArpConfig::default());
        assert_eq!(
            c.update(Ipv4Addr::UNSPECIFIED, MAC, true, 0),
            ArpUpdate::Invalid
        );
        assert_eq!(c.update(ip(1), [0xff; 6], true, 0), ArpUpdate::Invalid);
        assert_eq!(
            c.update(ip(1), [1, 0, 0x5e, 0, 0, 1], true, 0),
            ArpUpdate::Invalid
        );
        assert!(c.is_empty());
    }

    /// The memo of the last reachable answer never outlives what it copied:
    /// a new MAC, an expiry, a removal and an eviction are all seen by the
    /// next `resolve`.
    #[test]
    fn resolve_memo_follows_every_change() {
        const OTHER: [u8; 6] = [2, 0, 0, 0, 0, 2];
        let reach = ArpConfig::default().reachable_ns;
        let mut c = cache(2);
        assert_eq!(c.update(ip(1), MAC, true, 0), ArpUpdate::Created);
        assert_eq!(c.resolve(ip(1), 1), Resolve::Reachable(MAC));
        // The peer's MAC changes (RFC 826 merge): the memo must not answer.
        assert_eq!(c.update(ip(1), OTHER, false, 2), ArpUpdate::Refreshed);
        assert_eq!(c.resolve(ip(1), 3), Resolve::Reachable(OTHER));
        // Past the entry's expiry: re-resolved, not answered from the memo.
        assert_eq!(c.resolve(ip(1), 2 + reach), Resolve::SendRequest);
        assert_eq!(
            c.update(ip(1), MAC, false, 10 + reach),
            ArpUpdate::Resolved { waiting: 0 }
        );
        let t = 11 + reach;
        assert_eq!(c.resolve(ip(1), t), Resolve::Reachable(MAC));
        // Removed: the next resolve starts a request.
        c.remove(ip(1), &mut []);
        assert_eq!(c.resolve(ip(1), t + 1), Resolve::SendRequest);
        // Evicted to make room for others.
        let mut c = cache(1);
        assert_eq!(c.update(ip(1), MAC, true, 0), ArpUpdate::Created);
        assert_eq!(c.resolve(ip(1), 1), Resolve::Reachable(MAC));
        assert_eq!(c.update(ip(2), OTHER, true, 2), ArpUpdate::Created);
        assert_eq!(c.counters().evictions, 1);
        assert_eq!(c.resolve(ip(1), 3), Resolve::SendRequest);
    }
}
