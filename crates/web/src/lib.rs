//! vshortlink's web: everything that speaks HTTP, above the services (`vshortlink-services`)
//! and below the wiring and the binary (the root crate), which builds it over a store.
//!
//! - [`http`]: the first stop (`GET /{code}` before the router), the accept loop, `/{code}`
//!   and the pages before the destination, `/api/v1`, `/rest/v3` (Shlink's API) and
//!   `/yourls-api.php` (YOURLS's), over the same services; handlers are thin.
//! - [`ui`]: the web pages, in English and Simplified Chinese, rendered on the server from
//!   embedded templates, working without script.
//! - [`web`]: what [`http`] and [`ui`] share, below both: the state handlers reach, the one
//!   place that maps errors to statuses, the caller and its rights, CSV and QR responses.

#![forbid(unsafe_code)]

pub mod http;
pub mod ui;
pub mod web;

// The layers below, under the names the handlers use.
pub(crate) use vshortlink_model as model;
pub(crate) use vshortlink_services::{
    accounts, backup, clock, config, csv_safe, domains, health, jobs, keys, leads, limits, links,
    metrics, plans, pools, qr, records, review, visits, webhooks,
};
