//! Orphaned connections: those whose application closed its handle while
//! the connection still closes (FIN-WAIT-1, FIN-WAIT-2, CLOSING,
//! LAST-ACK). Nobody is left to answer for them, so they are bounded here.
//!
//! **Owns:** two intrusive FIFO lists through the connection slots — all
//! orphans, oldest first, and the orphans of each owner tag (a daemon's
//! MemNet client, a host's owner) — and the caps on both
//! ([`StackConfig::max_orphans`](crate::stack::StackConfig::max_orphans),
//! [`StackConfig::max_orphans_per_tag`](crate::stack::StackConfig::max_orphans_per_tag)):
//! orphaning one beyond a cap resets the oldest orphan of the same list
//! (Linux's `tcp_max_orphans`, but oldest first, so a burst of closes
//! cannot keep the connections that have waited longest), counted by
//! [`OrphanReset`]. A connection leaves the lists when its slot is freed
//! (CLOSED, or moved to the TIME-WAIT table).
//!
//! What an orphan may still hold is the protocol's business
//! ([`Connection::orphan`](crate::proto::tcp::Connection::orphan): no
//! receive buffer, the send buffer shrunk to what is unacknowledged, a
//! FIN-WAIT-2 timeout).
//!
//! **May not touch:** anything of a connection but its list links; the
//! reset itself is `calls`' abort and `service`'s step after it.

use super::{ConnSlot, Tcp};

/// The end of a list.
pub(in crate::stack) const NIL: u32 = u32::MAX;

/// Why an orphan was reset (each has a counter in
/// [`TcpStats::orphans_reset`](super::TcpStats::orphans_reset)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrphanReset {
    /// The stack already held [`StackConfig::max_orphans`](crate::stack::StackConfig::max_orphans).
    OverCap,
    /// Its tag already held [`StackConfig::max_orphans_per_tag`](crate::stack::StackConfig::max_orphans_per_tag).
    OverTagCap,
    /// Its tag's owner is gone ([`Stack::tcp_reset_orphans_of`](crate::stack::Stack::tcp_reset_orphans_of)).
    OwnerGone,
}

impl OrphanReset {
    /// Number of reasons.
    pub const COUNT: usize = 3;
    /// Every reason.
    pub const ALL: [OrphanReset; 3] = [
        OrphanReset::OverCap,
        OrphanReset::OverTagCap,
        OrphanReset::OwnerGone,
    ];
    /// The counter's name.
    pub const fn name(self) -> &'static str {
        match self {
            OrphanReset::OverCap => "orphans_over_cap",
            OrphanReset::OverTagCap => "orphans_over_tag_cap",
            OrphanReset::OwnerGone => "orphans_owner_gone",
        }
    }
}

/// One FIFO list: head (oldest), tail, length.
#[derive(Clone, Copy, Debug)]
pub(in crate::stack) struct List {
    head: u32,
    tail: u32,
    len: u32,
}

impl Default for List {
    fn default() -> Self {
        List {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

/// A slot's place in both lists: `[all, tag]`, each `(prev, next)`.
#[derive(Clone, Copy, Debug)]
pub(in crate::stack) struct Links {
    on: bool,
    /// The tag whose list it is on (kept: a tag could change later).
    tag: u16,
    link: [(u32, u32); 2],
}

impl Default for Links {
    fn default() -> Self {
        Links {
            on: false,
            tag: 0,
            link: [(NIL, NIL); 2],
        }
    }
}

/// The orphan lists of a stack (see the module docs).
#[derive(Debug, Default)]
pub(in crate::stack) struct Orphans {
    all: List,
    /// Per tag, grown to the largest tag orphaned (at most 65,536 small
    /// entries).
    by_tag: Vec<List>,
    max: usize,
    max_per_tag: usize,
}

impl Orphans {
    /// Empty lists with these caps.
    pub(in crate::stack) fn new(max: usize, max_per_tag: usize) -> Self {
        Orphans {
            max,
            max_per_tag,
            ..Orphans::default()
        }
    }
}

/// Which of a slot's two links.
const ALL: usize = 0;
const TAG: usize = 1;

fn links(conns: &mut [Option<ConnSlot>], i: u32) -> Option<&mut Links> {
    conns
        .get_mut(i as usize)
        .and_then(|s| s.as_mut())
        .map(|s| &mut s.orphan)
}

fn push(list: &mut List, conns: &mut [Option<ConnSlot>], which: usize, i: u32) {
    let tail = list.tail;
    if let Some(l) = links(conns, i) {
        l.link[which] = (tail, NIL);
    }
    match links(conns, tail) {
        Some(t) => t.link[which].1 = i,
        None => list.head = i,
    }
    list.tail = i;
    list.len += 1;
}

fn unlink(list: &mut List, conns: &mut [Option<ConnSlot>], which: usize, i: u32) {
    let Some((prev, next)) = links(conns, i).map(|l| l.link[which]) else {
        return;
    };
    match links(conns, prev) {
        Some(p) => p.link[which].1 = next,
        None => list.head = next,
    }
    match links(conns, next) {
        Some(n) => n.link[which].0 = prev,
        None => list.tail = prev,
    }
    if let Some(l) = links(conns, i) {
        l.link[which] = (NIL, NIL);
    }
    list.len = list.len.saturating_sub(1);
}

impl Tcp {
    /// Puts connection `i` (tag `tag`) on the orphan lists. Returns the
    /// orphans to reset now to keep both caps (the oldest of the overfull
    /// list, each with its reason): at most one per list, since each
    /// orphaning adds one.
    pub(in crate::stack) fn orphan_add(
        &mut self,
        i: u32,
        tag: u16,
    ) -> [Option<(u32, OrphanReset)>; 2] {
        let o = &mut self.orphans;
        match links(&mut self.conns, i) {
            Some(l) if !l.on => {
                l.on = true;
                l.tag = tag;
            }
            _ => return [None, None],
        }
        push(&mut o.all, &mut self.conns, ALL, i);
        let mut out = [None, None];
        if tag != 0 {
            let t = usize::from(tag);
            if o.by_tag.len() <= t {
                o.by_tag.resize(t + 1, List::default());
            }
            push(&mut o.by_tag[t], &mut self.conns, TAG, i);
            if o.by_tag[t].len as usize > o.max_per_tag {
                out[1] = Some((o.by_tag[t].head, OrphanReset::OverTagCap));
            }
        }
        if o.all.len as usize > o.max {
            let oldest = o.all.head;
            if out[1].is_none_or(|(x, _)| x != oldest) {
                out[0] = Some((oldest, OrphanReset::OverCap));
            }
        }
        out
    }

    /// Takes connection `i` off the orphan lists, if it is on them (its
    /// slot is being freed).
    pub(in crate::stack) fn orphan_remove(&mut self, i: u32) {
        let tag = match links(&mut self.conns, i) {
            Some(l) if l.on => {
                l.on = false;
                l.tag
            }
            _ => return,
        };
        let o = &mut self.orphans;
        unlink(&mut o.all, &mut self.conns, ALL, i);
        if let Some(list) = o.by_tag.get_mut(usize::from(tag)) {
            if tag != 0 {
                unlink(list, &mut self.conns, TAG, i);
            }
        }
    }

    /// The oldest orphan of tag `tag` (not 0), if any.
    pub(in crate::stack) fn oldest_orphan_of(&self, tag: u16) -> Option<u32> {
        let l = self
            .orphans
            .by_tag
            .get(usize::from(tag))
            .filter(|_| tag != 0)?;
        (l.head != NIL).then_some(l.head)
    }

    /// Orphans now.
    pub(in crate::stack) fn orphans_len(&self) -> usize {
        self.orphans.all.len as usize
    }

    /// Orphans of tag `tag` now (tag 0: those untagged are not listed by
    /// tag; all of them are in [`Tcp::orphans_len`]).
    pub(in crate::stack) fn orphans_of(&self, tag: u16) -> usize {
        if tag == 0 {
            return 0;
        }
        self.orphans
            .by_tag
            .get(usize::from(tag))
            .map_or(0, |l| l.len as usize)
    }
}
