//! Findings from what `kubectl get nodes -o json` and `kubectl get pv -o json` print on a VNF's
//! first master (Kubernetes API `v1` `NodeList` and `PersistentVolumeList`): which VNFC's node
//! is Ready, which of the VNF's PersistentVolumes are Bound. The cluster is outside input: every
//! field may be missing or of the wrong type (it then counts as absent), and what is copied into
//! a finding's detail is cut to [`MAX_NAME_CHARS`].

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_json::Value;

use super::{Finding, Verdict};

/// The longest node name a detail carries, in characters: a Kubernetes node name is a DNS
/// subdomain of at most 253 characters (Kubernetes API conventions, "Names"); a longer one is
/// cut there and marked with `…`.
pub const MAX_NAME_CHARS: usize = 253;

/// The check name of a node finding.
pub const NODE_READY: &str = "k8s.node_ready";

/// The node finding of a master or worker whose address is `addr`, from `nodes` (the parsed
/// `NodeList`, or why it could not be read): the node whose `status.addresses` hold an
/// `InternalIP` equal to `addr` must have the condition `Ready` with status `True`.
/// `Unknown` when the list could not be read or the VNFC has no address; `Failed` when no node
/// has that address or it is not Ready (`False`, `Unknown` or no such condition).
pub fn node_finding(nodes: Result<&Value, &str>, addr: Option<IpAddr>) -> Finding {
    let check = NODE_READY.to_owned();
    let nodes = match nodes {
        Ok(v) => v,
        Err(why) => {
            return Finding {
                check,
                verdict: Verdict::Unknown,
                detail: format!("node list not readable: {why}"),
            };
        }
    };
    let Some(addr) = addr.map(|a| a.to_string()) else {
        return Finding {
            check,
            verdict: Verdict::Unknown,
            detail: "VNFC has no address".into(),
        };
    };
    let node = nodes["items"].as_array().into_iter().flatten().find(|n| {
        n["status"]["addresses"].as_array().is_some_and(|a| {
            a.iter()
                .any(|x| x["type"] == "InternalIP" && x["address"].as_str() == Some(addr.as_str()))
        })
    });
    let Some(node) = node else {
        return Finding {
            check,
            verdict: Verdict::Failed,
            detail: format!("no Kubernetes node has InternalIP {addr}"),
        };
    };
    let name = cut(node["metadata"]["name"].as_str().unwrap_or("?"));
    let ready = match node["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .and_then(|c| c["status"].as_str())
    {
        Some("True") => "True",
        Some("False") => "False",
        _ => "Unknown",
    };
    Finding {
        check,
        verdict: if ready == "True" {
            Verdict::InPlace
        } else {
            Verdict::Failed
        },
        detail: format!("node {name} Ready={ready}"),
    }
}

/// The names among `names` whose PersistentVolume in `pvs` (the parsed `PersistentVolumeList`)
/// has `status.phase` `Bound`, in the order of `names`. A PV listed twice counts by its last
/// entry; entries without a string `metadata.name` are ignored.
pub fn bound_pvs(pvs: &Value, names: &[String]) -> Vec<String> {
    let phases: BTreeMap<&str, &str> = pvs["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some((
                p["metadata"]["name"].as_str()?,
                p["status"]["phase"].as_str().unwrap_or(""),
            ))
        })
        .collect();
    names
        .iter()
        .filter(|n| phases.get(n.as_str()) == Some(&"Bound"))
        .cloned()
        .collect()
}

/// `name` cut to [`MAX_NAME_CHARS`] characters.
fn cut(name: &str) -> String {
    match name.char_indices().nth(MAX_NAME_CHARS) {
        Some((at, _)) => format!("{}…", &name[..at]),
        None => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn node_readiness_by_internal_ip() {
        let nodes = json!({"items": [
            {"metadata": {"name": "w1"}, "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
              "conditions": [{"type": "Ready", "status": "True"}]}},
            {"metadata": {"name": "w2"}, "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.6"}],
              "conditions": [{"type": "Ready", "status": "False"}]}},
            {"metadata": {"name": "w3"}, "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.8"}],
              "conditions": [{"type": "Ready", "status": "Truly"}]}}
        ]});
        let f = |a: &str| node_finding(Ok(&nodes), Some(a.parse().unwrap()));
        assert_eq!(f("10.0.0.5").verdict, Verdict::InPlace);
        assert_eq!(f("10.0.0.6").verdict, Verdict::Failed);
        assert_eq!(f("10.0.0.7").verdict, Verdict::Failed);
        assert_eq!(f("10.0.0.8").verdict, Verdict::Failed);
        assert_eq!(f("10.0.0.8").detail, "node w3 Ready=Unknown");
        assert_eq!(
            node_finding(Err("ssh timeout"), Some("10.0.0.5".parse().unwrap())).verdict,
            Verdict::Unknown
        );
        assert_eq!(node_finding(Ok(&nodes), None).verdict, Verdict::Unknown);
    }

    #[test]
    fn a_huge_node_name_is_cut() {
        let long = "n".repeat(100_000);
        let nodes = json!({"items": [{"metadata": {"name": long}, "status": {
            "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}]}}]});
        let f = node_finding(Ok(&nodes), Some("10.0.0.5".parse().unwrap()));
        assert_eq!(f.verdict, Verdict::Failed);
        assert!(
            f.detail.chars().count() < MAX_NAME_CHARS + 30,
            "{}",
            f.detail.len()
        );
    }

    #[test]
    fn bound_pvs_only_of_this_vnf() {
        let pvs = json!({"items": [
            {"metadata": {"name": "nfs-pv1"}, "status": {"phase": "Bound"}},
            {"metadata": {"name": "nfs-pv2"}, "status": {"phase": "Available"}},
            {"metadata": {"name": "other"}, "status": {"phase": "Bound"}},
            {"metadata": {"name": 7}, "status": {"phase": "Bound"}},
            "not an object"
        ]});
        assert_eq!(
            bound_pvs(&pvs, &["nfs-pv1".into(), "nfs-pv2".into()]),
            vec!["nfs-pv1".to_string()]
        );
        assert!(bound_pvs(&json!({"items": 3}), &["nfs-pv1".into()]).is_empty());
    }
}
