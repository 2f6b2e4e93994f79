//! What the crash harnesses share (issue 15: `tests/crash_safety.rs` and
//! `tests/crash_faces.rs`): the seeded random points, the number of kills, the versions
//! a writer sends and their check, the temporaries and their aging, and the report each
//! part prints.
//!
//! `FERRY_CRASH_KILLS` sets the kills of each part (default [`DEFAULT_KILLS`]);
//! `FERRY_CRASH_SEED` repeats a run (the seed is printed first by each part).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::Value;

/// Kills of each part unless `FERRY_CRASH_KILLS` says otherwise: enough to hit the
/// windows that matter at random, few enough for CI.
pub const DEFAULT_KILLS: usize = 60;

/// A small random generator (xorshift), so a failing run can be repeated from its seed.
pub struct Random(u64);

impl Random {
    /// Seeded from `FERRY_CRASH_SEED`, else from the clock; prints the seed for `part`.
    pub fn seeded(part: &str) -> Random {
        let seed = std::env::var("FERRY_CRASH_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        println!("crash harness seed of {part}: {seed}");
        Random(seed.max(1))
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }

    /// A random point in `0..=span`, to the millisecond.
    pub fn delay(&mut self, span: Duration) -> Duration {
        Duration::from_millis(self.below(span.as_millis() as u64 + 1))
    }
}

/// The kills of each part.
pub fn kills() -> usize {
    std::env::var("FERRY_CRASH_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_KILLS)
}

/// The bytes of a 256 KiB [`version`].
pub const VERSION_BYTES: usize = 256 * 1024;

/// Version `k` of a file, 256 KiB: see [`version_sized`].
pub fn version(k: u64) -> Vec<u8> {
    version_sized(k, VERSION_BYTES)
}

/// Version `k` of a file of exactly `len` bytes (at least 64): a first line naming it and
/// its size, then lines that name it too, so a file that is any mix of two versions, or
/// cut short, is told from every version.
pub fn version_sized(k: u64, len: usize) -> Vec<u8> {
    let mut out = format!("version {k} of {len} bytes\n").into_bytes();
    let line = format!("{k:015}\n");
    while out.len() < len {
        out.extend_from_slice(line.as_bytes());
    }
    out.truncate(len);
    out
}

/// Which version `bytes` is exactly, if it is one.
pub fn version_of(bytes: &[u8]) -> Option<u64> {
    let first = bytes.split(|b| *b == b'\n').next()?;
    let rest = std::str::from_utf8(first).ok()?.strip_prefix("version ")?;
    let (k, len) = rest.strip_suffix(" bytes")?.split_once(" of ")?;
    let (k, len) = (k.parse().ok()?, len.parse().ok()?);
    (len == bytes.len() && version_sized(k, len) == bytes).then_some(k)
}

/// Whether `bytes` is exactly one version.
pub fn is_a_version(bytes: &[u8]) -> bool {
    version_of(bytes).is_some()
}

/// The versions a part sent, by their sha256: tells which version a record names.
#[derive(Default)]
pub struct Versions(HashMap<String, u64>);

impl Versions {
    /// Version `k` of `len` bytes, remembered by its sha256.
    pub fn make(&mut self, k: u64, len: usize) -> Vec<u8> {
        let bytes = version_sized(k, len);
        self.0.insert(super::sha256_hex(&bytes), k);
        bytes
    }

    /// The version whose sha256 is `sha256`, if one was made.
    pub fn by_sha256(&self, sha256: &str) -> Option<u64> {
        self.0.get(sha256).copied()
    }
}

/// The temporaries (`.ferry-tmp-…`) beneath `dir`, at any depth.
pub fn temporaries(dir: &Path) -> Vec<PathBuf> {
    named_beneath(dir, &|name| name.starts_with(ferry_fs::TEMP_PREFIX))
}

/// Every entry beneath `dir` (files and folders, no link followed) whose name `pick`
/// takes; a folder taken is not walked into.
pub fn named_beneath(dir: &Path, pick: &dyn Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if pick(&entry.file_name().to_string_lossy()) {
            found.push(path);
        } else if kind.is_dir() {
            found.extend(named_beneath(&path, pick));
        }
    }
    found
}

/// Every name a listing (`GET /v1/files`) shows, at any depth.
pub fn listed_names(listing: &Value, out: &mut Vec<String>) {
    for entry in listing["entries"].as_array().into_iter().flatten() {
        out.push(entry["path"].as_str().unwrap_or_default().to_owned());
        listed_names(entry, out);
    }
}

/// Whether a listing shows a temporary.
pub fn lists_a_temporary(listing: &Value) -> Option<Vec<String>> {
    let mut names = Vec::new();
    listed_names(listing, &mut names);
    names
        .iter()
        .any(|n| n.contains(ferry_fs::TEMP_PREFIX))
        .then_some(names)
}

/// Makes each of `paths` look untouched for longer than `by`.
pub fn age(paths: &[PathBuf], by: Duration) {
    let past = SystemTime::now() - by - Duration::from_secs(60);
    for path in paths {
        let file = match std::fs::OpenOptions::new().write(true).open(path) {
            Ok(file) => file,
            // A folder is opened to read: its times are set the same way.
            Err(_) => match std::fs::File::open(path) {
                Ok(file) => file,
                Err(_) => continue,
            },
        };
        let _ = file.set_modified(past);
    }
}

/// Sets every temporary beneath `dir` to look older than the gateway's sweep threshold.
pub fn age_temporaries(dir: &Path) {
    age(&temporaries(dir), ferry_site::TEMPORARY_STALE);
}

/// The temporaries left beneath `dir` after the leftovers are aged past the sweep's
/// threshold and the gateway starts again.
pub fn swept_at_next_start(server: &mut super::Server, dir: &Path) -> Vec<PathBuf> {
    age_temporaries(dir);
    server.restart();
    swept(dir)
}

/// Waits (bounded) until no temporary is left beneath `dir`; the ones left.
pub fn swept(dir: &Path) -> Vec<PathBuf> {
    left_after(&|| temporaries(dir))
}

/// Waits (bounded, 10 s) until `left` finds nothing; what it found last.
pub fn left_after(left: &dyn Fn() -> Vec<PathBuf>) -> Vec<PathBuf> {
    for _ in 0..200 {
        let found = left();
        if found.is_empty() {
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    left()
}

/// What one part did, printed and then held to its invariants by [`Report::finish`].
pub struct Report {
    part: &'static str,
    what: &'static str,
    /// The kills made.
    pub kills: usize,
    /// The operations that completed (answered as done) between the kills.
    pub completed: usize,
    temporaries: Option<(usize, Vec<PathBuf>)>,
    facts: Vec<String>,
    violations: Vec<String>,
}

impl Report {
    /// A part named `part`, whose operations are `what` (`"uploads placed"`).
    pub fn new(part: &'static str, what: &'static str) -> Report {
        Report {
            part,
            what,
            kills: 0,
            completed: 0,
            temporaries: None,
            facts: Vec::new(),
            violations: Vec::new(),
        }
    }

    /// A broken invariant after kill `kill`.
    pub fn violation(&mut self, kill: usize, what: impl std::fmt::Display) {
        self.violations.push(format!("kill {kill}: {what}"));
    }

    /// Whether any invariant broke so far.
    pub fn violations(&self) -> usize {
        self.violations.len()
    }

    /// The temporaries the kills left (`left`) and those still there after the sweep
    /// (`remaining`, which must be none).
    pub fn temporaries(&mut self, left: usize, remaining: Vec<PathBuf>) {
        self.temporaries = Some((left, remaining));
    }

    /// One more figure for the printed line.
    pub fn fact(&mut self, fact: impl Into<String>) {
        self.facts.push(fact.into());
    }

    /// Prints the line and fails on any violation, on temporaries left after the sweep,
    /// and on a part in which nothing ever completed (it tested nothing).
    pub fn finish(self) {
        let mut line = format!(
            "{}: {} kills, {} {} between them",
            self.part, self.kills, self.completed, self.what
        );
        if let Some((left, remaining)) = &self.temporaries {
            line.push_str(&format!(
                ", {left} temporaries left behind by them all, {} after the sweep",
                remaining.len()
            ));
        }
        for fact in &self.facts {
            line.push_str(&format!(", {fact}"));
        }
        line.push_str(&format!(", {} violations", self.violations.len()));
        println!("{line}");
        assert!(self.violations.is_empty(), "{:#?}", self.violations);
        if let Some((_, remaining)) = &self.temporaries {
            assert!(remaining.is_empty(), "{remaining:?}");
        }
        assert!(
            self.kills > 0,
            "no kill was made: the harness tested nothing"
        );
        assert!(
            self.completed > 0,
            "nothing ever completed: the harness tested nothing"
        );
    }
}

/// Sends SIGKILL to `pid` after `delay`, from a thread of its own (joined by the caller).
pub fn kill_after(pid: u32, delay: Duration) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        std::thread::sleep(delay);
        // SAFETY: kill(2) has no memory effects; the pid is a child of this test.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    })
}
