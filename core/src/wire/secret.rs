//! [`Secret`]: a value that never shows in `Debug` output or logs.

use serde::{Deserialize, Serialize};

/// A credential (password, proxy URL that may carry `user:password@`, registry login, VIM
/// `accessInfo`). Serialises transparently (the request is stored as received) but its `Debug`
/// form is `Secret(***)`, so it cannot leak through `{:?}` or `tracing` fields.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    /// Wraps a value.
    pub fn new(value: T) -> Self {
        Self(value)
    }

    /// The secret value itself. Call only where it is handed to its consumer (SSH login,
    /// file written with mode 0600, …), never for logging.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> std::fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_value_and_serde_is_transparent() {
        let s: Secret<String> = serde_json::from_str("\"hunter2\"").unwrap();
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_eq!(s.expose(), "hunter2");
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"hunter2\"");
    }
}
