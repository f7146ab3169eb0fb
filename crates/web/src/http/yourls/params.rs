//! The request's parameters as PHP's `$_REQUEST` has them: the query string, then a
//! urlencoded or multipart form body overriding it, the last of repeated names winning; and
//! PHP's readings of a value (`!empty()`, `intval`).

use axum::body::Bytes;
use axum::http::{header, HeaderMap};
use futures_util::FutureExt;

/// The request's parameters, query string first, then a form body overriding it.
pub struct Params(pub(super) Vec<(String, String)>);

impl Params {
    /// Reads the query string and a urlencoded or multipart body.
    pub async fn read(query: Option<&str>, headers: &HeaderMap, body: Bytes) -> Self {
        let mut pairs: Vec<(String, String)> = query
            .map(|q| {
                url::form_urlencoded::parse(q.as_bytes())
                    .map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .collect()
            })
            .unwrap_or_default();
        let kind = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/x-www-form-urlencoded");
        let lower = kind.to_ascii_lowercase();
        if lower.starts_with("application/x-www-form-urlencoded") {
            pairs.extend(
                url::form_urlencoded::parse(&body).map(|(k, v)| (k.into_owned(), v.into_owned())),
            );
        } else if lower.starts_with("multipart/form-data") {
            // Browser extensions post `FormData`, which is multipart.
            if let Ok(boundary) = multer::parse_boundary(kind) {
                pairs.extend(multipart_fields(body, boundary).await);
            }
        }
        Params(pairs)
    }

    /// [`Params::read`] for a caller without a runtime (the fuzz target). The body is whole in
    /// memory, so multer's one-item stream is always ready and a single poll finishes the read.
    pub fn parse(query: Option<&str>, headers: &HeaderMap, body: &[u8]) -> Self {
        Self::read(query, headers, Bytes::copy_from_slice(body))
            .now_or_never()
            .unwrap_or(Params(Vec::new()))
    }

    /// The last value given for `name` (PHP keeps the last of repeated keys).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every name and value, in the order read.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }

    /// A value that is present and not empty (PHP's `!empty()`; "0" is empty too).
    pub(super) fn filled(&self, name: &str) -> Option<&str> {
        self.get(name).filter(|v| !v.is_empty() && *v != "0")
    }
}

/// The text fields of a `multipart/form-data` body, read with multer (files are not
/// parameters of this API: PHP keeps them out of `$_REQUEST`). A malformed body gives the
/// fields read before the fault.
async fn multipart_fields(body: Bytes, boundary: String) -> Vec<(String, String)> {
    let stream = futures_util::stream::once(async move { Ok::<_, std::io::Error>(body) });
    let mut form = multer::Multipart::new(stream, boundary);
    let mut fields = Vec::new();
    while let Ok(Some(field)) = form.next_field().await {
        let Some(name) = field.name().filter(|_| field.file_name().is_none()) else {
            continue;
        };
        let name = name.to_string();
        match field.text().await {
            Ok(value) => fields.push((name, value)),
            Err(_) => break,
        }
    }
    fields
}

/// PHP's `intval`: leading sign and digits, else 0.
pub(super) fn intval(text: Option<&str>) -> i64 {
    let text = text.unwrap_or("").trim();
    let (sign, rest) = match text.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, text.strip_prefix('+').unwrap_or(text)),
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse::<i64>().map_or(0, |n| sign * n)
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn multipart_text_fields_are_parameters_and_files_are_not() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("multipart/form-data; boundary=\"XyZ\""),
        );
        let body = "--XyZ\r\nContent-Disposition: form-data; name=\"action\"\r\n\r\nexpand\r\n\
            --XyZ\r\nContent-Disposition: form-data; name=\"url\"; filename=\"a.txt\"\r\n\
            Content-Type: text/plain\r\n\r\nhttps://file.example/\r\n\
            --XyZ\r\ncontent-disposition: form-data; name=\"url\"\r\n\r\nhttps://a.example/?x=1\r\n\r\n\
            --XyZ--\r\n";
        let params = Params::parse(
            Some("action=version&format=json"),
            &headers,
            body.as_bytes(),
        );
        assert_eq!(params.get("action"), Some("expand"), "the body wins");
        assert_eq!(params.get("format"), Some("json"));
        assert_eq!(params.get("url"), Some("https://a.example/?x=1\r\n"));
        // A body cut short keeps the fields before the cut.
        let cut = &body[..body.find("--XyZ\r\ncontent-disposition").unwrap_or(0) + 20];
        let params = Params::parse(None, &headers, cut.as_bytes());
        assert_eq!(
            params.pairs(),
            [("action".to_string(), "expand".to_string())]
        );
    }

    #[test]
    fn intval_reads_leading_digits() {
        assert_eq!(intval(Some("12abc")), 12);
        assert_eq!(intval(Some("-3")), -3);
        assert_eq!(intval(None), 0);
    }
}
