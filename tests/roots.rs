//! Roots that are symbolic links (core C-PATH): a workspace folder, a project's folder,
//! `public/`, or a shared folder replaced by a link to a folder outside the site. The
//! member API refuses it and touches nothing outside, every other person is served,
//! `ferry serve` logs each such root at start, and `ferry site check` names it.

mod support;

use std::path::Path;

use reqwest::blocking::multipart::{Form, Part};
use support::{
    Server, assert_error, client, create_project, json_answer, list_files, listed_paths, post_json,
    tree, upload,
};

/// What the files outside the site hold.
const SECRET: &str = "outside the site";

/// A folder outside the site holding `secret.txt` and `public/secret.txt`: what a link
/// planted at a workspace folder or at its `public/` would expose.
fn outside() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("secret.txt"), SECRET).unwrap();
    std::fs::create_dir(dir.path().join("public")).unwrap();
    std::fs::write(dir.path().join("public/secret.txt"), SECRET).unwrap();
    dir
}

#[track_caller]
fn assert_outside_untouched(dir: &Path) {
    assert_eq!(
        tree(dir),
        vec!["public", "public/secret.txt", "secret.txt"],
        "nothing was written outside"
    );
    for file in ["secret.txt", "public/secret.txt"] {
        assert_eq!(std::fs::read_to_string(dir.join(file)).unwrap(), SECRET);
    }
}

/// Replaces the folder `rel` of the site with a link to `target`.
fn link(server: &Server, rel: &str, target: &Path) {
    let path = server.data.join(rel);
    std::fs::remove_dir_all(&path).unwrap();
    std::os::unix::fs::symlink(target, &path).unwrap();
}

fn upload_with_project(
    server: &Server,
    token: &str,
    project: Option<&str>,
) -> (u16, serde_json::Value) {
    upload(server, token, "note.txt", b"a member's note", project)
}

#[test]
fn member_routes_refuse_a_workspace_folder_that_is_a_link() {
    let cases = [
        ("home/bob", None),
        ("home/bob/public", None),
        ("home/bob/projects", Some("p1")),
        ("home/bob/projects/p1", Some("p1")),
        ("home/bob/projects/p1/public", Some("p1")),
    ];
    for (rel, project) in cases {
        let server = Server::start();
        let bob = server.add_person("bob");
        create_project(&server, &bob, "p1");
        list_files(&server, &bob, None);
        let outside = outside();
        link(&server, rel, outside.path());

        let mut listing = client().get(server.url("/v1/files")).bearer_auth(&bob);
        let mut download = client()
            .get(server.url("/v1/files/content"))
            .bearer_auth(&bob)
            .query(&[("path", "public/secret.txt")]);
        if let Some(project) = project {
            listing = listing.query(&[("project", project)]);
            download = download.query(&[("project", project)]);
        }
        let (status, body) = json_answer(listing.send().unwrap());
        assert_error(status, &body, 400, "path_escapes");
        // Whatever lies outside public/ does not exist for the member (M-GET).
        let (status, body) = json_answer(download.send().unwrap());
        assert_error(status, &body, 404, "not_found");
        let (status, body) = upload_with_project(&server, &bob, project);
        assert_error(status, &body, 400, "path_escapes");
        let mut mkdir = serde_json::json!({"path": "public/new"});
        if let Some(project) = project {
            mkdir["project"] = project.into();
        }
        let (status, body) = post_json(&server, &bob, "/v1/files/mkdir", &mkdir);
        assert_error(status, &body, 400, "path_escapes");
        assert_outside_untouched(outside.path());

        // Everyone else is served as before.
        let (status, body) = upload(&server, &server.token, "mine.txt", b"mine", None);
        assert_eq!(status, 201, "{rel}: {body}");
        let paths = listed_paths(&list_files(&server, &server.token, None));
        assert!(paths.contains(&"public/mine.txt".to_owned()), "{paths:?}");
    }
}

#[test]
fn a_multipart_upload_naming_a_project_whose_folder_is_a_link_is_refused() {
    // The project field may follow the file: the upload is staged, then placed.
    let server = Server::start();
    create_project(&server, &server.token, "p1");
    list_files(&server, &server.token, Some("p1"));
    let outside = outside();
    link(&server, "home/me/projects/p1/public", outside.path());
    let form = Form::new()
        .part("file", Part::bytes(b"late".to_vec()).file_name("late.txt"))
        .text("project", "p1");
    let (status, body) = json_answer(
        client()
            .post(server.url("/v1/media"))
            .bearer_auth(&server.token)
            .multipart(form)
            .send()
            .unwrap(),
    );
    assert_error(status, &body, 400, "path_escapes");
    assert_outside_untouched(outside.path());
}

#[test]
fn serve_logs_every_root_that_is_a_link_and_site_check_names_it() {
    let mut server = Server::start();
    let bob = server.add_person("bob");
    let out = server.ferry(&["circle", "add", "team", "--member", "bob"]);
    assert!(out.status.success(), "{out:?}");
    let clean = server.ferry(&["site", "check"]);
    assert!(clean.status.success(), "{clean:?}");
    assert!(
        String::from_utf8_lossy(&clean.stdout).contains("nothing unsafe"),
        "{clean:?}"
    );

    let outside = outside();
    for rel in [
        "shared/public",
        "circles/team",
        "home/bob",
        "private/people/me",
    ] {
        link(&server, rel, outside.path());
    }
    let logged_before = server.log().len();
    server.restart();
    let log = server.log()[logged_before..].to_owned();
    for line in [
        "unsafe: site: shared/public: is a symbolic link",
        "unsafe: site: circles/team: is a symbolic link",
        "unsafe: person bob: home/bob: is a symbolic link",
        "unsafe: person me: private/people/me: is a symbolic link",
        "person bob: workspace not provisioned",
    ] {
        assert!(log.contains(line), "the log says {line:?}: {log}");
    }
    // Served all the same: me's workspace, and bob is refused with a clear error.
    let (status, body) = upload(&server, &server.token, "ok.txt", b"ok", None);
    assert_eq!(status, 201, "{body}");
    let (status, body) = upload(&server, &bob, "ok.txt", b"ok", None);
    assert_error(status, &body, 400, "path_escapes");
    assert_outside_untouched(outside.path());

    let check = server.ferry(&["site", "check"]);
    let stdout = String::from_utf8_lossy(&check.stdout).into_owned();
    assert_eq!(check.status.code(), Some(1), "{stdout}");
    for line in [
        "unsafe  site: shared/public: is a symbolic link",
        "unsafe  site: circles/team: is a symbolic link",
        "unsafe  person bob: home/bob: is a symbolic link",
        "unsafe  person me: private/people/me: is a symbolic link",
        "4 unsafe place(s)",
    ] {
        assert!(stdout.contains(line), "site check says {line:?}: {stdout}");
    }
    // What lies beneath a root already named is not named again.
    assert!(!stdout.contains("home/bob/public"), "{stdout}");
    assert_outside_untouched(outside.path());

    // Replaced by real folders, the site is clean again.
    for rel in [
        "shared/public",
        "circles/team",
        "home/bob",
        "private/people/me",
    ] {
        let path = server.data.join(rel);
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
    }
    let check = server.ferry(&["site", "check"]);
    assert!(check.status.success(), "{check:?}");
}

#[test]
fn site_check_refuses_a_data_folder_that_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing-here");
    let out = support::ferry_command()
        .args(["site", "check", "--data"])
        .arg(&missing)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("there is no site"),
        "{out:?}"
    );
    assert!(!missing.exists(), "site check made nothing");
}
