//! Every document shipped to agents passes the M-DOCS check: it names
//! `public/attachments` and no line points a write at `uploads/`.

use std::path::{Path, PathBuf};

use ferry_docs::lint::{check_dir, markdown_files};

/// The shipped document folders that exist, relative to the repository root.
fn shipped_dirs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let agent_docs = root.join("docs/agent");
    assert!(
        agent_docs.is_dir(),
        "{} is missing: the agent documents must ship",
        agent_docs.display()
    );
    let mut dirs = vec![agent_docs];
    let skills = root.join("skills");
    if skills.is_dir() {
        dirs.push(skills);
    }
    dirs
}

#[test]
fn shipped_documents_pass_the_check() {
    let mut checked = 0;
    let mut violations = Vec::new();
    for dir in shipped_dirs() {
        checked += markdown_files(&dir).unwrap().len();
        violations.extend(check_dir(&dir).unwrap());
    }
    assert!(checked > 0, "no shipped document was checked");
    let report: Vec<String> = violations.iter().map(ToString::to_string).collect();
    assert!(report.is_empty(), "violations:\n{}", report.join("\n"));
}

#[test]
fn file_delivery_md_is_among_the_checked_documents() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let files = markdown_files(&root.join("docs/agent")).unwrap();
    assert!(
        files.iter().any(|file| file.ends_with("FILE_DELIVERY.md")),
        "{files:?}"
    );
    // The binary ships the same text.
    let on_disk = std::fs::read_to_string(root.join("docs/agent/FILE_DELIVERY.md")).unwrap();
    assert_eq!(on_disk, ferry_docs::shipped::FILE_DELIVERY_MD);
}
