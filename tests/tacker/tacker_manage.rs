//! Companion mode's management steps on the testbed (needs root): the Tacker stand-in
//! instantiates the seed's PV cluster package (its BaseHOT, with the `nfv` vnfkeeper would give
//! it) on the testbed's Heat, whose servers are real SSH hosts; vnfkeeper polls Tacker, adopts
//! the COMPLETED INSTANTIATE as one operation of origin `tacker` — the op occ's
//! `operationParams` examined by intake, the package from `[tacker.packages]` — and the engine
//! runs it without creating a stack: the cluster install, the storage server, NFS and the PVs
//! journaled DONE on the hosts. A re-poll, a duplicate notification and a second companion over
//! the same database (a restart) create no second operation. Tacker heals a worker: vnfkeeper
//! runs `heal_end` for that VNFC on its new server. Then Tacker terminates the VNF and
//! vnfkeeper retires it, keeping its history. The cluster is registered with Tacker as a
//! Kubernetes VIM after the INSTANTIATE's steps (once, also when run again) and removed at
//! Tacker's TERMINATE; its bearer token stays out of the state directory. A hostile `operationParams` is refused with
//! its reason recorded.

use crate::support;
use vnfkeeper_core::model::{
    InstantiationState, OpOccId, OperationState, StepState, Timestamp, VnfInstanceId,
};

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use support::bed::{Bed, fast_limits};
use support::tacker::Operator;
use support::wait_until;
use testbed::cloud::Testbed;
use vnfkeeper::cloud::OpenStackCloud;
use vnfkeeper::config::tacker::TackerSettings;
use vnfkeeper::engine::Engine;
use vnfkeeper::reconcile::probe::ProbeSettings;
use vnfkeeper::reconcile::{self, PassKind, Reconciler};
use vnfkeeper::remote::{SshConfig, SshRemote};
use vnfkeeper::tacker::vim::{self as tacker_vim, Registered, TackerLink};
use vnfkeeper::tacker::{Companion, PackagePaths};
use vnfkeeper_core::artifact::{Artifact, KubernetesVim};
use vnfkeeper_core::policy::Policy;
use vnfkeeper_core::tacker::Origin;
use vnfkeeper_core::tacker::vim::VimRegistration;
use vnfkeeper_core::wire::Secret;

const VNFD: &str = "pv-k8s-cluster-vnfd";

/// How long a Tacker operation of these tests may take in the stand-in.
const WITHIN: Duration = Duration::from_secs(300);

fn settings(pkg: PathBuf) -> TackerSettings {
    TackerSettings {
        listen: "127.0.0.1:1".parse().unwrap(),
        callback_path: "/vnfkeeper/notifications".into(),
        auth_type: vnfkeeper::config::tacker::TackerAuth::Basic,
        username: "tacker".into(),
        password_file: "/nonexistent".into(),
        token_path: "/vnfkeeper/token".into(),
        hook_path: "/vnfkeeper/mgmt-hooks".into(),
        token_lifetime: Duration::from_secs(3600),
        tls: None,
        max_body_bytes: 1 << 20,
        cloud: None,
        callback_uri: Some("http://127.0.0.1:1/vnfkeeper/notifications".into()),
        vnfd_ids: vec![VNFD.into()],
        auto_heal: false,
        register_vim: true,
        poll_interval: Duration::from_secs(60),
        packages: [(VNFD.to_string(), pkg)].into_iter().collect(),
    }
}

async fn companion(bed: &Bed, pkg: &std::path::Path) -> Companion {
    let cloud = OpenStackCloud::connect(bed.tb.clouds_yaml(), "testbed", Duration::from_secs(30))
        .await
        .unwrap();
    Companion::new(
        cloud,
        bed.db.clone(),
        settings(pkg.to_path_buf()),
        Secret::new("unused".to_string()),
        PackagePaths {
            packages_dir: support::repo_root(),
            package_store: bed.dir.path().join("package-store"),
        },
    )
}

/// One reconcile pass at `now`, recorded.
async fn pass(
    bed: &Bed,
    rec: &Reconciler<OpenStackCloud>,
    kind: PassKind,
    now: Timestamp,
) -> reconcile::PassReport {
    let snap = bed
        .db
        .with(|s| reconcile::snapshot(s.reader(), None))
        .unwrap();
    let mut report = rec.evaluate(&snap, kind, now).await;
    bed.db
        .write(|tx| reconcile::record(tx, &mut report, now))
        .unwrap();
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn tacker_instantiate_and_heal_get_the_management_steps_once_and_terminate_retires() {
    let bed = Bed::new("vkz", 93, fast_limits()).await;
    let (request, pkg_dir) = support::tacker::seed();
    support::tacker::register(&bed.tb, VNFD, &request, &pkg_dir, None);
    let op = Operator::login(&bed.tb).await;
    let inst = op.create(VNFD).await;
    let occ = op
        .run(&bed.tb, &inst, "instantiate", request.clone(), WITHIN)
        .await;

    // vnfkeeper polls Tacker and adopts the COMPLETED INSTANTIATE: one operation.
    let c = companion(&bed, &pkg_dir).await;
    c.poll().await.unwrap();
    let f = c.follow_up().await.unwrap();
    assert_eq!(f.adopted.len(), 1, "{f:?}");
    assert_eq!(f.refused, 0, "{f:?}");
    let op_id = f.adopted[0].clone();

    // A re-poll, a duplicate notification's wake-up, a restart (a second companion over the
    // same database): nothing new.
    for _ in 0..2 {
        c.poll().await.unwrap();
        assert_eq!(c.follow_up().await.unwrap().adopted.len(), 0);
    }
    let again = companion(&bed, &pkg_dir).await;
    again.poll().await.unwrap();
    assert_eq!(again.follow_up().await.unwrap().adopted.len(), 0);
    let ops = bed.db.with(|s| s.reader().operations(Some(&inst))).unwrap();
    assert_eq!(ops.len(), 1, "{ops:?}");
    assert_eq!(ops[0].origin, Origin::Tacker);
    assert_eq!(ops[0].tacker_op_occ_id.as_deref(), Some(occ.as_str()));
    let rows = bed.db.with(|s| s.reader().instances()).unwrap();
    assert_eq!(rows[0].origin, Origin::Tacker);

    // The engine runs the management steps on Tacker's stack: no stack created. It reaches
    // Tacker through companion mode's connection (the cluster's VIM registration).
    let engine = Engine::new(
        bed.db.clone(),
        bed.cloud.clone(),
        std::sync::Arc::new(SshRemote::new(SshConfig::default())),
        fast_limits(),
    )
    .with_tacker(TackerLink::connected((*bed.cloud).clone()));
    let servers_before = bed.tb.cloud().record_counts().0;
    let state = engine.run(&OpOccId::from(&op_id)).await.unwrap();
    bed.print_journal(&OpOccId::from(&op_id));
    assert_eq!(
        state,
        OperationState::Completed,
        "{:?}",
        bed.error_of(&OpOccId::from(&op_id))
    );
    assert_eq!(bed.tb.cloud().record_counts().0, servers_before);
    let journal = bed.journal(&OpOccId::from(&op_id));
    assert!(
        journal
            .iter()
            .all(|j| j.name != "heat.create" && j.name != "heat.wait_create"),
        "a Tacker INSTANTIATE never creates the stack"
    );
    let done_on_hosts = |name: &str| {
        journal
            .iter()
            .filter(|j| j.name == name && !j.host.is_empty() && j.state == StepState::Done)
            .count()
    };
    assert_eq!(done_on_hosts("k8s.install"), 3, "master and both workers");
    for step in [
        "storage.filesystem",
        "nfs.server",
        "pv.register",
        "pv.available",
    ] {
        assert!(done_on_hosts(step) >= 1, "{step} not DONE on a host");
    }
    let vnfcs = bed
        .db
        .with(|s| s.reader().vnfcs(&VnfInstanceId::from(&inst)))
        .unwrap();
    assert_eq!(vnfcs.len(), 4, "{vnfcs:?}");
    let master = vnfcs.iter().find(|c| c.vdu_id == "masterNode").unwrap();
    let out = bed
        .farm
        .exec(
            master.server_id.as_deref().unwrap(),
            "kubectl get pv -o json",
        )
        .await
        .unwrap();
    let pvs: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(pvs["items"].as_array().unwrap().len(), 3, "{pvs}");
    let row = bed.db.with(|s| s.reader().instances()).unwrap();
    assert_eq!(row[0].instantiation_state, InstantiationState::Instantiated);

    // The cluster is registered with Tacker as a Kubernetes VIM, as Tacker's sample
    // MgmtDriver does: once, by its `vim_name`, at the kept kubeconfig's endpoint; Tacker's
    // VIM driver asked the cluster's API server with the bearer token (the namespaces it
    // answered are the VIM's regions). The stage's check-then-apply run again (a resume)
    // finds it and creates no second; a token the cluster refuses is Tacker's 500
    // VimUnauthorizedException, refused without the token in the reason.
    let state_dir = bed.db.with(|s| s.state_dir()).unwrap();
    let kept = |a: Artifact| std::fs::read_to_string(a.path(&state_dir, &inst)).unwrap();
    let (kubeconfig, vim_env) = (
        kept(Artifact::AdminKubeconfig),
        kept(Artifact::KubernetesVim),
    );
    let endpoint = vnfkeeper_core::artifact::kubeconfig_server(&kubeconfig).unwrap();
    let token = KubernetesVim::parse(&vim_env).unwrap().bearer_token;
    let vims = bed.tb.cloud().tacker_vims();
    assert_eq!(vims.len(), 1, "{vims:?}");
    assert_eq!(vims[0]["name"], "kubernetes_vim");
    assert_eq!(vims[0]["type"], "kubernetes");
    assert_eq!(vims[0]["auth_url"], endpoint.as_str());
    assert_eq!(vims[0]["auth_cred"]["bearer_token"], "***");
    assert!(
        vims[0]["placement_attr"]["regions"]
            .as_array()
            .unwrap()
            .contains(&json!("kube-system")),
        "{vims:?}"
    );
    let (reg, tok) = VimRegistration::from_kept(Some(&kubeconfig), Some(&vim_env)).unwrap();
    assert!(
        reg.ssl_ca_cert.is_some(),
        "the endpoint is the cluster's own address"
    );
    let again_reg = tacker_vim::register(&bed.cloud, &reg, &tok).await.unwrap();
    assert!(
        matches!(again_reg, Registered::Done { created: false, .. }),
        "{again_reg:?}"
    );
    assert_eq!(bed.tb.cloud().tacker_vims().len(), 1);
    let other = VimRegistration {
        name: "kubernetes_vim_refused".into(),
        ..reg.clone()
    };
    let wrong = Secret::new(format!("{}x", &token[..token.len() - 1]));
    match tacker_vim::register(&bed.cloud, &other, &wrong)
        .await
        .unwrap()
    {
        Registered::Refused(why) => {
            assert!(why.contains("VimUnauthorizedException"), "{why}");
            assert!(!why.contains(wrong.expose().as_str()), "{why}");
        }
        done => panic!("a refused token registered: {done:?}"),
    }
    assert_eq!(bed.tb.cloud().tacker_vims().len(), 1);
    let journal = bed.journal(&OpOccId::from(&op_id));
    assert!(
        journal
            .iter()
            .any(|j| j.name == "tacker.register_vim" && j.state == StepState::Done),
        "{journal:?}"
    );

    // Tacker heals one worker (its server replaced by Tacker's stack update): vnfkeeper adopts
    // the COMPLETED HEAL once and runs heal_end for that VNFC only, on the new server.
    let shown = op.get(&format!("/vnf_instances/{inst}")).await;
    let tacker_vnfc = shown["instantiatedVnfInfo"]["vnfcInfo"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vduId"] == "workerNode")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let old_server = tacker_vnfc.strip_prefix("workerNode-").unwrap().to_string();
    let target = vnfcs
        .iter()
        .find(|c| c.server_id.as_deref() == Some(old_server.as_str()))
        .unwrap()
        .id
        .clone();
    let heal_occ = op
        .run(
            &bed.tb,
            &inst,
            "heal",
            json!({"vnfcInstanceId": [tacker_vnfc]}),
            WITHIN,
        )
        .await;
    c.poll().await.unwrap();
    let f = c.follow_up().await.unwrap();
    assert_eq!((f.adopted.len(), f.refused), (1, 0), "{f:?}");
    c.poll().await.unwrap();
    assert!(c.follow_up().await.unwrap().adopted.is_empty());
    let heal_op = f.adopted[0].clone();
    let ops = bed.db.with(|s| s.reader().operations(Some(&inst))).unwrap();
    assert_eq!(ops.len(), 2);
    assert_eq!(ops[1].tacker_op_occ_id.as_deref(), Some(heal_occ.as_str()));
    let state = bed.engine.run(&OpOccId::from(&heal_op)).await.unwrap();
    bed.print_journal(&OpOccId::from(&heal_op));
    assert_eq!(
        state,
        OperationState::Completed,
        "{:?}",
        bed.error_of(&OpOccId::from(&heal_op))
    );
    let heal_journal = bed.journal(&OpOccId::from(&heal_op));
    assert!(
        heal_journal
            .iter()
            .all(|j| !j.name.starts_with("heat.") || j.name == "heat.read_vnfcs"),
        "a Tacker HEAL makes no Heat call of vnfkeeper's but the read"
    );
    assert!(
        heal_journal
            .iter()
            .any(|j| j.name == "k8s.install" && j.host == target && j.state == StepState::Done),
        "heal_end re-joined the healed worker"
    );
    assert!(
        heal_journal
            .iter()
            .filter(|j| j.name == "k8s.install")
            .all(|j| j.host == target),
        "only the healed VNFC is configured"
    );
    let healed = bed
        .db
        .with(|s| s.reader().vnfcs(&VnfInstanceId::from(&inst)))
        .unwrap();
    let row = healed.iter().find(|c| c.id == target).unwrap();
    assert_ne!(row.server_id.as_deref(), Some(old_server.as_str()));

    // Reconcile decides, Tacker heals (`tacker.auto_heal`): a worker's server goes into ERROR;
    // a pass records one vnfkeeper HEAL waiting for Tacker (the engine does not run it), the
    // companion sends exactly one `POST …/heal`, a second pass while it runs starts nothing,
    // and Tacker's COMPLETED releases that same operation: heal_end on that worker only.
    let vnfcs = bed
        .db
        .with(|s| s.reader().vnfcs(&VnfInstanceId::from(&inst)))
        .unwrap();
    let sick = vnfcs
        .iter()
        .find(|c| c.vdu_id == "workerNode")
        .unwrap()
        .clone();
    let sick_server = sick.server_id.clone().unwrap();
    bed.tb
        .cloud()
        .inject_server_error(&sick_server, "hypervisor lost")
        .await
        .unwrap();
    let policy = Policy::default();
    let mut rec = Reconciler::new(
        bed.cloud.clone(),
        std::sync::Arc::new(SshRemote::new(SshConfig::default())),
        policy.clone(),
        ProbeSettings {
            timeout: Duration::from_secs(30),
            max_parallel_hosts: 16,
        },
    );
    let at = |secs: i64| Timestamp(chrono::Utc::now() + chrono::Duration::seconds(secs));
    let t0 = policy.startup_grace.as_secs() as i64 + 1;
    // auto_heal off (the default): nothing started, the reason recorded.
    let r = pass(&bed, &rec, PassKind::Cloud, at(t0)).await;
    assert!(r.started.is_empty(), "{:#?}", r.outcomes);
    rec.tacker_auto_heal = true;
    let heals_in_tacker = |tb: &Testbed| {
        tb.cloud()
            .tacker_op_occs()
            .iter()
            .filter(|(_, op, _)| op == "HEAL")
            .count()
    };
    let tacker_heals_before = heals_in_tacker(&bed.tb);
    let r = pass(&bed, &rec, PassKind::Cloud, at(t0 + 1)).await;
    assert_eq!(r.started.len(), 1, "{:#?}", r.outcomes);
    let auto_op = r.started[0].1.clone();
    let busy = std::collections::HashSet::new();
    assert!(
        bed.db
            .with(|s| s.reader().runnable_heads(10, &busy))
            .unwrap()
            .is_empty(),
        "a heal waiting for Tacker is not run by the engine"
    );
    let f = c.follow_up().await.unwrap();
    assert_eq!((f.heals_sent, f.heals_failed), (1, 0), "{f:?}");
    assert_eq!(heals_in_tacker(&bed.tb), tacker_heals_before + 1);
    // The server in ERROR was stopped before Tacker was asked: Heat detaches no port of a
    // server in ERROR, and its replacement needs the worker's port.
    let status = vnfkeeper::cloud::Cloud::server(bed.cloud.as_ref(), &sick_server)
        .await
        .unwrap()
        .map(|s| s.status);
    assert!(
        matches!(status.as_deref(), None | Some("SHUTOFF")),
        "the server in ERROR was not stopped before the heal was sent: {status:?}"
    );
    let ops = bed.db.with(|s| s.reader().operations(Some(&inst))).unwrap();
    let auto = ops.iter().find(|o| o.id == auto_op).unwrap();
    assert_eq!(auto.origin, Origin::Tacker);
    assert!(auto.is_automatic_invocation);
    let auto_occ = auto
        .tacker_op_occ_id
        .clone()
        .expect("Tacker's op occ id stored");
    // A second pass and a second follow-up while Tacker's heal runs: nothing new.
    let r = pass(&bed, &rec, PassKind::Cloud, at(t0 + 2)).await;
    assert!(r.started.is_empty(), "{:#?}", r.outcomes);
    assert_eq!(c.follow_up().await.unwrap().heals_sent, 0);
    assert_eq!(heals_in_tacker(&bed.tb), tacker_heals_before + 1);
    assert!(
        wait_until(Duration::from_secs(300), || {
            bed.tb
                .cloud()
                .tacker_op_occs()
                .iter()
                .any(|(id, _, s)| *id == auto_occ && s == "COMPLETED")
        }),
        "Tacker's heal did not complete: {:?}",
        bed.tb.cloud().tacker_op_occs()
    );
    c.poll().await.unwrap();
    let f = c.follow_up().await.unwrap();
    assert_eq!((f.heals_released, f.adopted.len()), (1, 0), "{f:?}");
    let ops = bed.db.with(|s| s.reader().operations(Some(&inst))).unwrap();
    assert_eq!(
        ops.len(),
        3,
        "the existing operation runs the post-steps: {ops:?}"
    );
    let state = bed.engine.run(&auto_op).await.unwrap();
    bed.print_journal(&auto_op);
    assert_eq!(
        state,
        OperationState::Completed,
        "{:?}",
        bed.error_of(&auto_op)
    );
    let auto_journal = bed.journal(&auto_op);
    assert!(
        auto_journal
            .iter()
            .all(|j| !j.name.starts_with("heat.") || j.name == "heat.read_vnfcs"),
        "healing through Tacker makes no Heat call of vnfkeeper's but the read"
    );
    assert!(
        auto_journal
            .iter()
            .any(|j| j.name == "k8s.install" && j.host == sick.id && j.state == StepState::Done),
        "heal_end re-joined the worker"
    );
    // Every node's /etc/hosts names the healed node again (k8s.hosts), and the master makes
    // the join material the healed worker joins with; nothing else runs on the other VNFCs.
    assert!(
        auto_journal
            .iter()
            .filter(|j| !j.host.is_empty() && j.name != "k8s.hosts")
            .all(|j| j.host == sick.id || j.name == "k8s.join_material"),
        "only the healed VNFC is configured"
    );
    let row = bed
        .db
        .with(|s| s.reader().vnfcs(&VnfInstanceId::from(&inst)))
        .unwrap();
    let row = row.iter().find(|c| c.id == sick.id).unwrap();
    assert_ne!(row.server_id.as_deref(), Some(sick_server.as_str()));
    // Healthy: a later pass (probes too) starts nothing.
    let r = pass(&bed, &rec, PassKind::Full, at(t0 + 600)).await;
    assert!(r.started.is_empty(), "{:#?}", r.outcomes);
    assert_eq!(heals_in_tacker(&bed.tb), tacker_heals_before + 1);

    // Tacker scales out by one worker: vnfkeeper adopts the COMPLETED SCALE once and runs the
    // flavour's scale_end for the new worker only (it joins the cluster), no Heat write.
    let before: Vec<String> = bed
        .db
        .with(|s| s.reader().vnfcs(&VnfInstanceId::from(&inst)))
        .unwrap()
        .into_iter()
        .map(|v| v.id.into_string())
        .collect();
    let out_occ = op
        .run(
            &bed.tb,
            &inst,
            "scale",
            json!({"type": "SCALE_OUT", "aspectId": "worker_instance", "numberOfSteps": 1}),
            WITHIN,
        )
        .await;
    c.poll().await.unwrap();
    let f = c.follow_up().await.unwrap();
    assert_eq!((f.adopted.len(), f.refused), (1, 0), "{f:?}");
    let out_op = f.adopted[0].clone();
    for _ in 0..2 {
        c.poll().await.unwrap();
        assert!(c.follow_up().await.unwrap().adopted.is_empty(), "once");
    }
    let ops = bed.db.with(|s| s.reader().operations(Some(&inst))).unwrap();
    assert_eq!(ops.len(), 4, "{ops:?}");
    let o = ops.iter().find(|o| o.id == out_op).unwrap();
    assert_eq!(o.origin, Origin::Tacker);
    assert_eq!(o.tacker_op_occ_id.as_deref(), Some(out_occ.as_str()));
    let state = bed.engine.run(&OpOccId::from(&out_op)).await.unwrap();
    bed.print_journal(&OpOccId::from(&out_op));
    assert_eq!(
        state,
        OperationState::Completed,
        "{:?}",
        bed.error_of(&OpOccId::from(&out_op))
    );
    let out_journal = bed.journal(&OpOccId::from(&out_op));
    assert!(
        out_journal
            .iter()
            .all(|j| !j.name.starts_with("heat.") || j.name == "heat.read_vnfcs"),
        "a Tacker SCALE makes no Heat call of vnfkeeper's but the read"
    );
    let after_out = bed
        .db
        .with(|s| s.reader().vnfcs(&VnfInstanceId::from(&inst)))
        .unwrap();
    let new: Vec<_> = after_out
        .iter()
        .filter(|v| !before.iter().any(|b| v.id == *b))
        .collect();
    assert_eq!(new.len(), 1, "{after_out:?}");
    assert_eq!(new[0].vdu_id, "workerNode");
    let joined = out_journal
        .iter()
        .filter(|j| j.name == "k8s.install" && j.state == StepState::Done)
        .map(|j| j.host.clone())
        .collect::<Vec<_>>();
    assert_eq!(
        joined,
        [new[0].id.clone()],
        "scale_end on the new worker only"
    );
    let master_server = after_out
        .iter()
        .find(|v| v.vdu_id == "masterNode")
        .unwrap()
        .server_id
        .clone()
        .unwrap();
    let node_ips = |out: Vec<u8>| -> Vec<String> {
        let v: Value = serde_json::from_slice(&out).unwrap();
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|n| {
                n["status"]["addresses"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter(|a| a["type"] == "InternalIP")
            .map(|a| a["address"].as_str().unwrap().to_string())
            .collect()
    };
    let nodes = node_ips(
        bed.farm
            .exec(&master_server, "kubectl get nodes -o json")
            .await
            .unwrap()
            .stdout,
    );
    let new_ip = new[0].ip_address.clone().unwrap();
    assert!(nodes.contains(&new_ip), "{new_ip} not a node: {nodes:?}");
    assert_eq!(nodes.len(), 4, "{nodes:?}");

    // Tacker scales in by one worker: vnfkeeper forgets the gone VNFC and deletes its node
    // on the master (no drain: the server is already gone).
    op.run(
        &bed.tb,
        &inst,
        "scale",
        json!({"type": "SCALE_IN", "aspectId": "worker_instance", "numberOfSteps": 1}),
        WITHIN,
    )
    .await;
    c.poll().await.unwrap();
    let f = c.follow_up().await.unwrap();
    assert_eq!((f.adopted.len(), f.refused), (1, 0), "{f:?}");
    let in_op = f.adopted[0].clone();
    c.poll().await.unwrap();
    assert!(c.follow_up().await.unwrap().adopted.is_empty(), "once");
    let state = bed.engine.run(&OpOccId::from(&in_op)).await.unwrap();
    bed.print_journal(&OpOccId::from(&in_op));
    assert_eq!(
        state,
        OperationState::Completed,
        "{:?}",
        bed.error_of(&OpOccId::from(&in_op))
    );
    let after_in = bed
        .db
        .with(|s| s.reader().vnfcs(&VnfInstanceId::from(&inst)))
        .unwrap();
    let gone: Vec<_> = after_out
        .iter()
        .filter(|v| !after_in.iter().any(|w| w.id == v.id))
        .collect();
    assert_eq!(gone.len(), 1, "{after_in:?}");
    assert_eq!(gone[0].vdu_id, "workerNode");
    assert_eq!(after_in.len(), 4);
    let in_journal = bed.journal(&OpOccId::from(&in_op));
    let removed: Vec<_> = in_journal
        .iter()
        .filter(|j| j.name == "k8s.remove_node" && j.state == StepState::Done)
        .collect();
    assert_eq!(removed.len(), 1, "{in_journal:?}");
    let nodes = node_ips(
        bed.farm
            .exec(&master_server, "kubectl get nodes -o json")
            .await
            .unwrap()
            .stdout,
    );
    let gone_ip = gone[0].ip_address.clone().unwrap();
    assert!(
        !nodes.contains(&gone_ip),
        "{gone_ip} still a node: {nodes:?}"
    );
    assert_eq!(nodes.len(), 3, "{nodes:?}");

    // Tacker terminates the VNF: vnfkeeper retires it and keeps its history; never touches
    // the stack itself (Tacker deleted it).
    let term = op
        .run(
            &bed.tb,
            &inst,
            "terminate",
            json!({"terminationType": "FORCEFUL"}),
            WITHIN,
        )
        .await;
    c.poll().await.unwrap();
    let f = c.follow_up().await.unwrap();
    assert_eq!(f.retired, 1, "{f:?}");
    let row = bed.db.with(|s| s.reader().instances()).unwrap();
    assert_eq!(
        row[0].instantiation_state,
        InstantiationState::NotInstantiated
    );
    assert!(
        bed.db
            .with(|s| s.reader().vnfcs(&VnfInstanceId::from(&inst)))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        bed.db
            .with(|s| s.reader().operations(Some(&inst)))
            .unwrap()
            .len(),
        5
    );
    let (handled, problem) = bed
        .db
        .with(|s| s.reader().tacker_followup_outcome(&term))
        .unwrap()
        .unwrap();
    assert!(handled.is_some() && problem.is_none());
    // Its Kubernetes VIM is gone from Tacker, the kept artifacts with it, the removal is in
    // its timeline, and the bearer token is nowhere in vnfkeeper's files (database and WAL:
    // plans, journal, events; the spool; the kept artifacts' directories). The testbed's
    // cluster store in the same temporary directory holds it, as a cluster does.
    assert_eq!(bed.tb.cloud().tacker_vims(), Vec::<Value>::new());
    assert!(!Artifact::KubernetesVim.path(&state_dir, &inst).exists());
    let timeline = bed
        .db
        .with(|s| s.reader().timeline(&VnfInstanceId::from(&inst), None))
        .unwrap()
        .unwrap();
    for kind in ["TACKER_VIM_REGISTERED", "TACKER_VIM_REMOVED"] {
        assert_eq!(
            timeline.iter().filter(|e| e.kind == kind).count(),
            1,
            "{kind}: {timeline:?}"
        );
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&state_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("state.db") || ["spool", "vim", "kubeconfig", "join"].contains(&&*name)
        })
        .collect();
    assert!(files.iter().any(|p| p.ends_with("state.db")), "{files:?}");
    while let Some(p) = files.pop() {
        if p.is_symlink() {
            continue;
        } else if p.is_dir() {
            files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else if let Ok(bytes) = std::fs::read(&p) {
            assert!(
                !bytes.windows(token.len()).any(|w| w == token.as_bytes()),
                "the bearer token is in {}",
                p.display()
            );
        }
    }

    // A hostile operationParams (a flavourId the validator refuses, an unknown key): refused
    // with the reason recorded, no operation, no panic.
    let bad = op.create(VNFD).await;
    let mut hostile = request.clone();
    hostile["additionalParams"]["k8s_cluster_installation_param"] = json!(12);
    let bad_occ = op.run(&bed.tb, &bad, "instantiate", hostile, WITHIN).await;
    c.poll().await.unwrap();
    let f = c.follow_up().await.unwrap();
    assert_eq!((f.adopted.len(), f.refused), (0, 1), "{f:?}");
    let (_, problem) = bed
        .db
        .with(|s| s.reader().tacker_followup_outcome(&bad_occ))
        .unwrap()
        .unwrap();
    let problem = problem.expect("a recorded reason");
    assert_eq!(problem.status, 400, "{problem:?}");
    assert!(
        problem.detail.contains("k8s_cluster_installation_param"),
        "{problem:?}"
    );
    assert!(
        bed.db
            .with(|s| s.reader().operations(Some(&bad)))
            .unwrap()
            .is_empty()
    );
    op.run(
        &bed.tb,
        &bad,
        "terminate",
        json!({"terminationType": "FORCEFUL"}),
        WITHIN,
    )
    .await;
}

/// With `tacker.register_vim = false` vnfkeeper registers no Kubernetes VIM, so at Tacker's
/// TERMINATE it removes none: a VIM of the same name and endpoint that the operator registered
/// in Tacker stays, and no `TACKER_VIM_REMOVED` is recorded; the kept artifacts still go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn without_register_vim_the_operators_vim_survives_the_terminate() {
    let bed = Bed::new("vkv", 94, fast_limits()).await;
    let (request, pkg_dir) = support::tacker::seed();
    support::tacker::register(&bed.tb, VNFD, &request, &pkg_dir, None);
    let op = Operator::login(&bed.tb).await;
    let inst = op.create(VNFD).await;
    op.run(&bed.tb, &inst, "instantiate", request.clone(), WITHIN)
        .await;
    let c = companion(&bed, &pkg_dir).await;
    c.poll().await.unwrap();
    let f = c.follow_up().await.unwrap();
    assert_eq!(f.adopted.len(), 1, "{f:?}");
    let link = TackerLink::connected((*bed.cloud).clone());
    link.skip_vim();
    let engine = Engine::new(
        bed.db.clone(),
        bed.cloud.clone(),
        std::sync::Arc::new(SshRemote::new(SshConfig::default())),
        fast_limits(),
    )
    .with_tacker(link);
    let op_id = OpOccId::from(&f.adopted[0]);
    let state = engine.run(&op_id).await.unwrap();
    assert_eq!(
        state,
        OperationState::Completed,
        "{:?}",
        bed.error_of(&op_id)
    );
    assert!(
        bed.tb.cloud().tacker_vims().is_empty(),
        "vnfkeeper registered none"
    );

    // The operator registers the cluster as a VIM themselves, under the name and at the
    // endpoint vnfkeeper would have used.
    let state_dir = bed.db.with(|s| s.state_dir()).unwrap();
    let kept = |a: Artifact| std::fs::read_to_string(a.path(&state_dir, &inst)).unwrap();
    let (reg, token) = VimRegistration::from_kept(
        Some(&kept(Artifact::AdminKubeconfig)),
        Some(&kept(Artifact::KubernetesVim)),
    )
    .unwrap();
    let registered = tacker_vim::register(&bed.cloud, &reg, &token)
        .await
        .unwrap();
    assert!(
        matches!(registered, Registered::Done { created: true, .. }),
        "{registered:?}"
    );

    op.run(
        &bed.tb,
        &inst,
        "terminate",
        json!({"terminationType": "FORCEFUL"}),
        WITHIN,
    )
    .await;
    c.poll().await.unwrap();
    let f = c.follow_up().await.unwrap();
    assert_eq!(f.retired, 1, "{f:?}");
    let vims = bed.tb.cloud().tacker_vims();
    assert_eq!(vims.len(), 1, "the operator's VIM stays: {vims:?}");
    assert_eq!(vims[0]["name"], reg.name.as_str());
    let timeline = bed
        .db
        .with(|s| s.reader().timeline(&VnfInstanceId::from(&inst), None))
        .unwrap()
        .unwrap();
    assert!(
        !timeline.iter().any(|e| e.kind == "TACKER_VIM_REMOVED"),
        "{timeline:?}"
    );
    assert!(!Artifact::KubernetesVim.path(&state_dir, &inst).exists());
}
