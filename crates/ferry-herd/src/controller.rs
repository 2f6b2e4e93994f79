//! The controller's side of a herd (H-API): `assign`, `steer`, `reply`, `status`,
//! `stop` and its own inbox, as one person, every file read through their requester.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use ferry_codes::Code;
use ferry_config::limits::{HERD_TEXT_MAX_BYTES, HERD_WORKERS_MAX};
use ferry_exec::Requester;
use ferry_exec::ops::Kind as FileKind;
use ferry_fs::Dir;
use ferry_site::layout;
use serde::{Deserialize, Serialize};

use crate::answers::{Assigned, Sent, Status, WorkerId, WorkerStatus, shown};
use crate::attempt::Attempt;
use crate::definition::{self, Definition};
use crate::dirs::{HerdDirs, MAILBOXES, OWNER_MAILBOX, RESULTS, SNAPSHOTS};
use crate::envelope::{Envelope, Kind, OWNER, worker_address};
use crate::expand::build_prompt;
use crate::files::{attach, open_all};
use crate::guidance::WORKER_GUIDANCE;
use crate::keys::{Keys, WorkerKey};
use crate::mailbox::Mailbox;
use crate::reader::{Direct, Guarded, Reader};
use crate::result::persist_output;
use crate::snapshot::{remove_snapshot, write_snapshot};
use crate::spawn::{self, Launch, Supervisor};
use crate::state::{self, State, WorkerRecord, Workers};
use crate::{HerdError, check_label, default_label};

/// Where one person's herd lives and how its workers are started.
#[derive(Clone, Debug)]
pub struct Place {
    /// The person the herd belongs to.
    pub person: String,
    /// The site's data folder, without links.
    pub data: PathBuf,
    /// The ferry binary: started as each worker's supervisor, and shown to workers
    /// (`FERRY_HERD_BIN`) so that they can call `ferry herd`.
    pub program: PathBuf,
    /// How each supervisor acts as the person.
    pub acting: Acting,
    /// Whether commands run in a sandbox (`[exec] sandbox` is not `"none"`): a read-only
    /// worker needs one.
    pub sandboxed: bool,
}

/// How a worker's supervisor acts as the person.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Acting {
    /// It opens the site with the service's effective configuration, secrets included
    /// (`Config::to_effective_toml`: a site on PostgreSQL or S3 needs them) and acts through the person's requester, exactly as the
    /// service would (local and container mode).
    Site {
        /// The configuration, as TOML.
        config: String,
    },
    /// Host mode: it already is the person, and may neither open the site nor hold the
    /// service's configuration (a process of the person's can be read by their others);
    /// it acts as the person's worker does, from the worker's greeting.
    AsPerson(ferry_exec::worker::Setup),
}

impl Place {
    /// `home/<p>`, absolute.
    pub fn home(&self) -> PathBuf {
        self.data.join(layout::home(&self.person))
    }

    /// `private/people/<p>/herd`, absolute.
    pub fn herd(&self) -> PathBuf {
        self.data.join(self.herd_rel())
    }

    fn herd_rel(&self) -> String {
        layout::private_sub(&self.person, layout::HERD_DIR)
    }
}

/// An `assign` (H-API).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assign {
    /// The definition to start a worker from.
    pub agent: String,
    /// The worker's label; none is the agent's name.
    pub label: Option<String>,
    /// The task.
    pub task: String,
    /// Evidence, relative paths from `files_from`.
    pub files: Vec<String>,
    /// The controller's folder, which relative `files` resolve from; none is the
    /// worker's folder.
    pub files_from: Option<PathBuf>,
    /// The worker's folder (absolute, or relative to the home); none is the home.
    pub cwd: Option<String>,
}

/// One person's herd, as its controller acts on it.
pub struct Herd<'a> {
    place: Place,
    pub(crate) dirs: HerdDirs,
    pub(crate) workers: Workers,
    pub(crate) keys: Keys,
    requester: &'a Requester,
    /// Reads as the person, never the herd's keys.
    reader: Guarded<'a>,
}

impl<'a> Herd<'a> {
    /// Opens (making it, 0700) the person's herd; every file the controller names is read
    /// through `requester`, so as the person.
    pub fn open(place: Place, requester: &'a Requester) -> Result<Herd<'a>, HerdError> {
        let data = Dir::open_ambient(&place.data)?;
        let dirs = HerdDirs::open(&place.herd(), Some((&data, &place.herd_rel())))?;
        let workers = Workers::open(&dirs.dir)?;
        let keys = Keys::open(&data, &place.person)?;
        let reader = Guarded::new(requester, place.data.join(layout::HERD_KEYS_DIR));
        let herd = Herd {
            place,
            dirs,
            workers,
            keys,
            requester,
            reader,
        };
        herd.owner_mailbox()?;
        herd.dirs.sweep()?;
        Ok(herd)
    }

    /// The controller's own mailbox: questions and completions.
    pub fn owner_mailbox(&self) -> Result<Mailbox, HerdError> {
        let mailboxes = self.dirs.sub(MAILBOXES)?;
        Mailbox::create(&mailboxes, &self.dirs.path_of(MAILBOXES), OWNER_MAILBOX)
    }

    /// Starts a worker from a definition under a label, or hands the task to the live
    /// worker already there, and delivers the task (H-ASSIGN).
    pub fn assign(&self, request: Assign) -> Result<Assigned, HerdError> {
        let label = request
            .label
            .clone()
            .unwrap_or_else(|| default_label(&request.agent));
        check_label(&label)?;
        check_text("task", &request.task)?;
        let cwd = self.worker_cwd(request.cwd.as_deref())?;
        let files_from = request.files_from.clone().unwrap_or_else(|| cwd.clone());
        let _lock = state::lock(&self.dirs.dir)?;
        let previous = self.refreshed(&label)?;
        if let Some(live) = previous.as_ref().filter(|r| r.state.is_live()) {
            let pid = live.pid.ok_or_else(|| {
                HerdError::new(
                    Code::HerdBusy,
                    format!("the worker {label} is still starting"),
                )
            })?;
            let opened = open_all(&request.files, &files_from, &self.reader)?;
            let mut envelope = Envelope::new(
                Kind::Task,
                OWNER.to_owned(),
                worker_address(&label, pid),
                request.task,
            );
            attach(&mut envelope, opened)?;
            let key = self.key_of(live)?;
            self.worker_mailbox(&label)?.deliver(&mut envelope, &key)?;
            return Ok(Assigned {
                label,
                worker: WorkerId { pid },
                files: shown(&envelope.files),
                rollback_occurred: false,
                reused: true,
            });
        }
        // An ended worker whose process lingers (it completed and kept running) goes
        // before a new one takes its label.
        spawn::end_label(&self.place, &label)?;
        self.check_room()?;
        self.start(label, request, cwd, &files_from, previous)
    }

    /// A fresh worker generation: everything is validated and sized before anything
    /// changes; what the start then makes is undone if the final envelope overflows.
    fn start(
        &self,
        label: String,
        request: Assign,
        cwd: PathBuf,
        files_from: &Path,
        previous: Option<WorkerRecord>,
    ) -> Result<Assigned, HerdError> {
        let definition = self.find_definition(&request.agent, &cwd)?;
        if definition.read_only && !self.place.sandboxed {
            return Err(HerdError::new(
                Code::SandboxUnavailable,
                format!(
                    "{} is a read-only worker, which needs a sandbox, and commands here run \
                     without one ([exec] sandbox = \"none\"); nothing was started",
                    definition.name
                ),
            ));
        }
        let opened = open_all(&request.files, files_from, &self.reader)?;
        let skip: Vec<PathBuf> = opened.iter().map(|o| o.path.clone()).collect();
        let prompt = build_prompt(
            &definition,
            &skip,
            WORKER_GUIDANCE,
            self.definition_reader(&definition),
        )?;
        // Sized with the worker's id still unknown: `label#`.
        let mut envelope = Envelope::new(
            Kind::Task,
            OWNER.to_owned(),
            format!("{label}#"),
            request.task,
        );
        envelope.seq = 1;
        attach(&mut envelope, opened)?;
        envelope.check_fits()?;

        // Counted from the keys the herd kept, not from the record, which any worker of
        // the person could have rewritten.
        let generation = self.keys.latest(&label)?.map_or(1, |g| g + 1);
        let key = WorkerKey::random();
        let mut attempt = Attempt::new(self, &label, previous, generation);
        attempt.keep_key(&key)?;
        attempt.set_aside_old_mailbox()?;
        let mailbox = attempt.make_mailbox()?;
        let snapshots = self.dirs.sub(SNAPSHOTS)?;
        let snapshot = write_snapshot(
            &snapshots,
            &self.dirs.path_of(SNAPSHOTS),
            &label,
            &prompt.text,
        )?;
        attempt.snapshot = Some(snapshot.name.clone());
        let now = ferry_site::rfc3339(std::time::SystemTime::now());
        let mut record = WorkerRecord {
            label: label.clone(),
            agent: definition.name.clone(),
            generation,
            state: State::Starting,
            pid: None,
            start_ticks: None,
            cwd: cwd.display().to_string(),
            read_only: definition.read_only,
            snapshot: Some(snapshot.name.clone()),
            exit: None,
            result_path: None,
            reason: None,
            output_path: None,
            created_at: now.clone(),
            updated_at: now,
            read_through: 0,
            mac: None,
        };
        attempt.record(&mut record, &key)?;
        let supervisor = Supervisor::spawn(&self.place, &label, generation)?;
        let pid = supervisor.pid();
        record.pid = Some(pid);
        record.start_ticks = state::start_ticks(pid);
        attempt.supervisor = Some(supervisor);

        // Now the id exists: the envelope as it will be delivered.
        envelope.to = worker_address(&label, pid);
        if let Err(e) = envelope.check_fits() {
            attempt.roll_back();
            return Err(HerdError {
                rollback_occurred: true,
                ..e.context(
                    "the task does not fit once the worker's id is known; nothing was started",
                )
            });
        }
        let delivered = mailbox.deliver(&mut envelope, &key);
        let saved = delivered.and_then(|_| self.workers.save(&mut record, &key));
        if let Err(e) = saved {
            attempt.roll_back();
            return Err(HerdError {
                rollback_occurred: true,
                ..e
            });
        }
        let launch = Launch {
            acting: self.place.acting.clone(),
            command: spawn::command_with_prompt(&definition.command, &snapshot.prompt),
            cwd: cwd.display().to_string(),
            env: spawn::worker_env(
                &self.place,
                &self.dirs,
                &label,
                pid,
                generation,
                &snapshot.prompt,
                &key,
            ),
            read_only: definition.read_only,
            snapshot: snapshot.name.clone(),
        };
        let supervisor = attempt.supervisor.take().ok_or_else(lost_supervisor)?;
        if let Err(e) = supervisor.go(&launch) {
            attempt.supervisor = None;
            attempt.roll_back();
            return Err(HerdError {
                rollback_occurred: true,
                ..e
            });
        }
        attempt.keep();
        Ok(Assigned {
            label,
            worker: WorkerId { pid },
            files: shown(&envelope.files),
            rollback_occurred: false,
            reused: false,
        })
    }

    /// More direction for an active worker (`steer`).
    pub fn steer(
        &self,
        label: &str,
        message: String,
        files: &[String],
        files_from: Option<&Path>,
    ) -> Result<Sent, HerdError> {
        self.to_worker(Kind::Steer, label, message, files, files_from)
    }

    /// The answer to a worker's question (`reply`); a waiting worker runs again.
    pub fn reply(
        &self,
        label: &str,
        message: String,
        files: &[String],
        files_from: Option<&Path>,
    ) -> Result<Sent, HerdError> {
        let sent = self.to_worker(Kind::Reply, label, message, files, files_from)?;
        let _lock = state::lock(&self.dirs.dir)?;
        if let Some(mut record) = self.refreshed(label)?
            && record.state == State::Waiting
        {
            record.state = State::Running;
            let key = self.key_of(&record)?;
            self.workers.save(&mut record, &key)?;
        }
        Ok(sent)
    }

    fn to_worker(
        &self,
        kind: Kind,
        label: &str,
        text: String,
        files: &[String],
        files_from: Option<&Path>,
    ) -> Result<Sent, HerdError> {
        check_label(label)?;
        check_text("message", &text)?;
        let record = {
            let _lock = state::lock(&self.dirs.dir)?;
            self.refreshed(label)?
        }
        .ok_or_else(|| unknown_worker(label))?;
        let pid = match (record.state.is_live(), record.pid) {
            (true, Some(pid)) => pid,
            (true, None) => {
                return Err(HerdError::new(
                    Code::HerdBusy,
                    format!("the worker {label} is still starting; try again in a moment"),
                ));
            }
            (false, _) => return Err(ended(&record)),
        };
        let from = match files_from {
            Some(dir) => dir.to_path_buf(),
            None => self.place.home(),
        };
        let opened = open_all(files, &from, &self.reader)?;
        let mut envelope = Envelope::new(kind, OWNER.to_owned(), worker_address(label, pid), text);
        // Sized as if numbered with the widest number, so delivery cannot push it over.
        envelope.seq = u64::MAX;
        attach(&mut envelope, opened)?;
        let key = self.key_of(&record)?;
        let seq = self.worker_mailbox(label)?.deliver(&mut envelope, &key)?;
        Ok(Sent {
            label: label.to_owned(),
            id: envelope.id,
            seq,
            files: shown(&envelope.files),
        })
    }

    /// The controller's next unread message (a question or a completion), waiting up to
    /// `wait` for one.
    pub fn inbox(&self, wait: Duration) -> Result<Option<Envelope>, HerdError> {
        let read_through = self.keys.owner_read_through()?;
        let accept = |envelope: &Envelope| {
            envelope.to == OWNER && envelope.seq > read_through && self.sent_by_worker(envelope)
        };
        let next = self.owner_mailbox()?.wait_next(wait, &accept)?;
        if let Some(envelope) = &next {
            self.keys.set_owner_read_through(envelope.seq)?;
        }
        Ok(next)
    }

    /// Persists an answer too long for a model to read whole, and names it
    /// (`fullOutputPath`, H-RESULT).
    pub fn persist_answer(&self, text: &str) -> Result<PathBuf, HerdError> {
        let results = self.dirs.sub(RESULTS)?;
        persist_output(&results, &self.dirs.path_of(RESULTS), text)
    }

    /// Every worker (or the one `label`), dead ones marked `failed` first.
    pub fn status(&self, label: Option<&str>) -> Result<Status, HerdError> {
        let records = {
            let _lock = state::lock(&self.dirs.dir)?;
            match label {
                Some(label) => {
                    check_label(label)?;
                    vec![
                        self.refreshed(label)?
                            .ok_or_else(|| unknown_worker(label))?,
                    ]
                }
                None => {
                    let mut all = Vec::new();
                    for record in self.workers.list()? {
                        if let Some(fresh) = self.refreshed(&record.label)? {
                            all.push(fresh);
                        }
                    }
                    all
                }
            }
        };
        let mut workers = Vec::new();
        for record in records {
            let unread = match self.worker_mailbox(&record.label) {
                Ok(mailbox) => mailbox.unread()?,
                Err(_) => 0,
            };
            workers.push(WorkerStatus {
                unread,
                label: record.label,
                agent: record.agent,
                state: record.state,
                pid: record.pid.filter(|_| record.state.is_live()),
                generation: record.generation,
                result_path: record.result_path,
                exit: record.exit,
                reason: record.reason,
                output_path: record.output_path,
            });
        }
        Ok(Status {
            workers,
            inbox: self.owner_mailbox()?.unread()?,
        })
    }

    /// Ends a worker's whole process tree and marks it `stopped` (a worker already ended
    /// keeps its state).
    pub fn stop(&self, label: &str) -> Result<WorkerStatus, HerdError> {
        check_label(label)?;
        // The lock is a file of the person's herd, so a worker can hold it; ending that
        // worker must not wait on it.
        let _lock = match state::lock(&self.dirs.dir) {
            Ok(lock) => Some(lock),
            Err(e) if e.code == Code::HerdBusy => None,
            Err(e) => return Err(e),
        };
        // The record as it stands, then every process of the label ends, whatever the
        // record says or whether it is there at all (a worker can rewrite or delete it):
        // found by the command line the herd gave each supervisor.
        let before = self.refreshed(label);
        let ended = spawn::end_label(&self.place, label)?;
        let mut record = match before {
            Ok(Some(record)) => record,
            Ok(None) if ended == 0 => return Err(unknown_worker(label)),
            Ok(None) | Err(_) => return Ok(stopped_without_record(label)),
        };
        if record.state.is_live() {
            record.state = State::Stopped;
            record.reason = Some("stopped by its owner".to_owned());
            let key = self.key_of(&record)?;
            self.workers.save(&mut record, &key)?;
            if let Some(name) = record.snapshot.take() {
                let _ = remove_snapshot(&self.dirs.sub(SNAPSHOTS)?, &name);
            }
        }
        Ok(WorkerStatus {
            unread: 0,
            label: record.label,
            agent: record.agent,
            state: record.state,
            pid: None,
            generation: record.generation,
            result_path: record.result_path,
            exit: record.exit,
            reason: record.reason,
            output_path: record.output_path,
        })
    }

    /// The record of `label` as the herd wrote it, with a dead worker marked `failed`
    /// (the lock is held). A record not signed with its generation's key was written by
    /// some other process of the person's: nothing in it is believed, and it is shown as
    /// failed.
    fn refreshed(&self, label: &str) -> Result<Option<WorkerRecord>, HerdError> {
        let Some(mut record) = self.workers.load(label)? else {
            return Ok(None);
        };
        let key = self.keys.load(label, record.generation)?;
        let Some(key) = key.filter(|k| record.verifies(k)) else {
            return Ok(Some(disowned(record)));
        };
        if record.state.is_live() && spawn::supervisor_of(&self.place, &record).is_none() {
            record.state = State::Failed;
            record.reason.get_or_insert_with(|| {
                "its process is gone (killed, or the machine restarted) without completing"
                    .to_owned()
            });
            if let Some(name) = record.snapshot.take() {
                let _ = remove_snapshot(&self.dirs.sub(SNAPSHOTS)?, &name);
            }
            self.workers.save(&mut record, &key)?;
        }
        Ok(Some(record))
    }

    /// The key of the generation `record` names.
    fn key_of(&self, record: &WorkerRecord) -> Result<WorkerKey, HerdError> {
        self.keys
            .load(&record.label, record.generation)?
            .ok_or_else(|| {
                HerdError::new(
                    Code::WorkerEnded,
                    format!(
                        "the worker {} has no key any more; assign it again",
                        record.label
                    ),
                )
            })
    }

    /// Whether `envelope` is a worker's to its owner, signed by the worker its `from`
    /// names: the label's current generation when `from` is its process, else the
    /// previous one (whose completion may still be unread). A worker sends questions and
    /// completions only, and a completion's `resultPath` is one of its own results.
    fn sent_by_worker(&self, envelope: &Envelope) -> bool {
        let Some((label, pid)) = Envelope::worker_of(&envelope.from) else {
            return false;
        };
        let Ok(Some(record)) = self.workers.load(label) else {
            return false;
        };
        let generation = if record.pid == Some(pid) {
            record.generation
        } else {
            record.generation.saturating_sub(1)
        };
        let signed = self
            .keys
            .load(label, generation)
            .ok()
            .flatten()
            .is_some_and(|key| envelope.verifies(&key));
        let own_result = |path: &str| {
            let path = Path::new(path);
            path.parent() == Some(self.dirs.path_of(RESULTS).as_path())
                && path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("{label}-{generation}-")))
        };
        signed
            && match envelope.kind {
                Kind::Question => envelope.result_path.is_none(),
                Kind::Completion => envelope.result_path.as_deref().is_some_and(own_result),
                _ => false,
            }
    }

    fn check_room(&self) -> Result<(), HerdError> {
        let live = self
            .workers
            .list()?
            .iter()
            .filter(|r| r.state.is_live() && spawn::supervisor_of(&self.place, r).is_some())
            .count();
        if live >= HERD_WORKERS_MAX {
            return Err(HerdError::new(
                Code::TooManyWorkers,
                format!(
                    "{live} workers are alive, the most one person may have; stop one or wait \
                     for one to complete"
                ),
            ));
        }
        Ok(())
    }

    fn worker_mailbox(&self, label: &str) -> Result<Mailbox, HerdError> {
        Mailbox::open(&self.dirs.path_of(MAILBOXES).join(label))
    }

    /// The worker's folder: absolute, or from the home; a folder the person has, and
    /// never inside a coordination folder (that holds plans, not work: H-COORD).
    fn worker_cwd(&self, cwd: Option<&str>) -> Result<PathBuf, HerdError> {
        let home = self.place.home();
        let cwd = match cwd {
            None => home,
            Some(c) if c.contains('\0') || c.is_empty() => {
                return Err(HerdError::new(
                    Code::BadPath,
                    "the working folder is not a path",
                ));
            }
            Some(c) => crate::reader::absolute_from(&home, c),
        };
        if cwd
            .components()
            .any(|c| c == Component::Normal(layout::COORDINATION_DIR.as_ref()))
        {
            return Err(HerdError::invalid(format!(
                "{} is inside a {} folder, which holds coordination files only; give the \
                 project's folder instead",
                cwd.display(),
                layout::COORDINATION_DIR
            )));
        }
        let text = cwd
            .to_str()
            .ok_or_else(|| HerdError::new(Code::BadPath, "the path is not valid UTF-8"))?;
        // Where the worker's command will run: inside the person's trees, checked now so
        // that an assign never starts a worker that cannot run.
        let info = self
            .requester
            .working_folder(text)
            .map_err(|e| HerdError::from(e).context(format!("the working folder {text}")))?;
        if info.kind == FileKind::Symlink {
            return Err(HerdError::new(
                Code::NotADirectory,
                format!("the working folder {text} is a symbolic link; give the folder itself"),
            ));
        }
        if info.kind != FileKind::Dir {
            return Err(HerdError::new(
                Code::NotADirectory,
                format!("the working folder {text} is not a folder"),
            ));
        }
        Ok(cwd)
    }

    /// The definition `name`: the project's (the worker's folder, when it is in the
    /// person's home), the home's, the site's. A definition chooses the command run as
    /// the person, so it comes only from where no one else writes: a project folder in a
    /// circle's folder or in `shared/public/` is not looked in, and a definition that
    /// leads (through a link) out of the home and the site's agents is refused.
    fn find_definition(&self, name: &str, cwd: &Path) -> Result<Definition, HerdError> {
        let home = self.place.home();
        let site = self.place.data.join(layout::SITE_AGENTS_DIR);
        let mut places: Vec<(PathBuf, &dyn Reader)> = Vec::new();
        if cwd != home && cwd.starts_with(&home) {
            places.push((cwd.join(layout::AGENTS_OF_PROJECT), &self.reader));
        }
        places.push((home.join(layout::AGENTS_OF_PROJECT), &self.reader));
        places.push((site.clone(), &Direct));
        definition::find(name, &places, &[home, site])
    }

    /// A definition's `@file`s are read as its place is: the site's bundled ones by the
    /// service, the person's own as the person.
    fn definition_reader(&self, definition: &Definition) -> &dyn Reader {
        if definition
            .path
            .starts_with(self.place.data.join(layout::SITE_AGENTS_DIR))
        {
            &Direct
        } else {
            &self.reader
        }
    }
}

/// What `stop` answers for a label whose processes it ended though its record is gone or
/// unreadable (another process of the person's removed or broke it).
fn stopped_without_record(label: &str) -> WorkerStatus {
    WorkerStatus {
        label: label.to_owned(),
        agent: String::new(),
        state: State::Stopped,
        pid: None,
        generation: 0,
        result_path: None,
        exit: None,
        reason: Some(
            "stopped by its owner; its record was missing or unreadable (another process \
             removed or broke it)"
                .to_owned(),
        ),
        output_path: None,
        unread: 0,
    }
}

/// A record some other process wrote, as it is shown: failed, naming no process.
fn disowned(mut record: WorkerRecord) -> WorkerRecord {
    record.state = State::Failed;
    record.pid = None;
    record.start_ticks = None;
    record.result_path = None;
    record.output_path = None;
    record.exit = None;
    record.reason = Some(
        "its record was rewritten by a process other than ferry, so nothing in it is \
         believed; assign the label again"
            .to_owned(),
    );
    record
}

fn check_text(what: &str, text: &str) -> Result<(), HerdError> {
    if text.trim().is_empty() {
        return Err(HerdError::new(
            Code::EmptyMessage,
            format!("the {what} is empty; say what the worker should do"),
        ));
    }
    if text.contains('\0') {
        return Err(HerdError::invalid(format!(
            "the {what} holds a NUL character"
        )));
    }
    if text.len() > HERD_TEXT_MAX_BYTES {
        return Err(HerdError::invalid(format!(
            "the {what} is {} bytes, over {HERD_TEXT_MAX_BYTES}; put it in a file and name it in files",
            text.len()
        )));
    }
    Ok(())
}

fn unknown_worker(label: &str) -> HerdError {
    HerdError::new(
        Code::UnknownWorker,
        format!("no worker is labelled {label}; `status` lists them, `assign` starts one"),
    )
}

fn ended(record: &WorkerRecord) -> HerdError {
    HerdError::new(
        Code::WorkerEnded,
        format!(
            "the worker {} has {}; assign it a new task to start it again",
            record.label,
            match record.state {
                State::Completed => "completed",
                State::Stopped => "been stopped",
                _ => "failed",
            }
        ),
    )
}

fn lost_supervisor() -> HerdError {
    HerdError::new(
        Code::Internal,
        "the worker's process was lost while starting",
    )
}
