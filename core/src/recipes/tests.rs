//! The step scripts run for real with `sh`, locally: exports rewriting with a recording `exportfs`,
//! and filesystem creation on a loop device with a counting `mkfs.ext4`. Root is needed (chown,
//! losetup): these tests are ignored unless `--include-ignored`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

/// Runs `step` in `mode` locally with `bin` prepended to PATH; returns (exit code, stdout+stderr).
fn run(step: &Step, mode: &str, bin: &Path) -> (i32, String) {
    run_text(&step.script_text(), mode, &step.args, bin)
}

/// Runs the full script `text` as a step runs, in `mode` with `args`, locally with `bin`
/// prepended to PATH; returns (exit code, stdout+stderr).
fn run_text(text: &str, mode: &str, args: &[String], bin: &Path) -> (i32, String) {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(text)
        .arg("vnfkeeper-step")
        .arg(mode)
        .args(args)
        .env("PATH", path)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn script(dir: &Path, name: &str, body: &str) {
    let p = dir.join(name);
    fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
#[ignore = "needs root (chown nobody)"]
fn exports_are_rewritten_declaratively_and_verified() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let exports = dir.path().join("exports");
    fs::write(&exports, "/srv/other 10.0.0.0/8(ro)\n").unwrap();
    fs::set_permissions(&exports, fs::Permissions::from_mode(0o640)).unwrap();
    // A recording exportfs: "-ra" logs, no argument lists the directories of the file.
    let log = dir.path().join("exportfs.log");
    script(
        &bin,
        "exportfs",
        &format!(
            "if [ \"$1\" = -ra ]; then echo ra >> {log}; else awk '!/^#/ && NF {{print $1}}' {file}; fi",
            log = log.display(),
            file = exports.display()
        ),
    );
    let d = |n: &str| dir.path().join(n).display().to_string();
    let wanted = [
        Export {
            dir: d("pv1"),
            to: "10.10.0.0/24".into(),
        },
        Export {
            dir: d("pv2"),
            to: "10.10.0.0/24".into(),
        },
    ];
    let mut steps = nfs_server("ss", "vnf-1", &wanted);
    steps[1].args[0] = exports.display().to_string();
    let step = &steps[1];

    assert_eq!(run(step, "check", &bin).0, 10);
    let (code, out) = run(step, "apply", &bin);
    assert_eq!(code, 0, "{out}");
    let (code, out) = run(step, "check", &bin);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("already done"), "{out}");
    // Applying again changes nothing: one block, the unrelated line kept.
    assert_eq!(run(step, "apply", &bin).0, 0);
    let text = fs::read_to_string(&exports).unwrap();
    assert_eq!(text.matches("# BEGIN vnfkeeper vnf-1").count(), 1, "{text}");
    assert!(text.starts_with("/srv/other 10.0.0.0/8(ro)\n"), "{text}");
    assert!(text.contains(&format!(
        "{} 10.10.0.0/24(rw,sync,no_subtree_check,insecure,all_squash)",
        d("pv2")
    )));
    assert!(dir.path().join("pv1").is_dir());
    // Replaced by a rename: the mode is kept and no temporary file is left behind.
    assert_eq!(mode(&exports), 0o640);
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
    assert_eq!(
        fs::read_to_string(&log).unwrap().lines().count(),
        1,
        "exportfs -ra ran once"
    );

    // A changed request replaces the block: pv2 is gone, no duplicates.
    let mut fewer = nfs_server("ss", "vnf-1", &wanted[..1]);
    fewer[1].args[0] = exports.display().to_string();
    assert_eq!(run(&fewer[1], "check", &bin).0, 10);
    assert_eq!(run(&fewer[1], "apply", &bin).0, 0);
    let text = fs::read_to_string(&exports).unwrap();
    assert!(!text.contains(&d("pv2")), "{text}");
    assert_eq!(text.lines().count(), 4, "{text}");
}

/// Permission bits of `p`.
fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Names of the temporary files `replace_file` may leave in `dir` (`.<name>.vnfkeeper.XXXXXX`).
fn leftovers(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".vnfkeeper."))
        .collect()
}

/// Runs `printf 'new\n' | replace_file FILE` (the prelude's helper) as a step's apply would.
fn replace_file(file: &Path, bin: &Path) -> (i32, String) {
    let text = format!("{COMMON}\nprintf 'new\\n' | replace_file \"$1\"\necho replaced");
    run_text(&text, "apply", &[file.display().to_string()], bin)
}

#[test]
fn replace_file_renames_over_the_target_keeping_its_mode() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    fs::create_dir(&bin).unwrap();

    // An existing file: new content, same mode, nothing else in the directory.
    let file = dir.path().join("fstab");
    fs::write(&file, "old\n").unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
    let (code, out) = replace_file(&file, &bin);
    assert_eq!((code, out.as_str()), (0, "replaced\n"));
    assert_eq!(fs::read_to_string(&file).unwrap(), "new\n");
    assert_eq!(mode(&file), 0o600);
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());

    // A new file is created readable by all (0644), like /etc/exports.
    let fresh = dir.path().join("exports");
    assert_eq!(replace_file(&fresh, &bin).0, 0);
    assert_eq!(fs::read_to_string(&fresh).unwrap(), "new\n");
    assert_eq!(mode(&fresh), 0o644);

    // A target that cannot be replaced (a directory): exit 3, the target unchanged, no temporary
    // file left.
    let taken = dir.path().join("taken");
    fs::create_dir(&taken).unwrap();
    let (code, out) = replace_file(&taken, &bin);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("could not replace"), "{out}");
    assert!(taken.is_dir() && fs::read_dir(&taken).unwrap().next().is_none());
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());

    // No directory to put the temporary file in: exit 3.
    let nowhere = dir.path().join("missing/fstab");
    assert_eq!(replace_file(&nowhere, &bin).0, 3);
}

/// A loop device over a sparse file, detached on drop.
struct Loop {
    dev: String,
    _file: tempfile::NamedTempFile,
}

impl Loop {
    fn new() -> Self {
        let file = tempfile::NamedTempFile::new().unwrap();
        file.as_file().set_len(32 << 20).unwrap();
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(file.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self {
            dev: String::from_utf8(out.stdout).unwrap().trim().to_owned(),
            _file: file,
        }
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

#[test]
#[ignore = "needs root (losetup)"]
fn filesystem_is_created_once_and_never_over_existing_data() {
    let dir = tempfile::tempdir().unwrap();
    let bin: PathBuf = dir.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let count = dir.path().join("mkfs.count");
    script(
        &bin,
        "mkfs.ext4",
        &format!("echo x >> {}\nexec /sbin/mkfs.ext4 \"$@\"", count.display()),
    );
    let lo = Loop::new();
    let steps = storage_volumes(
        "ss",
        &[VolumeSetup {
            volume_id: "0f3c1e52-3d4b-4f1e-9a8e-000000000001".into(),
            device: lo.dev.clone(),
            mount_to: "/volume".into(),
        }],
    );
    let fs_step = &steps[0];
    assert_eq!(fs_step.kind, StepKind::StorageFilesystem);
    assert_eq!(run(fs_step, "check", &bin).0, 10);
    let (code, out) = run(fs_step, "apply", &bin);
    assert_eq!(code, 0, "{out}");
    for _ in 0..2 {
        let (code, out) = run(fs_step, "apply", &bin);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("holds a ext4 filesystem"), "{out}");
    }
    assert_eq!(
        fs::read_to_string(&count).unwrap().lines().count(),
        1,
        "mkfs ran exactly once"
    );

    // A device that holds another filesystem is left alone, whatever its type.
    let other = Loop::new();
    assert!(
        Command::new("/sbin/mkfs.ext2")
            .args(["-q", &other.dev])
            .status()
            .unwrap()
            .success()
    );
    let mut step = fs_step.clone();
    step.args[0] = other.dev.clone();
    let (code, out) = run(&step, "apply", &bin);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("holds a ext2 filesystem"), "{out}");
    assert_eq!(fs::read_to_string(&count).unwrap().lines().count(), 1);

    // A missing device is an error, not a format.
    step.args[0] = "/dev/vk-no-such-device".into();
    let (code, out) = run(&step, "apply", &bin);
    assert_eq!(code, 3, "{out}");
}

/// Every step a constructor builds names a script of the table, and survives the trip through
/// a stored plan (JSON) unchanged — script text, arguments, uploads, sudo, timeout.
#[test]
fn every_step_round_trips_through_a_stored_plan() {
    let volume = VolumeSetup {
        volume_id: "vol-1".into(),
        device: "/dev/vdb".into(),
        mount_to: "/volume".into(),
    };
    let export = Export {
        dir: "/volume/nfs".into(),
        to: "10.0.0.0/24".into(),
    };
    let manifest = pv::with_nfs_server(
        "pv.yaml",
        "kind: PersistentVolume\nmetadata: {name: pv1}\nspec: {nfs: {path: /volume/nfs, server: 0.0.0.0}}\n",
        "10.0.0.5",
    )
    .unwrap();
    let mut steps = storage_volumes("ss", std::slice::from_ref(&volume));
    steps.extend(nfs_server("ss", "vnf-1", std::slice::from_ref(&export)));
    steps.push(nfs_client("w1"));
    steps.push(k8s_hosts("w1", "vnf-1-nodes", "10.0.0.5 master5"));
    steps.push(k8s_etcd_remove_member("m1", "10.0.0.6"));
    steps.push(k8s_haproxy_backends(
        "m1",
        &[("master5".into(), "10.0.0.5".parse().unwrap())],
    ));
    steps.push(k8s_kubeconfig("m1", "https://10.0.0.5:6443"));
    steps.push(k8s_vim_token("m1"));
    steps.push(k8s_join_material(
        "m1",
        "/var/lib/vnfkeeper/join/vnf-1.env",
        "op-1",
    ));
    steps.push(k8s_install(
        "m1",
        "/usr/local/lib/vnfkeeper/install.sh",
        b"#!/bin/sh\n\xff binary-safe\n".to_vec(),
        vec!["-i".into(), "10.0.0.1".into()],
        Some(false),
        true,
    ));
    steps.push(k8s_remove_node(
        "m1",
        "10.0.0.2",
        std::time::Duration::from_secs(60),
        DrainPolicy::Lenient,
    ));
    steps.extend(pv::register(
        "m1",
        "/tmp/x",
        std::slice::from_ref(&manifest),
        std::time::Duration::from_secs(30),
    ));
    steps.push(pv::not_bound("m1", &["pv1".into()]));
    steps.push(pv::unregister(
        "m1",
        &["pv1".into()],
        std::time::Duration::from_secs(30),
    ));
    steps.extend(crate::flavour::kubespray::tests::sample_steps());
    steps.extend(registry(
        "r1",
        &Registry {
            container: "private_registry".into(),
            image: "registry:latest".into(),
            image_tar: Some(("/var/lib/vnfkeeper/registry.tar".into(), b"tar".to_vec())),
            port: 5000,
            data_dir: "/var/lib/vnfkeeper/registry".into(),
            ready_wait: std::time::Duration::from_secs(30),
        },
    ));
    steps.push(trust::observe("m1", "/etc/docker/daemon.json"));
    steps.push(trust::docker(
        "m1",
        "/etc/docker/daemon.json",
        "/var/lib/vnfkeeper/trust/daemon.json",
        Some((b"{}\n".to_vec(), "absent".into())),
        &["10.0.0.5:5000".into()],
    ));
    steps.push(trust::files(
        "m1",
        "/var/lib/vnfkeeper/trust",
        &[trust::RegistryFiles {
            server: "r.example".into(),
            hosts_toml: "server = \"https://r.example\"".into(),
            ca: Some(b"ca".to_vec()),
        }],
        true,
    ));
    steps.push(trust::hosts(
        "m1",
        "/etc/hosts",
        "vnf-1",
        "10.0.0.5 r.example",
    ));
    steps.push(trust::auth(
        "m1",
        "/root/.docker/config.json",
        "vnf-1",
        &[("r.example".into(), crate::wire::Secret::new("0".repeat(64)))],
    ));
    let kinds: std::collections::BTreeSet<StepKind> = steps.iter().map(|s| s.kind).collect();
    assert_eq!(
        kinds.len(),
        StepKind::ALL.len(),
        "one constructor per step kind"
    );
    for step in steps {
        assert_eq!(StepKind::parse(step.name()), Some(step.kind));
        let text = serde_json::to_string(&step).unwrap();
        let back: Step = serde_json::from_str(&text).unwrap();
        assert_eq!(back, step, "{text}");
    }
    let unknown = r#"{"name":"rm.rf","host":"h","args":[],"sudo":true,"timeout_secs":1}"#;
    let err = serde_json::from_str::<Step>(unknown).unwrap_err();
    assert!(err.to_string().contains("unknown step `rm.rf`"), "{err}");
}

/// A fake `docker` keeping one container's settings as files under `state`, logging each call.
fn fake_docker(bin: &Path, state: &Path) {
    fs::create_dir_all(state).unwrap();
    script(
        bin,
        "docker",
        &format!(
            r#"S={s}; echo "$*" >> $S/log
c=$S/c
case $1 in
inspect)
    [ -d $c ] || exit 1
    case $4 in
    *.Id*) echo 0123456789ab ;;
    *.Config.Image*) cat $c/image ;;
    *Binds*) printf '["%s"]\n' "$(cat $c/bind)" ;;
    *PortBindings*) printf '{{"5000/tcp":[{{"HostIp":"","HostPort":"%s"}}]}}\n' "$(cat $c/port)" ;;
    *.State.Running*) cat $c/running ;;
    esac ;;
run)
    [ -d $c ] && {{ echo conflict >&2; exit 125; }}
    mkdir $c; echo true > $c/running
    while [ $# -gt 1 ]; do
        case $1 in -p) echo "${{2%%:*}}" > $c/port; shift ;; -v) echo "$2" > $c/bind; shift ;; esac
        shift
    done
    echo "$1" > $c/image ;;
start) echo true > $c/running ;;
rm) rm -rf $c ;;
esac"#,
            s = state.display()
        ),
    );
}

fn calls(state: &Path, verb: &str) -> usize {
    fs::read_to_string(state.join("log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.split(' ').next() == Some(verb))
        .count()
}

fn registry_spec(port: u16, data: &Path) -> Registry {
    Registry {
        container: "private_registry".into(),
        image: "registry:latest".into(),
        image_tar: None,
        port,
        data_dir: data.display().to_string(),
        ready_wait: std::time::Duration::from_secs(1),
    }
}

#[test]
fn registry_container_is_created_once_started_when_stopped_replaced_when_changed() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let state = dir.path().join("docker");
    fake_docker(&bin, &state);
    let data = dir.path().join("data");
    let run_step = |port| {
        registry("r", &registry_spec(port, &data))
            .into_iter()
            .find(|s| s.kind == StepKind::RegistryRun)
            .unwrap()
    };
    let step = run_step(5000);
    assert_eq!(run(&step, "check", &bin).0, 10);
    assert_eq!(run(&step, "apply", &bin).0, 0);
    assert_eq!(calls(&state, "run"), 1);
    assert!(data.is_dir());
    let (code, out) = run(&step, "check", &bin);
    assert_eq!(code, 0, "{out}");
    // A second apply of a converged step changes nothing (the executor checks first, but a
    // re-run of apply alone must not conflict either).
    assert_eq!(run(&step, "apply", &bin).0, 0);
    assert_eq!(calls(&state, "run"), 1);
    // Stopped: started again, never run under the same name.
    fs::write(state.join("c/running"), "false\n").unwrap();
    assert_eq!(run(&step, "check", &bin).0, 10);
    assert_eq!(run(&step, "apply", &bin).0, 0);
    assert_eq!((calls(&state, "start"), calls(&state, "run")), (1, 1));
    // Another port: the container is replaced (removed, then run with the new settings).
    let moved = run_step(5001);
    assert_eq!(run(&moved, "check", &bin).0, 10);
    let (code, out) = run(&moved, "apply", &bin);
    assert_eq!(code, 0, "{out}");
    assert_eq!((calls(&state, "rm"), calls(&state, "run")), (1, 2));
    assert_eq!(
        fs::read_to_string(state.join("c/port")).unwrap().trim(),
        "5001"
    );
    assert_eq!(run(&moved, "check", &bin).0, 0);
}

#[test]
fn registry_ready_fails_with_the_reason_then_passes_once_v2_answers() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let step = registry("r", &registry_spec(port, dir.path()))
        .into_iter()
        .find(|s| s.kind == StepKind::RegistryReady)
        .unwrap();
    assert_eq!(run(&step, "check", &bin).0, 10);
    let (code, out) = run(&step, "apply", &bin);
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains(&format!(
            "did not answer GET http://127.0.0.1:{port}/v2/ within 1 s (last status 000"
        )),
        "{out}"
    );
    // Something answering /v2/ with 200, as the distribution server does without auth.
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        for _ in 0..2 {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
        }
    });
    let (code, out) = run(&step, "check", &bin);
    assert_eq!(code, 0, "{out}");
    assert_eq!(run(&step, "apply", &bin).0, 0);
    server.join().unwrap();
}

/// `ansible.forget` removes an inventory directory vnfkeeper wrote, once, and leaves alone one it
/// did not write (the operator's, or a path mistyped as kubespray's root).
#[test]
fn ansible_forget_removes_only_an_inventory_vnfkeeper_wrote() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let forget = |dir: &Path| Step {
        kind: StepKind::AnsibleForget,
        host: "ansible-server".into(),
        args: vec![dir.display().to_string()],
        uploads: Vec::new(),
        late: Vec::new(),
        sudo: false,
        timeout: std::time::Duration::from_secs(30),
    };
    // Ours: a generated hosts.yaml (and known_hosts, group_vars) → needed, removed, then done.
    let ours = tmp.path().join("inventory/vnf-a");
    fs::create_dir_all(ours.join("group_vars/all")).unwrap();
    fs::write(
        ours.join("hosts.yaml"),
        "# Generated by vnfkeeper from its VNFC rows; replaced whole, never edited.\nall: {}\n",
    )
    .unwrap();
    fs::write(ours.join("known_hosts"), "10.0.0.1 ssh-ed25519 AAAA\n").unwrap();
    assert_eq!(run(&forget(&ours), "check", &bin).0, 10);
    let (code, out) = run(&forget(&ours), "apply", &bin);
    assert_eq!(code, 0, "{out}");
    assert!(!ours.exists());
    let (code, out) = run(&forget(&ours), "check", &bin);
    assert_eq!(
        (code, out.trim()),
        (
            0,
            &*format!("already done: inventory {} is absent", ours.display())
        )
    );
    // Ours, in a directory that also holds the operator's files: only what vnfkeeper and
    // kubespray wrote goes (kubespray's generated credentials/ included); the rest stays.
    let shared = tmp.path().join("inventory/shared");
    fs::create_dir_all(shared.join("group_vars/all")).unwrap();
    fs::create_dir_all(shared.join("group_vars/k8s_cluster")).unwrap();
    fs::create_dir_all(shared.join("credentials")).unwrap();
    fs::write(
        shared.join("hosts.yaml"),
        "# Generated by vnfkeeper from its VNFC rows; replaced whole, never edited.\nall: {}\n",
    )
    .unwrap();
    fs::write(shared.join("group_vars/all/vnfkeeper.yml"), "a: 1\n").unwrap();
    fs::write(
        shared.join("group_vars/k8s_cluster/vnfkeeper-calico.yml"),
        "calico_mtu: 1450\n",
    )
    .unwrap();
    fs::write(shared.join("group_vars/all/operator.yml"), "b: 2\n").unwrap();
    fs::write(
        shared.join("credentials/kubeadm_certificate_key.creds"),
        "k\n",
    )
    .unwrap();
    fs::write(shared.join("NOTES"), "the operator's\n").unwrap();
    let (code, out) = run(&forget(&shared), "apply", &bin);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("kept for the other files"), "{out}");
    for gone in [
        "hosts.yaml",
        "credentials",
        "group_vars/all/vnfkeeper.yml",
        "group_vars/k8s_cluster",
    ] {
        assert!(!shared.join(gone).exists(), "{gone} left: {out}");
    }
    assert!(shared.join("NOTES").exists() && shared.join("group_vars/all/operator.yml").exists());
    let (code, out) = run(&forget(&shared), "check", &bin);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("left in place"), "{out}");
    // Only vnfkeeper's state directory left by an interrupted first run: ours too.
    let partial = tmp.path().join("inventory/vnf-b");
    fs::create_dir_all(partial.join(".vnfkeeper/done")).unwrap();
    assert_eq!(run(&forget(&partial), "apply", &bin).0, 0);
    assert!(!partial.exists());
    // Not ours: kept, and the check says so.
    let theirs = tmp.path().join("kubespray");
    fs::create_dir_all(theirs.join("inventory/sample")).unwrap();
    fs::write(theirs.join("cluster.yml"), "- hosts: all\n").unwrap();
    let (code, out) = run(&forget(&theirs), "check", &bin);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("holds no inventory vnfkeeper wrote"), "{out}");
    assert_eq!(run(&forget(&theirs), "apply", &bin).0, 0);
    assert!(theirs.join("cluster.yml").exists());
    // A relative path is refused.
    assert_eq!(run(&forget(Path::new("inventory/x")), "check", &bin).0, 3);
}

#[test]
fn trust_hosts_rewrites_its_block_whole_and_a_second_run_leaves_the_file_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let hosts = dir.path().join("hosts");
    fs::write(&hosts, "127.0.0.1 localhost\n10.0.0.1 other\n").unwrap();
    let step = trust::hosts(
        "m1",
        &hosts.display().to_string(),
        "vnf-1",
        "192.168.0.20 registry.example.com",
    );
    assert_eq!(run(&step, "check", &bin).0, 10);
    assert_eq!(run(&step, "apply", &bin).0, 0);
    let once = fs::read(&hosts).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&once),
        "127.0.0.1 localhost\n10.0.0.1 other\n# BEGIN vnfkeeper vnf-1\n\
         192.168.0.20 registry.example.com\n# END vnfkeeper vnf-1\n"
    );
    let (code, out) = run(&step, "check", &bin);
    assert_eq!(code, 0, "{out}");
    // Even an apply run again (the executor checks first) rewrites the same bytes, never twice.
    assert_eq!(run(&step, "apply", &bin).0, 0);
    assert_eq!(fs::read(&hosts).unwrap(), once);
    // A lost line is drift; the block comes back whole, once.
    fs::write(
        &hosts,
        "127.0.0.1 localhost\n10.0.0.1 other\n# BEGIN vnfkeeper vnf-1\n# END vnfkeeper vnf-1\n",
    )
    .unwrap();
    assert_eq!(run(&step, "check", &bin).0, 10);
    assert_eq!(run(&step, "apply", &bin).0, 0);
    assert_eq!(fs::read(&hosts).unwrap(), once);
}

#[test]
fn trust_observe_reports_the_digest_and_the_insecure_registries_never_other_keys() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("daemon.json");
    let text = "{\"proxies\": {\"http-proxy\": \"http://u:Pr0xy-S3cret@p:3128\"},\n \"insecure-registries\": [\"a:5000\"]}\n";
    fs::write(&file, text).unwrap();
    let step = trust::observe("m1", &file.display().to_string());
    let (code, out) = run(&step, "check", dir.path());
    assert_eq!(code, 0, "{out}");
    let b64 = STANDARD.encode(b"S3cret");
    assert!(!out.contains("S3cret") && !out.contains("proxies"), "{out}");
    let seen = crate::flavour::trust::parse_observed(out.trim()).unwrap();
    assert_eq!(seen.sha256, crate::digest::sha256_hex(text.as_bytes()));
    let v: serde_json::Value = serde_json::from_str(seen.content.as_deref().unwrap()).unwrap();
    assert_eq!(v, serde_json::json!({"insecure-registries": ["a:5000"]}));
    let decoded = seen.content.unwrap();
    assert!(!decoded.contains("S3cret") && !out.contains(&b64));
    fs::write(&file, "[1]").unwrap();
    let (code, out) = run(&step, "check", dir.path());
    assert_eq!(code, 0, "{out}");
    assert!(
        crate::flavour::trust::parse_observed(out.trim())
            .unwrap_err()
            .contains("not a JSON object"),
        "{out}"
    );
}

#[test]
fn trust_docker_replaces_only_the_observed_file_and_restarts_docker_only_then() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let log = dir.path().join("systemctl.log");
    script(
        &bin,
        "systemctl",
        &format!("echo \"$*\" >> {}; exit 0", log.display()),
    );
    let file = dir.path().join("daemon.json");
    let original = "{\"log-driver\": \"json-file\"}\n";
    fs::write(&file, original).unwrap();
    // What configure decides from trust.observe's report: the new `insecure-registries` only.
    let merged = crate::flavour::trust::merge_daemon_json(
        Some("{\"insecure-registries\": []}"),
        &["10.0.0.5:5000".into()],
    )
    .unwrap();
    let staged = dir.path().join("staged.json");
    let step = |observed: &str| {
        trust::docker(
            "m1",
            &file.display().to_string(),
            &staged.display().to_string(),
            Some((merged.clone().into_bytes(), observed.to_owned())),
            &["10.0.0.5:5000".into()],
        )
    };
    let restarts = || {
        fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == "restart docker")
            .count()
    };
    // Observed something else: refused, the file is left alone.
    fs::write(&staged, &merged).unwrap();
    let wrong = step(&"0".repeat(64));
    assert_eq!(run(&wrong, "check", &bin).0, 10);
    let (code, out) = run(&wrong, "apply", &bin);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("changed since vnfkeeper read it"), "{out}");
    assert_eq!(fs::read_to_string(&file).unwrap(), original);
    assert_eq!(restarts(), 0);
    // Observed this file: replaced by the merge, docker restarted once.
    let right = step(&crate::digest::sha256_hex(original.as_bytes()));
    let (code, out) = run(&right, "apply", &bin);
    assert_eq!(code, 0, "{out}");
    let now: serde_json::Value = serde_json::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        now,
        serde_json::json!({"log-driver": "json-file", "insecure-registries": ["10.0.0.5:5000"]}),
        "the other key kept"
    );
    assert!(!staged.exists());
    assert_eq!(restarts(), 1);
    let (code, out) = run(&right, "check", &bin);
    assert_eq!(code, 0, "{out}");
    // The registry dropped by hand: a check-only probe finds the drift.
    fs::write(&file, original).unwrap();
    let probe = trust::docker(
        "m1",
        &file.display().to_string(),
        "",
        None,
        &["10.0.0.5:5000".into()],
    );
    let (code, out) = run(&probe, "check", &bin);
    assert_eq!(code, 10, "{out}");
    assert!(out.contains("10.0.0.5:5000"), "{out}");
}

/// The HAProxy configuration Tacker's `install_k8s_cluster.sh` writes on each master of an HA
/// cluster (`modify_haproxy_conf`, abridged to what `haproxy -c` needs on this machine), with
/// one `server` line per address of `masters`.
fn tacker_haproxy_cfg(masters: &[&str]) -> String {
    let servers: String = masters
        .iter()
        .map(|ip| {
            let last = ip.rsplit('.').next().unwrap();
            format!("    server  master{last}  {ip}:6443 check\n")
        })
        .collect();
    format!(
        "global\n    maxconn 256\n\ndefaults\n    mode tcp\n    timeout connect 5s\n    \
         timeout client 50000\n    timeout server  50000\n\nfrontend kubernetes-apiserver\n    \
         mode                 tcp\n    bind                 *:16443\n    option               tcplog\n    \
         default_backend      kubernetes-apiserver\n\nbackend kubernetes-apiserver\n    \
         mode        tcp\n    balance     roundrobin\n{servers}listen stats\n    \
         bind               *:1080\n    stats refresh      5s\n    stats uri          /admin?stats\n"
    )
}

/// A master rebuilt at a new address: the other masters' backend lines are rewritten to the
/// new set (the rest of the file byte-identical), checked by the real `haproxy -c`, and HAProxy
/// reloaded once; a second run changes nothing; a crash between the rewrite and the reload
/// (stamp `pending`) is a reload still needed; without the file or the backend nothing is done.
#[test]
fn haproxy_backends_follow_the_masters_and_reload_once() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let log = dir.path().join("systemctl.log");
    // A recording systemctl: haproxy is active; reload is logged.
    script(
        &bin,
        "systemctl",
        &format!(
            "echo \"$*\" >> {log}; case $1 in is-active) exit 0 ;; reload) exit 0 ;; esac; exit 1",
            log = log.display()
        ),
    );
    let cfg = dir.path().join("haproxy.cfg");
    let stamp = dir.path().join("state/haproxy-backends.state");
    fs::write(
        &cfg,
        tacker_haproxy_cfg(&["10.0.0.11", "10.0.0.12", "10.0.0.13"]),
    )
    .unwrap();
    let masters = |ips: &[&str]| -> Vec<(String, std::net::IpAddr)> {
        ips.iter()
            .map(|ip| {
                (
                    format!("master{}", ip.rsplit('.').next().unwrap()),
                    ip.parse().unwrap(),
                )
            })
            .collect()
    };
    let mut step = k8s_haproxy_backends("m1", &masters(&["10.0.0.11", "10.0.0.12", "10.0.0.23"]));
    step.args[0] = cfg.display().to_string();
    step.args[3] = stamp.display().to_string();
    let reloads = || {
        fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == "reload haproxy")
            .count()
    };

    let (code, out) = run(&step, "check", &bin);
    assert_eq!(code, 10, "{out}");
    assert!(out.contains("10.0.0.13:6443"), "{out}");
    let (code, out) = run(&step, "apply", &bin);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        fs::read_to_string(&cfg).unwrap(),
        tacker_haproxy_cfg(&["10.0.0.11", "10.0.0.12", "10.0.0.23"]),
        "only the server lines changed"
    );
    assert_eq!(reloads(), 1);
    let (code, out) = run(&step, "check", &bin);
    assert_eq!(code, 0, "{out}");
    assert_eq!(run(&step, "apply", &bin).0, 0);
    assert_eq!(reloads(), 1, "in place: apply changes nothing");
    // The same masters in another order are in place.
    let mut reordered =
        k8s_haproxy_backends("m1", &masters(&["10.0.0.23", "10.0.0.11", "10.0.0.12"]));
    reordered.args[0] = step.args[0].clone();
    reordered.args[3] = step.args[3].clone();
    assert_eq!(run(&reordered, "check", &bin).0, 0);

    // A crash after the file was replaced, before the reload: the stamp says pending.
    let sum = {
        let o = Command::new("sha256sum").arg(&cfg).output().unwrap();
        String::from_utf8_lossy(&o.stdout)
            .split(' ')
            .next()
            .unwrap()
            .to_string()
    };
    fs::write(&stamp, format!("pending {sum}\n")).unwrap();
    let (code, out) = run(&step, "check", &bin);
    assert_eq!(code, 10, "{out}");
    assert!(out.contains("not reloaded"), "{out}");
    assert_eq!(run(&step, "apply", &bin).0, 0);
    assert_eq!(
        fs::read_to_string(&stamp).unwrap(),
        format!("loaded {sum}\n")
    );
    assert_eq!(run(&step, "check", &bin).0, 0);

    // No HAProxy on a single master: nothing to do, nothing written.
    let mut single = step.clone();
    single.args[0] = dir.path().join("absent.cfg").display().to_string();
    let (code, out) = run(&single, "check", &bin);
    assert_eq!(code, 0, "{out}");
    fs::write(&cfg, "global\n    maxconn 256\n").unwrap();
    let (code, out) = run(&step, "check", &bin);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("no backend"), "{out}");

    // A rewrite the real HAProxy refuses leaves the file alone.
    assert!(
        Path::new("/usr/sbin/haproxy").exists(),
        "Debian's haproxy is installed (testbed setup_packages)"
    );
    {
        let bad = tacker_haproxy_cfg(&["10.0.0.11", "10.0.0.12", "10.0.0.13"])
            .replace("mode        tcp", "mode        nonsense");
        fs::write(&cfg, &bad).unwrap();
        let (code, out) = run(&step, "apply", &bin);
        assert_eq!(code, 3, "{out}");
        assert!(out.contains("haproxy -c refused"), "{out}");
        assert_eq!(fs::read_to_string(&cfg).unwrap(), bad);
    }
}

/// A fake `kubectl` keeping PersistentVolumes as files under `state` (`<name>.phase`,
/// `<name>.nfs` holding "server path"), logging `apply` and `delete` calls (one line per object,
/// also when one call names several). `get pv -o
/// jsonpath=…` lists "name phase" or "name server path" (by what the template asks; it fails
/// while `state/down` exists); `apply -f FILE [-f FILE]…` reads the name, server and path lines
/// of each manifest as `pv::with_nfs_server` writes it.
fn fake_kubectl(bin: &Path, state: &Path) {
    fs::create_dir_all(state).unwrap();
    script(
        bin,
        "kubectl",
        &format!(
            r#"S={s}
case "$1 $2 $3" in
"get pv -o")
    [ -e "$S/down" ] && {{ echo "The connection to the server was refused" >&2; exit 1; }}
    for f in "$S"/*.phase; do
        [ -e "$f" ] || continue
        n=$(basename "$f" .phase)
        case $4 in
        *phase*) echo "$n $(cat "$f")" ;;
        *nfs*) echo "$n $(cat "$S/$n.nfs")" ;;
        *) echo "$n " ;;
        esac
    done ;;
"delete pv "*)
    shift 2
    for n in "$@"; do
        case $n in --*) ;; *) echo "delete $n" >> "$S/log"; rm -f "$S/$n.phase" "$S/$n.nfs" ;; esac
    done ;;
"apply -f "*)
    shift
    while [ $# -ge 2 ] && [ "$1" = -f ]; do
        name=$(sed -n 's/^  name: //p' "$2"); server=$(sed -n 's/^    server: //p' "$2")
        path=$(sed -n 's/^    path: //p' "$2")
        echo "apply $name" >> "$S/log"; echo Available > "$S/$name.phase"
        echo "$server $path" > "$S/$name.nfs"; echo "persistentvolume/$name created"
        shift 2
    done ;;
*) echo "unexpected kubectl $*" >&2; exit 2 ;;
esac"#,
            s = state.display()
        ),
    );
}

fn kubectl_calls(state: &Path) -> Vec<String> {
    fs::read_to_string(state.join("log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// One `pv.register`, `pv.available` and `pv.unregister` step over every PersistentVolume:
/// each checks all before it changes any, applies only what differs, refuses to delete any
/// while one is Bound; the one-PersistentVolume arguments a plan of the previous version
/// stored (one stage per PV) still run.
#[test]
fn pv_steps_over_several_volumes_apply_only_what_differs_and_take_the_old_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let state = dir.path().join("kube");
    fake_kubectl(&bin, &state);
    let text = |n: u32| {
        format!(
            "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: nfs-pv{n}\nspec:\n  \
             capacity: {{storage: 1Gi}}\n  nfs:\n    path: /volume/nfs/pv{n}\n    server: 0.0.0.0\n"
        )
    };
    let pvs: Vec<pv::PvManifest> = (1..=3)
        .map(|n| pv::with_nfs_server("f", &text(n), "10.0.0.5").unwrap())
        .collect();
    let manifests = dir.path().join("manifests");
    let wait = std::time::Duration::from_secs(2);
    let steps = pv::register("m1", &manifests.display().to_string(), &pvs, wait);
    let [register, available] = <[Step; 2]>::try_from(steps).unwrap();
    assert_eq!(register.kind, StepKind::PvRegister);
    assert_eq!(register.uploads.len(), 3);
    fs::create_dir(&manifests).unwrap();
    for u in &register.uploads {
        fs::write(&u.path, &u.bytes).unwrap();
    }

    let (code, out) = run(&register, "check", &bin);
    assert_eq!(code, 10, "{out}");
    assert!(out.contains("to apply: nfs-pv1 nfs-pv2 nfs-pv3"), "{out}");
    let (code, out) = run(&register, "apply", &bin);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        kubectl_calls(&state),
        ["apply nfs-pv1", "apply nfs-pv2", "apply nfs-pv3"]
    );
    let (code, out) = run(&register, "check", &bin);
    assert_eq!(code, 0, "{out}");
    // One PV pointing elsewhere: only it is applied again.
    fs::write(state.join("nfs-pv2.nfs"), "10.9.9.9 /volume/nfs/pv2\n").unwrap();
    let (code, out) = run(&register, "check", &bin);
    assert_eq!(code, 10, "{out}");
    assert!(
        out.contains("nfs-pv2 missing or pointing elsewhere (10.9.9.9"),
        "{out}"
    );
    assert!(
        out.ends_with("needed: PersistentVolume(s) to apply: nfs-pv2\n"),
        "{out}"
    );
    assert_eq!(run(&register, "apply", &bin).0, 0);
    assert_eq!(kubectl_calls(&state).len(), 4);
    assert_eq!(kubectl_calls(&state)[3], "apply nfs-pv2");

    // pv.available: every PV Available or Bound; a Failed one fails the step, naming it.
    assert_eq!(available.args, ["nfs-pv1", "nfs-pv2", "nfs-pv3", "2"]);
    fs::write(state.join("nfs-pv1.phase"), "Bound\n").unwrap();
    assert_eq!(run(&available, "check", &bin).0, 0);
    fs::write(state.join("nfs-pv3.phase"), "Failed\n").unwrap();
    let (code, out) = run(&available, "check", &bin);
    assert_eq!(code, 10, "{out}");
    let (code, out) = run(&available, "apply", &bin);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("Failed: nfs-pv3"), "{out}");
    fs::write(state.join("nfs-pv3.phase"), "Available\n").unwrap();

    // pv.unregister: one Bound PV refuses the whole step before anything is deleted.
    let names: Vec<String> = pvs.iter().map(|p| p.name.clone()).collect();
    let unregister = pv::unregister("m1", &names, wait);
    let (code, out) = run(&unregister, "check", &bin);
    assert_eq!(code, 11, "{out}");
    assert!(out.contains("Bound (in use): nfs-pv1"), "{out}");
    let (code, out) = run(&pv::not_bound("m1", &names), "check", &bin);
    assert_eq!(code, 11, "{out}");
    assert!(out.contains("(Bound): nfs-pv1;"), "{out}");
    assert_eq!(run(&unregister, "apply", &bin).0, 11);
    assert!(
        !kubectl_calls(&state)
            .iter()
            .any(|c| c.starts_with("delete"))
    );
    fs::write(state.join("nfs-pv1.phase"), "Available\n").unwrap();
    fs::remove_file(state.join("nfs-pv3.phase")).unwrap();
    let (code, out) = run(&unregister, "check", &bin);
    assert_eq!(code, 10, "{out}");
    let (code, out) = run(&unregister, "apply", &bin);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.ends_with("deleted PersistentVolume(s) nfs-pv1 nfs-pv2\n"),
        "{out}"
    );
    let (code, out) = run(&unregister, "check", &bin);
    assert_eq!(code, 0, "{out}");

    // The arguments of the previous version's one-PV stages, as its plans stored them.
    let old = |kind: StepKind, args: &[&str]| Step {
        kind,
        host: "m1".into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        late: Vec::new(),
        uploads: Vec::new(),
        sudo: false,
        timeout: wait,
    };
    let manifest = register.args[1].clone();
    let old_register = old(
        StepKind::PvRegister,
        &["nfs-pv1", &manifest, "10.0.0.5", "/volume/nfs/pv1"],
    );
    assert_eq!(run(&old_register, "check", &bin).0, 10);
    assert_eq!(run(&old_register, "apply", &bin).0, 0);
    assert_eq!(run(&old_register, "check", &bin).0, 0);
    assert!(
        !state.join("nfs-pv2.phase").exists(),
        "only nfs-pv1 applied"
    );
    let old_available = old(StepKind::PvAvailable, &["nfs-pv1", "2"]);
    assert_eq!(run(&old_available, "check", &bin).0, 0);
    let old_unregister = old(StepKind::PvUnregister, &["nfs-pv1", "2"]);
    assert_eq!(run(&old_unregister, "check", &bin).0, 10);
    assert_eq!(run(&old_unregister, "apply", &bin).0, 0);
    assert_eq!(run(&old_unregister, "check", &bin).0, 0);
    assert!(!state.join("nfs-pv1.phase").exists());
    // A failing kubectl fails the steps: never read as "no PersistentVolume" or "not Bound".
    fs::write(state.join("down"), "").unwrap();
    assert_eq!(run(&unregister, "check", &bin).0, 3);
    assert_eq!(run(&pv::not_bound("m1", &names), "check", &bin).0, 3);
    assert_eq!(run(&register, "check", &bin).0, 3);
    fs::remove_file(state.join("down")).unwrap();
    // Arguments that are not whole quadruples are refused before kubectl is asked.
    let calls = kubectl_calls(&state).len();
    let short = old(StepKind::PvRegister, &["nfs-pv1", &manifest, "10.0.0.5"]);
    let (code, out) = run(&short, "apply", &bin);
    assert_eq!(code, 3, "{out}");
    assert_eq!(kubectl_calls(&state).len(), calls);
}
