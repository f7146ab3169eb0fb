//! What can go wrong in storage, in the words every layer uses: the store returns these,
//! services wrap them, and the one error mapper (`http/error.rs`) turns them into statuses.

use super::link::LinkStatus;

/// The result type of every store operation.
pub type StoreResult<T> = Result<T, StoreError>;

/// What can go wrong in storage. Callers map these to domain errors; only `Backend` and
/// `Corrupt` are server faults.
#[derive(Clone, Debug, thiserror::Error)]
pub enum StoreError {
    /// The custom code is already used by a link (active, expired, deleted or retired).
    #[error("code `{0}` is already taken")]
    CodeTaken(String),
    /// The pool of this length has no code whose score is due; the caller refills and retries.
    #[error("the pool of length {0} has no available code")]
    PoolEmpty(u8),
    /// No link has this code (or id).
    #[error("no such link")]
    NotFound,
    /// The link exists but is not in a state the operation accepts (e.g. patching a deleted
    /// link).
    #[error("link is {0:?}")]
    WrongStatus(LinkStatus),
    /// A stored record could not be decoded.
    #[error("corrupt record in `{tree}`: {detail}")]
    Corrupt { tree: &'static str, detail: String },
    /// The embedded database or the file system failed.
    #[error("storage failure: {0}")]
    Backend(String),
    /// A write failed for lack of space (ENOSPC, quota).
    #[error("storage full: {0}")]
    Full(String),
    /// Another I/O failure of the storage.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The data directory is used by another running process.
    #[error("the data directory {0} is in use by another process (is the server running?)")]
    Locked(String),
}

/// Why the store cannot write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageFault {
    /// `storage_full` or `storage_unavailable`.
    pub reason: &'static str,
    pub detail: String,
    /// The store must be reopened to write again (sled after a failed write); otherwise
    /// writes resume by themselves once the cause is gone (space freed).
    pub reopen: bool,
}
