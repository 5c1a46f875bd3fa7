//! [`FaultFs`]: an in-memory [`Fs`] for tests that keeps, beside what a reader sees, what
//! would survive a power cut, and injects the failures a real disk has.
//!
//! - **Durability.** Each file has its current bytes (the page cache) and its durable image.
//!   A write or a truncation is pending until [`FsFile::sync_data`] on the file succeeds;
//!   a directory entry created, renamed or removed is pending until [`Fs::sync_dir`] on its
//!   directory. [`FaultFs::crash`] keeps only the durable images and entries, and can tear
//!   the last unsynced write: a prefix of it, cut at a 512-byte boundary of the file, is
//!   kept too (a hole of zeros before it if earlier unsynced writes were lost).
//! - **A failed fsync** ([`FaultFs::fail_fsyncs`]) drops the file's pending writes from what
//!   will ever be durable, as Linux does when writeback fails: the next fsync of the file
//!   succeeds without them.
//! - **A full disk** ([`FaultFs::set_capacity`]): a write past the capacity writes what fits
//!   and fails with `ENOSPC`.
//! - **A dying machine** ([`FaultFs::freeze_after`]): after a number of further changes every
//!   operation fails, so a crash can land inside an append or a segment roll.
//!
//! Directories themselves are always durable; only their entries are tracked.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::fs::{Fs, FsFile};

/// The sector size a torn write is cut at.
pub const SECTOR: u64 = 512;

/// What the layer counted since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Writes that reached the page cache (whole or partial).
    pub writes: u64,
    /// Successful data fsyncs.
    pub fsyncs: u64,
    /// Data fsyncs that failed (injected).
    pub failed_fsyncs: u64,
    /// Successful directory fsyncs.
    pub dir_syncs: u64,
    /// Writes refused (or cut short) for lack of space.
    pub no_space: u64,
    /// Crashes.
    pub crashes: u64,
}

/// An in-memory, fault-injecting file system; clones share it. See the module doc.
#[derive(Debug, Clone, Default)]
pub struct FaultFs {
    world: Arc<Mutex<World>>,
}

#[derive(Debug, Default)]
struct World {
    inodes: HashMap<u64, Inode>,
    names: BTreeMap<PathBuf, u64>,
    durable_names: BTreeMap<PathBuf, u64>,
    dirs: BTreeSet<PathBuf>,
    next_ino: u64,
    /// Bumped by a crash: handles opened before it fail.
    generation: u64,
    /// The last write not yet fsynced: its file, offset and bytes.
    last_write: Option<(u64, u64, Vec<u8>)>,
    capacity: Option<u64>,
    fail_fsyncs: u64,
    fail_dir_syncs: u64,
    /// Changes left before the machine "dies" (`Some(0)`: dead).
    ops_left: Option<u64>,
    stats: FaultStats,
}

#[derive(Debug, Default, Clone)]
struct Inode {
    data: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<Pending>,
}

#[derive(Debug, Clone, Copy)]
enum Pending {
    Write { off: u64, len: u64 },
    SetLen(u64),
}

fn dead() -> io::Error {
    io::Error::other("fault injection: the machine is down")
}

fn stale() -> io::Error {
    io::Error::other("fault injection: handle opened before a crash")
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: not found", path.display()),
    )
}

fn usize_of(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

impl Inode {
    /// Applies the pending changes to the durable image.
    fn persist(&mut self) {
        for p in std::mem::take(&mut self.pending) {
            match p {
                Pending::Write { off, len } => {
                    let (off, end) = (usize_of(off), usize_of(off.saturating_add(len)));
                    let end = end.min(self.data.len());
                    if off >= end {
                        continue;
                    }
                    if self.durable.len() < end {
                        self.durable.resize(end, 0);
                    }
                    self.durable[off..end].copy_from_slice(&self.data[off..end]);
                }
                Pending::SetLen(n) => self.durable.resize(usize_of(n), 0),
            }
        }
    }
}

impl World {
    /// Counts a change; fails once the machine is dead.
    fn change(&mut self) -> io::Result<()> {
        match &mut self.ops_left {
            Some(0) => Err(dead()),
            Some(n) => {
                *n -= 1;
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn alive(&self) -> io::Result<()> {
        if self.ops_left == Some(0) {
            Err(dead())
        } else {
            Ok(())
        }
    }

    fn used(&self) -> u64 {
        let live: BTreeSet<u64> = self.names.values().copied().collect();
        live.iter()
            .filter_map(|i| self.inodes.get(i))
            .map(|n| n.data.len() as u64)
            .sum()
    }

    fn new_inode(&mut self, path: &Path) -> u64 {
        self.next_ino += 1;
        let ino = self.next_ino;
        self.inodes.insert(ino, Inode::default());
        if let Some(old) = self.names.insert(path.to_path_buf(), ino) {
            self.forget(old);
        }
        ino
    }

    /// Drops an inode no name (current or durable) refers to any more.
    fn forget(&mut self, ino: u64) {
        let named = self.names.values().any(|&i| i == ino)
            || self.durable_names.values().any(|&i| i == ino);
        if !named {
            self.inodes.remove(&ino);
        }
    }

    fn parent_exists(&self, path: &Path) -> io::Result<()> {
        match path.parent() {
            Some(p) if self.dirs.contains(p) => Ok(()),
            _ => Err(not_found(path)),
        }
    }
}

impl FaultFs {
    /// An empty file system.
    pub fn new() -> FaultFs {
        FaultFs::default()
    }

    /// A power cut: every file goes back to its durable image and every directory to its
    /// durable entries; handles opened before fail from now on. `tear`: also keep a prefix of
    /// the last unsynced write, up to its `tear`-th 512-byte boundary (modulo the boundaries
    /// inside it; nothing if it crosses none). The machine is up again afterwards, with no
    /// fsync failure pending (the capacity stays).
    pub fn crash(&self, tear: Option<usize>) {
        let mut w = self.world.lock();
        w.generation += 1;
        w.stats.crashes += 1;
        w.ops_left = None;
        w.fail_fsyncs = 0;
        w.fail_dir_syncs = 0;
        let torn = w.last_write.take();
        w.names = w.durable_names.clone();
        let live: BTreeSet<u64> = w.names.values().copied().collect();
        w.inodes.retain(|ino, _| live.contains(ino));
        for inode in w.inodes.values_mut() {
            inode.data = inode.durable.clone();
            inode.pending.clear();
        }
        if let (Some(k), Some((ino, off, bytes))) = (tear, torn)
            && let Some(inode) = w.inodes.get_mut(&ino)
        {
            let end = off + bytes.len() as u64;
            let first = (off / SECTOR + 1) * SECTOR;
            let bounds: Vec<u64> = (first..end).step_by(usize_of(SECTOR)).collect();
            if !bounds.is_empty() {
                let cut = bounds[k % bounds.len()];
                let keep = &bytes[..usize_of(cut - off)];
                let (o, e) = (usize_of(off), usize_of(cut));
                if inode.data.len() < e {
                    inode.data.resize(e, 0);
                }
                inode.data[o..e].copy_from_slice(keep);
                inode.durable = inode.data.clone();
            }
        }
    }

    /// Limits the bytes all files may hold (`None`: no limit).
    pub fn set_capacity(&self, bytes: Option<u64>) {
        self.world.lock().capacity = bytes;
    }

    /// Makes the next `n` data fsyncs fail with `EIO`, dropping the pending writes of each.
    pub fn fail_fsyncs(&self, n: u64) {
        self.world.lock().fail_fsyncs = n;
    }

    /// Makes the next `n` directory fsyncs fail with `EIO` (the entries stay pending).
    pub fn fail_dir_syncs(&self, n: u64) {
        self.world.lock().fail_dir_syncs = n;
    }

    /// After `n` more changes (writes, truncations, fsyncs, creations, renames, removals)
    /// every operation fails, as on a machine that lost power; [`FaultFs::crash`] then takes
    /// what was durable.
    pub fn freeze_after(&self, n: u64) {
        self.world.lock().ops_left = Some(n);
    }

    /// What was counted so far.
    pub fn stats(&self) -> FaultStats {
        self.world.lock().stats
    }

    /// A file's current bytes (`None`: no such file).
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let w = self.world.lock();
        let ino = w.names.get(path)?;
        w.inodes.get(ino).map(|i| i.data.clone())
    }

    /// Overwrites bytes of a file in place in both its current and its durable image, as
    /// media corruption would (extending it if needed).
    pub fn corrupt(&self, path: &Path, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let mut w = self.world.lock();
        let ino = *w.names.get(path).ok_or_else(|| not_found(path))?;
        let inode = w.inodes.get_mut(&ino).ok_or_else(|| not_found(path))?;
        let (o, e) = (usize_of(offset), usize_of(offset + bytes.len() as u64));
        for image in [&mut inode.data, &mut inode.durable] {
            if image.len() < e {
                image.resize(e, 0);
            }
            image[o..e].copy_from_slice(bytes);
        }
        Ok(())
    }

    /// Every file's path, in order.
    pub fn files(&self) -> Vec<PathBuf> {
        self.world.lock().names.keys().cloned().collect()
    }

    fn handle(&self, path: &Path, writable: bool) -> io::Result<FaultFile> {
        let w = self.world.lock();
        w.alive()?;
        let ino = *w.names.get(path).ok_or_else(|| not_found(path))?;
        Ok(FaultFile {
            world: Arc::clone(&self.world),
            ino,
            generation: w.generation,
            writable,
        })
    }
}

/// A file of a [`FaultFs`].
#[derive(Debug)]
pub struct FaultFile {
    world: Arc<Mutex<World>>,
    ino: u64,
    generation: u64,
    writable: bool,
}

impl FaultFile {
    fn with<T>(&self, f: impl FnOnce(&mut World, u64) -> io::Result<T>) -> io::Result<T> {
        let mut w = self.world.lock();
        if w.generation != self.generation {
            return Err(stale());
        }
        f(&mut w, self.ino)
    }
}

impl FsFile for FaultFile {
    fn len(&self) -> io::Result<u64> {
        self.with(|w, ino| {
            w.alive()?;
            Ok(w.inodes.get(&ino).map_or(0, |i| i.data.len() as u64))
        })
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.with(|w, ino| {
            w.alive()?;
            let data = &w.inodes.get(&ino).ok_or_else(stale)?.data;
            let o = usize_of(offset);
            let src = data
                .get(o..o.saturating_add(buf.len()))
                .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
            buf.copy_from_slice(src);
            Ok(())
        })
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::from(io::ErrorKind::PermissionDenied));
        }
        self.with(|w, ino| {
            w.change()?;
            let old_len = w.inodes.get(&ino).map_or(0, |i| i.data.len() as u64);
            let end = offset + buf.len() as u64;
            let mut n = buf.len();
            let mut full = false;
            if let Some(cap) = w.capacity {
                let room = cap.saturating_sub(w.used()) + old_len;
                if end > room {
                    n = usize_of(room.saturating_sub(offset)).min(buf.len());
                    full = true;
                }
            }
            if n > 0 {
                let inode = w.inodes.get_mut(&ino).ok_or_else(stale)?;
                let (o, e) = (usize_of(offset), usize_of(offset) + n);
                if inode.data.len() < e {
                    inode.data.resize(e, 0);
                }
                inode.data[o..e].copy_from_slice(&buf[..n]);
                inode.pending.push(Pending::Write {
                    off: offset,
                    len: n as u64,
                });
                w.stats.writes += 1;
                w.last_write = Some((ino, offset, buf[..n].to_vec()));
            }
            if full {
                w.stats.no_space += 1;
                return Err(io::Error::from_raw_os_error(28));
            }
            Ok(())
        })
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.with(|w, ino| {
            w.change()?;
            let inode = w.inodes.get_mut(&ino).ok_or_else(stale)?;
            inode.data.resize(usize_of(len), 0);
            inode.pending.push(Pending::SetLen(len));
            Ok(())
        })
    }

    fn sync_data(&self) -> io::Result<()> {
        self.with(|w, ino| {
            w.change()?;
            let failing = w.fail_fsyncs > 0;
            if failing {
                w.fail_fsyncs -= 1;
                w.stats.failed_fsyncs += 1;
            } else {
                w.stats.fsyncs += 1;
            }
            let inode = w.inodes.get_mut(&ino).ok_or_else(stale)?;
            if failing {
                // Writeback failed: the pages are marked clean and never written.
                inode.pending.clear();
            } else {
                inode.persist();
            }
            if w.last_write.as_ref().is_some_and(|(i, _, _)| *i == ino) {
                w.last_write = None;
            }
            if failing {
                Err(io::Error::from_raw_os_error(5))
            } else {
                Ok(())
            }
        })
    }
}

impl Fs for FaultFs {
    type File = FaultFile;

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut w = self.world.lock();
        w.alive()?;
        for d in dir.ancestors() {
            w.dirs.insert(d.to_path_buf());
        }
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let w = self.world.lock();
        w.alive()?;
        if !w.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        Ok(w.names
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
            .collect())
    }

    fn open(&self, path: &Path) -> io::Result<FaultFile> {
        self.handle(path, true)
    }

    fn open_read(&self, path: &Path) -> io::Result<FaultFile> {
        self.handle(path, false)
    }

    fn create_new(&self, path: &Path) -> io::Result<FaultFile> {
        {
            let mut w = self.world.lock();
            w.parent_exists(path)?;
            if w.names.contains_key(path) {
                return Err(io::Error::from(io::ErrorKind::AlreadyExists));
            }
            w.change()?;
            w.new_inode(path);
        }
        self.handle(path, true)
    }

    fn create(&self, path: &Path) -> io::Result<FaultFile> {
        {
            let mut w = self.world.lock();
            w.parent_exists(path)?;
            w.change()?;
            match w.names.get(path).copied() {
                Some(ino) => {
                    if let Some(i) = w.inodes.get_mut(&ino) {
                        i.data.clear();
                        i.pending.push(Pending::SetLen(0));
                    }
                }
                None => {
                    w.new_inode(path);
                }
            }
        }
        self.handle(path, true)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let w = self.world.lock();
        w.alive()?;
        let ino = w.names.get(path).ok_or_else(|| not_found(path))?;
        Ok(w.inodes
            .get(ino)
            .map(|i| i.data.clone())
            .unwrap_or_default())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut w = self.world.lock();
        w.parent_exists(to)?;
        let ino = *w.names.get(from).ok_or_else(|| not_found(from))?;
        w.change()?;
        w.names.remove(from);
        if let Some(old) = w.names.insert(to.to_path_buf(), ino) {
            w.forget(old);
        }
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut w = self.world.lock();
        let ino = *w.names.get(path).ok_or_else(|| not_found(path))?;
        w.change()?;
        w.names.remove(path);
        w.forget(ino);
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        let w = self.world.lock();
        w.names.contains_key(path) || w.dirs.contains(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut w = self.world.lock();
        w.change()?;
        if !w.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        if w.fail_dir_syncs > 0 {
            w.fail_dir_syncs -= 1;
            return Err(io::Error::from_raw_os_error(5));
        }
        w.stats.dir_syncs += 1;
        let in_dir = |p: &PathBuf| p.parent() == Some(dir);
        let now: Vec<(PathBuf, u64)> = w
            .names
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, i)| (p.clone(), *i))
            .collect();
        let gone: Vec<(PathBuf, u64)> = w
            .durable_names
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, i)| (p.clone(), *i))
            .collect();
        for (p, ino) in gone {
            w.durable_names.remove(&p);
            w.forget(ino);
        }
        w.durable_names.extend(now);
        Ok(())
    }

    fn available_bytes(&self, dir: &Path) -> io::Result<u64> {
        let w = self.world.lock();
        w.alive()?;
        if !w.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        Ok(w.capacity.map_or(u64::MAX, |c| c.saturating_sub(w.used())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn a_crash_keeps_what_was_fsynced_and_entries_whose_directory_was() {
        let fs = FaultFs::new();
        fs.create_dir_all(&p("/d")).unwrap();
        let f = fs.create_new(&p("/d/a")).unwrap();
        f.write_all_at(b"hello", 0).unwrap();
        f.sync_data().unwrap();
        f.write_all_at(b" world", 5).unwrap();
        // The file's entry is not durable yet: a crash loses the file.
        fs.crash(None);
        assert!(fs.contents(&p("/d/a")).is_none());
        assert!(f.len().is_err(), "a handle from before the crash is stale");

        let f = fs.create_new(&p("/d/a")).unwrap();
        f.write_all_at(b"hello", 0).unwrap();
        f.sync_data().unwrap();
        fs.sync_dir(&p("/d")).unwrap();
        f.write_all_at(b" world", 5).unwrap();
        fs.crash(None);
        assert_eq!(fs.contents(&p("/d/a")).unwrap(), b"hello");
    }

    #[test]
    fn a_removal_not_made_durable_is_undone_by_a_crash() {
        let fs = FaultFs::new();
        fs.create_dir_all(&p("/d")).unwrap();
        let f = fs.create_new(&p("/d/a")).unwrap();
        f.write_all_at(b"x", 0).unwrap();
        f.sync_data().unwrap();
        fs.sync_dir(&p("/d")).unwrap();
        fs.remove_file(&p("/d/a")).unwrap();
        assert!(!fs.exists(&p("/d/a")));
        fs.crash(None);
        assert_eq!(fs.contents(&p("/d/a")).unwrap(), b"x");
    }

    #[test]
    fn a_torn_write_keeps_a_prefix_cut_at_a_sector_boundary() {
        let fs = FaultFs::new();
        fs.create_dir_all(&p("/d")).unwrap();
        let f = fs.create_new(&p("/d/a")).unwrap();
        fs.sync_dir(&p("/d")).unwrap();
        f.write_all_at(&[1u8; 100], 0).unwrap();
        f.sync_data().unwrap();
        f.write_all_at(&[2u8; 1500], 100).unwrap();
        // Boundaries inside [100, 1600): 512, 1024, 1536; the second is 1024.
        fs.crash(Some(1));
        let got = fs.contents(&p("/d/a")).unwrap();
        assert_eq!(got.len(), 1024);
        assert!(got[..100].iter().all(|&b| b == 1));
        assert!(got[100..].iter().all(|&b| b == 2));
    }

    #[test]
    fn a_failed_fsync_loses_the_pending_writes_and_the_next_one_succeeds() {
        let fs = FaultFs::new();
        fs.create_dir_all(&p("/d")).unwrap();
        let f = fs.create_new(&p("/d/a")).unwrap();
        fs.sync_dir(&p("/d")).unwrap();
        f.write_all_at(b"lost", 0).unwrap();
        fs.fail_fsyncs(1);
        assert!(f.sync_data().is_err());
        f.write_all_at(b"kept", 4).unwrap();
        f.sync_data().unwrap();
        assert_eq!(fs.contents(&p("/d/a")).unwrap(), b"lostkept");
        fs.crash(None);
        assert_eq!(fs.contents(&p("/d/a")).unwrap(), b"\0\0\0\0kept");
    }

    #[test]
    fn a_full_disk_writes_what_fits_and_says_enospc() {
        let fs = FaultFs::new();
        fs.create_dir_all(&p("/d")).unwrap();
        let f = fs.create_new(&p("/d/a")).unwrap();
        fs.set_capacity(Some(10));
        let e = f.write_all_at(&[7u8; 16], 0).unwrap_err();
        assert!(crate::fs::is_no_space(&e), "{e}");
        assert_eq!(f.len().unwrap(), 10);
        assert_eq!(fs.available_bytes(&p("/d")).unwrap(), 0);
        f.set_len(0).unwrap();
        assert_eq!(fs.available_bytes(&p("/d")).unwrap(), 10);
        fs.set_capacity(None);
        f.write_all_at(&[7u8; 16], 0).unwrap();
    }

    #[test]
    fn a_frozen_machine_fails_every_change() {
        let fs = FaultFs::new();
        fs.create_dir_all(&p("/d")).unwrap();
        let f = fs.create_new(&p("/d/a")).unwrap();
        fs.freeze_after(1);
        f.write_all_at(b"a", 0).unwrap();
        assert!(f.write_all_at(b"b", 1).is_err());
        assert!(f.sync_data().is_err());
        fs.crash(None);
        assert!(fs.create_new(&p("/d/b")).is_ok());
    }
}
