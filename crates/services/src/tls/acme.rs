//! `tls.mode = "acme"`: the orderer. At start and every minute (and at once when the hosts
//! change, or when a certificate becomes due sooner), for each host of
//! [`super::CertificateHosts`]: the certificate in the store is served (another instance may
//! have ordered it); when there is none, or a third of its life or less is left, a new one is
//! ordered — under the job lock when instances share the store, so that one orders and every
//! one serves the result. A failed order is logged and retried after 1 minute, doubling to a
//! day, while the old certificate keeps serving.
//!
//! The ACME protocol itself is `instant-acme`'s; the account's credentials, the certificates
//! and the challenges' answers live in the store ([`crate::store::TlsStore`]), so any
//! instance can answer a challenge and a restart orders nothing it already has.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Bytes;
use instant_acme::{
    Account, AuthorizationStatus, BodyWrapper, ChallengeType, HttpClient, Identifier, NewAccount,
    NewOrder, OrderStatus, RetryPolicy,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use super::certs::{self, Pair, PemPair};
use super::Tls;
use crate::config::AcmeChallenge;
use crate::store::JobLock;

/// How often every host is looked at, at most.
const CHECK_EVERY: Duration = Duration::from_secs(60);
/// A failed order's first retry, doubling each time up to [`BACKOFF_MAX`].
const BACKOFF_FIRST: Duration = Duration::from_secs(60);
const BACKOFF_MAX: Duration = Duration::from_secs(86_400);

/// The job lock's name among instances sharing a store.
const JOB: &str = "tls";

/// Store keys.
pub(super) fn cert_key(host: &str) -> String {
    format!("cert:{host}")
}
pub(super) fn http_key(token: &str) -> String {
    format!("http-01:{token}")
}
pub(super) fn alpn_key(host: &str) -> String {
    format!("tls-alpn-01:{host}")
}
fn account_key(directory: &str) -> String {
    format!("account:{directory}")
}

/// When a host may be ordered for again after failures.
struct Backoff {
    next: i64,
    delay: Duration,
}

/// Runs until the task is aborted.
pub(super) async fn run(tls: Arc<Tls>) {
    let mut changed = tls.hosts.subscribe();
    let mut orderer = Orderer {
        tls,
        account: None,
        backoff: HashMap::new(),
    };
    loop {
        let wait = orderer.check().await;
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            told = changed.changed() => if told.is_err() {
                tokio::time::sleep(wait).await;
            },
        }
    }
}

struct Orderer {
    tls: Arc<Tls>,
    account: Option<Account>,
    backoff: HashMap<String, Backoff>,
}

impl Orderer {
    /// Looks at every host once; returns how long until the next look.
    async fn check(&mut self) -> Duration {
        let mut wait = CHECK_EVERY;
        for host in self.tls.hosts.hosts() {
            let now = self.tls.now_secs();
            let stored = self.tls.load_stored(&host).await;
            if let Some(pair) = stored.as_ref().filter(|p| !p.due(now)) {
                self.backoff.remove(&host);
                wait = wait.min(secs(pair.renew_at() - now));
                continue;
            }
            if let Some(b) = self.backoff.get(&host).filter(|b| now < b.next) {
                wait = wait.min(secs(b.next - now));
                continue;
            }
            // One instance at a time; the others wait here, then find the new certificate.
            let _lock = match self.lock().await {
                Ok(lock) => lock,
                Err(e) => {
                    tracing::warn!(error = %e, "tls: cannot take the job lock; trying again later");
                    continue;
                }
            };
            let now = self.tls.now_secs();
            if let Some(pair) = self.tls.load_stored(&host).await.filter(|p| !p.due(now)) {
                wait = wait.min(secs(pair.renew_at() - now));
                continue;
            }
            let renewal = stored.is_some();
            match self.order(&host).await {
                Ok(pair) => {
                    self.tls.serve(&host, &pair);
                    self.tls.count_order("issued");
                    self.backoff.remove(&host);
                    tracing::info!(
                        host = %host,
                        renewal,
                        not_after = pair.not_after,
                        "tls: certificate obtained"
                    );
                    wait = wait.min(secs(pair.renew_at() - self.tls.now_secs()));
                }
                Err(e) => {
                    self.tls.count_order("failed");
                    let delay = self
                        .backoff
                        .get(&host)
                        .map_or(BACKOFF_FIRST, |b| (b.delay * 2).min(BACKOFF_MAX));
                    let next = self.tls.now_secs() + delay.as_secs() as i64;
                    self.backoff.insert(host.clone(), Backoff { next, delay });
                    tracing::warn!(
                        host = %host,
                        renewal,
                        error = %e,
                        retry_in_seconds = delay.as_secs(),
                        "tls: certificate order failed{}",
                        if renewal { "; the current certificate keeps serving" } else { "" }
                    );
                    wait = wait.min(delay);
                }
            }
        }
        wait.max(Duration::from_secs(1))
    }

    /// The job lock when instances share the store; nothing to hold otherwise.
    async fn lock(&self) -> Result<Option<JobLock>, String> {
        let store = self.tls.store.clone();
        tokio::task::spawn_blocking(move || match store.cluster() {
            Some(cluster) => cluster.job_lock(JOB).map(Some),
            None => Ok(None),
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
    }

    /// Orders a certificate for `host`, answers its challenge through the store, and stores
    /// the result.
    async fn order(&mut self, host: &str) -> Result<Pair, String> {
        let account = self.account().await?;
        let mut answers = Vec::new();
        let outcome = self.order_with(&account, host, &mut answers).await;
        for key in answers {
            if let Err(e) = self.tls.put(key.clone(), None).await {
                tracing::debug!(key = %key, error = %e, "tls: a challenge's answer was not removed");
            }
        }
        outcome
    }

    async fn order_with(
        &self,
        account: &Account,
        host: &str,
        answers: &mut Vec<String>,
    ) -> Result<Pair, String> {
        let identifiers = [Identifier::Dns(host.to_string())];
        let mut order = account
            .new_order(&NewOrder::new(&identifiers))
            .await
            .map_err(|e| format!("new order: {e}"))?;
        let kind = match self.tls.config.challenge {
            AcmeChallenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
            AcmeChallenge::Http01 => ChallengeType::Http01,
        };
        {
            let mut authorizations = order.authorizations();
            while let Some(authz) = authorizations.next().await {
                let mut authz = authz.map_err(|e| format!("authorization: {e}"))?;
                match authz.status {
                    AuthorizationStatus::Pending => {}
                    AuthorizationStatus::Valid => continue,
                    other => return Err(format!("the authorization is {other:?}")),
                }
                let mut challenge = authz
                    .challenge(kind.clone())
                    .ok_or_else(|| format!("the authority offers no {kind:?} challenge"))?;
                let key_authorization = challenge.key_authorization();
                let (key, value) = match kind {
                    ChallengeType::Http01 => (
                        http_key(&challenge.token),
                        key_authorization.as_str().as_bytes().to_vec(),
                    ),
                    _ => {
                        let pair =
                            certs::alpn_challenge_pair(host, key_authorization.digest().as_ref())?;
                        (
                            alpn_key(host),
                            serde_json::to_vec(&pair).map_err(|e| e.to_string())?,
                        )
                    }
                };
                self.tls.put(key.clone(), Some(value)).await?;
                answers.push(key);
                challenge
                    .set_ready()
                    .await
                    .map_err(|e| format!("challenge: {e}"))?;
            }
        }
        let retries = RetryPolicy::new().timeout(Duration::from_secs(90));
        let status = order
            .poll_ready(&retries)
            .await
            .map_err(|e| format!("order: {e}"))?;
        if status != OrderStatus::Ready {
            let why = order
                .state()
                .error
                .as_ref()
                .map(|p| format!(": {p}"))
                .unwrap_or_default();
            return Err(format!("the order is {status:?}{why}"));
        }
        let key = order
            .finalize()
            .await
            .map_err(|e| format!("finalize: {e}"))?;
        let chain = order
            .poll_certificate(&retries)
            .await
            .map_err(|e| format!("certificate: {e}"))?;
        let pair = Pair::from_pem(chain.as_bytes(), key.as_bytes())?;
        let stored = serde_json::to_vec(&PemPair { chain, key }).map_err(|e| e.to_string())?;
        self.tls.put(cert_key(host), Some(stored)).await?;
        Ok(pair)
    }

    /// The ACME account: the one in the store for this directory, else a new one, stored.
    async fn account(&mut self) -> Result<Account, String> {
        if let Some(account) = &self.account {
            return Ok(account.clone());
        }
        let config = &self.tls.config;
        let directory = config.directory.trim().to_string();
        let key = account_key(&directory);
        let builder =
            || -> Result<_, String> { Ok(Account::builder_with_http(http_client(&config.ca)?)) };
        let account = match self.tls.get(key.clone()).await? {
            Some(bytes) => {
                let credentials =
                    serde_json::from_slice(&bytes).map_err(|e| format!("stored account: {e}"))?;
                builder()?
                    .from_credentials(credentials)
                    .await
                    .map_err(|e| format!("account: {e}"))?
            }
            None => {
                let email = config.email.trim();
                let contact = format!("mailto:{email}");
                let contacts: Vec<&str> = if email.is_empty() {
                    Vec::new()
                } else {
                    vec![contact.as_str()]
                };
                let (account, credentials) = builder()?
                    .create(
                        &NewAccount {
                            contact: &contacts,
                            terms_of_service_agreed: true,
                            only_return_existing: false,
                        },
                        directory.clone(),
                        None,
                    )
                    .await
                    .map_err(|e| format!("new account at {directory}: {e}"))?;
                let stored = serde_json::to_vec(&credentials).map_err(|e| e.to_string())?;
                self.tls.put(key, Some(stored)).await?;
                tracing::info!(directory = %directory, "tls: ACME account created");
                account
            }
        };
        self.account = Some(account.clone());
        Ok(account)
    }
}

/// The HTTP client the ACME calls go through: the Mozilla roots, plus `tls.ca` when set.
fn http_client(ca: &std::path::Path) -> Result<Box<dyn HttpClient>, String> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if !ca.as_os_str().is_empty() {
        let pem = std::fs::read(ca).map_err(|e| format!("`tls.ca`: {}: {e}", ca.display()))?;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| format!("`tls.ca`: {}: {e}", ca.display()))?;
            roots
                .add(cert)
                .map_err(|e| format!("`tls.ca`: {}: {e}", ca.display()))?;
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(certs::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .build();
    let client: hyper_util::client::legacy::Client<_, BodyWrapper<Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(connector);
    Ok(Box::new(client))
}

fn secs(s: i64) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0))
}

/// Reads the `tls.ca` file at start, so that a wrong path stops the start naming the key.
pub(super) fn check_ca(ca: &std::path::Path) -> Result<(), String> {
    http_client(ca).map(|_| ())
}
