//! THE decision: a pure function from the window of observations and the cluster's state to
//! one [`Decision`].
//!
//! - **Up** one tier when every observation of the last `scaleUpWindow` has a publish rate
//!   above `scaleUpThreshold` % of the *current* tier's capacity.
//! - **Down** one tier when every observation of the last `scaleDownWindow` is below
//!   `scaleDownThreshold` % of the *next lower* tier's capacity. Since the thresholds are
//!   relative to different capacities and down < up, a load that just caused a scale up is far
//!   above the scale-down mark of the new tier: the gap is the hysteresis.
//! - Never beyond `minTier`/`maxTier`, never within `cooldown` of the last change, never while
//!   the cluster is not Ready, paused or rolling out.
//! - A window that is not fully covered by complete observations (a pod missing, a scrape
//!   failed, the operator restarted) never moves the tier; it is reported as `Hold`. A single
//!   complete observation on the wrong side of a threshold is enough to say `Stay`, though.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use starling_config::{Tier, TierTable};

use super::Policy;
use super::rates::{Observation, secs_between};
use crate::crd::duration::format as fmt_duration;

/// Why the tier is held where it is although the decision function was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldReason {
    /// Some observations of the window are missing or partial.
    IncompleteData,
    /// The cluster is not Ready.
    NotReady,
    /// A rollout or scale is in progress (including the last tier change's).
    RollingOut,
    /// `spec.paused` is true.
    Paused,
    /// A change would be due but the cooldown since the last one has not passed.
    Cooldown,
}

impl HoldReason {
    /// The metric label and status word.
    pub fn as_str(self) -> &'static str {
        match self {
            HoldReason::IncompleteData => "incomplete_data",
            HoldReason::NotReady => "not_ready",
            HoldReason::RollingOut => "rolling_out",
            HoldReason::Paused => "paused",
            HoldReason::Cooldown => "cooldown",
        }
    }
}

/// What to do with the tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The load is between the thresholds (or at a bound): nothing to do.
    Stay(String),
    /// Move one tier up.
    ScaleUp {
        /// The new tier.
        to: Tier,
        /// Why, e.g. `publish 9.1k msg/s > 80% of 10k for 3m`.
        reason: String,
    },
    /// Move one tier down.
    ScaleDown {
        /// The new tier.
        to: Tier,
        /// Why.
        reason: String,
    },
    /// Not allowed to move now.
    Hold(HoldReason, String),
}

impl Decision {
    /// `Stay`, `ScaleUp`, `ScaleDown` or `Hold` (the status' `recommendation`).
    pub fn recommendation(&self) -> &'static str {
        match self {
            Decision::Stay(_) => "Stay",
            Decision::ScaleUp { .. } => "ScaleUp",
            Decision::ScaleDown { .. } => "ScaleDown",
            Decision::Hold(..) => "Hold",
        }
    }

    /// The label of `starling_operator_autoscale_decisions_total{outcome}`.
    pub fn outcome(&self) -> &'static str {
        match self {
            Decision::Stay(_) => "stay",
            Decision::ScaleUp { .. } => "scale_up",
            Decision::ScaleDown { .. } => "scale_down",
            Decision::Hold(r, _) => match r {
                HoldReason::IncompleteData => "hold_incomplete_data",
                HoldReason::NotReady => "hold_not_ready",
                HoldReason::RollingOut => "hold_rolling_out",
                HoldReason::Paused => "hold_paused",
                HoldReason::Cooldown => "hold_cooldown",
            },
        }
    }

    /// The reason in words.
    pub fn reason(&self) -> &str {
        match self {
            Decision::Stay(r) | Decision::Hold(_, r) => r,
            Decision::ScaleUp { reason, .. } | Decision::ScaleDown { reason, .. } => reason,
        }
    }

    /// The new tier, when the decision is a move.
    pub fn target(&self) -> Option<Tier> {
        match self {
            Decision::ScaleUp { to, .. } | Decision::ScaleDown { to, .. } => Some(*to),
            _ => None,
        }
    }
}

/// Every outcome label, for docs and tests.
pub const OUTCOMES: &[&str] = &[
    "stay",
    "scale_up",
    "scale_down",
    "hold_incomplete_data",
    "hold_not_ready",
    "hold_rolling_out",
    "hold_paused",
    "hold_cooldown",
];

/// Everything the decision depends on.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    /// Observations, oldest first (older ones than the longest window are ignored).
    pub window: &'a [Observation],
    /// The tier currently chosen (`effective_tier`).
    pub current: Tier,
    /// Bounds, thresholds and timing.
    pub policy: &'a Policy,
    /// Tier capacities (with the operator's overrides).
    pub tiers: &'a TierTable,
    /// When the tier last changed (`status.autoscaling.lastChangeTime`).
    pub last_change: Option<Timestamp>,
    /// The Ready condition is True.
    pub ready: bool,
    /// A rollout or scale is in flight, or the rendered tier is not the chosen one yet.
    pub rolling_out: bool,
    /// `spec.paused`.
    pub paused: bool,
    /// The current time.
    pub now: Timestamp,
}

/// Formats a rate like `9.1k`, `10k`, `500`, `1.2M`.
pub fn human(v: f64) -> String {
    let (scaled, unit) = if v.abs() >= 1e6 {
        (v / 1e6, "M")
    } else if v.abs() >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let text = if scaled.abs() >= 100.0 || (scaled - scaled.round()).abs() < 0.05 {
        format!("{:.0}", scaled)
    } else {
        format!("{:.1}", scaled)
    };
    format!("{text}{unit}")
}

/// How a window looks against a predicate.
#[derive(Debug, Clone, PartialEq)]
enum Sustained {
    /// Every observation of the fully covered window satisfies it; the extreme value.
    Yes(f64),
    /// A complete observation breaks it.
    No,
    /// The complete observations satisfy it but the window is not covered.
    Incomplete(String),
}

fn sustained(
    obs: &[Observation],
    now: Timestamp,
    window: Duration,
    max_gap: Duration,
    above: bool,
    limit: f64,
) -> Sustained {
    let w = window.as_secs_f64();
    let in_window: Vec<&Observation> = obs.iter().filter(|o| secs_between(o.to, now) < w).collect();
    let holds = |o: &Observation| {
        if above {
            o.load() > limit
        } else {
            o.load() < limit
        }
    };
    if in_window.iter().any(|o| o.complete() && !holds(o)) {
        return Sustained::No;
    }
    let Some(first) = in_window.first() else {
        return Sustained::Incomplete("no observations yet".into());
    };
    if let Some(o) = in_window.iter().find(|o| !o.complete()) {
        let why = match o.missing.first() {
            Some(m) => m.clone(),
            None if o.pods_expected == 0 => "no broker pods found".to_string(),
            None => "pods not rated".to_string(),
        };
        return Sustained::Incomplete(format!(
            "{}/{} pods rated at {} ({why})",
            o.pods_rated, o.pods_expected, o.to
        ));
    }
    let covered = secs_between(first.from, now);
    if covered < w {
        return Sustained::Incomplete(format!(
            "{} of the {} window observed",
            fmt_duration(Duration::from_secs_f64(covered.max(0.0))),
            fmt_duration(window)
        ));
    }
    for pair in in_window.windows(2) {
        if secs_between(pair[0].to, pair[1].from) > 0.0 {
            return Sustained::Incomplete(format!(
                "no observation from {} to {}",
                pair[0].to, pair[1].from
            ));
        }
    }
    let last = in_window.last().map_or(first.to, |o| o.to);
    if secs_between(last, now) > max_gap.as_secs_f64() {
        return Sustained::Incomplete(format!("no observation since {last}"));
    }
    let loads = in_window.iter().map(|o| o.load());
    Sustained::Yes(if above {
        loads.fold(f64::INFINITY, f64::min)
    } else {
        loads.fold(0.0, f64::max)
    })
}

/// Decides whether to move the tier. Pure.
pub fn decide(input: &Input<'_>) -> Decision {
    let p = input.policy;
    if input.paused {
        return Decision::Hold(HoldReason::Paused, "spec.paused is true".into());
    }
    if input.rolling_out {
        return Decision::Hold(
            HoldReason::RollingOut,
            "a rollout or scale is in progress".into(),
        );
    }
    if !input.ready {
        return Decision::Hold(HoldReason::NotReady, "the cluster is not Ready".into());
    }
    let max_gap = p.scrape_interval * 3;
    let cap = |t: Tier| input.tiers.sizing(t).capacity_msgs_per_sec as f64;
    let current = input.current;
    let cur_cap = cap(current);
    let up_limit = cur_cap * f64::from(p.scale_up_threshold) / 100.0;
    let up = sustained(
        input.window,
        input.now,
        p.scale_up_window,
        max_gap,
        true,
        up_limit,
    );
    let down_target = current.down().filter(|t| *t >= p.min_tier);
    let down = down_target.map(|lower| {
        let lower_cap = cap(lower);
        let limit = lower_cap * f64::from(p.scale_down_threshold) / 100.0;
        (
            lower,
            lower_cap,
            sustained(
                input.window,
                input.now,
                p.scale_down_window,
                max_gap,
                false,
                limit,
            ),
        )
    });
    let latest = input.window.last().map_or(0.0, Observation::load);
    let wanted = match (&up, &down) {
        (Sustained::Yes(min), _) => match current.up().filter(|t| *t <= p.max_tier) {
            Some(to) => Some(Decision::ScaleUp {
                to,
                reason: format!(
                    "tier {current}→{to}: publish {} msg/s > {}% of {} for {}",
                    human(*min),
                    p.scale_up_threshold,
                    human(cur_cap),
                    fmt_duration(p.scale_up_window)
                ),
            }),
            None => {
                return Decision::Stay(format!(
                    "publish {} msg/s is above {}% of {} but {current} is the maxTier",
                    human(*min),
                    p.scale_up_threshold,
                    human(cur_cap)
                ));
            }
        },
        (_, Some((to, lower_cap, Sustained::Yes(max)))) => Some(Decision::ScaleDown {
            to: *to,
            reason: format!(
                "tier {current}→{to}: publish {} msg/s < {}% of {} for {}",
                human(*max),
                p.scale_down_threshold,
                human(*lower_cap),
                fmt_duration(p.scale_down_window)
            ),
        }),
        _ => None,
    };
    if let Some(change) = wanted {
        if let Some(last) = input.last_change {
            let since = secs_between(last, input.now);
            if since < p.cooldown.as_secs_f64() {
                return Decision::Hold(
                    HoldReason::Cooldown,
                    format!(
                        "would move ({}) but the last change was {} ago (cooldown {})",
                        change.reason(),
                        fmt_duration(Duration::from_secs_f64(since.max(0.0))),
                        fmt_duration(p.cooldown)
                    ),
                );
            }
        }
        return change;
    }
    for s in [Some(&up), down.as_ref().map(|d| &d.2)]
        .into_iter()
        .flatten()
    {
        if let Sustained::Incomplete(why) = s {
            return Decision::Hold(HoldReason::IncompleteData, why.clone());
        }
    }
    let bound = if latest > up_limit && current.up().is_some_and(|t| t <= p.max_tier) {
        format!(
            "; above {}%, not yet for {}",
            p.scale_up_threshold,
            fmt_duration(p.scale_up_window)
        )
    } else if let Some((lower, lower_cap, _)) = &down {
        let limit = lower_cap * f64::from(p.scale_down_threshold) / 100.0;
        if latest < limit {
            format!(
                "; below {}% of {} ({lower}), not yet for {}",
                p.scale_down_threshold,
                human(*lower_cap),
                fmt_duration(p.scale_down_window)
            )
        } else {
            String::new()
        }
    } else if current.down().is_some() {
        format!("; {current} is the minTier")
    } else {
        String::new()
    };
    Decision::Stay(format!(
        "publish {} msg/s is {:.0}% of {} ({current}){bound}",
        human(latest),
        if cur_cap > 0.0 {
            latest / cur_cap * 100.0
        } else {
            0.0
        },
        human(cur_cap)
    ))
}

#[cfg(test)]
mod tests;
