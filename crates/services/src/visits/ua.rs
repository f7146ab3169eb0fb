//! User-agent parsing for visits: browser, OS, device class and the bot flag, from the
//! `woothee` crate plus a few rules of our own. Pure and synchronous; it must not do I/O.

use std::sync::{Arc, LazyLock};

use crate::model::gates::is_preview_crawler;
use quick_cache::sync::Cache;

/// Device class of a visit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    Desktop,
    Mobile,
    Tablet,
    /// Crawlers, and scripts or HTTP libraries (see [`UaParser`]); always with `is_bot`.
    Bot,
    /// Empty or unrecognised user agents (consoles, TVs, unknown devices).
    Other,
}

impl Device {
    pub fn as_str(self) -> &'static str {
        match self {
            Device::Desktop => "desktop",
            Device::Mobile => "mobile",
            Device::Tablet => "tablet",
            Device::Bot => "bot",
            Device::Other => "other",
        }
    }

    /// The name as a shared string: every visit of a class holds the same allocation.
    pub fn shared(self) -> Arc<str> {
        static NAMES: LazyLock<[Arc<str>; 5]> = LazyLock::new(|| {
            [
                Device::Desktop,
                Device::Mobile,
                Device::Tablet,
                Device::Bot,
                Device::Other,
            ]
            .map(|d| Arc::from(d.as_str()))
        });
        Arc::clone(&NAMES[self as usize])
    }
}

/// What a user agent string says about the client. Unknown parts are empty strings. Shared,
/// because every visit from the agent holds them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Agent {
    pub browser: Arc<str>,
    pub browser_version: Arc<str>,
    pub os: Arc<str>,
    pub os_version: Arc<str>,
    pub device: Device,
    /// True exactly when `device` is [`Device::Bot`]; kept separate because visitor counts
    /// filter on it.
    pub is_bot: bool,
}

/// User agents longer than this are parsed but not cached: real browsers stay well under it,
/// and a client sending huge unique strings must not make the cache hold megabytes.
const MAX_CACHED_LEN: usize = 1024;

/// Parses user agents, remembering recent answers (most traffic repeats a few strings).
///
/// Cost in release mode, measured over the test table (mixed browsers, bots, scripts): about
/// 1.7–1.9 µs for an uncached parse (nearly all of it woothee's regexes), about 40 ns for a
/// cache hit (measured once during development; `cargo bench --bench visit_writer` measures
/// the whole writer). The writer parses every visit, so the cache matters.
///
/// Bot rule: woothee's `crawler` category, the link-preview crawlers of chat and social apps
/// (`model::gates::is_preview_crawler`: WhatsApp's and Skype's are not in woothee's list)
/// and headless browsers are bots. HTTP libraries and command-line clients (`curl`, `python-requests`,
/// `Go-http-client`…) are not crawlers: they are device `other`, named by their first product
/// token, and not flagged, because people do open short links with them (and API users test
/// with them); flagging them would hide those visitors from `unique_visitors`.
pub struct UaParser {
    parser: woothee::parser::Parser,
    cache: Cache<String, Arc<Agent>>,
}

impl UaParser {
    /// `cache_entries` bounds the number of distinct user agents remembered.
    pub fn new(cache_entries: usize) -> Self {
        UaParser {
            parser: woothee::parser::Parser::new(),
            cache: Cache::new(cache_entries),
        }
    }

    pub fn parse(&self, user_agent: &str) -> Arc<Agent> {
        if user_agent.len() > MAX_CACHED_LEN {
            return Arc::new(self.parse_uncached(user_agent));
        }
        if let Some(agent) = self.cache.get(user_agent) {
            return agent;
        }
        let agent = Arc::new(self.parse_uncached(user_agent));
        self.cache.insert(user_agent.to_owned(), Arc::clone(&agent));
        agent
    }

    /// Parses without the cache; exposed for benchmarks.
    pub fn parse_uncached(&self, user_agent: &str) -> Agent {
        let ua = user_agent.trim();
        let parsed = self.parser.parse(ua).unwrap_or_default();
        let known = |s: &str| -> Arc<str> {
            if s == woothee::woothee::VALUE_UNKNOWN {
                Arc::from("")
            } else {
                Arc::from(s)
            }
        };
        let (os, os_version) = friendly_os(parsed.os, &parsed.os_version);
        let mut agent = Agent {
            browser: known(parsed.name),
            browser_version: known(parsed.version),
            os: known(os),
            os_version: known(os_version),
            device: Device::Other,
            is_bot: false,
        };

        let library = parsed.name == "HTTP Library" || starts_with_library(ua);
        if library {
            // woothee names every library "HTTP Library" and puts the library's name in
            // `version`; the first product token (`curl/8.5.0`) says more.
            let (name, version) = first_product(ua);
            agent.browser = name.into();
            agent.browser_version = version.into();
        }

        agent.device = if library && !is_preview_crawler(ua) {
            Device::Other
        } else if parsed.category == "crawler" || is_headless(ua) || is_preview_crawler(ua) {
            Device::Bot
        } else {
            match parsed.category {
                "pc" => Device::Desktop,
                "smartphone" | "mobilephone" if is_tablet(&agent.os, ua) => Device::Tablet,
                "smartphone" | "mobilephone" => Device::Mobile,
                _ => Device::Other,
            }
        };
        agent.is_bot = agent.device == Device::Bot;
        agent
    }
}

/// The names people use for woothee's systems: "Mac OSX" is macOS, and Windows's kernel
/// version ("NT 10.0") repeats what the name ("Windows 10") says. Also applied when showing
/// visits recorded before.
pub fn friendly_os<'a>(os: &'a str, version: &'a str) -> (&'a str, &'a str) {
    let os = match os {
        "Mac OSX" | "Mac OS X" => "macOS",
        other => other,
    };
    let version = if os.starts_with("Windows") && version.starts_with("NT ") {
        ""
    } else {
        version
    };
    (os, version)
}

/// woothee files iPads and all Android devices under `smartphone`. iPads say so in the OS;
/// Android tablets are the Android agents without the `Mobile` token (Chrome, Samsung Internet
/// and Firefox all follow that convention; Firefox says `Tablet` instead). iPads in desktop mode
/// send a Macintosh agent and are counted as desktops: nothing in the string tells them apart.
fn is_tablet(os: &str, ua: &str) -> bool {
    os == "iPad" || (os == "Android" && !ua.contains("Mobile"))
}

/// HTTP libraries and command-line clients woothee does not know (it knows curl, Wget, Java,
/// Apache-HttpClient, PHP and a few more). Matched at the start of the agent, ignoring case.
const LIBRARY_PREFIXES: &[&str] = &[
    "aiohttp/",
    "axios/",
    "curl/",
    "go-http-client/",
    "guzzlehttp/",
    "httpie/",
    "libwww-perl/",
    "node-fetch/",
    "node/",
    "okhttp/",
    "postmanruntime/",
    "python-httpx/",
    "python-requests/",
    "python-urllib/",
    "reqwest/",
    "ruby",
    "undici",
    "wget/",
];

fn starts_with_library(ua: &str) -> bool {
    LIBRARY_PREFIXES.iter().any(|prefix| {
        ua.get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
    })
}

/// Headless browsers identify as a normal browser plus a marker; woothee sees the browser.
fn is_headless(ua: &str) -> bool {
    ua.contains("HeadlessChrome") || ua.contains("PhantomJS")
}

/// `curl/8.5.0 (x86_64)` → (`curl`, `8.5.0`).
fn first_product(ua: &str) -> (&str, &str) {
    let token = ua.split_whitespace().next().unwrap_or("");
    token.split_once('/').unwrap_or((token, ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHROME_WINDOWS: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 \
        (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36";

    /// (user agent, browser, browser version, os, os version, device)
    #[rustfmt::skip]
    const CASES: &[(&str, &str, &str, &str, &str, Device)] = &[
        (CHROME_WINDOWS, "Chrome", "124.0.0.0", "Windows 10", "", Device::Desktop),
        ("Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
            "Firefox", "125.0", "Linux", "", Device::Desktop),
        ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 \
            (KHTML, like Gecko) Version/17.4.1 Safari/605.1.15",
            "Safari", "17.4.1", "macOS", "10.15.7", Device::Desktop),
        ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) \
            Chrome/124.0.0.0 Safari/537.36 Edg/124.0.0.0",
            "Edge", "124.0.0.0", "Windows 10", "", Device::Desktop),
        ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4_1 like Mac OS X) AppleWebKit/605.1.15 \
            (KHTML, like Gecko) Version/17.4.1 Mobile/15E148 Safari/604.1",
            "Safari", "17.4.1", "iPhone", "17.4.1", Device::Mobile),
        ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) \
            Chrome/124.0.6367.82 Mobile Safari/537.36",
            "Chrome", "124.0.6367.82", "Android", "14", Device::Mobile),
        ("Mozilla/5.0 (Android 13; Mobile; rv:125.0) Gecko/125.0 Firefox/125.0",
            "Firefox", "125.0", "Android", "13", Device::Mobile),
        // woothee says smartphone for all of these tablets.
        ("Mozilla/5.0 (iPad; CPU OS 17_4_1 like Mac OS X) AppleWebKit/605.1.15 \
            (KHTML, like Gecko) Version/17.4.1 Mobile/15E148 Safari/604.1",
            "Safari", "17.4.1", "iPad", "17.4.1", Device::Tablet),
        ("Mozilla/5.0 (Linux; Android 11; SM-T505) AppleWebKit/537.36 (KHTML, like Gecko) \
            SamsungBrowser/24.0 Chrome/117.0.0.0 Safari/537.36",
            "SamsungBrowser", "24.0", "Android", "11", Device::Tablet),
        ("Mozilla/5.0 (Linux; Android 13; SM-X706B) AppleWebKit/537.36 (KHTML, like Gecko) \
            Chrome/124.0.0.0 Safari/537.36",
            "Chrome", "124.0.0.0", "Android", "13", Device::Tablet),
        ("Mozilla/5.0 (Android 13; Tablet; rv:125.0) Gecko/125.0 Firefox/125.0",
            "Firefox", "125.0", "Android", "13", Device::Tablet),
        ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            "Googlebot", "", "", "", Device::Bot),
        ("Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Googlebot/2.1; \
            +http://www.google.com/bot.html) Chrome/124.0.6367.91 Safari/537.36",
            "Googlebot", "", "", "", Device::Bot),
        ("Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 \
            (KHTML, like Gecko) Chrome/124.0.6367.91 Mobile Safari/537.36 \
            (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            "Googlebot", "", "", "", Device::Bot),
        ("Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
            "bingbot", "", "", "", Device::Bot),
        ("facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
            "facebook", "", "", "", Device::Bot),
        // Scripts and headless browsers: our rules, not woothee's.
        ("curl/8.5.0", "curl", "8.5.0", "", "", Device::Other),
        ("Wget/1.21.4", "Wget", "1.21.4", "", "", Device::Other),
        ("python-requests/2.31.0", "python-requests", "2.31.0", "", "", Device::Other),
        ("Go-http-client/1.1", "Go-http-client", "1.1", "", "", Device::Other),
        ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
            HeadlessChrome/124.0.0.0 Safari/537.36",
            "Chrome", "124.0.0.0", "Linux", "", Device::Bot),
        ("Mozilla/5.0 (PlayStation; PlayStation 5/2.26) AppleWebKit/605.1.15 \
            (KHTML, like Gecko) Version/13.0 Safari/605.1.15",
            "Safari", "13.0", "", "", Device::Other),
        ("", "", "", "", "", Device::Other),
        ("-", "", "", "", "", Device::Other),
        ("something we have never seen", "", "", "", "", Device::Other),
    ];

    #[test]
    fn link_preview_crawlers_are_bots() {
        let parser = UaParser::new(16);
        for ua in [
            "WhatsApp/2.23.20.0 A",
            "Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5 skype-url-preview@microsoft.com",
            "TelegramBot (like TwitterBot)",
            "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
        ] {
            let agent = parser.parse(ua);
            assert!(agent.is_bot, "{ua}: {agent:?}");
            assert_eq!(agent.device, Device::Bot, "{ua}");
        }
    }

    #[test]
    fn real_user_agents() {
        let parser = UaParser::new(100);
        for &(ua, browser, browser_version, os, os_version, device) in CASES {
            let expected = Agent {
                browser: browser.into(),
                browser_version: browser_version.into(),
                os: os.into(),
                os_version: os_version.into(),
                device,
                is_bot: device == Device::Bot,
            };
            assert_eq!(*parser.parse(ua), expected, "{ua}");
        }
    }

    #[test]
    fn repeated_agents_come_from_the_cache() {
        let parser = UaParser::new(100);
        let first = parser.parse(CHROME_WINDOWS);
        let second = parser.parse(CHROME_WINDOWS);
        assert!(Arc::ptr_eq(&first, &second));
    }

    #[test]
    fn huge_agents_are_parsed_but_not_cached() {
        let parser = UaParser::new(100);
        let huge = format!("{CHROME_WINDOWS} {}", "x".repeat(MAX_CACHED_LEN));
        let first = parser.parse(&huge);
        assert_eq!(first.device, Device::Desktop);
        assert!(!Arc::ptr_eq(&first, &parser.parse(&huge)));
    }

    #[test]
    fn a_zero_sized_cache_still_parses() {
        let parser = UaParser::new(0);
        assert_eq!(&*parser.parse(CHROME_WINDOWS).browser, "Chrome");
        assert_eq!(&*parser.parse(CHROME_WINDOWS).browser, "Chrome");
    }

    #[test]
    fn junk_does_not_panic() {
        let parser = UaParser::new(10);
        for ua in [
            "(",
            ")))",
            "/",
            "Mozilla/",
            "\u{0}\u{ffff}é",
            "   ",
            "Android",
            "iPad",
        ] {
            let _ = parser.parse(ua);
        }
    }
}
