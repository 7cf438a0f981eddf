//! The MgmtDriver script's hook requests: the body of a POST to `tacker.hook_path` goes to
//! [`mgmt_hook::parse`], as `tacker::hooks` does.
//!
//! Properties: a rejection names at least one defect; when the body is JSON, every pointer names a
//! place in it ([`crate::pointer_in`]); an accepted body is a JSON object whose `hook`,
//! `vnfInstanceId` and `vnfLcmOpOccId` are the parsed ones, every id it carries passes the
//! identifier rule, and parsing is deterministic.

use serde_json::Value;
use vnfkeeper_core::mgmt_hook::{self, HookParams, MAX_TARGETS};
use vnfkeeper_core::wire::rules;

use crate::pointer_in;

/// The target: see the module documentation.
pub fn run(data: &[u8]) {
    let doc: Option<Value> = serde_json::from_slice(data).ok();
    match mgmt_hook::parse(data) {
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
        Ok(r) => {
            let doc = doc.expect("an accepted body parses as JSON");
            assert_eq!(doc["hook"].as_str(), Some(r.hook.as_str()));
            assert_eq!(
                doc["vnfInstanceId"].as_str(),
                Some(r.vnf_instance_id.as_str())
            );
            assert_eq!(
                doc["vnfLcmOpOccId"].as_str(),
                Some(r.vnf_lcm_op_occ_id.as_str())
            );
            let mut ids = vec![&r.vnf_instance_id, &r.vnf_lcm_op_occ_id];
            ids.extend(&r.remove_resources);
            if let HookParams::Heal { vnfc_instance_id } = &r.params {
                assert!(vnfc_instance_id.len() <= MAX_TARGETS);
                ids.extend(vnfc_instance_id);
            }
            assert!(r.remove_resources.len() <= MAX_TARGETS);
            for id in ids {
                assert!(rules::identifier(id).is_ok(), "{id:?} passed unchecked");
            }
            assert_eq!(
                mgmt_hook::parse(data).ok(),
                Some(r),
                "parsing is not deterministic"
            );
        }
    }
}
