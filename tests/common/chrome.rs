//! Headless Chromium for the page tests: finding chromium and chromedriver, chromedriver on a
//! free port (stopped on drop), a fantoccini session with the flags this machine needs, and
//! any Chrome DevTools command through chromedriver. `tests/browser.rs`,
//! `tests/page_layout.rs` and `tests/shlink_web.rs` share it.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder};

/// chromedriver and chromium: `CHROMEDRIVER` and `CHROME`, else Debian's paths; `None` when
/// either is missing.
pub fn browser_paths() -> Option<(PathBuf, PathBuf)> {
    let driver = std::env::var_os("CHROMEDRIVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/usr/bin/chromedriver".into());
    let chrome = std::env::var_os("CHROME")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/usr/bin/chromium".into());
    (driver.exists() && chrome.exists()).then_some((driver, chrome))
}

/// [`browser_paths`], or `None` after saying the test is skipped; with `REQUIRE_BROWSER=1`
/// (CI) a missing browser fails the test instead.
pub fn browser_or_skip() -> Option<(PathBuf, PathBuf)> {
    let found = browser_paths();
    if found.is_none() {
        if std::env::var("REQUIRE_BROWSER").as_deref() == Ok("1") {
            panic!("chromium and chromedriver are required (REQUIRE_BROWSER=1) but not found");
        }
        eprintln!("SKIPPED: no /usr/bin/chromium and /usr/bin/chromedriver (apt install chromium chromium-driver)");
    }
    found
}

/// chromedriver on a free port, stopped on drop.
pub struct Driver {
    child: Child,
    pub port: u16,
}

impl Driver {
    pub fn start(path: &Path) -> Driver {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let child = Command::new(path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver { child, port }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The flags headless Chromium needs here: no sandbox (root), no GPU, and nothing that reaches
/// out to Google's hosts (this machine's network refuses them, many at a time).
pub fn chrome_args(profile: &Path) -> Vec<String> {
    [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--hide-scrollbars",
    ]
    .iter()
    .map(|a| a.to_string())
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect()
}

/// A fantoccini session in a fresh profile.
pub async fn connect(driver: &Driver, chrome: &Path, profile: &Path) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({ "binary": chrome, "args": chrome_args(profile) }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .expect("a browser session")
}

/// The colour scheme the page sees (`light` or `dark`), as a DevTools command.
/// Waits up to 15 s for an element that a click's navigation brings. chromedriver answers a
/// lookup made while the page is being replaced with "aborted by navigation", which
/// fantoccini's wait does not retry: a lookup that meets it is made again.
pub async fn element_after_navigation(
    c: &Client,
    locator: fantoccini::Locator<'_>,
) -> fantoccini::elements::Element {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match c
            .wait()
            .at_most(Duration::from_secs(15))
            .for_element(locator)
            .await
        {
            Ok(element) => return element,
            Err(e) if e.to_string().contains("navigation") && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{locator:?}: {e}"),
        }
    }
}

pub fn color_scheme(scheme: &str) -> Cdp {
    Cdp(
        "Emulation.setEmulatedMedia",
        serde_json::json!({ "features": [{ "name": "prefers-color-scheme", "value": scheme }] }),
    )
}

/// Any Chrome DevTools command through chromedriver.
#[derive(Debug)]
pub struct Cdp(pub &'static str, pub serde_json::Value);

impl WebDriverCompatibleCommand for Cdp {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/goog/cdp/execute",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (axum::http::Method, Option<String>) {
        let body = serde_json::json!({ "cmd": self.0, "params": self.1 });
        (axum::http::Method::POST, Some(body.to_string()))
    }
}
