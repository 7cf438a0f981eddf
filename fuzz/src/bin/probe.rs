//! AFL++ entry point of the `probe` target: [`vnfkeeper_fuzz::targets::probe::run`] on each input
//! (a panic, i.e. a property violation, is a crash). Built by `scripts/fuzz probe`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        vnfkeeper_fuzz::targets::probe::run(data);
    });
}
