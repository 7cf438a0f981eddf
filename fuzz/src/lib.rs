//! Fuzz targets for vnfkeeper's parsers of outside input.
//!
//! Each target in [`targets`] is `pub fn run(data: &[u8])`: it hands the bytes to the very
//! function the daemon calls on such input and then checks properties of the result, panicking
//! when one does not hold (a panic inside the parser is a failure too). `scripts/fuzz NAME` runs a
//! target under AFL++ (the `afl` feature's `src/bin/NAME.rs`); `tests/replay.rs` runs every file of
//! `corpus/NAME/` through it in `cargo test`, so every input that ever failed stays fixed.

#![forbid(unsafe_code)]

pub mod targets;

/// The heap a fuzzing process may hold, in bytes: 512 MiB.
///
/// Every binary that links this crate (the AFL++ entry points, `tests/replay.rs`) allocates
/// through [`HEAP`], which refuses an allocation past this limit; Rust then aborts the process
/// (`memory allocation of N bytes failed`), which AFL++ counts as a crash and the replay as a
/// failed test. So "0 crashes" also means no input made a parser hold more than this — the
/// bound the issue asks for, against YAML aliases, deep nesting and huge numbers. It is far above
/// what the daemon's own limits let an input need (1 MiB requests; a package unpacks to at most
/// 256 MiB), and below AFL++'s `-m` address-space limit (1024 MiB), which counts mappings rather
/// than the heap.
pub const HEAP_LIMIT_BYTES: usize = 512 << 20;

/// The process's allocator: the system allocator under [`HEAP_LIMIT_BYTES`] (`cap` crate).
#[global_allocator]
pub static HEAP: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, HEAP_LIMIT_BYTES);

/// A target: its name (the directory under `corpus/`, the `[[bin]]`) and its function.
pub struct Target {
    /// Name, as `scripts/fuzz NAME` takes it.
    pub name: &'static str,
    /// What it fuzzes, one line.
    pub what: &'static str,
    /// The target function: panics on a property violation.
    pub run: fn(&[u8]),
}

/// Every target, in the order `scripts/fuzz --list` prints them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "intake",
        what: "a request file's bytes: wire::parse_envelope, as intake examines them",
        run: targets::intake::run,
    },
    #[cfg(feature = "daemon")]
    Target {
        name: "intake_store",
        what: "an accepted request through the store: insert_operation into SQLite, operation_params back",
        run: targets::intake_store::run,
    },
    Target {
        name: "notification",
        what: "a Tacker LCM notification body: wire::notification::parse",
        run: targets::notification::run,
    },
    Target {
        name: "mgmt_hook",
        what: "a Tacker MgmtDriver hook request body: mgmt_hook::parse",
        run: targets::mgmt_hook::run,
    },
    #[cfg(feature = "daemon")]
    Target {
        name: "config",
        what: "the configuration file's text: config::Settings::parse",
        run: targets::config::run,
    },
    Target {
        name: "package",
        what: "a CSAR .zip: package::csar::unpack, the manifest check, the VNFD it names",
        run: targets::package::run,
    },
    Target {
        name: "package_dir",
        what: "a package directory (files as `=== path` sections): VnfPackage::load, base_hot, PV manifests",
        run: targets::package_dir::run,
    },
    Target {
        name: "vnfd",
        what: "one VNFD YAML file: package::Vnfd::merge_file",
        run: targets::vnfd::run,
    },
    Target {
        name: "heat",
        what: "heat::adjust: edits of a BaseHOT and LCM operation sequences (structure-aware)",
        run: targets::heat::run,
    },
    Target {
        name: "cloud",
        what: "a cloud's JSON body: Heat stack and resource, Nova server, Neutron port, Cinder volume",
        run: targets::cloud::run,
    },
    #[cfg(feature = "daemon")]
    Target {
        name: "clouds",
        what: "clouds.yaml text: cloud::parse_clouds_yaml, as connect and config check read it",
        run: targets::clouds::run,
    },
    Target {
        name: "kubectl",
        what: "kubectl get nodes/pv -o json on a first master: policy::kubectl findings",
        run: targets::kubectl::run,
    },
    Target {
        name: "probe",
        what: "remote output: console host keys, ansible-playbook's JSON-lines events, trust.observe verdicts",
        run: targets::probe::run,
    },
];

/// Whether the RFC 6901 `pointer` names a place in `doc`: a value that exists, or a member that
/// an existing object lacks (a required attribute that is missing is reported at its own
/// pointer). Array indices must exist.
pub fn pointer_in(doc: &serde_json::Value, pointer: &str) -> bool {
    if doc.pointer(pointer).is_some() {
        return true;
    }
    match pointer.rsplit_once('/') {
        Some((parent, _)) => doc
            .pointer(parent)
            .is_some_and(serde_json::Value::is_object),
        None => false,
    }
}

/// The text of `data` as far as it is UTF-8 (the rest is cut), for targets whose input is text.
pub fn text(data: &[u8]) -> &str {
    match std::str::from_utf8(data) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&data[..e.valid_up_to()]).unwrap_or_default(),
    }
}

/// This process's scratch directory for `target`, in `/dev/shm` when there is one (AFL++ runs
/// the target in one process per fuzzer: the pid keeps parallel fuzzers apart). Not created.
pub fn scratch(target: &str) -> std::path::PathBuf {
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    base.join(format!("vnfkeeper-fuzz-{target}-{}", std::process::id()))
}
