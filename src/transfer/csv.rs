//! The CSV formats `import` reads (YOURLS's `yourls_url` table, Shlink's export, any CSV with a
//! long-URL column): where each field is, a row as a link to be, the code in a code column,
//! and YOURLS's times. The reading loop itself is in `import.rs`, beside the JSON lines one.

use time::macros::format_description;
use time::PrimitiveDateTime;

use super::options::{Format, ImportOptions};
use crate::backup::parse_rfc3339;
use crate::codes::is_code_syntax;
use crate::model::Millis;
use crate::BoxError;

/// One row of a CSV format, as a link to be.
pub(super) struct Row {
    pub(super) code: Option<String>,
    pub(super) url: String,
    pub(super) title: Option<String>,
    pub(super) tags: Vec<String>,
    pub(super) created_at: Option<Millis>,
}

/// Where each field is in a CSV format.
pub(super) struct Columns {
    url: usize,
    code: Option<usize>,
    title: Option<usize>,
    tags: Option<usize>,
    created: Option<usize>,
}

impl Columns {
    /// From the first row: a header when it names columns, else YOURLS's fixed order.
    /// Returns whether the first row was a header.
    pub(super) fn find(
        options: &ImportOptions,
        first: &::csv::StringRecord,
    ) -> Result<(Self, bool), BoxError> {
        let names: Vec<String> = first
            .iter()
            .map(|h| h.trim().trim_start_matches('\u{feff}').to_ascii_lowercase())
            .collect();
        let at = |wanted: &[&str]| {
            wanted
                .iter()
                .find_map(|w| names.iter().position(|n| n == w))
        };
        match options.format {
            Format::YourlsCsv => {
                let header = names.first().is_some_and(|n| n == "keyword");
                Ok((
                    Columns {
                        code: Some(at(&["keyword"]).unwrap_or(0)),
                        url: at(&["url"]).unwrap_or(1),
                        title: Some(at(&["title"]).unwrap_or(2)),
                        created: Some(at(&["timestamp"]).unwrap_or(3)),
                        tags: None,
                    },
                    header,
                ))
            }
            Format::ShlinkCsv => {
                let url = at(&["longurl"]).ok_or(
                    "a Shlink CSV export starts with a header naming `longUrl` (createdAt,domain,shortCode,shortUrl,longUrl,title,tags,visits)",
                )?;
                Ok((
                    Columns {
                        url,
                        code: at(&["shortcode"]),
                        title: at(&["title"]),
                        tags: at(&["tags"]),
                        created: at(&["createdat", "datecreated"]),
                    },
                    true,
                ))
            }
            _ => {
                let named = |flag: &Option<String>| {
                    flag.as_ref()
                        .map(|f| {
                            names
                                .iter()
                                .position(|n| n.eq_ignore_ascii_case(f.trim()))
                                .ok_or_else(|| format!("no column is named `{f}`"))
                        })
                        .transpose()
                };
                let url = match named(&options.url_column)? {
                    Some(i) => i,
                    None => at(&[
                        "long_url",
                        "longurl",
                        "long url",
                        "original_url",
                        "original url",
                        "destination",
                        "target",
                        "url",
                        "link",
                        "long_link",
                    ])
                    .ok_or("no long-URL column found; name it with --url-column")?,
                };
                let code = match named(&options.code_column)? {
                    Some(i) => Some(i),
                    None => at(&[
                        "short_code",
                        "shortcode",
                        "short code",
                        "code",
                        "keyword",
                        "slug",
                        "alias",
                        "custom_path",
                        "back_half",
                        "short_url",
                        "shorturl",
                        "short url",
                        "link_short",
                        "address",
                    ]),
                };
                Ok((
                    Columns {
                        url,
                        code: code.filter(|c| *c != url),
                        title: at(&["title", "name", "description"]),
                        tags: at(&["tags"]),
                        created: at(&["created_at", "createdat", "created", "date", "timestamp"]),
                    },
                    true,
                ))
            }
        }
    }

    pub(super) fn row(&self, record: &::csv::StringRecord) -> Result<Row, String> {
        let field = |i: Option<usize>| {
            i.and_then(|i| record.get(i))
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let url = field(Some(self.url)).ok_or("no URL")?;
        let code = field(self.code).map(|c| code_of(&c)).transpose()?;
        let created_at = field(self.created)
            // Every CSV format takes both forms: a plain CSV may come from either world.
            .map(|t| parse_time(&t))
            .transpose()?;
        let tags = field(self.tags)
            .map(|t| {
                t.split(['|', ','])
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        Ok(Row {
            code: code.filter(|c| !c.is_empty()),
            url,
            title: field(self.title),
            tags,
            created_at,
        })
    }
}

/// The code in a CSV's code column: the code itself, or (Bitly and others put a whole short
/// URL there) the one path segment of an http(s) short URL. Anything else, `../../x` among
/// them, is no code: a path is never shortened into one.
pub fn code_of(text: &str) -> Result<String, String> {
    if !text.contains('/') {
        return Ok(text.to_string());
    }
    let not_code = || format!("`{text}` is neither a code nor a short URL");
    let url = url::Url::parse(text).map_err(|_| not_code())?;
    if !matches!(url.scheme(), "http" | "https") || url.query().is_some() {
        return Err(not_code());
    }
    let mut segments = url.path_segments().ok_or_else(not_code)?;
    match (segments.next(), segments.next()) {
        (Some(code), None) if is_code_syntax(code) => Ok(code.to_string()),
        _ => Err(not_code()),
    }
}

/// YOURLS's `Y-m-d H:i:s` (taken as UTC), or RFC 3339 (Shlink's).
fn parse_time(text: &str) -> Result<Millis, String> {
    let format = format_description!("[year]-[month]-[day] [hour]:[minute]:[second]");
    match PrimitiveDateTime::parse(text.trim(), &format) {
        Ok(t) => u64::try_from(t.assume_utc().unix_timestamp())
            .map(|s| s * 1000)
            .map_err(|_| format!("`{text}` is before 1970")),
        Err(_) => parse_rfc3339(text),
    }
}

#[cfg(test)]
mod tests {
    use super::code_of;

    #[test]
    fn a_code_column_holds_a_code_or_a_short_url() {
        assert_eq!(code_of("abc"), Ok("abc".to_string()));
        assert_eq!(code_of("https://bit.ly/3xYz"), Ok("3xYz".to_string()));
        assert_eq!(code_of("http://s.example/x_1-"), Ok("x_1-".to_string()));
        for bad in [
            "../../x",
            "a/b",
            "/x",
            "https://s.example/a/b",
            "https://s.example/",
            "https://s.example/x?y=1",
            "javascript:alert(1)//x",
            "ftp://s.example/x",
        ] {
            assert!(code_of(bad).is_err(), "{bad}");
        }
    }
}
