//! The server's health as a service, for `/healthz` and `/metrics` (handlers never reach the
//! store): whether the store answers and can write, and the Prometheus text of the counters,
//! pool levels and queue depths. Decides what "healthy" means, once.

use std::sync::Arc;

use crate::metrics::Metrics;
use crate::model::StoreResult;
use crate::pools::Pools;
use crate::store::Store;
use crate::visits::Recorder;

/// What `/healthz` reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HealthStatus {
    Ok,
    /// The store cannot write (`storage_full`, `storage_unavailable`), the visit journal cannot
    /// (`visit_journal_full`: redirects go on, their visits are dropped and counted), or the
    /// store does not answer (`None`). A store that still reads but cannot write is not healthy: orchestrators and
    /// the Docker healthcheck must see it.
    Unavailable(Option<&'static str>),
}

pub struct Health {
    store: Arc<dyn Store>,
    pools: Arc<Pools>,
    recorder: Arc<Recorder>,
    metrics: Arc<Metrics>,
}

impl Health {
    pub fn new(
        store: Arc<dyn Store>,
        pools: Arc<Pools>,
        recorder: Arc<Recorder>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            store,
            pools,
            recorder,
            metrics,
        }
    }

    /// A write fault first, the visit journal's, then a read of the store.
    pub fn check(&self) -> HealthStatus {
        if let Some(fault) = self.store.write_fault() {
            return HealthStatus::Unavailable(Some(fault.reason));
        }
        if self.recorder.journal_failing() {
            return HealthStatus::Unavailable(Some("visit_journal_full"));
        }
        match self.store.ping() {
            Ok(()) => HealthStatus::Ok,
            Err(e) => {
                tracing::error!(error = %e, "health check failed");
                HealthStatus::Unavailable(None)
            }
        }
    }

    /// The Prometheus text of `/metrics` (blocking: it reads the store's counters).
    pub fn metrics_text(&self) -> StoreResult<String> {
        self.metrics
            .render(&*self.store, &self.pools, &self.recorder)
    }
}
