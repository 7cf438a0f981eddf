//! AFL++ entry point of the `kubectl` target: [`vnfkeeper_fuzz::targets::kubectl::run`] on each input
//! (a panic, i.e. a property violation, is a crash). Built by `scripts/fuzz kubectl`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        vnfkeeper_fuzz::targets::kubectl::run(data);
    });
}
