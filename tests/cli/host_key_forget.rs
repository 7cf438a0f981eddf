//! `vnfkeeper host-key forget <vnfc>`: clears the pin with an audit event naming the caller and
//! prints what it removed; an unknown VNFC is an error with a non-zero exit status.

use std::process::Command;

use vnfkeeper::store::Store;
use vnfkeeper_core::console::FirstContact;
use vnfkeeper_core::model::{Timestamp, VnfInstanceId, VnfcId};

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGYiNiOOo3XHRcWQS07T3ilpTDJspX52tih3/dP/OhwY";
const FP: &str = "SHA256:U2n2I1UYgj1BSdckUyZctgaWW8CSlL+QfXh3bjuiIFY";

fn now() -> Timestamp {
    Timestamp(chrono::Utc::now())
}

fn forget(config: &std::path::Path, vnfc: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vnfkeeper"))
        .args(["host-key", "forget", "--config"])
        .arg(config)
        .arg(vnfc)
        .output()
        .unwrap()
}

/// (kind, vnfc_id, message, evidence) of every event, oldest first.
fn events(db: &std::path::Path) -> Vec<(String, Option<String>, String, String)> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut st = c
        .prepare("SELECT kind, vnfc_id, message, evidence FROM event ORDER BY id")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn forget_clears_the_pin_records_who_and_refuses_unknown_vnfcs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let config = dir.path().join("vnfkeeper.toml");
    std::fs::create_dir_all(dir.path().join("spool")).unwrap();
    std::fs::write(
        &config,
        format!(
            "spool_dir = \"{}\"\ndatabase = \"{}\"\n",
            dir.path().join("spool").display(),
            db.display()
        ),
    )
    .unwrap();
    {
        let mut store = Store::open(&db).unwrap();
        store
            .write(|tx| {
                tx.create_instance_if_missing(&VnfInstanceId::from("vnf-1"), now())
                    .map(|_| ())
            })
            .unwrap();
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute(
            "INSERT INTO vnfc (id, vnf_instance_id, vdu_id, stack_name, stack_id, resource_name, server_id, created_at, updated_at)
             VALUES ('vnfc-a', 'vnf-1', 'masterNode', 's', 'sid', 'masterNode', 'srv-a', '2026-11-24T00:00:00Z', '2026-11-24T00:00:00Z')",
            [],
        )
        .unwrap();
        drop(c);
        let pinned = store
            .write(|tx| {
                tx.pin_host_key(
                    &VnfcId::from("vnfc-a"),
                    KEY,
                    FP,
                    FirstContact::Console,
                    now(),
                )
            })
            .unwrap();
        assert!(pinned);
        // A second pin does not replace the first.
        let again = store
            .write(|tx| {
                tx.pin_host_key(
                    &VnfcId::from("vnfc-a"),
                    "ssh-ed25519 AAAAother",
                    "SHA256:x",
                    FirstContact::TrustOnFirstUse,
                    now(),
                )
            })
            .unwrap();
        assert!(!again);
    }

    let out = forget(&config, "vnfc-a");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("removed the pinned host key of VNFC vnfc-a"),
        "{stdout}"
    );
    assert!(
        stdout.contains(FP) && stdout.contains(KEY) && stdout.contains("srv-a"),
        "{stdout}"
    );

    let store = Store::open(&db).unwrap();
    let vnfcs = store.reader().vnfcs(&VnfInstanceId::from("vnf-1")).unwrap();
    assert_eq!(vnfcs[0].host_key, None);
    let ev = events(&db);
    assert_eq!(ev.len(), 2, "{ev:?}");
    assert_eq!(ev[0].0, "HOST_KEY_PINNED");
    assert!(ev[0].2.contains("verified against the console"), "{ev:?}");
    assert!(ev[0].3.contains("\"verified_by\":\"console\""), "{ev:?}");
    assert_eq!(ev[1].0, "HOST_KEY_FORGOTTEN");
    assert_eq!(ev[1].1.as_deref(), Some("vnfc-a"));
    let uid = String::from_utf8(Command::new("id").arg("-u").output().unwrap().stdout).unwrap();
    assert!(
        ev[1].2.contains(&format!("uid {}", uid.trim())),
        "who asked: {ev:?}"
    );
    assert!(
        ev[1].3.contains(KEY),
        "the removed key is the evidence: {ev:?}"
    );

    // Again: nothing pinned any more, said so, still recorded.
    let out = forget(&config, "vnfc-a");
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("had no pinned host key"));
    assert_eq!(events(&db).len(), 3);

    // Unknown VNFC: a clear error, exit status 1, no event.
    let out = forget(&config, "no-such\nvnfc");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no VNFC \"no-such\\nvnfc\""), "{stderr}");
    assert_eq!(events(&db).len(), 3);
}
