//! The sweeper: expired records go, then blobs no record references.
//!
//! A put places its blob (or finds it there: a blob is written once) before it
//! inserts the record that references it, so a sweep can meet a blob that looks
//! unreferenced while a put of the same content is about to record it, on this
//! gateway or another. The two sides are ordered so that the blob survives:
//! - the put inserts its record, *then* checks the blob is still there, and puts it
//!   back from its own temporary if not (`Blobs::settle`);
//! - the sweep moves the blob aside (`trash/`), *then* checks references again, and
//!   puts it back if a record appeared.
//!
//! Whichever of the put's insert and the sweep's second check comes first, one of the
//! two sees the other. On top of that, a blob younger than the grace period
//! (`MEDIA_BLOB_GRACE_SECS`) is never a candidate: a sweep never even races a put that
//! is still between placing and recording, and a backend whose rename is not atomic
//! (S3 copies, then deletes) never has a young blob moved under a reader.

use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::store::seconds;
use crate::{MediaError, MediaStore};

/// What one sweep removed.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepReport {
    /// Expired records removed.
    pub records_removed: usize,
    /// Blobs no record referenced, removed.
    pub blobs_removed: usize,
    /// Blobs a put recorded while the sweep had them aside, put back.
    pub blobs_kept: usize,
    /// Temporaries of puts that never finished, removed.
    pub temporaries_removed: usize,
    /// Fetched trees whose record expired, removed.
    pub trees_removed: usize,
    /// Extractions of trees that never finished, removed.
    pub tree_temporaries_removed: usize,
}

impl MediaStore {
    /// Sweeps as of `now`.
    pub async fn sweep(&self, now: SystemTime) -> Result<SweepReport, MediaError> {
        let mut report = SweepReport::default();
        for record in self.records.expired(seconds(now))? {
            if self.records.delete(&record.id)? {
                report.records_removed += 1;
            }
        }
        // A sweep that stopped between moving a blob aside and deciding finishes here.
        for trashed in self.blobs.trashed().await? {
            self.decide(&trashed.sha256, &mut report).await?;
        }
        let cutoff = now
            .checked_sub(self.grace)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        for blob in self.blobs.list().await? {
            if blob.modified >= cutoff || self.records.references(&blob.sha256)? {
                continue;
            }
            if self.blobs.move_to_trash(&blob.sha256).await? {
                self.decide(&blob.sha256, &mut report).await?;
            }
        }
        // Not the blobs' grace: a temporary is a put in flight until it has sat unwritten
        // for far longer than any live put pauses.
        let idle = Duration::from_secs(ferry_config::limits::MEDIA_TEMPORARY_IDLE_MAX_SECS);
        let stale = now.checked_sub(idle).unwrap_or(SystemTime::UNIX_EPOCH);
        report.temporaries_removed = self.blobs.remove_stale_temporaries(stale).await?;
        (report.trees_removed, report.tree_temporaries_removed) = self.sweep_trees(now, stale)?;
        Ok(report)
    }

    /// A trashed blob: back if a record references it now, gone otherwise.
    async fn decide(&self, sha256: &str, report: &mut SweepReport) -> Result<(), MediaError> {
        if self.records.references(sha256)? {
            self.blobs.restore(sha256).await?;
            report.blobs_kept += 1;
        } else {
            self.blobs.drop_trashed(sha256).await?;
            report.blobs_removed += 1;
        }
        Ok(())
    }
}
