//! The committed `docs/operator.md` carries the current generated reference.

use super::*;

const REGENERATE: &str = "cargo run -p starling-operator --bin crdgen -- --write-docs docs/operator.md` or `UPDATE_DOCS=1 cargo test -p starling-operator docs::";

#[test]
fn committed_operator_doc_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operator.md");
    if std::env::var_os("UPDATE_DOCS").is_some() {
        update_file(Path::new(path)).unwrap_or_else(|e| panic!("{e}"));
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    let regenerated = splice(&committed).unwrap_or_default();
    assert!(
        !committed.is_empty() && committed == regenerated,
        "docs/operator.md is out of date; regenerate it with `{REGENERATE}`"
    );
}

#[test]
fn reference_covers_fields_conditions_tiers_and_profiles() {
    let text = reference();
    for field in [
        "spec.tier",
        "spec.profile",
        "spec.replicas",
        "spec.config",
        "spec.resources.requests.cpu",
        "spec.storage.size",
        "spec.tls.secretName",
        "spec.image",
        "spec.podTemplate.affinity",
        "spec.autoscaling.minTier",
        "spec.paused",
        "status.conditions",
        "status.effectiveTier",
        "status.configHash",
        "status.endpoints.host",
        "status.selector",
    ] {
        assert!(text.contains(&format!("`{field}`")), "{field} missing");
    }
    for r in Reason::ALL {
        assert!(text.contains(&format!("`{}`", r.as_str())), "{r:?} missing");
    }
    for t in Tier::ALL {
        assert!(
            text.contains(&format!("| `{t}` | {} |", t.sizing().replicas)),
            "{t} row"
        );
    }
    for p in Profile::ALL {
        assert!(text.contains(&format!("Profile `{p}`")), "{p}");
    }
    for knob in starling_config::KNOBS {
        assert!(
            text.contains(&format!("| `{}` |", knob.name)),
            "{} missing",
            knob.name
        );
    }
    assert!(
        text.contains("`--watch-namespaces`") && text.contains("STARLING_OPERATOR_BROKER_IMAGE")
    );
    assert!(!text.contains("| `--help`"));
}

#[test]
fn splice_needs_both_markers() {
    assert!(splice("no markers").is_err());
    let doc = format!("intro\n{BEGIN}\nold\n{END}\noutro\n");
    let out = splice(&doc).unwrap_or_default();
    assert!(out.starts_with("intro\n") && out.ends_with(&format!("{END}\noutro\n")));
    assert!(!out.contains("\nold\n"));
}
