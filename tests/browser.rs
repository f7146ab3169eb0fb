//! End to end in a real headless Chromium driven over WebDriver (chromedriver + fantoccini):
//! a person signs in with a key, shortens a URL through the form, opens the short link, sees
//! the visit on the link's statistics page, edits its title, deletes it and sees 410. Then
//! every page is screenshotted at desktop and phone widths, light and dark, into
//! `target/tmp/screenshots/` (look at them).
//!
//! Needs `/usr/bin/chromium` and `/usr/bin/chromedriver` (Debian `chromium`,
//! `chromium-driver`; `.ci/run` installs them), or `CHROME` and `CHROMEDRIVER`. Without them the
//! test says so and passes, unless `REQUIRE_BROWSER=1` (set by CI), where it fails.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::chrome::{browser_or_skip, color_scheme, connect, Cdp, Driver};
use common::{TestApp, ADMIN};
use fantoccini::{Client, Locator};

/// A stand-in for the site a short link leads to.
fn target_site() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let body = "<!doctype html><title>Landing</title><h1>The landing page</h1>";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}/landing?campaign=browser")
}

/// Waits until the browser is at a URL whose path and query start with `prefix`.
async fn wait_for_path(c: &Client, prefix: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let url = c.current_url().await.expect("url");
        let here = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        };
        if here.starts_with(prefix) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still at {here}, waited for {prefix}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Saves a screenshot of the whole page as it is now; returns its mean luminance (0–255).
async fn shot(c: &Client, dir: &Path, name: &str) -> f64 {
    // Grow the window to the page's height so the screenshot holds all of it.
    let sizes = c
        .execute(
            "return [document.documentElement.scrollHeight, window.innerHeight, \
             window.outerHeight, window.outerWidth];",
            vec![],
        )
        .await
        .ok()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default();
    let n = |i: usize| sizes.get(i).and_then(|v| v.as_f64()).unwrap_or(0.0);
    let (page, inner, outer, width) = (n(0), n(1), n(2), n(3));
    if page > inner {
        let height = (page + outer - inner).clamp(600.0, 6000.0);
        c.set_window_size(width as u32, height as u32)
            .await
            .expect("resize");
    }
    let png = c.screenshot().await.expect("screenshot");
    std::fs::write(dir.join(format!("{name}.png")), &png).expect("write screenshot");
    luminance(&png)
}

fn luminance(png_bytes: &[u8]) -> f64 {
    let decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    let mut reader = decoder.read_info().expect("png");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("frame");
    let step = info.color_type.samples();
    let pixels = &buf[..info.buffer_size()];
    let (mut sum, mut n) = (0f64, 0f64);
    for px in pixels.chunks(step).step_by(97) {
        if px.len() >= 3 {
            sum += 0.299 * px[0] as f64 + 0.587 * px[1] as f64 + 0.114 * px[2] as f64;
            n += 1.0;
        }
    }
    sum / n.max(1.0)
}

async fn text_of(c: &Client, css: &str) -> String {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .text()
        .await
        .expect("text")
}

#[test]
fn a_person_signs_in_shortens_visits_edits_and_deletes_in_chromium() {
    let Some((driver_path, chrome)) = browser_or_skip() else {
        return;
    };
    let target = target_site();
    let app = TestApp::start();
    let driver = Driver::start(&driver_path);
    let profile = tempfile::tempdir().expect("profile dir");
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let base = format!("http://{}", app.addr);

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (code, live) = runtime.block_on(async {
        let c = connect(&driver, &chrome, profile.path()).await;
        c.set_window_size(1280, 900).await.expect("size");

        // Sign in with a key.
        c.goto(&format!("{base}/")).await.expect("home");
        assert!(text_of(&c, "main").await.contains("Sign in to shorten"));
        c.goto(&format!("{base}/ui/login?next=%2F")).await.expect("login");
        c.find(Locator::Id("key")).await.expect("key field").send_keys(ADMIN).await.expect("type");
        c.find(Locator::Css("#key-form button.primary")).await.expect("button").click().await.expect("sign in");
        // Signed in, back on `/` (every path starts with `/`: wait for the form itself).
        let url = c.wait().for_element(Locator::Id("url")).await.expect("url field");
        url.send_keys(&target).await.expect("type url");
        c.find(Locator::Css("form.shorten button.primary")).await.expect("shorten").click().await.expect("click");
        let short = c.wait().for_element(Locator::Id("short")).await.expect("the result");
        let short_url = short.prop("value").await.expect("value").expect("a short URL");
        let code = short_url.rsplit('/').next().expect("code").to_string();
        assert!(!code.is_empty());
        let copy = c.find(Locator::Css("button.copy")).await.expect("copy button");
        assert!(copy.is_displayed().await.expect("displayed"), "the script runs under the CSP");
        c.find(Locator::Css("details.more summary")).await.expect("more").click().await.expect("open");
        shot(&c, &shots, "desktop-light-home-result").await;

        // Open the short link: the browser lands on the target.
        c.goto(&format!("{base}/{code}")).await.expect("short link");
        wait_for_path(&c, "/landing").await;
        assert_eq!(text_of(&c, "h1").await, "The landing page");

        // The visit shows on the link's page.
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            c.goto(&format!("{base}/ui/links/{code}?range=24h")).await.expect("link page");
            // The latest visits are folded under their count: open them.
            c.find(Locator::Css("#visits > summary")).await.expect("visits").click().await.expect("open");
            let rows = c.find_all(Locator::Css("#visits li")).await.expect("rows");
            if !rows.is_empty() {
                let row = rows[0].text().await.expect("row");
                assert!(row.contains("Chrom"), "the visit's browser: {row}");
                break;
            }
            assert!(Instant::now() < deadline, "the visit never showed");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(text_of(&c, ".stats").await.contains('1'));

        // Edit its title.
        let title = c.find(Locator::Id("e-title")).await.expect("title field");
        title.clear().await.expect("clear");
        title.send_keys("Edited in a browser").await.expect("type title");
        // One Save for the link and its options, at the end of the editor.
        c.find(Locator::Css(".save-bar button.primary")).await.expect("save").click().await.expect("save");
        wait_for_path(&c, &format!("/ui/links/{code}?notice=saved")).await;
        assert!(text_of(&c, ".link-head").await.contains("Edited in a browser"));

        // Delete it, confirming.
        c.find(Locator::Css(".danger-zone summary")).await.expect("delete").click().await.expect("open");
        c.find(Locator::Css(".danger-zone button.danger")).await.expect("confirm").click().await.expect("confirm");
        wait_for_path(&c, "/ui/links?notice=deleted").await;

        // The short link is gone: 410 page.
        c.goto(&format!("{base}/{code}")).await.expect("gone");
        assert_eq!(text_of(&c, "h1").await, "Link no longer available");

        // Material for the screenshots: many at once, and a link with visits.
        c.goto(&format!("{base}/?mode=many")).await.expect("many");
        let urls = format!("{target}&n=1\nhttps://example.com/docs/getting-started\nnot a url\nhttps://example.org/news/2026/11/a-rather-long-article-title-that-goes-on");
        c.find(Locator::Id("urls")).await.expect("urls").send_keys(&urls).await.expect("type");
        c.find(Locator::Css("form.shorten button.primary")).await.expect("shorten all").click().await.expect("click");
        c.wait().for_element(Locator::Css("tr.failed")).await.expect("results");
        let many_result = shot(&c, &shots, "desktop-light-home-many-result").await;
        assert!(many_result > 150.0);
        // The first line leads to the stand-in site: visit it, for a page with visits.
        let first = c.find(Locator::Css("tbody tr td a")).await.expect("a result");
        let live = first.text().await.expect("short URL");
        let live = live.rsplit('/').next().expect("code").to_string();
        c.goto(&format!("{base}/{live}")).await.expect("visit");
        wait_for_path(&c, "/landing").await;
        c.close().await.expect("close");
        (code, live)
    });

    // Both languages and schemes, two widths: every page.
    let pages = [
        ("login", "/ui/login".to_string()),
        ("home", "/".to_string()),
        ("links", "/ui/links".to_string()),
        ("link", format!("/ui/links/{live}?range=24h")),
        ("dashboard", "/ui/dashboard".to_string()),
        ("404", "/nosuch".to_string()),
        ("410", format!("/{code}")),
        ("preview", format!("/{live}+")),
    ];
    runtime.block_on(async {
        let c = connect(&driver, &chrome, profile.path()).await;
        for (scheme, width) in [
            ("light", 1280),
            ("dark", 1280),
            ("light", 390),
            ("dark", 390),
        ] {
            c.issue_cmd(color_scheme(scheme))
                .await
                .expect("colour scheme");
            c.set_window_size(width, 900).await.expect("size");
            let device = if width > 600 { "desktop" } else { "phone" };
            for (name, path) in &pages {
                c.set_window_size(width, 900).await.expect("size");
                c.goto(&format!("{base}{path}")).await.expect("page");
                let lum = shot(&c, &shots, &format!("{device}-{scheme}-{name}")).await;
                if scheme == "dark" {
                    assert!(lum < 110.0, "{device} {name} is dark ({lum})");
                } else {
                    assert!(lum > 150.0, "{device} {name} is light ({lum})");
                }
            }
        }
        c.goto(&format!("{base}/ui/lang?set=zh-CN&back=%2F"))
            .await
            .expect("zh");
        c.issue_cmd(color_scheme("light")).await.expect("light");
        c.set_window_size(1280, 900).await.expect("size");
        assert!(text_of(&c, "h1").await.contains("长网址"));
        // Every page again in Chinese, desktop light and phone dark.
        for (scheme, width) in [("light", 1280), ("dark", 390)] {
            c.issue_cmd(color_scheme(scheme))
                .await
                .expect("colour scheme");
            let device = if width > 600 { "desktop" } else { "phone" };
            for (name, path) in &pages {
                c.set_window_size(width, 900).await.expect("size");
                c.goto(&format!("{base}{path}")).await.expect("page");
                let lang = c
                    .find(Locator::Css("html"))
                    .await
                    .expect("html")
                    .attr("lang")
                    .await
                    .expect("lang");
                assert_eq!(lang.as_deref(), Some("zh-CN"), "{name}");
                shot(&c, &shots, &format!("{device}-{scheme}-{name}-zh")).await;
            }
        }
        c.close().await.expect("close");
    });
    eprintln!("screenshots in {}", shots.display());
    assert_eq!(app.get(&format!("/{code}")).status(), 410);
}

/// A phone's screen, `width` CSS pixels wide (a headless window is at least 500 wide, so the
/// page is shown as a phone shows it instead); `None` for the window itself again.
async fn emulate_phone(c: &Client, width: Option<u32>) {
    let command = match width {
        Some(w) => Cdp(
            "Emulation.setDeviceMetricsOverride",
            serde_json::json!({ "width": w, "height": 780, "deviceScaleFactor": 1, "mobile": true }),
        ),
        None => Cdp(
            "Emulation.clearDeviceMetricsOverride",
            serde_json::json!({}),
        ),
    };
    c.issue_cmd(command).await.expect("device metrics");
}

/// Saves a screenshot of the whole page at the emulated width (see [`emulate_phone`]);
/// returns its mean luminance (0–255).
async fn phone_shot(c: &Client, dir: &Path, name: &str, width: u32) -> f64 {
    let height = c
        .execute("return document.documentElement.scrollHeight;", vec![])
        .await
        .ok()
        .and_then(|v| v.as_f64())
        .unwrap_or(780.0);
    c.issue_cmd(Cdp(
        "Emulation.setDeviceMetricsOverride",
        serde_json::json!({ "width": width, "height": height.min(12000.0) as u32, "deviceScaleFactor": 1, "mobile": true }),
    ))
    .await
    .expect("device metrics");
    let png = c.screenshot().await.expect("screenshot");
    std::fs::write(dir.join(format!("{name}.png")), &png).expect("write screenshot");
    emulate_phone(c, Some(width)).await;
    luminance(&png)
}

/// The page's width against the window's: a page that is wider scrolls sideways.
async fn sideways_overflow(c: &Client) -> (f64, f64) {
    let sizes = c
        .execute(
            "return [document.documentElement.scrollWidth, window.innerWidth];",
            vec![],
        )
        .await
        .expect("sizes");
    let n = |i: usize| sizes[i].as_f64().expect("a number");
    (n(0), n(1))
}

#[test]
fn a_person_sets_rules_and_targets_on_a_link_page_and_visitors_follow_them_in_chromium() {
    let Some((driver_path, chrome)) = browser_or_skip() else {
        return;
    };
    let app = TestApp::start();
    let link = app.create(serde_json::json!({ "url": "https://example.com/plain" }));
    let code = link["code"].as_str().expect("code").to_string();
    let driver = Driver::start(&driver_path);
    let profile = tempfile::tempdir().expect("profile dir");
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let base = format!("http://{}", app.addr);
    let (ios, zh) = ("https://ios.example/app", "https://zh.example/");
    let targets = [
        "https://one.example/",
        "https://two.example/",
        "https://three.example/",
    ];

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let c = runtime.block_on(async {
        let c = connect(&driver, &chrome, profile.path()).await;
        c.set_window_size(1280, 900).await.expect("size");
        c.goto(&format!("{base}/ui/login?next=%2Fui%2Flinks%2F{code}"))
            .await
            .expect("login");
        c.find(Locator::Id("key"))
            .await
            .expect("key")
            .send_keys(ADMIN)
            .await
            .expect("type");
        c.find(Locator::Css("#key-form button.primary"))
            .await
            .expect("button")
            .click()
            .await
            .expect("sign in");
        wait_for_path(&c, &format!("/ui/links/{code}")).await;
        let click = |css: String| {
            let c = c.clone();
            async move {
                c.find(Locator::Css(&css))
                    .await
                    .unwrap_or_else(|e| panic!("{css}: {e}"))
                    .click()
                    .await
                    .unwrap_or_else(|e| panic!("click {css}: {e}"));
            }
        };
        let type_in = |id: String, text: String| {
            let c = c.clone();
            async move {
                let field = c
                    .find(Locator::Id(&id))
                    .await
                    .unwrap_or_else(|e| panic!("#{id}: {e}"));
                field.clear().await.expect("clear");
                field.send_keys(&text).await.expect("type");
            }
        };

        // Two rules: iOS first, then Chinese.
        assert!(text_of(&c, "#rules").await.contains("No rules"));
        click("#rules button[value='add_rule']".into()).await;
        click("#rule-0-os-ios".into()).await;
        type_in("rule-0-url".into(), ios.into()).await;
        click("#rules button[value='add_rule']".into()).await;
        type_in("rule-1-language".into(), "zh".into()).await;
        type_in("rule-1-url".into(), zh.into()).await;
        // A third, removed again; the second moved up and back.
        click("#rules button[value='add_rule']".into()).await;
        type_in("rule-2-country".into(), "DE".into()).await;
        click("#rules button[value='remove_rule.2']".into()).await;
        click("#rules button[value='up_rule.1']".into()).await;
        assert_eq!(
            c.find(Locator::Id("rule-0-language"))
                .await
                .expect("moved")
                .prop("value")
                .await
                .expect("value")
                .as_deref(),
            Some("zh"),
            "the Chinese rule moved up"
        );
        click("#rules button[value='down_rule.0']".into()).await;
        // Three targets, weighted.
        for (i, url) in targets.iter().enumerate() {
            click("#targets button[value='add_target']".into()).await;
            type_in(format!("target-{i}-url"), url.to_string()).await;
        }
        type_in("target-2-weight".into(), "3".into()).await;
        click("#access > summary".into()).await;
        type_in("o-max_visits".into(), "1000".into()).await;
        type_in("o-fallback_url".into(), "https://example.com/ended".into()).await;
        click(".save-bar button.primary".into()).await;
        wait_for_path(&c, &format!("/ui/links/{code}?notice=saved")).await;
        assert!(text_of(&c, ".notice").await.contains("Saved."));
        let checked = c
            .find(Locator::Id("rule-0-os-ios"))
            .await
            .expect("box")
            .prop("checked")
            .await
            .expect("checked");
        assert_eq!(
            checked.as_deref(),
            Some("true"),
            "the saved rule is shown again"
        );
        assert_eq!(
            c.find(Locator::Id("target-2-weight"))
                .await
                .expect("weight")
                .prop("value")
                .await
                .expect("value")
                .as_deref(),
            Some("3")
        );
        // A weight out of range: the page comes back with the error beside it, every value
        // kept, and nothing is saved (the API below still says 3).
        // Saved rules and targets fold to one line each: open them to edit.
        click("#target-2 > summary".into()).await;
        type_in("target-2-weight".into(), "5000".into()).await;
        click("#rule-1 > summary".into()).await;
        type_in("rule-1-language".into(), "zh".into()).await;
        click(".save-bar button.primary".into()).await;
        let error = c
            .wait()
            .for_element(Locator::Css("[id='target.2.weight-error']"))
            .await
            .expect("the weight's error");
        assert!(error.text().await.expect("text").contains("1 to 1000"));
        assert_eq!(
            c.find(Locator::Id("target-2-weight"))
                .await
                .expect("weight")
                .prop("value")
                .await
                .expect("value")
                .as_deref(),
            Some("5000")
        );
        shot(&c, &shots, "desktop-light-link-options-error").await;
        emulate_phone(&c, Some(360)).await;
        let (page, window) = sideways_overflow(&c).await;
        assert!(
            page <= window,
            "with an error the page is {page} px wide in {window}"
        );
        phone_shot(&c, &shots, "phone-light-link-options-error", 360).await;
        emulate_phone(&c, None).await;
        c
    });

    let api: serde_json::Value = app.api_get(&format!("/api/v1/links/{code}"), ADMIN);
    assert_eq!(
        api["rules"],
        serde_json::json!([
            { "if": { "os": ["ios"] }, "url": ios },
            { "if": { "language": ["zh"] }, "url": zh },
        ])
    );
    assert_eq!(api["targets"].as_array().map(Vec::len), Some(3));
    assert_eq!(api["targets"][2]["weight"], 3);
    assert_eq!(api["rotation"], "weighted");
    assert_eq!(api["max_visits"], 1000);

    // Visitors follow the rules, and the rest the targets.
    let iphone = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1";
    let desktop = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36";
    let follow = |headers: &[(&str, &str)]| {
        let mut request = app.client.get(app.url(&format!("/{code}")));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().expect("redirect");
        assert_eq!(response.status(), 302, "{headers:?}");
        response.headers()["location"]
            .to_str()
            .expect("location")
            .to_string()
    };
    assert_eq!(follow(&[("user-agent", iphone)]), ios);
    assert_eq!(
        follow(&[
            ("user-agent", desktop),
            ("accept-language", "zh-CN,zh;q=0.9")
        ]),
        zh
    );
    let rest = follow(&[("user-agent", desktop), ("accept-language", "en-US")]);
    assert!(targets.contains(&rest.as_str()), "a target: {rest}");

    runtime.block_on(async {
        // The destinations table counts them, once recorded.
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            c.goto(&format!("{base}/ui/links/{code}?range=24h"))
                .await
                .expect("page");
            let rows = c
                .find_all(Locator::Css("#destinations li"))
                .await
                .expect("rows");
            if rows.len() == 3 {
                break;
            }
            assert!(Instant::now() < deadline, "the destinations never showed");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Folded under their count: open them.
        c.find(Locator::Css("#destinations > summary"))
            .await
            .expect("destinations")
            .click()
            .await
            .expect("open");
        let table = text_of(&c, "#destinations").await;
        assert!(table.contains("Rule 1") && table.contains("Rule 2") && table.contains(ios));
        // The list marks the link's options.
        c.goto(&format!("{base}/ui/links")).await.expect("list");
        let markers = text_of(&c, ".markers").await;
        shot(&c, &shots, "desktop-light-links-markers").await;
        assert!(
            markers.contains("rules")
                && markers.contains("targets")
                && markers.contains("visit cap"),
            "{markers}"
        );

        // Screenshots of the page with its options, desktop and a 360-pixel phone, both
        // languages; nothing may make the phone's page wider than the screen.
        for (lang, suffix) in [("en", ""), ("zh-CN", "-zh")] {
            c.goto(&format!("{base}/ui/lang?set={lang}&back=%2F"))
                .await
                .expect("lang");
            c.set_window_size(1280, 900).await.expect("size");
            c.goto(&format!("{base}/ui/links/{code}?range=24h"))
                .await
                .expect("page");
            let (page, window) = sideways_overflow(&c).await;
            assert!(
                page <= window,
                "desktop{suffix}: the page is {page} px wide in {window}"
            );
            shot(&c, &shots, &format!("desktop-light-link-options{suffix}")).await;
            emulate_phone(&c, Some(360)).await;
            c.goto(&format!("{base}/ui/links/{code}?range=24h"))
                .await
                .expect("page");
            let (page, window) = sideways_overflow(&c).await;
            assert_eq!(window, 360.0, "a phone's width");
            assert!(
                page <= window,
                "phone{suffix}: the page is {page} px wide in {window}"
            );
            phone_shot(
                &c,
                &shots,
                &format!("phone-light-link-options{suffix}"),
                360,
            )
            .await;
            emulate_phone(&c, None).await;
        }
        // And dark.
        c.issue_cmd(color_scheme("dark")).await.expect("dark");
        emulate_phone(&c, Some(360)).await;
        c.goto(&format!("{base}/ui/links/{code}?range=24h"))
            .await
            .expect("page");
        let lum = phone_shot(&c, &shots, "phone-dark-link-options-zh", 360).await;
        assert!(lum < 110.0, "the phone's page is dark ({lum})");
        emulate_phone(&c, None).await;
        c.close().await.expect("close");
    });
    eprintln!("screenshots in {}", shots.display());
}

#[test]
fn a_visitor_fills_the_form_before_the_link_and_an_in_app_visitor_is_shown_the_way_out_in_chromium()
{
    let Some((driver_path, chrome)) = browser_or_skip() else {
        return;
    };
    let target = target_site();
    let app = TestApp::start();
    let link = app.create(serde_json::json!({
        "url": target,
        "form": {
            "fields": [{ "name": "phone", "label": "Phone number", "type": "tel", "required": true }],
            "consent": "I agree to be called about this offer.",
        },
        "in_app": "interstitial",
    }));
    let code = link["code"].as_str().expect("code").to_string();
    let driver = Driver::start(&driver_path);
    let profile = tempfile::tempdir().expect("profile dir");
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let base = format!("http://{}", app.addr);

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let c = connect(&driver, &chrome, profile.path()).await;
        c.set_window_size(1280, 900).await.expect("size");

        // The short link shows the form.
        c.goto(&format!("{base}/{code}")).await.expect("short link");
        assert_eq!(text_of(&c, "h1").await, "One step before the link");
        let phone = c
            .find(Locator::Id("f-phone"))
            .await
            .expect("the phone field");
        phone.send_keys("12ab-34").await.expect("type");
        c.find(Locator::Css("form button[type=submit]"))
            .await
            .expect("button")
            .click()
            .await
            .expect("send");
        // Refused: the field's error beside it, the value kept, the consent asked for.
        let error = c
            .wait()
            .for_element(Locator::Id("f-phone-error"))
            .await
            .expect("the phone's error");
        assert!(error
            .text()
            .await
            .expect("text")
            .contains("Enter a phone number"));
        let phone = c
            .find(Locator::Id("f-phone"))
            .await
            .expect("the phone field");
        assert_eq!(
            phone.prop("value").await.expect("value").as_deref(),
            Some("12ab-34")
        );
        assert_eq!(
            phone.attr("aria-invalid").await.expect("attr").as_deref(),
            Some("true")
        );
        assert!(text_of(&c, "#consent-error").await.contains("Tick the box"));
        shot(&c, &shots, "desktop-light-visitor-form-errors").await;
        emulate_phone(&c, Some(360)).await;
        let (page, window) = sideways_overflow(&c).await;
        assert!(page <= window, "the form is {page} px wide in {window}");
        phone_shot(&c, &shots, "phone-light-visitor-form-errors", 360).await;
        emulate_phone(&c, None).await;

        // Corrected and agreed: on to the destination.
        let phone = c
            .find(Locator::Id("f-phone"))
            .await
            .expect("the phone field");
        phone.clear().await.expect("clear");
        phone.send_keys("+86 138 0013 8000").await.expect("type");
        c.find(Locator::Css("input[name=consent]"))
            .await
            .expect("consent")
            .click()
            .await
            .expect("tick");
        c.find(Locator::Css("form button[type=submit]"))
            .await
            .expect("button")
            .click()
            .await
            .expect("send");
        wait_for_path(&c, "/landing").await;
        assert_eq!(text_of(&c, "h1").await, "The landing page");

        // The same browser goes straight through next time (its pass cookie).
        c.goto(&format!("{base}/{code}")).await.expect("again");
        wait_for_path(&c, "/landing").await;
        assert_eq!(text_of(&c, "h1").await, "The landing page");

        // Inside WeChat on a phone: the page that says to open the link in the browser, the
        // arrow at the top right corner (the app's menu), the copy button once the script ran.
        c.issue_cmd(Cdp(
            "Emulation.setUserAgentOverride",
            serde_json::json!({ "userAgent": WECHAT }),
        ))
        .await
        .expect("user agent");
        emulate_phone(&c, Some(360)).await;
        for scheme in ["light", "dark"] {
            c.issue_cmd(color_scheme(scheme)).await.expect("scheme");
            c.goto(&format!("{base}/{code}")).await.expect("in WeChat");
            assert_eq!(text_of(&c, "h1").await, "Open this link in your browser");
            let copy = c.find(Locator::Id("copy")).await.expect("copy button");
            assert!(copy.is_displayed().await.expect("shown"), "visitor.js ran");
            let arrow = c
                .execute(
                    "var b = document.querySelector('.menu-pointer').getBoundingClientRect(); \
                     return [b.top, window.innerWidth - b.right, b.width];",
                    vec![],
                )
                .await
                .expect("the arrow's place");
            let n = |i: usize| arrow[i].as_f64().expect("a number");
            assert!(
                n(0) < 20.0 && n(1) < 30.0 && n(2) > 30.0,
                "the arrow is at the top right: {arrow}"
            );
            let (page, window) = sideways_overflow(&c).await;
            assert!(page <= window, "the page is {page} px wide in {window}");
            let lum = phone_shot(&c, &shots, &format!("phone-{scheme}-visitor-in-app"), 360).await;
            if scheme == "dark" {
                assert!(lum < 110.0, "dark ({lum})");
            } else {
                assert!(lum > 150.0, "light ({lum})");
            }
        }
        c.close().await.expect("close");
    });

    // The lead, through the API.
    let leads = app.api_get(&format!("/api/v1/links/{code}/leads"), ADMIN);
    let items = leads["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{leads}");
    assert_eq!(items[0]["values"]["phone"], "+8613800138000");
    assert_eq!(
        items[0]["consent"],
        "I agree to be called about this offer."
    );
    eprintln!("screenshots in {}", shots.display());
}

/// A WeChat in-app browser's user agent (Android).
const WECHAT: &str =
    "Mozilla/5.0 (Linux; Android 13; Pixel 7) AppleWebKit/537.36 (KHTML, like Gecko) \
Version/4.0 Chrome/116.0 Mobile Safari/537.36 XWEB/1160065 MMWEBSDK/20231202 \
MicroMessenger/8.0.47.2560(0x28002F30) WeChat/arm64 Weixin NetType/WIFI Language/zh_CN";
