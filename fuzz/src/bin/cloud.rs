//! AFL++ entry point of the `cloud` target: [`vnfkeeper_fuzz::targets::cloud::run`] on each input
//! (a panic, i.e. a property violation, is a crash). Built by `scripts/fuzz cloud`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        vnfkeeper_fuzz::targets::cloud::run(data);
    });
}
