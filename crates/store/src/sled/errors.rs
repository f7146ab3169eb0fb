//! How sled's failures become [`StoreError`]s: transaction aborts, and storage faults (a full
//! disk, another I/O error) sorted by their `io::ErrorKind`, which the store's flusher keeps
//! ([`FaultCell`]) and `/healthz` reports.

use std::io;

use sled::transaction::{ConflictableTransactionError, TransactionError};

use crate::{LinkStatus, StorageFault, StoreError};

/// Why a transaction gave up.
#[derive(Debug)]
pub(super) enum Abort {
    CodeTaken,
    /// The pool head was taken between reading it and the transaction: try the next one.
    Raced,
    NotFound,
    WrongStatus(LinkStatus),
    Corrupt(&'static str, String),
    /// A pooled code is also owned by a link (the trees disagree).
    Owned,
}

pub(super) type TxResult<T> = Result<T, ConflictableTransactionError<Abort>>;

/// A failure as the store reports it: its text, and its I/O error kind when it is one.
pub(super) trait Failure: std::fmt::Display {
    fn io_kind(&self) -> Option<io::ErrorKind> {
        None
    }
}

impl Failure for sled::Error {
    fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            sled::Error::Io(e) => Some(e.kind()),
            _ => None,
        }
    }
}

impl Failure for io::Error {
    fn io_kind(&self) -> Option<io::ErrorKind> {
        Some(self.kind())
    }
}

impl Failure for String {}
impl Failure for &str {}

/// A failure as a [`StoreError`], sorted by [`classify`].
pub(super) fn backend(e: impl Failure) -> StoreError {
    classify(e.io_kind(), e.to_string())
}

/// [`backend`] with what was being done.
pub(super) fn failed(doing: &str, e: impl Failure) -> StoreError {
    classify(e.io_kind(), format!("{doing}: {e}"))
}

/// Sorts a failure by its I/O error kind: out of space or over quota → [`StoreError::Full`],
/// another I/O error → [`StoreError::Unavailable`], anything else → [`StoreError::Backend`].
pub(super) fn classify(kind: Option<io::ErrorKind>, detail: String) -> StoreError {
    match kind {
        Some(io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded) => StoreError::Full(detail),
        Some(_) => StoreError::Unavailable(detail),
        None => StoreError::Backend(detail),
    }
}

/// The storage fault of one store: the first failed flush, kept until the store is reopened
/// (sled keeps its first I/O error and fails every later write with it). Held by the store's
/// flusher, which every acknowledged write waits on.
#[derive(Default)]
pub(super) struct FaultCell(parking_lot::Mutex<Option<StorageFault>>);

impl FaultCell {
    /// Keeps `error` as the store's fault if it is a storage one and none is kept yet (logged
    /// once per episode).
    pub(super) fn note(&self, error: &StoreError) {
        let (reason, detail) = match error {
            StoreError::Full(detail) => ("storage_full", detail),
            StoreError::Unavailable(detail) => ("storage_unavailable", detail),
            _ => return,
        };
        let mut fault = self.0.lock();
        if fault.is_none() {
            tracing::error!(reason, error = %detail, "storage fault: writes fail until the store is reopened");
            *fault = Some(StorageFault {
                reason,
                detail: detail.clone(),
                reopen: true,
            });
        }
    }

    pub(super) fn get(&self) -> Option<StorageFault> {
        self.0.lock().clone()
    }
}

pub(super) fn tx_error(e: TransactionError<Abort>, code: &str) -> StoreError {
    match e {
        TransactionError::Abort(Abort::CodeTaken) => StoreError::CodeTaken(code.to_string()),
        TransactionError::Abort(Abort::Raced) => StoreError::Backend("pool race".into()),
        TransactionError::Abort(Abort::Owned) => StoreError::Corrupt {
            tree: "pool",
            detail: format!("pooled code `{code}` is owned by a link"),
        },
        TransactionError::Abort(Abort::NotFound) => StoreError::NotFound,
        TransactionError::Abort(Abort::WrongStatus(s)) => StoreError::WrongStatus(s),
        TransactionError::Abort(Abort::Corrupt(tree, detail)) => {
            StoreError::Corrupt { tree, detail }
        }
        TransactionError::Storage(e) => backend(e),
    }
}
