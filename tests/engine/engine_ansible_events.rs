//! The kubespray flavour's `ansible.playbook` step script, as the engine sends it, run here with
//! the machine's real `ansible-playbook` (Debian's `ansible`: ansible-core 2.14 and the
//! collection ansible.posix with its `ansible.posix.jsonl` stdout callback) against the
//! playbooks of `core/src/ansible/testdata/` (local connection, and a host whose SSH port is
//! closed); its standard output read by [`PlaybookRun`] as the engine reads it. A fresh run must
//! read exactly like the committed captures, so those stay real output. Needs no root and no
//! testbed; fails, never skips, when Ansible or its collection is missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use vnfkeeper_core::ansible::PlaybookRun;
use vnfkeeper_core::recipes::{Step, StepKind};

const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/core/src/ansible/testdata");

/// A kubespray root and an inventory directory as the flavour lays them out on the Ansible
/// server: the capture's playbooks, `hosts.yaml`, `known_hosts`, `.vnfkeeper/credentials.yml`.
struct Server {
    dir: tempfile::TempDir,
}

impl Server {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let s = Self { dir };
        std::fs::create_dir_all(s.inv().join(".vnfkeeper")).unwrap();
        for f in ["failing.yml", "clean.yml"] {
            std::fs::copy(Path::new(TESTDATA).join(f), s.root().join(f)).unwrap();
        }
        std::fs::copy(
            Path::new(TESTDATA).join("hosts.yaml"),
            s.inv().join("hosts.yaml"),
        )
        .unwrap();
        std::fs::write(s.inv().join("known_hosts"), "").unwrap();
        s
    }

    fn root(&self) -> PathBuf {
        self.dir.path().to_owned()
    }

    fn inv(&self) -> PathBuf {
        self.dir.path().join("inventory")
    }

    fn creds(&self) -> PathBuf {
        self.inv().join(".vnfkeeper/credentials.yml")
    }

    /// `sh -c SCRIPT sh MODE ROOT INV BOOK RECORD ""` (no `--limit`), as the engine runs the
    /// step, with `env` added to the environment.
    fn run(&self, mode: &str, book: &str, env: &[(&str, &str)]) -> Output {
        if mode == "apply" {
            std::fs::write(self.creds(), "vnfkeeper_credentials: {}\n").unwrap();
        }
        let step = Step {
            kind: StepKind::AnsiblePlaybook,
            host: "ansible-server".into(),
            args: Vec::new(),
            uploads: Vec::new(),
            late: Vec::new(),
            sudo: false,
            timeout: std::time::Duration::from_secs(120),
        };
        Command::new("sh")
            .arg("-c")
            .arg(step.script_text())
            .arg("sh")
            .arg(mode)
            .arg(self.root())
            .arg(self.inv())
            .arg(book)
            .arg(book.trim_end_matches(".yml"))
            .arg("")
            .envs(env.iter().copied())
            .output()
            .expect("sh runs")
    }
}

/// The events of `out`'s standard output, fed line by line as the engine's sink feeds them, and
/// every line the journal would show.
fn read(out: &Output) -> (PlaybookRun, Vec<String>) {
    let text = String::from_utf8_lossy(&out.stdout);
    let mut run = PlaybookRun::default();
    let shown = text.lines().flat_map(|l| run.feed(l)).collect();
    (run, shown)
}

fn capture(name: &str) -> PlaybookRun {
    PlaybookRun::parse(&std::fs::read_to_string(Path::new(TESTDATA).join(name)).unwrap())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn kubespray_playbook_step_reads_real_ansible_events() {
    let server = Server::new();

    // A failing run: exit status 4 (a host unreachable), the recap and the failures read as in
    // the capture; the credentials removed whatever happened; no record of success.
    let out = server.run("apply", "failing.yml", &[]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let (run, shown) = read(&out);
    assert_eq!(
        run,
        capture("failing.jsonl"),
        "a fresh run reads unlike the capture"
    );
    assert!(!run.succeeded());
    assert_eq!(
        run.summary(),
        "host worker10 unreachable at task \"Check hostname\": Failed to connect to the host via \
         ssh: ssh: connect to host 127.0.0.1 port 1: Connection refused; host worker1 failed task \
         \"Join the cluster\": non-zero return code: kubeadm join refused"
    );
    assert!(
        shown
            .iter()
            .any(|l| l.starts_with("PLAY RECAP worker1 : ") && l.contains("failed=1")),
        "{shown:#?}"
    );
    assert!(shown.iter().all(|l| !l.starts_with('{')), "{shown:#?}");
    assert!(!server.creds().exists(), "credentials left behind");
    assert!(!server.inv().join(".vnfkeeper/done/failing").exists());

    // A clean run: exit 0, every host clean, the script's own line given back as text, its
    // record written, so the check finds it done.
    let out = server.run("apply", "clean.yml", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (run, shown) = read(&out);
    assert_eq!(
        run,
        capture("clean.jsonl"),
        "a fresh run reads unlike the capture"
    );
    assert!(run.succeeded(), "{}", run.summary());
    assert_eq!(shown.last().map(String::as_str), Some("clean.yml done"));
    assert!(!server.creds().exists(), "credentials left behind");
    let check = server.run("check", "clean.yml", &[]);
    assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));
    assert!(String::from_utf8_lossy(&check.stdout).starts_with("already done: clean.yml"));
}

#[test]
fn kubespray_playbook_step_names_a_missing_ansible_posix() {
    // Without the collection (ansible-core alone: hide the bundle Debian's `ansible` puts on
    // Python's path) the step fails before the run, naming what to install.
    let server = Server::new();
    let out = server.run(
        "apply",
        "clean.yml",
        &[("ANSIBLE_COLLECTIONS_SCAN_SYS_PATH", "False")],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("no stdout callback ansible.posix.jsonl")
            && err.contains("Debian's package ansible"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "the playbook ran");
    assert!(!server.creds().exists(), "credentials left behind");
    // ansible-playbook itself says so in the words the flavour's verdict recognises, should
    // the collection go missing between the check and the run.
    let direct = Command::new("ansible-playbook")
        .args(["-i", "hosts.yaml", "clean.yml"])
        .current_dir(TESTDATA)
        .env("ANSIBLE_STDOUT_CALLBACK", "ansible.posix.jsonl")
        .env("ANSIBLE_COLLECTIONS_SCAN_SYS_PATH", "False")
        .output()
        .expect("ansible-playbook is installed (Debian's package ansible)");
    assert_eq!(direct.status.code(), Some(1));
    assert!(
        stderr(&direct).contains("Invalid callback for stdout specified: ansible.posix.jsonl"),
        "{}",
        stderr(&direct)
    );
}
