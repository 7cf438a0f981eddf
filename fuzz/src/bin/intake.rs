//! AFL++ entry point of the `intake` target: [`vnfkeeper_fuzz::targets::intake::run`] on each input
//! (a panic, i.e. a property violation, is a crash). Built by `scripts/fuzz intake`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        vnfkeeper_fuzz::targets::intake::run(data);
    });
}
