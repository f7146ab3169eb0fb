//! The accept loop, against slow and huge clients: connections served by hyper with a header
//! read timeout (`server.header_timeout`), a header size limit answered 431
//! (`server.max_header_bytes`), and a cap on concurrent connections (`server.max_connections`).
//! `axum::serve` exposes none of these, so this replaces it; the router is the same, behind
//! [`Front`].
//!
//! With `[tls]` on (SPEC §26), the same loop serves HTTPS: each connection's TLS handshake
//! (rustls through tokio-rustls, bounded by the header timeout) reads the ClientHello first, so
//! that a tls-alpn-01 validation gets its challenge certificate and everything else the
//! server's; then HTTP/2 or HTTP/1.1 as ALPN chose, with HSTS when asked. [`serve_plain_http`]
//! is `tls.http_listen`: http-01 challenges, and a 308 to HTTPS for everything else.
//!
//! Shutdown: stop accepting, ask every connection to finish its request and close, wait for them
//! (bounded), return. Owns no application state.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::LazyConfigAcceptor;
use vshortlink_services::tls::{certs, Tls};

use super::front::Front;

/// How the server treats connections.
#[derive(Clone, Copy, Debug)]
pub struct ServeOptions {
    /// A client must send its whole request head within this time, or the connection closes
    /// (with TLS: its handshake too, within the same time).
    pub header_timeout: Duration,
    /// Largest request head (request line and headers); larger ones are answered 431.
    pub max_header_bytes: usize,
    /// Connections served at once; more wait in the listen backlog until one closes.
    pub max_connections: usize,
    /// Longest wait for open connections at shutdown.
    pub drain_timeout: Duration,
}

/// `Strict-Transport-Security`'s value with `tls.hsts` (a year).
const HSTS: &str = "max-age=31536000";
/// Where ACME's http-01 challenges are asked (RFC 8555 §8.3).
const CHALLENGE_PREFIX: &str = "/.well-known/acme-challenge/";

/// Serves `front` on `listener` until `shutdown` completes, then drains: plain HTTP/1.1, or
/// HTTPS when `tls` is given.
pub async fn serve(
    listener: TcpListener,
    front: Front,
    options: ServeOptions,
    tls: Option<Arc<Tls>>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let http1 = Arc::new(http1_builder(&options));
    let http2 = Arc::new(http2_builder(&options));
    accept_loop(listener, options, shutdown, move |stream, peer, permit, watcher| {
        let front = front.clone();
        let http1 = http1.clone();
        match &tls {
            None => {
                let service = front_service(front, peer, false);
                let connection = http1.serve_connection(TokioIo::new(stream), service);
                tokio::spawn(async move {
                    if let Err(e) = watcher.watch(connection).await {
                        tracing::debug!(peer = %peer, error = %e, "connection ended with an error");
                    }
                    drop(permit);
                });
            }
            Some(tls) => {
                let (tls, http2) = (tls.clone(), http2.clone());
                tokio::spawn(async move {
                    serve_tls(stream, peer, front, tls, options, &http1, &http2, watcher).await;
                    drop(permit);
                });
            }
        }
    })
    .await
}

/// `tls.http_listen`: answers http-01 challenges from the store, and a 308 to
/// `https://HOST[:port]/path?query` for everything else, until `shutdown` completes.
pub async fn serve_plain_http(
    listener: TcpListener,
    tls: Arc<Tls>,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let http1 = Arc::new(http1_builder(&options));
    accept_loop(
        listener,
        options,
        shutdown,
        move |stream, peer, permit, watcher| {
            let tls = tls.clone();
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let tls = tls.clone();
                async move { Ok::<_, std::convert::Infallible>(to_https(request, tls).await) }
            });
            let connection = http1.serve_connection(TokioIo::new(stream), service);
            tokio::spawn(async move {
                if let Err(e) = watcher.watch(connection).await {
                    tracing::debug!(peer = %peer, error = %e, "connection ended with an error");
                }
                drop(permit);
            });
        },
    )
    .await
}

fn http1_builder(options: &ServeOptions) -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_timeout)
        .max_buf_size(options.max_header_bytes);
    builder
}

fn http2_builder(options: &ServeOptions) -> hyper::server::conn::http2::Builder<TokioExecutor> {
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(options.max_header_bytes).unwrap_or(u32::MAX));
    builder
}

/// Accepts until `shutdown`, handing each connection (with its slot and a drain watcher) to
/// `on_connection`; then drains.
async fn accept_loop(
    listener: TcpListener,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
    on_connection: impl Fn(TcpStream, SocketAddr, OwnedSemaphorePermit, Watcher),
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        // A slot first: past the cap, connections wait in the kernel's backlog, and the ones
        // being served (including slow ones, which the header timeout bounds) are not starved.
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        on_connection(stream, peer, permit, graceful.watcher());
    }
    drop(listener);
    if tokio::time::timeout(options.drain_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the drain timeout; closing them");
    }
    Ok(())
}

/// The router behind [`Front`] as a hyper service, with HSTS when asked.
fn front_service(
    front: Front,
    peer: SocketAddr,
    hsts: bool,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<Body>,
    Error = std::convert::Infallible,
    Future = impl Future<Output = Result<Response<Body>, std::convert::Infallible>> + Send,
> + Clone {
    hyper::service::service_fn(move |mut request: Request<Incoming>| {
        let front = front.clone();
        host_from_authority(&mut request);
        async move {
            let mut response = front.handle(request.map(Body::new), peer).await;
            if hsts {
                response.headers_mut().insert(
                    header::STRICT_TRANSPORT_SECURITY,
                    HeaderValue::from_static(HSTS),
                );
            }
            Ok::<_, std::convert::Infallible>(response)
        }
    })
}

/// An HTTP/2 request names its host in `:authority` and carries no `Host` header; the routes
/// (the pages' same-origin check, the domains) read `Host`, so it is set from the authority
/// (host and port, never user information) when absent.
fn host_from_authority<B>(request: &mut Request<B>) {
    if request.headers().contains_key(header::HOST) {
        return;
    }
    let Some(authority) = request.uri().authority() else {
        return;
    };
    let host = match authority.port() {
        Some(port) => format!("{}:{port}", authority.host()),
        None => authority.host().to_string(),
    };
    if let Ok(host) = HeaderValue::from_str(&host) {
        request.headers_mut().insert(header::HOST, host);
    }
}

/// One HTTPS connection: the handshake (a tls-alpn-01 validation ends there), then HTTP/2 or
/// HTTP/1.1 as ALPN chose.
#[allow(clippy::too_many_arguments)]
async fn serve_tls(
    stream: TcpStream,
    peer: SocketAddr,
    front: Front,
    tls: Arc<Tls>,
    options: ServeOptions,
    http1: &hyper::server::conn::http1::Builder,
    http2: &hyper::server::conn::http2::Builder<TokioExecutor>,
    watcher: Watcher,
) {
    let handshake = async {
        let start = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream).await?;
        let hello = start.client_hello();
        let validation = hello
            .alpn()
            .is_some_and(|mut protocols| protocols.any(|p| p == certs::ACME_TLS_ALPN));
        if validation {
            let sni = hello.server_name().map(str::to_string);
            let asked = tls.clone();
            let config =
                tokio::task::spawn_blocking(move || asked.challenge_config(sni.as_deref()))
                    .await
                    .ok()
                    .flatten()
                    .ok_or_else(|| {
                        std::io::Error::other("no tls-alpn-01 challenge waits for this name")
                    })?;
            // The validation needs the handshake only.
            start.into_stream(config).await?;
            return Ok(None);
        }
        start.into_stream(tls.server_config()).await.map(Some)
    };
    let stream = match tokio::time::timeout(options.header_timeout, handshake).await {
        Ok(Ok(Some(stream))) => stream,
        Ok(Ok(None)) => return,
        Ok(Err(e)) => {
            tracing::debug!(peer = %peer, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(peer = %peer, "TLS handshake timed out");
            return;
        }
    };
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
    let service = front_service(front, peer, tls.hsts());
    let io = TokioIo::new(stream);
    let ended = if h2 {
        watcher.watch(http2.serve_connection(io, service)).await
    } else {
        watcher.watch(http1.serve_connection(io, service)).await
    };
    if let Err(e) = ended {
        tracing::debug!(peer = %peer, error = %e, "connection ended with an error");
    }
}

/// `tls.http_listen`'s answer to one request.
async fn to_https(request: Request<Incoming>, tls: Arc<Tls>) -> Response<Body> {
    let path = request.uri().path();
    if let Some(token) = path.strip_prefix(CHALLENGE_PREFIX) {
        let token = token.to_string();
        let answer = tokio::task::spawn_blocking(move || tls.http_challenge(&token))
            .await
            .ok()
            .flatten();
        return match answer {
            Some(key_authorization) => plain(StatusCode::OK, key_authorization),
            None => plain(StatusCode::NOT_FOUND, "no such challenge\n".into()),
        };
    }
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| request.uri().host().map(str::to_string));
    let Some(host) = host.as_deref().and_then(host_only) else {
        return plain(
            StatusCode::BAD_REQUEST,
            "a Host header is required\n".into(),
        );
    };
    let port = tls
        .https_port()
        .map(|p| format!(":{p}"))
        .unwrap_or_default();
    let rest = request.uri().path_and_query().map_or("/", |pq| pq.as_str());
    let location = format!("https://{host}{port}{rest}");
    match HeaderValue::from_str(&location) {
        Ok(location) => {
            let mut response = plain(StatusCode::PERMANENT_REDIRECT, String::new());
            response.headers_mut().insert(header::LOCATION, location);
            response
        }
        Err(_) => plain(StatusCode::BAD_REQUEST, "a bad Host header\n".into()),
    }
}

/// The host of a `Host` header without its port: a DNS name or an IP address literal
/// (`[::1]` kept bracketed), else `None`.
fn host_only(value: &str) -> Option<&str> {
    let host = if value.starts_with('[') {
        let end = value.find(']')?;
        &value[..=end]
    } else {
        value.split(':').next()?
    };
    let host = host.trim_end_matches('.');
    let fine = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'[' | b']' | b':'));
    fine.then_some(host)
}

fn plain(status: StatusCode, body: String) -> Response<Body> {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::{host_from_authority, host_only};
    use axum::http::{header, Request};

    #[test]
    fn http2_requests_get_a_host_header_from_their_authority() {
        let mut request = Request::get("https://u@go.example:8443/abc")
            .body(())
            .unwrap();
        host_from_authority(&mut request);
        assert_eq!(request.headers()[header::HOST], "go.example:8443");
        let mut request = Request::get("https://other.example/abc")
            .header(header::HOST, "kept.example")
            .body(())
            .unwrap();
        host_from_authority(&mut request);
        assert_eq!(request.headers()[header::HOST], "kept.example");
    }

    #[test]
    fn hosts_lose_their_port() {
        assert_eq!(host_only("go.example:8080"), Some("go.example"));
        assert_eq!(host_only("go.example."), Some("go.example"));
        assert_eq!(host_only("[::1]:80"), Some("[::1]"));
        assert_eq!(host_only("bad host"), None);
        assert_eq!(host_only(""), None);
    }
}
