//! The fuzzing processes' heap bound ([`vnfkeeper_fuzz::HEAP_LIMIT_BYTES`]) is enforced: this
//! test runs its own binary again asking it to allocate past the bound (the process must abort
//! with Rust's allocation-failure message) and below it (the process must succeed).

use std::process::Command;

use vnfkeeper_fuzz::HEAP_LIMIT_BYTES;

/// Set in the child: how many bytes it allocates and touches.
const ALLOCATE: &str = "VNFKEEPER_FUZZ_HEAP_TEST_ALLOCATE";

/// In the child (with [`ALLOCATE`] set): allocates that many bytes and writes every page.
#[test]
fn allocate_as_asked() {
    let Ok(bytes) = std::env::var(ALLOCATE) else {
        return;
    };
    let bytes: usize = bytes.parse().unwrap();
    let mut v = vec![0u8; bytes];
    for i in (0..bytes).step_by(4096) {
        v[i] = 1;
    }
    println!(
        "allocated {} bytes; heap now {}",
        bytes,
        vnfkeeper_fuzz::HEAP.allocated()
    );
}

fn child(bytes: usize) -> std::process::Output {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "allocate_as_asked",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ALLOCATE, bytes.to_string())
        .output()
        .unwrap()
}

#[test]
fn an_input_past_the_heap_limit_aborts_the_process() {
    let past = child(HEAP_LIMIT_BYTES + (1 << 20));
    let stderr = String::from_utf8_lossy(&past.stderr);
    assert!(
        !past.status.success(),
        "allocating past the bound succeeded"
    );
    assert!(
        stderr.contains("memory allocation of"),
        "no allocation failure: {stderr}"
    );

    let below = child(HEAP_LIMIT_BYTES / 4);
    assert!(
        below.status.success(),
        "{}",
        String::from_utf8_lossy(&below.stderr)
    );
    assert!(String::from_utf8_lossy(&below.stdout).contains("allocated"));
}
