//! The names of the broker's metrics that other components read: the operator's autoscaler
//! scrapes these from every broker's `/metrics`. The broker registers its series under these
//! constants and the autoscaler looks them up by the same constants, so a rename is one edit
//! and cannot leave the two apart. All are unlabelled.

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
