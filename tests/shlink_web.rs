//! Shlink's own web client against `/rest/v3`: the dashboard component Shlink's web app is made
//! of (`@shlinkio/shlink-web-component` 0.18 with `@shlinkio/shlink-js-sdk`, from npm), built
//! into a static page and opened in headless Chromium. It lists the app's short URLs, draws a
//! short URL's visits as recharts charts, and shows the errors of a wrong key.
//!
//! The page's sources are `tests/fixtures/shlink-web/` (package-lock.json pins every package;
//! build.sh bundles with esbuild and the Tailwind CLI). They are copied into
//! `CARGO_TARGET_TMPDIR/shlink-web/`, where `npm ci` runs only when `node_modules` is missing or
//! was installed from another package-lock.json; the build into `dist/` runs every time (about
//! two seconds). A tiny static server in this test serves `dist/` on another port than the
//! app's, so the page calls the API across origins, as the web client does (CORS).
//!
//! Screenshots go to `CARGO_TARGET_TMPDIR/shlink-web/*.png` (their paths are printed).
//!
//! Needs `node`, `npm`, `/usr/bin/chromium` and `/usr/bin/chromedriver` (or `CHROME`,
//! `CHROMEDRIVER`), and the npm registry for the first `npm ci`. Without them the test says why
//! and passes, unless `REQUIRE_BROWSER=1` or `REQUIRE_NODE=1` (set by CI), where it fails.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::chrome::{browser_paths, Driver};
use common::{TestApp, ADMIN};
use reqwest::blocking::Client;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/shlink-web");
const DESKTOP: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";
const PHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1";
/// How long any one thing may take to show in the page.
const WAIT: Duration = Duration::from_secs(30);

fn required() -> bool {
    ["REQUIRE_BROWSER", "REQUIRE_NODE"]
        .iter()
        .any(|v| std::env::var(v).as_deref() == Ok("1"))
}

/// Passes the test with `reason` printed, or fails it when the tools are required.
fn skip(reason: &str) {
    assert!(
        !required(),
        "REQUIRE_BROWSER=1 or REQUIRE_NODE=1, but {reason}"
    );
    eprintln!("SKIPPED: {reason}");
}

fn runs(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Copies the fixture's files (not a `node_modules` or `dist` of its own) into `to`.
fn copy_fixture(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("page dir");
    for entry in std::fs::read_dir(from).expect("fixture dir").flatten() {
        let name = entry.file_name();
        if name == "node_modules" || name == "dist" {
            continue;
        }
        let target = to.join(&name);
        if entry.file_type().expect("file type").is_dir() {
            copy_fixture(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a fixture file");
        }
    }
}

/// Runs `command` in `dir`; its output when it failed.
fn run(dir: &Path, command: &mut Command) -> Result<(), String> {
    let output = command
        .current_dir(dir)
        .output()
        .map_err(|e| format!("{command:?}: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{command:?} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

/// The page's directory with a fresh `dist/`: `npm ci` when needed, then build.sh.
fn build_page() -> Result<PathBuf, String> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("shlink-web");
    copy_fixture(Path::new(FIXTURE), &dir);
    let lock = std::fs::read(dir.join("package-lock.json")).expect("package-lock.json");
    let hash = hex::encode(Sha256::digest(&lock));
    // Inside node_modules, so it goes when node_modules goes.
    let stamp = dir.join("node_modules/.vshortlink-lock-sha256");
    let installed = std::fs::read_to_string(&stamp).unwrap_or_default();
    if installed.trim() == hash {
        eprintln!("npm ci: skipped, node_modules matches package-lock.json ({hash:.12})");
    } else {
        let started = Instant::now();
        run(
            &dir,
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                .arg("--cache")
                .arg(dir.with_file_name("shlink-web-npm-cache")),
        )?;
        std::fs::write(&stamp, &hash).expect("write the lock stamp");
        eprintln!("npm ci: {:.1} s", started.elapsed().as_secs_f64());
    }
    let started = Instant::now();
    let _ = std::fs::remove_dir_all(dir.join("dist"));
    run(&dir, Command::new("sh").arg("build.sh"))?;
    eprintln!("build.sh: {:.1} s", started.elapsed().as_secs_f64());
    for file in ["index.html", "app.js", "app.css", "tailwind.css"] {
        assert!(dir.join("dist").join(file).is_file(), "dist/{file} built");
    }
    Ok(dir)
}

/// Serves the files of `root` over HTTP on a free port; its base URL.
fn static_server(root: PathBuf) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let root = root.clone();
            std::thread::spawn(move || serve_file(&root, stream));
        }
    });
    format!("http://{addr}")
}

fn serve_file(root: &Path, mut stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    // The headers, unread.
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let target = request_line.split_whitespace().nth(1).unwrap_or("/");
    let path = target.split(['?', '#']).next().unwrap_or("/");
    let path = path.trim_start_matches('/');
    let path = if path.is_empty() { "index.html" } else { path };
    let file = (!path.split('/').any(|p| p == ".." || p.is_empty()))
        .then(|| root.join(path))
        .and_then(|p| std::fs::read(p).ok());
    let kind = match path.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("png") => "image/png",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    };
    let (status, kind, body) = match file {
        Some(body) => ("200 OK", kind, body),
        None => ("404 Not Found", "text/plain", b"not found".to_vec()),
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(&body);
}

/// A WebDriver session spoken to over plain HTTP (W3C WebDriver JSON), closed on drop.
struct Browser {
    http: Client,
    session: String,
}

impl Browser {
    fn open(driver: &Driver, chrome: &Path, profile: &Path) -> Browser {
        let http = Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("client");
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": { "browser": "ALL" },
            "goog:chromeOptions": {
                "binary": chrome,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu",
                    "--disable-dev-shm-usage", "--disable-background-networking",
                    "--no-first-run", "--disable-component-update", "--disable-sync",
                    "--hide-scrollbars", "--window-size=1400,1000",
                    format!("--user-data-dir={}", profile.display()),
                ],
            },
        }}});
        let url = format!("http://127.0.0.1:{}/session", driver.port);
        let answer: Value = http
            .post(url)
            .json(&caps)
            .send()
            .and_then(|r| r.json())
            .expect("a browser session");
        let id = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"));
        Browser {
            session: format!("http://127.0.0.1:{}/session/{id}", driver.port),
            http,
        }
    }

    /// A WebDriver command; its `value`.
    fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self.http.request(method, format!("{}{path}", self.session));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().expect("WebDriver");
        let status = response.status();
        let answer: Value = response.json().expect("WebDriver JSON");
        assert!(status.is_success(), "WebDriver {path}: {status} {answer}");
        answer["value"].clone()
    }

    fn goto(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", Some(json!({ "url": url })));
    }

    fn script(&self, script: &str) -> Value {
        self.command(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({ "script": script, "args": [] })),
        )
    }

    fn text(&self) -> String {
        self.script("return document.body ? document.body.innerText : ''")
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Polls `script` until it returns something truthy (and returns that); fails with the
    /// page's text and the console after [`WAIT`].
    fn wait_for(&self, what: &str, script: &str) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let value = self.script(script);
            let truthy = match &value {
                Value::Null | Value::Bool(false) => false,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return value;
            }
            if Instant::now() > deadline {
                panic!(
                    "waited {WAIT:?} for {what}\n--- page:\n{}\n--- console:\n{}",
                    self.text(),
                    self.console().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The browser console since the last call.
    fn console(&self) -> Vec<String> {
        let logs = self.command(
            reqwest::Method::POST,
            "/se/log",
            Some(json!({ "type": "browser" })),
        );
        logs.as_array()
            .map(|l| {
                l.iter()
                    .map(|e| format!("{}: {}", e["level"], e["message"]))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn screenshot(&self, path: &Path) {
        let png = self.command(reqwest::Method::GET, "/screenshot", None);
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().expect("base64"))
            .expect("a PNG");
        std::fs::write(path, bytes).expect("write screenshot");
        eprintln!("screenshot: {}", path.display());
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.http.delete(&self.session).send();
    }
}

/// `GET` a `/rest/v3` path with a key and an `Origin`, as the page sends it.
fn rest_get(app: &TestApp, path: &str, key: &str) -> reqwest::blocking::Response {
    app.client
        .get(app.url(path))
        .header("x-api-key", key)
        .header("origin", "http://127.0.0.1:9")
        .send()
        .expect("GET /rest")
}

#[test]
fn shlinks_web_component_lists_short_urls_and_charts_visits_in_chromium() {
    let Some((driver_path, chrome)) = browser_paths() else {
        return skip(
            "no /usr/bin/chromium and /usr/bin/chromedriver (apt install chromium chromium-driver)",
        );
    };
    if !runs("node") || !runs("npm") {
        return skip("node and npm are needed to build Shlink's web component");
    }
    let started = Instant::now();
    let page = match build_page() {
        Ok(page) => page,
        Err(why) => return skip(&format!("the page did not build: {why}")),
    };
    let built = Instant::now();

    let app = TestApp::start();
    let base = format!("http://{}", app.addr);
    // Three links: one with a title and tags (visited), one with a code of its own, one
    // generated.
    let docs = app.create(json!({
        "url": "https://example.com/docs/getting-started",
        "code": "docs-start",
        "title": "Getting started",
        "tags": ["docs", "guide"],
    }));
    let shop = app.create(json!({"url": "https://example.org/shop", "code": "shop-2026"}));
    let news = app.create(json!({"url": "https://example.net/news/today"}));
    let codes: Vec<String> = [&docs, &shop, &news]
        .iter()
        .map(|l| l["code"].as_str().expect("code").to_string())
        .collect();
    let visited = codes[0].as_str();

    // Four visits: three from a desktop Chrome (one with a referrer), one from an iPhone.
    for (agent, referer) in [
        (DESKTOP, None),
        (DESKTOP, Some("https://ref.test/page")),
        (DESKTOP, None),
        (PHONE, None),
    ] {
        let mut request = app
            .client
            .get(app.url(&format!("/{visited}")))
            .header("user-agent", agent);
        if let Some(referer) = referer {
            request = request.header("referer", referer);
        }
        let response = request.send().expect("redirect");
        assert_eq!(response.status(), 302);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let short: Value = rest_get(&app, &format!("/rest/v3/short-urls/{visited}"), ADMIN)
            .json()
            .expect("short URL");
        if short["visitsSummary"]["total"].as_u64() >= Some(4) {
            assert_eq!(short["visitsSummary"]["total"], 4, "{short}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the visits were not written: {short}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // What the browser relies on, by plain HTTP: the preflight is answered without a key, and
    // a wrong key is Shlink's 401 problem, readable across origins.
    let preflight = app
        .client
        .request(reqwest::Method::OPTIONS, app.url("/rest/v3/short-urls"))
        .header("origin", "http://127.0.0.1:9")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "x-api-key")
        .send()
        .expect("preflight");
    assert_eq!(preflight.status(), 204);
    let headers = preflight.headers();
    assert_eq!(headers["access-control-allow-origin"], "*");
    assert!(headers["access-control-allow-headers"]
        .to_str()
        .expect("ascii")
        .to_ascii_lowercase()
        .contains("x-api-key"));
    let wrong = rest_get(&app, "/rest/v3/short-urls", "wrong-key-0000");
    assert_eq!(wrong.status(), 401);
    assert_eq!(wrong.headers()["access-control-allow-origin"], "*");
    let problem: Value = wrong.json().expect("problem");
    assert_eq!(
        problem["type"], "https://shlink.io/api/error/invalid-api-key",
        "{problem}"
    );
    let wrong_detail = problem["detail"].as_str().expect("detail").to_string();

    let site = static_server(page.join("dist"));
    let driver = Driver::start(&driver_path);
    let profile = tempfile::tempdir().expect("profile dir");
    let browser = Browser::open(&driver, &chrome, profile.path());
    let home = format!("{site}/index.html?server={base}");

    // The list of short URLs: all three, the title, the tags, the visits.
    browser.goto(&format!("{home}&key={ADMIN}#/list-short-urls/1"));
    let all_codes = serde_json::to_string(&codes).expect("json");
    browser.wait_for(
        "the three short codes in the list",
        &format!(
            "const t = document.body.innerText; \
             return {all_codes}.every(c => t.includes('/' + c)) && !t.includes('Loading...');"
        ),
    );
    // Its cells (created, short URL, title, long URL, tags, visits, ...): the title, both tags,
    // and a cell with just the count.
    let row = browser.script(&format!(
        "const r = [...document.querySelectorAll('tbody tr')].find(r => r.innerText.includes('/{visited}')); \
         return r ? [...r.cells].map(c => c.innerText.trim()) : null;"
    ));
    let cells: Vec<&str> = row
        .as_array()
        .unwrap_or_else(|| panic!("no row for {visited}: {}", browser.text()))
        .iter()
        .map(|c| c.as_str().unwrap_or_default())
        .collect();
    assert!(cells.contains(&"Getting started"), "the title: {row}");
    assert!(
        cells
            .iter()
            .any(|c| c.contains("docs") && c.contains("guide")),
        "the tags: {row}"
    );
    assert!(cells.contains(&"4"), "the visits: {row}");
    let rows = browser.script("return document.querySelectorAll('tbody tr').length");
    assert_eq!(rows, 3, "{}", browser.text());
    let list_shot = page.join("list.png");
    browser.screenshot(&list_shot);

    // Its visits, in the app (as a click would): the chart over time and the count.
    browser.script(&format!("location.hash = '#/short-code/{visited}/visits'"));
    browser.wait_for(
        "the visits chart (recharts SVG with a line) and 'Visits: 4'",
        "return document.querySelector('svg.recharts-surface') \
         && document.querySelector('.recharts-line-curve') \
         && document.body.innerText.includes('Visits: 4') \
         && document.body.innerText.includes('Visits for');",
    );
    let text = browser.text();
    assert!(text.contains(&format!("/{visited}")), "{text}");
    assert!(text.contains("Getting started"), "{text}");
    // recharts animates the line in: the screenshot waits for it, nothing is asserted on it.
    std::thread::sleep(Duration::from_millis(1500));
    let visits_shot = page.join("visits.png");
    browser.screenshot(&visits_shot);

    // By context: doughnuts and bars from the visits' user agents and referrers.
    browser.script(&format!(
        "location.hash = '#/short-code/{visited}/visits/by-context'"
    ));
    browser.wait_for(
        "the by-context charts",
        "return document.querySelectorAll('.recharts-pie-sector').length > 0 \
         && document.body.innerText.includes('ref.test');",
    );
    std::thread::sleep(Duration::from_millis(1500));
    let context_shot = page.join("visits-context.png");
    browser.screenshot(&context_shot);

    // A wrong key: the list shows the component's error, and the visits page the problem's
    // detail (the component shows `detail` of anything shaped like Shlink's problem).
    browser.goto("about:blank");
    browser.console();
    browser.goto(&format!("{home}&key=wrong-key-0000#/list-short-urls/1"));
    browser.wait_for(
        "the list's error",
        "return document.body.innerText.includes('Something went wrong while loading short URLs');",
    );
    let console = browser.console().join("\n");
    assert!(
        console.contains("/rest/v3/short-urls") && console.contains("401"),
        "the 401 in the console: {console}"
    );
    let wrong_list_shot = page.join("wrong-key-list.png");
    browser.screenshot(&wrong_list_shot);
    browser.goto("about:blank");
    browser.goto(&format!(
        "{home}&key=wrong-key-0000#/short-code/{visited}/visits"
    ));
    browser.wait_for(
        "the problem's detail on the visits page",
        &format!(
            "return document.body.innerText.includes({});",
            serde_json::to_string(&wrong_detail).expect("json")
        ),
    );
    let wrong_visits_shot = page.join("wrong-key-visits.png");
    browser.screenshot(&wrong_visits_shot);
    drop(browser);

    eprintln!(
        "page ready in {:.1} s, browser part {:.1} s",
        (built - started).as_secs_f64(),
        built.elapsed().as_secs_f64()
    );
}
