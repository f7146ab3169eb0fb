//! The redirect of a link that has options, rules or targets: which destination a visitor
//! gets, whether the password is right, whether a cap lets the redirect through, and the end
//! of a link whose caps are full.
//!
//! Decided in memory from the cached entry's [`LinkState`] (the options as stored, plus what
//! this instance has learnt: the round-robin turn, which caps are full, the password last
//! found right). The request is parsed once, and only for what the rules read. The one store
//! call is the durable count of a capped redirect ([`Store::claim_visit`]); a plain link
//! never comes here.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{LinkError, Links, Result};
use crate::model::options::{
    accepted_languages, pick_target, App, DeviceClass, Os, Rotation, Visitor,
};
use crate::model::StoreError;
use crate::model::{CapSlot, ClaimOutcome, EndedBy, LinkOptions, LinkPatch, Route, VisitClaim};
use crate::visits::ua::Device;

/// A link's options and what this instance knows of them, shared by every cache entry of
/// the link (and kept across cache refills while the options stay the same).
#[derive(Debug)]
pub struct LinkState {
    pub id: u64,
    pub code: Box<str>,
    /// The default destination.
    pub url: Arc<str>,
    pub options: LinkOptions,
    /// Destination URLs as shared strings: the rules', then the targets'.
    rule_urls: Box<[Arc<str>]>,
    target_urls: Box<[Arc<str>]>,
    /// The round-robin counter.
    turn: AtomicU64,
    /// Slots known to be at their cap: 0 the link, n + 1 target n. Only ever set by a store
    /// refusal (or the counts read when the state was made), so a set flag is true.
    full: Box<[AtomicBool]>,
    /// The link's end has been asked for.
    ending: AtomicBool,
    /// SHA-256 of the password last verified right: the same password again is checked in
    /// constant time without Argon2.
    verified: Mutex<Option<[u8; 32]>>,
}

impl LinkState {
    pub fn new(
        id: u64,
        code: &str,
        url: Arc<str>,
        options: LinkOptions,
        counted: &[(CapSlot, u64)],
    ) -> Self {
        let full: Box<[AtomicBool]> = (0..=options.targets.len())
            .map(|_| AtomicBool::new(false))
            .collect();
        for &(slot, used) in counted {
            if options.cap(slot).is_some_and(|cap| used >= cap) {
                if let Some(flag) = full.get(slot.stored() as usize) {
                    flag.store(true, Ordering::Relaxed);
                }
            }
        }
        Self {
            id,
            code: code.into(),
            rule_urls: options
                .rules
                .iter()
                .map(|r| Arc::from(r.url.as_str()))
                .collect(),
            target_urls: options
                .targets
                .iter()
                .map(|t| Arc::from(t.url.as_str()))
                .collect(),
            url,
            options,
            turn: AtomicU64::new(0),
            full,
            ending: AtomicBool::new(false),
            verified: Mutex::new(None),
        }
    }

    /// What the state holds, estimated for the redirect cache's weight: the struct, its
    /// strings (the rules' and targets' URLs twice: in the options and shared), a fixed
    /// allowance for the rest of the options (a form, a preview, the conditions of rules).
    pub fn estimated_bytes(&self) -> usize {
        const OPTIONS_EXTRA: usize = 128;
        let o = &self.options;
        let rules: usize = o
            .rules
            .iter()
            .map(|r| std::mem::size_of_val(r) + 2 * r.url.len() + 16)
            .sum();
        let targets: usize = o
            .targets
            .iter()
            .map(|t| std::mem::size_of_val(t) + 2 * t.url.len() + 16)
            .sum();
        std::mem::size_of::<Self>()
            + self.code.len()
            + self.url.len()
            + o.password.as_ref().map_or(0, String::len)
            + o.fallback_url.as_ref().map_or(0, String::len)
            + rules
            + targets
            + self.full.len()
            + OPTIONS_EXTRA
    }

    /// Whether this state still describes a link as stored.
    pub fn describes(&self, url: &str, options: &LinkOptions) -> bool {
        &*self.url == url && &self.options == options
    }

    /// Before `valid_from`: the code answers as unknown.
    pub fn not_yet(&self, now: crate::model::Millis) -> bool {
        self.options.valid_from.is_some_and(|from| now < from)
    }

    /// Whether its visits say which destination served them: a link with rules or targets.
    pub fn records_routes(&self) -> bool {
        !self.options.rules.is_empty() || !self.options.targets.is_empty()
    }

    pub fn protected(&self) -> bool {
        self.options.password.is_some()
    }

    /// Known to have ended on this instance (its cap reached).
    pub fn ended(&self) -> bool {
        self.is_full(CapSlot::Link)
            || (!self.options.targets.is_empty()
                && (0..self.options.targets.len()).all(|i| self.is_full(CapSlot::target(i))))
    }

    fn is_full(&self, slot: CapSlot) -> bool {
        self.full
            .get(slot.stored() as usize)
            .is_some_and(|f| f.load(Ordering::Relaxed))
    }

    fn mark_full(&self, slot: CapSlot) {
        if let Some(flag) = self.full.get(slot.stored() as usize) {
            flag.store(true, Ordering::Relaxed);
        }
    }

    fn url_of(&self, route: Route) -> Arc<str> {
        let found = match route {
            Route::Default | Route::InAppPage | Route::CrawlerPreview => None,
            Route::Rule(n) => self.rule_urls.get(usize::from(n)),
            Route::Target(n) => self.target_urls.get(usize::from(n)),
        };
        found.cloned().unwrap_or_else(|| self.url.clone())
    }
}

/// What a redirect knows of its request, as text.
#[derive(Clone, Copy, Debug)]
pub struct RequestFacts<'a> {
    pub ip: IpAddr,
    pub user_agent: &'a str,
    pub accept_language: &'a str,
    /// The query string without `?`.
    pub raw_query: &'a str,
}

/// What [`Links::choose`] decided in memory.
#[derive(Debug)]
pub enum Choice {
    /// The answer, with nothing to count.
    Done(Routed),
    /// This route, once the redirect is counted against these caps ([`Links::count`]).
    Count(Pending, Route, Vec<(CapSlot, u64)>),
}

impl Choice {
    /// What this choice answers when nothing may be counted (a `HEAD`, which answers what a
    /// `GET` would): the route picked, no cap slot claimed, so a mail scanner's probe never
    /// uses up a one-time link.
    pub fn uncounted(self, state: &LinkState) -> Routed {
        match self {
            Choice::Done(routed) => routed,
            Choice::Count(_, route, _) => Routed::Go {
                url: state.url_of(route),
                route,
            },
        }
    }
}

/// What a pick needs again after a target turned out full.
#[derive(Clone, Copy, Debug)]
pub struct Pending {
    rule: Option<usize>,
    /// The visitor's hash, for a sticky weighted pick.
    visitor: u64,
}

/// A visitor's 64-bit hash for weighted stickiness: of the address and the user agent, as
/// `client_id` is (so one `client_id` keeps one target), with a fixed key (SipHash-1-3: far
/// cheaper than the SHA-1 of `client_id`, and stable across restarts and instances).
fn visitor_hash(ip: IpAddr, user_agent: &str) -> u64 {
    use std::hash::Hasher;
    let mut h =
        siphasher::sip::SipHasher13::new_with_keys(0x7673_6c5f_726f_7461, 0x7469_6f6e_5f76_3031);
    match ip {
        IpAddr::V4(v4) => h.write(&v4.octets()),
        IpAddr::V6(v6) => h.write(&v6.octets()),
    }
    h.write(user_agent.as_bytes());
    h.finish()
}

/// What a visitor's password does to a protected link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unlock {
    Right,
    Wrong,
    /// Every Argon2 run the budget allows is busy: try again in a second.
    Busy,
}

/// Where a redirect of a link with options goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Routed {
    /// Redirect there; the visit records the route.
    Go { url: Arc<str>, route: Route },
    /// The link has ended (its caps are full): the fallback, or 410.
    Ended { fallback: Option<Arc<str>> },
}

impl Links {
    /// Whether `password` opens the link. A password found right once is remembered (as a
    /// SHA-256, compared in constant time); any other runs Argon2 on a blocking thread, at most
    /// `memory.budget`'s `password_checks` at once: a check that finds none free within
    /// `passwords::PASSWORD_CHECK_WAIT` (1 s) is `Unlock::Busy` (429), so wrong passwords from many
    /// sources cost waiting requests, never another 19 MiB each.
    pub async fn unlock(&self, state: &Arc<LinkState>, password: &str) -> Unlock {
        let Some(hash) = state.options.password.clone() else {
            return Unlock::Right;
        };
        let digest: [u8; 32] = Sha256::digest(password.as_bytes()).into();
        if let Some(known) = *state.verified.lock() {
            if bool::from(known.ct_eq(&digest)) {
                return Unlock::Right;
            }
        }
        let right = match self
            .password_checks
            .verify(hash.to_string(), password.to_string())
            .await
        {
            crate::passwords::Check::Right => true,
            crate::passwords::Check::Wrong => false,
            crate::passwords::Check::Busy => return Unlock::Busy,
        };
        if right {
            *state.verified.lock() = Some(digest);
            Unlock::Right
        } else {
            Unlock::Wrong
        }
    }

    /// The destination for this request, decided in memory: the first rule that holds, else a
    /// target by the rotation, else the link's URL. A redirect that must be counted against a
    /// cap comes back as [`Choice::Count`], for [`Links::count`].
    pub fn choose(self: &Arc<Self>, state: &Arc<LinkState>, request: RequestFacts<'_>) -> Choice {
        if state.ended() {
            return Choice::Done(self.ended(state));
        }
        let options = &state.options;
        let rule = if options.rules.is_empty() {
            None
        } else {
            self.matching_rule(options, &request, self.clock.now())
        };
        let visitor = if rule.is_none()
            && options.targets.len() > 1
            && options.rotation == Rotation::Weighted
        {
            visitor_hash(request.ip, request.user_agent)
        } else {
            0
        };
        let pending = Pending { rule, visitor };
        match self.pick(state, &pending) {
            Some((route, slots)) if slots.is_empty() => Choice::Done(Routed::Go {
                url: state.url_of(route),
                route,
            }),
            Some((route, slots)) => Choice::Count(pending, route, slots),
            None => Choice::Done(self.end(state)),
        }
    }

    /// Counts a capped redirect durably, then answers it. A target found full is marked and
    /// the next pick tried; the link's own cap full (or every target's) ends the link.
    pub async fn count(
        self: &Arc<Self>,
        state: &Arc<LinkState>,
        pending: Pending,
        mut route: Route,
        mut slots: Vec<(CapSlot, u64)>,
    ) -> Result<Routed> {
        // Each pass either answers or marks one more slot full, so this ends.
        for _ in 0..=state.options.targets.len() + 1 {
            if !slots.is_empty() {
                match self.claim(state.id, std::mem::take(&mut slots)).await? {
                    ClaimOutcome::Granted => {}
                    ClaimOutcome::Full(CapSlot::Link) => {
                        state.mark_full(CapSlot::Link);
                        return Ok(self.end(state));
                    }
                    ClaimOutcome::Full(slot) => {
                        state.mark_full(slot);
                        match self.pick(state, &pending) {
                            Some(next) => (route, slots) = next,
                            None => return Ok(self.end(state)),
                        }
                        continue;
                    }
                }
            }
            return Ok(Routed::Go {
                url: state.url_of(route),
                route,
            });
        }
        Ok(self.end(state))
    }

    /// One pick: the route, and the caps it must be counted against (none: answer at once).
    /// `None` when every target is full.
    fn pick(&self, state: &LinkState, pending: &Pending) -> Option<(Route, Vec<(CapSlot, u64)>)> {
        let options = &state.options;
        let route = match pending.rule {
            Some(i) => Route::Rule(u16::try_from(i).unwrap_or(u16::MAX)),
            None if options.targets.is_empty() => Route::Default,
            None => {
                let turn = state.turn.fetch_add(1, Ordering::Relaxed);
                let i = pick_target(
                    options.rotation,
                    &options.targets,
                    |i| !state.is_full(CapSlot::target(i)),
                    turn,
                    pending.visitor,
                )?;
                Route::Target(u16::try_from(i).unwrap_or(u16::MAX))
            }
        };
        let target = match route {
            Route::Target(n) => Some(CapSlot::Target(n)),
            Route::Default | Route::Rule(_) | Route::InAppPage | Route::CrawlerPreview => None,
        };
        let slots = std::iter::once(CapSlot::Link)
            .chain(target)
            .filter_map(|slot| Some((slot, options.cap(slot)?)))
            .collect();
        Some((route, slots))
    }

    fn matching_rule(
        &self,
        options: &LinkOptions,
        request: &RequestFacts<'_>,
        now: u64,
    ) -> Option<usize> {
        let needs = options.needs();
        let (mut device, mut os, mut app) = (None, None, None);
        if needs.agent {
            let agent = self.agents.parse(request.user_agent);
            device = match agent.device {
                Device::Desktop => Some(DeviceClass::Desktop),
                Device::Mobile => Some(DeviceClass::Mobile),
                Device::Tablet => Some(DeviceClass::Tablet),
                Device::Bot => Some(DeviceClass::Bot),
                Device::Other => None,
            };
            os = Os::of_user_agent(request.user_agent);
            app = App::of_user_agent(request.user_agent);
        }
        let languages = if needs.language {
            accepted_languages(request.accept_language)
        } else {
            Vec::new()
        };
        let country = if needs.country {
            self.geo
                .get()
                .and_then(|geo| geo.lookup(request.ip).country)
        } else {
            None
        };
        options.matching_rule(&Visitor {
            device,
            os,
            app,
            languages: &languages,
            country: country.as_deref(),
            ip: request.ip,
            raw_query: request.raw_query,
            now,
        })
    }

    /// Counts a capped redirect, waiting (without a thread) for the store's durable answer.
    async fn claim(&self, link_id: u64, slots: Vec<(CapSlot, u64)>) -> Result<ClaimOutcome> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        self.store.claim_visit(
            VisitClaim { link_id, slots },
            Box::new(move |outcome| {
                let _ = answer.send(outcome);
            }),
        );
        answered
            .await
            .map_err(|_| {
                LinkError::Store(StoreError::Backend("the visit count was dropped".into()))
            })?
            .map_err(LinkError::Store)
    }

    /// The answer for an ended link: its fallback, or none (410).
    fn ended(&self, state: &LinkState) -> Routed {
        Routed::Ended {
            fallback: state.options.fallback_url.as_deref().map(Arc::from),
        }
    }

    /// Ends a link whose caps are full, once per state, off the redirect's way: the record
    /// says `expired` with `ended_by: max_visits`, and it recycles like an expired link.
    fn end(self: &Arc<Self>, state: &Arc<LinkState>) -> Routed {
        if !state.ending.swap(true, Ordering::AcqRel) {
            let (links, code, id) = (self.clone(), state.code.to_string(), state.id);
            tokio::task::spawn_blocking(move || {
                let (store, now) = (&links.store, links.clock.now());
                let patch = LinkPatch {
                    end: Some(EndedBy::MaxVisits),
                    ..LinkPatch::default()
                };
                match store.update_link(&code, &patch, now) {
                    Ok(_) | Err(StoreError::WrongStatus(_)) => {}
                    Err(e) => tracing::warn!(code, error = %e, "could not end a link at its cap"),
                }
                match store.expire_link(id, now) {
                    Ok(Some(link)) => links.tell_change(super::LinkChange::Ended, &link),
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(code, error = %e, "could not mark a link ended at its cap")
                    }
                }
                links.invalidate(&code);
            });
        }
        self.ended(state)
    }
}
