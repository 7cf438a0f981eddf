//! AFL++ entry point of the `notification` target: [`vnfkeeper_fuzz::targets::notification::run`] on each input
//! (a panic, i.e. a property violation, is a crash). Built by `scripts/fuzz notification`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        vnfkeeper_fuzz::targets::notification::run(data);
    });
}
