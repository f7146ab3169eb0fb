//! The review queue and finished reviews on PostgreSQL: `review_queue` (one row a link,
//! leased by `UPDATE … WHERE link_id = (SELECT … FOR UPDATE SKIP LOCKED)`, so instances share
//! the work and never take one link together), `reviews` (the record as JSONB, the
//! screenshot apart) and `review_verdicts` (each link's latest verdict, for the listing).

use tokio_postgres::types::Json;

use super::{db_error, rust_ms, sql_ms, Cached, PgStore};
use crate::model::{Millis, QueuedReview, Review, Trigger, Verdict};
use crate::{ReviewStore, StoreError, StoreResult};

fn small(n: u8) -> i16 {
    i16::from(n)
}

impl ReviewStore for PgStore {
    fn queue_reviews(&self, items: &[(u64, Trigger)], at: Millis) -> StoreResult<u64> {
        self.block(async {
            let mut seen = std::collections::HashSet::new();
            let (ids, triggers): (Vec<i64>, Vec<i16>) = items
                .iter()
                .filter(|(id, _)| seen.insert(*id))
                .map(|&(id, trigger)| (sql_ms(id), small(trigger.stored())))
                .unzip();
            let client = self.shared.client().await?;
            // New rows, or leased ones marked to be reviewed again; free waiting ones stay.
            client
                .exec(
                    "INSERT INTO review_queue (link_id, trigger, at)
                     SELECT id, trigger, $3 FROM unnest($1::bigint[], $2::smallint[]) AS t(id, trigger)
                     ON CONFLICT (link_id) DO UPDATE SET requeue = true
                     WHERE review_queue.leased_until > $3",
                    &[&ids, &triggers, &sql_ms(at)],
                )
                .await
                .map_err(db_error)
        })
    }

    fn take_review(&self, now: Millis, lease: Millis) -> StoreResult<Option<QueuedReview>> {
        self.block(async {
            let client = self.shared.client().await?;
            let row = client
                .row_opt(
                    "UPDATE review_queue SET leased_until = $2, requeue = false
                     WHERE link_id = (
                         SELECT link_id FROM review_queue WHERE leased_until <= $1
                         ORDER BY at, link_id LIMIT 1 FOR UPDATE SKIP LOCKED)
                     RETURNING link_id, trigger, at",
                    &[&sql_ms(now), &sql_ms(now.saturating_add(lease))],
                )
                .await
                .map_err(db_error)?;
            row.map(|row| {
                let trigger = u8::try_from(row.get::<_, i16>(1))
                    .ok()
                    .and_then(Trigger::of_stored)
                    .ok_or_else(|| StoreError::Corrupt {
                        tree: "review_queue",
                        detail: "unknown trigger".into(),
                    })?;
                Ok(QueuedReview {
                    link_id: rust_ms(row.get(0)),
                    trigger,
                    at: rust_ms(row.get(2)),
                })
            })
            .transpose()
        })
    }

    fn renew_review(&self, link_id: u64, until: Millis) -> StoreResult<()> {
        self.block(async {
            let client = self.shared.client().await?;
            client
                .exec(
                    "UPDATE review_queue SET leased_until = greatest(leased_until, $2)
                     WHERE link_id = $1 AND leased_until > 0",
                    &[&sql_ms(link_id), &sql_ms(until)],
                )
                .await
                .map_err(db_error)?;
            Ok(())
        })
    }

    fn review_queue_depth(&self) -> StoreResult<u64> {
        self.block(async {
            let client = self.shared.client().await?;
            let row = client
                .row("SELECT count(*) FROM review_queue", &[])
                .await
                .map_err(db_error)?;
            Ok(rust_ms(row.get(0)))
        })
    }

    fn add_review(&self, mut review: Review, screenshot: Option<&[u8]>) -> StoreResult<Review> {
        self.block(async {
            let mut client = self.shared.client().await?;
            let tx = client.transaction().await.map_err(db_error)?;
            let row = tx
                .row("SELECT nextval('review_ids')", &[])
                .await
                .map_err(db_error)?;
            review.id = rust_ms(row.get(0));
            review.screenshot = screenshot.is_some();
            let link_id = sql_ms(review.link_id);
            tx.exec(
                "INSERT INTO reviews (id, link_id, at, record, screenshot) VALUES ($1, $2, $3, $4, $5)",
                &[
                    &sql_ms(review.id),
                    &link_id,
                    &sql_ms(review.at),
                    &Json(&review),
                    &screenshot,
                ],
            )
            .await
            .map_err(db_error)?;
            tx.exec(
                "INSERT INTO review_verdicts (link_id, verdict) VALUES ($1, $2)
                 ON CONFLICT (link_id) DO UPDATE SET verdict = EXCLUDED.verdict",
                &[&link_id, &small(review.verdict.stored())],
            )
            .await
            .map_err(db_error)?;
            // Out of the queue, unless queued again during the review: then free to be taken.
            tx.exec(
                "DELETE FROM review_queue WHERE link_id = $1 AND NOT requeue",
                &[&link_id],
            )
            .await
            .map_err(db_error)?;
            tx.exec(
                "UPDATE review_queue SET requeue = false, leased_until = 0 WHERE link_id = $1",
                &[&link_id],
            )
            .await
            .map_err(db_error)?;
            tx.commit().await.map_err(db_error)?;
            Ok(review)
        })
    }

    fn reviews(&self, link_id: u64, limit: usize) -> StoreResult<Vec<Review>> {
        self.block(async {
            let client = self.shared.client().await?;
            let rows = client
                .rows(
                    "SELECT record FROM reviews WHERE link_id = $1 ORDER BY id DESC LIMIT $2",
                    &[&sql_ms(link_id), &i64::try_from(limit).unwrap_or(i64::MAX)],
                )
                .await
                .map_err(db_error)?;
            Ok(rows
                .iter()
                .map(|row| row.get::<_, Json<Review>>(0).0)
                .collect())
        })
    }

    fn review_screenshot(&self, link_id: u64, review_id: u64) -> StoreResult<Option<Vec<u8>>> {
        self.block(async {
            let client = self.shared.client().await?;
            let row = client
                .row_opt(
                    "SELECT screenshot FROM reviews WHERE id = $1 AND link_id = $2",
                    &[&sql_ms(review_id), &sql_ms(link_id)],
                )
                .await
                .map_err(db_error)?;
            Ok(row.and_then(|r| r.get::<_, Option<Vec<u8>>>(0)))
        })
    }

    fn links_by_verdict(
        &self,
        verdict: Verdict,
        after: Option<u64>,
        limit: usize,
    ) -> StoreResult<(Vec<u64>, Option<u64>)> {
        self.block(async {
            let client = self.shared.client().await?;
            let take = i64::try_from(limit).unwrap_or(i64::MAX).saturating_add(1);
            let rows = client
                .rows(
                    "SELECT link_id FROM review_verdicts WHERE verdict = $1 AND link_id > $2
                     ORDER BY link_id LIMIT $3",
                    &[&small(verdict.stored()), &after.map_or(-1, sql_ms), &take],
                )
                .await
                .map_err(db_error)?;
            let mut ids: Vec<u64> = rows.iter().map(|r| rust_ms(r.get(0))).collect();
            let next = if ids.len() > limit {
                ids.truncate(limit);
                ids.last().copied()
            } else {
                None
            };
            Ok((ids, next))
        })
    }
}
