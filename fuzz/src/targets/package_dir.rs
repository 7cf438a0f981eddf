//! A VNF package as a directory, as `packages_dir` holds one: the input is a list of files,
//! each introduced by a line `=== <package-relative path>` followed by its content (the last
//! line break before the next `=== ` line belongs to the separator), so that the committed
//! seeds are the fixture packages' own text files and a mutation changes one file's content or
//! path. Files whose path [`files::check_path`] refuses are left out (as unpacking refuses
//! them); the rest are written to a scratch directory and loaded as the engine loads a package
//! snapshot: [`VnfPackage::load`] (TOSCA.meta, the VNFD and its local imports), then
//! [`VnfPackage::base_hot`] of the VNFD's flavour; each `Files/**.yaml` also goes to
//! [`pv::with_nfs_server`], as the kubeadm flavour reads a PersistentVolume manifest.
//!
//! Properties: no panic; loading is deterministic (the same VNFD twice); a BaseHOT's nested
//! templates are `.yaml`/`.yml` files; an accepted PV manifest parses again as YAML with
//! `spec.nfs.server` set to the server asked for and the `metadata.name` it reports. At most 64
//! files are written (an AFL++ input is at most 1 MB).

use serde_json::Value;
use vnfkeeper_core::package::{VnfPackage, files};
use vnfkeeper_core::recipes::pv;

/// Most files one input writes.
const MAX_FILES: usize = 64;

/// The server address given to the PV manifests.
const SERVER: &str = "192.0.2.7";

/// The target: see the module documentation.
pub fn run(data: &[u8]) {
    let text = crate::text(data);
    let tree = split(text);
    let dir = crate::scratch("package-dir");
    let _ = std::fs::remove_dir_all(&dir);
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    for (path, content) in &tree {
        let p = dir.join(path);
        // A file and a directory of the same name cannot both exist: the later one is left out.
        let _ = p
            .parent()
            .is_none_or(|parent| std::fs::create_dir_all(parent).is_ok())
            && std::fs::write(&p, content).is_ok();
        if path.starts_with("Files/") && (path.ends_with(".yaml") || path.ends_with(".yml")) {
            pv_manifest(path, content);
        }
    }
    if let Ok(pkg) = VnfPackage::load(&dir) {
        let again = VnfPackage::load(&dir).expect("loads once, fails the second time");
        assert_eq!(again.vnfd, pkg.vnfd, "loading is not deterministic");
        if let Ok(hot) = pkg.base_hot(&pkg.vnfd.flavour_id) {
            for name in hot.files.keys() {
                assert!(
                    name.ends_with(".yaml") || name.ends_with(".yml"),
                    "nested template {name}"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The files of the input: `(path, content)`, paths checked, at most [`MAX_FILES`].
fn split(text: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("=== ") {
        if at != 0 && !rest[..at].ends_with('\n') {
            rest = &rest[at + 4..];
            continue;
        }
        let head = &rest[at + 4..];
        let (path, body) = head.split_once('\n').unwrap_or((head, ""));
        let end = body.find("\n=== ").map_or(body.len(), |e| e + 1);
        let content = body[..end].strip_suffix('\n').unwrap_or(&body[..end]);
        if files::check_path(path).is_ok() && out.len() < MAX_FILES {
            out.push((path, content));
        }
        rest = &body[end..];
    }
    out
}

fn pv_manifest(path: &str, content: &str) {
    let Ok(m) = pv::with_nfs_server(path, content, SERVER) else {
        return;
    };
    let doc: Value = serde_yaml_ng::from_str(&m.yaml).expect("the edited manifest is YAML");
    assert_eq!(doc["spec"]["nfs"]["server"], SERVER, "{}", m.yaml);
    assert_eq!(doc["metadata"]["name"].as_str(), Some(m.name.as_str()));
}
