//! The state machine of a replicated topic: the committed log ([`StateMachine`]), openraft's
//! `RaftStateMachine` and `RaftSnapshotBuilder`.
//!
//! Applying an entry appends a [`CommittedRecord`] (in the binary format of
//! [`crate::entry_codec`]; the JSON of older builds is still read) at the entry's index to a
//! second storage log, the committed log, which is what readers read ([`StateMachine::read`]): the applied
//! index is the topic's high-water mark, and a record is there only once a quorum fsynced
//! it. The committed log is not fsynced per apply: after a crash its unsynced tail is cut by
//! recovery and the library applies those entries again from the Raft log. It is fsynced
//! before a snapshot is built (a snapshot is what lets the library purge the Raft log) and
//! right after a membership change is applied (whose configuration is then written to
//! `sm-meta.json`, so the applied membership survives a restart).
//!
//! Snapshot installation writes the image into a new generation directory (`g{n}/`), fsyncs
//! it, then switches `sm-meta.json` to it atomically and deletes the old generation's files:
//! a crash at any point leaves one whole committed log.
//!
//! **Retention.** Retention runs on the committed log after each apply: the policy of its
//! config, or, once [`StateMachine::follow_retention`] gave it a
//! [`starling_storage::RetentionSource`], the one the source gives at that apply (the broker's
//! source is the topics document in force, the same one its single-copy logs read), so a
//! changed retention reaches an open replica, leader and followers alike, at its next apply.
//! Why trimming the committed log cannot break the Raft side:
//!
//! - Retention deletes only whole sealed segments of the **committed log**. The **Raft log**
//!   (`log_store`), from which the leader replicates to followers, is never touched by it:
//!   openraft purges it only behind a snapshot (`snapshot_every`, keeping
//!   `keep_after_snapshot` entries). So a lagging follower is caught up from the leader's
//!   Raft log as before, or, when it is behind the purge, from a snapshot.
//! - What the state machine itself needs is its applied log id and its membership. The
//!   membership is in `sm-meta.json`, not in the log. The applied id is the last record,
//!   which is always in the active segment (a segment rolls when an append would overflow
//!   it, so the new record opens the new segment), and the active segment is never deleted.
//! - After a crash the committed log must still reach at least the Raft log's purge point:
//!   openraft applies again only from what the Raft log still holds. The committed log is
//!   not fsynced per apply, so before a retention run deletes anything it is fsynced
//!   (`Log::retention_due`, then a sync): a power cut can then cut only records applied
//!   after the sync, never leave the committed log ending before a snapshot's last entry
//!   (the purge point is at most that, and a snapshot's build fsyncs first too). Without
//!   it, a retention that deletes every sealed segment followed by a power cut that empties
//!   the unsynced active one would leave an empty committed log behind a purged Raft log.
//!   The sync costs one fsync per run that deletes (at most one per segment rolled, for a
//!   byte limit).
//! - A snapshot is the image of the committed log as retention left it, up to the applied
//!   id, built under the same lock retention runs under (no segment goes away during a
//!   build); its last record is the applied one, which retention keeps, so the check a
//!   snapshot install makes (the image ends at the meta's last log id) holds. A follower that
//!   installs it holds what the leader's readers could read, and trims it further at its own
//!   next apply if its own retention is lower.
//! - Positions are Raft indexes, the same on every replica; only where each replica's
//!   retained history starts can differ (segment boundaries differ, e.g. after a snapshot
//!   install): a read from before it begins at the oldest entry kept there ([`StateMachine::read`]).
//! - Retention does not wait for readers, as on a single-copy log: a subscriber resuming from
//!   an index retention removed is served from the oldest entry kept. Nothing the Raft needs
//!   is among what it removes.
//!
//! The committed log's retention bounds what readers and snapshots see, not the Raft log,
//! which holds at most about `snapshot_every` + `keep_after_snapshot` entries whatever the
//! retention. Like a single-copy log's, retention runs only when something is written: a
//! topic without publishes keeps what it has until its next apply.
//!
//! A batch of a format version this build does not know ([`crate::Batch::check`]) is not
//! applied: `apply` fails, which stops this replica's Raft (a newer build wrote it; the
//! replica waits for an upgrade rather than guess), and a reader meeting one gets an error.

use std::fmt::Debug;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::{
    AnyError, EntryPayload, OptionalSend, RaftSnapshotBuilder, Snapshot, SnapshotMeta,
    StorageIOError,
};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use starling_storage::{Fs, Log, LogConfig, LogView, RetentionPolicy, RetentionSource, now_ms};

use crate::batch::Applied;
use crate::codec;
use crate::committed::{Committed, CommittedRecord};
use crate::entry_codec;
use crate::log_store::position;
use crate::meta;
use crate::snapshot::{SNAPSHOT_VERSION, SnapshotImage};
use crate::types::{Entry, LogId, Node, NodeId, StorageError, StoredMembership, TypeConfig};

/// The state machine's meta file.
pub const SM_META_FILE: &str = "sm-meta.json";

/// What `sm-meta.json` holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct SmMeta {
    /// The generation directory of the committed log.
    generation: u64,
    /// The last applied membership.
    membership: StoredMembership,
}

struct Inner<F: Fs> {
    fs: F,
    dir: PathBuf,
    config: LogConfig,
    meta: SmMeta,
    log: Log<F>,
    applied: Option<LogId>,
    max_snapshot: usize,
    /// Where each retention run reads the retention in force (`None`: `config.retention`).
    retention: Option<Arc<dyn RetentionSource>>,
}

/// One topic's committed log; cloning shares it (the clone is the snapshot builder, and the
/// topic's readers hold one).
#[derive(Clone)]
pub struct StateMachine<F: Fs> {
    inner: Arc<Mutex<Inner<F>>>,
}

impl<F: Fs> Debug for StateMachine<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateMachine").finish_non_exhaustive()
    }
}

fn sm_read_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::read_state_machine(AnyError::new(&e)).into()
}

fn sm_write_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_state_machine(AnyError::new(&e)).into()
}

fn generation_dir(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("g{generation}"))
}

/// Decodes a stored record; its messages are slices of the record's buffer (no copy).
fn decode_record(payload: &bytes::Bytes, max: usize) -> Result<CommittedRecord, StorageError> {
    entry_codec::decode_record_shared(payload, max).map_err(sm_read_err)
}

impl<F: Fs> StateMachine<F> {
    /// Opens (creating it if needed) the committed log under `dir` through `fs`. `config`
    /// is the committed log's storage configuration (its fsync policy is taken as explicit
    /// syncs, see the module doc); `max_snapshot` bounds a received snapshot's bytes.
    pub fn open(
        fs: F,
        dir: &Path,
        config: LogConfig,
        max_snapshot: usize,
    ) -> Result<StateMachine<F>, StorageError> {
        fs.create_dir_all(dir).map_err(sm_read_err)?;
        let meta: SmMeta = match meta::read(&fs, dir, SM_META_FILE).map_err(sm_read_err)? {
            Some(b) => codec::decode_body(&b, 1 << 20).map_err(sm_read_err)?,
            None => SmMeta::default(),
        };
        let (log, _) = Log::open_in(fs.clone(), generation_dir(dir, meta.generation), config)
            .map_err(sm_read_err)?;
        let mut inner = Inner {
            fs,
            dir: dir.to_path_buf(),
            config,
            meta,
            log,
            applied: None,
            max_snapshot,
            retention: None,
        };
        if let Some(last) = inner.last_record()? {
            inner.applied = Some(last.log_id());
            // A membership change fsynced but whose meta write a crash cut short is the last
            // record (see `apply`).
            if let CommittedRecord::Membership { log_id, membership } = last
                && inner
                    .meta
                    .membership
                    .log_id()
                    .is_none_or(|m| m.index < log_id.index)
            {
                inner.meta.membership = StoredMembership::new(Some(log_id), membership);
            }
        }
        Ok(StateMachine {
            inner: Arc::new(Mutex::new(inner)),
        })
    }

    /// Makes every later retention run apply what `source` gives then, instead of the
    /// retention the committed log was opened with (see the module doc).
    pub fn follow_retention(&self, source: Arc<dyn RetentionSource>) {
        self.inner.lock().retention = Some(source);
    }

    /// The last applied log id: the topic's high-water mark.
    pub fn applied(&self) -> Option<LogId> {
        self.inner.lock().applied
    }

    /// A handle on the current committed log (it changes when a snapshot is installed).
    fn view(&self) -> LogView<F> {
        self.inner.lock().log.view()
    }

    /// Up to `max` committed publishes from index `from` on (from the oldest retained one if
    /// `from` is older), in order. Blank and membership entries are skipped; each returned
    /// publish carries its index, so a reader resumes from the last index + 1.
    pub fn read(&self, from: u64, max: usize) -> Result<Vec<Committed>, StorageError> {
        let max_record = self.inner.lock().config.max_record_bytes as usize;
        let mut out = Vec::new();
        for r in self.view().read_from(position(from)) {
            if out.len() >= max {
                break;
            }
            let r = r.map_err(sm_read_err)?;
            if let CommittedRecord::Batch { log_id, batch } = decode_record(&r.payload, max_record)?
            {
                if let Err(version) = batch.check() {
                    let why = std::io::Error::other(format!("unknown batch version {version}"));
                    return Err(sm_read_err(why));
                }
                out.push(Committed {
                    index: log_id.index,
                    term: log_id.leader_id.term,
                    messages: batch.messages,
                    headers: batch.headers,
                });
            }
        }
        Ok(out)
    }
}

impl<F: Fs> StateMachine<F> {
    /// The headers of the committed publishes this replica applied at or after `since_ms`
    /// (its own clock when it applied each; the committed log's record stamps), oldest
    /// first, each with its stamp: only the publishes that carry headers, at most `max` of
    /// them (the newest kept). What a replica reads back at open to rebuild what it remembers
    /// of recent publishes (the broker's message-id window).
    pub fn headers_since(
        &self,
        since_ms: u64,
        max: usize,
    ) -> Result<Vec<(u64, bytes::Bytes)>, StorageError> {
        let max_record = self.inner.lock().config.max_record_bytes as usize;
        let mut out = std::collections::VecDeque::new();
        if max == 0 {
            return Ok(Vec::new());
        }
        for r in self.view().read_from_time(since_ms) {
            let r = r.map_err(sm_read_err)?;
            if let CommittedRecord::Batch { batch, .. } = decode_record(&r.payload, max_record)?
                && !batch.headers.is_empty()
            {
                if out.len() == max {
                    out.pop_front();
                }
                out.push_back((r.timestamp_ms, batch.headers));
            }
        }
        Ok(out.into())
    }
}

impl<F: Fs> Inner<F> {
    fn max_record(&self) -> usize {
        self.config.max_record_bytes as usize
    }

    /// The retention in force now (see the module doc).
    fn retention_now(&self) -> RetentionPolicy {
        self.retention
            .as_ref()
            .map_or(self.config.retention, |s| s.retention_now())
    }

    fn last_record(&self) -> Result<Option<CommittedRecord>, StorageError> {
        let Some(next) = self.log.next_position() else {
            return Ok(None);
        };
        let Some(index) = next.seq.checked_sub(1) else {
            return Ok(None);
        };
        match self.log.read_from(position(index)).next() {
            None => Ok(None),
            Some(r) => {
                let r = r.map_err(sm_read_err)?;
                decode_record(&r.payload, self.max_record()).map(Some)
            }
        }
    }

    fn save_meta(&self) -> Result<(), StorageError> {
        let bytes = codec::encode_body(&self.meta).map_err(sm_write_err)?;
        meta::write_atomic(&self.fs, &self.dir, SM_META_FILE, &bytes).map_err(sm_write_err)
    }

    fn append(&mut self, record: &CommittedRecord) -> Result<(), StorageError> {
        let log_id = record.log_id();
        let payload = entry_codec::encode_record(record).map_err(sm_write_err)?;
        self.log
            .append(position(log_id.index), 1, &payload)
            .map_err(|e| StorageIOError::apply(log_id, AnyError::new(&e)))?;
        self.applied = Some(log_id);
        Ok(())
    }

    fn image(&self) -> Result<SnapshotImage, StorageError> {
        let mut records = Vec::new();
        if let Some(first) = self.log.view().first_position() {
            for r in self.log.read_from(first) {
                let r = r.map_err(sm_read_err)?;
                records.push(decode_record(&r.payload, self.max_record())?);
            }
        }
        Ok(SnapshotImage {
            version: SNAPSHOT_VERSION,
            records,
        })
    }

    fn build(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        self.log.sync().map_err(sm_write_err)?;
        let image = self.image()?;
        let bytes = image.encode().map_err(sm_read_err)?;
        let last = self.applied;
        let snapshot_id = match last {
            Some(l) => format!("{}-{}-{}", l.leader_id.term, l.index, image.records.len()),
            None => "empty".to_string(),
        };
        Ok(Snapshot {
            meta: SnapshotMeta {
                last_log_id: last,
                last_membership: self.meta.membership.clone(),
                snapshot_id,
            },
            snapshot: Box::new(Cursor::new(bytes)),
        })
    }

    fn install(
        &mut self,
        meta: &SnapshotMeta<NodeId, Node>,
        image: SnapshotImage,
    ) -> Result<(), StorageError> {
        let want_last = meta.last_log_id;
        let got_last = image.records.last().map(CommittedRecord::log_id);
        if want_last != got_last {
            let why = std::io::Error::other(format!(
                "snapshot records end at {got_last:?}, its meta says {want_last:?}"
            ));
            return Err(sm_read_err(why));
        }
        let old = self.meta.generation;
        let next = old + 1;
        let dir = generation_dir(&self.dir, next);
        // Left over from an install a crash cut short.
        remove_all(&self.fs, &dir).map_err(sm_write_err)?;
        let (mut log, _) =
            Log::open_in(self.fs.clone(), &dir, self.config).map_err(sm_write_err)?;
        for record in &image.records {
            let payload = entry_codec::encode_record(record).map_err(sm_write_err)?;
            log.append(position(record.log_id().index), 1, &payload)
                .map_err(sm_write_err)?;
        }
        log.sync().map_err(sm_write_err)?;
        self.meta = SmMeta {
            generation: next,
            membership: meta.last_membership.clone(),
        };
        self.save_meta()?;
        self.log = log;
        self.applied = want_last;
        remove_all(&self.fs, &generation_dir(&self.dir, old)).map_err(sm_write_err)?;
        Ok(())
    }
}

/// Removes every file of a generation directory (the directory itself stays: the file
/// layer has no directory removal).
fn remove_all<F: Fs>(fs: &F, dir: &Path) -> std::io::Result<()> {
    if !fs.exists(dir) {
        return Ok(());
    }
    let names = match fs.list(dir) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for name in names {
        fs.remove_file(&dir.join(name))?;
    }
    fs.sync_dir(dir)
}

impl<F: Fs> RaftSnapshotBuilder<TypeConfig> for StateMachine<F> {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        self.inner.lock().build()
    }
}

impl<F: Fs> RaftStateMachine<TypeConfig> for StateMachine<F> {
    type SnapshotBuilder = StateMachine<F>;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let inner = self.inner.lock();
        Ok((inner.applied, inner.meta.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Applied>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut inner = self.inner.lock();
        let mut out = Vec::new();
        for entry in entries {
            let index = entry.log_id.index;
            let membership = match &entry.payload {
                EntryPayload::Membership(m) => Some(m.clone()),
                _ => None,
            };
            if let EntryPayload::Normal(batch) = &entry.payload
                && let Err(version) = batch.check()
            {
                // A newer build wrote it: stop rather than guess what it means.
                let why = std::io::Error::other(format!("unknown batch version {version}"));
                return Err(StorageIOError::apply(entry.log_id, AnyError::new(&why)).into());
            }
            let record = CommittedRecord::of(entry);
            inner.append(&record)?;
            if let Some(m) = membership {
                inner.log.sync().map_err(sm_write_err)?;
                inner.meta.membership = StoredMembership::new(Some(record.log_id()), m);
                inner.save_meta()?;
            }
            out.push(Applied { index });
        }
        let retention = inner.retention_now();
        let now = now_ms();
        let limited = retention.max_bytes.is_some() || retention.max_age_ms.is_some();
        if limited && inner.log.retention_due(retention, now) > 0 {
            // What stays is made durable before anything goes (see the module doc).
            inner.log.sync().map_err(sm_write_err)?;
            inner
                .log
                .enforce_retention_under(retention, now)
                .map_err(sm_write_err)?;
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> StateMachine<F> {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, Node>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let mut inner = self.inner.lock();
        let image =
            SnapshotImage::decode(snapshot.get_ref(), inner.max_snapshot).map_err(sm_read_err)?;
        inner.install(meta, image)
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let mut inner = self.inner.lock();
        if inner.applied.is_none() {
            return Ok(None);
        }
        inner.build().map(Some)
    }
}
