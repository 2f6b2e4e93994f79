//! The chat relay and the live events, end to end over HTTP (spec members M-CHAT,
//! M-DELIVER, M-AUTH, M-WEB; docs/web-contract.md): a real gateway relaying to a scripted
//! OpenAI-compatible agent on loopback, whose answer each test chooses per request.

mod support;

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{
    Peer, Reply, Server, SseEvent, SseStream, assert_alive, client, create_project, error_code,
    is_rfc3339, json_answer, open_events, post_json, write_file,
};

/// Pause between the pieces of a scripted streamed reply.
const STEP_DELAY: Duration = Duration::from_millis(20);
/// The most a whole turn may take before a test gives up on it.
const TURN_WAIT: Duration = Duration::from_secs(20);
/// The most a test waits for an expected `files` event.
const EVENT_WAIT: Duration = Duration::from_secs(5);
/// Files written straight to disk are polled for every 400 ms; the contract says "within a
/// second", and this leaves room for a loaded machine.
const POLL_WAIT: Duration = Duration::from_millis(1500);
/// The chat turns one person may run at once.
const CHAT_TURNS_PER_PERSON: usize = 2;

// ---------------------------------------------------------------------------------------
// The scripted upstream agent
// ---------------------------------------------------------------------------------------

/// One request the scripted agent received.
#[derive(Clone, Debug)]
struct Request {
    method: String,
    path: String,
    /// Names lower-cased.
    headers: Vec<(String, String)>,
    body: Value,
    /// The length of the body as it came.
    body_bytes: usize,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The bearer token the gateway presented.
    fn token(&self) -> String {
        let auth = self
            .header("authorization")
            .expect("an Authorization header");
        auth.strip_prefix("Bearer ")
            .unwrap_or_else(|| panic!("not a bearer token: {auth:?}"))
            .to_owned()
    }

    fn messages(&self) -> &Vec<Value> {
        self.body["messages"]
            .as_array()
            .unwrap_or_else(|| panic!("no messages array in {}", self.body))
    }

    /// The `content` of the last message, which must be the member's.
    fn last_user_content(&self) -> &str {
        let last = self.messages().last().expect("at least one message");
        assert_eq!(
            last["role"], "user",
            "the last message is the member's: {last}"
        );
        last["content"].as_str().expect("a text content")
    }
}

/// Something the agent does while streaming.
enum Step {
    /// One `data:` chunk with this text as its delta.
    Delta(String),
    /// Runs on the agent's thread with the request: write a file, call the gateway, …
    Act(Box<dyn FnOnce(&Request) + Send>),
    /// Destroys the connection in the middle of the chunked body.
    Cut,
}

fn delta(text: &str) -> Step {
    Step::Delta(text.to_owned())
}

fn act(f: impl FnOnce(&Request) + Send + 'static) -> Step {
    Step::Act(Box::new(f))
}

/// How the agent answers one request.
enum Answer {
    /// A chunked `text/event-stream`: a role chunk, the steps, a finish chunk, `[DONE]`.
    Stream(Vec<Step>),
    /// This status with a small JSON error body.
    Status(u16),
    /// Ignores `stream` and answers one JSON completion with this text.
    Completion(String),
    /// Starts a stream, runs the steps, and never finishes (until the gateway hangs up).
    Hang(Vec<Step>),
    /// Starts a stream, writes `first` once, then `piece` `times` times (as one chunk each,
    /// `pause` apart), then waits for the gateway to hang up: the hostile upstream.
    Pour {
        first: Vec<u8>,
        piece: Vec<u8>,
        times: usize,
        pause: Duration,
    },
}

/// A loopback OpenAI-compatible chat completions endpoint that answers each request with
/// the next queued [`Answer`] (an unscripted request gets a 500) and records every request,
/// and when the gateway hung up on a [`Answer::Hang`] or [`Answer::Pour`].
struct Agent {
    url: String,
    requests: Arc<Mutex<Vec<Request>>>,
    answers: Arc<Mutex<VecDeque<Answer>>>,
    hung_up: Arc<Mutex<Vec<Instant>>>,
    stop: Arc<AtomicBool>,
}

impl Agent {
    fn start() -> Agent {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "http://{}/v1/chat/completions",
            listener.local_addr().unwrap()
        );
        listener.set_nonblocking(true).unwrap();
        let agent = Agent {
            url,
            requests: Arc::default(),
            answers: Arc::default(),
            hung_up: Arc::default(),
            stop: Arc::default(),
        };
        let (requests, answers, hung_up, stop) = (
            agent.requests.clone(),
            agent.answers.clone(),
            agent.hung_up.clone(),
            agent.stop.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (requests, answers, hung_up) =
                            (requests.clone(), answers.clone(), hung_up.clone());
                        std::thread::spawn(move || {
                            serve_agent(stream, &requests, &answers, &hung_up)
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        agent
    }

    /// Queues the answer to the next request.
    fn answer(&self, answer: Answer) {
        self.answers.lock().unwrap().push_back(answer);
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    fn last_request(&self) -> Request {
        self.requests().pop().expect("the agent received a request")
    }

    /// When the gateway hung up on the last hanging or pouring answer, waiting up to `wait`.
    fn hung_up_within(&self, wait: Duration) -> Option<Instant> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(at) = self.hung_up.lock().unwrap().last() {
                return Some(*at);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Asserts that the gateway hung up on the upstream (waiting up to `wait`) within 2 s
    /// of `since`, when the turn ended or the member left; `what` names that moment.
    #[track_caller]
    fn assert_hung_up_soon_after(&self, since: Instant, wait: Duration, what: &str) {
        let hung_up = self.hung_up_within(wait).expect("the gateway hung up");
        let after = hung_up.saturating_duration_since(since);
        assert!(
            after < Duration::from_secs(2),
            "the upstream was closed {after:?} after {what}"
        );
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve_agent(
    stream: TcpStream,
    requests: &Mutex<Vec<Request>>,
    answers: &Mutex<VecDeque<Answer>>,
    hung_up: &Mutex<Vec<Instant>>,
) {
    stream.set_nonblocking(false).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return;
    }
    let mut words = request_line.split_whitespace();
    let method = words.next().unwrap_or_default().to_owned();
    let path = words.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let request = Request {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        body_bytes: body.len(),
    };
    requests.lock().unwrap().push(request.clone());
    let answer = answers.lock().unwrap().pop_front();
    let mut out = stream;
    match answer {
        None => respond(
            &mut out,
            500,
            "application/json",
            r#"{"error":{"message":"the test scripted no answer"}}"#,
        ),
        Some(Answer::Status(status)) => respond(
            &mut out,
            status,
            "application/json",
            r#"{"error":{"message":"scripted failure"}}"#,
        ),
        Some(Answer::Completion(text)) => {
            let body = json!({
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            });
            respond(&mut out, 200, "application/json", &body.to_string());
        }
        Some(Answer::Stream(steps)) => {
            if stream_steps(&mut out, &request, steps).is_ok() {
                let _ = finish_chunk(&mut out, json!({}), Some("stop"))
                    .and_then(|()| chunk(&mut out, b"data: [DONE]\n\n"))
                    .and_then(|()| out.write_all(b"0\r\n\r\n"))
                    .and_then(|()| out.flush());
            }
        }
        Some(Answer::Hang(steps)) => {
            if stream_steps(&mut out, &request, steps).is_ok() {
                wait_for_hang_up(&mut reader);
            }
            hung_up.lock().unwrap().push(Instant::now());
        }
        Some(Answer::Pour {
            first,
            piece,
            times,
            pause,
        }) => {
            let poured = stream_steps(&mut out, &request, Vec::new())
                .and_then(|()| chunk(&mut out, &first))
                .and_then(|()| {
                    (0..times).try_for_each(|_| {
                        std::thread::sleep(pause);
                        chunk(&mut out, &piece)
                    })
                });
            // A write that fails is the gateway's close; else it has all and must close.
            if poured.is_ok() {
                wait_for_hang_up(&mut reader);
            }
            hung_up.lock().unwrap().push(Instant::now());
        }
    }
}

/// Waits for the gateway to hang up (a read of 0 bytes is its close), at most 30 s.
fn wait_for_hang_up(reader: &mut BufReader<TcpStream>) {
    let _ = reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(30)));
    let _ = reader.read(&mut [0; 64]);
}

fn respond(out: &mut TcpStream, status: u16, content_type: &str, body: &str) {
    let head = format!(
        "HTTP/1.1 {status} Scripted\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = out.write_all(head.as_bytes());
    let _ = out.write_all(body.as_bytes());
    let _ = out.flush();
}

/// The head of a chunked event stream, then the steps; `Err` once the body was cut.
fn stream_steps(out: &mut TcpStream, request: &Request, steps: Vec<Step>) -> std::io::Result<()> {
    out.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
          Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
    )?;
    // Real servers open with a chunk that carries the role and no content.
    finish_chunk(out, json!({"role": "assistant"}), None)?;
    for step in steps {
        std::thread::sleep(STEP_DELAY);
        match step {
            Step::Delta(text) => finish_chunk(out, json!({"content": text}), None)?,
            Step::Act(f) => f(request),
            Step::Cut => {
                let _ = out.shutdown(Shutdown::Both);
                return Err(std::io::ErrorKind::ConnectionAborted.into());
            }
        }
    }
    Ok(())
}

/// One `data:` line of a streamed completion, as one HTTP chunk.
fn finish_chunk(out: &mut TcpStream, delta: Value, finish: Option<&str>) -> std::io::Result<()> {
    let data = json!({
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    chunk(out, format!("data: {data}\n\n").as_bytes())
}

fn chunk(out: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    out.write_all(format!("{:x}\r\n", bytes.len()).as_bytes())?;
    out.write_all(bytes)?;
    out.write_all(b"\r\n")?;
    out.flush()
}

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// A server whose `[agent] upstream` is `upstream`, with more environment.
fn start_with_upstream(upstream: &str, env: &[(&str, &str)]) -> Server {
    let mut vars = vec![("FERRY_AGENT__UPSTREAM", upstream)];
    vars.extend_from_slice(env);
    Server::start_with_env(&vars)
}

fn start_with_agent(agent: &Agent) -> Server {
    start_with_upstream(&agent.url, &[])
}

fn post_chat(server: &Server, token: &str, body: &Value) -> reqwest::blocking::Response {
    client()
        .post(server.url("/v1/chat"))
        .bearer_auth(token)
        .json(body)
        .send()
        .unwrap()
}

/// Sends one chat message and returns every event of the streamed answer.
fn turn(server: &Server, body: Value) -> Vec<SseEvent> {
    let response = post_chat(server, &server.token, &body);
    let status = response.status().as_u16();
    if status != 200 {
        panic!(
            "POST /v1/chat {body}: {status} {}",
            response.text().unwrap_or_default()
        );
    }
    let content_type = header(&response, "content-type");
    assert!(
        content_type.starts_with("text/event-stream"),
        "Content-Type {content_type:?}"
    );
    SseStream::new(response).until_end(TURN_WAIT)
}

/// Sends a chat message that must be refused before any stream: its status and JSON body.
fn refused(server: &Server, body: Value) -> (u16, Value) {
    let response = post_chat(server, &server.token, &body);
    json_answer(response)
}

fn header(response: &reqwest::blocking::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// Asserts an error answer with `status` and `code`, and a message.
fn assert_refused(answer: (u16, Value), status: u16, code: &str) {
    let (got, body) = answer;
    assert_eq!(got, status, "{body}");
    assert_eq!(error_code(&body), code, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );
}

/// Each event as (name, JSON data).
fn named(events: &[SseEvent]) -> Vec<(String, Value)> {
    events.iter().map(|e| (e.event.clone(), e.json())).collect()
}

fn ev(name: &str, data: Value) -> (String, Value) {
    (name.to_owned(), data)
}

fn delta_ev(text: &str) -> (String, Value) {
    ev("delta", json!({ "text": text }))
}

fn done_ev() -> (String, Value) {
    ev("done", json!({}))
}

/// The notice for `public/attachments/<name>`, exactly as the contract words it.
fn notice_ev(name: &str) -> (String, Value) {
    ev(
        "notice",
        json!({
            "text": format!("📎 {name} — public/attachments/{name}"),
            "path": format!("public/attachments/{name}"),
        }),
    )
}

/// `events` with each `error` event's message checked (a non-empty string, the only other
/// field) and replaced by `"…"`, so that sequences can be compared exactly.
fn with_error_messages_elided(events: &[SseEvent]) -> Vec<(String, Value)> {
    named(events)
        .into_iter()
        .map(|(name, data)| {
            if name != "error" {
                return (name, data);
            }
            let fields = data.as_object().expect("an error event is an object");
            assert_eq!(fields.len(), 2, "error event fields: {data}");
            assert!(
                data["message"].as_str().is_some_and(|m| !m.is_empty()),
                "error event message: {data}"
            );
            (name, json!({ "code": data["code"], "message": "…" }))
        })
        .collect()
}

fn error_ev(code: &str) -> (String, Value) {
    ev("error", json!({ "code": code, "message": "…" }))
}

/// Uploads `bytes` as `name` (into `project`); returns the 201 body.
fn upload(server: &Server, token: &str, name: &str, bytes: &[u8], project: Option<&str>) -> Value {
    let (status, body) = support::upload(server, token, name, bytes, project);
    assert_eq!(status, 201, "upload {name}: {body}");
    body
}

/// Delivers `url` with a harness token; returns the 201 body.
fn deliver(server: &Server, harness: &str, request: Value) -> Value {
    let (status, body) = post_json(server, harness, "/v1/deliveries", &request);
    assert_eq!(status, 201, "delivery {request}: {body}");
    body
}

/// The saved conversation of a workspace.
fn history(server: &Server, project: Option<&str>) -> Vec<Value> {
    let mut request = client()
        .get(server.url("/v1/chat/history"))
        .bearer_auth(&server.token);
    if let Some(project) = project {
        request = request.query(&[("project", project)]);
    }
    let (status, body) = json_answer(request.send().unwrap());
    assert_eq!(status, 200, "{body}");
    body["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("no messages array: {body}"))
        .clone()
}

/// A history entry with its time (RFC 3339) and id (a positive number) checked and
/// removed, for exact comparison.
fn without_time(message: &Value) -> Value {
    let time = message["time"]
        .as_str()
        .unwrap_or_else(|| panic!("no time in {message}"));
    assert!(is_rfc3339(time), "{time:?} is not an RFC 3339 time");
    assert!(
        message["id"].as_i64().is_some_and(|id| id > 0),
        "no id in {message}"
    );
    let mut message = message.clone();
    message.as_object_mut().unwrap().remove("time");
    message.as_object_mut().unwrap().remove("id");
    message
}

fn user(text: &str, attachments: &[&str]) -> Value {
    json!({ "role": "user", "text": text, "attachments": attachments })
}

fn assistant(text: &str) -> Value {
    json!({ "role": "assistant", "text": text, "attachments": [] })
}

/// `public/attachments` of `person`'s main workspace (`project` None) or a project, on disk.
fn attachments_dir(server: &Server, person: &str, project: Option<&str>) -> PathBuf {
    server
        .workspace(person, project)
        .join("public")
        .join("attachments")
}

/// A person's open `GET /v1/events`. A file written on disk into `public/attachments/`
/// may be seen twice while it is being written, alone or together with files that changed
/// since. Such repeats of announced attachments are skipped or allowed beside the
/// expected paths; anything else must be exactly the expected event (that a delivery is
/// announced once is `events_announce_a_delivery_once_on_every_stream`).
struct Watch {
    stream: SseStream,
    /// The events received, as JSON, repeats included.
    seen: Vec<Value>,
    /// `(project, path)` of every attachment announced so far.
    announced: Vec<(Value, String)>,
}

impl Watch {
    fn open(server: &Server, token: &str) -> Watch {
        Watch {
            stream: open_events(server, token),
            seen: Vec::new(),
            announced: Vec::new(),
        }
    }

    /// The next `files` event must be `{"project":…,"paths":[…]}` (give or take repeats),
    /// within `wait`.
    fn expect_within(&mut self, wait: Duration, project: Option<&str>, paths: &[&str]) {
        let want = json!({ "project": project, "paths": paths });
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(event) = self.stream.next(left) else {
                panic!(
                    "no files event {want} within {wait:?} (stream ended: {:?}); before: {:?}",
                    self.stream.ended(),
                    self.seen
                );
            };
            if event.event != "files" {
                continue;
            }
            let data = event.json();
            self.seen.push(data.clone());
            let got: Vec<String> = data["paths"]
                .as_array()
                .unwrap_or_else(|| panic!("no paths: {data}"))
                .iter()
                .map(|p| p.as_str().unwrap().to_owned())
                .collect();
            let (wanted, extra): (Vec<&String>, Vec<&String>) =
                got.iter().partition(|p| paths.contains(&p.as_str()));
            let project_matches = data["project"] == want["project"];
            let extra_repeats = extra
                .iter()
                .all(|p| self.was_announced(&data["project"], p));
            if wanted.is_empty() && extra_repeats {
                continue; // only a repeat of what was announced before
            }
            if project_matches && extra_repeats && wanted.len() == paths.len() {
                self.announce(&data);
                return; // the expected paths, perhaps with repeats
            }
            assert_eq!(data, want, "events so far: {:?}", self.seen);
            self.announce(&data);
            return;
        }
    }

    fn expect(&mut self, project: Option<&str>, paths: &[&str]) {
        self.expect_within(EVENT_WAIT, project, paths);
    }

    fn was_announced(&self, project: &Value, path: &str) -> bool {
        path.starts_with("public/attachments/")
            && self
                .announced
                .iter()
                .any(|(p, a)| p == project && a == path)
    }

    fn announce(&mut self, data: &Value) {
        for path in data["paths"].as_array().unwrap() {
            let path = path.as_str().unwrap().to_owned();
            self.announced.push((data["project"].clone(), path));
        }
    }
}

// ---------------------------------------------------------------------------------------
// 1. A turn streams
// ---------------------------------------------------------------------------------------

#[test]
fn chat_turn_streams_deltas_in_order_then_done() {
    let agent = Agent::start();
    let mut server = start_with_upstream(&agent.url, &[("FERRY_AGENT__MODEL", "scripted-model")]);
    agent.answer(Answer::Stream(vec![
        delta("Hello"),
        delta(", "),
        delta("world"),
        delta("."),
    ]));

    let events = turn(&server, json!({ "message": "Say hello." }));
    assert_eq!(
        named(&events),
        vec![
            delta_ev("Hello"),
            delta_ev(", "),
            delta_ev("world"),
            delta_ev("."),
            done_ev()
        ]
    );

    // What the agent was asked.
    let requests = agent.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.header("x-ferry-person"), Some("me"));
    assert_eq!(request.header("x-ferry-project"), None);
    assert!(
        request
            .header("content-type")
            .is_some_and(|ct| ct.starts_with("application/json")),
        "{:?}",
        request.headers
    );
    assert_eq!(request.body["stream"], json!(true), "{}", request.body);
    assert_eq!(request.body["model"], "scripted-model", "{}", request.body);
    let messages = request.messages();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0]["role"], "system");
    assert!(
        messages[0]["content"]
            .as_str()
            .is_some_and(|c| c.contains("public/attachments")),
        "the system message names public/attachments: {}",
        messages[0]
    );
    assert_eq!(
        messages[1],
        json!({ "role": "user", "content": "Say hello." })
    );

    // The token the agent got is a harness token of me: it delivers, and it is no member.
    let token = request.token();
    assert_ne!(token, server.token);
    let peer = Peer::start(|_| Reply::ok("made by the agent"));
    let body = deliver(
        &server,
        &token,
        json!({ "url": peer.url("/out/made-by-agent.txt") }),
    );
    assert_eq!(
        body["path"], "public/attachments/made-by-agent.txt",
        "{body}"
    );
    assert_eq!(
        std::fs::read(attachments_dir(&server, "me", None).join("made-by-agent.txt")).unwrap(),
        b"made by the agent"
    );
    for path in ["/v1/files", "/v1/chat/history", "/v1/events"] {
        let response = client()
            .get(server.url(path))
            .bearer_auth(&token)
            .send()
            .unwrap();
        assert_refused(json_answer(response), 401, "unauthorized");
    }
    let response = post_chat(&server, &token, &json!({ "message": "hi" }));
    assert_refused(json_answer(response), 401, "unauthorized");

    // A plain person token chats too, and the agent is given the same harness token.
    let person = server.create_token("me", "person");
    agent.answer(Answer::Stream(vec![delta("Again.")]));
    let response = post_chat(&server, &person, &json!({ "message": "Once more." }));
    assert_eq!(response.status().as_u16(), 200);
    let events = SseStream::new(response).until_end(TURN_WAIT);
    assert_eq!(named(&events), vec![delta_ev("Again."), done_ev()]);
    assert_eq!(agent.last_request().token(), token);

    assert_alive(&mut server);
}

#[test]
fn chat_needs_a_member_token() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    let harness = server.create_token("me", "harness");
    for token in [None, Some("ferry_not_a_token"), Some(harness.as_str())] {
        let mut request = client()
            .post(server.url("/v1/chat"))
            .json(&json!({ "message": "hi" }));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        assert_refused(json_answer(request.send().unwrap()), 401, "unauthorized");
        let mut request = client().get(server.url("/v1/chat/history"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        assert_refused(json_answer(request.send().unwrap()), 401, "unauthorized");
    }
    assert!(agent.requests().is_empty());
    assert_alive(&mut server);
}

// ---------------------------------------------------------------------------------------
// 2. Notices
// ---------------------------------------------------------------------------------------

#[test]
fn chat_notice_for_a_file_the_agent_writes_itself() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    let report = attachments_dir(&server, "me", None).join("report.txt");
    let written = report.clone();
    agent.answer(Answer::Stream(vec![
        delta("Writing the report. "),
        act(move |_| write_file(&written, b"the quarterly report")),
        delta("Saved the report to public/attachments/report.txt."),
    ]));
    let mut watch = Watch::open(&server, &server.token);

    let events = turn(&server, json!({ "message": "Write the report." }));
    assert_eq!(
        named(&events),
        vec![
            delta_ev("Writing the report. "),
            delta_ev("Saved the report to public/attachments/report.txt."),
            notice_ev("report.txt"),
            done_ev(),
        ]
    );
    assert_eq!(std::fs::read(&report).unwrap(), b"the quarterly report");
    // The open page hears of it too.
    watch.expect(None, &["public/attachments/report.txt"]);
    assert_alive(&mut server);
}

#[test]
fn chat_notice_for_a_name_with_a_newline_and_an_override_is_one_line_that_shows_them() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    // Written by the agent itself, so no safe-name rule shaped it.
    let name = "q3.txt\n📎 public\u{2215}attachments\u{2215}payroll\u{202E}xslx.exe";
    let shown = "q3.txt⟨U+000A⟩📎 public⟨U+2215⟩attachments⟨U+2215⟩payroll⟨U+202E⟩xslx.exe";
    let written = attachments_dir(&server, "me", None).join(name);
    agent.answer(Answer::Stream(vec![
        act(move |_| write_file(&written, b"MZ")),
        delta("Done."),
    ]));
    let events = turn(&server, json!({ "message": "Write it." }));
    assert_eq!(
        named(&events),
        vec![
            delta_ev("Done."),
            ev(
                "notice",
                json!({
                    "text": format!("📎 {shown} — public/attachments/{shown}"),
                    "path": format!("public/attachments/{name}"),
                }),
            ),
            done_ev(),
        ],
        "one notice: its text shows the newline and the override, its path is exact"
    );
    assert_alive(&mut server);
}

#[test]
fn chat_notice_for_a_delivery_the_agent_posts() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    let peer = Peer::start(|_| Reply::ok("a,b\n1,2\n"));
    let (gateway, source) = (server.base.clone(), peer.url("/exports/summary.csv"));
    let (tx, rx) = mpsc::channel();
    agent.answer(Answer::Stream(vec![
        delta("Exporting. "),
        act(move |request| {
            let response = client()
                .post(format!("{gateway}/v1/deliveries"))
                .bearer_auth(request.token())
                .json(&json!({ "url": source }))
                .send()
                .unwrap();
            tx.send(json_answer(response)).unwrap();
        }),
        delta("Saved the summary to public/attachments/summary.csv."),
    ]));

    let events = turn(&server, json!({ "message": "Export the summary." }));
    let (status, body) = rx.recv_timeout(TURN_WAIT).unwrap();
    assert_eq!(status, 201, "the agent's delivery: {body}");
    assert_eq!(body["path"], "public/attachments/summary.csv");
    assert_eq!(
        named(&events),
        vec![
            delta_ev("Exporting. "),
            delta_ev("Saved the summary to public/attachments/summary.csv."),
            notice_ev("summary.csv"),
            done_ev(),
        ]
    );
    assert_eq!(
        std::fs::read(attachments_dir(&server, "me", None).join("summary.csv")).unwrap(),
        b"a,b\n1,2\n"
    );
    assert_alive(&mut server);
}

#[test]
fn chat_notices_only_what_the_turn_changed_in_attachments() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    let attachments = attachments_dir(&server, "me", None);
    write_file(&attachments.join("report.txt"), b"v1");

    // Nothing changes: no notice, though attachments/ holds a file.
    agent.answer(Answer::Stream(vec![delta("Nothing to deliver.")]));
    let events = turn(&server, json!({ "message": "Anything new?" }));
    assert_eq!(
        named(&events),
        vec![delta_ev("Nothing to deliver."), done_ev()]
    );

    // Files written elsewhere, in public/ or outside it, are no delivery.
    let (home, public) = (server.home("me"), server.home("me").join("public"));
    agent.answer(Answer::Stream(vec![
        act(move |_| {
            write_file(&home.join("work").join("draft.txt"), b"draft");
            write_file(&public.join("notes.txt"), b"notes");
        }),
        delta("Kept my notes."),
    ]));
    let events = turn(&server, json!({ "message": "Take notes." }));
    assert_eq!(named(&events), vec![delta_ev("Kept my notes."), done_ev()]);

    // An existing attachment rewritten: a notice for it.
    let report = attachments.join("report.txt");
    agent.answer(Answer::Stream(vec![
        act(move |_| write_file(&report, b"version two")),
        delta("Updated public/attachments/report.txt."),
    ]));
    let events = turn(&server, json!({ "message": "Update the report." }));
    assert_eq!(
        named(&events),
        vec![
            delta_ev("Updated public/attachments/report.txt."),
            notice_ev("report.txt"),
            done_ev(),
        ]
    );

    // Two files in one turn: one notice each, after the reply and before done.
    let dir = attachments.clone();
    agent.answer(Answer::Stream(vec![
        act(move |_| {
            write_file(&dir.join("b.txt"), b"b");
            write_file(&dir.join("a.txt"), b"a");
        }),
        delta("Two files."),
    ]));
    let events = named(&turn(&server, json!({ "message": "Two, please." })));
    assert_eq!(events.len(), 4, "{events:?}");
    assert_eq!(events[0], delta_ev("Two files."));
    let mut notices = events[1..3].to_vec();
    notices.sort_by(|a, b| a.1["path"].as_str().cmp(&b.1["path"].as_str()));
    assert_eq!(notices, vec![notice_ev("a.txt"), notice_ev("b.txt")]);
    assert_eq!(events[3], done_ev());

    assert_alive(&mut server);
}

// ---------------------------------------------------------------------------------------
// 3. History and projects
// ---------------------------------------------------------------------------------------

#[test]
fn chat_history_keeps_the_words_never_the_notices() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    upload(&server, &server.token, "a.txt", b"input", None);
    assert!(history(&server, None).is_empty());

    let out = attachments_dir(&server, "me", None).join("out.txt");
    agent.answer(Answer::Stream(vec![
        delta("Done: "),
        act(move |_| write_file(&out, b"output")),
        delta("public/attachments/out.txt"),
    ]));
    let events = turn(
        &server,
        json!({ "message": "Process this.", "attachments": ["public/a.txt"] }),
    );
    assert_eq!(
        named(&events),
        vec![
            delta_ev("Done: "),
            delta_ev("public/attachments/out.txt"),
            notice_ev("out.txt"),
            done_ev(),
        ]
    );

    agent.answer(Answer::Stream(vec![delta("You're "), delta("welcome.")]));
    let events = turn(&server, json!({ "message": "Thanks." }));
    assert_eq!(
        named(&events),
        vec![delta_ev("You're "), delta_ev("welcome."), done_ev()]
    );

    // The second turn carried the first to the agent, after the system message.
    let messages = agent.last_request().messages().clone();
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[1]["role"], "user");
    let first = messages[1]["content"].as_str().unwrap();
    assert!(
        first.starts_with("Process this.") && first.contains("public/a.txt"),
        "{first:?}"
    );
    assert_eq!(
        messages[2],
        json!({ "role": "assistant", "content": "Done: public/attachments/out.txt" })
    );
    assert_eq!(messages[3], json!({ "role": "user", "content": "Thanks." }));
    assert!(
        messages
            .iter()
            .all(|m| !m["content"].as_str().unwrap().contains('📎')),
        "no notice reaches the agent: {messages:?}"
    );

    // The saved conversation: oldest first, words only.
    let saved = history(&server, None);
    assert_eq!(
        saved.iter().map(without_time).collect::<Vec<_>>(),
        vec![
            user("Process this.", &["public/a.txt"]),
            assistant("Done: public/attachments/out.txt"),
            user("Thanks.", &[]),
            assistant("You're welcome."),
        ]
    );
    let times: Vec<&str> = saved.iter().map(|m| m["time"].as_str().unwrap()).collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "oldest first: {times:?}"
    );
    let raw = serde_json::to_string(&saved).unwrap();
    assert!(!raw.contains('📎'), "a notice was saved: {raw}");
    assert_alive(&mut server);
}

#[test]
fn chat_projects_have_their_own_header_notices_and_history() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    create_project(&server, &server.token, "q2");

    // A turn in the project: the header, and a notice for the project's attachment only.
    let (plan, main_file) = (
        attachments_dir(&server, "me", Some("q2")).join("plan.txt"),
        attachments_dir(&server, "me", None).join("main-only.txt"),
    );
    agent.answer(Answer::Stream(vec![
        act(move |_| {
            write_file(&plan, b"the plan");
            write_file(&main_file, b"not this project's");
        }),
        delta("Saved public/attachments/plan.txt."),
    ]));
    let events = turn(&server, json!({ "message": "Plan Q2.", "project": "q2" }));
    assert_eq!(
        named(&events),
        vec![
            delta_ev("Saved public/attachments/plan.txt."),
            notice_ev("plan.txt"),
            done_ev(),
        ]
    );
    let request = agent.last_request();
    assert_eq!(request.header("x-ferry-project"), Some("q2"));
    assert_eq!(request.header("x-ferry-person"), Some("me"));

    // Separate histories.
    assert_eq!(
        history(&server, Some("q2"))
            .iter()
            .map(without_time)
            .collect::<Vec<_>>(),
        vec![
            user("Plan Q2.", &[]),
            assistant("Saved public/attachments/plan.txt.")
        ]
    );
    assert!(history(&server, None).is_empty());

    // The main workspace's turn knows nothing of the project's.
    agent.answer(Answer::Stream(vec![delta("Main here.")]));
    let events = turn(&server, json!({ "message": "Hello main." }));
    assert_eq!(named(&events), vec![delta_ev("Main here."), done_ev()]);
    let request = agent.last_request();
    assert_eq!(request.header("x-ferry-project"), None);
    assert_eq!(request.messages().len(), 2, "{:?}", request.messages());
    assert_eq!(request.last_user_content(), "Hello main.");

    // The project's next turn carries the project's conversation.
    agent.answer(Answer::Stream(vec![delta("Next: review.")]));
    turn(&server, json!({ "message": "Next?", "project": "q2" }));
    let messages = agent.last_request().messages().clone();
    assert_eq!(
        messages[1..].to_vec(),
        vec![
            json!({ "role": "user", "content": "Plan Q2." }),
            json!({ "role": "assistant", "content": "Saved public/attachments/plan.txt." }),
            json!({ "role": "user", "content": "Next?" }),
        ]
    );

    // An unknown project, or another person's, is refused before any stream.
    let bob = server.add_person("bob");
    create_project(&server, &bob, "secret");
    let asked = agent.requests().len();
    for project in ["nope", "secret"] {
        assert_refused(
            refused(&server, json!({ "message": "hi", "project": project })),
            404,
            "unknown_project",
        );
        let response = client()
            .get(server.url("/v1/chat/history"))
            .query(&[("project", project)])
            .bearer_auth(&server.token)
            .send()
            .unwrap();
        assert_refused(json_answer(response), 404, "unknown_project");
    }
    assert_eq!(
        agent.requests().len(),
        asked,
        "a refused message reached the agent"
    );
    assert_alive(&mut server);
}

// ---------------------------------------------------------------------------------------
// 4. Attachments and the limits of a message
// ---------------------------------------------------------------------------------------

#[test]
fn chat_attachments_are_named_to_the_agent() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    assert_eq!(
        upload(&server, &server.token, "a.txt", b"alpha", None)["path"],
        "public/a.txt"
    );

    agent.answer(Answer::Stream(vec![delta("Read it.")]));
    let events = turn(
        &server,
        json!({ "message": "Summarize this.", "attachments": ["public/a.txt"] }),
    );
    assert_eq!(named(&events), vec![delta_ev("Read it."), done_ev()]);
    let content = agent.last_request().last_user_content().to_owned();
    assert!(
        content.starts_with("Summarize this.") && content.contains("public/a.txt"),
        "{content:?}"
    );

    // Attachments alone are a message.
    agent.answer(Answer::Stream(vec![delta("Got the file.")]));
    let events = turn(
        &server,
        json!({ "message": "", "attachments": ["public/a.txt"] }),
    );
    assert_eq!(named(&events), vec![delta_ev("Got the file."), done_ev()]);
    assert!(
        agent
            .last_request()
            .last_user_content()
            .contains("public/a.txt")
    );

    assert_eq!(
        history(&server, None)
            .iter()
            .map(without_time)
            .collect::<Vec<_>>(),
        vec![
            user("Summarize this.", &["public/a.txt"]),
            assistant("Read it."),
            user("", &["public/a.txt"]),
            assistant("Got the file."),
        ]
    );
    assert_alive(&mut server);
}

#[test]
fn chat_refuses_bad_attachments_and_messages_before_any_stream() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    upload(&server, &server.token, "a.txt", b"alpha", None);
    upload(&server, &server.token, "b.txt", b"beta", None);
    let outside = server.home("me").join("x");
    write_file(&outside, b"not the member's");
    std::fs::create_dir_all(server.home("me").join("public").join("dir")).unwrap();

    // Paths outside public/, or nothing there: a JSON error, 4xx.
    for path in [
        "home/me/x",
        "x",
        "../x",
        "public/../x",
        "/etc/passwd",
        "public",
        "public/dir",
    ] {
        let (status, body) = refused(&server, json!({ "message": "see", "attachments": [path] }));
        assert!((400..500).contains(&status), "{path}: {status} {body}");
        assert!(
            body["error"]["code"]
                .as_str()
                .is_some_and(|c| !c.is_empty()),
            "{path}: {body}"
        );
    }
    assert_refused(
        refused(
            &server,
            json!({ "message": "see", "attachments": ["public/missing.txt"] }),
        ),
        404,
        "not_found",
    );

    // At most 32 attachments.
    let many = |n: usize| -> Vec<&str> {
        (0..n)
            .map(|i| {
                if i % 2 == 0 {
                    "public/a.txt"
                } else {
                    "public/b.txt"
                }
            })
            .collect()
    };
    assert_refused(
        refused(
            &server,
            json!({ "message": "many", "attachments": many(33) }),
        ),
        400,
        "too_many_attachments",
    );
    agent.answer(Answer::Stream(vec![delta("32 files.")]));
    let events = turn(
        &server,
        json!({ "message": "many", "attachments": many(32) }),
    );
    assert_eq!(named(&events), vec![delta_ev("32 files."), done_ev()]);

    // At most 64 KiB, counted in bytes.
    const MAX: usize = 64 * 1024;
    assert_refused(
        refused(&server, json!({ "message": "x".repeat(MAX + 1) })),
        400,
        "message_too_long",
    );
    assert_refused(
        refused(&server, json!({ "message": "é".repeat(MAX / 2 + 1) })),
        400,
        "message_too_long",
    );
    agent.answer(Answer::Stream(vec![delta("Long read.")]));
    let events = turn(&server, json!({ "message": "é".repeat(MAX / 2) }));
    assert_eq!(named(&events), vec![delta_ev("Long read."), done_ev()]);
    assert_eq!(
        agent.last_request().last_user_content(),
        "é".repeat(MAX / 2)
    );

    // Nothing to say.
    for body in [
        json!({ "message": "" }),
        json!({ "message": " \n\t " }),
        json!({ "message": "", "attachments": [] }),
    ] {
        assert_refused(refused(&server, body), 400, "empty_message");
    }
    // Not the request's shape.
    for body in [
        json!({}),
        json!({ "message": 1 }),
        json!({ "message": "hi", "extra": true }),
    ] {
        let (status, answer) = refused(&server, body.clone());
        assert_eq!(status, 400, "{body}: {answer}");
    }

    // Only the two accepted messages reached the agent and the conversation.
    assert_eq!(agent.requests().len(), 2);
    let saved = history(&server, None);
    assert_eq!(saved.len(), 4, "{saved:?}");
    assert_eq!(saved[0]["attachments"].as_array().unwrap().len(), 32);
    assert_eq!(saved[2]["text"].as_str().unwrap().len(), MAX);
    assert_alive(&mut server);
}

// ---------------------------------------------------------------------------------------
// 5. No agent configured
// ---------------------------------------------------------------------------------------

#[test]
fn chat_without_an_upstream_is_503_no_agent_and_the_rest_works() {
    let mut server = Server::start();
    let (status, body) = refused(&server, json!({ "message": "hello?" }));
    assert_eq!(status, 503, "{body}");
    assert_eq!(error_code(&body), "no_agent", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("[agent] upstream"), "{message:?}");

    // Uploads, listings, downloads, history and events still work.
    let uploaded = upload(&server, &server.token, "a.txt", b"still works", None);
    assert_eq!(uploaded["path"], "public/a.txt");
    let response = client()
        .get(server.url("/v1/files"))
        .bearer_auth(&server.token)
        .send()
        .unwrap();
    let (status, listing) = json_answer(response);
    assert_eq!(status, 200, "{listing}");
    let names: Vec<&str> = listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["public/attachments", "public/a.txt"],
        "{listing}"
    );
    let response = client()
        .get(server.url("/v1/files/content"))
        .query(&[("path", "public/a.txt")])
        .bearer_auth(&server.token)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.bytes().unwrap().as_ref(), b"still works");
    assert!(
        history(&server, None).is_empty(),
        "a refused message was saved"
    );
    let mut watch = Watch::open(&server, &server.token);
    upload(&server, &server.token, "b.txt", b"b", None);
    watch.expect(None, &["public/b.txt"]);
    assert_alive(&mut server);
}

// ---------------------------------------------------------------------------------------
// 6. Upstream failures
// ---------------------------------------------------------------------------------------

/// The words a member reads for an upstream that is down, and none of a transport's.
#[track_caller]
fn assert_not_answering(events: &[SseEvent], server: &Server, detail_in_log: &str) {
    assert_eq!(
        with_error_messages_elided(events),
        vec![error_ev("agent_unreachable"), done_ev()]
    );
    let message = events[0].json()["message"].as_str().unwrap().to_owned();
    assert!(
        message.starts_with("The agent is not answering"),
        "{message:?}"
    );
    for transport in [
        "tcp",
        "connect",
        "error",
        "os ",
        "http://",
        "127.0.0.1",
        "HTTP",
    ] {
        assert!(
            !message.contains(transport),
            "the member reads {transport:?}: {message:?}"
        );
    }
    // The operator reads what happened, at WARN.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let log = server.log();
        let line = log
            .lines()
            .find(|l| l.contains("not answering") && l.contains(detail_in_log));
        if let Some(line) = line {
            assert!(line.contains("WARN"), "{line}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no WARN line naming {detail_in_log:?}:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn chat_upstream_server_error_is_the_agent_not_answering() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    for status in [500, 502, 503] {
        agent.answer(Answer::Status(status));
        let events = turn(&server, json!({ "message": "Fail, please." }));
        assert_not_answering(&events, &server, &format!("HTTP {status}"));
    }
    assert_eq!(
        history(&server, None)
            .iter()
            .map(without_time)
            .collect::<Vec<_>>(),
        vec![user("Fail, please.", &[]); 3]
    );
    // A refusal of the request itself (4xx) is the agent answering: said as such.
    agent.answer(Answer::Status(401));
    let events = turn(&server, json!({ "message": "Let me in." }));
    assert_eq!(
        with_error_messages_elided(&events),
        vec![error_ev("upstream_error"), done_ev()]
    );

    // The next turn works.
    agent.answer(Answer::Stream(vec![delta("Back again.")]));
    let events = turn(&server, json!({ "message": "Again?" }));
    assert_eq!(named(&events), vec![delta_ev("Back again."), done_ev()]);
    assert_alive(&mut server);
}

#[test]
fn chat_upstream_unreachable_is_the_agent_not_answering() {
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://{}/v1/chat/completions",
        closed.local_addr().unwrap()
    );
    drop(closed);
    let mut server = start_with_upstream(&url, &[]);
    let events = turn(&server, json!({ "message": "Anyone there?" }));
    assert_not_answering(&events, &server, "could not be reached");
    // A name that does not resolve.
    let mut dns = start_with_upstream("http://no-such-host.invalid/v1/chat/completions", &[]);
    let events = turn(&dns, json!({ "message": "Anyone?" }));
    assert_not_answering(&events, &dns, "could not be reached");
    assert_alive(&mut server);
    assert_alive(&mut dns);
}

#[test]
fn chat_upstream_silent_past_the_deadline_is_the_agent_not_answering() {
    // Accepts the connection, reads the request, never answers a byte.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://{}/v1/chat/completions",
        listener.local_addr().unwrap()
    );
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let mut server = start_with_upstream(&url, &[("FERRY_AGENT__TIMEOUT_SECS", "1")]);
    let events = turn(&server, json!({ "message": "Hello?" }));
    assert_not_answering(&events, &server, "no reply within 1 seconds");
    assert_alive(&mut server);
}

#[test]
fn chat_sends_the_api_key_as_the_bearer_token_and_never_shows_it() {
    const KEY: &str = "sk-test-7f3a9c-not-a-real-key";
    let agent = Agent::start();
    let mut server = start_with_upstream(
        &agent.url,
        &[
            ("FERRY_AGENT__API_KEY_ENV", "FERRY_TEST_AGENT_KEY"),
            ("FERRY_TEST_AGENT_KEY", KEY),
        ],
    );
    agent.answer(Answer::Stream(vec![delta("Hello.")]));
    let events = turn(&server, json!({ "message": "Hi" }));
    assert_eq!(named(&events), vec![delta_ev("Hello."), done_ev()]);
    let request = agent.last_request();
    assert_eq!(request.token(), KEY);
    assert_eq!(request.header("x-ferry-person"), Some("me"));
    // No ferry credential goes to a hosted endpoint.
    for (name, value) in &request.headers {
        assert!(!value.contains("fy_"), "{name}: {value}");
    }
    assert!(!server.log().contains(KEY), "the key is in the log");

    // --print-config names the variable, never its value.
    let printed = std::process::Command::new(support::ferry_bin())
        .args(["serve", "--print-config"])
        .env("FERRY_AGENT__API_KEY_ENV", "FERRY_TEST_AGENT_KEY")
        .env("FERRY_TEST_AGENT_KEY", KEY)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&printed.stdout);
    assert!(printed.contains("FERRY_TEST_AGENT_KEY"), "{printed}");
    assert!(!printed.contains(KEY), "{printed}");
    assert_alive(&mut server);
}

#[test]
fn an_api_key_variable_that_is_not_set_stops_the_start_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("site");
    for value in [None, Some(""), Some("  ")] {
        let mut command = std::process::Command::new(support::ferry_bin());
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data"])
            .arg(&data)
            .env("FERRY_AGENT__API_KEY_ENV", "FERRY_TEST_UNSET_KEY")
            .env(
                "FERRY_AGENT__UPSTREAM",
                "http://127.0.0.1:9/v1/chat/completions",
            )
            .env_remove("FERRY_TEST_UNSET_KEY");
        if let Some(value) = value {
            command.env("FERRY_TEST_UNSET_KEY", value);
        }
        let out = command.output().unwrap();
        assert!(!out.status.success(), "{value:?}: it started");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("FERRY_TEST_UNSET_KEY"),
            "{value:?}: {stderr}"
        );
        assert!(stderr.contains("not set"), "{value:?}: {stderr}");
        assert!(!data.exists(), "{value:?}: a site was made");
    }
}

/// `POST /v1/chat/new` for `project`: its status and body.
fn new_conversation(server: &Server, token: &str, project: Option<&str>) -> (u16, Value) {
    let body = match project {
        Some(p) => json!({ "project": p }),
        None => json!({}),
    };
    let response = client()
        .post(server.url("/v1/chat/new"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null))
}

/// The texts of the messages the agent was sent, the system's rules left out.
fn sent_texts(request: &Request) -> Vec<String> {
    request
        .messages()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_new_conversation_archives_the_old_one_and_sends_none_of_it_upstream() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    create_project(&server, &server.token, "q2");
    agent.answer(Answer::Stream(vec![delta("One.")]));
    turn(&server, json!({ "message": "First" }));
    agent.answer(Answer::Stream(vec![delta("In q2.")]));
    turn(
        &server,
        json!({ "message": "Project talk", "project": "q2" }),
    );
    agent.answer(Answer::Stream(vec![delta("Two.")]));
    turn(&server, json!({ "message": "Second" }));
    assert_eq!(
        sent_texts(&agent.last_request()),
        ["First", "One.", "Second"]
    );

    let (status, body) = new_conversation(&server, &server.token, None);
    assert_eq!(status, 200, "{body}");
    assert!(
        history(&server, None).is_empty(),
        "the old conversation is still listed"
    );
    agent.answer(Answer::Stream(vec![delta("Fresh.")]));
    turn(&server, json!({ "message": "Third" }));
    assert_eq!(sent_texts(&agent.last_request()), ["Third"]);
    assert_eq!(
        history(&server, None)
            .iter()
            .map(without_time)
            .collect::<Vec<_>>(),
        vec![user("Third", &[]), assistant("Fresh.")]
    );
    // The project's conversation is its own.
    assert_eq!(history(&server, Some("q2")).len(), 2);
    agent.answer(Answer::Stream(vec![delta("Still q2.")]));
    turn(&server, json!({ "message": "More", "project": "q2" }));
    assert_eq!(
        sent_texts(&agent.last_request()),
        ["Project talk", "In q2.", "More"]
    );

    // Twice in a row is fine; another person's project or an unknown one is not found.
    assert_eq!(new_conversation(&server, &server.token, None).0, 200);
    assert!(history(&server, None).is_empty());
    let bob = server.add_person("bob");
    let (status, body) = new_conversation(&server, &bob, Some("q2"));
    assert_eq!(
        (status, error_code(&body)),
        (404, "unknown_project"),
        "{body}"
    );
    assert_eq!(
        history(&server, Some("q2")).len(),
        4,
        "bob archived my project"
    );

    // A reply still on its way when the conversation is renewed is not saved into the
    // new one.
    let (url, token) = (server.url("/v1/chat/new"), server.token.clone());
    agent.answer(Answer::Stream(vec![
        delta("Before. "),
        act(move |_| {
            let response = client()
                .post(url)
                .bearer_auth(token)
                .json(&json!({}))
                .send();
            assert_eq!(response.unwrap().status().as_u16(), 200);
        }),
        delta("After."),
    ]));
    let events = turn(&server, json!({ "message": "Racing" }));
    assert_eq!(said(&events), "Before. After.");
    assert!(
        history(&server, None).is_empty(),
        "{:?}",
        history(&server, None)
    );
    assert_alive(&mut server);
}

#[test]
fn chat_upstream_dropping_mid_reply_keeps_the_part_said() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    agent.answer(Answer::Stream(vec![
        delta("Part one. "),
        delta("Part two."),
        Step::Cut,
        delta("never sent"),
    ]));
    let events = turn(&server, json!({ "message": "Tell me a long story." }));
    assert_eq!(
        with_error_messages_elided(&events),
        vec![
            delta_ev("Part one. "),
            delta_ev("Part two."),
            error_ev("upstream_dropped"),
            done_ev(),
        ]
    );
    assert_eq!(
        history(&server, None)
            .iter()
            .map(without_time)
            .collect::<Vec<_>>(),
        vec![
            user("Tell me a long story.", &[]),
            assistant("Part one. Part two.")
        ]
    );
    assert_alive(&mut server);
}

#[test]
fn chat_upstream_that_never_finishes_times_out() {
    let agent = Agent::start();
    let mut server = start_with_upstream(&agent.url, &[("FERRY_AGENT__TIMEOUT_SECS", "1")]);
    agent.answer(Answer::Hang(vec![delta("Thinking…")]));
    let started = Instant::now();
    let response = post_chat(&server, &server.token, &json!({ "message": "Think hard." }));
    assert_eq!(response.status().as_u16(), 200);
    let events = SseStream::new(response).until_end(Duration::from_secs(6));
    assert_eq!(
        with_error_messages_elided(&events),
        vec![
            delta_ev("Thinking…"),
            error_ev("upstream_timeout"),
            done_ev()
        ]
    );
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "timed out early: {:?}",
        started.elapsed()
    );

    // What came before the timeout is saved, like a reply that broke off.
    assert_eq!(
        history(&server, None)
            .iter()
            .map(without_time)
            .collect::<Vec<_>>(),
        vec![user("Think hard.", &[]), assistant("Thinking…")]
    );

    // The gateway keeps serving turns afterwards.
    agent.answer(Answer::Stream(vec![delta("Quick one.")]));
    let events = turn(&server, json!({ "message": "Quick?" }));
    assert_eq!(named(&events), vec![delta_ev("Quick one."), done_ev()]);
    assert_alive(&mut server);
}

#[test]
fn chat_upstream_answering_one_json_completion_is_one_delta() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    agent.answer(Answer::Completion("The whole answer at once.".to_owned()));
    let events = turn(&server, json!({ "message": "No streaming." }));
    assert_eq!(
        named(&events),
        vec![delta_ev("The whole answer at once."), done_ev()]
    );
    assert_eq!(
        history(&server, None)
            .iter()
            .map(without_time)
            .collect::<Vec<_>>(),
        vec![
            user("No streaming.", &[]),
            assistant("The whole answer at once.")
        ]
    );
    assert_alive(&mut server);
}

// ---------------------------------------------------------------------------------------
// 6b. A hostile upstream, a member who leaves, a long conversation
// ---------------------------------------------------------------------------------------

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// The gateway's peak resident memory so far, in KiB (`VmHWM`).
fn peak_rss_kib(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in {status}"))
}

/// One `data:` line carrying `text` as its delta, as the upstream writes it.
fn delta_line(text: &str) -> Vec<u8> {
    let data = json!({ "choices": [{ "index": 0, "delta": { "content": text } }] });
    format!("data: {data}\n\n").into_bytes()
}

/// Another person's `GET /v1/files`, over and over until stopped: the slowest answer.
fn time_other_requests(
    server: &Server,
    token: String,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<Duration>) {
    let (stop, url) = (Arc::new(AtomicBool::new(false)), server.url("/v1/files"));
    let stopping = stop.clone();
    let timer = std::thread::spawn(move || {
        let mut slowest = Duration::ZERO;
        while !stopping.load(Ordering::Relaxed) {
            let started = Instant::now();
            let response = client().get(&url).bearer_auth(&token).send().unwrap();
            assert_eq!(response.status().as_u16(), 200);
            slowest = slowest.max(started.elapsed());
            std::thread::sleep(Duration::from_millis(20));
        }
        slowest
    });
    (stop, timer)
}

/// The texts of the `delta` events, joined.
fn said(events: &[SseEvent]) -> String {
    events
        .iter()
        .filter(|e| e.event == "delta")
        .map(|e| e.json()["text"].as_str().unwrap().to_owned())
        .collect()
}

/// The event names, in order, with the deltas run together as one `delta`.
fn shape(events: &[SseEvent]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for e in events {
        if !(e.event == "delta" && names.last().is_some_and(|n| n == "delta")) {
            names.push(e.event.clone());
        }
    }
    names
}

fn error_code_of(events: &[SseEvent]) -> String {
    let error = events
        .iter()
        .find(|e| e.event == "error")
        .expect("an error event");
    error.json()["code"].as_str().unwrap().to_owned()
}

#[test]
fn chat_upstream_line_without_end_is_cut_fast_while_others_stay_fast() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    let bob = server.add_person("bob");
    let before = peak_rss_kib(&server);
    // `data: ` and then 60 MB without a newline, as fast as loopback takes it.
    agent.answer(Answer::Pour {
        first: b"data: ".to_vec(),
        piece: vec![b'a'; 64 * KIB],
        times: 960,
        pause: Duration::ZERO,
    });
    let (stop, timer) = time_other_requests(&server, bob);
    let started = Instant::now();
    let events = turn(&server, json!({ "message": "Flood me." }));
    let took = started.elapsed();
    let ended = Instant::now();
    stop.store(true, Ordering::Relaxed);
    let slowest = timer.join().unwrap();

    assert_eq!(shape(&events), ["delta", "error", "done"], "{events:?}");
    assert_eq!(error_code_of(&events), "reply_too_large");
    assert_eq!(said(&events), "[reply cut at 1 MiB]");
    assert!(took < Duration::from_secs(10), "the turn took {took:?}");
    assert!(
        slowest < Duration::from_secs(1),
        "another person waited {slowest:?}"
    );
    agent.assert_hung_up_soon_after(ended, Duration::from_secs(5), "the turn ended");
    // The line buffer is bounded: nothing near the 60 MB was held.
    let grew = peak_rss_kib(&server).saturating_sub(before);
    eprintln!("60 MB line: turn {took:?}, slowest other request {slowest:?}, peak RSS +{grew} KiB");
    assert!(grew < 32 * 1024, "the gateway grew by {grew} KiB");
    assert_eq!(
        history(&server, None)
            .iter()
            .map(without_time)
            .collect::<Vec<_>>(),
        vec![user("Flood me.", &[]), assistant("[reply cut at 1 MiB]")]
    );
    assert_alive(&mut server);
}

#[test]
fn chat_turn_timeout_is_a_hard_deadline_and_closes_the_upstream() {
    let agent = Agent::start();
    // A cap far above what is poured, so only the deadline can end these turns.
    let cap = (128 * MIB).to_string();
    let mut server = start_with_upstream(
        &agent.url,
        &[
            ("FERRY_AGENT__TIMEOUT_SECS", "2"),
            ("FERRY_AGENT__MAX_REPLY_BYTES", &cap),
        ],
    );
    let attacks = [
        // Trickling forever: a little text every 100 ms.
        Answer::Pour {
            first: delta_line("Still"),
            piece: delta_line("."),
            times: 100_000,
            pause: Duration::from_millis(100),
        },
        // 60 MB without a newline, then nothing.
        Answer::Pour {
            first: b"data: ".to_vec(),
            piece: vec![b'a'; 64 * KIB],
            times: 960,
            pause: Duration::ZERO,
        },
    ];
    for (i, attack) in attacks.into_iter().enumerate() {
        agent.hung_up.lock().unwrap().clear();
        agent.answer(attack);
        let started = Instant::now();
        let events = turn(&server, json!({ "message": format!("Attack {i}") }));
        let took = started.elapsed();
        let ended = Instant::now();
        eprintln!("attack {i} under a 2 s timeout: the turn took {took:?}");
        assert_eq!(
            error_code_of(&events),
            "upstream_timeout",
            "{i}: {events:?}"
        );
        assert_eq!(shape(&events).last().map(String::as_str), Some("done"));
        assert!(
            took >= Duration::from_millis(1900) && took < Duration::from_millis(3500),
            "{i}: the turn took {took:?} under a 2 s timeout"
        );
        agent.assert_hung_up_soon_after(
            ended,
            Duration::from_secs(5),
            &format!("the turn ended ({i})"),
        );
        if i == 0 {
            assert!(said(&events).starts_with("Still."), "{events:?}");
        }
    }
    assert_alive(&mut server);
}

#[test]
fn chat_reply_is_capped_at_the_limit_and_says_so() {
    let agent = Agent::start();
    let mut server = start_with_upstream(&agent.url, &[("FERRY_AGENT__MAX_REPLY_BYTES", "1000")]);
    let note = "[reply cut at 1000 bytes]";
    let a = |n: usize| "a".repeat(n);
    // (what the agent says, in two deltas; what is relayed and saved; cut?)
    let cases = [
        ((a(500), a(499)), a(999), false),
        ((a(500), a(500)), a(1000), false),
        ((a(500), a(501)), format!("{}\n\n{note}", a(1000)), true),
        // "é" is two bytes: at 1000 it would be cut in half, so it goes whole.
        (
            (a(500), format!("{}é", a(499))),
            format!("{}\n\n{note}", a(999)),
            true,
        ),
    ];
    let mut saved = Vec::new();
    for (i, ((first, second), want, cut)) in cases.into_iter().enumerate() {
        agent.answer(Answer::Stream(vec![delta(&first), delta(&second)]));
        let message = format!("Case {i}");
        let events = turn(&server, json!({ "message": message }));
        assert_eq!(said(&events), want, "case {i}");
        let expected: &[&str] = if cut {
            &["delta", "error", "done"]
        } else {
            &["delta", "done"]
        };
        assert_eq!(shape(&events), expected, "case {i}");
        if cut {
            assert_eq!(error_code_of(&events), "reply_too_large");
        }
        saved.push(user(&message, &[]));
        saved.push(assistant(&want));
    }
    // One JSON completion is held to the same cap.
    agent.answer(Answer::Completion(a(1001)));
    let events = turn(&server, json!({ "message": "Whole." }));
    assert_eq!(said(&events), format!("{}\n\n{note}", a(1000)));
    assert_eq!(error_code_of(&events), "reply_too_large");
    saved.push(user("Whole.", &[]));
    saved.push(assistant(&format!("{}\n\n{note}", a(1000))));
    assert_eq!(
        history(&server, None)
            .iter()
            .map(without_time)
            .collect::<Vec<_>>(),
        saved
    );
    assert_alive(&mut server);
}

#[test]
fn chat_fifty_megabyte_reply_is_cut_at_one_mebibyte_and_the_upstream_closed() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    let before = peak_rss_kib(&server);
    // 800 deltas of 64 KiB: 50 MiB of reply.
    agent.answer(Answer::Pour {
        first: delta_line("Here it comes. "),
        piece: delta_line(&"x".repeat(64 * KIB)),
        times: 800,
        pause: Duration::ZERO,
    });
    let events = turn(&server, json!({ "message": "Write a lot." }));
    let ended = Instant::now();
    let want = format!(
        "Here it comes. {}\n\n[reply cut at 1 MiB]",
        "x".repeat(MIB - 15)
    );
    assert_eq!(said(&events).len(), want.len());
    assert!(
        said(&events) == want,
        "the relayed reply is not the cut one"
    );
    assert_eq!(shape(&events), ["delta", "error", "done"]);
    assert_eq!(error_code_of(&events), "reply_too_large");
    agent.assert_hung_up_soon_after(ended, Duration::from_secs(5), "the turn ended");

    // Saved cut, and the history is the cut size, not 50 MB.
    let response = client()
        .get(server.url("/v1/chat/history"))
        .bearer_auth(&server.token)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let body = response.bytes().unwrap();
    assert!(
        body.len() < MIB + 4 * KIB,
        "the history is {} bytes",
        body.len()
    );
    let page: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(page["messages"][1]["text"].as_str().unwrap(), want);
    let grew = peak_rss_kib(&server).saturating_sub(before);
    eprintln!("50 MiB reply: peak RSS +{grew} KiB");
    assert!(grew < 48 * 1024, "the gateway grew by {grew} KiB");
    assert_alive(&mut server);
}

/// A raw `POST /v1/chat` on a connection of its own, read until the first `delta`
/// event, so that the test decides when the member goes away.
fn chat_until_first_delta(server: &Server, message: &str) -> TcpStream {
    let body = json!({ "message": message }).to_string();
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    write!(
        stream,
        "POST /v1/chat HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        server.token,
        body.len()
    )
    .unwrap();
    stream.set_read_timeout(Some(TURN_WAIT)).unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("event: delta") {
        let n = stream.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "the stream ended: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    stream
}

#[test]
fn chat_member_going_away_closes_the_upstream_and_keeps_the_part_said() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    // Silent after its first words: only the member's going away can end this turn soon.
    agent.answer(Answer::Hang(vec![delta("The first words")]));
    let stream = chat_until_first_delta(&server, "Then I leave.");
    let left = Instant::now();
    stream.shutdown(Shutdown::Both).unwrap();
    drop(stream);
    agent.assert_hung_up_soon_after(left, Duration::from_secs(10), "the member left");

    // Trickling on: the member's leaving ends it too.
    agent.hung_up.lock().unwrap().clear();
    agent.answer(Answer::Pour {
        first: delta_line("Drip"),
        piece: delta_line("."),
        times: 100_000,
        pause: Duration::from_millis(50),
    });
    let stream = chat_until_first_delta(&server, "Leaving again.");
    let left = Instant::now();
    drop(stream);
    agent.assert_hung_up_soon_after(left, Duration::from_secs(10), "the member left");

    // What came before is saved, as far as it came.
    let deadline = Instant::now() + Duration::from_secs(5);
    let saved = loop {
        let saved = history(&server, None);
        if saved.len() == 4 || Instant::now() > deadline {
            break saved;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let saved: Vec<Value> = saved.iter().map(without_time).collect();
    assert_eq!(
        saved[..2],
        [user("Then I leave.", &[]), assistant("The first words")]
    );
    assert_eq!(saved[2], user("Leaving again.", &[]));
    let drip = saved[3]["text"].as_str().unwrap();
    assert!(
        drip.starts_with("Drip") && drip.trim_start_matches("Drip").chars().all(|c| c == '.'),
        "{drip:?}"
    );
    assert_alive(&mut server);
}

/// `GET /v1/chat/history` with a query: status and body.
fn history_page(server: &Server, query: &[(&str, &str)]) -> (u16, Value) {
    json_answer(
        client()
            .get(server.url("/v1/chat/history"))
            .query(query)
            .bearer_auth(&server.token)
            .send()
            .unwrap(),
    )
}

/// Runs `turns` quick turns: `Q<i>` answered `A<i>`.
fn chat_turns(agent: &Agent, server: &Server, turns: usize) {
    for i in 0..turns {
        agent.answer(Answer::Completion(format!("A{i}")));
        let events = turn(server, json!({ "message": format!("Q{i}") }));
        assert_eq!(shape(&events), ["delta", "done"]);
    }
}

fn texts(page: &Value) -> Vec<String> {
    page["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("no messages: {page}"))
        .iter()
        .map(|m| m["text"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn chat_history_is_paged_newest_first_with_a_cursor_for_older_pages() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    // 101 messages: the limit of a page, and one more.
    chat_turns(&agent, &server, 50);
    agent.answer(Answer::Status(500));
    turn(&server, json!({ "message": "Q50" }));
    let all: Vec<String> = (0..50)
        .flat_map(|i| [format!("Q{i}"), format!("A{i}")])
        .chain(["Q50".to_owned()])
        .collect();

    // The default page: the newest 50, oldest first, and the cursor to the rest.
    let (status, page) = history_page(&server, &[]);
    assert_eq!(status, 200, "{page}");
    assert_eq!(texts(&page), all[51..]);
    let earlier = page["earlier"].as_i64().expect("a cursor");
    assert_eq!(page["messages"][0]["id"].as_i64(), Some(earlier));
    let (_, older) = history_page(&server, &[("before", &earlier.to_string())]);
    assert_eq!(texts(&older), all[1..51]);
    let (_, oldest) = history_page(&server, &[("before", &older["earlier"].to_string())]);
    assert_eq!(texts(&oldest), all[..1]);
    assert_eq!(oldest["earlier"], Value::Null);

    // limit 99, 100 (the most), 101 (refused); 0 refused.
    let (_, page) = history_page(&server, &[("limit", "99")]);
    assert_eq!(texts(&page), all[2..]);
    assert!(page["earlier"].is_i64());
    let (_, page) = history_page(&server, &[("limit", "100")]);
    assert_eq!(texts(&page), all[1..]);
    let (_, page) = history_page(
        &server,
        &[("limit", "100"), ("before", &page["earlier"].to_string())],
    );
    assert_eq!(texts(&page), all[..1]);
    assert_eq!(page["earlier"], Value::Null);
    for limit in ["101", "0", "-1", "many"] {
        let (status, body) = history_page(&server, &[("limit", limit)]);
        assert_eq!(status, 400, "limit {limit}: {body}");
        let code = error_code(&body);
        assert!(
            code == "bad_limit" || code == "bad_query",
            "limit {limit}: {body}"
        );
    }
    for before in ["0", "-5", "x"] {
        let (status, body) = history_page(&server, &[("before", before)]);
        assert_eq!(status, 400, "before {before}: {body}");
    }
    // A cursor past the newest is the newest page; one before the oldest is empty.
    let (_, page) = history_page(&server, &[("before", &i64::MAX.to_string())]);
    assert_eq!(texts(&page), all[51..]);
    let (_, page) = history_page(&server, &[("before", "1")]);
    assert_eq!(texts(&page), Vec::<String>::new());
    assert_eq!(page["earlier"], Value::Null);
    assert_alive(&mut server);
}

#[test]
fn chat_history_reads_are_bounded_however_long_the_saved_words() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    // Six replies at the cap: more than one page of text.
    for i in 0..6 {
        agent.answer(Answer::Completion(format!("{i}").repeat(MIB)));
        turn(&server, json!({ "message": format!("Q{i}") }));
    }
    // And a 50 MB reply a gateway without the cap saved, written into the site's database.
    {
        use ferry_sql::{Exec, params};
        server
            .metadata_db()
            .execute(
                "INSERT INTO chat_messages (person, project, role, text, attachments, created) \
                 VALUES ('me', '', 'assistant', ?1, '[]', 0)",
                params!["0".repeat(50_000_000)],
            )
            .unwrap();
    }

    let before = peak_rss_kib(&server);
    let readers: Vec<_> = (0..8)
        .map(|_| {
            let (url, token) = (server.url("/v1/chat/history"), server.token.clone());
            std::thread::spawn(move || {
                let response = client().get(url).bearer_auth(token).send().unwrap();
                assert_eq!(response.status().as_u16(), 200);
                response.bytes().unwrap()
            })
        })
        .collect();
    for reader in readers {
        let body = reader.join().unwrap();
        // A page holds at most 4 MiB of text.
        assert!(
            body.len() < 4 * MIB + 16 * KIB,
            "a history page of {} bytes",
            body.len()
        );
        let page: Value = serde_json::from_slice(&body).unwrap();
        let newest = texts(&page).pop().unwrap();
        assert_eq!(
            newest,
            format!("{}\n\n[reply cut at 1 MiB]", "0".repeat(MIB))
        );
        assert!(page["earlier"].is_i64(), "more pages wait");
    }
    let grew = peak_rss_kib(&server).saturating_sub(before);
    eprintln!("eight concurrent history reads: peak RSS +{grew} KiB");
    // Eight pages of at most 4 MiB of text, each held a few times over (the rows, the
    // JSON, the body on its way), and the 50 MB message never read whole.
    assert!(
        grew < 112 * 1024,
        "eight history reads grew the gateway by {grew} KiB"
    );

    // Paging back reaches every message, each within the cap.
    let (mut before, mut seen) = (None::<String>, 0);
    loop {
        let mut query = vec![];
        if let Some(b) = &before {
            query.push(("before", b.as_str()));
        }
        let (status, page) = history_page(&server, &query);
        assert_eq!(status, 200);
        seen += texts(&page).len();
        assert!(texts(&page).iter().map(String::len).sum::<usize>() <= 4 * MIB + 64);
        match page["earlier"].as_i64() {
            Some(id) => before = Some(id.to_string()),
            None => break,
        }
    }
    assert_eq!(seen, 13);
    assert_alive(&mut server);
}

// ---------------------------------------------------------------------------------------
// 6b. What a turn sends upstream, and how many a person runs at once
// ---------------------------------------------------------------------------------------

/// One message as the upstream request carries it.
fn upstream(role: &str, content: &str) -> Value {
    json!({ "role": role, "content": content })
}

/// What a message takes of the upstream request body: its JSON and the comma after it
/// (the measure of `agent.max_context_bytes`).
fn cost(message: &Value) -> usize {
    message.to_string().len() + 1
}

/// The saved messages a request carried: all but the system message and the new one.
fn context_of(request: &Request) -> Vec<Value> {
    let messages = request.messages();
    assert_eq!(messages[0]["role"], "system", "{}", messages[0]);
    assert!(messages.len() >= 2, "no new message");
    messages[1..messages.len() - 1].to_vec()
}

/// `turns` turns in which a hostile agent answers over its 1 MiB cap; what they saved, as
/// the upstream is sent it, oldest first.
fn hostile_history(agent: &Agent, server: &Server, turns: usize) -> Vec<Value> {
    let mut saved = Vec::new();
    for i in 0..turns {
        let reply = format!("R{i:02} {}", "x".repeat(MIB + KIB));
        agent.answer(Answer::Completion(reply.clone()));
        let message = format!("Q{i}");
        let events = turn(server, json!({ "message": message }));
        assert_eq!(error_code_of(&events), "reply_too_large");
        saved.push(upstream("user", &message));
        saved.push(upstream(
            "assistant",
            &format!("{}\n\n[reply cut at 1 MiB]", &reply[..MIB]),
        ));
    }
    saved
}

#[test]
fn chat_context_after_twenty_five_cut_replies_is_the_newest_within_four_mebibytes() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    let saved = hostile_history(&agent, &server, 25);
    agent.answer(Answer::Completion("Fine.".to_owned()));
    let events = turn(&server, json!({ "message": "hello" }));
    assert_eq!(said(&events), "Fine.");

    // Unbounded, this request carried all 50 saved messages: 26 MB.
    let request = agent.last_request();
    let system = cost(&request.messages()[0]);
    eprintln!(
        "upstream request after 25 cut replies: {} bytes, {} messages",
        request.body_bytes,
        request.messages().len()
    );
    assert!(
        request.body_bytes <= system + 4 * MIB + KIB,
        "the upstream was sent {} bytes",
        request.body_bytes
    );
    assert_eq!(request.last_user_content(), "hello");
    // The newest saved messages, whole and as saved, as many as fit and not one more.
    let context = context_of(&request);
    let kept = context.len();
    assert!(kept >= 2, "the newest reply is left out: {kept} messages");
    assert_eq!(context, saved[saved.len() - kept..]);
    let taken: usize = context.iter().map(cost).sum();
    assert!(taken <= 4 * MIB, "{taken} bytes of saved messages");
    let next_older = &saved[saved.len() - kept - 1];
    assert!(
        taken + cost(next_older) > 4 * MIB,
        "{} more bytes would have fit",
        cost(next_older)
    );
    assert_alive(&mut server);
}

#[test]
fn chat_context_budget_holds_at_the_limit_and_not_one_byte_more() {
    const BUDGET: usize = 3000;
    let agent = Agent::start();
    let mut server = start_with_upstream(
        &agent.url,
        &[("FERRY_AGENT__MAX_CONTEXT_BYTES", &BUDGET.to_string())],
    );
    for (extra, project) in [(-1i64, "under"), (0, "at"), (1, "over")] {
        create_project(&server, &server.token, project);
        let attached = upload(&server, &server.token, "notes.txt", b"n", Some(project));
        let path = attached["path"].as_str().unwrap().to_owned();
        // Four saved messages whose costs add up to the budget + `extra`. The oldest
        // reply holds characters JSON escapes, so bytes are counted as sent.
        let old = upstream("user", "old");
        let new = upstream("user", &format!("new\n\nAttached files: {path}"));
        let last = upstream("assistant", &"y".repeat(500));
        let filler = |n: usize| format!("{}{}", "\u{1}\"é\\".repeat(20), "a".repeat(n));
        let base = cost(&old) + cost(&new) + cost(&last) + cost(&upstream("assistant", &filler(0)));
        let reply = filler((BUDGET as i64 + extra) as usize - base);
        let reply_message = upstream("assistant", &reply);
        let all = [
            old.clone(),
            reply_message.clone(),
            new.clone(),
            last.clone(),
        ];
        assert_eq!(
            all.iter().map(cost).sum::<usize>() as i64,
            BUDGET as i64 + extra
        );

        agent.answer(Answer::Completion(reply.clone()));
        turn(&server, json!({ "message": "old", "project": project }));
        agent.answer(Answer::Completion("y".repeat(500)));
        turn(
            &server,
            json!({ "message": "new", "project": project, "attachments": [path] }),
        );
        assert_eq!(agent.last_request().messages().last(), Some(&new));
        agent.answer(Answer::Completion("ok".to_owned()));
        turn(&server, json!({ "message": "probe", "project": project }));
        let context = context_of(&agent.last_request());
        if extra <= 0 {
            assert_eq!(context, all, "{project}: all four fit");
        } else {
            // One byte over: the oldest is left out, whole, and nothing else.
            assert_eq!(context, all[1..], "{project}");
        }
    }
    // A newest reply longer than the whole budget leaves no saved message to send.
    agent.answer(Answer::Completion("z".repeat(BUDGET)));
    turn(&server, json!({ "message": "Long, please." }));
    agent.answer(Answer::Completion("ok".to_owned()));
    turn(&server, json!({ "message": "And now?" }));
    assert_eq!(context_of(&agent.last_request()), Vec::<Value>::new());
    assert_eq!(agent.last_request().last_user_content(), "And now?");
    assert_alive(&mut server);
}

/// Starts a turn of the holder of `token` (in `project`) that the agent answers with one
/// delta and then holds open: the member's connection, read to that delta.
fn held_turn(server: &Server, agent: &Agent, token: &str, project: Option<&str>) -> TcpStream {
    agent.answer(Answer::Hang(vec![delta("Thinking")]));
    let mut body = json!({ "message": "Take your time." });
    if let Some(project) = project {
        body["project"] = json!(project);
    }
    let body = body.to_string();
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    write!(
        stream,
        "POST /v1/chat HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    stream.set_read_timeout(Some(TURN_WAIT)).unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("event: delta") {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the turn ended: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    stream
}

/// A quick turn of the holder of `token`: its status, and the error body when refused.
fn quick_turn(server: &Server, agent: &Agent, token: &str, message: &str) -> (u16, Value) {
    agent.answer(Answer::Completion(format!("Re: {message}")));
    let response = post_chat(server, token, &json!({ "message": message }));
    if response.status().as_u16() != 200 {
        // Refused before the upstream was asked: the answer stays queued; take it back.
        agent.answers.lock().unwrap().pop_back();
        return json_answer(response);
    }
    let events = SseStream::new(response).until_end(TURN_WAIT);
    assert_eq!(said(&events), format!("Re: {message}"));
    (200, Value::Null)
}

#[test]
fn chat_turns_of_one_person_are_capped_and_an_ended_one_frees_its_place() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    let bob = server.add_person("bob");
    // limit − 1 and limit run …
    let first = held_turn(&server, &agent, &server.token, None);
    let second = held_turn(&server, &agent, &server.token, None);
    assert_eq!(agent.requests().len(), 2);
    // … limit + 1 is refused in the one error shape, before anything is saved or sent.
    let answer = refused(&server, json!({ "message": "One too many." }));
    assert_refused(answer, 429, "too_many_turns");
    assert_eq!(
        agent.requests().len(),
        2,
        "the refused turn reached the upstream"
    );
    let saved = history(&server, None);
    assert!(
        saved.iter().all(|m| m["text"] != "One too many."),
        "the refused message was saved: {saved:?}"
    );
    // Another person is not held up.
    assert_eq!(quick_turn(&server, &agent, &bob, "Bob here.").0, 200);

    // A turn whose member went away frees its place at once.
    first.shutdown(Shutdown::Both).unwrap();
    drop(first);
    agent
        .hung_up_within(Duration::from_secs(5))
        .expect("the gateway hung up");
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        match quick_turn(&server, &agent, &server.token, "Freed?") {
            (200, _) => break,
            (429, _) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            (status, body) => panic!("the ended turn's place was not freed: {status} {body}"),
        }
    }
    // A finished turn frees its place before its `done`: one after another, each runs
    // beside the held one.
    for i in 0..3 {
        let (status, body) = quick_turn(&server, &agent, &server.token, &format!("Next {i}"));
        assert_eq!(status, 200, "{body}");
    }
    // Turns in a project count for the same person.
    create_project(&server, &server.token, "side");
    let in_project = held_turn(&server, &agent, &server.token, Some("side"));
    let (status, body) = quick_turn(&server, &agent, &server.token, "Still too many.");
    assert_refused((status, body), 429, "too_many_turns");
    drop((second, in_project));
    assert_alive(&mut server);
}

#[test]
fn chat_twelve_concurrent_turns_on_a_long_hostile_history_keep_the_gateway_small() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);
    let started = peak_rss_kib(&server);
    hostile_history(&agent, &server, 25);
    let asked = agent.requests().len();
    let before = peak_rss_kib(&server);
    // Each attempt that reaches the upstream is held there with its whole request.
    for _ in 0..12 {
        agent.answer(Answer::Hang(vec![delta("Thinking")]));
    }
    let attempts: Vec<_> = (0..12)
        .map(|_| {
            let (url, token) = (server.url("/v1/chat"), server.token.clone());
            std::thread::spawn(move || {
                client()
                    .post(url)
                    .bearer_auth(token)
                    .json(&json!({ "message": "hello" }))
                    .send()
                    .unwrap()
            })
        })
        .collect();
    let answers: Vec<_> = attempts.into_iter().map(|a| a.join().unwrap()).collect();
    let (running, refused): (Vec<_>, Vec<_>) = answers.into_iter().partition(|r| r.status() == 200);
    assert_eq!(running.len(), CHAT_TURNS_PER_PERSON, "turns that ran");
    for answer in refused {
        assert_refused(json_answer(answer), 429, "too_many_turns");
    }
    // Both running turns reached the upstream with their whole request.
    let deadline = Instant::now() + TURN_WAIT;
    while agent.requests().len() < asked + 2 {
        assert!(Instant::now() < deadline, "the running turns never asked");
        std::thread::sleep(Duration::from_millis(20));
    }
    let peak = peak_rss_kib(&server);
    eprintln!(
        "25 cut replies: peak RSS +{} KiB; then twelve turn attempts: +{} KiB",
        before.saturating_sub(started),
        peak.saturating_sub(before)
    );
    // A turn holds at most 4 MiB of saved messages and the request written from them,
    // and two run; unbounded, each of the twelve held 26 MB several times over.
    let grew = peak.saturating_sub(started);
    assert!(grew < 64 * 1024, "the gateway grew by {grew} KiB");
    drop(running);
    agent.answers.lock().unwrap().clear();
    assert_alive(&mut server);
}

// ---------------------------------------------------------------------------------------
// 7. GET /v1/events
// ---------------------------------------------------------------------------------------

#[test]
fn events_announce_every_change_made_through_the_api() {
    let mut server = Server::start();
    let harness = server.create_token("me", "harness");
    create_project(&server, &server.token, "p");
    let peer = Peer::start(|_| Reply::ok("delivered"));
    let mut watch = Watch::open(&server, &server.token);

    upload(&server, &server.token, "a.txt", b"a", None);
    watch.expect(None, &["public/a.txt"]);

    let response = client()
        .post(server.url("/v1/files/mkdir"))
        .bearer_auth(&server.token)
        .json(&json!({ "path": "public/reports" }))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
    watch.expect(None, &["public/reports"]);

    let response = client()
        .post(server.url("/v1/files/move"))
        .bearer_auth(&server.token)
        .json(&json!({ "from": "public/a.txt", "to": "public/reports/a.txt" }))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    watch.expect(None, &["public/a.txt", "public/reports/a.txt"]);

    let response = client()
        .delete(server.url("/v1/files"))
        .query(&[("path", "public/reports/a.txt")])
        .bearer_auth(&server.token)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 204);
    watch.expect(None, &["public/reports/a.txt"]);

    upload(&server, &server.token, "b.txt", b"b", Some("p"));
    watch.expect(Some("p"), &["public/b.txt"]);

    deliver(&server, &harness, json!({ "url": peer.url("/d.txt") }));
    watch.expect(None, &["public/attachments/d.txt"]);

    deliver(
        &server,
        &harness,
        json!({ "url": peer.url("/e.txt"), "project": "p" }),
    );
    watch.expect(Some("p"), &["public/attachments/e.txt"]);

    // A refused change announces nothing: the next event is the next real change.
    let response = client()
        .post(server.url("/v1/files/mkdir"))
        .bearer_auth(&server.token)
        .json(&json!({ "path": "public/attachments" }))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 403);
    upload(&server, &server.token, "c.txt", b"c", None);
    watch.expect(None, &["public/c.txt"]);
    assert_alive(&mut server);
}

#[test]
fn events_notice_files_written_straight_to_disk() {
    let mut server = Server::start();
    create_project(&server, &server.token, "p");
    let mut watch = Watch::open(&server, &server.token);

    // Written the moment the stream is open, as an agent busy in the background would.
    write_file(
        &attachments_dir(&server, "me", None).join("ondisk.txt"),
        b"written by the agent",
    );
    watch.expect_within(POLL_WAIT, None, &["public/attachments/ondisk.txt"]);

    write_file(
        &attachments_dir(&server, "me", Some("p")).join("plan.txt"),
        b"in the project",
    );
    watch.expect_within(POLL_WAIT, Some("p"), &["public/attachments/plan.txt"]);

    // A project made while the page is open: a file written into it at once is new.
    create_project(&server, &server.token, "fresh");
    write_file(
        &attachments_dir(&server, "me", Some("fresh")).join("first.txt"),
        b"first",
    );
    watch.expect_within(POLL_WAIT, Some("fresh"), &["public/attachments/first.txt"]);

    // A file rewritten in place is a change too.
    write_file(
        &attachments_dir(&server, "me", None).join("ondisk.txt"),
        b"written again, longer",
    );
    watch.expect_within(POLL_WAIT, None, &["public/attachments/ondisk.txt"]);
    assert_alive(&mut server);
}

#[test]
fn events_reach_only_their_own_person() {
    let mut server = Server::start();
    let bob = server.add_person("bob");
    let harness = server.create_token("me", "harness");
    let peer = Peer::start(|_| Reply::ok("for me"));
    let mut bobs = Watch::open(&server, &bob);
    let mut mine = Watch::open(&server, &server.token);

    upload(&server, &server.token, "mine.txt", b"mine", None);
    mine.expect(None, &["public/mine.txt"]);
    deliver(
        &server,
        &harness,
        json!({ "url": peer.url("/delivered.txt") }),
    );
    mine.expect(None, &["public/attachments/delivered.txt"]);
    write_file(
        &attachments_dir(&server, "me", None).join("ondisk.txt"),
        b"on disk",
    );
    mine.expect_within(POLL_WAIT, None, &["public/attachments/ondisk.txt"]);

    // Bob's first event is his own upload: none of the above reached him.
    upload(&server, &bob, "bob.txt", b"bob's", None);
    bobs.expect(None, &["public/bob.txt"]);
    assert_eq!(bobs.seen.len(), 1, "{:?}", bobs.seen);
    assert_alive(&mut server);
}

/// Every `files` event `stream` brings within `wait` (other kinds, such as the page's
/// `interaction` updates, are not what these tests count).
fn files_events_within(stream: &mut SseStream, wait: Duration) -> Vec<Value> {
    let deadline = Instant::now() + wait;
    let mut seen = Vec::new();
    while let Some(event) = stream.next(deadline.saturating_duration_since(Instant::now())) {
        if event.event == "files" {
            seen.push(event.json());
        }
    }
    seen
}

#[test]
fn events_announce_a_delivery_once_on_every_stream() {
    let server = Server::start();
    let harness = server.create_token("me", "harness");
    let peer = Peer::start(|_| Reply::ok("delivered once"));
    let mut streams = [
        open_events(&server, &server.token),
        open_events(&server, &server.token),
    ];

    // Out of band: the handler writes it, and the poller looks at the folder after.
    deliver(&server, &harness, json!({ "url": peer.url("/once.txt") }));
    // Several poll intervals: a second announcement would have come by then.
    let want = json!({ "project": null, "paths": ["public/attachments/once.txt"] });
    for stream in &mut streams {
        assert_eq!(
            files_events_within(stream, POLL_WAIT),
            std::slice::from_ref(&want)
        );
    }

    // Through a chat turn: the agent delivers, the turn ends and announces it.
    let agent = Agent::start();
    drop(server);
    let mut server = start_with_agent(&agent);
    let mut streams = [
        open_events(&server, &server.token),
        open_events(&server, &server.token),
    ];
    let (gateway, peer_url) = (server.base.clone(), peer.url("/by-agent.txt"));
    agent.answer(Answer::Stream(vec![act(move |request| {
        let response = client()
            .post(format!("{gateway}/v1/deliveries"))
            .bearer_auth(request.token())
            .json(&json!({ "url": peer_url }))
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 201);
    })]));
    let events = turn(&server, json!({ "message": "Deliver it." }));
    assert_eq!(named(&events), vec![notice_ev("by-agent.txt"), done_ev()]);
    let want = json!({ "project": null, "paths": ["public/attachments/by-agent.txt"] });
    for stream in &mut streams {
        assert_eq!(
            files_events_within(stream, POLL_WAIT),
            std::slice::from_ref(&want)
        );
    }
    assert_alive(&mut server);
}

/// A raw `GET /v1/events` on a connection of its own: the status, the connection (open
/// while the stream lives) and, for a refusal, its JSON body.
fn raw_events(server: &Server, token: &str) -> (u16, TcpStream, Value) {
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    write!(
        stream,
        "GET /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            stream.read(&mut byte).unwrap(),
            1,
            "{}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let status = support::status_of(&head);
    if status == 200 {
        return (status, stream, Value::Null);
    }
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .expect("a refusal has a length");
    let mut body = vec![0; length];
    stream.read_exact(&mut body).unwrap();
    (status, stream, serde_json::from_slice(&body).unwrap())
}

#[test]
fn events_streams_of_one_person_are_capped_and_a_closed_one_frees_its_slot() {
    let mut server = start_with_upstream(
        "http://127.0.0.1:9/none",
        &[("FERRY_SERVER__MAX_EVENT_STREAMS", "3")],
    );
    let bob = server.add_person("bob");
    let mut open = Vec::new();
    // limit − 1 and limit are served …
    for n in 1..=3 {
        let (status, stream, body) = raw_events(&server, &server.token);
        assert_eq!(status, 200, "stream {n}: {body}");
        open.push(stream);
    }
    // … limit + 1 is refused in the one error shape, and nobody else is affected.
    let (status, _, body) = raw_events(&server, &server.token);
    assert_refused((status, body), 429, "too_many_streams");
    let (status, _bobs, body) = raw_events(&server, &bob);
    assert_eq!(status, 200, "{body}");

    // A closed stream frees its slot, soon.
    let closed = open.pop().unwrap();
    closed.shutdown(Shutdown::Both).unwrap();
    drop(closed);
    let deadline = Instant::now() + Duration::from_secs(3);
    let reopened = loop {
        let (status, stream, body) = raw_events(&server, &server.token);
        match status {
            200 => break stream,
            429 if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => panic!("the closed stream's slot was not freed: {status} {body}"),
        }
    };
    let (status, _, body) = raw_events(&server, &server.token);
    assert_refused((status, body), 429, "too_many_streams");
    drop((open, reopened));
    assert_alive(&mut server);

    // The default is 16.
    let mut server = Server::start();
    let streams: Vec<_> = (1..=16)
        .map(|n| {
            let (status, stream, body) = raw_events(&server, &server.token);
            assert_eq!(status, 200, "stream {n}: {body}");
            stream
        })
        .collect();
    let (status, _, body) = raw_events(&server, &server.token);
    assert_refused((status, body), 429, "too_many_streams");
    drop(streams);
    assert_alive(&mut server);
}

#[test]
fn events_need_a_member_token() {
    let mut server = Server::start();
    let harness = server.create_token("me", "harness");
    for token in [None, Some("ferry_not_a_token"), Some(harness.as_str())] {
        let mut request = client().get(server.url("/v1/events"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().unwrap();
        assert_eq!(header(&response, "www-authenticate"), "Bearer", "{token:?}");
        assert_refused(json_answer(response), 401, "unauthorized");
    }
    let response = client()
        .get(server.url("/v1/events"))
        .header("Authorization", format!("Basic {}", server.token))
        .send()
        .unwrap();
    assert_refused(json_answer(response), 401, "unauthorized");
    assert_alive(&mut server);
}

// ---------------------------------------------------------------------------------------
// 8. The web assets and the headers on every answer
// ---------------------------------------------------------------------------------------

fn assert_security_headers(response: &reqwest::blocking::Response, what: &str) {
    let csp = header(response, "content-security-policy");
    for directive in ["default-src 'self'", "script-src 'self'"] {
        assert!(
            csp.contains(directive),
            "{what}: Content-Security-Policy {csp:?}"
        );
    }
    assert_eq!(header(response, "referrer-policy"), "no-referrer", "{what}");
    assert_eq!(
        header(response, "x-content-type-options"),
        "nosniff",
        "{what}"
    );
}

#[test]
fn web_page_and_every_answer_carry_the_security_headers() {
    let agent = Agent::start();
    let mut server = start_with_agent(&agent);

    let response = client().get(server.url("/healthz")).send().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_security_headers(&response, "GET /healthz");

    let response = client().get(server.url("/v1/files")).send().unwrap();
    assert_eq!(response.status().as_u16(), 401);
    assert_security_headers(&response, "GET /v1/files without a token");

    let response = client().get(server.url("/no/such/route")).send().unwrap();
    assert_security_headers(&response, "GET /no/such/route");
    assert_refused(json_answer(response), 404, "no_route");

    agent.answer(Answer::Stream(vec![delta("hi")]));
    let response = post_chat(&server, &server.token, &json!({ "message": "hi" }));
    assert_security_headers(&response, "POST /v1/chat");
    SseStream::new(response).until_end(TURN_WAIT);

    let response = client()
        .get(server.url("/v1/events"))
        .bearer_auth(&server.token)
        .send()
        .unwrap();
    assert_security_headers(&response, "GET /v1/events");
    drop(response);

    // The page is embedded from web/ at build time.
    let index = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web/index.html");
    let response = client().get(server.url("/")).send().unwrap();
    let status = response.status().as_u16();
    if index.exists() {
        assert_eq!(status, 200, "web/index.html exists, so / serves it");
        let content_type = header(&response, "content-type");
        assert!(content_type.starts_with("text/html"), "{content_type:?}");
        assert_security_headers(&response, "GET /");
        // (Not compared byte for byte: the page is embedded at build time and may be
        // edited since.)
        let body = response.text().unwrap();
        assert!(
            body.trim_start()
                .to_ascii_lowercase()
                .starts_with("<!doctype html"),
            "/ serves an HTML page: {:?}",
            &body[..body.len().min(200)]
        );
    } else {
        assert_eq!(
            status, 404,
            "web/index.html does not exist (yet), so / must be the API's 404"
        );
        assert_security_headers(&response, "GET / without a page");
    }
    assert_alive(&mut server);
}
