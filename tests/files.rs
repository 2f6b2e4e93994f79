//! The Files panel: listing (M-LIST), downloading (M-GET), managing (M-MANAGE), with the
//! confinement rules of core C-PATH and C-ATOMIC, through the real `ferry serve`.

mod support;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use reqwest::blocking::{Client, RequestBuilder, Response};
use serde_json::{Value, json};
use support::{
    Options, Server, client, create_project, error_code, flatten_entries, is_rfc3339, listed_paths,
    tree, write_file,
};

/// The exact message of every refusal that touches `public/attachments` itself.
const MANAGED_MESSAGE: &str = "public/attachments is managed by the system";

/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0A, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE,
    0x42, 0x60, 0x82,
];

/// A server and a client, acting as the person `me` unless told otherwise.
struct Site {
    server: Server,
    http: Client,
}

/// Status and JSON body (`Null` for an empty body) of an answer.
type Answer = (u16, Value);

impl Site {
    fn start() -> Site {
        Site::start_with(Options::default())
    }

    fn start_with(options: Options) -> Site {
        let site = Site {
            server: Server::start_with(options),
            http: client(),
        };
        std::fs::create_dir_all(site.public()).unwrap();
        site
    }

    fn token(&self) -> &str {
        &self.server.token
    }

    /// `home/me`
    fn home(&self) -> PathBuf {
        self.server.home("me")
    }

    /// `home/me/public`, where the agent writes too.
    fn public(&self) -> PathBuf {
        self.home().join("public")
    }

    /// `home/me/projects/<p>/public`
    fn project_public(&self, project: &str) -> PathBuf {
        self.home().join("projects").join(project).join("public")
    }

    fn get(&self, route: &str) -> RequestBuilder {
        self.http.get(self.server.url(route))
    }

    fn list_as(&self, token: &str, project: Option<&str>) -> Answer {
        let mut request = self.get("/v1/files").bearer_auth(token);
        if let Some(project) = project {
            request = request.query(&[("project", project)]);
        }
        answer(request.send().unwrap())
    }

    /// The listing of the main workspace, which must succeed.
    fn list(&self) -> Value {
        let (status, body) = self.list_as(self.token(), None);
        assert_eq!(status, 200, "listing: {body}");
        body
    }

    /// `GET /v1/files/content?path=<path>` (the path encoded as a query value).
    fn content(&self, path: &str) -> RequestBuilder {
        self.get("/v1/files/content")
            .bearer_auth(self.token())
            .query(&[("path", path)])
    }

    /// `GET /v1/files/content?<raw query>`, the query sent exactly as written.
    fn content_raw(&self, raw_query: &str) -> Response {
        self.get(&format!("/v1/files/content?{raw_query}"))
            .bearer_auth(self.token())
            .send()
            .unwrap()
    }

    fn post_json_as(&self, token: &str, route: &str, body: &Value) -> Answer {
        answer(
            self.http
                .post(self.server.url(route))
                .bearer_auth(token)
                .json(body)
                .send()
                .unwrap(),
        )
    }

    fn mkdir(&self, path: &str) -> Answer {
        self.post_json_as(self.token(), "/v1/files/mkdir", &json!({ "path": path }))
    }

    fn mv(&self, from: &str, to: &str) -> Answer {
        self.post_json_as(
            self.token(),
            "/v1/files/move",
            &json!({ "from": from, "to": to }),
        )
    }

    fn delete_as(&self, token: &str, path: &str, project: Option<&str>) -> Answer {
        let mut request = self
            .http
            .delete(self.server.url("/v1/files"))
            .bearer_auth(token)
            .query(&[("path", path)]);
        if let Some(project) = project {
            request = request.query(&[("project", project)]);
        }
        answer(request.send().unwrap())
    }

    fn delete(&self, path: &str) -> Answer {
        self.delete_as(self.token(), path, None)
    }

    /// `DELETE /v1/files?<raw query>`, the query sent exactly as written.
    fn delete_raw(&self, raw_query: &str) -> Answer {
        answer(
            self.http
                .delete(self.server.url(&format!("/v1/files?{raw_query}")))
                .bearer_auth(self.token())
                .send()
                .unwrap(),
        )
    }

    fn create_project(&self, id: &str) {
        create_project(&self.server, self.token(), id);
    }

    /// Ends a test: whatever it sent, the gateway is still up.
    fn finish(mut self) {
        assert!(
            self.server.is_running(),
            "the server died; log:\n{}",
            self.server.log()
        );
        let (status, _) = self.list_as(&self.server.token.clone(), None);
        assert_eq!(status, 200);
    }
}

/// Status and JSON body of a response; an error body must be JSON.
fn answer(response: Response) -> Answer {
    let status = response.status().as_u16();
    let text = response.text().unwrap();
    if text.is_empty() {
        return (status, Value::Null);
    }
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("status {status}: body is not JSON ({e}): {text:?}"));
    (status, body)
}

/// Asserts an error answer: status, `error.code` and a message.
#[track_caller]
fn assert_error(got: &Answer, status: u16, code: &str, what: &str) {
    assert_eq!(got.0, status, "{what}: status; body {}", got.1);
    assert_eq!(error_code(&got.1), code, "{what}: code; body {}", got.1);
    assert!(
        got.1["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{what}: an error has a message: {}",
        got.1
    );
}

/// Asserts a JSON error answer of some 4xx status (never 500).
#[track_caller]
fn assert_client_error(got: &Answer, what: &str) {
    assert!(
        (400..500).contains(&got.0),
        "{what}: status {} body {}",
        got.0,
        got.1
    );
    assert_ne!(error_code(&got.1), "<no error code>", "{what}: {}", got.1);
}

/// The 403 for anything done to `public/attachments` itself.
#[track_caller]
fn assert_managed(got: &Answer, what: &str) {
    assert_error(got, 403, "managed_by_system", what);
    assert_eq!(got.1["error"]["message"], MANAGED_MESSAGE, "{what}");
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// The entry at `path` in a listing.
fn find<'a>(listing: &'a Value, path: &str) -> &'a Value {
    flatten_entries(&listing["entries"])
        .into_iter()
        .find(|e| e["path"] == path)
        .unwrap_or_else(|| panic!("{path} not listed in {listing}"))
}

fn names(entries: &Value) -> Vec<&str> {
    entries
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect()
}

fn header<'a>(response: &'a Response, name: &str) -> &'a str {
    response
        .headers()
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

/// Decodes `%XX` escapes (for `filename*`).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// The decoded `filename*=UTF-8''…` of a `Content-Disposition`.
fn disposition_name(disposition: &str) -> String {
    let (_, rest) = disposition
        .split_once("filename*=UTF-8''")
        .unwrap_or_else(|| panic!("no filename* in {disposition:?}"));
    let encoded = rest.split(';').next().unwrap().trim();
    assert!(
        encoded
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~%".contains(&b)),
        "filename* holds only attr-chars and escapes: {encoded:?}"
    );
    percent_decode(encoded)
}

/// A path of exactly `len` bytes under `public/`, of short components, naming nothing.
fn long_path(len: usize) -> String {
    let mut path = String::from("public");
    while path.len() + 101 <= len {
        path.push('/');
        path.push_str(&"d".repeat(100));
    }
    let rest = len - path.len();
    if rest > 0 {
        path.push('/');
        path.push_str(&"f".repeat(rest - 1));
    }
    assert_eq!(path.len(), len);
    path
}

/// Files outside `public/` that no request may reach; returns their paths and bytes.
fn plant_sentinels(site: &Site) -> Vec<(PathBuf, String)> {
    let sentinels = vec![
        (site.home().join("secret.txt"), "home secret".to_owned()),
        (site.home().join("x"), "home x".to_owned()),
        (
            site.home().join("notes").join("plan.md"),
            "home plan".to_owned(),
        ),
        (
            site.server.data.join("private/people/me/tmp/t1/draft.txt"),
            "draft".to_owned(),
        ),
        (site.server.data.join("outside.txt"), "site root".to_owned()),
    ];
    for (path, bytes) in &sentinels {
        write_file(path, bytes);
    }
    sentinels
}

#[track_caller]
fn assert_sentinels(sentinels: &[(PathBuf, String)]) {
    for (path, bytes) in sentinels {
        assert_eq!(
            std::fs::read_to_string(path).ok().as_deref(),
            Some(bytes.as_str()),
            "{} survives",
            path.display()
        );
    }
}

// ---------------------------------------------------------------------------------------
// M-LIST
// ---------------------------------------------------------------------------------------

#[test]
fn list_nested_tree_folders_first_then_by_name() {
    let site = Site::start();
    let public = site.public();
    let when = UNIX_EPOCH + Duration::from_secs(1_796_032_800); // 2026-11-30T10:00:00Z
    for (rel, bytes) in [
        ("notes.md", "0123456789"),
        ("zeta.txt", "z"),
        ("beta/inner.txt", "inner"),
        ("alpha/deep/deeper/leaf.txt", "leaf!"),
        ("alpha/b.txt", "bb"),
        ("alpha/a.txt", "a"),
        ("attachments/report.pdf", "%PDF-1.4 report"),
        ("empty.txt", ""),
    ] {
        write_file(&public.join(rel), bytes);
    }
    std::fs::create_dir(public.join("alpha/zz_empty_dir")).unwrap();
    std::fs::File::options()
        .write(true)
        .open(public.join("notes.md"))
        .unwrap()
        .set_modified(when)
        .unwrap();

    let listing = site.list();
    assert_eq!(listing["root"], "public");
    assert_eq!(listing["project"], Value::Null);
    assert!(listing.get("truncated").is_none(), "{listing}");
    let top = &listing["entries"];
    assert_eq!(
        names(top),
        [
            "alpha",
            "attachments",
            "beta",
            "empty.txt",
            "notes.md",
            "zeta.txt"
        ]
    );
    let alpha = find(&listing, "public/alpha");
    assert_eq!(alpha["type"], "dir");
    assert!(alpha.get("size").is_none());
    assert_eq!(
        names(&alpha["children"]),
        ["deep", "zz_empty_dir", "a.txt", "b.txt"]
    );
    assert_eq!(
        find(&listing, "public/alpha/zz_empty_dir")["children"],
        json!([])
    );
    let leaf = find(&listing, "public/alpha/deep/deeper/leaf.txt");
    assert_eq!(leaf["name"], "leaf.txt");
    assert_eq!(leaf["type"], "file");
    assert_eq!(leaf["size"], 5);

    let attachments = &top[1];
    assert_eq!(attachments["path"], "public/attachments");
    assert_eq!(attachments["type"], "dir");
    assert_eq!(attachments["managed"], true);
    assert_eq!(
        attachments["children"][0]["path"],
        "public/attachments/report.pdf"
    );
    assert_eq!(attachments["children"][0]["size"], 15);
    for entry in flatten_entries(top) {
        if entry["path"] != "public/attachments" {
            assert!(
                entry.get("managed").is_none() || entry["managed"] == false,
                "only attachments/ is managed: {entry}"
            );
        }
        let mtime = entry["mtime"].as_str().unwrap();
        assert!(is_rfc3339(mtime) && mtime.ends_with('Z'), "{mtime}");
    }

    let notes = find(&listing, "public/notes.md");
    assert_eq!(notes["size"], 10);
    assert_eq!(notes["mtime"], "2026-11-30T10:00:00Z");
    assert_eq!(find(&listing, "public/empty.txt")["size"], 0);
    assert_eq!(listed_paths(&listing).len(), 14);
    site.finish();
}

/// The agent may put anything at `public/attachments`: it is listed as it is, never
/// followed, and the rest of the Files panel keeps working.
#[test]
fn list_with_attachments_replaced_by_a_link_or_a_file() {
    let site = Site::start();
    let public = site.public();
    let outside = tempfile::tempdir().unwrap();
    write_file(&outside.path().join("o.txt"), "outside");
    write_file(&public.join("a.txt"), "A");
    site.list();
    std::fs::remove_dir_all(public.join("attachments")).unwrap();
    symlink(outside.path(), public.join("attachments")).unwrap();
    let before = tree(outside.path());

    let listing = site.list();
    assert_eq!(
        listed_paths(&listing),
        ["public/a.txt", "public/attachments"]
    );
    let attachments = find(&listing, "public/attachments");
    assert_eq!(attachments["type"], "link");
    assert!(attachments.get("children").is_none());
    assert!(!listing.to_string().contains("o.txt"), "{listing}");
    let response = site.content("public/a.txt").send().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().unwrap(), "A");
    let got = answer(site.content("public/attachments/o.txt").send().unwrap());
    assert_error(&got, 404, "not_found", "through the link");
    assert_error(
        &site.mkdir("public/attachments/x"),
        400,
        "path_escapes",
        "mkdir through the link",
    );
    assert_error(
        &site.mv("public/a.txt", "public/attachments/a.txt"),
        400,
        "path_escapes",
        "move through the link",
    );
    assert_error(
        &site.delete("public/attachments/o.txt"),
        400,
        "path_escapes",
        "delete through the link",
    );
    assert_managed(&site.delete("public/attachments"), "delete the link");
    assert_eq!(tree(outside.path()), before);
    assert_eq!(read(&public.join("a.txt")), "A");

    std::fs::remove_file(public.join("attachments")).unwrap();
    write_file(&public.join("attachments"), "a file");
    let listing = site.list();
    assert_eq!(find(&listing, "public/attachments")["type"], "file");
    assert_eq!(read(&public.join("attachments")), "a file");

    std::fs::remove_file(public.join("attachments")).unwrap();
    let listing = site.list();
    assert_eq!(find(&listing, "public/attachments")["managed"], true);
    site.finish();
}

#[test]
fn list_creates_attachments_on_first_access() {
    let site = Site::start();
    let public = site.public();
    let _ = std::fs::remove_dir_all(public.join("attachments"));
    write_file(&public.join("a.txt"), "a");
    assert!(!public.join("attachments").exists());

    let listing = site.list();
    assert!(public.join("attachments").is_dir(), "created on disk");
    assert_eq!(listing["entries"][0]["path"], "public/attachments");
    assert_eq!(listing["entries"][0]["managed"], true);
    assert_eq!(listing["entries"][0]["children"], json!([]));

    // A project's own public/ and attachments/ likewise.
    site.create_project("q2");
    let q2 = site.project_public("q2");
    let _ = std::fs::remove_dir_all(q2.join("attachments"));
    assert!(!q2.join("attachments").exists());
    let (status, listing) = site.list_as(site.token(), Some("q2"));
    assert_eq!(status, 200, "{listing}");
    assert_eq!(listing["entries"][0]["path"], "public/attachments");
    assert_eq!(listing["entries"][0]["managed"], true);
    assert!(q2.join("attachments").is_dir());

    // Even a workspace whose public/ is gone entirely.
    std::fs::remove_dir_all(&public).unwrap();
    let listing = site.list();
    assert_eq!(listed_paths(&listing), ["public/attachments"]);
    assert!(public.join("attachments").is_dir());
    site.finish();
}

#[test]
fn list_shows_links_and_never_follows_them() {
    let site = Site::start();
    let public = site.public();
    let outside = tempfile::tempdir().unwrap();
    write_file(&outside.path().join("outside-secret.txt"), "outside");
    write_file(&outside.path().join("nested/outside-deep.txt"), "deep");
    write_file(&site.home().join("home-secret.txt"), "home");
    write_file(&public.join("real/inside.txt"), "inside");

    symlink(outside.path(), public.join("to-outside-dir")).unwrap();
    symlink(
        outside.path().join("outside-secret.txt"),
        public.join("to-outside-file"),
    )
    .unwrap();
    symlink("../home-secret.txt", public.join("to-home-file")).unwrap();
    symlink("..", public.join("to-home-dir")).unwrap();
    symlink("real", public.join("to-real-dir")).unwrap();
    symlink("dangling-target", public.join("dangling")).unwrap();

    let listing = site.list();
    let text = listing.to_string();
    for name in [
        "to-outside-dir",
        "to-outside-file",
        "to-home-file",
        "to-home-dir",
        "to-real-dir",
        "dangling",
    ] {
        let entry = find(&listing, &format!("public/{name}"));
        assert_eq!(entry["type"], "link", "{entry}");
        assert!(
            entry.get("children").is_none(),
            "a link has no children: {entry}"
        );
    }
    // Links sort with the files, after the folders.
    assert_eq!(
        names(&listing["entries"]),
        [
            "attachments",
            "real",
            "dangling",
            "to-home-dir",
            "to-home-file",
            "to-outside-dir",
            "to-outside-file",
            "to-real-dir"
        ]
    );
    for leaked in [
        "outside-secret",
        "outside-deep",
        "nested",
        "home-secret",
        "projects",
        "public/to-real-dir/",
    ] {
        assert!(!text.contains(leaked), "{leaked} leaked into {text}");
    }
    assert_eq!(
        listed_paths(&listing),
        [
            "public/attachments",
            "public/real",
            "public/real/inside.txt",
            "public/dangling",
            "public/to-home-dir",
            "public/to-home-file",
            "public/to-outside-dir",
            "public/to-outside-file",
            "public/to-real-dir"
        ]
    );
    site.finish();
}

#[test]
fn list_shows_nothing_outside_public() {
    let site = Site::start();
    let public = site.public();
    write_file(&public.join("mine.txt"), "mine");
    write_file(&site.home().join("beside-public.txt"), "no");
    write_file(&site.home().join("work/draft.md"), "no");
    write_file(&site.home().join(".bashrc"), "no");
    write_file(
        &site
            .server
            .data
            .join("private/people/me/artifacts/a/out.txt"),
        "no",
    );
    write_file(&site.server.data.join("shared/public/team.txt"), "no");

    let listing = site.list();
    assert_eq!(
        listed_paths(&listing),
        ["public/attachments", "public/mine.txt"]
    );
    for leaked in [
        "beside-public",
        "draft",
        "bashrc",
        "out.txt",
        "team.txt",
        "work",
    ] {
        assert!(!listing.to_string().contains(leaked), "{leaked}");
    }

    // public/ itself replaced by a link to elsewhere: the listing never shows what is there.
    let elsewhere = site.home().join("work");
    std::fs::remove_dir_all(&public).unwrap();
    symlink(&elsewhere, &public).unwrap();
    let got = site.list_as(site.token(), None);
    if got.0 == 200 {
        assert!(!got.1.to_string().contains("draft"), "{}", got.1);
    } else {
        assert_client_error(&got, "listing through a linked public/");
    }
    assert!(
        !elsewhere.join("attachments").exists(),
        "nothing created through the link"
    );
    std::fs::remove_file(&public).unwrap();
    std::fs::create_dir(&public).unwrap();
    site.finish();
}

#[test]
fn list_hides_temporaries() {
    let site = Site::start();
    let public = site.public();
    write_file(&public.join("kept.txt"), "k");
    write_file(&public.join(".ferry-tmp-abc123"), "partial");
    write_file(&public.join("attachments/.ferry-tmp-zz9"), "partial");
    write_file(&public.join("sub/.ferry-tmp-q"), "partial");
    write_file(&public.join("sub/real.txt"), "r");

    let listing = site.list();
    assert!(!listing.to_string().contains(".ferry-tmp-"), "{listing}");
    assert_eq!(
        listed_paths(&listing),
        [
            "public/attachments",
            "public/sub",
            "public/sub/real.txt",
            "public/kept.txt"
        ]
    );
    site.finish();
}

#[test]
fn list_of_a_project_shows_only_its_own_files() {
    let site = Site::start();
    site.create_project("q2");
    write_file(&site.public().join("main-only.txt"), "main");
    write_file(&site.project_public("q2").join("q2-only.txt"), "q2");
    write_file(
        &site.project_public("q2").join("attachments/q2-report.pdf"),
        "pdf",
    );

    let (status, listing) = site.list_as(site.token(), Some("q2"));
    assert_eq!(status, 200, "{listing}");
    assert_eq!(listing["root"], "public");
    assert_eq!(listing["project"], "q2");
    assert_eq!(
        listed_paths(&listing),
        [
            "public/attachments",
            "public/attachments/q2-report.pdf",
            "public/q2-only.txt"
        ]
    );
    assert_eq!(listing["entries"][0]["managed"], true);

    let main = site.list();
    assert_eq!(
        listed_paths(&main),
        ["public/attachments", "public/main-only.txt"]
    );
    assert!(!main.to_string().contains("q2"), "{main}");

    let (status, projects) = answer(
        site.get("/v1/projects")
            .bearer_auth(site.token())
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200);
    let list = projects["projects"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{projects}");
    assert_eq!(list[0]["id"], "q2");
    let created = list[0]["created"].as_str().unwrap();
    assert!(is_rfc3339(created) && created.ends_with('Z'), "{projects}");

    // A download within the project, and not from the main workspace.
    let response = site
        .content("public/q2-only.txt")
        .query(&[("project", "q2")])
        .send()
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().unwrap(), "q2");
    let got = answer(site.content("public/q2-only.txt").send().unwrap());
    assert_error(
        &got,
        404,
        "not_found",
        "a project file from the main workspace",
    );

    let got = site.list_as(site.token(), Some("nope"));
    assert_error(&got, 404, "unknown_project", "an unknown project");
    site.finish();
}

#[test]
fn list_caps_at_ten_thousand_entries() {
    let site = Site::start();
    let public = site.public();
    // Nested entries count: attachments/ (always there) and 10 files in it, bulk/ and its files.
    std::fs::create_dir_all(public.join("attachments")).unwrap();
    for i in 0..10 {
        write_file(&public.join(format!("attachments/a{i:02}.txt")), "");
    }
    std::fs::create_dir_all(public.join("bulk")).unwrap();
    let bulk = 9_999 - 12;
    for i in 0..bulk {
        std::fs::write(public.join(format!("bulk/f{i:05}.txt")), "").unwrap();
    }

    for (total, truncated) in [(9_999, false), (10_000, false), (10_001, true)] {
        if total > 9_999 {
            std::fs::write(public.join(format!("top{total}.txt")), "").unwrap();
        }
        let listing = site.list();
        let count = listed_paths(&listing).len();
        if truncated {
            assert_eq!(listing["truncated"], true, "{total} entries");
            assert_eq!(count, 10_000, "{total} entries: at most 10,000 returned");
            // The cut falls on the deepest entries: every top-level one is still shown.
            let paths = listed_paths(&listing);
            for top in [
                "public/attachments",
                "public/bulk",
                "public/top10000.txt",
                "public/top10001.txt",
            ] {
                assert!(paths.iter().any(|p| p == top), "{top} is hidden by the cut");
            }
        } else {
            assert!(
                listing.get("truncated").is_none(),
                "{total} entries: not truncated"
            );
            assert_eq!(count, total);
        }
    }
    site.finish();
}

// ---------------------------------------------------------------------------------------
// M-GET
// ---------------------------------------------------------------------------------------

#[test]
fn get_returns_bytes_with_attachment_disposition() {
    let site = Site::start();
    let public = site.public();
    let names = [
        "plain.txt",
        "relatório.pdf",
        "日本語 ファイル.md",
        "my \"quoted\" file.txt",
        "it's; a=b,c.txt",
    ];
    for (i, name) in names.iter().enumerate() {
        write_file(&public.join("docs").join(name), format!("content {i}"));
    }
    for (i, name) in names.iter().enumerate() {
        let response = site.content(&format!("public/docs/{name}")).send().unwrap();
        assert_eq!(response.status(), 200, "{name}");
        let disposition = header(&response, "content-disposition").to_owned();
        assert!(disposition.starts_with("attachment;"), "{disposition}");
        assert!(!disposition.contains(['\r', '\n']));
        assert_eq!(disposition_name(&disposition), *name, "{disposition}");
        // An ASCII fallback, if any, is one well-formed quoted string.
        if let Some((_, fallback)) = disposition.split_once("filename=\"") {
            let end = fallback.find('"').expect("closing quote");
            assert!(fallback[end + 1..].starts_with(';'), "{disposition}");
        }
        assert_eq!(header(&response, "x-content-type-options"), "nosniff");
        assert_eq!(response.text().unwrap(), format!("content {i}"));
    }
    let response = site.content("public/docs/relatório.pdf").send().unwrap();
    assert!(
        header(&response, "content-disposition").contains("filename*=UTF-8''relat%C3%B3rio.pdf")
    );
    let response = site
        .content("public/docs/my \"quoted\" file.txt")
        .send()
        .unwrap();
    assert!(
        header(&response, "content-disposition")
            .contains("filename*=UTF-8''my%20%22quoted%22%20file.txt")
    );
    // Raw bytes come back exactly.
    let bytes: Vec<u8> = (0..=255u8).cycle().take(200_000).collect();
    write_file(&public.join("attachments/blob.bin"), &bytes);
    let response = site.content("public/attachments/blob.bin").send().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-length"), "200000");
    assert_eq!(response.bytes().unwrap().as_ref(), bytes.as_slice());
    site.finish();
}

#[test]
fn get_sniffs_the_content_type_from_the_bytes() {
    let site = Site::start();
    let public = site.public();
    write_file(&public.join("photo.txt"), PNG);
    write_file(&public.join("image.png"), PNG);
    write_file(
        &public.join("notes.png"),
        "just some plain text, honestly\n",
    );
    write_file(&public.join("readme.txt"), "hello world\n");

    for (name, expected) in [
        ("photo.txt", "image/png"),
        ("image.png", "image/png"),
        ("notes.png", "text/plain"),
        ("readme.txt", "text/plain"),
    ] {
        let response = site.content(&format!("public/{name}")).send().unwrap();
        assert_eq!(response.status(), 200, "{name}");
        let content_type = header(&response, "content-type");
        assert!(
            content_type.split(';').next().unwrap().trim() == expected,
            "{name}: {content_type}"
        );
        assert_eq!(header(&response, "x-content-type-options"), "nosniff");
    }
    let response = site.content("public/photo.txt").send().unwrap();
    assert_eq!(response.bytes().unwrap().as_ref(), PNG);
    site.finish();
}

#[test]
fn get_etag_and_if_none_match() {
    let site = Site::start();
    let path = site.public().join("e.txt");
    write_file(&path, "0123456789");
    let response = site.content("public/e.txt").send().unwrap();
    assert_eq!(response.status(), 200);
    let etag = header(&response, "etag").to_owned();
    assert!(
        etag.len() > 2 && etag.starts_with('"') && etag.ends_with('"'),
        "{etag}"
    );
    drop(response);

    let again = site.content("public/e.txt").send().unwrap();
    assert_eq!(header(&again, "etag"), etag, "stable");
    drop(again);

    for value in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"other\", {etag}"),
        "*".to_owned(),
    ] {
        let response = site
            .content("public/e.txt")
            .header("if-none-match", &value)
            .send()
            .unwrap();
        assert_eq!(response.status(), 304, "If-None-Match: {value}");
        assert_eq!(header(&response, "etag"), etag);
        assert!(response.bytes().unwrap().is_empty());
    }
    let response = site
        .content("public/e.txt")
        .header("if-none-match", "\"something-else\"")
        .send()
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().unwrap(), "0123456789");

    // A changed file has a new tag; the old one no longer gets a 304.
    write_file(&path, "a longer replacement");
    let response = site
        .content("public/e.txt")
        .header("if-none-match", &etag)
        .send()
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_ne!(header(&response, "etag"), etag);
    assert_eq!(response.text().unwrap(), "a longer replacement");
    site.finish();
}

#[test]
fn get_ranges() {
    let site = Site::start();
    let path = site.public().join("r.txt");
    write_file(&path, "0123456789");
    let range = |value: &str| {
        site.content("public/r.txt")
            .header("range", value)
            .send()
            .unwrap()
    };
    for (value, content_range, body) in [
        ("bytes=0-3", "bytes 0-3/10", "0123"),
        ("bytes=-2", "bytes 8-9/10", "89"),
        ("bytes=5-", "bytes 5-9/10", "56789"),
        ("bytes=9-100", "bytes 9-9/10", "9"),
    ] {
        let response = range(value);
        assert_eq!(response.status(), 206, "{value}");
        assert_eq!(header(&response, "content-range"), content_range, "{value}");
        assert_eq!(header(&response, "content-length"), body.len().to_string());
        assert_eq!(response.text().unwrap(), body, "{value}");
    }
    for value in ["bytes=10-", "bytes=100-200"] {
        let response = range(value);
        assert_eq!(response.status(), 416, "{value}");
        assert_eq!(header(&response, "content-range"), "bytes */10");
    }

    let etag = header(&site.content("public/r.txt").send().unwrap(), "etag").to_owned();
    let response = site
        .content("public/r.txt")
        .header("range", "bytes=0-3")
        .header("if-range", &etag)
        .send()
        .unwrap();
    assert_eq!(response.status(), 206, "If-Range with the current tag");
    assert_eq!(response.text().unwrap(), "0123");
    let response = site
        .content("public/r.txt")
        .header("range", "bytes=0-3")
        .header("if-range", "\"stale\"")
        .send()
        .unwrap();
    assert_eq!(
        response.status(),
        200,
        "If-Range with a stale tag: the whole file"
    );
    assert!(response.headers().get("content-range").is_none());
    assert_eq!(response.text().unwrap(), "0123456789");

    // The file changed since the client saw it: its old tag gets the whole new file.
    write_file(&path, "abcdefghijklmnop");
    let response = site
        .content("public/r.txt")
        .header("range", "bytes=0-3")
        .header("if-range", &etag)
        .send()
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().unwrap(), "abcdefghijklmnop");
    site.finish();
}

#[test]
fn get_a_directory_is_is_directory() {
    let site = Site::start();
    write_file(&site.public().join("folder/f.txt"), "f");
    for path in [
        "public/folder",
        "public/folder/",
        "public/attachments",
        "public",
        "public/",
    ] {
        let got = answer(site.content(path).send().unwrap());
        assert_error(&got, 400, "is_directory", path);
    }
    site.finish();
}

#[test]
fn get_outside_public_is_not_found() {
    let site = Site::start();
    let sentinels = plant_sentinels(&site);
    for path in [
        "home/me/secret.txt",
        "secret.txt",
        "x",
        "notes/plan.md",
        "private/people/me/tmp/t1/draft.txt",
        "outside.txt",
        "publicx/secret.txt",
        "public/missing.txt",
        "/etc/passwd",
        "public/../secret.txt",
    ] {
        let got = answer(site.content(path).send().unwrap());
        assert_error(&got, 404, "not_found", path);
        assert!(!got.1.to_string().contains("secret"), "{}", got.1);
    }
    assert_sentinels(&sentinels);
    site.finish();
}

#[test]
fn get_through_symlinks_stays_beneath_public() {
    let site = Site::start();
    let sentinels = plant_sentinels(&site);
    let public = site.public();
    let outside = tempfile::tempdir().unwrap();
    write_file(&outside.path().join("far.txt"), "far away bytes");
    write_file(&public.join("real.txt"), "real bytes");
    write_file(&public.join("sub/deeper.txt"), "deeper bytes");

    symlink("../secret.txt", public.join("rel-out.txt")).unwrap();
    symlink(site.home().join("secret.txt"), public.join("abs-out.txt")).unwrap();
    symlink(outside.path().join("far.txt"), public.join("far.txt")).unwrap();
    symlink(outside.path(), public.join("far-dir")).unwrap();
    symlink("..", public.join("up")).unwrap();
    symlink("../../secret.txt", public.join("sub/sneaky.txt")).unwrap();
    symlink("loop.txt", public.join("loop.txt")).unwrap();
    for (path, what) in [
        ("public/rel-out.txt", "relative link out"),
        ("public/abs-out.txt", "absolute link out"),
        ("public/far.txt", "link to another tree"),
        ("public/far-dir/far.txt", "through a linked folder"),
        ("public/up/secret.txt", "through a link to the parent"),
        ("public/sub/sneaky.txt", "nested link out"),
        ("public/loop.txt", "a link loop"),
    ] {
        let response = site.content(path).send().unwrap();
        let got = answer(response);
        assert_error(&got, 404, "not_found", what);
        let text = got.1.to_string();
        assert!(
            !text.contains("secret") && !text.contains("far away"),
            "{text}"
        );
    }

    // Links that stay inside public/ may be followed.
    symlink("real.txt", public.join("alias.txt")).unwrap();
    symlink("../real.txt", public.join("sub/up-alias.txt")).unwrap();
    symlink("sub", public.join("sub-alias")).unwrap();
    for (path, bytes) in [
        ("public/alias.txt", "real bytes"),
        ("public/sub/up-alias.txt", "real bytes"),
        ("public/sub-alias/deeper.txt", "deeper bytes"),
    ] {
        let response = site.content(path).send().unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.text().unwrap(), bytes, "{path}");
    }
    assert_sentinels(&sentinels);
    site.finish();
}

/// The component-by-component resolver (no `openat2`) confines downloads just as well.
#[test]
fn get_through_symlinks_without_openat2_stays_beneath_public() {
    let site = Site::start_with(Options {
        env: vec![("FERRY_FS_NO_OPENAT2".into(), "1".into())],
        ..Options::default()
    });
    let sentinels = plant_sentinels(&site);
    let public = site.public();
    write_file(&public.join("real.txt"), "real bytes");
    symlink("../secret.txt", public.join("rel-out.txt")).unwrap();
    symlink(site.home().join("secret.txt"), public.join("abs-out.txt")).unwrap();
    symlink("..", public.join("up")).unwrap();
    for path in [
        "public/rel-out.txt",
        "public/abs-out.txt",
        "public/up/secret.txt",
    ] {
        let got = answer(site.content(path).send().unwrap());
        assert_error(&got, 404, "not_found", path);
    }
    let response = site.content("public/real.txt").send().unwrap();
    assert_eq!(response.text().unwrap(), "real bytes");
    assert_sentinels(&sentinels);
    site.finish();
}

/// C-PATH names cap-std's fallback, which follows links that stay beneath the handle.
#[test]
fn get_through_an_inner_link_without_openat2() {
    let site = Site::start_with(Options {
        env: vec![("FERRY_FS_NO_OPENAT2".into(), "1".into())],
        ..Options::default()
    });
    let public = site.public();
    write_file(&public.join("real.txt"), "real bytes");
    symlink("real.txt", public.join("alias.txt")).unwrap();
    let response = site.content("public/alias.txt").send().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().unwrap(), "real bytes");
    site.finish();
}

#[test]
fn get_an_empty_file() {
    let site = Site::start();
    write_file(&site.public().join("empty.txt"), "");
    let response = site.content("public/empty.txt").send().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-length"), "0");
    assert_eq!(header(&response, "x-content-type-options"), "nosniff");
    assert!(response.headers().get("content-type").is_some());
    assert!(response.bytes().unwrap().is_empty());
    let response = site
        .content("public/empty.txt")
        .header("range", "bytes=0-")
        .send()
        .unwrap();
    assert_eq!(response.status(), 416);
    assert_eq!(header(&response, "content-range"), "bytes */0");
    site.finish();
}

// ---------------------------------------------------------------------------------------
// M-MANAGE
// ---------------------------------------------------------------------------------------

#[test]
fn mkdir_creates_folders_with_parents() {
    let site = Site::start();
    let public = site.public();
    let got = site.mkdir("public/reports");
    assert_eq!(got, (201, json!({"path": "public/reports"})));
    assert!(public.join("reports").is_dir());

    let got = site.mkdir("public/a/b/c");
    assert_eq!(got.0, 201, "{}", got.1);
    assert_eq!(got.1["path"], "public/a/b/c");
    assert!(public.join("a/b/c").is_dir());

    let got = site.mkdir("public/reports/2026/");
    assert_eq!(got.0, 201, "{}", got.1);
    assert!(public.join("reports/2026").is_dir());

    write_file(&public.join("reports/2026/keep.txt"), "keep");
    assert_error(
        &site.mkdir("public/reports"),
        409,
        "exists",
        "existing folder",
    );
    assert_error(
        &site.mkdir("public/reports/2026"),
        409,
        "exists",
        "existing nested folder",
    );
    assert_error(
        &site.mkdir("public/reports/2026/keep.txt"),
        409,
        "exists",
        "existing file",
    );
    assert_eq!(read(&public.join("reports/2026/keep.txt")), "keep");

    // Inside attachments/ is fine; only attachments/ itself is reserved.
    let got = site.mkdir("public/attachments/sub");
    assert_eq!(got.0, 201, "{}", got.1);
    assert!(public.join("attachments/sub").is_dir());

    let listing = site.list();
    assert_eq!(find(&listing, "public/a/b/c")["type"], "dir");
    site.finish();
}

/// M-DAILY: the names people type for folders are kept as typed (spaces, accents,
/// parentheses), NFC-normalized; only what cannot be a name, or is ferry's own, is
/// refused, for the new folder and every missing parent, before anything is made.
#[test]
fn mkdir_names_new_parents_as_typed() {
    let site = Site::start();
    let public = site.public();
    std::fs::create_dir(public.join("My Docs")).unwrap();
    for path in [
        "public/.ferry-tmp-x/sub",
        "public/ok/.ferry-tmp-y/sub",
        "public/tab\there/sub",
        "public/ok/line\nbreak",
    ] {
        let got = site.mkdir(path);
        assert_error(&got, 400, "unsafe_name", path);
    }
    assert_eq!(tree(&public), ["My Docs", "attachments"]);
    for path in [
        "public/Reports 2026/sub",
        "public/a\\b/sub",
        "public/.hidden/sub",
        "public/Q2 (final)/r\u{e9}sum\u{e9}",
    ] {
        let got = site.mkdir(path);
        assert_eq!(got.0, 201, "{path}: {}", got.1);
        assert!(
            public.join(path.strip_prefix("public/").unwrap()).is_dir(),
            "{path}"
        );
    }
    // Typed decomposed, made composed: the name the listing shows.
    let got = site.mkdir("public/e\u{301}te\u{301}");
    assert_eq!(got, (201, json!({"path": "public/\u{e9}t\u{e9}"})));
    assert!(public.join("\u{e9}t\u{e9}").is_dir());
    // A folder the agent named freely may hold the member's new folder.
    let got = site.mkdir("public/My Docs/new");
    assert_eq!(got.0, 201, "{}", got.1);
    assert!(public.join("My Docs/new").is_dir());
    // A rename takes a typed name too.
    let got = site.mv("public/Reports 2026", "public/Rapports 2026 – été (v2)");
    assert_eq!(
        got,
        (200, json!({"path": "public/Rapports 2026 – été (v2)"}))
    );
    assert!(public.join("Rapports 2026 – été (v2)/sub").is_dir());
    site.finish();
}

#[test]
fn move_and_rename() {
    let site = Site::start();
    let public = site.public();
    write_file(&public.join("a.txt"), "A");
    write_file(&public.join("dir/inner.txt"), "inner");
    std::fs::create_dir(public.join("reports")).unwrap();

    let got = site.mv("public/a.txt", "public/b.txt");
    assert_eq!(got, (200, json!({"path": "public/b.txt"})));
    assert!(!public.join("a.txt").exists());
    assert_eq!(read(&public.join("b.txt")), "A");

    let got = site.mv("public/b.txt", "public/reports/b.txt");
    assert_eq!(got, (200, json!({"path": "public/reports/b.txt"})));
    assert!(!public.join("b.txt").exists());
    assert_eq!(read(&public.join("reports/b.txt")), "A");

    let got = site.mv("public/dir", "public/reports/dir2");
    assert_eq!(got.0, 200, "{}", got.1);
    assert_eq!(read(&public.join("reports/dir2/inner.txt")), "inner");
    assert!(!public.join("dir").exists());

    // A file into attachments/ (not attachments/ itself) is an ordinary move.
    let got = site.mv("public/reports/b.txt", "public/attachments/b.txt");
    assert_eq!(got.0, 200, "{}", got.1);
    assert_eq!(read(&public.join("attachments/b.txt")), "A");

    assert_error(
        &site.mv("public/nope.txt", "public/x.txt"),
        404,
        "not_found",
        "missing source",
    );
    assert!(!public.join("x.txt").exists());
    assert_error(
        &site.mv("public/attachments/b.txt", "public/no-such-folder/b.txt"),
        404,
        "not_found",
        "missing target folder",
    );
    assert_eq!(read(&public.join("attachments/b.txt")), "A");
    site.finish();
}

#[test]
fn move_never_overwrites() {
    let site = Site::start();
    let public = site.public();
    write_file(&public.join("a.txt"), "A");
    write_file(&public.join("b.txt"), "B");
    write_file(&public.join("d1/x.txt"), "d1");
    write_file(&public.join("d2/y.txt"), "d2");
    std::fs::create_dir(public.join("empty")).unwrap();

    assert_error(
        &site.mv("public/a.txt", "public/b.txt"),
        409,
        "exists",
        "file onto file",
    );
    assert_eq!(read(&public.join("a.txt")), "A");
    assert_eq!(read(&public.join("b.txt")), "B");

    assert_error(
        &site.mv("public/d1", "public/d2"),
        409,
        "exists",
        "folder onto folder",
    );
    assert_error(
        &site.mv("public/d1", "public/empty"),
        409,
        "exists",
        "folder onto empty folder",
    );
    assert_error(
        &site.mv("public/a.txt", "public/d2"),
        409,
        "exists",
        "file onto folder",
    );
    assert_error(
        &site.mv("public/d1", "public/b.txt"),
        409,
        "exists",
        "folder onto file",
    );
    assert_error(
        &site.mv("public/a.txt", "public/a.txt"),
        409,
        "exists",
        "onto itself",
    );
    assert_eq!(read(&public.join("a.txt")), "A");
    assert_eq!(read(&public.join("b.txt")), "B");
    assert_eq!(read(&public.join("d1/x.txt")), "d1");
    assert_eq!(read(&public.join("d2/y.txt")), "d2");
    assert!(public.join("empty").is_dir());
    site.finish();
}

#[test]
fn move_a_folder_into_itself_is_refused() {
    let site = Site::start();
    let public = site.public();
    write_file(&public.join("reports/sub/f.txt"), "f");
    for to in [
        "public/reports/inner",
        "public/reports/sub/reports",
        "public/reports/sub/x/y",
    ] {
        let got = site.mv("public/reports", to);
        assert_eq!(got.0, 400, "{to}: {}", got.1);
        assert_client_error(&got, to);
    }
    assert_eq!(read(&public.join("reports/sub/f.txt")), "f");
    assert_eq!(tree(&public.join("reports")), ["sub", "sub/f.txt"]);
    // A sibling whose name merely starts the same is not inside.
    let got = site.mv("public/reports", "public/reports-old");
    assert_eq!(got.0, 200, "{}", got.1);
    assert_eq!(read(&public.join("reports-old/sub/f.txt")), "f");
    site.finish();
}

#[test]
fn delete_files_and_folders() {
    let site = Site::start();
    let public = site.public();
    write_file(&public.join("a.txt"), "A");
    write_file(&public.join("keep.txt"), "keep");
    write_file(&public.join("dir/x.txt"), "x");
    write_file(&public.join("dir/deep/deeper/y.txt"), "y");
    std::fs::create_dir(public.join("dir/empty")).unwrap();

    assert_eq!(site.delete("public/a.txt"), (204, Value::Null));
    assert!(!public.join("a.txt").exists());
    assert_eq!(site.delete("public/dir"), (204, Value::Null));
    assert!(!public.join("dir").exists());
    assert_eq!(read(&public.join("keep.txt")), "keep");

    assert_error(
        &site.delete("public/a.txt"),
        404,
        "not_found",
        "already deleted",
    );
    assert_error(
        &site.delete("public/never/was.txt"),
        404,
        "not_found",
        "missing path",
    );
    assert_eq!(
        listed_paths(&site.list()),
        ["public/attachments", "public/keep.txt"]
    );
    site.finish();
}

#[test]
fn delete_a_folder_removes_links_not_their_targets() {
    let site = Site::start();
    let public = site.public();
    let outside = tempfile::tempdir().unwrap();
    write_file(&outside.path().join("keep/deep.txt"), "outside");
    write_file(&outside.path().join("file.txt"), "outside file");
    write_file(&public.join("dir/real.txt"), "real");
    write_file(&public.join("other/kept.txt"), "kept");
    symlink(outside.path(), public.join("dir/to-outside")).unwrap();
    symlink(outside.path().join("keep"), public.join("dir/nested-out")).unwrap();
    symlink(outside.path().join("file.txt"), public.join("dir/file-out")).unwrap();
    symlink("../../other", public.join("dir/to-other")).unwrap();
    let before = tree(outside.path());

    assert_eq!(site.delete("public/dir"), (204, Value::Null));
    assert!(!public.join("dir").exists());
    assert_eq!(tree(outside.path()), before);
    assert_eq!(read(&outside.path().join("file.txt")), "outside file");
    assert_eq!(read(&public.join("other/kept.txt")), "kept");
    site.finish();
}

#[test]
fn attachments_itself_is_managed_by_the_system() {
    let site = Site::start();
    site.create_project("q2");
    let public = site.public();
    write_file(&public.join("attachments/delivered.pdf"), "pdf");
    write_file(&public.join("a.txt"), "A");
    std::fs::create_dir(public.join("reports")).unwrap();

    for spelling in [
        "public/attachments",
        "public/attachments/",
        "public//attachments",
        "public/./attachments",
        "./public/attachments",
    ] {
        assert_managed(&site.delete(spelling), &format!("delete {spelling}"));
        assert_managed(&site.mkdir(spelling), &format!("mkdir {spelling}"));
        assert_managed(
            &site.mv(spelling, "public/renamed"),
            &format!("move from {spelling}"),
        );
        assert_managed(
            &site.mv(spelling, "public/reports/attachments"),
            &format!("move from {spelling} into a folder"),
        );
        assert_managed(
            &site.mv("public/a.txt", spelling),
            &format!("move onto {spelling}"),
        );
        assert_managed(
            &site.mv("public/reports", spelling),
            &format!("move folder onto {spelling}"),
        );
    }
    // With the folder missing on disk, still refused (and then recreated).
    std::fs::rename(
        public.join("attachments"),
        site.home().join("saved-attachments"),
    )
    .unwrap();
    assert_managed(&site.mkdir("public/attachments"), "mkdir while missing");
    assert_managed(
        &site.mv("public/a.txt", "public/attachments"),
        "move onto missing",
    );
    assert_managed(&site.delete("public/attachments"), "delete while missing");
    std::fs::rename(
        site.home().join("saved-attachments"),
        public.join("attachments"),
    )
    .unwrap();

    // A project's attachments/ is reserved the same way.
    let q2 = site.project_public("q2");
    let with_project = |route: &str, body: Value| site.post_json_as(site.token(), route, &body);
    assert_managed(
        &with_project(
            "/v1/files/mkdir",
            json!({"path": "public/attachments", "project": "q2"}),
        ),
        "project mkdir",
    );
    assert_managed(
        &with_project(
            "/v1/files/move",
            json!({"from": "public/attachments", "to": "public/x", "project": "q2"}),
        ),
        "project move",
    );
    assert_managed(
        &site.delete_as(site.token(), "public/attachments", Some("q2")),
        "project delete",
    );
    assert!(q2.join("attachments").is_dir());

    assert_eq!(read(&public.join("attachments/delivered.pdf")), "pdf");
    assert_eq!(read(&public.join("a.txt")), "A");
    assert!(!public.join("renamed").exists());
    assert!(!public.join("reports/attachments").exists());
    assert!(public.join("reports").is_dir());
    site.finish();
}

#[test]
fn public_itself_cannot_be_moved_or_deleted() {
    let site = Site::start();
    let public = site.public();
    write_file(&public.join("a.txt"), "A");
    std::fs::create_dir(public.join("reports")).unwrap();
    for spelling in ["public", "public/", "./public", "public/."] {
        assert_error(
            &site.delete(spelling),
            403,
            "managed_by_system",
            &format!("delete {spelling}"),
        );
        assert_error(
            &site.mv(spelling, "public/reports/p"),
            403,
            "managed_by_system",
            "move public",
        );
        assert_client_error(&site.mv(spelling, "renamed"), "move public out of itself");
        assert_error(
            &site.mv("public/a.txt", spelling),
            403,
            "managed_by_system",
            "move onto public",
        );
    }
    assert_eq!(read(&public.join("a.txt")), "A");
    assert_eq!(tree(&public.join("reports")), Vec::<String>::new());
    assert_eq!(
        listed_paths(&site.list()),
        ["public/attachments", "public/reports", "public/a.txt"]
    );
    site.finish();
}

#[test]
fn files_inside_attachments_may_be_moved_out_and_deleted() {
    let site = Site::start();
    let public = site.public();
    write_file(&public.join("attachments/report.pdf"), "report");
    write_file(&public.join("attachments/old.pdf"), "old");
    write_file(&public.join("attachments/batch/one.txt"), "1");

    let got = site.mv("public/attachments/report.pdf", "public/report.pdf");
    assert_eq!(got.0, 200, "{}", got.1);
    assert_eq!(read(&public.join("report.pdf")), "report");
    assert!(!public.join("attachments/report.pdf").exists());

    let got = site.mv(
        "public/attachments/old.pdf",
        "public/attachments/renamed.pdf",
    );
    assert_eq!(got.0, 200, "{}", got.1);
    assert_eq!(read(&public.join("attachments/renamed.pdf")), "old");

    assert_eq!(site.delete("public/attachments/renamed.pdf").0, 204);
    assert!(!public.join("attachments/renamed.pdf").exists());
    assert_eq!(site.delete("public/attachments/batch").0, 204);
    assert!(!public.join("attachments/batch").exists());
    assert!(
        public.join("attachments").is_dir(),
        "attachments/ itself stays"
    );
    assert_eq!(tree(&public.join("attachments")), Vec::<String>::new());
    site.finish();
}

#[test]
fn a_nested_attachments_folder_is_ordinary() {
    let site = Site::start();
    let public = site.public();
    std::fs::create_dir(public.join("reports")).unwrap();
    write_file(&public.join("a.txt"), "A");

    let got = site.mkdir("public/reports/attachments");
    assert_eq!(got, (201, json!({"path": "public/reports/attachments"})));
    assert!(public.join("reports/attachments").is_dir());
    let listing = site.list();
    let nested = find(&listing, "public/reports/attachments");
    assert!(
        nested.get("managed").is_none() || nested["managed"] == false,
        "{nested}"
    );

    assert_eq!(
        site.mv("public/a.txt", "public/reports/attachments/a.txt")
            .0,
        200
    );
    assert_eq!(read(&public.join("reports/attachments/a.txt")), "A");
    let got = site.mv("public/reports/attachments", "public/reports/kept");
    assert_eq!(got.0, 200, "{}", got.1);
    assert_eq!(read(&public.join("reports/kept/a.txt")), "A");
    let got = site.mv("public/reports/kept", "public/reports/attachments");
    assert_eq!(got.0, 200, "{}", got.1);
    assert_eq!(site.delete("public/reports/attachments").0, 204);
    assert!(!public.join("reports/attachments").exists());
    assert!(public.join("attachments").is_dir());
    site.finish();
}

// ---------------------------------------------------------------------------------------
// Bad paths (C-PATH)
// ---------------------------------------------------------------------------------------

/// Everything under `home/` and the site root's loose files, for "nothing touched" checks.
fn snapshot(site: &Site) -> Vec<String> {
    let mut all = tree(&site.server.data.join("home"));
    all.extend(tree(&site.server.data.join("private")));
    all
}

#[test]
fn bad_paths_in_downloads() {
    let site = Site::start();
    let sentinels = plant_sentinels(&site);
    let public = site.public();
    write_file(&public.join("ok.txt"), "ok");
    write_file(&public.join("%2e%2e%2fliteral.txt"), "a literal name");
    site.list(); // public/attachments exists from here on
    let before = snapshot(&site);
    let long_ok = format!("path={}", long_path(4096));
    let long_bad = format!("path={}", long_path(4097));

    for (query, status, code, what) in [
        ("path=public/../secret.txt", 404, "not_found", "dot-dot"),
        (
            "path=public/../home/me/x",
            404,
            "not_found",
            "dot-dot to home",
        ),
        (
            "path=public/attachments/../../secret.txt",
            404,
            "not_found",
            "nested dot-dot",
        ),
        ("path=/etc/passwd", 404, "not_found", "absolute"),
        (
            "path=%2Fetc%2Fpasswd",
            404,
            "not_found",
            "absolute, encoded",
        ),
        (
            "path=public/%2e%2e%2fsecret.txt",
            404,
            "not_found",
            "encoded dot-dot",
        ),
        (
            "path=public%2F%2E%2E%2Fsecret.txt",
            404,
            "not_found",
            "encoded dot-dot, upper",
        ),
        (
            "path=public/%252e%252e%252fsecret.txt",
            404,
            "not_found",
            "double-encoded",
        ),
        (
            "path=public\\..\\secret.txt",
            404,
            "not_found",
            "backslashes",
        ),
        (
            "path=public%5C..%5Csecret.txt",
            404,
            "not_found",
            "encoded backslashes",
        ),
        (
            "path=public/..\\secret.txt",
            404,
            "not_found",
            "backslash after public/",
        ),
        ("path=public/ok.txt%00", 400, "bad_path", "NUL"),
        ("path=public/%00/ok.txt", 400, "bad_path", "NUL component"),
        (long_bad.as_str(), 400, "bad_path", "4097 bytes"),
        (long_ok.as_str(), 404, "not_found", "4096 bytes"),
        ("path=", 400, "bad_path", "empty"),
        ("", 400, "bad_query", "no path"),
        (
            "path=public/ok.txt&project=..%2F..",
            404,
            "unknown_project",
            "project dot-dot",
        ),
        (
            "path=public/ok.txt&project=%2Fetc",
            404,
            "unknown_project",
            "project absolute",
        ),
    ] {
        let got = answer(site.content_raw(query));
        assert_error(&got, status, code, what);
        let text = got.1.to_string();
        assert!(
            !text.contains("home secret") && !text.contains("root:"),
            "{what}: {text}"
        );
    }
    // Decoded once: the double-encoded spelling names the literal file.
    let response = site.content_raw("path=public/%252e%252e%252fliteral.txt");
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().unwrap(), "a literal name");
    let response = site.content_raw("path=public/ok.txt");
    assert_eq!(response.text().unwrap(), "ok");

    assert_sentinels(&sentinels);
    assert_eq!(snapshot(&site), before);
    site.finish();
}

#[test]
fn bad_paths_in_deletes() {
    let site = Site::start();
    let sentinels = plant_sentinels(&site);
    let public = site.public();
    write_file(&public.join("ok.txt"), "ok");
    site.list(); // public/attachments exists from here on
    let before = snapshot(&site);
    let absolute = format!("path={}", site.home().join("secret.txt").display());
    let long_ok = format!("path={}", long_path(4096));
    let long_bad = format!("path={}", long_path(4097));

    for (query, status, code, what) in [
        ("path=public/../secret.txt", 400, "path_escapes", "dot-dot"),
        (
            "path=public/../home/me/x",
            400,
            "path_escapes",
            "dot-dot to home",
        ),
        (
            "path=public/attachments/../../x",
            400,
            "path_escapes",
            "nested dot-dot",
        ),
        ("path=public/..", 400, "path_escapes", "public/.."),
        (absolute.as_str(), 400, "path_escapes", "absolute"),
        ("path=/", 400, "path_escapes", "root"),
        (
            "path=public/%2e%2e%2fsecret.txt",
            400,
            "path_escapes",
            "encoded dot-dot",
        ),
        (
            "path=public/%252e%252e%252fsecret.txt",
            404,
            "not_found",
            "double-encoded",
        ),
        (
            "path=public\\..\\secret.txt",
            404,
            "not_found",
            "backslashes",
        ),
        (
            "path=public/..\\secret.txt",
            404,
            "not_found",
            "backslash after public/",
        ),
        ("path=secret.txt", 404, "not_found", "outside public"),
        ("path=home/me/secret.txt", 404, "not_found", "home path"),
        (
            "path=private/people/me/tmp/t1/draft.txt",
            404,
            "not_found",
            "private path",
        ),
        ("path=public/ok.txt%00", 400, "bad_path", "NUL"),
        (long_bad.as_str(), 400, "bad_path", "4097 bytes"),
        (long_ok.as_str(), 404, "not_found", "4096 bytes"),
        ("path=", 400, "bad_path", "empty"),
        ("", 400, "bad_query", "no path"),
        (
            "path=public/ok.txt&project=..%2F..",
            404,
            "unknown_project",
            "project dot-dot",
        ),
    ] {
        let got = site.delete_raw(query);
        assert_error(&got, status, code, what);
        assert_sentinels(&sentinels);
    }
    assert_eq!(read(&public.join("ok.txt")), "ok");
    assert_eq!(snapshot(&site), before);
    site.finish();
}

#[test]
fn bad_paths_in_mkdir_and_move() {
    let site = Site::start();
    let sentinels = plant_sentinels(&site);
    let public = site.public();
    write_file(&public.join("ok.txt"), "ok");
    site.list(); // public/attachments exists from here on
    let before = snapshot(&site);
    let absolute = site.home().join("secret.txt").display().to_string();
    let absolute_dir = site.home().join("made-outside").display().to_string();
    let long_bad = long_path(4097);
    let long_ok = long_path(4096);

    for (path, status, code) in [
        ("public/../made-outside", 400, "path_escapes"),
        ("public/reports/../../made-outside", 400, "path_escapes"),
        (absolute_dir.as_str(), 400, "path_escapes"),
        ("public\\..\\made-outside", 404, "not_found"),
        ("made-outside", 404, "not_found"),
        ("public/a\0b", 400, "bad_path"),
        (long_bad.as_str(), 400, "bad_path"),
        ("", 400, "bad_path"),
    ] {
        assert_error(
            &site.mkdir(path),
            status,
            code,
            &format!("mkdir {path:.60}"),
        );
    }
    // A name a person types may be almost anything, but never a way out or ferry's own:
    // control characters, ferry's temporaries' prefix, more than 255 bytes.
    let too_long = format!("public/{}", "n".repeat(256));
    for path in [
        "public/tab\there",
        "public/line\nbreak",
        "public/.ferry-tmp-z",
        too_long.as_str(),
    ] {
        assert_error(&site.mkdir(path), 400, "unsafe_name", path);
    }

    for (from, to, status, code) in [
        ("public/ok.txt", "public/../moved.txt", 400, "path_escapes"),
        (
            "public/../secret.txt",
            "public/stolen.txt",
            400,
            "path_escapes",
        ),
        ("public/ok.txt", absolute_dir.as_str(), 400, "path_escapes"),
        (absolute.as_str(), "public/stolen.txt", 400, "path_escapes"),
        ("secret.txt", "public/stolen.txt", 404, "not_found"),
        ("home/me/secret.txt", "public/stolen.txt", 404, "not_found"),
        ("public/ok.txt", "moved.txt", 404, "not_found"),
        (
            "public\\..\\secret.txt",
            "public/stolen.txt",
            404,
            "not_found",
        ),
        ("public/ok.txt\0", "public/moved.txt", 400, "bad_path"),
        ("public/ok.txt", "public/moved\0.txt", 400, "bad_path"),
        (long_bad.as_str(), "public/moved.txt", 400, "bad_path"),
        ("public/ok.txt", long_bad.as_str(), 400, "bad_path"),
        (long_ok.as_str(), "public/moved.txt", 404, "not_found"),
        ("", "public/moved.txt", 400, "bad_path"),
        ("public/ok.txt", "", 400, "bad_path"),
    ] {
        assert_error(
            &site.mv(from, to),
            status,
            code,
            &format!("move {from:.40} -> {to:.40}"),
        );
    }
    for to in ["public/.ferry-tmp-moved", "public/bell\u{7}.txt"] {
        assert_error(&site.mv("public/ok.txt", to), 400, "unsafe_name", to);
    }

    assert_sentinels(&sentinels);
    assert_eq!(read(&public.join("ok.txt")), "ok");
    assert!(!site.home().join("made-outside").exists());
    assert!(!site.home().join("moved.txt").exists());
    assert_eq!(snapshot(&site), before);
    site.finish();
}

// ---------------------------------------------------------------------------------------
// Symlinks on the write path (C-PATH)
// ---------------------------------------------------------------------------------------

#[test]
fn writes_through_a_linked_folder_escape() {
    let site = Site::start();
    let public = site.public();
    let outside = tempfile::tempdir().unwrap();
    write_file(&outside.path().join("file"), "outside file");
    write_file(&outside.path().join("sub/deep.txt"), "outside deep");
    write_file(&public.join("a.txt"), "A");
    symlink(outside.path(), public.join("reports")).unwrap();
    let outside_before = tree(outside.path());

    assert_error(
        &site.mkdir("public/reports/x"),
        400,
        "path_escapes",
        "mkdir through the link",
    );
    assert_error(
        &site.mkdir("public/reports/x/y"),
        400,
        "path_escapes",
        "mkdir -p through the link",
    );
    assert_error(
        &site.mkdir("public/reports/sub/x"),
        400,
        "path_escapes",
        "mkdir beside an outside folder",
    );
    assert_error(
        &site.mv("public/a.txt", "public/reports/a.txt"),
        400,
        "path_escapes",
        "move into the link",
    );
    assert_error(
        &site.mv("public/reports/file", "public/stolen"),
        400,
        "path_escapes",
        "move out of the link",
    );
    assert_error(
        &site.delete("public/reports/file"),
        400,
        "path_escapes",
        "delete through the link",
    );
    assert_error(
        &site.delete("public/reports/sub"),
        400,
        "path_escapes",
        "delete a folder through the link",
    );
    assert_eq!(tree(outside.path()), outside_before);
    assert_eq!(read(&public.join("a.txt")), "A");
    assert!(!public.join("stolen").exists());

    // Deleting the link itself removes only the link.
    assert_eq!(site.delete("public/reports"), (204, Value::Null));
    assert!(std::fs::symlink_metadata(public.join("reports")).is_err());
    assert_eq!(tree(outside.path()), outside_before);
    assert_eq!(read(&outside.path().join("file")), "outside file");
    site.finish();
}

#[test]
fn writes_through_a_link_inside_the_tree_are_refused() {
    let site = Site::start();
    let public = site.public();
    write_file(&public.join("real/keep.txt"), "keep");
    write_file(&public.join("a.txt"), "A");
    symlink("real", public.join("alias")).unwrap();

    assert_error(
        &site.mkdir("public/alias/x"),
        400,
        "path_escapes",
        "mkdir through an inner link",
    );
    assert_error(
        &site.mv("public/a.txt", "public/alias/a.txt"),
        400,
        "path_escapes",
        "move through an inner link",
    );
    assert_error(
        &site.delete("public/alias/keep.txt"),
        400,
        "path_escapes",
        "delete through an inner link",
    );
    assert_eq!(tree(&public.join("real")), ["keep.txt"]);
    assert_eq!(read(&public.join("a.txt")), "A");

    // The link itself can be renamed and deleted; its target stays.
    assert_eq!(site.mv("public/alias", "public/alias2").0, 200);
    assert_eq!(
        std::fs::read_link(public.join("alias2")).unwrap(),
        PathBuf::from("real")
    );
    assert_eq!(site.delete("public/alias2").0, 204);
    assert_eq!(read(&public.join("real/keep.txt")), "keep");
    site.finish();
}

// ---------------------------------------------------------------------------------------
// M-AUTH
// ---------------------------------------------------------------------------------------

#[test]
fn files_routes_need_a_member_token() {
    let site = Site::start();
    let public = site.public();
    write_file(&public.join("a.txt"), "A");
    let harness = site.server.create_token("me", "harness");
    let forged = format!("{}x", site.server.token);

    for (label, token) in [
        ("no token", None),
        ("bad token", Some("not-a-token")),
        ("forged token", Some(forged.as_str())),
        ("harness token", Some(harness.as_str())),
    ] {
        let with = |request: RequestBuilder| match token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let requests = [
            ("list", with(site.http.get(site.server.url("/v1/files")))),
            (
                "content",
                with(
                    site.http
                        .get(site.server.url("/v1/files/content?path=public/a.txt")),
                ),
            ),
            (
                "delete",
                with(
                    site.http
                        .delete(site.server.url("/v1/files?path=public/a.txt")),
                ),
            ),
            (
                "mkdir",
                with(site.http.post(site.server.url("/v1/files/mkdir")))
                    .json(&json!({"path": "public/made"})),
            ),
            (
                "move",
                with(site.http.post(site.server.url("/v1/files/move")))
                    .json(&json!({"from": "public/a.txt", "to": "public/b.txt"})),
            ),
            (
                "projects",
                with(site.http.get(site.server.url("/v1/projects"))),
            ),
            (
                "new project",
                with(site.http.post(site.server.url("/v1/projects")))
                    .json(&json!({"id": "sneaky"})),
            ),
        ];
        for (route, request) in requests {
            let response = request.send().unwrap();
            assert!(
                response.headers().get("www-authenticate").is_some(),
                "{label} {route}"
            );
            let got = answer(response);
            assert_error(&got, 401, "unauthorized", &format!("{label} on {route}"));
        }
    }
    assert_eq!(read(&public.join("a.txt")), "A");
    assert!(!public.join("b.txt").exists());
    assert!(!public.join("made").exists());
    assert!(!site.home().join("projects/sneaky").exists());
    site.finish();
}

#[test]
fn another_person_cannot_reach_my_files_or_projects() {
    let site = Site::start();
    site.create_project("q2");
    let public = site.public();
    write_file(&public.join("mine.txt"), "my secret bytes");
    write_file(&public.join("folder/inner.txt"), "inner");
    write_file(&site.project_public("q2").join("plan.txt"), "q2 plan");
    let bob = site.server.add_person("bob");

    let (status, listing) = site.list_as(&bob, None);
    assert_eq!(status, 200, "{listing}");
    assert_eq!(listed_paths(&listing), ["public/attachments"]);
    assert!(site.server.home("bob").join("public/attachments").is_dir());

    let bob_get = |path: &str, project: Option<&str>| {
        let mut request = site
            .get("/v1/files/content")
            .bearer_auth(&bob)
            .query(&[("path", path)]);
        if let Some(project) = project {
            request = request.query(&[("project", project)]);
        }
        answer(request.send().unwrap())
    };
    assert_error(
        &bob_get("public/mine.txt", None),
        404,
        "not_found",
        "bob gets my file",
    );
    assert_error(
        &bob_get("public/../../me/public/mine.txt", None),
        404,
        "not_found",
        "bob climbs",
    );
    assert_error(
        &bob_get("public/plan.txt", Some("q2")),
        404,
        "unknown_project",
        "bob's q2",
    );

    assert_error(
        &site.list_as(&bob, Some("q2")),
        404,
        "unknown_project",
        "bob lists my project",
    );
    assert_error(
        &site.delete_as(&bob, "public/plan.txt", Some("q2")),
        404,
        "unknown_project",
        "bob deletes in my project",
    );
    assert_error(
        &site.delete_as(&bob, "public/mine.txt", None),
        404,
        "not_found",
        "bob deletes",
    );
    assert_error(
        &site.post_json_as(
            &bob,
            "/v1/files/mkdir",
            &json!({"path": "public/x", "project": "q2"}),
        ),
        404,
        "unknown_project",
        "bob mkdir in my project",
    );
    assert_error(
        &site.post_json_as(
            &bob,
            "/v1/files/move",
            &json!({"from": "public/plan.txt", "to": "public/p.txt", "project": "q2"}),
        ),
        404,
        "unknown_project",
        "bob moves in my project",
    );
    let (status, projects) = answer(site.get("/v1/projects").bearer_auth(&bob).send().unwrap());
    assert_eq!(status, 200);
    assert_eq!(projects["projects"], json!([]));

    // Bob's own project of the same name is his, and separate.
    let (status, body) = site.post_json_as(&bob, "/v1/projects", &json!({"id": "q2"}));
    assert_eq!(status, 201, "{body}");
    let (status, listing) = site.list_as(&bob, Some("q2"));
    assert_eq!(status, 200);
    assert_eq!(listed_paths(&listing), ["public/attachments"]);

    assert_eq!(read(&public.join("mine.txt")), "my secret bytes");
    assert_eq!(read(&site.project_public("q2").join("plan.txt")), "q2 plan");
    assert!(!site.project_public("q2").join("x").exists());
    site.finish();
}

// ---------------------------------------------------------------------------------------
// Malformed requests
// ---------------------------------------------------------------------------------------

#[test]
fn malformed_json_and_queries_are_client_errors() {
    let site = Site::start();
    let public = site.public();
    write_file(&public.join("a.txt"), "A");
    site.list(); // public/attachments exists from here on
    let before = snapshot(&site);

    for (route, body) in [
        ("/v1/files/mkdir", json!({"path": 5})),
        ("/v1/files/mkdir", json!({"path": null})),
        ("/v1/files/mkdir", json!({"path": ["public", "x"]})),
        ("/v1/files/mkdir", json!({"path": "public/x", "project": 7})),
        (
            "/v1/files/mkdir",
            json!({"path": "public/x", "recursive": true}),
        ),
        ("/v1/files/mkdir", json!({})),
        ("/v1/files/mkdir", json!(["public/x"])),
        ("/v1/files/mkdir", json!("public/x")),
        ("/v1/files/move", json!({"from": "public/a.txt"})),
        ("/v1/files/move", json!({"to": "public/b.txt"})),
        ("/v1/files/move", json!({"from": "public/a.txt", "to": 3})),
        (
            "/v1/files/move",
            json!({"from": {"p": 1}, "to": "public/b.txt"}),
        ),
        (
            "/v1/files/move",
            json!({"from": "public/a.txt", "to": "public/b.txt", "overwrite": true}),
        ),
        ("/v1/projects", json!({"id": 1})),
        ("/v1/projects", json!({"id": "p1", "label": "x"})),
        ("/v1/projects", json!({"name": ["Q2"]})),
    ] {
        let got = site.post_json_as(site.token(), route, &body);
        assert_error(&got, 400, "bad_json", &format!("{route} {body}"));
    }

    let raw = |route: &str, content_type: Option<&str>, body: &str| {
        let mut request = site
            .http
            .post(site.server.url(route))
            .bearer_auth(site.token())
            .body(body.to_owned());
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        answer(request.send().unwrap())
    };
    for route in ["/v1/files/mkdir", "/v1/files/move"] {
        let body = r#"{"path":"public/x","from":"public/a.txt","to":"public/b.txt"}"#;
        assert_error(
            &raw(route, None, body),
            415,
            "bad_content_type",
            "no content type",
        );
        assert_error(
            &raw(route, Some("text/plain"), body),
            415,
            "bad_content_type",
            "text/plain",
        );
        assert_error(
            &raw(
                route,
                Some("application/x-www-form-urlencoded"),
                "path=public/x",
            ),
            415,
            "bad_content_type",
            "a form",
        );
        for bad in ["", "{", "{\"path\":\"public/x\",}", "null", "\u{0}"] {
            let got = raw(route, Some("application/json"), bad);
            assert_client_error(&got, &format!("{route} {bad:?}"));
            assert_eq!(error_code(&got.1), "bad_json", "{route} {bad:?}");
        }
    }

    for (query, what) in [
        ("/v1/files?bogus=1", "unknown list parameter"),
        ("/v1/files?project=q2&project=q3", "repeated project"),
        ("/v1/files/content", "no path"),
        (
            "/v1/files/content?path=public/a.txt&bogus=1",
            "unknown download parameter",
        ),
    ] {
        let got = answer(site.get(query).bearer_auth(site.token()).send().unwrap());
        assert_client_error(&got, what);
        assert_eq!(got.0, 400, "{what}: {}", got.1);
    }
    for query in [
        "path=public/a.txt&bogus=1",
        "nopath=1",
        "path=public/a.txt&path=public/b.txt",
    ] {
        let got = site.delete_raw(query);
        assert_client_error(&got, query);
        assert_eq!(got.0, 400, "{query}: {}", got.1);
    }
    let got = answer(
        site.http
            .put(site.server.url("/v1/files"))
            .bearer_auth(site.token())
            .send()
            .unwrap(),
    );
    assert_error(&got, 405, "method_not_allowed", "PUT");

    assert_eq!(read(&public.join("a.txt")), "A");
    assert_eq!(snapshot(&site), before);
    site.finish();
}

/// A name on disk made of raw bytes (not necessarily UTF-8).
fn raw_name(bytes: &[u8]) -> &std::ffi::OsStr {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::OsStr::from_bytes(bytes)
}

#[test]
fn names_that_are_not_utf8_list_download_move_and_delete_by_the_listed_path() {
    let site = Site::start();
    let public = site.public();
    // Two names a lossy listing would show alike, a folder, and a UTF-8 name that holds
    // the very character the listing uses for byte 0xE9.
    std::fs::write(public.join(raw_name(b"caf\xe9.txt")), "latin-1").unwrap();
    std::fs::write(public.join(raw_name(b"caf\xe8.txt")), "other").unwrap();
    std::fs::write(public.join("caf\u{10FFE9}.txt"), "look-alike").unwrap();
    let folder = public.join(raw_name(b"dir\xff"));
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("in.txt"), "inside").unwrap();

    let listing = site.list();
    let entries = flatten_entries(&listing["entries"]);
    let path_of = |content: &str| -> String {
        let found: Vec<&&Value> = entries
            .iter()
            .filter(|e| {
                e["type"] == "file"
                    && site
                        .content(e["path"].as_str().unwrap())
                        .send()
                        .unwrap()
                        .text()
                        .unwrap()
                        == content
            })
            .collect();
        assert_eq!(found.len(), 1, "{content}: {listing}");
        found[0]["path"].as_str().unwrap().to_owned()
    };
    let latin = path_of("latin-1");
    let other = path_of("other");
    let lookalike = path_of("look-alike");
    let inside = path_of("inside");
    let paths = [&latin, &other, &lookalike, &inside];
    for (i, a) in paths.iter().enumerate() {
        for b in &paths[i + 1..] {
            assert_ne!(a, b, "{listing}");
        }
    }
    // Byte 0xE9 is shown as U+10FFE9; the UTF-8 name that holds U+10FFE9 itself is shown
    // byte by byte (F4 8F BF A9), so the two never share a path.
    assert_eq!(latin, "public/caf\u{10FFE9}.txt");
    assert_eq!(
        lookalike,
        "public/caf\u{10FFF4}\u{10FF8F}\u{10FFBF}\u{10FFA9}.txt"
    );
    assert!(!listing.to_string().contains('\u{FFFD}'), "{listing}");

    // Move by the listed path: the bytes land under the new name, the old one is gone.
    let (status, body) = site.mv(&latin, "public/cafe.txt");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        std::fs::read_to_string(public.join("cafe.txt")).unwrap(),
        "latin-1"
    );
    assert!(!public.join(raw_name(b"caf\xe9.txt")).exists());
    assert!(public.join("caf\u{10FFE9}.txt").exists());

    // Delete by the listed path: the folder (and what is in it) and the other file.
    let folder_path = inside.trim_end_matches("/in.txt").to_owned();
    assert_eq!(site.delete(&folder_path).0, 204);
    assert!(!folder.exists());
    assert_eq!(site.delete(&other).0, 204);
    assert!(!public.join(raw_name(b"caf\xe8.txt")).exists());
    assert_eq!(
        std::fs::read_to_string(public.join("caf\u{10FFE9}.txt")).unwrap(),
        "look-alike"
    );
    site.finish();
}

#[test]
fn a_temporary_cannot_be_named_to_download_move_or_delete_it() {
    // An upload in progress lies in public/ under a hidden temporary name: it is never
    // listed, and naming it exactly must not bring it into sight half-written.
    let site = Site::start();
    let half = site.public().join(".ferry-tmp-upload-in-progress");
    write_file(&half, "half of a file");
    let http = client();
    for path in [
        "public/.ferry-tmp-upload-in-progress",
        "public/./.ferry-tmp-upload-in-progress",
    ] {
        let got = http
            .get(site.server.url("/v1/files/content"))
            .query(&[("path", path)])
            .bearer_auth(site.token())
            .send()
            .unwrap();
        assert_eq!(got.status().as_u16(), 400, "{path}");
        let moved = http
            .post(site.server.url("/v1/files/move"))
            .bearer_auth(site.token())
            .json(&json!({"from": path, "to": "public/stolen.txt"}))
            .send()
            .unwrap();
        assert_eq!(moved.status().as_u16(), 400, "{path}");
        let deleted = http
            .delete(site.server.url("/v1/files"))
            .query(&[("path", path)])
            .bearer_auth(site.token())
            .send()
            .unwrap();
        assert_eq!(deleted.status().as_u16(), 400, "{path}");
    }
    assert_eq!(std::fs::read(&half).unwrap(), b"half of a file");
    assert!(!site.public().join("stolen.txt").exists());
}
