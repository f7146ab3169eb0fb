//! The store (`crates/store`: the capability traits, sled and PostgreSQL), and opening the
//! configured backend ([`open`]): the one place that turns `[storage]` and `memory.budget`
//! into a store, so that nothing else above the store names sled or PostgreSQL.

pub use vshortlink_store::*;

mod open;

pub use self::open::{open, open_embedded, open_postgres, sled_options};
