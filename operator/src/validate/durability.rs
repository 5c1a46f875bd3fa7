//! `spec.durability` → the broker knobs it stands for (`durable_topics`, `storage_fsync`,
//! `storage_fsync_interval_ms`, `storage_retention_max_bytes`,
//! `storage_retention_max_age_ms`), merged into `spec.config`'s overrides so they take the
//! same path as every other knob (profile ⊕ tier ⊕ overrides, then the shared validation).
//! Refuses a spec that sets a knob in both places, and a `durability` without `storage` (the
//! CRD's rules refuse both at admission too). Pure.

use starling_config::ConfigOverrides;

use super::Problem;
use crate::crd::conditions::Reason;
use crate::crd::rules::DURABILITY_KNOBS;
use crate::crd::{BrokerClusterSpec, DurabilitySpec, duration};

/// The overrides `d` sets, or what is wrong with one of its values.
pub fn knobs(d: &DurabilitySpec) -> Result<ConfigOverrides, Problem> {
    let invalid = |message: String| Problem {
        reason: Reason::InvalidConfig,
        message,
    };
    let retention = d.retention.as_ref();
    let max_bytes = retention
        .and_then(|r| r.max_bytes.as_ref())
        .map(|q| {
            starling_config::quantity::parse_units(q.as_str()).ok_or_else(|| {
                invalid(format!(
                    "durability.retention.maxBytes: {:?} is not a quantity of bytes",
                    q.as_str()
                ))
            })
        })
        .transpose()?;
    let max_age_ms = retention
        .and_then(|r| r.max_age.as_deref())
        .map(|text| {
            duration::parse(text)
                .and_then(|d| u64::try_from(d.as_millis()).ok())
                .ok_or_else(|| {
                    invalid(format!(
                        "durability.retention.maxAge: {text:?} is not a duration such as 30m or 168h"
                    ))
                })
        })
        .transpose()?;
    Ok(ConfigOverrides {
        durable_topics: d.topics.clone(),
        storage_fsync: d.fsync,
        storage_fsync_interval_ms: d.fsync_interval_ms,
        storage_retention_max_bytes: max_bytes,
        storage_retention_max_age_ms: max_age_ms,
        ..ConfigOverrides::default()
    })
}

/// `spec.config`'s overrides with `spec.durability`'s knobs added; refused when `durability` is
/// set without `storage`, or sets a knob `config` sets too (the message names both fields).
pub fn merged_overrides(spec: &BrokerClusterSpec) -> Result<ConfigOverrides, Problem> {
    let config = spec.config.clone().unwrap_or_default();
    let Some(d) = &spec.durability else {
        return Ok(config);
    };
    if spec.storage.is_none() {
        return Err(Problem {
            reason: Reason::InvalidConfig,
            message: crate::crd::rules::DURABILITY_NEEDS_STORAGE_MESSAGE.to_string(),
        });
    }
    let durable = knobs(d)?;
    let ours = durable.set_fields();
    let theirs = config.set_fields();
    let both: Vec<String> = DURABILITY_KNOBS
        .iter()
        .filter(|(_, knob)| ours.contains(knob) && theirs.contains(knob))
        .map(|(field, knob)| format!("durability.{field} and config.{knob}"))
        .collect();
    if !both.is_empty() {
        return Err(Problem {
            reason: Reason::InvalidConfig,
            message: format!(
                "{} set the same knob; set it in one place (durability)",
                both.join(", ")
            ),
        });
    }
    Ok(ConfigOverrides {
        durable_topics: durable.durable_topics.or(config.durable_topics.clone()),
        storage_fsync: durable.storage_fsync.or(config.storage_fsync),
        storage_fsync_interval_ms: durable
            .storage_fsync_interval_ms
            .or(config.storage_fsync_interval_ms),
        storage_retention_max_bytes: durable
            .storage_retention_max_bytes
            .or(config.storage_retention_max_bytes),
        storage_retention_max_age_ms: durable
            .storage_retention_max_age_ms
            .or(config.storage_retention_max_age_ms),
        ..config
    })
}

#[cfg(test)]
mod tests {
    use starling_config::StorageFsync;

    use super::*;
    use crate::crd::{QuantityValue, RetentionSpec, StorageSpec};

    fn full() -> DurabilitySpec {
        DurabilitySpec {
            topics: Some(vec!["orders.*".into()]),
            fsync: Some(StorageFsync::Interval),
            fsync_interval_ms: Some(250),
            retention: Some(RetentionSpec {
                max_bytes: Some(QuantityValue::from("1Gi")),
                max_age: Some("168h".into()),
            }),
        }
    }

    fn storage() -> Option<StorageSpec> {
        Some(StorageSpec {
            size: QuantityValue::from("10Gi"),
            ..StorageSpec::default()
        })
    }

    #[test]
    fn every_field_becomes_its_knob() {
        let o = knobs(&full()).unwrap_or_else(|p| panic!("{}", p.message));
        assert_eq!(o.durable_topics, Some(vec!["orders.*".to_string()]));
        assert_eq!(o.storage_fsync, Some(StorageFsync::Interval));
        assert_eq!(o.storage_fsync_interval_ms, Some(250));
        assert_eq!(o.storage_retention_max_bytes, Some(1 << 30));
        assert_eq!(o.storage_retention_max_age_ms, Some(168 * 3600 * 1000));
        // The table the admission rule is generated from names exactly these knobs.
        let mut set = o.set_fields();
        set.sort_unstable();
        let mut table: Vec<&str> = DURABILITY_KNOBS.iter().map(|(_, k)| *k).collect();
        table.sort_unstable();
        assert_eq!(set, table);
    }

    #[test]
    fn bad_values_are_refused_naming_the_field() {
        let mut d = full();
        d.retention = Some(RetentionSpec {
            max_bytes: Some(QuantityValue::from("lots")),
            max_age: None,
        });
        let p = knobs(&d).err().unwrap_or_else(|| panic!("refused"));
        assert_eq!(p.reason, Reason::InvalidConfig);
        assert!(
            p.message.contains("durability.retention.maxBytes"),
            "{}",
            p.message
        );
        d.retention = Some(RetentionSpec {
            max_bytes: None,
            max_age: Some("a week".into()),
        });
        let p = knobs(&d).err().unwrap_or_else(|| panic!("refused"));
        assert!(
            p.message.contains("durability.retention.maxAge"),
            "{}",
            p.message
        );
    }

    #[test]
    fn config_keeps_the_knobs_durability_leaves_unset() {
        let spec = BrokerClusterSpec {
            storage: storage(),
            durability: Some(DurabilitySpec {
                topics: Some(vec!["audit.>".into()]),
                ..DurabilitySpec::default()
            }),
            config: Some(ConfigOverrides {
                storage_fsync: Some(StorageFsync::Never),
                ack_level: Some(starling_config::AckLevel::Persisted),
                ..ConfigOverrides::default()
            }),
            ..BrokerClusterSpec::default()
        };
        let o = merged_overrides(&spec).unwrap_or_else(|p| panic!("{}", p.message));
        assert_eq!(o.durable_topics, Some(vec!["audit.>".to_string()]));
        assert_eq!(o.storage_fsync, Some(StorageFsync::Never));
        assert_eq!(o.ack_level, Some(starling_config::AckLevel::Persisted));
    }

    #[test]
    fn a_knob_set_in_both_places_is_refused() {
        let spec = BrokerClusterSpec {
            storage: storage(),
            durability: Some(full()),
            config: Some(ConfigOverrides {
                storage_fsync: Some(StorageFsync::Always),
                storage_retention_max_age_ms: Some(1000),
                ..ConfigOverrides::default()
            }),
            ..BrokerClusterSpec::default()
        };
        let p = merged_overrides(&spec)
            .err()
            .unwrap_or_else(|| panic!("refused"));
        assert_eq!(p.reason, Reason::InvalidConfig);
        assert!(
            p.message
                .contains("durability.fsync and config.storage_fsync, durability.retention.maxAge and config.storage_retention_max_age_ms"),
            "{}",
            p.message
        );
    }

    #[test]
    fn durability_without_storage_is_refused() {
        let spec = BrokerClusterSpec {
            durability: Some(full()),
            ..BrokerClusterSpec::default()
        };
        let p = merged_overrides(&spec)
            .err()
            .unwrap_or_else(|| panic!("refused"));
        assert_eq!(p.reason, Reason::InvalidConfig);
        assert!(p.message.contains("storage"), "{}", p.message);
    }
}
