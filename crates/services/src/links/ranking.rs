//! Whole-catalogue queries of the link service, for the YOURLS-compatible API: links ranked by
//! clicks (top, bottom), the newest, a random sample, and the totals of links and clicks; and
//! a create that never deduplicates (YOURLS with `unique_urls = false`).
//!
//! A link's clicks are its visit total. These queries walk every active link of the default
//! domain (what a YOURLS table would hold: YOURLS knows one domain, SPEC §26) in pages, reading one counter per link: O(links) time, memory bounded by
//! `start + limit`. Nothing here writes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::seq::{IteratorRandom, SliceRandom};

use super::{CreateLink, LinkError, Links, Result};
use crate::model::{Link, LinkQuery, LinkStatus, StoreError, DEFAULT_DOMAIN};
use crate::store::Created;

/// Links per store page while walking the catalogue.
const PAGE: usize = 1000;

/// The order of [`Links::ranked`] (YOURLS `filter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ranking {
    /// Most clicks first.
    Top,
    /// Fewest clicks first.
    Bottom,
    /// Newest first.
    Last,
    /// A uniform random sample.
    Random,
}

/// Counts over every active link of the default domain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub links: u64,
    pub clicks: u64,
}

impl Links {
    /// A link's clicks: every visit it has had, bots included.
    pub fn clicks(&self, link: &Link) -> Result<u64> {
        Ok(self.store.visit_totals(link.id)?.visits)
    }

    /// Calls `each` with every active link and its clicks, in id order.
    fn walk(&self, each: impl FnMut(Link, u64)) -> Result<()> {
        self.walk_space(None, each)
    }

    /// [`Links::walk`] over the links of one space, or of all (`None`).
    fn walk_space(&self, space: Option<&str>, mut each: impl FnMut(Link, u64)) -> Result<()> {
        for item in self.active(space) {
            let (link, clicks) = item?;
            each(link, clicks);
        }
        Ok(())
    }

    /// Every active link of the default domain in one space (all: `None`) with its clicks,
    /// in id order, read from the store a page at a time. Ends after the first error.
    fn active(&self, space: Option<&str>) -> impl Iterator<Item = Result<(Link, u64)>> + '_ {
        let space = space.map(str::to_string);
        let mut page = Vec::<Link>::new().into_iter();
        let mut after = None;
        let mut more = true;
        std::iter::from_fn(move || loop {
            if let Some(link) = page.next() {
                if link.status != LinkStatus::Active {
                    continue;
                }
                return Some(self.clicks(&link).map(|clicks| (link, clicks)));
            }
            if !more {
                return None;
            }
            match self.store.list_links(&LinkQuery {
                space: space.clone(),
                domain: Some(DEFAULT_DOMAIN),
                after,
                limit: PAGE,
                ..LinkQuery::default()
            }) {
                Ok(next) => {
                    more = next.next.is_some();
                    after = next.next;
                    page = next.items.into_iter();
                }
                Err(e) => {
                    more = false;
                    return Some(Err(e.into()));
                }
            }
        })
    }

    /// `limit` links from position `start` in the given order, with their clicks, and the
    /// totals, from one walk.
    pub fn ranked(
        &self,
        ranking: Ranking,
        start: usize,
        limit: usize,
    ) -> Result<(Vec<(Link, u64)>, Totals)> {
        let keep = start.saturating_add(limit);
        let mut totals = Totals::default();
        if limit == 0 {
            return Ok((Vec::new(), self.totals()?));
        }
        let mut ranked: Vec<(Link, u64)> = match ranking {
            Ranking::Random => {
                // rand's reservoir sampling: every link has the same chance whatever the
                // size, and memory holds the sample only.
                let mut failed = None;
                let links = self
                    .active(None)
                    .map_while(|item| item.map_err(|e| failed = Some(e)).ok())
                    .inspect(|(_, clicks)| {
                        totals.links += 1;
                        totals.clicks += clicks;
                    });
                let mut rng = rand::rng();
                let mut sample = links.sample(&mut rng, keep);
                if let Some(e) = failed {
                    return Err(e);
                }
                // The reservoir is not in a random order: shuffle it, so that a sample
                // smaller than the catalogue is not in id order.
                sample.shuffle(&mut rng);
                sample
            }
            _ => {
                // Keep the best `keep` in a heap whose top is the worst kept.
                let key = |link: &Link, clicks: u64| -> (u64, u64) {
                    match ranking {
                        Ranking::Top => (clicks, u64::MAX - link.id),
                        Ranking::Bottom => (u64::MAX - clicks, u64::MAX - link.id),
                        _ => (link.created_at, link.id),
                    }
                };
                let mut heap: BinaryHeap<Reverse<((u64, u64), u64)>> = BinaryHeap::new();
                let mut kept = std::collections::HashMap::new();
                self.walk(|link, clicks| {
                    totals.links += 1;
                    totals.clicks += clicks;
                    let k = key(&link, clicks);
                    if heap.len() < keep {
                        heap.push(Reverse((k, link.id)));
                        kept.insert(link.id, (link, clicks));
                    } else if heap.peek().is_some_and(|Reverse((worst, _))| k > *worst) {
                        if let Some(Reverse((_, out))) = heap.pop() {
                            kept.remove(&out);
                        }
                        heap.push(Reverse((k, link.id)));
                        kept.insert(link.id, (link, clicks));
                    }
                })?;
                let mut order: Vec<((u64, u64), u64)> =
                    heap.into_iter().map(|Reverse(e)| e).collect();
                order.sort_unstable_by(|a, b| b.cmp(a));
                order
                    .into_iter()
                    .filter_map(|(_, id)| kept.remove(&id))
                    .collect()
            }
        };
        Ok((ranked.drain(..).skip(start).take(limit).collect(), totals))
    }

    /// Active links of the default domain in some spaces (all: `None`), and their clicks summed.
    pub fn totals_in(&self, spaces: Option<&[String]>) -> Result<Totals> {
        let Some(spaces) = spaces else {
            return self.totals();
        };
        let mut totals = Totals::default();
        for space in spaces {
            self.walk_space(Some(space), |_, clicks| {
                totals.links += 1;
                totals.clicks += clicks;
            })?;
        }
        Ok(totals)
    }

    /// Active links of the default domain, and their clicks summed.
    pub fn totals(&self) -> Result<Totals> {
        let mut totals = Totals::default();
        self.walk(|_, clicks| {
            totals.links += 1;
            totals.clicks += clicks;
        })?;
        Ok(totals)
    }

    /// Does `raw` point at this shortener (a short URL)? YOURLS refuses those as `noloop`.
    pub fn is_short_url(&self, raw: &str) -> bool {
        url::Url::parse(raw.trim()).is_ok_and(|url| self.points_here(&url))
    }

    /// An active generated link of `url` in `space`, of any generated length, if there is
    /// one (what YOURLS's "URL already exists" check can see; custom links are not indexed
    /// by URL).
    pub fn existing_generated(&self, url: &str, space: &str) -> Result<Option<Link>> {
        let url = self.check_url(url)?;
        let now = self.clock.now();
        for length in self.pools.lengths() {
            if let Some(link) =
                self.store
                    .dedup_target(space, crate::model::DEFAULT_DOMAIN, length, &url)?
            {
                if !link.is_expired_at(now) {
                    return Ok(Some(link));
                }
            }
        }
        Ok(None)
    }

    /// Creates a new link even when an active generated link already has this URL.
    pub fn create_without_dedup(&self, req: CreateLink) -> Result<Link> {
        let now = self.clock.now();
        let mut new = self.validate_create(req, now)?;
        new.dedup = false;
        let length = new.length();
        let held = self.reserve(&new)?;
        let outcome = self.pools.create(&new);
        self.settle(held, matches!(outcome, Ok(Created::New(_))));
        match outcome {
            Ok(Created::New(link)) | Ok(Created::Existing(link)) => Ok(link),
            Err(StoreError::CodeTaken(code)) => Err(LinkError::CodeTaken(code)),
            Err(StoreError::PoolEmpty(_)) => Err(LinkError::PoolExhausted(length)),
            Err(e) => Err(e.into()),
        }
    }
}
