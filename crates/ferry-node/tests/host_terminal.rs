//! `terminal.open` with real shells in real PTYs: typing, resizing, colours, how a shell
//! ended, everything the terminal started ending with it (the call dropped, the link
//! lost), back-pressure both ways with memory flat, sizes at their limits, and a gateway
//! that breaks the message format.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_codes::Code;
use ferry_node::host::{NodeHost, NodePolicy, Shell, TerminalConfig, UploadSweep};
use ferry_node::terminal::{MESSAGE_PAYLOAD_MAX_BYTES, Message, MessageDecoder, TerminalOpenHead};
use ferry_node::{DataReader, DataWriter, Link, NodeError};
use serde_json::json;
use tokio::sync::RwLock;

/// Tests that measure the process's memory run alone; the others share.
static MEMORY: RwLock<()> = RwLock::const_new(());

/// A node serving terminals that run bash, over a link, with a home of its own.
struct Node {
    gateway: Link,
    _node: Link,
    _home: tempfile::TempDir,
}

fn node() -> Node {
    let home = tempfile::tempdir().unwrap();
    let config = TerminalConfig {
        shell: Shell::from_env(Some("/bin/bash".into())),
        home: Some(home.path().to_path_buf()),
        state_dir: home.path().to_path_buf(),
        sweep: UploadSweep::default(),
    };
    let host = NodeHost::new(NodePolicy::default()).with_terminal(config);
    let (gateway, node) = common::linked(host.handler());
    Node {
        gateway,
        _node: node,
        _home: home,
    }
}

/// An open terminal, as the gateway holds it.
struct Terminal {
    pid: i32,
    /// `None` once the test ended it.
    input: Option<DataWriter>,
    output: DataReader,
    decoder: MessageDecoder,
    /// Everything printed so far (kept only by tests that look for text).
    seen: Vec<u8>,
}

async fn open(link: &Link, cols: u16, rows: u16) -> Result<Terminal, NodeError> {
    let mut call = link.open("terminal.open", json!({"cols": cols, "rows": rows}), true)?;
    let input = call.take_body().unwrap();
    let response = call.response().await?;
    let head: TerminalOpenHead = serde_json::from_value(response.result).unwrap();
    assert_eq!(head.shell, "bash");
    Ok(Terminal {
        pid: head.pid as i32,
        input: Some(input),
        output: response.body,
        decoder: MessageDecoder::new(),
        seen: Vec::new(),
    })
}

impl Terminal {
    async fn send(&mut self, message: Message) {
        self.send_raw(message.encode()).await;
    }

    async fn send_raw(&mut self, bytes: Bytes) {
        let input = self.input.as_mut().expect("the input is open");
        input.send(bytes).await.unwrap();
    }

    async fn type_text(&mut self, text: &str) {
        self.send(Message::Data(Bytes::copy_from_slice(text.as_bytes())))
            .await;
    }

    /// The next message the node sends; `None` when the body ends.
    async fn next(&mut self) -> Option<Result<Message, NodeError>> {
        loop {
            match self.decoder.next_message() {
                Ok(Some(message)) => return Some(Ok(message)),
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
            match self.output.next().await? {
                Ok(piece) => self.decoder.push(&piece),
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// Reads output until `needle` has been printed (within 20 s).
    async fn expect(&mut self, needle: &[u8]) {
        let found = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                if contains(&self.seen, needle) {
                    return;
                }
                match self.next().await {
                    Some(Ok(Message::Data(bytes))) => self.seen.extend_from_slice(&bytes),
                    other => panic!(
                        "{other:?} before {:?}; seen {:?}",
                        String::from_utf8_lossy(needle),
                        String::from_utf8_lossy(&self.seen)
                    ),
                }
            }
        })
        .await;
        assert!(
            found.is_ok(),
            "{:?} never came; seen {:?}",
            String::from_utf8_lossy(needle),
            String::from_utf8_lossy(&self.seen)
        );
    }

    /// Reads output until a number was printed between `before` and `after`.
    async fn expect_number(&mut self, before: &str, after: &str) -> i32 {
        let found = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                if let Some(n) = find_number(&self.seen, before, after) {
                    return n;
                }
                match self.next().await {
                    Some(Ok(Message::Data(bytes))) => self.seen.extend_from_slice(&bytes),
                    other => panic!("{other:?} before {before}N{after}"),
                }
            }
        })
        .await;
        found.unwrap_or_else(|_| {
            panic!(
                "no {before}N{after} in {:?}",
                String::from_utf8_lossy(&self.seen)
            )
        })
    }

    /// Reads output until the exit message; says its code, and checks the body ends after.
    async fn exit_code(&mut self) -> i32 {
        let code = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                match self.next().await {
                    Some(Ok(Message::Data(bytes))) => self.seen.extend_from_slice(&bytes),
                    Some(Ok(Message::Exit(code))) => return code,
                    other => panic!("{other:?} before the exit"),
                }
            }
        })
        .await
        .expect("the shell's exit came");
        assert!(self.next().await.is_none(), "the body ends after the exit");
        code
    }

    /// Reads until the body fails; says its code.
    async fn failure(&mut self) -> Code {
        let failure = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                match self.next().await {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return e.code(),
                    None => panic!("the body ended without failing"),
                }
            }
        })
        .await;
        failure.expect("the terminal failed")
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The number printed between `before` and `after` (the first with digits).
fn find_number(seen: &[u8], before: &str, after: &str) -> Option<i32> {
    let text = String::from_utf8_lossy(seen);
    let mut rest = &*text;
    while let Some(at) = rest.find(before) {
        rest = &rest[at + before.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if !digits.is_empty() && rest[digits.len()..].starts_with(after) {
            return digits.parse().ok();
        }
    }
    None
}

/// Whether `pid` no longer runs: gone, or a zombie waiting for a parent that is not the
/// terminal's (reparented jobs wait for init).
fn stopped(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let state = stat[stat.rfind(')').unwrap() + 1..]
                .split_whitespace()
                .next();
            matches!(state, Some("Z" | "X"))
        }
    }
}

/// Waits (at most `within`) until none of `pids` runs, and the shell `shell` is reaped.
async fn all_stopped(shell: i32, pids: &[i32], within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let shell_reaped = !PathBuf::from(format!("/proc/{shell}")).exists();
        if shell_reaped && pids.iter().all(|pid| stopped(*pid)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still running after {within:?}: shell reaped {shell_reaped}, {:?}",
            pids.iter().filter(|p| !stopped(**p)).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A process of the session `sid` whose command is `comm`.
fn in_session(sid: i32, comm: &str) -> Option<i32> {
    std::fs::read_dir("/proc").ok()?.find_map(|entry| {
        let pid: i32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let name = &stat[stat.find('(')? + 1..stat.rfind(')')?];
        let session: i32 = stat[stat.rfind(')')? + 1..]
            .split_whitespace()
            .nth(3)?
            .parse()
            .ok()?;
        (session == sid && name == comm).then_some(pid)
    })
}

/// The bytes process `pid` has written so far.
fn bytes_written(pid: i32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    let line = io.lines().find(|l| l.starts_with("wchar:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The resident memory of this process, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[tokio::test]
async fn typing_comes_back_and_colours_pass_through_untouched() {
    let _shared = MEMORY.read().await;
    let node = node();
    let mut t = open(&node.gateway, 80, 24).await.unwrap();
    t.type_text("echo hi\r").await;
    // The shell's answer (bash starts it on a fresh line with \r), not the echo of the
    // typed line.
    t.expect(b"\rhi\r\n").await;
    t.type_text("printf '\\033[31mred\\033[0m \\033[38;2;1;2;3mtrue\\033[0m\\n'\r")
        .await;
    t.expect(b"\x1b[31mred\x1b[0m \x1b[38;2;1;2;3mtrue\x1b[0m\r\n")
        .await;
    // The terminal's type and the shell's environment.
    t.type_text("echo \"T=$TERM C=$COLORTERM S=$SHELL D=$PWD\"\r")
        .await;
    let home = node._home.path().to_str().unwrap().to_owned();
    t.expect(format!("T=xterm-256color C=truecolor S=/bin/bash D={home}\r\n").as_bytes())
        .await;
    // It leads its own session and process group.
    t.type_text("ps -o sid=,pgid= -p $$ | tr -s ' ' | sed 's/^ */G/'\r")
        .await;
    t.expect(format!("G{} {}\r\n", t.pid, t.pid).as_bytes())
        .await;
    t.type_text("exit 0\r").await;
    assert_eq!(t.exit_code().await, 0);
    all_stopped(t.pid, &[], Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_resize_reaches_the_shell() {
    let _shared = MEMORY.read().await;
    let node = node();
    let mut t = open(&node.gateway, 80, 24).await.unwrap();
    t.type_text("echo S$(stty size)E\r").await;
    t.expect(b"S24 80E").await;
    t.send(Message::Resize {
        cols: 132,
        rows: 43,
    })
    .await;
    t.type_text("echo S$(stty size)E\r").await;
    t.expect(b"S43 132E").await;
}

#[tokio::test]
async fn sizes_are_1_to_1000_at_open_and_at_resize() {
    let _shared = MEMORY.read().await;
    let node = node();
    for (cols, rows) in [(0, 0), (0, 24), (80, 0), (1001, 24), (80, 1001)] {
        let e = open(&node.gateway, cols, rows).await.err().unwrap();
        assert_eq!(e.code(), Code::InvalidArguments, "{cols} × {rows}");
    }
    for (cols, rows) in [(1, 1), (1000, 1000), (1000, 1)] {
        let mut t = open(&node.gateway, cols, rows).await.unwrap();
        t.type_text("echo S$(stty size)E\r").await;
        t.expect(format!("S{rows} {cols}E").as_bytes()).await;
        t.send(Message::Resize { cols: 999, rows: 2 }).await;
        t.type_text("echo S$(stty size)E\r").await;
        t.expect(b"S2 999E").await;
    }
    for (cols, rows) in [(0, 0), (1001, 24), (80, 1001)] {
        let mut t = open(&node.gateway, 80, 24).await.unwrap();
        t.send(Message::Resize { cols, rows }).await;
        assert_eq!(t.failure().await, Code::BadFrame, "{cols} × {rows}");
        all_stopped(t.pid, &[], Duration::from_secs(5)).await;
    }
}

#[tokio::test]
async fn the_exit_code_and_a_killing_signal_are_reported() {
    let _shared = MEMORY.read().await;
    let node = node();
    let mut t = open(&node.gateway, 80, 24).await.unwrap();
    t.type_text("echo bye; exit 7\r").await;
    assert_eq!(t.exit_code().await, 7);
    // What it printed before it exited came first.
    assert!(contains(&t.seen, b"\rbye\r\n"));
    all_stopped(t.pid, &[], Duration::from_secs(5)).await;

    let mut t = open(&node.gateway, 80, 24).await.unwrap();
    t.type_text("kill -KILL $$\r").await;
    assert_eq!(t.exit_code().await, 128 + 9);
    all_stopped(t.pid, &[], Duration::from_secs(5)).await;
}

/// Starts two jobs that outlive a plain hang-up (one in the background in a process group
/// of its own, one `nohup`ed) and gives their pids.
async fn start_jobs(t: &mut Terminal) -> Vec<i32> {
    t.type_text("sleep 1000 & echo JOB1=$!=; nohup sleep 1001 >/dev/null 2>&1 & echo JOB2=$!=\r")
        .await;
    let jobs = vec![
        t.expect_number("JOB1=", "=").await,
        t.expect_number("JOB2=", "=").await,
    ];
    for job in &jobs {
        assert!(!stopped(*job), "job {job} runs");
    }
    jobs
}

#[tokio::test]
async fn dropping_the_call_ends_the_shell_and_every_job_it_started() {
    let _shared = MEMORY.read().await;
    let node = node();
    let mut t = open(&node.gateway, 80, 24).await.unwrap();
    let jobs = start_jobs(&mut t).await;
    let shell = t.pid;
    drop(t);
    all_stopped(shell, &jobs, Duration::from_secs(6)).await;
}

#[tokio::test]
async fn the_gateway_ending_its_input_ends_the_terminal_and_says_how_the_shell_ended() {
    let _shared = MEMORY.read().await;
    let node = node();
    let mut t = open(&node.gateway, 80, 24).await.unwrap();
    let jobs = start_jobs(&mut t).await;
    t.input.take().unwrap().finish().await.unwrap();
    // Hung up: bash ends on SIGHUP.
    assert_eq!(t.exit_code().await, 128 + 1);
    all_stopped(t.pid, &jobs, Duration::from_secs(6)).await;
}

#[tokio::test]
async fn the_link_dying_ends_the_shell_and_every_job_it_started() {
    let _shared = MEMORY.read().await;
    let node = node();
    let mut t = open(&node.gateway, 80, 24).await.unwrap();
    let jobs = start_jobs(&mut t).await;
    node.gateway.close();
    all_stopped(t.pid, &jobs, Duration::from_secs(6)).await;
}

/// Whether a live process is in the session `sid` (its id stays reserved while one is).
fn session_alive(sid: i32) -> bool {
    std::fs::read_dir("/proc").unwrap().any(|entry| {
        let Some(pid) = entry
            .ok()
            .and_then(|e| e.file_name().to_str()?.parse::<i32>().ok())
        else {
            return false;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        let mut fields = stat[stat.rfind(')').unwrap() + 1..].split_whitespace();
        let state = fields.next();
        let session = fields.nth(2).and_then(|s| s.parse::<i32>().ok());
        session == Some(sid) && !matches!(state, Some("Z" | "X"))
    })
}

#[tokio::test]
async fn a_process_that_forks_and_exits_over_and_over_does_not_outlive_the_terminal() {
    // It ignores the hang-up and is never where a scan of the session saw it: a new pid
    // every few microseconds, always in the same process group (it never calls setsid).
    let _shared = MEMORY.read().await;
    let node = node();
    let mut t = open(&node.gateway, 80, 24).await.unwrap();
    t.type_text(
        "perl -e '$SIG{HUP}=\"IGNORE\"; $t=time; while (time-$t < 20) { exit if fork }' & echo FORKER=$!=\r",
    )
    .await;
    t.expect_number("FORKER=", "=").await;
    let shell = t.pid;
    drop(t);
    all_stopped(shell, &[], Duration::from_secs(8)).await;
    // Nothing of the session is left, for a while after.
    for _ in 0..20 {
        assert!(
            !session_alive(shell),
            "a process of the session {shell} still runs"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_message_that_breaks_the_format_ends_the_terminal_with_bad_frame() {
    let _shared = MEMORY.read().await;
    let node = node();
    let breaches: [Bytes; 4] = [
        Bytes::from_static(&[9, 0, 0, 0, 0]),
        Bytes::from_static(&[1, 0, 0, 0, 0]),
        Bytes::from_static(&[2, 0, 0, 0, 3, 0, 1, 0]),
        Message::Exit(0).encode(),
    ];
    for breach in breaches {
        let mut t = open(&node.gateway, 80, 24).await.unwrap();
        let jobs = start_jobs(&mut t).await;
        t.send_raw(breach.clone()).await;
        assert_eq!(t.failure().await, Code::BadFrame, "{breach:?}");
        all_stopped(t.pid, &jobs, Duration::from_secs(6)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gigabyte_pasted_into_a_shell_that_does_not_read_waits_with_memory_flat() {
    let _alone = MEMORY.write().await;
    let node = node();
    let mut t = open(&node.gateway, 80, 24).await.unwrap();
    // A foreground job that never reads its terminal.
    t.type_text("sleep 1000; echo WOKE-$((40+2))\r").await;
    let before = rss();
    let Terminal {
        pid,
        input,
        mut output,
        ..
    } = t;
    let mut input = input.unwrap();
    // The echo of what the PTY takes is read and thrown away.
    let reading = tokio::spawn(async move { while let Some(Ok(_)) = output.next().await {} });
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = accepted.clone();
    let pasting = tokio::spawn(async move {
        let line = [b"x".repeat(79), b"\n".to_vec()].concat();
        let chunk = Bytes::from(line.repeat(MESSAGE_PAYLOAD_MAX_BYTES / 80));
        let message = Message::Data(chunk.clone()).encode();
        let mut sent = 0u64;
        while sent < 1 << 30 {
            if input.send(message.clone()).await.is_err() {
                break;
            }
            sent += chunk.len() as u64;
            counted.store(sent, std::sync::atomic::Ordering::Relaxed);
        }
        input
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after_3s = accepted.load(std::sync::atomic::Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after_4s = accepted.load(std::sync::atomic::Ordering::Relaxed);
    assert!(!pasting.is_finished(), "the paste is still waiting");
    assert!(after_3s > 0, "some of the paste was taken");
    assert_eq!(
        after_3s, after_4s,
        "nothing more is taken while nobody reads"
    );
    assert!(after_4s < 8 << 20, "{after_4s} bytes were taken");
    let grown = rss().saturating_sub(before);
    eprintln!("the paste: {after_4s} bytes taken, the process grew by {grown} bytes");
    assert!(grown < 64 << 20, "the process grew by {grown} bytes");
    pasting.abort();
    reading.abort();
    all_stopped(pid, &[], Duration::from_secs(6)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gigabyte_printed_to_a_slow_reader_waits_with_memory_flat() {
    let _alone = MEMORY.write().await;
    let node = node();
    let mut t = open(&node.gateway, 80, 24).await.unwrap();
    t.type_text("stty -echo\r").await;
    t.type_text("head -c 1073741824 /dev/zero | tr '\\000' x; echo; echo DONE-$((40+2))\r")
        .await;
    let before = rss();
    // Slowly: a message every 20 ms for two seconds.
    let mut slow = 0u64;
    for _ in 0..100 {
        match t.next().await {
            Some(Ok(Message::Data(bytes))) => slow += bytes.len() as u64,
            other => panic!("{other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The writer waits on the reader: what `tr` wrote is what was read plus what the
    // PTY, the node and the link's window hold, not the gigabyte.
    let tr = in_session(t.pid, "tr").expect("tr runs");
    let written = bytes_written(tr);
    assert!(
        written < slow + (8 << 20),
        "tr wrote {written} bytes while {slow} were read"
    );
    let grown = rss().saturating_sub(before);
    assert!(
        grown < 64 << 20,
        "the process grew by {grown} bytes while reading slowly"
    );
    // Then as fast as it comes, to the end.
    let mut total = slow;
    let mut tail: Vec<u8> = Vec::new();
    let mut peak = rss();
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut messages = 0u64;
    while !contains(&tail, b"DONE-42") {
        assert!(
            Instant::now() < deadline,
            "the output took too long ({total} bytes)"
        );
        match t.next().await {
            Some(Ok(Message::Data(bytes))) => {
                total += bytes.len() as u64;
                tail.extend_from_slice(&bytes);
                let keep = tail.len().saturating_sub(64);
                tail.drain(..keep);
            }
            other => panic!("{other:?} after {total} bytes"),
        }
        messages += 1;
        if messages.is_multiple_of(1024) {
            peak = peak.max(rss());
        }
    }
    assert!(total > 1 << 30, "{total} bytes");
    let grown = peak.saturating_sub(before);
    eprintln!(
        "the output: {total} bytes; {written} written by tr while {slow} were read slowly; \
         the process grew by at most {grown} bytes"
    );
    assert!(grown < 64 << 20, "the process grew by {grown} bytes");
}
