//! Output files that appear whole or not at all.
//!
//! An [`AtomicFile`] is written under a temporary name beside its destination
//! (`DEST.tmp-PID`) and renamed over the destination by [`AtomicFile::commit`]. Dropped
//! without a commit (an error, a panic, a damaged input) it removes the temporary file, so
//! a conversion that fails half-way leaves nothing that looks complete, and an existing
//! file at the destination is untouched until the new one is whole.
//!
//! A run killed outright (`kill -9`, a power cut) cannot clean up: [`remove_leftovers`],
//! which every new output calls, removes the temporary files and folders an earlier run
//! left for the same destination once the process named in them no longer exists.

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
/// let mut f = trace_model::output::AtomicFile::create(&dest)?;
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
        remove_leftovers(dest);
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

/// Removes what earlier runs writing `dest` left behind when killed: `DEST.tmp-PID` files
/// ([`AtomicFile`]; and `DEST.tmp-PID.what`, scratch files named after them) and
/// `.NAME.partial-PID/` folders (Parquet datasets) beside it, each only
/// when process PID no longer exists (never a live run's, nor this process's). Where it
/// cannot be told whether a process exists (no `/proc`), nothing is removed. Failures are
/// ignored: a leftover is untidy, not wrong.
pub fn remove_leftovers(dest: &Path) {
    let Some(name) = dest.file_name().and_then(|n| n.to_str()) else {
        return;
    };
    let dir = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let file_prefix = format!("{name}.tmp-");
    let dir_prefix = format!(".{name}.partial-");
    for entry in entries.flatten() {
        let entry_name = entry.file_name();
        let Some(entry_name) = entry_name.to_str() else {
            continue;
        };
        let (pid, is_dir) = match (
            entry_name.strip_prefix(&file_prefix),
            entry_name.strip_prefix(&dir_prefix),
        ) {
            (Some(pid), _) => (pid, false),
            (_, Some(pid)) => (pid, true),
            _ => continue,
        };
        // `PID`, or `PID.what` for the scratch files named after a temporary file.
        let digits = pid.bytes().take_while(u8::is_ascii_digit).count();
        let (pid, rest) = pid.split_at(digits);
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if !(rest.is_empty() || rest.starts_with('.')) {
            continue;
        }
        if pid == std::process::id() || process_may_exist(pid) {
            continue;
        }
        let path = entry.path();
        let _ = if is_dir {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
    }
}

/// Whether process `pid` may exist: `true` unless `/proc` says it does not.
fn process_may_exist(pid: u32) -> bool {
    let proc = Path::new("/proc");
    !proc.join("self").exists() || proc.join(pid.to_string()).exists()
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
    fn leftovers_of_dead_runs_go_and_those_of_live_ones_stay() {
        let dir = scratch("leftovers");
        let dest = dir.join("out.din");
        // PIDs above the kernel's limit (2^22) never exist; 1 (init) always does.
        let dead = dir.join("out.din.tmp-4194305");
        let dead_scratch = dir.join("out.din.tmp-4194305.pcs");
        let dead_dir = dir.join(".out.din.partial-4194306");
        let live = dir.join("out.din.tmp-1");
        let other = dir.join("other.tmp-4194305");
        for f in [&dead, &dead_scratch, &live, &other] {
            std::fs::write(f, b"x").unwrap();
        }
        std::fs::create_dir_all(dead_dir.join("table")).unwrap();
        let f = AtomicFile::create(&dest).unwrap();
        assert!(!dead.exists() && !dead_scratch.exists() && !dead_dir.exists());
        assert!(live.exists() && other.exists() && f.temp_path().exists());
        drop(f);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_directory_is_an_error_at_create() {
        let dir = scratch("missing");
        assert!(AtomicFile::create(&dir.join("no/such/dir/out")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
