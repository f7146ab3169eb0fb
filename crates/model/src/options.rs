//! What a link does beyond one URL: its options (password, visit cap, start time, end
//! destination), its targeting rules and its rotation targets, as stored, and the pure rules
//! that decide a redirect from them: which rule holds for a visitor, which target a rotation
//! picks, which route a visit records, which page before the destination stands ([`gate`]).
//! No I/O and no clock: the caller brings the request's
//! facts ([`Visitor`]) and the time.
//!
//! The stored types are encoded positionally (MessagePack arrays on sled, the same fields in
//! JSON on PostgreSQL): new fields go at the end with `#[serde(default)]`, and none is ever
//! skipped when serialising.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::gates::{is_preview_crawler, InApp, LeadForm, SocialPreview};
use super::time::Millis;

/// Most rules a link may have.
pub const MAX_RULES: usize = 32;
/// Most targets a link may have.
pub const MAX_TARGETS: usize = 100;
/// A target's weight is 1 to this.
pub const MAX_WEIGHT: u32 = 1000;

/// Everything a link has beyond its URL. A link without any of it stores none
/// (`Link::options` is `None`), and its redirect takes the plain path.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkOptions {
    /// The Argon2id hash (PHC string) of the visitor's password; never shown.
    pub password: Option<String>,
    /// Redirects after which the link ends.
    pub max_visits: Option<u64>,
    /// Before this instant the code answers as unknown.
    pub valid_from: Option<Millis>,
    /// Where visitors go once the link has ended, instead of the 410 page.
    pub fallback_url: Option<String>,
    pub rules: Vec<Rule>,
    pub targets: Vec<Target>,
    pub rotation: Rotation,
    /// What visitors inside an app's browser get; `None`: `links.in_app` decides.
    #[serde(default)]
    pub in_app: Option<InApp>,
    /// The form visitors fill before the destination.
    #[serde(default)]
    pub form: Option<LeadForm>,
    /// What link-preview crawlers are shown.
    #[serde(default)]
    pub preview: Option<SocialPreview>,
}

impl LinkOptions {
    /// Whether there is nothing to store: the link behaves as a plain one.
    pub fn is_empty(&self) -> bool {
        self.password.is_none()
            && self.max_visits.is_none()
            && self.valid_from.is_none()
            && self.fallback_url.is_none()
            && self.rules.is_empty()
            && self.targets.is_empty()
            && self.in_app.is_none()
            && self.form.is_none()
            && self.preview.as_ref().is_none_or(SocialPreview::is_empty)
    }

    /// Whether redirects are counted against a cap (the link's or a target's): such a link
    /// pays a durable write per redirect.
    pub fn is_capped(&self) -> bool {
        self.max_visits.is_some() || self.targets.iter().any(|t| t.max_visits.is_some())
    }

    /// Whether a redirect needs to know the visitor (rules, or a sticky weighted rotation).
    pub fn reads_visitor(&self) -> bool {
        !self.rules.is_empty() || (self.targets.len() > 1 && self.rotation == Rotation::Weighted)
    }

    /// What the rules read from a request, so that nothing else is parsed.
    pub fn needs(&self) -> Needs {
        let mut needs = Needs::default();
        for rule in &self.rules {
            let c = &rule.when;
            needs.agent |= !c.device.is_empty() || !c.os.is_empty() || !c.app.is_empty();
            needs.language |= !c.language.is_empty();
            needs.country |= !c.country.is_empty();
        }
        needs
    }

    /// The first rule that holds for the visitor, by index.
    pub fn matching_rule(&self, visitor: &Visitor<'_>) -> Option<usize> {
        self.rules.iter().position(|rule| rule.when.hold(visitor))
    }

    /// The cap of a slot, if it has one.
    pub fn cap(&self, slot: CapSlot) -> Option<u64> {
        match slot {
            CapSlot::Link => self.max_visits,
            CapSlot::Target(n) => self.targets.get(usize::from(n))?.max_visits,
        }
    }

    /// What is left of a slot's cap, given the counts a store holds (`None`: no cap).
    pub fn remaining(&self, slot: CapSlot, counted: &[(CapSlot, u64)]) -> Option<u64> {
        let used = counted
            .iter()
            .find(|(s, _)| *s == slot)
            .map_or(0, |(_, n)| *n);
        Some(self.cap(slot)?.saturating_sub(used))
    }

    /// The names of what the link has, for list markers: `password`, `max_visits`,
    /// `valid_from`, `fallback_url`, `rules`, `targets`.
    pub fn markers(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut mark = |on: bool, name| {
            if on {
                out.push(name);
            }
        };
        mark(self.password.is_some(), "password");
        mark(self.max_visits.is_some(), "max_visits");
        mark(self.valid_from.is_some(), "valid_from");
        mark(self.fallback_url.is_some(), "fallback_url");
        mark(!self.rules.is_empty(), "rules");
        mark(!self.targets.is_empty(), "targets");
        mark(self.in_app.is_some(), "in_app");
        mark(self.form.is_some(), "form");
        mark(
            self.preview.as_ref().is_some_and(|p| !p.is_empty()),
            "preview",
        );
        out
    }
}

/// Which request facts a link's rules read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// Device, OS or app: the user agent.
    pub agent: bool,
    pub language: bool,
    pub country: bool,
}

/// One targeting rule: when every condition holds, the visitor goes to `url`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub when: Conditions,
    pub url: String,
}

/// A rule's conditions; an empty list (or `None`) is no condition. A list holds when any of
/// its values matches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conditions {
    pub device: Vec<DeviceClass>,
    pub os: Vec<Os>,
    pub app: Vec<App>,
    /// Lowercase language tags.
    pub language: Vec<String>,
    /// Uppercase ISO 3166-1 alpha-2 codes.
    pub country: Vec<String>,
    pub ip: Vec<IpNet>,
    /// Every named parameter must be present with this value; `*` is any value.
    pub query: Vec<(String, String)>,
    pub after: Option<Millis>,
    pub before: Option<Millis>,
}

impl Conditions {
    /// Whether every condition holds for the visitor.
    pub fn hold(&self, v: &Visitor<'_>) -> bool {
        any_or_none(&self.device, |d| v.device == Some(*d))
            && any_or_none(&self.os, |o| v.os == Some(*o))
            && any_or_none(&self.app, |a| v.app == Some(*a))
            && any_or_none(&self.language, |tag| {
                v.languages.iter().any(|l| language_matches(tag, l))
            })
            && any_or_none(&self.country, |c| {
                v.country.is_some_and(|vc| vc.eq_ignore_ascii_case(c))
            })
            && any_or_none(&self.ip, |net| net.contains(&canonical(v.ip)))
            && self.query.iter().all(|(name, want)| {
                v.query()
                    .any(|(n, value)| n == *name && (want == "*" || value == *want))
            })
            && self.after.is_none_or(|at| v.now >= at)
            && self.before.is_none_or(|at| v.now < at)
    }

    pub fn is_empty(&self) -> bool {
        self == &Conditions::default()
    }
}

fn any_or_none<T>(values: &[T], matches: impl Fn(&T) -> bool) -> bool {
    values.is_empty() || values.iter().any(matches)
}

/// An IPv4-mapped IPv6 address is the IPv4 address it maps.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// A rule's tag matches a visitor's tag when they are equal, or when the rule's is the
/// visitor's primary language (`zh` matches `zh-cn`; `zh-cn` only itself). Both lowercase.
pub fn language_matches(rule_tag: &str, visitor_tag: &str) -> bool {
    visitor_tag == rule_tag
        || visitor_tag
            .strip_prefix(rule_tag)
            .is_some_and(|rest| rest.starts_with('-'))
}

/// The language tags of an `Accept-Language` header with q > 0, lowercased, in the order
/// given.
pub fn accepted_languages(header: &str) -> Vec<String> {
    header
        .split(',')
        .filter_map(|part| {
            let mut pieces = part.split(';');
            let tag = pieces.next()?.trim();
            if tag.is_empty() || tag == "*" {
                return None;
            }
            let q = pieces
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            (q > 0.0).then(|| tag.to_ascii_lowercase())
        })
        .collect()
}

/// What a request says that rules read. Parts a link's rules do not read ([`Needs`]) may be
/// left empty.
#[derive(Clone, Debug)]
pub struct Visitor<'a> {
    pub device: Option<DeviceClass>,
    pub os: Option<Os>,
    pub app: Option<App>,
    /// Lowercase tags with q > 0 ([`accepted_languages`]).
    pub languages: &'a [String],
    pub country: Option<&'a str>,
    pub ip: IpAddr,
    /// The raw query string, without `?`.
    pub raw_query: &'a str,
    pub now: Millis,
}

impl Visitor<'_> {
    fn query(&self) -> url::form_urlencoded::Parse<'_> {
        url::form_urlencoded::parse(self.raw_query.as_bytes())
    }
}

/// The device classes a rule may name (the visit's device class; `other` is never matched).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceClass {
    Desktop,
    Mobile,
    Tablet,
    Bot,
}

/// The operating systems a rule may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Os {
    Ios,
    Android,
    Windows,
    Macos,
    Linux,
    Chromeos,
}

impl Os {
    /// The OS a user agent names, by its tokens. Order matters: an iPhone's agent says
    /// "like Mac OS X", Android's and ChromeOS's say "Linux".
    pub fn of_user_agent(ua: &str) -> Option<Os> {
        if ua.contains("iPhone") || ua.contains("iPad") || ua.contains("iPod") {
            Some(Os::Ios)
        } else if ua.contains("Android") {
            Some(Os::Android)
        } else if ua.contains("CrOS") {
            Some(Os::Chromeos)
        } else if ua.contains("Windows") {
            Some(Os::Windows)
        } else if ua.contains("Macintosh") || ua.contains("Mac OS X") {
            Some(Os::Macos)
        } else if ua.contains("Linux") || ua.contains("X11") {
            Some(Os::Linux)
        } else {
            None
        }
    }
}

/// In-app browsers: apps that open links in their own web view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum App {
    /// WeChat, and WeChat Work (whose agent also says MicroMessenger).
    Wechat,
    Qq,
    Weibo,
    Dingtalk,
    Alipay,
    /// Douyin, and TikTok.
    Douyin,
    Facebook,
    Instagram,
    Line,
}

impl App {
    pub const ALL: [App; 9] = [
        App::Wechat,
        App::Qq,
        App::Weibo,
        App::Dingtalk,
        App::Alipay,
        App::Douyin,
        App::Facebook,
        App::Instagram,
        App::Line,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            App::Wechat => "wechat",
            App::Qq => "qq",
            App::Weibo => "weibo",
            App::Dingtalk => "dingtalk",
            App::Alipay => "alipay",
            App::Douyin => "douyin",
            App::Facebook => "facebook",
            App::Instagram => "instagram",
            App::Line => "line",
        }
    }

    /// The in-app browser a user agent comes from, by the token each app adds to its web
    /// view's agent. WeChat first: WeChat Work's agent holds both `wxwork` and
    /// `MicroMessenger`, and QQ's own token would match WeChat's `QQ` substrings otherwise.
    pub fn of_user_agent(ua: &str) -> Option<App> {
        if ua.contains("MicroMessenger") || ua.contains("wxwork") {
            Some(App::Wechat)
        } else if ua.contains("DingTalk") {
            Some(App::Dingtalk)
        } else if ua.contains("AlipayClient") {
            Some(App::Alipay)
        } else if ua.contains("aweme") || ua.contains("musical_ly") || ua.contains("TikTok") {
            Some(App::Douyin)
        } else if ua.contains("Weibo") || ua.contains("weibo") {
            Some(App::Weibo)
        } else if ua.contains(" QQ/") || ua.starts_with("QQ/") {
            Some(App::Qq)
        } else if ua.contains("FBAN") || ua.contains("FBAV") || ua.contains("FB_IAB") {
            Some(App::Facebook)
        } else if ua.contains("Instagram") {
            Some(App::Instagram)
        } else if ua.contains(" Line/") {
            Some(App::Line)
        } else {
            None
        }
    }
}

/// A rotation target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub url: String,
    /// 1 to [`MAX_WEIGHT`].
    pub weight: u32,
    /// Redirects after which this target is full.
    pub max_visits: Option<u64>,
}

/// How a redirect picks among targets that are not full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rotation {
    /// At random by weight; the same visitor keeps the same target while it is available.
    #[default]
    Weighted,
    /// Each redirect the next target in order.
    RoundRobin,
    /// The first target not yet full.
    Failover,
}

impl Rotation {
    pub fn as_str(self) -> &'static str {
        match self {
            Rotation::Weighted => "weighted",
            Rotation::RoundRobin => "round_robin",
            Rotation::Failover => "failover",
        }
    }

    pub fn parse(name: &str) -> Option<Rotation> {
        match name {
            "weighted" => Some(Rotation::Weighted),
            "round_robin" => Some(Rotation::RoundRobin),
            "failover" => Some(Rotation::Failover),
            _ => None,
        }
    }
}

/// Picks a target among those `available` says are not full: `turn` is the round-robin
/// counter's value for this redirect, `visitor` the visitor's 64-bit hash (for weighted
/// stickiness). `None` when every target is full.
///
/// Weighted picks by rendezvous hashing: each target scores `-ln(u) / weight` with `u` drawn
/// from the visitor's hash and the target's index, and the lowest score wins. A visitor's
/// choice needs no memory, stays put while its target is available, and moves only when it
/// fills; over many visitors each target wins its weight's share.
pub fn pick_target(
    rotation: Rotation,
    targets: &[Target],
    available: impl Fn(usize) -> bool,
    turn: u64,
    visitor: u64,
) -> Option<usize> {
    let n = targets.len();
    match rotation {
        Rotation::Failover => (0..n).find(|&i| available(i)),
        Rotation::RoundRobin => {
            let start = usize::try_from(turn % (n.max(1) as u64)).unwrap_or(0);
            (0..n).map(|k| (start + k) % n).find(|&i| available(i))
        }
        Rotation::Weighted => (0..n)
            .filter(|&i| available(i))
            .map(|i| {
                let u = unit(mix(visitor ^ mix(i as u64 + 1)));
                let weight = f64::from(targets[i].weight.max(1));
                (i, -u.ln() / weight)
            })
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i),
    }
}

/// SplitMix64's finaliser: spreads any 64 bits over all 64.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// 64 bits as a number in (0, 1].
fn unit(x: u64) -> f64 {
    ((x >> 11) as f64 + 1.0) / (1u64 << 53) as f64
}

/// Which destination served a redirect; each visit records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Route {
    /// The link's own URL.
    Default,
    /// Rule `n` (0-based) held.
    Rule(u16),
    /// Rotation target `n` (0-based).
    Target(u16),
    /// No redirect: the visitor was shown the page for in-app browsers.
    InAppPage,
    /// No redirect: a link-preview crawler was shown the link's preview.
    CrawlerPreview,
}

impl Route {
    /// `default`, `rule:N` or `target:N`.
    pub fn name(self) -> String {
        match self {
            Route::Default => "default".into(),
            Route::Rule(n) => format!("rule:{n}"),
            Route::Target(n) => format!("target:{n}"),
            Route::InAppPage => "in_app".into(),
            Route::CrawlerPreview => "preview".into(),
        }
    }

    /// The route a name says.
    pub fn parse(name: &str) -> Option<Route> {
        match name {
            "default" => return Some(Route::Default),
            "in_app" => return Some(Route::InAppPage),
            "preview" => return Some(Route::CrawlerPreview),
            _ => {}
        }
        let (kind, n) = name.split_once(':')?;
        let n = n.parse().ok()?;
        match kind {
            "rule" => Some(Route::Rule(n)),
            "target" => Some(Route::Target(n)),
            _ => None,
        }
    }

    /// The URL this route leads to on a link, if it still has it.
    pub fn url<'a>(self, default: &'a str, options: Option<&'a LinkOptions>) -> Option<&'a str> {
        match self {
            Route::Default => Some(default),
            Route::Rule(n) => options?.rules.get(usize::from(n)).map(|r| r.url.as_str()),
            Route::Target(n) => options?.targets.get(usize::from(n)).map(|t| t.url.as_str()),
            Route::InAppPage | Route::CrawlerPreview => None,
        }
    }
}

/// Why a link ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndedBy {
    /// Its `expires_at` passed.
    Expiry,
    /// Its visit cap (or every target's) was reached.
    MaxVisits,
}

impl EndedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            EndedBy::Expiry => "expiry",
            EndedBy::MaxVisits => "max_visits",
        }
    }
}

/// A counter a capped redirect takes one from: the link's own cap, or a target's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CapSlot {
    Link,
    Target(u16),
}

impl CapSlot {
    /// The slot of target `i`.
    pub fn target(i: usize) -> CapSlot {
        CapSlot::Target(u16::try_from(i).unwrap_or(u16::MAX))
    }

    /// The number a slot is stored as (never renumber): 0 the link, n + 1 target n.
    pub fn stored(self) -> u32 {
        match self {
            CapSlot::Link => 0,
            CapSlot::Target(n) => u32::from(n) + 1,
        }
    }

    pub fn of_stored(n: u32) -> Option<CapSlot> {
        match n {
            0 => Some(CapSlot::Link),
            n => u16::try_from(n - 1).ok().map(CapSlot::Target),
        }
    }
}

/// One redirect of a capped link, to be counted: every slot is taken together, or none when
/// any is at its cap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VisitClaim {
    pub link_id: u64,
    /// Each slot with its cap, in slot order.
    pub slots: Vec<(CapSlot, u64)>,
}

/// What a store answers to a [`VisitClaim`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// Counted and durable: the redirect may be answered.
    Granted,
    /// This slot is at its cap; nothing was counted.
    Full(CapSlot),
}

/// What stands between a visitor and the destination, first to last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// The password form (or `X-Link-Password`).
    Password,
    /// The form before the visit.
    Form,
    /// The page that says to open the link in the system browser.
    InAppPage(App),
    /// The page of `og:` tags for a link-preview crawler.
    CrawlerPreview,
    /// Nothing: the rules and targets choose, and the visitor is redirected.
    Destination,
}

/// What the visitor has already passed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Passed {
    /// The password was given and found right.
    pub password: bool,
    /// The form was filled (now, or within [`crate::gates::FORM_PASS_MS`] by the pass cookie).
    pub form: bool,
}

/// The first gate that stands for this visitor, by the order of precedence on `GET /{code}`
/// (an ended link or one not yet valid never gets here): password → form → in-app page →
/// crawler preview → rules and targets. `options` is `None` for a plain link; `in_app` is
/// `links.in_app`, for links that do not say.
pub fn gate(
    options: Option<&LinkOptions>,
    in_app: InApp,
    passed: Passed,
    user_agent: &str,
) -> Gate {
    if let Some(o) = options {
        if o.password.is_some() && !passed.password {
            return Gate::Password;
        }
        if o.form.is_some() && !passed.form {
            return Gate::Form;
        }
    }
    let in_app = options.and_then(|o| o.in_app).unwrap_or(in_app);
    if in_app == InApp::Interstitial {
        if let Some(app) = App::of_user_agent(user_agent) {
            return Gate::InAppPage(app);
        }
    }
    if options.is_some_and(|o| o.preview.as_ref().is_some_and(|p| !p.is_empty()))
        && is_preview_crawler(user_agent)
    {
        return Gate::CrawlerPreview;
    }
    Gate::Destination
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visitor<'a>(languages: &'a [String], raw_query: &'a str) -> Visitor<'a> {
        Visitor {
            device: Some(DeviceClass::Mobile),
            os: Some(Os::Android),
            app: Some(App::Wechat),
            languages,
            country: Some("DE"),
            ip: "10.1.2.3".parse().expect("ip"),
            raw_query,
            now: 1_000,
        }
    }

    #[test]
    fn conditions_hold_when_every_list_has_a_match() {
        let langs = accepted_languages("zh-CN,zh;q=0.9,en;q=0");
        assert_eq!(langs, ["zh-cn", "zh"]);
        let v = visitor(&langs, "utm=mail&x=1");
        let mut c = Conditions {
            device: vec![DeviceClass::Desktop, DeviceClass::Mobile],
            os: vec![Os::Android],
            app: vec![App::Wechat],
            language: vec!["zh".into()],
            country: vec!["DE".into()],
            ip: vec!["10.0.0.0/8".parse().expect("net")],
            query: vec![("utm".into(), "mail".into()), ("x".into(), "*".into())],
            after: Some(1_000),
            before: Some(1_001),
        };
        assert!(c.hold(&v));
        c.language = vec!["en".into()];
        assert!(!c.hold(&v), "q=0 is refused");
        c.language = vec!["zh-tw".into()];
        assert!(!c.hold(&v));
        c.language = vec![];
        c.before = Some(1_000);
        assert!(!c.hold(&v), "before is exclusive");
        c.before = None;
        c.query.push(("y".into(), "*".into()));
        assert!(!c.hold(&v), "a missing parameter fails even with *");
    }

    #[test]
    fn apps_and_systems_are_told_from_their_agents() {
        let wechat = "Mozilla/5.0 (Linux; Android 13; Pixel 7) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/116.0 Mobile Safari/537.36 XWEB/1160065 MMWEBSDK/20231202 MicroMessenger/8.0.47.2560(0x28002F30) WeChat/arm64 Weixin NetType/WIFI Language/zh_CN";
        assert_eq!(App::of_user_agent(wechat), Some(App::Wechat));
        assert_eq!(Os::of_user_agent(wechat), Some(Os::Android));
        let iphone = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 QQ/8.9.80.626 V1_IPH_SQ_8.9.80_1_APP_A Pixel/1170";
        assert_eq!(App::of_user_agent(iphone), Some(App::Qq));
        assert_eq!(Os::of_user_agent(iphone), Some(Os::Ios));
        assert_eq!(
            Os::of_user_agent("Mozilla/5.0 (X11; CrOS x86_64 14541.0.0)"),
            Some(Os::Chromeos)
        );
        assert_eq!(App::of_user_agent("Mozilla/5.0 (Windows NT 10.0)"), None);
    }

    #[test]
    fn weighted_picks_follow_the_weights_and_stay_with_a_visitor() {
        let targets: Vec<Target> = [1, 2, 7]
            .into_iter()
            .map(|w| Target {
                url: String::new(),
                weight: w,
                max_visits: None,
            })
            .collect();
        let mut wins = [0u32; 3];
        for visitor in 0..30_000u64 {
            let i = pick_target(Rotation::Weighted, &targets, |_| true, 0, mix(visitor))
                .expect("a target");
            wins[i] += 1;
            let again = pick_target(Rotation::Weighted, &targets, |_| true, 9, mix(visitor));
            assert_eq!(again, Some(i), "sticky");
        }
        for (i, share) in [0.1, 0.2, 0.7].into_iter().enumerate() {
            let got = f64::from(wins[i]) / 30_000.0;
            assert!((got - share).abs() < 0.02, "target {i}: {got} for {share}");
        }
        // A full target's visitors move; the others stay.
        let moved = pick_target(Rotation::Weighted, &targets, |i| i != 2, 0, mix(1));
        assert!(moved.is_some_and(|i| i != 2));
        assert_eq!(
            pick_target(Rotation::Failover, &targets, |i| i > 0, 0, 0),
            Some(1)
        );
        assert_eq!(
            pick_target(Rotation::RoundRobin, &targets, |i| i != 1, 1, 0),
            Some(2)
        );
        assert_eq!(
            pick_target(Rotation::RoundRobin, &targets, |_| false, 1, 0),
            None
        );
    }

    #[test]
    fn routes_and_slots_round_trip_their_names() {
        for route in [Route::Default, Route::Rule(3), Route::Target(99)] {
            assert_eq!(Route::parse(&route.name()), Some(route));
        }
        for slot in [CapSlot::Link, CapSlot::Target(0), CapSlot::Target(99)] {
            assert_eq!(CapSlot::of_stored(slot.stored()), Some(slot));
        }
    }
}
