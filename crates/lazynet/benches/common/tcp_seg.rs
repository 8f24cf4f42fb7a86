//! One established connection driven segment by segment, for
//! `benches/tcp_fastpath.rs` and `examples/tcp_segment_cost.rs`: the test
//! plays the peer; only `handle_segment` calls are meant to be measured,
//! the bookkeeping that keeps the window open (reading, polling ACKs,
//! queueing data) happens between chunks.

use std::net::{Ipv4Addr, SocketAddrV4};

use lazynet::proto::tcp::{Config, Connection};
use lazynet::wire::tcp::{SeqNumber, TcpFlags, TcpRepr, Timestamps};

const LOCAL: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80);
const REMOTE: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 49500);
/// Payload per data segment (Ethernet MSS minus timestamps).
pub const SEG: usize = 1448;
/// Segments per chunk: fits the 64 KiB receive window without reading.
pub const CHUNK: usize = 32;

/// The connection under test and the peer's view of it.
pub struct Driver {
    pub c: Connection,
    now: u64,
    /// Peer's next sequence number.
    nxt: SeqNumber,
    tsval: u32,
    tsecr: u32,
    out: Vec<u8>,
    payload: Vec<u8>,
}

impl Driver {
    /// ESTABLISHED by passive open with window scaling and timestamps
    /// (what Linux negotiates by default); `fast` sets `Config::fast_path`.
    pub fn new(fast: bool) -> Self {
        let cfg = Config {
            send_buf: 1 << 20,
            recv_buf: 64 * 1024,
            fast_path: fast,
            ..Config::default()
        };
        let syn = TcpRepr {
            src_port: REMOTE.port(),
            dst_port: LOCAL.port(),
            seq: SeqNumber(1_000),
            flags: TcpFlags::SYN,
            window: 65535,
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamps: Some(Timestamps { tsval: 1, tsecr: 0 }),
            ..TcpRepr::EMPTY
        };
        let c = Connection::accept_syn(cfg, LOCAL, REMOTE, &syn, SeqNumber(5_000), 0).unwrap();
        let mut d = Driver {
            c,
            now: 0,
            nxt: SeqNumber(1_001),
            tsval: 1,
            tsecr: 0,
            out: vec![0; 2048],
            payload: (0..SEG).map(|i| i as u8).collect(),
        };
        d.drain();
        let ack = d.c.snd_nxt();
        let r = d.repr(ack, 0);
        d.c.handle_segment(0, &r, &[]).unwrap();
        d
    }

    fn repr(&mut self, ack: SeqNumber, len: usize) -> TcpRepr {
        self.tsval = self.tsval.wrapping_add(1);
        TcpRepr {
            src_port: REMOTE.port(),
            dst_port: LOCAL.port(),
            seq: self.nxt,
            ack,
            flags: TcpFlags::ACK,
            // 65535 << 7: never changes, never limits.
            window: 65535,
            timestamps: Some(Timestamps {
                tsval: self.tsval,
                tsecr: self.tsecr,
            }),
            payload_len: len,
            ..TcpRepr::EMPTY
        }
    }

    /// Sends everything `poll_transmit` has; remembers the last TSval.
    fn drain(&mut self) {
        while let Some(r) = self.c.poll_transmit(self.now, &mut self.out) {
            if let Some(t) = r.timestamps {
                self.tsecr = t.tsval;
            }
        }
    }

    /// Up to `CHUNK` of the next in-order data segments of `SEG` bytes
    /// (with their arrival times) for the caller to feed in order with
    /// [`Driver::payload`]; then call [`Driver::data_done`].
    pub fn data_segs(&mut self, n: usize, out: &mut Vec<(u64, TcpRepr)>) {
        out.clear();
        let mut nxt = self.nxt;
        for _ in 0..n.min(CHUNK) {
            self.now += 10_000;
            let ack = self.c.snd_una();
            let r = TcpRepr {
                seq: nxt,
                ..self.repr(ack, SEG)
            };
            out.push((self.now, r));
            nxt += SEG as u32;
        }
    }

    /// The payload of every data segment.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// After `n` data segments were fed: checks they were accepted, reads
    /// them and sends our ACKs (window updates).
    pub fn data_done(&mut self, n: usize) {
        self.nxt += (n * SEG) as u32;
        assert_eq!(self.c.rcv_nxt(), self.nxt, "a segment was not accepted");
        let mut sink = [0u8; 64 * 1024];
        while self.c.recv(&mut sink) > 0 {}
        self.drain();
    }

    /// Queues and transmits data, then returns up to `min(n, CHUNK)` pure
    /// ACKs (with arrival times), each acking one more segment; feed them
    /// in order, then call [`Driver::acks_done`].
    pub fn ack_segs(&mut self, n: usize, out: &mut Vec<(u64, TcpRepr)>) {
        out.clear();
        let want = CHUNK * SEG;
        let queued = self.c.send_queue();
        if queued < want {
            self.c.send(&vec![7u8; want - queued]);
        }
        self.now += 10_000;
        self.drain();
        let mss = self.c.eff_mss();
        let outstanding = self.c.snd_nxt().diff(self.c.snd_una()).max(0) as u32;
        let k = ((outstanding / mss) as usize).min(n).min(CHUNK);
        let mut ack = self.c.snd_una();
        for _ in 0..k {
            self.now += 10_000;
            ack += mss;
            let r = self.repr(ack, 0);
            out.push((self.now, r));
        }
    }

    /// After the ACKs of `ack_segs` were fed: checks they were accepted.
    pub fn acks_done(&mut self, segs: &[(u64, TcpRepr)]) {
        if let Some((_, r)) = segs.last() {
            assert_eq!(self.c.snd_una(), r.ack, "an ACK was not accepted");
        }
    }
}
