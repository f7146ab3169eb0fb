//! The review of destinations (SPEC §21) against the real binary: real local sites (a scam
//! page, a clean page, a middle page, a slow page) and a chat-completions scorer on plain
//! `TcpListener` threads speaking HTTP/1.1, the scorer deciding from the words of the user
//! message and counting its requests. Off by default (nothing fetched, 409 on request,
//! overrides still work); the triggers (created, changed, visits at 16, requested); each
//! verdict and what it does to the redirect; overrides and who may; the blocklists; the
//! private-address refusal; the queue surviving `kill -9`; and two PostgreSQL instances
//! reviewing each link once.
//!
//! Every server here honours `TEST_STORE=postgres`; the two-instance test runs only there.

mod common;

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::pages::PageClient;
use common::stub::Request;
use common::{postgres, problem, TestApp, ADMIN, EDITOR, SPORTS_ADMIN, VIEWER};
use reqwest::Method;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// A tiny HTTP/1.1 server: one thread per connection, one request per connection.

struct Reply {
    status: u16,
    content_type: &'static str,
    body: String,
    /// Waits this long (after the request is counted) before answering.
    delay: Duration,
}

type Handler = Arc<dyn Fn(&Request) -> Reply + Send + Sync>;

struct Server {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Request>>>,
}

impl Server {
    fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen: Arc<Mutex<Vec<Request>>> = Arc::default();
        let handler: Handler = Arc::new(handler);
        let kept = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let (handler, seen) = (handler.clone(), kept.clone());
                std::thread::spawn(move || serve(stream, &handler, &seen));
            }
        });
        Server { addr, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    fn requests(&self) -> Vec<Request> {
        self.seen.lock().expect("lock").clone()
    }

    fn hits(&self) -> usize {
        self.seen.lock().expect("lock").len()
    }

    fn hits_of(&self, prefix: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.path.starts_with(prefix))
            .count()
    }
}

fn serve(stream: TcpStream, handler: &Handler, seen: &Mutex<Vec<Request>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let Some(request) = common::stub::read_request(&mut reader) else {
        return;
    };
    seen.lock().expect("lock").push(request.clone());
    let reply = handler(&request);
    if !reply.delay.is_zero() {
        std::thread::sleep(reply.delay);
    }
    let head = format!(
        "HTTP/1.1 {} X\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reply.status,
        reply.content_type,
        reply.body.len()
    );
    let mut stream = stream;
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(reply.body.as_bytes());
    let _ = stream.flush();
}

/// The destination sites: every path is an HTML page titled after its path, so the scorer
/// (which sees the URL and the title) tells `scam`, `clean` and `middle` pages apart by their
/// paths; `/slow…` answers after 3 s.
fn site() -> Server {
    Server::start(|request| Reply {
        status: 200,
        content_type: "text/html; charset=utf-8",
        body: format!(
            "<!doctype html><html><head><title>Page {path}</title>\
             <meta name=\"description\" content=\"The page at {path}\"></head>\
             <body><p>Hello from {path}</p></body></html>",
            path = request.path
        ),
        delay: if request.path.starts_with("/slow") {
            Duration::from_secs(3)
        } else {
            Duration::ZERO
        },
    })
}

/// The text of a chat-completions request's user message(s), lowercased.
fn user_text(request: &Request) -> String {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    body["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter(|m| m["role"] == "user")
                .map(|m| m["content"].to_string())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
        .to_lowercase()
}

fn completion(content: &str) -> String {
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop"
        }]
    })
    .to_string()
}

/// A chat-completions scorer: `scam` in the user message → 0.95, `middle` → 0.6, anything
/// else (`clean`) → 0.05.
fn scorer() -> Server {
    Server::start(|request| {
        let text = user_text(request);
        let (spam, reason) = if text.contains("scam") {
            (0.95, "a prize scam")
        } else if text.contains("middle") {
            (0.6, "hard to say")
        } else {
            (0.05, "an ordinary page")
        };
        Reply {
            status: 200,
            content_type: "application/json",
            body: completion(&json!({"spam": spam, "reason": reason}).to_string()),
            delay: Duration::ZERO,
        }
    })
}

/// A scorer whose model answers prose, not the JSON asked for.
fn garbage_scorer() -> Server {
    Server::start(|_| Reply {
        status: 200,
        content_type: "application/json",
        body: completion("Sure! This page looks mostly fine to me, maybe 3 out of 10."),
        delay: Duration::ZERO,
    })
}

// ---------------------------------------------------------------------------------------------
// The server under test and its API.

const API_KEY: &str = "sk-review-test";

/// The `[review]` config with the scorer at `scorer`: enabled, private addresses allowed (the
/// sites are on 127.0.0.1), two workers, unless `set` says otherwise (`key = value` TOML).
fn review_config(scorer: &Server, set: &[(&str, &str)]) -> String {
    let mut keys: Vec<(&str, String)> = vec![
        ("enabled", "true".into()),
        ("allow_private", "true".into()),
        ("concurrency", "2".into()),
    ];
    for (key, value) in set {
        match keys.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value.to_string(),
            None => keys.push((key, value.to_string())),
        }
    }
    let lines: String = keys.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
    format!(
        "[review]\n{lines}\n[review.scorer]\nurl = \"{}\"\nmodel = \"test-model\"\napi_key = \"{API_KEY}\"\n",
        scorer.url("/v1/chat/completions")
    )
}

fn start(scorer: &Server, set: &[(&str, &str)]) -> TestApp {
    TestApp::start_with(&review_config(scorer, set), &[])
}

fn code_of(created: &Value) -> String {
    created["code"].as_str().expect("code").to_string()
}

fn create(app: &TestApp, url: &str) -> String {
    code_of(&app.create(json!({ "url": url })))
}

fn link_of(app: &TestApp, code: &str) -> Value {
    app.api_get(&format!("/api/v1/links/{code}"), ADMIN)
}

/// A link's reviews, newest first.
fn reviews(app: &TestApp, code: &str) -> Vec<Value> {
    app.api_get(&format!("/api/v1/links/{code}/reviews"), ADMIN)["items"]
        .as_array()
        .expect("items")
        .clone()
}

/// Polls `check` every 50 ms for up to `limit`; panics naming `what` when it never holds.
fn wait_until(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for the link's reviews to number at least `n`; returns them, newest first.
fn wait_reviews(app: &TestApp, code: &str, n: usize) -> Vec<Value> {
    let mut got = Vec::new();
    wait_until(
        Duration::from_secs(25),
        &format!("{n} review(s) of {code}"),
        || {
            got = reviews(app, code);
            got.len() >= n
        },
    );
    got
}

/// Waits for the link's first review and, since the review is kept before it becomes the
/// link's verdict, for the link to show that verdict; returns the review.
fn first_review(app: &TestApp, code: &str) -> Value {
    let review = wait_reviews(app, code, 1).pop().expect("a review");
    wait_until(
        Duration::from_secs(5),
        &format!("{code} showing its review"),
        || link_of(app, code)["review"]["verdict"] == review["verdict"],
    );
    review
}

fn check_of<'a>(review: &'a Value, check: &str) -> Option<&'a Value> {
    review["checks"]
        .as_array()?
        .iter()
        .find(|c| c["check"] == check)
}

fn outcome_of(review: &Value, check: &str) -> String {
    check_of(review, check).map_or_else(
        || format!("<no {check} check>"),
        |c| c["outcome"].as_str().unwrap_or("?").to_string(),
    )
}

fn redirect_status(app: &TestApp, code: &str) -> u16 {
    app.get(&format!("/{code}")).status().as_u16()
}

fn location(app: &TestApp, code: &str) -> String {
    let response = app.get(&format!("/{code}"));
    assert_eq!(response.status(), 302, "GET /{code}");
    response.headers()["location"]
        .to_str()
        .unwrap_or_default()
        .to_string()
}

fn post_review(
    app: &TestApp,
    code: &str,
    key: &str,
    body: Option<&Value>,
) -> reqwest::blocking::Response {
    let builder = app.req(
        Method::POST,
        &format!("/api/v1/links/{code}/review"),
        Some(key),
    );
    match body {
        Some(body) => builder.json(body),
        None => builder,
    }
    .send()
    .expect("POST review")
}

/// The codes of the links listed under `verdict`.
fn listed(app: &TestApp, verdict: &str) -> Vec<String> {
    app.api_get(
        &format!("/api/v1/reviews?verdict={verdict}&limit=1000"),
        ADMIN,
    )["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|l| l["code"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn queue_depth(app: &TestApp) -> f64 {
    app.metric("vsl_review_queue_depth")
}

fn reviews_total(app: &TestApp, verdict: &str) -> f64 {
    app.metric(&format!("vsl_reviews_total{{verdict=\"{verdict}\"}}"))
}

// ---------------------------------------------------------------------------------------------

#[test]
fn off_by_default_nothing_is_fetched_a_request_is_refused_and_overrides_still_work() {
    let site = site();
    let scorer = scorer();
    // The scorer is configured but the review is not enabled: the default.
    let app = TestApp::binary_with(
        &format!(
            "[review.scorer]\nurl = \"{}\"\nmodel = \"m\"\n",
            scorer.url("/v1/chat/completions")
        ),
        &[],
    );
    assert!(app.logged("review of destinations: off"));
    let code = create(&app, &site.url("/scam/off"));
    let other = create(&app, &site.url("/clean/off"));
    // A couple of seconds in which a review, were one running, would have fetched the page.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(2) {
        assert_eq!(
            site.hits(),
            0,
            "a destination was fetched with the review off"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(scorer.hits(), 0, "the scorer was asked with the review off");
    assert!(reviews(&app, &code).is_empty());
    assert!(link_of(&app, &code)["review"].is_null());
    assert_eq!(redirect_status(&app, &code), 302);

    // Asking for a review: 409, for an editor as for an admin.
    for key in [EDITOR, ADMIN] {
        let body = problem(post_review(&app, &code, key, None), 409);
        assert_eq!(body["code"], "review_disabled", "{body}");
    }
    // A viewer may not ask at all.
    assert_eq!(post_review(&app, &code, VIEWER, None).status(), 403);

    // An admin's verdict still works.
    let response = post_review(&app, &code, ADMIN, Some(&json!({"verdict": "blocked"})));
    assert_eq!(response.status(), 200);
    let review: Value = response.json().expect("json");
    assert_eq!(review["trigger"], "override");
    assert_eq!(review["verdict"], "blocked");
    assert_eq!(review["by"], "admin");
    assert_eq!(redirect_status(&app, &code), 403);
    assert_eq!(link_of(&app, &code)["review"]["verdict"], "blocked");
    assert_eq!(listed(&app, "blocked"), vec![code.clone()]);
    let response = post_review(&app, &code, ADMIN, Some(&json!({"verdict": "ok"})));
    assert_eq!(response.status(), 200);
    assert_eq!(redirect_status(&app, &code), 302);
    assert!(listed(&app, "blocked").is_empty());
    assert_eq!(reviews(&app, &code).len(), 2);
    assert_eq!(redirect_status(&app, &other), 302);

    // Still nothing fetched, nothing queued.
    assert_eq!(site.hits(), 0);
    assert_eq!(scorer.hits(), 0);
    assert_eq!(queue_depth(&app), 0.0);
}

#[test]
fn created_links_are_reviewed_and_each_verdict_does_what_it_says() {
    let site = site();
    let scorer = scorer();
    let app = TestApp::binary_with(&review_config(&scorer, &[]), &[]);
    assert!(app.logged("review of destinations: on"));
    let scam = create(&app, &site.url("/scam/prize"));
    let clean = create(&app, &site.url("/clean/home"));
    let middle = create(&app, &site.url("/middle/offer"));

    // The scam page: fetched, scored 0.95, blocked; the redirect stops.
    let review = first_review(&app, &scam);
    assert_eq!(review["trigger"], "created", "{review}");
    assert_eq!(review["verdict"], "blocked", "{review}");
    assert_eq!(review["score"], 0.95, "{review}");
    assert_eq!(review["reason"], "a prize scam", "{review}");
    assert_eq!(outcome_of(&review, "blocklist"), "clear", "{review}");
    assert_eq!(outcome_of(&review, "fetch"), "ok", "{review}");
    assert_eq!(outcome_of(&review, "screenshot"), "skipped", "{review}");
    assert_eq!(outcome_of(&review, "scorer"), "ok", "{review}");
    assert_eq!(review["final_url"], site.url("/scam/prize"), "{review}");
    assert_eq!(review["title"], "Page /scam/prize", "{review}");
    assert_eq!(review["description"], "The page at /scam/prize", "{review}");
    assert_eq!(review["screenshot"], false);
    assert!(review["by"].is_null());
    assert!(review["id"].is_u64() && review["at"].is_string());
    let mark = &link_of(&app, &scam)["review"];
    assert_eq!(mark["verdict"], "blocked", "{mark}");
    assert_eq!(mark["score"], 0.95, "{mark}");
    assert_eq!(mark["reason"], "a prize scam", "{mark}");
    assert!(mark["at"].is_string(), "{mark}");
    assert_eq!(redirect_status(&app, &scam), 403);
    let response = app
        .client
        .get(app.url(&format!("/{scam}")))
        .header("accept", "application/json")
        .send()
        .expect("GET");
    assert_eq!(problem(response, 403)["code"], "blocked_url");

    // The clean page: ok, redirects.
    let review = first_review(&app, &clean);
    assert_eq!(review["trigger"], "created", "{review}");
    assert_eq!(review["verdict"], "ok", "{review}");
    assert_eq!(review["score"], 0.05, "{review}");
    assert_eq!(location(&app, &clean), site.url("/clean/home"));

    // The middle page: flagged for a person, still redirects, listed as flagged.
    let review = first_review(&app, &middle);
    assert_eq!(review["trigger"], "created", "{review}");
    assert_eq!(review["verdict"], "flagged", "{review}");
    assert_eq!(review["score"], 0.6, "{review}");
    assert_eq!(location(&app, &middle), site.url("/middle/offer"));

    // The listings by verdict (flagged is the default).
    assert_eq!(listed(&app, "flagged"), vec![middle.clone()]);
    assert_eq!(listed(&app, "blocked"), vec![scam.clone()]);
    assert_eq!(listed(&app, "ok"), vec![clean.clone()]);
    assert!(listed(&app, "unscored").is_empty());
    let page = app.api_get("/api/v1/reviews", ADMIN);
    assert_eq!(page["items"][0]["code"], middle.as_str(), "{page}");
    assert_eq!(page["items"][0]["review"]["verdict"], "flagged", "{page}");
    assert!(page["next_cursor"].is_null(), "{page}");
    let response = app
        .req(Method::GET, "/api/v1/reviews?verdict=maybe", Some(ADMIN))
        .send()
        .expect("GET");
    assert_eq!(response.status(), 400);
    let response = app
        .req(Method::GET, "/api/v1/reviews?verdict=flagged", Some(EDITOR))
        .send()
        .expect("GET");
    assert_eq!(response.status(), 403, "the listing is for admins");
    // A page of one, then the next.
    let first = app.api_get("/api/v1/reviews?verdict=ok&limit=1", ADMIN);
    assert_eq!(first["items"].as_array().map(Vec::len), Some(1), "{first}");

    // Each page was fetched once and scored once, with the key, the model and the page's facts.
    assert_eq!(site.hits(), 3, "{:?}", site.requests());
    let asked = scorer.requests();
    assert_eq!(asked.len(), 3);
    for request in &asked {
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, "/v1/chat/completions");
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {API_KEY}").as_str())
        );
        let body: Value = serde_json::from_slice(&request.body).expect("JSON body");
        assert_eq!(body["model"], "test-model");
    }
    assert!(asked
        .iter()
        .any(|r| user_text(r).contains("page /middle/offer")));

    // The counters and the queue.
    assert_eq!(reviews_total(&app, "blocked"), 1.0);
    assert_eq!(reviews_total(&app, "flagged"), 1.0);
    assert_eq!(reviews_total(&app, "ok"), 1.0);
    assert_eq!(reviews_total(&app, "unscored"), 0.0);
    assert_eq!(queue_depth(&app), 0.0);

    // Asking again (an editor may): 202, then a review with trigger `requested`.
    let response = post_review(&app, &clean, EDITOR, None);
    assert_eq!(response.status(), 202);
    let body: Value = response.json().expect("json");
    assert!(body["queued"].is_boolean(), "{body}");
    let latest = wait_reviews(&app, &clean, 2);
    assert_eq!(latest[0]["trigger"], "requested", "{latest:?}");
    assert_eq!(latest[0]["verdict"], "ok");
    assert_eq!(latest[1]["trigger"], "created");
    assert!(latest[0]["id"].as_u64() > latest[1]["id"].as_u64());
    assert_eq!(post_review(&app, &clean, VIEWER, None).status(), 403);
}

#[test]
fn a_scorer_answering_nonsense_leaves_the_link_unscored_and_redirecting() {
    let site = site();
    let scorer = garbage_scorer();
    let app = start(&scorer, &[]);
    let code = create(&app, &site.url("/scam/garbage"));
    let review = first_review(&app, &code);
    assert_eq!(review["trigger"], "created", "{review}");
    assert_eq!(review["verdict"], "unscored", "{review}");
    assert!(review["score"].is_null(), "{review}");
    assert_eq!(outcome_of(&review, "fetch"), "ok", "{review}");
    assert_eq!(outcome_of(&review, "scorer"), "failed", "{review}");
    assert_eq!(scorer.hits(), 1);
    assert_eq!(location(&app, &code), site.url("/scam/garbage"));
    assert_eq!(listed(&app, "unscored"), vec![code]);
    assert_eq!(reviews_total(&app, "unscored"), 1.0);
}

#[test]
fn private_addresses_are_not_fetched_unless_allowed() {
    let site = site();
    let scorer = scorer();
    let app = start(&scorer, &[("allow_private", "false")]);
    let code = create(&app, &site.url("/scam/private"));
    let review = first_review(&app, &code);
    assert_eq!(outcome_of(&review, "fetch"), "refused", "{review}");
    assert_eq!(site.hits(), 0, "a loopback site was fetched");
    // The scorer still judges by the URL (its own address is the operator's choice).
    assert_eq!(review["verdict"], "blocked", "{review}");
    assert!(review["title"].is_null(), "{review}");
}

#[test]
fn a_changed_destination_is_reviewed_again_and_a_changed_title_is_not() {
    let site = site();
    let scorer = scorer();
    let dir = tempfile::tempdir().expect("dir");
    let list = dir.path().join("list.txt");
    std::fs::write(&list, "0.0.0.0 evil.test\n").expect("write");
    let app = start(
        &scorer,
        &[("blocklists", &format!("[\"{}\"]", list.display()))],
    );
    let code = create(&app, &site.url("/clean/first"));
    let created = first_review(&app, &code);
    assert_eq!(created["verdict"], "ok", "{created}");

    let patch = |body: Value| {
        let response = app
            .req(Method::PATCH, &format!("/api/v1/links/{code}"), Some(ADMIN))
            .json(&body)
            .send()
            .expect("PATCH");
        assert_eq!(response.status(), 200, "PATCH {body}");
    };
    // The URL changes: reviewed again, flagged now.
    patch(json!({"url": site.url("/middle/second")}));
    let got = wait_reviews(&app, &code, 2);
    assert_eq!(got[0]["trigger"], "changed", "{got:?}");
    assert_eq!(got[0]["verdict"], "flagged", "{got:?}");
    assert_eq!(got[0]["final_url"], site.url("/middle/second"));
    assert_eq!(got[1]["trigger"], "created");

    // The title changes: nothing to review.
    patch(json!({"title": "A new title"}));
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1500) {
        assert_eq!(reviews(&app, &code).len(), 2, "a title change was reviewed");
        std::thread::sleep(Duration::from_millis(100));
    }

    // A target's URL changes (one on the blocklist): reviewed again, blocked.
    patch(
        json!({"url": site.url("/clean/third"), "targets": [{"url": site.url("/clean/t")}, {"url": "http://evil.test/t"}]}),
    );
    let got = wait_reviews(&app, &code, 3);
    assert_eq!(got[0]["trigger"], "changed", "{got:?}");
    assert_eq!(got[0]["verdict"], "blocked", "{got:?}");
    assert_eq!(outcome_of(&got[0], "blocklist"), "hit", "{got:?}");
    wait_until(Duration::from_secs(5), "the link blocked", || {
        redirect_status(&app, &code) == 403
    });
    assert_eq!(site.hits_of("/clean/third"), 0, "fetched despite the hit");
    assert_eq!(site.hits_of("/clean/t"), 0, "fetched despite the hit");
}

#[test]
fn sixteen_visits_ask_for_a_review_and_fifteen_do_not() {
    let site = site();
    let scorer = scorer();
    let app = start(&scorer, &[]);
    let code = create(&app, &site.url("/clean/popular"));
    let created = first_review(&app, &code);
    assert_eq!(created["trigger"], "created");

    for _ in 0..15 {
        assert_eq!(redirect_status(&app, &code), 302);
    }
    wait_until(Duration::from_secs(10), "15 visits written", || {
        link_of(&app, &code)["visits_total"] == 15
    });
    // The writer tells the review after each batch, about once a second: give it time to
    // (wrongly) queue one.
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(2500) {
        assert_eq!(
            reviews(&app, &code).len(),
            1,
            "15 visits asked for a review"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    assert_eq!(redirect_status(&app, &code), 302);
    let got = wait_reviews(&app, &code, 2);
    assert_eq!(got[0]["trigger"], "visits", "{got:?}");
    assert_eq!(got[1]["trigger"], "created", "{got:?}");
    assert_eq!(link_of(&app, &code)["visits_total"], 16);
    assert_eq!(site.hits(), 2);
    assert_eq!(scorer.hits(), 2);
}

#[test]
fn an_admins_verdict_applies_at_once_and_only_admins_give_one() {
    let site = site();
    let scorer = scorer();
    let app = start(&scorer, &[]);
    let code = create(&app, &site.url("/clean/override"));
    let created = first_review(&app, &code);
    assert_eq!(created["verdict"], "ok");
    assert_eq!(redirect_status(&app, &code), 302);

    let response = post_review(&app, &code, ADMIN, Some(&json!({"verdict": "blocked"})));
    assert_eq!(response.status(), 200);
    let review: Value = response.json().expect("json");
    assert_eq!(review["trigger"], "override", "{review}");
    assert_eq!(review["verdict"], "blocked", "{review}");
    assert_eq!(review["by"], "admin", "{review}");
    // At once: no polling.
    assert_eq!(redirect_status(&app, &code), 403);
    assert_eq!(link_of(&app, &code)["review"]["verdict"], "blocked");
    let got = reviews(&app, &code);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0]["trigger"], "override");
    assert_eq!(got[0]["by"], "admin");
    assert_eq!(got[1]["trigger"], "created");
    assert_eq!(listed(&app, "blocked"), vec![code.clone()]);
    assert!(listed(&app, "ok").is_empty());

    let response = post_review(&app, &code, ADMIN, Some(&json!({"verdict": "ok"})));
    assert_eq!(response.status(), 200);
    let review: Value = response.json().expect("json");
    assert_eq!(review["verdict"], "ok");
    assert_eq!(location(&app, &code), site.url("/clean/override"));
    assert_eq!(link_of(&app, &code)["review"]["verdict"], "ok");

    // Only admins, and only ok or blocked.
    for key in [EDITOR, VIEWER] {
        let response = post_review(&app, &code, key, Some(&json!({"verdict": "blocked"})));
        problem(response, 403);
    }
    assert_eq!(redirect_status(&app, &code), 302);
    for verdict in ["maybe", "flagged", "unscored", ""] {
        let response = post_review(&app, &code, ADMIN, Some(&json!({ "verdict": verdict })));
        let body = problem(response, 400);
        assert_eq!(body["code"], "invalid_verdict", "{verdict}: {body}");
    }
    let response = post_review(&app, "nosuchcode", ADMIN, Some(&json!({"verdict": "ok"})));
    assert_eq!(response.status(), 404);
    assert_eq!(reviews(&app, &code).len(), 3);
    // Overrides fetch and score nothing.
    assert_eq!(site.hits(), 1);
    assert_eq!(scorer.hits(), 1);
}

#[test]
fn the_queue_survives_kill_9() {
    let site = site();
    let scorer = scorer();
    let mut app = TestApp::binary_with(&review_config(&scorer, &[("concurrency", "1")]), &[]);
    let codes: Vec<String> = (1..=3)
        .map(|i| create(&app, &site.url(&format!("/slow/{i}"))))
        .collect();
    // One review under way (its page takes 3 s), the others waiting: all three in the queue
    // (the one under review stays there until its review is kept). The queue is written by
    // the service's own task just after each create, so wait for all three entries.
    wait_until(Duration::from_secs(10), "a slow page fetched", || {
        site.hits_of("/slow") >= 1
    });
    wait_until(Duration::from_secs(5), "three links queued", || {
        queue_depth(&app) == 3.0
    });
    eprintln!("links, oldest first (the first under review at the kill): {codes:?}");
    app.kill9();
    let reviewed_before: usize = site.hits_of("/slow");
    app.respawn();

    let started = Instant::now();
    for code in &codes {
        let got = wait_reviews(&app, code, 1);
        assert_eq!(got.last().expect("review")["trigger"], "created", "{got:?}");
        assert_eq!(got.last().expect("review")["verdict"], "ok", "{got:?}");
    }
    wait_until(Duration::from_secs(10), "the queue drained", || {
        queue_depth(&app) == 0.0
    });
    eprintln!(
        "after the restart every link was reviewed within {:?} ({reviewed_before} fetched before)",
        started.elapsed()
    );
    for code in &codes {
        assert_eq!(link_of(&app, code)["review"]["verdict"], "ok");
    }
}

#[test]
fn a_blocklist_blocks_without_fetching_and_is_reread() {
    let site = site();
    let scorer = scorer();
    let dir = tempfile::tempdir().expect("dir");
    let list = dir.path().join("hosts.txt");
    let listed_url = site.url("/clean/listed?x=1");
    std::fs::write(
        &list,
        format!("# a hosts file\n127.0.0.1 localhost\n0.0.0.0 evil.test\n{listed_url}\n"),
    )
    .expect("write");
    let app = start(
        &scorer,
        &[("blocklists", &format!("[\"{}\"]", list.display()))],
    );

    let evil = create(&app, "http://evil.test/x");
    let sub = create(&app, "http://www.evil.test/y");
    let url_hit = create(&app, &listed_url);
    let fine = create(&app, &site.url("/clean/not-listed"));
    for code in [&evil, &sub, &url_hit] {
        let review = first_review(&app, code);
        assert_eq!(review["verdict"], "blocked", "{code}: {review}");
        let check = check_of(&review, "blocklist").expect("a blocklist check");
        assert_eq!(check["outcome"], "hit", "{review}");
        assert!(check_of(&review, "fetch").is_none(), "{review}");
        assert!(check_of(&review, "scorer").is_none(), "{review}");
        assert_eq!(redirect_status(&app, code), 403);
    }
    let detail = check_of(&reviews(&app, &evil)[0], "blocklist").expect("check")["detail"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(detail.contains("evil.test"), "{detail}");
    let review = first_review(&app, &fine);
    assert_eq!(review["verdict"], "ok", "{review}");
    assert_eq!(outcome_of(&review, "blocklist"), "clear", "{review}");
    assert_eq!(site.hits_of("/clean/listed"), 0, "a listed URL was fetched");
    assert_eq!(site.hits_of("/clean/not-listed"), 1);
    assert_eq!(scorer.hits(), 1, "only the unlisted page was scored");

    // A line added to the file counts within 5 s of the change, without a restart.
    let later = create(&app, &site.url("/clean/later"));
    assert_eq!(first_review(&app, &later)["verdict"], "ok");
    let mut text = std::fs::read_to_string(&list).expect("read");
    text.push_str(&format!("{}\n", site.url("/clean/later")));
    std::fs::write(&list, text).expect("write");
    let changed = Instant::now();
    let mut asked = 0;
    wait_until(Duration::from_secs(10), "the re-read list hit", || {
        let got = reviews(&app, &later);
        if got[0]["verdict"] == "blocked" {
            return true;
        }
        if got.len() > asked {
            // The last review is done: ask for another.
            asked = got.len();
            assert_eq!(post_review(&app, &later, EDITOR, None).status(), 202);
        }
        false
    });
    assert!(
        changed.elapsed() < Duration::from_secs(8),
        "re-read after {:?}",
        changed.elapsed()
    );
}

#[test]
fn two_postgres_instances_review_each_link_once() {
    if std::env::var("TEST_STORE").as_deref() != Ok("postgres") {
        eprintln!("skipped: two instances share one database only with TEST_STORE=postgres");
        return;
    }
    let Some(url) = postgres::fresh_database() else {
        return;
    };
    let site = site();
    let scorer = scorer();
    let config = review_config(&scorer, &[]);
    let a = TestApp::start_on(&url, &config, &[]);
    let b = TestApp::start_on(&url, &config, &[]);
    const N: usize = 10;
    let codes: Vec<String> = (0..N)
        .map(|i| {
            let path = if i == 0 {
                "/scam/shared".to_string()
            } else {
                format!("/clean/shared/{i}")
            };
            create(&a, &site.url(&path))
        })
        .collect();
    for code in &codes {
        wait_reviews(&a, code, 1);
    }
    wait_until(Duration::from_secs(10), "both queues empty", || {
        queue_depth(&a) == 0.0 && queue_depth(&b) == 0.0
    });
    // Longer than a worker's idle look (2 s): a second review would show by then.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(scorer.hits(), N, "the scorer was asked once per link");
    assert_eq!(site.hits(), N, "each page fetched once");
    for code in &codes {
        let got = reviews(&b, code);
        assert_eq!(got.len(), 1, "{code}: {got:?}");
        assert_eq!(got[0]["trigger"], "created");
    }
    let finished = reviews_total(&a, "ok")
        + reviews_total(&a, "blocked")
        + reviews_total(&b, "ok")
        + reviews_total(&b, "blocked");
    assert_eq!(finished, N as f64, "reviews counted over both instances");
    eprintln!(
        "instance A reviewed {}, instance B {}",
        reviews_total(&a, "ok") + reviews_total(&a, "blocked"),
        reviews_total(&b, "ok") + reviews_total(&b, "blocked")
    );

    // A blocked verdict stops the link on both instances.
    let scam = &codes[0];
    assert_eq!(reviews(&a, scam)[0]["verdict"], "blocked");
    for app in [&a, &b] {
        wait_until(Duration::from_secs(3), "the scam link stopped", || {
            redirect_status(app, scam) == 403
        });
    }
    let clean = &codes[1];
    assert_eq!(redirect_status(&b, clean), 302);
    let response = post_review(&a, clean, ADMIN, Some(&json!({"verdict": "blocked"})));
    assert_eq!(response.status(), 200);
    assert_eq!(redirect_status(&a, clean), 403);
    wait_until(Duration::from_secs(3), "the override on instance B", || {
        redirect_status(&b, clean) == 403
    });
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

/// The codes of `GET /api/v1/reviews?verdict=…&limit=…` for `key`, page by page, following
/// the cursor to the end.
fn pages_of(app: &TestApp, key: &str, verdict: &str, limit: usize) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/api/v1/reviews?verdict={verdict}&limit={limit}");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let page = app.api_get(&path, key);
        pages.push(
            page["items"]
                .as_array()
                .expect("items")
                .iter()
                .map(|l| l["code"].as_str().unwrap_or_default().to_string())
                .collect(),
        );
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return pages,
        }
        assert!(pages.len() < 100, "the cursor never ends");
    }
}

/// Every `src="/ui/reviews/…"` of a page.
fn screenshot_srcs(html: &str) -> Vec<String> {
    html.split("src=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .filter(|src| src.starts_with("/ui/reviews/"))
        .map(str::to_string)
        .collect()
}

#[test]
fn reviews_are_limited_to_the_callers_spaces() {
    let site = site();
    let scorer = scorer();
    let tools = tempfile::tempdir().expect("dir");
    let browser = fake_browser(tools.path());
    let app = start(
        &scorer,
        &[("browser", &format!("\"{}\"", browser.display()))],
    );
    // Flagged links (the scorer flags `middle` pages) in two spaces, their ids interleaved;
    // the default space's first is behind a password.
    let secret = code_of(&app.create(json!({
        "url": site.url("/middle/secret-destination"), "password": "open sesame"
    })));
    let mut ours = Vec::new();
    let mut theirs = vec![secret.clone()];
    for i in 0..3 {
        theirs.push(create(&app, &site.url(&format!("/middle/default-{i}"))));
        ours.push(code_of(&app.create(json!({
            "url": site.url(&format!("/middle/sports-{i}")), "space": "sports"
        }))));
    }
    for code in theirs.iter().chain(&ours) {
        assert_eq!(first_review(&app, code)["verdict"], "flagged");
    }
    let mut everyone: Vec<String> = theirs.iter().chain(&ours).cloned().collect();
    everyone.sort();
    let mut all = listed(&app, "flagged");
    all.sort();
    assert_eq!(all, everyone, "an admin of every space sees every space");

    // The API's listing: the caller's spaces only, every page full but the last, at any size.
    for limit in [1, 2, 1000] {
        let pages = pages_of(&app, SPORTS_ADMIN, "flagged", limit);
        assert_eq!(pages.concat(), ours, "limit {limit}: {pages:?}");
        let (last, full) = pages.split_last().expect("a page");
        assert!(!last.is_empty(), "limit {limit}: an empty last page");
        for page in full {
            assert_eq!(page.len(), limit, "limit {limit}: {pages:?}");
        }
    }
    let raw = app
        .req(
            Method::GET,
            "/api/v1/reviews?verdict=flagged&limit=1000",
            Some(SPORTS_ADMIN),
        )
        .send()
        .expect("GET")
        .text()
        .expect("body");
    assert!(!raw.contains("/middle/default"), "{raw}");
    assert!(!raw.contains("secret-destination"), "{raw}");

    // A link's reviews and an admin's verdict: 403 for another space's link, as its GET is.
    for code in &theirs {
        for path in [
            format!("/api/v1/links/{code}"),
            format!("/api/v1/links/{code}/reviews"),
        ] {
            let response = app.req(Method::GET, &path, Some(SPORTS_ADMIN)).send();
            assert_eq!(response.expect("GET").status(), 403, "{path}");
        }
        let response = post_review(
            &app,
            code,
            SPORTS_ADMIN,
            Some(&json!({"verdict": "blocked"})),
        );
        assert_eq!(response.status(), 403, "a verdict on {code}");
        assert_eq!(post_review(&app, code, SPORTS_ADMIN, None).status(), 403);
    }
    assert_eq!(link_of(&app, &secret)["review"]["verdict"], "flagged");
    // Its own: allowed.
    let own = app.api_get(&format!("/api/v1/links/{}/reviews", ours[0]), SPORTS_ADMIN);
    assert_eq!(own["items"].as_array().map(Vec::len), Some(1), "{own}");
    let response = post_review(
        &app,
        &ours[0],
        SPORTS_ADMIN,
        Some(&json!({"verdict": "blocked"})),
    );
    assert_eq!(response.status(), 200);
    let review: Value = response.json().expect("json");
    assert_eq!(review["by"], "sports-admin", "{review}");
    assert_eq!(
        pages_of(&app, SPORTS_ADMIN, "blocked", 1000).concat(),
        vec![ours[0].clone()]
    );

    // The page: the same links, the same screenshots.
    let page = PageClient::signed_in(&app, SPORTS_ADMIN);
    let html = page.html("/ui/reviews", 200);
    for code in &ours[1..] {
        assert!(html.contains(&format!("id=\"r-{code}\"")), "{code}: {html}");
    }
    for code in &theirs {
        assert!(
            !html.contains(&format!("id=\"r-{code}\"")),
            "{code}: {html}"
        );
    }
    assert!(!html.contains("/middle/default"), "{html}");
    assert!(!html.contains("secret-destination"), "{html}");
    let blocked = page.html("/ui/reviews?verdict=blocked", 200);
    assert!(
        blocked.contains(&format!("id=\"r-{}\"", ours[0])),
        "{blocked}"
    );
    let shots = screenshot_srcs(&html);
    assert_eq!(shots.len(), ours.len() - 1, "{shots:?}");
    for shot in &shots {
        assert_eq!(page.get(shot).status(), 200, "{shot}");
    }
    // Another space's screenshot, however asked for, and its verdict from the page: refused.
    let their_review = reviews(&app, &secret)[0]["id"].as_u64().expect("id");
    for path in [
        format!("/ui/reviews/{their_review}/screenshot.png"),
        format!("/ui/reviews/{secret}/{their_review}/screenshot.png"),
        format!("/ui/reviews/{}/{their_review}/screenshot.png", ours[1]),
    ] {
        let status = page.get(&path).status().as_u16();
        assert!(status == 403 || status == 404, "{path}: {status}");
    }
    let admin = PageClient::signed_in(&app, ADMIN);
    let every = admin.html("/ui/reviews", 200);
    assert!(every.contains(&format!("id=\"r-{secret}\"")), "{every}");
    let response = page.post_form(&format!("/ui/reviews/{secret}"), &[("verdict", "blocked")]);
    assert_eq!(response.status(), 403);
    assert_eq!(link_of(&app, &secret)["review"]["verdict"], "flagged");
}

/// A page with a title and a meta description (the scorer flags it: `middle`).
fn described_site() -> Server {
    Server::start(|_| {
        Reply {
        status: 200,
        content_type: "text/html; charset=utf-8",
        body: "<!doctype html><html><head>\
               <meta name=\"description\" content=\"Forty percent off every middle thing &amp; more\">\
               <title>Spring sale &mdash; middle</title></head>\
               <body><p>Buy</p></body></html>"
            .into(),
        delay: Duration::ZERO,
    }
    })
}

#[test]
fn the_fetched_title_and_description_reach_the_api_and_the_review_page() {
    let scorer = scorer();
    let described = described_site();
    let app = start(&scorer, &[]);
    let code = create(&app, &described.url("/middle/sale"));
    let review = first_review(&app, &code);
    assert_eq!(review["verdict"], "flagged", "{review}");
    let (title, description) = (
        "Spring sale — middle",
        "Forty percent off every middle thing & more",
    );
    // Kept with the review, and shown with the link's reviews.
    assert_eq!(review["title"], title, "{review}");
    assert_eq!(review["description"], description, "{review}");
    // In the listing by verdict: each link with its latest review's findings.
    let page = app.api_get("/api/v1/reviews?verdict=flagged", ADMIN);
    let item = &page["items"][0];
    assert_eq!(item["code"], code.as_str(), "{page}");
    let latest = &item["latest_review"];
    assert_eq!(latest["id"], review["id"], "{page}");
    assert_eq!(latest["title"], title, "{page}");
    assert_eq!(latest["description"], description, "{page}");
    assert_eq!(latest["final_url"], described.url("/middle/sale"), "{page}");

    // On the review page, in both languages.
    let admin = PageClient::signed_in(&app, ADMIN);
    let shown = "Forty percent off every middle thing &amp; more";
    let html = admin.html("/ui/reviews", 200);
    assert!(html.contains(&format!("id=\"r-{code}\"")), "{html}");
    assert!(html.contains(title), "{html}");
    assert!(html.contains(shown), "{html}");
    assert!(html.contains(">Page description<"), "{html}");
    admin.get("/ui/lang?set=zh-CN&back=%2F");
    let zh = admin.html("/ui/reviews", 200);
    assert!(zh.contains("<html lang=\"zh-CN\">"), "{zh}");
    assert!(zh.contains(title) && zh.contains(shown), "{zh}");
    assert!(zh.contains(">页面描述<"), "{zh}");
}

/// An admin's verdict checks nothing: the link's latest review then has no findings, and the
/// listing and the page show those of its latest checked review beside the verdict.
#[test]
fn an_overridden_link_still_shows_what_its_last_checks_found() {
    let scorer = scorer();
    let described = described_site();
    let tools = tempfile::tempdir().expect("dir");
    let browser = fake_browser(tools.path());
    let app = start(
        &scorer,
        &[("browser", &format!("\"{}\"", browser.display()))],
    );
    let code = create(&app, &described.url("/middle/sale"));
    let checked = first_review(&app, &code);
    assert_eq!(checked["screenshot"], true, "{checked}");
    let response = post_review(&app, &code, ADMIN, Some(&json!({"verdict": "blocked"})));
    assert_eq!(response.status(), 200);

    let page = app.api_get("/api/v1/reviews?verdict=blocked", ADMIN);
    let item = &page["items"][0];
    assert_eq!(item["code"], code.as_str(), "{page}");
    assert_eq!(item["latest_review"]["trigger"], "override", "{page}");
    assert!(item["latest_review"]["title"].is_null(), "{page}");
    let found = &item["checked_review"];
    assert_eq!(found["id"], checked["id"], "{page}");
    assert_eq!(found["title"], "Spring sale — middle", "{page}");
    assert_eq!(
        found["description"], "Forty percent off every middle thing & more",
        "{page}"
    );

    let admin = PageClient::signed_in(&app, ADMIN);
    let html = admin.html("/ui/reviews?verdict=blocked", 200);
    assert!(html.contains("Spring sale — middle"), "{html}");
    assert!(
        html.contains("Forty percent off every middle thing &amp; more"),
        "{html}"
    );
    let id = checked["id"].as_u64().expect("id");
    let shot = format!("/ui/reviews/{code}/{id}/screenshot.png");
    assert!(html.contains(&format!("src=\"{shot}\"")), "{html}");
    assert_eq!(admin.get(&shot).status(), 200);
    assert!(html.contains("Found by the review of"), "{html}");
    admin.get("/ui/lang?set=zh-CN&back=%2F");
    let zh = admin.html("/ui/reviews?verdict=blocked", 200);
    assert!(zh.contains("的审核所见"), "{zh}");
}
