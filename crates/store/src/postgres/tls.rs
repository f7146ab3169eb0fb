//! HTTPS's certificate state on PostgreSQL (`TlsStore`): rows of the `tls` table (migration
//! 10), so that every instance serves the certificates the one that ordered wrote.

use super::{db_error, Cached, PgStore};
use crate::{StoreResult, TlsStore};

impl TlsStore for PgStore {
    fn tls_get(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        self.block(async {
            let client = self.shared.client().await?;
            let row = client
                .row_opt("SELECT value FROM tls WHERE key = $1", &[&key])
                .await
                .map_err(db_error)?;
            Ok(row.map(|r| r.get(0)))
        })
    }

    fn tls_put(&self, key: &str, value: &[u8]) -> StoreResult<()> {
        self.block(async {
            let client = self.shared.client().await?;
            client
                .exec(
                    "INSERT INTO tls (key, value) VALUES ($1, $2)
                     ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                    &[&key, &value],
                )
                .await
                .map_err(db_error)?;
            Ok(())
        })
    }

    fn tls_delete(&self, key: &str) -> StoreResult<()> {
        self.block(async {
            let client = self.shared.client().await?;
            client
                .exec("DELETE FROM tls WHERE key = $1", &[&key])
                .await
                .map_err(db_error)?;
            Ok(())
        })
    }
}
