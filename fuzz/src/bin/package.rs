//! AFL++ entry point of the `package` target: [`vnfkeeper_fuzz::targets::package::run`] on each input
//! (a panic, i.e. a property violation, is a crash). Built by `scripts/fuzz package`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        vnfkeeper_fuzz::targets::package::run(data);
    });
}
