//! OpenID Connect sign-in against a real provider (panva's certified `oidc-provider`, started by
//! `common::oidc`): the protocol client (`vshortlink::accounts::oidc::Providers`) starts a
//! sign-in, a cookie-keeping client walks the provider's pages as a browser would and stops at
//! the redirect to our callback, and `finish` turns the callback into claims — or refuses it:
//! a tampered state, a replayed code, a wrong PKCE verifier or nonce, keys that did not sign
//! the token, an issuer that cannot be reached or answers with a redirect.
//!
//! Phase 2 (`through_the_server`): the real binary with `[[auth.oidc]]`, its `server.base_url`
//! on a port chosen first so that the provider registers its callback: the login page's
//! button, the provider's form and our callback followed as a browser follows them (a cookie
//! store, every redirect), then the session; auto-create, `admin_group`, `team_groups` given
//! and taken back, an unverified email, `auto_create = false`, a tampered state, a replayed
//! callback, `?error=`, an issuer that cannot be reached; and one walk in headless Chromium.
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

// Phase 2: the same provider and the real server, a browser's redirects followed by a client
// with a cookie store — the login page's button, the provider's form, our callback, a session.

mod through_the_server {
    use super::*;
    use common::{TestApp, ADMIN};
    use reqwest::blocking::{Client, Response};

    /// A free port for the server, so that its `server.base_url` (and the redirect URI the
    /// provider registers) is known before either starts.
    fn free_port() -> u16 {
        TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port()
    }

    fn carol(groups: &[&str]) -> Value {
        json!({
            "email": "carol@example.com",
            "email_verified": true,
            "name": "Carol Example",
            "groups": groups,
        })
    }

    /// A provider whose client may come back to `corp` and `strict` on `port`, with alice,
    /// bob (unverified), carol (in `red-editors`), carol-again (carol's verified email without
    /// the group) and dave (nobody here knows him).
    fn provider(port: u16) -> Option<TestProvider> {
        let base = format!("http://127.0.0.1:{port}");
        let mut setup = Setup::new(&format!("{base}/ui/oidc/corp/callback"))
            .account("alice", alice())
            .account("bob", bob())
            .account("carol", carol(&["staff", "red-editors"]))
            .account("carol-again", carol(&["staff"]))
            .account(
                "dave",
                json!({"email": "dave@example.com", "email_verified": true, "name": "Dave"}),
            );
        setup
            .redirect_uris
            .push(format!("{base}/ui/oidc/strict/callback"));
        TestProvider::start(setup)
    }

    /// The server on `port` with `corp` (auto-create, `admin_group`, `team_groups`), `strict`
    /// (no auto-create) and `gone` (an issuer nobody answers for).
    fn server(port: u16, provider: &TestProvider) -> TestApp {
        let closed = free_port();
        let (id, secret) = (&provider.setup.client_id, &provider.setup.client_secret);
        let issuer = &provider.issuer;
        let extra = format!(
            r#"
[[auth.oidc]]
name = "corp"
issuer = "{issuer}"
client_id = "{id}"
client_secret = "{secret}"
admin_group = "vsl-admins"
team_groups = {{ red-editors = "red:editor", blue-owners = "blue:owner" }}

[[auth.oidc]]
name = "strict"
issuer = "{issuer}"
client_id = "{id}"
client_secret = "{secret}"
auto_create = false

[[auth.oidc]]
name = "gone"
issuer = "http://127.0.0.1:{closed}"
client_id = "{id}"
client_secret = "{secret}"
"#
        );
        let listen = format!("127.0.0.1:{port}");
        let base = format!("http://127.0.0.1:{port}");
        TestApp::binary_with(
            &extra,
            &[
                ("VSL_SERVER__LISTEN", &listen),
                ("VSL_SERVER__BASE_URL", &base),
            ],
        )
    }

    fn location(response: &Response) -> String {
        response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    }

    /// Walks `login` through the login page's button for `provider` and the provider's form;
    /// the callback URL, not yet followed.
    fn to_callback(app: &TestApp, client: &Client, provider: &str, login: &str) -> String {
        let login_page = client
            .get(app.url("/ui/login"))
            .send()
            .expect("login page")
            .text()
            .expect("body");
        let href = format!("/ui/oidc/{provider}?next=");
        assert!(login_page.contains(&href), "a button for {provider}");
        let callback = app.url(&format!("/ui/oidc/{provider}/callback"));
        walk(
            client,
            &app.url(&format!("/ui/oidc/{provider}")),
            login,
            &callback,
        )
    }

    /// A page's status and body.
    fn fetch(client: &Client, url: &str) -> (u16, String) {
        let response = client.get(url).send().expect("GET");
        let status = response.status().as_u16();
        (status, response.text().unwrap_or_default())
    }

    fn users(app: &TestApp) -> Vec<Value> {
        app.api_get("/api/v1/users", ADMIN)["users"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    fn user(app: &TestApp, email: &str) -> Option<Value> {
        users(app).into_iter().find(|u| u["email"] == email)
    }

    fn members(app: &TestApp, team: &str) -> Vec<(String, String)> {
        let team = app.api_get(&format!("/api/v1/teams/{team}"), ADMIN);
        team["members"]
            .as_array()
            .map(|m| {
                m.iter()
                    .map(|m| {
                        (
                            m["email"].as_str().unwrap_or_default().to_string(),
                            m["role"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Signed in, this client's account page shows `email`; signed out, it goes to sign-in.
    fn signed_in_as(app: &TestApp, client: &Client) -> Option<String> {
        let response = client.get(app.url("/ui/account")).send().expect("account");
        if response.status() != 200 {
            assert_eq!(response.status(), 303);
            return None;
        }
        let html = response.text().expect("body");
        [
            "alice@example.com",
            "carol@example.com",
            "bob@example.com",
            "dave@example.com",
        ]
        .into_iter()
        .find(|e| html.contains(e))
        .map(str::to_string)
    }

    #[test]
    fn people_sign_in_through_a_real_provider_and_every_failure_is_a_page() {
        let port = free_port();
        let Some(running) = provider(port) else {
            return;
        };
        let app = server(port, &running);
        for slug in ["red", "blue"] {
            let made = app.post_json("/api/v1/teams", ADMIN, &json!({ "slug": slug }));
            assert_eq!(made.status(), 201);
        }

        // Success, auto-create, admin_group: alice is made, an admin, signed in.
        let alices = browser();
        assert_eq!(signed_in_as(&app, &alices), None);
        let callback = to_callback(&app, &alices, "corp", "alice");
        let back = alices.get(&callback).send().expect("callback");
        assert_eq!(back.status(), 303, "{}", back.text().unwrap_or_default());
        assert_eq!(location(&back), "/ui/links");
        assert_eq!(
            signed_in_as(&app, &alices).as_deref(),
            Some("alice@example.com")
        );
        let alice = user(&app, "alice@example.com").expect("alice was made");
        assert_eq!(alice["role"], "admin");
        assert_eq!(alice["has_password"], false);
        // As an admin she reaches the users page.
        assert_eq!(fetch(&alices, &app.url("/ui/admin/users")).0, 200);
        // The callback URL again (a replayed code): refused, and a session it would have
        // given nobody.
        let (status, html) = fetch(&alices, &callback);
        assert_eq!(status, 400, "{html}");
        assert!(html.contains("does not match"), "{html}");
        let stranger = browser_for_replay();
        let (status, _) = fetch(&stranger, &callback);
        assert_eq!(status, 400);
        assert_eq!(signed_in_as(&app, &stranger), None);

        // team_groups: carol is an editor of red (blue is managed, not given).
        let carols = browser();
        let callback = to_callback(&app, &carols, "corp", "carol");
        assert_eq!(
            carols.get(&callback).send().expect("callback").status(),
            303
        );
        assert_eq!(
            user(&app, "carol@example.com").expect("carol")["role"],
            "member"
        );
        assert!(members(&app, "red").contains(&("carol@example.com".into(), "editor".into())));
        assert_eq!(fetch(&carols, &app.url("/ui/teams/red")).0, 200);
        assert_eq!(fetch(&carols, &app.url("/ui/teams/blue")).0, 404);
        // Signed in again without the group (another identity with her verified email): the
        // membership it gave is gone, and with it everything she could reach: she is signed
        // in (her account page), and the team's page is not found for her.
        let again = browser();
        let callback = to_callback(&app, &again, "corp", "carol-again");
        let (status, html) = fetch(&again, &callback);
        assert_eq!(status, 303, "{html}");
        assert_eq!(fetch(&again, &app.url("/ui/account")).0, 200);
        assert_eq!(fetch(&again, &app.url("/ui/teams/red")).0, 404);
        let red = members(&app, "red");
        assert!(
            !red.iter().any(|(email, _)| email == "carol@example.com"),
            "{red:?}"
        );
        assert!(
            red.contains(&("alice@example.com".into(), "editor".into())),
            "alice's stays"
        );
        assert_eq!(
            users(&app)
                .iter()
                .filter(|u| u["email"] == "carol@example.com")
                .count(),
            1
        );

        // An unverified email that a user here has: refused, nothing joined or made.
        let made = app.post_json(
            "/api/v1/users",
            ADMIN,
            &json!({"email": "bob@example.com", "password": "bobs-password-0001"}),
        );
        assert_eq!(made.status(), 201);
        let before = users(&app).len();
        let bobs = browser();
        let callback = to_callback(&app, &bobs, "corp", "bob");
        let (status, html) = fetch(&bobs, &callback);
        assert_eq!(status, 403, "{html}");
        assert!(
            html.contains("not verified") && html.contains("Nobody was signed in"),
            "{html}"
        );
        assert_eq!(signed_in_as(&app, &bobs), None);
        assert_eq!(users(&app).len(), before);
        // Nothing signed in as bob either.
        let bob = user(&app, "bob@example.com").expect("bob");
        assert!(bob["last_sign_in_at"].is_null());

        // auto_create = false: a person nobody here knows is refused (403), nobody made.
        let daves = browser();
        let callback = to_callback(&app, &daves, "strict", "dave");
        let (status, html) = fetch(&daves, &callback);
        assert_eq!(status, 403, "{html}");
        assert!(html.contains("No account here"), "{html}");
        assert!(user(&app, "dave@example.com").is_none());
        // In Chinese too.
        let zh = Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .default_headers(
                [(
                    reqwest::header::ACCEPT_LANGUAGE,
                    reqwest::header::HeaderValue::from_static("zh-CN"),
                )]
                .into_iter()
                .collect(),
            )
            .build()
            .expect("client");
        let callback = to_callback(&app, &zh, "strict", "dave");
        let (status, html) = fetch(&zh, &callback);
        assert_eq!(status, 403);
        assert!(
            html.contains("这里没有你的账户") && html.contains("lang=\"zh-CN\""),
            "{html}"
        );

        // A tampered state: refused; the sign-in it belonged to is spent too.
        let tampering = browser();
        let callback = to_callback(&app, &tampering, "corp", "dave");
        let state = query(&callback, "state").expect("state");
        let tampered = callback.replace(&state, &format!("{state}x"));
        let (status, html) = fetch(&tampering, &tampered);
        assert_eq!(status, 400, "{html}");
        assert_eq!(fetch(&tampering, &callback).0, 400);
        assert_eq!(signed_in_as(&app, &tampering), None);
        assert!(user(&app, "dave@example.com").is_none());

        // The provider sends the person back with an error.
        let denied = browser();
        let _ = denied.get(app.url("/ui/oidc/corp")).send().expect("start");
        let (status, html) = fetch(
            &denied,
            &app.url("/ui/oidc/corp/callback?error=access_denied&error_description=%3Cscript%3E"),
        );
        assert_eq!(status, 403, "{html}");
        assert!(
            html.contains("access_denied") && !html.contains("<script>"),
            "{html}"
        );

        // An issuer nobody answers for: a 502 page, at the start.
        let (status, html) = fetch(&browser(), &app.url("/ui/oidc/gone"));
        assert_eq!(status, 502, "{html}");
        assert!(html.contains("cannot be reached"), "{html}");
        // An unknown provider: 404.
        assert_eq!(fetch(&browser(), &app.url("/ui/oidc/nobody")).0, 404);

        // The provider goes away between the start and the callback.
        let late = browser();
        let callback = to_callback(&app, &late, "corp", "alice");
        drop(running);
        let (status, html) = fetch(&late, &callback);
        assert_eq!(status, 502, "{html}");
        assert_eq!(signed_in_as(&app, &late), None);
    }

    /// Another browser, with no cookies of the sign-in.
    fn browser_for_replay() -> Client {
        browser()
    }

    #[test]
    fn a_person_signs_in_through_the_provider_in_chromium() {
        use common::chrome::{browser_or_skip, connect, Driver};
        use fantoccini::Locator;
        let Some((driver_path, chrome)) = browser_or_skip() else {
            return;
        };
        let port = free_port();
        let Some(running) = provider(port) else {
            return;
        };
        let app = server(port, &running);
        let driver = Driver::start(&driver_path);
        let profile = tempfile::tempdir().expect("profile dir");
        let base = format!("http://127.0.0.1:{port}");
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        runtime.block_on(async {
            let c = connect(&driver, &chrome, profile.path()).await;
            c.goto(&format!("{base}/ui/login"))
                .await
                .expect("login page");
            c.find(Locator::Css("a.provider"))
                .await
                .expect("the provider's button")
                .click()
                .await
                .expect("click");
            // The provider's own login form.
            let login = c
                .wait()
                .for_element(Locator::Css("input[name=login]"))
                .await
                .expect("the provider's form");
            login.send_keys("alice").await.expect("type");
            c.find(Locator::Css("form button"))
                .await
                .expect("its button")
                .click()
                .await
                .expect("sign in");
            // Back here, signed in, on the links.
            c.wait()
                .for_element(Locator::Css("form.filters"))
                .await
                .expect("back on the links");
            let here = c.current_url().await.expect("url");
            assert_eq!(here.path(), "/ui/links");
            c.goto(&format!("{base}/ui/account"))
                .await
                .expect("account");
            let main = c
                .find(Locator::Css("main"))
                .await
                .expect("main")
                .text()
                .await
                .expect("text");
            assert!(main.contains("alice@example.com"), "{main}");
            c.close().await.expect("close");
        });
        drop(app);
    }
}
