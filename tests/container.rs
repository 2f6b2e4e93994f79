//! Container mode (spec core C-SITE modes, C-PATH): the gateway runs as root and hands
//! every file and folder it writes into a workspace to the agent's uid:gid, by
//! descriptor, never through a link.
//!
//! These tests change file owners, so they must run as root (CI does). They do not skip
//! when they are not: each fails with a message saying so.

mod support;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use support::{
    Finished, Options, Peer, Reply, Server, assert_error, assert_link_to, assert_no_temporaries,
    create_project, ferry_command, finish, list_files, post_json, tree, upload,
};

const AGENT: (u32, u32) = (4242, 4343);
const BOB: (u32, u32) = (5151, 5252);
const ROOT: (u32, u32) = (0, 0);

const CONTAINER_TOML: &str = "[site]\nmode = \"container\"\nagent_uid = 4242\nagent_gid = 4343\n";

/// Fails loudly (never skips) when the tests cannot do what they check.
fn require_root() {
    let output = Command::new("id")
        .arg("-u")
        .output()
        .expect("running `id -u`");
    let uid = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert_eq!(
        uid, "0",
        "the container-mode tests chown files and must run as root (CI does); \
         this process runs as uid {uid:?}. Run `cargo test -p ferry-cli --test container` as root."
    );
}

fn start_with(toml: &str) -> Server {
    require_root();
    Server::start_with(Options {
        config_toml: Some(toml.to_owned()),
        ..Options::default()
    })
}

fn start() -> Server {
    start_with(CONTAINER_TOML)
}

/// uid:gid of `path` itself (a link is not followed).
fn owner(path: &Path) -> (u32, u32) {
    let meta = std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{} is missing: {e}", path.display()));
    (meta.uid(), meta.gid())
}

fn assert_owned(path: &Path, want: (u32, u32)) {
    assert_eq!(owner(path), want, "owner of {}", path.display());
}

fn public(server: &Server, person: &str) -> PathBuf {
    server.home(person).join("public")
}

/// A root-owned directory outside the site, holding a root-owned file `secret.txt`.
fn outside_root_owned() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secret.txt");
    std::fs::write(&file, "root's").unwrap();
    assert_owned(dir.path(), ROOT);
    assert_owned(&file, ROOT);
    (dir, file)
}

#[test]
fn container_upload_is_owned_by_the_agent() {
    let server = start();
    let (status, body) = upload(&server, &server.token, "hello.txt", b"hello", None);
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["path"], "public/hello.txt");

    let public = public(&server, "me");
    assert_owned(&public.join("hello.txt"), AGENT);
    assert_owned(&public, AGENT);
    assert_owned(&public.join("attachments"), AGENT);
    assert_owned(&server.home("me"), AGENT);
    // Only the file itself: no temporary left with any owner.
    assert_eq!(tree(&public), vec!["attachments", "hello.txt"]);
}

#[test]
fn container_reupload_is_owned_by_the_agent() {
    let server = start();
    let public = public(&server, "me");
    let (status, body) = upload(&server, &server.token, "notes.txt", b"one", None);
    assert_eq!(status, 201, "{body}");
    // Someone (root, say) left the file with another owner; the replacement is the agent's.
    std::os::unix::fs::lchown(public.join("notes.txt"), Some(0), Some(0)).unwrap();
    let (status, body) = upload(&server, &server.token, "notes.txt", b"two", None);
    assert_eq!(status, 201, "{body}");
    assert_owned(&public.join("notes.txt"), AGENT);
    assert_eq!(std::fs::read(public.join("notes.txt")).unwrap(), b"two");
}

#[test]
fn container_delivery_is_owned_by_the_agent() {
    let server = start();
    let harness = server.create_token("me", "harness");
    let peer = Peer::start(|_| Reply::ok("delivered"));
    let (status, body) = post_json(
        &server,
        &harness,
        "/v1/deliveries",
        &json!({"url": peer.url("/report.pdf")}),
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["path"], "public/attachments/report.pdf");
    let attachments = public(&server, "me").join("attachments");
    assert_owned(&attachments.join("report.pdf"), AGENT);
    assert_owned(&attachments, AGENT);
    assert_eq!(tree(&attachments), vec!["report.pdf"]);
}

#[test]
fn container_mkdir_folders_are_owned_by_the_agent() {
    let server = start();
    for path in ["public/reports", "public/a/b/c"] {
        let (status, body) = post_json(
            &server,
            &server.token,
            "/v1/files/mkdir",
            &json!({ "path": path }),
        );
        assert_eq!(status, 201, "{path}: {body}");
    }
    let public = public(&server, "me");
    for rel in ["reports", "a", "a/b", "a/b/c"] {
        assert_owned(&public.join(rel), AGENT);
    }
    // A file uploaded next to them too.
    let (status, body) = upload(&server, &server.token, "q.csv", b"1,2", None);
    assert_eq!(status, 201, "{body}");
    assert_owned(&public.join("q.csv"), AGENT);
}

#[test]
fn container_project_folders_and_files_are_owned_by_the_agent() {
    let server = start();
    create_project(&server, &server.token, "p1");
    let project = server.home("me").join("projects/p1");
    assert_owned(&project, AGENT);
    assert_owned(&project.join("public"), AGENT);
    assert_owned(&project.join("public/attachments"), AGENT);

    let (status, body) = upload(&server, &server.token, "brief.md", b"# brief", Some("p1"));
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["project"], "p1", "{body}");
    assert_owned(&project.join("public/brief.md"), AGENT);

    let harness = server.create_token("me", "harness");
    let peer = Peer::start(|_| Reply::ok("from the agent"));
    let (status, body) = post_json(
        &server,
        &harness,
        "/v1/deliveries",
        &json!({"url": peer.url("/out.txt"), "project": "p1"}),
    );
    assert_eq!(status, 201, "{body}");
    assert_owned(&project.join("public/attachments/out.txt"), AGENT);
}

#[test]
fn container_projects_folder_is_owned_by_the_agent() {
    let server = start();
    create_project(&server, &server.token, "q2");
    // projects/ itself too: a root-owned 0700 folder here would lock the agent out of
    // every project below it.
    let projects = server.home("me").join("projects");
    assert_owned(&projects, AGENT);
    let mode = std::fs::symlink_metadata(&projects).unwrap().mode();
    assert_eq!(
        mode & 0o700,
        0o700,
        "the owner may enter projects/: {mode:o}"
    );
    assert_owned(&projects.join("q2"), AGENT);
    assert_owned(&projects.join("q2/public"), AGENT);
    assert_owned(&projects.join("q2/public/attachments"), AGENT);

    // A second project (from the command line) leaves projects/ with the agent.
    support::last_line(&server.ferry(&["project", "add", "me", "q3"]));
    assert_owned(&projects, AGENT);
    assert_owned(&projects.join("q3"), AGENT);
    assert_owned(&projects.join("q3/public"), AGENT);
    assert_owned(&projects.join("q3/public/attachments"), AGENT);
}

#[test]
fn container_per_person_agent_ids_override_the_site_ones() {
    let server = start_with(&format!(
        "{CONTAINER_TOML}\n[site.agents.bob]\nuid = 5151\ngid = 5252\n"
    ));
    let bob = server.add_person("bob");
    let (status, body) = upload(&server, &bob, "bob.txt", b"bob's", None);
    assert_eq!(status, 201, "{body}");
    let (status, body) = upload(&server, &server.token, "me.txt", b"mine", None);
    assert_eq!(status, 201, "{body}");

    let bobs = public(&server, "bob");
    assert_owned(&bobs.join("bob.txt"), BOB);
    assert_owned(&server.home("bob"), BOB);
    assert_owned(&bobs, BOB);
    assert_owned(&bobs.join("attachments"), BOB);
    assert_eq!(tree(&bobs), vec!["attachments", "bob.txt"]);

    let mine = public(&server, "me");
    assert_owned(&mine.join("me.txt"), AGENT);
    assert_owned(&server.home("me"), AGENT);
    assert_owned(&mine, AGENT);
    assert_owned(&mine.join("attachments"), AGENT);
    assert_eq!(tree(&mine), vec!["attachments", "me.txt"]);
}

// ---------------------------------------------------------------------------------------
// Links are never followed, so nothing outside is ever chowned (C-PATH)
// ---------------------------------------------------------------------------------------

/// The root-owned folder and file of [`outside_root_owned`] are exactly as they were made.
fn assert_outside_untouched(dir: &Path, file: &Path) {
    assert_owned(dir, ROOT);
    assert_owned(file, ROOT);
    assert_eq!(std::fs::read_to_string(file).unwrap(), "root's");
    assert_eq!(tree(dir), vec!["secret.txt"]);
}

/// Makes `public/` and `public/attachments/` exist (they are created on first access).
fn touch_public(server: &Server) {
    list_files(server, &server.token, None);
    assert_owned(&public(server, "me").join("attachments"), AGENT);
}

#[test]
fn container_upload_onto_a_link_is_refused_and_chowns_nothing() {
    let server = start();
    touch_public(&server);
    let (outside, secret) = outside_root_owned();
    let link = public(&server, "me").join("x.txt");
    std::os::unix::fs::symlink(&secret, &link).unwrap();

    let (status, body) = upload(&server, &server.token, "x.txt", b"agent's now?", None);
    assert_error(status, &body, 400, "path_escapes");
    assert_outside_untouched(outside.path(), &secret);
    assert_link_to(&link, &secret);
    assert_eq!(tree(&public(&server, "me")), vec!["attachments", "x.txt"]);
    assert_no_temporaries(&server);
}

#[test]
fn container_delivery_onto_a_link_is_refused_and_chowns_nothing() {
    let server = start();
    touch_public(&server);
    let (outside, secret) = outside_root_owned();
    let attachments = public(&server, "me").join("attachments");
    let link = attachments.join("report.pdf");
    std::os::unix::fs::symlink(&secret, &link).unwrap();

    let harness = server.create_token("me", "harness");
    let peer = Peer::start(|_| Reply::ok("agent's now?"));
    let (status, body) = post_json(
        &server,
        &harness,
        "/v1/deliveries",
        &json!({"url": peer.url("/report.pdf")}),
    );
    assert_error(status, &body, 400, "path_escapes");
    assert_outside_untouched(outside.path(), &secret);
    assert_link_to(&link, &secret);
    assert_eq!(tree(&attachments), vec!["report.pdf"]);
    assert_no_temporaries(&server);
}

#[test]
fn container_delivery_into_attachments_linked_outside_is_refused_and_chowns_nothing() {
    let server = start();
    touch_public(&server);
    let (outside, secret) = outside_root_owned();
    let attachments = public(&server, "me").join("attachments");
    std::fs::remove_dir(&attachments).unwrap();
    std::os::unix::fs::symlink(outside.path(), &attachments).unwrap();

    let harness = server.create_token("me", "harness");
    let peer = Peer::start(|_| Reply::ok("agent's now?"));
    let (status, body) = post_json(
        &server,
        &harness,
        "/v1/deliveries",
        &json!({"url": peer.url("/report.pdf")}),
    );
    assert_error(status, &body, 400, "path_escapes");
    assert_outside_untouched(outside.path(), &secret);
    assert_link_to(&attachments, outside.path());
}

#[test]
fn container_mkdir_below_a_link_is_refused_and_chowns_nothing() {
    let server = start();
    touch_public(&server);
    let (outside, secret) = outside_root_owned();
    let reports = public(&server, "me").join("reports");
    std::os::unix::fs::symlink(outside.path(), &reports).unwrap();

    let (status, body) = post_json(
        &server,
        &server.token,
        "/v1/files/mkdir",
        &json!({"path": "public/reports/x"}),
    );
    assert_error(status, &body, 400, "path_escapes");
    assert_outside_untouched(outside.path(), &secret);
    assert!(!outside.path().join("x").exists());
    assert_link_to(&reports, outside.path());
}

// ---------------------------------------------------------------------------------------
// Start-up
// ---------------------------------------------------------------------------------------

/// Runs `ferry serve` on a fresh data dir holding `toml` as its ferry.toml, and returns
/// what it printed once it exited, with what the data dir holds then. A server that
/// starts (and so never exits) is killed after a deadline and fails the test.
fn serve_until_exit(toml: &str) -> (Finished, Vec<String>) {
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("ferry.toml"), toml).unwrap();
    let mut cmd = ferry_command();
    cmd.arg("serve")
        .arg("--data")
        .arg(data.path())
        .arg("--listen")
        .arg("127.0.0.1:0");
    (finish(cmd), tree(data.path()))
}

#[test]
fn container_mode_without_agent_ids_refuses_to_start() {
    for (toml, missing) in [
        (
            "[site]\nmode = \"container\"\nagent_gid = 4343\n",
            "site.agent_uid",
        ),
        (
            "[site]\nmode = \"container\"\nagent_uid = 4242\n",
            "site.agent_gid",
        ),
    ] {
        let (output, data) = serve_until_exit(toml);
        let (stdout, stderr) = (&output.stdout, &output.stderr);
        assert!(
            !output.status.success(),
            "ferry serve without {missing} exited with {}: {stdout}{stderr}",
            output.status
        );
        assert!(
            stderr.contains(missing),
            "stderr names the missing {missing}: {stderr}"
        );
        assert!(!stdout.contains("#token="), "it served: {stdout}");
        // Refused before the site was made: no workspace with the wrong owner.
        assert_eq!(data, vec!["ferry.toml"], "without {missing}");
    }
}

// ---------------------------------------------------------------------------------------
// One agent's workspace never stops the gateway for everyone
// ---------------------------------------------------------------------------------------

/// Uploads a file as the holder of `token` and finds it in their listing.
#[track_caller]
fn assert_served(server: &Server, who: &str, token: &str) {
    let (status, body) = upload(server, token, "served.txt", b"served", None);
    assert_eq!(status, 201, "{who}: {body}");
    let listing = list_files(server, token, None);
    assert!(
        support::listed_paths(&listing).contains(&"public/served.txt".to_owned()),
        "{who}: {listing}"
    );
}

#[test]
fn container_an_agent_s_memory_folder_never_stops_the_gateway() {
    let mut server = start();
    let persons = ["linked", "planted", "hardlinked"];
    let tokens: Vec<String> = persons.iter().map(|p| server.add_person(p)).collect();
    let (outside, secret) = outside_root_owned();
    let passwd = std::fs::read("/etc/passwd").unwrap();
    let data = server.data.clone();
    let memory = |person: &str| data.join("home").join(person).join("memory");

    // The agent owns its home, so it can move the root-owned memory/ aside and put a
    // link in its place...
    std::fs::remove_dir_all(memory("linked")).unwrap();
    std::os::unix::fs::symlink(outside.path(), memory("linked")).unwrap();
    // ...or a folder of its own holding a link named like the provisioned document.
    std::fs::remove_dir_all(memory("planted")).unwrap();
    std::fs::create_dir(memory("planted")).unwrap();
    let planted = memory("planted").join("FILE_DELIVERY.md");
    std::os::unix::fs::symlink("/etc/passwd", &planted).unwrap();
    std::os::unix::fs::lchown(&planted, Some(AGENT.0), Some(AGENT.1)).unwrap();
    std::os::unix::fs::chown(memory("planted"), Some(AGENT.0), Some(AGENT.1)).unwrap();
    // A document that is a second name of a file outside.
    let document = memory("hardlinked").join("FILE_DELIVERY.md");
    std::fs::remove_file(&document).unwrap();
    std::fs::hard_link(&secret, &document).unwrap();

    // `ferry site check` names all three before anything is done about them.
    let check = server.ferry(&["site", "check"]);
    let stdout = String::from_utf8_lossy(&check.stdout).into_owned();
    assert_eq!(check.status.code(), Some(1), "{stdout}");
    for line in [
        "unsafe  person linked: home/linked/memory: is a symbolic link",
        "unsafe  person planted: home/planted/memory: is owned by uid 4242, not by the service",
        "unsafe  person hardlinked: home/hardlinked/memory: FILE_DELIVERY.md has 2 names",
    ] {
        assert!(stdout.contains(line), "site check says {line:?}: {stdout}");
    }

    let logged = server.log().len();
    server.restart();
    let log = server.log()[logged..].to_owned();
    for line in [
        "person linked: workspace not provisioned: home/linked/memory is a symbolic link",
        "person planted: workspace not provisioned: home/planted/memory is owned by uid 4242",
    ] {
        assert!(log.contains(line), "the log says {line:?}: {log}");
    }
    assert!(
        !log.contains("person hardlinked: workspace not provisioned"),
        "{log}"
    );

    // Every person is served, the skipped workspaces too.
    assert_served(&server, "me", &server.token);
    for (person, token) in persons.iter().zip(&tokens) {
        assert_served(&server, person, token);
    }

    // Skipped: nothing written or handed over through what the agent planted.
    assert_outside_untouched(outside.path(), &secret);
    assert_eq!(std::fs::read("/etc/passwd").unwrap(), passwd);
    assert_owned(Path::new("/etc/passwd"), ROOT);
    assert_link_to(&memory("linked"), outside.path());
    assert_link_to(&planted, Path::new("/etc/passwd"));
    // Repaired: the second name is replaced by the shipped document, never written through.
    let meta = std::fs::symlink_metadata(&document).unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.nlink(), 1);
    assert_eq!(meta.mode() & 0o7777, 0o444);
    assert_owned(&document, ROOT);
    assert!(
        std::fs::read_to_string(&document)
            .unwrap()
            .contains("public/attachments/")
    );

    // What is left for the operator is named; the repaired workspace is not.
    let check = server.ferry(&["site", "check"]);
    let stdout = String::from_utf8_lossy(&check.stdout).into_owned();
    assert_eq!(check.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("person linked: home/linked/memory"),
        "{stdout}"
    );
    assert!(
        stdout.contains("person planted: home/planted/memory"),
        "{stdout}"
    );
    assert!(!stdout.contains("hardlinked"), "{stdout}");
    assert!(stdout.contains("2 unsafe place(s)"), "{stdout}");
}

#[test]
fn container_a_project_whose_folder_is_a_link_is_refused_and_never_listed() {
    let server = start();
    touch_public(&server);
    let (outside, secret) = outside_root_owned();
    let projects = server.home("me").join("projects");
    let listed = || {
        let (status, body) = support::get_json(&server.url("/v1/projects"), &server.token);
        assert_eq!(status, 200, "{body}");
        body["projects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let refused = |id: &str| {
        let (status, body) = post_json(&server, &server.token, "/v1/projects", &json!({"id": id}));
        assert_error(status, &body, 400, "path_escapes");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("home/me/projects/{id}"))
                && message.contains("symbolic link"),
            "{message}"
        );
        let cli = server.ferry(&["project", "add", "me", &format!("{id}-cli")]);
        assert!(!cli.status.success(), "{cli:?}");
        let stderr = String::from_utf8_lossy(&cli.stderr);
        assert!(stderr.contains("symbolic link"), "{stderr}");
    };

    // projects/ itself a link.
    std::os::unix::fs::symlink(outside.path(), &projects).unwrap();
    refused("p1");
    assert_eq!(listed(), Vec::<String>::new());
    assert_outside_untouched(outside.path(), &secret);

    // projects/ a real folder, one project's folder a link.
    std::fs::remove_file(&projects).unwrap();
    create_project(&server, &server.token, "ok");
    std::os::unix::fs::symlink(outside.path(), projects.join("p2")).unwrap();
    std::os::unix::fs::symlink(outside.path(), projects.join("p2-cli")).unwrap();
    refused("p2");
    assert_eq!(listed(), vec!["ok"]);
    assert_outside_untouched(outside.path(), &secret);

    // Once the link is gone, the same id can be made.
    std::fs::remove_file(projects.join("p2")).unwrap();
    create_project(&server, &server.token, "p2");
    assert_eq!(listed(), vec!["ok", "p2"]);
    assert_owned(&projects.join("p2/public"), AGENT);
}

#[test]
fn a_delete_goes_to_the_trash_and_comes_back_with_its_owner() {
    let server = start();
    let token = &server.token;
    let public = server.home("me").join("public");
    assert_eq!(upload(&server, token, "a.txt", b"agent's", None).0, 201);
    assert_owned(&public.join("a.txt"), AGENT);
    let response = support::client()
        .delete(server.url("/v1/files?path=public/a.txt"))
        .bearer_auth(token)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 204);
    let id = response.headers()["ferry-trash-id"]
        .to_str()
        .unwrap()
        .to_owned();
    // The trash folder is the service's (the agent's containers never see it); the entry
    // keeps the agent's ownership while it waits there.
    let trash = server.data.join("private/trash/me");
    assert_owned(&trash, ROOT);
    assert_owned(&trash.join(&id), AGENT);
    let (status, body) = post_json(
        &server,
        token,
        &format!("/v1/trash/{id}/restore"),
        &json!({}),
    );
    assert_eq!(status, 200, "{body}");
    assert_owned(&public.join("a.txt"), AGENT);
    assert_eq!(std::fs::read(public.join("a.txt")).unwrap(), b"agent's");
}
