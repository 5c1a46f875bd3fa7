//! Deleting the files of a replica that left its topic (the mover found it out of the
//! committed voters and outside the desired set, see `mover`): its `raft/` and `committed/`
//! directories under the topic's directory, and the topic's directory itself when nothing
//! else is left in it (a one-copy log of the same topic stays).
//!
//! First `raft/` is renamed to [`REMOVING`] and the directory fsynced: from then on the
//! replica is gone (a broker decides whether it holds a replica by `raft/`), whatever a crash
//! leaves. Then `committed/` and [`REMOVING`] are deleted. A crash in between leaves
//! [`REMOVING`]: [`finish`], called before a replica is opened there, deletes the rest, so a
//! later replica never opens on a half-deleted committed log.

use std::io;
use std::path::Path;

/// What `raft/` is renamed to while a removed replica's files are deleted.
pub const REMOVING: &str = "raft.removing";

/// Deletes the files of the replica under `dir` (its Raft must be shut down).
pub fn remove_files(dir: &Path) -> io::Result<()> {
    let raft = dir.join("raft");
    if raft.is_dir() {
        std::fs::rename(&raft, dir.join(REMOVING))?;
        sync_dir(dir)?;
    }
    finish(dir)
}

/// Deletes what a removal cut short left under `dir`, if anything.
pub fn finish(dir: &Path) -> io::Result<()> {
    let removing = dir.join(REMOVING);
    if !removing.exists() {
        return Ok(());
    }
    // `raft/` back beside it would be a replica opened since (never: this runs first).
    if !dir.join("raft").exists() {
        remove_if_there(&dir.join("committed"))?;
    }
    remove_if_there(&removing)?;
    sync_dir(dir)?;
    // Empty now (no one-copy log beside it): the topic's directory goes too.
    if std::fs::remove_dir(dir).is_ok()
        && let Some(parent) = dir.parent()
    {
        sync_dir(parent)?;
    }
    Ok(())
}

fn remove_if_there(path: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica_dir(root: &Path) -> std::path::PathBuf {
        let dir = root.join("topic");
        for sub in ["raft", "committed/g0"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(dir.join("raft/00000001.log"), b"x").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.join("committed/g0/00000001.log"), b"x")
            .unwrap_or_else(|e| panic!("{e}"));
        dir
    }

    #[test]
    fn a_removed_replica_leaves_nothing() {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = replica_dir(root.path());
        remove_files(&dir).unwrap_or_else(|e| panic!("{e}"));
        assert!(!dir.exists());
    }

    #[test]
    fn a_one_copy_log_beside_the_replica_stays() {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = replica_dir(root.path());
        std::fs::write(dir.join("00000000000000000001.log"), b"x")
            .unwrap_or_else(|e| panic!("{e}"));
        remove_files(&dir).unwrap_or_else(|e| panic!("{e}"));
        assert!(!dir.join("raft").exists() && !dir.join("committed").exists());
        assert!(dir.join("00000000000000000001.log").exists());
    }

    #[test]
    fn a_removal_cut_short_is_finished_before_a_replica_opens_there() {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = replica_dir(root.path());
        // The crash after the rename.
        std::fs::rename(dir.join("raft"), dir.join(REMOVING)).unwrap_or_else(|e| panic!("{e}"));
        finish(&dir).unwrap_or_else(|e| panic!("{e}"));
        assert!(!dir.exists());
        // Nothing to finish: nothing happens.
        let dir = replica_dir(root.path());
        finish(&dir).unwrap_or_else(|e| panic!("{e}"));
        assert!(dir.join("raft").exists() && dir.join("committed").exists());
    }
}
