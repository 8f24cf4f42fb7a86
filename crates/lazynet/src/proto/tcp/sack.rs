//! The SACK scoreboard of a sender (RFC 2018, RFC 6675).
//!
//! **Owns:** the sequence ranges above SND.UNA that the peer reported as
//! received in SACK blocks (at most [`MAX_SACKED`] disjoint ranges, in a
//! fixed array: no allocation), the recovery variables HighRxt and
//! RescueRxt, and RFC 6675 §4's routines over them: `Update()`
//! ([`Scoreboard::update`]), `IsLost()` ([`Scoreboard::is_lost`]),
//! `NextSeg()` ([`Scoreboard::next_seg`]) and `SetPipe()`
//! ([`Scoreboard::pipe`]).
//!
//! **Does not own:** when loss recovery starts or ends (DupAcks,
//! RecoveryPoint), the congestion window, or sending — those are the
//! connection's ([`super::Connection`]). HighACK is SND.UNA and HighData is
//! SND.MAX; the connection passes them in.
//!
//! Sequence numbers here are "next byte" positions: a range `(l, r)` holds
//! octets `l .. r`, and `high_rxt` is one past the highest retransmitted
//! octet (RFC 6675 names the octet itself).
//!
//! **Bounded:** every routine loops over at most [`MAX_SACKED`] ranges
//! (`is_lost` inside `pipe` and `next_seg` makes those O(n²) with
//! n ≤ 8). A peer reporting more disjoint ranges than fit loses the
//! highest ones (counted as overflow): IsLost then sees less SACKed data
//! above a hole and pipe counts more in flight, so a full scoreboard makes
//! recovery more conservative, never more aggressive.

use crate::wire::tcp::SeqNumber;

/// Disjoint SACKed ranges kept (the peer has at most this many holes that
/// we know of; beyond, the highest are forgotten).
pub const MAX_SACKED: usize = 8;

/// RFC 6675 §2 DupThresh.
pub const DUP_THRESH: u32 = 3;

fn lt(a: SeqNumber, b: SeqNumber) -> bool {
    a.diff(b) < 0
}
fn le(a: SeqNumber, b: SeqNumber) -> bool {
    a.diff(b) <= 0
}
fn max(a: SeqNumber, b: SeqNumber) -> SeqNumber {
    if lt(a, b) {
        b
    } else {
        a
    }
}
fn min(a: SeqNumber, b: SeqNumber) -> SeqNumber {
    if lt(a, b) {
        a
    } else {
        b
    }
}
/// `b - a` in bytes, 0 if `b` is not above `a`.
fn span(a: SeqNumber, b: SeqNumber) -> u32 {
    b.diff(a).max(0) as u32
}

/// What one [`Scoreboard::update`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SackUpdate {
    /// Some octet was SACKed for the first time (RFC 6675 §2: this makes
    /// an ACK that does not advance SND.UNA a duplicate ACK).
    pub new_data: bool,
    /// Blocks ignored: empty or inverted, entirely at or below SND.UNA
    /// (old or D-SACK, RFC 2883), or reaching above SND.MAX.
    pub ignored: u32,
    /// Ranges forgotten because the scoreboard was full.
    pub overflow: u32,
}

/// One answer of `NextSeg()` (RFC 6675 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextSeg {
    /// Rules 1 and 3: retransmit `len` bytes at `seq` (a hole above
    /// HighRxt); `lost` tells rule 1 (IsLost) from rule 3.
    Retransmit {
        /// First octet.
        seq: SeqNumber,
        /// Up to SMSS, never into a SACKed range.
        len: u32,
        /// Rule 1 (the octet is deemed lost) rather than rule 3.
        lost: bool,
    },
    /// Rule 2: send new data from SND.NXT.
    NewData,
    /// Rule 4: the one rescue retransmission per recovery, ending at the
    /// highest outstanding unSACKed octet. HighRxt is not updated.
    Rescue {
        /// First octet.
        seq: SeqNumber,
        /// Up to SMSS.
        len: u32,
    },
    /// Nothing to send.
    Nothing,
}

/// The SACK scoreboard (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct Scoreboard {
    /// Sorted, disjoint, non-adjacent `[l, r)` ranges above SND.UNA.
    ranges: [(SeqNumber, SeqNumber); MAX_SACKED],
    n: usize,
    /// One past the highest octet retransmitted in this recovery.
    high_rxt: SeqNumber,
    /// RescueRxt: `None` until set in this recovery.
    rescue_rxt: Option<SeqNumber>,
}

impl Default for Scoreboard {
    fn default() -> Self {
        Scoreboard {
            ranges: [(SeqNumber(0), SeqNumber(0)); MAX_SACKED],
            n: 0,
            high_rxt: SeqNumber(0),
            rescue_rxt: None,
        }
    }
}

impl Scoreboard {
    /// The SACKed ranges, lowest first.
    pub fn as_slice(&self) -> &[(SeqNumber, SeqNumber)] {
        self.ranges.get(..self.n).unwrap_or(&[])
    }
    /// No SACKed data known.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// HighRxt (one past the highest retransmitted octet).
    pub fn high_rxt(&self) -> SeqNumber {
        self.high_rxt
    }
    /// RescueRxt, if set in this recovery.
    pub fn rescue_rxt(&self) -> Option<SeqNumber> {
        self.rescue_rxt
    }
    /// Bytes SACKed in total.
    pub fn sacked_bytes(&self) -> u32 {
        self.as_slice().iter().map(|&(l, r)| span(l, r)).sum()
    }
    /// Start of the lowest SACKed range.
    pub fn first_start(&self) -> Option<SeqNumber> {
        self.as_slice().first().map(|&(l, _)| l)
    }

    /// Forgets everything (RFC 6675 §5.1 and RFC 2018 §8: after an RTO the
    /// SACK information is not trusted; the receiver may have reneged).
    pub fn clear(&mut self) {
        self.n = 0;
        self.rescue_rxt = None;
    }

    /// A loss recovery phase starts at HighACK `una` (RFC 6675 §5 step 4):
    /// nothing retransmitted yet, RescueRxt undefined.
    pub fn start_recovery(&mut self, una: SeqNumber) {
        self.high_rxt = una;
        self.rescue_rxt = None;
    }

    /// `[seq, end)` was retransmitted by rule 1 or 3 or as the fast
    /// retransmit (RFC 6675 §5 (C.2), step 4.3). The first retransmission
    /// of a recovery also sets RescueRxt (step 4.3).
    pub fn retransmitted(&mut self, end: SeqNumber) {
        self.high_rxt = max(self.high_rxt, end);
        if self.rescue_rxt.is_none() {
            self.rescue_rxt = Some(end);
        }
    }

    /// The rescue retransmission was sent: RescueRxt = RecoveryPoint
    /// (RFC 6675 §4 NextSeg rule 4).
    pub fn rescued(&mut self, recovery_point: SeqNumber) {
        self.rescue_rxt = Some(recovery_point);
    }

    /// SND.UNA advanced to `una`: drop and trim what it covers.
    pub fn advance(&mut self, una: SeqNumber) {
        let mut k = 0;
        for i in 0..self.n {
            let (l, r) = self.ranges[i];
            if le(r, una) {
                continue;
            }
            self.ranges[k] = (max(l, una), r);
            k += 1;
        }
        self.n = k;
    }

    /// RFC 6675 §4 `Update()`: records the SACK blocks of one ACK, given
    /// SND.UNA and SND.MAX. Blocks that cannot be right are ignored whole:
    /// left edge not below the right edge, right edge at or below SND.UNA,
    /// or right edge above SND.MAX (nothing was sent there; Linux
    /// `tcp_is_sackblock_valid()` does the same). A block starting below
    /// SND.UNA is trimmed to it.
    pub fn update(
        &mut self,
        una: SeqNumber,
        snd_max: SeqNumber,
        blocks: &[(SeqNumber, SeqNumber)],
    ) -> SackUpdate {
        let mut out = SackUpdate::default();
        for &(l, r) in blocks {
            if !lt(l, r) || le(r, una) || lt(snd_max, r) {
                out.ignored += 1;
                continue;
            }
            let (new, dropped) = self.insert(max(l, una), r);
            out.new_data |= new;
            out.overflow += u32::from(dropped);
        }
        out
    }

    /// Merges `[l, r)`; returns (some octet was new, a range was dropped).
    fn insert(&mut self, l: SeqNumber, r: SeqNumber) -> (bool, bool) {
        // First range that ends at or after l (may touch or overlap).
        let mut i = 0;
        while i < self.n && lt(self.ranges[i].1, l) {
            i += 1;
        }
        // Ranges i..j overlap or touch [l, r).
        let mut j = i;
        while j < self.n && le(self.ranges[j].0, r) {
            j += 1;
        }
        if j > i {
            let (l0, r0) = self.ranges[i];
            let r1 = self.ranges[j - 1].1;
            let covered = j - i == 1 && le(l0, l) && le(r, r0);
            let merged = (min(l0, l), max(r1, r));
            self.ranges[i] = merged;
            // Close the gap left by ranges i+1..j.
            let gone = j - i - 1;
            if gone > 0 {
                self.ranges.copy_within(j..self.n, i + 1);
                self.n -= gone;
            }
            return (!covered, false);
        }
        // Disjoint: insert at i.
        if self.n == MAX_SACKED {
            if i == MAX_SACKED {
                // The new range is the highest: forget it.
                return (true, true);
            }
            // Forget the highest range to make room.
            self.n -= 1;
            self.ranges.copy_within(i..self.n, i + 1);
            self.ranges[i] = (l, r);
            self.n += 1;
            return (true, true);
        }
        self.ranges.copy_within(i..self.n, i + 1);
        self.ranges[i] = (l, r);
        self.n += 1;
        (true, false)
    }

    /// SACKed bytes above `seq` and the number of SACKed ranges that lie
    /// entirely above it.
    fn sacked_above(&self, seq: SeqNumber) -> (u32, u32) {
        let mut bytes = 0u32;
        let mut ranges = 0u32;
        for &(l, r) in self.as_slice() {
            if lt(seq, r) {
                bytes = bytes.saturating_add(span(max(l, seq + 1), r));
                if lt(seq, l) {
                    ranges += 1;
                }
            }
        }
        (bytes, ranges)
    }

    /// RFC 6675 §4 `IsLost(seq)`: DupThresh discontiguous SACKed ranges
    /// above `seq`, or more than (DupThresh − 1)·SMSS bytes SACKed above it.
    pub fn is_lost(&self, seq: SeqNumber, mss: u32) -> bool {
        let (bytes, ranges) = self.sacked_above(seq);
        ranges >= DUP_THRESH || bytes > (DUP_THRESH - 1).saturating_mul(mss)
    }

    /// The holes below the highest SACKed octet, lowest first: `[a, b)`
    /// with `b` the start of the range above. At most [`MAX_SACKED`].
    fn holes(&self, una: SeqNumber) -> impl Iterator<Item = (SeqNumber, SeqNumber)> + '_ {
        let mut prev = una;
        self.as_slice().iter().filter_map(move |&(l, r)| {
            let h = (prev, l);
            prev = r;
            lt(h.0, h.1).then_some(h)
        })
    }

    /// RFC 6675 §4 `SetPipe()`: octets between SND.UNA and SND.MAX not
    /// SACKed count once if not deemed lost, and once more if at or below
    /// HighRxt (retransmitted).
    pub fn pipe(&self, una: SeqNumber, snd_max: SeqNumber, mss: u32) -> u32 {
        let mut pipe = 0u32;
        let mut count = |a: SeqNumber, b: SeqNumber, lost: bool| {
            if !lost {
                pipe = pipe.saturating_add(span(a, b));
            }
            pipe = pipe.saturating_add(span(a, min(b, self.high_rxt)));
        };
        for (a, b) in self.holes(una) {
            count(a, b, self.is_lost(a, mss));
        }
        // Above the highest SACKed octet nothing is deemed lost.
        let top = self.as_slice().last().map_or(una, |&(_, r)| max(r, una));
        count(top, snd_max, false);
        pipe
    }

    /// RFC 6675 §4 `NextSeg()`, rules 1 to 4 in order. `new_data` tells
    /// whether unsent data exists and the peer's window allows it (rule 2).
    pub fn next_seg(
        &self,
        una: SeqNumber,
        snd_max: SeqNumber,
        mss: u32,
        new_data: bool,
    ) -> NextSeg {
        // Rule 1: the smallest unSACKed octet above HighRxt, below the
        // highest SACKed octet, with IsLost.
        for (a, b) in self.holes(una) {
            let s = max(a, self.high_rxt);
            if lt(s, b) && self.is_lost(s, mss) {
                return NextSeg::Retransmit {
                    seq: s,
                    len: span(s, b).min(mss),
                    lost: true,
                };
            }
        }
        // Rule 2: new data.
        if new_data {
            return NextSeg::NewData;
        }
        // Rule 3: as rule 1 without IsLost.
        for (a, b) in self.holes(una) {
            let s = max(a, self.high_rxt);
            if lt(s, b) {
                return NextSeg::Retransmit {
                    seq: s,
                    len: span(s, b).min(mss),
                    lost: false,
                };
            }
        }
        // Rule 4: one rescue retransmission per recovery, once HighACK
        // passed RescueRxt, of the highest outstanding unSACKed octet.
        if self.rescue_rxt.is_some_and(|rr| le(una, rr)) {
            return NextSeg::Nothing;
        }
        let top = self.as_slice().last().map_or(una, |&(_, r)| max(r, una));
        let (a, b) = if lt(top, snd_max) {
            (top, snd_max)
        } else {
            match self.holes(una).last() {
                Some(h) => h,
                None => return NextSeg::Nothing,
            }
        };
        let seq = max(a, b - mss);
        NextSeg::Rescue {
            seq,
            len: span(seq, b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: SeqNumber = SeqNumber(1000);
    fn s(n: u32) -> SeqNumber {
        U + n
    }

    #[test]
    fn merge_adjacent_and_overlapping() {
        let mut sb = Scoreboard::default();
        let mx = s(100_000);
        assert!(sb.update(U, mx, &[(s(1000), s(2000))]).new_data);
        assert!(sb.update(U, mx, &[(s(3000), s(4000))]).new_data);
        // Touches both: one range.
        assert!(sb.update(U, mx, &[(s(2000), s(3000))]).new_data);
        assert_eq!(sb.as_slice(), &[(s(1000), s(4000))]);
        // Already known: not new.
        assert!(!sb.update(U, mx, &[(s(1500), s(3500))]).new_data);
        assert!(sb.update(U, mx, &[(s(500), s(1200))]).new_data);
        assert_eq!(sb.as_slice(), &[(s(500), s(4000))]);
    }

    #[test]
    fn full_scoreboard_forgets_highest() {
        let mut sb = Scoreboard::default();
        let mx = s(100_000);
        for k in 0..MAX_SACKED as u32 {
            let u = sb.update(U, mx, &[(s(2000 * k + 1000), s(2000 * k + 2000))]);
            assert_eq!(u.overflow, 0);
        }
        // Above all: dropped.
        let u = sb.update(U, mx, &[(s(50_000), s(51_000))]);
        assert_eq!(u.overflow, 1);
        assert_eq!(sb.as_slice().len(), MAX_SACKED);
        assert_eq!(sb.as_slice().last(), Some(&(s(15_000), s(16_000))));
        // Below: inserted, the highest goes.
        let u = sb.update(U, mx, &[(s(100), s(200))]);
        assert_eq!(u.overflow, 1);
        assert_eq!(sb.as_slice()[0], (s(100), s(200)));
        assert_eq!(sb.as_slice().last(), Some(&(s(13_000), s(14_000))));
        // Merging needs no room.
        let u = sb.update(U, mx, &[(s(200), s(1000))]);
        assert_eq!(u.overflow, 0);
        assert_eq!(sb.as_slice()[0], (s(100), s(2000)));
    }

    #[test]
    fn advance_trims() {
        let mut sb = Scoreboard::default();
        sb.update(U, s(10_000), &[(s(1000), s(2000)), (s(3000), s(4000))]);
        sb.advance(s(1500));
        assert_eq!(sb.as_slice(), &[(s(1500), s(2000)), (s(3000), s(4000))]);
        sb.advance(s(4000));
        assert!(sb.is_empty());
    }

    #[test]
    fn is_lost_by_bytes_or_ranges() {
        let mut sb = Scoreboard::default();
        sb.update(U, s(10_000), &[(s(1000), s(3000))]);
        // 2000 bytes = 2·SMSS above: not more than (3 − 1)·SMSS.
        assert!(!sb.is_lost(U, 1000));
        sb.update(U, s(10_000), &[(s(3000), s(3001))]);
        assert!(sb.is_lost(U, 1000));
        // Three small discontiguous ranges.
        let mut sb = Scoreboard::default();
        sb.update(U, s(10_000), &[(s(100), s(110)), (s(200), s(210))]);
        assert!(!sb.is_lost(U, 1000));
        sb.update(U, s(10_000), &[(s(300), s(310))]);
        assert!(sb.is_lost(U, 1000));
        assert!(!sb.is_lost(s(150), 1000));
    }

    #[test]
    fn pipe_counts_unsacked_not_lost_and_retransmitted() {
        let mut sb = Scoreboard::default();
        // Holes [0,1000) and [4000,5000); SACKed 1000..4000, 5000..6000;
        // in flight up to 8000.
        sb.update(U, s(8000), &[(s(1000), s(4000)), (s(5000), s(6000))]);
        sb.start_recovery(U);
        // [0,1000) lost (4000 B above); [4000,5000) not (1000 B); top 2000.
        assert_eq!(sb.pipe(U, s(8000), 1000), 1000 + 2000);
        sb.retransmitted(s(1000));
        assert_eq!(sb.pipe(U, s(8000), 1000), 1000 + 1000 + 2000);
    }

    #[test]
    fn next_seg_rule_order() {
        let mut sb = Scoreboard::default();
        let mx = s(8000);
        sb.update(U, mx, &[(s(1000), s(4000)), (s(5000), s(6000))]);
        sb.start_recovery(U);
        assert_eq!(
            sb.next_seg(U, mx, 1000, true),
            NextSeg::Retransmit {
                seq: U,
                len: 1000,
                lost: true
            }
        );
        sb.retransmitted(s(1000));
        assert_eq!(sb.next_seg(U, mx, 1000, true), NextSeg::NewData);
        assert_eq!(
            sb.next_seg(U, mx, 1000, false),
            NextSeg::Retransmit {
                seq: s(4000),
                len: 1000,
                lost: false
            }
        );
        sb.retransmitted(s(5000));
        // RescueRxt = 1000 and HighACK = 0: no rescue yet.
        assert_eq!(sb.next_seg(U, mx, 1000, false), NextSeg::Nothing);
        // HighACK must pass RescueRxt: an ACK of exactly the fast
        // retransmit is not enough.
        sb.advance(s(1000));
        assert_eq!(sb.next_seg(s(1000), mx, 1000, false), NextSeg::Nothing);
        sb.advance(s(4000));
        assert_eq!(
            sb.next_seg(s(4000), mx, 1000, false),
            NextSeg::Rescue {
                seq: s(7000),
                len: 1000
            }
        );
        sb.rescued(mx);
        assert_eq!(sb.next_seg(s(4000), mx, 1000, false), NextSeg::Nothing);
    }

    #[test]
    fn bogus_blocks_ignored() {
        let mut sb = Scoreboard::default();
        let u = sb.update(
            U,
            s(5000),
            &[
                (s(2000), s(1000)),                     // inverted
                (s(0), s(0)),                           // empty
                (U - 500, U),                           // at or below SND.UNA
                (s(4000), s(6000)),                     // above SND.MAX
                (SeqNumber(U.0 ^ 0x8000_0000), s(100)), // half the space away
                (U - 500, s(100)),                      // straddles SND.UNA
            ],
        );
        assert_eq!(u.ignored, 5);
        // The last one is trimmed to SND.UNA.
        assert_eq!(sb.as_slice(), &[(U, s(100))]);
    }
}
