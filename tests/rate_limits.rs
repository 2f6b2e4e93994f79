//! Per-person rates end to end (`[limits] uploads_per_minute`, `deliveries_per_minute`,
//! `tool_calls_per_minute`): a real `ferry serve`, its HTTP routes and its `/mcp` driven
//! by the official MCP client. A request past its rate is `429 rate_limited` with
//! `Retry-After` (a tool error saying when, over MCP), does nothing and leaves nothing;
//! every token of a person counts together, and one person's flood leaves another's
//! requests answered.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use reqwest::blocking::{Client, Response};
use serde_json::{Value, json};
use support::mcp::{self, call, is_error, text_of};
use support::{
    Options, Peer, Reply, Server, assert_error, assert_no_temporaries, client, json_answer,
    multipart, status_of, tree,
};

/// A gateway whose `[limits]` say `env` (`("UPLOADS_PER_MINUTE", "3")`, …).
fn start(limits: &[(&str, &str)]) -> Server {
    Server::start_with(Options {
        env: limits
            .iter()
            .map(|(key, value)| (format!("FERRY_LIMITS__{key}"), (*value).to_owned()))
            .collect(),
        ..Options::default()
    })
}

/// The boundary of the multipart bodies sent here.
const BOUNDARY: &str = "ferry-rate-boundary-7c1e";

/// `POST /v1/media` of a small file `name` with `token`, on `client`. The body goes as
/// bytes, in one piece: a refused upload's body is never read, and the blocking client
/// reports a streamed body the server stopped taking as an error instead of the answer.
fn upload_with(client: &Client, server: &Server, token: &str, name: &str) -> Response {
    client
        .post(server.url("/v1/media"))
        .bearer_auth(token)
        .header(
            "Content-Type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(multipart(BOUNDARY, &[("file", Some(name), b"hello\n")]))
        .send()
        .unwrap()
}

fn upload(server: &Server, token: &str, name: &str) -> Response {
    upload_with(&client(), server, token, name)
}

/// `POST /v1/uploads` (tus creation) of a 5-byte `name` with `token`.
fn tus_create(server: &Server, token: &str, name: &str) -> Response {
    let metadata = format!("filename {}", data_encoding::BASE64.encode(name.as_bytes()));
    client()
        .post(server.url("/v1/uploads"))
        .bearer_auth(token)
        .header("Tus-Resumable", "1.0.0")
        .header("Upload-Length", "5")
        .header("Upload-Metadata", metadata)
        .send()
        .unwrap()
}

/// `POST /v1/deliveries` of `url` as `filename`, with the harness token `harness`.
fn deliver(server: &Server, harness: &str, url: &str, filename: &str) -> Response {
    client()
        .post(server.url("/v1/deliveries"))
        .bearer_auth(harness)
        .json(&json!({ "url": url, "filename": filename }))
        .send()
        .unwrap()
}

/// The longest a refusal may ask to wait at `per_minute`: one bucket interval, rounded up.
fn interval_secs(per_minute: u64) -> u64 {
    60_u64.div_ceil(per_minute)
}

/// Asserts `429 rate_limited` for `what` ("uploads", …) at `per_minute`: a `Retry-After`
/// of whole seconds, 1 to one interval, the same number as the body's `retryAfterSecs`
/// and in its sentence. Returns the number.
#[track_caller]
fn assert_rate_limited(response: Response, what: &str, per_minute: u64) -> u64 {
    let retry_after: u64 = response
        .headers()
        .get("retry-after")
        .unwrap_or_else(|| panic!("no Retry-After on {:?}", response.status()))
        .to_str()
        .unwrap()
        .parse()
        .expect("Retry-After is whole seconds");
    let (status, body) = json_answer(response);
    assert_error(status, &body, 429, "rate_limited");
    assert!(
        (1..=interval_secs(per_minute)).contains(&retry_after),
        "Retry-After {retry_after} at {per_minute} a minute"
    );
    assert_eq!(body["error"]["retryAfterSecs"], retry_after, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("too many {what}"))
            && message.contains(&format!("{per_minute} a minute"))
            && message.contains(&format!("Try again in {retry_after} second")),
        "{message}"
    );
    retry_after
}

#[track_caller]
fn assert_status(response: Response, want: u16) -> Value {
    let (status, body) = json_answer(response);
    assert_eq!(status, want, "{body}");
    body
}

/// The file names in `person`'s `public/` (not below).
fn public_files(server: &Server, person: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(server.home(person).join("public"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_upload_past_the_limit_is_429_with_retry_after_for_all_the_persons_tokens() {
    let server = start(&[("UPLOADS_PER_MINUTE", "3")]);
    let other_token = server.create_token("me", "person");
    let bob = server.add_person("bob");

    assert_status(upload(&server, &server.token, "one.txt"), 201);
    // limit - 1 and the limit itself pass, the second through another token of the same
    // person.
    assert_status(upload(&server, &other_token, "two.txt"), 201);
    assert_status(upload(&server, &server.token, "three.txt"), 201);
    // limit + 1, through either token: refused, and nothing is placed or staged.
    assert_rate_limited(upload(&server, &server.token, "four.txt"), "uploads", 3);
    assert_rate_limited(upload(&server, &other_token, "five.txt"), "uploads", 3);
    assert_eq!(
        public_files(&server, "me"),
        ["one.txt", "three.txt", "two.txt"]
    );
    assert_no_temporaries(&server);

    // Another person has a bucket of their own: the limit, and not one more.
    for name in ["b1.txt", "b2.txt", "b3.txt"] {
        assert_status(upload(&server, &bob, name), 201);
    }
    assert_rate_limited(upload(&server, &bob, "b4.txt"), "uploads", 3);

    // A token that names nobody is refused by authentication, not counted: 401.
    let (status, body) = json_answer(upload(&server, "ferry_not_a_token", "x.txt"));
    assert_error(status, &body, 401, "unauthorized");

    // Other routes are not counted: the limited person still lists and downloads.
    let (status, _) = support::get_json(&server.url("/v1/files"), &server.token);
    assert_eq!(status, 200);
}

#[test]
fn a_resumable_creation_counts_as_an_upload_and_its_parts_do_not() {
    let server = start(&[("UPLOADS_PER_MINUTE", "2")]);
    let created = tus_create(&server, &server.token, "resumed.txt");
    assert_eq!(created.status().as_u16(), 201);
    let at = created.headers()["location"].to_str().unwrap().to_owned();
    assert_status(upload(&server, &server.token, "posted.txt"), 201);

    // Both uploads of the minute are spent; a new creation is refused with tus's own
    // header still on it, and makes neither a temporary nor a record.
    let refused = tus_create(&server, &server.token, "late.txt");
    assert_eq!(refused.headers()["tus-resumable"], "1.0.0");
    assert_rate_limited(refused, "uploads", 2);
    assert_eq!(
        support::temporaries(&server.data).len(),
        1,
        "only the first creation's temporary"
    );
    assert_eq!(
        server.site().resumable_in_progress("me").unwrap(),
        1,
        "only the first creation is on record"
    );

    // The upload already made goes on: its parts and HEADs are not counted.
    for (offset, part) in [(0, &b"hel"[..]), (3, &b"lo"[..])] {
        let patched = client()
            .patch(server.url(&at))
            .bearer_auth(&server.token)
            .header("Tus-Resumable", "1.0.0")
            .header("Upload-Offset", offset.to_string())
            .header("Content-Type", "application/offset+octet-stream")
            .body(part.to_vec())
            .send()
            .unwrap();
        assert_eq!(patched.status().as_u16(), 204, "{:?}", patched.text());
    }
    let head = client()
        .head(server.url(&at))
        .bearer_auth(&server.token)
        .header("Tus-Resumable", "1.0.0")
        .send()
        .unwrap();
    assert_eq!(head.status().as_u16(), 200);
    assert_eq!(
        std::fs::read(server.home("me").join("public/resumed.txt")).unwrap(),
        b"hello"
    );
    assert_no_temporaries(&server);
    assert_rate_limited(upload(&server, &server.token, "later.txt"), "uploads", 2);
}

#[test]
fn an_upload_refused_for_the_rate_is_answered_before_its_body_comes() {
    // A body that is read is waited for two minutes, long past the read below.
    let server = Server::start_with_env(&[
        ("FERRY_LIMITS__UPLOADS_PER_MINUTE", "1"),
        ("FERRY_SERVER__BODY_IDLE_TIMEOUT_SECS", "120"),
    ]);
    assert_status(upload(&server, &server.token, "first.txt"), 201);
    // Headers announcing 5 MB, and none of the body: the answer comes anyway.
    let head = format!(
        "POST /v1/media HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: multipart/form-data; boundary=xyz\r\nContent-Length: 5000000\r\n\r\n",
        server.addr, server.token
    );
    let answer = support::raw_request(&server.addr, head.as_bytes(), Duration::from_secs(10));
    assert_eq!(status_of(&answer), 429, "{answer}");
    let lower = answer.to_ascii_lowercase();
    assert!(lower.contains("\r\nretry-after: "), "{answer}");
    assert!(answer.contains("\"rate_limited\""), "{answer}");
    assert_eq!(public_files(&server, "me"), ["first.txt"]);
    assert_no_temporaries(&server);
}

#[test]
fn the_delivery_past_the_limit_is_429_and_fetches_nothing() {
    let server = start(&[("DELIVERIES_PER_MINUTE", "2")]);
    let harness = server.create_token("me", "harness");
    let other_harness = server.create_token("me", "harness");
    let fetched = Arc::new(AtomicUsize::new(0));
    let counted = fetched.clone();
    let peer = Peer::start(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        Reply::ok(b"delivered\n".to_vec())
    });
    let url = peer.url("/report.txt");
    assert_status(deliver(&server, &harness, &url, "d1.txt"), 201);
    assert_status(deliver(&server, &other_harness, &url, "d2.txt"), 201);
    assert_rate_limited(deliver(&server, &harness, &url, "d3.txt"), "deliveries", 2);
    assert_rate_limited(
        deliver(&server, &other_harness, &url, "d4.txt"),
        "deliveries",
        2,
    );
    assert_eq!(
        fetched.load(Ordering::SeqCst),
        2,
        "a refused delivery fetched"
    );
    let attachments = server.home("me").join("public/attachments");
    assert_eq!(tree(&attachments), ["d1.txt", "d2.txt"]);
    // Deliveries do not spend uploads.
    assert_status(upload(&server, &server.token, "mine.txt"), 201);
}

/// One MCP session at the gateway's `/mcp` with `harness`, making `steps`; the results.
fn over_mcp(server: &Server, harness: &str, steps: Vec<Value>) -> Vec<Value> {
    let out = mcp::drive(&json!({
        "server": mcp::http(&server.url("/mcp"), harness),
        "elicitation": null,
        "steps": steps,
    }));
    out["results"].as_array().unwrap().clone()
}

/// Asserts a tool result is a `rate_limited` tool error for `what` (not a JSON-RPC
/// error), whose text and structured error both say when to try again.
#[track_caller]
fn assert_tool_rate_limited(result: &Value, what: &str, per_minute: u64) {
    assert_eq!(mcp::protocol_error(result), None, "{result}");
    assert!(is_error(result), "{result}");
    let error = &result["structuredContent"]["error"];
    assert_eq!(error["code"], "rate_limited", "{result}");
    let secs = error["retryAfterSecs"]
        .as_u64()
        .unwrap_or_else(|| panic!("no retryAfterSecs: {result}"));
    assert!(
        (1..=interval_secs(per_minute)).contains(&secs),
        "{secs} at {per_minute} a minute"
    );
    let text = text_of(result);
    assert!(
        text.contains(&format!("too many {what}"))
            && text.contains(&format!("Try again in {secs} second")),
        "{text}"
    );
    assert_eq!(error["message"], text.as_str());
}

#[test]
fn the_tool_call_past_the_limit_is_a_tool_error_that_says_when_to_retry() {
    let server = start(&[("TOOL_CALLS_PER_MINUTE", "3")]);
    let harness = server.create_token("me", "harness");
    let other_harness = server.create_token("me", "harness");
    server.add_person("bob");
    let bob = server.create_token("bob", "harness");

    let r = over_mcp(
        &server,
        &harness,
        vec![
            call("file_write", json!({"path": "one.txt", "content": "1\n"})),
            call("dir_list", json!({"path": "."})),
            call("file_read", json!({"path": "one.txt"})),
            // limit + 1: nothing is written.
            call("file_write", json!({"path": "two.txt", "content": "2\n"})),
            call("dir_list", json!({"path": "."})),
        ],
    );
    for (i, result) in r[..3].iter().enumerate() {
        assert!(!is_error(result), "call {i}: {result}");
    }
    assert_tool_rate_limited(&r[3], "tool calls", 3);
    assert_tool_rate_limited(&r[4], "tool calls", 3);
    assert!(server.home("me").join("one.txt").exists());
    assert!(
        !server.home("me").join("two.txt").exists(),
        "a refused call wrote"
    );

    // Another harness token of the same person shares the count.
    let r = over_mcp(
        &server,
        &other_harness,
        vec![call("dir_list", json!({"path": "."}))],
    );
    assert_tool_rate_limited(&r[0], "tool calls", 3);

    // Bob's agent has its own: the limit, and not one more.
    let mut steps: Vec<Value> = (0..3)
        .map(|_| call("dir_list", json!({"path": "."})))
        .collect();
    steps.push(call("dir_list", json!({"path": "."})));
    let r = over_mcp(&server, &bob, steps);
    for (i, result) in r[..3].iter().enumerate() {
        assert!(!is_error(result), "bob's call {i}: {result}");
    }
    assert_tool_rate_limited(&r[3], "tool calls", 3);
}

#[test]
fn file_deliver_counts_as_a_delivery_too() {
    let server = start(&[("DELIVERIES_PER_MINUTE", "1")]);
    let harness = server.create_token("me", "harness");
    std::fs::write(server.home("me").join("report.txt"), "done\n").unwrap();
    let r = over_mcp(
        &server,
        &harness,
        vec![
            call("file_deliver", json!({"paths": ["report.txt"]})),
            call("file_deliver", json!({"paths": ["report.txt"]})),
            // Tool calls are not limited by deliveries: other tools go on.
            call("dir_list", json!({"path": "."})),
            call("file_read", json!({"path": "report.txt"})),
        ],
    );
    assert!(!is_error(&r[0]), "{}", r[0]);
    assert_tool_rate_limited(&r[1], "deliveries", 1);
    assert!(!is_error(&r[2]), "{}", r[2]);
    assert!(!is_error(&r[3]), "{}", r[3]);
    assert_eq!(
        tree(&server.home("me").join("public/attachments")),
        ["report.txt"],
        "the refused file_deliver delivered"
    );
    // The same bucket as `POST /v1/deliveries`: spent by the tool, refused over HTTP.
    let peer = Peer::start(|_| Reply::ok(b"x".to_vec()));
    assert_rate_limited(
        deliver(&server, &harness, &peer.url("/x.txt"), "x.txt"),
        "deliveries",
        1,
    );
}

/// The middle and the largest of `latencies`, in milliseconds.
fn summary(latencies: &mut [Duration]) -> String {
    latencies.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "median {:.1} ms, max {:.1} ms over {}",
        ms(latencies[latencies.len() / 2]),
        ms(latencies[latencies.len() - 1]),
        latencies.len()
    )
}

/// Person B's requests: `listings` listings and `uploads` uploads (named from `tag`),
/// each timed; every answer must be a success.
fn person_b_works(
    server: &Server,
    token: &str,
    tag: &str,
    listings: usize,
    uploads: usize,
) -> Vec<Duration> {
    let mut latencies = Vec::new();
    for i in 0..listings.max(uploads) {
        if i < listings {
            let started = Instant::now();
            let (status, body) = support::get_json(&server.url("/v1/files"), token);
            latencies.push(started.elapsed());
            assert_eq!(status, 200, "B's listing {tag} {i}: {body}");
        }
        if i < uploads {
            let started = Instant::now();
            let (status, body) = json_answer(upload(server, token, &format!("b-{tag}-{i}.txt")));
            latencies.push(started.elapsed());
            assert_eq!(status, 201, "B's upload {tag} {i}: {body}");
        }
    }
    latencies
}

#[test]
fn one_persons_flood_does_not_refuse_another_persons_requests() {
    const LIMIT: u64 = 5;
    let server = start(&[("UPLOADS_PER_MINUTE", "5")]);
    let a_tokens = [server.token.clone(), server.create_token("me", "person")];
    let b = server.add_person("bob");

    // B before the flood: one of B's five uploads, and listings.
    let mut before = person_b_works(&server, &b, "before", 20, 1);

    // A floods from 8 connections over both of A's tokens until B is done, at least 25
    // requests each.
    let stop = Arc::new(AtomicBool::new(false));
    let flood_started = Instant::now();
    let flooders: Vec<_> = (0..8)
        .map(|n| {
            let (stop, token) = (stop.clone(), a_tokens[n % 2].clone());
            let (base, addr) = (server.base.clone(), server.addr.clone());
            std::thread::spawn(move || {
                // Fresh connections: a refused upload's unread body closes its connection.
                let client = Client::builder()
                    .timeout(Duration::from_secs(60))
                    .pool_max_idle_per_host(0)
                    .build()
                    .unwrap();
                let (mut created, mut limited, mut other) = (0, 0, Vec::new());
                let mut i = 0;
                while i < 25 || !stop.load(Ordering::SeqCst) {
                    let name = format!("a-{n}-{i}.txt");
                    let response = client
                        .post(format!("{base}/v1/media"))
                        .bearer_auth(&token)
                        .header(
                            "Content-Type",
                            format!("multipart/form-data; boundary={BOUNDARY}"),
                        )
                        .body(multipart(BOUNDARY, &[("file", Some(&name), b"flood\n")]))
                        .send()
                        .unwrap_or_else(|e| panic!("A's upload to {addr}: {e}"));
                    match response.status().as_u16() {
                        201 => created += 1,
                        429 => {
                            let retry: u64 = response.headers()["retry-after"]
                                .to_str()
                                .unwrap()
                                .parse()
                                .unwrap();
                            assert!((1..=interval_secs(LIMIT)).contains(&retry), "{retry}");
                            limited += 1;
                        }
                        status => other.push(status),
                    }
                    i += 1;
                }
                (created, limited, other)
            })
        })
        .collect();

    // B during the flood: the other four of B's uploads, and as many listings.
    let mut during = person_b_works(&server, &b, "during", 20, 4);
    stop.store(true, Ordering::SeqCst);
    let (mut a_created, mut a_limited) = (0, 0);
    for flooder in flooders {
        let (created, limited, other) = flooder.join().unwrap();
        assert_eq!(
            other,
            Vec::<u16>::new(),
            "A got answers other than 201 and 429"
        );
        a_created += created;
        a_limited += limited;
    }
    let flood_secs = flood_started.elapsed().as_secs();

    // A had the limit, plus one for each interval the flood lasted, and no more; the
    // rest was refused and left nothing.
    let allowed = LIMIT + flood_secs / interval_secs(LIMIT);
    assert!(
        (LIMIT..=allowed).contains(&a_created),
        "A placed {a_created} in {flood_secs} s"
    );
    assert!(
        a_limited >= 200 - allowed,
        "A was refused only {a_limited} times"
    );
    let a_files = public_files(&server, "me")
        .into_iter()
        .filter(|name| name.starts_with("a-"))
        .count() as u64;
    assert_eq!(a_files, a_created, "A's refused uploads left files");
    assert_eq!(public_files(&server, "bob").len(), 5, "B's five uploads");
    assert_no_temporaries(&server);
    eprintln!(
        "A: {a_created} placed, {a_limited} refused in {flood_secs} s; \
         B before the flood: {}; B during it: {}",
        summary(&mut before),
        summary(&mut during)
    );
}
