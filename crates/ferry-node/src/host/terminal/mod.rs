//! `terminal.open`: the node's shell in a PTY, for as long as the gateway keeps the call
//! (spec N-TERM).
//!
//! Three parts run at once, so that none waits on another: the output pump reads the PTY
//! and sends [`Message::Data`] as fast as the gateway takes it; the input pump writes what
//! the gateway types into the PTY as fast as the shell reads it, and applies resizes; the
//! shell's exit is waited for on a thread of its own. Whichever ends the terminal first
//! (the shell's exit, the gateway ending its body, a breach of the message format, the
//! call given up or the link lost), the session is ended the same way (see
//! [`session`]), the shell is reaped, and, when the gateway still listens, it is told the
//! exit code.

mod pty;
mod pump;
mod session;
mod sessions;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::process::Pid;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::errors::refuse;
use super::journal::Held;
use super::{TerminalConfig, blocking, head, invalid};
use crate::terminal::{Message, TerminalOpenArgs, TerminalOpenHead, check_size};
use crate::{DataReader, DataWriter, NodeError, Reply};
use ferry_codes::Code;
pub use pty::Shell;
use pump::{InputEnd, OutputEnd};
pub use session::GRACE;
pub(crate) use sessions::Sessions;

/// Where the shell starts: `$HOME` when it is a folder, else `/`.
fn cwd(home: Option<&Path>) -> PathBuf {
    match home {
        Some(home) if home.is_absolute() && home.is_dir() => home.to_path_buf(),
        _ => PathBuf::from("/"),
    }
}

/// How long the gateway's input is read (and thrown away) after the exit was sent,
/// before it is given up.
const LINGER: std::time::Duration = std::time::Duration::from_secs(10);

/// Why the terminal ends.
enum Ended {
    /// The shell exited by itself.
    Exited,
    /// The gateway ended its request body: it closed the terminal.
    Closed,
    /// The gateway broke the message format.
    Breach(NodeError),
    /// The call was given up or the link lost: nobody listens any more.
    Gone,
}

/// Serves one `terminal.open`.
pub(super) async fn open(
    config: Arc<TerminalConfig>,
    args: TerminalOpenArgs,
    body: DataReader,
    reply: Reply,
) {
    if let Err(why) = check_size(args.cols, args.rows) {
        return reply.fail(invalid(why));
    }
    let started = {
        let config = config.clone();
        blocking(move || {
            let started = pty::start(
                &config.shell,
                &cwd(config.home.as_deref()),
                pty::size(args.cols, args.rows),
            )?;
            let pid = i32::try_from(started.pid).ok().and_then(Pid::from_raw);
            let record = pid.and_then(|pid| Sessions::new(&config.state_dir).begin(pid));
            Ok((started, pid, record))
        })
        .await
    };
    let (started, pid, record) = match started {
        Ok(started) => started,
        Err(e) => return reply.fail(e),
    };
    let Some(pid) = pid else {
        return reply.fail(refuse(Code::SpawnFailed, "the shell has no usable pid"));
    };
    let mut guard = SessionGuard {
        pid: Some(pid),
        record,
    };
    let exit = tokio::task::spawn_blocking(move || session::wait_exit(pid));
    let cancel = reply.cancellation();
    let answer = TerminalOpenHead {
        shell: config.shell.name.clone(),
        pid: started.pid,
    };
    let writer = match reply.stream(head(&answer)) {
        Ok(writer) => writer,
        Err(_) => {
            finish_session(&mut guard, started, Some(exit), None).await;
            return;
        }
    };
    run(started, guard, exit, writer, body, cancel).await;
}

/// Runs an open terminal until it ends, then ends it.
async fn run(
    started: pty::Started,
    mut guard: SessionGuard,
    mut exit: JoinHandle<std::io::Result<i32>>,
    writer: DataWriter,
    body: DataReader,
    cancel: CancellationToken,
) {
    let started = Arc::new(started);
    let stop_input = CancellationToken::new();
    let drain_output = CancellationToken::new();
    let abort_output = CancellationToken::new();
    let mut input = tokio::spawn(pump::input(started.clone(), body, stop_input.clone()));
    let mut output = tokio::spawn(pump::output(
        started.clone(),
        writer,
        drain_output.clone(),
        abort_output.clone(),
    ));
    let mut reader: Option<DataReader> = None;
    let mut writer: Option<DataWriter> = None;
    let mut input_open = true;
    let mut output_open = true;
    let mut exit_code = None;
    let mut exit_done = false;
    let ended = loop {
        tokio::select! {
            biased;
            () = cancel.cancelled() => break Ended::Gone,
            done = &mut input, if input_open => {
                input_open = false;
                let Ok((body, end)) = done else { break Ended::Gone };
                reader = Some(body);
                match end {
                    InputEnd::Closed => break Ended::Closed,
                    InputEnd::Breach(e) => break Ended::Breach(e),
                    InputEnd::Lost => break Ended::Gone,
                    // The shell no longer takes input (it closed the PTY): output and
                    // its exit still come.
                    InputEnd::Stopped => {}
                }
            }
            code = &mut exit, if !exit_done => {
                exit_done = true;
                match code {
                    Ok(Ok(code)) => { exit_code = Some(code); break Ended::Exited }
                    _ => break Ended::Gone,
                }
            }
            done = &mut output, if output_open => {
                output_open = false;
                let Ok((sent, end)) = done else { break Ended::Gone };
                writer = Some(sent);
                match end {
                    // Every process closed the PTY: the shell's exit follows.
                    OutputEnd::Ended => {}
                    OutputEnd::Aborted | OutputEnd::Lost => break Ended::Gone,
                }
            }
        }
    };
    // Stop the pumps and take the body's two ends back: the request's reader must outlive
    // the answer (dropping it unfinished gives the whole call up).
    if input_open {
        stop_input.cancel();
        reader = input.await.ok().map(|(body, _)| body);
    }
    if output_open {
        match ended {
            // What the shell printed before it exited is still sent.
            Ended::Exited => drain_output.cancel(),
            _ => abort_output.cancel(),
        }
        match output.await {
            Ok((sent, OutputEnd::Lost)) => drop(sent),
            Ok((sent, _)) => writer = Some(sent),
            Err(_) => {}
        }
    }
    if let Ended::Breach(e) = &ended {
        // Told at once; the session is ended after.
        if let Some(writer) = writer.take() {
            writer.fail(e.clone());
        }
    }
    // Both pumps are done with the PTY: it can be closed. (A pump that panicked dropped
    // its share; the guard still ends the session.)
    let Some(started) = Arc::into_inner(started) else {
        return;
    };
    let exit = (!exit_done).then_some(exit);
    let code = finish_session(&mut guard, started, exit, exit_code).await;
    if let (Some(mut writer), Some(code)) = (writer, code)
        && !matches!(ended, Ended::Gone)
        && writer.send(Message::Exit(code).encode()).await.is_ok()
        && writer.finish().await.is_ok()
        && let Some(mut reader) = reader.take()
    {
        // Giving the input up now would send a cancel that can overtake the exit and the
        // end still queued: the gateway ends its input once it has read them.
        let _ = tokio::time::timeout(LINGER, async {
            while let Some(Ok(_)) = reader.next().await {}
        })
        .await;
    }
    drop(reader);
}

/// Ends the session: hangs up the shell's group, closes the PTY, gives the session its
/// grace, kills what is left and reaps the shell. Says how the shell ended.
async fn finish_session(
    guard: &mut SessionGuard,
    started: pty::Started,
    exit: Option<JoinHandle<std::io::Result<i32>>>,
    exit_code: Option<i32>,
) -> Option<i32> {
    let pid = guard.pid?;
    session::hang_up(pid);
    drop(started);
    let cleared = tokio::task::spawn_blocking(move || session::clear(pid)).await;
    let code = match exit_code {
        Some(code) => Some(code),
        // Killed with the rest of the session at the latest.
        None => match exit {
            Some(exit) => exit.await.ok().and_then(Result::ok),
            None => None,
        },
    };
    if cleared.is_ok()
        && tokio::task::spawn_blocking(move || session::reap(pid))
            .await
            .is_ok()
    {
        guard.pid = None;
        guard.record = None;
    }
    code
}

/// Ends the session from a thread of its own if the terminal's task is dropped first.
/// Its record in the state folder goes once the session has ended.
struct SessionGuard {
    pid: Option<Pid>,
    record: Option<Held>,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.take() {
            session::end_detached(pid, self.record.take());
        }
    }
}
