//! What the experiments share: the options ([`ExpOpts`]), the results
//! directory and its files ([`Results`]: `NAME.csv`, `NAME.txt` with the
//! command, machine, date, modes and cores, `NAME.png`), the progress
//! display ([`progress`]), the shape checks that `--quick` turns into a
//! pass/fail for CI and their re-runs ([`Checks`], [`rejudged`]), a
//! thread's weight on a shared machine ([`boost`]) and its share of its
//! core ([`OnCpu`], [`QUIET`]), and the fixed work a server spends per
//! request ([`work`], [`busy_for`]).
//!
//! **May not touch:** the stack's internals; experiments drive lazynet only
//! through its public API, as a user program would. Where each thread runs
//! is [`super::cpus`]'s. Every load is bounded in count and time.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use lazynet::stack::ReceiveMode;

use super::cpus::Role;

/// Options every experiment takes.
#[derive(Clone, Debug)]
pub struct ExpOpts {
    /// The reduced run for CI (under a minute), with shape checks that fail
    /// the command when the qualitative result is not there.
    pub quick: bool,
    /// Output directory (`results/NAME` by default).
    pub out: PathBuf,
    /// Modes to run (default: all of [`ReceiveMode::ALL`]).
    pub modes: Vec<ReceiveMode>,
    /// Leave out the Linux series (e.g. without root).
    pub no_linux: bool,
}

impl ExpOpts {
    /// True if `mode` was asked for.
    fn wants(&self, mode: ReceiveMode) -> bool {
        self.modes.is_empty() || self.modes.contains(&mode)
    }

    /// The modes asked for, in the order results list them.
    pub fn modes(&self) -> Vec<ReceiveMode> {
        ReceiveMode::ALL
            .into_iter()
            .filter(|&m| self.wants(m))
            .collect()
    }

    /// True if the Linux series should run: asked for, and we are root (it
    /// needs namespaces). Under `CI=true` a missing root is an error, never
    /// a silent skip.
    pub fn linux(&self) -> anyhow::Result<bool> {
        if self.no_linux {
            return Ok(false);
        }
        if lazynet::sys::is_root() {
            return Ok(true);
        }
        if std::env::var("CI").as_deref() == Ok("true") {
            bail!("the Linux series needs root (CI=true: not skipping)");
        }
        eprintln!("skipped: Linux series needs root");
        Ok(false)
    }
}

/// Nice −20 for the calling thread (root; best effort). On a shared
/// machine other processes would otherwise take a varying part of the
/// host's and the generator's cores (a host thread can lose most of its
/// core while others compile: docs/PERFORMANCE.md), and the curves would
/// show their load instead of ours. Under CFS a nice −20 thread outweighs a
/// nice-0 one 87:1, so it keeps its core almost entirely, while the others
/// still progress (unlike SCHED_FIFO, no hard starvation). Every point is
/// bounded in time, so the boost is too.
pub fn boost() {
    let _ = lazynet::sys::set_thread_nice(-20);
}

/// A progress bar over `len` steps (points of a sweep), drawn on stderr.
pub fn progress(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if let Ok(style) =
        ProgressStyle::with_template("{msg:>24} [{bar:30}] {pos}/{len} ({elapsed}, eta {eta})")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(500));
    bar
}

/// The files of one experiment run.
pub struct Results {
    dir: PathBuf,
    name: &'static str,
    header: &'static str,
    rows: Vec<String>,
    notes: String,
}

impl Results {
    /// Results of experiment `name` into `dir`, CSV columns `header`
    /// (comma-separated, no newline).
    pub fn new(dir: &Path, name: &'static str, header: &'static str) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(Results {
            dir: dir.to_path_buf(),
            name,
            header,
            rows: Vec::new(),
            notes: String::new(),
        })
    }

    /// Adds a CSV row (fields already formatted, comma-separated); prints it.
    pub fn row(&mut self, row: String) {
        println!("  {row}");
        self.rows.push(row);
    }

    /// Adds a line to the summary (`NAME.txt`); prints it.
    pub fn note(&mut self, line: impl AsRef<str>) {
        println!("{}", line.as_ref());
        self.notes.push_str(line.as_ref());
        self.notes.push('\n');
    }

    /// The path of `NAME.EXT` in the results directory.
    pub fn path(&self, ext: &str) -> PathBuf {
        self.dir.join(format!("{}.{ext}", self.name))
    }

    /// Writes `NAME.csv` and `NAME.txt` (the command line, machine, date,
    /// `opts`, then the notes).
    pub fn write(&self, opts: &ExpOpts) -> anyhow::Result<()> {
        let mut csv = String::new();
        csv.push_str(self.header);
        csv.push('\n');
        for r in &self.rows {
            csv.push_str(r);
            csv.push('\n');
        }
        std::fs::write(self.path("csv"), csv)?;
        let mut txt = crate::infra::report::txt_head(&crate::infra::report::command_line());
        let _ = writeln!(
            txt,
            "quick: {}; modes: {}; host CPU {}, load CPU {}",
            opts.quick,
            opts.modes()
                .iter()
                .map(|m| m.name())
                .collect::<Vec<_>>()
                .join(","),
            Role::Server.cpu(),
            Role::Client.cpu()
        );
        txt.push('\n');
        txt.push_str(&self.notes);
        std::fs::write(self.path("txt"), txt)?;
        Ok(())
    }
}

/// Shape checks: in `--quick` runs a failed check fails the command (CI);
/// in full runs every check is reported as a goal met or missed.
///
/// Some claims hold only on a run that kept its premise (both cores to
/// itself, no vCPU stolen, releases seen within the declared jitter): such a
/// claim is [`Checks::judge`]d with `None` when the premise failed, and
/// reported as not judged, with why. A quick run that leaves a claim
/// unjudged fails with [`Unjudged`], and its driver ([`rejudged`]) runs
/// the experiment again, at most twice: a claim met in any attempt is
/// settled; one never judged fails the command, named. A quick run that
/// judged nothing at all fails too.
#[derive(Default)]
pub struct Checks {
    failed: Vec<String>,
    lines: Vec<String>,
    judged: usize,
    /// Claims not judged in this attempt: (key, text).
    unjudged: Vec<(String, String)>,
}

/// Keys of the claims met in an earlier attempt of this process
/// ([`rejudged`]).
static SETTLED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// A quick run left claims unjudged (see [`Checks`]): their texts.
#[derive(Debug)]
pub struct Unjudged(pub Vec<String>);

impl std::fmt::Display for Unjudged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "claims not judged: {}", self.0.join("; "))
    }
}

impl std::error::Error for Unjudged {}

impl Checks {
    /// Records `what`, met if `ok`.
    pub fn check(&mut self, ok: bool, what: impl Into<String>) {
        let what = what.into();
        self.judged += 1;
        self.lines
            .push(format!("{} {what}", if ok { "met:   " } else { "MISSED:" }));
        if !ok {
            self.failed.push(what);
        }
    }

    /// Records the claim `key` (`what`): met or missed as `verdict` says,
    /// or, with `None`, not judged because `why` (its premise failed).
    pub fn judge(
        &mut self,
        key: impl Into<String>,
        verdict: Option<bool>,
        what: impl Into<String>,
        why: &str,
    ) {
        let (key, what) = (key.into(), what.into());
        match verdict {
            Some(ok) => {
                if ok {
                    SETTLED.lock().map(|mut v| v.push(key)).ok();
                }
                self.check(ok, what);
            }
            None => {
                self.lines.push(format!("not judged ({why}): {what}"));
                self.unjudged.push((key, format!("{what} ({why})")));
            }
        }
    }

    /// [`Checks::judge`] in a full run; in a quick run, `what` is reported
    /// as a measurement, not a claim: for claims whose premise (no vCPU
    /// stolen, every wake-up within the declared jitter) a two-second run
    /// on this guest seldom keeps — it loses part of its vCPU every few
    /// seconds (docs/PERFORMANCE.md) — so that three quick attempts would
    /// seldom judge them.
    pub fn judge_in_full_runs(
        &mut self,
        quick: bool,
        key: impl Into<String>,
        verdict: Option<bool>,
        what: impl Into<String>,
        why: &str,
    ) {
        if quick {
            self.lines
                .push(format!("measured (judged in full runs): {}", what.into()));
        } else {
            self.judge(key, verdict, what, why);
        }
    }

    /// Writes the checks into `res`'s notes; in a quick run, fails if any
    /// check failed, if nothing was judged, or (with [`Unjudged`]) if a
    /// claim is still unjudged that no earlier attempt settled.
    pub fn finish(self, res: &mut Results, quick: bool) -> anyhow::Result<()> {
        res.note("goals:");
        for l in &self.lines {
            res.note(format!("  {l}"));
        }
        if !quick {
            return Ok(());
        }
        if !self.failed.is_empty() {
            bail!("shape checks failed: {}", self.failed.join("; "));
        }
        if self.judged == 0 {
            bail!("the run judged nothing");
        }
        let settled = SETTLED.lock().map(|v| v.clone()).unwrap_or_default();
        let open: Vec<String> = self
            .unjudged
            .into_iter()
            .filter(|(k, _)| !settled.contains(k))
            .map(|(_, t)| t)
            .collect();
        if open.is_empty() {
            Ok(())
        } else {
            Err(Unjudged(open).into())
        }
    }
}

/// Runs a quick experiment `run` again, at most twice, while it ends in
/// [`Unjudged`] claims (a stalled machine); any other outcome is final.
/// Claims met in an earlier attempt stay settled. After the third attempt
/// the claims never judged fail the command, named.
pub fn rejudged(quick: bool, mut run: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<()> {
    if !quick {
        return run();
    }
    let mut last = None;
    for attempt in 1..=3 {
        match run() {
            Err(e) if e.is::<Unjudged>() => {
                eprintln!("attempt {attempt}: {e}; running again");
                last = Some(e);
            }
            other => return other,
        }
    }
    Err(last
        .expect("three attempts ended unjudged")
        .context("claims stayed unjudged in three attempts"))
}

/// Work for `ns` of wall time, whatever the machine's speed: the synthetic
/// handlers of the scheduling runs, whose point is the scheduler's order,
/// not the work (a vCPU whose host slows it would make fixed work grow,
/// and a calibration taken in a slow moment would make it shrink).
pub fn busy_for(ns: u64, seed: u64) -> u64 {
    let end = Instant::now() + Duration::from_nanos(ns);
    let mut x = seed;
    while Instant::now() < end {
        x = work(16, x);
    }
    x
}

/// The fixed work a server spends per request or datagram in the
/// experiments (and in their Linux counterparts): `iters` rounds of a
/// xorshift-multiply hash — the same instructions in every mode and in
/// Linux, registers only, no memory traffic, so it costs the same wherever
/// it runs. Returns the hash so the compiler cannot drop it.
#[inline(never)]
pub fn work(iters: u32, seed: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..iters {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
    }
    std::hint::black_box(x)
}

/// A busy-polling thread that was on its CPU for at least this fraction of
/// its wall time had a quiet machine; below it, other programs took its
/// core and timing comparisons mean little.
pub const QUIET: f64 = 0.9;

/// Measures the fraction of wall time the calling thread spends on a CPU.
#[derive(Clone, Copy, Debug)]
pub struct OnCpu {
    wall: std::time::Instant,
    cpu: u64,
}

impl OnCpu {
    /// Starts measuring (call on the measured thread).
    pub fn start() -> Self {
        OnCpu {
            wall: std::time::Instant::now(),
            cpu: lazynet::sys::thread_cpu_ns(),
        }
    }

    /// On-CPU fraction since `start` (call on the same thread).
    pub fn fraction(&self) -> f64 {
        let wall = self.wall.elapsed().as_nanos().max(1) as f64;
        (lazynet::sys::thread_cpu_ns().saturating_sub(self.cpu)) as f64 / wall
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Results in a scratch directory of this process.
    fn scratch(tag: &str) -> Results {
        let dir = std::env::temp_dir().join(format!("lazynet-lab-{tag}-{}", std::process::id()));
        Results::new(&dir, "checks", "x").unwrap()
    }

    /// A quick run's `finish` of `checks`.
    fn finish_quick(checks: Checks) -> anyhow::Result<()> {
        checks.finish(&mut scratch("checks"), true)
    }

    /// One attempt of a quick run: a met check, then claim `key` judged
    /// as `verdict` (`None`: not judged); counts itself in `attempts`.
    fn attempt(attempts: &Cell<u32>, key: &str, verdict: Option<bool>) -> anyhow::Result<()> {
        attempts.set(attempts.get() + 1);
        let mut c = Checks::default();
        c.check(true, "judged");
        c.judge(key, verdict, "the claim", "a stall");
        finish_quick(c)
    }

    #[test]
    fn a_quick_run_that_judged_nothing_fails() {
        let mut c = Checks::default();
        c.judge("nothing-judged", None, "a claim", "a stall");
        let e = finish_quick(c).unwrap_err();
        assert!(e.to_string().contains("judged nothing"), "{e}");
    }

    #[test]
    fn a_claim_left_unjudged_fails_a_quick_run_and_is_reported_in_a_full_one() {
        let mut c = Checks::default();
        c.check(true, "judged");
        c.judge("left-unjudged", None, "the claim", "a stall");
        assert!(finish_quick(c).unwrap_err().is::<Unjudged>());
        let mut c = Checks::default();
        c.check(true, "judged");
        c.judge("left-unjudged-full", None, "the claim", "a stall");
        let mut res = scratch("full");
        c.finish(&mut res, false).unwrap();
        assert!(
            res.notes.contains("not judged (a stall): the claim"),
            "{}",
            res.notes
        );
    }

    #[test]
    fn rejudged_runs_again_at_most_twice_and_names_the_claim_never_judged() {
        let attempts = Cell::new(0);
        let e = rejudged(true, || attempt(&attempts, "never-judged", None)).unwrap_err();
        assert_eq!(attempts.get(), 3);
        let text = format!("{e:#}");
        assert!(
            text.contains("stayed unjudged") && text.contains("the claim (a stall)"),
            "{text}"
        );
    }

    #[test]
    fn a_claim_met_in_a_later_attempt_settles_the_run() {
        let attempts = Cell::new(0);
        rejudged(true, || {
            let verdict = (attempts.get() == 1).then_some(true);
            attempt(&attempts, "settled-later", verdict)
        })
        .unwrap();
        assert_eq!(attempts.get(), 2);
    }

    #[test]
    fn a_missed_claim_is_final_and_not_run_again() {
        let attempts = Cell::new(0);
        let e = rejudged(true, || {
            attempts.set(attempts.get() + 1);
            let mut c = Checks::default();
            c.check(false, "the missed claim");
            finish_quick(c)
        })
        .unwrap_err();
        assert_eq!(attempts.get(), 1);
        assert!(e.to_string().contains("the missed claim"), "{e}");
    }
}
