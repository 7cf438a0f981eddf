use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::Path;

use super::*;
use crate::plan::stages::Action;
use crate::wire::sol003::InstantiateVnfRequest;

const REQUEST: &str =
    include_str!("../../../../fixtures/requests/good/k8s-mgmtdriver-kubespray.10-instantiate.json");

fn driver() -> Kubespray {
    let env: serde_json::Value = serde_json::from_str(REQUEST).unwrap();
    let req: InstantiateVnfRequest = serde_json::from_value(env["request"].clone()).unwrap();
    let pkg = crate::package::VnfPackage::load(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/packages/k8s-mgmtdriver-kubespray"
    )))
    .unwrap();
    let pkg_files = pkg.clone();
    let k = req
        .additional_params
        .as_ref()
        .unwrap()
        .k8s_cluster_installation_param
        .clone()
        .unwrap();
    Kubespray::new(
        Inputs {
            vnf_instance_id: "vnf-kubespray".into(),
            req,
            base_hot: pkg.base_hot("simple").ok().map(|b| b.template),
            floating_ip_ports: pkg
                .base_hot("simple")
                .map(|b| b.floating_ip_ports())
                .unwrap_or_default(),
            vnfd: pkg.vnfd,
            files: package_files(&k)
                .into_iter()
                .map(|f| {
                    let b = pkg_files.read(&f).unwrap();
                    (f, b)
                })
                .collect(),
        },
        k,
    )
}

fn row(id: &str, vdu: &str, cp: &str, index: Option<i64>, ip: &str) -> VnfcRow {
    crate::flavour::test_rows::vnfc_row("vnf-kubespray", id, vdu, cp, index, ip)
}

/// One master, workers with indexes 0 and 9 (`worker1`, `worker10`), the LB.
fn rows() -> Vec<VnfcRow> {
    vec![
        row("m0", "masterNode", "masterNode_CP1", Some(0), "10.0.0.10"),
        row("w0", "workerNode", "workerNode_CP2", Some(0), "10.0.0.20"),
        row("w9", "workerNode", "workerNode_CP2", Some(9), "10.0.0.29"),
        row("lb", "externalLB", "externalLB_CP1", None, "10.0.0.5"),
    ]
}

fn ctx(rows: &[VnfcRow]) -> HookContext<'_> {
    HookContext {
        vnfcs: rows,
        pv_wait: Duration::from_secs(1),
        op_occ_id: "op-1",
    }
}

fn keys(stages: &[Stage]) -> Vec<String> {
    stages
        .iter()
        .map(|s| format!("{}:{}", s.wave, s.key))
        .collect()
}

fn upload<'a>(s: &'a Stage, suffix: &str) -> &'a str {
    let Action::Remote(r) = &s.action else {
        panic!("not remote")
    };
    let u = r
        .step
        .uploads
        .iter()
        .find(|u| u.path.ends_with(suffix))
        .unwrap();
    std::str::from_utf8(&u.bytes).unwrap()
}

/// The remote steps of an INSTANTIATE and a SCALE_IN (every step kind this flavour plans).
pub(crate) fn sample_steps() -> Vec<Step> {
    let d = driver();
    let r = rows();
    let mut stages = d.instantiate_end(ctx(&r)).unwrap();
    stages.extend(d.scale_start(ctx(&r), &["w0".into()]).unwrap());
    stages.extend(d.terminate_start(ctx(&r)).unwrap());
    stages.extend(d.configure(ctx(&r), &observed_mtu("mtu 1500")).unwrap());
    stages
        .into_iter()
        .filter_map(|s| match s.action {
            Action::Remote(r) => Some(r.step),
            _ => None,
        })
        .collect()
}

#[test]
fn names_come_from_the_vnfc_index_or_id() {
    let r = rows();
    assert_eq!(node_name(&r[1], Role::Worker), "worker1");
    assert_eq!(node_name(&r[2], Role::Worker), "worker10");
    let mut no_index = r[1].clone();
    no_index.vnfc_index = None;
    no_index.id = "3F2A-91bc-77d0-0000".into();
    assert_eq!(node_name(&no_index, Role::Worker), "worker-3f2a91bc");
}

#[test]
fn inventory_lists_every_node_in_kubespray_groups_without_passwords() {
    let d = driver();
    let nodes = d.nodes(&rows(), &BTreeSet::new()).unwrap();
    let step = d.inventory_step(&nodes).unwrap();
    let hosts = std::str::from_utf8(&step.uploads[0].bytes).unwrap();
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(hosts).unwrap();
    let all = &doc["all"];
    let names: Vec<&str> = all["hosts"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert_eq!(names, ["master1", "worker1", "worker10"]);
    assert_eq!(all["hosts"]["worker10"]["ansible_host"], "10.0.0.29");
    assert_eq!(all["hosts"]["worker10"]["ip"], "10.0.0.29");
    assert_eq!(all["hosts"]["worker10"]["access_ip"], "10.0.0.29");
    assert_eq!(all["hosts"]["master1"]["ansible_user"], "ubuntu");
    let group = |g: &str| -> Vec<String> {
        all["children"][g]["hosts"]
            .as_mapping()
            .map(|m| m.keys().map(|k| k.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default()
    };
    assert_eq!(group("kube_control_plane"), ["master1"]);
    assert_eq!(group("etcd"), ["master1"]);
    assert_eq!(group("kube_node"), ["master1", "worker1", "worker10"]);
    assert!(group("calico_rr").is_empty());
    let cluster = all["children"]["k8s_cluster"]["children"]
        .as_mapping()
        .unwrap();
    assert!(cluster.contains_key("kube_control_plane") && cluster.contains_key("kube_node"));
    // Passwords are references into the credentials file only.
    assert!(!hosts.contains("password: ubuntu"));
    assert!(hosts.contains("{{ vnfkeeper_credentials.worker.password }}"));
    let vars = std::str::from_utf8(&step.uploads[1].bytes).unwrap();
    let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(vars).unwrap();
    assert_eq!(v["kube_pods_subnet"], "192.168.3.0/16");
    assert_eq!(v["kube_service_addresses"], "10.199.187.0/24");
    assert_eq!(v["no_proxy"], "192.168.246.0/24,10.0.0.1");
    assert_eq!(v["loadbalancer_apiserver"]["address"], "10.0.0.5");
    assert_eq!(v["loadbalancer_apiserver"]["port"], 8383);
    for secret in ["password1", "password2", "user1:"] {
        assert!(
            !vars.contains(secret) && !hosts.contains(secret),
            "{secret}"
        );
    }
    // The planned step's arguments carry digests, not contents.
    assert_eq!(step.args[1], sha256_hex(hosts.as_bytes()));
}

#[test]
fn credentials_carry_the_passwords_and_proxies() {
    let d = driver();
    let c = credentials_yaml(&d.k8s);
    let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(c.expose()).unwrap();
    assert_eq!(v["vnfkeeper_credentials"]["master"]["password"], "ubuntu");
    assert_eq!(v["http_proxy"], "http://user1:password1@host1:port1");
    assert_eq!(v["https_proxy"], "https://user2:password2@host2:port2");
}

#[test]
fn known_hosts_come_from_pinned_keys_and_need_every_node() {
    let d = driver();
    let mut r = rows();
    let nodes = d.nodes(&r, &BTreeSet::new()).unwrap();
    let kh = known_hosts(&nodes, &r).unwrap();
    assert_eq!(
        kh,
        "10.0.0.10 ssh-ed25519 KEYm0\n10.0.0.20 ssh-ed25519 KEYw0\n10.0.0.29 ssh-ed25519 KEYw9\n"
    );
    r[2].host_key = None;
    let err = known_hosts(&nodes, &r).unwrap_err();
    assert!(err.reason.contains("worker10"), "{err}");
}

#[test]
fn haproxy_frontends_masters_and_every_node() {
    let d = driver();
    let nodes = d.nodes(&rows(), &BTreeSet::new()).unwrap();
    let cfg = haproxy_cfg("vnf-kubespray", &nodes);
    assert!(cfg.contains("bind *:8383"));
    assert!(cfg.contains("server master1 10.0.0.10:6443 check"));
    assert_eq!(haproxy_servers(&cfg, "kube_masters"), ["master1"]);
    assert_eq!(
        haproxy_servers(&cfg, "kube_nodes"),
        ["master1", "worker1", "worker10"]
    );
    // Same nodes in another order: same bytes.
    let mut rev = nodes.clone();
    rev.reverse();
    assert_eq!(haproxy_cfg("vnf-kubespray", &rev), cfg);
}

#[test]
fn haproxy_cfg_passes_haproxy_check_when_installed() {
    let Ok(out) = std::process::Command::new("haproxy").arg("-v").output() else {
        eprintln!("haproxy not installed; skipped");
        return;
    };
    assert!(out.status.success());
    let d = driver();
    let nodes = d.nodes(&rows(), &BTreeSet::new()).unwrap();
    let dir = std::env::temp_dir().join(format!("vk-haproxy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("haproxy.cfg");
    std::fs::write(&f, haproxy_cfg("vnf-kubespray", &nodes)).unwrap();
    let check = std::process::Command::new("haproxy")
        .args(["-c", "-q", "-f"])
        .arg(&f)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

fn observed_mtu(line: &str) -> BTreeMap<StageKey, String> {
    [(StageKey::from("node.nic_mtu@m0"), line.to_owned())]
        .into_iter()
        .collect()
}

#[test]
fn instantiate_end_reaches_reads_the_master_mtu_then_configures() {
    let d = driver();
    let r = rows();
    let stages = d.instantiate_end(ctx(&r)).unwrap();
    assert_eq!(
        keys(&stages),
        [
            "0:node.reach@m0",
            "0:node.reach@w0",
            "0:node.reach@w9",
            "0:node.reach@lb",
            "1:node.nic_mtu@m0",
            "2:configure",
        ]
    );
    let Action::Remote(p) = &stages[4].action else {
        panic!()
    };
    assert_eq!(p.role, Role::Master);
    assert_eq!(
        p.step.args,
        ["10.0.0.10"],
        "the master's nic_cp_name address"
    );
    assert_eq!(stages[5].action, Action::Expand(Hook::Configure));
}

#[test]
fn configure_writes_calico_mtu_then_runs_cluster_then_configures_the_lb() {
    let d = driver();
    let r = rows();
    let stages = d
        .configure(ctx(&r), &observed_mtu("already done: mtu 1450 on eth0"))
        .unwrap();
    assert_eq!(
        keys(&stages),
        [
            "0:ansible.group_vars@ansible-server",
            "1:ansible.inventory@ansible-server",
            "2:ansible.playbook@cluster.yml",
            "3:lb.script@lb",
            "4:lb.haproxy@lb",
            "5:k8s.kubeconfig@m0",
        ]
    );
    let Action::Remote(g) = &stages[0].action else {
        panic!()
    };
    assert_eq!(
        g.step.uploads[0].path,
        "/home/ansible/kubespray/inventory/vnf-kubespray/group_vars/k8s_cluster/vnfkeeper-calico.yml"
    );
    let vars: serde_yaml_ng::Value = serde_yaml_ng::from_slice(&g.step.uploads[0].bytes).unwrap();
    assert_eq!(vars["calico_mtu"], 1450);
    assert_eq!(vars["calico_veth_mtu"], 1430);
    assert_eq!(
        g.step.args[1],
        sha256_hex(&g.step.uploads[0].bytes),
        "the check compares the planned digest"
    );
    let Action::Remote(p) = &stages[2].action else {
        panic!()
    };
    assert_eq!(p.role, Role::AnsibleServer);
    assert_eq!(p.step.host, ANSIBLE_HOST);
    assert_eq!(p.step.args[0], "/home/ansible/kubespray");
    assert_eq!(p.step.args[2], "cluster.yml");
    assert_eq!(p.step.args[4], "", "no --limit");
    assert_eq!(p.step.late.len(), 2);
    // Nothing secret in what is stored.
    let stored = serde_json::to_string(&stages).unwrap();
    for secret in ["\"ubuntu\"\n", "password1", "ansible\"", "user1:"] {
        assert!(!stored.contains(secret), "{secret}");
    }
    assert!(
        stored.contains("credentials.yml"),
        "the credentials file is late"
    );
    // Without the observation, or with one that gives no MTU, nothing is decided.
    let e = d.configure(ctx(&r), &BTreeMap::new()).unwrap_err();
    assert!(e.reason.contains("no MTU was observed"), "{e}");
    let e = d
        .configure(ctx(&r), &observed_mtu("already done: mtu ? on eth0"))
        .unwrap_err();
    assert_eq!(e.step, "node.nic_mtu");
}

#[test]
fn calico_mtu_is_the_nic_mtu_and_the_veth_20_bytes_less() {
    assert_eq!(
        calico_mtu("already done: mtu 1500 on eth0").unwrap(),
        CalicoMtu {
            mtu: 1500,
            veth_mtu: 1480
        }
    );
    assert_eq!(calico_mtu("mtu 9000").unwrap().veth_mtu, 8980);
    for bad in [
        "",
        "already done: eth0",
        "mtu",
        "mtu 1500x",
        "mtu 575",
        "mtu 70000",
    ] {
        assert!(calico_mtu(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn scale_in_of_worker1_keeps_worker10_everywhere() {
    let d = driver();
    let r = rows();
    let stages = d.scale_start(ctx(&r), &["w0".into()]).unwrap();
    assert_eq!(
        keys(&stages),
        [
            "0:lb.script@lb",
            "1:lb.haproxy@lb",
            "2:k8s.drain@worker1",
            "3:ansible.playbook@remove-node.yml:worker1",
            "4:ansible.inventory@ansible-server",
        ],
        "the LB stops routing to the node before it is drained (kubespray spec, scale_start)"
    );
    let Action::Remote(drain) = &stages[2].action else {
        panic!()
    };
    assert_eq!(drain.step.host, "m0", "drained on a master that stays");
    assert_eq!(drain.step.args[0], "worker1");
    assert_eq!(drain.step.args[2], "strict");
    let Action::Remote(rm) = &stages[3].action else {
        panic!()
    };
    assert_eq!(rm.step.args[2], "remove-node.yml");
    assert_eq!(
        &rm.step.args[5..],
        ["node=worker1", "skip_confirmation=yes"]
    );
    let hosts: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(upload(&stages[4], "hosts.yaml")).unwrap();
    let names: Vec<&str> = hosts["all"]["hosts"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert_eq!(names, ["master1", "worker10"]);
    let Action::Remote(script) = &stages[0].action else {
        panic!()
    };
    assert_eq!(
        &script.step.args[3..],
        ["10.0.0.10", "10.0.0.29"],
        "the package's LB script: -m masters -w the workers that stay"
    );
    let cfg = upload(&stages[1], ".vnfkeeper-new");
    assert_eq!(haproxy_servers(cfg, "kube_nodes"), ["master1", "worker10"]);
}

#[test]
fn scale_out_runs_facts_then_scale_limited_to_the_new_nodes() {
    let d = driver();
    let r = rows();
    let stages = d.scale_end(ctx(&r), &["w9".into()]).unwrap();
    assert_eq!(
        keys(&stages),
        [
            "0:node.reach@w9",
            "1:ansible.inventory@ansible-server",
            "2:ansible.playbook@facts.yml",
            "3:ansible.playbook@scale.yml",
            "4:lb.script@lb",
            "5:lb.haproxy@lb",
        ]
    );
    let Action::Remote(s) = &stages[3].action else {
        panic!()
    };
    assert_eq!(s.step.args[4], "worker10");
}

#[test]
fn heal_of_a_worker_removes_it_leniently_then_scales_it_back_under_its_name() {
    let d = driver();
    let mut r = rows();
    let start = d.heal_start(ctx(&r), &["w0".into()]).unwrap();
    assert_eq!(
        keys(&start),
        [
            "0:k8s.drain@worker1",
            "1:ansible.playbook@remove-node.yml:worker1"
        ]
    );
    let Action::Remote(rm) = &start[1].action else {
        panic!()
    };
    assert!(rm.step.args.contains(&"reset_nodes=false".to_owned()));
    let before = d.heal_end(ctx(&r), &["w0".into()]).unwrap();
    r[1].server_id = Some("srv-new".into());
    r[1].host_key = None;
    let end = d.heal_end(ctx(&r), &["w0".into()]).unwrap();
    assert_eq!(
        keys(&end),
        [
            "0:node.reach@w0",
            "1:ansible.inventory@ansible-server",
            "2:ansible.playbook@facts.yml",
            "3:ansible.playbook@scale.yml",
            "4:lb.script@lb",
            "5:lb.haproxy@lb",
        ]
    );
    let record = |s: &[Stage]| {
        let Action::Remote(p) = &s[3].action else {
            panic!()
        };
        (p.step.args[3].clone(), p.step.args[4].clone())
    };
    assert_eq!(record(&end).1, "worker1", "same node name after heal");
    assert_ne!(
        record(&before).0,
        record(&end).0,
        "a rebuilt server is a new record"
    );
}

#[test]
fn heal_of_every_vnfc_reads_the_mtu_again_then_configures_as_instantiate_does() {
    let d = driver();
    let r = rows();
    let all: Vec<VnfcId> = r.iter().map(|v| v.id.clone()).collect();
    let end = d.heal_end(ctx(&r), &all).unwrap();
    assert_eq!(
        keys(&end),
        [
            "0:node.reach@m0",
            "0:node.reach@w0",
            "0:node.reach@w9",
            "0:node.reach@lb",
            "1:node.nic_mtu@m0",
            "2:configure",
        ]
    );
    assert_eq!(
        keys(&d.heal_end(ctx(&r), &["m0".into()]).unwrap()),
        ["0:node.reach@m0", "1:node.nic_mtu@m0", "2:configure"],
        "a healed master alone: the MTU is read again too"
    );
}

#[test]
fn configuration_only_heal_of_the_lb_converges_inventory_and_haproxy() {
    let d = driver();
    let r = rows();
    let end = d.heal_end(ctx(&r), &["lb".into()]).unwrap();
    assert_eq!(
        keys(&end),
        [
            "0:node.reach@lb",
            "1:ansible.inventory@ansible-server",
            "2:lb.script@lb",
            "3:lb.haproxy@lb"
        ]
    );
}

#[test]
fn terminate_removes_the_inventory_directory_on_the_ansible_server() {
    let d = driver();
    let stages = d.terminate_start(ctx(&rows())).unwrap();
    assert_eq!(keys(&stages), ["0:ansible.forget@ansible-server"]);
    let Action::Remote(r) = &stages[0].action else {
        panic!("{:?}", stages[0])
    };
    assert_eq!(r.step.host, ANSIBLE_HOST);
    assert_eq!(
        r.step.args,
        ["/home/ansible/kubespray/inventory/vnf-kubespray"]
    );
    assert!(!r.step.sudo);
}

#[test]
fn roles_and_access() {
    let d = driver();
    assert_eq!(d.role("masterNode").unwrap(), Role::Master);
    assert_eq!(d.role("workerNode").unwrap(), Role::Worker);
    assert_eq!(d.role("externalLB").unwrap(), Role::LoadBalancer);
    let a = d.access(Role::AnsibleServer).unwrap();
    assert_eq!(a.address, Some("10.10.0.50".parse::<IpAddr>().unwrap()));
    assert_eq!(a.username, "ansible");
    // The seed's `externalLB_instance` is the BaseHOT's floating IP of `externalLB_CP1`.
    assert_eq!(d.access(Role::LoadBalancer).unwrap().cp, "externalLB_CP1");
    assert_eq!(
        d.cp_of("externalLB_CP1", "external_lb_param").unwrap(),
        "externalLB_CP1"
    );
    // A resource that is neither a CP nor a floating IP of one is refused by name.
    for name in ["externalLB", "internalVL1", "no_such_resource"] {
        let e = d.cp_of(name, "external_lb_param").unwrap_err();
        assert!(e.reason.contains(name), "{e}");
    }
}

#[test]
fn kubeconfig_points_at_the_lb() {
    let admin = "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: QUJD\n    server: https://10.0.0.10:6443\n  name: cluster.local\n\nalready done: admin kubeconfig read for x\n";
    let lb: IpAddr = "10.0.0.5".parse().unwrap();
    let out = kubeconfig_for(admin, &endpoint(lb)).unwrap();
    assert!(out.contains("    server: https://10.0.0.5:8383\n"), "{out}");
    assert!(!out.contains("6443") && !out.contains("already done"));
    assert_eq!(
        crate::artifact::kubeconfig_server(&out).as_deref(),
        Some("https://10.0.0.5:8383")
    );
    assert!(kubeconfig_for("nothing\n", "https://x").is_err());
}

fn verdict(exit_status: Option<u32>, stdout: &str, stderr: &str) -> Result<(), ApplyFailed> {
    let events = crate::ansible::PlaybookRun::parse(stdout);
    playbook_verdict(&ApplyOutput {
        exit_status,
        signal: None,
        events: &events,
        stdout_tail: stdout,
        stderr_tail: stderr,
    })
}

#[test]
fn playbook_verdict_reads_the_json_lines_recap() {
    // Real `ansible-playbook` output (see `crate::ansible`'s testdata).
    let failing = include_str!("../../ansible/testdata/failing.jsonl");
    let clean = include_str!("../../ansible/testdata/clean.jsonl");
    let e = verdict(Some(4), failing, "").unwrap_err();
    assert!(
        e.reason.starts_with(
            "ansible-playbook failed: host worker10 unreachable at task \"Check hostname\""
        ),
        "{e}"
    );
    assert!(e.reason.contains("host worker1 failed task \"Join the cluster\": non-zero return code: kubeadm join refused"), "{e}");
    assert!(verdict(Some(0), clean, "").is_ok());
    // Exit status 0 is not enough, nor is a clean recap with a non-zero exit status.
    assert!(verdict(Some(0), "TASK [x] ***\nok: [master1]\n", "").is_err());
    assert!(verdict(Some(2), clean, "").is_err());
    let killed = playbook_verdict(&ApplyOutput {
        exit_status: None,
        signal: Some("KILL"),
        events: &crate::ansible::PlaybookRun::parse(clean),
        stdout_tail: "",
        stderr_tail: "",
    })
    .unwrap_err();
    assert!(
        killed
            .reason
            .starts_with("ansible-playbook failed, killed by SIGKILL"),
        "{killed}"
    );
}

#[test]
fn playbook_verdict_without_events_quotes_the_error() {
    let e = verdict(
        Some(1),
        "",
        "ERROR! the playbook: cluster.yml could not be found\n",
    )
    .unwrap_err();
    assert_eq!(
        e.reason,
        "ansible-playbook failed: no play recap (stats event) in the output \
         (ERROR! the playbook: cluster.yml could not be found)"
    );
    // What ansible-core 2.14 says when the callback's collection is not installed.
    let e = verdict(
        Some(1),
        "",
        "ERROR! Invalid callback for stdout specified: ansible.posix.jsonl\n",
    )
    .unwrap_err();
    assert!(
        e.reason.contains("no stdout callback ansible.posix.jsonl"),
        "{e}"
    );
    assert!(e.reason.contains("Debian's package `ansible`"), "{e}");
}

proptest::proptest! {
    /// For any set of worker indexes, removing one worker leaves exactly the others in the
    /// inventory and the LB: names sharing a prefix (`worker1`, `worker10`, `worker100`) never
    /// touch each other.
    #[test]
    fn removing_one_worker_keeps_exactly_the_others(
        idx in proptest::collection::btree_set(0i64..120, 2..12),
        pick in 0usize..12,
    ) {
        let d = driver();
        let mut r = vec![row("m0", "masterNode", "masterNode_CP1", Some(0), "10.0.0.10")];
        for (n, i) in idx.iter().enumerate() {
            r.push(row(&format!("w{i}"), "workerNode", "workerNode_CP2", Some(*i), &format!("10.0.1.{}", n + 1)));
        }
        r.push(row("lb", "externalLB", "externalLB_CP1", None, "10.0.0.5"));
        let victim = idx.iter().nth(pick % idx.len()).copied().unwrap();
        let stages = d.scale_start(ctx(&r), &[VnfcId::new(format!("w{victim}"))]).unwrap();
        let inv = stages.iter().find(|s| s.key.as_str().starts_with("ansible.inventory")).unwrap();
        let lb = stages.iter().find(|s| s.key.as_str().starts_with("lb.haproxy")).unwrap();
        let hosts: serde_yaml_ng::Value = serde_yaml_ng::from_str(upload(inv, "hosts.yaml")).unwrap();
        let got: BTreeSet<String> = hosts["all"]["hosts"].as_mapping().unwrap().keys()
            .map(|k| k.as_str().unwrap().to_owned()).collect();
        let mut want: BTreeSet<String> = idx.iter().filter(|i| **i != victim)
            .map(|i| format!("worker{}", i + 1)).collect();
        want.insert("master1".into());
        proptest::prop_assert_eq!(&got, &want);
        let lb_nodes: BTreeSet<String> = haproxy_servers(upload(lb, ".vnfkeeper-new"), "kube_nodes").into_iter().collect();
        proptest::prop_assert_eq!(&lb_nodes, &want);
        let drained: Vec<&str> = stages.iter().filter(|s| s.key.as_str().starts_with("k8s.drain@")).map(|s| s.key.as_str()).collect();
        let victim_key = format!("k8s.drain@worker{}", victim + 1);
        proptest::prop_assert_eq!(drained, vec![victim_key.as_str()]);
    }
}

#[test]
fn the_lb_probes_haproxy_on_itself_and_the_inventory_on_the_ansible_server() {
    let d = driver();
    let r = rows();
    let probes = d.probes(ctx(&r), &r[3], Role::LoadBalancer, false);
    let names: Vec<(bool, &str, &str)> = probes
        .iter()
        .map(|p| match p {
            Probe::Script(s) => (false, s.name(), s.host.as_str()),
            Probe::Outside(s) => (true, s.name(), s.host.as_str()),
            Probe::Kubectl(k) => (false, *k, ""),
        })
        .collect();
    assert_eq!(
        names,
        [
            (false, "lb.script", "lb"),
            (false, "lb.haproxy", "lb"),
            (true, "ansible.inventory", ANSIBLE_HOST)
        ]
    );
    // The probe compares the files with the digests of what the rows give now.
    let Probe::Outside(inv) = &probes[2] else {
        panic!()
    };
    assert_eq!(
        inv.args[1],
        sha256_hex(upload_of(inv, "hosts.yaml").as_bytes())
    );
    assert!(d.probes(ctx(&r), &r[1], Role::Worker, false).is_empty());
}

fn upload_of<'a>(s: &'a Step, suffix: &str) -> &'a str {
    let u = s.uploads.iter().find(|u| u.path.ends_with(suffix)).unwrap();
    std::str::from_utf8(&u.bytes).unwrap()
}

/// The CA the HTTPS registry entry names (any bytes: the flavour only uploads and hashes it).
const REGISTRY_CA: &[u8] =
    b"-----BEGIN CERTIFICATE-----\nvnfkeeper test CA\n-----END CERTIFICATE-----\n";

/// [`driver`] with the cir seed's two registry entries: HTTP `10.0.0.7:5000`, HTTPS
/// `registry.example.com` with its CA, credentials and a hosts line.
fn driver_trusting() -> Kubespray {
    let mut d = driver();
    d.k8s.private_registry_connection_info = serde_json::from_value(serde_json::json!([
        {"connection_type": "0", "server": "10.0.0.7:5000"},
        {"connection_type": "1", "server": "registry.example.com", "username": "user01",
         "password": "reg-Pw-1", "certificate_path": "Files/registries/ca.crt",
         "hosts_string": "10.0.0.7 registry.example.com"}
    ]))
    .unwrap();
    d.inputs
        .files
        .insert("Files/registries/ca.crt".into(), REGISTRY_CA.to_vec());
    d
}

/// What `trust.observe` reports of a node without `daemon.json`.
fn observed_absent(vnfcs: &[&str]) -> BTreeMap<StageKey, String> {
    vnfcs
        .iter()
        .map(|v| {
            (
                StageKey::new(format!("trust.observe@{v}")),
                "already done: /etc/docker/daemon.json absent".to_owned(),
            )
        })
        .collect()
}

#[test]
fn without_registries_no_trust_stage_is_planned() {
    let d = driver();
    let r = rows();
    let all: Vec<VnfcId> = r.iter().map(|v| v.id.clone()).collect();
    let mut stages = d.instantiate_end(ctx(&r)).unwrap();
    stages.extend(d.scale_end(ctx(&r), &["w9".into()]).unwrap());
    stages.extend(d.heal_end(ctx(&r), &["w0".into()]).unwrap());
    stages.extend(d.heal_end(ctx(&r), &all).unwrap());
    stages.extend(d.configure(ctx(&r), &observed_mtu("mtu 1500")).unwrap());
    assert!(
        stages.iter().all(|s| !s.key.as_str().starts_with("trust.")),
        "{:?}",
        keys(&stages)
    );
    assert!(d.registries().is_empty() && d.secrets().is_empty());
    assert!(
        d.probes(ctx(&r), &r[1], Role::Worker, false).is_empty(),
        "no probe of a worker without registries"
    );
}

#[test]
fn instantiate_trusts_every_node_before_the_mtu_with_one_configure_placeholder() {
    let d = driver_trusting();
    let r = rows();
    let stages = d.instantiate_end(ctx(&r)).unwrap();
    let mut want = vec![
        "0:node.reach@m0".to_owned(),
        "0:node.reach@w0".into(),
        "0:node.reach@w9".into(),
        "0:node.reach@lb".into(),
    ];
    for n in ["m0", "w0", "w9"] {
        for s in ["trust.files", "trust.hosts", "trust.auth"] {
            want.push(format!("1:{s}@{n}"));
        }
    }
    for n in ["m0", "w0", "w9"] {
        want.push(format!("2:trust.observe@{n}"));
    }
    want.push("3:node.nic_mtu@m0".into());
    want.push("4:configure".into());
    assert_eq!(keys(&stages), want, "the LB trusts nothing");
    assert_eq!(
        stages
            .iter()
            .filter(|s| s.action == Action::Expand(Hook::Configure))
            .count(),
        1
    );
    let Action::Remote(files) = &stages[4].action else {
        panic!()
    };
    assert_eq!(files.role, Role::Master);
    assert!(
        files.step.uploads.iter().any(|u| u.bytes == REGISTRY_CA),
        "the package's CA is uploaded"
    );
    // The whole-VNF heal plans the same; a healed master alone trusts itself only.
    let all: Vec<VnfcId> = r.iter().map(|v| v.id.clone()).collect();
    assert_eq!(keys(&d.heal_end(ctx(&r), &all).unwrap()), want);
    assert_eq!(
        keys(&d.heal_end(ctx(&r), &["m0".into()]).unwrap()),
        [
            "0:node.reach@m0",
            "1:trust.files@m0",
            "1:trust.hosts@m0",
            "1:trust.auth@m0",
            "2:trust.observe@m0",
            "3:node.nic_mtu@m0",
            "4:configure"
        ]
    );
}

#[test]
fn configure_merges_daemon_json_of_the_observed_nodes_then_runs_the_cluster() {
    let d = driver_trusting();
    let r = rows();
    let mut observed = observed_mtu("mtu 1500");
    observed.extend(observed_absent(&["m0", "w0", "w9"]));
    let stages = d.configure(ctx(&r), &observed).unwrap();
    let k = keys(&stages);
    assert_eq!(
        k[..4],
        [
            "0:trust.docker@m0",
            "0:trust.docker@w0",
            "0:trust.docker@w9",
            "1:ansible.group_vars@ansible-server"
        ],
        "{k:?}"
    );
    assert!(
        k.iter()
            .any(|s| s.ends_with("ansible.playbook@cluster.yml")),
        "{k:?}"
    );
    let Action::Remote(docker) = &stages[0].action else {
        panic!()
    };
    assert_eq!(docker.step.uploads.len(), 1);
    let json: serde_json::Value = serde_json::from_slice(&docker.step.uploads[0].bytes).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"insecure-registries": ["10.0.0.7:5000"]})
    );
    // Without registries the MTU stays required.
    let err = driver().configure(ctx(&r), &BTreeMap::new()).unwrap_err();
    assert!(err.to_string().contains("no MTU was observed"), "{err}");
}

#[test]
fn scale_out_and_a_worker_heal_trust_the_new_nodes_after_scale_yml() {
    let d = driver_trusting();
    let r = rows();
    let trust_tail = |n: &str, w: u32| {
        vec![
            format!("{w}:trust.files@{n}"),
            format!("{w}:trust.hosts@{n}"),
            format!("{w}:trust.auth@{n}"),
            format!("{}:trust.observe@{n}", w + 1),
            format!("{}:configure", w + 2),
        ]
    };
    let stages = d.scale_end(ctx(&r), &["w9".into()]).unwrap();
    let mut want: Vec<String> = [
        "0:node.reach@w9",
        "1:ansible.inventory@ansible-server",
        "2:ansible.playbook@facts.yml",
        "3:ansible.playbook@scale.yml",
        "4:lb.script@lb",
        "5:lb.haproxy@lb",
    ]
    .map(String::from)
    .to_vec();
    want.extend(trust_tail("w9", 6));
    assert_eq!(keys(&stages), want);
    let healed = d.heal_end(ctx(&r), &["w0".into()]).unwrap();
    assert_eq!(keys(&healed)[6..], trust_tail("w0", 6)[..]);
    // The expansion there: trust.docker of the observed node only, no MTU needed.
    let docker = d.configure(ctx(&r), &observed_absent(&["w9"])).unwrap();
    assert_eq!(keys(&docker), ["0:trust.docker@w9"]);
    // The LB's configuration-only heal trusts nothing.
    assert!(
        d.heal_end(ctx(&r), &["lb".into()])
            .unwrap()
            .iter()
            .all(|s| !s.key.as_str().starts_with("trust."))
    );
}

#[test]
fn trust_probes_auth_file_secrets_registries_and_package_files() {
    let d = driver_trusting();
    let r = rows();
    let probe_names = |vnfc: &VnfcRow, role| -> Vec<String> {
        d.probes(ctx(&r), vnfc, role, false)
            .into_iter()
            .filter_map(|p| match p {
                Probe::Script(s) => Some(s.name().to_owned()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        probe_names(&r[1], Role::Worker),
        ["trust.files", "trust.hosts", "trust.auth", "trust.docker"]
    );
    assert_eq!(
        probe_names(&r[0], Role::Master),
        ["trust.files", "trust.hosts", "trust.auth", "trust.docker"]
    );
    assert!(
        probe_names(&r[3], Role::LoadBalancer)
            .iter()
            .all(|n| !n.starts_with("trust."))
    );
    let auth = d
        .late_upload(
            &Late::RegistryAuth {
                path: "/root/.docker/config.json".into(),
            },
            &r,
            &Default::default(),
        )
        .unwrap();
    let auth: serde_json::Value = serde_json::from_slice(auth.expose()).unwrap();
    assert!(auth["auths"]["registry.example.com"]["auth"].is_string());
    let secrets: Vec<String> = d.secrets().iter().map(|s| s.expose().clone()).collect();
    assert!(secrets.iter().any(|s| s == "reg-Pw-1"), "{}", secrets.len());
    let regs = d.registries();
    assert_eq!(regs.len(), 2);
    assert_eq!(
        regs[1].ca_sha256.as_deref(),
        Some(crate::digest::sha256_hex(REGISTRY_CA).as_str())
    );
    assert!(package_files(&d.k8s).contains(&"Files/registries/ca.crt".to_owned()));
}

/// kubespray cannot rebuild one master (kubespray spec): a heal rebuilding the master alone is
/// refused, naming it; the whole VNF, a worker, and a SCALE are not.
#[test]
fn rebuilding_a_master_alone_is_refused() {
    let d = driver();
    let r = rows();
    let why = d.rebuild_refusal(&r, &["m0".into()]).expect("refused");
    assert!(why.contains("m0") && why.contains("whole VNF"), "{why}");
    assert!(d.rebuild_refusal(&r, &["m0".into(), "w0".into()]).is_some());
    let all: Vec<VnfcId> = r.iter().map(|v| v.id.clone()).collect();
    assert_eq!(d.rebuild_refusal(&r, &all), None);
    assert_eq!(d.rebuild_refusal(&r, &["w0".into()]), None);
    assert_eq!(d.scale_refusal("worker_instance"), None);
}
