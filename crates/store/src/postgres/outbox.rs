//! The webhook outbox on PostgreSQL: `outbox` (one row an item; only the oldest of each webhook
//! and key is a `head`, and only heads are taken, by `FOR UPDATE SKIP LOCKED`, so instances
//! share the work and never take one item together) and `outbox_log` (the delivery log, the
//! last [`DELIVERY_LOG_KEEP`] records of each webhook).
//!
//! `head` stays exactly the oldest row of its key because every write that adds or removes a
//! key's rows first takes a transaction advisory lock on the key: a removal that finds no row
//! after its own and an enqueue that finds the row it is removing could otherwise both commit,
//! and the key would be left with no head.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::{db_error, rust_ms, sql_ms, Cached, PgStore, Shared};
use crate::model::{
    DeliveryAttempt, DeliveryOutcome, DeliveryRecord, Millis, NewOutboxItem, OutboxItem,
    DELIVERY_LOG_KEEP,
};
use crate::{OutboxStore, StoreError, StoreResult};

/// What becomes of a settled item.
#[derive(Clone, Copy)]
pub(super) enum Settle {
    /// It leaves the outbox, logged with this outcome.
    Remove(DeliveryOutcome),
    /// It waits until then, logged as failed.
    Retry(Millis),
}

fn rust_count(n: i32) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

fn sql_limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Takes the advisory lock of each (webhook, key) given, until the transaction ends: in hash
/// order, so that two writers locking several keys never wait on each other in a circle.
async fn lock_keys(
    client: &impl GenericClient,
    webhooks: &[&str],
    keys: &[&str],
) -> StoreResult<()> {
    client
        .exec(
            "SELECT pg_advisory_xact_lock(h) FROM (
                 SELECT DISTINCT hashtextextended(key, hashtextextended(webhook, 0)) AS h
                 FROM unnest($1::text[], $2::text[]) AS t(webhook, key)
                 ORDER BY h) AS locks",
            &[&webhooks, &keys],
        )
        .await
        .map_err(db_error)?;
    Ok(())
}

/// The columns an item is read with, in [`item_of`]'s order.
const ITEM_COLUMNS: &str =
    "o.id, o.webhook, o.key, o.event, o.body, o.created_at, o.attempts, o.next_at, o.last_error";

fn item_of(row: &Row) -> OutboxItem {
    OutboxItem {
        id: rust_ms(row.get(0)),
        webhook: row.get(1),
        key: row.get(2),
        event: row.get(3),
        body: row.get(4),
        created_at: rust_ms(row.get(5)),
        attempts: rust_count(row.get(6)),
        next_at: rust_ms(row.get(7)),
        last_error: row.get(8),
    }
}

/// The columns a log record is read with, in [`record_of`]'s order.
const RECORD_COLUMNS: &str = "id, webhook, event, key, at, attempts, outcome, status, error";

fn record_of(row: &Row) -> StoreResult<DeliveryRecord> {
    let outcome = u8::try_from(row.get::<_, i16>(6))
        .ok()
        .and_then(DeliveryOutcome::of_stored)
        .ok_or_else(|| StoreError::Corrupt {
            tree: "outbox_log",
            detail: "unknown outcome".into(),
        })?;
    Ok(DeliveryRecord {
        id: rust_ms(row.get(0)),
        webhook: row.get(1),
        event: row.get(2),
        key: row.get(3),
        at: rust_ms(row.get(4)),
        attempts: rust_count(row.get(5)),
        outcome,
        status: row
            .get::<_, Option<i32>>(7)
            .and_then(|s| u16::try_from(s).ok()),
        error: row.get(8),
    })
}

impl OutboxStore for PgStore {
    fn enqueue(&self, items: &[NewOutboxItem]) -> StoreResult<Vec<u64>> {
        self.block(async {
            if items.is_empty() {
                return Ok(Vec::new());
            }
            let webhooks: Vec<&str> = items.iter().map(|i| i.webhook.as_str()).collect();
            let keys: Vec<&str> = items.iter().map(|i| i.key.as_str()).collect();
            let events: Vec<&str> = items.iter().map(|i| i.event.as_str()).collect();
            let bodies: Vec<&[u8]> = items.iter().map(|i| i.body.as_slice()).collect();
            let times: Vec<i64> = items.iter().map(|i| sql_ms(i.created_at)).collect();
            let mut client = self.shared.client().await?;
            let tx = client.transaction().await.map_err(db_error)?;
            lock_keys(&tx, &webhooks, &keys).await?;
            // Ids drawn under the keys' locks: a key's ids then grow in the order its items
            // commit, whichever instance enqueues them.
            let rows = tx
                .rows(
                    "SELECT nextval('outbox_ids') FROM generate_series(1, $1::bigint)",
                    &[&sql_limit(items.len())],
                )
                .await
                .map_err(db_error)?;
            let mut ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
            ids.sort_unstable();
            tx.exec(
                "INSERT INTO outbox (id, webhook, key, event, body, created_at, next_at)
                 SELECT id, webhook, key, event, body, at, at
                 FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::bigint[])
                     AS t(id, webhook, key, event, body, at)",
                &[&ids, &webhooks, &keys, &events, &bodies, &times],
            )
            .await
            .map_err(db_error)?;
            // A key that had no item gets its head; one that had keeps it (its oldest is older).
            tx.exec(
                "UPDATE outbox SET head = true
                 WHERE NOT head AND id IN (
                     SELECT min(o.id) FROM outbox o
                     JOIN (SELECT DISTINCT webhook, key FROM unnest($1::text[], $2::text[])
                           AS t(webhook, key)) AS k USING (webhook, key)
                     GROUP BY o.webhook, o.key)",
                &[&webhooks, &keys],
            )
            .await
            .map_err(db_error)?;
            tx.commit().await.map_err(db_error)?;
            Ok(ids.into_iter().map(rust_ms).collect())
        })
    }

    fn take_due(&self, now: Millis, lease: Millis, limit: usize) -> StoreResult<Vec<OutboxItem>> {
        self.block(async {
            if limit == 0 {
                return Ok(Vec::new());
            }
            let client = self.shared.client().await?;
            let sql = format!(
                "WITH picked AS (
                     SELECT id FROM outbox
                     WHERE head AND next_at <= $1 AND leased_until <= $1
                     ORDER BY next_at, id LIMIT $3 FOR UPDATE SKIP LOCKED)
                 UPDATE outbox o SET leased_until = $2 FROM picked WHERE o.id = picked.id
                 RETURNING {ITEM_COLUMNS}"
            );
            let rows = client
                .rows(
                    &sql,
                    &[
                        &sql_ms(now),
                        &sql_ms(now.saturating_add(lease)),
                        &sql_limit(limit),
                    ],
                )
                .await
                .map_err(db_error)?;
            let mut items: Vec<OutboxItem> = rows.iter().map(item_of).collect();
            // RETURNING keeps no order.
            items.sort_unstable_by_key(|i| (i.next_at, i.id));
            Ok(items)
        })
    }

    fn delivered(&self, id: u64, attempt: &DeliveryAttempt) -> StoreResult<bool> {
        let settle = Settle::Remove(DeliveryOutcome::Delivered);
        self.block(self.shared.settle(id, attempt, settle))
    }

    fn retry(&self, id: u64, attempt: &DeliveryAttempt, next_at: Millis) -> StoreResult<bool> {
        self.block(self.shared.settle(id, attempt, Settle::Retry(next_at)))
    }

    fn give_up(&self, id: u64, attempt: &DeliveryAttempt) -> StoreResult<bool> {
        let settle = Settle::Remove(DeliveryOutcome::GaveUp);
        self.block(self.shared.settle(id, attempt, settle))
    }

    fn outbox_depth(&self) -> StoreResult<u64> {
        self.block(async {
            let client = self.shared.client().await?;
            let row = client
                .row("SELECT count(*) FROM outbox", &[])
                .await
                .map_err(db_error)?;
            Ok(rust_ms(row.get(0)))
        })
    }

    fn deliveries(
        &self,
        webhook: Option<&str>,
        failed_only: bool,
        limit: usize,
    ) -> StoreResult<Vec<DeliveryRecord>> {
        self.block(async {
            let client = self.shared.client().await?;
            let delivered = i16::from(DeliveryOutcome::Delivered.stored());
            let limit = sql_limit(limit);
            // Two statements rather than `$1 IS NULL OR webhook = $1`: a cached plan serves every
            // call, and one plan for both would not use the webhook's index.
            let rows = match webhook {
                Some(webhook) => {
                    let sql = format!(
                        "SELECT {RECORD_COLUMNS} FROM outbox_log
                         WHERE webhook = $1 AND (NOT $2 OR outcome <> $3)
                         ORDER BY seq DESC LIMIT $4"
                    );
                    client
                        .rows(&sql, &[&webhook, &failed_only, &delivered, &limit])
                        .await
                }
                None => {
                    let sql = format!(
                        "SELECT {RECORD_COLUMNS} FROM outbox_log
                         WHERE NOT $1 OR outcome <> $2
                         ORDER BY seq DESC LIMIT $3"
                    );
                    client.rows(&sql, &[&failed_only, &delivered, &limit]).await
                }
            }
            .map_err(db_error)?;
            rows.iter().map(record_of).collect()
        })
    }
}

impl Shared {
    /// Logs an attempt on an item and removes it or sets its next attempt, in one transaction.
    pub(super) async fn settle(
        &self,
        id: u64,
        attempt: &DeliveryAttempt,
        how: Settle,
    ) -> StoreResult<bool> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let id = sql_ms(id);
        let error = attempt.kept_error();
        let (row, outcome) = match how {
            Settle::Retry(next_at) => {
                let row = tx
                    .row_opt(
                        "UPDATE outbox SET attempts = attempts + 1, next_at = $2,
                             leased_until = 0, last_error = $3
                         WHERE id = $1 RETURNING webhook, key, event, attempts",
                        &[&id, &sql_ms(next_at), &error],
                    )
                    .await
                    .map_err(db_error)?;
                (row, DeliveryOutcome::Failed)
            }
            Settle::Remove(outcome) => {
                let Some(found) = tx
                    .row_opt("SELECT webhook, key FROM outbox WHERE id = $1", &[&id])
                    .await
                    .map_err(db_error)?
                else {
                    return Ok(false);
                };
                let (webhook, key): (String, String) = (found.get(0), found.get(1));
                lock_keys(&tx, &[webhook.as_str()], &[key.as_str()]).await?;
                let row = tx
                    .row_opt(
                        "DELETE FROM outbox WHERE id = $1
                         RETURNING webhook, key, event, attempts + 1, head",
                        &[&id],
                    )
                    .await
                    .map_err(db_error)?;
                if row.as_ref().is_some_and(|r| r.get::<_, bool>(4)) {
                    tx.exec(
                        "UPDATE outbox SET head = true WHERE id = (
                             SELECT min(id) FROM outbox WHERE webhook = $1 AND key = $2)",
                        &[&webhook, &key],
                    )
                    .await
                    .map_err(db_error)?;
                }
                (row, outcome)
            }
        };
        // Gone meanwhile (another sender settled it): nothing to log.
        let Some(row) = row else {
            return Ok(false);
        };
        let webhook: String = row.get(0);
        tx.exec(
            "INSERT INTO outbox_log
                 (seq, id, webhook, key, event, attempts, at, outcome, status, error)
             VALUES (nextval('outbox_log_ids'), $1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                &id,
                &webhook,
                &row.get::<_, String>(1),
                &row.get::<_, String>(2),
                &row.get::<_, i32>(3),
                &sql_ms(attempt.at),
                &i16::from(outcome.stored()),
                &attempt.status.map(i32::from),
                &error,
            ],
        )
        .await
        .map_err(db_error)?;
        // The webhook's records past the bound.
        tx.exec(
            "DELETE FROM outbox_log WHERE webhook = $1 AND seq <= (
                 SELECT seq FROM outbox_log WHERE webhook = $1
                 ORDER BY seq DESC OFFSET $2 LIMIT 1)",
            &[&webhook, &sql_limit(DELIVERY_LOG_KEEP)],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_convert_without_wrapping() {
        assert_eq!(rust_count(-1), 0);
        assert_eq!(rust_count(i32::MAX), 2_147_483_647);
    }
}
