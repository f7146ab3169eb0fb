//! The screenshot browser's only way out: a filtering HTTP proxy on 127.0.0.1 (a port of its
//! own, alive for one screenshot) that Chromium is pointed at with `--proxy-server`. Every
//! request the browser makes (the page, its frames, images, scripts, sockets) names a host
//! here; the proxy resolves it itself and checks every address with the fetch's rule (the same
//! `AddressPolicy`, through `super::fetch::resolve_checked`), then connects to the address
//! it checked and never resolves again. Plain HTTP is forwarded (absolute-form requests);
//! `CONNECT` is tunnelled (HTTPS, WebSockets); anything else is refused.
//!
//! Why a proxy and not `--host-resolver-rules`: pinning the page's host left every other host
//! to the browser's own resolver, so an `<iframe>` or `<img>` of an internal address was loaded
//! and shown in the screenshot admins see. Behind a fixed proxy the browser resolves nothing
//! itself, so one rule, checked in one place, decides every connection it makes.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderMap, HeaderName, CONNECTION, HOST};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use url::Host;

use super::fetch::{resolve_checked, AddressPolicy, Refused, FETCH_TIMEOUT};

type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// A running proxy. Dropping it stops it: the listener, every connection and every tunnel.
pub struct Proxy {
    addr: SocketAddr,
    /// Dropped with the proxy: every task of it watches for that and ends.
    _stop: watch::Sender<()>,
}

/// What every connection of one proxy shares.
struct Rules {
    policy: AddressPolicy,
    /// The page's host and the address the fetch reached it at: the browser goes where the
    /// fetch went, even if the name's answer changed since.
    pin: Option<(String, IpAddr)>,
    /// The proxy's own address: a request for it would have the proxy call itself, request
    /// after request, when the rule allows loopback (`review.allow_private`).
    own: SocketAddr,
    stop: watch::Receiver<()>,
}

impl Proxy {
    /// Starts a proxy on 127.0.0.1 (a free port) whose connections `policy` decides; `pin`
    /// maps the page's host to the address the fetch checked and used.
    pub async fn start(
        policy: AddressPolicy,
        pin: Option<(String, IpAddr)>,
    ) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let (stop_tx, stop) = watch::channel(());
        let rules = Arc::new(Rules {
            policy,
            pin: pin.map(|(host, ip)| (host.to_ascii_lowercase(), ip)),
            own: addr,
            stop,
        });
        tokio::spawn(accept(listener, rules));
        Ok(Proxy {
            addr,
            _stop: stop_tx,
        })
    }

    /// Where the browser is to send its requests.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// Runs `work` until it ends or the proxy is dropped.
async fn until_stopped(mut stop: watch::Receiver<()>, work: impl std::future::Future<Output = ()>) {
    tokio::select! {
        () = work => {}
        // An error: the sender (the `Proxy`) is gone.
        _ = stop.changed() => {}
    }
}

async fn accept(listener: TcpListener, rules: Arc<Rules>) {
    let stop = rules.stop.clone();
    until_stopped(stop, async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                // Out of descriptors, say: wait rather than spin on the error.
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                continue;
            };
            let rules = rules.clone();
            let stop = rules.stop.clone();
            tokio::spawn(until_stopped(stop, async move {
                let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                    let rules = rules.clone();
                    async move { Ok::<_, Infallible>(handle(request, rules).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .with_upgrades()
                    .await;
            }));
        }
    })
    .await;
}

/// Why a request goes no further, as the browser is answered.
struct Refusal {
    status: StatusCode,
    why: String,
}

impl Refusal {
    fn new(status: StatusCode, why: impl Into<String>) -> Self {
        Self {
            status,
            why: why.into(),
        }
    }

    fn response(self) -> Response<ProxyBody> {
        tracing::debug!(status = self.status.as_u16(), why = %self.why, "screenshot proxy refused");
        let mut response = Response::new(text(self.why));
        *response.status_mut() = self.status;
        response
    }
}

fn text(words: String) -> ProxyBody {
    Full::new(Bytes::from(words))
        .map_err(|never| match never {})
        .boxed()
}

async fn handle(request: Request<Incoming>, rules: Arc<Rules>) -> Response<ProxyBody> {
    let answer = if request.method() == Method::CONNECT {
        tunnel(request, rules).await
    } else {
        forward(request, rules).await
    };
    answer.unwrap_or_else(Refusal::response)
}

/// The host and port a request names, the port defaulted to the scheme's.
fn target(uri: &Uri, default_port: u16) -> Result<(Host, u16), Refusal> {
    let authority = uri
        .authority()
        .ok_or_else(|| Refusal::new(StatusCode::BAD_REQUEST, "no host named"))?;
    let host = Host::parse(authority.host())
        .map_err(|e| Refusal::new(StatusCode::BAD_REQUEST, format!("bad host: {e}")))?;
    Ok((host, authority.port_u16().unwrap_or(default_port)))
}

/// A connection to `host`, at an address the policy allowed (the pin for the page's host).
/// Resolves once; what it connects to is what it checked.
async fn connect(rules: &Rules, host: &Host, port: u16) -> Result<TcpStream, Refusal> {
    let refused = |e: Refused| Refusal::new(StatusCode::FORBIDDEN, e.to_string());
    let ips: Vec<IpAddr> = match host {
        Host::Ipv4(ip) => vec![IpAddr::V4(*ip)],
        Host::Ipv6(ip) => vec![IpAddr::V6(*ip)],
        Host::Domain(name) => match &rules.pin {
            Some((pinned, ip)) if pinned.eq_ignore_ascii_case(name) => vec![*ip],
            _ => match resolve_checked(name, &rules.policy).await {
                Ok(addrs) => addrs.iter().map(SocketAddr::ip).collect(),
                Err(e) => {
                    return Err(match e.downcast::<Refused>() {
                        Ok(r) => refused(*r),
                        Err(e) => Refusal::new(StatusCode::BAD_GATEWAY, e.to_string()),
                    })
                }
            },
        },
    };
    // A literal or a pin never passed the resolver's check: check it here (and a resolved
    // name again, which costs nothing and keeps one rule for every path).
    if let Some(bad) = ips.iter().find(|ip| !(rules.policy)(**ip)) {
        let host = match host {
            Host::Domain(name) => Some(name.clone()),
            _ => None,
        };
        return Err(refused(Refused { host, addr: *bad }));
    }
    let mut last = String::from("no address");
    for ip in ips {
        let addr = SocketAddr::new(ip, port);
        if addr == rules.own || (ip.is_unspecified() && port == rules.own.port()) {
            return Err(Refusal::new(StatusCode::FORBIDDEN, "the proxy itself"));
        }
        match tokio::time::timeout(FETCH_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => last = format!("{addr}: {e}"),
            Err(_) => last = format!("{addr}: timed out"),
        }
    }
    Err(Refusal::new(StatusCode::BAD_GATEWAY, last))
}

/// `CONNECT host:port`: a tunnel to the checked address, bytes copied both ways until either
/// side closes or the proxy stops.
async fn tunnel(
    request: Request<Incoming>,
    rules: Arc<Rules>,
) -> Result<Response<ProxyBody>, Refusal> {
    let (host, port) = target(request.uri(), 443)?;
    let mut upstream = connect(&rules, &host, port).await?;
    let stop = rules.stop.clone();
    tokio::spawn(until_stopped(stop, async move {
        // The browser's side is handed over once the 200 below has been sent.
        if let Ok(upgraded) = hyper::upgrade::on(request).await {
            let mut browser = TokioIo::new(upgraded);
            let _ = tokio::io::copy_bidirectional(&mut browser, &mut upstream).await;
        }
    }));
    Ok(Response::new(
        Empty::new().map_err(|never| match never {}).boxed(),
    ))
}

/// Headers that belong to one connection, not to the request: never passed on.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
];

/// Removes the hop-by-hop headers, and those `Connection` names.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
}

/// `GET http://host/path` (any method, absolute form): the request sent on to the checked
/// address in origin form, its answer streamed back. HTTPS comes as `CONNECT`, never here.
async fn forward(
    request: Request<Incoming>,
    rules: Arc<Rules>,
) -> Result<Response<ProxyBody>, Refusal> {
    if request.uri().scheme_str() != Some("http") {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "only absolute http:// requests and CONNECT are proxied",
        ));
    }
    let (host, port) = target(request.uri(), 80)?;
    let stream = connect(&rules, &host, port).await?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| Refusal::new(StatusCode::BAD_GATEWAY, e.to_string()))?;
    let stop = rules.stop.clone();
    tokio::spawn(until_stopped(stop, async move {
        let _ = connection.await;
    }));

    let (mut parts, body) = request.into_parts();
    let authority = parts.uri.authority().map(|a| a.as_str().to_string());
    let origin_form = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse::<Uri>()
        .map_err(|e| Refusal::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    parts.uri = origin_form;
    strip_hop_by_hop(&mut parts.headers);
    if !parts.headers.contains_key(HOST) {
        if let Some(value) = authority.and_then(|a| a.parse().ok()) {
            parts.headers.insert(HOST, value);
        }
    }
    let answer = sender
        .send_request(Request::from_parts(parts, body))
        .await
        .map_err(|e| Refusal::new(StatusCode::BAD_GATEWAY, e.to_string()))?;
    let (mut parts, body) = answer.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    Ok(Response::from_parts(parts, body.boxed()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Refuses 127.0.0.2 only, as the review's tests do: 127.0.0.1 stands for public.
    fn refusing_127_0_0_2() -> AddressPolicy {
        Arc::new(|ip: IpAddr| ip != IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)))
    }

    /// A server on `ip` that answers every connection with a small HTTP response naming
    /// itself, and counts its connections.
    async fn server(ip: &str) -> (SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = TcpListener::bind((ip, 0)).await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = hits.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let mut got = Vec::new();
                    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&got);
                    let line = head.lines().next().unwrap_or_default().to_string();
                    let body = format!("saw {line}");
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(reply.as_bytes()).await;
                });
            }
        });
        (addr, hits)
    }

    /// Sends `head` to the proxy and reads until it closes or 2 s pass.
    async fn ask(proxy: SocketAddr, head: &str) -> String {
        let mut stream = TcpStream::connect(proxy).await.expect("connect");
        stream.write_all(head.as_bytes()).await.expect("write");
        let mut out = Vec::new();
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            stream.read_to_end(&mut out),
        )
        .await;
        String::from_utf8_lossy(&out).to_string()
    }

    #[tokio::test]
    async fn review_proxy_forwards_what_the_rule_allows_and_refuses_the_rest() {
        let (open, open_hits) = server("127.0.0.1").await;
        let (internal, internal_hits) = server("127.0.0.2").await;
        let proxy = Proxy::start(refusing_127_0_0_2(), None)
            .await
            .expect("proxy");
        let at = proxy.addr();

        // Plain HTTP, absolute form: forwarded in origin form to an allowed address.
        let got = ask(
            at,
            &format!("GET http://{open}/a?b=1 HTTP/1.1\r\nHost: {open}\r\nProxy-Connection: keep-alive\r\nConnection: close\r\n\r\n"),
        )
        .await;
        assert!(got.starts_with("HTTP/1.1 200"), "{got}");
        assert!(got.contains("saw GET /a?b=1 HTTP/1.1"), "{got}");

        // A refused address, as a literal: 403 and nothing sent there, by either way in.
        for head in [
            format!(
                "GET http://{internal}/ HTTP/1.1\r\nHost: {internal}\r\nConnection: close\r\n\r\n"
            ),
            format!("CONNECT {internal} HTTP/1.1\r\nHost: {internal}\r\nConnection: close\r\n\r\n"),
        ] {
            let got = ask(at, &head).await;
            assert!(got.starts_with("HTTP/1.1 403"), "{head}: {got}");
            assert!(got.contains("a private address"), "{got}");
        }
        assert_eq!(internal_hits.load(std::sync::atomic::Ordering::SeqCst), 0);

        // A tunnel to an allowed address carries bytes both ways.
        let mut stream = TcpStream::connect(at).await.expect("connect");
        stream
            .write_all(format!("CONNECT {open} HTTP/1.1\r\nHost: {open}\r\n\r\n").as_bytes())
            .await
            .expect("write");
        let mut head = vec![0u8; 256];
        let n = stream.read(&mut head).await.expect("read");
        let said = String::from_utf8_lossy(&head[..n]).to_string();
        assert!(said.starts_with("HTTP/1.1 200"), "{said}");
        stream
            .write_all(b"GET /through HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("write");
        let mut out = Vec::new();
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            stream.read_to_end(&mut out),
        )
        .await;
        assert!(
            String::from_utf8_lossy(&out).contains("saw GET /through"),
            "{}",
            String::from_utf8_lossy(&out)
        );
        assert_eq!(open_hits.load(std::sync::atomic::Ordering::SeqCst), 2);

        // Not a proxy request: refused.
        let got = ask(at, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
        assert!(got.starts_with("HTTP/1.1 400"), "{got}");
        let got = ask(
            at,
            &format!("GET https://{open}/ HTTP/1.1\r\nHost: {open}\r\nConnection: close\r\n\r\n"),
        )
        .await;
        assert!(got.starts_with("HTTP/1.1 400"), "{got}");
    }

    #[tokio::test]
    async fn review_proxy_resolves_names_itself_and_keeps_the_pin() {
        let (open, _) = server("127.0.0.1").await;
        let port = open.port();
        // The default rule: a name that resolves to loopback is refused.
        let strict = Proxy::start(Arc::new(super::super::public_address), None)
            .await
            .expect("proxy");
        for head in [
            format!("CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
            format!("GET http://localhost:{port}/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
        ] {
            let got = ask(strict.addr(), &head).await;
            assert!(got.starts_with("HTTP/1.1 403"), "{head}: {got}");
            assert!(got.contains("localhost resolves to"), "{got}");
        }
        // The page's host pinned to the address the fetch used, whatever it resolves to.
        let pinned = Proxy::start(
            refusing_127_0_0_2(),
            Some(("Page.Test".into(), IpAddr::V4(Ipv4Addr::LOCALHOST))),
        )
        .await
        .expect("proxy");
        let got = ask(
            pinned.addr(),
            &format!("GET http://page.test:{port}/p HTTP/1.1\r\nHost: page.test:{port}\r\nConnection: close\r\n\r\n"),
        )
        .await;
        assert!(got.contains("saw GET /p"), "{got}");
        // Not itself, even where loopback is allowed.
        let open_rule = Proxy::start(Arc::new(|_: IpAddr| true), None)
            .await
            .expect("proxy");
        let me = open_rule.addr();
        let got = ask(
            me,
            &format!("GET http://{me}/ HTTP/1.1\r\nHost: {me}\r\nConnection: close\r\n\r\n"),
        )
        .await;
        assert!(got.starts_with("HTTP/1.1 403"), "{got}");
        // Dropped: the port no longer answers.
        let gone = pinned.addr();
        drop(pinned);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(TcpStream::connect(gone).await.is_err(), "still listening");
    }
}
