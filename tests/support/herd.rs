//! A site for herd tests: owned by `nobody` (commands are refused as root), its people
//! made with the real CLI, and `ferry herd` run as `nobody` in a person's folder.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{NOBODY, ferry_bin_at, output_retrying};

/// A local-mode site whose service user is `nobody`.
pub struct HerdSite {
    _dir: tempfile::TempDir,
    /// The data folder.
    pub data: PathBuf,
    /// The ferry binary `nobody` can run.
    pub ferry: PathBuf,
}

/// What one `ferry herd` command did.
#[derive(Debug)]
pub struct Ran {
    /// Its exit status.
    pub code: i32,
    /// The one JSON object it printed.
    pub json: Value,
    /// What it said on stderr.
    pub stderr: String,
}

impl HerdSite {
    /// A site with `people`, and `config` as its ferry.toml.
    pub fn new(people: &[&str], config: &str) -> HerdSite {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("ferry.toml"), config).unwrap();
        let ferry = ferry_bin_at(&dir.path().join("ferry"));
        // Administration commands never make a site: `site init` does.
        let mut commands = vec![vec!["site", "init", "--mode", "local"]];
        commands.extend(people.iter().map(|person| vec!["person", "add", person]));
        for args in commands {
            let out = output_retrying(Command::new(&ferry).args(&args).arg("--data").arg(&data));
            assert!(out.status.success(), "{out:?}");
        }
        let site = HerdSite {
            _dir: dir,
            data,
            ferry,
        };
        site.give_to_nobody();
        site
    }

    /// Hands everything to `nobody` again (after the test wrote files as root).
    pub fn give_to_nobody(&self) {
        let status = Command::new("chown")
            .args(["-R", &format!("{NOBODY}:{NOBODY}")])
            .arg(&self.data)
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// `home/<person>`.
    pub fn home(&self, person: &str) -> PathBuf {
        self.data.join("home").join(person)
    }

    /// `private/people/<person>/herd`.
    pub fn herd_dir(&self, person: &str) -> PathBuf {
        self.data.join("private/people").join(person).join("herd")
    }

    /// Writes `text` at `path` (folders made), owned by `nobody`.
    pub fn write(&self, path: &Path, text: impl AsRef<[u8]>) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        self.give_to_nobody();
    }

    /// The definition `name` in `person`'s home: front matter with `command` (and any
    /// `extra` lines), then `body`.
    pub fn agent(&self, person: &str, name: &str, command: &str, extra: &str, body: &str) {
        let text = format!(
            "---\nname: {name}\ndescription: a scripted worker for tests\ncommand: {command}\n{extra}---\n{body}"
        );
        self.write(
            &self
                .home(person)
                .join(".ferry-herd/agents")
                .join(format!("{name}.md")),
            text,
        );
    }

    /// `ferry herd ARGS` as `nobody`, for `person`, in their home.
    pub fn herd(&self, person: &str, args: &[&str]) -> Ran {
        self.herd_in(person, &self.home(person), args, &[])
    }

    /// `ferry herd ARGS` as `nobody`, for `person`, in `cwd`, with `env` added.
    pub fn herd_in(&self, person: &str, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Ran {
        let mut command = Command::new("setpriv");
        command
            .arg(format!("--reuid={NOBODY}"))
            .arg(format!("--regid={NOBODY}"))
            .arg("--clear-groups")
            .arg(&self.ferry)
            .arg("herd")
            .args(args)
            .arg("--data")
            .arg(&self.data)
            .arg("--person")
            .arg(person)
            .current_dir(cwd)
            .env_remove("FERRY_HERD_LABEL")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let out = command.output().expect("ferry herd starts");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let json = serde_json::from_str(stdout.trim()).unwrap_or_else(|_| {
            panic!(
                "ferry herd {args:?} printed {stdout:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        Ran {
            code: out.status.code().unwrap_or(-1),
            json,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `ferry herd ARGS`, which must succeed; its JSON.
    pub fn herd_ok(&self, person: &str, args: &[&str]) -> Value {
        let ran = self.herd(person, args);
        assert_eq!(ran.code, 0, "ferry herd {args:?}: {ran:?}");
        ran.json
    }

    /// The worker `label`'s status, once its state is `state` (or the deadline passed).
    pub fn wait_state(&self, person: &str, label: &str, state: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let status = self.herd_ok(person, &["status", "--label", label]);
            let worker = status["workers"][0].clone();
            if worker["state"] == state || Instant::now() > deadline {
                assert_eq!(worker["state"], state, "{status}");
                return worker;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for HerdSite {
    /// A test that failed midway leaves no worker behind: every supervisor of this site
    /// (its command line names the data folder) is killed, and its reaper ends the rest.
    fn drop(&mut self) {
        let _ = Command::new("pkill")
            .arg("-KILL")
            .arg("-f")
            .arg(format!("herd supervise --data {} ", self.data.display()))
            .status();
    }
}

/// Waits (polling, at most 30 s) until `done` holds; whether it did.
pub fn wait_for(done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// Every process below `pid` now (from `/proc`), not `pid` itself.
pub fn processes_below(pid: u32) -> Vec<u32> {
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let mut fields = stat[close + 1..].split_whitespace();
        let (state, parent) = (fields.next(), fields.next().and_then(|f| f.parse().ok()));
        if let (Some(state), Some(parent)) = (state, parent)
            && state != "Z"
        {
            pairs.push((p, parent));
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let of = found[i];
        found.extend(pairs.iter().filter(|(_, pp)| *pp == of).map(|(p, _)| *p));
        i += 1;
    }
    found.remove(0);
    found
}

/// Whether `pid` runs (and is not a zombie).
pub fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rfind(')')
                .and_then(|i| s[i + 1..].split_whitespace().next().map(|st| st != "Z"))
        })
        .unwrap_or(false)
}

/// The labels of the workers a `status` answer lists, in its order.
pub fn labels(status: &Value) -> Vec<String> {
    status["workers"]
        .as_array()
        .unwrap_or_else(|| panic!("no workers in {status}"))
        .iter()
        .map(|w| w["label"].as_str().unwrap_or_default().to_owned())
        .collect()
}
