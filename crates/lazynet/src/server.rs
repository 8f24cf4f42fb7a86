//! The server loop: one listener, one sans-IO [`ConnApp`] per connection,
//! driven by readiness ([`Stack::ready`]). What a TCP server on lazynet
//! uses instead of writing its own loop; `lazynet serve tcp-echo|http`
//! run on it.
//!
//! **Owns:** the connections it accepted (their handles, registrations,
//! apps and staging buffers), the turn ([`Server::turn`]: ready set,
//! accept, drive the apps named by it and those stopped at their per-turn
//! bound) and the loop around it ([`Server::run`]: receive, TCP service,
//! turn, spin then sleep on the NIC, drain on stop).
//!
//! **May not touch:** protocol state (it goes through the socket calls),
//! and the stack's other sockets: a program may keep more sockets on the
//! same stack; they are its own (their readiness events are not this
//! server's: a stack has one registry, so such a program drives those
//! sockets itself rather than through [`Stack::ready`]).
//!
//! Bounds: at most [`ServerConfig::accept_per_turn`] accepts and
//! [`ServerConfig::max_conns`] connections (more are reset at accept),
//! [`ServerConfig::rounds`] read/write rounds per app per turn, two staging
//! buffers of [`ServerConfig::stage_bytes`] per connection. An app that
//! cannot send stops reading, so TCP flow control pushes back on its peer.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::nic::Nic;
use crate::socket::SocketError;
use crate::stack::ready::{Event, Interest, SocketId, Trigger};
use crate::stack::{Stack, TcpListener, TcpStream};

/// The application half of one connection, sans-IO: bytes in, bytes out.
pub trait ConnApp {
    /// Offers received bytes; returns how many were consumed (the rest is
    /// offered again with more appended).
    fn on_data(&mut self, data: &[u8]) -> usize;
    /// Writes output bytes into `out`; returns how many (0: nothing now).
    fn poll_output(&mut self, out: &mut [u8]) -> usize;
    /// The peer finished sending.
    fn on_eof(&mut self) {}
    /// Close once all output is sent.
    fn wants_close(&self) -> bool;
}

/// TCP echo: what comes in goes back out, up to a bounded backlog (the
/// staging size: beyond it input waits in TCP).
#[derive(Debug)]
pub struct EchoApp {
    q: std::collections::VecDeque<u8>,
    cap: usize,
    eof: bool,
}

impl Default for EchoApp {
    fn default() -> Self {
        EchoApp {
            q: std::collections::VecDeque::new(),
            cap: ServerConfig::default().stage_bytes,
            eof: false,
        }
    }
}

impl ConnApp for EchoApp {
    fn on_data(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.cap - self.q.len());
        self.q.extend(&data[..n]);
        n
    }
    fn poll_output(&mut self, out: &mut [u8]) -> usize {
        let n = out.len().min(self.q.len());
        for (o, b) in out.iter_mut().zip(self.q.drain(..n)) {
            *o = b;
        }
        n
    }
    fn on_eof(&mut self) {
        self.eof = true;
    }
    fn wants_close(&self) -> bool {
        self.eof && self.q.is_empty()
    }
}

/// How a [`Server`] serves.
#[derive(Clone, Copy, Debug)]
pub struct ServerConfig {
    /// Connections served at once; more are reset when accepted.
    pub max_conns: usize,
    /// Accepts per turn.
    pub accept_per_turn: usize,
    /// Read/write rounds one app gets per turn.
    pub rounds: usize,
    /// Bytes of each of a connection's two staging buffers.
    pub stage_bytes: usize,
    /// Staging buffers of closed connections kept for new ones (fresh
    /// ones would be zeroed and page-faulted for every connection).
    pub spare_stages: usize,
    /// `TCP_NODELAY` on accepted connections (a request/response server
    /// answers in one write; Nagle would hold its last segment).
    pub nodelay: bool,
    /// [`Server::run`]: how long to keep polling the NIC after the last
    /// work before sleeping on it (ns; 0: sleep at once).
    pub spin_ns: u64,
    /// [`Server::run`]: after the stop flag, how long connections in
    /// progress get to finish (ns; no new ones are accepted): a reply's
    /// last segments or the peer's FIN may need a retransmission or two.
    pub drain_ns: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_conns: 65536,
            accept_per_turn: 1024,
            rounds: 16,
            stage_bytes: 64 * 1024,
            spare_stages: 256,
            nodelay: true,
            spin_ns: 0,
            drain_ns: 2_000_000_000,
        }
    }
}

/// What [`Server::run`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServeReport {
    /// Connections accepted and served.
    pub served: u64,
    /// Reset at accept: [`ServerConfig::max_conns`] were being served.
    pub refused: u64,
    /// Still open when the drain time ran out (they were reset).
    pub open_at_exit: usize,
}

/// What one [`Server::turn`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Turn {
    /// Ready sockets it was told about.
    pub events: usize,
    /// Connections accepted.
    pub accepted: usize,
    /// Apps that stopped at their bound and run again next turn.
    pub busy: usize,
}

impl Turn {
    /// Whether anything happened (a loop keeps spinning while so).
    pub fn did_work(&self) -> bool {
        self.events > 0 || self.busy > 0
    }
}

/// Token of the listener's registration (connections use their slot).
const LISTENER_TOKEN: u64 = u64::MAX;
/// Ready sockets taken per turn (more wait for the next one).
const EVENTS_PER_TURN: usize = 1024;
/// Work units one [`Server::run`] turn lets [`Stack::tcp_service`] do.
const SERVICE_BUDGET: usize = 1024;
/// Longest sleep of [`Server::run`] (it looks at the stop flag between).
const MAX_SLEEP_NS: u64 = 1_000_000;

struct Conn<S> {
    h: TcpStream,
    app: S,
    inb: Box<[u8]>,
    in_len: usize,
    out: Box<[u8]>,
    out_pos: usize,
    out_len: usize,
    eof: bool,
}

/// What driving an app did.
enum Drive {
    /// Waiting for the network (readiness will name it).
    Idle,
    /// Stopped at its per-turn bound; drive again next turn.
    Busy,
    /// Closed or failed; forget it.
    Done,
}

/// A TCP server of apps from `make`, one per connection (see the module
/// docs). The stack's registry is the server's: it registers the
/// listener and every connection it accepts.
pub struct Server<S, F> {
    listener: TcpListener,
    make: F,
    cfg: ServerConfig,
    conns: Vec<Option<Conn<S>>>,
    free: Vec<u32>,
    serving: usize,
    spare: Vec<Box<[u8]>>,
    events: Vec<Event>,
    again: Vec<u32>,
    next: Vec<u32>,
    accepting: bool,
    served: u64,
    refused: u64,
}

impl<S: ConnApp, F: FnMut() -> S> Server<S, F> {
    /// A server of `listener` (already bound on `stack`).
    pub fn new<N: Nic>(
        stack: &mut Stack<N>,
        listener: TcpListener,
        make: F,
        cfg: ServerConfig,
    ) -> Result<Self, SocketError> {
        stack.register(listener, LISTENER_TOKEN, Interest::READABLE, Trigger::Level)?;
        Ok(Server {
            listener,
            make,
            cfg,
            conns: Vec::new(),
            free: Vec::new(),
            serving: 0,
            spare: Vec::new(),
            events: Vec::with_capacity(EVENTS_PER_TURN),
            again: Vec::new(),
            next: Vec::new(),
            accepting: true,
            served: 0,
            refused: 0,
        })
    }

    /// Connections being served now.
    pub fn serving(&self) -> usize {
        self.serving
    }

    /// Connections accepted so far.
    pub fn served(&self) -> u64 {
        self.served
    }

    /// Stops accepting: new connections wait in the listener's accept
    /// queue (and are reset when it closes).
    pub fn stop_accepting(&mut self) {
        self.accepting = false;
    }

    /// One bounded turn over the state the stack's last work left: the
    /// ready set, accepts, and the apps it names or that were busy. Does
    /// not receive or run TCP work (the caller does: [`Stack::poll`],
    /// [`Stack::tcp_service`]).
    pub fn turn<N: Nic>(&mut self, stack: &mut Stack<N>) -> Turn {
        let mut t = Turn::default();
        self.events.clear();
        t.events = stack.ready(&mut self.events, EVENTS_PER_TURN);
        let mut events = std::mem::take(&mut self.events);
        for e in &events {
            if e.token == LISTENER_TOKEN {
                if self.accepting {
                    t.accepted += self.accept(stack);
                }
            } else if let SocketId::Tcp(h) = e.socket {
                if self.conn(e.token).is_some_and(|c| c.h == h) {
                    self.again.push(e.token as u32);
                }
            }
        }
        events.clear();
        self.events = events;
        // Each app at most once per turn (a new connection is both
        // accepted and reported).
        self.again.sort_unstable();
        self.again.dedup();
        let mut again = std::mem::take(&mut self.again);
        for &i in &again {
            match self.drive(stack, i) {
                Drive::Idle => {}
                Drive::Busy => self.next.push(i),
                Drive::Done => self.finish(stack, i),
            }
        }
        again.clear();
        self.again = again;
        std::mem::swap(&mut self.again, &mut self.next);
        t.busy = self.again.len();
        t
    }

    /// Serves until `stop` is set, then lets open connections finish for
    /// [`ServerConfig::drain_ns`] (new ones are not accepted) and resets
    /// those left. `each_turn` runs after every turn (a status line, a
    /// metric).
    pub fn run<N: Nic>(
        &mut self,
        stack: &mut Stack<N>,
        stop: &AtomicBool,
        mut each_turn: impl FnMut(&Stack<N>, &Self),
    ) -> ServeReport {
        let mut drain_end: Option<u64> = None;
        let mut idle_since: Option<u64> = None;
        loop {
            let now = stack.now();
            if stop.load(Ordering::Relaxed) {
                let end = *drain_end.get_or_insert_with(|| {
                    self.stop_accepting();
                    now.saturating_add(self.cfg.drain_ns)
                });
                if self.serving == 0 || now >= end {
                    break;
                }
            }
            let rx = stack.poll(now).received;
            let work = stack.tcp_service(now, SERVICE_BUDGET);
            let t = self.turn(stack);
            each_turn(stack, self);
            if rx != 0 || work != 0 || t.did_work() {
                idle_since = None;
                continue;
            }
            let since = *idle_since.get_or_insert(now);
            if now.saturating_sub(since) < self.cfg.spin_ns {
                continue;
            }
            let wake = stack.next_deadline().map(|t| t.saturating_sub(now));
            stack
                .nic_mut()
                .wait(Some(wake.unwrap_or(MAX_SLEEP_NS).min(MAX_SLEEP_NS)));
        }
        let open = self.serving;
        self.reset_all(stack);
        ServeReport {
            served: self.served,
            refused: self.refused,
            open_at_exit: open,
        }
    }

    /// Resets every connection being served (their apps are dropped).
    pub fn reset_all<N: Nic>(&mut self, stack: &mut Stack<N>) {
        for i in 0..self.conns.len() {
            if let Some(c) = self.conns[i].take() {
                let now = stack.now();
                let _ = stack.tcp_mut(c.h).abort(now);
                self.free.push(i as u32);
            }
        }
        self.serving = 0;
        self.again.clear();
        self.next.clear();
    }

    fn conn(&self, token: u64) -> Option<&Conn<S>> {
        self.conns.get(token as usize)?.as_ref()
    }

    fn stage(&mut self) -> Box<[u8]> {
        self.spare
            .pop()
            .unwrap_or_else(|| vec![0; self.cfg.stage_bytes].into_boxed_slice())
    }

    fn accept<N: Nic>(&mut self, stack: &mut Stack<N>) -> usize {
        let mut n = 0;
        for _ in 0..self.cfg.accept_per_turn {
            let now = stack.now();
            let Ok(h) = stack.listener_mut(self.listener).accept(now) else {
                break;
            };
            n += 1;
            if self.serving >= self.cfg.max_conns {
                self.refused += 1;
                let _ = stack.tcp_mut(h).abort(now);
                continue;
            }
            if self.cfg.nodelay {
                let _ = stack.tcp_mut(h).set_nodelay(true);
            }
            let i = match self.free.pop() {
                Some(i) => i,
                None => {
                    self.conns.push(None);
                    (self.conns.len() - 1) as u32
                }
            };
            if stack
                .register(h, u64::from(i), Interest::BOTH, Trigger::Edge)
                .is_err()
            {
                // Gone between accept and here (reset): nothing to serve.
                self.free.push(i);
                continue;
            }
            let (inb, out) = (self.stage(), self.stage());
            self.conns[i as usize] = Some(Conn {
                h,
                app: (self.make)(),
                inb,
                in_len: 0,
                out,
                out_pos: 0,
                out_len: 0,
                eof: false,
            });
            self.serving += 1;
            self.served += 1;
            // Driven in this turn: its first bytes may already be in.
            self.again.push(i);
        }
        n
    }

    fn finish<N: Nic>(&mut self, stack: &mut Stack<N>, i: u32) {
        let Some(c) = self.conns.get_mut(i as usize).and_then(Option::take) else {
            return;
        };
        let now = stack.now();
        let _ = stack.tcp_mut(c.h).close(now);
        self.free.push(i);
        self.serving -= 1;
        if self.spare.len() < self.cfg.spare_stages {
            self.spare.push(c.inb);
            self.spare.push(c.out);
        }
    }

    fn drive<N: Nic>(&mut self, stack: &mut Stack<N>, i: u32) -> Drive {
        let Some(Some(c)) = self.conns.get_mut(i as usize) else {
            return Drive::Idle;
        };
        for _ in 0..self.cfg.rounds {
            let now = stack.now();
            let mut progress = false;
            // Output first: sending frees the app to take more input.
            if c.out_pos == c.out_len {
                c.out_pos = 0;
                c.out_len = c.app.poll_output(&mut c.out);
            }
            if c.out_pos < c.out_len {
                match stack.tcp_mut(c.h).send(&c.out[c.out_pos..c.out_len], now) {
                    Ok(n) => {
                        c.out_pos += n;
                        progress |= n > 0;
                    }
                    Err(SocketError::WouldBlock) => {}
                    Err(_) => return Drive::Done,
                }
            }
            if !c.eof && c.in_len < c.inb.len() {
                match stack.tcp_mut(c.h).recv(&mut c.inb[c.in_len..], now) {
                    Ok(0) => {
                        c.eof = true;
                        progress = true;
                    }
                    Ok(n) => {
                        c.in_len += n;
                        progress = true;
                    }
                    Err(SocketError::WouldBlock) => {}
                    Err(_) => return Drive::Done,
                }
            }
            if c.in_len > 0 {
                let used = c.app.on_data(&c.inb[..c.in_len]);
                if used > 0 {
                    c.inb.copy_within(used..c.in_len, 0);
                    c.in_len -= used;
                    progress = true;
                }
            }
            if c.eof && c.in_len == 0 {
                c.app.on_eof();
            }
            if c.out_pos == c.out_len && c.app.wants_close() {
                return Drive::Done;
            }
            if !progress {
                return Drive::Idle;
            }
        }
        Drive::Busy
    }
}

impl<S, F> std::fmt::Debug for Server<S, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("listener", &self.listener)
            .field("serving", &self.serving)
            .field("served", &self.served)
            .field("refused", &self.refused)
            .finish_non_exhaustive()
    }
}
