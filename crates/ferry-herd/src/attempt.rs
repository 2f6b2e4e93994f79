//! A fresh worker generation's start, undone unless kept (H-ASSIGN's rollback).

use ferry_codes::Code;

use crate::HerdError;
use crate::controller::Herd;
use crate::dirs::{MAILBOXES, SNAPSHOTS};
use crate::keys::WorkerKey;
use crate::mailbox::Mailbox;
use crate::snapshot::remove_snapshot;
use crate::spawn::Supervisor;
use crate::state::WorkerRecord;

/// What a fresh start made, undone unless kept.
pub(crate) struct Attempt<'h, 'a> {
    herd: &'h Herd<'a>,
    label: String,
    generation: u64,
    previous: Option<WorkerRecord>,
    key_kept: bool,
    old_mailbox: Option<String>,
    mailbox_made: bool,
    pub(crate) snapshot: Option<String>,
    recorded: bool,
    pub(crate) supervisor: Option<Supervisor>,
    kept: bool,
}

impl<'h, 'a> Attempt<'h, 'a> {
    pub(crate) fn new(
        herd: &'h Herd<'a>,
        label: &str,
        previous: Option<WorkerRecord>,
        generation: u64,
    ) -> Attempt<'h, 'a> {
        Attempt {
            herd,
            label: label.to_owned(),
            generation,
            previous,
            key_kept: false,
            old_mailbox: None,
            mailbox_made: false,
            snapshot: None,
            recorded: false,
            supervisor: None,
            kept: false,
        }
    }

    /// An ended worker's mailbox is kept as `<label>@<generation>` (`@` is never in a
    /// label), so the new worker starts with an empty one. Whatever was there under that
    /// name before (left by a record someone removed) goes.
    pub(crate) fn set_aside_old_mailbox(&mut self) -> Result<(), HerdError> {
        let mailboxes = self.herd.dirs.sub(MAILBOXES)?;
        let aside = format!("{}@{}", self.label, self.generation.saturating_sub(1));
        if let Ok(stale) = Mailbox::open(&self.herd.dirs.path_of(MAILBOXES).join(&aside)) {
            stale.remove()?;
        }
        match mailboxes.rename(&self.label, &aside, false) {
            Ok(()) => self.old_mailbox = Some(aside),
            Err(ferry_fs::FsError::NotFound) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(())
    }

    pub(crate) fn make_mailbox(&mut self) -> Result<Mailbox, HerdError> {
        let mailboxes = self.herd.dirs.sub(MAILBOXES)?;
        let mailbox = Mailbox::create(&mailboxes, &self.herd.dirs.path_of(MAILBOXES), &self.label)?;
        self.mailbox_made = true;
        Ok(mailbox)
    }

    /// Keeps the new generation's key where no worker can read it.
    pub(crate) fn keep_key(&mut self, key: &WorkerKey) -> Result<(), HerdError> {
        self.herd.keys.save(&self.label, self.generation, key)?;
        self.key_kept = true;
        Ok(())
    }

    pub(crate) fn record(
        &mut self,
        record: &mut WorkerRecord,
        key: &WorkerKey,
    ) -> Result<(), HerdError> {
        if self.previous.is_some() {
            self.herd.workers.save(record, key)?;
        } else if !self.herd.workers.create(record, key)? {
            return Err(HerdError::new(
                Code::Exists,
                format!("the label {} was taken meanwhile", self.label),
            ));
        }
        self.recorded = true;
        Ok(())
    }

    /// The start stands. What is older than the ended generation before it goes: its
    /// set-aside mailbox and its key (the ended one's stay, for a completion not read yet).
    pub(crate) fn keep(mut self) {
        self.kept = true;
        if let Some(older) = self.generation.checked_sub(2).filter(|g| *g > 0) {
            let _ = self.herd.keys.remove(&self.label, older);
            let aside = self
                .herd
                .dirs
                .path_of(MAILBOXES)
                .join(format!("{}@{older}", self.label));
            if let Ok(mailbox) = Mailbox::open(&aside) {
                let _ = mailbox.remove();
            }
        }
    }

    /// Stops and removes exactly what this attempt started; the label is as it was.
    pub(crate) fn roll_back(&mut self) {
        if let Some(supervisor) = self.supervisor.take() {
            supervisor.abort();
        }
        let dirs = &self.herd.dirs;
        if let (Some(name), Ok(snapshots)) = (self.snapshot.take(), dirs.sub(SNAPSHOTS)) {
            let _ = remove_snapshot(&snapshots, &name);
        }
        if self.mailbox_made
            && let Ok(mailbox) = Mailbox::open(&dirs.path_of(MAILBOXES).join(&self.label))
        {
            let _ = mailbox.remove();
        }
        if let (Some(aside), Ok(mailboxes)) = (self.old_mailbox.take(), dirs.sub(MAILBOXES)) {
            let _ = mailboxes.rename(&aside, &self.label, false);
        }
        if self.recorded {
            let previous = self.previous.take().and_then(|previous| {
                let key = self
                    .herd
                    .keys
                    .load(&self.label, previous.generation)
                    .ok()??;
                Some((previous, key))
            });
            let _ = match previous {
                Some((mut previous, key)) => self.herd.workers.save(&mut previous, &key),
                None => self.herd.workers.remove(&self.label),
            };
        }
        if self.key_kept {
            let _ = self.herd.keys.remove(&self.label, self.generation);
        }
        self.kept = true;
    }
}

impl Drop for Attempt<'_, '_> {
    fn drop(&mut self) {
        // An error on the way (a `?` above) undoes the attempt as an overflow would.
        if !self.kept {
            self.roll_back();
        }
    }
}
