//! Words a code may never be (reserved route segments) and words a generated
//! code may not contain (configured blocked words). Pure computation; this
//! module does no I/O.

/// First path segments of built-in routes (and well-known files) that must
/// never be served as short codes, compared ASCII-case-insensitively.
///
/// Entries containing `.` can never pass the code syntax check anyway; they are
/// listed so this stays the single list the router and code checks agree on.
pub const RESERVED: &[&str] = &[
    "api",
    "ui",
    // `/api/v1/links/batch` is a route: a link with this code could not be managed.
    "batch",
    "static",
    "assets",
    "healthz",
    "readyz",
    "livez",
    "metrics",
    "favicon.ico",
    "robots.txt",
    "sitemap.xml",
    "yourls-api.php",
    "login",
    "logout",
    "admin",
    "rest",
    "shlink",
    ".well-known",
    "well-known",
];

/// True if `code` equals a [`RESERVED`] word, ignoring ASCII case.
pub fn is_reserved(code: &str) -> bool {
    RESERVED.iter().any(|w| w.eq_ignore_ascii_case(code))
}

/// Configured content rules for generated codes.
#[derive(Clone, Debug, Default)]
pub struct CodeRules {
    /// Lowercased, non-empty blocked words.
    blocked: Vec<String>,
}

impl CodeRules {
    /// Builds rules from blocked words; words are trimmed and lowercased, and
    /// empty ones dropped because an empty substring would block every code.
    pub fn new(blocked_words: impl IntoIterator<Item = impl AsRef<str>>) -> Self {
        let mut blocked: Vec<String> = blocked_words
            .into_iter()
            .map(|w| w.as_ref().trim().to_lowercase())
            .filter(|w| !w.is_empty())
            .collect();
        blocked.sort();
        blocked.dedup();
        CodeRules { blocked }
    }

    /// The normalized blocked words.
    pub fn blocked_words(&self) -> &[String] {
        &self.blocked
    }

    /// True if `code` contains any blocked word, ignoring case.
    pub fn is_blocked(&self, code: &str) -> bool {
        if self.blocked.is_empty() {
            return false;
        }
        let lower = code.to_lowercase();
        self.blocked.iter().any(|w| lower.contains(w.as_str()))
    }

    /// True if a generated `code` may be issued: neither reserved nor blocked.
    pub fn allows_generated(&self, code: &str) -> bool {
        !is_reserved(code) && !self.is_blocked(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_is_case_insensitive() {
        assert!(is_reserved("api"));
        assert!(is_reserved("API"));
        assert!(is_reserved("Healthz"));
        assert!(is_reserved("UI"));
        assert!(is_reserved("Favicon.ICO"));
        assert!(is_reserved("yourls-api.php"));
        assert!(!is_reserved("apis"));
        assert!(!is_reserved("ap"));
        assert!(!is_reserved(""));
    }

    #[test]
    fn reserved_list_is_lowercase_and_unique() {
        let mut seen = std::collections::HashSet::new();
        for w in RESERVED {
            assert_eq!(*w, w.to_ascii_lowercase());
            assert!(seen.insert(*w), "duplicate reserved word {w}");
        }
    }

    #[test]
    fn blocked_substring_case_insensitive() {
        let rules = CodeRules::new(["Bad", "  ugly ", ""]);
        assert_eq!(rules.blocked_words(), ["bad", "ugly"]);
        assert!(rules.is_blocked("bad"));
        assert!(rules.is_blocked("xBADx"));
        assert!(rules.is_blocked("aBaD"));
        assert!(rules.is_blocked("UGLY1"));
        assert!(!rules.is_blocked("ba-d"));
        assert!(!rules.is_blocked("good"));
        assert!(!rules.allows_generated("xbAdx"));
        assert!(!rules.allows_generated("Api"));
        assert!(rules.allows_generated("abc"));
    }

    #[test]
    fn default_blocks_nothing() {
        let rules = CodeRules::default();
        assert!(!rules.is_blocked("anything"));
        assert!(rules.allows_generated("anything"));
        assert!(!rules.allows_generated("metrics"));
        let empty_only = CodeRules::new(Vec::<String>::new());
        assert!(!empty_only.is_blocked("x"));
    }
}
