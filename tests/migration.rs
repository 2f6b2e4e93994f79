//! The legacy `uploads/` name (spec members M-MIGRATE): workspaces created before the
//! rename are migrated on first touch, by every route, merged file by file, safely under
//! concurrent requests and after a crash; and nothing ever creates `uploads/`.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;
use support::{
    Peer, Reply, Server, client, create_project, list_files, listed_paths, post_json, upload,
    write_file,
};

/// The old name of `public/`; spelled here because these tests build legacy state.
const LEGACY: &str = "uploads";

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Writes `bytes` at `path` and sets its mtime to `secs` after an arbitrary fixed epoch.
fn put_at(path: &Path, bytes: &[u8], secs: u64) {
    write_file(path, bytes);
    set_mtime(path, secs);
}

fn set_mtime(path: &Path, secs: u64) {
    let when = UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(when)
        .unwrap();
}

fn mtime(path: &Path) -> SystemTime {
    std::fs::symlink_metadata(path).unwrap().modified().unwrap()
}

/// Every regular file below `dir` with its bytes, keyed by `/`-joined relative path.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for rel in support::tree(dir) {
        let path = dir.join(&rel);
        if std::fs::symlink_metadata(&path).unwrap().is_file() {
            out.insert(rel, std::fs::read(&path).unwrap());
        }
    }
    out
}

/// Every directory below `dir`, relative.
fn dirs(dir: &Path) -> BTreeSet<String> {
    support::tree(dir)
        .into_iter()
        .filter(|rel| {
            std::fs::symlink_metadata(dir.join(rel))
                .unwrap()
                .file_type()
                .is_dir()
        })
        .collect()
}

/// A map literal: `expect(&[("a.txt", "alpha")])`.
fn expect(entries: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
        .collect()
}

/// Lossy rendering of a file map, for readable assertion failures.
fn show(map: &BTreeMap<String, Vec<u8>>) -> BTreeMap<String, String> {
    map.iter()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
        .collect()
}

/// Every file or folder named `uploads` anywhere under `root`.
fn legacy_entries(root: &Path) -> Vec<String> {
    support::tree(root)
        .into_iter()
        .filter(|rel| Path::new(rel).file_name().is_some_and(|n| n == LEGACY))
        .collect()
}

/// The legacy tree most tests start from: a top-level file, a nested one, and an old
/// delivery in `attachments/`.
fn plant_legacy(container: &Path) {
    let legacy = container.join(LEGACY);
    write_file(&legacy.join("a.txt"), b"alpha");
    write_file(&legacy.join("notes/b.md"), b"beta");
    write_file(&legacy.join("attachments/old.pdf"), b"%PDF-old");
}

fn planted() -> BTreeMap<String, Vec<u8>> {
    expect(&[
        ("a.txt", "alpha"),
        ("notes/b.md", "beta"),
        ("attachments/old.pdf", "%PDF-old"),
    ])
}

/// The routes that touch a public directory (each goes through `Workspace::public()`).
#[derive(Clone, Copy, Debug)]
enum Route {
    List,
    Upload,
    Download,
    Mkdir,
    Move,
    Delete,
    Deliver,
}

const ROUTES: [Route; 7] = [
    Route::List,
    Route::Upload,
    Route::Download,
    Route::Mkdir,
    Route::Move,
    Route::Delete,
    Route::Deliver,
];

/// Touches the workspace (main or `project`) by `route`, asserting the route succeeded,
/// and returns the files `public/` must then hold given that it held `before`. Download,
/// move and delete act on files that exist only in the legacy folder, so their success
/// shows the migration ran before the operation.
fn touch(
    server: &Server,
    route: Route,
    project: Option<&str>,
    before: BTreeMap<String, Vec<u8>>,
) -> BTreeMap<String, Vec<u8>> {
    let http = client();
    let mut after = before;
    let query = project.map(|p| format!("&project={p}")).unwrap_or_default();
    match route {
        Route::List => {
            let listing = list_files(server, &server.token, project);
            let paths = listed_paths(&listing);
            for rel in after.keys() {
                assert!(
                    paths.contains(&format!("public/{rel}")),
                    "{rel} missing from the first listing: {paths:?}"
                );
            }
            assert!(
                paths.iter().all(|p| p.split('/').all(|c| c != LEGACY)),
                "a legacy path is listed: {paths:?}"
            );
        }
        Route::Upload => {
            let (status, body) = upload(server, &server.token, "fresh.txt", b"fresh", project);
            assert_eq!(status, 201, "{body}");
            after.insert("fresh.txt".into(), b"fresh".to_vec());
        }
        Route::Download => {
            let response = http
                .get(server.url(&format!("/v1/files/content?path=public/a.txt{query}")))
                .bearer_auth(&server.token)
                .send()
                .unwrap();
            assert_eq!(response.status(), 200);
            assert_eq!(response.bytes().unwrap().as_ref(), b"alpha");
        }
        Route::Mkdir => {
            let (status, body) = post_json(
                server,
                &server.token,
                "/v1/files/mkdir",
                &json!({"path": "public/notes/made", "project": project}),
            );
            assert_eq!(status, 201, "{body}");
        }
        Route::Move => {
            let (status, body) = post_json(
                server,
                &server.token,
                "/v1/files/move",
                &json!({"from": "public/a.txt", "to": "public/notes/a.txt", "project": project}),
            );
            assert_eq!(status, 200, "{body}");
            let bytes = after.remove("a.txt").unwrap();
            after.insert("notes/a.txt".into(), bytes);
        }
        Route::Delete => {
            let response = http
                .delete(server.url(&format!("/v1/files?path=public/notes/b.md{query}")))
                .bearer_auth(&server.token)
                .send()
                .unwrap();
            assert_eq!(response.status(), 204, "{}", response.text().unwrap());
            after.remove("notes/b.md");
        }
        Route::Deliver => {
            let peer = Peer::start(|_| Reply::ok(b"delivered".to_vec()));
            let harness = server.create_token("me", "harness");
            let (status, body) = post_json(
                server,
                &harness,
                "/v1/deliveries",
                &json!({"url": peer.url("/files/report.pdf"), "project": project}),
            );
            assert_eq!(status, 201, "{body}");
            assert_eq!(body["path"], "public/attachments/report.pdf");
            after.insert("attachments/report.pdf".into(), b"delivered".to_vec());
        }
    }
    after
}

/// Only `uploads/` exists in the workspace; the first request by `route` makes it `public/`.
fn only_legacy_becomes_public(route: Route) {
    let server = Server::start();
    let home = server.home("me");
    let _ = std::fs::remove_dir_all(home.join("public"));
    plant_legacy(&home);

    let expected = touch(&server, route, None, planted());

    assert!(
        !home.join(LEGACY).exists(),
        "{route:?} left uploads/ behind"
    );
    assert_eq!(
        show(&files(&home.join("public"))),
        show(&expected),
        "{route:?}"
    );
    assert!(home.join("public/attachments").is_dir());
    if matches!(route, Route::Mkdir) {
        assert!(home.join("public/notes/made").is_dir());
    }
    // The shipped documents beside it are untouched.
    assert!(home.join("memory/FILE_DELIVERY.md").is_file());
}

// ---------------------------------------------------------------------------------------
// Only uploads/: it becomes public/ on the first touch of each route
// ---------------------------------------------------------------------------------------

#[test]
fn only_legacy_becomes_public_on_first_list() {
    only_legacy_becomes_public(Route::List);
}

#[test]
fn only_legacy_becomes_public_on_first_upload() {
    only_legacy_becomes_public(Route::Upload);
}

#[test]
fn only_legacy_becomes_public_on_first_download() {
    only_legacy_becomes_public(Route::Download);
}

#[test]
fn only_legacy_becomes_public_on_first_mkdir() {
    only_legacy_becomes_public(Route::Mkdir);
}

#[test]
fn only_legacy_becomes_public_on_first_move() {
    only_legacy_becomes_public(Route::Move);
}

#[test]
fn only_legacy_becomes_public_on_first_delete() {
    only_legacy_becomes_public(Route::Delete);
}

#[test]
fn only_legacy_becomes_public_on_first_delivery() {
    only_legacy_becomes_public(Route::Deliver);
}

#[test]
fn rename_keeps_mtimes_and_is_idempotent() {
    let server = Server::start();
    let home = server.home("me");
    let _ = std::fs::remove_dir_all(home.join("public"));
    put_at(&home.join("uploads/kept.txt"), b"kept", 42);
    let before = mtime(&home.join("uploads/kept.txt"));

    touch(&server, Route::List, None, expect(&[("kept.txt", "kept")]));
    assert_eq!(mtime(&home.join("public/kept.txt")), before);

    // Later touches find nothing to migrate and change nothing.
    let snapshot = files(&home.join("public"));
    for _ in 0..2 {
        touch(&server, Route::List, None, snapshot.clone());
    }
    assert_eq!(files(&home.join("public")), snapshot);
    assert!(!home.join(LEGACY).exists());
}

// ---------------------------------------------------------------------------------------
// Both present: merged file by file, newer wins
// ---------------------------------------------------------------------------------------

#[test]
fn both_present_merge_recursively_newer_wins() {
    let server = Server::start();
    let home = server.home("me");
    let legacy = home.join(LEGACY);
    let public = home.join("public");
    // Make public/ exist the way the gateway makes it.
    touch(&server, Route::List, None, BTreeMap::new());

    // Only on one side.
    write_file(&legacy.join("only-legacy.txt"), b"L");
    write_file(&public.join("only-public.txt"), b"P");
    // Collisions: the legacy copy is newer for one name, the public copy for another.
    put_at(&legacy.join("legacy-newer.txt"), b"legacy wins", 200);
    put_at(&public.join("legacy-newer.txt"), b"public loses", 100);
    put_at(&legacy.join("public-newer.txt"), b"legacy loses", 100);
    put_at(&public.join("public-newer.txt"), b"public wins", 200);
    // The same at depth, with folders on both sides that must merge, not replace.
    write_file(&legacy.join("reports/2025/q1.pdf"), b"q1");
    write_file(&public.join("reports/2025/q2.pdf"), b"q2");
    put_at(
        &legacy.join("reports/2025/summary.md"),
        b"legacy summary",
        300,
    );
    put_at(
        &public.join("reports/2025/summary.md"),
        b"public summary",
        299,
    );
    put_at(&legacy.join("reports/index.md"), b"old index", 10);
    put_at(&public.join("reports/index.md"), b"new index", 11);
    write_file(&legacy.join("reports/2024/only-legacy-dir/x.csv"), b"x");
    std::fs::create_dir_all(legacy.join("reports/empty-legacy-dir")).unwrap();
    // Old deliveries merge into the managed folder.
    put_at(&legacy.join("attachments/old.pdf"), b"old delivery", 5);
    put_at(&legacy.join("attachments/same.pdf"), b"stale", 1);
    put_at(&public.join("attachments/same.pdf"), b"fresh", 2);
    let winner_mtime = mtime(&legacy.join("legacy-newer.txt"));

    let expected = expect(&[
        ("only-legacy.txt", "L"),
        ("only-public.txt", "P"),
        ("legacy-newer.txt", "legacy wins"),
        ("public-newer.txt", "public wins"),
        ("reports/2025/q1.pdf", "q1"),
        ("reports/2025/q2.pdf", "q2"),
        ("reports/2025/summary.md", "legacy summary"),
        ("reports/index.md", "new index"),
        ("reports/2024/only-legacy-dir/x.csv", "x"),
        ("attachments/old.pdf", "old delivery"),
        ("attachments/same.pdf", "fresh"),
    ]);
    let after = touch(&server, Route::List, None, expected.clone());

    assert_eq!(show(&files(&public)), show(&after));
    assert!(!legacy.exists(), "uploads/ must be removed after the merge");
    assert!(public.join("reports/empty-legacy-dir").is_dir());
    // The winner moved in as it was, not rewritten.
    assert_eq!(mtime(&public.join("legacy-newer.txt")), winner_mtime);
    // Only the folders of both trees: nothing set aside.
    assert_eq!(
        dirs(&public),
        [
            "attachments",
            "reports",
            "reports/2024",
            "reports/2024/only-legacy-dir",
            "reports/2025",
            "reports/empty-legacy-dir",
        ]
        .into_iter()
        .map(String::from)
        .collect()
    );
}

#[test]
fn merge_keeps_both_sides_of_a_file_folder_clash() {
    // Not a collision of two files, so neither may be dropped: both survive in public/.
    let server = Server::start();
    let home = server.home("me");
    write_file(&home.join("public/report/part1.md"), b"part one");
    write_file(&home.join("uploads/report"), b"a file called report");
    write_file(&home.join("uploads/data/rows.csv"), b"rows");
    write_file(&home.join("public/data"), b"a file called data");

    touch(&server, Route::List, None, BTreeMap::new());

    assert!(!home.join(LEGACY).exists());
    let public = files(&home.join("public"));
    let mut contents: Vec<&[u8]> = public.values().map(Vec::as_slice).collect();
    contents.sort();
    let mut wanted: Vec<&[u8]> = vec![
        b"a file called report",
        b"rows",
        b"part one",
        b"a file called data",
    ];
    wanted.sort();
    assert_eq!(contents, wanted, "{:?}", show(&public));
    assert_eq!(public["report/part1.md"], b"part one");
    assert_eq!(public["data"], b"a file called data");
}

#[test]
fn legacy_link_is_never_followed() {
    // An `uploads` that is a symlink is not a workspace folder: nothing is pulled through it.
    let server = Server::start();
    let home = server.home("me");
    let outside = tempfile::tempdir().unwrap();
    write_file(&outside.path().join("secret.txt"), b"secret");
    std::os::unix::fs::symlink(outside.path(), home.join(LEGACY)).unwrap();

    let listing = list_files(&server, &server.token, None);
    assert_eq!(listed_paths(&listing), vec!["public/attachments"]);
    assert_eq!(
        files(outside.path()),
        expect(&[("secret.txt", "secret")]),
        "the link's target was touched"
    );
    assert!(!home.join("public/secret.txt").exists());
}

// ---------------------------------------------------------------------------------------
// Projects
// ---------------------------------------------------------------------------------------

#[test]
fn project_legacy_uploads_migrate_on_first_touch_by_each_route() {
    let server = Server::start();
    let main_public = server.home("me").join("public");
    touch(&server, Route::List, None, BTreeMap::new());
    let main_before = files(&main_public);

    for (i, route) in ROUTES.into_iter().enumerate() {
        let project = format!("p{i}");
        let out = server.ferry(&["project", "add", "me", &project]);
        assert!(out.status.success(), "{out:?}");
        // A project made before the rename: uploads/ only.
        let dir = server.workspace("me", Some(&project));
        std::fs::remove_dir_all(dir.join("public")).unwrap();
        plant_legacy(&dir);

        let expected = touch(&server, route, Some(&project), planted());

        assert!(
            !dir.join(LEGACY).exists(),
            "{route:?}: {project} kept uploads/"
        );
        assert_eq!(
            show(&files(&dir.join("public"))),
            show(&expected),
            "{route:?}"
        );
    }
    // Nothing crossed into the main workspace.
    assert_eq!(files(&main_public), main_before);
}

#[test]
fn project_merge_when_both_present() {
    let server = Server::start();
    let out = server.ferry(&["project", "add", "me", "q2"]);
    assert!(out.status.success(), "{out:?}");
    let dir = server.workspace("me", Some("q2"));
    put_at(&dir.join("uploads/draft.md"), b"legacy newer", 9);
    put_at(&dir.join("public/draft.md"), b"public older", 8);
    write_file(&dir.join("uploads/sub/one.txt"), b"1");
    write_file(&dir.join("public/sub/two.txt"), b"2");

    let after = touch(
        &server,
        Route::List,
        Some("q2"),
        expect(&[
            ("draft.md", "legacy newer"),
            ("sub/one.txt", "1"),
            ("sub/two.txt", "2"),
        ]),
    );
    assert_eq!(show(&files(&dir.join("public"))), show(&after));
    assert!(!dir.join(LEGACY).exists());
    // The main workspace was not populated from the project.
    assert!(!server.home("me").join("public/draft.md").exists());
}

// ---------------------------------------------------------------------------------------
// Concurrency and crashes
// ---------------------------------------------------------------------------------------

/// Plants a big legacy tree with `public/` also present (sharing folders and some names)
/// under `container`, all names carrying `tag`; returns what public/ must hold afterwards.
fn plant_big(container: &Path, tag: &str) -> BTreeMap<String, Vec<u8>> {
    let legacy = container.join(LEGACY);
    let public = container.join("public");
    let mut expected = BTreeMap::new();
    for i in 0..300u64 {
        let rel = format!("{tag}/d{}/s{}/f{i}.txt", i % 10, i % 3);
        let body = format!("{tag} file {i}");
        match i % 6 {
            // Both sides; the newer copy alternates between them.
            0 => {
                put_at(
                    &legacy.join(&rel),
                    format!("legacy {body}").as_bytes(),
                    2 * i + 1,
                );
                put_at(
                    &public.join(&rel),
                    format!("public {body}").as_bytes(),
                    2 * i,
                );
                expected.insert(rel, format!("legacy {body}").into_bytes());
            }
            1 => {
                put_at(
                    &legacy.join(&rel),
                    format!("legacy {body}").as_bytes(),
                    2 * i,
                );
                put_at(
                    &public.join(&rel),
                    format!("public {body}").as_bytes(),
                    2 * i + 1,
                );
                expected.insert(rel, format!("public {body}").into_bytes());
            }
            2 | 3 => {
                write_file(&public.join(&rel), body.as_bytes());
                expected.insert(rel, body.into_bytes());
            }
            _ => {
                write_file(&legacy.join(&rel), body.as_bytes());
                expected.insert(rel, body.into_bytes());
            }
        }
    }
    // Top-level files too, so the folder-by-folder merge is raced at every level.
    for i in 0..20 {
        let rel = format!("{tag}-top-{i}.txt");
        write_file(&legacy.join(&rel), rel.as_bytes());
        expected.insert(rel.clone(), rel.into_bytes());
    }
    expected
}

/// `n` requests at once on a workspace with a big legacy tree; all must succeed and every
/// file must end up in public/ exactly once.
fn concurrent_first_touch(n: usize, tag: &str) {
    let server = Arc::new(Server::start());
    let home = server.home("me");
    touch(&server, Route::List, None, BTreeMap::new());
    let expected = plant_big(&home, tag);
    // One file only the legacy side has, for the downloads to fetch.
    let probe = format!("{tag}/d4/s1/f4.txt");
    assert!(home.join(LEGACY).join(&probe).is_file());

    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let server = server.clone();
            let barrier = barrier.clone();
            let probe = probe.clone();
            std::thread::spawn(move || {
                let http = client();
                let request = match i % 4 {
                    0 | 2 => http.get(server.url("/v1/files")),
                    1 => http.get(server.url(&format!("/v1/files/content?path=public/{probe}"))),
                    _ => http
                        .post(server.url("/v1/files/mkdir"))
                        .json(&json!({"path": format!("public/made-{i}")})),
                };
                let request = request.bearer_auth(&server.token);
                barrier.wait();
                let response = request.send().unwrap();
                let status = response.status().as_u16();
                let body = response.bytes().unwrap();
                (i, status, body)
            })
        })
        .collect();
    for handle in handles {
        let (i, status, body) = handle.join().unwrap();
        let text = String::from_utf8_lossy(&body);
        match i % 4 {
            0 | 2 => assert_eq!(status, 200, "request {i}: {text}"),
            1 => {
                assert_eq!(status, 200, "request {i}: {text}");
                assert_eq!(body.as_ref(), expected[&probe].as_slice());
            }
            _ => assert_eq!(status, 201, "request {i}: {text}"),
        }
    }

    assert!(
        !home.join(LEGACY).exists(),
        "uploads/ is left after concurrent requests"
    );
    let public = files(&home.join("public"));
    let missing: Vec<_> = expected
        .keys()
        .filter(|k| !public.contains_key(*k))
        .collect();
    let extra: Vec<_> = public
        .keys()
        .filter(|k| !expected.contains_key(*k))
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}, extra {extra:?}"
    );
    for (rel, bytes) in &expected {
        assert_eq!(&public[rel], bytes, "{rel}");
    }
    // Each file exists once: no temporaries, no copies set aside under another name.
    assert!(
        support::tree(&home.join("public"))
            .iter()
            .all(|p| !p.contains(".ferry-tmp-") && !p.contains("-from-")),
        "{:?}",
        support::tree(&home.join("public"))
    );
}

#[test]
fn two_concurrent_first_touches_migrate_once() {
    concurrent_first_touch(2, "two");
}

#[test]
fn eight_concurrent_first_touches_migrate_once() {
    concurrent_first_touch(8, "eight");
}

#[test]
fn interrupted_migration_is_completed_without_loss() {
    let server = Server::start();
    let home = server.home("me");
    let legacy = home.join(LEGACY);
    let public = home.join("public");
    // The state a crash leaves: some files already renamed into public/, others still in
    // uploads/, one folder half merged, an emptied folder not yet removed, a collision not
    // yet decided, and temporaries of writes that never committed.
    write_file(&public.join("moved-already.txt"), b"moved");
    std::fs::create_dir_all(public.join("attachments")).unwrap();
    write_file(&legacy.join("not-yet.txt"), b"waiting");
    write_file(&public.join("half/done.md"), b"done");
    write_file(&legacy.join("half/todo.md"), b"todo");
    write_file(&public.join("half/deeper/in-public.csv"), b"p");
    write_file(&legacy.join("half/deeper/in-legacy.csv"), b"l");
    std::fs::create_dir_all(legacy.join("emptied")).unwrap();
    std::fs::create_dir_all(public.join("emptied")).unwrap();
    write_file(&public.join("emptied/was-here.txt"), b"w");
    put_at(&legacy.join("undecided.txt"), b"legacy newer", 20);
    put_at(&public.join("undecided.txt"), b"public older", 10);
    write_file(&legacy.join(".ferry-tmp-x"), b"half a write");
    write_file(&legacy.join("half/.ferry-tmp-y"), b"half another");

    let expected = expect(&[
        ("moved-already.txt", "moved"),
        ("not-yet.txt", "waiting"),
        ("half/done.md", "done"),
        ("half/todo.md", "todo"),
        ("half/deeper/in-public.csv", "p"),
        ("half/deeper/in-legacy.csv", "l"),
        ("emptied/was-here.txt", "w"),
        ("undecided.txt", "legacy newer"),
    ]);
    let after = touch(&server, Route::List, None, expected);
    assert_eq!(show(&files(&public)), show(&after));
    assert!(!legacy.exists());

    // A crash after the last file moved but before uploads/ was removed.
    std::fs::create_dir_all(legacy.join("nested-empty")).unwrap();
    let again = touch(&server, Route::List, None, after);
    assert_eq!(show(&files(&public)), show(&again));
    assert!(!legacy.exists());
    assert!(public.join("nested-empty").is_dir());
    assert!(
        !support::tree(&public)
            .iter()
            .any(|p| p.contains(".ferry-tmp-"))
    );
}

// ---------------------------------------------------------------------------------------
// Nothing creates uploads/
// ---------------------------------------------------------------------------------------

#[test]
fn no_route_or_command_creates_uploads() {
    let server = Server::start();
    let http = client();
    let alice = server.add_person("alice");
    let out = server.ferry(&["project", "add", "me", "cli-proj"]);
    assert!(out.status.success(), "{out:?}");
    create_project(&server, &server.token, "api-proj");
    let out = server.ferry(&["token", "create", "alice", "--kind", "admin"]);
    assert!(out.status.success(), "{out:?}");

    for project in [None, Some("cli-proj"), Some("api-proj")] {
        // Start from a workspace holding what the routes act on.
        write_file(
            &server.workspace("me", project).join("public/a.txt"),
            b"alpha",
        );
        write_file(
            &server.workspace("me", project).join("public/notes/b.md"),
            b"beta",
        );
        let mut state = files(&server.workspace("me", project).join("public"));
        for route in ROUTES {
            state = touch(&server, route, project, state);
        }
        assert_eq!(
            files(&server.workspace("me", project).join("public")),
            state
        );
    }
    list_files(&server, &alice, None);
    for path in ["/v1/projects", "/v1/files?project=api-proj"] {
        http.get(server.url(path))
            .bearer_auth(&server.token)
            .send()
            .unwrap();
    }

    assert_eq!(legacy_entries(&server.data), Vec::<String>::new());
    // And the site has the workspaces the routes used, so the walk saw them.
    assert!(server.home("alice").join("public/attachments").is_dir());
    assert!(
        server
            .workspace("me", Some("api-proj"))
            .join("public/attachments")
            .is_dir()
    );
}

/// The contents of the string literals of Rust source (comments and char literals
/// skipped), each with whether it lies inside a `#[cfg(test)]` item.
fn string_literals(src: &str) -> Vec<(String, bool)> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut depth = 0usize;
    // The brace depth a `#[cfg(test)]` item opened at, while inside it.
    let mut test_depth: Option<usize> = None;
    let mut test_pending = false;
    while i < b.len() {
        let rest = &src[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            let mut nest = 0;
            while i < b.len() {
                if src[i..].starts_with("/*") {
                    nest += 1;
                    i += 2;
                } else if src[i..].starts_with("*/") {
                    nest -= 1;
                    i += 2;
                    if nest == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if rest.starts_with("#[cfg(test)]") {
            test_pending = true;
            i += "#[cfg(test)]".len();
        } else if let Some(hashes) = raw_string_start(rest) {
            // r"…", r#"…"#, br#"…"#
            let open = rest.find('"').unwrap() + 1;
            let close = format!("\"{}", "#".repeat(hashes));
            let len = rest[open..].find(&close).unwrap();
            out.push((rest[open..open + len].to_owned(), test_depth.is_some()));
            i += open + len + close.len();
        } else if b[i] == b'"' {
            let start = i + 1;
            let mut j = start;
            while b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push((src[start..j].to_owned(), test_depth.is_some()));
            i = j + 1;
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\u{..}', '"') or a lifetime ('a).
            if b.get(i + 1) == Some(&b'\\') {
                // Past the quote, the backslash and the escaped character.
                i += 3;
                while b[i] != b'\'' {
                    i += 1;
                }
                i += 1;
            } else {
                let ch_len = rest[1..].chars().next().map_or(1, char::len_utf8);
                if b.get(i + 1 + ch_len) == Some(&b'\'') {
                    i += 2 + ch_len;
                } else {
                    i += 1;
                }
            }
        } else {
            match b[i] {
                b'{' => {
                    if test_pending && test_depth.is_none() {
                        test_depth = Some(depth);
                    }
                    test_pending = false;
                    depth += 1;
                }
                b'}' => {
                    depth = depth.saturating_sub(1);
                    if test_depth == Some(depth) {
                        test_depth = None;
                    }
                }
                b';' if test_depth.is_none() => test_pending = false,
                _ => {}
            }
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    out
}

/// `Some(number of #)` if `s` starts a raw string literal.
fn raw_string_start(s: &str) -> Option<usize> {
    let s = s.strip_prefix('b').unwrap_or(s).strip_prefix('r')?;
    let hashes = s.len() - s.trim_start_matches('#').len();
    s[hashes..].starts_with('"').then_some(hashes)
}

/// Whether a string literal names `uploads` as a path component: the whole literal, or
/// `uploads` bounded by `/`, `\` or the ends of the literal (so `uploads/x`, `~/uploads`,
/// but not the English word in "member uploads" nor `-from-uploads` suffixes).
fn names_legacy_path(literal: &str) -> bool {
    let is_sep = |c: Option<char>| c.is_none_or(|c| c == '/' || c == '\\');
    literal.match_indices(LEGACY).any(|(at, _)| {
        // The API's resumable uploads (`/v1/uploads`, spec M-DAILY) are a route, not a
        // folder.
        if literal[..at].ends_with("v1/") {
            return false;
        }
        let before = literal[..at].chars().next_back();
        let after = literal[at + LEGACY.len()..].chars().next();
        is_sep(before) && is_sep(after)
    })
}

#[test]
fn legacy_name_is_spelled_only_by_the_migration() {
    // The rule: outside test code, a string literal naming `uploads` as a path component
    // appears only in crates/ferry-site/src/layout.rs (the one constant,
    // LEGACY_PUBLIC_DIR_NAME) and crates/ferry-docs/src/lint.rs (which checks documents
    // for it); and the constant itself is used only by migrate.rs (layout.rs defines
    // it). Comments and prose ("member uploads") are not paths and do not count; test code
    // is crates/*/tests/ and `#[cfg(test)]` items.
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut sources = Vec::new();
    let mut stack = vec![crates.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() && entry.file_name() != "target" {
                stack.push(path);
            } else if kind.is_file() && path.extension().is_some_and(|e| e == "rs") {
                sources.push(path);
            }
        }
    }
    sources.sort();
    assert!(
        sources.len() > 10,
        "the scan found too few sources: {sources:?}"
    );

    let mut offenders = Vec::new();
    let mut in_layout = 0;
    let mut constant_users = Vec::new();
    for path in &sources {
        let rel = path
            .strip_prefix(&crates)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let src = std::fs::read_to_string(path).unwrap();
        let test_file = rel.split('/').nth(1) == Some("tests");
        for (literal, in_test_item) in string_literals(&src) {
            if !names_legacy_path(&literal) || test_file || in_test_item {
                continue;
            }
            match rel.as_str() {
                "ferry-site/src/layout.rs" => in_layout += 1,
                "ferry-docs/src/lint.rs" => {}
                _ => offenders.push(format!("{rel}: {literal:?}")),
            }
        }
        if src.contains("LEGACY_PUBLIC_DIR_NAME")
            && !matches!(
                rel.as_str(),
                "ferry-site/src/migrate.rs" | "ferry-site/src/layout.rs"
            )
        {
            constant_users.push(rel);
        }
    }
    assert!(
        offenders.is_empty(),
        "code spells the legacy folder: {offenders:#?}"
    );
    assert_eq!(
        in_layout, 1,
        "layout.rs should spell \"uploads\" once, in its constant"
    );
    assert!(
        constant_users.is_empty(),
        "LEGACY_PUBLIC_DIR_NAME used outside the migration: {constant_users:?}"
    );
}

#[test]
fn the_scanner_sees_what_it_must() {
    // Guards the rule above against a scanner that finds nothing.
    let src = r##"
        // "uploads/" in a comment
        /* "uploads" */
        const A: &str = "member uploads";
        const B: &str = "uploads";
        fn f<'a>(x: &'a str) -> char { let _ = format!("{x}-from-uploads"); '"' }
        const C: &str = r#"~/uploads/x"#;
        fn g() -> (char, &'static str) { ('\'', "/uploads") }
        #[cfg(test)]
        mod tests { const D: &str = "uploads/y"; }
        const E: &str = "a\"uploads";
    "##;
    let found: Vec<(String, bool)> = string_literals(src)
        .into_iter()
        .filter(|(l, _)| names_legacy_path(l))
        .collect();
    assert_eq!(
        found,
        vec![
            ("uploads".to_owned(), false),
            ("~/uploads/x".to_owned(), false),
            ("/uploads".to_owned(), false),
            ("uploads/y".to_owned(), true),
        ]
    );
}
