//! People, not config keys (users, teams, run-time keys, sign-in, the audit log), from outside:
//! the API, YOURLS, Shlink and the pages, on sled and (with `TEST_STORE=postgres`) on
//! PostgreSQL. Each test is also an attack: another team's links, a revoked or expired key,
//! a key asking for more than its maker, guessing a colleague's password.

mod common;

use std::time::{Duration, Instant};

use common::pages::PageClient;
use common::{problem, TestApp, ADMIN, EDITOR, VIEWER};
use reqwest::Method;
use serde_json::{json, Value};

fn send(
    app: &TestApp,
    method: Method,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> reqwest::blocking::Response {
    let request = app.req(method, path, Some(key));
    match body {
        Some(b) => request.json(&b),
        None => request,
    }
    .send()
    .expect("request")
}

fn make_user(app: &TestApp, email: &str, password: &str, role: &str) -> Value {
    let response = app.post_json(
        "/api/v1/users",
        ADMIN,
        &json!({"email": email, "password": password, "role": role, "name": email}),
    );
    assert_eq!(response.status(), 201, "create user {email}");
    response.json().expect("user")
}

fn make_team(app: &TestApp, slug: &str) {
    let response = app.post_json("/api/v1/teams", ADMIN, &json!({"slug": slug}));
    assert_eq!(response.status(), 201, "create team {slug}");
}

fn add_member(app: &TestApp, team: &str, user: &str, role: &str) {
    let response = send(
        app,
        Method::PUT,
        &format!("/api/v1/teams/{team}/members/{user}"),
        ADMIN,
        Some(json!({ "role": role })),
    );
    assert_eq!(response.status(), 200, "member {user} of {team}");
}

fn make_key(app: &TestApp, by: &str, body: Value) -> Value {
    let response = app.post_json("/api/v1/keys", by, &body);
    assert_eq!(response.status(), 201, "make key {body}");
    response.json().expect("key")
}

/// Signs a browser in with an email and a password; the response of the form.
fn sign_in<'a>(
    app: &'a TestApp,
    email: &str,
    password: &str,
) -> (PageClient<'a>, reqwest::blocking::Response) {
    let page = PageClient::new(app);
    let response = page.post_form(
        "/ui/login",
        &[
            ("email", email),
            ("password", password),
            ("next", "/ui/links"),
        ],
    );
    (page, response)
}

#[test]
fn users_are_checked_and_the_last_admin_stays() {
    let app = TestApp::start();
    for (body, field) in [
        (json!({"email": "nope"}), "email"),
        (json!({"email": "a@x.org", "password": "short"}), "password"),
        (
            json!({"email": "a@x.org", "password": "a@x.org"}),
            "password",
        ),
        (json!({"email": "a@x.org", "role": "boss"}), "role"),
        (json!({"email": "a@x.org", "name": "x".repeat(101)}), "name"),
    ] {
        let p = problem(app.post_json("/api/v1/users", ADMIN, &body), 400);
        assert_eq!(p["field"], field, "{body}");
    }
    let p = problem(
        app.post_json(
            "/api/v1/users",
            ADMIN,
            &json!({"email": "a@x.org", "emial": 1}),
        ),
        400,
    );
    assert!(p["detail"].as_str().unwrap_or("").contains("emial"), "{p}");
    // Nothing was written by any of them.
    assert_eq!(app.api_get("/api/v1/users", ADMIN)["users"], json!([]));
    // Only admins make users.
    problem(
        app.post_json("/api/v1/users", EDITOR, &json!({"email": "e@x.org"})),
        403,
    );

    let alice = make_user(&app, "alice@x.org", "correct horse battery", "admin");
    assert!(
        alice.get("password").is_none(),
        "no hash is ever shown: {alice}"
    );
    let id = alice["id"].as_str().expect("id").to_string();
    let p = problem(
        app.post_json("/api/v1/users", ADMIN, &json!({"email": "ALICE@x.org"})),
        409,
    );
    assert_eq!(p["code"], "email_taken");

    // The last enabled admin can be neither demoted, disabled nor deleted.
    let path = format!("/api/v1/users/{id}");
    for body in [json!({"role": "member"}), json!({"disabled": true})] {
        let p = problem(send(&app, Method::PATCH, &path, ADMIN, Some(body)), 409);
        assert_eq!(p["code"], "last_admin");
    }
    let p = problem(send(&app, Method::DELETE, &path, ADMIN, None), 409);
    assert_eq!(p["code"], "last_admin");

    let bob = make_user(&app, "bob@x.org", "another long one", "admin");
    let response = send(&app, Method::DELETE, &path, ADMIN, None);
    assert_eq!(response.status(), 204);
    let bob_path = format!("/api/v1/users/{}", bob["id"].as_str().expect("id"));
    let p = problem(
        send(
            &app,
            Method::PATCH,
            &bob_path,
            ADMIN,
            Some(json!({"disabled": true})),
        ),
        409,
    );
    assert_eq!(p["code"], "last_admin");
    problem(send(&app, Method::GET, &path, ADMIN, None), 404);
    let renamed: Value = send(
        &app,
        Method::PATCH,
        &bob_path,
        ADMIN,
        Some(json!({"name": "Bob"})),
    )
    .json()
    .expect("user");
    assert_eq!(renamed["name"], "Bob");
}

#[test]
fn a_key_never_has_more_than_its_maker_and_ends_when_revoked_or_expired() {
    let app = TestApp::start();
    make_team(&app, "red");
    make_team(&app, "blue");
    // A config editor cannot make an admin key.
    let p = problem(
        app.post_json(
            "/api/v1/keys",
            EDITOR,
            &json!({"name": "x", "role": "admin"}),
        ),
        403,
    );
    assert_eq!(p["code"], "role_not_allowed");
    for (body, field) in [
        (json!({"name": ""}), "name"),
        (json!({"name": "x", "role": "god"}), "role"),
        (json!({"name": "x", "expires_at": "tomorrow"}), "expires_at"),
        (
            json!({"name": "x", "expires_at": "2001-01-01T00:00:00Z"}),
            "expires_at",
        ),
        (json!({"name": "x", "team": "green"}), "team"),
    ] {
        let p = problem(app.post_json("/api/v1/keys", ADMIN, &body), 400);
        assert_eq!(p["field"], field, "{body}");
    }
    let made = make_key(
        &app,
        ADMIN,
        json!({"name": "red robot", "role": "editor", "team": "red"}),
    );
    let key = made["key"].as_str().expect("key").to_string();
    assert!(
        key.starts_with(made["prefix"].as_str().expect("prefix")),
        "{made}"
    );
    assert!(
        key.len() >= 4 + 12 + 1 + 22,
        "at least 128 bits of secret: {key}"
    );

    // It works on every API, in red only.
    let link = app.post_json(
        "/api/v1/links",
        &key,
        &json!({"url": "https://red.example/"}),
    );
    assert_eq!(link.status(), 201);
    let link: Value = link.json().expect("link");
    assert_eq!(
        link["space"], "red",
        "a team key's creates land in the team's space"
    );
    problem(
        app.post_json(
            "/api/v1/links",
            &key,
            &json!({"url": "https://x.example/", "space": "blue"}),
        ),
        403,
    );
    let shlink = app
        .client
        .get(app.url("/rest/v3/short-urls"))
        .header("X-Api-Key", &key)
        .send()
        .expect("shlink");
    assert_eq!(shlink.status(), 200);
    let yourls = app
        .client
        .get(app.url(&format!(
            "/yourls-api.php?action=db-stats&format=json&signature={key}"
        )))
        .send()
        .expect("yourls");
    assert_eq!(yourls.status(), 200);

    // Listing shows no secret, and last use once it is written.
    let listed = app.api_get("/api/v1/keys", ADMIN);
    let text = listed.to_string();
    assert!(
        !text.contains(&key[key.len() - 20..]),
        "no secret in {text}"
    );
    assert_eq!(listed["keys"][0]["team"], "red");

    // A wrong secret for a real id is as unknown as anything.
    let mut forged = key.clone();
    forged.pop();
    forged.push(if key.ends_with('A') { 'B' } else { 'A' });
    problem(
        app.req(Method::GET, "/api/v1/links", Some(&forged))
            .send()
            .expect("GET"),
        401,
    );

    // Revoked: refused on the next request.
    let id = made["id"].as_str().expect("id");
    assert_eq!(
        send(
            &app,
            Method::DELETE,
            &format!("/api/v1/keys/{id}"),
            ADMIN,
            None
        )
        .status(),
        204
    );
    problem(
        app.req(Method::GET, "/api/v1/links", Some(&key))
            .send()
            .expect("GET"),
        401,
    );

    // Expired: 401 key_expired once its time has come.
    let soon = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
    let soon = soon
        .format(&time::format_description::well_known::Rfc3339)
        .expect("time");
    let expiring = make_key(&app, ADMIN, json!({"name": "brief", "expires_at": soon}));
    let expiring = expiring["key"].as_str().expect("key").to_string();
    assert_eq!(
        app.req(Method::GET, "/api/v1/links", Some(&expiring))
            .send()
            .expect("GET")
            .status(),
        200
    );
    app.advance(Duration::from_secs(2 * 3600));
    let p = problem(
        app.req(Method::GET, "/api/v1/links", Some(&expiring))
            .send()
            .expect("GET"),
        401,
    );
    assert_eq!(p["code"], "key_expired");
}

#[test]
fn a_member_never_sees_another_teams_links() {
    let app = TestApp::start();
    make_team(&app, "red");
    make_team(&app, "blue");
    let rose = make_user(&app, "rose@x.org", "rose's long password", "member");
    let rose_id = rose["id"].as_str().expect("id");
    add_member(&app, "red", rose_id, "editor");
    let blue = app.create(json!({"url": "https://blue.example/secret", "space": "blue"}));
    let blue_code = blue["code"].as_str().expect("code").to_string();
    let red = app.create(json!({"url": "https://red.example/", "space": "red"}));
    let red_code = red["code"].as_str().expect("code").to_string();
    for _ in 0..3 {
        app.get(&format!("/{blue_code}"));
    }

    // YOURLS as Rose (email and password): her team's links only.
    let yourls = |action: &str, extra: &str| -> Value {
        app.client
            .get(app.url(&format!(
                "/yourls-api.php?action={action}&format=json&username=rose@x.org&password=rose%27s%20long%20password{extra}"
            )))
            .send()
            .expect("yourls")
            .json()
            .expect("json")
    };
    // Catalogue-wide statistics are for keys of every space: refused, nothing shown.
    let stats = yourls("stats", "&filter=top&limit=100");
    let text = stats.to_string();
    assert!(
        !text.contains(&blue_code) && !text.contains("blue.example"),
        "{text}"
    );
    let db = yourls("db-stats", "");
    assert_eq!(
        db["db-stats"]["total_links"], 1,
        "counts are the team's: {db}"
    );
    let url_stats = yourls("url-stats", &format!("&shorturl={blue_code}"));
    assert!(
        !url_stats.to_string().contains("blue.example"),
        "{url_stats}"
    );
    let expand = yourls("expand", &format!("&shorturl={blue_code}"));
    assert!(!expand.to_string().contains("blue.example"), "{expand}");
    let created = yourls("shorturl", "&url=https://rose.example/");
    let code = created["url"]["keyword"].as_str().expect("keyword");
    let made = app.api_get(&format!("/api/v1/links/{code}"), ADMIN);
    assert_eq!(
        made["space"], "red",
        "YOURLS creates land in her team's space"
    );

    // The pages as Rose.
    let (page, response) = sign_in(&app, "rose@x.org", "rose's long password");
    assert_eq!(response.status(), 303);
    let links = page.html("/ui/links", 200);
    assert!(links.contains(&red_code) && !links.contains(&blue_code));
    assert!(!links.contains("blue.example"));
    let other = page.get(&format!("/ui/links/{blue_code}"));
    assert!(
        other.status() == 403 || other.status() == 404,
        "{}",
        other.status()
    );
    let dashboard = page.html("/ui/dashboard", 200);
    assert!(!dashboard.contains("blue.example"));

    // Nothing was counted for Blue's link by any of it: its three visits, no more.
    let deadline = Instant::now() + Duration::from_secs(10);
    let total = loop {
        let stats = app.api_get(&format!("/api/v1/links/{blue_code}/stats"), ADMIN);
        if stats["total"] == 3 || Instant::now() > deadline {
            break stats["total"].clone();
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_millis(500));
    let stats = app.api_get(&format!("/api/v1/links/{blue_code}/stats"), ADMIN);
    assert_eq!((total, stats["total"].clone()), (json!(3), json!(3)));
}

#[test]
fn several_teams_must_say_where_and_a_viewer_only_reads() {
    let app = TestApp::start();
    make_team(&app, "red");
    make_team(&app, "blue");
    let key = make_key(
        &app,
        ADMIN,
        json!({"name": "r", "role": "viewer", "team": "red"}),
    );
    let key = key["key"].as_str().expect("key").to_string();
    problem(
        app.post_json("/api/v1/links", &key, &json!({"url": "https://x.example/"})),
        403,
    );
    // A user in two teams: through YOURLS, creates need a place; through the API a key
    // without a team acts for the user and must name the space.
    let ted = make_user(&app, "ted@x.org", "ted's long password", "member");
    let ted_id = ted["id"].as_str().expect("id");
    add_member(&app, "red", ted_id, "editor");
    add_member(&app, "blue", ted_id, "viewer");
    let me: Value = app
        .client
        .get(app.url(
            "/yourls-api.php?action=db-stats&format=json&username=ted@x.org&password=ted%27s%20long%20password",
        ))
        .send()
        .expect("yourls")
        .json()
        .expect("json");
    assert!(me["db-stats"].is_object(), "{me}");
    let team: Value = app.api_get("/api/v1/teams/red", ADMIN);
    assert_eq!(team["members"][0]["email"], "ted@x.org");
    // A viewer key cannot see users.
    problem(
        app.req(Method::GET, "/api/v1/users", Some(VIEWER))
            .send()
            .expect("GET"),
        403,
    );
    let p = problem(
        app.post_json(
            "/api/v1/teams",
            ADMIN,
            &json!({"slug": "green", "spaces": ["red"]}),
        ),
        409,
    );
    assert_eq!(p["code"], "space_taken");
    let p = problem(
        app.post_json("/api/v1/teams", ADMIN, &json!({"slug": "red"})),
        409,
    );
    assert_eq!(p["code"], "team_exists");
}

#[test]
fn wrong_passwords_are_throttled_per_account_and_never_lock_anyone_out_for_good() {
    let app = TestApp::start_with(
        "[limits.rates]\nauth_per_account = \"3/h\"\nauth_per_ip = \"off\"\nlogin_per_ip = \"off\"\n",
        &[("VSL_SERVER__TRUST_PROXY_HEADERS", "true")],
    );
    make_user(&app, "dora@x.org", "dora's long password", "member");
    let from = |ip: &str, email: &str, password: &str| -> (u16, Duration) {
        let page = PageClient::new(&app);
        let token = page.csrf("/ui/login");
        let started = Instant::now();
        let response = page
            .client
            .post(app.url("/ui/login"))
            .header("X-Forwarded-For", ip)
            .form(&[
                ("csrf", token.as_str()),
                ("email", email),
                ("password", password),
            ])
            .send()
            .expect("POST");
        let status = response.status().as_u16();
        if status >= 500 {
            panic!("{status}: {}", response.text().unwrap_or_default());
        }
        (status, started.elapsed())
    };
    // A wrong password and an unknown email: the same answer, both after an Argon2 run.
    let (wrong, wrong_took) = from("10.0.0.1", "dora@x.org", "not her password");
    let (unknown, unknown_took) = from("10.0.0.1", "nobody@x.org", "not her password");
    assert_eq!((wrong, unknown), (401, 401));
    assert!(
        unknown_took * 4 > wrong_took,
        "an unknown email takes about as long: {unknown_took:?} vs {wrong_took:?}"
    );
    for _ in 0..2 {
        assert_eq!(from("10.0.0.1", "dora@x.org", "not her password").0, 401);
    }
    // Past 3 an hour from this address: refused, the right password too.
    assert_eq!(
        from("10.0.0.1", "dora@x.org", "dora's long password").0,
        429
    );
    // From another address the account still signs in: nobody is locked out by a guesser.
    assert_eq!(
        from("10.0.0.2", "dora@x.org", "dora's long password").0,
        303
    );
    // Ten times the rate from all addresses: refused everywhere until the quota refills.
    let mut refused_at = None;
    for n in 3..40 {
        let ip = format!("10.0.1.{n}");
        if from(&ip, "dora@x.org", "not her password").0 == 429 {
            refused_at = Some(n);
            break;
        }
    }
    assert!(
        refused_at.is_some(),
        "the per-account quota across addresses holds"
    );
    assert_eq!(
        from("10.0.2.1", "dora@x.org", "dora's long password").0,
        429
    );
    let audit = app.api_get("/api/v1/audit?action=sign_in.failed", ADMIN);
    assert!(
        audit["entries"].as_array().is_some_and(|e| e.len() >= 3),
        "{audit}"
    );
}

#[test]
fn sessions_end_when_a_user_is_disabled_or_reset() {
    let app = TestApp::start();
    let erin = make_user(&app, "erin@x.org", "erin's long password", "member");
    let id = erin["id"].as_str().expect("id").to_string();
    let (page, response) = sign_in(&app, "erin@x.org", "erin's long password");
    assert_eq!(response.status(), 303);
    assert_eq!(page.get("/ui/links").status(), 200);
    let path = format!("/api/v1/users/{id}");
    send(
        &app,
        Method::PATCH,
        &path,
        ADMIN,
        Some(json!({"disabled": true})),
    );
    assert_ne!(
        page.get("/ui/links").status(),
        200,
        "disabled: the session ended"
    );
    let (_, response) = sign_in(&app, "erin@x.org", "erin's long password");
    assert_eq!(response.status(), 401, "a disabled user signs in as nobody");
    send(
        &app,
        Method::PATCH,
        &path,
        ADMIN,
        Some(json!({"disabled": false})),
    );
    assert_ne!(
        page.get("/ui/links").status(),
        200,
        "re-enabled: the old session stays ended"
    );
    let (page, _) = sign_in(&app, "erin@x.org", "erin's long password");
    assert_eq!(page.get("/ui/links").status(), 200);
    send(
        &app,
        Method::PATCH,
        &path,
        ADMIN,
        Some(json!({"password": "a brand new password"})),
    );
    assert_ne!(
        page.get("/ui/links").status(),
        200,
        "a reset ends the sessions"
    );
    let (_, response) = sign_in(&app, "erin@x.org", "a brand new password");
    assert_eq!(response.status(), 303);
    // Signing out ends it; the form needs the session's token.
    let (page, _) = sign_in(&app, "erin@x.org", "a brand new password");
    let out = page.post_raw("/ui/logout", &[]);
    assert_eq!(out.status(), 403, "no token, no sign-out");
    let out = page.post_form("/ui/logout", &[]);
    assert_eq!(out.status(), 303);
    assert_ne!(page.get("/ui/links").status(), 200);
}

#[test]
fn the_audit_log_records_changes_for_admins_and_owners() {
    let app = TestApp::start();
    make_team(&app, "red");
    let owner = make_user(&app, "olga@x.org", "olga's long password", "member");
    add_member(&app, "red", owner["id"].as_str().expect("id"), "owner");
    for n in 0..5 {
        app.create(json!({"url": format!("https://red.example/{n}"), "space": "red"}));
    }
    let code = app.create(json!({"url": "https://red.example/x", "space": "red"}))["code"]
        .as_str()
        .expect("code")
        .to_string();
    send(
        &app,
        Method::DELETE,
        &format!("/api/v1/links/{code}"),
        ADMIN,
        None,
    );
    let log = app.api_get("/api/v1/audit?team=red", ADMIN);
    let entries = log["entries"].as_array().expect("entries");
    let created: Vec<&Value> = entries
        .iter()
        .filter(|e| e["action"] == "link.created")
        .collect();
    assert_eq!(created.len(), 1, "creates are one entry a minute: {log}");
    assert_eq!(created[0]["count"], 6);
    assert_eq!(created[0]["actor"], "config:admin");
    for action in ["link.deleted", "member.set", "team.created"] {
        assert!(
            entries.iter().any(|e| e["action"] == action),
            "{action} in {log}"
        );
    }
    // Paging.
    let first = app.api_get("/api/v1/audit?limit=2", ADMIN);
    let cursor = first["next_cursor"].as_str().expect("more");
    let second = app.api_get(&format!("/api/v1/audit?limit=2&cursor={cursor}"), ADMIN);
    assert_ne!(first["entries"][0], second["entries"][0]);
    // Not for an editor; a config key limited to a space is no team owner either.
    problem(
        app.req(Method::GET, "/api/v1/audit", Some(EDITOR))
            .send()
            .expect("GET"),
        403,
    );
    let p = problem(
        app.req(Method::GET, "/api/v1/audit?from=yesterday", Some(ADMIN))
            .send()
            .expect("GET"),
        400,
    );
    assert_eq!(p["field"], "from");
}

/// How long until `check` holds (polled every 20 ms), if within `limit`.
fn within(limit: Duration, mut check: impl FnMut() -> bool) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if check() {
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn two_postgres_instances_agree_on_keys_users_and_the_last_admin() {
    let Some(url) = common::postgres::fresh_database() else {
        return;
    };
    let a = TestApp::start_on(&url, "", &[]);
    let b = TestApp::start_on(&url, "", &[]);
    // A key made on A works on B within a second; revoked on B, refused on A within one.
    let made = make_key(&a, ADMIN, json!({"name": "shared", "role": "editor"}));
    let key = made["key"].as_str().expect("key").to_string();
    let works = |app: &TestApp| {
        app.req(Method::GET, "/api/v1/links", Some(&key))
            .send()
            .expect("GET")
            .status()
            .as_u16()
    };
    let seen = within(Duration::from_secs(1), || works(&b) == 200);
    assert!(
        seen.is_some(),
        "a new key reaches the other instance within 1 s"
    );
    let id = made["id"].as_str().expect("id");
    assert_eq!(
        send(
            &b,
            Method::DELETE,
            &format!("/api/v1/keys/{id}"),
            ADMIN,
            None
        )
        .status(),
        204
    );
    let refused = within(Duration::from_secs(1), || works(&a) == 401);
    assert!(
        refused.is_some(),
        "a revoked key is refused on every instance within 1 s"
    );

    // A user disabled on B: their session on A ends within a second.
    let user = make_user(&a, "fay@x.org", "fay's long password", "member");
    let (page, response) = sign_in(&a, "fay@x.org", "fay's long password");
    assert_eq!(response.status(), 303);
    assert_eq!(page.get("/ui/links").status(), 200);
    let path = format!("/api/v1/users/{}", user["id"].as_str().expect("id"));
    send(
        &b,
        Method::PATCH,
        &path,
        ADMIN,
        Some(json!({"disabled": true})),
    );
    let ended = within(Duration::from_secs(1), || {
        page.get("/ui/links").status() != 200
    });
    assert!(
        ended.is_some(),
        "a disabled user's session ends on every instance within 1 s"
    );

    // The last admin holds across instances: two demotions at once, one wins.
    let one = make_user(&a, "one@x.org", "one's long password", "admin");
    let two = make_user(&b, "two@x.org", "two's long password", "admin");
    let demote = |app: &TestApp, user: &Value| {
        let path = format!("/api/v1/users/{}", user["id"].as_str().expect("id"));
        send(
            app,
            Method::PATCH,
            &path,
            ADMIN,
            Some(json!({"role": "member"})),
        )
        .status()
        .as_u16()
    };
    let (x, y) = std::thread::scope(|s| {
        let x = s.spawn(|| demote(&a, &one));
        let y = s.spawn(|| demote(&b, &two));
        (x.join().expect("a"), y.join().expect("b"))
    });
    let mut statuses = [x, y];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409], "one admin stays");
    let admins = |app: &TestApp| {
        app.api_get("/api/v1/users", ADMIN)["users"]
            .as_array()
            .expect("users")
            .iter()
            .filter(|u| u["role"] == "admin" && u["disabled"] == false)
            .count()
    };
    // Each instance sees the other's write within a second.
    for app in [&a, &b] {
        assert!(within(Duration::from_secs(1), || admins(app) == 1).is_some());
    }
}

#[test]
fn accounts_travel_with_a_backup_and_the_first_admin_comes_from_the_command_line() {
    use common::cli::vsl;
    let source = TestApp::binary();
    make_team(&source, "red");
    let gil = make_user(&source, "gil@x.org", "gil's long password", "member");
    add_member(&source, "red", gil["id"].as_str().expect("id"), "owner");
    let key = make_key(
        &source,
        ADMIN,
        json!({"name": "ci", "role": "editor", "team": "red"}),
    );
    let key = key["key"].as_str().expect("key").to_string();
    source.post_json(
        "/api/v1/links",
        &key,
        &json!({"url": "https://red.example/kept"}),
    );
    // Without `accounts=true` a backup holds no account; with it, every record and no secret
    // in the clear.
    let plain = source
        .req(Method::GET, "/api/v1/backup", Some(ADMIN))
        .send()
        .expect("backup")
        .text()
        .expect("text");
    assert!(!plain.contains("gil@x.org"));
    let full = source
        .req(Method::GET, "/api/v1/backup?accounts=true", Some(ADMIN))
        .send()
        .expect("backup")
        .text()
        .expect("text");
    assert!(full.contains("gil@x.org") && full.contains("\"kind\":\"team\""));
    assert!(
        !full.contains(&key[key.len() - 16..]),
        "a key's secret is never written"
    );
    assert!(!full.contains("gil's long password"));
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("with-accounts.jsonl");
    std::fs::write(&file, &full).expect("write");

    let mut target = TestApp::binary();
    target.terminate();
    let restored = vsl(
        &target.config_path(),
        &["restore", file.to_str().expect("path")],
    );
    assert!(
        restored.status.success(),
        "{}",
        String::from_utf8_lossy(&restored.stderr)
    );
    let checked = vsl(&target.config_path(), &["check"]);
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stdout)
    );
    // The first admin of a stopped store, from the command line.
    let added = vsl(
        &target.config_path(),
        &["user", "add", "root@x.org", "--admin"],
    );
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let printed: Value = serde_json::from_slice(&added.stdout).expect("json");
    let password = printed["password"]
        .as_str()
        .expect("one-time password")
        .to_string();
    assert!(password.len() >= 16);
    let again = vsl(&target.config_path(), &["user", "add", "ROOT@x.org"]);
    assert!(!again.status.success(), "emails are unique");
    target.respawn();

    // The run-time key, the password and the team came back.
    let links = target
        .req(Method::GET, "/api/v1/links", Some(&key))
        .send()
        .expect("GET");
    assert_eq!(links.status(), 200, "a restored key works");
    let listed: Value = links.json().expect("json");
    assert!(listed.to_string().contains("red.example/kept"), "{listed}");
    let code = listed["items"][0]["code"]
        .as_str()
        .expect("code")
        .to_string();
    let (page, response) = sign_in(&target, "gil@x.org", "gil's long password");
    assert_eq!(response.status(), 303);
    assert!(page.html("/ui/links", 200).contains(&code));
    let (_, response) = sign_in(&target, "root@x.org", &password);
    assert_eq!(response.status(), 303, "the first admin signs in");
    let team = target.api_get("/api/v1/teams/red", ADMIN);
    assert_eq!(team["members"][0]["role"], "owner");
}
