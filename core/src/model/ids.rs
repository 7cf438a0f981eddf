//! Identifiers as types: a VNF instance, an LCM operation occurrence, a VNFC, a plan's stage.
//! Each wraps the string it is stored and sent as (serialized transparently: a stored plan, a
//! journal row or a SOL003 body reads the same as before), so a signature says which id it takes
//! and one cannot be passed for another. The store converts at its SQL boundary with
//! [`VnfInstanceId::as_str`] and `From<String>`.

use std::borrow::Borrow;
use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Wraps the id as it is stored and sent (no check: ids come from validated
            /// requests, the cloud, Tacker or the store).
            pub fn new(id: impl Into<String>) -> Self {
                Self(id.into())
            }

            /// The id as stored and sent.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id as an owned string.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        /// Debug-formats as the bare string does (`"vnf-1"`), so messages that quote an id
        /// with `{:?}` read as before.
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> Self {
                Self(id)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> Self {
                Self(id.to_owned())
            }
        }

        impl From<&String> for $name {
            fn from(id: &String) -> Self {
                Self(id.clone())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        /// Maps and sets keyed by the id are looked up with a `&str` too.
        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }
    };
}

string_id! {
    /// A `vnfInstanceId` (SOL003): the VNF an operation concerns; `vnf_instance.id` in the store.
    VnfInstanceId
}

string_id! {
    /// A `vnfLcmOpOccId` (SOL003): one LCM operation occurrence; `vnf_lcm_op_occ.id` in the
    /// store, the step journal's operation.
    OpOccId
}

string_id! {
    /// A `vnfcInstanceId` (SOL003): one VNFC, i.e. one server of a VDU, `<VDU>-<index>` or the
    /// server resource's name; `vnfc.id` in the store.
    VnfcId
}

string_id! {
    /// A stage's stable key within an operation's plan (`heat.create`,
    /// `k8s.install@<vnfcInstanceId>`, `instantiate_end`): the step journal is keyed by it, so a
    /// stored key never changes spelling.
    StageKey
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_serialize_as_the_bare_string_they_wrap() {
        let id = VnfcId::new("master-0");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"master-0\"");
        let back: VnfcId = serde_json::from_str("\"master-0\"").unwrap();
        assert_eq!(back, id);
        assert_eq!(id.to_string(), "master-0");
        assert_eq!(format!("{id:?}"), "\"master-0\"");
        assert_eq!(id, "master-0");
        let set: std::collections::BTreeSet<StageKey> = [StageKey::from("heat.create")].into();
        assert!(set.contains("heat.create"));
    }
}
