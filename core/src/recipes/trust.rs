//! Steps of the node trust of private registries (`private_registry_connection_info`, cir spec);
//! what they hold is decided in [`crate::flavour::trust`]. Source of the sequence: Tacker
//! `samples/mgmt_driver/kubernetes/kubernetes_mgmt.py` (`_connect_to_private_registries`) and
//! its install script's `set_docker_proxy`, with the overwritten `daemon.json`, the appended
//! `/etc/hosts` lines and the password on the `docker login` command line removed.

use std::time::Duration;

use super::{Late, Step, StepKind, Upload};
use crate::wire::Secret;

fn step(
    kind: StepKind,
    host: &str,
    args: Vec<String>,
    uploads: Vec<Upload>,
    late: Vec<Late>,
) -> Step {
    Step {
        kind,
        host: host.into(),
        args,
        uploads,
        late,
        sudo: true,
        timeout: Duration::from_secs(120),
    }
}

/// `trust.observe`: reports the digest of the node's `daemon_json` and its
/// `insecure-registries` (no other key) in its verdict line (read by
/// [`crate::flavour::trust::parse_observed`]); changes nothing.
pub fn observe(host: &str, daemon_json: &str) -> Step {
    step(
        StepKind::TrustObserve,
        host,
        vec![daemon_json.into()],
        Vec::new(),
        Vec::new(),
    )
}

/// `trust.docker`: every server of `insecure` in `insecure-registries` of `daemon_json`; apply
/// sets the keys of `merged` (a JSON object, uploaded to `staged`, mode 0600) in the file, every
/// other key kept, when the file still has the SHA-256 `observed` (or is `absent` as observed),
/// then restarts docker. `merged` `None`: the
/// check only (a reconcile probe).
pub fn docker(
    host: &str,
    daemon_json: &str,
    staged: &str,
    merged: Option<(Vec<u8>, String)>,
    insecure: &[String],
) -> Step {
    let (staged, observed, uploads) = match merged {
        Some((bytes, observed)) => (
            staged.to_owned(),
            observed,
            vec![Upload {
                path: staged.to_owned(),
                bytes,
                mode: 0o600,
            }],
        ),
        None => (String::new(), String::new(), Vec::new()),
    };
    let mut args = vec![daemon_json.to_owned(), staged, observed];
    args.extend(insecure.iter().cloned());
    step(StepKind::TrustDocker, host, args, uploads, Vec::new())
}

/// One registry's files for [`files`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryFiles {
    /// `host[:port]`, the directory name under `certs.d`.
    pub server: String,
    /// The containerd `hosts.toml` text (no final newline).
    pub hosts_toml: String,
    /// The CA certificate (HTTPS with `certificate_path`); `None` otherwise.
    pub ca: Option<Vec<u8>>,
}

/// `trust.files`: per registry, containerd's `hosts.toml` and (with a CA) the CA as Docker's and
/// containerd's `ca.crt`; each CA is uploaded to `<stage_dir>/<server>.crt` and checked by its
/// SHA-256. `with_uploads` false: the check only (a reconcile probe; the CA digests still come
/// from the package).
pub fn files(host: &str, stage_dir: &str, regs: &[RegistryFiles], with_uploads: bool) -> Step {
    let mut args = vec![stage_dir.to_owned()];
    let mut uploads = Vec::new();
    for r in regs {
        args.push(r.server.clone());
        match &r.ca {
            Some(bytes) => {
                args.push(crate::digest::sha256_hex(bytes));
                if with_uploads {
                    uploads.push(Upload {
                        path: format!("{stage_dir}/{}.crt", r.server),
                        bytes: bytes.clone(),
                        mode: 0o644,
                    });
                }
            }
            None => args.push("-".into()),
        }
        args.push(r.hosts_toml.clone());
    }
    step(StepKind::TrustFiles, host, args, uploads, Vec::new())
}

/// `trust.hosts`: the block owned by `owner` in `hosts_file` is exactly `block`.
pub fn hosts(host: &str, hosts_file: &str, owner: &str, block: &str) -> Step {
    step(
        StepKind::TrustHosts,
        host,
        vec![hosts_file.into(), owner.into(), block.into()],
        Vec::new(),
        Vec::new(),
    )
}

/// `trust.auth`: Docker's client configuration `config` (a [`Late::RegistryAuth`], written over
/// SFTP with mode 0600 when the check finds it out of date) holds, for every server of `checks`,
/// an `auth` token whose digest ([`crate::flavour::trust::auth_digest`], computed on the node) is
/// the one given (salted with `owner`, the vnfInstanceId), and is linked for the kubelet.
/// Arguments: `config`, `owner`, then server and digest pairs — never a token or password.
pub fn auth(host: &str, config: &str, owner: &str, checks: &[(String, Secret<String>)]) -> Step {
    let mut args = vec![config.to_owned(), owner.to_owned()];
    for (server, digest) in checks {
        args.push(server.clone());
        args.push(digest.expose().clone());
    }
    step(
        StepKind::TrustAuth,
        host,
        args,
        Vec::new(),
        vec![Late::RegistryAuth {
            path: config.into(),
        }],
    )
}
