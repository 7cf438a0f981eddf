//! `[tacker]`: companion mode with OpenStack Tacker, its settings read from the file (every
//! key checked, defaults applied) and written back as effective TOML.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::file::TackerFile;

/// Why `tacker.password_file` gave no password ([`TackerSettings::read_password`]); each
/// message names the file, never its content.
#[derive(Debug, thiserror::Error)]
pub enum PasswordFileError {
    /// The file cannot be read.
    #[error("tacker.password_file {}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Others may read it.
    #[error("tacker.password_file {} is readable by others (mode {mode:o}); chmod o-rwx it", path.display())]
    ReadableByOthers {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Its first line (the password) is empty.
    #[error("tacker.password_file {}: the first line (the password) is empty", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
}
use super::{CloudSettings, parse_listen, toml_string};

/// Companion mode with OpenStack Tacker (`[tacker]`, off when absent): the endpoint Tacker's
/// `/vnflcm/v2` sends LCM notifications to (SOL003 v3.3.1 §5.4.20 as a subscriber's
/// `callbackUri`, authenticated per SOL013 §8.3.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TackerSettings {
    /// `listen = "IP:PORT"`: where the notification endpoint listens. The same address as
    /// `metrics.listen` serves both on one socket.
    pub listen: std::net::SocketAddr,
    /// `callback_path`: the path of the callback URI (`GET` for Tacker's test, `POST` for
    /// notifications). Default `/vnfkeeper/notifications`.
    pub callback_path: String,
    /// `auth_type`: what Tacker must present on the callback (SOL013 §8.3.4): `BASIC` (the
    /// default) or `OAUTH2_CLIENT_CREDENTIALS` (a Bearer token from vnfkeeper's own token
    /// endpoint, RFC 6749 §4.4).
    pub auth_type: TackerAuth,
    /// `username`: with `BASIC` the HTTP Basic user Tacker presents (`paramsBasic.userName`);
    /// with `OAUTH2_CLIENT_CREDENTIALS` the client id Tacker authenticates with at the token
    /// endpoint (`paramsOauth2ClientCredentials.clientId`).
    pub username: String,
    /// `password_file`: an absolute path to a file with the password (with OAuth 2.0: the
    /// client password) on its first line; it must not be readable by others (mode `o-rwx`).
    /// Read when the daemon starts and by `config check` ([`TackerSettings::read_password`]).
    pub password_file: PathBuf,
    /// `token_path`: the path of the token endpoint on `listen` (only with
    /// `OAUTH2_CLIENT_CREDENTIALS`). Default `/vnfkeeper/token`.
    pub token_path: String,
    /// `hook_path`: the path on `listen` vnfkeeper's MgmtDriver script (Tacker's `Vnflcm`
    /// hooks) sends to, with the same credentials as the callback (`POST`; `GET
    /// <hook_path>/<operation id>`). Default `/vnfkeeper/mgmt-hooks`.
    pub hook_path: String,
    /// `token_lifetime_secs`: how long an access token the token endpoint issues is accepted
    /// (`expires_in`). Default 3600, 60–86400.
    pub token_lifetime: Duration,
    /// `tls_cert_file` and `tls_key_file`: PEM files (the certificate chain, leaf first, and its
    /// private key) with which `listen` serves HTTPS only; `None`: plain HTTP. Both or neither.
    pub tls: Option<TlsFiles>,
    /// `max_body_kib`: the largest notification body accepted, in KiB (larger: 413). Default
    /// 1024, 1–65536.
    pub max_body_bytes: usize,
    /// `cloud`: the clouds.yaml entry (in `cloud.clouds_yaml`) used to reach Tacker through
    /// Keystone's catalog (type `nfv-orchestration`). Default: `cloud.cloud`.
    pub cloud: Option<String>,
    /// `callback_uri`: the URI Tacker must call, as Tacker reaches vnfkeeper (`http(s)://`, at
    /// most 255 characters — Tacker's limit —, its path `callback_path`). When set, vnfkeeper
    /// keeps exactly one subscription with it in Tacker and polls Tacker; absent: only the
    /// endpoint runs (subscriptions are made by hand).
    pub callback_uri: Option<String>,
    /// `vnfd_ids`: the `vnfdId`s whose instances vnfkeeper manages (the subscription's
    /// `filter.vnfInstanceSubscriptionFilter.vnfdIds`); required, non-empty, with `callback_uri`.
    pub vnfd_ids: Vec<String>,
    /// `auto_heal`: whether reconcile may heal Tacker-owned VNFs (through Tacker). Default false.
    pub auto_heal: bool,
    /// `register_vim`: whether a Tacker INSTANTIATE's management steps end by registering the
    /// cluster with Tacker as a Kubernetes VIM (`tacker.register_vim`). Default true. False for
    /// a Tacker that cannot store one: Tacker 16.0.0 keeps a Kubernetes VIM's credentials only
    /// in Barbican (`VimEncryptKeyError` without it); the stage is then done with event
    /// `TACKER_VIM_SKIPPED`. Read at start.
    pub register_vim: bool,
    /// `poll_interval_secs`: how often Tacker's op occs and instances are read besides at start
    /// and on each notification; each poll also checks the subscription. Default 60, 5–3600.
    pub poll_interval: Duration,
    /// `[tacker.packages]`: `"<vnfdId>" = "<package>"`, the VNF package (directory or CSAR
    /// `.zip`; relative paths against `packages_dir`, as a spool request's `vnfPackage`) whose
    /// flavour runs the management steps of the instances of that `vnfdId`. Keys must be in
    /// `vnfd_ids`; a managed `vnfdId` without an entry is recorded, never managed.
    pub packages: BTreeMap<String, PathBuf>,
}

/// How Tacker authenticates its notifications (SOL013 §8.3.4, `SubscriptionAuthentication`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TackerAuth {
    /// `BASIC`: HTTP Basic with `username` and the password (RFC 7617).
    Basic,
    /// `OAUTH2_CLIENT_CREDENTIALS`: Tacker first obtains an access token from vnfkeeper's token
    /// endpoint with the client credentials (RFC 6749 §4.4), then sends `Authorization: Bearer`
    /// (RFC 6750 §2.1).
    Oauth2ClientCredentials,
}

impl TackerAuth {
    /// The SOL013 `authType` value.
    pub fn as_str(self) -> &'static str {
        match self {
            TackerAuth::Basic => "BASIC",
            TackerAuth::Oauth2ClientCredentials => "OAUTH2_CLIENT_CREDENTIALS",
        }
    }
}

/// The PEM files of the notification endpoint's TLS (`tacker.tls_cert_file`,
/// `tacker.tls_key_file`), absolute paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first.
    pub cert_file: PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1 PEM); must be readable by its owner only.
    pub key_file: PathBuf,
}

impl TackerSettings {
    /// The public URL of the token endpoint Tacker is told to use (`tokenEndpoint`): the scheme
    /// and authority of `callback_uri` with `token_path`. `None` without `callback_uri`.
    pub fn token_endpoint(&self) -> Option<String> {
        let uri = reqwest::Url::parse(self.callback_uri.as_deref()?).ok()?;
        let mut t = uri.clone();
        t.set_path(&self.token_path);
        t.set_query(None);
        t.set_fragment(None);
        Some(t.to_string())
    }

    /// The clouds.yaml entry that reaches Tacker: `cloud`'s file and timeout, with the entry
    /// `tacker.cloud` (default `cloud.cloud`). `None` without a `[cloud]` section.
    pub fn cloud_settings(&self, cloud: Option<&CloudSettings>) -> Option<CloudSettings> {
        cloud.map(|c| CloudSettings {
            clouds_yaml: c.clouds_yaml.clone(),
            cloud: self.cloud.clone().unwrap_or_else(|| c.cloud.clone()),
            api_timeout: c.api_timeout,
        })
    }

    /// The Basic password from `password_file`. Errors: [`PasswordFileError`] — the file
    /// cannot be read, is readable by others, or its first line is empty — naming the file,
    /// never its content.
    pub fn read_password(&self) -> Result<vnfkeeper_core::wire::Secret<String>, PasswordFileError> {
        use std::os::unix::fs::PermissionsExt as _;
        let p = &self.password_file;
        let unreadable = |source| PasswordFileError::Unreadable {
            path: p.clone(),
            source,
        };
        let meta = std::fs::metadata(p).map_err(unreadable)?;
        if meta.permissions().mode() & 0o007 != 0 {
            return Err(PasswordFileError::ReadableByOthers {
                path: p.clone(),
                mode: meta.permissions().mode() & 0o7777,
            });
        }
        let text = std::fs::read_to_string(p).map_err(unreadable)?;
        let line = text.lines().next().unwrap_or("").trim_end_matches('\r');
        if line.is_empty() {
            return Err(PasswordFileError::Empty { path: p.clone() });
        }
        Ok(vnfkeeper_core::wire::Secret::new(line.to_owned()))
    }

    /// Appends the effective `[tacker]` section (and `[tacker.packages]` when it has entries)
    /// to `out`, for `vnfkeeper config check`: every key, unset optional ones as comments.
    pub(super) fn write_toml(&self, out: &mut String) {
        let t = self;
        out.push_str("[tacker]\n");
        out.push_str(&format!(
            "listen = {}\n",
            toml_string(&t.listen.to_string())
        ));
        out.push_str(&format!(
            "callback_path = {}\n",
            toml_string(&t.callback_path)
        ));
        out.push_str(&format!("auth_type = \"{}\"\n", t.auth_type.as_str()));
        out.push_str(&format!("username = {}\n", toml_string(&t.username)));
        out.push_str(&format!(
            "password_file = {}\n",
            toml_string(&t.password_file.display().to_string())
        ));
        out.push_str(&format!("max_body_kib = {}\n", t.max_body_bytes / 1024));
        out.push_str(&format!("token_path = {}\n", toml_string(&t.token_path)));
        out.push_str(&format!("hook_path = {}\n", toml_string(&t.hook_path)));
        out.push_str(&format!(
            "token_lifetime_secs = {}\n",
            t.token_lifetime.as_secs()
        ));
        match &t.tls {
            Some(tls) => {
                out.push_str(&format!(
                    "tls_cert_file = {}\n",
                    toml_string(&tls.cert_file.display().to_string())
                ));
                out.push_str(&format!(
                    "tls_key_file = {}\n",
                    toml_string(&tls.key_file.display().to_string())
                ));
            }
            None => out.push_str("# tls_cert_file, tls_key_file not set: plain HTTP\n"),
        }
        match &t.cloud {
            Some(c) => out.push_str(&format!("cloud = {}\n", toml_string(c))),
            None => out.push_str("# cloud: the [cloud] entry\n"),
        }
        match &t.callback_uri {
            Some(u) => out.push_str(&format!("callback_uri = {}\n", toml_string(u))),
            None => out.push_str("# callback_uri not set: no subscription, no polling\n"),
        }
        out.push_str(&format!(
            "vnfd_ids = [{}]\n",
            t.vnfd_ids
                .iter()
                .map(|v| toml_string(v))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        out.push_str(&format!("auto_heal = {}\n", t.auto_heal));
        out.push_str(&format!("register_vim = {}\n", t.register_vim));
        out.push_str(&format!(
            "poll_interval_secs = {}\n",
            t.poll_interval.as_secs()
        ));
        if !t.packages.is_empty() {
            out.push_str("\n[tacker.packages]\n");
            for (vnfd, pkg) in &t.packages {
                out.push_str(&format!(
                    "{} = {}\n",
                    toml_string(vnfd),
                    toml_string(&pkg.display().to_string())
                ));
            }
        }
    }
}

/// A `[tacker]` problem: the dotted key and why.
type KeyError = (&'static str, String);

impl TackerSettings {
    /// `[tacker]` checked, defaults applied. Errors: (dotted key, reason), the first problem
    /// in the order the keys are checked.
    pub(super) fn from_file(t: TackerFile) -> Result<Self, KeyError> {
        let listen = parse_listen(&t.listen).map_err(|r| ("tacker.listen", r))?;
        let callback_path = callback_path(t.callback_path)?;
        let auth_type = TackerAuth::from_file(t.auth_type.as_deref())?;
        let token_path = token_path(t.token_path, &callback_path)?;
        let hook_path = hook_path(t.hook_path, &callback_path, &token_path)?;
        let lifetime = t.token_lifetime_secs.unwrap_or(3600);
        if !(60..=86_400).contains(&lifetime) {
            return Err((
                "tacker.token_lifetime_secs",
                format!("must be 60-86400, got {lifetime}"),
            ));
        }
        let tls = tls_files(t.tls_cert_file, t.tls_key_file)?;
        check_credentials(&t.username, &t.password_file)?;
        let kib = t.max_body_kib.unwrap_or(1024);
        if !(1..=65_536).contains(&kib) {
            return Err(("tacker.max_body_kib", format!("must be 1-65536, got {kib}")));
        }
        if let Some(c) = &t.cloud
            && (c.is_empty() || c.chars().any(char::is_control))
        {
            return Err((
                "tacker.cloud",
                "must be a non-empty clouds.yaml entry name".into(),
            ));
        }
        if let Some(uri) = &t.callback_uri {
            check_callback_uri(uri, &callback_path, tls.is_some())?;
        }
        let vnfd_ids = t.vnfd_ids.unwrap_or_default();
        check_vnfd_ids(&vnfd_ids, t.callback_uri.is_some())?;
        let poll = t.poll_interval_secs.unwrap_or(60);
        if !(5..=3600).contains(&poll) {
            return Err((
                "tacker.poll_interval_secs",
                format!("must be 5-3600, got {poll}"),
            ));
        }
        let packages = t.packages.unwrap_or_default();
        check_packages(&packages, &vnfd_ids)?;
        Ok(TackerSettings {
            listen,
            callback_path,
            auth_type,
            username: t.username,
            password_file: t.password_file,
            token_path,
            hook_path,
            token_lifetime: Duration::from_secs(lifetime),
            tls,
            max_body_bytes: kib as usize * 1024,
            cloud: t.cloud,
            callback_uri: t.callback_uri,
            vnfd_ids,
            auto_heal: t.auto_heal.unwrap_or(false),
            register_vim: t.register_vim.unwrap_or(true),
            poll_interval: Duration::from_secs(poll),
            packages,
        })
    }
}

impl TackerAuth {
    /// `auth_type` as written (absent: `BASIC`). Errors: another value.
    fn from_file(text: Option<&str>) -> Result<Self, KeyError> {
        match text {
            None | Some("BASIC") => Ok(TackerAuth::Basic),
            Some("OAUTH2_CLIENT_CREDENTIALS") => Ok(TackerAuth::Oauth2ClientCredentials),
            Some(other) => Err((
                "tacker.auth_type",
                format!("must be \"BASIC\" or \"OAUTH2_CLIENT_CREDENTIALS\", got {other:?}"),
            )),
        }
    }
}

/// Whether `p` is an absolute URL path of `[A-Za-z0-9/._-]`, at most 256 characters, without
/// `//`, other than `/metrics`.
fn url_path_ok(p: &str) -> bool {
    p.starts_with('/')
        && p.len() <= 256
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.'))
        && !p.contains("//")
        && p != "/metrics"
}

/// `callback_path` (default `/vnfkeeper/notifications`). Errors: not a URL path
/// [`url_path_ok`] accepts.
fn callback_path(written: Option<String>) -> Result<String, KeyError> {
    let callback_path = written.unwrap_or_else(|| "/vnfkeeper/notifications".into());
    if !url_path_ok(&callback_path) {
        return Err((
            "tacker.callback_path",
            format!(
                "must be an absolute URL path of [A-Za-z0-9/._-] (not /metrics), got {callback_path:?}"
            ),
        ));
    }
    Ok(callback_path)
}

/// `token_path` (default `/vnfkeeper/token`). Errors: not a URL path [`url_path_ok`] accepts,
/// or `callback_path` itself.
fn token_path(written: Option<String>, callback_path: &str) -> Result<String, KeyError> {
    let token_path = written.unwrap_or_else(|| "/vnfkeeper/token".into());
    if !url_path_ok(&token_path) || token_path == callback_path {
        return Err((
            "tacker.token_path",
            format!(
                "must be an absolute URL path of [A-Za-z0-9/._-], not /metrics nor callback_path, got {token_path:?}"
            ),
        ));
    }
    Ok(token_path)
}

/// `hook_path` (default `/vnfkeeper/mgmt-hooks`). Errors: not a URL path [`url_path_ok`]
/// accepts, or `callback_path` or `token_path`.
fn hook_path(
    written: Option<String>,
    callback_path: &str,
    token_path: &str,
) -> Result<String, KeyError> {
    let hook_path = written.unwrap_or_else(|| "/vnfkeeper/mgmt-hooks".into());
    if !url_path_ok(&hook_path)
        || hook_path.ends_with('/')
        || hook_path == callback_path
        || hook_path == token_path
    {
        return Err((
            "tacker.hook_path",
            format!(
                "must be an absolute URL path of [A-Za-z0-9/._-], not /metrics, callback_path nor token_path, got {hook_path:?}"
            ),
        ));
    }
    Ok(hook_path)
}

/// `tls_cert_file` and `tls_key_file`: both (absolute paths) or neither (`None`: plain HTTP).
/// Errors: one without the other, a relative path.
fn tls_files(cert: Option<PathBuf>, key: Option<PathBuf>) -> Result<Option<TlsFiles>, KeyError> {
    match (cert, key) {
        (None, None) => Ok(None),
        (Some(cert_file), Some(key_file)) => {
            for (key, p) in [
                ("tacker.tls_cert_file", &cert_file),
                ("tacker.tls_key_file", &key_file),
            ] {
                if !p.is_absolute() {
                    return Err((
                        key,
                        format!("must be an absolute path, got {}", p.display()),
                    ));
                }
            }
            Ok(Some(TlsFiles {
                cert_file,
                key_file,
            }))
        }
        (Some(_), None) => Err((
            "tacker.tls_key_file",
            "is required with tls_cert_file".into(),
        )),
        (None, Some(_)) => Err((
            "tacker.tls_cert_file",
            "is required with tls_key_file".into(),
        )),
    }
}

/// Checks `username` (a Basic user-id: non-empty, no `:` nor control characters) and that
/// `password_file` is an absolute path.
fn check_credentials(username: &str, password_file: &Path) -> Result<(), KeyError> {
    if username.is_empty() || username.contains(':') || username.chars().any(char::is_control) {
        return Err((
            "tacker.username",
            "must be non-empty, without ':' or control characters (RFC 7617)".into(),
        ));
    }
    if !password_file.is_absolute() {
        return Err((
            "tacker.password_file",
            format!("must be an absolute path, got {}", password_file.display()),
        ));
    }
    Ok(())
}

/// Checks `callback_uri`: an `http(s)://` URL with a host, at most 255 characters (Tacker's
/// limit), path `callback_path` without a query, no credentials, `https://` exactly when the
/// endpoint serves TLS (`tls`).
fn check_callback_uri(uri: &str, callback_path: &str, tls: bool) -> Result<(), KeyError> {
    let parsed = reqwest::Url::parse(uri)
        .map_err(|e| ("tacker.callback_uri", format!("not a URL ({e})")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err((
            "tacker.callback_uri",
            "must be an http:// or https:// URL with a host".into(),
        ));
    }
    if uri.len() > 255 {
        return Err((
            "tacker.callback_uri",
            format!("is {} characters; Tacker accepts at most 255", uri.len()),
        ));
    }
    if parsed.path() != callback_path || parsed.query().is_some() {
        return Err((
            "tacker.callback_uri",
            format!(
                "its path must be tacker.callback_path ({callback_path}) without a query, got {:?}",
                parsed.path()
            ),
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err((
            "tacker.callback_uri",
            "must not carry credentials (Tacker gets them in the subscription's authentication)"
                .into(),
        ));
    }
    if tls && parsed.scheme() != "https" {
        return Err((
            "tacker.callback_uri",
            "must be https:// when tls_cert_file is set (the endpoint serves HTTPS only)".into(),
        ));
    }
    if !tls && parsed.scheme() == "https" {
        return Err((
            "tacker.callback_uri",
            "is https:// but the endpoint serves plain HTTP: set tls_cert_file and tls_key_file"
                .into(),
        ));
    }
    Ok(())
}

/// Checks `vnfd_ids`: identifiers of at most 255 characters without `,` or control
/// characters, at least one exactly when `callback_uri` is set (`subscribing`).
fn check_vnfd_ids(vnfd_ids: &[String], subscribing: bool) -> Result<(), KeyError> {
    if vnfd_ids
        .iter()
        .any(|v| v.is_empty() || v.len() > 255 || v.chars().any(|c| c.is_control() || c == ','))
    {
        return Err((
            "tacker.vnfd_ids",
            "each must be a non-empty identifier of at most 255 characters without ',' or control characters".into(),
        ));
    }
    match (subscribing, vnfd_ids.is_empty()) {
        (true, true) => Err((
            "tacker.vnfd_ids",
            "must name at least one vnfdId when callback_uri is set".into(),
        )),
        (false, false) => Err((
            "tacker.callback_uri",
            "is required with vnfd_ids (it is the subscription's callbackUri)".into(),
        )),
        _ => Ok(()),
    }
}

/// Checks `[tacker.packages]`: each key one of `vnfd_ids`, each package a non-empty path
/// without `..`.
fn check_packages(
    packages: &BTreeMap<String, PathBuf>,
    vnfd_ids: &[String],
) -> Result<(), KeyError> {
    for (vnfd, pkg) in packages {
        if !vnfd_ids.contains(vnfd) {
            return Err((
                "tacker.packages",
                format!("{vnfd:?} is not one of tacker.vnfd_ids"),
            ));
        }
        if pkg.as_os_str().is_empty()
            || pkg
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err((
                "tacker.packages",
                format!("the package of {vnfd:?} must be a non-empty path without `..`"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConfigError, Settings};

    fn parse(text: &str) -> Result<Settings, ConfigError> {
        Settings::parse(text, Path::new("test.toml"))
    }

    /// The effective TOML of `ok` with `register_vim = false` added.
    fn off_settings_toml(ok: &str) -> String {
        parse(&format!("{ok}register_vim = false\n"))
            .unwrap()
            .to_toml()
    }

    #[test]
    fn tacker_subscription_keys_are_checked() {
        let base = "[cloud]\ncloud = \"testbed\"\n\n[tacker]\nlisten = \"127.0.0.1:9890\"\n\
                    username = \"tacker\"\npassword_file = \"/etc/vnfkeeper/tacker.pw\"\n";
        let ok = format!(
            "{base}callback_uri = \"http://10.0.0.5:9890/vnfkeeper/notifications\"\n\
             vnfd_ids = [\"b1bb0ce7\"]\nauto_heal = true\ncloud = \"tacker-admin\"\n"
        );
        let s = parse(&ok).unwrap();
        let t = s.tacker.clone().unwrap();
        assert_eq!(t.vnfd_ids, ["b1bb0ce7"]);
        assert!(t.auto_heal);
        assert_eq!(t.poll_interval, Duration::from_secs(60));
        assert_eq!(
            t.cloud_settings(s.cloud.as_ref()).unwrap().cloud,
            "tacker-admin"
        );
        // The effective TOML parses back to the same settings.
        assert_eq!(parse(&s.to_toml()).unwrap().tacker, Some(t));
        assert!(
            s.tacker.as_ref().unwrap().register_vim,
            "register_vim defaults to true"
        );
        let off = parse(&format!("{ok}register_vim = false\n")).unwrap();
        let off = off.tacker.unwrap();
        assert!(!off.register_vim);
        assert_eq!(parse(&off_settings_toml(&ok)).unwrap().tacker, Some(off));
        // Without the keys: the endpoint only, as before.
        let t = parse(base).unwrap().tacker.unwrap();
        assert_eq!(
            (t.callback_uri, t.vnfd_ids.len(), t.auto_heal),
            (None, 0, false)
        );
        for (text, key) in [
            (
                ok.replace("/vnfkeeper/notifications", "/other"),
                "tacker.callback_uri",
            ),
            (ok.replace("http://", "ftp://"), "tacker.callback_uri"),
            (ok.replace("http://", "http://u:p@"), "tacker.callback_uri"),
            (
                ok.replace("vnfd_ids = [\"b1bb0ce7\"]", "vnfd_ids = []"),
                "tacker.vnfd_ids",
            ),
            (
                ok.replace("vnfd_ids = [\"b1bb0ce7\"]", "vnfd_ids = [\"\"]"),
                "tacker.vnfd_ids",
            ),
            (format!("{base}vnfd_ids = [\"x\"]\n"), "tacker.callback_uri"),
            (
                ok.replace("[cloud]\ncloud = \"testbed\"\n", ""),
                "tacker.callback_uri",
            ),
            (
                format!("{ok}poll_interval_secs = 1\n"),
                "tacker.poll_interval_secs",
            ),
            (
                format!("{ok}\n[tacker.packages]\n\"other\" = \"pv\"\n"),
                "tacker.packages",
            ),
            (
                format!("{ok}\n[tacker.packages]\n\"b1bb0ce7\" = \"../pv\"\n"),
                "tacker.packages",
            ),
        ] {
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.contains(&format!("`{key}`")), "{text}: {e}");
        }
        // The vnfdId → package mapping, and its effective TOML.
        let s = parse(&format!(
            "{ok}\n[tacker.packages]\n\"b1bb0ce7\" = \"pv-k8s-cluster\"\n"
        ))
        .unwrap();
        let t = s.tacker.clone().unwrap();
        assert_eq!(
            t.packages.get("b1bb0ce7").map(|p| p.display().to_string()),
            Some("pv-k8s-cluster".to_string())
        );
        assert_eq!(parse(&s.to_toml()).unwrap().tacker, Some(t));
    }

    #[test]
    fn tacker_section_is_checked_and_its_password_file_must_be_private() {
        assert_eq!(parse("").unwrap().tacker, None);
        let dir = tempfile::tempdir().unwrap();
        let pw = dir.path().join("pw");
        let ok = format!(
            "[tacker]\nlisten = \"127.0.0.1:9890\"\nusername = \"tacker\"\npassword_file = \"{}\"\n",
            pw.display()
        );
        let t = parse(&ok).unwrap().tacker.unwrap();
        assert_eq!(t.callback_path, "/vnfkeeper/notifications");
        assert_eq!(t.max_body_bytes, 1024 * 1024);
        assert!(parse(&ok).unwrap().to_toml().contains("[tacker]"));
        for (extra, key) in [
            ("auth_type = \"OAUTH2_CLIENT_CERT\"\n", "tacker.auth_type"),
            (
                "token_path = \"/vnfkeeper/notifications\"\n",
                "tacker.token_path",
            ),
            ("token_lifetime_secs = 59\n", "tacker.token_lifetime_secs"),
            ("tls_cert_file = \"/etc/c.pem\"\n", "tacker.tls_key_file"),
            ("tls_key_file = \"/etc/k.pem\"\n", "tacker.tls_cert_file"),
            (
                "tls_cert_file = \"c.pem\"\ntls_key_file = \"/etc/k.pem\"\n",
                "tacker.tls_cert_file",
            ),
            ("callback_path = \"/metrics\"\n", "tacker.callback_path"),
            ("callback_path = \"no-slash\"\n", "tacker.callback_path"),
            ("max_body_kib = 0\n", "tacker.max_body_kib"),
        ] {
            let e = parse(&format!("{ok}{extra}")).unwrap_err().to_string();
            assert!(e.contains(&format!("`{key}`")), "{extra}: {e}");
        }
        let e = parse(&ok.replace("\"tacker\"\n", "\"a:b\"\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`tacker.username`"), "{e}");
        let e = parse(&ok.replace(&pw.display().to_string(), "pw"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`tacker.password_file`"), "{e}");

        use std::os::unix::fs::PermissionsExt as _;
        assert!(
            t.read_password()
                .unwrap_err()
                .to_string()
                .contains("No such file")
        );
        std::fs::write(&pw, "s3cret\nignored\n").unwrap();
        std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = t.read_password().unwrap_err().to_string();
        assert!(
            e.contains("readable by others") && !e.contains("s3cret"),
            "{e}"
        );
        std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(t.read_password().unwrap().expose(), "s3cret");
        std::fs::write(&pw, "\n").unwrap();
        assert!(t.read_password().unwrap_err().to_string().contains("empty"));
    }

    #[test]
    fn tacker_oauth2_and_tls_keys() {
        let base = "[cloud]\ncloud = \"testbed\"\n\n[tacker]\nlisten = \"127.0.0.1:9890\"\n\
                    username = \"client\"\npassword_file = \"/etc/vnfkeeper/secret\"\n\
                    auth_type = \"OAUTH2_CLIENT_CREDENTIALS\"\nvnfd_ids = [\"v\"]\n";
        let tls =
            "tls_cert_file = \"/etc/vnfkeeper/c.pem\"\ntls_key_file = \"/etc/vnfkeeper/k.pem\"\n";
        let https = "callback_uri = \"https://vk.example:9890/vnfkeeper/notifications\"\n";
        let s = parse(&format!("{base}{https}{tls}")).unwrap();
        let t = s.tacker.clone().unwrap();
        assert_eq!(t.auth_type, TackerAuth::Oauth2ClientCredentials);
        assert_eq!(t.token_lifetime, Duration::from_secs(3600));
        assert_eq!(
            t.token_endpoint().as_deref(),
            Some("https://vk.example:9890/vnfkeeper/token")
        );
        assert_eq!(
            t.tls.as_ref().unwrap().key_file,
            PathBuf::from("/etc/vnfkeeper/k.pem")
        );
        assert_eq!(parse(&s.to_toml()).unwrap().tacker, Some(t));
        // TLS needs https://, https:// needs TLS, and TLS is refused on the metrics' address.
        for (text, key) in [
            (
                format!("{base}{}{tls}", https.replace("https", "http")),
                "tacker.callback_uri",
            ),
            (format!("{base}{https}"), "tacker.callback_uri"),
            (
                format!("{base}{https}{tls}\n[metrics]\nlisten = \"127.0.0.1:9890\"\n"),
                "tacker.tls_cert_file",
            ),
        ] {
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.contains(&format!("`{key}`")), "{text}: {e}");
        }
        // Without TLS the metrics may share the socket.
        let http = https.replace("https", "http");
        assert!(
            parse(&format!(
                "{base}{http}\n[metrics]\nlisten = \"127.0.0.1:9890\"\n"
            ))
            .is_ok()
        );
    }
}
