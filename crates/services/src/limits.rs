//! Rate limits (`limits.rates`): one keyed GCRA limiter from the `governor` crate per
//! configured limit, with a bounded per-key state so that a scanner walking through addresses
//! cannot grow memory without end. Knows nothing of HTTP: callers pass the client address or
//! key name and turn a [`RateLimited`] into a 429 (in `http/error.rs`).
//!
//! Addresses: a limit keys an IPv4 client by its address and an IPv6 client by its network
//! (`limits.ipv6_prefix`, default /64), since one home line or one cloud machine holds a whole
//! /64 and could otherwise pick a fresh address for every guess ([`network`]).
//!
//! Memory bound: each limit tracks at most [`MAX_TRACKED_KEYS`] keys in a `quick_cache`; when
//! it is full the least useful entries are evicted (an evicted key starts again with a full
//! burst). An entry costs about 100 bytes; `examples/limiter_memory.rs` measured 25.6 MB of RSS
//! for all four limits full and 35.6 MB after a million distinct keys each (no further growth).

use std::hash::Hash;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed, StateStore};
use governor::{Quota, RateLimiter};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::config::{Rate, RatesConfig};

/// Keys (addresses or API key names) each limit remembers at most.
pub const MAX_TRACKED_KEYS: usize = 65_536;

/// The IPv6 prefix length addresses are keyed by unless configured (`limits.ipv6_prefix`).
pub const DEFAULT_IPV6_PREFIX: u8 = 64;

/// The key of a client address for per-address limits: an IPv4 address itself (IPv4-mapped
/// IPv6 read as IPv4), an IPv6 address with every bit past `prefix` cleared.
pub fn network(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let mask = match prefix.min(128) {
                0 => 0,
                n => u128::MAX << (128 - u32::from(n)),
            };
            IpAddr::V6((bits & mask).into())
        }
    }
}

/// The configured limits, by their configuration key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Limit {
    /// Redirect-path requests answered 404, per client address.
    NotFoundPerIp,
    /// Every redirect-path request, per client address.
    RedirectPerIp,
    /// Creates per API key (batch items count).
    CreatePerKey,
    /// Anonymous creates per client address.
    CreatePerIp,
    /// Sign-in attempts on `/ui/login` per client address, successful or not.
    LoginPerIp,
    /// Failed credentials per client address (API keys, YOURLS signatures and passwords,
    /// sign-in keys).
    AuthPerIp,
    /// Failed sign-ins per account, from one address (and ten times as many from all).
    AuthPerAccount,
    /// Link password attempts (the visitor's form, `X-Link-Password`) per client address,
    /// right or wrong.
    PasswordPerIp,
    /// Submissions of links' forms before the destination per client address, valid or not.
    FormPerIp,
}

impl Limit {
    /// The key under `limits.rates`, also the metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::NotFoundPerIp => "not_found_per_ip",
            Limit::RedirectPerIp => "redirect_per_ip",
            Limit::CreatePerKey => "create_per_key",
            Limit::CreatePerIp => "create_per_ip",
            Limit::LoginPerIp => "login_per_ip",
            Limit::AuthPerIp => "auth_per_ip",
            Limit::AuthPerAccount => "auth_per_account",
            Limit::PasswordPerIp => "password_per_ip",
            Limit::FormPerIp => "form_per_ip",
        }
    }
}

/// A request over its quota.
#[derive(Clone, Debug, thiserror::Error)]
#[error("too many requests: over the `limits.rates.{}` quota; retry in {retry_after_secs} s", limit.as_str())]
pub struct RateLimited {
    pub limit: Limit,
    /// Whole seconds until the quota lets the request through (at least 1).
    pub retry_after_secs: u64,
}

/// A `governor` state store that keeps at most `capacity` keys, each with governor's own
/// atomic GCRA state. (governor's stores grow with every key seen until `retain_recent`.)
pub struct BoundedStore<K: Eq + Hash + Clone> {
    states: Arc<quick_cache::sync::Cache<K, Arc<InMemoryState>>>,
}

impl<K: Eq + Hash + Clone> StateStore for BoundedStore<K> {
    type Key = K;

    fn measure_and_replace<T, F, E>(&self, key: &K, f: F) -> Result<T, E>
    where
        F: Fn(Option<Nanos>) -> Result<(T, Nanos), E>,
    {
        let state = match self.states.get(key) {
            Some(state) => state,
            None => {
                let state = Arc::new(InMemoryState::default());
                self.states.insert(key.clone(), state.clone());
                state
            }
        };
        state.measure_and_replace(&NotKeyed::NonKey, f)
    }
}

type Keyed<K> = RateLimiter<K, BoundedStore<K>, DefaultClock>;

/// One limit: its quota and limiter.
struct Limiter<K: Eq + Hash + Clone> {
    limit: Limit,
    period: Duration,
    inner: Keyed<K>,
    clock: DefaultClock,
    /// The limiter's state store, for tests of its bound.
    #[cfg(test)]
    states: Arc<quick_cache::sync::Cache<K, Arc<InMemoryState>>>,
}

impl<K: Eq + Hash + Clone> Limiter<K> {
    fn new(limit: Limit, rate: Rate, capacity: usize) -> Option<Self> {
        let (n, period) = match rate {
            Rate::Off => return None,
            Rate::PerSecond(n) => (n, Duration::from_secs(1)),
            Rate::PerMinute(n) => (n, Duration::from_secs(60)),
            Rate::PerHour(n) => (n, Duration::from_secs(3600)),
        };
        let burst = NonZeroU32::new(n)?;
        // N per period with a burst of N: the bucket refills one cell every period / N.
        let quota = Quota::with_period(period / n)?.allow_burst(burst);
        let states = Arc::new(quick_cache::sync::Cache::new(capacity));
        let clock = DefaultClock::default();
        let store = BoundedStore {
            states: states.clone(),
        };
        Some(Self {
            limit,
            period,
            inner: RateLimiter::new(quota, store, clock.clone()),
            clock,
            #[cfg(test)]
            states,
        })
    }

    fn check(&self, key: &K, cells: u32) -> Result<(), RateLimited> {
        let refused = |wait: Duration| RateLimited {
            limit: self.limit,
            retry_after_secs: (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1),
        };
        let Some(n) = NonZeroU32::new(cells) else {
            return Ok(());
        };
        match self.inner.check_key_n(key, n) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => Err(refused(not_until.wait_time_from(self.clock.now()))),
            // More cells than the burst can never pass at once; a smaller request can after
            // a full period.
            Err(_) => Err(refused(self.period)),
        }
    }

    #[cfg(test)]
    fn inner_len(&self) -> usize {
        self.states.len()
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabel {
    pub limit: &'static str,
}

/// Every configured rate limit, and the count of requests each refused (for `/metrics`).
pub struct RateLimits {
    not_found_per_ip: Option<Limiter<IpAddr>>,
    redirect_per_ip: Option<Limiter<IpAddr>>,
    create_per_key: Option<Limiter<String>>,
    create_per_ip: Option<Limiter<IpAddr>>,
    login_per_ip: Option<Limiter<IpAddr>>,
    auth_per_ip: Option<Limiter<IpAddr>>,
    /// `auth_per_account` by account and address network, and ten times it by account.
    auth_per_account: Option<Limiter<String>>,
    auth_per_account_all: Option<Limiter<String>>,
    /// Accounts (and account-and-address pairs) past their quota, until when.
    account_blocked: quick_cache::sync::Cache<String, Instant>,
    password_per_ip: Option<Limiter<IpAddr>>,
    form_per_ip: Option<Limiter<IpAddr>>,
    /// Addresses past `auth_per_ip`, until when: every credential they present is refused
    /// until then, the right one too (only failures count, so without this a right guess
    /// past the quota would still be let through and told apart).
    auth_blocked: quick_cache::sync::Cache<IpAddr, Instant>,
    /// The prefix length IPv6 addresses are keyed by.
    ipv6_prefix: u8,
    /// Requests answered 429, by limit.
    pub refused: Family<LimitLabel, Counter>,
}

impl RateLimits {
    pub fn new(rates: &RatesConfig) -> Self {
        Self::with_capacity(rates, MAX_TRACKED_KEYS)
    }

    /// Limits that remember at most `capacity` keys each.
    pub fn with_capacity(rates: &RatesConfig, capacity: usize) -> Self {
        let refused = Family::<LimitLabel, Counter>::default();
        // Every limit shows in /metrics from the start, at 0.
        for limit in [
            Limit::NotFoundPerIp,
            Limit::RedirectPerIp,
            Limit::CreatePerKey,
            Limit::CreatePerIp,
            Limit::LoginPerIp,
            Limit::AuthPerIp,
            Limit::AuthPerAccount,
            Limit::PasswordPerIp,
            Limit::FormPerIp,
        ] {
            drop(refused.get_or_create(&LimitLabel {
                limit: limit.as_str(),
            }));
        }
        Self {
            not_found_per_ip: Limiter::new(Limit::NotFoundPerIp, rates.not_found_per_ip, capacity),
            redirect_per_ip: Limiter::new(Limit::RedirectPerIp, rates.redirect_per_ip, capacity),
            create_per_key: Limiter::new(Limit::CreatePerKey, rates.create_per_key, capacity),
            create_per_ip: Limiter::new(Limit::CreatePerIp, rates.create_per_ip, capacity),
            login_per_ip: Limiter::new(Limit::LoginPerIp, rates.login_per_ip, capacity),
            auth_per_ip: Limiter::new(Limit::AuthPerIp, rates.auth_per_ip, capacity),
            auth_per_account: Limiter::new(Limit::AuthPerAccount, rates.auth_per_account, capacity),
            auth_per_account_all: Limiter::new(
                Limit::AuthPerAccount,
                rates.auth_per_account.times(10),
                capacity,
            ),
            account_blocked: quick_cache::sync::Cache::new(capacity),
            password_per_ip: Limiter::new(Limit::PasswordPerIp, rates.password_per_ip, capacity),
            form_per_ip: Limiter::new(Limit::FormPerIp, rates.form_per_ip, capacity),
            auth_blocked: quick_cache::sync::Cache::new(capacity),
            ipv6_prefix: DEFAULT_IPV6_PREFIX,
            refused,
        }
    }

    /// Keys IPv6 clients by their first `prefix` bits (`limits.ipv6_prefix`).
    pub fn with_ipv6_prefix(mut self, prefix: u8) -> Self {
        self.ipv6_prefix = prefix.min(128);
        self
    }

    /// The key a limit counts `ip` under.
    fn key(&self, ip: IpAddr) -> IpAddr {
        network(ip, self.ipv6_prefix)
    }

    /// Is `redirect_per_ip` on? Lets the redirect path skip working out the client address.
    pub fn limits_redirects(&self) -> bool {
        self.redirect_per_ip.is_some()
    }

    /// One request from `ip` against an address limit (`not_found_per_ip`, `redirect_per_ip`,
    /// `login_per_ip`, or `create_per_ip` with `cells` items).
    pub fn check_ip(&self, limit: Limit, ip: IpAddr, cells: u32) -> Result<(), RateLimited> {
        let limiter = match limit {
            Limit::NotFoundPerIp => &self.not_found_per_ip,
            Limit::RedirectPerIp => &self.redirect_per_ip,
            Limit::CreatePerIp => &self.create_per_ip,
            Limit::LoginPerIp => &self.login_per_ip,
            Limit::AuthPerIp => &self.auth_per_ip,
            Limit::AuthPerAccount => return Ok(()),
            Limit::PasswordPerIp => &self.password_per_ip,
            Limit::FormPerIp => &self.form_per_ip,
            Limit::CreatePerKey => return Ok(()),
        };
        let key = self.key(ip);
        self.counted(limiter.as_ref().map_or(Ok(()), |l| l.check(&key, cells)))
    }

    /// Before a credential from `ip` is looked at: refused while the address is past
    /// `auth_per_ip` (see [`RateLimits::auth_failed`]).
    pub fn check_auth(&self, ip: IpAddr) -> Result<(), RateLimited> {
        let ip = self.key(ip);
        let Some(until) = self.auth_blocked.get(&ip) else {
            return Ok(());
        };
        let now = Instant::now();
        if until <= now {
            self.auth_blocked.remove(&ip);
            return Ok(());
        }
        let wait = until - now;
        self.counted(Err(RateLimited {
            limit: Limit::AuthPerIp,
            retry_after_secs: (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1),
        }))
    }

    /// A credential from `ip` that matched nothing: one against `auth_per_ip`. Past the
    /// quota the address is refused, for every credential, until the quota lets one more
    /// through.
    pub fn auth_failed(&self, ip: IpAddr) -> Result<(), RateLimited> {
        let Some(limiter) = &self.auth_per_ip else {
            return Ok(());
        };
        let ip = self.key(ip);
        let result = limiter.check(&ip, 1);
        if let Err(e) = &result {
            self.auth_blocked
                .insert(ip, Instant::now() + Duration::from_secs(e.retry_after_secs));
        }
        self.counted(result)
    }

    /// The keys an account's sign-ins count under: the account from this address's network,
    /// and the account from anywhere.
    fn account_keys(&self, account: &str, ip: IpAddr) -> [String; 2] {
        [
            format!("{account}\u{1f}{}", self.key(ip)),
            account.to_string(),
        ]
    }

    /// Before a password for `account` (an email, known or not) from `ip` is checked:
    /// refused while the account is past `auth_per_account`, from this address or from all.
    /// Never for good: the block ends when the quota lets one more through.
    pub fn check_account(&self, account: &str, ip: IpAddr) -> Result<(), RateLimited> {
        let now = Instant::now();
        for key in self.account_keys(account, ip) {
            let Some(until) = self.account_blocked.get(&key) else {
                continue;
            };
            if until <= now {
                self.account_blocked.remove(&key);
                continue;
            }
            let wait = until - now;
            return self.counted(Err(RateLimited {
                limit: Limit::AuthPerAccount,
                retry_after_secs: (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1),
            }));
        }
        Ok(())
    }

    /// A failed sign-in for `account` from `ip`: one against the account from this address
    /// and one against the account from all. Past either, the account (from there, or from
    /// everywhere) is refused until the quota lets one more through.
    pub fn account_failed(&self, account: &str, ip: IpAddr) -> Result<(), RateLimited> {
        let [pair, all] = self.account_keys(account, ip);
        let mut result = Ok(());
        for (limiter, key) in [
            (&self.auth_per_account, pair),
            (&self.auth_per_account_all, all),
        ] {
            let Some(limiter) = limiter else { continue };
            if let Err(e) = limiter.check(&key, 1) {
                self.account_blocked.insert(
                    key,
                    Instant::now() + Duration::from_secs(e.retry_after_secs),
                );
                result = Err(e);
            }
        }
        self.counted(result)
    }

    /// `cells` creates by the API key named `key` (`create_per_key`).
    pub fn check_key(&self, key: &str, cells: u32) -> Result<(), RateLimited> {
        self.counted(
            self.create_per_key
                .as_ref()
                .map_or(Ok(()), |l| l.check(&key.to_string(), cells)),
        )
    }

    fn counted(&self, result: Result<(), RateLimited>) -> Result<(), RateLimited> {
        if let Err(e) = &result {
            self.refused
                .get_or_create(&LimitLabel {
                    limit: e.limit.as_str(),
                })
                .inc();
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(not_found: Rate) -> RatesConfig {
        RatesConfig {
            redirect_per_ip: Rate::Off,
            not_found_per_ip: not_found,
            create_per_key: Rate::PerMinute(5),
            create_per_ip: Rate::Off,
            login_per_ip: Rate::Off,
            auth_per_ip: Rate::PerMinute(3),
            auth_per_account: Rate::Off,
            password_per_ip: Rate::Off,
            form_per_ip: Rate::Off,
        }
    }

    #[test]
    fn failed_credentials_block_the_right_one_too() {
        let limits = RateLimits::new(&rates(Rate::Off));
        let a = IpAddr::from([192, 0, 2, 1]);
        let b = IpAddr::from([192, 0, 2, 2]);
        for _ in 0..3 {
            assert!(limits.check_auth(a).is_ok());
            assert!(limits.auth_failed(a).is_ok(), "within the quota");
        }
        let refused = limits.auth_failed(a).unwrap_err();
        assert_eq!(refused.limit, Limit::AuthPerIp);
        // The next credential, whatever it is, is refused before it is looked at.
        let blocked = limits.check_auth(a).unwrap_err();
        assert!((1..=20).contains(&blocked.retry_after_secs), "{blocked:?}");
        assert!(limits.check_auth(b).is_ok(), "another address");
    }

    #[test]
    fn burst_then_refused_per_address() {
        let limits = RateLimits::new(&rates(Rate::PerSecond(10)));
        let a: IpAddr = "192.0.2.1".parse().unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let b: IpAddr = "192.0.2.2".parse().unwrap_or(IpAddr::from([0, 0, 0, 0]));
        for _ in 0..10 {
            assert!(limits.check_ip(Limit::NotFoundPerIp, a, 1).is_ok());
        }
        let refused = limits.check_ip(Limit::NotFoundPerIp, a, 1).unwrap_err();
        assert_eq!(refused.limit, Limit::NotFoundPerIp);
        assert_eq!(refused.retry_after_secs, 1);
        assert!(limits.check_ip(Limit::NotFoundPerIp, b, 1).is_ok());
        assert!(limits.check_ip(Limit::RedirectPerIp, a, 1).is_ok(), "off");
    }

    #[test]
    fn an_ipv6_network_is_one_key() {
        let limits = RateLimits::new(&rates(Rate::PerSecond(3)));
        let in_64 = |n: u16| IpAddr::from([0x2001, 0xdb8, 0xaaaa, 0xbbbb, 0, 0, 0, n]);
        for n in 1..=3 {
            assert!(limits.check_ip(Limit::NotFoundPerIp, in_64(n), 1).is_ok());
        }
        assert!(
            limits.check_ip(Limit::NotFoundPerIp, in_64(4), 1).is_err(),
            "a fresh address in the same /64 is the same client"
        );
        let next_64 = IpAddr::from([0x2001, 0xdb8, 0xaaaa, 0xbbbc, 0, 0, 0, 1]);
        assert!(limits.check_ip(Limit::NotFoundPerIp, next_64, 1).is_ok());
        // Failed credentials too.
        for n in 1..=3 {
            assert!(limits.auth_failed(in_64(100 + n)).is_ok());
        }
        assert!(limits.auth_failed(in_64(200)).is_err());
        assert!(limits.check_auth(in_64(300)).is_err());
        // A /128 prefix keys every address apart; IPv4 is always the address.
        let exact = RateLimits::new(&rates(Rate::PerSecond(1))).with_ipv6_prefix(128);
        assert!(exact.check_ip(Limit::NotFoundPerIp, in_64(1), 1).is_ok());
        assert!(exact.check_ip(Limit::NotFoundPerIp, in_64(2), 1).is_ok());
        assert_eq!(
            network(IpAddr::from([192, 0, 2, 7]), 64),
            IpAddr::from([192, 0, 2, 7])
        );
        assert_eq!(
            network("2001:db8:1:2:3:4:5:6".parse().unwrap_or(in_64(0)), 48),
            "2001:db8:1::".parse().unwrap_or(in_64(0))
        );
    }

    #[test]
    fn batches_count_every_item() {
        let limits = RateLimits::new(&rates(Rate::Off));
        assert!(limits.check_key("ops", 3).is_ok());
        assert!(limits.check_key("ops", 3).is_err(), "3 + 3 > 5");
        assert!(limits.check_key("ops", 2).is_ok());
        let too_big = limits.check_key("other", 6).unwrap_err();
        assert_eq!(too_big.retry_after_secs, 60);
    }

    #[test]
    fn memory_is_bounded() {
        let limits = RateLimits::with_capacity(&rates(Rate::PerHour(1)), 1000);
        for i in 0..20_000u32 {
            let _ = limits.check_ip(Limit::NotFoundPerIp, IpAddr::from(i.to_be_bytes()), 1);
        }
        let tracked = limits
            .not_found_per_ip
            .as_ref()
            .map_or(0, |l| l.inner_len());
        assert!(tracked <= 1000, "{tracked}");
    }
}
