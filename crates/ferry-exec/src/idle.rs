//! The idle workers of one person's pool, and their end once unused for a while: a
//! burst of requests leaves many workers idle, and each holds its memory until it ends.

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use crate::worker::Worker;

/// Idle workers, the most recently used last, each with the time it was given back.
#[derive(Debug)]
pub(crate) struct IdleWorkers {
    shelf: Arc<Mutex<Shelf>>,
    /// How long a worker may wait unused before it is ended.
    timeout: Duration,
    /// How many may wait at once; one more given back is ended at once.
    max: usize,
}

#[derive(Debug, Default)]
struct Shelf {
    /// Oldest first: the sweeper ends from the front, callers take from the back.
    workers: Vec<(Worker, Instant)>,
    /// Whether a sweeper thread is watching this shelf now.
    sweeping: bool,
}

impl IdleWorkers {
    /// No idle workers yet; each one given back is ended after `timeout` unused.
    pub(crate) fn new(timeout: Duration, max: usize) -> IdleWorkers {
        IdleWorkers {
            shelf: Arc::default(),
            timeout,
            max,
        }
    }

    /// The most recently used idle worker: its process is the warmest, and the ones
    /// left unused the longest are the ones that expire.
    pub(crate) fn take(&self) -> Option<Worker> {
        self.lock().workers.pop().map(|(worker, _)| worker)
    }

    /// Keeps `worker` for the next call, unless `max` already wait (then it ends now).
    pub(crate) fn put(&self, worker: Worker) {
        let mut shelf = self.lock();
        if shelf.workers.len() >= self.max {
            drop(shelf);
            // Ended here, outside the lock: dropping a worker waits for its process.
            drop(worker);
            return;
        }
        shelf.workers.push((worker, Instant::now()));
        if !shelf.sweeping {
            shelf.sweeping = start_sweeper(Arc::downgrade(&self.shelf), self.timeout);
        }
    }

    /// Takes out the idle workers started in another era than `era` (the account, or its
    /// groups, changed since), to be ended by the caller.
    pub(crate) fn take_stale(&self, era: u64) -> Vec<Worker> {
        let mut shelf = self.lock();
        // Asked before every call: the usual answer, none, costs no allocation.
        if shelf.workers.iter().all(|(worker, _)| worker.era() == era) {
            return Vec::new();
        }
        let (stale, kept) = std::mem::take(&mut shelf.workers)
            .into_iter()
            .partition(|(worker, _)| worker.era() != era);
        shelf.workers = kept;
        drop(shelf);
        stale.into_iter().map(|(worker, _)| worker).collect()
    }

    /// Takes every idle worker out, to be ended by the caller.
    pub(crate) fn drain(&self) -> Vec<Worker> {
        let workers = std::mem::take(&mut self.lock().workers);
        workers.into_iter().map(|(worker, _)| worker).collect()
    }

    /// How many workers wait now.
    pub(crate) fn len(&self) -> usize {
        self.lock().workers.len()
    }

    fn lock(&self) -> MutexGuard<'_, Shelf> {
        self.shelf.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Starts the thread that ends the shelf's workers as they expire; it ends itself once
/// the shelf is empty (the next worker given back starts another) or the pool is gone.
/// Whether it started: if not, the next worker given back tries again.
fn start_sweeper(shelf: Weak<Mutex<Shelf>>, timeout: Duration) -> bool {
    let started = std::thread::Builder::new()
        .name("idle-workers".into())
        .spawn(move || sweep(shelf, timeout));
    match started {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!("idle workers cannot be ended on time: {e}");
            false
        }
    }
}

fn sweep(shelf: Weak<Mutex<Shelf>>, timeout: Duration) {
    while let Some(strong) = shelf.upgrade() {
        let (ended, next) = expire(&strong, timeout);
        drop(strong);
        // Ended outside the lock: dropping a worker waits for its process to exit.
        drop(ended);
        match next {
            Some(wait) => std::thread::sleep(wait),
            None => return,
        }
    }
}

/// Takes out the workers unused for `timeout`; how long until the next one expires, or
/// `None` when none is left (the sweeper then ends).
fn expire(shelf: &Mutex<Shelf>, timeout: Duration) -> (Vec<(Worker, Instant)>, Option<Duration>) {
    let mut shelf = shelf.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    let expired = shelf
        .workers
        .iter()
        .take_while(|(_, since)| now.duration_since(*since) >= timeout)
        .count();
    let ended = shelf.workers.drain(..expired).collect();
    let next = match shelf.workers.first() {
        Some((_, since)) => Some(timeout.saturating_sub(now.duration_since(*since))),
        None => {
            shelf.sweeping = false;
            None
        }
    };
    (ended, next)
}
