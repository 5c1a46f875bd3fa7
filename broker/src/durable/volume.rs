//! [`Volume`]: what this broker tells the operator about its storage volume (`GET /storage`,
//! read for the BrokerCluster's `DiskFull` condition): the volume's free and total bytes, read
//! from the file system (`statvfs` of `storage_dir`) at the request, and how many durable logs
//! here refuse appends because the volume is full. Program state kept beside the storage
//! gauges (`starling_storage_disk_full_logs`, `starling_storage_volume_free_bytes`), which are
//! for Prometheus only: no decision reads a metric back.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// The storage volume of this broker, shared by its durable logs and the HTTP endpoint.
#[derive(Debug, Default)]
pub struct Volume {
    /// `storage_dir`, if durable topics are configured.
    dir: Option<PathBuf>,
    /// Durable logs whose last append failed for space (each counts once until an append
    /// succeeds again or the log closes).
    full_logs: AtomicU64,
}

/// The answer of `GET /storage` (JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VolumeReport {
    /// `storage_dir`, or `None` without durable storage.
    pub storage_dir: Option<String>,
    /// Bytes an unprivileged writer may still use on the volume; `None` without durable
    /// storage or when the file system could not be asked.
    pub free_bytes: Option<u64>,
    /// The volume's size; `None` as `free_bytes`.
    pub total_bytes: Option<u64>,
    /// Durable logs here that refuse appends because the volume is full.
    pub full_logs: u64,
    /// Whether the volume is full for this broker: a log refuses appends for space, or no byte
    /// is free.
    pub full: bool,
}

impl Volume {
    /// The volume holding `dir` (`None`: no durable storage).
    pub fn new(dir: Option<&Path>) -> Volume {
        Volume {
            dir: dir.map(Path::to_path_buf),
            full_logs: AtomicU64::new(0),
        }
    }

    /// A log started (`true`) or stopped (`false`) refusing appends for space.
    pub(crate) fn log_full(&self, full: bool) {
        if full {
            self.full_logs.fetch_add(1, Ordering::Relaxed);
        } else {
            // Never below zero: every `false` follows a `true` of the same log.
            let _ = self
                .full_logs
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        }
    }

    /// The volume now; blocking (one `statvfs`).
    pub fn report(&self) -> VolumeReport {
        let space = self.dir.as_deref().and_then(|d| space(d).ok());
        let full_logs = self.full_logs.load(Ordering::Relaxed);
        VolumeReport {
            storage_dir: self.dir.as_ref().map(|d| d.display().to_string()),
            free_bytes: space.map(|(free, _)| free),
            total_bytes: space.map(|(_, total)| total),
            full_logs,
            full: full_logs > 0 || space.is_some_and(|(free, _)| free == 0),
        }
    }
}

/// Free (for unprivileged writers) and total bytes of the file system holding `dir`.
fn space(dir: &Path) -> std::io::Result<(u64, u64)> {
    let s = rustix::fs::statvfs(dir).map_err(std::io::Error::from)?;
    Ok((
        s.f_bavail.saturating_mul(s.f_frsize),
        s.f_blocks.saturating_mul(s.f_frsize),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_logs_count_up_and_down_and_mark_the_volume_full() {
        let dir = tempfile::tempdir().unwrap();
        let v = Volume::new(Some(dir.path()));
        let r = v.report();
        assert_eq!(r.full_logs, 0);
        assert!(!r.full, "{r:?}");
        assert!(r.total_bytes.unwrap() >= r.free_bytes.unwrap());
        v.log_full(true);
        v.log_full(true);
        assert_eq!(v.report().full_logs, 2);
        assert!(v.report().full);
        v.log_full(false);
        v.log_full(false);
        v.log_full(false);
        assert_eq!(v.report().full_logs, 0);
        assert!(!v.report().full);
    }

    #[test]
    fn without_storage_nothing_is_measured() {
        let r = Volume::new(None).report();
        assert_eq!(
            r,
            VolumeReport {
                storage_dir: None,
                free_bytes: None,
                total_bytes: None,
                full_logs: 0,
                full: false,
            }
        );
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(
            json,
            r#"{"storage_dir":null,"free_bytes":null,"total_bytes":null,"full_logs":0,"full":false}"#
        );
    }
}
