//! 20 hosts up and down at once (performance target: up ≤ 5 s, down ≤ 3 s on the project machine).

use crate::hosts_common;

use std::time::Instant;

use hosts_common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn hosts_twenty_up_and_down() {
    let g = Guard::new("tbt5", 5).await;
    let t = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for i in 0..20u8 {
        let farm = g.farm.clone();
        let ip = g.ip(100 + i);
        set.spawn(async move {
            farm.start(spec(&format!("srv-{i}"), &format!("n{i}"), ip, vec![]))
                .await
        });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap().unwrap();
    }
    let up = t.elapsed();
    assert_eq!(g.farm.hosts().len(), 20);
    // every host answers SSH
    let ip = g.ip(119);
    assert_eq!(ssh_pw(ip, "hostname").trim(), "n19");
    let t = Instant::now();
    g.farm.shutdown().await.unwrap();
    let down = t.elapsed();
    eprintln!("20 hosts: up {up:?}, down {down:?}");
    assert!(up.as_secs_f64() < 15.0, "20 hosts up took {up:?}");
    assert!(down.as_secs_f64() < 10.0, "20 hosts down took {down:?}");
    g.finish().await;
}
