//! Domains (SPEC §26), from outside, on the real binary: codes per domain, requests routed by
//! their `Host`, the domains' own pages and well-known files, the admin API and its refusals
//! (bad hosts, duplicates, a domain in use, the default domain), teams and plans, and two
//! PostgreSQL instances seeing a new domain within a second. On sled and (with
//! `TEST_STORE=postgres`) on PostgreSQL.

mod common;

use std::time::{Duration, Instant};

use common::{problem, TestApp, ADMIN};
use reqwest::Method;
use serde_json::{json, Value};

const PLANS: &str = r#"
[plans.bare]
features = []
[plans.all]
"#;

fn send(
    app: &TestApp,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> reqwest::blocking::Response {
    let request = app.req(method, path, Some(ADMIN));
    match body {
        Some(b) => request.json(&b),
        None => request,
    }
    .send()
    .expect("request")
}

fn add_domain(app: &TestApp, body: Value) -> Value {
    let r = send(app, Method::POST, "/api/v1/domains", Some(body));
    assert_eq!(r.status(), 201, "add domain");
    r.json().expect("domain")
}

/// `GET path` with a `Host` header, as a browser (or as a JSON client).
fn visit(app: &TestApp, host: &str, path: &str, json_client: bool) -> reqwest::blocking::Response {
    app.client
        .get(app.url(path))
        .header("Host", host)
        .header(
            "Accept",
            if json_client {
                "application/json"
            } else {
                "text/html"
            },
        )
        .send()
        .expect("GET")
}

fn location(r: &reqwest::blocking::Response) -> String {
    r.headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

fn domain_hosts(app: &TestApp) -> Vec<String> {
    app.api_get("/api/v1/domains", ADMIN)["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|d| d["host"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn codes_live_on_their_domain_and_requests_are_routed_by_host() {
    let app = TestApp::binary();
    let added = add_domain(&app, json!({"host": "Go.A.com"}));
    assert_eq!(added["host"], "go.a.com");
    assert_eq!(added["default"], false);
    let items = app.api_get("/api/v1/domains", ADMIN)["items"].clone();
    assert_eq!(items[0]["host"], "sl.test");
    assert_eq!(items[0]["default"], true);
    assert_eq!(items[1]["host"], "go.a.com");
    problem(
        send(
            &app,
            Method::POST,
            "/api/v1/domains",
            Some(json!({"host": "GO.a.COM"})),
        ),
        409,
    );
    let exists = problem(
        send(
            &app,
            Method::POST,
            "/api/v1/domains",
            Some(json!({"host": "sl.test"})),
        ),
        409,
    );
    assert_eq!(exists["code"], "domain_exists");

    // The same custom code on two domains: two links.
    let home = app.create(json!({"url": "https://home.example/", "code": "sale"}));
    let away =
        app.create(json!({"url": "https://away.example/", "code": "sale", "domain": "go.a.com"}));
    assert_ne!(home["id"], away["id"]);
    assert_eq!(home["domain"], "sl.test");
    assert_eq!(home["short_url"], "http://sl.test/sale");
    assert_eq!(away["domain"], "go.a.com");
    assert_eq!(away["short_url"], "http://go.a.com/sale");
    let taken = problem(
        app.post_json(
            "/api/v1/links",
            ADMIN,
            &json!({"url": "https://x.example/", "code": "sale", "domain": "go.a.com"}),
        ),
        409,
    );
    assert_eq!(taken["code"], "code_taken");

    // Routed by Host: port, trailing dot and case ignored; an unknown host is the default.
    for (host, to) in [
        ("sl.test", "https://home.example/"),
        ("go.a.com", "https://away.example/"),
        ("GO.A.COM.:8080", "https://away.example/"),
        ("unknown.example", "https://home.example/"),
    ] {
        let r = visit(&app, host, "/sale", false);
        assert_eq!(r.status(), 302, "{host}");
        assert_eq!(location(&r), to, "{host}");
    }
    // A key is no code: `/sale@ID` reaches no other domain's link, on any route.
    let id = app.api_get("/api/v1/domains", ADMIN)["items"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    for n in 1..=id {
        assert_eq!(
            visit(&app, "sl.test", &format!("/sale@{n}"), true).status(),
            404
        );
        assert_eq!(
            visit(&app, "sl.test", &format!("/sale%40{n}"), true).status(),
            404
        );
        problem(
            send(&app, Method::GET, &format!("/api/v1/links/sale@{n}"), None),
            404,
        );
    }
    // A link answers on its own domain only.
    app.create(json!({"url": "https://only.example/", "code": "only", "domain": "go.a.com"}));
    assert_eq!(visit(&app, "sl.test", "/only", true).status(), 404);
    assert_eq!(visit(&app, "go.a.com", "/only", true).status(), 302);

    // The API addresses a link on a domain with ?domain=.
    let got = app.api_get("/api/v1/links/sale?domain=go.a.com", ADMIN);
    assert_eq!(got["url"], "https://away.example/");
    assert_eq!(got["domain"], "go.a.com");
    assert_eq!(
        app.api_get("/api/v1/links/sale", ADMIN)["url"],
        "https://home.example/"
    );
    problem(
        send(
            &app,
            Method::GET,
            "/api/v1/links/sale?domain=nope.example",
            None,
        ),
        404,
    );
    problem(send(&app, Method::GET, "/api/v1/links/only", None), 404);
    app.api_get("/api/v1/links/only/stats?domain=go.a.com", ADMIN);
    app.api_get("/api/v1/links/only/visits?domain=go.a.com", ADMIN);
    let qr = send(
        &app,
        Method::GET,
        "/api/v1/links/only/qr?domain=go.a.com",
        None,
    );
    assert_eq!(qr.status(), 200);
    let patched = send(
        &app,
        Method::PATCH,
        "/api/v1/links/sale?domain=go.a.com",
        Some(json!({"url": "https://away.example/2"})),
    );
    assert_eq!(patched.status(), 200);
    assert_eq!(
        location(&visit(&app, "go.a.com", "/sale", false)),
        "https://away.example/2"
    );
    assert_eq!(
        location(&visit(&app, "sl.test", "/sale", false)),
        "https://home.example/"
    );

    // Pooled codes on a domain; dedup per space and domain.
    let first = app.create(json!({"url": "https://pooled.example/", "domain": "go.a.com"}));
    let again = app.create(json!({"url": "https://pooled.example/", "domain": "go.a.com"}));
    let home_one = app.create(json!({"url": "https://pooled.example/"}));
    assert_eq!(first["id"], again["id"], "dedup on one domain");
    assert_ne!(first["id"], home_one["id"], "no dedup across domains");
    assert_ne!(
        first["code"], home_one["code"],
        "pooled codes never collide"
    );
    let code = first["code"].as_str().expect("code");
    assert!(first["short_url"]
        .as_str()
        .unwrap_or("")
        .starts_with("http://go.a.com/"));
    assert_eq!(
        visit(&app, "go.a.com", &format!("/{code}"), true).status(),
        302
    );
    assert_eq!(
        visit(&app, "sl.test", &format!("/{code}"), true).status(),
        404
    );

    // A URL on a configured domain is this server: a loop (SPEC §16), refused.
    let looped = problem(
        app.post_json(
            "/api/v1/links",
            ADMIN,
            &json!({"url": "http://go.a.com/sale"}),
        ),
        400,
    );
    assert_eq!(looped["field"], "url");

    // An unconfigured domain in a create: 400 naming `domain`, nothing written.
    let before = app.link_total();
    let bad = problem(
        app.post_json(
            "/api/v1/links",
            ADMIN,
            &json!({"url": "https://x.example/", "domain": "nope.example"}),
        ),
        400,
    );
    assert_eq!(bad["field"], "domain");
    assert_eq!(app.link_total(), before);

    // Deleting: a domain in use, the default domain, an unknown one; a free one goes.
    let in_use = problem(
        send(&app, Method::DELETE, "/api/v1/domains/go.a.com", None),
        409,
    );
    assert_eq!(in_use["code"], "domain_in_use");
    problem(
        send(&app, Method::DELETE, "/api/v1/domains/sl.test", None),
        409,
    );
    problem(
        send(&app, Method::DELETE, "/api/v1/domains/nope.example", None),
        404,
    );
    add_domain(&app, json!({"host": "free.example"}));
    assert_eq!(
        send(&app, Method::DELETE, "/api/v1/domains/free.example", None).status(),
        204
    );
    problem(
        send(&app, Method::GET, "/api/v1/domains/free.example", None),
        404,
    );
}

#[test]
fn bad_hosts_are_refused_naming_host_and_idns_become_punycode() {
    let app = TestApp::binary();
    let before = domain_hosts(&app);
    for bad in [
        "a.com:8080",
        "a.com.",
        "https://a.com",
        "a.com/path",
        "a..com",
        "-a.com",
        "a_b.com",
        "",
        "1.2.3.4",
        "[::1]",
        &format!("{}.com", "x".repeat(64)),
    ] {
        let p = problem(
            send(
                &app,
                Method::POST,
                "/api/v1/domains",
                Some(json!({"host": bad})),
            ),
            400,
        );
        assert_eq!(p["field"], "host", "{bad:?}");
    }
    assert_eq!(domain_hosts(&app), before, "nothing written");
    assert_eq!(
        add_domain(&app, json!({"host": "Bücher.DE"}))["host"],
        "xn--bcher-kva.de"
    );
    let link =
        app.create(json!({"url": "https://b.example/", "code": "buch", "domain": "bücher.de"}));
    assert_eq!(link["domain"], "xn--bcher-kva.de");
    assert_eq!(visit(&app, "xn--bcher-kva.de", "/buch", true).status(), 302);
    // Only admins manage domains.
    let r = app
        .req(Method::POST, "/api/v1/domains", Some(common::EDITOR))
        .json(&json!({"host": "e.example"}))
        .send()
        .expect("POST");
    problem(r, 403);
}

#[test]
fn domains_answer_their_own_pages_and_well_known_files() {
    let app = TestApp::binary_with(
        "",
        &[("VSL_SERVER__NOT_FOUND_URL", "https://global.example/404")],
    );
    add_domain(
        &app,
        json!({
            "host": "go.b.com",
            "root_url": "https://b.example/",
            "not_found_url": "https://b.example/missing",
            "other_url": "https://b.example/other",
            "apple_app_site_association": {"applinks": {"apps": [], "details": []}},
            "assetlinks": [{"relation": ["delegate_permission/common.handle_all_urls"]}]
        }),
    );
    let r = visit(&app, "go.b.com", "/", false);
    assert_eq!(r.status(), 302);
    assert_eq!(location(&r), "https://b.example/");
    assert_eq!(
        location(&visit(&app, "go.b.com", "/nosuch", false)),
        "https://b.example/missing"
    );
    assert_eq!(
        location(&visit(&app, "go.b.com", "/a/b/c", false)),
        "https://b.example/other"
    );
    // JSON clients still get 404 problem+json.
    problem(visit(&app, "go.b.com", "/nosuch", true), 404);
    // An ended link without a fallback: the domain's not_found_url.
    app.create(json!({"url": "https://e.example/", "code": "ended", "domain": "go.b.com"}));
    assert_eq!(
        send(
            &app,
            Method::DELETE,
            "/api/v1/links/ended?domain=go.b.com",
            None
        )
        .status(),
        204
    );
    assert_eq!(
        location(&visit(&app, "go.b.com", "/ended", false)),
        "https://b.example/missing"
    );
    // The default domain has none set: the global not_found_url.
    assert_eq!(
        location(&visit(&app, "sl.test", "/nosuch", false)),
        "https://global.example/404"
    );
    // Well-known files, on that domain only.
    let r = visit(
        &app,
        "go.b.com",
        "/.well-known/apple-app-site-association",
        true,
    );
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    let body: Value = r.json().expect("json");
    assert_eq!(body["applinks"]["apps"], json!([]));
    let r = visit(&app, "go.b.com", "/.well-known/assetlinks.json", true);
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.json::<Value>().expect("json")[0]["relation"][0],
        "delegate_permission/common.handle_all_urls"
    );
    assert_eq!(
        visit(&app, "sl.test", "/.well-known/assetlinks.json", true).status(),
        404
    );
    // Patched: null clears; the default domain can be patched too.
    let patched = send(
        &app,
        Method::PATCH,
        "/api/v1/domains/go.b.com",
        Some(json!({"root_url": null, "assetlinks": null})),
    );
    assert_eq!(patched.status(), 200);
    let patched: Value = patched.json().expect("json");
    assert_eq!(patched["root_url"], Value::Null);
    assert_eq!(patched["not_found_url"], "https://b.example/missing");
    assert_eq!(
        visit(&app, "go.b.com", "/.well-known/assetlinks.json", true).status(),
        404
    );
    let default = send(
        &app,
        Method::PATCH,
        "/api/v1/domains/sl.test",
        Some(json!({"root_url": "https://home.example/"})),
    );
    assert_eq!(default.status(), 200);
    assert_eq!(
        location(&visit(&app, "sl.test", "/", false)),
        "https://home.example/"
    );
    assert_eq!(
        location(&visit(&app, "elsewhere.example", "/", false)),
        "https://home.example/"
    );
}

#[test]
fn a_team_domain_takes_its_team_links_and_plans_gate_domains() {
    let app = TestApp::binary_with(PLANS, &[]);
    for (slug, plan) in [("acme", "all"), ("other", "all"), ("poor", "bare")] {
        let r = app.post_json("/api/v1/teams", ADMIN, &json!({"slug": slug, "plan": plan}));
        assert_eq!(r.status(), 201, "team {slug}");
    }
    add_domain(&app, json!({"host": "go.acme.com", "team": "acme"}));
    add_domain(&app, json!({"host": "go.open.com"}));
    problem(
        send(
            &app,
            Method::POST,
            "/api/v1/domains",
            Some(json!({"host": "x.example", "team": "nobody"})),
        ),
        400,
    );
    let made = app.post_json(
        "/api/v1/links",
        ADMIN,
        &json!({"url": "https://acme.example/", "code": "a1", "space": "acme", "domain": "go.acme.com"}),
    );
    assert_eq!(made.status(), 201);
    // Another space's key names the team's domain: it sees none of the team's links there,
    // listed or addressed by code.
    let listed = app.api_get("/api/v1/links?domain=go.acme.com", common::SPORTS);
    assert_eq!(listed["items"], json!([]), "{listed}");
    let r = app
        .req(
            Method::GET,
            "/api/v1/links/a1?domain=go.acme.com",
            Some(common::SPORTS),
        )
        .send()
        .expect("get");
    assert!(
        matches!(r.status().as_u16(), 403 | 404),
        "another space's link: {}",
        r.status()
    );
    let before = app.link_total();
    let refused = problem(
        app.post_json(
            "/api/v1/links",
            ADMIN,
            &json!({"url": "https://other.example/", "code": "o1", "space": "other", "domain": "go.acme.com"}),
        ),
        403,
    );
    assert_eq!(refused["field"], "domain");
    let gated = problem(
        app.post_json(
            "/api/v1/links",
            ADMIN,
            &json!({"url": "https://poor.example/", "space": "poor", "domain": "go.open.com"}),
        ),
        403,
    );
    assert_eq!(gated["code"], "feature_not_in_plan");
    assert_eq!(gated["field"], "domain");
    assert_eq!(app.link_total(), before, "nothing written");
    // The default domain needs no feature.
    let r = app.post_json(
        "/api/v1/links",
        ADMIN,
        &json!({"url": "https://poor.example/", "space": "poor"}),
    );
    assert_eq!(r.status(), 201);
}

#[test]
fn two_postgres_instances_see_a_new_domain_within_a_second() {
    let Some(url) = common::postgres::fresh_database() else {
        return;
    };
    let a = TestApp::start_on(&url, "", &[]);
    let b = TestApp::start_on(&url, "", &[]);
    // B has routed a request before the domain exists (nothing cached keeps it away after).
    assert_eq!(visit(&b, "go.c.com", "/c1", true).status(), 404);
    add_domain(&a, json!({"host": "go.c.com"}));
    a.create(json!({"url": "https://c.example/", "code": "c1", "domain": "go.c.com"}));
    let started = Instant::now();
    let mut seen = false;
    while started.elapsed() < Duration::from_secs(1) {
        if visit(&b, "go.c.com", "/c1", true).status() == 302 {
            seen = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        seen,
        "a domain added on one instance answers on the other within 1 s"
    );
    // And the default domain keeps its own `c1` apart.
    assert_eq!(visit(&b, "sl.test", "/c1", true).status(), 404);
    let hosts = domain_hosts(&b);
    assert!(hosts.contains(&"go.c.com".to_string()));
}

fn shlink(
    app: &TestApp,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> reqwest::blocking::Response {
    let request = app
        .client
        .request(method, app.url(path))
        .header("X-Api-Key", ADMIN);
    match body {
        Some(b) => request.json(&b),
        None => request,
    }
    .send()
    .expect("request")
}

#[test]
fn shlink_creates_lists_and_redirects_per_domain() {
    let app = TestApp::binary();
    add_domain(
        &app,
        json!({"host": "go.s.com", "root_url": "https://s.example/"}),
    );
    let r = shlink(
        &app,
        Method::POST,
        "/rest/v3/short-urls",
        Some(
            json!({"longUrl": "https://s.example/long", "customSlug": "s1", "domain": "go.s.com"}),
        ),
    );
    assert_eq!(r.status(), 200);
    let made: Value = r.json().expect("json");
    assert_eq!(made["shortUrl"], "http://go.s.com/s1");
    assert_eq!(made["domain"], "go.s.com");
    let home = shlink(
        &app,
        Method::POST,
        "/rest/v3/short-urls",
        Some(json!({"longUrl": "https://s.example/home", "customSlug": "s1"})),
    );
    assert_eq!(home.status(), 200);
    assert_eq!(home.json::<Value>().expect("json")["domain"], Value::Null);
    let r = shlink(
        &app,
        Method::POST,
        "/rest/v3/short-urls",
        Some(json!({"longUrl": "https://s.example/x", "domain": "nope.example"})),
    );
    assert_eq!(r.status(), 400);

    let got = shlink(
        &app,
        Method::GET,
        "/rest/v3/short-urls/s1?domain=go.s.com",
        None,
    );
    assert_eq!(got.status(), 200);
    assert_eq!(
        got.json::<Value>().expect("json")["longUrl"],
        "https://s.example/long"
    );
    let got = shlink(&app, Method::GET, "/rest/v3/short-urls/s1", None);
    assert_eq!(
        got.json::<Value>().expect("json")["longUrl"],
        "https://s.example/home"
    );
    let listed: Value = shlink(
        &app,
        Method::GET,
        "/rest/v3/short-urls?domain=go.s.com",
        None,
    )
    .json()
    .expect("json");
    let data = listed["shortUrls"]["data"].as_array().expect("data");
    assert_eq!(data.len(), 1);
    assert_eq!(data[0]["domain"], "go.s.com");

    let domains: Value = shlink(&app, Method::GET, "/rest/v3/domains", None)
        .json()
        .expect("json");
    let data = domains["domains"]["data"].as_array().expect("data");
    assert_eq!(data[0]["isDefault"], true);
    let ours = data
        .iter()
        .find(|d| d["domain"] == "go.s.com")
        .expect("go.s.com");
    assert_eq!(ours["isDefault"], false);
    assert_eq!(ours["redirects"]["baseUrlRedirect"], "https://s.example/");
    assert_eq!(ours["redirects"]["regular404Redirect"], Value::Null);

    let r = shlink(
        &app,
        Method::PATCH,
        "/rest/v3/domains/redirects",
        Some(
            json!({"domain": "go.s.com", "regular404Redirect": "https://s.example/404", "baseUrlRedirect": null}),
        ),
    );
    assert_eq!(r.status(), 200);
    let redirects: Value = r.json().expect("json");
    assert_eq!(redirects["regular404Redirect"], "https://s.example/404");
    assert_eq!(redirects["baseUrlRedirect"], Value::Null);
    assert_eq!(
        location(&visit(&app, "go.s.com", "/a/b", false)),
        "https://s.example/404"
    );
    assert_eq!(
        visit(&app, "go.s.com", "/", false).status(),
        200,
        "no root_url: the home page"
    );
    let r = shlink(
        &app,
        Method::PATCH,
        "/rest/v3/domains/redirects",
        Some(json!({"domain": "nope.example", "regular404Redirect": "https://s.example/404"})),
    );
    assert_eq!(r.status(), 400);
}

/// The domain and link lines of an export, as (kind, key fields) sorted, for comparing two.
fn exported(path: &std::path::Path) -> (Vec<Value>, Vec<(String, String, String)>) {
    let text = std::fs::read_to_string(path).expect("export");
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    let first_link = records.iter().position(|r| r["type"] == "link");
    let last_domain = records.iter().rposition(|r| r["type"] == "domain");
    assert!(last_domain < first_link, "domains come before links");
    let mut domains: Vec<Value> = records
        .iter()
        .filter(|r| r["type"] == "domain")
        .map(|r| json!({"host": r["host"], "default": r["default"], "root_url": r["root_url"], "assetlinks": r["assetlinks"]}))
        .collect();
    domains.sort_by_key(|d| d["host"].as_str().unwrap_or("").to_string());
    let mut links: Vec<(String, String, String)> = records
        .iter()
        .filter(|r| r["type"] == "link")
        .map(|r| {
            (
                r["code"].as_str().unwrap_or("").to_string(),
                r["domain"].as_str().unwrap_or("").to_string(),
                r["url"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    links.sort();
    (domains, links)
}

#[test]
fn export_and_import_carry_domains_and_links_on_them() {
    use common::cli::{offline_on_test_store, text, vsl};
    let mut app = TestApp::binary();
    add_domain(
        &app,
        json!({"host": "go.x.com", "root_url": "https://x.example/", "assetlinks": [{"a": 1}]}),
    );
    add_domain(&app, json!({"host": "go.y.com"}));
    assert_eq!(
        send(
            &app,
            Method::PATCH,
            "/api/v1/domains/sl.test",
            Some(json!({"root_url": "https://home.example/"}))
        )
        .status(),
        200
    );
    app.create(json!({"url": "https://home.example/same", "code": "same"}));
    app.create(json!({"url": "https://x.example/same", "code": "same", "domain": "go.x.com"}));
    app.create(json!({"url": "https://y.example/same", "code": "same", "domain": "go.y.com"}));
    app.create(json!({"url": "https://x.example/pooled", "domain": "go.x.com"}));
    assert!(app.terminate().success());
    let first = app.dir.path().join("first.jsonl");
    let out = vsl(
        &app.config_path(),
        &["export", "--output", first.to_str().expect("path")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (domains, links) = exported(&first);
    assert_eq!(domains.len(), 3, "{domains:?}");
    assert_eq!(domains[0]["host"], "go.x.com");
    assert_eq!(domains[0]["assetlinks"], json!([{"a": 1}]));
    assert_eq!(domains[2]["host"], "sl.test");
    assert_eq!(domains[2]["default"], true);
    assert_eq!(links.iter().filter(|l| l.0 == "same").count(), 3);
    assert!(links.contains(&(
        "same".into(),
        "go.y.com".into(),
        "https://y.example/same".into()
    )));
    assert!(links.contains(&("same".into(), "".into(), "https://home.example/same".into())));

    // Into a fresh store, and out again: the same domains and links.
    let fresh = tempfile::tempdir().expect("dir");
    let config = offline_on_test_store(fresh.path());
    let out = vsl(&config, &["import", first.to_str().expect("path")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("refused 0"),
        "{}",
        text(&out.stderr)
    );
    let second = fresh.path().join("second.jsonl");
    let out = vsl(
        &config,
        &["export", "--output", second.to_str().expect("path")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(exported(&second), (domains, links));
    // Again: nothing new.
    let out = vsl(&config, &["import", first.to_str().expect("path")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("created 0"),
        "{}",
        text(&out.stderr)
    );
    let out = vsl(&config, &["check"]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn the_pages_add_list_and_use_domains_in_both_languages() {
    use common::pages::{location as page_location, PageClient};
    let app = TestApp::binary();
    let admin = PageClient::signed_in(&app, ADMIN);
    let html = admin.html("/ui/domains", 200);
    assert!(html.contains("Add a domain") && html.contains("sl.test"));
    // The create form has no domain select while there is one domain.
    assert!(!admin.html("/", 200).contains("name=\"domain\""));
    let r = admin.post_form(
        "/ui/domains",
        &[("host", "Go.P.com"), ("root_url", "https://p.example/")],
    );
    assert_eq!(r.status(), 303);
    assert_eq!(page_location(&r), "/ui/domains?done=created");
    let html = admin.html("/ui/domains?done=created", 200);
    assert!(html.contains("go.p.com") && html.contains("The domain was added."));
    let r = admin.post_form("/ui/domains", &[("host", "a.example:8080")]);
    assert_eq!(r.status(), 400);
    assert!(r.text().expect("body").contains("no scheme, port, path"));
    assert_eq!(domain_hosts(&app).len(), 2, "nothing written");

    // A create on the domain through the home page's select.
    let home = admin.html("/", 200);
    assert!(home.contains("name=\"domain\"") && home.contains("<option>go.p.com</option>"));
    let r = admin.post_form(
        "/",
        &[
            ("url", "https://p.example/page"),
            ("code", "pg1"),
            ("domain", "go.p.com"),
        ],
    );
    let body = r.text().expect("body");
    assert!(
        body.contains("http:&#x2f;&#x2f;go.p.com&#x2f;pg1"),
        "{body}"
    );
    assert_eq!(visit(&app, "go.p.com", "/pg1", true).status(), 302);
    // The list shows the domain; the link's page is reached by its own path.
    let list = admin.html("/ui/links", 200);
    assert!(list.contains("<td class=\"domain\">go.p.com</td>"));
    let start = list
        .find("/ui/links/pg1%40")
        .expect("a link to the page of pg1 on go.p.com");
    let href: String = list[start..].chars().take_while(|c| *c != '"').collect();
    let page = admin.html(&href, 200);
    assert!(page.contains("go.p.com&#x2f;pg1"), "{page}");
    // In use: not deleted, and the page says why.
    let r = admin.post_form("/ui/domains/go.p.com", &[("action", "delete")]);
    assert_eq!(r.status(), 409);
    assert!(r.text().expect("body").contains("Links are on this domain"));
    // A domain that is not (or no longer) configured: said above the list, not lost.
    let r = admin.post_form("/ui/domains/gone.example", &[("action", "delete")]);
    assert_eq!(r.status(), 404);
    assert!(r
        .text()
        .expect("body")
        .contains("That domain is no longer configured"));
    // Edited: the root URL cleared.
    let r = admin.post_form(
        "/ui/domains/go.p.com",
        &[("action", "save"), ("root_url", ""), ("assetlinks", "[1]")],
    );
    assert_eq!(r.status(), 303);
    assert_eq!(
        app.api_get("/api/v1/domains/go.p.com", ADMIN)["root_url"],
        Value::Null
    );
    assert_eq!(
        app.api_get("/api/v1/domains/go.p.com", ADMIN)["assetlinks"],
        json!([1])
    );
    // Simplified Chinese.
    let r = admin.get("/ui/lang?set=zh-CN&back=%2Fui%2Fdomains");
    assert!(r.status().is_redirection());
    let html = admin.html("/ui/domains", 200);
    assert!(html.contains("添加域名"), "{html}");
    // Not for editors.
    let editor = PageClient::signed_in(&app, common::EDITOR);
    assert_eq!(editor.get("/ui/domains").status(), 403);
}

/// The `hash` strategy (the default configuration's tier 7) computes the same code for a URL on
/// every domain, each taken on its own domain; dedup keeps one link per domain.
#[test]
fn hash_codes_are_the_same_on_every_domain_and_taken_per_domain() {
    let app = TestApp::binary();
    add_domain(&app, json!({"host": "go.h.com"}));
    let url = "https://hash.example/some/page";
    let home = app.create(json!({"url": url, "length": 7}));
    let away = app.create(json!({"url": url, "length": 7, "domain": "go.h.com"}));
    let again = app.create(json!({"url": url, "length": 7, "domain": "go.h.com"}));
    assert_eq!(
        home["code"], away["code"],
        "the same candidates on every domain"
    );
    assert_ne!(home["id"], away["id"], "taken per domain");
    assert_eq!(away["id"], again["id"], "dedup per domain");
    let code = home["code"].as_str().expect("code");
    assert_eq!(
        location(&visit(&app, "sl.test", &format!("/{code}"), false)),
        url
    );
    assert_eq!(
        location(&visit(&app, "go.h.com", &format!("/{code}"), false)),
        url
    );
}

/// A backup of the running server holds the domains before the links; `backup --verify`
/// accepts it, and a restore serves each link on its domain again and passes `check`.
#[test]
fn a_backup_carries_domains_and_a_restore_serves_links_on_them() {
    use common::cli::{text, vsl};
    let source = TestApp::binary();
    add_domain(
        &source,
        json!({"host": "go.r.com", "not_found_url": "https://r.example/404"}),
    );
    source.create(json!({"url": "https://r.example/home", "code": "rr"}));
    source.create(json!({"url": "https://r.example/away", "code": "rr", "domain": "go.r.com"}));
    let r = source
        .req(Method::GET, "/api/v1/backup", Some(ADMIN))
        .send()
        .expect("backup");
    assert_eq!(r.status(), 200);
    let body = r.text().expect("body");
    let kinds: Vec<String> = body
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("json")["type"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    let domain_at = kinds
        .iter()
        .position(|k| k == "domain")
        .expect("a domain record");
    let link_at = kinds
        .iter()
        .position(|k| k == "link")
        .expect("a link record");
    assert!(domain_at < link_at, "{kinds:?}");
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("all.jsonl");
    std::fs::write(&file, &body).expect("write");
    let file = file.to_str().expect("path");

    let mut target = TestApp::binary();
    target.terminate();
    let verified = vsl(&target.config_path(), &["backup", "--verify", file]);
    assert!(verified.status.success(), "{}", text(&verified.stderr));
    let restored = vsl(&target.config_path(), &["restore", file]);
    assert!(restored.status.success(), "{}", text(&restored.stderr));
    let checked = vsl(&target.config_path(), &["check"]);
    assert!(
        checked.status.success(),
        "{}{}",
        text(&checked.stdout),
        text(&checked.stderr)
    );
    target.respawn();
    assert_eq!(
        location(&visit(&target, "go.r.com", "/rr", false)),
        "https://r.example/away"
    );
    assert_eq!(
        location(&visit(&target, "sl.test", "/rr", false)),
        "https://r.example/home"
    );
    assert_eq!(
        location(&visit(&target, "go.r.com", "/nope", false)),
        "https://r.example/404"
    );
}

/// `GET /api/v1/links?domain=HOST` lists that domain's links only (a host no domain has: 400
/// naming `domain`, as the list's other filters refuse a bad value), alone or with the other
/// filters; the links page filters by domain the same way.
#[test]
fn the_list_of_links_filters_by_domain() {
    use common::pages::PageClient;
    let app = TestApp::binary();
    add_domain(&app, json!({"host": "go.l.com"}));
    add_domain(&app, json!({"host": "go.m.com"}));
    let home = app.create(json!({"url": "https://l.example/home", "code": "lst"}));
    let on_l =
        app.create(json!({"url": "https://l.example/on-l", "code": "lst", "domain": "go.l.com"}));
    let other_l = app.create(json!({"url": "https://l.example/other", "domain": "go.l.com"}));
    let on_m =
        app.create(json!({"url": "https://l.example/on-m", "code": "lst", "domain": "go.m.com"}));
    let ids = |path: &str| -> Vec<Value> {
        app.api_get(path, ADMIN)["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|l| l["id"].clone())
            .collect()
    };
    assert_eq!(
        ids("/api/v1/links?domain=go.l.com"),
        vec![on_l["id"].clone(), other_l["id"].clone()]
    );
    // Any case, a trailing dot: the same host.
    assert_eq!(
        ids("/api/v1/links?domain=GO.L.com."),
        vec![on_l["id"].clone(), other_l["id"].clone()]
    );
    assert_eq!(
        ids("/api/v1/links?domain=go.m.com"),
        vec![on_m["id"].clone()]
    );
    assert_eq!(
        ids("/api/v1/links?domain=sl.test"),
        vec![home["id"].clone()]
    );
    assert_eq!(ids("/api/v1/links").len(), 4, "no filter: every domain");
    assert_eq!(ids("/api/v1/links?domain="), ids("/api/v1/links"));
    // With the other filters, and paged.
    assert_eq!(
        ids("/api/v1/links?domain=go.l.com&q=on-l"),
        vec![on_l["id"].clone()]
    );
    let first = app.api_get("/api/v1/links?domain=go.l.com&limit=1", ADMIN);
    assert_eq!(first["items"][0]["id"], on_l["id"]);
    let cursor = first["next_cursor"].as_str().expect("a next page");
    assert_eq!(
        ids(&format!(
            "/api/v1/links?domain=go.l.com&limit=1&cursor={cursor}"
        )),
        vec![other_l["id"].clone()]
    );
    let bad = problem(
        send(&app, Method::GET, "/api/v1/links?domain=nope.example", None),
        400,
    );
    assert_eq!(bad["field"], "domain");
    assert_eq!(bad["code"], "invalid_query");
    // The OpenAPI document names the filter.
    let doc = app.api_get("/api/v1/openapi.json", ADMIN);
    let params = doc["paths"]["/api/v1/links"]["get"]["parameters"]
        .as_array()
        .expect("parameters");
    assert!(params.iter().any(|p| p["name"] == "domain"), "{params:?}");

    // The page: a domain select beside the other filters.
    let admin = PageClient::signed_in(&app, ADMIN);
    let html = admin.html("/ui/links", 200);
    assert!(html.contains("id=\"f-domain\""), "{html}");
    let html = admin.html("/ui/links?domain=go.m.com", 200);
    assert!(html.contains("l.example&#x2f;on-m"), "{html}");
    assert!(!html.contains("l.example&#x2f;on-l"), "{html}");
    assert!(
        html.contains("<option selected>go.m.com</option>"),
        "{html}"
    );
}

/// The add form takes the two well-known files as JSON; text that is not JSON is refused
/// under its field with what was typed kept, nothing written; the edit form does the same.
#[test]
fn the_domain_forms_take_well_known_json_and_name_a_bad_one() {
    use common::pages::PageClient;
    let app = TestApp::binary();
    let admin = PageClient::signed_in(&app, ADMIN);
    let html = admin.html("/ui/domains", 200);
    assert!(html.contains("id=\"apple_app_site_association\""));
    assert!(html.contains("id=\"assetlinks\""));
    let r = admin.post_form(
        "/ui/domains",
        &[
            ("host", "go.j.com"),
            (
                "apple_app_site_association",
                "{\"applinks\": {\"details\": []}}",
            ),
            ("assetlinks", "{not json"),
        ],
    );
    assert_eq!(r.status(), 400);
    let body = r.text().expect("body");
    assert!(body.contains("id=\"assetlinks-error\""), "{body}");
    assert!(body.contains("This is not JSON."), "{body}");
    assert!(
        body.contains("{not json</textarea>"),
        "what was typed is kept: {body}"
    );
    assert!(!body.contains("id=\"apple_app_site_association-error\""));
    assert_eq!(domain_hosts(&app).len(), 1, "nothing written");
    let r = admin.post_form(
        "/ui/domains",
        &[
            ("host", "go.j.com"),
            (
                "apple_app_site_association",
                "{\"applinks\": {\"details\": []}}",
            ),
            ("assetlinks", "[{\"relation\": [\"x\"]}]"),
        ],
    );
    assert_eq!(r.status(), 303);
    let made = app.api_get("/api/v1/domains/go.j.com", ADMIN);
    assert_eq!(
        made["apple_app_site_association"],
        json!({"applinks": {"details": []}})
    );
    assert_eq!(made["assetlinks"], json!([{"relation": ["x"]}]));
    let served = visit(&app, "go.j.com", "/.well-known/assetlinks.json", true);
    assert_eq!(served.status(), 200);
    assert_eq!(
        served.json::<Value>().expect("json"),
        json!([{"relation": ["x"]}])
    );

    // The edit form: a bad file is named under its field, the form open, nothing changed.
    let r = admin.post_form(
        "/ui/domains/go.j.com",
        &[
            ("action", "save"),
            ("apple_app_site_association", "[1,"),
            ("assetlinks", "[2]"),
        ],
    );
    assert_eq!(r.status(), 400);
    let body = r.text().expect("body");
    assert!(
        body.contains("id=\"row-go-j-com-apple_app_site_association-error\""),
        "{body}"
    );
    assert!(body.contains("<details class=\"fold\" open>"), "{body}");
    assert!(body.contains("[1,</textarea>"), "{body}");
    assert_eq!(
        app.api_get("/api/v1/domains/go.j.com", ADMIN)["assetlinks"],
        json!([{"relation": ["x"]}]),
        "nothing changed"
    );
    // In Chinese too.
    let r = admin.get("/ui/lang?set=zh-CN&back=%2Fui%2Fdomains");
    assert!(r.status().is_redirection());
    let r = admin.post_form(
        "/ui/domains",
        &[("host", "go.k.com"), ("assetlinks", "nope")],
    );
    assert_eq!(r.status(), 400);
    assert!(r.text().expect("body").contains("这不是有效的 JSON。"));
}
