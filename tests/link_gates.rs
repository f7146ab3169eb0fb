//! The pages before the destination (SPEC §20) against the real binary: the page for in-app
//! browsers (each app, the config default and the link's own choice, the language, the visit
//! it records), the form before the visit (its page, refusals, the lead, the pass cookie, the
//! leads API with CSV, who may read them, the rate limit, a `kill -9` after the answer), the
//! preview for social crawlers (escaped), their precedence with a password, `not_found_url`,
//! bad values, export → import; and, in process with a manual clock, leads' retention and
//! the leads of recycled links.
//!
//! Every server here honours `TEST_STORE=postgres`, and the in-process tests use
//! `test_store`, so CI runs them all on both backends.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::cli::{text, vsl};
use common::{problem, TestApp, ADMIN, BASE_URL, EDITOR, SPORTS, VIEWER};
use reqwest::blocking::Response;
use reqwest::Method;
use serde_json::{json, Value};

const DESKTOP: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";
const PHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1";
const ANDROID: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36";
/// QQ's own standalone browser, not the QQ app's in-app browser.
const QQ_BROWSER: &str = "Mozilla/5.0 (Linux; U; Android 13; zh-cn; PGT-AN10 Build/HONORPGT-AN10) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/109.0.5414.86 MQQBrowser/14.6 Mobile Safari/537.36 COVC/046401";
const WECHAT_ANDROID: &str = "Mozilla/5.0 (Linux; Android 13; Pixel 7) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/116.0 Mobile Safari/537.36 XWEB/1160065 MMWEBSDK/20231202 MicroMessenger/8.0.47.2560(0x28002F30) WeChat/arm64 Weixin NetType/WIFI Language/zh_CN";
const WECHAT_IOS: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 MicroMessenger/8.0.42(0x18002a2f) NetType/WIFI Language/zh_CN";
const WXWORK: &str = "Mozilla/5.0 (Windows NT 10.0; WOW64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/81.0.4044.138 Safari/537.36 wxwork/4.1.16 (MicroMessenger/6.2) WindowsWechat";
const QQ: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 QQ/8.9.80.626 V1_IPH_SQ_8.9.80_1_APP_A Pixel/1170";
const WEIBO: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Weibo (iPhone14,2__weibo__13.8.1__iphone__os16.6)";
const DINGTALK: &str = "Mozilla/5.0 (Linux; U; Android 12; zh-CN; V2154A Build/SP1A.210812.003) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/69.0.3497.100 UWS/3.22.2.59 Mobile Safari/537.36 AliApp(DingTalk/7.0.10) com.alibaba.android.rimet/30013429 Channel/227200 language/zh-CN abi/64";
const ALIPAY: &str = "Mozilla/5.0 (Linux; U; Android 11; zh-CN; M2012K11AC Build/RKQ1.200826.002) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/69.0.3497.100 UWS/3.22.2.43 Mobile Safari/537.36 NebulaSDK/1.8.100112 Nebula AlipayDefined(nt:WIFI,ws:393|0|2.75) AliApp(AP/10.2.60.8000) AlipayClient/10.2.60.8000 Language/zh-Hans useStatusBar/true";
const DOUYIN: &str = "Mozilla/5.0 (Linux; Android 11; V2055A) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/75.0.3770.156 Mobile Safari/537.36 aweme_200101 JsSdk/1.0 NetType/WIFI Channel/douyin_vivo AppName/aweme app_version/20.1.0 ByteLocale/zh-CN Region/CN BytedanceWebview/d8a21c6";
const TIKTOK: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 16_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 musical_ly_30.3.0 JsSdk/2.0 NetType/WIFI Channel/App Store ByteLocale/en Region/US BytedanceWebview/d8a21c6";
const FACEBOOK: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [FBAN/FBIOS;FBDV/iPhone14,5;FBMD/iPhone;FBSN/iOS;FBSV/17.0;FBSS/3;FBID/phone;FBLC/en_US;FBOP/5]";
const INSTAGRAM: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Instagram 302.0.0.23.114 (iPhone14,5; iOS 17_0; en_US; en; scale=3.00; 1170x2532; 522393020)";
const LINE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Safari Line/13.20.0";
const BROWSER_ACCEPT: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

/// Every in-app browser the page is for, by name.
const IN_APP: [(&str, &str); 13] = [
    ("wechat android", WECHAT_ANDROID),
    ("wechat ios", WECHAT_IOS),
    ("wechat work", WXWORK),
    ("qq", QQ),
    ("weibo", WEIBO),
    ("dingtalk", DINGTALK),
    ("alipay", ALIPAY),
    ("douyin", DOUYIN),
    ("tiktok", TIKTOK),
    ("facebook", FACEBOOK),
    ("instagram", INSTAGRAM),
    ("line", LINE),
    ("line, its Android app", "Mozilla/5.0 (Linux; Android 13; SM-S911B Build/TP1A.220624.014; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/120.0.6099.144 Mobile Safari/537.36 Line/13.21.1/IAB"),
];

/// Browsers that are no app's: redirected.
const BROWSERS: [(&str, &str); 4] = [
    ("desktop", DESKTOP),
    ("iphone safari", PHONE),
    ("android chrome", ANDROID),
    ("qq browser", QQ_BROWSER),
];

/// The link-preview crawlers, by name.
const CRAWLERS: [(&str, &str); 8] = [
    (
        "facebook",
        "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
    ),
    ("twitter", "Twitterbot/1.0"),
    (
        "linkedin",
        "LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)",
    ),
    (
        "slack",
        "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
    ),
    ("telegram", "TelegramBot (like TwitterBot)"),
    ("whatsapp", "WhatsApp/2.23.20.0 A"),
    (
        "discord",
        "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
    ),
    (
        "skype",
        "Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5 skype-url-preview@microsoft.com",
    ),
];

// ---------------------------------------------------------------------------------------------
// Helpers

fn code_of(link: &Value) -> String {
    link["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no code in {link}"))
        .to_string()
}

fn link_of(app: &TestApp, code: &str) -> Value {
    app.api_get(&format!("/api/v1/links/{code}"), ADMIN)
}

fn patch(app: &TestApp, code: &str, body: &Value) -> Response {
    app.req(Method::PATCH, &format!("/api/v1/links/{code}"), Some(ADMIN))
        .json(body)
        .send()
        .expect("PATCH")
}

fn patch_ok(app: &TestApp, code: &str, body: &Value) -> Value {
    let response = patch(app, code, body);
    let status = response.status().as_u16();
    let json: Value = response.json().expect("json");
    assert_eq!(status, 200, "PATCH {code} {body}: {json}");
    json
}

/// `GET path` with the given headers.
fn visit(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut request = app.client.get(app.url(path));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().expect("GET")
}

/// `POST path` of a browser's form, with the given headers.
fn post_form(
    app: &TestApp,
    path: &str,
    headers: &[(&str, &str)],
    fields: &[(&str, &str)],
) -> Response {
    let mut request = app
        .client
        .post(app.url(path))
        .header("accept", BROWSER_ACCEPT);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.form(fields).send().expect("POST")
}

fn location(response: &Response) -> Option<String> {
    response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn set_cookies(response: &Response) -> Vec<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_string)
        .collect()
}

/// Follows `path` once, asserting a 302, and returns where it sent the visitor.
fn dest(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> String {
    let response = visit(app, path, headers);
    let status = response.status().as_u16();
    let to = location(&response);
    assert_eq!(status, 302, "GET {path} with {headers:?}");
    to.unwrap_or_else(|| panic!("302 without Location for {path}"))
}

/// A 200 HTML page without a `Location`: its body.
fn page(response: Response, what: &str) -> String {
    let status = response.status().as_u16();
    let to = location(&response);
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = response.text().expect("body");
    assert_eq!(status, 200, "{what}: {body}");
    assert!(to.is_none(), "{what}: a page with a Location: {to:?}");
    assert!(kind.starts_with("text/html"), "{what}: {kind}");
    body
}

/// The text of HTML with the escapes the templates write undone (for reading values back).
fn unescape(html: &str) -> String {
    html.replace("&#x2f;", "/")
        .replace("&#x27;", "'")
        .replace("&#39;", "'")
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

fn short_url(code: &str) -> String {
    format!("{BASE_URL}/{code}")
}

/// The page for in-app browsers, recognised by what it must show: the short link in the copy
/// box with its button, and the destination's host.
fn assert_in_app_page(html: &str, code: &str, host: &str, what: &str) {
    let text = unescape(html);
    assert!(
        text.contains(&format!("value=\"{}\"", short_url(code))),
        "{what}: the short URL to copy: {html}"
    );
    assert!(text.contains("id=\"copy\""), "{what}: the copy button");
    assert!(
        text.contains(&format!("<strong>{host}</strong>")),
        "{what}: the destination's host: {html}"
    );
}

/// A link's visits, newest first.
fn visits(app: &TestApp, code: &str) -> Vec<Value> {
    let page = app.api_get(&format!("/api/v1/links/{code}/visits?limit=1000"), ADMIN);
    page["items"].as_array().cloned().unwrap_or_default()
}

/// Waits until the writer has recorded `n` visits of `code` and returns them.
fn wait_visits(app: &TestApp, code: &str, n: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let listed = visits(app, code);
        if listed.len() >= n {
            assert_eq!(listed.len(), n, "{code}: more visits than expected");
            return listed;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{code}: {} visits recorded, want {n}",
            listed.len()
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn leads_of(app: &TestApp, code: &str) -> Value {
    app.api_get(&format!("/api/v1/links/{code}/leads"), ADMIN)
}

fn lead_items(app: &TestApp, code: &str) -> Vec<Value> {
    leads_of(app, code)["items"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("no items in the leads of {code}"))
}

fn stats_of(app: &TestApp, code: &str) -> Value {
    app.api_get(&format!("/api/v1/links/{code}/stats"), ADMIN)
}

/// The form most tests use: a required phone, an optional note, a consent box.
fn lead_form() -> Value {
    json!({
        "fields": [
            {"name": "phone", "label": "Mobile phone", "type": "tel", "required": true},
            {"name": "note", "label": "Your note", "type": "text"},
        ],
        "consent": "I agree to be contacted",
    })
}

// ---------------------------------------------------------------------------------------------
// In-app browsers

#[test]
fn interstitial_links_show_each_in_app_browser_the_page_and_redirect_everyone_else() {
    let app = TestApp::start();
    let destination = "https://shop.example.com/deals/today?ref=wx";
    let code = code_of(&app.create(json!({"url": destination, "in_app": "interstitial"})));
    let path = format!("/{code}");
    let link = link_of(&app, &code);
    assert_eq!(link["in_app"], "interstitial", "{link}");
    assert!(
        link["features"]
            .as_array()
            .is_some_and(|f| f.contains(&json!("in_app"))),
        "{link}"
    );

    for (name, ua) in IN_APP {
        let html = page(
            visit(
                &app,
                &path,
                &[("user-agent", ua), ("accept", BROWSER_ACCEPT)],
            ),
            name,
        );
        assert!(html.contains("<html lang=\"en\""), "{name}: {html}");
        assert_in_app_page(&html, &code, "shop.example.com", name);
    }
    for (name, ua) in BROWSERS {
        assert_eq!(
            dest(
                &app,
                &path,
                &[("user-agent", ua), ("accept", BROWSER_ACCEPT)]
            ),
            destination,
            "{name}"
        );
    }
    // No agent at all: redirected.
    assert_eq!(dest(&app, &path, &[]), destination);

    // In the visitor's language: Chinese for zh-CN, English otherwise.
    let zh = page(
        visit(
            &app,
            &path,
            &[
                ("user-agent", WECHAT_ANDROID),
                ("accept-language", "zh-CN,zh;q=0.9,en;q=0.8"),
            ],
        ),
        "zh-CN",
    );
    assert!(zh.contains("<html lang=\"zh-CN\""), "{zh}");
    assert!(zh.contains("请在浏览器中打开此链接"), "{zh}");
    assert_in_app_page(&zh, &code, "shop.example.com", "zh-CN");
    let en = page(
        visit(
            &app,
            &path,
            &[
                ("user-agent", WECHAT_IOS),
                ("accept-language", "en-US,en;q=0.9"),
            ],
        ),
        "en-US",
    );
    assert!(en.contains("<html lang=\"en\""), "{en}");
    assert!(en.contains("Open this link in your browser"), "{en}");
    assert!(!en.contains("请在浏览器中打开此链接"));

    // The server's default is `direct`: a link that does not say, or says so, redirects
    // WeChat.
    let plain = code_of(&app.create(json!({"url": "https://example.com/in-app-plain"})));
    let capped = code_of(&app.create(json!({
        "url": "https://example.com/in-app-capped", "max_visits": 100
    })));
    let direct = code_of(&app.create(json!({
        "url": "https://example.com/in-app-direct", "in_app": "direct"
    })));
    assert_eq!(link_of(&app, &plain)["in_app"], Value::Null);
    assert_eq!(link_of(&app, &direct)["in_app"], "direct");
    for (code, to) in [
        (&plain, "https://example.com/in-app-plain"),
        (&capped, "https://example.com/in-app-capped"),
        (&direct, "https://example.com/in-app-direct"),
    ] {
        assert_eq!(
            dest(&app, &format!("/{code}"), &[("user-agent", WECHAT_ANDROID)]),
            to
        );
    }
    // A PATCH turns it on and off.
    patch_ok(&app, &plain, &json!({"in_app": "interstitial"}));
    page(
        visit(&app, &format!("/{plain}"), &[("user-agent", QQ)]),
        "patched on",
    );
    let off = patch_ok(&app, &plain, &json!({"in_app": null}));
    assert_eq!(off["in_app"], Value::Null, "{off}");
    assert_eq!(
        dest(&app, &format!("/{plain}"), &[("user-agent", QQ)]),
        "https://example.com/in-app-plain"
    );
}

#[test]
fn the_config_default_interstitial_covers_links_that_do_not_say() {
    let app = TestApp::start_with("[links]\nin_app = \"interstitial\"\n", &[]);
    let plain = code_of(&app.create(json!({"url": "https://plain.example.org/a"})));
    let with_options = code_of(&app.create(json!({
        "url": "https://options.example.org/b", "max_visits": 50, "og_title": "Options"
    })));
    let direct = code_of(&app.create(json!({
        "url": "https://direct.example.org/c", "in_app": "direct"
    })));
    assert_eq!(link_of(&app, &plain)["in_app"], Value::Null);

    for (name, ua) in IN_APP {
        let html = page(
            visit(&app, &format!("/{plain}"), &[("user-agent", ua)]),
            &format!("plain, {name}"),
        );
        assert_in_app_page(&html, &plain, "plain.example.org", name);
        let html = page(
            visit(&app, &format!("/{with_options}"), &[("user-agent", ua)]),
            &format!("with options, {name}"),
        );
        assert_in_app_page(&html, &with_options, "options.example.org", name);
        // The link's own `direct` wins over the default.
        assert_eq!(
            dest(&app, &format!("/{direct}"), &[("user-agent", ua)]),
            "https://direct.example.org/c",
            "{name}"
        );
    }
    for (name, ua) in BROWSERS {
        assert_eq!(
            dest(&app, &format!("/{plain}"), &[("user-agent", ua)]),
            "https://plain.example.org/a",
            "{name}"
        );
        assert_eq!(
            dest(&app, &format!("/{with_options}"), &[("user-agent", ua)]),
            "https://options.example.org/b",
            "{name}"
        );
    }
    let zh = page(
        visit(
            &app,
            &format!("/{plain}"),
            &[("user-agent", DINGTALK), ("accept-language", "zh-CN")],
        ),
        "zh-CN",
    );
    assert!(zh.contains("<html lang=\"zh-CN\""), "{zh}");
}

#[test]
fn an_in_app_page_is_recorded_as_a_visit_with_the_route_in_app() {
    let app = TestApp::start();
    let destination = "https://example.com/in-app-recorded";
    let code = code_of(&app.create(json!({"url": destination, "in_app": "interstitial"})));
    page(
        visit(&app, &format!("/{code}"), &[("user-agent", WECHAT_ANDROID)]),
        "wechat",
    );
    // HEAD answers alike and records nothing; a browser's redirect is the second visit.
    let head = app
        .client
        .head(app.url(&format!("/{code}")))
        .header("user-agent", WECHAT_ANDROID)
        .send()
        .unwrap();
    assert_eq!(head.status().as_u16(), 200);
    assert_eq!(
        dest(&app, &format!("/{code}"), &[("user-agent", DESKTOP)]),
        destination
    );
    let listed = wait_visits(&app, &code, 2);
    let in_app: Vec<&Value> = listed.iter().filter(|v| v["route"] == "in_app").collect();
    assert_eq!(in_app.len(), 1, "{listed:?}");
    assert_eq!(in_app[0]["user_agent"], WECHAT_ANDROID, "{}", in_app[0]);
    assert_eq!(in_app[0]["is_bot"], false, "{}", in_app[0]);
    assert_eq!(in_app[0]["app"], "wechat", "{}", in_app[0]);
    let other = listed.iter().find(|v| v["route"] != "in_app").unwrap();
    assert_eq!(other["user_agent"], DESKTOP, "{other}");
    assert_eq!(other["app"], Value::Null, "{other}");
    assert_eq!(link_of(&app, &code)["visits_total"], 2);

    let stats = stats_of(&app, &code);
    let destinations = stats["destinations"]
        .as_array()
        .unwrap_or_else(|| panic!("no destinations: {stats}"));
    let page_row = destinations
        .iter()
        .find(|d| d["route"] == "in_app")
        .unwrap_or_else(|| panic!("no in_app route in the stats: {stats}"));
    assert_eq!(page_row["visits"], 1, "{stats}");
    let redirected = destinations
        .iter()
        .find(|d| d["route"] == "default")
        .unwrap_or_else(|| panic!("no default route in the stats: {stats}"));
    assert_eq!(redirected["visits"], 1, "{stats}");
    assert_eq!(redirected["url"], destination, "{stats}");
}

// ---------------------------------------------------------------------------------------------
// Forms before the visit

#[test]
fn a_form_link_collects_a_lead_then_redirects_and_lets_that_browser_through() {
    let app = TestApp::start();
    let destination = "https://example.com/after-the-form";
    let created = app.create(json!({"url": destination, "form": lead_form()}));
    let code = code_of(&created);
    let id = created["id"].as_u64().expect("id");
    let path = format!("/{code}");
    let link = link_of(&app, &code);
    assert_eq!(link["form"]["retention"], "180d", "{link}");
    assert_eq!(link["form"]["consent"], "I agree to be contacted", "{link}");
    assert_eq!(link["form"]["fields"][0]["type"], "tel", "{link}");
    assert_eq!(link["form"]["fields"][0]["required"], true, "{link}");
    assert_eq!(link["form"]["fields"][1]["required"], false, "{link}");
    assert!(
        link["features"]
            .as_array()
            .is_some_and(|f| f.contains(&json!("form"))),
        "{link}"
    );

    // A browser gets the form, with the labels and the consent box; nothing of the
    // destination.
    let html = page(
        visit(
            &app,
            &path,
            &[("accept", BROWSER_ACCEPT), ("user-agent", DESKTOP)],
        ),
        "the form",
    );
    for needle in [
        "Mobile phone",
        "Your note",
        "I agree to be contacted",
        "name=\"phone\"",
        "name=\"note\"",
        "name=\"consent\"",
        "<form method=\"post\"",
    ] {
        assert!(html.contains(needle), "{needle}: {html}");
    }
    assert!(
        !unescape(&html).contains(destination),
        "the form leaks the destination"
    );
    // A JSON client is told to use a browser.
    let p = problem(visit(&app, &path, &[("accept", "application/json")]), 401);
    assert_eq!(p["code"], "form_required", "{p}");
    assert!(!p.to_string().contains("after-the-form"), "{p}");

    // Invalid values: 400, the form again with the values kept (escaped) and the error
    // beside the field; nothing stored.
    let refused = post_form(
        &app,
        &path,
        &[],
        &[
            ("form", "1"),
            ("phone", "12ab<b>"),
            ("note", "kept note"),
            ("consent", "yes"),
        ],
    );
    assert_eq!(refused.status().as_u16(), 400);
    assert!(location(&refused).is_none());
    assert!(set_cookies(&refused).is_empty());
    let html = refused.text().unwrap();
    assert!(html.contains("value=\"12ab&lt;b&gt;\""), "{html}");
    assert!(
        !html.contains("12ab<b>"),
        "the value is not escaped: {html}"
    );
    assert!(html.contains("value=\"kept note\""), "{html}");
    assert!(html.contains("id=\"f-phone-error\""), "{html}");
    assert!(html.contains("Enter a phone number"), "{html}");
    assert!(html.contains(" checked"), "the consent box is kept: {html}");
    // No consent: 400 too.
    let no_consent = post_form(
        &app,
        &path,
        &[],
        &[("form", "1"), ("phone", "+86 138 0013 8000")],
    );
    assert_eq!(no_consent.status().as_u16(), 400);
    let html = no_consent.text().unwrap();
    assert!(html.contains("id=\"consent-error\""), "{html}");
    assert!(lead_items(&app, &code).is_empty());
    assert_eq!(stats_of(&app, &code)["leads"], 0);

    // Valid: the lead, then 302 to the destination with the pass cookie.
    let accepted = post_form(
        &app,
        &path,
        &[("user-agent", DESKTOP)],
        &[
            ("form", "1"),
            ("phone", "+86 138-0013-8000"),
            ("note", "=cmd"),
            ("consent", "yes"),
        ],
    );
    assert_eq!(accepted.status().as_u16(), 302);
    assert_eq!(location(&accepted).as_deref(), Some(destination));
    let cookies = set_cookies(&accepted);
    let pass_name = format!("vsl_form_{id}");
    let cookie = cookies
        .iter()
        .find(|c| c.starts_with(&format!("{pass_name}=")))
        .unwrap_or_else(|| panic!("no pass cookie: {cookies:?}"));
    assert!(
        cookie.contains(&format!("; Path=/{code}")),
        "{cookie}: its path"
    );
    assert!(cookie.contains("Max-Age=2592000"), "{cookie}");
    let pass = cookie
        .split(';')
        .next()
        .unwrap()
        .split_once('=')
        .unwrap()
        .1
        .to_string();

    // The same browser goes through; a tampered or another link's pass does not.
    let with_pass = format!("{pass_name}={pass}");
    assert_eq!(
        dest(
            &app,
            &path,
            &[("cookie", &with_pass), ("accept", BROWSER_ACCEPT)]
        ),
        destination
    );
    let mut tampered = pass.clone();
    let last = tampered.pop().unwrap();
    tampered.push(if last == '0' { '1' } else { '0' });
    for (what, cookie) in [
        ("tampered", format!("{pass_name}={tampered}")),
        (
            "no signature",
            format!("{pass_name}={}", pass.split('.').next().unwrap()),
        ),
        (
            "far future",
            format!(
                "{pass_name}=99999999999999.{}",
                pass.split_once('.').unwrap().1
            ),
        ),
    ] {
        let html = page(
            visit(
                &app,
                &path,
                &[("cookie", &cookie), ("accept", BROWSER_ACCEPT)],
            ),
            what,
        );
        assert!(html.contains("name=\"phone\""), "{what}: {html}");
    }
    let other = app.create(json!({"url": "https://example.com/other-form", "form": lead_form()}));
    let other_code = code_of(&other);
    let moved_pass = format!("vsl_form_{}={pass}", other["id"]);
    let html = page(
        visit(
            &app,
            &format!("/{other_code}"),
            &[("cookie", &moved_pass), ("accept", BROWSER_ACCEPT)],
        ),
        "another link's pass",
    );
    assert!(html.contains("name=\"phone\""), "{html}");

    // A second browser, a second lead.
    let second = post_form(
        &app,
        &path,
        &[],
        &[
            ("form", "1"),
            ("phone", "010 1234 5678"),
            ("note", "@SUM(A1)"),
            ("consent", "yes"),
        ],
    );
    assert_eq!(second.status().as_u16(), 302);

    // The leads: newest first, the phone normalised, the consent text kept.
    let leads = lead_items(&app, &code);
    assert_eq!(leads.len(), 2, "{leads:?}");
    assert_eq!(
        leads[0]["values"],
        json!({"phone": "01012345678", "note": "@SUM(A1)"}),
        "{leads:?}"
    );
    assert_eq!(
        leads[1]["values"],
        json!({"phone": "+8613800138000", "note": "=cmd"}),
        "{leads:?}"
    );
    assert_eq!(leads[1]["consent"], "I agree to be contacted");
    assert!(
        leads[0]["id"].as_u64() > leads[1]["id"].as_u64(),
        "{leads:?}"
    );
    assert!(
        time::OffsetDateTime::parse(
            leads[0]["at"].as_str().unwrap_or(""),
            &time::format_description::well_known::Rfc3339
        )
        .is_ok(),
        "{leads:?}"
    );
    assert!(lead_items(&app, &other_code).is_empty());
    // Pages of one.
    let first = app.api_get(&format!("/api/v1/links/{code}/leads?limit=1"), ADMIN);
    assert_eq!(first["items"].as_array().map(Vec::len), Some(1), "{first}");
    assert_eq!(first["items"][0], leads[0]);
    let cursor = first["next_cursor"]
        .as_str()
        .unwrap_or_else(|| panic!("no next_cursor: {first}"));
    let rest = app.api_get(
        &format!("/api/v1/links/{code}/leads?limit=1&cursor={cursor}"),
        ADMIN,
    );
    assert_eq!(rest["items"], json!([leads[1].clone()]), "{rest}");
    assert_eq!(rest["next_cursor"], Value::Null, "{rest}");

    // CSV: formula cells neutralised.
    let response = app
        .req(
            Method::GET,
            &format!("/api/v1/links/{code}/leads?format=csv"),
            Some(ADMIN),
        )
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let kind = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(kind.starts_with("text/csv"), "{kind}");
    let body = response.text().unwrap();
    let mut reader = csv::Reader::from_reader(body.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_string)
        .collect();
    assert_eq!(header, ["id", "at", "phone", "note", "consent"], "{body}");
    let rows: Vec<Vec<String>> = reader
        .records()
        .map(|r| r.unwrap().iter().map(str::to_string).collect())
        .collect();
    assert_eq!(rows.len(), 2, "{body}");
    assert_eq!(rows[0][0], leads[0]["id"].to_string(), "{body}");
    assert_eq!(rows[0][2], "01012345678", "{body}");
    assert_eq!(rows[0][3], "'@SUM(A1)", "{body}");
    assert_eq!(rows[1][2], "'+8613800138000", "{body}");
    assert_eq!(rows[1][3], "'=cmd", "{body}");
    assert_eq!(rows[1][4], "I agree to be contacted", "{body}");

    // Editors read them; viewers and keys of another space do not.
    let as_editor = app
        .req(
            Method::GET,
            &format!("/api/v1/links/{code}/leads"),
            Some(EDITOR),
        )
        .send()
        .unwrap();
    assert_eq!(as_editor.status().as_u16(), 200);
    for (who, key) in [("viewer", VIEWER), ("sports", SPORTS)] {
        for query in ["", "?format=csv"] {
            let response = app
                .req(
                    Method::GET,
                    &format!("/api/v1/links/{code}/leads{query}"),
                    Some(key),
                )
                .send()
                .unwrap();
            let p = problem(response, 403);
            assert!(!p.to_string().contains("8613800138000"), "{who}: {p}");
        }
    }
    let anonymous = app
        .client
        .get(app.url(&format!("/api/v1/links/{code}/leads")))
        .send()
        .unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    // The viewer still reads the stats, which count the leads.
    let stats = app.api_get(&format!("/api/v1/links/{code}/stats"), VIEWER);
    assert_eq!(stats["leads"], 2, "{stats}");
    assert_eq!(stats_of(&app, &other_code)["leads"], 0);
}

#[test]
fn form_submissions_past_form_per_ip_are_refused_and_store_nothing() {
    let app = TestApp::start_with("[limits.rates]\nform_per_ip = \"2/m\"\n", &[]);
    let destination = "https://example.com/limited-form";
    let code = code_of(&app.create(json!({"url": destination, "form": lead_form()})));
    let path = format!("/{code}");
    let valid = [
        ("form", "1"),
        ("phone", "+1 555 0100 200"),
        ("consent", "yes"),
    ];
    let first = post_form(&app, &path, &[], &[("form", "1"), ("phone", "nope")]);
    assert_eq!(first.status().as_u16(), 400);
    let second = post_form(&app, &path, &[], &valid);
    assert_eq!(second.status().as_u16(), 302);
    let third = post_form(&app, &path, &[], &valid);
    assert_eq!(third.status().as_u16(), 429);
    assert!(third.headers().get("retry-after").is_some());
    assert!(location(&third).is_none());
    assert!(set_cookies(&third).is_empty());
    assert_eq!(lead_items(&app, &code).len(), 1);
    // Showing the form is no submission.
    page(
        visit(&app, &path, &[("accept", BROWSER_ACCEPT)]),
        "the form",
    );
}

#[test]
fn an_acknowledged_lead_survives_a_kill_9() {
    let mut app = TestApp::binary();
    let destination = "https://example.com/durable-lead";
    let code = code_of(&app.create(json!({"url": destination, "form": lead_form()})));
    let accepted = post_form(
        &app,
        &format!("/{code}"),
        &[],
        &[
            ("form", "1"),
            ("phone", "+44 20 7946 0958"),
            ("note", "crash me"),
            ("consent", "yes"),
        ],
    );
    assert_eq!(accepted.status().as_u16(), 302);
    assert_eq!(location(&accepted).as_deref(), Some(destination));
    app.kill9();
    app.restart();
    let leads = lead_items(&app, &code);
    assert_eq!(leads.len(), 1, "{leads:?}");
    assert_eq!(
        leads[0]["values"],
        json!({"phone": "+442079460958", "note": "crash me"})
    );
    assert_eq!(stats_of(&app, &code)["leads"], 1);
}

// ---------------------------------------------------------------------------------------------
// Previews for social crawlers

#[test]
fn crawlers_get_the_escaped_preview_and_everyone_else_the_redirect() {
    let app = TestApp::start();
    let destination = "https://example.com/previewed?a=1&b=2";
    let title = "Sale <script>alert(\"x\")</script> & more";
    let code = code_of(&app.create(json!({
        "url": destination,
        "og_title": title,
        "og_description": "Fifty percent off, \"today\" only",
        "og_image": "https://img.example.com/cover.png",
    })));
    let link = link_of(&app, &code);
    assert_eq!(link["og_title"], title, "{link}");
    assert_eq!(link["og_image"], "https://img.example.com/cover.png");
    assert!(
        link["features"]
            .as_array()
            .is_some_and(|f| f.contains(&json!("preview"))),
        "{link}"
    );
    let path = format!("/{code}");
    let plain = code_of(&app.create(json!({"url": "https://example.com/not-previewed"})));

    for (name, ua) in CRAWLERS {
        let html = page(visit(&app, &path, &[("user-agent", ua)]), name);
        assert!(
            !html.to_ascii_lowercase().contains("<script"),
            "{name}: raw script: {html}"
        );
        assert!(html.contains("&lt;script&gt;"), "{name}: {html}");
        let text = unescape(&html);
        for tag in [
            format!("<meta property=\"og:title\" content=\"{title}\">"),
            "<meta property=\"og:description\" content=\"Fifty percent off, \"today\" only\">"
                .to_string(),
            "<meta property=\"og:image\" content=\"https://img.example.com/cover.png\">"
                .to_string(),
            format!(
                "<meta property=\"og:url\" content=\"{}\">",
                short_url(&code)
            ),
            "<meta name=\"twitter:card\" content=\"summary_large_image\">".to_string(),
            format!("href=\"{destination}\""),
        ] {
            assert!(text.contains(&tag), "{name}: {tag}: {html}");
        }
        // A link without a preview redirects crawlers.
        assert_eq!(
            dest(&app, &format!("/{plain}"), &[("user-agent", ua)]),
            "https://example.com/not-previewed",
            "{name}"
        );
    }
    for (name, ua) in BROWSERS {
        assert_eq!(
            dest(&app, &path, &[("user-agent", ua)]),
            destination,
            "{name}"
        );
    }
    // In-app browsers are not crawlers (and this link leaves them to the default, direct).
    assert_eq!(
        dest(&app, &path, &[("user-agent", WECHAT_IOS)]),
        destination
    );

    // `null` removes each; with none left, crawlers are redirected.
    let patched = patch_ok(&app, &code, &json!({"og_title": null}));
    assert_eq!(patched["og_title"], Value::Null, "{patched}");
    assert_eq!(patched["og_image"], "https://img.example.com/cover.png");
    let html = page(
        visit(&app, &path, &[("user-agent", CRAWLERS[1].1)]),
        "no title",
    );
    assert!(!html.contains("og:title"), "{html}");
    assert!(html.contains("og:description"), "{html}");
    let patched = patch_ok(
        &app,
        &code,
        &json!({"og_description": null, "og_image": null}),
    );
    assert_eq!(patched["og_description"], Value::Null, "{patched}");
    assert_eq!(patched["og_image"], Value::Null, "{patched}");
    assert!(
        !patched["features"]
            .as_array()
            .is_some_and(|f| f.contains(&json!("preview"))),
        "{patched}"
    );
    assert_eq!(
        dest(&app, &path, &[("user-agent", CRAWLERS[1].1)]),
        destination
    );

    // Each preview was a visit, recorded as a bot's, route `preview`.
    let n = CRAWLERS.len() + BROWSERS.len() + 2 + 1;
    let listed = wait_visits(&app, &code, n);
    let mut mismatches = Vec::new();
    for (name, ua) in CRAWLERS {
        match listed
            .iter()
            .find(|v| v["user_agent"] == ua && v["route"] == "preview")
        {
            Some(v) if v["is_bot"] == true => {}
            Some(v) => mismatches.push(format!("{name}: not recorded as a bot: {v}")),
            None => mismatches.push(format!("{name}: no preview visit")),
        }
    }
    assert!(mismatches.is_empty(), "\n{}", mismatches.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Precedence

#[test]
fn password_then_form_then_in_app_page_in_that_order() {
    let app = TestApp::start();
    let destination = "https://example.com/behind-everything";
    let password = "letmein42";
    let code = code_of(&app.create(json!({
        "url": destination,
        "password": password,
        "form": {"fields": [{"name": "phone", "label": "Mobile phone", "type": "tel", "required": true}]},
        "in_app": "interstitial",
        "og_title": "Behind everything",
    })));
    let path = format!("/{code}");
    let wechat = [("user-agent", WECHAT_ANDROID)];

    // First the password, for WeChat and a crawler alike.
    for (who, ua) in [("wechat", WECHAT_ANDROID), ("crawler", CRAWLERS[1].1)] {
        let html = page(
            visit(
                &app,
                &path,
                &[("user-agent", ua), ("accept", BROWSER_ACCEPT)],
            ),
            who,
        );
        assert!(html.contains("name=\"password\""), "{who}: {html}");
        assert!(!html.contains("name=\"phone\""), "{who}: {html}");
        assert!(!html.contains("og:title"), "{who}: {html}");
    }
    // The right password: the form, carrying the password.
    let html = page(
        post_form(&app, &path, &wechat, &[("password", password)]),
        "right password",
    );
    assert!(html.contains("name=\"phone\""), "{html}");
    assert!(
        html.contains(&format!(
            "type=\"hidden\" name=\"password\" value=\"{password}\""
        )),
        "{html}"
    );
    // A wrong password with the fields: 403, nothing stored; the fields without the
    // password: the password form, nothing stored.
    let wrong = post_form(
        &app,
        &path,
        &wechat,
        &[
            ("password", "not the one"),
            ("form", "1"),
            ("phone", "13800138000"),
        ],
    );
    assert_eq!(wrong.status().as_u16(), 403);
    assert!(set_cookies(&wrong).is_empty());
    let html = page(
        post_form(
            &app,
            &path,
            &wechat,
            &[("form", "1"), ("phone", "13800138000")],
        ),
        "fields without the password",
    );
    assert!(html.contains("name=\"password\""), "{html}");
    assert!(lead_items(&app, &code).is_empty());

    // Password and fields from WeChat: the lead, then the in-app page (no redirect).
    let response = post_form(
        &app,
        &path,
        &wechat,
        &[
            ("password", password),
            ("form", "1"),
            ("phone", "138 0013 8000"),
        ],
    );
    let cookies = set_cookies(&response);
    assert!(
        cookies.iter().any(|c| c.starts_with("vsl_form_")),
        "{cookies:?}"
    );
    let html = page(response, "wechat, both passed");
    assert_in_app_page(&html, &code, "example.com", "wechat, both passed");
    assert!(!html.contains("name=\"phone\""), "{html}");
    // From a desktop: the lead, then the destination.
    let response = post_form(
        &app,
        &path,
        &[("user-agent", DESKTOP)],
        &[
            ("password", password),
            ("form", "1"),
            ("phone", "+1 202 555 0101"),
        ],
    );
    assert_eq!(response.status().as_u16(), 302);
    assert_eq!(location(&response).as_deref(), Some(destination));
    let pass = set_cookies(&response)
        .into_iter()
        .find(|c| c.starts_with("vsl_form_"))
        .expect("a pass cookie")
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let leads = lead_items(&app, &code);
    assert_eq!(leads.len(), 2, "{leads:?}");
    assert_eq!(leads[0]["values"], json!({"phone": "+12025550101"}));
    assert_eq!(leads[1]["values"], json!({"phone": "13800138000"}));

    // With the pass, the password alone (the header) is enough; without the password the
    // pass is not.
    assert_eq!(
        dest(
            &app,
            &path,
            &[
                ("cookie", &pass),
                ("x-link-password", password),
                ("user-agent", DESKTOP)
            ]
        ),
        destination
    );
    let html = page(
        visit(
            &app,
            &path,
            &[("cookie", &pass), ("accept", BROWSER_ACCEPT)],
        ),
        "the pass without the password",
    );
    assert!(html.contains("name=\"password\""), "{html}");
    assert_eq!(lead_items(&app, &code).len(), 2);
}

// ---------------------------------------------------------------------------------------------
// Unknown codes

#[test]
fn not_found_url_takes_browsers_asking_for_unknown_codes_but_not_json_clients() {
    let app = TestApp::start_with(
        "",
        &[("VSL_SERVER__NOT_FOUND_URL", "https://example.org/missing")],
    );
    for path in ["/nosuchcode", "/zz-unknown-1", "/nosuchcode+"] {
        assert_eq!(
            dest(&app, path, &[("accept", BROWSER_ACCEPT)]),
            "https://example.org/missing",
            "{path}"
        );
        let p = problem(visit(&app, path, &[("accept", "application/json")]), 404);
        assert_eq!(p["code"], "not_found", "{path}: {p}");
    }
    // The API's own paths still answer 404 problem+json.
    for accept in [BROWSER_ACCEPT, "application/json"] {
        let p = problem(
            app.req(Method::GET, "/api/v1/nope", Some(ADMIN))
                .header("accept", accept)
                .send()
                .unwrap(),
            404,
        );
        assert_eq!(p["code"], "not_found", "{p}");
    }
    // Known codes are unaffected; a deleted one is gone, not unknown.
    let code = code_of(&app.create(json!({"url": "https://example.com/known"})));
    assert_eq!(
        dest(&app, &format!("/{code}"), &[]),
        "https://example.com/known"
    );
    let deleted = app
        .req(
            Method::DELETE,
            &format!("/api/v1/links/{code}"),
            Some(ADMIN),
        )
        .send()
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    let gone = visit(&app, &format!("/{code}"), &[("accept", BROWSER_ACCEPT)]);
    assert_eq!(gone.status().as_u16(), 410);
    assert!(location(&gone).is_none());
}

// ---------------------------------------------------------------------------------------------
// Bad values

#[test]
fn bad_gate_values_are_problems_naming_the_field_and_write_nothing() {
    let app = TestApp::start();
    let keep = app.create(json!({
        "url": "https://example.com/keep-gates", "form": lead_form(), "og_title": "Keep"
    }));
    let keep_code = code_of(&keep);
    let keep_before = link_of(&app, &keep_code);
    let field = |name: &str, kind: &str| json!({"name": name, "label": "L", "type": kind});
    let form = |fields: Vec<Value>| json!({"fields": fields});
    let eleven: Vec<Value> = (0..11).map(|i| field(&format!("f{i}"), "text")).collect();
    let cases: Vec<(Value, &str, &str)> = vec![
        (json!({"in_app": "sometimes"}), "invalid_in_app", "in_app"),
        (json!({"in_app": "Direct"}), "invalid_in_app", "in_app"),
        (json!({"form": "yes"}), "invalid_form", "form"),
        (
            json!({"form": {"fields": []}}),
            "invalid_form",
            "form.fields",
        ),
        (
            json!({"form": {"fields": eleven}}),
            "invalid_form",
            "form.fields",
        ),
        (json!({"form": {}}), "invalid_form", "form.fields"),
        (
            json!({"form": form(vec![field("phone", "number")])}),
            "invalid_form",
            "form.fields[0].type",
        ),
        (
            json!({"form": form(vec![field("phone", "tel"), field("phone", "text")])}),
            "invalid_form",
            "form.fields[1].name",
        ),
        (
            json!({"form": form(vec![field("a", "tel"), field("b", "email"), field("Bad Name", "text")])}),
            "invalid_form",
            "form.fields[2].name",
        ),
        (
            json!({"form": form(vec![field("password", "text")])}),
            "invalid_form",
            "form.fields[0].name",
        ),
        (
            json!({"form": form(vec![field("consent", "text")])}),
            "invalid_form",
            "form.fields[0].name",
        ),
        (
            json!({"form": form(vec![field("form", "text")])}),
            "invalid_form",
            "form.fields[0].name",
        ),
        (
            json!({"form": form(vec![json!({"name": "a", "label": "", "type": "text"})])}),
            "invalid_form",
            "form.fields[0].label",
        ),
        (
            json!({"form": form(vec![json!({"name": "a", "type": "text"})])}),
            "invalid_form",
            "form.fields[0].label",
        ),
        (
            json!({"form": form(vec![json!({"name": "a", "label": "A", "type": "text", "required": "yes"})])}),
            "invalid_form",
            "form.fields[0].required",
        ),
        (
            json!({"form": {"fields": [field("a", "text")], "retention": "soon"}}),
            "invalid_form",
            "form.retention",
        ),
        (
            json!({"form": {"fields": [field("a", "text")], "retention": "4000d"}}),
            "invalid_form",
            "form.retention",
        ),
        (
            json!({"form": {"fields": [field("a", "text")], "retention": "10s"}}),
            "invalid_form",
            "form.retention",
        ),
        (
            json!({"form": {"fields": [field("a", "text")], "retention": 30}}),
            "invalid_form",
            "form.retention",
        ),
        (
            json!({"form": {"fields": [field("a", "text")], "consent": ""}}),
            "invalid_form",
            "form.consent",
        ),
        (
            json!({"form": {"fields": [field("a", "text")], "consent": "x".repeat(501)}}),
            "invalid_form",
            "form.consent",
        ),
        (
            json!({"form": {"fields": [field("a", "text")], "consent": true}}),
            "invalid_form",
            "form.consent",
        ),
        (json!({"og_title": ""}), "invalid_preview", "og_title"),
        (
            json!({"og_title": "t".repeat(201)}),
            "invalid_preview",
            "og_title",
        ),
        (
            json!({"og_title": "a\u{0007}b"}),
            "invalid_preview",
            "og_title",
        ),
        (
            json!({"og_description": "d".repeat(501)}),
            "invalid_preview",
            "og_description",
        ),
        (
            json!({"og_description": "  "}),
            "invalid_preview",
            "og_description",
        ),
        (
            json!({"og_image": "javascript:alert(1)"}),
            "invalid_preview",
            "og_image",
        ),
        (
            json!({"og_image": "ftp://img.example/x.png"}),
            "invalid_preview",
            "og_image",
        ),
        (
            json!({"og_image": "not a url"}),
            "invalid_preview",
            "og_image",
        ),
    ];
    let before = app.link_total();
    // Every case is tried before failing, so that one run shows every mismatch.
    let mut mismatches = Vec::new();
    for (i, (extra, want_code, want_field)) in cases.iter().enumerate() {
        let code = format!("gatebad{i}");
        let mut body = extra.clone();
        let object = body.as_object_mut().unwrap();
        object.insert("url".into(), json!("https://example.com/bad-gate"));
        object.insert("code".into(), json!(code));
        let what: String = extra.to_string().chars().take(100).collect();
        let p = problem(app.post_json("/api/v1/links", ADMIN, &body), 400);
        if p["code"] != *want_code || p["field"] != *want_field {
            mismatches.push(format!(
                "create {what}: got {} / {}, want {want_code} / {want_field}: {}",
                p["code"], p["field"], p["detail"]
            ));
        }
        let missing = app
            .req(Method::GET, &format!("/api/v1/links/{code}"), Some(ADMIN))
            .send()
            .unwrap();
        if missing.status().as_u16() != 404 {
            mismatches.push(format!("create {what}: {code} was created"));
        }
        // The same value in a PATCH is refused alike.
        let p = problem(patch(&app, &keep_code, extra), 400);
        if p["code"] != *want_code || p["field"] != *want_field {
            mismatches.push(format!(
                "PATCH {what}: got {} / {}, want {want_code} / {want_field}: {}",
                p["code"], p["field"], p["detail"]
            ));
        }
    }
    assert!(mismatches.is_empty(), "\n{}", mismatches.join("\n"));
    assert_eq!(app.link_total(), before, "a refused create wrote a link");
    assert_eq!(
        link_of(&app, &keep_code),
        keep_before,
        "a refused PATCH changed the link"
    );

    // The edges that are allowed.
    let ten: Vec<Value> = (0..10).map(|i| field(&format!("f{i}"), "email")).collect();
    let edge = app.create(json!({
        "url": "https://example.com/edge-gates",
        "form": {"fields": ten, "retention": "1h", "consent": "c".repeat(500)},
        "og_title": "t".repeat(200),
        "og_description": "d".repeat(500),
        "og_image": "http://img.example/x.png",
    }));
    assert_eq!(edge["form"]["retention"], "1h", "{edge}");
    assert_eq!(edge["form"]["fields"].as_array().map(Vec::len), Some(10));

    // `form: null` removes the form: the link redirects again.
    let path = format!("/{keep_code}");
    page(
        visit(&app, &path, &[("accept", BROWSER_ACCEPT)]),
        "the form",
    );
    let patched = patch_ok(&app, &keep_code, &json!({"form": null}));
    assert_eq!(patched["form"], Value::Null, "{patched}");
    let shown = link_of(&app, &keep_code);
    assert_eq!(shown["form"], Value::Null, "{shown}");
    assert!(
        !shown["features"]
            .as_array()
            .is_some_and(|f| f.contains(&json!("form"))),
        "{shown}"
    );
    assert_eq!(shown["og_title"], "Keep", "{shown}");
    assert_eq!(
        dest(&app, &path, &[("accept", BROWSER_ACCEPT)]),
        "https://example.com/keep-gates"
    );
    // And a PATCH puts one back, with its retention.
    let patched = patch_ok(
        &app,
        &keep_code,
        &json!({"form": {"fields": [field("email", "email")], "retention": "30d"}}),
    );
    assert_eq!(patched["form"]["retention"], "30d", "{patched}");
    assert_eq!(patched["form"]["consent"], Value::Null, "{patched}");
    page(
        visit(&app, &path, &[("accept", BROWSER_ACCEPT)]),
        "the form again",
    );
}

// ---------------------------------------------------------------------------------------------
// Export and import

#[test]
fn export_and_import_keep_the_gates_and_with_leads_the_leads() {
    let mut app = TestApp::binary();
    let gated = code_of(&app.create(json!({
        "url": "https://example.com/moved-gates",
        "in_app": "interstitial",
        "form": {
            "fields": [
                {"name": "phone", "label": "Mobile phone", "type": "tel", "required": true},
                {"name": "email", "label": "Email", "type": "email"},
            ],
            "consent": "I agree",
            "retention": "30d",
        },
        "og_title": "Moved <title>",
        "og_description": "Moved description",
        "og_image": "https://img.example.com/moved.png",
    })));
    let direct = code_of(&app.create(json!({
        "url": "https://example.com/moved-direct", "in_app": "direct", "og_title": "Only a title"
    })));
    for (phone, email) in [("+86 139 0000 1111", "a@example.cn"), ("020-5555-1234", "")] {
        let response = post_form(
            &app,
            &format!("/{gated}"),
            &[],
            &[
                ("form", "1"),
                ("phone", phone),
                ("email", email),
                ("consent", "yes"),
            ],
        );
        assert_eq!(response.status().as_u16(), 302, "{phone}");
    }
    let codes = [gated.clone(), direct.clone()];
    let originals: Vec<Value> = codes.iter().map(|c| link_of(&app, c)).collect();
    let leads_before = leads_of(&app, &gated);
    assert_eq!(leads_before["items"].as_array().map(Vec::len), Some(2));

    assert!(app.terminate().success());
    // Without --leads, no personal data goes out.
    let plain_file = app.dir.path().join("no-leads.jsonl");
    let out = vsl(
        &app.config_path(),
        &["export", "--output", plain_file.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plain_export = std::fs::read_to_string(&plain_file).unwrap();
    assert!(
        !plain_export.contains("\"type\":\"lead\""),
        "{plain_export}"
    );
    assert!(!plain_export.contains("13900001111"), "{plain_export}");

    let file = app.dir.path().join("gates.jsonl");
    let out = vsl(
        &app.config_path(),
        &["export", "--leads", "--output", file.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let exported = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        exported
            .lines()
            .filter(|l| l.contains("\"type\":\"lead\""))
            .count(),
        2,
        "{exported}"
    );
    // The fresh store has a hash secret of its own; these links are not computed codes.
    let links_only: String = exported
        .lines()
        .filter(|l| !l.contains("\"type\":\"key\""))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&file, links_only).unwrap();

    let mut fresh = TestApp::binary();
    assert!(fresh.terminate().success());
    let out = vsl(&fresh.config_path(), &["import", file.to_str().unwrap()]);
    let report = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{report}");
    assert!(report.contains("refused 0"), "{report}");
    fresh.respawn();

    for (code, original) in codes.iter().zip(&originals) {
        let moved = link_of(&fresh, code);
        for field in [
            "url",
            "in_app",
            "form",
            "og_title",
            "og_description",
            "og_image",
            "features",
        ] {
            assert_eq!(
                moved.get(field),
                original.get(field),
                "{code}.{field} changed in the move: {original} → {moved}"
            );
        }
    }
    assert_eq!(originals[0]["form"]["retention"], "30d");
    assert_eq!(leads_of(&fresh, &gated)["items"], leads_before["items"]);
    assert_eq!(stats_of(&fresh, &gated)["leads"], 2);

    // And they still behave: the form first, then the in-app page; the crawler preview.
    let html = page(
        visit(&fresh, &format!("/{gated}"), &[("user-agent", WECHAT_IOS)]),
        "moved form",
    );
    assert!(html.contains("name=\"phone\""), "{html}");
    let html = page(
        post_form(
            &fresh,
            &format!("/{gated}"),
            &[("user-agent", WECHAT_IOS)],
            &[("form", "1"), ("phone", "13700001234"), ("consent", "yes")],
        ),
        "moved in-app page",
    );
    assert_in_app_page(&html, &gated, "example.com", "moved in-app page");
    assert_eq!(lead_items(&fresh, &gated).len(), 3);
    let html = page(
        visit(
            &fresh,
            &format!("/{direct}"),
            &[("user-agent", CRAWLERS[0].1)],
        ),
        "moved preview",
    );
    assert!(html.contains("og:title"), "{html}");
    assert_eq!(
        dest(&fresh, &format!("/{direct}"), &[("user-agent", WECHAT_IOS)]),
        "https://example.com/moved-direct"
    );
}

// ---------------------------------------------------------------------------------------------
// Retention, in process with a manual clock

mod retention {
    use super::*;

    use crate::common::postgres::test_store;
    use vshortlink::clock::{Clock, ManualClock};
    use vshortlink::config::Config;
    use vshortlink::jobs::lifecycle::Lifecycle;
    use vshortlink::leads::Leads;
    use vshortlink::links::{CreateLink, Links};
    use vshortlink::model::{Link, LinkStatus};
    use vshortlink::store::Store;

    const DAY: u64 = 86_400_000;
    const T0: u64 = 1_800_000_000_000;

    struct World {
        _dir: tempfile::TempDir,
        /// Runs the visit writer and pool refills that `build` starts.
        _runtime: tokio::runtime::Runtime,
        clock: Arc<ManualClock>,
        store: Arc<dyn Store>,
        links: Arc<Links>,
        leads: Arc<Leads>,
        job: Arc<Lifecycle>,
    }

    fn world(overlay: &str) -> World {
        let dir = tempfile::tempdir().unwrap();
        // The generated admin key goes into the temp dir, not the working directory.
        let overlay = format!("{overlay}\n[storage]\npath = {:?}\n", dir.path());
        let config = Arc::new(Config::from_toml(&overlay).unwrap());
        let store = test_store(dir.path());
        let clock = Arc::new(ManualClock::new(T0));
        let dyn_clock: Arc<dyn Clock> = clock.clone();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let app = runtime
            .block_on(vshortlink::build(config, store.clone(), dyn_clock))
            .unwrap();
        World {
            _dir: dir,
            _runtime: runtime,
            clock,
            store,
            links: app.state.links.clone(),
            leads: app.state.leads.clone(),
            job: app.state.lifecycle.clone(),
        }
    }

    fn create(w: &World, body: Value) -> Link {
        let req: CreateLink = serde_json::from_value(body).unwrap();
        w.links.create(req).unwrap().0
    }

    /// Leaves a lead through the link's own form, as a visitor would.
    fn submit(w: &World, link: &Link, phone: &'static str) -> u64 {
        let form = link
            .options
            .as_deref()
            .and_then(|o| o.form.clone())
            .expect("a form");
        let lead = w
            .leads
            .submit(
                link.id,
                &form,
                |name| (name == "phone").then_some(phone),
                true,
            )
            .unwrap_or_else(|e| panic!("submit: {e}"));
        assert_eq!(lead.at, w.clock.now());
        lead.id
    }

    fn lead_ids(w: &World, link: &Link) -> Vec<u64> {
        let page = w.leads.page(link.id, None, 100).unwrap();
        page.leads.iter().map(|l| l.id).collect()
    }

    fn phone_form(retention: Option<&str>) -> Value {
        let mut form = json!({
            "fields": [{"name": "phone", "label": "Phone", "type": "tel", "required": true}],
            "consent": "Yes",
        });
        if let Some(r) = retention {
            form["retention"] = json!(r);
        }
        form
    }

    #[test]
    fn leads_older_than_the_forms_retention_are_deleted_by_the_daily_job() {
        let w = world("");
        let link = create(
            &w,
            json!({"url": "https://example.com/kept-30d", "expires_at": null, "form": phone_form(Some("30d"))}),
        );
        let long = create(
            &w,
            json!({"url": "https://example.com/kept-180d", "expires_at": null, "form": phone_form(None)}),
        );
        let old = submit(&w, &link, "+86 138 0000 0001");
        let kept_long = submit(&w, &long, "+86 138 0000 0002");
        w.clock.advance(20 * DAY);
        let younger = submit(&w, &link, "+86 138 0000 0003");

        // Day 29: nothing is 30 days old yet.
        w.clock.advance(9 * DAY);
        let report = w.job.run().unwrap();
        assert_eq!(report.leads_pruned, 0, "{report:?}");
        assert_eq!(lead_ids(&w, &link), [younger, old]);
        assert_eq!(w.leads.count(link.id).unwrap(), 2);

        // Day 31: the first lead is past 30 days; the one of day 20 and the other form's
        // (180 days) stay.
        w.clock.advance(2 * DAY);
        let report = w.job.run().unwrap();
        assert_eq!(report.leads_pruned, 1, "{report:?}");
        assert_eq!(lead_ids(&w, &link), [younger]);
        assert_eq!(w.leads.count(link.id).unwrap(), 1);
        assert_eq!(lead_ids(&w, &long), [kept_long]);

        // Day 51: the second is gone too; the link's leads are empty.
        w.clock.advance(20 * DAY);
        w.job.run().unwrap();
        assert!(w.leads.page(link.id, None, 100).unwrap().leads.is_empty());
        assert_eq!(w.leads.count(link.id).unwrap(), 0);
        assert_eq!(w.leads.count(long.id).unwrap(), 1);
        assert_eq!(
            w.store.link_by_id(link.id).unwrap().unwrap().status,
            LinkStatus::Active
        );
        // A second run finds nothing to do.
        assert_eq!(w.job.run().unwrap().leads_pruned, 0);
    }

    #[test]
    fn the_leads_of_a_deleted_link_go_when_it_is_recycled() {
        let w = world(
            "[tiers.5]\nbatch = 10\nlow_water = 0\ncooldown = \"1d\"\n\
             [lifecycle]\nrecycle_after = \"10d\"\n",
        );
        let body = |path: &str| {
            json!({
                "url": format!("https://example.com/{path}"),
                "length": 5,
                "expires_at": null,
                "form": phone_form(None),
            })
        };
        let doomed = create(&w, body("recycled"));
        let control = create(&w, body("control"));
        submit(&w, &doomed, "13800000001");
        submit(&w, &doomed, "13800000002");
        let kept = submit(&w, &control, "13800000003");
        w.links.delete(&doomed.code).unwrap();

        // Deleted, not yet recycled: the leads stay.
        w.clock.advance(9 * DAY);
        let report = w.job.run().unwrap();
        assert_eq!((report.recycled, report.leads_pruned), (0, 0), "{report:?}");
        assert_eq!(w.leads.count(doomed.id).unwrap(), 2);

        // Recycled (archived, its code back in the pool): its leads are gone, the other
        // link's stay.
        w.clock.advance(2 * DAY);
        let report = w.job.run().unwrap();
        assert_eq!(report.recycled, 1, "{report:?}");
        assert_eq!(
            w.store.link_by_id(doomed.id).unwrap().unwrap().status,
            LinkStatus::Archived
        );
        assert_eq!(w.leads.count(doomed.id).unwrap(), 0);
        assert!(w.leads.page(doomed.id, None, 100).unwrap().leads.is_empty());
        assert_eq!(lead_ids(&w, &control), [kept]);
        assert_eq!(w.job.run().unwrap().leads_pruned, 0, "nothing left to do");
        // The report counts the two leads that went with the link.
        assert_eq!(report.leads_pruned, 2, "{report:?}");
    }
}
