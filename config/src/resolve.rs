//! Building the effective config: `profile ⊕ tier sizing ⊕ explicit overrides`.
//!
//! Precedence, lowest to highest:
//! 1. the profile's values ([`Profile::config`]);
//! 2. the tier's sizing, when a tier is given ([`crate::TierSizing::apply_to`]);
//! 3. knobs set in the config file;
//! 4. knobs set through `STARLING_<KNOB>` environment variables.
//!
//! The profile and tier themselves are chosen by the first of: the command-line flag, the
//! `STARLING_PROFILE`/`STARLING_TIER` variable, the file's `profile`/`tier` key, the default
//! (`balanced`, no tier).

use std::path::Path;

use crate::enums::{Profile, Tier};
use crate::error::ConfigError;
use crate::knobs::{BrokerConfig, ConfigFile, ConfigOverrides};

/// Composes a config without validating it.
pub fn compose(profile: Profile, tier: Option<Tier>, overrides: &ConfigOverrides) -> BrokerConfig {
    let mut cfg = profile.config();
    if let Some(tier) = tier {
        tier.sizing().apply_to(&mut cfg);
        cfg.tier = Some(tier);
    }
    overrides.apply_to(&mut cfg);
    cfg
}

/// Composes and validates a config.
pub fn resolve(
    profile: Profile,
    tier: Option<Tier>,
    overrides: &ConfigOverrides,
) -> Result<BrokerConfig, ConfigError> {
    let cfg = compose(profile, tier, overrides);
    cfg.validate()?;
    Ok(cfg)
}

impl ConfigFile {
    /// Parses a config file's text. `origin` names the source in error messages.
    pub fn from_yaml(text: &str, origin: &str) -> Result<Self, ConfigError> {
        if text.trim().is_empty() {
            return Ok(ConfigFile::default());
        }
        serde_saphyr::from_str(text).map_err(|e| ConfigError::parse(origin, e))
    }

    /// Reads and parses a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_yaml(&text, &path.display().to_string())
    }
}

impl BrokerConfig {
    /// The config as YAML, in knob declaration order. The output is deterministic, so it can be
    /// hashed, and it parses back as a [`ConfigFile`] that resolves to the same config.
    pub fn to_yaml(&self) -> String {
        // Serialising plain structs, enums, strings and integers cannot fail.
        serde_saphyr::to_string(self).unwrap_or_default()
    }
}

/// One source of settings: an optional profile and tier choice plus knob overrides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Layer {
    /// Profile chosen by this source, if any.
    pub profile: Option<Profile>,
    /// Tier chosen by this source, if any.
    pub tier: Option<Tier>,
    /// Knobs set by this source.
    pub knobs: ConfigOverrides,
}

impl From<ConfigFile> for Layer {
    fn from(file: ConfigFile) -> Self {
        let (profile, tier, knobs) = file.into_parts();
        Layer {
            profile,
            tier,
            knobs,
        }
    }
}

impl Layer {
    /// Layers `upper` on top of `self`: whatever `upper` sets wins.
    pub fn merge(&mut self, upper: &Layer) {
        self.profile = upper.profile.or(self.profile);
        self.tier = upper.tier.or(self.tier);
        self.knobs.merge(&upper.knobs);
    }

    /// Reads every `STARLING_<NAME>` variable as the setting `<name>` (lower-cased): `profile`,
    /// `tier` or any knob. Values are YAML scalars (`64`, `true`, `drop_old`). Variables listed
    /// in `ignore` (e.g. `STARLING_CONFIG`) are skipped; any other unknown name is an error
    /// naming the variable.
    pub fn from_env<I>(vars: I, ignore: &[&str]) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = (String, String)>,
    {
        let mut sorted: Vec<(String, String)> = vars
            .into_iter()
            .filter(|(k, _)| k.starts_with(ENV_PREFIX) && !ignore.contains(&k.as_str()))
            .collect();
        sorted.sort();
        let mut layer = Layer::default();
        for (name, value) in sorted {
            let key = name[ENV_PREFIX.len()..].to_ascii_lowercase();
            // The value is read as a YAML scalar, then typed as the one field it sets.
            let scalar: serde_json::Value =
                serde_saphyr::from_str(&value).map_err(|e| ConfigError::parse(&name, e))?;
            let one: ConfigFile = serde_json::from_value(serde_json::Value::Object(
                [(key, scalar)].into_iter().collect(),
            ))
            .map_err(|e| ConfigError::parse(&name, e))?;
            layer.merge(&Layer::from(one));
        }
        Ok(layer)
    }
}

/// Prefix of environment variables that override settings.
pub const ENV_PREFIX: &str = "STARLING_";

/// Every source of broker settings, lowest precedence first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sources {
    /// The config file, if one was given.
    pub file: Layer,
    /// `STARLING_*` environment variables.
    pub env: Layer,
    /// `--profile` / `--tier` flags (only their profile and tier are read).
    pub flags: Layer,
}

impl Sources {
    /// Resolves the sources into a validated config, following the documented precedence.
    pub fn resolve(&self) -> Result<BrokerConfig, ConfigError> {
        let mut all = self.file.clone();
        all.merge(&self.env);
        all.merge(&Layer {
            knobs: ConfigOverrides::default(),
            ..self.flags.clone()
        });
        resolve(all.profile.unwrap_or_default(), all.tier, &all.knobs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn precedence_profile_then_tier_then_file_then_env() {
        let file = ConfigFile::from_yaml(
            "profile: throughput\ntier: small\npub_queue_depth: 777\nevent_batch_max_delay_us: 900\n",
            "test.yaml",
        )
        .expect("file parses");
        let env = Layer::from_env(env(&[("STARLING_EVENT_BATCH_MAX_DELAY_US", "1200")]), &[])
            .expect("env parses");
        let cfg = Sources {
            file: file.into(),
            env,
            flags: Layer::default(),
        }
        .resolve()
        .expect("valid");
        assert_eq!(cfg.profile, Profile::Throughput);
        assert_eq!(cfg.tier, Some(Tier::Small));
        assert_eq!(
            cfg.event_batch_max_events, 32,
            "tier caps the throughput batch"
        );
        assert_eq!(cfg.subscriber_writer_lanes, 2, "tier replaces lanes");
        assert_eq!(cfg.pub_queue_depth, 777, "file beats tier");
        assert_eq!(cfg.event_batch_max_delay_us, 1200, "env beats file");
        assert_eq!(
            cfg.event_stream_recv_window,
            128 << 20,
            "profile value kept"
        );
    }

    #[test]
    fn flag_profile_beats_env_and_file() {
        let sources = Sources {
            file: Layer {
                profile: Some(Profile::Throughput),
                ..Layer::default()
            },
            env: Layer {
                profile: Some(Profile::Balanced),
                ..Layer::default()
            },
            flags: Layer {
                profile: Some(Profile::Latency),
                ..Layer::default()
            },
        };
        assert_eq!(
            sources.resolve().map(|c| c.profile).ok(),
            Some(Profile::Latency)
        );
    }

    #[test]
    fn env_errors_name_the_variable() {
        let err = Layer::from_env(env(&[("STARLING_NOT_A_KNOB", "1")]), &[]).err();
        let msg = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.starts_with("STARLING_NOT_A_KNOB:"), "{msg}");
        assert!(!msg.contains('\n'));
        let err = Layer::from_env(env(&[("STARLING_PUB_QUEUE_DEPTH", "lots")]), &[]).err();
        assert!(
            err.map(|e| e.to_string())
                .unwrap_or_default()
                .contains("STARLING_PUB_QUEUE_DEPTH")
        );
        let ok = Layer::from_env(
            env(&[("STARLING_CONFIG", "/x"), ("HOME", "/root")]),
            &["STARLING_CONFIG"],
        );
        assert_eq!(ok.ok(), Some(Layer::default()));
    }

    #[test]
    fn env_sets_profile_and_enums() {
        let layer = Layer::from_env(
            env(&[
                ("STARLING_PROFILE", "latency"),
                ("STARLING_SLOW_SUBSCRIBER_POLICY", "block"),
            ]),
            &[],
        );
        let layer = layer.unwrap_or_default();
        assert_eq!(layer.profile, Some(Profile::Latency));
        assert_eq!(
            layer.knobs.slow_subscriber_policy,
            Some(crate::SlowSubscriberPolicy::Block)
        );
    }

    #[test]
    fn unknown_file_key_is_one_line_error_naming_the_key() {
        let err = ConfigFile::from_yaml("event_batch_max_eventz: 3\n", "cfg.yaml").err();
        let msg = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            msg.starts_with("cfg.yaml:") && msg.contains("event_batch_max_eventz"),
            "{msg}"
        );
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn printed_config_round_trips() {
        for p in Profile::ALL {
            for t in [None, Some(Tier::Medium)] {
                let cfg = compose(*p, t, &ConfigOverrides::default());
                let back = ConfigFile::from_yaml(&cfg.to_yaml(), "printed").map(Layer::from);
                let back = back.unwrap_or_default();
                let again = Sources {
                    file: back,
                    ..Sources::default()
                }
                .resolve()
                .ok();
                assert_eq!(again.as_ref(), Some(&cfg));
            }
        }
    }

    #[test]
    fn deprecated_ack_on_commit_still_loads_as_an_ack_level() {
        use crate::AckLevel;
        for (text, level) in [
            ("ack_on_commit: true\n", AckLevel::Committed),
            ("ack_on_commit: false\n", AckLevel::Received),
            (
                "ack_on_commit: true\nack_level: persisted\n",
                AckLevel::Persisted,
            ),
        ] {
            let file = ConfigFile::from_yaml(text, "t").expect("parses");
            assert_eq!(file.deprecations().len(), 1, "{text}");
            let cfg = Sources {
                file: Layer::from(file),
                ..Sources::default()
            }
            .resolve()
            .expect("valid");
            assert_eq!(cfg.ack_level, level, "{text}");
        }
        let env = Layer::from_env(env(&[("STARLING_ACK_ON_COMMIT", "true")]), &[]).expect("env");
        assert_eq!(env.knobs.ack_level, Some(AckLevel::Committed));
        let file = ConfigFile::from_yaml("ack_level: committed\n", "t").expect("parses");
        assert!(file.deprecations().is_empty());
    }

    #[test]
    fn missing_file_names_the_path() {
        let err = ConfigFile::load(Path::new("/nonexistent/starling.yaml")).err();
        assert!(
            err.map(|e| e.to_string())
                .unwrap_or_default()
                .contains("/nonexistent/starling.yaml")
        );
    }
}
