//! `tls.mode = "files"`: the certificate and key files, read at start (a bad pair stops the
//! start, naming the key) and then every second: when either file's bytes changed and the two
//! form a valid pair, new handshakes get the new certificate, while open connections keep the
//! one they started with. A pair that is not valid (a half-written renewal, a key for another
//! certificate) is logged once and the old certificate keeps serving.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::certs::{Pair, Resolver};
use super::Expiry;

/// How often the files are read for a change (the spec asks for 5 s at most).
const POLL: Duration = Duration::from_secs(1);

/// The files' bytes as last read (certificate, key): a change is a difference from them.
pub type Seen = (Vec<u8>, Vec<u8>);

/// Reads the pair at start: errors name the key.
pub fn load(cert: &Path, key: &Path) -> Result<(Pair, Seen), String> {
    let chain = std::fs::read(cert)
        .map_err(|e| format!("`tls.cert`: cannot read {}: {e}", cert.display()))?;
    let key_pem =
        std::fs::read(key).map_err(|e| format!("`tls.key`: cannot read {}: {e}", key.display()))?;
    let pair =
        Pair::from_pem(&chain, &key_pem).map_err(|e| format!("`tls.cert`, `tls.key`: {e}"))?;
    Ok((pair, (chain, key_pem)))
}

/// Watches the files until the task is aborted, installing each new valid pair for `host`.
pub async fn watch(
    cert: PathBuf,
    key: PathBuf,
    host: String,
    resolver: Arc<Resolver>,
    expiry: Expiry,
    mut seen: Seen,
) {
    loop {
        tokio::time::sleep(POLL).await;
        let (Ok(chain), Ok(key_pem)) = (tokio::fs::read(&cert).await, tokio::fs::read(&key).await)
        else {
            // A file being replaced (moved away, not yet back): read again next time.
            continue;
        };
        if (&chain, &key_pem) == (&seen.0, &seen.1) {
            continue;
        }
        match Pair::from_pem(&chain, &key_pem) {
            Ok(pair) => {
                resolver.install(&host, pair.key.clone());
                expiry.set(&host, pair.not_after);
                tracing::info!(
                    cert = %cert.display(),
                    not_after = pair.not_after,
                    "tls: the certificate files changed; new connections get the new certificate"
                );
            }
            Err(e) => tracing::warn!(
                cert = %cert.display(),
                key = %key.display(),
                error = %e,
                "tls: the certificate files changed but are not a valid pair; the old certificate keeps serving"
            ),
        }
        seen = (chain, key_pem);
    }
}
