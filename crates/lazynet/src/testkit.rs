//! The test kit: what whole-stack tests share, in one place. Two stacks
//! on the in-memory wire driven in virtual time ([`Pair`], after
//! quinn-proto's `Pair::drive`), the rounds that drive them ([`pump`],
//! [`settle`]), a connection set up through them ([`connect_accept`]),
//! raw frames injected at a wire end ([`inject`]) and the test streams
//! whose every byte a test checks ([`data`]).
//!
//! **Owns:** nothing a program uses: built only with the `testkit` feature,
//! which the crate's own tests turn on (a dev-dependency on itself).
//! **May not touch:** stacks' internals (the public API only), and real
//! time: every call takes or keeps the virtual `now`.

use std::net::{Ipv4Addr, SocketAddrV4};

use crate::mem::Desc;
use crate::nic::wirepair::{WireConfig, WireEnd, WirePair};
use crate::nic::Nic;
use crate::proto::tcp::State;
use crate::stack::{Stack, StackConfig, TcpListener, TcpStream};

/// Stack A's address (the client's, by convention).
pub const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// Stack B's address (the server's).
pub const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// A MAC for frames built by hand as A's.
pub const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
/// A MAC for frames built by hand as B's.
pub const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];
/// A millisecond of virtual time.
pub const MS: u64 = 1_000_000;

/// Work units [`pump`] lets each stack's TCP service do.
const SERVICE: usize = 1024;

/// A stack configuration at `addr` with RNG seed `seed`.
pub fn config(addr: Ipv4Addr, seed: u64) -> StackConfig {
    StackConfig {
        addr,
        seed,
        ..StackConfig::default()
    }
}

/// `len` bytes of a test stream starting at offset `off`, varied by `salt`.
pub fn data(off: usize, len: usize, salt: u8) -> Vec<u8> {
    (off..off + len).map(|i| (i % 251) as u8 ^ salt).collect()
}

/// Sends `f` from `end` as one frame; false (buffer back) if the wire has
/// no free buffer or no room.
pub fn inject(end: &mut WireEnd, f: &[u8]) -> bool {
    let mut b = [0u32];
    if end.alloc(&mut b) == 0 {
        return false;
    }
    let Some(buf) = end.buffers_mut().buf_mut(b[0]) else {
        return false;
    };
    buf[..f.len()].copy_from_slice(f);
    if end.send(&[Desc::new(b[0], f.len() as u16)]) == 1 {
        true
    } else {
        end.release(&[Desc::new(b[0], 0)]);
        false
    }
}

/// Every frame waiting at `end`, copied out (the buffers go back).
pub fn capture(end: &mut WireEnd) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut ds = [Desc::default(); 64];
    loop {
        let n = end.recv(&mut ds);
        for d in &ds[..n] {
            if let Some(f) = end.buffers().frame(*d) {
                out.push(f.to_vec());
            }
        }
        end.release(&ds[..n]);
        if n == 0 {
            return out;
        }
    }
}

/// One round of both stacks at `now`: receive and demultiplex, then the
/// TCP work that is due. Returns the work done.
pub fn pump<M: Nic, N: Nic>(sa: &mut Stack<M>, sb: &mut Stack<N>, now: u64) -> usize {
    let mut w = 0;
    let p = sa.poll(now);
    w += p.received + p.processed + sa.tcp_service(now, SERVICE);
    let p = sb.poll(now);
    w += p.received + p.processed + sb.tcp_service(now, SERVICE);
    w
}

/// Rounds of [`pump`] at `now` until neither stack has anything left to
/// do at this instant, at most `max_rounds`. Returns the rounds taken.
pub fn settle<M: Nic, N: Nic>(
    sa: &mut Stack<M>,
    sb: &mut Stack<N>,
    now: u64,
    max_rounds: usize,
) -> usize {
    for r in 0..max_rounds {
        if pump(sa, sb, now) == 0 {
            return r;
        }
    }
    max_rounds
}

/// Connects A to B's listener `l` (port `port` of B's address) in virtual
/// time, a millisecond per round; returns (client, server). Panics after
/// 100 rounds without a connection (a test's failure).
pub fn connect_accept<N: Nic>(
    sa: &mut Stack<WireEnd>,
    sb: &mut Stack<N>,
    l: TcpListener,
    port: u16,
    now: &mut u64,
) -> (TcpStream, TcpStream) {
    let dst = SocketAddrV4::new(sb.addr(), port);
    let c = sa
        .tcp_connect(dst, None, *now)
        .expect("an ephemeral port and a route");
    for _ in 0..100 {
        *now += MS;
        pump(sa, sb, *now);
        if let Ok(s) = sb.listener_mut(l).accept(*now) {
            assert_eq!(sa.tcp_mut(c).state(*now), Ok(State::Established));
            return (c, s);
        }
    }
    panic!("no connection to {dst} after 100 rounds");
}

/// Two stacks on one in-memory wire and their virtual clock.
pub struct Pair {
    /// The client's stack (wire end A).
    pub a: Stack<WireEnd>,
    /// The server's stack (wire end B).
    pub b: Stack<WireEnd>,
    /// Virtual time, ns.
    pub now: u64,
}

impl Default for Pair {
    fn default() -> Self {
        Pair::new()
    }
}

impl Pair {
    /// A at [`A`] (seed 1) and B at [`B`] (seed 2) with default
    /// configurations, on a wire of 4096 buffers per end.
    pub fn new() -> Self {
        Pair::with(
            WireConfig {
                buf_count: 4096,
                ..WireConfig::default()
            },
            config(A, 1),
            config(B, 2),
        )
    }

    /// Stacks with configurations `ca` and `cb` on a wire `wire`.
    pub fn with(wire: WireConfig, ca: StackConfig, cb: StackConfig) -> Self {
        let (a, b) = WirePair::new(wire).expect("a wire pair in memory");
        Pair {
            a: Stack::new(a, ca),
            b: Stack::new(b, cb),
            now: 0,
        }
    }

    /// A millisecond later, one [`pump`] round. Returns the work done.
    pub fn step(&mut self) -> usize {
        self.now += MS;
        pump(&mut self.a, &mut self.b, self.now)
    }

    /// `rounds` [`Pair::step`]s.
    pub fn drive(&mut self, rounds: usize) {
        for _ in 0..rounds {
            self.step();
        }
    }

    /// Steps until `done` holds, at most `max_rounds`; whether it held.
    pub fn drive_until(
        &mut self,
        max_rounds: usize,
        mut done: impl FnMut(&mut Pair) -> bool,
    ) -> bool {
        for _ in 0..max_rounds {
            if done(self) {
                return true;
            }
            self.step();
        }
        done(self)
    }

    /// B listens on `port` (any address); A connects. Returns (client,
    /// server, listener).
    pub fn connect(&mut self, port: u16) -> (TcpStream, TcpStream, TcpListener) {
        let l = self
            .b
            .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port), None, None)
            .expect("a free port");
        let (c, s) = connect_accept(&mut self.a, &mut self.b, l, port, &mut self.now);
        (c, s, l)
    }
}
