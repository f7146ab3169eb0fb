//! `vshortlink check` on PostgreSQL: verifies, read only, what the writes keep and the schema
//! does not enforce (the unique index on owned codes and the primary keys need no check).
//! Each check says what it covered; each fault names the row. All of it reads one snapshot
//! (a read-only `REPEATABLE READ` transaction), so instances writing meanwhile cannot make
//! counts and rows disagree.
//!
//! - no pooled code is owned by a link (the pool and the links are two tables: nothing but
//!   the writes keeps a code out of both), and each pooled code is as long as its pool;
//! - every link has a status the store knows;
//! - the link id segments start past every link's id, and each id sequence (visits, leads,
//!   reviews, the webhook outbox and its log) past its table's highest id: else a later
//!   create or insert would collide with a row there;
//! - the link counters by status match the rows;
//! - the rows that belong to a link (visits, claims, leads, reviews) have their link (no
//!   foreign keys: links are never deleted, and the hot paths do not pay for the check).
//!
//! There is no dedup index to check: dedup reads the links themselves (`links_dedup`).

use tokio_postgres::IsolationLevel;

use super::{db_error, status_counter, status_of, PgStore, Shared};
use crate::{CheckReport, LinkStatus, StoreResult};

/// At most this many faults of one kind are listed (the count is always given).
const MAX_LISTED: i64 = 20;

/// The id sequences and the column of the table each numbers.
const SEQUENCES: [(&str, &str, &str); 5] = [
    ("visit_ids", "visits", "id"),
    ("lead_ids", "leads", "id"),
    ("review_ids", "reviews", "id"),
    ("outbox_ids", "outbox", "id"),
    ("outbox_log_ids", "outbox_log", "seq"),
];

/// The tables whose rows belong to a link, by `link_id`.
const BELONGING: [&str; 6] = [
    "visits",
    "link_claims",
    "leads",
    "reviews",
    "review_queue",
    "review_verdicts",
];

impl PgStore {
    /// Verifies what the database does not enforce (read only); see the module
    /// documentation.
    pub fn check(&self) -> StoreResult<CheckReport> {
        self.block(self.shared.check())
    }
}

impl Shared {
    async fn check(&self) -> StoreResult<CheckReport> {
        let mut client = self.client().await?;
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(db_error)?;
        let mut report = CheckReport::default();
        let count = |sql: String| {
            let tx = &tx;
            async move {
                let row = tx.query_one(&sql, &[]).await.map_err(db_error)?;
                Ok::<i64, crate::StoreError>(row.get(0))
            }
        };

        // Pools.
        let pooled = count("SELECT count(*) FROM pool".into()).await?;
        let owned_sql = "FROM pool p JOIN links l ON l.code = p.code AND l.status <> 3";
        let owned = count(format!("SELECT count(*) {owned_sql}")).await?;
        for row in tx
            .query(
                &format!(
                    "SELECT p.code, p.length, l.id {owned_sql} ORDER BY p.code LIMIT {MAX_LISTED}"
                ),
                &[],
            )
            .await
            .map_err(db_error)?
        {
            let (code, length, id): (String, i16, i64) = (row.get(0), row.get(1), row.get(2));
            report.faults.push(format!(
                "pooled and live: `{code}` sits in pool {length} and is owned by link {id}"
            ));
        }
        more(&mut report, "pooled and live", owned);
        let misfit_sql = "FROM pool WHERE length <> char_length(code)";
        let misfits = count(format!("SELECT count(*) {misfit_sql}")).await?;
        for row in tx
            .query(
                &format!("SELECT code, length {misfit_sql} ORDER BY code LIMIT {MAX_LISTED}"),
                &[],
            )
            .await
            .map_err(db_error)?
        {
            let (code, length): (String, i16) = (row.get(0), row.get(1));
            report.faults.push(format!(
                "pools: `{code}` sits in pool {length}, not its length"
            ));
        }
        more(&mut report, "pools", misfits);
        report.ok(format!(
            "{pooled} pooled codes: none owned by a link ({owned} are), each as long as its pool \
             ({misfits} not)"
        ));

        // Statuses and the counters by status.
        let mut by_status = [0i64; 4];
        let mut unknown = 0i64;
        let mut highest = 0i64;
        for row in tx
            .query(
                "SELECT status, count(*), coalesce(max(id), 0) FROM links GROUP BY status",
                &[],
            )
            .await
            .map_err(db_error)?
        {
            let (status, n, max): (i16, i64, i64) = (row.get(0), row.get(1), row.get(2));
            highest = highest.max(max);
            match status_of(status) {
                Ok(status) => by_status[status_index(status)] = n,
                Err(_) => {
                    unknown += n;
                    report.faults.push(format!(
                        "links: {n} link(s) have the status {status}, which this store does not know"
                    ));
                }
            }
        }
        let links: i64 = by_status.iter().sum::<i64>() + unknown;
        for status in LinkStatus::ALL {
            let counted = by_status[status_index(status)];
            let name = status_counter(status);
            let stored = tx
                .query_one(
                    "SELECT coalesce(sum(n), 0)::bigint FROM counters WHERE name = $1",
                    &[&name],
                )
                .await
                .map_err(db_error)?
                .get::<_, i64>(0);
            if stored != counted {
                report.faults.push(format!(
                    "counters: {name}: the counter says {stored}, the rows {counted}"
                ));
            }
        }
        report.ok(format!(
            "{links} links: their statuses ({unknown} unknown) and the counters by status"
        ));

        // Ids: the link segments and the sequences ahead of every row.
        match tx
            .query_opt("SELECT next FROM id_blocks WHERE name = 'link'", &[])
            .await
            .map_err(db_error)?
        {
            Some(row) => {
                let next: i64 = row.get(0);
                if next <= highest {
                    report.faults.push(format!(
                        "id segments: the next link id is {next}, not past the highest id \
                         {highest}"
                    ));
                }
            }
            None => report
                .faults
                .push("id segments: `id_blocks` has no `link` row".into()),
        }
        for (sequence, table, column) in SEQUENCES {
            let row = tx
                .query_one(
                    &format!("SELECT last_value, is_called FROM {sequence}"),
                    &[],
                )
                .await
                .map_err(db_error)?;
            let (last, called): (i64, bool) = (row.get(0), row.get(1));
            let next = last + i64::from(called);
            let max = count(format!("SELECT coalesce(max({column}), 0) FROM {table}")).await?;
            if next <= max {
                report.faults.push(format!(
                    "id sequences: `{sequence}` gives {next} next, not past the highest id {max} \
                     in `{table}`"
                ));
            }
        }
        report.ok(format!(
            "the link id segments against the highest link id ({highest}), and the id \
             sequences of {} tables against their rows",
            SEQUENCES.len()
        ));

        // Rows without their link.
        for table in BELONGING {
            let orphans = count(format!(
                "SELECT count(*) FROM {table} t WHERE NOT EXISTS \
                 (SELECT 1 FROM links l WHERE l.id = t.link_id)"
            ))
            .await?;
            if orphans > 0 {
                report.faults.push(format!(
                    "belonging rows: {orphans} row(s) of `{table}` name a link that does not exist"
                ));
            }
        }
        report.ok(format!(
            "the rows of {} tables that belong to a link against the links",
            BELONGING.len()
        ));
        tx.commit().await.map_err(db_error)?;
        Ok(report)
    }
}

/// Says how many faults of a kind went unlisted.
fn more(report: &mut CheckReport, kind: &str, count: i64) {
    if count > MAX_LISTED {
        report
            .faults
            .push(format!("{kind}: {} more not listed", count - MAX_LISTED));
    }
}

fn status_index(status: LinkStatus) -> usize {
    match status {
        LinkStatus::Active => 0,
        LinkStatus::Expired => 1,
        LinkStatus::Deleted => 2,
        LinkStatus::Archived => 3,
    }
}
