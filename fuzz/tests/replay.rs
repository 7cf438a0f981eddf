//! Replays every committed corpus file (`corpus/<target>/*`) through its target, so that every
//! input a fuzzer ever found failing stays fixed. Each input runs on its own thread with a
//! generous bound ([`BOUND`]): an input still running then fails the test naming the file (a
//! hang); the time is not asserted otherwise. The slowest input of each target is printed
//! (`cargo test -p vnfkeeper-fuzz -- --nocapture`).

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use vnfkeeper_fuzz::TARGETS;

/// How long one input may run before the replay reports it as a hang.
const BOUND: Duration = Duration::from_secs(10);

fn corpus(name: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(name);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs `run` on each file of the target's corpus; returns the failures (file and why).
fn replay(name: &str, run: fn(&[u8])) -> Vec<String> {
    let files = corpus(name);
    assert!(!files.is_empty(), "corpus/{name} is empty");
    let mut failures = Vec::new();
    let mut slowest = (Duration::ZERO, PathBuf::new());
    for file in files {
        let data = std::fs::read(&file).unwrap();
        let (tx, rx) = mpsc::channel();
        let start = Instant::now();
        // The thread is detached on a hang: the test fails and the process ends with it.
        std::thread::Builder::new()
            .name(format!("{name}:{}", file.display()))
            .spawn(move || {
                let r = std::panic::catch_unwind(|| run(&data));
                let _ = tx.send(r.map_err(|p| {
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_default()
                }));
            })
            .unwrap();
        match rx.recv_timeout(BOUND) {
            Ok(Ok(())) => {}
            Ok(Err(why)) => failures.push(format!("{}: panicked: {why}", file.display())),
            Err(_) => failures.push(format!("{}: still running after {BOUND:?}", file.display())),
        }
        let took = start.elapsed();
        if took > slowest.0 {
            slowest = (took, file);
        }
    }
    println!(
        "{name}: slowest input {:?} ({})",
        slowest.0,
        slowest.1.display()
    );
    failures
}

#[test]
fn every_corpus_file_passes_its_target() {
    let mut failures = Vec::new();
    for t in TARGETS {
        failures.extend(replay(t.name, t.run));
    }
    #[cfg(feature = "daemon")]
    vnfkeeper_fuzz::targets::intake_store::clean_up();
    assert!(
        failures.is_empty(),
        "{} failing inputs:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_target_has_a_corpus_and_a_bin_and_nothing_else() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs: Vec<String> = std::fs::read_dir(root.join("corpus"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    dirs.sort();
    let mut names: Vec<String> = TARGETS.iter().map(|t| t.name.to_owned()).collect();
    names.sort();
    if cfg!(feature = "daemon") {
        assert_eq!(dirs, names, "corpus/ directories and TARGETS differ");
    }
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    for n in &names {
        assert!(
            root.join(format!("src/bin/{n}.rs")).is_file(),
            "no src/bin/{n}.rs"
        );
        assert!(
            manifest.contains(&format!("name = \"{n}\"")),
            "no [[bin]] {n} in Cargo.toml"
        );
    }
}
