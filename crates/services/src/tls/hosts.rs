//! The hosts HTTPS holds certificates for: one small seam between whoever knows the configured
//! domains and the certificate orderer. Today it holds the default domain (the host of
//! `server.base_url`); the domains service replaces the list when a domain is added or removed
//! ([`CertificateHosts::replace`]), and the orderer is told at once. A host not in the list is
//! never ordered for, so a flood of made-up SNI names costs nothing.

use std::sync::Arc;

use tokio::sync::watch;

/// The set of hosts to hold certificates for, the default domain first; cheap to clone (every
/// clone is the same set).
#[derive(Clone, Debug)]
pub struct CertificateHosts {
    default: Arc<str>,
    hosts: Arc<watch::Sender<Vec<String>>>,
}

impl CertificateHosts {
    /// The set holding the default domain alone.
    pub fn new(default_host: &str) -> Self {
        let default = default_host.to_ascii_lowercase();
        let (hosts, _) = watch::channel(vec![default.clone()]);
        Self {
            default: default.into(),
            hosts: Arc::new(hosts),
        }
    }

    /// The default domain (whose certificate answers an SNI name nobody configured).
    pub fn default_host(&self) -> &str {
        &self.default
    }

    /// Every host, the default domain first.
    pub fn hosts(&self) -> Vec<String> {
        self.hosts.borrow().clone()
    }

    /// Whether `host` (any case) is one of them.
    pub fn contains(&self, host: &str) -> bool {
        self.hosts
            .borrow()
            .iter()
            .any(|h| h.eq_ignore_ascii_case(host))
    }

    /// Replaces the configured hosts (the domains): lowercased, each once, the default domain
    /// always kept first. Whoever [`CertificateHosts::subscribe`]d is told when the set changed.
    pub fn replace(&self, hosts: impl IntoIterator<Item = String>) {
        let mut next = vec![self.default.to_string()];
        for host in hosts {
            let host = host.trim().trim_end_matches('.').to_ascii_lowercase();
            if !host.is_empty() && !next.contains(&host) {
                next.push(host);
            }
        }
        self.hosts.send_if_modified(|current| {
            let changed = *current != next;
            if changed {
                *current = next;
            }
            changed
        });
    }

    /// A receiver that sees each change of the set.
    pub fn subscribe(&self) -> watch::Receiver<Vec<String>> {
        self.hosts.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_stays_first_and_changes_are_told() {
        let hosts = CertificateHosts::new("Go.Example");
        assert_eq!(hosts.hosts(), ["go.example"]);
        let mut told = hosts.subscribe();
        hosts.replace(["B.example.".to_string(), "go.example".to_string()]);
        assert!(told.has_changed().unwrap());
        told.mark_unchanged();
        assert_eq!(hosts.hosts(), ["go.example", "b.example"]);
        assert!(hosts.contains("B.EXAMPLE"));
        assert!(!hosts.contains("made-up.example"));
        hosts.replace(["b.example".to_string()]);
        assert!(!told.has_changed().unwrap());
    }
}
