//! Host profiles: which distribution a host claims to be.
//!
//! The machine the hosts share is Debian 12, so by default ([`HostProfile::Debian`]) a host is
//! what the machine is. Software written for Ubuntu gates on `/etc/os-release` (Tacker's sample
//! Kubernetes MgmtDriver runs `cat /etc/os-release | grep "PRETTY_NAME=" | grep -c "Ubuntu
//! 20.04"`) and expects tools to be absent until its install step put them there (`kubectl:
//! command not found`). [`HostProfile::Ubuntu2004`] gives a host Ubuntu 20.04's
//! `/etc/os-release`, `/etc/lsb-release` and `/etc/issue`, and removes `kubectl` from its `PATH`
//! until `apt-get install kubectl` (the apt stand-in links the kubectl stand-in to
//! `/usr/bin/kubectl`, where the Kubernetes package puts the binary). Its `sleep` waits a tenth
//! of the requested time (`assets/sleep.sh`): the fixed waits of Tacker's install script are for
//! kubelet, pods and apt, which are stand-ins here. Its `chown` takes `OWNER.GROUP` without
//! the warning the machine's newer coreutils prints (`assets/chown.sh`).
//!
//! The simulated cloud picks the profile of a server from its image's Glance properties
//! ([`HostProfile::from_image_properties`]: `os_distro=ubuntu`, `os_version=20.04`, the
//! properties of the Glance "useful image properties" list that real images carry).

use std::collections::BTreeMap;

/// What a host claims to be.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum HostProfile {
    /// The machine's own distribution (Debian 12): `/etc/os-release` of the machine, every
    /// stand-in on `PATH` from the start.
    #[default]
    Debian,
    /// Ubuntu 20.04 LTS (focal): Ubuntu's `/etc/os-release`, `/etc/lsb-release`, `/etc/issue`;
    /// `kubectl` absent until `apt-get install kubectl`.
    Ubuntu2004,
}

/// Ubuntu 20.04.6 LTS's `/usr/lib/os-release` (os-release(5) fields; `/etc/os-release` is a
/// symbolic link to it, as on Ubuntu).
const UBUNTU_2004_OS_RELEASE: &str = "NAME=\"Ubuntu\"
VERSION=\"20.04.6 LTS (Focal Fossa)\"
ID=ubuntu
ID_LIKE=debian
PRETTY_NAME=\"Ubuntu 20.04.6 LTS\"
VERSION_ID=\"20.04\"
HOME_URL=\"https://www.ubuntu.com/\"
SUPPORT_URL=\"https://help.ubuntu.com/\"
BUG_REPORT_URL=\"https://bugs.launchpad.net/ubuntu/\"
PRIVACY_POLICY_URL=\"https://www.ubuntu.com/legal/terms-and-policies/privacy-policy\"
VERSION_CODENAME=focal
UBUNTU_CODENAME=focal
";

/// `sleep` of the Ubuntu profile's hosts: waits a tenth of the requested time (the stand-ins the
/// fixed waits of scripts written for real nodes are for are done when their command returns;
/// the file's header says which waits).
const SLEEP_SH: &str = include_str!("assets/sleep.sh");

/// `chown` of the Ubuntu profile's hosts: takes `OWNER.GROUP` silently, as Ubuntu 20.04's
/// coreutils 8.30 does (the machine's coreutils 9.1 warns on stderr; the file's header says
/// which scripts that breaks).
const CHOWN_SH: &str = include_str!("assets/chown.sh");

/// Ubuntu 20.04.6 LTS's `/etc/lsb-release` (what `lsb_release` reads).
const UBUNTU_2004_LSB_RELEASE: &str = "DISTRIB_ID=Ubuntu
DISTRIB_RELEASE=20.04
DISTRIB_CODENAME=focal
DISTRIB_DESCRIPTION=\"Ubuntu 20.04.6 LTS\"
";

impl HostProfile {
    /// The Glance properties a real cloud image of this distribution carries, which select this
    /// profile ([`HostProfile::from_image_properties`]): `os_distro=ubuntu`, `os_version=20.04`
    /// for Ubuntu, none for Debian (the default).
    pub fn image_properties(self) -> BTreeMap<String, String> {
        match self {
            HostProfile::Debian => BTreeMap::new(),
            HostProfile::Ubuntu2004 => [("os_distro", "ubuntu"), ("os_version", "20.04")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// The profile for an image with these Glance properties: `os_distro` `ubuntu` (any case)
    /// with `os_version` `20.04` is [`HostProfile::Ubuntu2004`]; anything else (other
    /// distributions or versions, no properties) is [`HostProfile::Debian`].
    pub fn from_image_properties(props: &BTreeMap<String, String>) -> HostProfile {
        let distro = props.get("os_distro").map(|d| d.to_ascii_lowercase());
        let version = props.get("os_version").map(String::as_str);
        match (distro.as_deref(), version) {
            (Some("ubuntu"), Some("20.04")) => HostProfile::Ubuntu2004,
            _ => HostProfile::Debian,
        }
    }

    /// The name written to the host's `/etc/testbed/profile` (read by the stand-ins):
    /// `debian-12` or `ubuntu-20.04`.
    pub fn name(self) -> &'static str {
        match self {
            HostProfile::Debian => "debian-12",
            HostProfile::Ubuntu2004 => "ubuntu-20.04",
        }
    }

    /// Per-host files of the profile: (path relative to `/`, content, mode). Empty for Debian
    /// (the machine's own files show through). Ubuntu's include `/usr/local/bin/sleep`, which
    /// waits a tenth of the requested time, and `/usr/local/bin/chown` (coreutils 8.30's
    /// `OWNER.GROUP`).
    pub(crate) fn files(self) -> Vec<(&'static str, &'static str, u32)> {
        match self {
            HostProfile::Debian => Vec::new(),
            HostProfile::Ubuntu2004 => vec![
                ("usr/lib/os-release", UBUNTU_2004_OS_RELEASE, 0o644),
                ("etc/lsb-release", UBUNTU_2004_LSB_RELEASE, 0o644),
                ("etc/issue", "Ubuntu 20.04.6 LTS \\n \\l\n\n", 0o644),
                ("etc/issue.net", "Ubuntu 20.04.6 LTS\n", 0o644),
                ("etc/debian_version", "bullseye/sid\n", 0o644),
                ("usr/local/bin/sleep", SLEEP_SH, 0o755),
                ("usr/local/bin/chown", CHOWN_SH, 0o755),
            ],
        }
    }

    /// Symbolic links of the profile: (path relative to `/`, target).
    pub(crate) fn links(self) -> Vec<(&'static str, &'static str)> {
        match self {
            HostProfile::Debian => Vec::new(),
            HostProfile::Ubuntu2004 => vec![("etc/os-release", "../usr/lib/os-release")],
        }
    }

    /// Absolute paths removed from the host's root when it starts (programs that do not exist
    /// on a fresh image of this distribution): the kubectl stand-in and the machine's own
    /// kubectl for Ubuntu, and kubeadm (the machine has none today; a kubeadm installed on the
    /// machine later must not show through either).
    pub(crate) fn absent(self) -> &'static [&'static str] {
        match self {
            HostProfile::Debian => &[],
            HostProfile::Ubuntu2004 => &[
                "/usr/local/bin/kubectl",
                "/usr/bin/kubectl",
                "/usr/local/bin/kubeadm",
                "/usr/bin/kubeadm",
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn profile_from_glance_properties() {
        assert_eq!(
            HostProfile::from_image_properties(&props(&[
                ("os_distro", "ubuntu"),
                ("os_version", "20.04")
            ])),
            HostProfile::Ubuntu2004
        );
        assert_eq!(
            HostProfile::from_image_properties(&props(&[
                ("os_distro", "Ubuntu"),
                ("os_version", "20.04")
            ])),
            HostProfile::Ubuntu2004
        );
        for other in [
            props(&[]),
            props(&[("os_distro", "ubuntu")]),
            props(&[("os_distro", "ubuntu"), ("os_version", "22.04")]),
            props(&[("os_distro", "debian"), ("os_version", "12")]),
        ] {
            assert_eq!(
                HostProfile::from_image_properties(&other),
                HostProfile::Debian
            );
        }
    }

    #[test]
    fn image_properties_select_their_profile() {
        for p in [HostProfile::Debian, HostProfile::Ubuntu2004] {
            assert_eq!(HostProfile::from_image_properties(&p.image_properties()), p);
        }
    }

    #[test]
    fn ubuntu_os_release_has_the_fields_scripts_read() {
        let files = HostProfile::Ubuntu2004.files();
        let (_, text, _) = files
            .iter()
            .find(|(p, _, _)| *p == "usr/lib/os-release")
            .expect("os-release");
        for line in [
            "ID=ubuntu",
            "VERSION_ID=\"20.04\"",
            "VERSION_CODENAME=focal",
            "PRETTY_NAME=\"Ubuntu 20.04.6 LTS\"",
            "NAME=\"Ubuntu\"",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing");
        }
        assert!(HostProfile::Debian.files().is_empty());
        assert!(HostProfile::Debian.absent().is_empty());
    }
}
