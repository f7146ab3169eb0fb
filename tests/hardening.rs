//! Hardening against the real binary (SPEC §12, §16): code order, base_url from `listen`, rate
//! limits, blocked hosts, robots.txt and previews, slow and huge clients.

mod common;

use common::{problem, TestApp, ADMIN};
use serde_json::json;

/// Twelve creates on a fresh server: the codes of one batch come out in no particular order.
#[test]
fn random_codes_do_not_come_out_sorted() {
    let app = TestApp::start();
    for length in [5, 6] {
        let codes: Vec<String> = (0..12)
            .map(|i| {
                let link = app.create(json!({
                    "url": format!("https://example.com/order/{length}/{i}"),
                    "length": length,
                }));
                link["code"].as_str().unwrap_or_default().to_string()
            })
            .collect();
        let mut sorted = codes.clone();
        sorted.sort();
        // 12 random draws sorted by chance: 1 in 12! (about 2e-9).
        assert_ne!(codes, sorted, "length {length}: {codes:?}");
        let first: std::collections::HashSet<char> =
            codes.iter().filter_map(|c| c.chars().next()).collect();
        assert!(first.len() > 1, "length {length}: {codes:?}");
    }
    // `step` keeps its designed order.
    let steps: Vec<String> = (0..6)
        .map(|i| {
            let link =
                app.create(json!({"url": format!("https://example.com/step/{i}"), "length": 4}));
            link["code"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    let mut sorted = steps.clone();
    sorted.sort();
    assert_eq!(steps, sorted, "step codes keep their order");
}

/// No `base_url`: short URLs and the loop check use the bound address.
#[test]
fn base_url_is_derived_from_the_bound_address() {
    let app = TestApp::start_with("", &[("VSL_SERVER__BASE_URL", "")]);
    let base = format!("http://{}", app.addr);
    assert!(
        app.logged(&format!("base_url={base}")),
        "start-up names the base"
    );
    let link = app.create(json!({"url": "https://example.com/b"}));
    let code = link["code"].as_str().unwrap_or_default();
    assert_eq!(link["short_url"], format!("{base}/{code}"));
    // A URL pointing back at this server (on its real port) is refused.
    let body = problem(
        app.post_json(
            "/api/v1/links",
            ADMIN,
            &json!({"url": format!("{base}/{code}")}),
        ),
        400,
    );
    assert_eq!(body["code"], "invalid_url");
    assert_eq!(body["field"], "url");
    // The same host on another port is someone else.
    let other = format!(
        "http://127.0.0.1:{}/x",
        app.addr.port().wrapping_add(1).max(1)
    );
    assert_eq!(
        app.post_json("/api/v1/links", ADMIN, &json!({"url": other}))
            .status(),
        201
    );
}
