//! The review's fetch of a destination: an HTTP client that only connects to addresses the
//! [`AddressPolicy`] allowed, redirects followed by hand (each hop through the same rule), the
//! limits (5 s for the whole fetch, 1 MiB of body, 5 redirects), and the reading of the page's
//! title and description with an HTML parser. Decides no verdict: it reports what it saw.
//!
//! Why a resolver of our own: checking a name's addresses and then letting the client resolve
//! it again leaves a gap a DNS answer can change in (rebinding). `CheckedResolver` is the
//! client's only resolver; it resolves once, refuses the name when any address is refused, and
//! hands the client exactly the addresses it checked. A URL whose host is an address never
//! reaches a resolver, so each hop checks such a host itself. Proxies are off: a proxy would
//! resolve the name on its own.

use std::error::Error as StdError;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{HeaderValue, ACCEPT, CONTENT_TYPE, LOCATION};
use reqwest::redirect;
use url::{Host, Url};

/// Whether the fetch (and the browser) may connect to an address.
pub type AddressPolicy = Arc<dyn Fn(IpAddr) -> bool + Send + Sync>;

/// The whole fetch, every hop and body included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a body read; the rest is never read (the connection is closed).
pub const MAX_BODY: usize = 1 << 20;
/// Redirects followed; one more is a failure.
pub const MAX_REDIRECTS: usize = 5;
/// Longest title and description kept, in characters.
const MAX_TITLE: usize = 300;
const MAX_DESCRIPTION: usize = 1000;

/// Some sites show a different page to clients that are not browsers; the review wants the
/// page visitors get, and still says who it is.
const USER_AGENT: &str = concat!(
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) ",
    "Chrome/126.0 Safari/537.36 vshortlink-review/",
    env!("CARGO_PKG_VERSION")
);

/// The default policy: public unicast addresses only. Refuses unspecified, loopback,
/// private (RFC 1918), shared (CGNAT, 100.64/10), link-local, multicast, broadcast, reserved,
/// benchmarking and documentation ranges, IPv6 unique-local and site-local, and the IPv6 forms
/// that embed an IPv4 address (mapped, compatible, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`)
/// when the embedded address is refused.
pub fn public_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => public_v6(v6),
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b))
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 168)
        || (a == 192 && b == 0 && (c == 0 || c == 2))
        || (a == 198 && (b == 18 || b == 19))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || a >= 224)
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return public_v4(v4);
    }
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    // `::a.b.c.d` (deprecated IPv4-compatible), and `::` and `::1` with them.
    if s[..6] == [0; 6] {
        return s[6] != 0 && public_v4(embedded(s[6], s[7]));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return public_v4(embedded(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return public_v4(embedded(s[1], s[2]));
    }
    !((s[0] & 0xfe00) == 0xfc00 // unique local
        || (s[0] & 0xffc0) == 0xfe80 // link-local
        || (s[0] & 0xffc0) == 0xfec0 // site-local
        || (s[0] & 0xff00) == 0xff00 // multicast
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || s[..4] == [0x100, 0, 0, 0]) // discard
}

/// An address the policy refused, as the resolver's error (found again in the client's error
/// chain to tell a refusal from a failure).
#[derive(Debug)]
pub struct Refused {
    pub host: Option<String>,
    pub addr: IpAddr,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Some(host) => write!(f, "{host} resolves to {}, a private address", self.addr),
            None => write!(f, "{} is a private address", self.addr),
        }
    }
}

impl StdError for Refused {}

/// The client's only resolver: resolves once and answers only addresses the policy allows.
/// A name with any refused address is refused whole: mixing public and private answers is
/// the shape of a rebinding attempt, and a client would try the private one next.
struct CheckedResolver {
    policy: AddressPolicy,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs = resolve_checked(&host, &policy).await?;
            let addrs: Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// Resolves `host` and checks every address; the addresses (port 0) or why not. The fetch's
/// resolver and the screenshot's proxy both resolve through it: one rule for both.
pub(super) async fn resolve_checked(
    host: &str,
    policy: &AddressPolicy,
) -> Result<Vec<SocketAddr>, Box<dyn StdError + Send + Sync>> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, 0)).await?.collect();
    if addrs.is_empty() {
        return Err(format!("{host} has no address").into());
    }
    if let Some(bad) = addrs.iter().find(|a| !policy(a.ip())) {
        return Err(Box::new(Refused {
            host: Some(host.to_string()),
            addr: bad.ip(),
        }));
    }
    Ok(addrs)
}

/// Why a fetch has no page.
#[derive(Debug, PartialEq)]
pub enum FetchError {
    /// Timeout, connection, TLS, too many redirects, …
    Failed(String),
    /// A hop's address was refused by the policy: nothing was sent there.
    Refused(String),
}

/// The last hop's answer.
#[derive(Debug)]
pub struct Page {
    pub status: u16,
    /// The media type, without parameters (`text/html`).
    pub content_type: Option<String>,
    pub final_url: Url,
    pub redirects: usize,
    /// The address the last hop connected to (the browser is pinned to it).
    pub remote: Option<SocketAddr>,
    pub title: Option<String>,
    pub description: Option<String>,
    /// The body was longer than [`MAX_BODY`] and was cut.
    pub truncated: bool,
}

/// Fetches destinations under an address policy.
pub struct Fetcher {
    client: reqwest::Client,
    policy: AddressPolicy,
}

impl Fetcher {
    pub fn new(policy: AddressPolicy) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(CheckedResolver {
                policy: policy.clone(),
            }))
            .no_proxy()
            .redirect(redirect::Policy::none())
            .connect_timeout(FETCH_TIMEOUT)
            .timeout(FETCH_TIMEOUT)
            // Reviews are rare and go to many hosts: a kept connection only holds a socket.
            .pool_max_idle_per_host(0)
            .user_agent(USER_AGENT)
            .build()
            .map_err(|e| format!("cannot build the review's HTTP client: {}", chain(&e)))?;
        Ok(Self { client, policy })
    }

    /// GETs `url`, following redirects, within [`FETCH_TIMEOUT`] for the whole.
    pub async fn fetch(&self, url: &str) -> Result<Page, FetchError> {
        match tokio::time::timeout(FETCH_TIMEOUT, self.follow(url)).await {
            Ok(fetched) => fetched,
            Err(_) => Err(FetchError::Failed(format!(
                "timed out after {} s",
                FETCH_TIMEOUT.as_secs()
            ))),
        }
    }

    /// Checks `url`'s host as a fetch would, without fetching: the address a browser may be
    /// pinned to (`None` for a host that is an address, which needs no pin).
    pub async fn vet(&self, url: &Url) -> Result<Option<SocketAddr>, FetchError> {
        match url.host() {
            Some(Host::Ipv4(ip)) => self.vet_literal(IpAddr::V4(ip)).map(|()| None),
            Some(Host::Ipv6(ip)) => self.vet_literal(IpAddr::V6(ip)).map(|()| None),
            Some(Host::Domain(name)) => {
                let lookup = tokio::time::timeout(FETCH_TIMEOUT, async {
                    resolve_checked(name, &self.policy).await
                })
                .await;
                match lookup {
                    Ok(Ok(addrs)) => Ok(addrs.first().copied()),
                    Ok(Err(e)) => Err(match e.downcast_ref::<Refused>() {
                        Some(refused) => FetchError::Refused(refused.to_string()),
                        None => FetchError::Failed(e.to_string()),
                    }),
                    Err(_) => Err(FetchError::Failed("resolving timed out".into())),
                }
            }
            None => Err(FetchError::Failed(format!("{url} has no host"))),
        }
    }

    fn vet_literal(&self, ip: IpAddr) -> Result<(), FetchError> {
        if (self.policy)(ip) {
            Ok(())
        } else {
            Err(FetchError::Refused(
                Refused {
                    host: None,
                    addr: ip,
                }
                .to_string(),
            ))
        }
    }

    async fn follow(&self, start: &str) -> Result<Page, FetchError> {
        let mut url = match Url::parse(start) {
            Ok(url) => url,
            Err(e) => return Err(FetchError::Failed(format!("not a URL: {e}"))),
        };
        let mut redirects = 0;
        loop {
            if !matches!(url.scheme(), "http" | "https") {
                return Err(FetchError::Failed(format!("{url} is not an http(s) URL")));
            }
            // A host that is an address never reaches the resolver: check it here.
            match url.host() {
                Some(Host::Ipv4(ip)) => {
                    self.vet_literal(IpAddr::V4(ip))?;
                }
                Some(Host::Ipv6(ip)) => {
                    self.vet_literal(IpAddr::V6(ip))?;
                }
                Some(Host::Domain(_)) => {}
                None => return Err(FetchError::Failed(format!("{url} has no host"))),
            }
            let response = match self
                .client
                .get(url.clone())
                .header(
                    ACCEPT,
                    HeaderValue::from_static("text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"),
                )
                .send()
                .await
            {
                Ok(response) => response,
                Err(e) => return Err(failure(&e)),
            };
            let status = response.status();
            if matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
                if let Some(location) = response.headers().get(LOCATION) {
                    let next = location.to_str().ok().and_then(|l| url.join(l.trim()).ok());
                    let Some(next) = next else {
                        return Err(FetchError::Failed(format!(
                            "{} from {url} with an unreadable Location",
                            status.as_u16()
                        )));
                    };
                    if redirects == MAX_REDIRECTS {
                        return Err(FetchError::Failed(format!(
                            "more than {MAX_REDIRECTS} redirects (the last to {next})"
                        )));
                    }
                    redirects += 1;
                    url = next;
                    continue;
                }
            }
            let remote = response.remote_addr();
            let content_type = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let (body, truncated) = match read_capped(response, MAX_BODY).await {
                Ok(read) => read,
                Err(e) => {
                    return Err(FetchError::Failed(format!(
                        "reading the body: {}",
                        chain(&e)
                    )));
                }
            };
            let media_type = content_type.as_deref().map(media_type);
            let html = media_type.as_deref().is_none_or(|t| t.contains("html"));
            let (title, description) = if html {
                let charset = content_type.as_deref().and_then(charset_param);
                // The parse of a whole MiB of markup is CPU work: off the async threads.
                tokio::task::spawn_blocking(move || page_meta(&body, charset.as_deref()))
                    .await
                    .unwrap_or_default()
            } else {
                (None, None)
            };
            return Ok(Page {
                status: status.as_u16(),
                content_type: media_type,
                final_url: url,
                redirects,
                remote,
                title,
                description,
                truncated,
            });
        }
    }
}

/// A client error as a fetch result: a refusal if the resolver refused, else a failure.
fn failure(e: &reqwest::Error) -> FetchError {
    let mut source: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(refused) = err.downcast_ref::<Refused>() {
            return FetchError::Refused(refused.to_string());
        }
        source = err.source();
    }
    if e.is_timeout() {
        return FetchError::Failed(format!("timed out after {} s", FETCH_TIMEOUT.as_secs()));
    }
    FetchError::Failed(chain(e))
}

/// An error and its causes, `: `-separated (reqwest's own message omits the cause).
pub fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

/// Reads at most `limit` bytes of a body, then stops (dropping the response closes the
/// connection, so the rest is never read). Whether there was more.
pub async fn read_capped(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit - body.len();
        if chunk.len() >= room {
            body.extend_from_slice(&chunk[..room]);
            // Exactly full may still be the end; one more read would tell, but reading past the
            // limit is what this avoids. Call it cut only when bytes were dropped or may follow.
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// `text/html; charset=UTF-8` → `text/html`.
fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// The `charset` parameter of a `Content-Type`.
fn charset_param(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| value.trim().trim_matches('"').to_string())
    })
}

/// The title and description of an HTML page's bytes. The charset is the header's, else a
/// byte-order mark's, else the one a `<meta>` declares (found by parsing the page as UTF-8
/// first, then parsing again in that charset), else UTF-8.
pub fn page_meta(body: &[u8], header_charset: Option<&str>) -> (Option<String>, Option<String>) {
    let declared = header_charset.and_then(|c| encoding_rs::Encoding::for_label(c.as_bytes()));
    let encoding = declared.unwrap_or(encoding_rs::UTF_8);
    let (text, _, _) = encoding.decode(body);
    let document = scraper::Html::parse_document(&text);
    if declared.is_none() && encoding_rs::Encoding::for_bom(body).is_none() {
        let meta = meta_charset(&document)
            .and_then(|c| encoding_rs::Encoding::for_label(c.as_bytes()))
            .filter(|e| *e != encoding_rs::UTF_8);
        if let Some(encoding) = meta {
            let (text, _, _) = encoding.decode(body);
            return title_and_description(&scraper::Html::parse_document(&text));
        }
    }
    title_and_description(&document)
}

/// `<meta charset="…">` or `<meta http-equiv="Content-Type" content="…; charset=…">`.
fn meta_charset(document: &scraper::Html) -> Option<String> {
    document
        .root_element()
        .descendent_elements()
        .filter(|e| e.value().name() == "meta")
        .find_map(|e| {
            let meta = e.value();
            if let Some(charset) = meta.attr("charset") {
                return Some(charset.trim().to_string());
            }
            let content_type = meta
                .attr("http-equiv")
                .is_some_and(|h| h.trim().eq_ignore_ascii_case("content-type"));
            if content_type {
                return meta.attr("content").and_then(charset_param);
            }
            None
        })
}

fn title_and_description(document: &scraper::Html) -> (Option<String>, Option<String>) {
    let root = document.root_element();
    // The document's title, not an SVG image's `<title>`.
    let title = root
        .descendent_elements()
        .filter(|e| e.value().name() == "title")
        .find(|e| {
            !e.ancestors()
                .filter_map(scraper::ElementRef::wrap)
                .any(|a| a.value().name() == "svg")
        })
        .map(|e| clean(&e.text().collect::<String>(), MAX_TITLE))
        .filter(|t| !t.is_empty());
    let metas: Vec<_> = root
        .descendent_elements()
        .filter(|e| e.value().name() == "meta")
        .collect();
    let content_of = |wanted: &str, attr: &str| {
        metas.iter().find_map(|m| {
            let meta = m.value();
            meta.attr(attr)
                .is_some_and(|n| n.trim().eq_ignore_ascii_case(wanted))
                .then(|| meta.attr("content"))
                .flatten()
                .map(|c| clean(c, MAX_DESCRIPTION))
                .filter(|c| !c.is_empty())
        })
    };
    let description = content_of("description", "name")
        .or_else(|| content_of("og:description", "property"))
        .or_else(|| content_of("og:description", "name"));
    (title, description)
}

/// White space collapsed, trimmed, at most `max` characters.
fn clean(text: &str, max: usize) -> String {
    let mut out = String::new();
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    match out.char_indices().nth(max) {
        Some((cut, _)) => {
            out.truncate(cut);
            out.push('…');
            out
        }
        None => out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn the_default_policy_refuses_what_is_not_public() {
        for refused in [
            "0.0.0.0",
            "10.1.2.3",
            "100.64.0.1",
            "127.0.0.1",
            "127.0.0.2",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "192.0.0.1",
            "198.18.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "2002:c0a8:101::1",
            "fe80::1",
            "fc00::1",
            "fd12::1",
            "ff02::1",
            "2001:db8::1",
        ] {
            assert!(!public_address(ip(refused)), "{refused} allowed");
        }
        for allowed in [
            "1.1.1.1",
            "8.8.8.8",
            "100.128.0.1",
            "172.32.0.1",
            "93.184.216.34",
            "2606:4700::1111",
            "::ffff:1.1.1.1",
            "64:ff9b::808:808",
        ] {
            assert!(public_address(ip(allowed)), "{allowed} refused");
        }
    }

    #[test]
    fn charsets_from_header_meta_and_default() {
        let latin1 = b"<title>Caf\xe9</title>";
        assert_eq!(
            page_meta(latin1, Some("iso-8859-1")).0.as_deref(),
            Some("Café")
        );
        let meta = b"<meta charset=\"windows-1252\"><title>Caf\xe9 \x96 ok</title>";
        assert_eq!(page_meta(meta, None).0.as_deref(), Some("Café – ok"));
        let utf8 = "<title> Caf&eacute;\n &amp; co </title>".as_bytes();
        assert_eq!(page_meta(utf8, None).0.as_deref(), Some("Café & co"));
    }

    #[test]
    fn svg_titles_and_og_descriptions() {
        let html = br#"<body><svg><title>icon</title></svg><title>Page</title>
            <meta property="og:description" content="From OG"></body>"#;
        let (title, description) = page_meta(html, None);
        assert_eq!(title.as_deref(), Some("Page"));
        assert_eq!(description.as_deref(), Some("From OG"));
    }

    #[test]
    fn content_types() {
        assert_eq!(media_type("Text/HTML; charset=UTF-8"), "text/html");
        assert_eq!(
            charset_param("text/html; Charset=\"GBK\"").as_deref(),
            Some("GBK")
        );
        assert_eq!(charset_param("text/html"), None);
    }
}
