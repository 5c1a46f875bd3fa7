//! Follows the logs of a BrokerCluster's broker pods into files while a test runs. Every pod
//! that appears gets its own file (a rolled pod is a new uid, a new file), so what a pod logged
//! can be read after the pod is gone, and a failing test can quote the lines that matter.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, LogParams};
use kube::{Api, Client, ResourceExt};
use tokio::io::AsyncWriteExt;
use tokio::task::JoinHandle;

/// Where the brokers' logs are kept: `STARLING_E2E_LOG_DIR`, else `starling-e2e-logs` in the
/// temporary directory; one directory per test namespace below it.
pub fn log_dir() -> PathBuf {
    std::env::var_os("STARLING_E2E_LOG_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("starling-e2e-logs"))
}

/// How often the pod list is read for pods not followed yet.
const POLL: Duration = Duration::from_secs(1);

/// The follower of one cluster's broker pod logs; stops when dropped.
pub struct PodLogs {
    dir: PathBuf,
    task: JoinHandle<()>,
}

impl PodLogs {
    /// Follows the logs of the broker pods of `cluster` in `namespace` into `dir` (created),
    /// one file `<pod>-<uid prefix>.log` per pod.
    pub fn follow(client: Client, namespace: &str, cluster: &str, dir: PathBuf) -> PodLogs {
        let _ = std::fs::create_dir_all(&dir);
        let api: Api<Pod> = Api::namespaced(client, namespace);
        let selector =
            format!("app.kubernetes.io/name=starling-broker,app.kubernetes.io/instance={cluster}");
        let task = tokio::spawn(watch(api, selector, dir.clone()));
        PodLogs { dir, task }
    }

    /// Where the files are.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Up to `max` lines, over every file, for which `matters` holds, each prefixed with its
    /// file's name; files in name order, lines in file order.
    pub fn grep(&self, matters: &dyn Fn(&str) -> bool, max: usize) -> Vec<String> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.sort();
        let mut out = Vec::new();
        for f in files {
            let name = f
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let Ok(text) = std::fs::read_to_string(&f) else {
                continue;
            };
            for line in text.lines() {
                if matters(line) {
                    if out.len() == max {
                        return out;
                    }
                    out.push(format!("{name}: {line}"));
                }
            }
        }
        out
    }
}

impl Drop for PodLogs {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a follower for every running pod not followed yet, every [`POLL`].
async fn watch(api: Api<Pod>, selector: String, dir: PathBuf) {
    let mut followed: HashSet<String> = HashSet::new();
    let mut followers = AbortOnDrop(Vec::new());
    loop {
        if let Ok(pods) = api.list(&ListParams::default().labels(&selector)).await {
            for pod in pods.items {
                let Some(uid) = pod.metadata.uid.clone() else {
                    continue;
                };
                let started = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .is_some_and(|cs| {
                        cs.iter().any(|c| {
                            c.state
                                .as_ref()
                                .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
                        })
                    });
                if !started || followed.contains(&uid) {
                    continue;
                }
                let name = pod.name_any();
                let short: String = uid.chars().take(8).collect();
                let file = dir.join(format!("{name}-{short}.log"));
                let params = LogParams {
                    follow: true,
                    timestamps: true,
                    ..LogParams::default()
                };
                if let Ok(stream) = api.log_stream(&name, &params).await {
                    followed.insert(uid);
                    followers.0.push(tokio::spawn(copy(stream, file)));
                }
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Appends every line of `stream` to `file` until the stream ends (the pod is gone).
async fn copy(stream: impl futures::AsyncBufRead + Unpin, file: PathBuf) {
    let Ok(mut out) = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
        .await
    else {
        return;
    };
    let mut lines = stream.lines();
    while let Some(Ok(line)) = lines.next().await {
        let line = strip_ansi(&line);
        if out.write_all(line.as_bytes()).await.is_err() || out.write_all(b"\n").await.is_err() {
            return;
        }
    }
    let _ = out.flush().await;
}

/// `line` without terminal colour sequences (`ESC [ ... letter`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Aborts the followers when the watch is aborted.
struct AbortOnDrop(Vec<JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for t in self.0.iter() {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn colour_sequences_are_stripped() {
        let coloured = "\u{1b}[2m2026\u{1b}[0m \u{1b}[35mTRACE\u{1b}[0m \u{1b}[3mstream\u{1b}[0m\u{1b}[2m=\u{1b}[0m7";
        assert_eq!(super::strip_ansi(coloured), "2026 TRACE stream=7");
        assert_eq!(super::strip_ansi("plain stream=7"), "plain stream=7");
    }
}
