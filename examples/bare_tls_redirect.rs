//! The ceiling for the redirect over TLS (see benches/RESULTS.md, SPEC §26): the bare axum
//! redirect of `bare_redirect.rs` behind a bare rustls acceptor (tokio-rustls, *ring*, TLS 1.3
//! and 1.2, ALPN h2 and http/1.1, a self-signed certificate made at start) and hyper-util's
//! connection builder. No storage, no cache, no visits, no limits: vshortlink's HTTPS redirect
//! is measured as a ratio of what this reaches on the same machine in the same run
//! (`benches/run.py`), with keep-alive and with a new handshake per request.
//!
//! Usage: `bare_tls_redirect [--listen ADDR] [--codes N] [--cert-out DIR]` (defaults
//! 127.0.0.1:18443, 100000). Code i is `c{i}` and points at `https://example.com/{i}`. With
//! `--cert-out`, the certificate and key it serves are written to `DIR/cert.pem` and
//! `DIR/key.pem` (so that vshortlink serves the same kind of key, and the handshakes compare).
//! Prints `listening addr=<addr>` on stdout once bound.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Built once before serving and never written again, so readers need no lock.
type Links = Arc<HashMap<String, String>>;

async fn redirect(State(links): State<Links>, Path(code): Path<String>) -> Response {
    match links
        .get(&code)
        .and_then(|url| HeaderValue::from_str(url).ok())
    {
        Some(location) => (StatusCode::FOUND, [(header::LOCATION, location)]).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

fn usage(msg: &str) -> ! {
    eprintln!(
        "bare_tls_redirect: {msg}\nusage: bare_tls_redirect [--listen ADDR] [--codes N] [--cert-out DIR]"
    );
    std::process::exit(2);
}

fn parse_args() -> (SocketAddr, usize, Option<std::path::PathBuf>) {
    let mut listen: SocketAddr = "127.0.0.1:18443".parse().expect("default address");
    let mut codes = 100_000usize;
    let mut cert_out = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{arg} needs a value")))
        };
        match arg.as_str() {
            "--listen" => {
                let v = value();
                listen = v
                    .parse()
                    .unwrap_or_else(|_| usage(&format!("bad address {v:?}")));
            }
            "--codes" => {
                let v = value();
                codes = v
                    .parse()
                    .unwrap_or_else(|_| usage(&format!("bad count {v:?}")));
            }
            "--cert-out" => cert_out = Some(value().into()),
            "-h" | "--help" => usage("help"),
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    (listen, codes, cert_out)
}

/// A self-signed certificate for `sl.bench` (written to `cert_out` when given) and the server
/// configuration around it.
fn tls_config(cert_out: Option<&std::path::Path>) -> Arc<rustls::ServerConfig> {
    let made = rcgen::generate_simple_self_signed(vec!["sl.bench".to_string()]).expect("cert");
    if let Some(dir) = cert_out {
        std::fs::write(dir.join("cert.pem"), made.cert.pem()).expect("write cert.pem");
        std::fs::write(dir.join("key.pem"), made.signing_key.serialize_pem())
            .expect("write key.pem");
    }
    let cert = CertificateDer::from(made.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .expect("pair");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(config)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let (listen, n, cert_out) = parse_args();
    let links: Links = Arc::new(
        (0..n)
            .map(|i| (format!("c{i}"), format!("https://example.com/{i}")))
            .collect(),
    );
    let app = Router::new()
        .route("/{code}", get(redirect))
        .with_state(links);
    let acceptor = tokio_rustls::TlsAcceptor::from(tls_config(cert_out.as_deref()));

    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .unwrap_or_else(|e| usage(&format!("cannot bind {listen}: {e}")));
    let addr = listener.local_addr().expect("bound address");
    println!("listening addr={addr}");
    std::io::stdout().flush().ok();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(stream).await else {
                return;
            };
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app))
                .await;
        });
    }
}
