//! Places held per key under a cap: a person's chat turns, a token's MCP sessions.
//!
//! A place is a guard, so it is given back however its holder ends (finished, cancelled,
//! failed, dropped with a map entry), and checking the cap and taking the place happen
//! under one lock, so concurrent takers never pass the cap together.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// How many places each key holds; a key holding none has no entry.
#[derive(Clone, Default)]
pub(crate) struct Tally(Arc<Mutex<HashMap<String, usize>>>);

impl Tally {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes one more place for `key`; `None` (and nothing taken) when it holds `max`.
    pub(crate) fn take(&self, key: &str, max: usize) -> Option<Place> {
        let mut counts = self.lock();
        let held = counts.get(key).copied().unwrap_or(0);
        if held >= max {
            return None;
        }
        counts.insert(key.to_owned(), held + 1);
        Some(Place {
            tally: self.clone(),
            key: key.to_owned(),
        })
    }

    /// The places `key` holds now.
    #[cfg(test)]
    pub(crate) fn held(&self, key: &str) -> usize {
        self.lock().get(key).copied().unwrap_or(0)
    }

    /// Whether no key holds a place.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

/// One place of a key in a [`Tally`], given back when dropped.
pub(crate) struct Place {
    tally: Tally,
    key: String,
}

impl Place {
    /// The key this place counts for.
    pub(crate) fn key(&self) -> &str {
        &self.key
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut counts = self.tally.lock();
        if let Some(held) = counts.get_mut(&self.key) {
            *held -= 1;
            if *held == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_holds_its_cap_and_not_one_more_and_a_dropped_place_comes_back() {
        let tally = Tally::default();
        let first = tally.take("a", 2).expect("limit - 1");
        let second = tally.take("a", 2).expect("at the limit");
        assert!(tally.take("a", 2).is_none(), "limit + 1");
        assert_eq!(tally.held("a"), 2);
        // Another key is counted on its own.
        let other = tally.take("b", 2).expect("another key");
        assert_eq!(other.key(), "b");
        drop(first);
        assert_eq!(tally.held("a"), 1);
        let again = tally.take("a", 2).expect("a freed place");
        assert!(tally.take("a", 2).is_none());
        drop((second, again, other));
        assert!(tally.is_empty(), "keys holding nothing leave no entry");
    }

    #[test]
    fn concurrent_takers_never_pass_the_cap_together() {
        let tally = Tally::default();
        let taken: Vec<Option<Place>> = std::thread::scope(|s| {
            let takers: Vec<_> = (0..16).map(|_| s.spawn(|| tally.take("a", 3))).collect();
            takers.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert_eq!(taken.iter().filter(|p| p.is_some()).count(), 3);
        drop(taken);
        assert!(tally.is_empty());
    }
}
