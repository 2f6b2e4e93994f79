//! One turn at a time per person for work that holds a scarce slot of the whole gateway
//! (a preview's decoder, a content search's reads): a person who asks for many at once
//! waits for their own, and never holds every slot while others wait.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The people's turns for one kind of work.
#[derive(Default)]
pub(crate) struct PersonTurns {
    gates: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl PersonTurns {
    /// Waits for `person`'s turn; the turn ends when the permit is dropped.
    pub(crate) async fn take(&self, person: &str) -> OwnedSemaphorePermit {
        let gate = {
            let mut gates = self.gates.lock().unwrap_or_else(|e| e.into_inner());
            // A gate nobody waits on or holds is dropped, so the map holds only the
            // people working now.
            gates.retain(|_, gate| Arc::strong_count(gate) > 1);
            gates
                .entry(person.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(1)))
                .clone()
        };
        gate.acquire_owned()
            .await
            .expect("a person's gate is never closed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn one_person_waits_for_their_own_turn_and_others_do_not() {
        let turns = PersonTurns::default();
        let held = turns.take("a").await;
        // Another person goes at once.
        let other = tokio::time::timeout(Duration::from_secs(1), turns.take("b")).await;
        assert!(other.is_ok());
        // The same person waits until the first turn ends.
        let waiting = tokio::time::timeout(Duration::from_millis(100), turns.take("a")).await;
        assert!(waiting.is_err());
        drop(held);
        let next = tokio::time::timeout(Duration::from_secs(1), turns.take("a")).await;
        assert!(next.is_ok());
    }
}
