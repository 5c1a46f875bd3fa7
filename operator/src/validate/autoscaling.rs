//! `spec.autoscaling` parsed and checked into a [`Policy`]: bounds, thresholds and timing. Part
//! of validation (a bad policy is a `Degraded` refusal); the autoscaler reads the same
//! [`Policy`].

use std::time::Duration;

use starling_config::Tier;

use crate::crd::AutoscalingSpec;
use crate::crd::duration;

/// `spec.autoscaling`, parsed and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Smallest tier.
    pub min_tier: Tier,
    /// Largest tier.
    pub max_tier: Tier,
    /// Percent of the current tier's capacity.
    pub scale_up_threshold: u32,
    /// How long above it.
    pub scale_up_window: Duration,
    /// Percent of the next lower tier's capacity.
    pub scale_down_threshold: u32,
    /// How long below it.
    pub scale_down_window: Duration,
    /// Minimum time between changes.
    pub cooldown: Duration,
    /// Time between scrapes.
    pub scrape_interval: Duration,
}

impl Policy {
    /// Parses and checks the spec; the error names the field (it becomes a `Degraded` message).
    pub fn from_spec(a: &AutoscalingSpec) -> Result<Policy, String> {
        let dur = |field: &str, text: &str| {
            duration::parse(text).ok_or_else(|| {
                format!(
                    "autoscaling.{field} `{text}` is not a duration such as 15s, 3m, 1h30m or 500ms"
                )
            })
        };
        let pct = |field: &str, v: i32| match u32::try_from(v) {
            Ok(p) if (1..=100).contains(&p) => Ok(p),
            _ => Err(format!(
                "autoscaling.{field} must be a percentage above 0 and at most 100, got {v}"
            )),
        };
        let p = Policy {
            min_tier: a.min_tier,
            max_tier: a.max_tier,
            scale_up_threshold: pct("scaleUpThreshold", a.scale_up_threshold)?,
            scale_up_window: dur("scaleUpWindow", &a.scale_up_window)?,
            scale_down_threshold: pct("scaleDownThreshold", a.scale_down_threshold)?,
            scale_down_window: dur("scaleDownWindow", &a.scale_down_window)?,
            cooldown: dur("cooldown", &a.cooldown)?,
            scrape_interval: dur("scrapeInterval", &a.scrape_interval)?,
        };
        if p.scale_down_threshold >= p.scale_up_threshold {
            return Err(format!(
                "autoscaling.scaleDownThreshold ({}) must be below autoscaling.scaleUpThreshold ({})",
                p.scale_down_threshold, p.scale_up_threshold
            ));
        }
        if p.scrape_interval < Duration::from_secs(1) {
            return Err("autoscaling.scrapeInterval must be at least 1s".into());
        }
        for (field, w) in [
            ("scaleUpWindow", p.scale_up_window),
            ("scaleDownWindow", p.scale_down_window),
        ] {
            if w < p.scrape_interval {
                return Err(format!(
                    "autoscaling.{field} ({}) must be at least autoscaling.scrapeInterval ({})",
                    duration::format(w),
                    duration::format(p.scrape_interval)
                ));
            }
        }
        Ok(p)
    }

    /// How much history the decision can look at.
    pub fn longest_window(&self) -> Duration {
        self.scale_up_window.max(self.scale_down_window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse_and_bad_specs_name_the_field() {
        let p = Policy::from_spec(&AutoscalingSpec::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.scale_up_threshold, 80);
        assert_eq!(p.scale_down_threshold, 50);
        assert_eq!(p.scale_up_window, Duration::from_secs(180));
        assert_eq!(p.scale_down_window, Duration::from_secs(900));
        assert_eq!(p.cooldown, Duration::from_secs(300));
        assert_eq!(p.scrape_interval, Duration::from_secs(15));
        assert_eq!(p.longest_window(), Duration::from_secs(900));
        let bad = |f: fn(&mut AutoscalingSpec)| {
            let mut a = AutoscalingSpec::default();
            f(&mut a);
            Policy::from_spec(&a).err().unwrap_or_default()
        };
        assert!(bad(|a| a.scale_up_window = "3 minutes".into()).contains("scaleUpWindow"));
        assert!(bad(|a| a.scale_down_threshold = 80).contains("must be below"));
        assert!(bad(|a| a.scale_up_threshold = 101).contains("scaleUpThreshold"));
        assert!(bad(|a| a.scale_down_threshold = 0).contains("scaleDownThreshold"));
        assert!(bad(|a| a.scrape_interval = "0s".into()).contains("at least 1s"));
        assert!(
            bad(|a| a.scale_up_window = "5s".into())
                .contains("at least autoscaling.scrapeInterval")
        );
    }
}
