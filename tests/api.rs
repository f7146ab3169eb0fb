//! The HTTP API and the redirect path, against the real binary (see docs/api.md).

mod common;

use std::collections::HashSet;
use std::process::Command;
use std::time::Duration;

use common::{problem, TestApp, ADMIN, BASE_URL, EDITOR, SPORTS, VIEWER};
use reqwest::Method;
use serde_json::{json, Value};

#[test]
fn every_route_happy_path() {
    let app = TestApp::start();

    // health
    let health = app.get("/healthz");
    assert_eq!(health.status(), 200);
    assert_eq!(health.json::<Value>().unwrap()["status"], "ok");

    // create (default length 6, 7 days)
    let response = app.post_json(
        "/api/v1/links",
        ADMIN,
        &json!({"url": "https://example.com/a?q=1"}),
    );
    assert_eq!(response.status(), 201);
    let link: Value = response.json().unwrap();
    let code = link["code"].as_str().unwrap().to_string();
    assert_eq!(code.len(), 6);
    assert_eq!(link["created"], true);
    assert_eq!(link["length"], 6);
    assert_eq!(link["status"], "active");
    assert_eq!(link["space"], "default");
    assert_eq!(link["url"], "https://example.com/a?q=1");
    assert_eq!(link["short_url"], format!("{BASE_URL}/{code}"));
    assert!(
        link["expires_at"].is_string(),
        "length 6 defaults to 7 days"
    );
    assert!(link["created_at"].as_str().unwrap().ends_with('Z'));

    // dedup: same URL, space and length
    let again = app.post_json(
        "/api/v1/links",
        ADMIN,
        &json!({"url": "https://example.com/a?q=1"}),
    );
    assert_eq!(again.status(), 200);
    let again: Value = again.json().unwrap();
    assert_eq!(again["created"], false);
    assert_eq!(again["code"], code.as_str());

    // every tier and a custom code
    let four = app.create(json!({"url": "https://example.com/4", "length": 4}));
    assert_eq!(four["code"].as_str().unwrap().len(), 4);
    assert!(four["expires_at"].is_null(), "length 4 is permanent");
    let five = app.create(json!({"url": "https://example.com/5", "length": 5, "ttl": 3600, "title": "Five", "tags": ["a", "b"]}));
    assert_eq!(five["title"], "Five");
    assert_eq!(five["tags"], json!(["a", "b"]));
    let custom =
        app.create(json!({"url": "https://example.com/c", "code": "my-Code_1", "space": "sports"}));
    assert_eq!(custom["code"], "my-Code_1");
    assert!(
        custom["expires_at"].is_null(),
        "custom codes are permanent by default"
    );
    let short = app.create(json!({"url": "https://example.com/s", "code": "go"}));
    assert_eq!(short["length"], 2);

    // redirect, GET and HEAD
    let redirect = app.get(&format!("/{code}"));
    assert_eq!(redirect.status(), 302);
    assert_eq!(redirect.headers()["location"], "https://example.com/a?q=1");
    assert_eq!(redirect.headers()["cache-control"], "private, max-age=0");
    let head = app
        .client
        .head(app.url(&format!("/{code}")))
        .send()
        .unwrap();
    assert_eq!(head.status(), 302);
    assert_eq!(head.headers()["location"], "https://example.com/a?q=1");

    // read
    let got: Value = app
        .req(Method::GET, &format!("/api/v1/links/{code}"), Some(VIEWER))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(got["code"], code.as_str());
    assert!(got["visits_total"].is_u64());

    // list with filters and a cursor
    let page: Value = app
        .req(Method::GET, "/api/v1/links?limit=2", Some(VIEWER))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    let cursor = page["next_cursor"].as_str().unwrap();
    let rest: Value = app
        .req(
            Method::GET,
            &format!("/api/v1/links?limit=1000&cursor={cursor}"),
            Some(VIEWER),
        )
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(rest["items"].as_array().unwrap().len(), 3);
    assert!(rest["next_cursor"].is_null());
    let sports: Value = app
        .req(
            Method::GET,
            "/api/v1/links?space=sports&status=active",
            Some(VIEWER),
        )
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(sports["items"].as_array().unwrap().len(), 1);

    // patch
    let patched = app
        .req(
            Method::PATCH,
            &format!("/api/v1/links/{code}"),
            Some(EDITOR),
        )
        .json(&json!({"url": "https://example.com/b", "title": "B", "expires_at": null}))
        .send()
        .unwrap();
    assert_eq!(patched.status(), 200);
    let patched: Value = patched.json().unwrap();
    assert_eq!(patched["url"], "https://example.com/b");
    assert!(patched["expires_at"].is_null());

    // batch: results in order, per-item errors
    let batch = app.post_json(
        "/api/v1/links/batch",
        ADMIN,
        &json!({"links": [
            {"url": "https://example.com/batch/1"},
            {"url": "ftp://example.com/"},
            {"url": "https://example.com/batch/2", "code": "batch2"},
            {"url": 7},
        ]}),
    );
    assert_eq!(batch.status(), 200);
    let batch: Value = batch.json().unwrap();
    let results = batch["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    assert_eq!(results[0]["ok"], true);
    assert_eq!(results[0]["link"]["url"], "https://example.com/batch/1");
    assert_eq!(results[1]["ok"], false);
    assert_eq!(results[1]["error"]["code"], "invalid_url");
    assert_eq!(results[1]["error"]["field"], "links[1].url");
    assert_eq!(results[2]["link"]["code"], "batch2");
    assert_eq!(results[3]["error"]["status"], 400);

    // pools
    let pools: Value = app
        .req(Method::GET, "/api/v1/pools", Some(VIEWER))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let pools = pools["pools"].as_array().unwrap();
    assert_eq!(
        pools
            .iter()
            .map(|p| p["length"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [4, 5, 6, 7]
    );
    let four = &pools[0];
    assert_eq!(four["strategy"], "step");
    assert!(four["state"]["batch_index"].is_u64() && four["state"]["last_id"].is_u64());
    for p in pools {
        for key in ["cooling", "generated_total", "recycled_total"] {
            assert!(p[key].is_u64(), "{key} in {p}");
        }
        // Computed codes (`hash`) have no pool: nothing is available ahead.
        if p["strategy"] == "hash" {
            assert!(p["available"].is_null(), "{p}");
        } else {
            assert!(p["available"].is_u64(), "{p}");
        }
        assert!(p["exhausted"].is_boolean());
    }
    let refill = app
        .req(
            Method::POST,
            "/api/v1/pools/5/refill?count=250",
            Some(ADMIN),
        )
        .send()
        .unwrap();
    assert_eq!(refill.status(), 200);
    assert_eq!(
        refill.json::<Value>().unwrap(),
        json!({"length": 5, "added": 250})
    );

    // delete
    let deleted = app
        .req(
            Method::DELETE,
            &format!("/api/v1/links/{code}"),
            Some(EDITOR),
        )
        .send()
        .unwrap();
    assert_eq!(deleted.status(), 204);
    let gone: Value = app
        .req(Method::GET, &format!("/api/v1/links/{code}"), Some(VIEWER))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(gone["status"], "deleted", "the record stays");
    assert_eq!(app.get(&format!("/{code}")).status(), 410);
}

#[test]
fn bad_input_is_a_problem_and_writes_nothing() {
    let app = TestApp::start_with("[limits]\nmax_body_bytes = 4096\nmax_url_len = 200\n", &[]);
    app.create(json!({"url": "https://example.com/taken", "code": "taken"}));
    let before = app.link_total();
    let long_url = format!("https://example.com/{}", "x".repeat(300));
    let cases: Vec<(Value, u16, &str, &str)> = vec![
        (
            json!({"url": "javascript:alert(1)"}),
            400,
            "invalid_url",
            "url",
        ),
        (
            json!({"url": "data:text/html,hi"}),
            400,
            "invalid_url",
            "url",
        ),
        (
            json!({"url": "file:///etc/passwd"}),
            400,
            "invalid_url",
            "url",
        ),
        (json!({"url": long_url}), 400, "invalid_url", "url"),
        (json!({"url": "https://"}), 400, "invalid_url", "url"),
        (json!({"url": "not a url"}), 400, "invalid_url", "url"),
        (
            json!({"url": format!("{BASE_URL}/abc")}),
            400,
            "invalid_url",
            "url",
        ),
        (
            json!({"url": "https://example.com/", "length": 9}),
            400,
            "invalid_length",
            "length",
        ),
        (
            json!({"url": "https://example.com/", "length": 2}),
            400,
            "invalid_length",
            "length",
        ),
        (
            json!({"url": "https://example.com/", "length": "six"}),
            400,
            "invalid_length",
            "length",
        ),
        (
            json!({"url": "https://example.com/", "code": "bad code"}),
            400,
            "invalid_code",
            "code",
        ),
        (
            json!({"url": "https://example.com/", "code": "x".repeat(17)}),
            400,
            "invalid_code",
            "code",
        ),
        (
            json!({"url": "https://example.com/", "code": "API"}),
            400,
            "invalid_code",
            "code",
        ),
        (
            json!({"url": "https://example.com/", "code": "healthz"}),
            400,
            "invalid_code",
            "code",
        ),
        (
            json!({"url": "https://example.com/", "code": "taken"}),
            409,
            "code_taken",
            "code",
        ),
        (
            json!({"url": "https://example.com/", "ttl": 0}),
            400,
            "invalid_ttl",
            "ttl",
        ),
        (
            json!({"url": "https://example.com/", "ttl": -5}),
            400,
            "invalid_ttl",
            "ttl",
        ),
        (
            json!({"url": "https://example.com/", "ttl": i64::MAX}),
            400,
            "invalid_ttl",
            "ttl",
        ),
        (
            json!({"url": "https://example.com/", "ttl": 1, "expires_at": null}),
            400,
            "invalid_ttl",
            "ttl",
        ),
        (
            json!({"url": "https://example.com/", "expires_at": "9999-01-01T00:00:00Z"}),
            400,
            "invalid_expires_at",
            "expires_at",
        ),
        (
            json!({"url": "https://example.com/", "code": "batch"}),
            400,
            "invalid_code",
            "code",
        ),
        (
            json!({"url": "https://example.com/", "ttl": "soon"}),
            400,
            "invalid_ttl",
            "ttl",
        ),
        (
            json!({"url": "https://example.com/", "expires_at": "2001-01-01T00:00:00Z"}),
            400,
            "invalid_expires_at",
            "expires_at",
        ),
        (
            json!({"url": "https://example.com/", "expires_at": "tomorrow"}),
            400,
            "invalid_expires_at",
            "expires_at",
        ),
        (
            json!({"url": "https://example.com/", "space": "no spaces"}),
            400,
            "invalid_space",
            "space",
        ),
        (
            json!({"url": "https://example.com/", "tags": "one"}),
            400,
            "invalid_tags",
            "tags",
        ),
        (json!({}), 400, "invalid_url", "url"),
    ];
    for (body, status, code, field) in cases {
        let response = app.post_json("/api/v1/links", ADMIN, &body);
        let p = problem(response, status);
        assert_eq!(p["code"], code, "{body}: {p}");
        assert_eq!(p["field"], field, "{body}: {p}");
    }
    // malformed JSON and a body that is not an object
    for raw in ["{\"url\": ", "[1, 2]", "nope"] {
        let response = app
            .req(Method::POST, "/api/v1/links", Some(ADMIN))
            .header("content-type", "application/json")
            .body(raw)
            .send()
            .unwrap();
        assert_eq!(problem(response, 400)["code"], "invalid_json");
    }
    // over the body limit
    let big = json!({"url": "https://example.com/", "title": "t".repeat(5000)});
    let p = problem(app.post_json("/api/v1/links", ADMIN, &big), 413);
    assert_eq!(p["code"], "payload_too_large");
    // a batch over 1000
    let links: Vec<Value> = (0..1001)
        .map(|_| json!({"url": "https://e.com/"}))
        .collect();
    let app_big_body = TestApp::start();
    let p = problem(
        app_big_body.post_json("/api/v1/links/batch", ADMIN, &json!({ "links": links })),
        400,
    );
    assert_eq!(
        (p["code"].as_str(), p["field"].as_str()),
        (Some("invalid_batch"), Some("links"))
    );
    assert_eq!(app_big_body.link_total(), 0);
    // unknown codes
    let p = problem(
        app.req(Method::GET, "/api/v1/links/nosuch", Some(ADMIN))
            .send()
            .unwrap(),
        404,
    );
    assert_eq!(p["code"], "not_found");
    problem(
        app.req(Method::PATCH, "/api/v1/links/nosuch", Some(ADMIN))
            .json(&json!({}))
            .send()
            .unwrap(),
        404,
    );
    problem(
        app.req(Method::DELETE, "/api/v1/links/nosuch", Some(ADMIN))
            .send()
            .unwrap(),
        404,
    );
    // bad query values
    let p = problem(
        app.req(Method::GET, "/api/v1/links?limit=x", Some(ADMIN))
            .send()
            .unwrap(),
        400,
    );
    assert_eq!(p["field"], "limit");
    let p = problem(
        app.req(Method::GET, "/api/v1/links?status=zombie", Some(ADMIN))
            .send()
            .unwrap(),
        400,
    );
    assert_eq!(p["field"], "status");
    // a patch with a bad value changes nothing
    let p = problem(
        app.req(Method::PATCH, "/api/v1/links/taken", Some(ADMIN))
            .json(&json!({"url": "javascript:x", "title": "changed"}))
            .send()
            .unwrap(),
        400,
    );
    assert_eq!(p["field"], "url");
    let still: Value = app
        .req(Method::GET, "/api/v1/links/taken", Some(ADMIN))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert!(still["title"].is_null());

    assert_eq!(app.link_total(), before, "no bad request wrote a link");
    // a limit over 1000 is clamped, not refused
    assert_eq!(
        app.req(Method::GET, "/api/v1/links?limit=5000", Some(ADMIN))
            .send()
            .unwrap()
            .status(),
        200
    );
}

#[test]
fn auth_matrix() {
    let app = TestApp::start();
    let body = json!({"url": "https://example.com/auth"});
    // no key, unknown key, malformed header
    problem(
        app.req(Method::POST, "/api/v1/links", None)
            .json(&body)
            .send()
            .unwrap(),
        401,
    );
    problem(
        app.req(Method::GET, "/api/v1/links", None).send().unwrap(),
        401,
    );
    problem(
        app.req(Method::POST, "/api/v1/links", Some("wrong-key-123"))
            .json(&body)
            .send()
            .unwrap(),
        401,
    );
    let malformed = app
        .client
        .get(app.url("/api/v1/links"))
        .header("authorization", "Basic abc")
        .send()
        .unwrap();
    problem(malformed, 401);
    // X-Api-Key works like Bearer
    let via_header = app
        .client
        .get(app.url("/api/v1/pools"))
        .header("x-api-key", VIEWER)
        .send()
        .unwrap();
    assert_eq!(via_header.status(), 200);
    // a viewer reads but does not write
    problem(
        app.req(Method::POST, "/api/v1/links", Some(VIEWER))
            .json(&body)
            .send()
            .unwrap(),
        403,
    );
    // an editor writes but does not refill pools
    assert_eq!(app.post_json("/api/v1/links", EDITOR, &body).status(), 201);
    problem(
        app.req(Method::POST, "/api/v1/pools/6/refill", Some(EDITOR))
            .send()
            .unwrap(),
        403,
    );
    assert_eq!(
        app.req(Method::POST, "/api/v1/pools/6/refill?count=10", Some(ADMIN))
            .send()
            .unwrap()
            .status(),
        200
    );
    // a key restricted to `sports`
    let sports = json!({"url": "https://example.com/s", "space": "sports"});
    assert_eq!(
        app.post_json("/api/v1/links", SPORTS, &sports).status(),
        201
    );
    problem(app.post_json("/api/v1/links", SPORTS, &body), 403);
    let other = app.create(json!({"url": "https://example.com/o", "code": "other"}));
    assert_eq!(other["space"], "default");
    problem(
        app.req(Method::GET, "/api/v1/links/other", Some(SPORTS))
            .send()
            .unwrap(),
        403,
    );
    problem(
        app.req(Method::DELETE, "/api/v1/links/other", Some(SPORTS))
            .send()
            .unwrap(),
        403,
    );
    problem(
        app.req(Method::GET, "/api/v1/links?space=default", Some(SPORTS))
            .send()
            .unwrap(),
        403,
    );
    let listed: Value = app
        .req(Method::GET, "/api/v1/links", Some(SPORTS))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert!(listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l["space"] == "sports"));
    // redirects and health need no key
    assert_eq!(app.get("/other").status(), 302);
    assert_eq!(app.get("/healthz").status(), 200);
}

#[test]
fn generated_admin_key_when_none_configured() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = \"{}\"\n",
            dir.path().join("data").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_vshortlink"))
        .arg("--config")
        .arg(&config)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let key_path = dir.path().join("data/admin.key");
    for _ in 0..300 {
        if key_path.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    let key = std::fs::read_to_string(&key_path).unwrap();
    assert!(key.trim().len() >= 32);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&key_path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn patch_and_delete_take_effect_on_the_next_redirect_even_when_cached() {
    let app = TestApp::start();
    let link = app.create(json!({"url": "https://example.com/old", "code": "cached"}));
    assert_eq!(link["code"], "cached");
    for _ in 0..3 {
        assert_eq!(
            app.get("/cached").headers()["location"],
            "https://example.com/old"
        );
    }
    app.req(Method::PATCH, "/api/v1/links/cached", Some(EDITOR))
        .json(&json!({"url": "https://example.com/new"}))
        .send()
        .unwrap();
    assert_eq!(
        app.get("/cached").headers()["location"],
        "https://example.com/new"
    );
    app.req(Method::DELETE, "/api/v1/links/cached", Some(EDITOR))
        .send()
        .unwrap();
    let gone = app.get("/cached");
    assert_eq!(gone.status(), 410);
    assert!(gone.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let json_gone = app
        .client
        .get(app.url("/cached"))
        .header("accept", "application/json")
        .send()
        .unwrap();
    assert_eq!(problem(json_gone, 410)["code"], "gone");
    // a deleted link's code stays taken
    problem(
        app.post_json(
            "/api/v1/links",
            ADMIN,
            &json!({"url": "https://e.com/", "code": "cached"}),
        ),
        409,
    );
    // unknown codes and bad syntax: 404 page, or problem+json on request
    assert_eq!(app.get("/neverwas").status(), 404);
    assert_eq!(app.get("/bad.code!").status(), 404);
    assert_eq!(app.get("/a/b/c").status(), 404);
    let json_missing = app
        .client
        .get(app.url("/neverwas"))
        .header("accept", "application/json")
        .send()
        .unwrap();
    problem(json_missing, 404);
}

#[test]
fn a_short_ttl_stops_the_redirect_at_expiry() {
    let app = TestApp::start();
    let link = app.create(json!({"url": "https://example.com/brief", "ttl": 1}));
    let code = link["code"].as_str().unwrap();
    assert_eq!(app.get(&format!("/{code}")).status(), 302, "cached now");
    app.advance(Duration::from_millis(1100));
    assert_eq!(app.get(&format!("/{code}")).status(), 410);
}

#[test]
fn sixty_four_concurrent_creates_get_distinct_codes_and_survive_restart() {
    let mut app = TestApp::binary();
    let codes: Vec<(String, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..64)
            .map(|i| {
                let app = &app;
                s.spawn(move || {
                    let url = format!("https://example.com/concurrent/{i}");
                    let link = app.create(json!({"url": url, "length": 5}));
                    (link["code"].as_str().unwrap().to_string(), url)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let distinct: HashSet<_> = codes.iter().map(|(c, _)| c).collect();
    assert_eq!(distinct.len(), 64);

    app.restart();
    for (code, url) in &codes {
        let r = app.get(&format!("/{code}"));
        assert_eq!(r.status(), 302);
        assert_eq!(r.headers()["location"], url.as_str());
    }
    // and after a crash
    app.kill9();
    app.restart();
    assert_eq!(app.link_total(), 64);
}

#[test]
fn sigterm_exits_zero() {
    let mut app = TestApp::binary();
    app.create(json!({"url": "https://example.com/bye"}));
    let status = app.terminate();
    assert!(status.success(), "{status:?}");
}

#[test]
fn environment_overrides_and_redirect_status() {
    let app = TestApp::start_with("", &[("VSL_SERVER__REDIRECT_STATUS", "308")]);
    app.create(json!({"url": "https://example.com/p", "code": "perm"}));
    let r = app.get("/perm");
    assert_eq!(r.status(), 308);
    assert_eq!(r.headers()["location"], "https://example.com/p");
}

#[test]
fn a_bad_config_stops_start_up_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[server]\nredirect_status = 200\n",
            vec![],
            "server.redirect_status",
        ),
        (
            "[storage]\ndurability = \"sometimes\"\n",
            vec![],
            "durability",
        ),
        ("[tiers.6]\nttl = \"forever\"\n", vec![], "ttl"),
        ("", vec![("VSL_CACHE__CAPACITY", "lots")], "capacity"),
        ("[server]\nlisten = \"nowhere\"\n", vec![], "listen"),
        ("[visits]\nip = \"partial\"\n", vec![], "ip"),
        ("[visits]\nretention = \"often\"\n", vec![], "retention"),
    ];
    let data = dir.path().join("data");
    let geo = format!(
        "[storage]\npath = \"{}\"\n[visits]\ngeo_db = \"{}\"\n",
        data.display(),
        dir.path().join("no-such.mmdb").display()
    );
    let cases = cases
        .into_iter()
        .chain([(geo.as_str(), vec![], "visits.geo_db")]);
    for (toml, env, key) in cases {
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, toml).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_vshortlink"))
            .arg("--config")
            .arg(&path)
            .envs(env)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.to_lowercase().contains(key), "{toml}: {stderr}");
    }
    let missing = Command::new(env!("CARGO_BIN_EXE_vshortlink"))
        .args(["--config", "/nonexistent/vsl.toml"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
}

#[test]
fn healthcheck_command_and_storage_path_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("elsewhere");
    let app = TestApp::start_sled("", &[("VSL_STORAGE__PATH", data.to_str().unwrap())]);
    app.create(json!({"url": "https://example.com/env", "code": "env-path"}));
    assert!(
        data.join("db").exists(),
        "VSL_STORAGE__PATH wins over the file"
    );
    let ok = Command::new(env!("CARGO_BIN_EXE_vshortlink"))
        .arg("--config")
        .arg(app.config_path())
        .arg("healthcheck")
        .env("VSL_SERVER__LISTEN", app.addr.to_string())
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let down = Command::new(env!("CARGO_BIN_EXE_vshortlink"))
        .args(["healthcheck"])
        .env("VSL_SERVER__LISTEN", "127.0.0.1:1")
        .output()
        .unwrap();
    assert!(!down.status.success());
}

#[test]
fn wrong_methods_are_problems() {
    let app = TestApp::start();
    // POST /{code} is a protected link's password form: another method is not allowed.
    let p = problem(app.req(Method::PUT, "/somecode", None).send().unwrap(), 405);
    assert_eq!(p["code"], "method_not_allowed");
    problem(
        app.req(Method::PUT, "/api/v1/links", Some(ADMIN))
            .send()
            .unwrap(),
        405,
    );
    problem(
        app.req(Method::GET, "/api/v1/nothing-here", Some(ADMIN))
            .send()
            .unwrap(),
        404,
    );
    // paths that do not decode are unknown codes, not plain-text 400s
    assert_eq!(app.get("/%FF").status(), 404);
    problem(
        app.req(Method::GET, "/api/v1/links/%C3", Some(ADMIN))
            .send()
            .unwrap(),
        404,
    );
}

#[test]
fn maintenance_endpoint_expires_recycles_and_is_idempotent() {
    let app = TestApp::start_with(
        "[lifecycle]\nrecycle_after = \"1s\"\n[tiers.5]\ncooldown = \"1h\"\n",
        &[],
    );
    problem(
        app.req(Method::POST, "/api/v1/maintenance/run", Some(EDITOR))
            .send()
            .unwrap(),
        403,
    );
    let a = app.create(json!({"url": "https://example.com/m1", "ttl": 1, "length": 5}));
    app.create(json!({"url": "https://example.com/m2", "ttl": 1}));
    app.create(json!({"url": "https://example.com/m3"}));
    app.advance(Duration::from_millis(1100));
    let run = |app: &TestApp| -> Value {
        let r = app
            .req(Method::POST, "/api/v1/maintenance/run", Some(ADMIN))
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
        r.json().unwrap()
    };
    let first = run(&app);
    assert_eq!(first["expired"], 2, "{first}");
    assert!(first["took_ms"].is_u64() && first["visits_pruned"].is_u64());
    let second = run(&app);
    assert_eq!(
        (second["expired"].as_u64(), second["recycled"].as_u64()),
        (Some(0), Some(0))
    );
    app.advance(Duration::from_millis(1100));
    let third = run(&app);
    assert_eq!(third["recycled"], 1, "length 5 recycles: {third}");
    assert_eq!(third["retired"], 1, "length 6 does not: {third}");
    let code = a["code"].as_str().unwrap();
    assert_eq!(
        app.get(&format!("/{code}")).status(),
        404,
        "archived: the code is free"
    );
    problem(
        app.req(Method::GET, &format!("/api/v1/links/{code}"), Some(ADMIN))
            .send()
            .unwrap(),
        404,
    );
    let pools: Value = app
        .req(Method::GET, "/api/v1/pools", Some(ADMIN))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let five = pools["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["length"] == 5)
        .unwrap()
        .clone();
    assert_eq!(five["cooling"], 1, "{five}");
    assert_eq!(five["recycled_total"], 1);
    assert_eq!(run(&app)["recycled"], 0);
}
