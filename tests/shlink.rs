//! The Shlink-compatible REST API (`/rest/v3`, docs/shlink.md): driven by Shlink's own SDK
//! (`@shlinkio/shlink-js-sdk` from npm, run by node), and by plain HTTP for what the SDK hides
//! (date format, pagination fields, CORS, error shapes).
//!
//! The SDK is installed once per test binary into `CARGO_TARGET_TMPDIR` (kept between runs,
//! with its npm cache beside it). Without `node` or `npm` the SDK tests print why and pass,
//! unless `REQUIRE_NODE=1`, when they fail.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{TestApp, ADMIN, BASE_URL, EDITOR, SPORTS, VIEWER};
use reqwest::Method;
use serde_json::{json, Value};

/// The directory holding `node_modules/@shlinkio/shlink-js-sdk`, or `None` (skipped).
fn sdk_dir() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(install_sdk).clone()
}

fn install_sdk() -> Option<PathBuf> {
    let required = std::env::var("REQUIRE_NODE").as_deref() == Ok("1");
    let works = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !works("node") || !works("npm") {
        assert!(!required, "REQUIRE_NODE=1 but node or npm is missing");
        eprintln!("skipped: node and npm are needed to drive Shlink's SDK");
        return None;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("shlink-sdk");
    if dir
        .join("node_modules/@shlinkio/shlink-js-sdk/package.json")
        .exists()
    {
        return Some(dir);
    }
    std::fs::create_dir_all(&dir).expect("sdk dir");
    let npm = |args: &[&str]| {
        let output = Command::new("npm")
            .args(args)
            .arg("--cache")
            .arg(dir.join(".npm-cache"))
            .args(["--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .output()
            .expect("run npm");
        let ok = output.status.success();
        if !ok {
            eprintln!(
                "npm {args:?} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        ok
    };
    let installed = npm(&["init", "-y"]) && npm(&["install", "@shlinkio/shlink-js-sdk@3"]);
    if !installed {
        assert!(!required, "REQUIRE_NODE=1 but the SDK did not install");
        eprintln!("skipped: the SDK did not install from npm");
        return None;
    }
    Some(dir)
}

/// What every script starts with: the SDK, a client for the app (`api`, with `KEY`), a
/// client for any key (`client(key)`), `attempt` (a call's result or the problem it was
/// rejected with), and `out`, printed as JSON at the end.
const PREAMBLE: &str = r#"
import { ShlinkApiClient } from '@shlinkio/shlink-js-sdk';
import { FetchHttpClient } from '@shlinkio/shlink-js-sdk/fetch';
const client = (key) => new ShlinkApiClient(new FetchHttpClient(), { baseUrl: process.env.BASE, apiKey: key });
const api = client(process.env.KEY);
const attempt = async (f) => { try { return { ok: await f() }; } catch (e) { return { error: e }; } };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const out = {};
"#;

/// Runs `body` after [`PREAMBLE`] with node against the app; the JSON it left in `out`.
fn run_sdk(dir: &std::path::Path, app: &TestApp, name: &str, body: &str) -> Value {
    let script = dir.join(format!("{name}-{}.mjs", std::process::id()));
    std::fs::write(
        &script,
        format!("{PREAMBLE}\n{body}\nconsole.log(JSON.stringify(out));\n"),
    )
    .expect("write script");
    let output = Command::new("node")
        .arg(&script)
        .env("BASE", format!("http://{}", app.addr))
        .env("KEY", ADMIN)
        .env("VIEWER", VIEWER)
        .current_dir(dir)
        .output()
        .expect("run node");
    let _ = std::fs::remove_file(&script);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "node failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let last = stdout.lines().last().unwrap_or("");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

const ERR: &str = "https://shlink.io/api/error/";

#[test]
fn the_sdk_creates_lists_edits_deletes_and_reads_visits_tags_and_rules() {
    let Some(dir) = sdk_dir() else { return };
    let app = TestApp::start();
    let out = run_sdk(
        &dir,
        &app,
        "crud",
        r#"
out.health = await api.health();
const until = new Date(Date.now() + 86400000).toISOString();
out.slug = await api.createShortUrl({ longUrl: 'https://example.com/a', customSlug: 'hello-slug',
  tags: ['Foo', 'bar baz'], validUntil: until, maxVisits: 5, title: 'First' });
out.slugAgain = await api.createShortUrl({ longUrl: 'https://example.com/a', customSlug: 'hello-slug', findIfExists: true });
out.slugTaken = await attempt(() => api.createShortUrl({ longUrl: 'https://example.com/other', customSlug: 'hello-slug', findIfExists: true }));
out.b1 = await api.createShortUrl({ longUrl: 'https://example.com/b', findIfExists: true });
out.b2 = await api.createShortUrl({ longUrl: 'https://example.com/b', findIfExists: true });
out.b3 = await api.createShortUrl({ longUrl: 'https://example.com/b' });
out.c = await api.createShortUrl({ longUrl: 'https://example.com/c', tags: ['foo'], shortCodeLength: 5 });
out.page1 = await api.listShortUrls({ page: '1', itemsPerPage: 2 });
out.page3 = await api.listShortUrls({ page: '3', itemsPerPage: 2 });
out.search = await api.listShortUrls({ searchTerm: 'example.com/b' });
out.byTag = await api.listShortUrls({ tags: ['foo'], orderBy: { field: 'shortCode', dir: 'ASC' } });
out.edited = await api.updateShortUrl({ shortCode: out.c.shortCode }, { title: 'Edited', maxVisits: 3, tags: ['x', 'foo'] });
out.cleared = await api.updateShortUrl({ shortCode: out.c.shortCode }, { maxVisits: null, validUntil: null });
out.unknown = await attempt(() => api.getShortUrl({ shortCode: 'nope-nope' }));
out.rules = await api.setShortUrlRedirectRules({ shortCode: 'hello-slug' }, { redirectRules: [
  { longUrl: 'https://example.com/android', conditions: [
    { type: 'device', matchKey: null, matchValue: 'android' },
    { type: 'query-param', matchKey: 'foo', matchValue: 'bar' }] },
  { longUrl: 'https://example.com/de', conditions: [
    { type: 'geolocation-country-code', matchKey: null, matchValue: 'DE' }] }] });
out.rulesRead = await api.getShortUrlRedirectRules({ shortCode: 'hello-slug' });
out.rulesBad = await attempt(() => api.setShortUrlRedirectRules({ shortCode: 'hello-slug' }, { redirectRules: [
  { longUrl: 'https://example.com/chrome', conditions: [{ type: 'browser', matchKey: null, matchValue: 'chrome' }] }] }));
out.withRules = await api.getShortUrl({ shortCode: 'hello-slug' });
await api.deleteShortUrl({ shortCode: out.b3.shortCode });
out.deleted = await attempt(() => api.getShortUrl({ shortCode: out.b3.shortCode }));
out.viewerCreate = await attempt(() => client(process.env.VIEWER).createShortUrl({ longUrl: 'https://example.com/v' }));
out.viewerList = await client(process.env.VIEWER).listShortUrls();
out.badKey = await attempt(() => client('not-a-key').listShortUrls());
// Three visits, one of them a bot's, then wait for the visit writer.
for (const agent of ['Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0', 'Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0', 'Googlebot/2.1']) {
  await fetch(process.env.BASE + '/hello-slug', { redirect: 'manual', headers: { 'User-Agent': agent, Referer: 'https://ref.test/page' } });
}
const deadline = Date.now() + 15000;
while ((await api.getShortUrl({ shortCode: 'hello-slug' })).visitsSummary.total < 3 && Date.now() < deadline) { await sleep(100); }
out.visits = await api.getShortUrlVisits({ shortCode: 'hello-slug' });
out.humanVisits = await api.getShortUrlVisits({ shortCode: 'hello-slug' }, { excludeBots: true, page: 1, itemsPerPage: 1 });
out.overview = await api.getVisitsOverview();
out.tags = await api.listTags();
out.tagsStats = await api.tagsStats();
out.domains = await api.listDomains();
out.mercure = await attempt(() => api.mercureInfo());
"#,
    );

    assert_eq!(out["health"]["status"], "pass", "{out}");
    let slug = &out["slug"];
    assert_eq!(slug["shortCode"], "hello-slug");
    assert_eq!(slug["shortUrl"], format!("{BASE_URL}/hello-slug"));
    assert_eq!(slug["tags"], json!(["foo", "bar-baz"]));
    assert_eq!(slug["meta"]["maxVisits"], 5);
    assert!(slug["meta"]["validUntil"]
        .as_str()
        .is_some_and(|d| d.ends_with("+00:00")));
    assert_eq!(slug["title"], "First");
    assert_eq!(out["slugAgain"]["shortCode"], "hello-slug", "findIfExists");
    let taken = &out["slugTaken"]["error"];
    assert_eq!(taken["type"], format!("{ERR}non-unique-slug"));
    assert_eq!(taken["customSlug"], "hello-slug");
    assert_eq!(out["b1"]["shortCode"], out["b2"]["shortCode"], "found");
    assert_ne!(
        out["b1"]["shortCode"], out["b3"]["shortCode"],
        "without findIfExists a new one"
    );
    assert_eq!(out["c"]["shortCode"].as_str().map(str::len), Some(5));

    let page1 = &out["page1"];
    assert_eq!(page1["data"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        page1["pagination"],
        json!({"currentPage": 1, "pagesCount": 2, "itemsPerPage": 2, "itemsInCurrentPage": 2, "totalItems": 4})
    );
    // Newest first by default.
    assert_eq!(page1["data"][0]["shortCode"], out["c"]["shortCode"]);
    assert_eq!(out["page3"]["data"], json!([]));
    let search = &out["search"]["data"];
    assert_eq!(search.as_array().map(Vec::len), Some(2), "{search}");
    let by_tag = &out["byTag"]["data"];
    assert_eq!(by_tag.as_array().map(Vec::len), Some(2), "{by_tag}");
    assert!(
        by_tag[0]["shortCode"].as_str() < by_tag[1]["shortCode"].as_str(),
        "shortCode ASC: {by_tag}"
    );

    let edited = &out["edited"];
    assert_eq!(edited["title"], "Edited");
    assert_eq!(edited["meta"]["maxVisits"], 3);
    assert_eq!(edited["tags"], json!(["x", "foo"]));
    assert_eq!(out["cleared"]["meta"]["maxVisits"], Value::Null);
    assert_eq!(out["cleared"]["meta"]["validUntil"], Value::Null);
    assert_eq!(out["cleared"]["title"], "Edited", "absent keeps");

    let unknown = &out["unknown"]["error"];
    assert_eq!(unknown["type"], format!("{ERR}short-url-not-found"));
    assert_eq!(unknown["status"], 404);
    assert_eq!(unknown["shortCode"], "nope-nope");

    let rules = &out["rulesRead"];
    assert_eq!(rules["defaultLongUrl"], "https://example.com/a");
    assert_eq!(rules, &out["rules"]);
    assert_eq!(
        rules["redirectRules"],
        json!([
            {"longUrl": "https://example.com/android", "priority": 1, "conditions": [
                {"type": "device", "matchKey": null, "matchValue": "android"},
                {"type": "query-param", "matchKey": "foo", "matchValue": "bar"}]},
            {"longUrl": "https://example.com/de", "priority": 2, "conditions": [
                {"type": "geolocation-country-code", "matchKey": null, "matchValue": "DE"}]}
        ])
    );
    let bad_rules = &out["rulesBad"]["error"];
    assert_eq!(bad_rules["type"], format!("{ERR}invalid-data"));
    assert_eq!(bad_rules["invalidElements"], json!(["redirectRules"]));
    assert!(bad_rules["detail"]
        .as_str()
        .is_some_and(|d| d.contains("browser")));
    assert_eq!(out["withRules"]["hasRedirectRules"], true);

    assert_eq!(out["deleted"]["error"]["status"], 404);
    let viewer = &out["viewerCreate"]["error"];
    assert_eq!(viewer["status"], 403, "{viewer}");
    assert!(viewer["type"].as_str().is_some_and(|t| t.starts_with(ERR)));
    assert_eq!(out["viewerList"]["pagination"]["totalItems"], 3);
    let bad_key = &out["badKey"]["error"];
    assert_eq!(bad_key["type"], format!("{ERR}invalid-api-key"));
    assert_eq!(bad_key["status"], 401);

    let visits = &out["visits"];
    assert_eq!(visits["pagination"]["totalItems"], 3, "{visits}");
    let first = &visits["data"][0];
    assert_eq!(first["potentialBot"], true, "newest first: {visits}");
    assert_eq!(first["referer"], "https://ref.test/page");
    assert_eq!(first["visitedUrl"], format!("{BASE_URL}/hello-slug"));
    assert_eq!(first["redirectUrl"], "https://example.com/a");
    assert_eq!(first["visitLocation"], Value::Null);
    let human = &out["humanVisits"];
    assert_eq!(human["pagination"]["totalItems"], 2, "{human}");
    assert_eq!(human["pagination"]["pagesCount"], 2);
    assert_eq!(human["data"][0]["potentialBot"], false);
    assert_eq!(
        out["overview"],
        json!({"nonOrphanVisits": {"total": 3, "nonBots": 2, "bots": 1},
               "orphanVisits": {"total": 0, "nonBots": 0, "bots": 0}})
    );
    assert_eq!(out["tags"]["data"], json!(["bar-baz", "foo", "x"]));
    let stats = out["tagsStats"]["data"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let foo = stats.iter().find(|t| t["tag"] == "foo").cloned();
    assert_eq!(
        foo,
        Some(json!({"tag": "foo", "shortUrlsCount": 2,
                    "visitsSummary": {"total": 3, "nonBots": 2, "bots": 1}}))
    );
    assert_eq!(out["domains"]["data"][0]["domain"], "sl.test");
    assert_eq!(out["domains"]["data"][0]["isDefault"], true);
    assert_eq!(out["mercure"]["error"]["status"], 501);
}

/// Domains through the SDK (SPEC §26): a short URL made on a domain, read there and not on the
/// default domain, the domains listed with their redirects, and redirects set.
#[test]
fn the_sdk_makes_short_urls_on_domains_and_sets_their_redirects() {
    let Some(dir) = sdk_dir() else { return };
    let app = TestApp::start();
    let added = app.post_json(
        "/api/v1/domains",
        ADMIN,
        &json!({"host": "go.sdk.com", "root_url": "https://sdk.example/"}),
    );
    assert_eq!(added.status(), 201);
    let out = run_sdk(
        &dir,
        &app,
        "domains",
        r#"
out.made = await api.createShortUrl({ longUrl: 'https://sdk.example/long', customSlug: 'dom-slug', domain: 'go.sdk.com' });
out.home = await api.createShortUrl({ longUrl: 'https://sdk.example/home', customSlug: 'dom-slug' });
out.got = await api.getShortUrl({ shortCode: 'dom-slug', domain: 'go.sdk.com' });
out.gotHome = await api.getShortUrl({ shortCode: 'dom-slug' });
out.edited = await api.updateShortUrl({ shortCode: 'dom-slug', domain: 'go.sdk.com' }, { title: 'On the domain' });
out.unknown = await attempt(() => api.getShortUrl({ shortCode: 'dom-slug', domain: 'nope.example' }));
out.domains = await api.listDomains();
out.redirects = await api.editDomainRedirects({ domain: 'go.sdk.com', regular404Redirect: 'https://sdk.example/404' });
out.after = await api.listDomains();
"#,
    );
    assert_eq!(
        out["made"]["shortUrl"], "http://go.sdk.com/dom-slug",
        "{out}"
    );
    assert_eq!(out["made"]["domain"], "go.sdk.com");
    assert_eq!(out["home"]["domain"], Value::Null);
    assert_eq!(out["got"]["longUrl"], "https://sdk.example/long");
    assert_eq!(out["gotHome"]["longUrl"], "https://sdk.example/home");
    assert_eq!(out["edited"]["title"], "On the domain");
    assert_eq!(out["gotHome"]["title"], Value::Null);
    assert_eq!(out["unknown"]["error"]["status"], 404);
    let data = out["domains"]["data"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(data.len(), 2, "{data:?}");
    assert_eq!(data[0]["isDefault"], true);
    assert_eq!(data[1]["domain"], "go.sdk.com");
    assert_eq!(
        data[1]["redirects"]["baseUrlRedirect"],
        "https://sdk.example/"
    );
    assert_eq!(
        out["redirects"]["regular404Redirect"],
        "https://sdk.example/404"
    );
    assert_eq!(out["redirects"]["baseUrlRedirect"], "https://sdk.example/");
    assert_eq!(
        out["after"]["data"][1]["redirects"]["regular404Redirect"],
        "https://sdk.example/404"
    );
}

/// A request with `X-Api-Key` (the header Shlink clients send).
fn rest(
    app: &TestApp,
    method: Method,
    path: &str,
    key: Option<&str>,
) -> reqwest::blocking::RequestBuilder {
    let builder = app.client.request(method, app.url(path));
    match key {
        Some(k) => builder.header("X-Api-Key", k),
        None => builder,
    }
}

/// A Shlink problem: its status, content type and `type` prefix checked.
fn shlink_problem(response: reqwest::blocking::Response, status: u16, kind: &str) -> Value {
    assert_eq!(response.status().as_u16(), status);
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/problem+json")
    );
    let body: Value = response.json().expect("problem");
    assert_eq!(body["type"], format!("{ERR}{kind}"), "{body}");
    assert_eq!(body["status"], status);
    assert!(body["title"].is_string() && body["detail"].is_string());
    body
}

fn is_atom(text: &str) -> bool {
    let b = text.as_bytes();
    text.len() == 25
        && b[4] == b'-'
        && b[10] == b'T'
        && text.ends_with("+00:00")
        && !text.contains('.')
}

#[test]
fn plain_http_shows_shlink_shapes_dates_pagination_cors_and_errors() {
    let app = TestApp::start();
    let created = rest(&app, Method::POST, "/rest/v3/short-urls", Some(EDITOR))
        .json(
            &json!({"longUrl": "https://example.com/x", "tags": ["t"], "validSince": "2020-01-02"}),
        )
        .send()
        .expect("create");
    assert_eq!(created.status(), 200);
    let created: Value = created.json().expect("json");
    assert!(
        is_atom(created["dateCreated"].as_str().unwrap_or("")),
        "{created}"
    );
    assert_eq!(created["meta"]["validSince"], "2020-01-02T00:00:00+00:00");
    assert_eq!(created["domain"], Value::Null);
    assert_eq!(
        created["visitsSummary"],
        json!({"total": 0, "nonBots": 0, "bots": 0})
    );
    for field in ["crawlable", "forwardQuery", "hasRedirectRules"] {
        assert!(created[field].is_boolean(), "{field}: {created}");
    }

    // "All" reports the total as the page size, at least 1.
    let all: Value = rest(
        &app,
        Method::GET,
        "/rest/v3/short-urls?itemsPerPage=-1",
        Some(VIEWER),
    )
    .send()
    .expect("list")
    .json()
    .expect("json");
    assert_eq!(
        all["shortUrls"]["pagination"],
        json!({"currentPage": 1, "pagesCount": 1, "itemsPerPage": 1, "itemsInCurrentPage": 1, "totalItems": 1})
    );
    let tags: Value = rest(&app, Method::GET, "/rest/v3/tags", Some(VIEWER))
        .send()
        .expect("tags")
        .json()
        .expect("json");
    assert_eq!(tags["tags"]["data"], json!(["t"]));
    assert_eq!(tags["tags"]["pagination"]["itemsPerPage"], 1);

    // A space-limited key creates in its space and does not see other spaces' links.
    let code = created["shortCode"].as_str().unwrap_or("");
    let sports = rest(
        &app,
        Method::GET,
        &format!("/rest/v3/short-urls/{code}"),
        Some(SPORTS),
    )
    .send()
    .expect("get");
    shlink_problem(sports, 404, "short-url-not-found");
    let own = rest(&app, Method::POST, "/rest/v3/short-urls", Some(SPORTS))
        .json(&json!({"longUrl": "https://example.com/sports"}))
        .send()
        .expect("create");
    assert_eq!(own.status(), 200);
    let listed: Value = rest(&app, Method::GET, "/rest/v3/short-urls", Some(SPORTS))
        .send()
        .expect("list")
        .json()
        .expect("json");
    assert_eq!(listed["shortUrls"]["pagination"]["totalItems"], 1);

    // CORS: a preflight needs no key.
    let preflight = rest(&app, Method::OPTIONS, "/rest/v3/short-urls", None)
        .header("Origin", "http://client.test")
        .header("Access-Control-Request-Method", "POST")
        .header("Access-Control-Request-Headers", "x-api-key, content-type")
        .send()
        .expect("preflight");
    assert_eq!(preflight.status(), 204);
    let header = |r: &reqwest::blocking::Response, name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(header(&preflight, "access-control-allow-origin"), "*");
    assert!(header(&preflight, "access-control-allow-headers").contains("x-api-key"));
    assert!(header(&preflight, "access-control-allow-methods").contains("PATCH"));
    let read = rest(&app, Method::GET, "/rest/v3/short-urls", Some(VIEWER))
        .header("Origin", "http://client.test")
        .send()
        .expect("get");
    assert_eq!(header(&read, "access-control-allow-origin"), "*");

    // Health: no key, health+json.
    let health = rest(&app, Method::GET, "/rest/health", None)
        .send()
        .expect("health");
    assert_eq!(health.status(), 200);
    assert_eq!(header(&health, "content-type"), "application/health+json");
    let health: Value = health.json().expect("json");
    assert_eq!(health["status"], "pass");
    assert!(health["version"].is_string());

    // Errors.
    let missing = shlink_problem(
        rest(&app, Method::GET, "/rest/v3/short-urls", None)
            .send()
            .expect("get"),
        401,
        "missing-authentication",
    );
    assert_eq!(missing["expectedHeaders"], json!(["X-Api-Key"]));
    shlink_problem(
        rest(&app, Method::GET, "/rest/v3/tags", Some("wrong"))
            .send()
            .expect("get"),
        401,
        "invalid-api-key",
    );
    for (method, path) in [
        (Method::GET, "/rest/v3/nothing-here"),
        (Method::PUT, "/rest/v3/short-urls"),
        (Method::GET, "/rest/v3/tags/t/visits"),
    ] {
        shlink_problem(
            rest(&app, method, path, Some(ADMIN)).send().expect("send"),
            404,
            "not-found",
        );
    }
    let invalid = shlink_problem(
        rest(&app, Method::POST, "/rest/v3/short-urls", Some(ADMIN))
            .json(&json!({"maxVisits": "lots"}))
            .send()
            .expect("post"),
        400,
        "invalid-data",
    );
    assert_eq!(invalid["invalidElements"], json!(["longUrl", "maxVisits"]));
    shlink_problem(
        rest(&app, Method::POST, "/rest/v3/short-urls", Some(ADMIN))
            .body("{not json")
            .send()
            .expect("post"),
        400,
        "malformed-request-body",
    );
    let order = shlink_problem(
        rest(
            &app,
            Method::GET,
            "/rest/v3/short-urls?orderBy=sideways&tagsMode=some",
            Some(ADMIN),
        )
        .send()
        .expect("get"),
        400,
        "invalid-data",
    );
    assert_eq!(order["invalidElements"], json!(["orderBy", "tagsMode"]));
    let past = shlink_problem(
        rest(
            &app,
            Method::PATCH,
            &format!("/rest/v3/short-urls/{code}"),
            Some(ADMIN),
        )
        .json(&json!({"validUntil": "2001-01-01T00:00:00+00:00"}))
        .send()
        .expect("patch"),
        400,
        "invalid-data",
    );
    assert_eq!(past["invalidElements"], json!(["validUntil"]));
    let domain: Value = rest(
        &app,
        Method::GET,
        "/rest/v3/short-urls?domain=other.test",
        Some(ADMIN),
    )
    .send()
    .expect("list")
    .json()
    .expect("json");
    assert_eq!(domain["shortUrls"]["pagination"]["totalItems"], 0);

    // The main routes are in the OpenAPI document.
    let doc: Value = app.get("/api/v1/openapi.json").json().expect("openapi");
    for (path, method) in [
        ("/rest/v3/short-urls", "post"),
        ("/rest/v3/short-urls/{shortCode}", "patch"),
        ("/rest/v3/short-urls/{shortCode}/redirect-rules", "post"),
        ("/rest/v3/tags/stats", "get"),
    ] {
        assert!(doc["paths"][path][method].is_object(), "{method} {path}");
    }

    // Visit dates are ATOM too.
    let _ = app.get(&format!("/{code}"));
    let deadline = Instant::now() + Duration::from_secs(15);
    let visits = loop {
        let visits: Value = rest(
            &app,
            Method::GET,
            &format!("/rest/v3/short-urls/{code}/visits"),
            Some(VIEWER),
        )
        .send()
        .expect("visits")
        .json()
        .expect("json");
        if visits["visits"]["data"][0].is_object() || Instant::now() > deadline {
            break visits;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        is_atom(visits["visits"]["data"][0]["date"].as_str().unwrap_or("")),
        "{visits}"
    );
    assert_eq!(
        visits["visits"]["pagination"]["itemsPerPage"], 1,
        "all: the total"
    );
}
