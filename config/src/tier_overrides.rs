//! Admin overrides of the tier table: replicas, CPU, memory and capacity per tier, so a
//! platform team can fit the tiers to its nodes (the operator reads them from a file rendered
//! from its Helm values).
//!
//! ```yaml
//! small:
//!   replicas: 1
//!   cpuRequest: 100m
//!   cpuLimit: "1"
//!   memoryRequest: 128Mi
//!   memoryLimit: 256Mi
//!   capacityMsgsPerSec: 2000
//! medium:
//!   replicas: 3
//! ```

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::enums::Tier;
use crate::error::ConfigError;
use crate::tier::TierSizing;

/// Overrides of one tier's row. Unset fields keep the built-in value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TierOverride {
    /// Default broker replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// CPU request per broker (a Kubernetes quantity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_request: Option<String>,
    /// CPU limit per broker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_limit: Option<String>,
    /// Memory request per broker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_request: Option<String>,
    /// Memory limit per broker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<String>,
    /// Publish capacity (msg/s) the autoscaler plans with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_msgs_per_sec: Option<u64>,
}

/// The tier table as an operator uses it: built-in rows with admin overrides on top.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct TierTable(pub BTreeMap<Tier, TierOverride>);

impl TierTable {
    /// Parses overrides from YAML (an empty document means no overrides). `origin` names the
    /// source in errors.
    pub fn from_yaml(text: &str, origin: &str) -> Result<Self, ConfigError> {
        if text.trim().is_empty() {
            return Ok(TierTable::default());
        }
        let table: TierTable =
            serde_saphyr::from_str(text).map_err(|e| ConfigError::parse(origin, e))?;
        for (tier, o) in &table.0 {
            if o.replicas == Some(0) {
                return Err(ConfigError::parse(
                    origin,
                    format!("{tier}.replicas must be at least 1"),
                ));
            }
            if o.replicas.is_some_and(|r| r > crate::MAX_REPLICAS) {
                return Err(ConfigError::parse(
                    origin,
                    format!("{tier}.replicas must be at most {}", crate::MAX_REPLICAS),
                ));
            }
            if o.capacity_msgs_per_sec == Some(0) {
                return Err(ConfigError::parse(
                    origin,
                    format!("{tier}.capacityMsgsPerSec must be at least 1"),
                ));
            }
        }
        Ok(table)
    }

    /// The sizing of `tier`: the built-in row with this table's overrides applied.
    pub fn sizing(&self, tier: Tier) -> TierSizing {
        let mut s = tier.sizing();
        if let Some(o) = self.0.get(&tier) {
            if let Some(v) = o.replicas {
                s.replicas = v;
            }
            if let Some(v) = &o.cpu_request {
                s.resources.cpu_request = v.clone();
            }
            if let Some(v) = &o.cpu_limit {
                s.resources.cpu_limit = v.clone();
            }
            if let Some(v) = &o.memory_request {
                s.resources.memory_request = v.clone();
            }
            if let Some(v) = &o.memory_limit {
                s.resources.memory_limit = v.clone();
            }
            if let Some(v) = o.capacity_msgs_per_sec {
                s.capacity_msgs_per_sec = v;
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_replace_only_what_they_set() {
        let t = TierTable::from_yaml("small:\n  cpuRequest: 100m\n  replicas: 2\n", "values")
            .expect("parses");
        let s = t.sizing(Tier::Small);
        assert_eq!((s.replicas, s.resources.cpu_request.as_str()), (2, "100m"));
        assert_eq!(
            s.resources.memory_limit,
            Tier::Small.sizing().resources.memory_limit
        );
        assert_eq!(t.sizing(Tier::Large), Tier::Large.sizing());
        assert_eq!(
            TierTable::from_yaml("", "x").map(|t| t.0.len()).ok(),
            Some(0)
        );
    }

    #[test]
    fn bad_overrides_are_named() {
        let err = TierTable::from_yaml("huge:\n  replicas: 2\n", "tiers.yaml")
            .err()
            .map(|e| e.to_string());
        assert!(err.unwrap_or_default().starts_with("tiers.yaml:"));
        let err = TierTable::from_yaml("small:\n  cpu: 1\n", "tiers.yaml")
            .err()
            .map(|e| e.to_string());
        assert!(err.unwrap_or_default().contains("cpu"));
        let err = TierTable::from_yaml("medium:\n  replicas: 0\n", "t")
            .err()
            .map(|e| e.to_string());
        assert!(err.unwrap_or_default().contains("medium.replicas"));
        let err = TierTable::from_yaml("large:\n  replicas: 101\n", "t")
            .err()
            .map(|e| e.to_string());
        assert!(
            err.unwrap_or_default()
                .contains("large.replicas must be at most 100")
        );
        assert!(TierTable::from_yaml("large:\n  replicas: 100\n", "t").is_ok());
    }
}
