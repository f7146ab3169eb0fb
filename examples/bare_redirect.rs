//! The ceiling for redirect benchmarks (see benches/RESULTS.md): a bare axum server answering
//! `GET /{code}` with 302 + `Location` from a read-only in-memory `HashMap`, 404 otherwise. No
//! storage, no cache, no visits, no validation: whatever vshortlink's redirect reaches is
//! measured as a ratio of what this reaches on the same machine in the same run
//! (`benches/run.py`).
//!
//! Usage: `bare_redirect [--listen ADDR] [--codes N]` (defaults 127.0.0.1:18181, 100000).
//! Code i is `c{i}` and points at `https://example.com/{i}`. Prints `listening addr=<addr>` on
//! stdout once bound.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

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
    eprintln!("bare_redirect: {msg}\nusage: bare_redirect [--listen ADDR] [--codes N]");
    std::process::exit(2);
}

fn parse_args() -> (SocketAddr, usize) {
    let mut listen: SocketAddr = "127.0.0.1:18181".parse().expect("default address");
    let mut codes = 100_000usize;
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
            "-h" | "--help" => usage("help"),
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    (listen, codes)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let (listen, n) = parse_args();
    let links: Links = Arc::new(
        (0..n)
            .map(|i| (format!("c{i}"), format!("https://example.com/{i}")))
            .collect(),
    );
    let app = Router::new()
        .route("/{code}", get(redirect))
        .with_state(links);

    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .unwrap_or_else(|e| usage(&format!("cannot bind {listen}: {e}")));
    let addr = listener.local_addr().expect("bound address");
    println!("listening addr={addr}");
    std::io::stdout().flush().ok();
    axum::serve(listener, app).await.expect("server");
}
