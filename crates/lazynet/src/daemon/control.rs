//! The control path: attaching applications (the hello, building their
//! areas), reclaiming those whose connection closed, and applying their
//! commands — the bind policy (a port another application holds is
//! refused; a connection's local port must be the application's).
//!
//! **Owns:** admission and reclaim, and every command's check.
//! **May not touch:** frames (the data path's).

use super::*;

impl<N: Nic> Daemon<N> {
    /// Accepts connections, answers hellos and statistics requests, and
    /// reclaims applications whose connection closed. Bounded by
    /// [`MAX_PENDING`] and the number of applications.
    pub(super) fn control(&mut self) -> usize {
        let mut work = 0;
        for _ in 0..MAX_PENDING {
            match ctl::accept(&self.listener) {
                Ok(c) => {
                    if self.pending.len() == MAX_PENDING {
                        // The oldest silent connection makes room.
                        self.pending.remove(0);
                        self.stats.refused += 1;
                    }
                    self.pending.push((c, Instant::now()));
                    work += 1;
                }
                Err(_) => break,
            }
        }
        let mut i = 0;
        while i < self.pending.len() {
            let got = ctl::recv_with(&self.pending[i].0, &mut self.ctl_buf);
            match got {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if self.pending[i].1.elapsed().as_secs() >= 1 {
                        self.pending.swap_remove(i);
                        self.stats.refused += 1;
                    } else {
                        i += 1;
                    }
                }
                Ok(Some((Ok(Msg::Hello), _fds))) => {
                    let (c, _) = self.pending.swap_remove(i);
                    work += 1;
                    if let Err(e) = self.admit(c) {
                        self.stats.refused += 1;
                        let _ = e;
                    }
                }
                Ok(Some((Ok(Msg::HelloOffload), _fds))) => {
                    let (c, _) = self.pending.swap_remove(i);
                    work += 1;
                    if self.admit_client(c).is_err() {
                        self.stats.refused += 1;
                    }
                }
                Ok(Some((Ok(Msg::StatsRequest), _))) => {
                    let (c, _) = self.pending.swap_remove(i);
                    let _ = ctl::send(&c, &Msg::Stats(self.stats_text()), &[]);
                    work += 1;
                }
                Ok(Some((m, _))) => {
                    let (c, _) = self.pending.swap_remove(i);
                    let e = match m {
                        Err(e) => e,
                        Ok(_) => CtlError::Garbage,
                    };
                    let _ = ctl::send(&c, &Msg::Refused(e), &[]);
                    self.stats.refused += 1;
                }
                Ok(None) | Err(_) => {
                    self.pending.swap_remove(i);
                }
            }
        }
        for a in self.apps.iter_mut().flatten() {
            a.publish_counters();
        }
        for c in self.offload.clients.iter_mut().flatten() {
            c.publish_counters();
        }
        for k in 0..self.offload.clients.len() {
            let gone = match &self.offload.clients[k] {
                None => false,
                Some(c) => match ctl::recv_with(&c.conn, &mut self.ctl_buf) {
                    Err(e) => e.kind() != io::ErrorKind::WouldBlock,
                    Ok(None) => true,
                    Ok(Some(_)) => false,
                },
            };
            if gone && self.offload.reclaim(&mut self.stack, &mut self.ports, k) {
                self.stats.detached += 1;
                work += 1;
            }
        }
        for k in 0..self.apps.len() {
            let gone = match &self.apps[k] {
                None => false,
                Some(a) => match ctl::recv_with(&a.conn, &mut self.ctl_buf) {
                    Err(e) => e.kind() != io::ErrorKind::WouldBlock,
                    Ok(None) => true,
                    // An attached application has nothing more to say.
                    Ok(Some(_)) => false,
                },
            };
            if gone {
                self.reclaim(k);
                work += 1;
            }
        }
        work
    }

    /// Builds an area for a new application and sends it over.
    pub(super) fn admit(&mut self, conn: OwnedFd) -> io::Result<()> {
        let Some(k) = self.apps.iter().position(|a| a.is_none()) else {
            let _ = ctl::send(&conn, &Msg::Refused(CtlError::Full), &[]);
            return Err(io::Error::other("full"));
        };
        let id = self.next_id;
        let app = match self.build_app(k, id, conn) {
            Ok(a) => a,
            Err((conn, e)) => {
                let _ = ctl::send(&conn, &Msg::Refused(CtlError::NoMemory), &[]);
                return Err(e);
            }
        };
        let w = Welcome {
            app_id: id,
            addr: self.stack.addr(),
            prefix_len: self.cfg.stack.prefix_len,
            gateway: self.cfg.stack.gateway,
            mac: self.stack.mac(),
            mtu: self.stack.nic().mtu().min(u16::MAX as usize) as u16,
            eph_first: app.eph.0,
            eph_last: app.eph.1,
        };
        ctl::send(
            &app.conn,
            &Msg::Welcome(w),
            &[app.area.region().fd(), self.wake.fd()],
        )?;
        self.next_id += 1;
        self.stats.attached += 1;
        self.apps[k] = Some(app);
        Ok(())
    }

    /// Builds a job area for a new MemNet client and sends it over.
    pub(super) fn admit_client(&mut self, conn: OwnedFd) -> io::Result<()> {
        if self.cfg.placement != Placement::Offload {
            let _ = ctl::send(&conn, &Msg::Refused(CtlError::Placement), &[]);
            return Err(io::Error::other("not offload"));
        }
        let Some(k) = self.offload.clients.iter().position(|c| c.is_none()) else {
            let _ = ctl::send(&conn, &Msg::Refused(CtlError::Full), &[]);
            return Err(io::Error::other("full"));
        };
        let id = self.next_id;
        let area = match JobArea::create(&format!("lazynet-memnet-{id}"), self.cfg.jobs) {
            Ok(a) => a,
            Err(e) => {
                let _ = ctl::send(&conn, &Msg::Refused(CtlError::NoMemory), &[]);
                return Err(e);
            }
        };
        let w = Welcome {
            app_id: id,
            addr: self.stack.addr(),
            prefix_len: self.cfg.stack.prefix_len,
            gateway: self.cfg.stack.gateway,
            mac: self.stack.mac(),
            mtu: self.stack.nic().mtu().min(u16::MAX as usize) as u16,
            eph_first: 0,
            eph_last: 0,
        };
        ctl::send(
            &conn,
            &Msg::Welcome(w),
            &[area.region().fd(), self.wake.fd()],
        )?;
        let c = offload::Client::new(id, conn, area, self.wake.clone())?;
        self.next_id += 1;
        self.stats.attached += 1;
        self.offload.clients[k] = Some(c);
        Ok(())
    }

    pub(super) fn build_app(
        &mut self,
        k: usize,
        id: u32,
        conn: OwnedFd,
    ) -> Result<App, (OwnedFd, io::Error)> {
        let p = self.cfg.area;
        let area = match AppArea::create(&format!("lazynet-app-{id}"), p) {
            Ok(a) => a,
            Err(e) => return Err((conn, e)),
        };
        let r = (|| -> io::Result<_> {
            let l = *area.layout();
            let reg = area.region();
            let mut slots = Vec::with_capacity(p.slots as usize);
            let mut flags = Vec::with_capacity(p.slots as usize);
            for s in 0..p.slots {
                slots.push(Producer::attach(reg, l.slot(s))?);
                flags.push(area.flag(s)?);
            }
            Ok((
                area.bufs()?,
                area.daemon_bell(self.wake.clone())?,
                area.app_bell()?,
                Consumer::attach(reg, l.free)?,
                Consumer::attach(reg, l.tx)?,
                Producer::attach(reg, l.done)?,
                Producer::attach(reg, l.ready)?,
                Consumer::attach(reg, l.cmd)?,
                Producer::attach(reg, l.reply)?,
                slots,
                flags,
            ))
        })();
        let (bufs, bell, app_bell, free, tx, done, ready, cmd, reply, slots, flags) = match r {
            Ok(v) => v,
            Err(e) => return Err((conn, e)),
        };
        let eph = self.ports.app_range(k as u16);
        Ok(App {
            id,
            pid: ctl::peer_pid(&conn),
            conn,
            area,
            bufs,
            bell,
            app_bell,
            free,
            tx,
            done,
            ready,
            cmd,
            reply,
            slots,
            flags,
            bound: vec![None; p.slots as usize],
            eph,
            applied: 0,
            delivered: 0,
            counters: [0; COUNTERS],
            ready_pend: Vec::with_capacity(p.slots as usize),
            dirty: false,
            frag_ident: 0,
            frags: txcheck::Frags::default(),
        })
    }

    /// Unbinds everything application `k` had and drops its area.
    pub(super) fn reclaim(&mut self, k: usize) {
        let Some(mut a) = self.apps[k].take() else {
            return;
        };
        let now = self.stack.now();
        for s in 0..a.bound.len() {
            if let Some((b, c)) = a.bound[s].take() {
                self.unbind(k, b, c);
                if let Binding::Conn(l, r) = b {
                    self.stack.daemon_port().probe_dead(l, r, now);
                }
            }
        }
        self.stack.nic_mut().flush();
        self.stats.detached += 1;
        drop(a);
    }

    /// Removes one binding from the classifier and the port tables.
    pub(super) fn unbind(&mut self, k: usize, b: Binding, c: ChannelId) {
        let mut left = Vec::new();
        let d = self.stack.daemon_port().classifier();
        let _ = match b {
            Binding::Udp(a, p) => d.unbind_udp(a, p, &mut left),
            Binding::Listen(a, p) => d.unbind_tcp_listen(a, p, &mut left),
            Binding::Conn(l, r) => d.unbind_tcp_conn(l, r, &mut left),
        };
        let mut gone = Vec::new();
        d.take_detached(&mut gone);
        self.release_queued(&left);
        if let Some(o) = self.chans.get_mut(c.0 as usize) {
            *o = None;
        }
        let me = ports::Holder::App(k as u16);
        match b {
            Binding::Udp(_, p) => self.ports.release(false, p, me),
            Binding::Listen(_, p) => self.ports.release(true, p, me),
            Binding::Conn(..) => {}
        }
    }

    /// Frames left on a daemon channel (reassembled datagrams the stack
    /// queued there) are the stack's to free: give them back through it.
    pub(super) fn release_queued(&mut self, left: &[Desc]) {
        for &d in left {
            self.stack.daemon_port().release(d);
        }
    }

    /// Applies up to [`CMDS_PER_STEP`] commands of application `k`.
    pub(super) fn commands(&mut self, k: usize) -> usize {
        let mut n = 0;
        while n < CMDS_PER_STEP {
            let Some(c) = self.apps[k].as_mut().and_then(|a| a.cmd.pop_one()) else {
                break;
            };
            n += 1;
            let op = Op::from_u32(c.op);
            let r = self.apply(k, op, &c);
            let a = self.apps[k].as_mut().expect("checked");
            if r.is_err() {
                a.count(AppCounter::CmdRefused);
            }
            // Every refusal is answered, typed: a command the application
            // waits for, and one it did not (a connection whose 4-tuple
            // is taken learns it from the reply's channel id).
            if op.is_some_and(Op::needs_reply) || r.is_err() {
                let code = r.err().map_or(0, |e| e as u32);
                // A full reply ring is the application's own doing.
                let _ = a.reply.push_one(Reply {
                    seq: c.seq,
                    code,
                    id: c.id,
                    op: c.op,
                });
                a.dirty = true;
            }
            a.applied += 1;
        }
        if n > 0 {
            let a = self.apps[k].as_mut().expect("checked");
            a.area.published().set_applied(a.applied);
            a.app_bell.ring();
        }
        n
    }

    pub(super) fn apply(&mut self, k: usize, op: Option<Op>, c: &Cmd) -> Result<(), Refusal> {
        let op = op.ok_or(Refusal::Invalid)?;
        let ours = self.stack.addr();
        let laddr = Ipv4Addr::from(c.laddr);
        if !laddr.is_unspecified() && laddr != ours {
            return Err(Refusal::NotOurAddress);
        }
        let me = ports::Holder::App(k as u16);
        let a = self.apps[k].as_ref().expect("checked");
        let slot = c.slot as usize;
        let (lport, raddr, rport) = (c.lport, Ipv4Addr::from(c.raddr), c.rport);
        let binding = match op {
            Op::BindUdp | Op::UnbindUdp => Binding::Udp(laddr, lport),
            Op::Listen | Op::Unlisten => Binding::Listen(laddr, lport),
            Op::Conn | Op::Unconn => Binding::Conn(
                SocketAddrV4::new(ours, lport),
                SocketAddrV4::new(raddr, rport),
            ),
        };
        if matches!(op, Op::UnbindUdp | Op::Unlisten | Op::Unconn) {
            let s = a
                .bound
                .iter()
                .position(|b| matches!(b, Some((x, _)) if *x == binding))
                .ok_or(Refusal::Invalid)?;
            let (b, ch) = self.apps[k].as_mut().expect("checked").bound[s]
                .take()
                .expect("found");
            self.unbind(k, b, ch);
            return Ok(());
        }
        // Slots 0 and 1 are the control and fragment channels.
        if !(2..a.bound.len()).contains(&slot) || a.bound[slot].is_some() || lport == 0 {
            return Err(Refusal::Invalid);
        }
        let (ch, notify) = match binding {
            Binding::Udp(addr, p) => {
                self.ports.claim(false, p, me)?;
                let d = self.stack.daemon_port().classifier();
                let Ok(ch) = d.bind_udp(addr, p, DAEMON_CHAN_CAP) else {
                    self.ports.release(false, p, me);
                    return Err(Refusal::InUse);
                };
                // The daemon's stack queues reassembled datagrams here:
                // the ready list says which channels have some.
                d.set_notify(ch, true);
                (ch, false)
            }
            Binding::Listen(addr, p) => {
                self.ports.claim(true, p, me)?;
                let Ok(ch) =
                    self.stack
                        .daemon_port()
                        .classifier()
                        .bind_tcp_listen(addr, p, DAEMON_CHAN_CAP)
                else {
                    self.ports.release(true, p, me);
                    return Err(Refusal::InUse);
                };
                (ch, true)
            }
            Binding::Conn(l, r) => {
                if !self.ports.app_may_use(k as u16, true, l.port()) {
                    return Err(Refusal::InUse);
                }
                // A 4-tuple already bound (only a misbehaving application
                // repeats its own) is refused, and the refusal answered.
                let ch = self
                    .stack
                    .daemon_port()
                    .classifier()
                    .bind_tcp_conn(l, r, DAEMON_CHAN_CAP)
                    .map_err(|_| Refusal::InUse)?;
                (ch, true)
            }
        };
        let i = ch.0 as usize;
        if self.chans.len() <= i {
            self.chans.resize(i + 1, None);
        }
        self.chans[i] = Some(Recipient {
            app: k as u16,
            slot: c.slot,
            id: c.id,
            notify,
        });
        self.apps[k].as_mut().expect("checked").bound[slot] = Some((binding, ch));
        Ok(())
    }
}
