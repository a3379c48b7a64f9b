//! Embeds the web console: every file under `src/console/assets` becomes an entry of
//! `ASSETS` in `$OUT_DIR/console_assets.rs` (path relative to that directory, bytes),
//! so the binary serves the console with nothing beside it, and any change to an asset
//! rebuilds it.

use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/console/assets");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    collect(&root, &mut files);
    files.sort();
    let mut out = String::from("/// The console's files: (path under `/ui/`, contents).\npub static ASSETS: &[(&str, &[u8])] = &[\n");
    for file in &files {
        let relative = file
            .strip_prefix(&root)
            .expect("under the assets root")
            .to_string_lossy()
            .replace('\\', "/");
        println!("cargo:rerun-if-changed={}", file.display());
        out.push_str(&format!(
            "    ({relative:?}, include_bytes!({:?})),\n",
            file.display().to_string()
        ));
    }
    out.push_str("];\n");
    let target = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("console_assets.rs");
    fs::write(target, out).expect("OUT_DIR is writable");
}

/// Every regular file under `dir`, skipping hidden ones (editor and OS leftovers).
fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            collect(&path, files);
        } else if path.is_file() {
            files.push(path);
        }
    }
}
