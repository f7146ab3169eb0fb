//! OpenID Connect sign-in, the protocol half: discovery of each `[[auth.oidc]]` provider, the
//! authorization code flow with PKCE (S256), `state` and `nonce`, the ID token checked against
//! the issuer's JWKS (signature, `iss`, `aud`, `exp`, `nonce`), and the claims a sign-in needs
//! ([`Claims`]), with the memberships they grant ([`grants`]). It signs nobody in and stores
//! nothing: the caller keeps the [`Pending`] of a started sign-in server-side, deletes it on its
//! first use, and maps the claims to a user.
//!
//! The HTTP client that talks to an issuer follows no redirects (a redirect would let whoever
//! controls an issuer's answers point this server at any address, SSRF) and gives up after
//! [`TIMEOUT`]. Every failure is one [`OidcError`] variant the pages can name; their details
//! (which may quote the provider) go to the log, not to the person signing in.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreAuthenticationFlow, CoreErrorResponseType,
    CoreGenderClaim, CoreJsonWebKey, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm,
    CoreProviderMetadata, CoreRevocableToken, CoreRevocationErrorResponse,
    CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AdditionalClaims, AuthorizationCode, ClaimsVerificationError, Client, ClientId, ClientSecret,
    CsrfToken, DiscoveryError, EmptyExtraTokenFields, EndpointMaybeSet, EndpointNotSet,
    EndpointSet, HttpClientError, IdTokenFields, IssuerUrl, Nonce, OAuth2TokenResponse,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RequestTokenError, Scope,
    StandardErrorResponse, StandardTokenResponse, SubjectIdentifier, TokenResponse, UserInfoClaims,
    UserInfoError,
};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use crate::clock::{Clock, SystemClock};
use crate::config::{read_ca_file, ConfigError, OidcConfig};
use crate::model::account::parse_team_grant;
use crate::model::Millis;

/// How long a started sign-in may take: a [`Pending`] older than this is refused. The caller
/// keeps its record no longer than this either.
pub const PENDING_TTL_MS: Millis = 10 * 60 * 1000;

/// How long one request to an issuer may take, all of it (connecting: 5 s of it).
pub const TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a provider's discovery document and keys are used before they are fetched again.
/// A signature that the cached keys cannot verify fetches them at once (the issuer rotated).
const METADATA_TTL_MS: Millis = 60 * 60 * 1000;

/// A sign-in that could not complete. Each is a page of its own; none signs anybody in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OidcError {
    #[error("no OpenID Connect provider of that name")]
    UnknownProvider,
    /// The issuer did not answer (refused, timed out, no such host).
    #[error("the identity provider could not be reached")]
    Unreachable,
    /// The issuer answered, but not with a usable discovery document or key set.
    #[error("the identity provider's configuration could not be read")]
    Discovery,
    /// The callback's `state` is not the one this sign-in started with (or belongs to another
    /// provider): a forged or crossed callback.
    #[error("the sign-in's state does not match; start again")]
    StateMismatch,
    /// The sign-in was started more than [`PENDING_TTL_MS`] ago.
    #[error("the sign-in took too long; start again")]
    Expired,
    /// The provider sent the person back with `?error=` (denied consent, a misconfigured
    /// client): its error code.
    #[error("the identity provider refused: {0}")]
    ProviderError(String),
    /// The token endpoint refused the code: expired, already used, or not issued for this
    /// PKCE verifier.
    #[error("the sign-in code was refused (expired or already used)")]
    CodeRejected,
    /// The ID token failed a check: signature, `iss`, `aud`, `exp` or `nonce`.
    #[error("the identity provider's token did not verify")]
    BadToken,
    /// A claim the sign-in needs is missing.
    #[error("the identity provider's answer lacks `{0}`")]
    MissingClaim(&'static str),
}

/// What the caller keeps server-side between [`Providers::start`] and [`Providers::finish`]
/// (a record keyed by a random cookie, ≤ [`PENDING_TTL_MS`], deleted on its first use so that
/// a callback cannot be replayed). Its secrets never go to the browser.
#[derive(Clone, Serialize, Deserialize)]
pub struct Pending {
    /// The provider's `name`: a callback on another provider's path is refused.
    pub provider: String,
    state: String,
    nonce: String,
    pkce_verifier: String,
    /// When the sign-in started.
    pub created_at: Millis,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("provider", &self.provider)
            .field("created_at", &self.created_at)
            .finish_non_exhaustive()
    }
}

/// A started sign-in: send the browser to `redirect`, keep `pending`.
#[derive(Debug, Clone)]
pub struct Started {
    pub redirect: String,
    pub pending: Pending,
}

/// Who signed in, as the issuer vouches for it. A person is known by `(issuer, sub)`; the
/// email joins an existing user only when `email_verified`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub issuer: String,
    pub sub: String,
    pub email: Option<String>,
    /// False when the provider did not say (only an explicit `true` counts).
    pub email_verified: bool,
    pub name: Option<String>,
    /// From the provider's `groups_claim`, in the ID token or else the userinfo answer.
    pub groups: Vec<String>,
}

pub use crate::model::TeamRole;

/// What a sign-in applies to the user, from the groups the provider sent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grants {
    /// The groups include `admin_group`.
    pub admin: bool,
    /// Teams the groups give, each once with the highest role any of its groups gives, by slug.
    pub teams: Vec<(String, TeamRole)>,
    /// Every team `team_groups` names: a membership in one of these that `teams` lacks was
    /// given by an earlier sign-in and should end; memberships in other teams were made by
    /// hand and stay.
    pub managed: Vec<String>,
}

/// The memberships and admin right `claims` give under `config`.
pub fn grants(config: &OidcConfig, claims: &Claims) -> Grants {
    let admin = config
        .admin_group
        .as_deref()
        .is_some_and(|g| claims.groups.iter().any(|c| c == g));
    let mut teams: BTreeMap<String, TeamRole> = BTreeMap::new();
    let mut managed: Vec<String> = Vec::new();
    for (group, grant) in &config.team_groups {
        // Validated at start; one that no longer parses grants nothing.
        let Ok((team, role)) = parse_team_grant(grant) else {
            continue;
        };
        if !managed.contains(&team) {
            managed.push(team.clone());
        }
        if claims.groups.iter().any(|c| c == group) {
            let best = teams.entry(team).or_insert(role);
            *best = (*best).max(role);
        }
    }
    managed.sort();
    Grants {
        admin,
        teams: teams.into_iter().collect(),
        managed,
    }
}

/// Claims beyond the standard ones, kept whole: the groups claim's name is configured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Extra {
    #[serde(flatten)]
    claims: serde_json::Map<String, serde_json::Value>,
}

impl AdditionalClaims for Extra {}

type IdFields = IdTokenFields<
    Extra,
    EmptyExtraTokenFields,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;

/// The crate's core client with [`Extra`] claims, endpoints as discovery sets them.
type OidcClient = Client<
    Extra,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    StandardTokenResponse<IdFields, CoreTokenType>,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

type HttpError = HttpClientError<reqwest::Error>;

/// One configured provider and what was discovered about it.
struct Provider {
    config: OidcConfig,
    issuer: IssuerUrl,
    redirect: RedirectUrl,
    /// No redirects, [`TIMEOUT`], the extra roots of `ca_file`.
    http: reqwest::Client,
    /// The discovery document with its key set, and when it was fetched. Empty until the
    /// first sign-in (an unreachable issuer must not stop start-up) and after a failure.
    metadata: Mutex<Option<(Arc<CoreProviderMetadata>, Millis)>>,
}

/// Every `[[auth.oidc]]` provider.
pub struct Providers {
    providers: Vec<Provider>,
    clock: Arc<dyn Clock>,
}

impl Providers {
    /// The providers of `configs` (validated), their redirect URIs under `base_url`
    /// (`{base_url}/ui/oidc/{name}/callback`). Nothing is fetched yet.
    pub fn new(configs: &[OidcConfig], base_url: &str) -> Result<Self, ConfigError> {
        let base = base_url.trim_end_matches('/');
        let providers = configs
            .iter()
            .enumerate()
            .map(|(i, config)| {
                let key = |field: &str| format!("`auth.oidc[{i}].{field}`");
                let issuer = IssuerUrl::new(config.issuer.clone())
                    .map_err(|e| ConfigError(format!("{}: {e}", key("issuer"))))?;
                let redirect = RedirectUrl::new(format!("{base}/ui/oidc/{}/callback", config.name))
                    .map_err(|e| ConfigError(format!("`server.base_url`: {e}")))?;
                let mut http = reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .timeout(TIMEOUT)
                    .connect_timeout(CONNECT_TIMEOUT)
                    .user_agent(concat!("vshortlink/", env!("CARGO_PKG_VERSION")));
                if !config.ca_file.trim().is_empty() {
                    let certs = read_ca_file(Path::new(config.ca_file.trim()))
                        .map_err(|e| ConfigError(format!("{}: {e}", key("ca_file"))))?;
                    for cert in certs {
                        http = http.add_root_certificate(cert);
                    }
                }
                let http = http
                    .build()
                    .map_err(|e| ConfigError(format!("{}: {e}", key("issuer"))))?;
                Ok(Provider {
                    config: config.clone(),
                    issuer,
                    redirect,
                    http,
                    metadata: Mutex::new(None),
                })
            })
            .collect::<Result<_, ConfigError>>()?;
        Ok(Providers {
            providers,
            clock: Arc::new(SystemClock),
        })
    }

    /// The same providers on `clock` (a test's), which dates and ages [`Pending`]s.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The providers' names, in configuration order (the login page's buttons).
    pub fn names(&self) -> Vec<&str> {
        self.providers
            .iter()
            .map(|p| p.config.name.as_str())
            .collect()
    }

    /// A provider's configuration (for [`grants`] and `auto_create`).
    pub fn config(&self, name: &str) -> Option<&OidcConfig> {
        self.get(name).ok().map(|p| &p.config)
    }

    /// Starts a sign-in with `name`: where to send the browser, and what to keep until the
    /// callback. Discovers the provider when it is not known yet.
    pub async fn start(&self, name: &str) -> Result<Started, OidcError> {
        let provider = self.get(name)?;
        let client = provider.client(self.clock.now(), false).await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .set_pkce_challenge(challenge);
        // `openid` is always sent; the rest as configured.
        for scope in provider.config.scopes.split_whitespace() {
            if scope != "openid" {
                request = request.add_scope(Scope::new(scope.to_string()));
            }
        }
        let (url, state, nonce) = request.url();
        Ok(Started {
            redirect: url.to_string(),
            pending: Pending {
                provider: name.to_string(),
                state: state.secret().clone(),
                nonce: nonce.secret().clone(),
                pkce_verifier: verifier.secret().clone(),
                created_at: self.clock.now(),
            },
        })
    }

    /// Completes a sign-in at its callback (`state` and `code` from the query; a callback
    /// with `?error=` is [`callback_error`]'s): checks the state, trades the code for tokens,
    /// verifies the ID token and reads the claims, asking the userinfo endpoint for the email
    /// and groups when the ID token lacks them.
    pub async fn finish(
        &self,
        name: &str,
        pending: &Pending,
        state: &str,
        code: &str,
    ) -> Result<Claims, OidcError> {
        let provider = self.get(name)?;
        // Compared in constant time: the state is the secret tying the callback to the
        // browser that started the sign-in.
        let same_state = bool::from(pending.state.as_bytes().ct_eq(state.as_bytes()));
        if pending.provider != name || !same_state {
            return Err(OidcError::StateMismatch);
        }
        let now = self.clock.now();
        if now.saturating_sub(pending.created_at) > PENDING_TTL_MS {
            return Err(OidcError::Expired);
        }
        let mut client = provider.client(now, false).await?;
        let token = client
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .map_err(|e| provider.log("token endpoint", e, OidcError::Discovery))?
            .set_pkce_verifier(PkceCodeVerifier::new(pending.pkce_verifier.clone()))
            .request_async(&provider.http)
            .await
            .map_err(|e| provider.token_error(e))?;
        let id_token = token
            .id_token()
            .ok_or(OidcError::MissingClaim("id_token"))?;
        let nonce = Nonce::new(pending.nonce.clone());
        let verified = {
            let verifier = client.id_token_verifier();
            id_token.claims(&verifier, &nonce).cloned()
        };
        let verified = match verified {
            Err(ClaimsVerificationError::SignatureVerification(_)) => {
                // The issuer may have rotated its keys since they were fetched: fetch them
                // again, once.
                client = provider.client(now, true).await?;
                let verifier = client.id_token_verifier();
                id_token.claims(&verifier, &nonce).cloned()
            }
            other => other,
        };
        let id_claims = verified.map_err(|e| provider.log("ID token", e, OidcError::BadToken))?;

        let groups_claim = provider.config.groups_claim.as_str();
        let mut email = id_claims.email().map(|e| e.as_str().to_string());
        let mut email_verified = id_claims.email_verified() == Some(true);
        let mut name = id_claims
            .name()
            .and_then(|n| n.get(None))
            .map(|n| n.as_str().to_string());
        let mut groups = id_claims
            .additional_claims()
            .claims
            .get(groups_claim)
            .map(group_list);
        let sub = id_claims.subject().clone();

        // Many providers put only `sub` in an ID token that comes with an access token; the
        // rest is at the userinfo endpoint, for the same subject.
        if email.is_none() || groups.is_none() {
            if let Some(info) = provider.user_info(&client, &token, &sub).await? {
                if email.is_none() {
                    // The email and whether it is verified come from the same answer.
                    email = info.email().map(|e| e.as_str().to_string());
                    email_verified = info.email_verified() == Some(true);
                }
                if name.is_none() {
                    name = info
                        .name()
                        .and_then(|n| n.get(None))
                        .map(|n| n.as_str().to_string());
                }
                if groups.is_none() {
                    groups = info
                        .additional_claims()
                        .claims
                        .get(groups_claim)
                        .map(group_list);
                }
            }
        }
        Ok(Claims {
            issuer: id_claims.issuer().as_str().to_string(),
            sub: sub.as_str().to_string(),
            email,
            email_verified,
            name,
            groups: groups.unwrap_or_default(),
        })
    }

    fn get(&self, name: &str) -> Result<&Provider, OidcError> {
        self.providers
            .iter()
            .find(|p| p.config.name == name)
            .ok_or(OidcError::UnknownProvider)
    }
}

/// The error of a callback that came back with `?error=` (and maybe `error_description`,
/// which is logged, not shown: the provider wrote it, not us).
pub fn callback_error(error: &str, description: Option<&str>) -> OidcError {
    tracing::warn!(
        error,
        description,
        "OpenID Connect provider returned an error"
    );
    // Only the code, and only a short, plain one, reaches the page.
    let code: String = error
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(64)
        .collect();
    OidcError::ProviderError(code)
}

/// A groups claim as a list: an array of strings, or one string.
fn group_list(value: &serde_json::Value) -> Vec<String> {
    match value {
        serde_json::Value::Array(items) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        serde_json::Value::String(s) => vec![s.clone()],
        _ => Vec::new(),
    }
}

impl Provider {
    /// A client on the discovered metadata: the cached one unless it is older than
    /// [`METADATA_TTL_MS`] or `refresh` asks for a new one.
    async fn client(&self, now: Millis, refresh: bool) -> Result<OidcClient, OidcError> {
        let cached = self
            .metadata
            .lock()
            .as_ref()
            .filter(|(_, at)| !refresh && now.saturating_sub(*at) < METADATA_TTL_MS)
            .map(|(m, _)| Arc::clone(m));
        let metadata = match cached {
            Some(m) => m,
            None => {
                // Not cached on failure: the next sign-in tries again.
                let fresh = CoreProviderMetadata::discover_async(self.issuer.clone(), &self.http)
                    .await
                    .map_err(|e| self.discovery_error(e))?;
                let fresh = Arc::new(fresh);
                *self.metadata.lock() = Some((Arc::clone(&fresh), now));
                fresh
            }
        };
        let client: OidcClient = Client::from_provider_metadata(
            (*metadata).clone(),
            ClientId::new(self.config.client_id.clone()),
            Some(ClientSecret::new(self.config.client_secret.clone())),
        )
        .set_redirect_uri(self.redirect.clone());
        Ok(client)
    }

    /// The userinfo answer for `sub`, or `None` when the provider has no userinfo endpoint.
    async fn user_info(
        &self,
        client: &OidcClient,
        token: &StandardTokenResponse<IdFields, CoreTokenType>,
        sub: &SubjectIdentifier,
    ) -> Result<Option<UserInfoClaims<Extra, CoreGenderClaim>>, OidcError> {
        let Ok(request) = client.user_info(token.access_token().clone(), Some(sub.clone())) else {
            return Ok(None);
        };
        let answer: Result<UserInfoClaims<Extra, CoreGenderClaim>, _> =
            request.request_async(&self.http).await;
        match answer {
            Ok(info) => Ok(Some(info)),
            Err(UserInfoError::Request(e)) => Err(self.log("userinfo", e, OidcError::Unreachable)),
            // A userinfo answer about another subject, or a signed one that does not verify.
            Err(e @ UserInfoError::ClaimsVerification(_)) => {
                Err(self.log("userinfo", e, OidcError::BadToken))
            }
            Err(e) => Err(self.log("userinfo", e, OidcError::ProviderError("userinfo".into()))),
        }
    }

    fn discovery_error(&self, e: DiscoveryError<HttpError>) -> OidcError {
        match e {
            DiscoveryError::Request(e) => self.log("discovery", e, OidcError::Unreachable),
            e => self.log("discovery", e, OidcError::Discovery),
        }
    }

    fn token_error(
        &self,
        e: RequestTokenError<HttpError, StandardErrorResponse<CoreErrorResponseType>>,
    ) -> OidcError {
        match e {
            RequestTokenError::ServerResponse(answer) => match answer.error() {
                // RFC 6749 §5.2: an expired, used or revoked code, or a PKCE verifier that does
                // not match.
                CoreErrorResponseType::InvalidGrant => {
                    self.log("token endpoint", answer, OidcError::CodeRejected)
                }
                other => {
                    let code = other.as_ref().to_string();
                    self.log("token endpoint", answer, OidcError::ProviderError(code))
                }
            },
            RequestTokenError::Request(e) => self.log("token endpoint", e, OidcError::Unreachable),
            e => self.log("token endpoint", e, OidcError::BadToken),
        }
    }

    /// Logs what went wrong with its detail and answers `error`.
    fn log(&self, step: &str, detail: impl std::fmt::Display, error: OidcError) -> OidcError {
        tracing::warn!(
            provider = %self.config.name,
            step,
            detail = %detail,
            "OpenID Connect sign-in failed: {error}"
        );
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml_extra: &str) -> OidcConfig {
        let toml = format!(
            "[[auth.oidc]]\nname = \"corp\"\nissuer = \"https://id.example\"\n\
             client_id = \"vsl\"\nclient_secret = \"s3cret\"\n{toml_extra}"
        );
        let config = crate::config::Config::from_toml(&toml).expect("config");
        config.auth.oidc[0].clone()
    }

    fn claims(groups: &[&str]) -> Claims {
        Claims {
            issuer: "https://id.example".into(),
            sub: "u1".into(),
            email: Some("a@example.com".into()),
            email_verified: true,
            name: None,
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    #[test]
    fn defaults_are_the_specs() {
        let c = config("");
        assert_eq!(c.scopes, "openid email profile");
        assert_eq!(c.groups_claim, "groups");
        assert!(c.auto_create);
        assert!(c.admin_group.is_none());
        assert!(c.team_groups.is_empty());
    }

    #[test]
    fn admin_only_with_the_admin_group() {
        let c = config("admin_group = \"vsl-admins\"");
        assert!(grants(&c, &claims(&["staff", "vsl-admins"])).admin);
        assert!(!grants(&c, &claims(&["staff", "vsl-admins-not"])).admin);
        assert!(!grants(&config(""), &claims(&["vsl-admins"])).admin);
    }

    #[test]
    fn team_groups_give_the_highest_role_per_team() {
        let c = config(
            "[auth.oidc.team_groups]\nred-readers = \"red:viewer\"\nred-leads = \"red:owner\"\n\
             blue-writers = \"blue:editor\"\ngreen = \"green:viewer\"",
        );
        let g = grants(&c, &claims(&["red-readers", "red-leads", "blue-writers"]));
        assert_eq!(
            g.teams,
            [
                ("blue".to_string(), TeamRole::Editor),
                ("red".to_string(), TeamRole::Owner)
            ]
        );
        assert_eq!(g.managed, ["blue", "green", "red"]);
        assert!(!g.admin);
        let none = grants(&c, &claims(&[]));
        assert!(none.teams.is_empty());
        assert_eq!(none.managed.len(), 3);
    }

    #[test]
    fn team_grants_parse() {
        assert_eq!(
            parse_team_grant("sports:editor"),
            Ok(("sports".to_string(), TeamRole::Editor))
        );
        for bad in ["sports", "sports:admin", ":viewer", "a b:viewer", "x:Owner"] {
            assert!(parse_team_grant(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn groups_claim_may_be_one_string() {
        assert_eq!(group_list(&serde_json::json!("a")), ["a"]);
        assert_eq!(group_list(&serde_json::json!(["a", 1, "b"])), ["a", "b"]);
        assert!(group_list(&serde_json::json!({"a": 1})).is_empty());
    }

    #[test]
    fn config_errors_name_the_key() {
        let base = "name = \"corp\"\nclient_id = \"vsl\"\nclient_secret = \"s\"\n";
        let cases = [
            (format!("{base}issuer = \"ftp://id.example\""), "auth.oidc[0].issuer"),
            (
                format!("{base}issuer = \"http://id.example\""),
                "loopback host only",
            ),
            (
                "name = \"Corp!\"\nissuer = \"https://id.example\"\nclient_id = \"v\"\nclient_secret = \"s\"".into(),
                "auth.oidc[0].name",
            ),
            (
                format!("{base}issuer = \"https://id.example\"\nscopes = \"email\""),
                "auth.oidc[0].scopes",
            ),
            (
                format!("{base}issuer = \"https://id.example\"\nteam_groups = {{ g = \"red\" }}"),
                "auth.oidc[0].team_groups.g",
            ),
            (
                format!("{base}issuer = \"https://id.example\"\nca_file = \"/nonexistent.pem\""),
                "auth.oidc[0].ca_file",
            ),
            (
                format!("{base}issuer = \"https://id.example\"\nscope = \"openid\""),
                "scope",
            ),
            (
                "name = \"corp\"\nissuer = \"https://id.example\"\nclient_id = \"vsl\"\nclient_secret = \"\"".into(),
                "auth.oidc[0].client_secret",
            ),
        ];
        for (body, key) in cases {
            let toml = format!("[[auth.oidc]]\n{body}");
            let err = crate::config::Config::from_toml(&toml)
                .expect_err(&toml)
                .to_string();
            assert!(err.contains(key), "{toml:?}: {err}");
        }
        let two = "[[auth.oidc]]\nname = \"a\"\nissuer = \"https://x.example\"\nclient_id = \"v\"\nclient_secret = \"s\"\n\
                   [[auth.oidc]]\nname = \"a\"\nissuer = \"https://y.example\"\nclient_id = \"v\"\nclient_secret = \"s\"";
        let err = crate::config::Config::from_toml(two)
            .unwrap_err()
            .to_string();
        assert!(err.contains("auth.oidc[1].name"), "{err}");
        // Loopback issuers may be plain http (a provider on this machine, the tests').
        for ok in [
            "http://127.0.0.1:9000",
            "http://localhost:9000/realms/x",
            "http://[::1]:9",
        ] {
            let toml = format!("[[auth.oidc]]\n{base}issuer = \"{ok}\"");
            assert!(crate::config::Config::from_toml(&toml).is_ok(), "{ok}");
        }
    }

    #[tokio::test]
    async fn a_wrong_or_foreign_state_is_refused_before_any_request() {
        // The issuer is a closed port: a request would be `Unreachable`, so the state check
        // must come first.
        let c = config("");
        let providers = Providers::new(std::slice::from_ref(&c), "http://sl.test").unwrap();
        let pending = Pending {
            provider: "corp".into(),
            state: "right".into(),
            nonce: "n".into(),
            pkce_verifier: "v".repeat(43),
            created_at: crate::clock::system_now(),
        };
        assert_eq!(
            providers.finish("corp", &pending, "wrong", "code").await,
            Err(OidcError::StateMismatch)
        );
        assert_eq!(
            providers.finish("other", &pending, "right", "code").await,
            Err(OidcError::UnknownProvider)
        );
        let mut old = pending.clone();
        old.created_at -= PENDING_TTL_MS + 1;
        assert_eq!(
            providers.finish("corp", &old, "right", "code").await,
            Err(OidcError::Expired)
        );
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let err = read_ca_file(&path).unwrap_err();
        assert!(err.contains("no PEM certificate"), "{err}");
    }

    #[test]
    fn provider_errors_keep_only_a_plain_code() {
        assert_eq!(
            callback_error("access_denied", Some("<b>no</b>")),
            OidcError::ProviderError("access_denied".into())
        );
        assert_eq!(
            callback_error("<script>x", None),
            OidcError::ProviderError("scriptx".into())
        );
    }

    #[test]
    fn pending_debug_hides_its_secrets() {
        let p = Pending {
            provider: "corp".into(),
            state: "STATE".into(),
            nonce: "NONCE".into(),
            pkce_verifier: "VERIFIER".into(),
            created_at: 1,
        };
        let shown = format!("{p:?}");
        assert!(
            !shown.contains("STATE") && !shown.contains("VERIFIER") && !shown.contains("NONCE")
        );
    }
}
