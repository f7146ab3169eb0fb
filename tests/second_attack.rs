//! What a second attack run found, one test each, through the real server as the attacker
//! drove it: guessing from fresh addresses of one IPv6 /64, the client's own `X-Forwarded-For`
//! behind an `X-Real-IP` proxy, the `+` preview showing what a gate hides, `HEAD` using up a
//! capped link, Argon2 checks outside the memory budget, dedup handing back a link without the
//! options asked for, and webhook receivers' secret paths on the dashboard. (The hash tier's
//! per-space candidates are in `hash_codes.rs`; reviews, import and `check` in theirs.)
//!
//! Every server here is the real binary, and honours `TEST_STORE=postgres`, so CI runs them
//! on both backends.

mod common;

use std::time::{Duration, Instant};

use common::pages::PageClient;
use common::{problem, TestApp, ADMIN, EDITOR, SPORTS};
use reqwest::Method;
use serde_json::{json, Value};

/// Proxy headers believed (from the loopback, the test's own address).
const TRUST_PROXY: (&str, &str) = ("VSL_SERVER__TRUST_PROXY_HEADERS", "true");

fn create(app: &TestApp, key: &str, body: Value) -> Value {
    let r = app.post_json("/api/v1/links", key, &body);
    assert!(r.status().is_success(), "{}", r.status());
    r.json().expect("json")
}

fn code_of(link: &Value) -> String {
    link["code"].as_str().expect("code").to_string()
}

/// Finding 1: one IPv6 /64 is one client for every per-address limit.
#[test]
fn guesses_from_one_ipv6_64_share_one_quota() {
    let app = TestApp::binary_with("", &[TRUST_PROXY]);
    let link = create(
        &app,
        ADMIN,
        json!({"url": "https://example.com/vault", "password": "right-one"}),
    );
    let code = code_of(&link);
    let guess = |n: u32, password: &str| {
        app.client
            .get(app.url(&format!("/{code}")))
            .header("x-forwarded-for", format!("2001:db8:aaaa:bbbb::{n:x}"))
            .header("x-link-password", password)
            .header("accept", "application/json")
            .send()
            .expect("guess")
            .status()
            .as_u16()
    };
    // `password_per_ip` is 10/m: ten fresh addresses of the /64 are ten tries of one client.
    let statuses: Vec<u16> = (1..=12).map(|n| guess(n, &format!("wrong-{n}"))).collect();
    assert!(statuses[..10].iter().all(|s| *s == 403), "{statuses:?}");
    assert!(statuses[10..].iter().all(|s| *s == 429), "{statuses:?}");
    assert_eq!(
        guess(99, "right-one"),
        429,
        "the right one too, from the same /64"
    );
    // Another /64 is another client.
    let other = app
        .client
        .get(app.url(&format!("/{code}")))
        .header("x-forwarded-for", "2001:db8:aaaa:cccc::1")
        .header("x-link-password", "right-one")
        .send()
        .expect("right");
    assert_eq!(other.status(), 302);

    // Wrong API keys: 30 a minute from one /64, then every key refused.
    let statuses: Vec<u16> = (1..=32)
        .map(|n| {
            app.client
                .get(app.url("/api/v1/links"))
                .header("x-forwarded-for", format!("2001:db8:dddd:1::{n:x}"))
                .header("x-api-key", format!("wrong-{n}"))
                .send()
                .expect("GET")
                .status()
                .as_u16()
        })
        .collect();
    assert!(statuses[..30].iter().all(|s| *s == 401), "{statuses:?}");
    assert!(statuses[30..].iter().all(|s| *s == 429), "{statuses:?}");
}

/// Finding 8: behind a proxy that sets `X-Real-IP`, the client's own `X-Forwarded-For` is
/// not read.
#[test]
fn only_the_header_the_proxy_sets_names_the_client() {
    let app = TestApp::binary_with(
        "[limits.rates]\nnot_found_per_ip = \"10/s\"\n",
        &[TRUST_PROXY, ("VSL_SERVER__CLIENT_IP_HEADER", "x-real-ip")],
    );
    let mut limited = 0;
    for i in 0..40 {
        let r = app
            .client
            .get(app.url(&format!("/nosuch{i}")))
            // What nginx's `proxy_set_header X-Real-IP $remote_addr` writes, and what the
            // client wrote itself, a fresh address each time.
            .header("x-real-ip", "203.0.113.5")
            .header("x-forwarded-for", format!("6.6.{}.{}", i / 200, i % 200))
            .send()
            .expect("get");
        limited += usize::from(r.status() == 429);
    }
    assert!(limited >= 20, "{limited} of 40 unknown codes were limited");
    // An unknown header name is a configuration error naming the key.
    let bad = vshortlink::config::Config::from_toml("[server]\nclient_ip_header = \"x-client\"\n");
    let error = bad.map(|_| ()).expect_err("refused").to_string();
    assert!(error.contains("client_ip_header"), "{error}");
}

/// Finding 2: `/{code}+` shows a destination only where a visitor reaches it without a gate.
#[test]
fn the_preview_shows_nothing_a_gate_hides() {
    let app = TestApp::binary();
    let form = create(
        &app,
        ADMIN,
        json!({"url": "https://example.com/behind-the-form",
               "form": {"fields": [{"name": "phone", "label": "Phone", "type": "tel", "required": true}]}}),
    );
    let r = app.get(&format!("/{}+", code_of(&form)));
    assert_eq!(r.status(), 200);
    let body = r.text().expect("body");
    assert!(!body.contains("behind-the-form"), "{body}");
    assert!(body.contains("fill in a short form"), "says why: {body}");

    let later = create(
        &app,
        ADMIN,
        json!({"url": "https://example.com/embargoed", "valid_from": "2030-01-01T00:00:00Z"}),
    );
    let code = code_of(&later);
    assert_eq!(app.get(&format!("/{code}")).status(), 404);
    let r = app.get(&format!("/{code}+"));
    assert_eq!(r.status(), 404, "as unknown as the redirect");
    assert!(!r.text().expect("body").contains("embargoed"));

    // A plain link's preview still shows where it goes.
    let plain = create(&app, ADMIN, json!({"url": "https://example.com/open"}));
    let body = app
        .get(&format!("/{}+", code_of(&plain)))
        .text()
        .expect("body");
    assert!(body.contains("example.com&#x2f;open"), "{body}");
}

/// The visits stored for a link, once the writer has stored `n` (or the time is up).
fn visits_after(app: &TestApp, code: &str, n: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let link = app.api_get(&format!("/api/v1/links/{code}"), ADMIN);
        let total = link["visits_total"].as_u64().unwrap_or(0);
        if total >= n || Instant::now() > deadline {
            return total;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Finding 3: `HEAD` answers what `GET` would, claiming no slot of a visit cap.
#[test]
fn head_uses_up_nothing() {
    let app = TestApp::binary();
    let link = create(
        &app,
        ADMIN,
        json!({"url": "https://example.com/once", "max_visits": 3}),
    );
    let code = code_of(&link);
    let head = |code: &str| {
        app.req(Method::HEAD, &format!("/{code}"), None)
            .send()
            .expect("HEAD")
    };
    for _ in 0..5 {
        let r = head(&code);
        assert_eq!(r.status(), 302);
        assert_eq!(r.headers()["location"], "https://example.com/once");
    }
    let read = app.api_get(&format!("/api/v1/links/{code}"), ADMIN);
    assert_eq!(read["status"], "active", "{read}");
    assert_eq!(read["visits_remaining"], 3, "{read}");
    for _ in 0..3 {
        assert_eq!(app.get(&format!("/{code}")).status(), 302);
    }
    assert_eq!(app.get(&format!("/{code}")).status(), 410);
    assert_eq!(
        head(&code).status(),
        410,
        "an ended link is ended for HEAD too"
    );
    assert_eq!(visits_after(&app, &code, 3), 3);

    // Capped targets alike: HEAD names the target a GET would get, and claims none.
    let rotated = create(
        &app,
        ADMIN,
        json!({"targets": [{"url": "https://example.com/t1", "max_visits": 1},
                           {"url": "https://example.com/t2", "max_visits": 1}],
               "rotation": "failover"}),
    );
    let code = code_of(&rotated);
    for _ in 0..4 {
        assert_eq!(head(&code).headers()["location"], "https://example.com/t1");
    }
    assert_eq!(
        app.get(&format!("/{code}")).headers()["location"],
        "https://example.com/t1"
    );
    assert_eq!(
        app.get(&format!("/{code}")).headers()["location"],
        "https://example.com/t2"
    );
}

/// Finding 4: Argon2 checks run at most as many at once as the memory budget allows (one at
/// the default 256MB); past that a check waits a moment, then is refused 429 with
/// `Retry-After`, never another 19 MiB.
#[test]
fn password_checks_stay_within_the_memory_budget() {
    let app = TestApp::binary_with("[limits.rates]\npassword_per_ip = \"off\"\n", &[]);
    assert_eq!(
        app.metric("vsl_memory_bound_bytes{part=\"password_checks\"}"),
        20.0 * 1024.0 * 1024.0
    );
    let link = create(
        &app,
        ADMIN,
        json!({"url": "https://example.com/guarded", "password": "right-one"}),
    );
    let code = code_of(&link);
    let url = app.url(&format!("/{code}"));
    let threads: Vec<_> = (0..160)
        .map(|i| {
            let url = url.clone();
            let client = app.client.clone();
            std::thread::spawn(move || {
                let r = client
                    .get(url)
                    .header("x-link-password", format!("wrong-{i}"))
                    .header("accept", "application/json")
                    .send()
                    .expect("guess");
                let status = r.status().as_u16();
                let retry = r
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                let body: Value = r.json().unwrap_or(Value::Null);
                (status, retry, body["code"].as_str().map(str::to_string))
            })
        })
        .collect();
    let answers: Vec<_> = threads
        .into_iter()
        .map(|t| t.join().expect("thread"))
        .collect();
    let busy: Vec<_> = answers.iter().filter(|(s, ..)| *s == 429).collect();
    assert!(
        answers.iter().all(|(s, ..)| *s == 403 || *s == 429),
        "{answers:?}"
    );
    assert!(
        !busy.is_empty(),
        "160 checks at once: some must wait their turn out"
    );
    for (_, retry, code) in busy {
        assert_eq!(retry.as_deref(), Some("1"));
        assert_eq!(code.as_deref(), Some("busy"));
    }
    // Once the flood is over, the right password opens the link.
    let r = app
        .client
        .get(&url)
        .header("x-link-password", "right-one")
        .send()
        .expect("right");
    assert_eq!(r.status(), 302);
}

/// Finding 5: a create that asks for options never gets back a link without them.
#[test]
fn dedup_never_drops_the_options_asked_for() {
    let app = TestApp::binary();
    let url = "https://example.com/doc";
    let plain = app.post_json("/api/v1/links", EDITOR, &json!({"url": url}));
    assert_eq!(plain.status(), 201);
    let plain: Value = plain.json().expect("json");
    let r = app.post_json(
        "/api/v1/links",
        ADMIN,
        &json!({"url": url, "password": "topsecret1", "max_visits": 1}),
    );
    assert_eq!(r.status(), 201, "a link of its own");
    let protected: Value = r.json().expect("json");
    assert_eq!(protected["created"], true);
    assert_eq!(protected["password_protected"], true);
    assert_eq!(protected["max_visits"], 1);
    assert_ne!(protected["code"], plain["code"]);
    let r = app
        .client
        .get(app.url(&format!("/{}", code_of(&protected))))
        .header("accept", "application/json")
        .send()
        .expect("get");
    assert_eq!(problem(r, 401)["code"], "password_required");
    // A plain create of the URL still dedups to the plain link, never to the protected one.
    let again = app.post_json("/api/v1/links", EDITOR, &json!({"url": url}));
    assert_eq!(again.status(), 200);
    let again: Value = again.json().expect("json");
    assert_eq!(again["created"], false);
    assert_eq!(again["password_protected"], false);
    assert_eq!(again["code"], plain["code"]);
}

/// Finding 7: failed webhook deliveries are for admins of every space, and a receiver is
/// shown by its host, never its path or query.
#[test]
fn webhook_receivers_are_shown_by_host_to_admins_only() {
    let secret_path = "/services/T000/B000/SECRET-TOKEN";
    let mut app = TestApp::binary_with(
        &format!(
            "[[webhooks]]\nurl = \"http://127.0.0.1:9{secret_path}?token=QUERY-SECRET\"\n\
             events = [\"link.created\"]\nsecret = \"at-least-16-characters\"\n"
        ),
        &[],
    );
    create(&app, ADMIN, json!({"url": "https://example.com/hooked"}));
    let deadline = Instant::now() + Duration::from_secs(20);
    while app.metric("vsl_webhook_deliveries_total{outcome=\"failed\"}") < 1.0 {
        assert!(Instant::now() < deadline, "no failed delivery");
        std::thread::sleep(Duration::from_millis(100));
    }
    let admin = PageClient::signed_in(&app, ADMIN).html("/ui/dashboard", 200);
    assert!(
        admin.contains("127.0.0.1:9"),
        "the receiver's host is shown"
    );
    assert!(!admin.contains("SECRET-TOKEN") && !admin.contains("QUERY-SECRET"));
    let sports = PageClient::signed_in(&app, SPORTS).html("/ui/dashboard", 200);
    assert!(
        !sports.contains("127.0.0.1:9") && !sports.contains("SECRET"),
        "a space-limited key sees no deliveries"
    );
    let editor = PageClient::signed_in(&app, EDITOR).html("/ui/dashboard", 200);
    assert!(!editor.contains("127.0.0.1:9"), "nor does a non-admin");
    assert!(app.terminate().success());
    let log = app.log.lock().map(|l| l.join("\n")).unwrap_or_default();
    assert!(
        !log.contains("SECRET-TOKEN") && !log.contains("QUERY-SECRET"),
        "the log names no receiver's path: {log}"
    );
}
