//! Background jobs: the cron scheduler that runs the daily [`lifecycle`] job, and the periodic
//! checkpoint of in-memory store state. Pool refills run in the pools' own worker thread.

pub mod lifecycle;

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_cron_scheduler::{Job, JobScheduler};

use self::lifecycle::Lifecycle;
use crate::store::Store;

/// How often the code filter is saved (a crash in between costs a rebuild at next start).
const CHECKPOINT_EVERY: Duration = Duration::from_secs(60);

/// The running jobs; [`Jobs::stop`] ends them.
pub struct Jobs {
    scheduler: JobScheduler,
    checkpoints: JoinHandle<()>,
}

impl Jobs {
    /// Schedules the lifecycle job on `schedule` (6-field cron, UTC) and starts checkpoints.
    pub async fn start(
        schedule: &str,
        lifecycle: Arc<Lifecycle>,
        store: Arc<dyn Store>,
    ) -> Result<Self, crate::BoxError> {
        let scheduler = JobScheduler::new().await?;
        let job = Job::new_async(schedule, move |_id, _scheduler| {
            let lifecycle = lifecycle.clone();
            Box::pin(async move {
                match tokio::task::spawn_blocking(move || lifecycle.run()).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => tracing::error!(error = %e, "scheduled maintenance failed"),
                    Err(e) => tracing::error!(error = %e, "scheduled maintenance panicked"),
                }
            })
        })
        .map_err(|e| {
            format!("`lifecycle.schedule`: `{schedule}` is not a valid cron string: {e}")
        })?;
        scheduler.add(job).await?;
        scheduler.start().await?;
        let checkpoints = tokio::spawn(async move {
            let mut every = tokio::time::interval(CHECKPOINT_EVERY);
            every.tick().await;
            loop {
                every.tick().await;
                let store = store.clone();
                match tokio::task::spawn_blocking(move || store.checkpoint()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::error!(error = %e, "checkpoint failed"),
                    Err(e) => tracing::error!(error = %e, "checkpoint task failed"),
                }
            }
        });
        Ok(Self {
            scheduler,
            checkpoints,
        })
    }

    /// Stops scheduling; a run in progress finishes on its blocking thread.
    pub async fn stop(mut self) {
        self.checkpoints.abort();
        if let Err(e) = self.scheduler.shutdown().await {
            tracing::warn!(error = %e, "scheduler shutdown");
        }
    }
}
