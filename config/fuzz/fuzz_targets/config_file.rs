//! Fuzz target: a broker config file, the one input a broker reads from disk before it serves.
//! Arbitrary text goes through what `starling-broker --config FILE` does with it: parse the
//! YAML, layer it, resolve and validate. Checks that nothing panics (YAML alias bombs and deep
//! nesting included: libFuzzer's RSS and time limits catch a blow-up) and that an accepted
//! config survives its own round trip: rendered with `to_yaml` and read back, it resolves to the
//! same config. The same text is also read as one `STARLING_*` variable's value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use starling_config::{ConfigFile, Layer, Sources};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(file) = ConfigFile::from_yaml(text, "fuzz.yaml") {
        let sources = Sources {
            file: Layer::from(file),
            ..Sources::default()
        };
        if let Ok(cfg) = sources.resolve() {
            let again = ConfigFile::from_yaml(&cfg.to_yaml(), "round-trip")
                .map(Layer::from)
                .map(|file| Sources {
                    file,
                    ..Sources::default()
                })
                .and_then(|s| s.resolve());
            match again {
                Ok(back) => assert_eq!(back, cfg, "round trip changed the config"),
                Err(e) => panic!("an accepted config did not read back: {e}"),
            }
        }
    }
    // One environment variable whose value is the text: a knob or the profile/tier.
    for name in ["STARLING_MAX_TOPICS", "STARLING_PROFILE", "STARLING_LOG_LEVEL"] {
        let _ = Layer::from_env([(name.to_string(), text.to_string())], &[]);
    }
});
