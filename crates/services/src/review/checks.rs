//! The checks of a review, in order: the blocklists, the fetch, the screenshot, the scorer.
//! Each is recorded; the verdict follows from them (see [`Outcome`]). No store here: the
//! review service ([`super::Reviews`]) queues links, runs [`Checker::check`] and keeps what it
//! answers.
//!
//! The parts, each in its own file: [`lists`] (the review blocklists and their reload),
//! [`fetch`] (the client that only connects to checked addresses, the HTML reading),
//! [`screenshot`] (headless Chromium, every request of it through [`proxy`], which applies the
//! fetch's address rule) and [`scorer`] (the chat-completions call).
//!
//! What each check records (`check`, `outcome`, `detail`):
//! - `blocklist`: `hit` with the entry and where it is listed (the verdict is `blocked` and
//!   nothing else runs), or `clear`;
//! - `fetch`: `ok` (`200 text/html https://final/ after 2 redirects`), `failed` (why),
//!   `refused` (the address the policy refused), or `skipped` (`review.fetch` is off);
//! - `screenshot`: `ok`, `failed`, `refused`, or `skipped` (no browser, or the fetch did not
//!   reach the page: the browser only goes where the fetch went);
//! - `scorer`: `ok` (the score and reason), `failed` (why; the verdict is `unscored`), or
//!   `skipped` (no scorer: `unscored`).
//!
//! A failed or refused fetch is recorded, never a verdict by itself.

pub mod fetch;
pub mod lists;
pub mod proxy;
pub mod scorer;
pub mod screenshot;

use std::net::IpAddr;
use std::sync::Arc;

use url::Url;

use crate::blocklist::BlockedHosts;
use crate::config::ReviewConfig;
use crate::model::{CheckRecord, Verdict};

pub use fetch::{public_address, AddressPolicy};

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
    /// The fetch's last HTTP status.
    pub status: Option<u16>,
    /// The fetched page's media type (`text/html`).
    pub content_type: Option<String>,
}

impl Outcome {
    fn record(&mut self, check: &str, outcome: &str, detail: impl Into<String>) {
        self.checks.push(CheckRecord {
            check: check.into(),
            outcome: outcome.into(),
            detail: detail.into(),
        });
    }
}

/// Runs the checks. One per process, shared by the review workers (`check` takes `&self`).
pub struct Checker {
    config: ReviewConfig,
    blocked: Arc<BlockedHosts>,
    /// Reloaded by its own thread while the checker lives.
    lists: lists::ReviewLists,
    fetcher: fetch::Fetcher,
    /// The fetcher's rule, which the screenshot's proxy applies to every browser request.
    policy: AddressPolicy,
    scorer: Option<scorer::Scorer>,
}

impl Checker {
    /// A checker with the address policy `review.allow_private` asks for: every address when
    /// set, else [`public_address`]. Reads the blocklists now (an unreadable file is an error)
    /// and starts their reload.
    pub fn new(config: &ReviewConfig, blocked: Arc<BlockedHosts>) -> Result<Self, String> {
        let policy: AddressPolicy = if config.allow_private {
            Arc::new(|_: IpAddr| true)
        } else {
            Arc::new(public_address)
        };
        Self::with_address_policy(config, blocked, policy)
    }

    /// A checker whose fetch and browser connect only to addresses `policy` allows (it
    /// replaces `review.allow_private`). For tests that serve pages on loopback while refusing
    /// one address of it.
    pub fn with_address_policy(
        config: &ReviewConfig,
        blocked: Arc<BlockedHosts>,
        policy: AddressPolicy,
    ) -> Result<Self, String> {
        let scorer = match config.scorer.url.trim() {
            "" => None,
            url => Some(scorer::Scorer::new(
                url,
                &config.scorer.model,
                &config.scorer.api_key,
            )?),
        };
        Ok(Self {
            lists: lists::ReviewLists::open(&config.blocklists)?,
            fetcher: fetch::Fetcher::new(policy.clone())?,
            policy,
            scorer,
            config: config.clone(),
            blocked,
        })
    }

    /// Checks a link's destinations (its URL first, then its rules' and targets' URLs). The
    /// blocklists see every URL; the fetch, the screenshot and the scorer the first only.
    pub async fn check(&self, urls: &[String]) -> Outcome {
        let mut out = Outcome::default();
        if let Some(entry) = self.blocklist_hit(urls) {
            out.record("blocklist", "hit", entry);
            out.verdict = Some(Verdict::Blocked);
            return out;
        }
        out.record(
            "blocklist",
            "clear",
            match urls.len() {
                1 => "1 URL".to_string(),
                n => format!("{n} URLs"),
            },
        );
        let Some(first) = urls.first() else {
            out.verdict = Some(Verdict::Unscored);
            return out;
        };

        // The fetch; `target` is where the browser may go and the address to pin it to.
        let mut target: Option<(Url, Option<std::net::SocketAddr>)> = None;
        let mut fetch_said = "skipped";
        if self.config.fetch {
            match self.fetcher.fetch(first).await {
                Ok(page) => {
                    let redirects = match page.redirects {
                        0 => String::new(),
                        1 => " after 1 redirect".into(),
                        n => format!(" after {n} redirects"),
                    };
                    let cut = if page.truncated {
                        " (cut at 1 MiB)"
                    } else {
                        ""
                    };
                    let detail = format!(
                        "{} {} {}{redirects}{cut}",
                        page.status,
                        page.content_type.as_deref().unwrap_or("-"),
                        page.final_url
                    );
                    out.record("fetch", "ok", detail);
                    fetch_said = "ok";
                    out.status = Some(page.status);
                    out.content_type = page.content_type;
                    out.final_url = Some(page.final_url.to_string());
                    out.title = page.title;
                    out.description = page.description;
                    target = Some((page.final_url, page.remote));
                }
                Err(fetch::FetchError::Failed(why)) => {
                    out.record("fetch", "failed", why);
                    fetch_said = "failed";
                }
                Err(fetch::FetchError::Refused(why)) => {
                    out.record("fetch", "refused", why);
                    fetch_said = "refused";
                }
            }
        } else {
            out.record("fetch", "skipped", "review.fetch is off");
        }

        let browser = self.config.browser.trim();
        if browser.is_empty() {
            out.record("screenshot", "skipped", "no browser configured");
        } else {
            if fetch_said == "skipped" {
                // No fetch checked the address: check it the same way before the browser goes.
                match Url::parse(first) {
                    Ok(url) => match self.fetcher.vet(&url).await {
                        Ok(pin) => target = Some((url, pin)),
                        Err(fetch::FetchError::Refused(why)) => {
                            out.record("screenshot", "refused", why);
                        }
                        Err(fetch::FetchError::Failed(why)) => {
                            out.record("screenshot", "failed", why);
                        }
                    },
                    Err(e) => out.record("screenshot", "failed", format!("not a URL: {e}")),
                }
            }
            match target {
                Some((url, pin)) => {
                    match screenshot::take(browser, &url, pin, &self.policy).await {
                        Ok(png) => {
                            out.record("screenshot", "ok", format!("PNG, {} bytes", png.len()));
                            out.screenshot = Some(png);
                        }
                        Err(why) => out.record("screenshot", "failed", why),
                    }
                }
                None if fetch_said == "skipped" => {} // recorded above
                None => out.record(
                    "screenshot",
                    "skipped",
                    format!("the fetch {fetch_said}: the browser only goes where it went"),
                ),
            }
        }

        match &self.scorer {
            None => {
                out.record("scorer", "skipped", "no scorer configured");
                out.verdict = Some(Verdict::Unscored);
            }
            Some(scorer) => {
                let facts = scorer::PageFacts {
                    url: out.final_url.as_deref().unwrap_or(first),
                    title: out.title.as_deref(),
                    description: out.description.as_deref(),
                    screenshot: out.screenshot.as_deref(),
                };
                match scorer.score(&facts).await {
                    Ok((score, reason)) => {
                        let verdict = Verdict::of_score(
                            score,
                            self.config.flag_threshold,
                            self.config.block_threshold,
                        );
                        out.record(
                            "scorer",
                            "ok",
                            format!("{score} ({}): {reason}", verdict.as_str()),
                        );
                        out.score = Some(score);
                        out.reason = Some(reason);
                        out.verdict = Some(verdict);
                    }
                    Err(why) => {
                        out.record("scorer", "failed", why);
                        out.verdict = Some(Verdict::Unscored);
                    }
                }
            }
        }
        out
    }

    /// The first entry of the review blocklists or `limits.blocked_hosts` that one of `urls`
    /// hits, in words.
    fn blocklist_hit(&self, urls: &[String]) -> Option<String> {
        urls.iter().find_map(|raw| {
            let url = Url::parse(raw).ok()?;
            if let Some(entry) = url.host_str().and_then(|h| self.blocked.blocked_by(h)) {
                return Some(format!("{entry} (limits.blocked_hosts)"));
            }
            self.lists.hit(&url)
        })
    }
}
