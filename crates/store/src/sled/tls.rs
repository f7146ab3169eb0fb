//! HTTPS's certificate state on sled (`TlsStore`): the `tls` tree, values by key as the
//! services wrote them, each write flushed before it returns.

use super::errors::backend;
use super::SledStore;
use crate::{StoreResult, TlsStore};

impl TlsStore for SledStore {
    fn tls_get(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        Ok(self
            .tls
            .get(key.as_bytes())
            .map_err(backend)?
            .map(|v| v.to_vec()))
    }

    fn tls_put(&self, key: &str, value: &[u8]) -> StoreResult<()> {
        self.space.admit(0)?;
        self.tls.insert(key.as_bytes(), value).map_err(backend)?;
        self.flusher.wait_durable()
    }

    fn tls_delete(&self, key: &str) -> StoreResult<()> {
        self.tls.remove(key.as_bytes()).map_err(backend)?;
        self.flusher.wait_durable()
    }
}
