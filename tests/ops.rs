//! Operating a gateway (spec scale S-OPS) through the real binary: `GET /healthz`,
//! `GET /readyz` (and its 503 naming the media store when that cannot be read),
//! `GET /metrics` in the Prometheus text format, scraped after real traffic, and the
//! drain on SIGTERM within `server.shutdown_grace_secs`.

mod support;

use std::collections::BTreeSet;
use std::io::{ErrorKind, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{
    Options, Server, assert_error, assert_no_temporaries, client, json_answer, mcp, multipart,
    read_response, sha256_hex, status_of, upload,
};

/// The families S-OPS names, as `/metrics` must show them.
const FAMILIES: &[&str] = &[
    "ferry_http_requests_total",
    "ferry_http_request_bytes_total",
    "ferry_http_response_bytes_total",
    "ferry_upload_duration_seconds",
    "ferry_node_call_duration_seconds",
    "ferry_event_streams_open",
    "ferry_nodes_connected",
    "ferry_media_store_bytes",
    "ferry_media_store_blobs",
];

fn scrape(server: &Server, token: &str) -> String {
    let response = client()
        .get(server.url("/metrics"))
        .bearer_auth(token)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let kind = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    response.text().unwrap()
}

/// The value of the sample `name{labels}` (labels in the order they were recorded), or
/// of `name` alone.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (key, value) = line.rsplit_once(' ')?;
            (key == series).then(|| value.parse().ok())?
        })
}

/// The families that have a `# TYPE` line.
fn families(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split(' ').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn healthz_and_readyz_answer_and_readyz_names_the_store_that_cannot_be_read() {
    let server = Server::start();
    for path in ["/healthz", "/readyz"] {
        let response = client().get(server.url(path)).send().unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
        assert_eq!(response.text().unwrap(), "ok", "{path}");
    }
    // The media store's folder replaced by a file: the store does not answer. (A mode
    // would not do: the tests run as root, whom no mode stops.)
    let media = server.data.join(".ferry/media");
    let aside = server.data.join(".ferry/media-aside");
    std::fs::create_dir_all(&media).unwrap();
    std::fs::rename(&media, &aside).unwrap();
    std::fs::write(&media, b"not a folder").unwrap();
    let (status, body) = json_answer(client().get(server.url("/readyz")).send().unwrap());
    assert_error(status, &body, 503, "not_ready");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("media store"), "{message}");
    // /healthz says only that the process answers.
    let response = client().get(server.url("/healthz")).send().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    // Gone altogether: not ready, and the readiness check does not make it anew.
    std::fs::remove_file(&media).unwrap();
    let (status, body) = json_answer(client().get(server.url("/readyz")).send().unwrap());
    assert_error(status, &body, 503, "not_ready");
    assert!(
        !media.exists(),
        "the readiness check made the store's folder"
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        !message.contains(&*server.data.to_string_lossy()),
        "{message}"
    );
    // Put back, ready again without a restart.
    std::fs::rename(&aside, &media).unwrap();
    let response = client().get(server.url("/readyz")).send().unwrap();
    assert_eq!(response.status().as_u16(), 200);
}

#[test]
fn metrics_are_for_admins_only() {
    let server = Server::start();
    let person = server.add_person("pat");
    let harness = server.create_token("me", "harness");
    for token in [
        None,
        Some("fy_not_a_token"),
        Some(&person[..]),
        Some(&harness[..]),
    ] {
        let mut request = client().get(server.url("/metrics"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let (status, body) = json_answer(request.send().unwrap());
        assert_error(status, &body, 404, "no_route");
        // Nor does another method tell that the route exists.
        let mut request = client().post(server.url("/metrics"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let (status, body) = json_answer(request.send().unwrap());
        assert_error(status, &body, 404, "no_route");
    }
    scrape(&server, &server.token);
}

#[test]
fn metrics_show_every_family_after_real_traffic() {
    let server = Server::start();
    let token = server.token.clone();

    // An upload of 1000 bytes and a download of it.
    let bytes = vec![b'x'; 1000];
    let (status, body) = upload(&server, &token, "counted.txt", &bytes, None);
    assert_eq!(status, 201, "{body}");
    let response = client()
        .get(server.url("/v1/files/content?path=public/counted.txt"))
        .bearer_auth(&token)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.bytes().unwrap().len(), 1000);
    // A request no route has: counted as `other`, never by its path.
    let response = client()
        .get(server.url("/v1/no-such-route-7f3a"))
        .bearer_auth(&token)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 404);
    // A method HTTP does not define: counted as `other`, never by its name.
    let odd = reqwest::Method::from_bytes(b"FROBNICATE7F3A").unwrap();
    let response = client()
        .request(odd, server.url("/v1/files"))
        .bearer_auth(&token)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 405);
    // A call against a node that does not exist: a node call that failed.
    let harness = server.create_token("me", "harness");
    let out = mcp::drive(&json!({
        "server": mcp::http(&server.url("/mcp"), &harness),
        "steps": [mcp::call("dir_list", json!({"node": "no-such-node", "path": "/srv"}))],
    }));
    assert!(mcp::is_error(&out["results"][0]), "{out}");

    // One event stream open while scraping.
    let events = client()
        .get(server.url("/v1/events"))
        .bearer_auth(&token)
        .timeout(Duration::from_secs(60))
        .send()
        .unwrap();
    assert_eq!(events.status().as_u16(), 200);

    let text = scrape(&server, &token);
    let found = families(&text);
    for family in FAMILIES {
        assert!(found.contains(*family), "no family {family} in:\n{text}");
    }
    let upload_requests = sample(
        &text,
        r#"ferry_http_requests_total{method="POST",route="/v1/media",status="201"}"#,
    );
    assert_eq!(upload_requests, Some(1.0), "{text}");
    // The multipart body carried the 1000 bytes and its framing.
    let bytes_in = sample(
        &text,
        r#"ferry_http_request_bytes_total{route="/v1/media"}"#,
    )
    .unwrap();
    assert!((1000.0..2000.0).contains(&bytes_in), "{bytes_in}\n{text}");
    let bytes_out = sample(
        &text,
        r#"ferry_http_response_bytes_total{route="/v1/files/content"}"#,
    );
    assert_eq!(bytes_out, Some(1000.0), "{text}");
    assert_eq!(
        sample(
            &text,
            r#"ferry_upload_duration_seconds_count{kind="media"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert!(
        sample(
            &text,
            r#"ferry_http_requests_total{method="GET",route="other",status="404"}"#
        )
        .is_some(),
        "{text}"
    );
    assert!(!text.contains("no-such-route-7f3a"), "{text}");
    assert!(
        sample(
            &text,
            r#"ferry_http_requests_total{method="other",route="/v1/files",status="405"}"#
        )
        .is_some(),
        "{text}"
    );
    assert!(!text.contains("FROBNICATE"), "{text}");
    assert_eq!(
        sample(
            &text,
            r#"ferry_node_call_duration_seconds_count{tool="dir_list",outcome="error"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "ferry_event_streams_open"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(sample(&text, "ferry_nodes_connected"), Some(0.0), "{text}");

    // The stream closed: the gauge goes back down.
    drop(events);
    let mut open = None;
    for _ in 0..50 {
        open = sample(&scrape(&server, &token), "ferry_event_streams_open");
        if open == Some(0.0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(open, Some(0.0));
}

/// A `POST /v1/media` of `content` as `name` on a raw connection, of which only the
/// headers and the first `first` bytes of the body are sent; the rest is returned.
fn start_upload(server: &Server, name: &str, content: &[u8], first: usize) -> (TcpStream, Vec<u8>) {
    let body = multipart("drainb0undary", &[("file", Some(name), content)]);
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    let head = format!(
        "POST /v1/media HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: multipart/form-data; boundary=drainb0undary\r\n\
         Content-Length: {}\r\n\r\n",
        server.addr,
        server.token,
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&body[..first]).unwrap();
    (stream, body[first..].to_vec())
}

fn terminate(server: &Server) {
    let pid = libc::pid_t::try_from(server.pid()).unwrap();
    // SAFETY: a signal to the gateway this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
}

/// Waits until a new connection to `addr` is refused; panics after `limit`.
#[track_caller]
fn wait_refused(addr: &str, limit: Duration) {
    let until = Instant::now() + limit;
    loop {
        match TcpStream::connect(addr) {
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => return,
            other => assert!(Instant::now() < until, "still connecting: {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for the gateway to exit, within `limit`, with status 0.
#[track_caller]
fn exits_cleanly(server: &mut Server, limit: Duration, otherwise: &str) {
    let status = server.exit_within(limit).expect(otherwise);
    assert!(status.success(), "{status}");
}

fn gateway_with_grace(grace_secs: u64) -> Server {
    Server::start_with(Options {
        env: vec![
            (
                "FERRY_SERVER__SHUTDOWN_GRACE_SECS".into(),
                grace_secs.to_string(),
            ),
            (
                "FERRY_MEDIA__MAX_UPLOAD_BYTES".into(),
                (80u64 << 20).to_string(),
            ),
        ],
        ..Options::default()
    })
}

#[test]
fn sigterm_lets_an_upload_in_flight_finish_refuses_new_connections_then_exits() {
    let mut server = gateway_with_grace(60);
    let content: Vec<u8> = (0..64u32 << 20).map(|i| (i % 251) as u8).collect();
    let (mut stream, rest) = start_upload(&server, "drained.txt", &content, 4 << 20);
    std::thread::sleep(Duration::from_millis(200));
    terminate(&server);
    wait_refused(&server.addr, Duration::from_secs(10));
    assert!(
        server.is_running(),
        "the gateway left before the upload was done"
    );
    stream.write_all(&rest).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let answer = read_response(&mut stream);
    assert_eq!(
        status_of(&answer),
        201,
        "{}",
        &answer[..answer.len().min(500)]
    );
    let json: serde_json::Value =
        serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(json["size"], 64u64 << 20);
    assert_eq!(json["sha256"], sha256_hex(&content));
    exits_cleanly(
        &mut server,
        Duration::from_secs(20),
        "the gateway did not exit once its last request was done",
    );
    let placed = std::fs::read(server.workspace("me", None).join("public/drained.txt")).unwrap();
    assert!(placed == content, "the placed file differs");
    assert_no_temporaries(&server);
}

#[test]
fn sigterm_ends_an_upload_still_running_at_the_grace_and_leaves_nothing_half_written() {
    let mut server = gateway_with_grace(2);
    let content: Vec<u8> = vec![b'y'; 8 << 20];
    // Half the body, then nothing more: the upload is still running when the grace ends.
    let (_stream, _rest) = start_upload(&server, "stalled.txt", &content, 4 << 20);
    std::thread::sleep(Duration::from_millis(200));
    let terminated = Instant::now();
    terminate(&server);
    exits_cleanly(
        &mut server,
        Duration::from_secs(15),
        "the gateway did not exit after its grace",
    );
    let took = terminated.elapsed();
    assert!(
        took >= Duration::from_secs(2),
        "left before the grace: {took:?}"
    );
    let public = server.workspace("me", None).join("public");
    assert!(!public.join("stalled.txt").exists());
    assert_no_temporaries(&server);
}

#[test]
fn sigterm_does_not_wait_past_its_grace_for_a_tool_call_that_waits() {
    let mut server = gateway_with_grace(2);
    // A page open, so that a pick waits for the person (ten minutes at most).
    let _events = client()
        .get(server.url("/v1/events"))
        .bearer_auth(&server.token)
        .timeout(Duration::from_secs(60))
        .send()
        .unwrap();
    let harness = server.create_token("me", "harness");
    let url = server.url("/mcp");
    let picking = std::thread::spawn(move || {
        mcp::try_drive(&json!({
            "server": mcp::http(&url, &harness),
            "steps": [mcp::call("file_pick", json!({"prompt": "which file?"}))],
            "timeout_secs": 30,
        }))
    });
    std::thread::sleep(Duration::from_secs(2));
    assert!(!picking.is_finished(), "the pick did not wait");
    let terminated = Instant::now();
    terminate(&server);
    exits_cleanly(
        &mut server,
        Duration::from_secs(15),
        "the gateway waited for the pick past its grace",
    );
    let took = terminated.elapsed();
    assert!(took < Duration::from_secs(8), "exited only after {took:?}");
    let _ = picking.join();
}
