//! The bytes of stored records: MessagePack encoding and decoding of links and index entries,
//! big-endian counters bumped inside transactions, and [`check_record`], the one decoder of
//! every record type that `check` and the fuzz targets use. Owns no tree.

use sled::transaction::{TransactionalTree, UnabortableTransactionError};

use super::errors::{backend, Abort, TxResult};
use super::formats;
use super::keys::{self, counter, read_u64};
use crate::{ActiveEntry, Link, LinkStatus, StoreError, StoreResult, MAX_LINK_ID};
use sled::transaction::abort;

pub(super) fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    // Encoding our own plain structs into a Vec cannot fail.
    rmp_serde::to_vec(value).unwrap_or_default()
}

pub(super) fn decode_link(bytes: &[u8]) -> StoreResult<Link> {
    rmp_serde::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        tree: "links",
        detail: e.to_string(),
    })
}

pub(super) fn tx_decode_link(bytes: &[u8]) -> TxResult<Link> {
    rmp_serde::from_slice(bytes).or_else(|e| abort(Abort::Corrupt("links", e.to_string())))
}

/// A `codes` value for an active link: everything a redirect needs, so that a cache miss is
/// one read. (An encoded entry is never 8 bytes: the array marker, the id, the URL and the
/// expiry take at least 12.)
pub(super) fn active_code_value(link: &Link) -> Vec<u8> {
    encode(&ActiveEntry::of(link))
}

/// The `codes` value of a link that owns its code but is not active: its id alone.
pub(super) fn owned_code_value(id: u64) -> [u8; 8] {
    keys::u64_key(id)
}

/// What a `codes` value says: 8 bytes are the id of an owner that is not active, anything else
/// the [`ActiveEntry`] of an active one.
pub(super) fn decode_code_value(bytes: &[u8]) -> Result<CodeValue, String> {
    match bytes.len() {
        8 => read_u64(bytes)
            .map(CodeValue::Owned)
            .ok_or_else(|| "malformed link id".to_string()),
        _ => rmp_serde::from_slice::<ActiveEntry>(bytes)
            .map(CodeValue::Active)
            .map_err(|e| e.to_string()),
    }
}

/// A decoded `codes` value.
#[derive(Debug)]
pub(super) enum CodeValue {
    /// The owner is expired or deleted (archived links own no code).
    Owned(u64),
    /// The owner is active: the redirect's answer.
    Active(ActiveEntry),
}

impl CodeValue {
    pub(super) fn owner(&self) -> u64 {
        match self {
            Self::Owned(id) => *id,
            Self::Active(entry) => entry.id,
        }
    }
}

/// The owner's id of a `codes` value: a damaged value is corruption, not "no such link".
pub(super) fn code_owner(bytes: &[u8]) -> StoreResult<u64> {
    decode_code_value(bytes)
        .map(|v| v.owner())
        .map_err(|detail| StoreError::Corrupt {
            tree: "codes",
            detail,
        })
}

/// [`code_owner`] inside a transaction.
/// The next link id after `last` (the counter's value): the first id past it that no record
/// holds. The counter is never below the highest id, but a store that an older import left
/// with a wrapped counter heals here instead of overwriting a link. Past [`MAX_LINK_ID`] the
/// store has no id left to give.
pub(super) fn tx_next_link_id(links: &TransactionalTree, last: u64) -> TxResult<u64> {
    let mut id = last;
    loop {
        id = match id.checked_add(1).filter(|id| *id <= MAX_LINK_ID) {
            Some(id) => id,
            None => {
                return abort(Abort::Corrupt(
                    "counters",
                    format!(
                        "the link id counter is at {last}, past the last id ({MAX_LINK_ID}); \
                         export and import the store to renumber it"
                    ),
                ))
            }
        };
        if links.get(keys::u64_key(id))?.is_none() {
            return Ok(id);
        }
    }
}

pub(super) fn tx_code_owner(bytes: &[u8]) -> TxResult<u64> {
    match decode_code_value(bytes) {
        Ok(value) => Ok(value.owner()),
        Err(detail) => abort(Abort::Corrupt("codes", detail)),
    }
}

/// Decodes one stored record of `tree` (`links`, `codes`, `visit_blocks`, `days`, `pool/<L>`,
/// `expiry`, `ended`, `counters`) the way the store reads it. A corrupt record
/// is an error, never a panic: the fuzz targets (`fuzz/`) feed this arbitrary bytes.
pub fn check_record(tree: &str, key: &[u8], value: &[u8]) -> StoreResult<()> {
    let malformed = |tree: &'static str| StoreError::Corrupt {
        tree,
        detail: "malformed record".into(),
    };
    match tree {
        "links" => decode_link(value).map(drop),
        // `active` is the fuzz corpus's name from before active entries moved into `codes`.
        "codes" | "active" => code_owner(value).map(drop),
        // `visits` is the fuzz target's older name for the same records.
        "visit_blocks" | "visits" => formats::check_block(value),
        "days" => formats::decode_day(value),
        "expiry" | "ended" => keys::split_time_id(key)
            .map(drop)
            .ok_or_else(|| malformed("expiry")),
        "counters" => read_u64(value)
            .map(drop)
            .ok_or_else(|| malformed("counters")),
        pool => {
            let length = pool
                .strip_prefix("pool/")
                .and_then(|l| l.parse::<u8>().ok())
                .ok_or_else(|| backend(format!("no tree named `{tree}`")))?;
            keys::split_pool_key(key, length)
                .map(drop)
                .ok_or_else(|| malformed("pool"))
        }
    }
}

/// A link id stored as an index value: a damaged one is corruption, not "no such link".
pub(super) fn stored_id(tree: &'static str, bytes: &[u8]) -> StoreResult<u64> {
    match bytes.len() {
        8 => read_u64(bytes).ok_or_else(|| StoreError::Corrupt {
            tree,
            detail: "malformed link id".into(),
        }),
        n => Err(StoreError::Corrupt {
            tree,
            detail: format!("a link id of {n} bytes, not 8"),
        }),
    }
}

pub(super) fn bump(
    tx: &TransactionalTree,
    key: &[u8],
    delta: i64,
) -> Result<(), UnabortableTransactionError> {
    let current = tx.get(key)?.and_then(|v| read_u64(&v)).unwrap_or(0);
    let next = current.saturating_add_signed(delta);
    tx.insert(key, &next.to_be_bytes()[..])?;
    Ok(())
}

pub(super) fn bump_status(
    tx: &TransactionalTree,
    from: Option<LinkStatus>,
    to: LinkStatus,
) -> Result<(), UnabortableTransactionError> {
    if let Some(from) = from {
        bump(tx, &counter::links(from), -1)?;
    }
    bump(tx, &counter::links(to), 1)
}
