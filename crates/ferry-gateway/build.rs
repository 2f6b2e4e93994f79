//! Embeds the web client (the repository's `web/` folder, without its tests) into the
//! gateway, so the one binary serves it with no files beside it.
//!
//! The page's third-party code (xterm.js and its fit addon for the node terminals,
//! marked and DOMPurify for the chat's Markdown) is pinned in
//! `web/vendor/package.json` and its lockfile; it is never kept in the repository. The
//! build installs it with `npm ci` into its own output folder, the lockfile's integrity
//! hashes checked, and embeds only the few files the page loads, under `/vendor/`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The vendored files the page loads: (URL path, path inside the installed packages).
const VENDOR_FILES: &[(&str, &str)] = &[
    (
        "/vendor/xterm.mjs",
        "node_modules/@xterm/xterm/lib/xterm.mjs",
    ),
    (
        "/vendor/xterm.css",
        "node_modules/@xterm/xterm/css/xterm.css",
    ),
    (
        "/vendor/addon-fit.mjs",
        "node_modules/@xterm/addon-fit/lib/addon-fit.mjs",
    ),
    (
        "/vendor/marked.mjs",
        "node_modules/marked/lib/marked.esm.js",
    ),
    (
        "/vendor/purify.mjs",
        "node_modules/dompurify/dist/purify.es.mjs",
    ),
];

/// The files that pin the vendored packages, copied beside the install.
const VENDOR_PINS: &[&str] = &["package.json", "package-lock.json"];

/// Written into the install folder after a successful `npm ci`: the pins it installed.
const INSTALLED_STAMP: &str = "installed-from.json";

/// The command that installs npm on Debian, as `.ci/run` does.
const APT_INSTALL: &[&str] = &["install", "-y", "--no-install-recommends", "nodejs", "npm"];

fn main() {
    let web = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let mut files = Vec::new();
    if web.is_dir() {
        collect(&web, &web, &mut files);
        files.extend(vendor_files(&web.join("vendor"), &out_dir.join("vendor")));
    }
    files.sort();
    // Each served file, not the folder: a folder is watched with everything below it, and
    // the browser tests write into web/tests on every run. A new file is picked up when
    // a served file that refers to it changes (index.html or a module importing it).
    for (_, path) in &files {
        if !path.starts_with(&out_dir) {
            println!("cargo:rerun-if-changed={}", path.display());
        }
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
    std::fs::write(out_dir.join("assets.rs"), out).unwrap();
}

/// Every served file below `dir`, skipping the browser tests, installed packages, the
/// vendor pins (their packages are embedded by [`vendor_files`]) and anything hidden.
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.')
            || name == "tests"
            || name == "node_modules"
            || (dir == root && name == "vendor")
        {
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

/// Installs the pinned packages of `pins` (web/vendor) into `install` and answers the
/// files the page loads. `npm ci` runs only when the pins differ from the last install:
/// this script also runs whenever any page file changes.
fn vendor_files(pins: &Path, install: &Path) -> Vec<(String, PathBuf)> {
    let mut wanted = Vec::new();
    for name in VENDOR_PINS {
        let path = pins.join(name);
        println!("cargo:rerun-if-changed={}", path.display());
        let bytes = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{} is missing ({e}): it pins the web terminal's packages",
                path.display()
            )
        });
        wanted.push((*name, bytes));
    }
    let stamp = pins_stamp(&wanted);
    let embedded: Vec<(String, PathBuf)> = VENDOR_FILES
        .iter()
        .map(|(url, rel)| (url.to_string(), install.join(rel)))
        .collect();
    let installed = std::fs::read(install.join(INSTALLED_STAMP)).ok();
    if installed.as_deref() == Some(stamp.as_bytes()) && embedded.iter().all(|(_, p)| p.is_file()) {
        return embedded;
    }
    std::fs::create_dir_all(install).unwrap();
    let _ = std::fs::remove_file(install.join(INSTALLED_STAMP));
    for (name, bytes) in &wanted {
        std::fs::write(install.join(name), bytes).unwrap();
    }
    ensure_npm();
    // Scripts never run (the packages need none); the cache is used when it has the
    // pinned versions, and every tarball is checked against the lockfile's hash.
    let output = Command::new("npm")
        .args([
            "ci",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--prefer-offline",
        ])
        .current_dir(install)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running npm ci failed: {e}"));
    if !output.status.success() {
        panic!(
            "`npm ci` of the web terminal's packages (web/vendor/package-lock.json) failed \
             ({}); it needs the npm registry or npm's cache:\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    for (url, path) in &embedded {
        assert!(
            path.is_file(),
            "npm ci installed no {} (for {url}): web/vendor/package.json must pin the \
             packages the page loads",
            path.display()
        );
    }
    std::fs::write(install.join(INSTALLED_STAMP), stamp).unwrap();
    embedded
}

/// The pins' contents as one text, compared with the last install's.
fn pins_stamp(pins: &[(&str, Vec<u8>)]) -> String {
    let mut stamp = String::new();
    for (name, bytes) in pins {
        writeln!(stamp, "{name} {}", bytes.len()).unwrap();
        stamp.push_str(&String::from_utf8_lossy(bytes));
        stamp.push('\n');
    }
    stamp
}

fn has_npm() -> bool {
    Command::new("npm")
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Makes sure `npm` runs: as root with apt-get at hand, installs Debian's `nodejs npm`
/// the way `.ci/run` does (after an `apt-get update` if the first try fails); otherwise
/// stops the build with the command to run.
fn ensure_npm() {
    if has_npm() {
        return;
    }
    let command = "apt-get install -y --no-install-recommends nodejs npm";
    if is_root() && Path::new("/usr/bin/apt-get").exists() {
        println!(
            "cargo:warning=npm is missing: installing it for the web terminal's packages ({command})"
        );
        let apt = |args: &[&str]| {
            Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !apt(APT_INSTALL) {
            let _ = apt(&["update"]);
            apt(APT_INSTALL);
        }
        if has_npm() {
            return;
        }
    }
    panic!(
        "npm is missing: building ferry's web client installs xterm.js with npm; install \
         Node.js and npm (on Debian: `{command}`) and build again"
    );
}

/// Whether this build runs as root (`/proc/self` belongs to the process's user).
#[cfg(unix)]
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

#[cfg(not(unix))]
fn is_root() -> bool {
    false
}
