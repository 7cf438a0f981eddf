//! Tacker's LCM notifications: the body of a POST to the callback goes to
//! [`notification::parse`], as `tacker::notifications` does.
//!
//! Properties: a rejection names at least one defect; when the body is JSON, every pointer names a
//! place in it ([`crate::pointer_in`]); an accepted body is a JSON object whose `id`,
//! `subscriptionId` and `vnfInstanceId` are the parsed ones, and parsing is deterministic.

use serde_json::Value;
use vnfkeeper_core::wire::notification;

use crate::pointer_in;

/// The target: see the module documentation.
pub fn run(data: &[u8]) {
    let doc: Option<Value> = serde_json::from_slice(data).ok();
    match notification::parse(data) {
        Err(errors) => {
            assert!(!errors.is_empty(), "a rejection without any defect");
            if let Some(doc) = &doc {
                for e in &errors {
                    assert!(
                        pointer_in(doc, &e.pointer),
                        "pointer {:?} ({}) is not in the body",
                        e.pointer,
                        e.reason
                    );
                }
            }
        }
        Ok(n) => {
            let doc = doc.expect("an accepted body parses as JSON");
            assert_eq!(doc["id"].as_str(), Some(n.id.as_str()));
            assert_eq!(
                doc["subscriptionId"].as_str(),
                Some(n.subscription_id.as_str())
            );
            assert_eq!(
                doc["vnfInstanceId"].as_str(),
                Some(n.vnf_instance_id.as_str())
            );
            assert_eq!(
                doc["notificationType"].as_str(),
                Some(n.notification_type.as_str())
            );
            assert_eq!(
                notification::parse(data).ok(),
                Some(n),
                "parsing is not deterministic"
            );
        }
    }
}
