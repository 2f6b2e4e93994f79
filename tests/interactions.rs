//! The person in the loop end to end (spec tools `file_delete`, `file_pick`): a real
//! `ferry serve`, and this test process opening the same data dir with `ferry_site::Site`
//! to play the agent tool that asks (as a separate `ferry mcp` process would).

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use ferry_site::{ApprovalOutcome, PickOutcome, Site, WEB_PRESENCE_TTL};
use reqwest::blocking::multipart::{Form, Part};
use serde_json::{Value, json};
use support::{
    Server, SseStream, assert_error, assert_no_temporaries, client, get_json, is_rfc3339,
    json_answer, multipart, open_events, post_json, sha256_hex,
};

/// How long a requester in these tests waits for an answer that is coming.
const ANSWER_WAIT: Duration = Duration::from_secs(20);
/// How long a requester waits for an answer that is not coming.
const SHORT_WAIT: Duration = Duration::from_millis(500);
/// The small upload cap of the limit tests.
const CAP: usize = 4096;
/// Within this, the gateway tells an open page about a new request.
const EVENT_WAIT: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// The requester's view of the server's site.
fn requester(server: &Server) -> Site {
    server.site()
}

/// The pending requests the holder of `token` sees.
#[track_caller]
fn pending(server: &Server, token: &str) -> Vec<Value> {
    let (status, body) = get_json(&server.url("/v1/interactions"), token);
    assert_eq!(status, 200, "{body}");
    body["interactions"].as_array().expect("a list").clone()
}

/// Answers approval `id` through the API.
fn answer(server: &Server, token: &str, id: &str, approve: bool) -> (u16, Value) {
    post_json(
        server,
        token,
        &format!("/v1/approvals/{id}"),
        &json!({ "approve": approve }),
    )
}

/// Uploads `bytes` as `name` to a pick's link (`/v1/picks/…`), with no token. A refusal
/// answered from the link alone still reads a small body to its end (`LINGER_*` limits),
/// so the refusal arrives whole and the pooled connection stays usable.
fn upload_to(server: &Server, link: &str, name: &str, bytes: &[u8]) -> (u16, Value) {
    let form = Form::new().part(
        "file",
        Part::bytes(bytes.to_vec()).file_name(name.to_owned()),
    );
    json_answer(
        client()
            .post(server.url(link))
            .multipart(form)
            .send()
            .unwrap(),
    )
}

/// Posts a hand-made body to a pick's link (as [`upload_to`]).
fn post_raw(server: &Server, link: &str, content_type: &str, body: Vec<u8>) -> (u16, Value) {
    json_answer(
        client()
            .post(server.url(link))
            .header("Content-Type", content_type)
            .body(body)
            .send()
            .unwrap(),
    )
}

/// The upload link the person's page is given for pick `id`.
#[track_caller]
fn link_of(server: &Server, id: &str) -> String {
    let listed = pending(server, &server.token);
    let pick = listed
        .iter()
        .find(|i| i["id"] == id)
        .unwrap_or_else(|| panic!("{id} is pending: {listed:?}"));
    pick["uploadUrl"]
        .as_str()
        .expect("a pick has a link")
        .to_owned()
}

/// Starts waiting for approval `id` on a thread of its own.
fn wait_for_approval(server: &Server, id: &str, wait: Duration) -> JoinHandle<ApprovalOutcome> {
    let (site, id) = (server.site(), id.to_owned());
    std::thread::spawn(move || site.wait_for_approval(&id, wait).unwrap())
}

/// Starts waiting for pick `id` on a thread of its own.
fn wait_for_pick(server: &Server, id: &str, wait: Duration) -> JoinHandle<PickOutcome> {
    let (site, id) = (server.site(), id.to_owned());
    std::thread::spawn(move || site.wait_for_pick(&id, wait).unwrap())
}

/// Where the picked files of `person` live.
fn picks_dir(server: &Server, person: &str) -> PathBuf {
    server
        .data
        .join("private/people")
        .join(person)
        .join("tmp/picks")
}

/// `link` with its `sig` replaced by `sig`.
fn with_sig(link: &str, sig: &str) -> String {
    let (head, _) = link.split_once("&sig=").expect("a signed link");
    format!("{head}&sig={sig}")
}

/// A page's events stream on a connection of its own, which the test can close.
fn open_page(server: &Server, token: &str) -> TcpStream {
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream.set_read_timeout(Some(EVENT_WAIT)).unwrap();
    write!(
        stream,
        "GET /v1/events HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\r\n",
        server.addr
    )
    .unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200", "the events stream opened");
    stream
}

/// The next `interaction` event's ids (skipping file events); fails after `EVENT_WAIT`.
#[track_caller]
fn next_interaction_event(events: &mut SseStream) -> Vec<String> {
    let deadline = Instant::now() + EVENT_WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = events.expect_event(left);
        if event.event == "interaction" {
            return event.json()["ids"]
                .as_array()
                .expect("ids")
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect();
        }
    }
}

/// Polls `f` until it holds; fails after `wait`.
#[track_caller]
fn eventually(wait: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + wait;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------------------
// Approvals
// ---------------------------------------------------------------------------------------

#[test]
fn an_approved_request_reaches_the_waiting_requester() {
    let server = Server::start();
    let site = requester(&server);
    let id = site
        .request_approval(
            "me",
            "file_delete",
            "notes/old.txt",
            "Delete notes/old.txt from your workspace",
        )
        .unwrap();
    let waiter = wait_for_approval(&server, &id, ANSWER_WAIT);

    let listed = pending(&server, &server.token);
    assert_eq!(listed.len(), 1, "{listed:?}");
    let item = &listed[0];
    assert_eq!(item["id"], id.as_str());
    assert_eq!(item["kind"], "approval");
    assert_eq!(item["tool"], "file_delete");
    assert_eq!(item["subject"], "notes/old.txt");
    assert_eq!(item["summary"], "Delete notes/old.txt from your workspace");
    assert!(is_rfc3339(item["expires"].as_str().unwrap()), "{item}");
    assert!(item.get("uploadUrl").is_none() && item.get("prompt").is_none());

    let (status, body) = answer(&server, &server.token, &id, true);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({ "id": id, "state": "approved" }));
    assert_eq!(waiter.join().unwrap(), ApprovalOutcome::Approved);
    assert!(pending(&server, &server.token).is_empty());
}

#[test]
fn a_denied_request_reaches_the_waiting_requester() {
    let server = Server::start();
    let id = requester(&server)
        .request_approval("me", "file_delete", "report.pdf", "")
        .unwrap();
    let waiter = wait_for_approval(&server, &id, ANSWER_WAIT);
    let (status, body) = answer(&server, &server.token, &id, false);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({ "id": id, "state": "denied" }));
    assert_eq!(waiter.join().unwrap(), ApprovalOutcome::Denied);
}

#[test]
fn an_unanswered_request_times_out_and_a_late_answer_is_refused() {
    let server = Server::start();
    let site = requester(&server);
    let id = site
        .request_approval("me", "file_delete", "report.pdf", "")
        .unwrap();
    assert_eq!(pending(&server, &server.token).len(), 1);
    let outcome = site.wait_for_approval(&id, SHORT_WAIT).unwrap();
    assert_eq!(outcome, ApprovalOutcome::TimedOut);
    let (status, body) = answer(&server, &server.token, &id, true);
    assert_error(status, &body, 410, "expired");
    assert!(pending(&server, &server.token).is_empty());
}

#[test]
fn a_request_is_answered_once() {
    let server = Server::start();
    let id = requester(&server)
        .request_approval("me", "file_delete", "report.pdf", "")
        .unwrap();
    let waiter = wait_for_approval(&server, &id, ANSWER_WAIT);
    assert_eq!(answer(&server, &server.token, &id, false).0, 200);
    for approve in [true, false] {
        let (status, body) = answer(&server, &server.token, &id, approve);
        assert_error(status, &body, 409, "already_answered");
    }
    assert_eq!(waiter.join().unwrap(), ApprovalOutcome::Denied);
}

#[test]
fn only_the_person_asked_sees_and_answers_a_request() {
    let server = Server::start();
    let bob = server.add_person("bob");
    let id = requester(&server)
        .request_approval("me", "file_delete", "secret.txt", "")
        .unwrap();
    assert!(pending(&server, &bob).is_empty());
    let (status, body) = answer(&server, &bob, &id, true);
    assert_error(status, &body, 404, "unknown_interaction");
    // Still pending for its person, and still answerable.
    assert_eq!(pending(&server, &server.token).len(), 1);
    assert_eq!(answer(&server, &server.token, &id, true).0, 200);
}

#[test]
fn malformed_answers_are_client_errors() {
    let server = Server::start();
    let site = requester(&server);
    let id = site
        .request_approval("me", "file_delete", "a.txt", "")
        .unwrap();
    let pick = site.request_pick("me", "a file").unwrap().id;
    let token = &server.token;
    for (path, body, status, code) in [
        (
            format!("/v1/approvals/{id}"),
            json!({"approve": "yes"}),
            400,
            "bad_json",
        ),
        (format!("/v1/approvals/{id}"), json!({}), 400, "bad_json"),
        (
            format!("/v1/approvals/{id}"),
            json!({"approve": true, "also": 1}),
            400,
            "bad_json",
        ),
        (
            "/v1/approvals/not-an-id".to_owned(),
            json!({"approve": true}),
            404,
            "unknown_interaction",
        ),
        (
            "/v1/approvals/ap_aaaaaaaaaaaaaaaa".to_owned(),
            json!({"approve": true}),
            404,
            "unknown_interaction",
        ),
        (
            format!("/v1/approvals/{pick}"),
            json!({"approve": true}),
            404,
            "unknown_interaction",
        ),
        (
            format!("/v1/picks/{id}/cancel"),
            json!({}),
            404,
            "unknown_interaction",
        ),
    ] {
        let (got, answer) = post_json(&server, token, &path, &body);
        assert_error(got, &answer, status, code);
    }
    for path in [
        "/v1/interactions".to_owned(),
        format!("/v1/picks/{pick}/cancel"),
        format!("/v1/approvals/{id}"),
    ] {
        let response = client().post(server.url(&path)).send().unwrap();
        let (status, body) = json_answer(response);
        assert!(status == 401 || status == 405, "{path}: {status} {body}");
    }
    let (status, body) = json_answer(client().get(server.url("/v1/interactions")).send().unwrap());
    assert_error(status, &body, 401, "unauthorized");
    let harness = server.create_token("me", "harness");
    let (status, body) = get_json(&server.url("/v1/interactions"), &harness);
    assert_error(status, &body, 401, "unauthorized");
    // Nothing was answered by any of it.
    assert_eq!(pending(&server, token).len(), 2);
}

// ---------------------------------------------------------------------------------------
// Presence and events
// ---------------------------------------------------------------------------------------

#[test]
fn presence_lasts_while_a_page_is_open_and_lapses_after() {
    let server = Server::start();
    let site = requester(&server);
    assert!(!site.web_channel_open("me").unwrap(), "no page yet");
    let page = open_page(&server, &server.token);
    eventually(Duration::from_secs(5), "presence", || {
        site.web_channel_open("me").unwrap()
    });
    let first = site.last_seen_on_web("me").unwrap().unwrap();
    // The gateway renews it while the page stays open.
    let renewal = ferry_site::WEB_PRESENCE_TOUCH_INTERVAL + Duration::from_secs(1);
    std::thread::sleep(renewal);
    let renewed = site.last_seen_on_web("me").unwrap().unwrap();
    assert!(renewed > first, "renewed while open");
    assert!(site.web_channel_open("me").unwrap());
    assert!(!site.web_channel_open("bob").unwrap_or(false));

    page.shutdown(Shutdown::Both).unwrap();
    drop(page);
    // Long enough for the gateway to see the connection gone and a tick under way to end.
    std::thread::sleep(Duration::from_millis(1500));
    let last = site.last_seen_on_web("me").unwrap().unwrap();
    std::thread::sleep(renewal);
    assert_eq!(
        site.last_seen_on_web("me").unwrap(),
        Some(last),
        "no renewal once the page closed"
    );
    let ms = Duration::from_millis(1);
    assert!(
        site.web_channel_open_at("me", last + WEB_PRESENCE_TTL)
            .unwrap()
    );
    assert!(
        !site
            .web_channel_open_at("me", last + WEB_PRESENCE_TTL + ms)
            .unwrap()
    );
}

#[test]
fn open_pages_hear_when_requests_come_and_go() {
    let server = Server::start();
    let bob = server.add_person("bob");
    let site = requester(&server);
    let mut mine = open_events(&server, &server.token);
    let mut bobs = open_events(&server, &bob);
    eventually(Duration::from_secs(5), "presence", || {
        site.web_channel_open("me").unwrap()
    });

    let approval = site
        .request_approval("me", "file_delete", "a.txt", "")
        .unwrap();
    assert_eq!(next_interaction_event(&mut mine), vec![approval.clone()]);
    let pick = site.request_pick("me", "the invoice").unwrap().id;
    assert_eq!(
        next_interaction_event(&mut mine),
        vec![approval.clone(), pick.clone()]
    );
    assert_eq!(answer(&server, &server.token, &approval, true).0, 200);
    assert_eq!(next_interaction_event(&mut mine), vec![pick.clone()]);
    let (status, _) = post_json(
        &server,
        &server.token,
        &format!("/v1/picks/{pick}/cancel"),
        &json!({}),
    );
    assert_eq!(status, 200);
    assert!(next_interaction_event(&mut mine).is_empty());

    // Bob's page heard none of it.
    while let Some(event) = bobs.next(Duration::from_millis(300)) {
        assert_ne!(event.event, "interaction", "{event:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Picks
// ---------------------------------------------------------------------------------------

#[test]
fn a_picked_file_arrives_through_its_link() {
    let server = Server::start();
    let site = requester(&server);
    let request = site.request_pick("me", "Pick the signed invoice").unwrap();
    let waiter = wait_for_pick(&server, &request.id, ANSWER_WAIT);

    let listed = pending(&server, &server.token);
    assert_eq!(listed.len(), 1);
    let item = &listed[0];
    assert_eq!(item["kind"], "pick");
    assert_eq!(item["prompt"], "Pick the signed invoice");
    assert!(item.get("tool").is_none() && item.get("subject").is_none());
    let link = item["uploadUrl"].as_str().unwrap();
    assert!(
        link.starts_with(&format!("/v1/picks/{}/upload?expires=", request.id)),
        "{link}"
    );

    let content = b"%PDF-1.4 the invoice\n";
    let (status, body) = upload_to(&server, link, "../Invoice (signed).pdf", content);
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body,
        json!({
            "id": request.id,
            "name": "Invoice_signed_.pdf",
            "size": content.len(),
            "sha256": sha256_hex(content),
        })
    );
    let PickOutcome::Arrived { path, expires } = waiter.join().unwrap() else {
        panic!("the file arrived");
    };
    assert!(path.is_absolute(), "{}", path.display());
    let want = std::path::absolute(picks_dir(&server, "me"))
        .unwrap()
        .join(&request.id)
        .join("Invoice_signed_.pdf");
    assert_eq!(path, want);
    assert_eq!(std::fs::read(&path).unwrap(), content);
    let lifetime = expires.duration_since(SystemTime::now()).unwrap();
    let day = ferry_config::limits::PICK_FILE_TTL;
    assert!(lifetime <= day && lifetime > day - Duration::from_secs(60));
    assert!(pending(&server, &server.token).is_empty());

    // The link worked once.
    let (status, body) = upload_to(&server, link, "again.pdf", b"again");
    assert_error(status, &body, 410, "link_used");
    assert_eq!(std::fs::read(&path).unwrap(), content, "the file is kept");
    assert!(!path.with_file_name("again.pdf").exists());
    assert_no_temporaries(&server);
}

#[test]
fn links_that_are_expired_altered_or_unknown_are_refused() {
    let server = Server::start();
    let site = requester(&server);
    let id = site.request_pick("me", "a file").unwrap().id;
    let link = link_of(&server, &id);
    let sig = link.rsplit_once("&sig=").unwrap().1;

    let expired = site
        .pick_link(&id, SystemTime::now() - Duration::from_secs(1))
        .unwrap();
    let (status, body) = upload_to(&server, &expired, "a.txt", b"a");
    assert_error(status, &body, 410, "link_expired");

    let mut flipped = sig.as_bytes().to_vec();
    flipped[10] = if flipped[10] == b'a' { b'b' } else { b'a' };
    let flipped = String::from_utf8(flipped).unwrap();
    let (head, _) = link.split_once('?').unwrap();
    let expires = link
        .split_once("expires=")
        .unwrap()
        .1
        .split('&')
        .next()
        .unwrap();
    let later: u64 = expires.parse::<u64>().unwrap() + 60;
    for altered in [
        with_sig(&link, &flipped),
        with_sig(&link, ""),
        format!("{head}?expires={expires}"),
        format!("{head}?sig={sig}"),
        head.to_owned(),
        format!("{head}?expires={later}&sig={sig}"),
        format!("{head}?expires=-1&sig={sig}"),
    ] {
        let (status, body) = upload_to(&server, &altered, "a.txt", b"a");
        assert_error(status, &body, 403, "bad_signature");
    }
    // Another pick's signature does not open this one.
    let other = site.request_pick("me", "another file").unwrap().id;
    let other_link = link_of(&server, &other);
    let (status, body) = upload_to(&server, &other_link.replace(&other, &id), "a.txt", b"a");
    assert_error(status, &body, 403, "bad_signature");

    // A well-signed link of a pick that does not exist, or of an approval.
    let approval = site
        .request_approval("me", "file_delete", "a.txt", "")
        .unwrap();
    for missing in ["pk_aaaaaaaaaaaaaaaa", approval.as_str()] {
        let signed = site
            .pick_link(missing, SystemTime::now() + Duration::from_secs(60))
            .unwrap();
        let (status, body) = upload_to(&server, &signed, "a.txt", b"a");
        assert_error(status, &body, 404, "unknown_interaction");
    }
    // None of that used the link.
    let (status, body) = upload_to(&server, &link, "a.txt", b"a");
    assert_eq!(status, 201, "{body}");
    assert!(!picks_dir(&server, "me").join(&other).exists());
}

#[test]
fn the_pick_cap_is_the_upload_cap() {
    let server = Server::start_with_env(&[("FERRY_MEDIA__MAX_UPLOAD_BYTES", &CAP.to_string())]);
    let site = requester(&server);
    let id = site.request_pick("me", "a file").unwrap().id;
    let link = link_of(&server, &id);

    let (status, body) = upload_to(&server, &link, "big.bin", &vec![b'x'; CAP + 1]);
    assert_error(status, &body, 413, "too_large");
    assert!(!picks_dir(&server, "me").join(&id).exists(), "nothing kept");
    assert_no_temporaries(&server);
    // Declared too large: refused before the body is read.
    let boundary = "ferry-pick-boundary";
    let huge = vec![b'x'; CAP + ferry_config::limits::MULTIPART_ALLOWANCE_BYTES as usize + 1];
    let (status, body) = post_raw(
        &server,
        &link,
        &format!("multipart/form-data; boundary={boundary}"),
        multipart(boundary, &[("file", Some("huge.bin"), &huge)]),
    );
    assert_error(status, &body, 413, "too_large");
    assert_eq!(pending(&server, &server.token).len(), 1, "still pending");

    // The link is still good for a file that fits.
    let (status, body) = upload_to(&server, &link, "full.bin", &vec![b'x'; CAP]);
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["size"], CAP);
    let other = site.request_pick("me", "another").unwrap().id;
    let (status, body) = upload_to(
        &server,
        &link_of(&server, &other),
        "less.bin",
        &vec![b'x'; CAP - 1],
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["size"], CAP - 1);
}

#[test]
fn malformed_uploads_keep_nothing_and_leave_the_link_usable() {
    let server = Server::start();
    let site = requester(&server);
    let id = site.request_pick("me", "a file").unwrap().id;
    let link = link_of(&server, &id);
    let boundary = "ferry-pick-boundary";
    let content_type = format!("multipart/form-data; boundary={boundary}");
    let cases: [(Vec<u8>, &str, u16, &str); 5] = [
        (
            multipart(boundary, &[]),
            content_type.as_str(),
            400,
            "missing_file",
        ),
        (
            multipart(
                boundary,
                &[("file", Some("a.txt"), b"a"), ("file", Some("b.txt"), b"b")],
            ),
            content_type.as_str(),
            400,
            "too_many_files",
        ),
        (
            multipart(
                boundary,
                &[("file", Some("a.txt"), b"a"), ("note", None, b"hi")],
            ),
            content_type.as_str(),
            400,
            "unexpected_field",
        ),
        (
            multipart(boundary, &[("file", Some("..."), b"a")]),
            content_type.as_str(),
            400,
            "unsafe_name",
        ),
        (
            b"not multipart".to_vec(),
            "text/plain",
            400,
            "bad_multipart",
        ),
    ];
    for (body, content_type, status, code) in cases {
        let (got, answer) = post_raw(&server, &link, content_type, body);
        assert_error(got, &answer, status, code);
        assert!(
            !picks_dir(&server, "me").join(&id).exists(),
            "{code}: nothing kept"
        );
    }
    assert_no_temporaries(&server);
    let (status, body) = upload_to(&server, &link, "a.txt", b"a");
    assert_eq!(status, 201, "{body}");
}

#[test]
fn a_cancelled_pick_ends_the_wait_and_its_link() {
    let server = Server::start();
    let bob = server.add_person("bob");
    let id = requester(&server).request_pick("me", "a file").unwrap().id;
    let link = link_of(&server, &id);
    let waiter = wait_for_pick(&server, &id, ANSWER_WAIT);
    let cancel = format!("/v1/picks/{id}/cancel");

    let (status, body) = post_json(&server, &bob, &cancel, &json!({}));
    assert_error(status, &body, 404, "unknown_interaction");
    let (status, body) = post_json(&server, &server.token, &cancel, &json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({ "id": id, "state": "cancelled" }));
    assert_eq!(waiter.join().unwrap(), PickOutcome::Cancelled);

    let (status, body) = upload_to(&server, &link, "a.txt", b"a");
    assert_error(status, &body, 410, "link_cancelled");
    let (status, body) = post_json(&server, &server.token, &cancel, &json!({}));
    assert_error(status, &body, 409, "already_answered");
    assert!(pending(&server, &server.token).is_empty());
    assert!(!picks_dir(&server, "me").join(&id).exists());
}

#[test]
fn a_pick_nobody_answers_expires_with_its_link() {
    let server = Server::start();
    let site = requester(&server);
    let id = site.request_pick("me", "a file").unwrap().id;
    let link = link_of(&server, &id);
    assert_eq!(
        site.wait_for_pick(&id, SHORT_WAIT).unwrap(),
        PickOutcome::Expired
    );
    let (status, body) = upload_to(&server, &link, "a.txt", b"a");
    assert_error(status, &body, 410, "link_expired");
    assert!(pending(&server, &server.token).is_empty());
}

// ---------------------------------------------------------------------------------------
// A pick that ends while its file streams
// ---------------------------------------------------------------------------------------

/// The size of the slow upload; at [`SLOW_CHUNK`] every [`SLOW_PAUSE`] it takes over 6 s.
const SLOW_BYTES: usize = 8 << 20;
const SLOW_CHUNK: usize = 64 << 10;
const SLOW_PAUSE: Duration = Duration::from_millis(50);
/// The pick must end its upload within this of the pick ending.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// How a slow upload ended.
struct SlowUpload {
    /// The raw answer.
    answer: String,
    /// When the answer had been read to its end.
    answered: Instant,
    /// How much of the body had been written when the connection stopped taking it.
    sent: usize,
    /// The body's whole length.
    total: usize,
}

/// Sends an [`SLOW_BYTES`] file to `link` slowly on a raw connection, writing on one thread
/// and reading the answer on another, so an answer that comes mid-body is seen at once.
fn slow_upload(server: &Server, link: &str) -> JoinHandle<SlowUpload> {
    let boundary = "ferry-slow-boundary";
    let head = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n\r\n"
    );
    let tail = format!("\r\n--{boundary}--\r\n");
    let total = head.len() + SLOW_BYTES + tail.len();
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "POST {link} HTTP/1.1\r\nHost: {}\r\nContent-Type: multipart/form-data; \
         boundary={boundary}\r\nContent-Length: {total}\r\n\r\n{head}",
        server.addr
    )
    .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let chunk = vec![b'x'; SLOW_CHUNK];
        let mut sent = head.len();
        for _ in 0..SLOW_BYTES / SLOW_CHUNK {
            if writer.write_all(&chunk).is_err() {
                return sent;
            }
            sent += SLOW_CHUNK;
            std::thread::sleep(SLOW_PAUSE);
        }
        if writer.write_all(tail.as_bytes()).is_ok() {
            sent += tail.len();
        }
        sent
    });
    std::thread::spawn(move || {
        let answer = support::read_response(&mut stream);
        let answered = Instant::now();
        // The connection is over: a writer still going sees it at its next write.
        let _ = stream.shutdown(Shutdown::Both);
        let sent = sender.join().unwrap();
        SlowUpload {
            answer,
            answered,
            sent,
            total,
        }
    })
}

/// Waits until the pick `id` is receiving: its upload has begun and its folder exists.
#[track_caller]
fn wait_receiving(server: &Server, id: &str) {
    eventually(EVENT_WAIT, "the upload to begin", || {
        picks_dir(server, "me").join(id).exists()
    });
    std::thread::sleep(Duration::from_millis(500));
}

/// Checks that a slow upload was stopped by its pick ending at `ended`, answered with
/// `code`, and that nothing of it is kept.
#[track_caller]
fn assert_stopped(server: &Server, upload: SlowUpload, ended: Instant, code: &str) {
    let status = support::status_of(&upload.answer);
    let body = upload.answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    let body: Value = serde_json::from_str(body)
        .unwrap_or_else(|e| panic!("a JSON answer ({e}): {}", upload.answer));
    assert_error(status, &body, 410, code);
    let took = upload.answered.saturating_duration_since(ended);
    assert!(took < STOP_WAIT, "answered {took:?} after the pick ended");
    assert!(
        upload.sent < upload.total,
        "the connection took the whole body ({} bytes)",
        upload.total
    );
    let left: Vec<_> = std::fs::read_dir(picks_dir(server, "me"))
        .map(|dir| dir.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left under tmp/picks: {left:?}");
    assert_no_temporaries(server);
}

#[test]
fn a_pick_cancelled_mid_upload_stops_it_and_keeps_nothing() {
    let server = Server::start();
    let id = requester(&server).request_pick("me", "a file").unwrap().id;
    let link = link_of(&server, &id);
    let waiter = wait_for_pick(&server, &id, ANSWER_WAIT);
    let upload = slow_upload(&server, &link);
    wait_receiving(&server, &id);

    let (status, body) = post_json(
        &server,
        &server.token,
        &format!("/v1/picks/{id}/cancel"),
        &json!({}),
    );
    let cancelled = Instant::now();
    assert_eq!(status, 200, "{body}");
    assert_eq!(waiter.join().unwrap(), PickOutcome::Cancelled);
    assert_stopped(&server, upload.join().unwrap(), cancelled, "link_cancelled");
    let (status, body) = upload_to(&server, &link, "a.txt", b"a");
    assert_error(status, &body, 410, "link_cancelled");
}

#[test]
fn a_pick_the_agent_stops_waiting_for_stops_its_upload_and_keeps_nothing() {
    let server = Server::start();
    let id = requester(&server).request_pick("me", "a file").unwrap().id;
    let link = link_of(&server, &id);
    let upload = slow_upload(&server, &link);
    wait_receiving(&server, &id);

    // The agent's tool call ends: its wait gives up, mid-body.
    let outcome = requester(&server).wait_for_pick(&id, SHORT_WAIT).unwrap();
    let gave_up = Instant::now();
    assert_eq!(outcome, PickOutcome::Expired);
    assert_stopped(&server, upload.join().unwrap(), gave_up, "link_expired");
}

#[test]
fn something_planted_at_tmp_picks_is_named_never_an_internal_failure() {
    let server = Server::start();
    let site = requester(&server);
    let picks = picks_dir(&server, "me");
    std::fs::create_dir_all(picks.parent().unwrap()).unwrap();
    for planted in ["a link to /etc", "a file"] {
        let _ = std::fs::remove_dir_all(&picks);
        match planted {
            "a file" => support::write_file(&picks, "not a folder"),
            _ => std::os::unix::fs::symlink("/etc", &picks).unwrap(),
        }
        let id = site.request_pick("me", "a file").unwrap().id;
        let link = link_of(&server, &id);
        let (status, body) = upload_to(&server, &link, "passwd", b"planted");
        assert_error(status, &body, 400, "path_escapes");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("private/people/me/tmp/picks"),
            "{planted}: {message}"
        );
        // Nothing went through it, and the link is given back.
        assert_eq!(pending(&server, &server.token).len(), 1, "{planted}");
        assert!(
            !std::path::Path::new("/etc").join(&id).exists(),
            "{planted}"
        );
        std::fs::remove_file(&picks).unwrap();
        let (status, body) = upload_to(&server, &link, "a.txt", b"a");
        assert_eq!(status, 201, "{planted}: {body}");
    }
}
