//! Text that hosts and clouds print: Nova's console output ([`console::parse`], the host keys
//! cloud-init lists), `ansible-playbook`'s JSON-lines events ([`ansible::PlaybookRun`]) and
//! each line as a `trust.observe` verdict ([`trust::parse_observed`]) and a `node.nic_mtu`
//! verdict ([`kubespray::calico_mtu`]), as the engine reads them; and a kubeconfig's server
//! ([`artifact::kubeconfig_server`]).
//!
//! Properties: no panic; the console's lists hold at most [`console::MAX_ENTRIES`] entries each
//! and every listed key is found by [`console::ConsoleHostKeys::lists`]; a run that succeeded
//! has a play recap without failed or unreachable hosts and names no failure; a failure's
//! message is bounded; what is shown of an event has no control characters (a line given back
//! unread is the line itself); an observed `daemon.json` digest is 64 hex digits or `absent`; a
//! Calico MTU is within 576..=65535.

use vnfkeeper_core::ansible;
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
    let mut run = ansible::PlaybookRun::default();
    for line in text.lines() {
        for shown in run.feed(line) {
            assert!(
                shown == line || !shown.chars().any(char::is_control),
                "an event shown with control characters"
            );
        }
    }
    assert_eq!(
        run,
        ansible::PlaybookRun::parse(text),
        "fed and parsed differ"
    );
    if run.succeeded() {
        let stats = run.stats.as_ref().expect("a success without a recap");
        assert!(
            stats
                .values()
                .all(|c| c.failures == 0 && c.unreachable == 0),
            "a success with a failed host"
        );
        assert!(run.failures().is_empty(), "a success names a failure");
    }
    for f in run.failures() {
        assert!(
            f.message.chars().count() <= ansible::MESSAGE_LIMIT,
            "an unbounded message"
        );
    }
    let _ = run.summary();
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
