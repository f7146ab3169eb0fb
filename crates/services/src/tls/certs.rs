//! Certificates as rustls serves them: a PEM chain and key checked into a [`Pair`] (the key
//! must match the chain's first certificate), and the [`Resolver`] every handshake asks for
//! its certificate by SNI name. A name without a certificate of its own gets the default
//! domain's.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::RwLock;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use serde::{Deserialize, Serialize};

/// rustls's cryptography: *ring* (pure Rust and assembly, nothing to build with cmake).
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER
        .get_or_init(|| Arc::new(rustls::crypto::ring::default_provider()))
        .clone()
}

/// A certificate chain and its key as PEM, the way the store keeps them.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PemPair {
    pub chain: String,
    pub key: String,
}

/// A chain and key that form a valid pair, ready to serve.
#[derive(Clone, Debug)]
pub struct Pair {
    pub key: Arc<CertifiedKey>,
    /// The first certificate's validity, in Unix seconds.
    pub not_before: i64,
    pub not_after: i64,
}

impl Pair {
    /// Parses and checks a PEM chain and key: at least one certificate, a key rustls can sign
    /// with, and the two matching.
    pub fn from_pem(chain: &[u8], key: &[u8]) -> Result<Pair, String> {
        let certs = CertificateDer::pem_slice_iter(chain)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("the certificate file is not PEM certificates: {e}"))?;
        let Some(first) = certs.first() else {
            return Err("the certificate file holds no certificate".into());
        };
        let (not_before, not_after) = validity(first)?;
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|e| format!("the key file is not a PEM private key: {e}"))?;
        let key = CertifiedKey::from_der(certs, key, &provider())
            .map_err(|e| format!("the certificate and the key are not a pair: {e}"))?;
        Ok(Pair {
            key: Arc::new(key),
            not_before,
            not_after,
        })
    }

    /// Whether a third of its life or less is left at `now` (Unix seconds): time to renew.
    pub fn due(&self, now: i64) -> bool {
        now >= self.renew_at()
    }

    /// When a third of its life is left (Unix seconds).
    pub fn renew_at(&self) -> i64 {
        let life = (self.not_after - self.not_before).max(0);
        self.not_after - life / 3
    }
}

/// A certificate's validity (Unix seconds).
fn validity(cert: &CertificateDer<'_>) -> Result<(i64, i64), String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert)
        .map_err(|e| format!("the certificate cannot be read: {e}"))?;
    let v = parsed.validity();
    Ok((v.not_before.timestamp(), v.not_after.timestamp()))
}

/// What each handshake asks for its certificate: by SNI name (lowercased), else the default
/// domain's; `None` (the handshake fails) only before any certificate is held.
#[derive(Debug)]
pub struct Resolver {
    default_host: String,
    by_host: RwLock<HashMap<String, Arc<CertifiedKey>>>,
}

impl Resolver {
    pub fn new(default_host: &str) -> Self {
        Self {
            default_host: default_host.to_ascii_lowercase(),
            by_host: RwLock::new(HashMap::new()),
        }
    }

    /// Serves `key` for `host` from the next handshake on (open connections keep theirs).
    pub fn install(&self, host: &str, key: Arc<CertifiedKey>) {
        self.by_host.write().insert(host.to_ascii_lowercase(), key);
    }

    /// The certificate served for `host` now, if it has one of its own.
    pub fn held(&self, host: &str) -> Option<Arc<CertifiedKey>> {
        self.by_host.read().get(&host.to_ascii_lowercase()).cloned()
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let by_host = self.by_host.read();
        if let Some(name) = hello.server_name() {
            // rustls hands SNI names over lowercased already; a name with a trailing dot
            // does not pass its checks, so none is seen here.
            if let Some(key) = by_host.get(name) {
                return Some(key.clone());
            }
        }
        by_host.get(&self.default_host).cloned()
    }
}

/// A tls-alpn-01 challenge's certificate and key as rustls serves them. Not checked as a pair
/// the way [`Pair::from_pem`] checks one: the check parses the certificate with webpki, which
/// refuses the critical `acmeIdentifier` extension such a certificate must carry (RFC 8737).
pub fn challenge_key(pem: &PemPair) -> Result<Arc<CertifiedKey>, String> {
    let certs = CertificateDer::pem_slice_iter(pem.chain.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("challenge certificate: {e}"))?;
    let key = PrivateKeyDer::from_pem_slice(pem.key.as_bytes())
        .map_err(|e| format!("challenge key: {e}"))?;
    let key = provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("challenge key: {e}"))?;
    Ok(Arc::new(CertifiedKey::new(certs, key)))
}

/// The answer to one tls-alpn-01 challenge: a self-signed certificate for `host` carrying the
/// key authorization's digest (RFC 8737), as the store keeps it.
pub fn alpn_challenge_pair(host: &str, digest: &[u8]) -> Result<PemPair, String> {
    let mut params = rcgen::CertificateParams::new(vec![host.to_string()])
        .map_err(|e| format!("challenge certificate: {e}"))?;
    params.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(digest)];
    let key = rcgen::KeyPair::generate().map_err(|e| format!("challenge key: {e}"))?;
    let cert = params
        .self_signed(&key)
        .map_err(|e| format!("challenge certificate: {e}"))?;
    Ok(PemPair {
        chain: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// The protocols HTTPS offers by ALPN: HTTP/2, then HTTP/1.1.
pub const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];
/// The protocol of tls-alpn-01's validation handshakes (RFC 8737).
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// A server configuration over `resolver`: TLS 1.3 and 1.2, `alpn` offered.
pub fn server_config(
    resolver: Arc<dyn ResolvesServerCert>,
    alpn: &[&[u8]],
) -> Result<Arc<rustls::ServerConfig>, String> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// A resolver that always answers one certificate (a challenge's).
#[derive(Debug)]
pub struct Single(pub Arc<CertifiedKey>);

impl ResolvesServerCert for Single {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}
