//! vshortlink's services: the rules, once, and what they are configured with. Above the store
//! (`vshortlink-store`) and the pure layers (`vshortlink-codes`, `vshortlink-model`); below the
//! web (HTTP, pages) and the binary, which name nothing here but through these modules. Nothing
//! here knows HTTP: errors carry a code and the field they are about, and the web maps them to
//! statuses.
//!
//! - [`config`] is the layered configuration (embedded `config.toml` < `--config` file <
//!   `VSL_*` environment), validated, naming the key of any bad value; [`memory`] derives every
//!   cache's, queue's and buffer's bound from `memory.budget`.
//! - [`links`] is the link service, the one home of business rules: URL checks, tiers and
//!   default validity, custom codes, dedup, the read-through [`links::cache`], invalidation, the
//!   redirect's decision (options, rules, rotation, caps, passwords).
//! - [`pools`] keeps every length's pool supplied: it runs the strategies, refills in the
//!   background when a pool runs low and synchronously when one is empty.
//! - [`visits`] is the visit queue and writer, user agents, client addresses, geolocation and
//!   the statistics service.
//! - [`leads`] (forms before the destination), [`review`] (the review of destinations, its
//!   checks and its browser proxy), [`webhooks`] (the outbox and its sender).
//! - [`backup`] streams backups of the running store, writes the scheduled ones, and checks a
//!   backup file whole (the one writer and reader of the export format).
//! - [`tls`] is HTTPS built in: the certificate files watched, or certificates ordered and
//!   renewed by ACME and kept in the store; the hosts to hold them for; what each handshake is
//!   served with (the web's accept loop does the handshakes).
//! - [`jobs`] runs the daily lifecycle job (expiry, recycling, pruning) on its cron schedule.
//! - [`plans`] holds the plans teams are on and their usage counters: the features and
//!   quotas every create and change is checked against (SPEC §25).
//! - [`keys`] is the API key ring; [`limits`] enforces `limits.rates` (governor);
//!   [`blocklist`] holds the blocked hosts.
//! - [`health`] and [`metrics`] are `/healthz` and `/metrics` as services; [`records`] keeps
//!   the pages' records a while (sessions, batch results).
//! - [`qr`] draws QR codes and [`csv_safe`] writes every CSV the product makes; [`clock`] is
//!   the single source of time, replaceable in tests.

// `unsafe` only where a file is mapped: `visits/segment.rs`, which allows it for itself.
#![deny(unsafe_code)]

pub mod accounts;
pub mod backup;
pub mod blocklist;
pub mod clock;
pub mod config;
pub mod csv_safe;
pub mod health;
pub mod jobs;
pub mod keys;
pub mod leads;
pub mod limits;
pub mod links;
/// The domains service lives with the link service, which alone reads it on the redirect path.
pub use links::domains;
pub mod memory;
pub mod metrics;
pub mod passwords;
pub mod plans;
pub mod pools;
pub mod qr;
pub mod records;
pub mod review;
pub mod tls;
pub mod visits;
pub mod webhooks;

// The layers below, under the names the services use.
pub(crate) use vshortlink_codes as codes;
pub(crate) use vshortlink_model as model;
pub(crate) use vshortlink_store as store;

/// Any error, sent across threads: what start-up and the commands report.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
