//! HTTPS built in (SPEC §26, docs/https.md): `[tls]` into what the accept loop serves.
//!
//! | file | owns |
//! |---|---|
//! | `hosts.rs` | [`CertificateHosts`]: the hosts to hold certificates for (the seam the domains fill) |
//! | `certs.rs` | PEM pairs checked, the SNI resolver, the rustls server configurations |
//! | `files.rs` | `mode = "files"`: the files read at start and re-read when they change |
//! | `acme.rs` | `mode = "acme"`: ordering, renewal, backoff, the account, the job lock |
//!
//! [`Tls`] is what the web layer asks: the server configuration of a handshake (and of a
//! tls-alpn-01 validation's), the answer to an http-01 challenge, whether to send HSTS, the
//! HTTPS port a redirect names. It knows no HTTP status and serves nothing itself.

mod acme;
pub mod certs;
mod files;
pub mod hosts;

use std::sync::Arc;

use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use rustls::ServerConfig;

pub use hosts::CertificateHosts;

use crate::clock::Clock;
use crate::config::{Config, TlsConfig, TlsMode};
use crate::store::Store;
use crate::BoxError;
use certs::{Pair, PemPair, Resolver};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HostLabel {
    host: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// `vsl_tls_certificate_expiry_timestamp_seconds{host}`: when each served certificate ends.
#[derive(Clone, Debug, Default)]
pub struct Expiry(Family<HostLabel, Gauge>);

impl Expiry {
    fn set(&self, host: &str, not_after: i64) {
        self.0
            .get_or_create(&HostLabel {
                host: host.to_string(),
            })
            .set(not_after);
    }
}

/// HTTPS, when `tls.mode` is not `off`.
pub struct Tls {
    config: TlsConfig,
    hosts: CertificateHosts,
    resolver: Arc<Resolver>,
    server_config: Arc<ServerConfig>,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    /// The port of `server.listen`, which redirects to HTTPS name unless it is 443.
    https_port: u16,
    expiry: Expiry,
    orders: Family<OutcomeLabel, Counter>,
    /// The files read at start (`files` mode), which the watcher compares against.
    files_seen: Mutex<Option<files::Seen>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Tls {
    /// HTTPS as configured, or `None` when `tls.mode = "off"`. `files`: the pair is read now
    /// (a missing or bad one stops the start, naming the key). `acme`: the certificates the
    /// store holds are served from the first handshake on; ordering starts with
    /// [`Tls::start`]. `https_port` is the port `server.listen` is bound to.
    pub fn new(
        config: &Config,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        https_port: u16,
    ) -> Result<Option<Arc<Tls>>, BoxError> {
        let tls = &config.tls;
        if !tls.on() {
            return Ok(None);
        }
        let hosts = CertificateHosts::new(&config.default_host());
        let resolver = Arc::new(Resolver::new(hosts.default_host()));
        let server_config = certs::server_config(resolver.clone(), &certs::ALPN)?;
        let this = Tls {
            config: tls.clone(),
            hosts,
            resolver,
            server_config,
            store,
            clock,
            https_port,
            expiry: Expiry::default(),
            orders: Family::default(),
            files_seen: Mutex::new(None),
            tasks: Mutex::new(Vec::new()),
        };
        match tls.mode {
            TlsMode::Off => {}
            TlsMode::Files => {
                let (pair, seen) = files::load(&tls.cert, &tls.key)?;
                this.serve(this.hosts.default_host(), &pair);
                *this.files_seen.lock() = Some(seen);
            }
            TlsMode::Acme => {
                acme::check_ca(&tls.ca)?;
                for host in this.hosts.hosts() {
                    if let Some(pair) = this.stored(&host)? {
                        this.serve(&host, &pair);
                    }
                }
            }
        }
        Ok(Some(Arc::new(this)))
    }

    /// Starts the background work: the files' watcher, or the orderer.
    pub fn start(self: &Arc<Self>) {
        let task = match self.config.mode {
            TlsMode::Off => return,
            TlsMode::Files => {
                let seen = self.files_seen.lock().take().unwrap_or_default();
                tokio::spawn(files::watch(
                    self.config.cert.clone(),
                    self.config.key.clone(),
                    self.hosts.default_host().to_string(),
                    self.resolver.clone(),
                    self.expiry.clone(),
                    seen,
                ))
            }
            TlsMode::Acme => tokio::spawn(acme::run(self.clone())),
        };
        self.tasks.lock().push(task);
    }

    /// Stops the background work (an order in flight is abandoned; the next start looks
    /// again).
    pub fn stop(&self) {
        for task in self.tasks.lock().drain(..) {
            task.abort();
        }
    }

    /// The hosts to hold certificates for: the domains service replaces them.
    pub fn hosts(&self) -> &CertificateHosts {
        &self.hosts
    }

    /// What a handshake on `server.listen` is served with (TLS 1.3 and 1.2; HTTP/2 and
    /// HTTP/1.1 by ALPN; the certificate by SNI).
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.server_config.clone()
    }

    /// The configuration of a tls-alpn-01 validation handshake for `sni`: the challenge's
    /// certificate, when an order for that host is waiting on one. Reads the store (blocking):
    /// only for a configured host, so made-up names cost no read.
    pub fn challenge_config(&self, sni: Option<&str>) -> Option<Arc<ServerConfig>> {
        let host = sni?.to_ascii_lowercase();
        if self.config.mode != TlsMode::Acme || !self.hosts.contains(&host) {
            return None;
        }
        let bytes = self.store.tls_get(&acme::alpn_key(&host)).ok()??;
        let pem: PemPair = serde_json::from_slice(&bytes).ok()?;
        let key = certs::challenge_key(&pem)
            .map_err(
                |e| tracing::warn!(host, error = %e, "tls: the tls-alpn-01 answer is unusable"),
            )
            .ok()?;
        certs::server_config(Arc::new(certs::Single(key)), &[certs::ACME_TLS_ALPN]).ok()
    }

    /// The key authorization answering the http-01 challenge `token`, if an order waits on
    /// it. Reads the store (blocking).
    pub fn http_challenge(&self, token: &str) -> Option<String> {
        let plausible = !token.is_empty()
            && token.len() <= 128
            && token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if self.config.mode != TlsMode::Acme || !plausible {
            return None;
        }
        let bytes = self.store.tls_get(&acme::http_key(token)).ok()??;
        String::from_utf8(bytes).ok()
    }

    /// Whether HTTPS answers carry `Strict-Transport-Security`.
    pub fn hsts(&self) -> bool {
        self.config.hsts
    }

    /// The port a redirect to HTTPS names: `None` for 443.
    pub fn https_port(&self) -> Option<u16> {
        (self.https_port != 443).then_some(self.https_port)
    }

    /// `vsl_tls_certificate_expiry_timestamp_seconds{host}` and `vsl_tls_orders_total{outcome}`.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "tls_certificate_expiry_timestamp_seconds",
            "When the certificate served for each host ends (Unix seconds)",
            self.expiry.0.clone(),
        );
        registry.register(
            "tls_orders",
            "ACME certificate orders, by outcome (issued, failed)",
            self.orders.clone(),
        );
    }

    /// Serves `pair` for `host` from the next handshake on.
    fn serve(&self, host: &str, pair: &Pair) {
        self.resolver.install(host, pair.key.clone());
        self.expiry.set(host, pair.not_after);
    }

    fn count_order(&self, outcome: &'static str) {
        self.orders.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    fn now_secs(&self) -> i64 {
        i64::try_from(self.clock.now() / 1000).unwrap_or(i64::MAX)
    }

    /// The certificate the store holds for `host` (blocking); a stored pair that does not
    /// parse counts as none (it is ordered again).
    fn stored(&self, host: &str) -> Result<Option<Pair>, BoxError> {
        let Some(bytes) = self.store.tls_get(&acme::cert_key(host))? else {
            return Ok(None);
        };
        let parsed = serde_json::from_slice::<PemPair>(&bytes)
            .map_err(|e| e.to_string())
            .and_then(|pem| Pair::from_pem(pem.chain.as_bytes(), pem.key.as_bytes()));
        match parsed {
            Ok(pair) => Ok(Some(pair)),
            Err(e) => {
                tracing::warn!(host, error = %e, "tls: the stored certificate is unreadable; ordering another");
                Ok(None)
            }
        }
    }

    /// The stored certificate for `host`, served at once when there is one (another instance
    /// may have ordered it); `None` on a store error too (logged).
    async fn load_stored(self: &Arc<Self>, host: &str) -> Option<Pair> {
        let this = self.clone();
        let owned = host.to_string();
        let read = tokio::task::spawn_blocking(move || this.stored(&owned)).await;
        match read {
            Ok(Ok(Some(pair))) => {
                self.serve(host, &pair);
                Some(pair)
            }
            Ok(Ok(None)) => None,
            Ok(Err(e)) => {
                tracing::warn!(host, error = %e, "tls: cannot read the stored certificate");
                None
            }
            Err(e) => {
                tracing::warn!(host, error = %e, "tls: cannot read the stored certificate");
                None
            }
        }
    }

    /// A store read off the async workers.
    async fn get(&self, key: String) -> Result<Option<Vec<u8>>, String> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.tls_get(&key))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
    }

    /// A store write (`None`: delete) off the async workers.
    async fn put(&self, key: String, value: Option<Vec<u8>>) -> Result<(), String> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || match value {
            Some(value) => store.tls_put(&key, &value),
            None => store.tls_delete(&key),
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
    }
}
