//! The member API in host mode (spec members.md over tools.md T-ID): a gateway that runs
//! as `ferry`, which cannot read people's folders, serves every member route through the
//! person's own worker, and everything it makes belongs to the person.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::blocking::multipart::{Form, Part};
use serde_json::{Value, json};

use crate::host_support::{gid_of, owner_mode, run_as, run_ok, tool_path, uid_of};
use crate::support::{self, assert_error, client, json_answer, listed_paths};

/// A gateway running as the service user `ferry` on a host-mode site; stopped on drop.
pub struct HostGateway {
    child: Child,
    _stdout: BufReader<ChildStdout>,
    pub base: String,
    /// Where the gateway's stderr (its log) goes.
    pub log: PathBuf,
}

impl HostGateway {
    /// Starts `ferry serve` as `ferry` (the binary at `ferry`, which that user can run) on
    /// `data`, logging to `log`.
    pub fn start(ferry: &Path, data: &Path, log: &Path, env: &[(&str, &str)]) -> HostGateway {
        let stderr = std::fs::File::create(log).unwrap();
        let mut child = Command::new(tool_path("setpriv"))
            .args(["--reuid=ferry", "--regid=ferry", "--init-groups", "--"])
            .arg(ferry)
            .arg("serve")
            .arg("--data")
            .arg(data)
            .args(["--listen", "127.0.0.1:0"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .envs(env.iter().copied())
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("ferry serve starts as ferry");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let base = line.trim().split("/#token=").next().unwrap();
        assert!(
            base.starts_with("http://127.0.0.1:"),
            "ferry serve printed {line:?}; log: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        HostGateway {
            child,
            _stdout: stdout,
            base: base.trim_end_matches('/').to_owned(),
            log: log.to_path_buf(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The gateway's pid (`setpriv` execs it in place).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `steps` in one MCP session over `/mcp` with `token`; their results.
    pub fn mcp(&self, token: &str, steps: Vec<Value>) -> Vec<Value> {
        let out = support::mcp::drive(&json!({
            "server": support::mcp::http(&self.url("/mcp"), token),
            "elicitation": null,
            "steps": steps,
            "timeout_secs": 90,
        }));
        out["results"].as_array().cloned().unwrap_or_default()
    }

    /// `POST /v1/media` of `name` holding `bytes`, the `project` field before or after it.
    pub fn upload(
        &self,
        token: &str,
        name: &str,
        bytes: &[u8],
        project: Option<(&str, FieldOrder)>,
    ) -> (u16, Value) {
        let file = || Part::bytes(bytes.to_vec()).file_name(name.to_owned());
        let form = match project {
            None => Form::new().part("file", file()),
            Some((p, FieldOrder::ProjectFirst)) => Form::new()
                .text("project", p.to_owned())
                .part("file", file()),
            Some((p, FieldOrder::FileFirst)) => Form::new()
                .part("file", file())
                .text("project", p.to_owned()),
        };
        let request = client().post(self.url("/v1/media")).bearer_auth(token);
        json_answer(request.multipart(form).send().unwrap())
    }

    pub fn post(&self, token: &str, path: &str, body: &Value) -> (u16, Value) {
        let request = client().post(self.url(path)).bearer_auth(token).json(body);
        json_answer(request.send().unwrap())
    }

    pub fn list(&self, token: &str, project: Option<&str>) -> (u16, Value) {
        let mut request = client().get(self.url("/v1/files")).bearer_auth(token);
        if let Some(project) = project {
            request = request.query(&[("project", project)]);
        }
        json_answer(request.send().unwrap())
    }

    pub fn download(&self, token: &str, path: &str, range: Option<&str>) -> (u16, Vec<u8>) {
        let mut request = client()
            .get(self.url("/v1/files/content"))
            .query(&[("path", path)])
            .bearer_auth(token);
        if let Some(range) = range {
            request = request.header("Range", range);
        }
        let response = request.send().unwrap();
        (
            response.status().as_u16(),
            response.bytes().unwrap().to_vec(),
        )
    }

    pub fn delete(&self, token: &str, path: &str) -> u16 {
        client()
            .delete(self.url("/v1/files"))
            .query(&[("path", path)])
            .bearer_auth(token)
            .send()
            .unwrap()
            .status()
            .as_u16()
    }
}

impl Drop for HostGateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where the `project` form field goes relative to the file.
#[derive(Clone, Copy, Debug)]
pub enum FieldOrder {
    ProjectFirst,
    FileFirst,
}

/// Who owns `path` (uid, gid), and its mode.
pub fn owned_by(path: &Path, user: &str) {
    let (uid, gid, _) = owner_mode(path);
    assert_eq!(
        (uid, gid),
        (uid_of(user), gid_of(user)),
        "{} must belong to {user}",
        path.display()
    );
}

/// Every temporary left anywhere beneath `dir`.
pub fn temporaries_beneath(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with(".ferry-tmp-")
            {
                found.push(path.clone());
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            }
        }
    }
    found
}

/// The service user cannot read `path` (a folder or a file).
fn service_cannot_read(path: &Path) {
    let out = run_as("ferry", Path::new("/bin/ls"), &[path.to_str().unwrap()]);
    assert!(
        !out.status.success(),
        "ferry can list {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stdout)
    );
    let out = run_as("ferry", Path::new("/bin/cat"), &[path.to_str().unwrap()]);
    assert!(!out.status.success(), "ferry can read {}", path.display());
}

/// The site the member API is tried on, with the person's shell at hand.
pub struct MemberSite<'a> {
    pub data: &'a Path,
    pub person: &'a str,
    pub user: &'a str,
    pub token: &'a str,
    pub harness: &'a str,
    /// Runs `sh -c` as a person; whether it succeeded.
    pub sh: &'a dyn Fn(&str, &str) -> bool,
}

impl MemberSite<'_> {
    fn home(&self) -> PathBuf {
        self.data.join("home").join(self.person)
    }
}

/// Every member route, as the person, with ownership and the service's blindness checked.
pub fn every_route_acts_as_the_person(gw: &HostGateway, site: &MemberSite) {
    let home = site.home();
    let token = site.token;

    // Uploads: the main workspace, then a project with the field before and after the file.
    let (status, body) = gw.upload(token, "hello.txt", b"hello, host\n", None);
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["path"], "public/hello.txt");
    assert_eq!(body["sha256"], support::sha256_hex(b"hello, host\n"));
    let uploaded = home.join("public/hello.txt");
    owned_by(&uploaded, site.user);
    owned_by(&home.join("public"), site.user);
    service_cannot_read(&uploaded);
    service_cannot_read(&home.join("public"));

    let (status, body) = gw.post(token, "/v1/projects", &json!({"id": "hp1"}));
    assert_eq!(status, 201, "{body}");
    let project_public = home.join("projects/hp1/public");
    owned_by(&project_public, site.user);
    owned_by(&project_public.join("attachments"), site.user);
    for order in [FieldOrder::ProjectFirst, FieldOrder::FileFirst] {
        let name = format!("{order:?}.txt");
        let (status, body) = gw.upload(token, &name, b"in a project", Some(("hp1", order)));
        assert_eq!(status, 201, "{order:?}: {body}");
        assert_eq!(body["project"], "hp1");
        owned_by(&project_public.join(&name), site.user);
        assert!(!home.join("public").join(&name).exists(), "{order:?}");
    }
    // Into a folder (M-DAILY), in either order, in the main workspace and in a project
    // made from a display name: placed by the person's worker, owned by the person.
    let (status, body) = gw.post(token, "/v1/projects", &json!({"name": "Host Named"}));
    assert_eq!((status, &body["id"]), (201, &json!("host-named")), "{body}");
    for project in [None, Some("host-named")] {
        let mkdir = match project {
            Some(p) => json!({"path": "public/Reports 2026", "project": p}),
            None => json!({"path": "public/Reports 2026"}),
        };
        let (status, body) = gw.post(token, "/v1/files/mkdir", &mkdir);
        assert_eq!(status, 201, "{body}");
        for folder_first in [true, false] {
            let name = format!("in-folder-{folder_first}.txt");
            let file = || Part::bytes(b"in a folder".to_vec()).file_name(name.clone());
            let mut form = Form::new();
            if let Some(p) = project {
                form = form.text("project", p.to_owned());
            }
            form = match folder_first {
                true => form
                    .text("folder", "public/Reports 2026")
                    .part("file", file()),
                false => form
                    .part("file", file())
                    .text("folder", "public/Reports 2026"),
            };
            let request = client().post(gw.url("/v1/media")).bearer_auth(token);
            let (status, body) = json_answer(request.multipart(form).send().unwrap());
            assert_eq!(status, 201, "{project:?} {folder_first}: {body}");
            assert_eq!(body["path"], format!("public/Reports 2026/{name}"));
            let base = match project {
                Some(p) => home.join("projects").join(p).join("public"),
                None => home.join("public"),
            };
            let placed = base.join("Reports 2026").join(&name);
            assert_eq!(std::fs::read(&placed).unwrap(), b"in a folder");
            owned_by(&placed, site.user);
            service_cannot_read(&placed);
        }
    }
    let form = Form::new()
        .text("folder", "public/attachments")
        .part("file", Part::bytes(b"no".to_vec()).file_name("no.txt"));
    let request = client().post(gw.url("/v1/media")).bearer_auth(token);
    let (status, body) = json_answer(request.multipart(form).send().unwrap());
    assert_error(status, &body, 403, "managed_by_system");

    let (status, body) = gw.upload(token, "x.txt", b"x", Some(("nope", FieldOrder::FileFirst)));
    assert_error(status, &body, 404, "unknown_project");
    assert!(
        temporaries_beneath(&home).is_empty(),
        "{:?}",
        temporaries_beneath(&home)
    );

    // The listing, and a download with a range.
    let (status, listing) = gw.list(token, None);
    assert_eq!(status, 200, "{listing}");
    let paths = listed_paths(&listing);
    assert!(paths.contains(&"public/hello.txt".to_owned()), "{paths:?}");
    assert!(
        paths.contains(&"public/attachments".to_owned()),
        "{paths:?}"
    );
    let (status, listing) = gw.list(token, Some("hp1"));
    assert_eq!(status, 200, "{listing}");
    assert!(listed_paths(&listing).contains(&"public/FileFirst.txt".to_owned()));
    assert_eq!(
        gw.download(token, "public/hello.txt", None),
        (200, b"hello, host\n".to_vec())
    );
    assert_eq!(
        gw.download(token, "public/hello.txt", Some("bytes=7-10")),
        (206, b"host".to_vec())
    );
    assert_eq!(
        gw.download(token, "public/hello.txt", Some("bytes=99-")).0,
        416
    );
    // A preview opens the file the service cannot read: through the person's worker.
    let (status, body) =
        support::get_json(&gw.url("/v1/files/preview?path=public%2Fhello.txt"), token);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["kind"], &body["text"]),
        (&json!("text"), &json!("hello, host\n"))
    );
    assert_eq!(body["sha256"], support::sha256_hex(b"hello, host\n"));

    // A share link: the file opened by the person's worker, no token needed.
    let (status, share) = gw.post(
        token,
        "/v1/shares",
        &json!({"path": "public/hello.txt", "expiresInSecs": 60}),
    );
    assert_eq!(status, 201, "{share}");
    let shared = support::client()
        .get(gw.url(share["url"].as_str().unwrap()))
        .send()
        .unwrap();
    assert_eq!(shared.status().as_u16(), 200);
    assert_eq!(shared.bytes().unwrap().as_ref(), b"hello, host\n");

    // mkdir, move and delete.
    let (status, body) = gw.post(token, "/v1/files/mkdir", &json!({"path": "public/d/e"}));
    assert_eq!(
        (status, &body["path"]),
        (201, &json!("public/d/e")),
        "{body}"
    );
    owned_by(&home.join("public/d"), site.user);
    owned_by(&home.join("public/d/e"), site.user);
    let (status, body) = gw.post(
        token,
        "/v1/files/move",
        &json!({"from": "public/hello.txt", "to": "public/d/e/moved.txt"}),
    );
    assert_eq!(status, 200, "{body}");
    owned_by(&home.join("public/d/e/moved.txt"), site.user);
    assert_eq!(gw.delete(token, "public/d"), 204);
    assert!(!home.join("public/d").exists());
    // The delete went into the person's trash as the person, and comes back the same way.
    let trash = site.data.join("private/trash").join(site.person);
    owned_by(&trash, site.user);
    let (status, listed) = support::get_json(&gw.url("/v1/trash"), token);
    assert_eq!(status, 200, "{listed}");
    let id = listed["entries"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(listed["entries"][0]["path"], "public/d");
    owned_by(&trash.join(&id), site.user);
    service_cannot_read(&trash.join(&id));
    let (status, body) = gw.post(token, &format!("/v1/trash/{id}/restore"), &json!({}));
    assert_eq!((status, &body["path"]), (200, &json!("public/d")), "{body}");
    owned_by(&home.join("public/d/e/moved.txt"), site.user);
    assert_eq!(gw.delete(token, "public/d"), 204);
    let (status, listed) = support::get_json(&gw.url("/v1/trash"), token);
    assert_eq!(status, 200, "{listed}");
    let id = listed["entries"][0]["id"].as_str().unwrap().to_owned();
    let gone = support::client()
        .delete(gw.url(&format!("/v1/trash/{id}")))
        .bearer_auth(token)
        .send()
        .unwrap();
    assert_eq!(gone.status().as_u16(), 204);
    assert!(!trash.join(&id).exists());
    let (status, body) = gw.post(
        token,
        "/v1/files/mkdir",
        &json!({"path": "public/attachments"}),
    );
    assert_error(status, &body, 403, "managed_by_system");

    // A delivery from a URL lands in attachments/ as the person.
    let peer = support::Peer::start(|_| support::Reply::ok(b"delivered bytes".to_vec()));
    let (status, body) = gw.post(
        site.harness,
        "/v1/deliveries",
        &json!({"url": peer.url("/report.pdf")}),
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["path"], "public/attachments/report.pdf");
    owned_by(&home.join("public/attachments/report.pdf"), site.user);
    assert_eq!(
        std::fs::read(home.join("public/attachments/report.pdf")).unwrap(),
        b"delivered bytes"
    );

    // The legacy uploads/ folder, made by the person, is migrated as the person.
    assert!((site.sh)(
        site.person,
        &format!(
            "mkdir -p {0}/projects/hp1/uploads && echo old > {0}/projects/hp1/uploads/old.txt",
            home.display()
        )
    ));
    let (status, listing) = gw.list(token, Some("hp1"));
    assert_eq!(status, 200, "{listing}");
    assert!(listed_paths(&listing).contains(&"public/old.txt".to_owned()));
    assert!(!home.join("projects/hp1/uploads").exists());
    owned_by(&project_public.join("old.txt"), site.user);

    assert!(
        temporaries_beneath(&home).is_empty(),
        "{:?}",
        temporaries_beneath(&home)
    );
}

/// Live events: the attachments poller reads the person's folder as the person.
pub fn events_come_through_the_worker(gw: &HostGateway, site: &MemberSite) {
    let response = client()
        .get(gw.url("/v1/events"))
        .bearer_auth(site.token)
        .timeout(Duration::from_secs(30))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let mut events = support::SseStream::new(response);
    // The first state is read before the stream answers; a file written now is news.
    std::thread::sleep(Duration::from_millis(500));
    let file = site.home().join("public/attachments/agent-made.txt");
    assert!((site.sh)(
        site.person,
        &format!("echo made > {}", file.display())
    ));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no files event for the agent's file");
        let Some(event) = events.next(left) else {
            continue;
        };
        if event.event == "files" && event.data.contains("public/attachments/agent-made.txt") {
            break;
        }
    }
}

/// A fake upstream agent that, while it answers, writes a file into the person's
/// `public/attachments/` as the person (as an agent's tool would), then answers one
/// JSON completion.
pub fn start_agent(attachments: PathBuf, user: &'static str) -> support::Peer {
    support::Peer::start(move |_| {
        let file = attachments.join("from-chat.txt");
        let made = run_as(
            user,
            Path::new("/bin/sh"),
            &["-c", &format!("echo reply > {}", file.display())],
        );
        assert!(made.status.success());
        let body = json!({
            "id": "chatcmpl-host",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Done."}, "finish_reason": "stop"}],
        });
        support::Reply::ok(body.to_string()).header("Content-Type", "application/json")
    })
}

/// Chat in host mode: the attachments are checked as the person, and the file the agent
/// wrote during the turn is announced after it (the before and after states are read by
/// the person's worker).
pub fn chat_notices_come_through_the_worker(gw: &HostGateway, site: &MemberSite) {
    let (status, body) = gw.upload(site.token, "context.txt", b"context", None);
    assert_eq!(status, 201, "{body}");
    let reply = client()
        .post(gw.url("/v1/chat"))
        .bearer_auth(site.token)
        .json(&json!({"message": "Make me a file.", "attachments": ["public/context.txt"]}))
        .send()
        .unwrap();
    assert_eq!(reply.status().as_u16(), 200);
    let text = reply.text().unwrap();
    assert!(
        text.contains("📎 from-chat.txt — public/attachments/from-chat.txt"),
        "{text}"
    );
    // An attachment the member cannot see is refused before the agent is asked.
    let refused = client()
        .post(gw.url("/v1/chat"))
        .bearer_auth(site.token)
        .json(&json!({"message": "x", "attachments": ["public/missing.txt"]}))
        .send()
        .unwrap();
    let (status, body) = json_answer(refused);
    assert_error(status, &body, 404, "not_found");
}

/// The person's agent plants links in `public/`: to another person's home, to
/// `/etc/shadow`, and at the parent folder. The member API gives nothing through them
/// that the person could not reach at a shell, and writes nothing through them.
pub fn planted_links_give_nothing(gw: &HostGateway, site: &MemberSite, other_home: &Path) {
    let public = site.home().join("public");
    let links = [
        ("to-other", other_home.to_path_buf()),
        ("shadow.txt", PathBuf::from("/etc/shadow")),
        ("up", PathBuf::from("..")),
    ];
    for (name, target) in &links {
        assert!((site.sh)(
            site.person,
            &format!(
                "ln -sfn {} {}",
                target.display(),
                public.join(name).display()
            )
        ));
    }
    let shadow_before = std::fs::read("/etc/shadow").unwrap();
    let token = site.token;

    // The listing shows links as links, never what they lead to.
    let (status, listing) = gw.list(token, None);
    assert_eq!(status, 200, "{listing}");
    for (name, _) in &links {
        let entry = support::flatten_entries(&listing["entries"])
            .into_iter()
            .find(|e| e["name"] == *name)
            .unwrap_or_else(|| panic!("{name} is not listed: {listing}"));
        assert_eq!(entry["type"], "link", "{entry}");
        assert!(entry.get("children").is_none(), "{entry}");
    }
    let paths = listed_paths(&listing);
    assert!(
        !paths.iter().any(|p| p.starts_with("public/up/")),
        "{paths:?}"
    );
    assert!(
        !paths.iter().any(|p| p.starts_with("public/to-other/")),
        "{paths:?}"
    );

    // Downloads, uploads, moves and mkdir through each link are refused.
    let cases: Vec<(&str, Attempt)> = vec![
        (
            "download shadow",
            Box::new(|| gw.download(token, "public/shadow.txt", None).0),
        ),
        (
            "download other",
            Box::new(|| gw.download(token, "public/to-other/public/b.txt", None).0),
        ),
        (
            "download parent",
            Box::new(|| {
                gw.download(token, "public/up/public/attachments/report.pdf", None)
                    .0
            }),
        ),
        (
            "upload over shadow",
            Box::new(|| gw.upload(token, "shadow.txt", b"owned", None).0),
        ),
        (
            "move out of other",
            Box::new(|| {
                gw.post(
                    token,
                    "/v1/files/move",
                    &json!({"from": "public/to-other/public/b.txt", "to": "public/stolen.txt"}),
                )
                .0
            }),
        ),
        (
            "move into parent",
            Box::new(|| {
                gw.post(token, "/v1/files/move", &json!({"from": "public/attachments/report.pdf", "to": "public/up/escaped.pdf"})).0
            }),
        ),
        (
            "mkdir in other",
            Box::new(|| {
                gw.post(
                    token,
                    "/v1/files/mkdir",
                    &json!({"path": "public/to-other/new"}),
                )
                .0
            }),
        ),
        (
            "delete in other",
            Box::new(|| gw.delete(token, "public/to-other/public/b.txt")),
        ),
    ];
    for (what, case) in cases {
        let status = case();
        assert!(
            (400..500).contains(&status),
            "{what}: answered {status}, not a refusal"
        );
    }
    assert_eq!(std::fs::read("/etc/shadow").unwrap(), shadow_before);
    assert!(!public.join("stolen.txt").exists());
    assert!(!site.home().join("escaped.pdf").exists());
    assert!(other_home.join("public/b.txt").exists());

    // Moving or deleting the link itself is what the person may do at a shell.
    assert_eq!(gw.delete(token, "public/shadow.txt"), 204);
    assert!(std::fs::metadata("/etc/shadow").is_ok());
    for (name, _) in &links[..] {
        let _ = std::fs::remove_file(public.join(name));
    }
}

/// One request through a planted link: its status.
type Attempt<'a> = Box<dyn Fn() -> u16 + 'a>;

/// A `public/` that is itself a link is refused as `path_escapes`, not followed.
pub fn a_linked_public_is_refused(gw: &HostGateway, site: &MemberSite, other_home: &Path) {
    let public = site.home().join("public");
    let aside = site.home().join("public-aside");
    assert!((site.sh)(
        site.person,
        &format!(
            "mv {0} {1} && ln -s {2}/public {0}",
            public.display(),
            aside.display(),
            other_home.display()
        )
    ));
    let (status, body) = gw.list(site.token, None);
    assert_error(status, &body, 400, "path_escapes");
    let (status, body) = gw.upload(site.token, "through.txt", b"x", None);
    assert_error(status, &body, 400, "path_escapes");
    assert!(!other_home.join("public/through.txt").exists());
    assert!((site.sh)(
        site.person,
        &format!("rm {0} && mv {1} {0}", public.display(), aside.display())
    ));
}

/// The person's worker is killed while an upload streams: the client hears a clear 5xx,
/// nothing partial is left, and the next upload works in a fresh worker.
pub fn a_killed_worker_fails_clearly(gw: &HostGateway, site: &MemberSite) {
    let total: usize = 8 * 1024 * 1024;
    let (mut stream, tail) = raw_upload(gw, site.token, "killed.txt", total);
    let chunk = vec![b'k'; 1024 * 1024];
    stream.write_all(&chunk).unwrap();
    // Once the worker has made the temporary, every process of the person is killed.
    let deadline = Instant::now() + Duration::from_secs(10);
    while temporaries_beneath(&site.home().join("public")).is_empty() {
        assert!(Instant::now() < deadline, "the upload was never staged");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        kill_processes_of(site.user) > 0,
        "no worker of the person is running"
    );
    // The rest of the body; should the gateway answer early, what it said is read below.
    let sent = (1..total / chunk.len()).try_for_each(|_| stream.write_all(&chunk));
    if sent.is_ok() {
        let _ = stream.write_all(tail.as_bytes());
    }
    let answer = support::read_response(&mut stream);
    let status = support::status_of(&answer);
    assert!((500..600).contains(&status), "answered {status}: {answer}");
    assert!(answer.contains("worker_failed"), "{answer}");
    assert!(!site.home().join("public/killed.txt").exists());
    assert!(
        temporaries_beneath(&site.home()).is_empty(),
        "{:?}",
        temporaries_beneath(&site.home())
    );
    let (status, body) = gw.upload(site.token, "after.txt", b"after", None);
    assert_eq!(status, 201, "{body}");
    owned_by(&site.home().join("public/after.txt"), site.user);
}

/// `userdel -f` while the person's workers wait idle: the next request is refused as a
/// fresh start would be, not served by a worker that runs as a uid that names no one,
/// and those workers are ended.
pub fn a_removed_account_ends_its_idle_workers(gw: &HostGateway, token: &str, user: &str) {
    let (status, body) = gw.list(token, None);
    assert_eq!(status, 200, "{body}");
    let uid = uid_of(user);
    assert!(
        !processes_of(uid).is_empty(),
        "an idle worker of {user} is alive"
    );
    let userdel = Command::new(tool_path("userdel"))
        .args(["-f", user])
        .output()
        .unwrap();
    assert!(
        userdel.status.success(),
        "{}",
        String::from_utf8_lossy(&userdel.stderr)
    );
    // The service looks the account up again at most once a second.
    std::thread::sleep(Duration::from_millis(1100));
    let (status, body) = gw.list(token, None);
    assert_error(status, &body, 503, "account_missing");
    // Ended before the answer went out: a worker is reaped when it is dropped.
    let left = processes_of(uid);
    assert!(
        left.is_empty(),
        "workers of the removed {user} still run: {left:?}"
    );
}

/// A person whose POSIX user was removed by hand hears how to fix it, not a 500.
pub fn a_removed_account_names_the_fix(gw: &HostGateway, token: &str) {
    let (status, body) = gw.list(token, None);
    assert_error(status, &body, 503, "account_missing");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("ferry site init"), "{message}");
    let (status, body) = gw.upload(token, "x.txt", b"x", None);
    assert_error(status, &body, 503, "account_missing");
}

/// Kills every process of `user` (as an operator would before `userdel`); how many.
pub fn kill_processes_of(user: &str) -> usize {
    let pids = processes_of(uid_of(user));
    for pid in &pids {
        // SAFETY: a plain kill(2) of a pid that was just seen.
        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
    }
    pids.len()
}

/// The pids of the processes whose real uid is `uid`.
fn processes_of(uid: u32) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let real = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|u| u.parse::<u32>().ok());
        if real == Some(uid) {
            pids.push(pid);
        }
    }
    pids
}

/// Whether `pid` still runs (neither gone nor a zombie waiting to be reaped).
fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().next());
    !matches!(state, None | Some("Z" | "X"))
}

/// The session id of process `pid` (field 6 of `/proc/<pid>/stat`, after the command).
fn session_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_command = &stat[stat.rfind(')')? + 2..];
    after_command.split_whitespace().nth(3)?.parse().ok()
}

/// The person's own processes (their shell, their cron) run as the same user as the
/// person's workers: they must not be able to trace a worker, read its descriptors or
/// environment, reach the service's log through its stderr, or the operator's terminal
/// through a shared session.
pub fn the_worker_is_cut_off_from_the_service(gw: &HostGateway, site: &MemberSite) {
    let (status, body) = gw.list(site.token, None);
    assert_eq!(status, 200, "{body}");
    let gateway_session = session_of(gw.child.id()).expect("the gateway's session");
    let workers = processes_of(uid_of(site.user));
    assert!(
        !workers.is_empty(),
        "an idle worker of {} is alive",
        site.user
    );
    for pid in workers {
        // A worker that ended since the scan (its call was over) has nothing to show.
        let stderr = match std::fs::read_link(format!("/proc/{pid}/fd/2")) {
            Ok(stderr) => stderr,
            Err(_) if !alive(pid) => continue,
            Err(e) => panic!("worker {pid}'s stderr: {e}"),
        };
        assert!(
            stderr.to_string_lossy().starts_with("pipe:"),
            "worker {pid}'s stderr is {stderr:?}, not a pipe of the service's"
        );
        assert_ne!(
            session_of(pid),
            Some(gateway_session),
            "worker {pid} shares the gateway's session (and its terminal)"
        );
        for attempt in [
            format!("ls /proc/{pid}/fd"),
            format!("cat /proc/{pid}/environ"),
            format!("cat /proc/{pid}/mem"),
            format!("echo forged > /proc/{pid}/fd/2"),
        ] {
            let out = run_as(site.user, Path::new("/bin/sh"), &["-c", &attempt]);
            assert!(
                !out.status.success(),
                "as the person, `{attempt}` worked: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }
    let log = std::fs::read_to_string(&gw.log).unwrap_or_default();
    assert!(
        !log.contains("forged"),
        "the person wrote into the service's log"
    );
}

/// The deepest folder a listing descends into, then one and two deeper (spec M-LIST's
/// limit of 64 folders): the listing through the worker answers 200 each time, cut and
/// marked `truncated` past the limit, never a failure the agent could cause at will.
/// The body is read as text: nested past 128 levels, it is deeper than this test's JSON
/// parser accepts (a browser's takes it).
pub fn a_deep_tree_is_listed(gw: &HostGateway, site: &MemberSite) {
    let path_of = |depth: usize| format!("\"path\":\"public/{}\"", vec!["d"; depth].join("/"));
    for folders in [63, 64, 65, 66] {
        let chain = vec!["d"; folders].join("/");
        assert!((site.sh)(
            site.person,
            &format!(
                "cd {}/public && rm -rf d && mkdir -p {chain}",
                site.home().display()
            )
        ));
        let response = client()
            .get(gw.url("/v1/files"))
            .bearer_auth(site.token)
            .send()
            .unwrap();
        let status = response.status().as_u16();
        let text = response.text().unwrap();
        assert_eq!(status, 200, "{folders} folders deep: {text}");
        let shown = folders.min(64);
        assert!(text.contains(&path_of(shown)), "{folders} deep: {text}");
        assert!(
            !text.contains(&path_of(shown + 1)),
            "{folders} deep: {text}"
        );
        assert_eq!(
            text.contains("\"truncated\":true"),
            folders >= 64,
            "{folders} deep: {text}"
        );
    }
    assert!((site.sh)(
        site.person,
        &format!("rm -rf {}/public/d", site.home().display())
    ));
}

/// Sends the head of an upload of `name` whose file part holds `len` bytes, over a raw
/// connection, so a test can send the bytes when it likes; the multipart tail to send
/// after them.
pub fn raw_upload(gw: &HostGateway, token: &str, name: &str, len: usize) -> (TcpStream, String) {
    let addr = gw.base.trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let boundary = "rawuploadboundary";
    let head = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    );
    let tail = format!("\r\n--{boundary}--\r\n");
    let length = head.len() + len + tail.len();
    write!(
        stream,
        "POST /v1/media HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {length}\r\n\r\n{head}"
    )
    .unwrap();
    (stream, tail)
}

/// Starts an upload of `name` that holds its worker: the head and all but the last byte
/// of the file are sent, the rest waits for [`finish_upload`]. The file is larger than
/// what an upload holds in memory (256 KiB), so it is staged (its worker leased) while
/// it streams; a smaller one is staged only once whole.
fn held_upload(gw: &HostGateway, token: &str, name: &str) -> (TcpStream, String) {
    const HELD: usize = 300 * 1024;
    let (mut stream, tail) = raw_upload(gw, token, name, HELD);
    stream.write_all(&vec![b'h'; HELD - 1]).unwrap();
    (stream, format!("h{tail}"))
}

fn finish_upload((mut stream, rest): (TcpStream, String)) -> u16 {
    let _ = stream.write_all(rest.as_bytes());
    support::status_of(&support::read_response(&mut stream))
}

/// A person's burst of requests cannot fill the machine with processes: at most
/// `WORKERS_PER_PERSON_MAX` workers at once, busy or idle; the next request is
/// `429 too_many_workers`, and once one is free, requests are served again.
pub fn workers_are_capped_per_person(gw: &HostGateway, site: &MemberSite) {
    let cap = ferry_exec::worker::WORKERS_PER_PERSON_MAX;
    let mut held = Vec::new();
    for n in 0..cap {
        held.push(held_upload(gw, site.token, &format!("held{n}.txt")));
        // Each is staged (its worker leased) before the next begins.
        let deadline = Instant::now() + Duration::from_secs(20);
        while temporaries_beneath(&site.home().join("public")).len() < n + 1 {
            assert!(Instant::now() < deadline, "upload {n} was never staged");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let (status, body) = gw.upload(site.token, "over.txt", b"over", None);
    assert_error(status, &body, 429, "too_many_workers");
    assert!(processes_of(uid_of(site.user)).len() <= cap + 2);
    // Staging 64 workers one after another takes a while on a loaded machine: the first
    // uploads may have outlived the body's idle timeout by now (408), which ends them too.
    for upload in held {
        let status = finish_upload(upload);
        assert!(matches!(status, 201 | 408), "a held upload ended {status}");
    }
    let (status, body) = gw.upload(site.token, "after-burst.txt", b"after", None);
    assert_eq!(status, 201, "{body}");
    assert!(temporaries_beneath(&site.home()).is_empty());
}

/// How long to wait for the service to look at an account again (it looks at most once
/// a second).
const PAST_ACCOUNT_CHECK: Duration = Duration::from_millis(1100);

/// `file_write` of `content` to `path` over `/mcp`: its code, `None` when it was written.
fn write_code(gw: &HostGateway, token: &str, path: &str, content: &str) -> Option<String> {
    let results = gw.mcp(
        token,
        vec![support::mcp::call(
            "file_write",
            json!({"path": path, "content": content}),
        )],
    );
    let result = &results[0];
    if !support::mcp::is_error(result) {
        return None;
    }
    Some(
        result["structuredContent"]["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("an error without a code: {result}"))
            .to_owned(),
    )
}

/// A person taken out of a circle's group while their worker waits idle: that worker
/// still has the group, so it must not serve them again. The next write into the circle
/// is refused by a fresh worker, and the old one is gone; put back, they write again.
pub fn a_left_group_is_not_kept_by_a_worker(
    gw: &HostGateway,
    harness: &str,
    user: &str,
    group: &str,
    circle_dir: &Path,
) {
    let file = circle_dir.join("group.txt");
    let file = file.to_str().unwrap();
    assert_eq!(write_code(gw, harness, file, "in the group\n"), None);
    // The person's, in the circle's group (the folder is setgid).
    assert_eq!(owner_mode(Path::new(file)).0, uid_of(user));
    let before = processes_of(uid_of(user));
    assert!(!before.is_empty(), "an idle worker of {user} is alive");

    run_ok("gpasswd", &["-d", user, group]);
    std::thread::sleep(PAST_ACCOUNT_CHECK);
    assert_eq!(
        write_code(gw, harness, file, "out of the group\n").as_deref(),
        Some("permission_denied")
    );
    assert_eq!(std::fs::read_to_string(file).unwrap(), "in the group\n");
    let kept = still_running(user, &before);
    assert!(
        kept.is_empty(),
        "workers started in {group} still run: {kept:?}"
    );

    run_ok("gpasswd", &["-a", user, group]);
    std::thread::sleep(PAST_ACCOUNT_CHECK);
    assert_eq!(write_code(gw, harness, file, "back in it\n"), None);
    assert_eq!(std::fs::read_to_string(file).unwrap(), "back in it\n");
}

/// A circle made and joined while the gateway runs: the person's next request knows the
/// new folder, so a command runs there in the sandbox, and a file written there is theirs;
/// the workers greeted with the old list of folders are gone.
pub fn a_circle_joined_while_serving_is_reached(
    gw: &HostGateway,
    harness: &str,
    user: &str,
    join: &dyn Fn(),
    circle_dir: &Path,
) {
    // The toolbox is opened (and kept) before the circle exists.
    let results = gw.mcp(
        harness,
        vec![support::mcp::call(
            "terminal_run",
            json!({"command": "true"}),
        )],
    );
    assert!(!support::mcp::is_error(&results[0]), "{}", results[0]);
    let before = processes_of(uid_of(user));
    assert!(!before.is_empty(), "an idle worker of {user} is alive");
    join();
    std::thread::sleep(PAST_ACCOUNT_CHECK);
    let cwd = circle_dir.to_str().unwrap();
    let results = gw.mcp(
        harness,
        vec![support::mcp::call(
            "terminal_run",
            json!({"command": "echo made here > joined.txt && pwd", "cwd": cwd}),
        )],
    );
    let result = &results[0];
    assert!(!support::mcp::is_error(result), "{result}");
    assert_eq!(result["structuredContent"]["exitCode"], 0, "{result}");
    assert!(support::mcp::text_of(result).contains(cwd), "{result}");
    let joined = circle_dir.join("joined.txt");
    assert_eq!(std::fs::read_to_string(&joined).unwrap(), "made here\n");
    assert_eq!(owner_mode(&joined).0, uid_of(user));
    let kept = still_running(user, &before);
    assert!(
        kept.is_empty(),
        "workers greeted with the old folders run: {kept:?}"
    );
}

/// Which of `before` (pids of `user`'s processes) still run.
fn still_running(user: &str, before: &[u32]) -> Vec<u32> {
    processes_of(uid_of(user))
        .into_iter()
        .filter(|pid| before.contains(pid))
        .collect()
}

/// The uid of `user` changed by hand in `/etc/passwd` to `uid`; the old one is returned.
/// The account keeps its name, so the person's folders belong to a uid no longer theirs.
pub fn set_uid_by_hand(user: &str, uid: u32) -> u32 {
    let old = uid_of(user);
    let pattern = format!("s/^{user}:\\([^:]*\\):{old}:/{user}:\\1:{uid}:/");
    run_ok("sed", &["-i", &pattern, "/etc/passwd"]);
    assert_eq!(uid_of(user), uid, "the uid of {user} was changed");
    old
}

/// The gateway's children that have ended and were not waited for.
fn zombie_children(pid: u32) -> Vec<String> {
    let mut zombies = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for child in children.split_whitespace() {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
            if state.is_some_and(|rest| rest.starts_with('Z')) {
                zombies.push(stat);
            }
        }
    }
    zombies
}

/// A person whose uid was changed by hand hears what is wrong and how to fix it (every
/// route, over and over), and none of the gateway's children is left unwaited; with the
/// uid put back, they are served again.
pub fn a_changed_uid_names_the_fix(gw: &HostGateway, token: &str, user: &str, spare_uid: u32) {
    let (status, body) = gw.list(token, None);
    assert_eq!(status, 200, "{body}");
    let old = set_uid_by_hand(user, spare_uid);
    std::thread::sleep(PAST_ACCOUNT_CHECK);
    for _ in 0..5 {
        let (status, body) = gw.list(token, None);
        assert_error(status, &body, 503, "account_changed");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("ferry site init --mode host"), "{message}");
        assert!(message.contains(&spare_uid.to_string()), "{message}");
        let (status, body) = gw.upload(token, "changed.txt", b"x", None);
        assert_error(status, &body, 503, "account_changed");
    }
    assert!(
        processes_of(old).is_empty() && processes_of(spare_uid).is_empty(),
        "no worker runs as either uid"
    );
    let zombies = zombie_children(gw.pid());
    assert!(zombies.is_empty(), "unwaited children: {zombies:?}");

    set_uid_by_hand(user, old);
    std::thread::sleep(PAST_ACCOUNT_CHECK);
    let (status, body) = gw.upload(token, "restored.txt", b"x", None);
    assert_eq!(status, 201, "{body}");
    let zombies = zombie_children(gw.pid());
    assert!(zombies.is_empty(), "unwaited children: {zombies:?}");
}

/// Search and folder downloads read the person's files in the person's worker: the
/// service cannot read the folder, yet finds the file by name and content and zips it.
pub fn search_and_zip_act_as_the_person(gw: &HostGateway, site: &MemberSite) {
    let home = site.home();
    assert!((site.sh)(
        site.person,
        &format!(
            "mkdir -p {0}/public/Relatórios && printf 'a line\\nthe needle is here\\n' > \
             {0}/public/Relatórios/hay.txt && ln -s /etc {0}/public/Relatórios/etc && \
             chmod 700 {0}/public/Relatórios && chmod 600 {0}/public/Relatórios/hay.txt",
            home.display()
        )
    ));
    service_cannot_read(&home.join("public/Relatórios"));
    let search = |q: &str, content: &str| {
        json_answer(
            client()
                .get(gw.url("/v1/files/search"))
                .query(&[("q", q), ("content", content)])
                .bearer_auth(site.token)
                .send()
                .unwrap(),
        )
    };
    let (status, body) = search("RELATORIOS", "false");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["results"][0]["path"], "public/Relatórios");
    let (status, body) = search("NEEDLE", "true");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["results"][0]["path"], "public/Relatórios/hay.txt");
    assert_eq!(body["results"][0]["line"]["number"], 2);
    let (status, body) = search(&"x".repeat(10 * 1024), "true");
    assert_error(status, &body, 400, "bad_query");

    let response = client()
        .get(gw.url("/v1/files/archive"))
        .query(&[("path", "public/Relatórios")])
        .bearer_auth(site.token)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let zip = response.bytes().unwrap();
    let saved = std::env::temp_dir().join(format!("ferry-host-zip-{}.zip", std::process::id()));
    std::fs::write(&saved, &zip).unwrap();
    let listed = Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None; \
             print('|'.join(f'{i.filename}={z.read(i).decode()!r}' for i in z.infolist()))",
        ])
        .arg(&saved)
        .output()
        .unwrap();
    std::fs::remove_file(&saved).unwrap();
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout).trim(),
        "Relatórios/=''|Relatórios/hay.txt='a line\\nthe needle is here\\n'"
    );
    let response = client()
        .get(gw.url("/v1/files/archive"))
        .query(&[("path", "public/Relatórios/etc")])
        .bearer_auth(site.token)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 404);
}
