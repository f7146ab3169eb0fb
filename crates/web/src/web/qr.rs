//! QR images of short URLs as responses, for the API and the pages alike: the query they take
//! (`format`, `size`) and the image with its caching headers.

use std::collections::HashMap;

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

use crate::qr;
use crate::web::error::ApiError;

/// The image a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QrParams {
    Svg,
    /// Width and height in pixels.
    Png(u32),
}

impl QrParams {
    /// Reads `format` (default `svg`) and `size` (PNG only, 64–2048, default 256).
    pub fn parse(params: &HashMap<String, String>) -> Result<Self, ApiError> {
        let size = match params.get("size").filter(|s| !s.is_empty()) {
            None => None,
            Some(s) => Some(
                s.parse::<u32>()
                    .ok()
                    .filter(|n| (qr::PNG_MIN..=qr::PNG_MAX).contains(n))
                    .ok_or_else(|| {
                        ApiError::bad_request(
                            "invalid_query",
                            "size",
                            format!(
                                "size must be a number of pixels from {} to {}, not `{s}`",
                                qr::PNG_MIN,
                                qr::PNG_MAX
                            ),
                        )
                    })?,
            ),
        };
        match params.get("format").map(String::as_str) {
            None | Some("") | Some("svg") => Ok(QrParams::Svg),
            Some("png") => Ok(QrParams::Png(size.unwrap_or(qr::PNG_DEFAULT))),
            Some(other) => Err(ApiError::bad_request(
                "invalid_query",
                "format",
                format!("`{other}` is not one of svg, png"),
            )),
        }
    }
}

/// The image of `short_url`. A short URL never changes for a code, so browsers may keep it.
pub fn qr_response(short_url: &str, params: QrParams) -> Result<Response, ApiError> {
    let (content_type, body) = match params {
        QrParams::Svg => ("image/svg+xml", qr::svg(short_url)?.into_bytes()),
        QrParams::Png(size) => ("image/png", qr::png(short_url, size)?),
    };
    let mut response = body.into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, max-age=86400"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Ok(response)
}
