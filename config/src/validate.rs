//! Validation of a resolved [`BrokerConfig`]: impossible combinations are refused with a message
//! naming the field.

use crate::error::{ConfigError, FieldError};
use crate::knobs::BrokerConfig;

/// Largest value a QUIC variable-length integer (and so any QUIC window) can hold.
pub const QUIC_VARINT_MAX: u64 = (1 << 62) - 1;
/// Smallest accepted flow-control window.
pub const MIN_WINDOW: u64 = 16 * 1024;
/// Smallest and largest accepted `max_frame_bytes`.
pub const FRAME_BYTES_RANGE: (u32, u32) = (64 * 1024, 64 * 1024 * 1024);
/// Largest accepted `event_batch_max_delay_us` (one second).
pub const MAX_BATCH_DELAY_US: u64 = 1_000_000;
/// Largest accepted lane and worker counts.
pub const MAX_LANES: u32 = 64;
/// Bytes reserved in a frame for the EventBatch header and per-event prefixes of a full batch.
const EVENT_BATCH_OVERHEAD: u64 = 64;

struct Checker(Vec<FieldError>);

impl Checker {
    fn check(&mut self, ok: bool, field: &'static str, reason: impl FnOnce() -> String) {
        if !ok {
            self.0.push(FieldError {
                field,
                reason: reason(),
            });
        }
    }

    fn at_least(&mut self, field: &'static str, value: u64, min: u64) {
        self.check(value >= min, field, || {
            format!("must be at least {min}, got {value}")
        });
    }

    fn at_most(&mut self, field: &'static str, value: u64, max: u64) {
        self.check(value <= max, field, || {
            format!("must be at most {max}, got {value}")
        });
    }

    fn range(&mut self, field: &'static str, value: u64, min: u64, max: u64) {
        self.check((min..=max).contains(&value), field, || {
            format!("must be between {min} and {max}, got {value}")
        });
    }
}

impl BrokerConfig {
    /// Checks every rule and returns all violations at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut c = Checker(Vec::new());
        let c = &mut c;

        for (field, v) in [
            ("event_conn_recv_window", self.event_conn_recv_window),
            ("event_stream_recv_window", self.event_stream_recv_window),
            ("event_send_window", self.event_send_window),
            ("cache_conn_recv_window", self.cache_conn_recv_window),
            ("cache_stream_recv_window", self.cache_stream_recv_window),
        ] {
            c.range(field, v, MIN_WINDOW, QUIC_VARINT_MAX);
        }
        c.check(
            self.event_stream_recv_window <= self.event_conn_recv_window,
            "event_stream_recv_window",
            || {
                format!(
                    "({}) must not exceed event_conn_recv_window ({})",
                    self.event_stream_recv_window, self.event_conn_recv_window
                )
            },
        );
        c.check(
            self.cache_stream_recv_window <= self.cache_conn_recv_window,
            "cache_stream_recv_window",
            || {
                format!(
                    "({}) must not exceed cache_conn_recv_window ({})",
                    self.cache_stream_recv_window, self.cache_conn_recv_window
                )
            },
        );
        c.range(
            "max_concurrent_streams",
            self.max_concurrent_streams.into(),
            4,
            1 << 20,
        );
        c.at_least("idle_timeout_ms", self.idle_timeout_ms, 1_000);
        c.check(
            self.keep_alive_interval_ms < self.idle_timeout_ms,
            "keep_alive_interval_ms",
            || {
                format!(
                    "({}) must be shorter than idle_timeout_ms ({})",
                    self.keep_alive_interval_ms, self.idle_timeout_ms
                )
            },
        );
        let (fmin, fmax) = FRAME_BYTES_RANGE;
        c.range(
            "max_frame_bytes",
            self.max_frame_bytes.into(),
            fmin.into(),
            fmax.into(),
        );

        c.at_least(
            "event_batch_max_events",
            self.event_batch_max_events.into(),
            1,
        );
        c.at_least(
            "event_batch_max_bytes",
            self.event_batch_max_bytes.into(),
            1,
        );
        c.check(
            u64::from(self.event_batch_max_bytes) + EVENT_BATCH_OVERHEAD <= u64::from(self.max_frame_bytes),
            "event_batch_max_bytes",
            || {
                format!(
                    "({}) plus {EVENT_BATCH_OVERHEAD} bytes of framing must fit in max_frame_bytes ({})",
                    self.event_batch_max_bytes, self.max_frame_bytes
                )
            },
        );
        c.at_most(
            "event_batch_max_delay_us",
            self.event_batch_max_delay_us,
            MAX_BATCH_DELAY_US,
        );
        c.at_least("fanout_batch_size", self.fanout_batch_size.into(), 1);
        c.range(
            "publish_chunk_bytes",
            self.publish_chunk_bytes.into(),
            1024,
            self.max_frame_bytes.into(),
        );

        c.at_least("pub_queue_depth", self.pub_queue_depth.into(), 1);
        c.range(
            "pub_workers_per_conn",
            self.pub_workers_per_conn.into(),
            1,
            MAX_LANES.into(),
        );
        c.at_least(
            "subscriber_queue_capacity",
            self.subscriber_queue_capacity.into(),
            1,
        );
        c.at_least(
            "subscriber_lane_queue_depth",
            self.subscriber_lane_queue_depth.into(),
            1,
        );

        c.range(
            "max_subscriber_writer_lanes",
            self.max_subscriber_writer_lanes.into(),
            1,
            MAX_LANES.into(),
        );
        c.at_least(
            "subscriber_writer_lanes",
            self.subscriber_writer_lanes.into(),
            1,
        );
        c.check(
            self.subscriber_writer_lanes <= self.max_subscriber_writer_lanes,
            "subscriber_writer_lanes",
            || {
                format!(
                    "({}) must not exceed max_subscriber_writer_lanes ({})",
                    self.subscriber_writer_lanes, self.max_subscriber_writer_lanes
                )
            },
        );

        c.range("cache_shards", self.cache_shards.into(), 1, 4096);
        c.at_least(
            "cache_max_value_bytes",
            self.cache_max_value_bytes.into(),
            1,
        );
        let per_shard =
            self.cache_max_bytes / u64::from(self.cache_shards.max(1)).next_power_of_two();
        c.check(
            u64::from(self.cache_max_value_bytes) <= per_shard,
            "cache_max_value_bytes",
            || {
                format!(
                    "({}) must fit in one cache shard (cache_max_bytes / cache_shards = {per_shard})",
                    self.cache_max_value_bytes
                )
            },
        );

        c.check(
            self.tls_cert_file.is_some() == self.tls_key_file.is_some(),
            if self.tls_cert_file.is_some() {
                "tls_key_file"
            } else {
                "tls_cert_file"
            },
            || "tls_cert_file and tls_key_file must be set together".to_string(),
        );
        c.check(!self.log_level.trim().is_empty(), "log_level", || {
            "must not be empty".to_string()
        });
        c.at_most("drain_timeout_ms", self.drain_timeout_ms, 3_600_000);

        if c.0.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(std::mem::take(&mut c.0)))
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{ConfigOverrides, Profile, compose};

    fn errors(o: ConfigOverrides) -> String {
        compose(Profile::Balanced, None, &o)
            .validate()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn zero_batch_sizes_are_refused_by_name() {
        let msg = errors(ConfigOverrides {
            event_batch_max_events: Some(0),
            ..Default::default()
        });
        assert!(
            msg.contains("event_batch_max_events: must be at least 1"),
            "{msg}"
        );
        let msg = errors(ConfigOverrides {
            fanout_batch_size: Some(0),
            ..Default::default()
        });
        assert!(msg.contains("fanout_batch_size"), "{msg}");
    }

    #[test]
    fn stream_window_above_connection_window_is_refused() {
        let msg = errors(ConfigOverrides {
            event_stream_recv_window: Some(512 << 20),
            ..Default::default()
        });
        assert!(
            msg.contains("event_stream_recv_window") && msg.contains("event_conn_recv_window"),
            "{msg}"
        );
    }

    #[test]
    fn lanes_above_max_are_refused() {
        let msg = errors(ConfigOverrides {
            subscriber_writer_lanes: Some(9),
            ..Default::default()
        });
        assert!(
            msg.contains(
                "subscriber_writer_lanes: (9) must not exceed max_subscriber_writer_lanes (8)"
            ),
            "{msg}"
        );
    }

    #[test]
    fn batch_bytes_must_fit_a_frame_and_all_errors_are_reported() {
        let msg = errors(ConfigOverrides {
            event_batch_max_bytes: Some(8 << 20),
            pub_queue_depth: Some(0),
            ..Default::default()
        });
        assert!(
            msg.contains("event_batch_max_bytes") && msg.contains("pub_queue_depth"),
            "{msg}"
        );
    }

    #[test]
    fn tls_files_come_in_pairs() {
        let msg = errors(ConfigOverrides {
            tls_cert_file: Some(Some("/tls/tls.crt".into())),
            ..Default::default()
        });
        assert!(msg.contains("tls_key_file"), "{msg}");
    }
}
