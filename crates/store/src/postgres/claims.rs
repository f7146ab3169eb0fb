//! Visit caps on PostgreSQL: the `link_claims` rows. A claim raises all its slots in one
//! transaction, each with `UPDATE … SET used = used + 1 WHERE used < cap`; a slot that does
//! not move is full and the transaction rolls back. Row locks make concurrent claims of every
//! instance queue on the same rows, so a cap is never passed; the grant is answered after the
//! commit.

use tokio_postgres::types::ToSql;

use super::{db_error, sql_ms, Cached, PgStore, Shared};
use crate::model::{CapSlot, ClaimOutcome, VisitClaim};
use crate::{CapStore, ClaimDone, StoreError, StoreResult};

impl CapStore for PgStore {
    /// Runs on the driver's runtime; the caller's thread goes on at once.
    fn claim_visit(&self, claim: VisitClaim, done: ClaimDone) {
        let Some(runtime) = &self.runtime else {
            done(Err(StoreError::Unavailable("the store is closing".into())));
            return;
        };
        let shared = self.shared.clone();
        runtime.spawn(async move { done(shared.claim(&claim).await) });
    }

    fn counted(&self, link_id: u64) -> StoreResult<Vec<(CapSlot, u64)>> {
        self.block(async {
            let client = self.shared.client().await?;
            let rows = client
                .rows(
                    "SELECT slot, used FROM link_claims WHERE link_id = $1 ORDER BY slot",
                    &[&sql_ms(link_id)],
                )
                .await
                .map_err(db_error)?;
            Ok(rows
                .iter()
                .filter_map(|row| {
                    let slot = CapSlot::of_stored(u32::try_from(row.get::<_, i32>(0)).ok()?)?;
                    Some((slot, u64::try_from(row.get::<_, i64>(1)).unwrap_or(0)))
                })
                .collect())
        })
    }

    fn import_counted(&self, link_id: u64, counts: &[(CapSlot, u64)]) -> StoreResult<()> {
        self.block(async {
            let client = self.shared.client().await?;
            for &(slot, count) in counts {
                let (id, slot_n, count) = (
                    sql_ms(link_id),
                    i32::try_from(slot.stored()).unwrap_or(i32::MAX),
                    sql_ms(count),
                );
                client
                    .exec(
                        "INSERT INTO link_claims (link_id, slot, used) VALUES ($1, $2, $3)
                         ON CONFLICT (link_id, slot)
                         DO UPDATE SET used = greatest(link_claims.used, EXCLUDED.used)",
                        &[&id, &slot_n, &count],
                    )
                    .await
                    .map_err(db_error)?;
            }
            Ok(())
        })
    }
}

impl Shared {
    /// Raises every slot of the claim, or none (the transaction rolls back on a full one).
    async fn claim(&self, claim: &VisitClaim) -> StoreResult<ClaimOutcome> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        for &(slot, cap) in &claim.slots {
            let (id, slot_n, cap) = (
                sql_ms(claim.link_id),
                i32::try_from(slot.stored()).unwrap_or(i32::MAX),
                sql_ms(cap),
            );
            let params: [&(dyn ToSql + Sync); 3] = [&id, &slot_n, &cap];
            let raised = tx
                .exec(
                    "INSERT INTO link_claims (link_id, slot, used) VALUES ($1, $2, 1)
                     ON CONFLICT (link_id, slot) DO UPDATE SET used = link_claims.used + 1
                     WHERE link_claims.used < $3",
                    &params,
                )
                .await
                .map_err(db_error)?;
            if raised == 0 {
                // Nothing was counted: the rollback undoes the slots raised before this one.
                tx.rollback().await.map_err(db_error)?;
                return Ok(ClaimOutcome::Full(slot));
            }
        }
        tx.commit().await.map_err(db_error)?;
        Ok(ClaimOutcome::Granted)
    }
}
