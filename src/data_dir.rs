//! The data-directory lock: one process at a time owns a data directory, so the
//! in-process vector index can never miss another process's writes.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

/// An exclusive lock on `data_dir/mnemos.lock`, released when dropped.
#[derive(Debug)]
pub struct DataDirLock {
    /// The locked file (the OS lock lives as long as it is open).
    _file: File,
    /// Its path, for messages.
    path: PathBuf,
}

impl DataDirLock {
    /// Create `data_dir` if needed and lock it, or explain who holds it.
    pub fn acquire(data_dir: &Path) -> anyhow::Result<Self> {
        create_private_dir(data_dir)
            .map_err(|e| anyhow::anyhow!("data_dir: cannot create {}: {e}", data_dir.display()))?;
        let path = data_dir.join("mnemos.lock");
        let file = private_options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| anyhow::anyhow!("data_dir: cannot open {}: {e}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(Self { _file: file, path }),
            Err(std::fs::TryLockError::WouldBlock) => Err(anyhow::anyhow!(
                "data_dir: {} is in use by another mnemos process (a running server?); stop it, or use another data_dir",
                data_dir.display()
            )),
            Err(std::fs::TryLockError::Error(e)) => Err(anyhow::anyhow!("data_dir: cannot lock {}: {e}", path.display())),
        }
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Open options that create a file readable and writable by its owner only (0600):
/// what users told their agents is nobody else's to read.
fn private_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

/// Create `dir` (and its parents) if missing; a directory this call creates is
/// accessible by its owner only (0700). An existing directory is left as it is.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Create `path` empty and private (0600) if it does not exist; an existing file is left
/// as it is.
pub fn create_private_file(path: &Path) -> std::io::Result<()> {
    match private_options().write(true).create_new(true).open(path) {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(error),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_data_directory_and_its_files_are_private() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("data");
        let lock = super::DataDirLock::acquire(&dir).unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(lock.path()), 0o600);
        super::create_private_file(&dir.join("mnemos.db")).unwrap();
        assert_eq!(mode(&dir.join("mnemos.db")), 0o600);
    }
}
