//! The review's scorer: one request to an OpenAI-compatible `/v1/chat/completions` endpoint
//! with what the fetch and the screenshot found, and the strict reading of its answer
//! (`{"spam": 0..1, "reason": "…"}`). Answers a score and a reason or why not; the verdict
//! from the score is the caller's.
//!
//! The endpoint is the operator's own choice and often a model server on the local network,
//! so the private-address rule of the fetch does not apply here (nor does it pass through the
//! fetch's resolver); proxies from the environment do apply, as for any configured service.

use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};

use super::fetch::{chain, read_capped};

/// The whole request, answer included (a model on a CPU takes its time).
pub const SCORER_TIMEOUT: Duration = Duration::from_secs(20);
/// The most of an answer read.
const MAX_ANSWER: usize = 1 << 20;
/// Longest reason kept, in characters.
const MAX_REASON: usize = 500;

const INSTRUCTIONS: &str = "You review the destinations of short links for a URL shortener. \
Judge whether the page is spam, phishing, malware, a scam or otherwise abusive, from its URL, \
title, description and, when given, a screenshot. Answer only JSON \
{\"spam\": number 0..1, \"reason\": string}: spam is your confidence that the page is abusive \
(0 clean, 1 certainly abusive), reason one short sentence saying why.";

/// What the scorer is told about a page.
pub struct PageFacts<'a> {
    pub url: &'a str,
    pub title: Option<&'a str>,
    pub description: Option<&'a str>,
    /// PNG bytes.
    pub screenshot: Option<&'a [u8]>,
}

/// The configured scorer.
pub struct Scorer {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: String,
}

impl Scorer {
    pub fn new(url: &str, model: &str, api_key: &str) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .timeout(SCORER_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot build the scorer's HTTP client: {}", chain(&e)))?;
        Ok(Self {
            client,
            url: url.trim().to_string(),
            model: model.to_string(),
            api_key: api_key.to_string(),
        })
    }

    /// The score and reason, or why there is none.
    pub async fn score(&self, page: &PageFacts<'_>) -> Result<(f64, String), String> {
        match tokio::time::timeout(SCORER_TIMEOUT, self.ask(page)).await {
            Ok(answer) => answer,
            Err(_) => Err(format!("timed out after {} s", SCORER_TIMEOUT.as_secs())),
        }
    }

    async fn ask(&self, page: &PageFacts<'_>) -> Result<(f64, String), String> {
        let mut request = self
            .client
            .post(&self.url)
            .json(&request_body(&self.model, page));
        if !self.api_key.is_empty() {
            request = request.bearer_auth(&self.api_key);
        }
        let response = request.send().await.map_err(|e| chain(&e))?;
        let status = response.status();
        let (body, cut) = read_capped(response, MAX_ANSWER)
            .await
            .map_err(|e| format!("reading the answer: {}", chain(&e)))?;
        if !status.is_success() {
            return Err(format!("HTTP {}", status.as_u16()));
        }
        if cut {
            return Err("the answer is longer than 1 MiB".into());
        }
        let answer: Value =
            serde_json::from_slice(&body).map_err(|e| format!("the answer is not JSON: {e}"))?;
        let content = answer
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or("the answer has no choices[0].message.content")?;
        parse_content(content)
    }
}

/// The chat-completions request for a page.
pub fn request_body(model: &str, page: &PageFacts<'_>) -> Value {
    let text = format!(
        "URL: {}\nTitle: {}\nDescription: {}",
        page.url,
        page.title.unwrap_or(""),
        page.description.unwrap_or("")
    );
    let mut content = vec![json!({"type": "text", "text": text})];
    if let Some(png) = page.screenshot {
        let data = base64::engine::general_purpose::STANDARD.encode(png);
        content.push(json!({
            "type": "image_url",
            "image_url": {"url": format!("data:image/png;base64,{data}")}
        }));
    }
    json!({
        "model": model,
        "messages": [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": content}
        ],
        "response_format": {"type": "json_object"},
        "temperature": 0
    })
}

#[derive(Deserialize)]
struct Answer {
    spam: f64,
    reason: String,
}

/// The model's message, read strictly: one JSON object with `spam` a number from 0 to 1 and
/// `reason` a string (other members are ignored). One tolerance: a single Markdown code fence
/// around it (```` ```json … ``` ````), which models add despite `response_format` and which
/// changes nothing about what they meant. Prose around the JSON is nonsense.
pub fn parse_content(content: &str) -> Result<(f64, String), String> {
    let text = unfence(content.trim());
    let answer: Answer = serde_json::from_str(text)
        .map_err(|e| format!("the model's answer is not {{\"spam\", \"reason\"}}: {e}"))?;
    if !(0.0..=1.0).contains(&answer.spam) {
        return Err(format!("spam {} is not between 0 and 1", answer.spam));
    }
    let reason: String = answer.reason.trim().chars().take(MAX_REASON).collect();
    Ok((answer.spam, reason))
}

/// The inside of one ```` ``` ```` fence (with or without a language), else the text.
fn unfence(text: &str) -> &str {
    let Some(inner) = text.strip_prefix("```").and_then(|t| t.strip_suffix("```")) else {
        return text;
    };
    // The fence's first line is its language tag (`json`), possibly empty.
    match inner.split_once('\n') {
        Some((tag, body)) if !tag.trim_start().starts_with('{') => body.trim(),
        _ => inner.trim(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_answers() {
        assert_eq!(
            parse_content(r#"{"spam": 0.95, "reason": "phishing"}"#),
            Ok((0.95, "phishing".into()))
        );
        assert_eq!(
            parse_content("```json\n{\"spam\": 1, \"reason\": \"x\"}\n```"),
            Ok((1.0, "x".into()))
        );
        assert_eq!(
            parse_content("```{\"spam\": 0, \"reason\": \"\"}```"),
            Ok((0.0, String::new()))
        );
        assert!(parse_content(r#"{"spam": "high", "reason": "x"}"#).is_err());
        assert!(parse_content(r#"{"spam": 1.5, "reason": "x"}"#).is_err());
        assert!(parse_content(r#"{"spam": 0.5}"#).is_err());
        assert!(parse_content("Sure! {\"spam\": 0.5, \"reason\": \"x\"}").is_err());
        assert!(parse_content("not json").is_err());
    }

    #[test]
    fn the_image_only_with_a_screenshot() {
        let page = PageFacts {
            url: "https://a.example/",
            title: Some("A"),
            description: None,
            screenshot: None,
        };
        let body = request_body("m", &page);
        assert_eq!(
            body["messages"][1]["content"].as_array().map(Vec::len),
            Some(1)
        );
        let png = [0x89, b'P', b'N', b'G'];
        let body = request_body(
            "m",
            &PageFacts {
                screenshot: Some(&png),
                ..page
            },
        );
        assert_eq!(
            body["messages"][1]["content"][1]["image_url"]["url"],
            "data:image/png;base64,iVBORw=="
        );
    }
}
