//! `TestApp`: the application on port 0 with a temp data dir and generated config, and a
//! blocking HTTP client that does not follow redirects. It runs in this process by default
//! (`vshortlink::Server`, built as the binary builds it, with a clock the test can move
//! forward); tests of what only a process shows (SIGKILL, SIGTERM, its log, its exit) start the
//! real binary with `TestApp::binary*`.

#![allow(dead_code)]

pub mod chrome;
pub mod cli;
pub mod mmdb;
pub mod oidc;
pub mod pages;
pub mod postgres;
pub mod stub;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use std::sync::Arc;

use reqwest::blocking::{Client, RequestBuilder, Response};
use serde_json::Value;
use vshortlink::clock::{Clock, ShiftedClock};
use vshortlink::config::Config;

pub const ADMIN: &str = "test-admin-key-0001";
pub const EDITOR: &str = "test-editor-key-0001";
pub const VIEWER: &str = "test-viewer-key-0001";
/// An editor limited to the space `sports`.
pub const SPORTS: &str = "test-sports-key-0001";
/// An admin limited to the `sports` space.
pub const SPORTS_ADMIN: &str = "test-sports-admin-key-0001";
pub const BASE_URL: &str = "http://sl.test";

pub struct TestApp {
    pub dir: tempfile::TempDir,
    pub addr: SocketAddr,
    child: Option<Child>,
    /// The in-process server, when the app runs in this process.
    served: Option<Served>,
    in_process: bool,
    /// The in-process app's clock: the wall clock plus whatever the test advanced it by.
    pub clock: Arc<ShiftedClock>,
    extra: String,
    env: Vec<(String, String)>,
    /// The PostgreSQL database this app stores in; `None`: sled in `data_path()`.
    pub database: Option<String>,
    pub client: Client,
    /// Every log line of the current server process.
    pub log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl TestApp {
    /// Starts the app in this process with the default test config.
    pub fn start() -> Self {
        Self::start_with("", &[])
    }

    /// Starts the app in this process with extra TOML (sections other than `server`,
    /// `storage` and `auth`) and extra `VSL_*` variables. With `TEST_STORE=postgres` in the
    /// test's environment, it stores in a fresh database of the test PostgreSQL server instead
    /// of sled (CI runs the integration tests both ways).
    pub fn start_with(extra: &str, env: &[(&str, &str)]) -> Self {
        Self::start_stored(test_database(), extra, env, true)
    }

    /// Starts the real binary with the default test config.
    pub fn binary() -> Self {
        Self::binary_with("", &[])
    }

    /// Starts the real binary, like [`TestApp::start_with`] otherwise.
    pub fn binary_with(extra: &str, env: &[(&str, &str)]) -> Self {
        Self::start_stored(test_database(), extra, env, false)
    }

    /// Starts the real binary on sled whatever `TEST_STORE` says (tests of the embedded
    /// store's own files).
    pub fn start_sled(extra: &str, env: &[(&str, &str)]) -> Self {
        Self::start_stored(None, extra, env, false)
    }

    /// Starts the real binary on a PostgreSQL database (several apps may share one:
    /// instances).
    pub fn start_on(database: &str, extra: &str, env: &[(&str, &str)]) -> Self {
        Self::start_stored(Some(database.to_string()), extra, env, false)
    }

    fn start_stored(
        database: Option<String>,
        extra: &str,
        env: &[(&str, &str)],
        in_process: bool,
    ) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut app = TestApp {
            dir,
            addr: "127.0.0.1:0".parse().expect("addr"),
            child: None,
            served: None,
            in_process,
            clock: Arc::new(ShiftedClock::new()),
            extra: extra.to_string(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            database,
            client: Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(30))
                .build()
                .expect("client"),
            log: Default::default(),
        };
        app.spawn();
        app
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    pub fn data_path(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn write_config(&self) {
        let config = format!(
            r#"
[server]
listen = "127.0.0.1:0"
base_url = "{BASE_URL}"

[storage]
path = "{data}"
{backend}

[auth]
keys = [
  {{ key = "{ADMIN}", name = "admin", role = "admin" }},
  {{ key = "{EDITOR}", name = "editor", role = "editor" }},
  {{ key = "{VIEWER}", name = "viewer", role = "viewer" }},
  {{ key = "{SPORTS}", name = "sports", role = "editor", spaces = ["sports"] }},
  {{ key = "{SPORTS_ADMIN}", name = "sports-admin", role = "admin", spaces = ["sports"] }},
]

{extra}
"#,
            data = self.data_path().display(),
            backend = match &self.database {
                Some(url) => format!("backend = \"postgres\"\n\n[storage.postgres]\nurl = \"{url}\"\npool_size = 8\n"),
                None => String::new(),
            },
            extra = self.extra,
        );
        std::fs::write(self.config_path(), config).expect("write config");
    }

    fn spawn(&mut self) {
        self.write_config();
        if self.in_process {
            self.serve_in_process();
            return;
        }
        let mut command = Command::new(env!("CARGO_BIN_EXE_vshortlink"));
        // Only the variables this app was given: VSL_* in the test's own environment would
        // reconfigure (or, unknown, stop) the server.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("VSL_") {
                command.env_remove(key);
            }
        }
        let mut child = command
            .arg("--config")
            .arg(self.config_path())
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start vshortlink");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        self.log = log.clone();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(mut log) = log.lock() {
                    log.push(line.clone());
                }
                if !sent {
                    if let Some(addr) = line
                        .split_whitespace()
                        .find_map(|w| w.strip_prefix("listen="))
                    {
                        let _ = tx.send(Ok(addr.to_string()));
                        sent = true;
                    }
                }
                if std::env::var_os("TEST_SERVER_LOG").is_some() {
                    eprintln!("[server] {line}");
                }
            }
            if !sent {
                let _ = tx.send(Err("server exited before listening".to_string()));
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("server start timed out")
            .expect("server failed to start");
        self.addr = addr.parse().expect("listen address");
        self.child = Some(child);
    }

    /// Builds the app as the binary does and serves it on a runtime of its own.
    fn serve_in_process(&mut self) {
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let config =
            Config::load_with_env(Some(&self.config_path()), &env).expect("test configuration");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let clock: Arc<dyn Clock> = self.clock.clone();
        let server = runtime
            .block_on(vshortlink::Server::bind(config, clock))
            .expect("the app starts");
        self.addr = server.addr;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = runtime.spawn(server.serve(async move {
            let _ = stopped.await;
        }));
        self.served = Some(Served {
            runtime,
            stop,
            serving,
        });
    }

    /// Moves the in-process app's clock forward (expiries, cooldowns, retention), instead of
    /// sleeping.
    pub fn advance(&self, by: Duration) {
        assert!(self.in_process, "the binary keeps its own time");
        self.clock
            .advance(u64::try_from(by.as_millis()).expect("a shorter advance"));
    }

    /// Stops the in-process app as SIGTERM stops the binary: drains, shuts down, closes.
    fn stop_in_process(&mut self) -> Option<ExitStatus> {
        let served = self.served.take()?;
        let _ = served.stop.send(());
        let outcome = served.runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(30), served.serving).await
        });
        served.runtime.shutdown_timeout(Duration::from_secs(5));
        let code = match outcome {
            Ok(Ok(Ok(vshortlink::Stopped::Cleanly))) => 0,
            _ => 1,
        };
        Some(std::os::unix::process::ExitStatusExt::from_raw(code << 8))
    }

    fn needs_binary(&self, what: &str) {
        assert!(
            !self.in_process,
            "{what} needs the real binary: start this app with TestApp::binary_with"
        );
    }

    /// True when some log line of the current process contains `text`, waiting up to 5 s for
    /// it: a thread copies the server's output into `log`, so a line the server wrote just
    /// before answering may not be there yet when the answer arrives.
    pub fn logged(&self, text: &str) -> bool {
        self.needs_binary("its log");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if self.logged_now(text) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// True when some log line copied so far contains `text` (for asserting that something
    /// was not logged, once what would have logged it is over).
    pub fn logged_now(&self, text: &str) -> bool {
        self.needs_binary("its log");
        self.log
            .lock()
            .map(|l| l.iter().any(|line| line.contains(text)))
            .unwrap_or(false)
    }

    /// The first sample of `/metrics` whose line starts with `line_start`; -1 when none does.
    pub fn metric(&self, line_start: &str) -> f64 {
        let text = self.get("/metrics").text().unwrap_or_default();
        text.lines()
            .find(|l| l.starts_with(line_start))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1.0)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn get(&self, path: &str) -> Response {
        self.client.get(self.url(path)).send().expect("GET")
    }

    pub fn req(&self, method: reqwest::Method, path: &str, key: Option<&str>) -> RequestBuilder {
        let builder = self.client.request(method, self.url(path));
        match key {
            Some(k) => builder.bearer_auth(k),
            None => builder,
        }
    }

    /// `GET` an API path with a key; the JSON of a 200.
    pub fn api_get(&self, path: &str, key: &str) -> Value {
        let response = self
            .req(reqwest::Method::GET, path, Some(key))
            .send()
            .expect("GET");
        assert_eq!(response.status(), 200, "GET {path}");
        response.json().expect("JSON")
    }

    pub fn post_json(&self, path: &str, key: &str, body: &Value) -> Response {
        self.req(reqwest::Method::POST, path, Some(key))
            .json(body)
            .send()
            .expect("POST")
    }

    /// Creates a link as admin and returns the response body (asserting success).
    pub fn create(&self, body: Value) -> Value {
        let response = self.post_json("/api/v1/links", ADMIN, &body);
        let status = response.status().as_u16();
        let json: Value = response.json().expect("json");
        assert!(
            status == 201 || status == 200,
            "create failed: {status} {json}"
        );
        json
    }

    /// Number of links of every status, via the API.
    pub fn link_total(&self) -> usize {
        let response = self
            .req(
                reqwest::Method::GET,
                "/api/v1/links?limit=1000",
                Some(ADMIN),
            )
            .send()
            .expect("list");
        let json: Value = response.json().expect("json");
        json["items"].as_array().map_or(0, Vec::len)
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn terminate(&mut self) -> ExitStatus {
        if self.in_process {
            return self.stop_in_process().expect("running");
        }
        let child = self.child.as_mut().expect("running");
        signal(child.id(), "TERM");
        let status = wait_timeout(child, Duration::from_secs(30)).expect("exit after SIGTERM");
        self.child = None;
        status
    }

    /// Waits up to `limit` for the server to exit by itself.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        self.needs_binary("an exit of its own");
        let status = wait_timeout(self.child.as_mut()?, limit)?;
        self.child = None;
        Some(status)
    }

    /// Replaces the extra TOML the next start writes into the config (the server must be
    /// stopped; `respawn` starts it with it).
    pub fn set_extra(&mut self, extra: &str) {
        self.extra = extra.to_string();
        self.write_config();
    }

    /// Replaces the extra environment the next start passes (the server must be stopped).
    pub fn set_env(&mut self, env: &[(&str, &str)]) {
        self.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }

    /// Starts the server again after it exited by itself.
    pub fn respawn(&mut self) {
        self.spawn();
    }

    /// SIGKILL, as a crash.
    pub fn kill9(&mut self) {
        if self.in_process {
            assert!(
                self.served.is_none(),
                "kill -9 needs the real binary: start this app with TestApp::binary_with"
            );
            return;
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same data dir and config.
    pub fn restart(&mut self) {
        if self.child.is_some() || self.served.is_some() {
            self.terminate();
        }
        self.spawn();
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if self.in_process {
            self.stop_in_process();
        } else {
            self.kill9();
        }
    }
}

/// An app served in this process.
struct Served {
    runtime: tokio::runtime::Runtime,
    stop: tokio::sync::oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<Result<vshortlink::Stopped, vshortlink::BoxError>>,
}

/// A fresh database when the tests run on PostgreSQL (`TEST_STORE=postgres`), else `None`.
fn test_database() -> Option<String> {
    (std::env::var("TEST_STORE").as_deref() == Ok("postgres")).then(|| {
        postgres::fresh_database().expect("TEST_STORE=postgres needs PostgreSQL installed")
    })
}

fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status();
}

fn wait_timeout(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Asserts a problem+json response and returns its body.
pub fn problem(response: Response, status: u16) -> Value {
    assert_eq!(response.status().as_u16(), status, "status");
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    assert_eq!(kind, "application/problem+json");
    let body: Value = response.json().expect("problem body");
    assert_eq!(body["status"], status);
    assert!(body["title"].is_string() && body["detail"].is_string());
    assert!(body["type"]
        .as_str()
        .unwrap_or("")
        .ends_with(body["code"].as_str().unwrap_or("?")));
    body
}
