//! Small helpers to walk a `serde_json::Value` while collecting every defect with its RFC 6901
//! pointer (instead of stopping at the first, as serde would).

use serde_json::{Map, Value};

use super::FieldError;
use super::rules::json_type;

/// Appends one reference token to a JSON pointer, escaping `~` and `/` (RFC 6901 §3).
pub fn push(base: &str, token: &str) -> String {
    let mut s = String::with_capacity(base.len() + token.len() + 1);
    s.push_str(base);
    s.push('/');
    for c in token.chars() {
        match c {
            '~' => s.push_str("~0"),
            '/' => s.push_str("~1"),
            c => s.push(c),
        }
    }
    s
}

/// Cardinality of an attribute, as in the specs' tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Card {
    /// `1`: required.
    One,
    /// `0..1`: optional; `null` counts as absent.
    Opt,
}

/// Collected defects and warnings.
#[derive(Debug, Default)]
pub struct Checker {
    /// Defects: the request is rejected if there is any.
    pub errors: Vec<FieldError>,
    /// Findings that do not reject the request.
    pub warnings: Vec<FieldError>,
}

impl Checker {
    /// Records a defect.
    pub fn err(&mut self, pointer: &str, reason: impl Into<String>) {
        self.errors.push(FieldError {
            pointer: pointer.to_string(),
            reason: reason.into(),
        });
    }

    /// Records a warning.
    pub fn warn(&mut self, pointer: &str, reason: impl Into<String>) {
        self.warnings.push(FieldError {
            pointer: pointer.to_string(),
            reason: reason.into(),
        });
    }

    /// Records `Err` of a rule at `pointer`, prefixing the attribute name.
    pub fn rule<T>(&mut self, pointer: &str, what: &str, r: Result<T, String>) -> Option<T> {
        match r {
            Ok(t) => Some(t),
            Err(reason) => {
                self.err(pointer, format!("{what} {reason}"));
                None
            }
        }
    }

    /// `v` as an object, or a defect.
    pub fn object<'a>(&mut self, v: &'a Value, pointer: &str, what: &str) -> Option<Obj<'a>> {
        match v {
            Value::Object(m) => Some(Obj {
                map: m,
                ptr: pointer.to_string(),
            }),
            other => {
                self.err(
                    pointer,
                    format!("{what} must be a JSON object, found {}", json_type(other)),
                );
                None
            }
        }
    }

    /// Attribute `key` of `o` with its pointer; a defect if it is required and absent or null.
    pub fn field<'a>(&mut self, o: &Obj<'a>, key: &str, card: Card) -> Option<(&'a Value, String)> {
        let p = push(&o.ptr, key);
        match (o.map.get(key), card) {
            (Some(Value::Null), Card::Opt) | (None, Card::Opt) => None,
            (None, Card::One) => {
                self.err(&p, format!("{key} is required (cardinality 1)"));
                None
            }
            (Some(Value::Null), Card::One) => {
                self.err(
                    &p,
                    format!("{key} is required (cardinality 1) and must not be null"),
                );
                None
            }
            (Some(v), _) => Some((v, p)),
        }
    }

    /// String attribute `key`; type defects recorded. The value is never echoed.
    pub fn str_field<'a>(
        &mut self,
        o: &Obj<'a>,
        key: &str,
        card: Card,
    ) -> Option<(&'a str, String)> {
        let (v, p) = self.field(o, key, card)?;
        match v {
            Value::String(s) => Some((s.as_str(), p)),
            other => {
                self.err(
                    &p,
                    format!("{key} must be a string, found {}", json_type(other)),
                );
                None
            }
        }
    }

    /// String attribute checked with `rule` (which must not echo the value for secrets).
    pub fn str_rule<'a>(
        &mut self,
        o: &Obj<'a>,
        key: &str,
        card: Card,
        rule: impl FnOnce(&str) -> Result<(), String>,
    ) -> Option<(&'a str, String)> {
        let (s, p) = self.str_field(o, key, card)?;
        match rule(s) {
            Ok(()) => Some((s, p)),
            Err(reason) => {
                self.err(&p, format!("{key} {reason}"));
                None
            }
        }
    }

    /// Array attribute `key`; `min_one` enforces cardinality `1..N`.
    pub fn array<'a>(
        &mut self,
        o: &Obj<'a>,
        key: &str,
        card: Card,
        min_one: bool,
    ) -> Option<(&'a Vec<Value>, String)> {
        let (v, p) = self.field(o, key, card)?;
        match v {
            Value::Array(a) if a.is_empty() && min_one => {
                self.err(
                    &p,
                    format!("{key} must have at least one item (cardinality 1..N)"),
                );
                Some((a, p))
            }
            Value::Array(a) => Some((a, p)),
            other => {
                self.err(
                    &p,
                    format!("{key} must be an array, found {}", json_type(other)),
                );
                None
            }
        }
    }

    /// Object attribute `key`.
    pub fn obj_field<'a>(&mut self, o: &Obj<'a>, key: &str, card: Card) -> Option<Obj<'a>> {
        let (v, p) = self.field(o, key, card)?;
        self.object(v, &p, key)
    }

    /// Boolean attribute `key`.
    pub fn bool_field(&mut self, o: &Obj<'_>, key: &str, card: Card) -> Option<bool> {
        let (v, p) = self.field(o, key, card)?;
        match v {
            Value::Bool(b) => Some(*b),
            other => {
                self.err(
                    &p,
                    format!("{key} must be a boolean, found {}", json_type(other)),
                );
                None
            }
        }
    }

    /// Rejects keys of `o` not in `known` (for SOL003 bodies and the envelope).
    pub fn known_keys(&mut self, o: &Obj<'_>, what: &str, known: &[&str]) {
        for k in o.map.keys() {
            if !known.contains(&k.as_str()) {
                self.err(
                    &push(&o.ptr, k),
                    format!("unknown {what} attribute; allowed: {}", known.join(", ")),
                );
            }
        }
    }
}

/// A JSON object with the pointer where it sits in the envelope.
#[derive(Debug, Clone)]
pub struct Obj<'a> {
    /// The members.
    pub map: &'a Map<String, Value>,
    /// Its pointer.
    pub ptr: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_escaping() {
        assert_eq!(push("", "a"), "/a");
        assert_eq!(push("/x", "a/b~c"), "/x/a~1b~0c");
        assert_eq!(push("/x", ""), "/x/");
    }
}
