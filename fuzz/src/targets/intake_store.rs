//! An accepted request's round trip through the store, SQLite included: the bytes go to
//! [`wire::parse_envelope`]; an accepted LCM request's body is split as intake splits it
//! ([`RequestBody::redacted`] at the secret pointers validation found), written with
//! [`Tx::insert_operation`](vnfkeeper::store::Tx::insert_operation) into a real database (one
//! per fuzzer process, in `/dev/shm`, with its secrets key: the secrets are sealed with
//! AES-GCM into their own column), and read back with
//! [`Reader::operation_params`](vnfkeeper::store::Reader::operation_params), as the engine
//! reads a request before planning.
//!
//! Properties: the body read back, secrets decrypted and put back, is the accepted request's
//! body exactly; the operation row reads back with the instance, the operation type and the
//! request id written (the input's, made unique per write: it is the table's idempotency key).

use std::sync::Mutex;

use serde_json::Value;
use vnfkeeper::store::{NewOperation, RequestBody, Store};
use vnfkeeper_core::model::{LcmOperationType, OpOccId, Timestamp, VnfInstanceId};
use vnfkeeper_core::wire::{self, Envelope};

/// The process's database, created at its first input and made anew every [`RESET_EVERY`]
/// inputs (so that a long run does not fill `/dev/shm`).
static STORE: Mutex<Option<(Store, u64)>> = Mutex::new(None);

/// Inputs written into one database before it is removed and created again.
const RESET_EVERY: u64 = 10_000;

/// The database's directory: one per parent process (AFL++'s fork server, or the test
/// harness's parent), so that the short-lived processes AFL++ forks reuse one place, each
/// starting it anew, instead of leaving one directory each.
fn dir() -> std::path::PathBuf {
    crate::scratch("intake-store").with_file_name(format!(
        "vnfkeeper-fuzz-intake-store-parent-{}",
        std::os::unix::process::parent_id()
    ))
}

/// Removes this process's database (the replay test calls it at its end).
pub fn clean_up() {
    *STORE.lock().unwrap_or_else(|e| e.into_inner()) = None;
    let _ = std::fs::remove_dir_all(dir());
}

/// The target: see the module documentation.
pub fn run(data: &[u8]) {
    let Ok(parsed) = wire::parse_envelope(data) else {
        return;
    };
    let Envelope::Lcm(env) = &parsed.envelope else {
        return;
    };
    let in_body: Vec<String> = parsed
        .secret_pointers
        .iter()
        .filter_map(|p| p.strip_prefix("/request").map(str::to_owned))
        .collect();
    let body = RequestBody::redacted(&env.request, &in_body);
    let operation = LcmOperationType::from(env.operation);
    let mut guard = STORE.lock().unwrap_or_else(|e| e.into_inner());
    if guard.as_ref().is_some_and(|(_, n)| n % RESET_EVERY == 0) {
        *guard = None;
    }
    let (store, n) = guard.get_or_insert_with(|| {
        let dir = dir();
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        (
            Store::open(&dir.join("state.db")).expect("a new database"),
            0,
        )
    });
    *n += 1;
    let op_id = format!("op-{n}");
    // `request_id` is the idempotency key (unique in the table); inputs repeat theirs, so each
    // write gets its own, made from the input's.
    let request_id = env.request_id.as_ref().map(|r| format!("{r}#{n}"));
    let now = Timestamp::parse("2026-11-26T00:00:00Z").expect("a time");
    store
        .write(|tx| {
            tx.create_instance_if_missing(&VnfInstanceId::from(&env.vnf_instance_id), now)?;
            tx.insert_operation(
                &NewOperation {
                    id: &OpOccId::from(&op_id),
                    vnf_instance_id: &VnfInstanceId::from(&env.vnf_instance_id),
                    operation,
                    operation_params: &body,
                    vnf_package: env.vnf_package.as_deref(),
                    request_id: request_id.as_deref(),
                    is_automatic_invocation: false,
                    status_detail: None,
                },
                now,
            )
        })
        .expect("an accepted request is written");
    let reader = store.reader();
    let (text, package) = reader
        .operation_params(&OpOccId::from(&op_id))
        .expect("read back")
        .expect("the operation exists");
    let back: Value = serde_json::from_str(&text).expect("the stored body is JSON");
    assert_eq!(back, env.request, "the body read back differs");
    assert_eq!(package, env.vnf_package);
    let row = reader
        .operation(&OpOccId::from(&op_id))
        .expect("read back")
        .expect("the operation row exists");
    assert_eq!(row.vnf_instance_id, env.vnf_instance_id);
    assert_eq!(row.operation, operation);
    assert_eq!(row.request_id, request_id);
}
