//! AFL++ entry point of the `heat` target: [`vnfkeeper_fuzz::targets::heat::run`] on each input
//! (a panic, i.e. a property violation, is a crash). Built by `scripts/fuzz heat`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        vnfkeeper_fuzz::targets::heat::run(data);
    });
}
