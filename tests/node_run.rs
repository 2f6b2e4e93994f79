//! `ferry node run` as a real process (spec nodes N-PAIR, N-LINK): settings refused at
//! start with exit status 2 and the culprit named, a private state folder, reconnecting
//! to a gateway that stops and starts again on the same port, a revocation (exit 4), and
//! a clean stop on SIGTERM and SIGINT (exit 0).
//!
//! The gateway is a WebSocket server in this test doing what the gateway's endpoint does
//! (`gateway_handshake`, then the link), where the test must stop and start it on one
//! port; and a real `ferry serve` for pairing and revocation.

mod support;

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_codes::Code;
use ferry_node::frame::{ErrorBody, FRAME_MAX_BYTES, Frame, Kind};
use ferry_node::handshake::{VerifiedNode, gateway_handshake};
use ferry_node::mux::{LinkConfig, Role};
use ferry_node::{Link, NodeError};
use futures_util::future::ready;
use futures_util::{SinkExt, StreamExt};
use support::node::{NodeProcess as Node, wait_for_node};
use support::{Server, client, json_answer};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

fn ferry() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
}

/// `ferry node run ARGS…` to its end (for runs refused at start).
fn refused(args: &[&str], env: &[(&str, &Path)]) -> (i32, String) {
    let mut command = ferry();
    command.args(["node", "run"]).args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    let out = command.output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// ------------------------------------------------------------------ refused at start

#[test]
fn a_bad_glob_exits_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("node");
    let state = state.to_str().unwrap();
    for (flag, glob) in [
        ("--allow-read", "relative/**"),
        ("--allow-write", "/data/[inbox"),
        ("--deny", "/data/{a,b"),
    ] {
        let (code, stderr) = refused(
            &[
                "--gateway",
                "ws://127.0.0.1:9",
                "--state",
                state,
                flag,
                glob,
            ],
            &[],
        );
        assert_eq!(code, 2, "{flag} {glob}: {stderr}");
        assert!(stderr.contains(glob), "{flag} {glob}: {stderr}");
    }
}

#[test]
fn an_unknown_key_in_node_toml_exits_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("node");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(
        state.join("node.toml"),
        "gateway = \"ws://127.0.0.1:9\"\nallow_reads = [\"/data/**\"]\n",
    )
    .unwrap();
    let (code, stderr) = refused(&["--state", state.to_str().unwrap()], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("allow_reads"), "{stderr}");
    assert!(stderr.contains("node.toml"), "{stderr}");
}

#[test]
fn ws_to_a_public_address_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("node");
    for gateway in [
        "ws://8.8.8.8:80",
        "ws://[2606:4700::1111]:80",
        "ws://172.32.0.1",
    ] {
        let started = Instant::now();
        let (code, stderr) = refused(
            &["--gateway", gateway, "--state", state.to_str().unwrap()],
            &[],
        );
        assert_eq!(code, 2, "{gateway}: {stderr}");
        assert!(stderr.contains("use wss://"), "{gateway}: {stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "refused without dialling"
        );
    }
    // Nothing was made for a node that never ran.
    assert!(!state.exists());
}

// ------------------------------------------------------------------- a gateway in here

/// What the gateway in this test does with a node that connects.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    Serve,
    /// Welcome, then close the link with `node_revoked`.
    Revoke,
}

struct Gateway {
    address: SocketAddr,
    nodes: mpsc::UnboundedReceiver<(VerifiedNode, Link)>,
    stopping: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(FRAME_MAX_BYTES))
        .max_frame_size(Some(FRAME_MAX_BYTES))
}

impl Gateway {
    async fn start(address: SocketAddr, behaviour: Behaviour) -> Gateway {
        Gateway::start_with(address, behaviour, None).await
    }

    async fn start_with(
        address: SocketAddr,
        behaviour: Behaviour,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) -> Gateway {
        let listener = TcpListener::bind(address).await.unwrap();
        let address = listener.local_addr().unwrap();
        let (tx, nodes) = mpsc::unbounded_channel();
        let stopping = CancellationToken::new();
        let stop = stopping.clone();
        let task = tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = stop.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((tcp, _)) = accepted else { return };
                let (tx, stop, tls) = (tx.clone(), stop.clone(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        None => serve_connection(tcp, behaviour, tx, stop).await,
                        Some(acceptor) => {
                            if let Ok(tls) = acceptor.accept(tcp).await {
                                serve_connection(tls, behaviour, tx, stop).await;
                            }
                        }
                    }
                });
            }
        });
        Gateway {
            address,
            nodes,
            stopping,
            task,
        }
    }

    fn url(&self) -> String {
        format!("ws://{}", self.address)
    }

    async fn next_node(&mut self) -> (VerifiedNode, Link) {
        tokio::time::timeout(WAIT, self.nodes.recv())
            .await
            .expect("the node connects in time")
            .unwrap()
    }

    /// Stops listening and closes every link, as a gateway that stops does.
    async fn stop(self) {
        self.stopping.cancel();
        let _ = self.task.await;
    }
}

/// One node's connection to the gateway in this test.
async fn serve_connection<S>(
    io: S,
    behaviour: Behaviour,
    tx: mpsc::UnboundedSender<(VerifiedNode, Link)>,
    stop: CancellationToken,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let Ok(ws) = tokio_tungstenite::accept_async_with_config(io, Some(ws_config())).await else {
        return;
    };
    let (sink, stream) = ws.split();
    let mut sink = sink.with(|b: Bytes| ready(Ok::<_, WsError>(Message::Binary(b))));
    let mut stream = stream.filter_map(|m| {
        ready(match m {
            Ok(Message::Binary(b)) => Some(Ok(b)),
            Ok(Message::Text(_)) => Some(Err("text".to_string())),
            Ok(_) => None,
            Err(e) => Some(Err(e.to_string())),
        })
    });
    let Ok(node) = gateway_handshake(&mut sink, &mut stream, "gw", WAIT).await else {
        return;
    };
    if behaviour == Behaviour::Revoke {
        let body = ErrorBody {
            code: Code::NodeRevoked,
            message: format!("node {} is revoked", node.id),
        };
        let _ = sink
            .send(Frame::control(Kind::Error, 0, true, &body).encode())
            .await;
        let _ = sink.close().await;
        return;
    }
    let link = Link::spawn(sink, stream, LinkConfig::new(Role::Gateway), None);
    let _ = tx.send((node, link.clone()));
    tokio::select! {
        _ = link.closed() => {}
        () = stop.cancelled() => link.close(),
    }
}

// -------------------------------------------------------------------- the node process

/// A running `ferry node run`: its stdout lines as they come, its stderr kept.
fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_folder_and_key_are_the_owners_alone() {
    let mut gateway = Gateway::start("127.0.0.1:0".parse().unwrap(), Behaviour::Serve).await;
    let dir = tempfile::tempdir().unwrap();
    // Under $XDG_STATE_HOME by default, made with its parents.
    let xdg = dir.path().join("xdg/state");
    let node = Node::start(
        &["--gateway", &gateway.url(), "--name", "box-1"],
        &[("XDG_STATE_HOME", &xdg)],
    );
    let line = node.line().await;
    let (verified, _link) = gateway.next_node().await;
    assert_eq!(
        line,
        format!(
            "connected to {} as {} (name box-1)",
            gateway.url(),
            verified.id
        )
    );
    let state = xdg.join("ferry-node");
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&state.join("identity.key")), 0o600);
    // No allow glob: told once at start.
    assert!(
        node.stderr().contains("refuse every transfer"),
        "{}",
        node.stderr()
    );
    drop(node);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_reconnects_to_a_restarted_gateway_and_stops_cleanly_on_sigterm() {
    let mut gateway = Gateway::start("127.0.0.1:0".parse().unwrap(), Behaviour::Serve).await;
    let address = gateway.address;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("node");
    let mut node = Node::start(
        &[
            "--gateway",
            &gateway.url(),
            "--name",
            "box-2",
            "--state",
            state.to_str().unwrap(),
            "--allow-read",
            "/srv/**",
        ],
        &[],
    );
    assert!(node.line().await.starts_with("connected to "));
    let (first, _link) = gateway.next_node().await;
    gateway.stop().await;
    // The node keeps trying while nobody listens…
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(node.child.try_wait().unwrap().is_none());
    assert!(
        node.stderr().contains("Connection refused"),
        "{}",
        node.stderr()
    );
    // …and comes back to the same port.
    let mut gateway = Gateway::start(address, Behaviour::Serve).await;
    assert!(node.line().await.starts_with("connected to "));
    let (again, link) = gateway.next_node().await;
    assert_eq!(again.id, first.id);
    assert!(!node.stderr().contains("refuse every transfer"));

    node.signal(libc::SIGTERM);
    let status = node.exit().await;
    assert_eq!(status.code(), Some(0), "{}", node.stderr());
    // The link was closed by the node, not lost.
    let cause = tokio::time::timeout(WAIT, link.closed()).await.unwrap();
    let NodeError::Offline(reason) = cause else {
        panic!("{cause}")
    };
    assert!(reason.contains("the other end closed the link"), "{reason}");
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_stops_a_node_that_is_still_trying() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("node");
    let url = format!("ws://{address}");
    let mut node = Node::start(
        &["--gateway", &url, "--state", state.to_str().unwrap()],
        &[],
    );
    let deadline = Instant::now() + WAIT;
    while !node.stderr().contains("cannot connect") {
        assert!(Instant::now() < deadline, "{}", node.stderr());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    node.signal(libc::SIGINT);
    assert_eq!(node.exit().await.code(), Some(0), "{}", node.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_node_exits_4() {
    let gateway = Gateway::start("127.0.0.1:0".parse().unwrap(), Behaviour::Revoke).await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("node");
    let mut node = Node::start(
        &[
            "--gateway",
            &gateway.url(),
            "--state",
            state.to_str().unwrap(),
        ],
        &[],
    );
    let status = node.exit().await;
    assert_eq!(status.code(), Some(4), "{}", node.stderr());
    assert!(node.stderr().contains("is revoked"), "{}", node.stderr());
    gateway.stop().await;
}

// ------------------------------------------------------------------------ wss, roots

/// A private CA (its PEM) and a TLS acceptor for `localhost` with a certificate it signed
/// (and that certificate's sha256).
fn private_ca() -> (String, tokio_rustls::TlsAcceptor, String) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "ferry test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let sha = ferry_node::connect::tls::cert_sha256(leaf.der().as_ref());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone(), ca_cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    (ca_cert.pem(), acceptor, sha)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wss_trusts_the_system_roots_and_names_the_pin_of_a_certificate_they_do_not_cover() {
    let (ca_pem, acceptor, leaf_sha) = private_ca();
    let (other_ca_pem, _, _) = private_ca();
    let gateway = Gateway::start_with(
        "127.0.0.1:0".parse().unwrap(),
        Behaviour::Serve,
        Some(acceptor),
    )
    .await;
    let mut gateway = gateway;
    let url = format!("wss://localhost:{}", gateway.address.port());
    let dir = tempfile::tempdir().unwrap();
    let (ours, theirs) = (dir.path().join("ca.pem"), dir.path().join("other.pem"));
    std::fs::write(&ours, ca_pem).unwrap();
    std::fs::write(&theirs, other_ca_pem).unwrap();
    let state = dir.path().join("node");
    let args = [
        "--gateway",
        &url,
        "--name",
        "tls-box",
        "--state",
        state.to_str().unwrap(),
    ];

    // Roots that do not cover the gateway: refused, every attempt, with the pin to use.
    let node = Node::start(&args, &[("SSL_CERT_FILE", &theirs)]);
    let deadline = Instant::now() + WAIT;
    while !node.stderr().contains(&leaf_sha) {
        assert!(Instant::now() < deadline, "{}", node.stderr());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        node.stderr()
            .contains(&format!("--gateway-cert-sha256 {leaf_sha}")),
        "{}",
        node.stderr()
    );
    assert!(gateway.nodes.try_recv().is_err());
    drop(node);

    // The system store (here: the file it is read from) holding the CA: trusted.
    let node = Node::start(&args, &[("SSL_CERT_FILE", &ours)]);
    assert!(
        node.line()
            .await
            .starts_with(&format!("connected to {url} as "))
    );
    let (verified, _link) = gateway.next_node().await;
    assert_eq!(verified.info.name, "tls-box");
    drop(node);
    gateway.stop().await;
}

// ------------------------------------------------------------------ with ferry serve

/// The node `id` as `GET /v1/nodes` shows it, once `check` holds for it.

#[test]
fn against_ferry_serve_the_node_pairs_and_exits_4_once_revoked() {
    let server = Server::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("node");
    let gateway = format!("ws://{}", server.addr);
    let mut node = Node::start(
        &[
            "--gateway",
            &gateway,
            "--name",
            "e2e-box",
            "--state",
            state.to_str().unwrap(),
            "--allow-read",
            "/srv/**",
        ],
        &[],
    );
    let line = runtime.block_on(node.line());
    let id = line
        .strip_prefix(&format!("connected to {gateway} as "))
        .and_then(|rest| rest.strip_suffix(" (name e2e-box)"))
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_owned();
    let pending = wait_for_node(&server, &id, |n| n["connected"] == true);
    assert_eq!(pending["state"], "pending", "{pending}");
    assert_eq!(pending["name"], "e2e-box");
    assert_eq!(pending["platform"], std::env::consts::OS);
    assert_eq!(
        pending["advertisedCommands"],
        serde_json::json!([
            "dir.list",
            "file.stat",
            "file.fetch",
            "file.push",
            "dir.fetch",
            "terminal.open",
            "terminal.upload"
        ])
    );

    let approve = |path: &str| {
        json_answer(
            client()
                .post(server.url(path))
                .bearer_auth(&server.token)
                .send()
                .unwrap(),
        )
    };
    let (status, body) = approve(&format!("/v1/nodes/{id}/approve"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "approved");

    let (status, body) = json_answer(
        client()
            .delete(server.url(&format!("/v1/nodes/{id}")))
            .bearer_auth(&server.token)
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200, "{body}");
    // The gateway closes the link; the node dials again, is refused as revoked, and stops.
    let status = runtime.block_on(node.exit());
    assert_eq!(status.code(), Some(4), "{}", node.stderr());
    let stderr = node.stderr();
    assert!(stderr.contains("revoked"), "{stderr}");
    assert!(stderr.contains("identity.key"), "{stderr}");
    wait_for_node(&server, &id, |n| {
        n["connected"] == false && n["state"] == "revoked"
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_output_is_gone_keeps_serving() {
    let mut gateway = Gateway::start("127.0.0.1:0".parse().unwrap(), Behaviour::Serve).await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("node");
    let mut child = ferry()
        .args(["node", "run", "--gateway", &gateway.url(), "--state"])
        .arg(&state)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Nobody reads either pipe: every line the node writes meets a closed pipe.
    drop(child.stdout.take());
    drop(child.stderr.take());
    let (first, link) = gateway.next_node().await;
    link.close();
    drop(link);
    // It connected, wrote its line into nothing, lost the link, logged that into nothing,
    // and came back.
    let (again, _link) = gateway.next_node().await;
    assert_eq!(again.id, first.id);
    assert!(child.try_wait().unwrap().is_none());
    // SAFETY: kill has no memory effects; the pid is our own child, not yet reaped.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the node did not exit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status.code(), Some(0));
    gateway.stop().await;
}

/// Whether the process `pid` is alive (neither gone nor a zombie).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat[stat.rfind(')').unwrap() + 1..]
            .split_whitespace()
            .next();
        !matches!(state, Some("Z" | "X"))
    })
}

/// A node killed while a terminal is open cannot end the terminal's session: what the
/// shell started in groups of its own, `nohup`ed or ignoring the hang-up outlives it. Its
/// next start on the same state folder ends them, before it connects (spec N-TERM:
/// nothing a terminal started outlives it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_terminal_jobs_a_killed_node_left_end_at_its_next_start() {
    use ferry_node::terminal::{Message as Term, MessageDecoder};
    let mut gateway = Gateway::start("127.0.0.1:0".parse().unwrap(), Behaviour::Serve).await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("node");
    let url = gateway.url();
    let args = [
        "--gateway",
        url.as_str(),
        "--name",
        "box-t",
        "--state",
        state.to_str().unwrap(),
    ];
    let env = [("SHELL", Path::new("/bin/bash"))];
    let mut node = Node::start(&args, &env);
    assert!(node.line().await.starts_with("connected to "));
    let (_, link) = gateway.next_node().await;

    let mut call = link
        .open(
            "terminal.open",
            serde_json::json!({"cols": 80, "rows": 24}),
            true,
        )
        .unwrap();
    let mut input = call.take_body().unwrap();
    let mut output = call.response().await.unwrap().body;
    let typed = "sleep 1000 & nohup sleep 1001 >/dev/null 2>&1 & \
                 bash -c 'trap \"\" HUP TERM; exec sleep 1002' & \
                 echo JOBS=$(jobs -p | tr '\\n' ,)\r";
    input
        .send(Term::Data(Bytes::copy_from_slice(typed.as_bytes())).encode())
        .await
        .unwrap();
    let mut decoder = MessageDecoder::new();
    let mut seen = String::new();
    let jobs: Vec<i32> = tokio::time::timeout(WAIT, async {
        loop {
            let piece = output.next().await.unwrap().unwrap();
            decoder.push(&piece);
            while let Some(Term::Data(bytes)) = decoder.next_message().unwrap() {
                seen.push_str(&String::from_utf8_lossy(&bytes));
            }
            // The echo of the typed line holds `JOBS=$(`; the answer, the pids.
            let answer = seen
                .match_indices("JOBS=")
                .map(|(i, _)| i)
                .find(|&i| seen[i + 5..].starts_with(|c: char| c.is_ascii_digit()));
            if let Some(at) = answer
                && let Some(end) = seen[at..].find(['\r', '\n'])
            {
                return seen[at + 5..at + end]
                    .split(',')
                    .filter_map(|p| p.parse().ok())
                    .collect();
            }
        }
    })
    .await
    .expect("the shell said its jobs");
    assert_eq!(jobs.len(), 3, "{seen}");
    let records = state.join("terminal-sessions");
    assert_eq!(std::fs::read_dir(&records).unwrap().count(), 1);

    // Killed: nothing of the node is left to end the session.
    node.signal(libc::SIGKILL);
    node.exit().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let left: Vec<i32> = jobs.iter().copied().filter(|&j| alive(j)).collect();
    assert!(!left.is_empty(), "the hang-up alone ended every job");

    // Its next start ends them before it connects.
    drop(output);
    drop(input);
    let node = Node::start(&args, &env);
    assert!(node.line().await.starts_with("connected to "));
    for job in &jobs {
        assert!(!alive(*job), "job {job} outlived the node's next start");
    }
    assert!(
        node.stderr().contains("ended 1 terminal session whose"),
        "{}",
        node.stderr()
    );
    assert_eq!(std::fs::read_dir(&records).unwrap().count(), 0);
    drop(node);
    gateway.stop().await;
}
