//! Bridge, veth pairs and network namespaces (through `ip`).

use std::net::Ipv4Addr;

use anyhow::{Result, bail};
use ipnet::Ipv4Net;

use super::util::{run, run_stdin};

/// Name of the farm's bridge.
pub(crate) fn bridge_name(prefix: &str) -> String {
    format!("{prefix}-br")
}

/// Name of host `index`'s network namespace.
pub(crate) fn netns_name(prefix: &str, index: u32) -> String {
    format!("{prefix}-h{index}")
}

/// Name of host `index`'s veth end on the bridge (the other end is `eth0` inside the host).
pub(crate) fn veth_name(prefix: &str, index: u32) -> String {
    format!("{prefix}-v{index}")
}

/// Creates the bridge with the gateway address (`cidr`, e.g. 10.231.0.1/24). Fails if it exists.
pub(crate) async fn create_bridge(name: &str, cidr: Ipv4Net) -> Result<()> {
    if std::path::Path::new("/sys/class/net").join(name).exists() {
        bail!(
            "bridge {name} already exists (leftover of an earlier run? run `testbed down` / hosts::down_all)"
        );
    }
    run_stdin(
        "ip",
        &["-batch", "-"],
        &format!("link add {name} type bridge\naddr add {cidr} dev {name}\nlink set {name} up\n"),
    )
    .await
}

/// Creates namespace `ns`, a veth pair into it and the host address (no default route).
pub(crate) async fn create_host_net(
    bridge: &str,
    ns: &str,
    veth: &str,
    ip: Ipv4Addr,
    prefix_len: u8,
) -> Result<()> {
    run_stdin(
        "ip",
        &["-batch", "-"],
        &format!(
            "netns add {ns}\nlink add {veth} type veth peer name eth0 netns {ns}\nlink set {veth} master {bridge} up\n"
        ),
    )
    .await?;
    // A rebuilt server keeps its address but gets a new MAC: announce it with a gratuitous ARP
    // when eth0 comes up (arp_notify), and drop the machine's stale neighbour entry.
    run(
        "nsenter",
        [
            &format!("--net=/run/netns/{ns}"),
            "sysctl",
            "-q",
            "-w",
            "net.ipv4.conf.eth0.arp_notify=1",
        ],
    )
    .await?;
    let _ = run(
        "ip",
        ["neigh", "flush", "to", &ip.to_string(), "dev", bridge],
    )
    .await;
    run_stdin(
        "ip",
        &["-n", ns, "-batch", "-"],
        &format!("addr add {ip}/{prefix_len} dev eth0\nlink set eth0 up\nlink set lo up\n"),
    )
    .await
}

/// Removes host networking (best effort: a missing link or namespace is not an error).
pub(crate) async fn delete_host_net(ns: &str, veth: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if std::path::Path::new("/sys/class/net").join(veth).exists()
        && let Err(e) = run("ip", ["link", "del", veth]).await
    {
        errors.push(e.to_string());
    }
    if std::path::Path::new("/run/netns").join(ns).exists()
        && let Err(e) = run("ip", ["netns", "del", ns]).await
    {
        errors.push(e.to_string());
    }
    errors
}
