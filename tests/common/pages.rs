//! A browser-like HTTP client for page tests: keeps cookies, reads the form token from a page,
//! posts forms. No script runs; what it sees is what a browser without JavaScript sees.

use reqwest::blocking::{Client, Response};

use super::TestApp;

pub struct PageClient<'a> {
    pub app: &'a TestApp,
    pub client: Client,
}

impl<'a> PageClient<'a> {
    /// A fresh browser: no cookies, no session.
    pub fn new(app: &'a TestApp) -> Self {
        let client = Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client");
        Self { app, client }
    }

    /// A browser signed in with `key`.
    pub fn signed_in(app: &'a TestApp, key: &str) -> Self {
        let page = Self::new(app);
        let response = page.post_form("/ui/login", &[("key", key), ("next", "/ui/links")]);
        assert_eq!(response.status(), 303, "sign-in with a known key redirects");
        assert_eq!(location(&response), "/ui/links");
        page
    }

    pub fn get(&self, path: &str) -> Response {
        self.client.get(self.app.url(path)).send().expect("GET")
    }

    /// The body of a page that must answer `status`.
    pub fn html(&self, path: &str, status: u16) -> String {
        let response = self.get(path);
        assert_eq!(response.status(), status, "GET {path}");
        response.text().expect("body")
    }

    /// The form token of the page at `path`.
    pub fn csrf(&self, path: &str) -> String {
        let html = self.get(path).text().expect("body");
        csrf_of(&html)
    }

    /// Posts a form with the token of `/` (the session's or the cookie's; the same on every page).
    pub fn post_form(&self, path: &str, fields: &[(&str, &str)]) -> Response {
        let token = self.csrf("/ui/login");
        let mut all: Vec<(&str, &str)> = vec![("csrf", token.as_str())];
        all.extend_from_slice(fields);
        self.client
            .post(self.app.url(path))
            .form(&all)
            .send()
            .expect("POST")
    }

    /// Posts a form exactly as given (no token added).
    pub fn post_raw(&self, path: &str, fields: &[(&str, &str)]) -> Response {
        self.client
            .post(self.app.url(path))
            .form(fields)
            .send()
            .expect("POST")
    }
}

pub fn csrf_of(html: &str) -> String {
    let marker = "name=\"csrf\" value=\"";
    let start = html.find(marker).expect("a form token on the page") + marker.len();
    html[start..start + 64].to_string()
}

pub fn location(response: &Response) -> String {
    response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}
