//! `GET /api/v1/links/{code}/qr?format=svg|png&size=N`: the QR code of a link's short URL.
//! The pages reuse [`QrParams`] and [`qr_response`] behind their session sign-in.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::response::Response;

use super::api::CodePath;
use crate::config::Role;
use crate::web::caller::Caller;
use crate::web::error::ApiError;
use crate::web::qr::{qr_response, QrParams};
use crate::web::state::AppState;

/// `GET /api/v1/links/{code}/qr` (viewer role).
#[utoipa::path(get, path = "/api/v1/links/{code}/qr", tag = "links", security(("api_key" = [])),
    params(("code" = String, Path, description = "The link's code"), ("domain" = Option<String>, Query, description = "The host of the link's domain (SPEC §26); absent: the default domain; an unconfigured one: 404"),
        ("format" = Option<String>, Query, description = "`svg` (default) or `png`"),
        ("size" = Option<u32>, Query, description = "PNG width and height in pixels, 64–2048 (default 256)")),
    responses((status = 200, description = "The QR code of the short URL", content_type = "image/svg+xml"),
        (status = 400, description = "A bad `format` or `size` (problem+json naming the field)"),
        (status = 404, description = "No such link (problem+json)")))]
pub async fn link_qr(
    State(state): State<AppState>,
    caller: Caller,
    CodePath(code): CodePath,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let link = crate::web::access::authorized_link(&state, &caller, &code, Role::Viewer)?;
    let params = QrParams::parse(&params)?;
    qr_response(&state.links.short_url_of(&link), params)
}
