//! A worker's side (H-MAIL, H-RESULT): its inbox, its questions, its completion. It runs
//! inside the worker's process (already the person, in its sandbox), found through the
//! `FERRY_HERD_*` variables its supervisor set, and needs nothing of the site but the
//! herd folder.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry_codes::Code;
use ferry_config::limits::HERD_RESULT_PREVIEW_BYTES;

use crate::answers::{Sent, shown};
use crate::dirs::{HerdDirs, MAILBOXES, OWNER_MAILBOX, RESULTS};
use crate::envelope::{Envelope, FileItem, Kind, OWNER};
use crate::files::{attach, open_all};
use crate::keys::WorkerKey;
use crate::mailbox::Mailbox;
use crate::reader::Direct;
use crate::result::persist_result;
use crate::state::{self, State, Workers};
use crate::supervise::{drop_snapshot, update_generation};
use crate::{HerdError, check_label};

/// This process as a worker of a herd.
#[derive(Debug)]
pub struct Worker {
    label: String,
    address: String,
    generation: u64,
    key: WorkerKey,
    dirs: HerdDirs,
}

/// What `complete` answers.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Completed {
    /// The whole output, 0600 (H-RESULT).
    pub result_path: String,
    /// Its size in bytes.
    pub size: u64,
    /// The completion's number in the owner's mailbox.
    pub seq: u64,
}

impl Worker {
    /// The worker this process is, from its environment; `not_a_worker` without
    /// `FERRY_HERD_LABEL`.
    pub fn from_env() -> Result<Worker, HerdError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let Some(label) = var("FERRY_HERD_LABEL") else {
            return Err(HerdError::new(
                Code::NotAWorker,
                "this is not a herd worker (FERRY_HERD_LABEL is not set); a controller \
                 names --data and --person instead",
            ));
        };
        check_label(&label)?;
        let missing = |name: &str| {
            HerdError::new(
                Code::NotAWorker,
                format!(
                    "FERRY_HERD_LABEL is set but {name} is not: the worker's environment is incomplete"
                ),
            )
        };
        let address = var("FERRY_HERD_WORKER").ok_or_else(|| missing("FERRY_HERD_WORKER"))?;
        let generation = var("FERRY_HERD_GENERATION")
            .and_then(|g| g.parse().ok())
            .ok_or_else(|| missing("FERRY_HERD_GENERATION"))?;
        let herd = var("FERRY_HERD_DIR").ok_or_else(|| missing("FERRY_HERD_DIR"))?;
        let key =
            WorkerKey::from_hex(&var("FERRY_HERD_KEY").ok_or_else(|| missing("FERRY_HERD_KEY"))?)?;
        Worker::new(label, address, generation, key, Path::new(&herd))
    }

    /// The worker `label` (address `address`, generation `generation`, its key `key`) of
    /// the herd at `herd`.
    pub fn new(
        label: String,
        address: String,
        generation: u64,
        key: WorkerKey,
        herd: &Path,
    ) -> Result<Worker, HerdError> {
        let id_ok = address
            .strip_prefix(&format!("{label}#"))
            .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()));
        if !id_ok || !herd.is_absolute() {
            return Err(HerdError::new(
                Code::NotAWorker,
                "the worker's environment does not describe a worker of a herd",
            ));
        }
        let dirs = HerdDirs::open(herd, None)?;
        Ok(Worker {
            label,
            address,
            generation,
            key,
            dirs,
        })
    }

    /// The next unread message, waiting up to `wait`; the first read also tells the
    /// herd that the worker started (its prompt snapshot goes, H-SNAP).
    pub fn inbox(&self, wait: Duration) -> Result<Option<Envelope>, HerdError> {
        self.started()?;
        let read_through = self.current(&Workers::open(&self.dirs.dir)?)?.read_through;
        // Only what its owner sent it, signed with its key, to this very worker, and
        // nothing it has read before.
        let accept = |e: &Envelope| {
            e.to == self.address && e.from == OWNER && e.seq > read_through && e.verifies(&self.key)
        };
        let next = self.mailbox()?.wait_next(wait, &accept)?;
        if let Some(envelope) = &next {
            let seq = envelope.seq;
            update_generation(
                &self.dirs,
                &self.label,
                self.generation,
                &self.key,
                |record| {
                    record.read_through = record.read_through.max(seq);
                    Ok(true)
                },
            )?;
        }
        Ok(next)
    }

    /// Asks the owner a question; relative `files` resolve from `cwd` (the worker's).
    pub fn ask_owner(
        &self,
        message: String,
        files: &[String],
        cwd: &Path,
    ) -> Result<Sent, HerdError> {
        if message.trim().is_empty() {
            return Err(HerdError::new(Code::EmptyMessage, "the question is empty"));
        }
        if message.contains('\0') {
            return Err(HerdError::invalid("the question holds a NUL character"));
        }
        self.check_current()?;
        let opened = open_all(files, cwd, &Direct)?;
        let mut envelope = Envelope::new(
            Kind::Question,
            self.address.clone(),
            OWNER.to_owned(),
            message,
        );
        envelope.seq = u64::MAX;
        attach(&mut envelope, opened)?;
        let seq = self.owner_mailbox()?.deliver(&mut envelope, &self.key)?;
        self.set_state(State::Waiting, None)?;
        Ok(Sent {
            label: OWNER.to_owned(),
            id: envelope.id,
            seq,
            files: shown(&envelope.files),
        })
    }

    /// Persists the whole of `output` at a private `resultPath` and tells the owner, with
    /// a bounded preview (H-RESULT).
    pub fn complete(&self, output: &mut dyn Read) -> Result<Completed, HerdError> {
        self.check_current()?;
        let results = self.dirs.sub(RESULTS)?;
        let persisted = persist_result(
            &results,
            &self.dirs.path_of(RESULTS),
            &self.label,
            self.generation,
            output,
        )?;
        let result_path = persisted.path.display().to_string();
        // The output may be anything; the preview is text an envelope can carry.
        let mut text = persisted.preview.replace('\0', "\u{FFFD}");
        if persisted.cut {
            text.push_str(&format!(
                "\n\n[the first {HERD_RESULT_PREVIEW_BYTES} bytes of {}; all of it is at {result_path}]",
                persisted.size
            ));
        }
        if text.trim().is_empty() {
            text = format!("(completed with an empty output, at {result_path})");
        }
        let mut envelope = Envelope::new(
            Kind::Completion,
            self.address.clone(),
            OWNER.to_owned(),
            text,
        );
        envelope.files = vec![FileItem {
            path: result_path.clone(),
            size: persisted.size,
            embedded: false,
            content: None,
        }];
        envelope.result_path = Some(result_path.clone());
        let seq = self.owner_mailbox()?.deliver(&mut envelope, &self.key)?;
        self.set_state(State::Completed, Some(result_path.clone()))?;
        Ok(Completed {
            result_path,
            size: persisted.size,
            seq,
        })
    }

    fn mailbox(&self) -> Result<Mailbox, HerdError> {
        Mailbox::open(&self.mailbox_path())
    }

    fn mailbox_path(&self) -> PathBuf {
        self.dirs.path_of(MAILBOXES).join(&self.label)
    }

    fn owner_mailbox(&self) -> Result<Mailbox, HerdError> {
        Mailbox::open(&self.dirs.path_of(MAILBOXES).join(OWNER_MAILBOX))
    }

    /// `starting` becomes `running`, and the snapshot goes.
    fn started(&self) -> Result<(), HerdError> {
        drop_snapshot(&self.dirs, &self.label, self.generation, &self.key)?;
        update_generation(
            &self.dirs,
            &self.label,
            self.generation,
            &self.key,
            |record| {
                let starting = record.state == State::Starting;
                if starting {
                    record.state = State::Running;
                }
                Ok(starting)
            },
        )
    }

    /// Refuses a worker that has ended, before it sends anything.
    fn check_current(&self) -> Result<(), HerdError> {
        let workers = Workers::open(&self.dirs.dir)?;
        self.current(&workers).map(|_| ())
    }

    fn set_state(&self, to: State, result_path: Option<String>) -> Result<(), HerdError> {
        let workers = Workers::open(&self.dirs.dir)?;
        let _lock = state::lock(&self.dirs.dir)?;
        let mut record = self.current(&workers)?;
        record.state = to;
        if result_path.is_some() {
            record.result_path = result_path;
        }
        workers.save(&mut record, &self.key)
    }

    /// This worker's record, if it is still the label's live generation.
    fn current(&self, workers: &Workers) -> Result<crate::state::WorkerRecord, HerdError> {
        let Some(record) = workers.load(&self.label)? else {
            return Err(HerdError::new(
                Code::UnknownWorker,
                format!("the herd has no record of the worker {}", self.label),
            ));
        };
        if record.generation != self.generation
            || !record.verifies(&self.key)
            || !record.state.is_live()
        {
            return Err(HerdError::new(
                Code::WorkerEnded,
                "this worker has ended (stopped, or replaced by a new one): its owner no longer \
                 listens to it",
            ));
        }
        Ok(record)
    }
}
