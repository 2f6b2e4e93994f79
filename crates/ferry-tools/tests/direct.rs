//! Each tool called directly on a local site in a temporary folder, without MCP: what it
//! answers, and what it refuses (with its code) while changing nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferry_config::Config;
use ferry_site::Site;
use ferry_tools::{Approval, Approver, Content, Question, ToolOutput, Toolbox};
use serde_json::{Value, json};

/// A 1 × 1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0A, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE,
    0x42, 0x60, 0x82,
];

/// Answers every question the same way, and counts them.
struct Answers(Approval, std::sync::atomic::AtomicUsize);

impl Approver for Answers {
    fn ask(&self, _question: &Question) -> Approval {
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.0.clone()
    }
}

fn answering(approval: Approval) -> Answers {
    Answers(approval, Default::default())
}

/// A local site with one person, `ann`, and her toolbox.
struct Fixture {
    _tmp: tempfile::TempDir,
    toolbox: Toolbox,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture::with_config(Config::default())
    }

    fn with_config(config: Config) -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let site = Arc::new(Site::open(&tmp.path().join("site"), config).unwrap());
        site.add_person("ann").unwrap();
        let toolbox = Toolbox::open(site, "ann", None).unwrap();
        Fixture { _tmp: tmp, toolbox }
    }

    fn home(&self) -> &Path {
        &self.toolbox.paths().home
    }

    fn artifacts(&self) -> PathBuf {
        self.toolbox.paths().artifacts.clone()
    }

    fn call_with(&self, name: &str, args: Value, approver: &dyn Approver) -> ToolOutput {
        self.toolbox.call(name, args, approver)
    }

    fn call(&self, name: &str, args: Value) -> ToolOutput {
        self.call_with(name, args, &answering(Approval::NoChannel))
    }

    /// The call's text; it must have succeeded.
    #[track_caller]
    fn ok(&self, name: &str, args: Value) -> (String, Value) {
        let out = self.call(name, args);
        assert!(!out.is_error, "{name} failed: {}", out.joined_text());
        (out.joined_text(), out.structured.unwrap_or(Value::Null))
    }

    /// The call's error code; it must have failed, saying why in the text and the error.
    #[track_caller]
    fn refused(&self, name: &str, args: Value) -> String {
        code_of(&self.call(name, args))
    }
}

#[track_caller]
fn code_of(out: &ToolOutput) -> String {
    assert!(
        out.is_error,
        "expected a refusal, got {}",
        out.joined_text()
    );
    let error = &out.structured.as_ref().expect("structured error")["error"];
    let message = error["message"].as_str().unwrap();
    assert!(
        !message.is_empty() && out.joined_text() == message,
        "{error}"
    );
    error["code"].as_str().unwrap().to_owned()
}

/// The tools that work only against a node.
const NODE_ONLY: [&str; 3] = ["file_fetch", "file_push", "dir_fetch"];

#[test]
fn the_declared_tools_are_listed_and_each_name_reaches_its_own_body() {
    let fixture = Fixture::new();
    let listed: Vec<&str> = fixture.toolbox.tools().iter().map(|t| t.name).collect();
    // The node-only tools need the gateway's node links (tests/node_tools.rs has them).
    let here: Vec<&str> = ferry_config::TOOL_NAMES
        .into_iter()
        .filter(|name| !NODE_ONLY.contains(name))
        .collect();
    assert_eq!(listed, here);
    for name in here {
        // Arguments the tool's own parser refuses: the call arrived at that tool.
        let out = fixture.call(name, json!({"unexpected": true}));
        assert_eq!(code_of(&out), "invalid_arguments", "{name}");
        assert!(
            out.joined_text().contains(name),
            "{name}: {}",
            out.joined_text()
        );
    }
}

#[test]
fn an_unknown_or_disabled_tool_is_refused() {
    let mut config = Config::default();
    config.tools.enabled = vec!["file_read".to_owned()];
    let fixture = Fixture::with_config(config);
    let listed: Vec<&str> = fixture.toolbox.tools().iter().map(|t| t.name).collect();
    assert_eq!(listed, ["file_read"]);
    std::fs::write(fixture.home().join("kept.txt"), "kept").unwrap();
    for name in ["file_write", "no_such_tool", "", "FILE_READ"] {
        let code = fixture.refused(name, json!({"path": "kept.txt", "content": "overwritten"}));
        assert_eq!(code, "unknown_tool", "{name:?}");
    }
    assert_eq!(
        std::fs::read_to_string(fixture.home().join("kept.txt")).unwrap(),
        "kept"
    );
}

#[test]
fn file_write_then_file_read_round_trips_with_line_numbers() {
    let fixture = Fixture::new();
    let (_, written) = fixture.ok(
        "file_write",
        json!({"path": "notes/a.txt", "content": "one\ntwo\nthree\n"}),
    );
    assert_eq!(written["size"], 14);
    assert_eq!(
        written["sha256"],
        ferry_fs::sha256_hex(b"one\ntwo\nthree\n")
    );
    assert_eq!(
        std::fs::read_to_string(fixture.home().join("notes/a.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    let (text, _) = fixture.ok("file_read", json!({"path": "notes/a.txt"}));
    assert!(text.contains("one") && text.contains("three"), "{text}");
    let (text, _) = fixture.ok(
        "file_read",
        json!({"path": "notes/a.txt", "startLine": 2, "lineCount": 1}),
    );
    assert!(text.contains("two") && !text.contains("three"), "{text}");
}

#[test]
fn file_read_refuses_what_is_missing_outside_or_past_the_end() {
    let fixture = Fixture::new();
    std::fs::write(fixture.home().join("a.txt"), "1\n2\n3\n").unwrap();
    assert_eq!(
        fixture.refused("file_read", json!({"path": "missing.txt"})),
        "not_found"
    );
    assert_eq!(
        fixture.refused("file_read", json!({"path": "a.txt", "startLine": 5})),
        "past_end"
    );
    assert_eq!(
        fixture.refused("file_read", json!({"path": "a.txt", "startLine": 0})),
        "invalid_arguments"
    );
    for outside in ["/etc/passwd", "../../../etc/passwd"] {
        let code = fixture.refused("file_read", json!({"path": outside}));
        assert!(
            code == "path_escapes" || code == "permission_denied",
            "{outside}: {code}"
        );
    }
    assert_eq!(
        fixture.refused("file_read", json!({"path": ""})),
        "bad_path"
    );
}

#[test]
fn file_write_refuses_uploads_and_a_link_planted_to_leave_the_workspace() {
    let fixture = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), fixture.home().join("link")).unwrap();
    let code = fixture.refused(
        "file_write",
        json!({"path": "link/planted.txt", "content": "x"}),
    );
    assert!(
        code == "path_escapes" || code == "permission_denied",
        "{code}"
    );
    assert!(!outside.path().join("planted.txt").exists());
    // uploads/ is the old name of public/: nothing creates it again.
    let code = fixture.refused(
        "file_write",
        json!({"path": "uploads/x.txt", "content": "x"}),
    );
    assert!(!code.is_empty());
    assert!(!fixture.home().join("uploads").exists());
}

#[test]
fn file_edit_lands_all_edits_or_none() {
    let fixture = Fixture::new();
    std::fs::write(fixture.home().join("a.txt"), "alpha beta\n").unwrap();
    std::fs::write(fixture.home().join("b.txt"), "gamma gamma\n").unwrap();
    fixture.ok(
        "file_edit",
        json!({"edits": [{"path": "a.txt", "oldText": "beta", "newText": "BETA"}]}),
    );
    assert_eq!(
        std::fs::read_to_string(fixture.home().join("a.txt")).unwrap(),
        "alpha BETA\n"
    );
    // The second edit is ambiguous, so the first does not land either.
    let code = fixture.refused(
        "file_edit",
        json!({"edits": [
            {"path": "a.txt", "oldText": "alpha", "newText": "ALPHA"},
            {"path": "b.txt", "oldText": "gamma", "newText": "GAMMA"},
        ]}),
    );
    assert!(!code.is_empty());
    assert_eq!(
        std::fs::read_to_string(fixture.home().join("a.txt")).unwrap(),
        "alpha BETA\n"
    );
    assert_eq!(
        std::fs::read_to_string(fixture.home().join("b.txt")).unwrap(),
        "gamma gamma\n"
    );
    assert_ne!(
        fixture.refused(
            "file_edit",
            json!({"edits": [{"path": "a.txt", "oldText": "absent", "newText": "x"}]}),
        ),
        "unknown_tool"
    );
    assert_eq!(
        fixture.refused("file_edit", json!({"edits": []})),
        "invalid_arguments"
    );
}

#[test]
fn file_edit_edits_a_file_named_twice_once_with_every_edit() {
    let fixture = Fixture::new();
    std::fs::write(fixture.home().join("mine.txt"), "aaa bbb\n").unwrap();
    std::os::unix::fs::symlink("mine.txt", fixture.home().join("rel.txt")).unwrap();
    // Through a link and by its name: one file, both edits in it.
    fixture.ok(
        "file_edit",
        json!({"edits": [
            {"path": "mine.txt", "oldText": "aaa", "newText": "AAA"},
            {"path": "rel.txt", "oldText": "bbb", "newText": "BBB"},
        ]}),
    );
    assert_eq!(
        std::fs::read_to_string(fixture.home().join("mine.txt")).unwrap(),
        "AAA BBB\n"
    );
    // Named through the link first: writes follow no link here, so the whole edit is
    // refused; never one edit applied and the other dropped.
    let code = fixture.refused(
        "file_edit",
        json!({"edits": [
            {"path": "rel.txt", "oldText": "AAA", "newText": "x"},
            {"path": "mine.txt", "oldText": "BBB", "newText": "y"},
        ]}),
    );
    assert_eq!(code, "path_escapes");
    assert_eq!(
        std::fs::read_to_string(fixture.home().join("mine.txt")).unwrap(),
        "AAA BBB\n"
    );
}

#[test]
fn file_edit_takes_edits_and_files_up_to_their_limits() {
    use ferry_config::limits::{FILE_EDIT_MAX_EDITS, FILE_EDIT_MAX_FILES};
    let fixture = Fixture::new();
    // Edits: one file holding as many distinct words as the largest call needs.
    let words: String = (0..=FILE_EDIT_MAX_EDITS)
        .map(|i| format!("w{i}_ "))
        .collect();
    let edits = |count: usize| -> Value {
        let edits: Vec<Value> = (0..count)
            .map(|i| json!({"path": "many.txt", "oldText": format!("w{i}_ "), "newText": format!("W{i}_ ")}))
            .collect();
        json!({ "edits": edits })
    };
    for count in [FILE_EDIT_MAX_EDITS - 1, FILE_EDIT_MAX_EDITS] {
        std::fs::write(fixture.home().join("many.txt"), &words).unwrap();
        fixture.ok("file_edit", edits(count));
        let text = std::fs::read_to_string(fixture.home().join("many.txt")).unwrap();
        assert!(
            text.contains(&format!("W{}_ ", count - 1)) && text.contains(&format!("w{count}_ "))
        );
    }
    std::fs::write(fixture.home().join("many.txt"), &words).unwrap();
    let out = fixture.call("file_edit", edits(FILE_EDIT_MAX_EDITS + 1));
    assert_eq!(code_of(&out), "invalid_arguments");
    assert!(
        out.joined_text().contains("at most 256"),
        "{}",
        out.joined_text()
    );
    assert_eq!(
        std::fs::read_to_string(fixture.home().join("many.txt")).unwrap(),
        words
    );
    // Files: one edit in each.
    let files = |count: usize| -> Value {
        let edits: Vec<Value> = (0..count)
            .map(|i| json!({"path": format!("f{i}.txt"), "oldText": "old", "newText": "new"}))
            .collect();
        json!({ "edits": edits })
    };
    let reset = || {
        for i in 0..=FILE_EDIT_MAX_FILES {
            std::fs::write(fixture.home().join(format!("f{i}.txt")), "old").unwrap();
        }
    };
    for count in [FILE_EDIT_MAX_FILES - 1, FILE_EDIT_MAX_FILES] {
        reset();
        let (_, structured) = fixture.ok("file_edit", files(count));
        assert_eq!(structured["files"].as_array().unwrap().len(), count);
        let last = fixture.home().join(format!("f{}.txt", count - 1));
        assert_eq!(std::fs::read_to_string(last).unwrap(), "new");
    }
    reset();
    let out = fixture.call("file_edit", files(FILE_EDIT_MAX_FILES + 1));
    assert_eq!(code_of(&out), "invalid_arguments");
    for i in 0..=FILE_EDIT_MAX_FILES {
        let path = fixture.home().join(format!("f{i}.txt"));
        assert_eq!(
            std::fs::read_to_string(path).unwrap(),
            "old",
            "nothing changed"
        );
    }
    let temporaries = std::fs::read_dir(fixture.home())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(".ferry-tmp-")
        })
        .count();
    assert_eq!(temporaries, 0);
}

#[test]
fn file_preview_and_image_read_name_what_the_file_is() {
    let fixture = Fixture::new();
    std::fs::write(fixture.home().join("dot.txt"), PNG).unwrap();
    std::fs::write(fixture.home().join("notes.md"), "# Title\n").unwrap();
    let (_, preview) = fixture.ok("file_preview", json!({"path": "dot.txt"}));
    assert_eq!(preview["mediaType"], "image/png");
    assert_eq!(preview["sha256"], ferry_fs::sha256_hex(PNG));
    let (_, preview) = fixture.ok("file_preview", json!({"path": "notes.md"}));
    assert_eq!(preview["mediaType"], "text/markdown");

    let out = fixture.call("image_read", json!({"path": "dot.txt"}));
    assert!(!out.is_error, "{}", out.joined_text());
    assert!(
        out.content
            .iter()
            .any(|c| matches!(c, Content::Image { .. }))
    );
    assert_eq!(out.structured.unwrap()["sourceWidth"], 1);
    let code = fixture.refused("image_read", json!({"path": "notes.md"}));
    assert!(!code.is_empty());
    assert_eq!(
        fixture.refused("file_preview", json!({"path": "missing"})),
        "not_found"
    );
}

#[test]
fn file_delete_asks_and_deletes_only_when_approved() {
    let fixture = Fixture::new();
    let victim = fixture.home().join("old.txt");
    std::fs::write(&victim, "old").unwrap();
    for refusal in [
        Approval::Denied,
        Approval::NoChannel,
        Approval::Failed("the page went away".to_owned()),
    ] {
        let answers = answering(refusal.clone());
        let out = fixture.call_with("file_delete", json!({"path": "old.txt"}), &answers);
        assert!(out.is_error, "{refusal:?}: {}", out.joined_text());
        assert_eq!(answers.1.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(victim.exists(), "{refusal:?}");
    }
    let answers = answering(Approval::Approved);
    let out = fixture.call_with("file_delete", json!({"path": "old.txt"}), &answers);
    assert!(!out.is_error, "{}", out.joined_text());
    assert!(!victim.exists());
    // Nothing is asked about a file that is not there, or a folder.
    std::fs::create_dir(fixture.home().join("folder")).unwrap();
    for path in ["old.txt", "folder"] {
        let answers = answering(Approval::Approved);
        let out = fixture.call_with("file_delete", json!({"path": path}), &answers);
        assert!(out.is_error, "{path}");
        assert_eq!(answers.1.load(std::sync::atomic::Ordering::SeqCst), 0);
    }
    assert!(fixture.home().join("folder").is_dir());
}

#[test]
fn file_deliver_copies_into_attachments_with_one_notice_a_file() {
    let fixture = Fixture::new();
    let artifacts = fixture.artifacts();
    std::fs::create_dir_all(&artifacts).unwrap();
    std::fs::write(artifacts.join("report.md"), "# Report\n").unwrap();
    let (text, delivered) = fixture.ok(
        "file_deliver",
        json!({"paths": [artifacts.join("report.md")]}),
    );
    assert!(
        text.contains("📎 report.md — public/attachments/report.md"),
        "{text}"
    );
    assert_eq!(delivered["delivered"].as_array().unwrap().len(), 1);
    assert_eq!(
        std::fs::read_to_string(fixture.home().join("public/attachments/report.md")).unwrap(),
        "# Report\n"
    );
    let code = fixture.refused(
        "file_deliver",
        json!({"paths": [artifacts.join("missing.md")]}),
    );
    assert_eq!(code, "not_found");
    assert_eq!(
        fixture.refused("file_deliver", json!({"paths": []})),
        "invalid_arguments"
    );
}

/// Set for the half of a test that runs as `nobody`: the folder it may use.
const NOBODY_BASE: &str = "FERRY_TOOLS_TEST_BASE";

/// Runs the `#[ignore]`d test `inner` of this binary as `nobody` (commands are never run
/// as root, and tests run as root), in a folder `nobody` owns, and fails unless it passed.
fn as_nobody(inner: &str) {
    use std::os::unix::process::CommandExt;
    let (uid, gid) = (65534, 65534);
    let base = tempfile::Builder::new()
        .prefix("ferry-tools-")
        .tempdir()
        .unwrap();
    std::os::unix::fs::chown(base.path(), Some(uid), Some(gid)).unwrap();
    // A copy nobody can run: the target folder may lie below one only root can search.
    let exe = base.path().join("inner-test");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    let mut child = std::process::Command::new(&exe)
        .args(["--ignored", "--exact", inner, "--test-threads=1"])
        .env(NOBODY_BASE, base.path())
        .current_dir(base.path())
        .uid(uid)
        .gid(gid)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && text.contains("1 passed"),
        "{inner} as nobody: {text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn terminal_run_is_refused_as_root_and_its_bounds_hold_before_anything_runs() {
    assert!(running_as_root(), "this test runs as root, as CI does");
    let fixture = Fixture::new();
    let code = fixture.refused("terminal_run", json!({"command": "touch ran"}));
    assert!(!code.is_empty());
    for timeout in [0, 601] {
        assert_eq!(
            fixture.refused(
                "terminal_run",
                json!({"command": "touch ran", "timeoutSecs": timeout})
            ),
            "invalid_arguments",
            "{timeout}"
        );
    }
    assert!(!fixture.home().join("ran").exists());
    as_nobody("inner_terminal_run_answers_with_output_and_exit_code");
}

fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
}

#[test]
#[ignore = "the half of terminal_run_is_refused_as_root_… that runs as nobody"]
fn inner_terminal_run_answers_with_output_and_exit_code() {
    let base = PathBuf::from(std::env::var_os(NOBODY_BASE).expect("run by as_nobody"));
    let site = Arc::new(Site::open(&base.join("site"), Config::default()).unwrap());
    site.add_person("ann").unwrap();
    let fixture = Fixture {
        _tmp: tempfile::tempdir_in(&base).unwrap(),
        toolbox: Toolbox::open(site, "ann", None).unwrap(),
    };
    let (_, ran) = fixture.ok(
        "terminal_run",
        json!({"command": "echo hi; echo err >&2; exit 3", "timeoutSecs": 600}),
    );
    assert_eq!(ran["stdout"], "hi\n");
    assert_eq!(ran["stderr"], "err\n");
    assert_eq!(ran["exitCode"], 3);
    assert_eq!(ran["timedOut"], false);
    let (_, ran) = fixture.ok(
        "terminal_run",
        json!({"command": "sleep 5", "timeoutSecs": 1}),
    );
    assert_eq!(ran["timedOut"], true);
    fixture.ok("file_write", json!({"path": "work/a.txt", "content": "a"}));
    let (_, ran) = fixture.ok(
        "terminal_run",
        json!({"command": "pwd; cat a.txt", "cwd": "work"}),
    );
    assert!(
        ran["stdout"]
            .as_str()
            .unwrap()
            .ends_with("/home/ann/work\na"),
        "{ran}"
    );
    assert_eq!(
        fixture.refused(
            "terminal_run",
            json!({"command": "true", "cwd": "../../.."})
        ),
        "path_escapes"
    );
}

#[test]
fn dir_list_pages_through_a_folder() {
    let fixture = Fixture::new();
    std::fs::create_dir(fixture.home().join("many")).unwrap();
    for i in 0..5 {
        std::fs::write(fixture.home().join(format!("many/f{i}.txt")), "x").unwrap();
    }
    let (first, _) = fixture.ok("dir_list", json!({"path": "many", "maxEntries": 2}));
    assert!(
        first.contains("f0.txt") && first.contains("nextPageToken"),
        "{first}"
    );
    let token = first
        .lines()
        .find_map(|l| l.strip_prefix("nextPageToken: "))
        .unwrap()
        .trim()
        .to_owned();
    let (second, _) = fixture.ok(
        "dir_list",
        json!({"path": "many", "maxEntries": 2, "pageToken": token}),
    );
    assert!(
        second.contains("f2.txt") && !second.contains("f0.txt"),
        "{second}"
    );
    let code = fixture.refused(
        "dir_list",
        json!({"path": "many", "pageToken": "not-a-token"}),
    );
    assert!(!code.is_empty());
    assert_eq!(
        fixture.refused("dir_list", json!({"path": "many", "maxEntries": 0})),
        "invalid_arguments"
    );
    assert_eq!(
        fixture.refused("dir_list", json!({"path": "missing"})),
        "not_found"
    );
}

#[test]
fn skill_search_and_file_pick_answer_without_a_person_at_the_page() {
    let fixture = Fixture::new();
    let out = fixture.call("skill_search", json!({"query": "pdf"}));
    assert!(!out.joined_text().is_empty());
    for (length, refused) in [(0, true), (1023, false), (1024, false), (1025, true)] {
        // Within the bounds the search runs, and finds that no skill is installed.
        let out = fixture.call("skill_search", json!({"query": "é".repeat(length)}));
        let code = code_of(&out);
        assert_eq!(code == "invalid_arguments", refused, "{length}: {code}");
    }
    assert_eq!(
        fixture.refused("file_pick", json!({"prompt": "the invoice"})),
        "no_pick_channel"
    );
    // The prompt's bounds are checked against the schema (limit − 1, limit, limit + 1);
    // within them, the lack of a web client is what refuses.
    for (length, code) in [
        (0, "invalid_arguments"),
        (1023, "no_pick_channel"),
        (1024, "no_pick_channel"),
        (1025, "invalid_arguments"),
    ] {
        assert_eq!(
            fixture.refused("file_pick", json!({"prompt": "é".repeat(length)})),
            code,
            "{length}"
        );
    }
}

/// Found by the `tool_args` fuzz target (its input `b"\xc3[\"\"]"`: `file_preview` with
/// the arguments `[""]`): serde takes an array for a struct, its items as the fields in
/// order, so arguments given positionally were taken, at the top and in `edits`.
#[test]
fn arguments_given_as_an_array_are_refused_and_change_nothing() {
    let fixture = Fixture::new();
    std::fs::write(fixture.home().join("a.txt"), "old\n").unwrap();
    let crash: Value = serde_json::from_slice(b"[\"\"]").unwrap();
    assert_eq!(fixture.refused("file_preview", crash), "invalid_arguments");
    assert_eq!(
        fixture.refused("file_preview", json!(["a.txt"])),
        "invalid_arguments"
    );
    assert_eq!(
        fixture.refused("file_edit", json!({"edits": [["a.txt", "old", "new"]]})),
        "invalid_arguments"
    );
    assert_eq!(
        std::fs::read_to_string(fixture.home().join("a.txt")).unwrap(),
        "old\n"
    );
}

/// A `node` that is not a name (a null a client sends for "none", a number, an object)
/// does not pick where the call runs: it is refused, naming the argument, before
/// anything is looked up on this machine or on a node.
#[test]
fn a_node_that_is_not_a_name_is_refused() {
    let fixture = Fixture::new();
    std::fs::write(fixture.home().join("a.txt"), "old\n").unwrap();
    for node in [Value::Null, json!(7), json!({"id": "x"}), json!(["x"])] {
        let out = fixture.call("dir_list", json!({"path": ".", "node": node}));
        assert_eq!(code_of(&out), "invalid_arguments", "{node}");
        assert!(
            out.joined_text().contains("`node`"),
            "{}",
            out.joined_text()
        );
    }
    // Left out, the listing is made here.
    let (text, _) = fixture.ok("dir_list", json!({"path": "."}));
    assert!(text.contains("a.txt"), "{text}");
}
