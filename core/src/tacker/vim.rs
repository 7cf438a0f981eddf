//! The cluster as a Kubernetes VIM in Tacker's NFVO (Tacker's v1 API, `/v1.0/vims`), the
//! decisions: the body that registers it the way Tacker's sample Kubernetes MgmtDriver does
//! (type `kubernetes`, `auth_url` the API endpoint, `auth_cred` with `bearer_token` and
//! `ssl_ca_cert`, `vim_project.name` empty), and what a listing of Tacker's VIMs by name means
//! for registering or removing ours.
//!
//! Tacker 16.0.0's answers, as its v1 API gives them: `POST /v1.0/vims` 201 `{"vim": {…}}`
//! (`auth_cred` masked); `GET /v1.0/vims?name=N` 200 `{"vims": [{…}]}`; `DELETE
//! /v1.0/vims/{id}` 204. Errors carry `{"TackerError": {"type", "message", "detail"}}`: a second
//! VIM of the same name is 409 `DuplicateEntity`; an unknown id is **500**
//! `VimNotFoundException` (not 404: the exception is not one of the v1 API's mapped faults), so a
//! removal lists by name first and treats that answer as "already gone"; a bearer token the
//! cluster refuses is 500 `VimUnauthorizedException` (Tacker's Kubernetes VIM driver asks the
//! cluster for its API versions and namespaces before it stores the VIM).
//!
//! Pure: the `vnfkeeper` crate sends and receives; the bearer token is handed in as a
//! [`Secret`] and the body comes back as one.

use serde::Deserialize;
use serde_json::json;

use crate::wire::Secret;

/// What vnfkeeper registers: the kept Kubernetes VIM's facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VimRegistration {
    /// The VIM's name (`vim_name`, else `kubernetes_vim_<vnfInstanceId>`).
    pub name: String,
    /// The cluster's API endpoint, `https://<address>:<port>` (Tacker's `auth_url`).
    pub auth_url: String,
    /// The cluster CA certificate, PEM; `None` when the endpoint is a floating IP (Tacker's
    /// driver then registers without `ssl_ca_cert`: the certificate does not name that address).
    pub ssl_ca_cert: Option<String>,
}

/// Why the kept facts make no registration (the reason names what is missing, never a value).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoVimFacts {
    /// No admin kubeconfig or no VIM artifact is kept for the VNF (the flavour records none,
    /// or its steps have not run).
    #[error("no {0} is kept for this VNF")]
    Missing(&'static str),
    /// The kept admin kubeconfig has no `server:`.
    #[error("the kept admin kubeconfig names no server")]
    NoServer,
    /// The kept VIM artifact holds no bearer token of its form.
    #[error("the kept Kubernetes VIM has no bearer token of its form")]
    BadToken,
}

impl VimRegistration {
    /// The registration from the kept artifacts (`crate::artifact`): the name and bearer
    /// token of the VIM artifact (`vim`), the endpoint and CA of the admin kubeconfig
    /// (`kubeconfig`); the CA is left out when the kubeconfig names a `tls-server-name` (its
    /// endpoint is a floating address the certificate does not name, as Tacker's
    /// `_create_vim` registers a floating endpoint without `ssl_ca_cert`). Errors:
    /// [`NoVimFacts`].
    pub fn from_kept(
        kubeconfig: Option<&str>,
        vim: Option<&str>,
    ) -> Result<(Self, Secret<String>), NoVimFacts> {
        let kubeconfig = kubeconfig.ok_or(NoVimFacts::Missing("admin kubeconfig"))?;
        let vim = vim.ok_or(NoVimFacts::Missing("Kubernetes VIM bearer token"))?;
        let vim = crate::artifact::KubernetesVim::parse(vim).map_err(|_| NoVimFacts::BadToken)?;
        let auth_url = crate::artifact::kubeconfig_server(kubeconfig)
            .filter(|s| !s.is_empty())
            .ok_or(NoVimFacts::NoServer)?;
        let ssl_ca_cert = if crate::artifact::kubeconfig_has_tls_server_name(kubeconfig) {
            None
        } else {
            crate::artifact::kubeconfig_ca_pem(kubeconfig)
        };
        Ok((
            Self {
                name: vim.name.clone(),
                auth_url,
                ssl_ca_cert,
            },
            Secret::new(vim.bearer_token.clone()),
        ))
    }

    /// The `POST /v1.0/vims` body, as Tacker's `_create_vim` builds `vim_info` (without
    /// `tenant_id`: Tacker's v1 API fills it from the caller's token, and refuses another one
    /// unless the caller is an admin; without `extra.helm_info`, which would carry the SSH
    /// password in clear). JSON, a secret: it holds the bearer token.
    pub fn create_body(&self, bearer_token: &Secret<String>) -> Secret<Vec<u8>> {
        let mut cred = serde_json::Map::new();
        cred.insert("bearer_token".into(), bearer_token.expose().as_str().into());
        if let Some(ca) = &self.ssl_ca_cert {
            cred.insert("ssl_ca_cert".into(), ca.as_str().into());
        }
        let body = json!({
            "vim": {
                "name": self.name,
                "auth_url": self.auth_url,
                "vim_project": {"name": ""},
                "auth_cred": cred,
                "type": "kubernetes",
            }
        });
        Secret::new(serde_json::to_vec(&body).expect("a JSON value serializes"))
    }
}

/// One VIM as Tacker answers it (the fields vnfkeeper reads; the others are ignored).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct VimSeen {
    /// Tacker's id of the VIM (a UUID).
    pub id: String,
    /// Its name.
    pub name: String,
    /// `kubernetes`, `openstack`.
    #[serde(rename = "type")]
    pub vim_type: String,
    /// The endpoint it was registered with.
    pub auth_url: String,
}

/// An answer of Tacker's VIM API that is not of its documented shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Tacker's VIM answer is not of its shape: {0}")]
pub struct BadVimAnswer(pub String);

/// The VIM of a `POST` (201) or `GET /v1.0/vims/{id}` (200) answer, `{"vim": {…}}`. Errors:
/// [`BadVimAnswer`].
pub fn parse_vim(body: &[u8]) -> Result<VimSeen, BadVimAnswer> {
    #[derive(Deserialize)]
    struct Envelope {
        vim: VimSeen,
    }
    serde_json::from_slice::<Envelope>(body)
        .map(|e| e.vim)
        .map_err(|e| BadVimAnswer(e.to_string()))
}

/// The VIMs of a `GET /v1.0/vims` answer, `{"vims": […]}`. Errors: [`BadVimAnswer`].
pub fn parse_vims(body: &[u8]) -> Result<Vec<VimSeen>, BadVimAnswer> {
    #[derive(Deserialize)]
    struct Envelope {
        vims: Vec<VimSeen>,
    }
    serde_json::from_slice::<Envelope>(body)
        .map(|e| e.vims)
        .map_err(|e| BadVimAnswer(e.to_string()))
}

/// The `type` of a Tacker v1 error answer (`{"TackerError": {"type": …}}`), e.g.
/// `DuplicateEntity`, `VimNotFoundException`; `None` for another body.
pub fn error_type(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    v["TackerError"]["type"].as_str().map(str::to_owned)
}

/// What registering needs, from the VIMs Tacker listed under our name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterStep {
    /// Ours is there (a Kubernetes VIM of that name and endpoint, as Tacker's
    /// `_get_or_create_vim` reuses it): done, with its id.
    Registered(String),
    /// None of that name: create it.
    Create,
    /// A VIM of that name with another type or endpoint is someone else's: refused, never
    /// replaced (Tacker would answer the create 409 `DuplicateEntity`).
    NameTaken {
        /// Its id.
        id: String,
        /// Its type and endpoint, for the reason.
        what: String,
    },
}

/// Decides registration from the VIMs Tacker listed for `reg.name`.
pub fn register_step(reg: &VimRegistration, listed: &[VimSeen]) -> RegisterStep {
    let named: Vec<&VimSeen> = listed.iter().filter(|v| v.name == reg.name).collect();
    if let Some(ours) = named
        .iter()
        .find(|v| v.vim_type == "kubernetes" && v.auth_url == reg.auth_url)
    {
        return RegisterStep::Registered(ours.id.clone());
    }
    match named.first() {
        None => RegisterStep::Create,
        Some(v) => RegisterStep::NameTaken {
            id: v.id.clone(),
            what: format!("{} VIM at {}", v.vim_type, v.auth_url),
        },
    }
}

/// The id to delete at TERMINATE: ours among the VIMs Tacker listed for `reg.name` (same type
/// and endpoint), `None` when it is gone already (or the name is someone else's).
pub fn to_remove(reg: &VimRegistration, listed: &[VimSeen]) -> Option<String> {
    match register_step(reg, listed) {
        RegisterStep::Registered(id) => Some(id),
        RegisterStep::Create | RegisterStep::NameTaken { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(ca: bool) -> VimRegistration {
        VimRegistration {
            name: "kubernetes_vim".into(),
            auth_url: "https://10.0.0.5:6443".into(),
            ssl_ca_cert: ca
                .then(|| "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".into()),
        }
    }

    fn seen(id: &str, name: &str, t: &str, url: &str) -> VimSeen {
        VimSeen {
            id: id.into(),
            name: name.into(),
            vim_type: t.into(),
            auth_url: url.into(),
        }
    }

    #[test]
    fn body_is_tackers_vim_info_and_debug_hides_it() {
        let token = Secret::new("eyJhbGciOi.payload.sig".to_owned());
        let body = reg(true).create_body(&token);
        assert_eq!(format!("{body:?}"), "Secret(***)");
        let v: serde_json::Value = serde_json::from_slice(body.expose()).unwrap();
        assert_eq!(
            v,
            json!({"vim": {
                "name": "kubernetes_vim",
                "auth_url": "https://10.0.0.5:6443",
                "vim_project": {"name": ""},
                "auth_cred": {
                    "bearer_token": "eyJhbGciOi.payload.sig",
                    "ssl_ca_cert": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
                },
                "type": "kubernetes"
            }})
        );
        let v: serde_json::Value =
            serde_json::from_slice(reg(false).create_body(&token).expose()).unwrap();
        assert!(v["vim"]["auth_cred"].get("ssl_ca_cert").is_none(), "{v}");
        assert!(v["vim"].get("tenant_id").is_none(), "{v}");
    }

    #[test]
    fn registration_comes_from_the_kept_kubeconfig_and_token() {
        use base64::Engine as _;
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        let b64 = base64::engine::general_purpose::STANDARD.encode(pem);
        let kc = format!(
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {b64}\n    server: https://10.0.0.5:6443\n  name: kubernetes\n"
        );
        let vim = "VIM_NAME=kubernetes_vim\nBEARER_TOKEN=eyJhbGciOi.payload.signature\n";
        let (r, token) = VimRegistration::from_kept(Some(&kc), Some(vim)).unwrap();
        assert_eq!(r, reg(true));
        assert_eq!(token.expose(), "eyJhbGciOi.payload.signature");
        let floating = crate::artifact::kubeconfig_with_tls_server_name(&kc, "10.0.0.5");
        let (r, _) = VimRegistration::from_kept(Some(&floating), Some(vim)).unwrap();
        assert_eq!(r.ssl_ca_cert, None);
        assert_eq!(
            VimRegistration::from_kept(None, Some(vim)),
            Err(NoVimFacts::Missing("admin kubeconfig"))
        );
        assert_eq!(
            VimRegistration::from_kept(Some(&kc), None),
            Err(NoVimFacts::Missing("Kubernetes VIM bearer token"))
        );
        assert_eq!(
            VimRegistration::from_kept(Some(&kc), Some("VIM_NAME=x\n")),
            Err(NoVimFacts::BadToken)
        );
        assert_eq!(
            VimRegistration::from_kept(Some("kind: Config\n"), Some(vim)),
            Err(NoVimFacts::NoServer)
        );
    }

    #[test]
    fn answers_parse_in_their_envelopes() {
        // Shaped as Tacker's _make_vim_dict answers (auth_cred masked, status ACTIVE).
        let one = br#"{"vim": {"id": "6f1c5d3e-6a8e-4c53-9d0e-2b7d1f0f7a11", "tenant_id": "p1",
            "type": "kubernetes", "auth_url": "https://10.0.0.5:6443",
            "auth_cred": {"bearer_token": "***", "ssl_ca_cert": "***"},
            "vim_project": {"name": ""}, "name": "kubernetes_vim", "description": "",
            "status": "ACTIVE", "placement_attr": {"regions": ["default", "kube-system"]},
            "is_default": false, "created_at": "2026-11-27 22:00:00", "updated_at": null,
            "extra": {}}}"#;
        let v = parse_vim(one).unwrap();
        assert_eq!(v.id, "6f1c5d3e-6a8e-4c53-9d0e-2b7d1f0f7a11");
        assert_eq!(v.vim_type, "kubernetes");
        let list = br#"{"vims": []}"#;
        assert_eq!(parse_vims(list).unwrap(), vec![]);
        assert!(parse_vims(one).is_err());
        assert!(parse_vim(b"{\"vim\": {\"id\": 1}}").is_err());
        let err = br#"{"TackerError": {"type": "VimNotFoundException", "message": "Specified VIM id x is invalid. Please verify and pass a valid VIM id", "detail": ""}}"#;
        assert_eq!(error_type(err).as_deref(), Some("VimNotFoundException"));
        assert_eq!(error_type(b"<html>"), None);
    }

    #[test]
    fn ours_is_reused_another_of_that_name_is_refused_and_never_removed() {
        let r = reg(true);
        assert_eq!(register_step(&r, &[]), RegisterStep::Create);
        let ours = seen("a", "kubernetes_vim", "kubernetes", "https://10.0.0.5:6443");
        let other_name = seen("b", "other", "kubernetes", "https://10.0.0.5:6443");
        let other_url = seen("c", "kubernetes_vim", "kubernetes", "https://10.9.9.9:6443");
        let other_type = seen("d", "kubernetes_vim", "openstack", "https://10.0.0.5:6443");
        assert_eq!(
            register_step(&r, &[other_name.clone(), ours.clone()]),
            RegisterStep::Registered("a".into())
        );
        assert_eq!(
            register_step(&r, std::slice::from_ref(&other_name)),
            RegisterStep::Create
        );
        for theirs in [other_url, other_type] {
            assert!(matches!(
                register_step(&r, std::slice::from_ref(&theirs)),
                RegisterStep::NameTaken { ref id, .. } if *id == theirs.id
            ));
            assert_eq!(to_remove(&r, &[theirs]), None);
        }
        assert_eq!(to_remove(&r, &[ours]), Some("a".into()));
        assert_eq!(to_remove(&r, &[other_name]), None);
    }
}
