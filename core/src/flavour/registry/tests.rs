//! The registry flavour over the seed's registry request and the fixture package.

use std::collections::BTreeMap;
use std::path::Path;

use super::*;
use crate::flavour::{self, HookContext, Inputs};
use crate::model::{AttachedVolume, Timestamp};
use crate::package::VnfPackage;
use crate::plan::stages::Action;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn driver() -> Box<dyn MgmtDriver> {
    let bytes = std::fs::read(
        repo().join("fixtures/requests/good/cir-k8s-cluster.10-registry-instantiate.json"),
    )
    .unwrap();
    let envelope: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let req: crate::wire::sol003::InstantiateVnfRequest =
        serde_json::from_value(envelope["request"].clone()).unwrap();
    let pkg = repo().join("fixtures/packages/cir-private-registry");
    let vnfd = VnfPackage::load(&pkg).unwrap().vnfd;
    let files: BTreeMap<String, Vec<u8>> = flavour::package_files(&req)
        .into_iter()
        .map(|p| {
            let b = std::fs::read(pkg.join(&p)).unwrap();
            (p, b)
        })
        .collect();
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        ["Files/images/private_registry.tar"]
    );
    flavour::select(Inputs {
        vnf_instance_id: "vnf-cir-registry".into(),
        req,
        vnfd,
        files,
        base_hot: None,
        floating_ip_ports: Default::default(),
    })
}

fn row(id: &str, volumes: Vec<AttachedVolume>) -> VnfcRow {
    VnfcRow {
        id: id.into(),
        vnf_instance_id: "vnf-cir-registry".into(),
        vdu_id: "PrivateRegistryVDU".into(),
        vnfc_index: None,
        stack_name: "s".into(),
        stack_id: "s-id".into(),
        resource_name: "PrivateRegistryVDU".into(),
        server_id: Some("srv".into()),
        server_status: Some("ACTIVE".into()),
        ip_address: Some("10.0.0.5".into()),
        cp_addresses: [("CP1".to_owned(), "10.0.0.5".to_owned())].into(),
        volumes,
        host_key: None,
        created_at: Timestamp(chrono::DateTime::UNIX_EPOCH),
        parameters: None,
    }
}

fn ctx(v: &[VnfcRow]) -> HookContext<'_> {
    HookContext {
        vnfcs: v,
        pv_wait: std::time::Duration::from_secs(30),
        op_occ_id: "op-1",
    }
}

fn keys(stages: &[Stage]) -> Vec<String> {
    stages.iter().map(|s| s.key.to_string()).collect()
}

fn volume() -> AttachedVolume {
    AttachedVolume {
        resource: Some("RegistryData".into()),
        volume_id: "vol-1".into(),
        device: Some("/dev/vdb".into()),
    }
}

#[test]
fn the_registry_vdu_is_reached_with_the_installation_params() {
    let d = driver();
    assert_eq!(d.role("PrivateRegistryVDU").unwrap(), Role::Registry);
    assert_eq!(d.role("SomethingElse").unwrap(), Role::Other);
    let a = d.access(Role::Registry).unwrap();
    assert_eq!((a.cp.as_str(), a.username.as_str()), ("CP1", "ubuntu"));
    assert!(d.access(Role::Other).is_err());
}

#[test]
fn instantiate_prepares_the_volume_then_runs_and_waits_for_the_registry() {
    let d = driver();
    let rows = [row("r0", vec![volume()])];
    let stages = d.instantiate_end(ctx(&rows)).unwrap();
    assert_eq!(
        keys(&stages),
        [
            "storage.filesystem@vol-1",
            "storage.mount@vol-1",
            "registry.runtime@r0",
            "registry.image@r0",
            "registry.run@r0",
            "registry.ready@r0",
        ]
    );
    let waves: Vec<u32> = stages.iter().map(|s| s.wave).collect();
    assert_eq!(waves, [0, 1, 2, 3, 4, 5]);
    let step = |key: &str| match &stages.iter().find(|s| s.key == key).unwrap().action {
        Action::Remote(r) => r.step.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(step("storage.mount@vol-1").args[2], DATA_DIR);
    let image = step("registry.image@r0");
    assert_eq!(image.args, [IMAGE, IMAGE_UPLOAD]);
    assert_eq!(image.uploads[0].path, IMAGE_UPLOAD);
    assert_eq!(
        image.uploads[0].bytes,
        std::fs::read(
            repo().join("fixtures/packages/cir-private-registry/Files/images/private_registry.tar")
        )
        .unwrap()
    );
    assert_eq!(
        step("registry.run@r0").args,
        [CONTAINER, IMAGE, "5000", DATA_DIR]
    );
    assert_eq!(step("registry.ready@r0").args, ["5000", "60"]);
    crate::plan::stages::check(&stages).unwrap();
}

#[test]
fn without_a_volume_the_registry_still_runs_and_heal_repeats_only_for_targets() {
    let d = driver();
    let rows = [row("r0", Vec::new())];
    let stages = d.instantiate_end(ctx(&rows)).unwrap();
    assert_eq!(stages.len(), 4, "{:?}", keys(&stages));
    assert!(
        d.heal_end(ctx(&rows), &["other".into()])
            .unwrap()
            .is_empty()
    );
    let rows = [row("r1", vec![volume()])];
    assert_eq!(d.heal_end(ctx(&rows), &["r1".into()]).unwrap().len(), 6);
    assert!(d.heal_start(ctx(&rows), &["r1".into()]).unwrap().is_empty());
    assert!(d.terminate_start(ctx(&rows)).unwrap().is_empty());
    assert!(d.instantiate_end(ctx(&[])).is_err());
}

#[test]
fn probes_check_the_mount_the_container_and_v2() {
    let d = driver();
    let rows = [row("r0", vec![volume()])];
    let names: Vec<&str> = d
        .probes(ctx(&rows), &rows[0], Role::Registry, false)
        .iter()
        .map(|p| match p {
            Probe::Script(s) => s.name(),
            Probe::Outside(s) => panic!("the registry probes nothing outside: {s:?}"),
            Probe::Kubectl(k) => k,
        })
        .collect();
    assert_eq!(names, ["storage.mount", "registry.run", "registry.ready"]);
    assert!(
        d.probes(ctx(&rows), &rows[0], Role::Other, false)
            .is_empty()
    );
}

/// The registry VNF does not scale (cir spec): every SCALE is refused.
#[test]
fn every_scale_of_the_registry_is_refused() {
    let why = driver().scale_refusal("any").expect("refused");
    assert!(why.contains("does not support SCALE"), "{why}");
}
