//! The review's checks (`review::checks::Checker`) in process against real local servers: pages
//! and a chat-completions scorer on plain `TcpListener` threads speaking HTTP/1.1, on
//! 127.0.0.1 and 127.0.0.2 (Linux routes all of 127/8 to loopback). An address policy that
//! refuses only 127.0.0.2 stands for "private" where the default policy would refuse every
//! local server. The browser is a script that writes a PNG, or the real Chromium when installed.
#![cfg(feature = "review")]

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use vshortlink::blocklist::BlockedHosts;
use vshortlink::config::{ReviewConfig, ScorerConfig};
use vshortlink::model::{CheckRecord, Verdict};
use vshortlink::review::checks::{AddressPolicy, Checker, Outcome};

// ---------------------------------------------------------------------------------------------
// A tiny HTTP/1.1 server: one thread per connection, one request per connection.

#[derive(Clone, Debug)]
struct Request {
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

enum Reply {
    Full {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// Reads the request and answers nothing for this long.
    Hang(Duration),
    /// Writes `body` in `chunk`-byte pieces with a pause between them, then reports how many
    /// bytes were written before a write failed (and whether one did).
    Paced {
        head: String,
        body: Vec<u8>,
        chunk: usize,
        pause: Duration,
        report: mpsc::Sender<(usize, bool)>,
    },
}

struct Server {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

fn serve(ip: &str, handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Server {
    let listener = TcpListener::bind((ip, 0)).unwrap_or_else(|e| panic!("bind {ip}: {e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let hits = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let handler = Arc::new(handler);
    let (h, r) = (hits.clone(), requests.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let (handler, hits, requests) = (handler.clone(), h.clone(), r.clone());
            std::thread::spawn(move || {
                let _ = connection(stream, &*handler, &hits, &requests);
            });
        }
    });
    Server {
        addr,
        hits,
        requests,
    }
}

fn connection(
    mut stream: TcpStream,
    handler: &(dyn Fn(&Request) -> Reply + Send + Sync),
    hits: &AtomicUsize,
    requests: &Mutex<Vec<Request>>,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut buf = Vec::new();
    let mut piece = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut piece)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&piece[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let target = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or("/")
        .to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut piece)?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&piece[..n]);
    }
    let request = Request {
        target,
        headers,
        body,
    };
    hits.fetch_add(1, Ordering::SeqCst);
    if let Ok(mut all) = requests.lock() {
        all.push(request.clone());
    }
    match handler(&request) {
        Reply::Full {
            status,
            headers,
            body,
        } => {
            let mut out = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\n", body.len());
            for (n, v) in headers {
                out.push_str(&format!("{n}: {v}\r\n"));
            }
            out.push_str("Connection: close\r\n\r\n");
            stream.write_all(out.as_bytes())?;
            stream.write_all(&body)?;
        }
        Reply::Hang(d) => std::thread::sleep(d),
        Reply::Paced {
            head,
            body,
            chunk,
            pause,
            report,
        } => {
            let mut written = 0;
            let mut failed = stream.write_all(head.as_bytes()).is_err();
            for piece in body.chunks(chunk) {
                if failed {
                    break;
                }
                match stream.write_all(piece) {
                    Ok(()) => written += piece.len(),
                    Err(_) => failed = true,
                }
                std::thread::sleep(pause);
            }
            let _ = report.send((written, failed));
        }
    }
    Ok(())
}

fn page(status: u16, content_type: &str, body: &str) -> Reply {
    Reply::Full {
        status,
        headers: vec![("Content-Type".into(), content_type.into())],
        body: body.as_bytes().to_vec(),
    }
}

fn html(body: &str) -> Reply {
    page(200, "text/html; charset=utf-8", body)
}

fn redirect(status: u16, location: &str) -> Reply {
    Reply::Full {
        status,
        headers: vec![("Location".into(), location.into())],
        body: Vec::new(),
    }
}

/// A chat-completions answer whose message is `content`.
fn completion(content: &str) -> Reply {
    let body = json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}]
    });
    page(200, "application/json", &body.to_string())
}

/// A scorer that answers with `content_for(the user's text)`.
fn scorer(content_for: impl Fn(&str) -> String + Send + Sync + 'static) -> Server {
    serve("127.0.0.1", move |req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let text = body["messages"][1]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        completion(&content_for(&text))
    })
}

// ---------------------------------------------------------------------------------------------
// The checker.

fn config() -> ReviewConfig {
    ReviewConfig {
        enabled: true,
        blocklists: Vec::new(),
        fetch: true,
        allow_private: true,
        browser: String::new(),
        scorer: ScorerConfig {
            url: String::new(),
            model: String::new(),
            api_key: String::new(),
        },
        flag_threshold: 0.5,
        block_threshold: 0.9,
        concurrency: 2,
    }
}

fn with_scorer(scorer: &Server) -> ReviewConfig {
    let mut c = config();
    c.scorer.url = scorer.url("/v1/chat/completions");
    c.scorer.model = "judge-1".into();
    c
}

fn checker(config: &ReviewConfig) -> Checker {
    Checker::new(config, Arc::new(BlockedHosts::empty())).unwrap_or_else(|e| panic!("{e}"))
}

/// Refuses 127.0.0.2 only: the local servers on 127.0.0.1 stay reachable.
fn refusing_127_0_0_2() -> AddressPolicy {
    Arc::new(|ip: IpAddr| ip != IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)))
}

fn record<'a>(outcome: &'a Outcome, check: &str) -> &'a CheckRecord {
    outcome
        .checks
        .iter()
        .find(|r| r.check == check)
        .unwrap_or_else(|| panic!("no {check} record in {:?}", outcome.checks))
}

/// A stand-in browser: a script that notes its arguments next to itself and writes a small
/// PNG where `--screenshot=` says.
fn fake_browser(dir: &Path) -> PathBuf {
    let path = dir.join("browser.sh");
    let script = "#!/bin/sh\n\
        for a in \"$@\"; do case \"$a\" in --screenshot=*) out=\"${a#--screenshot=}\";; esac; done\n\
        echo \"$@\" >> \"$(dirname \"$0\")/ran\"\n\
        printf '\\211PNG\\r\\n\\032\\nfake' > \"$out\"\n";
    std::fs::write(&path, script).unwrap_or_else(|e| panic!("{e}"));
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
    path
}

const FAKE_PNG: &[u8] = b"\x89PNG\r\n\x1a\nfake";

fn temp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"))
}

// ---------------------------------------------------------------------------------------------
// Verdicts from the scorer.

#[tokio::test]
async fn scores_make_the_verdicts_blocked_ok_and_flagged() {
    let site = serve("127.0.0.1", |req| {
        html(&format!(
            "<html><head><title>Page {}</title></head><body>hi</body></html>",
            req.target.trim_start_matches('/')
        ))
    });
    let judge = scorer(|text| {
        let (spam, reason) = if text.contains("Title: Page scam") {
            (0.95, "asks for a bank password")
        } else if text.contains("Title: Page clean") {
            (0.05, "a recipe")
        } else {
            (0.6, "thin content")
        };
        json!({"spam": spam, "reason": reason}).to_string()
    });
    let checker = checker(&with_scorer(&judge));
    for (path, verdict, score) in [
        ("/scam", Verdict::Blocked, 0.95),
        ("/clean", Verdict::Ok, 0.05),
        ("/middle", Verdict::Flagged, 0.6),
    ] {
        let out = checker.check(&[site.url(path)]).await;
        assert_eq!(out.verdict, Some(verdict), "{path}: {:?}", out.checks);
        assert_eq!(out.score, Some(score));
        assert_eq!(record(&out, "blocklist").outcome, "clear");
        assert_eq!(record(&out, "fetch").outcome, "ok");
        assert!(record(&out, "fetch")
            .detail
            .starts_with("200 text/html http://127.0.0.1:"));
        assert_eq!(record(&out, "screenshot").outcome, "skipped");
        assert_eq!(record(&out, "scorer").outcome, "ok");
        assert!(out.reason.as_deref().is_some_and(|r| !r.is_empty()));
    }
    assert_eq!(judge.hits(), 3);
}

#[tokio::test]
async fn a_scorer_that_fails_or_answers_nonsense_leaves_the_verdict_unscored() {
    let cases: Vec<(&str, Server)> = vec![
        (
            "prose",
            scorer(|_| "This page looks like spam to me.".into()),
        ),
        (
            "a string score",
            scorer(|_| r#"{"spam": "high", "reason": "x"}"#.into()),
        ),
        (
            "out of range",
            scorer(|_| r#"{"spam": 1.5, "reason": "x"}"#.into()),
        ),
        ("no reason", scorer(|_| r#"{"spam": 0.2}"#.into())),
        (
            "HTTP 500",
            serve("127.0.0.1", |_| page(500, "text/plain", "model not loaded")),
        ),
        (
            "not chat-completions",
            serve("127.0.0.1", |_| page(200, "application/json", "[1, 2, 3]")),
        ),
    ];
    for (case, judge) in &cases {
        let mut config = with_scorer(judge);
        config.fetch = false;
        let out = checker(&config).check(&["https://a.example/".into()]).await;
        assert_eq!(
            out.verdict,
            Some(Verdict::Unscored),
            "{case}: {:?}",
            out.checks
        );
        assert_eq!(out.score, None, "{case}");
        let scored = record(&out, "scorer");
        assert_eq!(scored.outcome, "failed", "{case}");
        assert!(!scored.detail.is_empty(), "{case}");
        assert_eq!(judge.hits(), 1, "{case}");
    }
    // A fenced answer is read (see `scorer::parse_content`), and no scorer is `unscored` too.
    let fenced = scorer(|_| "```json\n{\"spam\": 0.1, \"reason\": \"fine\"}\n```".into());
    let mut config = with_scorer(&fenced);
    config.fetch = false;
    let out = checker(&config).check(&["https://a.example/".into()]).await;
    assert_eq!(out.verdict, Some(Verdict::Ok), "{:?}", out.checks);
    config.scorer.url = String::new();
    let out = checker(&config).check(&["https://a.example/".into()]).await;
    assert_eq!(out.verdict, Some(Verdict::Unscored));
    assert_eq!(record(&out, "scorer").outcome, "skipped");
    assert_eq!(record(&out, "fetch").outcome, "skipped");
}

// ---------------------------------------------------------------------------------------------
// The fetch's limits.

#[tokio::test]
async fn a_hanging_site_times_out_and_holds_up_no_other_check() {
    let hanging = serve("127.0.0.1", |_| Reply::Hang(Duration::from_secs(20)));
    let fine = serve("127.0.0.1", |_| html("<title>Fine</title>"));
    let judge = scorer(|_| r#"{"spam": 0.0, "reason": "ok"}"#.into());
    // Shared and spawned, as the review workers run it.
    let checker = Arc::new(checker(&with_scorer(&judge)));
    let started = Instant::now();
    let spawn = |url: String| {
        let checker = checker.clone();
        tokio::spawn(async move {
            let out = checker.check(&[url]).await;
            (out, started.elapsed())
        })
    };
    let (slow, fast) = (spawn(hanging.url("/")), spawn(fine.url("/")));
    let (fast, fast_took) = fast.await.unwrap_or_else(|e| panic!("{e}"));
    let (slow, slow_took) = slow.await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        fast_took < Duration::from_secs(2),
        "the other took {fast_took:?}"
    );
    assert_eq!(fast.title.as_deref(), Some("Fine"));
    assert!(
        slow_took >= Duration::from_millis(4900) && slow_took < Duration::from_secs(7),
        "the hanging one took {slow_took:?}"
    );
    let fetched = record(&slow, "fetch");
    assert_eq!(fetched.outcome, "failed");
    assert!(fetched.detail.contains("timed out"), "{}", fetched.detail);
    // A failed fetch is no verdict: the scorer still ran, on the URL alone.
    assert_eq!(slow.verdict, Some(Verdict::Ok));
    assert_eq!(hanging.hits(), 1);
}

#[tokio::test]
async fn a_two_mib_page_is_cut_at_one_mib() {
    let (report, reported) = mpsc::channel();
    let report = Mutex::new(report);
    let site = serve("127.0.0.1", move |_| {
        let mut body = b"<html><head>".to_vec();
        body.resize(2 << 20, b' ');
        body.extend_from_slice(b"<title>Too far</title></head></html>");
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        Reply::Paced {
            head,
            body,
            chunk: 32 << 10,
            pause: Duration::from_millis(5),
            report: report
                .lock()
                .map(|r| r.clone())
                .unwrap_or_else(|e| panic!("{e}")),
        }
    });
    let out = checker(&config()).check(&[site.url("/big")]).await;
    let fetched = record(&out, "fetch");
    assert_eq!(fetched.outcome, "ok", "{}", fetched.detail);
    assert!(
        fetched.detail.contains("cut at 1 MiB"),
        "{}",
        fetched.detail
    );
    assert_eq!(out.title, None);
    let (written, failed) = reported
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(failed, "the server wrote all {written} bytes");
    assert!(written < 2 << 20, "the server wrote {written} bytes");
}

#[tokio::test]
async fn a_redirect_into_a_refused_address_is_refused_at_that_hop() {
    let inner = serve("127.0.0.2", |_| html("<title>Admin</title>"));
    let inner_url = inner.url("/admin");
    let outer = serve("127.0.0.1", move |_| redirect(302, &inner_url));
    let dir = temp();
    let mut config = config();
    config.browser = fake_browser(dir.path()).display().to_string();
    let checker = Checker::with_address_policy(
        &config,
        Arc::new(BlockedHosts::empty()),
        refusing_127_0_0_2(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = checker.check(&[outer.url("/go")]).await;
    let fetched = record(&out, "fetch");
    assert_eq!(fetched.outcome, "refused");
    assert!(
        fetched.detail.contains("127.0.0.2 is a private address"),
        "{}",
        fetched.detail
    );
    assert_eq!((outer.hits(), inner.hits()), (1, 0));
    assert_eq!(out.verdict, Some(Verdict::Unscored));
    assert_eq!(out.title, None);
    // The browser is not sent where the fetch was refused.
    assert_eq!(record(&out, "screenshot").outcome, "skipped");
    assert!(!dir.path().join("ran").exists());
    // The same server straight away is reachable: the refusal was the second hop's.
    let direct = Checker::with_address_policy(
        &config,
        Arc::new(BlockedHosts::empty()),
        Arc::new(|_: IpAddr| true),
    )
    .unwrap_or_else(|e| panic!("{e}"))
    .check(&[outer.url("/go")])
    .await;
    assert_eq!(direct.title.as_deref(), Some("Admin"));
    assert!(record(&direct, "fetch")
        .detail
        .ends_with("after 1 redirect"));
}

#[tokio::test]
async fn more_than_five_redirects_are_refused() {
    // `/r/N` redirects to `/r/N+1` (relative, alternating kinds) until `/r/{end}`.
    let site = serve("127.0.0.1", |req| {
        let rest = req.target.trim_start_matches("/r/");
        let (n, end) = rest.split_once("?end=").unwrap_or((rest, "99"));
        let (n, end): (u32, u32) = (n.parse().unwrap_or(0), end.parse().unwrap_or(99));
        if n == end {
            return html("<title>Arrived</title>");
        }
        let status = [301, 302, 303, 307, 308][n as usize % 5];
        redirect(status, &format!("/r/{}?end={end}", n + 1))
    });
    let checker = checker(&config());
    let five = checker.check(&[site.url("/r/0?end=5")]).await;
    assert_eq!(five.title.as_deref(), Some("Arrived"), "{:?}", five.checks);
    assert!(record(&five, "fetch").detail.contains("after 5 redirects"));
    assert_eq!(site.hits(), 6);
    let endless = checker.check(&[site.url("/r/0")]).await;
    let fetched = record(&endless, "fetch");
    assert_eq!(fetched.outcome, "failed");
    assert!(
        fetched.detail.contains("more than 5 redirects"),
        "{}",
        fetched.detail
    );
    assert_eq!(site.hits(), 6 + 6, "the sixth redirect is not followed");
}

#[tokio::test]
async fn private_addresses_are_refused_by_default_before_any_request() {
    let site = serve("127.0.0.1", |_| html("<title>Internal</title>"));
    let dir = temp();
    let mut config = config();
    config.allow_private = false;
    config.browser = fake_browser(dir.path()).display().to_string();
    let checker = checker(&config);
    // An address in the URL, and a name that resolves to loopback (the resolver's refusal).
    let port = site.addr.port();
    for url in [
        site.url("/"),
        format!("http://localhost:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        "http://[::1]:9/".to_string(),
        "http://169.254.169.254/latest/meta-data/".to_string(),
    ] {
        let out = checker.check(std::slice::from_ref(&url)).await;
        let fetched = record(&out, "fetch");
        assert_eq!(fetched.outcome, "refused", "{url}: {}", fetched.detail);
        assert!(
            fetched.detail.contains("a private address"),
            "{}",
            fetched.detail
        );
        assert_eq!(out.verdict, Some(Verdict::Unscored));
    }
    // Without the fetch, the browser's target is checked the same way.
    config.fetch = false;
    let out = crate::checker(&config).check(&[site.url("/")]).await;
    assert_eq!(record(&out, "screenshot").outcome, "refused");
    assert_eq!(site.hits(), 0);
    assert!(!dir.path().join("ran").exists());
}

// ---------------------------------------------------------------------------------------------
// The blocklists.

#[tokio::test]
async fn a_blocklist_hit_blocks_without_fetching() {
    let site = serve("127.0.0.1", |_| html("<title>Never</title>"));
    let judge = scorer(|_| r#"{"spam": 0.0, "reason": "ok"}"#.into());
    let dir = temp();
    let list = dir.path().join("list.txt");
    std::fs::write(
        &list,
        format!("# URLs\n{}\n0.0.0.0 evil.test\n", site.url("/exact?x=1")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut config = with_scorer(&judge);
    config.blocklists = vec![list];
    let checker = checker(&config);

    let by_url = checker.check(&[site.url("/exact?x=1#frag")]).await;
    assert_eq!(by_url.verdict, Some(Verdict::Blocked));
    let hit = record(&by_url, "blocklist");
    assert_eq!(hit.outcome, "hit");
    assert!(hit.detail.contains("/exact?x=1"), "{}", hit.detail);
    assert_eq!(
        by_url.checks.len(),
        1,
        "nothing after a hit: {:?}",
        by_url.checks
    );

    // A rule's URL on a listed host blocks the link even when its own URL is clean.
    let by_rule = checker
        .check(&[site.url("/clean"), "https://www.Evil.test/x".into()])
        .await;
    assert_eq!(by_rule.verdict, Some(Verdict::Blocked));
    assert!(record(&by_rule, "blocklist")
        .detail
        .starts_with("evil.test"));

    // `limits.blocked_hosts` counts too.
    let blocked = BlockedHosts::new(&["127.0.0.1".into()], None).unwrap_or_else(|e| panic!("{e}"));
    let limits = Checker::new(&config, Arc::new(blocked)).unwrap_or_else(|e| panic!("{e}"));
    let out = limits.check(&[site.url("/clean")]).await;
    assert_eq!(out.verdict, Some(Verdict::Blocked));
    assert!(record(&out, "blocklist")
        .detail
        .contains("limits.blocked_hosts"));

    assert_eq!((site.hits(), judge.hits()), (0, 0));
    // Another path of the listed URL's host is not on the list.
    let other = checker.check(&[site.url("/exact?x=2")]).await;
    assert_eq!(record(&other, "blocklist").outcome, "clear");
    assert_eq!(site.hits(), 1);
}

#[tokio::test]
async fn a_blocklist_file_change_is_picked_up_within_five_seconds() {
    let dir = temp();
    let list = dir.path().join("hosts");
    std::fs::write(&list, "# nothing yet\n").unwrap_or_else(|e| panic!("{e}"));
    let mut config = config();
    config.fetch = false;
    config.blocklists = vec![list.clone()];
    let checker = checker(&config);
    let evil = || vec!["https://shop.evil.test/cart".to_string()];
    assert_eq!(
        checker.check(&evil()).await.verdict,
        Some(Verdict::Unscored)
    );

    std::fs::write(
        &list,
        "# from a hosts file\n\
         127.0.0.1 localhost\n\
         0.0.0.0 evil.test # phishing\n\
         https://bad.example/login?next=1\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let changed = Instant::now();
    loop {
        let out = checker.check(&evil()).await;
        if out.verdict == Some(Verdict::Blocked) {
            break;
        }
        assert!(changed.elapsed() < Duration::from_secs(5), "not reloaded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let verdict = |url: &str| {
        let url = url.to_string();
        let checker = &checker;
        async move { checker.check(&[url]).await.verdict }
    };
    assert_eq!(
        verdict("https://bad.example/login?next=1").await,
        Some(Verdict::Blocked)
    );
    assert_eq!(
        verdict("https://bad.example/login").await,
        Some(Verdict::Unscored)
    );
    assert_eq!(verdict("http://localhost/").await, Some(Verdict::Unscored));
    assert_eq!(
        verdict("https://notevil.test/").await,
        Some(Verdict::Unscored)
    );
}

#[test]
fn a_missing_blocklist_file_is_an_error() {
    let mut config = config();
    config.blocklists = vec![PathBuf::from("/nonexistent/review-list.txt")];
    let err = Checker::new(&config, Arc::new(BlockedHosts::empty()))
        .err()
        .unwrap_or_default();
    assert!(err.contains("/nonexistent/review-list.txt"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// What the fetch reads, and what the scorer is sent.

#[tokio::test]
async fn title_and_description_from_real_html() {
    let site = serve("127.0.0.1", |req| {
        match req.target.as_str() {
        "/entities" => html(
            "<!doctype html><html><head>\n\
             <meta name=\"Description\" content=\"Fish &amp; chips &lt;3 &mdash; since&nbsp;1990\">\n\
             <title>\n  Caf&eacute; &amp; Bar &#8211; Home\n</title>\n\
             <meta property=\"og:description\" content=\"not this one\">\n\
             </head><body><svg><title>icon</title></svg></body></html>",
        ),
        "/og" => html(
            "<html><head><title>OG</title>\
             <meta property=\"og:description\" content=\"Only &quot;OG&quot;\"></head></html>",
        ),
        "/latin1" => Reply::Full {
            status: 200,
            headers: vec![("Content-Type".into(), "text/html; charset=ISO-8859-1".into())],
            body: b"<title>Cr\xe8me br\xfbl\xe9e</title>".to_vec(),
        },
        _ => page(200, "image/png", "<title>not html</title>"),
    }
    });
    let checker = checker(&config());
    let out = checker.check(&[site.url("/entities")]).await;
    assert_eq!(out.title.as_deref(), Some("Café & Bar – Home"));
    assert_eq!(
        out.description.as_deref(),
        Some("Fish & chips <3 — since 1990")
    );
    assert_eq!(out.status, Some(200));
    assert_eq!(out.content_type.as_deref(), Some("text/html"));
    assert_eq!(out.final_url, Some(site.url("/entities")));
    let og = checker.check(&[site.url("/og")]).await;
    assert_eq!(og.description.as_deref(), Some("Only \"OG\""));
    let latin1 = checker.check(&[site.url("/latin1")]).await;
    assert_eq!(latin1.title.as_deref(), Some("Crème brûlée"));
    let image = checker.check(&[site.url("/image")]).await;
    assert_eq!(image.title, None);
    assert!(record(&image, "fetch").detail.starts_with("200 image/png"));
}

#[tokio::test]
async fn the_scorer_request_carries_the_model_the_key_and_the_screenshot() {
    let site = serve("127.0.0.1", |_| {
        html("<title>Win a prize</title><meta name=description content=\"Click now\">")
    });
    let judge = scorer(|_| r#"{"spam": 0.7, "reason": "prize bait"}"#.into());
    let dir = temp();
    let mut config = with_scorer(&judge);
    config.scorer.api_key = "sk-test-123".into();
    config.browser = fake_browser(dir.path()).display().to_string();
    let out = checker(&config).check(&[site.url("/prize")]).await;
    assert_eq!(out.verdict, Some(Verdict::Flagged), "{:?}", out.checks);
    assert_eq!(out.screenshot.as_deref(), Some(FAKE_PNG));
    assert_eq!(record(&out, "screenshot").outcome, "ok");
    let ran = std::fs::read_to_string(dir.path().join("ran")).unwrap_or_default();
    assert!(
        ran.contains("--headless=new") && ran.contains(&site.url("/prize")),
        "{ran}"
    );

    let requests = judge.requests();
    assert_eq!(requests.len(), 1);
    let req = &requests[0];
    assert_eq!(req.target, "/v1/chat/completions");
    assert_eq!(req.header("authorization"), Some("Bearer sk-test-123"));
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    assert_eq!(body["model"], "judge-1");
    assert_eq!(body["temperature"], 0);
    assert_eq!(body["response_format"]["type"], "json_object");
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(body["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.contains("\"spam\"")));
    let text = body["messages"][1]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        text,
        format!(
            "URL: {}\nTitle: Win a prize\nDescription: Click now",
            site.url("/prize")
        )
    );
    let image = &body["messages"][1]["content"][1];
    assert_eq!(image["type"], "image_url");
    use base64::Engine as _;
    let data = base64::engine::general_purpose::STANDARD.encode(FAKE_PNG);
    assert_eq!(
        image["image_url"]["url"].as_str(),
        Some(format!("data:image/png;base64,{data}").as_str())
    );

    // No key, no header; no screenshot, no image.
    config.scorer.api_key = String::new();
    config.browser = String::new();
    checker(&config).check(&[site.url("/prize")]).await;
    let requests = judge.requests();
    assert_eq!(requests[1].header("authorization"), None);
    let body: Value = serde_json::from_slice(&requests[1].body).unwrap_or(Value::Null);
    assert_eq!(
        body["messages"][1]["content"].as_array().map(Vec::len),
        Some(1)
    );
}

#[tokio::test]
async fn a_real_chromium_takes_a_screenshot() {
    let browser = "/usr/bin/chromium";
    if !Path::new(browser).exists() {
        assert!(
            std::env::var("REQUIRE_BROWSER").as_deref() != Ok("1"),
            "REQUIRE_BROWSER=1 and no {browser}"
        );
        eprintln!("skipped: no {browser} (set REQUIRE_BROWSER=1 to make this a failure)");
        return;
    }
    let site = serve("127.0.0.1", |_| {
        html("<html><body style=\"background:#c00\"><h1>Hello</h1></body></html>")
    });
    let mut config = config();
    config.browser = browser.into();
    let started = Instant::now();
    let out = checker(&config).check(&[site.url("/")]).await;
    let shot = record(&out, "screenshot");
    assert_eq!(shot.outcome, "ok", "{}", shot.detail);
    let png = out.screenshot.unwrap_or_default();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    // The IHDR chunk's width and height: the window size asked for.
    assert_eq!(&png[16..24], &[0, 0, 5, 0, 0, 0, 3, 32]);
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[tokio::test]
async fn a_browser_that_hangs_is_killed_with_its_children() {
    let site = serve("127.0.0.1", |_| html("<title>Slow to draw</title>"));
    let dir = temp();
    let path = dir.path().join("hang.sh");
    // A browser that starts a helper and never finishes.
    let script = format!(
        "#!/bin/sh\nsleep 300 &\necho $! > {}\nwait\n",
        dir.path().join("helper").display()
    );
    std::fs::write(&path, script).unwrap_or_else(|e| panic!("{e}"));
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut config = config();
    config.browser = path.display().to_string();
    let started = Instant::now();
    let out = checker(&config).check(&[site.url("/")]).await;
    let took = started.elapsed();
    let shot = record(&out, "screenshot");
    assert_eq!(shot.outcome, "failed");
    assert!(shot.detail.contains("timed out"), "{}", shot.detail);
    assert!(
        took >= Duration::from_secs(15) && took < Duration::from_secs(17),
        "{took:?}"
    );
    assert_eq!(out.title.as_deref(), Some("Slow to draw"));
    let helper = std::fs::read_to_string(dir.path().join("helper")).unwrap_or_default();
    let helper = helper.trim();
    assert!(!helper.is_empty());
    // Gone, or a zombie waiting for a reaper: not running either way.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{helper}/stat")).unwrap_or_default();
        let state = stat.rsplit_once(") ").map(|(_, rest)| &rest[..1]);
        if state.is_none_or(|s| s == "Z" || s == "X") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the helper {helper} still runs: {stat}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// SPEC §21 (3): the screenshot browser loads nothing the fetch would refuse. The page (on
/// 127.0.0.1, which the test's rule allows) embeds an `<iframe>` and an `<img>` of an
/// "internal" server on 127.0.0.2 (which the rule refuses, as the default rule refuses every
/// private address), and an `<img>` of a second allowed server, which shows that the browser
/// did load the page's allowed parts.
#[tokio::test]
async fn the_screenshot_loads_nothing_from_an_address_the_fetch_refuses() {
    let browser = "/usr/bin/chromium";
    if !Path::new(browser).exists() {
        assert!(
            std::env::var("REQUIRE_BROWSER").as_deref() != Ok("1"),
            "REQUIRE_BROWSER=1 and no {browser}"
        );
        eprintln!("skipped: no {browser} (set REQUIRE_BROWSER=1 to make this a failure)");
        return;
    }
    let internal = serve("127.0.0.2", |req| {
        if req.target.ends_with(".png") {
            page(200, "image/png", "not really a png")
        } else {
            html("<html><body style=\"background:#0c0\"><h1>Internal admin</h1></body></html>")
        }
    });
    let allowed = serve("127.0.0.1", |_| page(200, "image/png", "not really a png"));
    let embedded = format!(
        "<html><head><title>Embeds</title></head><body>\
         <iframe src=\"{}\" width=\"600\" height=\"300\"></iframe>\
         <img src=\"{}\"><img src=\"{}\"></body></html>",
        internal.url("/admin"),
        internal.url("/secret.png"),
        allowed.url("/fine.png"),
    );
    let site = serve("127.0.0.1", move |_| html(&embedded));
    let mut config = config();
    config.allow_private = false;
    config.browser = browser.into();
    let checker = Checker::with_address_policy(
        &config,
        Arc::new(BlockedHosts::empty()),
        refusing_127_0_0_2(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = checker.check(&[site.url("/")]).await;
    let shot = record(&out, "screenshot");
    assert_eq!(shot.outcome, "ok", "{}", shot.detail);
    assert_eq!(out.title.as_deref(), Some("Embeds"));
    // The fetch and the browser both loaded the page, and the browser its allowed image.
    assert!(site.hits() >= 2, "the browser never loaded the page");
    assert!(allowed.hits() >= 1, "the browser loaded no allowed part");
    assert_eq!(
        internal.hits(),
        0,
        "the browser loaded {:?} from a refused address",
        internal
            .requests()
            .iter()
            .map(|r| r.target.clone())
            .collect::<Vec<_>>()
    );
}
