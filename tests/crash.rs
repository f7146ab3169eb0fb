//! Crash safety of the real server: concurrent creates, patches and deletes, SIGKILL
//! at a moment nobody chose, restart on the same data dir, then check every acknowledged
//! write, that no code has two live links, and that no code was lost from both its pool and
//! the links. `benches/crash.sh` runs the same check for many more cycles.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{TestApp, ADMIN};
use reqwest::Method;
use serde_json::{json, Value};

/// What the server acknowledged about one link, and what was in flight when it died.
#[derive(Clone, Debug, Default)]
struct Expect {
    url: String,
    deleted: bool,
    /// An unacknowledged operation: its effect may or may not be there.
    pending_url: Option<String>,
    pending_delete: bool,
}

fn all_links(app: &TestApp) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor = String::new();
    loop {
        let page: Value = app
            .req(
                Method::GET,
                &format!("/api/v1/links?limit=1000&cursor={cursor}"),
                Some(ADMIN),
            )
            .send()
            .unwrap()
            .json()
            .unwrap();
        out.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = next.to_string(),
            None => return out,
        }
    }
}

fn check(app: &TestApp, expected: &HashMap<String, Expect>) {
    let links = all_links(app);
    let by_code: HashMap<&str, &Value> = links
        .iter()
        .map(|l| (l["code"].as_str().unwrap(), l))
        .collect();
    assert_eq!(by_code.len(), links.len(), "a code has two links");
    for (code, e) in expected {
        let link = by_code
            .get(code.as_str())
            .unwrap_or_else(|| panic!("acknowledged link {code} lost"));
        let deleted = link["status"] == "deleted";
        assert!(
            deleted == e.deleted || (e.pending_delete && deleted),
            "{code}: {link} vs {e:?}"
        );
        let url = link["url"].as_str().unwrap();
        assert!(
            url == e.url || e.pending_url.as_deref() == Some(url),
            "{code}: url {url} vs {e:?}"
        );
    }
    // Every generated code is in exactly one place: its pool, or a link.
    let pools: Value = app
        .req(Method::GET, "/api/v1/pools", Some(ADMIN))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let mut linked: BTreeMap<u64, u64> = BTreeMap::new();
    for l in &links {
        if l["custom"] == false && l["status"] != "archived" {
            *linked.entry(l["length"].as_u64().unwrap()).or_default() += 1;
        }
    }
    // Pooled lengths only: computed codes (`hash`) have no pool to account for.
    for p in pools["pools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["strategy"] != "hash")
    {
        let length = p["length"].as_u64().unwrap();
        let pooled = p["available"].as_u64().unwrap() + p["cooling"].as_u64().unwrap();
        let generated = p["generated_total"].as_u64().unwrap();
        let in_links = linked.get(&length).copied().unwrap_or(0);
        assert_eq!(pooled + in_links, generated, "length {length}: {p}");
    }
}

#[test]
fn sigkill_under_concurrent_writes_loses_nothing_acknowledged() {
    let mut app = TestApp::binary_with("[tiers.5]\nbatch = 200\nlow_water = 50\n", &[]);
    let expected: Arc<Mutex<HashMap<String, Expect>>> = Arc::default();
    // benches/crash.sh raises this for a long run.
    let rounds: u64 = std::env::var("CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    for round in 0..rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let url_base = app.url("");
        std::thread::scope(|s| {
            for t in 0..32u64 {
                let (expected, stop, url_base) = (expected.clone(), stop.clone(), url_base.clone());
                let client = reqwest::blocking::Client::builder()
                    .timeout(Duration::from_secs(10))
                    .build()
                    .unwrap();
                s.spawn(move || {
                    let send = |m: Method, path: &str, body: Option<Value>| {
                        let mut r = client
                            .request(m, format!("{url_base}{path}"))
                            .bearer_auth(ADMIN);
                        if let Some(b) = body {
                            r = r.json(&b);
                        }
                        r.send().ok().filter(|r| r.status().is_success())
                    };
                    for i in 0.. {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        let url = format!("https://example.com/{round}/{t}/{i}");
                        let length = if i % 2 == 0 { 5 } else { 6 };
                        let Some(created) = send(
                            Method::POST,
                            "/api/v1/links",
                            Some(json!({"url": url, "length": length})),
                        ) else {
                            return;
                        };
                        let code = created.json::<Value>().unwrap()["code"]
                            .as_str()
                            .unwrap()
                            .to_string();
                        let mut e = Expect {
                            url: url.clone(),
                            ..Default::default()
                        };
                        expected.lock().unwrap().insert(code.clone(), e.clone());
                        if i % 3 == 0 {
                            let new_url = format!("{url}/patched");
                            e.pending_url = Some(new_url.clone());
                            expected.lock().unwrap().insert(code.clone(), e.clone());
                            if send(
                                Method::PATCH,
                                &format!("/api/v1/links/{code}"),
                                Some(json!({"url": new_url})),
                            )
                            .is_none()
                            {
                                return;
                            }
                            e = Expect {
                                url: new_url,
                                ..Default::default()
                            };
                            expected.lock().unwrap().insert(code.clone(), e.clone());
                        }
                        if i % 5 == 0 {
                            e.pending_delete = true;
                            expected.lock().unwrap().insert(code.clone(), e.clone());
                            if send(Method::DELETE, &format!("/api/v1/links/{code}"), None)
                                .is_none()
                            {
                                return;
                            }
                            e.deleted = true;
                            e.pending_delete = false;
                            expected.lock().unwrap().insert(code.clone(), e);
                        }
                    }
                });
            }
            // A kill moment that differs from round to round.
            std::thread::sleep(Duration::from_millis(800 + (300 * round) % 1700));
            app.kill9();
            stop.store(true, Ordering::Relaxed);
        });
        app.restart();
        let expected = expected.lock().unwrap();
        assert!(
            expected.len() > 10,
            "round {round}: too few writes acknowledged"
        );
        check(&app, &expected);
        let codes: HashSet<&String> = expected.keys().collect();
        assert_eq!(codes.len(), expected.len());
        eprintln!(
            "round {round}: {} acknowledged links checked",
            expected.len()
        );
    }
}

#[test]
fn a_stale_code_filter_is_rebuilt_at_start_and_the_log_says_so() {
    let mut app = TestApp::binary();
    let link = app.create(json!({"url": "https://example.com/before-crash", "code": "precrash"}));
    assert_eq!(link["code"], "precrash");
    // Killed before the periodic checkpoint (every minute) saved the filter.
    app.kill9();
    app.restart();
    assert!(
        app.logged("the code filter was rebuilt"),
        "{:?}",
        app.log.lock().unwrap()
    );
    assert_eq!(
        app.get("/precrash").status(),
        302,
        "the rebuilt filter knows the code"
    );
    // A clean stop saves it: no rebuild next time.
    app.restart();
    assert_eq!(app.get("/precrash").status(), 302);
    assert!(!app.logged_now("rebuilt"));
}
