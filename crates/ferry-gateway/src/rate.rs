//! Per-person rates: `[limits] uploads_per_minute`, `deliveries_per_minute` and
//! `tool_calls_per_minute`, each counted for a person over all their tokens, by this
//! gateway, in memory.
//!
//! Each rate is a token bucket that holds a minute's number and fills at that number a
//! minute: a person may make that many at once, then one more every minute / that
//! number. A bucket is kept as one instant, when it will be full again (the generic cell
//! rate algorithm), so a person costs three instants whatever they send, and a person
//! whose buckets are all full is the same as one never seen: their entry is dropped by
//! the sweep that runs, on a taking, once a minute. The people counted are those who
//! authenticated, so the map never holds more than the site's people.
//!
//! A refused request took nothing: a flood spends no more than the rate allows, and the
//! person may go on as soon as their bucket has room for one.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ferry_codes::Code;
use ferry_config::LimitsConfig;

use crate::ApiError;
use crate::error::RETRY_AFTER_SECS;

/// The time a per-minute number is counted over, and what a full bucket holds.
const WINDOW: Duration = Duration::from_secs(60);

/// What a rate counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rate {
    /// `POST /v1/media` and `POST /v1/uploads` (a resumable upload's creation; its
    /// parts are the same upload and are not counted).
    Uploads,
    /// `POST /v1/deliveries` and calls of `file_deliver`.
    Deliveries,
    /// Tool calls at `/mcp`.
    ToolCalls,
}

impl Rate {
    const COUNT: usize = 3;

    fn index(self) -> usize {
        match self {
            Rate::Uploads => 0,
            Rate::Deliveries => 1,
            Rate::ToolCalls => 2,
        }
    }

    /// How a sentence names what is counted.
    fn noun(self) -> &'static str {
        match self {
            Rate::Uploads => "uploads started",
            Rate::Deliveries => "deliveries",
            Rate::ToolCalls => "tool calls",
        }
    }
}

/// A taking refused: which rate, and how long until the person may make one more.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Refused {
    rate: Rate,
    per_minute: u32,
    wait: Duration,
}

impl Refused {
    /// Whole seconds to wait, at least 1 (`Retry-After`): rounded up, so a client that
    /// waits this long is never refused again for the same reason.
    pub(crate) fn retry_after_secs(&self) -> u64 {
        let whole = self.wait.as_secs() + u64::from(self.wait.subsec_nanos() > 0);
        whole.max(1)
    }

    /// The sentence of the refusal: what was counted, the rate, and when to try again.
    pub(crate) fn message(&self) -> String {
        let secs = self.retry_after_secs();
        format!(
            "too many {}: one person may make {} a minute, all their tokens together; \
             nothing was done. Try again in {secs} second{}",
            self.rate.noun(),
            self.per_minute,
            if secs == 1 { "" } else { "s" },
        )
    }

    /// The HTTP answer: `429 rate_limited` with `Retry-After` (see [`ApiError`]'s
    /// response) and `retryAfterSecs` in the error object.
    pub(crate) fn into_api_error(self) -> ApiError {
        ApiError::new(Code::RateLimited, self.message())
            .with(RETRY_AFTER_SECS, self.retry_after_secs().into())
    }

    /// The MCP answer: a tool error saying the same.
    pub(crate) fn into_tool_output(self) -> ferry_tools::ToolOutput {
        let error = ferry_tools::ToolError::new(Code::RateLimited, self.message());
        ferry_tools::ToolOutput::retry_later(&error, self.retry_after_secs())
    }
}

impl From<Refused> for ApiError {
    fn from(refused: Refused) -> ApiError {
        refused.into_api_error()
    }
}

/// Every person's buckets on this gateway.
pub(crate) struct Limiter {
    /// Each rate's number a minute, by [`Rate::index`]; 0 counts nothing.
    per_minute: [u32; Rate::COUNT],
    people: Mutex<People>,
}

struct People {
    /// When each bucket of a person is full again; a bucket in the past is full.
    full_at: HashMap<String, [Instant; Rate::COUNT]>,
    /// When the entries of people whose buckets are all full were last dropped.
    swept: Instant,
}

impl Limiter {
    /// The rates of `[limits]`.
    pub(crate) fn new(limits: &LimitsConfig) -> Limiter {
        let mut per_minute = [0; Rate::COUNT];
        per_minute[Rate::Uploads.index()] = limits.uploads_per_minute;
        per_minute[Rate::Deliveries.index()] = limits.deliveries_per_minute;
        per_minute[Rate::ToolCalls.index()] = limits.tool_calls_per_minute;
        Limiter {
            per_minute,
            people: Mutex::new(People {
                full_at: HashMap::new(),
                swept: Instant::now(),
            }),
        }
    }

    /// Takes one of `rate` for `person` now, or says how long they must wait.
    pub(crate) fn take(&self, person: &str, rate: Rate) -> Result<(), Refused> {
        self.take_all_at(person, &[rate], Instant::now())
    }

    /// Takes one of each of `rates` for `person` at `now`, all or none: a call that
    /// counts twice (`file_deliver` is a tool call and a delivery) is refused whole,
    /// and then takes nothing of either. Refused, the wait is the longest of the rates
    /// without room.
    pub(crate) fn take_all_at(
        &self,
        person: &str,
        rates: &[Rate],
        now: Instant,
    ) -> Result<(), Refused> {
        let counted: Vec<(Rate, u32)> = rates
            .iter()
            .map(|&rate| (rate, self.per_minute[rate.index()]))
            .filter(|&(_, per_minute)| per_minute > 0)
            .collect();
        if counted.is_empty() {
            return Ok(());
        }
        let mut people = self.people.lock().unwrap_or_else(|e| e.into_inner());
        if now.saturating_duration_since(people.swept) >= WINDOW {
            people
                .full_at
                .retain(|_, full_at| full_at.iter().any(|&t| t > now));
            people.swept = now;
        }
        let current = people
            .full_at
            .get(person)
            .copied()
            .unwrap_or([now; Rate::COUNT]);
        let mut next = current;
        let mut refused: Option<Refused> = None;
        for (rate, per_minute) in counted {
            // One taking moves the bucket's "full again" an interval later; it fits while
            // that stays within a window of now (the bucket holds a window's number).
            let interval = WINDOW / per_minute;
            let after = current[rate.index()].max(now) + interval;
            let fits_until = now + WINDOW;
            if after <= fits_until {
                next[rate.index()] = after;
            } else {
                let wait = after - fits_until;
                if refused.as_ref().is_none_or(|r| wait > r.wait) {
                    refused = Some(Refused {
                        rate,
                        per_minute,
                        wait,
                    });
                }
            }
        }
        if let Some(refused) = refused {
            return Err(refused);
        }
        people.full_at.insert(person.to_owned(), next);
        Ok(())
    }

    /// The tool-call admission of `/mcp`: a call takes one tool call, and a call of
    /// `file_deliver` one delivery as well.
    pub(crate) fn admit_tool_call(
        &self,
        person: &str,
        tool: &str,
    ) -> Result<(), ferry_tools::ToolOutput> {
        let rates: &[Rate] = if tool == "file_deliver" {
            &[Rate::ToolCalls, Rate::Deliveries]
        } else {
            &[Rate::ToolCalls]
        };
        self.take_all_at(person, rates, Instant::now())
            .map_err(Refused::into_tool_output)
    }

    /// How many people have an entry (a bucket not full).
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.people
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .full_at
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(uploads: u32, deliveries: u32, tool_calls: u32) -> Limiter {
        Limiter::new(&LimitsConfig {
            uploads_per_minute: uploads,
            deliveries_per_minute: deliveries,
            tool_calls_per_minute: tool_calls,
            ..LimitsConfig::default()
        })
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn a_person_makes_the_limit_at_once_and_the_next_waits_for_its_interval() {
        let rates = limiter(3, 0, 0);
        let t0 = Instant::now();
        let take = |at| rates.take_all_at("ann", &[Rate::Uploads], at);
        assert_eq!(take(t0), Ok(()), "limit - 2");
        assert_eq!(take(t0), Ok(()), "limit - 1");
        assert_eq!(take(t0), Ok(()), "at the limit");
        let refused = take(t0).expect_err("limit + 1");
        // A bucket of 3 a minute gains one every 20 s.
        assert_eq!(refused.wait, secs(20));
        assert_eq!(refused.retry_after_secs(), 20);
        assert_eq!(refused.rate, Rate::Uploads);
        assert!(
            refused.message().contains("too many uploads")
                && refused.message().contains("3 a minute")
                && refused.message().contains("Try again in 20 seconds"),
            "{}",
            refused.message()
        );
        // Refusals took nothing: just before the interval it is still refused, with the
        // rest of the wait; at the interval one more fits, and only one.
        let refused = take(t0 + secs(19)).expect_err("before the interval");
        assert_eq!(refused.retry_after_secs(), 1);
        assert_eq!(take(t0 + secs(20)), Ok(()));
        assert!(take(t0 + secs(20)).is_err());
        // A minute of nothing fills the bucket again: the whole limit at once.
        let later = t0 + secs(20) + WINDOW;
        for _ in 0..3 {
            assert_eq!(take(later), Ok(()));
        }
        assert!(take(later).is_err());
    }

    #[test]
    fn the_wait_is_rounded_up_to_whole_seconds_and_is_never_0() {
        // 7 a minute: one every 8.571… s.
        let rates = limiter(0, 0, 7);
        let t0 = Instant::now();
        for _ in 0..7 {
            rates
                .take_all_at("ann", &[Rate::ToolCalls], t0)
                .expect("within the limit");
        }
        let refused = rates
            .take_all_at("ann", &[Rate::ToolCalls], t0)
            .unwrap_err();
        assert_eq!(refused.retry_after_secs(), 9, "{:?}", refused.wait);
        // A few nanoseconds short of room is still a whole second to wait.
        let almost = t0 + refused.wait - Duration::from_nanos(3);
        let refused = rates
            .take_all_at("ann", &[Rate::ToolCalls], almost)
            .unwrap_err();
        assert_eq!(refused.retry_after_secs(), 1);
        assert_eq!(refused.message().matches("1 second").count(), 1);
        assert!(refused.message().ends_with("Try again in 1 second"));
    }

    #[test]
    fn people_and_rates_are_counted_apart() {
        let rates = limiter(2, 2, 2);
        let t0 = Instant::now();
        for _ in 0..2 {
            rates.take_all_at("ann", &[Rate::Uploads], t0).unwrap();
        }
        assert!(rates.take_all_at("ann", &[Rate::Uploads], t0).is_err());
        // Ann's other rates, and bob's uploads, are untouched by her flood.
        assert_eq!(rates.take_all_at("ann", &[Rate::Deliveries], t0), Ok(()));
        assert_eq!(rates.take_all_at("ann", &[Rate::ToolCalls], t0), Ok(()));
        for _ in 0..2 {
            assert_eq!(rates.take_all_at("bob", &[Rate::Uploads], t0), Ok(()));
        }
    }

    #[test]
    fn a_call_counted_twice_is_taken_whole_or_not_at_all() {
        let rates = limiter(0, 1, 5);
        let t0 = Instant::now();
        let both = [Rate::ToolCalls, Rate::Deliveries];
        assert_eq!(rates.take_all_at("ann", &both, t0), Ok(()));
        // No delivery left: the call is refused for deliveries, and its tool call is
        // not spent.
        let refused = rates.take_all_at("ann", &both, t0).unwrap_err();
        assert_eq!(refused.rate, Rate::Deliveries);
        assert_eq!(refused.retry_after_secs(), 60);
        for n in 0..4 {
            assert_eq!(
                rates.take_all_at("ann", &[Rate::ToolCalls], t0),
                Ok(()),
                "tool call {n}"
            );
        }
        assert!(rates.take_all_at("ann", &[Rate::ToolCalls], t0).is_err());
    }

    #[test]
    fn zero_is_no_limit_and_keeps_nothing() {
        let rates = limiter(0, 0, 0);
        let t0 = Instant::now();
        for n in 0..10_000 {
            let rate = [Rate::Uploads, Rate::Deliveries, Rate::ToolCalls][n % 3];
            assert_eq!(rates.take_all_at("ann", &[rate], t0), Ok(()));
        }
        assert_eq!(rates.tracked(), 0);
    }

    #[test]
    fn the_ceiling_rate_counts_too() {
        let max = ferry_config::limits::RATE_PER_MINUTE_MAX;
        let rates = limiter(max, 0, 0);
        let t0 = Instant::now();
        for _ in 0..max {
            rates.take_all_at("ann", &[Rate::Uploads], t0).unwrap();
        }
        let refused = rates.take_all_at("ann", &[Rate::Uploads], t0).unwrap_err();
        assert_eq!(refused.retry_after_secs(), 1);
    }

    #[test]
    fn people_whose_buckets_are_full_again_are_forgotten() {
        let rates = limiter(10, 10, 10);
        let t0 = Instant::now();
        for n in 0..1000 {
            rates
                .take_all_at(&format!("p{n}"), &[Rate::Uploads], t0)
                .unwrap();
        }
        assert_eq!(rates.tracked(), 1000);
        // Within the minute nobody's bucket is full yet; a minute on, the first taking
        // sweeps everyone whose bucket filled, and keeps only the taker.
        rates
            .take_all_at("late", &[Rate::ToolCalls], t0 + secs(30))
            .unwrap();
        assert_eq!(rates.tracked(), 1001);
        rates
            .take_all_at("late", &[Rate::ToolCalls], t0 + WINDOW + secs(1))
            .unwrap();
        assert_eq!(rates.tracked(), 1);
    }
}
