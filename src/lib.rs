//! vshortlink: a URL shortener in one binary with its storage embedded.
//!
//! A tour, in the order a request meets the code:
//!
//! - [`config`] loads the layered configuration (embedded `config.toml` < `--config` file <
//!   `VSL_*` environment) and validates it, naming the key of any bad value.
//! - [`codes`] is pure: the base-62 alphabet, each length's number space, reserved and blocked
//!   words, and the three generation strategies (`random` with its Bloom filter, `step`,
//!   `permute`).
//! - [`store`] is the storage interface ([`store::Store`]) and its one implementation on sled
//!   ([`store::SledStore`]): links, the active mapping that redirects read, the dedup index, one
//!   ZSet-like pool tree per length, counters. Every write is one multi-tree transaction,
//!   acknowledged after a group-committed flush. Nothing else in the crate touches sled.
//! - [`pools`] keeps every length's pool supplied: it runs the strategies, refills in the
//!   background when a pool runs low and synchronously when one is empty.
//! - [`clock`] is the single source of time, replaceable in tests.

pub mod clock;
pub mod codes;
pub mod config;
pub mod pools;
pub mod store;
