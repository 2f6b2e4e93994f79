//! The agent ↔ node face end to end (spec nodes.md N-PAIR, N-LINK, N-TOOLS): a real
//! `ferry serve`, a real `ferry node run` in a network namespace of its own reached over
//! a veth pair, and the agent's tools called at `/mcp` through the official MCP SDK.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::netns::Netns;
use support::node::{NodeProcess, wait_for_node};
use support::tmpfs::Tmpfs;
use support::{Options, Server, ferry_bin, mcp};

/// A gateway whose person `me` may use one node, and that node, running in its own
/// network namespace and serving `srv/` (reads) and `srv/inbox/` (writes). The gateway
/// allows writes anywhere in `srv/`: the node's own rules are the narrower ones.
struct Remote {
    server: Server,
    netns: Netns,
    node: NodeProcess,
    id: String,
    srv: PathBuf,
    state: PathBuf,
    harness: String,
    _tmp: tempfile::TempDir,
}

impl Remote {
    fn start() -> Remote {
        Remote::start_with(Vec::new())
    }

    /// [`Remote::start`] with `env` for the gateway.
    fn start_with(env: Vec<(String, String)>) -> Remote {
        let netns = Netns::create();
        let tmp = tempfile::tempdir().unwrap();
        let srv = tmp.path().join("srv");
        std::fs::create_dir_all(srv.join("inbox")).unwrap();
        let srv = std::fs::canonicalize(srv).unwrap();
        let state = tmp.path().join("node-state");
        // The node's identity first: the gateway's policy names its id.
        let id = ferry_node::Identity::load_or_create(&state)
            .unwrap()
            .node_id();
        let config = format!(
            "[nodes.\"{id}\"]\npersons = [\"me\"]\nallow_read = [\"{srv}/**\"]\nallow_write = [\"{srv}/**\"]\n",
            srv = srv.display()
        );
        let server = Server::start_with(Options {
            config_toml: Some(config),
            listen: Some(format!("{}:0", netns.host_ip)),
            env,
            ..Options::default()
        });
        let harness = server.create_token("me", "harness");
        let node = start_node(&netns, &server, &state, &srv);
        let remote = Remote {
            server,
            netns,
            node,
            id,
            srv,
            state,
            harness,
            _tmp: tmp,
        };
        let pending = wait_for_node(&remote.server, &remote.id, |n| n["connected"] == true);
        assert_eq!(pending["state"], "pending", "{pending}");
        remote
    }

    fn approve(&self, extra: &[&str]) {
        let mut args = vec!["node", "approve", self.id.as_str()];
        args.extend_from_slice(extra);
        let out = self.server.ferry(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn at(&self, rel: &str) -> String {
        format!("{}/{rel}", self.srv.display())
    }

    /// One MCP session at `/mcp` making `steps`; the results, in order.
    fn session(&self, steps: Vec<Value>) -> Vec<Value> {
        let out = mcp::drive(&json!({
            "server": mcp::http(&self.server.url("/mcp"), &self.harness),
            "steps": steps,
            "timeout_secs": 120,
        }));
        out["results"].as_array().unwrap().clone()
    }

    fn call(&self, name: &str, args: Value) -> Value {
        self.session(vec![mcp::call(name, args)]).remove(0)
    }

    fn ok(&self, name: &str, args: Value) -> Value {
        let result = self.call(name, args);
        assert!(!mcp::is_error(&result), "{name}: {}", mcp::text_of(&result));
        result
    }

    fn refused(&self, name: &str, args: Value) -> String {
        let result = self.call(name, args);
        assert!(
            mcp::is_error(&result),
            "{name} should fail: {}",
            mcp::text_of(&result)
        );
        result["structuredContent"]["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("{result}"))
            .to_owned()
    }
}

fn start_node(netns: &Netns, server: &Server, state: &Path, srv: &Path) -> NodeProcess {
    let mut command = netns.command(&ferry_bin());
    let gateway = format!("ws://{}", server.addr);
    command.args([
        "node",
        "run",
        "--gateway",
        &gateway,
        "--name",
        "build-box",
        "--state",
        state.to_str().unwrap(),
        "--allow-read",
        &format!("{}/**", srv.display()),
        "--allow-write",
        &format!("{}/inbox/**", srv.display()),
    ]);
    let node = NodeProcess::spawn(command);
    let line = node.line_blocking();
    assert!(
        line.starts_with(&format!("connected to {gateway} as ")),
        "{line}"
    );
    node
}

fn structured(result: &Value) -> &Value {
    &result["structuredContent"]
}

#[test]
fn a_node_in_its_own_network_lists_fetches_pushes_and_fetches_trees() {
    let remote = Remote::start();
    // The node runs where the gateway is not: it has only the veth's address.
    let inside = remote
        .netns
        .command(Path::new("ip"))
        .args(["-o", "-4", "addr", "show"])
        .output()
        .unwrap();
    let addresses = String::from_utf8_lossy(&inside.stdout);
    assert!(addresses.contains(&remote.netns.node_ip), "{addresses}");
    assert!(!addresses.contains(&remote.netns.host_ip), "{addresses}");

    // Pending: nothing works yet.
    std::fs::write(remote.srv.join("notes.txt"), "from far away\n").unwrap();
    let fetch = json!({"node": "build-box", "path": remote.at("notes.txt")});
    assert_eq!(
        remote.refused("file_fetch", fetch.clone()),
        "command_not_allowed"
    );
    remote.approve(&[]);

    // The node tools are listed for this person at /mcp.
    let listed = remote.session(vec![mcp::list_tools()]).remove(0);
    for name in ["dir_list", "file_fetch", "file_push", "dir_fetch"] {
        mcp::tool(&listed, name);
    }

    let listing = remote.ok("dir_list", json!({"node": "build-box", "path": remote.srv}));
    assert!(mcp::text_of(&listing).contains("notes.txt"));
    assert!(mcp::text_of(&listing).contains("source=\"node:build-box\""));

    let fetched = remote.ok("file_fetch", fetch);
    let out = structured(&fetched);
    assert_eq!(remote.server.fetched_bytes(out), b"from far away\n");
    assert!(mcp::text_of(&fetched).contains("from far away"));
    let media_id = out["mediaId"].as_str().unwrap().to_owned();

    // 16 MiB of binary: saved, verified, never inlined.
    let big: Vec<u8> = (0..16 * 1024 * 1024u32)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    std::fs::write(remote.srv.join("big.bin"), &big).unwrap();
    let fetched = remote.ok(
        "file_fetch",
        json!({"node": "build-box", "path": remote.at("big.bin"), "maxBytes": 16 * 1024 * 1024}),
    );
    let out = structured(&fetched);
    assert_eq!(out["inline"], false);
    assert!(remote.server.fetched_bytes(out) == big);

    // Pushed back by its media id; the node's own rules keep writes in inbox/.
    remote.ok(
        "file_push",
        json!({"node": "build-box", "path": remote.at("inbox/copy.txt"), "sourceMediaId": media_id}),
    );
    assert_eq!(
        std::fs::read(remote.srv.join("inbox/copy.txt")).unwrap(),
        b"from far away\n"
    );
    let outside =
        json!({"node": "build-box", "path": remote.at("copy.txt"), "sourceMediaId": media_id});
    assert_eq!(remote.refused("file_push", outside), "path_denied");
    assert!(!remote.srv.join("copy.txt").exists());

    // A tree, through the node's tar writer and the gateway's planner.
    for i in 0..50 {
        let dir = remote.srv.join(format!("tree/d{}", i % 5));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i}.txt")), format!("{i}\n")).unwrap();
    }
    let tree = remote.ok(
        "dir_fetch",
        json!({"node": "build-box", "path": remote.at("tree")}),
    );
    let out = structured(&tree);
    assert_eq!(out["fileCount"], 50);
    let root = PathBuf::from(out["rootDir"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(root.join("d3/f13.txt")).unwrap(),
        "13\n"
    );
    let media = remote.server.ferry(&["media", "list"]);
    assert!(String::from_utf8_lossy(&media.stdout).contains("tree.tar.gz"));
}

#[test]
fn an_approval_narrowed_to_listing_serves_only_listing() {
    let remote = Remote::start();
    std::fs::write(remote.srv.join("a.txt"), "a").unwrap();
    remote.approve(&["--commands", "dir.list"]);
    remote.ok("dir_list", json!({"node": "build-box", "path": remote.srv}));
    let fetch = json!({"node": "build-box", "path": remote.at("a.txt")});
    assert_eq!(
        remote.refused("file_fetch", fetch.clone()),
        "command_not_allowed"
    );
    // The admin approves the rest: the same connected node now fetches.
    remote.approve(&[]);
    remote.ok("file_fetch", fetch);
}

#[test]
fn the_node_comes_back_after_a_gateway_restart_and_an_offline_node_answers_at_once() {
    let mut remote = Remote::start();
    remote.approve(&[]);
    std::fs::write(remote.srv.join("a.txt"), "a").unwrap();
    let fetch = json!({"node": "build-box", "path": remote.at("a.txt")});
    remote.ok("file_fetch", fetch.clone());

    // Same address and port: the node dials again by itself, with backoff.
    let listen = remote.server.addr.clone();
    remote.server.restart_on(&listen);
    wait_for_node(&remote.server, &remote.id, |n| n["connected"] == true);
    remote.ok("file_fetch", fetch.clone());

    // The node stops: a call answers node_offline at once, never hangs.
    remote.node.signal(libc::SIGTERM);
    assert!(remote.node.exit_blocking().success());
    wait_for_node(&remote.server, &remote.id, |n| n["connected"] == false);
    let started = Instant::now();
    assert_eq!(remote.refused("file_fetch", fetch), "node_offline");
    // The session itself takes a moment; the call adds nothing waiting for the node.
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn a_node_revoked_on_the_data_dir_is_cut_off_and_exits() {
    let mut remote = Remote::start();
    remote.approve(&[]);
    let out = remote.server.ferry(&["node", "revoke", &remote.id]);
    assert!(out.status.success());
    let status = remote.node.exit_blocking();
    assert_eq!(status.code(), Some(4), "{}", remote.node.stderr());
    // By id it is revoked; by name there is no live node of that name any more.
    let fetch = json!({"node": remote.id, "path": remote.at("a.txt")});
    assert_eq!(remote.refused("file_fetch", fetch), "node_revoked");
    let fetch = json!({"node": "build-box", "path": remote.at("a.txt")});
    assert_eq!(remote.refused("file_fetch", fetch), "unknown_node");
    // A second key under the same name is another node, and pending.
    let other_state = remote.state.with_file_name("other-state");
    let other = start_node(&remote.netns, &remote.server, &other_state, &remote.srv);
    let other_id = ferry_node::Identity::load_or_create(&other_state)
        .unwrap()
        .node_id();
    assert_ne!(other_id, remote.id);
    let pending = wait_for_node(&remote.server, &other_id, |n| n["connected"] == true);
    assert_eq!(pending["state"], "pending");
    assert_eq!(pending["name"], "build-box");
    drop(other);
}

/// A self-signed certificate for `localhost`, served by the returned acceptor; its sha256.
fn self_signed() -> (tokio_rustls::TlsAcceptor, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let sha = ferry_node::connect::tls::cert_sha256(cert.der().as_ref());
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    (
        tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config)),
        sha,
    )
}

/// Terminates TLS in front of the gateway at `upstream`, as an operator's proxy would.
async fn tls_front(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    upstream: String,
) {
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            return;
        };
        let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
        tokio::spawn(async move {
            let Ok(mut tls) = acceptor.accept(socket).await else {
                return;
            };
            let Ok(mut plain) = tokio::net::TcpStream::connect(&upstream).await else {
                return;
            };
            let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
        });
    }
}

#[test]
fn over_wss_a_self_signed_gateway_is_taken_only_with_its_pin() {
    let server = Server::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (acceptor, sha) = self_signed();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("wss://localhost:{}", listener.local_addr().unwrap().port());
    runtime.spawn(tls_front(listener, acceptor, server.addr.clone()));
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("node");
    let state = state.to_str().unwrap();
    let args = [
        "--gateway",
        url.as_str(),
        "--name",
        "tls-box",
        "--state",
        state,
    ];

    // No pin: the certificate is not trusted, every attempt, and the pin to use is named.
    let node = NodeProcess::start(&args, &[]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !node
        .stderr()
        .contains(&format!("--gateway-cert-sha256 {sha}"))
    {
        assert!(Instant::now() < deadline, "{}", node.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
    let (_, nodes) = support::get_json(&server.url("/v1/nodes"), &server.token);
    assert_eq!(nodes["nodes"], json!([]), "nothing reached the gateway");
    drop(node);

    // Pinned: it connects through the TLS front to the real gateway.
    let mut pinned = args.to_vec();
    pinned.extend(["--gateway-cert-sha256", sha.as_str()]);
    let node = NodeProcess::start(&pinned, &[]);
    let line = node.line_blocking();
    assert!(
        line.starts_with(&format!("connected to {url} as ")),
        "{line}"
    );
    let id = ferry_node::Identity::load_or_create(Path::new(state))
        .unwrap()
        .node_id();
    let pending = wait_for_node(&server, &id, |n| n["connected"] == true);
    assert_eq!(pending["name"], "tls-box");

    // A wrong pin is refused like no pin.
    drop(node);
    let wrong = "00".repeat(32);
    let mut args_wrong = args.to_vec();
    args_wrong.extend(["--gateway-cert-sha256", wrong.as_str()]);
    let node = NodeProcess::start(&args_wrong, &[]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !node.stderr().contains(&sha) {
        assert!(Instant::now() < deadline, "{}", node.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The audit trail (spec scale S-OPS) follows one file through every face: a member's
/// upload and move, the agent's edit and delivery, and a push to a node, each recorded
/// exactly once, read back through `ferry audit` and `GET /v1/audit`.
#[test]
fn the_audit_trail_follows_one_file_through_every_face_once_each() {
    let remote = Remote::start();
    remote.approve(&[]);
    let server = &remote.server;
    let (status, body) = support::upload(server, &server.token, "walk.txt", b"step one\n", None);
    assert_eq!(status, 201, "{body}");
    let (status, moved) = support::post_json(
        server,
        &server.token,
        "/v1/files/move",
        &json!({"from": "public/walk.txt", "to": "public/moved.txt"}),
    );
    assert_eq!(status, 200, "{moved}");
    remote.ok(
        "file_edit",
        json!({"edits": [{"path": "public/moved.txt", "oldText": "one", "newText": "two"}]}),
    );
    remote.ok("file_deliver", json!({"paths": ["public/moved.txt"]}));
    let pushed_to = remote.at("inbox/walk.txt");
    remote.ok(
        "file_push",
        json!({"node": "build-box", "path": pushed_to, "contentBase64": "c3RlcCB0d28K"}),
    );
    assert_eq!(
        std::fs::read(remote.srv.join("inbox/walk.txt")).unwrap(),
        b"step two\n"
    );

    // `ferry audit` on the site: JSON lines, newest first.
    let out = server.ferry(&["audit", "--person", "me"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let steps: Vec<(&str, &str)> = lines
        .iter()
        .rev()
        .map(|r| (r["action"].as_str().unwrap(), r["path"].as_str().unwrap()))
        .collect();
    assert_eq!(
        steps,
        [
            ("upload", "public/walk.txt"),
            ("move", "public/walk.txt"),
            ("tool_write", "public/moved.txt"),
            ("delivery", "public/moved.txt"),
            ("node_push", pushed_to.as_str()),
        ],
        "{lines:#?}"
    );
    let by = |action: &str| lines.iter().find(|r| r["action"] == action).unwrap();
    assert_eq!(by("upload")["tokenKind"], "admin");
    assert_eq!(by("upload")["size"], 9);
    assert_eq!(by("upload")["sha256"], body["sha256"]);
    assert_eq!(by("move")["to"], "public/moved.txt");
    assert_eq!(by("tool_write")["tokenKind"], "agent");
    assert_eq!(by("node_push")["node"], "build-box");
    assert!(lines.iter().all(|r| r["outcome"] == "ok"), "{lines:#?}");

    // The same records through the API, for the person whose files they are.
    let (status, page) = support::get_json(&server.url("/v1/audit"), &server.token);
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["records"].as_array().unwrap().len(), 5, "{page}");
    assert_eq!(page["earlier"], Value::Null);
    let (status, page) = support::get_json(&server.url("/v1/audit?limit=2"), &server.token);
    assert_eq!(status, 200);
    assert_eq!(page["records"].as_array().unwrap().len(), 2);
    let earlier = page["earlier"].as_i64().unwrap();
    let (_, rest) = support::get_json(
        &server.url(&format!("/v1/audit?before={earlier}")),
        &server.token,
    );
    assert_eq!(rest["records"].as_array().unwrap().len(), 3);
    // Another person sees none of them; a glob narrows the CLI's listing.
    let ann = server.add_person("ann");
    let (_, theirs) = support::get_json(&server.url("/v1/audit"), &ann);
    assert_eq!(theirs["records"], json!([]));
    let out = server.ferry(&["audit", "--path", "public/walk*"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
}

#[test]
fn a_fetch_or_a_push_onto_a_full_disk_is_refused_and_leaves_nothing_partial() {
    // The media store on this machine's disk, whatever store the run's other tests use:
    // it is that disk which fills here.
    let mut remote = Remote::start_with(vec![("FERRY_MEDIA__BACKEND".into(), "local".into())]);
    remote.approve(&[]);
    const MIB: u64 = 1024 * 1024;
    let media = remote.server.data.join(".ferry").join("media");
    let media_disk = Tmpfs::mount(&media, 4 * MIB);
    let empty = media_disk.available();
    let big: Vec<u8> = (0..6 * MIB).map(|i| (i % 251) as u8).collect();
    std::fs::write(remote.srv.join("big.bin"), &big).unwrap();
    let fetch = json!({"node": "build-box", "path": remote.at("big.bin"), "maxBytes": 16 * MIB});
    assert_eq!(remote.refused("file_fetch", fetch), "insufficient_storage");
    assert_eq!(
        media_disk.available(),
        empty,
        "the refused fetch kept bytes"
    );
    let listed = remote.server.ferry(&["media", "list"]);
    assert!(
        !String::from_utf8_lossy(&listed.stdout).contains("big.bin"),
        "a record without its blob: {}",
        String::from_utf8_lossy(&listed.stdout)
    );
    let small = json!({"node": "build-box", "path": remote.at("big.bin"), "maxBytes": 16 * MIB});
    std::fs::write(remote.srv.join("big.bin"), &big[..MIB as usize]).unwrap();
    let fetched = remote.ok("file_fetch", small);
    assert_eq!(
        remote.server.fetched_bytes(structured(&fetched)),
        &big[..MIB as usize]
    );

    // The node's disk: a push that does not fit keeps the file that was there. The node
    // sees mounts of its own network namespace's start, so it starts again after this.
    let inbox = remote.srv.join("inbox");
    let _inbox_disk = Tmpfs::mount(&inbox, MIB);
    std::fs::write(inbox.join("kept.txt"), "the old version\n").unwrap();
    remote.node.signal(libc::SIGKILL);
    remote.node.exit_blocking();
    remote.node = start_node(&remote.netns, &remote.server, &remote.state, &remote.srv);
    wait_for_node(&remote.server, &remote.id, |n| n["connected"] == true);
    let push = json!({"node": "build-box", "path": remote.at("inbox/kept.txt"),
                      "contentBase64": data_encoding::BASE64.encode(&big[..2 * MIB as usize]),
                      "overwrite": true});
    assert_eq!(remote.refused("file_push", push), "insufficient_storage");
    assert_eq!(
        std::fs::read(inbox.join("kept.txt")).unwrap(),
        b"the old version\n"
    );
    assert!(support::temporaries(&inbox).is_empty());
}
