//! Output files that appear whole or not at all.
//!
//! An [`AtomicFile`] is written under a temporary name beside its destination
//! (`DEST.tmp-PID`) and renamed over the destination by [`AtomicFile::commit`]. Dropped
//! without a commit (an error, a panic, a damaged input) it removes the temporary file, so
//! a conversion that fails half-way leaves nothing that looks complete, and an existing
//! file at the destination is untouched until the new one is whole.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// A file written under a temporary name and renamed into place when complete.
///
/// ```
/// use std::io::Write;
/// # let dir = std::env::temp_dir().join(format!("atomic-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let dest = dir.join("out.txt");
/// let mut f = trace_registry::output::AtomicFile::create(&dest)?;
/// writeln!(f, "hello")?;
/// assert!(!dest.exists()); // nothing at the destination until the commit
/// f.commit()?;
/// assert_eq!(std::fs::read_to_string(&dest)?, "hello\n");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct AtomicFile {
    file: File,
    temp: PathBuf,
    dest: PathBuf,
    committed: bool,
}

impl AtomicFile {
    /// Creates the temporary file beside `dest` (which is not touched yet).
    ///
    /// # Errors
    ///
    /// The temporary file cannot be created (the directory is missing or not writable).
    pub fn create(dest: &Path) -> io::Result<Self> {
        let temp = temp_path(dest);
        let file = File::create(&temp)?;
        Ok(Self {
            file,
            temp,
            dest: dest.to_owned(),
            committed: false,
        })
    }

    /// The destination path.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// The temporary path being written; other scratch files may be named after it
    /// (they are the caller's to remove).
    pub fn temp_path(&self) -> &Path {
        &self.temp
    }

    /// Flushes the data to disk and renames the temporary file to the destination,
    /// replacing any file there.
    ///
    /// # Errors
    ///
    /// The data cannot be synced or the rename fails, or an input changed while it was read
    /// ([`check_unchanged`](crate::check_unchanged)); the temporary file is then removed.
    pub fn commit(mut self) -> io::Result<()> {
        crate::check_unchanged().map_err(io::Error::other)?;
        self.file.sync_all()?;
        std::fs::rename(&self.temp, &self.dest)?;
        self.committed = true;
        Ok(())
    }
}

/// `DEST.tmp-PID`: beside the destination, so the rename stays on one file system.
fn temp_path(dest: &Path) -> PathBuf {
    let mut name = dest.as_os_str().to_owned();
    name.push(format!(".tmp-{}", std::process::id()));
    PathBuf::from(name)
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Seek for AtomicFile {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.file.seek(pos)
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tk-atomic-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn dropped_without_commit_leaves_nothing_and_keeps_the_old_file() {
        let dir = scratch("drop");
        let dest = dir.join("out");
        std::fs::write(&dest, b"old").unwrap();
        {
            let mut f = AtomicFile::create(&dest).unwrap();
            f.write_all(b"half of the new").unwrap();
            assert!(f.temp_path().exists());
        }
        assert_eq!(std::fs::read(&dest).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn commit_replaces_the_destination() {
        let dir = scratch("commit");
        let dest = dir.join("out");
        std::fs::write(&dest, b"old").unwrap();
        let mut f = AtomicFile::create(&dest).unwrap();
        f.write_all(b"new").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_directory_is_an_error_at_create() {
        let dir = scratch("missing");
        assert!(AtomicFile::create(&dir.join("no/such/dir/out")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
