//! The topics document: per-topic durability policies. The operator writes it from a
//! cluster's `BrokerTopic` objects (one [`TopicPolicy`] each); the broker reads it from the
//! file the knob `topics_file` names and re-reads it while it runs. This module is the one
//! definition of its schema, its validation and the rule that picks a topic's policy, so the
//! operator (which renders and checks it) and the broker (which applies it) cannot disagree.
//!
//! A topic matching a policy is durable with the policy's settings; each setting a policy
//! leaves unset takes the broker's knob (`durable_replicas`, `storage_fsync`,
//! `storage_retention_max_bytes`, `storage_retention_max_age_ms`, `max_frame_bytes`). A
//! topic that no policy matches is durable only if `durable_topics` names it, with the knobs'
//! values. When several policies match one topic, [`TopicsDocument::policy_for`] takes the
//! most specific: an exact name first, then the pattern with the most literal tokens, then
//! the one listed first (the operator lists them by `BrokerTopic` name).

use serde::{Deserialize, Serialize};
use starling_access::Pattern;

use crate::enums::StorageFsync;

/// The version of the document this build writes and reads.
pub const TOPICS_DOCUMENT_VERSION: u32 = 1;

/// The replica counts a durable topic may have.
pub const ALLOWED_REPLICAS: [u32; 3] = [1, 3, 5];

/// Most policies one document may hold (each is matched against every topic a broker opens).
pub const MAX_TOPIC_POLICIES: usize = 1024;

/// The topics document (`topics_file`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicsDocument {
    /// [`TOPICS_DOCUMENT_VERSION`]; a broker refuses a version it does not know (and keeps
    /// what is in force).
    pub version: u32,
    /// The policies, most specific match wins ([`TopicsDocument::policy_for`]).
    #[serde(default)]
    pub topics: Vec<TopicPolicy>,
}

/// One durable topic, or a pattern of them, and how its log is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct TopicPolicy {
    /// Who defined the policy (the `BrokerTopic`'s name, for logs, metrics and status).
    pub name: String,
    /// The topic name, or a pattern in the access pattern language.
    pub pattern: String,
    /// Copies of the log on distinct cluster members: 1, 3 or 5 (`durable_replicas` when
    /// unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// When the log is fsynced (`storage_fsync` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsync: Option<StorageFsync>,
    /// Most bytes the log keeps on disk, 0 for no limit (`storage_retention_max_bytes` when
    /// unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_max_bytes: Option<u64>,
    /// How long (ms) a segment is kept after its last record, 0 for no limit
    /// (`storage_retention_max_age_ms` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_max_age_ms: Option<u64>,
    /// Largest message payload (bytes) a publish to the topic may carry; at most
    /// `max_frame_bytes` (which bounds it when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_bytes: Option<u32>,
}

/// Why a topics document is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicsError {
    /// Not JSON of the document's schema.
    #[error("the topics document is not valid: {0}")]
    Syntax(String),
    /// A version this build does not know.
    #[error(
        "the topics document has version {0}; this build reads version {TOPICS_DOCUMENT_VERSION}"
    )]
    Version(u32),
    /// Too many policies.
    #[error("the topics document holds {0} policies, more than {MAX_TOPIC_POLICIES}")]
    TooMany(usize),
    /// One policy is invalid.
    #[error("topic policy `{name}`: {reason}")]
    Policy {
        /// The policy's name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Two policies have the same pattern.
    #[error("topic policies `{0}` and `{1}` have the same pattern `{2}`")]
    Duplicate(String, String, String),
}

impl TopicsDocument {
    /// An empty document of this build's version.
    pub fn new(topics: Vec<TopicPolicy>) -> TopicsDocument {
        TopicsDocument {
            version: TOPICS_DOCUMENT_VERSION,
            topics,
        }
    }

    /// Parses and validates a document (`max_frame_bytes` bounds `max_message_bytes`).
    pub fn parse(text: &str, max_frame_bytes: u32) -> Result<TopicsDocument, TopicsError> {
        let doc: TopicsDocument =
            serde_json::from_str(text).map_err(|e| TopicsError::Syntax(e.to_string()))?;
        doc.validate(max_frame_bytes)?;
        Ok(doc)
    }

    /// The document as the operator writes it (pretty JSON, stable field order).
    pub fn render(&self) -> String {
        // Serialising plain structs of strings, numbers and enums to a String cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Checks every policy and that no two share a pattern.
    pub fn validate(&self, max_frame_bytes: u32) -> Result<(), TopicsError> {
        if self.version != TOPICS_DOCUMENT_VERSION {
            return Err(TopicsError::Version(self.version));
        }
        if self.topics.len() > MAX_TOPIC_POLICIES {
            return Err(TopicsError::TooMany(self.topics.len()));
        }
        for policy in &self.topics {
            policy
                .check(max_frame_bytes)
                .map_err(|reason| TopicsError::Policy {
                    name: policy.name.clone(),
                    reason,
                })?;
        }
        for (i, a) in self.topics.iter().enumerate() {
            if let Some(b) = self.topics[..i].iter().find(|b| b.pattern == a.pattern) {
                return Err(TopicsError::Duplicate(
                    b.name.clone(),
                    a.name.clone(),
                    a.pattern.clone(),
                ));
            }
        }
        Ok(())
    }

    /// The policy that applies to `topic`: of those whose pattern matches, the most specific
    /// (most literal tokens, so an exact name first), the first listed among equals.
    pub fn policy_for(&self, topic: &str) -> Option<&TopicPolicy> {
        most_specific(
            self.topics
                .iter()
                .filter_map(|p| Pattern::parse(&p.pattern).ok().map(|pat| (pat, p))),
            topic,
        )
    }
}

/// Of `candidates` (each policy beside its parsed pattern, in document order), the one
/// [`TopicsDocument::policy_for`] picks for `topic`.
fn most_specific<'a, P: std::borrow::Borrow<Pattern>>(
    candidates: impl Iterator<Item = (P, &'a TopicPolicy)>,
    topic: &str,
) -> Option<&'a TopicPolicy> {
    let mut best: Option<(usize, &TopicPolicy)> = None;
    for (pattern, policy) in candidates {
        let pattern = pattern.borrow();
        if !pattern.matches(topic.as_bytes()) {
            continue;
        }
        let score = pattern.literal_tokens();
        if best.is_none_or(|(s, _)| score > s) {
            best = Some((score, policy));
        }
    }
    best.map(|(_, p)| p)
}

/// A document with its patterns parsed once, for a broker that matches every topic it
/// opens (and every publish's topic) against it: the same rule as
/// [`TopicsDocument::policy_for`].
#[derive(Debug, Clone)]
pub struct CompiledTopics {
    document: TopicsDocument,
    /// The parsed pattern of each policy, in document order (a pattern that does not parse,
    /// which validation refuses first, matches nothing).
    patterns: Vec<Option<Pattern>>,
}

impl CompiledTopics {
    /// Parses the patterns of `document`.
    pub fn new(document: TopicsDocument) -> CompiledTopics {
        let patterns = document
            .topics
            .iter()
            .map(|p| Pattern::parse(&p.pattern).ok())
            .collect();
        CompiledTopics { document, patterns }
    }

    /// No policy.
    pub fn empty() -> CompiledTopics {
        CompiledTopics::new(TopicsDocument::new(Vec::new()))
    }

    /// The document.
    pub fn document(&self) -> &TopicsDocument {
        &self.document
    }

    /// How many policies it holds.
    pub fn len(&self) -> usize {
        self.document.topics.len()
    }

    /// Whether it holds no policy.
    pub fn is_empty(&self) -> bool {
        self.document.topics.is_empty()
    }

    /// See [`TopicsDocument::policy_for`].
    pub fn policy_for(&self, topic: &str) -> Option<&TopicPolicy> {
        most_specific(
            self.patterns
                .iter()
                .zip(&self.document.topics)
                .filter_map(|(pat, p)| pat.as_ref().map(|pat| (pat, p))),
            topic,
        )
    }
}

impl TopicPolicy {
    /// A policy for `pattern` with every setting left to the broker's knobs.
    pub fn new(name: impl Into<String>, pattern: impl Into<String>) -> TopicPolicy {
        TopicPolicy {
            name: name.into(),
            pattern: pattern.into(),
            replicas: None,
            fsync: None,
            retention_max_bytes: None,
            retention_max_age_ms: None,
            max_message_bytes: None,
        }
    }

    /// Why the policy is invalid, if it is.
    pub fn check(&self, max_frame_bytes: u32) -> Result<(), String> {
        if self.name.is_empty() {
            return Err("the name is empty".into());
        }
        Pattern::parse(&self.pattern).map_err(|e| format!("pattern `{}`: {e}", self.pattern))?;
        if let Some(r) = self.replicas
            && !ALLOWED_REPLICAS.contains(&r)
        {
            return Err(format!("replicas is {r}; it must be 1, 3 or 5"));
        }
        if let Some(m) = self.max_message_bytes {
            if m == 0 {
                return Err("max_message_bytes must be at least 1".into());
            }
            if m > max_frame_bytes {
                return Err(format!(
                    "max_message_bytes is {m}, above the broker's max_frame_bytes ({max_frame_bytes})"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(name: &str, pattern: &str) -> TopicPolicy {
        TopicPolicy::new(name, pattern)
    }

    #[test]
    fn the_most_specific_matching_policy_applies() {
        let doc = TopicsDocument::new(vec![
            policy("all-orders", "orders.>"),
            policy("eu", "orders.eu.*"),
            policy("exact", "orders.eu.paid"),
            policy("any-eu", "*.eu.*"),
        ]);
        let name = |t: &str| doc.policy_for(t).map(|p| p.name.as_str());
        assert_eq!(name("orders.eu.paid"), Some("exact"));
        assert_eq!(name("orders.eu.new"), Some("eu"));
        assert_eq!(name("orders.us.new"), Some("all-orders"));
        assert_eq!(name("billing.eu.x"), Some("any-eu"));
        assert_eq!(name("billing"), None);
        let compiled = CompiledTopics::new(doc.clone());
        for t in ["orders.eu.paid", "orders.eu.new", "orders.us.new", "billing.eu.x", "x"] {
            assert_eq!(compiled.policy_for(t), doc.policy_for(t), "{t}");
        }
        assert_eq!(compiled.len(), 4);
        assert!(CompiledTopics::empty().policy_for("orders.eu.paid").is_none());
    }

    #[test]
    fn equal_specificity_takes_the_first_listed() {
        let doc = TopicsDocument::new(vec![policy("b", "a.*.c"), policy("a", "a.b.*")]);
        assert_eq!(doc.policy_for("a.b.c").map(|p| p.name.as_str()), Some("b"));
    }

    #[test]
    fn a_document_round_trips_and_bad_ones_are_refused_with_the_reason() {
        let mut p = policy("orders", "orders.*");
        p.replicas = Some(3);
        p.fsync = Some(StorageFsync::Always);
        p.retention_max_bytes = Some(1 << 30);
        p.max_message_bytes = Some(1024);
        let doc = TopicsDocument::new(vec![p]);
        let back = TopicsDocument::parse(&doc.render(), 1 << 20).unwrap();
        assert_eq!(back, doc);

        let bad = |doc: TopicsDocument| doc.validate(1 << 20).unwrap_err().to_string();
        let mut r2 = policy("r2", "x");
        r2.replicas = Some(2);
        assert!(bad(TopicsDocument::new(vec![r2])).contains("must be 1, 3 or 5"));
        let mut big = policy("big", "x");
        big.max_message_bytes = Some(2 << 20);
        assert!(bad(TopicsDocument::new(vec![big])).contains("max_frame_bytes"));
        assert!(bad(TopicsDocument::new(vec![policy("p", "a.>.b")])).contains("pattern"));
        let dup = TopicsDocument::new(vec![policy("one", "x.*"), policy("two", "x.*")]);
        assert!(bad(dup).contains("same pattern"));
        let mut v2 = TopicsDocument::new(vec![]);
        v2.version = 2;
        assert!(bad(v2).contains("version 2"));
        let err = TopicsDocument::parse(
            r#"{"version":1,"topics":[{"name":"a","pattern":"a","colour":1}]}"#,
            1 << 20,
        )
        .unwrap_err();
        assert!(matches!(err, TopicsError::Syntax(_)), "{err}");
    }
}
