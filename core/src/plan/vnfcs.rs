//! VNFCs as the cloud shows them: every `OS::Nova::Server` resource of the stack (nested stacks
//! included, `nested_depth`) whose name is a VDU of the VNFD, with its CP addresses, the floating
//! addresses of its ports and attached volumes. Pure: takes the listings, returns records.

use std::collections::BTreeMap;

use crate::cloud::{FloatingIp, Port, Server, StackResource, Volume};
use crate::model::AttachedVolume;
use crate::package::Vnfd;

/// One observed VNFC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedVnfc {
    /// The VDU (the server resource's name in its template).
    pub vdu_id: String,
    /// Name of the stack that owns the server resource.
    pub stack_name: String,
    /// Id of that stack (an AutoScalingGroup member's nested stack, or the top stack).
    pub stack_id: String,
    /// The server resource's name in that stack.
    pub resource_name: String,
    /// Nova server id (empty while Heat has not created it).
    pub server_id: String,
    /// Nova status (`ACTIVE`, `ERROR`, …); `None` when Nova does not list the server.
    pub server_status: Option<String>,
    /// Nova `created` time, for "newest first" choices.
    pub created: Option<String>,
    /// CP name → first fixed IP address of its port.
    pub cp_addresses: BTreeMap<String, String>,
    /// Port resource name → address, for each port of the stack that is no VNFC's CP and whose
    /// first fixed IP is in the `allowed_address_pairs` of one of this VNFC's CP ports: an
    /// address the VNFC may answer at, e.g. the cluster VIP (`vip_CP` of Tacker's `complex`
    /// flavour) that keepalived moves between the masters. Stored with the CP addresses.
    pub shared_addresses: BTreeMap<String, String>,
    /// `OS::Neutron::FloatingIP` resource name → floating address, for each floating IP of the
    /// stack associated with one of this VNFC's CP ports or shared ports (Tacker's sample
    /// packages: `masterNode_CP1_floating_ip` on a master's port, `vip_CP_floating_ip` on the
    /// VIP port). A request names such a resource as `ssh_cp_name` (the VNFC is reached at the
    /// floating address, as Tacker's driver does when the resource has a
    /// `floating_ip_address`) or `cluster_fip_name`. Stored with the CP addresses.
    pub floating_addresses: BTreeMap<String, String>,
    /// Volumes attached to the server.
    pub volumes: Vec<AttachedVolume>,
    /// `<index>` when the server's stack is the nested stack of a top-level resource named
    /// `<VDU>-<index>` (individual VNFC management, adjusted HOT); `None` otherwise.
    pub index: Option<u32>,
    /// The VNFC's slice of the `nfv` parameter (individual VNFC management). [`observe`] leaves
    /// it `None`; the engine fills it from the adjusted HOT before storing the rows.
    pub parameters: Option<serde_json::Value>,
}

/// Builds the VNFC records from one observation. Servers of resources whose name is not a VDU
/// are ignored; the result is ordered by VDU, then by owning stack and resource name.
pub fn observe(
    vnfd: &Vnfd,
    resources: &[StackResource],
    servers: &[Server],
    ports: &[Port],
    volumes: &[Volume],
    floating_ips: &[FloatingIp],
) -> Vec<ObservedVnfc> {
    // Port id → (floating IP resource name, floating address), for the stack's floating IPs.
    let fip_by_id: BTreeMap<&str, &FloatingIp> =
        floating_ips.iter().map(|f| (f.id.as_str(), f)).collect();
    let fips_of_port: Vec<(&str, &str, &str)> = resources
        .iter()
        .filter(|r| r.resource_type == "OS::Neutron::FloatingIP")
        .filter_map(|r| {
            let f = fip_by_id.get(r.physical_resource_id.as_str())?;
            (!f.port_id.is_empty() && !f.floating_ip_address.is_empty()).then_some((
                f.port_id.as_str(),
                r.resource_name.as_str(),
                f.floating_ip_address.as_str(),
            ))
        })
        .collect();
    let server_by_id: BTreeMap<&str, &Server> =
        servers.iter().map(|s| (s.id.as_str(), s)).collect();
    let port_by_id: BTreeMap<&str, &Port> = ports.iter().map(|p| (p.id.as_str(), p)).collect();
    let volume_resource: BTreeMap<&str, &str> = resources
        .iter()
        .filter(|r| r.resource_type == "OS::Cinder::Volume")
        .map(|r| (r.physical_resource_id.as_str(), r.resource_name.as_str()))
        .collect();
    // Ports of the stack that are no VNFC's CP (a VIP port), by their first fixed IP.
    let cp_names: BTreeMap<&str, ()> = vnfd.cps.keys().map(|k| (k.as_str(), ())).collect();
    let loose_ports: BTreeMap<&str, (&str, &str)> = resources
        .iter()
        .filter(|r| {
            r.resource_type == "OS::Neutron::Port"
                && !cp_names.contains_key(r.resource_name.as_str())
        })
        .filter_map(|r| {
            let p = port_by_id.get(r.physical_resource_id.as_str())?;
            let ip = p.fixed_ips.first()?.ip_address.as_str();
            Some((ip, (r.resource_name.as_str(), p.id.as_str())))
        })
        .collect();
    let mut out = Vec::new();
    for r in resources
        .iter()
        .filter(|r| r.resource_type == "OS::Nova::Server")
    {
        if !vnfd.vdus.contains_key(&r.resource_name) {
            continue;
        }
        let server = server_by_id.get(r.physical_resource_id.as_str());
        let mut cp_addresses = BTreeMap::new();
        let mut shared_addresses = BTreeMap::new();
        let mut floating_addresses = BTreeMap::new();
        let mut add_floating = |port_id: &str| {
            for (p, name, addr) in &fips_of_port {
                if *p == port_id {
                    floating_addresses.insert((*name).to_owned(), (*addr).to_owned());
                }
            }
        };
        for (cp_name, cp) in &vnfd.cps {
            if cp.vdu != r.resource_name {
                continue;
            }
            // The CP's port is the resource of that name in the same stack as the server.
            let port = resources
                .iter()
                .find(|p| p.resource_name == *cp_name && p.stack.id == r.stack.id)
                .and_then(|p| port_by_id.get(p.physical_resource_id.as_str()));
            if let Some(p) = port {
                add_floating(&p.id);
            }
            let ip = port
                .and_then(|p| p.fixed_ips.first())
                .map(|f| f.ip_address.clone());
            if let Some(ip) = ip {
                cp_addresses.insert(cp_name.clone(), ip);
            }
            for pair in port
                .map(|p| p.allowed_address_pairs.as_slice())
                .unwrap_or(&[])
            {
                if let Some((name, id)) = loose_ports.get(pair.ip_address.as_str()) {
                    shared_addresses.insert((*name).to_owned(), pair.ip_address.clone());
                    add_floating(id);
                }
            }
        }
        let attached = volumes
            .iter()
            .filter_map(|v| {
                let a = v
                    .attachments
                    .iter()
                    .find(|a| a.server_id == r.physical_resource_id)?;
                Some(AttachedVolume {
                    resource: volume_resource.get(v.id.as_str()).map(|s| (*s).to_owned()),
                    volume_id: v.id.clone(),
                    device: a.device.clone(),
                })
            })
            .collect();
        let index = r
            .parent_resource
            .as_deref()
            .and_then(|p| vnfc_index(p, &r.resource_name));
        out.push(ObservedVnfc {
            vdu_id: r.resource_name.clone(),
            stack_name: r.stack.name.clone(),
            stack_id: r.stack.id.clone(),
            resource_name: r.resource_name.clone(),
            server_id: r.physical_resource_id.clone(),
            server_status: server.map(|s| s.status.clone()),
            created: server.and_then(|s| s.created.clone()),
            cp_addresses,
            shared_addresses,
            floating_addresses,
            volumes: attached,
            index,
            parameters: None,
        });
    }
    out.sort_by(|a, b| {
        (
            a.vdu_id.as_str(),
            a.index,
            a.created.as_deref(),
            a.stack_id.as_str(),
        )
            .cmp(&(
                b.vdu_id.as_str(),
                b.index,
                b.created.as_deref(),
                b.stack_id.as_str(),
            ))
    });
    out
}

/// The index of a VNFC whose server resource `vdu` sits in the nested stack of the top-level
/// resource `parent`: `Some(i)` when `parent` is exactly `<vdu>-<i>` (the adjusted HOT's naming,
/// `heat::template::indexed`), else `None` (an AutoScalingGroup member's random name, or no parent).
pub fn vnfc_index(parent: &str, vdu: &str) -> Option<u32> {
    let digits = parent.strip_prefix(vdu)?.strip_prefix('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let i: u32 = digits.parse().ok()?;
    // `VDU1-01` is not the name the adjusted HOT gives index 1.
    (crate::heat::template::indexed(vdu, i) == parent).then_some(i)
}

/// The address of CP `cp` of one VNFC, if recorded and an IP.
pub fn cp_address(vnfc: &crate::model::VnfcRow, cp: &str) -> Option<std::net::IpAddr> {
    vnfc.cp_addresses.get(cp)?.parse().ok()
}

/// CP name → address over every VNFC (e.g. `nfs_server_cp` of a PV registration); a CP
/// recorded on several VNFCs keeps the address of the last one.
pub fn cp_addresses(vnfcs: &[crate::model::VnfcRow]) -> BTreeMap<String, String> {
    vnfcs.iter().flat_map(|v| v.cp_addresses.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::{observe, vnfc_index};
    use crate::cloud::FloatingIp;
    use crate::cloud::{Port, StackRef, StackResource};
    use serde_json::json;

    fn resource(name: &str, id: &str, kind: &str, stack: &str) -> StackResource {
        StackResource {
            resource_name: name.into(),
            physical_resource_id: id.into(),
            resource_type: kind.into(),
            resource_status: "CREATE_COMPLETE".into(),
            status_reason: String::new(),
            stack: StackRef::new(stack, stack),
            parent_resource: None,
            nested_stack: None,
            required_by: Vec::new(),
        }
    }

    fn port(id: &str, ip: &str, pairs: &[&str]) -> Port {
        serde_json::from_value(json!({
            "id": id,
            "fixed_ips": [{"ip_address": ip}],
            "allowed_address_pairs": pairs.iter().map(|p| json!({"ip_address": p})).collect::<Vec<_>>(),
        }))
        .unwrap()
    }

    /// A port of the stack that is no CP of the VNFD (Tacker's `vip_CP`) is recorded on the
    /// VNFCs whose CP port lists its address in `allowed_address_pairs`, and only there.
    #[test]
    fn a_vip_port_in_allowed_address_pairs_is_a_shared_address() {
        let pkg = crate::package::VnfPackage::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/packages/pv-k8s-cluster"
        )))
        .unwrap();
        let resources = vec![
            resource("vip_CP", "p-vip", "OS::Neutron::Port", "top"),
            resource("masterNode", "s-m", "OS::Nova::Server", "m"),
            resource("masterNode_CP1", "p-m", "OS::Neutron::Port", "m"),
            resource("workerNode", "s-w", "OS::Nova::Server", "w"),
            resource("workerNode_CP2", "p-w", "OS::Neutron::Port", "w"),
        ];
        let ports = vec![
            port("p-vip", "10.0.0.100", &[]),
            port("p-m", "10.0.0.10", &["10.0.0.100"]),
            port("p-w", "10.0.0.20", &["10.0.0.99"]),
        ];
        let out = observe(&pkg.vnfd, &resources, &[], &ports, &[], &[]);
        let m = out.iter().find(|o| o.vdu_id == "masterNode").unwrap();
        assert_eq!(m.cp_addresses["masterNode_CP1"], "10.0.0.10");
        assert_eq!(
            m.shared_addresses,
            [("vip_CP".to_owned(), "10.0.0.100".to_owned())].into()
        );
        let w = out.iter().find(|o| o.vdu_id == "workerNode").unwrap();
        assert!(w.shared_addresses.is_empty(), "{w:?}");
    }

    /// A floating IP on a VNFC's CP port is recorded on that VNFC under its resource name, one
    /// on the VIP port on every VNFC sharing the VIP; an unassociated one, or one of no
    /// VNFC's port, nowhere; each master of an AutoScalingGroup (same resource names in member
    /// stacks) gets its own.
    #[test]
    fn floating_ips_are_recorded_on_the_vnfcs_of_their_ports() {
        let pkg = crate::package::VnfPackage::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/packages/pv-k8s-cluster"
        )))
        .unwrap();
        let resources = vec![
            resource("vip_CP", "p-vip", "OS::Neutron::Port", "top"),
            resource(
                "vip_CP_floating_ip",
                "f-vip",
                "OS::Neutron::FloatingIP",
                "top",
            ),
            resource("spare_fip", "f-spare", "OS::Neutron::FloatingIP", "top"),
            resource("masterNode", "s-m", "OS::Nova::Server", "m"),
            resource("masterNode_CP1", "p-m", "OS::Neutron::Port", "m"),
            resource(
                "masterNode_CP1_floating_ip",
                "f-m",
                "OS::Neutron::FloatingIP",
                "m",
            ),
            resource("masterNode", "s-m2", "OS::Nova::Server", "m2"),
            resource("masterNode_CP1", "p-m2", "OS::Neutron::Port", "m2"),
            resource(
                "masterNode_CP1_floating_ip",
                "f-m2",
                "OS::Neutron::FloatingIP",
                "m2",
            ),
            resource("workerNode", "s-w", "OS::Nova::Server", "w"),
            resource("workerNode_CP2", "p-w", "OS::Neutron::Port", "w"),
        ];
        let ports = vec![
            port("p-vip", "10.0.0.100", &[]),
            port("p-m", "10.0.0.10", &["10.0.0.100"]),
            port("p-m2", "10.0.0.11", &["10.0.0.100"]),
            port("p-w", "10.0.0.20", &[]),
        ];
        let fip = |id: &str, addr: &str, port: &str| FloatingIp {
            id: id.into(),
            floating_ip_address: addr.into(),
            port_id: port.into(),
            fixed_ip_address: String::new(),
        };
        let fips = vec![
            fip("f-vip", "172.24.4.100", "p-vip"),
            fip("f-m", "172.24.4.10", "p-m"),
            fip("f-m2", "172.24.4.11", "p-m2"),
            fip("f-spare", "172.24.4.99", ""),
        ];
        let out = observe(&pkg.vnfd, &resources, &[], &ports, &[], &fips);
        let of = |stack: &str| {
            out.iter()
                .find(|o| o.stack_id == stack)
                .unwrap()
                .floating_addresses
                .clone()
        };
        let both = |own: &str| -> std::collections::BTreeMap<String, String> {
            [
                ("masterNode_CP1_floating_ip".to_owned(), own.to_owned()),
                ("vip_CP_floating_ip".to_owned(), "172.24.4.100".to_owned()),
            ]
            .into()
        };
        assert_eq!(of("m"), both("172.24.4.10"));
        assert_eq!(of("m2"), both("172.24.4.11"));
        assert!(of("w").is_empty());
        // Without the floating IP listing nothing is recorded (fixed addresses only).
        let out = observe(&pkg.vnfd, &resources, &[], &ports, &[], &[]);
        assert!(out.iter().all(|o| o.floating_addresses.is_empty()));
    }

    #[test]
    fn index_comes_only_from_an_exact_vdu_dash_number_parent() {
        assert_eq!(vnfc_index("VDU1-0", "VDU1"), Some(0));
        assert_eq!(vnfc_index("VDU1-12", "VDU1"), Some(12));
        assert_eq!(vnfc_index("VDU1-01", "VDU1"), None);
        assert_eq!(vnfc_index("VDU1-", "VDU1"), None);
        assert_eq!(vnfc_index("VDU10-1", "VDU1"), None);
        assert_eq!(vnfc_index("VDU1-VirtualStorage-0", "VDU1"), None);
        assert_eq!(vnfc_index("x3kq7c2mfa5b", "workerNode"), None);
    }
}
