//! Visits in PostgreSQL: each batch is one transaction of multi-row inserts, the records and
//! the batch's [`Tally`] added to the counters with `INSERT … ON CONFLICT DO UPDATE SET n =
//! n + excluded.n`. Statistics read the counters, as with sled.

use std::collections::HashMap;

use deadpool_postgres::GenericClient;

use super::{bump, db_error, rust_ms, sql_ms, Cached, PgStore, Shared};
use crate::model::hll::Hll;
use crate::model::tally::Tally;
use crate::{
    DayCount, Dimension, Millis, NewVisit, StoreError, StoreResult, SummaryBuilder, SummarySpan,
    Visit, VisitPage, VisitStore, VisitSummary, VisitTotals,
};

fn dim_code(dim: Dimension) -> i16 {
    i16::from(dim.stored())
}

fn dim_of(code: i16) -> Option<Dimension> {
    u8::try_from(code).ok().and_then(Dimension::of_stored)
}

/// A day's counter of creates or visits, as [`VisitStore::day_counts`] reads them.
fn day_counter(kind: &str, day: u64) -> String {
    format!("{kind}:{day}")
}

/// The `meta` key of a visit journal's position.
fn journal_key(journal: &str) -> String {
    format!("visit_journal:{journal}")
}

fn i64s(values: impl Iterator<Item = u64>) -> Vec<i64> {
    values.map(sql_ms).collect()
}

impl VisitStore for PgStore {
    fn record_visits(&self, visits: &mut [NewVisit]) -> StoreResult<()> {
        self.block(self.shared.write_visits(visits, false, None))
    }

    fn import_visits(&self, visits: &mut [NewVisit]) -> StoreResult<()> {
        self.block(self.shared.write_visits(visits, true, None))
    }

    fn record_journaled_visits(
        &self,
        visits: &mut [NewVisit],
        journal: &str,
        position: &[u8],
    ) -> StoreResult<()> {
        self.block(
            self.shared
                .write_visits(visits, false, Some((journal, position))),
        )
    }

    /// Each instance's journal has a row of its own in `meta` (its name is the journal's id,
    /// so instances sharing the database never read one another's position).
    fn journal_position(&self, journal: &str) -> StoreResult<Option<Vec<u8>>> {
        self.block(async {
            let client = self.shared.client().await?;
            let row = client
                .row_opt(
                    "SELECT value FROM meta WHERE key = $1",
                    &[&journal_key(journal)],
                )
                .await
                .map_err(db_error)?;
            Ok(row.map(|r| r.get::<_, Vec<u8>>(0)))
        })
    }

    fn last_visit_id(&self) -> StoreResult<u64> {
        self.block(async {
            let client = self.shared.client().await?;
            let row = client
                .row("SELECT last_value, is_called FROM visit_ids", &[])
                .await
                .map_err(db_error)?;
            let called: bool = row.get(1);
            Ok(if called { rust_ms(row.get(0)) } else { 0 })
        })
    }

    fn recent_visits(
        &self,
        link_id: u64,
        before: Option<u64>,
        limit: usize,
    ) -> StoreResult<VisitPage> {
        self.block(self.shared.visit_page(link_id, before, limit, true))
    }

    fn visits_page(
        &self,
        link_id: u64,
        after: Option<u64>,
        limit: usize,
    ) -> StoreResult<VisitPage> {
        self.block(self.shared.visit_page(link_id, after, limit, false))
    }

    fn visit_totals(&self, link_id: u64) -> StoreResult<VisitTotals> {
        self.block(async {
            let client = self.shared.client().await?;
            let row = client
                .row_opt(
                    "SELECT visits, bots FROM visit_totals WHERE link_id = $1",
                    &[&sql_ms(link_id)],
                )
                .await
                .map_err(db_error)?;
            Ok(row.map_or(VisitTotals::default(), |r| VisitTotals {
                visits: rust_ms(r.get(0)),
                bots: rust_ms(r.get(1)),
            }))
        })
    }

    /// Hours inside `from..to`; top lists and distinct visitors over the whole UTC days the
    /// range touches (what the counters keep).
    fn visit_summary(&self, link_id: u64, from: Millis, to: Millis) -> StoreResult<VisitSummary> {
        self.block(async {
            let Some(span) = SummarySpan::of(from, to) else {
                return Ok(VisitSummary::default());
            };
            let mut summary = SummaryBuilder::new(span);
            let client = self.shared.client().await?;
            let link = sql_ms(link_id);
            for row in client
                .rows(
                    "SELECT hour, visits, bots FROM visit_hours
                     WHERE link_id = $1 AND hour BETWEEN $2 AND $3 ORDER BY hour",
                    &[&link, &sql_ms(span.first_hour), &sql_ms(span.last_hour)],
                )
                .await
                .map_err(db_error)?
            {
                summary.add_hour(
                    rust_ms(row.get(0)),
                    rust_ms(row.get(1)),
                    rust_ms(row.get(2)),
                );
            }
            let (first_day, last_day) = (sql_ms(span.first_day), sql_ms(span.last_day));
            let days: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
                [&link, &first_day, &last_day];
            for row in client
                .rows(
                    "SELECT dim, value, sum(n)::bigint FROM visit_dims
                     WHERE link_id = $1 AND day BETWEEN $2 AND $3 GROUP BY dim, value",
                    &days,
                )
                .await
                .map_err(db_error)?
            {
                if let Some(dim) = dim_of(row.get(0)) {
                    summary.add_dim(dim, row.get::<_, String>(1), rust_ms(row.get(2)));
                }
            }
            for row in client
                .rows(
                    "SELECT sketch FROM visit_uniques WHERE link_id = $1 AND day BETWEEN $2 AND $3",
                    &days,
                )
                .await
                .map_err(db_error)?
            {
                let bytes: Vec<u8> = row.get(0);
                if let Some(hll) = Hll::from_bytes(&bytes) {
                    summary.add_uniques(&hll);
                }
            }
            Ok(summary.finish())
        })
    }

    fn prune_visits(&self, before: Millis, limit: usize) -> StoreResult<u64> {
        self.block(async {
            let client = self.shared.client().await?;
            let n = client
                .exec(
                    "DELETE FROM visits WHERE id IN (
                         SELECT id FROM visits WHERE at < $1 ORDER BY at LIMIT $2)",
                    &[&sql_ms(before), &i64::try_from(limit).unwrap_or(i64::MAX)],
                )
                .await
                .map_err(db_error)?;
            Ok(n)
        })
    }

    fn day_counts(&self, from_day: u64, to_day: u64) -> StoreResult<Vec<DayCount>> {
        self.block(async {
            let client = self.shared.client().await?;
            let names: Vec<String> = (from_day..=to_day)
                .flat_map(|d| [day_counter("creates", d), day_counter("visits", d)])
                .collect();
            let rows = client
                .rows(
                    "SELECT name, sum(n)::bigint FROM counters WHERE name = ANY($1) GROUP BY name",
                    &[&names],
                )
                .await
                .map_err(db_error)?;
            let sums: HashMap<String, i64> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
            Ok((from_day..=to_day)
                .map(|day| DayCount {
                    day,
                    creates: rust_ms(sums.get(&day_counter("creates", day)).copied().unwrap_or(0)),
                    visits: rust_ms(sums.get(&day_counter("visits", day)).copied().unwrap_or(0)),
                })
                .collect())
        })
    }
}

impl Shared {
    /// Writes a batch: ids from the `visit_ids` sequence (or, for an import, the records'
    /// own, after which the sequence moves past them), records, then counters.
    /// `journal`: the journal and position a fold reached, written in the same transaction.
    async fn write_visits(
        &self,
        visits: &mut [NewVisit],
        preset: bool,
        journal: Option<(&str, &[u8])>,
    ) -> StoreResult<()> {
        if visits.is_empty() && journal.is_none() {
            return Ok(());
        }
        let mut client = self.client().await?;
        if !preset {
            let rows = client
                .rows(
                    "SELECT nextval('visit_ids') FROM generate_series(1, $1::bigint)",
                    &[&i64::try_from(visits.len()).unwrap_or(i64::MAX)],
                )
                .await
                .map_err(db_error)?;
            for (new, row) in visits.iter_mut().zip(rows) {
                new.visit.id = rust_ms(row.get(0));
            }
        }
        let tally = Tally::of(visits);
        let tx = client.transaction().await.map_err(db_error)?;
        let ids = i64s(visits.iter().map(|v| v.visit.id));
        let links = i64s(visits.iter().map(|v| v.visit.link_id));
        let ats = i64s(visits.iter().map(|v| v.visit.at));
        let records = visits
            .iter()
            .map(|v| serde_json::to_value(&v.visit))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| StoreError::Backend(format!("visit record: {e}")))?;
        tx.exec(
            "INSERT INTO visits (id, link_id, at, record)
             SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::jsonb[])
             ON CONFLICT (id) DO NOTHING",
            &[&ids, &links, &ats, &records],
        )
        .await
        .map_err(db_error)?;
        if preset {
            tx.exec(
                "SELECT setval('visit_ids', greatest($1, (SELECT last_value FROM visit_ids)))",
                &[&ids.iter().copied().max().unwrap_or(1).max(1)],
            )
            .await
            .map_err(db_error)?;
        }
        add_tally(&tx, &tally).await?;
        if let Some((name, position)) = journal {
            tx.exec(
                "INSERT INTO meta (key, value) VALUES ($1, $2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &[&journal_key(name), &position],
            )
            .await
            .map_err(db_error)?;
        }
        tx.commit().await.map_err(db_error)?;
        Ok(())
    }

    /// A page of a link's visits: after a cursor oldest first, or before one newest first.
    async fn visit_page(
        &self,
        link_id: u64,
        cursor: Option<u64>,
        limit: usize,
        newest_first: bool,
    ) -> StoreResult<VisitPage> {
        let client = self.client().await?;
        let sql = if newest_first {
            "SELECT record FROM visits WHERE link_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3"
        } else {
            "SELECT record FROM visits WHERE link_id = $1 AND id > $2 ORDER BY id LIMIT $3"
        };
        let cursor = match (cursor, newest_first) {
            (Some(c), _) => sql_ms(c),
            (None, true) => i64::MAX,
            (None, false) => 0,
        };
        let rows = client
            .rows(
                sql,
                &[
                    &sql_ms(link_id),
                    &cursor,
                    &i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX),
                ],
            )
            .await
            .map_err(db_error)?;
        let mut items = rows
            .iter()
            .map(|r| {
                serde_json::from_value::<Visit>(r.get(0)).map_err(|e| StoreError::Corrupt {
                    tree: "visits",
                    detail: e.to_string(),
                })
            })
            .collect::<StoreResult<Vec<Visit>>>()?;
        let next = if items.len() > limit {
            items.truncate(limit);
            items.last().map(|v| v.id)
        } else {
            None
        };
        Ok(VisitPage { items, next })
    }
}

/// Adds a batch's counters. Rows are written in key order (the tally's maps are ordered), so
/// two instances adding to the same rows lock them in the same order and never deadlock.
async fn add_tally(client: &impl GenericClient, tally: &Tally) -> StoreResult<()> {
    let keys: Vec<&(u64, u64)> = tally.hours.keys().collect();
    let counts: Vec<&(u64, u64)> = tally.hours.values().collect();
    client
        .exec(
            "INSERT INTO visit_hours (link_id, hour, visits, bots)
             SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[])
             ON CONFLICT (link_id, hour) DO UPDATE
             SET visits = visit_hours.visits + excluded.visits,
                 bots = visit_hours.bots + excluded.bots",
            &[
                &i64s(keys.iter().map(|k| k.0)),
                &i64s(keys.iter().map(|k| k.1)),
                &i64s(counts.iter().map(|c| c.0)),
                &i64s(counts.iter().map(|c| c.1)),
            ],
        )
        .await
        .map_err(db_error)?;
    let dims: Vec<i16> = tally.dims.keys().map(|k| dim_code(k.2)).collect();
    let values: Vec<&str> = tally.dims.keys().map(|k| k.3.as_str()).collect();
    client
        .exec(
            "INSERT INTO visit_dims (link_id, day, dim, value, n)
             SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::smallint[], $4::text[], $5::bigint[])
             ON CONFLICT (link_id, day, dim, value) DO UPDATE SET n = visit_dims.n + excluded.n",
            &[
                &i64s(tally.dims.keys().map(|k| k.0)),
                &i64s(tally.dims.keys().map(|k| k.1)),
                &dims,
                &values,
                &i64s(tally.dims.values().copied()),
            ],
        )
        .await
        .map_err(db_error)?;
    let (links, totals): (Vec<&u64>, Vec<&(u64, u64)>) = tally.totals.iter().unzip();
    client
        .exec(
            "INSERT INTO visit_totals (link_id, visits, bots)
             SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[])
             ON CONFLICT (link_id) DO UPDATE
             SET visits = visit_totals.visits + excluded.visits,
                 bots = visit_totals.bots + excluded.bots",
            &[
                &i64s(links.into_iter().copied()),
                &i64s(totals.iter().map(|t| t.0)),
                &i64s(totals.iter().map(|t| t.1)),
            ],
        )
        .await
        .map_err(db_error)?;
    add_uniques(client, tally).await?;
    let days: Vec<(String, i64)> = tally
        .days
        .iter()
        .map(|(day, n)| (format!("visits:{day}"), sql_ms(*n)))
        .collect();
    bump(client, &days).await
}

/// Merges the batch's distinct-visitor sketches into the stored ones. A sketch is merged in
/// Rust, so its rows are created first and then locked (in key order) for the merge.
async fn add_uniques(client: &impl GenericClient, tally: &Tally) -> StoreResult<()> {
    if tally.uniques.is_empty() {
        return Ok(());
    }
    let links = i64s(tally.uniques.keys().map(|k| k.0));
    let days = i64s(tally.uniques.keys().map(|k| k.1));
    let empty = Hll::new().to_bytes();
    client
        .exec(
            "INSERT INTO visit_uniques (link_id, day, sketch)
             SELECT l, d, $3 FROM unnest($1::bigint[], $2::bigint[]) AS u(l, d)
             ON CONFLICT (link_id, day) DO NOTHING",
            &[&links, &days, &empty],
        )
        .await
        .map_err(db_error)?;
    let rows = client
        .rows(
            "SELECT v.link_id, v.day, v.sketch FROM visit_uniques v
             JOIN unnest($1::bigint[], $2::bigint[]) AS u(l, d) ON v.link_id = u.l AND v.day = u.d
             ORDER BY v.link_id, v.day FOR UPDATE OF v",
            &[&links, &days],
        )
        .await
        .map_err(db_error)?;
    let stored: HashMap<(u64, u64), Vec<u8>> = rows
        .iter()
        .map(|r| ((rust_ms(r.get(0)), rust_ms(r.get(1))), r.get(2)))
        .collect();
    let mut sketches = Vec::with_capacity(tally.uniques.len());
    for (key, batch) in &tally.uniques {
        let mut hll = stored
            .get(key)
            .and_then(|bytes| Hll::from_bytes(bytes))
            .unwrap_or_default();
        hll.merge(batch);
        sketches.push(hll.to_bytes());
    }
    client
        .exec(
            "UPDATE visit_uniques v SET sketch = u.s
             FROM unnest($1::bigint[], $2::bigint[], $3::bytea[]) AS u(l, d, s)
             WHERE v.link_id = u.l AND v.day = u.d",
            &[&links, &days, &sketches],
        )
        .await
        .map_err(db_error)?;
    Ok(())
}
