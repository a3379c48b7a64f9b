//! build_context's file check: a memory stored with `source {path, hash}` is stale when
//! the file under `project_root` changed or vanished. Hashes are SHA-256 in hex,
//! optionally written `sha256:<hex>`.

use std::path::{Component, Path};

use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::SourceRef;
use sha2::{Digest, Sha256};

/// SHA-256 of bytes, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The directories a request's `project_root` may name (`server.project_roots`).
///
/// build_context hashes files under `project_root`, and whether a memory comes back
/// tells whether a file there still has a given hash: the operator says which trees
/// requests may probe. Empty (the default) admits none: the server reads no files.
#[derive(Debug, Clone, Default)]
pub struct ProjectRoots {
    /// The allowed trees, as configured (resolved on each check, so a tree mounted
    /// after start counts).
    allowed: std::sync::Arc<Vec<std::path::PathBuf>>,
}

impl ProjectRoots {
    /// Admit `project_root` inside one of `allowed` (empty: nowhere).
    pub fn new(allowed: Vec<std::path::PathBuf>) -> Self {
        Self {
            allowed: std::sync::Arc::new(allowed),
        }
    }

    /// The canonical form of `project_root` when it is a readable directory inside an
    /// allowed tree; else `invalid_argument` (not a directory) or `permission_denied`
    /// (outside every allowed tree, also through a symbolic link). Blocking file IO.
    pub fn admit(&self, project_root: &Path) -> MemoryResult<std::path::PathBuf> {
        let resolved = project_root
            .canonicalize()
            .ok()
            .filter(|path| path.is_dir());
        if self.allowed.is_empty() {
            return Err(MemoryError {
                field: Some("project_root".into()),
                ..MemoryError::new(
                    mnemos_actors::error::ErrorCode::PermissionDenied,
                    "this server reads no files: build_context checks sources only under \
                     the directories listed in server.project_roots, which is empty; leave \
                     project_root out, or ask the operator to list the project's tree",
                )
            });
        }
        let trees: Vec<std::path::PathBuf> = self
            .allowed
            .iter()
            .map(|tree| tree.canonicalize().unwrap_or_else(|_| tree.clone()))
            .collect();
        match resolved {
            Some(canonical) if trees.iter().any(|tree| canonical.starts_with(tree)) => {
                Ok(canonical)
            }
            // A path that does not resolve is "not a directory" only when it is written
            // inside an allowed tree: elsewhere the answer would tell whether it exists.
            None if trees
                .iter()
                .chain(self.allowed.iter())
                .any(|tree| project_root.starts_with(tree))
                && !project_root
                    .components()
                    .any(|c| matches!(c, Component::ParentDir)) =>
            {
                Err(not_a_directory(project_root))
            }
            _ => Err(MemoryError {
                field: Some("project_root".into()),
                ..MemoryError::new(
                    mnemos_actors::error::ErrorCode::PermissionDenied,
                    format!(
                        "{} is outside the directories this server lets requests read \
                         (server.project_roots); use a project under one of them or ask \
                         the operator to add it",
                        project_root.display()
                    ),
                )
            }),
        }
    }
}

/// `invalid_argument` on `project_root`: not a directory the server can read.
fn not_a_directory(project_root: &Path) -> MemoryError {
    MemoryError::invalid(
        "project_root",
        format!(
            "{} is not a directory this server can read",
            project_root.display()
        ),
    )
}

/// Largest source file build_context hashes; a bigger one counts as stale (it cannot be
/// vouched for without reading it all on a request's time).
pub const MAX_SOURCE_BYTES: u64 = 64 * 1024 * 1024;

/// Most bytes one build_context request hashes, over all its files: a request naming
/// many large files counts what is past the budget as stale instead of reading it.
pub const MAX_REQUEST_BYTES: u64 = 64 * 1024 * 1024;

/// The file checks of one request: each file is hashed once (however many memories
/// name it), and at most [`MAX_REQUEST_BYTES`] are read in all.
pub struct FileCheck {
    /// The admitted, canonical project root.
    root: std::path::PathBuf,
    /// SHA-256 of each file read so far (None: it could not be vouched for).
    hashed: std::collections::HashMap<String, Option<String>>,
    /// Bytes this request may still hash.
    budget: u64,
}

impl FileCheck {
    /// Checks under `root` with the whole request budget.
    pub fn new(root: std::path::PathBuf) -> Self {
        Self::with_budget(root, MAX_REQUEST_BYTES)
    }

    /// Checks under `root` that hash at most `budget` bytes.
    pub fn with_budget(root: std::path::PathBuf, budget: u64) -> Self {
        Self {
            root,
            hashed: Default::default(),
            budget,
        }
    }

    /// True when `source` is stale ([`file_hash`]); blocking file IO.
    pub fn is_stale(&mut self, source: &SourceRef) -> bool {
        let expected = source.hash.trim().to_lowercase();
        let expected = expected
            .strip_prefix("sha256:")
            .unwrap_or(&expected)
            .to_string();
        if !self.hashed.contains_key(&source.path) {
            let hash = file_hash(&self.root, &source.path, &mut self.budget);
            self.hashed.insert(source.path.clone(), hash);
        }
        self.hashed[&source.path].as_deref() != Some(expected.as_str())
    }
}

/// SHA-256 of `relative` under `project_root`, or None when the file is missing,
/// unreadable, not a regular file, larger than `MAX_SOURCE_BYTES` or than what is left
/// of `budget`, or outside the root (also through a symbolic link). What it reads is
/// taken from `budget`.
fn file_hash(project_root: &Path, relative: &str, budget: &mut u64) -> Option<String> {
    let relative = Path::new(relative);
    if relative.is_absolute()
        || relative
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)))
    {
        return None;
    }
    let root = project_root.canonicalize().ok()?;
    let path = project_root.join(relative).canonicalize().ok()?;
    if !path.starts_with(&root) {
        return None;
    }
    let file = std::fs::File::open(&path).ok()?;
    let size = file.metadata().ok().filter(|m| m.is_file())?.len();
    if size > MAX_SOURCE_BYTES || size > *budget {
        return None;
    }
    let mut hasher = Sha256::new();
    let mut limited = std::io::Read::take(file, size.min(*budget) + 1);
    let read = std::io::copy(&mut limited, &mut hasher).ok()?;
    *budget = budget.saturating_sub(read);
    if read > size {
        return None;
    }
    Some(
        hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

/// True when the source file is missing, unreadable, not a regular file, larger than
/// `MAX_SOURCE_BYTES`, outside the root (also through a symbolic link), or has another
/// hash. Blocking file IO: call it off the async workers.
pub fn is_stale(project_root: &Path, source: &SourceRef) -> bool {
    FileCheck::new(project_root.to_path_buf()).is_stale(source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_hashes_each_file_once_and_no_more_than_its_budget() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("a.md"), "0123456789").unwrap();
        std::fs::write(root.path().join("b.md"), "abcdefghij").unwrap();
        let source = |path: &str, hash: String| SourceRef {
            path: path.into(),
            hash,
        };
        let a = source("a.md", sha256_hex(b"0123456789"));
        let b = source("b.md", sha256_hex(b"abcdefghij"));
        let mut check = FileCheck::with_budget(root.path().to_path_buf(), 15);
        for _ in 0..40 {
            assert!(!check.is_stale(&a), "a is read once and remembered");
        }
        assert!(
            check.is_stale(&b),
            "b does not fit what is left of the budget"
        );
        let mut roomy = FileCheck::with_budget(root.path().to_path_buf(), 20);
        assert!(!roomy.is_stale(&a) && !roomy.is_stale(&b));
    }

    #[test]
    fn detects_changed_vanished_and_escaping_sources() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("a.rs"), b"fn main() {}").unwrap();
        let hash = sha256_hex(b"fn main() {}");
        let source = |path: &str, hash: &str| SourceRef {
            path: path.into(),
            hash: hash.into(),
        };
        assert!(!is_stale(root.path(), &source("a.rs", &hash)));
        assert!(!is_stale(
            root.path(),
            &source("a.rs", &format!("sha256:{}", hash.to_uppercase()))
        ));
        std::fs::write(root.path().join("a.rs"), b"fn main() { changed() }").unwrap();
        assert!(is_stale(root.path(), &source("a.rs", &hash)));
        assert!(is_stale(root.path(), &source("gone.rs", &hash)));
        assert!(is_stale(root.path(), &source("../etc/passwd", &hash)));
        assert!(is_stale(root.path(), &source("/etc/passwd", &hash)));
        // An upper-case prefix is the same prefix.
        std::fs::write(root.path().join("b.rs"), b"fn main() {}").unwrap();
        assert!(!is_stale(
            root.path(),
            &source("b.rs", &format!("SHA256:{hash}"))
        ));
        // Not a regular file: a directory, a device.
        std::fs::create_dir(root.path().join("dir")).unwrap();
        assert!(is_stale(root.path(), &source("dir", &hash)));
        #[cfg(unix)]
        {
            // A link out of the project is outside it, whatever it points at.
            let outside = tempfile::tempdir().unwrap();
            std::fs::write(outside.path().join("secret"), b"fn main() {}").unwrap();
            std::os::unix::fs::symlink(outside.path(), root.path().join("link")).unwrap();
            assert!(is_stale(root.path(), &source("link/secret", &hash)));
            // A link that stays inside is followed.
            std::os::unix::fs::symlink(root.path().join("b.rs"), root.path().join("alias.rs"))
                .unwrap();
            assert!(!is_stale(root.path(), &source("alias.rs", &hash)));
            std::os::unix::fs::symlink("/dev/zero", root.path().join("zero")).unwrap();
            assert!(is_stale(root.path(), &source("zero", &hash)));
        }
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
