//! Intake benchmark: drops 10,000 valid envelopes into the spool of a running daemon and prints
//! accepted files per second, the p50/p99 latency from rename into `new/` to commit, the longest
//! gap between two watchdog pings during the run (the daemon runs with `WATCHDOG_USEC` = 1 s, so
//! it pings every 500 ms; target < 1 s) and the time from SIGTERM to exit.
//!
//! Baseline measured in the same run: reading, hashing and renaming the same 10,000 files with no
//! validation and no database (the filesystem's share of the work). Figures are printed as
//! absolute numbers and as a ratio to that baseline. Target: ≥ 2,000 files/s on 2 cores.
//!
//! Run: `cargo bench --bench intake` (optionally `-- --files N`; `-- --quick`: 2,000 files).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use sha2::{Digest, Sha256};

mod support;
mod table;

fn main() {
    let files = table::arg("files").unwrap_or(if table::quick() { 2_000 } else { 10_000usize });
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let seed: Value = serde_json::from_slice(
        &fs::read(root.join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json")).unwrap(),
    )
    .unwrap();
    let bodies: Vec<(String, Vec<u8>)> = (0..files)
        .map(|i| {
            let mut env = seed.clone();
            env["vnfInstanceId"] = format!("bench-{i:05}").into();
            env["requestId"] = format!("bench-{i:05}").into();
            (
                format!("bench-{i:05}.json"),
                serde_json::to_vec(&env).unwrap(),
            )
        })
        .collect();

    let dir = support::BenchDir::new();
    let baseline = baseline(dir.path(), &bodies);

    let (spool, db, config) = support::write_config(dir.path(), &root);
    let daemon = support::Daemon::start(
        Path::new(env!("CARGO_BIN_EXE_vnfkeeper")),
        &config,
        dir.path(),
    );

    // Write everything into tmp/ first, so that only the renames are timed on the producer side.
    for (name, bytes) in &bodies {
        fs::write(spool.join("tmp").join(name), bytes).unwrap();
    }
    let mut renamed_at = Vec::with_capacity(files);
    let start = Instant::now();
    let start_wall = SystemTime::now();
    for (name, _) in &bodies {
        fs::rename(spool.join("tmp").join(name), spool.join("new").join(name)).unwrap();
        renamed_at.push(SystemTime::now());
    }
    let renames = start.elapsed();
    // Until every file has its ACCEPTED row (a count in the database, every 50 ms), then until
    // its copy is in accepted/ (written after the commit). Listing accepted/ every 20 ms as
    // this loop once did (20,000 entries at the end: copies and sidecars) took a third of the
    // CPU samples of a run on 2 cores from the daemon it measures.
    let rows = rusqlite::Connection::open_with_flags(
        &db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .unwrap();
    let accepted_rows = || {
        rows.query_row(
            "SELECT count(*) FROM intake WHERE outcome = 'ACCEPTED'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap_or(0) as usize
    };
    let done = wait(Duration::from_secs(600), Duration::from_millis(50), || {
        accepted_rows() >= files
    }) && wait(Duration::from_secs(60), Duration::from_millis(50), || {
        count_accepted(&spool) >= files
    });
    drop(rows);
    let elapsed = start.elapsed();
    let gap = daemon.longest_ping_gap(start, Instant::now());
    let pings = daemon.pings();
    let (stop, status) = daemon.sigterm();
    assert!(done, "only {} of {files} accepted", count_accepted(&spool));

    // Commit times from the database, by file name.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let mut latencies: Vec<f64> = Vec::with_capacity(files);
    let mut last_commit = start_wall;
    {
        let mut st = conn
            .prepare("SELECT file_name, committed_at FROM intake WHERE outcome = 'ACCEPTED'")
            .unwrap();
        let rows = st
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .unwrap();
        let index: std::collections::HashMap<&str, usize> = bodies
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (n.as_str(), i))
            .collect();
        for row in rows {
            let (name, at) = row.unwrap();
            let committed: SystemTime = chrono::DateTime::parse_from_rfc3339(&at).unwrap().into();
            last_commit = last_commit.max(committed);
            let i = index[name.as_str()];
            latencies.push(
                committed
                    .duration_since(renamed_at[i])
                    .unwrap_or_default()
                    .as_secs_f64()
                    * 1e3,
            );
        }
    }
    assert_eq!(
        latencies.len(),
        files,
        "every file has an ACCEPTED intake row"
    );
    latencies.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| latencies[((latencies.len() as f64 - 1.0) * p).round() as usize];
    let busy = last_commit
        .duration_since(start_wall)
        .unwrap_or(elapsed)
        .as_secs_f64();
    let rate = files as f64 / busy;
    println!(
        "intake benchmark: {files} valid INSTANTIATE envelopes, {} cores",
        num_cores()
    );
    println!("  {}", dir.what);
    println!(
        "  producer renames into new/:      {:.3} s",
        renames.as_secs_f64()
    );
    println!("  first rename → last commit:      {busy:.3} s");
    println!("  accepted files per second:       {rate:.0}   (target ≥ 2000)");
    println!("  latency rename → commit p50:     {:.1} ms", pct(0.50));
    println!("  latency rename → commit p99:     {:.1} ms", pct(0.99));
    println!("  baseline (read+sha256+rename):   {baseline:.0} files/s");
    println!("  intake / baseline:               {:.3}", rate / baseline);
    println!(
        "  longest watchdog ping gap:       {:.3} s   (pings every {:.1} s; target < 1 s; {pings} pings)",
        gap.as_secs_f64(),
        support::WATCHDOG_USEC as f64 / 2e6
    );
    println!(
        "  SIGTERM → exit:                  {:.3} s   ({status})",
        stop.as_secs_f64()
    );
    table::row(
        "intake: accepted files/s (ratio: / read+sha256+rename)",
        rate,
        "files/s",
        table::Target::AtLeast(2000.0),
        Some(table::SameRun {
            baseline,
            ratio: rate / baseline,
            target: table::Target::None,
        }),
    );
    table::row(
        "intake: rename to commit p99",
        pct(0.99),
        "ms",
        table::Target::None,
        None,
    );
    table::row(
        "intake: longest watchdog ping gap",
        gap.as_secs_f64(),
        "s",
        table::Target::AtMost(1.0),
        None,
    );
    table::row(
        "intake: SIGTERM to exit",
        stop.as_secs_f64(),
        "s",
        table::Target::AtMost(3.0),
        None,
    );
}

/// Files per second for the filesystem-only share: read, hash, rename to another directory.
fn baseline(dir: &Path, bodies: &[(String, Vec<u8>)]) -> f64 {
    let (a, b) = (dir.join("base-a"), dir.join("base-b"));
    fs::create_dir_all(&a).unwrap();
    fs::create_dir_all(&b).unwrap();
    for (name, bytes) in bodies {
        fs::write(a.join(name), bytes).unwrap();
    }
    let start = Instant::now();
    for (name, _) in bodies {
        let data = fs::read(a.join(name)).unwrap();
        std::hint::black_box(Sha256::digest(&data));
        fs::rename(a.join(name), b.join(name)).unwrap();
    }
    let rate = bodies.len() as f64 / start.elapsed().as_secs_f64();
    fs::remove_dir_all(&a).unwrap();
    fs::remove_dir_all(&b).unwrap();
    rate
}

fn count_accepted(spool: &Path) -> usize {
    support::count_copies(&spool.join("accepted"))
}

fn wait(timeout: Duration, poll: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if f() {
            return true;
        }
        std::thread::sleep(poll);
    }
    f()
}

fn num_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
