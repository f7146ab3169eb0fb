//! Measures the memory of the rate limiters' per-key state (README "Abuse controls"): fills
//! every address limit with `limits::MAX_TRACKED_KEYS * ROUNDS` distinct addresses and
//! `create_per_key` with as many key names, and prints the resident-set growth, which must stop
//! growing once each limit holds its bound. Linux only (reads /proc/self/status).
//! Usage: `cargo run --release --example limiter_memory [ROUNDS]` (default 4).

use std::net::IpAddr;

use vshortlink::config::{Rate, RatesConfig};
use vshortlink::limits::{Limit, RateLimits, MAX_TRACKED_KEYS};

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let rates = RatesConfig {
        redirect_per_ip: Rate::PerHour(1),
        not_found_per_ip: Rate::PerHour(1),
        create_per_key: Rate::PerHour(1),
        create_per_ip: Rate::PerHour(1),
        // Off: the README's figure is for the four limits above.
        login_per_ip: Rate::Off,
        auth_per_ip: Rate::Off,
        auth_per_account: Rate::Off,
        password_per_ip: Rate::Off,
        form_per_ip: Rate::Off,
    };
    let limits = RateLimits::new(&rates);
    let before = rss_kb();
    let mut after_bound = 0;
    let rounds: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(4);
    let total = MAX_TRACKED_KEYS as u32 * rounds;
    for i in 0..total {
        let ip = IpAddr::from(i.wrapping_mul(2_654_435_761).to_be_bytes());
        for limit in [
            Limit::NotFoundPerIp,
            Limit::RedirectPerIp,
            Limit::CreatePerIp,
        ] {
            let _ = limits.check_ip(limit, ip, 1);
        }
        let _ = limits.check_key(&format!("key-{i}"), 1);
        if i + 1 == MAX_TRACKED_KEYS as u32 {
            after_bound = rss_kb();
        }
    }
    let end = rss_kb();
    println!(
        "4 limits x {MAX_TRACKED_KEYS} keys: +{} kB RSS ({} B per entry); after {total} keys each: +{} kB",
        after_bound.saturating_sub(before),
        after_bound.saturating_sub(before) * 1024 / (4 * MAX_TRACKED_KEYS as u64),
        end.saturating_sub(before)
    );
}
