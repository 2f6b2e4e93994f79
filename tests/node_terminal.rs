//! Node terminals and terminal uploads through a real `ferry serve` (spec nodes.md N-TERM,
//! N-ADMIN): a real WebSocket client plays the page, and a node this test plays itself
//! over a real link serves `terminal.open` and `terminal.upload` with a script — honest,
//! slow, flooding or lying on purpose.

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_codes::Code;
use ferry_node::checked::CheckedReader;
use ferry_node::handshake::{COMMANDS, NodeInfo};
use ferry_node::mux::{Handler, handler};
use ferry_node::terminal::{
    Message, MessageDecoder, TerminalOpenArgs, TerminalUploadArgs, UPLOAD_MAX_BYTES,
};
use ferry_node::{DataWriter, Identity, Incoming, Link, NodeError};
use futures_util::SinkExt;
use serde_json::{Value, json};
use support::netns::Netns;
use support::node::{NodeProcess, connect_serving, wait_for_node};
use support::terminal::{
    Auth, Got, Page, closing, open, output_until, ready, recv, rss_kib, say, text,
    text_after_output, type_in,
};
use support::{Options, Server, client, json_answer, multipart};
use tokio::runtime::Runtime;
use tokio_tungstenite::tungstenite::Message as WsMessage;

/// What the scripted node saw and did.
#[derive(Default)]
struct NodeSide {
    /// Terminals whose call is still open on the node.
    open: AtomicUsize,
    /// Output bytes the node managed to send.
    printed: AtomicU64,
    /// Input bytes the node read while sinking.
    sunk: AtomicU64,
    /// Whether the node reads input at all now.
    holding: AtomicBool,
    /// Files staged: name and bytes.
    staged: Mutex<Vec<(String, Vec<u8>)>>,
}

/// How the scripted node answers the path of a staged file.
#[derive(Clone, Copy)]
enum Paths {
    Honest,
    Relative,
    Newline,
    /// A path that is not a staged upload at all.
    Elsewhere,
    /// The staging layout, with another file's name last.
    OtherName,
}

/// Where the scripted node says it staged a file (the layout `ferry node run` uses).
const STAGED: &str = "/tmp/staged/terminal-uploads/a2b3c4d5e6f7g2h3i4j5k6l7m2";

/// Counts a terminal open on the node while it lives.
struct Live(Arc<NodeSide>);

impl Drop for Live {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// 1 GiB.
const GIB: u64 = 1024 * 1024 * 1024;

/// The scripted terminal: echoes input, says `resized C R` on a resize, and obeys
/// `exit\r` (exit 3), `flood\r` (prints 1 GiB), `sink\r` (reads input without echo) and
/// `hold\r` (stops reading input for 3 s, then sinks).
async fn serve_terminal(incoming: Incoming, side: Arc<NodeSide>) {
    let Incoming {
        args,
        mut body,
        reply,
        ..
    } = incoming;
    let _args: TerminalOpenArgs = serde_json::from_value(args).unwrap();
    let Ok(mut out) = reply.stream(json!({"shell": "bash", "pid": 4242})) else {
        return;
    };
    side.open.fetch_add(1, Ordering::SeqCst);
    let _live = Live(side.clone());
    let mut decoder = MessageDecoder::new();
    let mut sinking = false;
    loop {
        let Some(Ok(piece)) = body.next().await else {
            return;
        };
        decoder.push(&piece);
        while let Ok(Some(message)) = decoder.next_message() {
            match message {
                Message::Data(data) if sinking => {
                    side.sunk.fetch_add(data.len() as u64, Ordering::SeqCst);
                }
                Message::Data(data) => match &data[..] {
                    b"exit\r" => {
                        let _ = out.send(Message::Exit(3).encode()).await;
                        let _ = out.finish().await;
                        // The request body is let go only once the gateway ends it: given
                        // up first, the stream's cancel could overtake the exit.
                        let wait = async { while let Some(Ok(_)) = body.next().await {} };
                        let _ = tokio::time::timeout(Duration::from_secs(10), wait).await;
                        return;
                    }
                    b"flood\r" => return flood(&mut out, &side).await,
                    b"sink\r" => sinking = true,
                    b"hold\r" => {
                        side.holding.store(true, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_secs(3)).await;
                        side.holding.store(false, Ordering::SeqCst);
                        sinking = true;
                    }
                    _ => {
                        if out.send(Message::Data(data).encode()).await.is_err() {
                            return;
                        }
                    }
                },
                Message::Resize { cols, rows } => {
                    let said = Message::Data(Bytes::from(format!("resized {cols} {rows}\n")));
                    if out.send(said.encode()).await.is_err() {
                        return;
                    }
                }
                Message::Exit(_) => return,
            }
        }
    }
}

/// Prints up to 1 GiB, as fast as the link takes it.
async fn flood(out: &mut DataWriter, side: &NodeSide) {
    let piece = Message::Data(Bytes::from(vec![b'x'; 64 * 1024])).encode();
    while side.printed.load(Ordering::SeqCst) < GIB {
        if out.send(piece.clone()).await.is_err() {
            return;
        }
        side.printed.fetch_add(64 * 1024, Ordering::SeqCst);
    }
}

/// The scripted `terminal.upload`: stages the checked body under `/tmp/staged/`,
/// refusing a name with a `/`; answers the path as `paths` says.
async fn serve_upload(incoming: Incoming, side: Arc<NodeSide>, paths: Paths) {
    let Incoming {
        args, body, reply, ..
    } = incoming;
    let args: TerminalUploadArgs = serde_json::from_value(args).unwrap();
    if args.name.contains('/') {
        reply.fail(NodeError::Remote {
            code: Code::UnsafeName,
            message: "a staged file's name is one path component".into(),
        });
        return;
    }
    let mut reader = CheckedReader::new(body, UPLOAD_MAX_BYTES);
    let mut bytes = Vec::new();
    while let Some(piece) = reader.next().await {
        match piece {
            Ok(piece) => bytes.extend_from_slice(&piece),
            // Given up midway: nothing is staged.
            Err(_) => return,
        }
    }
    let Some(verified) = reader.verified() else {
        return;
    };
    let path = match paths {
        Paths::Honest => format!("{STAGED}/{}", args.name),
        Paths::Relative => format!("staged/{}", args.name),
        Paths::Newline => format!("{STAGED}/x\n{}", args.name),
        Paths::Elsewhere => "/etc/passwd".to_owned(),
        Paths::OtherName => format!("{STAGED}/other-{}", args.name),
    };
    side.staged.lock().unwrap().push((args.name, bytes));
    let _ = reply.ok(json!({
        "path": path,
        "size": verified.size,
        "sha256": verified.sha256_hex(),
    }));
}

/// `POST /v1/nodes/{id}/terminal/upload` with `parts` (name, filename, bytes) as
/// multipart, answered status and JSON.
fn upload_parts(
    server: &Server,
    token: &str,
    id: &str,
    parts: &[(&str, Option<&str>, &[u8])],
) -> (u16, Value) {
    let boundary = "ferryterminalboundary";
    let response = client()
        .post(server.url(&format!("/v1/nodes/{id}/terminal/upload")))
        .bearer_auth(token)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(multipart(boundary, parts))
        .send()
        .unwrap();
    json_answer(response)
}

fn scripted(side: Arc<NodeSide>, paths: Paths) -> Handler {
    handler(move |incoming: Incoming| {
        let side = side.clone();
        async move {
            match incoming.command.as_str() {
                "terminal.open" => serve_terminal(incoming, side).await,
                "terminal.upload" => serve_upload(incoming, side, paths).await,
                _ => incoming.reply.fail(NodeError::Remote {
                    code: Code::UnknownCommand,
                    message: "not scripted".into(),
                }),
            }
        }
    })
}

/// A gateway and the scripted node, approved for what it advertises and connected.
struct Gate {
    server: Server,
    rt: Runtime,
    identity: Identity,
    id: String,
    side: Arc<NodeSide>,
    link: Option<Link>,
}

impl Gate {
    fn start(config: &str, commands: &[&str], paths: Paths) -> Gate {
        let server = Server::start_with(Options {
            config_toml: Some(config.to_owned()),
            ..Options::default()
        });
        let identity = Identity::generate();
        let id = identity.node_id();
        let mut gate = Gate {
            server,
            rt: support::node::runtime(),
            identity,
            id,
            side: Arc::default(),
            link: None,
        };
        gate.connect(commands, paths);
        let out = gate.server.ferry(&["node", "approve", &gate.id]);
        assert!(out.status.success(), "{out:?}");
        gate
    }

    /// Approved for both terminal commands, with the default configuration.
    fn honest() -> Gate {
        Gate::start("", &COMMANDS[5..], Paths::Honest)
    }

    fn connect(&mut self, commands: &[&str], paths: Paths) {
        let info = NodeInfo {
            name: "term-box".into(),
            platform: "linux".into(),
            shell: "bash".into(),
            commands: commands.iter().map(|c| c.to_string()).collect(),
        };
        let handler = scripted(self.side.clone(), paths);
        self.link = Some(connect_serving(
            &self.rt,
            &self.server,
            &self.identity,
            &self.id,
            info,
            handler,
        ));
    }

    /// Takes the node's link down.
    fn close_link(&mut self) {
        let _inside = self.rt.enter();
        if let Some(link) = self.link.take() {
            link.close();
        }
    }

    fn path(&self, query: &str) -> String {
        format!("/v1/nodes/{}/terminal?{query}", self.id)
    }

    /// A new terminal, 80 × 24, with the admin's token as a browser sends it.
    async fn page(&self) -> (Page, String) {
        let (mut page, protocol) = open(
            &self.server.addr,
            &self.path("cols=80&rows=24"),
            Auth::Protocol(&self.server.token),
            &[],
        )
        .await
        .unwrap();
        assert_eq!(protocol.as_deref(), Some("ferry.terminal.v1"));
        let session = ready(&mut page).await;
        (page, session)
    }

    /// Terminals open on the node once they settle to `want`.
    async fn node_terminals(&self, want: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.side.open.load(Ordering::SeqCst) != want {
            assert!(
                Instant::now() < deadline,
                "{} terminals open on the node, not {want}",
                self.side.open.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A terminal upload of `parts` with `token`.
    fn upload(&self, token: &str, id: &str, parts: &[(&str, Option<&str>, &[u8])]) -> (u16, Value) {
        upload_parts(&self.server, token, id, parts)
    }

    fn staged_names(&self) -> Vec<String> {
        let staged = self.side.staged.lock().unwrap();
        staged.iter().map(|(name, _)| name.clone()).collect()
    }
}

/// The error code of an HTTP refusal.
#[track_caller]
fn refused(result: Result<(Page, Option<String>), (u16, Value)>) -> (u16, String) {
    match result {
        Ok(_) => panic!("the upgrade was taken"),
        Err((status, body)) => (status, body["error"]["code"].as_str().unwrap().to_owned()),
    }
}

/// Typing echoes, a resize reaches the node, resizes out of bounds or with sizes that are
/// not counts are answered and the terminal keeps working, and the close message ends
/// the node's call.
#[test]
fn echo_resize_bad_resizes_and_close() {
    let gate = Gate::honest();
    gate.rt.block_on(async {
        let (mut page, session) = gate.page().await;
        assert_eq!(session.len(), 32, "160 bits in base32");
        type_in(&mut page, b"hello there").await;
        output_until(&mut page, b"hello there").await;
        say(&mut page, r#"{"type":"resize","cols":120,"rows":40}"#).await;
        output_until(&mut page, b"resized 120 40").await;
        // Out of bounds, or not sizes at all: each answered, none fatal.
        for resize in [
            r#"{"type":"resize","cols":0,"rows":0}"#,
            r#"{"type":"resize","cols":100000,"rows":24}"#,
            r#"{"type":"resize","cols":-1,"rows":24}"#,
            r#"{"type":"resize","cols":80.0,"rows":24}"#,
            r#"{"type":"resize","cols":null,"rows":24}"#,
            r#"{"type":"resize","cols":80}"#,
        ] {
            say(&mut page, resize).await;
            let answer = text(&mut page).await;
            assert_eq!(answer["type"], "error", "{answer}");
            assert_eq!(answer["error"]["code"], "invalid_request");
        }
        type_in(&mut page, b"still here").await;
        let seen = output_until(&mut page, b"still here").await;
        assert!(
            !String::from_utf8_lossy(&seen).contains("resized"),
            "no bad resize reached the node"
        );
        gate.node_terminals(1).await;
        say(&mut page, r#"{"type":"close"}"#).await;
        let (_, code) = closing(&mut page).await;
        assert_eq!(code, Some(1000));
        gate.node_terminals(0).await;
    });
}

/// The shell's exit is told with its code, then the socket closes 1000.
#[test]
fn the_shells_exit_is_told() {
    let gate = Gate::honest();
    gate.rt.block_on(async {
        let (mut page, _) = gate.page().await;
        type_in(&mut page, b"exit\r").await;
        let (texts, code) = closing(&mut page).await;
        assert_eq!(texts, vec![json!({"type": "exit", "code": 3})]);
        assert_eq!(code, Some(1000));
    });
}

/// Every refusal is an HTTP answer before the upgrade: nobody but an admin learns the
/// route exists, and each other reason has its code.
#[test]
fn refusals_come_before_the_upgrade() {
    let gate = Gate::start("", &COMMANDS[6..], Paths::Honest);
    let person = gate.server.create_token("me", "person");
    let addr = gate.server.addr.clone();
    let admin = gate.server.token.clone();
    gate.rt.block_on(async {
        let at = |query: &str| gate.path(query);
        let ok = at("cols=80&rows=24");
        for auth in [
            Auth::None,
            Auth::Protocol("ferry_bogus_token"),
            Auth::Bearer("ferry_bogus_token"),
            Auth::Protocol(&person),
            Auth::Bearer(&person),
        ] {
            assert_eq!(
                refused(open(&addr, &ok, auth, &[]).await),
                (404, "no_route".into())
            );
        }
        let forged = "/v1/nodes/00000000000000000000/terminal?cols=80&rows=24";
        assert_eq!(
            refused(open(&addr, forged, Auth::Protocol(&admin), &[]).await),
            (404, "unknown_node".into())
        );
        // Approved for terminal.upload only.
        assert_eq!(
            refused(open(&addr, &ok, Auth::Protocol(&admin), &[]).await),
            (403, "command_not_allowed".into())
        );
    });
    // Now approved for terminal.open too.
    let mut gate = gate;
    gate.close_link();
    wait_for_node(&gate.server, &gate.id, |n| n["connected"] == false);
    gate.connect(&COMMANDS[5..], Paths::Honest);
    assert!(
        gate.server
            .ferry(&["node", "approve", &gate.id])
            .status
            .success()
    );
    gate.rt.block_on(async {
        let at = |query: &str| gate.path(query);
        for query in [
            "rows=24",
            "cols=80",
            "cols=0&rows=0",
            "cols=100000&rows=24",
            "cols=80&rows=1001",
            "cols=x&rows=24",
        ] {
            assert_eq!(
                refused(open(&addr, &at(query), Auth::Protocol(&admin), &[]).await),
                (400, "invalid_request".into()),
                "{query}"
            );
        }
        let ok = at("cols=80&rows=24");
        let foreign = [("origin", "http://evil.example")];
        assert_eq!(
            refused(open(&addr, &ok, Auth::Protocol(&admin), &foreign).await),
            (403, "permission_denied".into())
        );
        let own = format!("http://{addr}");
        let (mut page, _) = open(&addr, &ok, Auth::Protocol(&admin), &[("origin", &own)])
            .await
            .unwrap();
        ready(&mut page).await;
        let unknown = at("cols=80&rows=24&session=abcdefghijklmnopqrstuvwxyz234567");
        assert_eq!(
            refused(open(&addr, &unknown, Auth::Protocol(&admin), &[]).await),
            (404, "unknown_terminal".into())
        );
    });
    // Not a WebSocket at all.
    let response = client()
        .get(gate.server.url(&gate.path("cols=80&rows=24")))
        .bearer_auth(&gate.server.token)
        .send()
        .unwrap();
    let (status, body) = json_answer(response);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_request"))
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("WebSocket"),
        "{body}"
    );
    // Offline.
    gate.close_link();
    wait_for_node(&gate.server, &gate.id, |n| n["connected"] == false);
    gate.rt.block_on(async {
        let ok = gate.path("cols=80&rows=24");
        assert_eq!(
            refused(open(&addr, &ok, Auth::Protocol(&admin), &[]).await),
            (503, "node_offline".into())
        );
    });
}

/// `[nodes] terminals_max` at limit − 1, limit and limit + 1; closed terminals leave the
/// registry, so as many open again.
#[test]
fn too_many_terminals_at_the_limit() {
    let gate = Gate::start(
        "[nodes]\nterminals_max = 3\n",
        &COMMANDS[5..],
        Paths::Honest,
    );
    gate.rt.block_on(async {
        let mut pages = Vec::new();
        for _ in 0..2 {
            pages.push(gate.page().await.0);
        }
        // limit - 1 open: one more is the limit.
        pages.push(gate.page().await.0);
        let (addr, admin) = (&gate.server.addr, &gate.server.token);
        assert_eq!(
            refused(
                open(
                    addr,
                    &gate.path("cols=80&rows=24"),
                    Auth::Protocol(admin),
                    &[]
                )
                .await
            ),
            (429, "too_many_terminals".into())
        );
        // Several at once, each its own.
        for (n, page) in pages.iter_mut().enumerate() {
            type_in(page, format!("page {n}").as_bytes()).await;
        }
        for (n, page) in pages.iter_mut().enumerate() {
            output_until(page, format!("page {n}").as_bytes()).await;
        }
        for page in &mut pages {
            say(page, r#"{"type":"close"}"#).await;
            closing(page).await;
        }
        gate.node_terminals(0).await;
        for _ in 0..3 {
            pages.push(gate.page().await.0);
        }
        gate.node_terminals(3).await;
    });
}

/// A page that goes without the close message leaves the terminal detached: a reattach
/// gets the replay first and the same terminal; a second attach takes it over; another
/// admin's token does not find it; after the grace it is gone, on the node too.
#[test]
fn a_dropped_page_reattaches_within_the_grace_and_not_after() {
    let gate = Gate::honest();
    let other_admin = {
        gate.server.add_person("ann");
        gate.server.create_token("ann", "admin")
    };
    gate.rt.block_on(async {
        let (mut page, session) = gate.page().await;
        type_in(&mut page, b"before the reload").await;
        output_until(&mut page, b"before the reload").await;
        drop(page);
        let again = gate.path(&format!("cols=100&rows=30&session={session}"));
        let (addr, admin) = (&gate.server.addr, &gate.server.token);
        assert_eq!(
            refused(open(addr, &again, Auth::Protocol(&other_admin), &[]).await),
            (404, "unknown_terminal".into()),
            "another person's terminal is not found"
        );
        let (mut page, _) = open(addr, &again, Auth::Protocol(admin), &[])
            .await
            .unwrap();
        assert_eq!(ready(&mut page).await, session);
        let replayed = output_until(&mut page, b"before the reload").await;
        assert!(replayed.starts_with(b"before the reload"), "{replayed:?}");
        output_until(&mut page, b"resized 100 30").await;
        type_in(&mut page, b"after").await;
        output_until(&mut page, b"after").await;
        gate.node_terminals(1).await;

        let (mut taker, _) = open(addr, &again, Auth::Protocol(admin), &[])
            .await
            .unwrap();
        assert_eq!(ready(&mut taker).await, session);
        let (texts, _) = closing(&mut page).await;
        assert_eq!(
            texts[0]["error"]["code"], "terminal_taken_over",
            "{texts:?}"
        );
        type_in(&mut taker, b"taken").await;
        output_until(&mut taker, b"taken").await;

        drop(taker);
        tokio::time::sleep(Duration::from_secs(32)).await;
        gate.node_terminals(0).await;
        assert_eq!(
            refused(open(addr, &again, Auth::Protocol(admin), &[]).await),
            (404, "unknown_terminal".into())
        );
    });
}

/// A text message that breaks the protocol is answered, the socket closes 1008 and the
/// terminal ends; so does a message over 1 MiB (1009), and a frame that is not
/// WebSocket at all closes the socket and leaves the gateway serving.
#[test]
fn a_page_that_breaks_the_protocol_loses_its_terminal() {
    let gate = Gate::honest();
    gate.rt.block_on(async {
        for bad in [
            "not json",
            r#"{"type":"input","data":"ls"}"#,
            r#"{"type":"close","x":1}"#,
        ] {
            let (mut page, _) = gate.page().await;
            gate.node_terminals(1).await;
            say(&mut page, bad).await;
            let (texts, code) = closing(&mut page).await;
            assert_eq!(
                texts[0]["error"]["code"], "invalid_request",
                "{bad}: {texts:?}"
            );
            assert_eq!(code, Some(1008), "{bad}");
            gate.node_terminals(0).await;
        }
        let (mut page, _) = gate.page().await;
        gate.node_terminals(1).await;
        // 1 MiB passes; one byte more does not.
        page.send(WsMessage::Binary(Bytes::from(vec![b'a'; 1024 * 1024])))
            .await
            .unwrap();
        // The gateway refuses the message at its header and closes with 1009 without
        // reading the rest, so the kernel may reset the connection under a client still
        // writing it (and drop the close frame with it): either is a refusal.
        let sent = page
            .send(WsMessage::Binary(Bytes::from(vec![b'a'; 1024 * 1024 + 1])))
            .await;
        let code = match sent {
            Err(e) => {
                let reset = matches!(&e, tokio_tungstenite::tungstenite::Error::Io(io)
                    if matches!(io.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe));
                assert!(reset, "{e}");
                None
            }
            Ok(()) => loop {
                match recv(&mut page).await {
                    Got::Binary(_) => continue,
                    Got::Close(code) => break code,
                    Got::Gone => break None,
                    other => panic!("{other:?}"),
                }
            },
        };
        assert!(matches!(code, Some(1009) | None), "{code:?}");
        gate.node_terminals(0).await;

        // A frame with a reserved opcode, written by hand.
        let (mut page, _) = gate.page().await;
        use tokio::io::AsyncWriteExt;
        page.get_mut()
            .write_all(&[0x83, 0x80, 1, 2, 3, 4])
            .await
            .unwrap();
        while !matches!(recv(&mut page).await, Got::Close(_) | Got::Gone) {}
        let (mut page, _) = gate.page().await;
        type_in(&mut page, b"alive").await;
        output_until(&mut page, b"alive").await;
    });
}

/// The node's link dropping ends its terminals with an error message and close 1011.
#[test]
fn the_link_dropping_ends_the_terminal() {
    let mut gate = Gate::honest();
    let page = gate.rt.block_on(async {
        let (mut page, _) = gate.page().await;
        type_in(&mut page, b"x").await;
        output_until(&mut page, b"x").await;
        page
    });
    gate.close_link();
    gate.rt.block_on(async {
        let mut page = page;
        let (texts, code) = closing(&mut page).await;
        assert_eq!(texts[0]["type"], "error", "{texts:?}");
        assert_eq!(texts[0]["error"]["code"], "node_offline");
        assert_eq!(code, Some(1011));
    });
}

/// A node printing 1 GiB to a page that reads slowly: the node is held back by the
/// link's window, so what it got out beyond what the page read stays small, and the
/// gateway's memory stays flat.
#[test]
fn a_slow_page_holds_a_flooding_shell_back() {
    let gate = Gate::honest();
    let pid = gate.server.pid();
    gate.rt.block_on(async {
        let (mut page, _) = gate.page().await;
        let before = rss_kib(pid);
        type_in(&mut page, b"flood\r").await;
        let mut read = 0u64;
        let mut peak = before;
        let until = Instant::now() + Duration::from_secs(6);
        while Instant::now() < until {
            if let Got::Binary(bytes) = recv(&mut page).await {
                read += bytes.len() as u64;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            peak = peak.max(rss_kib(pid));
        }
        let printed = gate.side.printed.load(Ordering::SeqCst);
        assert!(read > 0);
        let ahead = printed.saturating_sub(read);
        assert!(
            ahead < 24 * 1024 * 1024,
            "the node got {printed} bytes out while the page read {read}"
        );
        assert!(printed < GIB, "the flood was held back");
        assert!(
            peak - before < 48 * 1024,
            "the gateway grew from {before} to {peak} KiB"
        );
        say(&mut page, r#"{"type":"close"}"#).await;
        gate.node_terminals(0).await;
    });
}

/// A page sending 1 GiB of input: while the node reads nothing the page waits on the
/// node's window; then all of it arrives, and the gateway's memory stays flat.
#[test]
fn a_page_typing_a_gigabyte_waits_on_the_node() {
    let gate = Gate::honest();
    let pid = gate.server.pid();
    gate.rt.block_on(async {
        let (mut page, _) = gate.page().await;
        type_in(&mut page, b"hold\r").await;
        let before = rss_kib(pid);
        let piece = Bytes::from(vec![b'i'; 1024 * 1024]);
        let mut sent = 0u64;
        let mut peak = before;
        let mut held = None;
        let started = Instant::now();
        while sent < GIB {
            page.send(WsMessage::Binary(piece.clone())).await.unwrap();
            sent += piece.len() as u64;
            if sent.is_multiple_of(16 * 1024 * 1024) {
                peak = peak.max(rss_kib(pid));
            }
            if held.is_none()
                && !gate.side.holding.load(Ordering::SeqCst)
                && started.elapsed() > Duration::from_secs(1)
            {
                held = Some(sent);
            }
        }
        let held = held.expect("the node held");
        assert!(
            held < 64 * 1024 * 1024,
            "{held} bytes went while the node read nothing"
        );
        let deadline = Instant::now() + Duration::from_secs(300);
        while gate.side.sunk.load(Ordering::SeqCst) < GIB {
            assert!(
                Instant::now() < deadline,
                "only {} arrived",
                gate.side.sunk.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
            peak = peak.max(rss_kib(pid));
        }
        assert_eq!(gate.side.sunk.load(Ordering::SeqCst), GIB);
        assert!(
            peak - before < 48 * 1024,
            "the gateway grew from {before} to {peak} KiB"
        );
    });
}

/// Uploads: hostile names come back quoted for the node's shell; in one batch a file of
/// 16 MiB + 1 is refused while 16 MiB exactly and the others are staged; a name the node
/// refuses, one with a control character and one missing are each that file's error.
#[test]
fn uploads_stage_each_file_and_refuse_only_the_bad_ones() {
    let gate = Gate::honest();
    let max = UPLOAD_MAX_BYTES as usize;
    let exact = vec![7u8; max];
    let over = vec![8u8; max + 1];
    let hostile = "a'b $(touch CANARY) `id`;  ü ~ -x *.txt {a,b} !!";
    let parts: Vec<(&str, Option<&str>, &[u8])> = vec![
        ("file", Some(hostile), b"first"),
        ("file", Some("big.bin"), &over),
        ("file", Some("exact.bin"), &exact),
        ("file", Some("sub/dir"), b"refused by the node"),
        ("file", Some("tab\there"), b"control"),
        ("file", None, b"nameless"),
        ("file", Some("last.txt"), b"last"),
    ];
    let (status, body) = gate.upload(&gate.server.token, &gate.id, &parts);
    assert_eq!(status, 200, "{body}");
    let files = body["files"].as_array().unwrap();
    assert_eq!(files.len(), 7, "{body}");
    assert_eq!(files[0]["name"], hostile);
    assert_eq!(files[0]["path"], format!("{STAGED}/{hostile}"));
    assert_eq!(files[0]["size"], 5);
    assert_eq!(
        files[0]["quoted"],
        format!("'{STAGED}/{}'", hostile.replace('\'', r"'\''"))
    );
    let code = |n: usize| files[n]["error"]["code"].as_str().unwrap_or("").to_owned();
    assert_eq!(code(1), "too_large");
    assert_eq!(files[2]["size"], max as u64);
    assert_eq!(code(3), "unsafe_name");
    assert_eq!(code(4), "unsafe_name");
    assert_eq!(code(5), "bad_multipart");
    assert_eq!(files[6]["quoted"], format!("'{STAGED}/last.txt'"));
    assert_eq!(
        gate.staged_names(),
        vec![hostile.to_owned(), "exact.bin".into(), "last.txt".into()],
        "the file over the limit and the refused ones were not staged"
    );
    let staged = gate.side.staged.lock().unwrap();
    assert_eq!(staged[1].1, exact);
}

/// The limit on files per upload at 63, 64 and 65; another field is refused.
#[test]
fn an_upload_holds_at_most_64_files() {
    let gate = Gate::honest();
    let names: Vec<String> = (0..65).map(|n| format!("f{n}")).collect();
    for count in [63usize, 64] {
        let parts: Vec<(&str, Option<&str>, &[u8])> = names[..count]
            .iter()
            .map(|n| ("file", Some(n.as_str()), &b"x"[..]))
            .collect();
        let (status, body) = gate.upload(&gate.server.token, &gate.id, &parts);
        assert_eq!(status, 200, "{count}: {body}");
        assert_eq!(body["files"].as_array().unwrap().len(), count);
    }
    let parts: Vec<(&str, Option<&str>, &[u8])> = names
        .iter()
        .map(|n| ("file", Some(n.as_str()), &b"x"[..]))
        .collect();
    let (status, body) = gate.upload(&gate.server.token, &gate.id, &parts);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("too_many_files"))
    );
    let (status, body) = gate.upload(
        &gate.server.token,
        &gate.id,
        &[("project", None, b"x"), ("file", Some("a"), b"a")],
    );
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("unexpected_field"))
    );
}

/// Refused for the whole request, with nothing staged: a non-admin and a bad token (404
/// no_route), a forged node id (404), a node not approved for terminal.upload (403).
#[test]
fn uploads_are_for_admins_on_approved_nodes_only() {
    let gate = Gate::start("", &COMMANDS[5..6], Paths::Honest);
    let person = gate.server.create_token("me", "person");
    let file: &[(&str, Option<&str>, &[u8])] = &[("file", Some("a.txt"), b"a")];
    for token in [person.as_str(), "ferry_bogus"] {
        let (status, body) = gate.upload(token, &gate.id, file);
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (404, Some("no_route"))
        );
    }
    let (status, body) = gate.upload(&gate.server.token, "00000000000000000000", file);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("unknown_node"))
    );
    let (status, body) = gate.upload(&gate.server.token, &gate.id, file);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("command_not_allowed"))
    );
    assert!(gate.staged_names().is_empty());
}

/// A node whose shell has no known quoting is refused before anything is staged.
#[test]
fn an_unknown_shell_is_refused_before_staging() {
    let server = Server::start();
    let identity = Identity::generate();
    let id = identity.node_id();
    let rt = support::node::runtime();
    let side: Arc<NodeSide> = Arc::default();
    let info = NodeInfo {
        name: "odd".into(),
        platform: "linux".into(),
        shell: "xonsh".into(),
        commands: COMMANDS[5..].iter().map(|c| c.to_string()).collect(),
    };
    let _link = connect_serving(
        &rt,
        &server,
        &identity,
        &id,
        info,
        scripted(side.clone(), Paths::Honest),
    );
    assert!(server.ferry(&["node", "approve", &id]).status.success());
    let (status, body) = upload_parts(&server, &server.token, &id, &[("file", Some("a"), b"a")]);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("unsupported_shell"))
    );
    assert!(side.staged.lock().unwrap().is_empty());
}

/// A malicious node answering a relative path, one with a newline, a path that is not a
/// staged upload (`/etc/passwd`) or one named for another file gets that file's error:
/// nothing that could run, or that is not the dropped file, is ever quoted.
#[test]
fn a_node_lying_about_the_staged_path_is_refused_per_file() {
    for (paths, want) in [
        (Paths::Relative, "bad_frame"),
        (Paths::Newline, "unquotable_path"),
        (Paths::Elsewhere, "bad_frame"),
        (Paths::OtherName, "bad_frame"),
    ] {
        let gate = Gate::start("", &COMMANDS[5..], paths);
        let (status, body) = gate.upload(
            &gate.server.token,
            &gate.id,
            &[("file", Some("a.txt"), b"a")],
        );
        assert_eq!(status, 200, "{body}");
        let file = &body["files"][0];
        assert_eq!(file["error"]["code"], want, "{body}");
        assert!(file.get("quoted").is_none());
        assert!(!body.to_string().contains("/tmp/staged"), "{body}");
        assert!(!body.to_string().contains("/etc/passwd"), "{body}");
    }
}

/// The admin's event stream hears of nodes; a person's does not.
#[test]
fn admins_hear_of_node_changes() {
    let mut gate = Gate::honest();
    let person = gate.server.create_token("me", "person");
    let stream = |token: &str| {
        client()
            .get(gate.server.url("/v1/events"))
            .bearer_auth(token)
            .timeout(Duration::from_secs(4))
            .send()
            .unwrap()
    };
    let admin_events = stream(&gate.server.token);
    let person_events = stream(&person);
    gate.close_link();
    wait_for_node(&gate.server, &gate.id, |n| n["connected"] == false);
    let read = |response: reqwest::blocking::Response| {
        // The stream ends at the client's timeout; what came before it is kept.
        let mut text = Vec::new();
        let mut response = response;
        let _ = std::io::Read::read_to_end(&mut response, &mut text);
        String::from_utf8_lossy(&text).into_owned()
    };
    let admin_text = read(admin_events);
    assert!(
        admin_text.contains(&format!("event: nodes\ndata: {{\"id\":\"{}\"}}", gate.id)),
        "{admin_text}"
    );
    assert!(!read(person_events).contains("nodes"));
}

/// A gateway and a real `ferry node run` (bash, from Debian) paired and approved, its
/// state dir under a path that is hostile to a shell.
struct Real {
    server: Server,
    node: NodeProcess,
    id: String,
    rt: Runtime,
    /// The shell's working directory, where a canary would appear if anything ran.
    home: std::path::PathBuf,
    _tmp: tempfile::TempDir,
    /// The node's own network namespace, when it runs in one (dropped after the node).
    _netns: Option<Netns>,
}

impl Real {
    /// The node on loopback beside the gateway.
    fn start() -> Real {
        Real::start_with(None)
    }

    /// The node in a network namespace of its own, reaching the gateway over a veth pair
    /// as a remote machine would.
    fn start_remote() -> Real {
        Real::start_with(Some(Netns::create()))
    }

    fn start_with(netns: Option<Netns>) -> Real {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("st'a $(touch CANARY) `id` te");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let server = match &netns {
            Some(netns) => Server::start_with(Options {
                listen: Some(format!("{}:0", netns.host_ip)),
                ..Options::default()
            }),
            None => Server::start(),
        };
        let gateway = format!("ws://{}", server.addr);
        let rt = support::node::runtime();
        let args = [
            "--gateway",
            &gateway,
            "--name",
            "real-box",
            "--state",
            state.to_str().unwrap(),
        ];
        let env = [
            ("SHELL", std::path::Path::new("/bin/bash")),
            ("HOME", &home),
        ];
        let node = match &netns {
            Some(netns) => {
                let mut command = netns.command(&support::ferry_bin());
                command.args(["node", "run"]).args(args);
                for (key, value) in env {
                    command.env(key, value);
                }
                NodeProcess::spawn(command)
            }
            None => NodeProcess::start(&args, &env),
        };
        let id = node.connected_id();
        wait_for_node(&server, &id, |n| n["connected"] == true);
        let out = server.ferry(&["node", "approve", &id]);
        assert!(out.status.success(), "{out:?}");
        Real {
            server,
            node,
            id,
            rt,
            home,
            _tmp: tmp,
            _netns: netns,
        }
    }

    fn path(&self, query: &str) -> String {
        format!("/v1/nodes/{}/terminal?{query}", self.id)
    }

    async fn page(&self, query: &str) -> (Page, String) {
        let (mut page, _) = open(
            &self.server.addr,
            &self.path(query),
            Auth::Protocol(&self.server.token),
            &[],
        )
        .await
        .unwrap_or_else(|e| panic!("{e:?}; node: {}", self.node.stderr()));
        let session = ready(&mut page).await;
        (page, session)
    }
}

/// Types `command` and returns the output up to a marker only the shell's arithmetic
/// prints (the echo of the typed line never holds it).
async fn run(page: &mut Page, command: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1000);
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    type_in(
        page,
        format!("{command}; echo \"@@$(({n}+1))@@\"\r").as_bytes(),
    )
    .await;
    let seen = output_until(page, format!("@@{}@@", n + 1).as_bytes()).await;
    String::from_utf8_lossy(&seen).into_owned()
}

/// The number after `key=` in `text`, the last one.
fn number_after(text: &str, key: &str) -> u32 {
    text.rsplit(key)
        .find_map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .unwrap_or_else(|| panic!("no {key} in {text:?}"))
}

/// Whether process `pid` is gone within `limit`.
async fn gone_within(pid: u32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"));
        // A zombie has ended too: its parent has not reaped it yet.
        match state {
            Err(_) => return true,
            Ok(stat)
                if stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|s| s.trim_start().starts_with('Z')) =>
            {
                return true;
            }
            Ok(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A real shell: typing echoes, `stty size` follows the size and a resize, a second
/// terminal runs beside it, a reload within the grace gets the same shell (same `$$`)
/// and its screen again, and the close message ends the shell's process group.
#[test]
fn a_real_shell_through_the_gateway() {
    let real = Real::start();
    real.rt.block_on(async {
        let (mut page, session) = real.page("cols=80&rows=24").await;
        assert!(run(&mut page, "echo hi-$((6*7))").await.contains("hi-42"));
        assert!(run(&mut page, "stty size").await.contains("24 80"));
        say(&mut page, r#"{"type":"resize","cols":132,"rows":43}"#).await;
        assert!(run(&mut page, "stty size").await.contains("43 132"));
        // Out of bounds: answered, and the terminal keeps working at its size.
        say(&mut page, r#"{"type":"resize","cols":100000,"rows":43}"#).await;
        assert_eq!(
            text_after_output(&mut page).await["error"]["code"],
            "invalid_request"
        );
        assert!(run(&mut page, "stty size").await.contains("43 132"));
        let pid = number_after(&run(&mut page, "echo pid=$$").await, "pid=");
        let child = number_after(&run(&mut page, "sleep 1000 & echo bg=$!").await, "bg=");

        let (mut second, _) = real.page("cols=80&rows=24").await;
        let other = number_after(&run(&mut second, "echo pid=$$").await, "pid=");
        assert_ne!(other, pid, "two terminals, two shells");

        drop(page);
        let (mut page, again) = real
            .page(&format!("cols=90&rows=30&session={session}"))
            .await;
        assert_eq!(again, session);
        let replayed = output_until(&mut page, b"bg=").await;
        assert!(
            String::from_utf8_lossy(&replayed).contains("hi-42"),
            "the screen comes back"
        );
        assert_eq!(
            number_after(&run(&mut page, "echo pid=$$").await, "pid="),
            pid
        );
        assert!(
            run(&mut page, "stty size").await.contains("30 90"),
            "the new page's size"
        );

        say(&mut page, r#"{"type":"close"}"#).await;
        closing(&mut page).await;
        assert!(
            gone_within(pid, Duration::from_secs(5)).await,
            "the shell ended"
        );
        assert!(
            gone_within(child, Duration::from_secs(5)).await,
            "its process group ended"
        );
        assert!(
            !gone_within(other, Duration::from_millis(200)).await,
            "the other terminal lives"
        );
        // A page that breaks the protocol ends its shell too.
        say(&mut second, "not json").await;
        let (_, code) = closing(&mut second).await;
        assert_eq!(code, Some(1008));
        assert!(gone_within(other, Duration::from_secs(5)).await);
    });
    assert!(!real.home.join("CANARY").exists());
}

/// A page that goes and does not come back within the grace: the terminal is gone, and
/// so is the shell on the node.
#[test]
fn a_real_shell_ends_after_the_grace() {
    let real = Real::start();
    real.rt.block_on(async {
        let (mut page, session) = real.page("cols=80&rows=24").await;
        let pid = number_after(&run(&mut page, "echo pid=$$").await, "pid=");
        drop(page);
        assert!(
            !gone_within(pid, Duration::from_secs(25)).await,
            "kept through the grace"
        );
        assert!(
            gone_within(pid, Duration::from_secs(15)).await,
            "ended after it"
        );
        let again = real.path(&format!("cols=80&rows=24&session={session}"));
        assert_eq!(
            refused(
                open(
                    &real.server.addr,
                    &again,
                    Auth::Protocol(&real.server.token),
                    &[]
                )
                .await
            ),
            (404, "unknown_terminal".into())
        );
    });
}

/// A terminal lasts only as long as the admin token it was opened with: revoked while
/// the page is attached, the terminal ends within a couple of seconds and its shell with
/// it, and the token cannot reattach. Another admin token's terminal goes on.
#[test]
fn revoking_the_admin_token_ends_its_terminals() {
    let real = Real::start();
    let leaked = real.server.create_token("me", "admin");
    real.rt.block_on(async {
        let (mut page, _) = open(
            &real.server.addr,
            &real.path("cols=80&rows=24"),
            Auth::Protocol(&leaked),
            &[],
        )
        .await
        .unwrap();
        let session = ready(&mut page).await;
        let pid = number_after(&run(&mut page, "echo pid=$$").await, "pid=");
        let (mut other, _) = real.page("cols=80&rows=24").await;
        let kept = number_after(&run(&mut other, "echo pid=$$").await, "pid=");

        let out = real.server.ferry(&["token", "revoke", &leaked[..12]]);
        assert!(out.status.success(), "{out:?}");
        let (texts, code) = tokio::time::timeout(Duration::from_secs(5), closing(&mut page))
            .await
            .expect("the terminal ends once its token is revoked");
        assert_eq!(
            texts.last().unwrap()["error"]["code"],
            "unauthorized",
            "{texts:?}"
        );
        assert_eq!(code, Some(1011));
        assert!(
            gone_within(pid, Duration::from_secs(5)).await,
            "its shell ended"
        );
        let again = real.path(&format!("cols=80&rows=24&session={session}"));
        let (status, _) =
            refused(open(&real.server.addr, &again, Auth::Protocol(&leaked), &[]).await);
        assert_eq!(status, 404);
        // The other token's terminal is untouched.
        assert!(
            run(&mut other, "echo still-here")
                .await
                .contains("still-here")
        );
        assert!(!gone_within(kept, Duration::from_millis(200)).await);
    });
}

/// The node dying ends its terminal with an error message and close 1011.
#[test]
fn a_real_node_dying_ends_its_terminal() {
    let mut real = Real::start();
    let mut page = real.rt.block_on(async {
        let (mut page, _) = real.page("cols=80&rows=24").await;
        run(&mut page, "echo up").await;
        page
    });
    real.node.signal(libc::SIGKILL);
    real.node.exit_blocking();
    real.rt.block_on(async {
        let (texts, code) = closing(&mut page).await;
        assert_eq!(texts[0]["error"]["code"], "node_offline", "{texts:?}");
        assert_eq!(code, Some(1011));
    });
}

/// Uploads to a real node in its own network namespace: a hostile name comes back quoted
/// for bash, and pasted at the prompt (without Enter) it runs nothing; with Enter, the
/// shell sees exactly the staged path as one word. 16 MiB passes, 16 MiB + 1 is refused
/// and the rest are staged.
#[test]
fn real_uploads_paste_safely_into_bash() {
    // The node in a network namespace of its own, as a remote machine.
    let real = Real::start_remote();
    let hostile = "a'b $(touch CANARY) `touch CANARY`;  ü ~ -x *.txt {a,b} !! \\ x";
    let max = UPLOAD_MAX_BYTES as usize;
    let exact = vec![1u8; max];
    let over = vec![2u8; max + 1];
    let (status, answer) = upload_parts(
        &real.server,
        &real.server.token,
        &real.id,
        &[
            ("file", Some(hostile), b"hostile bytes"),
            ("file", Some("over.bin"), &over),
            ("file", Some("exact.bin"), &exact),
        ],
    );
    assert_eq!(status, 200, "{answer}");
    let files = answer["files"].as_array().unwrap();
    assert_eq!(files[0]["name"], hostile, "{answer}");
    let path = files[0]["path"].as_str().unwrap().to_owned();
    let quoted = files[0]["quoted"].as_str().unwrap().to_owned();
    assert_eq!(std::fs::read(&path).unwrap(), b"hostile bytes");
    assert_eq!(files[1]["error"]["code"], "too_large", "{answer}");
    assert_eq!(files[2]["size"], max as u64);
    assert_eq!(
        std::fs::read(files[2]["path"].as_str().unwrap())
            .unwrap()
            .len(),
        max
    );
    real.rt.block_on(async {
        let (mut page, _) = real.page("cols=200&rows=24").await;
        run(&mut page, "cd ~").await;
        // Pasted as the page does: no Enter.
        type_in(&mut page, format!("printf '[%s]\\n' {quoted}").as_bytes()).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            !real.home.join("CANARY").exists(),
            "nothing ran before Enter"
        );
        type_in(&mut page, b"\r").await;
        let seen = output_until(&mut page, format!("[{path}]").as_bytes()).await;
        assert!(String::from_utf8_lossy(&seen).contains(&format!("[{path}]\r\n")));
        let words = run(&mut page, &format!("set -- {quoted}; echo \"words=$#\"")).await;
        assert_eq!(number_after(&words, "words="), 1);
    });
    assert!(!real.home.join("CANARY").exists(), "nothing ran at all");
}

/// A page whose network dropped without a word (its socket open, nothing read, no pong
/// to the gateway's pings) counts as gone: the terminal detaches, and after the grace it
/// ends on the node.
#[test]
fn a_silent_page_is_noticed_and_its_terminal_ends() {
    let gate = Gate::honest();
    gate.rt.block_on(async {
        let (page, _) = gate.page().await;
        gate.node_terminals(1).await;
        // Held open, never read again: pings go unanswered.
        tokio::time::sleep(Duration::from_secs(45 + 30 + 5)).await;
        gate.node_terminals(0).await;
        drop(page);
    });
}

/// A revoke through the route ends the node's terminals with an error message, and the
/// admin's event stream hears of it.
#[test]
fn a_revoke_ends_the_nodes_terminals_and_is_heard() {
    let gate = Gate::honest();
    let events = client()
        .get(gate.server.url("/v1/events"))
        .bearer_auth(&gate.server.token)
        .timeout(Duration::from_secs(4))
        .send()
        .unwrap();
    let mut page = gate.rt.block_on(async {
        let (mut page, _) = gate.page().await;
        type_in(&mut page, b"x").await;
        output_until(&mut page, b"x").await;
        page
    });
    let response = client()
        .delete(gate.server.url(&format!("/v1/nodes/{}", gate.id)))
        .bearer_auth(&gate.server.token)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    gate.rt.block_on(async {
        let (texts, code) = closing(&mut page).await;
        assert_eq!(texts[0]["type"], "error", "{texts:?}");
        assert_eq!(code, Some(1011));
        gate.node_terminals(0).await;
    });
    let mut events = events;
    let mut text = Vec::new();
    let _ = std::io::Read::read_to_end(&mut events, &mut text);
    let text = String::from_utf8_lossy(&text);
    assert!(
        text.contains(&format!("event: nodes\ndata: {{\"id\":\"{}\"}}", gate.id)),
        "{text}"
    );
    // A revoked node's terminal and uploads say it was revoked, not "approve it".
    let terminal = client()
        .get(
            gate.server
                .url(&format!("/v1/nodes/{}/terminal?cols=80&rows=24", gate.id)),
        )
        .bearer_auth(&gate.server.token)
        .send()
        .unwrap();
    assert_eq!(terminal.status().as_u16(), 409);
    let body: Value = terminal.json().unwrap();
    assert_eq!(body["error"]["code"], "node_revoked", "{body}");
    let (status, body) = gate.upload(&gate.server.token, &gate.id, &[("file", Some("a"), b"a")]);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("node_revoked")),
        "{body}"
    );
}
