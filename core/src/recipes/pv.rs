//! PersistentVolume registration: the package's manifest with `spec.nfs.server` set to the NFS
//! server's CP address by editing the YAML as data (Tacker uses a `sed` regex), uploaded to a
//! master, applied, and waited for until phase `Available`.

use std::time::Duration;

use serde_json::Value;

use super::{Step, StepKind, Upload};

/// A manifest ready to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PvManifest {
    /// `metadata.name`.
    pub name: String,
    /// `spec.nfs.path`.
    pub path: String,
    /// `spec.nfs.server` as set.
    pub server: String,
    /// The manifest with `spec.nfs.server` replaced, as YAML.
    pub yaml: String,
}

/// Why a manifest cannot be used; `file` is the package-relative path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("PersistentVolume manifest {file}: {reason}")]
pub struct ManifestError {
    /// Package-relative path of the manifest.
    pub file: String,
    /// What is wrong.
    pub reason: String,
}

/// Sets `spec.nfs.server` of a single-document `PersistentVolume` manifest to `server`.
/// Errors: not YAML, or YAML that is not a JSON document as every Kubernetes object is (a tag
/// such as `!storage`), several documents, not `kind: PersistentVolume`, no
/// `metadata.name`, no `spec.nfs.path`, or a name that is not a DNS-1123 subdomain.
pub fn with_nfs_server(file: &str, text: &str, server: &str) -> Result<PvManifest, ManifestError> {
    let err = |reason: String| ManifestError {
        file: file.into(),
        reason,
    };
    let mut docs = Vec::new();
    for d in serde_yaml_ng::Deserializer::from_str(text) {
        let v = <Value as serde::Deserialize>::deserialize(d).map_err(|e| err(e.to_string()))?;
        if !v.is_null() {
            docs.push(v);
        }
    }
    let [mut doc] = <[Value; 1]>::try_from(docs)
        .map_err(|d| err(format!("{} YAML documents, expected 1", d.len())))?;
    if doc["kind"].as_str() != Some("PersistentVolume") {
        return Err(err(format!(
            "kind is {:?}, expected PersistentVolume",
            doc["kind"].as_str().unwrap_or("absent")
        )));
    }
    let name = doc["metadata"]["name"]
        .as_str()
        .ok_or_else(|| err("no metadata.name".into()))?
        .to_owned();
    let dns1123 = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !dns1123 {
        return Err(err(format!(
            "metadata.name {name:?} is not a DNS-1123 subdomain"
        )));
    }
    let path = doc["spec"]["nfs"]["path"]
        .as_str()
        .ok_or_else(|| err("no spec.nfs.path".into()))?
        .to_owned();
    let nfs = doc
        .get_mut("spec")
        .and_then(|s| s.get_mut("nfs"))
        .and_then(Value::as_object_mut)
        .ok_or_else(|| err("spec.nfs is not a mapping".into()))?;
    nfs.insert("server".to_owned(), Value::from(server));
    let yaml = serde_yaml_ng::to_string(&doc).map_err(|e| err(e.to_string()))?;
    Ok(PvManifest {
        name,
        path,
        server: server.into(),
        yaml,
    })
}

/// On a master: every manifest of `pvs` uploaded under `dir` (`<dir>/<name>.yaml`) and applied
/// unless its PV already points at its `server:path` (one `pv.register` step over all of them),
/// then all waited for up to `wait` in all until phase Available or Bound (one `pv.available`
/// step). One step per action, each checking every PersistentVolume before it applies to any,
/// so that registering N PVs takes a fixed number of SSH sessions instead of N times as many.
/// The scripts also take the one-PersistentVolume arguments a plan of an earlier version stored.
pub fn register(host: &str, dir: &str, pvs: &[PvManifest], wait: Duration) -> Vec<Step> {
    let mut args = Vec::with_capacity(pvs.len() * 4);
    let mut uploads = Vec::with_capacity(pvs.len());
    for pv in pvs {
        let manifest = format!("{dir}/{}.yaml", pv.name);
        args.extend([
            pv.name.clone(),
            manifest.clone(),
            pv.server.clone(),
            pv.path.clone(),
        ]);
        uploads.push(Upload {
            path: manifest,
            bytes: pv.yaml.clone().into_bytes(),
            mode: 0o600,
        });
    }
    let mut available: Vec<String> = pvs.iter().map(|pv| pv.name.clone()).collect();
    available.push(wait.as_secs().to_string());
    vec![
        Step {
            kind: StepKind::PvRegister,
            host: host.into(),
            args,
            late: Vec::new(),
            uploads,
            sudo: false,
            timeout: Duration::from_secs(120),
        },
        Step {
            kind: StepKind::PvAvailable,
            host: host.into(),
            args: available,
            late: Vec::new(),
            uploads: Vec::new(),
            sudo: false,
            timeout: wait + Duration::from_secs(30),
        },
    ]
}

/// On a master, before a storage server is rebuilt: none of the PersistentVolumes `names` is
/// Bound. Read-only; refuses (exit [`super::EXIT_REFUSED`], 409) naming the Bound ones. Source:
/// the in-use check of `_heal_start_storage_server` in Tacker's
/// `samples/mgmt_driver/kubernetes/kubernetes_mgmt.py` (a PV of the package's manifests whose
/// `status.phase` is `Bound` is in use), done here before anything else is touched.
pub fn not_bound(host: &str, names: &[String]) -> Step {
    Step {
        kind: StepKind::PvNotBound,
        host: host.into(),
        args: names.to_vec(),
        late: Vec::new(),
        uploads: Vec::new(),
        sudo: false,
        timeout: Duration::from_secs(60),
    }
}

/// On a master: none of the PersistentVolumes `names` exists — each one that does is deleted
/// (never when any of them is Bound: the step refuses before deleting one), then all are waited
/// for up to `wait` in all. One step over all of them (see [`register`]).
pub fn unregister(host: &str, names: &[String], wait: Duration) -> Step {
    let mut args = names.to_vec();
    args.push(wait.as_secs().to_string());
    Step {
        kind: StepKind::PvUnregister,
        host: host.into(),
        args,
        late: Vec::new(),
        uploads: Vec::new(),
        sudo: false,
        timeout: wait + Duration::from_secs(30),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PV1: &str =
        include_str!("../../../fixtures/packages/pv-k8s-cluster/Files/kubernetes/nfs-pv1.yaml");

    #[test]
    fn replaces_only_the_nfs_server_structurally() {
        let pv = with_nfs_server("nfs-pv1.yaml", PV1, "10.231.0.13").unwrap();
        assert_eq!(pv.name, "nfs-pv1");
        assert_eq!(pv.path, "/volume/nfs/pv1");
        let v: Value = serde_yaml_ng::from_str(&pv.yaml).unwrap();
        assert_eq!(v["spec"]["nfs"]["server"].as_str(), Some("10.231.0.13"));
        assert_eq!(v["spec"]["capacity"]["storage"].as_str(), Some("1Gi"));
        assert_eq!(v["spec"]["mountOptions"][0].as_str(), Some("nfsvers=4.1"));
    }

    #[test]
    fn refuses_manifests_that_are_not_one_nfs_persistent_volume() {
        let two = format!("{PV1}\n---\n{PV1}");
        assert!(
            with_nfs_server("f", &two, "1.2.3.4")
                .unwrap_err()
                .reason
                .contains("2 YAML documents")
        );
        let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n";
        assert!(
            with_nfs_server("f", pod, "1.2.3.4")
                .unwrap_err()
                .reason
                .contains("Pod")
        );
        let hostpath =
            "kind: PersistentVolume\nmetadata: {name: p}\nspec: {hostPath: {path: /x}}\n";
        assert!(
            with_nfs_server("f", hostpath, "1.2.3.4")
                .unwrap_err()
                .reason
                .contains("spec.nfs.path")
        );
        // A YAML tag is no JSON (nor Kubernetes) value: refused here, not by kubectl later.
        // Found by the `package_dir` fuzz target.
        let tagged = PV1.replace("    storage: 1Gi", "    !storage: 1Gi");
        assert_ne!(tagged, PV1);
        assert!(with_nfs_server("f", &tagged, "1.2.3.4").is_err());
        let bad = "kind: PersistentVolume\nmetadata: {name: \"A;B\"}\nspec: {nfs: {path: /x, server: 0.0.0.0}}\n";
        assert!(
            with_nfs_server("f", bad, "1.2.3.4")
                .unwrap_err()
                .reason
                .contains("DNS-1123")
        );
    }
}
