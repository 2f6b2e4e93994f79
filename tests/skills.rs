//! T-SKILL: `ferry skills check` and the gateway refusing an oversized SKILL.md.

mod support;

use std::path::Path;

use support::ferry_command;

const HEAD: &str = "---\nname: report\ndescription: Builds a report into public/attachments\n---\n";

fn write_skill(root: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(root.join(name)).unwrap();
    std::fs::write(root.join(name).join("SKILL.md"), text).unwrap();
}

fn of_size(bytes: usize) -> String {
    format!("{HEAD}{}", "x".repeat(bytes - HEAD.len()))
}

fn of_lines(lines: usize) -> String {
    format!("{HEAD}{}", "line\n".repeat(lines - HEAD.lines().count()))
}

fn check(dir: &Path) -> (bool, String) {
    let out = ferry_command()
        .args(["skills", "check"])
        .arg(dir)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn check_passes_skills_within_the_limits() {
    let tmp = tempfile::tempdir().unwrap();
    write_skill(tmp.path(), "at-bytes", &of_size(15 * 1024));
    write_skill(tmp.path(), "at-lines", &of_lines(300));
    let (ok, out) = check(tmp.path());
    assert!(ok, "{out}");
    assert_eq!(out.matches("ok ").count(), 2, "{out}");
}

#[test]
fn check_fails_a_skill_one_byte_or_one_line_over() {
    for (name, text) in [
        ("too-big", of_size(15 * 1024 + 1)),
        ("too-long", of_lines(301)),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        write_skill(tmp.path(), "fine", HEAD);
        write_skill(tmp.path(), name, &text);
        let (ok, out) = check(tmp.path());
        assert!(!ok, "{name}: {out}");
        assert!(
            out.contains(&format!("refused {}", tmp.path().join(name).display())),
            "{out}"
        );
        assert!(
            out.contains("ok      report"),
            "the good skill is still listed: {out}"
        );
    }
}

#[test]
fn check_fails_where_there_is_no_skill() {
    let tmp = tempfile::tempdir().unwrap();
    let (ok, out) = check(tmp.path());
    assert!(!ok, "{out}");
    let (ok, _) = check(&tmp.path().join("missing"));
    assert!(!ok);
}

#[test]
fn the_gateway_does_not_load_an_oversized_skill_and_says_so_once() {
    // Skills are read at start: the site has them before the gateway starts.
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("site");
    write_skill(&data.join("skills"), "good", HEAD);
    write_skill(&data.join("skills"), "huge", &of_size(15 * 1024 + 1));
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut child = ferry_command()
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(&data)
        .stdout(std::process::Stdio::piped())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let log = std::fs::read_to_string(log.path()).unwrap();
    assert!(line.starts_with("http://127.0.0.1:"), "{line}");
    assert_eq!(log.matches("is not loaded").count(), 1, "{log}");
    assert!(log.contains("huge"), "{log}");
    assert!(log.contains("1 skill(s) loaded"), "{log}");
}
