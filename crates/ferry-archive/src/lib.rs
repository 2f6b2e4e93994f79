//! The archive planner (spec core C-ARCHIVE): nothing in ferry unpacks a tar but this.
//!
//! [`plan`] reads a tar (or a gzip of one) once, with every cap enforced while reading,
//! and admits it whole or refuses it with one reason. [`extract`] writes exactly an
//! admitted plan into a fresh folder through confined handles. [`TarWriter`] writes the
//! archives a node sends.
//!
//! The reading side is split by job: `input` counts and gunzips the bytes, `header` reads
//! one header block, `pax` its extended records, `stream` walks the entries, `names`
//! holds the rules of names and platforms, `policy` the allow and deny globs.

mod error;
mod extract;
mod header;
mod input;
mod names;
mod pax;
mod plan;
mod policy;
mod stream;
mod writer;
mod zip_writer;

pub use error::ArchiveError;
pub use extract::{Extracted, extract};
pub use names::Platform;
pub use plan::{EntryType, Limits, Plan, PlanOptions, PlannedEntry, plan};
pub use policy::PathPolicy;
pub use writer::{EntryMeta, TarWriter};
pub use zip_writer::{ZipError, ZipWriter, civil_from_days};
