//! vnfkeeper's own OAuth 2.0 token endpoint for Tacker's notifications
//! (`tacker.auth_type = "OAUTH2_CLIENT_CREDENTIALS"`; SOL013 §8.3.4, the subscription's
//! `paramsOauth2ClientCredentials.tokenEndpoint`).
//!
//! - `POST <token_path>` with `grant_type=client_credentials` (RFC 6749 §4.4.2,
//!   `application/x-www-form-urlencoded`), the client authenticated by HTTP Basic (RFC 6749
//!   §2.3.1: `tacker.username` as client id, the `password_file`'s password; taken as sent or
//!   form-urlencoded), as Tacker v2 asks
//!   for a token before each notification. Answer (§5.1): `{"access_token", "token_type":
//!   "Bearer", "expires_in"}` with `Cache-Control: no-store`. Errors (§5.2): wrong or missing
//!   client credentials → 401 `invalid_client` (with `WWW-Authenticate: Basic`); another grant
//!   type → 400 `unsupported_grant_type`; no grant type, a body that is not a form, or client
//!   credentials in both the header and the body → 400 `invalid_request`. No token is issued on
//!   any error.
//! - Client credentials in the body (`client_id`, `client_secret`, §2.3.1's alternative) are
//!   accepted too; Tacker sends the header.
//! - Tokens: 32 bytes from the operating system's CSPRNG (`getrandom`), base64url. Only their
//!   SHA-256 digests are kept, in memory (a restart forgets them: Tacker asks again), each with
//!   its expiry; a presented Bearer token (RFC 6750 §2.1) is hashed and compared with every
//!   live digest in constant time. Expired ones are dropped when a token is issued; at most
//!   [`MAX_TOKENS`] are live (the oldest goes first).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use super::credentials::Credentials;
use vnfkeeper_core::wire::Secret;

/// Most access tokens alive at once. Tacker asks for one per notification; at the default
/// lifetime this covers more than 18 notifications a second for an hour.
pub const MAX_TOKENS: usize = 65_536;

/// Largest token request body read (a form with a grant type and perhaps client credentials).
const MAX_FORM_BYTES: usize = 4096;

/// The issuer: the client credentials Tacker presents, the tokens' lifetime, the live tokens
/// (digest, expiry, and the generation of the client credentials they were issued under: a
/// token outlives no change of them).
pub struct Tokens {
    credentials: Arc<Credentials>,
    lifetime: Duration,
    live: Mutex<std::collections::VecDeque<([u8; 32], Instant, u64)>>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

impl Tokens {
    /// An issuer for the client id and secret `credentials` holds (replaced by a reload)
    /// whose tokens live `lifetime`.
    pub fn new(credentials: Arc<Credentials>, lifetime: Duration) -> Arc<Self> {
        Arc::new(Self {
            credentials,
            lifetime,
            live: Mutex::new(std::collections::VecDeque::new()),
        })
    }

    /// Whether `id` and `secret` are the configured client credentials; constant time in their
    /// contents.
    fn client_ok(&self, id: &[u8], secret: &[u8]) -> bool {
        self.credentials.with(|client_id, client_secret, _| {
            let id_ok = id.ct_eq(client_id.as_bytes());
            let secret_ok = secret.ct_eq(client_secret.expose().as_bytes());
            bool::from(id_ok & secret_ok)
        })
    }

    /// A new token, valid from now for the lifetime. Errors: no randomness from the system.
    pub fn issue(&self) -> Result<Secret<String>, String> {
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw).map_err(|e| format!("no randomness: {e}"))?;
        let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw);
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        let generation = self.credentials.with(|_, _, g| g);
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|(_, until, g)| *until > now && *g == generation);
        while live.len() >= MAX_TOKENS {
            live.pop_front();
        }
        live.push_back((digest, now + self.lifetime, generation));
        Ok(Secret::new(token))
    }

    /// Whether `token` was issued here under the client credentials in force and has not
    /// expired. Every live digest is compared, in constant time each.
    pub fn valid(&self, token: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        let generation = self.credentials.with(|_, _, g| g);
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let mut found = subtle::Choice::from(0);
        for (d, until, g) in live.iter() {
            let in_force = *until > now && *g == generation;
            found |= d.ct_eq(&digest) & subtle::Choice::from(u8::from(in_force));
        }
        bool::from(found)
    }

    /// Whether `Authorization: Bearer <token>` (RFC 6750 §2.1) carries a valid token.
    pub fn authorized(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
        else {
            return false;
        };
        match value.trim().split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
                self.valid(token.trim())
            }
            _ => false,
        }
    }

    /// The lifetime in seconds (`expires_in`).
    pub fn lifetime_secs(&self) -> u64 {
        self.lifetime.as_secs()
    }
}

/// The token endpoint's route: `POST` on `path`; other methods 405.
pub fn router(path: &str, tokens: Arc<Tokens>) -> Router {
    Router::new().route(path, post(token)).with_state(tokens)
}

/// An RFC 6749 §5.2 error response.
fn error(status: StatusCode, code: &'static str, description: &str) -> Response {
    let body = serde_json::json!({"error": code, "error_description": description});
    let mut r = (
        status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (header::PRAGMA, HeaderValue::from_static("no-cache")),
        ],
        body.to_string(),
    )
        .into_response();
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"vnfkeeper\""),
        );
    }
    r
}

/// Client credentials as `(client id, client secret)` twice: as sent and form-urlencoded
/// decoded (or, from a request body, the same pair twice).
type Candidates = [(Vec<u8>, Vec<u8>); 2];

/// The client credentials of `Authorization: Basic`: each as sent, and each form-urlencoded
/// decoded (RFC 6749 §2.3.1 asks clients to encode them before the Basic encoding; Tacker, as
/// most clients, does not — both are tried). `None`: no Basic header; `Some(Err)`: a malformed
/// one.
fn basic_credentials(headers: &HeaderMap) -> Option<Result<Candidates, ()>> {
    let value = headers.get(header::AUTHORIZATION)?;
    let Ok(value) = value.to_str() else {
        return Some(Err(()));
    };
    let (scheme, b64) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return Some(Err(()));
    }
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(b64.trim()) else {
        return Some(Err(()));
    };
    let Some(colon) = decoded.iter().position(|b| *b == b':') else {
        return Some(Err(()));
    };
    let unescape = |b: &[u8]| -> Vec<u8> {
        form_urlencoded::parse(&[b"x=", b].concat())
            .next()
            .map(|(_, v)| v.into_owned().into_bytes())
            .unwrap_or_default()
    };
    let (id, secret) = (&decoded[..colon], &decoded[colon + 1..]);
    Some(Ok([
        (id.to_vec(), secret.to_vec()),
        (unescape(id), unescape(secret)),
    ]))
}

/// `POST`: the client credentials grant (RFC 6749 §4.4.2–4.4.3).
async fn token(State(tokens): State<Arc<Tokens>>, request: Request) -> Response {
    use http_body_util::BodyExt as _;
    let (parts, body) = request.into_parts();
    let bytes = match http_body_util::Limited::new(body, MAX_FORM_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "the request body is not a short form",
            );
        }
    };
    let form: Vec<(String, String)> = form_urlencoded::parse(&bytes).into_owned().collect();
    let client = match client_credentials(&parts.headers, &form) {
        Ok(c) => c,
        Err(refused) => return refused.response(),
    };
    let [raw, decoded] = &client;
    let ok = tokens.client_ok(&raw.0, &raw.1) | tokens.client_ok(&decoded.0, &decoded.1);
    if !ok {
        crate::ratelog::refused(crate::ratelog::Refusal::TokenClient);
        return Refusal::INVALID_CLIENT.response();
    }
    if let Err(refused) = check_grant_type(&form) {
        return refused.response();
    }
    let token = match tokens.issue() {
        Ok(t) => t,
        Err(why) => {
            tracing::error!(error = %why, "OAuth 2.0 token not issued");
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "no token could be made",
            );
        }
    };
    tracing::debug!("OAuth 2.0 access token issued");
    token_response(&token, tokens.lifetime_secs())
}

/// The value of field `name` of a form (the first one), if any.
fn form_field<'a>(form: &'a [(String, String)], name: &str) -> Option<&'a str> {
    form.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Why a token request is refused: the HTTP status and the OAuth 2.0 error code and
/// description, made into the response by [`error`].
struct Refusal {
    status: StatusCode,
    code: &'static str,
    description: &'static str,
}

impl Refusal {
    /// 401 `invalid_client`: the client did not authenticate.
    const INVALID_CLIENT: Refusal = Refusal {
        status: StatusCode::UNAUTHORIZED,
        code: "invalid_client",
        description: "client authentication failed",
    };

    /// The error response.
    fn response(&self) -> Response {
        error(self.status, self.code, self.description)
    }
}

/// The client credentials of a token request, from `Authorization: Basic` ([`basic_credentials`])
/// or from the body's `client_id` and `client_secret` (then twice the same pair). Errors: 400
/// for credentials in both places, 401 (logged) for incomplete, missing or malformed ones.
fn client_credentials(
    headers: &HeaderMap,
    form: &[(String, String)],
) -> Result<Candidates, Refusal> {
    let in_body = match (
        form_field(form, "client_id"),
        form_field(form, "client_secret"),
    ) {
        (Some(id), Some(secret)) => {
            let c = (id.as_bytes().to_vec(), secret.as_bytes().to_vec());
            Some([c.clone(), c])
        }
        (None, None) => None,
        _ => {
            crate::ratelog::refused(crate::ratelog::Refusal::TokenClient);
            return Err(Refusal::INVALID_CLIENT);
        }
    };
    match (basic_credentials(headers), in_body) {
        (Some(Ok(c)), None) | (None, Some(c)) => Ok(c),
        (Some(Ok(_)), Some(_)) => Err(Refusal {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_request",
            description: "client credentials in both the Authorization header and the body",
        }),
        (Some(Err(())), _) | (None, None) => {
            crate::ratelog::refused(crate::ratelog::Refusal::TokenClient);
            Err(Refusal::INVALID_CLIENT)
        }
    }
}

/// Checks the form's `grant_type`: `client_credentials` only. Errors: 400,
/// `unsupported_grant_type` for another grant, `invalid_request` without one.
fn check_grant_type(form: &[(String, String)]) -> Result<(), Refusal> {
    match form_field(form, "grant_type") {
        Some("client_credentials") => Ok(()),
        Some(_) => Err(Refusal {
            status: StatusCode::BAD_REQUEST,
            code: "unsupported_grant_type",
            description: "only client_credentials is supported",
        }),
        None => Err(Refusal {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_request",
            description: "grant_type is required",
        }),
    }
}

/// The successful token response: `token` as a Bearer access token valid `lifetime_secs`
/// seconds, JSON, never cached.
fn token_response(token: &Secret<String>, lifetime_secs: u64) -> Response {
    let body = serde_json::json!({
        "access_token": token.expose(),
        "token_type": "Bearer",
        "expires_in": lifetime_secs,
    });
    (
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (header::PRAGMA, HeaderValue::from_static("no-cache")),
        ],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_tokens_are_valid_until_they_expire_and_unknown_ones_never() {
        let t = Tokens::new(
            Credentials::new("c".into(), Secret::new("s".into())),
            Duration::from_secs(60),
        );
        let a = t.issue().unwrap();
        let b = t.issue().unwrap();
        assert_ne!(a.expose(), b.expose());
        assert_eq!(a.expose().len(), 43);
        assert!(t.valid(a.expose()) && t.valid(b.expose()));
        assert!(!t.valid("not-issued"));
        assert!(!t.valid(""));
        let short = Tokens::new(
            Credentials::new("c".into(), Secret::new("s".into())),
            Duration::ZERO,
        );
        let gone = short.issue().unwrap();
        assert!(!short.valid(gone.expose()), "expired");
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            format!("Bearer {}", a.expose()).parse().unwrap(),
        );
        assert!(t.authorized(&h));
        h.insert(
            header::AUTHORIZATION,
            format!("Basic {}", a.expose()).parse().unwrap(),
        );
        assert!(!t.authorized(&h));
    }

    #[test]
    fn client_credentials_are_compared_exactly() {
        let credentials = Credentials::new("tacker".into(), Secret::new("pw".into()));
        let t = Tokens::new(credentials.clone(), Duration::from_secs(60));
        assert!(t.client_ok(b"tacker", b"pw"));
        assert!(!t.client_ok(b"tacker", b"pw2"));
        assert!(!t.client_ok(b"tacke", b"pw"));
        assert!(!t.client_ok(b"", b""));

        // Replaced by a reload: the new ones are accepted, the old ones and every token issued
        // under them are not.
        let token = t.issue().unwrap();
        assert!(t.valid(token.expose()));
        assert!(!credentials.replace("tacker".into(), Secret::new("pw".into())));
        assert!(
            t.valid(token.expose()),
            "the same credentials again change nothing"
        );
        assert!(credentials.replace("tacker".into(), Secret::new("pw2".into())));
        assert!(t.client_ok(b"tacker", b"pw2"));
        assert!(!t.client_ok(b"tacker", b"pw"));
        assert!(!t.valid(token.expose()));
        let fresh = t.issue().unwrap();
        assert!(t.valid(fresh.expose()));
    }
}
