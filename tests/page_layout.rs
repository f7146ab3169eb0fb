//! The working pages' layout on a phone, in a real headless Chromium: every page a signed-in
//! person uses (the home page and its result, the links, a busy link's page, the dashboard,
//! the reviews) is shown 360 CSS pixels wide in English and in Chinese, and must neither be
//! wider than the screen (`document.documentElement.scrollWidth` and the layout viewport ≤
//! 360: a mobile browser widens its viewport to a page that is too wide) nor taller than a
//! bound chosen per page (the link page of a busy link: at most 6 screens of 844 px).
//!
//! Needs `/usr/bin/chromium` and `/usr/bin/chromedriver` (or `CHROME` and `CHROMEDRIVER`), like
//! `tests/browser.rs`; without them it says so and passes, unless `REQUIRE_BROWSER=1`.

mod common;

use std::time::{Duration, Instant};

use common::chrome::{
    browser_or_skip, color_scheme, connect, element_after_navigation, Cdp, Driver,
};
use common::{TestApp, ADMIN};
use fantoccini::{Client, Locator};

/// The phone's width, in CSS pixels (the narrowest common phone).
const PHONE: u32 = 360;

/// Sets the window to `width` × `height` CSS pixels, as a phone when `width` is [`PHONE`].
async fn viewport(c: &Client, width: u32, height: u32) {
    c.issue_cmd(Cdp(
        "Emulation.setDeviceMetricsOverride",
        serde_json::json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width == PHONE }),
    ))
    .await
    .expect("device metrics");
}

/// The whole page (`height` tall, within bounds) as a PNG in `file`, then the window back at
/// `width` × `back` pixels.
async fn screenshot_whole(c: &Client, width: u32, height: f64, file: &std::path::Path, back: u32) {
    viewport(c, width, height.clamp(600.0, 6000.0) as u32).await;
    let png = c.screenshot().await.expect("screenshot");
    std::fs::write(file, &png).expect("write");
    viewport(c, width, back).await;
}

/// The page's width, the viewport's, and the page's height.
async fn measure(c: &Client) -> (f64, f64, f64) {
    let sizes = c
        .execute(
            "return [document.documentElement.scrollWidth, window.innerWidth, \
             document.documentElement.scrollHeight];",
            vec![],
        )
        .await
        .expect("sizes");
    let n = |i: usize| sizes[i].as_f64().expect("a number");
    (n(0), n(1), n(2))
}

/// The visible `<select>`s whose chosen option's text is wider than the room the select
/// gives it (the text is cut): each as `id: text (needs N px, has M px)`. The room is the
/// content box less the dropdown arrow's share.
async fn clipped_selects(c: &Client) -> Vec<String> {
    let found = c
        .execute(
            "const ctx = document.createElement('canvas').getContext('2d');              const out = [];              for (const s of document.querySelectorAll('select')) {                if (s.offsetParent === null) continue;                const o = s.options[s.selectedIndex]; if (!o) continue;                const st = getComputedStyle(s); ctx.font = st.font;                const need = ctx.measureText(o.text).width;                const room = s.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight) - 16;                if (need > room) out.push(`${s.id || s.name}: ${o.text} (needs ${Math.ceil(need)} px, has ${Math.floor(room)} px)`);              }              return out;",
            vec![],
        )
        .await
        .expect("selects");
    found
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The user agents of the busy link's visits: phones, tablets, desktops, an in-app browser, a
/// crawler.
const AGENTS: &[&str] = &[
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Edg/124.0",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Mobile Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 MicroMessenger/8.0.47(0x18002f2c) NetType/WIFI Language/zh_CN",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:125.0) Gecko/20100101 Firefox/125.0",
    "Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Mobile/15E148 Safari/604.1",
    "Googlebot/2.1 (+http://www.google.com/bot.html)",
];

const REFERERS: &[&str] = &[
    "https://www.google.com/",
    "https://mp.weixin.qq.com/s/abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz",
    "https://news.ycombinator.com/item?id=40000000",
];

#[test]
fn working_pages_fit_a_360_pixel_phone_in_both_languages() {
    let Some((driver_path, chrome)) = browser_or_skip() else {
        return;
    };
    let app = TestApp::start();
    // A busy link: a long URL, a title, tags, a cap, an end page, rules and targets, visits
    // from many browsers and places; and a page of other links with long URLs.
    app.create(serde_json::json!({
        "url": "https://www.example.com/products/spring-collection/catalogue-2026?utm_source=newsletter&utm_medium=email&utm_campaign=spring",
        "code": "spring",
        "title": "Spring collection 2026 — the catalogue for every store and every season",
        "tags": ["newsletter", "spring", "catalogue"],
        "max_visits": 5000,
        "fallback_url": "https://www.example.com/sold-out/and-a-long-path-after-it",
        "rules": [
            {"if": {"os": "ios", "language": "zh"}, "url": "https://www.example.com/cn/products/spring"},
            {"if": {"device": "mobile", "app": "wechat"}, "url": "https://www.example.com/wechat/landing-page-for-the-spring-collection"},
            {"if": {"country": "DE"}, "url": "https://www.example.de/fruehling"}
        ],
        "targets": [
            {"url": "https://a.example.com/spring/variant-a-with-a-long-path", "weight": 7},
            {"url": "https://b.example.com/spring/variant-b", "weight": 3, "max_visits": 1000}
        ],
        "rotation": "weighted"
    }));
    for i in 0..24 {
        app.create(serde_json::json!({
            "url": format!("https://docs.example.org/guides/section-{i}/a-rather-long-page-name-that-goes-on-and-on-{i}?ref=list&page={i}"),
            "title": if i % 3 == 0 { String::new() } else { format!("Guide {i}") },
            "tags": if i % 2 == 0 { vec!["docs"] } else { vec![] },
        }));
    }
    // A second domain with a long name: the list gets its domain filter and column.
    let domain = app.post_json(
        "/api/v1/domains",
        ADMIN,
        &serde_json::json!({"host": "go.a-rather-long-campaign-domain.example"}),
    );
    assert_eq!(domain.status(), 201);
    app.create(serde_json::json!({
        "url": "https://example.org/spring-sale",
        "domain": "go.a-rather-long-campaign-domain.example",
    }));
    let visits = 120;
    for n in 0..visits {
        let _ = app
            .req(reqwest::Method::GET, "/spring", None)
            .header("user-agent", AGENTS[n % AGENTS.len()])
            .header("referer", REFERERS[n % REFERERS.len()])
            .header("accept-language", if n % 2 == 0 { "zh-CN" } else { "en" })
            .send()
            .expect("visit");
    }
    // The visits are written in the background.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stats = app.api_get("/api/v1/links/spring/stats", ADMIN);
        if stats["total"].as_u64().unwrap_or(0) >= visits as u64 {
            break;
        }
        assert!(Instant::now() < deadline, "visits not counted: {stats}");
        std::thread::sleep(Duration::from_millis(100));
    }

    let driver = Driver::start(&driver_path);
    let profile = tempfile::tempdir().expect("profile dir");
    let base = format!("http://{}", app.addr);
    // (page, path, the tallest it may be at 360 px in either language). The link page gets
    // 6 screens of 844 px; the list holds 26 links, each with its domain's line.
    let pages: &[(&str, &str, f64)] = &[
        ("home", "/", 1200.0),
        ("result", "/", 1800.0),
        ("links", "/ui/links", 6200.0),
        ("link", "/ui/links/spring?range=30d", 6.0 * 844.0),
        ("dashboard", "/ui/dashboard", 2400.0),
        ("reviews", "/ui/reviews", 1200.0),
    ];
    let shots = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let failures = runtime.block_on(async {
        let c = connect(&driver, &chrome, profile.path()).await;
        c.set_window_size(1280, 900).await.expect("size");
        c.goto(&format!("{base}/ui/login?next=%2F")).await.expect("login");
        c.find(Locator::Id("key")).await.expect("key").send_keys(ADMIN).await.expect("type");
        c.find(Locator::Css("#key-form button.primary")).await.expect("button").click().await.expect("sign in");
        c.wait().for_element(Locator::Id("url")).await.expect("signed in");
        viewport(&c, PHONE, 780).await;
        let mut failures = Vec::new();
        for lang in ["en", "zh-CN"] {
            c.goto(&format!("{base}/ui/lang?set={lang}&back=%2F")).await.expect("language");
            for (name, path, tallest) in pages {
                c.goto(&format!("{base}{path}")).await.expect("page");
                if *name == "result" {
                    let url = c.wait().for_element(Locator::Id("url")).await.expect("url field");
                    url.send_keys("https://www.example.com/a/very/long/path/to/the/spring-catalogue-2026?utm_source=newsletter&utm_medium=email")
                        .await
                        .expect("type");
                    c.find(Locator::Css("form.shorten button.primary")).await.expect("shorten").click().await.expect("click");
                    c.wait().for_element(Locator::Css(".result")).await.expect("the result");
                }
                let (width, viewport, height) = measure(&c).await;
                eprintln!("{lang:5} {name:9} {width} / {viewport} px wide, {height} px tall (at most {tallest})");
                // A mobile browser widens its layout viewport to a page that is too wide (and
                // shrinks the text): the page must fit the phone's own width.
                let screen = f64::from(PHONE);
                if width > screen || viewport > screen {
                    failures.push(format!("{lang} {name}: {width} px wide (viewport {viewport}) on a {screen}-px screen"));
                }
                if height > *tallest {
                    failures.push(format!("{lang} {name}: {height} px tall, more than {tallest}"));
                }
                for select in clipped_selects(&c).await {
                    eprintln!("{lang:5} {name:9} a select cut: {select}");
                    failures.push(format!("{lang} {name}: a select's text is cut: {select}"));
                }
                if *name == "links" {
                    // The list with a second domain (its filter and column), whole.
                    screenshot_whole(&c, PHONE, height, &shots.join(format!("layout-phone-links-domains-{lang}.png")), 780).await;
                }
            }
        }
        c.close().await.expect("close");
        failures
    });
    assert!(
        failures.is_empty(),
        "pages that do not fit a phone:\n{}",
        failures.join("\n")
    );
}

/// The people pages (sign-in, account with a new key, users, teams, a team, the audit log) as
/// an admin who signed in with a password: at 360 px in both languages they must fit the
/// phone, and each is screenshotted, phone and desktop, into
/// `target/tmp/screenshots/people-*.png` (look at them).
#[test]
fn people_pages_fit_a_phone_and_are_screenshotted() {
    let Some((driver_path, chrome)) = browser_or_skip() else {
        return;
    };
    // A plan with every quota, so that the team page shows its usage bars.
    let app = TestApp::start_with(
        "[plans.business]\nlinks_per_month = 40\nactive_links = 16\nvisits_per_month = 5000\n",
        &[],
    );
    let user = |email: &str, name: &str, role: &str| -> String {
        let response = app.post_json(
            "/api/v1/users",
            ADMIN,
            &serde_json::json!({"email": email, "name": name, "password": "a-long-password-01", "role": role}),
        );
        assert_eq!(response.status(), 201);
        let body: serde_json::Value = response.json().expect("user");
        body["id"].as_str().expect("id").to_string()
    };
    user("grace.hopper@example.com", "Grace Hopper", "admin");
    let ids: Vec<String> = [
        ("li.wei@example.cn", "李伟"),
        (
            "ada.lovelace.with.a.long.address@analytical-engines.example.org",
            "Ada Lovelace",
        ),
        ("ken@example.com", ""),
    ]
    .iter()
    .map(|(e, n)| user(e, n, "member"))
    .collect();
    for (slug, name, plan) in [
        (
            "marketing",
            "Marketing and communications",
            Some("business"),
        ),
        ("research", "Research", None),
    ] {
        let made = app.post_json(
            "/api/v1/teams",
            ADMIN,
            &serde_json::json!({"slug": slug, "name": name, "plan": plan}),
        );
        assert_eq!(made.status(), 201, "team {slug}");
    }
    // Some use of the plan, for the bars: 12 of 40 links this month, 12 of 16 active.
    let links: Vec<_> = (0..12)
        .map(|i| serde_json::json!({"url": format!("https://example.com/campaign/{i}"), "space": "marketing"}))
        .collect();
    let batch = app.post_json(
        "/api/v1/links/batch",
        ADMIN,
        &serde_json::json!({ "links": links }),
    );
    assert!(batch.status().is_success(), "{}", batch.status());
    for (id, role) in ids.iter().zip(["owner", "editor", "viewer"]) {
        let put = app
            .req(
                reqwest::Method::PUT,
                &format!("/api/v1/teams/marketing/members/{id}"),
                Some(ADMIN),
            )
            .json(&serde_json::json!({"role": role}))
            .send()
            .expect("member");
        assert_eq!(put.status(), 200);
    }
    let driver = Driver::start(&driver_path);
    let profile = tempfile::tempdir().expect("profile dir");
    let shots = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let base = format!("http://{}", app.addr);
    let pages: &[(&str, &str, f64)] = &[
        ("login", "/ui/login", 1400.0),
        ("account", "/ui/account", 2600.0),
        ("new-key", "/ui/account", 3000.0),
        ("users", "/ui/admin/users", 3600.0),
        ("teams", "/ui/teams", 1800.0),
        ("team", "/ui/teams/marketing", 2800.0),
        ("audit", "/ui/admin/audit", 5200.0),
        ("domains", "/ui/domains", 3000.0),
    ];
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let failures = runtime.block_on(async {
        let c = connect(&driver, &chrome, profile.path()).await;
        let mut failures = Vec::new();
        // Desktop light, phone dark: both schemes are looked at.
        for (device, width) in [("desktop", 1280u32), ("phone", PHONE)] {
            let scheme = if width == PHONE { "dark" } else { "light" };
            c.issue_cmd(color_scheme(scheme))
                .await
                .expect("colour scheme");
            for lang in ["en", "zh-CN"] {
                viewport(&c, width, 800).await;
                c.goto(&format!("{base}/ui/lang?set={lang}&back=%2F"))
                    .await
                    .expect("language");
                for (name, path, tallest) in pages {
                    if *name == "login" {
                        // Signed out for the sign-in page, then signed in with the password.
                        let _ = c.delete_all_cookies().await;
                        c.goto(&format!("{base}/ui/lang?set={lang}&back=%2F"))
                            .await
                            .expect("language");
                    }
                    if *name == "account" {
                        c.find(Locator::Id("email"))
                            .await
                            .expect("email")
                            .send_keys("grace.hopper@example.com")
                            .await
                            .expect("type");
                        c.find(Locator::Id("password"))
                            .await
                            .expect("password")
                            .send_keys("a-long-password-01")
                            .await
                            .expect("type");
                        c.find(Locator::Css("#password-form button"))
                            .await
                            .expect("button")
                            .click()
                            .await
                            .expect("sign in");
                        element_after_navigation(&c, Locator::Css("form.filters")).await;
                    }
                    c.goto(&format!("{base}{path}")).await.expect("page");
                    if *name == "new-key" {
                        c.find(Locator::Id("key-name"))
                            .await
                            .expect("key name")
                            .send_keys("deploy script")
                            .await
                            .expect("type");
                        c.find(Locator::Css(".key-form button.primary"))
                            .await
                            .expect("make")
                            .click()
                            .await
                            .expect("click");
                        element_after_navigation(&c, Locator::Id("new-key")).await;
                    }
                    let (w, viewport, height) = measure(&c).await;
                    eprintln!(
                        "{device:7} {lang:5} {name:8} {w} / {viewport} px wide, {height} px tall"
                    );
                    if width == PHONE && (w > f64::from(PHONE) || viewport > f64::from(PHONE)) {
                        failures.push(format!("{lang} {name}: {w} px wide (viewport {viewport})"));
                    }
                    if width == PHONE && height > *tallest {
                        failures.push(format!(
                            "{lang} {name}: {height} px tall, more than {tallest}"
                        ));
                    }
                    for select in clipped_selects(&c).await {
                        eprintln!("{device:7} {lang:5} {name:8} a select cut: {select}");
                        if width == PHONE {
                            failures
                                .push(format!("{lang} {name}: a select's text is cut: {select}"));
                        }
                    }
                    // The whole page in the screenshot.
                    screenshot_whole(
                        &c,
                        width,
                        height,
                        &shots.join(format!("people-{device}-{name}-{lang}.png")),
                        800,
                    )
                    .await;
                }
            }
        }
        // The other scheme of each device, for the newest page (still signed in).
        for (device, width, scheme) in [("desktop", 1280u32, "dark"), ("phone", PHONE, "light")] {
            c.issue_cmd(color_scheme(scheme))
                .await
                .expect("colour scheme");
            for lang in ["en", "zh-CN"] {
                c.goto(&format!("{base}/ui/lang?set={lang}&back=%2F"))
                    .await
                    .expect("language");
                viewport(&c, width, 800).await;
                c.goto(&format!("{base}/ui/domains")).await.expect("page");
                let (_, _, height) = measure(&c).await;
                screenshot_whole(
                    &c,
                    width,
                    height,
                    &shots.join(format!("people-{device}-{scheme}-domains-{lang}.png")),
                    800,
                )
                .await;
            }
        }
        c.close().await.expect("close");
        failures
    });
    eprintln!("screenshots in {}", shots.display());
    assert!(
        failures.is_empty(),
        "people pages that do not fit a phone:\n{}",
        failures.join("\n")
    );
}
