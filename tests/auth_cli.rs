//! Who may do what (spec members M-AUTH, M-PROJ), the administration commands, the
//! configuration (ARCHITECTURE Conventions, core C-LIMIT) and the documents shipped to
//! agents (M-DOCS), all through the real `ferry` binary.

mod support;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use reqwest::blocking::multipart::{Form, Part};
use serde_json::{Value, json};
use support::{
    Finished, Options, Peer, Reply, Server, client, config_value, create_project, error_code,
    ferry_command, finish, get_json, is_rfc3339, json_answer, listed_paths, post_json, upload,
};

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// `ferry <args>` on `data`, run to completion.
fn ferry_on(data: &Path, args: &[&str]) -> Finished {
    let mut cmd = ferry_command();
    cmd.args(args).arg("--data").arg(data);
    finish(cmd)
}

/// A `ferry serve` started by a test itself (for restarts and custom arguments); killed
/// on drop.
struct Gateway {
    child: Child,
    /// The first lines it printed.
    lines: Vec<String>,
    log: PathBuf,
}

impl Gateway {
    /// Starts `ferry serve --data <data> <args>` and reads `lines` lines of its output.
    fn start(data: &Path, args: &[&str], env: &[(&str, &str)], lines: usize) -> Gateway {
        let log = data.with_extension(format!("log-{}", std::process::id()));
        let mut cmd = ferry_command();
        cmd.arg("serve")
            .arg("--data")
            .arg(data)
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap());
        let mut child = cmd.spawn().unwrap();
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        let mut out = Vec::new();
        for _ in 0..lines {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            assert!(
                !line.is_empty(),
                "ferry serve ended early; log: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            out.push(line.trim_end().to_owned());
        }
        Gateway {
            child,
            lines: out,
            log,
        }
    }

    /// `http://host:port` from the first line.
    fn base(&self) -> String {
        let line = &self.lines[0];
        let end = line[7..].find('/').map_or(line.len(), |i| i + 7);
        line[..end].to_owned()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// `{"error":{"code","message"}}` and nothing else, with a message a person can read.
fn assert_error_shape(body: &Value, code: &str) {
    assert_eq!(error_code(body), code, "{body}");
    assert_eq!(body.as_object().unwrap().len(), 1, "{body}");
    assert_eq!(body["error"].as_object().unwrap().len(), 2, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.len() > 10),
        "{body}"
    );
}

/// Sends `request` and checks a 401 in the API's shape with a `WWW-Authenticate` header.
fn assert_unauthorized(request: reqwest::blocking::RequestBuilder, what: &str) {
    let response = request.send().unwrap();
    assert_eq!(response.status(), 401, "{what}");
    let challenge = response
        .headers()
        .get("www-authenticate")
        .unwrap_or_else(|| panic!("{what}: no WWW-Authenticate header"))
        .to_str()
        .unwrap()
        .to_owned();
    assert!(challenge.starts_with("Bearer"), "{what}: {challenge}");
    let body: Value = response.json().unwrap();
    assert_error_shape(&body, "unauthorized");
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

// ---------------------------------------------------------------------------------------
// First and second start
// ---------------------------------------------------------------------------------------

#[test]
fn first_start_prints_the_url_with_a_token() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("site");
    let gateway = Gateway::start(&data, &["--listen", "127.0.0.1:0"], &[], 1);
    let line = &gateway.lines[0];
    let rest = line
        .strip_prefix("http://127.0.0.1:")
        .unwrap_or_else(|| panic!("{line}"));
    let (port, token) = rest
        .split_once("/#token=")
        .unwrap_or_else(|| panic!("{line}"));
    assert!(port.parse::<u16>().is_ok_and(|p| p > 0), "{line}");
    // Exactly the URL: no spaces, nothing after the token.
    assert!(
        !token.is_empty() && token.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
        "{line}"
    );
    // Room for ≥ 128 random bits even in base32 (5 bits a character).
    assert!(token.len() >= 26, "token too short: {token}");

    let (status, listing) = get_json(&format!("{}/v1/files", gateway.base()), token);
    assert_eq!(status, 200, "{listing}");
    assert_eq!(listing["root"], "public");
    // Stored hashed: the token itself is nowhere in the service's files.
    for rel in support::tree(&data.join(".ferry")) {
        let path = data.join(".ferry").join(&rel);
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(token.len()).any(|w| w == token.as_bytes()),
                "the token is stored in clear in .ferry/{rel}"
            );
        }
    }
    // `me` was created, with an admin-capable token.
    let people = ferry_on(&data, &["person", "list"]);
    assert_eq!(people.stdout.lines().collect::<Vec<_>>(), vec!["me"]);
}

#[test]
fn second_start_creates_no_one_and_prints_a_hint() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("site");
    let first = Gateway::start(&data, &["--listen", "127.0.0.1:0"], &[], 1);
    let token = first.lines[0].split_once("/#token=").unwrap().1.to_owned();
    drop(first);
    // Someone tampered with the shipped document meanwhile.
    let doc = data.join("home/me/memory/FILE_DELIVERY.md");
    std::fs::set_permissions(&doc, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&doc, "save everything to uploads/").unwrap();

    let second = Gateway::start(&data, &["--listen", "127.0.0.1:0"], &[], 2);
    let url = &second.lines[0];
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with('/'),
        "{url}"
    );
    assert!(!url.contains("token"), "{url}");
    assert!(
        second.lines[1].contains("ferry token create"),
        "{:?}",
        second.lines
    );

    let people = ferry_on(&data, &["person", "list"]);
    assert_eq!(people.stdout.lines().collect::<Vec<_>>(), vec!["me"]);
    // The first token still works; the document is restored read-only.
    let (status, _) = get_json(&format!("{}/v1/files", second.base()), &token);
    assert_eq!(status, 200);
    let shipped = std::fs::read_to_string(repo_root().join("docs/agent/FILE_DELIVERY.md")).unwrap();
    assert_eq!(std::fs::read_to_string(&doc).unwrap(), shipped);
    assert_eq!(
        std::fs::metadata(&doc).unwrap().permissions().mode() & 0o777,
        0o444
    );
}

// ---------------------------------------------------------------------------------------
// People and tokens
// ---------------------------------------------------------------------------------------

#[test]
fn person_add_prints_a_working_token_alone_on_the_last_line() {
    let server = Server::start();
    let out = server.ferry(&["person", "add", "alice"]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let token = stdout.lines().last().unwrap();
    assert_eq!(token, token.trim());
    assert!(!token.contains(' '), "{stdout}");

    let (status, listing) = get_json(&server.url("/v1/files"), token);
    assert_eq!(status, 200, "{listing}");
    assert_eq!(listing["root"], "public");
    assert!(server.home("alice").join("public/attachments").is_dir());

    let people = server.ferry(&["person", "list"]);
    assert_eq!(
        String::from_utf8(people.stdout)
            .unwrap()
            .lines()
            .collect::<Vec<_>>(),
        vec!["alice", "me"]
    );
    // A second add of the same id is refused and issues no token.
    let again = server.ferry(&["person", "add", "alice"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("alice"));
}

#[test]
fn admin_commands_find_the_data_dir_and_never_make_a_site() {
    let tmp = tempfile::tempdir().unwrap();
    let ferry_in = |args: &[&str], env: Option<&Path>| {
        let mut cmd = ferry_command();
        cmd.current_dir(tmp.path()).args(args);
        if let Some(data) = env {
            cmd.env("FERRY_DATA", data);
        }
        finish(cmd)
    };
    // No site there: every administration command says how to make one, and makes
    // nothing (a mistyped --data is not a new empty site).
    let typo = tmp.path().join("typo");
    for args in [
        &["person", "add", "bob"][..],
        &["token", "create", "me", "--data", typo.to_str().unwrap()],
        &["person", "list", "--data", typo.to_str().unwrap()],
        &["circle", "add", "team", "--data", typo.to_str().unwrap()],
        &["mcp", "--person", "me", "--data", typo.to_str().unwrap()],
    ] {
        let out = ferry_in(args, None);
        assert!(!out.status.success(), "{args:?}: {}", out.both());
        assert!(
            out.stderr.contains("ferry serve --data"),
            "{args:?}: {}",
            out.both()
        );
    }
    assert!(!tmp.path().join("ferry-data").exists());
    assert!(!typo.exists());

    // --data, else FERRY_DATA, else ./ferry-data; `site init` makes a site.
    let out = ferry_in(&["site", "init", "--mode", "local"], None);
    assert!(out.status.success(), "{}", out.both());
    assert!(
        out.stdout.starts_with("created the site at "),
        "{}",
        out.both()
    );
    let again = ferry_in(&["site", "init", "--mode", "local"], None);
    assert!(
        again.stdout.starts_with("the site is there already"),
        "{}",
        again.both()
    );
    assert!(ferry_in(&["person", "add", "bob"], None).status.success());
    assert!(tmp.path().join("ferry-data/home/bob").is_dir());

    let from_env = tmp.path().join("from-env");
    let from_flag = tmp.path().join("from-flag");
    for data in [&from_env, &from_flag] {
        let made = ferry_in(&["site", "init", "--mode", "local"], Some(data));
        assert!(made.status.success(), "{}", made.both());
    }
    assert!(
        ferry_in(&["person", "add", "carol"], Some(&from_env))
            .status
            .success()
    );
    assert!(from_env.join("home/carol").is_dir());
    let flag = from_flag.to_str().unwrap();
    let out = ferry_in(&["person", "add", "dave", "--data", flag], Some(&from_env));
    assert!(out.status.success(), "{}", out.both());
    assert!(from_flag.join("home/dave").is_dir());
    assert!(!from_env.join("home/dave").exists());
}

#[test]
fn invalid_person_ids_are_refused_clearly() {
    let server = Server::start();
    let too_long = "a".repeat(23);
    for id in ["A", "a/b", too_long.as_str(), "_a", "../x", "é"] {
        let out = server.ferry(&["person", "add", id]);
        assert!(!out.status.success(), "{id:?} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("invalid"), "{id:?}: {stderr}");
        assert!(
            stderr.contains(&format!("{id:?}")),
            "{id:?}: the message should name it: {stderr}"
        );
        assert!(
            stderr.contains("a-z"),
            "{id:?}: the message should say what is allowed: {stderr}"
        );
        // No token was printed.
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("fy_"),
            "{id:?}"
        );
    }
    let people = server.ferry(&["person", "list"]);
    assert_eq!(
        String::from_utf8(people.stdout)
            .unwrap()
            .lines()
            .collect::<Vec<_>>(),
        vec!["me"]
    );
    let homes: Vec<_> = std::fs::read_dir(server.data.join("home"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(homes, vec!["me"]);
    // The 22-character id is the longest accepted.
    let longest = "a".repeat(22);
    assert!(server.ferry(&["person", "add", &longest]).status.success());
}

#[test]
fn harness_token_delivers_but_cannot_list() {
    let server = Server::start();
    server.add_person("alice");
    let out = server.ferry(&["token", "create", "alice", "--kind", "harness"]);
    let harness = support::last_line(&out);
    let peer = Peer::start(|_| Reply::ok(b"report bytes".to_vec()));

    let (status, body) = post_json(
        &server,
        &harness,
        "/v1/deliveries",
        &json!({"url": peer.url("/r/report.pdf"), "project": null}),
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["path"], "public/attachments/report.pdf");
    assert_eq!(
        std::fs::read(server.home("alice").join("public/attachments/report.pdf")).unwrap(),
        b"report bytes"
    );
    assert!(
        !server
            .home("me")
            .join("public/attachments/report.pdf")
            .exists()
    );

    let http = client();
    assert_unauthorized(
        http.get(server.url("/v1/files")).bearer_auth(&harness),
        "harness lists",
    );
    assert_unauthorized(
        http.get(server.url("/v1/projects")).bearer_auth(&harness),
        "harness projects",
    );
    // And the other way: member tokens (person or admin) may not deliver.
    let person = server.create_token("alice", "person");
    for token in [&person, &server.token] {
        assert_unauthorized(
            http.post(server.url("/v1/deliveries"))
                .bearer_auth(token)
                .json(&json!({"url": peer.url("/x.pdf")})),
            "member delivers",
        );
    }
    // A token for someone who does not exist is refused.
    let nobody = server.ferry(&["token", "create", "nobody", "--kind", "person"]);
    assert!(!nobody.status.success());
    assert!(String::from_utf8_lossy(&nobody.stderr).contains("nobody"));
}

#[test]
fn revoked_token_is_refused_at_once() {
    let server = Server::start();
    let alice = server.add_person("alice");
    let spare = server.create_token("alice", "person");
    assert_eq!(get_json(&server.url("/v1/files"), &alice).0, 200);

    // Too short a prefix fails and revokes nothing.
    let out = server.ferry(&["token", "revoke", &alice[..5]]);
    assert!(!out.status.success(), "a 5-character prefix was accepted");
    assert!(!String::from_utf8_lossy(&out.stderr).trim().is_empty());
    assert_eq!(get_json(&server.url("/v1/files"), &alice).0, 200);

    // Revoked by its printed prefix while the server runs.
    let out = server.ferry(&["token", "revoke", &alice[..12]]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("revoked 1"),
        "{out:?}"
    );
    assert_unauthorized(
        client().get(server.url("/v1/files")).bearer_auth(&alice),
        "revoked token",
    );
    // Only that one.
    assert_eq!(get_json(&server.url("/v1/files"), &spare).0, 200);
    assert_eq!(get_json(&server.url("/v1/files"), &server.token).0, 200);
    // Revoking it again finds nothing.
    assert!(
        !server
            .ferry(&["token", "revoke", &alice[..12]])
            .status
            .success()
    );
}

/// What `ferry token revoke` takes: 6 to 12 of a token's first characters (its handle),
/// or the whole token, checked against its hash. 5 characters, a string longer than a
/// handle that is not a token (a handle with more after it), or a token with one
/// character changed are refused, say what is taken, revoke nothing, and never echo
/// more than the handle.
#[test]
fn a_revoke_names_tokens_by_6_to_12_characters_or_the_whole_token() {
    let server = Server::start();
    let alice = server.add_person("alice");
    let bob = server.create_token("alice", "person");
    let carol = server.create_token("alice", "person");
    let works = |t: &str| get_json(&server.url("/v1/files"), t).0 == 200;
    let refused = |given: &str| {
        let out = server.ferry(&["token", "revoke", given]);
        assert!(!out.status.success(), "{given:?} was taken");
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(said.contains("at least 6"), "{said}");
        assert!(given.len() <= 12 || !said.contains(&given[..13]), "{said}");
    };
    refused(&alice[..5]);
    refused(&format!("{}ZZZZ", &alice[..12]));
    // Characters no token has, after a handle or after the whole token: refused, and
    // the token itself is not shown.
    refused(&format!("{}ZZZZ-not-this-token", &alice[..12]));
    refused(&format!("{alice} "));
    refused(&alice[..13]);
    let mut changed = alice.clone().into_bytes();
    let last = changed.len() - 1;
    changed[last] = if changed[last] == b'a' { b'b' } else { b'a' };
    refused(&String::from_utf8(changed).unwrap());
    assert!(works(&alice) && works(&bob) && works(&carol));

    let revoke = |given: &str| {
        let out = server.ferry(&["token", "revoke", given]);
        assert!(out.status.success(), "{given:?}: {out:?}");
    };
    revoke(&alice);
    assert!(!works(&alice) && works(&bob) && works(&carol));
    revoke(&bob[..7]);
    assert!(!works(&bob) && works(&carol));
    revoke(&carol[..6]);
    assert!(!works(&carol));
    assert!(works(&server.token) || server.token[..6] == carol[..6]);
}

#[test]
fn missing_unknown_and_malformed_tokens_are_401() {
    let server = Server::start();
    let http = client();
    let files = server.url("/v1/files");
    assert_unauthorized(http.get(&files), "no token");
    assert_unauthorized(http.get(&files).bearer_auth("garbage"), "garbage");
    assert_unauthorized(http.get(&files).bearer_auth(""), "empty bearer");
    // A well-formed token that was never issued: right prefix, wrong secret.
    let forged = format!(
        "{}{}",
        &server.token[..12],
        "a".repeat(server.token.len() - 12)
    );
    assert_unauthorized(http.get(&files).bearer_auth(&forged), "forged");
    assert_unauthorized(
        http.get(&files).bearer_auth(format!("{}x", server.token)),
        "token with a suffix",
    );
    assert_unauthorized(
        http.get(&files)
            .header("Authorization", format!("Basic {}", server.token)),
        "basic scheme",
    );
    assert_unauthorized(
        http.get(&files)
            .header("Authorization", server.token.clone()),
        "no scheme",
    );
    // Every /v1 route, not just the listing.
    assert_unauthorized(http.get(server.url("/v1/projects")), "projects");
    assert_unauthorized(
        http.post(server.url("/v1/projects"))
            .json(&json!({"id": "x"})),
        "new project",
    );
    assert_unauthorized(
        http.get(server.url("/v1/files/content?path=public/a.txt")),
        "download",
    );
    assert_unauthorized(
        http.post(server.url("/v1/files/mkdir"))
            .json(&json!({"path": "public/x"})),
        "mkdir",
    );
    assert_unauthorized(
        http.post(server.url("/v1/files/move"))
            .json(&json!({"from": "public/a", "to": "public/b"})),
        "move",
    );
    assert_unauthorized(http.delete(server.url("/v1/files?path=public/a")), "delete");
    assert_unauthorized(
        http.post(server.url("/v1/deliveries"))
            .json(&json!({"url": "http://x/"})),
        "deliver",
    );
    let form = Form::new().part("file", Part::bytes(b"x".to_vec()).file_name("x.txt"));
    assert_unauthorized(http.post(server.url("/v1/media")).multipart(form), "upload");
    assert!(!server.home("me").join("public/x.txt").exists());
    assert!(!server.home("me").join("public/x").exists());
}

// ---------------------------------------------------------------------------------------
// Isolation and projects
// ---------------------------------------------------------------------------------------

#[test]
fn a_person_reaches_only_their_own_workspace_and_projects() {
    let server = Server::start();
    let http = client();
    let alice = server.add_person("alice");
    let alice_harness = server.create_token("alice", "harness");
    assert_eq!(
        upload(&server, &server.token, "mine.txt", b"me only", None).0,
        201
    );
    create_project(&server, &server.token, "secret");
    assert_eq!(
        upload(
            &server,
            &server.token,
            "plan.md",
            b"secret plan",
            Some("secret")
        )
        .0,
        201
    );

    // alice sees her own, empty, public/.
    let (status, listing) = get_json(&server.url("/v1/files"), &alice);
    assert_eq!(status, 200);
    assert_eq!(listed_paths(&listing), vec!["public/attachments"]);
    let (status, body) = get_json(
        &server.url("/v1/files/content?path=public/mine.txt"),
        &alice,
    );
    assert_eq!(status, 404, "{body}");
    let (_, projects) = get_json(&server.url("/v1/projects"), &alice);
    assert_eq!(projects, json!({"projects": []}));

    // me's project and one that exists nowhere answer alike, whatever the route.
    let peer = Peer::start(|_| Reply::ok(b"x".to_vec()));
    let mut answers = Vec::new();
    for project in ["secret", "nothere"] {
        let mut seen = Vec::new();
        seen.push(get_json(
            &server.url(&format!("/v1/files?project={project}")),
            &alice,
        ));
        seen.push(get_json(
            &server.url(&format!(
                "/v1/files/content?path=public/plan.md&project={project}"
            )),
            &alice,
        ));
        seen.push(upload(
            &server,
            &alice,
            "in.txt",
            b"intrusion",
            Some(project),
        ));
        seen.push(post_json(
            &server,
            &alice,
            "/v1/files/mkdir",
            &json!({"path": "public/x", "project": project}),
        ));
        let response = http
            .delete(server.url(&format!("/v1/files?path=public/plan.md&project={project}")))
            .bearer_auth(&alice)
            .send()
            .unwrap();
        seen.push(json_answer(response));
        seen.push(post_json(
            &server,
            &alice_harness,
            "/v1/deliveries",
            &json!({"url": peer.url("/d.pdf"), "project": project}),
        ));
        for (status, body) in &seen {
            assert_eq!(*status, 404, "{project}: {body}");
            assert_error_shape(body, "unknown_project");
        }
        answers.push(
            seen.into_iter()
                .map(|(s, b)| (s, b.to_string().replace(project, "P")))
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(
        answers[0], answers[1],
        "an existing project of someone else must look absent"
    );

    // Nothing of alice's reached me's workspace.
    let project_public = server.home("me").join("projects/secret/public");
    assert_eq!(
        std::fs::read(project_public.join("plan.md")).unwrap(),
        b"secret plan"
    );
    assert!(!project_public.join("in.txt").exists());
    assert!(!project_public.join("x").exists());
    assert!(!project_public.join("attachments/d.pdf").exists());
    // alice may have a project by the same id: ids are per person.
    create_project(&server, &alice, "secret");
    let (status, listing) = get_json(&server.url("/v1/files?project=secret"), &alice);
    assert_eq!(status, 200);
    assert_eq!(listed_paths(&listing), vec!["public/attachments"]);
}

#[test]
fn project_add_from_the_cli_is_listed_by_the_api() {
    let server = Server::start();
    let alice = server.add_person("alice");
    let out = server.ferry(&["project", "add", "alice", "q2"]);
    assert!(out.status.success(), "{out:?}");

    let (status, body) = get_json(&server.url("/v1/projects"), &alice);
    assert_eq!(status, 200);
    let projects = body["projects"].as_array().unwrap();
    assert_eq!(projects.len(), 1, "{body}");
    assert_eq!(projects[0]["id"], "q2");
    // Made by id: shown by its id (M-DAILY display names).
    assert_eq!(projects[0]["name"], "q2");
    assert_eq!(projects[0].as_object().unwrap().len(), 3, "{body}");
    let created = projects[0]["created"].as_str().unwrap();
    assert!(is_rfc3339(created), "{created}");
    assert!(
        server
            .home("alice")
            .join("projects/q2/public/attachments")
            .is_dir()
    );
    // Not me's.
    let (_, mine) = get_json(&server.url("/v1/projects"), &server.token);
    assert_eq!(mine, json!({"projects": []}));

    // The CLI refuses bad input like the API.
    for (args, needle) in [
        (&["project", "add", "alice", "Q2"][..], "invalid"),
        (&["project", "add", "alice", "q2"][..], "q2"),
        (&["project", "add", "nobody", "q3"][..], "nobody"),
    ] {
        let out = server.ferry(args);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{args:?}: {out:?}"
        );
    }
}

#[test]
fn project_create_by_api_validates_ids() {
    let server = Server::start();
    let create = |id: &str| post_json(&server, &server.token, "/v1/projects", &json!({ "id": id }));
    let (status, body) = create("q2-report");
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["id"], "q2-report");
    assert!(is_rfc3339(body["created"].as_str().unwrap()), "{body}");

    for bad in ["Q2", "a/b", "../x", "", &"p".repeat(23), "-x"] {
        let (status, body) = create(bad);
        assert_eq!(status, 400, "{bad:?}: {body}");
        assert_error_shape(&body, "invalid_id");
    }
    let (status, body) = create("q2-report");
    assert_eq!(status, 409, "{body}");
    assert_error_shape(&body, "exists");

    let (_, list) = get_json(&server.url("/v1/projects"), &server.token);
    let ids: Vec<_> = list["projects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].clone())
        .collect();
    assert_eq!(ids, vec![json!("q2-report")]);
    let projects: Vec<_> = std::fs::read_dir(server.home("me").join("projects"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(projects, vec!["q2-report"]);
}

// ---------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------

#[test]
fn print_config_shows_the_defaults() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("site");
    let out = ferry_on(&data, &["serve", "--print-config"]);
    assert!(out.status.success(), "{}", out.both());
    let printed = &out.stdout;
    assert_eq!(
        config_value(printed, "media", "max_upload_bytes").as_deref(),
        Some("10485760")
    );
    assert_eq!(
        config_value(printed, "deliveries", "max_bytes").as_deref(),
        Some("67108864")
    );
    assert_eq!(
        config_value(printed, "deliveries", "timeout_secs").as_deref(),
        Some("60")
    );
    assert_eq!(
        config_value(printed, "site", "mode").as_deref(),
        Some("\"local\"")
    );
    // Loopback by default, so a bare start exposes nothing.
    assert!(
        config_value(printed, "server", "listen").is_some_and(|l| l.starts_with("\"127.0.0.1:")),
        "{printed}"
    );
    // Printing is all it does: no site is created.
    assert!(!data.exists());
}

#[test]
fn config_file_in_the_data_dir_and_env_overrides() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("site");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(
        data.join("ferry.toml"),
        "[media]\nmax_upload_bytes = 4096\n[deliveries]\ntimeout_secs = 7\n",
    )
    .unwrap();

    let out = ferry_on(&data, &["serve", "--print-config"]);
    assert!(out.status.success(), "{}", out.both());
    assert_eq!(
        config_value(&out.stdout, "media", "max_upload_bytes").as_deref(),
        Some("4096")
    );
    assert_eq!(
        config_value(&out.stdout, "deliveries", "timeout_secs").as_deref(),
        Some("7")
    );
    assert_eq!(
        config_value(&out.stdout, "deliveries", "max_bytes").as_deref(),
        Some("67108864")
    );

    let mut cmd = ferry_command();
    cmd.args(["serve", "--print-config", "--data"])
        .arg(&data)
        .env("FERRY_MEDIA__MAX_UPLOAD_BYTES", "123");
    let out = finish(cmd);
    assert!(out.status.success(), "{}", out.both());
    assert_eq!(
        config_value(&out.stdout, "media", "max_upload_bytes").as_deref(),
        Some("123")
    );
    // The rest of the file still applies.
    assert_eq!(
        config_value(&out.stdout, "deliveries", "timeout_secs").as_deref(),
        Some("7")
    );
}

#[test]
fn served_limits_follow_the_file_and_the_environment() {
    // The file's limit is enforced by a running server...
    let server = Server::start_with(Options {
        config_toml: Some("[media]\nmax_upload_bytes = 4096\n".into()),
        ..Options::default()
    });
    assert_eq!(
        upload(&server, &server.token, "ok.txt", &[b'a'; 4096], None).0,
        201
    );
    let (status, body) = upload(&server, &server.token, "big.txt", &[b'a'; 4097], None);
    assert_eq!(status, 413, "{body}");
    drop(server);

    // ...and the environment overrides the file.
    let server = Server::start_with(Options {
        config_toml: Some("[media]\nmax_upload_bytes = 4096\n".into()),
        env: vec![("FERRY_MEDIA__MAX_UPLOAD_BYTES".into(), "123".into())],
        ..Options::default()
    });
    assert_eq!(
        upload(&server, &server.token, "ok.txt", &[b'a'; 123], None).0,
        201
    );
    let (status, body) = upload(&server, &server.token, "big.txt", &[b'a'; 124], None);
    assert_eq!(status, 413, "{body}");
}

#[test]
fn explicit_config_file_is_honoured() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("site");
    std::fs::create_dir_all(&data).unwrap();
    // The data dir's own file is ignored when --config names another.
    std::fs::write(
        data.join("ferry.toml"),
        "[media]\nmax_upload_bytes = 4096\n",
    )
    .unwrap();
    let file = tmp.path().join("elsewhere.toml");
    std::fs::write(
        &file,
        "[media]\nmax_upload_bytes = 2000\n[deliveries]\nmax_bytes = 5\n",
    )
    .unwrap();
    let file_arg = file.to_str().unwrap();

    let out = ferry_on(&data, &["serve", "--print-config", "--config", file_arg]);
    assert!(out.status.success(), "{}", out.both());
    assert_eq!(
        config_value(&out.stdout, "media", "max_upload_bytes").as_deref(),
        Some("2000")
    );
    assert_eq!(
        config_value(&out.stdout, "deliveries", "max_bytes").as_deref(),
        Some("5")
    );

    // And a server started with it enforces it.
    let gateway = Gateway::start(
        &data,
        &["--listen", "127.0.0.1:0", "--config", file_arg],
        &[],
        1,
    );
    let token = gateway.lines[0]
        .split_once("/#token=")
        .unwrap()
        .1
        .to_owned();
    let form = Form::new().part("file", Part::bytes(vec![b'a'; 2001]).file_name("big.txt"));
    let response = client()
        .post(format!("{}/v1/media", gateway.base()))
        .bearer_auth(&token)
        .multipart(form)
        .send()
        .unwrap();
    assert_eq!(response.status(), 413);

    // A --config file that does not exist is an error naming it.
    let out = ferry_on(
        &data,
        &[
            "serve",
            "--print-config",
            "--config",
            "/nonexistent/ferry.toml",
        ],
    );
    assert!(!out.status.success());
    assert!(
        out.stderr.contains("/nonexistent/ferry.toml"),
        "{}",
        out.stderr
    );
}

#[test]
fn unknown_settings_stop_serve_with_a_message_naming_them() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("site");
    std::fs::create_dir_all(&data).unwrap();

    std::fs::write(data.join("ferry.toml"), "[media]\nmax_upload_byte = 1\n").unwrap();
    let out = ferry_on(&data, &["serve", "--listen", "127.0.0.1:0"]);
    assert!(!out.status.success());
    assert!(out.stderr.contains("max_upload_byte"), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);

    std::fs::write(data.join("ferry.toml"), "[medias]\nmax_upload_bytes = 1\n").unwrap();
    let out = ferry_on(&data, &["serve", "--listen", "127.0.0.1:0"]);
    assert!(!out.status.success());
    assert!(out.stderr.contains("medias"), "{}", out.stderr);

    std::fs::remove_file(data.join("ferry.toml")).unwrap();
    for var in ["FERRY_X__Y", "FERRY_MEDIA__MAX_UPLOAD"] {
        let mut cmd = ferry_command();
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--data"])
            .arg(&data)
            .env(var, "1");
        let out = finish(cmd);
        assert!(!out.status.success(), "{var} was accepted");
        assert!(out.stderr.contains(var), "{var}: {}", out.stderr);
    }
    // A wrong type names the variable too.
    let mut cmd = ferry_command();
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(&data)
        .env("FERRY_DELIVERIES__TIMEOUT_SECS", "soon");
    let out = finish(cmd);
    assert!(!out.status.success());
    assert!(
        out.stderr.contains("FERRY_DELIVERIES__TIMEOUT_SECS"),
        "{}",
        out.stderr
    );
    // None of these started a site.
    assert!(!data.join("home").exists());
}

#[test]
fn listen_flag_is_honoured() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("site");
    std::fs::create_dir_all(&data).unwrap();
    // The file asks for a port no test can bind; --listen wins.
    std::fs::write(
        data.join("ferry.toml"),
        "[server]\nlisten = \"127.0.0.1:1\"\n",
    )
    .unwrap();

    let out = ferry_on(
        &data,
        &["serve", "--print-config", "--listen", "127.0.0.1:4567"],
    );
    assert_eq!(
        config_value(&out.stdout, "server", "listen").as_deref(),
        Some("\"127.0.0.1:4567\"")
    );

    // A port picked free just before; the kernel does not hand it out again at once.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let gateway = Gateway::start(&data, &["--listen", &listen], &[], 1);
    assert!(
        gateway.lines[0].starts_with(&format!("http://{listen}/#token=")),
        "{:?}",
        gateway.lines
    );
    let health = client()
        .get(format!("http://{listen}/healthz"))
        .send()
        .unwrap();
    assert_eq!(health.status(), 200);
    drop(gateway);

    // An address that cannot be bound is an error naming it.
    let mut cmd = ferry_command();
    cmd.args(["serve", "--data"])
        .arg(&data)
        .args(["--listen", "not-an-address"]);
    let out = finish(cmd);
    assert!(!out.status.success());
    assert!(out.stderr.contains("not-an-address"), "{}", out.stderr);
}

// ---------------------------------------------------------------------------------------
// M-DOCS
// ---------------------------------------------------------------------------------------

#[test]
fn file_delivery_md_is_provisioned_read_only_for_everyone() {
    let server = Server::start();
    let shipped = std::fs::read(repo_root().join("docs/agent/FILE_DELIVERY.md")).unwrap();
    server.add_person("alice");
    for person in ["me", "alice"] {
        let doc = server.home(person).join("memory/FILE_DELIVERY.md");
        let meta = std::fs::symlink_metadata(&doc).unwrap_or_else(|e| panic!("{person}: {e}"));
        assert!(meta.is_file(), "{person}");
        assert_eq!(meta.permissions().mode() & 0o777, 0o444, "{person}");
        assert_eq!(std::fs::read(&doc).unwrap(), shipped, "{person}");
    }
    // It is the agent's to read, not the member's to see.
    let (_, listing) = get_json(&server.url("/v1/files"), &server.token);
    assert!(
        listed_paths(&listing)
            .iter()
            .all(|p| !p.contains("FILE_DELIVERY"))
    );
}

#[test]
fn docs_check_passes_the_shipped_documents() {
    let mut cmd = ferry_command();
    cmd.args(["docs", "check"])
        .arg(repo_root().join("docs/agent"));
    let out = finish(cmd);
    assert!(out.status.success(), "{}", out.both());
    assert!(out.stdout.contains("no violations"), "{}", out.stdout);
}

#[test]
fn docs_check_reports_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let check = |dir: &Path| {
        let mut cmd = ferry_command();
        cmd.args(["docs", "check"]).arg(dir);
        finish(cmd)
    };

    // A write pointed at uploads/.
    let dir = tmp.path().join("writes");
    std::fs::create_dir_all(dir.join("skills/report")).unwrap();
    let bad = dir.join("skills/report/SKILL.md");
    std::fs::write(
        &bad,
        "# Report\nDeliver into public/attachments/.\nSave the report to uploads/report.pdf\n",
    )
    .unwrap();
    std::fs::write(dir.join("GOOD.md"), "Deliver into public/attachments/.\n").unwrap();
    let out = check(&dir);
    assert!(!out.status.success(), "{}", out.both());
    let report = out.both();
    assert!(
        report.contains(&format!("{}:3:", bad.display())),
        "{report}"
    );
    assert!(!report.contains("GOOD.md"), "{report}");

    // A document that never names public/attachments.
    let dir = tmp.path().join("silent");
    std::fs::create_dir_all(&dir).unwrap();
    let silent = dir.join("NOTES.md");
    std::fs::write(&silent, "# Notes\nKeep your files tidy.\n").unwrap();
    let out = check(&dir);
    assert!(!out.status.success(), "{}", out.both());
    let report = out.both();
    assert!(report.contains(&silent.display().to_string()), "{report}");
    assert!(report.contains("public/attachments"), "{report}");

    // A prohibition is not a violation.
    let dir = tmp.path().join("fine");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("OK.md"),
        "Deliver into public/attachments/.\nNever create an uploads/ folder.\n",
    )
    .unwrap();
    let out = check(&dir);
    assert!(out.status.success(), "{}", out.both());

    // A directory that does not exist is an error, not a pass.
    let out = check(&tmp.path().join("absent"));
    assert!(!out.status.success());
}

/// `ferry serve` says which folder it serves and whether it made it; each request is
/// logged once at INFO when its answer is done (never a token or a query string); the
/// libraries' own INFO lines stay out; no colour codes go to a log that is not a tty.
#[test]
fn serve_says_where_it_serves_and_logs_each_request_once() {
    let mut server = Server::start();
    let data = server.data.canonicalize().unwrap();
    assert_eq!(
        server.next_line(),
        format!("created the site at {}", data.display())
    );
    let client = support::client();
    let listed = client
        .get(server.url("/v1/files?project=secret-query-value"))
        .bearer_auth(&server.token)
        .send()
        .unwrap();
    assert_eq!(listed.status(), 404, "an unknown project");
    let form = Form::new().part("file", Part::bytes(b"hello".to_vec()).file_name("a.txt"));
    let uploaded = client
        .post(server.url("/v1/media"))
        .bearer_auth(&server.token)
        .multipart(form)
        .send()
        .unwrap();
    assert_eq!(uploaded.status(), 201);
    let body = client
        .get(server.url("/v1/files/content?path=public/a.txt"))
        .bearer_auth(&server.token)
        .send()
        .unwrap()
        .bytes()
        .unwrap();
    assert_eq!(&body[..], b"hello");
    let harness =
        support::last_line(&server.ferry(&["token", "create", "me", "--kind", "harness"]));
    let out = support::mcp::drive(&json!({
        "server": support::mcp::http(&server.url("/mcp"), &harness),
        "steps": [support::mcp::list_tools()],
        "timeout_secs": 30,
    }));
    assert!(out["results"][0].is_array(), "{out}");

    let wanted = [
        "GET /v1/files 404 ",
        "POST /v1/media 201 ",
        "GET /v1/files/content 200 5 B ",
        "POST /mcp 202 0 B ",
        "DELETE /mcp ",
    ];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut log = server.log();
    while !wanted.iter().all(|w| log.contains(w)) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        log = server.log();
    }
    for w in wanted {
        assert_eq!(
            log.lines().filter(|l| l.contains(w)).count(),
            1,
            "one line with {w:?}:\n{log}"
        );
    }
    assert!(!log.contains("cut off"), "{log}");
    for secret in [
        server.token.as_str(),
        harness.as_str(),
        "secret-query-value",
        "\u{1b}[",
    ] {
        assert!(!log.contains(secret), "{secret:?} is in the log:\n{log}");
    }
    assert!(
        !log.lines()
            .any(|l| l.contains("INFO") && l.contains("rmcp")),
        "a library's INFO line:\n{log}"
    );

    server.restart();
    assert!(server.next_line().contains("ferry token create"));
    assert_eq!(
        server.next_line(),
        format!("opened the site at {}", data.display())
    );
}
