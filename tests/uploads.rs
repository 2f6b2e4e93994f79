//! `POST /v1/media` end to end (spec members M-UP, M-AUTH; core C-PATH, C-NAME,
//! C-ATOMIC, C-LIMIT): a real `ferry serve`, real sockets, and what lands on disk.

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use support::{
    Server, assert_alive, assert_error, assert_link_to, assert_no_temporaries, create_project,
    error_code, list_files, multipart, sha256_hex, temporaries,
};

/// The boundary of every hand-made multipart body here.
const BOUNDARY: &str = "ferry-test-boundary-7c1e";
/// The small upload cap most limit tests configure.
const CAP: usize = 4096;
/// Room the gateway gives the multipart framing when judging a declared length.
const MULTIPART_ALLOWANCE: usize = ferry_config::limits::MULTIPART_ALLOWANCE_BYTES as usize;
/// The longest any raw exchange waits for an answer: a broken server fails, never hangs.
const RAW_READ_TIMEOUT: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn start_with_cap() -> Server {
    Server::start_with_env(&[("FERRY_MEDIA__MAX_UPLOAD_BYTES", &CAP.to_string())])
}

fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

fn content_type() -> String {
    format!("multipart/form-data; boundary={BOUNDARY}")
}

/// One `file` part named `filename`, holding `bytes`.
fn file_body(filename: &str, bytes: &[u8]) -> Vec<u8> {
    multipart(BOUNDARY, &[("file", Some(filename), bytes)])
}

/// Posts a hand-made multipart body with the admin token of `me`; status and JSON body.
fn post_body(server: &Server, body: Vec<u8>) -> (u16, Value) {
    post_to(server, "/v1/media", body)
}

/// Posts a hand-made multipart body to `route` with the admin token of `me`.
fn post_to(server: &Server, route: &str, body: Vec<u8>) -> (u16, Value) {
    let response = http()
        .post(server.url(route))
        .bearer_auth(&server.token)
        .header("Content-Type", content_type())
        .body(body)
        .send()
        .unwrap();
    let status = response.status().as_u16();
    let json = response.json().unwrap_or(Value::Null);
    (status, json)
}

/// Uploads `bytes` as `filename` into the main workspace.
fn upload(server: &Server, filename: &str, bytes: &[u8]) -> (u16, Value) {
    post_body(server, file_body(filename, bytes))
}

fn public_dir(server: &Server) -> PathBuf {
    server.home("me").join("public")
}

fn project_public(server: &Server, project: &str) -> PathBuf {
    server
        .home("me")
        .join("projects")
        .join(project)
        .join("public")
}

/// Every regular file and link under the data dir, outside the service's `.ferry/`, with
/// its size: what "nothing was written" compares.
fn workspace_files(data: &Path) -> Vec<(String, u64)> {
    support::tree(data)
        .into_iter()
        .filter(|rel| !rel.starts_with(".ferry"))
        .filter_map(|rel| {
            let meta = std::fs::symlink_metadata(data.join(&rel)).ok()?;
            (!meta.is_dir()).then_some((rel, meta.len()))
        })
        .collect()
}

/// The request head of an upload sent by hand; `length` is a `Content-Length` or, when
/// `None`, `Transfer-Encoding: chunked`.
fn head(server: &Server, token: &str, length: Option<usize>) -> Vec<u8> {
    let framing = match length {
        Some(n) => format!("Content-Length: {n}\r\n"),
        None => "Transfer-Encoding: chunked\r\n".to_owned(),
    };
    format!(
        "POST /v1/media HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: {}\r\n{framing}\r\n",
        server.addr,
        content_type()
    )
    .into_bytes()
}

/// `body` in HTTP/1.1 chunked framing, `size` bytes a chunk, with the final empty chunk.
fn chunked(body: &[u8], size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in body.chunks(size) {
        out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// What a raw client does, in order.
enum Step {
    Send(Vec<u8>),
    Pause(Duration),
}

/// One answer read off a raw socket.
struct RawReply {
    status: u16,
    body: Value,
    text: String,
}

impl RawReply {
    fn code(&self) -> &str {
        error_code(&self.body)
    }
}

/// Plays `steps` on a fresh connection from a writer thread while this thread reads the
/// first response; stops writing as soon as it has arrived. Write errors (the server
/// closed early) are expected and ignored. Bounded by socket timeouts.
fn exchange(addr: &str, steps: Vec<Step>) -> RawReply {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_nodelay(true).unwrap();
    stream.set_read_timeout(Some(RAW_READ_TIMEOUT)).unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut writer_stream = stream.try_clone().unwrap();
    let stopping = stop.clone();
    let writer = std::thread::spawn(move || {
        for step in steps {
            match step {
                Step::Send(bytes) => {
                    if stopping.load(Ordering::Relaxed) || writer_stream.write_all(&bytes).is_err()
                    {
                        return;
                    }
                }
                Step::Pause(pause) => {
                    let mut left = pause;
                    while !left.is_zero() {
                        if stopping.load(Ordering::Relaxed) {
                            return;
                        }
                        let nap = left.min(Duration::from_millis(20));
                        std::thread::sleep(nap);
                        left -= nap;
                    }
                }
            }
        }
    });
    let text = read_one_response(&mut stream);
    stop.store(true, Ordering::Relaxed);
    let _ = stream.shutdown(Shutdown::Both);
    writer.join().unwrap();
    let status = support::status_of(&text);
    let body = text
        .split_once("\r\n\r\n")
        .and_then(|(_, body)| serde_json::from_str(body).ok())
        .unwrap_or(Value::Null);
    RawReply { status, body, text }
}

/// Reads one HTTP/1.1 response (head and `Content-Length` body), or what arrived before
/// the connection closed or the read timed out.
fn read_one_response(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        if let Some(end) = find(&out, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&out[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if out.len() >= end + 4 + length {
                out.truncate(end + 4 + length);
                break;
            }
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

// ---------------------------------------------------------------------------------------
// The happy path and projects
// ---------------------------------------------------------------------------------------

#[test]
fn upload_answers_201_with_path_size_sha256_and_writes_into_public() {
    let mut server = Server::start();
    let bytes = b"quarterly numbers\n".repeat(100);
    let (status, body) = support::upload(&server, &server.token, "report.txt", &bytes, None);
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body,
        serde_json::json!({
            "path": "public/report.txt",
            "size": bytes.len(),
            "sha256": sha256_hex(&bytes),
            "project": null,
        })
    );
    let on_disk = std::fs::read(public_dir(&server).join("report.txt")).unwrap();
    assert_eq!(on_disk, bytes);
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn project_field_before_the_file_lands_in_the_project() {
    let mut server = Server::start();
    create_project(&server, &server.token, "q2");
    let body = multipart(
        BOUNDARY,
        &[
            ("project", None, b"q2"),
            ("file", Some("plan.md"), b"# plan"),
        ],
    );
    let (status, json) = post_body(&server, body);
    assert_eq!(status, 201, "{json}");
    assert_eq!(json["path"], "public/plan.md");
    assert_eq!(json["project"], "q2");
    assert_eq!(json["size"], 6);
    assert_eq!(json["sha256"], sha256_hex(b"# plan"));
    assert_eq!(
        std::fs::read(project_public(&server, "q2").join("plan.md")).unwrap(),
        b"# plan"
    );
    assert!(!public_dir(&server).join("plan.md").exists());
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn project_field_after_the_file_lands_in_the_project() {
    let mut server = Server::start();
    // The CLI creates projects too, also while the gateway runs.
    support::last_line(&server.ferry(&["project", "add", "me", "q2"]));
    let body = multipart(
        BOUNDARY,
        &[
            ("file", Some("plan.md"), b"# plan, later"),
            ("project", None, b"q2"),
        ],
    );
    let (status, json) = post_body(&server, body);
    assert_eq!(status, 201, "{json}");
    assert_eq!(json["path"], "public/plan.md");
    assert_eq!(json["project"], "q2");
    assert_eq!(
        std::fs::read(project_public(&server, "q2").join("plan.md")).unwrap(),
        b"# plan, later"
    );
    assert!(!public_dir(&server).join("plan.md").exists());
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

/// Uploads with `project` before and after the file; each must be a 404 with `code` and
/// leave the workspace files exactly as they were.
fn assert_project_refused_in_both_orders(server: &Server, project: &[u8], code: &str) {
    let before = workspace_files(&server.data);
    let orders = [
        multipart(
            BOUNDARY,
            &[
                ("project", None, project),
                ("file", Some("notes.txt"), b"secret"),
            ],
        ),
        multipart(
            BOUNDARY,
            &[
                ("file", Some("notes.txt"), b"secret"),
                ("project", None, project),
            ],
        ),
    ];
    for body in orders {
        let (status, json) = post_body(server, body);
        assert_error(status, &json, 404, code);
        assert_eq!(workspace_files(&server.data), before);
        assert_no_temporaries(server);
    }
}

#[test]
fn unknown_project_is_404_in_both_orders_and_writes_nothing() {
    let mut server = Server::start();
    create_project(&server, &server.token, "q2");
    assert_project_refused_in_both_orders(&server, b"nope", "unknown_project");
    assert!(!server.home("me").join("projects").join("nope").exists());
    assert_alive(&mut server);
}

#[test]
fn another_persons_project_is_unknown_project() {
    let mut server = Server::start();
    let bob = server.add_person("bob");
    create_project(&server, &bob, "bobs");
    assert_project_refused_in_both_orders(&server, b"bobs", "unknown_project");
    assert!(
        !server
            .home("bob")
            .join("projects/bobs/public/notes.txt")
            .exists()
    );
    assert_alive(&mut server);
}

#[test]
fn project_id_with_a_slash_is_unknown_project() {
    let mut server = Server::start();
    create_project(&server, &server.token, "q2");
    for id in [&b"q2/../.."[..], b"../me", b"q2/public", b"/etc"] {
        assert_project_refused_in_both_orders(&server, id, "unknown_project");
    }
    assert_alive(&mut server);
}

// ---------------------------------------------------------------------------------------
// The cap (C-LIMIT media.max_upload_bytes)
// ---------------------------------------------------------------------------------------

#[test]
fn cap_admits_limit_minus_one_and_limit_bytes() {
    let mut server = start_with_cap();
    for (name, size) in [("under.txt", CAP - 1), ("exact.txt", CAP)] {
        let bytes = vec![b'a'; size];
        let (status, json) = upload(&server, name, &bytes);
        assert_eq!(status, 201, "{size} bytes: {json}");
        assert_eq!(json["size"], size);
        assert_eq!(json["sha256"], sha256_hex(&bytes));
        let on_disk = std::fs::metadata(public_dir(&server).join(name)).unwrap();
        assert_eq!(on_disk.len(), size as u64);
    }
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn cap_refuses_limit_plus_one_with_413_and_keeps_the_previous_file() {
    let mut server = start_with_cap();
    let (status, _) = upload(&server, "big.txt", b"previous");
    assert_eq!(status, 201);
    let (status, json) = upload(&server, "big.txt", &vec![b'a'; CAP + 1]);
    assert_error(status, &json, 413, "too_large");
    assert_eq!(
        std::fs::read(public_dir(&server).join("big.txt")).unwrap(),
        b"previous"
    );
    let (status, json) = upload(&server, "new.txt", &vec![b'a'; CAP + 1]);
    assert_error(status, &json, 413, "too_large");
    assert!(!public_dir(&server).join("new.txt").exists());
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn files_held_in_memory_and_files_streamed_land_the_same() {
    // Up to 256 KiB a file part is held in memory and placed in one go; past that it is
    // staged and streamed. Both sides of the bound land whole, with their hash.
    let mut server = Server::start();
    const HELD: usize = 256 * 1024;
    for size in [0, 1, HELD - 1, HELD, HELD + 1, STREAMED] {
        let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let name = format!("held{size}.txt");
        let (status, json) = upload(&server, &name, &bytes);
        assert_eq!(status, 201, "{size} bytes: {json}");
        assert_eq!(json["size"], size);
        assert_eq!(json["sha256"], sha256_hex(&bytes));
        assert_eq!(
            std::fs::read(public_dir(&server).join(&name)).unwrap(),
            bytes
        );
    }
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

/// `ferry_uploads_held_bytes` as `/metrics` shows it now.
fn held_bytes(server: &Server) -> usize {
    let text = http()
        .get(server.url("/metrics"))
        .bearer_auth(&server.token)
        .send()
        .unwrap()
        .text()
        .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix("ferry_uploads_held_bytes "))
        .map_or(0, |value| value.trim().parse::<f64>().unwrap() as usize)
}

#[test]
fn small_uploads_held_in_memory_are_bounded_across_uploads() {
    // Small file parts wait in memory for the end of their form, up to
    // `UPLOADS_HELD_MAX_BYTES` across all uploads; a part that finds no room streams to
    // a staged file instead, and every upload still lands.
    const HELD_MAX: usize = ferry_config::limits::UPLOADS_HELD_MAX_BYTES;
    const PART: usize = 256 * 1024;
    let mut server = Server::start_with_env(&[("FERRY_LIMITS__UPLOADS_PER_MINUTE", "0")]);
    let public = public_dir(&server);
    // An upload of a `PART`-byte file of which the first `send` bytes are sent; the rest
    // is sent when it is finished.
    let hold = |name: &str, send: usize| {
        let body = file_body(name, &vec![b'h'; PART]);
        let at = body.len() - PART - (BOUNDARY.len() + 8) + send;
        let mut stream = TcpStream::connect(&server.addr).unwrap();
        stream.set_read_timeout(Some(RAW_READ_TIMEOUT)).unwrap();
        stream
            .write_all(&head(&server, &server.token, Some(body.len())))
            .unwrap();
        stream.write_all(&body[..at]).unwrap();
        (stream, body[at..].to_vec())
    };
    let finish = |(mut stream, rest): (TcpStream, Vec<u8>)| {
        stream.write_all(&rest).unwrap();
        support::status_of(&read_one_response(&mut stream))
    };
    // Parts held one after another (each read whole before the next), until one finds
    // no room: that one is staged and streams. What is held never passes the room.
    let mut held = Vec::new();
    let mut counted = 0;
    loop {
        assert!(
            held.len() <= HELD_MAX / PART,
            "more parts held than fit the room"
        );
        held.push(hold(&format!("held{}.txt", held.len()), PART - 1));
        let mut now = 0;
        assert!(eventually(|| {
            now = held_bytes(&server);
            now >= counted + PART - 1 || !temporaries(&public).is_empty()
        }));
        assert!(now <= HELD_MAX, "{now} bytes held");
        if !temporaries(&public).is_empty() {
            break;
        }
        counted = now;
    }
    // A buffer may hold up to twice what it was given; the room counts what it holds.
    assert!(
        held.len() > HELD_MAX / (2 * PART),
        "only {} parts held",
        held.len()
    );
    assert_eq!(temporaries(&public).len(), 1);
    let count = held.len();
    for (n, upload) in held.into_iter().enumerate() {
        assert_eq!(finish(upload), 201, "upload {n}");
    }
    assert_eq!(held_bytes(&server), 0);
    let (status, json) = upload(&server, "after.txt", b"after");
    assert_eq!(status, 201, "{json}");
    let landed = std::fs::read_dir(&public)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "txt")
        })
        .count();
    assert_eq!(landed, count + 1);
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

/// The bound on a form's preamble and on one part's headers.
const HEAD_MAX: usize = ferry_config::limits::MULTIPART_HEAD_MAX_BYTES as usize;

#[test]
fn part_headers_and_a_preamble_past_their_bound_are_refused_unread() {
    let mut server = Server::start();
    // Headers just under the bound are taken.
    let pad = "p".repeat(HEAD_MAX - 1024);
    let body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"pad.txt\"\r\n\
         X-Pad: {pad}\r\n\r\npadded\r\n--{BOUNDARY}--\r\n"
    );
    let (status, json) = post_body(&server, body.into_bytes());
    assert_eq!(status, 201, "{json}");
    // A part's headers, or the text before the first part, that never end: refused once
    // past the bound (and one read), while the client is still sending, not held whole
    // until the body's cap.
    let endless = "h".repeat(2 * 1024 * 1024);
    let heads = [
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; \
             filename=\"{endless}"
        ),
        format!("{endless}\r\n--{BOUNDARY}\r\n"),
    ];
    for started in heads {
        let declared = started.len() + 1024;
        let reply = exchange(
            &server.addr,
            vec![
                Step::Send(head(&server, &server.token, Some(declared))),
                Step::Send(started.into_bytes()),
                Step::Pause(RAW_READ_TIMEOUT),
            ],
        );
        assert_eq!(
            (reply.status, reply.code()),
            (400, "bad_multipart"),
            "{}",
            reply.text
        );
    }
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

/// One part of a hand-made form: its name, its filename, its bytes.
type Part<'a> = (&'a str, Option<&'a str>, &'a [u8]);

#[test]
fn a_file_held_in_memory_is_refused_as_a_streamed_one_is() {
    // A part's name is judged when the part begins, whatever its size: what follows it
    // in the form does not change the answer.
    let mut server = Server::start();
    for size in [5, STREAMED] {
        let bytes = vec![b'x'; size];
        let cases: [(&[Part], &str); 4] = [
            (
                &[("file", Some("x.exe"), &bytes), ("project", None, b"nope")],
                "extension_not_allowed",
            ),
            (
                &[
                    ("file", Some("x.exe"), &bytes),
                    ("file", Some("y.txt"), b"y"),
                ],
                "extension_not_allowed",
            ),
            (
                &[("file", Some(".."), &bytes), ("other", None, b"z")],
                "unsafe_name",
            ),
            (
                &[
                    ("file", Some("x.exe"), &bytes),
                    ("folder", None, b"public/attachments"),
                ],
                "extension_not_allowed",
            ),
        ];
        for (parts, code) in cases {
            let (status, json) = post_body(&server, multipart(BOUNDARY, parts));
            assert_eq!(error_code(&json), code, "{size} bytes: {status} {json}");
            assert_eq!(status, 400, "{size} bytes: {json}");
        }
    }
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn a_cap_past_what_is_held_in_memory_holds_at_its_limit() {
    let cap = STREAMED;
    let mut server = Server::start_with_env(&[("FERRY_MEDIA__MAX_UPLOAD_BYTES", &cap.to_string())]);
    for size in [cap - 1, cap] {
        let (status, json) = upload(&server, "capped.txt", &vec![b'c'; size]);
        assert_eq!(status, 201, "{size} bytes: {json}");
        assert_eq!(json["size"], size);
    }
    let (status, json) = upload(&server, "capped.txt", &vec![b'd'; cap + 1]);
    assert_error(status, &json, 413, "too_large");
    assert_eq!(
        std::fs::read(public_dir(&server).join("capped.txt")).unwrap(),
        vec![b'c'; cap]
    );
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn honest_content_length_over_cap_is_413_before_the_body_is_sent() {
    let mut server = Server::start_with_env(&[
        ("FERRY_MEDIA__MAX_UPLOAD_BYTES", &CAP.to_string()),
        ("FERRY_SERVER__BODY_IDLE_TIMEOUT_SECS", "2"),
    ]);
    let declared = CAP + MULTIPART_ALLOWANCE + 1024 * 1024;
    // Only the head goes out: the answer must come without a single body byte.
    let reply = exchange(
        &server.addr,
        vec![Step::Send(head(&server, &server.token, Some(declared)))],
    );
    assert_eq!(
        (reply.status, reply.code()),
        (413, "too_large"),
        "{}",
        reply.text
    );
    assert!(
        workspace_files(&server.data)
            .iter()
            .all(|(f, _)| !f.starts_with("home/me/public"))
    );
    assert_no_temporaries(&server);

    // A client that asks first (Expect: 100-continue) gets the 413 instead of a 100.
    let mut asking = head(&server, &server.token, Some(declared));
    asking.truncate(asking.len() - 2);
    asking.extend_from_slice(b"Expect: 100-continue\r\n\r\n");
    let reply = exchange(&server.addr, vec![Step::Send(asking)]);
    assert_eq!(
        (reply.status, reply.code()),
        (413, "too_large"),
        "{}",
        reply.text
    );

    // Just over cap + allowance is enough to be refused up front...
    let reply = exchange(
        &server.addr,
        vec![Step::Send(head(
            &server,
            &server.token,
            Some(CAP + MULTIPART_ALLOWANCE + 1),
        ))],
    );
    assert_eq!(
        (reply.status, reply.code()),
        (413, "too_large"),
        "{}",
        reply.text
    );
    // ...while exactly cap + allowance is admitted and its body awaited (which never
    // comes here, so it ends as a body timeout, not as a 413).
    let reply = exchange(
        &server.addr,
        vec![
            Step::Send(head(
                &server,
                &server.token,
                Some(CAP + MULTIPART_ALLOWANCE),
            )),
            Step::Pause(RAW_READ_TIMEOUT),
        ],
    );
    assert_eq!(
        (reply.status, reply.code()),
        (408, "body_timeout"),
        "{}",
        reply.text
    );
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn chunked_body_under_the_cap_is_accepted() {
    let mut server = start_with_cap();
    let bytes = vec![b'c'; CAP];
    let body = chunked(&file_body("chunked.txt", &bytes), 1000);
    let mut request = head(&server, &server.token, None);
    request.extend_from_slice(&body);
    let reply = exchange(&server.addr, vec![Step::Send(request)]);
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(reply.body["size"], CAP);
    assert_eq!(reply.body["sha256"], sha256_hex(&bytes));
    assert_eq!(
        std::fs::read(public_dir(&server).join("chunked.txt")).unwrap(),
        bytes
    );
    assert_alive(&mut server);
}

#[test]
fn chunked_body_over_the_cap_is_413_while_streaming_and_leaves_nothing() {
    let mut server = start_with_cap();
    let (status, _) = upload(&server, "stream.txt", b"previous");
    assert_eq!(status, 201);
    // 64 KiB of file bytes in 1 KiB chunks; the server must stop at CAP + 1.
    let body = chunked(&file_body("stream.txt", &vec![b'z'; 64 * 1024]), 1024);
    let mut steps = vec![Step::Send(head(&server, &server.token, None))];
    steps.extend(body.chunks(1024 + 8).map(|c| Step::Send(c.to_vec())));
    let reply = exchange(&server.addr, steps);
    assert_eq!(
        (reply.status, reply.code()),
        (413, "too_large"),
        "{}",
        reply.text
    );
    assert_eq!(
        std::fs::read(public_dir(&server).join("stream.txt")).unwrap(),
        b"previous"
    );

    let body = chunked(&file_body("fresh.txt", &vec![b'z'; 64 * 1024]), 4096);
    let mut request = head(&server, &server.token, None);
    request.extend_from_slice(&body);
    let reply = exchange(&server.addr, vec![Step::Send(request)]);
    assert_eq!(
        (reply.status, reply.code()),
        (413, "too_large"),
        "{}",
        reply.text
    );
    assert!(!public_dir(&server).join("fresh.txt").exists());
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn lying_content_length_never_produces_a_file_over_the_cap() {
    let mut server = start_with_cap();
    // Declares 1000 bytes, sends a 16 KiB file: the server reads 1000 and the multipart
    // is cut short.
    let body = file_body("liar.txt", &vec![b'l'; 16 * 1024]);
    let mut request = head(&server, &server.token, Some(1000));
    request.extend_from_slice(&body);
    let reply = exchange(&server.addr, vec![Step::Send(request)]);
    assert_eq!(
        (reply.status, reply.code()),
        (400, "bad_multipart"),
        "{}",
        reply.text
    );
    assert!(!public_dir(&server).join("liar.txt").exists());

    // Declares exactly one small, complete upload, then keeps sending: only the declared
    // upload is taken, and the rest is never appended to it.
    let small = file_body("liar2.txt", b"small");
    let mut request = head(&server, &server.token, Some(small.len()));
    request.extend_from_slice(&small);
    request.extend_from_slice(&vec![b'x'; 16 * 1024]);
    let reply = exchange(&server.addr, vec![Step::Send(request)]);
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(reply.body["size"], 5);
    assert_eq!(
        std::fs::read(public_dir(&server).join("liar2.txt")).unwrap(),
        b"small"
    );
    for (file, size) in workspace_files(&server.data) {
        assert!(size <= CAP as u64, "{file} is {size} bytes, over the cap");
    }
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

// ---------------------------------------------------------------------------------------
// Extensions
// ---------------------------------------------------------------------------------------

#[test]
fn extension_not_allowed_is_400_and_writes_nothing() {
    let mut server = Server::start();
    for name in [
        "x.exe",
        "noext",
        "archive.tar.gz",
        "script.sh",
        "trailingdot.",
    ] {
        let (status, json) = upload(&server, name, b"MZ");
        assert_error(status, &json, 400, "extension_not_allowed");
    }
    assert!(
        workspace_files(&server.data)
            .iter()
            .all(|(f, _)| !f.starts_with("home/me/public")),
        "{:?}",
        workspace_files(&server.data)
    );
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn extension_check_is_case_insensitive_and_keeps_the_name() {
    let mut server = Server::start();
    for name in ["A.PDF", "Photo.JpEg", "notes.Md"] {
        let (status, json) = upload(&server, name, b"%PDF-1.7");
        assert_eq!(status, 201, "{name}: {json}");
        assert_eq!(json["path"], format!("public/{name}"));
        assert!(public_dir(&server).join(name).is_file());
    }
    assert_alive(&mut server);
}

#[test]
fn configured_allowed_extensions_replace_the_default_list() {
    let mut server =
        Server::start_with_env(&[("FERRY_MEDIA__ALLOWED_EXTENSIONS", r#"["log","txt"]"#)]);
    for name in ["server.log", "SERVER2.LOG", "a.txt"] {
        let (status, json) = upload(&server, name, b"line\n");
        assert_eq!(status, 201, "{name}: {json}");
        assert!(public_dir(&server).join(name).is_file());
    }
    // pdf is in the default list, not in the configured one.
    for name in ["report.pdf", "x.exe"] {
        let (status, json) = upload(&server, name, b"%PDF");
        assert_error(status, &json, 400, "extension_not_allowed");
        assert!(!public_dir(&server).join(name).exists());
    }
    assert_alive(&mut server);
}

// ---------------------------------------------------------------------------------------
// Safe names (C-NAME) through HTTP
// ---------------------------------------------------------------------------------------

/// Uploads `raw` and expects it to land as `public/<safe>` and nowhere else.
fn assert_lands_as(server: &Server, raw: &str, safe: &str) {
    let (status, json) = upload(server, raw, b"content");
    assert_eq!(status, 201, "{raw:?}: {json}");
    assert_eq!(json["path"], format!("public/{safe}"), "{raw:?}");
    assert_eq!(
        std::fs::read(public_dir(server).join(safe)).unwrap(),
        b"content",
        "{raw:?}"
    );
    let public_files: Vec<_> = workspace_files(&server.data)
        .into_iter()
        .filter(|(f, _)| !f.starts_with("home/me/memory/"))
        .map(|(f, _)| f)
        .collect();
    assert_eq!(
        public_files,
        vec![format!("home/me/public/{safe}")],
        "{raw:?}"
    );
}

#[test]
fn hostile_names_land_under_their_safe_base_name() {
    let mut server = Server::start();
    // (name sent, name it lands as, paths that must not appear under the data folder)
    let cases: [(&str, &str, &[&str]); 3] = [
        (
            "../../etc/passwd.txt",
            "passwd.txt",
            &["etc", "home/me/etc"],
        ),
        (
            r"C:\Users\a\Q2 report (final).pdf",
            "Q2_report_final_.pdf",
            &[],
        ),
        (".env.pdf", "env.pdf", &["home/me/public/.env.pdf"]),
    ];
    for (raw, safe, absent) in cases {
        assert_lands_as(&server, raw, safe);
        for path in absent {
            assert!(!server.data.join(path).exists(), "{raw:?} made {path}");
        }
        // Each case starts from an empty public/, as it did in a server of its own.
        std::fs::remove_file(public_dir(&server).join(safe)).unwrap();
    }
    assert!(!server.home("etc").exists());
    assert!(!public_dir(&server).join(".env.pdf").exists());
    assert_alive(&mut server);
}

#[test]
fn unicode_name_is_kept_nfc() {
    let mut server = Server::start();
    assert_lands_as(&server, "relatório.pdf", "relatório.pdf");
    // The decomposed spelling lands on the same (NFC) name, replacing it.
    let (status, json) = upload(&server, "relato\u{301}rio.pdf", b"decomposed");
    assert_eq!(status, 201, "{json}");
    assert_eq!(json["path"], "public/relatório.pdf");
    assert_eq!(
        std::fs::read(public_dir(&server).join("relatório.pdf")).unwrap(),
        b"decomposed"
    );
    assert_eq!(std::fs::read_dir(public_dir(&server)).unwrap().count(), 2); // + attachments
    assert_alive(&mut server);
}

#[test]
fn long_name_is_shortened_keeping_the_extension() {
    let mut server = Server::start();
    let raw = format!("{}.pdf", "é".repeat(200));
    let (status, json) = upload(&server, &raw, b"long");
    assert_eq!(status, 201, "{json}");
    let path = json["path"].as_str().unwrap();
    let name = path.strip_prefix("public/").unwrap();
    assert!(name.len() <= 255, "{} bytes", name.len());
    assert!(name.ends_with(".pdf") && name.starts_with("éé"), "{name}");
    assert_eq!(
        std::fs::read(public_dir(&server).join(name)).unwrap(),
        b"long"
    );
    assert_alive(&mut server);
}

#[test]
fn names_that_cannot_be_made_safe_are_refused_and_write_nothing() {
    let mut server = Server::start();
    let before = workspace_files(&server.data);
    let cases: [(&[&str], &str); 3] = [
        // A traversal whose base name has no extension.
        (&["../../etc/passwd"], "extension_not_allowed"),
        (&["...", ".", "..", "a/..", r"a\.."], "unsafe_name"),
        (&["", "dir/", "a/b/"], "unsafe_name"),
    ];
    for (names, code) in cases {
        for name in names {
            let (status, json) = upload(&server, name, b"root:x:0:0");
            assert_error(status, &json, 400, code);
        }
    }
    assert_eq!(workspace_files(&server.data), before);
    assert!(!server.data.join("etc").exists());
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

// ---------------------------------------------------------------------------------------
// Replacement (C-ATOMIC)
// ---------------------------------------------------------------------------------------

#[test]
fn reupload_of_the_same_name_replaces_the_file() {
    let mut server = Server::start();
    let (status, first) = upload(&server, "same.txt", b"first version, longer");
    assert_eq!(status, 201);
    let (status, second) = upload(&server, "same.txt", b"second");
    assert_eq!(status, 201);
    assert_eq!(second["path"], "public/same.txt");
    assert_eq!(second["size"], 6);
    assert_eq!(second["sha256"], sha256_hex(b"second"));
    assert_ne!(first["sha256"], second["sha256"]);
    assert_eq!(
        std::fs::read(public_dir(&server).join("same.txt")).unwrap(),
        b"second"
    );
    let names: Vec<String> = std::fs::read_dir(public_dir(&server))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names.iter().filter(|n| n.contains("same")).count(),
        1,
        "{names:?}"
    );
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

// ---------------------------------------------------------------------------------------
// Symlinks (C-PATH)
// ---------------------------------------------------------------------------------------

#[test]
fn symlinked_public_dir_is_path_escapes_and_nothing_lands_outside() {
    let mut server = Server::start();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("keep.txt"), b"outside").unwrap();
    let public = public_dir(&server);
    assert!(!public.exists(), "public/ is created on first access");
    std::os::unix::fs::symlink(outside.path(), &public).unwrap();
    let before = support::tree(outside.path());

    let (status, json) = upload(&server, "x.txt", b"escaped");
    assert_error(status, &json, 400, "path_escapes");
    assert_eq!(support::tree(outside.path()), before);
    assert_eq!(
        std::fs::read(outside.path().join("keep.txt")).unwrap(),
        b"outside"
    );
    assert_eq!(
        std::fs::read_link(&public).unwrap(),
        outside.path(),
        "the link is left alone"
    );
    assert_no_temporaries(&server);
    assert!(temporaries(outside.path()).is_empty());
    assert_alive(&mut server);
}

#[test]
fn symlink_at_the_target_name_pointing_outside_is_path_escapes() {
    let mut server = Server::start();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim.txt");
    std::fs::write(&victim, b"original").unwrap();
    // The first listing creates public/.
    list_files(&server, &server.token, None);
    let link = public_dir(&server).join("x.txt");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let before = support::tree(outside.path());

    let (status, json) = upload(&server, "x.txt", b"overwritten?");
    assert_error(status, &json, 400, "path_escapes");
    assert_eq!(std::fs::read(&victim).unwrap(), b"original");
    assert_eq!(support::tree(outside.path()), before);
    assert_eq!(std::fs::read_link(&link).unwrap(), victim);
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn symlink_at_the_target_name_pointing_inside_the_workspace_is_path_escapes() {
    let mut server = Server::start();
    let inside = server.home("me").join("notes.txt");
    std::fs::write(&inside, b"agent notes").unwrap();
    std::fs::create_dir_all(public_dir(&server)).unwrap();
    let link = public_dir(&server).join("x.txt");
    std::os::unix::fs::symlink("../notes.txt", &link).unwrap();

    let (status, json) = upload(&server, "x.txt", b"overwritten?");
    assert_error(status, &json, 400, "path_escapes");
    assert_eq!(std::fs::read(&inside).unwrap(), b"agent notes");
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        Path::new("../notes.txt")
    );
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn symlinked_project_public_dir_is_path_escapes_in_both_orders() {
    let mut server = Server::start();
    create_project(&server, &server.token, "q2");
    let outside = tempfile::tempdir().unwrap();
    let public = project_public(&server, "q2");
    std::fs::remove_dir_all(&public).unwrap();
    std::os::unix::fs::symlink(outside.path(), &public).unwrap();
    for parts in [
        [
            ("project", None, &b"q2"[..]),
            ("file", Some("x.txt"), &b"escaped"[..]),
        ],
        [
            ("file", Some("x.txt"), &b"escaped"[..]),
            ("project", None, &b"q2"[..]),
        ],
    ] {
        let (status, json) = post_body(&server, multipart(BOUNDARY, &parts));
        assert_error(status, &json, 400, "path_escapes");
        assert!(support::tree(outside.path()).is_empty());
        assert!(!public_dir(&server).join("x.txt").exists());
    }
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

/// A multipart body of one `x.txt` part holding `bytes` and `project = q2`, with the
/// project field first or last.
fn x_txt_into_q2(bytes: &[u8], project_first: bool) -> Vec<u8> {
    let project = ("project", None, &b"q2"[..]);
    let file = ("file", Some("x.txt"), bytes);
    let parts = if project_first {
        [project, file]
    } else {
        [file, project]
    };
    multipart(BOUNDARY, &parts)
}

#[test]
fn link_in_the_main_public_does_not_block_an_upload_into_a_project() {
    // A file whose project is not known yet is staged as a hidden temporary in the main
    // public/ and placed at the end: a link at its name there has nothing to do with a
    // project upload.
    let mut server = Server::start();
    create_project(&server, &server.token, "q2");
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim.txt");
    std::fs::write(&victim, b"original").unwrap();
    std::fs::create_dir_all(public_dir(&server)).unwrap();
    let link = public_dir(&server).join("x.txt");
    std::os::unix::fs::symlink(&victim, &link).unwrap();

    for (project_first, bytes) in [(true, &b"project first"[..]), (false, b"project last")] {
        let (status, json) = post_body(&server, x_txt_into_q2(bytes, project_first));
        assert_eq!(status, 201, "project first: {project_first}: {json}");
        assert_eq!(json["path"], "public/x.txt");
        assert_eq!(json["project"], "q2");
        assert_eq!(json["size"], bytes.len());
        assert_eq!(json["sha256"], sha256_hex(bytes));
        assert_eq!(
            std::fs::read(project_public(&server, "q2").join("x.txt")).unwrap(),
            bytes,
            "project first: {project_first}"
        );
        // The link in the main public/ is not replaced.
        assert_link_to(&link, &victim);
        assert_eq!(std::fs::read(&victim).unwrap(), b"original");
        assert_eq!(support::tree(outside.path()), vec!["victim.txt"]);
        assert_no_temporaries(&server);
    }
    assert_eq!(
        support::tree(&project_public(&server, "q2")),
        vec!["attachments", "x.txt"]
    );
    assert_alive(&mut server);
}

/// A file part past what an upload holds in memory (256 KiB): it is staged as soon as it
/// outgrows that, before the fields after it are read.
const STREAMED: usize = 600_000;

#[test]
fn symlinked_main_public_refuses_only_a_staged_upload_into_a_project() {
    // With the project first, the file goes straight to the project, and so does a small
    // file with the project last (it is held in memory until the form is read). A large
    // file with the project last is staged in the main public/ before the project is
    // known, which is a link here: that upload is refused and nothing is written through
    // the link.
    let mut server = Server::start();
    create_project(&server, &server.token, "q2");
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("keep.txt"), b"outside").unwrap();
    let public = public_dir(&server);
    if public.exists() {
        std::fs::remove_dir_all(&public).unwrap();
    }
    std::os::unix::fs::symlink(outside.path(), &public).unwrap();
    let before = support::tree(outside.path());

    let (status, json) = post_body(&server, x_txt_into_q2(b"project first", true));
    assert_eq!(status, 201, "{json}");
    assert_eq!(json["project"], "q2");
    assert_eq!(
        std::fs::read(project_public(&server, "q2").join("x.txt")).unwrap(),
        b"project first"
    );

    let (status, json) = post_body(&server, x_txt_into_q2(b"project last", false));
    assert_eq!(status, 201, "{json}");
    assert_eq!(
        std::fs::read(project_public(&server, "q2").join("x.txt")).unwrap(),
        b"project last"
    );

    let (status, json) = post_body(&server, x_txt_into_q2(&vec![b'l'; STREAMED], false));
    assert_error(status, &json, 400, "path_escapes");
    assert_eq!(
        std::fs::read(project_public(&server, "q2").join("x.txt")).unwrap(),
        b"project last"
    );

    assert_eq!(support::tree(outside.path()), before, "written outside");
    assert_eq!(
        std::fs::read(outside.path().join("keep.txt")).unwrap(),
        b"outside"
    );
    assert_eq!(
        std::fs::read_link(&public).unwrap(),
        outside.path(),
        "the link is left alone"
    );
    assert_no_temporaries(&server);
    assert!(temporaries(outside.path()).is_empty());
    assert_alive(&mut server);
}

// ---------------------------------------------------------------------------------------
// The shape of the form
// ---------------------------------------------------------------------------------------

/// Posts `body` with `content_type` as its `Content-Type` (no header when `None`).
fn post_with_content_type(
    server: &Server,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (u16, Value) {
    let mut request = http()
        .post(server.url("/v1/media"))
        .bearer_auth(&server.token)
        .body(body);
    if let Some(content_type) = content_type {
        request = request.header("Content-Type", content_type);
    }
    let response = request.send().unwrap();
    let status = response.status().as_u16();
    let json = response.json().unwrap_or(Value::Null);
    (status, json)
}

#[test]
fn multipart_without_boundary_is_bad_multipart() {
    let mut server = Server::start();
    let before = workspace_files(&server.data);
    let not_multipart = format!("text/plain; boundary={BOUNDARY}");
    for content_type in [
        Some("multipart/form-data"),
        Some("multipart/form-data; charset=utf-8"),
        Some("application/octet-stream"),
        Some("application/x-www-form-urlencoded"),
        Some(not_multipart.as_str()),
        None,
    ] {
        // A well-formed body: only the header is wrong.
        let (status, json) =
            post_with_content_type(&server, content_type, file_body("a.txt", b"hello"));
        assert_eq!(
            (status, error_code(&json)),
            (400, "bad_multipart"),
            "Content-Type {content_type:?}: {json}"
        );
        assert_eq!(workspace_files(&server.data), before);
    }
    assert!(!public_dir(&server).join("a.txt").exists());
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn two_file_parts_are_too_many_files() {
    let mut server = Server::start();
    create_project(&server, &server.token, "q2");
    let before = workspace_files(&server.data);
    for parts in [
        vec![
            ("file", Some("a.txt"), &b"first"[..]),
            ("file", Some("b.txt"), b"second"),
        ],
        vec![
            ("file", Some("a.txt"), &b"first"[..]),
            ("file", Some("a.txt"), b"second"),
        ],
        // The first file written straight into the project, and staged.
        vec![
            ("project", None, &b"q2"[..]),
            ("file", Some("a.txt"), b"first"),
            ("file", Some("b.txt"), b"second"),
        ],
        vec![
            ("file", Some("a.txt"), &b"first"[..]),
            ("project", None, b"q2"),
            ("file", Some("b.txt"), b"second"),
        ],
    ] {
        let (status, json) = post_body(&server, multipart(BOUNDARY, &parts));
        assert_error(status, &json, 400, "too_many_files");
        assert_eq!(workspace_files(&server.data), before);
        assert_no_temporaries(&server);
    }
    assert!(!public_dir(&server).join("a.txt").exists());
    assert!(!project_public(&server, "q2").join("a.txt").exists());
    assert_alive(&mut server);
}

#[test]
fn missing_file_part_is_missing_file() {
    let mut server = Server::start();
    create_project(&server, &server.token, "q2");
    let before = workspace_files(&server.data);
    for body in [
        multipart(BOUNDARY, &[("project", None, b"q2")]),
        // No part at all: only the closing boundary.
        multipart(BOUNDARY, &[]),
    ] {
        let (status, json) = post_body(&server, body);
        assert_error(status, &json, 400, "missing_file");
        assert_eq!(workspace_files(&server.data), before);
    }
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn project_field_over_the_limit_is_field_too_large_without_buffering() {
    // A short idle timeout: a server that waited for the whole field would answer 408
    // (or nothing) instead of 400, and the test would still end quickly.
    let mut server = Server::start_with_env(&[("FERRY_SERVER__BODY_IDLE_TIMEOUT_SECS", "5")]);
    let field_len = 1024 * 1024 + 1;
    let part_head =
        format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"project\"\r\n\r\n");
    let tail = format!(
        "\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; \
         filename=\"a.txt\"\r\n\r\nhello\r\n--{BOUNDARY}--\r\n"
    );
    let declared = part_head.len() + field_len + tail.len();
    // Honest length, but only the first 4 KiB of the field is ever sent.
    let mut request = head(&server, &server.token, Some(declared));
    request.extend_from_slice(part_head.as_bytes());
    request.extend_from_slice(&vec![b'p'; 4096]);
    let reply = exchange(&server.addr, vec![Step::Send(request)]);
    assert_eq!(
        (reply.status, reply.code()),
        (400, "field_too_large"),
        "{}",
        reply.text
    );
    assert!(!public_dir(&server).join("a.txt").exists());
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn unexpected_field_is_400() {
    let mut server = Server::start();
    for parts in [
        vec![
            ("extra", None, &b"x"[..]),
            ("file", Some("a.txt"), b"hello"),
        ],
        vec![
            ("file", Some("a.txt"), &b"hello"[..]),
            ("extra", None, b"x"),
        ],
        vec![("upload", Some("a.txt"), &b"hello"[..])],
    ] {
        let (status, json) = post_body(&server, multipart(BOUNDARY, &parts));
        assert_error(status, &json, 400, "unexpected_field");
    }
    assert!(!public_dir(&server).join("a.txt").exists());
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn duplicate_project_field_is_400() {
    let mut server = Server::start();
    create_project(&server, &server.token, "q2");
    let body = multipart(
        BOUNDARY,
        &[
            ("project", None, b"q2"),
            ("project", None, b"q2"),
            ("file", Some("a.txt"), b"hello"),
        ],
    );
    let (status, json) = post_body(&server, body);
    assert_error(status, &json, 400, "duplicate_field");
    assert!(!project_public(&server, "q2").join("a.txt").exists());
    assert_alive(&mut server);
}

#[test]
fn truncated_multipart_is_400_and_leaves_nothing() {
    let mut server = Server::start();
    let full = file_body("cut.txt", &vec![b't'; 10_000]);
    // Cut inside the file's bytes, inside the closing boundary, right after the closing
    // boundary but before its `--` (the file's bytes are all there, the body is not), and
    // inside a part head.
    for cut in [
        full.len() / 2,
        full.len() - 5,
        full.len() - 4,
        full.len() - 3,
        20,
    ] {
        let (status, json) = post_body(&server, full[..cut].to_vec());
        assert_error(status, &json, 400, "bad_multipart");
        assert!(!public_dir(&server).join("cut.txt").exists());
        assert_no_temporaries(&server);
    }
    // Garbage that never mentions the boundary.
    let (status, json) = post_body(&server, b"this is not multipart at all".to_vec());
    assert_eq!(status, 400, "{json}");
    assert_alive(&mut server);
}

#[test]
fn no_token_unknown_token_and_harness_token_are_401() {
    let mut server = Server::start();
    let harness = server.create_token("me", "harness");
    let bogus = "f".repeat(server.token.len());
    for token in [None, Some(bogus.as_str()), Some(harness.as_str())] {
        let mut request = http()
            .post(server.url("/v1/media"))
            .header("Content-Type", content_type())
            .body(file_body("a.txt", b"hello"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().unwrap();
        let status = response.status().as_u16();
        let json: Value = response.json().unwrap_or(Value::Null);
        assert_error(status, &json, 401, "unauthorized");
    }
    assert!(!public_dir(&server).join("a.txt").exists());
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn unauthorized_oversized_upload_is_401_not_read() {
    let mut server = start_with_cap();
    let harness = server.create_token("me", "harness");
    // A stranger's huge declared body is turned away on its head alone.
    let reply = exchange(
        &server.addr,
        vec![Step::Send(head(&server, &harness, Some(100 * 1024 * 1024)))],
    );
    assert_eq!(
        (reply.status, reply.code()),
        (401, "unauthorized"),
        "{}",
        reply.text
    );
    assert_alive(&mut server);
}

/// The bound up to which an early answer waits for the rest of a declared body.
const LINGER: usize = ferry_config::limits::LINGER_BODY_MAX_BYTES as usize;

/// A request body that arrives in two halves, a pause apart: a client still sending when
/// a route has already answered from the request's head.
struct TwoHalves {
    body: std::io::Cursor<Vec<u8>>,
    half: u64,
    paused: bool,
}

impl Read for TwoHalves {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let at = self.body.position();
        if at == self.half && !self.paused {
            self.paused = true;
            std::thread::sleep(Duration::from_millis(200));
        }
        let room = if at < self.half {
            buf.len().min((self.half - at) as usize)
        } else {
            buf.len()
        };
        self.body.read(&mut buf[..room])
    }
}

/// An upload with `token`, its body `total` bytes of multipart sent in two halves.
fn upload_in_two_halves(server: &Server, token: &str, total: usize) -> (u16, Value) {
    let framing = file_body("late.txt", b"").len();
    let body = file_body("late.txt", &vec![b'l'; total - framing]);
    assert_eq!(body.len(), total);
    let half = (total / 2) as u64;
    let reader = TwoHalves {
        body: std::io::Cursor::new(body),
        half,
        paused: false,
    };
    let response = http()
        .post(server.url("/v1/media"))
        .bearer_auth(token)
        .header("Content-Type", content_type())
        .body(reqwest::blocking::Body::sized(reader, total as u64))
        .send()
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null))
}

#[test]
fn a_refusal_from_the_head_reaches_a_client_still_sending_a_small_body() {
    let mut server = Server::start();
    let harness = server.create_token("me", "harness");
    // The route refuses on the head; the client is still sending. Without the wait the
    // late half meets a closed socket and the client reports a reset, not the refusal.
    for total in [LINGER - 1, LINGER] {
        let (status, json) = upload_in_two_halves(&server, &harness, total);
        assert_error(status, &json, 401, "unauthorized");
    }
    // And a body that is taken still lands whole.
    let (status, json) = upload_in_two_halves(&server, &server.token, LINGER);
    assert_eq!(status, 201, "{json}");
    let landed = std::fs::metadata(public_dir(&server).join("late.txt")).unwrap();
    assert_eq!(
        landed.len() as usize,
        LINGER - file_body("late.txt", b"").len()
    );
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

/// Sends `request` on `stream`, then reads one response off it.
fn send_and_read(stream: &mut TcpStream, request: &[u8]) -> String {
    stream.write_all(request).unwrap();
    read_one_response(stream)
}

#[test]
fn a_small_body_refused_early_is_read_and_its_connection_kept() {
    let mut server = Server::start();
    let harness = server.create_token("me", "harness");
    let healthz = format!("GET /healthz HTTP/1.1\r\nHost: {}\r\n\r\n", server.addr);
    for length in [LINGER - 1, LINGER] {
        let mut stream = TcpStream::connect(&server.addr).unwrap();
        stream.set_read_timeout(Some(RAW_READ_TIMEOUT)).unwrap();
        stream
            .write_all(&head(&server, &harness, Some(length)))
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let refusal = send_and_read(&mut stream, &vec![b'x'; length]);
        assert_eq!(support::status_of(&refusal), 401, "{refusal}");
        // The body was read to its end, so the connection serves the next request.
        let next = send_and_read(&mut stream, healthz.as_bytes());
        assert_eq!(support::status_of(&next), 200, "at {length}: {next}");
    }
    // Past the bound the body is not waited for: the refusal comes on the head alone,
    // and the connection closes after it.
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream.set_read_timeout(Some(RAW_READ_TIMEOUT)).unwrap();
    let refusal = send_and_read(&mut stream, &head(&server, &harness, Some(LINGER + 1)));
    assert_eq!(support::status_of(&refusal), 401, "{refusal}");
    assert_eq!(
        stream.read(&mut [0u8; 64]).unwrap(),
        0,
        "the connection stays open"
    );
    assert_alive(&mut server);
}

// ---------------------------------------------------------------------------------------
// Slow clients
// ---------------------------------------------------------------------------------------

#[test]
fn stalled_body_is_408_body_timeout_and_leaves_no_temporary() {
    let mut server = Server::start_with_env(&[
        ("FERRY_SERVER__BODY_IDLE_TIMEOUT_SECS", "2"),
        ("FERRY_MEDIA__MAX_UPLOAD_BYTES", &CAP.to_string()),
    ]);
    let (status, _) = upload(&server, "stall.txt", b"previous");
    assert_eq!(status, 201);
    let body = file_body("stall.txt", &vec![b's'; 2000]);
    // The head, the part head and some file bytes, then silence (the declared rest never
    // comes): the temporary exists by then, and must be gone after the 408.
    let mut request = head(&server, &server.token, Some(body.len()));
    request.extend_from_slice(&body[..body.len() / 2]);
    let reply = exchange(
        &server.addr,
        vec![Step::Send(request), Step::Pause(RAW_READ_TIMEOUT)],
    );
    assert_eq!(
        (reply.status, reply.code()),
        (408, "body_timeout"),
        "{}",
        reply.text
    );
    assert_eq!(
        std::fs::read(public_dir(&server).join("stall.txt")).unwrap(),
        b"previous"
    );
    assert_no_temporaries(&server);

    // Headers only, no body byte at all.
    let reply = exchange(
        &server.addr,
        vec![
            Step::Send(head(&server, &server.token, Some(body.len()))),
            Step::Pause(RAW_READ_TIMEOUT),
        ],
    );
    assert_eq!(
        (reply.status, reply.code()),
        (408, "body_timeout"),
        "{}",
        reply.text
    );
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn trickled_body_is_cut_off_past_the_idle_grace() {
    let mut server = Server::start_with_env(&[
        ("FERRY_SERVER__BODY_IDLE_TIMEOUT_SECS", "2"),
        ("FERRY_SERVER__BODY_MIN_BYTES_PER_SEC", "100"),
    ]);
    let body = file_body("trickle.txt", &vec![b't'; 2000]);
    // The part head arrives at once (so the temporary exists), then one byte a second:
    // never silent for the idle timeout, but far below 100 bytes a second.
    let start = find(&body, b"\r\n\r\n").unwrap() + 4;
    let mut request = head(&server, &server.token, Some(body.len()));
    request.extend_from_slice(&body[..start]);
    let mut steps = vec![Step::Send(request)];
    for byte in &body[start..start + 30] {
        steps.push(Step::Pause(Duration::from_secs(1)));
        steps.push(Step::Send(vec![*byte]));
    }
    let reply = exchange(&server.addr, steps);
    assert_eq!(
        (reply.status, reply.code()),
        (408, "body_timeout"),
        "{}",
        reply.text
    );
    assert!(!public_dir(&server).join("trickle.txt").exists());
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

/// Waits (bounded) until `done` holds; whether it did.
fn eventually(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..500 {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

#[test]
fn temporary_of_an_upload_in_progress_is_hidden_and_removed_when_the_client_leaves() {
    let mut server = Server::start_with_env(&[("FERRY_SERVER__BODY_IDLE_TIMEOUT_SECS", "30")]);
    let (status, _) = upload(&server, "wip.txt", b"previous");
    assert_eq!(status, 201);
    let body = file_body("wip.txt", &vec![b'w'; STREAMED]);
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream.set_read_timeout(Some(RAW_READ_TIMEOUT)).unwrap();
    stream
        .write_all(&head(&server, &server.token, Some(body.len())))
        .unwrap();
    stream.write_all(&body[..body.len() / 2]).unwrap();
    let public = public_dir(&server);
    assert!(
        eventually(|| !temporaries(&public).is_empty()),
        "the upload in progress has a temporary beside its target"
    );
    let listing = list_files(&server, &server.token, None).to_string();
    assert!(!listing.contains(".ferry-tmp-"), "{listing}");
    assert!(listing.contains("public/wip.txt"), "{listing}");

    // The client goes away mid-body.
    drop(stream);
    assert!(
        eventually(|| temporaries(&server.data).is_empty()),
        "temporaries left behind: {:?}",
        temporaries(&server.data)
    );
    assert_eq!(std::fs::read(public.join("wip.txt")).unwrap(), b"previous");
    assert_alive(&mut server);
}

/// The person moves `public/` away while an upload streams into it: whether the client
/// then finishes the body or leaves, no temporary is left, neither in the new `public/`
/// nor in the folder moved away, and the answer is a clear one, never a 500.
#[test]
fn a_public_moved_away_mid_upload_leaves_no_temporary_anywhere() {
    let mut server = Server::start_with_env(&[("FERRY_SERVER__BODY_IDLE_TIMEOUT_SECS", "30")]);
    let public = public_dir(&server);
    for (n, client_finishes) in [true, false].into_iter().enumerate() {
        let moved = server.home("me").join(format!("public.old{n}"));
        let (name, bytes) = (format!("moved{n}.txt"), vec![b'm'; STREAMED]);
        let body = file_body(&name, &bytes);
        let mut stream = TcpStream::connect(&server.addr).unwrap();
        stream.set_read_timeout(Some(RAW_READ_TIMEOUT)).unwrap();
        stream
            .write_all(&head(&server, &server.token, Some(body.len())))
            .unwrap();
        stream.write_all(&body[..body.len() / 2]).unwrap();
        assert!(
            eventually(|| !temporaries(&public).is_empty()),
            "the upload was never staged"
        );
        std::fs::rename(&public, &moved).unwrap();
        if client_finishes {
            stream.write_all(&body[body.len() / 2..]).unwrap();
            let answer = read_one_response(&mut stream);
            // The file was written whole: it lands in public/, which is made again.
            assert_eq!(support::status_of(&answer), 201, "{answer}");
            assert_eq!(std::fs::read(public.join(&name)).unwrap(), bytes);
        } else {
            drop(stream);
        }
        assert!(
            eventually(|| temporaries(&server.data).is_empty()),
            "temporaries left behind: {:?}",
            temporaries(&server.data)
        );
        assert!(!moved.join(&name).exists());
    }
    assert_alive(&mut server);
}

#[test]
fn concurrent_uploads_of_one_name_leave_one_whole_file() {
    let mut server = Server::start();
    let contents: Vec<Vec<u8>> = (0..8u8).map(|i| vec![b'a' + i; 200_000]).collect();
    let handles: Vec<_> = contents
        .iter()
        .cloned()
        .map(|bytes| {
            let (url, token) = (server.url("/v1/media"), server.token.clone());
            std::thread::spawn(move || {
                http()
                    .post(url)
                    .bearer_auth(token)
                    .header("Content-Type", content_type())
                    .body(file_body("race.txt", &bytes))
                    .send()
                    .unwrap()
                    .status()
                    .as_u16()
            })
        })
        .collect();
    for handle in handles {
        assert_eq!(handle.join().unwrap(), 201);
    }
    let on_disk = std::fs::read(public_dir(&server).join("race.txt")).unwrap();
    assert!(contents.contains(&on_disk), "the file is one upload, whole");
    let names: Vec<String> = std::fs::read_dir(public_dir(&server))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "race.txt and attachments: {names:?}");
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

#[test]
fn project_field_that_is_not_utf8_is_400() {
    let mut server = Server::start();
    for parts in [
        [
            ("project", None, &[0xff, 0xfe][..]),
            ("file", Some("a.txt"), &b"x"[..]),
        ],
        [
            ("file", Some("a.txt"), &b"x"[..]),
            ("project", None, &[0xff, 0xfe][..]),
        ],
    ] {
        let (status, json) = post_body(&server, multipart(BOUNDARY, &parts));
        assert_eq!(status, 400, "{json}");
        assert!(!public_dir(&server).join("a.txt").exists());
    }
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}

// ---------------------------------------------------------------------------------------
// All of it against one server
// ---------------------------------------------------------------------------------------

#[test]
fn server_survives_every_abuse_in_a_row() {
    let mut server = Server::start_with_env(&[
        ("FERRY_MEDIA__MAX_UPLOAD_BYTES", &CAP.to_string()),
        ("FERRY_SERVER__BODY_IDLE_TIMEOUT_SECS", "2"),
    ]);
    let token = server.token.clone();
    let mut requests: Vec<Vec<Step>> = Vec::new();
    // Over cap by declaration, by chunked streaming, by a lying length; a stall.
    requests.push(vec![Step::Send(head(
        &server,
        &token,
        Some(usize::MAX / 2),
    ))]);
    let mut over = head(&server, &token, None);
    over.extend_from_slice(&chunked(&file_body("a.txt", &vec![b'a'; 3 * CAP]), 512));
    requests.push(vec![Step::Send(over)]);
    let mut liar = head(&server, &token, Some(10));
    liar.extend_from_slice(&file_body("a.txt", &vec![b'a'; 3 * CAP]));
    requests.push(vec![Step::Send(liar)]);
    requests.push(vec![
        Step::Send(head(&server, &token, Some(500))),
        Step::Pause(RAW_READ_TIMEOUT),
    ]);
    // Garbage framing: a bad chunk size, a bad header, an absurd part header.
    let mut bad_chunk = head(&server, &token, None);
    bad_chunk.extend_from_slice(b"zzzz\r\nhello\r\n0\r\n\r\n");
    requests.push(vec![Step::Send(bad_chunk)]);
    let mut huge_part_head = head(&server, &token, None);
    let mut part =
        format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"")
            .into_bytes();
    part.extend_from_slice(&vec![b'n'; 100_000]);
    part.extend_from_slice(b".txt\"\r\n\r\nx\r\n");
    part.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    huge_part_head.extend_from_slice(&chunked(&part, 4096));
    requests.push(vec![Step::Send(huge_part_head)]);
    for steps in requests {
        let reply = exchange(&server.addr, steps);
        assert!(
            (400..500).contains(&reply.status),
            "expected a 4xx, got: {}",
            reply.text
        );
        assert!(server.is_running(), "log:\n{}", server.log());
    }
    for (name, bytes) in [
        ("", &b""[..]),
        ("...", b"x"),
        ("x.exe", b"x"),
        ("\u{202e}fdp.exe", b"x"),
    ] {
        let (status, _) = upload(&server, name, bytes);
        assert_eq!(status, 400);
    }
    for (file, size) in workspace_files(&server.data) {
        assert!(size <= CAP as u64, "{file} is {size} bytes");
    }
    assert_no_temporaries(&server);
    // And it still does its job.
    let (status, json) = upload(&server, "after.txt", b"still here");
    assert_eq!(status, 201, "{json}");
    assert_alive(&mut server);
}

/// A server whose person `me` may keep `quota` bytes, with 800,000 of them in use before
/// any upload: 600,000 in the main public/, 100,000 in project `p1`'s and 100,000 of
/// saved command output.
fn server_near_quota(quota: u64) -> Server {
    let server =
        Server::start_with_env(&[("FERRY_LIMITS__PERSON_MAX_BYTES", quota.to_string().as_str())]);
    create_project(&server, &server.token, "p1");
    let home = server.home("me");
    support::write_file(&home.join("public/filler.txt"), vec![b'f'; 600_000]);
    support::write_file(
        &home.join("projects/p1/public/notes.txt"),
        vec![b'n'; 100_000],
    );
    support::write_file(
        &server
            .data
            .join("private/people/me/tmp/terminal-output/run-0.log"),
        vec![b'o'; 100_000],
    );
    server
}

#[test]
fn uploads_are_held_to_the_person_quota_at_the_byte() {
    let quota = 1_000_000;
    let server = server_near_quota(quota);
    let public = server.home("me").join("public");
    let (status, body) = support::upload(&server, &server.token, "a.txt", &[b'a'; 199_999], None);
    assert_eq!(status, 201, "quota − 1: {body}");
    let (status, body) = support::upload(&server, &server.token, "b.txt", b"b", Some("p1"));
    assert_eq!(status, 201, "at the quota, into a project: {body}");
    let (status, body) = support::upload(&server, &server.token, "c.txt", b"c", None);
    assert_error(status, &body, 507, "quota_exceeded");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("quota of 1000000 bytes") && message.contains("1000000 bytes are in use"),
        "{message}"
    );
    assert!(!public.join("c.txt").exists(), "nothing is written");
    assert_no_temporaries(&server);
    // Past the part kept in memory the body streams to disk: refused there all the same.
    let (status, body) =
        support::upload(&server, &server.token, "big.txt", &[b'g'; 2_000_000], None);
    assert_error(status, &body, 507, "quota_exceeded");
    assert!(!public.join("big.txt").exists(), "nothing is written");
    assert_no_temporaries(&server);
    // Replacing a file with a larger one is refused too, and keeps the old one.
    let (status, body) = support::upload(&server, &server.token, "a.txt", &[b'A'; 200_000], None);
    assert_error(status, &body, 507, "quota_exceeded");
    assert_eq!(
        std::fs::read(public.join("a.txt")).unwrap(),
        vec![b'a'; 199_999]
    );
    assert_no_temporaries(&server);

    // Deleting for good makes room at once (the trash counts until emptied: trash.rs).
    let response = support::client()
        .delete(server.url("/v1/files?path=public/a.txt&forever=true"))
        .bearer_auth(&server.token)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 204);
    let (status, body) = support::upload(&server, &server.token, "c.txt", b"c", None);
    assert_eq!(status, 201, "{body}");
}

#[test]
fn uploads_racing_for_the_last_room_never_pass_the_quota_together() {
    // 200,000 bytes of room; each upload wants 150,000: only one may land.
    let server = Arc::new(server_near_quota(1_000_000));
    let racers: Vec<_> = (0..4)
        .map(|i| {
            let server = server.clone();
            std::thread::spawn(move || {
                let name = format!("race-{i}.txt");
                support::upload(&server, &server.token, &name, &[b'r'; 150_000], None).0
            })
        })
        .collect();
    let mut statuses: Vec<u16> = racers.into_iter().map(|t| t.join().unwrap()).collect();
    statuses.sort();
    assert_eq!(statuses, [201, 507, 507, 507]);
    let public = server.home("me").join("public");
    assert_no_temporaries(&server);
    let landed = std::fs::read_dir(&public)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("race-")
        })
        .count();
    assert_eq!(landed, 1);
}

/// Posts `body` to `/v1/media?<query>`; status and JSON body.
fn post_query(server: &Server, query: &str, body: Vec<u8>) -> (u16, Value) {
    post_to(server, &format!("/v1/media?{query}"), body)
}

/// M-DAILY, overwrite knowingly: with `overwrite=false` a file already at the name is
/// kept and the answer is `409 exists` with its size and time, in the main workspace and
/// in a project (the field before the file: refused before the bytes are kept, and after
/// it: refused at the placement); `overwrite=true` or none replaces; a name C-NAME changed
/// is said in `renamedFrom`.
#[test]
fn an_upload_may_keep_what_is_there_and_says_when_its_name_was_changed() {
    let mut server = Server::start();
    create_project(&server, &server.token, "q2");
    let (status, first) = upload(&server, "report.txt", b"first");
    assert_eq!(status, 201, "{first}");
    assert!(first.get("renamedFrom").is_none(), "{first}");
    let at = public_dir(&server).join("report.txt");

    let (status, refused) = post_query(
        &server,
        "overwrite=false",
        file_body("report.txt", b"second"),
    );
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"]["code"], "exists");
    assert_eq!(refused["error"]["existing"]["path"], "public/report.txt");
    assert_eq!(refused["error"]["existing"]["size"], 5);
    assert!(
        support::is_rfc3339(refused["error"]["existing"]["modified"].as_str().unwrap()),
        "{refused}"
    );
    assert_eq!(std::fs::read(&at).unwrap(), b"first");

    for (project_first, name) in [(true, "a.md"), (false, "b.md")] {
        let kept = project_public(&server, "q2").join(name);
        std::fs::write(&kept, "old").unwrap();
        let (project, file): (&[u8], &[u8]) = (b"q2", b"new!");
        let parts: Vec<(&str, Option<&str>, &[u8])> = if project_first {
            vec![("project", None, project), ("file", Some(name), file)]
        } else {
            vec![("file", Some(name), file), ("project", None, project)]
        };
        let (status, refused) = post_query(&server, "overwrite=false", multipart(BOUNDARY, &parts));
        assert_eq!(status, 409, "{name}: {refused}");
        assert_eq!(refused["error"]["existing"]["size"], 3, "{refused}");
        assert_eq!(std::fs::read(&kept).unwrap(), b"old");
    }

    for query in [
        "overwrite=true",
        "overwrite=TRUE&x=1",
        "overwrite=maybe",
        "x=1",
    ] {
        let (status, answer) = post_query(&server, query, file_body("report.txt", b"third"));
        if query == "overwrite=true" {
            assert_eq!(status, 201, "{answer}");
            assert_eq!(std::fs::read(&at).unwrap(), b"third");
        } else {
            assert_eq!(status, 400, "{query}: {answer}");
            assert_eq!(answer["error"]["code"], "invalid_request", "{query}");
        }
    }
    let (status, free) = post_query(&server, "overwrite=false", file_body("new.txt", b"n"));
    assert_eq!(status, 201, "{free}");

    let (status, renamed) = upload(&server, "Q2 report?.txt", b"q");
    assert_eq!(status, 201, "{renamed}");
    assert_eq!(renamed["renamedFrom"], "Q2 report?.txt", "{renamed}");
    assert_ne!(renamed["path"], "public/Q2 report?.txt");
    assert_no_temporaries(&server);
    assert_alive(&mut server);
}
