//! The command-line tools beside `serve`, `export` and `import`: `check` (the store's
//! invariants), `create`, `stats`, and `user add` (the first admin of a stopped store). `create` and `stats` work on a stopped store, or through a
//! running server's API with `--server URL --key KEY` (hyper's HTTP/1.1 client, no TLS: meant
//! for the server on this host or its network).
//!
//! Offline work goes through the domain service like the API does; only `check` reads the
//! store's trees, and only to verify them.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::http::{header, Method, Request, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::links::{rfc3339, CreateLink, Links};
use crate::model::{Link, LinkQuery, LinkStatus, StoreError};
use crate::pools::Pools;
use crate::store::prelude::*;
use crate::store::{CheckReport, Store};
use crate::BoxError;

/// `vshortlink check`: prints each check and each fault; `Ok(false)` when there are faults.
/// On sled it reads every tree of the stopped store; on PostgreSQL it checks what the schema
/// does not enforce, in one snapshot, beside running instances if need be.
pub fn check(config: &Config, out: &mut dyn Write) -> Result<bool, BoxError> {
    let report = match config.storage.backend {
        crate::config::Backend::Sled => check_sled(config, out)?,
        #[cfg(not(feature = "postgres"))]
        crate::config::Backend::Postgres => {
            return Err("this binary was built without the `postgres` feature".into())
        }
        #[cfg(feature = "postgres")]
        crate::config::Backend::Postgres => {
            let store = crate::store::open_postgres(config)?;
            writeln!(out, "database: {}", store.describe())?;
            let mut report = store.check()?;
            check_characters(config, &store, &mut report)?;
            print_checked(&report, out)?;
            store.close()?;
            report
        }
    };
    for line in &report.faults {
        writeln!(out, "FAULT: {line}")?;
    }
    if report.faults.is_empty() {
        writeln!(out, "ok: no fault found")?;
    } else {
        writeln!(out, "{} fault(s) found", report.faults.len())?;
    }
    Ok(report.faults.is_empty())
}

/// The sled store's checks, with what opening it noted; prints what was checked.
fn check_sled(config: &Config, out: &mut dyn Write) -> Result<CheckReport, BoxError> {
    let store = match crate::store::open_embedded(config) {
        Ok(store) => store,
        Err(StoreError::Locked(path)) => {
            return Err(format!(
                "the data directory {path} is in use by a running vshortlink server; stop it first"
            )
            .into())
        }
        Err(e) => return Err(e.into()),
    };
    let open = store.open_report().clone();
    let mut report: CheckReport = store.check()?;
    check_characters(config, &*store, &mut report)?;
    print_checked(&report, out)?;
    if let Some(reason) = &open.filter_rebuilt {
        writeln!(
            out,
            "note: the code filter was rebuilt on open ({reason}); it is checked as rebuilt"
        )?;
    }
    for line in &open.counters_corrected {
        writeln!(out, "note: corrected on open: {line}")?;
    }
    store.close()?;
    Ok(report)
}

fn print_checked(report: &CheckReport, out: &mut dyn Write) -> Result<(), BoxError> {
    for line in &report.checked {
        writeln!(out, "checked: {line}")?;
    }
    Ok(())
}

/// Every stored code of a check tier's length must pass its check character: a code that
/// does not (made before `check` was turned on for its length) no longer redirects.
fn check_characters(
    config: &Config,
    store: &dyn Store,
    report: &mut CheckReport,
) -> Result<(), BoxError> {
    let lengths: Vec<u8> = config
        .tiers
        .iter()
        .filter(|(_, t)| t.check)
        .map(|(l, _)| *l)
        .collect();
    if lengths.is_empty() {
        return Ok(());
    }
    let (mut checked, mut failing) = (0u64, 0u64);
    let mut after = None;
    loop {
        let page = match store.list_links(&LinkQuery {
            after,
            limit: 1000,
            ..LinkQuery::default()
        }) {
            Ok(page) => page,
            // A damaged record is already a fault of the checks above; this one stops here.
            Err(e) => {
                report
                    .faults
                    .push(format!("check character: links could not be read on: {e}"));
                return Ok(());
            }
        };
        for link in &page.items {
            if link.status == LinkStatus::Archived || !lengths.contains(&link.length()) {
                continue;
            }
            checked += 1;
            if !crate::codes::check::passes(&link.code) {
                failing += 1;
                if failing <= 20 {
                    report.faults.push(format!(
                        "check character: `{}` (link {}) fails the check of length {}; it no \
                         longer redirects (tiers.{}.check)",
                        link.code,
                        link.id,
                        link.length(),
                        link.length()
                    ));
                }
            }
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    if failing > 20 {
        report
            .faults
            .push(format!("check character: {} more not listed", failing - 20));
    }
    let lengths: Vec<String> = lengths.iter().map(u8::to_string).collect();
    report.checked.push(format!(
        "{checked} codes of the check lengths ({}) against their check character",
        lengths.join(", ")
    ));
    Ok(())
}

/// Where `create` and `stats` act.
pub enum Target {
    /// The stopped store of the configuration.
    Offline,
    /// A running server's API.
    Server { url: String, key: String },
}

/// What `create` asks for.
#[derive(Clone, Debug, Default)]
pub struct CreateArgs {
    pub url: String,
    pub code: Option<String>,
    pub length: Option<u8>,
    pub ttl: Option<i64>,
    pub space: Option<String>,
    /// A configured domain's host (SPEC §26); `None`: the default domain.
    pub domain: Option<String>,
}

fn link_json(links: &Links, link: &Link, created: Option<bool>) -> Value {
    let mut v = json!({
        "code": link.code,
        "domain": links.domain_of(link),
        "short_url": links.short_url_of(link),
        "url": link.url,
        "space": link.space,
        "length": link.length(),
        "status": link.status.as_str(),
        "created_at": rfc3339(link.created_at),
        "expires_at": link.expires_at.map(rfc3339),
    });
    if let (Some(created), Some(o)) = (created, v.as_object_mut()) {
        o.insert("created".into(), Value::Bool(created));
    }
    v
}

fn service(config: &Config) -> Result<(Arc<dyn Store>, Links), BoxError> {
    let store: Arc<dyn Store> = crate::open_store(config)?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let pools = Arc::new(Pools::new(store.clone(), clock.clone(), config)?);
    let bounds = crate::memory::Bounds::derive(config)?.links();
    let links = Links::new(
        store.clone(),
        pools,
        clock,
        Arc::new(config.clone()),
        bounds,
    )?;
    Ok((store, links))
}

/// `vshortlink create`: prints the link as JSON.
pub fn create(config: &Config, target: &Target, args: CreateArgs) -> Result<Value, BoxError> {
    let req = CreateLink {
        url: args.url,
        code: args.code,
        length: args.length,
        ttl: args.ttl,
        space: args.space,
        domain: args.domain,
        ..CreateLink::default()
    };
    match target {
        Target::Server { url, key } => {
            let body = json!({
                "url": req.url, "code": req.code, "length": req.length,
                "ttl": req.ttl, "space": req.space, "domain": req.domain,
            });
            let body: serde_json::Map<String, Value> = body
                .as_object()
                .map(|o| {
                    o.iter()
                        .filter(|(_, v)| !v.is_null())
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .unwrap_or_default();
            call(
                url,
                key,
                Method::POST,
                "/api/v1/links",
                Some(&Value::Object(body)),
            )
        }
        Target::Offline => {
            let (store, links) = service(config)?;
            let result = links.create(req);
            store.close()?;
            let (link, created) = result?;
            Ok(link_json(&links, &link, Some(created)))
        }
    }
}

/// `vshortlink stats [CODE]`: a link and its visit total, or the system's counts.
pub fn stats(
    config: &Config,
    target: &Target,
    code: Option<&str>,
    domain: Option<&str>,
) -> Result<Value, BoxError> {
    match (target, code) {
        (Target::Server { url, key }, Some(code)) => {
            let on = domain
                .map(|host| format!("?domain={}", escaped(host)))
                .unwrap_or_default();
            call(
                url,
                key,
                Method::GET,
                &format!("/api/v1/links/{}{on}", escaped(code)),
                None,
            )
        }
        (Target::Server { url, key }, None) => call(url, key, Method::GET, "/api/v1/stats", None),
        (Target::Offline, code) => {
            let (store, links) = service(config)?;
            let result = (|| -> Result<Value, BoxError> {
                match code {
                    Some(code) => {
                        let link = links.get(&links.domains().key_of(domain, code)?)?;
                        let totals = store.visit_totals(link.id)?;
                        let mut v = link_json(&links, &link, None);
                        if let Some(o) = v.as_object_mut() {
                            o.insert("visits_total".into(), json!(totals.visits));
                            o.insert("bots".into(), json!(totals.bots));
                        }
                        Ok(v)
                    }
                    None => {
                        let counts = store.link_counts()?;
                        Ok(json!({ "links": counts }))
                    }
                }
            })();
            store.close()?;
            result
        }
    }
}

/// Text for a URL's path segment or query value, every reserved character escaped.
fn escaped(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// One API call over plain HTTP/1.1 (hyper's client on a runtime of its own); the JSON body
/// on 2xx, an error with the body otherwise.
fn call(
    server: &str,
    key: &str,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> Result<Value, BoxError> {
    let mut target = url::Url::parse(server).map_err(|e| format!("--server {server}: {e}"))?;
    if target.scheme() != "http" {
        return Err(format!("--server {server}: only http:// is supported").into());
    }
    if target.host_str().is_none() {
        return Err("--server has no host".into());
    }
    let prefix = target.path().trim_end_matches('/').to_string();
    let (path, query) = match path.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (path, None),
    };
    target.set_path(&format!("{prefix}{path}"));
    target.set_query(query);
    target.set_fragment(None);
    let uri: Uri = target
        .as_str()
        .parse()
        .map_err(|e| format!("--server {server}: {e}"))?;
    let mut request = Request::builder()
        .method(method.clone())
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {key}"));
    if body.is_some() {
        request = request.header(header::CONTENT_TYPE, "application/json");
    }
    let payload = body.map(Value::to_string).unwrap_or_default();
    let request = request
        .body(Full::new(Bytes::from(payload)))
        .map_err(|e| format!("{method} {path}: {e}"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (status, reply) = runtime.block_on(async {
        let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
        let exchange = async {
            let response = client.request(request).await.map_err(chain)?;
            let status = response.status();
            let reply = response.into_body().collect().await.map_err(chain)?;
            Ok::<_, String>((status, reply.to_bytes()))
        };
        match tokio::time::timeout(Duration::from_secs(30), exchange).await {
            Ok(done) => done.map_err(|e| format!("{server}: {e}")),
            Err(_) => Err(format!("{server}: no answer within 30 s")),
        }
    })?;
    let body = String::from_utf8_lossy(&reply).into_owned();
    let value: Value = serde_json::from_str(&body).unwrap_or(Value::String(body.clone()));
    if status.is_success() {
        Ok(value)
    } else {
        Err(format!("{method} {path}: {} {body}", status.as_u16()).into())
    }
}

/// An error and its causes on one line (hyper's own message is only "client error (Connect)").
fn chain(e: impl std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// `vshortlink user add EMAIL [--admin] [--name NAME]`: makes a user in the stopped store
/// (the first admin, typically) with a one-time password, printed once. On PostgreSQL it may
/// run beside running instances, which see the user within a second.
pub fn user_add(
    config: &Config,
    email: &str,
    name: Option<String>,
    admin: bool,
) -> Result<Value, BoxError> {
    let store = match crate::store::open(config) {
        Ok(store) => store,
        Err(StoreError::Locked(path)) => {
            return Err(format!(
                "the data directory {path} is in use by a running vshortlink server; stop it \
                 first (on a running server, an admin makes users through the API)"
            )
            .into())
        }
        Err(e) => return Err(e.into()),
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let ring = Arc::new(crate::keys::KeyRing::of(
        &config.auth,
        config.auth.keys.clone(),
    ));
    let checks = crate::passwords::PasswordChecks::new(1);
    let accounts =
        crate::accounts::Accounts::open(store.clone(), ring, &config.auth, checks, clock)?;
    let password = crate::accounts::one_time_password();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let new = crate::accounts::NewUser {
        email: email.to_string(),
        name,
        password: Some(password.clone()),
        role: Some(if admin { "admin" } else { "member" }.to_string()),
    };
    let made = runtime.block_on(accounts.add_user(
        new,
        "cli",
        std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
    ));
    accounts.shutdown();
    store.close()?;
    let user = made.map_err(|e| -> BoxError { e.to_string().into() })?;
    Ok(json!({
        "id": user.id,
        "email": user.email,
        "role": user.role.as_str(),
        "password": password,
        "note": "a one-time password: sign in at /ui/login and change it on /ui/account",
    }))
}
