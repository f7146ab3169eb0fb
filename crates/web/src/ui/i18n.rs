//! The pages' two languages (English, Simplified Chinese): one embedded TOML catalogue per
//! language (`assets/i18n/*.toml`), language negotiation from the `vsl_lang` cookie and
//! `Accept-Language`, and English as the fallback for any key a catalogue lacks.
//!
//! Handlers never hold user-facing words; they pass catalogue keys, and templates read the
//! catalogue as `t.<key>`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::{header, HeaderMap};

/// The languages the pages speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lang {
    En,
    ZhCn,
}

impl Lang {
    pub const ALL: [Lang; 2] = [Lang::En, Lang::ZhCn];

    /// The BCP 47 tag, used in `<html lang>` and in the cookie.
    pub fn tag(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::ZhCn => "zh-CN",
        }
    }

    /// The language's own name, for the switcher.
    pub fn native_name(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::ZhCn => "简体中文",
        }
    }

    pub fn from_tag(tag: &str) -> Option<Lang> {
        let tag = tag.trim().to_ascii_lowercase();
        if tag == "en" || tag.starts_with("en-") {
            Some(Lang::En)
        } else if tag == "zh" || tag.starts_with("zh-") {
            Some(Lang::ZhCn)
        } else {
            None
        }
    }

    /// The other language, for the switcher.
    pub fn other(self) -> Lang {
        match self {
            Lang::En => Lang::ZhCn,
            Lang::ZhCn => Lang::En,
        }
    }

    fn source(self) -> &'static str {
        match self {
            Lang::En => include_str!("../../../../assets/i18n/en.toml"),
            Lang::ZhCn => include_str!("../../../../assets/i18n/zh-CN.toml"),
        }
    }
}

/// The cookie that remembers a chosen language.
pub const LANG_COOKIE: &str = "vsl_lang";

/// The language of a request: the cookie if it names one, else the best `Accept-Language`
/// entry we speak, else English.
pub fn negotiate(headers: &HeaderMap) -> Lang {
    if let Some(lang) = super::session::cookie(headers, LANG_COOKIE).and_then(Lang::from_tag) {
        return lang;
    }
    accept_language(headers).unwrap_or(Lang::En)
}

/// The highest-weighted language of `Accept-Language` that we speak.
pub fn accept_language(headers: &HeaderMap) -> Option<Lang> {
    let mut best: Option<(f32, Lang)> = None;
    for value in headers.get_all(header::ACCEPT_LANGUAGE) {
        let Ok(value) = value.to_str() else { continue };
        for part in value.split(',') {
            let mut pieces = part.split(';');
            let Some(lang) = pieces.next().and_then(Lang::from_tag) else {
                continue;
            };
            let q = pieces
                .find_map(|p| p.trim().strip_prefix("q="))
                .and_then(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            if q > 0.0 && best.is_none_or(|(b, _)| q > b) {
                best = Some((q, lang));
            }
        }
    }
    best.map(|(_, lang)| lang)
}

/// Every language's words, English filled in where a catalogue lacks a key.
pub struct Catalogues {
    by_lang: Vec<(Lang, Arc<BTreeMap<String, String>>)>,
    /// The same words nested by table, as templates read them (`t.nav.links`).
    nested: Vec<(Lang, minijinja::Value)>,
}

/// A catalogue that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("catalogue {lang}: {message}")]
pub struct CatalogueError {
    lang: &'static str,
    message: String,
}

impl Catalogues {
    pub fn load() -> Result<Self, CatalogueError> {
        let english = parse(Lang::En)?;
        let mut by_lang = Vec::new();
        let mut nested = Vec::new();
        for lang in Lang::ALL {
            let mut words = english.clone();
            if lang != Lang::En {
                words.extend(parse(lang)?);
            }
            nested.push((lang, minijinja::Value::from_serialize(nest(&words))));
            by_lang.push((lang, Arc::new(words)));
        }
        Ok(Self { by_lang, nested })
    }

    /// The words of a language as a template value.
    pub fn template(&self, lang: Lang) -> minijinja::Value {
        self.nested
            .iter()
            .find(|(l, _)| *l == lang)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    }

    /// The words of a language.
    pub fn words(&self, lang: Lang) -> Arc<BTreeMap<String, String>> {
        self.by_lang
            .iter()
            .find(|(l, _)| *l == lang)
            .or(self.by_lang.first())
            .map(|(_, w)| w.clone())
            .unwrap_or_default()
    }

    /// One word, for text built outside templates (CSV headers, page titles).
    pub fn get(&self, lang: Lang, key: &str) -> String {
        self.words(lang)
            .get(key)
            .cloned()
            .unwrap_or_else(|| key.to_string())
    }
}

/// A catalogue's keys and texts, flattened: `[err] invalid_url` is `err.invalid_url`.
pub fn parse(lang: Lang) -> Result<BTreeMap<String, String>, CatalogueError> {
    let fail = |message: String| CatalogueError {
        lang: lang.tag(),
        message,
    };
    let table: toml::Table = lang.source().parse().map_err(|e| fail(format!("{e}")))?;
    let mut out = BTreeMap::new();
    flatten("", &table, &mut out).map_err(fail)?;
    Ok(out)
}

/// Dotted keys back into nested tables.
fn nest(words: &BTreeMap<String, String>) -> serde_json::Value {
    let mut root = serde_json::Map::new();
    for (key, text) in words {
        let mut node = &mut root;
        let mut parts = key.split('.').peekable();
        while let Some(part) = parts.next() {
            if parts.peek().is_none() {
                node.insert(part.to_string(), serde_json::Value::String(text.clone()));
            } else {
                let next = node
                    .entry(part.to_string())
                    .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
                match next {
                    serde_json::Value::Object(map) => node = map,
                    _ => break,
                }
            }
        }
    }
    serde_json::Value::Object(root)
}

fn flatten(
    prefix: &str,
    table: &toml::Table,
    out: &mut BTreeMap<String, String>,
) -> Result<(), String> {
    for (key, value) in table {
        let full = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            toml::Value::String(s) => {
                out.insert(full, s.clone());
            }
            toml::Value::Table(t) => flatten(&full, t, out)?,
            _ => return Err(format!("`{full}` is not a string")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn catalogues_have_the_same_keys() {
        let en: Vec<String> = parse(Lang::En).expect("en").into_keys().collect();
        for lang in Lang::ALL {
            let keys: Vec<String> = parse(lang).expect("parse").into_keys().collect();
            let missing: Vec<&String> = en.iter().filter(|k| !keys.contains(k)).collect();
            let extra: Vec<&String> = keys.iter().filter(|k| !en.contains(k)).collect();
            assert!(
                missing.is_empty() && extra.is_empty(),
                "{}: missing {missing:?}, not in English {extra:?}",
                lang.tag()
            );
        }
    }

    #[test]
    fn missing_keys_fall_back_to_english() {
        let c = Catalogues::load().expect("load");
        let zh = c.words(Lang::ZhCn);
        let en = c.words(Lang::En);
        assert_eq!(zh.len(), en.len());
        assert_ne!(zh.get("nav.links"), en.get("nav.links"));
    }

    #[test]
    fn accept_language_weights() {
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT_LANGUAGE,
            HeaderValue::from_static("fr;q=1, en;q=0.5, zh-TW;q=0.8"),
        );
        assert_eq!(accept_language(&h), Some(Lang::ZhCn));
        h.insert(header::ACCEPT_LANGUAGE, HeaderValue::from_static("de"));
        assert_eq!(negotiate(&h), Lang::En);
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=b; vsl_lang=zh-CN"),
        );
        assert_eq!(negotiate(&h), Lang::ZhCn);
    }
}
