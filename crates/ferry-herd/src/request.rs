//! A controller's call on its herd, as data (H-API): what `subagent` and `ferry herd`
//! ask, performed by [`perform`] in whichever process acts as the person. Locally that
//! is the caller itself; in host mode the herd's folder is the person's alone, so the
//! service sends the call to a process it starts as the person, which answers with a
//! [`Performed`] or a [`HerdError`], both crossing as JSON.

use std::path::PathBuf;
use std::time::Duration;

use ferry_config::limits::HERD_INBOX_WAIT_MAX_SECS;
use ferry_exec::Requester;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::controller::{Acting, Assign, Herd, Place};
use crate::{HerdError, check_label, spawn};

/// One controller's call.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Start (or reuse) a worker and give it its task.
    Assign(Assign),
    /// More direction for an active worker.
    Steer(Message),
    /// The answer to a worker's question.
    Reply(Message),
    /// Every worker, or the one labelled.
    Status {
        /// The worker's label; none is every worker.
        label: Option<String>,
    },
    /// The controller's next unread message, waiting up to `wait_secs` for one.
    Inbox {
        /// Seconds to wait, at most [`HERD_INBOX_WAIT_MAX_SECS`].
        wait_secs: u64,
    },
    /// End a worker's whole process tree.
    Stop {
        /// The worker's label.
        label: String,
    },
}

/// A message from the controller to one worker.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    /// The worker's label.
    pub label: String,
    /// The text.
    pub text: String,
    /// Evidence, relative paths from `files_from`.
    pub files: Vec<String>,
    /// The controller's folder; none is the person's home.
    pub files_from: Option<PathBuf>,
}

/// What a call answered.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Performed {
    /// The answer, as `ferry herd` prints it (`inbox`: `{"envelope": …}`).
    pub answer: Value,
    /// Where the whole answer was persisted because its text was longer than the caller
    /// may show (H-RESULT's `fullOutputPath`).
    pub full_output_path: Option<PathBuf>,
}

/// Performs `request` on the herd at `place`, acting through `requester`. An answer
/// whose pretty-printed text is longer than `shown_max_bytes` is persisted as well.
///
/// `stop` ends the label's processes even when the herd's folder cannot be opened (a
/// worker can replace its folders with links), then says why nothing else was done.
pub fn perform(
    place: Place,
    requester: &Requester,
    request: Request,
    shown_max_bytes: Option<usize>,
) -> Result<Performed, HerdError> {
    if let Request::Stop { label } = &request {
        check_label(label)?;
    }
    let herd = match Herd::open(place.clone(), requester) {
        Ok(herd) => herd,
        Err(e) => {
            let Request::Stop { label } = &request else {
                return Err(e);
            };
            let ended = spawn::end_label(&place, label)?;
            return Err(e.context(format!(
                "{ended} process tree(s) of {label} were ended, but the herd's folder cannot \
                 be used"
            )));
        }
    };
    let answer = match request {
        Request::Assign(assign) => json!(herd.assign(assign)?),
        Request::Steer(m) => {
            json!(herd.steer(&m.label, m.text, &m.files, m.files_from.as_deref())?)
        }
        Request::Reply(m) => {
            json!(herd.reply(&m.label, m.text, &m.files, m.files_from.as_deref())?)
        }
        Request::Status { label } => json!(herd.status(label.as_deref())?),
        Request::Inbox { wait_secs } => {
            let wait = Duration::from_secs(wait_secs.min(HERD_INBOX_WAIT_MAX_SECS));
            json!({"envelope": herd.inbox(wait)?})
        }
        Request::Stop { label } => json!(herd.stop(&label)?),
    };
    let full_output_path = match shown_max_bytes {
        Some(max) => {
            let text = serde_json::to_string_pretty(&answer).unwrap_or_default();
            if text.len() > max {
                Some(herd.persist_answer(&text)?)
            } else {
                None
            }
        }
        None => None,
    };
    Ok(Performed {
        answer,
        full_output_path,
    })
}

/// The arguments, after the ferry binary, of the process that performs one call as the
/// person in host mode (`ferry herd as-person`, which calls [`serve_as_person`]).
pub const AS_PERSON_ARGS: [&str; 2] = ["herd", "as-person"];

/// A call as sent to the process acting as the person: what of the [`Place`] it cannot
/// learn from its greeting. Not the service's configuration: the person may not see it,
/// and the greeting holds all the person's commands need.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AsPersonCall {
    person: String,
    sandboxed: bool,
    request: Request,
    shown_max_bytes: Option<usize>,
}

/// Host mode: performs `request` on the herd at `place` in a process `workers` start as
/// the person, which alone may open the herd's folder.
pub fn perform_as_person(
    workers: &ferry_exec::worker::WorkerPool,
    place: &Place,
    request: Request,
    shown_max_bytes: Option<usize>,
) -> Result<Performed, HerdError> {
    let call = AsPersonCall {
        person: place.person.clone(),
        sandboxed: place.sandboxed,
        request,
        shown_max_bytes,
    };
    let bytes = serde_json::to_vec(&call)
        .map_err(|e| HerdError::invalid(format!("the call cannot be written: {e}")))?;
    let args = AS_PERSON_ARGS.map(str::to_owned);
    let answer = workers.call_once(&args, &bytes)?;
    serde_json::from_slice::<Result<Performed, HerdError>>(&answer).map_err(|e| {
        HerdError::new(
            ferry_codes::Code::WorkerFailed,
            format!("the process acting as the person answered something else: {e}"),
        )
    })?
}

/// Runs inside the process the service started as the person ([`perform_as_person`]):
/// the greeting says where the site is and what the person reaches, `executor` acts as
/// them, and `call` is the call; the answer is its result as JSON.
pub fn serve_as_person(
    setup: &ferry_exec::worker::Setup,
    executor: Result<ferry_exec::ops::Executor, ferry_exec::RequestError>,
    call: Vec<u8>,
) -> Vec<u8> {
    let performed = (|| {
        let call: AsPersonCall = serde_json::from_slice(&call)
            .map_err(|e| HerdError::invalid(format!("the call is not valid: {e}")))?;
        let requester = Requester::InProcess(executor?);
        let program = std::env::current_exe()?;
        let place = Place {
            person: call.person,
            data: setup.hello.base.clone(),
            program,
            acting: Acting::AsPerson(setup.clone()),
            sandboxed: call.sandboxed,
        };
        perform(place, &requester, call.request, call.shown_max_bytes)
    })();
    serde_json::to_vec(&performed).unwrap_or_default()
}
