//! The file layer the log writes through: [`Fs`] (directory operations and opening files)
//! and [`FsFile`] (positioned reads and writes, truncation, fsync), with [`RealFs`], the
//! operating system's files. The log is generic over [`Fs`] (static dispatch: the real path
//! compiles to the same calls as `std::fs`), so tests can put [`crate::fault::FaultFs`] under
//! it to see what a power cut, a failed fsync or a full disk leaves behind.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// One open file of the log.
pub trait FsFile: Send + Sync + fmt::Debug + 'static {
    /// The file's length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Fills `buf` from `offset` (an error if the file ends first).
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset`; on an error part of it may have been written.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Cuts or extends the file to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes the file's data (and the metadata needed to read it back, such as its length)
    /// durable: `fdatasync`.
    fn sync_data(&self) -> io::Result<()>;
}

/// The directory operations of the log, and how it opens files.
pub trait Fs: Clone + Send + Sync + fmt::Debug + 'static {
    /// An open file.
    type File: FsFile;
    /// Creates `dir` and its parents if missing.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// The names of the entries of `dir` (names that are not UTF-8 are left out: the log
    /// never creates one).
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Opens an existing file for reading and writing.
    fn open(&self, path: &Path) -> io::Result<Self::File>;
    /// Opens an existing file for reading.
    fn open_read(&self, path: &Path) -> io::Result<Self::File>;
    /// Creates a file that must not exist yet, for reading and writing.
    fn create_new(&self, path: &Path) -> io::Result<Self::File>;
    /// Creates a file, or empties an existing one, for reading and writing.
    fn create(&self, path: &Path) -> io::Result<Self::File>;
    /// A whole file's bytes.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Renames `from` to `to` (replacing `to`).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> bool;
    /// Makes the directory's entries (files created, renamed or removed in it) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Bytes an unprivileged writer can still write on the volume holding `dir`.
    fn available_bytes(&self, dir: &Path) -> io::Result<u64>;
}

/// The operating system's files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RealFs;

impl FsFile for File {
    fn len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(self, buf, offset)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }

    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }
}

impl Fs for RealFs {
    type File = File;

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }

    fn open(&self, path: &Path) -> io::Result<File> {
        OpenOptions::new().read(true).write(true).open(path)
    }

    fn open_read(&self, path: &Path) -> io::Result<File> {
        File::open(path)
    }

    fn create_new(&self, path: &Path) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
    }

    fn create(&self, path: &Path) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn available_bytes(&self, dir: &Path) -> io::Result<u64> {
        let s = rustix::fs::statvfs(dir).map_err(io::Error::from)?;
        Ok(s.f_bavail.saturating_mul(s.f_frsize))
    }
}

/// Whether `e` says the volume (or the writer's quota) is full.
pub fn is_no_space(e: &io::Error) -> bool {
    // ENOSPC and EDQUOT on Linux.
    e.kind() == io::ErrorKind::StorageFull || matches!(e.raw_os_error(), Some(28 | 122))
}
