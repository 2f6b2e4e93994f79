//! `POST /v1/deliveries` end to end (spec members M-DELIVER, M-AUTH; core C-NAME,
//! C-ATOMIC, C-PATH, C-LIMIT): a real gateway fetching from a scripted loopback peer.

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use support::{
    Peer, Reply, Server, assert_error, assert_link_to, client, config_value, error_code,
    ferry_command, finish, json_answer, list_files, sha256_hex, tree,
};

/// The cap the size tests lower deliveries to.
const LIMIT: usize = 1000;

/// A server, and a harness token for its person `me`.
fn start_with_env(env: &[(&str, &str)]) -> (Server, String) {
    let server = Server::start_with_env(env);
    let harness = server.create_token("me", "harness");
    (server, harness)
}

fn start() -> (Server, String) {
    start_with_env(&[])
}

/// A server whose deliveries are capped at [`LIMIT`] bytes.
fn start_capped() -> (Server, String) {
    start_with_env(&[("FERRY_DELIVERIES__MAX_BYTES", "1000")])
}

/// Posts a delivery; returns the status and the JSON body.
fn deliver(server: &Server, token: Option<&str>, request: Value) -> (u16, Value) {
    let mut builder = client().post(server.url("/v1/deliveries")).json(&request);
    if let Some(token) = token {
        builder = builder.bearer_auth(token);
    }
    json_answer(builder.send().unwrap())
}

/// `home/me/public/attachments` on disk.
fn attachments(server: &Server) -> PathBuf {
    server.home("me").join("public").join("attachments")
}

/// Asserts a `201` answer for `name` carrying `bytes`, and the file on disk under `dir`.
fn assert_delivered(status: u16, body: &Value, dir: &Path, name: &str, bytes: &[u8]) {
    assert_eq!(status, 201, "{body}");
    let path = format!("public/attachments/{name}");
    assert_eq!(body["path"], path.as_str(), "{body}");
    assert_eq!(body["size"], bytes.len(), "{body}");
    assert_eq!(body["sha256"], sha256_hex(bytes).as_str(), "{body}");
    assert_eq!(
        body["notice"],
        format!("📎 {name} — public/attachments/{name}").as_str(),
        "{body}"
    );
    let on_disk = std::fs::read(dir.join(name))
        .unwrap_or_else(|e| panic!("{name} is not in {}: {e}", dir.display()));
    assert_eq!(on_disk, bytes, "the bytes on disk of {name}");
}

/// Nothing at all under `dir`: no file, no `.ferry-tmp-*` (a missing `dir` is empty too).
fn assert_nothing_kept(dir: &Path) {
    assert_eq!(tree(dir), Vec::<String>::new(), "left in {}", dir.display());
}

/// A peer that answers every path with `reply`.
fn serving(reply: Reply) -> Peer {
    Peer::start(move |_| reply.clone())
}

/// A reply without `Content-Length`: the body is `chunks`, ended by closing the connection.
fn unsized_reply(chunks: Vec<Vec<u8>>) -> Reply {
    Reply {
        status: 200,
        headers: Vec::new(),
        chunks,
        chunk_delay: Duration::ZERO,
        content_length: false,
    }
}

fn status_reply(status: u16, body: &str) -> Reply {
    Reply {
        status,
        ..Reply::ok(body)
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

// ---------------------------------------------------------------------------------------
// Naming (M-DELIVER, C-NAME)
// ---------------------------------------------------------------------------------------

/// A naming case: content, Content-Disposition, URL path, filename, the name it lands as.
type NamingCase = (
    &'static str,
    Option<&'static str>,
    &'static str,
    Option<&'static str>,
    &'static str,
);

#[test]
fn deliveries_are_named_by_filename_then_disposition_then_url() {
    let (server, harness) = start();
    let cases: [NamingCase; 5] = [
        // An explicit filename wins over the disposition and the URL.
        (
            "explicit",
            Some("attachment; filename=\"from-cd.txt\""),
            "/files/from-url.txt",
            Some("given.txt"),
            "given.txt",
        ),
        // The extended disposition names the file.
        (
            "relatório",
            Some("attachment; filename*=UTF-8''relat%C3%B3rio.pdf"),
            "/files/from-url.bin",
            None,
            "relatório.pdf",
        ),
        // The plain disposition names it, made safe.
        (
            "ab",
            Some("attachment; filename=\"a b.pdf\""),
            "/files/from-url.bin",
            None,
            "a_b.pdf",
        ),
        // Else the URL's last segment, without its query.
        (
            "a,b\n1,2\n",
            None,
            "/files/report.csv?x=1",
            None,
            "report.csv",
        ),
        // An empty filename counts as none.
        ("x", None, "/files/report.csv", Some(""), "report.csv"),
    ];
    for (content, disposition, url_path, filename, name) in cases {
        let mut reply = Reply::ok(content);
        if let Some(disposition) = disposition {
            reply = reply.header("Content-Disposition", disposition);
        }
        let peer = serving(reply);
        let mut request = json!({"url": peer.url(url_path)});
        if let Some(filename) = filename {
            request["filename"] = json!(filename);
        }
        let (status, body) = deliver(&server, Some(&harness), request);
        assert_delivered(
            status,
            &body,
            &attachments(&server),
            name,
            content.as_bytes(),
        );
        assert_eq!(tree(&attachments(&server)), vec![name], "{content:?}");
        // Each case starts from empty attachments, as it did in a server of its own.
        std::fs::remove_file(attachments(&server).join(name)).unwrap();
    }
}

fn is_fallback_name(name: &str) -> bool {
    name.strip_prefix("attachment-").is_some_and(|id| {
        id.len() == 8
            && id
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    })
}

#[test]
fn deliveries_without_any_name_fall_back_to_attachment_id() {
    let (server, harness) = start();
    let peer = serving(Reply::ok("nameless"));
    let (status, body) = deliver(&server, Some(&harness), json!({"url": peer.url("/")}));
    assert_eq!(status, 201, "{body}");
    let path = body["path"].as_str().unwrap();
    let name = path.strip_prefix("public/attachments/").unwrap();
    assert!(is_fallback_name(name), "{name:?} is not attachment-<8 hex>");
    assert_delivered(status, &body, &attachments(&server), name, b"nameless");
    assert_eq!(tree(&attachments(&server)), vec![name.to_owned()]);
}

#[test]
fn deliveries_filename_is_made_safe() {
    let (server, harness) = start();
    let peer = serving(Reply::ok("safe"));
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": peer.url("/f"), "filename": "../../x.txt"}),
    );
    assert_delivered(status, &body, &attachments(&server), "x.txt", b"safe");
    // Nothing landed where the dots pointed.
    assert!(!server.home("me").join("x.txt").exists());
    assert!(!server.home("me").join("public/x.txt").exists());
    assert!(!server.data.join("home/x.txt").exists());
    assert_eq!(tree(&attachments(&server)), vec!["x.txt"]);
}

#[test]
fn deliveries_name_with_nothing_safe_left_uses_the_fallback() {
    // C-NAME refuses `...`; a delivery still arrives, under attachment-<id>.
    let (server, harness) = start();
    let peer = serving(Reply::ok("dots"));
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": peer.url("/f.txt"), "filename": "..."}),
    );
    assert_eq!(status, 201, "{body}");
    let name = body["path"]
        .as_str()
        .unwrap()
        .strip_prefix("public/attachments/")
        .unwrap()
        .to_owned();
    assert!(is_fallback_name(&name), "{name:?}");
    assert_delivered(status, &body, &attachments(&server), &name, b"dots");
}

#[test]
fn deliveries_have_no_extension_allowlist() {
    let (server, harness) = start();
    let peer = serving(Reply::ok("MZ binary"));
    for name in ["tool.exe", "noext"] {
        let (status, body) = deliver(
            &server,
            Some(&harness),
            json!({"url": peer.url("/download"), "filename": name}),
        );
        assert_delivered(status, &body, &attachments(&server), name, b"MZ binary");
    }
    assert_eq!(tree(&attachments(&server)), vec!["noext", "tool.exe"]);
}

#[test]
fn deliveries_same_name_overwrites() {
    let (server, harness) = start();
    let peer = Peer::start(|path| match path {
        "/one" => Reply::ok("first version, longer"),
        _ => Reply::ok("second"),
    });
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": peer.url("/one"), "filename": "same.txt"}),
    );
    assert_delivered(
        status,
        &body,
        &attachments(&server),
        "same.txt",
        b"first version, longer",
    );
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": peer.url("/two"), "filename": "same.txt"}),
    );
    assert_delivered(status, &body, &attachments(&server), "same.txt", b"second");
    assert_eq!(tree(&attachments(&server)), vec!["same.txt"]);
}

// ---------------------------------------------------------------------------------------
// The cap (C-LIMIT DELIVERY_MAX_BYTES), counted on decoded bytes while streaming
// ---------------------------------------------------------------------------------------

#[test]
fn deliveries_cap_boundaries_with_content_length() {
    let (server, harness) = start_capped();
    let peer = Peer::start(|path| {
        let n: usize = path.trim_start_matches('/').parse().unwrap();
        Reply::ok(vec![b'a'; n])
    });
    for n in [LIMIT - 1, LIMIT] {
        let name = format!("len-{n}.bin");
        let (status, body) = deliver(
            &server,
            Some(&harness),
            json!({"url": peer.url(&format!("/{n}")), "filename": name}),
        );
        assert_delivered(status, &body, &attachments(&server), &name, &vec![b'a'; n]);
    }
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": peer.url(&format!("/{}", LIMIT + 1)), "filename": "over.bin"}),
    );
    assert_error(status, &body, 413, "too_large");
    assert_eq!(
        tree(&attachments(&server)),
        vec!["len-1000.bin", "len-999.bin"],
        "the oversized delivery left something behind"
    );
}

#[test]
fn deliveries_over_cap_is_refused_and_nothing_kept() {
    let (server, harness) = start_capped();
    let peer = serving(Reply::ok(vec![b'z'; LIMIT + 1]));
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": peer.url("/big.bin")}),
    );
    assert_error(status, &body, 413, "too_large");
    assert_nothing_kept(&attachments(&server));
}

#[test]
fn deliveries_without_content_length_at_cap_pass() {
    let (server, harness) = start_capped();
    let peer = serving(unsized_reply(vec![vec![b'c'; LIMIT / 4]; 4]));
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": peer.url("/exact.bin")}),
    );
    assert_delivered(
        status,
        &body,
        &attachments(&server),
        "exact.bin",
        &vec![b'c'; LIMIT],
    );
}

#[test]
fn deliveries_without_content_length_over_cap_are_cut_off() {
    let (server, harness) = start_capped();
    // 4 x 300 = 1200 bytes, no Content-Length: only counting while streaming can see it.
    let peer = serving(unsized_reply(vec![vec![b'c'; 300]; 4]));
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": peer.url("/stream.bin")}),
    );
    assert_error(status, &body, 413, "too_large");
    assert_nothing_kept(&attachments(&server));
}

#[test]
fn deliveries_without_content_length_one_byte_over_cap_is_refused() {
    let (server, harness) = start_capped();
    let mut chunks = vec![vec![b'c'; LIMIT / 4]; 4];
    chunks.push(vec![b'c']);
    let peer = serving(unsized_reply(chunks));
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": peer.url("/stream.bin")}),
    );
    assert_error(status, &body, 413, "too_large");
    assert_nothing_kept(&attachments(&server));
}

#[test]
fn deliveries_gzip_bomb_is_refused_and_nothing_kept() {
    let (server, harness) = start_capped();
    // 8 MiB of zeros compress to a few KiB; the gateway must count what it decodes.
    let decoded = vec![0u8; 8 * 1024 * 1024];
    let bomb = gzip(&decoded);
    assert!(
        bomb.len() < decoded.len() / 100,
        "the bomb compresses: {} bytes",
        bomb.len()
    );
    let peer = serving(Reply::ok(bomb).header("Content-Encoding", "gzip"));
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": peer.url("/bomb.bin")}),
    );
    assert_error(status, &body, 413, "too_large");
    assert_nothing_kept(&attachments(&server));
}

#[test]
fn deliveries_gzip_bomb_smaller_than_cap_on_the_wire_is_refused() {
    let (server, harness) = start_capped();
    // The compressed body itself is under the cap; only its decoded size is over it.
    let decoded = vec![b'q'; 50_000];
    let small = gzip(&decoded);
    assert!(small.len() < LIMIT, "compressed to {} bytes", small.len());
    let peer = serving(Reply::ok(small).header("Content-Encoding", "gzip"));
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": peer.url("/bomb.txt")}),
    );
    assert_error(status, &body, 413, "too_large");
    assert_nothing_kept(&attachments(&server));
}

#[test]
fn deliveries_gzip_body_within_cap_is_stored_decoded() {
    let (server, harness) = start_capped();
    let decoded: Vec<u8> = (0..LIMIT).map(|i| b"hello gzip "[i % 11]).collect();
    let peer = serving(Reply::ok(gzip(&decoded)).header("Content-Encoding", "gzip"));
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": peer.url("/hello.txt")}),
    );
    assert_delivered(status, &body, &attachments(&server), "hello.txt", &decoded);
}

/// `ferry serve --print-config` on an empty data dir, with no FERRY_ variables.
fn print_config() -> String {
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = ferry_command();
    cmd.args(["serve", "--print-config", "--data"])
        .arg(tmp.path());
    let out = finish(cmd);
    assert!(out.status.success(), "{}", out.stderr);
    out.stdout
}

#[test]
fn deliveries_default_cap_is_64_mib_and_timeout_60_s() {
    let config = print_config();
    let get = |key: &str| {
        config_value(&config, "deliveries", key)
            .unwrap_or_else(|| panic!("no deliveries.{key} in:\n{config}"))
    };
    assert_eq!(
        get("max_bytes"),
        (64u64 * 1024 * 1024).to_string(),
        "{config}"
    );
    assert_eq!(get("timeout_secs"), "60", "{config}");
}

// ---------------------------------------------------------------------------------------
// Timeout (C-LIMIT DELIVERY_TIMEOUT, for the whole fetch)
// ---------------------------------------------------------------------------------------

fn start_short_timeout() -> (Server, String) {
    start_with_env(&[("FERRY_DELIVERIES__TIMEOUT_SECS", "1")])
}

#[test]
fn deliveries_trickling_body_times_out_and_nothing_kept() {
    let (server, harness) = start_short_timeout();
    // Headers at once, then 10 bytes every 500 ms for 20 s: every chunk is "on time", the
    // whole fetch is not.
    let peer = serving(Reply {
        status: 200,
        headers: Vec::new(),
        chunks: vec![vec![b't'; 10]; 40],
        chunk_delay: Duration::from_millis(500),
        content_length: true,
    });
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": peer.url("/slow.txt")}),
    );
    assert_error(status, &body, 504, "upstream_timeout");
    assert_nothing_kept(&attachments(&server));
}

#[test]
fn deliveries_trickling_body_without_length_times_out_and_nothing_kept() {
    let (server, harness) = start_short_timeout();
    let mut reply = unsized_reply(vec![vec![b't'; 10]; 40]);
    reply.chunk_delay = Duration::from_millis(500);
    let peer = serving(reply);
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": peer.url("/slow.txt")}),
    );
    assert_error(status, &body, 504, "upstream_timeout");
    assert_nothing_kept(&attachments(&server));
}

/// A listener that accepts, reads the request and then says nothing for `silence`.
fn silent_peer(silence: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                std::thread::sleep(silence);
                drop(stream);
            });
        }
    });
    base
}

#[test]
fn deliveries_silent_upstream_times_out() {
    let (server, harness) = start_short_timeout();
    let base = silent_peer(Duration::from_secs(30));
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": format!("{base}/never.txt")}),
    );
    assert_error(status, &body, 504, "upstream_timeout");
    assert_nothing_kept(&attachments(&server));
}

// ---------------------------------------------------------------------------------------
// Upstream failures and bad URLs
// ---------------------------------------------------------------------------------------

#[test]
fn deliveries_upstream_non_2xx_is_bad_gateway() {
    let (server, harness) = start();
    let peer = Peer::start(|path| match path {
        "/missing" => status_reply(404, "not here"),
        _ => status_reply(500, "broken"),
    });
    for (path, number, words) in [
        ("/missing", "HTTP 404", ["Not Found", "not here"]),
        ("/broken", "HTTP 500", ["Internal Server Error", "broken"]),
    ] {
        let (status, body) = deliver(
            &server,
            Some(&harness),
            json!({"url": peer.url(path), "filename": "x.txt"}),
        );
        assert_error(status, &body, 502, "upstream_error");
        // The status number, said once; never the upstream's status text or body.
        let message = body["error"]["message"].as_str().unwrap();
        assert_eq!(message.matches(number).count(), 1, "{message}");
        for words in words {
            assert!(!message.contains(words), "{message} repeats {words:?}");
        }
    }
    assert_nothing_kept(&attachments(&server));
}

#[test]
fn deliveries_connection_refused_is_bad_gateway() {
    let (server, harness) = start();
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": format!("http://127.0.0.1:{port}/x.txt")}),
    );
    assert_error(status, &body, 502, "upstream_error");
    assert_nothing_kept(&attachments(&server));
}

#[test]
fn deliveries_bad_urls_are_refused() {
    let (server, harness) = start();
    for url in [
        "ftp://x/y",
        "file:///etc/passwd",
        "/x",
        "x.txt",
        "not a url at all",
        "",
        "http://",
        "javascript:alert(1)",
        "data:text/plain,hello",
    ] {
        let (status, body) = deliver(&server, Some(&harness), json!({ "url": url }));
        assert_eq!(status, 400, "{url:?}: {body}");
        assert_eq!(error_code(&body), "bad_url", "{url:?}: {body}");
    }
    // A URL the parser takes but no request line can carry: the client's mistake.
    let long = format!("http://127.0.0.1:9/{}", "a".repeat(70_000));
    let (status, body) = deliver(&server, Some(&harness), json!({ "url": long }));
    assert_eq!(status, 400, "{body}");
    assert_eq!(error_code(&body), "bad_url", "{body}");
    assert_nothing_kept(&attachments(&server));
}

// ---------------------------------------------------------------------------------------
// Who may deliver, and where (M-AUTH, M-PROJ)
// ---------------------------------------------------------------------------------------

/// A peer that counts how often it was asked.
fn counting_peer() -> (Peer, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let peer = Peer::start(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
        Reply::ok("secret")
    });
    (peer, hits)
}

#[test]
fn deliveries_need_a_harness_token() {
    let (server, _harness) = start();
    let person = server.create_token("me", "person");
    let (peer, hits) = counting_peer();
    let request = json!({"url": peer.url("/x.txt")});
    for (who, token) in [
        ("person", Some(person.as_str())),
        ("admin", Some(server.token.as_str())),
        ("none", None),
        ("unknown", Some("ferry_not_a_real_token_0123456789abcdef")),
    ] {
        let (status, body) = deliver(&server, token, request.clone());
        assert_eq!(status, 401, "{who}: {body}");
        assert_eq!(error_code(&body), "unauthorized", "{who}: {body}");
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "a refused request fetched the url"
    );
    assert_nothing_kept(&attachments(&server));
}

#[test]
fn deliveries_to_unknown_project_are_not_found() {
    let (server, harness) = start();
    support::last_line(&server.ferry(&["person", "add", "bob"]));
    let out = server.ferry(&["project", "add", "bob", "bobs"]);
    assert!(out.status.success(), "{out:?}");
    let (peer, hits) = counting_peer();
    for project in ["nope", "bobs", "../me", "NOPE"] {
        let (status, body) = deliver(
            &server,
            Some(&harness),
            json!({"url": peer.url("/x.txt"), "project": project}),
        );
        assert_error(status, &body, 404, "unknown_project");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    assert_nothing_kept(&server.home("bob").join("projects/bobs/public/attachments"));
    assert_nothing_kept(&attachments(&server));
}

#[test]
fn deliveries_into_a_project() {
    let (server, harness) = start();
    let out = server.ferry(&["project", "add", "me", "q2-report"]);
    assert!(out.status.success(), "{out:?}");
    let peer = serving(Reply::ok("quarterly"));
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": peer.url("/files/q2.pdf"), "project": "q2-report"}),
    );
    let project_attachments = server
        .home("me")
        .join("projects/q2-report/public/attachments");
    assert_delivered(status, &body, &project_attachments, "q2.pdf", b"quarterly");
    assert_eq!(tree(&project_attachments), vec!["q2.pdf"]);
    assert_nothing_kept(&attachments(&server));
}

#[test]
fn deliveries_go_to_the_harness_persons_workspace() {
    let (server, _harness) = start();
    support::last_line(&server.ferry(&["person", "add", "bob"]));
    let bob_harness = server.create_token("bob", "harness");
    let peer = serving(Reply::ok("for bob"));
    let (status, body) = deliver(
        &server,
        Some(&bob_harness),
        json!({"url": peer.url("/bob.txt")}),
    );
    let bob_attachments = server.home("bob").join("public/attachments");
    assert_delivered(status, &body, &bob_attachments, "bob.txt", b"for bob");
    assert_nothing_kept(&attachments(&server));
}

// ---------------------------------------------------------------------------------------
// Symlinks (C-PATH)
// ---------------------------------------------------------------------------------------

/// Makes sure `public/attachments` exists (it is created on first access).
fn touch_public(server: &Server) {
    list_files(server, &server.token, None);
    assert!(attachments(server).is_dir());
}

#[test]
fn deliveries_refuse_attachments_linked_outside() {
    let (server, harness) = start();
    touch_public(&server);
    let outside = tempfile::tempdir().unwrap();
    std::fs::remove_dir(attachments(&server)).unwrap();
    std::os::unix::fs::symlink(outside.path(), attachments(&server)).unwrap();

    let peer = serving(Reply::ok("escape"));
    let (status, body) = deliver(&server, Some(&harness), json!({"url": peer.url("/x.txt")}));
    assert_error(status, &body, 400, "path_escapes");
    assert_nothing_kept(outside.path());
    assert!(
        std::fs::symlink_metadata(attachments(&server))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn deliveries_refuse_public_linked_outside() {
    let (server, harness) = start();
    touch_public(&server);
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(outside.path().join("attachments")).unwrap();
    let public = server.home("me").join("public");
    std::fs::remove_dir_all(&public).unwrap();
    std::os::unix::fs::symlink(outside.path(), &public).unwrap();

    let peer = serving(Reply::ok("escape"));
    let (status, body) = deliver(&server, Some(&harness), json!({"url": peer.url("/x.txt")}));
    assert_error(status, &body, 400, "path_escapes");
    assert_eq!(tree(outside.path()), vec!["attachments"]);
}

#[test]
fn deliveries_refuse_a_link_at_the_target_name() {
    let (server, harness) = start();
    touch_public(&server);
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("target.txt");
    std::fs::write(&target, "original").unwrap();
    std::os::unix::fs::symlink(&target, attachments(&server).join("x.txt")).unwrap();

    let peer = serving(Reply::ok("overwritten"));
    let (status, body) = deliver(&server, Some(&harness), json!({"url": peer.url("/x.txt")}));
    assert_error(status, &body, 400, "path_escapes");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "original");
    assert_eq!(tree(outside.path()), vec!["target.txt"]);
    let link = attachments(&server).join("x.txt");
    assert_link_to(&link, &target);
    // No temporary left beside the link either.
    assert_eq!(tree(&attachments(&server)), vec!["x.txt"]);
}

#[test]
fn deliveries_refuse_a_link_inside_the_tree_at_the_target_name() {
    // Writes never follow a link, even one that stays inside the workspace.
    let (server, harness) = start();
    touch_public(&server);
    let inside = server.home("me").join("public/notes.txt");
    std::fs::write(&inside, "mine").unwrap();
    std::os::unix::fs::symlink(&inside, attachments(&server).join("notes.txt")).unwrap();

    let peer = serving(Reply::ok("replaced"));
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": peer.url("/notes.txt")}),
    );
    assert_error(status, &body, 400, "path_escapes");
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), "mine");
}

#[test]
fn deliveries_refuse_a_link_planted_while_the_body_streams() {
    // The target is checked again at commit: a link that appears mid-transfer is refused,
    // not replaced, and the temporary goes.
    let (server, harness) = start();
    touch_public(&server);
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("target.txt");
    std::fs::write(&target, "original").unwrap();
    let mut reply = Reply::ok(Vec::new());
    reply.chunks = vec![vec![b'l'; 10]; 4];
    reply.chunk_delay = Duration::from_millis(300);
    let peer = serving(reply);
    let dir = attachments(&server);

    let (status, body) = std::thread::scope(|scope| {
        let request =
            scope.spawn(|| deliver(&server, Some(&harness), json!({"url": peer.url("/x.txt")})));
        wait_for_temporary(&dir);
        std::os::unix::fs::symlink(&target, dir.join("x.txt")).unwrap();
        request.join().unwrap()
    });
    assert_error(status, &body, 400, "path_escapes");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "original");
    assert_eq!(tree(outside.path()), vec!["target.txt"]);
    assert_eq!(tree(&dir), vec!["x.txt"], "the temporary was left");
    assert_eq!(std::fs::read_link(dir.join("x.txt")).unwrap(), target);
}

/// Waits until a `.ferry-tmp-*` appears in `dir` (the delivery is streaming).
fn wait_for_temporary(dir: &Path) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !tree(dir).iter().any(|name| name.starts_with(".ferry-tmp-")) {
        assert!(
            std::time::Instant::now() < deadline,
            "no temporary appeared in {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

// ---------------------------------------------------------------------------------------
// The member sees it (M-LIST, M-GET)
// ---------------------------------------------------------------------------------------

#[test]
fn deliveries_appear_in_the_files_panel() {
    let (server, harness) = start();
    let person = server.create_token("me", "person");
    let peer = serving(Reply::ok("x,y\n"));
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": peer.url("/files/report.csv")}),
    );
    assert_delivered(status, &body, &attachments(&server), "report.csv", b"x,y\n");

    let listing = list_files(&server, &person, None);
    let folder = &listing["entries"][0];
    assert_eq!(folder["path"], "public/attachments", "{listing}");
    assert_eq!(folder["type"], "dir", "{listing}");
    assert_eq!(folder["managed"], true, "{listing}");
    let children = folder["children"].as_array().unwrap();
    assert_eq!(children.len(), 1, "{listing}");
    assert_eq!(children[0]["name"], "report.csv", "{listing}");
    assert_eq!(children[0]["path"], "public/attachments/report.csv");
    assert_eq!(children[0]["type"], "file");
    assert_eq!(children[0]["size"], 4);

    let download = client()
        .get(server.url("/v1/files/content?path=public/attachments/report.csv"))
        .bearer_auth(&person)
        .send()
        .unwrap();
    assert_eq!(download.status(), 200);
    assert_eq!(download.bytes().unwrap().as_ref(), b"x,y\n");
}

#[test]
fn url_deliveries_are_held_to_the_person_quota_at_the_byte() {
    let (server, harness) = start_with_env(&[("FERRY_LIMITS__PERSON_MAX_BYTES", "100000")]);
    support::write_file(
        &server.home("me").join("public/filler.txt"),
        vec![b'f'; 90_000],
    );
    let peer = Peer::start(|path| {
        let len: usize = path.trim_start_matches('/').parse().unwrap_or(0);
        Reply::ok(vec![b'd'; len])
    });
    let dir = attachments(&server);
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": format!("{}/9999", peer.base), "filename": "below.bin"}),
    );
    assert_delivered(status, &body, &dir, "below.bin", &[b'd'; 9999]);
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": format!("{}/1", peer.base), "filename": "at.bin"}),
    );
    assert_delivered(status, &body, &dir, "at.bin", b"d");
    let (status, body) = deliver(
        &server,
        Some(&harness),
        json!({"url": format!("{}/1", peer.base), "filename": "over.bin"}),
    );
    assert_error(status, &body, 507, "quota_exceeded");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("quota of 100000 bytes: 100000 bytes are in use"),
        "{body}"
    );
    assert_eq!(tree(&dir), ["at.bin", "below.bin"], "nothing more is kept");
}
