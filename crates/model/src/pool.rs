//! A pool's levels, as the pools service and its API show them.

use serde::Serialize;

/// A pool's levels at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PoolCounts {
    /// Codes whose score is due: a create can take them now.
    pub available: u64,
    /// Recycled codes still waiting out their cooldown.
    pub cooling: u64,
    /// Codes ever added by generation (not recycling).
    pub generated_total: u64,
    /// Codes ever returned to the pool by recycling.
    pub recycled_total: u64,
}
