//! Catalogue queries with page numbers, for the Shlink-compatible API (`/rest/v3`): links
//! filtered, ordered and cut into numbered pages with a total; tags with their link and visit
//! counts; the visits of a caller's links summed; and a create that finds an existing link the
//! way Shlink's `findIfExists` does.
//!
//! The store lists links by cursor in id order, so a numbered page walks every link the caller
//! may see (active and expired: Shlink lists disabled short URLs too), keeps the best
//! `page × per_page` of them in order (memory bounded by that, not by the catalogue), and
//! counts the rest: O(links) time per request, one visit-counter read per link only when the
//! order is by visits (otherwise only for the page's items). Tag statistics and the summary
//! read one counter per link. Nothing here writes, except the create.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::{CreateLink, LinkError, Links, Result};
use crate::model::{CapSlot, VisitTotals};
use crate::model::{Link, LinkQuery, LinkStatus, Millis};

/// Links per store page while walking the catalogue.
const PAGE: usize = 1000;

/// What a numbered listing is ordered by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortField {
    LongUrl,
    ShortCode,
    DateCreated,
    /// A missing title sorts as an empty one.
    Title,
    Visits,
    NonBotVisits,
}

/// Which links a numbered listing keeps, and their order.
#[derive(Clone, Debug)]
pub struct CatalogueQuery {
    /// The spaces the caller may see (`None`: all).
    pub spaces: Option<Vec<String>>,
    /// A case-insensitive substring of the code, URL, title or a tag.
    pub search: Option<String>,
    /// Keep links with these tags (any of them, or all with `all_tags`); compared ignoring case.
    pub tags: Vec<String>,
    pub all_tags: bool,
    /// Drop links with these tags (any of them, or all with `exclude_all`).
    pub exclude_tags: Vec<String>,
    pub exclude_all: bool,
    /// Created at or after / at or before.
    pub created_from: Option<Millis>,
    pub created_to: Option<Millis>,
    /// Drop links whose visit cap is used up.
    pub exclude_capped: bool,
    /// Drop links past their expiry.
    pub exclude_expired: bool,
    pub order: SortField,
    pub descending: bool,
    /// Keep links of this domain only (SPEC §26); `None`: every domain.
    pub domain: Option<u16>,
}

impl Default for CatalogueQuery {
    fn default() -> Self {
        Self {
            spaces: None,
            search: None,
            tags: Vec::new(),
            all_tags: false,
            exclude_tags: Vec::new(),
            exclude_all: false,
            created_from: None,
            created_to: None,
            exclude_capped: false,
            exclude_expired: false,
            domain: None,
            order: SortField::DateCreated,
            descending: true,
        }
    }
}

/// One numbered page: its links with their visit totals, and how many links match in all.
#[derive(Clone, Debug, Default)]
pub struct NumberedPage {
    pub items: Vec<(Link, VisitTotals)>,
    pub total: u64,
}

/// A tag, how many listed links carry it, and their visits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TagStat {
    pub tag: String,
    pub links: u64,
    pub visits: VisitTotals,
}

/// Whether `tags` has `wanted`, ignoring case.
fn has_tag(tags: &[String], wanted: &str) -> bool {
    tags.iter().any(|t| t.eq_ignore_ascii_case(wanted))
}

/// Whether a link's tags pass a filter list: any or all of `wanted` present.
fn tags_match(tags: &[String], wanted: &[String], all: bool) -> bool {
    if all {
        wanted.iter().all(|w| has_tag(tags, w))
    } else {
        wanted.iter().any(|w| has_tag(tags, w))
    }
}

impl Links {
    /// Every link of the caller's spaces that a catalogue shows (active or expired; deleted and
    /// recycled ones are gone for a catalogue), filtered by `search`, in id order, a store page
    /// at a time.
    fn each_listed(
        &self,
        spaces: Option<&[String]>,
        search: Option<&str>,
        mut each: impl FnMut(Link) -> Result<()>,
    ) -> Result<()> {
        let spaces: Vec<Option<String>> = match spaces {
            None => vec![None],
            Some(list) => list.iter().cloned().map(Some).collect(),
        };
        for space in spaces {
            let mut after = None;
            loop {
                let page = self.store.list_links(
                    &LinkQuery {
                        space: space.clone(),
                        after,
                        limit: PAGE,
                        ..LinkQuery::default()
                    }
                    .search(search),
                )?;
                for link in page.items {
                    if matches!(link.status, LinkStatus::Active | LinkStatus::Expired) {
                        each(link)?;
                    }
                }
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
        }
        Ok(())
    }

    /// Whether a link's visit cap is used up (an ended-by-cap link, or counts at the cap).
    fn cap_reached(&self, link: &Link) -> Result<bool> {
        let Some(options) = link.options.as_deref().filter(|o| o.max_visits.is_some()) else {
            return Ok(false);
        };
        if link.ended_by() == Some(crate::model::EndedBy::MaxVisits) {
            return Ok(true);
        }
        let counted = self.counted(link)?;
        Ok(options.remaining(CapSlot::Link, &counted) == Some(0))
    }

    /// Page `page` (from 1) of `per_page` links that `query` keeps, in its order, with the
    /// number of links it keeps in all.
    pub fn numbered_page(
        &self,
        query: &CatalogueQuery,
        page: usize,
        per_page: usize,
    ) -> Result<NumberedPage> {
        let now = self.clock.now();
        let skip = page.saturating_sub(1).saturating_mul(per_page);
        let keep = skip.saturating_add(per_page);
        let by_visits = matches!(query.order, SortField::Visits | SortField::NonBotVisits);
        let compare = |a: &(Link, VisitTotals), b: &(Link, VisitTotals)| -> Ordering {
            let (la, ta) = a;
            let (lb, tb) = b;
            let order = match query.order {
                SortField::LongUrl => la.url.cmp(&lb.url),
                SortField::ShortCode => la.code.cmp(&lb.code),
                SortField::DateCreated => la.created_at.cmp(&lb.created_at),
                SortField::Title => la
                    .title
                    .as_deref()
                    .unwrap_or("")
                    .cmp(lb.title.as_deref().unwrap_or("")),
                SortField::Visits => ta.visits.cmp(&tb.visits),
                SortField::NonBotVisits => {
                    (ta.visits - ta.bots.min(ta.visits)).cmp(&(tb.visits - tb.bots.min(tb.visits)))
                }
            }
            // Ties keep creation order, in the same direction.
            .then(la.id.cmp(&lb.id));
            if query.descending {
                order.reverse()
            } else {
                order
            }
        };
        let mut kept: Vec<(Link, VisitTotals)> = Vec::new();
        let mut total = 0u64;
        self.each_listed(query.spaces.as_deref(), query.search.as_deref(), |link| {
            if query.domain.is_some_and(|d| d != link.domain) {
                return Ok(());
            }
            if !query.tags.is_empty() && !tags_match(&link.tags, &query.tags, query.all_tags) {
                return Ok(());
            }
            if !query.exclude_tags.is_empty()
                && tags_match(&link.tags, &query.exclude_tags, query.exclude_all)
            {
                return Ok(());
            }
            if query
                .created_from
                .is_some_and(|from| link.created_at < from)
                || query.created_to.is_some_and(|to| link.created_at > to)
            {
                return Ok(());
            }
            if query.exclude_expired
                && (link.status == LinkStatus::Expired || link.is_expired_at(now))
            {
                return Ok(());
            }
            if query.exclude_capped && self.cap_reached(&link)? {
                return Ok(());
            }
            total += 1;
            if keep == 0 {
                return Ok(());
            }
            let totals = if by_visits {
                self.store.visit_totals(link.id)?
            } else {
                VisitTotals::default()
            };
            kept.push((link, totals));
            // Sorting and cutting at twice the window keeps memory at O(window) and the
            // time at O(n log window).
            if kept.len() >= keep.saturating_mul(2).max(PAGE) {
                kept.sort_by(compare);
                kept.truncate(keep);
            }
            Ok(())
        })?;
        kept.sort_by(compare);
        kept.truncate(keep);
        let mut items: Vec<(Link, VisitTotals)> = kept.into_iter().skip(skip).collect();
        if !by_visits {
            for (link, totals) in &mut items {
                *totals = self.store.visit_totals(link.id)?;
            }
        }
        Ok(NumberedPage { items, total })
    }

    /// Every tag of the caller's listed links, by name, with how many links carry it and their
    /// visits summed (a link counts once per tag it carries).
    pub fn tag_stats(&self, spaces: Option<&[String]>) -> Result<Vec<TagStat>> {
        let mut tags: BTreeMap<String, TagStat> = BTreeMap::new();
        self.each_listed(spaces, None, |link| {
            if link.tags.is_empty() {
                return Ok(());
            }
            let totals = self.store.visit_totals(link.id)?;
            for tag in &link.tags {
                let stat = tags.entry(tag.clone()).or_insert_with(|| TagStat {
                    tag: tag.clone(),
                    ..TagStat::default()
                });
                stat.links += 1;
                stat.visits.visits += totals.visits;
                stat.visits.bots += totals.bots;
            }
            Ok(())
        })?;
        Ok(tags.into_values().collect())
    }

    /// The visits of the caller's listed links, summed.
    pub fn visits_summed(&self, spaces: Option<&[String]>) -> Result<VisitTotals> {
        let mut sum = VisitTotals::default();
        self.each_listed(spaces, None, |link| {
            let totals = self.store.visit_totals(link.id)?;
            sum.visits += totals.visits;
            sum.bots += totals.bots;
            Ok(())
        })?;
        Ok(sum)
    }

    /// A create as Shlink's `findIfExists` asks: with `find` and a chosen code, the link that
    /// already has that code is returned when its URL is the same (else the code is taken);
    /// with `find` and no code, the usual dedup applies; without `find`, a new link is made
    /// even when one of the same URL exists. The flag says whether the link is new.
    pub fn create_finding(&self, req: CreateLink, find: bool) -> Result<(Link, bool)> {
        if !find {
            return self.create_without_dedup(req).map(|link| (link, true));
        }
        // The code on the create's domain (an unknown domain: the create refuses it).
        let key = req
            .code
            .as_deref()
            .and_then(|code| self.domains().key_of(req.domain.as_deref(), code).ok());
        if let (Some(code), Some(key)) = (req.code.as_deref(), key.as_deref()) {
            match self.get(key) {
                Ok(existing) => {
                    let url = self.check_url(&req.url)?;
                    let space = req.space.as_deref().unwrap_or(super::DEFAULT_SPACE);
                    if existing.url == url
                        && existing.space == space
                        && existing.status == LinkStatus::Active
                    {
                        return Ok((existing, false));
                    }
                    return Err(LinkError::CodeTaken(code.to_string()));
                }
                Err(LinkError::NotFound(_)) => {}
                Err(other) => return Err(other),
            }
        }
        self.create(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_filters_ignore_case_and_honour_any_or_all() {
        let tags = vec!["Foo".to_string(), "bar".to_string()];
        assert!(tags_match(&tags, &["foo".into()], false));
        assert!(tags_match(&tags, &["foo".into(), "baz".into()], false));
        assert!(!tags_match(&tags, &["foo".into(), "baz".into()], true));
        assert!(tags_match(&tags, &["FOO".into(), "BAR".into()], true));
    }
}
