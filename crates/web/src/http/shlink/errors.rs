//! Shlink's problem+json: `type` is `https://shlink.io/api/error/<kind>`, with `title`,
//! `detail`, `status` and extra members (`shortCode`, `customSlug`, `invalidElements`, …).
//! [`ShlinkError`] is what every `/rest` handler returns. Our errors reach it through one
//! function, [`from_api`]: a service error becomes our [`ApiError`] first (the one place that
//! gives errors a status, `web/error.rs`), and that is translated here, so both APIs answer a
//! failure with the same status. A handler only adds what it knows: the short code or slug
//! the error is about ([`ShlinkError::about`]).
//!
//! Kinds Shlink has no name for (a key's role too weak, a rate limit, a full store) keep our
//! code under Shlink's base, dashed (`forbidden`, `rate-limited`, `storage-full`): clients
//! show the `detail` of a type they do not know.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use crate::links::LinkError;
use crate::model::StoreError;
use crate::web::error::{problem_response, ApiError};

/// Shlink's problem types are this plus the kind.
pub const SHLINK_ERROR_BASE: &str = "https://shlink.io/api/error/";

/// An error on its way to a Shlink client.
#[derive(Debug)]
pub struct ShlinkError {
    pub status: StatusCode,
    /// The last segment of `type`: `short-url-not-found`, `invalid-data`, …
    pub kind: String,
    pub title: String,
    pub detail: String,
    /// Members beside the four standard ones.
    pub extra: Map<String, Value>,
    retry_after: Option<u64>,
}

impl ShlinkError {
    pub fn new(
        status: StatusCode,
        kind: &str,
        title: &str,
        detail: impl Into<String>,
    ) -> ShlinkError {
        ShlinkError {
            status,
            kind: kind.to_string(),
            title: title.to_string(),
            detail: detail.into(),
            extra: Map::new(),
            retry_after: None,
        }
    }

    /// Adds an extra member.
    pub fn with(mut self, name: &str, value: impl Into<Value>) -> ShlinkError {
        self.extra.insert(name.to_string(), value.into());
        self
    }

    /// 400 `invalid-data` naming the request's fields at fault.
    pub fn invalid(fields: &[&str], detail: impl Into<String>) -> ShlinkError {
        ShlinkError::new(
            StatusCode::BAD_REQUEST,
            "invalid-data",
            "Invalid data",
            detail,
        )
        .with("invalidElements", fields.to_vec())
    }

    /// 400 `malformed-request-body`.
    pub fn malformed() -> ShlinkError {
        ShlinkError::new(
            StatusCode::BAD_REQUEST,
            "malformed-request-body",
            "Malformed request body",
            "Provided request does not contain a valid JSON body.",
        )
    }

    /// 401 `missing-authentication`: no key sent.
    pub fn missing_key() -> ShlinkError {
        ShlinkError::new(
            StatusCode::UNAUTHORIZED,
            "missing-authentication",
            "Invalid authorization",
            "Expected one of the following authentication headers, [\"X-Api-Key\"], but none were provided",
        )
        .with("expectedHeaders", vec!["X-Api-Key"])
    }

    /// 404 `short-url-not-found` for a code.
    pub fn short_url_not_found(code: &str) -> ShlinkError {
        ShlinkError::new(
            StatusCode::NOT_FOUND,
            "short-url-not-found",
            "Short URL not found",
            format!("No URL found with short code \"{code}\""),
        )
        .with("shortCode", code)
    }

    /// 404 `not-found`: a route this server does not answer.
    pub fn route_not_found(method: &str, uri: &str) -> ShlinkError {
        ShlinkError::new(
            StatusCode::NOT_FOUND,
            "not-found",
            "Not Found",
            format!("Cannot {method} {uri}!"),
        )
    }

    /// 501 `mercure-not-configured`: there is no Mercure hub, clients poll instead.
    pub fn mercure_not_configured() -> ShlinkError {
        ShlinkError::new(
            StatusCode::NOT_IMPLEMENTED,
            "mercure-not-configured",
            "Mercure integration not configured",
            "This Shlink instance is not integrated with a mercure hub.",
        )
    }

    /// Says which short code the error is about: a not-found becomes Shlink's
    /// `short-url-not-found` for it, a taken code Shlink's `non-unique-slug`.
    pub fn about(self, code: &str) -> ShlinkError {
        match self.kind.as_str() {
            "short-url-not-found" | "not-found" if self.status == StatusCode::NOT_FOUND => {
                ShlinkError::short_url_not_found(code)
            }
            "non-unique-slug" => ShlinkError::new(
                StatusCode::BAD_REQUEST,
                "non-unique-slug",
                "Invalid custom slug",
                format!("Provided slug \"{code}\" is already in use."),
            )
            .with("customSlug", code),
            _ => self,
        }
    }
}

/// Our request fields as Shlink names them, for `invalidElements`.
fn shlink_field(field: &str) -> String {
    let head = field.split(['.', '[']).next().unwrap_or(field);
    match head {
        "url" | "body" => "longUrl",
        "code" => "customSlug",
        "length" => "shortCodeLength",
        "expires_at" | "ttl" => "validUntil",
        "valid_from" => "validSince",
        "max_visits" => "maxVisits",
        "rules" => "redirectRules",
        other => other,
    }
    .to_string()
}

/// The one translation of our errors into Shlink's (see the module's comment).
pub fn from_api(e: ApiError) -> ShlinkError {
    let status = e.status;
    let (kind, title) = match (status, e.code) {
        (_, "invalid_json") => return ShlinkError::malformed(),
        (StatusCode::BAD_REQUEST, _) | (StatusCode::UNSUPPORTED_MEDIA_TYPE, _) => {
            let field = shlink_field(e.field.as_deref().unwrap_or("body"));
            return ShlinkError::invalid(&[field.as_str()], e.detail);
        }
        (StatusCode::UNAUTHORIZED, _) => {
            return ShlinkError::new(
                status,
                "invalid-api-key",
                "Invalid API key",
                "Provided API key does not exist or is invalid.",
            )
        }
        (StatusCode::NOT_FOUND, _) => ("not-found", "Not Found"),
        (_, "code_taken") => {
            return ShlinkError::new(
                StatusCode::BAD_REQUEST,
                "non-unique-slug",
                "Invalid custom slug",
                e.detail,
            )
        }
        (_, code) if status.is_server_error() && code == "internal" => {
            ("internal-server-error", "Internal Server Error")
        }
        _ => ("", ""),
    };
    let kind = if kind.is_empty() {
        e.code.replace('_', "-")
    } else {
        kind.to_string()
    };
    let title = if title.is_empty() {
        status.canonical_reason().unwrap_or("Error").to_string()
    } else {
        title.to_string()
    };
    let mut out = ShlinkError::new(status, &kind, &title, e.detail);
    out.retry_after = e.retry_after;
    // A plan's refusal names what it refused (`field`; `quota`, `limit`, `used`).
    if matches!(e.code, "feature_not_in_plan" | "quota_exceeded") {
        if let Some(field) = e.field {
            out.extra.insert("field".into(), field.into());
        }
    }
    out.extra.extend(e.extra);
    out
}

impl From<ApiError> for ShlinkError {
    fn from(e: ApiError) -> Self {
        from_api(e)
    }
}

impl From<LinkError> for ShlinkError {
    fn from(e: LinkError) -> Self {
        from_api(ApiError::from(e))
    }
}

impl From<StoreError> for ShlinkError {
    fn from(e: StoreError) -> Self {
        from_api(ApiError::from(e))
    }
}

impl IntoResponse for ShlinkError {
    fn into_response(self) -> Response {
        let mut body = Map::new();
        body.insert(
            "type".into(),
            format!("{SHLINK_ERROR_BASE}{}", self.kind).into(),
        );
        body.insert("title".into(), self.title.into());
        body.insert("detail".into(), self.detail.into());
        body.insert("status".into(), self.status.as_u16().into());
        body.extend(self.extra);
        let bytes = serde_json::to_vec(&Value::Object(body)).unwrap_or_default();
        problem_response(self.status, bytes, self.retry_after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_errors_become_shlink_kinds_with_the_same_status() {
        let bad = from_api(ApiError::bad_request("invalid_url", "url", "no scheme"));
        assert_eq!(bad.kind, "invalid-data");
        assert_eq!(bad.extra["invalidElements"], serde_json::json!(["longUrl"]));
        let taken = from_api(LinkError::CodeTaken("x".into()).into()).about("x");
        assert_eq!(
            (taken.status, taken.kind.as_str()),
            (StatusCode::BAD_REQUEST, "non-unique-slug")
        );
        assert_eq!(taken.extra["customSlug"], "x");
        let gone = from_api(LinkError::NotFound("abc".into()).into()).about("abc");
        assert_eq!(gone.kind, "short-url-not-found");
        assert_eq!(gone.extra["shortCode"], "abc");
        let weak = from_api(ApiError::forbidden("viewer"));
        assert_eq!(
            (weak.status.as_u16(), weak.kind.as_str()),
            (403, "forbidden")
        );
        assert_eq!(from_api(ApiError::unauthorized()).kind, "invalid-api-key");
    }
}
