//! JSON merge patches (RFC 7386). Applying uses the `json-patch` crate's [`json_patch::merge`];
//! that crate has no merge-patch *diff*, so [`diff`] computes one here.

use serde_json::{Map, Value};

/// The RFC 7386 merge patch that turns `from` into `to`: keys missing from `to` become `null`,
/// changed values are replaced (objects recursively, arrays and scalars whole), equal values
/// are left out. `apply(from, diff(from, to)) == to` for every `to` that holds no JSON `null`
/// (RFC 7386 cannot set a value to `null`). The adjusted template holds none unless the BaseHOT
/// does; the adjusted `nfv` holds `locationConstraints: null` for a VNFC the Grant gives no zone,
/// which the patch leaves out — absent and `null` are the same to Heat's `get_param` (`''`). The
/// `heat` fuzz target checks the patches up to such members.
pub fn diff(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            let mut p = Map::new();
            for k in a.keys() {
                if !b.contains_key(k) {
                    p.insert(k.clone(), Value::Null);
                }
            }
            for (k, vb) in b {
                match a.get(k) {
                    Some(va) if va == vb => {}
                    Some(va) => {
                        p.insert(k.clone(), diff(va, vb));
                    }
                    None => {
                        p.insert(k.clone(), vb.clone());
                    }
                }
            }
            Value::Object(p)
        }
        _ => to.clone(),
    }
}

/// `doc` with the merge patch `patch` applied (RFC 7386 §2), by [`json_patch::merge`].
pub fn apply(doc: &Value, patch: &Value) -> Value {
    let mut out = doc.clone();
    json_patch::merge(&mut out, patch);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn diff_then_apply_round_trips_and_deletes_with_null() {
        let from = json!({"a": 1, "b": {"c": [1, 2], "d": "x"}, "gone": {"y": 1}});
        let to = json!({"a": 1, "b": {"c": [2], "e": {}}, "new": {"z": true}});
        let p = diff(&from, &to);
        assert_eq!(
            p,
            json!({"gone": null, "b": {"d": null, "c": [2], "e": {}}, "new": {"z": true}})
        );
        assert_eq!(apply(&from, &p), to);
        assert_eq!(diff(&to, &to), json!({}));
        // RFC 7386 appendix A example.
        assert_eq!(
            apply(
                &json!({"a": "b", "c": {"d": "e", "f": "g"}}),
                &json!({"a": "z", "c": {"f": null}})
            ),
            json!({"a": "z", "c": {"d": "e"}})
        );
    }
}
