//! Code pools in PostgreSQL: refills, levels and peeks. Takes happen in the create
//! transaction (`links.rs`), with `FOR UPDATE SKIP LOCKED`.

use super::{bump, counter, db_error, rust_ms, sql_ms, Cached, PgStore};
use crate::{MetaStore, Millis, PoolAdded, PoolBatch, PoolCounts, PoolStore, StoreResult};

/// The metadata key of a length's strategy state.
pub(super) fn strategy_key(length: u8) -> String {
    format!("strategy_state/{length}")
}

impl PoolStore for PgStore {
    /// Adds a batch and the strategy state after it in one transaction. Refills of one length
    /// take turns across instances (a transaction advisory lock), and a code that a live link
    /// owns or that sits in a pool already is skipped.
    fn pool_add(&self, batch: &PoolBatch) -> StoreResult<PoolAdded> {
        self.block(async {
            let length = i16::from(batch.length);
            let mut client = self.shared.client().await?;
            let tx = client.transaction().await.map_err(db_error)?;
            tx.exec(
                "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                &[&format!("vshortlink:pool:{length}")],
            )
            .await
            .map_err(db_error)?;
            let codes: Vec<&str> = batch
                .codes
                .iter()
                .filter(|c| c.len() == usize::from(batch.length))
                .map(String::as_str)
                .collect();
            let tiebreaks: Vec<i64> = if batch.shuffle {
                codes
                    .iter()
                    .map(|_| i64::from(rand::random::<u32>()))
                    .collect()
            } else {
                vec![0; codes.len()]
            };
            let added = tx
                .exec(
                    "INSERT INTO pool (code, length, score, tiebreak)
                     SELECT c, $2, $3, t FROM unnest($1::text[], $4::bigint[]) AS u(c, t)
                     WHERE NOT EXISTS (SELECT 1 FROM links WHERE code = u.c AND status <> 3)
                     ON CONFLICT (code) DO NOTHING",
                    &[&codes, &length, &sql_ms(batch.score), &tiebreaks],
                )
                .await
                .map_err(db_error)?;
            if let Some(state) = &batch.state {
                tx.exec(
                    "INSERT INTO meta (key, value) VALUES ($1, $2)
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    &[&strategy_key(batch.length), state],
                )
                .await
                .map_err(db_error)?;
            }
            bump(
                &tx,
                &[(
                    format!("pool:{length}:generated"),
                    i64::try_from(added).unwrap_or(i64::MAX),
                )],
            )
            .await?;
            tx.commit().await.map_err(db_error)?;
            Ok(PoolAdded {
                added,
                skipped: batch.codes.len() as u64 - added,
            })
        })
    }

    fn pool_counts(&self, length: u8, now: Millis) -> StoreResult<PoolCounts> {
        self.block(async {
            let client = self.shared.client().await?;
            let row = client
                .row(
                    "SELECT count(*) FILTER (WHERE score <= $2), count(*) FILTER (WHERE score > $2)
                     FROM pool WHERE length = $1",
                    &[&i16::from(length), &sql_ms(now)],
                )
                .await
                .map_err(db_error)?;
            Ok(PoolCounts {
                available: rust_ms(row.get(0)),
                cooling: rust_ms(row.get(1)),
                generated_total: counter(&client, &format!("pool:{length}:generated")).await?,
                recycled_total: counter(&client, &format!("pool:{length}:recycled")).await?,
            })
        })
    }

    /// Counts at most `level` available codes: an index range of that size, not the pool.
    fn pool_below(&self, length: u8, now: Millis, level: u64) -> StoreResult<bool> {
        self.block(async {
            let client = self.shared.client().await?;
            let level = i64::try_from(level).unwrap_or(i64::MAX);
            let row = client
                .row(
                    "SELECT count(*) FROM (SELECT 1 FROM pool WHERE length = $1 AND score <= $2
                     ORDER BY score, tiebreak, code LIMIT $3) AS due",
                    &[&i16::from(length), &sql_ms(now), &level],
                )
                .await
                .map_err(db_error)?;
            Ok(row.get::<_, i64>(0) < level)
        })
    }

    fn in_pool(&self, code: &str) -> StoreResult<bool> {
        self.block(async {
            let client = self.shared.client().await?;
            Ok(client
                .row_opt("SELECT 1 FROM pool WHERE code = $1", &[&code])
                .await
                .map_err(db_error)?
                .is_some())
        })
    }

    fn pool_peek(&self, length: u8, limit: usize) -> StoreResult<Vec<(Millis, String)>> {
        self.block(async {
            let client = self.shared.client().await?;
            let rows = client
                .rows(
                    "SELECT score, code FROM pool WHERE length = $1
                     ORDER BY score, tiebreak, code LIMIT $2",
                    &[
                        &i16::from(length),
                        &i64::try_from(limit).unwrap_or(i64::MAX),
                    ],
                )
                .await
                .map_err(db_error)?;
            Ok(rows.iter().map(|r| (rust_ms(r.get(0)), r.get(1))).collect())
        })
    }

    fn strategy_state(&self, length: u8) -> StoreResult<Option<Vec<u8>>> {
        self.meta_get(&strategy_key(length))
    }
}
