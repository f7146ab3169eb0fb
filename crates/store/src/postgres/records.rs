//! [`SharedRecords`] on PostgreSQL: page sessions and batch results in the `shared_records`
//! table, keyed by kind and id, so that every instance reads what any of them wrote. Stale
//! records of a kind are deleted when one of that kind is put.

use super::{db_error, sql_ms, Cached, PgStore};
use crate::{Millis, SharedRecords, StoreResult};

/// Page sessions and batch results, in a table every instance reads.
impl SharedRecords for PgStore {
    fn put(
        &self,
        kind: &str,
        id: &[u8],
        value: &[u8],
        now: Millis,
        ttl: Millis,
    ) -> StoreResult<()> {
        self.block(async {
            let client = self.shared.client().await?;
            client
                .exec(
                    "DELETE FROM shared_records WHERE kind = $1 AND touched_at < $2",
                    &[&kind, &sql_ms(now.saturating_sub(ttl))],
                )
                .await
                .map_err(db_error)?;
            client
                .exec(
                    "INSERT INTO shared_records (kind, id, value, touched_at) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (kind, id) DO UPDATE SET value = excluded.value,
                                                          touched_at = excluded.touched_at",
                    &[&kind, &id, &value, &sql_ms(now)],
                )
                .await
                .map_err(db_error)?;
            Ok(())
        })
    }

    fn get(
        &self,
        kind: &str,
        id: &[u8],
        now: Millis,
        ttl: Millis,
        touch: bool,
    ) -> StoreResult<Option<Vec<u8>>> {
        let since = sql_ms(now.saturating_sub(ttl));
        self.block(async {
            let client = self.shared.client().await?;
            let row = if touch {
                client
                    .row_opt(
                        "UPDATE shared_records SET touched_at = $4
                         WHERE kind = $1 AND id = $2 AND touched_at >= $3 RETURNING value",
                        &[&kind, &id, &since, &sql_ms(now)],
                    )
                    .await
            } else {
                client
                    .row_opt(
                        "SELECT value FROM shared_records
                         WHERE kind = $1 AND id = $2 AND touched_at >= $3",
                        &[&kind, &id, &since],
                    )
                    .await
            };
            Ok(row.map_err(db_error)?.map(|r| r.get(0)))
        })
    }

    fn delete(&self, kind: &str, id: &[u8]) -> StoreResult<()> {
        self.block(async {
            let client = self.shared.client().await?;
            client
                .exec(
                    "DELETE FROM shared_records WHERE kind = $1 AND id = $2",
                    &[&kind, &id],
                )
                .await
                .map_err(db_error)?;
            Ok(())
        })
    }
}
