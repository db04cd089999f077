//! Hand-written SVG charts: a line chart (with optional error bars, linear or log2 x axis) and a
//! grouped stacked bar chart. Output is deterministic (fixed layout, coordinates with one
//! decimal) and always well-formed: non-finite values are skipped, never printed, and every
//! string is escaped.

use std::fmt::Write as _;

use crate::text::{fixed, short, truncate, xml};

/// Colour-blind-friendly palette (Tableau 10), used in order.
pub const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];
/// After the palette runs out, lines are told apart by dashes.
const DASHES: [&str; 3] = ["", "6 3", "2 2"];

const WIDTH: f64 = 640.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = WIDTH - 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = TOP + 240.0;
const LEGEND_ROW: f64 = 18.0;
/// Longest label drawn in a legend; the full text is in the tooltip.
const LABEL_CHARS: usize = 72;

/// How tick labels are written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Format {
    /// Shares in [0, 1] shown as percentages.
    Percent,
    Number,
    Integer,
}

#[derive(Clone, Debug)]
pub struct Axis {
    pub label: String,
    pub log2: bool,
    pub format: Format,
    /// Ticks at exactly these values (data values such as k or temperatures); else "nice" ticks.
    pub ticks: Option<Vec<f64>>,
    /// Include zero in the range (counts, shares, losses).
    pub zero_based: bool,
    /// Never extend the axis past this (1.0 for shares).
    pub cap: Option<f64>,
}

impl Axis {
    pub fn new(label: &str, format: Format) -> Self {
        Axis {
            label: label.to_string(),
            log2: false,
            format,
            ticks: None,
            zero_based: false,
            cap: None,
        }
    }
    pub fn share(label: &str) -> Self {
        Axis {
            zero_based: true,
            cap: Some(1.0),
            ..Axis::new(label, Format::Percent)
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    /// Confidence interval, drawn as an error bar.
    pub ci: Option<(f64, f64)>,
}

#[derive(Clone, Debug)]
pub struct Series {
    pub label: String,
    pub points: Vec<Point>,
}

#[derive(Clone, Debug)]
pub struct LineChart {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
}

/// A linear map from (transformed) data space to pixels.
#[derive(Clone, Copy, Debug)]
struct Scale {
    lo: f64,
    hi: f64,
    px_lo: f64,
    px_hi: f64,
    log2: bool,
}

impl Scale {
    fn transform(&self, v: f64) -> Option<f64> {
        let t = if self.log2 {
            if v > 0.0 {
                v.log2()
            } else {
                return None;
            }
        } else {
            v
        };
        // Values this far out cannot be placed next to ordinary ones (the span would overflow).
        (t.is_finite() && t.abs() <= 1e150).then_some(t)
    }
    /// Pixel position, clamped to the plot area; None for values that cannot be placed.
    fn px(&self, v: f64) -> Option<f64> {
        let t = self.transform(v)?;
        let f = (t - self.lo) / (self.hi - self.lo);
        let p = self.px_lo + f * (self.px_hi - self.px_lo);
        let (a, b) = if self.px_lo < self.px_hi {
            (self.px_lo, self.px_hi)
        } else {
            (self.px_hi, self.px_lo)
        };
        p.is_finite().then_some(p.clamp(a, b))
    }
}

/// A coordinate: one decimal, never NaN.
fn c(v: f64) -> String {
    if v.is_finite() {
        fixed(v, 1)
    } else {
        "0".to_string()
    }
}

/// 1, 2 or 5 times a power of ten, near `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let m = if norm < 1.5 {
        1.0
    } else if norm < 3.5 {
        2.0
    } else if norm < 7.5 {
        5.0
    } else {
        10.0
    };
    m * mag
}

fn decimals(step: f64) -> usize {
    if step >= 1.0 || !step.is_finite() {
        0
    } else {
        ((-step.log10().floor()) as usize).min(6)
    }
}

fn tick_label(v: f64, format: Format, step: f64) -> String {
    match format {
        Format::Percent => format!("{}%", fixed(v * 100.0, decimals(step * 100.0))),
        Format::Integer | Format::Number if v.abs() >= 1e6 => format!("{}M", short(v / 1e6, 2)),
        Format::Integer | Format::Number if v.abs() >= 1e4 => format!("{}k", short(v / 1e3, 1)),
        Format::Integer => fixed(v, 0),
        Format::Number => fixed(v, decimals(step)),
    }
}

/// The axis range (in transformed space) and its ticks (value, label), from the finite values.
fn layout_axis(axis: &Axis, values: &[f64], px_lo: f64, px_hi: f64) -> (Scale, Vec<(f64, String)>) {
    let mut scale = Scale {
        lo: 0.0,
        hi: 1.0,
        px_lo,
        px_hi,
        log2: axis.log2,
    };
    let (lo, hi) = data_range(axis, &scale, values);
    let (lo, hi, ticks) = if let Some(at) = &axis.ticks {
        explicit_ticks(at, &scale, lo, hi)
    } else {
        nice_ticks(axis, lo, hi)
    };
    scale.lo = lo;
    scale.hi = hi;
    (scale, ticks)
}

/// The span (in transformed space) of the values `scale` can place, widened to 0 on a
/// zero-based linear axis and padded when it is a single point, so that the axis never has
/// zero length.
fn data_range(axis: &Axis, scale: &Scale, values: &[f64]) -> (f64, f64) {
    let ts: Vec<f64> = values.iter().filter_map(|&v| scale.transform(v)).collect();
    let (mut lo, mut hi) = match (
        ts.iter().copied().reduce(f64::min),
        ts.iter().copied().reduce(f64::max),
    ) {
        (Some(a), Some(b)) => (a, b),
        _ => (0.0, if axis.log2 { 4.0 } else { 1.0 }),
    };
    if axis.zero_based && !axis.log2 {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    if hi - lo < 1e-12 {
        if axis.format == Format::Percent && axis.zero_based {
            hi = lo + 1.0;
        } else if axis.log2 {
            lo -= 0.5;
            hi += 0.5;
        } else {
            let pad = if lo.abs() > 1e-12 {
                lo.abs() * 0.5
            } else {
                1.0
            };
            lo -= pad;
            hi += pad;
            if axis.zero_based && lo < 0.0 && values.iter().all(|v| !v.is_finite() || *v >= 0.0) {
                lo = 0.0;
            }
        }
    }
    (lo, hi)
}

/// The range and ticks for explicit tick values `at` (k, temperatures): each placeable value
/// once, in order, labelled as written; the range padded so end markers are not on the frame.
fn explicit_ticks(at: &[f64], scale: &Scale, lo: f64, hi: f64) -> (f64, f64, Vec<(f64, String)>) {
    let pad = (hi - lo) * 0.05;
    let mut vals: Vec<f64> = at
        .iter()
        .copied()
        .filter(|v| scale.transform(*v).is_some())
        .collect();
    vals.sort_by(f64::total_cmp);
    vals.dedup();
    let ticks = vals.iter().map(|&v| (v, short(v, 3))).collect();
    (lo - pad, hi + pad, ticks)
}

/// The range rounded out to a nice step (1, 2 or 5 times a power of ten, at least 1 for
/// integers; kept within the axis cap when the data is) and the ticks at every step of it.
fn nice_ticks(axis: &Axis, lo: f64, hi: f64) -> (f64, f64, Vec<(f64, String)>) {
    let mut step = nice_step((hi - lo) / 5.0);
    if axis.format == Format::Integer {
        step = step.max(1.0);
    }
    let mut a = (lo / step).floor() * step;
    let mut b = (hi / step).ceil() * step;
    if let Some(cap) = axis.cap {
        if b > cap && hi <= cap + 1e-12 {
            b = cap;
        }
        if a < -cap && lo >= -cap - 1e-12 {
            a = -cap;
        }
    }
    let mut v = Vec::new();
    let mut i = 0;
    while i < 60 {
        let t = a + i as f64 * step;
        if t > b + step * 1e-6 {
            break;
        }
        // Snap -0.0 and float noise so labels read "0.3" and not "0.30000000000000004".
        let t = (t / step).round() * step;
        v.push((t, tick_label(t, axis.format, step)));
        i += 1;
    }
    (a, b, v)
}

fn open_svg(out: &mut String, title: &str, height: f64) {
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" \
         font-family=\"sans-serif\" font-size=\"11\" role=\"img\">\n<title>{t}</title>\n\
         <rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#ffffff\"/>\n\
         <text x=\"{cx}\" y=\"22\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">{tt}</text>\n",
        w = c(WIDTH),
        h = c(height),
        t = xml(title),
        cx = c(WIDTH / 2.0),
        tt = xml(&truncate(title, 80)),
    );
}

/// One axis as laid out: its scale, its ticks and its spec.
type Laid<'a> = (&'a Scale, &'a [(f64, String)], &'a Axis);

/// Grid, ticks, labels and frame for a plot area.
fn draw_axes(out: &mut String, x_label_y: f64, (xs, xt, x): Laid, (ys, yt, y): Laid) {
    for (v, label) in yt {
        if let Some(py) = ys.px(*v) {
            let _ = writeln!(
                out,
                "<line x1=\"{l}\" y1=\"{p}\" x2=\"{r}\" y2=\"{p}\" stroke=\"#e5e5e5\"/>\
                 <text x=\"{tx}\" y=\"{ty}\" text-anchor=\"end\">{s}</text>",
                l = c(LEFT),
                r = c(RIGHT),
                p = c(py),
                tx = c(LEFT - 6.0),
                ty = c(py + 4.0),
                s = xml(label)
            );
        }
    }
    for (v, label) in xt {
        if let Some(px) = xs.px(*v) {
            let _ = writeln!(
                out,
                "<line x1=\"{p}\" y1=\"{b}\" x2=\"{p}\" y2=\"{b2}\" stroke=\"#333333\"/>\
                 <text x=\"{p}\" y=\"{ty}\" text-anchor=\"middle\">{s}</text>",
                p = c(px),
                b = c(BOTTOM),
                b2 = c(BOTTOM + 4.0),
                ty = c(BOTTOM + 16.0),
                s = xml(label)
            );
        }
    }
    let _ = writeln!(
        out,
        "<rect x=\"{l}\" y=\"{t}\" width=\"{w}\" height=\"{h}\" fill=\"none\" stroke=\"#333333\"/>",
        l = c(LEFT),
        t = c(TOP),
        w = c(RIGHT - LEFT),
        h = c(BOTTOM - TOP)
    );
    let _ = writeln!(
        out,
        "<text x=\"{cx}\" y=\"{ly}\" text-anchor=\"middle\">{s}</text>",
        cx = c((LEFT + RIGHT) / 2.0),
        ly = c(x_label_y),
        s = xml(&x.label)
    );
    let cy = (TOP + BOTTOM) / 2.0;
    let _ = writeln!(
        out,
        "<text x=\"14\" y=\"{cy}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {cy})\">{s}</text>",
        cy = c(cy),
        s = xml(&y.label)
    );
}

fn no_data(out: &mut String) {
    let _ = writeln!(
        out,
        "<text x=\"{x}\" y=\"{y}\" text-anchor=\"middle\" fill=\"#888888\">no data</text>",
        x = c((LEFT + RIGHT) / 2.0),
        y = c((TOP + BOTTOM) / 2.0)
    );
}

/// How a series is drawn: its colour and dash pattern.
#[derive(Clone, Copy)]
struct Pen {
    colour: &'static str,
    dash: &'static str,
}

impl Pen {
    /// The pen of series `i`: the palette in order, then the same colours dashed.
    fn of(i: usize) -> Pen {
        Pen {
            colour: PALETTE[i % PALETTE.len()],
            dash: DASHES[(i / PALETTE.len()) % DASHES.len()],
        }
    }

    /// The `stroke-dasharray` attribute, empty for a solid line.
    fn dash_attr(&self) -> String {
        if self.dash.is_empty() {
            String::new()
        } else {
            format!(" stroke-dasharray=\"{}\"", self.dash)
        }
    }
}

impl LineChart {
    pub fn render(&self) -> String {
        let (xv, yv) = self.data_values();
        let (xs, xt) = layout_axis(&self.x, &xv, LEFT, RIGHT);
        let (ys, yt) = layout_axis(&self.y, &yv, BOTTOM, TOP);
        let height = BOTTOM + 46.0 + LEGEND_ROW * self.series.len() as f64 + 6.0;
        let mut out = String::new();
        open_svg(&mut out, &self.title, height);
        draw_axes(
            &mut out,
            BOTTOM + 32.0,
            (&xs, &xt, &self.x),
            (&ys, &yt, &self.y),
        );
        let drawable = self.series.iter().any(|s| {
            s.points
                .iter()
                .any(|p| xs.px(p.x).is_some() && p.y.is_finite())
        });
        if !drawable {
            no_data(&mut out);
        }
        let n = self.series.len();
        let spread = self.spread();
        for (i, s) in self.series.iter().enumerate() {
            let pen = Pen::of(i);
            let dx = (i as f64 - (n as f64 - 1.0) / 2.0) * spread;
            self.draw_series(&mut out, s, (&xs, &ys), pen, dx);
            legend_row(&mut out, i, &s.label, pen);
        }
        out.push_str("</svg>\n");
        out
    }

    /// The values the axes must show: finite x values; finite y values and interval ends of
    /// the points with a finite x.
    fn data_values(&self) -> (Vec<f64>, Vec<f64>) {
        let finite = |v: &f64| v.is_finite();
        let xv: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.x))
            .filter(finite)
            .collect();
        let yv: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|p| p.x.is_finite())
            .flat_map(|p| {
                let (lo, hi) = p.ci.unwrap_or((f64::NAN, f64::NAN));
                [p.y, lo, hi]
            })
            .filter(finite)
            .collect();
        (xv, yv)
    }

    /// How many pixels apart neighbouring series are drawn.
    fn spread(&self) -> f64 {
        let n = self.series.len();
        let any_ci = self
            .series
            .iter()
            .any(|s| s.points.iter().any(|p| p.ci.is_some()));
        // Series with error bars at the same x are spread apart a little so that the bars stay readable.
        if any_ci && n > 1 {
            (24.0 / n as f64).min(5.0)
        } else {
            0.0
        }
    }

    /// Series `s`, shifted `dx` pixels to the right: its line, error bars and points.
    fn draw_series(
        &self,
        out: &mut String,
        s: &Series,
        (xs, ys): (&Scale, &Scale),
        pen: Pen,
        dx: f64,
    ) {
        let mut pts: Vec<(f64, f64, &Point)> = s
            .points
            .iter()
            .filter_map(|p| Some((xs.px(p.x)? + dx, ys.px(p.y)?, p)))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let colour = pen.colour;
        let _ = writeln!(out, "<g stroke=\"{colour}\" fill=\"{colour}\">");
        if pts.len() > 1 {
            let d = line_path(s, (xs, ys), dx);
            let dash_attr = pen.dash_attr();
            let _ = writeln!(
                out,
                "<path d=\"{}\" fill=\"none\" stroke-width=\"2\"{dash_attr}/>",
                d.trim_end()
            );
        }
        for &(px, py, p) in &pts {
            self.draw_point(out, &s.label, (px, py, p), ys);
        }
        out.push_str("</g>\n");
    }

    /// Point `p` of series `label` at pixel (`px`, `py`): its error bar, and a dot whose
    /// tooltip gives the values.
    fn draw_point(
        &self,
        out: &mut String,
        label: &str,
        (px, py, p): (f64, f64, &Point),
        ys: &Scale,
    ) {
        if let Some((lo, hi)) = p.ci {
            if let (Some(a), Some(b)) = (ys.px(lo), ys.px(hi)) {
                let _ = writeln!(
                    out,
                    "<path d=\"M{x} {a} L{x} {b} M{l} {a} L{r} {a} M{l} {b} L{r} {b}\" fill=\"none\" stroke-width=\"1\"/>",
                    x = c(px),
                    a = c(a),
                    b = c(b),
                    l = c(px - 3.0),
                    r = c(px + 3.0)
                );
            }
        }
        let ci = match p.ci {
            Some((lo, hi)) if lo.is_finite() && hi.is_finite() => {
                format!(
                    " [{}, {}]",
                    value_text(lo, self.y.format),
                    value_text(hi, self.y.format)
                )
            }
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "<circle cx=\"{}\" cy=\"{}\" r=\"3\"><title>{}</title></circle>",
            c(px),
            c(py),
            xml(&format!(
                "{}: {} = {}, {}{ci}",
                label,
                self.x.label,
                short(p.x, 3),
                value_text(p.y, self.y.format)
            ))
        );
    }
}

/// The path through the placeable points of `s` in x order, shifted `dx` pixels to the right;
/// broken where a point is missing (its y was not finite).
fn line_path(s: &Series, (xs, ys): (&Scale, &Scale), dx: f64) -> String {
    let mut d = String::new();
    let mut prev_x: Option<f64> = None;
    let mut sorted: Vec<&Point> = s.points.iter().filter(|p| xs.px(p.x).is_some()).collect();
    sorted.sort_by(|a, b| a.x.total_cmp(&b.x));
    for p in sorted {
        match (xs.px(p.x), ys.px(p.y)) {
            (Some(px), Some(py)) => {
                let cmd = if prev_x.is_some() { 'L' } else { 'M' };
                let _ = write!(d, "{cmd}{} {} ", c(px + dx), c(py));
                prev_x = Some(px);
            }
            _ => prev_x = None,
        }
    }
    d
}

/// Row `i` of a line chart's legend: the series' line, dot and label (in full in the tooltip).
fn legend_row(out: &mut String, i: usize, label: &str, pen: Pen) {
    let ly = BOTTOM + 50.0 + LEGEND_ROW * i as f64;
    let colour = pen.colour;
    let dash_attr = pen.dash_attr();
    let _ = writeln!(
        out,
        "<line x1=\"{a}\" y1=\"{y}\" x2=\"{b}\" y2=\"{y}\" stroke=\"{colour}\" stroke-width=\"2\"{dash_attr}/>\
         <circle cx=\"{m}\" cy=\"{y}\" r=\"3\" fill=\"{colour}\"/>\
         <text x=\"{tx}\" y=\"{ty}\"><title>{full}</title>{label}</text>",
        a = c(LEFT),
        b = c(LEFT + 24.0),
        m = c(LEFT + 12.0),
        y = c(ly),
        tx = c(LEFT + 32.0),
        ty = c(ly + 4.0),
        full = xml(label),
        label = xml(&truncate(label, LABEL_CHARS))
    );
}

fn value_text(v: f64, format: Format) -> String {
    match format {
        Format::Percent => crate::text::percent(v),
        Format::Integer => fixed(v, 0),
        Format::Number => short(v, 4),
    }
}

/// One bar: stacked segments (indexed like `BarChart::segments`).
#[derive(Clone, Debug)]
pub struct Bar {
    /// Short label under the bar (e.g. "1" for the first evaluation).
    pub label: String,
    pub tooltip: String,
    pub segments: Vec<f64>,
}

#[derive(Clone, Debug)]
pub struct BarGroup {
    pub label: String,
    pub bars: Vec<Bar>,
}

/// Grouped stacked bars (paper Fig. 5: groups = ground-truth depth, bars = evaluations,
/// segments = depth of the proving tree).
#[derive(Clone, Debug)]
pub struct BarChart {
    pub title: String,
    pub x_label: String,
    pub y: Axis,
    /// Segment names, coloured by the palette in order.
    pub segments: Vec<String>,
    /// What each bar label means ("1: ProD-RL"), listed in the legend.
    pub bar_legend: Vec<String>,
    pub groups: Vec<BarGroup>,
}

impl BarChart {
    pub fn render(&self) -> String {
        // Headroom for the value printed above the tallest bar.
        let padded: Vec<f64> = self.bar_totals().iter().map(|t| t * 1.06).collect();
        let (ys, yt) = layout_axis(&self.y, &padded, BOTTOM, TOP);
        let legend_rows = self.segments.len() + self.bar_legend.len();
        let height = BOTTOM + 66.0 + LEGEND_ROW * legend_rows as f64 + 6.0;
        let mut out = String::new();
        open_svg(&mut out, &self.title, height);
        // Groups are categories: the x "scale" only places group labels.
        let ng = self.groups.len().max(1) as f64;
        let group_w = (RIGHT - LEFT) / ng;
        let xs = Scale {
            lo: 0.0,
            hi: ng,
            px_lo: LEFT,
            px_hi: RIGHT,
            log2: false,
        };
        draw_axes(
            &mut out,
            BOTTOM + 42.0,
            (&xs, &[], &Axis::new(&self.x_label, Format::Number)),
            (&ys, &yt, &self.y),
        );
        // Bars of 0% are data (their labels say so); only a chart without bars has none.
        if self.groups.iter().all(|g| g.bars.is_empty()) {
            no_data(&mut out);
        }
        for (gi, g) in self.groups.iter().enumerate() {
            let g_left = LEFT + gi as f64 * group_w;
            self.draw_group(&mut out, g, (g_left, group_w), &ys);
        }
        self.draw_legend(&mut out);
        out.push_str("</svg>\n");
        out
    }

    /// Each bar's height: the sum of its finite positive segments.
    fn bar_totals(&self) -> Vec<f64> {
        self.groups
            .iter()
            .flat_map(|g| g.bars.iter())
            .map(|b| {
                b.segments
                    .iter()
                    .copied()
                    .filter(|v| v.is_finite() && *v > 0.0)
                    .sum::<f64>()
            })
            .collect()
    }

    /// Group `g` in its slot of `group_w` pixels from `g_left`: its bars, then its label.
    fn draw_group(
        &self,
        out: &mut String,
        g: &BarGroup,
        (g_left, group_w): (f64, f64),
        ys: &Scale,
    ) {
        let nb = g.bars.len().max(1) as f64;
        let bar_w = (group_w * 0.8 / nb).min(48.0);
        let start = g_left + (group_w - bar_w * nb) / 2.0;
        for (bi, b) in g.bars.iter().enumerate() {
            self.draw_bar(out, b, (start + bi as f64 * bar_w, bar_w), ys);
        }
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            c(g_left + group_w / 2.0),
            c(BOTTOM + 24.0),
            xml(&truncate(&g.label, 24))
        );
    }

    /// Bar `b`, `bar_w` pixels wide from `x`: its stacked segments, its total above it and its
    /// label below.
    fn draw_bar(&self, out: &mut String, b: &Bar, (x, bar_w): (f64, f64), ys: &Scale) {
        let mut acc = 0.0;
        let _ = writeln!(out, "<g><title>{}</title>", xml(&b.tooltip));
        for (si, v) in b.segments.iter().enumerate() {
            if !(v.is_finite() && *v > 0.0) {
                continue;
            }
            let (Some(y0), Some(y1)) = (ys.px(acc), ys.px(acc + v)) else {
                continue;
            };
            acc += v;
            let _ = writeln!(
                out,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"#ffffff\" stroke-width=\"0.5\"/>",
                c(x + 1.0),
                c(y1),
                c((bar_w - 2.0).max(1.0)),
                c((y0 - y1).max(0.0)),
                PALETTE[si % PALETTE.len()]
            );
        }
        if let Some(top) = ys.px(acc) {
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"9\">{}</text>",
                c(x + bar_w / 2.0),
                c(top - 3.0),
                xml(&value_text(acc, self.y.format))
            );
        }
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"9\">{}</text></g>",
            c(x + bar_w / 2.0),
            c(BOTTOM + 11.0),
            xml(&truncate(&b.label, 6))
        );
    }

    /// The legend: the segments' colours, then what each bar label means.
    fn draw_legend(&self, out: &mut String) {
        let mut ly = BOTTOM + 64.0;
        for (si, name) in self.segments.iter().enumerate() {
            let _ = writeln!(
                out,
                "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>",
                c(LEFT),
                c(ly - 6.0),
                PALETTE[si % PALETTE.len()],
                c(LEFT + 18.0),
                c(ly + 4.0),
                xml(&truncate(name, LABEL_CHARS))
            );
            ly += LEGEND_ROW;
        }
        for line in &self.bar_legend {
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"{}\"><title>{}</title>{}</text>",
                c(LEFT),
                c(ly + 4.0),
                xml(line),
                xml(&truncate(line, LABEL_CHARS + 8))
            );
            ly += LEGEND_ROW;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(0.18), 0.2);
        assert_eq!(nice_step(3.0), 2.0);
        assert_eq!(nice_step(7.0), 5.0);
        assert_eq!(nice_step(f64::NAN), 1.0);
        assert_eq!(decimals(0.05), 2);
        assert_eq!(decimals(2.0), 0);
    }

    #[test]
    fn share_axis_stops_at_one_hundred_percent() {
        let (s, t) = layout_axis(&Axis::share("p"), &[0.2, 0.97], 100.0, 0.0);
        assert_eq!((s.lo, s.hi), (0.0, 1.0));
        assert_eq!(t.first().map(|x| x.1.as_str()), Some("0%"));
        assert_eq!(t.last().map(|x| x.1.as_str()), Some("100%"));
    }

    #[test]
    fn degenerate_ranges_are_widened() {
        let (s, _) = layout_axis(&Axis::new("x", Format::Number), &[3.0, 3.0], 0.0, 100.0);
        assert!(s.lo < 3.0 && s.hi > 3.0);
        let (s, _) = layout_axis(&Axis::new("x", Format::Number), &[f64::NAN], 0.0, 100.0);
        assert!(s.hi > s.lo);
        let log = Axis {
            log2: true,
            ticks: Some(vec![8.0]),
            ..Axis::new("k", Format::Integer)
        };
        let (s, t) = layout_axis(&log, &[8.0], 0.0, 100.0);
        assert!(s.lo < 3.0 && s.hi > 3.0);
        assert_eq!(t, vec![(8.0, "8".to_string())]);
        assert!(
            s.px(0.0).is_none() && s.px(-1.0).is_none(),
            "log2 axis drops non-positive values"
        );
    }
}
