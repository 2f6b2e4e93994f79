//! How long the node waits before it dials again: exponential backoff with full jitter.
//!
//! The ceiling starts at [`BACKOFF_FIRST`] and doubles with every failure up to
//! [`BACKOFF_MAX`]; the wait is a random point in `[0, ceiling]`, so nodes that lost the
//! same gateway at once do not all come back at the same instant. A link that stayed up
//! [`STABLE_LINK`] starts the sequence again.

use std::time::Duration;

/// The first ceiling.
pub const BACKOFF_FIRST: Duration = Duration::from_millis(500);
/// The highest ceiling.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How long a link must have stayed up for its loss to count as a first failure again.
pub const STABLE_LINK: Duration = Duration::from_secs(60);

/// The ceiling of the wait after `failures` failures in a row (1 for the first).
pub fn ceiling(failures: u32) -> Duration {
    // 0.5 s · 2^(failures−1), computed in milliseconds with the exponent capped so it
    // cannot overflow; 2^7 · 0.5 s is already past the maximum.
    let doublings = failures.saturating_sub(1).min(7);
    let millis = (BACKOFF_FIRST.as_millis() as u64) << doublings;
    Duration::from_millis(millis).min(BACKOFF_MAX)
}

/// A point in `[0, ceiling]` chosen by `random` (uniform over `u64`), to the millisecond.
pub fn jittered(ceiling: Duration, random: u64) -> Duration {
    let span = ceiling.as_millis() as u64 + 1;
    Duration::from_millis(random % span)
}

/// The failures in a row so far.
#[derive(Clone, Debug, Default)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    /// A sequence with no failure yet.
    pub fn new() -> Backoff {
        Backoff::default()
    }

    /// Counts one more failure and says how long to wait, with `random` choosing the jitter.
    pub fn next_delay(&mut self, random: u64) -> Duration {
        self.failures = self.failures.saturating_add(1);
        jittered(ceiling(self.failures), random)
    }

    /// Starts again from the first ceiling.
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// The failures counted since the last reset.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}
