//! The daemon fences its own writes: every start raises the daemon epoch in the database, and a
//! daemon whose epoch another start has raised since (two daemons on one database past the
//! lock, as in a split brain) exits 79 at its next write without writing; what it had not
//! recorded is taken by the next daemon exactly once. With `[ha]` the daemon never creates a
//! missing database (the mount is missing, not the data) and runs SQLite with
//! `synchronous=FULL`.

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::{Daemon, Install, repo_root, wait_until};
use vnfkeeper::message_ids::MSG_DAEMON_FENCED;

fn side(db: &Path, suffix: &str) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

fn exit_code(daemon: &mut Daemon, secs: u64, what: &str) -> i32 {
    match daemon.wait_exit(Duration::from_secs(secs)) {
        Some(code) => code,
        None => panic!("{what} still runs after {secs} s:\n{}", daemon.log_text()),
    }
}

fn query_epochs(db: &Path, sql: &str) -> Vec<Option<i64>> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut st = conn.prepare(sql).unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

fn envelope() -> Vec<u8> {
    fs::read(repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json")).unwrap()
}

#[test]
fn a_split_brain_daemon_is_fenced_at_its_next_write_and_exits_79() {
    let a = Install::new();
    let mut first = a.start();
    first.wait_for_log("daemon epoch 1 raised", Duration::from_secs(10));

    // The second daemon: its own state directory (so its own daemon.lock) holding hard links to
    // the first one's database, -wal and -shm, i.e. the same database past the lock.
    let b_dir = tempfile::tempdir().unwrap();
    let b_db = b_dir.path().join("state.db");
    for suffix in ["", "-wal", "-shm"] {
        fs::hard_link(side(&a.database, suffix), side(&b_db, suffix)).unwrap();
    }
    let key = "secrets.key";
    fs::copy(a.dir.path().join(key), b_dir.path().join(key)).unwrap();
    let b_config = b_dir.path().join("vnfkeeper.toml");
    let b_spool = b_dir.path().join("spool");
    fs::write(
        &b_config,
        format!(
            "spool_dir = \"{}\"\ndatabase = \"{}\"\npackages_dir = \"{}\"\n",
            b_spool.display(),
            b_db.display(),
            repo_root().display()
        ),
    )
    .unwrap();
    let b = Install {
        dir: b_dir,
        config: b_config,
        spool: b_spool,
        database: b_db,
    };
    let mut second = b.start();
    second.wait_for_log("daemon epoch 2 raised", Duration::from_secs(10));

    // The first daemon's next write (the intake of a request) is refused: it exits 79.
    a.drop_file("fenced-1.json", &envelope());
    assert_eq!(exit_code(&mut first, 30, "the fenced daemon"), 79);
    let log = first.log_text();
    assert!(log.contains(MSG_DAEMON_FENCED), "{log}");
    assert!(
        log.contains("holds epoch 1") && log.contains("is now 2"),
        "{log}"
    );
    // Nothing of the request was recorded or filed under the old epoch.
    assert!(Install::files(&a.accepted_dir()).is_empty());
    let intake = query_epochs(&a.database, "SELECT COUNT(*) FROM intake");
    assert_eq!(intake, vec![Some(0)]);
    assert!(second.is_running(), "{}", second.log_text());
    assert_eq!(second.stop(), Some(0));

    // The next daemon on the first installation takes the request, once, under epoch 3.
    let mut again = a.start();
    again.wait_for_log("daemon epoch 3 raised", Duration::from_secs(10));
    assert!(
        wait_until(Duration::from_secs(30), || Install::files(
            &a.accepted_dir()
        )
        .iter()
        .filter(|f| f.ends_with(".json"))
        .count()
            == 1),
        "{}",
        again.log_text()
    );
    assert_eq!(again.stop(), Some(0));
    assert_eq!(a.ops_json().len(), 1);
    assert_eq!(
        query_epochs(
            &a.database,
            "SELECT epoch FROM event WHERE kind = 'REQUEST_ACCEPTED'"
        ),
        vec![Some(3)]
    );
    assert_eq!(
        query_epochs(&a.database, "SELECT epoch FROM vnf_lcm_op_occ"),
        vec![Some(3)]
    );
    assert_eq!(
        query_epochs(&a.database, "SELECT epoch FROM daemon_runs"),
        vec![Some(1), Some(2), Some(3)]
    );
}

/// A tmpfs mounted for the test, unmounted when dropped (also when the test fails).
struct Mounted(PathBuf);

impl Mounted {
    fn tmpfs(at: &Path) -> Self {
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64m", "vnfkeeper-ha-test"])
            .arg(at)
            .status()
            .unwrap();
        assert!(st.success(), "mount tmpfs on {}", at.display());
        Self(at.into())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
#[ignore = "needs root: mounts a tmpfs"]
fn with_ha_a_missing_database_is_refused_and_never_created() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("shard");
    fs::create_dir(&mount).unwrap();
    let database = mount.join("state/state.db");
    let spool = mount.join("spool");
    let config = dir.path().join("shard.toml");
    fs::write(
        &config,
        format!(
            "spool_dir = \"{}\"\ndatabase = \"{}\"\n[ha]\nrequire_mount = \"{}\"\n",
            spool.display(),
            database.display(),
            mount.display()
        ),
    )
    .unwrap();
    let install = Install {
        dir,
        config,
        spool,
        database: database.clone(),
    };

    // Not mounted: refused before anything is created on the node's own disk.
    let mut d = install.spawn_daemon(&[]);
    assert_eq!(exit_code(&mut d, 30, "the daemon"), 78);
    assert!(
        d.log_text().contains("is not a mount point"),
        "{}",
        d.log_text()
    );
    assert!(
        fs::read_dir(&mount).unwrap().next().is_none(),
        "created under the mount point"
    );

    // Mounted, but no database: the mount is missing, not the data.
    let _mounted = Mounted::tmpfs(&mount);
    let mut d = install.spawn_daemon(&[]);
    assert_eq!(exit_code(&mut d, 30, "the daemon"), 78);
    assert!(
        d.log_text().contains("the mount is missing, not the data"),
        "{}",
        d.log_text()
    );
    assert!(!database.exists() && !mount.join("state").exists());

    // Made on purpose, it starts with synchronous=FULL.
    let out = install.cli(&["db", "init"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut d = install.start();
    d.wait_for_log("synchronous=2", Duration::from_secs(10));
    assert_eq!(d.stop(), Some(0));
}
