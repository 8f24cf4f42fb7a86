//! The TCP socket calls: what a call on a connection or listener does to
//! the stack. The public API is `socket`'s (`stack.tcp_mut(h).recv(…)`);
//! these are its bodies.
//!
//! **Owns:** opening (listen, connect: RFC 6056 ports, RFC 6528 ISNs) and
//! each call's lazy work: a call first processes its own connection's
//! queued segments, bounded, in the caller's context (LRP §3.4), then does
//! what it was asked; receive places predicted text directly (`direct`).
//!
//! **May not touch:** other connections' channels (an accept moves a
//! listener's segments to their connection through `input`).

use std::net::SocketAddrV4;

use super::service::After;
use super::{listener_stalled, ChannelOwner, ConnSlot, Cx, ListenSlot, TcpListener, TcpStream};
use crate::nic::Nic;
use crate::proto::tcp::{Config, ConnError, Connection, ListenConfig, Listener, State, TwKey};
use crate::stack::{SocketError, Stack, StackDrop, MAX_BATCH};

#[cfg_attr(lazynet_outline, cold, inline(never))]
fn conn_error(e: ConnError) -> SocketError {
    match e {
        ConnError::Refused => SocketError::ConnectionRefused,
        ConnError::Reset => SocketError::ConnectionReset,
        ConnError::TimedOut => SocketError::TimedOut,
        ConnError::AddrInUse => SocketError::AddrInUse,
    }
}

impl<N: Nic> Cx<'_, N> {
    /// Processes slot `s`'s queued segments (bounded by what is queued at
    /// entry and [`MAX_BATCH`]) in the caller's context; the slot has a
    /// live handle (the caller's), so it stays.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub(in crate::stack) fn catch_up(&mut self, s: &mut ConnSlot, idx: u32, now: u64) {
        let queued = self.demux.queued(s.chan);
        if queued > 0 {
            self.conn_input(s, now, queued.min(MAX_BATCH));
            self.conn_settle_live(s, idx, now, true);
        }
    }

    /// [`Cx::conn_settle`] on a slot whose handle the caller holds: it is
    /// not detached, so it stays.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub(in crate::stack) fn conn_settle_live(
        &mut self,
        s: &mut ConnSlot,
        idx: u32,
        now: u64,
        event: bool,
    ) {
        debug_assert!(!s.detached);
        let after = self.conn_settle(s, idx, now, event);
        debug_assert!(matches!(after, After::Keep));
    }
}

impl<N: Nic> Stack<N> {
    /// The default connection configuration, with the MSS fitted to the MTU.
    pub fn tcp_config(&self) -> Config {
        self.tcp.sh.cfg
    }

    pub(in crate::stack) fn fit_mss(&self, mut cfg: Config) -> Config {
        let mtu_mss = self
            .iface
            .mtu
            .saturating_sub(40)
            .clamp(64, u16::MAX as usize) as u16;
        cfg.mss = cfg.mss.min(mtu_mss);
        cfg
    }

    /// The listener configuration [`Stack::tcp_listen`] uses by default.
    pub fn tcp_listen_config(&self) -> ListenConfig {
        self.tcp.sh.listen_cfg
    }

    /// Listens on `local` (address `0.0.0.0` for ours; port must not be 0).
    /// Connections get `cfg` (`None`: the stack's default).
    pub fn tcp_listen(
        &mut self,
        local: SocketAddrV4,
        lcfg: Option<ListenConfig>,
        cfg: Option<Config>,
    ) -> Result<TcpListener, SocketError> {
        let addr = *local.ip();
        if !addr.is_unspecified() && addr != self.iface.addr {
            return Err(SocketError::AddrNotAvailable);
        }
        if local.port() == 0 {
            return Err(SocketError::AddrNotAvailable);
        }
        let lcfg = lcfg.unwrap_or(self.tcp.sh.listen_cfg);
        // The channel holds at least a backlog's worth of handshakes.
        let cap = self.tcp.sh.chan_cap.max(lcfg.backlog.min(1 << 16));
        let chan = self
            .demux
            .bind_tcp_listen(addr, local.port(), cap)
            .map_err(|_| SocketError::AddrInUse)?;
        self.ni_bind(
            chan,
            cap,
            crate::stack::ni::BindKind::Listen(addr, local.port()),
        )?;
        let cfg = cfg.unwrap_or(self.tcp.sh.cfg);
        let mut cfg = self.fit_mss(cfg);
        // The listener gives each passive connection its own TSval offset
        // (`Secret::ts_offset` of the 4-tuple) from its SYN-ACK on.
        cfg.ts_offset = 0;
        let me = SocketAddrV4::new(self.iface.addr, local.port());
        let l = Listener::new(lcfg, cfg, me, &self.tcp.sh.secret);
        let idx = match self.tcp.free_listeners.pop() {
            Some(i) => i,
            None => {
                self.tcp.listeners.push(None);
                self.tcp.listen_gen.push(0);
                (self.tcp.listeners.len() - 1) as u32
            }
        };
        let gen = self.tcp.listen_gen[idx as usize];
        self.tcp.listeners[idx as usize] = Some(ListenSlot {
            l,
            chan,
            gen,
            bound: local,
            armed: None,
            in_events: false,
        });
        self.tcp.set_owner(chan, ChannelOwner::Listener(idx));
        Ok(TcpListener { idx, gen })
    }

    /// The body of `TcpListenerRef::accept`.
    pub(crate) fn tcp_accept(
        &mut self,
        h: TcpListener,
        now: u64,
    ) -> Result<TcpStream, SocketError> {
        let s = self.tcp.listener(h)?;
        let chan = s.chan;
        let queued = self.demux.queued(chan);
        if self.listen_input(h.idx, now, queued.min(MAX_BATCH), false) > 0 {
            self.listen_settle(h.idx, now);
        }
        let Some(Some(s)) = self.tcp.listeners.get_mut(h.idx as usize) else {
            return Err(SocketError::BadHandle);
        };
        let Some((_, conn)) = s.l.accept() else {
            return Err(SocketError::WouldBlock);
        };
        let tag = self.tcp.tag_of(chan.0);
        let c = self.install_conn(conn)?;
        if let Some(Some(s)) = self.tcp.conns.get(c.idx as usize) {
            self.tcp.tags[s.chan.0 as usize] = tag;
        }
        self.tcp.sh.stats.accepted += 1;
        // Room in the accept queue again: resume the listener.
        self.demux.mark_ready(chan);
        self.conn_settle(c.idx, now, false);
        Ok(c)
    }

    /// The body of `TcpListenerRef::stalled`.
    pub(crate) fn tcp_listen_stalled(&self, h: TcpListener) -> Result<bool, SocketError> {
        let s = self.tcp.listener(h)?;
        Ok(listener_stalled(&s.l, !self.mode.eager_protocol()))
    }

    /// The body of `TcpListenerRef::syn_queue_len`.
    pub(crate) fn tcp_syn_queue_len(&self, h: TcpListener) -> Result<usize, SocketError> {
        Ok(self.tcp.listener(h)?.l.syn_queue_len())
    }

    /// The body of `TcpListenerRef::accept_queue_len`.
    pub(crate) fn tcp_accept_queue_len(&self, h: TcpListener) -> Result<usize, SocketError> {
        Ok(self.tcp.listener(h)?.l.accept_queue_len())
    }

    /// The body of `TcpListenerRef::counters`.
    pub(crate) fn tcp_listener_counters(
        &self,
        h: TcpListener,
    ) -> Result<crate::proto::tcp::ListenCounters, SocketError> {
        Ok(*self.tcp.listener(h)?.l.counters())
    }

    /// The body of `TcpListenerRef::pending`.
    pub(crate) fn tcp_listen_pending(&self, h: TcpListener) -> Result<usize, SocketError> {
        let s = self.tcp.listener(h)?;
        Ok(self.demux.queued(s.chan))
    }

    /// The body of `TcpListenerRef::addr`.
    pub(crate) fn tcp_listen_addr(&self, h: TcpListener) -> Result<SocketAddrV4, SocketError> {
        Ok(self.tcp.listener(h)?.bound)
    }

    /// The body of `TcpListenerRef::close`: nothing of the listener is left
    /// (RFC 9293 §3.10.5 ABORT for every entry, see
    /// [`Listener::poll_close`]). Work: at most `syn_queue + backlog` RSTs, sent
    /// in batches; one that finds no transmit buffer is counted
    /// (`TxNoBuffer`) and not retried. Not rate limited: the RSTs answer
    /// our own close, not a peer's segments, and are bounded by the queues.
    pub(crate) fn tcp_listen_close(&mut self, h: TcpListener, now: u64) -> Result<(), SocketError> {
        self.tcp.listener(h)?;
        let Some(mut s) = self.tcp.listeners[h.idx as usize].take() else {
            return Err(SocketError::BadHandle);
        };
        self.registry
            .forget(crate::stack::ready::SocketId::Listener(h));
        let mut left = Vec::new();
        let _ = self
            .demux
            .unbind_tcp_listen(*s.bound.ip(), s.bound.port(), &mut left);
        self.ni_unbind(crate::stack::ni::BindKind::Listen(
            *s.bound.ip(),
            s.bound.port(),
        ));
        self.tcp.set_owner(s.chan, ChannelOwner::None);
        for d in left {
            self.stats.drops[StackDrop::SocketClosed as usize] += 1;
            self.stats.rx_frame_drops += 1;
            self.iface.release(d);
        }
        let (sent, unsent) = self.iface.listen_close_output(&mut s.l, now);
        self.tcp.sh.stats.resets_sent += sent as u64;
        self.tcp.sh.stats.segments_out += sent as u64;
        self.tcp.sh.stats.close_resets_unsent += unsent as u64;
        self.tcp.listen_gen[h.idx as usize] = self.tcp.listen_gen[h.idx as usize].wrapping_add(1);
        self.tcp.free_listeners.push(h.idx);
        self.iface.flush_release();
        Ok(())
    }

    /// Active open to `remote` from our address and an ephemeral port
    /// (RFC 6056 Algorithm 3) with an RFC 6528 ISN; the SYN goes out now.
    pub fn tcp_connect(
        &mut self,
        remote: SocketAddrV4,
        cfg: Option<Config>,
        now: u64,
    ) -> Result<TcpStream, SocketError> {
        if remote.port() == 0 || remote.ip().is_unspecified() || remote.ip().is_broadcast() {
            return Err(SocketError::AddrNotAvailable);
        }
        self.iface
            .next_hop(*remote.ip())
            .ok_or(SocketError::NoRoute)?;
        let me = self.iface.addr;
        let demux = &self.demux;
        let tw = &self.tcp.sh.tw;
        let port = self
            .tcp
            .sh
            .ports
            .allocate(&self.tcp.sh.secret, me, remote, |p| {
                let local = SocketAddrV4::new(me, p);
                demux.tcp_conn_used(local, remote)
                    || demux.tcp_listen_used(me, p)
                    || tw.lookup(&TwKey { local, remote }).is_some()
            })
            .ok_or(SocketError::NoPorts)?;
        let local = SocketAddrV4::new(me, port);
        let mut cfg = self.fit_mss(cfg.unwrap_or(self.tcp.sh.cfg));
        // RFC 7323 §5.4: the TSval offset of this 4-tuple.
        cfg.ts_offset = self.tcp.sh.secret.ts_offset(local, remote);
        let iss = self.tcp.sh.secret.isn(local, remote, now);
        let conn = Connection::connect(cfg, local, remote, iss, now);
        let h = self.install_conn(conn)?;
        self.tcp.sh.stats.connects += 1;
        self.conn_settle(h.idx, now, false);
        self.iface.flush_release();
        self.iface.nic.flush();
        Ok(h)
    }

    /// Processes the connection's queued segments (bounded by what is
    /// queued at entry and [`MAX_BATCH`]) in the caller's context.
    fn conn_catch_up(&mut self, h: TcpStream, now: u64) -> Result<(), SocketError> {
        let (mut cx, s) = self.conn_split_handle(h)?;
        cx.catch_up(s, h.idx, now);
        Ok(())
    }

    /// The body of `TcpStreamRef::recv`. The connection's queued segments are processed here, in the
    /// caller's context (LRP §3.4), in-order text going straight into `buf`
    /// where it can (direct placement). Once `buf` is full, segments
    /// still queued wait for the next read or for the connection's
    /// protocol handler ([`Stack::tcp_service`]). One lookup of the slot.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub(crate) fn tcp_recv(
        &mut self,
        h: TcpStream,
        buf: &mut [u8],
        now: u64,
    ) -> Result<usize, SocketError> {
        let (mut cx, s) = self.conn_split_handle(h)?;
        let mut n = 0;
        if !buf.is_empty() && cx.demux.queued(s.chan) > 0 {
            let mut empty = s.conn.recv_queue() == 0;
            if !empty {
                // Bytes in the receive buffer come first (often the tail
                // of a segment the last read placed in part); once it is
                // empty, what is queued may still go straight to `buf`.
                n = s.conn.recv(buf);
                empty = s.conn.recv_queue() == 0;
            }
            if empty && n < buf.len() {
                n += cx.conn_direct(s, h.idx, &mut buf[n..], now);
            }
        }
        if n < buf.len() {
            cx.catch_up(s, h.idx, now);
        }
        // Else `buf` is full: what is still queued waits for the next read
        // (or `tcp_service`), which may place it directly; catching up now
        // would move it all through the receive buffer.
        n += s.conn.recv(&mut buf[n..]);
        if n > 0 {
            // A window update may be due (RFC 9293 §3.8.6.2.2): `recv` sets
            // no other reason to send. The last `conn_settle` ran after the
            // last input, and what it left unsent waits on a timer it armed
            // (a delayed ACK, a retry for want of buffers), so without an
            // ACK owed `conn_settle` would send nothing and re-arm the same
            // deadline; the full `wants_output` cost more than this load
            // (docs/PERFORMANCE.md, 4.2).
            if s.conn.ack_owed() {
                cx.conn_settle_live(s, h.idx, now, false);
            }
            cx.iface.flush_release();
            cx.iface.nic.flush();
            return Ok(n);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        if let Some(e) = s.conn.error() {
            return Err(conn_error(e));
        }
        if s.conn.recv_finished() {
            return Ok(0);
        }
        match s.conn.state() {
            State::Closed => Err(SocketError::NotConnected),
            _ => Err(SocketError::WouldBlock),
        }
    }

    /// The body of `TcpStreamRef::send`.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub(crate) fn tcp_send(
        &mut self,
        h: TcpStream,
        data: &[u8],
        now: u64,
    ) -> Result<usize, SocketError> {
        self.tcp_send_by(h, data.len(), now, |c| c.send(data))
    }

    /// The body of `TcpStreamRef::send_with`.
    pub(crate) fn tcp_send_with(
        &mut self,
        h: TcpStream,
        n: usize,
        now: u64,
        fill: impl FnMut(usize, &mut [u8]),
    ) -> Result<usize, SocketError> {
        self.tcp_send_by(h, n, now, |c| c.send_with(n, fill))
    }

    /// A send of `n` bytes that `push` puts into the connection's buffer.
    #[cfg_attr(lazynet_pin, inline(always))]
    fn tcp_send_by(
        &mut self,
        h: TcpStream,
        len: usize,
        now: u64,
        push: impl FnOnce(&mut Connection) -> usize,
    ) -> Result<usize, SocketError> {
        let (mut cx, s) = self.conn_split_handle(h)?;
        cx.catch_up(s, h.idx, now);
        if let Some(e) = s.conn.error() {
            return Err(conn_error(e));
        }
        if !s.conn.may_send() {
            return Err(match s.conn.state() {
                State::SynSent | State::SynReceived => SocketError::WouldBlock,
                _ => SocketError::NotConnected,
            });
        }
        let n = push(&mut s.conn);
        if n > 0 {
            cx.conn_settle_live(s, h.idx, now, false);
            cx.iface.flush_release();
            cx.iface.nic.flush();
            Ok(n)
        } else if len == 0 {
            Ok(0)
        } else {
            Err(SocketError::WouldBlock)
        }
    }

    /// The body of `TcpStreamRef::send_space`.
    pub(crate) fn tcp_send_space(&self, h: TcpStream) -> Result<usize, SocketError> {
        let s = self.tcp.conn(h)?;
        Ok(s.conn.send_space())
    }

    /// The body of `TcpStreamRef::send_queue`.
    pub(crate) fn tcp_send_queue(&self, h: TcpStream) -> Result<usize, SocketError> {
        Ok(self.tcp.conn(h)?.conn.send_queue())
    }

    /// The body of `TcpStreamRef::recv_queue`.
    pub(crate) fn tcp_recv_queue(&self, h: TcpStream) -> Result<usize, SocketError> {
        Ok(self.tcp.conn(h)?.conn.recv_queue())
    }

    /// The body of `TcpStreamRef::shutdown`.
    pub(crate) fn tcp_shutdown(&mut self, h: TcpStream, now: u64) -> Result<(), SocketError> {
        let s = self.tcp.conn_mut(h)?;
        s.conn.close();
        self.conn_settle(h.idx, now, false);
        self.iface.flush_release();
        self.iface.nic.flush();
        Ok(())
    }

    /// The body of `TcpStreamRef::close`. Unread text aborts the connection
    /// (RFC 1122 §4.2.2.13: the peer learns its data was lost); otherwise
    /// our FIN follows the queued data and the connection becomes an
    /// orphan, bounded by the stack's caps (`orphans`).
    pub(crate) fn tcp_close(&mut self, h: TcpStream, now: u64) -> Result<(), SocketError> {
        self.conn_catch_up(h, now)?;
        let tag = self.tcp.tag_of(self.tcp.conn(h)?.chan.0);
        let s = self.tcp.conn_mut(h)?;
        if s.conn.recv_queue() > 0 {
            s.conn.abort();
        } else {
            s.conn.close();
        }
        s.conn.orphan(now);
        s.detached = true;
        let closing = matches!(
            s.conn.state(),
            State::FinWait1 | State::FinWait2 | State::Closing | State::LastAck
        );
        if closing {
            self.tcp.sh.stats.orphaned += 1;
            for (idx, why) in self.tcp.orphan_add(h.idx, tag).into_iter().flatten() {
                self.orphan_reset(idx, why, now);
            }
        }
        self.conn_settle(h.idx, now, false);
        self.iface.flush_release();
        self.iface.nic.flush();
        Ok(())
    }

    /// The NI refused the binding of channel `c` (attached: its 4-tuple is
    /// another socket's): its connection fails with `AddrInUse`, sending
    /// nothing.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub(in crate::stack) fn fail_refused(&mut self, c: crate::demux::ChannelId, now: u64) {
        let ChannelOwner::Conn(idx) = self.tcp.owner_of(c.0) else {
            return;
        };
        if let Some(Some(s)) = self.tcp.conns.get_mut(idx as usize) {
            s.conn.fail(ConnError::AddrInUse);
            self.conn_settle(idx, now, true);
        }
    }

    /// Resets every orphan of owner tag `tag` (its owner is gone: a
    /// daemon's MemNet client that exited): nothing it caused outlives it.
    /// O(its orphans). Returns how many.
    pub fn tcp_reset_orphans_of(&mut self, tag: u16, now: u64) -> usize {
        let mut n = 0;
        while let Some(idx) = self.tcp.oldest_orphan_of(tag) {
            self.orphan_reset(idx, super::OrphanReset::OwnerGone, now);
            n += 1;
        }
        self.iface.flush_release();
        n
    }

    /// Resets orphan `idx` to keep a cap (RFC 9293 §3.10.5 ABORT: a RST
    /// tells the peer); its slot is freed at once.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn orphan_reset(&mut self, idx: u32, why: super::OrphanReset, now: u64) {
        let Some(Some(s)) = self.tcp.conns.get_mut(idx as usize) else {
            return;
        };
        s.conn.abort();
        self.tcp.sh.stats.orphans_reset[why as usize] += 1;
        self.conn_settle(idx, now, false);
    }

    /// The body of `TcpStreamRef::abort`.
    pub(crate) fn tcp_abort(&mut self, h: TcpStream, now: u64) -> Result<(), SocketError> {
        let s = self.tcp.conn_mut(h)?;
        s.conn.abort();
        s.detached = true;
        self.conn_settle(h.idx, now, false);
        self.iface.flush_release();
        self.iface.nic.flush();
        Ok(())
    }

    /// The body of `TcpStreamRef::state`.
    pub(crate) fn tcp_state(&mut self, h: TcpStream, now: u64) -> Result<State, SocketError> {
        self.conn_catch_up(h, now)?;
        Ok(self.tcp.conn(h)?.conn.state())
    }

    /// The body of `TcpStreamRef::error`.
    pub(crate) fn tcp_error(&self, h: TcpStream) -> Result<Option<SocketError>, SocketError> {
        Ok(self.tcp.conn(h)?.conn.error().map(conn_error))
    }

    /// The body of `TcpStreamRef::recv_finished`.
    pub(crate) fn tcp_recv_finished(&self, h: TcpStream) -> Result<bool, SocketError> {
        Ok(self.tcp.conn(h)?.conn.recv_finished())
    }

    /// The body of `TcpStreamRef::addrs`.
    pub(crate) fn tcp_addrs(
        &self,
        h: TcpStream,
    ) -> Result<(SocketAddrV4, SocketAddrV4), SocketError> {
        let s = self.tcp.conn(h)?;
        Ok((s.conn.local(), s.conn.remote()))
    }

    /// The body of `TcpStreamRef::set_nodelay`.
    pub(crate) fn tcp_set_nodelay(&mut self, h: TcpStream, on: bool) -> Result<(), SocketError> {
        self.tcp.conn_mut(h)?.conn.set_nodelay(on);
        Ok(())
    }

    /// The body of `TcpStreamRef::counters`.
    pub(crate) fn tcp_counters(
        &self,
        h: TcpStream,
    ) -> Result<crate::proto::tcp::TcpCounters, SocketError> {
        Ok(*self.tcp.conn(h)?.conn.counters())
    }

    /// The body of `TcpStreamRef::pending`.
    pub(crate) fn tcp_pending(&self, h: TcpStream) -> Result<usize, SocketError> {
        let s = self.tcp.conn(h)?;
        Ok(self.demux.queued(s.chan))
    }

    /// The body of `TcpStreamRef::inspect`.
    pub(crate) fn tcp_inspect<R>(
        &self,
        h: TcpStream,
        f: impl FnOnce(&Connection) -> R,
    ) -> Result<R, SocketError> {
        Ok(f(&self.tcp.conn(h)?.conn))
    }
}
