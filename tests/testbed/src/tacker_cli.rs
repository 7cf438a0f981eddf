//! `testbed tacker …`: drives Tacker as an operator would — the testbed's Tacker stand-in or,
//! with `--control-plane real-tacker`, the real Tacker 16.0.0 — for `scripts/demo tacker`: a
//! Keystone token from the clouds.yaml `testbed serve` wrote, Tacker's URL from the token's
//! catalog (type `nfv-orchestration`), `Version: 2.0.0` on every `/vnflcm/v2` call (SOL013
//! §4.9). The password and the token are never printed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Subcommand;
use serde_json::{Map, Value, json};
use testbed::cloud::tacker::StandInPackage;

/// What `testbed tacker` does.
#[derive(Subcommand, Debug)]
pub enum TackerCmd {
    /// Registers a VNF package with the stand-in as Tacker would hold it: the flavour's BaseHOT
    /// and nested templates, the `nfv` stack parameter of the instantiate request (the one
    /// vnfkeeper computes for the same request), and the VNFD's scaling aspects.
    Register {
        /// The VNF package directory.
        #[arg(long)]
        package: PathBuf,
        /// The instantiate request: an `InstantiateVnfRequest` body or a spool envelope (its
        /// `request` is used).
        #[arg(long)]
        request: PathBuf,
        /// The `vnfdId` the stand-in files it under.
        #[arg(long)]
        vnfd_id: String,
    },
    /// Onboards a VNF package (CSAR zip) through Tacker's package API (SOL005
    /// `/vnfpkgm/v1/vnf_packages`: create, `PUT …/package_content`, then waits for
    /// `onboardingState` `ONBOARDED`); prints its `vnfdId`. The real Tacker only (the stand-in
    /// has no package API: `register`).
    Onboard {
        /// The CSAR zip.
        #[arg(long)]
        zip: PathBuf,
        /// How long to wait for `ONBOARDED`, seconds.
        #[arg(long, default_value_t = 300)]
        timeout_secs: u64,
    },
    /// `POST /vnf_instances` (`CreateVnfRequest`); prints the new instance's id.
    Create {
        /// A registered `vnfdId`.
        #[arg(long)]
        vnfd_id: String,
    },
    /// `POST /vnf_instances/{id}/{action}` and waits for the op occ to end; prints its id;
    /// fails unless it ended in the state `--expect` names (`COMPLETED` by default). Each state
    /// seen goes to stderr.
    Run {
        /// The VNF instance id.
        #[arg(long)]
        instance: String,
        /// `instantiate`, `heal`, `scale` or `terminate`.
        #[arg(long)]
        action: String,
        /// The request body: a JSON file (a spool envelope's `request` is taken), or inline JSON
        /// when it starts with `{`.
        #[arg(long)]
        body: String,
        /// How long to wait for the end, seconds.
        #[arg(long, default_value_t = 600)]
        timeout_secs: u64,
        /// The state the op occ must end in: `COMPLETED`, `FAILED_TEMP`, `FAILED` or
        /// `ROLLED_BACK`.
        #[arg(long, default_value = "COMPLETED", value_parser = ["COMPLETED", "FAILED_TEMP", "FAILED", "ROLLED_BACK"])]
        expect: String,
    },
    /// `GET /vnf_lcm_op_occs/{id}` (SOL003 §5.4.13), printed as JSON.
    ShowOcc {
        /// The op occ id.
        #[arg(long)]
        occ: String,
    },
    /// `GET /vnf_instances/{id}`, printed as JSON.
    Show {
        /// The VNF instance id.
        #[arg(long)]
        instance: String,
    },
    /// `GET /vnflcm/api_versions` (SOL013 §9.3.3): the `uriPrefix` and each API version Tacker
    /// serves, on one line.
    ApiVersions,
    /// `POST /vnf_lcm_op_occs/{id}/fail` (SOL003 §5.4.16): a `FAILED_TEMP` op occ marked
    /// `FAILED`; prints the state Tacker answers. Tacker 16.0.0 takes this without a body.
    FailOcc {
        /// The op occ id.
        #[arg(long)]
        occ: String,
    },
    /// `GET /vnf_lcm_op_occs` of one instance, one line each: id, operation, state.
    Occs {
        /// The VNF instance id.
        #[arg(long)]
        instance: String,
    },
}

/// A logged-in operator: the testbed's base URL (the stand-in's testbed API; `None` with a
/// real Keystone), Tacker's URL from the catalog and a Keystone token.
struct Operator {
    http: reqwest::Client,
    base: Option<String>,
    tacker: String,
    token: String,
}

impl Operator {
    /// Reads the `testbed` entry of `clouds_yaml` and gets a project-scoped token.
    async fn login(clouds_yaml: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(clouds_yaml)
            .with_context(|| format!("reading {}", clouds_yaml.display()))?;
        let yaml: Value = serde_yaml_ng::from_str(&text).context("clouds.yaml")?;
        let auth = &yaml["clouds"]["testbed"]["auth"];
        let field = |k: &str| {
            auth[k]
                .as_str()
                .map(str::to_owned)
                .with_context(|| format!("clouds.yaml: no clouds.testbed.auth.{k}"))
        };
        let auth_url = field("auth_url")?;
        let base = auth_url.strip_suffix("/identity/v3").map(str::to_owned);
        let body = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": field("username")?, "domain": {"name": "Default"},
            "password": field("password")?}}},
            "scope": {"project": {"name": field("project_name")?, "domain": {"name": "Default"}}}}});
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?;
        let r = http
            .post(format!("{auth_url}/auth/tokens"))
            .json(&body)
            .send()
            .await
            .context("Keystone")?;
        if !r.status().is_success() {
            bail!("Keystone answered {}", r.status());
        }
        let token = r
            .headers()
            .get("x-subject-token")
            .context("Keystone: no X-Subject-Token")?
            .to_str()?
            .to_owned();
        let v: Value = r.json().await.context("Keystone's token body")?;
        let tacker = v["token"]["catalog"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["type"] == "nfv-orchestration")
            .flat_map(|s| s["endpoints"].as_array().into_iter().flatten())
            .find(|e| e["interface"] == "public")
            .and_then(|e| e["url"].as_str())
            .context("no nfv-orchestration (Tacker) endpoint in Keystone's catalog")?
            .trim_end_matches('/')
            .to_owned();
        Ok(Self {
            http,
            base,
            tacker,
            token,
        })
    }

    fn lcm(&self, path: &str) -> String {
        format!("{}/vnflcm/v2{path}", self.tacker)
    }

    /// Onboards the CSAR `zip` through `/vnfpkgm/v1` and returns its `vnfdId`.
    async fn onboard(&self, zip: &Path, timeout: Duration) -> anyhow::Result<String> {
        let pkgs = format!("{}/vnfpkgm/v1/vnf_packages", self.tacker);
        let r = self
            .http
            .post(&pkgs)
            .header("x-auth-token", &self.token)
            .json(&json!({}))
            .send()
            .await
            .context("POST /vnfpkgm/v1/vnf_packages")?;
        let st = r.status().as_u16();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        if st != 201 {
            bail!("POST /vnfpkgm/v1/vnf_packages: {st} {v}");
        }
        let id = v["id"].as_str().context("no package id")?.to_owned();
        let data = std::fs::read(zip).with_context(|| format!("reading {}", zip.display()))?;
        let r = self
            .http
            .put(format!("{pkgs}/{id}/package_content"))
            .header("x-auth-token", &self.token)
            .header("content-type", "application/zip")
            .timeout(Duration::from_secs(120))
            .body(data)
            .send()
            .await
            .context("PUT package_content")?;
        if r.status().as_u16() != 202 {
            bail!(
                "PUT {pkgs}/{id}/package_content: {} {}",
                r.status(),
                r.text().await?
            );
        }
        let started = Instant::now();
        loop {
            let v: Value = self
                .http
                .get(format!("{pkgs}/{id}"))
                .header("x-auth-token", &self.token)
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            match v["onboardingState"].as_str() {
                Some("ONBOARDED") => {
                    eprintln!(
                        "  Tacker VNF package {id}: ONBOARDED ({:.1} s)",
                        started.elapsed().as_secs_f64()
                    );
                    return v["vnfdId"]
                        .as_str()
                        .map(str::to_owned)
                        .context("ONBOARDED without vnfdId");
                }
                Some("ERROR") => bail!(
                    "package {id}: onboarding ERROR: {}",
                    v["onboardingFailureDetails"]
                ),
                _ => {}
            }
            if started.elapsed() > timeout {
                bail!(
                    "package {id} still {} after {timeout:?}",
                    v["onboardingState"]
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Status, JSON body (Null when none) and `Location` of a POST.
    async fn post(&self, path: &str, body: &Value) -> anyhow::Result<(u16, Value, Option<String>)> {
        let r = self
            .http
            .post(self.lcm(path))
            .header("x-auth-token", &self.token)
            .header("version", "2.0.0")
            .json(body)
            .send()
            .await
            .with_context(|| format!("POST {path}"))?;
        let status = r.status().as_u16();
        let loc = r
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = r.text().await?;
        Ok((
            status,
            serde_json::from_str(&text).unwrap_or(Value::Null),
            loc,
        ))
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let r = self
            .http
            .get(self.lcm(path))
            .header("x-auth-token", &self.token)
            .header("version", "2.0.0")
            .send()
            .await
            .with_context(|| format!("GET {path}"))?;
        if !r.status().is_success() {
            bail!("GET {path}: {}", r.status());
        }
        Ok(r.json().await?)
    }
}

/// A request body from a file (a spool envelope's `request`) or inline JSON.
fn body(arg: &str) -> anyhow::Result<Value> {
    let text = if arg.trim_start().starts_with('{') {
        arg.to_owned()
    } else {
        std::fs::read_to_string(arg).with_context(|| format!("reading {arg}"))?
    };
    let v: Value = serde_json::from_str(&text).with_context(|| format!("{arg}: not JSON"))?;
    Ok(match v.get("request") {
        Some(r) if v.get("operation").is_some() => r.clone(),
        _ => v,
    })
}

/// Runs one `testbed tacker` command against the testbed whose clouds.yaml is `clouds_yaml`.
pub async fn run(clouds_yaml: &Path, cmd: TackerCmd) -> anyhow::Result<()> {
    let op = Operator::login(clouds_yaml).await?;
    match cmd {
        TackerCmd::Register {
            package,
            request,
            vnfd_id,
        } => {
            let pkg = vnfkeeper_core::package::VnfPackage::load(&package)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let req: vnfkeeper_core::wire::sol003::InstantiateVnfRequest =
                serde_json::from_value(body(&request.to_string_lossy())?)
                    .context("not an InstantiateVnfRequest")?;
            let hot = pkg
                .base_hot(&req.flavour_id)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let nfv = vnfkeeper_core::plan::nfv::instantiate_parameters(&pkg.vnfd, &req)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let mut parameters = Map::new();
            parameters.insert("nfv".into(), nfv);
            let aspects = pkg
                .vnfd
                .aspects
                .iter()
                .map(|(a, asp)| (a.clone(), asp.vdu_deltas.clone()))
                .collect();
            let files = hot.files.keys().cloned().collect::<Vec<_>>();
            let sp = StandInPackage {
                vnfd_id: vnfd_id.clone(),
                template: hot.template,
                files: hot.files,
                parameters,
                aspects,
                mgmt_driver: None,
            };
            let base = op.base.as_deref().context(
                "register: the Tacker stand-in only (a real Tacker onboards packages: onboard)",
            )?;
            let r = op
                .http
                .post(format!("{base}/testbed/tacker/packages"))
                .json(&sp)
                .send()
                .await?;
            if r.status().as_u16() != 201 {
                bail!("register: {} {}", r.status(), r.text().await?);
            }
            println!(
                "registered vnfdId {vnfd_id}: BaseHOT {} with {} nested file(s) {:?}, aspects {:?}",
                hot.top_path,
                files.len(),
                files,
                sp.aspects.keys().collect::<Vec<_>>()
            );
        }
        TackerCmd::Onboard { zip, timeout_secs } => {
            let vnfd = op.onboard(&zip, Duration::from_secs(timeout_secs)).await?;
            println!("{vnfd}");
        }
        TackerCmd::Create { vnfd_id } => {
            let (st, v, _) = op
                .post("/vnf_instances", &json!({"vnfdId": vnfd_id}))
                .await?;
            if st != 201 {
                bail!("POST /vnf_instances: {st} {v}");
            }
            println!("{}", v["id"].as_str().context("no id")?);
        }
        TackerCmd::Run {
            instance,
            action,
            body: b,
            timeout_secs,
            expect,
        } => {
            let path = format!("/vnf_instances/{instance}/{action}");
            let (st, v, loc) = op.post(&path, &body(&b)?).await?;
            if st != 202 {
                bail!("POST {path}: {st} {v}");
            }
            let occ = loc
                .as_deref()
                .and_then(|l| l.rsplit('/').next())
                .context("202 without Location")?
                .to_owned();
            let started = Instant::now();
            let mut last = String::new();
            loop {
                let o = op.get(&format!("/vnf_lcm_op_occs/{occ}")).await?;
                let state = o["operationState"].as_str().unwrap_or("").to_owned();
                if state != last {
                    eprintln!(
                        "  Tacker {} {occ}: {state} ({:.1} s)",
                        o["operation"].as_str().unwrap_or("?"),
                        started.elapsed().as_secs_f64()
                    );
                    last = state.clone();
                }
                match state.as_str() {
                    s if s == expect => break,
                    "COMPLETED" | "FAILED_TEMP" | "FAILED" | "ROLLED_BACK" => {
                        bail!("{action} {occ} ended {state}, not {expect}: {}", o["error"])
                    }
                    _ => {}
                }
                if started.elapsed() > Duration::from_secs(timeout_secs) {
                    bail!("{action} {occ} still {state} after {timeout_secs} s");
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            println!("{occ}");
        }
        TackerCmd::FailOcc { occ } => {
            let r = op
                .http
                .post(op.lcm(&format!("/vnf_lcm_op_occs/{occ}/fail")))
                .header("x-auth-token", &op.token)
                .header("version", "2.0.0")
                .send()
                .await
                .context("POST …/fail")?;
            let status = r.status();
            let v: Value = r.json().await.unwrap_or(Value::Null);
            if !status.is_success() {
                bail!("POST /vnf_lcm_op_occs/{occ}/fail: {status} {v}");
            }
            println!(
                "Tacker op occ {occ}: {}",
                v["operationState"].as_str().unwrap_or("?")
            );
        }
        TackerCmd::ApiVersions => {
            let url = format!("{}/vnflcm/api_versions", op.tacker);
            let r = op
                .http
                .get(&url)
                .header("x-auth-token", &op.token)
                .send()
                .await
                .context("GET /vnflcm/api_versions")?;
            if !r.status().is_success() {
                bail!("GET /vnflcm/api_versions: {}", r.status());
            }
            let v: Value = r.json().await?;
            let versions: Vec<&str> = v["apiVersions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a["version"].as_str())
                .collect();
            println!(
                "{} {}",
                v["uriPrefix"].as_str().unwrap_or("?"),
                versions.join(" ")
            );
        }
        TackerCmd::ShowOcc { occ } => {
            let v = op.get(&format!("/vnf_lcm_op_occs/{occ}")).await?;
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        TackerCmd::Show { instance } => {
            let v = op.get(&format!("/vnf_instances/{instance}")).await?;
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        TackerCmd::Occs { instance } => {
            let v = op
                .get(&format!(
                    "/vnf_lcm_op_occs?filter=(eq,vnfInstanceId,{instance})"
                ))
                .await?;
            for o in v.as_array().into_iter().flatten() {
                println!(
                    "{}  {}  {}",
                    o["id"].as_str().unwrap_or("?"),
                    o["operation"].as_str().unwrap_or("?"),
                    o["operationState"].as_str().unwrap_or("?")
                );
            }
        }
    }
    Ok(())
}
