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

/// Check that `project_root` is a usable directory.
pub fn check_root(project_root: &Path) -> MemoryResult<()> {
    if !project_root.is_dir() {
        return Err(MemoryError::invalid(
            "project_root",
            format!(
                "{} is not a directory this server can read",
                project_root.display()
            ),
        ));
    }
    Ok(())
}

/// True when the source file is missing, unreadable, outside the root, or has another hash.
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
    let expected = source
        .hash
        .trim()
        .trim_start_matches("sha256:")
        .to_lowercase();
    match std::fs::read(project_root.join(relative)) {
        Ok(bytes) => sha256_hex(&bytes) != expected,
        Err(_) => true,
    }
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
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
