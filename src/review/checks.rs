//! The checks of a review, in order: the blocklists, the fetch, the screenshot, the scorer.
//! Each is recorded; the verdict follows from them (see [`Outcome`]). No store here: the
//! review service ([`super::Reviews`]) queues links, runs [`Checker::check`] and keeps what it
//! answers.

use std::sync::Arc;

use crate::blocklist::BlockedHosts;
use crate::config::ReviewConfig;
use crate::model::{CheckRecord, Verdict};

/// What the checks of one link found.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub checks: Vec<CheckRecord>,
    pub score: Option<f64>,
    pub reason: Option<String>,
    /// `None` only while no check has decided (the service then says `unscored`).
    pub verdict: Option<Verdict>,
    pub final_url: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    /// PNG bytes.
    pub screenshot: Option<Vec<u8>>,
}

/// Runs the checks.
pub struct Checker {
    #[allow(dead_code)]
    config: ReviewConfig,
    #[allow(dead_code)]
    blocked: Arc<BlockedHosts>,
}

impl Checker {
    pub fn new(config: &ReviewConfig, blocked: Arc<BlockedHosts>) -> Result<Self, String> {
        Ok(Self {
            config: config.clone(),
            blocked,
        })
    }

    /// Checks a link's destinations (its URL first, then its rules' and targets' URLs).
    pub async fn check(&self, urls: &[String]) -> Outcome {
        let _ = urls;
        Outcome::default()
    }
}
