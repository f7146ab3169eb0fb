//! The one place that knows HTTP status codes for errors: [`ApiError`] renders every failure as
//! RFC 7807 `application/problem+json` (`type`, `title`, `status`, `detail`, and `field` where a
//! field is to blame), and [`JsonBody`] makes malformed or mistyped bodies problems too.
//!
//! 5xx details are logged, never sent.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::limits::RateLimited;
use crate::links::LinkError;
use crate::model::StoreError;
use crate::plans::Refusal;

/// Problem types are `PROBLEM_BASE` + the error code.
pub const PROBLEM_BASE: &str = "https://vshortlink.dev/problems/";

/// An error on its way to the client.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    /// Machine-readable code, the last segment of the problem `type`.
    pub code: &'static str,
    pub detail: String,
    pub field: Option<String>,
    /// Seconds for a `Retry-After` header (429).
    pub retry_after: Option<u64>,
    /// Members beside the standard ones (`quota_exceeded`: `quota`, `limit`, `used`).
    pub extra: serde_json::Map<String, serde_json::Value>,
}

#[derive(Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: String,
    title: &'static str,
    status: u16,
    detail: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
    code: &'a str,
    #[serde(flatten)]
    extra: &'a serde_json::Map<String, serde_json::Value>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        Self {
            status,
            code,
            detail: detail.into(),
            field: None,
            retry_after: None,
            extra: serde_json::Map::new(),
        }
    }

    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn bad_request(code: &'static str, field: &str, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, detail).with_field(field)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", detail)
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "an API key is required: `Authorization: Bearer <key>` or `X-Api-Key: <key>`",
        )
    }

    /// 401 `key_expired`: a key made at run time past its `expires_at`.
    pub fn key_expired() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "key_expired",
            "this key expired; make a new one",
        )
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", detail)
    }

    /// 403 `blocked_url`: an existing link whose destination host is blocked.
    pub fn blocked_url(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "blocked_url", detail)
    }

    /// A server fault: logged in full, reported without detail.
    pub fn internal(error: impl std::fmt::Display) -> Self {
        tracing::error!(error = %error, "request failed");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the server failed to handle this request; the error is in its log",
        )
    }

    /// The problem body, for callers that embed it (batch results).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self.problem()).unwrap_or_default()
    }

    fn problem(&self) -> Problem<'_> {
        Problem {
            kind: format!("{PROBLEM_BASE}{}", self.code),
            title: title(self.code, self.status),
            status: self.status.as_u16(),
            detail: &self.detail,
            field: self.field.as_deref(),
            code: self.code,
            extra: &self.extra,
        }
    }
}

/// The short human title of each problem type.
fn title(code: &str, status: StatusCode) -> &'static str {
    match code {
        "invalid_url" => "Invalid URL",
        "invalid_email" => "Invalid email",
        "invalid_name" => "Invalid name",
        "invalid_role" => "Invalid role",
        "invalid_slug" => "Invalid slug",
        "invalid_team" => "Invalid team",
        "email_taken" => "Email taken",
        "team_exists" => "Team exists",
        "space_taken" => "Space taken",
        "space_required" => "Space required",
        "last_admin" => "Last admin",
        "role_not_allowed" => "Role not allowed",
        "key_expired" => "Key expired",
        "invalid_code" => "Invalid code",
        "invalid_host" => "Invalid host",
        "invalid_domain" => "Invalid domain",
        "domain_exists" => "Domain exists",
        "domain_in_use" => "Domain in use",
        "domain_is_default" => "Default domain",
        "invalid_length" => "Invalid length",
        "invalid_ttl" => "Invalid ttl",
        "invalid_expires_at" => "Invalid expiry time",
        "invalid_space" => "Invalid space",
        "invalid_title" => "Invalid title",
        "invalid_tags" => "Invalid tags",
        "invalid_json" => "Malformed JSON",
        "invalid_password" => "Invalid password",
        "invalid_max_visits" => "Invalid visit cap",
        "invalid_valid_from" => "Invalid start time",
        "invalid_rules" => "Invalid rules",
        "invalid_targets" => "Invalid targets",
        "invalid_rotation" => "Invalid rotation",
        "invalid_in_app" => "Invalid in-app setting",
        "invalid_form" => "Invalid form",
        "invalid_preview" => "Invalid preview",
        "form_required" => "Form required",
        "invalid_verdict" => "Invalid verdict",
        "review_disabled" => "Reviews are off",
        "password_required" => "Password required",
        "wrong_password" => "Wrong password",
        "invalid_field" => "Invalid field",
        "invalid_batch" => "Invalid batch",
        "invalid_query" => "Invalid query parameter",
        "payload_too_large" => "Request body too large",
        "headers_too_large" => "Request headers too large",
        "unknown_field" => "Unknown field",
        "unsupported_media_type" => "Unsupported media type",
        "code_taken" => "Code already taken",
        "not_active" => "Link not active",
        "pool_exhausted" => "No code available",
        "not_found" => "Not found",
        "gone" => "Gone",
        "unauthorized" => "Unauthorized",
        "forbidden" => "Forbidden",
        "method_not_allowed" => "Method not allowed",
        "rate_limited" => "Too many requests",
        "storage_full" => "Storage full",
        "storage_unavailable" => "Storage unavailable",
        "blocked_url" => "Blocked destination",
        "feature_not_in_plan" => "Feature not in plan",
        "quota_exceeded" => "Quota exceeded",
        "unknown_plan" => "Unknown plan",
        "internal" => "Internal error",
        _ => status.canonical_reason().unwrap_or("Error"),
    }
}

/// A problem+json answer: `body` with `status`, and `Retry-After` when given (the one shape
/// of every problem this server sends, ours and the Shlink API's alike).
pub fn problem_response(status: StatusCode, body: Vec<u8>, retry_after: Option<u64>) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    if let Some(secs) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.problem()).unwrap_or_default();
        let mut response = problem_response(self.status, body, self.retry_after);
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<StoreError> for ApiError {
    /// Out of space: 507 `storage_full`; other I/O failures: 503 `storage_unavailable`. Both
    /// are logged once per episode by the store, not per request. Anything else is a 500.
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Full(_) => ApiError::new(
                StatusCode::INSUFFICIENT_STORAGE,
                "storage_full",
                "the server's storage is full; writes fail until space is freed",
            ),
            StoreError::Unavailable(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "storage_unavailable",
                "the server's storage is failing; try again later",
            ),
            other => ApiError::internal(other),
        }
    }
}

impl From<crate::qr::QrError> for ApiError {
    /// A short URL too long for a QR code, or an encoder failure: ours, not the caller's.
    fn from(e: crate::qr::QrError) -> Self {
        ApiError::internal(e)
    }
}

impl From<tokio::task::JoinError> for ApiError {
    /// Work handed to a blocking thread panicked or was cancelled.
    fn from(e: tokio::task::JoinError) -> Self {
        ApiError::internal(e)
    }
}

impl From<crate::accounts::AccountError> for ApiError {
    fn from(e: crate::accounts::AccountError) -> Self {
        use crate::accounts::AccountError as E;
        let detail = e.to_string();
        match e {
            E::Invalid { code, field, .. } => ApiError::bad_request(code, field, detail),
            E::NotFound(_) => ApiError::not_found(detail),
            E::Conflict { code, .. } => ApiError::new(StatusCode::CONFLICT, code, detail),
            E::Forbidden { code, .. } => ApiError::new(StatusCode::FORBIDDEN, code, detail),
            E::WrongPassword => ApiError::new(StatusCode::UNAUTHORIZED, "wrong_password", detail)
                .with_field("current"),
            E::Busy => {
                let mut error = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "busy", detail);
                error.retry_after = Some(1);
                error
            }
            E::Store(e) => e.into(),
        }
    }
}

impl From<RateLimited> for ApiError {
    fn from(e: RateLimited) -> Self {
        let mut error = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", e.to_string());
        error.retry_after = Some(e.retry_after_secs);
        error
    }
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        LinkError::from(refusal).into()
    }
}

impl From<LinkError> for ApiError {
    fn from(e: LinkError) -> Self {
        match e {
            LinkError::Invalid {
                code,
                field,
                detail,
            } => ApiError::bad_request(code, &field, detail),
            LinkError::CodeTaken(_) => {
                ApiError::new(StatusCode::CONFLICT, "code_taken", e.to_string()).with_field("code")
            }
            LinkError::NotFound(_) => ApiError::not_found(e.to_string()),
            LinkError::NotActive { .. } => {
                ApiError::new(StatusCode::CONFLICT, "not_active", e.to_string())
            }
            LinkError::PoolExhausted(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "pool_exhausted",
                e.to_string(),
            )
            .with_field("length"),
            LinkError::Plan(Refusal::NotInPlan { field, detail }) => {
                ApiError::new(StatusCode::FORBIDDEN, "feature_not_in_plan", detail)
                    .with_field(field)
            }
            LinkError::Plan(Refusal::QuotaExceeded {
                quota,
                limit,
                used,
                detail,
            }) => {
                let mut error = ApiError::new(StatusCode::FORBIDDEN, "quota_exceeded", detail)
                    .with_field(quota);
                error.extra.insert("quota".into(), quota.into());
                error.extra.insert("limit".into(), limit.into());
                error.extra.insert("used".into(), used.into());
                error
            }
            LinkError::Conflict {
                code,
                field,
                detail,
            } => ApiError::new(StatusCode::CONFLICT, code, detail).with_field(field),
            LinkError::DomainNotFound(_) => ApiError::not_found(e.to_string()),
            LinkError::Forbidden { field, detail } => ApiError::forbidden(detail).with_field(field),
            LinkError::Store(inner) | LinkError::Plan(Refusal::Store(inner)) => {
                ApiError::from(inner)
            }
        }
    }
}

/// A JSON body whose every failure is a problem: 413 over the size limit, 400 `invalid_json` for bad syntax, and 400 naming the field for a wrong type
/// or a missing field.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        // A JSON content type is required: a `text/plain` or form body is a
        // request a page of another site can send without asking (no CORS preflight).
        if !is_json(req.headers()) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "the body must be sent as `Content-Type: application/json`",
            )
            .with_field("content-type"));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    "the request body is over the configured limit (limits.max_body_bytes)",
                )
            } else {
                ApiError::bad_request("invalid_json", "body", rejection.body_text())
            }
        })?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// Whether a request says its body is JSON: `application/json` or any `application/…+json`,
/// with or without parameters.
pub fn is_json(headers: &axum::http::HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or("").trim();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return false;
    };
    kind.eq_ignore_ascii_case("application")
        && (subtype.eq_ignore_ascii_case("json")
            || subtype.len() > 5
                && subtype
                    .get(subtype.len() - 5..)
                    .is_some_and(|tail| tail.eq_ignore_ascii_case("+json")))
}

/// Deserialises JSON, reporting the path of a field that has the wrong type or is missing.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.trim_ascii_start().first() != Some(&b'{') {
        return Err(ApiError::bad_request(
            "invalid_json",
            "body",
            "the body must be a JSON object",
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        json_error(&path, &inner)
    })?;
    de.end().map_err(|e| {
        ApiError::bad_request("invalid_json", "body", format!("malformed JSON: {e}"))
    })?;
    Ok(value)
}

/// Deserialises one JSON value (a batch item) the same way.
pub fn from_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "invalid_json",
            "body",
            "each item must be a JSON object",
        ));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        json_error(&path, e.inner())
    })
}

fn json_error(path: &str, inner: &serde_json::Error) -> ApiError {
    use serde_json::error::Category;
    if matches!(
        inner.classify(),
        Category::Syntax | Category::Eof | Category::Io
    ) {
        return ApiError::bad_request("invalid_json", "body", format!("malformed JSON: {inner}"));
    }
    let message = inner.to_string();
    let child = |name: &str| {
        if path == "." || path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        }
    };
    // An unknown field is reported at its parent too (`deny_unknown_fields`).
    if let Some(name) = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next())
    {
        // serde_path_to_error's path already ends at the unknown field.
        let field = if path == name || path.ends_with(&format!(".{name}")) {
            path.to_string()
        } else {
            child(name)
        };
        return ApiError::bad_request(
            "unknown_field",
            &field,
            format!("`{field}` is not a field of this request"),
        );
    }
    // A missing field is reported at its parent; its name is in the message.
    let field = match message.split('`').nth(1) {
        Some(name) if message.starts_with("missing field") => child(name),
        _ if path == "." || path.is_empty() => "body".to_string(),
        _ => path.to_string(),
    };
    let leaf = field.rsplit('.').next().unwrap_or(&field);
    let leaf = leaf.split('[').next().unwrap_or(leaf);
    let code = match leaf {
        "url" => "invalid_url",
        "code" => "invalid_code",
        "length" => "invalid_length",
        "ttl" => "invalid_ttl",
        "expires_at" => "invalid_expires_at",
        "space" => "invalid_space",
        "title" => "invalid_title",
        "tags" => "invalid_tags",
        "links" => "invalid_batch",
        "password" => "invalid_password",
        "max_visits" => "invalid_max_visits",
        "valid_from" => "invalid_valid_from",
        "fallback_url" => "invalid_url",
        "rules" => "invalid_rules",
        "targets" => "invalid_targets",
        "rotation" => "invalid_rotation",
        "in_app" => "invalid_in_app",
        "form" | "fields" => "invalid_form",
        "og_title" | "og_description" | "og_image" => "invalid_preview",
        _ => "invalid_field",
    };
    let message = message
        .split(" at line ")
        .next()
        .unwrap_or(&message)
        .to_string();
    ApiError::bad_request(code, &field, format!("`{field}`: {message}"))
}
