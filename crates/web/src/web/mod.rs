//! What the API (`http/`) and the pages (`ui/`) share, below both: the state every handler
//! reaches, the one error mapper, the caller and what it may do, and the responses both serve
//! (CSV downloads, QR images). Neither `http/` nor `ui/` reaches into the other; the redirect
//! path shows the visitor pages through [`pages::VisitorPages`], which the pages implement.

pub mod access;
pub mod accounts;
pub mod caller;
pub mod cookies;
pub mod csv;
pub mod domains;
pub mod error;
pub mod pages;
pub mod qr;
pub mod state;
