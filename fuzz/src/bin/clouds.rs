//! AFL++ entry point of the `clouds` target: [`vnfkeeper_fuzz::targets::clouds::run`] on each input
//! (a panic, i.e. a property violation, is a crash). Built by `scripts/fuzz clouds`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        vnfkeeper_fuzz::targets::clouds::run(data);
    });
}
