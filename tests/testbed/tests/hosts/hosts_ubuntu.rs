//! The Ubuntu 20.04 host profile: `/etc/os-release`, `kubectl` absent until installed, and the
//! stand-ins answering the commands Tacker's sample Kubernetes MgmtDriver
//! (`samples/mgmt_driver/kubernetes/kubernetes_mgmt.py`) runs, each command as that driver sends
//! it and its output read the way the driver reads it.

use crate::hosts_common;

use hosts_common::*;
use testbed::hosts::{HostProfile, HostSpec};

const CLUSTER: &str = "stack-ubuntu";

fn spec(id: &str, ip: std::net::Ipv4Addr, profile: HostProfile) -> HostSpec {
    HostSpec {
        server_id: id.into(),
        hostname: id.into(),
        ip,
        cluster: CLUSTER.into(),
        volumes: Vec::new(),
        profile,
    }
}

/// The manifest the sample driver uploads and creates (`create_admin_token.yaml`): a
/// ClusterRoleBinding and a ServiceAccount, no Secret — the token Secret comes from the cluster.
const ADMIN_TOKEN_YAML: &str = "kind: ClusterRoleBinding
apiVersion: rbac.authorization.k8s.io/v1
metadata:
  name: admin
roleRef:
  kind: ClusterRole
  name: cluster-admin
  apiGroup: rbac.authorization.k8s.io
subjects:
- kind: ServiceAccount
  name: admin
  namespace: kube-system
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: admin
  namespace: kube-system
";

const PV_YAML: &str = "apiVersion: v1
kind: PersistentVolume
metadata: {name: nfs-pv1}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], nfs: {server: 10.0.0.1, path: /a}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: nfs-pv2}
spec: {capacity: {storage: 2Gi}, accessModes: [ReadWriteOnce], nfs: {server: 10.0.0.1, path: /b}}
";

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn hosts_ubuntu_profile() {
    let g = Guard::new("tbu", 16).await;
    let (u, d) = tokio::join!(
        g.farm
            .start(spec("ubuntu1", g.ip(11), HostProfile::Ubuntu2004)),
        g.farm.start(spec("debian1", g.ip(12), HostProfile::Debian)),
    );
    let (u, d) = (u.unwrap(), d.unwrap());

    // _check_envi: the driver's exact gate, and the os-release fields scripts source
    let gate = "cat /etc/os-release | grep \"PRETTY_NAME=\" | grep -c \"Ubuntu 20.04\"; arch | grep -c x86_64";
    assert_eq!(ssh_pw(u.ip, gate), "1\n1\n");
    assert_eq!(
        ssh_pw(
            u.ip,
            ". /etc/os-release; echo \"$NAME|$ID|$VERSION_ID|$VERSION_CODENAME|$VERSION\""
        ),
        "Ubuntu|ubuntu|20.04|focal|20.04.6 LTS (Focal Fossa)\n"
    );
    assert_eq!(
        ssh_pw(u.ip, "readlink /etc/os-release; cat /etc/testbed/profile"),
        "../usr/lib/os-release\nubuntu-20.04\n"
    );
    assert_eq!(
        ssh_pw(
            u.ip,
            ". /etc/lsb-release; echo $DISTRIB_ID $DISTRIB_RELEASE"
        ),
        "Ubuntu 20.04\n"
    );
    let o = ssh_pw_raw(d.ip, gate);
    assert_eq!(stdout(&o), "0\n1\n", "the Debian host fails the gate");
    assert_eq!(ssh_pw(d.ip, ". /etc/os-release; echo $ID"), "debian\n");
    // the machine keeps its own file
    let machine = std::fs::read_to_string("/etc/os-release").unwrap();
    assert!(machine.contains("ID=debian"), "{machine}");

    // _is_master_installed: kubectl does not exist before the install step
    let o = ssh_pw_raw(u.ip, "kubectl get node | grep master11");
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("kubectl: command not found"),
        "{}",
        stderr(&o)
    );
    let o = ssh_pw_raw(u.ip, "kubectl version");
    assert_eq!(o.status.code(), Some(127), "{}", stderr(&o));
    assert_eq!(
        ssh_pw(
            u.ip,
            "command -v kubectl || echo none; sudo sh -c 'command -v kubectl || echo none'"
        ),
        "none\nnone\n"
    );
    // the Debian host has the stand-in from the start
    assert_eq!(
        ssh_pw(d.ip, "command -v kubectl"),
        "/usr/local/bin/kubectl\n"
    );

    // _install_nfs_client: apt list --installed before and after the install
    let count = "sudo apt list --installed 2>/dev/null | grep -c nfs-common";
    let o = ssh_pw_raw(u.ip, count);
    assert_eq!(
        stdout(&o),
        "0\n",
        "nothing installed on a fresh Ubuntu host"
    );
    ssh_pw(
        u.ip,
        "sudo apt-get update && export DEBIAN_FRONTEND=noninteractive;sudo -E apt-get install -y nfs-common",
    );
    assert_eq!(ssh_pw(u.ip, count), "1\n");
    let o = ssh_pw_raw(u.ip, "apt list --installed");
    assert!(o.status.success());
    assert_eq!(
        stdout(&o),
        "Listing...\nnfs-common/focal,now 1.0-0testbed1 amd64 [installed]\n"
    );
    assert_eq!(
        stderr(&o),
        "\nWARNING: apt does not have a stable CLI interface. Use with caution in scripts.\n\n"
    );
    let o = ssh_pw_raw(u.ip, "apt-get list --installed");
    assert_eq!(o.status.code(), Some(100));
    assert_eq!(stderr(&o), "E: Invalid operation list\n");
    // the Debian host lists the machine's packages too (the real apt's lines)
    let o = ssh_pw_raw(d.ip, "apt list --installed 2>/dev/null | grep '^bash/'");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("bash/") && stdout(&o).contains(" [installed"),
        "{}",
        stdout(&o)
    );

    // the install step (install_k8s_cluster.sh: apt_get install -y kubelet kubeadm kubectl)
    ssh_pw(
        u.ip,
        "sudo apt-get install -y kubelet kubeadm kubectl=1.26.8-00",
    );
    assert_eq!(ssh_pw(u.ip, "command -v kubectl"), "/usr/bin/kubectl\n");
    assert!(
        ssh_pw(u.ip, "apt list --installed kube* 2>/dev/null")
            .contains("kubectl/focal,now 1.26.8-00 amd64 [installed]\n")
    );
    // check_node now runs kubectl: no node yet, grep finds nothing, no "command not found"
    let o = ssh_pw_raw(u.ip, "kubectl get node | grep master11");
    assert_eq!(o.status.code(), Some(1));
    assert!(!stderr(&o).contains("command not found"), "{}", stderr(&o));

    // _has_secret / the bearer token, exactly as the driver pipes them
    g.farm
        .write_file(
            "ubuntu1",
            "/tmp/create_admin_token.yaml",
            ADMIN_TOKEN_YAML.as_bytes(),
        )
        .await
        .unwrap();
    let has_secret = "kubectl get secret -n kube-system | grep '^admin-token'";
    assert_eq!(ssh_pw_raw(u.ip, has_secret).status.code(), Some(1));
    assert_eq!(
        ssh_pw(u.ip, "kubectl create -f /tmp/create_admin_token.yaml"),
        "clusterrolebinding.rbac.authorization.k8s.io/admin created\nserviceaccount/admin created\n"
    );
    let line = ssh_pw(u.ip, has_secret);
    let f: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(f.len(), 4, "{line}");
    assert!(f[0].starts_with("admin-token-") && f[0].len() == "admin-token-".len() + 5);
    assert_eq!(f[1..3], ["kubernetes.io/service-account-token", "3"]);
    // AGE: seconds since the Secret was made, as kubectl prints a fresh object's age.
    let age = f[3].strip_suffix('s').and_then(|n| n.parse::<u32>().ok());
    assert!(age.is_some_and(|s| s < 120), "{line}");
    let token = ssh_pw(
        u.ip,
        "kubectl get secret -n kube-system | grep '^admin-token' | awk '{print $1}' | xargs -i kubectl describe secret {} -n kube-system| grep 'token:' | awk '{print $2}'",
    );
    let token = token.trim_end();
    assert_eq!(token.split('.').count(), 3, "JWT-shaped: {token}");
    assert!(token.starts_with("eyJ"), "{token}");
    // the same token through -o jsonpath (base64 in .data, as Kubernetes stores it)
    let b64 = ssh_pw(
        u.ip,
        &format!(
            "kubectl get secret {} -n kube-system -o jsonpath='{{.data.token}}' | base64 -d",
            f[0]
        ),
    );
    assert_eq!(b64, token);
    let describe = ssh_pw(
        u.ip,
        &format!("kubectl describe secret {} -n kube-system", f[0]),
    );
    for want in [
        format!("Name:         {}\n", f[0]),
        "Namespace:    kube-system\n".to_string(),
        "Annotations:  kubernetes.io/service-account.name: admin\n".to_string(),
        "Type:  kubernetes.io/service-account-token\n".to_string(),
        "Data\n====\n".to_string(),
        "namespace: 11 bytes\n".to_string(),
    ] {
        assert!(describe.contains(&want), "{want:?} missing in {describe}");
    }

    // PVs: jsonpath range, as _register_persistent_volumes and heal_start read them
    g.farm
        .write_file("ubuntu1", "/tmp/pv.yaml", PV_YAML.as_bytes())
        .await
        .unwrap();
    ssh_pw(u.ip, "kubectl apply -f /tmp/pv.yaml");
    assert_eq!(
        ssh_pw(u.ip, "kubectl get pv nfs-pv1 -o jsonpath='{.status.phase}'"),
        "Available"
    );
    g.farm
        .kube(CLUSTER)
        .bind_pv("nfs-pv2", Some("worker12"))
        .unwrap();
    let bound = "kubectl get pv -o jsonpath='{range.items[*]}status:{@.status.phase},name:{@.metadata.name}{\"\\n\"}{end}' | grep \"status:Bound\"";
    assert_eq!(ssh_pw(u.ip, bound), "status:Bound,name:nfs-pv2\n");
    assert_eq!(
        ssh_pw(
            u.ip,
            "kubectl get pv -o jsonpath='{range .items[*]}{@.metadata.name}{\"\\n\"}{end}'"
        ),
        "nfs-pv1\nnfs-pv2\n"
    );
    // the same store from the Debian host of the cluster
    assert_eq!(
        ssh_pw(
            d.ip,
            "kubectl get pv -o jsonpath='{range .items[*]}{.metadata.name}={.status.phase} {end}'"
        ),
        "nfs-pv1=Available nfs-pv2=Bound "
    );

    // removing the package removes the binary again
    ssh_pw(u.ip, "sudo apt-get remove -y kubectl");
    let o = ssh_pw_raw(u.ip, "kubectl get node");
    assert_eq!(o.status.code(), Some(127));
    assert!(stderr(&o).contains("kubectl: command not found"));
    // the Debian host's machine kubectl link is never touched by its apt stand-in
    ssh_pw(d.ip, "sudo apt-get remove -y kubectl");
    assert_eq!(
        ssh_pw(d.ip, "command -v kubectl"),
        "/usr/local/bin/kubectl\n"
    );

    g.finish().await;
}
