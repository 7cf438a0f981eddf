//! What `kubectl get nodes -o json` and `kubectl get pv -o json` print on a first master: the
//! bytes are parsed as JSON as reconcile's probe does, then go to
//! [`kubectl::node_finding`] (for every `InternalIP` the document lists, and one it does not)
//! and [`kubectl::bound_pvs`] (for every PV name it lists, and one it does not).
//!
//! Properties: no panic; a node finding is `InPlace` only when a node with that `InternalIP`
//! has the condition `Ready` = `True`, and `Failed` when no node has it; its detail is short
//! (the node name cut to [`kubectl::MAX_NAME_CHARS`]); the Bound PVs are a subsequence of the
//! names asked for, each Bound in the document.

use std::net::IpAddr;

use serde_json::Value;
use vnfkeeper_core::policy::{Verdict, kubectl};

/// A detail's length bound in characters: the node name's bound plus the fixed words.
const MAX_DETAIL_CHARS: usize = kubectl::MAX_NAME_CHARS + 64;

/// The target: see the module documentation.
pub fn run(data: &[u8]) {
    let Ok(doc) = serde_json::from_slice::<Value>(data) else {
        let f = kubectl::node_finding(Err("kubectl output is not JSON"), None);
        assert_eq!(f.verdict, Verdict::Unknown);
        return;
    };
    let items: &[Value] = doc["items"].as_array().map_or(&[], Vec::as_slice);
    let mut addrs: Vec<IpAddr> = items
        .iter()
        .flat_map(|n| n["status"]["addresses"].as_array().into_iter().flatten())
        .filter_map(|a| a["address"].as_str()?.parse().ok())
        .take(64)
        .collect();
    addrs.push(IpAddr::from([192, 0, 2, 1]));
    for addr in addrs {
        let f = kubectl::node_finding(Ok(&doc), Some(addr));
        assert!(
            f.detail.chars().count() <= MAX_DETAIL_CHARS,
            "detail of {} characters",
            f.detail.chars().count()
        );
        let with_addr = |n: &&Value| {
            n["status"]["addresses"].as_array().is_some_and(|a| {
                a.iter().any(|x| {
                    x["type"] == "InternalIP" && x["address"].as_str() == Some(&addr.to_string())
                })
            })
        };
        match f.verdict {
            Verdict::InPlace => {
                let n = items
                    .iter()
                    .find(with_addr)
                    .expect("InPlace without a node");
                let ready = n["status"]["conditions"]
                    .as_array()
                    .and_then(|c| c.iter().find(|c| c["type"] == "Ready"));
                assert_eq!(ready.map(|c| &c["status"]), Some(&Value::from("True")));
            }
            Verdict::Failed => {}
            other => panic!("{other:?} for a readable node list"),
        }
        if !items.iter().any(|n| with_addr(&n)) {
            assert_eq!(f.verdict, Verdict::Failed, "no node with {addr}");
        }
    }
    let mut names: Vec<String> = items
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_owned))
        .take(64)
        .collect();
    names.push("nfs-pv-absent".into());
    let bound = kubectl::bound_pvs(&doc, &names);
    let mut rest = names.iter();
    for b in &bound {
        assert!(rest.any(|n| n == b), "{b} not asked for, or out of order");
        let last = items
            .iter()
            .rev()
            .find(|p| p["metadata"]["name"].as_str() == Some(b.as_str()))
            .expect("a Bound PV the document does not list");
        assert_eq!(last["status"]["phase"], "Bound");
    }
}
