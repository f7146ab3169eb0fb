//! A link record and its rules: its status, the ids a store may keep, what a patch does, which
//! links a listing keeps, and the counts by status.

use serde::{Deserialize, Serialize};

use super::gates::{InApp, LeadForm};
use super::options::{EndedBy, LinkOptions, Rotation, Rule, Target};
use super::review::{ReviewMark, Verdict};
use super::time::Millis;

/// Where a link is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkStatus {
    /// Redirects; present in the active mapping.
    Active,
    /// Past `expires_at` and marked by the lifecycle job.
    Expired,
    /// Deleted through the API; the record stays.
    Deleted,
    /// Recycled: its code went back to a pool; the record (and its visits) stay, by id.
    Archived,
}

impl LinkStatus {
    /// All statuses, in the order statistics list them.
    pub const ALL: [LinkStatus; 4] = [
        LinkStatus::Active,
        LinkStatus::Expired,
        LinkStatus::Deleted,
        LinkStatus::Archived,
    ];

    /// Whether a link in this status may be deleted: an active or expired one (an expired
    /// link then waits for recycling from its deletion).
    pub fn deletable(self) -> bool {
        matches!(self, LinkStatus::Active | LinkStatus::Expired)
    }

    /// Whether a link in this status waits for recycling: it ended and still owns its code.
    pub fn recyclable(self) -> bool {
        matches!(self, LinkStatus::Expired | LinkStatus::Deleted)
    }

    /// The lowercase name used in the API and in counters.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkStatus::Active => "active",
            LinkStatus::Expired => "expired",
            LinkStatus::Deleted => "deleted",
            LinkStatus::Archived => "archived",
        }
    }
}

/// The highest link id a store hands out or keeps: 2^53 − 1, the largest integer every JSON
/// client reads exactly (JavaScript numbers), and well inside PostgreSQL's `bigint`. An
/// imported record with a larger id gets a new one, so the id counter can never wrap.
pub const MAX_LINK_ID: u64 = (1 << 53) - 1;

/// Whether an id is one a store may keep for an imported record.
pub fn is_keepable_id(id: u64) -> bool {
    (1..=MAX_LINK_ID).contains(&id)
}

/// A link record, kept by id forever.
///
/// Encoded as a MessagePack array: new fields go at the end with `#[serde(default)]` so that
/// older records still decode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// Unique forever, never reused, from a persisted monotonic counter; at most
    /// [`MAX_LINK_ID`].
    pub id: u64,
    pub code: String,
    /// The target, as normalised by the domain service.
    pub url: String,
    /// The business the link belongs to ("default" unless given).
    pub space: String,
    /// True when the caller chose the code; custom links are never dedup targets.
    pub custom: bool,
    pub created_at: Millis,
    /// `None` is permanent.
    pub expires_at: Option<Millis>,
    pub status: LinkStatus,
    pub title: Option<String>,
    pub tags: Vec<String>,
    pub updated_at: Millis,
    /// When the link left the active state by deletion; the recycling clock starts here.
    #[serde(default)]
    pub deleted_at: Option<Millis>,
    /// Password, visit cap, start time, end destination, rules and targets; `None` for a
    /// plain link (most links), which redirects by the plain path.
    #[serde(default)]
    pub options: Option<Box<LinkOptions>>,
    /// Why the link ended, once it has (`None` for an expired record from an older version:
    /// it ended by its expiry).
    #[serde(default)]
    pub ended_by: Option<EndedBy>,
    /// The latest verdict of the review of its destinations; `None`: never reviewed.
    #[serde(default)]
    pub review: Option<ReviewMark>,
    /// The domain the link answers on ([`crate::domain`]): 0, the default domain, for every
    /// link made before domains existed.
    #[serde(default)]
    pub domain: u16,
}

impl Link {
    /// The key its code is stored and cached under ([`crate::domain::code_key`]).
    pub fn key(&self) -> std::borrow::Cow<'_, str> {
        crate::domain::code_key(self.domain, &self.code)
    }

    /// A review blocked it: it redirects no one.
    pub fn is_review_blocked(&self) -> bool {
        self.review
            .as_ref()
            .is_some_and(|r| r.verdict == Verdict::Blocked)
    }
}

impl Link {
    /// The code's length, which names its tier.
    pub fn length(&self) -> u8 {
        u8::try_from(self.code.len()).unwrap_or(u8::MAX)
    }

    /// True when `now` is at or past the link's expiry.
    pub fn is_expired_at(&self, now: Millis) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }

    /// Whether a create of the same space, length and URL may return this link instead of
    /// taking a code: an active generated link not yet past its expiry, with no options (a
    /// create that asks for options never dedups either),
    /// so that nobody is handed a link that behaves otherwise than they asked — a plain
    /// link for a protected one-time request, or another's password. The rule every backend
    /// applies.
    pub fn is_dedup_target(&self, now: Millis) -> bool {
        self.status == LinkStatus::Active
            && !self.custom
            && !self.is_expired_at(now)
            && self.options.as_ref().is_none_or(|o| o.is_empty())
    }

    /// Why the link ended, once it has: expired links say their cause (by their expiry
    /// unless the record says otherwise); active, deleted and archived ones say nothing.
    pub fn ended_by(&self) -> Option<EndedBy> {
        (self.status == LinkStatus::Expired).then(|| self.ended_by.unwrap_or(EndedBy::Expiry))
    }

    /// When the link ended, for the recycling clock: its expiry if it expired, its
    /// deletion if it was deleted (a record without a deletion time, from an older version or
    /// an import, ended at its last update). `None` while active, or once archived.
    pub fn ended_at(&self) -> Option<Millis> {
        match self.status {
            LinkStatus::Expired => self.expires_at,
            LinkStatus::Deleted => self.deleted_at.or(Some(self.updated_at)),
            LinkStatus::Active | LinkStatus::Archived => None,
        }
    }
}

/// A partial update. `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct LinkPatch {
    pub url: Option<String>,
    /// `Some(None)` makes the link permanent.
    pub expires_at: Option<Option<Millis>>,
    pub title: Option<Option<String>>,
    pub tags: Option<Vec<String>>,
    /// Changes to the options, field by field.
    pub options: OptionsPatch,
    /// The link has ended by its cap: it is stamped with why and its expiry set to the
    /// patch's time, so that the expiry machinery (cache, lifecycle, recycling) ends it.
    pub end: Option<EndedBy>,
    /// A review's verdict (`Some(None)` forgets it).
    pub review: Option<Option<ReviewMark>>,
}

/// Changes to a link's options; `None` leaves a field, `Some(None)` (or an empty list)
/// removes it.
#[derive(Clone, Debug, Default)]
pub struct OptionsPatch {
    /// The new password's hash.
    pub password: Option<Option<String>>,
    pub max_visits: Option<Option<u64>>,
    pub valid_from: Option<Option<Millis>>,
    pub fallback_url: Option<Option<String>>,
    pub rules: Option<Vec<Rule>>,
    pub targets: Option<Vec<Target>>,
    pub rotation: Option<Rotation>,
    pub in_app: Option<Option<InApp>>,
    pub form: Option<Option<LeadForm>>,
    pub og_title: Option<Option<String>>,
    pub og_description: Option<Option<String>>,
    pub og_image: Option<Option<String>>,
}

impl OptionsPatch {
    /// Whether the patch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.password.is_none()
            && self.max_visits.is_none()
            && self.valid_from.is_none()
            && self.fallback_url.is_none()
            && self.rules.is_none()
            && self.targets.is_none()
            && self.rotation.is_none()
            && self.in_app.is_none()
            && self.form.is_none()
            && self.og_title.is_none()
            && self.og_description.is_none()
            && self.og_image.is_none()
    }

    /// The options as the patch leaves `current`: `None` when nothing is left.
    pub fn apply(&self, current: Option<&LinkOptions>) -> Option<Box<LinkOptions>> {
        let mut out = current.cloned().unwrap_or_default();
        if let Some(v) = &self.password {
            out.password = v.clone();
        }
        if let Some(v) = self.max_visits {
            out.max_visits = v;
        }
        if let Some(v) = self.valid_from {
            out.valid_from = v;
        }
        if let Some(v) = &self.fallback_url {
            out.fallback_url = v.clone();
        }
        if let Some(v) = &self.rules {
            out.rules = v.clone();
        }
        if let Some(v) = &self.targets {
            out.targets = v.clone();
        }
        if let Some(v) = self.rotation {
            out.rotation = v;
        }
        if let Some(v) = self.in_app {
            out.in_app = v;
        }
        if let Some(v) = &self.form {
            out.form = v.clone();
        }
        let mut preview = out.preview.take().unwrap_or_default();
        for (patch, field) in [
            (&self.og_title, &mut preview.title),
            (&self.og_description, &mut preview.description),
            (&self.og_image, &mut preview.image),
        ] {
            if let Some(v) = patch {
                *field = v.clone();
            }
        }
        out.preview = (!preview.is_empty()).then_some(preview);
        (!out.is_empty()).then(|| Box::new(out))
    }
}

impl LinkPatch {
    /// The link as the patch leaves it, stamped `now`. Only an active link is patched; the
    /// caller checks that.
    pub fn apply(&self, link: &Link, now: Millis) -> Link {
        let mut out = link.clone();
        if let Some(url) = &self.url {
            out.url = url.clone();
        }
        if let Some(expires_at) = self.expires_at {
            out.expires_at = expires_at;
        }
        if let Some(title) = &self.title {
            out.title = title.clone();
        }
        if let Some(tags) = &self.tags {
            out.tags = tags.clone();
        }
        if !self.options.is_empty() {
            out.options = self.options.apply(link.options.as_deref());
        }
        if let Some(end) = self.end {
            out.ended_by = Some(end);
            out.expires_at = Some(out.expires_at.map_or(now, |at| at.min(now)));
        }
        if let Some(review) = &self.review {
            out.review = review.clone();
        }
        out.updated_at = now;
        out
    }
}

/// Link counts by status, kept as counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LinkCounts {
    pub active: u64,
    pub expired: u64,
    pub deleted: u64,
    pub archived: u64,
}

/// A page of links in id order.
#[derive(Clone, Debug, Default)]
pub struct LinkPage {
    pub items: Vec<Link>,
    /// The id to continue after, when there may be more.
    pub next: Option<u64>,
}

/// Which links `Store::list_links` returns. A store walks links in id order from the cursor
/// and keeps those [`LinkQuery::matches`] accepts: the rule lives here, once, for every backend.
#[derive(Clone, Debug, Default)]
pub struct LinkQuery {
    pub space: Option<String>,
    pub status: Option<LinkStatus>,
    /// Code length.
    pub length: Option<u8>,
    /// The links of one domain only ([`crate::domain`]); `None`: every domain.
    pub domain: Option<u16>,
    /// A case-insensitive substring of the code, URL, title or one of the tags; stored
    /// lowercased (see [`LinkQuery::search`]).
    pub q: Option<String>,
    /// The cursor: only links whose id is greater than this (less, with `newest_first`).
    pub after: Option<u64>,
    /// Highest ids first (the pages); the API lists oldest first.
    pub newest_first: bool,
    pub limit: usize,
}

impl LinkQuery {
    /// Sets the search text (trimmed, lowercased; empty means no search).
    pub fn search(mut self, q: Option<&str>) -> Self {
        self.q = q.map(|q| q.trim().to_lowercase()).filter(|q| !q.is_empty());
        self
    }

    /// Whether a link belongs in the answer.
    pub fn matches(&self, link: &Link) -> bool {
        self.space.as_ref().is_none_or(|s| *s == link.space)
            && self.status.is_none_or(|s| s == link.status)
            && self.domain.is_none_or(|d| d == link.domain)
            && self
                .length
                .is_none_or(|l| usize::from(l) == link.code.len())
            && self.q.as_deref().is_none_or(|q| {
                contains_folded(&link.code, q)
                    || contains_folded(&link.url, q)
                    || link.title.as_deref().is_some_and(|t| contains_folded(t, q))
                    || link.tags.iter().any(|t| contains_folded(t, q))
            })
    }
}

/// `needle` (already lowercase) in `haystack`, ignoring case.
fn contains_folded(haystack: &str, needle: &str) -> bool {
    if haystack.is_ascii() && needle.is_ascii() {
        haystack
            .as_bytes()
            .windows(needle.len().max(1))
            .any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
            && !needle.is_empty()
    } else {
        haystack.to_lowercase().contains(needle)
    }
}
