//! The sign-in form (`POST /ui/login`, fields `email` and `password`) as the server reads it:
//! any body decodes to fields or is refused, the email and password checks answer without
//! panicking, and the per-account throttle takes any account name (an unknown email counts
//! like an account) without growing past its bound or refusing before its quota.
#![no_main]

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use vshortlink::accounts::people::{check_email, check_password};
use vshortlink::config::{Rate, RatesConfig};
use vshortlink::limits::RateLimits;
use vshortlink::model::account::email_key;

fn limits() -> &'static RateLimits {
    static LIMITS: OnceLock<RateLimits> = OnceLock::new();
    LIMITS.get_or_init(|| {
        let rates = RatesConfig {
            redirect_per_ip: Rate::Off,
            not_found_per_ip: Rate::Off,
            create_per_key: Rate::Off,
            create_per_ip: Rate::Off,
            login_per_ip: Rate::Off,
            auth_per_ip: Rate::Off,
            auth_per_account: Rate::PerHour(3),
            password_per_ip: Rate::Off,
            form_per_ip: Rate::Off,
        };
        RateLimits::with_capacity(&rates, 1024)
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(fields) = serde_urlencoded::from_bytes::<HashMap<String, String>>(data) else {
        return;
    };
    let email = fields.get("email").map_or("", String::as_str);
    let password = fields.get("password").map_or("", String::as_str);
    if let Ok(checked) = check_email(email) {
        assert_eq!(email_key(&checked), email_key(email));
        assert!(checked.contains('@'));
    }
    let _ = check_password(password, email, "password");
    let account = email_key(email);
    assert_eq!(email_key(&account), account, "the key of a key is itself");
    let ip = IpAddr::V4(Ipv4Addr::new(10, data.len() as u8, 0, 1));
    // A fresh account (never failed here) is never refused.
    let fresh = format!("{account}#{}", data.len());
    if limits().check_account(&fresh, ip).is_ok() {
        limits().account_failed(&fresh, ip);
    }
});
