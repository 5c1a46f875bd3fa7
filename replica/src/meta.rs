//! Small state files written atomically through the storage file layer ([`Fs`]): write a
//! temporary file, fsync it, rename it over the old one, fsync the directory. A power cut
//! at any point leaves the old file or the new one, whole. Going through [`Fs`] lets the
//! fault layer ([`starling_storage::fault::FaultFs`]) cut power anywhere in that sequence.

use std::io;
use std::path::Path;

use starling_storage::{Fs, FsFile};

/// Replaces `dir/name` with `bytes`, durably and atomically.
pub fn write_atomic<F: Fs>(fs: &F, dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    let file = fs.create(&tmp)?;
    file.write_all_at(bytes, 0)?;
    file.sync_data()?;
    drop(file);
    fs.rename(&tmp, &path)?;
    fs.sync_dir(dir)
}

/// The bytes of `dir/name`, or `None` if it does not exist.
pub fn read<F: Fs>(fs: &F, dir: &Path, name: &str) -> io::Result<Option<Vec<u8>>> {
    let path = dir.join(name);
    if !fs.exists(&path) {
        return Ok(None);
    }
    match fs.read(&path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}
