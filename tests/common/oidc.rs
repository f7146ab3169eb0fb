//! A real OpenID provider for the tests: panva's certified `oidc-provider` (npm, pinned by
//! `tests/fixtures/oidc/package-lock.json`) run by node from `tests/fixtures/oidc/provider.mjs`
//! on 127.0.0.1 at a free port, one process per [`TestProvider`], stopped when it drops.
//!
//! The package is installed once into `CARGO_TARGET_TMPDIR/oidc-provider/` (`npm ci`, with
//! its npm cache beside it) and reused while the fixture's lock file is unchanged. Without
//! `node` or `npm`, [`TestProvider::start`] says so and returns `None` (the test passes),
//! unless `REQUIRE_NODE=1` (CI), when it fails, as the Shlink SDK tests do.
//!
//! A person's sign-in is [`walk`]: a client with a cookie store follows the redirects from
//! where the sign-in starts, fills the provider's login form with an account's login name, and
//! stops at the redirect to the relying party's callback, which it returns unfollowed.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use reqwest::blocking::Client;
use serde_json::{json, Value};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/oidc");

/// What the provider is started with.
#[derive(Clone, Debug)]
pub struct Setup {
    pub client_id: String,
    pub client_secret: String,
    /// The redirect URIs registered for the client (the provider refuses any other).
    pub redirect_uris: Vec<String>,
    /// `login name → claims` (`email`, `email_verified`, `name`, `groups`, …); the login name
    /// is the account's `sub`.
    pub accounts: Vec<(String, Value)>,
    /// The claims in the ID token as well; false: only at the userinfo endpoint (the
    /// provider's default for an ID token issued with an access token).
    pub id_token_claims: bool,
    /// Publish a key set that did not sign the tokens (under the same `kid`).
    pub rogue_jwks: bool,
    /// The userinfo endpoint answers 503 (claims can only come from the ID token).
    pub userinfo_down: bool,
}

impl Setup {
    /// A client `vsl` with secret `vsl-client-secret-0001` and one redirect URI, no accounts.
    pub fn new(redirect_uri: &str) -> Self {
        Setup {
            client_id: "vsl".into(),
            client_secret: "vsl-client-secret-0001".into(),
            redirect_uris: vec![redirect_uri.into()],
            accounts: Vec::new(),
            id_token_claims: true,
            rogue_jwks: false,
            userinfo_down: false,
        }
    }

    /// Adds an account signing in as `login` with `claims`.
    pub fn account(mut self, login: &str, claims: Value) -> Self {
        self.accounts.push((login.into(), claims));
        self
    }
}

/// A running provider; killed when dropped.
pub struct TestProvider {
    child: Child,
    pub port: u16,
    /// `http://127.0.0.1:{port}`, as its discovery document names it.
    pub issuer: String,
    pub setup: Setup,
    _dir: tempfile::TempDir,
}

impl TestProvider {
    /// Starts a provider with `setup`; `None` (after saying why) where node or npm is missing
    /// and not required.
    pub fn start(setup: Setup) -> Option<TestProvider> {
        let install = installed()?;
        let dir = tempfile::tempdir().expect("provider dir");
        let setup_path = dir.path().join("setup.json");
        let accounts: serde_json::Map<String, Value> = setup.accounts.iter().cloned().collect();
        let file = json!({
            "client_id": setup.client_id,
            "client_secret": setup.client_secret,
            "redirect_uris": setup.redirect_uris,
            "accounts": accounts,
            "id_token_claims": setup.id_token_claims,
            "rogue_jwks": setup.rogue_jwks,
            "userinfo_down": setup.userinfo_down,
        });
        std::fs::write(&setup_path, file.to_string()).expect("write the provider's setup");
        let mut child = Command::new("node")
            .arg(install.join("provider.mjs"))
            .arg(&setup_path)
            .current_dir(install)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start node");
        let stdout = child.stdout.take().expect("provider stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next().and_then(Result::ok).unwrap_or_default());
            // The provider prints notices later too; a closed pipe would kill it (EPIPE).
            for line in lines.map_while(Result::ok) {
                eprintln!("oidc-provider: {line}");
            }
        });
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        let Ok(started) = serde_json::from_str::<Value>(line.trim()) else {
            let _ = child.kill();
            panic!("the OpenID provider did not start: {line:?}");
        };
        let port = u16::try_from(started["port"].as_u64().expect("port")).expect("port");
        Some(TestProvider {
            child,
            port,
            issuer: format!("http://127.0.0.1:{port}"),
            setup,
            _dir: dir,
        })
    }
}

impl Drop for TestProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The directory holding the provider's script and its `node_modules`, installed once per
/// test binary; `None` when node or npm is missing (and not required) — already said why.
fn installed() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(install).as_deref()
}

fn install() -> Option<PathBuf> {
    let required = std::env::var("REQUIRE_NODE").as_deref() == Ok("1");
    let works = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !works("node") || !works("npm") {
        assert!(!required, "REQUIRE_NODE=1 but node or npm is missing");
        eprintln!("skipped: node and npm are needed to run the OpenID provider (oidc-provider)");
        return None;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("oidc-provider");
    std::fs::create_dir_all(&dir).expect("provider dir");
    // The script is copied every time (it is small and may have changed); `npm ci` runs only
    // when the lock file differs from the one the installed `node_modules` came from.
    for file in ["package.json", "package-lock.json", "provider.mjs"] {
        std::fs::copy(Path::new(FIXTURE).join(file), dir.join(file)).expect("copy the fixture");
    }
    let lock = std::fs::read(dir.join("package-lock.json")).expect("lock file");
    let stamp = dir.join("node_modules/.installed-from-lock");
    if std::fs::read(&stamp).ok().as_deref() == Some(&lock[..]) {
        return Some(dir);
    }
    let output = Command::new("npm")
        .args([
            "ci",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--cache",
        ])
        .arg(dir.join(".npm-cache"))
        .current_dir(&dir)
        .output()
        .expect("run npm");
    if !output.status.success() {
        let why = String::from_utf8_lossy(&output.stderr);
        assert!(
            !required,
            "REQUIRE_NODE=1 but oidc-provider did not install: {why}"
        );
        eprintln!("skipped: oidc-provider did not install from npm: {why}");
        return None;
    }
    std::fs::write(&stamp, &lock).expect("stamp the install");
    Some(dir)
}

/// A client as a browser is one: cookies kept, redirects not followed (so that [`walk`] sees
/// each and stops before the callback).
pub fn browser() -> Client {
    Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client")
}

/// Signs `login` in: from `start` (an authorization URL, or a page that redirects to one) it
/// follows every redirect, answers the provider's login form, and returns the first redirect
/// whose location starts with `callback` (not followed). Panics on anything else.
pub fn walk(client: &Client, start: &str, login: &str, callback: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut url = reqwest::Url::parse(start).expect("start URL");
    let mut response = client.get(url.clone()).send().expect("GET");
    loop {
        assert!(
            Instant::now() < deadline,
            "the sign-in did not reach {callback}"
        );
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get("location")
                .and_then(|l| l.to_str().ok())
                .expect("a redirect's location");
            let next = url.join(location).expect("location URL");
            if next.as_str().starts_with(callback) {
                return next.to_string();
            }
            url = next;
            response = client.get(url.clone()).send().expect("GET");
        } else if status.is_success() && url.path().starts_with("/interaction/") {
            // The provider's login form.
            let action = url
                .join(&format!("{}/login", url.path()))
                .expect("form URL");
            url = action;
            response = client
                .post(url.clone())
                .form(&[("login", login)])
                .send()
                .expect("POST the login form");
        } else {
            panic!(
                "{url} answered {status}: {}",
                response.text().unwrap_or_default()
            );
        }
    }
}

/// The `state` and `code` (or `error`) of a callback URL.
pub fn query(callback_url: &str, name: &str) -> Option<String> {
    let url = reqwest::Url::parse(callback_url).expect("callback URL");
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}
