//! One TCP connection (one TCB), sans-IO (RFC 9293 §3.3.2 state machine).
//!
//! ```text
//!                             +---------+ ---------\      active OPEN
//!                             |  CLOSED |            \    -----------
//!                             +---------+<---------\   \   create TCB
//!   accept_syn (passive)        |     ^              \   \  snd SYN
//!   ----------------------      |     |   CLOSE        \   \
//!   create TCB, snd SYN,ACK     |     |  -------       |   |
//!                               V     |  delete TCB    |   V
//!          +---------+            +---------+  rcv SYN   +---------+
//!          |  SYN    |<-----------|  SYN    |<-----------|  SYN    |
//!          |  RCVD   |   (accept) |  (new)  | snd SYN,ACK|  SENT   |
//!          +---------+            +---------+  (simult.) +---------+
//!   rcv ACK of SYN |                               rcv SYN,ACK |
//!   -------------- |                               ----------- |
//!        x         V                                 snd ACK   V
//!                 +---------------------------------------------+
//!                 |                    ESTAB                    |
//!                 +---------------------------------------------+
//!  CLOSE  |  snd FIN                              rcv FIN |  snd ACK
//!         V                                               V
//!   +---------+ rcv FIN  +---------+              +---------+
//!   | FIN     |--------->| CLOSING |              |  CLOSE  |
//!   | WAIT-1  | snd ACK  +---------+              |   WAIT  |
//!   +---------+              | rcv ACK of FIN     +---------+
//!  rcv ACK of FIN |          V                   CLOSE |  snd FIN
//!         V             +---------+                    V
//!   +---------+         |TIME WAIT|--2MSL--> CLOSED +---------+
//!   |FINWAIT-2|-------->+---------+                 |LAST-ACK |
//!   +---------+ rcv FIN, snd ACK     rcv ACK of FIN +---------+ --> CLOSED
//! ```
//!
//! # Calling order
//!
//! 1. Create with [`Connection::connect`] (active open; the first
//!    [`Connection::poll_transmit`] yields the SYN) or
//!    [`Connection::accept_syn`] (passive open from a parsed SYN; the first
//!    `poll_transmit` yields the SYN-ACK). The caller chooses the ISS
//!    (RFC 6528) and gives the current time.
//! 2. For each received segment of this 4-tuple, after the checksum was
//!    verified and the header parsed into a [`TcpRepr`]:
//!    [`Connection::handle_segment`]`(now, &repr, payload)`.
//! 3. When `now >= `[`Connection::poll_timeout`]`()`:
//!    [`Connection::handle_timeout`]`(now)`.
//! 4. After any of the above and after [`Connection::send`],
//!    [`Connection::recv`], [`Connection::close`] or [`Connection::abort`]:
//!    call [`Connection::poll_transmit`] until it returns `None`, sending
//!    each segment; then re-read `poll_timeout`.
//!
//! Work per call is bounded: `handle_segment` does O(1) work plus one copy
//! of the payload; `poll_transmit` builds one segment of at most one MSS.
//! (SACK: at most 4 received blocks merged into a scoreboard of
//! [`super::sack::MAX_SACKED`] ranges; NextSeg and pipe walk those ranges.)
//!
//! # Fast path
//!
//! `handle_segment` first tries header prediction (`fast.rs`):
//! an ESTABLISHED in-order pure ACK of new data or in-order data segment
//! in the steady state is handled there; everything else runs the full
//! RFC 9293 §3.10.7.4 sequence below. `fast.rs` lists exactly when
//! prediction is off. [`Config::fast_path`] switches it off for
//! differential tests; [`TcpCounters::fast_path`] counts hits.
//!
//! **Owns:** one TCB and everything RFC 9293 says happens to it.
//! **May not touch:** clocks, randomness, sockets or buffers of the NIC:
//! time, ISNs and bytes come in as arguments.

use std::net::SocketAddrV4;

use super::buffer::{Intervals, Ring, MAX_INTERVALS};
use super::cc::{Cc, CcAlgo, CongestionControl};
use super::rtt::RttEstimator;
use super::sack::{NextSeg, Scoreboard, DUP_THRESH};
use super::timewait::{TimeWaitEntry, TwKey, TwTimestamps};
use crate::wire::tcp::{SackBlocks, SeqNumber, TcpFlags, TcpRepr, Timestamps};

// Header prediction; a child module so that it reads the TCB's fields.
#[path = "fast.rs"]
mod fast;
// The transmit fast path (bursts of full segments), likewise.
#[path = "burst.rs"]
mod burst;
pub use burst::Burst;

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
/// RFC 7323 §5.5: TS.Recent is invalid after 24 days of idleness.
const PAWS_IDLE: u64 = 24 * 24 * 3600 * SEC;
/// RFC 9293 §3.7.1: the default send MSS when the peer sent none.
pub const DEFAULT_MSS: u16 = 536;
/// Bytes the timestamps option takes in every segment (10 + 2 padding).
const TS_OVERHEAD: u32 = 12;
/// The smallest path MTU an ICMP "fragmentation needed" can set
/// ([`Connection::path_mtu_reduced`]; Linux's `net.ipv4.route.min_pmtu`).
pub const MIN_PMTU: u16 = 552;

/// Per-connection configuration. All times are nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// MSS we advertise (and the largest segment we send).
    pub mss: u16,
    /// Send buffer capacity in bytes.
    pub send_buf: usize,
    /// Receive buffer capacity in bytes.
    pub recv_buf: usize,
    /// Offer window scaling (RFC 7323 §2).
    pub window_scale: bool,
    /// Offer timestamps (RFC 7323 §3).
    pub timestamps: bool,
    /// Offer SACK (RFC 2018).
    pub sack: bool,
    /// Disable Nagle (RFC 9293 §3.7.4).
    pub nodelay: bool,
    /// Initial RTO (RFC 6298 §2.1: 1 s).
    pub rto_initial: u64,
    /// Lower RTO bound (RFC 6298 says 1 s; 200 ms as in Linux).
    pub rto_min: u64,
    /// Upper RTO bound (RFC 6298 §2.5: at least 60 s).
    pub rto_max: u64,
    /// Retransmissions of one segment before giving up with `TimedOut`.
    pub max_retries: u32,
    /// SYN / SYN-ACK retransmissions before giving up.
    pub syn_retries: u32,
    /// TIME-WAIT duration, 2·MSL (RFC 9293 §3.3.2).
    pub time_wait: u64,
    /// Delayed-ACK bound (RFC 9293 §3.8.6.3: < 0.5 s; RFC 5681 §4.2).
    pub ack_delay: u64,
    /// Challenge ACKs per second (RFC 5961 §7).
    pub challenge_ack_limit: u32,
    /// Offset added to the millisecond timestamp clock (RFC 7323 §5.4).
    pub ts_offset: u32,
    /// Keep-alive (RFC 9293 §3.8.4, RFC 1122 §4.2.3.6): idle time before
    /// the first probe; `None` disables keep-alives (the default).
    pub keepalive: Option<u64>,
    /// Time between unanswered keep-alive probes.
    pub keepalive_interval: u64,
    /// Unanswered keep-alive probes before giving up with `TimedOut`.
    pub keepalive_probes: u32,
    /// How long an orphan ([`Connection::orphan`]) waits in FIN-WAIT-2
    /// for the peer's FIN before it is dropped silently (Linux's
    /// `tcp_fin_timeout`, 60 s): a peer that acknowledges our FIN and never
    /// sends its own would otherwise hold the connection forever.
    pub fin_timeout: u64,
    /// Congestion controller of connections made with
    /// [`Connection::connect`] / [`Connection::accept_syn`] (and so by the
    /// listener). Default CUBIC, as Linux; see [`CcAlgo`] for why.
    pub cc: CcAlgo,
    /// Header prediction (see `fast.rs`); off only to compare against the
    /// slow path, which gives identical results.
    pub fast_path: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mss: 1460,
            send_buf: 64 * 1024,
            recv_buf: 64 * 1024,
            window_scale: true,
            timestamps: true,
            sack: true,
            nodelay: false,
            rto_initial: SEC,
            rto_min: 200 * MS,
            rto_max: 60 * SEC,
            max_retries: 12,
            syn_retries: 6,
            time_wait: 60 * SEC,
            ack_delay: 40 * MS,
            challenge_ack_limit: 10,
            ts_offset: 0,
            keepalive: None,
            keepalive_interval: 75 * SEC,
            keepalive_probes: 9,
            fin_timeout: 60 * SEC,
            cc: CcAlgo::Cubic,
            fast_path: true,
        }
    }
}

/// RFC 9293 §3.3.2 connection states (LISTEN belongs to the listener).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No connection.
    Closed,
    /// SYN sent, waiting for SYN-ACK.
    SynSent,
    /// SYN received and SYN-ACK sent, waiting for its ACK.
    SynReceived,
    /// Data flows both ways.
    Established,
    /// We sent FIN; the peer has not acked it.
    FinWait1,
    /// Our FIN is acked; waiting for the peer's.
    FinWait2,
    /// The peer sent FIN; we may still send.
    CloseWait,
    /// Both sent FIN, ours not yet acked.
    Closing,
    /// We sent FIN after the peer's; waiting for its ACK.
    LastAck,
    /// Waiting 2·MSL before the 4-tuple may be reused.
    TimeWait,
}

/// Why a connection ended abnormally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnError {
    /// RST in answer to our SYN ("connection refused").
    Refused,
    /// RST in a synchronized state ("connection reset").
    Reset,
    /// Too many retransmissions without progress.
    TimedOut,
    /// The 4-tuple is another socket's: the NI (a daemon) refused to
    /// deliver its segments ([`Connection::fail`]).
    AddrInUse,
}

impl ConnError {
    /// A static description.
    pub const fn as_str(self) -> &'static str {
        match self {
            ConnError::Refused => "connection refused",
            ConnError::Reset => "connection reset",
            ConnError::TimedOut => "connection timed out",
            ConnError::AddrInUse => "address in use",
        }
    }
}

/// Why [`Connection::handle_segment`] discarded (all or part of) a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum TcpDrop {
    /// `payload.len() != repr.payload_len`.
    BadLength = 0,
    /// Ports do not match this connection.
    WrongPorts,
    /// The connection is CLOSED.
    Closed,
    /// SYN-SENT: ACK outside (ISS, SND.NXT] (RST sent unless RST).
    SynSentBadAck,
    /// SYN-SENT: RST without an acceptable ACK.
    SynSentRstNoAck,
    /// SYN-SENT: neither SYN nor RST.
    SynSentNoSyn,
    /// RFC 7323 §5.3 R1: PAWS rejected an old timestamp (ACK sent).
    Paws,
    /// RFC 9293 §3.10.7.4 first check: not acceptable (ACK sent unless RST).
    NotAcceptable,
    /// RFC 5961 §3.2: RST in window but not exact (challenge ACK).
    RstChallenged,
    /// RFC 5961 §4.2: SYN in a synchronized state (challenge ACK).
    SynChallenged,
    /// No ACK bit.
    NoAck,
    /// SYN-RECEIVED: ACK not acceptable (RST sent).
    SynRcvdBadAck,
    /// RFC 5961 §5.2: ACK outside [SND.UNA - MAX.SND.WND, SND.NXT].
    AckUnacceptable,
}

impl TcpDrop {
    /// Number of reasons.
    pub const COUNT: usize = 13;
    /// A static description.
    pub const fn as_str(self) -> &'static str {
        match self {
            TcpDrop::BadLength => "payload length mismatch",
            TcpDrop::WrongPorts => "wrong ports",
            TcpDrop::Closed => "connection closed",
            TcpDrop::SynSentBadAck => "SYN-SENT: unacceptable ACK",
            TcpDrop::SynSentRstNoAck => "SYN-SENT: RST without ACK",
            TcpDrop::SynSentNoSyn => "SYN-SENT: no SYN",
            TcpDrop::Paws => "PAWS: old timestamp",
            TcpDrop::NotAcceptable => "sequence not acceptable",
            TcpDrop::RstChallenged => "RST not exact: challenge ACK",
            TcpDrop::SynChallenged => "SYN in synchronized state: challenge ACK",
            TcpDrop::NoAck => "no ACK bit",
            TcpDrop::SynRcvdBadAck => "SYN-RECEIVED: unacceptable ACK",
            TcpDrop::AckUnacceptable => "ACK outside acceptable range",
        }
    }
}

/// Counters of one connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpCounters {
    /// Drops by [`TcpDrop`] reason (index = `reason as usize`).
    pub drops: [u64; TcpDrop::COUNT],
    /// Segments handed to `handle_segment`.
    pub segs_in: u64,
    /// Segments returned by `poll_transmit`.
    pub segs_out: u64,
    /// Segments that resent already-sent sequence space.
    pub retransmits: u64,
    /// Fast retransmits (3 duplicate ACKs).
    pub fast_retransmits: u64,
    /// RTO expirations.
    pub rto_expired: u64,
    /// Challenge ACKs sent (RFC 5961).
    pub challenge_acks: u64,
    /// Challenge ACKs suppressed by the rate limit.
    pub challenge_suppressed: u64,
    /// Out-of-order data dropped because the interval set was full.
    pub ooo_dropped: u64,
    /// Zero-window probes sent.
    pub window_probes: u64,
    /// Keep-alive probes sent.
    pub keepalives: u64,
    /// Received SACK blocks ignored as invalid (empty, at or below
    /// SND.UNA, or above SND.MAX).
    pub sack_ignored: u64,
    /// SACKed ranges forgotten because the scoreboard was full.
    pub sack_overflow: u64,
    /// Segments resent by SACK-based recovery (RFC 6675 NextSeg rules 1,
    /// 3 and 4), not counting the fast retransmit that starts it.
    pub sack_retransmits: u64,
    /// Path MTU reductions taken from ICMP "fragmentation needed"
    /// ([`Connection::path_mtu_reduced`]).
    pub pmtu_reduced: u64,
    /// ICMP "fragmentation needed" ignored: quoting no sequence number in
    /// flight (RFC 5927 §4.1), or no smaller than the path already is.
    pub pmtu_ignored: u64,
    /// Restarts after idle (RFC 5681 §4.1, [`super::cc::idle_restart`]).
    pub idle_restarts: u64,
    /// Segments handled by header prediction (counted in `segs_in` too).
    pub fast_path: u64,
    /// Segments sent by the transmit fast path (bursts, `burst.rs`).
    pub fast_tx: u64,
    /// Segments whose text went straight to a reader's buffer
    /// ([`Connection::direct_commit`]; counted in `fast_path` too).
    pub direct: u64,
    /// An orphan dropped after [`Config::fin_timeout`] in FIN-WAIT-2.
    pub fin_timeouts: u64,
    /// An orphan reset because new text arrived that nobody will read
    /// (RFC 1122 §4.2.2.13).
    pub data_after_close: u64,
}

impl TcpCounters {
    /// Drops counted for `r`.
    pub fn drop_count(&self, r: TcpDrop) -> u64 {
        self.drops[r as usize]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timer {
    Idle,
    Retransmit(u64),
    Persist(u64),
}

/// One TCP connection. Generic over its [`CongestionControl`]; the
/// default, [`Cc`], is chosen at run time from [`Config::cc`].
#[derive(Debug, Clone)]
pub struct Connection<C: CongestionControl = Cc> {
    cfg: Config,
    state: State,
    local: SocketAddrV4,
    remote: SocketAddrV4,
    error: Option<ConnError>,

    // Send sequence space (RFC 9293 §3.3.1). SND.MAX is the highest
    // sequence number sent; SND.NXT is rewound to SND.UNA on RTO.
    iss: SeqNumber,
    snd_una: SeqNumber,
    snd_nxt: SeqNumber,
    snd_max: SeqNumber,
    snd_wnd: u32,
    max_snd_wnd: u32,
    snd_wl1: SeqNumber,
    snd_wl2: SeqNumber,
    snd_wscale: u8,
    eff_mss: u32,
    syn_acked: bool,
    fin_queued: bool,
    /// Opened with `connect` (SYN-RECEIVED reached by simultaneous open).
    active_open: bool,
    /// The SYN was retransmitted (RFC 6298 §5.7).
    syn_rexmit: bool,
    /// Our FIN was acknowledged.
    fin_was_acked: bool,
    tx: Ring,

    // Receive sequence space.
    irs: SeqNumber,
    rcv_nxt: SeqNumber,
    /// Right edge of the window last advertised.
    rcv_adv: SeqNumber,
    rcv_wscale: u8,
    /// The scale we offer in our SYN.
    our_wscale: u8,
    fin_rcvd: bool,
    rx: Ring,
    ooo: Intervals,
    /// Largest segment received so far (Linux's rcv_mss) for delayed ACKs.
    rcv_mss: u32,
    unacked_bytes: u32,

    // Options.
    ts_enabled: bool,
    ts_recent: u32,
    ts_recent_at: u64,
    /// No timestamp RTT samples for ACKs up to here (set by an RTO).
    ts_stale_until: Option<SeqNumber>,
    last_ack_sent: SeqNumber,
    sack_ok: bool,
    /// Both sides offered window scaling.
    ws_ok: bool,

    // Timers and retransmission.
    rtx: Timer,
    rtt: RttEstimator,
    backoff: u32,
    retries: u32,
    rtt_timing: Option<(SeqNumber, u64)>,
    ack_deadline: Option<u64>,
    ack_now: bool,
    tw_deadline: Option<u64>,
    /// Last time an acceptable segment arrived (keep-alive idle clock).
    last_rx: u64,
    /// When everything sent was last acknowledged (restart after idle).
    drained_at: u64,
    ka_deadline: Option<u64>,
    ka_sent: u32,
    ka_now: bool,
    probe_now: bool,
    rexmit_one: bool,

    // Loss recovery (RFC 5681 §3.2, RFC 6582; with SACK, RFC 6675:
    // `recover` is RecoveryPoint and the scoreboard holds the rest).
    dupacks: u32,
    in_recovery: bool,
    recover: SeqNumber,
    sb: Scoreboard,
    cc: C,

    challenge_start: u64,
    challenge_count: u32,
    rst_out: Option<TcpRepr>,
    /// The application is gone ([`Connection::orphan`]): nobody reads.
    orphaned: bool,
    counters: TcpCounters,
}

/// The reply to a segment for which no connection exists (RFC 9293
/// §3.10.7.1, CLOSED): nothing to a RST; `<SEQ=SEG.ACK><CTL=RST>` to an
/// ACK; otherwise `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`. Ports are
/// swapped; rate limiting is the caller's.
#[cfg_attr(lazynet_outline, cold, inline(never))]
pub fn reset_for(seg: &TcpRepr) -> Option<TcpRepr> {
    let f = seg.flags;
    if f.contains(TcpFlags::RST) {
        return None;
    }
    let base = TcpRepr {
        src_port: seg.dst_port,
        dst_port: seg.src_port,
        ..TcpRepr::EMPTY
    };
    Some(if f.contains(TcpFlags::ACK) {
        TcpRepr {
            seq: seg.ack,
            flags: TcpFlags::RST,
            ..base
        }
    } else {
        let len = seg.payload_len as u32
            + u32::from(f.contains(TcpFlags::SYN))
            + u32::from(f.contains(TcpFlags::FIN));
        TcpRepr {
            seq: SeqNumber(0),
            ack: seg.seq + len,
            flags: TcpFlags::RST | TcpFlags::ACK,
            ..base
        }
    })
}

/// What `emit_data` sends next: where, how much, and why.
#[derive(Clone, Copy)]
struct Pick {
    seq: SeqNumber,
    len: usize,
    fin: bool,
    /// Below SND.MAX: a retransmission.
    is_rexmit: bool,
    /// A zero-window probe (RFC 9293 §3.8.6.1).
    probe: bool,
    /// NextSeg's choice in SACK recovery.
    sack_next: NextSeg,
    /// Chosen in SACK loss recovery (RFC 6675).
    sack_recovery: bool,
}

impl Pick {
    /// Nothing to send (a pure ACK may still go) at `seq`.
    fn nothing(seq: SeqNumber) -> Self {
        Pick {
            seq,
            len: 0,
            fin: false,
            is_rexmit: false,
            probe: false,
            sack_next: NextSeg::Nothing,
            sack_recovery: false,
        }
    }

    /// A retransmission of `len` bytes (and the FIN if `fin`) at `seq`.
    fn resend(
        seq: SeqNumber,
        len: usize,
        fin: bool,
        sack_next: NextSeg,
        sack_recovery: bool,
    ) -> Self {
        Pick {
            seq,
            len,
            fin,
            is_rexmit: len > 0 || fin,
            probe: false,
            sack_next,
            sack_recovery,
        }
    }
}

fn wscale_for(buf: usize) -> u8 {
    let mut s = 0u8;
    while s < 14 && (buf >> s) > 65535 {
        s += 1;
    }
    s
}

fn seq_le(a: SeqNumber, b: SeqNumber) -> bool {
    a.diff(b) <= 0
}
fn seq_lt(a: SeqNumber, b: SeqNumber) -> bool {
    a.diff(b) < 0
}

impl Connection<Cc> {
    /// Active open (RFC 9293 §3.10.1): state SYN-SENT; the SYN goes out on
    /// the next `poll_transmit`. The congestion controller is `cfg.cc`.
    pub fn connect(
        cfg: Config,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        iss: SeqNumber,
        now: u64,
    ) -> Self {
        Self::connect_with(cfg, local, remote, iss, now, Cc::new(cfg.cc))
    }

    /// Passive open from a received SYN (RFC 9293 §3.10.7.2, LISTEN state):
    /// state SYN-RECEIVED; the SYN-ACK goes out on the next `poll_transmit`.
    /// Returns `None` if `syn` is not a plain SYN (SYN set; ACK, RST, FIN
    /// clear) or has the wrong ports.
    pub fn accept_syn(
        cfg: Config,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        syn: &TcpRepr,
        iss: SeqNumber,
        now: u64,
    ) -> Option<Self> {
        Self::accept_syn_with(cfg, local, remote, syn, iss, now, Cc::new(cfg.cc))
    }
}

impl<C: CongestionControl> Connection<C> {
    fn new(
        cfg: Config,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        iss: SeqNumber,
        state: State,
        cc: C,
    ) -> Self {
        let mut cfg = cfg;
        cfg.mss = cfg.mss.max(64);
        cfg.send_buf = cfg.send_buf.clamp(1, 1 << 30);
        cfg.recv_buf = cfg.recv_buf.clamp(1, 1 << 30);
        cfg.max_retries = cfg.max_retries.max(1);
        let our_wscale = if cfg.window_scale {
            wscale_for(cfg.recv_buf)
        } else {
            0
        };
        Connection {
            state,
            local,
            remote,
            error: None,
            iss,
            snd_una: iss,
            snd_nxt: iss,
            snd_max: iss,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: SeqNumber(0),
            snd_wl2: iss,
            snd_wscale: 0,
            eff_mss: u32::from(DEFAULT_MSS),
            syn_acked: false,
            fin_queued: false,
            active_open: false,
            syn_rexmit: false,
            fin_was_acked: false,
            tx: Ring::new(cfg.send_buf),
            irs: SeqNumber(0),
            rcv_nxt: SeqNumber(0),
            rcv_adv: SeqNumber(0),
            rcv_wscale: 0,
            our_wscale,
            fin_rcvd: false,
            rx: Ring::new(cfg.recv_buf),
            ooo: Intervals::default(),
            rcv_mss: u32::from(DEFAULT_MSS),
            unacked_bytes: 0,
            ts_enabled: false,
            ts_recent: 0,
            ts_recent_at: 0,
            ts_stale_until: None,
            last_ack_sent: SeqNumber(0),
            sack_ok: false,
            ws_ok: false,
            rtx: Timer::Idle,
            rtt: RttEstimator::new(cfg.rto_initial, cfg.rto_min, cfg.rto_max),
            backoff: 0,
            retries: 0,
            rtt_timing: None,
            ack_deadline: None,
            ack_now: false,
            tw_deadline: None,
            last_rx: 0,
            drained_at: 0,
            ka_deadline: None,
            ka_sent: 0,
            ka_now: false,
            probe_now: false,
            rexmit_one: false,
            dupacks: 0,
            in_recovery: false,
            recover: iss,
            sb: Scoreboard::default(),
            cc,
            challenge_start: 0,
            challenge_count: 0,
            rst_out: None,
            orphaned: false,
            counters: TcpCounters::default(),
            cfg,
        }
    }

    /// [`Connection::connect`] with a chosen congestion controller
    /// (`cfg.cc` is then ignored).
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub fn connect_with(
        cfg: Config,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        iss: SeqNumber,
        now: u64,
        cc: C,
    ) -> Self {
        let mut c = Self::new(cfg, local, remote, iss, State::SynSent, cc);
        c.active_open = true;
        c.challenge_start = now;
        c.last_rx = now;
        c
    }

    /// [`Connection::accept_syn`] with a chosen congestion controller
    /// (`cfg.cc` is then ignored).
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub fn accept_syn_with(
        cfg: Config,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        syn: &TcpRepr,
        iss: SeqNumber,
        now: u64,
        cc: C,
    ) -> Option<Self> {
        let f = syn.flags;
        if !f.contains(TcpFlags::SYN)
            || f.intersects(TcpFlags::ACK | TcpFlags::RST | TcpFlags::FIN)
            || syn.src_port != remote.port()
            || syn.dst_port != local.port()
        {
            return None;
        }
        let mut c = Self::new(cfg, local, remote, iss, State::SynReceived, cc);
        c.challenge_start = now;
        c.last_rx = now;
        c.irs = syn.seq;
        c.rcv_nxt = syn.seq + 1;
        c.rcv_adv = c.rcv_nxt;
        c.negotiate(syn, now);
        // RFC 7323 §2.2: the window field of a SYN is never scaled.
        c.snd_wnd = u32::from(syn.window);
        c.max_snd_wnd = c.snd_wnd;
        c.snd_wl1 = syn.seq;
        c.snd_wl2 = iss;
        Some(c)
    }

    // ---------------------------------------------------------------
    // Queries.

    /// Current state.
    pub fn state(&self) -> State {
        self.state
    }
    /// Why the connection ended abnormally, if it did.
    pub fn error(&self) -> Option<ConnError> {
        self.error
    }
    /// Local endpoint.
    pub fn local(&self) -> SocketAddrV4 {
        self.local
    }
    /// Remote endpoint.
    pub fn remote(&self) -> SocketAddrV4 {
        self.remote
    }
    /// Counters.
    pub fn counters(&self) -> &TcpCounters {
        &self.counters
    }
    /// Effective send MSS (RFC 9293 §3.7.1, minus the timestamps option).
    pub fn eff_mss(&self) -> u32 {
        self.eff_mss
    }
    /// Send window in bytes (scaled).
    pub fn send_window(&self) -> u32 {
        self.snd_wnd
    }
    /// Shift applied to the peer's window field.
    pub fn send_wscale(&self) -> u8 {
        self.snd_wscale
    }
    /// Shift applied to our window field.
    pub fn recv_wscale(&self) -> u8 {
        self.rcv_wscale
    }
    /// Timestamps negotiated.
    pub fn timestamps_enabled(&self) -> bool {
        self.ts_enabled
    }
    /// SACK negotiated.
    pub fn sack_enabled(&self) -> bool {
        self.sack_ok
    }
    /// Congestion controller.
    pub fn congestion(&self) -> &C {
        &self.cc
    }
    /// Current RTO including backoff.
    pub fn rto(&self) -> u64 {
        self.rtt.backed_off(self.backoff)
    }
    /// Smoothed RTT, once sampled.
    pub fn srtt(&self) -> Option<u64> {
        self.rtt.srtt()
    }
    /// SND.UNA.
    pub fn snd_una(&self) -> SeqNumber {
        self.snd_una
    }
    /// SND.NXT.
    pub fn snd_nxt(&self) -> SeqNumber {
        self.snd_nxt
    }
    /// RCV.NXT.
    pub fn rcv_nxt(&self) -> SeqNumber {
        self.rcv_nxt
    }
    /// Bytes in the send buffer (unacked + unsent).
    pub fn send_queue(&self) -> usize {
        self.tx.len()
    }
    /// Bytes readable with `recv`.
    pub fn recv_queue(&self) -> usize {
        self.rx.len()
    }
    /// Capacity of the send buffer.
    pub fn send_capacity(&self) -> usize {
        self.tx.capacity()
    }
    /// Bytes `send` would accept now.
    pub fn send_space(&self) -> usize {
        self.tx.free()
    }
    /// Switches Nagle's algorithm off (`true`) or on (RFC 9293 §3.7.4).
    pub fn set_nodelay(&mut self, on: bool) {
        self.cfg.nodelay = on;
    }
    /// Out-of-order intervals held.
    pub fn ooo_intervals(&self) -> &[(SeqNumber, SeqNumber)] {
        self.ooo.as_slice()
    }
    /// The peer's FIN arrived (in order): no more text will come.
    pub fn fin_received(&self) -> bool {
        self.fin_rcvd
    }

    /// The peer sent FIN and everything before it was read: end of stream.
    pub fn recv_finished(&self) -> bool {
        self.fin_rcvd && self.rx.is_empty()
    }
    /// `send` may accept bytes.
    pub fn may_send(&self) -> bool {
        matches!(
            self.state,
            State::SynSent | State::SynReceived | State::Established | State::CloseWait
        ) && !self.fin_queued
    }
    /// In fast recovery (NewReno) or loss recovery (RFC 6675).
    pub fn in_recovery(&self) -> bool {
        self.in_recovery
    }
    /// The SACK scoreboard (empty unless SACK was negotiated).
    pub fn scoreboard(&self) -> &Scoreboard {
        &self.sb
    }
    /// RFC 6675 `SetPipe()`: the sender's estimate of bytes in flight,
    /// from the scoreboard (meaningful with SACK; without it, FlightSize).
    pub fn pipe(&self) -> u32 {
        if self.sack_ok && self.syn_acked {
            self.sb.pipe(self.snd_una, self.snd_max, self.eff_mss)
        } else {
            self.flight()
        }
    }

    // ---------------------------------------------------------------
    // User calls.

    /// Queues bytes for sending (RFC 9293 §3.10.2); returns how many fit.
    /// 0 once `close` was called or in a state that cannot send.
    pub fn send(&mut self, data: &[u8]) -> usize {
        if !self.may_send() {
            return 0;
        }
        self.tx.push(data)
    }

    /// [`Connection::send`] of `n` bytes that `fill(at, dst)` writes into
    /// the send buffer (see [`Ring::push_with`]): for bytes the caller may
    /// not hold as a slice (another process's memory). Returns how many
    /// fit.
    pub fn send_with(&mut self, n: usize, fill: impl FnMut(usize, &mut [u8])) -> usize {
        if !self.may_send() {
            return 0;
        }
        self.tx.push_with(n, fill)
    }

    /// Reads received in-order bytes (RFC 9293 §3.10.3). May schedule a
    /// window update (RFC 9293 §3.8.6.2.2).
    pub fn recv(&mut self, out: &mut [u8]) -> usize {
        let before = self.rcv_adv.diff(self.rcv_nxt).max(0) as u32;
        let n = self.rx.read(out);
        if n > 0 && self.synchronized() && !self.fin_rcvd {
            let possible = self.window_possible();
            let step = self.sws_step();
            if possible >= before.saturating_mul(2) && possible - before >= step {
                self.ack_now = true;
            }
        }
        n
    }

    /// Closes our direction after the queued data (RFC 9293 §3.10.4).
    pub fn close(&mut self) {
        match self.state {
            State::SynSent => self.enter_closed(),
            State::SynReceived | State::Established => {
                self.fin_queued = true;
                self.state = State::FinWait1;
            }
            State::CloseWait => {
                self.fin_queued = true;
                self.state = State::LastAck;
            }
            _ => {}
        }
    }

    /// Aborts (RFC 9293 §3.10.5): a RST goes out on the next
    /// `poll_transmit` if the peer knows of us; state CLOSED.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub fn abort(&mut self) {
        if matches!(
            self.state,
            State::SynReceived
                | State::Established
                | State::FinWait1
                | State::FinWait2
                | State::CloseWait
                | State::Closing
                | State::LastAck
        ) {
            self.rst_out = Some(TcpRepr {
                flags: TcpFlags::RST | TcpFlags::ACK,
                seq: self.acceptable_seq(),
                ack: self.rcv_nxt,
                ..self.repr_base()
            });
        }
        self.enter_closed();
    }

    /// The application released its handle after [`Connection::close`]
    /// (or [`Connection::abort`]): nobody will read or write again. The
    /// receive buffer goes at once (the advertised window is kept, so the
    /// peer sees no shrinking), the send buffer shrinks to the bytes still
    /// unacknowledged and goes when they are; new text from the peer
    /// resets the connection (RFC 1122 §4.2.2.13: data that nobody will
    /// read is lost, and the peer must learn it); and FIN-WAIT-2 lasts at
    /// most [`Config::fin_timeout`] (RFC 9293 leaves FIN-WAIT-2 unbounded;
    /// an orphan has nobody to wait for, so this bound is Linux's).
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub fn orphan(&mut self, now: u64) {
        if self.orphaned {
            return;
        }
        self.orphaned = true;
        self.rx = Ring::new(0);
        self.ooo = Intervals::default();
        self.tx.shrink_to_len();
        if self.state == State::FinWait2 {
            self.arm_fin_timeout(now);
        }
    }

    /// Ends the connection with `e` and sends nothing: for a connection
    /// that is not ours to speak for (its 4-tuple belongs to another
    /// socket, so a RST would answer for that one).
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub fn fail(&mut self, e: ConnError) {
        self.error = Some(e);
        self.rst_out = None;
        self.enter_closed();
    }

    /// Whether [`Connection::orphan`] was called.
    pub fn is_orphan(&self) -> bool {
        self.orphaned
    }

    /// Storage held by the send and receive buffers, bytes.
    pub fn buffer_bytes(&self) -> usize {
        self.tx.capacity() + self.rx.capacity()
    }

    /// An orphan entering (or found in) FIN-WAIT-2: drop it silently after
    /// the FIN timeout. The TIME-WAIT deadline field serves, since the two
    /// states exclude each other; its expiry closes without a segment.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn arm_fin_timeout(&mut self, now: u64) {
        self.tw_deadline = Some(now.saturating_add(self.cfg.fin_timeout));
    }

    // ---------------------------------------------------------------
    // Timers.

    /// The earliest time at which `handle_timeout` must be called.
    pub fn poll_timeout(&self) -> Option<u64> {
        // Straight-line min (no iterator): called after every stack event.
        #[inline(always)]
        fn min(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            match (a, b) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, None) => x,
                (None, y) => y,
            }
        }
        let rtx = match self.rtx {
            Timer::Idle => None,
            Timer::Retransmit(t) | Timer::Persist(t) => Some(t),
        };
        min(
            min(rtx, self.ack_deadline),
            min(self.tw_deadline, self.ka_deadline),
        )
    }

    /// Runs the timers that expired at `now`.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub fn handle_timeout(&mut self, now: u64) {
        if let Some(t) = self.tw_deadline {
            if now >= t {
                // TIME-WAIT's 2·MSL, or an orphan's FIN timeout.
                if self.state == State::FinWait2 {
                    self.counters.fin_timeouts += 1;
                }
                self.enter_closed();
                return;
            }
        }
        if let Some(t) = self.ack_deadline {
            if now >= t {
                self.ack_deadline = None;
                self.ack_now = true;
            }
        }
        if let Some(t) = self.ka_deadline {
            if now >= t {
                if self.ka_sent >= self.cfg.keepalive_probes {
                    self.error = Some(ConnError::TimedOut);
                    self.enter_closed();
                    return;
                }
                self.ka_sent += 1;
                self.ka_now = true;
                self.ka_deadline = None;
            }
        }
        match self.rtx {
            Timer::Retransmit(t) if now >= t => self.on_rto(now),
            Timer::Persist(t) if now >= t => {
                // RFC 9293 §3.8.6.1: probe the zero window; back off.
                self.retries += 1;
                if self.retries > self.cfg.max_retries {
                    self.error = Some(ConnError::TimedOut);
                    self.enter_closed();
                    return;
                }
                self.backoff = (self.backoff + 1).min(16);
                self.probe_now = true;
                // The probe repeats the first unacknowledged byte.
                self.snd_nxt = self.snd_una;
                self.rtx = Timer::Idle;
            }
            _ => {}
        }
        self.update_timers(now);
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn on_rto(&mut self, now: u64) {
        self.counters.rto_expired += 1;
        self.retries += 1;
        let limit = if self.synchronized() && self.syn_acked {
            self.cfg.max_retries
        } else {
            self.cfg.syn_retries
        };
        if self.retries > limit {
            self.error = Some(ConnError::TimedOut);
            self.enter_closed();
            return;
        }
        // RFC 6298 §5.5: back off; §5.4: retransmit the earliest segment.
        self.backoff = (self.backoff + 1).min(16);
        if !self.syn_acked {
            self.syn_rexmit = true;
        }
        if self.syn_acked {
            let flight = self.flight();
            self.cc.on_rto(flight, self.eff_mss);
            // RFC 6582 §3.2 step 4 note: after RTO, recover = highest sent.
            self.recover = self.snd_max;
        }
        self.in_recovery = false;
        self.dupacks = 0;
        self.rexmit_one = false;
        // RFC 6675 §5.1 (RFC 2018 §8): the receiver may have reneged;
        // forget what was SACKed and retransmit from SND.UNA.
        self.sb.clear();
        if self.ts_enabled && self.syn_acked {
            self.ts_stale_until = Some(self.snd_max);
        }
        // Karn: no RTT sample from retransmitted data.
        self.rtt_timing = None;
        self.snd_nxt = self.snd_una;
        self.rtx = Timer::Idle;
        let _ = now;
    }

    /// An ICMP "fragmentation needed and DF set" (RFC 1191) quoting one of
    /// our segments: `mtu` is the next hop's MTU and `seq` the quoted
    /// sequence number. Taken only if `seq` is in flight, `[SND.UNA,
    /// SND.MAX)` (RFC 5927 §4.1: a blind attacker must guess it), and only
    /// to shrink: the MTU is taken at [`MIN_PMTU`] or more (Linux's
    /// `min_pmtu`, so a forged message cannot make segments tiny), the
    /// MSS becomes what it leaves after the IPv4 and TCP headers (and our
    /// timestamps), and everything unacknowledged is sent again from
    /// SND.UNA in the new size at once, without a congestion response
    /// (the loss was the path's size, not congestion: RFC 1191 §6.5,
    /// Linux `tcp_simple_retransmit`). Returns whether it was taken.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    pub fn path_mtu_reduced(&mut self, mtu: u16, seq: SeqNumber, now: u64) -> bool {
        let in_flight = self.syn_acked
            && self.synchronized()
            && seq.diff(self.snd_una) >= 0
            && seq.diff(self.snd_max) < 0;
        let overhead = if self.ts_enabled { TS_OVERHEAD } else { 0 };
        let mss = (u32::from(mtu.max(MIN_PMTU)) - 40).saturating_sub(overhead);
        if !in_flight || mss >= self.eff_mss {
            self.counters.pmtu_ignored += 1;
            return false;
        }
        self.counters.pmtu_reduced += 1;
        self.eff_mss = mss;
        // Go back to SND.UNA as after an RTO, but keep the window and the
        // timer's backoff: nothing was congested.
        self.in_recovery = false;
        self.dupacks = 0;
        self.rexmit_one = false;
        self.recover = self.snd_max;
        self.sb.clear();
        if self.ts_enabled {
            self.ts_stale_until = Some(self.snd_max);
        }
        self.rtt_timing = None;
        self.snd_nxt = self.snd_una;
        self.update_timers(now);
        true
    }

    #[cfg_attr(lazynet_pin, inline(always))]
    fn update_timers(&mut self, now: u64) {
        match self.state {
            State::Closed => {
                self.rtx = Timer::Idle;
                self.ack_deadline = None;
                return;
            }
            State::TimeWait => {
                self.rtx = Timer::Idle;
                return;
            }
            _ => {}
        }
        let outstanding = self.snd_max != self.snd_una;
        let persist = self.syn_acked
            && self.snd_wnd == 0
            && self.has_unsent()
            && self.snd_max.diff(self.snd_una) <= 1;
        if persist {
            if !matches!(self.rtx, Timer::Persist(_)) {
                self.rtx = Timer::Persist(now.saturating_add(self.rtt.backed_off(self.backoff)));
            }
        } else if outstanding {
            if !matches!(self.rtx, Timer::Retransmit(_)) {
                self.rtx = Timer::Retransmit(now.saturating_add(self.rtt.backed_off(self.backoff)));
            }
        } else {
            self.rtx = Timer::Idle;
        }
        // Keep-alive only while idle: nothing outstanding, no other timer.
        self.ka_deadline = match self.cfg.keepalive {
            Some(idle)
                if self.rtx == Timer::Idle
                    && matches!(self.state, State::Established | State::CloseWait) =>
            {
                let wait = if self.ka_sent == 0 {
                    idle
                } else {
                    idle.saturating_add(
                        u64::from(self.ka_sent).saturating_mul(self.cfg.keepalive_interval),
                    )
                };
                Some(self.last_rx.saturating_add(wait))
            }
            _ => None,
        };
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn enter_closed(&mut self) {
        self.state = State::Closed;
        self.rtx = Timer::Idle;
        self.ack_deadline = None;
        self.tw_deadline = None;
        self.ka_deadline = None;
        self.ka_now = false;
        self.ack_now = false;
        self.probe_now = false;
        self.rexmit_one = false;
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn enter_time_wait(&mut self, now: u64) {
        self.state = State::TimeWait;
        self.rtx = Timer::Idle;
        self.tw_deadline = Some(now.saturating_add(self.cfg.time_wait));
    }

    // ---------------------------------------------------------------
    // Helpers.

    fn synchronized(&self) -> bool {
        !matches!(
            self.state,
            State::Closed | State::SynSent | State::SynReceived
        )
    }

    fn flight(&self) -> u32 {
        self.snd_max.diff(self.snd_una).max(0) as u32
    }

    /// Sequence number of our FIN (valid once the SYN is acked).
    fn fin_seq(&self) -> SeqNumber {
        self.data_start() + self.tx.len() as u32
    }

    /// Sequence number of the first byte in the send buffer.
    fn data_start(&self) -> SeqNumber {
        if self.syn_acked {
            self.snd_una
        } else {
            self.iss + 1
        }
    }

    fn fin_acked(&self) -> bool {
        self.fin_was_acked
    }

    /// RFC 5681 §4.1: before sending after a silence longer than the RTO
    /// (nothing in flight since everything was acknowledged more than an
    /// RTO ago, and something to send now, a FIN's data included), the congestion window decays
    /// ([`super::cc::idle_restart`]: halved per RTO of silence, not below
    /// min(IW, cwnd)). `poll_transmit` does it (and `burst_plan` plans
    /// nothing while it is due). Cheap when nothing is due: two
    /// comparisons.
    #[inline]
    fn restart_if_idle(&mut self, now: u64) {
        if self.idle_restart_due(now) && self.has_unsent() {
            self.idle_restart(now);
        }
    }

    /// Nothing in flight since everything was acknowledged more than an
    /// RTO ago: sending now restarts after idle. (The transmit fast path
    /// declines then, so that `poll_transmit` restarts first.)
    #[inline]
    pub(super) fn idle_restart_due(&self, now: u64) -> bool {
        self.snd_una == self.snd_max
            && now.saturating_sub(self.drained_at) > self.rtt.rto()
            && self.syn_acked
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn idle_restart(&mut self, now: u64) {
        // Data left in a closed connection's buffer is never sent.
        if !self.may_send_data() {
            return;
        }
        let rto = self.rtt.rto().max(1);
        let halvings = ((now - self.drained_at - 1) / rto).min(32) as u32;
        self.cc.on_idle_restart(halvings, self.eff_mss);
        self.drained_at = now;
        self.counters.idle_restarts += 1;
    }

    /// In a state that sends data, its SYN acknowledged.
    fn may_send_data(&self) -> bool {
        matches!(
            self.state,
            State::Established
                | State::CloseWait
                | State::FinWait1
                | State::Closing
                | State::LastAck
        ) && self.syn_acked
    }

    fn has_unsent(&self) -> bool {
        let off = self.snd_nxt.diff(self.data_start()).max(0) as usize;
        off < self.tx.len()
            || (self.fin_queued && !self.fin_was_acked && self.snd_max.diff(self.fin_seq()) <= 0)
    }

    fn ts_now(&self, now: u64) -> u32 {
        ((now / MS) as u32).wrapping_add(self.cfg.ts_offset)
    }

    /// The timestamps option of a segment sent at `now` (RFC 7323 §3.2),
    /// if the connection uses timestamps.
    pub(super) fn timestamps(&self, now: u64) -> Option<Timestamps> {
        self.ts_enabled.then(|| Timestamps {
            tsval: self.ts_now(now),
            tsecr: self.ts_recent,
        })
    }

    /// The largest window the buffer allows (scaled units not applied).
    fn window_possible(&self) -> u32 {
        if self.orphaned {
            // No buffer behind it any more, and none needed: keep the edge
            // (new text resets the connection).
            return self.rcv_adv.diff(self.rcv_nxt).max(0) as u32;
        }
        let cap = 65535u32 << self.rcv_wscale;
        (self.rx.free().min(u32::MAX as usize) as u32).min(cap)
    }

    /// RFC 9293 §3.8.6.2.2: the right edge moves only by at least
    /// min(RCV.BUFF / 2, MSS).
    fn sws_step(&self) -> u32 {
        ((self.rx.capacity() / 2) as u32).min(u32::from(self.cfg.mss))
    }

    /// Window field for an outgoing non-SYN segment; updates RCV.ADV.
    fn advertise_window(&mut self) -> u16 {
        let (field, edge) = self.window_to_advertise();
        if let Some(edge) = edge {
            self.rcv_adv = edge;
        }
        field
    }

    /// What [`Connection::advertise_window`] returns, and the new RCV.ADV
    /// if it moves it, without changing anything.
    fn window_to_advertise(&self) -> (u16, Option<SeqNumber>) {
        let cur = self.rcv_adv.diff(self.rcv_nxt).max(0) as u32;
        let possible = self.window_possible();
        let mut wnd = possible;
        if wnd > cur && wnd - cur < self.sws_step() {
            // Receiver SWS avoidance: keep the old right edge.
            wnd = cur;
        }
        let s = self.rcv_wscale;
        let mut field = wnd >> s;
        // Never shrink the window (RFC 9293 §3.8.6.2.2) when rounding
        // would, as long as the buffer holds the rounded-up window.
        if (field << s) < cur && ((field + 1) << s) <= possible {
            field += 1;
        }
        let field = field.min(65535);
        let edge = self.rcv_nxt + (field << s);
        let moved = edge.diff(self.rcv_adv) > 0 || self.rcv_adv.diff(self.rcv_nxt) < 0;
        (field as u16, moved.then_some(edge))
    }

    /// SEG.SEQ for a segment without data or FIN (pure ACK, RST): the
    /// RFC's SND.NXT (our SND.MAX, since an RTO rewinds SND.NXT), but not
    /// beyond the right edge of the peer's window as we know it (Linux
    /// tcp_acceptable_seq()), so that the peer's acceptability test admits
    /// it and processes its ACK.
    fn acceptable_seq(&self) -> SeqNumber {
        if !self.syn_acked {
            return self.snd_max;
        }
        let edge = self.snd_una + self.snd_wnd;
        if seq_le(self.snd_max, edge) {
            self.snd_max
        } else {
            edge
        }
    }

    /// The window new data may fill outside loss recovery: the peer's
    /// window and cwnd, plus one segment for each of the first two
    /// duplicate ACKs (Limited Transmit, RFC 3042 §2: flight may reach
    /// cwnd + 2·SMSS; cwnd itself is not changed). RFC 6675 §5 wants it
    /// with SACK too; the third duplicate ACK starts recovery instead.
    #[cfg_attr(lazynet_pin, inline(always))]
    fn usable_window(&self) -> u32 {
        let mut cwnd = self.cc.window();
        if !self.in_recovery && self.dupacks > 0 && self.dupacks < DUP_THRESH {
            cwnd = cwnd.saturating_add(self.dupacks * self.eff_mss);
        }
        self.snd_wnd.min(cwnd)
    }

    /// SND.NXT and SND.MAX after a segment ending at `end` went out
    /// (`emit_data`, `burst_commit`).
    #[cfg_attr(lazynet_pin, inline(always))]
    fn sent_up_to(&mut self, end: SeqNumber) {
        if seq_lt(self.snd_nxt, end) {
            self.snd_nxt = end;
        }
        if seq_lt(self.snd_max, end) {
            self.snd_max = end;
        }
    }

    /// A segment carrying the current ACK went out: nothing is left to
    /// acknowledge (`emit_data`, `burst_commit`).
    #[cfg_attr(lazynet_pin, inline(always))]
    fn ack_sent(&mut self) {
        self.ack_now = false;
        self.ack_deadline = None;
        self.unacked_bytes = 0;
        self.last_ack_sent = self.rcv_nxt;
    }

    fn repr_base(&self) -> TcpRepr {
        TcpRepr {
            src_port: self.local.port(),
            dst_port: self.remote.port(),
            ..TcpRepr::EMPTY
        }
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn challenge_ack(&mut self, now: u64) {
        // RFC 5961 §7: a per-connection limit of challenge ACKs per second.
        if now.saturating_sub(self.challenge_start) >= SEC {
            self.challenge_start = now;
            self.challenge_count = 0;
        }
        if self.challenge_count < self.cfg.challenge_ack_limit {
            self.challenge_count += 1;
            self.counters.challenge_acks += 1;
            self.ack_now = true;
        } else {
            self.counters.challenge_suppressed += 1;
        }
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn negotiate(&mut self, syn: &TcpRepr, now: u64) {
        let peer_mss = u32::from(syn.mss.unwrap_or(DEFAULT_MSS).max(64));
        if self.cfg.window_scale {
            if let Some(s) = syn.window_scale {
                // RFC 7323 §2.3: a shift above 14 is used as 14.
                self.snd_wscale = s.min(14);
                self.rcv_wscale = self.our_wscale;
                self.ws_ok = true;
            }
        }
        if self.cfg.timestamps {
            if let Some(ts) = syn.timestamps {
                self.ts_enabled = true;
                self.ts_recent = ts.tsval;
                self.ts_recent_at = now;
            }
        }
        self.sack_ok = self.cfg.sack && syn.sack_permitted;
        let overhead = if self.ts_enabled { TS_OVERHEAD } else { 0 };
        self.eff_mss = peer_mss
            .min(u32::from(self.cfg.mss))
            .saturating_sub(overhead)
            .max(32);
        self.rcv_mss = self.eff_mss;
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn on_established(&mut self) {
        self.state = State::Established;
        // RFC 6298 §5.7: after a SYN timeout, data starts with RTO >= 3 s
        // unless an RTT sample was taken since.
        if self.syn_rexmit && self.rtt.srtt().is_none() {
            self.rtt.raise_to(3 * SEC);
        }
        self.retries = 0;
        self.backoff = 0;
    }

    fn rtt_sample_ts(&mut self, now: u64, seg: &TcpRepr) -> bool {
        if !self.ts_enabled {
            return false;
        }
        match seg.timestamps {
            Some(ts) if ts.tsecr != 0 => {
                let d = self.ts_now(now).wrapping_sub(ts.tsecr);
                if d < 0x8000_0000 {
                    self.rtt.sample(u64::from(d) * MS);
                }
                true
            }
            _ => false,
        }
    }

    // ---------------------------------------------------------------
    // Input (RFC 9293 §3.10.7).

    /// Processes one received segment of this connection. `seg` was
    /// parsed from a checksum-verified segment and `payload` is its data.
    /// Returns why (part of) it was discarded; every drop is also counted.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub fn handle_segment(
        &mut self,
        now: u64,
        seg: &TcpRepr,
        payload: &[u8],
    ) -> Result<(), TcpDrop> {
        self.counters.segs_in += 1;
        if self.cfg.fast_path && self.fast_path(now, seg, payload) {
            return Ok(());
        }
        let r = self.segment_inner(now, seg, payload);
        if let Err(d) = r {
            self.counters.drops[d as usize] += 1;
        }
        self.update_timers(now);
        r
    }

    #[cfg_attr(lazynet_pin, inline(always))]
    fn segment_inner(&mut self, now: u64, seg: &TcpRepr, payload: &[u8]) -> Result<(), TcpDrop> {
        if payload.len() != seg.payload_len {
            return Err(TcpDrop::BadLength);
        }
        if seg.src_port != self.remote.port() || seg.dst_port != self.local.port() {
            return Err(TcpDrop::WrongPorts);
        }
        match self.state {
            State::Closed => Err(TcpDrop::Closed),
            State::SynSent => self.on_syn_sent(now, seg, payload),
            _ => self.on_synchronized(now, seg, payload),
        }
    }

    /// RFC 9293 §3.10.7.3.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn on_syn_sent(&mut self, now: u64, seg: &TcpRepr, payload: &[u8]) -> Result<(), TcpDrop> {
        let f = seg.flags;
        if f.contains(TcpFlags::ACK) {
            // "If SEG.ACK =< ISS or SEG.ACK > SND.NXT, send a reset
            // (unless the RST bit is set) and discard the segment."
            if seq_le(seg.ack, self.iss) || seg.ack.diff(self.snd_max) > 0 {
                if !f.contains(TcpFlags::RST) {
                    self.rst_out = Some(TcpRepr {
                        seq: seg.ack,
                        flags: TcpFlags::RST,
                        ..self.repr_base()
                    });
                }
                return Err(TcpDrop::SynSentBadAck);
            }
        }
        if f.contains(TcpFlags::RST) {
            // RFC 5961 §3.2 for SYN-SENT: acceptable iff the ACK acks our SYN.
            if f.contains(TcpFlags::ACK) {
                self.error = Some(ConnError::Refused);
                self.enter_closed();
                return Ok(());
            }
            return Err(TcpDrop::SynSentRstNoAck);
        }
        if !f.contains(TcpFlags::SYN) {
            return Err(TcpDrop::SynSentNoSyn);
        }
        self.irs = seg.seq;
        self.rcv_nxt = seg.seq + 1;
        // The window our SYN advertised (unscaled).
        self.rcv_adv = self.rcv_nxt + self.rx.free().min(65535) as u32;
        self.negotiate(seg, now);
        // RFC 7323 §2.2: the window in a SYN is not scaled.
        self.snd_wnd = u32::from(seg.window);
        self.max_snd_wnd = self.snd_wnd;
        self.snd_wl1 = seg.seq;
        self.snd_wl2 = seg.ack;
        if f.contains(TcpFlags::ACK) {
            self.snd_una = seg.ack;
            self.drained_at = now;
            self.syn_acked = true;
            self.cc.on_established(self.eff_mss);
            if self.snd_nxt.diff(self.snd_una) < 0 {
                self.snd_nxt = self.snd_una;
            }
            if !self.rtt_sample_ts(now, seg) {
                if let Some((_, t)) = self.rtt_timing.take() {
                    self.rtt.sample(now.saturating_sub(t));
                }
            }
            self.rtt_timing = None;
            self.rtx = Timer::Idle;
            self.on_established();
            self.ack_now = true;
        } else {
            // Simultaneous open: "enter SYN-RECEIVED, form a SYN,ACK".
            self.state = State::SynReceived;
            self.snd_nxt = self.iss;
            self.rtt_timing = None;
        }
        if !payload.is_empty() {
            self.process_data(now, seg.seq + 1, payload);
        }
        if f.contains(TcpFlags::FIN) {
            self.process_fin(now, seg.seq + 1 + payload.len() as u32);
        }
        Ok(())
    }

    /// RFC 9293 §3.10.7.4 for SYN-RECEIVED and the synchronized states.
    fn on_synchronized(&mut self, now: u64, seg: &TcpRepr, payload: &[u8]) -> Result<(), TcpDrop> {
        let mut trimmed;
        let mut seg = seg;
        // Simultaneous open (RFC 9293 §3.5 Figure 7): the peer's SYN-ACK
        // repeats its SYN; only the new part (the ACK) is processed.
        if self.state == State::SynReceived
            && seg.flags.contains(TcpFlags::SYN | TcpFlags::ACK)
            && !seg.flags.contains(TcpFlags::RST)
            && seg.seq == self.irs
        {
            trimmed = *seg;
            trimmed.flags = trimmed.flags & !TcpFlags::SYN;
            trimmed.seq = seg.seq + 1;
            seg = &trimmed;
        }
        let f = seg.flags;
        let rst = f.contains(TcpFlags::RST);
        // A retransmitted SYN of the handshake in progress: resend SYN-ACK.
        if self.state == State::SynReceived
            && f.contains(TcpFlags::SYN)
            && !f.intersects(TcpFlags::ACK | TcpFlags::RST)
            && seg.seq == self.irs
        {
            self.snd_nxt = self.iss;
            return Ok(());
        }
        // RFC 7323 §5.3 R1: PAWS.
        if self.ts_enabled && !rst {
            if let Some(ts) = seg.timestamps {
                let older = (ts.tsval.wrapping_sub(self.ts_recent) as i32) < 0;
                if older && now.saturating_sub(self.ts_recent_at) <= PAWS_IDLE {
                    self.ack_now = true;
                    return Err(TcpDrop::Paws);
                }
            }
        }
        // First: sequence number acceptability.
        let seg_len = payload.len() as u32
            + u32::from(f.contains(TcpFlags::SYN))
            + u32::from(f.contains(TcpFlags::FIN));
        let wnd = self.rcv_adv.diff(self.rcv_nxt).max(0) as u32;
        let wnd_end = self.rcv_nxt + wnd;
        let acceptable = match (seg_len, wnd) {
            (0, 0) => seg.seq == self.rcv_nxt,
            // Deviation (as Linux tcp_sequence()): a zero-length non-RST
            // segment exactly at the right edge is accepted. A peer whose
            // data filled our window sends its ACKs with SEG.SEQ = SND.NXT
            // = our right edge; dropping them can deadlock two peers that
            // both filled each other's window (found by tcp_sim).
            (0, _) if !rst && seg.seq == wnd_end => true,
            (0, _) => seg.seq.in_window(self.rcv_nxt, wnd_end),
            (_, 0) => false,
            _ => {
                seg.seq.in_window(self.rcv_nxt, wnd_end)
                    || (seg.seq + (seg_len - 1)).in_window(self.rcv_nxt, wnd_end)
            }
        };
        // RFC 9293: with a zero window, still process valid ACKs and RSTs
        // of a segment starting at RCV.NXT; its text is trimmed away.
        let zero_wnd_at_edge = wnd == 0 && seg.seq == self.rcv_nxt;
        if !acceptable && !zero_wnd_at_edge {
            if !rst {
                self.ack_now = true;
            }
            // RFC 9293 §3.10.7.4 TIME-WAIT: a retransmitted remote FIN is
            // acknowledged and restarts the 2·MSL timeout.
            if self.state == State::TimeWait
                && f.contains(TcpFlags::FIN)
                && seg.seq + payload.len() as u32 + 1 == self.rcv_nxt
            {
                self.tw_deadline = Some(now.saturating_add(self.cfg.time_wait));
            }
            return Err(TcpDrop::NotAcceptable);
        }
        // Second: RST (RFC 5961 §3.2).
        if rst {
            if seg.seq == self.rcv_nxt {
                match self.state {
                    // RFC 9293 §3.10.7.4: from an active OPEN the
                    // connection was refused.
                    State::SynReceived if self.active_open => self.error = Some(ConnError::Refused),
                    State::SynReceived
                    | State::Established
                    | State::FinWait1
                    | State::FinWait2
                    | State::CloseWait => self.error = Some(ConnError::Reset),
                    _ => {}
                }
                self.enter_closed();
                return Ok(());
            }
            self.challenge_ack(now);
            return Err(TcpDrop::RstChallenged);
        }
        // Fourth: SYN (RFC 5961 §4.2).
        if f.contains(TcpFlags::SYN) {
            self.challenge_ack(now);
            return Err(TcpDrop::SynChallenged);
        }
        // Fifth: ACK.
        if !f.contains(TcpFlags::ACK) {
            return Err(TcpDrop::NoAck);
        }
        if self.state == State::SynReceived {
            if seg.ack.diff(self.snd_una) > 0 && seg.ack.diff(self.snd_max) <= 0 {
                self.snd_wnd = u32::from(seg.window) << self.snd_wscale;
                self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
                self.snd_wl1 = seg.seq;
                self.snd_wl2 = seg.ack;
                self.on_established();
            } else {
                self.rst_out = Some(TcpRepr {
                    seq: seg.ack,
                    flags: TcpFlags::RST,
                    ..self.repr_base()
                });
                return Err(TcpDrop::SynRcvdBadAck);
            }
        }
        // RFC 5961 §5.2: (SND.UNA - MAX.SND.WND) <= SEG.ACK <= SND.NXT.
        if seg.ack.diff(self.snd_max) > 0 || seg.ack.diff(self.snd_una - self.max_snd_wnd) < 0 {
            self.challenge_ack(now);
            return Err(TcpDrop::AckUnacceptable);
        }
        // RFC 7323 §4.3: update TS.Recent.
        if let (true, Some(ts)) = (self.ts_enabled, seg.timestamps) {
            if seq_le(seg.seq, self.last_ack_sent)
                && (ts.tsval.wrapping_sub(self.ts_recent) as i32) >= 0
            {
                self.ts_recent = ts.tsval;
                self.ts_recent_at = now;
            }
        }
        self.last_rx = now;
        self.ka_sent = 0;
        self.established_in_order_or(now, seg, payload)
    }

    /// Steps five to eight for a segment that passed the checks. An
    /// ESTABLISHED in-order segment without FIN goes through
    /// [`Self::established_in_order`]; everything else runs the full
    /// sequence. Both share the same helpers, so the slow path stays the
    /// single source of truth (the predicted subset is in `fast.rs`).
    fn established_in_order_or(
        &mut self,
        now: u64,
        seg: &TcpRepr,
        payload: &[u8],
    ) -> Result<(), TcpDrop> {
        if self.state == State::Established
            && seg.seq == self.rcv_nxt
            && !seg
                .flags
                .intersects(TcpFlags::FIN | TcpFlags::SYN | TcpFlags::RST)
        {
            self.established_in_order(now, seg, payload);
            return Ok(());
        }
        self.process_ack(now, seg, payload.len());
        match self.state {
            State::FinWait1 if self.fin_acked() => {
                self.state = State::FinWait2;
                if self.orphaned {
                    self.arm_fin_timeout(now);
                }
            }
            State::Closing if self.fin_acked() => {
                self.enter_time_wait(now);
            }
            State::LastAck if self.fin_acked() => {
                self.enter_closed();
                return Ok(());
            }
            _ => {}
        }
        // Seventh: segment text.
        if self.orphaned && self.new_text(seg.seq, payload.len()) {
            // RFC 1122 §4.2.2.13: nobody will read it; tell the peer.
            self.counters.data_after_close += 1;
            self.abort();
            return Ok(());
        }
        if !payload.is_empty() {
            if matches!(
                self.state,
                State::Established | State::FinWait1 | State::FinWait2
            ) && !self.fin_rcvd
            {
                self.process_data(now, seg.seq, payload);
            } else {
                // After the peer's FIN no text can be valid; ACK it.
                self.ack_now = true;
            }
        }
        // Eighth: FIN.
        if seg.flags.contains(TcpFlags::FIN) {
            self.process_fin(now, seg.seq + payload.len() as u32);
        }
        Ok(())
    }

    /// ESTABLISHED, `SEG.SEQ == RCV.NXT`, ACK set, no SYN/FIN/RST, all
    /// checks passed: a pure ACK and/or in-order data. `fast.rs` handles
    /// the predicted part of this without the rare branches.
    #[cfg_attr(lazynet_pin, inline(always))]
    fn established_in_order(&mut self, now: u64, seg: &TcpRepr, payload: &[u8]) {
        self.process_ack(now, seg, payload.len());
        if !payload.is_empty() {
            self.process_data(now, seg.seq, payload);
        }
    }

    fn process_ack(&mut self, now: u64, seg: &TcpRepr, payload_len: usize) {
        let ack = seg.ack;
        let mss = self.eff_mss;
        if ack.diff(self.snd_una) > 0 {
            let mut acked = ack.diff(self.snd_una) as u32;
            if !self.syn_acked {
                self.syn_acked = true;
                acked -= 1;
                self.cc.on_established(mss);
            }
            let data = (acked as usize).min(self.tx.len());
            self.tx.consume(data);
            if self.orphaned && self.tx.is_empty() {
                // Everything acknowledged: nothing of the send buffer is
                // needed again.
                self.tx.shrink_to_len();
            }
            if acked as usize > data && self.fin_queued {
                self.fin_was_acked = true;
            }
            self.snd_una = ack;
            if self.snd_nxt.diff(self.snd_una) < 0 {
                self.snd_nxt = self.snd_una;
            }
            if ack == self.snd_max {
                self.drained_at = now;
            }
            // RTT: timestamps (RFC 7323 §4.1) or one timed segment (Karn).
            // After an RTO, ACKs up to what was outstanding then may echo
            // a TSval from before the timeout (the peer does not update
            // TS.Recent from our go-back-N duplicates), which would fold
            // the whole backoff into SRTT: no TS samples until past it
            // (found by tcp_sim: SRTT of 2 s on a 100 ms path).
            let stale = match self.ts_stale_until {
                Some(h) if seq_le(ack, h) => true,
                Some(_) => {
                    self.ts_stale_until = None;
                    false
                }
                None => false,
            };
            if stale {
                // Neither sample: Karn's rule covers the timed segment.
            } else if !self.rtt_sample_ts(now, seg) {
                if let Some((end, t)) = self.rtt_timing {
                    if seq_le(end, ack) {
                        self.rtt.sample(now.saturating_sub(t));
                        self.rtt_timing = None;
                    }
                }
            }
            self.backoff = 0;
            self.retries = 0;
            // RFC 6298 §5.3: restart the timer when new data is acked.
            self.rtx = Timer::Idle;
            // RFC 6675 §5: "If the incoming ACK is a cumulative
            // acknowledgment, the TCP MUST reset DupAcks to zero"; the
            // scoreboard forgets what is now acknowledged, then takes the
            // ACK's blocks.
            self.sb.advance(ack);
            self.sack_update(seg);
            if self.in_recovery {
                if ack.diff(self.recover) >= 0 {
                    // RFC 6582 §3.2 step 3: full acknowledgment; RFC 6675
                    // §5 (A): an ACK beyond RecoveryPoint ends recovery.
                    self.in_recovery = false;
                    self.dupacks = 0;
                    let flight = self.flight();
                    self.cc.on_recovery_exit(flight, mss);
                } else if self.sack_ok {
                    // RFC 6675 §5 (B): the window stays at ssthresh;
                    // poll_transmit sends per NextSeg while cwnd − pipe
                    // >= 1 SMSS (C). Without any SACK information the
                    // scoreboard has no hole to offer: resend the segment
                    // at SND.UNA as RFC 6582 step 5 would, in place of
                    // NextSeg rule 4's rescue (which would repeat it).
                    self.dupacks = 0;
                    if self.sb.is_empty() {
                        self.rexmit_one = true;
                        self.sb.rescued(self.recover);
                    }
                } else {
                    // Step 5: partial ACK: retransmit the next hole.
                    self.cc.on_partial_ack(acked, mss);
                    self.rexmit_one = true;
                }
            } else {
                self.dupacks = 0;
                if let Some(srtt) = self.rtt.srtt() {
                    self.cc.on_rtt(srtt);
                }
                self.cc.on_ack(now, acked, mss);
                // RFC 6675 §5 step (2): IsLost(HighACK + 1) also starts
                // recovery.
                self.maybe_enter_sack_recovery(now);
            }
        } else if ack == self.snd_una {
            // RFC 5681 §2 "duplicate acknowledgment"; with SACK, RFC 6675
            // §2: an ACK that SACKs new data (the window may differ).
            let new_sack = self.sack_update(seg);
            let f = seg.flags;
            let same_window = (u32::from(seg.window) << self.snd_wscale) == self.snd_wnd;
            // Answers to zero-window probes are not duplicate ACKs.
            if self.snd_max != self.snd_una
                && self.snd_wnd != 0
                && payload_len == 0
                && !f.intersects(TcpFlags::SYN | TcpFlags::FIN)
                && (new_sack || (same_window && (!self.sack_ok || seg.sack.is_empty())))
            {
                self.dupacks += 1;
                if self.sack_ok {
                    // RFC 6675 §5 steps (1), (2); in recovery, pipe
                    // accounts for the ACK (no window inflation).
                    self.maybe_enter_sack_recovery(now);
                } else if self.in_recovery {
                    self.cc.on_dup_ack_in_recovery(mss);
                } else if self.dupacks == 3 && ack.diff(self.recover) > 0 {
                    // RFC 6582 §3.2 step 2: enter fast recovery.
                    self.in_recovery = true;
                    self.recover = self.snd_max;
                    let flight = self.flight();
                    self.cc.on_fast_retransmit(now, flight, mss);
                    self.rexmit_one = true;
                    self.rtt_timing = None;
                    self.counters.fast_retransmits += 1;
                }
            } else if new_sack {
                // Not a duplicate ACK (it carries data, or the window
                // moved), but its SACK blocks may make IsLost(HighACK + 1)
                // true: RFC 6675 §5 step (2).
                self.maybe_enter_sack_recovery(now);
            }
            if self.snd_wnd == 0 {
                // The peer answers our probes: it is alive.
                self.retries = 0;
            }
        }
        // RFC 9293 §3.10.7.4: update the send window.
        if seq_lt(self.snd_wl1, seg.seq) || (self.snd_wl1 == seg.seq && seq_le(self.snd_wl2, ack)) {
            let old = self.snd_wnd;
            self.snd_wnd = u32::from(seg.window) << self.snd_wscale;
            self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = ack;
            if old == 0 && self.snd_wnd > 0 {
                // The window reopened: resend the probe byte if unacked.
                self.probe_now = false;
                self.snd_nxt = self.snd_una;
                self.backoff = 0;
                self.rtx = Timer::Idle;
            }
        }
    }

    /// RFC 6675 §4 `Update()` with the SACK blocks of `seg` (if SACK was
    /// negotiated); true if they SACKed new data.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn sack_update(&mut self, seg: &TcpRepr) -> bool {
        if !self.sack_ok || !self.syn_acked || seg.sack.is_empty() {
            return false;
        }
        let u = self
            .sb
            .update(self.snd_una, self.snd_max, seg.sack.as_slice());
        self.counters.sack_ignored += u64::from(u.ignored);
        self.counters.sack_overflow += u64::from(u.overflow);
        u.new_data
    }

    /// RFC 6675 §5 steps (1), (2) and (4): with SACK, enter loss recovery
    /// on DupThresh duplicate ACKs or when IsLost(HighACK + 1), unless a
    /// recovery (or an RTO, §5.1) is still covering SND.UNA.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn maybe_enter_sack_recovery(&mut self, now: u64) {
        let mss = self.eff_mss;
        if !self.sack_ok
            || self.in_recovery
            || !self.syn_acked
            || self.snd_max == self.snd_una
            // "the cumulative acknowledgment point is beyond the last
            // value of RecoveryPoint" (§5; §5.1 after an RTO).
            || self.snd_una.diff(self.recover) < 0
            || (self.dupacks < DUP_THRESH && !self.sb.is_lost(self.snd_una, mss))
        {
            return;
        }
        // (4.1) RecoveryPoint = HighData.
        self.in_recovery = true;
        self.recover = self.snd_max;
        // (4.2) ssthresh and cwnd, by the controller.
        let flight = self.flight();
        self.cc.on_enter_recovery(now, flight, mss);
        // (4.3) retransmit the first segment at HighACK; HighRxt and
        // RescueRxt follow from it when it is sent.
        self.sb.start_recovery(self.snd_una);
        self.rexmit_one = true;
        self.rtt_timing = None;
        self.counters.fast_retransmits += 1;
    }

    /// Whether `len` bytes of text at `seq` reach beyond RCV.NXT.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn new_text(&self, seq: SeqNumber, len: usize) -> bool {
        len > 0 && (seq + len as u32).diff(self.rcv_nxt) > 0
    }

    /// Seventh step: queue text in order, or out of order into the
    /// interval set (RFC 9293 §3.10.7.4; immediate ACK per RFC 5681 §4.2).
    fn process_data(&mut self, now: u64, seq: SeqNumber, payload: &[u8]) {
        let mut s = seq;
        let mut data = payload;
        if seq_lt(s, self.rcv_nxt) {
            let cut = self.rcv_nxt.diff(s) as usize;
            if cut >= data.len() {
                self.ack_now = true;
                return;
            }
            data = &data[cut..];
            s = self.rcv_nxt;
        }
        // Accept only up to the right edge we advertised.
        let wnd = self.rcv_adv.diff(self.rcv_nxt).max(0) as usize;
        let off = s.diff(self.rcv_nxt) as usize;
        if off >= wnd {
            self.ack_now = true;
            return;
        }
        let data = &data[..data.len().min(wnd - off)];
        self.rcv_mss = self
            .rcv_mss
            .max(data.len() as u32)
            .min(u32::from(self.cfg.mss));
        if off == 0 {
            let n = self.rx.write_at(0, data);
            self.rx.commit(n);
            self.rcv_nxt += n as u32;
            let had_ooo = !self.ooo.is_empty();
            let nxt = self.ooo.advance(self.rcv_nxt);
            let extra = nxt.diff(self.rcv_nxt).max(0) as usize;
            self.rx.commit(extra);
            self.rcv_nxt = nxt;
            if had_ooo {
                // Gap filled (partly): ACK at once.
                self.ack_now = true;
            } else {
                self.unacked_bytes = self.unacked_bytes.saturating_add(n as u32);
                if self.unacked_bytes >= 2 * self.rcv_mss {
                    // RFC 5681 §4.2: ACK at least every second full segment.
                    self.ack_now = true;
                } else if self.ack_deadline.is_none() {
                    self.ack_deadline = Some(now.saturating_add(self.cfg.ack_delay));
                }
            }
        } else {
            let n = self.rx.write_at(off, data);
            if n > 0 && !self.ooo.add(s, s + n as u32) {
                self.counters.ooo_dropped += 1;
            }
            self.ack_now = true;
        }
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn process_fin(&mut self, now: u64, fin_seq: SeqNumber) {
        if self.fin_rcvd {
            // A retransmitted FIN: ACK it; in TIME-WAIT restart 2·MSL.
            if fin_seq + 1 == self.rcv_nxt {
                self.ack_now = true;
                if self.state == State::TimeWait {
                    self.tw_deadline = Some(now.saturating_add(self.cfg.time_wait));
                }
            }
            return;
        }
        if fin_seq != self.rcv_nxt {
            // Out of order FIN: the text before it is missing.
            self.ack_now = true;
            return;
        }
        self.fin_rcvd = true;
        self.rcv_nxt += 1;
        // The FIN takes no buffer space: keep the window's size.
        self.rcv_adv += 1;
        self.ack_now = true;
        match self.state {
            State::SynReceived | State::Established => self.state = State::CloseWait,
            State::FinWait1 => {
                if self.fin_acked() {
                    self.enter_time_wait(now);
                } else {
                    self.state = State::Closing;
                }
            }
            State::FinWait2 => self.enter_time_wait(now),
            _ => {}
        }
    }

    // ---------------------------------------------------------------
    // Output.

    /// Cheap test whether [`Connection::poll_transmit`]`(now, ..)` could
    /// return a segment: `false` guarantees it would return `None` (a
    /// conservative superset of "it returns `Some`": Nagle and SACK
    /// recovery are not decided here). When it is `false` the caller may
    /// skip `poll_transmit` and call [`Connection::skip_transmit`] instead,
    /// which leaves the connection exactly as the empty `poll_transmit`
    /// would (property-tested in `tests/tcp/prop.rs`).
    #[cfg_attr(lazynet_pin, inline(always))]
    pub fn wants_output(&self, now: u64) -> bool {
        if self.rst_out.is_some()
            || self.ack_now
            || self.ka_now
            || self.ack_deadline.is_some_and(|t| now >= t)
        {
            return true;
        }
        match self.state {
            State::Closed | State::FinWait2 | State::TimeWait => false,
            State::SynSent | State::SynReceived => self.snd_nxt == self.iss,
            State::Established
            | State::CloseWait
            | State::FinWait1
            | State::Closing
            | State::LastAck => {
                if !self.syn_acked {
                    return false;
                }
                if self.rexmit_one || self.probe_now || (self.in_recovery && self.sack_ok) {
                    return true;
                }
                let start = self.data_start();
                let off = self.snd_nxt.diff(start).max(0) as usize;
                let buffered = self.tx.len();
                if off < buffered {
                    // Unsent bytes: only the windows can hold them back.
                    let flight = self.snd_nxt.diff(self.snd_una).max(0) as u32;
                    let win = self.usable_window();
                    if win > flight {
                        return true;
                    }
                }
                // A FIN still to send (also after an RTO rewound SND.NXT).
                self.fin_queued && !self.fin_was_acked && self.snd_nxt.diff(self.fin_seq()) <= 0
            }
        }
    }

    /// What an empty [`Connection::poll_transmit`] does besides returning
    /// `None`: re-arms the timers for the current state (e.g. the persist
    /// timer after `send` into a zero window). Call it instead of
    /// `poll_transmit` when [`Connection::wants_output`] is `false`.
    #[cfg_attr(lazynet_pin, inline(always))]
    pub fn skip_transmit(&mut self, now: u64) {
        self.restart_if_idle(now);
        self.update_timers(now);
    }

    /// The next segment to send, if any: its header is returned and its
    /// payload (`repr.payload_len` bytes) written to the front of
    /// `payload`. Call until `None`.
    pub fn poll_transmit(&mut self, now: u64, payload: &mut [u8]) -> Option<TcpRepr> {
        self.poll_transmit_inner(now, payload, false)
            .map(|(r, _)| r)
    }

    /// [`Connection::poll_transmit`] that also returns the partial checksum
    /// sum of the payload it wrote (congruent mod 0xFFFF to
    /// `wire::checksum::partial(&payload[..repr.payload_len], 0)`, not
    /// always equal to it), computed while copying it: the caller emits
    /// the header with `TcpRepr::emit_header_with_payload_sum` and the
    /// payload is read once.
    pub fn poll_transmit_with_sum(
        &mut self,
        now: u64,
        payload: &mut [u8],
    ) -> Option<(TcpRepr, u32)> {
        self.poll_transmit_inner(now, payload, true)
    }

    #[cfg_attr(lazynet_pin, inline(always))]
    fn poll_transmit_inner(
        &mut self,
        now: u64,
        payload: &mut [u8],
        want_sum: bool,
    ) -> Option<(TcpRepr, u32)> {
        if let Some(r) = self.rst_out.take() {
            self.counters.segs_out += 1;
            return Some((r, 0));
        }
        if let Some(t) = self.ack_deadline {
            if now >= t {
                self.ack_deadline = None;
                self.ack_now = true;
            }
        }
        self.restart_if_idle(now);
        let r = match self.state {
            State::Closed => None,
            State::SynSent | State::SynReceived if self.snd_nxt == self.iss => {
                Some((self.emit_syn(now), 0))
            }
            State::SynSent => None,
            _ => self.emit_data(now, payload, want_sum),
        };
        if r.is_some() {
            self.counters.segs_out += 1;
        }
        self.update_timers(now);
        r
    }

    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn emit_syn(&mut self, now: u64) -> TcpRepr {
        let synack = self.state == State::SynReceived;
        if self.snd_max != self.iss {
            self.counters.retransmits += 1;
        } else if !synack || self.rtt_timing.is_none() {
            self.rtt_timing = Some((self.iss + 1, now));
        }
        let mut r = TcpRepr {
            seq: self.iss,
            flags: TcpFlags::SYN,
            // RFC 7323 §2.2: the SYN window is never scaled.
            window: self.rx.free().min(65535) as u16,
            mss: Some(self.cfg.mss),
            ..self.repr_base()
        };
        if synack {
            r.flags |= TcpFlags::ACK;
            r.ack = self.rcv_nxt;
            // RFC 7323 §2.2: only in answer to a SYN that carried it.
            if self.ws_ok {
                r.window_scale = Some(self.our_wscale);
            }
            r.sack_permitted = self.sack_ok;
            r.timestamps = self.timestamps(now);
            self.rcv_adv = self.rcv_nxt + u32::from(r.window);
            self.last_ack_sent = self.rcv_nxt;
            self.ack_now = false;
        } else {
            r.window_scale = self.cfg.window_scale.then_some(self.our_wscale);
            r.sack_permitted = self.cfg.sack;
            if self.cfg.timestamps {
                r.timestamps = Some(Timestamps {
                    tsval: self.ts_now(now),
                    tsecr: 0,
                });
            }
        }
        self.snd_nxt = self.iss + 1;
        if self.snd_max == self.iss {
            self.snd_max = self.snd_nxt;
        }
        r
    }

    /// What to send next at SND.NXT outside recovery: new data within the
    /// usable window, Nagle and SWS avoidance applied, or a zero-window
    /// probe. `sack` is (cwnd − pipe, NextSeg) in SACK recovery.
    #[cfg_attr(lazynet_pin, inline(always))]
    fn pick_new(
        &mut self,
        start: SeqNumber,
        buffered: usize,
        cap: usize,
        sack: Option<(u32, NextSeg)>,
    ) -> Pick {
        let mss = self.eff_mss as usize;
        let seq = self.snd_nxt;
        let off = seq.diff(start).max(0) as usize;
        let unsent = buffered.saturating_sub(off);
        let flight = seq.diff(self.snd_una).max(0) as u32;
        let usable = match sack {
            // RFC 6675 NextSeg rule 2: new data within cwnd − pipe.
            Some((room, NextSeg::NewData)) => {
                room.min(self.snd_wnd.saturating_sub(flight)) as usize
            }
            Some(_) => 0,
            None => self.usable_window().saturating_sub(flight) as usize,
        };
        let mut len = unsent.min(usable).min(mss);
        let mut probe = false;
        if len == 0 && unsent > 0 && self.probe_now && self.snd_wnd == 0 {
            // RFC 9293 §3.8.6.1: zero-window probe of one byte.
            len = 1.min(cap);
            probe = true;
        }
        if len > 0 && len < mss && !probe {
            // Nagle (RFC 9293 §3.7.4) and sender SWS avoidance
            // (§3.8.6.2.1): send a short segment only if it empties the
            // buffer and nothing is in flight (or no-delay), or it is at
            // least half the largest window the peer offered.
            // With nothing in flight, a window-limited short segment
            // goes anyway: no ACK could otherwise open the window (the
            // role of §3.8.6.2.1's override timeout).
            let all = len == unsent;
            let ok = (all && (self.cfg.nodelay || flight == 0))
                || (self.max_snd_wnd > 0 && len as u32 >= self.max_snd_wnd / 2)
                || (flight == 0 && len == usable);
            if !ok {
                len = 0;
            }
        }
        // The caller's buffer limits the segment, not the decision.
        len = len.min(cap);
        let fin = self.fin_queued
            && !self.fin_was_acked
            && off + len == buffered
            && seq.diff(self.fin_seq()) <= 0;
        Pick {
            seq,
            len,
            fin,
            is_rexmit: (len > 0 || fin) && seq_lt(seq, self.snd_max),
            probe,
            sack_next: sack.map_or(NextSeg::Nothing, |s| s.1),
            sack_recovery: sack.is_some(),
        }
    }

    /// What to send in loss recovery: the fast retransmission or NewReno
    /// partial-ACK resend at SND.UNA, or (RFC 6675 §5 (C)) what NextSeg
    /// chooses while cwnd − pipe >= 1 SMSS.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn pick_in_recovery(&mut self, start: SeqNumber, buffered: usize, cap: usize) -> Pick {
        let mss = self.eff_mss as usize;
        let sack_recovery = self.in_recovery && self.sack_ok;
        let fin_at = |c: &Self, seq: SeqNumber, len: usize| {
            c.fin_queued && seq + len as u32 == c.fin_seq() && c.snd_max.diff(c.fin_seq()) > 0
        };
        if self.rexmit_one {
            // Fast retransmit / NewReno partial ACK: resend at SND.UNA
            // (RFC 6675 step 4.3: not into SACKed data).
            self.rexmit_one = false;
            let seq = self.snd_una;
            let off = seq.diff(start).max(0) as usize;
            let mut max = mss;
            if let (true, Some(l)) = (sack_recovery, self.sb.first_start()) {
                max = max.min(l.diff(seq).max(0) as usize);
            }
            let len = max.min(buffered.saturating_sub(off)).min(cap);
            return Pick::resend(
                seq,
                len,
                fin_at(self, seq, len),
                NextSeg::Nothing,
                sack_recovery,
            );
        }
        // `sack_recovery` holds here. `room` is cwnd − pipe.
        let room =
            self.cc
                .window()
                .saturating_sub(self.sb.pipe(self.snd_una, self.snd_max, self.eff_mss));
        let mut next = NextSeg::Nothing;
        if room >= self.eff_mss {
            let flight = self.snd_nxt.diff(self.snd_una).max(0) as u32;
            let new_ok = self.has_unsent() && self.snd_wnd > flight;
            next = self
                .sb
                .next_seg(self.snd_una, self.snd_max, self.eff_mss, new_ok);
        }
        if let NextSeg::Retransmit { seq, len: l, .. } | NextSeg::Rescue { seq, len: l } = next {
            // RFC 6675 NextSeg rules 1, 3, 4: a hole below SND.MAX.
            let off = seq.diff(start).max(0) as usize;
            let len = (l as usize).min(buffered.saturating_sub(off)).min(cap);
            return Pick::resend(seq, len, fin_at(self, seq, len), next, true);
        }
        self.pick_new(start, buffered, cap, Some((room, next)))
    }

    /// RFC 9293 §3.8.4: a keep-alive carries SEG.SEQ = SND.NXT - 1 and no
    /// data, which the peer must answer with an ACK.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn emit_keepalive(&mut self, now: u64) -> (TcpRepr, u32) {
        let window = self.advertise_window();
        let r = TcpRepr {
            seq: self.snd_una - 1,
            ack: self.rcv_nxt,
            flags: TcpFlags::ACK,
            window,
            timestamps: self.timestamps(now),
            ..self.repr_base()
        };
        self.counters.keepalives += 1;
        self.ack_now = false;
        self.ack_deadline = None;
        self.last_ack_sent = self.rcv_nxt;
        (r, 0)
    }

    /// RFC 2018 §4: the SACK blocks of the out-of-order queue, most recent
    /// first; 3 fit with timestamps.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn sack_blocks(&self) -> SackBlocks {
        let max = if self.ts_enabled { 3 } else { 4 };
        let mut blocks = [(SeqNumber(0), SeqNumber(0)); MAX_INTERVALS];
        let k = self.ooo.by_recency(max, &mut blocks);
        SackBlocks::new(&blocks[..k]).unwrap_or(SackBlocks::EMPTY)
    }

    /// The bookkeeping of a retransmission ending at `end`.
    #[cfg_attr(lazynet_outline, cold, inline(never))]
    fn note_retransmit(&mut self, p: &Pick, end: SeqNumber) {
        if p.sack_recovery {
            // RFC 6675 (C.2) and step 4.3: HighRxt (and the first
            // time RescueRxt); rule 4 sets RescueRxt = RecoveryPoint
            // and leaves HighRxt alone.
            match p.sack_next {
                NextSeg::Rescue { .. } => {
                    self.sb.rescued(self.recover);
                    self.counters.sack_retransmits += 1;
                }
                NextSeg::Retransmit { .. } => {
                    self.sb.retransmitted(end);
                    self.counters.sack_retransmits += 1;
                }
                _ => self.sb.retransmitted(end),
            }
        }
        self.counters.retransmits += 1;
        if self.rtt_timing.is_some_and(|(e, _)| seq_lt(p.seq, e)) {
            self.rtt_timing = None;
        }
    }

    #[cfg_attr(lazynet_pin, inline(always))]
    fn emit_data(
        &mut self,
        now: u64,
        payload: &mut [u8],
        want_sum: bool,
    ) -> Option<(TcpRepr, u32)> {
        let can_send = self.may_send_data();
        let start = self.data_start();
        let buffered = self.tx.len();
        let p = if !can_send {
            Pick::nothing(self.snd_nxt)
        } else if self.rexmit_one || (self.in_recovery && self.sack_ok) {
            self.pick_in_recovery(start, buffered, payload.len())
        } else {
            self.pick_new(start, buffered, payload.len(), None)
        };
        if p.probe {
            self.probe_now = false;
            self.counters.window_probes += 1;
        }
        if self.ka_now {
            self.ka_now = false;
            if p.len == 0 && !p.fin {
                return Some(self.emit_keepalive(now));
            }
        }
        let (mut seq, mut fin) = (p.seq, p.fin);
        if p.len == 0 && !fin && !self.ack_now {
            return None;
        }
        let off = seq.diff(start).max(0) as usize;
        // SACK blocks ride in the header: the text shrinks by their room
        // (RFC 9293 §3.7.1: the MSS counts no options; with path MTU
        // discovery a full segment plus blocks would exceed the path).
        let sack = if self.sack_ok && !self.ooo.is_empty() {
            self.sack_blocks()
        } else {
            SackBlocks::EMPTY
        };
        let plen = if sack.is_empty() {
            p.len
        } else {
            let room = (2 + 8 * sack.len() + 3) & !3;
            let cut = p
                .len
                .min((self.eff_mss as usize).saturating_sub(room).max(1));
            fin &= cut == p.len;
            cut
        };
        let (len, payload_sum) = if plen == 0 {
            (0, 0)
        } else if want_sum {
            self.tx.peek_with_sum(off, &mut payload[..plen], 0)
        } else {
            (self.tx.peek(off, &mut payload[..plen]), 0)
        };
        if len == 0 && !fin {
            // Not the rewound SND.NXT: after an RTO a lower number could
            // fall left of the peer's window, be unacceptable, and its ACK
            // never processed (found by tcp_sim: ACK ping-pong until both
            // sides timed out).
            seq = self.acceptable_seq();
        }
        let mut flags = TcpFlags::ACK;
        if fin {
            flags |= TcpFlags::FIN;
        }
        if len > 0 && off + len == buffered {
            flags |= TcpFlags::PSH;
        }
        let window = self.advertise_window();
        let mut r = TcpRepr {
            seq,
            ack: self.rcv_nxt,
            flags,
            window,
            payload_len: len,
            ..self.repr_base()
        };
        r.timestamps = self.timestamps(now);
        r.sack = sack;
        // Sequence bookkeeping.
        let end = seq + len as u32 + u32::from(fin);
        if len > 0 || fin {
            if p.is_rexmit {
                self.note_retransmit(&p, end);
            } else if self.rtt_timing.is_none() && !self.ts_enabled {
                self.rtt_timing = Some((end, now));
            }
            self.sent_up_to(end);
        }
        self.ack_sent();
        Some((r, payload_sum))
    }

    // ---------------------------------------------------------------
    // Invariants.

    /// Checks the TCB's invariants; `Err` names the first one broken.
    /// Not a `debug_assert`: tests and fuzzers call it after every step.
    pub fn check_invariants(&self) -> Result<(), &'static str> {
        if self.state == State::Closed {
            if self.poll_timeout().is_some() {
                return Err("CLOSED with a timer armed");
            }
            return Ok(());
        }
        if !seq_le(self.snd_una, self.snd_nxt) {
            return Err("SND.UNA > SND.NXT");
        }
        if !seq_le(self.snd_nxt, self.snd_max) {
            return Err("SND.NXT > SND.MAX");
        }
        let flight = self.snd_max.diff(self.snd_una);
        if flight < 0 || flight as usize > self.tx.len() + 2 {
            return Err("flight exceeds buffered data + SYN + FIN");
        }
        if self.tx.len() > self.tx.capacity() || self.rx.len() > self.rx.capacity() {
            return Err("buffer over capacity");
        }
        if self.state == State::TimeWait && self.tw_deadline.is_none() {
            return Err("TIME-WAIT without its timer");
        }
        if matches!(
            self.state,
            State::FinWait1 | State::FinWait2 | State::Closing | State::LastAck | State::TimeWait
        ) && !self.fin_queued
        {
            return Err("FIN state without FIN queued");
        }
        if matches!(
            self.state,
            State::CloseWait | State::Closing | State::LastAck | State::TimeWait
        ) && !self.fin_rcvd
        {
            return Err("state implies the peer's FIN, but none was received");
        }
        if self.state == State::FinWait2 && !self.fin_acked() {
            return Err("FIN-WAIT-2 with our FIN unacked");
        }
        if self.state == State::FinWait2 && self.orphaned && self.tw_deadline.is_none() {
            return Err("an orphan in FIN-WAIT-2 without its FIN timeout");
        }
        if self.orphaned && (!self.rx.is_empty() || !self.ooo.is_empty()) {
            return Err("an orphan holds received text");
        }
        if self.state != State::SynSent {
            let mut prev = self.rcv_nxt;
            for &(a, b) in self.ooo.as_slice() {
                if !seq_lt(prev, a) || !seq_lt(a, b) {
                    return Err("out-of-order intervals not sorted above RCV.NXT");
                }
                if b.diff(self.rcv_nxt) as usize > self.rx.capacity() - self.rx.len() {
                    return Err("out-of-order data beyond the receive buffer");
                }
                prev = b;
            }
            // An orphan keeps its last edge without a buffer behind it.
            if !self.orphaned && (self.rcv_adv.diff(self.rcv_nxt).max(0) as usize) > self.rx.free()
            {
                return Err("advertised window exceeds free buffer");
            }
        }
        if self.syn_acked && self.eff_mss == 0 {
            return Err("zero MSS");
        }
        // Liveness: sequence space in flight always has a timer behind it.
        if self.state != State::TimeWait && self.snd_max != self.snd_una && self.rtx == Timer::Idle
        {
            return Err("data in flight without a retransmission or persist timer");
        }
        if self.rcv_wscale > 14 || self.snd_wscale > 14 {
            return Err("window scale above 14");
        }
        let mut prev = self.snd_una;
        for &(l, r) in self.sb.as_slice() {
            if !seq_le(prev, l) || !seq_lt(l, r) || !seq_le(r, self.snd_max) {
                return Err("SACK scoreboard not sorted within [SND.UNA, SND.MAX]");
            }
            prev = r;
        }
        if self.in_recovery && self.sack_ok && !seq_lt(self.snd_una, self.recover) {
            return Err("SACK recovery past its RecoveryPoint");
        }
        Ok(())
    }

    // ---------------------------------------------------------------
    // Accessors for other modules (kept together here, at the end).

    /// In TIME-WAIT, the compact entry that replaces this connection in a
    /// [`super::timewait::TimeWaitTable`] (the caller then drops the
    /// connection); `None` in any other state.
    pub fn time_wait_entry(&self) -> Option<TimeWaitEntry> {
        (self.state == State::TimeWait).then(|| TimeWaitEntry {
            key: TwKey {
                local: self.local,
                remote: self.remote,
            },
            snd_nxt: self.snd_max,
            rcv_nxt: self.rcv_nxt,
            rcv_wnd: self.rcv_adv.diff(self.rcv_nxt).max(0) as u32,
            rcv_wscale: self.rcv_wscale,
            ts: self.ts_enabled.then_some(TwTimestamps {
                ts_recent: self.ts_recent,
                ts_offset: self.cfg.ts_offset,
            }),
        })
    }
}
