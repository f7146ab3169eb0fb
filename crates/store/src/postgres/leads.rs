//! Leads on PostgreSQL: the `leads` table, keyed by link then id, ids from the `lead_ids`
//! sequence (raised past imported ids, so later leads never collide with them).

use tokio_postgres::types::Json;
use tokio_postgres::Row;

use super::{db_error, rust_ms, sql_ms, Cached, PgStore};
use crate::model::{Lead, LeadPage, Millis};
use crate::{LeadStore, StoreResult};

fn lead(row: &Row) -> Lead {
    let Json(values): Json<Vec<(String, String)>> = row.get(3);
    Lead {
        link_id: rust_ms(row.get(0)),
        id: rust_ms(row.get(1)),
        at: rust_ms(row.get(2)),
        values,
        consent: row.get(4),
    }
}

impl LeadStore for PgStore {
    fn add_lead(&self, mut lead: Lead) -> StoreResult<Lead> {
        self.block(async {
            let client = self.shared.client().await?;
            let values = Json(&lead.values);
            let row = client
                .row(
                    "INSERT INTO leads (link_id, id, at, lead_values, consent)
                     VALUES ($1, nextval('lead_ids'), $2, $3, $4) RETURNING id",
                    &[
                        &sql_ms(lead.link_id),
                        &sql_ms(lead.at),
                        &values,
                        &lead.consent,
                    ],
                )
                .await
                .map_err(db_error)?;
            lead.id = rust_ms(row.get(0));
            Ok(lead)
        })
    }

    fn leads(&self, link_id: u64, before: Option<u64>, limit: usize) -> StoreResult<LeadPage> {
        self.block(async {
            let client = self.shared.client().await?;
            let take = i64::try_from(limit).unwrap_or(i64::MAX).saturating_add(1);
            let rows = client
                .rows(
                    "SELECT link_id, id, at, lead_values, consent FROM leads
                     WHERE link_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3",
                    &[&sql_ms(link_id), &sql_ms(before.unwrap_or(u64::MAX)), &take],
                )
                .await
                .map_err(db_error)?;
            let more = rows.len() > limit;
            let leads: Vec<Lead> = rows.iter().take(limit).map(lead).collect();
            let next = if more {
                leads.last().map(|l| l.id)
            } else {
                None
            };
            Ok(LeadPage { leads, next })
        })
    }

    fn lead_count(&self, link_id: u64) -> StoreResult<u64> {
        self.block(async {
            let client = self.shared.client().await?;
            let row = client
                .row(
                    "SELECT count(*) FROM leads WHERE link_id = $1",
                    &[&sql_ms(link_id)],
                )
                .await
                .map_err(db_error)?;
            Ok(rust_ms(row.get(0)))
        })
    }

    fn lead_links(&self) -> StoreResult<Vec<u64>> {
        self.block(async {
            let client = self.shared.client().await?;
            let rows = client
                .rows("SELECT DISTINCT link_id FROM leads ORDER BY link_id", &[])
                .await
                .map_err(db_error)?;
            Ok(rows.iter().map(|r| rust_ms(r.get(0))).collect())
        })
    }

    fn delete_leads(&self, link_id: u64, before: Option<Millis>) -> StoreResult<u64> {
        self.block(async {
            let client = self.shared.client().await?;
            client
                .exec(
                    "DELETE FROM leads WHERE link_id = $1 AND at < $2",
                    &[&sql_ms(link_id), &sql_ms(before.unwrap_or(u64::MAX))],
                )
                .await
                .map_err(db_error)
        })
    }

    fn import_leads(&self, leads: &[Lead]) -> StoreResult<u64> {
        self.block(async {
            let mut client = self.shared.client().await?;
            let tx = client.transaction().await.map_err(db_error)?;
            let mut written = 0;
            let mut highest = 0;
            for lead in leads.iter().filter(|l| l.id != 0) {
                let values = Json(&lead.values);
                written += tx
                    .exec(
                        "INSERT INTO leads (link_id, id, at, lead_values, consent)
                         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (link_id, id) DO NOTHING",
                        &[
                            &sql_ms(lead.link_id),
                            &sql_ms(lead.id),
                            &sql_ms(lead.at),
                            &values,
                            &lead.consent,
                        ],
                    )
                    .await
                    .map_err(db_error)?;
                highest = highest.max(lead.id);
            }
            if highest > 0 {
                tx.exec(
                    "SELECT setval('lead_ids', greatest($1, (SELECT last_value FROM lead_ids)))",
                    &[&sql_ms(highest)],
                )
                .await
                .map_err(db_error)?;
            }
            tx.commit().await.map_err(db_error)?;
            Ok(written)
        })
    }
}
