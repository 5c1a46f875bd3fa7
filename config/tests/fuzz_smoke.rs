//! The config file and `STARLING_*` variables are untrusted text: a short proptest-based fuzz
//! smoke that runs in `make test`, next to the cargo-fuzz target (`config/fuzz`, documented in
//! docs/configuration.md) that runs for millions of executions by hand.
//!
//! Properties, for arbitrary text and for YAML made of real knob names with arbitrary scalar
//! values: reading never panics; whatever is accepted resolves and validates, or is refused with
//! an error that names its origin; and an accepted config survives its own round trip (rendered
//! with `to_yaml`, read back, it resolves to the same config).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

use proptest::prelude::*;
use starling_config::{BrokerConfig, ConfigFile, KNOBS, Layer, Sources};

/// Reads `text` as a config file and resolves it, as `starling-broker --config` does.
fn load(text: &str) -> Result<BrokerConfig, String> {
    let file = ConfigFile::from_yaml(text, "fuzz.yaml").map_err(|e| e.to_string())?;
    Sources {
        file: Layer::from(file),
        ..Sources::default()
    }
    .resolve()
    .map_err(|e| e.to_string())
}

fn assert_round_trip(cfg: &BrokerConfig) {
    let back = load(&cfg.to_yaml()).expect("an accepted config reads back");
    assert_eq!(&back, cfg, "the round trip changed the config");
}

/// A YAML scalar of any of the shapes a knob value may take, and some it may not.
fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|v| v.to_string()),
        any::<i64>().prop_map(|v| v.to_string()),
        (0u32..70).prop_map(|s| (1u128 << s).to_string()),
        Just("true".to_string()),
        Just("~".to_string()),
        Just("block".to_string()),
        Just("drop_old".to_string()),
        Just("json".to_string()),
        Just("\"127.0.0.1:7400\"".to_string()),
        Just("[1, 2]".to_string()),
        Just("{a: 1}".to_string()),
        "[a-z0-9_.:/ -]{0,24}".prop_map(|s| format!("{s:?}")),
    ]
}

fn knob_yaml() -> impl Strategy<Value = String> {
    let names: Vec<&'static str> = KNOBS
        .iter()
        .map(|k| k.name)
        .chain(["profile", "tier", "not_a_knob"])
        .collect();
    prop::collection::vec((prop::sample::select(names), scalar()), 0..8).prop_map(|pairs| {
        // A key twice is itself a case: it must be refused or resolved, never panic.
        pairs
            .into_iter()
            .map(|(k, v)| format!("{k}: {v}\n"))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_is_read_or_refused(text in "\\PC{0,200}") {
        if let Ok(cfg) = load(&text) {
            assert_round_trip(&cfg);
        }
        let _ = Layer::from_env([("STARLING_MAX_TOPICS".to_string(), text.clone())], &[]);
        let _ = Layer::from_env([("STARLING_PROFILE".to_string(), text)], &[]);
    }

    #[test]
    fn knob_files_resolve_round_trip_or_name_their_origin(text in knob_yaml()) {
        match load(&text) {
            Ok(cfg) => assert_round_trip(&cfg),
            Err(e) => prop_assert!(!e.is_empty()),
        }
    }
}

/// Alias expansion ("billion laughs", 10^9 elements if expanded): every knob is a scalar, so the
/// reader refuses the first sequence where the knob's value belongs, before any alias is
/// expanded, and says where.
#[test]
fn yaml_alias_bombs_are_refused_before_expansion() {
    let mut text = String::from("log_level: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for (i, prev) in ["b", "c", "d", "e", "f", "g", "h", "i"]
        .iter()
        .zip(["a", "b", "c", "d", "e", "f", "g", "h"])
    {
        text.push_str(&format!(
            "{i}: &{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
        ));
    }
    let err = load(&text).expect_err("a sequence is no log level");
    assert!(err.contains("line 1 column 15"), "{err}");
}
