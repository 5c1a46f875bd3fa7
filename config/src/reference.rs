//! Renders the configuration reference tables from the knob list, the profiles and the tiers,
//! so `docs/configuration.md` can be checked against the code.

use std::fmt::Write;

use crate::client::ClientTuning;
use crate::enums::{Profile, Tier};
use crate::knobs::{BrokerConfig, KNOBS};

/// A tier table row: label and cell renderer.
type TierRow = (&'static str, fn(&crate::TierSizing) -> String);
/// A client table row: knob name and value getter.
type ClientRow = (&'static str, fn(&ClientTuning) -> u32);

fn show(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "unset".to_string(),
        serde_json::Value::String(s) => format!("`{s}`"),
        other => format!("`{other}`"),
    }
}

fn value_of(cfg: &BrokerConfig, name: &str) -> serde_json::Value {
    cfg.knob_values()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
        .unwrap_or_default()
}

/// The generated part of `docs/configuration.md`: every knob with its meaning and its value per
/// profile, the tier table, and the client pool table.
pub fn configuration_reference() -> String {
    let profiles: Vec<BrokerConfig> = Profile::ALL.iter().map(|p| p.config()).collect();
    let mut out = String::new();
    let mut group = "";
    for knob in KNOBS {
        if knob.group != group {
            group = knob.group;
            let _ = writeln!(out, "\n### {group}\n");
            let _ = writeln!(out, "| knob | balanced | latency | throughput | meaning |");
            let _ = writeln!(out, "|---|---|---|---|---|");
        }
        let values: Vec<String> = profiles
            .iter()
            .map(|c| show(&value_of(c, knob.name)))
            .collect();
        let doc = knob.doc.split_whitespace().collect::<Vec<_>>().join(" ");
        let _ = writeln!(out, "| `{}` | {} | {doc} |", knob.name, values.join(" | "));
    }

    let _ = writeln!(out, "\n### Tiers\n");
    let _ = writeln!(out, "| setting | small | medium | large |");
    let _ = writeln!(out, "|---|---|---|---|");
    let tiers: Vec<_> = Tier::ALL.iter().map(|t| t.sizing()).collect();
    let rows: [TierRow; 24] = [
        ("replicas (default)", |s| s.replicas.to_string()),
        ("CPU request / limit", |s| {
            format!("{} / {}", s.resources.cpu_request, s.resources.cpu_limit)
        }),
        ("memory request / limit", |s| {
            format!(
                "{} / {}",
                s.resources.memory_request, s.resources.memory_limit
            )
        }),
        ("capacity (msg/s)", |s| s.capacity_msgs_per_sec.to_string()),
        ("`event_batch_max_events` ceiling", |s| {
            s.event_batch_max_events.to_string()
        }),
        ("`pub_queue_depth`", |s| s.pub_queue_depth.to_string()),
        ("`subscriber_queue_capacity`", |s| {
            s.subscriber_queue_capacity.to_string()
        }),
        ("`subscriber_writer_lanes`", |s| {
            s.subscriber_writer_lanes.to_string()
        }),
        ("`cache_max_bytes` (1/8 of the memory limit)", |s| {
            bytes(s.memory_budgets().map(|b| b.cache_max_bytes))
        }),
        ("`connection_buffer_budget_bytes` (3/16)", |s| {
            bytes(s.memory_budgets().map(|b| b.connection_buffer_budget_bytes))
        }),
        ("`replay_max_total_bytes` (1/32)", |s| {
            bytes(s.memory_budgets().map(|b| b.replay_max_total_bytes))
        }),
        ("`dedup_max_total_bytes` (1/64)", |s| {
            bytes(s.memory_budgets().map(|b| b.dedup_max_total_bytes))
        }),
        ("`consumer_pending_max_bytes` (1/64)", |s| {
            bytes(s.memory_budgets().map(|b| b.consumer_pending_max_bytes))
        }),
        ("`max_inflight_publish_bytes` (7/128)", |s| {
            bytes(s.memory_budgets().map(|b| b.max_inflight_publish_bytes))
        }),
        ("`max_pending_persisted_ack_bytes` (1/128)", |s| {
            bytes(
                s.memory_budgets()
                    .map(|b| b.max_pending_persisted_ack_bytes),
            )
        }),
        (
            "`max_pending_persisted_ack_bytes_per_connection` (1/512)",
            |s| {
                bytes(
                    s.memory_budgets()
                        .map(|b| b.max_pending_persisted_ack_bytes_per_connection),
                )
            },
        ),
        ("`subscriber_queue_budget_bytes` (1/16)", |s| {
            bytes(s.memory_budgets().map(|b| b.subscriber_queue_budget_bytes))
        }),
        ("`max_topics` (1/32 at 16 KiB each)", |s| {
            bytes(s.memory_budgets().map(|b| u64::from(b.max_topics)))
        }),
        ("`max_subscriptions` (1/32 at 8 KiB each)", |s| {
            bytes(s.memory_budgets().map(|b| u64::from(b.max_subscriptions)))
        }),
        ("`max_connections` (1/64 at 64 KiB each)", |s| {
            bytes(s.memory_budgets().map(|b| u64::from(b.max_connections)))
        }),
        ("client `pub_conn_pool`", |s| s.pub_conn_pool.to_string()),
        ("client `event_conn_pool`", |s| {
            s.event_conn_pool.to_string()
        }),
        ("client `cache_conn_pool`", |s| {
            s.cache_conn_pool.to_string()
        }),
        ("scale up above (default 80 %)", |s| {
            (s.capacity_msgs_per_sec * 8 / 10).to_string()
        }),
    ];
    for (label, f) in &rows {
        let cells: Vec<String> = tiers.iter().map(f).collect();
        let _ = writeln!(out, "| {label} | {} |", cells.join(" | "));
    }

    let _ = writeln!(out, "\n### Client pools (SDK)\n");
    let _ = writeln!(out, "| knob | balanced | latency | throughput |");
    let _ = writeln!(out, "|---|---|---|---|");
    let clients: Vec<ClientTuning> = Profile::ALL
        .iter()
        .map(|p| ClientTuning::resolve(*p, None))
        .collect();
    let rows: [ClientRow; 5] = [
        ("pub_conn_pool", |c| c.pub_conn_pool),
        ("pub_streams_per_conn", |c| c.pub_streams_per_conn),
        ("event_conn_pool", |c| c.event_conn_pool),
        ("cache_conn_pool", |c| c.cache_conn_pool),
        ("cache_streams_per_conn", |c| c.cache_streams_per_conn),
    ];
    for (name, f) in rows {
        let cells: Vec<String> = clients.iter().map(|c| format!("`{}`", f(c))).collect();
        let _ = writeln!(out, "| `{name}` | {} |", cells.join(" | "));
    }
    out
}

fn bytes(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_string(), |b| b.to_string())
}
