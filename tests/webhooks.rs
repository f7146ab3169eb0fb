//! Webhooks from the outside: a receiver on a plain `TcpListener` records every request
//! (method, path, headers, body, what it answered) and is scripted per request (answer, fail
//! the first attempts, hold the connection, or not listen at all). Every event arrives signed
//! with the right headers and data; server errors are retried with the same delivery id; a
//! link's events arrive in order; the outbox survives a restart with the receiver down; a
//! hanging receiver holds neither redirects nor creates; two PostgreSQL instances deliver each
//! event once; a bad `[[webhooks]]` entry stops the binary with its key named.
//!
//! In-process apps move their clock (`TestApp::advance`) to skip retry waits: the sender
//! takes what is due by the app's clock. Every test honours `TEST_STORE=postgres`; the
//! two-instance test needs PostgreSQL (skipped without it unless `REQUIRE_POSTGRES=1`).

mod common;

use std::collections::{HashMap, HashSet};
use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{postgres, TestApp, ADMIN};
use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{json, Value};
use sha2::Sha256;

const SECRET: &str = "whsec-test-0123456789";
const ALL: &[&str] = &[
    "link.created",
    "link.updated",
    "link.deleted",
    "link.ended",
    "visit",
    "lead",
    "review",
];
const BROWSER_ACCEPT: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
const DESKTOP: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";

// ---------------------------------------------------------------------------------------------
// The receiver: one thread per connection, one request per connection.

/// One request the receiver got.
#[derive(Clone, Debug)]
struct Hit {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// The status it was answered with; `None`: held, never answered.
    answered: Option<u16>,
}

impl Hit {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    fn event(&self) -> String {
        self.json()["event"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// `X-Vsl-Delivery`, when it is a number.
    fn delivery(&self) -> Option<u64> {
        self.header("x-vsl-delivery")?.parse().ok()
    }

    fn ok(&self) -> bool {
        self.answered.is_some_and(|s| (200..300).contains(&s))
    }

    /// `data.code` of a link's event (`None` for others).
    fn code(&self) -> Option<String> {
        self.json()["data"]["code"].as_str().map(str::to_string)
    }
}

/// What the receiver does with a request.
#[derive(Clone, Copy, Debug)]
enum Answer {
    Status(u16),
    /// Keeps the connection open, never answering, until the receiver is dropped.
    Hold,
}

/// Decides the answer from the request and every request before it.
type Script = Arc<dyn Fn(&Hit, &[Hit]) -> Answer + Send + Sync>;

struct Receiver {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Hit>>>,
    open: Arc<AtomicBool>,
}

impl Receiver {
    fn start(script: impl Fn(&Hit, &[Hit]) -> Answer + Send + Sync + 'static) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        Self::serve(listener, Arc::new(script))
    }

    /// Starts listening on `addr` (a port chosen earlier and left closed).
    fn start_at(
        addr: SocketAddr,
        script: impl Fn(&Hit, &[Hit]) -> Answer + Send + Sync + 'static,
    ) -> Receiver {
        let started = Instant::now();
        let listener = loop {
            match TcpListener::bind(addr) {
                Ok(l) => break l,
                Err(e) => {
                    assert!(
                        started.elapsed() < Duration::from_secs(10),
                        "bind {addr}: {e}"
                    );
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        };
        Self::serve(listener, Arc::new(script))
    }

    fn serve(listener: TcpListener, script: Script) -> Receiver {
        let addr = listener.local_addr().expect("addr");
        let seen: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let open = Arc::new(AtomicBool::new(true));
        let (kept, still) = (seen.clone(), open.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                if !still.load(Ordering::Acquire) {
                    return;
                }
                let (script, seen, open) = (script.clone(), kept.clone(), still.clone());
                std::thread::spawn(move || answer(stream, &script, &seen, &open));
            }
        });
        Receiver { addr, seen, open }
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    fn hits(&self) -> Vec<Hit> {
        self.seen.lock().expect("lock").clone()
    }

    /// Waits until `check` holds for the requests so far; returns them.
    fn wait_for(&self, limit: Duration, what: &str, check: impl Fn(&[Hit]) -> bool) -> Vec<Hit> {
        let mut hits = Vec::new();
        wait_until(limit, what, || {
            hits = self.hits();
            check(&hits)
        });
        hits
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        // Releases held connections and wakes the acceptor to let it end.
        self.open.store(false, Ordering::Release);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

fn answer(stream: TcpStream, script: &Script, seen: &Mutex<Vec<Hit>>, open: &AtomicBool) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let Some(common::stub::Request {
        method,
        path,
        headers,
        body,
    }) = common::stub::read_request(&mut reader)
    else {
        return;
    };
    let mut hit = Hit {
        method,
        path,
        headers,
        body,
        answered: None,
    };
    let decided = {
        let mut seen = seen.lock().expect("lock");
        let decided = script(&hit, &seen);
        if let Answer::Status(status) = decided {
            hit.answered = Some(status);
        }
        seen.push(hit);
        decided
    };
    match decided {
        Answer::Hold => {
            while open.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Answer::Status(status) => {
            let head = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
            );
            let mut stream = stream;
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.flush();
        }
    }
}

fn always(status: u16) -> impl Fn(&Hit, &[Hit]) -> Answer + Send + Sync + 'static {
    move |_, _| Answer::Status(status)
}

/// 500 to the first attempt of each delivery, 200 to the next.
fn fail_first_attempts(hit: &Hit, seen: &[Hit]) -> Answer {
    let again = seen
        .iter()
        .any(|h| h.delivery().is_some() && h.delivery() == hit.delivery());
    Answer::Status(if again { 200 } else { 500 })
}

/// A port nobody listens on (chosen, then closed).
fn closed_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr")
}

// ---------------------------------------------------------------------------------------------
// Helpers

fn hook_toml(url: &str, events: &[&str]) -> String {
    let events: Vec<String> = events.iter().map(|e| format!("\"{e}\"")).collect();
    format!(
        "[[webhooks]]\nname = \"crm\"\nurl = \"{url}\"\nevents = [{}]\nsecret = \"{SECRET}\"\n",
        events.join(", ")
    )
}

/// Polls `check` every 50 ms for up to `limit`; panics naming `what` when it never holds.
fn wait_until(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Like [`Receiver::wait_for`], moving the in-process app's clock a second forward at each
/// look, so that retries come due without waiting for them.
fn wait_advancing(
    app: &TestApp,
    receiver: &Receiver,
    limit: Duration,
    what: &str,
    check: impl Fn(&[Hit]) -> bool,
) -> Vec<Hit> {
    let mut hits = Vec::new();
    wait_until(limit, what, || {
        hits = receiver.hits();
        if check(&hits) {
            return true;
        }
        app.advance(Duration::from_secs(1));
        false
    });
    hits
}

/// `sha256=` and the hex HMAC-SHA256 of `body`, computed here, independently of the app.
fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("hmac key");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Asserts what every delivery carries: a POST to the configured path, JSON, a valid
/// signature, `X-Vsl-Event` naming the body's event, a numeric `X-Vsl-Delivery`, an `at`.
/// Returns the body.
fn check_delivery(hit: &Hit) -> Value {
    let body = hit.json();
    let what = String::from_utf8_lossy(&hit.body).into_owned();
    assert_eq!(hit.method, "POST", "{what}");
    assert_eq!(hit.path, "/hook", "{what}");
    assert!(
        hit.header("content-type")
            .is_some_and(|t| t.starts_with("application/json")),
        "content-type {:?}: {what}",
        hit.header("content-type")
    );
    assert!(body.is_object(), "not JSON: {what}");
    assert_eq!(
        hit.header("x-vsl-signature"),
        Some(signature(SECRET, &hit.body).as_str()),
        "the signature of {what}"
    );
    assert_ne!(
        hit.header("x-vsl-signature"),
        Some(signature("another-secret-0123", &hit.body).as_str())
    );
    let event = body["event"].as_str().unwrap_or_default();
    assert!(ALL.contains(&event), "event {event:?}: {what}");
    assert_eq!(hit.header("x-vsl-event"), Some(event), "{what}");
    assert!(
        hit.delivery().is_some(),
        "X-Vsl-Delivery {:?}: {what}",
        hit.header("x-vsl-delivery")
    );
    let at = body["at"].as_str().unwrap_or_default();
    assert!(
        at.len() >= 20 && at.as_bytes()[10] == b'T' && (at.ends_with('Z') || at.contains('+')),
        "at {at:?}: {what}"
    );
    assert!(body["data"].is_object(), "{what}");
    body
}

fn code_of(link: &Value) -> String {
    link["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no code in {link}"))
        .to_string()
}

fn id_of(link: &Value) -> u64 {
    link["id"]
        .as_u64()
        .unwrap_or_else(|| panic!("no id in {link}"))
}

fn patch(app: &TestApp, code: &str, body: &Value) {
    let response = app
        .req(Method::PATCH, &format!("/api/v1/links/{code}"), Some(ADMIN))
        .json(body)
        .send()
        .expect("PATCH");
    assert_eq!(response.status(), 200, "PATCH {code}");
}

fn delete(app: &TestApp, code: &str) {
    let response = app
        .req(
            Method::DELETE,
            &format!("/api/v1/links/{code}"),
            Some(ADMIN),
        )
        .send()
        .expect("DELETE");
    assert_eq!(response.status(), 204, "DELETE {code}");
}

/// The successful deliveries of `event` about the link `code`.
fn delivered<'a>(hits: &'a [Hit], event: &str, code: &str) -> Vec<&'a Hit> {
    hits.iter()
        .filter(|h| h.ok() && h.event() == event && h.code().as_deref() == Some(code))
        .collect()
}

/// The visits of `code` in the successful `visit` deliveries.
fn visits_of(hits: &[Hit], code: &str) -> Vec<Value> {
    hits.iter()
        .filter(|h| h.ok() && h.event() == "visit")
        .flat_map(|h| {
            h.json()["data"]["visits"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|v| v["code"] == code)
        .collect()
}

fn metric(app: &TestApp, line_start: &str) -> f64 {
    app.metric(line_start)
}

// ---------------------------------------------------------------------------------------------

#[test]
fn the_test_signature_is_the_rfc_4231_hmac() {
    // So that a passing signature check below means the app signs correctly.
    assert_eq!(
        signature("Jefe", b"what do ya want for nothing?"),
        "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
}

#[test]
fn every_event_arrives_signed() {
    let receiver = Receiver::start(always(200));
    let app = TestApp::start_with(&hook_toml(&receiver.url(), ALL), &[]);

    // A link created, changed, visited, deleted.
    let created = app.create(json!({"url": "https://example.com/hooked", "title": "Hooked"}));
    let code = code_of(&created);
    let id = id_of(&created);
    patch(&app, &code, &json!({"title": "Re-hooked", "tags": ["crm"]}));
    for _ in 0..3 {
        assert_eq!(app.get(&format!("/{code}")).status(), 302);
    }
    receiver.wait_for(Duration::from_secs(20), "3 visits of the link", |h| {
        visits_of(h, &code).len() >= 3
    });
    delete(&app, &code);

    // A lead through a form.
    let form_link = app.create(json!({
        "url": "https://example.com/after-the-form",
        "form": {
            "fields": [
                {"name": "phone", "label": "Mobile phone", "type": "tel", "required": true},
                {"name": "note", "label": "Your note", "type": "text"},
            ],
            "consent": "I agree to be contacted",
        },
    }));
    let form_code = code_of(&form_link);
    let form_id = id_of(&form_link);
    let lead = app
        .client
        .post(app.url(&format!("/{form_code}")))
        .header("accept", BROWSER_ACCEPT)
        .header("user-agent", DESKTOP)
        .form(&[
            ("form", "1"),
            ("phone", "+44 20 7946 0958"),
            ("note", "call me"),
            ("consent", "yes"),
        ])
        .send()
        .expect("POST the form");
    assert_eq!(lead.status(), 302, "the lead is taken");

    // An admin's verdict (the review itself is off: overrides still work).
    let reviewed = code_of(&app.create(json!({"url": "https://example.com/reviewed"})));
    let response = app
        .req(
            Method::POST,
            &format!("/api/v1/links/{reviewed}/review"),
            Some(ADMIN),
        )
        .json(&json!({"verdict": "blocked"}))
        .send()
        .expect("review");
    assert_eq!(response.status(), 200, "override");

    // A link that expires, ended by the maintenance job.
    let ended = code_of(&app.create(json!({"url": "https://example.com/short-lived", "ttl": 60})));
    app.advance(Duration::from_secs(61));
    let response = app
        .req(Method::POST, "/api/v1/maintenance/run", Some(ADMIN))
        .send()
        .expect("maintenance");
    assert_eq!(response.status(), 200, "maintenance run");

    let hits = receiver.wait_for(Duration::from_secs(30), "every kind of event", |h| {
        !delivered(h, "link.created", &code).is_empty()
            && !delivered(h, "link.updated", &code).is_empty()
            && !delivered(h, "link.deleted", &code).is_empty()
            && !delivered(h, "review", &reviewed).is_empty()
            && !delivered(h, "link.ended", &ended).is_empty()
            && h.iter()
                .any(|h| h.event() == "lead" && h.json()["data"]["link_id"] == form_id)
    });

    // Every request, whatever its event: signed, named, numbered.
    for hit in &hits {
        check_delivery(hit);
    }
    let ids: Vec<u64> = hits.iter().filter_map(Hit::delivery).collect();
    let distinct: HashSet<u64> = ids.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        ids.len(),
        "a delivery id came twice: {ids:?}"
    );

    let body = |event: &str, code: &str| {
        let found = delivered(&hits, event, code);
        assert_eq!(found.len(), 1, "{event} of {code}: {found:?}");
        found[0].json()
    };
    let short_url = format!("{}/{code}", common::BASE_URL);
    let made = body("link.created", &code);
    assert_eq!(made["data"]["id"], id);
    assert_eq!(made["data"]["url"], "https://example.com/hooked");
    assert_eq!(made["data"]["short_url"], short_url.as_str());
    assert_eq!(made["data"]["domain"], "sl.test");
    assert_eq!(made["data"]["title"], "Hooked");
    assert_eq!(made["data"]["status"], "active");
    let changed = body("link.updated", &code);
    assert_eq!(changed["data"]["id"], id);
    assert_eq!(changed["data"]["url"], "https://example.com/hooked");
    assert_eq!(changed["data"]["title"], "Re-hooked");
    assert_eq!(changed["data"]["tags"], json!(["crm"]));
    let gone = body("link.deleted", &code);
    assert_eq!(gone["data"]["id"], id);
    assert_eq!(gone["data"]["status"], "deleted");

    let visits = visits_of(&hits, &code);
    assert_eq!(visits.len(), 3, "{visits:?}");
    for visit in &visits {
        assert!(visit["at"].is_string(), "{visit}");
        assert!(visit.get("ip").is_none(), "a visit's ip went out: {visit}");
        assert_eq!(visit["domain"], "sl.test", "{visit}");
    }

    let leads: Vec<Value> = hits
        .iter()
        .filter(|h| h.event() == "lead")
        .map(Hit::json)
        .collect();
    assert_eq!(leads.len(), 1, "{leads:?}");
    assert_eq!(leads[0]["data"]["link_id"], form_id);
    assert_eq!(leads[0]["data"]["domain"], "sl.test");
    assert_eq!(leads[0]["data"]["values"]["note"], "call me");
    assert!(
        leads[0]["data"]["values"]["phone"]
            .as_str()
            .is_some_and(|p| p.contains("2079460958")),
        "{}",
        leads[0]
    );
    // The consent text the visitor ticked, as it read then.
    assert_eq!(leads[0]["data"]["consent"], "I agree to be contacted");

    let verdict = body("review", &reviewed);
    assert_eq!(verdict["data"]["verdict"], "blocked");
    assert_eq!(verdict["data"]["by"], "admin");
    assert_eq!(verdict["data"]["domain"], "sl.test");

    let expired = body("link.ended", &ended);
    assert_eq!(expired["data"]["url"], "https://example.com/short-lived");
    assert_eq!(expired["data"]["status"], "expired");
    assert!(expired["data"]["expires_at"].is_string());

    wait_until(Duration::from_secs(10), "the outbox empty", || {
        metric(&app, "vsl_webhook_outbox ") == 0.0
    });
}

/// The same code on two domains (SPEC §26): every event names the domain of its link — the
/// visits, the lead and the verdict as the `link.*` events do — and a verdict on one domain's
/// link leaves the other's alone.
#[test]
fn events_name_the_domain_of_their_link() {
    let receiver = Receiver::start(always(200));
    let app = TestApp::start_with(&hook_toml(&receiver.url(), ALL), &[]);
    let added = app
        .req(Method::POST, "/api/v1/domains", Some(ADMIN))
        .json(&json!({"host": "go.w.com"}))
        .send()
        .expect("add domain");
    assert_eq!(added.status(), 201);
    let home = app.create(json!({"url": "https://home.example/", "code": "same"}));
    let away = app.create(json!({
        "url": "https://away.example/",
        "code": "same",
        "domain": "go.w.com",
        "form": {"fields": [{"name": "email", "label": "Email", "type": "email", "required": true}]},
    }));
    let (home_id, away_id) = (id_of(&home), id_of(&away));
    let on = |host: &str| {
        app.client
            .get(app.url("/same"))
            .header("Host", host)
            .send()
            .expect("GET")
    };
    app.create(json!({"url": "https://away.example/plain", "code": "plain", "domain": "go.w.com"}));
    assert_eq!(on("sl.test").status(), 302);
    let plain = app
        .client
        .get(app.url("/plain"))
        .header("Host", "go.w.com")
        .send()
        .expect("GET");
    assert_eq!(plain.status(), 302);
    let lead = app
        .client
        .post(app.url("/same"))
        .header("Host", "go.w.com")
        .header("accept", BROWSER_ACCEPT)
        .header("user-agent", DESKTOP)
        .form(&[("form", "1"), ("email", "a@b.example")])
        .send()
        .expect("POST the form");
    assert_eq!(lead.status(), 302, "the lead is taken");
    let response = app
        .req(
            Method::POST,
            "/api/v1/links/same/review?domain=go.w.com",
            Some(ADMIN),
        )
        .json(&json!({"verdict": "blocked"}))
        .send()
        .expect("review");
    assert_eq!(response.status(), 200, "override");

    let hits = receiver.wait_for(Duration::from_secs(30), "visits, lead and verdict", |h| {
        let visits = visits_of(h, "same");
        visits.iter().any(|v| v["domain"] == "sl.test")
            && !visits_of(h, "plain").is_empty()
            && h.iter().any(|h| h.ok() && h.event() == "lead")
            && !delivered(h, "review", "same").is_empty()
    });
    let home_visits: Vec<Value> = visits_of(&hits, "same")
        .into_iter()
        .filter(|v| v["domain"] == "sl.test")
        .collect();
    assert_eq!(home_visits.len(), 1, "{home_visits:?}");
    for visit in visits_of(&hits, "same") {
        assert!(
            visit["domain"] == "sl.test" || visit["domain"] == "go.w.com",
            "{visit}"
        );
    }
    let plain = visits_of(&hits, "plain");
    assert_eq!(plain.len(), 1, "{plain:?}");
    assert_eq!(plain[0]["domain"], "go.w.com");
    let lead = hits
        .iter()
        .find(|h| h.ok() && h.event() == "lead")
        .map(Hit::json)
        .expect("lead");
    assert_eq!(lead["data"]["link_id"], away_id);
    assert_eq!(lead["data"]["domain"], "go.w.com");
    let verdict = delivered(&hits, "review", "same")[0].json();
    assert_eq!(verdict["data"]["link_id"], away_id);
    assert_eq!(verdict["data"]["domain"], "go.w.com");
    let created: Vec<Value> = delivered(&hits, "link.created", "same")
        .into_iter()
        .map(Hit::json)
        .collect();
    assert!(created
        .iter()
        .any(|c| c["data"]["id"] == away_id && c["data"]["domain"] == "go.w.com"));
    assert!(created
        .iter()
        .any(|c| c["data"]["id"] == home_id && c["data"]["domain"] == "sl.test"));

    // The verdict blocked go.w.com/same only.
    let review_of = |path: &str| -> Value {
        app.req(Method::GET, path, Some(ADMIN))
            .send()
            .expect("GET")
            .json()
            .expect("json")
    };
    assert_eq!(
        review_of("/api/v1/links/same?domain=go.w.com")["review"]["verdict"],
        "blocked"
    );
    assert_eq!(
        review_of("/api/v1/links/same")["review"],
        Value::Null,
        "not the other link"
    );
    assert_eq!(
        on("sl.test").status(),
        302,
        "the default domain's link still redirects"
    );
}

#[test]
fn retries_after_server_errors() {
    // 500 to the first two requests, 200 after.
    let receiver =
        Receiver::start(|_, seen: &[Hit]| Answer::Status(if seen.len() < 2 { 500 } else { 200 }));
    let app = TestApp::start_with(&hook_toml(&receiver.url(), &["link.created"]), &[]);
    let code = code_of(&app.create(json!({"url": "https://example.com/retried"})));

    let hits = wait_advancing(
        &app,
        &receiver,
        Duration::from_secs(30),
        "three attempts",
        |h| h.len() >= 3,
    );
    assert_eq!(
        hits.iter().map(|h| h.answered).collect::<Vec<_>>(),
        vec![Some(500), Some(500), Some(200)]
    );
    let id = hits[0].delivery().expect("a delivery id");
    for hit in &hits {
        check_delivery(hit);
        assert_eq!(hit.delivery(), Some(id), "the same delivery each time");
        assert_eq!(hit.body, hits[0].body, "the same body each time");
        assert_eq!(hit.code().as_deref(), Some(code.as_str()));
    }
    wait_until(Duration::from_secs(10), "the outbox empty", || {
        metric(&app, "vsl_webhook_outbox ") == 0.0
    });
    assert_eq!(
        metric(&app, "vsl_webhook_deliveries_total{outcome=\"failed\"}"),
        2.0
    );
    assert_eq!(
        metric(&app, "vsl_webhook_deliveries_total{outcome=\"delivered\"}"),
        1.0
    );

    // Delivered: never sent again, however much time passes.
    for _ in 0..10 {
        app.advance(Duration::from_secs(600));
        std::thread::sleep(Duration::from_millis(150));
    }
    assert_eq!(receiver.hits().len(), 3, "sent again after a 200");

    // A later event still goes, under a new id.
    let later = code_of(&app.create(json!({"url": "https://example.com/later"})));
    let hits = receiver.wait_for(Duration::from_secs(20), "the later event", |h| {
        !delivered(h, "link.created", &later).is_empty()
    });
    assert_eq!(hits.len(), 4, "{hits:?}");
    check_delivery(&hits[3]);
    assert!(hits[3].delivery().expect("id") > id);
}

#[test]
fn order_per_link() {
    let receiver = Receiver::start(fail_first_attempts);
    let app = TestApp::start_with(
        &hook_toml(
            &receiver.url(),
            &["link.created", "link.updated", "link.deleted"],
        ),
        &[],
    );
    let created = app.create(json!({"url": "https://example.com/ordered"}));
    let code = code_of(&created);
    patch(
        &app,
        &code,
        &json!({"url": "https://example.com/ordered/2"}),
    );
    delete(&app, &code);

    let hits = wait_advancing(
        &app,
        &receiver,
        Duration::from_secs(40),
        "created, updated, deleted delivered",
        |h| {
            ["link.created", "link.updated", "link.deleted"]
                .iter()
                .all(|e| !delivered(h, e, &code).is_empty())
        },
    );
    let ours: Vec<&Hit> = hits
        .iter()
        .filter(|h| h.code().as_deref() == Some(code.as_str()))
        .collect();
    for hit in &ours {
        check_delivery(hit);
    }
    let seen: Vec<(String, Option<u16>)> = ours.iter().map(|h| (h.event(), h.answered)).collect();
    // One at a time, in order: each event's failed attempt and its retry before the next
    // event is tried at all.
    assert_eq!(
        seen,
        vec![
            ("link.created".to_string(), Some(500)),
            ("link.created".to_string(), Some(200)),
            ("link.updated".to_string(), Some(500)),
            ("link.updated".to_string(), Some(200)),
            ("link.deleted".to_string(), Some(500)),
            ("link.deleted".to_string(), Some(200)),
        ],
        "the attempts for {code}"
    );
    let ids: Vec<u64> = ours.iter().filter_map(|h| h.delivery()).collect();
    assert!(ids.windows(2).all(|w| w[0] <= w[1]), "{ids:?}");
    assert_eq!(
        ours[3].json()["data"]["url"],
        "https://example.com/ordered/2"
    );
}

#[test]
fn delivery_survives_a_restart_with_the_receiver_down() {
    let port = closed_port();
    let url = format!("http://{port}/hook");
    let mut app = TestApp::binary_with(&hook_toml(&url, &["link.created"]), &[]);
    let code = code_of(&app.create(json!({"url": "https://example.com/survivor"})));
    // Tried and failed at least once: it is in the outbox, not only in memory.
    wait_until(Duration::from_secs(20), "a failed attempt", || {
        metric(&app, "vsl_webhook_deliveries_total{outcome=\"failed\"}") >= 1.0
    });
    assert_eq!(metric(&app, "vsl_webhook_outbox "), 1.0);
    assert!(app.terminate().success(), "a clean stop");

    let receiver = Receiver::start_at(port, always(200));
    app.restart();
    let hits = receiver.wait_for(
        Duration::from_secs(30),
        "link.created after the restart",
        |h| !delivered(h, "link.created", &code).is_empty(),
    );
    for hit in &hits {
        check_delivery(hit);
    }
    let body = hits[0].json();
    assert_eq!(body["data"]["url"], "https://example.com/survivor");
    wait_until(Duration::from_secs(10), "the outbox empty", || {
        metric(&app, "vsl_webhook_outbox ") == 0.0
    });
    assert_eq!(
        delivered(&receiver.hits(), "link.created", &code).len(),
        1,
        "delivered once"
    );
}

#[test]
fn events_told_just_before_a_stop_are_delivered_after_the_restart() {
    // No wait before the stop: the link.created event and the visits may still be in memory
    // (the queue, the gathered visits) when SIGTERM comes; shutdown puts them in the outbox.
    let port = closed_port();
    let url = format!("http://{port}/hook");
    let mut app = TestApp::binary_with(&hook_toml(&url, &["link.created", "visit"]), &[]);
    let code = code_of(&app.create(json!({"url": "https://example.com/last-moment"})));
    for _ in 0..3 {
        assert_eq!(app.get(&format!("/{code}")).status(), 302);
    }
    assert!(app.terminate().success(), "a clean stop");

    let receiver = Receiver::start_at(port, always(200));
    app.restart();
    let hits = receiver.wait_for(
        Duration::from_secs(30),
        "link.created and 3 visits after the restart",
        |h| !delivered(h, "link.created", &code).is_empty() && visits_of(h, &code).len() >= 3,
    );
    for hit in &hits {
        check_delivery(hit);
    }
    assert_eq!(visits_of(&hits, &code).len(), 3, "{hits:?}");
}

#[test]
fn a_hanging_receiver_does_not_hold_redirects() {
    let receiver = Receiver::start(|_, _: &[Hit]| Answer::Hold);
    let app = TestApp::start_with(&hook_toml(&receiver.url(), ALL), &[]);
    // Shorter than a delivery's own time limit (10 s): a request that waited for a held
    // delivery would fail here.
    let client = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(8))
        .build()
        .expect("client");
    let create = |i: usize| {
        let response = client
            .post(app.url("/api/v1/links"))
            .bearer_auth(ADMIN)
            .json(&json!({"url": format!("https://example.com/held/{i}")}))
            .send()
            .unwrap_or_else(|e| panic!("create {i} with deliveries held: {e}"));
        assert_eq!(response.status(), 201, "create {i}");
        code_of(&response.json().expect("json"))
    };
    let first = create(0);
    receiver.wait_for(Duration::from_secs(20), "a held delivery", |h| {
        !h.is_empty()
    });
    let mut codes = vec![first];
    for i in 1..5 {
        codes.push(create(i));
    }
    for i in 0..50 {
        let code = &codes[i % codes.len()];
        let response = client
            .get(app.url(&format!("/{code}")))
            .send()
            .unwrap_or_else(|e| panic!("redirect {i} with deliveries held: {e}"));
        assert_eq!(response.status(), 302, "redirect {i}");
    }
    // Still pending: nothing was answered.
    assert!(receiver.hits().iter().all(|h| h.answered.is_none()));
    assert!(metric(&app, "vsl_webhook_outbox ") >= 1.0);
}

#[test]
fn two_postgres_instances_deliver_each_event_once() {
    let Some(url) = postgres::fresh_database() else {
        return;
    };
    // Every third delivery fails its first attempt, so retries are taken by either instance.
    let receiver = Receiver::start(|hit: &Hit, seen: &[Hit]| {
        let id = hit.delivery().unwrap_or(0);
        let again = seen.iter().any(|h| h.delivery() == Some(id));
        Answer::Status(if id % 3 == 0 && !again { 500 } else { 200 })
    });
    let config = hook_toml(&receiver.url(), &["link.created"]);
    let a = TestApp::start_on(&url, &config, &[]);
    let b = TestApp::start_on(&url, &config, &[]);
    const N: usize = 40;
    let mut codes = HashSet::new();
    for i in 0..N {
        let app = if i % 2 == 0 { &a } else { &b };
        codes.insert(code_of(
            &app.create(json!({"url": format!("https://example.com/shared/{i}")})),
        ));
    }
    assert_eq!(codes.len(), N);
    let delivered_codes = |hits: &[Hit]| -> HashSet<String> {
        hits.iter()
            .filter(|h| h.ok() && h.event() == "link.created")
            .filter_map(Hit::code)
            .collect()
    };
    receiver.wait_for(Duration::from_secs(60), "40 link.created delivered", |h| {
        delivered_codes(h) == codes
    });
    wait_until(Duration::from_secs(20), "both outboxes empty", || {
        metric(&a, "vsl_webhook_outbox ") == 0.0 && metric(&b, "vsl_webhook_outbox ") == 0.0
    });
    // A little longer than a sender's idle look: a second send would show.
    std::thread::sleep(Duration::from_millis(1500));
    let hits = receiver.hits();
    for hit in &hits {
        check_delivery(hit);
    }
    let mut ok_by_id: HashMap<u64, usize> = HashMap::new();
    for hit in hits.iter().filter(|h| h.ok()) {
        *ok_by_id.entry(hit.delivery().expect("id")).or_default() += 1;
    }
    let twice: Vec<_> = ok_by_id.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    assert_eq!(ok_by_id.len(), N, "one delivery per event");
    let by_instance = |app: &TestApp, outcome: &str| {
        metric(
            app,
            &format!("vsl_webhook_deliveries_total{{outcome=\"{outcome}\"}}"),
        )
        .max(0.0)
    };
    assert_eq!(
        by_instance(&a, "delivered") + by_instance(&b, "delivered"),
        N as f64
    );
    eprintln!(
        "instance A delivered {}, instance B {}; {} first attempts failed",
        by_instance(&a, "delivered"),
        by_instance(&b, "delivered"),
        by_instance(&a, "failed") + by_instance(&b, "failed"),
    );
}

/// Runs the server with `webhooks` as its only extra configuration; its exit status and
/// stderr, or a panic when it is still running after 30 s.
fn serve_with(dir: &Path, webhooks: &str) -> (std::process::ExitStatus, String) {
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nbase_url = \"http://sl.test\"\n[storage]\npath = \"{}\"\n\n{webhooks}",
            dir.join("data").display()
        ),
    )
    .expect("config");
    let mut command = Command::new(env!("CARGO_BIN_EXE_vshortlink"));
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("VSL_") {
            command.env_remove(key);
        }
    }
    let mut child = command
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run vshortlink");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server started with {webhooks}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    (status, stderr)
}

#[test]
fn bad_webhook_config_is_refused() {
    let good = "name = \"crm\"\nurl = \"https://crm.example.com/hook\"\nevents = [\"link.created\"]\nsecret = \"at-least-16-characters\"\n";
    let cases = [
        (
            "[[webhooks]]\nurl = \"not a url\"\nevents = [\"link.created\"]\nsecret = \"at-least-16-characters\"\n".to_string(),
            "webhooks[0].url",
        ),
        (
            "[[webhooks]]\nurl = \"ftp://crm.example.com/hook\"\nevents = [\"link.created\"]\nsecret = \"at-least-16-characters\"\n".to_string(),
            "webhooks[0].url",
        ),
        (
            "[[webhooks]]\nurl = \"https://crm.example.com/hook\"\nevents = [\"link.created\", \"link.exploded\"]\nsecret = \"at-least-16-characters\"\n".to_string(),
            "webhooks[0].events",
        ),
        (
            "[[webhooks]]\nurl = \"https://crm.example.com/hook\"\nevents = []\nsecret = \"at-least-16-characters\"\n".to_string(),
            "webhooks[0].events",
        ),
        (
            "[[webhooks]]\nurl = \"https://crm.example.com/hook\"\nevents = [\"visit\"]\nsecret = \"too-short\"\n".to_string(),
            "webhooks[0].secret",
        ),
        (
            format!("[[webhooks]]\n{good}\n[[webhooks]]\nurl = \"https://other.example.com/hook\"\nevents = [\"lead\"]\nsecret = \"short\"\n"),
            "webhooks[1].secret",
        ),
        (
            format!("[[webhooks]]\n{good}\n[[webhooks]]\n{good}"),
            "webhooks[1].name",
        ),
    ];
    for (webhooks, key) in cases {
        let dir = tempfile::tempdir().expect("dir");
        let (status, stderr) = serve_with(dir.path(), &webhooks);
        assert!(
            !status.success(),
            "started with {webhooks}: {status} {stderr}"
        );
        assert!(
            stderr.contains(key),
            "the refusal of\n{webhooks}\ndoes not name `{key}`: {stderr}"
        );
    }
}
