//! The pages a visitor may meet before the destination, as stored, and their pure rules: the
//! in-app browser page, the form before the visit (and the leads it collects, their fields'
//! checks), the preview social crawlers read (and who is such a crawler). Which one stands
//! for a visitor is decided from a link's options ([`crate::options::gate`], the one place
//! that orders them). No I/O and no clock.

use serde::{Deserialize, Serialize};

use super::time::{Millis, DAY_MS};

/// Fields a form has at most.
pub const MAX_FORM_FIELDS: usize = 10;
/// A `text` value's length in characters, at most.
pub const MAX_TEXT_CHARS: usize = 500;
/// How long leads are kept when the form does not say.
pub const DEFAULT_LEAD_RETENTION: Millis = 180 * DAY_MS;
/// How long a browser that filled a link's form goes through it again without it.
pub const FORM_PASS_MS: Millis = 30 * DAY_MS;

/// What a link does for a visitor inside an app's own browser (WeChat, QQ, …).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InApp {
    /// Redirect as for anyone else.
    #[default]
    Direct,
    /// A page that says to open the link in the system browser; no redirect.
    Interstitial,
}

impl InApp {
    pub fn as_str(self) -> &'static str {
        match self {
            InApp::Direct => "direct",
            InApp::Interstitial => "interstitial",
        }
    }

    pub fn parse(text: &str) -> Option<InApp> {
        match text {
            "direct" => Some(InApp::Direct),
            "interstitial" => Some(InApp::Interstitial),
            _ => None,
        }
    }
}

/// A form a visitor fills before the destination.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeadForm {
    /// 1 to [`MAX_FORM_FIELDS`], names unique.
    pub fields: Vec<FormField>,
    /// The text beside a required checkbox; `None`: no checkbox.
    pub consent: Option<String>,
    /// How long a lead is kept.
    pub retention: Millis,
}

impl LeadForm {
    /// The visitor's values checked against the fields, in the fields' order: the values to
    /// store (normalised), or each field's problem. `value` gives what was sent for a name;
    /// `consented` whether the consent box was ticked.
    pub fn check<'a>(
        &self,
        value: impl Fn(&str) -> Option<&'a str>,
        consented: bool,
    ) -> Result<Vec<(String, String)>, Problems> {
        let mut values = Vec::with_capacity(self.fields.len());
        let mut problems = Vec::new();
        for field in &self.fields {
            let given = value(&field.name).map(str::trim).unwrap_or("");
            match field.check(given) {
                Ok(v) => values.push((field.name.clone(), v)),
                Err(p) => problems.push((field.name.clone(), p)),
            }
        }
        if self.consent.is_some() && !consented {
            problems.push((CONSENT_FIELD.to_string(), FieldProblem::Required));
        }
        if problems.is_empty() {
            Ok(values)
        } else {
            Err(problems)
        }
    }
}

/// Each refused field's name and why.
pub type Problems = Vec<(String, FieldProblem)>;

/// The form's consent checkbox's name.
pub const CONSENT_FIELD: &str = "consent";
/// Names a field may not take: the form's own inputs.
pub const RESERVED_FIELD_NAMES: [&str; 3] = ["password", CONSENT_FIELD, "form"];

/// One input of a [`LeadForm`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormField {
    /// `[a-z0-9_]`, 1–32 characters: the input's name and the lead's key.
    pub name: String,
    /// What the visitor reads beside the input.
    pub label: String,
    pub kind: FieldKind,
    pub required: bool,
}

impl FormField {
    /// The value to store for what the visitor typed (trimmed), or why it will not do.
    pub fn check(&self, given: &str) -> Result<String, FieldProblem> {
        if given.is_empty() {
            return if self.required {
                Err(FieldProblem::Required)
            } else {
                Ok(String::new())
            };
        }
        match self.kind {
            FieldKind::Tel => phone_number(given).ok_or(FieldProblem::Tel),
            FieldKind::Email if is_email(given) => Ok(given.to_string()),
            FieldKind::Email => Err(FieldProblem::Email),
            FieldKind::Text if given.chars().count() <= MAX_TEXT_CHARS => Ok(given.to_string()),
            FieldKind::Text => Err(FieldProblem::TooLong),
        }
    }
}

/// The kinds of input a form may ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldKind {
    Tel,
    Email,
    Text,
}

impl FieldKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FieldKind::Tel => "tel",
            FieldKind::Email => "email",
            FieldKind::Text => "text",
        }
    }

    pub fn parse(text: &str) -> Option<FieldKind> {
        match text {
            "tel" => Some(FieldKind::Tel),
            "email" => Some(FieldKind::Email),
            "text" => Some(FieldKind::Text),
            _ => None,
        }
    }
}

/// Why a visitor's value was refused (each has its message in the pages' catalogues).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldProblem {
    Required,
    Tel,
    Email,
    TooLong,
}

impl FieldProblem {
    /// The catalogue key of its message.
    pub fn key(self) -> &'static str {
        match self {
            FieldProblem::Required => "required",
            FieldProblem::Tel => "tel",
            FieldProblem::Email => "email",
            FieldProblem::TooLong => "too_long",
        }
    }
}

/// A phone number as stored: an optional `+` and 6–20 digits, spaces and dashes dropped.
pub fn phone_number(text: &str) -> Option<String> {
    let (plus, rest) = match text.strip_prefix('+') {
        Some(rest) => ("+", rest),
        None => ("", text),
    };
    let mut digits = String::with_capacity(rest.len() + 1);
    digits.push_str(plus);
    for c in rest.chars() {
        match c {
            '0'..='9' => digits.push(c),
            ' ' | '-' => {}
            _ => return None,
        }
    }
    let count = digits.len() - plus.len();
    (6..=20).contains(&count).then_some(digits)
}

/// One `@`, something before it, and a dotted domain after it with no empty label; no
/// spaces; at most 254 characters.
pub fn is_email(text: &str) -> bool {
    let Some((local, domain)) = text.split_once('@') else {
        return false;
    };
    text.len() <= 254
        && !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && domain.split('.').all(|label| !label.is_empty())
        && !text.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// What a link shows social crawlers: `og:title`, `og:description`, `og:image`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocialPreview {
    pub title: Option<String>,
    pub description: Option<String>,
    /// An http(s) URL.
    pub image: Option<String>,
}

impl SocialPreview {
    pub fn is_empty(&self) -> bool {
        self.title.is_none() && self.description.is_none() && self.image.is_none()
    }
}

/// The link-preview crawlers of chat and social apps, by a token of their user agents.
const PREVIEW_CRAWLERS: [&str; 8] = [
    "facebookexternalhit",
    "twitterbot",
    "linkedinbot",
    "slackbot",
    "telegrambot",
    "whatsapp",
    "discordbot",
    "skypeuripreview",
];

/// Whether a user agent is a link-preview crawler (case-insensitive, without copying it: it
/// is asked on the redirect of every link with a preview).
pub fn is_preview_crawler(user_agent: &str) -> bool {
    let ua = user_agent.as_bytes();
    PREVIEW_CRAWLERS.iter().any(|token| {
        ua.windows(token.len())
            .any(|w| w.eq_ignore_ascii_case(token.as_bytes()))
    })
}

/// A lead a visitor left through a link's form.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lead {
    /// Assigned by the store, increasing: the cursor of listings.
    pub id: u64,
    pub link_id: u64,
    pub at: Millis,
    /// Field name and value, in the form's order at the time.
    pub values: Vec<(String, String)>,
    /// The consent text the visitor ticked, as it read then; `None`: the form had none.
    pub consent: Option<String>,
}

/// A page of a link's leads, newest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeadPage {
    pub leads: Vec<Lead>,
    /// The cursor for the next (older) page, if there is one.
    pub next: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{gate, App, Gate, LinkOptions, Passed};

    #[test]
    fn phone_numbers() {
        assert_eq!(
            phone_number("+86 138-0013-8000").as_deref(),
            Some("+8613800138000")
        );
        assert_eq!(phone_number("123456").as_deref(), Some("123456"));
        assert_eq!(phone_number("12345"), None);
        assert_eq!(phone_number("+123456789012345678901"), None);
        assert_eq!(phone_number("12345a6"), None);
        assert_eq!(phone_number("++123456"), None);
        assert_eq!(phone_number("(555) 123456"), None);
    }

    #[test]
    fn emails() {
        assert!(is_email("a@example.com"));
        assert!(is_email("first.last+tag@sub.example.cn"));
        assert!(!is_email("a@example"));
        assert!(!is_email("@example.com"));
        assert!(!is_email("a@@example.com"));
        assert!(!is_email("a@b@example.com"));
        assert!(!is_email("a b@example.com"));
        assert!(!is_email("a@example..com"));
        assert!(!is_email("a@.com"));
    }

    #[test]
    fn crawlers() {
        for ua in [
            "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
            "Twitterbot/1.0",
            "LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)",
            "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
            "TelegramBot (like TwitterBot)",
            "WhatsApp/2.23.20.0",
            "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
            "Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5",
        ] {
            assert!(is_preview_crawler(ua), "{ua}");
        }
        assert!(!is_preview_crawler(
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/124.0 Safari/537.36"
        ));
    }

    fn wechat() -> &'static str {
        "Mozilla/5.0 (Linux; Android 13) AppleWebKit/537.36 Chrome/116.0 Mobile Safari/537.36 \
         MicroMessenger/8.0.42.2460(0x28002A58) NetType/WIFI Language/zh_CN"
    }

    #[test]
    fn precedence() {
        let form = LeadForm {
            fields: vec![FormField {
                name: "phone".into(),
                label: "Phone".into(),
                kind: FieldKind::Tel,
                required: true,
            }],
            consent: None,
            retention: DEFAULT_LEAD_RETENTION,
        };
        let all = LinkOptions {
            password: Some("$argon2id$...".into()),
            form: Some(form),
            in_app: Some(InApp::Interstitial),
            preview: Some(SocialPreview {
                title: Some("T".into()),
                ..SocialPreview::default()
            }),
            ..LinkOptions::default()
        };
        let none = Passed::default();
        let pw = Passed {
            password: true,
            form: false,
        };
        let both = Passed {
            password: true,
            form: true,
        };
        assert_eq!(
            gate(Some(&all), InApp::Direct, none, wechat()),
            Gate::Password
        );
        assert_eq!(gate(Some(&all), InApp::Direct, pw, wechat()), Gate::Form);
        assert_eq!(
            gate(Some(&all), InApp::Direct, both, wechat()),
            Gate::InAppPage(App::Wechat)
        );
        assert_eq!(
            gate(Some(&all), InApp::Direct, both, "Twitterbot/1.0"),
            Gate::CrawlerPreview
        );
        assert_eq!(
            gate(Some(&all), InApp::Direct, both, "Mozilla/5.0 Chrome/124"),
            Gate::Destination
        );
        // The link's own choice wins over the default, both ways.
        let direct = LinkOptions {
            in_app: Some(InApp::Direct),
            ..LinkOptions::default()
        };
        assert_eq!(
            gate(Some(&direct), InApp::Interstitial, none, wechat()),
            Gate::Destination
        );
        assert_eq!(
            gate(None, InApp::Interstitial, none, wechat()),
            Gate::InAppPage(App::Wechat)
        );
        assert_eq!(gate(None, InApp::Direct, none, wechat()), Gate::Destination);
        // A plain link has no preview to show a crawler.
        assert_eq!(
            gate(None, InApp::Direct, none, "Twitterbot/1.0"),
            Gate::Destination
        );
    }

    #[test]
    fn a_form_names_each_problem() {
        let form = LeadForm {
            fields: vec![
                FormField {
                    name: "phone".into(),
                    label: "Phone".into(),
                    kind: FieldKind::Tel,
                    required: true,
                },
                FormField {
                    name: "email".into(),
                    label: "Email".into(),
                    kind: FieldKind::Email,
                    required: false,
                },
            ],
            consent: Some("I agree".into()),
            retention: DEFAULT_LEAD_RETENTION,
        };
        let problems = form
            .check(|n| (n == "email").then_some("nope"), false)
            .unwrap_err();
        assert_eq!(
            problems,
            vec![
                ("phone".to_string(), FieldProblem::Required),
                ("email".to_string(), FieldProblem::Email),
                ("consent".to_string(), FieldProblem::Required),
            ]
        );
        let ok = form
            .check(|n| (n == "phone").then_some(" +1 555-0100 "), true)
            .unwrap();
        assert_eq!(
            ok,
            vec![
                ("phone".to_string(), "+15550100".to_string()),
                ("email".to_string(), String::new())
            ]
        );
    }
}
