//! The web client's browser tests, run by `cargo test`: `node --test` on web/tests/
//! (every `*.test.mjs`), driving Debian's Chromium against the `ferry` binary cargo built.
//! Their output streams through; the test fails when any of them fails.
//!
//! Needs `node`, `/usr/bin/chromium` and `web/tests/node_modules` (`.ci/run` installs them;
//! by hand: `apt-get install chromium` and `npm ci --prefix web/tests`).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The whole browser suite must finish within this.
const SUITE_TIMEOUT: Duration = Duration::from_secs(8 * 60);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root exists")
}

/// The test files, sorted; passed by name so the run is the same on every Node version.
fn test_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".test.mjs"))
        })
        .collect();
    files.sort();
    files
}

#[test]
fn browser_tests() {
    let root = repo_root();
    let tests_dir = root.join("web").join("tests");

    match Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => {
            eprintln!("web: node {}", String::from_utf8_lossy(&out.stdout).trim());
        }
        _ => panic!(
            "`node` is missing: the browser tests run on Node.js. Run .ci/run, or \
             `apt-get install -y --no-install-recommends nodejs npm chromium` and \
             `npm ci --prefix web/tests`."
        ),
    }
    assert!(
        tests_dir
            .join("node_modules")
            .join("playwright-core")
            .is_dir(),
        "web/tests/node_modules is missing: run `npm ci --prefix web/tests` (or .ci/run)"
    );
    assert!(
        Path::new("/usr/bin/chromium").exists(),
        "/usr/bin/chromium is missing: run .ci/run, or `apt-get install -y --no-install-recommends chromium`"
    );

    let files = test_files(&tests_dir);
    assert!(
        !files.is_empty(),
        "no *.test.mjs in {}",
        tests_dir.display()
    );

    let mut cmd = Command::new("node");
    cmd.arg("--test")
        .arg("--test-reporter=spec")
        .args(files.iter().map(|f| f.strip_prefix(&root).unwrap_or(f)))
        .current_dir(&root)
        .env("FERRY_BIN", env!("CARGO_BIN_EXE_ferry"))
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        // Its own process group, so the servers and browsers it starts go with it.
        .process_group(0);
    let mut child = cmd.spawn().expect("node starts");
    let group = rustix::process::Pid::from_child(&child);
    let kill_group = || {
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    };
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for node") {
            break status;
        }
        if started.elapsed() > SUITE_TIMEOUT {
            kill_group();
            let _ = child.wait();
            panic!(
                "the browser tests did not finish within {} s",
                SUITE_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // Anything a failed test file left running.
    kill_group();
    assert!(
        status.success(),
        "browser tests failed ({status}): see the node --test output above"
    );
}
