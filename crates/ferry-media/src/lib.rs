//! The media store (spec core C-MEDIA): the bytes the gateway fetches from nodes or
//! receives, under ids like `train~k3j9x2m1q8ab.txt`.
//!
//! - [`id`]: ids, issued from a source name and the detected type, parsed strictly.
//! - [`blob`]: content-addressed blobs through `object_store`, written once.
//! - [`record`]: what is known of each id, behind [`MediaRecords`] (the site keeps them
//!   in its metadata database).
//! - [`store`]: [`MediaStore`], blobs and records together.
//! - [`sweep`]: expiry, and removing blobs no record references.
//! - [`trees`]: the folders `dir_fetch` extracts into, which live as long as their record.

pub mod blob;
mod error;
pub mod id;
pub mod record;
pub mod store;
pub mod sweep;
pub mod trees;

pub use blob::Blobs;
pub use error::MediaError;
pub use id::MediaId;
pub use record::{MediaRecord, MediaRecords, MediaSource};
pub use store::MediaStore;
pub use sweep::SweepReport;
