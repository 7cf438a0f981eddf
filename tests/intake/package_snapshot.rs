//! Package snapshots at intake (no root, no cloud): an accepted INSTANTIATE's package is copied
//! into the package store, content-addressed and deduplicated, with its digest recorded; a CSAR
//! `.zip` of the same files gives the same snapshot; hostile packages (path escape, zip bomb,
//! symlink entry or file, bad manifest digest, oversized file) are rejected with their reason;
//! and a package swapped after acceptance leaves the snapshot — what the engine reads — as it
//! was accepted.

use std::fs;
use std::io::{Cursor, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};
use vnfkeeper::intake::snapshot;
use vnfkeeper::intake::spool::{self, IntakeContext, Outcome, Spool};
use vnfkeeper::store::{Db, Store};
use vnfkeeper_core::model::{OpOccId, ProblemDetails, Timestamp};
use vnfkeeper_core::package::{PackageDigest, VnfPackage, files::LIMITS};
use zip::write::SimpleFileOptions;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture_package() -> PathBuf {
    repo_root().join("fixtures/packages/pv-k8s-cluster")
}

/// A database, a spool and a package store in a temporary directory.
struct Env {
    dir: tempfile::TempDir,
    db: Db,
    spool: Spool,
    n: std::cell::Cell<u32>,
}

impl Env {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::new(Store::open(&dir.path().join("state.db")).unwrap());
        let spool = Spool::open(&dir.path().join("spool")).unwrap();
        Env {
            dir,
            db,
            spool,
            n: std::cell::Cell::new(0),
        }
    }

    fn store(&self) -> PathBuf {
        self.dir.path().join("package-store")
    }

    /// Submits the seed INSTANTIATE naming `package` (for a new VNF instance each time).
    fn submit(&self, package: &Path) -> Outcome {
        let n = self.n.get() + 1;
        self.n.set(n);
        let fixture = repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
        let mut v: Value = serde_json::from_slice(&fs::read(fixture).unwrap()).unwrap();
        v["vnfPackage"] = package.display().to_string().into();
        v["vnfInstanceId"] = format!("snap-{n}").into();
        v["requestId"] = format!("snap-{n}").into();
        let path = self.spool.submit(v.to_string().as_bytes()).unwrap();
        let store = self.store();
        let ctx = IntakeContext {
            packages_dir: self.dir.path(),
            package_store: &store,
            cloud_configured: false,
        };
        let now = Timestamp(chrono::Utc::now());
        let mut out = self
            .db
            .with(|s| spool::process(&self.spool, s, &[path], &ctx, now))
            .unwrap();
        out.remove(0)
    }

    fn accepted(&self, package: &Path) -> (OpOccId, PackageDigest, PathBuf) {
        match self.submit(package) {
            Outcome::Accepted {
                vnf_lcm_op_occ_id, ..
            } => {
                let (digest, dir) = self
                    .db
                    .with(|s| s.reader().package_snapshot(&vnf_lcm_op_occ_id))
                    .unwrap()
                    .expect("a snapshot recorded");
                (vnf_lcm_op_occ_id, digest, dir)
            }
            other => panic!("{}: {other:?}", package.display()),
        }
    }

    fn rejected(&self, package: &Path) -> ProblemDetails {
        match self.submit(package) {
            Outcome::Rejected { problem, .. } => problem,
            other => panic!("{}: expected a rejection, got {other:?}", package.display()),
        }
    }

    /// Snapshot directories in the store, and whether `tmp/` is empty.
    fn snapshots(&self) -> (Vec<String>, bool) {
        let names = |d: PathBuf| -> Vec<String> {
            let mut v: Vec<String> = fs::read_dir(d)
                .map(|r| {
                    r.map(|e| e.unwrap().file_name().into_string().unwrap())
                        .collect()
                })
                .unwrap_or_default();
            v.sort();
            v
        };
        let store = self.store();
        (
            names(store.join("sha256")),
            names(store.join("tmp")).is_empty(),
        )
    }
}

/// Every file of `dir` by relative path.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, d: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for e in fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.push((rel, fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// A CSAR of `files` (relative path, content), plus any `extra` entries written by `more`.
fn csar(
    files: &[(String, Vec<u8>)],
    more: impl FnOnce(&mut zip::ZipWriter<Cursor<Vec<u8>>>),
) -> Vec<u8> {
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (p, c) in files {
        w.start_file(p.as_str(), opts).unwrap();
        w.write_all(c).unwrap();
    }
    more(&mut w);
    w.finish().unwrap().into_inner()
}

fn copy_dir(from: &Path, to: &Path) {
    for (rel, content) in tree(from) {
        let p = to.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }
}

fn reason(p: &ProblemDetails) -> String {
    format!("{} | {:?}", p.detail, p.errors)
}

#[test]
fn a_directory_package_is_snapshotted_once_with_its_digest_recorded() {
    let env = Env::new();
    let (op, digest, dir) = env.accepted(&fixture_package());
    assert_eq!(dir, env.store().join("sha256").join(digest.to_string()));
    // The copy holds exactly the package's files; files 0640, directories 0750.
    assert_eq!(tree(&dir), tree(&fixture_package()));
    assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o7777, 0o750);
    let vnfd = dir.join("Definitions/pv_k8s_cluster_vnfd.yaml");
    assert_eq!(fs::metadata(&vnfd).unwrap().mode() & 0o7777, 0o640);
    // The digest is that of the file list in sha256sum format.
    let list: String = tree(&fixture_package())
        .iter()
        .map(|(p, c)| format!("{:x}  {p}\n", Sha256::digest(c)))
        .collect();
    assert_eq!(
        digest.to_string(),
        format!("{:x}", Sha256::digest(list.as_bytes()))
    );
    // The operation's vnf_package is the snapshot, not the operator's directory.
    let (_, package) = env
        .db
        .with(|s| s.reader().operation_params(&op))
        .unwrap()
        .unwrap();
    assert_eq!(package.as_deref(), Some(dir.to_str().unwrap()));
    // A second request with the same package: the same snapshot, nothing written again.
    let (_, again, _) = env.accepted(&fixture_package());
    assert_eq!(again, digest);
    assert_eq!(env.snapshots(), (vec![digest.to_string()], true));
}

#[test]
fn a_csar_zip_of_the_same_files_is_the_same_snapshot_and_its_manifest_is_checked() {
    let env = Env::new();
    let work = tempfile::tempdir().unwrap();
    let files = tree(&fixture_package());
    let zip = work.path().join("pv.zip");
    fs::write(&zip, csar(&files, |_| {})).unwrap();
    let (_, from_zip, _) = env.accepted(&zip);
    let (_, from_dir, _) = env.accepted(&fixture_package());
    assert_eq!(from_zip, from_dir);

    // With a manifest (SOL 004 .mf at the root) whose digests match: accepted.
    let vnfd = "Definitions/pv_k8s_cluster_vnfd.yaml";
    let content = &files.iter().find(|(p, _)| p == vnfd).unwrap().1;
    let mf = |hash: String| {
        format!(
            "metadata:\nvnf_product_name: pv\n\nSource: {vnfd}\nAlgorithm: SHA-256\nHash: {hash}\n"
        )
    };
    let good = work.path().join("good-mf.zip");
    let with_mf = |hash: String| {
        let mut f = files.clone();
        f.push(("pv.mf".into(), mf(hash).into_bytes()));
        csar(&f, |_| {})
    };
    fs::write(&good, with_mf(format!("{:x}", Sha256::digest(content)))).unwrap();
    env.accepted(&good);
    // A manifest digest that does not match: rejected naming the file.
    let bad = work.path().join("bad-mf.zip");
    fs::write(&bad, with_mf(format!("{:x}", Sha256::digest(b"other")))).unwrap();
    let p = env.rejected(&bad);
    assert_eq!(p.status, 422);
    assert!(
        reason(&p).contains(&format!("`{vnfd}` does not match its Hash")),
        "{}",
        reason(&p)
    );
}

#[test]
fn hostile_zips_are_rejected_with_a_specific_reason_and_leave_nothing_behind() {
    let env = Env::new();
    let work = tempfile::tempdir().unwrap();
    let files = tree(&fixture_package());
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "escape.zip",
            csar(&files, |w| {
                w.start_file("../../../tmp/vk-escaped", opts).unwrap();
                w.write_all(b"x").unwrap();
            }),
            "`..` component",
        ),
        (
            "bomb.zip",
            csar(&files, |w| {
                w.start_file("Files/zeros", opts).unwrap();
                w.write_all(&vec![0u8; 32 << 20]).unwrap();
            }),
            "zip bomb",
        ),
        (
            "symlink.zip",
            csar(&files, |w| {
                w.add_symlink("Files/shadow", "/etc/shadow", opts).unwrap();
            }),
            "is a symbolic link",
        ),
        (
            "not-a-zip.zip",
            b"PK but not really".to_vec(),
            "not a readable ZIP",
        ),
    ];
    for (name, bytes, why) in cases {
        let path = work.path().join(name);
        fs::write(&path, bytes).unwrap();
        let p = env.rejected(&path);
        assert_eq!(p.status, 422, "{name}");
        assert_eq!(p.errors[0].pointer, "/vnfPackage", "{name}");
        assert!(reason(&p).contains(why), "{name}: {}", reason(&p));
    }
    assert!(!Path::new("/tmp/vk-escaped").exists());
    assert_eq!(env.snapshots(), (vec![], true));
}

#[test]
fn hostile_directories_are_rejected_without_following_links() {
    let env = Env::new();
    let work = tempfile::tempdir().unwrap();
    type Spoil = Box<dyn Fn(&Path)>;
    let cases: Vec<(&str, Spoil, &str)> = vec![
        (
            "link-to-shadow",
            Box::new(|p: &Path| {
                symlink("/etc/shadow", p.join("Files/kubernetes/nfs-pv1.yaml.bak")).unwrap()
            }),
            "is a symbolic link",
        ),
        (
            "linked-dir",
            Box::new(|p: &Path| {
                fs::remove_dir_all(p.join("Scripts")).unwrap();
                symlink("/etc", p.join("Scripts")).unwrap();
            }),
            "`Scripts` is a symbolic link",
        ),
        (
            "fifo",
            Box::new(|p: &Path| {
                let st = std::process::Command::new("mkfifo")
                    .arg(p.join("Files/pipe"))
                    .status()
                    .unwrap();
                assert!(st.success());
            }),
            "not a regular file",
        ),
        (
            "huge",
            Box::new(|p: &Path| {
                // Sparse: no disk used, but one byte over the per-file limit.
                let f = fs::File::create(p.join("Files/huge.img")).unwrap();
                f.set_len(LIMITS.max_file_bytes + 1).unwrap();
            }),
            "larger than",
        ),
    ];
    for (name, spoil, why) in cases {
        let pkg = work.path().join(name);
        copy_dir(&fixture_package(), &pkg);
        spoil(&pkg);
        let p = env.rejected(&pkg);
        assert_eq!(p.status, 422, "{name}");
        assert!(reason(&p).contains(why), "{name}: {}", reason(&p));
    }
    assert_eq!(env.snapshots(), (vec![], true));
}

#[test]
fn a_package_swapped_after_acceptance_leaves_the_snapshot_as_accepted() {
    let env = Env::new();
    let work = tempfile::tempdir().unwrap();
    let pkg = work.path().join("pv");
    copy_dir(&fixture_package(), &pkg);
    let before = tree(&pkg);
    let (op, digest, dir) = env.accepted(&pkg);

    // The operator's files change: the install script, a PV manifest replaced by a link to a
    // file outside the package, and then the whole directory swapped for a link elsewhere.
    fs::write(
        pkg.join("Scripts/install_k8s_cluster.sh"),
        "#!/bin/sh\nexit 1\n",
    )
    .unwrap();
    fs::remove_file(pkg.join("Files/kubernetes/nfs-pv1.yaml")).unwrap();
    symlink("/etc/passwd", pkg.join("Files/kubernetes/nfs-pv1.yaml")).unwrap();
    let elsewhere = work.path().join("elsewhere");
    copy_dir(&fixture_package(), &elsewhere);
    fs::write(elsewhere.join("Scripts/install_k8s_cluster.sh"), "evil").unwrap();
    fs::rename(&pkg, work.path().join("pv.old")).unwrap();
    symlink(&elsewhere, &pkg).unwrap();

    // The snapshot the operation names is unchanged, and what the engine loads from it
    // (`vnf_package`: `Instance::load` reads that path) has the accepted content.
    assert_eq!(tree(&dir), before);
    let (_, package) = env
        .db
        .with(|s| s.reader().operation_params(&op))
        .unwrap()
        .unwrap();
    let loaded = VnfPackage::load(Path::new(package.as_deref().unwrap())).unwrap();
    let script = loaded.read("Scripts/install_k8s_cluster.sh").unwrap();
    let original = &before
        .iter()
        .find(|(p, _)| p == "Scripts/install_k8s_cluster.sh")
        .unwrap()
        .1;
    assert_eq!(&script, original);
    assert!(
        fs::symlink_metadata(dir.join("Files/kubernetes/nfs-pv1.yaml"))
            .unwrap()
            .file_type()
            .is_file()
    );
    // Snapshot files are not writable by anyone but the owner, and not readable by others.
    let mode = fs::metadata(dir.join("Scripts/install_k8s_cluster.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o640);
    // A later request (another batch) naming the swapped package gets another snapshot.
    let (_, fresh, fresh_dir) = env.accepted(&pkg);
    assert_ne!(fresh, digest);
    assert_ne!(fresh_dir, dir);
    assert_eq!(tree(&dir), before);
}

/// A SCALE envelope for instance `vnf` with `steps` worker steps.
fn scale(vnf: &str, steps: u32, rid: &str) -> Vec<u8> {
    serde_json::json!({
        "operation": "SCALE",
        "vnfInstanceId": vnf,
        "requestId": rid,
        "request": {"type": "SCALE_OUT", "aspectId": "worker_instance", "numberOfSteps": steps}
    })
    .to_string()
    .into_bytes()
}

#[test]
fn scale_is_checked_against_the_snapshot_loaded_before_the_write_transaction() {
    let env = Env::new();
    let work = tempfile::tempdir().unwrap();
    let pkg = work.path().join("pv");
    copy_dir(&fixture_package(), &pkg);
    env.accepted(&pkg); // instance snap-1, INSTANTIATE queued
    // The operator's package loses its VNFD: the check still uses the accepted one.
    fs::remove_dir_all(&pkg).unwrap();
    let store = env.store();
    let ctx = IntakeContext {
        packages_dir: env.dir.path(),
        package_store: &store,
        cloud_configured: false,
    };
    let now = Timestamp(chrono::Utc::now());
    let run = |bodies: &[Vec<u8>]| {
        let paths: Vec<PathBuf> = bodies
            .iter()
            .map(|b| env.spool.submit(b).unwrap())
            .collect();
        env.db
            .with(|s| spool::process(&env.spool, s, &paths, &ctx, now))
            .unwrap()
    };
    // Beyond max_scale_level (2) of worker_instance: rejected; within: accepted.
    let out = run(&[scale("snap-1", 3, "s-far"), scale("snap-1", 2, "s-ok")]);
    match &out[0] {
        Outcome::Rejected { problem, .. } => {
            assert!(
                problem.detail.contains("max_scale_level"),
                "{}",
                problem.detail
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(out[1], Outcome::Accepted { .. }), "{:?}", out[1]);
    // An INSTANTIATE and a SCALE in one batch: the SCALE sees the batch's own snapshot.
    let fixture = repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let mut inst: Value = serde_json::from_slice(&fs::read(fixture).unwrap()).unwrap();
    inst["vnfPackage"] = fixture_package().display().to_string().into();
    inst["vnfInstanceId"] = "snap-batch".into();
    inst["requestId"] = "snap-batch".into();
    let out = run(&[
        inst.to_string().into_bytes(),
        scale("snap-batch", 3, "b-far"),
    ]);
    assert!(matches!(out[0], Outcome::Accepted { .. }), "{:?}", out[0]);
    assert!(
        matches!(&out[1], Outcome::Rejected { problem, .. } if problem.detail.contains("max_scale_level")),
        "{:?}",
        out[1]
    );
}

#[test]
fn a_snapshot_edited_in_the_store_no_longer_verifies() {
    let env = Env::new();
    let (_, digest, dir) = env.accepted(&fixture_package());
    assert_eq!(snapshot::verify(&dir, digest), Ok(()));
    let script = dir.join("Scripts/install_k8s_cluster.sh");
    fs::write(&script, "#!/bin/sh\nexit 1\n").unwrap();
    let e = snapshot::verify(&dir, digest).unwrap_err();
    assert!(matches!(e, snapshot::VerifyError::Changed { .. }), "{e}");
    assert!(e.to_string().contains("changed since acceptance"), "{e}");
    fs::remove_file(&script).unwrap();
    symlink("/etc/passwd", &script).unwrap();
    let e = snapshot::verify(&dir, digest).unwrap_err();
    assert!(matches!(e, snapshot::VerifyError::Unreadable { .. }), "{e}");
    assert!(e.to_string().contains("symbolic link"), "{e}");
}
