use std::path::Path;

use super::*;
use crate::model::AttachedVolume;
use crate::plan::stages::Action;
use crate::recipes::StepKind;
use crate::wire::sol003::InstantiateVnfRequest;

const REQUEST: &str =
    include_str!("../../../../fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");

fn driver() -> KubeadmNfs {
    let env: serde_json::Value = serde_json::from_str(REQUEST).unwrap();
    let req: InstantiateVnfRequest = serde_json::from_value(env["request"].clone()).unwrap();
    let pkg = crate::package::VnfPackage::load(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/packages/pv-k8s-cluster"
    )))
    .unwrap();
    let k = req
        .additional_params
        .as_ref()
        .unwrap()
        .k8s_cluster_installation_param
        .clone()
        .unwrap();
    let files = package_files(&k)
        .into_iter()
        .map(|f| {
            let b = pkg.read(&f).unwrap();
            (f, b)
        })
        .collect();
    KubeadmNfs::new(
        Inputs {
            vnf_instance_id: "vnf-pv".into(),
            req,
            base_hot: pkg.base_hot("simple").ok().map(|b| b.template),
            floating_ip_ports: pkg
                .base_hot("simple")
                .map(|b| b.floating_ip_ports())
                .unwrap_or_default(),
            vnfd: pkg.vnfd,
            files,
        },
        k,
    )
}

fn row(id: &str, vdu: &str, cp: &str, ip: &str) -> VnfcRow {
    crate::flavour::test_rows::vnfc_row("vnf-pv", id, vdu, cp, None, ip)
}

/// One master, two workers, the storage server with its Cinder volume.
fn rows() -> Vec<VnfcRow> {
    let mut ss = row("ss", "storage_server", "storage_server_CP", "10.10.0.30");
    ss.volumes = vec![AttachedVolume {
        resource: Some("storage_server_volume".into()),
        volume_id: "vol-1".into(),
        device: Some("/dev/vdb".into()),
    }];
    vec![
        row("m0", "masterNode", "masterNode_CP1", "10.10.0.10"),
        row("w0", "workerNode", "workerNode_CP2", "10.10.0.20"),
        row("w1", "workerNode", "workerNode_CP2", "10.10.0.21"),
        ss,
    ]
}

/// `(wave, step name, host)` of each remote stage.
fn waves(stages: &[Stage]) -> Vec<(u32, String, String)> {
    stages
        .iter()
        .filter_map(|s| match &s.action {
            crate::plan::stages::Action::Remote(r) => {
                Some((s.wave, r.step.name().to_owned(), r.step.host.clone()))
            }
            _ => None,
        })
        .collect()
}

/// The storage server's longest step, the NFS server's package, overlaps the first master's
/// cluster install (wave 0) instead of following the joins, and so do the NFS clients of the
/// idle hosts; the exports still follow the volume's filesystem and mount, and the
/// PersistentVolumes follow the exports and the joins.
#[test]
fn instantiate_overlaps_nfs_installs_with_the_cluster_install() {
    let d = driver();
    let r = rows();
    let stages = d
        .instantiate_end(HookContext {
            vnfcs: &r,
            pv_wait: Duration::from_secs(1),
            op_occ_id: "op-1",
        })
        .unwrap();
    let w = waves(&stages);
    let wave_of = |name: &str, host: &str| {
        w.iter()
            .find(|(_, n, h)| n == name && h == host)
            .unwrap_or_else(|| panic!("no {name} on {host}: {w:?}"))
            .0
    };
    // Every node's /etc/hosts block first (Tacker writes it before the install script runs).
    for node in ["m0", "w0", "w1"] {
        assert_eq!(wave_of("k8s.hosts", node), 0, "{w:?}");
    }
    assert_eq!(wave_of("k8s.install", "m0"), 1);
    assert_eq!(wave_of("nfs.server", "ss"), 0, "{w:?}");
    assert_eq!(wave_of("k8s.join_material", "m0"), 2);
    assert_eq!(wave_of("k8s.install", "w0"), 3);
    let mount = wave_of("storage.mount", "ss");
    assert!(wave_of("storage.filesystem", "ss") < mount, "{w:?}");
    let exports = wave_of("nfs.exports", "ss");
    assert!(mount < exports, "{w:?}");
    // The NFS clients install while their hosts are idle: the workers during the master's
    // install, the master during the joins.
    assert_eq!(wave_of("nfs.client", "w1"), 1, "{w:?}");
    assert_eq!(wave_of("nfs.client", "m0"), 3, "{w:?}");
    // The cluster as a VIM, read on the first master once every node joined: its admin
    // kubeconfig (the endpoint of a single master, kubeadm's port) then its bearer token.
    let kubeconfig = wave_of("k8s.kubeconfig", "m0");
    assert!(wave_of("k8s.install", "w1") < kubeconfig, "{w:?}");
    assert_eq!(wave_of("k8s.vim_token", "m0"), kubeconfig + 1, "{w:?}");
    let kc = stages
        .iter()
        .find_map(|s| match &s.action {
            Action::Remote(r) if r.step.kind == StepKind::K8sKubeconfig => Some(&r.step),
            _ => None,
        })
        .unwrap();
    assert_eq!(kc.args, ["https://10.10.0.10:6443"]);
    let first_pv = w.iter().find(|(_, n, _)| n == "pv.register").unwrap().0;
    assert!(
        exports < first_pv && wave_of("k8s.install", "w1") < first_pv,
        "{w:?}"
    );
    // One stage per host per wave: a host never runs two steps at once.
    let mut seen = std::collections::BTreeSet::new();
    for (wave, _, host) in &w {
        assert!(
            seen.insert((*wave, host.clone())),
            "{host} twice in wave {wave}: {w:?}"
        );
    }
}

/// The storage server does not scale (pv spec): an aspect with a delta for its VDU is refused,
/// naming the aspect and the VDU; the worker aspect is not.
#[test]
fn scale_of_the_storage_server_is_refused_and_of_workers_not() {
    let mut d = driver();
    assert_eq!(d.scale_refusal("worker_instance"), None);
    assert_eq!(d.scale_refusal("no_such_aspect"), None);
    d.inputs.vnfd.aspects.insert(
        "storage_instance".into(),
        crate::package::vnfd::Aspect {
            max_scale_level: 2,
            vdu_deltas: [("storage_server".to_owned(), 1)].into(),
        },
    );
    let why = d.scale_refusal("storage_instance").expect("refused");
    assert!(
        why.contains("`storage_instance`") && why.contains("`storage_server`"),
        "{why}"
    );
    assert_eq!(d.rebuild_refusal(&rows(), &["ss".into()]), None);
}

fn install_of<'a>(stages: &'a [Stage], host: &str) -> &'a Step {
    stages
        .iter()
        .find_map(|s| match &s.action {
            Action::Remote(r) if r.step.kind == StepKind::K8sInstall && r.step.host == host => {
                Some(&r.step)
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no k8s.install on {host}"))
}

/// The install script gets the options of Tacker's sample MgmtDriver: a master `-m <masters'
/// nic addresses> -i <cluster IP> -p <pod CIDR> -a <service CIDR>`, a worker `-w <own nic
/// address> -i <cluster IP>` with `ha_flag=False` (one master); the proxies travel in the 0600
/// environment file, never in the arguments.
#[test]
fn the_install_script_gets_tackers_options_and_the_proxies_in_its_environment() {
    let d = driver();
    let r = rows();
    let stages = d
        .instantiate_end(HookContext {
            vnfcs: &r,
            pv_wait: Duration::from_secs(60),
            op_occ_id: "op-1",
        })
        .unwrap();
    let script = "/usr/local/lib/vnfkeeper/install_k8s_cluster.sh";
    let master = install_of(&stages, "m0");
    assert_eq!(
        master.args,
        [
            script,
            "-m",
            "10.10.0.10",
            "-i",
            "10.10.0.10",
            "-p",
            "192.168.3.0/16",
            "-a",
            "10.199.187.0/24"
        ]
    );
    let worker = install_of(&stages, "w1");
    assert_eq!(
        worker.args,
        [script, "-w", "10.10.0.21", "-i", "10.10.0.10"]
    );
    // The join material as k8s.join_material's check printed it, kept.
    let printed = format!(
        "TOKEN_NAME=abcdef.0123456789abcdef\nTOKEN_HASH={}\nCERT_KEY={}\nalready done: x\n",
        "a".repeat(64),
        "b".repeat(64)
    );
    let material = stages
        .iter()
        .find_map(|s| match &s.action {
            Action::Remote(r) if r.step.kind == StepKind::K8sJoinMaterial => Some(&r.step),
            _ => None,
        })
        .expect("k8s.join_material planned");
    assert_eq!(material.host, "m0");
    assert!(
        d.keep(material, "TOKEN_NAME=x\n").is_err(),
        "malformed material"
    );
    let kept = d.keep(material, &printed).unwrap().expect("kept");
    assert_eq!(kept.artifact, crate::artifact::Artifact::JoinMaterial);
    let kept: KeptArtifacts = [(kept.artifact, kept.text)].into();
    let none = KeptArtifacts::default();
    assert!(
        d.late_upload(&worker.late[0], &r, &none).is_err(),
        "a join without kept material"
    );
    let env = |s: &Step| {
        let late = &s.late[0];
        assert_eq!(
            (late.path(), late.mode()),
            (&*format!("{script}.env"), 0o600)
        );
        String::from_utf8(d.late_upload(late, &r, &kept).unwrap().expose().clone()).unwrap()
    };
    // The file holds the proxies' credentials: compared, never printed.
    let worker_env = env(worker);
    let want = "export TOKEN_NAME=abcdef.0123456789abcdef\n\
                export TOKEN_HASH=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n\
                export CERT_KEY=bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\n\
                export ha_flag=False\n\
                export http_proxy=http://user1:password1@host1:port1\n\
                export https_proxy=https://user2:password2@host2:port2\n\
                export no_proxy='192.168.246.0/24,10.0.0.1,192.168.3.0/16,10.199.187.0/24,\
                127.0.0.1,localhost,10.10.0.10'\n";
    assert!(worker_env == want, "the worker's environment file differs");
    let master_env = env(master);
    assert!(!master_env.contains("ha_flag") && !master_env.contains("TOKEN_NAME"));
    for s in [master, worker] {
        assert!(
            !s.args.iter().any(|a| a.contains("password")),
            "{:?}",
            s.args
        );
    }
    // Every node's /etc/hosts names every node as Tacker's script names it.
    let hosts = stages
        .iter()
        .find_map(|s| match &s.action {
            Action::Remote(r) if r.step.kind == StepKind::K8sHosts && r.step.host == "w0" => {
                Some(&r.step)
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(
        hosts.args,
        [
            "/etc/hosts",
            "vnf-pv-nodes",
            "10.10.0.10 master10\n10.10.0.20 worker20\n10.10.0.21 worker21"
        ]
    );
    let secrets: Vec<String> = d.secrets().iter().map(|s| s.expose().clone()).collect();
    assert!(secrets.contains(&"https://user2:password2@host2:port2".to_owned()));
}

/// A `cluster_cp_name` that is the CP of no VNFC and no port a master may answer for is
/// refused with a reason naming it, not ignored.
#[test]
fn a_cluster_cp_outside_the_vnfcs_is_refused() {
    let mut d = driver();
    d.k8s.master_node.cluster_cp_name = "vip_CP".into();
    let err = d
        .instantiate_end(HookContext {
            vnfcs: &rows(),
            pv_wait: Duration::from_secs(60),
            op_occ_id: "op-1",
        })
        .unwrap_err();
    assert!(err.reason.contains("`vip_CP`"), "{err}");
}

/// The VIM's kept artifacts: the kubeconfig with the endpoint as its server, the bearer token
/// with the VIM's name (the request's `vim_name`, else Tacker's default); a token that is not
/// one is refused without quoting it.
#[test]
fn the_vim_token_and_kubeconfig_are_kept_checked() {
    let d = driver();
    let token = recipes::k8s_vim_token("m0");
    let kept = d
        .keep(
            &token,
            "BEARER_TOKEN=eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln\nalready done: x\n",
        )
        .unwrap()
        .unwrap();
    assert_eq!(kept.artifact, Artifact::KubernetesVim);
    let vim = KubernetesVim::parse(kept.text.expose()).unwrap();
    assert_eq!(
        vim.bearer_token,
        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"
    );
    assert_eq!(vim.name, d.vim_name());
    assert_eq!(
        Artifact::KubernetesVim.secrets(kept.text.expose()),
        std::slice::from_ref(&vim.bearer_token)
    );
    assert!(!format!("{vim:?}").contains("eyJ"));
    let bad = d
        .keep(&token, "BEARER_TOKEN=a b'c\n")
        .unwrap_err()
        .to_string();
    assert!(
        bad.contains("BEARER_TOKEN") && !bad.contains("a b'c"),
        "{bad}"
    );

    let kubeconfig = recipes::k8s_kubeconfig("m0", "https://10.0.0.10:6443");
    let admin = "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: \
                 LS0tLS1CRUdJTg==\n    server: https://master01:6443\n  name: kubernetes\n\
                 already done: admin kubeconfig read\n";
    let kept = d.keep(&kubeconfig, admin).unwrap().unwrap();
    assert_eq!(kept.artifact, Artifact::AdminKubeconfig);
    let text = kept.text.expose();
    assert_eq!(
        crate::artifact::kubeconfig_server(text).as_deref(),
        Some("https://10.0.0.10:6443")
    );
    assert!(!text.contains("already done"));
    assert_eq!(
        crate::artifact::kubeconfig_ca_sha256(text),
        Some(crate::digest::sha256_hex(b"-----BEGIN"))
    );
}

/// Three masters whose ports list the stack's `vip_CP` address in their allowed address pairs
/// (Tacker's `complex` flavour): every master's install gets `-m` with all three and `-i` the
/// VIP, the workers `-i` the VIP with `ha_flag=True`; healing the master that created the
/// cluster is no longer refused (the VIP, not its own address, is the endpoint), two at once
/// still is (etcd quorum).
#[test]
fn a_vip_port_is_the_cluster_ip_of_three_masters() {
    let mut d = driver();
    d.k8s.master_node.cluster_cp_name = "vip_CP".into();
    d.k8s.storage_server = None;
    let vip = "10.10.0.100";
    let mut r = vec![
        row("m0", "masterNode", "masterNode_CP1", "10.10.0.10"),
        row("m1", "masterNode", "masterNode_CP1", "10.10.0.11"),
        row("m2", "masterNode", "masterNode_CP1", "10.10.0.12"),
        row("w0", "workerNode", "workerNode_CP2", "10.10.0.20"),
    ];
    for m in &mut r[..3] {
        m.cp_addresses.insert("vip_CP".into(), vip.into());
    }
    let stages = d
        .instantiate_end(HookContext {
            vnfcs: &r,
            pv_wait: Duration::from_secs(60),
            op_occ_id: "op-1",
        })
        .unwrap();
    let script = "/usr/local/lib/vnfkeeper/install_k8s_cluster.sh";
    for m in ["m0", "m1", "m2"] {
        let a = &install_of(&stages, m).args;
        assert_eq!(
            a[1..5],
            ["-m", "10.10.0.10,10.10.0.11,10.10.0.12", "-i", vip],
            "{m}"
        );
    }
    assert_eq!(
        install_of(&stages, "w0").args,
        [script, "-w", "10.10.0.20", "-i", vip]
    );
    assert_eq!(d.rebuild_refusal(&r, &["m0".into()]), None);
    let two = d.rebuild_refusal(&r, &["m0".into(), "m1".into()]).unwrap();
    assert!(two.contains("quorum"), "{two}");
}

/// The `k8s.haproxy_backends` stages of `stages`: `(wave, host, server lines)`.
fn haproxy_of(stages: &[Stage]) -> Vec<(u32, String, String)> {
    stages
        .iter()
        .filter_map(|s| match &s.action {
            Action::Remote(r) if r.step.kind == StepKind::K8sHaproxyBackends => {
                Some((s.wave, r.step.host.clone(), r.step.args[2].clone()))
            }
            _ => None,
        })
        .collect()
}

/// A master rebuilt at a new address (its port replaced): after it joined, every master's
/// HAProxy backend lists the three masters as they are now (the new address, not the old),
/// Tacker's `server  master<n>  <address>:6443 check` lines; a master that leaves by SCALE_IN
/// is dropped from the staying masters' backends after its node and etcd member are removed;
/// a worker's heal or scale touches no HAProxy.
#[test]
fn haproxy_backends_follow_a_master_rebuilt_at_a_new_address() {
    let mut d = driver();
    d.k8s.master_node.cluster_cp_name = "vip_CP".into();
    d.k8s.storage_server = None;
    let mut r = vec![
        row("m0", "masterNode", "masterNode_CP1", "10.10.0.10"),
        row("m1", "masterNode", "masterNode_CP1", "10.10.0.11"),
        row("m2", "masterNode", "masterNode_CP1", "10.10.0.32"),
        row("w0", "workerNode", "workerNode_CP2", "10.10.0.20"),
    ];
    for m in &mut r[..3] {
        m.cp_addresses.insert("vip_CP".into(), "10.10.0.100".into());
    }
    let c = HookContext {
        vnfcs: &r,
        pv_wait: Duration::from_secs(60),
        op_occ_id: "op-2",
    };
    let want = "    server  master10  10.10.0.10:6443 check\n    \
                server  master11  10.10.0.11:6443 check\n    \
                server  master32  10.10.0.32:6443 check";
    let stages = d.heal_end(c, &["m2".into()]).unwrap();
    let h = haproxy_of(&stages);
    let hosts: Vec<&str> = h.iter().map(|(_, host, _)| host.as_str()).collect();
    assert_eq!(hosts, ["m0", "m1", "m2"]);
    assert!(h.iter().all(|(_, _, lines)| lines == want), "{h:?}");
    let join = stages
        .iter()
        .find(|s| matches!(&s.action, Action::Remote(x) if x.step.kind == StepKind::K8sInstall))
        .unwrap()
        .wave;
    assert!(h.iter().all(|(w, _, _)| *w > join), "after the re-join");
    assert!(haproxy_of(&d.heal_end(c, &["w0".into()]).unwrap()).is_empty());

    // SCALE_IN of m2: the staying masters list m0 and m1, after the etcd member is removed.
    let stages = d.scale_start(c, &["m2".into()]).unwrap();
    let h = haproxy_of(&stages);
    let etcd = stages
        .iter()
        .find(|s| {
            matches!(&s.action, Action::Remote(x) if x.step.kind == StepKind::K8sEtcdRemoveMember)
        })
        .unwrap()
        .wave;
    assert_eq!(
        h,
        [
            (
                etcd + 1,
                "m0".to_owned(),
                "    server  master10  10.10.0.10:6443 check\n    \
                 server  master11  10.10.0.11:6443 check"
                    .to_owned()
            ),
            (
                etcd + 1,
                "m1".to_owned(),
                "    server  master10  10.10.0.10:6443 check\n    \
                 server  master11  10.10.0.11:6443 check"
                    .to_owned()
            ),
        ]
    );
    // SCALE_OUT adding m2: every master lists all three once it joined.
    let h = haproxy_of(&d.scale_end(c, &["m2".into()]).unwrap());
    assert_eq!(h.len(), 3);
    assert!(h.iter().all(|(_, _, lines)| lines == want), "{h:?}");
    assert!(haproxy_of(&d.scale_end(c, &["w0".into()]).unwrap()).is_empty());
}

/// `ssh_cp_name` naming a floating IP on the CP (`masterNode_CP1_floating_ip`, as in Tacker's
/// packages with floating IPs): the role is the CP's VDU, nodes are reached at the floating
/// address recorded on their row, the install script still gets the `nic_cp_name` (fixed)
/// addresses; the VIM endpoint is `cluster_fip_name`'s floating address with the cluster IP as
/// `tls-server-name`. Without a recorded floating address the fixed one is used.
#[test]
fn a_floating_ip_as_ssh_cp_name_reaches_the_node_at_its_floating_address() {
    let mut d = driver();
    d.k8s.master_node.cluster_cp_name = "vip_CP".into();
    d.k8s.master_node.ssh_cp_name = "masterNode_CP1_floating_ip".into();
    d.k8s.master_node.cluster_fip_name = Some("vip_CP_floating_ip".into());
    d.k8s.storage_server = None;
    d.inputs
        .floating_ip_ports
        .insert("masterNode_CP1_floating_ip".into(), "masterNode_CP1".into());
    let mut r = vec![
        row("m0", "masterNode", "masterNode_CP1", "10.10.0.10"),
        row("m1", "masterNode", "masterNode_CP1", "10.10.0.11"),
        row("w0", "workerNode", "workerNode_CP2", "10.10.0.20"),
    ];
    for (m, fip) in r[..2].iter_mut().zip(["172.24.4.10", "172.24.4.11"]) {
        m.cp_addresses.insert("vip_CP".into(), "10.10.0.100".into());
        m.cp_addresses
            .insert("masterNode_CP1_floating_ip".into(), fip.into());
        m.cp_addresses
            .insert("vip_CP_floating_ip".into(), "172.24.4.100".into());
    }
    assert_eq!(d.role("masterNode").unwrap(), Role::Master);
    let a = d.access(Role::Master).unwrap();
    assert_eq!(a.cp, "masterNode_CP1");
    assert_eq!(a.address_of(&r[1]).unwrap().to_string(), "172.24.4.11");
    let stages = d
        .instantiate_end(HookContext {
            vnfcs: &r,
            pv_wait: Duration::from_secs(60),
            op_occ_id: "op-1",
        })
        .unwrap();
    assert_eq!(
        install_of(&stages, "m1").args[1..5],
        ["-m", "10.10.0.10,10.10.0.11", "-i", "10.10.0.100"]
    );
    let kubeconfig = stages
        .iter()
        .find_map(|s| match &s.action {
            Action::Remote(x) if x.step.kind == StepKind::K8sKubeconfig => Some(x.step.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        kubeconfig.args,
        ["https://172.24.4.100:16443", "10.10.0.100"]
    );
    let kept = d
        .keep(
            &kubeconfig,
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: QQ==\n    \
             server: https://10.10.0.100:16443\n  name: kubernetes\n",
        )
        .unwrap()
        .unwrap();
    assert!(
        kept.text
            .expose()
            .contains("    server: https://172.24.4.100:16443\n    tls-server-name: 10.10.0.100\n"),
        "{}",
        kept.text.expose()
    );
    // No floating address recorded: the fixed one.
    r[1].cp_addresses.remove("masterNode_CP1_floating_ip");
    assert_eq!(a.address_of(&r[1]).unwrap().to_string(), "10.10.0.11");
    // A name that is neither a CP nor a floating IP of one is refused by name.
    d.k8s.master_node.ssh_cp_name = "nothing".into();
    let e = d.role("masterNode").unwrap_err();
    assert!(e.reason.contains("`nothing`"), "{e}");
}
