//! Hardening against the real binary: code order, base_url from `listen`, rate
//! limits, blocked hosts, robots.txt and previews, slow and huge clients.

mod common;

use common::{problem, TestApp, ADMIN};
use serde_json::json;

/// Twelve creates on a fresh server: the codes of one batch come out in no particular order.
#[test]
fn random_codes_do_not_come_out_sorted() {
    let app = TestApp::start();
    for length in [5, 6] {
        let codes: Vec<String> = (0..12)
            .map(|i| {
                let link = app.create(json!({
                    "url": format!("https://example.com/order/{length}/{i}"),
                    "length": length,
                }));
                link["code"].as_str().unwrap_or_default().to_string()
            })
            .collect();
        let mut sorted = codes.clone();
        sorted.sort();
        // 12 random draws sorted by chance: 1 in 12! (about 2e-9).
        assert_ne!(codes, sorted, "length {length}: {codes:?}");
        let first: std::collections::HashSet<char> =
            codes.iter().filter_map(|c| c.chars().next()).collect();
        assert!(first.len() > 1, "length {length}: {codes:?}");
    }
    // `step` keeps its designed order.
    let steps: Vec<String> = (0..6)
        .map(|i| {
            let link =
                app.create(json!({"url": format!("https://example.com/step/{i}"), "length": 4}));
            link["code"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    let mut sorted = steps.clone();
    sorted.sort();
    assert_eq!(steps, sorted, "step codes keep their order");
}

/// No `base_url`: short URLs and the loop check use the bound address.
#[test]
fn base_url_is_derived_from_the_bound_address() {
    let app = TestApp::binary_with("", &[("VSL_SERVER__BASE_URL", "")]);
    let base = format!("http://{}", app.addr);
    assert!(
        app.logged(&format!("base_url={base}")),
        "start-up names the base"
    );
    let link = app.create(json!({"url": "https://example.com/b"}));
    let code = link["code"].as_str().unwrap_or_default();
    assert_eq!(link["short_url"], format!("{base}/{code}"));
    // A URL pointing back at this server (on its real port) is refused.
    let body = problem(
        app.post_json(
            "/api/v1/links",
            ADMIN,
            &json!({"url": format!("{base}/{code}")}),
        ),
        400,
    );
    assert_eq!(body["code"], "invalid_url");
    assert_eq!(body["field"], "url");
    // The same host on another port is someone else.
    let other = format!(
        "http://127.0.0.1:{}/x",
        app.addr.port().wrapping_add(1).max(1)
    );
    assert_eq!(
        app.post_json("/api/v1/links", ADMIN, &json!({"url": other}))
            .status(),
        201
    );
}

/// The integer seconds of a `Retry-After` header.
fn retry_after(response: &reqwest::blocking::Response) -> u64 {
    response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// `not_found_per_ip` is on by default (10/s): a burst of unknown codes from one address turns
/// into 429s for that address only; its redirects of real codes keep working.
#[test]
fn unknown_code_bursts_are_rate_limited_per_address() {
    // 10 a minute, not the default 10 a second: on a loaded machine 30 requests in a row can
    // take longer than the default's refill, and the count below would drift.
    let app = TestApp::start_with(
        "[limits.rates]\nnot_found_per_ip = \"10/m\"\n",
        &[("VSL_SERVER__TRUST_PROXY_HEADERS", "true")],
    );
    let link = app.create(json!({"url": "https://example.com/real"}));
    let code = link["code"].as_str().unwrap_or_default().to_string();
    let from = |ip: &str, path: &str, json: bool| {
        let mut req = app.client.get(app.url(path)).header("x-forwarded-for", ip);
        if json {
            req = req.header("accept", "application/json");
        }
        req.send().expect("GET")
    };
    let mut statuses = Vec::new();
    for i in 0..30 {
        statuses.push(
            from("198.51.100.7", &format!("/zz{i:04}"), false)
                .status()
                .as_u16(),
        );
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 404).count(),
        10,
        "{statuses:?}"
    );
    assert!(statuses[10..].iter().all(|s| *s == 429), "{statuses:?}");
    // Browsers get a page, JSON clients a problem; both say when to come back.
    let page = from("198.51.100.7", "/zzpage", false);
    assert_eq!(page.status(), 429);
    let wait = retry_after(&page);
    assert!(wait >= 1);
    // The page says when, in the visitor's language, as Retry-After does.
    let text = page.text().unwrap_or_default();
    assert!(text.contains("<html"));
    let when = if wait == 1 {
        "Try again in a second.".to_string()
    } else {
        format!("Try again in {wait} seconds.")
    };
    assert!(text.contains(&when), "{text}");
    let zh = app
        .client
        .get(app.url("/zzpage-zh"))
        .header("x-forwarded-for", "198.51.100.7")
        .header("accept-language", "zh-CN")
        .send()
        .expect("GET");
    let wait = retry_after(&zh);
    assert!(zh
        .text()
        .unwrap_or_default()
        .contains(&format!("请在 {wait} 秒后再试。")));
    let body = problem(from("198.51.100.7", "/a/b/c", true), 429);
    assert_eq!(body["code"], "rate_limited");
    // Another address is untouched; the limited one still follows real links.
    assert_eq!(from("198.51.100.8", "/zz0000", false).status(), 404);
    assert_eq!(
        from("198.51.100.7", &format!("/{code}"), false).status(),
        302
    );
    assert!(app.metric("vsl_rate_limited_total{limit=\"not_found_per_ip\"}") >= 21.0);
    // The quota refills (one request every 6 s at 10 a minute).
    std::thread::sleep(std::time::Duration::from_millis(6100));
    assert_eq!(from("198.51.100.7", "/zz0000", false).status(), 404);
}

/// `create_per_key`: every create counts, batch items included, and a refused request writes
/// nothing.
#[test]
fn creates_per_key_are_limited_and_refusals_write_nothing() {
    let app = TestApp::start_with("[limits.rates]\ncreate_per_key = \"5/m\"\n", &[]);
    for i in 0..3 {
        app.create(json!({"url": format!("https://example.com/k/{i}")}));
    }
    let before = app.link_total();
    // 3 items with 2 left in the quota: refused whole.
    let batch = app.post_json(
        "/api/v1/links/batch",
        ADMIN,
        &json!({"links": [
            {"url": "https://example.com/b/1"},
            {"url": "https://example.com/b/2"},
            {"url": "https://example.com/b/3"},
        ]}),
    );
    assert_eq!(batch.status(), 429);
    let wait = retry_after(&batch);
    assert!((1..=60).contains(&wait), "Retry-After {wait}");
    assert_eq!(problem(batch, 429)["code"], "rate_limited");
    assert_eq!(app.link_total(), before, "a refused batch writes nothing");
    for i in 3..5 {
        app.create(json!({"url": format!("https://example.com/k/{i}")}));
    }
    let sixth = app.post_json(
        "/api/v1/links",
        ADMIN,
        &json!({"url": "https://example.com/k/6"}),
    );
    assert_eq!(sixth.status(), 429);
    assert!(retry_after(&sixth) >= 1);
    assert_eq!(app.link_total(), before + 2);
    // Another key has its own quota.
    let other = app.post_json(
        "/api/v1/links",
        common::EDITOR,
        &json!({"url": "https://example.com/k/editor"}),
    );
    assert_eq!(other.status(), 201);
    assert!(app.metric("vsl_rate_limited_total{limit=\"create_per_key\"}") >= 2.0);
}

/// `create_per_ip` limits anonymous creates per address; `redirect_per_ip` every redirect.
#[test]
fn anonymous_creates_and_redirects_per_address() {
    let app = TestApp::start_with(
        "[limits.rates]\ncreate_per_ip = \"3/m\"\nredirect_per_ip = \"5/s\"\n",
        &[("VSL_AUTH__ANONYMOUS_CREATE", "true")],
    );
    let anonymous = |i: usize| {
        app.client
            .post(app.url("/api/v1/links"))
            .json(&json!({"url": format!("https://example.com/anon/{i}")}))
            .send()
            .expect("POST")
    };
    let statuses: Vec<u16> = (0..4).map(|i| anonymous(i).status().as_u16()).collect();
    assert_eq!(statuses, [201, 201, 201, 429]);
    // A key is not an address: its creates are not counted against create_per_ip.
    let link = app.create(json!({"url": "https://example.com/keyed"}));
    let code = link["code"].as_str().unwrap_or_default().to_string();
    let redirects: Vec<u16> = (0..7)
        .map(|_| app.get(&format!("/{code}")).status().as_u16())
        .collect();
    assert_eq!(
        redirects.iter().filter(|s| **s == 302).count(),
        5,
        "{redirects:?}"
    );
    assert_eq!(redirects[6], 429);
    assert!(app.metric("vsl_rate_limited_total{limit=\"redirect_per_ip\"}") >= 2.0);
    assert!(app.metric("vsl_rate_limited_total{limit=\"create_per_ip\"}") >= 1.0);
}

#[test]
fn robots_txt_keeps_crawlers_out_of_the_api_and_pages() {
    let app = TestApp::start();
    let response = app.get("/robots.txt");
    assert_eq!(response.status(), 200);
    let text = response.text().unwrap_or_default();
    assert!(text.contains("User-agent: *"));
    assert!(text.contains("Disallow: /api/"));
    assert!(text.contains("Disallow: /ui/"));
    assert!(!text.contains("Disallow: /\n"));
}

/// `/{code}+` shows the destination, escaped, and counts no visit.
#[test]
fn preview_shows_the_escaped_destination_without_a_visit() {
    let app = TestApp::start();
    let link = app.create(json!({"url": "https://example.com/p?a=<b>&c=\"d\""}));
    let code = link["code"].as_str().unwrap_or_default().to_string();
    let response = app.get(&format!("/{code}+"));
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("location").is_none());
    let html = response.text().unwrap_or_default();
    // minijinja escapes `/` as well as `&`, `<`, `>` and quotes.
    let shown = "https:&#x2f;&#x2f;example.com&#x2f;p?a=%3Cb%3E&amp;c=%22d%22";
    assert!(
        html.contains(&format!("class=\"url\">{shown}</p>")),
        "{html}"
    );
    assert!(html.contains(&format!("href=\"{shown}\"")), "{html}");
    assert!(!html.contains("<b>") && !html.contains("a=%3Cb%3E&c"));
    assert_eq!(app.get(&format!("/{}+", "nope42")).status(), 404);
    // No visit was counted. Visits are written about once a second, so a count read at once
    // would be 0 either way: follow the previews with one real visit, wait until it is
    // counted, then the previews (queued before it, written no later) must have added none.
    assert_eq!(app.get(&format!("/{code}")).status(), 302);
    let visits = || {
        let info: serde_json::Value = app
            .req(
                reqwest::Method::GET,
                &format!("/api/v1/links/{code}"),
                Some(ADMIN),
            )
            .send()
            .and_then(|r| r.json())
            .unwrap_or_default();
        info["visits_total"].as_u64().unwrap_or(0)
    };
    let started = std::time::Instant::now();
    let mut counted = visits();
    while counted == 0 {
        assert!(started.elapsed().as_secs() < 10, "no visit counted in 10 s");
        std::thread::sleep(std::time::Duration::from_millis(100));
        counted = visits();
    }
    assert_eq!(counted, 1, "the preview counted a visit");
}

/// Blocked hosts from the list and the file: creates are 400, existing links 403, and a change
/// of the file takes effect without a restart.
#[test]
fn blocked_hosts_refuse_creates_and_stop_redirects() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("blocked.txt");
    std::fs::write(&file, "# none yet\n").expect("write");
    let app = TestApp::start_with(
        &format!(
            "[limits]\nblocked_hosts = [\"evil.example\"]\nblocked_hosts_file = \"{}\"\n",
            file.display()
        ),
        &[],
    );
    for url in ["https://evil.example/x", "http://a.b.EVIL.example:8080/"] {
        let body = problem(
            app.post_json("/api/v1/links", ADMIN, &json!({"url": url})),
            400,
        );
        assert_eq!(body["code"], "blocked_url");
        assert_eq!(body["field"], "url");
    }
    let fine = app.create(json!({"url": "https://notevil.example/"}));
    let later = app.create(json!({"url": "https://phish.example/login"}));
    let code = later["code"].as_str().unwrap_or_default().to_string();
    assert_eq!(app.get(&format!("/{code}")).status(), 302, "cached now");

    std::fs::write(&file, "# phishing\nphish.example\n").expect("write");
    let started = std::time::Instant::now();
    while app.get(&format!("/{code}")).status() != 403 {
        assert!(started.elapsed().as_secs() < 5, "not blocked within 5 s");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let json = app
        .client
        .get(app.url(&format!("/{code}")))
        .header("accept", "application/json")
        .send()
        .expect("GET");
    assert_eq!(problem(json, 403)["code"], "blocked_url");
    let page = app.get(&format!("/{code}"));
    assert!(page.text().unwrap_or_default().contains("<html"));
    // The link itself is reported as it is.
    let info: serde_json::Value = app
        .req(
            reqwest::Method::GET,
            &format!("/api/v1/links/{code}"),
            Some(ADMIN),
        )
        .send()
        .and_then(|r| r.json())
        .unwrap_or_default();
    assert_eq!(info["status"], "active");
    let body = problem(
        app.post_json(
            "/api/v1/links",
            ADMIN,
            &json!({"url": "https://www.phish.example/"}),
        ),
        400,
    );
    assert_eq!(body["code"], "blocked_url");
    let fine_code = fine["code"].as_str().unwrap_or_default();
    assert_eq!(app.get(&format!("/{fine_code}")).status(), 302);
}

/// A raw connection that sends `head` and then waits.
fn stalled(app: &TestApp, head: &str) -> std::net::TcpStream {
    let mut stream = std::net::TcpStream::connect(app.addr).expect("connect");
    std::io::Write::write_all(&mut stream, head.as_bytes()).expect("send");
    stream
}

/// Reads until the server closes (or `limit` passes); returns the bytes and the time taken.
fn read_until_closed(
    stream: &mut std::net::TcpStream,
    limit: std::time::Duration,
) -> (String, std::time::Duration) {
    let started = std::time::Instant::now();
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_millis(200)));
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    while started.elapsed() < limit {
        match std::io::Read::read(stream, &mut buf) {
            Ok(0) => break,
            Ok(n) => received.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => break,
        }
    }
    (
        String::from_utf8_lossy(&received).into_owned(),
        started.elapsed(),
    )
}

/// A client that sends half its headers and stalls is closed after `server.header_timeout`.
#[test]
fn stalled_headers_are_cut_off_after_the_header_timeout() {
    let app = TestApp::start_with("", &[("VSL_SERVER__HEADER_TIMEOUT", "1s")]);
    let mut stream = stalled(&app, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ");
    let (_, took) = read_until_closed(&mut stream, std::time::Duration::from_secs(10));
    assert!(
        took >= std::time::Duration::from_millis(900) && took < std::time::Duration::from_secs(4),
        "closed after {took:?}"
    );
}

/// An idle keep-alive connection does not hold its slot past the header timeout either.
#[test]
fn idle_keep_alive_connections_are_closed_after_the_header_timeout() {
    let app = TestApp::start_with("", &[("VSL_SERVER__HEADER_TIMEOUT", "1s")]);
    let mut stream = stalled(&app, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    let (text, took) = read_until_closed(&mut stream, std::time::Duration::from_secs(10));
    assert!(text.starts_with("HTTP/1.1 200"), "{text:.80}");
    assert!(
        took < std::time::Duration::from_secs(4),
        "idle connection kept {took:?}"
    );
}

/// A request head over `server.max_header_bytes` is answered 431; a normal one still works.
#[test]
fn huge_headers_are_431() {
    let app = TestApp::start();
    let big = "a".repeat(200 * 1024);
    let response = app
        .client
        .get(app.url("/healthz"))
        .header("x-big", big)
        .send();
    match response {
        Ok(r) => assert_eq!(r.status(), 431),
        // The server may close while the client is still sending; then read its answer raw.
        Err(_) => {
            let mut stream = stalled(
                &app,
                &format!(
                    "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
                    "a".repeat(100 * 1024)
                ),
            );
            let (text, _) = read_until_closed(&mut stream, std::time::Duration::from_secs(5));
            assert!(text.starts_with("HTTP/1.1 431"), "{text:.80}");
        }
    }
    let ok = app
        .client
        .get(app.url("/healthz"))
        .header("x-fine", "b".repeat(4000))
        .send()
        .expect("GET");
    assert_eq!(ok.status(), 200);
}

/// 200 stalled clients do not delay a normal one.
#[test]
fn stalled_clients_do_not_delay_a_normal_one() {
    let app = TestApp::start();
    let stalls: Vec<_> = (0..200)
        .map(|_| stalled(&app, "GET /healthz HTTP/1.1\r\nHost: x\r\n"))
        .collect();
    let started = std::time::Instant::now();
    let response = app.get("/healthz");
    assert_eq!(response.status(), 200);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    drop(stalls);
}

/// `server.max_connections`: past the cap a client waits until a connection closes (here,
/// when the stalled ones hit the header timeout).
#[test]
fn connections_past_the_cap_wait_for_a_free_slot() {
    let app = TestApp::start_with(
        "",
        &[
            ("VSL_SERVER__MAX_CONNECTIONS", "3"),
            ("VSL_SERVER__HEADER_TIMEOUT", "2s"),
        ],
    );
    let started = std::time::Instant::now();
    let stalls: Vec<_> = (0..3)
        .map(|_| stalled(&app, "GET /healthz HTTP/1.1\r\nHost: x\r\n"))
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut normal = stalled(
        &app,
        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    let (text, _) = read_until_closed(&mut normal, std::time::Duration::from_secs(10));
    let waited = started.elapsed();
    assert!(text.starts_with("HTTP/1.1 200"), "{text:.80}");
    assert!(
        waited >= std::time::Duration::from_millis(1800),
        "answered after {waited:?}, before a slot was free"
    );
    drop(stalls);
}

/// A damaged link record or code index entry fails only the requests that touch it (500,
/// logged with the key); everything else keeps working.
#[test]
fn corrupt_records_fail_loudly_and_alone() {
    let mut app = TestApp::start_sled("", &[]);
    let first = app.create(json!({"url": "https://example.com/first"}));
    let second = app.create(json!({"url": "https://example.com/second"}));
    let third = app.create(json!({"url": "https://example.com/third"}));
    let code = |v: &serde_json::Value| v["code"].as_str().unwrap_or_default().to_string();
    let (first, second, third) = (code(&first), code(&second), code(&third));
    app.terminate();
    {
        let db = sled::open(app.data_path().join("db")).expect("open the store's sled db");
        let links = db.open_tree("links").expect("links tree");
        // Link 1's record, truncated.
        let record = links.get(1u64.to_be_bytes()).expect("get").expect("link 1");
        links
            .insert(1u64.to_be_bytes(), &record[..record.len() / 2])
            .expect("insert");
        // The code index entry of the second link, a byte short.
        let codes = db.open_tree("codes").expect("codes tree");
        codes
            .insert(second.as_bytes(), &[0u8, 0, 0, 0, 0, 0, 2][..])
            .expect("insert");
        // The third link's entry (its redirect entry), damaged into something that is no
        // record.
        codes
            .insert(third.as_bytes(), &[0xc1u8, 0xff, 0x00][..])
            .expect("insert");
        db.flush().expect("flush");
    }
    app.restart();
    let get = |c: &str| {
        app.req(
            reqwest::Method::GET,
            &format!("/api/v1/links/{c}"),
            Some(ADMIN),
        )
        .send()
        .expect("GET")
    };
    assert_eq!(problem(get(&first), 500)["code"], "internal");
    assert_eq!(problem(get(&second), 500)["code"], "internal", "not a 404");
    assert_eq!(problem(get(&third), 500)["code"], "internal", "not a 404");
    let redirect = app
        .client
        .get(app.url(&format!("/{third}")))
        .header("accept", "application/json")
        .send()
        .expect("GET");
    assert_eq!(problem(redirect, 500)["code"], "internal");
    assert!(
        app.logged(&format!("code `{third}`")),
        "the log names the damaged entry"
    );
    let fourth = app.create(json!({"url": "https://example.com/fourth"}));
    assert_eq!(app.get(&format!("/{}", code(&fourth))).status(), 302);
    assert_eq!(app.get("/healthz").status(), 200);
    assert!(app.logged("link id 1"), "the log names the damaged record");
    assert!(
        app.logged(&format!("code `{second}`")),
        "the log names the damaged entry"
    );

    // `vshortlink check` on the stopped store names each damaged record and goes on.
    app.terminate();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vshortlink"))
        .arg("--config")
        .arg(app.config_path())
        .arg("check")
        .env("RUST_LOG", "warn")
        .output()
        .expect("run vshortlink check");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{report}");
    assert!(
        report.contains("damaged record: tree `links`, key 0000000000000001"),
        "{report}"
    );
    assert!(report.contains("damaged record: tree `codes`"), "{report}");
    assert!(
        report.contains(&format!("`{second}`")),
        "the code index fault: {report}"
    );
    assert!(
        report.contains("records in"),
        "the other checks ran: {report}"
    );
}

/// Found by the `config` fuzz target: figment panicked on this environment value. Start-up
/// stops with a message naming the variable and exit code 2, not a panic.
#[test]
fn an_unparsable_environment_value_stops_start_up_naming_it() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_vshortlink"))
        .env("VSL_SERVER__BASE_URL", "\"a\u{48f}\\t\"")
        .env("VSL_SERVER__LISTEN", "127.0.0.1:0")
        .output()
        .expect("run vshortlink");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("VSL_SERVER__BASE_URL"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
