//! A `file_edit` of two files killed exactly between its two placings (the test kills
//! `ferry mcp` at its second rename into the folder, through `support::faults`) lands in
//! neither file: the change's journal, in the site's own folder, has the next start put
//! the first file back, whether that start is a `ferry mcp` of the same person or a
//! gateway's.

mod support;

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::faults;
use support::mcp_stdio::McpProcess;
use support::{Server, temporaries};

const OLD_A: &str = "counter: 0\nthe first file\n";
const OLD_B: &str = "counter: 0\nthe second file\n";

/// A server whose person has `public/a.txt` and `public/b.txt` at counter 0, and an
/// edit of both killed between its two placings: the folder.
fn killed_between_placings(server: &Server) -> PathBuf {
    let public = server.home("me").join("public");
    std::fs::create_dir_all(&public).unwrap();
    std::fs::write(public.join("a.txt"), OLD_A).unwrap();
    std::fs::write(public.join("b.txt"), OLD_B).unwrap();
    let mut cmd = McpProcess::command(&server.data);
    faults::prepare(&mut cmd);
    let mut mcp = McpProcess::launch(cmd);
    let disk = faults::Disk::watch(mcp.child.id(), &public);
    mcp.initialize();
    disk.kill_at_rename_after(1);
    let edits: Vec<Value> = ["public/a.txt", "public/b.txt"]
        .iter()
        .map(|p| json!({"path": p, "oldText": "counter: 0\n", "newText": "counter: 1\n"}))
        .collect();
    let answer = mcp.call("file_edit", json!({"edits": edits}));
    assert!(answer.is_none(), "the edit was answered: {answer:?}");
    mcp.child.wait().unwrap();
    // The kill left the two apart, as only the journal can mend.
    assert!(read(&public, "a.txt").starts_with("counter: 1\n"));
    assert_eq!(read(&public, "b.txt"), OLD_B);
    assert_eq!(journals(server), 1);
    public
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap()
}

/// The change journals in the site's own folder.
fn journals(server: &Server) -> usize {
    std::fs::read_dir(server.data.join(".ferry").join("changes"))
        .map(|entries| entries.count())
        .unwrap_or(0)
}

#[track_caller]
fn assert_undone(server: &Server, public: &Path) {
    assert_eq!(read(public, "a.txt"), OLD_A);
    assert_eq!(read(public, "b.txt"), OLD_B);
    assert!(temporaries(public).is_empty(), "{:?}", temporaries(public));
    assert_eq!(journals(server), 0);
}

#[test]
fn the_next_ferry_mcp_undoes_an_edit_killed_between_its_files() {
    let server = Server::start();
    let public = killed_between_placings(&server);
    let mut mcp = McpProcess::start(&server.data);
    assert_undone(&server, &public);

    // The same edit, made again, lands in both.
    let edits: Vec<Value> = ["public/a.txt", "public/b.txt"]
        .iter()
        .map(|p| json!({"path": p, "oldText": "counter: 0\n", "newText": "counter: 1\n"}))
        .collect();
    let edited = mcp.call("file_edit", json!({"edits": edits})).unwrap();
    assert_ne!(edited["isError"], true, "{edited}");
    assert!(read(&public, "a.txt").starts_with("counter: 1\n"));
    assert!(read(&public, "b.txt").starts_with("counter: 1\n"));
    assert_eq!(journals(&server), 0);
}

#[test]
fn a_gateway_start_undoes_an_edit_killed_between_its_files() {
    let mut server = Server::start();
    let public = killed_between_placings(&server);
    server.restart();
    let deadline = Instant::now() + Duration::from_secs(30);
    while journals(&server) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_undone(&server, &public);
    assert!(
        server.log().contains("whose writer died"),
        "{}",
        server.log()
    );
}

/// A file written to in place after the kill (the same inode, as a shell's `>` does)
/// is the person's now: the undo leaves it as it is, and never puts the old one over it.
#[test]
fn a_file_written_to_after_the_kill_is_left_as_the_person_wrote_it() {
    let server = Server::start();
    let public = killed_between_placings(&server);
    let inode = std::fs::metadata(public.join("a.txt")).unwrap().ino();
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(public.join("a.txt"))
        .unwrap()
        .write_all(b"the person rewrote this in place\n")
        .unwrap();
    assert_eq!(
        std::fs::metadata(public.join("a.txt")).unwrap().ino(),
        inode
    );
    let _mcp = McpProcess::start(&server.data);
    assert_eq!(read(&public, "a.txt"), "the person rewrote this in place\n");
    assert_eq!(read(&public, "b.txt"), OLD_B);
    assert!(
        temporaries(&public).is_empty(),
        "{:?}",
        temporaries(&public)
    );
    assert_eq!(journals(&server), 0);
}
