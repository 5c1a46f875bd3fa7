//! The JSON lines `--output json` prints: one object per event of `sub` and per `cache get`.
//! A payload or value that is valid UTF-8 is a JSON string under `payload` / `value`; any other
//! bytes are base64 (standard alphabet, padded) under `payload_base64` / `value_base64`, so the
//! bytes are exact either way. Pure.

use base64::Engine;
use serde_json::{Map, Value, json};
use starling_client::Event;

/// `name` (text) or `name_base64` (other bytes) for `bytes`.
fn bytes_field(out: &mut Map<String, Value>, name: &str, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(text) => out.insert(name.to_string(), Value::from(text)),
        Err(_) => out.insert(
            format!("{name}_base64"),
            Value::from(base64::engine::general_purpose::STANDARD.encode(bytes)),
        ),
    };
}

/// `{"topic", "seq", "position": {"stream", "seq"}, "payload" | "payload_base64"}`, and
/// `"headers": [{"name", "value"}, ...]` (in published order) when the event has any.
pub(crate) fn event_line(topic: &str, event: &Event) -> String {
    let mut out = Map::new();
    out.insert("topic".into(), Value::from(topic));
    out.insert("seq".into(), Value::from(event.seq));
    out.insert(
        "position".into(),
        json!({"stream": event.position.stream, "seq": event.position.seq}),
    );
    bytes_field(&mut out, "payload", &event.payload);
    headers_field(&mut out, &event.headers);
    Value::Object(out).to_string()
}

/// `"headers": [{"name", "value"}, ...]`, in published order, when there are any.
fn headers_field(out: &mut Map<String, Value>, headers: &[starling_proto::Header]) {
    if !headers.is_empty() {
        let list: Vec<Value> = headers
            .iter()
            .map(|h| json!({"name": h.name, "value": h.value}))
            .collect();
        out.insert("headers".into(), Value::from(list));
    }
}

/// `{"topic", "position": {"stream", "seq"}, "delivery", "timestamp_ms", "payload" |
/// "payload_base64"}` and its `"headers"` as in [`event_line`]: one delivery of a durable
/// consumer.
pub(crate) fn delivery_line(topic: &str, d: &starling_client::Delivery) -> String {
    let mut out = Map::new();
    out.insert("topic".into(), Value::from(topic));
    out.insert(
        "position".into(),
        json!({"stream": d.position.stream, "seq": d.position.seq}),
    );
    out.insert("delivery".into(), Value::from(d.delivery));
    out.insert("timestamp_ms".into(), Value::from(d.timestamp_ms));
    bytes_field(&mut out, "payload", &d.payload);
    headers_field(&mut out, &d.headers);
    Value::Object(out).to_string()
}

/// `{"key", "found": true, "value" | "value_base64"}` or `{"key", "found": false}`.
pub(crate) fn cache_value_line(key: &str, value: Option<&[u8]>) -> String {
    let mut out = Map::new();
    out.insert("key".into(), Value::from(key));
    out.insert("found".into(), Value::from(value.is_some()));
    if let Some(v) = value {
        bytes_field(&mut out, "value", v);
    }
    Value::Object(out).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use starling_proto::Position;

    #[test]
    fn text_is_a_string_and_other_bytes_are_base64() {
        let event = Event {
            topic: "orders".into(),
            subscription: "orders".into(),
            seq: 3,
            position: Position { stream: 9, seq: 41 },
            payload: Bytes::from_static(b"hello \"world\""),
            headers: Vec::new(),
        };
        let v: Value = serde_json::from_str(&event_line("orders", &event)).unwrap_or_default();
        assert_eq!(
            v,
            json!({"topic": "orders", "seq": 3, "position": {"stream": 9, "seq": 41},
                   "payload": "hello \"world\""})
        );
        let binary = Event {
            payload: Bytes::from_static(&[0xff, 0x00, 0x01]),
            ..event
        };
        let v: Value = serde_json::from_str(&event_line("t", &binary)).unwrap_or_default();
        assert_eq!(v["payload_base64"], "/wAB");
        assert!(v.get("payload").is_none());
        let headed = Event {
            headers: vec![
                starling_proto::Header::new("trace", "t1"),
                starling_proto::Header::new("trace", "t2"),
            ],
            ..binary
        };
        let v: Value = serde_json::from_str(&event_line("t", &headed)).unwrap_or_default();
        assert_eq!(
            v["headers"],
            json!([{"name": "trace", "value": "t1"}, {"name": "trace", "value": "t2"}])
        );
        let v: Value = serde_json::from_str(&cache_value_line("k", Some(b"v"))).unwrap_or_default();
        assert_eq!(v, json!({"key": "k", "found": true, "value": "v"}));
        let v: Value = serde_json::from_str(&cache_value_line("k", None)).unwrap_or_default();
        assert_eq!(v, json!({"key": "k", "found": false}));
    }
}
