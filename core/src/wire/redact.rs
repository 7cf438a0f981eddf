//! Secrets at rest: a request with every secret value replaced by [`REDACTED`], the secrets kept
//! apart by their RFC 6901 pointer, and the inverse that puts them back.
//!
//! Which values are secrets comes from the validator's walk ([`super::LcmEnvelope::secret_pointers`],
//! [`super::request_secret_pointers`]), so a field that is checked as a secret is also redacted.
//! For a request that does not validate (a rejected file) there is no walk to trust; it is
//! redacted by field name instead ([`redact_by_name`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a secret value is replaced by in a redacted document.
pub const REDACTED: &str = "***";

/// The secret values taken out of a document, keyed by their RFC 6901 pointer into it. Its
/// `Debug` form lists the pointers only; it serialises as a JSON object `{pointer: value}`
/// (written only encrypted, see the store).
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretValues(BTreeMap<String, Value>);

impl SecretValues {
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The pointers, in pointer order.
    pub fn pointers(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// The values themselves. Call only to hand them to their consumer or to compare in a test.
    pub fn expose(&self) -> &BTreeMap<String, Value> {
        &self.0
    }
}

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// `doc` with the value at each of `pointers` replaced by the string [`REDACTED`] (whatever its
/// type: an `accessInfo` object becomes the string too), and the values taken out. A pointer
/// that does not resolve in `doc` is skipped (nothing to hide there).
pub fn redact(doc: &Value, pointers: &[String]) -> (Value, SecretValues) {
    let mut out = doc.clone();
    let mut secrets = BTreeMap::new();
    for p in pointers {
        if let Some(v) = out.pointer_mut(p) {
            let value = std::mem::replace(v, Value::String(REDACTED.to_owned()));
            secrets.insert(p.clone(), value);
        }
    }
    (out, SecretValues(secrets))
}

/// A secret's JSON pointer that does not resolve in the document [`restore`] was given (the
/// document is not the one the secrets were taken from). Names the pointer, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("secret pointer {0} is not in the stored document")]
pub struct PointerMissing(pub String);

/// Puts `secrets` back into a document made by [`redact`]. Errors: [`PointerMissing`] for the
/// first pointer that does not resolve in `doc`; `doc` may then be partly restored.
pub fn restore(doc: &mut Value, secrets: &SecretValues) -> Result<(), PointerMissing> {
    for (p, value) in &secrets.0 {
        match doc.pointer_mut(p) {
            Some(slot) => *slot = value.clone(),
            None => return Err(PointerMissing(p.clone())),
        }
    }
    Ok(())
}

/// Field names whose values are secrets wherever they appear in a request (the secret fields of
/// the flavours' `additionalParams` and SOL003 `accessInfo`).
const SECRET_NAMES: &[&str] = &[
    "password",
    "ssh_password",
    "http_proxy",
    "https_proxy",
    "accessInfo",
];

/// A document that did not validate, redacted by field name: every member named in
/// [`SECRET_NAMES`] at any depth, and `username` inside `private_registry_connection_info`
/// (a registry login), becomes [`REDACTED`]. Returns the document and how many values were
/// replaced.
pub fn redact_by_name(doc: &Value) -> (Value, usize) {
    fn walk(v: &mut Value, in_registry: bool, n: &mut usize) {
        match v {
            Value::Object(m) => {
                for (k, child) in m.iter_mut() {
                    let secret =
                        SECRET_NAMES.contains(&k.as_str()) || (in_registry && k == "username");
                    if secret && !child.is_null() {
                        *child = Value::String(REDACTED.to_owned());
                        *n += 1;
                    } else {
                        walk(
                            child,
                            in_registry || k == "private_registry_connection_info",
                            n,
                        );
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|c| walk(c, in_registry, n)),
            _ => {}
        }
    }
    let mut out = doc.clone();
    let mut n = 0;
    walk(&mut out, false, &mut n);
    (out, n)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn redact_then_restore_gives_the_document_back_and_hides_every_value() {
        let doc = json!({"a": {"password": "p1", "x/y": ["s2", 3]}, "k": {"o": 1}});
        let ptrs = vec![
            "/a/password".to_owned(),
            "/a/x~1y/0".to_owned(),
            "/k".to_owned(),
            "/missing".to_owned(),
        ];
        let (red, secrets) = redact(&doc, &ptrs);
        assert_eq!(
            red,
            json!({"a": {"password": "***", "x/y": ["***", 3]}, "k": "***"})
        );
        assert_eq!(
            secrets.pointers().collect::<Vec<_>>(),
            ["/a/password", "/a/x~1y/0", "/k"]
        );
        let dbg = format!("{secrets:?}");
        assert!(!dbg.contains("p1") && !dbg.contains("s2"), "{dbg}");
        let mut back = red.clone();
        restore(&mut back, &secrets).unwrap();
        assert_eq!(back, doc);
        let err = restore(&mut json!({}), &secrets).unwrap_err().to_string();
        assert!(err.contains("/a/password") && !err.contains("p1"), "{err}");
    }

    #[test]
    fn by_name_redacts_secret_names_and_registry_logins_only() {
        let doc = json!({"request": {"additionalParams": {"k8s_cluster_installation_param": {
            "master_node": {"username": "ubuntu", "password": "m"},
            "proxy": {"http_proxy": "http://u:p@h:1", "no_proxy": "x"},
            "private_registry_connection_info": [{"username": "ru", "password": "rp", "server": "s"}]
        }}, "vimConnectionInfo": [{"accessInfo": {"password": "v"}, "password": null}]}});
        let (red, n) = redact_by_name(&doc);
        assert_eq!(n, 5);
        let text = red.to_string();
        for s in ["\"m\"", "u:p@", "\"ru\"", "\"rp\"", "\"v\""] {
            assert!(!text.contains(s), "{s} left in {text}");
        }
        assert!(text.contains("\"ubuntu\"") && text.contains("\"no_proxy\":\"x\""));
    }
}
