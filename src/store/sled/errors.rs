//! How sled's failures become [`StoreError`]s: transaction aborts, and storage faults (a full
//! disk, an I/O error), which are recorded once per process and reported by `/healthz`.

use sled::transaction::{ConflictableTransactionError, TransactionError};

use crate::store::{LinkStatus, StorageFault, StoreError};

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

pub(super) fn backend(e: impl std::fmt::Display) -> StoreError {
    classify(e.to_string())
}

/// The storage fault of this process, set by the first I/O error (see [`classify`]). One store
/// per process in the server; a static because every sled call site reports through
/// [`backend`], which has no store at hand.
pub(super) static FAULT: parking_lot::Mutex<Option<StorageFault>> = parking_lot::Mutex::new(None);

/// Sorts a sled or file-system failure: out of space → [`StoreError::Full`], another I/O
/// error → [`StoreError::Unavailable`] (both recorded as the process's storage fault, logged
/// once per episode), anything else → [`StoreError::Backend`].
pub(crate) fn classify(detail: String) -> StoreError {
    let full = detail.contains("os error 28")
        || detail.contains("No space left")
        || detail.contains("os error 122");
    let io = full || detail.contains("IO error") || detail.contains("os error");
    if !io {
        return StoreError::Backend(detail);
    }
    let reason = if full {
        "storage_full"
    } else {
        "storage_unavailable"
    };
    let mut fault = FAULT.lock();
    if fault.is_none() {
        tracing::error!(reason, error = %detail, "storage fault: writes fail until the store is reopened");
        *fault = Some(StorageFault {
            reason,
            detail: detail.clone(),
            reopen: true,
        });
    }
    if full {
        StoreError::Full(detail)
    } else {
        StoreError::Unavailable(detail)
    }
}

/// The process's storage fault, if one happened.
pub fn storage_fault() -> Option<StorageFault> {
    FAULT.lock().clone()
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
