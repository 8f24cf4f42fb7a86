//! Two connections back to back through an in-memory lossy queue (seeded
//! loss, duplication, reordering by jitter; virtual time): 1 MB each way
//! arrives byte-exact and the connections close cleanly, without stalling.

use crate::util::*;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 1.0 < p
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

#[derive(Clone, Copy)]
struct Faults {
    loss: f64,
    dup: f64,
    delay: u64,
    jitter: u64,
}

struct Pkt {
    at: u64,
    to: usize,
    repr: TcpRepr,
    data: Vec<u8>,
}

fn run(seed: u64, f: Faults, size: usize, cfg: Config) -> u64 {
    let mut rng = Rng(seed | 1);
    let payload = [data(size, 3), data(size, 101)];
    let mut sent = [0usize; 2];
    let mut got: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    let mut closed = [false; 2];
    let mut conns: [Option<Conn>; 2] = [
        Some(Connection::connect(
            cfg,
            REMOTE,
            LOCAL,
            SeqNumber(0xFFFF_F000),
            0,
        )),
        None,
    ];
    let mut q: Vec<Pkt> = Vec::new();
    let mut now = 0u64;
    let mut buf = vec![0u8; 65536];
    let limit = 3_000 * SEC;
    let mut steps = 0u64;
    loop {
        steps += 1;
        assert!(steps < 300_000, "too many steps (seed {seed})");
        for i in 0..2 {
            let Some(c) = conns[i].as_mut() else { continue };
            if sent[i] < size {
                sent[i] += c.send(&payload[i][sent[i]..]);
            }
            loop {
                let n = c.recv(&mut buf);
                if n == 0 {
                    break;
                }
                got[i].extend_from_slice(&buf[..n]);
            }
            if sent[i] == size && !closed[i] && got[i].len() == size {
                c.close();
                closed[i] = true;
            }
            while let Some(r) = c.poll_transmit(now, &mut buf) {
                c.check_invariants().unwrap();
                let d = buf[..r.payload_len].to_vec();
                if rng.chance(f.loss) {
                    continue;
                }
                let copies = if rng.chance(f.dup) { 2 } else { 1 };
                for _ in 0..copies {
                    let at = now + f.delay + rng.below(f.jitter);
                    q.push(Pkt {
                        at,
                        to: 1 - i,
                        repr: r,
                        data: d.clone(),
                    });
                }
            }
        }
        let done = (0..2).all(|i| {
            got[i].len() == size
                && conns[i]
                    .as_ref()
                    .is_some_and(|c| matches!(c.state(), State::Closed | State::TimeWait))
        });
        if done {
            break;
        }
        // Next event.
        let mut next = q.iter().map(|p| p.at).min();
        for c in conns.iter().flatten() {
            if let Some(t) = c.poll_timeout() {
                next = Some(next.map_or(t, |n: u64| n.min(t)));
            }
        }
        let next = next.unwrap_or_else(|| {
            let st: Vec<_> = conns
                .iter()
                .flatten()
                .map(|c| {
                    (
                        c.state(),
                        c.error(),
                        c.snd_una(),
                        c.snd_nxt(),
                        c.rcv_nxt(),
                        c.send_window(),
                        c.send_queue(),
                        c.recv_queue(),
                    )
                })
                .collect();
            panic!(
                "stalled at {now} (seed {seed}): got {} / {}: {st:?}",
                got[0].len(),
                got[1].len()
            )
        });
        if std::env::var_os("TCP_SIM_TRACE").is_some() && now > 1_000 * SEC {
            for p in &q {
                eprintln!(
                    "{now}: to {} seq {} ack {} {:?} win {} len {} ts {:?}",
                    p.to,
                    p.repr.seq,
                    p.repr.ack,
                    p.repr.flags,
                    p.repr.window,
                    p.repr.payload_len,
                    p.repr.timestamps
                );
            }
        }
        assert!(
            next < limit,
            "no progress by {limit} ns (seed {seed}): got {} / {}",
            got[0].len(),
            got[1].len()
        );
        now = now.max(next);
        // Deliver due packets in arrival order.
        q.sort_by_key(|p| p.at);
        let due: Vec<Pkt> = {
            let k = q.iter().take_while(|p| p.at <= now).count();
            q.drain(..k).collect()
        };
        for p in due {
            match conns[p.to].as_mut() {
                Some(c) if c.state() == State::Closed => {
                    // What the stack does for a segment without a
                    // connection (RFC 9293 §3.10.7.1).
                    if let Some(r) = lazynet::proto::tcp::reset_for(&p.repr) {
                        let at = now + f.delay;
                        q.push(Pkt {
                            at,
                            to: 1 - p.to,
                            repr: r,
                            data: Vec::new(),
                        });
                    }
                }
                Some(c) => {
                    let _ = c.handle_segment(now, &p.repr, &p.data);
                    c.check_invariants().unwrap();
                }
                None => {
                    conns[1] = Connection::accept_syn(
                        cfg,
                        LOCAL,
                        REMOTE,
                        &p.repr,
                        SeqNumber(0x7000_0000),
                        now,
                    );
                }
            }
        }
        for c in conns.iter_mut().flatten() {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
                c.check_invariants().unwrap();
            }
        }
    }
    assert!(got[1] == payload[0], "A→B corrupted (seed {seed})");
    assert!(got[0] == payload[1], "B→A corrupted (seed {seed})");
    for c in conns.iter().flatten() {
        assert_eq!(c.error(), None);
        let k = c.counters();
        eprintln!(
            "seed {seed}: {:.3} s virtual, out {} in {} rexmit {} fast {} rto {} sack rexmit {}",
            now as f64 / SEC as f64,
            k.segs_out,
            k.segs_in,
            k.retransmits,
            k.fast_retransmits,
            k.rto_expired,
            k.sack_retransmits
        );
    }
    now
}

const MB: usize = 1 << 20;

fn sim_cfg() -> Config {
    Config {
        time_wait: SEC,
        ..Config::default()
    }
}

#[test]
fn sim_regression_stall_ts_small_buffers() {
    let cf = Config {
        window_scale: false,
        timestamps: true,
        sack: false,
        nodelay: false,
        mss: 1460,
        send_buf: 9 * 1024,
        recv_buf: 9 * 1024,
        max_retries: 30,
        ..sim_cfg()
    };
    run(
        1421380311235010564,
        Faults {
            loss: 0.11583266268151186,
            dup: 0.0,
            delay: 2 * MS,
            jitter: 6 * MS,
        },
        96 * 1024,
        cf,
    );
}

#[test]
fn sim_regression_stall_ts_nodelay_6k() {
    let cf = Config {
        window_scale: false,
        timestamps: true,
        sack: false,
        nodelay: true,
        mss: 1460,
        send_buf: 6 * 1024,
        recv_buf: 6 * 1024,
        max_retries: 30,
        ..sim_cfg()
    };
    run(
        5492898119271989862,
        Faults {
            loss: 0.094744742141735,
            dup: 0.005981662245262699,
            delay: 11 * MS,
            jitter: 7 * MS,
        },
        96 * 1024,
        cf,
    );
}

/// Stale TSecr after an RTO inflated SRTT to 2 s (7088 s virtual; 137 s now).
#[test]
fn sim_regression_extreme_small_buf() {
    let cf = Config {
        window_scale: false,
        timestamps: true,
        sack: false,
        nodelay: true,
        mss: 64,
        send_buf: 526,
        recv_buf: 526,
        max_retries: 60,
        syn_retries: 60,
        ..sim_cfg()
    };
    run(
        6506524161815019224,
        Faults {
            loss: 0.2556678248942717,
            dup: 0.01231580084394394,
            delay: 37 * MS,
            jitter: 42 * MS,
        },
        32 * 1024,
        cf,
    );
}

#[test]
fn sim_clean_link_1mb_each_way() {
    let t = run(
        1,
        Faults {
            loss: 0.0,
            dup: 0.0,
            delay: 5 * MS,
            jitter: 0,
        },
        MB,
        sim_cfg(),
    );
    assert!(t < 30 * SEC, "took {t}");
}

#[test]
fn sim_lossy_reordering_duplicating_1mb_each_way() {
    for seed in [7, 42, 1234] {
        run(
            seed,
            Faults {
                loss: 0.03,
                dup: 0.02,
                delay: 5 * MS,
                jitter: 4 * MS,
            },
            MB,
            sim_cfg(),
        );
    }
}

#[test]
fn sim_heavy_loss_small_buffers_no_options() {
    let cf = Config {
        send_buf: 8192,
        recv_buf: 6000,
        window_scale: false,
        timestamps: false,
        sack: false,
        mss: 536,
        ..sim_cfg()
    };
    run(
        99,
        Faults {
            loss: 0.10,
            dup: 0.05,
            delay: 2 * MS,
            jitter: 3 * MS,
        },
        256 * 1024,
        cf,
    );
}

#[test]
fn sim_large_window_scaled() {
    let cf = Config {
        send_buf: 512 * 1024,
        recv_buf: 512 * 1024,
        ..sim_cfg()
    };
    run(
        5,
        Faults {
            loss: 0.01,
            dup: 0.0,
            delay: 20 * MS,
            jitter: 5 * MS,
        },
        MB,
        cf,
    );
}

/// Loss × delay, for each congestion controller with SACK on and off.
#[test]
fn sim_loss_delay_matrix() {
    for (k, (cc, sack)) in [
        (CcAlgo::Cubic, true),
        (CcAlgo::Cubic, false),
        (CcAlgo::NewReno, true),
        (CcAlgo::NewReno, false),
    ]
    .into_iter()
    .enumerate()
    {
        for (i, loss) in [0.0, 0.01, 0.05, 0.10].into_iter().enumerate() {
            for (j, delay) in [MS, 20 * MS, 100 * MS].into_iter().enumerate() {
                let seed = 1000 + (k * 100 + i * 10 + j) as u64;
                run(
                    seed,
                    Faults {
                        loss,
                        dup: 0.01,
                        delay,
                        jitter: delay / 2,
                    },
                    256 * 1024,
                    Config {
                        cc,
                        sack,
                        ..sim_cfg()
                    },
                );
            }
        }
    }
}

#[test]
fn sim_ten_percent_loss_1mb_each_way() {
    run(
        31337,
        Faults {
            loss: 0.10,
            dup: 0.02,
            delay: 10 * MS,
            jitter: 10 * MS,
        },
        MB,
        sim_cfg(),
    );
}

mod random {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Random seeds, fault rates, delays and option sets: always
        /// byte-exact, never stalled.
        #[test]
        fn sim_random_faults_and_options(
            seed in any::<u64>(),
            loss in 0.0f64..0.12,
            dup in 0.0f64..0.08,
            delay in 1u64..40,
            jitter in 0u64..15,
            opts in 0u8..32,
            bufk in 2usize..70,
        ) {
            let cf = Config {
                window_scale: opts & 1 != 0,
                timestamps: opts & 2 != 0,
                sack: opts & 4 != 0,
                nodelay: opts & 8 != 0,
                mss: if opts & 16 != 0 { 536 } else { 1460 },
                cc: if seed & 1 != 0 { CcAlgo::Cubic } else { CcAlgo::NewReno },
                send_buf: bufk * 1024,
                recv_buf: bufk * 1024,
                max_retries: 30,
                ..sim_cfg()
            };
            run(seed, Faults { loss, dup, delay: delay * MS, jitter: jitter * MS }, 96 * 1024, cf);
        }

        /// Extremes: up to 30% loss, tiny buffers and segments.
        #[test]
        fn sim_random_extreme(
            seed in any::<u64>(),
            loss in 0.0f64..0.3,
            dup in 0.0f64..0.2,
            delay in 0u64..50,
            jitter in 0u64..50,
            opts in 0u8..16,
            buf in 512usize..8192,
            mss in 64u16..1460,
        ) {
            let cf = Config {
                window_scale: opts & 1 != 0,
                timestamps: opts & 2 != 0,
                sack: opts & 4 != 0,
                nodelay: opts & 8 != 0,
                mss,
                cc: if seed & 1 != 0 { CcAlgo::Cubic } else { CcAlgo::NewReno },
                send_buf: buf,
                recv_buf: buf,
                max_retries: 60,
                syn_retries: 60,
                ..sim_cfg()
            };
            run(seed, Faults { loss, dup, delay: delay * MS, jitter: jitter * MS }, 32 * 1024, cf);
        }
    }
}
