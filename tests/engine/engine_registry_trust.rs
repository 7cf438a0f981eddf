//! Nodes that trust private registries (cir-k8s-cluster seed, `private_registry_connection_info`)
//! on the testbed (needs root), proven with a real client: the registry VNF is instantiated and
//! an image pushed to it with `skopeo`; the same registry data is also served over TLS (a
//! certificate of a test CA, for `registry.example.com:5443`); the CIR cluster is instantiated
//! with one HTTP entry (the registry VNF) and one HTTPS entry (that CA in the package, the
//! `hosts_string` naming the registry VM, credentials; the TLS registry requires them, htpasswd
//! with bcrypt). On every node `skopeo` pulls the image reading the files vnfkeeper wrote: the
//! insecure registries of `/etc/docker/daemon.json` (turned into a `registries.conf` on the
//! node), `/etc/docker/certs.d/<server>/ca.crt`, `/etc/hosts` and the 0600 `config.json`
//! (`--authfile`; without it the pull is refused, 401). A node whose CA file or insecure entry is
//! removed, or whose `config.json` has a wrong password, fails the same pull; reconcile's probes
//! find that drift and a configuration-only HEAL repairs it, keeping an unrelated `daemon.json` key,
//! restarting docker (a stand-in service) only there, leaving `/etc/hosts` byte-identical. No
//! registry password appears in any remote command, journal row or error. Last, a private
//! `containerd` (Debian's, own root, state and socket) on a node fetches the image with `ctr
//! content fetch --hosts-dir /etc/containerd/certs.d` from both registries (the TLS one served
//! without auth then: `ctr` reads no `config.json`), and fails without the node's `hosts.toml`
//! (HTTP) or its certs.d directory (HTTPS).

use crate::support;
use vnfkeeper_core::model::{LcmOperationType, OpOccId, OperationState, Timestamp, VnfInstanceId};

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use support::bed::{Bed, fast_limits};
use vnfkeeper::intake::spool::Outcome;
use vnfkeeper::reconcile::probe::ProbeSettings;
use vnfkeeper::reconcile::{self, PassKind, PassReport, Reconciler};
use vnfkeeper::remote::{SshConfig, SshRemote};
use vnfkeeper::store::VnfcRow;
use vnfkeeper_core::policy::Policy;

const REGISTRY_VNF: &str = "vnf-cir-registry";
const CLUSTER_VNF: &str = "vnf-cir-k8s-cluster";
const TLS_NAME: &str = "registry.example.com";
const TLS_PORT: u16 = 5443;
/// The registry password of the request: must appear nowhere it is scanned for.
const PASSWORD: &str = "vk-trust-Pw-93c1d";
const IMAGE: &str = "test/hello:1.0";

fn fixture(name: &str) -> Value {
    let bytes = std::fs::read(
        support::repo_root()
            .join("fixtures/requests/good")
            .join(name),
    )
    .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

async fn run(bed: &Bed, body: &Value, packages: &Path) -> (OpOccId, OperationState) {
    let op = match bed.submit_in(&serde_json::to_vec(body).unwrap(), packages) {
        Outcome::Accepted {
            vnf_lcm_op_occ_id, ..
        } => vnf_lcm_op_occ_id,
        other => panic!("not accepted: {other:?}"),
    };
    let state = bed.engine.run(&op).await.unwrap();
    if state != OperationState::Completed {
        bed.print_journal(&op);
        eprintln!("{:?}", bed.error_of(&op));
    }
    (op, state)
}

fn sh(cmd: &str, dir: &Path) {
    let out = Command::new("sh")
        .arg("-ec")
        .arg(cmd)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An htpasswd line of `user` and a bcrypt (`$2b$`) hash of `PASSWORD`, made by Python's
/// `crypt` (libxcrypt) with the password on stdin: never in an argv or the test's output.
fn htpasswd_line(user: &str) -> Vec<u8> {
    use std::io::Write as _;
    let mut child = Command::new("python3")
        .args([
            "-W",
            "ignore",
            "-c",
            "import crypt, sys; pw = sys.stdin.read(); \
             h = crypt.crypt(pw, crypt.mksalt(crypt.METHOD_BLOWFISH)); \
             assert h.startswith('$2b$'); print(sys.argv[1] + ':' + h)",
            user,
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(PASSWORD.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "python3 crypt with bcrypt");
    out.stdout
}

/// `sh -c cmd` as root on `server` (not through SSH, not in its command log): (success, stdout
/// and stderr).
async fn on(bed: &Bed, server: &str, cmd: &str) -> (bool, String) {
    let out = bed.farm.exec(server, cmd).await.unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// A real client pull on `server` of `IMAGE` from `registry`, reading the node's trust files:
/// the insecure registries of `/etc/docker/daemon.json` become a `registries.conf` (`insecure =
/// true`), the CA comes from `/etc/docker/certs.d/<registry>/ca.crt` (skopeo's default certs
/// directory), names resolve through `/etc/hosts`, credentials come from the `config.json`
/// vnfkeeper wrote (`--authfile`: skopeo reads Docker's `auths`; a missing file is no
/// credentials). Returns the pulled manifest's digest, or the client's error.
async fn pull(bed: &Bed, server: &str, registry: &str) -> Result<String, String> {
    let cmd = format!(
        r#"set -e
conf=$(mktemp); dest=$(mktemp -d)
python3 - "$conf" <<'PY'
import json, sys
try:
    regs = json.load(open("/etc/docker/daemon.json")).get("insecure-registries") or []
except (OSError, ValueError):
    regs = []
with open(sys.argv[1], "w") as f:
    for r in regs:
        f.write('[[registry]]\nlocation = "%s"\ninsecure = true\n\n' % r)
PY
skopeo --registries-conf "$conf" copy -q --authfile /root/.docker/config.json \
  docker://{registry}/{IMAGE} "dir:$dest"
skopeo --registries-conf "$conf" inspect --format '{{{{.Digest}}}}' "dir:$dest"
rm -rf "$conf" "$dest""#
    );
    match on(bed, server, &cmd).await {
        (true, out) => Ok(out.lines().last().unwrap_or("").trim().to_owned()),
        (false, out) => Err(out),
    }
}

/// A containerd client on `server`: `ctr content fetch` of `IMAGE` from `registry` through the
/// private containerd of [`start_containerd`], with `--hosts-dir /etc/containerd/certs.d` (the
/// node's `hosts.toml` and CA as vnfkeeper wrote them), then the manifest digest `want` must be
/// in its content store. `Err`: the client's output.
async fn ctr_fetch(bed: &Bed, server: &str, registry: &str, want: &str) -> Result<(), String> {
    let cmd = format!(
        "ctr --address {CTRD}/c.sock content fetch --hosts-dir /etc/containerd/certs.d \
         {registry}/{IMAGE} >{CTRD}/fetch.log 2>&1; rc=$?; tail -n 3 {CTRD}/fetch.log; \
         [ $rc = 0 ] && ctr --address {CTRD}/c.sock content ls -q"
    );
    match on(bed, server, &cmd).await {
        (true, out) if out.lines().any(|l| l.trim() == want) => Ok(()),
        (_, out) => Err(out),
    }
}

/// Where [`start_containerd`] keeps a private containerd's root, state, socket and pid.
const CTRD: &str = "/var/lib/vk-ctrd";

/// Starts Debian's `containerd` on `server` (inside its namespaces) with its own root, state
/// and socket under [`CTRD`] and the CRI plugin disabled; waits until `ctr version` answers.
async fn start_containerd(bed: &Bed, server: &str) {
    assert!(
        Path::new("/usr/bin/containerd").exists() && Path::new("/usr/bin/ctr").exists(),
        "Debian's containerd is not installed (scripts/test installs it)"
    );
    let (ok, out) = on(bed, server, &format!("rm -rf {CTRD}; mkdir -p {CTRD}")).await;
    assert!(ok, "{out}");
    let conf = format!(
        "version = 2\nroot = \"{CTRD}/root\"\nstate = \"{CTRD}/state\"\n\
         disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\n[grpc]\n  address = \
         \"{CTRD}/c.sock\"\n\n[ttrpc]\n  address = \"{CTRD}/c.sock.ttrpc\"\n"
    );
    bed.farm
        .write_file(server, &format!("{CTRD}/config.toml"), conf.as_bytes())
        .await
        .unwrap();
    let (ok, out) = on(
        bed,
        server,
        &format!(
            "setsid -f sh -c 'echo $$ > {CTRD}/pid; exec containerd --config {CTRD}/config.toml' \
             >{CTRD}/log 2>&1 </dev/null"
        ),
    )
    .await;
    assert!(ok, "{out}");
    for _ in 0..100 {
        if on(bed, server, &format!("ctr --address {CTRD}/c.sock version"))
            .await
            .0
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = text(bed, server, &format!("{CTRD}/log")).await;
    panic!("containerd did not start on {server}: {log}");
}

fn nodes(bed: &Bed) -> Vec<VnfcRow> {
    bed.db
        .with(|s| s.reader().vnfcs(&VnfInstanceId::from(CLUSTER_VNF)))
        .unwrap()
        .into_iter()
        .filter(|v| v.vdu_id == "masterNode" || v.vdu_id == "workerNode")
        .collect()
}

async fn text(bed: &Bed, server: &str, path: &str) -> String {
    String::from_utf8(bed.farm.read_file(server, path).await.unwrap_or_default()).unwrap()
}

async fn restarts(bed: &Bed, server: &str) -> usize {
    text(bed, server, "/var/lib/testbed/systemctl.log")
        .await
        .lines()
        .filter(|l| *l == "systemctl restart docker")
        .count()
}

fn trust_of(bed: &Bed) -> Vec<vnfkeeper_core::flavour::trust::NodeTrust> {
    let one = bed
        .db
        .with(|s| s.reader().registry_trust(&VnfInstanceId::from(CLUSTER_VNF)))
        .unwrap();
    // `status` reads the whole fleet's at once: the same rows in the same order.
    let mut all = bed.db.with(|s| s.reader().registry_trust_all()).unwrap();
    assert_eq!(all.remove(CLUSTER_VNF).unwrap_or_default(), one);
    one
}

fn at(secs: i64) -> Timestamp {
    Timestamp(chrono::Utc::now() + chrono::Duration::seconds(secs))
}

async fn pass(
    bed: &Bed,
    rec: &Reconciler<vnfkeeper::cloud::OpenStackCloud>,
    now: Timestamp,
) -> PassReport {
    let snap = bed
        .db
        .with(|s| reconcile::snapshot(s.reader(), None))
        .unwrap();
    let mut report = rec.evaluate(&snap, PassKind::Full, now).await;
    bed.db
        .write(|tx| reconcile::record(tx, &mut report, now))
        .unwrap();
    report
}

/// Every log record of the test process (INFO and above, as the daemon logs), for the scan.
static LOG: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());

struct LogBuf;

impl std::io::Write for LogBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        LOG.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn nodes_pull_from_http_and_https_registries_and_trust_drift_is_repaired() {
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(|| LogBuf)
        .init();
    let bed = Bed::new("vkt", 78, fast_limits()).await;
    let repo = support::repo_root();

    // The registry VNF, and an image pushed to it by a real client.
    let (_, state) = run(
        &bed,
        &fixture("cir-k8s-cluster.10-registry-instantiate.json"),
        &repo,
    )
    .await;
    assert_eq!(state, OperationState::Completed);
    let reg = bed
        .db
        .with(|s| s.reader().vnfcs(&VnfInstanceId::from(REGISTRY_VNF)))
        .unwrap()
        .remove(0);
    let ip = reg.ip_address.clone().unwrap();
    let reg_server = reg.server_id.clone().unwrap();
    let archive =
        repo.join("fixtures/packages/cir-private-registry/Files/images/private_registry.tar");
    let out = Command::new("skopeo")
        .args([
            "copy",
            "-q",
            "--dest-tls-verify=false",
            &format!("docker-archive:{}", archive.display()),
            &format!("docker://{ip}:5000/{IMAGE}"),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = Command::new("skopeo")
        .args([
            "inspect",
            "--tls-verify=false",
            "--format",
            "{{.Digest}}",
            &format!("docker://{ip}:5000/{IMAGE}"),
        ])
        .output()
        .unwrap();
    let pushed = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(pushed.starts_with("sha256:"), "{pushed}");

    // The same registry data served over TLS on the registry VM: a test CA signs a certificate
    // for registry.example.com; the CIR package (a copy) carries that CA.
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    sh(
        &format!(
            "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 \
               -subj /CN=vnfkeeper-test-ca 2>/dev/null
             openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr \
               -subj /CN={TLS_NAME} 2>/dev/null
             printf 'subjectAltName=DNS:{TLS_NAME}\\n' > ext
             openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt \
               -days 2 -extfile ext 2>/dev/null
             mkdir -p pkgs/fixtures/packages
             cp -a {}/fixtures/packages/cir-k8s-cluster pkgs/fixtures/packages/
             cp ca.crt pkgs/fixtures/packages/cir-k8s-cluster/Files/registries/ca.crt",
            repo.display()
        ),
        w,
    );
    let (ok, out) = on(&bed, &reg_server, "mkdir -p /etc/vk-tls").await;
    assert!(ok, "{out}");
    for f in ["srv.crt", "srv.key"] {
        bed.farm
            .write_file(
                &reg_server,
                &format!("/etc/vk-tls/{f}"),
                &std::fs::read(w.join(f)).unwrap(),
            )
            .await
            .unwrap();
    }
    // It requires authentication: an htpasswd file with the request's user and a bcrypt hash of
    // its password (Python's crypt, the password on stdin: in no argv, no output).
    bed.farm
        .write_file(
            &reg_server,
            "/etc/vk-tls/htpasswd",
            &htpasswd_line("user01"),
        )
        .await
        .unwrap();
    let conf = format!(
        "version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem: {{rootdirectory: \
         /var/lib/vnfkeeper/registry}}\nauth:\n  htpasswd:\n    realm: vk-test\n    \
         path: /etc/vk-tls/htpasswd\nhttp:\n  addr: 0.0.0.0:{TLS_PORT}\n  tls:\n    \
         certificate: /etc/vk-tls/srv.crt\n    key: /etc/vk-tls/srv.key\n"
    );
    bed.farm
        .write_file(&reg_server, "/etc/vk-tls/config.yml", conf.as_bytes())
        .await
        .unwrap();
    let (ok, out) = on(
        &bed,
        &reg_server,
        "setsid -f sh -c 'echo $$ > /run/vk-tls.pid; \
         exec /usr/bin/docker-registry serve /etc/vk-tls/config.yml' \
         >/var/log/vk-tls.log 2>&1 </dev/null",
    )
    .await;
    assert!(ok, "{out}");
    let tls_url = format!("https://{TLS_NAME}:{TLS_PORT}/v2/");
    let resolve = format!("{TLS_NAME}:{TLS_PORT}:{ip}");
    let ca = w.join("ca.crt").display().to_string();
    let mut code = String::new();
    for _ in 0..50 {
        let out = Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "-m",
                "2",
                "--cacert",
                &ca,
                "--resolve",
                &resolve,
                &tls_url,
            ])
            .output()
            .unwrap();
        code = String::from_utf8_lossy(&out.stdout).into_owned();
        if code != "000" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        code, "401",
        "the TLS registry answers {tls_url}, and only with credentials"
    );

    // The CIR cluster: one HTTP entry (the registry VNF), one HTTPS entry (the TLS registry by
    // name, its address in hosts_string, credentials).
    let http = format!("{ip}:5000");
    let https = format!("{TLS_NAME}:{TLS_PORT}");
    let mut req = fixture("cir-k8s-cluster.20-instantiate.json");
    req["request"]["additionalParams"]["k8s_cluster_installation_param"]["private_registry_connection_info"] = json!([
        {"connection_type": "0", "server": http},
        {"connection_type": "1", "server": https, "username": "user01", "password": PASSWORD,
         "certificate_path": "Files/registries/ca.crt", "hosts_string": format!("{ip} {TLS_NAME}")}
    ]);
    let pkgs = w.join("pkgs");
    let (inst_op, state) = run(&bed, &req, &pkgs).await;
    assert_eq!(state, OperationState::Completed);
    let rows = nodes(&bed);
    assert!(rows.len() >= 2, "{rows:?}");

    let mut hosts_before = Vec::new();
    for r in &rows {
        let s = r.server_id.clone().unwrap();
        let daemon: Value =
            serde_json::from_str(&text(&bed, &s, "/etc/docker/daemon.json").await).unwrap();
        assert_eq!(daemon, json!({"insecure-registries": [http]}), "{}", r.id);
        assert_eq!(
            pull(&bed, &s, &http).await,
            Ok(pushed.clone()),
            "{} http",
            r.id
        );
        assert_eq!(
            pull(&bed, &s, &https).await,
            Ok(pushed.clone()),
            "{} https",
            r.id
        );
        let hosts = text(&bed, &s, "/etc/hosts").await;
        assert_eq!(
            hosts.matches(&format!("{ip} {TLS_NAME}")).count(),
            1,
            "{hosts}"
        );
        let (ok, out) = on(
            &bed,
            &s,
            "stat -c %a /root/.docker/config.json; readlink /var/lib/kubelet/config.json; \
             cat /etc/containerd/certs.d/*/hosts.toml",
        )
        .await;
        assert!(ok, "{out}");
        assert!(out.starts_with("600\n/root/.docker/config.json\n"), "{out}");
        assert!(
            out.contains(&format!("server = \"http://{http}\"")),
            "{out}"
        );
        assert!(
            out.contains(&format!("ca = \"/etc/containerd/certs.d/{https}/ca.crt\"")),
            "{out}"
        );
        let auth: Value =
            serde_json::from_str(&text(&bed, &s, "/root/.docker/config.json").await).unwrap();
        assert!(auth["auths"][&https]["auth"].is_string(), "{}", r.id);
        assert_eq!(restarts(&bed, &s).await, 0, "docker is not a service yet");
        hosts_before.push((s, hosts));
    }
    // The HTTPS registry requires the credentials: without the node's config.json the same pull
    // is refused (401, "unauthorized").
    let m = rows[0].server_id.clone().unwrap();
    let (ok, out) = on(
        &bed,
        &m,
        "mv /root/.docker/config.json /root/.docker/config.json.away",
    )
    .await;
    assert!(ok, "{out}");
    let err = pull(&bed, &m, &https).await.unwrap_err();
    assert!(err.contains("unauthorized"), "{err}");
    eprintln!(
        "refused as expected: {}",
        err.trim().lines().last().unwrap_or("")
    );
    let (ok, out) = on(
        &bed,
        &m,
        "mv /root/.docker/config.json.away /root/.docker/config.json",
    )
    .await;
    assert!(ok, "{out}");
    assert_eq!(
        pull(&bed, &m, &https).await,
        Ok(pushed.clone()),
        "auth back"
    );

    // The store knows both registries (type, CA fingerprint) and when each node's trust was
    // applied and verified.
    let ca_sha = support::Install::sha256_hex(&std::fs::read(w.join("ca.crt")).unwrap());
    let trust0 = trust_of(&bed);
    assert_eq!(trust0.len(), 2 * rows.len(), "{trust0:?}");
    for n in &trust0 {
        assert!(n.applied_at.is_some() && n.verified_at.is_some(), "{n:?}");
        let want = (n.registry.server == https).then(|| ca_sha.clone());
        assert_eq!(n.registry.ca_sha256, want, "{n:?}");
    }

    // Drift behind vnfkeeper's back on one node (docker now a service there, a stand-in): the CA
    // file removed, then the HTTP registry dropped from daemon.json (an unrelated key added),
    // then the hosts line lost. Each fails the same pull.
    let target = rows.iter().find(|r| r.vdu_id == "workerNode").unwrap();
    let ts = target.server_id.clone().unwrap();
    let (ok, out) = on(&bed, &ts, "systemctl enable docker").await;
    assert!(ok, "{out}");
    let token = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(format!("user01:{PASSWORD}"))
    };
    let wrong = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode("user01:not-the-password")
    };
    bed.farm
        .write_file(
            &ts,
            "/root/.docker/config.json",
            json!({"auths": {&https: {"auth": wrong}}})
                .to_string()
                .as_bytes(),
        )
        .await
        .unwrap();
    let err = pull(&bed, &ts, &https).await.unwrap_err();
    assert!(err.contains("unauthorized"), "{err}");
    eprintln!(
        "refused as expected: {}",
        err.trim().lines().last().unwrap_or("")
    );
    let (ok, out) = on(&bed, &ts, &format!("rm /etc/docker/certs.d/{https}/ca.crt")).await;
    assert!(ok, "{out}");
    let err = pull(&bed, &ts, &https).await.unwrap_err();
    assert!(err.contains("certificate"), "{err}");
    bed.farm
        .write_file(
            &ts,
            "/etc/docker/daemon.json",
            b"{\"log-driver\": \"json-file\", \"insecure-registries\": []}\n",
        )
        .await
        .unwrap();
    let err = pull(&bed, &ts, &http).await.unwrap_err();
    assert!(err.contains("https") || err.contains("HTTP"), "{err}");
    let (ok, out) = on(&bed, &ts, &format!("sed -i '/ {TLS_NAME}$/d' /etc/hosts")).await;
    assert!(ok, "{out}");

    // Reconcile's probes find the drift; a configuration-only HEAL of that node repairs it.
    let policy = Policy::default();
    let rec = Reconciler::new(
        bed.cloud.clone(),
        Arc::new(SshRemote::new(SshConfig::default())),
        policy.clone(),
        ProbeSettings {
            timeout: Duration::from_secs(30),
            max_parallel_hosts: 16,
        },
    );
    let t0 = policy.startup_grace.as_secs() as i64 + 1;
    let drift_pass_at = at(t0);
    let r = pass(&bed, &rec, drift_pass_at).await;
    assert_eq!(r.started.len(), 1, "{r:?}");
    // The changed password is drift of its own: trust.auth's probe compares digests.
    let why = format!("{:?}", r.outcomes);
    assert!(
        why.contains(&format!(
            "trust.auth: needed: /root/.docker/config.json: out-of-date auths {https}(changed)"
        )),
        "{why}"
    );
    let heal = bed
        .db
        .with(|s| s.reader().operations(Some(CLUSTER_VNF)))
        .unwrap()
        .into_iter()
        .find(|o| o.operation == LcmOperationType::Heal)
        .unwrap();
    let (params, _) = bed
        .db
        .with(|s| s.reader().operation_params(&heal.id))
        .unwrap()
        .unwrap();
    let params: Value = serde_json::from_str(&params).unwrap();
    assert_eq!(params["vnfcInstanceId"], json!([target.id]), "{params}");
    assert_eq!(params["additionalParams"]["configuration_only"], true);
    assert_eq!(
        bed.engine.run(&heal.id).await.unwrap(),
        OperationState::Completed,
        "{:?}",
        bed.error_of(&heal.id)
    );
    bed.print_journal(&heal.id);
    let journal = bed.db.with(|s| s.reader().journal(&heal.id)).unwrap();
    assert!(journal.iter().all(|j| !j.name.starts_with("heat.")));
    let install = journal.iter().find(|j| j.name == "k8s.install").unwrap();
    assert!(
        install
            .detail
            .as_deref()
            .unwrap_or("")
            .starts_with("already done"),
        "the node is not reinstalled: {install:?}"
    );

    // The changed credentials were found by the check's digest and written again.
    let auth_step = journal
        .iter()
        .find(|j| j.name == "trust.auth")
        .expect("trust.auth ran");
    let detail = auth_step.detail.as_deref().unwrap_or("");
    assert!(!detail.starts_with("already done"), "{detail}");
    let auth: Value =
        serde_json::from_str(&text(&bed, &ts, "/root/.docker/config.json").await).unwrap();
    assert!(
        auth["auths"][&https]["auth"].as_str() == Some(token.as_str()),
        "the request's credentials are back (value not shown)"
    );

    // Repaired: the unrelated key kept, the registry back, docker restarted once (there only),
    // /etc/hosts byte-identical to the first run's, both pulls work again.
    let daemon: Value =
        serde_json::from_str(&text(&bed, &ts, "/etc/docker/daemon.json").await).unwrap();
    assert_eq!(
        daemon,
        json!({"log-driver": "json-file", "insecure-registries": [http]})
    );
    assert_eq!(restarts(&bed, &ts).await, 1);
    let trust1 = trust_of(&bed);
    for (a, b) in trust0.iter().zip(&trust1) {
        assert_eq!(a.vnfc_instance_id, b.vnfc_instance_id);
        if a.vnfc_instance_id.as_deref() == Some(target.id.as_str()) {
            assert!(b.applied_at > a.applied_at, "repaired: {a:?} -> {b:?}");
        } else {
            // Not touched by the repair; only the pass that found the drift verified it.
            assert_eq!(b.applied_at, a.applied_at, "another node is not touched");
            assert_eq!(
                b.verified_at.map(|t| t.to_rfc3339()),
                Some(drift_pass_at.to_rfc3339())
            );
        }
    }
    for (s, hosts) in &hosts_before {
        assert_eq!(&text(&bed, s, "/etc/hosts").await, hosts, "{s}");
        assert_eq!(pull(&bed, s, &http).await, Ok(pushed.clone()), "{s} http");
        assert_eq!(pull(&bed, s, &https).await, Ok(pushed.clone()), "{s} https");
    }

    // A second run of the node step on every node (an operator's configuration-only HEAL):
    // nothing changes — /etc/hosts byte-identical, no restart.
    let ids: Vec<String> = rows.iter().map(|r| r.id.to_string()).collect();
    let again = json!({
        "operation": "HEAL", "vnfInstanceId": CLUSTER_VNF, "requestId": "vk-trust-again",
        "request": {"vnfcInstanceId": ids, "additionalParams": {"configuration_only": true}}
    });
    let (again_op, state) = run(&bed, &again, &repo).await;
    assert_eq!(state, OperationState::Completed);
    for j in bed.db.with(|s| s.reader().journal(&again_op)).unwrap() {
        if j.name.starts_with("trust.") {
            assert!(
                j.detail
                    .as_deref()
                    .unwrap_or("")
                    .starts_with("already done"),
                "{j:?}"
            );
        }
    }
    for (s, hosts) in &hosts_before {
        assert_eq!(&text(&bed, s, "/etc/hosts").await, hosts, "{s}");
        let want = usize::from(*s == ts);
        assert_eq!(restarts(&bed, s).await, want, "{s}");
    }
    // A reconcile pass whose trust probes all pass records the nodes as verified at its time.
    let t_last = at(t0 + 2 * policy.grace.as_secs() as i64 + 20);
    let r = pass(&bed, &rec, t_last).await;
    assert!(r.started.is_empty(), "{r:?}");
    assert_eq!(r.trust_verified.len(), rows.len(), "{r:?}");
    let trust2 = trust_of(&bed);
    for n in &trust2 {
        assert_eq!(
            n.verified_at.map(|t| t.to_rfc3339()),
            Some(t_last.to_rfc3339()),
            "{n:?}"
        );
    }
    for (a, b) in trust1.iter().zip(&trust2) {
        assert_eq!(
            b.applied_at, a.applied_at,
            "nothing applied the second time"
        );
        assert!(
            b.verified_at > a.verified_at,
            "verified again: {a:?} -> {b:?}"
        );
    }

    // The audit view answers "which nodes trust registry X"; `vnfkeeper status` shows it.
    let db_path = bed.dir.path().join("state.db");
    let conn =
        rusqlite::Connection::open_with_flags(&db_path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let mut st = conn
        .prepare("SELECT vnfc_instance_id FROM registry_nodes WHERE server = ?1 ORDER BY 1")
        .unwrap();
    let trusting: Vec<String> = st
        .query_map([&https], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut ids_sorted = ids.clone();
    ids_sorted.sort();
    assert_eq!(trusting, ids_sorted);
    drop(st);
    drop(conn);
    let cfg = bed.dir.path().join("vnfkeeper.toml");
    std::fs::write(
        &cfg,
        format!(
            "spool_dir = \"{}\"\ndatabase = \"{}\"\n",
            bed.dir.path().join("spool").display(),
            db_path.display()
        ),
    )
    .unwrap();
    let status = |json: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_vnfkeeper"));
        c.arg("status");
        if json {
            c.arg("--json");
        }
        let out = c
            .arg("--config")
            .arg(&cfg)
            .env_remove("JOURNAL_STREAM")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let list: Value = serde_json::from_str(&status(true)).unwrap();
    let inst = list
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == CLUSTER_VNF)
        .unwrap();
    let regs = inst["registries"].as_array().unwrap();
    assert_eq!(regs.len(), 2, "{inst}");
    let tls = regs.iter().find(|r| r["server"] == https.as_str()).unwrap();
    assert_eq!(tls["connectionType"], "HTTPS");
    assert_eq!(tls["caSha256"], ca_sha.as_str());
    assert_eq!(tls["nodes"].as_array().unwrap().len(), rows.len(), "{tls}");
    let plain = regs.iter().find(|r| r["server"] == http.as_str()).unwrap();
    assert_eq!(plain["connectionType"], "HTTP");
    assert!(plain["caSha256"].is_null());
    let table = status(false);
    assert!(
        table.contains("REGISTRY") && table.contains(&https),
        "{table}"
    );

    // SCALE_OUT: the new worker trusts both registries; a whole-VNF HEAL: every rebuilt node.
    let before: Vec<String> = nodes(&bed).iter().map(|r| r.id.to_string()).collect();
    let (scale_op, state) = run(&bed, &fixture("cir-k8s-cluster.30-scale-out.json"), &repo).await;
    assert_eq!(state, OperationState::Completed);
    let added: Vec<VnfcRow> = nodes(&bed)
        .into_iter()
        .filter(|r| !before.iter().any(|b| r.id == *b))
        .collect();
    assert_eq!(added.len(), 1, "{added:?}");
    let new_server = added[0].server_id.clone().unwrap();
    assert_eq!(
        pull(&bed, &new_server, &http).await,
        Ok(pushed.clone()),
        "new worker http"
    );
    assert_eq!(
        pull(&bed, &new_server, &https).await,
        Ok(pushed.clone()),
        "new worker https"
    );
    let (heal_all_op, state) =
        run(&bed, &fixture("cir-k8s-cluster.50-heal-entire.json"), &repo).await;
    assert_eq!(state, OperationState::Completed);
    let healed = nodes(&bed);
    for r in &healed {
        let s = r.server_id.clone().unwrap();
        assert!(
            hosts_before.iter().all(|(old, _)| *old != s) && s != new_server,
            "rebuilt"
        );
        assert_eq!(
            pull(&bed, &s, &http).await,
            Ok(pushed.clone()),
            "{} healed http",
            r.id
        );
        assert_eq!(
            pull(&bed, &s, &https).await,
            Ok(pushed.clone()),
            "{} healed https",
            r.id
        );
    }

    // No registry password (nor its auth token) in any remote command, journal row, error or
    // log record of the engine.
    let mut scanned = 0;
    let servers: Vec<String> = rows
        .iter()
        .chain(added.iter())
        .chain(healed.iter())
        .filter_map(|r| r.server_id.clone())
        .collect();
    for s in &servers {
        for line in bed.farm.command_log(s).await.unwrap() {
            assert!(!line.contains(PASSWORD) && !line.contains(&token), "{line}");
            scanned += 1;
        }
    }
    for op in [&inst_op, &heal.id, &again_op, &scale_op, &heal_all_op] {
        for j in bed.db.with(|s| s.reader().journal(op)).unwrap() {
            let d = j.detail.unwrap_or_default();
            assert!(!d.contains(PASSWORD) && !d.contains(&token), "{d}");
            scanned += 1;
        }
        let e = bed.error_of(op).unwrap_or_default();
        assert!(!e.contains(PASSWORD), "{e}");
    }
    let logs = String::from_utf8(LOG.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("step done"),
        "the engine's log records were captured"
    );
    assert!(!logs.contains(PASSWORD) && !logs.contains(&token));
    scanned += logs.lines().count();
    assert!(scanned > 20, "{scanned} lines scanned");

    // A containerd client reads the hosts.toml and CA vnfkeeper wrote. `ctr` reads no Docker
    // config.json (its only credential source is --user on the command line), so the TLS
    // registry is served again without auth, same name, port, certificate and data.
    let (ok, out) = on(&bed, &reg_server, "kill \"$(cat /run/vk-tls.pid)\"").await;
    assert!(ok, "{out}");
    let open_conf = conf.replace(
        "auth:\n  htpasswd:\n    realm: vk-test\n    path: /etc/vk-tls/htpasswd\n",
        "",
    );
    assert!(!open_conf.contains("htpasswd"));
    bed.farm
        .write_file(&reg_server, "/etc/vk-tls/config.yml", open_conf.as_bytes())
        .await
        .unwrap();
    let mut code = String::new();
    for _ in 0..50 {
        let (ok, out) = on(
            &bed,
            &reg_server,
            "[ -e /proc/\"$(cat /run/vk-tls.pid)\" ] || setsid -f sh -c 'echo $$ > /run/vk-tls.pid; \
             exec /usr/bin/docker-registry serve /etc/vk-tls/config.yml' \
             >/var/log/vk-tls.log 2>&1 </dev/null",
        )
        .await;
        assert!(ok, "{out}");
        let out = Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "-m",
                "2",
                "--cacert",
                &ca,
                "--resolve",
                &resolve,
                &tls_url,
            ])
            .output()
            .unwrap();
        code = String::from_utf8_lossy(&out.stdout).into_owned();
        if code == "200" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(code, "200", "the TLS registry without auth");
    let c = healed[0].server_id.clone().unwrap();
    start_containerd(&bed, &c).await;
    assert_eq!(
        ctr_fetch(&bed, &c, &http, &pushed).await,
        Ok(()),
        "ctr http"
    );
    assert_eq!(
        ctr_fetch(&bed, &c, &https, &pushed).await,
        Ok(()),
        "ctr https"
    );
    // Without the node's hosts.toml the HTTP registry is tried over HTTPS; without its
    // certs.d directory (hosts.toml and CA) the TLS registry's certificate is not trusted.
    let (ok, out) = on(
        &bed,
        &c,
        &format!("mv /etc/containerd/certs.d/{http} /root/ctrd-http.away"),
    )
    .await;
    assert!(ok, "{out}");
    let err = ctr_fetch(&bed, &c, &http, &pushed).await.unwrap_err();
    assert!(err.contains("HTTP response to HTTPS client"), "{err}");
    eprintln!(
        "refused as expected: {}",
        err.trim().lines().last().unwrap_or("")
    );
    let (ok, out) = on(
        &bed,
        &c,
        &format!("mv /etc/containerd/certs.d/{https} /root/ctrd-https.away"),
    )
    .await;
    assert!(ok, "{out}");
    let err = ctr_fetch(&bed, &c, &https, &pushed).await.unwrap_err();
    assert!(err.contains("certificate"), "{err}");
    eprintln!(
        "refused as expected: {}",
        err.trim().lines().last().unwrap_or("")
    );
    let (ok, out) = on(
        &bed,
        &c,
        &format!(
            "mv /root/ctrd-http.away /etc/containerd/certs.d/{http}; \
             mv /root/ctrd-https.away /etc/containerd/certs.d/{https}"
        ),
    )
    .await;
    assert!(ok, "{out}");
    assert_eq!(
        ctr_fetch(&bed, &c, &http, &pushed).await,
        Ok(()),
        "ctr http back"
    );
    assert_eq!(
        ctr_fetch(&bed, &c, &https, &pushed).await,
        Ok(()),
        "ctr https back"
    );
    let (ok, out) = on(
        &bed,
        &c,
        &format!(
            "p=$(cat {CTRD}/pid); kill $p; for i in $(seq 50); do [ -e /proc/$p ] || break; \
             sleep 0.1; done; [ ! -e /proc/$p ] && rm -rf {CTRD}"
        ),
    )
    .await;
    assert!(ok, "containerd stopped: {out}");

    let (ok, out) = on(&bed, &reg_server, "kill \"$(cat /run/vk-tls.pid)\"").await;
    assert!(ok, "{out}");
}
