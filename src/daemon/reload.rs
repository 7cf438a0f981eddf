//! What `config check` checks beyond the file ([`check_outside`]), and SIGHUP's reload
//! ([`reload`]): all of a new file or none of it.
//!
//! A reload reads and checks the file as `config check` does (every key, then the files it
//! names), then compares it with the running settings. Applied live: `packages_dir` (without
//! companion mode), `[reconcile]`, `[intake]`, and in `[tacker]` `username`, `password_file`
//! (re-read at each reload, so a changed password counts too) and `auto_heal`. Every other
//! key is read at start only: a file that changes one is refused whole, naming the keys, and the
//! running settings stay — as does any file that fails a check. The journal says which:
//! `configuration reloaded: …` (INFO, naming what changed) or `configuration reload refused,
//! keeping the running configuration: …` (ERROR, with the reason).

use std::path::Path;

use crate::config::tacker::TackerSettings;
use crate::config::{ConfigError, Settings};
use crate::tacker::credentials::Credentials;
use vnfkeeper_core::wire::Secret;

/// Checks what `settings` (read from `path`) names outside the file, as the daemon's start
/// uses it: `[cloud]`'s clouds.yaml is readable and its entry `cloud` exists with the keys and
/// an `auth_type` vnfkeeper supports (offline: Keystone is not asked), `tacker.password_file`
/// is read (its password is returned, `None` without `[tacker]`), the TLS certificate and key
/// load and fit, and with `tacker.callback_uri` the clouds.yaml entry reaching Tacker exists.
/// Errors: [`ConfigError::Invalid`] naming the key and the file (never a file's content).
pub fn check_outside(
    settings: &Settings,
    path: &Path,
) -> Result<Option<Secret<String>>, ConfigError> {
    let invalid = |key: &str, reason: String| ConfigError::Invalid {
        path: path.into(),
        key: key.into(),
        reason,
    };
    if let Some(c) = &settings.cloud {
        std::fs::File::open(&c.clouds_yaml).map_err(|e| {
            invalid(
                "cloud.clouds_yaml",
                format!("cannot read {}: {e}", c.clouds_yaml.display()),
            )
        })?;
        crate::cloud::OpenStackCloud::check_entry(&c.clouds_yaml, &c.cloud)
            .map_err(|e| invalid("cloud.cloud", e.to_string()))?;
    }
    let Some(t) = &settings.tacker else {
        return Ok(None);
    };
    let password = t
        .read_password()
        .map_err(|e| invalid("tacker.password_file", e.to_string()))?;
    if let Some(files) = &t.tls {
        super::tls::server_config(files).map_err(|e| invalid(e.setting(), e.to_string()))?;
    }
    // Companion mode reaches Tacker through this entry: it must exist now, not at 3 a.m.
    if t.callback_uri.is_some()
        && let Some(c) = t.cloud_settings(settings.cloud.as_ref())
    {
        crate::cloud::OpenStackCloud::check_entry(&c.clouds_yaml, &c.cloud)
            .map_err(|e| invalid("tacker.cloud", e.to_string()))?;
    }
    Ok(Some(password))
}

/// The keys whose change needs a restart that differ between `old` and `new`, in file order.
/// `password_changed`: the password of `tacker.password_file` differs from the one in force.
fn restart_only(old: &Settings, new: &Settings, password_changed: bool) -> Vec<&'static str> {
    let companion = old
        .tacker
        .as_ref()
        .is_some_and(|t| t.callback_uri.is_some());
    let mut keys = Vec::new();
    let mut differ = |key: &'static str, changed: bool| {
        if changed {
            keys.push(key);
        }
    };
    differ("spool_dir", old.spool_dir != new.spool_dir);
    differ("database", old.database != new.database);
    // Companion mode keeps the package paths it started with.
    differ(
        "packages_dir (with tacker.callback_uri)",
        companion && old.packages_dir != new.packages_dir,
    );
    differ("[cloud]", old.cloud != new.cloud);
    differ("[limits]", old.limits != new.limits);
    differ("[metrics]", old.metrics != new.metrics);
    // Its checks and synchronous=FULL act when the daemon starts.
    differ("[ha]", old.ha != new.ha);
    match (&old.tacker, &new.tacker) {
        (None, None) => {}
        (Some(_), None) | (None, Some(_)) => differ("[tacker]", true),
        (Some(a), Some(b)) => {
            for key in tacker_restart_only(a, b) {
                differ(key, true);
            }
            // The subscription kept in Tacker carries the credentials it presents.
            let credentials_changed = a.username != b.username || password_changed;
            differ(
                "tacker.username and password (with tacker.callback_uri)",
                companion && credentials_changed,
            );
        }
    }
    keys
}

/// The `[tacker]` keys read at start only that differ between `a` and `b`.
fn tacker_restart_only(a: &TackerSettings, b: &TackerSettings) -> Vec<&'static str> {
    [
        ("tacker.listen", a.listen != b.listen),
        ("tacker.callback_path", a.callback_path != b.callback_path),
        ("tacker.auth_type", a.auth_type != b.auth_type),
        ("tacker.token_path", a.token_path != b.token_path),
        (
            "tacker.token_lifetime_secs",
            a.token_lifetime != b.token_lifetime,
        ),
        ("tacker.tls_cert_file and tls_key_file", a.tls != b.tls),
        ("tacker.max_body_kib", a.max_body_bytes != b.max_body_bytes),
        ("tacker.cloud", a.cloud != b.cloud),
        ("tacker.callback_uri", a.callback_uri != b.callback_uri),
        ("tacker.vnfd_ids", a.vnfd_ids != b.vnfd_ids),
        (
            "tacker.poll_interval_secs",
            a.poll_interval != b.poll_interval,
        ),
        ("[tacker.packages]", a.packages != b.packages),
        ("tacker.register_vim", a.register_vim != b.register_vim),
    ]
    .into_iter()
    .filter_map(|(key, changed)| changed.then_some(key))
    .collect()
}

/// What changed and is applied live, for the journal line.
fn applied(old: &Settings, new: &Settings, credentials_changed: bool) -> Vec<&'static str> {
    let mut what = Vec::new();
    if old.packages_dir != new.packages_dir {
        what.push("packages_dir");
    }
    if old.reconcile != new.reconcile {
        what.push("[reconcile]");
    }
    if old.intake != new.intake {
        what.push("[intake]");
    }
    if credentials_changed {
        what.push("tacker.username and password");
    }
    if let (Some(a), Some(b)) = (&old.tacker, &new.tacker) {
        if a.password_file != b.password_file {
            what.push("tacker.password_file");
        }
        if a.auto_heal != b.auto_heal {
            what.push("tacker.auto_heal");
        }
    }
    what
}

/// SIGHUP: reads `config_path` again and decides against `running`, the settings in force.
/// `Ok((settings, applied))`: every check passed and nothing that needs a restart changed; the
/// endpoint's `credentials` (when the endpoint runs) are replaced already, the caller puts
/// `settings` in force; `applied` names what changed (empty: nothing did). Errors: why the
/// whole file is refused (an invalid key, an unreadable password file or TLS file, a change that
/// needs a restart) — nothing was changed.
pub(super) fn reload(
    config_path: &Path,
    running: &Settings,
    credentials: Option<&Credentials>,
) -> Result<(Settings, Vec<&'static str>), String> {
    let new = Settings::load(config_path).map_err(|e| e.to_string())?;
    let password = check_outside(&new, config_path).map_err(|e| e.to_string())?;
    let password_changed = match (&password, credentials) {
        (Some(p), Some(c)) => c.with(|_, old, _| old.expose() != p.expose()),
        _ => false,
    };
    let restart = restart_only(running, &new, password_changed);
    if !restart.is_empty() {
        return Err(format!(
            "{} changed, which takes a restart (systemctl restart vnfkeeper)",
            restart.join(", ")
        ));
    }
    let credentials_changed = match (&new.tacker, password, credentials) {
        (Some(t), Some(p), Some(c)) => c.replace(t.username.clone(), p),
        _ => false,
    };
    let applied = applied(running, &new, credentials_changed);
    Ok((new, applied))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(extra: &str) -> Settings {
        let text = format!(
            "spool_dir = \"/s\"\ndatabase = \"/d/state.db\"\n{extra}\n[tacker]\n\
             listen = \"127.0.0.1:9890\"\nusername = \"tacker\"\npassword_file = \"/p\"\n"
        );
        Settings::parse(&text, Path::new("t.toml")).unwrap()
    }

    #[test]
    fn start_only_keys_are_named_and_live_ones_are_not() {
        let old = settings("");
        assert!(restart_only(&old, &old, false).is_empty());
        // Live: the reconcile section, the credentials (no companion mode).
        let live = settings("[reconcile]\nenabled = false\n");
        assert!(restart_only(&old, &live, true).is_empty());
        assert_eq!(
            applied(&old, &live, true),
            ["[reconcile]", "tacker.username and password"]
        );
        // Start only: named.
        let moved = settings(
            "[metrics]\nlisten = \"127.0.0.1:9464\"\n[limits]\nmax_parallel_operations = 2\n",
        );
        assert_eq!(restart_only(&old, &moved, false), ["[limits]", "[metrics]"]);
        let mut other = old.clone();
        if let Some(t) = other.tacker.as_mut() {
            t.listen = "127.0.0.1:9891".parse().unwrap();
        }
        assert_eq!(restart_only(&old, &other, false), ["tacker.listen"]);
        other.tacker = None;
        assert_eq!(restart_only(&old, &other, false), ["[tacker]"]);
        let mut ha = old.clone();
        ha.ha = Some(crate::config::HaSettings {
            require_mount: "/d".into(),
        });
        assert_eq!(restart_only(&old, &ha, false), ["[ha]"]);
    }
}
