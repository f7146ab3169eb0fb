//! Operator commands that run beside the server rather than inside it. For now the Docker
//! `HEALTHCHECK` probe, which needs no curl in the runtime image.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::Duration;

use crate::config::Config;

/// Asks the local server's `/healthz`; `Ok` when it answers 200.
pub fn healthcheck(config: &Config) -> Result<(), String> {
    let mut addr = config.server.listen;
    // A server listening on every interface is reached on loopback.
    if addr.ip().is_unspecified() {
        let loopback = match addr.ip() {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        };
        addr = SocketAddr::new(loopback, addr.port());
    }
    let timeout = Duration::from_secs(3);
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{addr}: {e}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("{addr}: {e}"))?;
    let mut reply = Vec::new();
    stream
        .read_to_end(&mut reply)
        .map_err(|e| format!("{addr}: {e}"))?;
    let status_line = String::from_utf8_lossy(&reply);
    let status_line = status_line.lines().next().unwrap_or("");
    if status_line.split_whitespace().nth(1) == Some("200") {
        Ok(())
    } else {
        Err(format!("{addr}/healthz answered `{status_line}`"))
    }
}
