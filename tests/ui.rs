//! The web pages against the real binary, as a browser without script sees them: sign-in and
//! sessions, role and space enforcement on forged posts, form tokens, escaping of hostile
//! input, both languages, the QR endpoint, security headers and static assets.

mod common;

use std::time::{Duration, Instant};

use common::pages::{csrf_of, location, PageClient};
use common::{TestApp, ADMIN, EDITOR, SPORTS, VIEWER};
use serde_json::json;

fn anonymous_app() -> TestApp {
    TestApp::start_with("", &[("VSL_AUTH__ANONYMOUS_CREATE", "true")])
}

fn count_links(app: &TestApp) -> usize {
    app.link_total()
}

#[test]
fn home_asks_to_sign_in_when_anonymous_creates_are_off() {
    let app = TestApp::start();
    let page = PageClient::new(&app);
    let html = page.html("/", 200);
    assert!(html.contains("Sign in to shorten"), "{html}");
    assert!(
        !html.contains("name=\"url\""),
        "no form without a way to create"
    );
    let response = page.post_form("/", &[("mode", "one"), ("url", "https://example.com/a")]);
    assert_eq!(response.status(), 401);
    assert_eq!(count_links(&app), 0, "a refused create writes nothing");
}

#[test]
fn anonymous_visitor_shortens_from_the_home_page() {
    let app = anonymous_app();
    let page = PageClient::new(&app);
    let html = page.html("/", 200);
    assert!(html.contains("name=\"url\"") && !html.contains("name=\"key\""));
    let response = page.post_form("/", &[("mode", "one"), ("url", "https://example.com/a")]);
    assert_eq!(response.status(), 201);
    let html = response.text().unwrap();
    assert!(html.contains("Your short link is ready"));
    assert!(html.contains("<svg"), "the QR code is on the page");
    assert!(
        html.contains("http:&#x2f;&#x2f;sl.test&#x2f;"),
        "the short URL is shown"
    );
    assert_eq!(count_links(&app), 1);
    // The same URL again: the existing link, no new one.
    let again = page.post_form("/", &[("mode", "one"), ("url", "https://example.com/a")]);
    assert_eq!(again.status(), 200);
    assert!(again.text().unwrap().contains("already has a short link"));
    assert_eq!(count_links(&app), 1);
    // Anonymous visitors create in the default space only.
    let other = page.post_form(
        "/",
        &[
            ("mode", "one"),
            ("url", "https://example.com/b"),
            ("space", "sports"),
        ],
    );
    assert_eq!(other.status(), 401);
    assert_eq!(count_links(&app), 1);
}

#[test]
fn form_errors_are_shown_beside_their_field_and_nothing_is_written() {
    let app = TestApp::start();
    let page = PageClient::signed_in(&app, EDITOR);
    /// Form fields, the status, the id of the error beside the field, words of the error.
    type Case<'a> = (&'a [(&'a str, &'a str)], u16, &'a str, &'a str);
    let cases: &[Case] = &[
        (
            &[("url", "javascript:alert(1)")],
            400,
            "url-error",
            "cannot be shortened",
        ),
        (&[("url", "")], 400, "url-error", "Enter the long URL"),
        (
            &[("url", "https://example.com/x"), ("code", "bad code!")],
            400,
            "code-error",
            "custom code is 1 to 16",
        ),
        (
            &[("url", "https://example.com/x"), ("length", "2")],
            400,
            "length-error",
            "not available",
        ),
        (
            &[
                ("url", "https://example.com/x"),
                ("validity", "date"),
                ("until", "2001-01-01"),
            ],
            400,
            "until-error",
            "must be a date in the future",
        ),
        (
            &[("url", "https://example.com/x"), ("validity", "sometimes")],
            400,
            "validity-error",
            "Choose a validity",
        ),
    ];
    for (fields, status, id, text) in cases {
        let mut all = vec![("mode", "one")];
        all.extend_from_slice(fields);
        let response = page.post_form("/", &all);
        assert_eq!(response.status(), *status, "{fields:?}");
        let html = response.text().unwrap();
        assert!(html.contains(&format!("id=\"{id}\"")), "{fields:?}: {html}");
        assert!(html.contains(text), "{fields:?}");
    }
    let taken = json!({ "url": "https://example.com/t", "code": "taken1" });
    assert_eq!(app.post_json("/api/v1/links", EDITOR, &taken).status(), 201);
    let response = page.post_form(
        "/",
        &[
            ("mode", "one"),
            ("url", "https://example.com/u"),
            ("code", "taken1"),
        ],
    );
    assert_eq!(response.status(), 409);
    assert!(response.text().unwrap().contains("already taken"));
    assert_eq!(count_links(&app), 1, "no failed form wrote a link");
}

#[test]
fn sign_in_cookie_is_strict_and_http_only_and_sign_out_ends_the_session() {
    let app = TestApp::start();
    let page = PageClient::new(&app);
    let wrong = page.post_form("/ui/login", &[("key", "not-a-key"), ("next", "/ui/links")]);
    assert_eq!(wrong.status(), 401);
    assert!(wrong.text().unwrap().contains("This key is not known"));

    let response = page.post_form("/ui/login", &[("key", ADMIN), ("next", "//evil.example/x")]);
    assert_eq!(response.status(), 303);
    assert_eq!(location(&response), "/", "no redirect to another host");
    let cookie = response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .find(|c| c.starts_with("vsl_session="))
        .expect("a session cookie");
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/", "Max-Age=604800"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain http base URL: no Secure");
    assert_eq!(page.get("/ui/links").status(), 200);

    let out = page.post_form("/ui/logout", &[]);
    assert_eq!(out.status(), 303);
    let after = page.get("/ui/links");
    assert_eq!(after.status(), 303, "signed out");
    assert_eq!(location(&after), "/ui/login?next=%2Fui%2Flinks");
}

/// `login_per_ip`: past the quota every attempt from the address is refused, the right key
/// too, with the page's message and `Retry-After`; nothing is signed in.
#[test]
fn sign_in_attempts_are_rate_limited_per_address() {
    let app = TestApp::start_with("[limits.rates]\nlogin_per_ip = \"3/m\"\n", &[]);
    let page = PageClient::new(&app);
    for _ in 0..3 {
        let wrong = page.post_form("/ui/login", &[("key", "not-a-key")]);
        assert_eq!(wrong.status(), 401);
    }
    let refused = page.post_form("/ui/login", &[("key", ADMIN)]);
    assert_eq!(
        refused.status(),
        429,
        "the right key is refused past the quota"
    );
    let retry: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "Retry-After {retry}");
    assert!(refused
        .headers()
        .get_all("set-cookie")
        .iter()
        .all(|c| !c.to_str().unwrap().starts_with("vsl_session=")));
    assert!(refused
        .text()
        .unwrap()
        .contains("Too many sign-in attempts"));
    assert_eq!(page.get("/ui/links").status(), 303, "not signed in");
    let metrics = app.get("/metrics").text().unwrap();
    assert!(
        metrics.contains("vsl_rate_limited_total{limit=\"login_per_ip\"} 1"),
        "{metrics}"
    );
}

#[test]
fn secure_cookie_on_an_https_base_url() {
    let app = TestApp::start_with("", &[("VSL_SERVER__BASE_URL", "https://sl.example")]);
    let page = PageClient::new(&app);
    let response = page.post_form("/ui/login", &[("key", ADMIN)]);
    let cookie = response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .find(|c| c.starts_with("vsl_session="))
        .expect("a session cookie");
    assert!(cookie.contains("; Secure"), "{cookie}");
}

#[test]
fn pages_need_a_session() {
    let app = TestApp::start();
    let page = PageClient::new(&app);
    for path in [
        "/ui/links",
        "/ui/dashboard",
        "/ui/links/abc123",
        "/ui/links/abc123/visits.csv",
    ] {
        let response = page.get(path);
        assert_eq!(response.status(), 303, "{path}");
        assert!(location(&response).starts_with("/ui/login?next="), "{path}");
    }
    assert_eq!(page.get("/ui/links/abc123/qr").status(), 401);
}

#[test]
fn forms_without_the_right_token_or_from_another_origin_are_refused() {
    let app = TestApp::start();
    let page = PageClient::signed_in(&app, EDITOR);
    let no_token = page.post_raw("/", &[("mode", "one"), ("url", "https://example.com/a")]);
    assert_eq!(no_token.status(), 403);
    assert!(no_token
        .text()
        .unwrap()
        .contains("form expired or came from another site"));
    let wrong = page.post_raw(
        "/",
        &[
            ("csrf", &"0".repeat(64)),
            ("mode", "one"),
            ("url", "https://example.com/a"),
        ],
    );
    assert_eq!(wrong.status(), 403);
    let token = page.csrf("/");
    let cross = page
        .client
        .post(app.url("/"))
        .header("Origin", "https://evil.example")
        .form(&[
            ("csrf", token.as_str()),
            ("mode", "one"),
            ("url", "https://example.com/a"),
        ])
        .send()
        .unwrap();
    assert_eq!(cross.status(), 403, "the Origin names another site");
    assert_eq!(count_links(&app), 0);
    let same = page
        .client
        .post(app.url("/"))
        .header("Origin", format!("http://{}", app.addr))
        .form(&[
            ("csrf", token.as_str()),
            ("mode", "one"),
            ("url", "https://example.com/a"),
        ])
        .send()
        .unwrap();
    assert_eq!(same.status(), 201, "same origin with the token");
}

#[test]
fn viewers_see_no_changing_controls_and_forged_posts_are_refused() {
    let app = TestApp::start();
    let link = app.create(json!({ "url": "https://example.com/v", "title": "kept" }));
    let code = link["code"].as_str().unwrap();
    let viewer = PageClient::signed_in(&app, VIEWER);
    let list = viewer.html("/ui/links", 200);
    assert!(list.contains(code));
    assert!(!list.contains("/delete\""), "no delete form for a viewer");
    let detail = viewer.html(&format!("/ui/links/{code}"), 200);
    assert!(!detail.contains("id=\"edit\""), "no edit form for a viewer");
    assert!(!detail.contains("Delete this link"));

    let edit = viewer.post_form(&format!("/ui/links/{code}/edit"), &[("title", "hacked")]);
    assert_eq!(edit.status(), 403);
    let delete = viewer.post_form(&format!("/ui/links/{code}/delete"), &[]);
    assert_eq!(delete.status(), 403);
    let create = viewer.post_form("/", &[("mode", "one"), ("url", "https://example.com/w")]);
    assert_eq!(create.status(), 403);
    let refill = viewer.post_form("/ui/pools/6/refill", &[]);
    assert_eq!(refill.status(), 403);

    let after: serde_json::Value = app.api_get(&format!("/api/v1/links/{code}"), VIEWER);
    assert_eq!(after["title"], "kept");
    assert_eq!(after["status"], "active");
    assert_eq!(count_links(&app), 1);
}

#[test]
fn a_space_limited_key_sees_and_touches_only_its_space() {
    let app = TestApp::start();
    let sports = app.create(json!({ "url": "https://example.com/s", "space": "sports" }));
    let other = app.create(json!({ "url": "https://example.com/o" }));
    let (sports, other) = (
        sports["code"].as_str().unwrap().to_string(),
        other["code"].as_str().unwrap().to_string(),
    );
    let page = PageClient::signed_in(&app, SPORTS);
    let list = page.html("/ui/links", 200);
    assert!(list.contains(&sports) && !list.contains(&other));
    assert_eq!(page.get(&format!("/ui/links/{other}")).status(), 403);
    let delete = page.post_form(&format!("/ui/links/{other}/delete"), &[]);
    assert_eq!(delete.status(), 403);
    let home = page.html("/", 200);
    assert!(
        home.contains("<select id=\"space\" name=\"space\"><option>sports</option></select>"),
        "spaces are a menu"
    );
}

#[test]
fn hostile_titles_and_urls_render_as_text_everywhere() {
    let app = TestApp::start();
    let page = PageClient::signed_in(&app, EDITOR);
    let hostile = "<script>alert(1)</script>";
    let response = page.post_form(
        "/",
        &[
            ("mode", "one"),
            ("url", "https://example.com/\"><script>alert(2)</script>"),
            ("title", hostile),
            ("tags", "<b>bold</b>"),
        ],
    );
    assert_eq!(response.status(), 201);
    let result = response.text().unwrap();
    let marker = "id=\"short\" class=\"sr-only\" value=\"http:&#x2f;&#x2f;sl.test&#x2f;";
    let start = result.find(marker).expect("the short URL") + marker.len();
    let hostile_code = result[start..].split('"').next().unwrap().to_string();
    let list = page.html("/ui/links", 200);
    let detail = page.html(&format!("/ui/links/{hostile_code}"), 200);
    for html in [&result, &list, &detail] {
        assert!(!html.contains("<script>alert"), "raw script in a page");
        assert!(!html.contains("<b>bold</b>"));
    }
    assert!(
        list.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;"),
        "the title is text"
    );
    assert!(
        detail.contains("&lt;b&gt;bold&lt;&#x2f;b&gt;"),
        "the tag is text"
    );
}

#[test]
fn editors_edit_and_delete_through_the_pages() {
    let app = TestApp::start();
    let link = app.create(json!({ "url": "https://example.com/e", "title": "old" }));
    let code = link["code"].as_str().unwrap().to_string();
    let page = PageClient::signed_in(&app, EDITOR);
    let detail = page.html(&format!("/ui/links/{code}"), 200);
    assert!(detail.contains("id=\"edit\"") && detail.contains("Delete this link"));

    let saved = page.post_form(
        &format!("/ui/links/{code}/edit"),
        &[
            ("url", "https://example.com/e2"),
            ("title", "new title"),
            ("tags", "x, y"),
            ("validity", "permanent"),
        ],
    );
    assert_eq!(saved.status(), 303);
    assert_eq!(location(&saved), format!("/ui/links/{code}?notice=saved"));
    let shown = page.html(&location(&saved), 200);
    assert!(shown.contains("Saved.") && shown.contains("new title"));
    let api: serde_json::Value = app.api_get(&format!("/api/v1/links/{code}"), EDITOR);
    assert_eq!(api["title"], "new title");
    assert_eq!(api["url"], "https://example.com/e2");
    assert_eq!(api["tags"], json!(["x", "y"]));
    assert_eq!(api["expires_at"], serde_json::Value::Null);

    let bad = page.post_form(&format!("/ui/links/{code}/edit"), &[("url", "ftp://x")]);
    assert_eq!(bad.status(), 400);
    assert!(bad.text().unwrap().contains("id=\"url-error\""));

    let deleted = page.post_form(&format!("/ui/links/{code}/delete"), &[]);
    assert_eq!(deleted.status(), 303);
    assert_eq!(location(&deleted), "/ui/links?notice=deleted");
    assert_eq!(app.get(&format!("/{code}")).status(), 410);
    let again = page.post_form(&format!("/ui/links/{code}/delete"), &[]);
    assert_eq!(again.status(), 404);
}

#[test]
fn many_at_once_reports_each_line_and_offers_a_csv() {
    let app = TestApp::start();
    let page = PageClient::signed_in(&app, EDITOR);
    let urls = "https://example.com/1\nnot a url\n\nhttps://example.com/3\nhttps://example.com/1\n";
    let response = page.post_form("/", &[("mode", "many"), ("urls", urls), ("tags", "bulk")]);
    assert_eq!(response.status(), 200);
    let html = response.text().unwrap();
    assert!(
        html.contains("2 created, 1 already existed, 1 failed."),
        "{html}"
    );
    assert!(html.contains("class=\"failed\""));
    let csv_path = html
        .split("href=\"")
        .find_map(|s| {
            s.strip_prefix("&#x2f;ui&#x2f;batch&#x2f;")
                .or(s.strip_prefix("/ui/batch/"))
        })
        .and_then(|s| s.split('"').next())
        .map(|id| format!("/ui/batch/{id}"))
        .expect("a CSV link");
    let csv = page.get(&csv_path);
    assert_eq!(csv.status(), 200);
    assert!(csv.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/csv"));
    let text = csv.text().unwrap();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 4);
    assert_eq!(&rows[1][0], "2", "line numbers count the pasted lines");
    assert!(!rows[1][5].is_empty(), "the failure is named");
    // Lines 1 and 5 are the same URL: one of them made the link, the other found it.
    let mut flags = [rows[0][4].to_string(), rows[3][4].to_string()];
    flags.sort();
    assert_eq!(flags, ["false", "true"], "line 5 repeats line 1");
    assert_eq!(count_links(&app), 2);

    let too_many: String = (0..1001)
        .map(|i| format!("https://example.com/{i}\n"))
        .collect();
    let refused = page.post_form("/", &[("mode", "many"), ("urls", &too_many)]);
    assert_eq!(refused.status(), 400);
    assert!(refused.text().unwrap().contains("at most 1,000 URLs"));
    assert_eq!(count_links(&app), 2);
    assert_eq!(page.get("/ui/batch/0123456789abcdef").status(), 404);
}

#[test]
fn links_are_searched_filtered_and_paged_newest_first() {
    let app = TestApp::start();
    for (i, title) in ["alpha one", "beta", "Alpha two", "gamma"]
        .iter()
        .enumerate()
    {
        app.create(
            json!({ "url": format!("https://example.com/{i}"), "title": title, "tags": ["t"] }),
        );
    }
    app.create(json!({ "url": "https://alpha.example/x", "code": "custom08" }));
    let page = PageClient::signed_in(&app, ADMIN);
    let html = page.html("/ui/links?q=ALPHA", 200);
    assert_eq!(
        html.matches("class=\"code\"").count(),
        3,
        "title and URL matches"
    );
    let two = html.find("Alpha two").unwrap();
    let one = html.find("alpha one").unwrap();
    assert!(two < one, "newest first");
    let api: serde_json::Value = app.api_get("/api/v1/links?q=alpha", ADMIN);
    assert_eq!(api["items"].as_array().unwrap().len(), 3);
    let by_length = page.html("/ui/links?length=8", 200);
    assert_eq!(by_length.matches("class=\"code\"").count(), 1);
    let none = page.html("/ui/links?q=nothing-matches", 200);
    assert!(none.contains("No link matches"));
    let first = page.html("/ui/links?status=active", 200);
    assert_eq!(first.matches("class=\"code\"").count(), 5);
}

#[test]
fn pages_speak_english_and_chinese() {
    let app = TestApp::start();
    let page = PageClient::new(&app);
    let zh = page
        .client
        .get(app.url("/ui/login"))
        .header("Accept-Language", "zh-CN,zh;q=0.9,en;q=0.8")
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(zh.contains("<html lang=\"zh-CN\">") && zh.contains("API 密钥"));
    let en = page.html("/ui/login", 200);
    assert!(en.contains("<html lang=\"en\">") && en.contains("API key"));
    let switched = page.get("/ui/lang?set=zh-CN&back=%2Fui%2Flogin");
    assert_eq!(switched.status(), 303);
    assert_eq!(location(&switched), "/ui/login");
    let remembered = page.html("/ui/login", 200);
    assert!(
        remembered.contains("<html lang=\"zh-CN\">"),
        "the cookie wins"
    );
    let evil = page.get("/ui/lang?set=en&back=https://evil.example/");
    assert_eq!(location(&evil), "/");

    let signed = PageClient::signed_in(&app, ADMIN);
    signed.get("/ui/lang?set=zh-CN&back=%2F");
    for path in ["/", "/ui/links", "/ui/dashboard"] {
        let html = signed.html(path, 200);
        assert!(html.contains("<html lang=\"zh-CN\">"), "{path}");
        assert!(html.contains("短链接"), "{path}");
    }
    let gone = app
        .client
        .get(app.url("/nosuch1"))
        .header("Accept-Language", "zh")
        .send()
        .unwrap();
    assert_eq!(gone.status(), 404);
    let text = gone.text().unwrap();
    assert!(text.contains("lang=\"zh-CN\"") && text.contains("链接不存在"));
}

#[test]
fn qr_codes_of_short_urls() {
    let app = TestApp::start();
    let code = app.create(json!({ "url": "https://example.com/q" }))["code"]
        .as_str()
        .unwrap()
        .to_string();
    let get = |query: &str, key: Option<&str>| {
        app.req(
            reqwest::Method::GET,
            &format!("/api/v1/links/{code}/qr{query}"),
            key,
        )
        .send()
        .unwrap()
    };
    let svg = get("", Some(VIEWER));
    assert_eq!(svg.status(), 200);
    assert_eq!(svg.headers()["content-type"], "image/svg+xml");
    assert!(svg.headers()["cache-control"]
        .to_str()
        .unwrap()
        .contains("max-age"));
    assert!(svg.text().unwrap().starts_with("<svg"));
    let png = get("?format=png&size=128", Some(VIEWER));
    assert_eq!(png.status(), 200);
    assert_eq!(png.headers()["content-type"], "image/png");
    let bytes = png.bytes().unwrap();
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes.to_vec()));
    let reader = decoder.read_info().unwrap();
    assert_eq!((reader.info().width, reader.info().height), (128, 128));
    let default = get("?format=png", Some(VIEWER));
    let reader = png::Decoder::new(std::io::Cursor::new(default.bytes().unwrap().to_vec()))
        .read_info()
        .unwrap();
    assert_eq!(reader.info().width, 256);
    for (query, field) in [
        ("?format=gif", "format"),
        ("?format=png&size=10", "size"),
        ("?size=abc", "size"),
    ] {
        let p = common::problem(get(query, Some(VIEWER)), 400);
        assert_eq!(p["field"], field, "{query}");
    }
    assert_eq!(get("", None).status(), 401);
    assert_eq!(
        app.req(
            reqwest::Method::GET,
            "/api/v1/links/zzzzzz/qr",
            Some(VIEWER)
        )
        .send()
        .unwrap()
        .status(),
        404
    );
}

#[test]
fn pages_carry_security_headers_and_assets_are_cached() {
    let app = TestApp::start();
    let page = PageClient::new(&app);
    for path in ["/", "/ui/login", "/nosuch1"] {
        let response = page.get(path);
        let h = response.headers();
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"),
            "{path}"
        );
        assert!(!csp.contains("unsafe-inline"));
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert!(h.contains_key("referrer-policy"), "{path}");
    }
    let html = page.html("/", 200);
    assert!(
        !html.contains("<script>") && !html.contains("style="),
        "nothing inline"
    );
    assert!(
        !html.contains("http://") || html.contains("http:&#x2f;&#x2f;sl.test"),
        "no other host"
    );
    let css_path = html
        .split("href=\"")
        .find(|s| s.starts_with("&#x2f;static&#x2f;app.css"))
        .and_then(|s| s.split('"').next())
        .unwrap()
        .replace("&#x2f;", "/");
    let css = page.get(&css_path);
    assert_eq!(css.status(), 200);
    assert!(css.headers()["cache-control"]
        .to_str()
        .unwrap()
        .contains("immutable"));
    let etag = css.headers()["etag"].to_str().unwrap().to_string();
    let again = page
        .client
        .get(app.url(&css_path))
        .header("If-None-Match", &etag)
        .send()
        .unwrap();
    assert_eq!(again.status(), 304);
    assert_eq!(page.get("/static/config.toml").status(), 404);
    assert_eq!(page.get("/static/..%2Fconfig.toml").status(), 404);
}

#[test]
fn a_link_page_shows_its_visits() {
    let app = TestApp::start();
    let code = app.create(json!({ "url": "https://example.com/s" }))["code"]
        .as_str()
        .unwrap()
        .to_string();
    let ua = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36";
    for _ in 0..3 {
        let r = app
            .client
            .get(app.url(&format!("/{code}")))
            .header("User-Agent", ua)
            .header("Referer", "https://news.example/item")
            .send()
            .unwrap();
        assert_eq!(r.status(), 302);
    }
    let page = PageClient::signed_in(&app, VIEWER);
    let deadline = Instant::now() + Duration::from_secs(10);
    let html = loop {
        let html = page.html(&format!("/ui/links/{code}?range=24h"), 200);
        if html.contains("<dd>3</dd>") || Instant::now() > deadline {
            break html;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(html.contains("<dd>3</dd>"), "three visits counted");
    assert!(
        html.contains("news.example"),
        "the referer in the top list and the table"
    );
    assert!(html.contains("Chrome"));
    assert!(html.contains("<div class=\"chart\""), "the chart");
    assert!(html.contains("Show as a table"), "the chart's numbers");
    for range in ["7d", "30d", "1y"] {
        page.html(&format!("/ui/links/{code}?range={range}"), 200);
    }
    let custom = page.html(
        &format!("/ui/links/{code}?range=custom&from=2026-01-01&to=2025-01-01"),
        200,
    );
    assert!(custom.contains("must be before its end"));
    let csv = page.get(&format!("/ui/links/{code}/visits.csv"));
    assert_eq!(csv.status(), 200);
    assert_eq!(csv.text().unwrap().lines().count(), 4);
    assert_eq!(page.get("/ui/links/nosuch9").status(), 404);
}

#[test]
fn dashboard_shows_counts_and_pools_and_admins_refill() {
    let app = TestApp::start();
    app.create(json!({ "url": "https://example.com/d" }));
    let admin = PageClient::signed_in(&app, ADMIN);
    let html = admin.html("/ui/dashboard", 200);
    assert!(html.contains("Code pools") && html.contains("Refill"));
    assert_eq!(html.matches("<div class=\"chart\"").count(), 2);
    let before: serde_json::Value = app.api_get("/api/v1/pools", ADMIN);
    let refill = admin.post_form("/ui/pools/5/refill", &[]);
    assert_eq!(refill.status(), 303);
    assert!(admin
        .html(&location(&refill), 200)
        .contains("The pool was refilled."));
    let after: serde_json::Value = app.api_get("/api/v1/pools", ADMIN);
    let generated = |v: &serde_json::Value| {
        v["pools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["length"] == 5)
            .unwrap()["generated_total"]
            .as_u64()
            .unwrap()
    };
    assert!(generated(&after) > generated(&before));
    let editor = PageClient::signed_in(&app, EDITOR);
    let html = editor.html("/ui/dashboard", 200);
    assert!(!html.contains("Refill"), "only admins refill");
    assert_eq!(editor.post_form("/ui/pools/5/refill", &[]).status(), 403);
    assert_eq!(csrf_of(&html).len(), 64);
}

/// The options form's fields for a save, with the form's own section and token added by the
/// page client.
fn options_post<'a>(
    page: &PageClient,
    code: &str,
    fields: &[(&'a str, &'a str)],
) -> reqwest::blocking::Response {
    let mut all = vec![("section", "options")];
    all.extend_from_slice(fields);
    page.post_form(&format!("/ui/links/{code}/edit"), &all)
}

#[test]
fn one_save_changes_the_address_title_tags_and_options_together() {
    let app = TestApp::start();
    let code = app.create(json!({ "url": "https://example.com/one" }))["code"]
        .as_str()
        .unwrap()
        .to_string();
    let page = PageClient::signed_in(&app, EDITOR);
    let html = page.html(&format!("/ui/links/{code}"), 200);
    // One editor, one visible Save.
    assert_eq!(
        html.matches("class=\"primary\" name=\"action\" value=\"save\"")
            .count(),
        1
    );
    assert!(html.contains("id=\"e-url\"") && html.contains("id=\"o-max_visits\""));
    // A refused address: beside its field, nothing saved, every value kept.
    let refused = options_post(
        &page,
        &code,
        &[
            ("action", "save"),
            ("url", "javascript:alert(1)"),
            ("title", "Kept title"),
            ("tags", ""),
            ("validity", "keep"),
            ("max_visits", "7"),
        ],
    );
    assert_eq!(refused.status(), 400);
    let html = refused.text().unwrap();
    assert!(
        html.contains("id=\"url-error\"") && html.contains("value=\"Kept title\""),
        "{html}"
    );
    let link = app.api_get(&format!("/api/v1/links/{code}"), EDITOR);
    assert!(link["max_visits"].is_null() && link["title"].is_null());
    // Saved together.
    let saved = options_post(
        &page,
        &code,
        &[
            ("action", "save"),
            ("url", "https://example.com/two"),
            ("title", "Both at once"),
            ("tags", "a, b"),
            ("validity", "keep"),
            ("max_visits", "7"),
        ],
    );
    assert_eq!(saved.status(), 303, "back to the page");
    let link = app.api_get(&format!("/api/v1/links/{code}"), EDITOR);
    assert_eq!(link["url"], "https://example.com/two");
    assert_eq!(link["title"], "Both at once");
    assert_eq!(link["tags"], json!(["a", "b"]));
    assert_eq!(link["max_visits"], 7);
}

#[test]
fn a_bad_target_weight_is_shown_beside_its_field_and_nothing_is_saved() {
    let app = TestApp::start();
    let code = app.create(json!({ "url": "https://example.com/w" }))["code"]
        .as_str()
        .unwrap()
        .to_string();
    let page = PageClient::signed_in(&app, EDITOR);
    let before: serde_json::Value = app.api_get(&format!("/api/v1/links/{code}"), EDITOR);
    for weight in ["5000", "0", "heavy"] {
        let response = options_post(
            &page,
            &code,
            &[
                ("action", "save"),
                ("max_visits", "10"),
                ("rule.0.os.ios", "1"),
                ("rule.0.url", "https://ios.example/"),
                ("target.0.url", "https://a.example/"),
                ("target.0.weight", "2"),
                ("target.1.url", "https://b.example/"),
                ("target.1.weight", weight),
                ("rotation", "round_robin"),
            ],
        );
        assert_eq!(response.status(), 400, "weight {weight}");
        let html = response.text().unwrap();
        let error = "id=\"target.1.weight-error\"";
        assert!(html.contains(error), "weight {weight}: {html}");
        let at = html.find(error).unwrap();
        assert!(
            html[at..].contains("A weight is a whole number from 1 to 1000"),
            "the weight's words"
        );
        // Beside its field: the input that names this error comes just before it.
        let input = html
            .find("name=\"target.1.weight\"")
            .expect("the weight input");
        assert!(input < at && html[input..at].contains("aria-invalid=\"true\""));
        assert!(!html[input..at].contains("name=\"target.1.max_visits\""));
        // Every value kept as typed.
        assert!(html.contains(&format!("value=\"{weight}\"")));
        assert!(html.contains("value=\"https:&#x2f;&#x2f;b.example&#x2f;\""));
        assert!(html.contains("name=\"rule.0.os.ios\" value=\"1\" checked"));
        assert!(html.contains("<option value=\"round_robin\" selected>"));
    }
    let after: serde_json::Value = app.api_get(&format!("/api/v1/links/{code}"), EDITOR);
    assert_eq!(after, before, "nothing was saved");
    assert!(
        after.get("targets").is_none_or(|t| t == &json!([])),
        "{after}"
    );
    assert!(after["max_visits"].is_null(), "{after}");
}

#[test]
fn options_are_edited_row_by_row_without_script_and_saved_in_the_apis_shape() {
    let app = TestApp::start();
    let code = app.create(json!({ "url": "https://example.com/o" }))["code"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/ui/links/{code}");
    let link = || -> serde_json::Value { app.api_get(&format!("/api/v1/links/{code}"), EDITOR) };
    let page = PageClient::signed_in(&app, EDITOR);
    let html = page.html(&path, 200);
    assert!(html.contains("id=\"options\"") && html.contains("No password"));
    // (The blank row the script copies, in a `<template>`, is always there.)
    let rows = |html: &str, name: &str| html.matches(&format!("name=\"{name}\"")).count() - 1;
    assert_eq!(rows(&html, "rule.0.url"), 0, "no rule yet");

    // A row button shows the form again with the change, and saves nothing.
    let added = options_post(&page, &code, &[("action", "add_rule"), ("max_visits", "5")]);
    assert_eq!(added.status(), 200);
    let html = added.text().unwrap();
    assert_eq!(rows(&html, "rule.0.url"), 1);
    assert!(html.contains("value=\"5\""));
    assert!(html.contains("Not saved yet."));
    assert!(link()["max_visits"].is_null());
    let two = [
        ("rule.0.os.android", "1"),
        ("rule.0.url", "https://android.example/"),
        ("rule.1.language", "zh, en-GB"),
        ("rule.1.url", "https://zh.example/"),
        ("target.0.url", "https://a.example/"),
        ("target.0.weight", "1"),
    ];
    let mut fields = vec![("action", "up_rule.1")];
    fields.extend_from_slice(&two);
    let html = options_post(&page, &code, &fields).text().unwrap();
    let zh = html
        .find("value=\"https:&#x2f;&#x2f;zh.example&#x2f;\"")
        .unwrap();
    let android = html
        .find("value=\"https:&#x2f;&#x2f;android.example&#x2f;\"")
        .unwrap();
    assert!(zh < android, "the second rule moved up");
    assert!(html.contains("name=\"rule.0.language\" type=\"text\" value=\"zh, en-GB\""));
    assert!(html.contains("name=\"rule.1.os.android\" value=\"1\" checked"));
    fields[0] = ("action", "remove_target.0");
    let html = options_post(&page, &code, &fields).text().unwrap();
    assert_eq!(rows(&html, "target.0.url"), 0);
    assert!(html.contains("<p class=\"empty-rows muted\">No targets"));
    fields[0] = ("action", "add_target");
    let html = options_post(&page, &code, &fields).text().unwrap();
    assert!(html.contains("name=\"target.1.weight\"") && !html.contains("name=\"target.2.url\""));

    // Saving sends every option as the API takes them; blank rows are left out.
    let saved = options_post(
        &page,
        &code,
        &[
            ("action", "save"),
            ("password", "open sesame"),
            ("max_visits", "5"),
            ("valid_from", "2020-01-02T03:04"),
            ("fallback_url", "https://example.com/after"),
            ("rule.0.language", "zh, en-GB"),
            ("rule.0.query", "utm=mail, ref"),
            ("rule.0.after", "2020-01-01T00:00"),
            ("rule.0.url", "https://zh.example/"),
            ("rule.1.url", ""),
            ("rule.2.os.android", "1"),
            ("rule.2.device.tablet", "1"),
            ("rule.2.url", "https://android.example/"),
            ("target.0.url", "https://a.example/"),
            ("target.0.weight", "2"),
            ("target.0.max_visits", "100"),
            ("target.1.url", ""),
            ("target.1.weight", "1"),
            ("rotation", "failover"),
        ],
    );
    assert_eq!(saved.status(), 303);
    assert_eq!(
        location(&saved),
        format!("/ui/links/{code}?notice=saved#options")
    );
    let api = link();
    assert_eq!(
        api["rules"],
        json!([
            {
                "if": {
                    "language": ["zh", "en-gb"],
                    "query": { "utm": "mail", "ref": "*" },
                    "after": "2020-01-01T00:00:00Z",
                },
                "url": "https://zh.example/",
            },
            { "if": { "device": ["tablet"], "os": ["android"] }, "url": "https://android.example/" },
        ])
    );
    assert_eq!(api["targets"].as_array().map(Vec::len), Some(1), "{api}");
    assert_eq!(api["targets"][0]["weight"], 2);
    assert_eq!(api["targets"][0]["max_visits"], 100);
    assert_eq!(api["rotation"], "failover");
    assert_eq!(api["password_protected"], true);
    assert_eq!(api["max_visits"], 5);
    assert_eq!(api["valid_from"], "2020-01-02T03:04:00Z");
    assert_eq!(api["fallback_url"], "https://example.com/after");
    let html = page.html(&format!("{path}?notice=saved"), 200);
    assert!(html.contains("Saved.") && html.contains("Visitors must enter the password"));
    assert!(!html.contains("argon2"), "never the hash");
    assert!(html.contains("name=\"password\" type=\"password\" value=\"\""));
    assert!(html.contains("value=\"zh, en-gb\"") && html.contains("value=\"ref=*, utm=mail\""));
    assert!(
        html.contains("value=\"2020-01-02T03:04\"") && html.contains("value=\"2020-01-01T00:00\"")
    );
    assert!(html.contains("5 of 5 left") && html.contains("100 of 100 left"));
    assert!(html.contains("<option value=\"failover\" selected>"));
    let list = page.html("/ui/links", 200);
    for marker in [
        "password",
        "visit cap",
        "start time",
        "end page",
        "rules",
        "targets",
    ] {
        assert!(list.contains(&format!("\">{marker}</span>")), "{marker}");
    }

    // What only the form can tell fails at once, beside each field; nothing is saved.
    let bad = options_post(
        &page,
        &code,
        &[
            ("action", "save"),
            ("valid_from", "soon"),
            ("rule.0.country", "DE"),
            ("rule.1.url", "https://x.example/"),
            ("rule.2.query", "=x"),
            ("rule.2.url", "https://y.example/"),
        ],
    );
    assert_eq!(bad.status(), 400);
    let html = bad.text().unwrap();
    for id in ["valid_from", "rule.0.url", "rule.1.if", "rule.2.query"] {
        assert!(html.contains(&format!("id=\"{id}-error\"")), "{id}");
    }
    assert!(html.contains("A rule needs at least one condition."));
    // What the service refuses is shown beside the input it names, the rows as numbered.
    let refused = options_post(
        &page,
        &code,
        &[
            ("action", "save"),
            ("rule.0.url", ""),
            ("rule.1.language", "zh, x"),
            ("rule.1.url", "https://zh.example/"),
        ],
    );
    assert_eq!(refused.status(), 400);
    let html = refused.text().unwrap();
    assert!(html.contains("id=\"rule.1.language-error\""), "{html}");
    assert!(html.contains("Languages are tags such as"));
    assert_eq!(link(), api, "nothing was saved");

    // Removing the password (the rest as sent: no rules, no targets any more).
    let removed = options_post(
        &page,
        &code,
        &[("action", "save"), ("password_remove", "1")],
    );
    assert_eq!(removed.status(), 303);
    let api = link();
    assert_eq!(api["password_protected"], false);
    assert!(
        api["max_visits"].is_null() && api["valid_from"].is_null(),
        "{api}"
    );
    assert_eq!(
        api["url"], "https://example.com/o",
        "targets set without `url` left the link's own"
    );
    assert!(page.html(&path, 200).contains("No password"));

    // In Chinese.
    page.get("/ui/lang?set=zh-CN&back=%2F");
    let html = page.html(&path, 200);
    assert!(html.contains("高级选项") && html.contains("定向规则") && html.contains("添加规则"));

    // A viewer sees the options but cannot change them.
    app.req(
        reqwest::Method::PATCH,
        &format!("/api/v1/links/{code}"),
        Some(EDITOR),
    )
    .json(&json!({ "max_visits": 9 }))
    .send()
    .unwrap();
    let viewer = PageClient::signed_in(&app, VIEWER);
    let html = viewer.html(&path, 200);
    assert!(html.contains("Your key can see these options but not change them."));
    assert!(html.contains("<fieldset class=\"bare\" disabled>") && !html.contains("Save options"));
    let forged = options_post(&viewer, &code, &[("action", "save"), ("max_visits", "1")]);
    assert_eq!(forged.status(), 403);
    assert_eq!(link()["max_visits"], 9);
}

#[test]
fn a_link_ended_by_its_visit_cap_says_so() {
    let app = TestApp::start();
    let code = app.create(json!({ "url": "https://example.com/c", "max_visits": 1 }))["code"]
        .as_str()
        .unwrap()
        .to_string();
    let page = PageClient::signed_in(&app, VIEWER);
    let html = page.html(&format!("/ui/links/{code}"), 200);
    assert!(html.contains("1 of 1 left"));
    assert!(!html.contains("reached its visit cap"));
    assert_eq!(app.get(&format!("/{code}")).status(), 302);
    assert_eq!(app.get(&format!("/{code}")).status(), 410);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let html = page.html(&format!("/ui/links/{code}"), 200);
        if html.contains("This link ended because it reached its visit cap.") {
            assert!(html.contains("0 of 1 left"));
            break;
        }
        assert!(Instant::now() < deadline, "{html}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_link_page_lists_its_leads_and_their_csv_for_editors_only() {
    let app = TestApp::start();
    let code = app.create(json!({
        "url": "https://example.com/offer",
        "form": {
            "fields": [
                { "name": "phone", "label": "Phone number", "type": "tel", "required": true },
                { "name": "city", "label": "City", "type": "text" },
            ],
            "consent": "I agree to be called.",
            "retention": "90d",
        },
    }))["code"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/ui/links/{code}");
    let csv_path = format!("/ui/links/{code}/leads.csv");

    // Before any lead: the section says so.
    let admin = PageClient::signed_in(&app, ADMIN);
    let html = admin.html(&path, 200);
    assert!(html.contains("id=\"leads\"") && html.contains("No leads yet."));

    // A visitor fills the form.
    let visitor = PageClient::new(&app);
    let sent = visitor.post_raw(
        &format!("/{code}"),
        &[
            ("form", "1"),
            ("phone", "+86 138-0013-8000"),
            ("city", "=HYPERLINK(\"x\")"),
            ("consent", "yes"),
        ],
    );
    assert_eq!(sent.status(), 302);

    let html = admin.html(&path, 200);
    assert!(html.contains("id=\"leads\""), "{html}");
    let leads = &html[html.find("id=\"leads\"").unwrap()..];
    assert!(leads.contains("<span class=\"count\">1</span>"));
    assert!(leads.contains(">Phone number</th>") && leads.contains(">City</th>"));
    assert!(leads.contains("+8613800138000"));
    assert!(leads.contains("title=\"I agree to be called.\""));
    assert!(leads.contains("deleted 90 days after it arrives"));
    assert!(leads.contains(&format!("href=\"/ui/links/{code}/leads.csv\"")));
    let csv = admin.get(&csv_path);
    assert_eq!(csv.status(), 200);
    assert!(csv.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/csv"));
    assert!(csv.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .contains(&format!("leads-{code}.csv")));
    let body = csv.text().unwrap();
    let mut lines = body.lines();
    assert_eq!(lines.next(), Some("id,at,phone,city,consent"));
    let row = lines.next().expect("one lead");
    assert!(
        row.contains(",+8613800138000,") || row.contains(",'+8613800138000,"),
        "{row}"
    );
    assert!(
        row.contains("'=HYPERLINK"),
        "formula cells neutralised: {row}"
    );

    // An editor of another space, and a viewer, see no leads and may not download them.
    for key in [VIEWER, SPORTS] {
        let page = PageClient::signed_in(&app, key);
        let html = page.get(&path).text().unwrap();
        assert!(!html.contains("id=\"leads\""), "{key}");
        assert!(!html.contains("8613800138000"), "{key}");
        assert_eq!(page.get(&csv_path).status(), 403, "{key}");
    }
    // Without a session: to the sign-in page.
    let anonymous = PageClient::new(&app).get(&csv_path);
    assert_eq!(anonymous.status(), 303);
    assert!(location(&anonymous).starts_with("/ui/login?next="));

    // In Chinese.
    admin.get("/ui/lang?set=zh-CN&back=%2F");
    let html = admin.html(&path, 200);
    assert!(html.contains("线索") && html.contains("下载 CSV") && html.contains("已同意"));
}

#[test]
fn the_visitor_form_in_app_page_and_preview_are_edited_without_script() {
    let app = TestApp::start();
    let code = app.create(json!({ "url": "https://example.com/g" }))["code"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/ui/links/{code}");
    let link = || -> serde_json::Value { app.api_get(&format!("/api/v1/links/{code}"), EDITOR) };
    let page = PageClient::signed_in(&app, EDITOR);
    let html = page.html(&path, 200);
    assert!(html.contains("No form: visitors go straight on."));
    assert!(
        html.contains("<option value=\"\" selected>Server default (Redirect as usual)</option>")
    );
    assert!(
        !html.contains("id=\"leads\""),
        "no form, no leads: no section"
    );

    // "Add a field" shows the form again with a blank row, unsaved.
    let added = options_post(
        &page,
        &code,
        &[("action", "add_field"), ("og_title", "Kept")],
    );
    assert_eq!(added.status(), 200);
    let html = added.text().unwrap();
    assert!(html.contains("name=\"field.0.label\"") && html.contains("value=\"Kept\""));
    assert!(link()["form"].is_null());

    // A field name the service refuses: beside its input (the rows as the form numbers them),
    // every value kept, nothing saved.
    let refused = options_post(
        &page,
        &code,
        &[
            ("action", "save"),
            ("field.0.label", ""),
            ("field.0.name", ""),
            ("field.1.label", "Phone"),
            ("field.1.name", "Phone Number"),
            ("field.1.type", "tel"),
            ("field.1.required", "1"),
            ("form_consent", "I agree."),
            ("in_app", "interstitial"),
            ("og_title", "A title"),
        ],
    );
    assert_eq!(refused.status(), 400);
    let html = refused.text().unwrap();
    let error = "id=\"field.1.name-error\"";
    assert!(html.contains(error), "{html}");
    let at = html.find(error).unwrap();
    let input = html.find("name=\"field.1.name\"").unwrap();
    assert!(input < at && html[input..at].contains("aria-invalid=\"true\""));
    assert!(html[at..].contains("A name is 1 to 32 of a–z"));
    assert!(html.contains("value=\"Phone Number\"") && html.contains(">I agree.</textarea>"));
    assert!(html.contains("name=\"field.1.required\" value=\"1\" checked"));
    assert!(html.contains("<option value=\"interstitial\" selected>"));
    assert!(link()["form"].is_null() && link()["in_app"].is_null());

    // A bad image address and an unknown in-app choice, each beside its own input.
    for (fields, id) in [
        (vec![("og_image", "ftp://example.com/x.png")], "og_image"),
        (vec![("in_app", "sometimes")], "in_app"),
        (
            vec![
                ("field.0.label", "A"),
                ("field.0.name", "a"),
                ("form_retention", "10s"),
            ],
            "form_retention",
        ),
        (vec![("form_consent", "Yes")], "form_fields"),
    ] {
        let mut all = vec![("action", "save")];
        all.extend(fields);
        let response = options_post(&page, &code, &all);
        assert_eq!(response.status(), 400, "{id}");
        assert!(
            response
                .text()
                .unwrap()
                .contains(&format!("id=\"{id}-error\"")),
            "{id}"
        );
    }

    // Saved in the API's shape.
    let saved = options_post(
        &page,
        &code,
        &[
            ("action", "save"),
            ("field.0.label", "Phone"),
            ("field.0.name", "phone"),
            ("field.0.type", "tel"),
            ("field.0.required", "1"),
            ("field.1.label", ""),
            ("field.1.name", ""),
            ("field.2.label", "Email"),
            ("field.2.name", "email"),
            ("field.2.type", "email"),
            ("form_consent", "I agree."),
            ("form_retention", "30d"),
            ("in_app", "interstitial"),
            ("og_title", "A title"),
            ("og_description", "Words"),
            ("og_image", "https://example.com/i.png"),
        ],
    );
    assert_eq!(saved.status(), 303);
    let api = link();
    assert_eq!(
        api["form"],
        json!({
            "fields": [
                { "name": "phone", "label": "Phone", "type": "tel", "required": true },
                { "name": "email", "label": "Email", "type": "email", "required": false },
            ],
            "consent": "I agree.",
            "retention": "30d",
        })
    );
    assert_eq!(api["in_app"], "interstitial");
    assert_eq!(
        (&api["og_title"], &api["og_description"], &api["og_image"]),
        (
            &json!("A title"),
            &json!("Words"),
            &json!("https://example.com/i.png")
        )
    );
    // Shown again as saved, with the markers in the list and on the page.
    let html = page.html(&path, 200);
    assert!(html.contains("name=\"field.1.name\" type=\"text\" value=\"email\""));
    assert!(html.contains(">I agree.</textarea>") && html.contains("value=\"30d\""));
    assert!(html.contains("<option value=\"interstitial\" selected>"));
    assert!(
        html.contains("id=\"leads\""),
        "an editor sees the leads section"
    );
    let list = page.html("/ui/links", 200);
    for marker in ["in-app browsers", "form", "social preview"] {
        assert!(list.contains(&format!("\">{marker}</span>")), "{marker}");
        assert!(html.contains(&format!("\">{marker}</span>")), "{marker}");
    }

    // Clearing everything removes them all.
    let cleared = options_post(
        &page,
        &code,
        &[
            ("action", "save"),
            ("field.0.label", ""),
            ("field.0.name", ""),
            ("field.0.type", "tel"),
            ("field.0.required", "1"),
            ("form_retention", "30d"),
        ],
    );
    assert_eq!(cleared.status(), 303);
    let api = link();
    assert!(api["form"].is_null() && api["in_app"].is_null(), "{api}");
    assert!(
        api["og_title"].is_null() && api["og_image"].is_null(),
        "{api}"
    );

    // In Chinese.
    page.get("/ui/lang?set=zh-CN&back=%2F");
    let html = page.html(&path, 200);
    assert!(
        html.contains("访问前填写表单")
            && html.contains("应用内浏览器")
            && html.contains("分享预览")
    );
}

/// A chat-completions scorer on a plain `TcpListener` thread: every request, whatever its
/// path, is answered with a spam score of 0.6 ("looks odd"), which flags a link.
fn flagging_scorer() -> std::net::SocketAddr {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the scorer");
    let addr = listener.local_addr().expect("scorer address");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(&stream);
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':') {
                        if name.eq_ignore_ascii_case("content-length") {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                }
                let mut body = vec![0u8; length];
                let _ = reader.read_exact(&mut body);
                let answer = json!({ "choices": [{ "message": {
                    "content": "{\"spam\":0.6,\"reason\":\"looks odd\"}"
                } }] })
                .to_string();
                let mut stream = &stream;
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                );
            });
        }
    });
    addr
}

/// A stand-in browser: writes a small PNG where `--screenshot=` says.
fn fake_browser(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("browser.sh");
    let script = "#!/bin/sh\n\
        for a in \"$@\"; do case \"$a\" in --screenshot=*) out=\"${a#--screenshot=}\";; esac; done\n\
        printf '\\211PNG\\r\\n\\032\\nfake' > \"$out\"\n";
    std::fs::write(&path, script).expect("write the browser");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// The link's reviews as the API lists them, once there are `n` (or after 20 s, whatever).
fn reviews_of(app: &TestApp, code: &str, n: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listed = app.api_get(&format!("/api/v1/links/{code}/reviews"), ADMIN);
        let items = listed["items"].as_array().cloned().unwrap_or_default();
        if items.len() >= n || Instant::now() > deadline {
            return items;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn admins_review_flagged_links_and_block_or_approve_them() {
    let scorer = flagging_scorer();
    let tools = tempfile::tempdir().expect("temp dir");
    let browser = fake_browser(tools.path());
    let app = TestApp::start_with(
        &format!(
            "[review]\nenabled = true\nfetch = false\nallow_private = true\nbrowser = \"{}\"\n\n\
             [review.scorer]\nurl = \"http://{scorer}/v1/chat/completions\"\n",
            browser.display()
        ),
        &[],
    );
    let created = app.create(json!({ "url": format!("http://{scorer}/odd-page") }));
    let code = created["code"].as_str().expect("code").to_string();
    let reviews = reviews_of(&app, &code, 1);
    assert_eq!(reviews.len(), 1, "the create queued a review");
    assert_eq!(reviews[0]["verdict"], "flagged", "{:?}", reviews[0]);
    assert_eq!(reviews[0]["screenshot"], true, "{:?}", reviews[0]);
    let review_id = reviews[0]["id"].as_u64().expect("id");

    // The list: flagged by default, with the review's facts, checks and screenshot.
    let admin = PageClient::signed_in(&app, ADMIN);
    let html = admin.html("/ui/reviews", 200);
    assert!(
        html.contains("href=\"/ui/reviews\" aria-current=\"page\""),
        "the nav item"
    );
    assert!(html.contains(&format!("id=\"r-{code}\"")), "{html}");
    assert!(
        html.contains("looks odd") && html.contains("0.60"),
        "{html}"
    );
    assert!(
        html.contains("Scorer") && html.contains("Screenshot"),
        "each check"
    );
    let shot = format!("/ui/reviews/{code}/{review_id}/screenshot.png");
    assert!(html.contains(&format!("src=\"{shot}\"")), "{html}");
    assert!(html.contains(">Approve<") && html.contains(">Block<"));
    assert!(!html.contains("Reviews are off"));
    let png = admin.get(&shot);
    assert_eq!(png.status(), 200);
    assert_eq!(png.headers()["content-type"], "image/png");
    assert_eq!(png.headers()["cache-control"], "private, max-age=3600");
    assert!(png.bytes().expect("body").starts_with(b"\x89PNG\r\n\x1a\n"));
    for missing in [
        format!("/ui/reviews/{code}/999999/screenshot.png"),
        format!("/ui/reviews/{code}/x/screenshot.png"),
        format!("/ui/reviews/nosuchcode/{review_id}/screenshot.png"),
    ] {
        assert_eq!(admin.get(&missing).status(), 404, "{missing}");
    }
    // Its page shows the verdict, with the buttons for admins.
    let page_html = admin.html(&format!("/ui/links/{code}"), 200);
    assert!(page_html.contains("badge v-flagged") && page_html.contains("looks odd"));
    assert!(page_html.contains(">Block<"));

    // Block: back to the list with a notice; the link stops redirecting at once.
    let blocked = admin.post_form(
        &format!("/ui/reviews/{code}"),
        &[
            ("verdict", "blocked"),
            ("back", "/ui/reviews?verdict=flagged"),
        ],
    );
    assert_eq!(blocked.status(), 303);
    let to = location(&blocked);
    assert!(
        to.starts_with("/ui/reviews?verdict=flagged&notice=blocked"),
        "{to}"
    );
    let html = admin.html(&to, 200);
    assert!(html.contains("Blocked: the link no longer redirects."));
    assert!(
        !html.contains(&format!("id=\"r-{code}\"")),
        "no longer flagged"
    );
    assert_eq!(app.get(&format!("/{code}")).status(), 403);
    let html = admin.html("/ui/reviews?verdict=blocked", 200);
    assert!(html.contains(&format!("id=\"r-{code}\"")) && html.contains("verdict · admin"));
    assert!(admin
        .html("/ui/links", 200)
        .contains("<span class=\"badge blocked\">blocked</span>"));
    assert!(admin
        .html(&format!("/ui/links/{code}"), 200)
        .contains("badge v-blocked"));

    // Approve from the link's page: back there, and it redirects again.
    let approved = admin.post_form(
        &format!("/ui/reviews/{code}"),
        &[
            ("verdict", "ok"),
            ("back", &format!("/ui/links/{code}#review")),
        ],
    );
    assert_eq!(approved.status(), 303);
    let to = location(&approved);
    assert!(
        to.starts_with(&format!("/ui/links/{code}?notice=approved")) && to.ends_with("#review"),
        "{to}"
    );
    let latest = &reviews_of(&app, &code, 3)[0];
    assert_eq!(latest["verdict"], "ok");
    assert_eq!(latest["trigger"], "override");
    assert_eq!(latest["by"], "admin");
    assert!(app.get(&format!("/{code}")).status().is_redirection());
    assert!(admin
        .html("/ui/reviews?verdict=ok", 200)
        .contains(&format!("id=\"r-{code}\"")));
    // Only ok and blocked are an admin's verdicts.
    let wrong = admin.post_form(&format!("/ui/reviews/{code}"), &[("verdict", "flagged")]);
    assert_eq!(wrong.status(), 400);

    // Editors and viewers: no nav item, a 403 page, refused posts and screenshots.
    for key in [EDITOR, VIEWER] {
        let other = PageClient::signed_in(&app, key);
        let html = other.html("/ui/links", 200);
        assert!(!html.contains("href=\"/ui/reviews\""), "{key}");
        assert!(other.html("/ui/reviews", 403).contains("Not allowed"));
        assert_eq!(other.get(&shot).status(), 403, "{key}");
        let post = other.post_form(&format!("/ui/reviews/{code}"), &[("verdict", "blocked")]);
        assert_eq!(post.status(), 403, "{key}");
        assert!(!other
            .html(&format!("/ui/links/{code}"), 200)
            .contains(">Block<"));
    }
    assert!(
        app.get(&format!("/{code}")).status().is_redirection(),
        "nothing changed"
    );
    // No session: the sign-in page.
    let anonymous = PageClient::new(&app);
    for path in ["/ui/reviews", shot.as_str()] {
        let response = anonymous.get(path);
        assert_eq!(response.status(), 303, "{path}");
        assert!(location(&response).starts_with("/ui/login?next="));
    }
}

#[test]
fn the_reviews_page_says_when_reviews_are_off_and_overrides_still_work() {
    let app = TestApp::start();
    let created = app.create(json!({ "url": "https://example.com/spammy" }));
    let code = created["code"].as_str().expect("code").to_string();
    let admin = PageClient::signed_in(&app, ADMIN);
    let html = admin.html("/ui/reviews", 200);
    assert!(html.contains("Reviews are off") && html.contains("No flagged links"));
    let response = app.post_json(
        &format!("/api/v1/links/{code}/review"),
        ADMIN,
        &json!({ "verdict": "blocked" }),
    );
    assert_eq!(response.status(), 200);
    let html = admin.html("/ui/reviews?verdict=blocked", 200);
    // No screenshot: no empty box for one.
    assert!(html.contains(&format!("id=\"r-{code}\"")) && !html.contains("class=\"shot\""));
    assert!(
        html.contains("admin&#x27;s verdict"),
        "the trigger in words"
    );
    admin.get("/ui/lang?set=zh-CN&back=%2F");
    let html = admin.html("/ui/reviews?verdict=blocked", 200);
    assert!(html.contains("目标网址审核") && html.contains("拦截") && html.contains("已拦截"));
    // An unknown verdict shows the flagged tab; a bad cursor the first page.
    let html = admin.html("/ui/reviews?verdict=nonsense&after=x", 200);
    assert!(html.contains("没有待复核的链接"));
}
