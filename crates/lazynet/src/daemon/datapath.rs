//! The data path: frames from the NIC into applications' areas, datagrams
//! the daemon's stack reassembled for them, and frames from their areas
//! onto the NIC, each checked after it is copied (`txcheck`).
//!
//! **Owns:** steps 2–4 of [`Daemon::step`] (see the module docs).
//! **May not touch:** commands and bindings (the control path's).

use super::*;

impl<N: Nic> Daemon<N> {
    /// Datagrams the daemon's stack reassembled for applications' sockets
    /// (step 3): each is handed on as one unfragmented frame, or cut again
    /// into fragments that fit the application's buffers
    /// ([`App::deliver_datagram`]), copied into the application's area like
    /// any other frame. Bounded by the channels' capacities.
    pub(super) fn reassembled(&mut self) -> usize {
        self.ready_ids.clear();
        self.stack
            .daemon_port()
            .classifier()
            .take_ready(&mut self.ready_ids);
        let mut work = 0;
        for i in 0..self.ready_ids.len() {
            let c = ChannelId(self.ready_ids[i]);
            let Some(Some(o)) = self.chans.get(c.0 as usize).copied() else {
                // The daemon's own sockets (offload): TCP's service finds
                // the channel on the ready list.
                self.stack.daemon_port().classifier().mark_ready(c);
                continue;
            };
            let mac = self.stack.mac();
            for _ in 0..DAEMON_CHAN_CAP {
                let Some((n, src, dst)) = self
                    .stack
                    .daemon_port()
                    .pop_reassembled(c, &mut self.scratch)
                else {
                    break;
                };
                work += 1;
                let Some(a) = self.apps[o.app as usize].as_mut() else {
                    continue;
                };
                let (k, whole) = a.deliver_datagram(
                    (o.slot, o.id, o.notify),
                    mac,
                    (src, dst),
                    &self.scratch[..n],
                );
                self.stats.delivered += k as u64;
                if whole && k > 1 {
                    self.stats.refragmented += 1;
                }
            }
        }
        work
    }

    /// Receives one batch and delivers it (step 2).
    pub(super) fn receive(&mut self) -> usize {
        let n = self.stack.nic_mut().recv(&mut self.rx[..RX_BATCH]);
        self.stats.rx_frames += n as u64;
        for i in 0..n {
            let d = self.rx[i];
            let Some(f) = self.stack.nic().buffers().frame(d) else {
                continue;
            };
            let v = self.stack.demux().classify(f);
            if let Verdict::Channel(c) = v {
                if let Some(Some(o)) = self.chans.get(c.0 as usize) {
                    let o = *o;
                    if let Some(a) = self.apps[o.app as usize].as_mut() {
                        self.stats.delivered += u64::from(a.deliver(o.slot, o.id, o.notify, f));
                    }
                    self.rel.push(d);
                    continue;
                }
                if c == CONTROL && is_arp_reply(f) {
                    for a in self.apps.iter_mut().flatten() {
                        a.deliver(0, 0, false, f);
                    }
                }
                // An ICMP "fragmentation needed" about an application's
                // connection is that application's (its TCP shrinks its
                // segments): onto its control slot, as its own stack
                // would have received it.
                if c == CONTROL {
                    let ours = self.stack.addr();
                    let quoted = crate::stack::frag_needed_quote(f, ours);
                    let owner = quoted
                        .and_then(|(l, r)| self.stack.demux().lookup_tcp_conn(l, r))
                        .and_then(|ch| self.chans.get(ch.0 as usize).copied().flatten());
                    if let Some(o) = owner {
                        if let Some(a) = self.apps[o.app as usize].as_mut() {
                            self.stats.delivered += u64::from(a.deliver(0, 0, false, f));
                        }
                        self.rel.push(d);
                        continue;
                    }
                }
            }
            if self
                .stack
                .daemon_port()
                .classifier()
                .deliver_classified(d, v)
                .is_err()
            {
                self.rel.push(d);
            }
        }
        if !self.rel.is_empty() {
            self.stack.nic_mut().release(&self.rel);
            self.rel.clear();
        }
        n
    }

    /// Forwards up to [`TX_PER_STEP`] frames of application `k` (step 4).
    pub(super) fn transmit(&mut self, k: usize) -> usize {
        let mut ds = [Desc::default(); TX_PER_STEP];
        let n = match self.apps[k].as_mut() {
            Some(a) => a.tx.pop(&mut ds),
            None => 0,
        };
        if n == 0 {
            return 0;
        }
        self.txa.resize(n, 0);
        let got = self.stack.nic_mut().alloc(&mut self.txa[..n]);
        self.txa.truncate(got);
        let us = txcheck::Us {
            mac: self.stack.mac(),
            addr: self.stack.addr(),
        };
        let max_len = self.stack.nic().mtu() + 14;
        // NIC buffers are taken in order by the frames that pass the
        // descriptor check; those left over go back.
        let mut next_nb = 0;
        for &d in &ds[..n] {
            let a = self.apps[k].as_mut().expect("checked");
            a.count(AppCounter::TxFrames);
            if !a.area.valid(d) || (d.len as usize) < 14 || d.len as usize > max_len {
                a.count(AppCounter::BadDescriptor);
                if d.buf < a.bufs.count() && a.done.push_one(d.buf).is_err() {
                    a.count(AppCounter::DoneFull);
                }
                continue;
            }
            let Some(&nb) = self.txa.get(next_nb) else {
                a.count(AppCounter::TxDropped);
                if a.done.push_one(d.buf).is_err() {
                    a.count(AppCounter::DoneFull);
                }
                continue;
            };
            next_nb += 1;
            let len = d.len as usize;
            let verdict = match (
                a.bufs.frame(d),
                self.stack.nic_mut().buffers_mut().buf_mut(nb),
            ) {
                (Some(src), Some(dst)) if dst.len() >= len => {
                    dst[..len].copy_from_slice(src);
                    // Checked on our copy: the application cannot change it now.
                    let who = txcheck::Sender {
                        k: k as u16,
                        ports: &self.ports,
                        frags: &a.frags,
                    };
                    txcheck::check(&dst[..len], us, who)
                }
                _ => Err(AppCounter::BadDescriptor),
            };
            if a.done.push_one(d.buf).is_err() {
                a.count(AppCounter::DoneFull);
            }
            let ident = match verdict {
                Ok(txcheck::Pass::AsIs) => None,
                Ok(txcheck::Pass::Ident(i)) => Some(i),
                Ok(txcheck::Pass::First {
                    app_ident,
                    dst,
                    proto,
                }) => {
                    let i = self.stack.next_ip_ident(dst, proto);
                    let a = self.apps[k].as_mut().expect("checked");
                    a.frags.insert(app_ident, dst, proto, i);
                    Some(i)
                }
                Err(c) => {
                    let a = self.apps[k].as_mut().expect("checked");
                    a.count(c);
                    self.rel.push(Desc::new(nb, 0));
                    continue;
                }
            };
            if let (Some(i), Some(f)) = (ident, self.stack.nic_mut().buffers_mut().buf_mut(nb)) {
                txcheck::set_ident(&mut f[..len], i);
            }
            self.txb.push(Desc::new(nb, len as u16));
        }
        for &nb in &self.txa[next_nb.min(self.txa.len())..] {
            self.rel.push(Desc::new(nb, 0));
        }
        let sent = self.stack.nic_mut().send(&self.txb);
        self.stats.tx_frames += sent as u64;
        if sent < self.txb.len() {
            let a = self.apps[k].as_mut().expect("checked");
            a.counters[AppCounter::TxDropped as usize] += (self.txb.len() - sent) as u64;
            for &d in &self.txb[sent..] {
                self.rel.push(Desc::new(d.buf, 0));
            }
        }
        self.txb.clear();
        if !self.rel.is_empty() {
            self.stack.nic_mut().release(&self.rel);
            self.rel.clear();
        }
        n
    }
}

fn is_arp_reply(f: &[u8]) -> bool {
    f.len() >= 42 && f[12..14] == [0x08, 0x06] && f[20..22] == [0, 2]
}
