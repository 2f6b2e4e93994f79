//! Quoting for node terminals (spec N-TERM), proven with the real shells: bash, dash, zsh,
//! ksh, fish and busybox ash each read a quoted hostile path back as exactly that path, as
//! one word, and run nothing of it, both from `-c` and as an interactive shell reading
//! the line as a person's prompt would (history expansion and all). PowerShell and cmd.exe
//! cannot run here: their quoting has table tests in `quote.rs`.
//!
//! The shells come from Debian (`.ci/run` installs them); a missing one fails the test.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ferry_node::quote::quote_path;

/// The shells, as a node would advertise them, and how to start each.
const SHELLS: &[(&str, &[&str])] = &[
    ("bash", &["bash"]),
    ("dash", &["dash"]),
    ("zsh", &["zsh", "-f"]),
    ("ksh", &["ksh"]),
    ("fish", &["fish", "--no-config"]),
    ("ash", &["busybox", "ash"]),
];

/// Names a person may give a file, each an attack on some shell's quoting.
const NAMES: &[&str] = &[
    "plain.txt",
    "it's",
    "a\"b\"",
    "$(touch CANARY)",
    "`touch CANARY`",
    "a;touch CANARY",
    "a|touch CANARY",
    "a&&touch CANARY&",
    "back\\slash",
    "\\",
    "\\'",
    "'\\''",
    "''",
    "'",
    "*",
    "?.txt",
    "[ab]",
    "{a,b}",
    "!!",
    "!$",
    "!-1",
    "^a^b",
    "~",
    "~root",
    "-rf",
    "--help",
    "$HOME",
    "${HOME}",
    "$'\\x41'",
    "%PATH%",
    "#not a comment",
    " leading space",
    "trailing space ",
    "two  spaces",
    "ünïcödé ✓ 文件",
    "a\u{202e}txt.exe",
    "(sub)",
    "a>out",
    "<in",
    "=equals",
    "fish\\'s \\\\ end\\",
];

/// A folder that is itself hostile to quote, under a fresh temporary folder.
fn hostile_dir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("st'a\"ge $(touch CANARY) `x` !! ~ dir");
    std::fs::create_dir(&dir).unwrap();
    (tmp, dir)
}

fn program(argv: &[&str]) -> Command {
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..]);
    cmd.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .env("LANG", "C.UTF-8");
    cmd
}

fn require(argv: &[&str]) {
    let found = program(&["/usr/bin/which", argv[0]])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "`{}` is missing: the quoting tests run every shell for real (Debian: apt-get \
         install bash dash zsh ksh fish busybox; .ci/run does)",
        argv[0]
    );
}

/// The words `/usr/bin/printf '%s\0'` got, when the shell ran `line`.
fn words_of(stdout: &[u8]) -> Vec<String> {
    let text = String::from_utf8(stdout.to_vec()).expect("printf printed UTF-8");
    let mut words: Vec<String> = text.split('\0').map(str::to_owned).collect();
    assert_eq!(
        words.pop().as_deref(),
        Some(""),
        "output ends with NUL: {text:?}"
    );
    words
}

/// The line a person would have at the prompt: a command printing each word it gets,
/// then the pasted path.
fn line(quoted: &str) -> String {
    format!("/usr/bin/printf '%s\\0' {quoted}")
}

fn check_no_canary(cwd: &Path, shell: &str, path: &str) {
    assert!(
        !cwd.join("CANARY").exists(),
        "{shell} ran part of {path:?}: CANARY was created"
    );
}

#[test]
fn every_shell_reads_a_quoted_hostile_path_as_one_exact_word_from_c() {
    let (_tmp, dir) = hostile_dir();
    for (shell, argv) in SHELLS {
        require(argv);
        for name in NAMES {
            let path = dir.join(name).to_str().unwrap().to_owned();
            let quoted = quote_path("linux", shell, &path).unwrap();
            let out = program(argv)
                .arg("-c")
                .arg(line(&quoted))
                .current_dir(&dir)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert!(out.status.success(), "{shell} {quoted}: {out:?}");
            assert_eq!(
                words_of(&out.stdout),
                vec![path.clone()],
                "{shell} {quoted}"
            );
            check_no_canary(&dir, shell, &path);
        }
    }
}

#[test]
fn every_interactive_shell_reads_a_pasted_hostile_path_as_one_exact_word() {
    let (_tmp, dir) = hostile_dir();
    for (shell, argv) in SHELLS {
        require(argv);
        // One session per shell: every line as a person would type it at the prompt of
        // an interactive shell (history expansion on where the shell has it), each
        // output ending with a marker line.
        let mut child = program(argv)
            .arg("-i")
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut input = String::new();
        let mut paths = Vec::new();
        for name in NAMES {
            let path = dir.join(name).to_str().unwrap().to_owned();
            let quoted = quote_path("linux", shell, &path).unwrap();
            // One input line, so one prompt: whatever an interactive shell prints around
            // its commands (a banner, prompts) stays outside the markers.
            input.push_str(&format!(
                "/usr/bin/printf '{START}'; {}; /usr/bin/printf '{END}'\n",
                line(&quoted)
            ));
            paths.push(path);
        }
        input.push_str("exit\n");
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        let runs = between_markers(&out.stdout);
        assert_eq!(runs.len(), paths.len(), "{shell}: {runs:?}");
        for (run, path) in runs.iter().zip(&paths) {
            assert_eq!(words_of(run), vec![path.clone()], "{shell}");
            check_no_canary(&dir, shell, path);
        }
    }
}

const START: &str = "<<start>>";
const END: &str = "<<end>>";

/// What was printed between each start marker and the end marker after it.
fn between_markers(stdout: &[u8]) -> Vec<Vec<u8>> {
    let text = String::from_utf8(stdout.to_vec()).expect("the shell printed UTF-8");
    text.split(START)
        .skip(1)
        .map(|rest| {
            let (inside, _) = rest.split_once(END).expect("each start has its end");
            inside.as_bytes().to_vec()
        })
        .collect()
}

#[test]
fn git_bash_paths_become_posix_paths_that_bash_reads_back() {
    let (_tmp, dir) = hostile_dir();
    for (windows, posix) in [
        (
            r"C:\Users\a\it's $(touch CANARY).txt",
            "/c/Users/a/it's $(touch CANARY).txt",
        ),
        (r"d:\two  spaces\!!", "/d/two  spaces/!!"),
    ] {
        let quoted = quote_path("windows", "bash.exe", windows).unwrap();
        let out = program(&["bash", "-c", &line(&quoted)])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert_eq!(words_of(&out.stdout), vec![posix.to_owned()]);
        check_no_canary(&dir, "bash", windows);
    }
}
