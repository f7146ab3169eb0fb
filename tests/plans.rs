//! Plans and quotas per team (SPEC §25), from outside: every feature gate on a create and a
//! change, every quota at its edge and past it (API, batch, YOURLS, Shlink), exact counts under
//! concurrent creates (sled, and two PostgreSQL instances), a month turning and `in_app_days`
//! with the test clock, a plan changed while the server runs, and a bad plan refused at start.
//! On sled and (with `TEST_STORE=postgres`) on PostgreSQL.

mod common;

use std::time::{Duration, Instant};

use common::{problem, TestApp, ADMIN};
use reqwest::Method;
use serde_json::{json, Value};
use vshortlink::clock::Clock;

/// Plans for the tests: `bare` allows nothing, `all` everything; each of the others one limit.
const PLANS: &str = r#"
[plans.bare]
features = []

[plans.all]

[plans.monthly]
links_per_month = 3

[plans.active]
active_links = 2

[plans.ten]
links_per_month = 10

[plans.short]
max_ttl = "1d"

[plans.fives]
lengths = [5]

[plans.visits]
visits_per_month = 3

[plans.wechat]
in_app_days = 10

[plans.wechat_now]
in_app_days = 0
"#;

const WECHAT: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 MicroMessenger/8.0.43(0x18002b2c) NetType/WIFI Language/zh_CN";
const DESKTOP: &str =
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36";

fn start() -> TestApp {
    TestApp::start_with(PLANS, &[])
}

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

fn make_team(app: &TestApp, slug: &str, plan: &str) {
    let r = app.post_json("/api/v1/teams", ADMIN, &json!({"slug": slug, "plan": plan}));
    assert_eq!(r.status(), 201, "team {slug} on {plan}");
}

/// A create in a team's space by the config admin (plans bind admins too).
fn create_in(app: &TestApp, space: &str, body: Value) -> reqwest::blocking::Response {
    let mut body = body;
    body["space"] = json!(space);
    if body.get("url").is_none() {
        body["url"] = json!(format!("https://example.com/{}", rand_tail()));
    }
    app.post_json("/api/v1/links", ADMIN, &body)
}

fn rand_tail() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "p{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn created(r: reqwest::blocking::Response) -> Value {
    let status = r.status();
    let body: Value = r.json().expect("json");
    assert_eq!(status, 201, "{body}");
    body
}

fn code(link: &Value) -> String {
    link["code"].as_str().expect("code").to_string()
}

fn count_in(app: &TestApp, space: &str) -> usize {
    let page = app.api_get(&format!("/api/v1/links?space={space}&limit=1000"), ADMIN);
    page["items"].as_array().map_or(0, Vec::len)
}

fn usage(app: &TestApp, team: &str) -> Value {
    app.api_get(&format!("/api/v1/teams/{team}"), ADMIN)["usage"].clone()
}

/// Every feature, how a create and a change use it, and the field the refusal names.
fn feature_cases() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        ("password", json!({"password": "open sesame"}), "password"),
        ("max_visits", json!({"max_visits": 5}), "max_visits"),
        (
            "valid_from",
            json!({"valid_from": "2099-01-01T00:00:00Z"}),
            "valid_from",
        ),
        (
            "fallback_url",
            json!({"fallback_url": "https://fallback.example/"}),
            "fallback_url",
        ),
        (
            "rules",
            json!({"rules": [{"if": {"device": "mobile"}, "url": "https://m.example/"}]}),
            "rules",
        ),
        (
            "targets",
            json!({"targets": [{"url": "https://a.example/"}, {"url": "https://b.example/"}]}),
            "targets",
        ),
        (
            "form",
            json!({"form": {"fields": [{"name": "phone", "label": "Phone", "type": "tel"}]}}),
            "form",
        ),
        ("in_app", json!({"in_app": "interstitial"}), "in_app"),
        (
            "preview",
            json!({"og_title": "A title for crawlers"}),
            "og_title",
        ),
    ]
}

#[test]
fn every_feature_is_gated_on_a_create_and_a_change() {
    let app = start();
    make_team(&app, "bare", "bare");
    make_team(&app, "all", "all");
    let plain = code(&created(create_in(&app, "bare", json!({}))));
    for (feature, body, field) in feature_cases() {
        // A create that uses it: refused in the team without it, nothing written.
        let before = count_in(&app, "bare");
        let refused = problem(create_in(&app, "bare", body.clone()), 403);
        assert_eq!(
            refused["code"], "feature_not_in_plan",
            "{feature}: {refused}"
        );
        assert_eq!(refused["field"], field, "{feature}: {refused}");
        assert_eq!(count_in(&app, "bare"), before, "{feature}: nothing written");
        // The same create in a team whose plan has every feature.
        created(create_in(&app, "all", body.clone()));
        // A change that sets it: refused too, and the link is unchanged.
        let r = send(
            &app,
            Method::PATCH,
            &format!("/api/v1/links/{plain}"),
            Some(body),
        );
        let refused = problem(r, 403);
        assert_eq!(
            refused["code"], "feature_not_in_plan",
            "PATCH {feature}: {refused}"
        );
        assert_eq!(refused["field"], field, "PATCH {feature}");
    }
    // A custom code is a feature of its own (a create only: a code never changes).
    let refused = problem(create_in(&app, "bare", json!({"code": "mine-1"})), 403);
    assert_eq!(refused["field"], "code", "{refused}");
    created(create_in(&app, "all", json!({"code": "mine-2"})));
    // A cap on one target is `max_visits` wherever it is set.
    let mut only_targets = json!({"targets": [{"url": "https://a.example/", "max_visits": 3}]});
    only_targets["space"] = json!("bare");
    // (`bare` lacks `targets` too: that is named first.)
    let refused = problem(create_in(&app, "bare", only_targets), 403);
    assert_eq!(refused["code"], "feature_not_in_plan");
    // `batch`: each item of a batch in the team refused, naming it.
    let r = app.post_json(
        "/api/v1/links/batch",
        ADMIN,
        &json!({"links": [
            {"url": "https://example.com/b1", "space": "bare"},
            {"url": "https://example.com/b2", "space": "all"},
        ]}),
    );
    assert_eq!(r.status(), 200);
    let results: Value = r.json().expect("json");
    assert_eq!(results["results"][0]["ok"], false, "{results}");
    assert_eq!(
        results["results"][0]["error"]["code"],
        "feature_not_in_plan"
    );
    assert_eq!(results["results"][0]["error"]["field"], "links[0].batch");
    assert_eq!(results["results"][1]["ok"], true, "{results}");
    // Removing an option is always allowed.
    let r = send(
        &app,
        Method::PATCH,
        &format!("/api/v1/links/{plain}"),
        Some(json!({"password": null, "title": "still mine"})),
    );
    assert_eq!(r.status(), 200);
    // A space no team owns has no plan: everything goes.
    created(app.post_json(
        "/api/v1/links",
        ADMIN,
        &json!({"url": "https://example.com/free", "password": "open sesame"}),
    ));
}

/// `export`: a team whose plan lacks it gets no CSV of a link's visits or leads (API and
/// pages); the JSON pages stay (they are the statistics, not an export).
#[test]
fn exports_are_a_feature_of_the_plan() {
    let app = start();
    make_team(&app, "bare", "bare");
    make_team(&app, "all", "all");
    let bare = code(&created(create_in(&app, "bare", json!({}))));
    let all = code(&created(create_in(&app, "all", json!({}))));
    for what in ["visits", "leads"] {
        let r = send(
            &app,
            Method::GET,
            &format!("/api/v1/links/{bare}/{what}?format=csv"),
            None,
        );
        let refused = problem(r, 403);
        assert_eq!(refused["code"], "feature_not_in_plan", "{what}: {refused}");
        assert_eq!(refused["field"], "format", "{what}: {refused}");
        let json = send(
            &app,
            Method::GET,
            &format!("/api/v1/links/{bare}/{what}"),
            None,
        );
        assert_eq!(json.status(), 200, "{what} as JSON");
        let csv = send(
            &app,
            Method::GET,
            &format!("/api/v1/links/{all}/{what}?format=csv"),
            None,
        );
        assert_eq!(csv.status(), 200, "{what} CSV in a plan with export");
    }
}

#[test]
fn quotas_hold_at_their_edge_and_refuse_past_it() {
    let app = start();
    make_team(&app, "m", "monthly");
    make_team(&app, "a", "active");
    // links_per_month = 3: three, then refused with the quota, its limit and the use.
    let mut made = Vec::new();
    for _ in 0..3 {
        made.push(code(&created(create_in(&app, "m", json!({})))));
    }
    let refused = problem(create_in(&app, "m", json!({})), 403);
    assert_eq!(refused["code"], "quota_exceeded", "{refused}");
    assert_eq!(refused["quota"], "links_per_month");
    assert_eq!(refused["limit"], 3);
    assert_eq!(refused["used"], 3);
    assert_eq!(count_in(&app, "m"), 3, "nothing written");
    // A delete does not give a month's create back.
    assert_eq!(
        send(
            &app,
            Method::DELETE,
            &format!("/api/v1/links/{}", made[0]),
            None
        )
        .status(),
        204
    );
    assert_eq!(
        problem(create_in(&app, "m", json!({})), 403)["quota"],
        "links_per_month"
    );
    // A dedup hit makes nothing, so it takes nothing (and answers the existing link).
    // active_links = 2: a delete frees one.
    let first = code(&created(create_in(&app, "a", json!({}))));
    created(create_in(&app, "a", json!({})));
    let refused = problem(create_in(&app, "a", json!({})), 403);
    assert_eq!(refused["quota"], "active_links", "{refused}");
    assert_eq!(
        (refused["limit"].clone(), refused["used"].clone()),
        (json!(2), json!(2))
    );
    assert_eq!(
        send(
            &app,
            Method::DELETE,
            &format!("/api/v1/links/{first}"),
            None
        )
        .status(),
        204
    );
    created(create_in(&app, "a", json!({})));
    // Usage as the API shows it.
    let u = usage(&app, "m");
    assert_eq!(u["plan"], "monthly", "{u}");
    assert_eq!(u["links_this_month"], json!({"used": 3, "limit": 3}));
    assert_eq!(u["active_links"]["used"], 2);
    let u = usage(&app, "a");
    assert_eq!(u["active_links"], json!({"used": 2, "limit": 2}), "{u}");
    assert_eq!(u["links_this_month"]["used"], 3);
    // YOURLS answers `status: fail` with the message; Shlink its 403 problem.
    let yourls: Value = app
        .client
        .get(app.url("/yourls-api.php"))
        .query(&[
            ("signature", ADMIN),
            ("action", "shorturl"),
            ("format", "json"),
            ("url", "https://example.com/yourls-past"),
        ])
        .send()
        .expect("yourls")
        .json()
        .expect("json");
    // (The config admin's YOURLS creates land in `default`, no team: allowed.)
    assert_eq!(yourls["status"], "success", "{yourls}");
    let shlink = app
        .client
        .post(app.url("/rest/v3/short-urls"))
        .header("X-Api-Key", ADMIN)
        .json(&json!({"longUrl": "https://example.com/shlink-past", "tags": []}))
        .send()
        .expect("shlink");
    assert!(shlink.status().is_success(), "default space: no plan");
}

#[test]
fn yourls_and_shlink_answer_a_plan_s_refusal_in_their_own_shapes() {
    let app = start();
    make_team(&app, "m", "monthly");
    for _ in 0..3 {
        created(create_in(&app, "m", json!({})));
    }
    // A run-time key limited to the team: YOURLS and Shlink creates land in its space.
    let key: Value = app
        .post_json(
            "/api/v1/keys",
            ADMIN,
            &json!({"name": "m", "role": "editor", "team": "m"}),
        )
        .json()
        .expect("key");
    let key = key["key"].as_str().expect("key").to_string();
    let yourls: Value = app
        .client
        .get(app.url("/yourls-api.php"))
        .query(&[
            ("signature", key.as_str()),
            ("action", "shorturl"),
            ("format", "json"),
            ("url", "https://example.com/yourls-past"),
        ])
        .send()
        .expect("yourls")
        .json()
        .expect("json");
    assert_eq!(yourls["status"], "fail", "{yourls}");
    assert_eq!(yourls["code"], "error:quota_exceeded", "{yourls}");
    assert!(
        yourls["message"].as_str().is_some_and(|m| m.contains('3')),
        "{yourls}"
    );
    let shlink = app
        .client
        .post(app.url("/rest/v3/short-urls"))
        .header("X-Api-Key", &key)
        .json(&json!({"longUrl": "https://example.com/shlink-past", "tags": []}))
        .send()
        .expect("shlink");
    assert_eq!(shlink.status(), 403);
    let body: Value = shlink.json().expect("json");
    assert!(
        body["type"]
            .as_str()
            .is_some_and(|t| t.ends_with("quota-exceeded")),
        "{body}"
    );
    assert_eq!(body["quota"], "links_per_month", "{body}");
    assert_eq!(count_in(&app, "m"), 3);
}

#[test]
fn max_ttl_caps_the_default_and_refuses_longer_or_permanent_links() {
    let app = start();
    make_team(&app, "s", "short");
    make_team(&app, "f", "fives");
    let now = app.clock.now();
    // Without `ttl`: the tier's default (7 days for length 6) capped at one day.
    let link = created(create_in(&app, "s", json!({})));
    let expires = link["expires_at"].as_str().expect("an expiry").to_string();
    let at = time::OffsetDateTime::parse(&expires, &time::format_description::well_known::Rfc3339)
        .expect("rfc3339");
    let at_ms = (at.unix_timestamp_nanos() / 1_000_000) as u64;
    assert!(
        at_ms <= now + 86_400_000 + 5_000 && at_ms > now + 86_000_000,
        "{expires}"
    );
    // A custom code (permanent by default) is capped too.
    let custom = created(create_in(&app, "s", json!({"code": "short-custom"})));
    assert!(custom["expires_at"].is_string(), "{custom}");
    // At the edge and past it.
    created(create_in(&app, "s", json!({"ttl": 86_400})));
    let refused = problem(create_in(&app, "s", json!({"ttl": 86_401})), 403);
    assert_eq!(refused["code"], "quota_exceeded");
    assert_eq!(refused["quota"], "max_ttl");
    assert_eq!(refused["limit"], 86_400);
    assert_eq!(refused["used"], 86_401);
    let refused = problem(create_in(&app, "s", json!({"expires_at": null})), 403);
    assert_eq!(refused["quota"], "max_ttl", "a permanent link: {refused}");
    assert!(refused["used"].is_null());
    // A change past it is refused as well.
    let r = send(
        &app,
        Method::PATCH,
        &format!("/api/v1/links/{}", code(&link)),
        Some(json!({"expires_at": null})),
    );
    assert_eq!(problem(r, 403)["quota"], "max_ttl");
    // lengths = [5]: the default length (6) and an asked 6 are refused naming `length`.
    let refused = problem(create_in(&app, "f", json!({})), 403);
    assert_eq!(refused["code"], "feature_not_in_plan");
    assert_eq!(refused["field"], "length");
    assert_eq!(
        problem(create_in(&app, "f", json!({"length": 6})), 403)["field"],
        "length"
    );
    let five = created(create_in(&app, "f", json!({"length": 5})));
    assert_eq!(code(&five).len(), 5);
}

/// 40 creates at once against 10 links left: exactly 10 made, 30 refused.
fn forty_against_ten(apps: &[&TestApp]) {
    let statuses: Vec<u16> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..40)
            .map(|i| {
                let app = apps[i % apps.len()];
                s.spawn(move || {
                    create_in(
                        app,
                        "ten",
                        json!({"url": format!("https://example.com/race-{i}")}),
                    )
                    .status()
                    .as_u16()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    let made = statuses.iter().filter(|s| **s == 201).count();
    let refused = statuses.iter().filter(|s| **s == 403).count();
    assert_eq!((made, refused), (10, 30), "{statuses:?}");
    assert_eq!(count_in(apps[0], "ten"), 10);
    assert_eq!(usage(apps[0], "ten")["links_this_month"]["used"], 10);
}

#[test]
fn concurrent_creates_at_the_edge_make_exactly_what_is_left() {
    let app = start();
    make_team(&app, "ten", "ten");
    forty_against_ten(&[&app]);
}

#[test]
fn two_postgres_instances_never_pass_a_limit_together() {
    let Some(url) = common::postgres::fresh_database() else {
        return;
    };
    let a = TestApp::start_on(&url, PLANS, &[]);
    let b = TestApp::start_on(&url, PLANS, &[]);
    make_team(&a, "ten", "ten");
    // B sees the team (and its plan) within a second.
    let started = Instant::now();
    let plan_on_b = || -> Value {
        let r = b
            .req(Method::GET, "/api/v1/teams/ten", Some(ADMIN))
            .send()
            .expect("GET");
        r.json::<Value>()
            .map(|t| t["plan"].clone())
            .unwrap_or(Value::Null)
    };
    while plan_on_b() != "ten" {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "B never saw the team"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    forty_against_ten(&[&a, &b]);
    assert_eq!(count_in(&b, "ten"), 10);
}

fn visit(app: &TestApp, code: &str, ua: &str) -> reqwest::blocking::Response {
    app.client
        .get(app.url(&format!("/{code}")))
        .header("user-agent", ua)
        .send()
        .expect("visit")
}

fn visits_total(app: &TestApp, code: &str) -> u64 {
    app.api_get(&format!("/api/v1/links/{code}"), ADMIN)["visits_total"]
        .as_u64()
        .unwrap_or(0)
}

/// Waits until the writer has folded what the journal holds (totals stop moving at `n`).
fn wait_total(app: &TestApp, code: &str, n: u64) {
    let started = Instant::now();
    while visits_total(app, code) != n {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "visits_total stayed {} (want {n})",
            visits_total(app, code)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Two more folds: nothing more arrives.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(visits_total(app, code), n);
}

/// The first millisecond of the next UTC month after `now`, plus an hour.
fn next_month(now: u64) -> u64 {
    let t =
        time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(now) * 1_000_000).expect("time");
    let (y, m) = match t.month() {
        time::Month::December => (t.year() + 1, time::Month::January),
        m => (t.year(), m.next()),
    };
    let start = time::Date::from_calendar_date(y, m, 1)
        .expect("date")
        .midnight()
        .assume_utc();
    (start.unix_timestamp_nanos() / 1_000_000) as u64 + 3_600_000
}

#[test]
fn visits_past_the_month_s_limit_redirect_unrecorded_until_the_month_turns() {
    let app = start();
    make_team(&app, "v", "visits");
    make_team(&app, "m", "monthly");
    let link = code(&created(create_in(&app, "v", json!({"ttl": 90 * 86_400}))));
    for _ in 0..5 {
        assert_eq!(visit(&app, &link, DESKTOP).status(), 302, "redirects go on");
    }
    wait_total(&app, &link, 3);
    assert_eq!(
        usage(&app, "v")["visits_this_month"],
        json!({"used": 3, "limit": 3})
    );
    let metrics = app.get("/metrics").text().expect("metrics");
    assert!(
        metrics.contains("vsl_visits_over_plan_total{team=\"v\"} 2"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("over_plan"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    for _ in 0..3 {
        created(create_in(&app, "m", json!({"ttl": 90 * 86_400})));
    }
    assert_eq!(
        problem(create_in(&app, "m", json!({})), 403)["quota"],
        "links_per_month"
    );
    // The month turns: creates and visits are counted afresh.
    let now = app.clock.now();
    app.advance(Duration::from_millis(next_month(now) - now));
    created(create_in(&app, "m", json!({})));
    assert_eq!(usage(&app, "m")["links_this_month"]["used"], 1);
    for _ in 0..2 {
        assert_eq!(visit(&app, &link, DESKTOP).status(), 302);
    }
    wait_total(&app, &link, 5);
    assert_eq!(usage(&app, "v")["visits_this_month"]["used"], 2);
}

#[test]
fn in_app_days_send_in_app_visitors_to_the_in_app_page_once_a_link_is_old_enough() {
    let app = start();
    make_team(&app, "w", "wechat");
    make_team(&app, "now", "wechat_now");
    // A link that says `direct`: the plan decides anyway (the plan allows `in_app`).
    let link = code(&created(create_in(
        &app,
        "w",
        json!({"ttl": 90 * 86_400, "in_app": "direct"}),
    )));
    let plain = code(&created(create_in(&app, "w", json!({"ttl": 90 * 86_400}))));
    for c in [&link, &plain] {
        assert_eq!(visit(&app, c, WECHAT).status(), 302, "young: redirected");
    }
    app.advance(Duration::from_secs(11 * 86_400));
    for c in [&link, &plain] {
        let r = visit(&app, c, WECHAT);
        assert_eq!(r.status(), 200, "old: the in-app page");
        let body = r.text().expect("body");
        assert!(body.contains(c.as_str()), "the page offers the short link");
        assert_eq!(
            visit(&app, c, DESKTOP).status(),
            302,
            "others are redirected"
        );
    }
    // `in_app_days = 0`: from creation on.
    let at_once = code(&created(create_in(&app, "now", json!({}))));
    assert_eq!(visit(&app, &at_once, WECHAT).status(), 200);
    assert_eq!(visit(&app, &at_once, DESKTOP).status(), 302);
    // The visit is recorded with route `in_app`.
    wait_total(&app, &at_once, 2);
    let visits = app.api_get(&format!("/api/v1/links/{at_once}/visits?limit=10"), ADMIN);
    let routes: Vec<Value> = visits["items"]
        .as_array()
        .expect("visits")
        .iter()
        .map(|v| v["route"].clone())
        .collect();
    assert!(routes.contains(&json!("in_app")), "{visits}");
}

#[test]
fn a_plan_changed_while_the_server_runs_applies_to_the_next_request() {
    let app = start();
    make_team(&app, "t", "bare");
    let refused = problem(
        create_in(&app, "t", json!({"password": "open sesame"})),
        403,
    );
    assert_eq!(refused["code"], "feature_not_in_plan");
    let r = send(
        &app,
        Method::PATCH,
        "/api/v1/teams/t",
        Some(json!({"plan": "all"})),
    );
    assert_eq!(r.status(), 200);
    let team: Value = r.json().expect("team");
    assert_eq!(team["usage"]["plan"], "all", "{team}");
    created(create_in(&app, "t", json!({"password": "open sesame"})));
    // An unknown plan is refused naming `plan`; the team keeps its plan.
    let r = send(
        &app,
        Method::PATCH,
        "/api/v1/teams/t",
        Some(json!({"plan": "gold"})),
    );
    let refused = problem(r, 400);
    assert_eq!(refused["field"], "plan", "{refused}");
    let r = app.post_json(
        "/api/v1/teams",
        ADMIN,
        &json!({"slug": "u", "plan": "gold"}),
    );
    assert_eq!(problem(r, 400)["field"], "plan");
    assert_eq!(app.api_get("/api/v1/teams/t", ADMIN)["plan"], "all");
    // In-app decisions cached under the old plan are dropped too.
    let link = code(&created(create_in(&app, "t", json!({}))));
    assert_eq!(visit(&app, &link, WECHAT).status(), 302);
    let r = send(
        &app,
        Method::PATCH,
        "/api/v1/teams/t",
        Some(json!({"plan": "wechat_now"})),
    );
    assert_eq!(r.status(), 200);
    assert_eq!(visit(&app, &link, WECHAT).status(), 200, "the next request");
    // No plan: no limits.
    let r = send(
        &app,
        Method::PATCH,
        "/api/v1/teams/t",
        Some(json!({"plan": null})),
    );
    assert_eq!(r.status(), 200);
    assert_eq!(visit(&app, &link, WECHAT).status(), 302);
}

#[test]
fn the_team_page_shows_usage_bars_in_both_languages() {
    let app = start();
    make_team(&app, "m", "monthly");
    created(create_in(&app, "m", json!({})));
    let page = common::pages::PageClient::signed_in(&app, ADMIN);
    let get_lang = |path: &str, lang: &str| {
        page.client
            .get(app.url(path))
            .header("accept-language", lang)
            .send()
            .expect("GET")
    };
    for (lang, words) in [("en", "1 of 3"), ("zh-CN", "已用 1，共 3")] {
        let body = get_lang("/ui/teams/m", lang).text().expect("page");
        assert!(body.contains(words), "{lang}: {body}");
        // A <meter> (the pages' CSP allows no inline style to draw a width).
        assert!(
            body.contains("class=\"quota-bar\" min=\"0\" max=\"100\" value=\"33\""),
            "{lang}: the bar"
        );
    }
    let dash = get_lang("/ui/dashboard", "en").text().expect("dashboard");
    assert!(
        dash.contains("/ui/teams/m#usage"),
        "admins see every team's usage"
    );
}

#[test]
fn a_bad_plan_is_refused_at_start_naming_its_key() {
    let dir = tempfile::tempdir().expect("dir");
    let config = dir.path().join("config.toml");
    for (plan, key) in [
        (
            "[plans.free]\nfeatures = [\"password\", \"rules\", \"foo\"]\n",
            "plans.free.features[2]",
        ),
        (
            "[plans.free]\nlinks_per_month = -1\n",
            "plans.free.links_per_month",
        ),
        ("[plans.free]\nlengths = [9]\n", "plans.free.lengths[0]"),
    ] {
        std::fs::write(
            &config,
            format!(
                "[storage]\npath = \"{}\"\n\n{plan}",
                dir.path().join("data").display()
            ),
        )
        .expect("config");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_vshortlink"))
            .arg("--config")
            .arg(&config)
            .env_remove("VSL_STORAGE__BACKEND")
            .output()
            .expect("run");
        assert!(!out.status.success(), "{plan}: started");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(key), "{plan}: {stderr}");
    }
}

#[test]
fn an_import_into_a_team_on_a_plan_is_checked_like_creates_and_names_each_refused_line() {
    // The real binary: an import needs the store stopped, which an in-process app keeps.
    let mut app = TestApp::binary_with(PLANS, &[]);
    // The team owns `default`, where CSV rows without a space land.
    let r = app.post_json(
        "/api/v1/teams",
        ADMIN,
        &json!({"slug": "m", "plan": "monthly", "spaces": ["default"]}),
    );
    assert_eq!(r.status(), 201);
    created(create_in(&app, "default", json!({})));
    assert!(app.terminate().success());
    let file = app.dir.path().join("links.csv");
    std::fs::write(
        &file,
        "url\nhttps://example.com/i1\nhttps://example.com/i2\nhttps://example.com/i3\nhttps://example.com/i4\n",
    )
    .expect("csv");
    let out = common::cli::vsl(
        &app.config_path(),
        &["import", "--format", "csv", file.to_str().expect("path")],
    );
    // (An import with refused lines exits non-zero: its report is what says which.)
    let report = common::cli::text(&out.stderr);
    assert!(report.contains("created 2"), "{report}");
    // Three a month: one made before, two imported, lines 4 and 5 refused by name.
    assert!(
        !report.contains("line 2:") && !report.contains("line 3:"),
        "{report}"
    );
    for line in ["line 4: refused", "line 5: refused"] {
        assert!(report.contains(line), "{line}: {report}");
    }
    assert!(report.contains("links a month"), "{report}");
    app.respawn();
    assert_eq!(count_in(&app, "default"), 3);
    assert_eq!(usage(&app, "m")["links_this_month"]["used"], 3);
}
