//! Accounts on PostgreSQL (`AccountStore`): `accounts` (each record's bytes by kind and id),
//! `accounts_version` (raised by every write, which names the version it was checked
//! against), and `audit`. A write notifies every instance (`ACCOUNTS_CHANGED` on the links'
//! channel), which reloads its directory.

use super::{db_error, rust_ms, sql_ms, Cached, PgStore, CHANNEL};
use crate::{
    AccountStore, AccountWrite, AccountsSnapshot, AuditEntry, AuditPage, AuditQuery, Millis,
    StoreResult,
};

/// The notification that account records changed. Not a code: codes have no `*`.
pub(super) const ACCOUNTS_CHANGED: &str = "*accounts";

impl AccountStore for PgStore {
    fn accounts(&self) -> StoreResult<AccountsSnapshot> {
        self.block(async {
            let mut client = self.shared.client().await?;
            // One snapshot for the version and the records.
            let tx = client
                .build_transaction()
                .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await
                .map_err(db_error)?;
            let version = tx
                .row("SELECT version FROM accounts_version", &[])
                .await
                .map_err(db_error)?;
            let rows = tx
                .rows("SELECT body FROM accounts ORDER BY kind, id", &[])
                .await
                .map_err(db_error)?;
            tx.commit().await.map_err(db_error)?;
            Ok(AccountsSnapshot {
                version: rust_ms(version.get(0)),
                records: rows.iter().map(|r| r.get::<_, Vec<u8>>(0)).collect(),
            })
        })
    }

    fn write_accounts(&self, version: u64, write: &AccountWrite) -> StoreResult<Option<u64>> {
        self.block(async {
            let mut client = self.shared.client().await?;
            let tx = client.transaction().await.map_err(db_error)?;
            let raised = tx
                .exec(
                    "UPDATE accounts_version SET version = version + 1 WHERE version = $1",
                    &[&sql_ms(version)],
                )
                .await
                .map_err(db_error)?;
            if raised == 0 {
                return Ok(None);
            }
            for address in &write.delete {
                tx.exec(
                    "DELETE FROM accounts WHERE kind = $1 AND id = $2",
                    &[&address.kind, &address.id],
                )
                .await
                .map_err(db_error)?;
            }
            for record in &write.put {
                let address = record.address();
                tx.exec(
                    "INSERT INTO accounts (kind, id, body) VALUES ($1, $2, $3)
                     ON CONFLICT (kind, id) DO UPDATE SET body = excluded.body",
                    &[&address.kind, &address.id, &record.encode()],
                )
                .await
                .map_err(db_error)?;
            }
            tx.exec("SELECT pg_notify($1, $2)", &[&CHANNEL, &ACCOUNTS_CHANGED])
                .await
                .map_err(db_error)?;
            tx.commit().await.map_err(db_error)?;
            Ok(Some(version + 1))
        })
    }

    fn audit_append(&self, entries: &[AuditEntry]) -> StoreResult<()> {
        if entries.is_empty() {
            return Ok(());
        }
        self.block(async {
            let mut client = self.shared.client().await?;
            let tx = client.transaction().await.map_err(db_error)?;
            for e in entries {
                let count = e.count.map(sql_ms);
                tx.exec(
                    "INSERT INTO audit (at, actor, action, target, ip, team, count)
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    &[
                        &sql_ms(e.at),
                        &e.actor,
                        &e.action,
                        &e.target,
                        &e.ip,
                        &e.team,
                        &count,
                    ],
                )
                .await
                .map_err(db_error)?;
            }
            tx.commit().await.map_err(db_error)?;
            Ok(())
        })
    }

    fn audit(&self, query: &AuditQuery) -> StoreResult<AuditPage> {
        self.block(async {
            let client = self.shared.client().await?;
            let take = i64::try_from(query.limit)
                .unwrap_or(i64::MAX)
                .saturating_add(1);
            let rows = client
                .rows(
                    "SELECT id, at, actor, action, target, ip, team, count FROM audit
                     WHERE id < $1
                       AND ($2::text IS NULL OR actor = $2)
                       AND ($3::text IS NULL OR action = $3)
                       AND ($4::text IS NULL OR team = $4)
                       AND ($5::bigint IS NULL OR at >= $5)
                       AND ($6::bigint IS NULL OR at < $6)
                     ORDER BY id DESC LIMIT $7",
                    &[
                        &sql_ms(query.before.unwrap_or(u64::MAX)),
                        &query.actor,
                        &query.action,
                        &query.team,
                        &query.from.map(sql_ms),
                        &query.to.map(sql_ms),
                        &take,
                    ],
                )
                .await
                .map_err(db_error)?;
            let more = rows.len() > query.limit;
            let entries: Vec<AuditEntry> = rows
                .iter()
                .take(query.limit)
                .map(|r| AuditEntry {
                    id: rust_ms(r.get(0)),
                    at: rust_ms(r.get(1)),
                    actor: r.get(2),
                    action: r.get(3),
                    target: r.get(4),
                    ip: r.get(5),
                    team: r.get(6),
                    count: r.get::<_, Option<i64>>(7).map(rust_ms),
                })
                .collect();
            let next = if more {
                entries.last().map(|e| e.id)
            } else {
                None
            };
            Ok(AuditPage { entries, next })
        })
    }

    fn audit_prune(&self, before: Millis) -> StoreResult<u64> {
        self.block(async {
            let client = self.shared.client().await?;
            let gone = client
                .exec("DELETE FROM audit WHERE at < $1", &[&sql_ms(before)])
                .await
                .map_err(db_error)?;
            Ok(gone)
        })
    }
}
