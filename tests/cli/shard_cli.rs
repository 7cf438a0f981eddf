//! `--shard NAME`: the configuration `/etc/vnfkeeper/NAME.toml`, a `--config` given wins, and a
//! name that is not a shard name is a usage error before any file is read.

use std::process::{Command, Output};

use crate::support::Install;

fn vnfkeeper(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vnfkeeper"))
        .args(args)
        .env_remove("VNFKEEPER_CONFIG")
        .env_remove("VNFKEEPER_SHARD")
        .output()
        .unwrap()
}

#[test]
fn a_shard_reads_its_own_file_and_config_wins() {
    let shard = "zz-absent-shard-7";
    let file = format!("/etc/vnfkeeper/{shard}.toml");
    assert!(!std::path::Path::new(&file).exists(), "{file} exists");
    for args in [
        ["--shard", shard, "config", "check"],
        ["config", "check", "--shard", shard],
    ] {
        let out = vnfkeeper(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{args:?}: {err}");
        assert!(err.contains(&format!("cannot read {file}")), "{err}");
    }
    // The environment selects a shard too.
    let out = Command::new(env!("CARGO_BIN_EXE_vnfkeeper"))
        .args(["ops"])
        .env_remove("VNFKEEPER_CONFIG")
        .env("VNFKEEPER_SHARD", shard)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&file));

    let install = Install::new();
    let config = install.config.to_str().unwrap();
    let out = vnfkeeper(&["--shard", shard, "config", "check", "--config", config]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(&install.spool.display().to_string()));
}

#[test]
fn an_invalid_shard_name_is_a_usage_error() {
    for bad in ["../../tmp/x", "Edge", "-a", "a_b", &"x".repeat(33)] {
        let out = vnfkeeper(&[&format!("--shard={bad}"), "config", "check"]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("shard name"), "{bad}: {err}");
    }
}
