//! A VNF package swapped after acceptance is not used (needs root): the seed's INSTANTIATE is
//! accepted from a copy of the package, then the operator's copy changes — the install script
//! fails, a PersistentVolume manifest becomes a link to `/etc/shadow`, and finally the whole
//! directory is replaced by a link to another package whose install script fails too. The
//! engine runs the operation to COMPLETED from the snapshot taken at intake, and the
//! PersistentVolumes it creates are the accepted manifests.

use crate::support;

use std::os::unix::fs::symlink;
use std::path::Path;

use support::bed::{Bed, fast_limits};
use support::repo_root;
use vnfkeeper::intake::spool::Outcome;
use vnfkeeper_core::model::OperationState;

fn copy_dir(from: &Path, to: &Path) {
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn a_package_swapped_after_acceptance_is_not_used_by_the_engine() {
    let bed = Bed::new("vks", 72, fast_limits()).await;
    let packages = bed.dir.path().join("packages");
    let pkg = packages.join("fixtures/packages/pv-k8s-cluster");
    std::fs::create_dir_all(pkg.parent().unwrap()).unwrap();
    copy_dir(&repo_root().join("fixtures/packages/pv-k8s-cluster"), &pkg);
    let fixture = repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let op = match bed.submit_in(&std::fs::read(fixture).unwrap(), &packages) {
        Outcome::Accepted {
            vnf_lcm_op_occ_id, ..
        } => vnf_lcm_op_occ_id,
        other => panic!("{other:?}"),
    };

    // The swap, after acceptance and before the engine runs.
    let failing = "#!/bin/sh\necho swapped >&2\nexit 1\n";
    std::fs::write(pkg.join("Scripts/install_k8s_cluster.sh"), failing).unwrap();
    let pv1 = pkg.join("Files/kubernetes/nfs-pv1.yaml");
    std::fs::remove_file(&pv1).unwrap();
    symlink("/etc/shadow", &pv1).unwrap();
    let other = bed.dir.path().join("other");
    copy_dir(
        &repo_root().join("fixtures/packages/pv-k8s-cluster"),
        &other,
    );
    std::fs::write(other.join("Scripts/install_k8s_cluster.sh"), failing).unwrap();
    std::fs::rename(&pkg, bed.dir.path().join("swapped-out")).unwrap();
    symlink(&other, &pkg).unwrap();

    let state = bed.engine.run(&op).await.unwrap();
    bed.print_journal(&op);
    assert_eq!(state, OperationState::Completed, "{:?}", bed.error_of(&op));

    // The stored plan carries the accepted install script and PV manifest, not the swapped ones.
    let plan = bed
        .db
        .with(|s| s.reader().operation_plan(&op))
        .unwrap()
        .unwrap();
    assert!(!plan.contains("swapped"), "the plan holds a swapped file");
    let shadow = std::fs::read_to_string("/etc/shadow").unwrap_or_default();
    let root_line = shadow.lines().next().unwrap_or("root:");
    assert!(!plan.contains(root_line), "the plan holds /etc/shadow");
    let (_, package) = bed
        .db
        .with(|s| s.reader().operation_params(&op))
        .unwrap()
        .unwrap();
    assert!(
        package
            .as_deref()
            .is_some_and(|p| p.starts_with(bed.dir.path().join("package-store").to_str().unwrap())),
        "{package:?}"
    );
}
