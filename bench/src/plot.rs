//! SVG plots (plotters, SVG backend only): line charts for the matrix
//! (throughput vs payload, latency vs offered load) and grouped bar charts
//! for the comparison report. Logarithmic axes are drawn by plotting
//! `log10(v)` on a linear axis whose labels show `v`.

use std::path::Path;

use plotters::prelude::*;

use super::error::BenchError;
use super::progress::human;

/// Size of every plot in pixels.
const SIZE: (u32, u32) = (900, 540);
/// Series colours, in order.
const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// One named line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    /// Legend text.
    pub(crate) name: String,
    /// `(x, y)` points, drawn in x order.
    pub(crate) points: Vec<(f64, f64)>,
}

/// Axis scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scale {
    /// Linear.
    Linear,
    /// Base-10 logarithmic (non-positive values are left out).
    Log,
}

impl Scale {
    fn map(self, v: f64) -> Option<f64> {
        match self {
            Scale::Linear => v.is_finite().then_some(v),
            Scale::Log => (v.is_finite() && v > 0.0).then(|| v.log10()),
        }
    }

    fn label(self, v: f64) -> String {
        match self {
            Scale::Linear => human(v),
            Scale::Log => human(two_digits(10f64.powf(v))),
        }
    }
}

/// `v` rounded to two significant digits (log-axis labels: 251 → 250).
fn two_digits(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return v;
    }
    let unit = 10f64.powf(v.log10().floor() - 1.0);
    (v / unit).round() * unit
}

/// Where the legend goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Corner {
    /// Top left.
    UpperLeft,
    /// Top right.
    UpperRight,
    /// Bottom right.
    LowerRight,
}

impl Corner {
    fn position(self) -> SeriesLabelPosition {
        match self {
            Corner::UpperLeft => SeriesLabelPosition::UpperLeft,
            Corner::UpperRight => SeriesLabelPosition::UpperRight,
            Corner::LowerRight => SeriesLabelPosition::LowerRight,
        }
    }
}

/// Axes of a chart: labels, scales and the legend's corner.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Axes<'a> {
    /// Title above the chart.
    pub(crate) title: &'a str,
    /// X axis description.
    pub(crate) x: &'a str,
    /// Y axis description.
    pub(crate) y: &'a str,
    /// X scale.
    pub(crate) x_scale: Scale,
    /// Y scale.
    pub(crate) y_scale: Scale,
    /// Legend corner.
    pub(crate) legend: Corner,
}

fn plot_err(path: &Path) -> impl Fn(String) -> BenchError + '_ {
    move |message| BenchError::Plot {
        path: path.to_path_buf(),
        message,
    }
}

/// The range covering `values` with a 5 % margin (a unit range when empty or flat).
fn span(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    if from_zero {
        lo = lo.min(0.0);
    }
    if (hi - lo).abs() < 1e-9 {
        hi = lo + 1.0;
    }
    let pad = (hi - lo) * 0.05;
    (if from_zero && lo >= 0.0 { lo } else { lo - pad }, hi + pad)
}

/// Draws `series` as lines with markers into an SVG at `path`.
pub(crate) fn lines(path: &Path, axes: Axes<'_>, series: &[Series]) -> Result<(), BenchError> {
    let err = plot_err(path);
    let mapped: Vec<(String, Vec<(f64, f64)>)> = series
        .iter()
        .map(|s| {
            let mut pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .filter_map(|&(x, y)| Some((axes.x_scale.map(x)?, axes.y_scale.map(y)?)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            (s.name.clone(), pts)
        })
        .collect();
    let all = || mapped.iter().flat_map(|(_, p)| p.iter().copied());
    let (x0, x1) = span(all().map(|p| p.0), false);
    let (y0, y1) = span(all().map(|p| p.1), axes.y_scale == Scale::Linear);
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(axes.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc(axes.x)
        .y_desc(axes.y)
        .x_label_formatter(&|v| axes.x_scale.label(*v))
        .y_label_formatter(&|v| axes.y_scale.label(*v))
        .draw()
        .map_err(|e| err(e.to_string()))?;
    for (i, (name, pts)) in mapped.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))
            .map_err(|e| err(e.to_string()))?
            .label(name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, colour.filled())))
            .map_err(|e| err(e.to_string()))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(axes.legend.position())
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))
}

/// Draws grouped bars: one group per category, one bar per series
/// (`None` leaves a gap), into an SVG at `path`.
pub(crate) fn bars(
    path: &Path,
    axes: Axes<'_>,
    categories: &[String],
    series: &[(String, Vec<Option<f64>>)],
) -> Result<(), BenchError> {
    let err = plot_err(path);
    let n = categories.len().max(1) as f64;
    let values = || {
        series
            .iter()
            .flat_map(|(_, v)| v.iter().flatten().filter_map(|&v| axes.y_scale.map(v)))
    };
    let (mut y0, y1) = span(values(), axes.y_scale == Scale::Linear);
    if axes.y_scale == Scale::Log {
        y0 = values().fold(f64::INFINITY, f64::min).floor().min(y0);
    }
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(axes.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..n, y0..y1)
        .map_err(|e| err(e.to_string()))?;
    let label = |v: &f64| {
        let i = v.floor();
        let centred = (v - i - 0.5).abs() < 0.26;
        match categories.get(i as usize) {
            Some(c) if centred => c.clone(),
            _ => String::new(),
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(categories.len() * 4 + 1)
        .x_label_formatter(&label)
        .x_desc(axes.x)
        .y_desc(axes.y)
        .y_label_formatter(&|v| axes.y_scale.label(*v))
        .draw()
        .map_err(|e| err(e.to_string()))?;
    let width = 0.8 / series.len().max(1) as f64;
    for (j, (name, vals)) in series.iter().enumerate() {
        let colour = COLOURS[j % COLOURS.len()];
        let rects = vals.iter().enumerate().filter_map(|(i, v)| {
            let top = axes.y_scale.map((*v)?)?;
            let left = i as f64 + 0.1 + j as f64 * width;
            Some(Rectangle::new(
                [(left, y0), (left + width * 0.92, top)],
                colour.filled(),
            ))
        });
        chart
            .draw_series(rects)
            .map_err(|e| err(e.to_string()))?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(axes.legend.position())
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("starling-plot-{}-{name}", std::process::id()))
    }

    #[test]
    fn draws_line_and_bar_svgs() {
        let axes = Axes {
            title: "t",
            x: "payload",
            y: "MB/s",
            x_scale: Scale::Log,
            y_scale: Scale::Linear,
            legend: Corner::UpperLeft,
        };
        let series = vec![Series {
            name: "a".into(),
            points: vec![(256.0, 10.0), (64.0, 5.0), (0.0, 1.0)],
        }];
        let path = tmp("lines.svg");
        assert!(lines(&path, axes, &series).is_ok());
        let svg = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(svg.starts_with("<svg"), "{svg:.80}");
        let path = tmp("bars.svg");
        let cats = vec!["x".to_string(), "y".to_string()];
        let ser = vec![("s".to_string(), vec![Some(3.0), None])];
        let log = Axes {
            y_scale: Scale::Log,
            ..axes
        };
        assert!(bars(&path, log, &cats, &ser).is_ok());
        assert!(lines(&tmp("empty.svg"), axes, &[]).is_ok());
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn spans_pad_and_handle_flat_or_empty_input() {
        assert_eq!(span(std::iter::empty(), false), (0.0, 1.0));
        let (lo, hi) = span([2.0, 2.0].into_iter(), false);
        assert!(lo < 2.0 && hi > 3.0);
        assert_eq!(span([1.0, 11.0].into_iter(), true).0, 0.0);
        assert_eq!(Scale::Log.map(0.0), None);
        assert_eq!(Scale::Log.label(3.0), "1.0k");
        assert_eq!(Scale::Log.label(251f64.log10()), "250");
        assert_eq!(Scale::Log.label(1_585f64.log10()), "1.6k");
    }
}
