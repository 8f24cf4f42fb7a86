//! PNG charts for the results: line charts (rate curves, costs against
//! size) and grouped bar charts (e.g. cycles per path per payload size),
//! one per file or several side by side in one figure ([`figure`]), so that
//! each experiment or benchmark writes one `NAME.png`.
//!
//! Drawn with `plotters`' bitmap backend; text is rendered with a bundled
//! DejaVu Sans (`assets/DejaVuSans.ttf`, licence in `assets/DejaVu-LICENSE`)
//! through `ab_glyph`, so no system font libraries are needed.
//!
//! **Owns:** the look of every chart. **May not touch:** what is plotted
//! (the callers' numbers, as given).

use std::path::Path;
use std::sync::Once;

use anyhow::{anyhow, bail};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

const FONT: &str = "sans-serif";
static FONT_BYTES: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// Image size in pixels.
pub const WIDTH: u32 = 1024;
/// Image size in pixels.
pub const HEIGHT: u32 = 640;

/// Distinct colours (Tableau 10), reused in order.
const COLOURS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The colour of series `i`.
pub fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TTF checked by the tests.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES);
    });
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("plotting: {e:?}")
}

/// Range `[lo, hi]` of `vals` padded for display; on a log axis only
/// positive values count and the padding is multiplicative.
fn range(vals: impl Iterator<Item = f64>, log: bool, from_zero: bool) -> Option<(f64, f64)> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in vals.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return None;
    }
    if log {
        if lo == hi {
            return Some((lo / 2.0, hi * 2.0));
        }
        let f = (hi / lo).powf(0.05);
        Some((lo / f, hi * f))
    } else {
        if from_zero && lo > 0.0 {
            lo = 0.0;
        }
        if lo == hi {
            return Some((lo - 1.0, hi + 1.0));
        }
        let pad = (hi - lo) * 0.05;
        Some((if from_zero && lo >= 0.0 { lo } else { lo - pad }, hi + pad))
    }
}

/// Labelled ticks on a log axis over `[lo, hi]`: 1-2-5 per decade, thinned
/// to powers of ten over many decades, 1..9 per decade over less than one.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let decade = |mults: &[f64]| -> Vec<f64> {
        if !(lo > 0.0 && hi > lo) {
            return vec![];
        }
        let mut v = vec![];
        let mut p = 10f64.powi(lo.log10().floor() as i32);
        while p <= hi {
            v.extend(mults.iter().map(|m| m * p).filter(|t| *t >= lo && *t <= hi));
            p *= 10.0;
        }
        v
    };
    let t = decade(&[1.0, 2.0, 5.0]);
    if t.len() > 12 {
        let t = decade(&[1.0]);
        let step = t.len().div_ceil(10).max(1);
        return t.into_iter().step_by(step).collect();
    }
    if t.len() < 3 {
        let t = decade(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
        if t.len() < 2 && hi > lo {
            // Less than a decade between neighbouring marks: linear round steps.
            let raw = (hi - lo) / 4.0;
            let p = 10f64.powi(raw.log10().floor() as i32);
            let step = [1.0, 2.0, 5.0, 10.0]
                .into_iter()
                .map(|m| m * p)
                .find(|s| *s >= raw)
                .unwrap_or(10.0 * p);
            let mut v = vec![];
            let mut x = (lo / step).ceil() * step;
            while x <= hi {
                v.push(x);
                x += step;
            }
            return v;
        }
        return t;
    }
    t
}

/// Unlabelled grid lines on a log axis: 1..9 per decade.
fn log_minor(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo) || hi / lo > 1e8 {
        return vec![];
    }
    let mut v = vec![];
    let mut p = 10f64.powi(lo.log10().floor() as i32);
    while p <= hi {
        v.extend(
            (1..10)
                .map(|m| m as f64 * p)
                .filter(|t| *t >= lo && *t <= hi),
        );
        p *= 10.0;
    }
    v
}

/// Compact tick labels: 1.5k, 2M, 0.25.
fn tick(v: &f64) -> String {
    let a = v.abs();
    let (x, s) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (*v, "")
    };
    let t = if x == x.round() {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    let t = if t.contains('.') {
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        t
    };
    format!("{t}{s}")
}

/// Draws a line chart on `root` over the axes `x` and `y` (linear or
/// logarithmic): one line per series with a marker at every point, a
/// legend, labelled axes. Points a logarithmic axis cannot show (`log`:
/// x, y) are left out.
fn draw_lines<DB, X, Y>(
    root: &DrawingArea<DB, Shift>,
    (title, x_label, y_label): (&str, &str, &str),
    series: &[(String, Vec<(f64, f64)>)],
    (x, y): (X, Y),
    (log_x, log_y): (bool, bool),
) -> anyhow::Result<()>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 26))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(80)
        .build_cartesian_2d(x, y)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .label_style((FONT, 16))
        .axis_desc_style((FONT, 18))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = colour(i);
        let pts: Vec<(f64, f64)> = pts
            .iter()
            .copied()
            .filter(|(x, y)| {
                x.is_finite() && y.is_finite() && (!log_x || *x > 0.0) && (!log_y || *y > 0.0)
            })
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| {
                EmptyElement::at((x, y))
                    + PathElement::new(vec![(0, 0), (24, 0)], c.stroke_width(2))
                    + Circle::new((12, 0), 4, c.filled())
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 16))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// A line chart on `root` ([`draw_lines`]), each axis linear or
/// logarithmic.
fn line_panel<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    labels: (&str, &str, &str),
    series: &[(String, Vec<(f64, f64)>)],
    log_x: bool,
    log_y: bool,
) -> anyhow::Result<()> {
    let title = labels.0;
    let all = || series.iter().flat_map(|(_, p)| p.iter().copied());
    let Some((x0, x1)) = range(all().map(|p| p.0), log_x, false) else {
        bail!("line chart {title:?}: no points to plot");
    };
    let Some((y0, y1)) = range(all().map(|p| p.1), log_y, true) else {
        bail!("line chart {title:?}: no points to plot");
    };
    let log_axis = |lo: f64, hi: f64| {
        (lo..hi)
            .log_scale()
            .with_key_points(log_ticks(lo, hi))
            .with_light_points(log_minor(lo, hi))
    };
    let logs = (log_x, log_y);
    match logs {
        (false, false) => draw_lines(root, labels, series, (x0..x1, y0..y1), logs),
        (true, false) => draw_lines(root, labels, series, (log_axis(x0, x1), y0..y1), logs),
        (false, true) => draw_lines(root, labels, series, (x0..x1, log_axis(y0, y1)), logs),
        (true, true) => draw_lines(
            root,
            labels,
            series,
            (log_axis(x0, x1), log_axis(y0, y1)),
            logs,
        ),
    }
}

/// Draws a grouped bar chart on `root`: one group per category along x, one
/// bar per series within each group (`series[j].1[i]` is the value of
/// series `j` in category `i`; missing or non-finite values draw no bar), a
/// legend, labelled axes; y starts at zero.
fn bar_panel<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    x_label: &str,
    y_label: &str,
    categories: &[String],
    series: &[(String, Vec<f64>)],
) -> anyhow::Result<()> {
    if categories.is_empty() || series.is_empty() {
        bail!("bar chart {title:?}: nothing to plot");
    }
    let vals = series.iter().flat_map(|(_, v)| v.iter().copied());
    let (_, y1) = range(vals.chain([0.0]), false, true).unwrap_or((0.0, 1.0));
    let y1 = if y1 > 0.0 { y1 } else { 1.0 };
    let n = categories.len() as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 26))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..n, 0.0..y1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .x_desc(x_label)
        .y_desc(y_label)
        .y_label_formatter(&tick)
        .label_style((FONT, 16))
        .axis_desc_style((FONT, 18))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    let w = 0.8 / series.len() as f64;
    for (j, (name, v)) in series.iter().enumerate() {
        let c = colour(j);
        let bars = v
            .iter()
            .take(categories.len())
            .enumerate()
            .filter(|(_, y)| y.is_finite())
            .map(|(i, &y)| {
                let x = i as f64 + 0.1 + j as f64 * w;
                Rectangle::new([(x, 0.0), (x + w * 0.95, y.max(0.0))], c.filled())
            });
        chart
            .draw_series(bars)
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], c.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 16))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    category_labels(root, &chart, categories)?;
    Ok(())
}

/// One chart of a [`figure`].
pub enum Panel<'a> {
    /// A line chart (see [`line_chart`]).
    Lines {
        title: &'a str,
        x_label: &'a str,
        y_label: &'a str,
        series: &'a [(String, Vec<(f64, f64)>)],
        log_x: bool,
        log_y: bool,
    },
    /// A grouped bar chart (see [`bar_chart`]).
    Bars {
        title: &'a str,
        x_label: &'a str,
        y_label: &'a str,
        categories: &'a [String],
        series: &'a [(String, Vec<f64>)],
    },
}

/// Writes `panels` side by side into one PNG at `path`.
pub fn figure(path: &Path, panels: &[Panel<'_>]) -> anyhow::Result<()> {
    register_font();
    if panels.is_empty() {
        bail!("figure {}: no panels", path.display());
    }
    let n = panels.len() as u32;
    let root = BitMapBackend::new(path, (WIDTH * n, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    for (area, p) in root.split_evenly((1, panels.len())).iter().zip(panels) {
        match *p {
            Panel::Lines {
                title,
                x_label,
                y_label,
                series,
                log_x,
                log_y,
            } => line_panel(area, (title, x_label, y_label), series, log_x, log_y)?,
            Panel::Bars {
                title,
                x_label,
                y_label,
                categories,
                series,
            } => bar_panel(area, title, x_label, y_label, categories, series)?,
        }
    }
    root.present().map_err(err)?;
    Ok(())
}

/// Writes a line chart to `path` (PNG): one line per series with a marker at
/// every point, a legend, labelled axes. On a logarithmic axis,
/// non-positive values are left out.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
    log_x: bool,
    log_y: bool,
) -> anyhow::Result<()> {
    figure(
        path,
        &[Panel::Lines {
            title,
            x_label,
            y_label,
            series,
            log_x,
            log_y,
        }],
    )
}

/// Writes a grouped bar chart to `path` (PNG); see [`Panel::Bars`].
pub fn bar_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    categories: &[String],
    series: &[(String, Vec<f64>)],
) -> anyhow::Result<()> {
    figure(
        path,
        &[Panel::Bars {
            title,
            x_label,
            y_label,
            categories,
            series,
        }],
    )
}

/// Category names centred under their groups, just below the x axis.
fn category_labels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &ChartContext<
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    categories: &[String],
) -> anyhow::Result<()> {
    let style =
        TextStyle::from((FONT, 16).into_font()).pos(plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            plotters::style::text_anchor::VPos::Top,
        ));
    // The chart maps to the whole image; `root` may be one panel of it.
    let (bx, by) = root.get_base_pixel();
    for (i, name) in categories.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        root.draw(&Text::new(
            name.as_str(),
            (px - bx, py - by + 6),
            style.clone(),
        ))
        .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png_ok(path: &Path) {
        let b = std::fs::read(path).unwrap();
        assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
        // A blank 1024x640 PNG compresses to a few KB; text, lines and
        // markers make it larger, a broken render smaller.
        assert!(b.len() > 10_000 && b.len() < 2_000_000, "{} bytes", b.len());
    }

    fn out(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("lazynet-plot-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    #[test]
    fn log_ticks_are_round() {
        assert_eq!(
            log_ticks(216.0, 12_000.0),
            vec![500.0, 1000.0, 2000.0, 5000.0, 10_000.0]
        );
        assert!((5..=11).contains(&log_ticks(1.0, 1e20).len()));
        assert_eq!(
            log_ticks(1100.0, 1900.0),
            vec![1200.0, 1400.0, 1600.0, 1800.0]
        );
        assert!(log_ticks(900.0, 8300.0).contains(&1000.0));
    }

    #[test]
    fn font_parses() {
        register_font();
        assert!(plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES).is_ok());
    }

    #[test]
    fn line_charts_render() {
        let series = vec![
            (
                "traditional".to_string(),
                vec![
                    (1024.0, 2100.0),
                    (2048.0, 3300.0),
                    (4096.0, 5800.0),
                    (8192.0, 11000.0),
                ],
            ),
            (
                "NLF v3".to_string(),
                vec![
                    (1024.0, 450.0),
                    (2048.0, 452.0),
                    (4096.0, 455.0),
                    (8192.0, 460.0),
                ],
            ),
            (
                "Linux sendfile+GSO".to_string(),
                vec![
                    (1024.0, 240.0),
                    (2048.0, 300.0),
                    (4096.0, 420.0),
                    (8192.0, 700.0),
                ],
            ),
        ];
        for (lx, ly, name) in [
            (false, false, "lin.png"),
            (true, true, "loglog.png"),
            (true, false, "logx.png"),
        ] {
            let p = out(name);
            line_chart(
                &p,
                "Cycles per packet",
                "payload bytes",
                "cycles",
                &series,
                lx,
                ly,
            )
            .unwrap();
            png_ok(&p);
        }
        assert!(line_chart(&out("empty.png"), "t", "x", "y", &[], false, false).is_err());
    }

    #[test]
    fn figures_put_panels_side_by_side() {
        let cats: Vec<String> = vec!["a".into(), "b".into()];
        let bars = vec![("x".to_string(), vec![1.0, 2.0])];
        let lines = vec![("y".to_string(), vec![(1.0, 1.0), (2.0, 3.0)])];
        let p = out("figure.png");
        figure(
            &p,
            &[
                Panel::Bars {
                    title: "bars",
                    x_label: "c",
                    y_label: "v",
                    categories: &cats,
                    series: &bars,
                },
                Panel::Lines {
                    title: "lines",
                    x_label: "x",
                    y_label: "y",
                    series: &lines,
                    log_x: false,
                    log_y: false,
                },
            ],
        )
        .unwrap();
        png_ok(&p);
        // Twice as wide as one chart.
        let b = std::fs::read(&p).unwrap();
        let width = u32::from_be_bytes([b[16], b[17], b[18], b[19]]);
        assert_eq!(width, 2 * WIDTH);
        assert!(figure(&out("none.png"), &[]).is_err());
    }

    #[test]
    fn bar_chart_renders() {
        let cats: Vec<String> = ["1 KiB", "2 KiB", "4 KiB", "8 KiB"]
            .map(String::from)
            .into();
        let series = vec![
            (
                "traditional".to_string(),
                vec![2100.0, 3300.0, 5800.0, 11000.0],
            ),
            ("v1".to_string(), vec![900.0, 1000.0, 1200.0, 1500.0]),
            ("v3".to_string(), vec![450.0, 452.0, 455.0, 460.0]),
        ];
        let p = out("bars.png");
        bar_chart(&p, "Cycles per packet", "payload", "cycles", &cats, &series).unwrap();
        png_ok(&p);
    }
}
