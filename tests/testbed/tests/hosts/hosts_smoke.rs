//! Smallest end-to-end check of the host farm: one host up, one SSH command, teardown.

use crate::hosts_common;

use hosts_common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn hosts_smoke_one_host() {
    let g = Guard::new("tbt0", 20).await;
    let info = g
        .farm
        .start(spec("srv-0", "smoke0", g.ip(11), vec![]))
        .await
        .unwrap();
    assert!(info.host_key.starts_with("ssh-ed25519 "));
    let out = ssh_pw(info.ip, "hostname");
    assert_eq!(out.trim(), "smoke0");
    g.finish().await;
}
