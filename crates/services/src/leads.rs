//! The leads service: what visitors leave through a link's form before the destination.
//! Checks a submission against the form, stores the lead, signs the pass that lets the same
//! browser through that link's form for 30 days, lists a link's leads (pages, CSV), and
//! enforces retention: the daily job deletes leads older than their form's retention, and
//! every lead of a link that is archived or gone.
//!
//! Leads are personal data. What is kept: the values of the form's fields as typed
//! (phone numbers normalised), the time, and the consent text the visitor ticked; not the
//! visitor's address or user agent (the visit record of the redirect keeps what
//! `visits.ip` allows, as for any visit).

use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::clock::Clock;
use crate::model::gates::{FieldProblem, DEFAULT_LEAD_RETENTION, FORM_PASS_MS};
use crate::model::StoreError;
use crate::model::{Lead, LeadForm, LeadPage, Link, LinkStatus, Millis};
use crate::store::Store;

/// The key the pass cookies are signed with, agreed through the store by every instance.
const PASS_KEY_META: &str = "form_pass_key";
/// Leads read per store call while writing CSV.
pub const CSV_PAGE: usize = 1000;

/// What went wrong with a lead.
#[derive(Debug, thiserror::Error)]
pub enum LeadError {
    /// The visitor's values, field by field (nothing was stored).
    #[error("the form has invalid values")]
    Invalid(Vec<(String, FieldProblem)>),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The leads service.
pub struct Leads {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    pass_key: Vec<u8>,
    told: std::sync::OnceLock<LeadHook>,
}

/// Told of every lead once it is stored; must not block.
pub type LeadHook = Arc<dyn Fn(&Lead) + Send + Sync>;

/// What one retention run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Leads past their form's retention.
    pub expired: u64,
    /// Leads of links archived, gone, or whose form was removed.
    pub orphaned: u64,
}

impl Leads {
    /// The service; reads (or agrees on) the pass key, so call it off the async threads.
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Result<Self, StoreError> {
        let proposed: [u8; 32] = rand::random();
        let pass_key = store.meta_init(PASS_KEY_META, &proposed)?;
        Ok(Self {
            store,
            clock,
            pass_key,
            told: std::sync::OnceLock::new(),
        })
    }

    /// Tells `hook` of every lead stored from now on (once).
    pub fn on_lead(&self, hook: LeadHook) {
        let _ = self.told.set(hook);
    }

    pub fn now(&self) -> Millis {
        self.clock.now()
    }

    /// Checks a visitor's values against the link's form and stores the lead (durably).
    /// `value` gives what was sent for a field's name.
    pub fn submit<'a>(
        &self,
        link_id: u64,
        form: &LeadForm,
        value: impl Fn(&str) -> Option<&'a str>,
        consented: bool,
    ) -> Result<Lead, LeadError> {
        let values = form.check(value, consented).map_err(LeadError::Invalid)?;
        let lead = Lead {
            id: 0,
            link_id,
            at: self.clock.now(),
            values,
            consent: form.consent.clone(),
        };
        let lead = self.store.add_lead(lead)?;
        if let Some(tell) = self.told.get() {
            tell(&lead);
        }
        Ok(lead)
    }

    /// A link's leads, newest first.
    pub fn page(
        &self,
        link_id: u64,
        before: Option<u64>,
        limit: usize,
    ) -> Result<LeadPage, StoreError> {
        self.store.leads(link_id, before, limit)
    }

    /// The columns of a link's leads: its form's fields in order, then any other name its
    /// older leads hold (a field since removed), in the order met.
    pub fn names(&self, link: &Link) -> Result<Vec<String>, StoreError> {
        let mut names: Vec<String> = link
            .options
            .as_ref()
            .and_then(|o| o.form.as_ref())
            .map(|f| f.fields.iter().map(|f| f.name.clone()).collect())
            .unwrap_or_default();
        let mut before = None;
        loop {
            let page = self.store.leads(link.id, before, CSV_PAGE)?;
            for lead in &page.leads {
                for (name, _) in &lead.values {
                    if !names.contains(name) {
                        names.push(name.clone());
                    }
                }
            }
            match page.next {
                Some(next) => before = Some(next),
                None => return Ok(names),
            }
        }
    }

    pub fn count(&self, link_id: u64) -> Result<u64, StoreError> {
        self.store.lead_count(link_id)
    }

    /// The pass cookie's name for a link.
    pub fn pass_name(link_id: u64) -> String {
        format!("vsl_form_{link_id}")
    }

    /// A pass for a link's form, good for [`FORM_PASS_MS`]: `<until>.<signature>`.
    pub fn pass(&self, link_id: u64) -> String {
        let until = self.clock.now() + FORM_PASS_MS;
        format!("{until}.{}", hex::encode(self.sign(link_id, until)))
    }

    /// Whether a pass cookie's value lets the browser through a link's form now.
    pub fn passes(&self, link_id: u64, value: &str) -> bool {
        let Some((until, signature)) = value.split_once('.') else {
            return false;
        };
        let (Ok(until), Ok(signature)) = (until.parse::<Millis>(), hex::decode(signature)) else {
            return false;
        };
        if until <= self.clock.now() || until > self.clock.now() + FORM_PASS_MS {
            return false;
        }
        self.mac(link_id, until).verify_slice(&signature).is_ok()
    }

    fn mac(&self, link_id: u64, until: Millis) -> Hmac<Sha256> {
        // Any key length is accepted by HMAC.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.pass_key)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(format!("form-pass:{link_id}:{until}").as_bytes());
        mac
    }

    fn sign(&self, link_id: u64, until: Millis) -> Vec<u8> {
        self.mac(link_id, until).finalize().into_bytes().to_vec()
    }

    /// The retention run of the daily job: for each link with leads, deletes those older than
    /// its form's retention (the default retention once the form is removed), and all of
    /// them when the link is archived or gone. Not durable on return: the job ends with a
    /// flush.
    pub fn prune(&self) -> Result<Pruned, StoreError> {
        let now = self.clock.now();
        let mut pruned = Pruned::default();
        for link_id in self.store.lead_links()? {
            let link = self
                .store
                .link_by_id(link_id)?
                .filter(|l| l.status != LinkStatus::Archived);
            match link {
                Some(link) => {
                    let retention = link
                        .options
                        .and_then(|o| o.form)
                        .map_or(DEFAULT_LEAD_RETENTION, |f| f.retention);
                    let cutoff = now.saturating_sub(retention);
                    pruned.expired += self.store.delete_leads(link_id, Some(cutoff))?;
                }
                None => pruned.orphaned += self.store.delete_leads(link_id, None)?,
            }
        }
        Ok(pruned)
    }

    /// Deletes every lead of a link (it was archived).
    pub fn forget(&self, link_id: u64) -> Result<u64, StoreError> {
        self.store.delete_leads(link_id, None)
    }
}
