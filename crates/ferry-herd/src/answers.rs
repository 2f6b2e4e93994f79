//! What herd operations answer, as the CLI prints it and the `subagent` tool returns it.

use serde::Serialize;

use crate::envelope::FileItem;
use crate::state::{Exit, State};

/// What a message carried, as the caller sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Shown {
    /// The canonical path.
    pub path: String,
    /// Bytes observed.
    pub size: u64,
    /// Whether its text travelled in the envelope.
    pub embedded: bool,
}

/// A worker's id in answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct WorkerId {
    /// The process that runs the worker (its supervisor); `stop` ends its whole tree.
    pub pid: u32,
}

/// What `assign` answers (H-CLI).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Assigned {
    /// The worker's label.
    pub label: String,
    /// The worker.
    pub worker: WorkerId,
    /// The task's files, each once.
    pub files: Vec<Shown>,
    /// Always false here: a rolled-back assign is an error ([`HerdError::rollback_occurred`]).
    pub rollback_occurred: bool,
    /// Whether a live worker under the label took the task (no new process).
    pub reused: bool,
}

/// What `steer`, `reply` and `ask_owner` answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Sent {
    /// The recipient's label (`owner` for a question).
    pub label: String,
    /// The envelope's id.
    pub id: String,
    /// Its number in the recipient's mailbox.
    pub seq: u64,
    /// Its files, each once.
    pub files: Vec<Shown>,
}

/// One worker as `status` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerStatus {
    /// Its label.
    pub label: String,
    /// Its definition.
    pub agent: String,
    /// Where it is in its life.
    pub state: State,
    /// The process that runs it, while it may run.
    pub pid: Option<u32>,
    /// Which process under this label it is, from 1.
    pub generation: u64,
    /// Its output, once completed.
    pub result_path: Option<String>,
    /// How its process ended.
    pub exit: Option<Exit>,
    /// Why it failed or stopped.
    pub reason: Option<String>,
    /// Where the rest of its process's output was saved, when it printed more than kept.
    pub output_path: Option<String>,
    /// Messages in its mailbox it has not read.
    pub unread: usize,
}

/// What `status` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Status {
    /// The workers asked for, by label.
    pub workers: Vec<WorkerStatus>,
    /// Messages in the controller's mailbox not yet read.
    pub inbox: usize,
}

/// The files of an envelope as answers show them.
pub(crate) fn shown(files: &[FileItem]) -> Vec<Shown> {
    files
        .iter()
        .map(|f| Shown {
            path: f.path.clone(),
            size: f.size,
            embedded: f.embedded,
        })
        .collect()
}
