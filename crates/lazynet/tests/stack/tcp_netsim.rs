//! A deterministic simulated network for TCP: two lazynet stacks over the
//! in-memory wire with the fault injector on both ends (seeded loss,
//! duplication, reordering, corruption and a one-way delay), in virtual
//! time. One connection per cell carries 10 MB in each direction at once;
//! both streams must arrive byte-exact, and the connection must never stall
//! (no progress for [`STALL_NS`] of virtual time fails the cell). After the
//! transfer both sides close (FIN both ways, EOF read), TIME-WAIT runs out,
//! every received frame is accounted for and every NIC buffer comes back.
//!
//! The clock jumps from event to event — the next frame due on a delay line
//! or the next TCP timer — so a cell costs work per segment, not per
//! virtual nanosecond.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use lazynet::nic::fault::{FaultConfig, FaultNic, FaultSpec};
use lazynet::nic::wirepair::{WireConfig, WireEnd, WirePair};
use lazynet::proto::tcp::TcpCounters;
use lazynet::socket::SocketError;
use lazynet::stack::{Stack, StackConfig, StackDrop, TcpStream};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use lazynet::testkit::{A, B, MS};

const US: u64 = 1_000;
const SEC: u64 = 1_000_000_000;

/// Bytes each side sends (and reads) per cell.
const TOTAL: usize = 10 << 20;
/// No progress for this long (virtual) is a stall: well above the largest
/// RTO backoff (60 s) after the first few doublings.
const STALL_NS: u64 = 120 * SEC;
/// The clock never jumps further than this: the stack's own timers (ARP
/// retries, reassembly) are not on the TCP timer heap.
const MAX_JUMP: u64 = 100 * MS;

type S = Stack<FaultNic<WireEnd>>;

/// One cell of the matrix: faults on every frame each end sends.
#[derive(Clone, Copy, Debug)]
struct Cell {
    loss: f64,
    delay_ns: u64,
    dup: f64,
    reorder: f64,
    corrupt: f64,
    seed: u64,
    /// Bytes A sends, bytes B sends.
    bytes: [usize; 2],
    /// The applications' own calls process their segments: frames are only
    /// demultiplexed before the applications run (`Stack::poll`), so
    /// `tcp_recv` finds them queued and places text directly into the
    /// reader's buffer (`conn_direct`); the protocol handler runs after.
    reader_driven: bool,
}

impl Cell {
    fn name(&self) -> String {
        format!(
            "loss {:.0}% delay {:.1} ms dup {:.1}% reorder {:.1}% corrupt {:.1}% seed {}",
            self.loss * 100.0,
            self.delay_ns as f64 / MS as f64,
            self.dup * 100.0,
            self.reorder * 100.0,
            self.corrupt * 100.0,
            self.seed
        )
    }
}

/// A pseudo-random stream with a long prime period, so that a misplaced,
/// repeated or skipped segment never lines up with the expected bytes.
struct Pattern(Vec<u8>);

const PERIOD: usize = 1_000_003;
const CHUNK: usize = 65536;

impl Pattern {
    fn new(seed: u64) -> Self {
        let mut v = vec![0u8; PERIOD + CHUNK];
        ChaCha8Rng::seed_from_u64(seed).fill_bytes(&mut v[..PERIOD]);
        v.copy_within(..CHUNK, PERIOD);
        Pattern(v)
    }

    /// Bytes `[off, off + len)` of the stream; `len <= CHUNK`.
    fn at(&self, off: usize, len: usize) -> &[u8] {
        let s = off % PERIOD;
        &self.0[s..s + len]
    }
}

fn faulty(end: WireEnd, seed: u64, cell: &Cell, clock: &Arc<AtomicU64>) -> FaultNic<WireEnd> {
    let spec = FaultSpec {
        loss: cell.loss,
        duplicate: cell.dup,
        reorder: cell.reorder,
        reorder_gap: 3,
        corrupt: cell.corrupt,
        // Every frame waits the one-way delay (reordered frames are held
        // after it), so the wire has a real bandwidth-delay product.
        delay: 1.0,
        delay_ns: cell.delay_ns,
    };
    let c = clock.clone();
    let cfg = FaultConfig {
        seed,
        rx: FaultSpec::default(),
        tx: spec,
        queue_limit: 4096,
        ..FaultConfig::default()
    };
    FaultNic::with_clock(end, cfg, Box::new(move || c.load(Ordering::Relaxed)))
}

/// One end: its stack, connection and progress.
struct End {
    stack: S,
    h: TcpStream,
    /// Bytes this end sends.
    total: usize,
    /// Bytes the peer sends.
    peer_total: usize,
    /// Bytes accepted by `tcp_send`.
    sent: usize,
    /// Bytes read and checked.
    got: usize,
    shut: bool,
    eof: bool,
    closed: bool,
    counters: TcpCounters,
}

impl End {
    /// The application's turn: queue what fits, read what arrived (checked
    /// against the peer's pattern), half-close when all is queued, close
    /// the handle after EOF. Returns whether anything moved.
    /// Queues what fits; half-closes when all is queued.
    fn app_send(&mut self, mine: &Pattern, now: u64, cell: &str) -> bool {
        let mut moved = false;
        // Bounded: the send buffer takes at most its capacity per call.
        for _ in 0..64 {
            if self.sent >= self.total {
                break;
            }
            let len = (self.total - self.sent).min(CHUNK);
            match self
                .stack
                .tcp_mut(self.h)
                .send(mine.at(self.sent, len), now)
            {
                Ok(n) => {
                    self.sent += n;
                    moved = true;
                }
                Err(SocketError::WouldBlock) => break,
                Err(e) => panic!("{cell}: send failed: {e:?}"),
            }
        }
        if self.sent == self.total && !self.shut {
            self.stack.tcp_mut(self.h).shutdown(now).unwrap();
            self.shut = true;
            moved = true;
        }
        moved
    }

    /// Reads what arrived, checked against the peer's pattern.
    fn app_recv(&mut self, peer: &Pattern, buf: &mut [u8], now: u64, cell: &str) -> bool {
        let mut moved = false;
        for _ in 0..256 {
            match self.stack.tcp_mut(self.h).recv(buf, now) {
                Ok(0) => {
                    assert_eq!(self.got, self.peer_total, "{cell}: EOF before all data");
                    self.eof = true;
                    moved = true;
                    break;
                }
                Ok(n) => {
                    assert!(
                        self.got + n <= self.peer_total,
                        "{cell}: more data than sent"
                    );
                    if buf[..n] != *peer.at(self.got, n) {
                        let i = (0..n).find(|&i| buf[i] != peer.at(self.got + i, 1)[0]);
                        panic!(
                            "{cell}: wrong bytes at offset {:?}",
                            i.map(|i| self.got + i)
                        );
                    }
                    self.got += n;
                    moved = true;
                }
                Err(SocketError::WouldBlock) => break,
                Err(e) => panic!("{cell}: recv failed after {} bytes: {e:?}", self.got),
            }
        }
        moved
    }

    fn app(
        &mut self,
        mine: &Pattern,
        peer: &Pattern,
        buf: &mut [u8],
        now: u64,
        cell: &str,
        reader_first: bool,
    ) -> bool {
        if self.closed {
            return false;
        }
        let mut moved = false;
        if reader_first {
            moved |= self.app_recv(peer, buf, now, cell);
            moved |= self.app_send(mine, now, cell);
        } else {
            moved |= self.app_send(mine, now, cell);
            moved |= self.app_recv(peer, buf, now, cell);
        }
        if self.eof && self.shut {
            self.counters = self.stack.tcp(self.h).counters().unwrap();
            self.stack
                .tcp(self.h)
                .inspect(|c| c.check_invariants())
                .unwrap()
                .unwrap_or_else(|e| panic!("{cell}: invariant: {e}"));
            self.stack.tcp_mut(self.h).close(now).unwrap();
            self.closed = true;
            moved = true;
        }
        moved
    }

    fn describe(&mut self, now: u64) -> String {
        let st = self.stack.tcp_mut(self.h).state(now);
        let c = self.stack.tcp(self.h).counters().unwrap_or(self.counters);
        let extra = self
            .stack
            .tcp(self.h).inspect(|c| {
                format!(
                    "snd_una {:?} snd_nxt {:?} rcv_nxt {:?} rto {} srtt {:?} sndq {} rcvq {} inv {:?}",
                    c.snd_una(),
                    c.snd_nxt(),
                    c.rcv_nxt(),
                    c.rto(),
                    c.srtt(),
                    c.send_queue(),
                    c.recv_queue(),
                    c.check_invariants()
                )
            })
            .unwrap_or_default();
        format!(
            "sent {} got {} shut {} eof {} closed {} state {st:?}\n    {c:?}\n    {extra}\n    {}",
            self.sent,
            self.got,
            self.shut,
            self.eof,
            self.closed,
            self.stack.stats()
        )
    }
}

/// Runs both stacks at `now` until neither has anything left to do at this
/// instant. Bounded.
fn pump(a: &mut S, b: &mut S, now: u64) {
    for _ in 0..10_000 {
        let mut w = 0;
        for s in [&mut *a, &mut *b] {
            let p = s.poll(now);
            w += p.received + p.processed;
            w += s.tcp_service(now, 4096);
        }
        if w == 0 {
            return;
        }
    }
    panic!("no quiescence at {now}");
}

/// The next instant anything can happen after `now`.
fn next_event(a: &S, b: &S, now: u64) -> u64 {
    let mut t = now + MAX_JUMP;
    for s in [a, b] {
        for x in [s.tcp_next_timeout(), s.nic().next_due()]
            .into_iter()
            .flatten()
        {
            t = t.min(x);
        }
    }
    t.max(now + US)
}

fn check_accounting(s: &S, cell: &str) {
    let st = s.stats();
    assert_eq!(
        st.frames_accounted() + s.queued_frames() as u64,
        st.rx_frames,
        "{cell}: every frame accounted for: {st}"
    );
}

struct Summary {
    virt: u64,
    /// Segments placed directly into a reader's buffer, both ends.
    direct: u64,
    counters: [TcpCounters; 2],
    retransmits: u64,
    rto: u64,
    fast: u64,
    lost: u64,
}

fn run(cell: Cell) -> Summary {
    let name = cell.name();
    let (wa, wb) = WirePair::new(WireConfig {
        buf_count: 8192,
        ring_capacity: 1024,
        ..WireConfig::default()
    })
    .unwrap();
    let (a_free0, b_free0) = (wa.free_buffers(), wb.free_buffers());
    let clock = Arc::new(AtomicU64::new(SEC));
    let mut sa = Stack::new(
        faulty(wa, cell.seed, &cell, &clock),
        StackConfig {
            addr: A,
            seed: cell.seed,
            ..StackConfig::default()
        },
    );
    let mut sb = Stack::new(
        faulty(wb, cell.seed + 1, &cell, &clock),
        StackConfig {
            addr: B,
            seed: cell.seed + 2,
            ..StackConfig::default()
        },
    );
    let (pa, pb) = (Pattern::new(cell.seed * 2), Pattern::new(cell.seed * 2 + 1));
    let mut now = clock.load(Ordering::Relaxed);
    let start = now;

    // Handshake.
    let l = sb
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), None, None)
        .unwrap();
    let c = sa.tcp_connect(SocketAddrV4::new(B, 80), None, now).unwrap();
    let mut s = None;
    for _ in 0..100_000 {
        pump(&mut sa, &mut sb, now);
        if let Ok(h) = sb.listener_mut(l).accept(now) {
            s = Some(h);
            break;
        }
        assert!(now - start < STALL_NS, "{name}: no connection");
        now = next_event(&sa, &sb, now);
        clock.store(now, Ordering::Relaxed);
    }
    let s = s.unwrap_or_else(|| panic!("{name}: no connection"));
    sb.listener_mut(l).close(now).unwrap();
    let new_end = |stack, h, total, peer_total| End {
        stack,
        h,
        total,
        peer_total,
        sent: 0,
        got: 0,
        shut: false,
        eof: false,
        closed: false,
        counters: TcpCounters::default(),
    };
    let mut ea = new_end(sa, c, cell.bytes[0], cell.bytes[1]);
    let mut eb = new_end(sb, s, cell.bytes[1], cell.bytes[0]);

    // Transfer and close.
    let mut buf = vec![0u8; CHUNK];
    let mut last_progress = now;
    let mut progress_mark = 0usize;
    let mut max_queued = 0;
    let mut steps = 0u64;
    while !(ea.closed && eb.closed) {
        steps += 1;
        assert!(steps < 50_000_000, "{name}: step bound");
        for _ in 0..1000 {
            if cell.reader_driven {
                ea.stack.poll(now);
                eb.stack.poll(now);
            }
            let ma = ea.app(&pa, &pb, &mut buf, now, &name, cell.reader_driven);
            let mb = eb.app(&pb, &pa, &mut buf, now, &name, cell.reader_driven);
            pump(&mut ea.stack, &mut eb.stack, now);
            if !ma && !mb {
                break;
            }
        }
        let mark = ea.sent + ea.got + eb.sent + eb.got + ea.eof as usize + eb.eof as usize;
        if mark != progress_mark {
            progress_mark = mark;
            last_progress = now;
        } else if now - last_progress > STALL_NS {
            panic!(
                "{name}: STALL at virtual {:.3} s (no progress for {} s)\n  A: {}\n  B: {}",
                (now - start) as f64 / SEC as f64,
                STALL_NS / SEC,
                ea.describe(now),
                eb.describe(now)
            );
        }
        max_queued = max_queued
            .max(ea.stack.queued_frames())
            .max(eb.stack.queued_frames());
        now = next_event(&ea.stack, &eb.stack, now);
        clock.store(now, Ordering::Relaxed);
    }
    let done = now;
    assert_eq!((ea.got, eb.got), (cell.bytes[1], cell.bytes[0]));

    // TIME-WAIT (and any last retransmission of a FIN) runs out.
    let mut waited = 0;
    while ea.stack.tcp_connections() + eb.stack.tcp_connections() > 0 {
        waited += 1;
        assert!(
            now - done < 10 * 60 * SEC && waited < 1_000_000,
            "{name}: connections left after close: A {} B {}",
            ea.stack.tcp_connections(),
            eb.stack.tcp_connections()
        );
        pump(&mut ea.stack, &mut eb.stack, now);
        now = next_event(&ea.stack, &eb.stack, now);
        clock.store(now, Ordering::Relaxed);
    }
    assert_eq!(ea.stack.tcp_mut(c).state(now), Err(SocketError::BadHandle));
    assert_eq!(eb.stack.tcp_mut(s).state(now), Err(SocketError::BadHandle));

    // Nothing left in flight: release what the injectors still hold, let
    // the stacks receive and drop it, and count every frame and buffer.
    for _ in 0..4 {
        now += SEC;
        clock.store(now, Ordering::Relaxed);
        ea.stack.nic_mut().release_all();
        eb.stack.nic_mut().release_all();
        pump(&mut ea.stack, &mut eb.stack, now);
    }
    for (e, tag) in [(&ea, "A"), (&eb, "B")] {
        check_accounting(&e.stack, &name);
        assert_eq!(
            e.stack.queued_frames(),
            0,
            "{name}: {tag} frames left queued"
        );
        assert_eq!(
            e.stack.nic().queued(),
            (0, 0),
            "{name}: {tag} injector empty"
        );
    }
    // Channels stay bounded: never more queued than the stack's channel
    // capacities (control, fragments, one TCP connection, one listener).
    assert!(max_queued <= 4096, "{name}: {max_queued} frames queued");
    let checks = |e: &End| {
        let st = e.stack.stats();
        st.drops_for(StackDrop::TcpChecksum) + st.drops_for(StackDrop::IpChecksum)
    };
    let (fa, fb) = (ea.stack.nic().stats(), eb.stack.nic().stats());
    if cell.corrupt > 0.0 {
        assert!(
            fa.tx.corrupted + fb.tx.corrupted > 0,
            "{name}: no corruption"
        );
        assert!(
            checks(&ea) + checks(&eb) > 0,
            "{name}: checksums caught nothing"
        );
    }
    let lost = fa.tx.lost + fb.tx.lost;
    ea.stack.nic_mut().inner_mut().reclaim();
    eb.stack.nic_mut().inner_mut().reclaim();
    assert_eq!(
        ea.stack.nic().inner().free_buffers(),
        a_free0,
        "{name}: A's buffers"
    );
    assert_eq!(
        eb.stack.nic().inner().free_buffers(),
        b_free0,
        "{name}: B's buffers"
    );

    let virt = done - start;
    let (ca, cb) = (ea.counters, eb.counters);
    Summary {
        virt,
        direct: ca.direct + cb.direct,
        counters: [ca, cb],
        retransmits: ca.retransmits + cb.retransmits,
        rto: ca.rto_expired + cb.rto_expired,
        fast: ca.fast_retransmits + cb.fast_retransmits,
        lost,
    }
}

fn matrix(cells: &[Cell]) -> Vec<Summary> {
    let mut out = Vec::new();
    let t0 = std::time::Instant::now();
    println!(
        "{:<62} {:>9} {:>9} {:>7} {:>6} {:>7} {:>10}",
        "cell", "virt s", "rexmit", "rto", "fast", "lost", "goodput"
    );
    for cell in cells {
        let r = run(*cell);
        // Goodput: both directions' payload over the virtual transfer time.
        let mbps =
            (cell.bytes[0] + cell.bytes[1]) as f64 * 8.0 / (r.virt as f64 / SEC as f64) / 1e6;
        println!(
            "{:<62} {:>9.3} {:>9} {:>7} {:>6} {:>7} {:>6.2} Mb/s",
            cell.name(),
            r.virt as f64 / SEC as f64,
            r.retransmits,
            r.rto,
            r.fast,
            r.lost,
            mbps
        );
        if cell.loss > 0.0 {
            // Losses are repaired by fast retransmit, not only by RTOs.
            assert!(r.fast > 0, "{}: no fast retransmit", cell.name());
        }
        out.push(r);
    }
    println!("wall time {:.1?}", t0.elapsed());
    out
}

fn cell(loss: f64, delay_ns: u64, seed: u64) -> Cell {
    Cell {
        loss,
        delay_ns,
        dup: 0.0,
        reorder: 0.0,
        corrupt: 0.0,
        seed,
        bytes: [TOTAL, TOTAL],
        reader_driven: false,
    }
}

#[test]
fn clean_wire() {
    matrix(&[
        cell(0.0, 100 * US, 1),
        cell(0.0, 10 * MS, 2),
        cell(0.0, 50 * MS, 3),
    ]);
}

#[test]
fn loss_1pct() {
    matrix(&[
        cell(0.01, 100 * US, 11),
        cell(0.01, 10 * MS, 12),
        cell(0.01, 50 * MS, 13),
    ]);
}

#[test]
fn loss_5pct() {
    matrix(&[
        cell(0.05, 100 * US, 21),
        // Duplication, reordering and corruption on top of loss.
        Cell {
            dup: 0.02,
            reorder: 0.05,
            corrupt: 0.02,
            ..cell(0.05, 10 * MS, 22)
        },
        cell(0.05, 50 * MS, 23),
    ]);
}

#[test]
fn loss_10pct() {
    matrix(&[
        Cell {
            dup: 0.05,
            reorder: 0.10,
            corrupt: 0.05,
            ..cell(0.10, 100 * US, 31)
        },
        cell(0.10, 10 * MS, 32),
        Cell {
            dup: 0.01,
            reorder: 0.02,
            corrupt: 0.01,
            ..cell(0.10, 50 * MS, 33)
        },
    ]);
}

#[test]
fn faults_without_loss() {
    // Duplication, reordering and corruption alone: no segment is lost
    // outright, but corrupted ones are (caught by the checksums).
    matrix(&[Cell {
        dup: 0.05,
        reorder: 0.10,
        corrupt: 0.02,
        ..cell(0.0, 10 * MS, 41)
    }]);
}

#[test]
fn reader_driven_direct_placement_under_faults() {
    // The applications' calls do the protocol work, so in-order text goes
    // straight from the NIC buffers into the readers' buffers, its
    // checksum computed while copying: corrupted segments must still be
    // caught there, and the streams arrive byte-exact.
    let r = matrix(&[
        Cell {
            reader_driven: true,
            ..cell(0.0, 100 * US, 61)
        },
        Cell {
            dup: 0.02,
            reorder: 0.05,
            corrupt: 0.03,
            reader_driven: true,
            ..cell(0.02, MS, 62)
        },
    ]);
    // Clean: most segments go direct. With losses the out-of-order queue
    // is often busy (no prediction), but still many do.
    let segs = 2 * TOTAL as u64 / 1460;
    assert!(
        r[0].direct * 3 >= segs,
        "only {} placed directly",
        r[0].direct
    );
    assert!(r[1].direct >= 100, "only {} placed directly", r[1].direct);
}

#[test]
fn pattern_detects_misplaced_segments() {
    let p = Pattern::new(7);
    // A segment repeated or skipped (any MSS-sized shift) never matches.
    for shift in [1usize, 536, 1448, 1460, 2920, 65535] {
        assert_ne!(p.at(10_000, 1460), p.at(10_000 + shift, 1460));
    }
    assert_eq!(p.at(PERIOD - 10, 20)[10..], *p.at(0, 10));
}

#[test]
fn out_of_order_segments_in_one_batch_each_get_a_duplicate_ack() {
    // Regression: the stack processed a whole batch of queued segments
    // before sending, so a window's worth of out-of-order segments produced
    // one ACK, never three duplicates: no fast retransmit, every loss
    // waited for an RTO. One-way transfer, 1% loss.
    let r = matrix(&[Cell {
        bytes: [2 << 20, 0],
        ..cell(0.01, 10 * MS, 51)
    }]);
    let a = r[0].counters[0];
    assert!(
        a.fast_retransmits >= 5 && a.rto_expired < a.fast_retransmits,
        "{a:?}"
    );
}
