//! The review of destinations (design 003's 审核), as stored: why a link was queued, what each
//! check found, the verdict, and the rules that decide a verdict from a score or a blocklist
//! hit. No I/O: the checks themselves (fetch, screenshot, scorer) live in the review service.

use serde::{Deserialize, Serialize};

use super::time::Millis;

/// What a review concluded about a link's destinations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Nothing wrong found.
    Ok,
    /// A score between the thresholds: waits for a person.
    Flagged,
    /// On a blocklist, a score at the block threshold, or an admin's decision: the link stops
    /// redirecting.
    Blocked,
    /// No scorer, or a scorer that failed or answered nonsense.
    Unscored,
}

impl Verdict {
    pub const ALL: [Verdict; 4] = [
        Verdict::Ok,
        Verdict::Flagged,
        Verdict::Blocked,
        Verdict::Unscored,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Flagged => "flagged",
            Verdict::Blocked => "blocked",
            Verdict::Unscored => "unscored",
        }
    }

    pub fn parse(text: &str) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.as_str() == text)
    }

    /// The number a verdict is stored as (never renumber).
    pub fn stored(self) -> u8 {
        match self {
            Verdict::Ok => 1,
            Verdict::Flagged => 2,
            Verdict::Blocked => 3,
            Verdict::Unscored => 4,
        }
    }

    pub fn of_stored(n: u8) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.stored() == n)
    }

    /// The verdict of a spam score between the thresholds (`flag ≤ block`).
    pub fn of_score(score: f64, flag: f64, block: f64) -> Verdict {
        if score >= block {
            Verdict::Blocked
        } else if score >= flag {
            Verdict::Flagged
        } else {
            Verdict::Ok
        }
    }
}

/// Why a link was queued for review.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// The link was created.
    Created,
    /// Its URL, or a rule's or target's URL, changed.
    Changed,
    /// Its visits reached a power of two from 16 on.
    Visits,
    /// `POST /api/v1/links/{code}/review` with no body.
    Requested,
    /// An admin's verdict (`POST …/review` with `{"verdict"}`): no check runs.
    Override,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Created => "created",
            Trigger::Changed => "changed",
            Trigger::Visits => "visits",
            Trigger::Requested => "requested",
            Trigger::Override => "override",
        }
    }

    /// The number a trigger is stored as (never renumber).
    pub fn stored(self) -> u8 {
        match self {
            Trigger::Created => 1,
            Trigger::Changed => 2,
            Trigger::Visits => 3,
            Trigger::Requested => 4,
            Trigger::Override => 5,
        }
    }

    pub fn of_stored(n: u8) -> Option<Trigger> {
        [
            Trigger::Created,
            Trigger::Changed,
            Trigger::Visits,
            Trigger::Requested,
            Trigger::Override,
        ]
        .into_iter()
        .find(|t| t.stored() == n)
    }
}

/// Whether a visit count is one that queues a review: a power of two from 16 on.
pub fn visits_trigger(count: u64) -> bool {
    count >= 16 && count.is_power_of_two()
}

/// Whether the visits `before + 1 ..= after` pass a count that queues a review.
pub fn visits_cross_trigger(before: u64, after: u64) -> bool {
    if after <= before {
        return false;
    }
    // The largest power of two ≤ after; it triggers when it is above `before`.
    let top = 1u64 << (63 - after.leading_zeros());
    top >= 16 && top > before
}

/// One check of a review and what it found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckRecord {
    /// `blocklist`, `fetch`, `screenshot` or `scorer`.
    pub check: String,
    /// `hit`, `clear`, `ok`, `failed`, `skipped`, …
    pub outcome: String,
    /// What it found, in words (the blocklist entry, the status and final URL, the error).
    pub detail: String,
}

/// A finished review of a link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Review {
    /// Assigned by the store, increasing.
    pub id: u64,
    pub link_id: u64,
    pub at: Millis,
    pub trigger: Trigger,
    pub checks: Vec<CheckRecord>,
    /// The scorer's spam score, 0 to 1.
    pub score: Option<f64>,
    pub reason: Option<String>,
    pub verdict: Verdict,
    /// The page as fetched.
    pub final_url: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    /// Whether a screenshot was kept (read it with `Store::review_screenshot`).
    pub screenshot: bool,
    /// The API key's name behind an override.
    pub by: Option<String>,
}

/// A link's latest verdict, kept on the link so that a redirect reads it with the link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReviewMark {
    pub verdict: Verdict,
    pub score: Option<f64>,
    pub reason: Option<String>,
    pub at: Millis,
}

// Scores are checked to lie in 0..=1 before they are kept: never NaN, so equality is total.
impl Eq for ReviewMark {}

/// A link waiting in the review queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuedReview {
    pub link_id: u64,
    pub trigger: Trigger,
    /// When it was queued (its place in the queue).
    pub at: Millis,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers_of_two_from_sixteen() {
        assert!(!visits_trigger(8));
        assert!(visits_trigger(16));
        assert!(!visits_trigger(17));
        assert!(visits_trigger(1024));
        assert!(!visits_cross_trigger(0, 15));
        assert!(visits_cross_trigger(15, 16));
        assert!(visits_cross_trigger(10, 40));
        assert!(!visits_cross_trigger(16, 31));
        assert!(visits_cross_trigger(31, 32));
        assert!(!visits_cross_trigger(32, 32));
        assert!(visits_cross_trigger(1000, 1030));
    }

    #[test]
    fn scores_become_verdicts() {
        assert_eq!(Verdict::of_score(0.95, 0.5, 0.9), Verdict::Blocked);
        assert_eq!(Verdict::of_score(0.9, 0.5, 0.9), Verdict::Blocked);
        assert_eq!(Verdict::of_score(0.6, 0.5, 0.9), Verdict::Flagged);
        assert_eq!(Verdict::of_score(0.1, 0.5, 0.9), Verdict::Ok);
    }
}
