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
        let ferry = dir.path().join("ferry");
        std::fs::copy(support::ferry_bin(), &ferry).unwrap();
        let out = Command::new(&ferry)
            .args(["person", "add", "alice", "--data"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
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

    fn private(&self) -> PathBuf {
        self.data.join("private/people/alice")
    }

    fn server(&self) -> Value {
        let ferry = self.ferry.to_str().unwrap();
        let data = self.data.to_str().unwrap();
        let mut command = vec![];
        let uid = format!("--reuid={NOBODY}");
        let gid = format!("--regid={NOBODY}");
        if self.as_nobody {
            command.extend(["setpriv", uid.as_str(), gid.as_str(), "--clear-groups"]);
        }
        command.extend([ferry, "mcp", "--data", data, "--person", "alice"]);
        mcp::stdio(&command, &[])
    }

    /// One session: `steps`, elicitation answered with `elicitation` (None: not offered).
    fn session(&self, elicitation: Option<&str>, steps: Vec<Value>) -> Value {
        mcp::drive(&json!({
            "server": self.server(),
            "elicitation": elicitation,
            "steps": steps,
            "timeout_secs": 120,
        }))
    }

    /// The results of `steps`, with no elicitation offered.
    fn results(&self, steps: Vec<Value>) -> Vec<Value> {
        let out = self.session(None, steps);
        out["results"].as_array().unwrap().clone()
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
            "file_pick"
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
    // Either the server's tool error or the client's refusal of an unlisted tool; never a write.
    if refused.get("content").is_some() {
        assert_tool_error(refused, "unknown_tool", "no tool `file_write`");
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
    assert_tool_error(&r[10], "invalid_arguments", "start at 1");
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
        (4, "invalid_path"),
        (5, "invalid_path"),
        (6, "invalid_path"),
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
    assert_tool_error(&r[5], "invalid_timeout", "more than zero");
    assert!(assert_ok(&r[6]).contains("private/people/alice/tmp"));
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
    // Either sandbox: other people's trees are out of reach, the person's own work, and
    // (without `[exec] network`) there is no network. Without one, all three reach.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || for _ in listener.incoming() {});
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    for sandbox in ["none", "bwrap", "landlock"] {
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
