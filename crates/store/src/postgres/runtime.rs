//! The driver's runtime. The seam is blocking ([`Store`] methods return values, as sled's do),
//! so this store owns a small tokio runtime of its own for the driver (`tokio-postgres` over a
//! `deadpool-postgres` pool) and blocks on it: inside the server's multi-threaded runtime
//! through `block_in_place`, which hands the worker's other tasks to another thread while the
//! query runs, and on a plain thread (command-line tools, tests) directly. One round trip never
//! stalls the other requests of a worker.
//!
//! This file builds the runtime, waits on it ([`PgStore::block`]) and shuts it down when the
//! store is dropped. Work that needs no answer on the caller's thread (creates, visit claims,
//! the change listener) is spawned on it where the store hands that work out (`mod.rs`).
//!
//! [`Store`]: crate::Store

use std::future::Future;

use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

use super::PgStore;
use crate::{StoreError, StoreResult};

/// The driver's runtime, built when the store opens.
pub(super) fn build() -> StoreResult<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("vsl-postgres")
        .enable_all()
        .build()
        .map_err(|e| StoreError::Backend(format!("postgres runtime: {e}")))
}

impl PgStore {
    /// Runs `fut` on the driver's runtime and waits for it (see the module documentation).
    pub(super) fn block<F>(&self, fut: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        let Some(runtime) = &self.runtime else {
            unreachable!("the runtime is only taken while dropping");
        };
        match Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| runtime.block_on(fut))
            }
            // A current-thread runtime cannot lend its thread: wait on a helper thread.
            Ok(_) => std::thread::scope(|scope| {
                scope
                    .spawn(|| runtime.block_on(fut))
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            }),
            Err(_) => runtime.block_on(fut),
        }
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            // Dropping a runtime may block, which an async context forbids.
            runtime.shutdown_background();
        }
    }
}
