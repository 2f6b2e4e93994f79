//! Load (issue 15): a real `ferry serve` on loopback under many clients at once, each
//! scenario bounded in count and time and ending by itself:
//!
//! - 1,000 concurrent uploads, each landing whole with its sha256;
//! - 5,000 idle connections held open while a client still gets answers;
//! - 500 event streams over 50 people, each hearing the upload of its person;
//! - 200 MCP sessions at once, each calling `dir_list`;
//! - 100 nodes connected at once, each answering `dir_list` calls made at once.
//!
//! Each prints what completed, the gateway's resident set at start and at its peak
//! (`VmHWM`), and the p50 and p99 latency of what it measured (`cargo test -p ferry-cli
//! --test load -- --nocapture`). Correctness is asserted, and the gateway's peak memory
//! against a bound that follows from its configuration alone; latencies are reported,
//! never asserted. The scenarios run one at a time, each on a gateway of its own, so
//! each peak is its own and no scenario's clients slow another's.

mod support;

use support::load as harness;

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ferry_node::Identity;
use ferry_node::host::{NodeHost, NodePolicy};
use ferry_node::policy::PathRules;
use futures_util::StreamExt;
use harness::{
    EventReader, Figures, McpSession, async_client, content, open_files_at_least, peak_rss_kib,
    status_kib,
};
use serde_json::{Value, json};
use support::{Options, Server, sha256_hex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const KIB_PER_MIB: u64 = 1024;

/// One scenario at a time: each measures its own gateway's peak and latencies.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A gateway with `config` as its `ferry.toml`.
fn gateway(config: &str) -> Server {
    Server::start_with(Options {
        config_toml: Some(config.to_owned()),
        ..Options::default()
    })
}

/// `n` people `<prefix>0`… with their member tokens, added with the CLI.
fn people(server: &Server, prefix: &str, n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| {
            let id = format!("{prefix}{i}");
            let token = server.add_person(&id);
            (id, token)
        })
        .collect()
}

/// What a gateway may hold before any client comes, with its runtime's threads, the
/// allocator's arenas and the site open: about 50 MiB is measured for the debug build
/// the tests run; almost twice that leaves room for a build or an allocator that keeps
/// more.
const GATEWAY_BASE_KIB: u64 = 96 * KIB_PER_MIB;

/// Part of what a scenario's configuration lets the gateway hold at once: `count` of
/// something (connections, streams, sessions, links), each costing at most `each_kib`.
struct Held {
    count: u64,
    each_kib: u64,
    what: &'static str,
}

/// Prints the figures, then checks the gateway's peak resident set against the bound
/// its configuration sets: [`GATEWAY_BASE_KIB`] and what `held` allows. What the
/// clients send (how many connections they open, how many bytes) is in no term.
fn report(figures: &Figures, held: &[Held]) {
    figures.print();
    let bound = GATEWAY_BASE_KIB + held.iter().map(|h| h.count * h.each_kib).sum::<u64>();
    let terms: Vec<String> = held
        .iter()
        .map(|h| format!("{} {} of {} KiB", h.count, h.what, h.each_kib))
        .collect();
    println!(
        "load {}: bound {} MiB ({} MiB base, {})",
        figures.scenario,
        bound / KIB_PER_MIB,
        GATEWAY_BASE_KIB / KIB_PER_MIB,
        terms.join(", ")
    );
    assert!(
        figures.peak_kib <= bound,
        "{}: the gateway peaked at {} KiB, over the {bound} KiB its configuration bounds it to",
        figures.scenario,
        figures.peak_kib,
    );
}

/// What an upload may hold while its body streams through: hyper's read buffer of the
/// connection (256 KiB at most), the chunks queued for the writer thread (256 KiB at
/// most), and that thread's stack as far as it is touched.
const UPLOAD_EACH_KIB: u64 = 576;
/// What an idle connection may hold: its task, hyper's buffers before they grow (8 KiB
/// to read, the answer's head to write) and the socket's own state; about 13 KiB is
/// measured.
const IDLE_EACH_KIB: u64 = 32;

// ----------------------------------------------------------------------------- uploads

const UPLOADS: usize = 1000;
/// `server.max_connections` for the uploads: each upload on a connection of its own, and
/// room for a few more.
const UPLOAD_CONNECTIONS: u64 = UPLOADS as u64 + 100;
/// The uploads are spread over this many people, 20 each: far below each person's
/// `limits.uploads_per_minute`, so the rate limit refuses none.
const UPLOADERS: usize = 50;

#[test]
fn a_thousand_concurrent_uploads_each_land_whole() {
    let _one = one_at_a_time();
    open_files_at_least(4 * UPLOADS as u64);
    let server = gateway(&format!(
        "[server]\nmax_connections = {UPLOAD_CONNECTIONS}\n"
    ));
    let people = people(&server, "up", UPLOADERS);
    let start_kib = status_kib(server.pid(), "VmRSS");
    let rt = support::node::runtime();
    let client = async_client();
    let url = server.url("/v1/media");
    let answers = rt.block_on(async {
        let mut uploads = Vec::new();
        for i in 0..UPLOADS {
            let (person, token) = people[i % UPLOADERS].clone();
            let name = format!("load-{i:04}.txt");
            // 8 to 39 KiB, each file its own.
            let bytes = content(&format!("{person} {name}"), (8 + i % 32) * 1024);
            let (client, url) = (client.clone(), url.clone());
            uploads.push(tokio::spawn(async move {
                let part = reqwest::multipart::Part::bytes(bytes.clone()).file_name(name.clone());
                let form = reqwest::multipart::Form::new().part("file", part);
                let started = Instant::now();
                let response = client
                    .post(url)
                    .bearer_auth(&token)
                    .multipart(form)
                    .send()
                    .await;
                let answer = match response {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        r.json::<Value>()
                            .await
                            .map(|body| (status, body))
                            .map_err(|e| e.to_string())
                    }
                    Err(e) => Err(e.to_string()),
                };
                (person, name, bytes, answer, started.elapsed())
            }));
        }
        let mut answers = Vec::new();
        for upload in uploads {
            answers.push(upload.await.unwrap());
        }
        answers
    });
    let peak_kib = peak_rss_kib(server.pid());
    let mut latencies = Vec::new();
    for (person, name, bytes, answer, took) in answers {
        let (status, body) = answer.unwrap_or_else(|e| panic!("uploading {name}: {e}"));
        assert_eq!(status, 201, "{person} {name}: {body}");
        assert_eq!(body["path"], format!("public/{name}"), "{body}");
        assert_eq!(body["size"], bytes.len(), "{body}");
        assert_eq!(body["sha256"], sha256_hex(&bytes), "{person} {name}");
        let landed = server.home(&person).join("public").join(&name);
        assert!(
            std::fs::read(&landed).unwrap() == bytes,
            "{} is not what was sent",
            landed.display()
        );
        latencies.push(took);
    }
    let figures = Figures {
        scenario: "uploads",
        completed: format!("{UPLOADS} concurrent uploads landed whole"),
        start_kib,
        peak_kib,
        measured: "upload",
        latencies,
    };
    report(
        &figures,
        &[Held {
            count: UPLOAD_CONNECTIONS,
            each_kib: UPLOAD_EACH_KIB,
            what: "connections (server.max_connections) streaming an upload",
        }],
    );
}

// -------------------------------------------------------------------- idle connections

const IDLE: usize = 5000;
/// `server.max_connections` for the idle connections: they, the client's, and a little
/// room, so that connections past it are seen refused.
const IDLE_LIMIT: usize = IDLE + 100;
/// Connections tried once the idle ones are held: past the limit, most are refused.
const OVERFLOW: usize = 400;
/// Requests the client makes while the idle connections are held, each on a connection
/// of its own.
const CLIENT_REQUESTS: usize = 200;

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

/// How the gateway took a connection that asked `GET /healthz`.
enum Taken {
    /// Answered `ok` and kept open.
    Served,
    /// Answered with this, then closed (the refusal past `server.max_connections`).
    Refused(String),
}

/// Reads the answer to `GET /healthz` (its body is `ok`) from `stream`, or what came
/// before the gateway closed it.
async fn answer(stream: &mut tokio::net::TcpStream) -> Taken {
    let mut answer = Vec::new();
    let mut buffer = [0u8; 1024];
    while !answer.ends_with(b"\r\n\r\nok") {
        match stream.read(&mut buffer).await {
            Ok(n) if n > 0 => answer.extend_from_slice(&buffer[..n]),
            _ => return Taken::Refused(String::from_utf8_lossy(&answer).into_owned()),
        }
    }
    assert!(
        answer.starts_with(b"HTTP/1.1 200 "),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    Taken::Served
}

/// `GET /healthz` on `stream`, which the gateway must serve and keep open.
async fn served(stream: &mut tokio::net::TcpStream, which: &str) {
    stream.write_all(HEALTHZ).await.unwrap();
    if let Taken::Refused(answer) = answer(stream).await {
        panic!("{which} was closed: {answer:?}");
    }
}

/// Asserts `answer` is the refusal of a connection past `server.max_connections`.
#[track_caller]
fn assert_refused(answer: &str) {
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer:?}");
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    let body: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {answer:?}"));
    assert_eq!(
        support::error_code(&body),
        "too_many_connections",
        "{answer:?}"
    );
}

/// The value of the gauge `name` in the gateway's `/metrics`, asked on `stream` (which
/// the gateway then closes): the scrape takes no connection of its own.
async fn gauge_on(stream: &mut tokio::net::TcpStream, token: &str, name: &str) -> f64 {
    let request = format!(
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
         Connection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

#[test]
fn five_thousand_idle_connections_leave_a_client_served() {
    let _one = one_at_a_time();
    open_files_at_least((IDLE + OVERFLOW) as u64 + 2048);
    // The idle connections must outlast the scenario on a slow machine: the header
    // timeout, which closes a connection that sends no request, is set past it.
    let server = gateway(&format!(
        "[server]\nheader_read_timeout_secs = 600\nmax_connections = {IDLE_LIMIT}\n"
    ));
    let start_kib = status_kib(server.pid(), "VmRSS");
    let rt = support::node::runtime();
    let addr = server.addr.clone();
    let connect = |addr: String| async move {
        tokio::net::TcpStream::connect(&addr)
            .await
            .unwrap_or_else(|e| panic!("connecting: {e}"))
    };
    // Half say nothing at all; half make one request and stay, as a browser's
    // keep-alive connections do. Opened 100 at a time, within the listen backlog.
    let (mut silent, mut kept) = rt.block_on(async {
        let opened: Vec<(bool, tokio::net::TcpStream)> = futures_util::stream::iter(0..IDLE)
            .map(|i| {
                let addr = addr.clone();
                async move {
                    let mut stream = connect(addr).await;
                    let speaks = i % 2 == 1;
                    if speaks {
                        served(&mut stream, &format!("idle connection {i}")).await;
                    }
                    (speaks, stream)
                }
            })
            .buffer_unordered(100)
            .collect()
            .await;
        let (kept, silent): (Vec<_>, Vec<_>) = opened.into_iter().partition(|(s, _)| *s);
        (
            silent.into_iter().map(|(_, s)| s).collect::<Vec<_>>(),
            kept.into_iter().map(|(_, s)| s).collect::<Vec<_>>(),
        )
    });
    // The client: each request on a fresh connection, one after another.
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let mut latencies = Vec::new();
    for _ in 0..CLIENT_REQUESTS {
        let started = Instant::now();
        let response = client
            .get(server.url("/v1/files"))
            .bearer_auth(&server.token)
            .send()
            .unwrap();
        let status = response.status().as_u16();
        let body = response.text().unwrap();
        latencies.push(started.elapsed());
        assert_eq!(status, 200, "{body}");
    }
    // More connections than the limit leaves room for: those past it are answered 503
    // and closed; the gateway never holds more than the limit.
    let (extra, refused) = rt.block_on(async {
        let (mut extra, mut refused) = (Vec::new(), Vec::new());
        for _ in 0..OVERFLOW {
            let mut stream = connect(addr.clone()).await;
            stream.write_all(HEALTHZ).await.unwrap();
            match answer(&mut stream).await {
                Taken::Served => extra.push(stream),
                Taken::Refused(answer) => refused.push(answer),
            }
        }
        (extra, refused)
    });
    assert!(
        extra.len() <= IDLE_LIMIT - IDLE,
        "{} more connections were held past the {IDLE} idle ones, with a limit of \
         {IDLE_LIMIT}",
        extra.len()
    );
    for answer in &refused {
        assert_refused(answer);
    }
    // Every idle connection is still open: the silent ones have nothing to read and no
    // end, the others answer a second request.
    for (i, stream) in silent.iter_mut().enumerate() {
        let mut byte = [0u8; 1];
        match stream.try_read(&mut byte) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("silent connection {i} was closed or spoke: {other:?}"),
        }
    }
    let open = rt.block_on(async {
        futures_util::stream::iter(kept.iter_mut().enumerate())
            .for_each_concurrent(100, |(i, stream)| async move {
                served(stream, &format!("kept connection {i}")).await;
            })
            .await;
        gauge_on(&mut kept[0], &server.token, "ferry_http_connections_open").await
    });
    assert!(
        (IDLE as f64..=IDLE_LIMIT as f64).contains(&open),
        "the gateway counts {open} connections open, holding {IDLE} idle ones and at most \
         {IDLE_LIMIT}"
    );
    let peak_kib = peak_rss_kib(server.pid());
    let figures = Figures {
        scenario: "idle connections",
        completed: format!(
            "{IDLE} idle connections held ({} silent, {} kept alive) while \
             {CLIENT_REQUESTS} client requests were answered; of {OVERFLOW} more, {} held \
             and {} refused",
            silent.len(),
            kept.len(),
            extra.len(),
            refused.len()
        ),
        start_kib,
        peak_kib,
        measured: "client request",
        latencies,
    };
    report(
        &figures,
        &[Held {
            count: IDLE_LIMIT as u64,
            each_kib: IDLE_EACH_KIB,
            what: "idle connections (server.max_connections)",
        }],
    );
}

// ------------------------------------------------------------ the connections' bounds

/// `server.max_connections` for the test of the limit itself.
const LIMIT: usize = 8;

#[test]
fn max_connections_serves_up_to_its_limit_and_refuses_one_more() {
    let _one = one_at_a_time();
    let server = gateway(&format!("[server]\nmax_connections = {LIMIT}\n"));
    let rt = support::node::runtime();
    let addr = server.addr.clone();
    rt.block_on(async {
        let connect = || tokio::net::TcpStream::connect(addr.clone());
        let mut held = Vec::new();
        // limit − 1 connections held, each served.
        for i in 0..LIMIT - 1 {
            let mut stream = connect().await.unwrap();
            served(&mut stream, &format!("connection {i}")).await;
            held.push(stream);
        }
        // The limit-th is served too.
        let mut last = connect().await.unwrap();
        served(&mut last, "the connection at the limit").await;
        held.push(last);
        // One more: answered 503 too_many_connections and closed, whether it spoke or not.
        let mut quiet = connect().await.unwrap();
        let mut refusal = String::new();
        quiet.read_to_string(&mut refusal).await.unwrap();
        assert_refused(&refusal);
        let mut asking = connect().await.unwrap();
        asking.write_all(HEALTHZ).await.unwrap();
        match answer(&mut asking).await {
            Taken::Served => panic!("a connection past the limit was served"),
            Taken::Refused(answer) => assert_refused(&answer),
        }
        // Those held are still served.
        for (i, stream) in held.iter_mut().enumerate() {
            served(stream, &format!("held connection {i}")).await;
        }
        // One closes: its slot is free again once the gateway has seen it go.
        drop(held.pop());
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut again = loop {
            let mut stream = connect().await.unwrap();
            stream.write_all(HEALTHZ).await.unwrap();
            match answer(&mut stream).await {
                Taken::Served => break stream,
                Taken::Refused(answer) => assert_refused(&answer),
            }
            assert!(
                Instant::now() < deadline,
                "the closed connection's slot never came back"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let open = gauge_on(&mut again, &server.token, "ferry_http_connections_open").await;
        assert_eq!(open, LIMIT as f64);
    });
    let log = server.log();
    assert!(
        log.contains(&format!("server.max_connections ({LIMIT})")),
        "the refusals are not in the log:\n{log}"
    );
}

#[test]
fn an_http2_connection_carries_a_few_requests_at_once() {
    let _one = one_at_a_time();
    let server = gateway("");
    let rt = support::node::runtime();
    rt.block_on(async {
        let mut stream = tokio::net::TcpStream::connect(&server.addr).await.unwrap();
        stream
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .await
            .unwrap();
        // The server's first frame is its SETTINGS: 9 bytes of frame head (length,
        // type 4), then entries of a 16-bit id and a 32-bit value.
        let mut frame_head = [0u8; 9];
        let read =
            tokio::time::timeout(Duration::from_secs(30), stream.read_exact(&mut frame_head)).await;
        assert!(matches!(read, Ok(Ok(_))), "{read:?}");
        assert_eq!(frame_head[3], 4, "not a SETTINGS frame: {frame_head:?}");
        let length = u32::from_be_bytes([0, frame_head[0], frame_head[1], frame_head[2]]);
        let mut entries = vec![0u8; length as usize];
        stream.read_exact(&mut entries).await.unwrap();
        let streams = entries.chunks(6).find_map(|entry| {
            (u16::from_be_bytes([entry[0], entry[1]]) == 3)
                .then(|| u32::from_be_bytes([entry[2], entry[3], entry[4], entry[5]]))
        });
        assert_eq!(
            streams,
            Some(ferry_config::limits::HTTP2_STREAMS_PER_CONNECTION)
        );
    });
}

#[test]
fn a_connection_that_never_says_its_protocol_or_answers_pings_is_closed() {
    let _one = one_at_a_time();
    let server = gateway("[server]\nheader_read_timeout_secs = 1\n");
    let rt = support::node::runtime();
    rt.block_on(async {
        // Nothing at all, and the start of the HTTP/2 preface: each closed by the gateway
        // (the wait is only the test's own bound against a gateway that never does).
        for sent in [&b""[..], &b"PRI * HTTP/2.0\r\n"[..]] {
            let mut stream = tokio::net::TcpStream::connect(&server.addr).await.unwrap();
            stream.write_all(sent).await.unwrap();
            let mut rest = Vec::new();
            let read =
                tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut rest)).await;
            assert!(
                matches!(read, Ok(Ok(0))),
                "after {sent:?}: {read:?} {rest:?}"
            );
        }
        // The whole preface, then silence: the gateway's settings and pings go
        // unanswered, and it closes the connection (after a ping interval and a ping
        // timeout, each the header timeout).
        let mut stream = tokio::net::TcpStream::connect(&server.addr).await.unwrap();
        stream
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .await
            .unwrap();
        let mut frames = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut frames)).await;
        assert!(matches!(read, Ok(Ok(_))), "{read:?}");
    });
}

// ----------------------------------------------------------------------- event streams

const STREAM_PEOPLE: usize = 50;
/// Streams each person holds, under `server.max_event_streams` (16).
const STREAMS_PER_PERSON: usize = 10;
/// What a live stream may hold: its connection, its place in the broadcast, the event
/// being written, and the poller's last reading of the person's `public/attachments/`.
const STREAM_EACH_KIB: u64 = 64;

/// The file whose upload each of `person`'s streams must hear of.
fn heard(person: &str) -> String {
    format!("heard-{person}.txt")
}

/// Reads `stream` of `person` until the `files` event of its upload; an event naming
/// another person's file fails it.
async fn hear(mut stream: EventReader, person: String) -> Result<Instant, String> {
    let want = format!("public/{}", heard(&person));
    loop {
        let Some(event) = stream.next().await? else {
            return Err(format!("{person}'s stream ended before its event"));
        };
        if event.event != "files" {
            continue;
        }
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|e| format!("{person}: {e}: {:?}", event.data))?;
        let paths: Vec<&str> = data["paths"]
            .as_array()
            .map(|p| p.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if paths.contains(&want.as_str()) {
            return Ok(Instant::now());
        }
        if paths.iter().any(|p| p.starts_with("public/heard-")) {
            return Err(format!("{person}'s stream heard of {paths:?}"));
        }
    }
}

#[test]
fn five_hundred_event_streams_each_hear_their_person() {
    let _one = one_at_a_time();
    open_files_at_least(4096);
    let server = gateway("");
    let people = people(&server, "ev", STREAM_PEOPLE);
    let start_kib = status_kib(server.pid(), "VmRSS");
    let rt = support::node::runtime();
    let client = async_client();
    let url = server.url("/v1/events");
    let listeners = rt.block_on(async {
        let opened: Vec<(String, EventReader)> = futures_util::stream::iter(
            (0..STREAM_PEOPLE * STREAMS_PER_PERSON).map(|i| people[i % STREAM_PEOPLE].clone()),
        )
        .map(|(person, token)| {
            let (client, url) = (client.clone(), url.clone());
            async move {
                let response = client.get(url).bearer_auth(&token).send().await.unwrap();
                assert_eq!(response.status().as_u16(), 200, "{person}'s stream");
                (person, EventReader::new(response))
            }
        })
        .buffer_unordered(100)
        .collect()
        .await;
        opened
            .into_iter()
            .map(|(person, stream)| {
                let listening = person.clone();
                let heard = tokio::spawn(tokio::time::timeout(
                    Duration::from_secs(90),
                    hear(stream, listening),
                ));
                (person, heard)
            })
            .collect::<Vec<_>>()
    });
    // Every stream is open and listening: each person uploads one file.
    let mut sent = HashMap::new();
    for (person, token) in &people {
        sent.insert(person.clone(), Instant::now());
        let (status, body) = support::upload(&server, token, &heard(person), b"heard\n", None);
        assert_eq!(status, 201, "{person}: {body}");
    }
    let heard_at = rt.block_on(async {
        let mut heard_at = Vec::new();
        for (person, heard) in listeners {
            let at = heard
                .await
                .unwrap()
                .unwrap_or_else(|_| panic!("{person}'s stream heard nothing of its upload"))
                .unwrap_or_else(|e| panic!("{e}"));
            heard_at.push((person, at));
        }
        heard_at
    });
    let peak_kib = peak_rss_kib(server.pid());
    let latencies = heard_at
        .iter()
        .map(|(person, at)| at.duration_since(sent[person]))
        .collect();
    let figures = Figures {
        scenario: "event streams",
        completed: format!(
            "{} streams over {STREAM_PEOPLE} people each heard its upload",
            heard_at.len()
        ),
        start_kib,
        peak_kib,
        measured: "upload to event",
        latencies,
    };
    // Streams are bounded per person (`server.max_event_streams`, 16) and people are
    // the operator's; the events waiting for slow streams by the broadcast's backlog.
    report(
        &figures,
        &[Held {
            count: (STREAM_PEOPLE * 16) as u64,
            each_kib: STREAM_EACH_KIB,
            what: "event streams (people × server.max_event_streams)",
        }],
    );
}

// ------------------------------------------------------------------------ MCP sessions

const MCP_PEOPLE: usize = 10;
/// Sessions each person's harness token holds, under the 32 a token may.
const SESSIONS_PER_PERSON: usize = 20;
/// `dir_list` calls each session makes, one after another.
const CALLS_PER_SESSION: usize = 5;
/// The sessions one harness token may hold (`MCP_SESSIONS_PER_TOKEN_MAX`).
const MCP_SESSIONS_PER_TOKEN: usize = 32;
/// What a session may hold: its state (about 48 KiB), its connection, and one tool call
/// in flight with its answer (at most 8 KiB of text for the model, and the structured
/// listing beside it).
const SESSION_EACH_KIB: u64 = 512;

#[test]
fn two_hundred_mcp_sessions_call_tools_at_once() {
    let _one = one_at_a_time();
    open_files_at_least(4096);
    let server = gateway("");
    let people = people(&server, "ag", MCP_PEOPLE);
    let harness: Vec<(String, String)> = people
        .iter()
        .map(|(person, _)| (person.clone(), server.create_token(person, "harness")))
        .collect();
    let start_kib = status_kib(server.pid(), "VmRSS");
    let rt = support::node::runtime();
    let client = async_client();
    let url = server.url("/mcp");
    let (results, closed) = rt.block_on(async {
        // Every session is opened before any calls, so all are live at once.
        let sessions: Vec<(String, McpSession)> = futures_util::stream::iter(
            (0..MCP_PEOPLE * SESSIONS_PER_PERSON).map(|i| harness[i % MCP_PEOPLE].clone()),
        )
        .map(|(person, token)| {
            let (client, url) = (client.clone(), url.clone());
            async move {
                let session = McpSession::open(&client, &url, &token)
                    .await
                    .unwrap_or_else(|e| panic!("{person}'s session: {e}"));
                (person, session)
            }
        })
        .buffer_unordered(50)
        .collect()
        .await;
        let calls: Vec<_> = sessions
            .into_iter()
            .map(|(person, mut session)| {
                tokio::spawn(async move {
                    let mut results = Vec::new();
                    for _ in 0..CALLS_PER_SESSION {
                        let started = Instant::now();
                        let result = session.call("dir_list", json!({"path": "."})).await;
                        results.push((person.clone(), result, started.elapsed()));
                    }
                    (results, session.close().await)
                })
            })
            .collect();
        let (mut results, mut closed) = (Vec::new(), Vec::new());
        for call in calls {
            let (r, c) = call.await.unwrap();
            results.extend(r);
            closed.push(c);
        }
        (results, closed)
    });
    let peak_kib = peak_rss_kib(server.pid());
    let mut latencies = Vec::new();
    for (person, result, took) in results {
        let result = result.unwrap_or_else(|e| panic!("{person}'s dir_list: {e}"));
        assert_ne!(result["isError"], true, "{person}'s dir_list: {result}");
        assert!(
            result["structuredContent"]["entries"].is_array(),
            "{person}'s dir_list: {result}"
        );
        latencies.push(took);
    }
    for status in closed {
        let status = status.unwrap_or_else(|e| panic!("closing a session: {e}"));
        assert!((200..300).contains(&status), "closing a session: {status}");
    }
    let figures = Figures {
        scenario: "MCP sessions",
        completed: format!(
            "{} sessions at once made {} dir_list calls, each answered",
            MCP_PEOPLE * SESSIONS_PER_PERSON,
            latencies.len()
        ),
        start_kib,
        peak_kib,
        measured: "tool call",
        latencies,
    };
    report(
        &figures,
        &[Held {
            count: (MCP_PEOPLE * MCP_SESSIONS_PER_TOKEN) as u64,
            each_kib: SESSION_EACH_KIB,
            what: "MCP sessions (harness tokens × 32)",
        }],
    );
}

// ------------------------------------------------------------------------------- nodes

const NODES: usize = 100;
/// `dir_list` calls made to each node, one after another, all nodes at once.
const CALLS_PER_NODE: usize = 3;
/// The nodes' callers share this many harness tokens of `me`, 25 sessions each.
const NODE_CALLER_TOKENS: usize = 4;
/// `nodes.max_pending`: every node waits for approval at once, past the default (64).
const NODES_PENDING_MAX: usize = NODES + 10;
/// What a node's link may hold: its WebSocket's read buffer (32 KiB), the link's state,
/// and a listing in flight.
const LINK_EACH_KIB: u64 = 1024;

/// The node `i`'s name, as the tools address it.
fn node_name(i: usize) -> String {
    format!("load-node-{i:03}")
}

/// Dials the gateway at `addr` from `source` as `identity`, named `name`, and serves its
/// calls with `handler`. A handshake refused because too many are running is tried
/// again a moment later, as `ferry node run` does.
async fn dial_node(
    addr: &str,
    source: std::net::Ipv4Addr,
    identity: &Identity,
    name: &str,
    handler: ferry_node::mux::Handler,
) -> ferry_node::Link {
    let mut tries = 0;
    let ws = loop {
        match support::node::open_from(addr, source).await {
            Ok(ws) => break ws,
            Err((503, body)) if support::error_code(&body) == "too_many_handshakes" => {
                tries += 1;
                assert!(tries < 600, "{name} was never let in: {body}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err((status, body)) => panic!("{name} was refused: {status} {body}"),
        }
    };
    let (mut sink, mut stream) = support::node::adapt(ws);
    let info = support::node::info(name);
    ferry_node::handshake::node_handshake(
        &mut sink,
        &mut stream,
        identity,
        info,
        support::node::WAIT,
    )
    .await
    .unwrap_or_else(|e| panic!("{name}'s handshake: {e}"));
    ferry_node::Link::spawn(
        sink,
        stream,
        ferry_node::mux::LinkConfig::new(ferry_node::mux::Role::Node),
        Some(handler),
    )
}

#[test]
fn a_hundred_nodes_each_answer_dir_list_at_once() {
    let _one = one_at_a_time();
    open_files_at_least(4096);
    // Each node serves a folder of its own, holding a file that names it.
    let tmp = tempfile::tempdir().unwrap();
    let srv = std::fs::canonicalize(tmp.path()).unwrap();
    let identities: Vec<Identity> = (0..NODES).map(|_| Identity::generate()).collect();
    let mut config = format!("[nodes]\nmax_pending = {NODES_PENDING_MAX}\n");
    for (i, identity) in identities.iter().enumerate() {
        let folder = srv.join(node_name(i));
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join(format!("i-am-{}", node_name(i))), b"").unwrap();
        config.push_str(&format!(
            "[nodes.\"{}\"]\npersons = [\"me\"]\nallow_read = [\"{}/**\"]\n",
            identity.node_id(),
            folder.display()
        ));
    }
    let server = gateway(&config);
    let harness: Vec<String> = (0..NODE_CALLER_TOKENS)
        .map(|_| server.create_token("me", "harness"))
        .collect();
    let start_kib = status_kib(server.pid(), "VmRSS");
    let rt = support::node::runtime();
    // Each node dials from a loopback address of its own, 8 at a time, as machines of
    // their own would (the gateway runs at most 8 handshakes of one source, 32 in all).
    let links = rt.block_on(async {
        let addr = server.addr.clone();
        let srv = srv.clone();
        futures_util::stream::iter(identities.iter().enumerate())
            .map(|(i, identity)| {
                let (addr, folder) = (addr.clone(), srv.join(node_name(i)));
                async move {
                    let read = vec![format!("{}/**", folder.display())];
                    let host = NodeHost::new(NodePolicy {
                        rules: PathRules::new(&read, &[], &[]).unwrap(),
                        follow_symlinks: false,
                    });
                    let source = std::net::Ipv4Addr::new(127, 0, 1, i as u8 + 1);
                    dial_node(&addr, source, identity, &node_name(i), host.handler()).await
                }
            })
            .buffered(8)
            .collect::<Vec<_>>()
            .await
    });
    let client = support::client();
    for identity in &identities {
        let id = identity.node_id();
        let response = client
            .post(server.url(&format!("/v1/nodes/{id}/approve")))
            .bearer_auth(&server.token)
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "approving {id}");
    }
    for identity in &identities {
        support::node::wait_for_node(&server, &identity.node_id(), |n| {
            n["connected"] == true && n["state"] == "approved"
        });
    }
    let url = server.url("/mcp");
    let results = rt.block_on(async {
        let client = async_client();
        let callers: Vec<_> = (0..NODES)
            .map(|i| {
                let (client, url) = (client.clone(), url.clone());
                let token = harness[i % NODE_CALLER_TOKENS].clone();
                let folder = srv.join(node_name(i)).display().to_string();
                tokio::spawn(async move {
                    let mut session = McpSession::open(&client, &url, &token)
                        .await
                        .unwrap_or_else(|e| panic!("the session for node {i}: {e}"));
                    let mut results = Vec::new();
                    for _ in 0..CALLS_PER_NODE {
                        let args = json!({"node": node_name(i), "path": folder});
                        let started = Instant::now();
                        let result = session.call("dir_list", args).await;
                        results.push((i, result, started.elapsed()));
                    }
                    let _ = session.close().await;
                    results
                })
            })
            .collect();
        let mut results = Vec::new();
        for caller in callers {
            results.extend(caller.await.unwrap());
        }
        results
    });
    let peak_kib = peak_rss_kib(server.pid());
    let mut latencies = Vec::new();
    for (i, result, took) in results {
        let result = result.unwrap_or_else(|e| panic!("dir_list on node {i}: {e}"));
        assert_ne!(result["isError"], true, "dir_list on node {i}: {result}");
        let marker = format!("i-am-{}", node_name(i));
        assert!(
            result.to_string().contains(&marker),
            "node {i} did not answer its own folder: {result}"
        );
        latencies.push(took);
    }
    for link in links {
        link.close();
    }
    let figures = Figures {
        scenario: "nodes",
        completed: format!(
            "{NODES} nodes connected at once answered {} dir_list calls",
            latencies.len()
        ),
        start_kib,
        peak_kib,
        measured: "dir_list on a node",
        latencies,
    };
    // Links are bounded by the nodes the configuration names and approval lets in, the
    // pending ones by `nodes.max_pending`; the callers' sessions by their tokens.
    report(
        &figures,
        &[
            Held {
                count: (NODES + NODES_PENDING_MAX) as u64,
                each_kib: LINK_EACH_KIB,
                what: "node links (approved nodes and nodes.max_pending)",
            },
            Held {
                count: (NODE_CALLER_TOKENS * MCP_SESSIONS_PER_TOKEN) as u64,
                each_kib: SESSION_EACH_KIB,
                what: "MCP sessions (harness tokens × 32)",
            },
        ],
    );
}
