//! Tacker's `/vnflcm/v2` called as an operator calls it: a Keystone token from the testbed's
//! `clouds.yaml`, the `Version: 2.0.0` header (SOL013 §4.9).

use serde_json::{Value, json};
use testbed::cloud::Testbed;
use testbed::cloud::tacker::{MgmtDriverRun, StandInPackage};

/// The `vnfdId` of the package [`register_pv_package`] registers.
pub const VNFD: &str = "b1bb0ce7-ebca-4fa7-95ed-4840d70a1177";

/// `install`'s configuration text with the sections of a companion-mode daemon appended (not
/// written), and the password file: `[cloud]` (the testbed's clouds.yaml), `[reconcile] enabled = false`, and
/// `[tacker]` listening on `127.0.0.1:port` for Tacker's notifications to
/// `/vnfkeeper/notifications` with HTTP Basic `user` and `password` (kept in a 0600 file in the
/// installation's directory, never in the configuration), following the instances of `vnfd`,
/// polling every 5 s.
pub fn companion_config(
    install: &super::Install,
    tb: &Testbed,
    port: u16,
    (user, password): (&str, &str),
    vnfd: &str,
) -> (String, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt as _;
    let pw = install.dir.path().join("tacker.password");
    std::fs::write(&pw, format!("{password}\n")).unwrap();
    std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut text = std::fs::read_to_string(&install.config).unwrap();
    text.push_str(&format!(
        "\n[cloud]\nclouds_yaml = \"{}\"\ncloud = \"testbed\"\n\n[reconcile]\nenabled = false\n\n\
         [tacker]\nlisten = \"127.0.0.1:{port}\"\nusername = \"{user}\"\npassword_file = \"{}\"\n\
         callback_uri = \"http://127.0.0.1:{port}/vnfkeeper/notifications\"\n\
         vnfd_ids = [\"{vnfd}\"]\npoll_interval_secs = 5\n",
        tb.clouds_yaml().display(),
        pw.display()
    ));
    (text, pw)
}

/// Registers [`pv_package`] with the Tacker stand-in.
pub fn register_pv_package(tb: &Testbed) {
    tb.cloud().tacker_register_package(pv_package()).unwrap();
}

/// The testbed's PV cluster BaseHOT (`tests/testbed/tests/data/pv_k8s`: 1 master, 2 workers, a
/// storage server) as package [`VNFD`], with the `nfv` parameter Tacker gives its stack.
pub fn pv_package() -> StandInPackage {
    let d = super::repo_root().join("tests/testbed/tests/data/pv_k8s");
    let read = |f: &str| std::fs::read_to_string(d.join(f)).unwrap();
    let net = "f0c82461-36b5-4d86-8322-b0bc19cda65f";
    let image = "ubuntu-22.04-server-cloudimg-amd64";
    StandInPackage {
            vnfd_id: VNFD.into(),
            template: json!(read("base_hot_k8s_cluster.yaml")),
            files: [
                "complex_nested_master.yaml",
                "complex_nested_worker.yaml",
            ]
            .into_iter()
            .map(|f| (f.to_string(), read(f)))
            .collect(),
            parameters: serde_json::from_value(json!({"nfv": {
                "VDU": {
                    "masterNode": {"computeFlavourId": "m1.medium", "vcImageId": image, "desired_capacity": 1},
                    "workerNode": {"computeFlavourId": "m1.medium", "vcImageId": image, "desired_capacity": 2},
                    "storage_server": {"computeFlavourId": "m1.small", "vcImageId": image, "locationConstraints": null}
                },
                "CP": {
                    "masterNode_CP1": {"network": net},
                    "workerNode_CP2": {"network": net},
                    "storage_server_CP1": {"network": "net0"},
                    "storage_server_CP": {"network": "net0"}
                }
            }}))
            .unwrap(),
            aspects: Default::default(),
            mgmt_driver: None,
        }
}

/// The seed's INSTANTIATE request (the envelope of the spool fixture
/// `pv-k8s-cluster.10-instantiate.json`) and its package directory.
pub fn seed() -> (Value, std::path::PathBuf) {
    let root = super::repo_root();
    let env: Value = serde_json::from_slice(
        &std::fs::read(root.join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json"))
            .unwrap(),
    )
    .unwrap();
    let pkg = root.join(env["vnfPackage"].as_str().unwrap());
    (env["request"].clone(), pkg)
}

/// Registers the package at `pkg_dir` with the stand-in as `vnfd_id`, as Tacker would have it:
/// the flavour's BaseHOT and nested templates, the `nfv` stack parameter vnfkeeper computes for
/// `request`, the VNFD's aspects, and the package's MgmtDriver run by Tacker's code (`mgmt`).
pub fn register(
    tb: &Testbed,
    vnfd_id: &str,
    request: &Value,
    pkg_dir: &std::path::Path,
    mgmt_driver: Option<MgmtDriverRun>,
) {
    let pkg = vnfkeeper_core::package::VnfPackage::load(pkg_dir).unwrap();
    let req: vnfkeeper_core::wire::sol003::InstantiateVnfRequest =
        serde_json::from_value(request.clone()).unwrap();
    let hot = pkg.base_hot(&req.flavour_id).unwrap();
    let nfv = vnfkeeper_core::plan::nfv::instantiate_parameters(&pkg.vnfd, &req).unwrap();
    let mut parameters = serde_json::Map::new();
    parameters.insert("nfv".into(), nfv);
    tb.cloud()
        .tacker_register_package(StandInPackage {
            vnfd_id: vnfd_id.into(),
            template: hot.template,
            files: hot.files,
            parameters,
            aspects: pkg
                .vnfd
                .aspects
                .iter()
                .map(|(a, asp)| (a.clone(), asp.vdu_deltas.clone()))
                .collect(),
            mgmt_driver,
        })
        .unwrap();
}

/// A Keystone token and Tacker calls as an operator would make them.
pub struct Operator {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Operator {
    pub async fn login(tb: &Testbed) -> Self {
        let yaml: Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(tb.clouds_yaml()).unwrap()).unwrap();
        let pw = yaml["clouds"]["testbed"]["auth"]["password"]
            .as_str()
            .unwrap();
        let http = reqwest::Client::new();
        let body = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"name": "Default"}, "password": pw}}},
            "scope": {"project": {"name": "testbed", "domain": {"name": "Default"}}}}});
        let r = http
            .post(format!("{}/identity/v3/auth/tokens", tb.base_url()))
            .json(&body)
            .send()
            .await
            .unwrap();
        let token = r.headers()["x-subject-token"].to_str().unwrap().to_string();
        Self {
            http,
            base: format!("{}/tacker/vnflcm/v2", tb.base_url()),
            token,
        }
    }

    /// An operator of the real Tacker of `tb` (started with
    /// [`testbed::cloud::ControlPlane::RealWithTacker`]): an `admin` token of the real Keystone.
    #[allow(dead_code)] // not every test binary that includes `support` calls it
    pub async fn login_real(tb: &Testbed) -> Self {
        let real = tb.real().expect("a real control plane");
        let (token, _) = real.admin_token().await.unwrap();
        Self {
            http: reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(60))
                .build()
                .unwrap(),
            base: format!(
                "{}/vnflcm/v2",
                real.tacker_url.as_deref().expect("Tacker runs")
            ),
            token,
        }
    }

    /// The token (for calls beside `/vnflcm/v2`).
    #[allow(dead_code)] // not every test binary that includes `support` calls it
    pub fn token(&self) -> &str {
        &self.token
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value, Option<String>) {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .header("x-auth-token", &self.token)
            .header("version", "2.0.0")
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let loc = r
            .headers()
            .get("location")
            .map(|v| v.to_str().unwrap().to_string());
        let text = r.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::Null),
            loc,
        )
    }

    pub async fn get(&self, path: &str) -> Value {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .header("x-auth-token", &self.token)
            .header("version", "2.0.0")
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.json().await.unwrap()
    }
}

impl Operator {
    /// Creates a VNF instance of the package with `vnfd_id` (e.g. [`VNFD`]); its id.
    pub async fn create(&self, vnfd_id: &str) -> String {
        let (st, v, _) = self
            .post("/vnf_instances", json!({"vnfdId": vnfd_id}))
            .await;
        assert_eq!(st, 201, "{v}");
        v["id"].as_str().unwrap().to_string()
    }

    /// Runs `action` on `inst` and waits up to `within` until the stand-in says COMPLETED; the
    /// op occ id.
    pub async fn run(
        &self,
        tb: &Testbed,
        inst: &str,
        action: &str,
        body: Value,
        within: std::time::Duration,
    ) -> String {
        let (st, v, loc) = self
            .post(&format!("/vnf_instances/{inst}/{action}"), body)
            .await;
        assert_eq!(st, 202, "{action}: {v}");
        let occ = loc.unwrap().rsplit('/').next().unwrap().to_string();
        assert!(
            super::wait_until(within, || {
                tb.cloud()
                    .tacker_op_occs()
                    .iter()
                    .any(|(id, _, s)| *id == occ && s == "COMPLETED")
            }),
            "{action} did not complete in the stand-in: {:?}",
            tb.cloud().tacker_op_occs()
        );
        occ
    }

    /// Creates an instance, instantiates it and terminates it; returns its id and the two op
    /// occ ids once Tacker says both COMPLETED.
    pub async fn lifecycle(&self, tb: &Testbed) -> (String, String, String) {
        let inst = self.create(VNFD).await;
        let within = std::time::Duration::from_secs(60);
        let instantiate = self
            .run(
                tb,
                &inst,
                "instantiate",
                json!({"flavourId": "simple"}),
                within,
            )
            .await;
        let terminate = self
            .run(
                tb,
                &inst,
                "terminate",
                json!({"terminationType": "FORCEFUL"}),
                within,
            )
            .await;
        (inst, instantiate, terminate)
    }
}

/// The python of Tacker 16.0.0's venv (`scripts/tacker-venv`, made once and cached). Panics
/// when it cannot be made (the Tacker tests fail, they never skip).
pub fn venv_python() -> &'static std::path::Path {
    static PY: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    PY.get_or_init(|| {
        let out = std::process::Command::new(super::repo_root().join("scripts/tacker-venv"))
            .output()
            .expect("run scripts/tacker-venv");
        assert!(
            out.status.success(),
            "scripts/tacker-venv failed (needs python3-venv and PyPI the first time):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

/// The directory holding Tacker 16.0.0's `samples/` (`scripts/tacker-samples`, fetched once
/// from PyPI and cached). Panics when it cannot be fetched.
pub fn samples_dir() -> std::path::PathBuf {
    let out = std::process::Command::new(super::repo_root().join("scripts/tacker-samples"))
        .output()
        .expect("run scripts/tacker-samples");
    assert!(
        out.status.success(),
        "scripts/tacker-samples failed (needs PyPI the first time): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}
