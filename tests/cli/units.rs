//! The systemd units as shipped: the shard template `vnfkeeper@.service` is hardened exactly like
//! `vnfkeeper.service`, passes `systemd-analyze verify` as an instance, and both packages ship it.

use std::path::Path;
use std::process::Command;

use crate::support::repo_root;

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo_root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The unit's lines from `# Hardening.` up to the `[Install]` section, comments and blank
/// lines left out.
fn hardening(unit: &str) -> Vec<&str> {
    let start = unit.find("# Hardening.").expect("a hardening block");
    let end = unit.find("[Install]").expect("an [Install] section");
    unit[start..end]
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

#[test]
fn the_shard_template_is_hardened_like_the_main_unit_and_shipped() {
    let main = read("units/vnfkeeper.service");
    let template = read("units/vnfkeeper@.service");
    let hardened = hardening(&main);
    assert!(hardened.len() >= 20, "{hardened:?}");
    assert_eq!(hardening(&template), hardened);
    for line in [
        "ProtectSystem=strict",
        "User=vnfkeeper",
        "UMask=0027",
        "Type=notify",
    ] {
        assert!(template.lines().any(|l| l == line), "template lacks {line}");
    }
    assert!(
        template
            .lines()
            .any(|l| l == "ExecStart=/usr/bin/vnfkeeper --shard %i daemon")
    );
    for unit in [&main, &template] {
        let prevent = unit
            .lines()
            .find_map(|l| l.strip_prefix("RestartPreventExitStatus="))
            .expect("RestartPreventExitStatus");
        for status in ["78", "79"] {
            assert!(prevent.split(' ').any(|s| s == status), "{prevent}");
        }
    }
    let cargo = read("Cargo.toml");
    let deb = cargo.find("[package.metadata.deb]").unwrap();
    let rpm = cargo.find("[package.metadata.generate-rpm]").unwrap();
    let (deb_part, rpm_part) = (&cargo[deb..rpm], &cargo[rpm..]);
    assert!(deb_part.contains(r#"["units/vnfkeeper@.service", "usr/lib/systemd/system/", "644"]"#));
    assert!(rpm_part.contains(
        r#"source = "units/vnfkeeper@.service", dest = "/usr/lib/systemd/system/vnfkeeper@.service""#
    ));
}

#[test]
fn an_instance_of_the_shard_template_passes_systemd_analyze_verify() {
    let dir = tempfile::tempdir().unwrap();
    // The instance as systemd would load it, with the binaries of this machine (verify checks
    // that each command is executable).
    let install = which("install");
    let unit = read("units/vnfkeeper@.service")
        .replace("/usr/bin/vnfkeeper", env!("CARGO_BIN_EXE_vnfkeeper"))
        .replace("/usr/bin/install", &install);
    let path = dir.path().join("vnfkeeper@edge-1.service");
    std::fs::write(&path, unit).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .expect("systemd-analyze (package systemd) runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("vnfkeeper@edge-1.service:"), "{text}");
}

fn which(name: &str) -> String {
    ["/usr/bin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{name} not found"))
        .display()
        .to_string()
}
