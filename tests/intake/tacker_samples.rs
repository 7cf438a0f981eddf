//! Tacker's own sample VNF packages (tacker 16.0.0's sdist from PyPI, unmodified, fetched once by
//! `scripts/tacker-samples`) load as vnfkeeper's packages, laid out as Tacker's Kubernetes
//! cluster guide tells an operator to: the MgmtDriver scripts under `Scripts/`, the ETSI SOL001
//! type files beside the VNFD, the image file, and TOSCA.meta's `Hash:` lines recomputed for the
//! files put there.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};
use vnfkeeper_core::package::VnfPackage;

use crate::support;

/// The directory `scripts/tacker-samples` unpacked the sdist's `samples/` into.
fn samples() -> PathBuf {
    let out = Command::new(support::repo_root().join("scripts/tacker-samples"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "scripts/tacker-samples failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("samples")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Lays out `package` (under `samples/mgmt_driver/kubernetes/`) in `dir` with `scripts` (paths
/// under the same directory) in `Scripts/`, the ETSI type files in `Definitions/` and an image
/// file where TOSCA.meta names one; rewrites each `Hash:` line to the file's SHA-256, as the
/// guide's "update the hash values" step does.
fn lay_out(samples: &Path, package: &str, scripts: &[&str], dir: &Path) -> PathBuf {
    let base = samples.join("mgmt_driver/kubernetes");
    let root = dir.join(Path::new(package).file_name().unwrap());
    copy_dir(&base.join(package), &root);
    std::fs::create_dir_all(root.join("Scripts")).unwrap();
    for s in scripts {
        let name = Path::new(s).file_name().unwrap();
        std::fs::copy(base.join(s), root.join("Scripts").join(name)).unwrap();
    }
    for t in [
        "etsi_nfv_sol001_common_types.yaml",
        "etsi_nfv_sol001_vnfd_types.yaml",
    ] {
        let dest = root.join("Definitions").join(t);
        if !dest.exists() {
            std::fs::copy(samples.join("vnf_packages/Definitions").join(t), dest).unwrap();
        }
    }
    let meta_path = root.join("TOSCA-Metadata/TOSCA.meta");
    let meta = std::fs::read_to_string(&meta_path).unwrap();
    let mut out = String::new();
    let mut name: Option<String> = None;
    for line in meta.lines() {
        if let Some(n) = line.strip_prefix("Name:") {
            let n = n.trim().to_owned();
            let file = root.join(&n);
            if !file.exists() && n.starts_with("Files/images/") {
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(&file, b"image stand-in: not booted by the testbed\n").unwrap();
            }
            name = Some(n);
        }
        match (line.strip_prefix("Hash:"), &name) {
            (Some(_), Some(n)) => {
                let bytes = std::fs::read(root.join(n)).unwrap();
                out.push_str(&format!("Hash: {}\n", sha256_hex(&bytes)));
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    std::fs::write(&meta_path, out).unwrap();
    root
}

#[test]
fn tackers_kubernetes_cluster_package_loads_with_each_of_its_flavours() {
    let samples = samples();
    let dir = tempfile::tempdir().unwrap();
    let root = lay_out(
        &samples,
        "kubernetes_vnf_package",
        &[
            "install_k8s_cluster.sh",
            "install_helm.sh",
            "kubernetes_mgmt.py",
        ],
        dir.path(),
    );
    let pkg = VnfPackage::load(&root).unwrap();
    // One VNFD per flavour file: the complex flavour's three-to-five masters are not the
    // simple flavour's one-to-three (a merge of every file would give one of them to both).
    let masters = |flavour: &str| {
        let v = pkg.vnfd.for_flavour(flavour).unwrap();
        assert_eq!(v.flavour_id, flavour);
        let m = &v.vdus["masterNode"];
        (m.min_instances, m.max_instances)
    };
    assert_eq!(masters("simple"), (1, 3));
    assert_eq!(masters("complex"), (3, 5));
    assert_eq!(masters("podaffinity"), (3, 5));
    for flavour in ["simple", "complex"] {
        let v = pkg.vnfd.for_flavour(flavour).unwrap();
        assert!(v.cps.contains_key("masterNode_CP1") && v.cps.contains_key("workerNode_CP2"));
        assert!(v.aspects.contains_key("master_instance"));
        let hot = pkg.base_hot(flavour);
        assert!(hot.is_ok(), "{flavour}: {hot:?}");
    }
    let why = pkg.vnfd.for_flavour("medium").unwrap_err();
    assert_eq!(why.flavours, ["complex", "podaffinity", "simple"]);
    assert!(why.to_string().contains("not `medium`"), "{why}");
}

#[test]
fn tackers_kubespray_and_private_registry_packages_load() {
    let samples = samples();
    let dir = tempfile::tempdir().unwrap();
    let root = lay_out(
        &samples,
        "kubespray/kubespray_vnf_package",
        &[
            "kubespray/install_external_lb.sh",
            "kubespray/kubespray_mgmt.py",
        ],
        dir.path(),
    );
    let pkg = VnfPackage::load(&root).unwrap();
    let v = pkg.vnfd.for_flavour("simple").unwrap();
    assert!(
        ["masterNode", "workerNode", "externalLB"]
            .iter()
            .all(|vdu| v.vdus.contains_key(*vdu)),
        "{:?}",
        v.vdus.keys().collect::<Vec<_>>()
    );
    assert!(pkg.base_hot("simple").is_ok());

    let root = lay_out(
        &samples,
        "private_registry_vnf_package",
        &["private_registry_mgmt.py"],
        dir.path(),
    );
    let pkg = VnfPackage::load(&root).unwrap();
    let v = pkg.vnfd.for_flavour("simple").unwrap();
    assert_eq!(v.flavour_id, "simple");
    assert!(!v.vdus.is_empty());
    // No BaseHOT in Tacker's registry package: one is made from the VNFD.
    let hot = pkg.base_hot("simple");
    assert!(hot.is_ok(), "{hot:?}");
}
