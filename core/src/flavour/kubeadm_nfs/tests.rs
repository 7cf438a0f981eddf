use std::path::Path;

use super::*;
use crate::model::AttachedVolume;
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
        })
        .unwrap();
    let w = waves(&stages);
    let wave_of = |name: &str, host: &str| {
        w.iter()
            .find(|(_, n, h)| n == name && h == host)
            .unwrap_or_else(|| panic!("no {name} on {host}: {w:?}"))
            .0
    };
    assert_eq!(wave_of("k8s.install", "m0"), 0);
    assert_eq!(wave_of("nfs.server", "ss"), 0, "{w:?}");
    assert_eq!(wave_of("k8s.install", "w0"), 1);
    let mount = wave_of("storage.mount", "ss");
    assert!(wave_of("storage.filesystem", "ss") < mount, "{w:?}");
    let exports = wave_of("nfs.exports", "ss");
    assert!(mount < exports, "{w:?}");
    // The NFS clients install while their hosts are idle: the workers during the master's
    // install, the master during the joins.
    assert_eq!(wave_of("nfs.client", "w1"), 0, "{w:?}");
    assert_eq!(wave_of("nfs.client", "m0"), 1, "{w:?}");
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
