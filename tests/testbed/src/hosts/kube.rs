//! The kubectl stand-in's per-cluster store, as seen from the test harness.

use std::fs;
use std::io::Write;
use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use nix::fcntl::{Flock, FlockArg};
use serde_json::{Value, json};

/// Handle on one cluster's store: `DIR/store.json` (see `standins/kubectl-standin` for the shape:
/// `{"nodes": {NAME: Node}, "pvs": {NAME: PV}, "pvcs": {"NS/NAME": PVC}, "pods": {"NS/NAME": Pod}}`),
/// `DIR/lock` (flock, shared with the stand-in) and `DIR/kubectl.log`. The directory is
/// bind-mounted at `/var/lib/testbed-kube` into every host of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeStore {
    dir: PathBuf,
}

const KINDS: [&str; 4] = ["nodes", "pvs", "pvcs", "pods"];

fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

impl KubeStore {
    pub(crate) fn new(dir: PathBuf) -> Self {
        KubeStore { dir }
    }

    /// The store's directory on the machine.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Creates the directory, an empty store and the lock file if missing (world-writable: the
    /// stand-in also runs as `ubuntu`).
    pub fn ensure(&self) -> Result<()> {
        fs::create_dir_all(&self.dir).with_context(|| format!("create {}", self.dir.display()))?;
        fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o777))?;
        for (name, init) in [
            (
                "store.json",
                "{\"nodes\": {}, \"pvs\": {}, \"pvcs\": {}, \"pods\": {}}\n",
            ),
            ("lock", ""),
            ("kubectl.log", ""),
        ] {
            let p = self.dir.join(name);
            if !p.exists() {
                fs::write(&p, init)?;
            }
            fs::set_permissions(&p, fs::Permissions::from_mode(0o666))?;
        }
        Ok(())
    }

    fn lock(&self) -> Result<Flock<fs::File>> {
        self.ensure()?;
        let f = fs::OpenOptions::new()
            .append(true)
            .open(self.dir.join("lock"))?;
        Flock::lock(f, FlockArg::LockExclusive)
            .map_err(|(_, e)| anyhow!("flock {}: {e}", self.dir.display()))
    }

    fn load(&self) -> Result<Value> {
        let p = self.dir.join("store.json");
        let mut v: Value = match fs::read(&p) {
            Ok(d) if !d.is_empty() => {
                serde_json::from_slice(&d).with_context(|| format!("parse {}", p.display()))?
            }
            _ => json!({}),
        };
        for k in KINDS {
            if v.get(k).is_none() {
                v[k] = json!({});
            }
        }
        Ok(v)
    }

    /// The whole store as JSON (see the type docs for the shape).
    pub fn read(&self) -> Result<Value> {
        let _l = self.lock()?;
        self.load()
    }

    /// Read-modify-write under the lock; the file is replaced atomically.
    pub fn update<T>(&self, f: impl FnOnce(&mut Value) -> Result<T>) -> Result<T> {
        let _l = self.lock()?;
        let mut v = self.load()?;
        let r = f(&mut v)?;
        self.save(&v)?;
        Ok(r)
    }

    /// A server of the cluster is gone (deleted, or rebuilt from its image), as the farm tears
    /// its host down: its kubelet stops posting status, so a Node with its `InternalIP` turns
    /// `NotReady`, and a kubeadm control plane on it takes its stacked etcd member with it.
    /// With the cluster's last control plane gone the cluster is gone too: kubeadm's state
    /// (`kubeadm.json`: tokens, certificate key, members; `pki/`) and every object of the
    /// store are forgotten, as the etcd data on the masters' disks is, and a new `kubeadm
    /// init` starts a new cluster. A store no `kubeadm init` made is only marked.
    pub fn server_gone(&self, ip: Ipv4Addr) -> Result<()> {
        let _l = self.lock()?;
        let mut v = self.load()?;
        let ip = ip.to_string();
        let mut gone = Vec::new();
        if let Some(nodes) = v["nodes"].as_object_mut() {
            for (name, node) in nodes.iter_mut() {
                let here = node["status"]["addresses"].as_array().is_some_and(|a| {
                    a.iter()
                        .any(|x| x["type"] == "InternalIP" && x["address"] == ip.as_str())
                });
                if here {
                    node["status"]["conditions"] = json!([{
                        "type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                        "message": "Kubelet stopped posting node status."
                    }]);
                    gone.push(name.clone());
                }
            }
        }
        let state_path = self.dir.join("kubeadm.json");
        let mut state: Value = match fs::read(&state_path) {
            Ok(d) => serde_json::from_slice(&d)
                .with_context(|| format!("parse {}", state_path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Value::Null,
            Err(e) => return Err(e.into()),
        };
        let Some(st) = state.as_object_mut().filter(|m| !m.is_empty()) else {
            return self.save(&v);
        };
        for role in ["control_planes", "workers"] {
            if let Some(list) = st.get_mut(role).and_then(Value::as_array_mut) {
                list.retain(|n| !n.as_str().is_some_and(|n| gone.iter().any(|g| g == n)));
            }
        }
        let last = st
            .get("control_planes")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if last {
            fs::remove_file(&state_path)?;
            match fs::remove_dir_all(self.dir.join("pki")) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
            for k in KINDS {
                v[k] = json!({});
            }
        } else {
            let tmp = self.dir.join("kubeadm.json.tmp");
            fs::write(&tmp, serde_json::to_vec_pretty(&state)?)?;
            fs::set_permissions(&tmp, fs::Permissions::from_mode(0o600))?;
            fs::rename(&tmp, &state_path)?;
        }
        self.save(&v)
    }

    /// Replaces `store.json` atomically; the caller holds the lock.
    fn save(&self, v: &Value) -> Result<()> {
        let tmp = self
            .dir
            .join(format!("store.json.tmp.{}", std::process::id()));
        let mut file = fs::File::create(&tmp)?;
        file.write_all(serde_json::to_string_pretty(v)?.as_bytes())?;
        file.sync_all()?;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o666))?;
        fs::rename(&tmp, self.dir.join("store.json"))?;
        Ok(())
    }

    /// Registers (or replaces) a Ready node with an InternalIP and role labels
    /// (e.g. `["control-plane"]`), as `kubeadm join` would.
    pub fn register_node(&self, name: &str, ip: Ipv4Addr, roles: &[&str]) -> Result<()> {
        let mut labels = serde_json::Map::new();
        labels.insert("kubernetes.io/hostname".into(), json!(name));
        for r in roles {
            labels.insert(format!("node-role.kubernetes.io/{r}"), json!(""));
        }
        let node = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "creationTimestamp": now()},
            "spec": {},
            "status": {
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                "addresses": [{"type": "InternalIP", "address": ip.to_string()}, {"type": "Hostname", "address": name}],
                "nodeInfo": {"kubeletVersion": "v1.26.0"}
            }
        });
        self.update(|v| {
            v["nodes"][name] = node;
            Ok(())
        })
    }

    /// Sets a node's Ready condition (True/False). Errors if the node is unknown.
    pub fn set_node_ready(&self, name: &str, ready: bool) -> Result<()> {
        self.update(|v| {
            let n = v["nodes"]
                .get_mut(name)
                .ok_or_else(|| anyhow!("no node {name}"))?;
            let status = if ready { "True" } else { "False" };
            let reason = if ready {
                "KubeletReady"
            } else {
                "NodeStatusUnknown"
            };
            n["status"]["conditions"] =
                json!([{"type": "Ready", "status": status, "reason": reason}]);
            Ok(())
        })
    }

    /// Names of the registered nodes.
    pub fn nodes(&self) -> Result<Vec<String>> {
        Ok(self.read()?["nodes"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default())
    }

    /// A PV's phase (`Available`, `Bound`, `Released`), `None` if there is no such PV.
    pub fn pv_phase(&self, pv: &str) -> Result<Option<String>> {
        Ok(self.read()?["pvs"]
            .get(pv)
            .and_then(|p| p["status"]["phase"].as_str())
            .map(str::to_string))
    }

    /// Simulates a workload using PV `pv`: creates PVC `default/claim-PV` bound to it and pod
    /// `default/user-PV` (on `node` if given, owned by a ReplicaSet) mounting the claim; the PV
    /// becomes Bound with a claimRef. Errors unless the PV exists and is Available.
    pub fn bind_pv(&self, pv: &str, node: Option<&str>) -> Result<()> {
        self.update(|v| {
            let p = v["pvs"].get_mut(pv).ok_or_else(|| anyhow!("no PV {pv}"))?;
            let phase = p["status"]["phase"].as_str().unwrap_or("");
            if phase != "Available" {
                bail!("PV {pv} is {phase}, not Available");
            }
            let claim = format!("claim-{pv}");
            let cap = p["spec"]["capacity"].clone();
            let modes = p["spec"]["accessModes"].clone();
            let sc = p["spec"]["storageClassName"].clone();
            p["spec"]["claimRef"] = json!({"kind": "PersistentVolumeClaim", "namespace": "default", "name": claim});
            p["status"]["phase"] = json!("Bound");
            v["pvcs"][format!("default/{claim}")] = json!({
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": claim, "namespace": "default", "creationTimestamp": now()},
                "spec": {"volumeName": pv, "accessModes": modes, "resources": {"requests": cap}, "storageClassName": sc},
                "status": {"phase": "Bound", "capacity": cap}
            });
            let pod = format!("user-{pv}");
            v["pods"][format!("default/{pod}")] = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod, "namespace": "default", "creationTimestamp": now(),
                             "ownerReferences": [{"kind": "ReplicaSet", "name": format!("user-{pv}-rs")}]},
                "spec": {"nodeName": node, "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]},
                "status": {"phase": "Running"}
            });
            Ok(())
        })
    }

    /// Ends the use of PV `pv`: deletes the pods using its claim and the claim; the PV becomes
    /// `Released` (claimRef kept, as with reclaim policy Retain) or, with `released == false`,
    /// `Available` (claimRef removed). Errors if the PV is unknown.
    pub fn unbind_pv(&self, pv: &str, released: bool) -> Result<()> {
        self.update(|v| {
            let p = v["pvs"].get_mut(pv).ok_or_else(|| anyhow!("no PV {pv}"))?;
            let claim = p["spec"]["claimRef"].as_object().map(|c| {
                format!(
                    "{}/{}",
                    c["namespace"].as_str().unwrap_or("default"),
                    c["name"].as_str().unwrap_or("")
                )
            });
            p["status"]["phase"] = json!(if released { "Released" } else { "Available" });
            if !released {
                p["spec"].as_object_mut().map(|s| s.remove("claimRef"));
            }
            if let Some(claim) = claim {
                let cname = claim
                    .split_once('/')
                    .map(|x| x.1.to_string())
                    .unwrap_or_default();
                v["pvcs"].as_object_mut().map(|m| m.remove(&claim));
                if let Some(pods) = v["pods"].as_object_mut() {
                    pods.retain(|_, pod| {
                        !pod["spec"]["volumes"].as_array().is_some_and(|vols| {
                            vols.iter().any(|vol| {
                                vol["persistentVolumeClaim"]["claimName"].as_str() == Some(&cname)
                            })
                        })
                    });
                }
            }
            Ok(())
        })
    }

    /// The kubeadm stand-in's state of this cluster (`DIR/kubeadm.json`, see
    /// `standins/kubeadm-standin`: `endpoint`, `ca_hash`, `tokens` {TOKEN: expiry}, `certificate_key`,
    /// `control_planes`, `workers`, …), read under the store's lock; `None` before the first
    /// `kubeadm init` (or after the last control plane's `kubeadm reset`). It holds the cluster's
    /// join secrets: never print it.
    pub fn kubeadm_state(&self) -> Result<Option<Value>> {
        let _l = self.lock()?;
        let p = self.dir.join("kubeadm.json");
        match fs::read(&p) {
            Ok(d) => {
                let v: Value =
                    serde_json::from_slice(&d).with_context(|| format!("parse {}", p.display()))?;
                Ok(v.as_object().is_some_and(|m| !m.is_empty()).then_some(v))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Every kubectl stand-in call in this cluster ("HOSTNAME kubectl ARGS"), oldest first.
    pub fn kubectl_log(&self) -> Result<Vec<String>> {
        match fs::read_to_string(self.dir.join("kubectl.log")) {
            Ok(s) => Ok(s.lines().map(str::to_string).collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        }
    }
}
