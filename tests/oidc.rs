//! OpenID Connect sign-in against a real provider (panva's certified `oidc-provider`, started by
//! `common::oidc`): the protocol client (`vshortlink::accounts::oidc::Providers`) starts a
//! sign-in, a cookie-keeping client walks the provider's pages as a browser would and stops at
//! the redirect to our callback, and `finish` turns the callback into claims — or refuses it:
//! a tampered state, a replayed code, a wrong PKCE verifier or nonce, keys that did not sign
//! the token, an issuer that cannot be reached or answers with a redirect.
//!
//! Without node and npm these tests say so and pass, unless `REQUIRE_NODE=1` (CI).

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::oidc::{browser, query, walk, Setup, TestProvider};
use serde_json::{json, Value};
use vshortlink::accounts::oidc::{grants, Claims, OidcError, Pending, Providers, TeamRole};
use vshortlink::config::{Config, OidcConfig};

const BASE_URL: &str = "http://sl.test";
const CALLBACK: &str = "http://sl.test/ui/oidc/corp/callback";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// `[[auth.oidc]]` named `corp` for `issuer`, through the configuration's own loading and
/// checks, with `extra` TOML lines.
fn corp(issuer: &str, setup: &Setup, extra: &str) -> OidcConfig {
    let toml = format!(
        "[[auth.oidc]]\nname = \"corp\"\nissuer = \"{issuer}\"\nclient_id = \"{}\"\n\
         client_secret = \"{}\"\n{extra}",
        setup.client_id, setup.client_secret
    );
    let config = Config::from_toml(&toml).expect("config");
    config.auth.oidc[0].clone()
}

fn alice() -> Value {
    json!({
        "email": "alice@example.com",
        "email_verified": true,
        "name": "Alice Example",
        "groups": ["staff", "vsl-admins", "red-editors"],
    })
}

fn bob() -> Value {
    json!({
        "email": "bob@example.com",
        "email_verified": false,
        "name": "Bob Example",
        "groups": ["staff"],
    })
}

/// A provider with alice and bob, and `Providers` for it; `None`: skipped. With
/// `id_token_claims` the claims are in the ID token and the userinfo endpoint is down, so that
/// they can come from nowhere else; without, the ID token has only `sub`.
fn provider(id_token_claims: bool, extra: &str) -> Option<(TestProvider, Providers, OidcConfig)> {
    let mut setup = Setup::new(CALLBACK)
        .account("alice", alice())
        .account("bob", bob());
    setup.id_token_claims = id_token_claims;
    setup.userinfo_down = id_token_claims;
    let provider = TestProvider::start(setup)?;
    let config = corp(&provider.issuer, &provider.setup, extra);
    let providers = Providers::new(std::slice::from_ref(&config), BASE_URL).expect("providers");
    Some((provider, providers, config))
}

/// Starts a sign-in and walks `login` through the provider: the pending record and the
/// callback URL (with `state` and `code`).
fn sign_in(rt: &tokio::runtime::Runtime, providers: &Providers, login: &str) -> (Pending, String) {
    let started = rt.block_on(providers.start("corp")).expect("start");
    assert!(started.redirect.contains("code_challenge_method=S256"));
    assert!(started.redirect.contains("nonce="));
    let callback = walk(&browser(), &started.redirect, login, CALLBACK);
    (started.pending, callback)
}

fn finish(
    rt: &tokio::runtime::Runtime,
    providers: &Providers,
    pending: &Pending,
    callback: &str,
) -> Result<Claims, OidcError> {
    let state = query(callback, "state").expect("state");
    let code = query(callback, "code").expect("code");
    rt.block_on(providers.finish("corp", pending, &state, &code))
}

#[test]
fn signs_in_with_groups_and_a_verified_email_from_the_id_token() {
    let extra = "admin_group = \"vsl-admins\"\n\
                 team_groups = { red-editors = \"red:editor\", blue-owners = \"blue:owner\" }";
    let Some((running, providers, config)) = provider(true, extra) else {
        return;
    };
    let rt = runtime();
    assert_eq!(providers.names(), ["corp"]);

    let (pending, callback) = sign_in(&rt, &providers, "alice");
    let claims = finish(&rt, &providers, &pending, &callback).expect("alice signs in");
    assert_eq!(
        claims,
        Claims {
            issuer: running.issuer.clone(),
            sub: "alice".into(),
            email: Some("alice@example.com".into()),
            email_verified: true,
            name: Some("Alice Example".into()),
            groups: vec!["staff".into(), "vsl-admins".into(), "red-editors".into()],
        }
    );
    let given = grants(&config, &claims);
    assert!(given.admin);
    assert_eq!(given.teams, [("red".to_string(), TeamRole::Editor)]);
    assert_eq!(given.managed, ["blue", "red"]);

    // An unverified email is reported as such.
    let (pending, callback) = sign_in(&rt, &providers, "bob");
    let claims = finish(&rt, &providers, &pending, &callback).expect("bob signs in");
    assert_eq!(claims.email.as_deref(), Some("bob@example.com"));
    assert!(!claims.email_verified);
    assert_eq!(claims.groups, ["staff"]);
    assert!(!grants(&config, &claims).admin);
}

#[test]
fn claims_come_from_userinfo_when_the_id_token_has_only_sub() {
    // The provider's default: an ID token issued with an access token carries no profile
    // claims; email, its verification and the groups are at the userinfo endpoint.
    let Some((running, providers, _)) = provider(false, "") else {
        return;
    };
    let rt = runtime();
    let (pending, callback) = sign_in(&rt, &providers, "bob");
    let claims = finish(&rt, &providers, &pending, &callback).expect("bob signs in");
    assert_eq!(claims.issuer, running.issuer);
    assert_eq!(claims.sub, "bob");
    assert_eq!(claims.email.as_deref(), Some("bob@example.com"));
    assert!(!claims.email_verified, "false at userinfo stays false");
    assert_eq!(claims.name.as_deref(), Some("Bob Example"));
    assert_eq!(claims.groups, ["staff"]);

    let (pending, callback) = sign_in(&rt, &providers, "alice");
    let claims = finish(&rt, &providers, &pending, &callback).expect("alice signs in");
    assert!(claims.email_verified);
    assert_eq!(claims.groups.len(), 3);
}

#[test]
fn a_tampered_state_is_refused_and_spends_nothing() {
    let Some((_provider, providers, _)) = provider(true, "") else {
        return;
    };
    let rt = runtime();
    let (pending, callback) = sign_in(&rt, &providers, "alice");
    let code = query(&callback, "code").expect("code");
    let state = query(&callback, "state").expect("state");
    let tampered = format!("{state}x");
    assert_eq!(
        rt.block_on(providers.finish("corp", &pending, &tampered, &code)),
        Err(OidcError::StateMismatch)
    );
    // Another sign-in's state is as wrong as a forged one.
    let (other, _) = sign_in(&rt, &providers, "alice");
    assert_eq!(
        rt.block_on(providers.finish("corp", &other, &state, &code)),
        Err(OidcError::StateMismatch)
    );
    // The refusals never reached the provider: the code is still good.
    assert!(rt
        .block_on(providers.finish("corp", &pending, &state, &code))
        .is_ok());
}

#[test]
fn a_replayed_code_is_refused() {
    let Some((_provider, providers, _)) = provider(true, "") else {
        return;
    };
    let rt = runtime();
    let (pending, callback) = sign_in(&rt, &providers, "alice");
    assert!(finish(&rt, &providers, &pending, &callback).is_ok());
    assert_eq!(
        finish(&rt, &providers, &pending, &callback),
        Err(OidcError::CodeRejected)
    );
}

/// `pending` with one of its secret fields replaced (they are private: through its JSON, as a
/// record store would hold it).
fn with_field(pending: &Pending, field: &str, value: &str) -> Pending {
    let mut record = serde_json::to_value(pending).expect("pending to JSON");
    record[field] = json!(value);
    serde_json::from_value(record).expect("pending from JSON")
}

#[test]
fn a_wrong_pkce_verifier_or_nonce_is_refused() {
    let Some((_provider, providers, _)) = provider(true, "") else {
        return;
    };
    let rt = runtime();
    // The code was issued for another verifier's challenge: the token endpoint refuses it.
    let (pending, callback) = sign_in(&rt, &providers, "alice");
    let wrong = with_field(&pending, "pkce_verifier", &"v".repeat(43));
    assert_eq!(
        finish(&rt, &providers, &wrong, &callback),
        Err(OidcError::CodeRejected)
    );
    // A token minted for another sign-in's nonce does not verify.
    let (pending, callback) = sign_in(&rt, &providers, "alice");
    let wrong = with_field(&pending, "nonce", "another-nonce");
    assert_eq!(
        finish(&rt, &providers, &wrong, &callback),
        Err(OidcError::BadToken)
    );
}

#[test]
fn a_token_the_published_keys_did_not_sign_is_refused() {
    let mut setup = Setup::new(CALLBACK).account("alice", alice());
    setup.rogue_jwks = true;
    let Some(provider) = TestProvider::start(setup) else {
        return;
    };
    let config = corp(&provider.issuer, &provider.setup, "");
    let providers = Providers::new(std::slice::from_ref(&config), BASE_URL).expect("providers");
    let rt = runtime();
    let (pending, callback) = sign_in(&rt, &providers, "alice");
    // The keys are fetched again once (a rotation looks the same) and still do not verify it.
    assert_eq!(
        finish(&rt, &providers, &pending, &callback),
        Err(OidcError::BadToken)
    );
}

#[test]
fn an_unreachable_or_wrong_issuer_is_its_own_error() {
    let rt = runtime();
    let setup = Setup::new(CALLBACK);
    // A port nothing listens on.
    let closed = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let config = corp(&format!("http://127.0.0.1:{closed}"), &setup, "");
    let providers = Providers::new(std::slice::from_ref(&config), BASE_URL).expect("providers");
    assert_eq!(
        rt.block_on(providers.start("corp")).map(|_| ()),
        Err(OidcError::Unreachable)
    );
    assert_eq!(
        rt.block_on(providers.start("nobody")).map(|_| ()),
        Err(OidcError::UnknownProvider)
    );

    // An issuer that answers its discovery URL with a redirect: not followed (the target
    // counts every connection it gets), a discovery error.
    let target = TcpListener::bind("127.0.0.1:0").expect("bind");
    let target_addr = target.local_addr().expect("addr");
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&hits);
    std::thread::spawn(move || {
        for stream in target.incoming().flatten() {
            counted.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    let redirector = TcpListener::bind("127.0.0.1:0").expect("bind");
    let redirector_addr = redirector.local_addr().expect("addr");
    std::thread::spawn(move || {
        for mut stream in redirector.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let answer = format!(
                "HTTP/1.1 302 Found\r\nLocation: http://{target_addr}/.well-known/openid-configuration\r\n\
                 Content-Length: 0\r\nConnection: close\r\n\r\n"
            );
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    let config = corp(&format!("http://{redirector_addr}"), &setup, "");
    let providers = Providers::new(std::slice::from_ref(&config), BASE_URL).expect("providers");
    assert_eq!(
        rt.block_on(providers.start("corp")).map(|_| ()),
        Err(OidcError::Discovery)
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0, "the redirect was followed");
}

#[test]
fn an_issuer_that_stops_answering_or_is_not_an_issuer_fails() {
    let Some((running, providers, _)) = provider(true, "") else {
        return;
    };
    let rt = runtime();
    let (pending, callback) = sign_in(&rt, &providers, "alice");
    // The provider goes away between the start and the callback.
    drop(running);
    assert_eq!(
        finish(&rt, &providers, &pending, &callback),
        Err(OidcError::Unreachable)
    );
    // A path on a live provider that is not its issuer: no discovery document there, which
    // is a discovery error, not a sign-in.
    let Some((live, _, _)) = provider(true, "") else {
        return;
    };
    let wrong = corp(&format!("{}/elsewhere", live.issuer), &live.setup, "");
    let providers = Providers::new(std::slice::from_ref(&wrong), BASE_URL).expect("providers");
    assert_eq!(
        rt.block_on(providers.start("corp")).map(|_| ()),
        Err(OidcError::Discovery)
    );
}
