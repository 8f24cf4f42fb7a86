//! CUBIC (RFC 9438): the window curve against the RFC's formulas at
//! chosen times, the decrease on loss (§4.6), fast convergence (§4.7),
//! the Reno-friendly region (§4.3), behaviour after an RTO (§4.8), and
//! the run-time choice of controller ([`CcAlgo`], [`Cc`]).

use crate::util::*;
use lazynet::proto::tcp::cc::{initial_window, CUBIC_ALPHA};
use lazynet::proto::tcp::{Cc, Cubic, NewReno};

const MSS: u32 = 1000;
const BETA: f64 = 0.7;
const C: f64 = 0.4;

/// A CUBIC controller in congestion avoidance territory: slow start up to
/// `w` bytes, then one congestion event (SACK style: cwnd = ssthresh).
fn cubic_after_loss(w: u32, now: u64) -> Cubic {
    let mut c = Cubic::default();
    c.on_established(MSS);
    while c.window() < w {
        let step = (w - c.window()).min(2 * MSS);
        c.on_ack(0, step, MSS);
    }
    assert_eq!(c.window(), w);
    c.on_enter_recovery(now, w, MSS);
    c
}

/// RFC 9438 §4.2 eq. 1 and 2 in segments and seconds, independently of
/// the implementation; returns bytes.
fn rfc_w_cubic(t: f64, w_max_seg: f64, cwnd_epoch_seg: f64) -> f64 {
    let k = ((w_max_seg - cwnd_epoch_seg) / C).cbrt();
    (C * (t - k).powi(3) + w_max_seg) * f64::from(MSS)
}

// ---- §4.2, §4.4, §4.5: the curve ----

#[test]
fn cubic_growth_follows_rfc_curve_at_chosen_times() {
    let t0 = 10 * SEC;
    let rtt = 100 * MS;
    let mut c = cubic_after_loss(100_000, t0);
    c.on_rtt(rtt);
    assert_eq!(c.window(), 70_000);
    // K = ∛((100 − 70) / 0.4) = ∛75 s.
    let want_k = 75f64.cbrt();
    // One ACK of a whole window per RTT: cwnd reaches the target
    // W_cubic(t + RTT) exactly (RFC 9438 §4.4: (target − cwnd)/cwnd per
    // SMSS acked), unless the Reno-friendly W_est (§4.3) is above
    // W_cubic(t). The model below is the RFC's text, in segments.
    let mut w_est = 70.0f64;
    let mut checked = [0u32; 2];
    for i in 0..=90u64 {
        let now = t0 + i * rtt;
        let before = c.window();
        c.on_ack(now, before, MSS);
        if i == 0 {
            assert_eq!(c.epoch_start(), Some(t0));
            assert!((c.k() - want_k).abs() < 1e-9, "K {}", c.k());
        }
        let t = (i * rtt) as f64 / 1e9;
        let cw = f64::from(before) / f64::from(MSS);
        w_est += if w_est >= 100.0 { 1.0 } else { CUBIC_ALPHA } * cw / cw;
        let reno = rfc_w_cubic(t, 100.0, 70.0) < w_est * f64::from(MSS);
        let want = if reno {
            (w_est * f64::from(MSS)).floor()
        } else {
            rfc_w_cubic(t + 0.1, 100.0, 70.0).clamp(f64::from(before), 1.5 * f64::from(before))
        };
        // At the chosen times: concave (1 s), around the plateau (4.2 s,
        // 6 s: Reno-friendly there), convex (9 s).
        if [10, 42, 60, 90].contains(&i) {
            assert!(
                (f64::from(c.window()) - want).abs() <= 1.0,
                "t = {t}: cwnd {} vs RFC {want} (reno-friendly {reno})",
                c.window()
            );
            checked[usize::from(reno)] += 1;
        }
    }
    assert!(checked[0] >= 2 && checked[1] >= 1, "{checked:?}");
    // Convex region beyond the old maximum.
    assert!(c.window() > 100_000);
}

#[test]
fn cubic_plateau_at_w_max_after_k_seconds() {
    let c = cubic_after_loss(50_000, 0);
    // Before the first ACK in congestion avoidance K is not fixed; the
    // function itself: W_cubic(0) = β·W_max, W_cubic(K) = W_max.
    let mut c2 = c;
    c2.on_ack(0, 1, MSS);
    let k = c2.k();
    assert!((c2.w_cubic(0.0, MSS) - 35_000.0).abs() < 1e-6);
    assert!((c2.w_cubic(k, MSS) - 50_000.0).abs() < 1e-6);
    assert!(c2.w_cubic(2.0 * k, MSS) > 50_000.0);
}

#[test]
fn cubic_growth_per_ack_is_target_minus_cwnd_over_cwnd() {
    let mut c = cubic_after_loss(100_000, 0);
    c.on_ack(0, 1, MSS); // starts the epoch at 0
    let cw = f64::from(c.window());
    let t = 2.0;
    c.on_ack(2 * SEC, 1000, MSS);
    let target = rfc_w_cubic(t, 100.0, 70.0).clamp(cw, 1.5 * cw);
    let want = cw + ((target - cw) * 1000.0 / cw).floor();
    assert_eq!(f64::from(c.window()), want);
}

#[test]
fn cubic_growth_clamped_to_one_and_a_half_cwnd() {
    let mut c = cubic_after_loss(20_000, 0);
    c.on_ack(0, 1, MSS);
    let cw = c.window();
    // Far in the convex region: the target is capped at 1.5·cwnd.
    c.on_ack(100 * SEC, cw, MSS);
    assert_eq!(c.window(), cw + cw / 2);
}

#[test]
fn cubic_slow_start_below_ssthresh() {
    let mut c = Cubic::default();
    c.on_established(MSS);
    assert_eq!(c.window(), initial_window(MSS));
    assert_eq!(c.ssthresh(), u32::MAX);
    c.on_ack(0, 1000, MSS);
    c.on_ack(0, 5000, MSS);
    assert_eq!(c.window(), 4000 + 1000 + 2000);
    assert_eq!(c.epoch_start(), None);
}

// ---- §4.6: multiplicative decrease ----

#[test]
fn cubic_decrease_on_fast_retransmit_is_beta() {
    let mut c = cubic_after_loss(100_000, 0);
    // Grow past the old W_max so fast convergence does not apply.
    c.on_ack(0, 1, MSS);
    let cw = c.window();
    c.on_fast_retransmit(SEC, cw, MSS);
    assert_eq!(c.ssthresh(), (f64::from(cw) * BETA) as u32);
    // NewReno-style recovery: ssthresh + 3·SMSS.
    assert_eq!(c.window(), c.ssthresh() + 3 * MSS);
}

#[test]
fn cubic_decrease_on_sack_recovery_sets_cwnd_to_ssthresh() {
    let c = cubic_after_loss(100_000, 0);
    assert_eq!(c.ssthresh(), 70_000);
    assert_eq!(c.window(), 70_000);
    assert_eq!(c.w_max(), 100_000.0);
}

#[test]
fn cubic_decrease_floor_two_segments() {
    let mut c = Cubic::default();
    c.on_established(MSS);
    c.on_enter_recovery(0, 4000, MSS);
    assert_eq!(c.ssthresh(), 2800);
    c.on_enter_recovery(0, 2800, MSS);
    assert_eq!(c.ssthresh(), 2 * MSS);
    assert_eq!(c.window(), 2 * MSS);
}

// ---- §4.7: fast convergence ----

#[test]
fn cubic_fast_convergence_lowers_w_max() {
    let mut c = cubic_after_loss(100_000, 0);
    c.on_ack(0, 1, MSS);
    // A second loss before regaining W_max (cwnd ≈ 70 000 < 100 000).
    let cw = f64::from(c.window());
    assert!(cw < 100_000.0);
    c.on_enter_recovery(SEC, c.window(), MSS);
    assert!((c.w_max() - cw * (1.0 + BETA) / 2.0).abs() < 1e-6);
    assert_eq!(c.ssthresh(), (cw * BETA) as u32);
}

#[test]
fn cubic_no_fast_convergence_above_w_max() {
    let mut c = cubic_after_loss(10_000, 0);
    c.on_ack(0, 1, MSS);
    // Well past K: cwnd grows beyond W_max = 10 000.
    for i in 1..40 {
        let w = c.window();
        c.on_ack(i * SEC, w, MSS);
    }
    let cw = c.window();
    assert!(cw > 10_000);
    c.on_enter_recovery(50 * SEC, cw, MSS);
    assert_eq!(c.w_max(), f64::from(cw));
}

// ---- §4.3: Reno-friendly region ----

#[test]
fn cubic_reno_friendly_region_follows_w_est() {
    // Small window, very short RTT: Reno would grow faster than the cubic
    // curve, so cwnd follows W_est (α_cubic per window until cwnd_prior,
    // then 1 per window).
    let mut c = cubic_after_loss(10_000, 0);
    assert_eq!(c.window(), 7000);
    let mut w_est = 7000.0;
    for i in 0..10u64 {
        let now = i * MS;
        let w = c.window();
        c.on_ack(now, w, MSS);
        let alpha = if w_est >= 10_000.0 { 1.0 } else { CUBIC_ALPHA };
        w_est += alpha * f64::from(w) * f64::from(MSS) / f64::from(w);
        assert!((c.w_est() - w_est).abs() < 1e-6, "step {i}");
        assert_eq!(c.window(), w_est as u32, "step {i}");
        assert!(c.w_cubic(now as f64 / 1e9, MSS) < c.w_est());
    }
    // Six windows at α ≈ 0.53 reach cwnd_prior; then +1 SMSS per window.
    assert!((CUBIC_ALPHA - 0.9 / 1.7).abs() < 1e-12);
    assert!((w_est - (7000.0 + 6.0 * CUBIC_ALPHA * 1000.0 + 4000.0)).abs() < 1e-6);
}

#[test]
fn cubic_reno_friendly_loses_to_cubic_on_long_rtt() {
    // Large window, long RTT: after a few seconds the cubic curve is
    // above W_est and drives cwnd.
    let mut c = cubic_after_loss(1_000_000, 0);
    c.on_rtt(200 * MS);
    for i in 0..30u64 {
        let w = c.window();
        c.on_ack(i * 200 * MS, w, MSS);
    }
    assert!(c.w_cubic(29.0 * 0.2, MSS) > c.w_est());
    assert!(f64::from(c.window()) > c.w_est());
}

// ---- §4.8: RTO ----

#[test]
fn cubic_rto_loss_window_and_beta_ssthresh() {
    let mut c = cubic_after_loss(20_000, 0);
    c.on_ack(0, 1, MSS);
    let cw = c.window();
    c.on_rto(cw, MSS);
    assert_eq!(c.window(), MSS);
    assert_eq!(c.ssthresh(), (f64::from(cw) * BETA) as u32);
}

#[test]
fn cubic_repeated_rto_holds_ssthresh() {
    let mut c = cubic_after_loss(20_000, 0);
    c.on_rto(20_000, MSS);
    let ss = c.ssthresh();
    c.on_rto(20_000, MSS);
    c.on_rto(20_000, MSS);
    // RFC 5681 §3.1: a timeout of an already retransmitted segment holds
    // ssthresh (cwnd is 1 SMSS now; β·cwnd would collapse it).
    assert_eq!(c.ssthresh(), ss);
    // An ACK of new data ends the episode: the next RTO reduces again.
    c.on_ack(SEC, MSS, MSS);
    c.on_rto(2000, MSS);
    assert_eq!(c.ssthresh(), 2 * MSS);
}

#[test]
fn cubic_after_rto_epoch_has_k_zero_and_w_max_cwnd_epoch() {
    let mut c = cubic_after_loss(40_000, 0);
    c.on_rto(40_000, MSS);
    assert_eq!(c.ssthresh(), 19_600);
    // Slow start back to ssthresh.
    let mut now = SEC;
    while c.window() < c.ssthresh() {
        c.on_ack(now, 2 * MSS, MSS);
        now += MS;
    }
    let epoch_cwnd = c.window();
    c.on_ack(now, 1, MSS);
    assert_eq!(c.epoch_start(), Some(now));
    assert_eq!(c.k(), 0.0);
    assert_eq!(c.w_max(), f64::from(epoch_cwnd));
    // Convex from the start: W_cubic(t) = C·t³ + cwnd_epoch.
    let t = 3.0;
    let want = C * t * t * t * f64::from(MSS) + f64::from(epoch_cwnd);
    assert!((c.w_cubic(t, MSS) - want).abs() < 1e-6);
}

// ---- Run-time choice, through the connection ----

fn flight_4000(cf: Config) -> Conn {
    let mut c = conn_established(cf);
    c.send(&data(4000, 1));
    while poll(&mut c, 0).is_some() {}
    c
}

#[test]
fn config_default_is_cubic() {
    assert_eq!(Config::default().cc, CcAlgo::Cubic);
    let c = conn_established(Config {
        cc: CcAlgo::Cubic,
        ..cfg()
    });
    assert_eq!(c.congestion().algo(), CcAlgo::Cubic);
    let c = conn_established(cfg());
    assert_eq!(c.congestion().algo(), CcAlgo::NewReno);
}

#[test]
fn connection_cubic_fast_retransmit_uses_beta() {
    let mut c = flight_4000(Config {
        cc: CcAlgo::Cubic,
        ..cfg()
    });
    for _ in 0..3 {
        feed(&mut c, MS, ack_in(0, 0), &[]).unwrap();
    }
    assert!(c.in_recovery());
    assert_eq!(c.congestion().ssthresh(), 2800);
    assert_eq!(c.congestion().window(), 5800);
}

#[test]
fn connection_cubic_rto() {
    let mut c = flight_4000(Config {
        cc: CcAlgo::Cubic,
        ..cfg()
    });
    timeout(&mut c, 200 * MS);
    assert_eq!(c.congestion().window(), 1000);
    assert_eq!(c.congestion().ssthresh(), 2800);
}

#[test]
fn connect_with_explicit_controller_still_works() {
    let mut c: Connection<NewReno> =
        Connection::connect_with(cfg(), LOCAL, REMOTE, LOCAL_SEQ, 0, NewReno::default());
    let mut buf = [0u8; 64];
    let r = c.poll_transmit(0, &mut buf).unwrap();
    assert_eq!(r.flags, SYN);
    let s = Connection::<Cubic>::accept_syn_with(
        cfg(),
        LOCAL,
        REMOTE,
        &syn_in(),
        LOCAL_SEQ,
        0,
        Cubic::default(),
    );
    assert!(s.is_some());
}

#[test]
fn cc_enum_delegates_exactly() {
    let mut a = Cc::new(CcAlgo::Cubic);
    let mut b = Cubic::default();
    let steps: [(u64, u32); 6] = [
        (0, 2000),
        (MS, 2000),
        (2 * MS, 3000),
        (SEC, 1),
        (2 * SEC, 8000),
        (3 * SEC, 8000),
    ];
    a.on_established(MSS);
    b.on_established(MSS);
    for (i, &(t, n)) in steps.iter().enumerate() {
        if i == 3 {
            a.on_enter_recovery(t, 10_000, MSS);
            b.on_enter_recovery(t, 10_000, MSS);
        }
        a.on_ack(t, n, MSS);
        b.on_ack(t, n, MSS);
        assert_eq!((a.window(), a.ssthresh()), (b.window(), b.ssthresh()));
    }
    let mut r = Cc::new(CcAlgo::NewReno);
    let mut n = NewReno::default();
    r.on_established(MSS);
    n.on_established(MSS);
    r.on_rto(8000, MSS);
    n.on_rto(8000, MSS);
    assert_eq!((r.window(), r.ssthresh()), (n.window(), n.ssthresh()));
}

#[test]
fn listener_connections_use_config_cc() {
    use lazynet::proto::tcp::{ListenConfig, ListenOutput, Listener, Secret};
    let secret = Secret::new(*b"cubic-test-key..");
    for algo in [CcAlgo::Cubic, CcAlgo::NewReno] {
        let mut l = Listener::new(
            ListenConfig {
                backlog: 2,
                syn_queue: 2,
                syn_cookies: false,
                synack_retries: 2,
                reply_queue: 2,
            },
            Config { cc: algo, ..cfg() },
            LOCAL,
            &secret,
        );
        let syn = syn_in();
        let o = l.handle_segment(0, REMOTE, &syn, &[], &secret);
        assert_eq!(o, ListenOutput::HalfOpen);
        let mut buf = vec![0u8; 2048];
        let (_, sa) = l.poll_transmit(0, &mut buf).unwrap();
        let ack = TcpRepr {
            seq: REMOTE_SEQ + 1,
            ack: sa.seq + 1,
            flags: ACK,
            ..SEND_TEMPL
        };
        let o = l.handle_segment(MS, REMOTE, &ack, &[], &secret);
        assert_eq!(o, ListenOutput::Established);
        let (_, c) = l.accept().unwrap();
        assert_eq!(c.congestion().algo(), algo);
    }
}
