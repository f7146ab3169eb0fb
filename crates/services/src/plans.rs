//! Plans and quotas per team (SPEC §25, docs/plans.md): which features a team's plan allows,
//! and how many links, active links and visits it may have. Owns the plans as configured, the
//! map from spaces to their team's plan (rebuilt whenever the accounts directory changes), the
//! usage counters' names and how each is counted from the records, and the checks the link
//! service runs — once — for every create and change, whichever way it comes in. Knows no HTTP:
//! refusals are [`Refusal`]s that name their field or quota (the link service turns them into
//! its own errors).
//!
//! Usage counters live in the store ([`crate::store::QuotaStore`]), one per team for active
//! links and one per team and UTC month for links made and for visits recorded (a new month is
//! a new counter: nothing to reset when a month turns). A counter the store does not hold is
//! counted from the records first (`Plans::ensure`) and set only if still unset, so two
//! instances counting at once agree. Creates take from the counters before they write and give
//! back what a failed or deduplicated create did not use, so concurrent creates never pass a
//! limit; deletes and ends give an active link back. Visits are taken by the visit writer, a
//! batch at a time ([`Plans::admit_visits`]): nothing here runs on the redirect path but
//! [`Plans::in_app_from`] on a cache miss.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use time::OffsetDateTime;

use crate::clock::Clock;
use crate::config::{Config, PLAN_FEATURES};
use crate::model::{Directory, Link, LinkQuery, LinkStatus, Millis, NewVisit, StoreResult};
use crate::store::Store;

/// Why a team's plan refuses a create or change (403 either way).
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The plan does not include a feature the request uses (`feature_not_in_plan`), naming
    /// the field that uses it.
    #[error("{detail}")]
    NotInPlan {
        field: Cow<'static, str>,
        detail: String,
    },
    /// Past one of the plan's limits (`quota_exceeded`): which, its limit, and how much is
    /// used (`None` for a permanent link asked past `max_ttl`).
    #[error("{detail}")]
    QuotaExceeded {
        quota: &'static str,
        limit: u64,
        used: Option<u64>,
        detail: String,
    },
    /// The usage counters could not be read or taken.
    #[error("storage failure")]
    Store(#[from] crate::model::StoreError),
}

const DAY_MS: u64 = 86_400_000;
/// Links read per page when a counter is counted from the records.
const COUNT_PAGE: usize = 1000;

/// One plan as configured, ready to be asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub name: String,
    /// Bit `i` set: [`PLAN_FEATURES`]`[i]` is allowed.
    features: u32,
    pub links_per_month: Option<u64>,
    pub active_links: Option<u64>,
    pub visits_per_month: Option<u64>,
    /// Milliseconds.
    pub max_ttl: Option<u64>,
    pub lengths: Option<Vec<u8>>,
    pub in_app_days: Option<u64>,
}

impl Plan {
    fn from_config(name: &str, c: &crate::config::PlanConfig) -> Plan {
        let features = match &c.features {
            None => u32::MAX,
            Some(list) => list
                .iter()
                .filter_map(|f| PLAN_FEATURES.iter().position(|k| k == f))
                .fold(0, |bits, i| bits | (1 << i)),
        };
        let limit = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
        Plan {
            name: name.to_string(),
            features,
            links_per_month: limit(c.links_per_month),
            active_links: limit(c.active_links),
            visits_per_month: limit(c.visits_per_month),
            max_ttl: c.max_ttl.and_then(|t| t.millis()),
            lengths: c.lengths.as_ref().map(|l| {
                l.iter()
                    .filter_map(|v| u8::try_from(*v).ok())
                    .collect::<Vec<_>>()
            }),
            in_app_days: limit(c.in_app_days),
        }
    }

    /// Whether the plan allows a feature (one of [`PLAN_FEATURES`]).
    pub fn allows(&self, feature: &str) -> bool {
        PLAN_FEATURES
            .iter()
            .position(|k| *k == feature)
            .is_some_and(|i| self.features & (1 << i) != 0)
    }

    /// The features allowed, in the config's order.
    pub fn features(&self) -> Vec<&'static str> {
        PLAN_FEATURES
            .iter()
            .copied()
            .filter(|f| self.allows(f))
            .collect()
    }

    /// `feature_not_in_plan` for `field` unless the plan allows `feature`.
    pub fn require(&self, feature: &str, field: &str) -> Result<(), Refusal> {
        if self.allows(feature) {
            return Ok(());
        }
        Err(Refusal::NotInPlan {
            field: field.to_string().into(),
            detail: format!(
                "`{field}`: the team's plan `{}` does not include the feature `{feature}`",
                self.name
            ),
        })
    }

    /// A generated code's length the plan may create.
    pub fn allows_length(&self, length: u8) -> bool {
        self.lengths.as_ref().is_none_or(|l| l.contains(&length))
    }
}

/// A space's team and that team's plan, as a create or change sees it.
#[derive(Clone, Debug)]
pub struct Bound {
    pub team: Arc<str>,
    /// `None`: the team has no plan, so no limits (its usage is still counted).
    pub plan: Option<Arc<Plan>>,
}

/// Which team owns each space, and each team's plan, as of the directory last seen.
#[derive(Default, PartialEq)]
struct Teams {
    by_space: HashMap<String, Arc<str>>,
    plans: HashMap<Arc<str>, Option<Arc<Plan>>>,
    spaces: HashMap<Arc<str>, Vec<String>>,
}

/// A team's usage and its plan's limits (`GET /api/v1/teams/{slug}`, the team's page).
#[derive(Clone, Debug, Default, serde::Serialize, utoipa::ToSchema)]
pub struct Usage {
    /// The team's plan; `null`: none, no limits.
    pub plan: Option<String>,
    /// `YYYY-MM` (UTC): the month the monthly counts are of.
    pub month: String,
    pub links_this_month: Meter,
    pub active_links: Meter,
    pub visits_this_month: Meter,
    /// The features the plan allows (every one without a plan).
    pub features: Vec<&'static str>,
    /// The plan's `max_ttl` in seconds, `in_app_days` and `lengths`, when set.
    pub max_ttl: Option<u64>,
    pub in_app_days: Option<u64>,
    pub lengths: Option<Vec<u8>>,
}

/// One quota: how much is used and the limit (`null`: none).
#[derive(Clone, Copy, Debug, Default, serde::Serialize, utoipa::ToSchema)]
pub struct Meter {
    pub used: u64,
    pub limit: Option<u64>,
}

impl Meter {
    /// Percent of the limit used (0–100), for the pages' bars; `None` without a limit.
    pub fn percent(&self) -> Option<u64> {
        self.limit.map(|l| match l {
            0 => 100,
            l => (self.used.saturating_mul(100) / l).min(100),
        })
    }
}

/// What a create took from its team's counters, given back unless the create made a link.
#[derive(Debug, Default)]
pub struct Held {
    keys: Vec<String>,
}

/// A team and a month (`YYYY-MM`): what a visits counter counts.
type TeamMonth = (Arc<str>, String);
/// Visits of a batch for one counter: how many, the plan's limit, a visit's time (its month).
type Wanted = (u64, Option<u64>, Millis);

/// The metric label of the visits a plan's limit kept from being recorded.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TeamLabel {
    pub team: String,
}

/// The plans service.
pub struct Plans {
    plans: BTreeMap<String, Arc<Plan>>,
    teams: RwLock<Arc<Teams>>,
    /// Bumped whenever a space's team or a team's plan changes: redirect cache entries made
    /// before (which carry their in-app decision) are dropped.
    generation: AtomicU64,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    /// Counters this process knows the store holds (so a take need not ask first).
    known: Mutex<HashSet<String>>,
    /// Link id → its space, for the visit writer (links never change space).
    spaces_of: quick_cache::sync::Cache<u64, Arc<str>>,
    /// Whether any plan has `in_app_days` (else a cache miss reads nothing more).
    any_in_app_days: bool,
    /// Visits not recorded because their team was past `visits_per_month`, by team.
    pub dropped: Family<TeamLabel, Counter>,
    /// Told when a space's team or a team's plan changed (the redirect cache drops what it
    /// decided by the old plans).
    on_change: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
}

/// The UTC calendar month of a time: `YYYY-MM`, and its first millisecond.
pub fn month_of(now: Millis) -> (String, Millis) {
    let t = OffsetDateTime::from_unix_timestamp_nanos(i128::from(now) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let start = t
        .replace_day(1)
        .map(|d| d.replace_time(time::Time::MIDNIGHT))
        .unwrap_or(t);
    let start_ms = u64::try_from(start.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
    (
        format!("{:04}-{:02}", t.year(), u8::from(t.month())),
        start_ms,
    )
}

fn links_key(team: &str, month: &str) -> String {
    format!("links/{team}/{month}")
}
fn active_key(team: &str) -> String {
    format!("active/{team}")
}
fn visits_key(team: &str, month: &str) -> String {
    format!("visits/{team}/{month}")
}

impl Plans {
    pub fn new(config: &Config, store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Plans {
        let plans: BTreeMap<String, Arc<Plan>> = config
            .plans
            .iter()
            .map(|(name, c)| (name.clone(), Arc::new(Plan::from_config(name, c))))
            .collect();
        Plans {
            any_in_app_days: plans.values().any(|p| p.in_app_days.is_some()),
            plans,
            teams: RwLock::new(Arc::new(Teams::default())),
            generation: AtomicU64::new(0),
            store,
            clock,
            known: Mutex::new(HashSet::new()),
            spaces_of: quick_cache::sync::Cache::new(65_536),
            dropped: Family::default(),
            on_change: std::sync::OnceLock::new(),
        }
    }

    /// Tells `hook` of every change of a space's team or a team's plan (once).
    pub fn on_change(&self, hook: Box<dyn Fn() + Send + Sync>) {
        let _ = self.on_change.set(hook);
    }

    /// A configured plan by name.
    pub fn plan(&self, name: &str) -> Option<Arc<Plan>> {
        self.plans.get(name).cloned()
    }

    /// The configured plans' names, in order.
    pub fn names(&self) -> Vec<String> {
        self.plans.keys().cloned().collect()
    }

    /// Takes in a new accounts directory; true when a space's team or a team's plan changed
    /// (then cached redirect decisions are stale: the caller drops them).
    pub fn set_directory(&self, dir: &Directory) -> bool {
        let mut teams = Teams::default();
        for team in dir.teams() {
            let slug: Arc<str> = Arc::from(team.slug.as_str());
            for space in team.all_spaces() {
                teams.by_space.insert(space.to_string(), slug.clone());
            }
            teams.spaces.insert(
                slug.clone(),
                team.all_spaces().map(str::to_string).collect(),
            );
            let plan = team.plan.as_deref().and_then(|p| self.plan(p));
            teams.plans.insert(slug, plan);
        }
        {
            let mut current = self.teams.write();
            if **current == teams {
                return false;
            }
            *current = Arc::new(teams);
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
        if let Some(hook) = self.on_change.get() {
            hook();
        }
        true
    }

    /// The generation of the space → plan map ([`Plans::set_directory`]).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The team that owns a space and its plan; `None` for a space no team owns.
    pub fn bound(&self, space: &str) -> Option<Bound> {
        let teams = self.teams.read();
        let team = teams.by_space.get(space)?.clone();
        let plan = teams.plans.get(&team).cloned().flatten();
        Some(Bound { team, plan })
    }

    /// `feature_not_in_plan` for `field` unless the plan of the team that owns `space` (if
    /// any) allows `feature`: for what is asked of a link that exists (its exports).
    pub fn require_in(&self, space: &str, feature: &str, field: &str) -> Result<(), Refusal> {
        match self.bound(space).and_then(|b| b.plan) {
            Some(plan) => plan.require(feature, field),
            None => Ok(()),
        }
    }

    /// Whether any team exists (else creates and visits skip every plan check).
    pub fn any_team(&self) -> bool {
        !self.teams.read().plans.is_empty()
    }

    /// From when a visitor in an in-app browser gets the in-app page for a link of `space`
    /// made at `created_at` (its team's plan's `in_app_days`); `None`: never by plan.
    pub fn in_app_from(&self, space: &str, created_at: Millis) -> Option<Millis> {
        let days = self.bound(space)?.plan?.in_app_days?;
        Some(created_at.saturating_add(days.saturating_mul(DAY_MS)))
    }

    /// Whether any plan sets `in_app_days` and some team exists: only then does a redirect
    /// cache miss need its link's space and age.
    pub fn decides_in_app(&self) -> bool {
        self.any_in_app_days && self.any_team()
    }

    /// Makes sure the store holds counter `key`, counting it from the records if not.
    fn ensure(&self, key: &str, count: impl FnOnce() -> StoreResult<u64>) -> StoreResult<()> {
        if self.known.lock().contains(key) {
            return Ok(());
        }
        if self.store.quota_get(key)?.is_none() {
            let counted = count()?;
            self.store.quota_init(key, counted)?;
        }
        self.known.lock().insert(key.to_string());
        Ok(())
    }

    /// The spaces of a team as of now.
    fn spaces(&self, team: &str) -> Vec<String> {
        self.teams
            .read()
            .spaces
            .get(team)
            .cloned()
            .unwrap_or_default()
    }

    /// Calls `each` with every link of the team's spaces (of `status`, if given), page by
    /// page from the store.
    fn each_link(
        &self,
        team: &str,
        status: Option<LinkStatus>,
        mut each: impl FnMut(&Link) -> StoreResult<()>,
    ) -> StoreResult<()> {
        for space in self.spaces(team) {
            let mut after = None;
            loop {
                let page = self.store.list_links(&LinkQuery {
                    space: Some(space.clone()),
                    status,
                    after,
                    limit: COUNT_PAGE,
                    ..LinkQuery::default()
                })?;
                for link in &page.items {
                    each(link)?;
                }
                match page.next {
                    Some(next) if !page.items.is_empty() => after = Some(next),
                    _ => break,
                }
            }
        }
        Ok(())
    }

    /// Counts a team's links from the store: those `keep` says yes to.
    fn count_links(
        &self,
        team: &str,
        status: Option<LinkStatus>,
        keep: impl Fn(&Link) -> bool,
    ) -> StoreResult<u64> {
        let mut total = 0;
        self.each_link(team, status, |link| {
            total += u64::from(keep(link));
            Ok(())
        })?;
        Ok(total)
    }

    fn ensure_links(&self, team: &str, now: Millis) -> StoreResult<String> {
        let (month, start) = month_of(now);
        let key = links_key(team, &month);
        self.ensure(&key, || {
            self.count_links(team, None, |l| l.created_at >= start)
        })?;
        Ok(key)
    }

    fn ensure_active(&self, team: &str) -> StoreResult<String> {
        let key = active_key(team);
        self.ensure(&key, || {
            self.count_links(team, Some(LinkStatus::Active), |_| true)
        })?;
        Ok(key)
    }

    /// Visits are counted from the moment a counter exists: the records hold no per-team
    /// count, so a month's counter that is missing (a first use, a restart on sled) starts
    /// from the links' visits of that month as the day counters tell them.
    fn ensure_visits(&self, team: &str, now: Millis) -> StoreResult<String> {
        let (month, start) = month_of(now);
        let key = visits_key(team, &month);
        self.ensure(&key, || {
            let mut total = 0;
            self.each_link(team, None, |link| {
                let summary = self.store.visit_summary(link.id, start, now + 1)?;
                total += summary.hours.iter().map(|h| h.visits).sum::<u64>();
                Ok(())
            })?;
            Ok(total)
        })?;
        Ok(key)
    }

    /// Takes one link made this month and one active link from the team's counters, against
    /// its plan's limits: `quota_exceeded` (nothing taken) past either.
    pub fn take_link(&self, bound: &Bound, now: Millis) -> Result<Held, Refusal> {
        let plan = bound.plan.as_deref();
        let mut held = Held::default();
        let links = self.ensure_links(&bound.team, now)?;
        let active = self.ensure_active(&bound.team)?;
        for (key, quota, limit) in [
            (
                links,
                "links_per_month",
                plan.and_then(|p| p.links_per_month),
            ),
            (active, "active_links", plan.and_then(|p| p.active_links)),
        ] {
            let taken = self
                .store
                .quota_take(&key, 1, limit.unwrap_or(u64::MAX), false);
            match taken {
                Ok(t) if t.granted == 1 => held.keys.push(key),
                Ok(t) => {
                    self.give_back(held);
                    let limit = limit.unwrap_or(u64::MAX);
                    return Err(Refusal::QuotaExceeded {
                        quota,
                        limit,
                        used: Some(t.used),
                        detail: format!(
                            "the team's plan `{}` allows {limit} {}; {} used",
                            plan.map_or("", |p| p.name.as_str()),
                            match quota {
                                "links_per_month" => "links a month",
                                _ => "active links",
                            },
                            t.used
                        ),
                    });
                }
                Err(e) => {
                    self.give_back(held);
                    return Err(e.into());
                }
            }
        }
        Ok(held)
    }

    /// Gives back what a create took and did not use.
    pub fn give_back(&self, held: Held) {
        for key in held.keys {
            if let Err(e) = self.store.quota_release(&key, 1) {
                tracing::warn!(key, "a quota counter was not given back: {e}");
            }
        }
    }

    /// A link of a team's space left the active ones (deleted, expired, its cap reached).
    pub fn link_ended(&self, link: &Link) {
        let Some(bound) = self.bound(&link.space) else {
            return;
        };
        if let Err(e) = self.store.quota_release(&active_key(&bound.team), 1) {
            tracing::warn!(team = %bound.team, "the active links counter was not lowered: {e}");
        }
    }

    /// A link written whole by an import, counted like a create: `quota_exceeded` past a
    /// limit (nothing taken). Only links made this month count toward `links_per_month`, and
    /// only active ones toward `active_links`.
    pub fn take_imported(&self, bound: &Bound, link: &Link, now: Millis) -> Result<Held, Refusal> {
        let plan = bound.plan.as_deref();
        let mut held = Held::default();
        let (_, start) = month_of(now);
        let mut wanted = Vec::new();
        if link.created_at >= start {
            wanted.push((
                self.ensure_links(&bound.team, now)?,
                "links_per_month",
                plan.and_then(|p| p.links_per_month),
            ));
        }
        if link.status == LinkStatus::Active {
            wanted.push((
                self.ensure_active(&bound.team)?,
                "active_links",
                plan.and_then(|p| p.active_links),
            ));
        }
        for (key, quota, limit) in wanted {
            let limit = limit.unwrap_or(u64::MAX);
            let taken = self.store.quota_take(&key, 1, limit, false)?;
            if taken.granted == 0 {
                self.give_back(held);
                return Err(Refusal::QuotaExceeded {
                    quota,
                    limit,
                    used: Some(taken.used),
                    detail: format!(
                        "the team's plan allows {limit} ({quota}); {} used",
                        taken.used
                    ),
                });
            }
            held.keys.push(key);
        }
        Ok(held)
    }

    /// A team's usage with its plan's limits.
    pub fn usage(&self, team: &str) -> StoreResult<Usage> {
        let now = self.clock.now();
        let plan = self.teams.read().plans.get(team).cloned().flatten();
        let links = self.ensure_links(team, now)?;
        let active = self.ensure_active(team)?;
        let visits = self.ensure_visits(team, now)?;
        let get = |key: &str| -> StoreResult<u64> { Ok(self.store.quota_get(key)?.unwrap_or(0)) };
        let p = plan.as_deref();
        Ok(Usage {
            plan: p.map(|p| p.name.clone()),
            month: month_of(now).0,
            links_this_month: Meter {
                used: get(&links)?,
                limit: p.and_then(|p| p.links_per_month),
            },
            active_links: Meter {
                used: get(&active)?,
                limit: p.and_then(|p| p.active_links),
            },
            visits_this_month: Meter {
                used: get(&visits)?,
                limit: p.and_then(|p| p.visits_per_month),
            },
            features: p.map_or_else(|| PLAN_FEATURES.to_vec(), |p| p.features()),
            max_ttl: p.and_then(|p| p.max_ttl).map(|ms| ms / 1000),
            in_app_days: p.and_then(|p| p.in_app_days),
            lengths: p.and_then(|p| p.lengths.clone()),
        })
    }

    /// The space of a visited link (read once per link, then remembered).
    fn space_of(&self, link_id: u64) -> StoreResult<Option<Arc<str>>> {
        if let Some(space) = self.spaces_of.get(&link_id) {
            return Ok(Some(space));
        }
        let Some(link) = self.store.link_by_id(link_id)? else {
            return Ok(None);
        };
        let space: Arc<str> = Arc::from(link.space.as_str());
        self.spaces_of.insert(link_id, space.clone());
        Ok(Some(space))
    }

    /// Counts a batch of visits against each team's `visits_per_month`, before the writer
    /// records it: a team past its limit keeps only what fits (the rest are dropped, counted
    /// in `dropped`). Returns what was taken, to give back if the write then fails. A store
    /// error lets the whole batch through uncounted (recording a visit beats losing one).
    pub fn admit_visits(&self, visits: &mut Vec<NewVisit>) -> Vec<(String, u64)> {
        if visits.is_empty() || !self.any_team() {
            return Vec::new();
        }
        // Each visit's team, in order; then how many each team's counter takes.
        let mut team_of: Vec<Option<(Arc<str>, Millis)>> = Vec::with_capacity(visits.len());
        let mut wanted: HashMap<TeamMonth, Wanted> = HashMap::new();
        for v in visits.iter() {
            let team = match self.space_of(v.visit.link_id) {
                Ok(Some(space)) => self.bound(&space),
                Ok(None) => None,
                Err(e) => {
                    tracing::warn!("visits counted without their team's plan: {e}");
                    return Vec::new();
                }
            };
            let Some(bound) = team else {
                team_of.push(None);
                continue;
            };
            let (month, _) = month_of(v.visit.at);
            let entry = wanted.entry((bound.team.clone(), month)).or_insert((
                0,
                bound.plan.as_ref().and_then(|p| p.visits_per_month),
                v.visit.at,
            ));
            entry.0 += 1;
            team_of.push(Some((bound.team, v.visit.at)));
        }
        let mut taken = Vec::new();
        let mut allowed: HashMap<TeamMonth, u64> = HashMap::new();
        for ((team, month), (want, limit, at)) in wanted {
            let key = match self.ensure_visits(&team, at) {
                Ok(key) => key,
                Err(e) => {
                    tracing::warn!(%team, "visits counted without their team's plan: {e}");
                    continue;
                }
            };
            match self
                .store
                .quota_take(&key, want, limit.unwrap_or(u64::MAX), true)
            {
                Ok(t) => {
                    if t.granted > 0 {
                        taken.push((key, t.granted));
                    }
                    if t.granted < want {
                        self.dropped
                            .get_or_create(&TeamLabel {
                                team: team.to_string(),
                            })
                            .inc_by(want - t.granted);
                    }
                    allowed.insert((team, month), t.granted);
                }
                Err(e) => tracing::warn!(%team, "visits counted without their team's plan: {e}"),
            }
        }
        let mut index = 0;
        visits.retain(|_| {
            let keep = match &team_of[index] {
                None => true,
                Some((team, at)) => {
                    match allowed.get_mut(&(team.clone(), month_of(*at).0)) {
                        // Not counted (a store error): recorded.
                        None => true,
                        Some(0) => false,
                        Some(left) => {
                            *left -= 1;
                            true
                        }
                    }
                }
            };
            index += 1;
            keep
        });
        taken
    }

    /// Gives back what [`Plans::admit_visits`] took for a batch the store then refused (the
    /// writer retries it from the journal, and it is counted again).
    pub fn visits_not_written(&self, taken: Vec<(String, u64)>) {
        for (key, n) in taken {
            if let Err(e) = self.store.quota_release(&key, n) {
                tracing::warn!(key, "a visits counter was not given back: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_are_utc_calendar_months() {
        // 2026-03-31T23:59:59.999Z and a millisecond later.
        let end = 1_775_001_599_999;
        assert_eq!(month_of(end).0, "2026-03");
        assert_eq!(month_of(end + 1).0, "2026-04");
        assert_eq!(month_of(end + 1).1, end + 1);
    }

    #[test]
    fn a_plan_allows_what_it_lists() {
        let c = crate::config::PlanConfig {
            features: Some(vec!["password".into(), "rules".into()]),
            ..Default::default()
        };
        let plan = Plan::from_config("free", &c);
        assert!(plan.allows("password") && plan.allows("rules"));
        assert!(!plan.allows("targets"));
        assert!(plan.require("form", "form").is_err());
        let all = Plan::from_config("all", &crate::config::PlanConfig::default());
        assert_eq!(all.features().len(), PLAN_FEATURES.len());
    }
}
