//! The store (`crates/store`: the capability traits, sled and PostgreSQL), and opening the
//! configured backend ([`open`]): the one place that turns `[storage]` and `memory.budget`
//! into a store, so that nothing else above the store names sled or PostgreSQL.

pub use vshortlink_store::*;

mod open;

#[cfg(feature = "postgres")]
pub use self::open::open_postgres;
pub use self::open::{open, open_embedded, sled_options};
