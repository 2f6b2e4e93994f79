//! Handoffs between agents (spec handoffs.md): a controller starts worker agents from
//! definitions, hands them files as evidence through mailboxes, and takes their results.
//!
//! - [`definition`] and [`expand`]: H-DEF, definitions and their whole-line `@file`s;
//! - [`files`]: H-FILES, message files resolved, read as the person, embedded or referenced;
//! - [`envelope`] and [`mailbox`]: H-MAIL, one atomically written file per message;
//! - [`state`]: each worker's record and the herd's lock;
//! - [`snapshot`] and [`result`]: H-SNAP and H-RESULT;
//! - [`reader`]: reading as the person, through the requester or directly;
//! - [`Request`] and [`perform`]: a controller's call as data, so that in host mode it can
//!   be performed in a process that is the person;
//! - the controller ([`Herd`]), each worker's supervisor ([`supervise`], a process of
//!   its own, so a worker outlives the request that assigned it) and the worker's side
//!   ([`Worker`]).

mod answers;
mod attempt;
mod controller;
pub mod definition;
pub mod dirs;
pub mod envelope;
mod error;
pub mod expand;
pub mod files;
mod guidance;
pub mod keys;
mod label;
pub mod mailbox;
pub mod reader;
mod request;
pub mod result;
pub mod snapshot;
mod spawn;
pub mod state;
mod supervise;
mod worker_side;

pub use answers::{Assigned, Sent, Shown, Status, WorkerId, WorkerStatus};
pub use controller::{Acting, Assign, Herd, Place};
pub use error::HerdError;
pub use guidance::WORKER_GUIDANCE;
pub use label::{check_label, default_label};
pub use request::{
    AS_PERSON_ARGS, Message, Performed, Request, perform, perform_as_person, serve_as_person,
};
pub use spawn::{Launch, SUPERVISE_ARGS, end_label, read_launch};
pub use supervise::{record_failure, supervise};
pub use worker_side::{Completed, Worker};
