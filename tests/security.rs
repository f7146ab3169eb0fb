//! The holes an attack run on 127.0.0.1 found, one test each, through
//! the real binary and CLI: imported ids that made later creates overwrite links, the open
//! redirect of `back`/`next`, unlimited key guessing, formula cells in CSV, imports that
//! skipped the API's rules, loops by another name, a 500 for a bad header value, a header limit
//! that was not the configured one, the leftmost `X-Forwarded-For`, statistics across spaces,
//! and the smaller ones (unknown fields, content types, `nosniff`, the batch CSV's URL, HEAD).
//!
//! Every server here honours `TEST_STORE=postgres`, so CI runs them on both backends.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::cli::{text, vsl};
use common::pages::{location, PageClient};
use common::{problem, TestApp, ADMIN, EDITOR, SPORTS};
use reqwest::Method;
use serde_json::{json, Value};

/// One exported link line.
fn link_line(id: u64, code: &str, url: &str) -> String {
    json!({
        "type": "link", "id": id, "code": code, "url": url, "space": "default",
        "status": "active", "custom": true, "created_at": "2026-01-01T00:00:00.000Z",
        "updated_at": "2026-01-01T00:00:00.000Z", "expires_at": null, "title": null, "tags": []
    })
    .to_string()
}

/// Stops the app, imports `lines` with the CLI, starts it again; the import's report.
fn import_stopped(app: &mut TestApp, name: &str, lines: &str, format: &[&str]) -> String {
    let stopped = app.terminate();
    assert!(stopped.success(), "{stopped:?}");
    let file = app.dir.path().join(name);
    std::fs::write(&file, lines).expect("write import file");
    let mut args = vec!["import"];
    args.extend_from_slice(format);
    let path = file.to_str().expect("path").to_string();
    args.push(&path);
    let out = vsl(&app.config_path(), &args);
    app.respawn();
    let report = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(report.contains("read "), "the import did not run: {report}");
    report
}

fn link_of(app: &TestApp, code: &str) -> Value {
    app.api_get(&format!("/api/v1/links/{code}"), ADMIN)
}

/// Finding 1: an imported id at the top of the id space (or inside the range the next creates
/// take) never lets a create take an existing link's id.
#[test]
fn imported_ids_never_let_a_create_overwrite_a_link() {
    let mut app = TestApp::start();
    let lines = [
        link_line(u64::MAX, "first", "https://example.com/first"),
        link_line(1, "one", "https://example.com/one"),
        link_line(1000, "ok1", "https://example.com/ok1"),
        link_line(1001, "ok2", "https://example.com/ok2"),
    ]
    .join("\n");
    import_stopped(&mut app, "ids.jsonl", &lines, &[]);
    // YOURLS and generic CSV rows too: their records must survive the creates after them.
    let csv = "keyword,url,title,timestamp,ip,clicks\nyy1,https://example.com/yy1,Y,2024-01-02 03:04:05,127.0.0.1,0\n";
    import_stopped(&mut app, "yourls.csv", csv, &["--format", "yourls-csv"]);
    let generic = "long_url,short_code\nhttps://example.com/g1,g1\n";
    import_stopped(&mut app, "generic.csv", generic, &["--format", "csv"]);

    let imported = ["first", "one", "ok1", "ok2", "yy1", "g1"];
    let mut ids: Vec<u64> = imported
        .iter()
        .map(|code| link_of(&app, code)["id"].as_u64().expect("id"))
        .collect();
    assert!(
        ids.iter().all(|id| *id < (1 << 53)),
        "an id past 2^53 - 1 was kept: {ids:?}"
    );
    for i in 0..40 {
        let created = app.create(json!({"url": format!("https://example.com/new/{i}")}));
        ids.push(created["id"].as_u64().expect("id"));
    }
    let mut distinct = ids.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), ids.len(), "two links share an id: {ids:?}");
    for code in imported {
        let link = link_of(&app, code);
        let url = format!("https://example.com/{code}");
        assert_eq!(link["url"], url, "{code} was replaced: {link}");
        let r = app.get(&format!("/{code}"));
        assert_eq!(r.status(), 302);
        assert_eq!(r.headers()["location"], url.as_str());
    }
    // A PATCH of an imported code changes that link, and its redirect follows.
    let patched = app
        .req(Method::PATCH, "/api/v1/links/ok1", Some(ADMIN))
        .json(&json!({"url": "https://example.com/ok1-moved"}))
        .send()
        .expect("patch");
    assert_eq!(patched.status(), 200);
    assert_eq!(
        app.get("/ok1").headers()["location"],
        "https://example.com/ok1-moved"
    );
    if app.database.is_none() {
        assert!(app.terminate().success());
        let out = vsl(&app.config_path(), &["check"]);
        assert!(out.status.success(), "{}", text(&out.stdout));
    }
}

/// Findings 2 and 7: `back` and `next` send only to plain paths of this site, and a value no
/// header can hold is no 500.
#[test]
fn local_redirects_go_only_to_plain_paths_here() {
    let app = TestApp::start();
    for (back, expected) in [
        ("/%09/evil.example/", "/"),
        ("/%0a/x", "/"),
        ("/%0d%0aSet-Cookie:%20a=b", "/"),
        ("//evil.example/", "/"),
        ("/%5Cevil.example/", "/"),
        ("https://evil.example/", "/"),
        ("/ui/links?q=a", "/ui/links?q=a"),
    ] {
        let r = app.get(&format!("/ui/lang?set=zh-CN&back={back}"));
        assert_eq!(r.status(), 303, "back={back}");
        assert_eq!(location(&r), expected, "back={back}");
    }
    // Signing in with a hostile `next`: home, never elsewhere, never a 500.
    for next in ["/\t/evil.example/", "/\n/x", "//evil.example", "/\\evil"] {
        let page = PageClient::new(&app);
        let r = page.post_form("/ui/login", &[("key", EDITOR), ("next", next)]);
        assert_eq!(r.status(), 303, "next={next:?}");
        assert_eq!(location(&r), "/", "next={next:?}");
        assert!(r.headers().get("set-cookie").is_some());
    }
    // A wrong key with a hostile `next` sets no session.
    let page = PageClient::new(&app);
    let r = page.post_form("/ui/login", &[("key", "nope"), ("next", "/\n/x")]);
    assert_eq!(r.status(), 401);
    assert!(r
        .headers()
        .get_all("set-cookie")
        .iter()
        .all(|c| !c.to_str().unwrap_or("").starts_with("vsl_session=")));
}

/// Finding 3: failed keys, YOURLS signatures and passwords count per address; past
/// `auth_per_ip` even the right credential is 429.
#[test]
fn key_guessing_is_limited_on_every_surface() {
    let extra = "[[yourls.users]]\nusername = \"joe\"\npassword = \"secret-pass\"\nkey = \"test-admin-key-0001\"\n";
    // The API's keys.
    let app = TestApp::start_with(extra, &[]);
    let mut statuses = Vec::new();
    for i in 0..40 {
        let r = app
            .client
            .get(app.url("/api/v1/links"))
            .header("x-api-key", format!("wrong-{i}"))
            .send()
            .expect("GET");
        statuses.push(r.status().as_u16());
    }
    assert!(statuses[..30].iter().all(|s| *s == 401), "{statuses:?}");
    assert!(statuses[30..].iter().all(|s| *s == 429), "{statuses:?}");
    let right = app
        .client
        .get(app.url("/api/v1/links"))
        .header("x-api-key", ADMIN)
        .send()
        .expect("GET");
    let p = problem(right, 429);
    assert_eq!(p["code"], "rate_limited");
    // YOURLS signatures on another server (its own quota).
    let app = TestApp::start_with(extra, &[]);
    let yourls = |params: &[(&str, &str)]| {
        let mut all = vec![("action", "db-stats"), ("format", "json")];
        all.extend_from_slice(params);
        app.client
            .get(app.url("/yourls-api.php"))
            .query(&all)
            .send()
            .expect("yourls")
    };
    for i in 0..30 {
        let wrong = format!("wrong-{i}");
        assert_eq!(yourls(&[("signature", &wrong)]).status(), 403);
    }
    let past = yourls(&[("signature", "wrong-again")]);
    assert_eq!(past.status(), 429);
    assert!(past.headers().get("retry-after").is_some());
    assert_eq!(yourls(&[("signature", ADMIN)]).status(), 429);
    // Passwords share the quota with signatures.
    assert_eq!(
        yourls(&[("username", "joe"), ("password", "secret-pass")]).status(),
        429
    );
    // A third server: passwords alone.
    let app = TestApp::start_with(extra, &[]);
    let login = |password: &str| {
        app.client
            .get(app.url("/yourls-api.php"))
            .query(&[
                ("action", "db-stats"),
                ("format", "json"),
                ("username", "joe"),
                ("password", password),
            ])
            .send()
            .expect("yourls")
            .status()
            .as_u16()
    };
    assert_eq!(login("secret-pass"), 200);
    let wrong: Vec<u16> = (0..31).map(|i| login(&format!("guess-{i}"))).collect();
    assert_eq!(wrong.last(), Some(&429), "{wrong:?}");
    assert_eq!(login("secret-pass"), 429);
}

/// The visits of a link, once the writer has stored `n`.
fn wait_visits(app: &TestApp, code: &str, n: u64) {
    let started = Instant::now();
    loop {
        let total = link_of(app, code)["visits_total"].as_u64();
        if total == Some(n) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "visits of {code}: {total:?}, not {n}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Finding 4: a visitor's user agent and referer, and a batch's refused lines, reach CSV
/// files as text, never as formulas.
#[test]
fn csv_cells_that_start_a_formula_are_neutralised() {
    let app = TestApp::start();
    let link = app.create(json!({"url": "https://example.com/csv", "code": "csvf"}));
    assert_eq!(link["code"], "csvf");
    let r = app
        .client
        .get(app.url("/csvf"))
        .header("user-agent", "=cmd|' /C calc'!A0")
        .header("referer", "=HYPERLINK(\"https://evil.example\")")
        .send()
        .expect("visit");
    assert_eq!(r.status(), 302);
    wait_visits(&app, "csvf", 1);
    let csv = app
        .req(
            Method::GET,
            "/api/v1/links/csvf/visits?format=csv",
            Some(ADMIN),
        )
        .send()
        .expect("csv")
        .text()
        .expect("body");
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let headers = reader.headers().expect("header").clone();
    let row = reader.records().next().expect("a row").expect("csv");
    let cell = |name: &str| {
        let i = headers.iter().position(|h| h == name).expect(name);
        row[i].to_string()
    };
    assert_eq!(cell("user_agent"), "'=cmd|' /C calc'!A0");
    assert_eq!(cell("referer"), "'=HYPERLINK(\"https://evil.example\")");

    // The batch result echoes a refused line as it came.
    let page = PageClient::signed_in(&app, EDITOR);
    let response = page.post_form(
        "/",
        &[
            ("mode", "many"),
            ("urls", "=1+1\n@SUM(A1)\nhttps://example.com/ok"),
        ],
    );
    assert_eq!(response.status(), 200);
    let html = response.text().expect("page");
    let csv_path = batch_csv_path(&html);
    let csv = page.get(&csv_path).text().expect("csv");
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let urls: Vec<String> = reader
        .records()
        .map(|r| r.expect("row")[1].to_string())
        .collect();
    assert_eq!(urls[0], "'=1+1", "{csv}");
    assert_eq!(urls[1], "'@SUM(A1)", "{csv}");
}

fn batch_csv_path(html: &str) -> String {
    html.split("href=\"")
        .find_map(|s| {
            s.strip_prefix("&#x2f;ui&#x2f;batch&#x2f;")
                .or(s.strip_prefix("/ui/batch/"))
        })
        .and_then(|s| s.split('"').next())
        .map(|id| format!("/ui/batch/{id}"))
        .expect("a CSV link")
}

/// Finding 5: an imported record obeys every rule a create obeys, in every format.
#[test]
fn imports_apply_the_apis_rules() {
    let mut app = TestApp::start();
    let bad = |code: &str, space: &str, title: Option<String>, tags: Vec<String>| {
        let mut line: Value =
            serde_json::from_str(&link_line(0, code, "https://example.com/x")).expect("line");
        line["space"] = json!(space);
        line["title"] = json!(title);
        line["tags"] = json!(tags);
        line.to_string()
    };
    let lines = [
        bad("api", "default", None, vec![]),
        bad("UI", "default", None, vec![]),
        bad("healthz", "default", None, vec![]),
        bad("okspace", "<script>", None, vec![]),
        bad(
            "bigtitle",
            "default",
            Some("t".repeat(2 * 1024 * 1024)),
            vec![],
        ),
        bad(
            "manytags",
            "default",
            None,
            (0..100).map(|i| format!("t{i}")).collect(),
        ),
        link_line(0, "jsurl", "javascript:alert(1)"),
        link_line(0, "fine", "https://example.com/fine"),
    ]
    .join("\n");
    let report = import_stopped(&mut app, "bad.jsonl", &lines, &[]);
    assert!(
        report.contains("created 1") && report.contains("refused 7"),
        "{report}"
    );
    for code in [
        "api", "UI", "healthz", "okspace", "bigtitle", "manytags", "jsurl",
    ] {
        let r = app
            .req(Method::GET, &format!("/api/v1/links/{code}"), Some(ADMIN))
            .send()
            .expect("get");
        assert_eq!(r.status(), 404, "{code} was imported");
    }
    assert_ne!(app.get("/api").status(), 302, "a reserved word redirects");
    assert_eq!(link_of(&app, "fine")["url"], "https://example.com/fine");

    // A code column whose value is a path is no code; a short URL's one segment is.
    let csv = "long_url,short_code\nhttps://example.com/a,../../x\nhttps://example.com/b,https://bit.ly/bly1\n";
    let report = import_stopped(&mut app, "paths.csv", csv, &["--format", "csv"]);
    assert!(report.contains("refused 1"), "{report}");
    let r = app
        .req(Method::GET, "/api/v1/links/x", Some(ADMIN))
        .send()
        .expect("get");
    assert_eq!(r.status(), 404);
    assert_eq!(link_of(&app, "bly1")["url"], "https://example.com/b");
}

/// Finding 6: every name of this server on its port is a loop, however it is spelt.
#[test]
fn links_back_to_this_server_are_refused_by_any_name() {
    let app = TestApp::start();
    let port = app.addr.port();
    for url in [
        format!("http://localhost:{port}/x"),
        format!("http://LOCALHOST.:{port}/x"),
        format!("http://app.localhost:{port}/x"),
        format!("http://0.0.0.0:{port}/x"),
        format!("http://127.0.0.1:{port}/x"),
        format!("http://127.1:{port}/x"),
        format!("http://2130706433:{port}/x"),
        format!("http://[::1]:{port}/x"),
        format!("http://[::]:{port}/x"),
        format!("http://[::ffff:127.0.0.1]:{port}/x"),
        format!("http://sl.test:{port}/x"),
        "http://sl.test/x".to_string(),
    ] {
        let p = problem(
            app.post_json("/api/v1/links", ADMIN, &json!({ "url": url })),
            400,
        );
        assert_eq!(p["code"], "invalid_url", "{url}");
        assert_eq!(p["field"], "url", "{url}");
    }
    // Another port of this machine is another service.
    let other = format!("http://localhost:{}/x", port.wrapping_add(1).max(1));
    let r = app.post_json("/api/v1/links", ADMIN, &json!({ "url": other }));
    assert_eq!(r.status(), 201);
    // YOURLS names it as YOURLS does.
    let r = app
        .client
        .get(app.url("/yourls-api.php"))
        .query(&[
            ("signature", ADMIN),
            ("format", "json"),
            ("action", "shorturl"),
            ("url", &format!("http://[::ffff:127.0.0.1]:{port}/y")),
        ])
        .send()
        .expect("yourls");
    let body: Value = r.json().expect("json");
    assert_eq!(body["code"], "error:noloop", "{body}");
}

/// Sends a raw request head in one write and returns the status line's code.
fn raw_status(app: &TestApp, head: &str) -> u16 {
    let mut stream = TcpStream::connect(app.addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    stream.write_all(head.as_bytes()).expect("write");
    let mut answer = [0u8; 64];
    let n = stream.read(&mut answer).unwrap_or(0);
    let text = String::from_utf8_lossy(&answer[..n]).to_string();
    text.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Finding 8: the configured header limit is the one enforced, whatever the head's size.
#[test]
fn the_header_limit_is_the_configured_one() {
    let app = TestApp::start();
    let head = |bytes: usize| {
        let mut head = String::from("GET /healthz HTTP/1.1\r\nHost: x\r\n");
        let mut i = 0;
        while head.len() + 4 < bytes {
            let room = bytes - head.len() - 4;
            let value = "v".repeat(room.saturating_sub(14).clamp(1, 4000));
            head.push_str(&format!("x-pad-{i:04}: {value}\r\n"));
            i += 1;
        }
        head.push_str("\r\n");
        head
    };
    // The default, 16 KiB.
    assert_eq!(raw_status(&app, &head(15_000)), 200);
    assert_eq!(raw_status(&app, &head(17_000)), 431);
    assert_eq!(raw_status(&app, &head(114_688)), 431);
    // A configured one, larger than the default.
    let app = TestApp::start_with("", &[("VSL_SERVER__MAX_HEADER_BYTES", "65536")]);
    assert_eq!(raw_status(&app, &head(60_000)), 200);
    assert_eq!(raw_status(&app, &head(66_000)), 431);
}

/// Finding 9: behind a trusted proxy, the client is the address the proxy saw, not what the
/// client wrote to the left of it.
#[test]
fn the_client_address_is_what_the_nearest_trusted_proxy_saw() {
    let app = TestApp::start_with(
        "[limits.rates]\ncreate_per_ip = \"20/m\"\nnot_found_per_ip = \"10/s\"\n",
        &[
            ("VSL_SERVER__TRUST_PROXY_HEADERS", "true"),
            ("VSL_AUTH__ANONYMOUS_CREATE", "true"),
        ],
    );
    let mut statuses = Vec::new();
    for i in 0..30 {
        let r = app
            .client
            .post(app.url("/api/v1/links"))
            .header(
                "x-forwarded-for",
                format!("6.6.{}.{}, 203.0.113.5", i / 250, i % 250),
            )
            .json(&json!({"url": format!("https://example.com/anon/{i}")}))
            .send()
            .expect("create");
        statuses.push(r.status().as_u16());
    }
    assert!(statuses[..20].iter().all(|s| *s == 201), "{statuses:?}");
    assert!(statuses[20..].iter().all(|s| *s == 429), "{statuses:?}");
    let mut limited = 0;
    for i in 0..100 {
        let r = app
            .client
            .get(app.url(&format!("/nosuch{i}")))
            .header("x-forwarded-for", format!("7.7.7.{i}, 203.0.113.9"))
            .send()
            .expect("get");
        limited += usize::from(r.status() == 429);
    }
    assert!(limited >= 80, "{limited} of 100 unknown codes were limited");
}

/// Finding 10: a key limited to spaces reads its spaces' counts only.
#[test]
fn statistics_are_scoped_to_the_keys_spaces() {
    let app = TestApp::start();
    app.create(json!({"url": "https://example.com/d1"}));
    app.create(json!({"url": "https://example.com/d2"}));
    app.create(json!({"url": "https://example.com/s1", "space": "sports", "code": "spo1"}));
    assert_eq!(app.get("/spo1").status(), 302);
    wait_visits(&app, "spo1", 1);
    let all = app.api_get("/api/v1/stats", ADMIN);
    assert_eq!(all["links"]["active"], 3, "{all}");
    let mine = app.api_get("/api/v1/stats", SPORTS);
    assert_eq!(mine["links"]["active"], 1, "{mine}");
    assert_eq!(mine["today"]["creates"], 1, "{mine}");
    assert_eq!(mine["today"]["visits"], 1, "{mine}");
    let r = app
        .client
        .get(app.url("/yourls-api.php"))
        .query(&[
            ("signature", SPORTS),
            ("format", "json"),
            ("action", "db-stats"),
        ])
        .send()
        .expect("yourls");
    assert_eq!(r.status(), 200);
    let body: Value = r.json().expect("json");
    assert_eq!(body["db-stats"]["total_links"], 1, "{body}");
    // The dashboard shows the same scoped numbers.
    let tile = |key: &str| {
        let html = PageClient::signed_in(&app, key).html("/ui/dashboard", 200);
        first_tile(&html)
    };
    assert_eq!(tile(SPORTS), Some(1), "the sports key's active links");
    assert_eq!(tile(ADMIN), Some(3), "every active link");
}

/// The number of the dashboard's first tile (active links).
fn first_tile(html: &str) -> Option<u64> {
    let marker = "<span class=\"value\">";
    let rest = &html[html.find(marker)? + marker.len()..];
    rest.split('<').next()?.trim().replace(',', "").parse().ok()
}

/// Finding 11: unknown fields and non-JSON bodies are refused, every answer says `nosniff`,
/// the batch CSV is its browser's only, and `HEAD` is no visit.
#[test]
fn the_smaller_findings() {
    let app = TestApp::start();
    let p = problem(
        app.post_json(
            "/api/v1/links",
            ADMIN,
            &json!({"url": "https://example.com/", "lenght": 4}),
        ),
        400,
    );
    assert_eq!(p["code"], "unknown_field");
    assert_eq!(p["field"], "lenght");
    let batch: Value = app
        .post_json(
            "/api/v1/links/batch",
            ADMIN,
            &json!({"links": [{"url": "https://example.com/b", "tilte": "x"}]}),
        )
        .json()
        .expect("json");
    assert_eq!(batch["results"][0]["error"]["code"], "unknown_field");
    assert_eq!(batch["results"][0]["error"]["field"], "links[0].tilte");
    assert_eq!(app.link_total(), 0, "a refused item wrote nothing");
    let link = app.create(json!({"url": "https://example.com/h", "code": "head1"}));
    let p = problem(
        app.req(Method::PATCH, "/api/v1/links/head1", Some(ADMIN))
            .json(&json!({"titel": "x"}))
            .send()
            .expect("patch"),
        400,
    );
    assert_eq!(p["code"], "unknown_field");
    assert_eq!(p["field"], "titel");
    // A body that is not sent as JSON.
    let r = app
        .req(Method::POST, "/api/v1/links", Some(ADMIN))
        .header("content-type", "text/plain")
        .body(r#"{"url": "https://example.com/plain"}"#)
        .send()
        .expect("post");
    let p = problem(r, 415);
    assert_eq!(p["code"], "unsupported_media_type");
    assert_eq!(app.link_total(), 1);

    // nosniff everywhere: JSON, problems, CSV, YOURLS, redirects, pages.
    for (path, key) in [
        ("/api/v1/links", Some(ADMIN)),
        ("/api/v1/links/nope", Some(ADMIN)),
        ("/api/v1/links/head1/visits?format=csv", Some(ADMIN)),
        ("/yourls-api.php?action=version&format=json", None),
        ("/head1", None),
        ("/nosuchcode", None),
        ("/healthz", None),
        ("/metrics", None),
    ] {
        let r = app.req(Method::GET, path, key).send().expect("get");
        assert_eq!(
            r.headers()
                .get("x-content-type-options")
                .map(|v| v.to_str().unwrap_or("")),
            Some("nosniff"),
            "{path}"
        );
    }

    // HEAD answers like GET but records no visit (the GET above was one).
    for _ in 0..3 {
        let r = app.req(Method::HEAD, "/head1", None).send().expect("head");
        assert_eq!(r.status(), 302);
    }
    assert_eq!(app.get("/head1").status(), 302);
    wait_visits(&app, "head1", 2);
    // The writer stores visits about once a second: two more rounds would show a HEAD.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(link_of(&app, "head1")["visits_total"], 2);
    assert_eq!(link["code"], "head1");

    // The batch CSV is its browser's: another one (no session, or another session) reads
    // nothing from its URL.
    let page = PageClient::signed_in(&app, EDITOR);
    let response = page.post_form("/", &[("mode", "many"), ("urls", "https://example.com/m1")]);
    let csv_path = batch_csv_path(&response.text().expect("page"));
    assert_eq!(page.get(&csv_path).status(), 200);
    assert_eq!(app.get(&csv_path).status(), 404);
    let other = PageClient::signed_in(&app, ADMIN);
    assert_eq!(other.get(&csv_path).status(), 404);
}
