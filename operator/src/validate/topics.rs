//! A cluster's BrokerTopics → its topics document (`starling_config::topics`) and each
//! BrokerTopic's verdict. Pure.
//!
//! Each BrokerTopic's spec becomes one [`TopicPolicy`] ([`policy`]): its quantities and its
//! duration parsed (a value that does not fit the document's field is refused, naming the
//! field), then the shared [`TopicPolicy::check`] with the cluster's `max_frame_bytes`, and a
//! replica count the cluster's brokers can hold. [`judge`] then takes the cluster's
//! BrokerTopics oldest first: one whose `topic` an older one already has is a `Conflict`,
//! and at most [`MAX_TOPIC_POLICIES`] are accepted, so a new BrokerTopic never pushes an
//! admitted one out. The document lists the accepted policies sorted by BrokerTopic name (the
//! order the shared matching rule breaks ties in). A cluster without `spec.storage` accepts
//! none (`NoStorage`).

use starling_config::topics::{MAX_TOPIC_POLICIES, TopicPolicy, TopicsDocument};

use crate::crd::duration;
use crate::crd::topic::{BrokerTopicSpec, topic_reasons};

/// What the verdicts depend on of the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterFacts {
    /// The cluster has `spec.storage` (durable topics need it).
    pub storage: bool,
    /// The resolved `max_frame_bytes`, which bounds `maxMessageBytes`.
    pub max_frame_bytes: u32,
    /// The desired broker count: a topic cannot have more replicas.
    pub brokers: u32,
    /// The resolved `durable_replicas`: the replica count of a policy that sets none.
    pub durable_replicas: u32,
}

/// One BrokerTopic as [`judge`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicEntry<'a> {
    /// Its name (the policy's name).
    pub name: &'a str,
    /// Its creation time (seconds; older first), `None` sorting first.
    pub created: Option<i64>,
    /// Its spec.
    pub spec: &'a BrokerTopicSpec,
}

/// What the operator concluded about one BrokerTopic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The BrokerTopic's name.
    pub name: String,
    /// The `Ready` reason ([`topic_reasons`]).
    pub reason: &'static str,
    /// The `Ready` message.
    pub message: String,
    /// Its policy, when accepted.
    pub policy: Option<TopicPolicy>,
}

impl Verdict {
    /// Whether the policy is in the document.
    pub fn accepted(&self) -> bool {
        self.policy.is_some()
    }
}

/// The document and every BrokerTopic's verdict, in [`judge`]'s order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    /// The accepted policies, sorted by name.
    pub document: TopicsDocument,
    /// One per BrokerTopic, sorted by name.
    pub verdicts: Vec<Verdict>,
}

impl Judged {
    /// Whether some accepted policy keeps more than one copy (with `durable_replicas` for a
    /// policy that sets no count): the cluster's roll must then be held like a replicated
    /// cluster's.
    pub fn replicated(&self, durable_replicas: u32) -> bool {
        self.document
            .topics
            .iter()
            .any(|p| p.replicas.unwrap_or(durable_replicas) > 1)
    }

    /// The most copies an accepted policy keeps (with `durable_replicas` for a policy that
    /// sets no count), when more than one: what the cluster must keep apart.
    pub fn most_replicas(&self, durable_replicas: u32) -> Option<u32> {
        self.document
            .topics
            .iter()
            .map(|p| p.replicas.unwrap_or(durable_replicas))
            .max()
            .filter(|n| *n > 1)
    }
}

/// A quantity of bytes, or why it is refused.
fn bytes(field: &str, text: &str) -> Result<u64, String> {
    starling_config::quantity::parse_units(text)
        .ok_or_else(|| format!("{field}: {text:?} is not a quantity of bytes"))
}

/// The policy `spec` stands for, named `name`, or why it is refused (naming the field).
pub fn policy(name: &str, spec: &BrokerTopicSpec, c: &ClusterFacts) -> Result<TopicPolicy, String> {
    let mut p = TopicPolicy::new(name, spec.topic.clone());
    p.replicas = spec.replicas;
    p.fsync = spec.fsync;
    let retention = spec.retention.as_ref();
    if let Some(q) = retention.and_then(|r| r.max_bytes.as_ref()) {
        p.retention_max_bytes = Some(bytes("retention.maxBytes", q.as_str())?);
    }
    if let Some(text) = retention.and_then(|r| r.max_age.as_deref()) {
        let ms = duration::parse(text)
            .and_then(|d| u64::try_from(d.as_millis()).ok())
            .ok_or_else(|| {
                format!("retention.maxAge: {text:?} is not a duration such as 30m or 168h")
            })?;
        p.retention_max_age_ms = Some(ms);
    }
    if let Some(q) = &spec.max_message_bytes {
        let n = bytes("maxMessageBytes", q.as_str())?;
        let n = u32::try_from(n).map_err(|_| {
            format!(
                "maxMessageBytes: {q} ({n} bytes) does not fit; it must be at most the cluster's max_frame_bytes ({})",
                c.max_frame_bytes
            )
        })?;
        p.max_message_bytes = Some(n);
    }
    p.check(c.max_frame_bytes)?;
    let replicas = p.replicas.unwrap_or(c.durable_replicas);
    if replicas > c.brokers {
        return Err(format!(
            "replicas is {replicas}, but the cluster has {} broker(s): each copy needs its own broker",
            c.brokers
        ));
    }
    Ok(p)
}

/// The verdict on every BrokerTopic of one cluster and the document of the accepted ones.
pub fn judge(topics: &[TopicEntry<'_>], c: &ClusterFacts) -> Judged {
    let mut order: Vec<&TopicEntry<'_>> = topics.iter().collect();
    order.sort_by(|a, b| a.created.cmp(&b.created).then_with(|| a.name.cmp(b.name)));
    let mut verdicts: Vec<Verdict> = Vec::with_capacity(order.len());
    let mut accepted = 0usize;
    for t in order {
        let verdict = |reason, message: String, policy| Verdict {
            name: t.name.to_string(),
            reason,
            message,
            policy,
        };
        let older = verdicts
            .iter()
            .filter(|v| v.accepted())
            .find(|v| v.policy.as_ref().is_some_and(|p| p.pattern == t.spec.topic));
        let v = if !c.storage {
            verdict(
                topic_reasons::NO_STORAGE,
                "the cluster has no spec.storage: durable topics keep their logs on the brokers' volumes".into(),
                None,
            )
        } else if let Some(older) = older {
            verdict(
                topic_reasons::CONFLICT,
                format!(
                    "BrokerTopic {} (older) already has topic `{}` on this cluster",
                    older.name, t.spec.topic
                ),
                None,
            )
        } else if accepted >= MAX_TOPIC_POLICIES {
            verdict(
                topic_reasons::INVALID,
                format!(
                    "the cluster already has {MAX_TOPIC_POLICIES} accepted BrokerTopics, the most one topics document holds"
                ),
                None,
            )
        } else {
            match policy(t.name, t.spec, c) {
                Ok(p) => {
                    accepted += 1;
                    verdict(
                        topic_reasons::ACCEPTED,
                        format!("in the cluster's topics document: {}", describe(&p, c)),
                        Some(p),
                    )
                }
                Err(message) => verdict(topic_reasons::INVALID, message, None),
            }
        };
        verdicts.push(v);
    }
    verdicts.sort_by(|a, b| a.name.cmp(&b.name));
    let document = TopicsDocument::new(verdicts.iter().filter_map(|v| v.policy.clone()).collect());
    Judged { document, verdicts }
}

/// A policy's effective replica count in words, for the `Ready` message.
fn describe(p: &TopicPolicy, c: &ClusterFacts) -> String {
    match p.replicas {
        Some(r) => format!("{r} replica(s)"),
        None => format!(
            "{} replica(s) (the cluster's durable_replicas)",
            c.durable_replicas
        ),
    }
}

#[cfg(test)]
mod tests {
    use starling_config::StorageFsync;

    use super::*;
    use crate::crd::QuantityValue;
    use crate::crd::topic::TopicRetention;

    fn facts() -> ClusterFacts {
        ClusterFacts {
            storage: true,
            max_frame_bytes: 1 << 20,
            brokers: 3,
            durable_replicas: 1,
        }
    }

    fn spec(topic: &str) -> BrokerTopicSpec {
        BrokerTopicSpec {
            cluster_ref: "events".into(),
            topic: topic.into(),
            replicas: None,
            retention: None,
            fsync: None,
            max_message_bytes: None,
        }
    }

    #[test]
    fn every_field_becomes_the_policys() {
        let mut s = spec("orders.*");
        s.replicas = Some(3);
        s.fsync = Some(StorageFsync::Always);
        s.retention = Some(TopicRetention {
            max_bytes: Some(QuantityValue::from("1Gi")),
            max_age: Some("1h30m".into()),
        });
        s.max_message_bytes = Some(QuantityValue::from("64Ki"));
        let p = policy("orders", &s, &facts()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.name, "orders");
        assert_eq!(p.pattern, "orders.*");
        assert_eq!(p.replicas, Some(3));
        assert_eq!(p.fsync, Some(StorageFsync::Always));
        assert_eq!(p.retention_max_bytes, Some(1 << 30));
        assert_eq!(p.retention_max_age_ms, Some(90 * 60 * 1000));
        assert_eq!(p.max_message_bytes, Some(64 * 1024));
        // Unset fields stay unset: the brokers' knobs apply.
        let bare = policy("b", &spec("b"), &facts()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(bare, TopicPolicy::new("b", "b"));
    }

    #[test]
    fn refusals_name_the_field_and_the_limit() {
        let refused = |s: BrokerTopicSpec| policy("t", &s, &facts()).unwrap_err();
        let mut big = spec("t");
        big.max_message_bytes = Some(QuantityValue::from("8Gi"));
        let e = refused(big);
        assert!(
            e.contains("maxMessageBytes") && e.contains("does not fit"),
            "{e}"
        );
        let mut above = spec("t");
        above.max_message_bytes = Some(QuantityValue::from("2Mi"));
        assert!(refused(above).contains("max_frame_bytes (1048576)"));
        let mut bad = spec("t");
        bad.retention = Some(TopicRetention {
            max_bytes: Some(QuantityValue::from("lots")),
            max_age: None,
        });
        assert!(refused(bad).contains("retention.maxBytes"));
        let mut age = spec("t");
        age.retention = Some(TopicRetention {
            max_bytes: None,
            max_age: Some("a week".into()),
        });
        assert!(refused(age).contains("retention.maxAge"));
        assert!(refused(spec("a.>.b")).contains("pattern"));
        let mut five = spec("t");
        five.replicas = Some(5);
        assert!(refused(five).contains("the cluster has 3 broker(s)"));
        let mut two = spec("t");
        two.replicas = Some(2);
        assert!(refused(two).contains("must be 1, 3 or 5"));
    }

    fn entry<'a>(name: &'a str, created: i64, spec: &'a BrokerTopicSpec) -> TopicEntry<'a> {
        TopicEntry {
            name,
            created: Some(created),
            spec,
        }
    }

    #[test]
    fn the_older_of_two_same_topics_wins_and_the_document_is_sorted_by_name() {
        let (a, b, c, bad) = (
            spec("orders.*"),
            spec("orders.*"),
            spec("audit.>"),
            spec("x..y"),
        );
        let judged = judge(
            &[
                entry("zz-first", 1, &a),
                entry("aa-second", 2, &b),
                entry("audit", 3, &c),
                entry("broken", 4, &bad),
            ],
            &facts(),
        );
        let reasons: Vec<(&str, &str)> = judged
            .verdicts
            .iter()
            .map(|v| (v.name.as_str(), v.reason))
            .collect();
        assert_eq!(
            reasons,
            [
                ("aa-second", topic_reasons::CONFLICT),
                ("audit", topic_reasons::ACCEPTED),
                ("broken", topic_reasons::INVALID),
                ("zz-first", topic_reasons::ACCEPTED),
            ]
        );
        assert!(judged.verdicts[0].message.contains("zz-first"));
        let names: Vec<&str> = judged
            .document
            .topics
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(names, ["audit", "zz-first"]);
        // What the operator writes, the broker reads back.
        let text = judged.document.render();
        assert_eq!(
            TopicsDocument::parse(&text, facts().max_frame_bytes),
            Ok(judged.document.clone())
        );
        assert!(!judged.replicated(1));
        assert!(judged.replicated(3));
        assert_eq!(judged.most_replicas(1), None);
        assert_eq!(judged.most_replicas(3), Some(3));
        let mut five = judged.clone();
        five.document.topics[0].replicas = Some(5);
        assert_eq!(five.most_replicas(1), Some(5));
        five.document.topics[0].replicas = Some(1);
        assert_eq!(
            five.most_replicas(1),
            None,
            "one copy each: nothing to keep apart"
        );
    }

    #[test]
    fn without_storage_nothing_is_accepted_and_the_document_is_empty() {
        let s = spec("orders");
        let judged = judge(
            &[entry("orders", 1, &s)],
            &ClusterFacts {
                storage: false,
                ..facts()
            },
        );
        assert_eq!(judged.verdicts[0].reason, topic_reasons::NO_STORAGE);
        assert_eq!(judged.document, TopicsDocument::new(Vec::new()));
        assert_eq!(
            judge(&[], &facts()).document.render(),
            TopicsDocument::new(vec![]).render()
        );
    }

    #[test]
    fn a_full_document_keeps_the_oldest_policies() {
        let specs: Vec<(String, BrokerTopicSpec)> = (0..=MAX_TOPIC_POLICIES)
            .map(|i| (format!("t{i:05}"), spec(&format!("topic.{i}"))))
            .collect();
        let entries: Vec<TopicEntry<'_>> = specs
            .iter()
            .enumerate()
            .map(|(i, (n, s))| entry(n, i64::try_from(i).unwrap_or(0), s))
            .collect();
        let judged = judge(&entries, &facts());
        assert_eq!(judged.document.topics.len(), MAX_TOPIC_POLICIES);
        let last = judged.verdicts.last().unwrap_or_else(|| panic!("verdicts"));
        assert_eq!(last.reason, topic_reasons::INVALID);
        assert!(last.message.contains("1024"), "{}", last.message);
        assert!(judged.document.validate(facts().max_frame_bytes).is_ok());
    }
}
