//! `lazynet-lab bench udp-echo`: UDP echo rate, lazynet on the in-memory
//! wire against Linux UDP sockets on loopback, with the same client pattern
//! (a window of datagrams in flight, each carrying its sequence number and
//! send time), server and client on separate cores
//! ([`crate::infra::cpus::pair`]). Each run measures both, and which goes
//! first alternates from run to run. lazynet's side is
//! `lazynet_cli::echo::run_lazynet`, Linux's
//! [`crate::baseline::loopback::udp_echo`].
//!
//! **Owns:** only its result files. **May not touch:** either side's
//! client pattern (they must stay the same).

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use lazynet_cli::echo::run_lazynet;

use crate::baseline::loopback;
use crate::infra::cpus;
use crate::infra::report::median;

/// `lazynet-lab bench udp-echo`: `runs` runs of lazynet and Linux, the
/// first of the two alternating.
pub fn bench(
    seconds: f64,
    runs: usize,
    window: usize,
    size: usize,
    out: &Path,
) -> anyhow::Result<()> {
    let d = Duration::from_secs_f64(seconds);
    let cp = cpus::pair();
    std::fs::create_dir_all(out)?;
    let mut csv = String::from("impl,run,seconds,window,size,echoes_per_s,p50_us,p99_us,lost\n");
    let (mut lz, mut lx) = (Vec::new(), Vec::new());
    let (mut pz, mut px) = (Vec::new(), Vec::new());
    for run in 0..runs.max(1) {
        let lazynet_run = || run_lazynet(window, size, d, cp).map(|(r, _, _)| r);
        let linux_run = || loopback::udp_echo(window, size, d, cp);
        let (r, l) = if run % 2 == 0 {
            let r = lazynet_run()?;
            (r, linux_run()?)
        } else {
            let l = linux_run()?;
            (lazynet_run()?, l)
        };
        for (name, r) in [("lazynet-wire", &r), ("linux-loopback", &l)] {
            let line = format!(
                "{name},{run},{seconds},{window},{size},{:.0},{:.2},{:.2},{}\n",
                r.rate(),
                r.p(0.5),
                r.p(0.99),
                r.lost
            );
            print!("{line}");
            csv.push_str(&line);
        }
        lz.push(r.rate());
        lx.push(l.rate());
        pz.push(r.p(0.5));
        px.push(l.p(0.5));
    }
    let (mz, mx) = (median(&lz), median(&lx));
    let summary = format!(
        "median echoes/s: lazynet {mz:.0}, linux {mx:.0}, ratio {:.2}x (goal >= 2x)\n",
        mz / mx
    );
    print!("{summary}");
    File::create(out.join("udp-echo.csv"))?.write_all(csv.as_bytes())?;
    let meta = crate::infra::report::txt_head(&crate::infra::report::command_line()) + &summary;
    File::create(out.join("udp-echo.txt"))?.write_all(meta.as_bytes())?;
    let cats: Vec<String> = (1..=lz.len()).map(|r| r.to_string()).collect();
    let rate = [
        ("lazynet, in-memory wire".to_string(), lz),
        ("Linux, loopback".to_string(), lx),
    ];
    let p50 = [
        ("lazynet, in-memory wire".to_string(), pz),
        ("Linux, loopback".to_string(), px),
    ];
    crate::infra::plot::figure(
        &out.join("udp-echo.png"),
        &[
            crate::infra::plot::Panel::Bars {
                title: "UDP echo rate per run",
                x_label: "run",
                y_label: "echoes/s",
                categories: &cats,
                series: &rate,
            },
            crate::infra::plot::Panel::Bars {
                title: "Round trip p50 per run",
                x_label: "run",
                y_label: "us",
                categories: &cats,
                series: &p50,
            },
        ],
    )
}
