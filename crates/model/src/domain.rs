//! Domains (SPEC §26): the record of a host links live on, the rules of a host name (what an
//! admin may configure, how a request's `Host` is matched), and the key a link's code is
//! stored under on its domain. Pure: no I/O, no clock.
//!
//! A domain has a small id (`u16`): 0 is the default domain (the base URL's host), others are
//! handed out once and never reused, so an archived link of a deleted domain never lands on a
//! new one. A link's code is kept under [`code_key`]: the code itself on the default domain —
//! every store written before domains existed is already in this form, and the redirect of a
//! default-domain link pays nothing — and `code@id` on any other (`@` is no code character, so
//! no key of one domain can be a key of another).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::time::Millis;

/// The default domain's id.
pub const DEFAULT_DOMAIN: u16 = 0;

/// Between a code and its domain's id in a key: no code contains it.
pub const KEY_SEPARATOR: char = '@';

/// The longest host name (RFC 1035, without the trailing dot).
pub const MAX_HOST_LEN: usize = 253;

/// The longest label of a host name.
pub const MAX_LABEL_LEN: usize = 63;

/// A configured domain.
///
/// Encoded as a MessagePack array in sled: new fields go at the end with `#[serde(default)]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Domain {
    /// 0 for the default domain; others are unique forever.
    pub id: u16,
    /// Lowercase ASCII (an IDN in punycode), no port, no trailing dot.
    pub host: String,
    /// The slug of the team that alone (with admins) creates on it; `None`: anyone who may
    /// create.
    pub team: Option<String>,
    /// Where `/` on this domain goes.
    pub root_url: Option<String>,
    /// Where a code no link has (or an ended link without a fallback) goes.
    pub not_found_url: Option<String>,
    /// Where any other path goes.
    pub other_url: Option<String>,
    /// JSON text served at `/.well-known/apple-app-site-association`.
    pub apple_app_site_association: Option<String>,
    /// JSON text served at `/.well-known/assetlinks.json`.
    pub assetlinks: Option<String>,
    pub created_at: Millis,
    pub updated_at: Millis,
}

impl Domain {
    /// The default domain's record before any setting was stored.
    pub fn default_of(host: &str) -> Domain {
        Domain {
            id: DEFAULT_DOMAIN,
            host: host.to_string(),
            team: None,
            root_url: None,
            not_found_url: None,
            other_url: None,
            apple_app_site_association: None,
            assetlinks: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    pub fn is_default(&self) -> bool {
        self.id == DEFAULT_DOMAIN
    }
}

/// The key a link's code is stored and cached under on domain `domain`: the code itself on
/// the default domain (no allocation), `code@id` elsewhere.
pub fn code_key(domain: u16, code: &str) -> Cow<'_, str> {
    if domain == DEFAULT_DOMAIN {
        Cow::Borrowed(code)
    } else {
        Cow::Owned(format!("{code}{KEY_SEPARATOR}{domain}"))
    }
}

/// A key's code and domain id (the inverse of [`code_key`]); a key whose suffix is no id is
/// taken whole as a code of the default domain.
pub fn split_key(key: &str) -> (&str, u16) {
    match key.rsplit_once(KEY_SEPARATOR) {
        Some((code, id)) => match id.parse::<u16>() {
            Ok(id) if id != DEFAULT_DOMAIN => (code, id),
            _ => (key, DEFAULT_DOMAIN),
        },
        None => (key, DEFAULT_DOMAIN),
    }
}

/// Why a host is not one a domain may have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadHost(pub String);

/// Checks and normalises a host an admin configures: lowercased, an IDN turned into punycode;
/// a port, a trailing dot, a scheme or path, an empty or over-long label, characters no DNS
/// name has, or an IP address are refused.
pub fn parse_host(raw: &str) -> Result<String, BadHost> {
    let bad = |why: &str| Err(BadHost(format!("`host` {why}")));
    let raw = raw.trim();
    if raw.is_empty() {
        return bad("is empty");
    }
    if raw.contains("://") || raw.contains(['/', '?', '#', '@', '\\']) {
        return bad("must be a host name alone, without a scheme, a path or credentials");
    }
    if raw.starts_with('[') || raw.parse::<std::net::IpAddr>().is_ok() {
        return bad("must be a DNS name, not an IP address");
    }
    if raw.contains(':') {
        return bad("must not carry a port");
    }
    if raw.ends_with('.') {
        return bad("must not end with a dot");
    }
    let ascii = match idna::domain_to_ascii_cow(raw.as_bytes(), idna::AsciiDenyList::STD3) {
        Ok(ascii) => ascii.into_owned(),
        Err(_) => return bad("is not a valid domain name"),
    };
    if ascii.is_empty() || ascii.len() > MAX_HOST_LEN {
        return bad(&format!("must be 1 to {MAX_HOST_LEN} characters"));
    }
    let labels: Vec<&str> = ascii.split('.').collect();
    for label in &labels {
        if label.is_empty() {
            return bad("has an empty label");
        }
        if label.len() > MAX_LABEL_LEN {
            return bad(&format!(
                "has a label longer than {MAX_LABEL_LEN} characters"
            ));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            || label.starts_with('-')
            || label.ends_with('-')
        {
            return bad("has a label that is not letters, digits and inner hyphens");
        }
    }
    // What a URL parser would read as an IPv4 address (`1.2.3`, `0x7f.1`): refused too.
    if labels
        .last()
        .is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit()) || l.starts_with("0x"))
        || ascii.parse::<std::net::IpAddr>().is_ok()
    {
        return bad("must be a DNS name, not an IP address");
    }
    Ok(ascii)
}

/// The host a request names, as domains are matched: its port and a trailing dot dropped,
/// lowercased (borrowed when it is already lowercase, which it nearly always is).
pub fn route_host(header: &str) -> Cow<'_, str> {
    let host = if let Some(rest) = header.strip_prefix('[') {
        // An IPv6 literal: never a configured domain; kept whole.
        rest.split(']').next().unwrap_or(rest)
    } else {
        header.split(':').next().unwrap_or(header)
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(host.to_ascii_lowercase())
    } else {
        Cow::Borrowed(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_the_default_domain_are_the_codes() {
        assert_eq!(code_key(0, "abc"), "abc");
        assert_eq!(code_key(7, "abc"), "abc@7");
        assert_eq!(split_key("abc@7"), ("abc", 7));
        assert_eq!(split_key("abc"), ("abc", 0));
        assert_eq!(split_key("abc@x"), ("abc@x", 0));
    }

    #[test]
    fn hosts_are_normalised_or_refused() {
        assert_eq!(parse_host("Go.Example.COM").unwrap(), "go.example.com");
        assert_eq!(parse_host("bücher.de").unwrap(), "xn--bcher-kva.de");
        assert_eq!(parse_host("例子.中国").unwrap(), "xn--fsqu00a.xn--fiqs8s");
        for bad in [
            "",
            "a.com:8080",
            "a.com.",
            "https://a.com",
            "a.com/x",
            "a..com",
            ".a.com",
            "-a.com",
            "a_b.com",
            "1.2.3.4",
            "[::1]",
            "::1",
            "1.2.3",
            &format!("{}.com", "a".repeat(64)),
            &"a.".repeat(130),
        ] {
            assert!(parse_host(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn request_hosts_drop_port_dot_and_case() {
        assert_eq!(route_host("Go.A.com:8080"), "go.a.com");
        assert_eq!(route_host("go.a.com."), "go.a.com");
        assert_eq!(route_host("go.a.com.:80"), "go.a.com");
        assert!(matches!(route_host("go.a.com"), Cow::Borrowed(_)));
    }
}
