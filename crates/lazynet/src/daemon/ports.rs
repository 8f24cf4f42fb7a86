//! The daemon's one port authority: who holds each local TCP and UDP port
//! of the daemon's address, for attached applications, MemNet clients and
//! the daemon's own stack alike.
//!
//! **Owns:** the holder of every port (bound or listening), each
//! application's range of ephemeral ports (handed out at attach: its
//! connections and port-0 binds come from there, and only it may send from
//! them), and the range the daemon's own stack draws from for MemNet
//! clients' connections. The ranges are disjoint, and nobody may bind
//! explicitly inside a range that is not its own, so a port is never two
//! holders' at once: an application cannot send on a MemNet client's
//! connection, nor take the port of one.
//!
//! **May not touch:** the classifier (the daemon binds there after the
//! authority said yes).

use crate::mem::area::Refusal;

/// Who asks for, or holds, a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Holder {
    /// Attached application `k` (its index in the daemon's table).
    App(u16),
    /// MemNet client `k`.
    Client(u16),
}

const FREE: u16 = 0;
const CLIENT_BIT: u16 = 0x8000;

impl Holder {
    fn code(self) -> u16 {
        match self {
            Holder::App(k) => k + 1,
            Holder::Client(k) => CLIENT_BIT | k,
        }
    }
}

/// The port table and the ranges (see the module docs).
pub(super) struct Ports {
    tcp: Box<[u16]>,
    udp: Box<[u16]>,
    /// Application `k`'s range is `base + per·k ..= base + per·(k+1) − 1`.
    base: u16,
    per: u16,
    apps: u16,
    /// The daemon's own stack's ephemeral range.
    own: (u16, u16),
}

impl Ports {
    /// Ranges for `apps` applications of `per` ports each from `base`, and
    /// the daemon's own `own`; `None` if they overlap or do not fit.
    pub(super) fn new(base: u16, per: u16, apps: u16, own: (u16, u16)) -> Option<Ports> {
        let end = u32::from(base) + u32::from(per) * u32::from(apps);
        let fits = per > 0 && end <= 65536 && own.0 <= own.1 && own.0 > 0;
        let apart = u32::from(own.1) < u32::from(base) || u32::from(own.0) >= end;
        (fits && apart).then(|| Ports {
            tcp: vec![FREE; 65536].into_boxed_slice(),
            udp: vec![FREE; 65536].into_boxed_slice(),
            base,
            per,
            apps,
            own,
        })
    }

    /// Application `k`'s ephemeral range, inclusive.
    pub(super) fn app_range(&self, k: u16) -> (u16, u16) {
        let first = self.base + self.per * k;
        (first, first + (self.per - 1))
    }

    /// The daemon's own stack's ephemeral range, inclusive.
    pub(super) fn own_range(&self) -> (u16, u16) {
        self.own
    }

    /// Whether `port` lies in a range that is not `who`'s: another
    /// application's or the daemon's own (MemNet clients have none).
    fn in_foreign_range(&self, who: Holder, port: u16) -> bool {
        if (self.own.0..=self.own.1).contains(&port) {
            return !matches!(who, Holder::Client(_));
        }
        let p = u32::from(port);
        let base = u32::from(self.base);
        let end = base + u32::from(self.per) * u32::from(self.apps);
        if !(base..end).contains(&p) {
            return false;
        }
        let owner = ((p - base) / u32::from(self.per)) as u16;
        who != Holder::App(owner)
    }

    fn table(&mut self, tcp: bool) -> &mut [u16] {
        if tcp {
            &mut self.tcp
        } else {
            &mut self.udp
        }
    }

    /// `who` binds or listens on `port`: refused ([`Refusal::InUse`]) if
    /// someone holds it or it lies in a range not `who`'s.
    pub(super) fn claim(&mut self, tcp: bool, port: u16, who: Holder) -> Result<(), Refusal> {
        if port == 0 {
            return Err(Refusal::Invalid);
        }
        if self.in_foreign_range(who, port) {
            return Err(Refusal::InUse);
        }
        let t = self.table(tcp);
        if t[usize::from(port)] != FREE {
            return Err(Refusal::InUse);
        }
        t[usize::from(port)] = who.code();
        Ok(())
    }

    /// `who` gives `port` back (nothing if it was not `who`'s).
    pub(super) fn release(&mut self, tcp: bool, port: u16, who: Holder) {
        let t = self.table(tcp);
        if t[usize::from(port)] == who.code() {
            t[usize::from(port)] = FREE;
        }
    }

    /// Whether application `k` may use local `port`: for a connection, and
    /// as the source of what it sends. Its own range, or a port it holds.
    pub(super) fn app_may_use(&self, k: u16, tcp: bool, port: u16) -> bool {
        let (a, b) = self.app_range(k);
        (a..=b).contains(&port)
            || (if tcp { &self.tcp } else { &self.udp })[usize::from(port)] == Holder::App(k).code()
    }

    /// Frees every port `who` holds (it is gone). O(ports).
    pub(super) fn release_all(&mut self, who: Holder) {
        let c = who.code();
        for t in [&mut self.tcp, &mut self.udp] {
            for x in t.iter_mut().filter(|x| **x == c) {
                *x = FREE;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ports() -> Ports {
        Ports::new(49152, 1024, 4, (40960, 49151)).unwrap()
    }

    #[test]
    fn ranges_must_not_overlap_or_overflow() {
        assert!(Ports::new(49152, 1024, 16, (40960, 49151)).is_some());
        assert!(Ports::new(49152, 1024, 17, (40960, 49151)).is_none());
        assert!(Ports::new(49152, 1024, 4, (49000, 50000)).is_none());
        assert!(Ports::new(49152, 0, 4, (40960, 49151)).is_none());
    }

    #[test]
    fn nobody_takes_a_port_inside_a_range_not_its_own() {
        let mut p = ports();
        let (a1, _) = p.app_range(1);
        assert_eq!(p.claim(true, a1, Holder::App(0)), Err(Refusal::InUse));
        assert_eq!(p.claim(true, a1, Holder::Client(0)), Err(Refusal::InUse));
        assert_eq!(p.claim(false, 40960, Holder::App(0)), Err(Refusal::InUse));
        assert_eq!(p.claim(true, a1, Holder::App(1)), Ok(()));
        // A MemNet client may listen in the daemon's range: its stack
        // draws connections from there and skips ports listened on.
        assert_eq!(p.claim(true, 45000, Holder::Client(2)), Ok(()));
    }

    #[test]
    fn a_port_has_one_holder_and_comes_back_on_release() {
        let mut p = ports();
        assert_eq!(p.claim(true, 80, Holder::Client(0)), Ok(()));
        assert_eq!(p.claim(true, 80, Holder::App(0)), Err(Refusal::InUse));
        assert_eq!(p.claim(false, 80, Holder::App(0)), Ok(()));
        assert!(!p.app_may_use(0, true, 80));
        assert!(p.app_may_use(0, false, 80));
        p.release(true, 80, Holder::App(0));
        assert_eq!(p.claim(true, 80, Holder::App(1)), Err(Refusal::InUse));
        p.release_all(Holder::Client(0));
        assert_eq!(p.claim(true, 80, Holder::App(1)), Ok(()));
    }

    #[test]
    fn an_application_uses_only_its_range_and_its_ports() {
        let p = ports();
        let (a, b) = p.app_range(2);
        assert!(p.app_may_use(2, true, a) && p.app_may_use(2, true, b));
        assert!(!p.app_may_use(2, true, b + 1));
        assert!(!p.app_may_use(2, true, 45000));
    }
}
