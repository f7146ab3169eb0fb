//! The free-space guard. sled 0.34 remembers its first failed write and fails every later
//! write with it — and every read that needs a write: a leaf that grew past 16 keys is split,
//! and a small one merged, by the next traversal that meets it, whether it reads or writes.
//! Once sled has failed a write for lack of space, the links in such a leaf stop redirecting
//! (on a disk filled with 600 links stored, one leaf of 17: 17 of them answered 507).
//!
//! So the store never lets sled meet a full disk: before each write it asks the file system
//! how much is free and refuses with [`StoreError::Full`] while less than the reserve is, so
//! that sled stays healthy and its reads keep working (what a read restructures stays in
//! memory until the next write's flush; sled's own periodic flush is off, see `open.rs`). Once
//! space is back, writes go through again with no restart.
//!
//! The reserve is `storage.min_free_mb`, but at most a twentieth of the file system, so that a
//! small volume is not refused from the start. Owns no tree.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::{StorageFault, StoreError, StoreResult};

/// Bytes a visit is allowed for when a batch of visits asks for room (its block share, its
/// index entry and counters, with room to spare).
pub(super) const BYTES_PER_VISIT: u64 = 256;

pub(super) struct SpaceGuard {
    /// A path on the data directory's file system.
    path: PathBuf,
    /// `storage.min_free_mb`, in bytes.
    configured: u64,
    /// Writes are being refused (logged once per episode).
    refusing: AtomicBool,
}

impl SpaceGuard {
    pub(super) fn new(path: PathBuf, configured: u64) -> Self {
        Self {
            path,
            configured,
            refusing: AtomicBool::new(false),
        }
    }

    /// Free bytes and the reserve, from one `statvfs`; `None` if the file system cannot say
    /// (then nothing is refused: sled's own error is the last word).
    fn measure(&self) -> Option<(u64, u64)> {
        let stats = rustix::fs::statvfs(&self.path).ok()?;
        let unit = stats.f_frsize.max(1);
        let free = stats.f_bavail.saturating_mul(unit);
        let size = stats.f_blocks.saturating_mul(unit);
        Some((free, self.configured.min(size / 20)))
    }

    /// Lets a write of about `bytes` through, or refuses it while the file system has less
    /// than the reserve (plus `bytes`) free.
    pub(super) fn admit(&self, bytes: u64) -> StoreResult<()> {
        let Some((free, reserve)) = self.measure() else {
            return Ok(());
        };
        if free >= reserve.saturating_add(bytes) {
            if self.refusing.swap(false, Ordering::AcqRel) {
                tracing::warn!(free, "the data directory has room again: writes resume");
            }
            return Ok(());
        }
        if !self.refusing.swap(true, Ordering::AcqRel) {
            tracing::error!(
                free,
                reserve,
                path = %self.path.display(),
                "storage nearly full: writes are refused (reads go on) until more is free"
            );
        }
        Err(StoreError::Full(format!(
            "{free} bytes free on the data directory's file system, under the {reserve}-byte \
             reserve (storage.min_free_mb)"
        )))
    }

    /// The fault `/healthz` reports while writes are refused (checked afresh, so that it
    /// clears as soon as space is back).
    pub(super) fn fault(&self) -> Option<StorageFault> {
        if !self.refusing.load(Ordering::Acquire) {
            return None;
        }
        match self.admit(0) {
            Ok(()) => None,
            Err(e) => Some(StorageFault {
                reason: "storage_full",
                detail: e.to_string(),
                reopen: false,
            }),
        }
    }
}
