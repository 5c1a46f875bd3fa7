//! `docs/configuration.md` must show exactly what the code defines. The block between the
//! `BEGIN GENERATED` and `END GENERATED` markers is rendered from the knob list, the profiles
//! and the tiers; run `make docs` (or `UPDATE_DOCS=1 cargo test -p starling-config --test docs`)
//! to refresh it after changing them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

use std::path::PathBuf;

const BEGIN: &str = "<!-- BEGIN GENERATED: starling_config::reference::configuration_reference -->";
const END: &str = "<!-- END GENERATED -->";

#[test]
fn configuration_reference_matches_the_tables() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md");
    let doc = std::fs::read_to_string(&path).expect("docs/configuration.md exists");
    let (head, rest) = doc.split_once(BEGIN).expect("begin marker present");
    let (_, tail) = rest.split_once(END).expect("end marker present");
    let generated = starling_config::reference::configuration_reference();
    let expected = format!("{head}{BEGIN}\n{generated}\n{END}{tail}");
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &expected).expect("write docs");
        return;
    }
    assert!(
        doc == expected,
        "docs/configuration.md is out of date with the config tables: run `make docs` and commit the result"
    );
}
