//! AFL++ entry point of the `intake_store` target: [`vnfkeeper_fuzz::targets::intake_store::run`] on each input
//! (a panic, i.e. a property violation, is a crash). Built by `scripts/fuzz intake_store`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        vnfkeeper_fuzz::targets::intake_store::run(data);
    });
}
