//! `vnfkeeper pause` / `resume` / `status` as an operator runs them: the pause is stored with
//! who, why and until when, shown by `status`, audited, and refused for unknown instances and
//! bad values.

use std::process::{Command, Output};

use serde_json::Value;
use vnfkeeper::store::Store;
use vnfkeeper_core::model::{Timestamp, VnfInstanceId};

fn run(config: &std::path::Path, args: &[&str]) -> Output {
    let (cmd, rest) = args.split_first().unwrap();
    Command::new(env!("CARGO_BIN_EXE_vnfkeeper"))
        .arg(cmd)
        .arg("--config")
        .arg(config)
        .args(rest)
        .env_remove("SUDO_USER")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn pause_status_resume_and_the_refusals() {
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
    let now = Timestamp(chrono::Utc::now());
    Store::open(&db)
        .unwrap()
        .write(|tx| {
            tx.create_instance_if_missing(&VnfInstanceId::from("vnf-1"), now)
                .map(|_| ())
        })
        .unwrap();

    let o = run(
        &config,
        &[
            "pause",
            "vnf-1",
            "--reason",
            "kernel upgrade",
            "--until",
            "2h",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("paused by uid"), "{}", text(&o));

    let o = run(&config, &["status", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let list: Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = &list[0]["maintenancePause"];
    assert_eq!(p["reason"], "kernel upgrade");
    assert_eq!(p["scope"], "vnf-1");
    let until = Timestamp::parse(p["until"].as_str().unwrap()).unwrap();
    let minutes = (until.0 - now.0).num_minutes();
    assert!((119..=121).contains(&minutes), "{until}");
    let o = run(&config, &["status"]);
    assert!(text(&o).contains("kernel upgrade"), "{}", text(&o));

    for (args, needle) in [
        (vec!["pause", "vnf-2"], "no VNF instance \"vnf-2\""),
        (vec!["pause", "vnf-1", "--until", "yesterday"], "--until"),
        (
            vec!["pause", "vnf-1", "--until", "2020-01-01T00:00:00Z"],
            "not in the future",
        ),
        (vec!["pause", "vnf-1", "--reason", "a\u{7}b"], "--reason"),
        (vec!["pause", "../x"], "VNF instance id"),
        (
            vec!["resume", "--all"],
            "no maintenance pause of --all (pauses stored: vnf-1)",
        ),
    ] {
        let o = run(&config, &args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(needle), "{args:?}: {}", text(&o));
    }
    // clap refuses a VNF together with --all, and neither.
    assert_eq!(
        run(&config, &["pause", "vnf-1", "--all"]).status.code(),
        Some(2)
    );
    assert_eq!(run(&config, &["pause"]).status.code(), Some(2));

    let o = run(&config, &["pause", "--all"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(&config, &["resume", "vnf-1"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("every VNF instance is still paused"),
        "{}",
        text(&o)
    );
    let o = run(&config, &["status"]);
    assert!(
        text(&o).contains("every VNF instance: maintenance paused by"),
        "{}",
        text(&o)
    );
    assert!(run(&config, &["resume", "--all"]).status.success());
    let list: Value = serde_json::from_slice(&run(&config, &["status", "--json"]).stdout).unwrap();
    assert!(list[0]["maintenancePause"].is_null());

    let c = rusqlite::Connection::open(&db).unwrap();
    let kinds: Vec<String> = c
        .prepare("SELECT kind || ' ' || coalesce(vnf_instance_id, '*') || ' ' || json_extract(evidence, '$.pause.paused_by') FROM event WHERE kind LIKE 'MAINTENANCE%' ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(kinds.len(), 4, "{kinds:?}");
    assert!(
        kinds[0].starts_with("MAINTENANCE_PAUSED vnf-1 uid "),
        "{kinds:?}"
    );
    assert!(
        kinds[1].starts_with("MAINTENANCE_PAUSED * uid "),
        "{kinds:?}"
    );
    assert!(
        kinds[2].starts_with("MAINTENANCE_RESUMED vnf-1 uid "),
        "{kinds:?}"
    );
    assert!(
        kinds[3].starts_with("MAINTENANCE_RESUMED * uid "),
        "{kinds:?}"
    );
}
