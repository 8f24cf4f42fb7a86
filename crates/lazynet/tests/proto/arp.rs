//! ARP cache tests (RFC 826, RFC 1122 §2.3.2), grouped by entry state, all
//! with explicit time.

use core::net::Ipv4Addr;

use lazynet::mem::Desc;
use lazynet::proto::arp::{ArpCache, ArpConfig, ArpState, ArpUpdate, Resolve};

const S: u64 = 1_000_000_000;
const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

fn ip(n: u32) -> Ipv4Addr {
    Ipv4Addr::from(0x0a00_0000 + n)
}

fn d(n: u32) -> Desc {
    Desc::new(n, 60)
}

fn cache() -> ArpCache {
    ArpCache::new(ArpConfig::default())
}

fn poll(c: &mut ArpCache, now: u64) -> (Vec<Desc>, Vec<Ipv4Addr>) {
    let mut freed = [Desc::default(); 64];
    let mut req = [Ipv4Addr::UNSPECIFIED; 64];
    let r = c.poll(now, &mut freed, &mut req);
    (freed[..r.freed].to_vec(), req[..r.requests].to_vec())
}

// ---- No entry ----

#[test]
fn unknown_address_asks_for_request_and_queues() {
    let mut c = cache();
    assert_eq!(c.lookup(ip(1), 0), None);
    assert_eq!(c.resolve(ip(1), 0), Resolve::SendRequest);
    assert_eq!(c.state(ip(1)), Some(ArpState::Incomplete));
    assert_eq!(c.enqueue(ip(1), d(1), 0), Ok(()));
    assert_eq!(c.counters().requests, 1);
}

#[test]
fn update_not_targeting_us_does_not_create() {
    // RFC 826: only add the triplet when we are the target.
    let mut c = cache();
    assert_eq!(c.update(ip(1), MAC_A, false, 0), ArpUpdate::NotCached);
    assert!(c.is_empty());
    assert_eq!(c.update(ip(1), MAC_A, true, 0), ArpUpdate::Created);
    assert_eq!(c.lookup(ip(1), 0), Some(MAC_A));
}

#[test]
fn enqueue_without_entry_is_refused() {
    let mut c = cache();
    assert_eq!(c.enqueue(ip(1), d(1), 0), Err(d(1)));
    assert_eq!(c.counters().queue_no_entry, 1);
}

// ---- Incomplete ----

#[test]
fn resolution_lifecycle_delivers_waiting_in_order() {
    let mut c = cache();
    assert_eq!(c.resolve(ip(1), 0), Resolve::SendRequest);
    c.enqueue(ip(1), d(1), 0).unwrap();
    assert_eq!(c.resolve(ip(1), S / 2), Resolve::Pending);
    c.enqueue(ip(1), d(2), S / 2).unwrap();
    // The reply arrives; an entry that exists is merged even if the packet
    // does not target us (RFC 826 merge rule).
    assert_eq!(
        c.update(ip(1), MAC_A, false, S),
        ArpUpdate::Resolved { waiting: 2 }
    );
    let mut out = [Desc::default(); 1];
    assert_eq!(c.take_waiting(ip(1), &mut out), 1);
    assert_eq!(out[0], d(1));
    assert_eq!(c.take_waiting(ip(1), &mut out), 1);
    assert_eq!(out[0], d(2));
    assert_eq!(c.take_waiting(ip(1), &mut out), 0);
    assert_eq!(c.waiting_total(), 0);
    assert_eq!(c.resolve(ip(1), S + 1), Resolve::Reachable(MAC_A));
    assert_eq!(c.lookup(ip(1), S + 1), Some(MAC_A));
}

#[test]
fn requests_rate_limited_to_one_per_second() {
    // RFC 1122 §2.3.2.1: at most one request per second per address.
    let mut c = cache();
    assert_eq!(c.resolve(ip(1), 0), Resolve::SendRequest);
    for t in [1, S / 3, S - 1] {
        assert_eq!(c.resolve(ip(1), t), Resolve::Pending);
    }
    assert_eq!(c.resolve(ip(1), S), Resolve::SendRequest);
    assert_eq!(c.resolve(ip(1), S + 1), Resolve::Pending);
    // Other addresses are independent.
    assert_eq!(c.resolve(ip(2), S + 1), Resolve::SendRequest);
    assert_eq!(c.counters().requests, 3);
}

#[test]
fn poll_retransmits_then_gives_up_and_frees_waiting() {
    let mut c = ArpCache::new(ArpConfig {
        max_probes: 3,
        ..ArpConfig::default()
    });
    assert_eq!(c.resolve(ip(1), 0), Resolve::SendRequest);
    c.enqueue(ip(1), d(1), 0).unwrap();
    c.enqueue(ip(1), d(2), 0).unwrap();
    assert_eq!(c.poll_timeout(), Some(S));
    assert_eq!(poll(&mut c, S - 1), (vec![], vec![]));
    assert_eq!(poll(&mut c, S), (vec![], vec![ip(1)]));
    assert_eq!(poll(&mut c, 2 * S), (vec![], vec![ip(1)]));
    // Third request was the last; one more retrans interval and it gives up.
    assert_eq!(poll(&mut c, 3 * S - 1), (vec![], vec![]));
    assert_eq!(poll(&mut c, 3 * S), (vec![d(1), d(2)], vec![]));
    assert_eq!(c.state(ip(1)), None);
    let k = c.counters();
    assert_eq!((k.requests, k.give_ups, k.dropped_waiting), (3, 1, 2));
    assert_eq!(c.waiting_total(), 0);
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn give_up_with_small_output_slice_finishes_on_next_poll() {
    let mut c = ArpCache::new(ArpConfig {
        max_probes: 1,
        ..ArpConfig::default()
    });
    assert_eq!(c.resolve(ip(1), 0), Resolve::SendRequest);
    for n in 0..3 {
        c.enqueue(ip(1), d(n), 0).unwrap();
    }
    let mut freed = [Desc::default(); 2];
    let r = c.poll(S, &mut freed, &mut []);
    assert_eq!(r.freed, 2);
    assert_eq!(c.state(ip(1)), Some(ArpState::Incomplete));
    let r = c.poll(S, &mut freed, &mut []);
    assert_eq!((r.freed, freed[0]), (1, d(2)));
    assert_eq!(c.state(ip(1)), None);
}

#[test]
fn per_address_queue_limit() {
    let mut c = ArpCache::new(ArpConfig {
        queue_per_addr: 3,
        ..ArpConfig::default()
    });
    assert_eq!(c.resolve(ip(1), 0), Resolve::SendRequest);
    for n in 0..3 {
        assert_eq!(c.enqueue(ip(1), d(n), 0), Ok(()));
    }
    assert_eq!(c.enqueue(ip(1), d(9), 0), Err(d(9)));
    assert_eq!(c.counters().queue_full_addr, 1);
    assert_eq!(c.resolve(ip(2), 0), Resolve::SendRequest);
    assert_eq!(c.enqueue(ip(2), d(10), 0), Ok(()));
}

#[test]
fn global_queue_limit_and_reuse_after_drain() {
    let mut c = ArpCache::new(ArpConfig {
        queue_per_addr: 2,
        queue_total: 5,
        ..ArpConfig::default()
    });
    let mut n = 0;
    for a in 1..=3 {
        assert_eq!(c.resolve(ip(a), 0), Resolve::SendRequest);
        for _ in 0..2 {
            let r = c.enqueue(ip(a), d(n), 0);
            assert_eq!(r.is_ok(), n < 5, "desc {n}");
            n += 1;
        }
    }
    assert_eq!(c.waiting_total(), 5);
    assert_eq!(c.counters().queue_full_total, 1);
    let _ = c.update(ip(1), MAC_A, false, 1);
    let mut out = [Desc::default(); 8];
    assert_eq!(c.take_waiting(ip(1), &mut out), 2);
    assert_eq!(c.enqueue(ip(3), d(99), 1), Ok(()));
    assert_eq!(c.waiting_total(), 4);
}

// ---- Reachable ----

#[test]
fn reachable_expires_and_is_reprobed() {
    let mut c = ArpCache::new(ArpConfig {
        reachable_ns: 60 * S,
        ..ArpConfig::default()
    });
    let _ = c.update(ip(1), MAC_A, true, 0);
    assert_eq!(c.lookup(ip(1), 60 * S - 1), Some(MAC_A));
    assert_eq!(c.lookup(ip(1), 60 * S), None);
    assert_eq!(c.resolve(ip(1), 60 * S), Resolve::SendRequest);
    assert_eq!(c.state(ip(1)), Some(ArpState::Incomplete));
}

#[test]
fn poll_removes_expired_entries() {
    let mut c = cache();
    let _ = c.update(ip(1), MAC_A, true, 0);
    let _ = c.update(ip(2), MAC_B, true, 10 * S);
    assert_eq!(c.poll_timeout(), Some(60 * S));
    poll(&mut c, 60 * S);
    assert_eq!(c.state(ip(1)), None);
    assert_eq!(c.lookup(ip(2), 60 * S), Some(MAC_B));
    assert_eq!(c.counters().expired, 1);
}

#[test]
fn refresh_changes_mac_and_extends_life() {
    let mut c = cache();
    let _ = c.update(ip(1), MAC_A, true, 0);
    assert_eq!(c.update(ip(1), MAC_B, false, 30 * S), ArpUpdate::Refreshed);
    assert_eq!(c.lookup(ip(1), 89 * S), Some(MAC_B));
}

// ---- Table full ----

#[test]
fn eviction_takes_oldest_reachable_never_incomplete() {
    let mut c = ArpCache::new(ArpConfig {
        capacity: 4,
        ..ArpConfig::default()
    });
    assert_eq!(c.resolve(ip(1), 0), Resolve::SendRequest); // incomplete, oldest of all
    let _ = c.update(ip(2), MAC_A, true, 1);
    let _ = c.update(ip(3), MAC_A, true, 2);
    let _ = c.update(ip(4), MAC_A, true, 3);
    assert_eq!(c.update(ip(5), MAC_B, true, 4), ArpUpdate::Created);
    assert_eq!(c.len(), 4);
    assert_eq!(c.state(ip(1)), Some(ArpState::Incomplete));
    assert_eq!(c.state(ip(2)), None);
    assert_eq!(c.counters().evictions, 1);
    assert_eq!(c.resolve(ip(6), 5), Resolve::SendRequest); // evicts ip(3)
    assert_eq!(c.state(ip(3)), None);
}

#[test]
fn full_of_incomplete_refuses_new_addresses() {
    let mut c = ArpCache::new(ArpConfig {
        capacity: 2,
        ..ArpConfig::default()
    });
    assert_eq!(c.resolve(ip(1), 0), Resolve::SendRequest);
    assert_eq!(c.resolve(ip(2), 0), Resolve::SendRequest);
    assert_eq!(c.resolve(ip(3), 0), Resolve::NoSpace);
    assert_eq!(c.update(ip(3), MAC_A, true, 0), ArpUpdate::NoSpace);
    assert_eq!(c.counters().no_space, 2);
    assert_eq!(c.len(), 2);
}

#[test]
fn churn_many_addresses_stays_bounded_and_accounts_every_desc() {
    let mut c = ArpCache::new(ArpConfig {
        capacity: 32,
        ..ArpConfig::default()
    });
    let (mut queued, mut returned) = (0usize, 0usize);
    let mut out = [Desc::default(); 8];
    let mut t = 0;
    for n in 0..20_000u32 {
        t += 7_000_000;
        let a = ip(n.wrapping_mul(2_654_435_761) % 500);
        match n % 4 {
            0 | 3 => {
                if let ArpUpdate::Resolved { waiting } = c.update(a, MAC_A, n % 8 == 0, t) {
                    let got = c.take_waiting(a, &mut out);
                    assert_eq!(got, usize::from(waiting));
                    returned += got;
                }
            }
            1 => {
                if matches!(c.resolve(a, t), Resolve::SendRequest | Resolve::Pending)
                    && c.enqueue(a, d(n), t).is_ok()
                {
                    queued += 1;
                }
            }
            _ => returned += poll(&mut c, t).0.len(),
        }
        assert!(c.len() <= 32);
        assert!(c.waiting_total() <= ArpConfig::default().queue_total);
        assert_eq!(queued, returned + c.waiting_total());
    }
}
