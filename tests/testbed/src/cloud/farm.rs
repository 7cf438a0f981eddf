//! [`HostBackend`] for the real host farm ([`crate::hosts::HostFarm`]).

use std::sync::Arc;

use serde_json::{Value, json};

use super::backend::{BoxFut, HostBackend, HostRequest, HostStarted};
use crate::hosts::{HostFarm, HostSpec, VolumeSpec};

/// Adapter: the cloud's view of a [`HostFarm`].
pub struct FarmBackend(pub Arc<HostFarm>);

impl HostBackend for FarmBackend {
    fn set_floating_ip(
        &self,
        floating: std::net::Ipv4Addr,
        fixed: Option<std::net::Ipv4Addr>,
    ) -> BoxFut<'_, anyhow::Result<()>> {
        Box::pin(async move { self.0.set_floating_ip(floating, fixed).await })
    }
    fn start(&self, req: HostRequest) -> BoxFut<'_, anyhow::Result<HostStarted>> {
        Box::pin(async move {
            let spec = HostSpec {
                server_id: req.server_id,
                hostname: req.hostname,
                ip: req.ip,
                cluster: req.cluster,
                volumes: req
                    .volumes
                    .into_iter()
                    .map(|v| VolumeSpec {
                        volume_id: v.volume_id,
                        device: v.device,
                        size_gib: v.size_gib,
                    })
                    .collect(),
                profile: req.profile,
            };
            // A server rebuilt at the same address gets a new MAC; a neighbour entry left in the
            // machine's namespace from the old host would blackhole the farm's readiness probe
            // (and SSH) for up to ~45 s, so flush it first.
            let _ = tokio::process::Command::new("ip")
                .args(["neigh", "flush", "to", &spec.ip.to_string()])
                .output()
                .await;
            // The same in the floating IP router, which forwards to that address.
            let _ = tokio::process::Command::new("ip")
                .args(["-n", &self.0.floating_router_ns()])
                .args(["neigh", "flush", "to", &spec.ip.to_string()])
                .output()
                .await;
            let h = self.0.start(spec).await?;
            Ok(HostStarted {
                server_id: h.server_id,
                ip: h.ip,
                host_key: h.host_key,
            })
        })
    }

    fn readdress(&self, server_id: &str, ip: std::net::Ipv4Addr) -> BoxFut<'_, anyhow::Result<()>> {
        let id = server_id.to_string();
        Box::pin(async move { self.0.readdress(&id, ip).await })
    }

    fn stop(&self, server_id: &str) -> BoxFut<'_, anyhow::Result<()>> {
        let id = server_id.to_string();
        Box::pin(async move { self.0.stop(&id).await })
    }

    fn delete(&self, server_id: &str) -> BoxFut<'_, anyhow::Result<()>> {
        let id = server_id.to_string();
        Box::pin(async move { self.0.delete(&id).await })
    }

    fn delete_volume(&self, volume_id: &str) -> BoxFut<'_, anyhow::Result<()>> {
        let id = volume_id.to_string();
        Box::pin(async move { self.0.delete_volume(&id).await })
    }

    fn shutdown(&self) -> BoxFut<'_, ()> {
        Box::pin(async move {
            if let Err(e) = self.0.shutdown().await {
                tracing::warn!("host farm shutdown: {e:#}");
            }
        })
    }

    fn stop_sshd(&self, server_id: &str) -> BoxFut<'_, anyhow::Result<()>> {
        let id = server_id.to_string();
        Box::pin(async move { self.0.stop_sshd(&id).await })
    }

    fn start_sshd(&self, server_id: &str) -> BoxFut<'_, anyhow::Result<()>> {
        let id = server_id.to_string();
        Box::pin(async move { self.0.start_sshd(&id).await })
    }

    fn set_hang(&self, server_id: &str, hang: bool) -> BoxFut<'_, anyhow::Result<()>> {
        let id = server_id.to_string();
        Box::pin(async move { self.0.set_hang(&id, hang).await })
    }

    fn rotate_host_key(&self, server_id: &str) -> BoxFut<'_, anyhow::Result<String>> {
        let id = server_id.to_string();
        Box::pin(async move { self.0.rotate_host_key(&id).await })
    }

    fn bind_pv(
        &self,
        cluster: &str,
        pv: &str,
        node: Option<&str>,
    ) -> BoxFut<'_, anyhow::Result<()>> {
        let r = self.0.kube(cluster).bind_pv(pv, node);
        Box::pin(async move { r })
    }

    fn unbind_pv(&self, cluster: &str, pv: &str, released: bool) -> BoxFut<'_, anyhow::Result<()>> {
        let r = self.0.kube(cluster).unbind_pv(pv, released);
        Box::pin(async move { r })
    }

    fn set_node_ready(
        &self,
        cluster: &str,
        node: &str,
        ready: bool,
    ) -> BoxFut<'_, anyhow::Result<()>> {
        let r = self.0.kube(cluster).set_node_ready(node, ready);
        Box::pin(async move { r })
    }

    fn start_ansible_server(
        &self,
        ip: std::net::Ipv4Addr,
    ) -> BoxFut<'_, anyhow::Result<crate::hosts::AnsibleServer>> {
        Box::pin(async move { self.0.start_ansible_server(ip).await })
    }

    fn hosts_json(&self) -> Value {
        Value::Array(
            self.0
                .hosts()
                .into_iter()
                .map(|h| {
                    json!({"server_id": h.server_id, "hostname": h.hostname, "ip": h.ip.to_string(),
                           "cluster": h.cluster, "netns": h.netns, "state": h.state.to_string(),
                           "pid": h.pid, "volumes": h.volumes})
                })
                .collect(),
        )
    }
}

/// Starts a [`HostFarm`] for a testbed subnet (`10.231.0.0/24` → bridge `10.231.0.1/24`) with
/// state under `state_dir/hosts` and the given name prefix, and wraps it for the cloud.
///
/// Errors: those of [`HostFarm::new`] (not root, leftovers of a crashed run, bad subnet).
pub async fn start_farm(
    state_dir: &std::path::Path,
    prefix: &str,
    subnet: &str,
) -> anyhow::Result<Arc<dyn HostBackend>> {
    let net: ipnet::Ipv4Net = subnet
        .parse()
        .map_err(|e| anyhow::anyhow!("subnet {subnet}: {e}"))?;
    let gw = std::net::Ipv4Addr::from(u32::from(net.network()) + 1);
    let cfg = crate::hosts::FarmConfig {
        state_dir: state_dir.join("hosts"),
        prefix: prefix.to_string(),
        bridge_cidr: ipnet::Ipv4Net::new(gw, net.prefix_len())?,
    };
    let farm = HostFarm::new(cfg).await?;
    Ok(Arc::new(FarmBackend(Arc::new(farm))))
}
