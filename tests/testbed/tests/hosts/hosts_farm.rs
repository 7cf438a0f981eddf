//! Host farm acceptance tests (need root): isolation, SSH/SFTP, volumes, NFS, rebuild, faults,
//! stand-ins, teardown. Each test uses its own prefix and subnet, so they run in parallel.

use crate::hosts_common;

use std::time::Duration;

use hosts_common::*;
use testbed::hosts::{HostState, VolumeSpec};

fn vol(id: &str) -> Vec<VolumeSpec> {
    vec![VolumeSpec {
        volume_id: id.into(),
        device: "/dev/vdb".into(),
        size_gib: 1,
    }]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn hosts_three_hosts_ssh_isolation_sftp() {
    let g = Guard::new("tbt1", 1).await;
    let (a, b, c) = tokio::join!(
        g.farm.start(spec("srv-1", "node1", g.ip(11), vol("vol-1"))),
        g.farm.start(spec("srv-2", "node2", g.ip(12), vec![])),
        g.farm.start(spec("srv-3", "node3", g.ip(13), vec![])),
    );
    let hosts = [a.unwrap(), b.unwrap(), c.unwrap()];
    let keys: std::collections::HashSet<_> = hosts.iter().map(|h| h.host_key.clone()).collect();
    assert_eq!(keys.len(), 3, "every host has its own host key");

    for (i, h) in hosts.iter().enumerate() {
        // password login + passwordless sudo, own hostname
        assert_eq!(
            ssh_pw(h.ip, "sudo -n true && hostname").trim(),
            format!("node{}", i + 1)
        );
        // root key login
        let o = ssh_root(&g.key(), h.ip, "id -u");
        assert_eq!(
            stdout(&o).trim(),
            "0",
            "root key login: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        // the host key served is the one reported
        let scan = stdout(&sh(&format!("ssh-keyscan -t ed25519 {} 2>/dev/null", h.ip)));
        assert!(
            scan.contains(&h.host_key),
            "keyscan {scan:?} vs {}",
            h.host_key
        );
    }

    // own PID namespace, no default route, private /dev with the volume
    let ps = ssh_pw(hosts[0].ip, "ps -e -o pid=,comm=");
    assert!(
        ps.lines().count() < 15,
        "host sees only its own processes: {ps}"
    );
    assert!(ps.lines().any(|l| l.trim().starts_with("1 ")), "{ps}");
    assert_eq!(ssh_pw(hosts[0].ip, "ip route show default").trim(), "");
    assert!(ssh_pw(hosts[0].ip, "ls -l /dev/vdb").starts_with('b'));
    assert!(!ssh_pw_raw(hosts[1].ip, "test -e /dev/vdb").status.success());

    // copy-on-write isolation: /etc, /root, /tmp written on host 1 only
    ssh_pw(
        hosts[0].ip,
        "echo one | sudo tee /etc/tb-isolation >/dev/null && echo x > /tmp/tb-iso && sudo touch /usr/local/tb-iso",
    );
    assert_eq!(ssh_pw(hosts[0].ip, "cat /etc/tb-isolation").trim(), "one");
    for f in ["/etc/tb-isolation", "/tmp/tb-iso", "/usr/local/tb-iso"] {
        assert!(
            !ssh_pw_raw(hosts[1].ip, &format!("test -e {f}"))
                .status
                .success(),
            "{f} leaked to host 2"
        );
        assert!(
            !std::path::Path::new(f).exists(),
            "{f} leaked to the machine"
        );
    }
    assert!(
        std::fs::read_to_string("/etc/passwd")
            .unwrap()
            .lines()
            .all(|l| !l.starts_with("ubuntu:"))
    );

    // host 1 reaches host 2 by SSH; nothing off the bridge is routable
    let o = ssh_pw(
        hosts[0].ip,
        &format!(
            "sshpass -p ubuntu ssh -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null ubuntu@{} hostname",
            hosts[1].ip
        ),
    );
    assert_eq!(o.trim(), "node2");
    assert!(
        !ssh_pw_raw(hosts[0].ip, "ip route get 8.8.8.8")
            .status
            .success()
    );

    // SFTP
    let batch = std::env::temp_dir().join("tbt1-sftp-batch");
    std::fs::write(&batch, "put /etc/hostname uploaded.txt\nls\n").unwrap();
    let o = sh(&format!(
        "sshpass -p ubuntu sftp -o BatchMode=no -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -b {} ubuntu@{}",
        batch.display(),
        hosts[2].ip
    ));
    assert!(
        o.status.success(),
        "sftp: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let up = g
        .farm
        .read_file("srv-3", "/home/ubuntu/uploaded.txt")
        .await
        .unwrap();
    assert_eq!(up, std::fs::read("/etc/hostname").unwrap());

    // interactive session with a pty
    let o = sh(&format!(
        "printf 'echo interactive-$((6*7))\\nexit\\n' | sshpass -p ubuntu ssh -tt -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null ubuntu@{}",
        hosts[1].ip
    ));
    assert!(stdout(&o).contains("interactive-42"), "{}", stdout(&o));
    assert!(
        g.farm
            .command_log("srv-2")
            .await
            .unwrap()
            .contains(&"[interactive shell]".to_string())
    );

    // exec (nsenter) sees the same host
    let o = g
        .farm
        .exec("srv-1", "cat /etc/tb-isolation; hostname")
        .await
        .unwrap();
    assert_eq!(stdout(&o), "one\nnode1\n");

    // the command log has every SSH command in order
    let log = g.farm.command_log("srv-1").await.unwrap();
    assert_eq!(log[0], "sudo -n true && hostname");
    assert_eq!(log[1], "id -u");
    assert!(log.iter().any(|c| c == "cat /etc/tb-isolation"));
    let log3 = g.farm.command_log("srv-3").await.unwrap();
    assert!(log3.iter().any(|c| c == "[sftp subsystem]"), "{log3:?}");

    let st = g.farm.hosts();
    assert_eq!(st.len(), 3);
    assert!(
        st.iter()
            .all(|h| h.state == HostState::Running && h.pid.is_some())
    );
    g.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn hosts_volume_mkfs_nfs_and_rebuild() {
    let g = Guard::new("tbt2", 2).await;
    let storage = g
        .farm
        .start(spec("srv-st", "storage", g.ip(21), vol("vol-nfs")))
        .await
        .unwrap();
    let client = g
        .farm
        .start(spec("srv-cl", "worker", g.ip(22), vec![]))
        .await
        .unwrap();
    let s = storage.ip;

    // a fresh volume has no file system
    assert!(!ssh_pw_raw(s, "sudo blkid /dev/vdb").status.success());
    ssh_pw(s, "sudo mkfs.ext4 -q -F /dev/vdb");
    assert!(ssh_pw(s, "sudo blkid /dev/vdb").contains("TYPE=\"ext4\""));
    ssh_pw(
        s,
        "sudo mkdir -p /volume && sudo mount /dev/vdb /volume && echo hello | sudo tee /volume/hello.txt >/dev/null",
    );
    assert!(ssh_pw(s, "findmnt -n -o SOURCE /volume").contains("/dev/vdb"));
    assert_eq!(
        g.farm.mkfs_log("srv-st").await.unwrap(),
        vec!["mkfs.ext4 -q -F /dev/vdb".to_string()]
    );
    // the mount lives in the host only
    assert!(
        !std::fs::read_to_string("/proc/mounts")
            .unwrap()
            .contains("/volume")
    );

    // NFS: exportfs is missing until nfs-kernel-server is "installed"
    assert_eq!(ssh_pw_raw(s, "sudo exportfs -ra").status.code(), Some(127));
    ssh_pw(s, "sudo apt-get install -y nfs-kernel-server");
    ssh_pw(
        s,
        "echo '/volume *(rw,sync,no_root_squash,no_subtree_check)' | sudo tee /etc/exports >/dev/null && sudo exportfs -ra",
    );
    assert!(ssh_pw(s, "sudo exportfs -v").contains("/volume"));
    let c = client.ip;
    assert_eq!(
        ssh_pw(c, &format!("nfs-cat nfs://{s}/volume/hello.txt")),
        "hello\n"
    );
    ssh_pw(
        c,
        &format!(
            "echo from-worker > /tmp/w.txt && sudo nfs-cp /tmp/w.txt nfs://{s}/volume/from-worker.txt"
        ),
    );
    assert_eq!(
        ssh_pw(s, "sudo cat /volume/from-worker.txt"),
        "from-worker\n"
    );
    assert!(ssh_pw(c, &format!("nfs-ls 'nfs://{s}/volume?version=4'")).contains("hello.txt"));
    // systemctl restart nfs-kernel-server re-reads /etc/exports
    ssh_pw(
        s,
        "sudo mkdir -p /volume/sub && echo '/volume/sub *(ro)' | sudo tee -a /etc/exports >/dev/null && sudo systemctl restart nfs-kernel-server",
    );
    assert!(ssh_pw(s, "sudo exportfs").contains("/volume/sub"));
    assert!(ssh_pw(s, "systemctl is-active nfs-kernel-server").contains("active"));

    // rebuild: stop + start with the same volume → data kept, new host key, fresh root
    g.farm.stop("srv-st").await.unwrap();
    assert!(g.farm.hosts().iter().all(|h| h.server_id != "srv-st"));
    let again = g
        .farm
        .start(spec("srv-st", "storage", g.ip(21), vol("vol-nfs")))
        .await
        .unwrap();
    assert_ne!(
        again.host_key, storage.host_key,
        "a rebuilt host gets a new host key"
    );
    assert!(
        !ssh_pw_raw(s, "test -e /etc/exports").status.success(),
        "root file system is fresh"
    );
    assert!(ssh_pw(s, "sudo blkid /dev/vdb").contains("ext4"));
    ssh_pw(s, "sudo mkdir -p /volume && sudo mount /dev/vdb /volume");
    assert_eq!(
        ssh_pw(s, "sudo cat /volume/hello.txt /volume/from-worker.txt"),
        "hello\nfrom-worker\n"
    );
    assert_eq!(
        g.farm.mkfs_log("srv-st").await.unwrap().len(),
        1,
        "mkfs ran once across the rebuild"
    );

    // a volume cannot be deleted while attached; afterwards its file is gone
    assert!(g.farm.delete_volume("vol-nfs").await.is_err());
    g.farm.stop("srv-st").await.unwrap();
    let file = g.farm.volume_file("vol-nfs");
    assert!(file.exists());
    g.farm.delete_volume("vol-nfs").await.unwrap();
    assert!(!file.exists());
    g.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn hosts_faults_sshd_hang_hostkey() {
    let g = Guard::new("tbt3", 3).await;
    let h = g
        .farm
        .start(spec("srv-f", "faulty", g.ip(31), vec![]))
        .await
        .unwrap();
    assert_eq!(ssh_pw(h.ip, "echo ok"), "ok\n");

    // sshd stopped: connection refused; the host itself keeps running
    g.farm.stop_sshd("srv-f").await.unwrap();
    assert_eq!(g.farm.hosts()[0].state, HostState::SshdStopped);
    let o = ssh_pw_raw(h.ip, "true");
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("refused"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        stdout(&g.farm.exec("srv-f", "echo alive").await.unwrap()),
        "alive\n"
    );
    g.farm.start_sshd("srv-f").await.unwrap();
    assert_eq!(g.farm.hosts()[0].state, HostState::Running);
    assert_eq!(ssh_pw(h.ip, "echo back"), "back\n");

    // hang: the command is recorded but never runs
    g.farm.set_hang("srv-f", true).await.unwrap();
    assert_eq!(g.farm.hosts()[0].state, HostState::Hanging);
    let t = std::time::Instant::now();
    let o = sh(&format!(
        "timeout 3 sshpass -p ubuntu ssh -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null ubuntu@{} 'touch /tmp/ran'",
        h.ip
    ));
    assert!(!o.status.success());
    assert!(t.elapsed() >= Duration::from_secs(3));
    assert!(
        g.farm
            .command_log("srv-f")
            .await
            .unwrap()
            .contains(&"touch /tmp/ran".to_string())
    );
    g.farm.set_hang("srv-f", false).await.unwrap();
    assert_eq!(
        ssh_pw(h.ip, "test -e /tmp/ran || echo never-ran"),
        "never-ran\n"
    );

    // new host key: strict checking against the old key fails, the new key is served
    let kh = std::env::temp_dir().join("tbt3-known_hosts");
    std::fs::write(&kh, format!("{} {}\n", h.ip, h.host_key)).unwrap();
    let strict = |kh: &std::path::Path| {
        sh(&format!(
            "sshpass -p ubuntu ssh -o StrictHostKeyChecking=yes -o UserKnownHostsFile={} ubuntu@{} true",
            kh.display(),
            h.ip
        ))
    };
    assert!(strict(&kh).status.success());
    let new_key = g.farm.rotate_host_key("srv-f").await.unwrap();
    assert_ne!(new_key, h.host_key);
    assert_eq!(g.farm.host_key("srv-f").unwrap(), new_key);
    let o = strict(&kh);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("HOST IDENTIFICATION HAS CHANGED"));
    std::fs::write(&kh, format!("{} {}\n", h.ip, new_key)).unwrap();
    assert!(strict(&kh).status.success());
    let _ = std::fs::remove_file(&kh);

    let log = g.farm.command_log("srv-f").await.unwrap();
    assert_eq!(log.first().map(String::as_str), Some("echo ok"));
    g.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn hosts_standins_kubectl_apt_systemctl() {
    let g = Guard::new("tbt4", 4).await;
    let m = g
        .farm
        .start(spec("srv-m", "master", g.ip(41), vec![]))
        .await
        .unwrap()
        .ip;
    let w = g
        .farm
        .start(spec("srv-w", "worker1", g.ip(42), vec![]))
        .await
        .unwrap()
        .ip;
    let kube = g.farm.kube("stack-1");
    kube.register_node("master", m, &["control-plane"]).unwrap();
    kube.register_node("worker1", w, &[]).unwrap();

    // PV apply on one host, seen from the other (shared store)
    let pv = "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: nfs-pv1\nspec:\n  capacity:\n    storage: 1Gi\n  accessModes: [ReadWriteOnce]\n  persistentVolumeReclaimPolicy: Retain\n  nfs:\n    server: 10.231.4.50\n    path: /volume\n";
    ssh_pw(
        m,
        &format!("cat > /tmp/pv.yaml <<'EOF'\n{pv}EOF\nkubectl apply -f /tmp/pv.yaml"),
    );
    let phase = |ip| ssh_pw(ip, "kubectl get pv nfs-pv1 -o jsonpath='{.status.phase}'");
    assert_eq!(phase(w), "Available");
    assert_eq!(
        kube.pv_phase("nfs-pv1").unwrap().as_deref(),
        Some("Available")
    );
    kube.bind_pv("nfs-pv1", Some("worker1")).unwrap();
    assert_eq!(phase(m), "Bound");
    let pods: serde_json::Value =
        serde_json::from_str(&ssh_pw(m, "kubectl get pods -A -o json")).unwrap();
    assert_eq!(pods["items"].as_array().unwrap().len(), 1);
    kube.unbind_pv("nfs-pv1", true).unwrap();
    assert_eq!(phase(w), "Released");
    ssh_pw(m, "kubectl delete pv nfs-pv1");
    assert!(kube.pv_phase("nfs-pv1").unwrap().is_none());

    // nodes: get -o json, readiness, cordon/drain/delete
    let nodes: serde_json::Value =
        serde_json::from_str(&ssh_pw(m, "kubectl get nodes -o json")).unwrap();
    assert_eq!(nodes["items"].as_array().unwrap().len(), 2);
    kube.set_node_ready("worker1", false).unwrap();
    assert!(ssh_pw(m, "kubectl get nodes").contains("NotReady"));
    assert_eq!(
        ssh_pw(
            m,
            "kubectl get node worker1 -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}'"
        ),
        "False"
    );
    kube.set_node_ready("worker1", true).unwrap();
    ssh_pw(
        m,
        "kubectl drain worker1 --ignore-daemonsets --delete-emptydir-data",
    );
    assert!(ssh_pw(m, "kubectl get nodes").contains("SchedulingDisabled"));
    ssh_pw(m, "kubectl delete node worker1");
    assert_eq!(kube.nodes().unwrap(), vec!["master".to_string()]);
    // exec reaches only an etcd pod's etcdctl; a pod that does not exist answers as kubectl does.
    let o = ssh_pw_raw(m, "kubectl exec -it foo -- sh");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("pods \"foo\" not found"));
    let o = ssh_pw_raw(m, "kubectl rollout status deploy/x");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not support"));
    assert!(
        kube.kubectl_log()
            .unwrap()
            .iter()
            .any(|l| l == "master kubectl delete node worker1")
    );

    // apt-get and systemctl stand-ins record what they were asked
    ssh_pw(
        w,
        "sudo apt-get update && sudo apt-get install -y nfs-common docker.io=20.10",
    );
    assert_eq!(
        stdout(
            &g.farm
                .exec("srv-w", "ls /var/lib/testbed/apt/installed")
                .await
                .unwrap()
        ),
        "docker.io\nnfs-common\n"
    );
    ssh_pw(
        w,
        "sudo systemctl enable --now docker && systemctl is-active docker && systemctl is-enabled docker.service",
    );
    assert!(
        !ssh_pw_raw(w, "systemctl is-active kubelet")
            .status
            .success()
    );
    let sl = g
        .farm
        .read_file("srv-w", "/var/lib/testbed/systemctl.log")
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&sl).contains("systemctl enable --now docker"));

    // docker stand-in: a registry container is the real docker-registry, reachable from other hosts
    assert_eq!(
        ssh_pw_raw(m, "docker ps").status.code(),
        Some(127),
        "docker is missing until installed"
    );
    ssh_pw(
        w,
        "sudo docker login -u reguser -p secret 192.168.0.10:5000",
    );
    ssh_pw(
        w,
        "sudo docker run -d -p 5000:5000 -v /home/ubuntu/registry:/var/lib/registry --restart=always --name private_registry registry:latest",
    );
    assert_eq!(
        ssh_pw(m, &format!("curl -s http://{w}:5000/v2/_catalog")).trim(),
        r#"{"repositories":[]}"#
    );
    assert_eq!(
        ssh_pw(w, "sudo docker ps --format '{{.Names}}'").trim(),
        "private_registry"
    );
    assert_eq!(
        ssh_pw(
            w,
            "sudo docker inspect -f '{{.State.Running}}' private_registry"
        )
        .trim(),
        "true"
    );
    ssh_pw(w, "sudo docker stop private_registry");
    assert_eq!(
        ssh_pw(
            w,
            "sudo docker inspect -f '{{.State.Running}}' private_registry"
        )
        .trim(),
        "false"
    );
    assert!(
        !ssh_pw_raw(m, &format!("curl -sf http://{w}:5000/v2/_catalog"))
            .status
            .success()
    );
    ssh_pw(
        w,
        "python3 -c \"import io,json,tarfile; t=tarfile.open('/tmp/img.tar','w'); d=json.dumps([{'RepoTags':['k8s/pause:3.9']}]).encode(); i=tarfile.TarInfo('manifest.json'); i.size=len(d); t.addfile(i,io.BytesIO(d)); t.close()\"",
    );
    assert_eq!(
        ssh_pw(w, "sudo docker load -i /tmp/img.tar").trim(),
        "Loaded image: k8s/pause:3.9"
    );
    ssh_pw(
        w,
        "sudo docker pull registry:2 && sudo docker tag k8s/pause:3.9 10.0.0.1:5000/pause:3.9",
    );
    let images = ssh_pw(w, "sudo docker images");
    assert!(
        images.contains("registry") && images.contains("10.0.0.1:5000/pause"),
        "{images}"
    );
    assert!(!ssh_pw_raw(w, "sudo docker compose up").status.success());
    let dl = String::from_utf8_lossy(
        &g.farm
            .read_file("srv-w", "/var/lib/testbed/docker.log")
            .await
            .unwrap(),
    )
    .into_owned();
    assert!(
        dl.contains("docker login -u reguser -p *** 192.168.0.10:5000") && !dl.contains("secret"),
        "{dl}"
    );
    g.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn hosts_down_all_after_crash() {
    let g = Guard::new("tbt6", 6).await;
    g.farm
        .start(spec("srv-x", "crashy", g.ip(61), vol("vol-x")))
        .await
        .unwrap();
    g.farm
        .exec(
            "srv-x",
            "mkfs.ext4 -q /dev/vdb && mkdir -p /v && mount /dev/vdb /v",
        )
        .await
        .unwrap();
    // simulate a crash: forget the farm (no Drop, no shutdown)
    let mut g = g;
    g.armed = false;
    std::mem::forget(g.farm.clone());
    let prefix = g.prefix.clone();
    let rep = testbed::hosts::down_all(&prefix).await.unwrap();
    assert!(
        !rep.processes.is_empty() && rep.netns.len() == 1 && rep.loop_devices.len() == 1,
        "{rep:?}"
    );
    assert!(rep.links.iter().any(|l| l == "tbt6-br"), "{rep:?}");
    assert!(rep.errors.is_empty(), "{rep:?}");
    assert_nothing_left(&prefix);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn hosts_nfs_export_of_a_root_fs_directory() {
    // without a volume: the export lives on the host's copy-on-write root (overlay with nfs_export)
    let g = Guard::new("tbt8", 8).await;
    let s = g
        .farm
        .start(spec("srv-a", "nfs-a", g.ip(81), vec![]))
        .await
        .unwrap()
        .ip;
    let c = g
        .farm
        .start(spec("srv-b", "nfs-b", g.ip(82), vec![]))
        .await
        .unwrap()
        .ip;
    ssh_pw(
        s,
        "sudo apt-get install -y nfs-kernel-server && sudo mkdir -p /srv/nfs && echo hi | sudo tee /srv/nfs/f >/dev/null \
         && echo '/srv/nfs 10.231.8.0/24(rw,no_root_squash)' | sudo tee /etc/exports >/dev/null && sudo exportfs -ra",
    );
    assert_eq!(ssh_pw(c, &format!("nfs-cat nfs://{s}/srv/nfs/f")), "hi\n");
    ssh_pw(c, &format!("sudo nfs-cp /etc/hostname nfs://{s}/srv/nfs/g"));
    assert_eq!(ssh_pw(s, "sudo cat /srv/nfs/g"), "nfs-b\n");
    // export_to is honoured: a network inside the testbed subnet that leaves the client out is
    // refused (networks outside the subnet stand for the testbed network: see exportfs-standin)
    ssh_pw(
        s,
        &format!(
            "echo '/srv/nfs {s}/32(rw)' | sudo tee /etc/exports >/dev/null && sudo exportfs -ra"
        ),
    );
    assert!(
        !ssh_pw_raw(c, &format!("nfs-cat nfs://{s}/srv/nfs/f"))
            .status
            .success()
    );
    g.finish().await;
}
