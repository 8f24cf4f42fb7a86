//! `lazynet-lab paths`: the latency paper's study of outlining, cloning
//! (function layout) and path-inlining, on lazynet's TCP request/response
//! path (Mosberger et al., "Analysis of Techniques to Improve Protocol
//! Processing Latency", 1996; docs/EXPERIMENTS.md, docs/PERFORMANCE.md §5).
//!
//! **Variants**, all from one source tree. The code variants come from
//! `LAZYNET_LAYOUT` (`crates/lazynet/build.rs`): STD (no layout hints), OUT
//! (rare code outlined into `#[cold] #[inline(never)]` functions), PIN (OUT
//! plus the established connection's input and output paths inlined into
//! their entry points). The layout variants relink a code variant with
//! lld's `--symbol-ordering-file`, derived from callgrind's profile of that
//! very binary: CLO (OUT, bipartite: path functions in call order, then
//! library functions), LIN (OUT, one linear call order), ALL (PIN with
//! CLO's layout), BAD (OUT with every hot function starting at a multiple
//! of 8 KiB, cold code between, so that they collide in any cache of up to
//! 8 KiB per way). Beside them the compiler's own tools: LLVM's hot/cold
//! splitting (HCS, on OUT) and profile-guided optimisation (PGO, on STD,
//! trained on the same round trips), each built in its own target
//! directory because they change every crate's code.
//!
//! **Measures**, per variant, with both ends of the connection in one
//! thread (`bench tcp-rr-single`) and every count from two runs, N and 2N
//! round trips, differenced:
//!
//! - callgrind (`--dump-instr=yes`): instructions per round trip, split by
//!   the application's calls (poll, recv, send) and by protocol direction
//!   (TCP input, TCP output); the hot path — every instruction whose count
//!   grows with N — its size in bytes (lengths from `objdump`) and the
//!   bytes of the 64- and 32-byte cache lines it touches that it never
//!   executes (the paper's Table 5);
//! - cachegrind: I1 and LL misses per round trip, with this machine's
//!   geometry and with the paper's 8 KiB direct-mapped cache with 32-byte
//!   lines;
//! - callgrind on `tcp_segment_cost` (`--toggle-collect`): instructions per
//!   in-order data segment and per pure ACK through `handle_segment`;
//! - time: one-thread round trips (`bench tcp-rr-single`, variants
//!   alternated, pinned to one CPU) and two-core request/response p50
//!   (`bench tcp-rr`, alternated), smoltcp in the same rotation.
//!
//! Every valgrind and build command is printed into `paths.txt`.
//!
//! **Owns:** the variants' builds (`target/paths/`, and `target/release`,
//! which it leaves holding the default build), its temporary profiles and
//! its output directory. **May not touch:** the source tree (the variants
//! come from environment variables and link flags, never edits).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context};

use crate::infra::cpus::Role;
use crate::infra::report::median;

/// Options of one run.
pub struct Opts {
    /// CI: STD and the default build only, fewer round trips and pairs.
    pub quick: bool,
    /// Round trips of the smaller callgrind run.
    pub round_trips: u64,
    /// Alternated timing rounds (each variant once per round).
    pub pairs: usize,
    /// Round trips per one-thread timing run.
    pub timed_round_trips: u64,
    /// Seconds per two-core run.
    pub rr_seconds: f64,
    /// Build HCS and PGO too.
    pub auto: bool,
    /// Output directory.
    pub out: PathBuf,
}

/// How a variant's binary is made.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Build {
    /// `LAZYNET_LAYOUT=code`, default link.
    Code(&'static str),
    /// A code variant relinked with a symbol order.
    Ordered(&'static str, Order),
    /// LLVM's hot/cold splitting on a code variant.
    HotCold(&'static str),
    /// Profile-guided optimisation on a code variant.
    Pgo(&'static str),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Order {
    Bipartite,
    Linear,
    Adversarial,
}

/// One variant: its name in the tables and how it is built.
struct Variant {
    name: &'static str,
    build: Build,
    what: &'static str,
}

const VARIANTS: &[Variant] = &[
    Variant {
        name: "STD",
        build: Build::Code("std"),
        what: "no layout hints",
    },
    Variant {
        name: "OUT",
        build: Build::Code("out"),
        what: "rare code outlined (#[cold] #[inline(never)])",
    },
    Variant {
        name: "CLO",
        build: Build::Ordered("out", Order::Bipartite),
        what: "OUT, bipartite function order (path in call order, then library)",
    },
    Variant {
        name: "LIN",
        build: Build::Ordered("out", Order::Linear),
        what: "OUT, linear function order (call order)",
    },
    Variant {
        name: "PIN",
        build: Build::Code("pin"),
        what: "OUT, input and output paths inlined",
    },
    Variant {
        name: "ALL",
        build: Build::Ordered("pin", Order::Bipartite),
        what: "PIN with CLO's layout",
    },
    Variant {
        name: "BAD",
        build: Build::Ordered("out", Order::Adversarial),
        what: "OUT, hot functions 8 KiB apart (colliding)",
    },
    Variant {
        name: "HCS",
        build: Build::HotCold("out"),
        what: "OUT, LLVM hot/cold splitting",
    },
    Variant {
        name: "PGO",
        build: Build::Pgo("std"),
        what: "STD, profile-guided (trained on the round trips)",
    },
];

/// The harness's trait whose `poll`, `recv` and `send` split a round
/// trip's instructions by call (`bench::tcp::Endpoint`).
const ENDPOINT: &str = "lazynet_lab::bench::tcp::Endpoint";

/// The repository root (the lab is built and run from it).
fn repo_root() -> anyhow::Result<PathBuf> {
    let here = std::env::current_dir()?;
    ensure!(
        here.join("crates/lazynet/build.rs").exists(),
        "run `lazynet-lab paths` from the repository root (it builds the variants)"
    );
    Ok(here)
}

/// Runs `cmd`, failing with its last lines of stderr.
fn run(cmd: &mut Command, log: &mut String) -> anyhow::Result<String> {
    writeln!(log, "  $ {}", show(cmd))?;
    let out = cmd
        .output()
        .with_context(|| format!("running {}", show(cmd)))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(15).collect();
        bail!(
            "{} failed:\n{}",
            show(cmd),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A command as one would type it (environment first).
fn show(cmd: &Command) -> String {
    let mut s = String::new();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            let _ = write!(s, "{}={} ", k.to_string_lossy(), v.to_string_lossy());
        }
    }
    s.push_str(&cmd.get_program().to_string_lossy());
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Where the variants' binaries go.
fn bin_dir(root: &Path) -> PathBuf {
    root.join("target/paths/bin")
}

/// `cargo` building the lab (and the segment-cost example) for code
/// variant `code`, in `target_dir`, with `rustflags` for every crate and
/// `link` for the lab's final link only. Returns the lab's binary.
fn cargo_build(
    root: &Path,
    code: &str,
    target_dir: Option<&Path>,
    rustflags: Option<&str>,
    link: &[String],
    log: &mut String,
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let target = target_dir.map_or_else(
        || std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from),
        Path::to_path_buf,
    );
    let cargo = |args: &[&str]| {
        let mut c = Command::new("cargo");
        c.current_dir(root)
            .env("LAZYNET_LAYOUT", code)
            .args(args)
            .args(["--release", "--quiet"]);
        if let Some(d) = target_dir {
            c.env("CARGO_TARGET_DIR", d);
        }
        if let Some(f) = rustflags {
            c.env("RUSTFLAGS", f);
        }
        c
    };
    // The lab's link arguments apply to its binary alone (`cargo rustc`),
    // so a relink rebuilds only the lab crate.
    let mut lab = cargo(&["rustc", "-p", "lazynet-lab", "--bin", "lazynet-lab"]);
    if !link.is_empty() {
        lab.arg("--").args(link);
    }
    run(&mut lab, log)?;
    run(
        &mut cargo(&["build", "-p", "lazynet", "--example", "tcp_segment_cost"]),
        log,
    )?;
    Ok((
        target.join("release/lazynet-lab"),
        target.join("release/examples/tcp_segment_cost"),
    ))
}

/// A variant's two binaries, copied out of the target directory.
#[derive(Clone)]
struct Bins {
    lab: PathBuf,
    seg: PathBuf,
}

fn keep(root: &Path, name: &str, built: (PathBuf, PathBuf)) -> anyhow::Result<Bins> {
    let dir = bin_dir(root);
    std::fs::create_dir_all(&dir)?;
    let lab = dir.join(format!("lazynet-lab-{name}"));
    let seg = dir.join(format!("tcp_segment_cost-{name}"));
    std::fs::copy(&built.0, &lab).with_context(|| format!("copying {}", built.0.display()))?;
    std::fs::copy(&built.1, &seg)?;
    Ok(Bins { lab, seg })
}

// ---------------------------------------------------------------------
// callgrind

/// Instruction counts of the executable's own code: `Counts<u64>` for one
/// callgrind profile, `Counts<f64>` per round trip (what grows with N).
#[derive(Default)]
struct Counts<T> {
    /// Instructions of the whole run (per round trip: both ends).
    total: T,
    /// Self instructions per instruction address (the executable only).
    at: HashMap<u64, T>,
    /// Per function (mangled name): self and inclusive instructions.
    fns: HashMap<String, (T, T)>,
    /// Calls: (caller, callee) -> (count, lowest call-site address).
    calls: HashMap<(String, String), (T, u64)>,
    /// Lowest address executed in `main` (to find the load bias).
    main_at: Option<u64>,
}

type Profile = Counts<u64>;
type Steady = Counts<f64>;

/// Parses callgrind's output written with `--dump-instr=yes
/// --dump-line=no --compress-strings=no --compress-pos=no`.
fn parse_callgrind(text: &str, exe: &str) -> anyhow::Result<Profile> {
    let mut p = Profile::default();
    let (mut ob, mut func) = (String::new(), String::new());
    let mut callee: Option<(String, u64)> = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("ob=") {
            ob = v.to_string();
        } else if let Some(v) = line.strip_prefix("fn=") {
            func = v.to_string();
        } else if let Some(v) = line.strip_prefix("cfn=") {
            callee = Some((v.to_string(), 0));
        } else if let Some(v) = line.strip_prefix("calls=") {
            let n = v
                .split_whitespace()
                .next()
                .unwrap_or("0")
                .parse()
                .unwrap_or(0);
            if let Some(c) = callee.as_mut() {
                c.1 = n;
            }
        } else if line.starts_with("0x") {
            let mut it = line.split_whitespace();
            let addr =
                u64::from_str_radix(it.next().unwrap_or("0x0").trim_start_matches("0x"), 16)?;
            let ir: u64 = it.next().unwrap_or("0").parse().unwrap_or(0);
            let e = p.fns.entry(func.clone()).or_default();
            if let Some((cf, count)) = callee.take() {
                // The cost line after `calls=`: the call's inclusive cost.
                e.1 += ir;
                let c = p.calls.entry((func.clone(), cf)).or_insert((0, u64::MAX));
                c.0 += count;
                c.1 = c.1.min(addr);
            } else {
                e.0 += ir;
                e.1 += ir;
                if ob.ends_with(exe) {
                    *p.at.entry(addr).or_default() += ir;
                    if func == "main" {
                        p.main_at = Some(p.main_at.map_or(addr, |m: u64| m.min(addr)));
                    }
                }
            }
        }
    }
    p.total = crate::bench::tcp_instructions::callgrind_total(text)
        .context("no totals in callgrind's output")?;
    Ok(p)
}

/// The callgrind command for `args` of `bin`, output in `out`.
fn callgrind_cmd(bin: &Path, out: &Path, extra: &[&str], args: &[String]) -> Command {
    let mut c = Command::new("valgrind");
    c.arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .args([
            "--dump-instr=yes",
            "--dump-line=no",
            "--compress-strings=no",
            "--compress-pos=no",
            "--demangle=no",
        ])
        .args(extra)
        .arg(bin)
        .args(args);
    c
}

fn rr_args(n: u64, stack: &str) -> Vec<String> {
    [
        "bench",
        "tcp-rr-single",
        "--count",
        &n.to_string(),
        "--stack",
        stack,
    ]
    .map(String::from)
    .into()
}

/// Profiles of N and 2N round trips.
fn profile_pair(
    bin: &Path,
    stack: &str,
    n: u64,
    tmp: &Path,
    log: &mut String,
) -> anyhow::Result<[Profile; 2]> {
    let exe = bin
        .file_name()
        .context("binary without a name")?
        .to_string_lossy()
        .into_owned();
    let mut get = |k: u64| -> anyhow::Result<Profile> {
        let out = tmp.join(format!("callgrind.{exe}.{stack}.{k}"));
        run(&mut callgrind_cmd(bin, &out, &[], &rr_args(k, stack)), log)?;
        let p = parse_callgrind(&std::fs::read_to_string(&out)?, &exe)?;
        let _ = std::fs::remove_file(&out);
        Ok(p)
    };
    Ok([get(n)?, get(2 * n)?])
}

fn steady(p: &[Profile; 2], n: u64) -> Steady {
    let d = |a: u64, b: u64| (b as f64 - a as f64) / n as f64;
    let at = p[1]
        .at
        .iter()
        .filter_map(|(&a, &v)| {
            let per = d(p[0].at.get(&a).copied().unwrap_or(0), v);
            (per > 0.5).then_some((a, per))
        })
        .collect();
    let fns = p[1]
        .fns
        .iter()
        .map(|(f, &(s, i))| {
            let (s0, i0) = p[0].fns.get(f).copied().unwrap_or((0, 0));
            (f.clone(), (d(s0, s), d(i0, i)))
        })
        .collect();
    let calls = p[1]
        .calls
        .iter()
        .map(|(k, &(c, site))| {
            let c0 = p[0].calls.get(k).map_or(0, |x| x.0);
            (k.clone(), (d(c0, c), site))
        })
        .collect();
    Steady {
        total: d(p[0].total, p[1].total),
        at,
        fns,
        calls,
        main_at: p[1].main_at,
    }
}

fn demangle(s: &str) -> String {
    format!("{:#}", rustc_demangle::demangle(s))
}

/// Inclusive instructions per round trip of the functions whose demangled
/// name ends with one of `names` (an inlined function has no entry of
/// its own: its cost is its caller's).
fn inclusive(s: &Steady, names: &[&str]) -> f64 {
    s.fns
        .iter()
        .filter(|(f, _)| {
            let d = demangle(f);
            names.iter().any(|n| d.ends_with(n))
        })
        .map(|(_, &(_, i))| i)
        .sum()
}

// ---------------------------------------------------------------------
// Code size of the hot path

/// Instruction lengths of `bin` between `lo` and `hi` (file addresses),
/// from `objdump -d -w`.
fn instruction_lengths(bin: &Path, lo: u64, hi: u64) -> anyhow::Result<HashMap<u64, u64>> {
    let out = Command::new("objdump")
        .args(["-d", "-w"])
        .arg(format!("--start-address={lo:#x}"))
        .arg(format!("--stop-address={hi:#x}"))
        .arg(bin)
        .output()
        .context("running objdump (apt-get install binutils)")?;
    ensure!(out.status.success(), "objdump failed on {}", bin.display());
    let text = String::from_utf8_lossy(&out.stdout);
    let mut len = HashMap::new();
    for l in text.lines() {
        // "  4a1b20:\t48 89 e5             \tmov    %rsp,%rbp"
        let mut f = l.split('\t');
        let (Some(a), Some(bytes)) = (f.next(), f.next()) else {
            continue;
        };
        let Some(a) = a.trim().strip_suffix(':') else {
            continue;
        };
        let Ok(a) = u64::from_str_radix(a, 16) else {
            continue;
        };
        let n = bytes.split_whitespace().count() as u64;
        if n > 0 {
            len.insert(a, n);
        }
    }
    Ok(len)
}

/// A symbol's file address, from `nm`.
fn symbols(bin: &Path) -> anyhow::Result<Vec<(String, u64, u64)>> {
    let out = Command::new("nm")
        .args(["-S", "--defined-only"])
        .arg(bin)
        .output()
        .context("running nm")?;
    ensure!(out.status.success(), "nm failed on {}", bin.display());
    let mut v = Vec::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 4 && matches!(f[2], "t" | "T") {
            if let (Ok(a), Ok(s)) = (u64::from_str_radix(f[0], 16), u64::from_str_radix(f[1], 16)) {
                v.push((f[3].to_string(), a, s));
            }
        } else if f.len() == 3 && matches!(f[1], "t" | "T") {
            if let Ok(a) = u64::from_str_radix(f[0], 16) {
                v.push((f[2].to_string(), a, 0));
            }
        }
    }
    Ok(v)
}

/// The hot path's static size and its cache-line waste.
#[derive(Default, Clone, Copy)]
struct HotCode {
    instructions: usize,
    bytes: u64,
    lines64: usize,
    unused64: f64,
    lines32: usize,
    unused32: f64,
}

fn hot_code(s: &Steady, bin: &Path) -> anyhow::Result<HotCode> {
    let syms = symbols(bin)?;
    let main = syms
        .iter()
        .find(|(n, _, _)| n == "main")
        .context("no main symbol")?
        .1;
    let bias = s.main_at.context("main not seen by callgrind")? - main;
    let addrs: Vec<u64> = s.at.keys().map(|a| a - bias).collect();
    let (lo, hi) = (
        *addrs.iter().min().context("no hot code")?,
        *addrs.iter().max().context("no hot code")? + 16,
    );
    let len = instruction_lengths(bin, lo, hi)?;
    let mut h = HotCode {
        instructions: addrs.len(),
        ..HotCode::default()
    };
    let mut l64 = HashSet::new();
    let mut l32 = HashSet::new();
    for a in &addrs {
        let n = len.get(a).copied().unwrap_or(4);
        h.bytes += n;
        for b in [*a, a + n - 1] {
            l64.insert(b / 64);
            l32.insert(b / 32);
        }
    }
    h.lines64 = l64.len();
    h.lines32 = l32.len();
    h.unused64 = 1.0 - h.bytes as f64 / (h.lines64 as f64 * 64.0);
    h.unused32 = 1.0 - h.bytes as f64 / (h.lines32 as f64 * 32.0);
    Ok(h)
}

// ---------------------------------------------------------------------
// Function order

/// Whether a function is a library function in the paper's sense (used
/// several times along one path): checksum, copies, rings, hashing, the
/// standard library's helpers.
fn is_library(demangled: &str, calls_per_rt: f64) -> bool {
    const LIB: &[&str] = &[
        "checksum",
        "buffer::Ring",
        "mem::ring",
        "keyhash",
        "Hasher",
        "hash",
        "memcpy",
        "memmove",
        "core::",
        "alloc::",
        "std::",
    ];
    calls_per_rt > 4.5 || LIB.iter().any(|l| demangled.contains(l))
}

/// The executable's hot functions in call order: depth first from the
/// round-trip loop, callees in the order of their call sites.
fn call_order(s: &Steady, exe_syms: &HashSet<&str>) -> Vec<String> {
    let hot: HashSet<&String> = s
        .fns
        .iter()
        .filter(|(f, &(own, _))| own > 0.5 && exe_syms.contains(f.as_str()))
        .map(|(f, _)| f)
        .collect();
    let mut children: HashMap<&str, Vec<(u64, &str)>> = HashMap::new();
    for ((caller, callee), &(per, site)) in &s.calls {
        if per > 0.0 {
            children.entry(caller).or_default().push((site, callee));
        }
    }
    for c in children.values_mut() {
        c.sort();
    }
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    let roots: Vec<&String> = {
        let mut r: Vec<&String> = s
            .fns
            .keys()
            .filter(|f| demangle(f).contains("rr_single"))
            .collect();
        r.sort();
        r
    };
    let mut stack: Vec<&str> = roots.iter().rev().map(|s| s.as_str()).collect();
    while let Some(f) = stack.pop() {
        if !seen.insert(f) {
            continue;
        }
        if hot.iter().any(|h| h.as_str() == f) {
            order.push(f.to_string());
        }
        if let Some(c) = children.get(f) {
            for (_, callee) in c.iter().rev() {
                if !seen.contains(callee) {
                    stack.push(callee);
                }
            }
        }
    }
    // Hot functions reached only indirectly: after the rest, by cost.
    let mut rest: Vec<&String> = hot
        .into_iter()
        .filter(|h| !seen.contains(h.as_str()))
        .collect();
    rest.sort_by(|a, b| s.fns[*b].0.total_cmp(&s.fns[*a].0));
    order.extend(rest.into_iter().cloned());
    order
}

/// The symbol-ordering file's lines for `order`.
fn ordering(
    order: Order,
    s: &Steady,
    path_order: &[String],
    syms: &[(String, u64, u64)],
) -> Vec<String> {
    let calls_of = |f: &str| -> f64 {
        s.calls
            .iter()
            .filter(|((_, c), _)| c == f)
            .map(|(_, &(n, _))| n)
            .sum()
    };
    match order {
        Order::Linear => path_order.to_vec(),
        Order::Bipartite => {
            let (lib, path): (Vec<&String>, Vec<&String>) = path_order
                .iter()
                .partition(|f| is_library(&demangle(f), calls_of(f)));
            path.into_iter().chain(lib).cloned().collect()
        }
        Order::Adversarial => {
            // Every hot function starts 8 KiB after the previous one's
            // start (or the next multiple): same sets in an 8 KiB
            // direct-mapped cache and in every cache whose way is at most
            // 8 KiB (this machine's L1I: 32 KiB, 8 ways of 4 KiB). Cold
            // functions fill the gaps.
            const STRIDE: u64 = 8192;
            let size: HashMap<&str, u64> = syms.iter().map(|(n, _, z)| (n.as_str(), *z)).collect();
            let hot: HashSet<&str> = path_order.iter().map(String::as_str).collect();
            let mut cold: Vec<(u64, &str)> = syms
                .iter()
                .filter(|(n, _, z)| *z >= 16 && !hot.contains(n.as_str()))
                .map(|(n, _, z)| (z.div_ceil(16) * 16, n.as_str()))
                .collect();
            cold.sort_unstable();
            cold.dedup_by(|a, b| a.1 == b.1);
            let mut used = vec![false; cold.len()];
            let mut out = Vec::new();
            for f in path_order {
                out.push(f.clone());
                let z = size.get(f.as_str()).copied().unwrap_or(0).div_ceil(16) * 16;
                let mut gap = STRIDE - z % STRIDE;
                // Largest cold function that fits, repeatedly.
                while gap >= 16 {
                    let i = cold.partition_point(|c| c.0 <= gap);
                    let Some(j) = (0..i).rev().find(|&j| !used[j]) else {
                        break;
                    };
                    used[j] = true;
                    gap -= cold[j].0;
                    out.push(cold[j].1.to_string());
                }
            }
            out
        }
    }
}

/// How many consecutive pairs of `order` the linker placed in that order
/// (a check that the ordering file was applied).
fn placed_in_order(bin: &Path, order: &[String]) -> anyhow::Result<(usize, usize)> {
    let addr: HashMap<String, u64> = symbols(bin)?.into_iter().map(|(n, a, _)| (n, a)).collect();
    let found: Vec<u64> = order.iter().filter_map(|f| addr.get(f).copied()).collect();
    let ok = found.windows(2).filter(|w| w[0] < w[1]).count();
    Ok((ok, found.len().saturating_sub(1)))
}

// ---------------------------------------------------------------------
// cachegrind

/// I1 and LL misses per round trip for one cache geometry (`None`: the
/// machine's, as valgrind detects it).
struct Misses {
    i1: f64,
    lli: f64,
    lld: f64,
    geometry: String,
}

fn cachegrind(
    bin: &Path,
    stack: &str,
    n: u64,
    geometry: &[&str],
    tmp: &Path,
    log: &mut String,
) -> anyhow::Result<Misses> {
    let mut counts = Vec::new();
    let mut desc = String::new();
    for k in [n, 2 * n] {
        let out = tmp.join(format!("cachegrind.{k}"));
        let mut c = Command::new("valgrind");
        c.args(["--tool=cachegrind", "--cache-sim=yes"])
            .arg(format!("--cachegrind-out-file={}", out.display()))
            .args(geometry)
            .arg(bin)
            .args(rr_args(k, stack));
        run(&mut c, log)?;
        let text = std::fs::read_to_string(&out)?;
        let _ = std::fs::remove_file(&out);
        let events: Vec<&str> = text
            .lines()
            .find_map(|l| l.strip_prefix("events:"))
            .context("no events line")?
            .split_whitespace()
            .collect();
        let vals: Vec<u64> = text
            .lines()
            .find_map(|l| l.strip_prefix("summary:"))
            .context("no summary line")?
            .split_whitespace()
            .map(|v| v.parse().unwrap_or(0))
            .collect();
        let get = |e: &str| events.iter().position(|x| *x == e).map_or(0, |i| vals[i]);
        counts.push([get("I1mr"), get("ILmr"), get("DLmr") + get("DLmw")]);
        desc = text
            .lines()
            .filter_map(|l| l.strip_prefix("desc: "))
            .filter(|l| l.starts_with("I1") || l.starts_with("LL"))
            .collect::<Vec<_>>()
            .join("; ");
    }
    let d = |i: usize| (counts[1][i] as f64 - counts[0][i] as f64) / n as f64;
    Ok(Misses {
        i1: d(0),
        lli: d(1),
        lld: d(2),
        geometry: desc,
    })
}

// ---------------------------------------------------------------------
// Segment costs and time

/// Instructions per segment through `handle_segment` (`tcp_segment_cost`
/// under callgrind, counting only its `feed_*` calls).
fn segment_cost(
    seg: &Path,
    kind: &str,
    n: u64,
    tmp: &Path,
    log: &mut String,
) -> anyhow::Result<f64> {
    let out = tmp.join(format!("callgrind.seg.{kind}"));
    let toggle = format!("--toggle-collect=*feed_{kind}*");
    let mut c = callgrind_cmd(
        seg,
        &out,
        &["--collect-atstart=no", &toggle],
        &[kind.to_string(), "on".to_string(), n.to_string()],
    );
    run(&mut c, log)?;
    let text = std::fs::read_to_string(&out)?;
    let _ = std::fs::remove_file(&out);
    let ir = crate::bench::tcp_instructions::callgrind_total(&text)
        .context("no totals in callgrind's output")?;
    Ok(ir as f64 / n as f64)
}

/// The median time per round trip one `tcp-rr-single` run printed.
fn one_thread_us(bin: &Path, stack: &str, count: u64) -> anyhow::Result<f64> {
    let out = Command::new("taskset")
        .args(["-c", &Role::SoloTiming.cpu().to_string()])
        .arg(bin)
        .args(rr_args(count, stack))
        .output()
        .context("running taskset (util-linux)")?;
    ensure!(
        out.status.success(),
        "{} tcp-rr-single failed",
        bin.display()
    );
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| {
            l.split_once(": median ")?
                .1
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .context("no median in tcp-rr-single's output")
}

/// The p50 in µs of one two-core `tcp-rr` run and the placement of the
/// two cores it measured (`shared`, `apart` or `mixed`: the host moves
/// the vCPUs, and the placement moves the p50; docs/PERFORMANCE.md).
fn two_core_p50(
    bin: &Path,
    stack: &str,
    seconds: f64,
    tmp: &Path,
) -> anyhow::Result<(f64, String)> {
    let out = Command::new(bin)
        .args(["bench", "tcp-rr", "--runs", "1", "--stack", stack])
        .arg("--seconds")
        .arg(seconds.to_string())
        .arg("--out")
        .arg(tmp.join("tcp-rr"))
        .output()?;
    ensure!(out.status.success(), "{} tcp-rr failed", bin.display());
    let text = String::from_utf8_lossy(&out.stdout);
    // The run's CSV line: tcp-rr,STACK,RUN,SECONDS,,,P50,P99,RTS,PROBE,PLACEMENT
    text.lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f.len() == 11 && f[0] == "tcp-rr")
                .then(|| Some((f[6].parse().ok()?, f[10].to_string())))?
        })
        .context("no run line in tcp-rr's output")
}

/// Median two-core p50 of `r`'s runs with placement `class`, and how many.
fn p50_in(r: &Row, class: &str) -> (f64, usize) {
    let v: Vec<f64> = r
        .two_core
        .iter()
        .filter(|(_, c)| c == class)
        .map(|&(p, _)| p)
        .collect();
    (if v.is_empty() { f64::NAN } else { median(&v) }, v.len())
}

// ---------------------------------------------------------------------
// The experiment

/// Everything measured for one variant.
#[derive(Default, Clone)]
struct Row {
    name: String,
    what: String,
    instr_rt: f64,
    poll: f64,
    recv: f64,
    send: f64,
    data_seg: f64,
    ack: f64,
    hot: HotCode,
    i1_host: f64,
    lli_host: f64,
    lld_host: f64,
    i1_paper: f64,
    one_thread_us: Vec<f64>,
    /// Two-core p50 (µs) and placement per run.
    two_core: Vec<(f64, String)>,
    placed: Option<(usize, usize)>,
}

/// Runs the study and writes `paths.{csv,txt,png}`.
pub fn exp(o: &Opts) -> anyhow::Result<()> {
    let root = repo_root()?;
    std::fs::create_dir_all(&o.out)?;
    let tmp = std::env::temp_dir().join(format!("lazynet-paths-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let mut log = String::new();
    let default = default_layout(&root)?;
    let chosen: Vec<&Variant> = VARIANTS
        .iter()
        .filter(|v| {
            if o.quick {
                matches!(v.build, Build::Code(c) if c == "std" || c == default)
            } else {
                o.auto || !matches!(v.build, Build::HotCold(_) | Build::Pgo(_))
            }
        })
        .collect();
    // Build: code variants first (their profiles give the orders).
    writeln!(log, "builds:")?;
    let mut bins: HashMap<&str, Bins> = HashMap::new();
    let mut code_bins: HashMap<&str, Bins> = HashMap::new();
    let mut code_steady: HashMap<&str, Steady> = HashMap::new();
    let mut placed: HashMap<&str, (usize, usize)> = HashMap::new();
    let codes: Vec<&'static str> = {
        let mut c: Vec<&str> = chosen
            .iter()
            .filter_map(|v| match v.build {
                Build::Code(c) | Build::Ordered(c, _) => Some(c),
                _ => None,
            })
            .collect();
        c.sort_unstable();
        c.dedup();
        // The default last: a quick run then leaves target/release as it was.
        c.sort_by_key(|&x| x == default);
        c
    };
    for &c in &codes {
        eprintln!("paths: building code variant {c}");
        let b = keep(&root, c, cargo_build(&root, c, None, None, &[], &mut log)?)?;
        code_bins.insert(c, b);
    }
    for &c in &codes {
        eprintln!("paths: profiling code variant {c}");
        let p = profile_pair(&code_bins[c].lab, "lazynet", o.round_trips, &tmp, &mut log)?;
        code_steady.insert(c, steady(&p, o.round_trips));
    }
    for v in &chosen {
        match v.build {
            Build::Code(c) => {
                bins.insert(v.name, code_bins[c].clone());
            }
            Build::Ordered(c, order) => {
                eprintln!("paths: linking {} ({:?} order on {c})", v.name, order);
                let syms = symbols(&code_bins[c].lab)?;
                let exe_syms: HashSet<&str> = syms.iter().map(|(n, _, _)| n.as_str()).collect();
                let s = &code_steady[c];
                let path_order = call_order(s, &exe_syms);
                let lines = ordering(order, s, &path_order, &syms);
                let file = o.out.join(format!("order-{}.txt", v.name.to_lowercase()));
                std::fs::write(&file, lines.join("\n") + "\n")?;
                let link = vec![
                    "-C".to_string(),
                    format!(
                        "link-arg=-Wl,--symbol-ordering-file={}",
                        file.canonicalize()?.display()
                    ),
                    "-C".to_string(),
                    "link-arg=-Wl,--no-warn-symbol-ordering".to_string(),
                ];
                let b = keep(
                    &root,
                    v.name,
                    cargo_build(&root, c, None, None, &link, &mut log)?,
                )?;
                placed.insert(v.name, placed_in_order(&b.lab, &path_order)?);
                bins.insert(v.name, b);
            }
            Build::HotCold(c) => {
                eprintln!("paths: building {} (hot/cold splitting on {c})", v.name);
                let dir = root.join("target/paths/hcs");
                let b = keep(
                    &root,
                    v.name,
                    cargo_build(
                        &root,
                        c,
                        Some(&dir),
                        Some("-C llvm-args=-hot-cold-split=true"),
                        &[],
                        &mut log,
                    )?,
                )?;
                bins.insert(v.name, b);
            }
            Build::Pgo(c) => {
                eprintln!("paths: building {} (profile-guided, on {c})", v.name);
                let b = pgo_build(&root, c, o.round_trips, &tmp, &mut log)?;
                bins.insert(v.name, keep(&root, v.name, b)?);
            }
        }
    }
    // The default build's own binary must be the last thing cargo leaves in
    // target/release (scripts and tests use it).
    eprintln!("paths: restoring the default build");
    cargo_build(&root, default, None, None, &[], &mut log)?;

    // Counts.
    writeln!(log, "counts:")?;
    let mut rows: Vec<Row> = Vec::new();
    let mut series: Vec<(&str, Bins, &str)> = chosen
        .iter()
        .map(|v| (v.name, bins[v.name].clone(), "lazynet"))
        .collect();
    series.push(("smoltcp", bins[default_name(default)].clone(), "smoltcp"));
    let cg_n = o.round_trips;
    let cache_n = (o.round_trips / 2).max(500);
    for (name, b, stack) in &series {
        eprintln!("paths: counting {name}");
        let variant = VARIANTS.iter().find(|v| v.name == *name);
        let what = variant.map_or("smoltcp 0.14 in the same harness", |v| v.what);
        let lazy = *stack == "lazynet";
        // A code variant's profile was taken already, for the link orders.
        let code = match variant.map(|v| v.build) {
            Some(Build::Code(c)) if lazy => code_steady.remove(c),
            _ => None,
        };
        let s = match code {
            Some(s) => s,
            None => steady(&profile_pair(&b.lab, stack, cg_n, &tmp, &mut log)?, cg_n),
        };
        let mut r = Row {
            name: name.to_string(),
            what: what.to_string(),
            instr_rt: s.total,
            hot: hot_code(&s, &b.lab)?,
            placed: placed.get(name).copied(),
            ..Row::default()
        };
        // The harness's calls, each never inlined into it (`bench::tcp`).
        let side = if lazy { "Lazy" } else { "Smol" };
        let call = |f: &str| inclusive(&s, &[&format!("{side} as {ENDPOINT}>::{f}")]);
        (r.poll, r.recv, r.send) = (call("poll"), call("recv"), call("send"));
        if r.poll <= 0.0 || r.recv <= 0.0 || r.send <= 0.0 {
            bail!(
                "{name}: no instructions found in the harness's poll, recv or send ({ENDPOINT} renamed?)"
            );
        }
        if lazy {
            r.data_seg = segment_cost(&b.seg, "data", 20_000, &tmp, &mut log)?;
            r.ack = segment_cost(&b.seg, "ack", 20_000, &tmp, &mut log)?;
        }
        let host = cachegrind(&b.lab, stack, cache_n, &[], &tmp, &mut log)?;
        let paper = cachegrind(
            &b.lab,
            stack,
            cache_n,
            &["--I1=8192,1,32", "--D1=8192,1,32", "--LL=2097152,1,32"],
            &tmp,
            &mut log,
        )?;
        r.i1_host = host.i1;
        r.lli_host = host.lli;
        r.lld_host = host.lld;
        r.i1_paper = paper.i1;
        if rows.is_empty() {
            writeln!(
                log,
                "cachegrind geometries: this machine: {}; the paper's: {}",
                host.geometry, paper.geometry
            )?;
        }
        rows.push(r);
    }
    // Time: every series once per round, in rotating order.
    eprintln!("paths: timing ({} rounds)", o.pairs);
    for round in 0..o.pairs {
        for k in 0..series.len() {
            let i = (k + round) % series.len();
            let (_, b, stack) = &series[i];
            rows[i]
                .one_thread_us
                .push(one_thread_us(&b.lab, stack, o.timed_round_trips)?);
        }
    }
    let rr_rounds = if o.quick { 1 } else { (o.pairs / 2).max(3) };
    for round in 0..rr_rounds {
        for k in 0..series.len() {
            let i = (k + round) % series.len();
            let (_, b, stack) = &series[i];
            rows[i]
                .two_core
                .push(two_core_p50(&b.lab, stack, o.rr_seconds, &tmp)?);
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    for r in &rows {
        ensure!(
            r.instr_rt > 1000.0
                && r.hot.bytes > 0
                && r.i1_paper > 0.0
                && r.one_thread_us.iter().all(|&u| u > 0.0)
                && r.two_core.iter().all(|(u, _)| *u > 0.0),
            "{}: a measure is missing (instructions {:.0}, hot bytes {}, misses {:.1})",
            r.name,
            r.instr_rt,
            r.hot.bytes,
            r.i1_paper
        );
    }
    write_out(o, &rows, default, &log)
}

/// The default code variant (what `build.rs` picks without the variable).
fn default_layout(root: &Path) -> anyhow::Result<&'static str> {
    let b = std::fs::read_to_string(root.join("crates/lazynet/build.rs"))?;
    let line = b
        .lines()
        .find(|l| l.starts_with("const DEFAULT: &str ="))
        .context("no DEFAULT in build.rs")?;
    Ok(match line.split('"').nth(1) {
        Some("std") => "std",
        Some("out") => "out",
        Some("pin") => "pin",
        other => bail!("build.rs DEFAULT {other:?}"),
    })
}

fn default_name(code: &str) -> &'static str {
    match code {
        "std" => "STD",
        "pin" => "PIN",
        _ => "OUT",
    }
}

/// An instrumented build, a training run of round trips, and the build
/// that uses its profile (rustup's `llvm-tools` for `llvm-profdata`).
fn pgo_build(
    root: &Path,
    code: &str,
    n: u64,
    tmp: &Path,
    log: &mut String,
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let sysroot = run(Command::new("rustc").args(["--print", "sysroot"]), log)?;
    let profdata =
        Path::new(sysroot.trim()).join("lib/rustlib/x86_64-unknown-linux-gnu/bin/llvm-profdata");
    ensure!(
        profdata.exists(),
        "no llvm-profdata (rustup component add llvm-tools)"
    );
    let raw = tmp.join("pgo-raw");
    let _ = std::fs::remove_dir_all(&raw);
    let gen = root.join("target/paths/pgo-gen");
    let (lab, seg) = cargo_build(
        root,
        code,
        Some(&gen),
        Some(&format!("-Cprofile-generate={}", raw.display())),
        &[],
        log,
    )?;
    run(Command::new(&lab).args(rr_args(20 * n, "lazynet")), log)?;
    run(Command::new(&seg).args(["data", "on", "200000"]), log)?;
    run(Command::new(&seg).args(["ack", "on", "200000"]), log)?;
    let merged = root.join("target/paths/pgo.profdata");
    let mut m = Command::new(&profdata);
    m.arg("merge").arg("-o").arg(&merged).arg(&raw);
    run(&mut m, log)?;
    cargo_build(
        root,
        code,
        Some(&root.join("target/paths/pgo-use")),
        Some(&format!(
            "-Cprofile-use={} -Cllvm-args=-pgo-warn-missing-function=false",
            merged.display()
        )),
        &[],
        log,
    )
}

fn write_out(o: &Opts, rows: &[Row], default: &str, log: &str) -> anyhow::Result<()> {
    let mut csv = String::from(
        "variant,instructions_per_rt,poll,recv,send,data_segment,pure_ack,hot_instructions,hot_bytes,lines64,unused64,lines32,unused32,i1_misses_host,lli_misses_host,lld_misses_host,i1_misses_8k_dm_32b,one_thread_us_median,pairs,two_core_p50_us_shared,runs_shared,two_core_p50_us_apart,runs_apart\n",
    );
    for r in rows {
        writeln!(
            csv,
            "{},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{},{},{},{:.3},{},{:.3},{:.2},{:.3},{:.3},{:.2},{:.4},{},{:.4},{},{:.4},{}",
            r.name,
            r.instr_rt,
            r.poll,
            r.recv,
            r.send,
            r.data_seg,
            r.ack,
            r.hot.instructions,
            r.hot.bytes,
            r.hot.lines64,
            r.hot.unused64,
            r.hot.lines32,
            r.hot.unused32,
            r.i1_host,
            r.lli_host,
            r.lld_host,
            r.i1_paper,
            median(&r.one_thread_us),
            r.one_thread_us.len(),
            p50_in(r, "shared").0,
            p50_in(r, "shared").1,
            p50_in(r, "apart").0,
            p50_in(r, "apart").1
        )?;
    }
    std::fs::write(o.out.join("paths.csv"), &csv)?;
    let get = |n: &str| rows.iter().find(|r| r.name == n);
    let dname = default_name(default);
    let mut t = crate::infra::report::txt_head(&crate::infra::report::command_line());
    writeln!(
        t,
        "workload: 1-byte request and response over one connection, both ends in one thread (`bench tcp-rr-single`), nodelay; counts from N = {} and 2N round trips differenced; times: {} alternated rounds of {} round trips pinned to CPU {}, and two-core `bench tcp-rr` p50 ({} s runs)",
        o.round_trips,
        o.pairs,
        o.timed_round_trips,
        Role::SoloTiming.cpu(),
        o.rr_seconds
    )?;
    writeln!(
        t,
        "default build: {dname} (crates/lazynet/build.rs; the goals below are read on it); fastest code variant here (one thread): {}\n",
        rows.iter()
            .filter(|r| ["STD", "OUT", "PIN"].contains(&r.name.as_str()))
            .min_by(|a, b| median(&a.one_thread_us).total_cmp(&median(&b.one_thread_us)))
            .map_or("-", |r| r.name.as_str())
    )?;
    writeln!(t, "variants:")?;
    for r in rows {
        let placed = r
            .placed
            .map(|(a, b)| format!(" [{a} of {b} consecutive hot functions placed in order]"))
            .unwrap_or_default();
        writeln!(t, "  {:<8} {}{placed}", r.name, r.what)?;
    }
    writeln!(
        t,
        "\n{:<8} {:>8} {:>7} {:>7} {:>7} {:>6} {:>5} {:>7} {:>6} {:>6} {:>6} {:>7} {:>7} {:>7} {:>8} {:>12} {:>12}",
        "variant", "instr/RT", "poll", "recv", "send", "data", "ACK", "hot B", "unus64", "unus32", "I1/RT", "I1 8KDM", "LLi/RT", "LLd/RT", "1-thr us", "2c shared", "2c apart"
    )?;
    for r in rows {
        writeln!(
            t,
            "{:<8} {:>8.0} {:>7.0} {:>7.0} {:>7.0} {:>6.0} {:>5.0} {:>7} {:>5.1}% {:>5.1}% {:>6.1} {:>7.1} {:>7.2} {:>7.2} {:>8.3} {:>12} {:>12}",
            r.name,
            r.instr_rt,
            r.poll,
            r.recv,
            r.send,
            r.data_seg,
            r.ack,
            r.hot.bytes,
            100.0 * r.hot.unused64,
            100.0 * r.hot.unused32,
            r.i1_host,
            r.i1_paper,
            r.lli_host,
            r.lld_host,
            median(&r.one_thread_us),
            {
                let (p, n) = p50_in(r, "shared");
                format!("{p:.3} ({n})")
            },
            {
                let (p, n) = p50_in(r, "apart");
                format!("{p:.3} ({n})")
            }
        )?;
    }
    writeln!(
        t,
        "(instr/RT: both ends; poll/recv/send: the application's calls (the harness's never-inlined endpoint calls), inclusive: lazynet: poll = device, demultiplexing and the protocol handler (`tcp_service`: TCP input and the ACKs it sends), recv = copy to the reader, send = TCP/IP output to the device; smoltcp: poll = its `Interface::poll` (input and output), send/recv = its socket buffers; data/ACK: instructions per in-order 1448-byte data segment (its copy into the receive ring included) / pure ACK through lazynet's handle_segment; hot B: bytes of code executed per round trip; unus64/32: bytes of the 64/32-byte lines it touches that it never executes; I1/RT: simulated L1 i-cache misses per round trip, this machine's geometry; I1 8KDM: the paper's 8 KiB direct-mapped cache with 32-byte lines; LLi/LLd: last-level instruction/data misses; 1-thr us: median time per round trip with both ends in one thread; 2c shared/apart: median two-core p50 in µs of the runs whose cores shared a cache or not (runs))"
    )?;
    writeln!(
        t,
        "hot path per variant: instructions / 64-byte lines / 32-byte lines:"
    )?;
    for r in rows {
        writeln!(
            t,
            "  {:<8} {:>6} / {:>5} / {:>5}",
            r.name, r.hot.instructions, r.hot.lines64, r.hot.lines32
        )?;
    }
    // Ratios and goals.
    let ratio = |a: Option<&Row>, b: Option<&Row>, f: &dyn Fn(&Row) -> f64| match (a, b) {
        (Some(a), Some(b)) => f(a) / f(b),
        _ => f64::NAN,
    };
    let one = |r: &Row| median(&r.one_thread_us);
    let smol = get("smoltcp");
    writeln!(t, "\ngoals:")?;
    let goal = |t: &mut String, what: &str, v: f64, target: &str, met: bool| {
        let _ = writeln!(
            t,
            "  {what}: {v:.3} (goal {target}) {}",
            if v.is_nan() {
                "not measured"
            } else if met {
                "met"
            } else {
                "missed"
            }
        );
    };
    let v = ratio(get("ALL"), get("STD"), &|r| r.instr_rt);
    goal(
        &mut t,
        "instructions per round trip, ALL / STD",
        v,
        "<= 0.75",
        v <= 0.75,
    );
    let v = ratio(get("ALL"), get("STD"), &|r| r.hot.bytes as f64);
    goal(
        &mut t,
        "hot-path size (bytes executed), ALL / STD",
        v,
        "<= 0.7",
        v <= 0.7,
    );
    let v = ratio(get("ALL"), get("STD"), &|r| r.hot.lines64 as f64);
    goal(&mut t, "hot-path size (64-byte lines touched, executed or not, as the paper's static path size), ALL / STD", v, "<= 0.7", v <= 0.7);
    let v = ratio(get("BAD"), get("ALL"), &one);
    goal(
        &mut t,
        "one-thread round-trip time, BAD / ALL",
        v,
        ">= 1.3",
        v >= 1.3,
    );
    let v = ratio(get("PGO"), get("STD"), &|r| r.instr_rt);
    goal(
        &mut t,
        "(beside) instructions per round trip, PGO / STD",
        v,
        "<= 0.75",
        v <= 0.75,
    );
    // Read on the default build, and on the profile-guided one beside it.
    for name in [dname, "PGO"] {
        let Some(b) = get(name) else { continue };
        // Compared as counts: smoltcp's can be 0. Half a miss per round
        // trip is within what N and 2N differenced can tell apart.
        for (geometry, f) in [
            ("this machine", (|r: &Row| r.i1_host) as fn(&Row) -> f64),
            ("8 KiB direct-mapped", |r: &Row| r.i1_paper),
        ] {
            let (v, w) = (f(b), smol.map_or(f64::NAN, f));
            goal(
                &mut t,
                &format!("L1I misses per round trip, {name} vs smoltcp's {w:.1}, {geometry}"),
                v,
                "<= smoltcp's",
                v <= w + 0.5,
            );
        }
        goal(
            &mut t,
            &format!("instructions per round trip, {name}, both ends"),
            b.instr_rt,
            "<= 4000",
            b.instr_rt <= 4000.0,
        );
        goal(
            &mut t,
            &format!("instructions per fast-path data segment, {name}"),
            b.data_seg,
            "<= 300",
            b.data_seg <= 300.0,
        );
        let v = ratio(Some(b), smol, &one);
        goal(
            &mut t,
            &format!("one-thread round-trip time, {name} / smoltcp"),
            v,
            "< 1",
            v < 1.0,
        );
    }
    writeln!(
        t,
        "\nthe paper (DEC 3000/600, 21064 at 175 MHz, 8 KiB direct-mapped i-cache, x-kernel TCP/IP):\n  Table 2, round trip: BAD 498.8 us (+60.5%), STD 351.0 (+12.9%), OUT 336.1 (+8.1%), CLO 325.5 (+4.7%), PIN 317.1 (+2.0%), ALL 310.8\n  Table 4, trace length (instructions) and mCPI: BAD 4718 / 4.58, STD 4750 / 1.58, OUT 4728 / 1.50, CLO 4684 / 1.28, PIN 4245 / 1.31, ALL 4215 / 1.17\n  Table 5, critical-path size without / with outlining: 5841 / 3856 instructions, i-cache unused 21% / 15%"
    )?;
    writeln!(t, "\ncommands:\n{log}")?;
    print!("{t}");
    std::fs::write(o.out.join("paths.txt"), &t)?;

    let cats: Vec<String> = rows.iter().map(|r| r.name.clone()).collect();
    let one_series = |label: &str, f: &dyn Fn(&Row) -> f64| {
        vec![(label.to_string(), rows.iter().map(f).collect::<Vec<f64>>())]
    };
    let instr = one_series("instructions per round trip", &|r| r.instr_rt);
    let i1 = vec![
        (
            "this machine".to_string(),
            rows.iter().map(|r| r.i1_host).collect(),
        ),
        (
            "8 KiB direct-mapped".to_string(),
            rows.iter().map(|r| r.i1_paper).collect(),
        ),
    ];
    let size = one_series("hot-path bytes", &|r| r.hot.bytes as f64);
    let time = one_series("one thread, us", &|r| median(&r.one_thread_us));
    crate::infra::plot::figure(
        &o.out.join("paths.png"),
        &[
            crate::infra::plot::Panel::Bars {
                title: "Instructions per round trip",
                x_label: "variant",
                y_label: "instructions",
                categories: &cats,
                series: &instr,
            },
            crate::infra::plot::Panel::Bars {
                title: "Simulated L1I misses per round trip",
                x_label: "variant",
                y_label: "misses",
                categories: &cats,
                series: &i1,
            },
            crate::infra::plot::Panel::Bars {
                title: "Hot path: bytes of code executed",
                x_label: "variant",
                y_label: "bytes",
                categories: &cats,
                series: &size,
            },
            crate::infra::plot::Panel::Bars {
                title: "One-thread round trip (median)",
                x_label: "variant",
                y_label: "us",
                categories: &cats,
                series: &time,
            },
        ],
    )
}
