//! The person's worker (host mode): a long-lived process that already *is* the person
//! and performs [`Op`]s sent over a unix socket.
//!
//! `ferry-posix-helper` authorizes the service, drops to the person and execs the
//! worker with the socket as its stdin; from then on every operation costs one round
//! trip instead of a process spawn. A frame is a 4-byte big-endian length and a JSON
//! document. An opened file travels back as a descriptor (`SCM_RIGHTS`) beside its
//! reply, so reads happen in the service with the person's permission checked once, at
//! open, by the kernel.
//!
//! The worker inherits nothing from the service but that socket: the helper starts it
//! with an environment made from nothing and umask 077. What it needs besides the
//! person's [`Hello`] (how the service resolves paths) comes in the first frame, and it
//! sets its own umask ([`crate::UMASK`]) so what it creates gets the modes the tools
//! give in every mode.

use std::fs::File;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferry_codes::Code;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use serde::{Deserialize, Serialize};

use crate::RequestError;
use crate::account::{ACCOUNT_CHECK_INTERVAL, AccountWatch, Seen};
use crate::idle::IdleWorkers;
use crate::ops::{Executor, Op, Reply, RunSettings};
use crate::reaper::Below;
use crate::scope::{Access, Scope, Tree};

/// The largest frame either side accepts. No file's bytes cross the socket (they go
/// through passed descriptors), so frames hold paths and metadata; the largest is a
/// listing: 10,000 entries of `public/` (`LIST_MAX_ENTRIES`) with names escaped in JSON
/// fit easily, and a pathological tree past this is refused with `too_large`.
pub const FRAME_MAX_BYTES: usize = 32 * 1024 * 1024;
/// Idle workers kept per person; more calls at once spawn more, which then end. Every
/// upload holds one for its whole life, so a burst of small uploads needs as many at once
/// as it has uploads in flight: with fewer kept (32 against 64 connections), about one
/// upload in seven started a process. So every worker the cap allows is kept, and
/// [`WORKER_IDLE_TIMEOUT`] gives their memory back once the burst is over.
const IDLE_WORKERS_MAX: usize = WORKERS_PER_PERSON_MAX;
/// Worker processes one person may have at once, busy and idle: a person's burst of
/// requests cannot fill the machine with processes; one more is `429 too_many_workers`.
pub const WORKERS_PER_PERSON_MAX: usize = 64;

/// The first frame: who the worker works for.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Hello {
    /// The site's data folder every tree lies beneath.
    pub base: PathBuf,
    /// The person's home: where relative paths and `~` start.
    pub home: PathBuf,
    /// The folders the person's tools may reach.
    pub trees: Vec<Tree>,
    /// How the person's commands run.
    pub run: RunSettings,
}

/// The first frame as sent: the person's [`Hello`] and the service's own settings the
/// worker must share, which it would otherwise have read from an inherited variable.
/// A process the worker's program starts keeps acting as the person with it (a herd
/// worker's supervisor).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Setup {
    /// Who the person is and what they reach.
    pub hello: Hello,
    /// Whether `openat2` may be used (`ferry_fs::openat2_allowed` in the service).
    pub openat2: bool,
}

impl Setup {
    /// Takes the service's settings into this process (which already runs as the person)
    /// and makes the executor that acts as the person here.
    pub fn executor(&self) -> Result<Executor, RequestError> {
        if !self.openat2 {
            ferry_fs::set_openat2_enabled(false);
        }
        rustix::process::umask(rustix::fs::Mode::from_raw_mode(crate::UMASK));
        let hello = self.hello.clone();
        let scope = Scope::new(hello.base, hello.home, hello.trees, Access::AsPerson)?;
        Ok(Executor::new(scope, hello.run, None))
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Answer {
    Ok(Reply),
    Err(RequestError),
}

/// Serves operations on `stream` until the service closes it. Runs inside the worker.
pub fn serve(mut stream: UnixStream) -> io::Result<()> {
    detach()?;
    let setup = greeting(&mut stream)?;
    // The second net under each run's reaper: should a command kill its reaper, what it
    // started is adopted here, not by init, and killed once the run has returned.
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    let mut orphans = Below::new()?;
    let executor = setup.executor();
    while let Some((frame, _)) = recv_frame(&mut stream)? {
        let (answer, mut file) = match (&executor, serde_json::from_slice::<Op>(&frame)) {
            (Err(e), _) => (Answer::Err(e.clone()), None),
            (Ok(_), Err(e)) => (
                Answer::Err(RequestError::new(Code::BadRequest, e.to_string())),
                None,
            ),
            (Ok(executor), Ok(op)) => {
                let ran = matches!(op, Op::Run { .. });
                let done = if ran {
                    while_connected(&stream, || executor.execute(op))?
                } else {
                    executor.execute(op)
                };
                if ran {
                    // The worker starts nothing else: any child now is such an orphan.
                    orphans.kill_all(None, &mut None);
                }
                match done {
                    Ok((reply, file)) => (Answer::Ok(reply), file),
                    Err(e) => (Answer::Err(e), None),
                }
            }
        };
        let (bytes, fits) = encode(&answer)?;
        if !fits {
            file = None;
        }
        send_frame(&stream, &bytes, file.map(OwnedFd::from))?;
    }
    // A folder's zip may still be on its way; its reader has let go of it by now (the
    // service closes the pipe before it gives this worker back), so this is quick.
    crate::stream::wait_for_streams();
    Ok(())
}

/// Serves one request of a program above this crate on `stream`, then ends. Runs inside
/// a process the service started as the person with [`WorkerPool::call_once`]: it is
/// greeted as a worker is, `handle` is given the greeting, the executor acting as the
/// person and the request's bytes, and what it returns is the answer.
pub fn serve_once(
    mut stream: UnixStream,
    handle: impl FnOnce(&Setup, Result<Executor, RequestError>, Vec<u8>) -> Vec<u8>,
) -> io::Result<()> {
    detach()?;
    let setup = greeting(&mut stream)?;
    let executor = setup.executor();
    let (request, _) = recv_frame(&mut stream)?.ok_or_else(|| eof("no request"))?;
    let answer = handle(&setup, executor, request);
    send_frame(&stream, &answer, None)
}

/// The first frame, read before anything else is done.
fn greeting(stream: &mut UnixStream) -> io::Result<Setup> {
    let (setup, _) = recv_frame(stream)?.ok_or_else(|| eof("no greeting"))?;
    serde_json::from_slice(&setup).map_err(io::Error::other)
}

/// Performs `work` (a command's run) while watching the service's end of `stream`.
/// Should the service go away meanwhile (its process killed: a herd worker's supervisor
/// is ended that way), this process exits at once. That closes the run's control pipe,
/// and the reaper ends the command's whole tree now rather than at its deadline, which
/// for a herd worker may be a day away. Nobody is left to read the answer anyway.
fn while_connected<T>(stream: &UnixStream, work: impl FnOnce() -> T) -> io::Result<T> {
    use rustix::event::{PollFd, PollFlags};
    let (done, finished) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    Ok(std::thread::scope(|scope| {
        scope.spawn(|| {
            // RDHUP alone: a frame sent early (the protocol sends none during a run)
            // would make a watch for IN spin; the peer's close raises RDHUP or HUP.
            let mut fds = [
                PollFd::new(stream, PollFlags::RDHUP),
                PollFd::new(&done, PollFlags::IN),
            ];
            loop {
                match rustix::event::poll(&mut fds, None) {
                    Ok(_) => {}
                    Err(rustix::io::Errno::INTR) => continue,
                    // Unwatchable: the run still ends at its deadline, as before.
                    Err(_) => return,
                }
                if !fds[1].revents().is_empty() {
                    return;
                }
                if !fds[0].revents().is_empty() {
                    std::process::exit(1);
                }
            }
        });
        let result = work();
        drop(finished);
        result
    }))
}

/// The frame of `answer`, and whether it is that answer: one too large for a frame is
/// replaced by a `too_large` refusal, so the service hears why instead of losing the worker.
fn encode(answer: &Answer) -> io::Result<(Vec<u8>, bool)> {
    let bytes = serde_json::to_vec(answer).map_err(io::Error::other)?;
    if bytes.len() <= FRAME_MAX_BYTES {
        return Ok((bytes, true));
    }
    let refused = RequestError::new(
        Code::TooLarge,
        format!(
            "the answer is {} bytes, over the {FRAME_MAX_BYTES}-byte limit of what the \
             person's worker may send; ask for less (a smaller folder, a page)",
            bytes.len()
        ),
    );
    let bytes = serde_json::to_vec(&Answer::Err(refused)).map_err(io::Error::other)?;
    Ok((bytes, false))
}

/// Cuts the worker off from everything of the service's but its socket, before it reads
/// a frame: the person's own processes run as the same user, so without this they could
/// trace the worker (and through it write to the service's log or type into the
/// operator's terminal). Not dumpable, so only root may trace it or open its `/proc`
/// files; a session of its own, so it has no controlling terminal. Its stderr is a pipe
/// the service reads (see [`WorkerPool`]), never the service's own.
fn detach() -> io::Result<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
    rustix::process::setsid()?;
    Ok(())
}

/// The longest line of a worker's stderr the service logs; the rest of it is dropped.
const STDERR_LINE_MAX_BYTES: u64 = 4096;

/// Logs what a worker (or the helper before it) writes to stderr, one line at a time,
/// escaped, so a person's process cannot forge or break lines of the service's log.
fn log_stderr(person: String, stderr: std::process::ChildStderr) {
    use std::io::BufRead;
    let spawned = std::thread::Builder::new()
        .name("worker-stderr".into())
        .spawn(move || {
            let mut reader = io::BufReader::new(stderr);
            let mut line = Vec::new();
            loop {
                line.clear();
                let read = (&mut reader)
                    .take(STDERR_LINE_MAX_BYTES)
                    .read_until(b'\n', &mut line);
                match read {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                if line.last() != Some(&b'\n') {
                    // Over the cap: skip to the end of the line.
                    let mut rest = Vec::new();
                    if reader.read_until(b'\n', &mut rest).is_err() {
                        return;
                    }
                }
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end_matches('\n');
                tracing::warn!("worker of {person}: {}", text.escape_debug());
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("worker of the person: its stderr cannot be read: {e}");
    }
}

/// How to start a worker for one person.
#[derive(Clone, Debug)]
pub struct WorkerSpawn {
    /// `ferry-posix-helper`.
    pub helper: PathBuf,
    /// The person the worker serves; the helper is given it to drop to their account.
    pub person: String,
    /// The program the helper execs after the drop, and its arguments: it must call
    /// [`serve`] on its stdin.
    pub program: PathBuf,
    /// Arguments for `program`.
    pub args: Vec<String>,
    /// The greeting each new worker receives first.
    pub hello: Hello,
    /// The person's POSIX account, which must exist for the helper to drop to it.
    pub account: String,
}

/// How long an idle worker is kept unused before it is ended. A burst of uploads leaves
/// up to [`IDLE_WORKERS_MAX`] workers idle, each holding its own memory (about 1.3 MiB
/// private, 8 MiB resident with the shared pages of the binary); kept forever, a burst's
/// workers would hold that after the person has gone quiet.
/// A minute outlasts the pauses within one working session, so the next request usually
/// still finds a warm worker, and a new one starts in a few milliseconds.
pub const WORKER_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Live workers for one person, reused across calls.
#[derive(Debug)]
pub struct WorkerPool {
    spawn: WorkerSpawn,
    idle: IdleWorkers,
    /// The person's POSIX account: a worker is handed a request only while it is the
    /// account the worker runs as.
    account: AccountWatch,
    /// Workers alive now, busy or idle; each [`Worker`] gives its count back when dropped.
    live: Arc<AtomicUsize>,
}

#[derive(Debug)]
pub(crate) struct Worker {
    stream: UnixStream,
    child: Child,
    /// False once a call failed on the socket: the worker is not used again.
    healthy: bool,
    /// The era of the account (see [`Seen`]) when the worker started as it.
    era: u64,
    /// The pool's count of live workers, given back when this one ends.
    live: Arc<AtomicUsize>,
}

impl WorkerPool {
    /// A pool that has no workers yet; they start on first use, and end after
    /// [`WORKER_IDLE_TIMEOUT`] unused.
    pub fn new(spawn: WorkerSpawn) -> WorkerPool {
        WorkerPool::with_idle_timeout(spawn, WORKER_IDLE_TIMEOUT)
    }

    /// A pool whose idle workers end after `idle_timeout` unused.
    pub fn with_idle_timeout(spawn: WorkerSpawn, idle_timeout: Duration) -> WorkerPool {
        let account = AccountWatch::new(spawn.account.clone(), ACCOUNT_CHECK_INTERVAL);
        WorkerPool {
            spawn,
            idle: IdleWorkers::new(idle_timeout, IDLE_WORKERS_MAX),
            account,
            live: Default::default(),
        }
    }

    /// How many workers wait idle now.
    pub fn idle_count(&self) -> usize {
        self.idle.len()
    }

    /// How many workers are alive now, busy or idle.
    pub fn live_count(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    /// Performs `op` in an idle worker, or a new one.
    pub fn execute(&self, op: &Op) -> Result<(Reply, Option<File>), RequestError> {
        let mut worker = None;
        let result = self.perform_first(&mut worker, op);
        if let Some(worker) = worker
            && result.is_ok()
        {
            self.give_back(worker);
        }
        result
    }

    /// Runs the pool's program once as the person with `args` in place of the worker's,
    /// which must call [`serve_once`]: greeted as a worker is, handed `request`, and its
    /// one answer returned. It counts as one of the person's workers while it runs. For
    /// work that must happen as the person in a program above this crate (the herd).
    pub fn call_once(&self, args: &[String], request: &[u8]) -> Result<Vec<u8>, RequestError> {
        let mut worker = self.start_checked(args)?;
        send_frame(&worker.stream, request, None).map_err(worker_failed)?;
        match recv_frame(&mut worker.stream) {
            Ok(Some((answer, _))) => Ok(answer),
            Ok(None) => Err(worker_failed(eof(
                "it ended before it answered (was the helper refused? see its message)",
            ))),
            Err(e) => Err(worker_failed(e)),
        }
    }

    /// Performs `op` as the first call of `slot`'s worker, taken now: an idle one that
    /// died while it waited (the request could not even be sent) is replaced by a fresh
    /// worker, once. Any later failure is the caller's to hear.
    pub(crate) fn perform_first(
        &self,
        slot: &mut Option<Worker>,
        op: &Op,
    ) -> Result<(Reply, Option<File>), RequestError> {
        let (mut worker, was_idle) = self.take()?;
        let mut result = worker.perform(op);
        if was_idle && matches!(result, Err(Failure::Unsent(_))) {
            worker = self.start_checked(&self.spawn.args)?;
            result = worker.perform(op);
        }
        if worker.healthy {
            *slot = Some(worker);
        }
        result.map_err(Failure::into_request_error)
    }

    /// An idle worker (and `true`), or a new one, for the caller alone until
    /// [`WorkerPool::give_back`]. An idle worker is handed out only while the account it
    /// runs as, with its groups, is still the person's (looked at most once per
    /// [`ACCOUNT_CHECK_INTERVAL`]); the others end here.
    fn take(&self) -> Result<(Worker, bool), RequestError> {
        let (era, _) = self.current_account(false)?;
        // Ended before a fresh one starts: a person taken out of a group is served by no
        // process that still has it.
        drop(self.idle.take_stale(era));
        if let Some(worker) = self.idle.take() {
            return Ok((worker, true));
        }
        Ok((self.start_checked(&self.spawn.args)?, false))
    }

    /// The account's era and uid now; when the account is gone, every idle worker is
    /// ended and the caller hears how to fix it. `fresh`: look it up whatever the last
    /// look was.
    fn current_account(&self, fresh: bool) -> Result<(u64, u32), RequestError> {
        match self.account.look(fresh).map_err(worker_failed)? {
            Seen::Present { era, uid } => Ok((era, uid)),
            Seen::Missing => {
                drop(self.idle.drain());
                Err(RequestError::new(
                    Code::AccountMissing,
                    format!(
                        "the POSIX account {} of the person {} does not exist; run \
                         `ferry site init --mode host` to make it again",
                        self.account.name(),
                        self.spawn.person
                    ),
                ))
            }
        }
    }

    /// Refuses to start a worker as `uid` when the person's home belongs to another uid
    /// (the account's uid was changed by hand): such a worker could not reach the
    /// person's folders, and the helper or the worker would fail with no word of why.
    fn require_owner(&self, uid: u32) -> Result<(), RequestError> {
        use std::os::unix::fs::MetadataExt;
        // The home's own entry, not followed: `home/` is root's and readable by the
        // service, the home itself is the person's.
        let owner = match std::fs::symlink_metadata(&self.spawn.hello.home) {
            Ok(meta) => meta.uid(),
            // Looked at only to name a cause; the worker reports a home it cannot reach.
            Err(_) => return Ok(()),
        };
        if owner == uid {
            return Ok(());
        }
        Err(RequestError::new(
            Code::AccountChanged,
            format!(
                "the POSIX account {} of the person {} has uid {uid}, but the person's \
                 folders belong to uid {owner}; run `ferry site init --mode host` to give \
                 them to the account",
                self.account.name(),
                self.spawn.person
            ),
        ))
    }

    /// A new worker, once the person's account is known to exist and own their folders.
    fn start_checked(&self, args: &[String]) -> Result<Worker, RequestError> {
        // Looked up now whatever the last look: the helper would refuse a missing account.
        let (era, uid) = self.current_account(true)?;
        self.require_owner(uid)?;
        let claimed = self
            .live
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < WORKERS_PER_PERSON_MAX).then_some(n + 1)
            });
        if claimed.is_err() {
            return Err(RequestError::new(
                Code::TooManyWorkers,
                format!(
                    "{WORKERS_PER_PERSON_MAX} requests of this person are being served at \
                     once; try again when one has finished"
                ),
            ));
        }
        self.start(era, args).map_err(|e| {
            self.live.fetch_sub(1, Ordering::SeqCst);
            worker_failed(e)
        })
    }

    /// Keeps a worker that answered well for the next call; one whose account has since
    /// gone or changed ends.
    pub(crate) fn give_back(&self, worker: Worker) {
        if !worker.healthy {
            return;
        }
        match self.account.look(false) {
            Ok(Seen::Present { era, .. }) if era == worker.era => self.idle.put(worker),
            _ => drop(worker),
        }
    }

    fn start(&self, era: u64, args: &[String]) -> io::Result<Worker> {
        let (ours, theirs) = UnixStream::pair()?;
        let mut child = std::process::Command::new(&self.spawn.helper)
            .arg(&self.spawn.person)
            .arg(&self.spawn.program)
            .args(args)
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        if let Some(stderr) = child.stderr.take() {
            log_stderr(self.spawn.person.clone(), stderr);
        }
        let setup = Setup {
            hello: self.spawn.hello.clone(),
            openat2: ferry_fs::openat2_allowed(),
        };
        let greeted = serde_json::to_vec(&setup)
            .map_err(io::Error::other)
            .and_then(|setup| send_frame(&ours, &setup, None));
        if let Err(e) = greeted {
            // A helper that refused has ended, or will once its socket closes: waited for
            // here, so no zombie is left for each refused start.
            drop(ours);
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        Ok(Worker {
            stream: ours,
            child,
            healthy: true,
            era,
            live: self.live.clone(),
        })
    }
}

impl Worker {
    /// The era of the account (see [`Seen`]) this worker started in.
    pub(crate) fn era(&self) -> u64 {
        self.era
    }

    /// Performs `op`; after a failure of the socket (the worker died) the worker is not
    /// used again.
    pub(crate) fn perform(&mut self, op: &Op) -> Result<(Reply, Option<File>), Failure> {
        let frame = serde_json::to_vec(op)
            .map_err(|e| Failure::Refused(RequestError::new(Code::BadRequest, e.to_string())))?;
        if let Err(e) = send_frame(&self.stream, &frame, None) {
            self.healthy = false;
            return Err(Failure::Unsent(e));
        }
        match self.answer() {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(refused)) => Err(Failure::Refused(refused)),
            Err(e) => {
                self.healthy = false;
                Err(Failure::Lost(e))
            }
        }
    }

    /// Whether the socket has not failed yet.
    pub(crate) fn is_healthy(&self) -> bool {
        self.healthy
    }

    fn answer(&mut self) -> io::Result<Result<(Reply, Option<File>), RequestError>> {
        let (bytes, fd) = recv_frame(&mut self.stream)?
            .ok_or_else(|| eof("the worker ended (was the helper refused? see its message)"))?;
        let answer: Answer = serde_json::from_slice(&bytes).map_err(io::Error::other)?;
        Ok(match answer {
            Answer::Ok(reply) => Ok((reply, fd.map(File::from))),
            Answer::Err(e) => Err(e),
        })
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing the socket ends the worker's loop; reap it so no zombie is left.
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        let _ = self.child.wait();
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Why a call to a worker failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The request could not be sent: the worker was gone before it.
    Unsent(io::Error),
    /// The worker went away before it answered.
    Lost(io::Error),
    /// The worker answered with a refusal.
    Refused(RequestError),
}

impl Failure {
    pub(crate) fn into_request_error(self) -> RequestError {
        match self {
            Failure::Unsent(e) | Failure::Lost(e) => worker_failed(e),
            Failure::Refused(e) => e,
        }
    }
}

fn worker_failed(e: io::Error) -> RequestError {
    RequestError::new(
        Code::WorkerFailed,
        format!("the process acting as the person failed: {e}"),
    )
}

fn eof(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, what.to_owned())
}

fn send_frame(stream: &UnixStream, bytes: &[u8], fd: Option<OwnedFd>) -> io::Result<()> {
    if bytes.len() > FRAME_MAX_BYTES {
        return Err(io::Error::other("frame too large"));
    }
    let header = (bytes.len() as u32).to_be_bytes();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut ancillary = SendAncillaryBuffer::new(&mut space);
    let fds;
    if let Some(fd) = &fd {
        fds = [std::os::fd::AsFd::as_fd(fd)];
        ancillary.push(SendAncillaryMessage::ScmRights(&fds));
    }
    // The descriptor rides on the header's bytes, and the body goes in the same call: the
    // reader wakes once, to a whole frame, not once for the header and again for the body.
    let sent = rustix::net::sendmsg(
        stream,
        &[IoSlice::new(&header), IoSlice::new(bytes)],
        &mut ancillary,
        SendFlags::NOSIGNAL,
    )?;
    let mut writer = stream;
    if sent < header.len() {
        writer.write_all(&header[sent..])?;
        writer.write_all(bytes)?;
    } else {
        writer.write_all(&bytes[sent - header.len()..])?;
    }
    Ok(())
}

/// One frame, or `None` at a clean end of stream.
fn recv_frame(stream: &mut UnixStream) -> io::Result<Option<(Vec<u8>, Option<OwnedFd>)>> {
    let mut header = [0u8; 4];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut ancillary = RecvAncillaryBuffer::new(&mut space);
    let got = rustix::net::recvmsg(
        &*stream,
        &mut [IoSliceMut::new(&mut header)],
        &mut ancillary,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    if got.bytes == 0 {
        return Ok(None);
    }
    if got.flags.contains(ReturnFlags::CTRUNC) {
        return Err(io::Error::other("a descriptor was cut off"));
    }
    let mut fd = None;
    for message in ancillary.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = message {
            for received in fds {
                fd.get_or_insert(received);
            }
        }
    }
    stream.read_exact(&mut header[got.bytes..])?;
    let len = u32::from_be_bytes(header) as usize;
    if len > FRAME_MAX_BYTES {
        return Err(io::Error::other("frame too large"));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    Ok(Some((body, fd)))
}

#[cfg(test)]
#[path = "frame_tests.rs"]
mod frame_tests;
