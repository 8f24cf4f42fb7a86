//! What every result file says about its run, small statistics, the
//! `--verbose` switch, and `lazynet-lab report`: the `NAME.{csv,txt,png}`
//! of a benchmark that a script runs (criterion benches, the curl run over
//! TAP), so that every folder under `results/` has the same three files.
//!
//! **Owns:** the head of every `NAME.txt` (machine, commit, date) and the
//! files `report` writes. **May not touch:** the numbers it reports.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, Context};

static VERBOSE: AtomicBool = AtomicBool::new(false);

/// `--verbose`: diagnostics (counters, stalls) on stderr.
pub fn set_verbose(on: bool) {
    VERBOSE.store(on, Ordering::Relaxed);
}

/// Whether `--verbose` was given.
/// Prints a progress line on stderr (with a time stamp) when verbose.
pub fn progress(what: &str) {
    if verbose() {
        eprintln!("{} {what}", crate::infra::report::clock());
    }
}

fn clock() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    format!("[{:.1}]", t % 1000.0)
}

pub fn verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}

/// The lines that head a result file: the machine (CPUs, model, kernel),
/// the commit measured (`git describe`, `-dirty` if the sources had
/// changes) and the date (UTC).
pub fn machine_line() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let run = |cmd: &str, args: &[&str]| {
        std::process::Command::new(cmd)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| "unknown".into())
    };
    // `-dirty` if the sources differ from the commit; results/, which
    // these runs write, does not count.
    let dirty = std::process::Command::new("git")
        .args(["diff", "--quiet", "HEAD", "--", ".", ":(exclude)results"])
        .status()
        .is_ok_and(|s| !s.success());
    let commit =
        run("git", &["describe", "--always", "--abbrev=10"]) + if dirty { "-dirty" } else { "" };
    let date = run("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]);
    format!(
        "machine: {} CPUs, {cpu}, kernel {}\ncommit: {commit}\ndate: {date}\n",
        lazynet::sys::cpus_online(),
        kernel.trim()
    )
}

/// The median of `v` (the upper one of an even count); NaN if empty.
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[s.len() / 2]
}

/// This run's command: the program by its name (not the path it was
/// started from) and its arguments.
pub fn command_line() -> String {
    std::iter::once("lazynet-lab".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The head of every `NAME.txt`: `command: COMMAND`, then
/// [`machine_line`] (machine, commit, date).
pub fn txt_head(command: &str) -> String {
    format!("command: {command}\n{}", machine_line())
}

/// Writes `NAME.txt`: [`txt_head`], then `notes`.
fn write_txt(out: &Path, name: &str, command: &str, notes: &str) -> anyhow::Result<()> {
    let txt = format!("{}\n{notes}", txt_head(command));
    std::fs::write(out.join(format!("{name}.txt")), txt)?;
    Ok(())
}

/// One measurement in criterion's output: the benchmark's id, the middle
/// estimate of its time (ns) and of its throughput, with its unit.
#[derive(Debug, PartialEq)]
struct Estimate {
    id: String,
    ns: f64,
    thrpt: Option<(f64, String)>,
}

/// Parses criterion's human output: `ID time: [lo mid hi]` (the id may be
/// on the line before) and the `thrpt: [lo mid hi]` line after it. The
/// "change" lines of a repeated run are skipped.
fn parse_criterion(text: &str) -> Vec<Estimate> {
    let mid = |rest: &str| -> Option<(f64, String)> {
        let inner = rest.trim().strip_prefix('[')?.strip_suffix(']')?;
        let f: Vec<&str> = inner.split_whitespace().collect();
        // lo unit mid unit hi unit
        let (v, unit) = (f.get(2)?.parse::<f64>().ok()?, f.get(3)?.to_string());
        Some((v, unit))
    };
    let to_ns = |v: f64, unit: &str| match unit {
        "ps" => Some(v / 1000.0),
        "ns" => Some(v),
        "µs" | "us" => Some(v * 1e3),
        "ms" => Some(v * 1e6),
        "s" => Some(v * 1e9),
        _ => None,
    };
    let mut out: Vec<Estimate> = Vec::new();
    let mut pending_id: Option<String> = None;
    let mut last_was_time = false;
    for line in text.lines() {
        let t = line.trim();
        if let Some(i) = t.find("time:") {
            let id = t[..i].trim();
            let id = if id.is_empty() {
                pending_id.take()
            } else {
                Some(id.to_string())
            };
            last_was_time = false;
            let Some(id) = id else { continue };
            if let Some((v, u)) = mid(&t[i + 5..]) {
                if let Some(ns) = to_ns(v, &u) {
                    out.push(Estimate {
                        id,
                        ns,
                        thrpt: None,
                    });
                    last_was_time = true;
                }
            }
        } else if let Some(rest) = t.strip_prefix("thrpt:") {
            if last_was_time {
                if let (Some(e), Some(m)) = (out.last_mut(), mid(rest)) {
                    e.thrpt = Some(m);
                }
            }
            last_was_time = false;
        } else if !t.is_empty() && !t.contains(' ') && t.contains('/') {
            // A long id on a line of its own.
            pending_id = Some(t.to_string());
            last_was_time = false;
        } else {
            last_was_time = false;
        }
    }
    out
}

/// Criterion's throughput units that count elements, and the ns per
/// element of 1 unit/s.
const PER_ELEM_NS: [(&str, f64); 3] = [("Melem/s", 1e3), ("Kelem/s", 1e6), ("elem/s", 1e9)];

/// `lazynet-lab report criterion`: criterion's output in `raw` becomes
/// `NAME.csv` (one row per benchmark), `NAME.txt` and `NAME.png` (time per
/// benchmark; throughput beside it when the bench reports one).
pub fn criterion(name: &str, raw: &Path, command: &str, out: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(raw).with_context(|| format!("{}", raw.display()))?;
    let est = parse_criterion(&text);
    if est.is_empty() {
        bail!("no criterion results in {}", raw.display());
    }
    std::fs::create_dir_all(out)?;
    let mut csv = String::from("benchmark,time_ns,throughput,throughput_unit\n");
    let mut notes = String::new();
    for e in &est {
        let (csv_thrpt, note_thrpt) = match &e.thrpt {
            Some((t, u)) => (format!("{t},{u}"), format!("   {t} {u}")),
            None => (",".to_string(), String::new()),
        };
        writeln!(csv, "{},{:.4},{csv_thrpt}", e.id, e.ns)?;
        writeln!(notes, "{:<40} {:>12.3} ns{note_thrpt}", e.id, e.ns)?;
    }
    std::fs::write(out.join(format!("{name}.csv")), csv)?;
    write_txt(out, name, command, &notes)?;
    // Ids `group/impl/param` are grouped by param (x) and impl (series).
    let key = |id: &str| -> (String, String) {
        let p: Vec<&str> = id.split('/').collect();
        match p.len() {
            0 | 1 => (String::new(), p.join("/")),
            2 => (p[1].to_string(), p[0].to_string()),
            _ => (p[p.len() - 1].to_string(), p[1..p.len() - 1].join("/")),
        }
    };
    let grid_of = |f: &dyn Fn(&Estimate) -> f64| {
        let rows: Vec<(String, String, f64)> = est
            .iter()
            .map(|e| {
                let (c, n) = key(&e.id);
                (c, n, f(e))
            })
            .collect();
        grid(&rows)
    };
    // Benchmarks that count elements differ in how many an iteration
    // handles: compare the time per element, not per iteration.
    let per_elem = |e: &Estimate| {
        let (v, u) = e.thrpt.as_ref()?;
        let (_, ns) = PER_ELEM_NS.iter().find(|(unit, _)| unit == u)?;
        (*v > 0.0).then(|| ns / v)
    };
    let elems = est.iter().all(|e| per_elem(e).is_some());
    let (cats, time) = if elems {
        grid_of(&|e| per_elem(e).unwrap_or(f64::NAN))
    } else {
        grid_of(&|e| e.ns)
    };
    let (_, thrpt) = grid_of(&|e| e.thrpt.as_ref().map_or(f64::NAN, |t| t.0));
    let t_title = if elems {
        format!("{name}: time per element")
    } else {
        format!("{name}: time per iteration")
    };
    let h_title = format!("{name}: throughput");
    let mut panels = vec![crate::infra::plot::Panel::Bars {
        title: &t_title,
        x_label: "",
        y_label: "ns",
        categories: &cats,
        series: &time,
    }];
    let unit = est
        .iter()
        .find_map(|e| e.thrpt.as_ref().map(|t| t.1.clone()))
        .unwrap_or_default();
    if !unit.is_empty() {
        panels.push(crate::infra::plot::Panel::Bars {
            title: &h_title,
            x_label: "",
            y_label: &unit,
            categories: &cats,
            series: &thrpt,
        });
    }
    crate::infra::plot::figure(&out.join(format!("{name}.png")), &panels)
}

/// Grouped bars from `(category, series, value)` rows: the categories and
/// the series in the order they first appear, and per series the median of
/// its values in each category (NaN, no bar, where it has none).
fn grid(rows: &[(String, String, f64)]) -> (Vec<String>, Vec<(String, Vec<f64>)>) {
    let mut cats: Vec<String> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for (c, n, _) in rows {
        if !cats.contains(c) {
            cats.push(c.clone());
        }
        if !names.contains(n) {
            names.push(n.clone());
        }
    }
    let series = names
        .into_iter()
        .map(|n| {
            let v = cats
                .iter()
                .map(|c| {
                    let xs: Vec<f64> = rows
                        .iter()
                        .filter(|(rc, rn, _)| rc == c && *rn == n)
                        .map(|r| r.2)
                        .collect();
                    median(&xs)
                })
                .collect();
            (n, v)
        })
        .collect();
    (cats, series)
}

/// `lazynet-lab report bars`: a CSV a script wrote, `NAME.csv` in `out`,
/// gets its `NAME.txt` (command, machine, commit, date, then the notes
/// file) and `NAME.png`: the median of column `value` per (`category`,
/// `series`), as grouped bars.
pub fn bars(
    name: &str,
    out: &Path,
    command: &str,
    notes: Option<&Path>,
    (category, series_col, value): (&str, &str, &str),
    (title, unit): (&str, &str),
) -> anyhow::Result<()> {
    let path = out.join(format!("{name}.csv"));
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().context("empty CSV")?.split(',').collect();
    let col = |c: &str| {
        header
            .iter()
            .position(|h| *h == c)
            .with_context(|| format!("no column {c:?} in {}", path.display()))
    };
    let (ci, si, vi) = (col(category)?, col(series_col)?, col(value)?);
    let mut rows: Vec<(String, String, f64)> = Vec::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        let (Some(c), Some(s), Some(v)) = (f.get(ci), f.get(si), f.get(vi)) else {
            continue;
        };
        let Ok(v) = v.parse::<f64>() else { continue };
        rows.push((c.to_string(), s.to_string(), v));
    }
    if rows.is_empty() {
        bail!("no values in column {value:?} of {}", path.display());
    }
    let (cats, series) = grid(&rows);
    let notes = match notes {
        Some(p) => std::fs::read_to_string(p).with_context(|| format!("{}", p.display()))?,
        None => String::new(),
    };
    write_txt(out, name, command, &notes)?;
    crate::infra::plot::bar_chart(
        &out.join(format!("{name}.png")),
        title,
        category,
        unit,
        &cats,
        &series,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn criterion_output_is_parsed() {
        let text = "\
checksum/lazynet/64     time:   [4.3711 ns 4.3822 ns 4.3983 ns]
                        thrpt:  [13.552 GiB/s 13.601 GiB/s 13.636 GiB/s]
checksum/internet-checksum/64
                        time:   [4.3018 ns 4.3105 ns 4.3208 ns]
                        thrpt:  [13.795 GiB/s 13.828 GiB/s 13.856 GiB/s]
classify/spread/10      time:   [35.496 µs 35.551 µs 35.626 µs]
                        thrpt:  [114.97 Melem/s 115.21 Melem/s 115.39 Melem/s]
                        time:   [+1.1889% +1.5777% +1.9820%] (p = 0.00 < 0.05)
                        thrpt:  [−1.9435% −1.5532% −1.1749%]
";
        let e = parse_criterion(text);
        assert_eq!(e.len(), 3, "{e:?}");
        assert_eq!(e[0].id, "checksum/lazynet/64");
        assert_eq!(e[0].ns, 4.3822);
        assert_eq!(e[0].thrpt, Some((13.601, "GiB/s".to_string())));
        assert_eq!(e[1].id, "checksum/internet-checksum/64");
        assert_eq!(e[2].id, "classify/spread/10");
        assert_eq!(e[2].ns, 35_551.0);
        assert_eq!(e[2].thrpt, Some((115.21, "Melem/s".to_string())));
    }

    #[test]
    fn grid_keeps_first_appearance_order_and_takes_medians() {
        let row = |c: &str, s: &str, v: f64| (c.to_string(), s.to_string(), v);
        let (cats, series) = grid(&[
            row("64", "b", 1.0),
            row("64", "a", 5.0),
            row("64", "a", 3.0),
            row("1500", "a", 7.0),
        ]);
        assert_eq!(cats, ["64", "1500"]);
        assert_eq!(series[0].0, "b");
        assert_eq!(series[0].1[0], 1.0);
        assert!(series[0].1[1].is_nan());
        assert_eq!(series[1], ("a".to_string(), vec![5.0, 7.0]));
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 3.0);
        assert!(median(&[]).is_nan());
    }
}
