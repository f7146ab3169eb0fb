//! The YOURLS actions (`shorturl`, `expand`, `url-stats`, `stats`, `db-stats`, `version`),
//! run through the domain service, and the YOURLS answers they give, failures included.

use time::macros::format_description;
use time::OffsetDateTime;

use super::output::{Answer, Obj};
use super::params::{intval, Params};
use crate::config::Role;
use crate::links::{CreateLink, LinkError, Ranking, Totals, DEFAULT_SPACE};
use crate::model::{Link, LinkStatus, Millis};
use crate::plans::Refusal;
use crate::web::caller::Principal;
use crate::web::state::AppState;

/// The YOURLS version whose API this speaks (the `version` action).
pub const YOURLS_VERSION: &str = "1.10";
/// `stats` returns at most this many links.
const MAX_STATS_LIMIT: usize = 1000;
const STATS_SIMPLE: &str = "Need either XML or JSON format for stats";

/// Runs one action (on the blocking pool: creates are durable writes, stats walk the links).
pub(super) fn dispatch(
    state: &AppState,
    principal: &Principal,
    params: &Params,
    ip: &str,
) -> Answer {
    let action = params.get("action").unwrap_or("");
    let result = match action {
        "shorturl" => shorturl(state, principal, params, ip),
        "expand" => expand(state, principal, params),
        "url-stats" => url_stats(state, principal, params),
        "stats" => stats(state, principal, params),
        "db-stats" => db_stats(state, principal),
        "version" => {
            let body = Obj::default().s("version", YOURLS_VERSION);
            let body = if params.get("db") == Some("1") {
                body.s("db_version", env!("CARGO_PKG_VERSION"))
            } else {
                body
            };
            Ok(Answer::new(body, YOURLS_VERSION))
        }
        _ => {
            let message = "Unknown or missing \"action\" parameter";
            Ok(Answer::new(
                Obj::default().s("errorCode", "400").s("message", message),
                message,
            ))
        }
    };
    result.unwrap_or_else(|e| failure_answer(&e.to_string()))
}

/// A server fault: logged, answered 500 without detail.
pub(super) fn failure_answer(error: &str) -> Answer {
    tracing::error!(error = %error, "yourls-api request failed");
    let message = "the server failed to handle this request; the error is in its log";
    Answer::new(
        Obj::default().s("errorCode", "500").s("message", message),
        message,
    )
}

/// A `status: fail` answer of `shorturl`.
fn fail(code: &str, message: &str, status: &str) -> Answer {
    Answer::new(
        Obj::default()
            .s("status", "fail")
            .s("code", code)
            .s("message", message)
            .s("errorCode", status)
            .s("statusCode", status),
        "",
    )
}

fn forbidden(message: String) -> Answer {
    Answer::new(
        Obj::default()
            .s("message", message.as_str())
            .s("errorCode", "403"),
        message,
    )
}

/// YOURLS's `yourls_trim_long_string`: 60 characters at most, the cut marked `[...]`.
fn trim_long(text: &str) -> String {
    if text.chars().count() > 60 {
        let mut cut: String = text.chars().take(55).collect();
        cut.push_str("[...]");
        cut
    } else {
        text.to_string()
    }
}

/// `Y-m-d H:i:s`, UTC: the only date form YOURLS clients parse.
fn yourls_date(ms: Millis) -> String {
    let format = format_description!("[year]-[month]-[day] [hour]:[minute]:[second]");
    OffsetDateTime::from_unix_timestamp(i64::try_from(ms / 1000).unwrap_or(0))
        .ok()
        .and_then(|t| t.format(&format).ok())
        .unwrap_or_default()
}

/// A link's title as YOURLS shows it: YOURLS stores the URL when there is no title.
fn title_of(link: &Link) -> String {
    link.title.clone().unwrap_or_else(|| link.url.clone())
}

/// YOURLS adds `http://` to a URL written without a scheme (`example.com/a`).
fn with_scheme(raw: &str) -> String {
    let raw = raw.trim();
    let has_scheme = raw.split_once(':').is_some_and(|(s, _)| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
            && !s.contains('.')
    });
    if has_scheme || raw.is_empty() {
        raw.to_string()
    } else {
        format!("http://{raw}")
    }
}

fn shorturl(
    state: &AppState,
    principal: &Principal,
    params: &Params,
    ip: &str,
) -> Result<Answer, LinkError> {
    // YOURLS has no spaces: creates go to the caller's home (the default space, or a
    // member's one team's space).
    let space = principal
        .home_space()
        .unwrap_or_else(|| DEFAULT_SPACE.to_string());
    if principal.role_in(&space) < Some(Role::Editor) {
        return Ok(forbidden(format!(
            "`{}` may not create links in the space `{space}`",
            principal.name
        )));
    }
    // `limits.rates.create_per_key` counts creates through YOURLS too. YOURLS's own flood
    // check answers with these words and 429.
    if state.limits.check_key(&principal.actor.label(), 1).is_err() {
        return Ok(fail(
            "error:flood",
            "Too many URLs added too fast. Slow down please.",
            "429",
        ));
    }
    let url = with_scheme(params.get("url").unwrap_or(""));
    if url.is_empty() || url == "http://" || url == "https://" {
        return Ok(fail("error:nourl", "Missing or malformed URL", "400"));
    }
    if state.links.is_short_url(&url) {
        return Ok(fail("error:noloop", "URL is a short URL", "400"));
    }
    let keyword = params
        .get("keyword")
        .map(str::trim)
        .filter(|k| !k.is_empty());
    let title = params
        .get("title")
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    let req = CreateLink {
        url: url.clone(),
        code: keyword.map(str::to_string),
        space: Some(space.clone()),
        title,
        ..CreateLink::default()
    };
    let unique = state.config.yourls.unique_urls;
    // YOURLS checks the URL before the keyword: with a keyword, look the URL up first.
    let existing = match (unique, keyword) {
        (true, Some(_)) => state
            .links
            .existing_generated(&url, &space)
            .map(|found| found.map(|l| (l, false))),
        _ => Ok(None),
    };
    let outcome = match existing {
        Ok(Some(found)) => Ok(found),
        Err(e) => Err(e),
        Ok(None) if unique || keyword.is_some() => state.links.create(req),
        Ok(None) => state.links.create_without_dedup(req).map(|l| (l, true)),
    };
    let (link, created) = match outcome {
        Ok(done) => {
            if done.1 {
                let ip = ip
                    .parse()
                    .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
                crate::web::access::audit_created(state, Some(principal), &done.0.space, ip, 1);
            }
            done
        }
        Err(LinkError::CodeTaken(code)) => {
            return Ok(fail(
                "error:keyword",
                &format!("Short URL {code} already exists in database or is reserved"),
                "400",
            ))
        }
        Err(LinkError::Invalid {
            code: "invalid_code",
            detail,
            ..
        }) if detail.ends_with("reserved word") => {
            return Ok(fail(
                "error:keyword",
                &format!(
                    "Short URL {} already exists in database or is reserved",
                    keyword.unwrap_or("")
                ),
                "400",
            ))
        }
        Err(LinkError::Invalid { code, detail, .. }) => {
            return Ok(fail(&format!("error:{code}"), &detail, "400"))
        }
        Err(e @ LinkError::PoolExhausted(_)) => {
            return Ok(fail("error:pool_exhausted", &e.to_string(), "503"))
        }
        // The team's plan refused it (SPEC §25): YOURLS's failure, with our message.
        Err(e @ LinkError::Plan(Refusal::NotInPlan { .. })) => {
            return Ok(fail("error:feature_not_in_plan", &e.to_string(), "403"))
        }
        Err(e @ LinkError::Plan(Refusal::QuotaExceeded { .. })) => {
            return Ok(fail("error:quota_exceeded", &e.to_string(), "403"))
        }
        Err(e) => return Err(e),
    };
    let short = state.links.short_url_of(&link);
    if !created {
        let clicks = state.links.clicks(&link)?;
        let site = state
            .config
            .server
            .base_url
            .trim_end_matches('/')
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .to_string();
        let message = format!(
            "{} already exists in database (short URL: {site}/{})",
            trim_long(&link.url),
            link.code
        );
        let body = Obj::default()
            .s("status", "fail")
            .s("code", "error:url")
            .s("message", message)
            .s("errorCode", "400")
            .s("statusCode", "400")
            .m(
                "url",
                Obj::default()
                    .s("keyword", link.code.as_str())
                    .s("url", link.url.as_str())
                    .s("title", title_of(&link))
                    .s("date", yourls_date(link.created_at))
                    .s("ip", "")
                    .s("clicks", clicks.to_string()),
            )
            .s("title", title_of(&link))
            .s("shorturl", short.as_str());
        return Ok(Answer::new(body, short));
    }
    let body = Obj::default()
        .s("status", "success")
        .s("code", "")
        .s(
            "message",
            format!("{} added to database", trim_long(&link.url)),
        )
        .s("errorCode", "")
        .s("statusCode", "200")
        .m(
            "url",
            Obj::default()
                .s("keyword", link.code.as_str())
                .s("url", link.url.as_str())
                .s("title", title_of(&link))
                .s("date", yourls_date(link.created_at))
                .s("ip", ip),
        )
        .s("title", title_of(&link))
        .s("shorturl", short.as_str());
    Ok(Answer::new(body, short))
}

/// The keyword of `abc` or `<base_url>/abc`.
fn keyword_of(state: &AppState, shorturl: &str) -> String {
    let base = format!("{}/", state.config.server.base_url.trim_end_matches('/'));
    shorturl.trim().replace(&base, "")
}

/// The active link of a keyword the caller may see. YOURLS knows one domain, the default
/// (SPEC §26): a keyword is a code there, never another domain's key (`code@id`).
fn visible(
    state: &AppState,
    principal: &Principal,
    keyword: &str,
) -> Result<Option<Link>, LinkError> {
    if keyword.contains(crate::model::domain::KEY_SEPARATOR) {
        return Ok(None);
    }
    match state.links.get(keyword) {
        Ok(link)
            if link.status == LinkStatus::Active
                && link.domain == crate::model::domain::DEFAULT_DOMAIN
                && principal.allows_space(&link.space) =>
        {
            Ok(Some(link))
        }
        Ok(_) | Err(LinkError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

fn expand(state: &AppState, principal: &Principal, params: &Params) -> Result<Answer, LinkError> {
    let keyword = keyword_of(state, params.get("shorturl").unwrap_or(""));
    Ok(match visible(state, principal, &keyword)? {
        Some(link) => Answer::new(
            Obj::default()
                .s("keyword", keyword.as_str())
                .s("shorturl", state.links.short_url_of(&link))
                .s("longurl", link.url.as_str())
                .s("title", title_of(&link))
                .s("message", "success")
                .s("statusCode", "200"),
            link.url.as_str(),
        ),
        None => Answer::new(
            Obj::default()
                .s("keyword", keyword.as_str())
                .s("message", "Error: short URL not found")
                .s("errorCode", "404"),
            "not found",
        ),
    })
}

/// One link as `url-stats` and `stats` show it.
fn link_stats(state: &AppState, link: &Link, clicks: u64) -> Obj {
    Obj::default()
        .s("shorturl", state.links.short_url_of(link))
        .s("url", link.url.as_str())
        .s("title", title_of(link))
        .s("timestamp", yourls_date(link.created_at))
        .s("ip", "")
        .s("clicks", clicks.to_string())
}

fn url_stats(
    state: &AppState,
    principal: &Principal,
    params: &Params,
) -> Result<Answer, LinkError> {
    let keyword = keyword_of(state, params.get("shorturl").unwrap_or(""));
    Ok(match visible(state, principal, &keyword)? {
        Some(link) => {
            let clicks = state.links.clicks(&link)?;
            Answer::new(
                Obj::default()
                    .s("statusCode", "200")
                    .s("message", "success")
                    .m("link", link_stats(state, &link, clicks)),
                STATS_SIMPLE,
            )
        }
        None => Answer::new(
            Obj::default()
                .s("statusCode", "404")
                .s("message", "Error: short URL not found"),
            STATS_SIMPLE,
        ),
    })
}

/// Catalogue-wide statistics span every space: only keys without a space limit may read them.
fn all_spaces(principal: &Principal) -> Option<Answer> {
    principal.spaces.as_ref().map(|_| {
        forbidden(format!(
            "the key `{}` is limited to some spaces and cannot read statistics of all links",
            principal.name
        ))
    })
}

fn totals_obj(totals: Totals) -> Obj {
    Obj::default()
        .n("total_links", totals.links)
        .n("total_clicks", totals.clicks)
}

fn stats(state: &AppState, principal: &Principal, params: &Params) -> Result<Answer, LinkError> {
    if let Some(denied) = all_spaces(principal) {
        return Ok(denied);
    }
    let ranking = match params.get("filter").unwrap_or("") {
        "bottom" => Ranking::Bottom,
        "last" => Ranking::Last,
        "rand" | "random" => Ranking::Random,
        _ => Ranking::Top,
    };
    let limit = intval(params.get("limit"));
    let start = usize::try_from(intval(params.get("start"))).unwrap_or(0);
    let mut body = Obj::default();
    let limit = usize::try_from(limit).unwrap_or(0).min(MAX_STATS_LIMIT);
    // One walk gives both the ranked links and the totals.
    let (ranked, totals) = state.links.ranked(ranking, start, limit)?;
    // YOURLS sets `links` only when the query returned rows.
    if !ranked.is_empty() {
        let mut links = Obj::default();
        for (i, (link, clicks)) in ranked.iter().enumerate() {
            links = links.m(&format!("link_{}", i + 1), link_stats(state, link, *clicks));
        }
        body = body.m("links", links);
    }
    let body = body
        .m("stats", totals_obj(totals))
        .s("statusCode", "200")
        .s("message", "success");
    Ok(Answer::new(body, STATS_SIMPLE))
}

/// `db-stats`: the totals of the key's spaces (all of them for an unlimited key).
fn db_stats(state: &AppState, principal: &Principal) -> Result<Answer, LinkError> {
    let totals = state.links.totals_in(principal.spaces.as_deref())?;
    let body = Obj::default()
        .m("db-stats", totals_obj(totals))
        .s("statusCode", "200")
        .s("message", "success");
    Ok(Answer::new(body, STATS_SIMPLE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_without_scheme_get_http() {
        assert_eq!(with_scheme("example.com/a"), "http://example.com/a");
        assert_eq!(with_scheme("https://x.y"), "https://x.y");
        assert_eq!(with_scheme("javascript:alert(1)"), "javascript:alert(1)");
        assert_eq!(with_scheme("localhost:8080/x"), "localhost:8080/x");
    }

    #[test]
    fn long_strings_are_trimmed_like_yourls() {
        let long = "x".repeat(61);
        assert_eq!(trim_long(&long).chars().count(), 60);
        assert!(trim_long(&long).ends_with("[...]"));
        assert_eq!(trim_long("short"), "short");
    }
}
