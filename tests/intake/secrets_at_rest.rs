//! Secrets at rest, as a hostile member of the daemon's group would look for them: two operators
//! submit requests with different passwords; operator A, a non-root member of the group, cannot
//! read operator B's password from `accepted/`, `rejected/`, the daemon's log output,
//! `vnfkeeper ops --json`, `vnfkeeper status --json`, or a dump of the database. The engine's
//! read path still gets every password back.
//!
//! Needs root: it creates a group and three users (daemon, operator A, operator B) with
//! `groupadd`/`useradd`, runs each as that user with `setpriv`, and removes them afterwards (also
//! when the test fails).

use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use support::{Install, repo_root, wait_until};

/// The group and users of one run, deleted on drop.
struct Accounts {
    group: String,
    users: Vec<String>,
}

impl Accounts {
    fn create(tag: &str) -> Self {
        let group = format!("vks{tag}");
        run_ok(Command::new("groupadd").arg(&group));
        let mut accounts = Self {
            group,
            users: Vec::new(),
        };
        for role in ["d", "a", "b"] {
            let user = format!("vks{tag}{role}");
            run_ok(Command::new("useradd").args([
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                "--gid",
                &accounts.group,
                &user,
            ]));
            accounts.users.push(user);
        }
        accounts
    }

    fn daemon(&self) -> &str {
        &self.users[0]
    }
    fn a(&self) -> &str {
        &self.users[1]
    }
    fn b(&self) -> &str {
        &self.users[2]
    }

    /// `setpriv` arguments that run a command as `user` with only the group.
    fn as_user(&self, user: &str) -> Vec<String> {
        vec![
            "setpriv".into(),
            format!("--reuid={user}"),
            format!("--regid={}", self.group),
            "--clear-groups".into(),
        ]
    }

    /// Runs `program args` as `user`.
    fn run_as(&self, user: &str, program: &str, args: &[&str]) -> Output {
        let prefix = self.as_user(user);
        Command::new(&prefix[0])
            .args(&prefix[1..])
            .arg(program)
            .args(args)
            .env_remove("JOURNAL_STREAM")
            .output()
            .expect("setpriv")
    }
}

impl Drop for Accounts {
    fn drop(&mut self) {
        for u in &self.users {
            let _ = Command::new("userdel").arg(u).output();
        }
        let _ = Command::new("groupdel").arg(&self.group).output();
    }
}

fn run_ok(cmd: &mut Command) {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// The pv-k8s-cluster INSTANTIATE with every password (and the proxy credentials) set to
/// `password`, for instance `instance`.
fn request(instance: &str, password: &str) -> Vec<u8> {
    let path = repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let mut v: Value = serde_json::from_slice(&fs::read(path).unwrap()).unwrap();
    v["vnfInstanceId"] = instance.into();
    v["requestId"] = format!("req-{instance}").into();
    let k8s = &mut v["request"]["additionalParams"]["k8s_cluster_installation_param"];
    k8s["master_node"]["password"] = password.into();
    k8s["worker_node"]["password"] = password.into();
    k8s["storage_server"]["password"] = password.into();
    k8s["proxy"]["http_proxy"] = format!("http://user:{password}@proxy:3128").into();
    v["request"]["vimConnectionInfo"] = serde_json::json!([
        {"id": "vim1", "vimType": "openstack", "accessInfo": {"password": password}}
    ]);
    serde_json::to_vec_pretty(&v).unwrap()
}

#[test]
#[ignore = "needs root: creates a group and users (groupadd/useradd) and runs commands as them (setpriv)"]
fn a_group_member_cannot_read_another_operators_passwords() {
    let tag = format!("{}", std::process::id() % 100_000);
    let acc = Accounts::create(&tag);
    let pw_a = format!("pwA-{tag}-Xq7");
    let pw_b = format!("pwB-{tag}-Zr9");

    // The installation belongs to the daemon's user; members of the group may traverse it.
    let install = Install::new();
    let root = install.dir.path();
    run_ok(
        Command::new("chown")
            .arg(format!("{}:{}", acc.daemon(), acc.group))
            .arg(root),
    );
    fs::set_permissions(root, fs::Permissions::from_mode(0o750)).unwrap();
    let prefix = acc.as_user(acc.daemon());
    let prefix: Vec<&str> = prefix.iter().map(String::as_str).collect();
    let mut daemon = install.start_via(&prefix, &[]);

    // A and B submit through the CLI as themselves; B also drops two files that are rejected:
    // a JSON request that does not validate, and a file that is not JSON at all.
    let bin = env!("CARGO_BIN_EXE_vnfkeeper");
    let config = install.config.to_str().unwrap();
    let submit = |user: &str, name: &str, bytes: &[u8]| {
        let file = root.join(name);
        fs::write(&file, bytes).unwrap();
        run_ok(Command::new("chown").arg(user).arg(&file));
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        let out = acc.run_as(
            user,
            bin,
            &["submit", file.to_str().unwrap(), "--config", config],
        );
        assert!(
            out.status.success(),
            "submit as {user}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // `submit` refuses a file intake would reject: B drops those into the spool itself, as the
    // spool's `tmp/` then `new/` rename that `submit` does (mode 0640).
    let drop_as = |user: &str, name: &str, bytes: &[u8]| {
        let file = root.join(name);
        fs::write(&file, bytes).unwrap();
        run_ok(Command::new("chown").arg(user).arg(&file));
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        let tmp = install.new_dir().parent().unwrap().join("tmp").join(name);
        let new = install.new_dir().join(name);
        let script = format!(
            "cp '{}' '{}' && chmod 0640 '{}' && mv '{}' '{}'",
            file.display(),
            tmp.display(),
            tmp.display(),
            tmp.display(),
            new.display()
        );
        let out = acc.run_as(user, "sh", &["-c", &script]);
        assert!(
            out.status.success(),
            "drop as {user}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    submit(acc.a(), "a.json", &request("vnf-a", &pw_a));
    submit(acc.b(), "b.json", &request("vnf-b", &pw_b));
    let mut invalid: Value = serde_json::from_slice(&request("vnf-b2", &pw_b)).unwrap();
    invalid["request"]["flavourId"] = 42.into();
    drop_as(
        acc.b(),
        "b-invalid.json",
        &serde_json::to_vec(&invalid).unwrap(),
    );
    drop_as(
        acc.b(),
        "b-garbage.json",
        format!("password={pw_b}\n").as_bytes(),
    );

    let settled = wait_until(Duration::from_secs(30), || {
        Install::files(&install.new_dir()).is_empty()
            && Install::files(&install.accepted_dir()).len() == 2
            && Install::files(&install.rejected_dir()).len() == 4
    });
    assert!(settled, "not processed:\n{}", daemon.log_text());

    // Each request names its submitter, the owner of the spool file: A's, and B's rejection.
    // `submit` also labels the file with the operator's file name; B's own drop has none.
    for (vnf, user, kind, file) in [
        ("vnf-a", acc.a(), "REQUEST_ACCEPTED", Value::from("a.json")),
        ("vnf-b2", acc.b(), "REQUEST_REJECTED", Value::Null),
    ] {
        let out = install.cli(&["events", vnf, "--json"]);
        let list: Value = serde_json::from_slice(&out.stdout).unwrap();
        let entry = list
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} for {vnf}"));
        assert_eq!(entry["intake"]["submitter"]["name"], user, "{vnf}");
        assert_eq!(entry["intake"]["submitter"]["file"], file, "{vnf}");
        assert_eq!(
            entry["intake"]["submitter"]["sudoUser"],
            Value::Null,
            "{vnf}"
        );
        assert!(entry["intake"]["submitter"]["uid"].as_u64().unwrap() > 0);
    }

    // accepted/ and rejected/: every copy A can read holds neither password; the only copy
    // kept unredacted (not JSON) is owner-only, and A cannot read it.
    let (mut readable, mut garbage) = (0, 0);
    for dir in [install.accepted_dir(), install.rejected_dir()] {
        for name in Install::files(&dir) {
            let path = dir.join(&name);
            let out = acc.run_as(acc.a(), "cat", &[path.to_str().unwrap()]);
            // (`submit` names the files; the garbage one is told by its content, read as root.)
            if serde_json::from_slice::<Value>(&fs::read(&path).unwrap()).is_err() {
                assert_eq!(mode(&path), 0o600, "{name}");
                assert!(!out.status.success(), "A read {name}");
                let error = dir.join(format!("{name}.error.json"));
                let error = fs::read_to_string(error).unwrap();
                assert!(error.contains("0600"), "{error}");
                garbage += 1;
                continue;
            }
            assert_eq!(mode(&path), 0o640, "{name}");
            assert!(out.status.success(), "A cannot read {name}");
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(!text.contains(&pw_b), "{name} holds B's password");
            assert!(!text.contains(&pw_a), "{name} holds A's password");
            readable += 1;
        }
    }
    assert_eq!(
        readable, 5,
        "2 accepted copies, 1 redacted rejected copy, 2 .error.json"
    );
    assert_eq!(garbage, 1);
    // A cannot read the key that encrypts the database's secrets.
    let key = root.join(vnfkeeper::store::KEY_FILE);
    assert_eq!(mode(&key), 0o600);
    assert!(
        !acc.run_as(acc.a(), "cat", &[key.to_str().unwrap()])
            .status
            .success()
    );

    // The CLI and sqlite3 as A: the database and its -wal/-shm are 0640, group vnfkeeper.
    let db = install.database.to_str().unwrap();
    for args in [["ops", "--json"], ["status", "--json"]] {
        let mut cli_args = args.to_vec();
        cli_args.extend(["--config", config]);
        let out = acc.run_as(acc.a(), bin, &cli_args);
        assert!(
            out.status.success(),
            "{args:?} as the group member: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.is_empty());
        assert!(!text.contains(&pw_a) && !text.contains(&pw_b), "{args:?}");
    }
    let dump = acc.run_as(acc.a(), "sqlite3", &["-readonly", db, ".dump"]);
    assert!(
        dump.status.success(),
        "sqlite3 -readonly .dump as the group member: {}",
        String::from_utf8_lossy(&dump.stderr).trim()
    );
    let text = String::from_utf8_lossy(&dump.stdout);
    assert!(text.contains("INSERT INTO vnf_lcm_op_occ"), "empty dump");
    assert!(text.contains("\"***\""), "no redacted body in the dump");
    assert!(
        !text.contains(&pw_a) && !text.contains(&pw_b),
        "a password is in the dump"
    );

    // The daemon's log output.
    daemon.stop();
    let log = daemon.log_text();
    assert!(log.contains("accepted"), "{log}");
    assert!(
        !log.contains(&pw_a) && !log.contains(&pw_b),
        "a password is in the log"
    );

    // What the engine reads: the requests as received, passwords included.
    let store = vnfkeeper::store::Store::open(&install.database).unwrap();
    let ops = store.reader().operations(None).unwrap();
    assert_eq!(ops.len(), 2);
    for op in ops {
        let (params, _) = store.reader().operation_params(&op.id).unwrap().unwrap();
        let want = if op.vnf_instance_id == "vnf-a" {
            &pw_a
        } else {
            &pw_b
        };
        assert_eq!(
            params.matches(want.as_str()).count(),
            5,
            "{}",
            op.vnf_instance_id
        );
        assert!(!params.contains("***"));
    }
}
