//! Queue benchmark: intake and the scheduler with 20,000 queued INSTANTIATE operations (no cloud
//! configured, so none starts; each is the head of its own VNF instance's queue).
//!
//! 1. Creates the 20,000 operations through the store API (one transaction), then starts the
//!    daemon with the watchdog on (`WATCHDOG_USEC` = 1 s: a ping every 500 ms).
//! 2. Drops 1,000 further valid envelopes at once: accepted files per second, from the first
//!    rename to the last copy in `accepted/` (target ≥ 2,000).
//! 3. Submits 200 files one at a time, each after the previous one was accepted: p99 latency
//!    from rename into `new/` to its arrival in `accepted/` (target ≤ 100 ms).
//! 4. Prints the longest gap between two watchdog pings over 2. and 3. (target < 1 s) and the
//!    time from SIGTERM to exit.
//! 5. In-process, on the same database: CPU time of one scheduler tick's queries (waiting
//!    TERMINATEs, runnable heads for 4 free slots, status counts), and for comparison one
//!    execution of the per-head query the tick used to run once per queue head (a full scan,
//!    `(?1 IS NULL OR vnf_instance_id = ?1)`), times the number of heads.
//!
//!    Then again with half of the queued operations FAILED_TEMP (nothing pending).
//!
//! Run: `cargo bench --bench queue` (optionally `-- --queued N`; `-- --quick`: 2,000 queued).

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use vnfkeeper::store::{NewOperation, RequestBody, Store};
use vnfkeeper_core::model::{LcmOperationType, OpOccId, Timestamp, VnfInstanceId};

mod support;
mod table;

const FURTHER: usize = 1_000;
const SINGLES: usize = 200;

fn main() {
    let queued = table::arg("queued").unwrap_or(if table::quick() { 2_000 } else { 20_000usize });
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let seed: Value = serde_json::from_slice(
        &fs::read(root.join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json")).unwrap(),
    )
    .unwrap();
    let envelope = |i: usize| {
        let mut env = seed.clone();
        env["vnfInstanceId"] = format!("queue-{i:06}").into();
        env["requestId"] = format!("queue-{i:06}").into();
        serde_json::to_vec(&env).unwrap()
    };

    let dir = support::BenchDir::new();
    let (spool, db, config) = support::write_config(dir.path(), &root);

    // 1. The queued operations.
    let created = Instant::now();
    {
        let mut store = Store::open(&db).unwrap();
        let now = Timestamp(chrono::Utc::now());
        let params = RequestBody::split(
            LcmOperationType::Instantiate,
            &serde_json::to_string(&seed["request"]).unwrap(),
        );
        store
            .write(|tx| {
                for i in 0..queued {
                    let vnf = format!("queued-{i:06}");
                    let id = format!("op-queued-{i:06}");
                    tx.create_instance_if_missing(&VnfInstanceId::from(&vnf), now)?;
                    tx.insert_operation(
                        &NewOperation {
                            id: &OpOccId::from(&id),
                            vnf_instance_id: &VnfInstanceId::from(&vnf),
                            operation: LcmOperationType::Instantiate,
                            operation_params: &params,
                            vnf_package: None,
                            request_id: Some(&id),
                            is_automatic_invocation: false,
                            status_detail: Some("waiting for a cloud"),
                        },
                        now,
                    )?;
                }
                Ok(())
            })
            .unwrap();
    }
    let created = created.elapsed();
    let daemon = support::Daemon::start(
        Path::new(env!("CARGO_BIN_EXE_vnfkeeper")),
        &config,
        dir.path(),
    );
    let (tmp, new) = (spool.join("tmp"), spool.join("new"));

    // 2. 1,000 further files at once.
    let names: Vec<String> = (0..FURTHER)
        .map(|i| format!("further-{i:05}.json"))
        .collect();
    for (i, name) in names.iter().enumerate() {
        fs::write(tmp.join(name), envelope(i)).unwrap();
    }
    let start = Instant::now();
    for name in &names {
        fs::rename(tmp.join(name), new.join(name)).unwrap();
    }
    // Until every file has its ACCEPTED row (a count in the database, every 5 ms), then until
    // the last copy is in accepted/ (written after its batch committed). Listing accepted/
    // (2,000 entries at the end: copies and sidecars) every 5 ms for the whole run, as this
    // loop once did, took CPU from the daemon it measures; now only the last batch's move is
    // waited for that way.
    let rows = rusqlite::Connection::open_with_flags(
        &db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .unwrap();
    let accepted_rows = || {
        rows.query_row(
            "SELECT count(*) FROM intake WHERE outcome = 'ACCEPTED' AND file_name LIKE 'further-%'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap_or(0) as usize
    };
    assert!(
        wait(Duration::from_secs(300), BULK_POLL, || accepted_rows()
            >= FURTHER)
            && wait(Duration::from_secs(60), BULK_POLL, || count(
                &spool.join("accepted")
            ) >= FURTHER),
        "only {} of {FURTHER} accepted",
        count(&spool.join("accepted"))
    );
    drop(rows);
    let bulk = start.elapsed().as_secs_f64();
    let rate = FURTHER as f64 / bulk;

    // 3. Single files, one at a time: from the rename to the file's arrival in accepted/.
    let mut latencies: Vec<f64> = Vec::with_capacity(SINGLES);
    for i in 0..SINGLES {
        let name = format!("single-{i:05}.json");
        fs::write(tmp.join(&name), envelope(FURTHER + i)).unwrap();
        let renamed = Instant::now();
        fs::rename(tmp.join(&name), new.join(&name)).unwrap();
        let want = FURTHER + i + 1;
        assert!(
            wait(Duration::from_secs(60), SINGLE_POLL, || count(
                &spool.join("accepted")
            ) >= want),
            "single file {i} not accepted"
        );
        latencies.push(renamed.elapsed().as_secs_f64() * 1e3);
    }
    let end = Instant::now();
    let gap = daemon.longest_ping_gap(start, end);
    let pings = daemon.pings();
    let (stop, status) = daemon.sigterm();

    let mut store = Store::open(&db).unwrap();
    latencies.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| latencies[((latencies.len() as f64 - 1.0) * p).round() as usize];

    // 5. The tick's queries, in-process, on the same database.
    let (schedule, counts, unfinished) = time_tick(&mut store);
    let tick = schedule + counts;
    let (old_one, heads) = time_old_per_head_query(&store, &db);
    // Half of the queued operations FAILED_TEMP with nothing pending (stuck heads waiting for an
    // operator), set directly in the table: the scheduling part of the tick must not grow.
    let stuck = queued / 2;
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
            "UPDATE vnf_lcm_op_occ SET operation_state = 'FAILED_TEMP' WHERE id LIKE 'op-queued-%' AND seq <= ?1",
            [stuck as i64],
        )
        .unwrap();
    // Into the main file, as the first measurement read it (not through a WAL full of pages).
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let (schedule_stuck, counts_stuck, _) = time_tick(&mut store);

    println!(
        "queue benchmark: {queued} queued INSTANTIATE operations (no cloud), {} cores",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!("  {}", dir.what);
    println!(
        "  created through the store API:    {:.3} s",
        created.as_secs_f64()
    );
    println!("  {FURTHER} further files, first rename → all in accepted/: {bulk:.3} s");
    println!("  accepted files per second:        {rate:.0}   (target ≥ 2000)");
    println!(
        "  single file rename → accepted/ p50: {:.1} ms   ({SINGLES} files, one at a time)",
        pct(0.50)
    );
    println!(
        "  single file rename → accepted/ p99: {:.1} ms   (target ≤ 100 ms)",
        pct(0.99)
    );
    println!(
        "  longest watchdog ping gap:        {:.3} s   (pings every {:.1} s; target < 1 s; {pings} pings)",
        gap.as_secs_f64(),
        support::WATCHDOG_USEC as f64 / 2e6
    );
    println!(
        "  SIGTERM → exit:                   {:.3} s   ({status})",
        stop.as_secs_f64()
    );
    println!(
        "  scheduler tick (CPU):             {:.3} ms   (scheduling {:.3} ms + status counts {:.3} ms; {unfinished} unfinished operations)",
        tick.as_secs_f64() * 1e3,
        schedule.as_secs_f64() * 1e3,
        counts.as_secs_f64() * 1e3
    );
    println!(
        "  … with {stuck} of them FAILED_TEMP:  scheduling {:.3} ms + status counts {:.3} ms",
        schedule_stuck.as_secs_f64() * 1e3,
        counts_stuck.as_secs_f64() * 1e3
    );
    println!(
        "  old tick, estimated:              {:.1} s   ({heads} heads × {:.2} ms per-head full scan)",
        old_one.as_secs_f64() * heads as f64,
        old_one.as_secs_f64() * 1e3
    );
    println!(
        "  old / new tick:                   {:.0}",
        old_one.as_secs_f64() * heads as f64 / tick.as_secs_f64()
    );
    table::row(
        "queue: accepted files/s, 1,000 at once",
        rate,
        "files/s",
        table::Target::AtLeast(2000.0),
        None,
    );
    table::row(
        "queue: single file rename to accepted/ p99",
        pct(0.99),
        "ms",
        table::Target::AtMost(100.0),
        None,
    );
    table::row(
        "queue: longest watchdog ping gap",
        gap.as_secs_f64(),
        "s",
        table::Target::AtMost(1.0),
        None,
    );
    table::row(
        "queue: SIGTERM to exit",
        stop.as_secs_f64(),
        "s",
        table::Target::AtMost(3.0),
        None,
    );
    let old_tick = old_one.as_secs_f64() * heads as f64 * 1e3;
    let tick_ms = tick.as_secs_f64() * 1e3;
    table::row(
        "queue: scheduler tick (ratio: old per-head scans / tick)",
        tick_ms,
        "ms",
        table::Target::None,
        Some(table::SameRun {
            baseline: old_tick,
            ratio: old_tick / tick_ms,
            target: table::Target::None,
        }),
    );
}

/// Mean time over 200 ticks, on this thread alone with the daemon stopped (so wall time is CPU
/// time; `/proc/thread-self/schedstat` is too coarse for tens of microseconds), of (scheduling queries: the waiting TERMINATEs and the runnable
/// heads for 4 free slots, the default `max_parallel_operations`; status counts), and the
/// number of unfinished operations.
fn time_tick(store: &mut Store) -> (Duration, Duration, i64) {
    let busy = HashSet::new();
    let mut unfinished = 0;
    let runs = 200;
    let (mut schedule, mut counts) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..runs {
        let r = store.reader();
        let t0 = Instant::now();
        std::hint::black_box(r.terminations_waiting().unwrap());
        std::hint::black_box(r.runnable_heads(4, &busy).unwrap());
        let t1 = Instant::now();
        unfinished = r.counts().unwrap().1;
        schedule += t1 - t0;
        counts += t1.elapsed();
    }
    (schedule / runs, counts / runs, unfinished)
}

/// One execution of the query the old tick ran for every queue head, and the number of heads.
fn time_old_per_head_query(store: &Store, db: &Path) -> (Duration, usize) {
    let r = store.reader();
    let heads = r.runnable_heads(usize::MAX, &HashSet::new()).unwrap();
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let mut st = conn
        .prepare(
            "SELECT seq, id, vnf_instance_id, operation, operation_state, state_entered_time, \
             start_time, is_automatic_invocation, request_id, pending_task, status_detail, error \
             FROM vnf_lcm_op_occ WHERE (?1 IS NULL OR vnf_instance_id = ?1) ORDER BY seq",
        )
        .unwrap();
    let runs = 20;
    let start = Instant::now();
    for h in heads.iter().take(runs) {
        let n = st
            .query_map([Some(h.vnf_instance_id.as_str())], |_| Ok(()))
            .unwrap()
            .count();
        std::hint::black_box(n);
    }
    (start.elapsed() / runs as u32, heads.len())
}

fn count(dir: &Path) -> usize {
    support::count_copies(dir)
}

/// Poll interval while 1,000 files arrive at once (see the bulk step).
const BULK_POLL: Duration = Duration::from_millis(5);
/// Poll interval for one file at a time (a few entries to list; its latency is the figure).
const SINGLE_POLL: Duration = Duration::from_micros(200);

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
