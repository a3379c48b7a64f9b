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
/// tells whether a file there still has a given hash: a server reachable by others
/// should say which trees they may probe. Empty admits any directory the server can read.
#[derive(Debug, Clone, Default)]
pub struct ProjectRoots {
    /// The allowed trees, as configured (resolved on each check, so a tree mounted
    /// after start counts).
    allowed: std::sync::Arc<Vec<std::path::PathBuf>>,
}

impl ProjectRoots {
    /// Admit `project_root` inside one of `allowed` (empty: anywhere).
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
            return resolved.ok_or_else(|| not_a_directory(project_root));
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

/// True when the source file is missing, unreadable, not a regular file, larger than
/// `MAX_SOURCE_BYTES`, outside the root (also through a symbolic link), or has another
/// hash. Blocking file IO: call it off the async workers.
pub fn is_stale(project_root: &Path, source: &SourceRef) -> bool {
    let relative = Path::new(&source.path);
    // Never follow a path out of the project.
    if relative.is_absolute()
        || relative
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)))
    {
        return true;
    }
    let expected = source.hash.trim().to_lowercase();
    let expected = expected.strip_prefix("sha256:").unwrap_or(&expected);
    let (Ok(root), Ok(path)) = (
        project_root.canonicalize(),
        project_root.join(relative).canonicalize(),
    ) else {
        return true;
    };
    // A symbolic link inside the project may point anywhere.
    if !path.starts_with(&root) {
        return true;
    }
    let Ok(file) = std::fs::File::open(&path) else {
        return true;
    };
    // Only regular files: never a device, a pipe or a directory.
    match file.metadata() {
        Ok(meta) if meta.is_file() && meta.len() <= MAX_SOURCE_BYTES => {}
        _ => return true,
    }
    let mut hasher = Sha256::new();
    let mut limited = std::io::Read::take(file, MAX_SOURCE_BYTES + 1);
    match std::io::copy(&mut limited, &mut hasher) {
        Ok(read) if read <= MAX_SOURCE_BYTES => {}
        _ => return true,
    }
    let actual: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    actual != expected
}

#[cfg(test)]
mod tests {
    use super::*;

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
