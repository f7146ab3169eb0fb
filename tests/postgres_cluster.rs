//! Several instances on one PostgreSQL database: two real vshortlink
//! processes share a database of a real PostgreSQL server the test starts itself. A link
//! created on one redirects on the other at once; a change on one is seen by the other within
//! a second; concurrent creates over both never share a code; the lifecycle job run on both
//! at once handles each link once; killing one instance while it creates loses nothing it
//! acknowledged. Skipped (with a message) where PostgreSQL is not installed.
#![cfg(feature = "postgres")]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{postgres, TestApp, ADMIN};
use serde_json::{json, Value};
use vshortlink::clock::{Clock, ManualClock};
use vshortlink::config::Config;
use vshortlink::links::CreateLink;
use vshortlink::store::postgres::{PgOptions, PgStore};
use vshortlink::store::Store;

/// Two instances on one fresh database; `None` where PostgreSQL is not installed.
fn pair() -> Option<(TestApp, TestApp, String)> {
    let url = postgres::fresh_database()?;
    let a = TestApp::start_on(&url, "", &[]);
    let b = TestApp::start_on(&url, "", &[]);
    Some((a, b, url))
}

fn location(app: &TestApp, code: &str) -> Option<String> {
    let response = app.get(&format!("/{code}"));
    (response.status() == 302).then(|| {
        response.headers()["location"]
            .to_str()
            .unwrap_or_default()
            .to_string()
    })
}

/// Polls `check` for up to `limit`; how long it took, if it came true.
fn within(limit: Duration, mut check: impl FnMut() -> bool) -> Option<Duration> {
    let started = Instant::now();
    loop {
        if check() {
            return Some(started.elapsed());
        }
        if started.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_link_made_on_one_instance_redirects_on_the_other_and_changes_travel_within_a_second() {
    let Some((a, b, _)) = pair() else { return };
    let made = a.create(json!({ "url": "https://example.com/first" }));
    let code = made["code"].as_str().expect("code").to_string();
    // At once: no filter or cache on B may answer 404 for a code A just issued.
    assert_eq!(
        location(&b, &code).as_deref(),
        Some("https://example.com/first")
    );
    // B now has it cached; a PATCH on A must reach B's cache.
    let patched = a
        .req(
            reqwest::Method::PATCH,
            &format!("/api/v1/links/{code}"),
            Some(ADMIN),
        )
        .json(&json!({ "url": "https://example.com/second" }))
        .send()
        .expect("patch");
    assert_eq!(patched.status(), 200);
    let took = within(Duration::from_secs(1), || {
        location(&b, &code).as_deref() == Some("https://example.com/second")
    });
    assert!(took.is_some(), "B still redirects to the old URL after 1 s");
    let deleted = a
        .req(
            reqwest::Method::DELETE,
            &format!("/api/v1/links/{code}"),
            Some(ADMIN),
        )
        .send()
        .expect("delete");
    assert!(deleted.status().is_success());
    let took = within(Duration::from_secs(1), || {
        b.get(&format!("/{code}")).status() == 410
    });
    assert!(took.is_some(), "B still redirects a deleted link after 1 s");
}

#[test]
fn concurrent_creates_over_two_instances_never_share_a_code_and_lose_none() {
    let Some((a, b, _)) = pair() else { return };
    let apps = [&a, &b];
    let codes: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..64)
            .map(|i| {
                let app = apps[i % 2];
                scope.spawn(move || {
                    let response = app.post_json(
                        "/api/v1/links",
                        ADMIN,
                        &json!({ "url": format!("https://example.com/c/{i}") }),
                    );
                    assert_eq!(response.status(), 201, "create {i}");
                    let body: Value = response.json().expect("json");
                    body["code"].as_str().expect("code").to_string()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client"))
            .collect()
    });
    let mut unique = codes.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 64, "a code was issued twice: {codes:?}");
    for (i, code) in codes.iter().enumerate() {
        for app in apps {
            assert_eq!(
                location(app, code).as_deref(),
                Some(format!("https://example.com/c/{i}").as_str()),
                "{code} on {}",
                app.addr
            );
        }
    }
}

#[test]
fn killing_one_instance_while_it_creates_loses_no_acknowledged_link() {
    let Some((mut a, b, _)) = pair() else { return };
    let acked = std::sync::Mutex::new(Vec::<(String, String)>::new());
    let addr = a.addr;
    std::thread::scope(|scope| {
        for t in 0..8 {
            let acked = &acked;
            scope.spawn(move || {
                let client = reqwest::blocking::Client::builder()
                    .timeout(Duration::from_secs(5))
                    .build()
                    .expect("client");
                for i in 0.. {
                    let url = format!("https://example.com/k/{t}/{i}");
                    let Ok(response) = client
                        .post(format!("http://{addr}/api/v1/links"))
                        .bearer_auth(ADMIN)
                        .json(&json!({ "url": url }))
                        .send()
                    else {
                        return; // the instance is gone
                    };
                    if response.status() != 201 {
                        return;
                    }
                    let Ok(body) = response.json::<Value>() else {
                        return;
                    };
                    let code = body["code"].as_str().unwrap_or_default().to_string();
                    acked.lock().expect("acked").push((code, url));
                }
            });
        }
        std::thread::sleep(Duration::from_millis(700));
        a.kill9();
    });
    let acked = acked.into_inner().expect("acked");
    assert!(
        acked.len() > 8,
        "too few creates before the kill to mean anything"
    );
    for (code, url) in &acked {
        assert_eq!(
            location(&b, code).as_deref(),
            Some(url.as_str()),
            "acknowledged {code} is missing on the surviving instance"
        );
    }
}

/// The lifecycle job, started on two instances at once (in process, with a manual clock
/// moved past every expiry), expires each link exactly once between them.
#[test]
fn the_lifecycle_job_on_two_instances_at_once_handles_each_link_once() {
    let Some(url) = postgres::fresh_database() else {
        return;
    };
    const T0: u64 = 1_800_000_000_000;
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let clock = Arc::new(ManualClock::new(T0));
    let dirs = [
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    ];
    let apps: Vec<vshortlink::App> = dirs
        .iter()
        .map(|dir| {
            let config = Config::from_toml(&format!(
                "[storage]\npath = {:?}\nbackend = \"postgres\"\n[storage.postgres]\nurl = {url:?}\n",
                dir.path()
            ))
            .expect("config");
            let store: Arc<dyn Store> = Arc::new(
                PgStore::open(&PgOptions {
                    url: url.clone(),
                    pool_size: 4,
                })
                .expect("open"),
            );
            let clock: Arc<dyn Clock> = clock.clone();
            runtime
                .block_on(vshortlink::build(Arc::new(config), store, clock))
                .expect("build")
        })
        .collect();
    let links = 300;
    for i in 0..links {
        let req: CreateLink = serde_json::from_value(
            json!({ "url": format!("https://example.com/e/{i}"), "ttl": 60 }),
        )
        .expect("request");
        apps[i % 2].state.links.create(req).expect("create");
    }
    clock.advance(120_000);
    let reports: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = apps
            .iter()
            .map(|app| {
                let job = app.state.lifecycle.clone();
                scope.spawn(move || job.run().expect("job"))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("job thread"))
            .collect()
    });
    let expired: u64 = reports.iter().map(|r| r.expired).sum();
    assert_eq!(expired, links as u64, "each link expired once: {reports:?}");
    let counts = apps[0].state.stats.system(None).expect("counts").links;
    assert_eq!((counts.active, counts.expired), (0, links as u64));
    drop(apps);
    runtime.shutdown_background();
}

/// Moving from one machine to several: `vshortlink export` of a sled directory (links and
/// visits), `vshortlink import` into PostgreSQL, and an instance on the database serves every
/// link with its visit count.
#[test]
fn a_sled_export_imports_into_postgres_and_serves_there() {
    use common::cli::{text, vsl};
    let Some(url) = postgres::fresh_database() else {
        return;
    };
    let mut sled = TestApp::start_sled("", &[]);
    let made: Vec<(String, String)> = (0..5)
        .map(|i| {
            let target = format!("https://example.com/moved/{i}");
            let body = sled.create(json!({ "url": target }));
            (
                body["code"].as_str().unwrap_or_default().to_string(),
                target,
            )
        })
        .collect();
    assert_eq!(sled.get(&format!("/{}", made[0].0)).status(), 302);
    // The visit is written in the background: wait for it before stopping.
    within(Duration::from_secs(10), || {
        sled.api_get(&format!("/api/v1/links/{}", made[0].0), ADMIN)["visits_total"] == 1
    })
    .expect("the visit is recorded");
    assert!(sled.terminate().success());
    let dump = sled.dir.path().join("dump.jsonl");
    let out = vsl(
        &sled.config_path(),
        &[
            "export",
            "--visits",
            "--output",
            dump.to_str().unwrap_or_default(),
        ],
    );
    assert!(out.status.success(), "export: {}", text(&out.stderr));

    let dir = tempfile::tempdir().expect("dir");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nbase_url = \"http://sl.test\"\n[storage]\npath = {:?}\nbackend = \"postgres\"\n[storage.postgres]\nurl = {url:?}\n",
            dir.path().join("data")
        ),
    )
    .expect("config");
    let out = vsl(&config, &["import", dump.to_str().unwrap_or_default()]);
    assert!(out.status.success(), "import: {}", text(&out.stderr));

    let pg = TestApp::start_on(&url, "", &[]);
    for (code, target) in &made {
        assert_eq!(location(&pg, code).as_deref(), Some(target.as_str()));
    }
    let link = pg.api_get(&format!("/api/v1/links/{}", made[0].0), ADMIN);
    // The imported visit, and the one just made.
    let total = within(Duration::from_secs(10), || {
        pg.api_get(&format!("/api/v1/links/{}", made[0].0), ADMIN)["visits_total"] == 2
    });
    assert!(total.is_some(), "visits after the move: {link}");
}

/// Runs the binary with a config and no keys until `file` appears (or it exits); returns
/// whether it was still running, and what it printed.
fn run_until(config: &std::path::Path, file: &std::path::Path) -> (bool, String) {
    use std::io::Read;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_vshortlink"))
        .arg("--config")
        .arg(config)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start");
    let mut running = false;
    for _ in 0..300 {
        if file.exists() {
            running = true;
            break;
        }
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    let mut err = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = stderr.read_to_string(&mut err);
    }
    (running, err)
}

fn pg_config(dir: &std::path::Path, url: &str) -> std::path::PathBuf {
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\npath = {:?}\nbackend = \"postgres\"\n[storage.postgres]\nurl = {url:?}\n",
            dir.join("data")
        ),
    )
    .expect("config");
    config
}

/// With no keys configured, instances sharing a database generate one admin key between
/// them (agreed through the database), each writing it to its own `admin.key`.
#[test]
fn instances_without_keys_agree_on_one_generated_admin_key() {
    let Some(url) = postgres::fresh_database() else {
        return;
    };
    let dirs = [
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    ];
    let keys: Vec<String> = dirs
        .iter()
        .map(|dir| {
            let key = dir.path().join("data/admin.key");
            let (running, err) = run_until(&pg_config(dir.path(), &url), &key);
            assert!(running, "the instance did not start: {err}");
            std::fs::read_to_string(&key).expect("admin.key")
        })
        .collect();
    assert!(keys[0].trim().len() >= 32);
    assert_eq!(keys[0], keys[1]);
}

/// A database that cannot be reached stops start-up with a message naming the key to fix;
/// so does a URL that is no URL. (Needs no PostgreSQL server.)
#[test]
fn an_unreachable_database_stops_start_up_naming_the_key() {
    let dir = tempfile::tempdir().expect("dir");
    let never = dir.path().join("data/admin.key");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port");
    let config = pg_config(
        dir.path(),
        &format!("postgres://nobody@127.0.0.1:{port}/nothing?connect_timeout=2"),
    );
    let (running, err) = run_until(&config, &never);
    assert!(!running, "started without its database");
    assert!(err.contains("storage.postgres.url"), "{err}");
    let config = pg_config(dir.path(), "postgres://a:b@:not-a-port/x");
    let (running, err) = run_until(&config, &never);
    assert!(!running);
    assert!(err.contains("storage.postgres.url"), "{err}");
}

/// When an instance loses its notification connection, changes made meanwhile are not lost
/// on it: it reconnects, subscribes again and forgets everything it had cached.
#[test]
fn a_lost_notification_connection_reconnects_and_forgets_the_cache() {
    let Some((a, b, url)) = pair() else { return };
    let server = postgres::server().expect("server");
    let database = url.rsplit('/').next().unwrap_or_default().to_string();
    let made = a.create(json!({ "url": "https://example.com/before" }));
    let code = made["code"].as_str().expect("code").to_string();
    assert_eq!(
        location(&b, &code).as_deref(),
        Some("https://example.com/before")
    );
    // Both instances' listeners go; the patch is made while they are (maybe) away.
    let killed = server.sql(
        &database,
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE query LIKE 'LISTEN%' AND datname = current_database()",
    );
    assert_eq!(killed, "2", "one listener per instance");
    let patched = a
        .req(
            reqwest::Method::PATCH,
            &format!("/api/v1/links/{code}"),
            Some(ADMIN),
        )
        .json(&json!({ "url": "https://example.com/after" }))
        .send()
        .expect("patch");
    assert_eq!(patched.status(), 200);
    let took = within(Duration::from_secs(2), || {
        location(&b, &code).as_deref() == Some("https://example.com/after")
    });
    assert!(
        took.is_some(),
        "B kept serving the old URL after its listener came back"
    );
    // And it listens again: a later change travels as before.
    within(Duration::from_secs(2), || {
        server.sql(
            &database,
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND datname = current_database()",
        ) == "2"
    })
    .expect("both listeners are back");
    a.req(
        reqwest::Method::PATCH,
        &format!("/api/v1/links/{code}"),
        Some(ADMIN),
    )
    .json(&json!({ "url": "https://example.com/again" }))
    .send()
    .expect("patch");
    assert!(within(Duration::from_secs(1), || {
        location(&b, &code).as_deref() == Some("https://example.com/again")
    })
    .is_some());
}

/// A browser behind a load balancer may reach either instance: a page session opened on one
/// is honoured by the other (sessions live in the database), and so is signing out.
#[test]
fn a_page_session_opened_on_one_instance_works_on_the_other() {
    use common::pages::PageClient;
    let Some((a, b, _)) = pair() else { return };
    let page = PageClient::new(&a);
    let signed_in = page.post_form(
        "/ui/login",
        &[("key", common::EDITOR), ("next", "/ui/links")],
    );
    assert_eq!(signed_in.status(), 303);
    let session = signed_in
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|c| c.strip_prefix("vsl_session="))
        .and_then(|c| c.split(';').next())
        .expect("a session cookie")
        .to_string();
    let on_b = |path: &str| page.client.get(b.url(path)).send().expect("GET on B");
    let links = on_b("/ui/links");
    assert_eq!(links.status(), 200, "B asked the browser to sign in again");
    // The form token is the session's, whichever instance rendered the page.
    let token_a = common::pages::csrf_of(&page.get("/").text().expect("page"));
    let token_b = common::pages::csrf_of(&on_b("/").text().expect("page"));
    assert_eq!(token_a, token_b);
    let out = page
        .client
        .post(b.url("/ui/logout"))
        .form(&[("csrf", token_b.as_str())])
        .send()
        .expect("sign out on B");
    assert_eq!(out.status(), 303);
    // The old cookie, replayed to A, opens nothing: the session is gone from the database.
    let replayed = a
        .client
        .get(a.url("/ui/links"))
        .header("cookie", format!("vsl_session={session}"))
        .send()
        .expect("replay");
    assert_eq!(
        replayed.status(),
        303,
        "signed out on B, still signed in on A"
    );
}

/// A database that refuses writes (a read-only replica after a failover, a full disk) still
/// serves every stored link: redirects only read. Writes get a clear 503 or 507, never a 500,
/// and work again once the database does.
#[test]
fn a_database_that_refuses_writes_still_serves_every_link() {
    let Some(url) = postgres::fresh_database() else {
        return;
    };
    let Some(server) = postgres::server() else {
        return;
    };
    let database = url.rsplit('/').next().expect("database name").to_string();
    let app = TestApp::start_on(&url, "[cache]\ncapacity = 10\n", &[]);
    let mut acked = Vec::new();
    for i in 0..60 {
        let made = app.create(json!({ "url": format!("https://example.com/ro/{i}") }));
        acked.push((
            made["code"].as_str().expect("code").to_string(),
            made["url"].as_str().expect("url").to_string(),
        ));
    }
    let read_only = |on: bool| {
        server.sql(
            "postgres",
            &format!("ALTER DATABASE {database} SET default_transaction_read_only = {on}"),
        );
        // The setting applies to new sessions: end the instance's, its pool reconnects.
        server.sql(
            "postgres",
            &format!(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE datname = '{database}' AND pid <> pg_backend_pid()"
            ),
        );
    };
    read_only(true);
    // The first requests after the cut may meet a connection that was just ended.
    within(Duration::from_secs(10), || {
        location(&app, &acked[59].0).is_some()
    })
    .expect("redirects resume on new connections");
    for (code, url) in &acked {
        assert_eq!(
            location(&app, code).as_deref(),
            Some(url.as_str()),
            "{code}"
        );
    }
    let refused = app.post_json(
        "/api/v1/links",
        ADMIN,
        &json!({"url": "https://example.com/ro/refused"}),
    );
    let status = refused.status().as_u16();
    assert!(status == 503 || status == 507, "a create answered {status}");
    let body: Value = refused.json().expect("problem");
    assert!(
        body["code"] == "storage_unavailable" || body["code"] == "storage_full",
        "{body}"
    );
    read_only(false);
    within(Duration::from_secs(10), || {
        app.post_json(
            "/api/v1/links",
            ADMIN,
            &json!({"url": "https://example.com/ro/after"}),
        )
        .status()
            == 201
    })
    .expect("creates work again once the database takes writes");
}

/// Computed codes (`hash`) on two instances: creates of the same URL at once from both
/// agree on one link (one wins, the other gets it back by dedup); creates of other URLs whose
/// candidates collide take the next candidate. Every code passes its check character.
#[test]
fn computed_codes_agree_across_instances_under_concurrent_creates() {
    let Some((a, b, _)) = pair() else { return };
    let apps = [&a, &b];
    let answers: Vec<(usize, String, u16)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..48)
            .map(|i| {
                let app = apps[i % 2];
                scope.spawn(move || {
                    // Six URLs, each created eight times over both instances.
                    let url = i % 6;
                    let response = app.post_json(
                        "/api/v1/links",
                        ADMIN,
                        &json!({ "url": format!("https://example.com/h/{url}"), "length": 7 }),
                    );
                    let status = response.status().as_u16();
                    let body: Value = response.json().expect("json");
                    (
                        url,
                        body["code"].as_str().expect("code").to_string(),
                        status,
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client"))
            .collect()
    });
    for url in 0..6 {
        let codes: Vec<&(usize, String, u16)> =
            answers.iter().filter(|(u, _, _)| *u == url).collect();
        let first = &codes[0].1;
        assert!(
            codes.iter().all(|(_, code, _)| code == first),
            "URL {url} got several codes: {codes:?}"
        );
        assert_eq!(
            codes.iter().filter(|(_, _, status)| *status == 201).count(),
            1,
            "URL {url}: exactly one create made the link: {codes:?}"
        );
        assert!(vshortlink::codes::check::passes(first), "{first}");
        for app in apps {
            assert_eq!(
                location(app, first).as_deref(),
                Some(format!("https://example.com/h/{url}").as_str())
            );
        }
    }
    let mut distinct: Vec<&String> = answers.iter().map(|(_, c, _)| c).collect();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 6);
}

#[test]
fn forty_visitors_over_two_instances_get_exactly_the_ten_redirects_of_a_capped_link() {
    let Some((a, b, _)) = pair() else { return };
    a.create(json!({
        "url": "https://example.com/capped",
        "code": "capped10",
        "max_visits": 10,
        "targets": [
            {"url": "https://example.com/first", "max_visits": 4},
            {"url": "https://example.com/second"}
        ],
        "rotation": "failover"
    }));
    // Both instances have the link cached before the rush, so that neither asks the other.
    assert!(location(&a, "capped10").is_some());
    assert!(location(&b, "capped10").is_some());
    let apps = [&a, &b];
    let answers: Vec<(u16, Option<String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..40)
            .map(|i| {
                let app = apps[i % 2];
                s.spawn(move || {
                    let response = app.get("/capped10");
                    let location = response
                        .headers()
                        .get("location")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    (response.status().as_u16(), location)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("visitor"))
            .collect()
    });
    let redirects: Vec<&String> = answers
        .iter()
        .filter(|(status, _)| *status == 302)
        .filter_map(|(_, location)| location.as_ref())
        .collect();
    // Two were spent warming the caches above: 8 of the 40 get through, the rest see the end.
    assert_eq!(redirects.len(), 8, "{answers:?}");
    assert!(
        answers.iter().all(|(s, _)| *s == 302 || *s == 410),
        "{answers:?}"
    );
    let first = redirects
        .iter()
        .filter(|l| l.as_str() == "https://example.com/first")
        .count();
    // Failover: the first target took its 4 (2 of them while warming) before the second.
    assert_eq!(first, 2, "{redirects:?}");
    let link = b.api_get("/api/v1/links/capped10", ADMIN);
    assert_eq!(link["visits_remaining"], 0);
    let ended = within(Duration::from_secs(5), || {
        a.api_get("/api/v1/links/capped10", ADMIN)["ended_by"] == "max_visits"
    });
    assert!(ended.is_some(), "the link ends at its cap");
}
