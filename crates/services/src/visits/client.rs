//! Who is visiting: the client address (optionally from proxy headers), the form
//! of it that is stored, and the client id. Pure functions; nothing here stores or logs.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use axum::http::HeaderMap;
use sha1::{Digest, Sha1};

use crate::config::{ClientIpHeader, IpMode, TrustedProxies};

/// The visitor's address. A forwarding header is read only with `proxies` (config
/// `trust_proxy_headers`), only when the peer itself is one of them, and only the one header
/// the proxy sets (`server.client_ip_header`): a client can send the others itself, and a
/// proxy overwrites or appends to its own alone. Of an `X-Forwarded-For` or `Forwarded`
/// chain (every line, in order) the answer is the rightmost address that is not a trusted
/// proxy — the address the nearest trusted proxy saw — since a proxy appends what it saw and
/// a client can write anything to the left of it; `X-Real-IP` holds one address. A header
/// that is absent, or whose hops do not parse before an untrusted one is found, leaves the
/// peer. IPv4-mapped IPv6 addresses (what a dual-stack listener reports for IPv4 peers)
/// become plain IPv4, so one visitor has one address.
pub fn client_ip(
    peer: IpAddr,
    headers: &HeaderMap,
    proxies: Option<&TrustedProxies>,
    header_name: ClientIpHeader,
) -> IpAddr {
    let peer = peer.to_canonical();
    let Some(proxies) = proxies.filter(|p| p.contains(peer)) else {
        return peer;
    };
    let hops = match header_name {
        ClientIpHeader::XForwardedFor => {
            let mut hops = Vec::new();
            for line in headers.get_all("x-forwarded-for") {
                let Ok(line) = line.to_str() else {
                    return peer;
                };
                hops.extend(line.split(','));
            }
            hops
        }
        ClientIpHeader::XRealIp => header(headers, "x-real-ip").into_iter().collect(),
        ClientIpHeader::Forwarded => {
            let mut hops = Vec::new();
            for line in headers.get_all("forwarded") {
                let Ok(line) = line.to_str() else {
                    return peer;
                };
                hops.extend(line.split(',').filter_map(forwarded_for_param));
            }
            hops
        }
    };
    nearest_untrusted(&hops, proxies).unwrap_or(peer)
}

/// The rightmost hop that is not a trusted proxy (every hop a proxy: the farthest); `None`
/// when a hop that does not parse comes first.
fn nearest_untrusted(hops: &[&str], proxies: &TrustedProxies) -> Option<IpAddr> {
    let mut farthest = None;
    for hop in hops.iter().rev() {
        let ip = parse_node(hop)?.to_canonical();
        if !proxies.contains(ip) {
            return Some(ip);
        }
        farthest = Some(ip);
    }
    farthest
}

/// The address as stored with a visit (config `visits.ip`): truncation keeps the /24 of an IPv4
/// address and the /48 of an IPv6 one — the network, not the host.
pub fn stored_ip(ip: IpAddr, mode: IpMode) -> Option<String> {
    let ip = ip.to_canonical();
    match mode {
        IpMode::Full => Some(ip.to_string()),
        IpMode::Truncated => Some(match ip {
            IpAddr::V4(v4) => {
                let [a, b, c, _] = v4.octets();
                Ipv4Addr::new(a, b, c, 0).to_string()
            }
            IpAddr::V6(v6) => {
                let s = v6.segments();
                Ipv6Addr::new(s[0], s[1], s[2], 0, 0, 0, 0, 0).to_string()
            }
        }),
        IpMode::None => None,
    }
}

/// Lowercase hex SHA-1 of `ip + "&" + user_agent` over the full address, whatever
/// `visits.ip` stores.
pub fn client_id(ip: IpAddr, user_agent: &str) -> String {
    client_key(ip, user_agent).0
}

/// The client id and a 64-bit key for distinct counting (the first 8 bytes of the same SHA-1,
/// big-endian), from one hash. SHA-1 bits are uniform, so the key serves as a sketch hash.
pub fn client_key(ip: IpAddr, user_agent: &str) -> (String, u64) {
    let digest = Sha1::new()
        .chain_update(ip.to_canonical().to_string())
        .chain_update("&")
        .chain_update(user_agent)
        .finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    (hex::encode(digest), u64::from_be_bytes(first))
}

pub use crate::model::{client_hash_from_id, client_hash_of};

/// A header's first value, if it is text.
fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name)?.to_str().ok()
}

/// The `for=` value of one RFC 7239 element (`for=1.2.3.4;proto=https`), if it has one.
fn forwarded_for_param(element: &str) -> Option<&str> {
    element.split(';').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        key.trim().eq_ignore_ascii_case("for").then_some(value)
    })
}

/// One address as proxies write it: `1.2.3.4`, `1.2.3.4:80`, `2001:db8::1`, `[2001:db8::1]`,
/// `[2001:db8::1]:4711`, any of them in double quotes.
fn parse_node(value: &str) -> Option<IpAddr> {
    let value = value.trim();
    let value = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value)
        .trim();
    if let Some(bracketed) = value.strip_prefix('[') {
        let (inside, _port) = bracketed.split_once(']')?;
        return inside.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    value
        .parse::<IpAddr>()
        .ok()
        .or_else(|| value.parse::<SocketAddr>().ok().map(|addr| addr.ip()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for &(name, value) in pairs {
            map.append(name, value.parse().expect("header value"));
        }
        map
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    /// The proxies of these tests: the 10/8 network.
    fn tens() -> TrustedProxies {
        TrustedProxies(vec!["10.0.0.0/8".parse().expect("net")])
    }

    fn trusted(peer: IpAddr, h: &HeaderMap) -> IpAddr {
        trusted_by(peer, h, ClientIpHeader::XForwardedFor)
    }

    fn trusted_by(peer: IpAddr, h: &HeaderMap, name: ClientIpHeader) -> IpAddr {
        client_ip(peer, h, Some(&tens()), name)
    }

    #[test]
    fn untrusted_headers_are_ignored() {
        let h = headers(&[("x-forwarded-for", "1.2.3.4"), ("x-real-ip", "5.6.7.8")]);
        assert_eq!(
            client_ip(PEER, &h, None, ClientIpHeader::XForwardedFor),
            PEER
        );
    }

    #[test]
    fn a_peer_that_is_no_proxy_is_the_client() {
        let h = headers(&[("x-forwarded-for", "1.2.3.4")]);
        assert_eq!(trusted(ip("192.0.2.9"), &h), ip("192.0.2.9"));
    }

    #[test]
    fn addresses_a_client_wrote_are_never_taken() {
        // The client sent `X-Forwarded-For: 6.6.6.6`; the proxy appended what it saw.
        let h = headers(&[("x-forwarded-for", "6.6.6.6, 1.2.3.4")]);
        assert_eq!(trusted(PEER, &h), ip("1.2.3.4"));
        // Behind two proxies of ours, the address the outer one saw.
        let h = headers(&[("x-forwarded-for", "6.6.6.6, 1.2.3.4, 10.9.9.9")]);
        assert_eq!(trusted(PEER, &h), ip("1.2.3.4"));
        // Every hop one of ours: the farthest.
        let h = headers(&[("x-forwarded-for", "10.7.7.7, 10.9.9.9")]);
        assert_eq!(trusted(PEER, &h), ip("10.7.7.7"));
    }

    #[test]
    fn only_the_configured_header_is_read() {
        use ClientIpHeader::*;
        type Case = (
            ClientIpHeader,
            &'static [(&'static str, &'static str)],
            &'static str,
        );
        let cases: &[Case] = &[
            (XForwardedFor, &[], "10.0.0.1"),
            (
                XForwardedFor,
                &[("x-forwarded-for", "1.2.3.4, 10.1.1.1, 10.2.2.2")],
                "1.2.3.4",
            ),
            (
                XForwardedFor,
                &[("x-forwarded-for", " 2001:db8::7 ")],
                "2001:db8::7",
            ),
            (
                XForwardedFor,
                &[("x-forwarded-for", "1.2.3.4:5678")],
                "1.2.3.4",
            ),
            (
                XForwardedFor,
                &[("x-forwarded-for", "[2001:db8::7]:443")],
                "2001:db8::7",
            ),
            // Several X-Forwarded-For lines are one chain, in order.
            (
                XForwardedFor,
                &[
                    ("x-forwarded-for", "1.2.3.4"),
                    ("x-forwarded-for", "9.9.9.9"),
                ],
                "9.9.9.9",
            ),
            (
                XForwardedFor,
                &[("x-forwarded-for", "::ffff:1.2.3.4")],
                "1.2.3.4",
            ),
            // The other headers are the client's to write: never read.
            (XForwardedFor, &[("x-real-ip", "5.6.7.8")], "10.0.0.1"),
            (
                XForwardedFor,
                &[("x-forwarded-for", "unknown"), ("x-real-ip", "5.6.7.8")],
                "10.0.0.1",
            ),
            (
                XForwardedFor,
                &[("forwarded", "for=192.0.2.60")],
                "10.0.0.1",
            ),
            // Behind nginx's `proxy_set_header X-Real-IP $remote_addr`: a client-written
            // X-Forwarded-For chooses nothing.
            (XRealIp, &[("x-real-ip", "5.6.7.8")], "5.6.7.8"),
            (
                XRealIp,
                &[("x-forwarded-for", "6.6.6.6"), ("x-real-ip", "5.6.7.8")],
                "5.6.7.8",
            ),
            (XRealIp, &[("x-forwarded-for", "6.6.6.6")], "10.0.0.1"),
            (XRealIp, &[("x-real-ip", "garbage")], "10.0.0.1"),
            (
                Forwarded,
                &[("forwarded", "for=192.0.2.60;proto=http")],
                "192.0.2.60",
            ),
            (
                Forwarded,
                &[("forwarded", "For=\"192.0.2.60:80\"")],
                "192.0.2.60",
            ),
            (
                Forwarded,
                &[("forwarded", "for=\"[2001:db8:cafe::17]:4711\"")],
                "2001:db8:cafe::17",
            ),
            (
                Forwarded,
                &[("forwarded", "for=\"[2001:db8:cafe::17]\"")],
                "2001:db8:cafe::17",
            ),
            (
                Forwarded,
                &[(
                    "forwarded",
                    "proto=https;by=203.0.113.43; FOR = 198.51.100.17, for=10.1.1.1",
                )],
                "198.51.100.17",
            ),
            (
                Forwarded,
                &[("forwarded", "by=1.1.1.1, for=198.51.100.17")],
                "198.51.100.17",
            ),
            (Forwarded, &[("forwarded", "for=unknown")], "10.0.0.1"),
            (
                Forwarded,
                &[("forwarded", "for=_hidden, for=1.1.1.1")],
                "1.1.1.1",
            ),
            (
                Forwarded,
                &[("forwarded", "for=1.1.1.1, for=_hidden")],
                "10.0.0.1",
            ),
            (Forwarded, &[("x-forwarded-for", "6.6.6.6")], "10.0.0.1"),
        ];
        for &(name, pairs, expected) in cases {
            assert_eq!(
                trusted_by(PEER, &headers(pairs), name),
                ip(expected),
                "{name:?} {pairs:?}"
            );
        }
    }

    #[test]
    fn junk_headers_fall_back_to_the_peer() {
        let junk = [
            "",
            ",",
            "1.2.3.4, ",
            "[",
            "[]",
            "[::1",
            "]:80",
            "\"",
            "\"\"",
            "1.2.3.4.5",
            "300.1.1.1",
            "for=",
            "for",
            ";;;",
            "=",
            "for=[",
            "for=\"[::1]",
            "fe80::1%eth0",
            "1.2.3.4:99999",
        ];
        for value in junk {
            for (name, which) in [
                ("x-forwarded-for", ClientIpHeader::XForwardedFor),
                ("x-real-ip", ClientIpHeader::XRealIp),
                ("forwarded", ClientIpHeader::Forwarded),
            ] {
                let h = headers(&[(name, value)]);
                assert_eq!(trusted_by(PEER, &h, which), PEER, "{name}: {value:?}");
            }
        }
        let mut h = HeaderMap::new();
        let bytes = axum::http::HeaderValue::from_bytes(b"\xff\xfe1.2.3.4").expect("opaque value");
        h.insert("x-forwarded-for", bytes);
        assert_eq!(trusted(PEER, &h), PEER);
    }

    #[test]
    fn mapped_peers_become_ipv4() {
        let mapped = ip("::ffff:192.0.2.1");
        assert_eq!(
            client_ip(mapped, &HeaderMap::new(), None, ClientIpHeader::XRealIp),
            ip("192.0.2.1")
        );
        assert_eq!(trusted(mapped, &HeaderMap::new()), ip("192.0.2.1"));
        assert_eq!(
            client_ip(
                ip("::1"),
                &HeaderMap::new(),
                None,
                ClientIpHeader::Forwarded
            ),
            ip("::1")
        );
    }

    #[test]
    fn stored_ip_modes() {
        let v4 = ip("203.0.113.77");
        let v6 = ip("2001:db8:1:2:3:4:5:6");
        assert_eq!(stored_ip(v4, IpMode::Full).as_deref(), Some("203.0.113.77"));
        assert_eq!(
            stored_ip(v4, IpMode::Truncated).as_deref(),
            Some("203.0.113.0")
        );
        assert_eq!(stored_ip(v4, IpMode::None), None);
        assert_eq!(
            stored_ip(v6, IpMode::Full).as_deref(),
            Some("2001:db8:1:2:3:4:5:6")
        );
        assert_eq!(
            stored_ip(v6, IpMode::Truncated).as_deref(),
            Some("2001:db8:1::")
        );
        assert_eq!(stored_ip(v6, IpMode::None), None);
        assert_eq!(
            stored_ip(ip("::ffff:203.0.113.77"), IpMode::Truncated).as_deref(),
            Some("203.0.113.0")
        );
    }

    #[test]
    fn client_id_is_sha1_of_ip_and_agent() {
        // Expected values from `printf '1.2.3.4&Mozilla/5.0' | sha1sum` and the like.
        assert_eq!(
            client_id(ip("1.2.3.4"), "Mozilla/5.0"),
            "02d7c297e3414ae740891f963ff0fa9fcea1f169"
        );
        assert_eq!(
            client_id(ip("2001:db8::1"), ""),
            "9d9d8009b5154a54b8fdee29bd70ddb887d9642d"
        );
        assert_eq!(
            client_id(ip("::ffff:1.2.3.4"), ""),
            "35b900cee37476844e7b79fabc019f5269d795f1"
        );
    }

    #[test]
    fn client_key_shares_the_digest() {
        let (id, key) = client_key(ip("1.2.3.4"), "Mozilla/5.0");
        assert_eq!(id, client_id(ip("1.2.3.4"), "Mozilla/5.0"));
        assert_eq!(key, 0x02d7_c297_e341_4ae7);
        assert_ne!(key, client_key(ip("1.2.3.5"), "Mozilla/5.0").1);
    }
}
