//! HTTPS built in (SPEC §26), against the real binary: `files` mode with a CA this test makes
//! (the handshake verifies for the right name, HTTP/2 by ALPN, a replaced pair served to new
//! connections within 5 s while an open one keeps going, a bad pair ignored), the plain
//! listener's 308 and HSTS; `acme` mode against a real Pebble (`pebble` on the PATH, else
//! these skip, or fail with `REQUIRE_PEBBLE=1`): a certificate for the default domain that
//! verifies against Pebble's root, no order for a made-up name, one for a domain added at run
//! time, none after a restart, a real http-01 and a real tls-alpn-01 validation (the default
//! domain and one added at run time) through a tiny DNS answerer, a renewal of a
//! short-lived certificate, a failed renewal logged and retried while the old certificate
//! serves. With `TEST_STORE=postgres` the certificates and the account live in
//! PostgreSQL, and two instances sharing it order once and serve the same certificate.

mod common;

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::TestApp;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

/// The default domain of the test configuration (`http://sl.test`).
const HOST: &str = "sl.test";

/// A certificate authority of this test's own.
struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestCa {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let issuer =
            CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA");
        TestCa { issuer }
    }

    fn pem(&self) -> String {
        self.issuer.as_ref().pem()
    }

    /// A leaf for `names` with its key, as PEM (chain, key).
    fn leaf(&self, names: &[&str], cn: &str) -> (String, String) {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .expect("params");
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("leaf");
        (cert.pem(), key.serialize_pem())
    }
}

/// An HTTPS client trusting `root_pem` alone, sending `host` as SNI to `addr`, keeping
/// connections open, reporting the peer's certificate.
fn https_client(root_pem: &str, host: &str, addr: SocketAddr) -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(root_pem.as_bytes()).expect("root"))
        .resolve(host, addr)
        .tls_info(true)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// The DER of the certificate a response came over.
fn peer_cert(response: &reqwest::blocking::Response) -> Vec<u8> {
    response
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|i| i.peer_certificate())
        .expect("a peer certificate")
        .to_vec()
}

fn der_of(pem: &str) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes())
        .expect("pem")
        .to_vec()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

fn write_pair(dir: &Path, (chain, key): &(String, String)) -> (PathBuf, PathBuf) {
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, chain).expect("write cert");
    std::fs::write(&key_path, key).expect("write key");
    (cert_path, key_path)
}

fn files_app(ca: &TestCa, extra: &str) -> (TestApp, tempfile::TempDir) {
    let files = tempfile::tempdir().expect("dir");
    let (cert, key) = write_pair(files.path(), &ca.leaf(&[HOST], "first"));
    let app = TestApp::binary_with(
        &format!(
            "[tls]\nmode = \"files\"\ncert = \"{}\"\nkey = \"{}\"\n{extra}",
            cert.display(),
            key.display()
        ),
        &[],
    );
    (app, files)
}

#[test]
fn files_mode_serves_https_with_http2_and_verifies_for_the_name() {
    let ca = TestCa::new("vsl files CA");
    let (app, _files) = files_app(&ca, "");
    let client = https_client(&ca.pem(), HOST, app.addr);
    let url = format!("https://{HOST}:{}/healthz", app.addr.port());
    let response = client.get(&url).send().expect("https");
    assert_eq!(response.status(), 200);
    assert_eq!(response.version(), reqwest::Version::HTTP_2, "h2 by ALPN");
    assert!(response
        .headers()
        .get("strict-transport-security")
        .is_none());
    // HTTP/1.1 when the client offers only it.
    let h1 = reqwest::blocking::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).expect("root"))
        .resolve(HOST, app.addr)
        .http1_only()
        .build()
        .expect("client");
    let response = h1.get(&url).send().expect("https over HTTP/1.1");
    assert_eq!(response.version(), reqwest::Version::HTTP_11);
    // Another name does not verify against this certificate.
    let other = https_client(&ca.pem(), "other.test", app.addr);
    let refused = other
        .get(format!("https://other.test:{}/healthz", app.addr.port()))
        .send();
    assert!(
        refused.is_err(),
        "a name the certificate lacks must not verify"
    );
    // Plain HTTP on the HTTPS port gets nowhere.
    let plain = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client")
        .get(format!("http://{}/healthz", app.addr))
        .send();
    assert!(plain.is_err() || plain.is_ok_and(|r| r.status() != 200));
}

#[test]
fn a_form_posted_over_http2_passes_the_same_origin_check() {
    // HTTP/2 carries the host in `:authority`, not in a `Host` header: the pages' check that
    // a form came from this site must still see it.
    let ca = TestCa::new("vsl files CA");
    let (app, _files) = files_app(&ca, "");
    let client = reqwest::blocking::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).expect("root"))
        .resolve(HOST, app.addr)
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let base = format!("https://{HOST}:{}", app.addr.port());
    let page = client
        .get(format!("{base}/ui/login"))
        .send()
        .expect("login page");
    assert_eq!(page.version(), reqwest::Version::HTTP_2);
    let csrf = common::pages::csrf_of(&page.text().expect("html"));
    let signed_in = client
        .post(format!("{base}/ui/login"))
        .header("Origin", &base)
        .form(&[("csrf", csrf.as_str()), ("key", common::ADMIN)])
        .send()
        .expect("sign in");
    assert_ne!(signed_in.status(), 403, "the form's origin is this site");
    // Another origin is still refused.
    let page = client
        .get(format!("{base}/ui/login"))
        .send()
        .expect("login page");
    let csrf = common::pages::csrf_of(&page.text().expect("html"));
    let forged = client
        .post(format!("{base}/ui/login"))
        .header("Origin", "https://evil.example")
        .form(&[("csrf", csrf.as_str()), ("key", common::ADMIN)])
        .send()
        .expect("forged");
    assert_eq!(forged.status(), 403);
}

#[test]
fn files_are_reread_new_connections_get_the_new_pair_and_a_bad_pair_is_ignored() {
    let ca = TestCa::new("vsl files CA");
    let (app, files) = files_app(&ca, "");
    let url = format!("https://{HOST}:{}/healthz", app.addr.port());
    let first_der = der_of(&std::fs::read_to_string(files.path().join("cert.pem")).unwrap());
    // An open connection, kept alive by its client's pool.
    let open = https_client(&ca.pem(), HOST, app.addr);
    let response = open.get(&url).send().expect("https");
    assert_eq!(peer_cert(&response), first_der);

    let second = ca.leaf(&[HOST], "second");
    let second_der = der_of(&second.0);
    write_pair(files.path(), &second);
    let started = Instant::now();
    loop {
        let fresh = https_client(&ca.pem(), HOST, app.addr);
        let response = fresh.get(&url).send().expect("https");
        if peer_cert(&response) == second_der {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the new pair was not served within 5 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The open connection still answers, over its first handshake.
    let response = open.get(&url).send().expect("the open connection");
    assert_eq!(response.status(), 200);
    assert_eq!(
        peer_cert(&response),
        first_der,
        "same connection, same certificate"
    );

    // A key that belongs to another certificate: the second pair keeps serving.
    let third = ca.leaf(&[HOST], "third");
    let stray = ca.leaf(&[HOST], "stray");
    std::fs::write(files.path().join("cert.pem"), &third.0).unwrap();
    std::fs::write(files.path().join("key.pem"), &stray.1).unwrap();
    assert!(app.logged("not a valid pair"), "the bad pair is logged");
    std::thread::sleep(Duration::from_millis(1500));
    let fresh = https_client(&ca.pem(), HOST, app.addr);
    let response = fresh.get(&url).send().expect("https");
    assert_eq!(
        peer_cert(&response),
        second_der,
        "a bad pair keeps the old one"
    );
    // Its key arrives: now it is a pair.
    std::fs::write(files.path().join("key.pem"), &third.1).unwrap();
    let started = Instant::now();
    loop {
        let fresh = https_client(&ca.pem(), HOST, app.addr);
        if peer_cert(&fresh.get(&url).send().expect("https")) == der_of(&third.0) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the mended pair"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_plain_listener_redirects_with_308_and_hsts_is_sent() {
    let ca = TestCa::new("vsl files CA");
    let plain_port = free_port();
    let (app, _files) = files_app(
        &ca,
        &format!("http_listen = \"127.0.0.1:{plain_port}\"\nhsts = true\n"),
    );
    let client = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let response = client
        .get(format!("http://127.0.0.1:{plain_port}/abc/def?x=1&y=2"))
        .header("Host", format!("{HOST}:{plain_port}"))
        .send()
        .expect("plain");
    assert_eq!(response.status(), 308);
    assert_eq!(
        response.headers()["location"],
        format!("https://{HOST}:{}/abc/def?x=1&y=2", app.addr.port()).as_str()
    );
    // An unknown challenge token is a 404, not a redirect.
    let response = client
        .get(format!(
            "http://127.0.0.1:{plain_port}/.well-known/acme-challenge/nothing-here"
        ))
        .header("Host", HOST)
        .send()
        .expect("plain");
    assert_eq!(response.status(), 404);
    // HSTS on every HTTPS answer (a redirect's too).
    let https = https_client(&ca.pem(), HOST, app.addr);
    for path in ["/healthz", "/no-such-code"] {
        let response = https
            .get(format!("https://{HOST}:{}{path}", app.addr.port()))
            .send()
            .expect("https");
        assert_eq!(
            response.headers()["strict-transport-security"],
            "max-age=31536000",
            "{path}"
        );
    }
}

#[test]
fn a_bad_tls_configuration_stops_the_start_naming_the_key() {
    let dir = tempfile::tempdir().expect("dir");
    let config = dir.path().join("config.toml");
    let cases = [
        (
            format!(
                "[tls]\nmode = \"files\"\ncert = \"{}\"\nkey = \"{}\"\n",
                dir.path().join("missing.pem").display(),
                dir.path().join("missing-key.pem").display()
            ),
            "tls.cert",
        ),
        (
            "[tls]\nmode = \"acme\"\nchallenge = \"dns-01\"\n".to_string(),
            "challenge",
        ),
        ("[tls]\nmode = \"files\"\n".to_string(), "tls.cert"),
    ];
    for (toml, key) in cases {
        std::fs::write(
            &config,
            format!(
                "[server]\nlisten = \"127.0.0.1:0\"\nbase_url = \"https://sl.test\"\n[storage]\npath = \"{}\"\n{toml}",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_vshortlink"))
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{toml}");
        assert!(stderr.contains(key), "{toml}: {stderr}");
    }
}

// ---- ACME against Pebble ----

/// A running Pebble, killed when dropped.
struct Pebble {
    child: Child,
    dir: tempfile::TempDir,
    /// The directory URL and the PEM the server's HTTPS is signed by (what `tls.ca` names).
    directory: String,
    ca_path: PathBuf,
    management: u16,
    client: reqwest::blocking::Client,
    _dns: Option<Dns>,
}

/// Pebble's options for one test.
#[derive(Default)]
struct PebbleOptions {
    /// Skip validation (`PEBBLE_VA_ALWAYS_VALID=1`).
    always_valid: bool,
    /// Where its VA asks for http-01 answers.
    http_port: Option<u16>,
    /// Where its VA asks for tls-alpn-01 answers.
    tls_port: Option<u16>,
    /// Issued certificates' validity, in seconds.
    validity: Option<u64>,
}

fn pebble_binary() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("pebble"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var("REQUIRE_PEBBLE").as_deref() != Ok("1"),
            "REQUIRE_PEBBLE=1 but pebble is not installed"
        );
        eprintln!("skipped: pebble is not installed");
    }
    found
}

impl Pebble {
    fn start(options: PebbleOptions) -> Option<Pebble> {
        let binary = pebble_binary()?;
        let dir = tempfile::tempdir().expect("dir");
        let ca = TestCa::new("pebble's HTTPS CA");
        let (chain, key) = ca.leaf(&["localhost", "127.0.0.1"], "pebble");
        std::fs::write(dir.path().join("cert.pem"), chain).unwrap();
        std::fs::write(dir.path().join("key.pem"), key).unwrap();
        let ca_path = dir.path().join("ca.pem");
        std::fs::write(&ca_path, ca.pem()).unwrap();
        let (listen, management) = (free_port(), free_port());
        let dns = Dns::start();
        let mut config = serde_json::json!({
            "pebble": {
                "listenAddress": format!("127.0.0.1:{listen}"),
                "managementListenAddress": format!("127.0.0.1:{management}"),
                "certificate": dir.path().join("cert.pem"),
                "privateKey": dir.path().join("key.pem"),
                "httpPort": options.http_port.unwrap_or_else(free_port),
                "tlsPort": options.tls_port.unwrap_or_else(free_port),
                "ocspResponderURL": "",
                "externalAccountBindingRequired": false,
            }
        });
        if let Some(validity) = options.validity {
            config["pebble"]["certificateValidityPeriod"] = validity.into();
        }
        let config_path = dir.path().join("pebble.json");
        std::fs::write(&config_path, config.to_string()).unwrap();
        let mut command = Command::new(binary);
        command
            .arg("-config")
            .arg(&config_path)
            .arg("-dnsserver")
            .arg(dns.addr.to_string())
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .env("PEBBLE_AUTHZREUSE", "0")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if options.always_valid {
            command.env("PEBBLE_VA_ALWAYS_VALID", "1");
        }
        let child = command.spawn().expect("start pebble");
        let client = reqwest::blocking::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap())
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client");
        let directory = format!("https://127.0.0.1:{listen}/dir");
        let started = Instant::now();
        while client.get(&directory).send().is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "pebble did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(Pebble {
            child,
            dir,
            directory,
            ca_path,
            management,
            client,
            _dns: Some(dns),
        })
    }

    /// Pebble's current root (what issued certificates chain to).
    fn root(&self) -> String {
        self.client
            .get(format!("https://127.0.0.1:{}/roots/0", self.management))
            .send()
            .and_then(|r| r.text())
            .expect("pebble's root")
    }

    fn tls_section(&self, extra: &str) -> String {
        format!(
            "[tls]\nmode = \"acme\"\ndirectory = \"{}\"\nca = \"{}\"\nemail = \"ops@sl.test\"\n{extra}",
            self.directory,
            self.ca_path.display()
        )
    }
}

impl Pebble {
    /// Stops the authority (orders fail from now on).
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = &self.dir;
    }
}

/// A DNS answerer for Pebble's validation: 127.0.0.1 for every A question, no records for
/// anything else.
struct Dns {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Dns {
    fn start() -> Dns {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("udp");
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let addr = socket.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while !stopping.load(Ordering::Relaxed) {
                let Ok((n, from)) = socket.recv_from(&mut buf) else {
                    continue;
                };
                if let Some(answer) = dns_answer(&buf[..n]) {
                    let _ = socket.send_to(&answer, from);
                }
            }
        });
        Dns { addr, stop }
    }
}

impl Drop for Dns {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The answer to one query: its question echoed, and for type A one record of 127.0.0.1.
fn dns_answer(query: &[u8]) -> Option<Vec<u8>> {
    if query.len() < 12 {
        return None;
    }
    let mut at = 12;
    while *query.get(at)? != 0 {
        at += 1 + usize::from(query[at]);
    }
    let question_end = at + 5;
    let qtype = u16::from_be_bytes([*query.get(at + 1)?, *query.get(at + 2)?]);
    query.get(question_end - 1)?;
    let a = qtype == 1;
    let mut answer = Vec::with_capacity(question_end + 16);
    answer.extend_from_slice(&query[..2]);
    answer.extend_from_slice(&[0x81, 0x80, 0, 1, 0, u8::from(a), 0, 0, 0, 0]);
    answer.extend_from_slice(&query[12..question_end]);
    if a {
        answer.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1]);
    }
    Some(answer)
}

/// Waits for the server to serve a certificate for `sni` that verifies against `root`;
/// returns its DER.
fn wait_for_certificate(app: &TestApp, root: &str, sni: &str, limit: Duration) -> Vec<u8> {
    let started = Instant::now();
    loop {
        let client = https_client(root, sni, app.addr);
        if let Ok(response) = client
            .get(format!("https://{sni}:{}/healthz", app.addr.port()))
            .send()
        {
            assert_eq!(response.status(), 200);
            return peer_cert(&response);
        }
        assert!(
            started.elapsed() < limit,
            "no certificate for {sni} verified within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A metric's value, read over HTTPS.
fn metric(app: &TestApp, root: &str, line_start: &str) -> f64 {
    let text = https_client(root, HOST, app.addr)
        .get(format!("https://{HOST}:{}/metrics", app.addr.port()))
        .send()
        .and_then(|r| r.text())
        .unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1.0)
}

const ISSUED: &str = "vsl_tls_orders_total{outcome=\"issued\"}";

/// A domain added at run time through the API (over HTTPS on the default domain).
const ADDED: &str = "go.added.test";

/// Adds `host` as a domain, as an admin would while the server runs.
fn add_domain(app: &TestApp, root: &str, host: &str) {
    let response = https_client(root, HOST, app.addr)
        .post(format!("https://{HOST}:{}/api/v1/domains", app.addr.port()))
        .bearer_auth(common::ADMIN)
        .json(&serde_json::json!({ "host": host }))
        .send()
        .expect("add a domain");
    assert_eq!(response.status(), 201, "{:?}", response.text());
}

#[test]
fn acme_obtains_the_default_domain_ignores_made_up_names_and_keeps_it_across_restarts() {
    let Some(pebble) = Pebble::start(PebbleOptions {
        always_valid: true,
        ..Default::default()
    }) else {
        return;
    };
    let mut app = TestApp::binary_with(&pebble.tls_section(""), &[]);
    let root = pebble.root();
    let der = wait_for_certificate(&app, &root, HOST, Duration::from_secs(30));
    assert!(app.logged("tls: certificate obtained"));
    assert_eq!(metric(&app, &root, ISSUED), 1.0);
    let expiry = metric(
        &app,
        &root,
        "vsl_tls_certificate_expiry_timestamp_seconds{host=\"sl.test\"}",
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as f64;
    assert!(expiry > now, "expiry {expiry} after now {now}");

    // A made-up name gets the default domain's certificate (so it does not verify for that
    // name) and orders nothing.
    let made_up = https_client(&root, "made-up.example", app.addr);
    assert!(made_up
        .get(format!(
            "https://made-up.example:{}/healthz",
            app.addr.port()
        ))
        .send()
        .is_err());
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        metric(&app, &root, ISSUED),
        1.0,
        "no order for a made-up name"
    );
    assert!(!app.logged_now("made-up.example"));

    // A domain added while the server runs gets its own certificate: one more order.
    add_domain(&app, &root, ADDED);
    let added = wait_for_certificate(&app, &root, ADDED, Duration::from_secs(30));
    assert_ne!(added, der, "its own certificate, not the default domain's");
    assert_eq!(metric(&app, &root, ISSUED), 2.0);
    assert!(
        metric(
            &app,
            &root,
            "vsl_tls_certificate_expiry_timestamp_seconds{host=\"go.added.test\"}"
        ) > now
    );

    // A restart serves the stored certificates at once, ordering nothing.
    app.restart();
    let again = wait_for_certificate(&app, &root, HOST, Duration::from_secs(5));
    assert_eq!(again, der, "the stored certificate");
    let added_again = wait_for_certificate(&app, &root, ADDED, Duration::from_secs(5));
    assert_eq!(added_again, added, "the added domain's stored certificate");
    std::thread::sleep(Duration::from_secs(2));
    assert!(!app.logged_now("tls: certificate obtained"));
    assert_eq!(
        metric(&app, &root, ISSUED),
        -1.0,
        "no order after a restart"
    );
}

#[test]
fn acme_validates_for_real_over_http_01() {
    let plain_port = free_port();
    let Some(pebble) = Pebble::start(PebbleOptions {
        http_port: Some(plain_port),
        ..Default::default()
    }) else {
        return;
    };
    let app = TestApp::binary_with(
        &pebble.tls_section(&format!(
            "challenge = \"http-01\"\nhttp_listen = \"127.0.0.1:{plain_port}\"\n"
        )),
        &[],
    );
    let root = pebble.root();
    wait_for_certificate(&app, &root, HOST, Duration::from_secs(60));
    assert_eq!(metric(&app, &root, ISSUED), 1.0);
}

#[test]
fn acme_renews_when_a_third_of_the_life_is_left() {
    let Some(pebble) = Pebble::start(PebbleOptions {
        always_valid: true,
        validity: Some(30),
        ..Default::default()
    }) else {
        return;
    };
    let app = TestApp::binary_with(&pebble.tls_section(""), &[]);
    let root = pebble.root();
    let first = wait_for_certificate(&app, &root, HOST, Duration::from_secs(30));
    // 30 s of life: renewed once 10 s are left, within about 20 s.
    let started = Instant::now();
    loop {
        let now = wait_for_certificate(&app, &root, HOST, Duration::from_secs(5));
        if now != first {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(40),
            "not renewed within 40 s"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(app.logged("renewal=true"));
}

#[test]
fn acme_validates_for_real_over_tls_alpn_01() {
    // Pebble's validator connects to the name's `tlsPort`: the port `server.listen` binds.
    let port = free_port();
    let Some(pebble) = Pebble::start(PebbleOptions {
        tls_port: Some(port),
        ..Default::default()
    }) else {
        return;
    };
    let listen = format!("127.0.0.1:{port}");
    let app = TestApp::binary_with(
        &pebble.tls_section(""),
        &[("VSL_SERVER__LISTEN", listen.as_str())],
    );
    assert_eq!(app.addr.port(), port);
    let root = pebble.root();
    wait_for_certificate(&app, &root, HOST, Duration::from_secs(60));
    assert_eq!(metric(&app, &root, ISSUED), 1.0);
    // A domain added at run time is validated the same way, for its own name.
    add_domain(&app, &root, ADDED);
    wait_for_certificate(&app, &root, ADDED, Duration::from_secs(60));
    assert_eq!(metric(&app, &root, ISSUED), 2.0);
}

#[test]
fn instances_sharing_postgres_order_once_and_both_serve_it() {
    if std::env::var("TEST_STORE").as_deref() != Ok("postgres") {
        eprintln!("skipped: several instances need TEST_STORE=postgres");
        return;
    }
    let Some(pebble) = Pebble::start(PebbleOptions {
        always_valid: true,
        ..Default::default()
    }) else {
        return;
    };
    let Some(url) = common::postgres::fresh_database() else {
        return;
    };
    let section = pebble.tls_section("");
    // Started together, so that both look for a certificate at once.
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| TestApp::start_on(&url, &section, &[]));
        let b = s.spawn(|| TestApp::start_on(&url, &section, &[]));
        (a.join().expect("a"), b.join().expect("b"))
    });
    let root = pebble.root();
    let from_a = wait_for_certificate(&a, &root, HOST, Duration::from_secs(30));
    let from_b = wait_for_certificate(&b, &root, HOST, Duration::from_secs(90));
    assert_eq!(from_a, from_b, "both serve the one certificate");
    std::thread::sleep(Duration::from_secs(2));
    let issued: f64 = [&a, &b]
        .iter()
        .map(|app| metric(app, &root, ISSUED).max(0.0))
        .sum();
    assert_eq!(issued, 1.0, "one order between the two instances");
}

#[test]
fn a_failed_renewal_is_logged_retried_and_the_old_certificate_keeps_serving() {
    let Some(mut pebble) = Pebble::start(PebbleOptions {
        always_valid: true,
        validity: Some(60),
        ..Default::default()
    }) else {
        return;
    };
    let app = TestApp::binary_with(&pebble.tls_section(""), &[]);
    let root = pebble.root();
    let first = wait_for_certificate(&app, &root, HOST, Duration::from_secs(30));
    pebble.stop();
    // Due once 20 s of its 60 are left: the order fails, and is retried in a minute.
    let started = Instant::now();
    while !app.logged_now("certificate order failed") {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no failed renewal logged"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(app.logged("retry_in_seconds=60"));
    assert!(app.logged("the current certificate keeps serving"));
    let served = wait_for_certificate(&app, &root, HOST, Duration::from_secs(5));
    assert_eq!(served, first, "the old certificate keeps serving");
    assert_eq!(
        metric(&app, &root, "vsl_tls_orders_total{outcome=\"failed\"}"),
        1.0
    );
}
