//! Cloud observation (shell): one listing of servers, ports and volumes per pass and project
//! (`Cloud::inventory`, paginated), indexed once, then each VNFC's recorded server, CP addresses
//! and volumes are compared with it. Requests per pass grow only with pagination, never with the
//! number of VNFs or servers (unlike Cluster API Provider OpenStack, whose
//! `controllers/openstackserver_controller.go` GETs each server by id).
//!
//! Verdicts ([`CloudView`]): Nova `ERROR`, or a recorded server missing from a *successful*
//! listing → confirmed; `BUILD`/`REBUILD`/`REBOOT`/… → transitional; any other non-`ACTIVE`
//! status, a CP port or an attached volume gone → suspect (needs a second observation); any
//! listing error → every VNFC unknown.

use std::collections::HashMap;

use crate::cloud::{Inventory, Port, Server, Volume};
use crate::store::VnfcRow;
use vnfkeeper_core::policy::CloudView;

use vnfkeeper_core::policy::changes::TRANSITIONAL;

/// The inventory indexed for lookups by id and address (built once per pass).
#[derive(Debug)]
pub struct Index<'a> {
    servers: HashMap<&'a str, &'a Server>,
    ports_by_ip: HashMap<&'a str, &'a Port>,
    volumes: HashMap<&'a str, &'a Volume>,
}

impl<'a> Index<'a> {
    /// Indexes one inventory. Cost O(servers + ports + volumes).
    pub fn new(inv: &'a Inventory) -> Self {
        let mut ports_by_ip = HashMap::with_capacity(inv.ports.len());
        for p in &inv.ports {
            for ip in &p.fixed_ips {
                ports_by_ip.insert(ip.ip_address.as_str(), p);
            }
        }
        Self {
            servers: inv.servers.iter().map(|s| (s.id.as_str(), s)).collect(),
            ports_by_ip,
            volumes: inv.volumes.iter().map(|v| (v.id.as_str(), v)).collect(),
        }
    }
}

/// The Nova status the listing shows for `vnfc`'s recorded server (upper case, as Nova's API
/// reference spells it: `ACTIVE`, `ERROR`, `SHUTOFF`, …) when it differs from the one the
/// store holds: `Some((server id, status))`. `None` when nothing is known (a failed listing, no
/// server recorded, the server missing) or nothing changed.
pub fn changed_status(vnfc: &VnfcRow, index: Result<&Index<'_>, &str>) -> Option<(String, String)> {
    let server_id = vnfc.server_id.as_deref().filter(|s| !s.is_empty())?;
    let server = index.ok()?.servers.get(server_id)?;
    let status = server.status.to_ascii_uppercase();
    (vnfc.server_status.as_deref() != Some(status.as_str())).then(|| (server_id.to_owned(), status))
}

/// The cloud's verdict on one VNFC. `index` is `Err(reason)` when a listing failed this pass.
/// `floating` names the VNF's `OS::Neutron::FloatingIP` resources: an address recorded under
/// one of them is on no port and is not checked (the floating IP of a port no server is bound
/// to, the cluster VIP's, appears in no server's `addresses` either).
pub fn view(
    vnfc: &VnfcRow,
    index: Result<&Index<'_>, &str>,
    floating: &std::collections::BTreeSet<String>,
) -> CloudView {
    let index = match index {
        Ok(i) => i,
        Err(why) => return CloudView::Unknown(format!("cloud listing failed: {why}")),
    };
    let Some(server_id) = vnfc.server_id.as_deref().filter(|s| !s.is_empty()) else {
        return CloudView::Transitional("no server recorded yet".into());
    };
    let Some(server) = index.servers.get(server_id) else {
        return CloudView::Confirmed(format!(
            "server {server_id} is missing from a successful Nova listing (deleted behind Heat's back)"
        ));
    };
    let status = server.status.to_ascii_uppercase();
    if status == "ERROR" {
        let fault = server
            .fault
            .as_deref()
            .map(|f| format!(": {}", f.replace(['\n', '\r'], " ")))
            .unwrap_or_default();
        return CloudView::Confirmed(format!("server {server_id} in Nova status ERROR{fault}"));
    }
    if TRANSITIONAL.contains(&status.as_str()) {
        return CloudView::Transitional(format!("server {server_id} in Nova status {status}"));
    }
    if status != "ACTIVE" {
        return CloudView::Suspect(format!("server {server_id} in Nova status {status}"));
    }
    // Ports: every recorded CP address must still be on a port of this server. A floating
    // address (recorded under its floating IP resource's name) is on no port: not checked here.
    for (cp, addr) in &vnfc.cp_addresses {
        if floating.contains(cp) {
            continue;
        }
        match index.ports_by_ip.get(addr.as_str()) {
            Some(p) if p.device_id == server_id || p.device_id.is_empty() => {}
            Some(p) => {
                return CloudView::Suspect(format!(
                    "port of CP {cp} ({addr}) is bound to {} instead of server {server_id}",
                    p.device_id
                ));
            }
            None => {
                return CloudView::Suspect(format!("no port holds CP {cp}'s address {addr}"));
            }
        }
    }
    // Volumes: every recorded volume must exist and be attached to this server.
    for v in &vnfc.volumes {
        match index.volumes.get(v.volume_id.as_str()) {
            Some(vol) if vol.attachments.iter().any(|a| a.server_id == server_id) => {}
            Some(vol) => {
                return CloudView::Suspect(format!(
                    "volume {} is not attached to server {server_id} (status {})",
                    v.volume_id, vol.status
                ));
            }
            None => {
                return CloudView::Suspect(format!("volume {} is gone", v.volume_id));
            }
        }
    }
    CloudView::Healthy
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::{FixedIp, VolumeAttachment};
    use vnfkeeper_core::model::AttachedVolume;
    use vnfkeeper_core::model::Timestamp;

    fn row(server: Option<&str>) -> VnfcRow {
        VnfcRow {
            id: "c1".into(),
            vnf_instance_id: "v".into(),
            vdu_id: "workerNode".into(),
            vnfc_index: None,
            stack_name: "s".into(),
            stack_id: "sid".into(),
            resource_name: "workerNode".into(),
            server_id: server.map(Into::into),
            server_status: Some("ACTIVE".into()),
            ip_address: Some("10.0.0.5".into()),
            cp_addresses: [("workerNode_CP2".into(), "10.0.0.5".into())].into(),
            volumes: vec![AttachedVolume {
                resource: Some("vol".into()),
                volume_id: "vol-1".into(),
                device: Some("/dev/vdb".into()),
            }],
            host_key: None,
            created_at: Timestamp::parse("2026-11-21T00:00:00.000000Z").unwrap(),
            parameters: None,
        }
    }

    fn inventory(status: &str) -> Inventory {
        let server: Server = serde_json::from_value(serde_json::json!({
            "id": "srv-1", "status": status, "fault": {"message": "No valid host was found"}
        }))
        .unwrap();
        let mut port: Port = serde_json::from_value(serde_json::json!({"id": "p1"})).unwrap();
        port.device_id = "srv-1".into();
        port.fixed_ips = vec![FixedIp {
            ip_address: "10.0.0.5".into(),
            ..FixedIp::default()
        }];
        let mut vol: Volume = serde_json::from_value(serde_json::json!({"id": "vol-1"})).unwrap();
        vol.attachments = vec![VolumeAttachment {
            server_id: "srv-1".into(),
            ..VolumeAttachment::default()
        }];
        Inventory {
            servers: vec![server],
            ports: vec![port],
            volumes: vec![vol],
        }
    }

    #[test]
    fn nova_states_map_to_views() {
        let cases = [
            ("ACTIVE", "healthy"),
            ("ERROR", "confirmed"),
            ("BUILD", "transitional"),
            ("REBOOT", "transitional"),
            ("SHUTOFF", "suspect"),
            ("SUSPENDED", "suspect"),
        ];
        for (status, want) in cases {
            let inv = inventory(status);
            let v = view(
                &row(Some("srv-1")),
                Ok(&Index::new(&inv)),
                &Default::default(),
            );
            let got = serde_json::to_value(&v).unwrap()["state"].clone();
            assert_eq!(got, want, "{status}: {v:?}");
        }
        let inv = inventory("ERROR");
        let v = view(
            &row(Some("srv-1")),
            Ok(&Index::new(&inv)),
            &Default::default(),
        );
        assert!(format!("{v:?}").contains("No valid host"), "{v:?}");
    }

    #[test]
    fn missing_server_is_confirmed_only_from_a_successful_listing() {
        let inv = inventory("ACTIVE");
        let idx = Index::new(&inv);
        assert!(matches!(
            view(&row(Some("srv-gone")), Ok(&idx), &Default::default()),
            CloudView::Confirmed(_)
        ));
        assert!(matches!(
            view(
                &row(Some("srv-gone")),
                Err("compute: 503"),
                &Default::default()
            ),
            CloudView::Unknown(_)
        ));
        assert!(matches!(
            view(&row(None), Ok(&idx), &Default::default()),
            CloudView::Transitional(_)
        ));
    }

    #[test]
    fn lost_port_or_volume_is_suspect() {
        let mut inv = inventory("ACTIVE");
        inv.volumes[0].attachments.clear();
        assert!(matches!(
            view(
                &row(Some("srv-1")),
                Ok(&Index::new(&inv)),
                &Default::default()
            ),
            CloudView::Suspect(_)
        ));
        let mut inv = inventory("ACTIVE");
        inv.ports.clear();
        assert!(matches!(
            view(
                &row(Some("srv-1")),
                Ok(&Index::new(&inv)),
                &Default::default()
            ),
            CloudView::Suspect(_)
        ));
    }

    /// An address recorded under a floating IP resource's name is on no port and not a
    /// finding; the same address under a CP's name is.
    #[test]
    fn a_floating_address_is_not_a_lost_port() {
        let inv = inventory("ACTIVE");
        let mut r = row(Some("srv-1"));
        r.cp_addresses
            .insert("workerNode_FloatingIP".into(), "172.24.4.5".into());
        let floating = ["workerNode_FloatingIP".to_owned()].into();
        assert!(matches!(
            view(&r, Ok(&Index::new(&inv)), &floating),
            CloudView::Healthy
        ));
        assert!(matches!(
            view(&r, Ok(&Index::new(&inv)), &Default::default()),
            CloudView::Suspect(_)
        ));
    }
}
