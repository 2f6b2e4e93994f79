//! The agent tools over MCP (spec tools.md T-MCP, T-WS, T-GUARD, T-FLOW), driven end to
//! end by the official MCP Python SDK against `ferry mcp` on stdio and the gateway's
//! `/mcp`, in local mode.
//!
//! The suite runs as root; `terminal_run` refuses root (T-GUARD), so the sessions that
//! run commands start `ferry mcp` as `nobody` on a site that `nobody` owns.

mod support;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use support::mcp::{self, call, is_error, list_tools, text_of};

/// A site of its own, with person `alice`.
struct Site {
    _dir: tempfile::TempDir,
    data: PathBuf,
    /// A copy of the ferry binary that `nobody` can execute.
    ferry: PathBuf,
    /// Run `ferry mcp` as `nobody` (the site is theirs).
    as_nobody: bool,
}

const NOBODY: u32 = 65534;

impl Site {
    fn new(config: &str) -> Site {
        Site::build(config, false)
    }

    /// A site owned by `nobody`, whose `ferry mcp` runs as `nobody`.
    fn for_nobody(config: &str) -> Site {
        Site::build(config, true)
    }

    fn build(config: &str, as_nobody: bool) -> Site {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("ferry.toml"), config).unwrap();
        let ferry = support::ferry_bin_at(&dir.path().join("ferry"));
        for args in [
            &["site", "init", "--mode", "local", "--data"][..],
            &["person", "add", "alice", "--data"],
        ] {
            let out = support::output_retrying(Command::new(&ferry).args(args).arg(&data));
            assert!(out.status.success(), "{out:?}");
        }
        let site = Site {
            _dir: dir,
            data,
            ferry,
            as_nobody,
        };
        if as_nobody {
            site.give_to_nobody();
        }
        site
    }

    fn give_to_nobody(&self) {
        let status = Command::new("chown")
            .args(["-R", &format!("{NOBODY}:{NOBODY}")])
            .arg(&self.data)
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn home(&self) -> PathBuf {
        self.data.join("home/alice")
    }

    /// Runs the `ferry` CLI on this site.
    fn ferry_cli(&self, args: &[&str]) -> std::process::Output {
        Command::new(&self.ferry)
            .args(args)
            .arg("--data")
            .arg(&self.data)
            .output()
            .unwrap()
    }

    fn private(&self) -> PathBuf {
        self.data.join("private/people/alice")
    }

    /// `ferry mcp` for `person`.
    fn server_for(&self, person: &str) -> Value {
        self.server_with_env(person, &[])
    }

    /// [`Site::server_for`] with `env` added to the server's environment.
    fn server_with_env(&self, person: &str, env: &[(&str, &str)]) -> Value {
        let ferry = self.ferry.to_str().unwrap();
        let data = self.data.to_str().unwrap();
        let mut command = vec![];
        let uid = format!("--reuid={NOBODY}");
        let gid = format!("--regid={NOBODY}");
        if self.as_nobody {
            command.extend(["setpriv", uid.as_str(), gid.as_str(), "--clear-groups"]);
        }
        command.extend([ferry, "mcp", "--data", data, "--person", person]);
        mcp::stdio(&command, env)
    }

    /// One session: `steps`, elicitation answered with `elicitation` (None: not offered).
    fn session(&self, elicitation: Option<&str>, steps: Vec<Value>) -> Value {
        self.session_of("alice", elicitation, steps)
    }

    /// One session of `person`'s (see [`Site::session`]).
    fn session_of(&self, person: &str, elicitation: Option<&str>, steps: Vec<Value>) -> Value {
        mcp::drive(&json!({
            "server": self.server_for(person),
            "elicitation": elicitation,
            "steps": steps,
            "timeout_secs": 120,
        }))
    }

    /// The results of `steps`, with no elicitation offered.
    fn results(&self, steps: Vec<Value>) -> Vec<Value> {
        self.results_of("alice", steps)
    }

    /// The results of `steps` in a session of `person`'s.
    fn results_of(&self, person: &str, steps: Vec<Value>) -> Vec<Value> {
        let out = self.session_of(person, None, steps);
        out["results"].as_array().unwrap().clone()
    }

    /// Runs the `ferry` CLI on this site; panics when it fails.
    fn ferry_ok(&self, args: &[&str]) -> String {
        let out = Command::new(&self.ferry)
            .args(args)
            .arg("--data")
            .arg(&self.data)
            .output()
            .unwrap();
        assert!(out.status.success(), "ferry {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn one(&self, name: &str, args: Value) -> Value {
        self.results(vec![call(name, args)]).remove(0)
    }

    fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let path = self.home().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        if self.as_nobody {
            self.give_to_nobody();
        }
        path
    }
}

#[track_caller]
fn assert_tool_error(result: &Value, code: &str, says: &str) {
    assert!(is_error(result), "expected an error, got {result}");
    assert_eq!(
        result["structuredContent"]["error"]["code"], code,
        "{result}"
    );
    let text = text_of(result);
    assert!(text.contains(says), "{text:?} should say {says:?}");
}

#[track_caller]
fn assert_ok(result: &Value) -> String {
    assert!(!is_error(result), "expected success, got {result}");
    text_of(result)
}

#[test]
fn tools_list_shows_the_enabled_tools_with_closed_schemas_and_the_delivery_rules() {
    let site = Site::new("");
    let out = site.session(None, vec![list_tools()]);
    let tools = out["results"][0].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "file_read",
            "file_write",
            "file_edit",
            "file_preview",
            "file_delete",
            "file_deliver",
            "image_read",
            "terminal_run",
            "dir_list",
            "skill_search",
            "file_pick",
            "subagent"
        ]
    );
    for tool in tools {
        assert_eq!(tool["inputSchema"]["additionalProperties"], false, "{tool}");
        assert_eq!(tool["inputSchema"]["type"], "object");
    }
    let edits = &mcp::tool(&out["results"][0], "file_edit")["inputSchema"]["properties"]["edits"];
    assert_eq!(edits["items"]["additionalProperties"], false);
    let instructions = out["initialize"]["instructions"].as_str().unwrap();
    assert!(
        instructions.contains("public/attachments/"),
        "{instructions}"
    );
    assert!(instructions.contains("Never use uploads/"));
    assert!(instructions.contains(&format!(
        "{}",
        site.home().canonicalize().unwrap().display()
    )));
}

#[test]
fn only_the_configured_tools_exist() {
    let site = Site::new("[tools]\nenabled = [\"file_read\", \"dir_list\"]\n");
    site.write("a.txt", "hi\n");
    let out = site.session(
        None,
        vec![
            list_tools(),
            call("file_write", json!({"path": "b.txt", "content": "x"})),
            call("file_read", json!({"path": "a.txt"})),
        ],
    );
    let names: Vec<&str> = out["results"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["file_read", "dir_list"]);
    let refused = &out["results"][1];
    // JSON-RPC's invalid params (the client may also refuse an unlisted tool itself);
    // never a write.
    if let Some((code, message)) = support::mcp::protocol_error(refused) {
        assert_eq!(code, -32602, "{message}");
        assert!(message.contains("no tool `file_write`"), "{message}");
    } else {
        assert!(refused.get("content").is_none(), "{refused}");
    }
    assert!(!site.home().join("b.txt").exists());
    assert_ok(&out["results"][2]);
}

#[test]
fn file_read_numbers_lines_handles_ranges_crlf_and_the_256_kib_limit() {
    let site = Site::new("");
    site.write("three.txt", "one\ntwo\nthree\n");
    site.write("crlf.txt", "alpha\r\nbeta\r\n");
    let limit = 256 * 1024;
    // Lines of 1024 bytes: limit-1, limit and limit+1 bytes in all.
    let block = format!("{}\n", "x".repeat(1023));
    let at_limit = block.repeat(256);
    site.write("at.txt", &at_limit);
    site.write("under.txt", &at_limit[..limit - 1]);
    site.write("over.txt", format!("{at_limit}y"));
    site.write(
        "big.txt",
        (1..=30_000)
            .map(|n| format!("line {n}\n"))
            .collect::<String>(),
    );
    site.write("bin.dat", [0u8, 1, 2, 3, 0, 255]);
    let r = site.results(vec![
        call("file_read", json!({"path": "three.txt"})),
        call(
            "file_read",
            json!({"path": "three.txt", "startLine": 2, "lineCount": 10}),
        ),
        call("file_read", json!({"path": "three.txt", "startLine": 10})),
        call("file_read", json!({"path": "crlf.txt"})),
        call("file_read", json!({"path": "under.txt"})),
        call("file_read", json!({"path": "at.txt"})),
        call("file_read", json!({"path": "over.txt"})),
        call("file_read", json!({"path": "big.txt"})),
        call(
            "file_read",
            json!({"path": "big.txt", "startLine": 29999, "lineCount": 5}),
        ),
        call("file_read", json!({"path": "bin.dat"})),
        call("file_read", json!({"path": "~/three.txt", "startLine": 0})),
    ]);
    let whole = assert_ok(&r[0]);
    assert!(
        whole.contains("     1\tone\n     2\ttwo\n     3\tthree\n"),
        "{whole}"
    );
    assert!(whole.contains("3 lines"));
    let range = assert_ok(&r[1]);
    assert!(range.contains("     2\ttwo\n     3\tthree\n") && !range.contains("\tone"));
    assert!(range.contains("end of file at line 3"), "{range}");
    assert_tool_error(&r[2], "past_end", "has 3 lines");
    let crlf = assert_ok(&r[3]);
    assert!(
        crlf.contains("     1\talpha\n     2\tbeta\n") && crlf.contains("CRLF"),
        "{crlf}"
    );
    assert!(!crlf.contains('\r'));
    assert_ok(&r[4]);
    assert_ok(&r[5]);
    assert_tool_error(&r[6], "too_large", "file_preview");
    assert_tool_error(&r[7], "too_large", "startLine");
    let tail = assert_ok(&r[8]);
    assert!(
        tail.contains(" 29999\tline 29999\n 30000\tline 30000\n"),
        "{tail}"
    );
    assert_tool_error(&r[9], "not_text", "file_preview");
    assert_tool_error(&r[10], "invalid_arguments", "startLine must be at least 1");
}

/// The numbered lines of a `file_read` reply: (number, text).
fn numbered_lines(reply: &str) -> Vec<(u64, String)> {
    reply
        .lines()
        .filter_map(|line| {
            let (number, text) = line.split_once('\t')?;
            Some((number.trim().parse().ok()?, text.to_owned()))
        })
        .collect()
}

#[test]
fn file_read_cuts_a_line_longer_than_a_reply_and_following_it_reaches_the_end() {
    let site = Site::new("");
    // The longest first line a reply holds whole: 256 KiB less "     1\t" and "\n".
    let cap = 256 * 1024 - 8;
    for (name, len) in [("under", cap - 1), ("at", cap), ("over", cap + 1)] {
        site.write(
            &format!("{name}.txt"),
            format!("{}\nend\n", "a".repeat(len)),
        );
    }
    let r = site.results(vec![
        call("file_read", json!({"path": "under.txt"})),
        call("file_read", json!({"path": "at.txt"})),
        call("file_read", json!({"path": "over.txt"})),
        call(
            "file_read",
            json!({"path": "over.txt", "startLine": 1, "lineOffset": cap}),
        ),
        call(
            "file_read",
            json!({"path": "over.txt", "lineOffset": cap + 2}),
        ),
        call("file_read", json!({"path": "over.txt", "lineOffset": -1})),
    ]);
    for (i, len) in [(0, cap - 1), (1, cap)] {
        let text = assert_ok(&r[i]);
        assert_eq!(numbered_lines(&text), [(1, "a".repeat(len))], "{len}");
        assert_eq!(
            r[i]["structuredContent"]["next"],
            json!({"startLine": 2, "lineOffset": 0})
        );
    }
    let over = assert_ok(&r[2]);
    assert!(!over.contains("is empty"), "{}", &over[..100]);
    assert_eq!(numbered_lines(&over), [(1, "a".repeat(cap))]);
    assert_eq!(
        r[2]["structuredContent"]["next"],
        json!({"startLine": 1, "lineOffset": cap})
    );
    assert!(over.contains(&format!("continue with startLine 1 and lineOffset {cap}")));
    let rest = assert_ok(&r[3]);
    assert_eq!(
        numbered_lines(&rest),
        [(1, "a".to_owned()), (2, "end".to_owned())]
    );
    assert_tool_error(
        &r[4],
        "invalid_arguments",
        &format!("has {} bytes", cap + 1),
    );
    assert_tool_error(&r[5], "invalid_arguments", "lineOffset must be at least 0");

    // 300 KiB lines of two- and four-byte characters, cut inside one, among short lines:
    // an agent that follows every continuation gets the whole file back, in few calls.
    let long = format!("a{}", "é".repeat(150 * 1024));
    let crabs = format!("ab{}", "🦀".repeat(75 * 1024));
    let content = format!("{long}\nsecond\n{crabs}\nlast\n");
    site.write("long.txt", &content);
    let (mut at, mut lines, mut calls) = (
        json!({"startLine": 1, "lineOffset": 0}),
        Vec::<String>::new(),
        0,
    );
    loop {
        calls += 1;
        assert!(calls <= 8, "no end after {calls} calls");
        let reply = site.one(
            "file_read",
            json!({"path": "long.txt", "startLine": at["startLine"], "lineOffset": at["lineOffset"]}),
        );
        let text = assert_ok(&reply);
        for (i, (_, line)) in numbered_lines(&text).into_iter().enumerate() {
            if i == 0 && at["lineOffset"] != 0 {
                lines.last_mut().unwrap().push_str(&line);
            } else {
                lines.push(line);
            }
        }
        let next = &reply["structuredContent"]["next"];
        if next.is_null() {
            assert_eq!(reply["structuredContent"]["endOfFile"], true);
            break;
        }
        assert_ne!(*next, at, "no progress");
        at = next.clone();
    }
    assert_eq!(lines, [long.as_str(), "second", crabs.as_str(), "last"]);
    assert!(calls >= 3, "{calls}");
}

#[test]
fn file_read_past_the_last_line_names_the_line_count_from_the_line_right_after_it() {
    let site = Site::new("");
    site.write("three.txt", "one\ntwo\nthree\n");
    site.write("open.txt", "one\ntwo\nthree");
    site.write("empty.txt", "");
    let r = site.results(vec![
        call("file_read", json!({"path": "three.txt", "startLine": 3})),
        call("file_read", json!({"path": "three.txt", "startLine": 4})),
        call("file_read", json!({"path": "three.txt", "startLine": 5})),
        call("file_read", json!({"path": "open.txt", "startLine": 3})),
        call("file_read", json!({"path": "open.txt", "startLine": 4})),
        call("file_read", json!({"path": "empty.txt"})),
        call("file_read", json!({"path": "empty.txt", "startLine": 1})),
        call("file_read", json!({"path": "empty.txt", "startLine": 2})),
        call("file_read", json!({"path": "empty.txt", "startLine": 3})),
    ]);
    for i in [0, 3] {
        let text = assert_ok(&r[i]);
        assert_eq!(numbered_lines(&text), [(3, "three".to_owned())], "{text}");
    }
    for i in [1, 2, 4] {
        assert_tool_error(&r[i], "past_end", "has 3 lines");
    }
    // Line 1 is where every file starts: an empty one read from there is empty, and any
    // later line is past its end like past any other file's.
    for i in [5, 6] {
        let text = assert_ok(&r[i]);
        assert!(text.contains("is empty"), "{text}");
        assert!(numbered_lines(&text).is_empty(), "{text}");
    }
    for i in [7, 8] {
        assert_tool_error(&r[i], "past_end", "has 0 lines");
    }
}

#[test]
fn file_write_is_atomic_creates_parents_and_caps_content() {
    let site = Site::new("");
    let cap = 16 * 1024 * 1024;
    let r = site.results(vec![
        call(
            "file_write",
            json!({"path": "deep/er/new.txt", "content": "fresh\n"}),
        ),
        call(
            "file_write",
            json!({"path": "cap.txt", "content": "a".repeat(cap)}),
        ),
        call(
            "file_write",
            json!({"path": "over.txt", "content": "a".repeat(cap + 1)}),
        ),
        call("file_write", json!({"path": "deep", "content": "x"})),
    ]);
    assert_ok(&r[0]);
    assert_eq!(
        std::fs::read_to_string(site.home().join("deep/er/new.txt")).unwrap(),
        "fresh\n"
    );
    assert_ok(&r[1]);
    assert_eq!(
        std::fs::metadata(site.home().join("cap.txt"))
            .unwrap()
            .len(),
        cap as u64
    );
    assert_tool_error(&r[2], "too_large", "16777216");
    assert!(!site.home().join("over.txt").exists());
    assert_tool_error(&r[3], "is_directory", "folder");
    assert!(support::temporaries(&site.home()).is_empty());
}

/// The same limit over the gateway's `/mcp`: the largest content is written, one byte
/// more is a tool error result, never a transport error (the request body holds it).
#[test]
fn file_write_takes_its_largest_content_over_the_gateway_too() {
    let (server, harness) = gateway_with_bob(None, None);
    let cap = 16 * 1024 * 1024;
    let out = mcp::drive(&json!({
        "server": mcp::http(&server.url("/mcp"), &harness),
        "elicitation": null,
        "steps": [
            call("file_write", json!({"path": "cap.txt", "content": "a".repeat(cap)})),
            call("file_write", json!({"path": "over.txt", "content": "a".repeat(cap + 1)})),
        ],
        "timeout_secs": 120,
    }));
    let r = out["results"].as_array().unwrap();
    assert_ok(&r[0]);
    assert_eq!(mcp::protocol_error(&r[1]), None, "{}", r[1]);
    assert_tool_error(&r[1], "too_large", "16777216");
    let home = server.data.join("home/me");
    assert_eq!(
        std::fs::metadata(home.join("cap.txt")).unwrap().len(),
        cap as u64
    );
    assert!(!home.join("over.txt").exists());
}

#[test]
fn file_edit_changes_all_files_or_none_and_says_which_edit_failed() {
    let site = Site::new("");
    let a = site.write("a.txt", "alpha beta\ngamma\n");
    let b = site.write("b.txt", "same same\n");
    let crlf = site.write("w.txt", "first\r\nsecond\r\n");
    site.write("latin1.txt", [b'c', b'a', b'f', 0xe9, b'\n']);
    let r = site.results(vec![
        call("file_edit", json!({"edits": [{"path": "a.txt", "oldText": "delta", "newText": "x"}]})),
        call("file_edit", json!({"edits": [{"path": "b.txt", "oldText": "same", "newText": "x"}]})),
        // The first edit would work; the second fails: neither file changes.
        call("file_edit", json!({"edits": [
            {"path": "a.txt", "oldText": "alpha", "newText": "ALPHA"},
            {"path": "b.txt", "oldText": "missing", "newText": "x"},
        ]})),
        call("file_edit", json!({"edits": [{"path": "latin1.txt", "oldText": "caf", "newText": "x"}]})),
        call("file_edit", json!({"edits": [
            {"path": "a.txt", "oldText": "alpha", "newText": "ALPHA"},
            {"path": "~/a.txt", "oldText": "gamma", "newText": "GAMMA"},
            {"path": "b.txt", "oldText": "same same", "newText": "different"},
        ]})),
        call("file_edit", json!({"edits": [{"path": "w.txt", "oldText": "first\nsecond", "newText": "one\ntwo"}]})),
        call("file_edit", json!({"edits": []})),
    ]);
    assert_tool_error(&r[0], "no_match", "edit 1");
    assert!(text_of(&r[0]).contains("0 matches"));
    assert_tool_error(&r[1], "ambiguous_match", "occurs 2 times");
    assert_tool_error(&r[2], "no_match", "edit 2");
    assert_tool_error(&r[3], "not_text", "not valid UTF-8");
    assert_ok(&r[4]);
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "ALPHA beta\nGAMMA\n");
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "different\n");
    assert_ok(&r[5]);
    assert_eq!(std::fs::read_to_string(&crlf).unwrap(), "one\r\ntwo\r\n");
    assert!(is_error(&r[6]));
}

#[test]
fn file_preview_describes_text_csv_png_pdf_docx_and_zip() {
    let site = Site::new("");
    let fixtures = site.home().join("fx");
    let status = Command::new(mcp::python())
        .arg(mcp::mcp_dir().join("fixtures.py"))
        .arg(&fixtures)
        .args(["--big-png", "6000x4000"])
        .status()
        .unwrap();
    assert!(status.success());
    site.write("notes.txt", "a note\nsecond line\n");
    site.write("t.csv", "name,age\nann,3\nbob,4\n");
    let r = site.results(vec![
        call("file_preview", json!({"path": "notes.txt"})),
        call("file_preview", json!({"path": "t.csv"})),
        call("file_preview", json!({"path": "fx/small.png"})),
        call("file_preview", json!({"path": "fx/report.pdf"})),
        call("file_preview", json!({"path": "fx/letter.docx"})),
        call("file_preview", json!({"path": "fx/bundle.zip"})),
        call("image_read", json!({"path": "fx/big.png"})),
        call("image_read", json!({"path": "notes.txt"})),
    ]);
    let text = assert_ok(&r[0]);
    assert!(
        text.contains("text/plain") && text.contains("a note"),
        "{text}"
    );
    assert!(text.contains(&support::sha256_hex(b"a note\nsecond line\n")));
    let csv = assert_ok(&r[1]);
    assert!(
        csv.contains("text/csv") && csv.contains("name | age"),
        "{csv}"
    );
    let png = assert_ok(&r[2]);
    assert!(png.contains("64 × 48"), "{png}");
    assert_eq!(r[2]["content"][1]["type"], "image");
    let pdf = assert_ok(&r[3]);
    assert!(
        pdf.contains("2 pages") && pdf.contains("First page words"),
        "{pdf}"
    );
    assert!(!pdf.contains("Second page words"));
    let docx = assert_ok(&r[4]);
    assert!(
        docx.contains("wordprocessingml") && docx.contains("word/document.xml"),
        "{docx}"
    );
    let zip = assert_ok(&r[5]);
    assert!(
        zip.contains("application/zip") && zip.contains("data/numbers.csv"),
        "{zip}"
    );
    let image = assert_ok(&r[6]);
    assert!(image.contains("6000×4000 shown as 2000×1333"), "{image}");
    let content = &r[6]["content"][1];
    assert_eq!(content["type"], "image");
    // base64 of at most 5 MiB.
    assert!(content["data"].as_str().unwrap().len() <= 5 * 1024 * 1024 * 4 / 3 + 4);
    assert!(is_error(&r[7]));
}

#[test]
fn paths_from_the_model_are_hostile() {
    let site = Site::new("");
    let secret = site.data.join("home/bob-secret.txt");
    std::fs::write(&secret, "bob's").unwrap();
    site.write("ok.txt", "fine\n");
    symlink("/etc/passwd", site.home().join("link-out")).unwrap();
    symlink("ok.txt", site.home().join("link-in")).unwrap();
    let outside = secret.to_str().unwrap();
    let r = site.results(vec![
        call("file_read", json!({"path": "../bob-secret.txt"})),
        call("file_read", json!({"path": outside})),
        call("file_read", json!({"path": "/etc/passwd"})),
        call("file_read", json!({"path": "link-out"})),
        call("file_read", json!({"path": "ok\u{0}.txt"})),
        call("file_read", json!({"path": ""})),
        call("file_read", json!({"path": "a/".repeat(2100)})),
        call(
            "file_write",
            json!({"path": "link-in", "content": "through a link"}),
        ),
        call(
            "file_write",
            json!({"path": "../escape.txt", "content": "x"}),
        ),
        call("file_read", json!({"path": "link-in"})),
        call("file_read", json!({"path": 7})),
        call("file_read", json!({"path": "ok.txt", "extra": true})),
        call("file_edit", json!({"edits": "not a list"})),
        call("dir_list", json!({"path": "~", "maxEntries": "many"})),
    ]);
    for (i, code) in [
        (0, "path_escapes"),
        (1, "path_escapes"),
        (2, "path_escapes"),
        (3, "path_escapes"),
        (4, "bad_path"),
        (5, "bad_path"),
        (6, "bad_path"),
        (7, "path_escapes"),
        (8, "path_escapes"),
    ] {
        assert_tool_error(&r[i], code, "");
    }
    assert!(!text_of(&r[1]).contains("bob's"));
    assert_eq!(
        std::fs::read_to_string(site.home().join("ok.txt")).unwrap(),
        "fine\n"
    );
    assert!(!site.data.join("home/escape.txt").exists());
    // Reads may follow a link that stays inside.
    assert!(assert_ok(&r[9]).contains("fine"));
    for result in &r[10..14] {
        assert_tool_error(result, "invalid_arguments", "input schema");
    }
}

#[test]
fn a_symlink_swapped_during_reads_and_writes_never_leads_out() {
    let site = Site::new("");
    let outside = site.data.join("outside.txt");
    std::fs::write(&outside, "OUTSIDE").unwrap();
    let inside = site.write("inside.txt", "INSIDE");
    let target = site.home().join("swap");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, target, outside) = (stop.clone(), target.clone(), outside.clone());
        std::thread::spawn(move || {
            let staged = target.with_file_name("swap.staged");
            let mut flips = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::remove_file(&staged);
                if flips.is_multiple_of(2) {
                    symlink(&outside, &staged).unwrap();
                } else {
                    std::fs::write(&staged, "PLAIN").unwrap();
                }
                std::fs::rename(&staged, &target).unwrap();
                flips += 1;
            }
            flips
        })
    };
    let mut steps = Vec::new();
    for i in 0..1500 {
        steps.push(call("file_read", json!({"path": "swap"})));
        steps.push(call(
            "file_write",
            json!({"path": "swap", "content": format!("W{i}")}),
        ));
    }
    let results = site.results(steps);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let flips = swapper.join().unwrap();
    assert!(flips > 100, "the swapper barely ran ({flips} flips)");
    let mut reads_ok = 0;
    for result in &results {
        let text = text_of(result);
        assert!(!text.contains("OUTSIDE"), "escaped: {text}");
        if !is_error(result) {
            reads_ok += 1;
        }
    }
    assert!(reads_ok > 0, "no call succeeded at all");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "OUTSIDE");
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), "INSIDE");
}

#[test]
fn dir_list_pages_within_the_text_budget_and_binds_tokens_to_the_folder() {
    let site = Site::new("");
    let many = site.home().join("many");
    std::fs::create_dir(&many).unwrap();
    for i in 0..1000 {
        std::fs::write(many.join(format!("file-{i:04}.txt")), "x").unwrap();
    }
    std::fs::create_dir(many.join("sub")).unwrap();
    let mut token: Option<String> = None;
    let mut seen = Vec::new();
    for _ in 0..50 {
        let mut args = json!({"path": "many", "maxEntries": 5000});
        if let Some(t) = &token {
            args["pageToken"] = json!(t);
        }
        let result = site.one("dir_list", args);
        let text = assert_ok(&result);
        assert!(text.len() <= 8192, "{} bytes", text.len());
        assert!(text.starts_with("<<<EXTERNAL_CONTENT id=\""), "{text}");
        for entry in result["structuredContent"]["entries"].as_array().unwrap() {
            seen.push(entry["name"].as_str().unwrap().to_owned());
        }
        token = result["structuredContent"]["nextPageToken"]
            .as_str()
            .map(str::to_owned);
        if token.is_none() {
            break;
        }
        assert!(text.contains(&format!("nextPageToken: {}", token.as_ref().unwrap())));
    }
    let mut expected: Vec<String> = (0..1000).map(|i| format!("file-{i:04}.txt")).collect();
    expected.push("sub".into());
    assert_eq!(seen, expected, "every entry once, in byte order");
    // A token of one folder is refused for another.
    let first = site.one("dir_list", json!({"path": "many", "maxEntries": 3}));
    let t = first["structuredContent"]["nextPageToken"]
        .as_str()
        .unwrap()
        .to_owned();
    let other = site.one("dir_list", json!({"path": "~", "pageToken": t}));
    assert_tool_error(&other, "bad_page_token", "same path");
    let zero = site.one("dir_list", json!({"path": "many", "maxEntries": 0}));
    assert!(is_error(&zero));
}

#[test]
fn skill_search_returns_only_the_chosen_skill_body() {
    let site = Site::new("");
    for (name, description, body) in [
        (
            "pdf-tools",
            "Fill and merge PDF forms",
            "Use qpdf to merge.",
        ),
        (
            "csv-clean",
            "Clean CSV spreadsheets",
            "Use csvkit to clean.",
        ),
    ] {
        let dir = site.data.join("skills").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n"),
        )
        .unwrap();
        std::fs::write(dir.join("helper.sh"), "echo helper\n").unwrap();
    }
    let r = site.results(vec![
        call("skill_search", json!({"query": "merge pdf"})),
        call("skill_search", json!({"query": "quantum"})),
    ]);
    let found = assert_ok(&r[0]);
    assert!(
        found.contains("Use qpdf to merge.") && !found.contains("csvkit"),
        "{found}"
    );
    assert!(!found.contains("echo helper"));
    assert_tool_error(&r[1], "no_skill", "csv-clean");
}

#[test]
fn file_delete_asks_through_elicitation_and_refuses_without_a_channel() {
    let site = Site::new("");
    let accepted = site.write("yes.txt", "1");
    let declined = site.write("no.txt", "2");
    let unasked = site.write("unasked.txt", "3");
    let out = site.session(
        Some("accept"),
        vec![call("file_delete", json!({"path": "yes.txt"}))],
    );
    assert_ok(&out["results"][0]);
    assert!(!accepted.exists());
    let prompt = &out["elicitations"][0];
    assert!(
        prompt["message"].as_str().unwrap().contains("yes.txt"),
        "{prompt}"
    );
    let out = site.session(
        Some("decline"),
        vec![call("file_delete", json!({"path": "no.txt"}))],
    );
    assert_tool_error(&out["results"][0], "denied", "nothing was deleted");
    assert!(declined.exists());
    let out = site.session(
        Some("cancel"),
        vec![call("file_delete", json!({"path": "no.txt"}))],
    );
    assert_tool_error(&out["results"][0], "denied", "nothing was deleted");
    assert!(declined.exists());
    // No elicitation and no web client open: nothing to ask through.
    let r = site.one("file_delete", json!({"path": "unasked.txt"}));
    assert_tool_error(&r, "no_approval_channel", "nothing was deleted");
    assert!(unasked.exists());
    // A folder is never deleted, asked or not.
    std::fs::create_dir(site.home().join("dir")).unwrap();
    let out = site.session(
        Some("accept"),
        vec![call("file_delete", json!({"path": "dir"}))],
    );
    assert_tool_error(&out["results"][0], "is_directory", "one file");
    assert!(out["elicitations"].as_array().unwrap().is_empty());
}

#[test]
fn file_delete_without_approval_when_configured_auto() {
    let site = Site::new("[tools]\ndelete_approval = \"auto\"\n");
    let file = site.write("gone.txt", "1");
    assert_ok(&site.one("file_delete", json!({"path": "gone.txt"})));
    assert!(!file.exists());
}

#[test]
fn terminal_run_is_refused_as_root() {
    let site = Site::new("");
    let r = site.one("terminal_run", json!({"command": "id"}));
    assert_tool_error(&r, "refused_as_root", "root");
}

#[test]
fn terminal_run_runs_as_the_person_behind_the_guardrail() {
    let site = Site::for_nobody("");
    let marker = site.home().join("grandchild-ran");
    let r = site.results(vec![
        call("terminal_run", json!({"command": "env | cut -d= -f1 | sort | tr '\\n' ' '; echo; id -u"})),
        call("terminal_run", json!({"command": "(sleep 3; touch grandchild-ran) & sleep 30", "timeoutSecs": 1})),
        call("terminal_run", json!({"command": "head -c 300000 /dev/zero | tr '\\0' 'y'; echo; echo to-stderr >&2; exit 3"})),
        call("terminal_run", json!({"command": "pwd", "cwd": "/etc"})),
        call("terminal_run", json!({"command": "pwd", "cwd": "../.."})),
        call("terminal_run", json!({"command": "true", "timeoutSecs": 0})),
        call("terminal_run", json!({"command": "pwd", "cwd": site.private().join("tmp").to_str().unwrap()})),
    ]);
    let env = assert_ok(&r[0]);
    let stdout = r[0]["structuredContent"]["stdout"].as_str().unwrap();
    let names: Vec<&str> = stdout
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        names,
        [
            "HOME", "LANG", "LC_ALL", "LOGNAME", "PATH", "PWD", "SHLVL", "TERM", "TMPDIR", "TZ",
            "USER", "_"
        ],
        "{env}"
    );
    assert_eq!(
        r[0]["structuredContent"]["stdout"]
            .as_str()
            .unwrap()
            .lines()
            .nth(1),
        Some("65534")
    );
    assert_ok(&r[1]);
    assert_eq!(r[1]["structuredContent"]["timedOut"], true);
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert!(
        !marker.exists(),
        "the backgrounded grandchild outlived the timeout"
    );
    let long = assert_ok(&r[2]);
    assert_eq!(r[2]["structuredContent"]["exitCode"], 3);
    assert!(long.contains("to-stderr"));
    let full = r[2]["structuredContent"]["fullOutputPath"]
        .as_str()
        .unwrap();
    assert!(
        Path::new(full).starts_with(site.private().canonicalize().unwrap()),
        "{full}"
    );
    assert!(
        std::fs::read_to_string(full)
            .unwrap()
            .contains(&"y".repeat(300_000))
    );
    assert_tool_error(&r[3], "path_escapes", "outside");
    assert_tool_error(&r[4], "path_escapes", "outside");
    assert_tool_error(&r[5], "invalid_arguments", "timeoutSecs must be at least 1");
    assert!(assert_ok(&r[6]).contains("private/people/alice/tmp"));
}

#[test]
fn terminal_run_holds_timeout_secs_to_the_schema_maximum_of_600() {
    let site = Site::for_nobody("");
    let run = |secs: Value| {
        call(
            "terminal_run",
            json!({"command": format!("touch ran-{secs}"), "timeoutSecs": secs}),
        )
    };
    let r = site.results(vec![
        run(json!(599)),
        run(json!(600)),
        run(json!(601)),
        run(json!(86400)),
    ]);
    assert_ok(&r[0]);
    assert_ok(&r[1]);
    assert!(site.home().join("ran-599").exists() && site.home().join("ran-600").exists());
    assert_tool_error(
        &r[2],
        "invalid_arguments",
        "timeoutSecs must be at most 600 (got 601)",
    );
    assert_tool_error(&r[3], "invalid_arguments", "at most 600");
    assert!(!site.home().join("ran-601").exists() && !site.home().join("ran-86400").exists());
}

/// `docs/agent/FILE_DELIVERY.md` as shipped.
fn shipped_file_delivery() -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(repo.join("docs/agent/FILE_DELIVERY.md")).unwrap()
}

#[test]
fn memory_file_delivery_md_cannot_be_replaced_by_any_tool_or_command() {
    let shipped = shipped_file_delivery();
    for sandbox in ["none", "bwrap", "landlock"] {
        let site = Site::for_nobody(&format!(
            "[exec]\nsandbox = \"{sandbox}\"\n[tools]\ndelete_approval = \"auto\"\n"
        ));
        let doc = site.home().join("memory/FILE_DELIVERY.md");
        assert_eq!(std::fs::read_to_string(&doc).unwrap(), shipped);
        let out = site.ferry_cli(&["project", "add", "alice", "q2"]);
        assert!(out.status.success(), "{out:?}");
        site.give_to_nobody();
        let absolute = doc.canonicalize().unwrap();
        let evil = json!({"path": "memory/FILE_DELIVERY.md", "content": "Deliver to uploads/."});
        let mut steps = vec![
            call("file_write", evil.clone()),
            call(
                "file_write",
                json!({"path": "~/memory/FILE_DELIVERY.md", "content": "x"}),
            ),
            call("file_write", json!({"path": absolute, "content": "x"})),
            call(
                "file_write",
                json!({"path": "./memory//FILE_DELIVERY.md", "content": "x"}),
            ),
            call(
                "file_write",
                json!({"path": "projects/q2/../../memory/FILE_DELIVERY.md", "content": "x"}),
            ),
            call(
                "file_write",
                json!({"path": "memory/NOTES.md", "content": "x"}),
            ),
            call(
                "file_edit",
                json!({"edits": [{"path": "memory/FILE_DELIVERY.md", "oldText": "public/attachments", "newText": "uploads"}]}),
            ),
            call("file_delete", json!({"path": "memory/FILE_DELIVERY.md"})),
        ];
        // Commands: a rename over it, a delete, a change of mode then a write, the whole
        // folder swapped; each in its own call, each followed by a look at what is there.
        let commands = [
            "echo evil > evil.md && mv -f evil.md memory/FILE_DELIVERY.md",
            "rm -f memory/FILE_DELIVERY.md",
            "chmod u+w memory/FILE_DELIVERY.md && echo evil > memory/FILE_DELIVERY.md",
            "mv memory memory.old && mkdir memory && echo evil > memory/FILE_DELIVERY.md",
            "cd projects/q2 && mv -f ../../memory/FILE_DELIVERY.md gone.md",
        ];
        for command in commands {
            steps.push(call("terminal_run", json!({"command": command})));
            steps.push(call(
                "file_read",
                json!({"path": "memory/FILE_DELIVERY.md"}),
            ));
        }
        let r = site.results(steps);
        for i in [0, 1, 2, 3, 5] {
            assert_tool_error(&r[i], "read_only", "provisioned by the system");
        }
        assert_tool_error(&r[4], "path_escapes", "without `..`");
        assert!(is_error(&r[6]), "{}", r[6]);
        assert_tool_error(&r[7], "read_only", "provisioned by the system");
        for (i, command) in commands.iter().enumerate() {
            // The command itself ran (whatever it managed), in every sandbox.
            let ran = &r[8 + 2 * i];
            assert!(!is_error(ran), "{sandbox}: {command:?}: {ran}");
            let after = &r[8 + 2 * i + 1];
            let text = assert_ok(after);
            assert!(
                text.contains("public/attachments") && !text.contains("evil"),
                "{sandbox}: after {command:?}: {text}"
            );
            assert_eq!(
                std::fs::read_to_string(&doc).unwrap(),
                shipped,
                "{sandbox}: after {command:?}"
            );
        }
        if sandbox == "bwrap" {
            // Under bubblewrap the folder is mounted read-only: the commands fail outright.
            for i in 0..commands.len() {
                let ran = &r[8 + 2 * i];
                assert_ne!(ran["structuredContent"]["exitCode"], 0, "{sandbox}: {ran}");
            }
        }
        assert!(!site.home().join("memory/NOTES.md").exists());
    }
}

#[test]
fn file_write_never_creates_the_legacy_uploads_folder() {
    let site = Site::new("");
    let out = site.ferry_cli(&["project", "add", "alice", "q2"]);
    assert!(out.status.success(), "{out:?}");
    let home = site.home().canonicalize().unwrap();
    let write = |path: Value| call("file_write", json!({"path": path, "content": "x"}));
    let r = site.results(vec![
        write(json!("uploads/report.md")),
        write(json!("~/uploads/a/b.md")),
        write(json!(home.join("uploads/c.md"))),
        write(json!("./uploads/../uploads/d.md")),
        write(json!("projects/q2/uploads/e.md")),
        write(json!("uploads")),
        // Only a workspace's own top-level uploads/ is the legacy name.
        write(json!("notes/uploads/f.md")),
        write(json!("public/uploads/g.md")),
    ]);
    assert_tool_error(&r[0], "legacy_folder", "write to public/report.md instead");
    assert_tool_error(&r[1], "legacy_folder", "write to public/a/b.md instead");
    assert_tool_error(&r[2], "legacy_folder", "public/c.md");
    assert!(is_error(&r[3]), "{}", r[3]);
    assert_tool_error(
        &r[4],
        "legacy_folder",
        "write to projects/q2/public/e.md instead",
    );
    assert_tool_error(&r[5], "legacy_folder", "write to public instead");
    assert_ok(&r[6]);
    assert_ok(&r[7]);
    assert!(!site.home().join("uploads").exists());
    assert!(!site.home().join("projects/q2/uploads").exists());
}

#[test]
fn the_full_output_file_can_be_read_back_with_file_read() {
    let site = Site::for_nobody("");
    let out = site.one("terminal_run", json!({"command": "seq 1 100000"}));
    let full = out["structuredContent"]["fullOutputPath"]
        .as_str()
        .unwrap()
        .to_owned();
    let back = site.one(
        "file_read",
        json!({"path": full, "startLine": 50001, "lineCount": 2}),
    );
    assert!(assert_ok(&back).contains("50000\n"), "{back}");
}

#[test]
fn the_sandbox_setting_is_enforced() {
    // Every sandbox (auto too): other people's trees are out of reach, the person's own work, and
    // (without `[exec] network`) there is no network. Without one, all three reach.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || for _ in listener.incoming() {});
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    for sandbox in ["none", "bwrap", "landlock", "auto"] {
        let site = Site::for_nobody(&format!("[exec]\nsandbox = \"{sandbox}\"\n"));
        let other = site.data.join("home/bob");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("secret"), "bob").unwrap();
        site.give_to_nobody();
        let r = site.results(vec![
            call(
                "terminal_run",
                json!({"command": format!("cat {}/secret", other.display())}),
            ),
            call(
                "terminal_run",
                json!({"command": "echo fine > ok.txt && cat ok.txt"}),
            ),
            call("terminal_run", json!({"command": connect})),
        ]);
        let confined = sandbox != "none";
        assert_eq!(
            r[0]["structuredContent"]["exitCode"] != 0,
            confined,
            "{sandbox}: {}",
            r[0]
        );
        assert!(assert_ok(&r[1]).contains("fine"), "{sandbox}");
        assert_eq!(
            !text_of(&r[2]).contains("connected"),
            confined,
            "{sandbox}: {}",
            r[2]
        );
    }
}

#[test]
fn nothing_a_command_started_outlives_terminal_run() {
    // setsid, setsid -f, double forks, nohup and disown, in every sandbox: at the exit
    // and at the deadline everything the command started is killed before the answer,
    // and the answer says how many were still running.
    for sandbox in ["none", "landlock", "bwrap"] {
        let site = Site::for_nobody(&format!("[exec]\nsandbox = \"{sandbox}\"\n"));
        support::assert_nothing_outlives_over_mcp(site.server_for("alice"), sandbox != "bwrap");
    }
}

#[test]
fn the_service_environment_never_reaches_a_command() {
    // A secret in the environment of `ferry mcp` and of the gateway (a real override
    // name, and one they merely inherit), both run as nobody like their commands. The
    // command reads every environment it can see: its own and its shell's, never the
    // service's (not dumpable, so /proc keeps it from the same user).
    let (secret, snippet) = support::secret();
    let scan = call(
        "terminal_run",
        json!({"command": support::environ_scan(&snippet)}),
    );
    let site = Site::for_nobody("[exec]\nsandbox = \"none\"\n");
    let ferry = site.ferry.to_str().unwrap().to_owned();
    let data = site.data.to_str().unwrap().to_owned();
    let uid = format!("--reuid={NOBODY}");
    let gid = format!("--regid={NOBODY}");
    let stdio = mcp::stdio(
        &[
            "setpriv",
            &uid,
            &gid,
            "--clear-groups",
            &ferry,
            "mcp",
            "--data",
            &data,
            "--person",
            "alice",
        ],
        &[
            ("FERRY_AGENT__MODEL", &secret),
            ("DEPLOY_API_SECRET", &secret),
        ],
    );
    let out = mcp::drive(&json!({"server": stdio, "elicitation": null, "steps": [scan.clone()]}));
    support::assert_no_leak(&out["results"][0], "bash");

    let server = support::Server::start_with(support::Options {
        as_nobody: true,
        config_toml: Some("[exec]\nsandbox = \"none\"\n".into()),
        env: vec![
            ("FERRY_AGENT__MODEL".into(), secret.clone()),
            ("DEPLOY_API_SECRET".into(), secret.clone()),
        ],
        ..Default::default()
    });
    // The control: the gateway does hold it.
    assert!(
        support::holders_of(&secret).contains(&server.pid()),
        "the gateway's environment lacks the secret"
    );
    let harness =
        support::last_line(&server.ferry(&["token", "create", "me", "--kind", "harness"]));
    let out = mcp::drive(&json!({
        "server": mcp::http(&server.url("/mcp"), &harness),
        "elicitation": null,
        "steps": [scan],
    }));
    support::assert_no_leak(&out["results"][0], "bash");
}

#[test]
fn the_bwrap_sandbox_refuses_without_bubblewrap() {
    // An operator's site whose bwrap is missing: point PATH nowhere does not matter (the
    // path is fixed), so hide it with a private mount namespace.
    let site = Site::for_nobody("[exec]\nsandbox = \"bwrap\"\n");
    let ferry = site.ferry.to_str().unwrap().to_owned();
    let data = site.data.to_str().unwrap().to_owned();
    let script = format!(
        "mount --bind /dev/null /usr/bin/bwrap && exec setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups {ferry} mcp --data {data} --person alice"
    );
    let out = mcp::drive(&json!({
        "server": mcp::stdio(&["unshare", "--mount", "--propagation", "private", "sh", "-c", &script], &[]),
        "elicitation": null,
        "steps": [call("terminal_run", json!({"command": "true"}))],
    }));
    assert_tool_error(&out["results"][0], "sandbox_unavailable", "bubblewrap");
}

/// Raw JSON-RPC lines to `ferry mcp`, and its answers by id.
fn raw_session(site: &Site, lines: &[&[u8]], ids: &[i64]) -> std::collections::HashMap<i64, Value> {
    use std::io::{BufRead, Write};
    let mut child = Command::new(&site.ferry)
        .args([
            "mcp",
            "--data",
            site.data.to_str().unwrap(),
            "--person",
            "alice",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let init = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    stdin.write_all(init).unwrap();
    stdin
        .write_all(b"\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .unwrap();
    for line in lines {
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(value) = serde_json::from_str::<Value>(&line) {
                let _ = tx.send(value);
            }
        }
    });
    let mut answers = std::collections::HashMap::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while ids.iter().any(|id| !answers.contains_key(id)) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let Ok(value) = rx.recv_timeout(left) else {
            break;
        };
        if let Some(id) = value["id"].as_i64() {
            answers.insert(id, value);
        }
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    answers
}

#[test]
fn text_that_is_not_unicode_gets_a_tool_error_not_silence() {
    let site = Site::new("");
    let file = site.write("a.txt", "keep me\n");
    let answers = raw_session(
        &site,
        &[
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"file_edit","arguments":{"edits":[{"path":"a.txt","oldText":"keep\ud800","newText":"x"}]}}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"file_write","arguments":{"path":"b\udc00.txt","content":"y"}}}"#,
            b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"file_write\",\"arguments\":{\"path\":\"c.txt\",\"content\":\"caf\xe9\"}}}",
            br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"file_write","arguments":{"path":"d.txt","content":"\ud83d\ude00"}}}"#,
        ],
        &[1, 2, 3, 4],
    );
    for id in [1, 2, 3] {
        let result = answers
            .get(&id)
            .unwrap_or_else(|| panic!("no answer to {id}: {answers:?}"));
        assert_tool_error(&result["result"], "invalid_unicode", "not valid Unicode");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me\n");
    let names: Vec<_> = std::fs::read_dir(site.home())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.to_string_lossy().starts_with('b') || n == "c.txt"),
        "{names:?}"
    );
    // A proper surrogate pair is an emoji, written as UTF-8.
    assert!(!is_error(&answers[&4]["result"]));
    assert_eq!(
        std::fs::read_to_string(site.home().join("d.txt")).unwrap(),
        "😀"
    );
}

#[test]
fn a_command_printing_a_gibibyte_keeps_64_kib_visible_and_the_rest_in_a_capped_file() {
    let site = Site::for_nobody("");
    let out = site.one(
        "terminal_run",
        json!({"command": "head -c 1073741824 /dev/zero | tr '\\0' 'z'"}),
    );
    assert!(!is_error(&out), "{out}");
    let structured = &out["structuredContent"];
    assert_eq!(structured["stdoutBytes"], 1u64 << 30);
    assert_eq!(structured["truncated"], true);
    assert!(structured["stdout"].as_str().unwrap().len() <= 64 * 1024);
    let full = structured["fullOutputPath"].as_str().unwrap();
    let saved = std::fs::metadata(full).unwrap().len();
    assert!(saved <= 256 * 1024 * 1024 + 4096, "{saved}");
    assert!(
        text_of(&out).contains("cap") || text_of(&out).contains("limit"),
        "{}",
        text_of(&out)
    );
}

/// A `tools/call` line of protocol 2026-07-28: no handshake, the client in `_meta`.
fn stateless_call(id: i64, args: Value, retry: Option<(&str, Value)>) -> Vec<u8> {
    let mut params = json!({
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        },
        "name": "file_delete",
        "arguments": args,
    });
    if let Some((state, answer)) = retry {
        params["requestState"] = json!(state);
        params["inputResponses"] = json!({ "confirm_delete": answer });
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
        .to_string()
        .into_bytes()
}

#[test]
fn from_protocol_2026_07_28_file_delete_asks_with_an_input_required_round_trip() {
    let site = Site::new("");
    let file = site.write("old.txt", "old");
    let args = json!({"path": "old.txt"});
    let first = raw_session(&site, &[&stateless_call(1, args.clone(), None)], &[1]);
    let asked = &first[&1]["result"];
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let request = &asked["inputRequests"]["confirm_delete"];
    assert_eq!(request["method"], "elicitation/create");
    assert!(
        request["params"]["message"]
            .as_str()
            .unwrap()
            .contains("old.txt")
    );
    let state = asked["requestState"].as_str().unwrap().to_owned();
    assert!(file.exists(), "asking deletes nothing");

    let declined = json!({"action": "decline"});
    let answer = raw_session(
        &site,
        &[&stateless_call(2, args.clone(), Some((&state, declined)))],
        &[2],
    );
    assert_tool_error(&answer[&2]["result"], "denied", "nothing was deleted");
    assert!(file.exists());

    // An answer for other arguments (another state) is not taken: it is asked again.
    let accepted = json!({"action": "accept", "content": {"confirm": true}});
    let other = raw_session(
        &site,
        &[&stateless_call(
            3,
            args.clone(),
            Some(("0000", accepted.clone())),
        )],
        &[3],
    );
    assert_eq!(other[&3]["result"]["resultType"], "input_required");
    assert!(file.exists());

    let answer = raw_session(
        &site,
        &[&stateless_call(4, args, Some((&state, accepted)))],
        &[4],
    );
    assert!(!is_error(&answer[&4]["result"]), "{}", answer[&4]);
    assert!(!file.exists());
}

// ---------------------------------------------------------------------------------------
// Roots that are links (core C-PATH): every root is reached from the data folder one
// component at a time, with no link followed
// ---------------------------------------------------------------------------------------

/// What the file in [`outside_for_nobody`] holds.
const SECRET: &str = "the secret outside the site\n";

/// A folder outside every site that `nobody` may read and write, holding `secret.txt`:
/// a tool (running as `nobody`) that followed a link into it would succeed.
fn outside_for_nobody() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("secret.txt"), SECRET).unwrap();
    let status = Command::new("chown")
        .args(["-R", &format!("{NOBODY}:{NOBODY}")])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// The folder of [`outside_for_nobody`] holds exactly what it was made with.
#[track_caller]
fn assert_outside_untouched(outside: &Path) {
    let names: Vec<String> = std::fs::read_dir(outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["secret.txt"], "nothing was written outside");
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        SECRET
    );
}

impl Site {
    /// A site owned by `nobody` with `alice` and `bob`, both in circle `team`.
    fn with_bob_and_a_circle(config: &str) -> Site {
        let site = Site::for_nobody(config);
        site.ferry_ok(&["person", "add", "bob"]);
        site.ferry_ok(&[
            "circle", "add", "team", "--member", "alice", "--member", "bob",
        ]);
        site.give_to_nobody();
        site
    }

    /// Replaces the folder `rel` of the site with a symbolic link to `target`, and returns
    /// the folder's absolute path as the tools see it.
    fn link_root(&self, rel: &str, target: &Path) -> PathBuf {
        let path = self.data.canonicalize().unwrap().join(rel);
        std::fs::remove_dir_all(&path).unwrap();
        symlink(target, &path).unwrap();
        path
    }
}

fn at(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_owned()
}

#[test]
fn every_tool_refuses_a_root_that_is_a_link_and_the_other_roots_keep_working() {
    let roots = [
        "shared/public",
        "circles/team",
        "skills",
        "home/alice",
        "private/people/alice",
    ];
    for root in roots {
        let site = Site::with_bob_and_a_circle("");
        let outside = outside_for_nobody();
        let linked = site.link_root(root, outside.path());
        let data = site.data.canonicalize().unwrap();
        // A root of alice's that is still a real folder.
        let other = match root {
            "home/alice" => data.join("private/people/alice/tmp"),
            _ => data.join("home/alice"),
        };
        let results = site.results(vec![
            call("file_read", json!({"path": at(&linked, "secret.txt")})),
            call("dir_list", json!({"path": at(&linked, ".")})),
            call("dir_list", json!({"path": linked.to_str().unwrap()})),
            call(
                "file_write",
                json!({"path": at(&linked, "new.txt"), "content": "x"}),
            ),
            call("file_deliver", json!({"paths": [at(&linked, "secret.txt")]})),
            call(
                "terminal_run",
                json!({"command": "cat secret.txt; touch new.txt", "cwd": linked.to_str().unwrap()}),
            ),
            call("file_preview", json!({"path": at(&linked, "secret.txt")})),
            // The person's other roots keep working.
            call(
                "file_write",
                json!({"path": at(&other, "fine.txt"), "content": "fine\n"}),
            ),
            call("file_read", json!({"path": at(&other, "fine.txt")})),
            call(
                "terminal_run",
                json!({"command": "cat fine.txt", "cwd": other.to_str().unwrap()}),
            ),
        ]);
        for result in &results[..7] {
            assert_tool_error(result, "path_escapes", "symbolic link");
            assert!(!text_of(result).contains(SECRET.trim()), "{root}: {result}");
        }
        assert!(assert_ok(&results[8]).contains("fine"), "{root}");
        if root == "private/people/alice" {
            // Commands save long output under private/: refused, never written outside.
            assert_tool_error(&results[9], "path_escapes", "terminal-output");
        } else {
            assert!(assert_ok(&results[9]).contains("fine"), "{root}");
        }
        assert_outside_untouched(outside.path());

        // Another person is served as before; a shared root is refused for them too.
        let bob_home = data.join("home/bob");
        let bob = site.results_of(
            "bob",
            vec![
                call(
                    "file_write",
                    json!({"path": at(&bob_home, "b.txt"), "content": "bob's\n"}),
                ),
                call("file_read", json!({"path": "b.txt"})),
                call("terminal_run", json!({"command": "cat b.txt"})),
                call("file_read", json!({"path": at(&linked, "secret.txt")})),
            ],
        );
        assert!(assert_ok(&bob[1]).contains("bob's"), "{root}");
        assert!(assert_ok(&bob[2]).contains("bob's"), "{root}");
        if root.starts_with("home/") || root.starts_with("private/") {
            // Not one of bob's folders at all.
            assert_tool_error(&bob[3], "path_escapes", "outside the folders");
        } else {
            assert_tool_error(&bob[3], "path_escapes", "symbolic link");
        }
        assert_outside_untouched(outside.path());
    }
}

#[test]
fn skill_search_loads_nothing_through_a_skills_folder_that_is_a_link() {
    let site = Site::for_nobody("");
    let outside = outside_for_nobody();
    let skill = outside.path().join("evil");
    std::fs::create_dir(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: evil\ndescription: planted outside the site\n---\nrun me\n",
    )
    .unwrap();
    site.link_root("skills", outside.path());
    let result = site.one("skill_search", json!({"query": "evil planted"}));
    assert_tool_error(&result, "path_escapes", "symbolic link");
    assert!(!text_of(&result).contains("run me"));
}

#[test]
fn no_sandbox_binds_a_root_that_is_a_link() {
    // A command under either sandbox does not see the folder a linked root points to:
    // the root is left out of the sandbox (and a working folder in it is refused).
    for sandbox in ["bwrap", "landlock"] {
        let site = Site::with_bob_and_a_circle(&format!("[exec]\nsandbox = \"{sandbox}\"\n"));
        let outside = outside_for_nobody();
        let linked = site.link_root("shared/public", outside.path());
        let secret = outside.path().join("secret.txt");
        let results = site.results(vec![
            call(
                "terminal_run",
                json!({"command": format!(
                    "cat {} {}; echo x > {}/planted.txt; echo done",
                    at(&linked, "secret.txt"),
                    secret.display(),
                    linked.display()
                )}),
            ),
            call(
                "terminal_run",
                json!({"command": "pwd", "cwd": linked.to_str().unwrap()}),
            ),
        ]);
        let out = assert_ok(&results[0]);
        assert!(out.contains("done"), "{sandbox}: the command ran: {out}");
        assert!(!out.contains(SECRET.trim()), "{sandbox}: {out}");
        assert_tool_error(&results[1], "path_escapes", "symbolic link");
        assert_outside_untouched(outside.path());
    }
}

/// In the environment of the server that runs the commands: what `/proc/<pid>/environ`
/// would give away.
const SERVER_SECRET: &str = "server-secret-5b1f9e";
const BOBS_SECRET: &str = "bob-secret-27c4";

/// A site (ferry.toml: `config`) where bob lives beside alice, with a secret in his home
/// and in his drafts, and one skill; all of it owned by `nobody`.
fn site_with_bob(config: &str) -> Site {
    let site = Site::for_nobody(config);
    let out = Command::new(&site.ferry)
        .args(["person", "add", "bob", "--data"])
        .arg(&site.data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let bob = site.data.join("home/bob");
    std::fs::write(bob.join("secret.txt"), BOBS_SECRET).unwrap();
    let drafts = site.data.join("private/people/bob/tmp");
    std::fs::create_dir_all(&drafts).unwrap();
    std::fs::write(drafts.join("draft.txt"), BOBS_SECRET).unwrap();
    let skill = site.data.join("skills/notes");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: notes\ndescription: Take notes\n---\nWrite them down.\n",
    )
    .unwrap();
    site.give_to_nobody();
    site
}

/// Commands that go for the site's database, bob's trees, and the server process
/// `server` (a pid, or a shell expression for one).
fn attacks(data: &Path, server: &str) -> Vec<String> {
    let data = data.display();
    let db = format!("{data}/.ferry/site.db");
    vec![
        format!("cat {db}"),
        format!("sqlite3 {db} 'select count(*) from tokens'"),
        format!("sqlite3 {db} \"insert into tokens (prefix) values ('fy_planted')\""),
        format!("cp {db} stolen.db"),
        format!("echo planted >> {db}"),
        format!("ls {data}/.ferry"),
        format!("ls {data}/home"),
        format!("ls {data}/home/bob"),
        format!("cat {data}/home/bob/secret.txt"),
        format!("echo planted > {data}/home/bob/planted.txt"),
        format!("ls {data}/private/people/bob/tmp"),
        format!("cat {data}/private/people/bob/tmp/draft.txt"),
        format!("cat /proc/{server}/environ"),
        format!("cat /proc/{server}/cmdline"),
        format!("ls /proc/{server}/fd"),
        format!("head -c 16 /proc/{server}/mem"),
        format!("kill -0 {server}"),
        format!("kill -TERM {server}"),
        format!("kill -KILL {server}"),
        // A descriptor of the server's (its database, a socket) left open across exec;
        // no sandbox mediates those.
        "python3 -c 'import os, sys\n\
         open_fds = []\n\
         for fd in range(3, 1024):\n\
         \x20   try: os.fstat(fd); open_fds.append(fd)\n\
         \x20   except OSError: pass\n\
         print(\"open:\", open_fds); sys.exit(0 if open_fds else 1)'"
            .to_owned(),
    ]
}

/// Every process the user may signal, the server too were it not kept out. Its exit
/// code says nothing (kill(-1) succeeds when every signal was refused), the server's
/// next answer does.
const KILL_ALL: &str = "kill -KILL -1";

/// Every attack failed and gave nothing away; the site's database is what it was, and
/// bob's home holds nothing new.
#[track_caller]
fn assert_all_refused(
    data: &Path,
    person: &str,
    steps: &[String],
    results: &[Value],
    db_before: &[u8],
) {
    for (command, result) in steps.iter().zip(results) {
        let text = text_of(result);
        let head: String = text.chars().take(300).collect();
        assert!(!is_error(result), "{command}: {head}");
        assert_ne!(
            result["structuredContent"]["exitCode"], 0,
            "{command} succeeded: {head}"
        );
        for secret in [SERVER_SECRET, BOBS_SECRET, "SQLite format", "tokens"] {
            assert!(
                !text.contains(secret),
                "{command} gave away {secret:?}: {head}"
            );
        }
    }
    let db = std::fs::read(data.join(".ferry/site.db")).unwrap();
    assert!(db == db_before, "the site's database changed");
    assert!(!data.join("home").join(person).join("stolen.db").exists());
    assert!(!data.join("home/bob/planted.txt").exists());
}

#[test]
fn by_default_a_command_reaches_neither_the_site_nor_other_people_nor_its_server() {
    // No [exec] section: the default sandbox, against `ferry mcp` itself (the command's
    // parent, $PPID) and everything the service can reach.
    let site = site_with_bob("");
    let db_before = std::fs::read(site.data.join(".ferry/site.db")).unwrap();
    let steps = attacks(&site.data, "$PPID");
    let mut calls: Vec<Value> = steps
        .iter()
        .map(|c| call("terminal_run", json!({"command": c})))
        .collect();
    calls.push(call("terminal_run", json!({"command": KILL_ALL})));
    let skill = site.data.join("skills/notes/SKILL.md");
    calls.push(call(
        "terminal_run",
        json!({"command": format!("echo mine > ~/mine.txt && cat ~/mine.txt {}", skill.display())}),
    ));
    let out = mcp::drive(&json!({
        "server": site.server_with_env("alice", &[("SERVER_SECRET", SERVER_SECRET)]),
        "elicitation": null,
        "steps": calls,
        "timeout_secs": 120,
    }));
    let results = out["results"].as_array().unwrap();
    assert_all_refused(&site.data, "alice", &steps, results, &db_before);
    // The server survived every kill, and the person's own work still runs.
    let own = assert_ok(&results[steps.len() + 1]);
    assert!(
        own.contains("mine\n") && own.contains("Write them down."),
        "{own}"
    );
    assert_eq!(
        std::fs::read_to_string(site.home().join("mine.txt")).unwrap(),
        "mine\n"
    );

    // The control: with the sandbox turned off, the same commands do reach (so $PPID is
    // the server, and the secrets are where the attacks look).
    let site = site_with_bob("[exec]\nsandbox = \"none\"\n");
    let data = site.data.display();
    let r = mcp::drive(&json!({
        "server": site.server_with_env("alice", &[("SERVER_SECRET", SERVER_SECRET)]),
        "elicitation": null,
        "steps": [
            call("terminal_run", json!({"command": format!("head -c 15 {data}/.ferry/site.db")})),
            call("terminal_run", json!({"command": format!("cat {data}/home/bob/secret.txt")})),
            call("terminal_run", json!({"command": "tr '\\0' ' ' < /proc/$PPID/environ"})),
            call("terminal_run", json!({"command": "tr '\\0' ' ' < /proc/$PPID/cmdline"})),
            call("terminal_run", json!({"command": "kill -0 $PPID && echo signalled"})),
        ],
    }));
    let r = r["results"].as_array().unwrap();
    assert!(assert_ok(&r[0]).contains("SQLite format 3"), "{}", r[0]);
    assert!(assert_ok(&r[1]).contains(BOBS_SECRET), "{}", r[1]);
    // The server is not dumpable, so even unsandboxed its environment stays closed.
    assert!(
        !text_of(&r[2]).contains(SERVER_SECRET) && text_of(&r[2]).contains("Permission denied"),
        "{}",
        r[2]
    );
    assert!(assert_ok(&r[3]).contains(" mcp --data "), "{}", r[3]);
    assert!(assert_ok(&r[4]).contains("signalled"), "{}", r[4]);
}

/// A gateway on a site of `nobody` (with `config`), a harness token of `me`, and bob.
fn gateway_with_bob(
    config: Option<&str>,
    seccomp: Option<&'static [libc::sock_filter]>,
) -> (support::Server, String) {
    let server = support::Server::start_with(support::Options {
        config_toml: config.map(str::to_owned),
        env: vec![("SERVER_SECRET".into(), SERVER_SECRET.into())],
        as_nobody: true,
        seccomp,
        ..support::Options::default()
    });
    let harness = server.create_token("me", "harness");
    let out = server.ferry(&["person", "add", "bob"]);
    assert!(out.status.success(), "{out:?}");
    std::fs::write(server.home("bob").join("secret.txt"), BOBS_SECRET).unwrap();
    let drafts = server.data.join("private/people/bob/tmp");
    std::fs::create_dir_all(&drafts).unwrap();
    std::fs::write(drafts.join("draft.txt"), BOBS_SECRET).unwrap();
    let status = Command::new("chown")
        .args(["-R", &format!("{NOBODY}:{NOBODY}")])
        .arg(&server.data)
        .status()
        .unwrap();
    assert!(status.success());
    (server, harness)
}

/// Runs each command with `terminal_run` over the gateway's `/mcp`.
fn run_over_http(server: &support::Server, harness: &str, commands: &[String]) -> Vec<Value> {
    let steps: Vec<Value> = commands
        .iter()
        .map(|c| call("terminal_run", json!({"command": c})))
        .collect();
    let out = mcp::drive(&json!({
        "server": mcp::http(&server.url("/mcp"), harness),
        "elicitation": null,
        "steps": steps,
        "timeout_secs": 120,
    }));
    out["results"].as_array().unwrap().clone()
}

#[test]
fn by_default_a_command_cannot_read_or_signal_the_gateway() {
    // `ferry serve` with no [exec] section: it says which sandbox it chose, and a command
    // run through its /mcp gets nothing of the gateway process, the site or bob.
    let (mut server, harness) = gateway_with_bob(None, None);
    let log = server.log();
    assert!(
        log.contains("sandbox: landlock (ABI ") || log.contains("sandbox: bwrap ("),
        "the sandbox in force is in the log: {log}"
    );
    // The configuration still says what was asked for, not what was found.
    let data = server.data.to_str().unwrap();
    let printed = server.ferry(&["serve", "--print-config", "--data", data]);
    let printed = String::from_utf8_lossy(&printed.stdout);
    assert!(printed.contains("sandbox = \"auto\""), "{printed}");
    let db_before = std::fs::read(server.data.join(".ferry/site.db")).unwrap();
    let attacks = attacks(&server.data, &server.pid().to_string());
    let mut commands = attacks.clone();
    commands.push(KILL_ALL.into());
    commands.push("echo mine > ~/mine.txt && cat ~/mine.txt".into());
    let results = run_over_http(&server, &harness, &commands);
    assert_all_refused(&server.data, "me", &attacks, &results, &db_before);
    assert!(assert_ok(results.last().unwrap()).contains("mine\n"));
    assert!(server.is_running(), "the gateway survived every kill");

    // The control: the same gateway without the sandbox can be signalled (its environment
    // stays closed even then: it is not dumpable).
    let (server, harness) = gateway_with_bob(Some("[exec]\nsandbox = \"none\"\n"), None);
    let pid = server.pid();
    let r = run_over_http(
        &server,
        &harness,
        &[
            format!("tr '\\0' ' ' < /proc/{pid}/environ"),
            format!("kill -0 {pid} && echo signalled"),
        ],
    );
    assert!(
        !text_of(&r[0]).contains(SERVER_SECRET) && text_of(&r[0]).contains("Permission denied"),
        "{}",
        r[0]
    );
    assert!(assert_ok(&r[1]).contains("signalled"), "{}", r[1]);
    assert!(
        server
            .log()
            .contains("sandbox: none ([exec] sandbox = \"none\")")
    );
}

#[test]
fn with_no_sandbox_on_the_machine_commands_are_refused_naming_the_opt_out() {
    // A kernel without Landlock that refuses user namespaces (a seccomp filter on the
    // gateway): bubblewrap is installed but cannot work, so `auto` has nothing.
    let filter: &'static [libc::sock_filter] = &support::seccomp::HIDE_LANDLOCK_AND_USER_NAMESPACES;
    let (server, harness) = gateway_with_bob(None, Some(filter));
    let log = server.log();
    assert!(
        log.contains("sandbox: none works here, terminal_run is refused"),
        "{log}"
    );
    let marker = server.home("me").join("ran");
    let r = run_over_http(&server, &harness, &[format!("touch {}", marker.display())]);
    assert_tool_error(&r[0], "sandbox_unavailable", "`[exec] sandbox = \"none\"`");
    assert!(
        text_of(&r[0]).contains("cannot make its namespaces"),
        "{}",
        r[0]
    );
    assert!(!marker.exists(), "nothing ran unconfined");

    // The same machine with the explicit opt-out runs the command.
    let (server, harness) = gateway_with_bob(Some("[exec]\nsandbox = \"none\"\n"), Some(filter));
    let marker = server.home("me").join("ran");
    let r = run_over_http(&server, &harness, &[format!("touch {}", marker.display())]);
    assert_eq!(r[0]["structuredContent"]["exitCode"], 0, "{}", r[0]);
    assert!(marker.exists());
}

#[test]
fn a_link_that_moves_a_tree_onto_the_site_or_another_person_is_refused() {
    // A link where a tree belongs, as a command could plant: through `skills` pointing at
    // the site, every command and tool would read `.ferry/`; through the others, bob's
    // folders. Only that tree is refused, with the reason; the person's other trees and
    // commands keep working, over stdio and over the gateway's /mcp.
    for (tree, target, secret) in [
        ("skills", ".", "home/bob/secret.txt"),
        ("shared/public", "home/bob", "secret.txt"),
        ("circles/team", "home/bob", "secret.txt"),
        (
            "private/people/alice",
            "private/people/bob",
            "tmp/draft.txt",
        ),
    ] {
        let site = site_with_bob("");
        site.ferry_ok(&[
            "circle", "add", "team", "--member", "alice", "--member", "bob",
        ]);
        site.give_to_nobody();
        let link = site.link_root(tree, &site.data.join(target));
        let through = at(&link, secret);
        let r = site.results(vec![
            call("file_read", json!({"path": through})),
            call(
                "file_write",
                json!({"path": "notes.txt", "content": "still works\n"}),
            ),
            call("file_read", json!({"path": "notes.txt"})),
            call(
                "terminal_run",
                json!({"command": format!("cat {through}; echo done")}),
            ),
        ]);
        assert_tool_error(&r[0], "path_escapes", "is a symbolic link");
        assert!(
            text_of(&r[0]).contains(link.to_str().unwrap()),
            "{tree}: {}",
            r[0]
        );
        assert_ok(&r[1]);
        assert!(assert_ok(&r[2]).contains("still works"), "{tree}: {}", r[2]);
        // Commands run, or (when the linked tree holds their output folder) are refused
        // naming the link; never with bob's file.
        let ran = text_of(&r[3]);
        let refused = is_error(&r[3]) && ran.contains("is a symbolic link");
        assert!(
            (ran.contains("done") || refused) && !ran.contains(BOBS_SECRET),
            "{tree}: {ran}"
        );
        // `ferry site check` names the linked tree.
        let check = site.ferry_cli(&["site", "check"]);
        let said = String::from_utf8_lossy(&check.stdout).into_owned()
            + &String::from_utf8_lossy(&check.stderr);
        assert!(
            said.contains(tree) && said.contains("symbolic link"),
            "{tree}: {said}"
        );
    }

    // Over the gateway's /mcp: a tool error result, not a transport error, and the other
    // trees still work.
    let (server, harness) = gateway_with_bob(None, None);
    let private = server
        .data
        .canonicalize()
        .unwrap()
        .join("private/people/me");
    std::fs::remove_dir_all(&private).unwrap();
    symlink(server.data.join("private/people/bob"), &private).unwrap();
    let through = at(&private, "tmp/draft.txt");
    let out = mcp::drive(&json!({
        "server": mcp::http(&server.url("/mcp"), &harness),
        "elicitation": null,
        "steps": [
            call("file_read", json!({"path": through})),
            call("file_write", json!({"path": "notes.txt", "content": "still works\n"})),
            call("terminal_run", json!({"command": format!("cat {through}; echo done")})),
        ],
        "timeout_secs": 120,
    }));
    let r = out["results"].as_array().unwrap();
    assert_eq!(mcp::protocol_error(&r[0]), None, "{}", r[0]);
    assert!(
        is_error(&r[0]) && !text_of(&r[0]).contains(BOBS_SECRET),
        "{}",
        r[0]
    );
    assert_ok(&r[1]);
    let ran = text_of(&r[2]);
    let refused = is_error(&r[2]) && ran.contains("is a symbolic link");
    assert!(
        (ran.contains("done") || refused) && !ran.contains(BOBS_SECRET),
        "{ran}"
    );
}

/// The files (not temporaries) in `dir`, sorted; empty when it does not exist.
fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

/// A file of `len` bytes that holds only `data` at the given offsets; the rest is holes.
fn sparse_file(path: &Path, len: u64, data: &[(u64, &[u8])]) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::create(path).unwrap();
    file.set_len(len).unwrap();
    for (offset, bytes) in data {
        file.write_all_at(bytes, *offset).unwrap();
    }
}

#[test]
fn file_deliver_refuses_a_2_gib_sparse_file_over_the_cap_and_keeps_holes_under_it() {
    use std::os::unix::fs::MetadataExt;
    let cap: u64 = 64 * 1024 * 1024;
    let site = Site::new(&format!("[deliveries]\nmax_bytes = {cap}\n"));
    site.write("ok.txt", "fine\n");
    // `truncate -s 2G`: two gibibytes that take no disk space.
    sparse_file(&site.home().join("big.bin"), 2 << 30, &[]);
    let under = 48 * 1024 * 1024;
    sparse_file(
        &site.home().join("sparse.bin"),
        under,
        &[(1 << 20, b"data here"), (under - 4, b"end!")],
    );
    let r = site.results(vec![
        call("file_deliver", json!({"paths": ["ok.txt", "big.bin"]})),
        call("file_deliver", json!({"paths": ["sparse.bin"]})),
    ]);
    assert_tool_error(&r[0], "too_large", &format!("over the {cap} bytes"));
    let attachments = site.home().join("public/attachments");
    assert!(
        !attachments.join("ok.txt").exists() && !attachments.join("big.bin").exists(),
        "a refused call delivers nothing, not even the file that fit: {:?}",
        files_in(&attachments)
    );

    assert_ok(&r[1]);
    assert_eq!(files_in(&attachments), ["sparse.bin"]);
    let delivered = attachments.join("sparse.bin");
    let meta = std::fs::metadata(&delivered).unwrap();
    assert_eq!(meta.len(), under);
    assert!(
        meta.blocks() * 512 < 1024 * 1024,
        "the copy was inflated to {} bytes on disk",
        meta.blocks() * 512
    );
    let bytes = std::fs::read(&delivered).unwrap();
    assert_eq!(&bytes[1 << 20..(1 << 20) + 9], b"data here");
    assert_eq!(&bytes[bytes.len() - 4..], b"end!");
    let structured = &r[1]["structuredContent"]["delivered"][0];
    assert_eq!(structured["size"], under);
    assert_eq!(structured["sha256"], support::sha256_hex(&bytes));
}

#[test]
fn file_deliver_takes_files_up_to_the_cap_and_refuses_one_byte_more() {
    let cap: usize = 1024 * 1024;
    let site = Site::new(&format!("[deliveries]\nmax_bytes = {cap}\n"));
    site.write("below.bin", vec![7u8; cap - 1]);
    site.write("at.bin", vec![7u8; cap]);
    site.write("over.bin", vec![7u8; cap + 1]);
    let r = site.results(vec![
        call("file_deliver", json!({"paths": ["below.bin"]})),
        call("file_deliver", json!({"paths": ["at.bin"]})),
        call("file_deliver", json!({"paths": ["over.bin"]})),
    ]);
    assert_ok(&r[0]);
    assert_ok(&r[1]);
    assert_tool_error(&r[2], "too_large", &format!("{} bytes", cap + 1));
    assert_eq!(
        files_in(&site.home().join("public/attachments")),
        ["at.bin", "below.bin"]
    );
}

#[test]
fn file_deliver_is_held_to_the_person_quota_counting_projects_and_saved_output() {
    let quota: usize = 1024 * 1024;
    let site = Site::new(&format!("[limits]\nperson_max_bytes = {quota}\n"));
    let out = Command::new(&site.ferry)
        .args(["project", "add", "alice", "p1", "--data"])
        .arg(&site.data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // In use before the agent delivers: 1000 bytes short of the quota, spread over the
    // main public/, a project's public/ and saved command output.
    site.write("public/filler.bin", vec![1u8; quota - 2000]);
    site.write("projects/p1/public/notes.txt", vec![1u8; 500]);
    let output = site.private().join("tmp/terminal-output");
    std::fs::create_dir_all(&output).unwrap();
    std::fs::write(output.join("run-0.log"), vec![1u8; 500]).unwrap();
    site.write("almost.bin", vec![2u8; 999]);
    site.write("one.bin", [3u8]);
    site.write("two.bin", [4u8]);
    site.write("three.bin", [5u8]);
    let r = site.results(vec![
        call("file_deliver", json!({"paths": ["almost.bin"]})),
        call("file_deliver", json!({"paths": ["one.bin"]})),
        call("file_deliver", json!({"paths": ["two.bin", "three.bin"]})),
        call("file_deliver", json!({"paths": ["two.bin"]})),
    ]);
    assert_ok(&r[0]); // quota − 1
    assert_ok(&r[1]); // at the quota
    let says = format!("storage quota of {quota} bytes: {quota} bytes are in use");
    assert_tool_error(&r[2], "quota_exceeded", &says);
    assert_tool_error(&r[3], "quota_exceeded", &says);
    let attachments = site.home().join("public/attachments");
    assert_eq!(files_in(&attachments), ["almost.bin", "one.bin"]);
}

/// The stdout length that makes a saved output file of exactly `size` bytes (an empty
/// stderr section follows the stdout one).
fn stdout_bytes_for_saved_size(size: usize) -> usize {
    let fixed = "==== stdout:  bytes ====\n".len() + 1 + "==== stderr: 0 bytes ====\n".len() + 1;
    (1..=size)
        .rev()
        .map(|n| (n, n + n.to_string().len() + fixed))
        .find(|(_, total)| *total <= size)
        .filter(|(_, total)| *total == size)
        .map(|(n, _)| n)
        .unwrap_or_else(|| panic!("no stdout length saves exactly {size} bytes"))
}

#[test]
fn saved_command_output_expires_after_the_ttl() {
    let site = Site::for_nobody("[exec]\noutput_ttl_hours = 24\n");
    let first = site.one("terminal_run", json!({"command": "seq 1 100000"}));
    let old = first["structuredContent"]["fullOutputPath"]
        .as_str()
        .unwrap()
        .to_owned();
    let second = site.one("terminal_run", json!({"command": "seq 1 100000"}));
    let young = second["structuredContent"]["fullOutputPath"]
        .as_str()
        .unwrap()
        .to_owned();
    for (path, age) in [(&old, "25 hours ago"), (&young, "23 hours ago")] {
        let status = Command::new("touch")
            .args(["-d", age, path])
            .status()
            .unwrap();
        assert!(status.success());
    }
    let r = site.one("terminal_run", json!({"command": "echo short"}));
    assert_ok(&r);
    assert!(
        !Path::new(&old).exists(),
        "output older than the TTL is kept"
    );
    assert!(
        Path::new(&young).exists(),
        "output younger than the TTL is gone"
    );
}

#[test]
fn saved_command_output_stays_within_the_per_person_cap() {
    let cap = 400_000;
    let site = Site::for_nobody(&format!("[exec]\noutput_max_bytes = {cap}\n"));
    let dir = site
        .private()
        .canonicalize()
        .unwrap()
        .join("tmp/terminal-output");
    let print = |size: usize, fresh: bool| {
        let n = stdout_bytes_for_saved_size(size);
        let clear = if fresh {
            format!("rm -f {}/run-*.log; ", dir.display())
        } else {
            String::new()
        };
        call(
            "terminal_run",
            json!({"command": format!("{clear}head -c {n} /dev/zero | tr '\\0' a")}),
        )
    };
    let r = site.results(vec![
        print(cap + 1, true),
        print(cap, true),
        print(cap - 1, true),
        print(200_000, true),
        print(200_000, false),
        print(200_000, true),
        print(200_001, false),
    ]);
    let path = |i: usize| r[i]["structuredContent"]["fullOutputPath"].as_str();
    let note = |i: usize| r[i]["structuredContent"]["fullOutputNote"].as_str();
    for (i, result) in r.iter().enumerate() {
        assert_ok(result);
        assert_eq!(result["structuredContent"]["truncated"], true, "step {i}");
    }
    // One file alone: over the cap it is not saved, and the answer says so.
    assert_eq!(path(0), None);
    assert!(
        note(0).is_some_and(|n| n.contains("not saved") && n.contains(&cap.to_string())),
        "{:?}",
        note(0)
    );
    assert!(text_of(&r[0]).contains("not saved"), "{}", text_of(&r[0]));
    assert!(path(1).is_some() && note(1).is_none(), "{}", r[1]);
    assert!(path(2).is_some() && note(2).is_none(), "{}", r[2]);
    // Two files that together fill the cap exactly are both kept.
    assert!(path(4).is_some() && note(4).is_none(), "{}", r[4]);
    // One byte more: the oldest goes, and the answer says so.
    assert!(path(6).is_some(), "{}", r[6]);
    assert!(
        note(6).is_some_and(|n| n.contains("1 oldest") && n.contains("200000 bytes")),
        "{:?}",
        note(6)
    );
    assert!(!Path::new(path(5).unwrap()).exists());
    let kept = std::fs::metadata(path(6).unwrap()).unwrap().len();
    assert_eq!(kept, 200_001);
    assert_eq!(files_in(&dir).len(), 1, "{:?}", files_in(&dir));
}

/// A UDP listener on loopback and a unix socket in a folder nobody may list (0711),
/// started by the test, each recording what reaches it.
struct Daemons {
    _dir: tempfile::TempDir,
    udp: std::net::UdpSocket,
    unix: std::os::unix::net::UnixListener,
    socket: PathBuf,
}

impl Daemons {
    fn start() -> Daemons {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        let socket = dir.path().join("daemon.sock");
        let unix = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        // Any local user may connect, as to a session bus or a container engine's socket.
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
        unix.set_nonblocking(true).unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        Daemons {
            _dir: dir,
            udp,
            unix,
            socket,
        }
    }

    /// The attacks as `terminal_run` steps, each sending its own word.
    fn attacks(&self) -> Vec<Value> {
        let port = self.udp.local_addr().unwrap().port();
        let socket = self.socket.display();
        [
            format!("echo -n UDPLEAK > /dev/udp/127.0.0.1/{port}"),
            format!(
                "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\
                 .sendto(b\"PYUDPLEAK\", (\"127.0.0.1\", {port}))'"
            ),
            format!(
                "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); \
                 s.connect(\"{socket}\"); s.sendall(b\"UNIXLEAK\")'"
            ),
        ]
        .into_iter()
        .map(|c| call("terminal_run", json!({"command": c})))
        .collect()
    }

    /// Everything that arrived since the last look, datagrams first.
    fn received(&self) -> String {
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        while let Ok(n) = self.udp.recv(&mut buf) {
            got.extend_from_slice(&buf[..n]);
            got.push(b' ');
        }
        while let Ok((mut conn, _)) = self.unix.accept() {
            conn.set_nonblocking(false).unwrap();
            conn.set_read_timeout(Some(std::time::Duration::from_secs(2)))
                .unwrap();
            let _ = std::io::Read::read_to_end(&mut conn, &mut got);
        }
        String::from_utf8_lossy(&got).into_owned()
    }
}

#[test]
fn by_default_a_command_sends_no_datagram_and_reaches_no_local_daemon() {
    // No [exec] section: the default sandbox (Landlock on a kernel that has it), whose
    // rules alone let UDP and named unix sockets through below ABI 10 and 9.
    let daemons = Daemons::start();
    let site = site_with_bob("");
    let out = mcp::drive(&json!({
        "server": site.server_for("alice"),
        "elicitation": null,
        "steps": daemons.attacks(),
        "timeout_secs": 120,
    }));
    for result in out["results"].as_array().unwrap() {
        assert!(!is_error(result), "{result}");
        assert_ne!(result["structuredContent"]["exitCode"], 0, "{result}");
        assert!(text_of(result).contains("Permission denied"), "{result}");
    }
    assert_eq!(daemons.received(), "", "nothing arrived");

    // The control: with the sandbox turned off, every attack arrives.
    let site = site_with_bob("[exec]\nsandbox = \"none\"\n");
    let out = mcp::drive(&json!({
        "server": site.server_for("alice"),
        "elicitation": null,
        "steps": daemons.attacks(),
        "timeout_secs": 120,
    }));
    for result in out["results"].as_array().unwrap() {
        assert_eq!(result["structuredContent"]["exitCode"], 0, "{result}");
    }
    assert_eq!(daemons.received(), "UDPLEAK PYUDPLEAK UNIXLEAK");
}
