//! Open-loop load generation for the overload experiments (LRP paper,
//! Figs. 3–5): an exact offered rate, a fixed frame template, bounded in
//! count and in time.
//!
//! - [`Pacer`]: the schedule. Frame `k` (0-based) is due at
//!   `ceil(k · 10⁹ / rate)` ns after the start, computed from the frame
//!   count (no accumulated drift). The pacer hands out at most a batch of
//!   due frames at a time; if the generator falls more than
//!   [`PacerConfig::catch_up`] frames behind, the excess is recorded as
//!   *shortfall* (frames the generator itself could not offer) instead of
//!   being sent in an unbounded burst. It stops by itself at
//!   [`PacerConfig::max_frames`] or at [`PacerConfig::max_ns`]. The clock is
//!   a plain function of time, so the schedule is tested on virtual time.
//! - The frame templates. [`UdpTemplate`]: Ethernet/IPv4/UDP
//!   with a short payload whose first 4 bytes are a sequence number; the IPv4
//!   ident is the sequence number's low 16 bits. Both the IPv4 header
//!   checksum and the UDP checksum are real: computed once over the template
//!   (sequence 0, ident 0) and, per frame, derived from those base values by
//!   RFC 1624 incremental updates ([`checksum::update`]/[`checksum::update32`]),
//!   a computed 0 being sent as 0xFFFF (RFC 768). [`SynTemplate`]: a TCP SYN
//!   (with an MSS option) to a given port, source port and ISN drawn from a
//!   seeded RNG (SplitMix64), TCP checksum also updated incrementally from the
//!   template's.
//! - [`BlastStepper`]: the generator on any [`Nic`], one step at a time, for
//!   the thread that also runs the clients or the NI engine: per step, take
//!   buffers (`alloc`), write the template, `send` up to 32 frames. It never
//!   waits for the receiver: frames for which the NIC has no free buffer, or
//!   that the full ring refuses, are counted as dropped at the "NIC" and the
//!   schedule goes on. Always `offered == sent + dropped_no_buf +
//!   dropped_ring_full`.
//! - [`udp_linux`]: the same schedule from a normal Linux UDP socket with
//!   `sendmmsg` (the peer-namespace side: `ip netns exec lazynet-peer lazynet-lab
//!   loadgen udp --dst A:P --rate R --seconds S`). Sends with `MSG_DONTWAIT`
//!   on an unconnected socket, so a full socket buffer or qdisc is counted
//!   as dropped, never waited on, and ICMP errors cannot fail later calls.
//! - [`http`]: the HTTP load generator on a lazynet stack.
//!
//! **Owns:** the schedule and the frames it writes. **May not touch:** the
//! receiver (it never waits for it); the stack's internals (NIC and public
//! API only).

pub mod http;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context};
use lazynet::mem::Desc;
use lazynet::nic::wirepair::WireEnd;
use lazynet::nic::Nic;
use lazynet::sched::clock::{Clock, InstantClock};
use lazynet::wire::checksum;

use lazynet::sys::pin_thread;

/// Largest batch per `send`/`sendmmsg`.
pub const MAX_BATCH: usize = 32;

// ---------------------------------------------------------------- clock

/// Returns when `clock` reads at least `t` ns, or a little before (callers
/// re-check): sleeps while the deadline is far (> 200 µs), spins close to
/// it.
pub fn wait_until(clock: &impl Clock, t: u64) {
    loop {
        let now = clock.now_ns();
        if now >= t {
            return;
        }
        let left = t - now;
        if left > 200_000 {
            std::thread::sleep(Duration::from_nanos(left - 100_000));
        } else {
            std::hint::spin_loop();
        }
    }
}

// ---------------------------------------------------------------- pacer

/// The schedule's parameters.
#[derive(Clone, Copy, Debug)]
pub struct PacerConfig {
    /// Offered rate, frames per second (> 0).
    pub rate_pps: u64,
    /// Stop after this many frames are scheduled (offered + shortfall).
    pub max_frames: u64,
    /// Stop at this time (ns from the start): frames due later are not offered.
    pub max_ns: u64,
    /// Frames handed out per poll, 1..=[`MAX_BATCH`].
    pub batch: usize,
    /// Largest backlog kept; frames due beyond it are shortfall.
    pub catch_up: u64,
}

impl PacerConfig {
    /// `rate_pps` for at most `seconds`, unbounded count, batch 32, catch-up 256.
    pub fn new(rate_pps: u64, seconds: f64) -> Self {
        PacerConfig {
            rate_pps,
            max_frames: u64::MAX,
            max_ns: (seconds.max(0.0) * 1e9) as u64,
            batch: MAX_BATCH,
            catch_up: 256,
        }
    }
}

/// What [`Pacer::poll`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// Send this many frames now (1..=batch).
    Send(usize),
    /// Nothing due before this time (ns).
    WaitUntil(u64),
    /// The load is over (count or time bound reached).
    Done,
}

/// An open-loop schedule with an exact rate (see the module docs).
#[derive(Clone, Debug)]
pub struct Pacer {
    cfg: PacerConfig,
    /// Frames handed out by `poll` (offered).
    offered: u64,
    /// Frames skipped because the backlog exceeded `catch_up`.
    shortfall: u64,
    /// Frames due by `max_ns` (capped by `max_frames`).
    total: u64,
}

impl Pacer {
    /// A schedule starting at time 0.
    pub fn new(mut cfg: PacerConfig) -> Self {
        assert!(cfg.rate_pps > 0, "rate must be > 0");
        cfg.batch = cfg.batch.clamp(1, MAX_BATCH);
        // Frames due at or before max_ns: k with ceil(k·1e9/rate) <= max_ns,
        // i.e. k <= max_ns·rate/1e9; k = 0 is due at 0.
        let by_time = (cfg.max_ns as u128 * cfg.rate_pps as u128 / 1_000_000_000) + 1;
        let total = (by_time.min(u64::MAX as u128) as u64).min(cfg.max_frames);
        Pacer {
            cfg,
            offered: 0,
            shortfall: 0,
            total,
        }
    }

    /// Frames due by time `t` (ns): `#{k : ceil(k·1e9/rate) <= t}`, capped by
    /// the bounds.
    pub fn due_at(&self, t: u64) -> u64 {
        let n = t as u128 * self.cfg.rate_pps as u128 / 1_000_000_000 + 1;
        (n.min(u64::MAX as u128) as u64).min(self.total)
    }

    /// Time (ns) at which frame `k` (0-based) is due.
    pub fn deadline_of(&self, k: u64) -> u64 {
        let t = (k as u128 * 1_000_000_000).div_ceil(self.cfg.rate_pps as u128);
        t.min(u64::MAX as u128) as u64
    }

    /// What to do at time `now`. A `Send(n)` counts the `n` frames as offered.
    pub fn poll(&mut self, now: u64) -> Due {
        let scheduled = self.offered + self.shortfall;
        if scheduled >= self.total {
            return Due::Done;
        }
        let due = self.due_at(now);
        if due <= scheduled {
            return Due::WaitUntil(self.deadline_of(scheduled));
        }
        let mut backlog = due - scheduled;
        if backlog > self.cfg.catch_up {
            self.shortfall += backlog - self.cfg.catch_up;
            backlog = self.cfg.catch_up;
            if backlog == 0 {
                return if self.offered + self.shortfall >= self.total {
                    Due::Done
                } else {
                    Due::WaitUntil(self.deadline_of(self.offered + self.shortfall))
                };
            }
        }
        let n = backlog.min(self.cfg.batch as u64) as usize;
        self.offered += n as u64;
        Due::Send(n)
    }

    /// Frames offered so far.
    #[cfg(test)]
    pub fn offered(&self) -> u64 {
        self.offered
    }

    /// Frames the whole load schedules (offered + shortfall at the end).
    #[cfg(test)]
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Frames due that were skipped (the generator fell behind).
    pub fn shortfall(&self) -> u64 {
        self.shortfall
    }
}

// ---------------------------------------------------------------- templates

const ETH_HLEN: usize = 14;
const IP_HLEN: usize = 20;
const UDP_HLEN: usize = 8;
const TCP_HLEN: usize = 24; // with the MSS option
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// Addresses of a template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoints {
    /// Source MAC (the generator's end).
    pub src_mac: [u8; 6],
    /// Destination MAC (the receiver's end).
    pub dst_mac: [u8; 6],
    /// Source IPv4 address.
    pub src: SocketAddrV4,
    /// Destination IPv4 address and port.
    pub dst: SocketAddrV4,
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Ethernet + IPv4 header (ident 0, DF, TTL 64) with its checksum.
fn eth_ip(e: &Endpoints, proto: u8, ip_len: usize) -> Vec<u8> {
    let mut f = vec![0u8; ETH_HLEN + ip_len];
    f[0..6].copy_from_slice(&e.dst_mac);
    f[6..12].copy_from_slice(&e.src_mac);
    put16(&mut f, 12, 0x0800);
    let ip = &mut f[ETH_HLEN..];
    ip[0] = 0x45;
    put16(ip, 2, ip_len as u16);
    put16(ip, 6, 0x4000); // DF
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&e.src.ip().octets());
    ip[16..20].copy_from_slice(&e.dst.ip().octets());
    let c = checksum::checksum(&ip[..IP_HLEN]);
    put16(ip, 10, c);
    f
}

/// Checksum over pseudo-header and segment, a 0 sent as 0xFFFF.
fn l4_sum(e: &Endpoints, proto: u8, seg: &[u8]) -> u16 {
    let ph = checksum::pseudo_header_ipv4(*e.src.ip(), *e.dst.ip(), proto, seg.len() as u16);
    nonzero(!checksum::fold(checksum::partial(seg, ph)))
}

#[inline]
fn nonzero(c: u16) -> u16 {
    if c == 0 {
        0xFFFF
    } else {
        c
    }
}

/// Ethernet/IPv4/UDP with a payload starting with a 32-bit sequence number.
#[derive(Clone, Debug)]
pub struct UdpTemplate {
    frame: Vec<u8>,
    ip_sum: u16,
    udp_sum: u16,
}

/// Offsets inside a UDP template frame.
const UDP_IP_SUM: usize = ETH_HLEN + 10;
const IP_IDENT: usize = ETH_HLEN + 4;
const UDP_SUM: usize = ETH_HLEN + IP_HLEN + 6;
const UDP_SEQ: usize = ETH_HLEN + IP_HLEN + UDP_HLEN;

impl UdpTemplate {
    /// Smallest payload (the sequence number).
    pub const MIN_PAYLOAD: usize = 4;

    /// A template with `payload` bytes (>= 4; 18 makes a 60-byte minimum
    /// Ethernet frame). Payload byte `i >= 4` is `i as u8`.
    pub fn new(e: &Endpoints, payload: usize) -> anyhow::Result<Self> {
        if !(Self::MIN_PAYLOAD..=1472).contains(&payload) {
            bail!("UDP payload {payload} out of range 4..=1472");
        }
        let udp_len = UDP_HLEN + payload;
        let mut f = eth_ip(e, PROTO_UDP, IP_HLEN + udp_len);
        let u = &mut f[ETH_HLEN + IP_HLEN..];
        put16(u, 0, e.src.port());
        put16(u, 2, e.dst.port());
        put16(u, 4, udp_len as u16);
        for (i, b) in u[UDP_HLEN..].iter_mut().enumerate().skip(4) {
            *b = i as u8;
        }
        let s = l4_sum(e, PROTO_UDP, u);
        put16(u, 6, s);
        let ip_sum = u16::from_be_bytes([f[UDP_IP_SUM], f[UDP_IP_SUM + 1]]);
        Ok(UdpTemplate {
            frame: f,
            ip_sum,
            udp_sum: s,
        })
    }

    /// Frame length.
    pub fn len(&self) -> usize {
        self.frame.len()
    }

    /// Writes frame number `seq` into `buf` (at least [`Self::len`] bytes):
    /// the template, then sequence number, ident and both checksums patched.
    #[inline]
    pub fn write(&self, seq: u64, buf: &mut [u8]) -> usize {
        let n = self.frame.len();
        let b = &mut buf[..n];
        b.copy_from_slice(&self.frame);
        let s = seq as u32;
        let ident = s as u16;
        put16(b, IP_IDENT, ident);
        put16(b, UDP_IP_SUM, checksum::update(self.ip_sum, 0, ident));
        put32(b, UDP_SEQ, s);
        put16(b, UDP_SUM, nonzero(checksum::update32(self.udp_sum, 0, s)));
        n
    }
}

/// SplitMix64: a small seeded generator (deterministic loads).
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// Seeded.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    /// Next value.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Ethernet/IPv4/TCP SYN (MSS 1460) with random source port and ISN, and
/// optionally a random (spoofed) source address
/// ([`SynTemplate::with_random_sources`]).
#[derive(Clone, Debug)]
pub struct SynTemplate {
    frame: Vec<u8>,
    ip_sum: u16,
    tcp_sum: u16,
    rng: SplitMix64,
    /// Random sources: (template's source, base, host mask).
    spoof: Option<(u32, u32, u32)>,
}

const TCP_OFF: usize = ETH_HLEN + IP_HLEN;

impl SynTemplate {
    /// Source ports are drawn from 1024..=65535; `e.src`'s port is ignored.
    pub fn new(e: &Endpoints, seed: u64) -> Self {
        let mut f = eth_ip(e, PROTO_TCP, IP_HLEN + TCP_HLEN);
        let t = &mut f[TCP_OFF..];
        put16(t, 0, 0); // source port: patched per frame
        put16(t, 2, e.dst.port());
        put32(t, 4, 0); // ISN: patched per frame
        t[12] = ((TCP_HLEN / 4) as u8) << 4;
        t[13] = 0x02; // SYN
        put16(t, 14, 65535);
        t[20] = 2; // MSS
        t[21] = 4;
        put16(t, 22, 1460);
        let s = l4_sum(e, PROTO_TCP, t);
        put16(t, 16, s);
        let ip_sum = u16::from_be_bytes([f[UDP_IP_SUM], f[UDP_IP_SUM + 1]]);
        SynTemplate {
            frame: f,
            ip_sum,
            tcp_sum: s,
            rng: SplitMix64::new(seed),
            spoof: None,
        }
    }

    /// Draws every SYN's source address at random from `net`/`prefix_len`
    /// (a spoofed flood; e.g. 198.18.0.0/15, off the receiver's subnet, so
    /// that its replies go to one gateway and it resolves no address per
    /// source).
    pub fn with_random_sources(mut self, net: Ipv4Addr, prefix_len: u8) -> Self {
        let mask = if prefix_len >= 32 {
            0
        } else {
            u32::MAX >> prefix_len.min(31)
        };
        let f = &self.frame;
        let src = u32::from_be_bytes([f[26], f[27], f[28], f[29]]);
        self.spoof = Some((src, u32::from(net) & !mask, mask));
        self
    }

    /// Writes SYN number `seq` into `buf`: fresh random port and ISN.
    #[inline]
    pub fn write(&mut self, seq: u64, buf: &mut [u8]) -> usize {
        let n = self.frame.len();
        let b = &mut buf[..n];
        b.copy_from_slice(&self.frame);
        let r = self.rng.next_u64();
        let port = 1024 + (r as u16 % (65535 - 1024 + 1));
        let isn = (r >> 32) as u32;
        let ident = seq as u16;
        put16(b, IP_IDENT, ident);
        let (mut ip_sum, mut tcp_sum) = (self.ip_sum, self.tcp_sum);
        if let Some((old, base, mask)) = self.spoof {
            // RFC 1624 updates of both checksums (the TCP one covers the
            // address through the pseudo-header).
            let src = base | (self.rng.next_u64() as u32 & mask);
            put32(b, ETH_HLEN + 12, src);
            ip_sum = checksum::update32(ip_sum, old, src);
            tcp_sum = checksum::update32(tcp_sum, old, src);
        }
        put16(b, UDP_IP_SUM, checksum::update(ip_sum, 0, ident));
        put16(b, TCP_OFF, port);
        put32(b, TCP_OFF + 4, isn);
        let c = checksum::update32(checksum::update(tcp_sum, 0, port), 0, isn);
        // TCP has no "no checksum": a computed 0 stays 0 (never produced by
        // RFC 1624 eqn. 3 unless recomputation also gives 0).
        put16(b, TCP_OFF + 16, c);
        n
    }
}

// ---------------------------------------------------------------- blaster

/// Counters of one load. `offered == sent + dropped_no_buf + dropped_ring_full`;
/// `offered + shortfall` is what the schedule asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BlastStats {
    /// Frames the schedule handed to the generator.
    pub offered: u64,
    /// Frames the NIC accepted.
    pub sent: u64,
    /// Frames dropped because the NIC had no free buffer.
    pub dropped_no_buf: u64,
    /// Frames dropped because the NIC refused them (ring full; for the Linux
    /// sender: `EAGAIN`/`ENOBUFS` or any other send error).
    pub dropped_ring_full: u64,
    /// Frames due that the generator could not offer (fell behind by more
    /// than the catch-up bound).
    pub shortfall: u64,
    /// Calls to `send` (or `sendmmsg`).
    pub send_calls: u64,
    /// From the start to the last frame offered (ns, generator's clock).
    pub elapsed_ns: u64,
    /// The configured rate.
    pub rate_pps: u64,
}

impl BlastStats {
    /// All drops at the "NIC".
    pub fn dropped(&self) -> u64 {
        self.dropped_no_buf + self.dropped_ring_full
    }
    /// Frames accepted per second of the run.
    pub fn achieved_pps(&self) -> f64 {
        if self.elapsed_ns == 0 {
            return 0.0;
        }
        self.sent as f64 * 1e9 / self.elapsed_ns as f64
    }
    /// Frames offered per second of the run.
    pub fn offered_pps(&self) -> f64 {
        if self.elapsed_ns == 0 {
            return 0.0;
        }
        self.offered as f64 * 1e9 / self.elapsed_ns as f64
    }
}

/// The generator, one step at a time, for a thread that interleaves the
/// load with other work (a client's ping-pong, the NI engine of `ni-lrp`):
/// each [`BlastStepper::step`] offers the frames due (at most one batch) and
/// returns at once; it never waits for the receiver: frames for which the
/// NIC has no free buffer, or that the full ring refuses, are counted as
/// dropped at the "NIC" and the schedule goes on. Always
/// `offered == sent + dropped_no_buf + dropped_ring_full`.
pub struct BlastStepper {
    gen: UdpTemplate,
    pacer: Pacer,
    spare: [u32; MAX_BATCH],
    nspare: usize,
    seq: u64,
    st: BlastStats,
}

impl BlastStepper {
    /// A load of `gen` frames on schedule `cfg`, starting at time 0 of the
    /// clock the caller passes to `step`.
    pub fn new(gen: UdpTemplate, cfg: PacerConfig) -> Self {
        BlastStepper {
            gen,
            pacer: Pacer::new(cfg),
            spare: [0; MAX_BATCH],
            nspare: 0,
            seq: 0,
            st: BlastStats {
                rate_pps: cfg.rate_pps,
                ..BlastStats::default()
            },
        }
    }

    /// Offers what is due at `now` (ns since the start): at most one batch.
    pub fn step<N: Nic>(&mut self, nic: &mut N, now: u64) -> Due {
        let n = match self.pacer.poll(now) {
            Due::Send(n) => n,
            other => return other,
        };
        self.st.elapsed_ns = now;
        if self.nspare < n {
            self.nspare += nic.alloc(&mut self.spare[self.nspare..n]);
        }
        let have = self.nspare.min(n);
        self.st.dropped_no_buf += (n - have) as u64;
        let len = self.gen.len() as u16;
        let mut batch = [Desc::default(); MAX_BATCH];
        let area = nic.buffers_mut();
        for (i, d) in batch[..have].iter_mut().enumerate() {
            let b = self.spare[self.nspare - 1 - i];
            if let Some(buf) = area.buf_mut(b) {
                self.gen.write(self.seq, buf);
            }
            self.seq += 1;
            *d = Desc::new(b, len);
        }
        let k = if have > 0 {
            self.st.send_calls += 1;
            nic.send(&batch[..have])
        } else {
            0
        };
        self.nspare -= k;
        self.st.sent += k as u64;
        self.st.dropped_ring_full += (have - k) as u64;
        self.st.offered += n as u64;
        self.seq += (n - have) as u64;
        Due::Send(n)
    }

    /// The counters so far.
    pub fn stats(&self) -> BlastStats {
        BlastStats {
            shortfall: self.pacer.shortfall(),
            ..self.st
        }
    }

    /// Ends the load: gives the buffers still held back to `nic`.
    pub fn finish<N: Nic>(&mut self, nic: &mut N) -> BlastStats {
        let mut rel = [Desc::default(); MAX_BATCH];
        for (d, &b) in rel.iter_mut().zip(&self.spare[..self.nspare]) {
            *d = Desc::new(b, 0);
        }
        nic.release(&rel[..self.nspare]);
        nic.flush();
        self.nspare = 0;
        self.stats()
    }
}

// ---------------------------------------------------------------- Linux sender

/// Parameters of [`udp_linux`].
#[derive(Clone, Copy, Debug)]
pub struct LinuxUdpConfig {
    /// Destination.
    pub dst: SocketAddrV4,
    /// The schedule.
    pub pacer: PacerConfig,
    /// Payload bytes (>= 4: the sequence number comes first).
    pub size: usize,
    /// Pin to this CPU.
    pub cpu: Option<usize>,
}

/// Sends the load from a Linux UDP socket with `sendmmsg` (see the module docs).
pub fn udp_linux(cfg: &LinuxUdpConfig, stop: &AtomicBool) -> anyhow::Result<BlastStats> {
    if !(UdpTemplate::MIN_PAYLOAD..=65507).contains(&cfg.size) {
        bail!("--size {} out of range 4..=65507", cfg.size);
    }
    if let Some(cpu) = cfg.cpu {
        pin_thread(cpu);
    }
    let sock = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).context("socket")?;
    let mut pacer = Pacer::new(cfg.pacer);
    let clock = InstantClock::new();
    let mut st = BlastStats {
        rate_pps: cfg.pacer.rate_pps,
        ..BlastStats::default()
    };
    let mut bufs = vec![0u8; cfg.size * MAX_BATCH];
    for (i, b) in bufs.iter_mut().enumerate() {
        *b = (i % cfg.size) as u8;
    }
    let mut mm = crate::infra::sys::MmsgSender::new(MAX_BATCH, Some(cfg.dst));
    let mut seq = 0u64;
    let mut first_error: Option<std::io::Error> = None;
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let now = clock.now_ns();
        let n = match pacer.poll(now) {
            Due::Done => break,
            Due::WaitUntil(t) => {
                wait_until(&clock, t);
                continue;
            }
            Due::Send(n) => n,
        };
        st.elapsed_ns = now;
        for (i, b) in bufs.chunks_exact_mut(cfg.size).take(n).enumerate() {
            b[..4].copy_from_slice(&((seq + i as u64) as u32).to_be_bytes());
        }
        let batch: Vec<&[u8]> = bufs.chunks_exact(cfg.size).take(n).collect();
        seq += n as u64;
        st.offered += n as u64;
        // Never wait on the kernel: what it does not take now is dropped.
        let mut done = 0usize;
        while done < n {
            st.send_calls += 1;
            match mm.send(sock.as_fd(), &batch[done..n], libc::MSG_DONTWAIT) {
                Ok(r) if r > 0 => {
                    st.sent += r as u64;
                    done += r;
                }
                // The first message failed (EAGAIN, ENOBUFS, ...): drop it,
                // try the rest of the batch.
                res => {
                    if first_error.is_none() {
                        first_error = Some(
                            res.err()
                                .unwrap_or_else(|| std::io::Error::other("sent nothing")),
                        );
                    }
                    st.dropped_ring_full += 1;
                    done += 1;
                }
            }
        }
    }
    st.shortfall = pacer.shortfall();
    if let Some(e) = first_error {
        if st.sent == 0 {
            bail!("sendmmsg to {}: {e}", cfg.dst);
        }
        eprintln!("loadgen: first send error: {e}");
    }
    Ok(st)
}

/// `lazynet-lab loadgen udp`: prints the counters.
pub fn udp_cmd(
    dst: SocketAddrV4,
    rate: u64,
    seconds: f64,
    size: usize,
    count: Option<u64>,
    cpu: Option<usize>,
) -> anyhow::Result<()> {
    if rate == 0 {
        bail!("--rate must be > 0");
    }
    if !(seconds > 0.0 && seconds <= 3600.0) {
        bail!("--seconds must be in (0, 3600]");
    }
    let mut pacer = PacerConfig::new(rate, seconds);
    if let Some(c) = count {
        pacer.max_frames = c;
    }
    let stop = lazynet_cli::util::stop_flag()?;
    let st = udp_linux(
        &LinuxUdpConfig {
            dst,
            pacer,
            size,
            cpu,
        },
        &stop,
    )?;
    print_stats("udp", dst, &st);
    Ok(())
}

fn print_stats(what: &str, dst: SocketAddrV4, st: &BlastStats) {
    println!(
        "loadgen {what} -> {dst}: rate {} pps, {:.3} s\n  offered {}  sent {}  dropped {} (no buffer {}, refused {})  shortfall {}  calls {}\n  offered {:.0} pps  achieved {:.0} pps",
        st.rate_pps,
        st.elapsed_ns as f64 / 1e9,
        st.offered,
        st.sent,
        st.dropped(),
        st.dropped_no_buf,
        st.dropped_ring_full,
        st.shortfall,
        st.send_calls,
        st.offered_pps(),
        st.achieved_pps(),
    );
}

/// Default endpoints on the in-memory wire (end A → end B).
pub fn wire_endpoints(a: &WireEnd, b_mac: [u8; 6], dst: SocketAddrV4) -> Endpoints {
    Endpoints {
        src_mac: a.mac(),
        dst_mac: b_mac,
        src: SocketAddrV4::new(Ipv4Addr::new(10, 201, 0, 1), 40000),
        dst,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lazynet::nic::wirepair::{WireConfig, WirePair};
    use lazynet::wire::{EthernetFrame, Ipv4Packet, TcpPacket, UdpPacket};

    fn cfg(rate: u64, max_frames: u64, max_ns: u64, catch_up: u64) -> PacerConfig {
        PacerConfig {
            rate_pps: rate,
            max_frames,
            max_ns,
            batch: 32,
            catch_up,
        }
    }

    #[test]
    fn pacer_due_counts_are_exact() {
        // 1000 pps: frame k due at k ms.
        let mut p = Pacer::new(cfg(1000, u64::MAX, 10_000_000_000, 1000));
        assert_eq!(p.poll(0), Due::Send(1));
        assert_eq!(p.poll(0), Due::WaitUntil(1_000_000));
        assert_eq!(p.poll(999_999), Due::WaitUntil(1_000_000));
        assert_eq!(p.poll(1_000_000), Due::Send(1));
        // 5.5 ms: frames 2..=5 due.
        assert_eq!(p.poll(5_500_000), Due::Send(4));
        assert_eq!(p.poll(5_500_000), Due::WaitUntil(6_000_000));
        assert_eq!(p.offered(), 6);
        // Non-integral interval: 3 pps, deadlines 0, 333_333_334, 666_666_667, 1e9.
        let p = Pacer::new(cfg(3, u64::MAX, 1_000_000_000_000, 1000));
        assert_eq!(p.deadline_of(1), 333_333_334);
        assert_eq!(p.deadline_of(2), 666_666_667);
        assert_eq!(p.deadline_of(3), 1_000_000_000);
        for k in 0..100 {
            let d = p.deadline_of(k);
            assert_eq!(p.due_at(d), k + 1, "frame {k} due at its deadline");
            if d > 0 {
                assert_eq!(p.due_at(d - 1), k, "frame {k} not due before");
            }
        }
        // No drift over a long run: 7 pps for 1000 s = 7000 intervals.
        let p = Pacer::new(cfg(7, u64::MAX, 2_000_000_000_000, 1000));
        assert_eq!(p.due_at(1_000_000_000_000), 7001);
    }

    #[test]
    fn pacer_batches_at_most_32() {
        let mut p = Pacer::new(cfg(1_000_000, u64::MAX, 1_000_000_000, 1000));
        // 100 µs at 1 Mpps: frames 0..=100 due = 101.
        let mut got = vec![];
        while let Due::Send(n) = p.poll(100_000) {
            got.push(n);
        }
        assert_eq!(got, vec![32, 32, 32, 5]);
        assert_eq!(p.offered(), 101);
        assert_eq!(p.shortfall(), 0);
    }

    #[test]
    fn pacer_bounds_catch_up_and_records_shortfall() {
        let mut p = Pacer::new(cfg(1_000_000, u64::MAX, 1_000_000_000, 40));
        // The generator wakes 1 ms late: 1001 due, backlog capped at 40.
        assert_eq!(p.poll(1_000_000), Due::Send(32));
        assert_eq!(p.shortfall(), 961);
        assert_eq!(p.poll(1_000_000), Due::Send(8));
        assert_eq!(p.poll(1_000_000), Due::WaitUntil(1_001_000));
        assert_eq!(p.offered() + p.shortfall(), 1001);
        // Zero catch-up: only the frames of this poll... none kept.
        let mut p = Pacer::new(cfg(1000, u64::MAX, 1_000_000_000, 0));
        assert_eq!(p.poll(5_000_000), Due::WaitUntil(6_000_000));
        assert_eq!((p.offered(), p.shortfall()), (0, 6));
    }

    #[test]
    fn pacer_stops_by_count_and_by_time() {
        let mut p = Pacer::new(cfg(1000, 10, u64::MAX, 1000));
        assert_eq!(p.total(), 10);
        assert_eq!(p.poll(1_000_000_000), Due::Send(10));
        assert_eq!(p.poll(1_000_000_000), Due::Done);
        // By time: 1000 pps for 50 ms = frames at 0..=50 ms = 51.
        let mut p = Pacer::new(cfg(1000, u64::MAX, 50_000_000, 1000));
        assert_eq!(p.total(), 51);
        let mut sent = 0;
        let mut t = 0;
        loop {
            match p.poll(t) {
                Due::Send(n) => sent += n,
                Due::WaitUntil(d) => t = d,
                Due::Done => break,
            }
        }
        assert_eq!(sent, 51);
        assert_eq!(t, 50_000_000);
        // Late at the end: shortfall plus offered still equals the total.
        let mut p = Pacer::new(cfg(1000, u64::MAX, 50_000_000, 5));
        assert_eq!(p.poll(10_000_000_000), Due::Send(5));
        assert_eq!(p.poll(10_000_000_000), Due::Done);
        assert_eq!(p.offered() + p.shortfall(), 51);
    }

    fn endpoints() -> Endpoints {
        Endpoints {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: SocketAddrV4::new(Ipv4Addr::new(10, 201, 0, 1), 40000),
            dst: SocketAddrV4::new(Ipv4Addr::new(10, 201, 0, 2), 9),
        }
    }

    /// Checks a UDP frame of the template; returns its sequence number.
    fn check_udp(f: &[u8], e: &Endpoints, payload: usize) -> u32 {
        let eth = EthernetFrame::new_checked(f).unwrap();
        assert_eq!(eth.dst().0, e.dst_mac);
        assert_eq!(eth.src().0, e.src_mac);
        assert_eq!(eth.ethertype(), 0x0800);
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.protocol(), PROTO_UDP);
        assert_eq!((ip.src(), ip.dst()), (*e.src.ip(), *e.dst.ip()));
        let u = UdpPacket::new_checked(ip.payload()).unwrap();
        assert_ne!(u.checksum(), 0, "checksum must be computed");
        assert!(u.verify_checksum(ip.src(), ip.dst()));
        assert_eq!((u.src_port(), u.dst_port()), (40000, 9));
        assert_eq!(u.payload().len(), payload);
        let seq = u32::from_be_bytes(u.payload()[..4].try_into().unwrap());
        assert_eq!(ip.ident(), seq as u16);
        for (i, &b) in u.payload().iter().enumerate().skip(4) {
            assert_eq!(b, i as u8);
        }
        seq
    }

    #[test]
    fn udp_template_checksums_match_recomputation() {
        let e = endpoints();
        let t = UdpTemplate::new(&e, 18).unwrap();
        assert_eq!(t.len(), 60);
        let mut buf = [0u8; 128];
        for seq in (0..70_000u64).chain([u32::MAX as u64, 0xFFFF_0000, 0x0001_2345_6789]) {
            let n = t.write(seq, &mut buf);
            assert_eq!(check_udp(&buf[..n], &e, 18), seq as u32);
        }
        assert!(UdpTemplate::new(&e, 3).is_err());
    }

    #[test]
    fn syn_template_is_a_valid_seeded_syn() {
        let e = endpoints();
        let mut a = SynTemplate::new(&e, 7);
        let mut b = SynTemplate::new(&e, 7);
        let mut buf = [0u8; 128];
        let mut buf2 = [0u8; 128];
        let mut ports = std::collections::HashSet::new();
        for seq in 0..5000u64 {
            let n = a.write(seq, &mut buf);
            assert_eq!(b.write(seq, &mut buf2), n);
            assert_eq!(buf[..n], buf2[..n], "same seed, same frames");
            let eth = EthernetFrame::new_checked(&buf[..n]).unwrap();
            let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
            assert!(ip.verify_checksum());
            assert_eq!(ip.protocol(), PROTO_TCP);
            assert_eq!(ip.ident(), seq as u16);
            let t = TcpPacket::new_checked(ip.payload()).unwrap();
            assert!(t.verify_checksum(ip.src(), ip.dst()));
            assert_eq!(t.flags(), lazynet::wire::TcpFlags::SYN);
            assert_eq!(t.dst_port(), 9);
            assert!(t.src_port() >= 1024);
            assert_eq!(t.payload().len(), 0);
            ports.insert(t.src_port());
        }
        assert!(ports.len() > 4000, "ports look random: {}", ports.len());
        let mut c = SynTemplate::new(&e, 8);
        c.write(0, &mut buf2);
        a = SynTemplate::new(&e, 7);
        a.write(0, &mut buf);
        assert_ne!(buf[..58], buf2[..58], "another seed, other frames");
    }

    #[test]
    fn spoofed_syns_have_random_sources_in_the_net_and_valid_checksums() {
        let e = endpoints();
        let net = Ipv4Addr::new(198, 18, 0, 0);
        let mut a = SynTemplate::new(&e, 3).with_random_sources(net, 15);
        let mut buf = [0u8; 128];
        let mut srcs = std::collections::HashSet::new();
        for seq in 0..5000u64 {
            let n = a.write(seq, &mut buf);
            let eth = EthernetFrame::new_checked(&buf[..n]).unwrap();
            let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
            assert!(ip.verify_checksum());
            let src = u32::from(ip.src());
            assert_eq!(src >> 17, u32::from(net) >> 17, "{}", ip.src());
            let t = TcpPacket::new_checked(ip.payload()).unwrap();
            assert!(t.verify_checksum(ip.src(), ip.dst()));
            srcs.insert(src);
        }
        assert!(srcs.len() > 4900, "sources look random: {}", srcs.len());
    }

    /// A NIC with `bufs` buffers whose ring takes `ring` frames and is never drained.
    /// Steps `s` on `a` every `every` ns of virtual time until its schedule
    /// ends; nobody drains the other end.
    fn run_undrained(s: &mut BlastStepper, a: &mut WireEnd, every: u64) -> BlastStats {
        let mut t = 0;
        while s.step(a, t) != Due::Done {
            t += every;
        }
        s.finish(a)
    }

    #[test]
    fn virtual_time_load_counts_every_frame_and_never_blocks() {
        let (mut a, _b) = WirePair::new(WireConfig {
            buf_count: 64, // 32 per end
            ring_capacity: 16,
            ..WireConfig::default()
        })
        .unwrap();
        let e = endpoints();
        let gen = UdpTemplate::new(&e, 18).unwrap();
        // 1 Mpps for 1 ms of virtual time: 1001 frames, stepped every 100 ns.
        let mut s = BlastStepper::new(gen, cfg(1_000_000, u64::MAX, 1_000_000, 64));
        let st = run_undrained(&mut s, &mut a, 100);
        assert_eq!(st.offered + st.shortfall, 1001);
        assert_eq!(st.offered, st.sent + st.dropped());
        // Nobody drains: the ring holds 16 frames, then every send is refused.
        assert_eq!(st.sent, 16);
        assert!(st.dropped_ring_full > 0);
        assert_eq!(a.stats().tx_frames, 16);
        // The unsent buffers were given back.
        a.reclaim();
        assert_eq!(a.free_buffers(), 32 - 16);
    }

    #[test]
    fn stepper_offers_on_schedule_counts_every_frame_and_never_waits() {
        let (mut a, mut b) = WirePair::new(WireConfig {
            buf_count: 64,
            ring_capacity: 16,
            ..WireConfig::default()
        })
        .unwrap();
        let e = endpoints();
        let gen = UdpTemplate::new(&e, 18).unwrap();
        // 1 Mpps for 1 ms: 1001 frames; stepped every 10 µs, the receiver
        // drains every other step.
        let mut s = BlastStepper::new(gen, cfg(1_000_000, u64::MAX, 1_000_000, 64));
        let mut ds = [Desc::default(); 64];
        let mut got = 0u64;
        let mut t = 0;
        for i in 0..1000u64 {
            match s.step(&mut a, t) {
                Due::Done => break,
                Due::Send(n) => assert!(n <= MAX_BATCH),
                Due::WaitUntil(w) => assert!(w > t),
            }
            if i % 2 == 0 {
                let n = b.recv(&mut ds);
                for d in &ds[..n] {
                    check_udp(b.buffers().frame(*d).unwrap(), &e, 18);
                }
                got += n as u64;
                b.release(&ds[..n]);
            }
            t += 10_000;
        }
        let st = s.finish(&mut a);
        assert_eq!(st.offered + st.shortfall, 1001);
        assert_eq!(st.offered, st.sent + st.dropped());
        assert!(st.sent >= got && st.sent > 500, "{st:?}");
    }

    #[test]
    fn real_time_load_delivers_valid_frames_and_counts_add_up() {
        let (mut a, mut b) = WirePair::new(WireConfig::default()).unwrap();
        let e = wire_endpoints(
            &a,
            b.mac(),
            SocketAddrV4::new(Ipv4Addr::new(10, 201, 0, 2), 9),
        );
        let gen = UdpTemplate::new(&e, 18).unwrap();
        // 20 kpps for 0.2 s on the real clock, the receiver drained in between.
        let mut s = BlastStepper::new(gen, PacerConfig::new(20_000, 0.2));
        let clock = InstantClock::new();
        let mut rx = [Desc::default(); 64];
        let mut got = 0u64;
        let mut last: Option<u32> = None;
        let mut drain = |b: &mut WireEnd, got: &mut u64| loop {
            let n = b.recv(&mut rx);
            if n == 0 {
                return;
            }
            for d in &rx[..n] {
                let f = b.buffers().frame(*d).unwrap();
                let s = check_udp(f, &e, 18);
                if let Some(l) = last {
                    assert!(s > l, "sequence increases: {l} then {s}");
                }
                last = Some(s);
            }
            b.release(&rx[..n]);
            *got += n as u64;
        };
        loop {
            match s.step(&mut a, clock.now_ns()) {
                Due::Done => break,
                Due::WaitUntil(t) => wait_until(&clock, t),
                Due::Send(_) => {}
            }
            drain(&mut b, &mut got);
        }
        let st = s.finish(&mut a);
        drain(&mut b, &mut got);
        assert_eq!(st.offered, st.sent + st.dropped());
        assert_eq!(st.offered + st.shortfall, 4001);
        assert_eq!(got, st.sent);
        assert!(st.sent > 0);
    }

    #[test]
    fn non_draining_receiver_makes_drops_not_a_stall() {
        let (mut a, b) = WirePair::new(WireConfig::default()).unwrap();
        let e = wire_endpoints(
            &a,
            b.mac(),
            SocketAddrV4::new(Ipv4Addr::new(10, 201, 0, 2), 9),
        );
        let gen = UdpTemplate::new(&e, 18).unwrap();
        let mut pacer = PacerConfig::new(100_000, 30.0);
        pacer.max_frames = 5000;
        // The count bound ends it (50 ms of virtual time).
        let mut s = BlastStepper::new(gen, pacer);
        let st = run_undrained(&mut s, &mut a, 1_000);
        assert_eq!(st.offered + st.shortfall, 5000);
        assert_eq!(st.offered, st.sent + st.dropped());
        // The ring (256) fills and stays full.
        assert_eq!(st.sent, 256);
        assert_eq!(st.dropped(), st.offered - 256);
        assert_eq!(a.stats().tx_frames, 256);
        drop(b);
    }
}
