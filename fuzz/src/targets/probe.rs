//! Text that hosts and clouds print: Nova's console output ([`console::parse`], the host keys
//! cloud-init lists), `ansible-playbook`'s output ([`kubespray::parse_recap`]) and each line as
//! a `trust.observe` verdict ([`trust::parse_observed`]) and a `node.nic_mtu` verdict
//! ([`kubespray::calico_mtu`]), as the engine reads them; and a
//! kubeconfig's server ([`artifact::kubeconfig_server`]).
//!
//! Properties: no panic; the console's lists hold at most [`console::MAX_ENTRIES`] entries each
//! and every listed key is found by [`console::ConsoleHostKeys::lists`]; a recap that succeeded
//! was seen and names no failure; an observed `daemon.json` digest is 64 hex digits or `absent`; a
//! Calico MTU is within 576..=65535.

use vnfkeeper_core::artifact;
use vnfkeeper_core::console;
use vnfkeeper_core::flavour::{kubespray, trust};

/// The target: see the module documentation.
pub fn run(data: &[u8]) {
    let text = crate::text(data);
    if let Some(keys) = console::parse(text) {
        assert!(
            keys.fingerprints.len() <= console::MAX_ENTRIES,
            "too many fingerprints"
        );
        assert!(keys.keys.len() <= console::MAX_ENTRIES, "too many keys");
        assert!(
            !keys.fingerprints.is_empty() || !keys.keys.is_empty(),
            "a listing without any entry"
        );
        for k in &keys.keys {
            assert!(
                keys.lists("SHA256:none", k),
                "a listed key is not found: {k}"
            );
        }
    }
    let recap = kubespray::parse_recap(text);
    if recap.succeeded() {
        assert!(recap.seen);
        assert!(
            recap
                .hosts
                .values()
                .all(|c| c.failed == 0 && c.unreachable == 0),
            "a success with a failed host"
        );
    }
    let _ = recap.summary();
    for line in text.lines() {
        if let Ok(o) = trust::parse_observed(line) {
            let ok = o.sha256 == "absent"
                || (o.sha256.len() == 64 && o.sha256.bytes().all(|b| b.is_ascii_hexdigit()));
            assert!(ok, "observed digest {:?}", o.sha256);
        }
        if let Ok(mtu) = kubespray::calico_mtu(line) {
            assert!(
                (576..=65535).contains(&mtu.mtu),
                "MTU {} out of range",
                mtu.mtu
            );
        }
    }
    let _ = artifact::kubeconfig_server(text);
}
