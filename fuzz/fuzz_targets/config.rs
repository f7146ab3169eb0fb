//! Configuration: TOML text plus `VSL_*` environment pairs, layered over the embedded
//! defaults. Any input either loads (and validates) or is an error naming a key; never a panic.
//! Input: lines `KEY=VALUE` (the environment, without the `VSL_` prefix) up to a blank line,
//! then TOML.
#![no_main]

use figment::providers::{Env, Format, Toml};
use figment::Figment;
use libfuzzer_sys::fuzz_target;
use vshortlink::config::{Config, DEFAULT_TOML};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (env, toml) = text.split_once("\n\n").unwrap_or(("", text));
    let pairs: Vec<(String, String)> = env
        .lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, v)| !k.is_empty() && !k.contains(['\0', '=']) && !v.contains('\0'))
        .map(|(k, v)| (format!("VSL_{k}"), v.to_string()))
        .collect();
    // What `Config::load` checks first: a value figment cannot parse (it panicked on some,
    // see `config::check_env_value`) stops start-up with an error naming it.
    let pairs: Vec<(String, String)> = pairs
        .into_iter()
        .filter(|(k, v)| vshortlink::config::check_env_value(k, v).is_ok())
        .collect();
    // Single-threaded libFuzzer: the process environment is ours for the run.
    for (k, v) in &pairs {
        std::env::set_var(k, v);
    }
    let figment = Figment::from(Toml::string(DEFAULT_TOML))
        .merge(Toml::string(toml))
        .merge(Env::prefixed("VSL_").split("__"));
    if let Err(e) = Config::from_figment(figment) {
        assert!(!e.to_string().is_empty());
    }
    for (k, _) in &pairs {
        std::env::remove_var(k);
    }
});
