//! Loading one cloud entry from an explicit clouds.yaml path.
//!
//! The `openstack` crate only looks in `./`, `~/.config/openstack/` and `/etc/openstack/`; the
//! daemon names its file in its own configuration, so we read the file ourselves (the os-client-
//! config format, <https://docs.openstack.org/openstacksdk/latest/user/config/configuration.html>)
//! and build the osauth session from the parts.
//!
//! Supported: `auth_type` `password` (default), `v3token` and `v3applicationcredential`;
//! `auth.{auth_url, username, password, token, project_name | project_id, user_domain_name,
//! project_domain_name | project_domain_id}`, and for application credentials
//! `auth.{application_credential_id | application_credential_name + (user_id | username +
//! user_domain_name | user_domain_id), application_credential_secret}` (Identity API v3,
//! "Authenticating with an Application Credential": an application credential is already scoped
//! to its project, so no project is sent); `region_name`, `interface`, `cacert`, `verify` (false
//! disables TLS verification, with a warning). Not supported: `clouds-public.yaml` profiles,
//! `secure.yaml`, users by id for password auth.
//!
//! Error messages name the file, the cloud and the key, never a value (a password cannot leak
//! through a YAML type error).

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::CloudError;

/// How to authenticate.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Credentials {
    /// Keystone v3 password.
    Password {
        /// User name.
        username: String,
        /// Password (never printed).
        password: String,
        /// User domain name (default `Default`).
        user_domain_name: String,
    },
    /// Keystone v3 token (never printed).
    Token(String),
    /// Keystone v3 application credential (method `application_credential`).
    ApplicationCredential {
        /// Which credential: by id, or by name and its owner's user id.
        credential: ApplicationCredentialRef,
        /// `application_credential_secret` (never printed).
        secret: String,
    },
}

/// How a clouds.yaml entry names its application credential.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ApplicationCredentialRef {
    /// `application_credential_id`.
    Id(String),
    /// `application_credential_name` of the user `user_id`.
    Name {
        /// The credential's name.
        name: String,
        /// Its owner's user id.
        user_id: String,
    },
    /// `application_credential_name` of the user `username` in a domain.
    NameOfUser {
        /// The credential's name.
        name: String,
        /// Its owner's user name.
        username: String,
        /// The owner's domain: `(is_id, value)`, from `user_domain_id` or `user_domain_name`
        /// (default name `Default`).
        user_domain: (bool, String),
    },
}

/// Project scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Project {
    /// By id.
    Id(String),
    /// By name.
    Name(String),
}

/// One `clouds.<name>` entry, validated.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct CloudEntry {
    /// Keystone v3 URL.
    pub(crate) auth_url: String,
    /// Credentials.
    pub(crate) credentials: Credentials,
    /// Project scope, if any.
    pub(crate) project: Option<Project>,
    /// Project domain: `(is_id, value)`; default name `Default`.
    pub(crate) project_domain: (bool, String),
    /// `region_name`.
    pub(crate) region_name: Option<String>,
    /// `interface` (`public`, `internal`, `admin`).
    pub(crate) interface: Option<String>,
    /// `cacert` PEM file (relative paths are resolved against the clouds.yaml directory).
    pub(crate) cacert: Option<PathBuf>,
    /// `verify` (default true).
    pub(crate) verify: bool,
}

impl fmt::Debug for CloudEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let user = match &self.credentials {
            Credentials::Password {
                username,
                user_domain_name,
                ..
            } => {
                format!("password user={username} domain={user_domain_name} password=<redacted>")
            }
            Credentials::Token(_) => "v3token token=<redacted>".to_string(),
            Credentials::ApplicationCredential { credential, .. } => {
                format!("v3applicationcredential {credential:?} secret=<redacted>")
            }
        };
        f.debug_struct("CloudEntry")
            .field("auth_url", &self.auth_url)
            .field("credentials", &user)
            .field("project", &self.project)
            .field("project_domain", &self.project_domain)
            .field("region_name", &self.region_name)
            .field("interface", &self.interface)
            .field("cacert", &self.cacert)
            .field("verify", &self.verify)
            .finish()
    }
}

/// Reads and validates the entry `cloud` of the clouds.yaml at `path`.
///
/// Errors: [`CloudError::Config`] when the file is unreadable, not YAML, has no such cloud, or
/// the entry lacks a required key or uses an unsupported `auth_type`.
pub(crate) fn load(path: &Path, cloud: &str) -> Result<CloudEntry, CloudError> {
    let err = |message: String| CloudError::Config {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read: {e}")))?;
    parse(&text, cloud, path.parent()).map_err(|e| err(e.to_string()))
}

/// Why a clouds.yaml entry is not usable (os-client-config's format); the text names the cloud
/// and the key, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CloudsYamlError {
    /// The text is not YAML (serde_yaml_ng's message: a position, not content).
    #[error("not valid YAML: {0}")]
    NotYaml(String),
    /// No top-level `clouds` mapping.
    #[error("no `clouds` mapping")]
    NoClouds,
    /// No entry `cloud`; `names` are the entries there are.
    #[error("no cloud named '{cloud}' (clouds: {})", names.join(", "))]
    NoSuchCloud {
        /// The entry asked for.
        cloud: String,
        /// The entries of the file.
        names: Vec<String>,
    },
    /// A key of the right name and the wrong type; `at` is `clouds.<cloud>` or
    /// `clouds.<cloud>.auth`.
    #[error("{at}: `{key}` must be {expected}")]
    WrongType {
        /// Where the key is.
        at: String,
        /// The key.
        key: String,
        /// What it must be (`a string`, `a mapping`, `a boolean`).
        expected: &'static str,
    },
    /// A required `auth` key is missing or empty.
    #[error("clouds.{cloud}.auth: `{key}` is required")]
    Required {
        /// The entry.
        cloud: String,
        /// The key.
        key: String,
    },
    /// A form vnfkeeper does not support (`user_id` without `username`, an `auth_type`).
    #[error("clouds.{cloud}{what}")]
    Unsupported {
        /// The entry.
        cloud: String,
        /// The rest of the message, from the key on.
        what: String,
    },
}

/// Parses clouds.yaml text; `base` resolves a relative `cacert`.
pub(crate) fn parse(
    text: &str,
    cloud: &str,
    base: Option<&Path>,
) -> Result<CloudEntry, CloudsYamlError> {
    // serde_yaml_ng syntax errors carry positions, not content.
    let doc: Value =
        serde_yaml_ng::from_str(text).map_err(|e| CloudsYamlError::NotYaml(e.to_string()))?;
    let clouds = doc
        .get("clouds")
        .and_then(Value::as_object)
        .ok_or(CloudsYamlError::NoClouds)?;
    let entry = clouds
        .get(cloud)
        .and_then(Value::as_object)
        .ok_or_else(|| CloudsYamlError::NoSuchCloud {
            cloud: cloud.to_owned(),
            names: clouds.keys().cloned().collect(),
        })?;
    let wrong = |at: String, k: &str, expected| CloudsYamlError::WrongType {
        at,
        key: k.to_owned(),
        expected,
    };
    let key =
        |m: &serde_json::Map<String, Value>, k: &str| -> Result<Option<String>, CloudsYamlError> {
            match m.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if s.is_empty() => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(Value::Number(n)) => Ok(Some(n.to_string())),
                Some(_) => Err(wrong(format!("clouds.{cloud}"), k, "a string")),
            }
        };
    let empty = serde_json::Map::new();
    let auth = match entry.get("auth") {
        Some(Value::Object(m)) => m,
        None | Some(Value::Null) => &empty,
        Some(_) => return Err(wrong(format!("clouds.{cloud}"), "auth", "a mapping")),
    };
    let need = |k: &str| -> Result<String, CloudsYamlError> {
        key(auth, k)?.ok_or_else(|| CloudsYamlError::Required {
            cloud: cloud.to_owned(),
            key: k.to_owned(),
        })
    };
    let unsupported = |what: String| CloudsYamlError::Unsupported {
        cloud: cloud.to_owned(),
        what,
    };
    let auth_type = key(entry, "auth_type")?;
    let credentials = match auth_type.as_deref() {
        None | Some("password") | Some("v3password") => {
            if key(auth, "user_id")?.is_some() && key(auth, "username")?.is_none() {
                return Err(unsupported(
                    ".auth: `user_id` is not supported; use `username`".into(),
                ));
            }
            Credentials::Password {
                username: need("username")?,
                password: need("password")?,
                user_domain_name: key(auth, "user_domain_name")?
                    .or(key(auth, "domain_name")?)
                    .unwrap_or_else(|| "Default".to_string()),
            }
        }
        Some("token") | Some("v3token") => Credentials::Token(need("token")?),
        Some("v3applicationcredential") => {
            let credential = match key(auth, "application_credential_id")? {
                Some(id) => ApplicationCredentialRef::Id(id),
                None => {
                    let name = key(auth, "application_credential_name")?.ok_or_else(|| {
                        CloudsYamlError::Required {
                            cloud: cloud.to_owned(),
                            key: "application_credential_id` or `application_credential_name"
                                .to_owned(),
                        }
                    })?;
                    match (key(auth, "user_id")?, key(auth, "username")?) {
                        (Some(user_id), _) => ApplicationCredentialRef::Name { name, user_id },
                        (None, Some(username)) => ApplicationCredentialRef::NameOfUser {
                            name,
                            username,
                            user_domain: match (
                                key(auth, "user_domain_id")?,
                                key(auth, "user_domain_name")?,
                            ) {
                                (Some(id), _) => (true, id),
                                (None, Some(n)) => (false, n),
                                (None, None) => (false, "Default".to_string()),
                            },
                        },
                        (None, None) => {
                            return Err(CloudsYamlError::Required {
                                cloud: cloud.to_owned(),
                                key: "user_id` or `username".to_owned(),
                            });
                        }
                    }
                }
            };
            Credentials::ApplicationCredential {
                credential,
                secret: need("application_credential_secret")?,
            }
        }
        Some(other) => {
            return Err(unsupported(format!(
                ": auth_type `{other}` is not supported (use `password`, `v3token` or `v3applicationcredential`)"
            )));
        }
    };
    let project = match (key(auth, "project_id")?, key(auth, "project_name")?) {
        (Some(id), _) => Some(Project::Id(id)),
        (None, Some(n)) => Some(Project::Name(n)),
        (None, None) => None,
    };
    let project_domain = match (
        key(auth, "project_domain_id")?,
        key(auth, "project_domain_name")?,
    ) {
        (Some(id), _) => (true, id),
        (None, Some(n)) => (false, n),
        (None, None) => (false, "Default".to_string()),
    };
    let verify = match entry.get("verify") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => !matches!(s.to_ascii_lowercase().as_str(), "false" | "no" | "0"),
        Some(_) => return Err(wrong(format!("clouds.{cloud}"), "verify", "a boolean")),
    };
    let cacert = key(entry, "cacert")?.map(|c| {
        let p = PathBuf::from(c);
        match base {
            Some(b) if p.is_relative() => b.join(p),
            _ => p,
        }
    });
    Ok(CloudEntry {
        auth_url: need("auth_url")?,
        credentials,
        project,
        project_domain,
        region_name: key(entry, "region_name")?,
        interface: key(entry, "interface")?,
        cacert,
        verify,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "clouds:\n  a:\n    auth:\n      auth_url: http://k/v3\n      username: u\n      password: hunter2\n      project_name: p\n      user_domain_name: D\n    region_name: R\n    interface: internal\n    cacert: ca.pem\n  b:\n    auth_type: v3oidcpassword\n    auth: {auth_url: x}\n  c:\n    auth:\n      auth_url: http://k/v3\n      username: u\n      password: [1, 2]\n";

    #[test]
    fn parses_password_entry() {
        let e = parse(YAML, "a", Some(Path::new("/etc/x"))).unwrap();
        assert_eq!(e.auth_url, "http://k/v3");
        assert_eq!(e.project, Some(Project::Name("p".into())));
        assert_eq!(e.project_domain, (false, "Default".into()));
        assert_eq!(e.region_name.as_deref(), Some("R"));
        assert_eq!(e.cacert.as_deref(), Some(Path::new("/etc/x/ca.pem")));
        assert!(e.verify);
        let dbg = format!("{e:?}");
        assert!(!dbg.contains("hunter2"), "{dbg}");
        assert!(dbg.contains("<redacted>"));
    }

    #[test]
    fn parses_application_credentials_by_id_and_by_name() {
        let yaml = "clouds:\n  id:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: http://k/v3\n      application_credential_id: 21dced0fd20347869b93710d2b98aae0\n      application_credential_secret: s3cr3t-appcred\n  name:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: http://k/v3\n      application_credential_name: vnfkeeper\n      user_id: 0a1b\n      application_credential_secret: s3cr3t-appcred\n  by-username:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: http://k/v3\n      application_credential_name: vnfkeeper\n      username: svc\n      application_credential_secret: s3cr3t-appcred\n  no-secret:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: http://k/v3\n      application_credential_id: x\n  neither:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: http://k/v3\n      application_credential_secret: s3cr3t-appcred\n  no-user:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: http://k/v3\n      application_credential_name: vnfkeeper\n      application_credential_secret: s3cr3t-appcred\n";
        let e = parse(yaml, "id", None).unwrap();
        assert!(
            e.credentials
                == Credentials::ApplicationCredential {
                    credential: ApplicationCredentialRef::Id(
                        "21dced0fd20347869b93710d2b98aae0".into()
                    ),
                    secret: "s3cr3t-appcred".into()
                }
        );
        let dbg = format!("{e:?}");
        assert!(
            !dbg.contains("s3cr3t") && dbg.contains("<redacted>"),
            "{dbg}"
        );
        let e = parse(yaml, "name", None).unwrap();
        assert!(
            e.credentials
                == Credentials::ApplicationCredential {
                    credential: ApplicationCredentialRef::Name {
                        name: "vnfkeeper".into(),
                        user_id: "0a1b".into()
                    },
                    secret: "s3cr3t-appcred".into()
                }
        );
        let e = parse(yaml, "by-username", None).unwrap();
        assert!(
            e.credentials
                == Credentials::ApplicationCredential {
                    credential: ApplicationCredentialRef::NameOfUser {
                        name: "vnfkeeper".into(),
                        username: "svc".into(),
                        user_domain: (false, "Default".into()),
                    },
                    secret: "s3cr3t-appcred".into()
                }
        );
        for (cloud, expect) in [
            ("no-secret", "`application_credential_secret` is required"),
            (
                "neither",
                "`application_credential_id` or `application_credential_name` is required",
            ),
        ] {
            let e = parse(yaml, cloud, None).unwrap_err().to_string();
            assert!(e.contains(expect) && !e.contains("s3cr3t"), "{cloud}: {e}");
        }
    }

    #[test]
    fn errors_name_keys_not_values() {
        assert!(
            parse(YAML, "b", None)
                .unwrap_err()
                .to_string()
                .contains("not supported")
        );
        let e = parse(YAML, "c", None).unwrap_err().to_string();
        assert!(e.contains("`password` must be a string"), "{e}");
        let e = parse(YAML, "zz", None).unwrap_err().to_string();
        assert!(
            e.contains("no cloud named 'zz'") && e.contains("a, b, c"),
            "{e}"
        );
        let e = parse(
            "clouds:\n  a:\n    auth:\n      username: u\n      password: hunter2\n",
            "a",
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("auth_url") && !e.contains("hunter2"), "{e}");
    }
}
