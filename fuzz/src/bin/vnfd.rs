//! AFL++ entry point of the `vnfd` target: [`vnfkeeper_fuzz::targets::vnfd::run`] on each input
//! (a panic, i.e. a property violation, is a crash). Built by `scripts/fuzz vnfd`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        vnfkeeper_fuzz::targets::vnfd::run(data);
    });
}
