//! The credentials Tacker presents to vnfkeeper (`tacker.username`, `tacker.password_file`):
//! checked by the notification endpoint (HTTP Basic, `notifications.rs`) and the token endpoint
//! (OAuth 2.0 client credentials, `oauth.rs`), replaced in place by a configuration reload.

use std::sync::Arc;

use vnfkeeper_core::wire::Secret;

/// `tacker.username` and the password of `tacker.password_file`: what Tacker presents, as HTTP
/// Basic credentials or as OAuth 2.0 client credentials. Shared by the endpoint and the token
/// endpoint, and replaced in place by a configuration reload ([`Credentials::replace`]).
pub struct Credentials {
    current: std::sync::RwLock<Current>,
}

/// The credentials in force and their generation (counted up by each change).
struct Current {
    username: String,
    password: Secret<String>,
    generation: u64,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").finish_non_exhaustive()
    }
}

impl Credentials {
    /// `username` and `password`, generation 0.
    pub fn new(username: String, password: Secret<String>) -> Arc<Self> {
        Arc::new(Self {
            current: std::sync::RwLock::new(Current {
                username,
                password,
                generation: 0,
            }),
        })
    }

    /// Puts `username` and `password` in force from the next request on; returns whether they
    /// differ from the ones before (then the generation goes up, which ends every access token
    /// issued under the old ones: see `oauth::Tokens`).
    pub fn replace(&self, username: String, password: Secret<String>) -> bool {
        let mut c = self.current.write().unwrap_or_else(|p| p.into_inner());
        if c.username == username && c.password.expose() == password.expose() {
            return false;
        }
        c.username = username;
        c.password = password;
        c.generation += 1;
        true
    }

    /// Calls `f` with the username, password and generation in force.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&str, &Secret<String>, u64) -> R) -> R {
        let c = self.current.read().unwrap_or_else(|p| p.into_inner());
        f(&c.username, &c.password, c.generation)
    }
}
