//! The comparison report's plots: delivered msgs/s at peak and p99 latency
//! per workload and system (grouped bars), and latency against offered load
//! (lines), all from the report's median cells.

use std::path::Path;

use super::error::BenchError;
use super::plot::{self, Axes, Corner, Scale, Series};
use crate::report_cells::{Cell, LIMIT, SYSTEM_ORDER, find};

/// `delivered_msgs.svg`, `p99_latency.svg` and `latency_vs_load.svg` in `out`.
pub(crate) fn plots(cells: &[Cell], out: &Path) -> Result<(), BenchError> {
    let systems: Vec<String> = SYSTEM_ORDER
        .iter()
        .filter(|s| **s != LIMIT && cells.iter().any(|c| c.system == **s))
        .map(|s| s.to_string())
        .collect();
    let pubsub = |open: bool| -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for c in cells
            .iter()
            .filter(|c| c.kind == "pubsub" && c.rate.is_some() == open)
        {
            if !names.contains(&c.name) {
                names.push(c.name.clone());
            }
        }
        names
    };
    let grid =
        |names: &[String], value: &dyn Fn(&Cell) -> f64| -> Vec<(String, Vec<Option<f64>>)> {
            systems
                .iter()
                .map(|s| {
                    (
                        s.clone(),
                        names.iter().map(|n| find(cells, n, s).map(value)).collect(),
                    )
                })
                .collect()
        };
    let closed = pubsub(false);
    let axes = |title, y| Axes {
        title,
        x: "workload",
        y,
        x_scale: Scale::Linear,
        y_scale: Scale::Log,
        legend: Corner::UpperRight,
    };
    plot::bars(
        &out.join("delivered_msgs.svg"),
        axes(
            "Delivered msgs/s at peak (closed loop, median)",
            "delivered msgs/s",
        ),
        &closed,
        &grid(&closed, &|c| c.delivered_msgs_per_s[0]),
    )?;
    let all: Vec<String> = closed.iter().cloned().chain(pubsub(true)).collect();
    plot::bars(
        &out.join("p99_latency.svg"),
        axes("p99 publish→receive latency (median)", "p99 µs"),
        &all,
        &grid(&all, &|c| c.latency_us[1]),
    )?;
    let mut load: Vec<Series> = Vec::new();
    for s in &systems {
        for (q, i) in [("p50", 0), ("p99", 1)] {
            let points: Vec<(f64, f64)> = cells
                .iter()
                .filter(|c| &c.system == s && c.kind == "pubsub")
                .filter_map(|c| Some((c.rate?, c.latency_us[i])))
                .collect();
            if !points.is_empty() {
                load.push(Series {
                    name: format!("{s} {q}"),
                    points,
                });
            }
        }
    }
    plot::lines(
        &out.join("latency_vs_load.svg"),
        Axes {
            title: "Latency vs offered load (open loop, median)",
            x: "offered msgs/s",
            y: "latency µs",
            x_scale: Scale::Log,
            y_scale: Scale::Log,
            legend: Corner::LowerRight,
        },
        &load,
    )
}
