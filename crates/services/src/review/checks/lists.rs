//! The review's blocklists (`review.blocklists`): files of hosts or URLs, one a line, read at
//! start and re-read by a thread within [`RELOAD_INTERVAL`] of a change. Owns the files' syntax
//! and the matching of a destination against them; the hosts of `limits.blocked_hosts` stay in
//! [`crate::blocklist`], whose host rules (normalising, subdomains) this reuses. No network.
//!
//! A line is one of:
//! - a host (`evil.example`): blocks it and its subdomains;
//! - a URL (`https://bad.example/login?x=1`): blocks exactly that URL once normalised, whatever
//!   its fragment (lists like URLhaus name single URLs on hosts that also serve good pages);
//! - a hosts-file line (`0.0.0.0 evil.example other.example`): an address, then hosts. The
//!   usual preamble of such files (`127.0.0.1 localhost`, `0.0.0.0 0.0.0.0`, …) is skipped so
//!   that a downloaded list does not block `localhost`.
//!
//! `#` starts a comment at the start of a line or after a space; inside a URL it is the
//! fragment. Anything else is ignored and counted in the log.

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::SystemTime;

use parking_lot::RwLock;
use url::Url;

use crate::blocklist::{host_and_parents, normalise, stamp, RELOAD_INTERVAL};

/// The names hosts files map to themselves or to loopback in their preamble; never blocked.
const PREAMBLE: &[&str] = &[
    "localhost",
    "localhost.localdomain",
    "local",
    "broadcasthost",
    "ip6-localhost",
    "ip6-loopback",
    "ip6-localnet",
    "ip6-mcastprefix",
    "ip6-allnodes",
    "ip6-allrouters",
    "ip6-allhosts",
    "0.0.0.0",
];

/// The entries of one file as last read.
#[derive(Debug, Default, PartialEq)]
pub struct Entries {
    /// Normalised hosts (match themselves and their subdomains).
    pub hosts: HashSet<String>,
    /// Normalised URLs without their fragment (match exactly).
    pub urls: HashSet<String>,
    /// Lines that were neither (logged, never fatal: one bad line must not drop a list).
    pub ignored: usize,
}

struct File {
    path: PathBuf,
    entries: Entries,
}

/// The review blocklists, reloaded in the background while this value lives.
pub struct ReviewLists {
    files: Arc<RwLock<Vec<File>>>,
    stop: Arc<AtomicBool>,
    watcher: Option<JoinHandle<()>>,
}

impl ReviewLists {
    /// Reads every file now (an unreadable one stops start-up, like `limits.blocked_hosts_file`)
    /// and starts the thread that re-reads them when their modification time or size changes.
    pub fn open(paths: &[PathBuf]) -> Result<Self, String> {
        let mut files = Vec::with_capacity(paths.len());
        for path in paths {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("review.blocklists: cannot read {}: {e}", path.display()))?;
            let entries = parse(&text);
            log_loaded(path, &entries, "review blocklist read");
            files.push(File {
                path: path.clone(),
                entries,
            });
        }
        let files = Arc::new(RwLock::new(files));
        let stop = Arc::new(AtomicBool::new(false));
        let watcher = if paths.is_empty() {
            None
        } else {
            let stamps: Vec<_> = paths.iter().map(|p| stamp(p)).collect();
            Some(spawn_watcher(Arc::downgrade(&files), stop.clone(), stamps)?)
        };
        Ok(Self {
            files,
            stop,
            watcher,
        })
    }

    /// The entry that blocks `url`, with the file it is in; `None` when clear.
    pub fn hit(&self, url: &Url) -> Option<String> {
        let files = self.files.read();
        if files.is_empty() {
            return None;
        }
        let mut exact = url.clone();
        exact.set_fragment(None);
        let exact = exact.as_str();
        let host = url.host_str().map(str::to_ascii_lowercase);
        for file in files.iter() {
            if file.entries.urls.contains(exact) {
                return Some(format!("{exact} ({})", file.path.display()));
            }
            if let Some(host) = &host {
                if let Some(h) = host_and_parents(host).find(|h| file.entries.hosts.contains(*h)) {
                    return Some(format!("{h} ({})", file.path.display()));
                }
            }
        }
        None
    }
}

impl Drop for ReviewLists {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.watcher.take() {
            // Unparked, the thread sees `stop` at once rather than after the interval.
            handle.thread().unpark();
            let _ = handle.join();
        }
    }
}

fn spawn_watcher(
    files: Weak<RwLock<Vec<File>>>,
    stop: Arc<AtomicBool>,
    mut seen: Vec<Option<(SystemTime, u64)>>,
) -> Result<JoinHandle<()>, String> {
    std::thread::Builder::new()
        .name("review-lists".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::park_timeout(RELOAD_INTERVAL);
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let Some(files) = files.upgrade() else {
                    return;
                };
                let paths: Vec<PathBuf> = files.read().iter().map(|f| f.path.clone()).collect();
                for (i, path) in paths.iter().enumerate() {
                    let now = stamp(path);
                    if now == seen[i] {
                        continue;
                    }
                    seen[i] = now;
                    // Read outside the lock: a slow disk must not hold up the checks.
                    match std::fs::read_to_string(path) {
                        Ok(text) => {
                            let entries = parse(&text);
                            log_loaded(path, &entries, "review blocklist reloaded");
                            files.write()[i].entries = entries;
                        }
                        Err(e) => tracing::warn!(
                            path = %path.display(),
                            error = %e,
                            "cannot re-read a review blocklist; keeping the previous list"
                        ),
                    }
                }
            }
        })
        .map_err(|e| format!("cannot start the review blocklists' watcher: {e}"))
}

fn log_loaded(path: &Path, entries: &Entries, message: &str) {
    tracing::info!(
        path = %path.display(),
        hosts = entries.hosts.len(),
        urls = entries.urls.len(),
        ignored = entries.ignored,
        "{message}"
    );
}

/// The entries of a blocklist file's text.
pub fn parse(text: &str) -> Entries {
    let mut entries = Entries::default();
    for line in text.lines() {
        let line = strip_comment(line);
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else {
            continue;
        };
        let rest: Vec<&str> = words.collect();
        if rest.is_empty() {
            if first.contains("://") {
                match Url::parse(first) {
                    Ok(mut url) if url.has_host() => {
                        url.set_fragment(None);
                        entries.urls.insert(url.into());
                    }
                    _ => entries.ignored += 1,
                }
            } else {
                match normalise(first) {
                    Some(host) => {
                        entries.hosts.insert(host);
                    }
                    None => entries.ignored += 1,
                }
            }
        } else if is_address(first) {
            for name in rest {
                if PREAMBLE.iter().any(|p| p.eq_ignore_ascii_case(name)) {
                    continue;
                }
                match normalise(name) {
                    Some(host) => {
                        entries.hosts.insert(host);
                    }
                    None => entries.ignored += 1,
                }
            }
        } else {
            entries.ignored += 1;
        }
    }
    entries
}

/// The line before its comment: `#` at the start or after white space (a URL's `#` is its
/// fragment).
fn strip_comment(line: &str) -> &str {
    let mut prev_space = true;
    for (i, c) in line.char_indices() {
        if c == '#' && prev_space {
            return &line[..i];
        }
        prev_space = c.is_whitespace();
    }
    line
}

/// The first word of a hosts-file line: an address, possibly with an IPv6 zone (`fe80::1%lo0`).
fn is_address(word: &str) -> bool {
    let addr = word.split_once('%').map_or(word, |(a, _)| a);
    addr.parse::<IpAddr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_urls_and_hosts_file_lines() {
        let e = parse(
            "# a list\n\
             Evil.Example\n\
             0.0.0.0 ads.example tracker.example # two\n\
             127.0.0.1 localhost\n\
             ::1 ip6-localhost ip6-loopback\n\
             fe80::1%lo0 localhost\n\
             0.0.0.0 0.0.0.0\n\
             https://bad.example/login?x=1#top\n\
             http://bad.example/a#b # a comment\n\
             ||adblock.example^ $third-party\n\
             \n",
        );
        let hosts: HashSet<String> = ["evil.example", "ads.example", "tracker.example"]
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(e.hosts, hosts);
        let urls: HashSet<String> = ["https://bad.example/login?x=1", "http://bad.example/a"]
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(e.urls, urls);
        assert_eq!(e.ignored, 1);
    }

    #[test]
    fn comments_only_after_space() {
        assert_eq!(strip_comment("# all"), "");
        assert_eq!(strip_comment("a.example # why"), "a.example ");
        assert_eq!(
            strip_comment("https://x.example/#frag"),
            "https://x.example/#frag"
        );
    }
}
