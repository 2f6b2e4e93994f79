//! Shared harness for the end-to-end tests: a real `ferry serve` process on loopback,
//! a fresh data directory per server, the real CLI, and a small scripted HTTP peer.
#![allow(dead_code)] // each test file uses a different part of the harness

pub mod crash;
pub mod escapes;
pub mod faults;
pub mod herd;
pub mod load;
pub mod mcp;
pub mod mcp_stdio;
pub mod netns;
pub mod node;
pub mod seccomp;
pub mod terminal;
pub mod tmpfs;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use reqwest::blocking::Response;
use reqwest::blocking::multipart::{Form, Part};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The uid and gid of `nobody`.
pub const NOBODY: u32 = 65534;

/// `ferry` as `nobody`: a copy of the binary in `dir` (made traversable), and `data`
/// handed to `nobody`.
fn nobody_command(dir: &Path, data: &Path) -> Command {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let copy = ferry_bin_at(&dir.join("ferry"));
    std::os::unix::fs::chown(data, Some(NOBODY), Some(NOBODY)).unwrap();
    let mut cmd = Command::new("setpriv");
    cmd.arg(format!("--reuid={NOBODY}"))
        .arg(format!("--regid={NOBODY}"))
        .arg("--clear-groups")
        .arg(copy);
    cmd
}

/// The `ferry` binary cargo built for these tests.
pub fn ferry_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ferry"))
}

/// The `ferry` binary at `path`, for a user who may not reach the build tree: a hard link
/// when `path` is on the build tree's filesystem, else a copy. Copying a debug binary for
/// every test would fill a small disk. Never change the mode or owner of what this
/// returns: a hard link shares them with the build's own binary.
pub fn ferry_bin_at(path: &Path) -> PathBuf {
    // Already made (a gateway started again in the same folder): copying onto it would
    // write through the hard link into the build's own binary.
    if path.exists() {
        return path.to_owned();
    }
    if std::fs::hard_link(ferry_bin(), path).is_err() {
        std::fs::copy(ferry_bin(), path).unwrap();
    }
    path.to_owned()
}

/// How to start a server.
#[derive(Default, Clone)]
pub struct Options {
    /// Written to `<data>/ferry.toml` before start.
    pub config_toml: Option<String>,
    /// Extra environment (`FERRY_SECTION__KEY` overrides and the like).
    pub env: Vec<(String, String)>,
    /// Run the gateway as `nobody` (commands are refused as root), on a site it owns.
    pub as_nobody: bool,
    /// Where to listen (`127.0.0.1:0` when unset).
    pub listen: Option<String>,
    /// A seccomp filter the gateway starts under (see [`seccomp`]): a machine without
    /// some kernel feature.
    pub seccomp: Option<&'static [libc::sock_filter]>,
    /// The gateway's fsyncs go through the test ([`faults`]): [`Server::disk`] fails
    /// those of files below the site's `home/` on demand.
    pub failing_disk: bool,
}

/// A running gateway on a fresh site; killed on drop.
pub struct Server {
    child: Child,
    /// Kept open: the gateway may print more than the line read at start.
    stdout: BufReader<ChildStdout>,
    pub base: String,
    pub addr: String,
    /// The admin token of the default person `me`, as printed at first start.
    pub token: String,
    pub data: PathBuf,
    options: Options,
    /// The PostgreSQL database of this site's metadata, on a run that asks for one
    /// (`FERRY_TEST_METADATA=postgres`); dropped with the server.
    metadata: Option<ferry_sql::testing::PostgresDatabase>,
    /// With [`Options::failing_disk`]: the disk under `home/`, to fail and heal.
    pub disk: Option<faults::Disk>,
    _tmp: tempfile::TempDir,
}

/// The variable that points a gateway or a command at PostgreSQL metadata.
pub const METADATA_URL: &str = "FERRY_METADATA__URL";

/// Whether a variable points a gateway or a command at the site's stores (its metadata
/// database or its S3 bucket): every process of the site gets the same.
fn names_a_store(variable: &str) -> bool {
    variable == METADATA_URL || variable.starts_with("FERRY_MEDIA__")
}

/// On a run with `FERRY_TEST_MEDIA=s3`, a fresh bucket for one site's media, unless
/// the test chose its own store.
fn test_media(options: &Options) -> Option<ferry_media::testing::S3Bucket> {
    if options.env.iter().any(|(k, _)| k == "FERRY_MEDIA__BACKEND") {
        return None;
    }
    ferry_site::testing::media_on_s3().then(ferry_media::testing::S3Bucket::create)
}

/// On a run with `FERRY_TEST_METADATA=postgres`, a fresh PostgreSQL database for one
/// site's metadata (every gateway and command of the site is pointed at it).
fn test_metadata(options: &Options) -> Option<ferry_sql::testing::PostgresDatabase> {
    if options.env.iter().any(|(k, _)| k == METADATA_URL) {
        return None;
    }
    match std::env::var(ferry_site::testing::ENGINE_VARIABLE).as_deref() {
        Ok("postgres") => Some(ferry_sql::testing::PostgresDatabase::create()),
        _ => None,
    }
}

/// Starts `ferry serve` on `data` (logging to `<dir>/server.log`, appended) and returns
/// it with its standard output and the first line it printed, once it listens.
fn spawn_serve(
    dir: &Path,
    data: &Path,
    options: &Options,
) -> (Child, BufReader<ChildStdout>, String, Option<faults::Disk>) {
    let log = dir.join("server.log");
    let stderr = std::fs::File::options()
        .create(true)
        .append(true)
        .open(&log)
        .unwrap();
    let mut cmd = if options.as_nobody {
        nobody_command(dir, data)
    } else {
        ferry_command()
    };
    cmd.arg("serve")
        .arg("--data")
        .arg(data)
        .arg("--listen")
        .arg(options.listen.as_deref().unwrap_or("127.0.0.1:0"))
        .stdout(Stdio::piped())
        .stderr(stderr);
    cmd.envs(options.env.iter().map(|(k, v)| (k, v)));
    if let Some(program) = options.seccomp {
        use std::os::unix::process::CommandExt;
        // SAFETY: install() makes raw system calls only, as the time after fork needs.
        unsafe {
            cmd.pre_exec(move || seccomp::install(program));
        }
    }
    if options.failing_disk {
        faults::prepare(&mut cmd);
    }
    let mut child = cmd.spawn().expect("ferry serve starts");
    // Watched before anything else: until then, the gateway's first fsync waits.
    let disk = options
        .failing_disk
        .then(|| faults::Disk::watch(child.id(), &data.join("home")));
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let line = line.trim().to_owned();
    assert!(
        line.starts_with("http://"),
        "ferry serve printed {line:?}; log: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    (child, stdout, line, disk)
}

impl Server {
    pub fn start() -> Server {
        Server::start_with(Options::default())
    }

    /// Starts a server with extra environment (`FERRY_SECTION__KEY` overrides and the like).
    pub fn start_with_env(env: &[(&str, &str)]) -> Server {
        Server::start_with(Options {
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..Options::default()
        })
    }

    pub fn start_with(mut options: Options) -> Server {
        let metadata = test_metadata(&options);
        if let Some(db) = &metadata {
            options
                .env
                .push((METADATA_URL.to_owned(), db.url().to_owned()));
        }
        if let Some(bucket) = test_media(&options) {
            options.env.extend(bucket.env());
        }
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("site");
        std::fs::create_dir_all(&data).unwrap();
        if let Some(toml) = &options.config_toml {
            std::fs::write(data.join("ferry.toml"), toml).unwrap();
        }
        let (child, stdout, line, disk) = spawn_serve(tmp.path(), &data, &options);
        let (base, token) = line
            .split_once("/#token=")
            .expect("first start prints a token");
        let addr = base.trim_start_matches("http://").to_owned();
        Server {
            child,
            stdout,
            base: base.to_owned(),
            addr,
            token: token.to_owned(),
            data,
            options,
            metadata,
            disk,
            _tmp: tmp,
        }
    }

    /// Stops this gateway and starts it again on the same data dir, as an operator would;
    /// its log goes on in the same file, and every token stays valid.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let (child, stdout, line, disk) = spawn_serve(self._tmp.path(), &self.data, &self.options);
        self.child = child;
        self.disk = disk;
        self.stdout = stdout;
        self.base = line.trim_end_matches('/').to_owned();
        self.addr = self.base.trim_start_matches("http://").to_owned();
    }

    /// The next line the gateway printed on its standard output, without its newline.
    pub fn next_line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim_end().to_owned()
    }

    /// Restarts on `listen` (an address and port), as an operator restarting a gateway
    /// its nodes know the address of.
    pub fn restart_on(&mut self, listen: &str) {
        self.options.listen = Some(listen.to_owned());
        self.restart();
    }

    /// `<base><path>`
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Runs the `ferry` CLI on this server's data dir.
    pub fn ferry(&self, args: &[&str]) -> Output {
        self.ferry_on_site().args(args).output().unwrap()
    }

    /// The `ferry` command set for this server's site: its data dir and, on a
    /// PostgreSQL run, its metadata database.
    pub fn ferry_on_site(&self) -> Command {
        let mut cmd = ferry_command();
        cmd.env("FERRY_DATA", &self.data);
        for (key, value) in &self.options.env {
            if names_a_store(key) {
                cmd.env(key, value);
            }
        }
        cmd
    }

    /// Starts another gateway on this one's site (its data dir and metadata), with logs
    /// of its own; signed in with this one's token.
    pub fn start_beside(&self) -> Server {
        let tmp = tempfile::tempdir().unwrap();
        let options = Options {
            listen: None,
            ..self.options.clone()
        };
        let (child, stdout, line, disk) = spawn_serve(tmp.path(), &self.data, &options);
        let base = line.trim_end_matches('/').to_owned();
        // Ready once it hears the other gateways' events.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while client()
            .get(format!("{base}/readyz"))
            .send()
            .map_or(true, |r| r.status().as_u16() != 200)
        {
            assert!(
                std::time::Instant::now() < deadline,
                "{base} never got ready"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Server {
            child,
            stdout,
            addr: base.trim_start_matches("http://").to_owned(),
            base,
            token: self.token.clone(),
            data: self.data.clone(),
            options,
            metadata: None,
            disk,
            _tmp: tmp,
        }
    }

    /// The site beside the gateway, opened as another process would (with the
    /// gateway's metadata).
    pub fn site(&self) -> ferry_site::Site {
        let mut config = ferry_config::Config::default();
        let env = |key: &str| {
            let found = self.options.env.iter().find(|(k, _)| k == key);
            found.map(|(_, v)| v.clone())
        };
        config.metadata.url = env(METADATA_URL);
        if env("FERRY_MEDIA__BACKEND").as_deref() == Some("s3") {
            let media = &mut config.media;
            media.backend = ferry_config::MediaBackend::S3;
            media.endpoint = env("FERRY_MEDIA__ENDPOINT");
            media.bucket = env("FERRY_MEDIA__BUCKET");
            media.region = env("FERRY_MEDIA__REGION").unwrap_or(media.region.clone());
            media.access_key_id = env("FERRY_MEDIA__ACCESS_KEY_ID");
            media.secret_access_key = env("FERRY_MEDIA__SECRET_ACCESS_KEY");
        }
        ferry_site::Site::open(&self.data, config).expect("the site opens beside the gateway")
    }

    /// The bytes a `file_fetch` answered with (its `structuredContent`): read at its
    /// `localPath`, or by its `mediaId` from the bucket when the media are on S3.
    pub fn fetched_bytes(&self, structured: &Value) -> Vec<u8> {
        if let Some(path) = structured["localPath"].as_str() {
            return std::fs::read(path).unwrap();
        }
        let id = structured["mediaId"]
            .as_str()
            .expect("a mediaId")
            .to_owned();
        let store = self.site().media().expect("the media store opens");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            use futures_util::TryStreamExt;
            let (_, bytes) = store.open(&id).await.expect("the fetched media opens");
            let chunks: Vec<bytes::Bytes> = bytes.try_collect().await.unwrap();
            chunks.concat()
        })
    }

    /// The site's metadata database, opened beside the gateway as another process would,
    /// to change it behind the gateway's back.
    pub fn metadata_db(&self) -> ferry_sql::Db {
        match self.options.env.iter().find(|(k, _)| k == METADATA_URL) {
            Some((_, url)) => ferry_sql::Db::postgres(url, None),
            None => ferry_sql::Db::sqlite(
                &self
                    .data
                    .join(ferry_site::layout::SERVICE_DIR)
                    .join(ferry_site::DB_FILE),
            ),
        }
        .expect("the site's metadata database opens")
    }

    /// Kills the gateway at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Adds a person with the CLI and returns their token (the last line it prints).
    pub fn add_person(&self, id: &str) -> String {
        last_line(&self.ferry(&["person", "add", id]))
    }

    /// Creates a token of `kind` for `person` with the CLI.
    pub fn create_token(&self, person: &str, kind: &str) -> String {
        last_line(&self.ferry(&["token", "create", person, "--kind", kind]))
    }

    /// Where a person's workspace lives on disk.
    pub fn home(&self, person: &str) -> PathBuf {
        self.data.join("home").join(person)
    }

    /// The folder holding a workspace's `public/`: `person`'s main workspace (`project`
    /// `None`) or one of their projects.
    pub fn workspace(&self, person: &str, project: Option<&str>) -> PathBuf {
        match project {
            None => self.home(person),
            Some(p) => self.home(person).join("projects").join(p),
        }
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data.parent().unwrap().join("server.log")).unwrap_or_default()
    }

    /// The server process id (for RSS checks and the like).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// How the process ended, if it did within `limit`.
    pub fn exit_within(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        exit_within(&mut self.child, limit)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `ferry` command with no `FERRY_` variable inherited from the test's environment,
/// and nothing on its standard input.
pub fn ferry_command() -> Command {
    let mut cmd = Command::new(ferry_bin());
    for (key, _) in std::env::vars() {
        if key.starts_with("FERRY_") {
            cmd.env_remove(key);
        }
    }
    cmd.stdin(Stdio::null());
    cmd
}

/// What a finished command printed.
pub struct Finished {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// Standard output and standard error, one after the other.
    pub fn both(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Runs `cmd` to completion; a command that is still running after 30 s (a `serve` that
/// should have refused to start, say) is killed and fails the test.
pub fn finish(mut cmd: Command) -> Finished {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("stdout");
    let err_path = dir.path().join("stderr");
    cmd.stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    let mut child = cmd.spawn().unwrap();
    let status = exit_within(&mut child, Duration::from_secs(30)).unwrap_or_else(|| {
        panic!(
            "the command did not exit; it printed {:?} {:?}",
            std::fs::read_to_string(&out_path).unwrap_or_default(),
            std::fs::read_to_string(&err_path).unwrap_or_default()
        )
    });
    Finished {
        status,
        stdout: std::fs::read_to_string(&out_path).unwrap(),
        stderr: std::fs::read_to_string(&err_path).unwrap(),
    }
}

/// The child's exit status, or `None` (and the child killed) when it runs past `limit`.
pub fn exit_within(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The value of `key` in `[section]` of a printed configuration (`ferry serve
/// --print-config`), as written there (strings keep their quotes).
pub fn config_value(printed: &str, section: &str, key: &str) -> Option<String> {
    let mut current = String::new();
    for line in printed.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name.to_owned();
        } else if current == section
            && let Some((k, v)) = line.split_once('=')
            && k.trim() == key
        {
            return Some(v.trim().to_owned());
        }
    }
    None
}

/// The last non-empty line of a command's standard output; panics if it failed.
pub fn last_line(output: &Output) -> String {
    assert!(
        output.status.success(),
        "command failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap()
        .trim()
        .to_owned()
}

/// A blocking HTTP client with a generous timeout.
pub fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The `error.code` of a JSON error body.
pub fn error_code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("<no error code>")
}

/// Asserts an error answer: `want_status` with `error.code` `want_code`.
#[track_caller]
pub fn assert_error(status: u16, body: &Value, want_status: u16, want_code: &str) {
    assert_eq!(
        (status, error_code(body)),
        (want_status, want_code),
        "body: {body}"
    );
}

/// An answer's `Content-Type`, empty when it has none.
fn content_type_of(response: &Response) -> String {
    response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// The status and JSON body of an API answer, which must be `application/json` and hold
/// JSON; panics, showing what came instead, when it does not.
#[track_caller]
pub fn json_answer(response: Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let content_type = content_type_of(&response);
    let text = response.text().unwrap();
    assert!(
        content_type.starts_with("application/json"),
        "status {status}, Content-Type {content_type:?}: {text:?}"
    );
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("status {status}: body is not JSON ({e}): {text:?}"));
    (status, body)
}

/// `GET <url>` with `token`: the status and JSON body ([`json_answer`]).
#[track_caller]
pub fn get_json(url: &str, token: &str) -> (u16, Value) {
    json_answer(client().get(url).bearer_auth(token).send().unwrap())
}

/// `POST <path>` of a JSON `body` with `token`: the status and JSON body ([`json_answer`]).
#[track_caller]
pub fn post_json(server: &Server, token: &str, path: &str, body: &Value) -> (u16, Value) {
    json_answer(
        client()
            .post(server.url(path))
            .bearer_auth(token)
            .json(body)
            .send()
            .unwrap(),
    )
}

/// `POST /v1/media` of one file `name` holding `bytes`, with a `project` field when given:
/// the status and JSON body ([`json_answer`]).
#[track_caller]
pub fn upload(
    server: &Server,
    token: &str,
    name: &str,
    bytes: &[u8],
    project: Option<&str>,
) -> (u16, Value) {
    let mut form = Form::new().part(
        "file",
        Part::bytes(bytes.to_vec()).file_name(name.to_owned()),
    );
    if let Some(project) = project {
        form = form.text("project", project.to_owned());
    }
    json_answer(
        client()
            .post(server.url("/v1/media"))
            .bearer_auth(token)
            .multipart(form)
            .send()
            .unwrap(),
    )
}

/// Creates the project `id` of the holder of `token` through the API; asserts the 201.
#[track_caller]
pub fn create_project(server: &Server, token: &str, id: &str) {
    let (status, body) = post_json(server, token, "/v1/projects", &json!({ "id": id }));
    assert_eq!(status, 201, "creating project {id}: {body}");
    assert_eq!(body["id"], id, "creating project {id}: {body}");
}

/// The listing (`GET /v1/files`) of the main workspace or of `project`, as the holder of
/// `token` sees it; asserts the 200.
#[track_caller]
pub fn list_files(server: &Server, token: &str, project: Option<&str>) -> Value {
    let mut request = client().get(server.url("/v1/files")).bearer_auth(token);
    if let Some(project) = project {
        request = request.query(&[("project", project)]);
    }
    let (status, body) = json_answer(request.send().unwrap());
    assert_eq!(status, 200, "listing: {body}");
    body
}

/// Every node of a listing's `entries` (or of any `children`), depth first in listing
/// order.
pub fn flatten_entries(entries: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for entry in entries.as_array().expect("entries is an array") {
        out.push(entry);
        if let Some(children) = entry.get("children") {
            out.extend(flatten_entries(children));
        }
    }
    out
}

/// Every path of a listing, flattened, depth first in listing order.
pub fn listed_paths(listing: &Value) -> Vec<String> {
    flatten_entries(&listing["entries"])
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_owned())
        .collect()
}

/// Whether `s` is an RFC 3339 date-time: `YYYY-MM-DDTHH:MM:SS`, optional fractional
/// seconds, then `Z` or an offset `+HH:MM` / `-HH:MM`.
pub fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digits =
        |from: usize, to: usize| (from..to).all(|i| b.get(i).is_some_and(u8::is_ascii_digit));
    let date_time = b.len() >= 20
        && digits(0, 4)
        && b[4] == b'-'
        && digits(5, 7)
        && b[7] == b'-'
        && digits(8, 10)
        && matches!(b[10], b'T' | b't')
        && digits(11, 13)
        && b[13] == b':'
        && digits(14, 16)
        && b[16] == b':'
        && digits(17, 19);
    if !date_time {
        return false;
    }
    let mut rest = &s[19..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let n = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &fraction[n..];
    }
    let zone = rest.as_bytes();
    rest == "Z"
        || rest == "z"
        || (zone.len() == 6
            && matches!(zone[0], b'+' | b'-')
            && zone[3] == b':'
            && zone
                .iter()
                .enumerate()
                .all(|(i, c)| i == 0 || i == 3 || c.is_ascii_digit()))
}

/// The lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes `bytes` at `path`, creating the parents (as an agent writes: straight to disk).
pub fn write_file(path: &Path, bytes: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// The server process still runs, and it answers `GET /healthz` with `ok`.
#[track_caller]
pub fn assert_alive(server: &mut Server) {
    assert!(
        server.is_running(),
        "the server exited; log:\n{}",
        server.log()
    );
    let response = client().get(server.url("/healthz")).send().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.text().unwrap(), "ok");
}

/// Sends raw bytes on a fresh connection and returns everything the server answered
/// (until it closes or `read_timeout` passes with nothing new).
pub fn raw_request(addr: &str, request: &[u8], read_timeout: Duration) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(read_timeout)).unwrap();
    let _ = stream.write_all(request);
    read_response(&mut stream)
}

/// Reads what the server sent until close or a read timeout.
pub fn read_response(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The status code of a raw HTTP response.
pub fn status_of(raw: &str) -> u16 {
    raw.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// A multipart body with the given parts: `(name, Some(filename), bytes)`.
pub fn multipart(boundary: &str, parts: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, filename, bytes) in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        match filename {
            Some(f) => body.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{name}\"; filename=\"{f}\"\r\n\r\n"
                )
                .as_bytes(),
            ),
            None => body.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
            ),
        }
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    body
}

/// One scripted answer of [`Peer`].
#[derive(Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The body in chunks; each chunk is written after `chunk_delay`.
    pub chunks: Vec<Vec<u8>>,
    pub chunk_delay: Duration,
    /// Send `Content-Length` (else the body is delimited by closing the connection).
    pub content_length: bool,
}

impl Reply {
    pub fn ok(body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status: 200,
            headers: Vec::new(),
            chunks: vec![body.into()],
            chunk_delay: Duration::ZERO,
            content_length: true,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// A tiny HTTP/1.1 server on loopback that answers every request with a script chosen by
/// the request path. Stops when dropped.
pub struct Peer {
    pub base: String,
    stop: Arc<AtomicBool>,
}

impl Peer {
    pub fn start(script: impl Fn(&str) -> Reply + Send + Sync + 'static) -> Peer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let script = Arc::new(script);
        let stopping = stop.clone();
        std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let script = script.clone();
                        std::thread::spawn(move || serve_one(stream, &*script));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Peer { base, stop }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve_one(mut stream: TcpStream, script: &dyn Fn(&str) -> Reply) {
    stream.set_nonblocking(false).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
    }
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .to_owned();
    let reply = script(&path);
    let mut head = format!("HTTP/1.1 {} X\r\nConnection: close\r\n", reply.status);
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if reply.content_length {
        let len: usize = reply.chunks.iter().map(Vec::len).sum();
        head.push_str(&format!("Content-Length: {len}\r\n"));
    }
    head.push_str("\r\n");
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    for chunk in &reply.chunks {
        if !reply.chunk_delay.is_zero() {
            std::thread::sleep(reply.chunk_delay);
        }
        if stream.write_all(chunk).is_err() {
            return;
        }
    }
    let _ = stream.flush();
}

/// Every file below `dir` (relative paths), sorted; for "nothing written outside" checks.
pub fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            out.push(
                path.strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            );
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                walk(root, &path, out);
            }
        }
    }
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// `link` is still a symbolic link, and still points at `target`.
#[track_caller]
pub fn assert_link_to(link: &Path, target: &Path) {
    assert!(
        std::fs::symlink_metadata(link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "{} is no longer a link",
        link.display()
    );
    assert_eq!(
        std::fs::read_link(link).unwrap(),
        target,
        "where {} points",
        link.display()
    );
}

/// Every `.ferry-tmp-*` temporary anywhere below `dir` (relative paths).
pub fn temporaries(dir: &Path) -> Vec<String> {
    tree(dir)
        .into_iter()
        .filter(|rel| {
            Path::new(rel)
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(".ferry-tmp-"))
        })
        .collect()
}

/// No `.ferry-tmp-*` temporary is left anywhere in the site.
#[track_caller]
pub fn assert_no_temporaries(server: &Server) {
    let temps = temporaries(&server.data);
    assert!(temps.is_empty(), "temporaries left behind: {temps:?}");
}

/// One server-sent event: its `event:` name (`message` when the server gave none) and
/// its `data:` lines joined by newlines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    pub event: String,
    pub data: String,
}

impl SseEvent {
    /// The data as JSON; panics (naming the event) when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| {
            panic!(
                "event {:?}: data is not JSON ({e}): {:?}",
                self.event, self.data
            )
        })
    }
}

enum SseItem {
    Event(SseEvent),
    /// The stream ended: cleanly (`None`) or with a read error.
    End(Option<String>),
}

/// `GET /v1/events` with `token`, asserted open as an event stream.
pub fn open_events(server: &Server, token: &str) -> SseStream {
    let response = client()
        .get(server.url("/v1/events"))
        .bearer_auth(token)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let content_type = content_type_of(&response);
    assert!(
        content_type.starts_with("text/event-stream"),
        "Content-Type {content_type:?}"
    );
    SseStream::new(response)
}

/// A `text/event-stream` body read on a thread of its own, so that a test can wait for
/// the next event with a bound instead of blocking forever. Comment lines (`: ping`)
/// are skipped.
pub struct SseStream {
    rx: std::sync::mpsc::Receiver<SseItem>,
    end: Option<Option<String>>,
}

/// An event stream's fields, taken line by line: the event a blank line ends (named
/// `message` when it names none), comment lines skipped.
#[derive(Default)]
pub struct SseLines {
    event: String,
    data: Vec<String>,
    fields: bool,
}

impl SseLines {
    /// Takes one line (its line ending included or not); the event it ends, if any.
    pub fn take(&mut self, line: &[u8]) -> Option<SseEvent> {
        let line = String::from_utf8_lossy(line);
        let line = line.trim_end_matches(['\n', '\r']);
        if line.is_empty() {
            if !std::mem::take(&mut self.fields) {
                return None;
            }
            let event = std::mem::take(&mut self.event);
            return Some(SseEvent {
                event: if event.is_empty() {
                    "message".to_owned()
                } else {
                    event
                },
                data: std::mem::take(&mut self.data).join("\n"),
            });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => self.event = value.to_owned(),
            "data" => self.data.push(value.to_owned()),
            _ => {}
        }
        self.fields = true;
        None
    }
}

impl SseStream {
    /// Reads events from `body` (e.g. a `reqwest::blocking::Response`) until it ends.
    pub fn new(body: impl Read + Send + 'static) -> SseStream {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(body);
            let mut lines = SseLines::default();
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) => {
                        let _ = tx.send(SseItem::End(None));
                        return;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        let _ = tx.send(SseItem::End(Some(e.to_string())));
                        return;
                    }
                }
                if let Some(event) = lines.take(&line)
                    && tx.send(SseItem::Event(event)).is_err()
                {
                    return;
                }
            }
        });
        SseStream { rx, end: None }
    }

    /// The next event, or `None` when the stream has ended or `wait` passed without one
    /// ([`SseStream::ended`] tells which).
    pub fn next(&mut self, wait: Duration) -> Option<SseEvent> {
        if self.end.is_some() {
            return None;
        }
        match self.rx.recv_timeout(wait) {
            Ok(SseItem::Event(event)) => Some(event),
            Ok(SseItem::End(error)) => {
                self.end = Some(error);
                None
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => None,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                self.end = Some(Some("reader thread gone".to_owned()));
                None
            }
        }
    }

    /// The next event; panics, saying why, when none comes within `wait`.
    pub fn expect_event(&mut self, wait: Duration) -> SseEvent {
        match self.next(wait) {
            Some(event) => event,
            None => match &self.end {
                Some(how) => panic!("the event stream ended ({how:?}) where an event was expected"),
                None => panic!("no event within {wait:?}"),
            },
        }
    }

    /// Whether the server ended the stream, and how: `Some(None)` cleanly, `Some(Some(error))`
    /// with a read error; `None` while it is open.
    pub fn ended(&self) -> Option<&Option<String>> {
        self.end.as_ref()
    }

    /// Every event until the server ends the stream; panics when it has not ended within
    /// `wait` or ended with a read error.
    pub fn until_end(&mut self, wait: Duration) -> Vec<SseEvent> {
        let deadline = std::time::Instant::now() + wait;
        let mut events = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.next(left) {
                Some(event) => events.push(event),
                None => match &self.end {
                    Some(None) => return events,
                    Some(Some(e)) => panic!("the event stream broke ({e}) after {events:?}"),
                    None => {
                        panic!("the event stream did not end within {wait:?}; so far {events:?}")
                    }
                },
            }
        }
    }
}

/// The person, at their web client (`base`, with their `token`): approves or denies the
/// deletes whose subject ends with a name in `approve`, and answers every pick with
/// `pick` (name, bytes), checking its link is single-use, the way the page does. Returns
/// how many requests it answered (it stops after all of them, or a minute).
pub fn answer_as_the_person(
    base: &str,
    token: &str,
    approve: &'static [(&'static str, bool)],
    pick: (&'static str, &'static [u8]),
) -> std::thread::JoinHandle<usize> {
    let (base, token) = (base.to_owned(), token.to_owned());
    std::thread::spawn(move || {
        let client = client();
        let mut answered = std::collections::HashSet::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while answered.len() < approve.len() + 1 && std::time::Instant::now() < deadline {
            let pending: Value = client
                .get(format!("{base}/v1/interactions"))
                .bearer_auth(&token)
                .send()
                .unwrap()
                .json()
                .unwrap();
            for item in pending["interactions"].as_array().unwrap() {
                let id = item["id"].as_str().unwrap().to_owned();
                if answered.contains(&id) {
                    continue;
                }
                if item["kind"] == "approval" {
                    let subject = item["subject"].as_str().unwrap();
                    let Some((_, yes)) = approve.iter().find(|(name, _)| subject.ends_with(name))
                    else {
                        continue;
                    };
                    let status = client
                        .post(format!("{base}/v1/approvals/{id}"))
                        .bearer_auth(&token)
                        .json(&json!({"approve": yes}))
                        .send()
                        .unwrap()
                        .status();
                    assert_eq!(status, 200);
                } else {
                    let url = format!("{base}{}", item["uploadUrl"].as_str().unwrap());
                    let form = reqwest::blocking::multipart::Form::new().part(
                        "file",
                        reqwest::blocking::multipart::Part::bytes(pick.1.to_vec())
                            .file_name(pick.0),
                    );
                    let response = client.post(&url).multipart(form).send().unwrap();
                    assert_eq!(response.status(), 201);
                    // The link is single-use.
                    let again = reqwest::blocking::multipart::Form::new().part(
                        "file",
                        reqwest::blocking::multipart::Part::bytes(b"again".to_vec())
                            .file_name("x.txt"),
                    );
                    assert_eq!(
                        client.post(&url).multipart(again).send().unwrap().status(),
                        410
                    );
                }
                answered.insert(id);
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        answered.len()
    })
}

/// Runs every way out of escapes.rs through `terminal_run` on `server`, once to bash's
/// exit and once to a deadline, each call followed by a pause with the server still up,
/// while this process watches `/proc`. Whatever the command started must be seen alive
/// during its call and never again after it: were the call to leave it running, it would
/// show all through the pause (the server's own end would kill it only later). `exact`:
/// the answer counts every leftover. Returns the two results.
pub fn assert_nothing_outlives_over_mcp(server: Value, exact: bool) -> [Value; 2] {
    const PAUSE_SECS: f64 = 3.0;
    let markers = [escapes::marker(), escapes::marker()];
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (stop, markers) = (stop.clone(), markers.clone());
        std::thread::spawn(move || {
            let mut last_seen: [Option<Instant>; 2] = [None, None];
            while !stop.load(Ordering::Relaxed) {
                for (seen, marker) in last_seen.iter_mut().zip(&markers) {
                    if !escapes::survivors(marker).is_empty() {
                        *seen = Some(Instant::now());
                    }
                }
                std::thread::sleep(Duration::from_millis(25));
            }
            last_seen
        })
    };
    let mut steps = Vec::new();
    for (i, marker) in markers.iter().enumerate() {
        let outlast = i == 1;
        let script = escapes::script(marker, Path::new(&format!("escapes-{i}")), outlast);
        let mut args = json!({"command": script});
        if outlast {
            args["timeoutSecs"] = json!(8);
        }
        steps.push(mcp::call("terminal_run", args));
        steps.push(json!({"op": "sleep", "seconds": PAUSE_SECS}));
    }
    let out = mcp::drive(&json!({
        "server": server,
        "elicitation": null,
        "steps": steps,
        "timeout_secs": 120,
    }));
    let ended = Instant::now();
    stop.store(true, Ordering::Relaxed);
    let last_seen = watcher.join().unwrap();
    let results = [out["results"][0].clone(), out["results"][2].clone()];
    for (i, r) in results.iter().enumerate() {
        let outlast = i == 1;
        assert!(!mcp::is_error(r), "{r}");
        let s = &r["structuredContent"];
        assert_eq!(s["stdout"], "ready\n", "every escape ran: {r}");
        assert_eq!(s["timedOut"], outlast, "{r}");
        let want = escapes::ESCAPES + u32::from(outlast);
        let killed = s["leftoversKilled"].as_u64().unwrap();
        if exact {
            assert_eq!(killed, u64::from(want), "{r}");
            assert!(
                mcp::text_of(r).contains(&format!(
                    "{want} processes it started were still running and were killed"
                )),
                "{r}"
            );
        } else {
            assert!(killed <= u64::from(want) + 2, "{r}");
        }
        // The watcher saw them (they ran), and not in the pause after the call.
        let seen = last_seen[i].unwrap_or_else(|| panic!("call {i}: never saw {}", markers[i]));
        let until_end = ended.duration_since(seen);
        let pause_after = PAUSE_SECS - 0.5 + if outlast { 0.0 } else { PAUSE_SECS };
        assert!(
            until_end.as_secs_f64() > pause_after,
            "call {i}: still alive {until_end:?} before the session ended: {r}"
        );
    }
    results
}

/// A secret for a service's environment, fresh per call, and a bash snippet that sets
/// `needle` to it without spelling it whole (the scanning command's own command line
/// must not hold it).
pub fn secret() -> (String, String) {
    let tail = escapes::marker();
    let tail = tail.trim_start_matches("ferry-escape-");
    (
        format!("operator-secret-{tail}"),
        format!("a=operator-secret-; b={tail}; needle=\"$a$b\""),
    )
}

/// A command that reads the environment and command line of every process it can see
/// in `/proc`: `READ <pid> <cmdline>` for each environment it could read, `LEAK <file>`
/// for each file that holds the needle set by `snippet` (see [`secret`]).
pub fn environ_scan(snippet: &str) -> String {
    format!(
        "{snippet}\n\
         for d in /proc/[0-9]*; do\n\
           for f in environ cmdline; do\n\
             c=$(tr '\\0' ' ' < $d/$f 2>/dev/null) || continue\n\
             [[ $f == environ ]] && echo \"READ ${{d#/proc/}} $(tr '\\0' ' ' < $d/cmdline 2>/dev/null)\"\n\
             [[ $c == *\"$needle\"* ]] && echo \"LEAK $d/$f\"\n\
           done\n\
         done; true"
    )
}

/// Checks the result of [`environ_scan`]: it read some environments, one of them of a
/// process whose command line holds `must_read` (to show the scan reached it), and
/// found the secret nowhere.
pub fn assert_no_leak(result: &Value, must_read: &str) {
    let stdout = result["structuredContent"]["stdout"]
        .as_str()
        .unwrap_or_default();
    assert!(
        !stdout.lines().any(|l| l.starts_with("LEAK /proc/")),
        "the secret reached a command: {stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("READ ") && l.contains(must_read)),
        "the scan did not read the environment of {must_read:?}: {stdout}"
    );
}

/// Pids of the processes whose environment holds `secret`, as root sees them.
pub fn holders_of(secret: &str) -> Vec<u32> {
    escapes::survivors(secret)
}

/// Runs `cmd` to its end. A program copied a moment ago may still be open for writing in
/// a child that another test thread forked meanwhile (until that child execs), and then
/// cannot be executed (`ETXTBSY`): such a start is tried again.
pub fn output_retrying(cmd: &mut Command) -> Output {
    for _ in 0..100 {
        match cmd.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other.expect("the program starts"),
        }
    }
    panic!("{cmd:?} stayed busy")
}
