//! Domains on PostgreSQL (`DomainStore`): the `domains` table (each record as JSON by id, its
//! host unique), ids from `id_blocks` ('domain'). Every write notifies every instance
//! (`DOMAINS_CHANGED` on the links' channel), which reloads its domains: a domain added on one
//! instance answers on the others as soon as the notification lands.

use tokio_postgres::types::Json;

use super::{db_error, Cached, PgStore, CHANNEL};
use crate::{Domain, DomainAdded, DomainStore, StoreError, StoreResult};

/// The notification that domains changed. Not a code: codes have no `*`.
pub(super) const DOMAINS_CHANGED: &str = "*domains";

impl DomainStore for PgStore {
    fn domains(&self) -> StoreResult<Vec<Domain>> {
        self.block(async {
            let client = self.shared.client().await?;
            let rows = client
                .rows("SELECT record FROM domains ORDER BY id", &[])
                .await
                .map_err(db_error)?;
            Ok(rows.iter().map(|r| r.get::<_, Json<Domain>>(0).0).collect())
        })
    }

    fn add_domain(&self, domain: &Domain) -> StoreResult<DomainAdded> {
        self.block(async {
            let mut client = self.shared.client().await?;
            let tx = client.transaction().await.map_err(db_error)?;
            if tx
                .row_opt("SELECT 1 FROM domains WHERE host = $1", &[&domain.host])
                .await
                .map_err(db_error)?
                .is_some()
            {
                return Ok(DomainAdded::Exists);
            }
            let next: i64 = tx
                .row(
                    "UPDATE id_blocks SET next = next + 1 WHERE name = 'domain' RETURNING next - 1",
                    &[],
                )
                .await
                .map_err(db_error)?
                .get(0);
            let id = u16::try_from(next.max(1))
                .map_err(|_| StoreError::Backend("no domain id is left".into()))?;
            let mut record = domain.clone();
            record.id = id;
            let inserted = tx
                .exec(
                    "INSERT INTO domains (id, host, record) VALUES ($1, $2, $3)
                     ON CONFLICT DO NOTHING",
                    &[&i32::from(id), &record.host, &Json(&record)],
                )
                .await
                .map_err(db_error)?;
            if inserted == 0 {
                return Ok(DomainAdded::Exists);
            }
            tx.exec("SELECT pg_notify($1, $2)", &[&CHANNEL, &DOMAINS_CHANGED])
                .await
                .map_err(db_error)?;
            tx.commit().await.map_err(db_error)?;
            Ok(DomainAdded::Added(record))
        })
    }

    fn put_domain(&self, domain: &Domain) -> StoreResult<bool> {
        self.block(async {
            let mut client = self.shared.client().await?;
            let tx = client.transaction().await.map_err(db_error)?;
            if let Some(row) = tx
                .row_opt("SELECT id FROM domains WHERE host = $1", &[&domain.host])
                .await
                .map_err(db_error)?
            {
                if row.get::<_, i32>(0) != i32::from(domain.id) {
                    return Ok(false);
                }
            }
            tx.exec(
                "INSERT INTO domains (id, host, record) VALUES ($1, $2, $3)
                 ON CONFLICT (id) DO UPDATE SET host = excluded.host, record = excluded.record",
                &[&i32::from(domain.id), &domain.host, &Json(domain)],
            )
            .await
            .map_err(db_error)?;
            tx.exec(
                "UPDATE id_blocks SET next = greatest(next, $1) WHERE name = 'domain'",
                &[&(i64::from(domain.id) + 1)],
            )
            .await
            .map_err(db_error)?;
            tx.exec("SELECT pg_notify($1, $2)", &[&CHANNEL, &DOMAINS_CHANGED])
                .await
                .map_err(db_error)?;
            tx.commit().await.map_err(db_error)?;
            Ok(true)
        })
    }

    fn delete_domain(&self, id: u16) -> StoreResult<bool> {
        self.block(async {
            let mut client = self.shared.client().await?;
            let tx = client.transaction().await.map_err(db_error)?;
            let n = tx
                .exec("DELETE FROM domains WHERE id = $1", &[&i32::from(id)])
                .await
                .map_err(db_error)?;
            tx.exec("SELECT pg_notify($1, $2)", &[&CHANNEL, &DOMAINS_CHANGED])
                .await
                .map_err(db_error)?;
            tx.commit().await.map_err(db_error)?;
            Ok(n == 1)
        })
    }

    fn domain_in_use(&self, id: u16) -> StoreResult<bool> {
        self.block(async {
            let client = self.shared.client().await?;
            Ok(client
                .row_opt(
                    "SELECT 1 FROM links WHERE domain = $1 AND status <> 3 LIMIT 1",
                    &[&i32::from(id)],
                )
                .await
                .map_err(db_error)?
                .is_some())
        })
    }
}
