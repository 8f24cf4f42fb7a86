//! `lazynet-lab bench tcp-instructions`: instructions per TCP round trip and
//! per byte, counted by callgrind, for lazynet (fast paths on and off) and
//! smoltcp.
//!
//! Each figure comes from two runs of this program under
//! `valgrind --tool=callgrind`, one doing N units of work and one 2N, both
//! ends of the connection in one thread (`bench tcp-rr-single`,
//! `bench tcp-bulk-single`); the difference divided by N removes set-up and
//! tear-down. Instruction counts do not depend on the machine's load, so
//! one run of each is enough.
//!
//! **Owns:** its callgrind output files (removed after reading).
//! **May not touch:** the workloads themselves ([`super::tcp`]'s
//! single-thread runs).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context};

/// One measured series.
struct Series {
    workload: &'static str,
    stack: &'static str,
    fast_path: bool,
    units: u64,
    /// Instructions of the runs of `units` and of twice as many.
    ir: [u64; 2],
}

impl Series {
    fn per_unit(&self) -> f64 {
        self.ir[1].saturating_sub(self.ir[0]) as f64 / self.units as f64
    }
}

/// What one unit of a workload is, and the single-thread command doing it.
struct Workload {
    /// The unit ("round-trip", "byte").
    name: &'static str,
    /// The `bench` subcommand.
    cmd: &'static str,
    /// Its option for the number of units.
    flag: &'static str,
    /// Units of the smaller run.
    units: u64,
}

/// The series of every workload: (stack, fast path, label in the figure).
const STACKS: [(&str, bool, &str); 3] = [
    ("lazynet", true, "lazynet"),
    ("lazynet", false, "lazynet, fast path off"),
    ("smoltcp", true, "smoltcp"),
];

/// Instructions callgrind counted for one run of `args` (this program).
fn callgrind(args: &[String]) -> anyhow::Result<u64> {
    let exe = std::env::current_exe().context("cannot find our own binary")?;
    let dir = std::env::temp_dir().join(format!("lazynet-cg-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let out = dir.join("callgrind.out");
    let st = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&exe)
        .args(args)
        .output()
        .context("running valgrind (install it: apt-get install valgrind)")?;
    if !st.status.success() {
        bail!(
            "valgrind {:?} failed: {}",
            args,
            String::from_utf8_lossy(&st.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
    }
    let text = std::fs::read_to_string(&out)?;
    let _ = std::fs::remove_dir_all(&dir);
    let total = callgrind_total(&text).context("no summary line in callgrind's output")?;
    // The TSC calibration spins for a span of wall-clock time, so its count
    // follows how fast valgrind ran, not the work measured.
    Ok(total.saturating_sub(callgrind_inclusive(&text, CALIBRATION)))
}

/// The function whose instructions [`callgrind`] leaves out.
const CALIBRATION: &str = "TscClock::calibrate";

/// Instructions spent in calls to functions whose name contains `callee`
/// (inclusive of what they call), from a callgrind output file: the cost
/// line after each `calls=` line whose `cfn=` names it. Names may be
/// compressed (`(id) name` the first time, `(id)` after).
pub(crate) fn callgrind_inclusive(text: &str, callee: &str) -> u64 {
    /// Whether the function `spec` names matches, remembering compressed ids.
    fn named<'a>(ids: &mut HashMap<&'a str, bool>, spec: &'a str, callee: &str) -> bool {
        match spec.strip_prefix('(').and_then(|r| r.split_once(')')) {
            Some((id, name)) if !name.trim().is_empty() => {
                let m = name.contains(callee);
                ids.insert(id, m);
                m
            }
            Some((id, _)) => ids.get(id).copied().unwrap_or(false),
            None => spec.contains(callee),
        }
    }
    let mut ids = HashMap::new();
    let (mut callee_now, mut cost_next, mut total) = (false, false, 0u64);
    for l in text.lines() {
        if let Some(spec) = l.strip_prefix("cfn=") {
            callee_now = named(&mut ids, spec, callee);
        } else if let Some(spec) = l.strip_prefix("fn=") {
            named(&mut ids, spec, callee);
        } else if l.starts_with("calls=") {
            cost_next = true;
        } else if cost_next {
            cost_next = false;
            if callee_now {
                total += l
                    .split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    total
}

/// The instruction count of a callgrind output file's `summary:` (or
/// `totals:`) line.
pub(crate) fn callgrind_total(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Measures every series and writes `tcp-instructions.{csv,txt,png}`.
pub fn run(round_trips: u64, bytes: u64, out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    let workloads = [
        Workload {
            name: "round-trip",
            cmd: "tcp-rr-single",
            flag: "--count",
            units: round_trips,
        },
        Workload {
            name: "byte",
            cmd: "tcp-bulk-single",
            flag: "--bytes",
            units: bytes,
        },
    ];
    let mut series = Vec::new();
    for w in &workloads {
        for &(stack, fast_path, _) in &STACKS {
            let args = |n: u64| -> Vec<String> {
                [
                    "bench",
                    w.cmd,
                    w.flag,
                    &n.to_string(),
                    "--stack",
                    stack,
                    "--fast-path",
                    if fast_path { "on" } else { "off" },
                ]
                .map(String::from)
                .into()
            };
            let s = Series {
                workload: w.name,
                stack,
                fast_path,
                units: w.units,
                ir: [callgrind(&args(w.units))?, callgrind(&args(2 * w.units))?],
            };
            println!(
                "{} {stack} fast path {}: {:.3} instructions per {}",
                w.name,
                if fast_path { "on" } else { "off" },
                s.per_unit(),
                w.name
            );
            series.push(s);
        }
    }
    let mut csv =
        String::from("workload,stack,fast_path,units,instructions_n,instructions_2n,per_unit\n");
    for s in &series {
        writeln!(
            csv,
            "{},{},{},{},{},{},{:.3}",
            s.workload,
            s.stack,
            if s.fast_path { "on" } else { "off" },
            s.units,
            s.ir[0],
            s.ir[1],
            s.per_unit()
        )?;
    }
    std::fs::write(out.join("tcp-instructions.csv"), &csv)?;
    let get = |w: &str, st: &str, f: bool| {
        series
            .iter()
            .find(|s| s.workload == w && s.stack == st && s.fast_path == f)
            .map_or(f64::NAN, Series::per_unit)
    };
    let mut txt = crate::infra::report::txt_head(&crate::infra::report::command_line());
    writeln!(
        txt,
        "method: valgrind --tool=callgrind on `lazynet-lab bench tcp-rr-single --count N` and `tcp-bulk-single --bytes B`, N and 2N (B and 2B); (Ir(2N) - Ir(N)) / N, each Ir without the clock's calibration spin (wall-clock bound)"
    )?;
    writeln!(
        txt,
        "1-byte request/response round trip (both ends: 2 segments out, 2 in): lazynet {:.0} (fast path off {:.0}), smoltcp {:.0} instructions",
        get("round-trip", "lazynet", true),
        get("round-trip", "lazynet", false),
        get("round-trip", "smoltcp", true)
    )?;
    writeln!(
        txt,
        "bulk transfer, per byte moved (both ends): lazynet {:.3} (fast path off {:.3}), smoltcp {:.3} instructions",
        get("byte", "lazynet", true),
        get("byte", "lazynet", false),
        get("byte", "smoltcp", true)
    )?;
    print!("{txt}");
    std::fs::write(out.join("tcp-instructions.txt"), &txt)?;
    let bars = |w: &str| -> Vec<(String, Vec<f64>)> {
        STACKS
            .iter()
            .map(|&(st, f, label)| (label.to_string(), vec![get(w, st, f)]))
            .collect()
    };
    let (rr, per_byte) = (bars("round-trip"), bars("byte"));
    let (c_rr, c_byte) = (
        vec!["1-byte round trip".to_string()],
        vec!["bulk".to_string()],
    );
    crate::infra::plot::figure(
        &out.join("tcp-instructions.png"),
        &[
            crate::infra::plot::Panel::Bars {
                title: "Instructions per request/response round trip",
                x_label: "",
                y_label: "instructions",
                categories: &c_rr,
                series: &rr,
            },
            crate::infra::plot::Panel::Bars {
                title: "Instructions per byte moved",
                x_label: "",
                y_label: "instructions per byte",
                categories: &c_byte,
                series: &per_byte,
            },
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inclusive_cost_of_a_callee_with_compressed_and_plain_names() {
        let text = "\
summary: 1000
fn=(1) main
cfn=(2) lazynet::sched::clock::TscClock::calibrate
calls=1 10
12 300
cfn=(3) work
calls=5 20
13 500
fn=(4) other
cfn=(2)
calls=1 11
14 40
cfn=lazynet::sched::clock::TscClock::calibrate
calls=1 12
15 7
";
        assert_eq!(callgrind_total(text), Some(1000));
        assert_eq!(callgrind_inclusive(text, CALIBRATION), 347);
        assert_eq!(callgrind_inclusive(text, "work"), 500);
        assert_eq!(callgrind_inclusive(text, "absent"), 0);
    }
}
