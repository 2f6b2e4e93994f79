//! Host-mode test helpers: the helper binary, the system's user and group databases read
//! through `getent`, commands run as another user, and a guard that removes every user
//! and group a test created, even when it fails.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::support::ferry_bin;

/// Fails loudly (never skips) when the test cannot do what it checks.
pub fn require_root_and_tools() {
    let uid = run_ok("id", &["-u"]);
    assert_eq!(
        uid.trim(),
        "0",
        "the host-mode tests create users and groups and must run as root (CI does); run \
         `cargo test -p ferry-cli --test host` as root"
    );
    for tool in [
        "useradd", "groupadd", "usermod", "userdel", "groupdel", "getent", "runuser",
    ] {
        tool_path(tool);
    }
}

/// Where a system tool is, looked for in the usual folders (the test's PATH may lack sbin).
pub fn tool_path(tool: &str) -> PathBuf {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(tool))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "`{tool}` is missing: host mode needs the shadow tools (Debian: passwd, \
                 util-linux); install them, the test does not skip"
            )
        })
}

/// Builds `ferry-posix-helper` into the folder that holds the `ferry` binary under test,
/// which is where `ferry site init` looks for it by default, and returns its path.
pub fn build_helper() -> PathBuf {
    let ferry = ferry_bin();
    let profile_dir = ferry.parent().expect("the ferry binary has a folder");
    let target_dir = profile_dir
        .parent()
        .expect("the profile folder has a parent");
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev".to_owned(),
        Some(other) => other.to_owned(),
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "-p",
            "ferry-posix-helper",
            "--bin",
            "ferry-posix-helper",
        ])
        .arg("--profile")
        .arg(&profile)
        .arg("--target-dir")
        .arg(target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .output()
        .expect("running cargo to build ferry-posix-helper");
    assert!(
        output.status.success(),
        "building ferry-posix-helper failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let helper = profile_dir.join("ferry-posix-helper");
    assert!(helper.is_file(), "{} was not built", helper.display());
    helper
}

/// Runs a program by name and returns its stdout; panics with its stderr on failure.
pub fn run_ok(program: &str, args: &[&str]) -> String {
    let output = Command::new(tool_path(program))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e}"));
    assert!(
        output.status.success(),
        "{program} {args:?} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `getent passwd <name>`, split: (uid, gid, home, shell); `None` when there is no such user.
pub fn passwd(name: &str) -> Option<(u32, u32, String, String)> {
    let output = Command::new(tool_path("getent"))
        .args(["passwd", name])
        .output()
        .expect("running getent");
    if !output.status.success() {
        return None;
    }
    let line = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let fields: Vec<&str> = line.split(':').collect();
    assert_eq!(fields.len(), 7, "getent passwd {name}: {line:?}");
    Some((
        fields[2].parse().unwrap(),
        fields[3].parse().unwrap(),
        fields[5].to_owned(),
        fields[6].to_owned(),
    ))
}

/// `getent group <name>`, split: (gid, members); `None` when there is no such group.
pub fn group(name: &str) -> Option<(u32, Vec<String>)> {
    let output = Command::new(tool_path("getent"))
        .args(["group", name])
        .output()
        .expect("running getent");
    if !output.status.success() {
        return None;
    }
    let line = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let fields: Vec<&str> = line.split(':').collect();
    assert_eq!(fields.len(), 4, "getent group {name}: {line:?}");
    let members = fields[3]
        .split(',')
        .filter(|m| !m.is_empty())
        .map(str::to_owned)
        .collect();
    Some((fields[2].parse().unwrap(), members))
}

pub fn uid_of(user: &str) -> u32 {
    passwd(user)
        .unwrap_or_else(|| panic!("there is no user {user}"))
        .0
}

pub fn gid_of(name: &str) -> u32 {
    group(name)
        .unwrap_or_else(|| panic!("there is no group {name}"))
        .0
}

/// The names of every group `user` is in (`id -Gn`).
pub fn groups_of(user: &str) -> Vec<String> {
    run_ok("id", &["-Gn", user])
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// uid, gid and permission bits (with setuid, setgid and sticky) of `path` itself.
pub fn owner_mode(path: &Path) -> (u32, u32, u32) {
    let meta = std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{} is missing: {e}", path.display()));
    (meta.uid(), meta.gid(), meta.mode() & 0o7777)
}

/// Runs `program args…` as `user` through `runuser`, with a clean environment and the
/// worst umask a caller can have, 000.
pub fn run_as(user: &str, program: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(tool_path("runuser"));
    command
        .args(["-u", user, "--"])
        .arg(program)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null());
    // SAFETY: umask is one system call, fine between fork and exec.
    unsafe {
        command.pre_exec(|| {
            rustix::process::umask(rustix::fs::Mode::empty());
            Ok(())
        });
    }
    command.output().expect("running runuser")
}

/// Removes the users and groups a test made when dropped, in that order. Users and
/// groups that existed before the guard was made are never touched.
pub struct AccountsGuard {
    users: Vec<String>,
    groups: Vec<String>,
}

impl AccountsGuard {
    /// Owns `users` and `groups` (removed at the end whether the test made them or not:
    /// pick names no one else uses) and `if_new`, names of users and groups removed only
    /// if they do not exist yet. Leftovers of an earlier crashed run are removed first.
    pub fn new(users: &[&str], groups: &[&str], if_new: &[&str]) -> AccountsGuard {
        let mut guard = AccountsGuard {
            users: users.iter().map(|s| (*s).to_owned()).collect(),
            groups: groups.iter().map(|s| (*s).to_owned()).collect(),
        };
        guard.remove_all();
        for name in if_new {
            if passwd(name).is_none() {
                guard.users.push((*name).to_owned());
            }
            if group(name).is_none() {
                guard.groups.push((*name).to_owned());
            }
        }
        guard
    }

    /// Removes every owned user and group; returns what could not be removed.
    pub fn remove_all(&mut self) -> Vec<String> {
        let mut left = Vec::new();
        for user in &self.users {
            if passwd(user).is_some() {
                let _ = Command::new(tool_path("userdel")).arg(user).output();
                if passwd(user).is_some() {
                    left.push(format!("user {user}"));
                }
            }
        }
        for name in &self.groups {
            if group(name).is_some() {
                let _ = Command::new(tool_path("groupdel")).arg(name).output();
                if group(name).is_some() {
                    left.push(format!("group {name}"));
                }
            }
        }
        left
    }
}

impl Drop for AccountsGuard {
    fn drop(&mut self) {
        let left = self.remove_all();
        if !left.is_empty() {
            eprintln!("host test cleanup could not remove: {}", left.join(", "));
        }
    }
}
