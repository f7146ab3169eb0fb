//! People and their sign-in: for now the OpenID Connect protocol client ([`oidc`]); the users,
//! teams, sessions and keys that it signs people into join it here.

pub mod oidc;
