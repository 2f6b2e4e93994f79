//! Container mode (spec core C-SITE modes, C-PATH): the gateway runs as root and hands
//! every file and folder it writes into a workspace to the agent's uid:gid, by
//! descriptor, never through a link.
//!
//! These tests change file owners, so they must run as root (CI does). They do not skip
//! when they are not: each fails with a message saying so.

mod support;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use reqwest::blocking::multipart::{Form, Part};
use serde_json::{Value, json};
use support::{Options, Peer, Reply, Server, client, error_code, ferry_bin, tree};

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

/// `POST /v1/media` with one file and an optional project field.
fn upload(
    server: &Server,
    token: &str,
    name: &str,
    bytes: &[u8],
    project: Option<&str>,
) -> (u16, Value) {
    let mut form = Form::new().part(
        "file",
        Part::bytes(bytes.to_vec()).file_name(name.to_owned()),
    );
    if let Some(project) = project {
        form = form.text("project", project.to_owned());
    }
    let response = client()
        .post(server.url("/v1/media"))
        .bearer_auth(token)
        .multipart(form)
        .send()
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().unwrap())
}

/// `POST` of a JSON body with `token`.
fn post(server: &Server, token: &str, path: &str, body: Value) -> (u16, Value) {
    let response = client()
        .post(server.url(path))
        .bearer_auth(token)
        .json(&body)
        .send()
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().unwrap())
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
    let (status, body) = post(
        &server,
        &harness,
        "/v1/deliveries",
        json!({"url": peer.url("/report.pdf")}),
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
        let (status, body) = post(
            &server,
            &server.token,
            "/v1/files/mkdir",
            json!({ "path": path }),
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
    let (status, body) = post(&server, &server.token, "/v1/projects", json!({"id": "p1"}));
    assert_eq!(status, 201, "{body}");
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
    let (status, body) = post(
        &server,
        &harness,
        "/v1/deliveries",
        json!({"url": peer.url("/out.txt"), "project": "p1"}),
    );
    assert_eq!(status, 201, "{body}");
    assert_owned(&project.join("public/attachments/out.txt"), AGENT);
}
