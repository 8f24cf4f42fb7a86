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
mod fast;
// The transmit fast path (bursts of full segments), likewise.
mod burst;
mod input;
mod invariants;
mod output;
mod state;
mod timers;
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

    /// True if an ACK is owed at once: the window update a
    /// [`Connection::recv`] decided (RFC 9293 §3.8.6.2.2), or one that input
    /// asked for and output has not sent yet.
    #[inline]
    pub fn ack_owed(&self) -> bool {
        self.ack_now
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
