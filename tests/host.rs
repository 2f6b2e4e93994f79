//! Host mode end to end (spec tools T-ID, core C-SITE): `ferry site init --mode host`
//! makes a POSIX user per person and a group per circle, sets the layout's owners and
//! modes, and installs `ferry-posix-helper`, which runs programs as a person.
//!
//! Users and groups are global to the machine, so this file holds one test that runs its
//! steps in order, with ids no one else uses (persons `hta`, `htb`, `htd`, circle `htc`),
//! and a guard that removes every user and group it made, even when a step fails. It must
//! run as root (CI does); it fails, never skips, when it is not or a tool is missing.

#[path = "support/host_api.rs"]
mod host_api;
#[path = "support/host.rs"]
mod host_support;
mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use host_support::{
    AccountsGuard, build_helper, gid_of, group, groups_of, owner_mode, passwd,
    require_root_and_tools, run_as, uid_of,
};
use serde_json::json;
use support::{ferry_command, mcp};

const A: &str = "hta";
const B: &str = "htb";
const D: &str = "htd";
const CIRCLE: &str = "htc";
const USER_A: &str = "fy_person_hta";
const USER_B: &str = "fy_person_htb";
const USER_D: &str = "fy_person_htd";
const CIRCLE_GROUP: &str = "fy_circle_htc";

/// The site under test: its data dir and where its helper is installed.
struct Site {
    data: PathBuf,
    helper: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Site {
    fn ferry(&self, args: &[&str]) -> Output {
        ferry_command()
            .args(args)
            .arg("--data")
            .arg(&self.data)
            .output()
            .expect("running ferry")
    }

    fn ferry_ok(&self, args: &[&str]) -> String {
        let output = self.ferry(args);
        assert!(
            output.status.success(),
            "ferry {args:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// A new token of `kind` for `person`: the last line `ferry token create` prints.
    fn token(&self, person: &str, kind: &str) -> String {
        self.ferry_ok(&["token", "create", person, "--kind", kind])
            .trim()
            .lines()
            .last()
            .unwrap()
            .to_owned()
    }

    fn init(&self) -> String {
        let helper = self.helper.to_str().unwrap();
        self.ferry_ok(&["site", "init", "--mode", "host", "--helper-path", helper])
    }

    fn path(&self, rel: &str) -> PathBuf {
        if rel == "." {
            self.data.clone()
        } else {
            self.data.join(rel)
        }
    }

    fn p(&self, rel: &str) -> String {
        self.path(rel).to_str().unwrap().to_owned()
    }

    /// Runs `program args…` through the installed helper as `person`, called by `ferry`.
    fn as_person(&self, person: &str, program: &str, args: &[&str]) -> Output {
        let mut all = vec![person, program];
        all.extend_from_slice(args);
        run_as("ferry", &self.helper, &all)
    }

    /// `sh -c script` as `person`; whether it succeeded.
    fn sh(&self, person: &str, script: &str) -> bool {
        self.as_person(person, "/bin/sh", &["-c", script])
            .status
            .success()
    }
}

fn new_site() -> Site {
    let tmp = tempfile::Builder::new()
        .prefix("ferry-host-")
        .tempdir_in("/tmp")
        .unwrap();
    // Persons walk down to their home through it.
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let site = Site {
        data: tmp.path().join("site"),
        helper: tmp.path().join("lib").join("ferry-posix-helper"),
        _tmp: tmp,
    };
    // Administration commands never make a site: this one does.
    site.ferry_ok(&["site", "init", "--mode", "local"]);
    site
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The tests of this file share the service user `ferry` and the group `fy_shared`, which
/// each makes and removes if they were missing: one at a time.
static MACHINE_ACCOUNTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn host_mode_end_to_end() {
    let _accounts = MACHINE_ACCOUNTS.lock().unwrap_or_else(|e| e.into_inner());
    require_root_and_tools();
    let helper_built = build_helper();
    let mut guard = AccountsGuard::new(
        &[USER_A, USER_B, USER_D],
        &[USER_A, USER_B, USER_D, CIRCLE_GROUP],
        &["ferry", "fy_shared"],
    );
    let site = new_site();

    // A local site with two persons and a circle, then host mode on it.
    site.ferry_ok(&["person", "add", A]);
    site.ferry_ok(&["person", "add", B]);
    site.ferry_ok(&["circle", "add", CIRCLE, "--member", A]);
    let out = site.init();
    assert!(out.contains("created the user fy_person_hta"), "{out}");
    let toml = std::fs::read_to_string(site.path("ferry.toml")).unwrap();
    assert!(toml.contains("mode = \"host\""), "{toml}");

    accounts_are_made(&site);
    layout_has_owners_and_modes(&site);
    helper_is_installed(&site, &helper_built);
    rerun_keeps_files_and_fixes_modes(&site);
    helper_runs_as_the_person_for_ferry_only(&site);
    privilege_cannot_be_regained(&site);
    permissions_follow_the_layout(&site);
    agent_tools_act_as_the_person(&site);
    person_and_circle_add_in_host_mode(&site);

    drop(site);
    let left = guard.remove_all();
    assert!(left.is_empty(), "could not remove: {left:?}");
    for user in [USER_A, USER_B, USER_D] {
        assert!(passwd(user).is_none(), "{user} is left");
        assert!(group(user).is_none(), "group {user} is left");
    }
    assert!(group(CIRCLE_GROUP).is_none(), "{CIRCLE_GROUP} is left");
}

const MA: &str = "hma";
const MB: &str = "hmb";
const MC: &str = "hmc";
const USER_MA: &str = "fy_person_hma";
const USER_MB: &str = "fy_person_hmb";
const USER_MC: &str = "fy_person_hmc";

/// The member API with the gateway running as `ferry` (persons `hma`, `hmb`, `hmc`).
#[test]
fn host_mode_member_api() {
    let _accounts = MACHINE_ACCOUNTS.lock().unwrap_or_else(|e| e.into_inner());
    require_root_and_tools();
    build_helper();
    let mut guard = AccountsGuard::new(
        &[USER_MA, USER_MB, USER_MC],
        &[USER_MA, USER_MB, USER_MC],
        &["ferry", "fy_shared"],
    );
    let site = new_site();
    for person in [MA, MB, MC] {
        site.ferry_ok(&["person", "add", person]);
    }
    site.init();
    let token = |person: &str, kind: &str| site.token(person, kind);
    let (token_a, harness_a, token_b, token_c) = (
        token(MA, "person"),
        token(MA, "harness"),
        token(MB, "person"),
        token(MC, "person"),
    );
    // A copy of the binary the service user can execute, wherever the build tree is.
    let ferry = support::ferry_bin_at(&site.data.parent().unwrap().join("ferry-served"));
    let log = site.data.parent().unwrap().join("gateway.log");
    let agent = host_api::start_agent(site.path("home/hma/public/attachments"), USER_MA);
    let upstream = agent.url("/v1/chat/completions");
    let gateway = host_api::HostGateway::start(
        &ferry,
        &site.data,
        &log,
        &[("FERRY_AGENT__UPSTREAM", &upstream)],
    );
    let sh = |person: &str, script: &str| site.sh(person, script);
    let member = host_api::MemberSite {
        data: &site.data,
        person: MA,
        user: USER_MA,
        token: &token_a,
        harness: &harness_a,
        sh: &sh,
    };
    let other = site.path("home/hmb");
    // B has a file of their own, which A must not reach through any link.
    let (status, body) = gateway.upload(&token_b, "b.txt", b"b's own", None);
    assert_eq!(status, 201, "{body}");

    host_api::every_route_acts_as_the_person(&gateway, &member);
    host_api::the_worker_is_cut_off_from_the_service(&gateway, &member);
    host_api::a_deep_tree_is_listed(&gateway, &member);
    host_api::search_and_zip_act_as_the_person(&gateway, &member);
    host_api::workers_are_capped_per_person(&gateway, &member);
    host_api::events_come_through_the_worker(&gateway, &member);
    host_api::chat_notices_come_through_the_worker(&gateway, &member);
    host_api::planted_links_give_nothing(&gateway, &member, &other);
    host_api::a_linked_public_is_refused(&gateway, &member, &other);
    host_api::a_killed_worker_fails_clearly(&gateway, &member);

    // A person whose POSIX user was removed by hand while their workers wait idle.
    host_api::a_removed_account_ends_its_idle_workers(&gateway, &token_c, USER_MC);
    host_api::a_removed_account_names_the_fix(&gateway, &token_c);

    drop(gateway);
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!log.contains("panicked"), "{log}");
    drop(site);
    let left = guard.remove_all();
    assert!(left.is_empty(), "could not remove: {left:?}");
}

const WA: &str = "hwa";
const USER_WA: &str = "fy_person_hwa";
const CIRCLE_WC: &str = "hwc";
const GROUP_WC: &str = "fy_circle_hwc";
const CIRCLE_WD: &str = "hwd";
const GROUP_WD: &str = "fy_circle_hwd";

/// The person's account changes while the gateway serves them (person `hwa`, circles
/// `hwc` and `hwd`): a group left, a circle joined, a uid changed by hand.
#[test]
fn host_mode_accounts_change_while_serving() {
    let _accounts = MACHINE_ACCOUNTS.lock().unwrap_or_else(|e| e.into_inner());
    require_root_and_tools();
    build_helper();
    let mut guard = AccountsGuard::new(
        &[USER_WA],
        &[USER_WA, GROUP_WC, GROUP_WD],
        &["ferry", "fy_shared"],
    );
    let site = new_site();
    site.ferry_ok(&["person", "add", WA]);
    site.ferry_ok(&["circle", "add", CIRCLE_WC, "--member", WA]);
    site.init();
    let token =
        |kind: &str| support::last_line(&site.ferry(&["token", "create", WA, "--kind", kind]));
    let (person, harness) = (token("person"), token("harness"));
    let ferry = support::ferry_bin_at(&site.data.parent().unwrap().join("ferry-served"));
    let log = site.data.parent().unwrap().join("gateway.log");
    let gateway = host_api::HostGateway::start(&ferry, &site.data, &log, &[]);

    host_api::a_left_group_is_not_kept_by_a_worker(
        &gateway,
        &harness,
        USER_WA,
        GROUP_WC,
        &site.path("circles/hwc"),
    );
    let join = || {
        site.ferry_ok(&["circle", "add", CIRCLE_WD, "--member", WA]);
    };
    host_api::a_circle_joined_while_serving_is_reached(
        &gateway,
        &harness,
        USER_WA,
        &join,
        &site.path("circles/hwd"),
    );
    host_api::a_changed_uid_names_the_fix(&gateway, &person, USER_WA, spare_uid());

    drop(gateway);
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!log.contains("panicked"), "{log}");
    drop(site);
    let left = guard.remove_all();
    assert!(left.is_empty(), "could not remove: {left:?}");
}

/// A uid in the persons' range that names no user.
fn spare_uid() -> u32 {
    (150_000..151_000)
        .find(|uid| passwd(&uid.to_string()).is_none())
        .expect("a free uid")
}

fn accounts_are_made(site: &Site) {
    let shared = gid_of("fy_shared");
    let circle = gid_of(CIRCLE_GROUP);
    assert!(shared >= 100_000 && circle >= 100_000, "{shared} {circle}");
    let (_, circle_members) = group(CIRCLE_GROUP).unwrap();
    assert_eq!(circle_members, [USER_A], "members of {CIRCLE_GROUP}");

    for (person, user) in [(A, USER_A), (B, USER_B)] {
        let (uid, gid, home, shell) = passwd(user).unwrap_or_else(|| panic!("no user {user}"));
        assert!(uid >= 100_000, "{user} has uid {uid}");
        assert_eq!(gid, gid_of(user), "{user}'s primary group is its own");
        let canonical = std::fs::canonicalize(site.path(&format!("home/{person}"))).unwrap();
        assert_eq!(Path::new(&home), canonical, "{user}'s home");
        assert_eq!(shell, "/bin/bash");
        let groups = groups_of(user);
        assert_eq!(groups[0], user, "{groups:?}");
        assert!(groups.contains(&"fy_shared".to_owned()), "{groups:?}");
        assert_eq!(
            groups.contains(&CIRCLE_GROUP.to_owned()),
            person == A,
            "{user}: {groups:?}"
        );
    }
    assert_ne!(uid_of(USER_A), uid_of(USER_B));

    let (ferry_uid, ferry_gid, _, shell) = passwd("ferry").expect("the service user ferry");
    assert_ne!(ferry_uid, 0);
    assert_eq!(ferry_gid, gid_of("ferry"), "ferry's primary group is ferry");
    assert!(
        shell.ends_with("nologin") || shell == "/bin/false",
        "ferry has no login shell: {shell}"
    );
}

/// Every folder of core C-SITE with its owner and mode in host mode; `None` leaves the mode.
fn expected_layout() -> Vec<(String, &'static str, &'static str, Option<u32>)> {
    let mut rows: Vec<(String, &str, &str, Option<u32>)> = [
        (".", "root", "root", Some(0o755)),
        (".ferry", "ferry", "ferry", Some(0o700)),
        ("home", "root", "root", Some(0o755)),
        ("private", "root", "root", Some(0o755)),
        ("private/people", "root", "root", Some(0o755)),
        ("private/herd-keys", "root", "root", Some(0o755)),
        ("private/trash", "root", "root", Some(0o755)),
        ("circles", "root", "root", Some(0o755)),
        ("circles/htc", "root", CIRCLE_GROUP, Some(0o2770)),
        ("shared/public", "root", "fy_shared", Some(0o2775)),
        (
            "shared/cache/dependencies",
            "root",
            "fy_shared",
            Some(0o2775),
        ),
        ("skills", "root", "root", Some(0o755)),
    ]
    .into_iter()
    .map(|(rel, user, group, mode)| (rel.to_owned(), user, group, mode))
    .collect();
    for (person, user) in [(A, USER_A), (B, USER_B)] {
        let home = format!("home/{person}");
        let private = format!("private/people/{person}");
        rows.extend([
            (home.clone(), user, user, Some(0o700)),
            (format!("{home}/public"), user, user, None),
            (format!("{home}/public/attachments"), user, user, None),
            (private.clone(), user, user, Some(0o700)),
            (format!("{private}/tmp"), user, user, Some(0o700)),
            (format!("{private}/artifacts"), user, user, Some(0o700)),
            (
                format!("private/herd-keys/{person}"),
                user,
                user,
                Some(0o700),
            ),
            (format!("private/trash/{person}"), user, user, Some(0o700)),
        ]);
    }
    rows
}

fn layout_has_owners_and_modes(site: &Site) {
    for (rel, user, group_name, mode) in expected_layout() {
        let (uid, gid, have_mode) = owner_mode(&site.path(&rel));
        assert_eq!(
            (uid, gid),
            (uid_of(user), gid_of(group_name)),
            "owner of {rel}: want {user}:{group_name}"
        );
        if let Some(mode) = mode {
            assert_eq!(
                have_mode, mode,
                "mode of {rel}: {have_mode:04o}, want {mode:04o}"
            );
        }
    }
    // The metadata database is the service's, so the gateway (as ferry) can open it.
    let (uid, gid, _) = owner_mode(&site.path(".ferry/site.db"));
    assert_eq!(
        (uid, gid),
        (uid_of("ferry"), gid_of("ferry")),
        ".ferry/site.db"
    );
}

fn helper_is_installed(site: &Site, built: &Path) {
    let (uid, gid, mode) = owner_mode(&site.helper);
    assert_eq!(
        (uid, gid, mode),
        (0, gid_of("ferry"), 0o4750),
        "the installed helper"
    );
    assert_eq!(
        std::fs::read(&site.helper).unwrap(),
        std::fs::read(built).unwrap(),
        "the helper beside ferry was installed"
    );
}

fn rerun_keeps_files_and_fixes_modes(site: &Site) {
    std::fs::write(site.path("home/hta/public/keep.txt"), "mine").unwrap();
    std::fs::write(site.path("circles/htc/team.txt"), "ours").unwrap();
    let chmod = |rel: &str, mode: u32| {
        std::fs::set_permissions(
            site.path(rel),
            std::os::unix::fs::PermissionsExt::from_mode(mode),
        )
        .unwrap();
    };
    chmod("home/hta", 0o755);
    chmod("private/people/htb/tmp", 0o777);
    chmod("circles/htc", 0o777);
    chmod("shared/public", 0o700);
    chmod(".ferry", 0o755);
    chmod("skills", 0o777);
    std::os::unix::fs::lchown(site.path("home"), Some(65534), Some(65534)).unwrap();
    std::os::unix::fs::lchown(site.path("home/hta/public"), Some(0), Some(0)).unwrap();

    let out = site.init();
    assert!(out.contains("mode of home/hta: 0755 -> 0700"), "{out}");
    assert!(out.contains("owner of home: 65534:65534 -> 0:0"), "{out}");
    layout_has_owners_and_modes(site);
    assert_eq!(
        std::fs::read_to_string(site.path("home/hta/public/keep.txt")).unwrap(),
        "mine"
    );
    assert_eq!(
        std::fs::read_to_string(site.path("circles/htc/team.txt")).unwrap(),
        "ours"
    );

    // In place now: a third run changes nothing.
    let out = site.init();
    let changes: Vec<&str> = out.lines().filter(|l| l.starts_with("  ")).collect();
    assert!(
        changes.is_empty(),
        "a run with nothing to do changed: {changes:?}"
    );
    assert!(out.contains("host mode ready"), "{out}");
}

fn helper_runs_as_the_person_for_ferry_only(site: &Site) {
    let (uid, gid) = (uid_of(USER_A), gid_of(USER_A));
    let mut want_groups = vec![gid, gid_of("fy_shared"), gid_of(CIRCLE_GROUP)];
    want_groups.sort();

    let out = site.as_person(A, "/usr/bin/id", &[]);
    assert!(out.status.success(), "id as hta: {}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(&format!("uid={uid}({USER_A}) gid={gid}({USER_A}) groups=")),
        "{text}"
    );
    assert!(
        text.contains("fy_shared") && text.contains(CIRCLE_GROUP),
        "{text}"
    );
    let numbers = |args: &[&str]| -> Vec<u32> {
        let mut v: Vec<u32> = stdout(&site.as_person(A, "/usr/bin/id", args))
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        v.sort();
        v
    };
    assert_eq!(numbers(&["-u"]), [uid]);
    assert_eq!(numbers(&["-g"]), [gid]);
    assert_eq!(numbers(&["-G"]), want_groups);
    assert_eq!(numbers(&["-ru"]), [uid], "the real uid too");

    // The program starts in the person's home with an environment made from nothing:
    // not one variable of the caller's, its secrets least of all.
    let helper = site.helper.to_str().unwrap();
    let out = run_as(
        "ferry",
        Path::new("/usr/bin/env"),
        &[
            "FERRY_AGENT__MODEL=operator-secret",
            "DEPLOY_API_SECRET=operator-secret",
            "LD_PRELOAD=/tmp/x.so",
            "LANG=de_DE.UTF-8",
            "TERM=xterm",
            helper,
            A,
            "/usr/bin/env",
        ],
    );
    let env = stdout(&out);
    let home = std::fs::canonicalize(site.path("home/hta")).unwrap();
    assert_eq!(
        env,
        format!(
            "HOME={}\nLANG=C.UTF-8\nLOGNAME={USER_A}\nPATH=/usr/local/bin:/usr/bin:/bin\n\
             USER={USER_A}\n",
            home.display()
        ),
        "{}",
        stderr(&out)
    );
    // And with umask 077, whatever the caller's (000 here, see run_as).
    let caller = run_as("ferry", Path::new("/bin/sh"), &["-c", "umask"]);
    assert_eq!(stdout(&caller).trim(), "0000");
    let out = site.as_person(A, "/bin/sh", &["-c", "umask"]);
    assert_eq!(stdout(&out).trim(), "0077", "{}", stderr(&out));
    let pwd = stdout(&site.as_person(A, "/bin/pwd", &[]));
    assert_eq!(pwd.trim(), home.to_str().unwrap());

    // Root may call it too.
    let out = std::process::Command::new(&site.helper)
        .args([B, "/usr/bin/id", "-u"])
        .output()
        .unwrap();
    assert_eq!(stdout(&out).trim(), uid_of(USER_B).to_string());

    // nobody cannot even start the installed (4750) helper...
    let out = run_as("nobody", &site.helper, &[A, "/usr/bin/id"]);
    assert!(!out.status.success(), "nobody ran the helper");
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("Permission denied"),
        "{}",
        stderr(&out)
    );
    // ...and a world-executable setuid copy refuses nobody by its real uid.
    let open_copy = site.helper.with_file_name("helper-4755");
    std::fs::copy(&site.helper, &open_copy).unwrap();
    std::fs::set_permissions(
        &open_copy,
        std::os::unix::fs::PermissionsExt::from_mode(0o4755),
    )
    .unwrap();
    assert_eq!(owner_mode(&open_copy), (0, 0, 0o4755));
    let out = run_as("nobody", &open_copy, &[A, "/usr/bin/id"]);
    assert_eq!(out.status.code(), Some(126), "nobody: {}", stderr(&out));
    assert!(stdout(&out).is_empty(), "the program ran: {}", stdout(&out));
    assert!(stderr(&out).contains("refused"), "{}", stderr(&out));
    // A person cannot use it to become another person either.
    let out = run_as(USER_B, &open_copy, &[A, "/usr/bin/id"]);
    assert_eq!(out.status.code(), Some(126), "htb: {}", stderr(&out));
    std::fs::remove_file(&open_copy).unwrap();

    // What it refuses to run.
    for (args, why) in [
        (vec!["nosuchperson", "/usr/bin/id"], "there is no user"),
        (vec!["Bad!", "/usr/bin/id"], "invalid"),
        (vec![A, "id"], "absolute"),
        (vec![A], "usage"),
    ] {
        let out = run_as("ferry", &site.helper, &args);
        assert_eq!(out.status.code(), Some(125), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(why), "{args:?}: {}", stderr(&out));
    }
    let out = site.as_person(A, "/nonexistent/program", &[]);
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
    // A system user below the persons' range is never a target.
    let out = run_as("ferry", &site.helper, &["root", "/usr/bin/id"]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
}

fn privilege_cannot_be_regained(site: &Site) {
    let python = "/usr/bin/python3";
    assert!(
        Path::new(python).is_file(),
        "{python} is needed to check the drop from inside (Debian: python3-minimal)"
    );
    let script = "import os\n\
        for name, call in [('setuid', lambda: os.setuid(0)), ('seteuid', lambda: os.seteuid(0)),\n\
                           ('setgid', lambda: os.setgid(0)), ('setgroups', lambda: os.setgroups([0]))]:\n\
        \x20   try:\n\
        \x20       call()\n\
        \x20       print(name, 'SUCCEEDED')\n\
        \x20   except PermissionError as e:\n\
        \x20       print(name, 'EPERM', e.errno)\n\
        print('res', *os.getresuid(), *os.getresgid())\n";
    let out = site.as_person(A, python, &["-c", script]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (uid, gid) = (uid_of(USER_A), gid_of(USER_A));
    assert_eq!(
        stdout(&out),
        format!(
            "setuid EPERM 1\nseteuid EPERM 1\nsetgid EPERM 1\nsetgroups EPERM 1\n\
             res {uid} {uid} {uid} {gid} {gid} {gid}\n"
        )
    );
}

fn permissions_follow_the_layout(site: &Site) {
    // B's files, made as B.
    assert!(site.sh(
        B,
        "echo secret > public/b.txt && echo draft > ../../private/people/htb/tmp/d.txt"
    ));
    assert_eq!(
        owner_mode(&site.path("home/htb/public/b.txt")).0,
        uid_of(USER_B)
    );

    // A cannot read or list B's home or private folders.
    for (program, rel) in [
        ("/bin/cat", "home/htb/public/b.txt"),
        ("/bin/ls", "home/htb"),
        ("/bin/ls", "private/people/htb"),
        ("/bin/cat", "private/people/htb/tmp/d.txt"),
    ] {
        let out = site.as_person(A, program, &[&site.p(rel)]);
        assert!(
            !out.status.success(),
            "hta ran {program} {rel}: {}",
            stdout(&out)
        );
        assert!(
            stderr(&out).contains("Permission denied"),
            "{}",
            stderr(&out)
        );
    }

    // A reads and writes the circle and shared/public; B is not in the circle.
    let circle_file = site.p("circles/htc/from_a.txt");
    assert!(site.sh(
        A,
        &format!("echo hello > {circle_file} && cat {circle_file}")
    ));
    assert_eq!(
        owner_mode(Path::new(&circle_file)),
        (uid_of(USER_A), gid_of(CIRCLE_GROUP), 0o600),
        "a file in the circle belongs to its group (setgid folder), private by the \
         helper's umask until shared"
    );
    assert!(site.sh(A, &format!("chmod 0644 {circle_file}")));
    assert!(
        site.as_person(A, "/bin/ls", &[&site.p("circles/htc")])
            .status
            .success()
    );
    assert!(
        !site
            .as_person(B, "/bin/ls", &[&site.p("circles/htc")])
            .status
            .success()
    );
    let shared_file = site.p("shared/public/from_a.txt");
    assert!(site.sh(
        A,
        &format!("echo hi > {shared_file} && chmod 0644 {shared_file}")
    ));
    let out = site.as_person(B, "/bin/cat", &[&shared_file]);
    assert_eq!(stdout(&out), "hi\n", "everyone reads shared/public");
    assert!(site.sh(
        B,
        &format!("echo b > {}", site.p("shared/cache/dependencies/b"))
    ));

    // Nobody but root writes skills/; nobody but the service enters .ferry/.
    for rel in ["skills/x", ".ferry/x", "x", "home/x", "circles/x"] {
        let out = site.as_person(A, "/usr/bin/touch", &[&site.p(rel)]);
        assert!(!out.status.success(), "hta created {rel}");
        assert!(!site.path(rel).exists());
    }
    assert!(
        !site
            .as_person(A, "/bin/ls", &[&site.p(".ferry")])
            .status
            .success()
    );
    assert!(
        site.as_person(A, "/bin/ls", &[&site.p("skills")])
            .status
            .success()
    );

    // What A makes is A's.
    let made = site.p("home/hta/public/touched.txt");
    assert!(
        site.as_person(A, "/usr/bin/touch", &[&made])
            .status
            .success()
    );
    let (uid, gid, _) = owner_mode(Path::new(&made));
    assert_eq!((uid, gid), (uid_of(USER_A), gid_of(USER_A)));
    assert!(site.sh(A, "touch private-test && test -O private-test"));
}

/// The agent tools, over MCP from a client ferry did not write, with `ferry mcp` and the
/// gateway running as the service user: every file access and command happens as the
/// person, through the helper and the person's worker.
fn agent_tools_act_as_the_person(site: &Site) {
    // A copy the service user can execute, wherever the build tree is.
    let ferry = support::ferry_bin_at(&site.data.parent().unwrap().join("ferry"));
    let ferry = ferry.to_str().unwrap().to_owned();
    let data = site.p(".");
    let b_file = site.p("home/htb/public/b.txt");
    let b_draft = site.p("private/people/htb/tmp/d.txt");
    let circle = site.p("circles/htc/tool.txt");
    let shared = site.p("shared/public/tool.txt");
    // Links in A's home: one to the circle (A may write there), one to B's file (not).
    assert!(site.sh(
        A,
        &format!("ln -sf {circle} to-circle && ln -sf {b_file} to-b")
    ));
    let steps = vec![
        mcp::call("file_read", json!({"path": b_file})),
        mcp::call("dir_list", json!({"path": site.p("home/htb")})),
        mcp::call("file_read", json!({"path": b_draft})),
        mcp::call("file_write", json!({"path": circle, "content": "circle\n"})),
        mcp::call("file_read", json!({"path": circle})),
        mcp::call("file_write", json!({"path": shared, "content": "shared\n"})),
        mcp::call(
            "file_write",
            json!({"path": site.p("skills/tool.txt"), "content": "x"}),
        ),
        mcp::call(
            "file_write",
            json!({"path": site.p(".ferry/tool.txt"), "content": "x"}),
        ),
        mcp::call(
            "file_write",
            json!({"path": "mine.txt", "content": "mine\n"}),
        ),
        mcp::call(
            "file_write",
            json!({"path": "to-circle", "content": "via link\n"}),
        ),
        mcp::call(
            "file_write",
            json!({"path": "to-b", "content": "overwrite"}),
        ),
        mcp::call("terminal_run", json!({"command": "id -u; cat mine.txt"})),
        mcp::call("terminal_run", json!({"command": format!("cat {b_file}")})),
        mcp::call(
            "terminal_run",
            json!({"command": "(sleep 3; touch late) & sleep 20", "timeoutSecs": 1}),
        ),
        mcp::call(
            "file_edit",
            json!({"edits": [{"path": "mine.txt", "oldText": "mine", "newText": "edited"}]}),
        ),
        // The default sandbox holds in host mode too: the command's parent is the
        // person's own worker, which the person could read and signal without it.
        mcp::call(
            "terminal_run",
            json!({"command": "cat /proc/$PPID/environ"}),
        ),
        mcp::call("terminal_run", json!({"command": "kill -0 $PPID"})),
        mcp::call("terminal_run", json!({"command": "id -u"})),
    ];
    // What the worker must not pass on: a secret in the service's environment. What it
    // must not keep: a caller's umask of 000.
    let (secret, snippet) = support::secret();
    let mut steps = steps;
    steps.extend([
        mcp::call(
            "terminal_run",
            json!({"command": support::environ_scan(&snippet)}),
        ),
        mcp::call(
            "terminal_run",
            json!({"command": "touch t-new && mkdir d-new && stat -c '%a' t-new d-new"}),
        ),
        mcp::call(
            "file_write",
            json!({"path": "deep/er/new.txt", "content": "new\n"}),
        ),
        // The quota, counted by the person's own worker (the service may not read there).
        mcp::call("file_deliver", json!({"paths": ["big.bin"]})),
        mcp::call("file_deliver", json!({"paths": ["mine.txt"]})),
    ]);
    assert!(site.sh(A, "head -c 2000000 /dev/zero > big.bin"));
    let config = site.path("ferry.toml");
    let mut toml = std::fs::read_to_string(&config).unwrap();
    toml.push_str("\n[limits]\nperson_max_bytes = 1000000\n");
    std::fs::write(&config, toml).unwrap();
    let mcp_as_ferry =
        format!("umask 000; exec runuser -u ferry -- {ferry} mcp --data {data} --person {A}");
    let secret_env = [
        ("FERRY_AGENT__MODEL", secret.as_str()),
        ("DEPLOY_API_SECRET", secret.as_str()),
    ];
    // The control: `ferry mcp` does hold the secret while the session runs.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let control = {
        let (stop, secret) = (stop.clone(), secret.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let held = support::holders_of(&secret).into_iter().any(|pid| {
                    std::fs::read(format!("/proc/{pid}/cmdline"))
                        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("\0mcp\0"))
                });
                if held {
                    return true;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            false
        })
    };
    // The person's own view outside any sandbox, while the session runs.
    let person_scan = scan_as_person(&snippet, stop.clone());
    let out = mcp::drive(&json!({
        "server": mcp::stdio(&["sh", "-c", &mcp_as_ferry], &secret_env),
        "elicitation": null,
        "steps": steps,
        "timeout_secs": 120,
    }));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(control.join().unwrap(), "ferry mcp never held the secret");
    let scan = person_scan.join().unwrap();
    // The scan reads what it can (its own shell at least) and finds no secret; the
    // worker, not dumpable, is beyond even the person's own reach.
    support::assert_no_leak(&scan, "bash");
    assert_worker_unreadable(&scan);
    let r = out["results"].as_array().unwrap();
    let denied = |i: usize| {
        assert!(mcp::is_error(&r[i]), "step {i} should be refused: {}", r[i]);
        assert_eq!(
            r[i]["structuredContent"]["error"]["code"], "permission_denied",
            "step {i}: {}",
            r[i]
        );
    };
    let ok = |i: usize| assert!(!mcp::is_error(&r[i]), "step {i} failed: {}", r[i]);
    denied(0);
    denied(1);
    denied(2);
    ok(3);
    assert!(mcp::text_of(&r[4]).contains("circle"));
    ok(5);
    denied(6);
    denied(7);
    ok(8);
    assert_eq!(
        owner_mode(&site.path("home/hta/mine.txt")).0,
        uid_of(USER_A)
    );
    assert_eq!(owner_mode(Path::new(&circle)).1, gid_of(CIRCLE_GROUP));
    // Through a link, where the person could write: the circle file changed, the link stayed.
    ok(9);
    assert_eq!(std::fs::read_to_string(&circle).unwrap(), "via link\n");
    assert!(site.path("home/hta/to-circle").is_symlink());
    denied(10);
    assert_eq!(std::fs::read_to_string(&b_file).unwrap(), "secret\n");
    let id = mcp::text_of(&r[11]);
    assert!(id.contains(&format!("{}\nmine", uid_of(USER_A))), "{id}");
    assert_ne!(r[12]["structuredContent"]["exitCode"], 0, "{}", r[12]);
    assert_eq!(r[13]["structuredContent"]["timedOut"], true, "{}", r[13]);
    ok(14);
    for i in [15, 16] {
        ok(i);
        assert_ne!(
            r[i]["structuredContent"]["exitCode"], 0,
            "step {i}: {}",
            r[i]
        );
    }
    assert!(
        mcp::text_of(&r[17]).contains(&uid_of(USER_A).to_string()),
        "{}",
        r[17]
    );
    // Under the default sandbox the command sees no other process at all.
    let sandboxed = r[18]["structuredContent"]["stdout"]
        .as_str()
        .unwrap_or_default();
    assert!(!sandboxed.contains("LEAK /proc/"), "{}", r[18]);
    assert!(mcp::text_of(&r[19]).contains("644\n755"), "{}", r[19]);
    ok(20);
    assert_eq!(
        r[21]["structuredContent"]["error"]["code"], "quota_exceeded",
        "{}",
        r[21]
    );
    assert!(!site.path("home/hta/public/attachments/big.bin").exists());
    ok(22);
    assert_eq!(
        owner_mode(&site.path("home/hta/public/attachments/mine.txt")).0,
        uid_of(USER_A)
    );
    for (rel, mode) in [
        ("deep", 0o755),
        ("deep/er", 0o755),
        ("deep/er/new.txt", 0o644),
    ] {
        let (uid, _, have) = owner_mode(&site.path(&format!("home/hta/{rel}")));
        assert_eq!((uid, have), (uid_of(USER_A), mode), "{rel}: {have:o}");
    }
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert!(
        !site.path("home/hta/late").exists(),
        "the backgrounded child outlived the timeout"
    );

    // The gateway, as the service user, serves the same tools at /mcp.
    let token = site.ferry_ok(&["token", "create", A, "--kind", "harness"]);
    let token = token.lines().last().unwrap().trim().to_owned();
    let log_path = site.data.parent().unwrap().join("gateway.log");
    // setpriv execs in place (runuser would stay the parent), so the kill below reaches it.
    let mut gateway = std::process::Command::new("setpriv")
        .envs(secret_env)
        .args([
            "--reuid=ferry",
            "--regid=ferry",
            "--init-groups",
            &ferry,
            "serve",
            "--data",
            &data,
            "--listen",
            "127.0.0.1:0",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    // Kept open until the gateway ends: it prints more than the first line.
    let mut gateway_out = std::io::BufReader::new(gateway.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut gateway_out, &mut first).unwrap();
    let base = first
        .trim()
        .split('/')
        .take(3)
        .collect::<Vec<_>>()
        .join("/");
    // The person has the web client open: deletes are approved there, and a picked file
    // is placed in the person's folder by their own worker.
    let person_token = site.ferry_ok(&["token", "create", A]);
    let person_token = person_token.lines().last().unwrap().trim().to_owned();
    let events = support::client()
        .get(format!("{base}/v1/events"))
        .bearer_auth(&person_token)
        .send()
        .unwrap();
    assert_eq!(events.status(), 200);
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert!(site.sh(A, "echo bye > bye.txt"));
    let person = support::answer_as_the_person(
        &base,
        &person_token,
        &[("bye.txt", true)],
        ("figures.csv", b"x,y\n1,2\n"),
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let person_scan = scan_as_person(&snippet, stop.clone());
    let out = mcp::try_drive(&json!({
        "server": mcp::http(&format!("{base}/mcp"), &token),
        "elicitation": null,
        "steps": [
            mcp::call("file_read", json!({"path": b_file})),
            mcp::call("terminal_run", json!({"command": "id -un"})),
            mcp::call("file_delete", json!({"path": "bye.txt"})),
            mcp::call("file_pick", json!({"prompt": "The figures"})),
            mcp::call("terminal_run", json!({"command": support::environ_scan(&snippet)})),
        ],
        "timeout_secs": 90,
    }));
    let gateway_held = support::holders_of(&secret).contains(&gateway.id());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let answered = person.join().unwrap();
    drop(events);
    let _ = gateway.kill();
    let _ = gateway.wait();
    drop(gateway_out);
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let out = out.unwrap_or_else(|e| {
        panic!("gateway /mcp as ferry: {e}\nfirst line {first:?}\nlog:\n{log}")
    });
    assert_eq!(
        out["results"][0]["structuredContent"]["error"]["code"],
        "permission_denied"
    );
    assert!(
        mcp::text_of(&out["results"][1]).contains(USER_A),
        "{}",
        out["results"][1]
    );
    assert_eq!(answered, 2);
    assert!(!mcp::is_error(&out["results"][2]), "{}", out["results"][2]);
    assert!(!site.path("home/hta/bye.txt").exists());
    let picked = &out["results"][3];
    assert!(!mcp::is_error(picked), "{picked}");
    let picked = picked["structuredContent"]["path"].as_str().unwrap();
    assert!(
        picked.contains("/private/people/hta/tmp/picks/"),
        "{picked}"
    );
    assert_eq!(std::fs::read(picked).unwrap(), b"x,y\n1,2\n");
    assert!(gateway_held, "the gateway's environment lacks the secret");
    let scan = person_scan.join().unwrap();
    // The scan reads what it can (its own shell at least) and finds no secret; the
    // worker, not dumpable, is beyond even the person's own reach.
    support::assert_no_leak(&scan, "bash");
    assert_worker_unreadable(&scan);
    // Under the default sandbox the command itself sees no other process.
    let sandboxed = mcp::text_of(&out["results"][4]);
    assert!(!sandboxed.contains("LEAK /proc/"), "{sandboxed}");

    // Nothing a command started outlives its call, run by the person's worker either.
    let no_sandbox = [("FERRY_EXEC__SANDBOX", "none")];
    support::assert_nothing_outlives_over_mcp(
        mcp::stdio(&["sh", "-c", &mcp_as_ferry], &no_sandbox),
        true,
    );
    // A command that kills its own reaper gets no answer, and the person's worker (the
    // reaper's parent, a subreaper too) ends what it left once the call is over.
    let marker = support::escapes::marker();
    let command = format!(
        "setsid -f bash -c 'echo $$ > orphan.pid; exec -a {marker} sleep 300'; \
         until [ -s orphan.pid ]; do sleep 0.02; done; kill -KILL $PPID; exec -a {marker} sleep 300"
    );
    let out = mcp::drive(&json!({
        "server": mcp::stdio(&["sh", "-c", &mcp_as_ferry], &no_sandbox),
        "elicitation": null,
        "steps": [mcp::call("terminal_run", json!({"command": command}))],
        "timeout_secs": 60,
    }));
    let r = &out["results"][0];
    assert_eq!(r["structuredContent"]["error"]["code"], "unwatched", "{r}");
    let orphan = std::fs::read_to_string(site.path("home/hta/orphan.pid")).unwrap();
    assert!(
        !Path::new(&format!("/proc/{}/cmdline", orphan.trim())).exists()
            || support::escapes::survivors(&marker).is_empty(),
        "the orphan {orphan} outlived the call"
    );
    assert_eq!(support::escapes::survivors(&marker), Vec::<u32>::new());
    assert_eq!(
        owner_mode(Path::new(picked)).0,
        uid_of(USER_A),
        "placed by the person's worker"
    );
}

fn person_and_circle_add_in_host_mode(site: &Site) {
    // Root adds a person to the host-mode site: the POSIX user comes with it.
    let out = site.ferry_ok(&["person", "add", D]);
    assert!(out.contains("created the user fy_person_htd"), "{out}");
    let token = out.lines().last().unwrap();
    assert!(
        token.starts_with("fy_"),
        "the token stays the last line: {out}"
    );
    let (uid, _, _, _) = passwd(USER_D).expect("fy_person_htd");
    assert!(uid >= 100_000);
    assert_eq!(
        owner_mode(&site.path("home/htd")),
        (uid, gid_of(USER_D), 0o700)
    );
    assert_eq!(
        owner_mode(&site.path("private/people/htd/artifacts")),
        (uid, gid_of(USER_D), 0o700)
    );
    assert!(!groups_of(USER_D).contains(&CIRCLE_GROUP.to_owned()));
    assert!(
        !site
            .as_person(D, "/bin/ls", &[&site.p("circles/htc")])
            .status
            .success()
    );

    // Joining the circle opens its folder to them.
    site.ferry_ok(&["circle", "add", CIRCLE, "--member", D]);
    assert!(groups_of(USER_D).contains(&CIRCLE_GROUP.to_owned()));
    let (_, members) = group(CIRCLE_GROUP).unwrap();
    assert_eq!(members, [USER_A, USER_D]);
    let out = site.as_person(D, "/bin/cat", &[&site.p("circles/htc/from_a.txt")]);
    assert_eq!(stdout(&out), "hello\n", "{}", stderr(&out));

    let list = site.ferry_ok(&["circle", "list"]);
    assert_eq!(list, "htc\thta,htd\n");
}

/// Scans, as the person and outside any sandbox, every process the person can see, again
/// and again until `stop` is set or the scan has read the environment of the person's
/// worker. The last scan, as a `terminal_run` result for [`support::assert_no_leak`].
fn scan_as_person(
    snippet: &str,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<serde_json::Value> {
    let script = support::environ_scan(snippet);
    std::thread::spawn(move || {
        let mut last = String::new();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let out = std::process::Command::new("runuser")
                .args(["-u", USER_A, "--", "bash", "-c", &script])
                .current_dir("/")
                .output()
                .unwrap();
            last = String::from_utf8_lossy(&out.stdout).into_owned();
            let read_worker = last
                .lines()
                .any(|l| l.starts_with("READ ") && l.contains("ferry worker"));
            if read_worker {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        json!({"structuredContent": {"stdout": last}})
    })
}

/// The person's scan could not read the environment of any `ferry worker`: the worker is
/// not dumpable, so processes of the same uid cannot open its `/proc` files.
fn assert_worker_unreadable(scan: &serde_json::Value) {
    let stdout = scan["structuredContent"]["stdout"]
        .as_str()
        .unwrap_or_default();
    assert!(
        !stdout
            .lines()
            .any(|l| l.starts_with("READ ") && l.contains("ferry worker")),
        "the person read a worker's environment: {stdout}"
    );
}

const HA: &str = "hha";
const HB: &str = "hhb";
const USER_HA: &str = "fy_person_hha";
const USER_HB: &str = "fy_person_hhb";

/// The scripted worker of the host-mode herd: says who it runs as, tries to read the
/// herd's keys (their folder's path is its task), asks its owner, and completes with a
/// JSON report of what it saw.
const HOST_WORKER: &str = r#"
import json, os, subprocess, sys
ferry = os.environ["FERRY_HERD_BIN"]
def herd(*args, stdin=None):
    p = subprocess.run([ferry, "herd", *args], input=stdin, capture_output=True, text=True)
    return p.returncode, json.loads(p.stdout)
seen = {"uid": os.getuid()}
code, task = herd("inbox", "--wait", "30")
seen["task"] = task
try:
    seen["keys"] = os.listdir(task["text"])
except OSError as e:
    seen["keys"] = type(e).__name__
code, asked = herd("ask-owner", "--message", "which colour?", "--file", "question.txt")
seen["asked"] = asked
code, reply = herd("inbox", "--wait", "60")
seen["reply"] = reply
code, done = herd("complete", "--output", "-", stdin=json.dumps(seen))
"#;

/// Reads the environment, command line and every readable mapping of each process of the
/// calling user: `READ <pid>` for each it could read, `LEAK <pid> <what>` where `argv[1]`
/// was found.
const MEMORY_SCAN: &str = r#"
import os, sys
needle = sys.argv[1].encode()
me = os.getuid()
for pid in filter(str.isdigit, os.listdir("/proc")):
    if int(pid) == os.getpid():
        continue
    try:
        if os.stat(f"/proc/{pid}").st_uid != me:
            continue
        for what in ("environ", "cmdline"):
            if needle in open(f"/proc/{pid}/{what}", "rb").read():
                print("LEAK", pid, what)
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb")
    except OSError:
        continue
    print("READ", pid)
    for line in maps:
        span, perms = line.split()[:2]
        if "r" not in perms:
            continue
        start, end = (int(x, 16) for x in span.split("-"))
        try:
            mem.seek(start)
            if needle in mem.read(end - start):
                print("LEAK", pid, line)
        except (OSError, OverflowError, ValueError):
            pass
"#;

/// The herd in host mode (spec handoffs.md H-WHERE; persons `hha`, `hhb`): the gateway
/// runs as `ferry`, which cannot open a person's herd, so each call is performed by a
/// process the helper started as the person; workers run as the person, in the sandbox,
/// and cannot read the keys their herd signs with; two persons' herds stay apart.
#[test]
fn host_mode_herd() {
    let _accounts = MACHINE_ACCOUNTS.lock().unwrap_or_else(|e| e.into_inner());
    require_root_and_tools();
    build_helper();
    let mut guard = AccountsGuard::new(
        &[USER_HA, USER_HB],
        &[USER_HA, USER_HB],
        &["ferry", "fy_shared"],
    );
    let site = new_site();
    for person in [HA, HB] {
        site.ferry_ok(&["person", "add", person]);
    }
    site.init();
    let (token_a, token_b) = (site.token(HA, "harness"), site.token(HB, "harness"));
    let worker_py = site.p("home/hha/worker.py");
    std::fs::write(&worker_py, HOST_WORKER).unwrap();
    let definition = "---\nname: scribe\ndescription: a scripted worker\ncommand: python3 \
                      \"$HOME/worker.py\"\n---\nYou are a scribe.\n";
    assert!(site.sh(
        HA,
        &format!(
            "mkdir -p .ferry-herd/agents && \
             printf '%s' '{definition}' > .ferry-herd/agents/scribe.md && \
             printf -- '---\nname: idle\ndescription: waits\ncommand: sleep 600\n---\nWait.\n' \
               > .ferry-herd/agents/idle.md && \
             echo 'the notes' > notes.md && chmod 600 notes.md && \
             echo 'context' > question.txt"
        )
    ));
    assert!(site.sh(HB, "echo 'b only' > secret.txt && chmod 600 secret.txt"));
    assert!(
        std::process::Command::new("chown")
            .arg(format!("{USER_HA}:{USER_HA}"))
            .arg(&worker_py)
            .status()
            .unwrap()
            .success()
    );

    let ferry = support::ferry_bin_at(&site.data.parent().unwrap().join("ferry-served"));
    let log = site.data.parent().unwrap().join("gateway.log");
    // A secret of the service's configuration, which nothing of the person's may hold.
    let (secret, _) = support::secret();
    let gateway = host_api::HostGateway::start(
        &ferry,
        &site.data,
        &log,
        &[("FERRY_AGENT__MODEL", secret.as_str())],
    );
    let keys = site.p("private/herd-keys/hha");
    let call = |action: serde_json::Value| mcp::call("subagent", action);
    let answer = |result: &serde_json::Value| -> serde_json::Value {
        assert!(!mcp::is_error(result), "{result}");
        serde_json::from_str(&mcp::text_of(result)).unwrap_or_else(|_| panic!("{result}"))
    };

    // The whole loop, over the gateway's /mcp.
    let results = gateway.mcp(
        &token_a,
        vec![
            call(json!({"action": "assign", "agent": "scribe", "task": keys,
                        "files": ["notes.md", "./notes.md"]})),
            call(json!({"action": "inbox", "waitSecs": 60})),
            call(json!({"action": "reply", "label": "scribe", "message": "blue"})),
            call(json!({"action": "inbox", "waitSecs": 60})),
        ],
    );
    let assigned = answer(&results[0]);
    let pid = assigned["worker"]["pid"].as_u64().unwrap();
    let files = assigned["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "one file, once: {assigned}");
    assert_eq!(files[0]["path"], site.p("home/hha/notes.md"));
    assert_eq!(files[0]["embedded"], true, "read as the person: {assigned}");
    let question = answer(&results[1])["envelope"].clone();
    assert_eq!(question["kind"], "question", "{question}");
    assert_eq!(question["from"], format!("scribe#{pid}"));
    assert_eq!(question["files"][0]["content"], "context\n");
    answer(&results[2]);
    let done = answer(&results[3])["envelope"].clone();
    assert_eq!(done["kind"], "completion", "{done}");
    let result_path = done["resultPath"].as_str().unwrap().to_owned();
    assert_eq!(
        owner_mode(Path::new(&result_path)),
        (uid_of(USER_HA), gid_of(USER_HA), 0o600)
    );
    let seen: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&result_path).unwrap()).unwrap();
    assert_eq!(
        seen["uid"],
        uid_of(USER_HA),
        "the worker runs as the person: {seen}"
    );
    assert_eq!(seen["task"]["files"][0]["content"], "the notes\n");
    assert_eq!(seen["reply"]["text"], "blue");
    assert!(
        !seen["keys"].is_array(),
        "a sandboxed worker cannot list its herd's keys: {seen}"
    );

    // Everything of the herd is the person's, private; the keys outside every tree.
    for (rel, mode) in [
        ("private/people/hha/herd", 0o700),
        ("private/herd-keys/hha", 0o700),
        ("private/herd-keys/hha/scribe.1.key", 0o600),
    ] {
        assert_eq!(
            owner_mode(&site.path(rel)),
            (uid_of(USER_HA), gid_of(USER_HA), mode),
            "{rel}"
        );
    }

    // The result is evidence for the next worker; a file the person cannot read stops an
    // assign before anything starts; stop ends the worker.
    let results = gateway.mcp(
        &token_a,
        vec![
            call(
                json!({"action": "assign", "agent": "scribe", "label": "reviewer",
                        "task": "review", "files": [result_path]}),
            ),
            call(json!({"action": "stop", "label": "reviewer"})),
            call(
                json!({"action": "assign", "agent": "scribe", "label": "peek",
                        "task": "peek", "files": [site.p("home/hhb/secret.txt")]}),
            ),
            call(json!({"action": "status"})),
        ],
    );
    let next = answer(&results[0]);
    assert_eq!(next["files"][0]["path"], result_path.as_str());
    assert_eq!(next["files"][0]["embedded"], true);
    let reviewer = next["worker"]["pid"].as_u64().unwrap() as u32;
    assert_eq!(answer(&results[1])["state"], "stopped");
    assert!(!support::herd::running(reviewer), "stop ends the worker");
    assert!(mcp::is_error(&results[2]), "{}", results[2]);
    let status = answer(&results[3]);
    assert_eq!(
        support::herd::labels(&status),
        ["reviewer", "scribe"],
        "nothing of peek: {status}"
    );

    // What a worker or another person may plant, the controller (the person, following
    // links as the person does here) refuses: a link to the herd's keys as evidence, a
    // definition that is a link into a folder others write, a working folder outside the
    // person's trees, a project's definitions in `shared/public/`.
    let shared = site.p("shared/public");
    let planted = |name: &str| {
        format!("---\nname: {name}\ndescription: by hhb\ncommand: touch {shared}/hhb-ran\n---\nx\n")
    };
    std::fs::create_dir_all(site.path("shared/public/.ferry-herd/agents")).unwrap();
    for (rel, name) in [
        ("shared/public/.ferry-herd/agents/planted.md", "planted"),
        ("shared/public/linked.md", "linked"),
    ] {
        std::fs::write(site.path(rel), planted(name)).unwrap();
    }
    assert!(site.sh(
        HA,
        &format!(
            "ln -s {keys}/scribe.1.key key-link && \
             ln -s {shared}/linked.md .ferry-herd/agents/linked.md"
        )
    ));
    let results = gateway.mcp(
        &token_a,
        vec![
            call(
                json!({"action": "assign", "agent": "scribe", "label": "thief",
                        "task": "x", "files": ["key-link"]}),
            ),
            call(json!({"action": "assign", "agent": "linked", "task": "x"})),
            call(
                json!({"action": "assign", "agent": "scribe", "label": "tmp",
                        "task": "x", "cwd": "/tmp"}),
            ),
            call(json!({"action": "assign", "agent": "planted", "task": "x",
                        "cwd": shared})),
        ],
    );
    let code = |result: &serde_json::Value| {
        assert!(mcp::is_error(result), "{result}");
        result["structuredContent"]["error"]["code"].clone()
    };
    assert_eq!(code(&results[0]), "path_denied");
    assert_eq!(code(&results[1]), "path_denied");
    assert_eq!(code(&results[2]), "path_escapes");
    assert_eq!(code(&results[3]), "unknown_agent");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(!site.path("shared/public/hhb-ran").exists());

    // Every process of the person's while a worker runs (its supervisor included), read
    // whole by the person: the service's configuration is in none of them.
    let idle = answer(
        &gateway.mcp(
            &token_a,
            vec![call(
                json!({"action": "assign", "agent": "idle", "task": "wait"}),
            )],
        )[0],
    );
    assert!(idle["worker"]["pid"].is_u64(), "{idle}");
    let out = site.as_person(HA, "/usr/bin/python3", &["-c", MEMORY_SCAN, &secret]);
    let scanned = stdout(&out);
    assert!(out.status.success(), "{scanned}{}", stderr(&out));
    assert!(
        scanned.contains("READ "),
        "the scan read nothing: {scanned}"
    );
    assert!(!scanned.contains("LEAK"), "{scanned}");
    answer(
        &gateway.mcp(
            &token_a,
            vec![call(json!({"action": "stop", "label": "idle"}))],
        )[0],
    );

    // The same herd through `ferry herd`, run by the service user.
    let out = run_as(
        "ferry",
        &ferry,
        &[
            "herd",
            "status",
            "--label",
            "scribe",
            "--data",
            &site.p("."),
            "--person",
            HA,
        ],
    );
    let status: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}{}", stdout(&out), stderr(&out)));
    assert_eq!(status["workers"][0]["state"], "completed", "{status}");

    // Another person sees none of it, and cannot hand over the first person's files.
    let results = gateway.mcp(
        &token_b,
        vec![
            call(json!({"action": "status"})),
            call(json!({"action": "status", "label": "scribe"})),
            call(json!({"action": "assign", "agent": "scribe", "task": "x",
                        "files": [site.p("home/hha/notes.md")]})),
        ],
    );
    assert_eq!(answer(&results[0])["workers"], json!([]));
    assert!(mcp::is_error(&results[1]), "{}", results[1]);
    assert!(mcp::is_error(&results[2]), "{}", results[2]);

    drop(gateway);
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!log.contains("panicked"), "{log}");
    host_api::kill_processes_of(USER_HA);
    drop(site);
    let left = guard.remove_all();
    assert!(left.is_empty(), "could not remove: {left:?}");
}
