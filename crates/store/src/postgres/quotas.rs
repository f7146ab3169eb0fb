//! Plans' usage counters on PostgreSQL (`QuotaStore`): rows of the `quotas` table, each take a
//! transaction that locks its row, so that instances sharing the database never pass a limit
//! together.

use super::{db_error, sql_ms, Cached, PgStore};
use crate::{QuotaStore, QuotaTaken, StoreResult};

impl QuotaStore for PgStore {
    fn quota_get(&self, key: &str) -> StoreResult<Option<u64>> {
        self.block(async {
            let client = self.shared.client().await?;
            let row = client
                .row_opt("SELECT used FROM quotas WHERE key = $1", &[&key])
                .await
                .map_err(db_error)?;
            Ok(row.map(|r| u64::try_from(r.get::<_, i64>(0)).unwrap_or(0)))
        })
    }

    fn quota_init(&self, key: &str, value: u64) -> StoreResult<u64> {
        self.block(async {
            let client = self.shared.client().await?;
            client
                .exec(
                    "INSERT INTO quotas (key, used) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                    &[&key, &sql_ms(value)],
                )
                .await
                .map_err(db_error)?;
            let row = client
                .row("SELECT used FROM quotas WHERE key = $1", &[&key])
                .await
                .map_err(db_error)?;
            Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
        })
    }

    fn quota_take(
        &self,
        key: &str,
        want: u64,
        limit: u64,
        partial: bool,
    ) -> StoreResult<QuotaTaken> {
        self.block(async {
            let mut client = self.shared.client().await?;
            let tx = client.transaction().await.map_err(db_error)?;
            tx.exec(
                "INSERT INTO quotas (key, used) VALUES ($1, 0) ON CONFLICT (key) DO NOTHING",
                &[&key],
            )
            .await
            .map_err(db_error)?;
            // The row lock orders every take of this counter, on every instance.
            let row = tx
                .row("SELECT used FROM quotas WHERE key = $1 FOR UPDATE", &[&key])
                .await
                .map_err(db_error)?;
            let used = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
            let room = limit.saturating_sub(used);
            let granted = match (want <= room, partial) {
                (true, _) => want,
                (false, true) => room,
                (false, false) => 0,
            };
            if granted > 0 {
                tx.exec(
                    "UPDATE quotas SET used = used + $2 WHERE key = $1",
                    &[&key, &sql_ms(granted)],
                )
                .await
                .map_err(db_error)?;
            }
            tx.commit().await.map_err(db_error)?;
            Ok(QuotaTaken {
                granted,
                used: used + granted,
            })
        })
    }

    fn quota_release(&self, key: &str, n: u64) -> StoreResult<()> {
        self.block(async {
            let client = self.shared.client().await?;
            client
                .exec(
                    "UPDATE quotas SET used = GREATEST(used - $2, 0) WHERE key = $1",
                    &[&key, &sql_ms(n)],
                )
                .await
                .map_err(db_error)?;
            Ok(())
        })
    }

    fn quota_clear(&self) -> StoreResult<()> {
        self.block(async {
            let client = self.shared.client().await?;
            client
                .exec("DELETE FROM quotas", &[])
                .await
                .map_err(db_error)?;
            Ok(())
        })
    }
}
