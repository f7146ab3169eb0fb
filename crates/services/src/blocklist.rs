//! Blocked destination hosts: `limits.blocked_hosts` plus the lines of
//! `limits.blocked_hosts_file`, which a background thread re-reads within
//! [`RELOAD_INTERVAL`] of a change. A host matches itself and its subdomains.
//!
//! Consulted by the domain service ([`crate::links`]) only: creates and URL changes to a blocked
//! host are refused, and a link whose host became blocked stops redirecting. The redirect path
//! pays nothing while the list is empty. No HTTP here.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use parking_lot::{Mutex, RwLock};

/// How often the file's modification time and size are looked at.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// The hosts currently blocked.
pub struct BlockedHosts {
    /// From the configuration; always blocked.
    configured: HashSet<String>,
    file: Option<PathBuf>,
    /// `configured` plus the file's hosts as last read.
    hosts: RwLock<HashSet<String>>,
    /// `hosts` is not empty (read without a lock on every redirect).
    any: AtomicBool,
    stop: Arc<AtomicBool>,
    watcher: Mutex<Option<JoinHandle<()>>>,
}

/// A file that could not be read at start-up.
#[derive(Debug, thiserror::Error)]
#[error("limits.blocked_hosts_file: cannot read {path}: {source}")]
pub struct BlocklistError {
    path: String,
    source: std::io::Error,
}

impl BlockedHosts {
    /// The configured hosts and the file's (read now: a missing file stops start-up).
    pub fn new(configured: &[String], file: Option<&Path>) -> Result<Self, BlocklistError> {
        let configured: HashSet<String> = configured.iter().filter_map(|h| normalise(h)).collect();
        let blocked = Self {
            hosts: RwLock::new(configured.clone()),
            any: AtomicBool::new(!configured.is_empty()),
            configured,
            file: file.map(Path::to_path_buf),
            stop: Arc::new(AtomicBool::new(false)),
            watcher: Mutex::new(None),
        };
        if let Some(path) = &blocked.file {
            let text = std::fs::read_to_string(path).map_err(|source| BlocklistError {
                path: path.display().to_string(),
                source,
            })?;
            blocked.replace_file_hosts(&text);
        }
        Ok(blocked)
    }

    /// Blocks nothing.
    pub fn empty() -> Self {
        Self {
            configured: HashSet::new(),
            file: None,
            hosts: RwLock::new(HashSet::new()),
            any: AtomicBool::new(false),
            stop: Arc::new(AtomicBool::new(false)),
            watcher: Mutex::new(None),
        }
    }

    /// Is `host` (a URL's host as the `url` crate serialises it) or one of its parent domains
    /// blocked?
    pub fn is_blocked(&self, host: &str) -> bool {
        if !self.any.load(Ordering::Relaxed) {
            return false;
        }
        let hosts = self.hosts.read();
        host_and_parents(host).any(|h| {
            hosts.contains(h)
                || (h.bytes().any(|b| b.is_ascii_uppercase())
                    && hosts.contains(&h.to_ascii_lowercase()))
        })
    }

    /// The entry that blocks `host` (itself or the parent domain listed), for a record of why.
    /// Slower than [`Self::is_blocked`]: for the review, not the redirect.
    pub fn blocked_by(&self, host: &str) -> Option<String> {
        if !self.any.load(Ordering::Relaxed) {
            return None;
        }
        let host = host.to_ascii_lowercase();
        let hosts = self.hosts.read();
        let entry = host_and_parents(&host)
            .find(|h| hosts.contains(*h))
            .map(str::to_string);
        entry
    }

    /// Is the host of this stored (normalised) URL blocked? Cheap while the list is empty.
    pub fn blocks_url(&self, url: &str) -> bool {
        self.any.load(Ordering::Relaxed) && host_of(url).is_some_and(|h| self.is_blocked(h))
    }

    /// Starts the thread that re-reads the file when it changes (no thread without a file).
    pub fn start_watching(self: &Arc<Self>) {
        let Some(path) = self.file.clone() else {
            return;
        };
        let this = Arc::downgrade(self);
        let stop = self.stop.clone();
        let handle = std::thread::Builder::new()
            .name("blocklist".into())
            .spawn(move || {
                let mut seen = stamp(&path);
                while !stop.load(Ordering::Relaxed) {
                    // `stop` unparks: shutdown does not wait out the interval.
                    std::thread::park_timeout(RELOAD_INTERVAL);
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let now = stamp(&path);
                    if now == seen {
                        continue;
                    }
                    seen = now;
                    let Some(blocked) = this.upgrade() else {
                        return;
                    };
                    match std::fs::read_to_string(&path) {
                        Ok(text) => {
                            let count = blocked.replace_file_hosts(&text);
                            tracing::info!(path = %path.display(), hosts = count, "blocked hosts reloaded");
                        }
                        Err(e) => tracing::warn!(
                            path = %path.display(),
                            error = %e,
                            "cannot re-read limits.blocked_hosts_file; keeping the previous list"
                        ),
                    }
                }
            });
        match handle {
            Ok(handle) => *self.watcher.lock() = Some(handle),
            Err(e) => tracing::error!(error = %e, "cannot start the blocked-hosts watcher"),
        }
    }

    /// Stops the watcher thread.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.watcher.lock().take() {
            handle.thread().unpark();
            let _ = handle.join();
        }
    }

    /// Sets the file's hosts (with the configured ones); returns how many hosts are blocked.
    fn replace_file_hosts(&self, text: &str) -> usize {
        let mut hosts = self.configured.clone();
        hosts.extend(parse_list(text));
        let count = hosts.len();
        self.any.store(count > 0, Ordering::Relaxed);
        *self.hosts.write() = hosts;
        count
    }
}

/// A host (without its trailing dot) and each of its parent domains, the host first:
/// `a.b.example`, `b.example`, `example`. A list entry matches when any of them is listed.
pub fn host_and_parents(host: &str) -> impl Iterator<Item = &str> {
    let host = host.trim_end_matches('.');
    std::iter::successors(Some(host), |rest| match rest.split_once('.') {
        Some((_, parent)) if !parent.is_empty() => Some(parent),
        _ => None,
    })
}

/// Modification time and length: a change of either means re-read.
pub fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// The hosts of a blocklist file: one a line, `#` starts a comment.
pub fn parse_list(text: &str) -> impl Iterator<Item = String> + '_ {
    text.lines()
        .map(|line| line.split('#').next().unwrap_or_default().trim())
        .filter(|line| !line.is_empty())
        .filter_map(normalise)
}

/// A host as the `url` crate writes it (lower case, punycode, IPv6 in brackets), or `None` if
/// it is no host.
pub fn normalise(host: &str) -> Option<String> {
    let host = host.trim().trim_end_matches('.');
    if host.is_empty() || host.contains(['/', '@', '?', '#', ' ']) {
        return None;
    }
    let url = url::Url::parse(&format!("http://{host}/")).ok()?;
    url.host_str().map(str::to_string)
}

/// The host of a serialised http(s) URL, without parsing it again (the redirect path).
pub fn host_of(url: &str) -> Option<&str> {
    let rest = &url[url.find("://")? + 3..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host_port.starts_with('[') {
        return host_port.find(']').map(|end| &host_port[..=end]);
    }
    Some(host_port.split(':').next().unwrap_or(host_port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_blocks_itself_and_its_subdomains_only() {
        let b = BlockedHosts::new(&["Evil.example".into(), "[::1]".into()], None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(b.is_blocked("evil.example"));
        assert!(b.is_blocked("a.b.evil.example"));
        assert!(b.is_blocked("EVIL.example."));
        assert!(!b.is_blocked("notevil.example"));
        assert!(!b.is_blocked("example"));
        assert!(b.blocks_url("https://user:pw@x.evil.example:8443/p?q#f"));
        assert!(b.blocks_url("http://[::1]:80/"));
        assert!(!b.blocks_url("https://good.example/evil.example"));
        assert_eq!(b.blocked_by("A.Evil.example"), Some("evil.example".into()));
        assert_eq!(b.blocked_by("good.example"), None);
    }

    #[test]
    fn empty_list_blocks_nothing() {
        let b = BlockedHosts::new(&[], None).unwrap_or_else(|e| panic!("{e}"));
        assert!(!b.blocks_url("https://anything.example/"));
    }

    #[test]
    fn files_have_comments_and_blank_lines() {
        let hosts: Vec<String> =
            parse_list("# phishing\nbad.example  # since May\n\n  B\u{fc}cher.example\n").collect();
        assert_eq!(hosts, ["bad.example", "xn--bcher-kva.example"]);
    }

    #[test]
    fn host_of_stored_urls() {
        assert_eq!(host_of("https://a.example/x"), Some("a.example"));
        assert_eq!(host_of("http://u@a.example:81?q"), Some("a.example"));
        assert_eq!(host_of("http://[2001:db8::1]:8080/"), Some("[2001:db8::1]"));
        assert_eq!(host_of("nonsense"), None);
    }
}
