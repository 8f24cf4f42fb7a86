//! One attached application as the daemon holds it: what its sockets are
//! bound to, who a channel delivers to, and the copies of frames into its
//! area (delivery, including a reassembled datagram cut again to fit its
//! buffers).
//!
//! **Owns:** [`App`]: the daemon's ends of one application's rings, its
//! free buffers, bindings and counters.
//! **May not touch:** another application's area; the NIC.

use super::*;

/// What one application's socket is bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Binding {
    Udp(Ipv4Addr, u16),
    Listen(Ipv4Addr, u16),
    Conn(SocketAddrV4, SocketAddrV4),
}

/// Who a channel of the daemon's classifier delivers to.
#[derive(Clone, Copy, Debug)]
pub(super) struct Recipient {
    pub(super) app: u16,
    pub(super) slot: u32,
    pub(super) id: u32,
    pub(super) notify: bool,
}

/// One attached application (see the module docs).
pub(super) struct App {
    pub(super) id: u32,
    pub(super) pid: Option<u32>,
    pub(super) conn: OwnedFd,
    pub(super) area: AppArea,
    pub(super) bufs: BufArea,
    pub(super) bell: Doorbell,
    pub(super) app_bell: Doorbell,
    pub(super) free: Consumer<u32>,
    pub(super) tx: Consumer<Desc>,
    pub(super) done: Producer<u32>,
    pub(super) ready: Producer<u32>,
    pub(super) cmd: Consumer<Cmd>,
    pub(super) reply: Producer<Reply>,
    pub(super) slots: Vec<Producer<Desc>>,
    pub(super) flags: Vec<FlagRef>,
    /// Per slot: what it is bound to and the daemon's channel.
    pub(super) bound: Vec<Option<(Binding, ChannelId)>>,
    pub(super) eph: (u16, u16),
    pub(super) applied: u64,
    pub(super) delivered: u64,
    pub(super) counters: [u64; COUNTERS],
    /// Ids armed but not yet on the `ready` ring (at most one per slot).
    pub(super) ready_pend: Vec<u32>,
    pub(super) dirty: bool,
    /// IP identification of the next datagram handed on as fragments.
    pub(super) frag_ident: u16,
    /// Its fragmented datagrams on the way out (`txcheck`).
    pub(super) frags: txcheck::Frags,
}

impl App {
    pub(super) fn count(&mut self, c: AppCounter) {
        self.counters[c as usize] += 1;
    }

    /// Copies `frame` into a free buffer of this application and queues it
    /// on `slot` (see step 2).
    #[inline]
    pub(super) fn deliver(&mut self, slot: u32, id: u32, notify: bool, frame: &[u8]) -> bool {
        self.deliver_parts(slot, id, notify, frame, &[])
    }

    /// [`App::deliver`] of the frame `head` followed by `body`. Returns
    /// whether it was queued (else it was counted as dropped).
    #[inline]
    pub(super) fn deliver_parts(
        &mut self,
        slot: u32,
        id: u32,
        notify: bool,
        head: &[u8],
        body: &[u8],
    ) -> bool {
        let s = slot as usize;
        let len = head.len() + body.len();
        if len > self.bufs.buf_size() || len > usize::from(u16::MAX) {
            self.count(AppCounter::DropTooBig);
            return false;
        }
        if self.slots[s].free() == 0 {
            self.count(AppCounter::DropSlotFull);
            return false;
        }
        let buf = loop {
            match self.free.pop_one() {
                Some(b) if b < self.bufs.count() => break b,
                Some(_) => self.count(AppCounter::BadDescriptor),
                None => {
                    self.count(AppCounter::DropNoBuffer);
                    return false;
                }
            }
        };
        let Some(dst) = self.bufs.buf_mut(buf) else {
            self.count(AppCounter::BadDescriptor);
            return false;
        };
        dst[..head.len()].copy_from_slice(head);
        dst[head.len()..len].copy_from_slice(body);
        let d = Desc::new(buf, len as u16);
        if self.slots[s].push_one(d).is_err() {
            // Checked above; an application that moved the index meanwhile
            // loses the buffer to itself only.
            let _ = self.done.push_one(buf);
            self.count(AppCounter::DropSlotFull);
            return false;
        }
        self.count(AppCounter::Delivered);
        self.dirty = true;
        if notify && self.flags[s].arm() {
            // After the push (mem::notify).
            if (!self.ready_pend.is_empty() || self.ready.push_one(id).is_err())
                && self.ready_pend.len() < self.slots.len()
            {
                self.ready_pend.push(id);
            }
        }
        true
    }

    /// Hands a UDP datagram the daemon reassembled (`udp`: its header and
    /// payload) to this application: as one unfragmented frame on `slot`
    /// if it fits a buffer, else cut again into fragments that do (RFC 791
    /// §3.2), queued on the fragment slot for the application's own stack
    /// to reassemble (IPv4 headers checksummed afresh; the UDP checksum,
    /// over the same pseudo-header, still holds). The fragments carry an
    /// identification of this application's own sequence (only the
    /// daemon's re-cut datagrams reach that slot), and go all or none:
    /// without room on the slot's ring and free buffers for every one, the
    /// datagram is dropped and counted there (an application that hands
    /// back bad buffers can still cut its own datagrams short; its stack's
    /// reassembly times them out). Returns the frames queued and whether
    /// that was the whole datagram.
    pub(super) fn deliver_datagram(
        &mut self,
        (slot, id, notify): (u32, u32, bool),
        mac: [u8; 6],
        (src, dst): (Ipv4Addr, Ipv4Addr),
        udp: &[u8],
    ) -> (usize, bool) {
        let head = |ident, more_frags, frag_offset: usize, len| {
            let mut h = [0u8; 34];
            let eth = EthernetRepr {
                src: EthernetAddress(mac),
                dst: EthernetAddress(mac),
                ethertype: ETHERTYPE_IPV4,
            };
            let ip = Ipv4Repr {
                src,
                dst,
                protocol: PROTO_UDP,
                ttl: 64,
                ident,
                dont_frag: false,
                more_frags,
                frag_offset: frag_offset as u16,
                payload_len: len,
            };
            (eth.emit(&mut h).is_ok() && ip.emit(&mut h[14..]).is_ok()).then_some(h)
        };
        if udp.is_empty() {
            self.count(AppCounter::DropTooBig);
            return (0, false);
        }
        if 34 + udp.len() <= self.bufs.buf_size() {
            let Some(h) = head(0, false, 0, udp.len()) else {
                self.count(AppCounter::DropTooBig);
                return (0, false);
            };
            let ok = self.deliver_parts(slot, id, notify, &h, udp);
            return (usize::from(ok), ok);
        }
        let Ok(plan) = fragment_plan(udp.len(), self.bufs.buf_size() - 14, 20) else {
            self.count(AppCounter::DropTooBig);
            return (0, false);
        };
        let frag = FRAGMENT_SLOT;
        let k = plan.clone().count();
        if self.slots[frag].free() < k {
            self.count(AppCounter::DropSlotFull);
            return (0, false);
        }
        if self.free.len() < k {
            self.count(AppCounter::DropNoBuffer);
            return (0, false);
        }
        let ident = self.frag_ident;
        self.frag_ident = ident.wrapping_add(1);
        let mut n = 0;
        for (off, len, more) in plan {
            let Some(h) = head(ident, more, off, len) else {
                self.count(AppCounter::DropTooBig);
                break;
            };
            if !self.deliver_parts(frag as u32, FRAGMENT.0, false, &h, &udp[off..off + len]) {
                break;
            }
            n += 1;
        }
        (n, n == k)
    }

    pub(super) fn flush_ready(&mut self) {
        let mut k = 0;
        while k < self.ready_pend.len() && self.ready.push_one(self.ready_pend[k]).is_ok() {
            k += 1;
        }
        self.ready_pend.drain(..k);
    }

    /// After each step: a delivery count and a ring of the application's
    /// bell if it got frames.
    #[inline]
    pub(super) fn publish(&mut self) {
        if self.dirty {
            self.dirty = false;
            self.delivered += 1;
            self.area.published().set_delivered(self.delivered);
            self.app_bell.ring();
        }
    }

    /// At each control check (not each step: it reads every slot ring's
    /// corruption count): the counters into the published line.
    pub(super) fn publish_counters(&mut self) {
        let corrupt = self.free.corrupt()
            + self.tx.corrupt()
            + self.cmd.corrupt()
            + self.done.corrupt()
            + self.ready.corrupt()
            + self.reply.corrupt()
            + self.slots.iter().map(|p| p.corrupt()).sum::<u64>();
        self.counters[AppCounter::RingCorrupt as usize] = corrupt;
        let p = self.area.published();
        for c in AppCounter::ALL {
            p.set_counter(c, self.counters[c as usize]);
        }
    }
}
