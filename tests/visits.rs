//! Visits and statistics against the real server: user agents and bots,
//! geolocation from a test database, stored addresses, counters and series, the visit listing
//! and CSV export, queue overflow, draining on SIGTERM, and `/metrics`.

mod common;

#[cfg(feature = "geo")]
use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{problem, TestApp, ADMIN, VIEWER};
use reqwest::Method;
use serde_json::{json, Value};

const DESKTOP: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";
const PHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1";
#[cfg(feature = "geo")]
const TABLET: &str = "Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Mobile/15E148 Safari/604.1";
const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

fn visit(app: &TestApp, code: &str, user_agent: &str, referer: Option<&str>) {
    let mut request = app
        .client
        .get(app.url(&format!("/{code}")))
        .header("user-agent", user_agent);
    if let Some(r) = referer {
        request = request.header("referer", r);
    }
    let response = request.send().expect("redirect");
    assert_eq!(response.status().as_u16(), 302);
}

fn get_json(app: &TestApp, path: &str) -> Value {
    let response = app.req(Method::GET, path, Some(ADMIN)).send().expect("GET");
    assert_eq!(response.status().as_u16(), 200, "{path}");
    response.json().expect("json")
}

/// Waits until the writer has recorded `n` visits of `code` (visits are written after the
/// redirect answers).
fn wait_visits(app: &TestApp, code: &str, n: u64) -> Value {
    let started = Instant::now();
    loop {
        let link = get_json(app, &format!("/api/v1/links/{code}"));
        if link["visits_total"].as_u64() == Some(n) {
            return link;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "visits_total stayed {} (want {n})",
            link["visits_total"]
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn visits(app: &TestApp, code: &str) -> Vec<Value> {
    let page = get_json(app, &format!("/api/v1/links/{code}/visits?limit=1000"));
    page["items"].as_array().cloned().unwrap_or_default()
}

fn new_code(app: &TestApp, url: &str) -> String {
    app.create(json!({ "url": url }))["code"]
        .as_str()
        .expect("code")
        .to_string()
}

fn metric(app: &TestApp, name: &str) -> f64 {
    let text = app.get("/metrics").text().expect("metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no metric {name}"))
}

#[test]
#[cfg(feature = "geo")]
fn user_agents_give_device_class_and_bot_flag_and_geo_comes_from_the_database() {
    let geo_dir = tempfile::tempdir().unwrap();
    let geo_db = geo_dir.path().join("test-geo.mmdb");
    common::mmdb::write_test_geo_db(&geo_db);
    let app = TestApp::start_with(
        &format!(
            "[visits]\ngeo_db = \"{}\"\nip = \"truncated\"\n",
            geo_db.display()
        ),
        &[],
    );
    let code = new_code(&app, "https://example.com/ua");
    visit(
        &app,
        &code,
        DESKTOP,
        Some("https://news.example.org/item?id=1"),
    );
    visit(&app, &code, PHONE, None);
    visit(&app, &code, TABLET, None);
    visit(&app, &code, GOOGLEBOT, None);
    wait_visits(&app, &code, 4);

    let items = visits(&app, &code);
    let by_ua: HashMap<&str, &Value> = items
        .iter()
        .map(|v| (v["user_agent"].as_str().unwrap(), v))
        .collect();
    let expect = [
        (DESKTOP, "desktop", false, "Chrome"),
        (PHONE, "mobile", false, "Safari"),
        (TABLET, "tablet", false, "Safari"),
        (GOOGLEBOT, "bot", true, "Googlebot"),
    ];
    for (ua, device, bot, browser) in expect {
        let v = by_ua[ua];
        assert_eq!(v["device"], device, "{ua}");
        assert_eq!(v["is_bot"], bot, "{ua}");
        assert_eq!(v["browser"], browser, "{ua}");
        assert_eq!(v["code"], code.as_str());
        // Geolocation from the test database (127.0.0.0/8 is in it).
        assert_eq!(v["country"], "ZZ");
        assert_eq!(v["region"], "Localhost Region");
        assert_eq!(v["city"], "Loopback City");
        assert_eq!(v["isp"], "Loopback ISP");
        // Truncated to /24; the client id still comes from the full address.
        assert_eq!(v["ip"], "127.0.0.0");
        let id = v["client_id"].as_str().unwrap();
        assert_eq!(id.len(), 40);
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
    }
    assert_eq!(by_ua[DESKTOP]["os"], "Windows 10");
    assert_eq!(
        by_ua[DESKTOP]["referer"],
        "https://news.example.org/item?id=1"
    );
    // Same address, different user agents: different clients.
    assert_ne!(by_ua[DESKTOP]["client_id"], by_ua[PHONE]["client_id"]);
}

#[test]
fn ip_none_stores_no_address() {
    let app = TestApp::start_with("[visits]\nip = \"none\"\n", &[]);
    let code = new_code(&app, "https://example.com/private");
    visit(&app, &code, DESKTOP, None);
    visit(&app, &code, DESKTOP, None);
    wait_visits(&app, &code, 2);
    let items = visits(&app, &code);
    for v in &items {
        assert!(v["ip"].is_null(), "{v}");
        assert_eq!(v["client_id"].as_str().unwrap().len(), 40);
    }
    // The same client twice: one client id, counted once.
    assert_eq!(items[0]["client_id"], items[1]["client_id"]);
    let csv = app
        .req(
            Method::GET,
            &format!("/api/v1/links/{code}/visits?format=csv"),
            Some(ADMIN),
        )
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(!csv.contains("127.0.0"), "{csv}");
    let full = TestApp::start_with("[visits]\nip = \"full\"\n", &[]);
    let code = new_code(&full, "https://example.com/full");
    visit(&full, &code, DESKTOP, None);
    wait_visits(&full, &code, 1);
    assert_eq!(visits(&full, &code)[0]["ip"], "127.0.0.1");
}

#[test]
fn stats_totals_and_series_match_the_visits_made() {
    let app = TestApp::start();
    let code = new_code(&app, "https://example.com/stats");
    let other = new_code(&app, "https://example.com/other");
    for _ in 0..3 {
        visit(&app, &code, DESKTOP, Some("https://a.example/x"));
    }
    visit(&app, &code, PHONE, Some("https://b.example/y"));
    visit(&app, &code, PHONE, None);
    visit(&app, &code, GOOGLEBOT, None);
    visit(&app, &code, GOOGLEBOT, None);
    visit(&app, &other, DESKTOP, None);
    let link = wait_visits(&app, &code, 7);
    assert_eq!(link["visits_total"], 7);
    wait_visits(&app, &other, 1);

    let stats = get_json(&app, &format!("/api/v1/links/{code}/stats"));
    assert_eq!(stats["total"], 7, "{stats}");
    assert_eq!(stats["bots"], 2);
    // Two humans (desktop and phone, same address); bots are left out.
    assert_eq!(stats["unique_visitors"], 2);
    assert_eq!(stats["granularity"], "hour");
    let series = stats["series"].as_array().unwrap();
    let sum: u64 = series.iter().map(|p| p["visits"].as_u64().unwrap()).sum();
    let bots: u64 = series.iter().map(|p| p["bots"].as_u64().unwrap()).sum();
    assert_eq!((sum, bots), (7, 2));
    let top = &stats["top"];
    assert_eq!(top["browser"][0], json!({"value": "Chrome", "visits": 3}));
    assert_eq!(top["device"][0], json!({"value": "desktop", "visits": 3}));
    assert_eq!(
        top["referer"][0],
        json!({"value": "a.example", "visits": 3})
    );
    assert_eq!(
        top["referer"][1],
        json!({"value": "b.example", "visits": 1})
    );

    // An explicit window of three hours around now: three hourly points, the visits in the
    // current one.
    let now = time::OffsetDateTime::now_utc();
    let hour = now.replace_minute(0).unwrap().replace_second(0).unwrap();
    let hour = hour.replace_nanosecond(0).unwrap();
    let fmt = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    let from = fmt(hour - time::Duration::hours(2));
    let to = fmt(hour + time::Duration::hours(1));
    let window = get_json(
        &app,
        &format!("/api/v1/links/{code}/stats?from={from}&to={to}&granularity=hour"),
    );
    let points = window["series"].as_array().unwrap();
    assert_eq!(points.len(), 3, "{window}");
    assert_eq!(points[0]["visits"], 0);
    assert_eq!(points[1]["visits"], 0);
    assert_eq!(points[2]["visits"], 7);
    assert_eq!(points[2]["t"], fmt(hour));
    let daily = get_json(&app, &format!("/api/v1/links/{code}/stats?granularity=day"));
    assert_eq!(daily["series"].as_array().unwrap().len(), 1);
    assert_eq!(daily["series"][0]["visits"], 7);
    // Before any visit: nothing.
    let before = fmt(hour - time::Duration::hours(5));
    let empty = get_json(
        &app,
        &format!("/api/v1/links/{code}/stats?from={before}&to={from}"),
    );
    assert_eq!(
        (empty["total"].as_u64(), empty["unique_visitors"].as_u64()),
        (Some(0), Some(0))
    );

    // System-wide: today has both links and all eight visits.
    let system = get_json(&app, "/api/v1/stats");
    assert_eq!(system["today"], json!({"creates": 2, "visits": 8}));
    assert_eq!(system["links"]["active"], 2);
    let days = system["days"].as_array().unwrap();
    assert_eq!(days.len(), 14);
    assert_eq!(days[13]["visits"], 8);
    assert_eq!(days[12]["visits"], 0);

    // Bad queries name their field; viewers may read, anonymous callers may not.
    let bad = |query: &str, field: &str| {
        let response = app
            .req(
                Method::GET,
                &format!("/api/v1/links/{code}/stats?{query}"),
                Some(VIEWER),
            )
            .send()
            .unwrap();
        assert_eq!(problem(response, 400)["field"], field, "{query}");
    };
    bad("granularity=week", "granularity");
    bad("from=yesterday", "from");
    bad("to=2020-13-45", "to");
    bad(&format!("from={to}&to={from}"), "from");
    bad("from=2000-01-01&granularity=hour", "granularity");
    let anonymous = app.req(Method::GET, "/api/v1/stats", None).send().unwrap();
    problem(anonymous, 401);
    let unknown = app
        .req(Method::GET, "/api/v1/links/zzzzzz/stats", Some(ADMIN))
        .send()
        .unwrap();
    problem(unknown, 404);
}

#[test]
fn visits_list_pages_and_csv_has_a_header_and_one_row_per_visit() {
    let app = TestApp::start();
    let code = new_code(&app, "https://example.com/csv");
    for i in 0..25 {
        visit(&app, &code, &format!("agent-{i}, \"quoted\""), None);
    }
    wait_visits(&app, &code, 25);
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/v1/links/{code}/visits?limit=10&cursor={c}"),
            None => format!("/api/v1/links/{code}/visits?limit=10"),
        };
        let page = get_json(&app, &path);
        for v in page["items"].as_array().unwrap() {
            seen.push(v["id"].as_u64().unwrap());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(seen.len(), 25);
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");

    let response = app
        .req(
            Method::GET,
            &format!("/api/v1/links/{code}/visits?format=csv"),
            Some(VIEWER),
        )
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let headers = response.headers().clone();
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/csv"));
    // Streamed, not built in memory: no length known up front.
    assert!(headers.get("content-length").is_none());
    assert_eq!(headers["transfer-encoding"], "chunked");
    let body = response.text().unwrap();
    let mut reader = csv::Reader::from_reader(body.as_bytes());
    let header = reader.headers().unwrap().clone();
    assert_eq!(&header[0], "id");
    assert!(header.iter().any(|h| h == "client_id"));
    assert!(header.iter().any(|h| h == "is_bot"));
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 25);
    let ua = header.iter().position(|h| h == "user_agent").unwrap();
    assert_eq!(&rows[3][ua], "agent-3, \"quoted\"");

    // A link without visits: just the header.
    let quiet = new_code(&app, "https://example.com/quiet");
    let text = app
        .req(
            Method::GET,
            &format!("/api/v1/links/{quiet}/visits?format=csv"),
            Some(ADMIN),
        )
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert_eq!(text.lines().count(), 1);
    assert!(text.starts_with("id,at,code,"));
    let response = app
        .req(
            Method::GET,
            &format!("/api/v1/links/{code}/visits?format=xml"),
            Some(ADMIN),
        )
        .send()
        .unwrap();
    assert_eq!(problem(response, 400)["field"], "format");
}

/// The smallest queue bound there is, under eight clients: every visit is journaled before
/// its redirect answers and folded into the store, none dropped (only a full disk drops).
#[test]
fn a_burst_keeps_every_visit_whatever_the_queue_bound() {
    let app = TestApp::start_with("[visits]\nqueue = 1\n", &[]);
    let code = new_code(&app, "https://example.com/busy");
    let requests: u32 = 400;
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..requests / 8 {
                    visit(&app, &code, DESKTOP, None);
                }
            });
        }
    });
    assert_eq!(metric(&app, "vsl_visits_queued_total"), f64::from(requests));
    assert_eq!(metric(&app, "vsl_visits_dropped_total"), 0.0);
    wait_visits(&app, &code, u64::from(requests));
    assert_eq!(
        metric(&app, "vsl_visits_written_total"),
        f64::from(requests)
    );
}

/// `/metrics` carries the binary's allocator counts (jemalloc's, which the binary runs on),
/// not the near-zero counts of a jemalloc nothing allocates from: what it holds covers what
/// is allocated, and an idle server holds megabytes, not gigabytes.
#[test]
fn metrics_carry_the_binarys_allocator_counts() {
    let app = TestApp::binary();
    let allocated = metric(&app, "vsl_allocator_bytes{kind=\"allocated\"}");
    let resident = metric(&app, "vsl_allocator_bytes{kind=\"resident\"}");
    assert!(allocated > 1e6 && allocated < 1e9, "allocated {allocated}");
    assert!(
        resident >= allocated,
        "resident {resident} < allocated {allocated}"
    );
}

/// sled's page table and the cache capacity it leaves are exported as they are: a small
/// store's table is inside its reserve, so the cache keeps the capacity the budget gave it.
/// sled only (a database server holds neither).
#[test]
fn metrics_carry_the_page_table_and_the_cache_capacity_it_leaves() {
    let app = TestApp::start_sled("", &[]);
    new_code(&app, "https://example.com/pages");
    let share = metric(&app, "vsl_memory_bound_bytes{part=\"sled_cache\"}");
    let capacity = metric(&app, "vsl_store_memory_bytes{part=\"sled_cache_capacity\"}");
    assert_eq!(capacity, (share / 5.0).floor(), "a fifth of sled's share");
    let table = metric(&app, "vsl_store_memory_bytes{part=\"sled_page_table\"}");
    let reserve = metric(&app, "vsl_memory_bound_bytes{part=\"sled_pages\"}");
    assert!(
        table > 0.0 && table < reserve,
        "table {table}, reserve {reserve}"
    );
}

/// A visit with long headers is journaled and written like any other (it is cut to what the
/// writer keeps), and the journal's size is in `/metrics`.
#[test]
fn visits_with_long_headers_are_kept() {
    let app = TestApp::start_with("[visits]\nqueue = 1\n", &[]);
    let code = new_code(&app, "https://example.com/heavy");
    let long_agent = format!("{DESKTOP} {}", "x".repeat(2000));
    for _ in 0..20 {
        visit(&app, &code, &long_agent, Some("https://news.example.org/a"));
    }
    assert_eq!(metric(&app, "vsl_visits_dropped_total"), 0.0);
    assert_eq!(metric(&app, "vsl_visits_queued_total"), 20.0);
    wait_visits(&app, &code, 20);
    assert!(metric(&app, "vsl_visit_journal_bytes") >= 0.0);
    assert_eq!(metric(&app, "vsl_visit_journal_over_max"), 0.0);
}

#[test]
fn sigterm_drains_the_visit_queue_before_exit() {
    let mut app = TestApp::binary();
    let code = new_code(&app, "https://example.com/drain");
    // Clients keep redirecting while SIGTERM arrives, so that visits are still unwritten when
    // it does (the log line at the signal says how many); every visit answered 302 must be
    // written before the exit.
    let url = app.url(&format!("/{code}"));
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let client = app.client.clone();
            let url = url.clone();
            let answered = answered.clone();
            std::thread::spawn(move || {
                while let Ok(response) = client.get(&url).header("user-agent", PHONE).send() {
                    if response.status() == 302 {
                        answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    assert!(app.terminate().success());
    for client in clients {
        let _ = client.join();
    }
    // Not only the queue: a visit taken off it is still unwritten while it is enriched,
    // waits for the next write (once a second) or is in it, and the drain covers all of that.
    let unwritten_at_signal: u64 = app
        .log
        .lock()
        .map(|log| {
            log.iter()
                .find_map(|l| {
                    let rest = l.split("unwritten_visits=").nth(1)?;
                    rest.split_whitespace().next()?.parse().ok()
                })
                .unwrap_or(0)
        })
        .unwrap_or(0);
    assert!(
        unwritten_at_signal > 0,
        "every visit was written before SIGTERM: the drain was not tested"
    );
    let answered = answered.load(std::sync::atomic::Ordering::Relaxed);
    app.restart();
    let link = get_json(&app, &format!("/api/v1/links/{code}"));
    assert_eq!(link["visits_total"].as_u64(), Some(answered));
}

#[test]
fn metrics_parse_as_prometheus_text() {
    let app = TestApp::start();
    let code = new_code(&app, "https://example.com/metrics");
    visit(&app, &code, DESKTOP, None);
    visit(&app, &code, DESKTOP, None);
    assert_eq!(app.get("/no-such-code").status().as_u16(), 404);
    wait_visits(&app, &code, 2);
    // The counter moves once the batch is durable, a moment after the visit is readable.
    let started = Instant::now();
    while metric(&app, "vsl_visits_written_total") < 2.0 {
        assert!(started.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(10));
    }
    let response = app.get("/metrics");
    assert_eq!(response.status().as_u16(), 200);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    let text = response.text().unwrap();
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .expect("Prometheus text");
    let find = |name: &str, labels: &[(&str, &str)]| -> f64 {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => f64::NAN,
            })
            .unwrap_or_else(|| panic!("no sample {name} {labels:?} in\n{text}"))
    };
    assert_eq!(
        find(
            "vsl_http_requests_total",
            &[("route", "/:code"), ("method", "GET"), ("status", "302")]
        ),
        2.0
    );
    assert_eq!(
        find(
            "vsl_http_requests_total",
            &[("route", "/api/v1/links"), ("status", "201")]
        ),
        1.0
    );
    assert!(find("vsl_http_requests_total", &[("status", "404")]) >= 1.0);
    assert_eq!(find("vsl_visits_written_total", &[]), 2.0);
    assert_eq!(find("vsl_visits_dropped_total", &[]), 0.0);
    assert_eq!(find("vsl_links", &[("status", "active")]), 1.0);
    assert!(find("vsl_pool_available", &[("length", "6")]) > 0.0);
    assert!(find("vsl_cache_hits_total", &[]) + find("vsl_cache_misses_total", &[]) >= 2.0);
    assert_eq!(find("vsl_visit_queue_depth", &[]), 0.0);
    if app.database.is_none() {
        // sled's group commit; PostgreSQL commits by itself.
        assert!(find("vsl_store_flushes", &[]) >= 1.0);
    }
    let histogram = scrape
        .samples
        .iter()
        .find(|s| s.metric == "vsl_redirect_duration_seconds")
        .expect("redirect histogram");
    match &histogram.value {
        prometheus_parse::Value::Histogram(buckets) => {
            assert!(buckets.iter().any(|b| b.count >= 2.0));
        }
        other => panic!("not a histogram: {other:?}"),
    }
    // No key needed.
    assert!(scrape.docs.contains_key("vsl_http_requests_total"));
}

#[test]
#[cfg(feature = "geo")]
fn proxy_headers_give_the_client_address_only_when_trusted() {
    let geo_dir = tempfile::tempdir().unwrap();
    let geo_db = geo_dir.path().join("test-geo.mmdb");
    common::mmdb::write_test_geo_db(&geo_db);
    for trusted in [true, false] {
        let app = TestApp::start_with(
            &format!(
                "[visits]\ngeo_db = \"{}\"\nip = \"full\"\n",
                geo_db.display()
            ),
            &[
                (
                    "VSL_SERVER__TRUST_PROXY_HEADERS",
                    if trusted { "true" } else { "false" },
                ),
                // 10.0.0.1, the hop before ours, is a proxy of ours too.
                (
                    "VSL_SERVER__TRUSTED_PROXIES",
                    "[\"127.0.0.0/8\", \"10.0.0.0/8\"]",
                ),
            ],
        );
        let code = new_code(&app, "https://example.com/proxied");
        let response = app
            .client
            .get(app.url(&format!("/{code}")))
            .header("user-agent", DESKTOP)
            .header("x-forwarded-for", "81.2.69.160, 10.0.0.1")
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 302);
        wait_visits(&app, &code, 1);
        let v = &visits(&app, &code)[0];
        if trusted {
            assert_eq!(v["ip"], "81.2.69.160");
            assert_eq!(v["country"], "GB");
            assert_eq!(v["city"], "London");
        } else {
            assert_eq!(v["ip"], "127.0.0.1");
            assert_eq!(v["country"], "ZZ");
        }
    }
}

/// Visits are written about once a second (README, "Visits and statistics"): the ones written
/// before a kill -9 survive it; the ones after the last write may be lost, and none is counted
/// twice.
#[test]
fn written_visits_survive_kill_9_and_at_most_the_unwritten_ones_are_lost() {
    let mut app = TestApp::binary();
    let code = new_code(&app, "https://example.com/crash-visits");
    for _ in 0..20 {
        visit(&app, &code, DESKTOP, None);
    }
    wait_visits(&app, &code, 20);
    for _ in 0..5 {
        visit(&app, &code, DESKTOP, None);
    }
    app.kill9();
    app.respawn();
    let total = get_json(&app, &format!("/api/v1/links/{code}"))["visits_total"]
        .as_u64()
        .expect("visits_total");
    assert!((20..=25).contains(&total), "visits_total {total}");
    let listed = visits(&app, &code).len();
    assert!((20..=25).contains(&listed), "{listed} visits listed");
}
