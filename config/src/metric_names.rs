//! The names of the broker's metrics that other components read: the operator's autoscaler
//! scrapes these from every broker's `/metrics`. The broker registers its series under these
//! constants and the autoscaler looks them up by the same constants, so a rename is one edit
//! and cannot leave the two apart. All of those are unlabelled ([`READ_BY_OTHERS`]).
//!
//! The access-control series below are named here too, once, because dashboards, alerts and
//! `docs/security.md` refer to them; some carry a label. So are the UDP socket buffer gauges,
//! which the knob docs (`udp_recv_buffer_bytes`, `udp_send_buffer_bytes`) and the broker's
//! warning about a capped buffer refer to.

/// Messages accepted from publishers (counter).
pub const PUBLISHED_MESSAGES: &str = "starling_published_messages_total";
/// Events written to subscriber streams (counter).
pub const DELIVERED_EVENTS: &str = "starling_delivered_events_total";
/// Publish payload bytes accepted (counter).
pub const PUBLISHED_BYTES: &str = "starling_published_bytes_total";
/// EventBatch bytes written to subscriber streams (counter).
pub const DELIVERED_BYTES: &str = "starling_delivered_bytes_total";
/// User and system CPU seconds of the broker process, at 10 ms resolution (counter).
pub const PROCESS_CPU_SECONDS: &str = "starling_process_cpu_seconds_total";
/// 1 while the broker serves, 0 while it starts or drains (gauge).
pub const READY: &str = "starling_ready";

/// Every name above, for checks that walk them.
pub const READ_BY_OTHERS: [&str; 6] = [
    PUBLISHED_MESSAGES,
    DELIVERED_EVENTS,
    PUBLISHED_BYTES,
    DELIVERED_BYTES,
    PROCESS_CPU_SECONDS,
    READY,
];

/// Operations refused by a user's permissions, by `operation` (`publish`, `subscribe`,
/// `cache_read`, `cache_write`) (counter).
pub const FORBIDDEN: &str = "starling_forbidden_total";
/// Handshakes refused for want of a valid identity, by `reason` (counter).
pub const AUTH_FAILURES: &str = "starling_auth_failures_total";
/// Users in the users table in force (gauge).
pub const AUTH_USERS: &str = "starling_auth_users";
/// Reads or parses of the users document that failed; the last good table stayed in force, by
/// `reason` (`missing`, `unreadable`, `invalid`) (counter).
pub const AUTH_RELOAD_ERRORS: &str = "starling_auth_reload_errors_total";
/// 1 while the last read of the users document failed (the table in force, if any, is the last
/// good one), else 0 (gauge).
pub const AUTH_USERS_STALE: &str = "starling_auth_users_stale";
/// Seconds since the users table in force was last read (since the broker started, when none
/// was), updated at every read (gauge).
pub const AUTH_USERS_AGE: &str = "starling_auth_users_age_seconds";
/// Live connections closed because their user left the users table (counter).
pub const AUTH_REVOKED_CONNECTIONS: &str = "starling_auth_revoked_connections_total";
/// Open subscriptions ended because a reload of the users document withdrew the permission
/// they were opened under (counter).
pub const AUTH_SUBSCRIPTIONS_WITHDRAWN: &str = "starling_auth_subscriptions_withdrawn_total";
/// Reloads of the server certificate and the client CA, by `outcome` (`applied`, `failed`)
/// (counter).
pub const TLS_RELOADS: &str = "starling_tls_reloads_total";

/// Receive buffer of the broker's QUIC UDP socket as the kernel reports it after
/// `udp_recv_buffer_bytes` was applied (Linux: twice the usable size) (gauge).
pub const UDP_RECV_BUFFER_BYTES: &str = "starling_udp_recv_buffer_bytes";
/// Send buffer of the broker's QUIC UDP socket as the kernel reports it after
/// `udp_send_buffer_bytes` was applied (gauge).
pub const UDP_SEND_BUFFER_BYTES: &str = "starling_udp_send_buffer_bytes";

/// Record bytes appended to durable topic logs (counter).
pub const STORAGE_APPENDED_BYTES: &str = "starling_storage_appended_bytes_total";
/// Records (sealed batches) appended to durable topic logs (counter).
pub const STORAGE_APPENDED_RECORDS: &str = "starling_storage_appended_records_total";
/// Time of each durable log fsync (histogram, seconds).
pub const STORAGE_FSYNC_SECONDS: &str = "starling_storage_fsync_seconds";
/// Segment files of open durable logs (gauge).
pub const STORAGE_SEGMENTS: &str = "starling_storage_segments";
/// Record bytes the open durable logs hold on disk (gauge).
pub const STORAGE_RETAINED_BYTES: &str = "starling_storage_retained_bytes";
/// Segments whose torn or corrupt tail was truncated when a log was opened (counter).
pub const STORAGE_RECOVERY_TRUNCATIONS: &str = "starling_storage_recovery_truncations_total";
/// Records read back from disk for resuming subscribers (counter).
pub const STORAGE_REPLAYED_RECORDS: &str = "starling_storage_replayed_records_total";
/// Durable log segments deleted by retention (counter).
pub const STORAGE_RETENTION_DELETED_SEGMENTS: &str =
    "starling_storage_retention_deleted_segments_total";
/// Failed durable log opens, appends and fsyncs (counter).
pub const STORAGE_ERRORS: &str = "starling_storage_errors_total";
/// Segments set aside (renamed, not cut) because recovery found damage in them (counter).
pub const STORAGE_RECOVERY_QUARANTINED: &str =
    "starling_storage_recovery_quarantined_segments_total";
/// Open durable logs stopped by a failed fsync: they take no append and ack nothing
/// `persisted` until reopened (gauge).
pub const STORAGE_FAILED_LOGS: &str = "starling_storage_failed_logs";
/// Open durable logs whose last append failed for lack of space on the volume (gauge).
pub const STORAGE_DISK_FULL_LOGS: &str = "starling_storage_disk_full_logs";
/// Bytes still free for the broker on the volume holding `storage_dir` (gauge).
pub const STORAGE_VOLUME_FREE_BYTES: &str = "starling_storage_volume_free_bytes";
/// Records a topic's owner copied from another member's log of the topic after an owner
/// change (counter).
pub const STORAGE_HANDOFF_COPIED_RECORDS: &str = "starling_storage_handoff_copied_records_total";
/// Records this broker's logs served to another member taking over a topic (counter).
pub const STORAGE_HANDOFF_SERVED_RECORDS: &str = "starling_storage_handoff_served_records_total";

/// Re-reads of the topics document (`topics_file`) that put a changed document in force or
/// failed, by `result`: `applied`, `unreadable`, `invalid` (the one in force stays) (counter).
pub const TOPICS_DOCUMENT_RELOADS: &str = "starling_topics_document_reloads_total";
/// Per-topic durability policies in force, the topics document's (gauge).
pub const TOPICS_POLICIES: &str = "starling_topics_policies";
/// 1 when the last read of `topics_file` was valid (put in force, or unchanged), 0 when it
/// failed and an older document stays in force (gauge).
pub const TOPICS_DOCUMENT_VALID: &str = "starling_topics_document_valid";

/// A limit in force, by `knob` (the budgets and caps alerts compare usage with) (gauge).
pub const CONFIG_LIMIT: &str = "starling_config_limit";
