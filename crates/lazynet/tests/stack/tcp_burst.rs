//! The transmit fast path (`proto/tcp/conn/burst.rs`, `Out::conn_burst`) at the
//! frame level: two stacks on the in-memory wire, stepped in virtual time,
//! run the same transfers with `Config::fast_path` on and off. Both fast
//! paths (header prediction on receive, bursts on transmit) are subsets of
//! the slow path, so every frame on the wire, in both directions, must be
//! byte-identical between the two runs; and with it on, most data segments
//! must have gone out in bursts.

use std::net::{Ipv4Addr, SocketAddrV4};

use lazynet::mem::{BufArea, Desc};
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::nic::Nic;
use lazynet::proto::tcp::{Config, TcpCounters};
use lazynet::socket::SocketError;
use lazynet::stack::{Stack, StackConfig, StackDrop};

const A: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 2);
const US: u64 = 1_000;

/// A NIC that records every frame it sends.
struct Rec {
    inner: WireEnd,
    log: Vec<Vec<u8>>,
}

impl Nic for Rec {
    fn mac(&self) -> [u8; 6] {
        self.inner.mac()
    }
    fn mtu(&self) -> usize {
        self.inner.mtu()
    }
    fn buffers(&self) -> &BufArea {
        self.inner.buffers()
    }
    fn buffers_mut(&mut self) -> &mut BufArea {
        self.inner.buffers_mut()
    }
    fn recv(&mut self, out: &mut [Desc]) -> usize {
        self.inner.recv(out)
    }
    fn alloc(&mut self, out: &mut [u32]) -> usize {
        self.inner.alloc(out)
    }
    fn send(&mut self, frames: &[Desc]) -> usize {
        let n = self.inner.send(frames);
        for d in &frames[..n] {
            // Sent frames still sit in the peer's ring, unread: the bytes
            // are stable until it releases them.
            let f = self.inner.buffers().frame(*d).expect("valid frame");
            self.log.push(f.to_vec());
        }
        n
    }
    fn release(&mut self, bufs: &[Desc]) {
        self.inner.release(bufs)
    }
    fn flush(&mut self) {
        self.inner.flush()
    }
}

type S = Stack<Rec>;

fn stack(end: WireEnd, addr: Ipv4Addr, seed: u64, fast_path: bool, nodelay: bool) -> S {
    Stack::new(
        Rec {
            inner: end,
            log: Vec::new(),
        },
        StackConfig {
            addr,
            prefix_len: 24,
            seed,
            tcp: Config {
                fast_path,
                nodelay,
                send_buf: 64 * 1024,
                recv_buf: 96 * 1024,
                ..Config::default()
            },
            ..StackConfig::default()
        },
    )
}

struct Run {
    /// Frames A could not send for want of a NIC buffer.
    starved: u64,
    a_frames: Vec<Vec<u8>>,
    b_frames: Vec<Vec<u8>>,
    a: TcpCounters,
    b: TcpCounters,
}

/// A sends `up` bytes, B sends `down` bytes, both read in chunks of
/// varying size, then both close; returns what went over the wire.
fn run(fast_path: bool, nodelay: bool, mss_writes: bool, up: usize, down: usize) -> Run {
    run_with(fast_path, nodelay, mss_writes, up, down, 1024)
}

/// [`run`] on a wire of `buf_count` buffers (half per end).
fn run_with(
    fast_path: bool,
    nodelay: bool,
    mss_writes: bool,
    up: usize,
    down: usize,
    buf_count: u32,
) -> Run {
    let (ea, eb) = WirePair::new(WireConfig {
        buf_count,
        ring_capacity: 256,
        ..WireConfig::default()
    })
    .unwrap();
    let mut a = stack(ea, A, 11, fast_path, nodelay);
    let mut b = stack(eb, B, 12, fast_path, nodelay);
    let mut now = 1_000 * US;
    let l = b
        .tcp_listen(SocketAddrV4::new(B, 80), None, None)
        .expect("listen");
    let ca = a
        .tcp_connect(SocketAddrV4::new(B, 80), None, now)
        .expect("connect");
    let mut cb = None;
    let src: Vec<u8> = (0..up.max(down) as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let (mut sent_a, mut sent_b, mut got_a, mut got_b) = (0, 0, 0, 0);
    let mut buf = vec![0u8; 70_000];
    let (mut closed_a, mut closed_b) = (false, false);
    for step in 0u64..200_000 {
        a.poll(now);
        a.tcp_service(now, 1024);
        b.poll(now);
        b.tcp_service(now, 1024);
        if cb.is_none() {
            cb = b.listener_mut(l).accept(now).ok();
        }
        // Writes of odd sizes, so that buffers fill unevenly; or (with
        // `mss_writes`) of whole segments, so that a burst often empties
        // the send buffer and its last segment carries PSH.
        let w = if mss_writes {
            1448 * (1 + step as usize % 9)
        } else {
            1 + (step as usize * 7919) % 20_000
        };
        if sent_a < up {
            let n = (up - sent_a).min(w);
            match a.tcp_mut(ca).send(&src[sent_a..sent_a + n], now) {
                Ok(k) => sent_a += k,
                Err(SocketError::WouldBlock) => {}
                Err(e) => panic!("a send: {e}"),
            }
        } else if !closed_a {
            a.tcp_mut(ca).shutdown(now).unwrap();
            closed_a = true;
        }
        if let Some(cb) = cb {
            if sent_b < down {
                let n = (down - sent_b).min(w / 3 + 1);
                match b.tcp_mut(cb).send(&src[sent_b..sent_b + n], now) {
                    Ok(k) => sent_b += k,
                    Err(SocketError::WouldBlock) => {}
                    Err(e) => panic!("b send: {e}"),
                }
            } else if !closed_b {
                b.tcp_mut(cb).shutdown(now).unwrap();
                closed_b = true;
            }
            // Reads of varying size; sometimes none (the window closes).
            if step % 13 != 0 {
                let r = 1 + (step as usize * 104_729) % buf.len();
                if let Ok(k) = b.tcp_mut(cb).recv(&mut buf[..r], now) {
                    assert_eq!(buf[..k], src[got_b..got_b + k], "B read wrong bytes");
                    got_b += k;
                }
            }
        }
        if let Ok(k) = a.tcp_mut(ca).recv(&mut buf, now) {
            assert_eq!(buf[..k], src[got_a..got_a + k], "A read wrong bytes");
            got_a += k;
        }
        if got_b == up && got_a == down && closed_a && closed_b {
            break;
        }
        now += 5 * US + (step % 3) * US;
    }
    assert_eq!((got_b, got_a), (up, down), "transfer did not finish");
    let cb = cb.unwrap();
    let (ka, kb) = (a.tcp(ca).counters().unwrap(), b.tcp(cb).counters().unwrap());
    // Let the last frames arrive, then count the buffers: every one is back
    // but the one spare each stack may keep for its next output.
    for _ in 0..4 {
        now += 10 * US;
        a.poll(now);
        a.tcp_service(now, 1024);
        b.poll(now);
        b.tcp_service(now, 1024);
    }
    for (who, s) in [("A", &mut a), ("B", &mut b)] {
        let nic = &mut s.nic_mut().inner;
        nic.reclaim();
        let own = nic.own_range().len();
        assert!(
            nic.free_buffers() + 1 >= own,
            "{who}: {} of {own} buffers free after the transfer",
            nic.free_buffers()
        );
    }
    Run {
        starved: a.stats().drops_for(StackDrop::TxNoBuffer),
        a_frames: std::mem::take(&mut a.nic_mut().log),
        b_frames: std::mem::take(&mut b.nic_mut().log),
        a: ka,
        b: kb,
    }
}

/// Frames from A with PSH set (TCP flags byte: Ethernet 14 + IP 20 + 13).
fn psh(frames: &[Vec<u8>]) -> usize {
    frames
        .iter()
        .filter(|f| f.len() > 47 && f[47] & 0x08 != 0)
        .count()
}

fn same_frames(on: &[Vec<u8>], off: &[Vec<u8>], who: &str) {
    assert_eq!(on.len(), off.len(), "{who}: frame counts differ");
    for (i, (x, y)) in on.iter().zip(off).enumerate() {
        assert_eq!(x, y, "{who}: frame {i} differs");
    }
}

/// Both directions of run `on` carry `off`'s frames.
fn same_frames_both_ways(on: &Run, off: &Run) {
    same_frames(&on.a_frames, &off.a_frames, "A→B");
    same_frames(&on.b_frames, &off.b_frames, "B→A");
}

#[test]
fn bursts_put_the_same_frames_on_the_wire_as_the_slow_path() {
    for (nodelay, mss_writes) in [(false, false), (true, false), (false, true)] {
        let on = run(true, nodelay, mss_writes, 3 << 20, 700_000);
        let off = run(false, nodelay, mss_writes, 3 << 20, 700_000);
        same_frames_both_ways(&on, &off);
        eprintln!(
            "nodelay {nodelay} mss_writes {mss_writes}: {} + {} frames; bursts A {} B {}, of segments out A {} B {}; PSH A {}",
            on.a_frames.len(),
            on.b_frames.len(),
            on.a.fast_tx,
            on.b.fast_tx,
            on.a.segs_out,
            on.b.segs_out,
            psh(&on.a_frames)
        );
        assert_eq!((off.a.fast_tx, off.b.fast_tx), (0, 0));
        // Most full segments went out in bursts.
        let full = (3 << 20) / 1448;
        assert!(
            on.a.fast_tx * 2 >= full as u64,
            "A: {} of ~{full} segments in bursts",
            on.a.fast_tx
        );
        assert!(on.b.fast_tx > 0, "B sent no burst");
        if mss_writes {
            assert!(psh(&on.a_frames) > 50, "too few bursts emptied the buffer");
        }
    }
}

/// Few NIC buffers: bursts often run out part-way, after taking buffers
/// ahead of the segments they fill (`TX_AHEAD`). The frames must still be
/// the slow path's, and no buffer may stay behind (`run_with` counts them).
#[test]
fn bursts_short_of_buffers_match_the_slow_path_and_keep_no_buffer() {
    let on = run_with(true, false, true, 1 << 20, 200_000, 16);
    let off = run_with(false, false, true, 1 << 20, 200_000, 16);
    same_frames_both_ways(&on, &off);
    eprintln!(
        "16 buffers: {} + {} frames; bursts A {}; A starved {} times (slow path {})",
        on.a_frames.len(),
        on.b_frames.len(),
        on.a.fast_tx,
        on.starved,
        off.starved
    );
    assert!(on.a.fast_tx > 0, "A sent no burst");
    assert!(
        on.starved > 0,
        "A never ran out of buffers: the case is not tested"
    );
}
