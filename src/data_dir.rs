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
        std::fs::create_dir_all(data_dir)
            .map_err(|e| anyhow::anyhow!("data_dir: cannot create {}: {e}", data_dir.display()))?;
        let path = data_dir.join("mnemos.lock");
        let file = OpenOptions::new()
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
