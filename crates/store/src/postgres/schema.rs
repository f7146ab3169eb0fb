//! The schema: the migrations in `migrations/`, one file per version, and applying those a
//! database lacks when the store opens, under an advisory lock so that instances starting
//! together apply each once.

use deadpool_postgres::GenericClient;

use super::{db_error, Cached, Shared};
use crate::StoreResult;

/// The schema, one file per version, applied in order at start-up.
const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("migrations/0001_init.sql")),
    (2, include_str!("migrations/0002_shared_records.sql")),
    (3, include_str!("migrations/0003_link_options.sql")),
    (4, include_str!("migrations/0004_leads.sql")),
    (5, include_str!("migrations/0005_reviews.sql")),
    (6, include_str!("migrations/0006_outbox.sql")),
    (7, include_str!("migrations/0007_accounts.sql")),
    (8, include_str!("migrations/0008_quotas.sql")),
    (9, include_str!("migrations/0009_domains.sql")),
    (10, include_str!("migrations/0010_tls.sql")),
];
/// Advisory lock names (hashed to the lock's 64-bit key by the database).
const LOCK_MIGRATE: &str = "vshortlink:migrate";

impl Shared {
    /// Applies the migrations this database lacks, under an advisory lock so that instances
    /// starting together apply each once.
    pub(super) async fn migrate(&self) -> StoreResult<()> {
        let mut client = self.client().await?;
        client
            .exec(
                "SELECT pg_advisory_lock(hashtextextended($1, 0))",
                &[&LOCK_MIGRATE],
            )
            .await
            .map_err(db_error)?;
        let outcome = async {
            client
                .batch_execute(
                    "CREATE TABLE IF NOT EXISTS schema_versions (
                         version INT PRIMARY KEY,
                         applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
                )
                .await
                .map_err(db_error)?;
            let applied: Vec<i32> = client
                .rows("SELECT version FROM schema_versions", &[])
                .await
                .map_err(db_error)?
                .iter()
                .map(|r| r.get(0))
                .collect();
            for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| !applied.contains(v)) {
                let tx = client.transaction().await.map_err(db_error)?;
                tx.batch_execute(sql).await.map_err(db_error)?;
                tx.exec(
                    "INSERT INTO schema_versions (version) VALUES ($1)",
                    &[version],
                )
                .await
                .map_err(db_error)?;
                tx.commit().await.map_err(db_error)?;
                tracing::info!(version, "postgres schema migrated");
            }
            Ok(())
        }
        .await;
        let unlocked = client
            .exec(
                "SELECT pg_advisory_unlock(hashtextextended($1, 0))",
                &[&LOCK_MIGRATE],
            )
            .await
            .map_err(db_error);
        outcome.and(unlocked.map(|_| ()))
    }
}
