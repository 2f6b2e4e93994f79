//! Embeds the web client (the repository's `web/` folder, without its tests) into the
//! gateway, so the one binary serves it with no files beside it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let web = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web");
    let mut files = Vec::new();
    if web.is_dir() {
        collect(&web, &web, &mut files);
    }
    files.sort();
    // Each served file, not the folder: a folder is watched with everything below it, and
    // the browser tests write into web/tests on every run. A new file is picked up when
    // a served file that refers to it changes (index.html or a module importing it).
    for (_, path) in &files {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    let mut out = String::from(
        "/// The web client's files: (URL path, bytes).\npub static ASSETS: &[(&str, &[u8])] = &[\n",
    );
    for (url, path) in &files {
        writeln!(
            out,
            "    ({url:?}, include_bytes!({:?})),",
            path.display().to_string()
        )
        .unwrap();
    }
    out.push_str("];\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("assets.rs");
    std::fs::write(dest, out).unwrap();
}

/// Every served file below `dir`, skipping the browser tests and anything hidden.
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "tests" || name == "node_modules" {
            continue;
        }
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            collect(root, &path, files);
        } else if kind.is_file() {
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            files.push((format!("/{rel}"), path.canonicalize().unwrap()));
        }
    }
}
