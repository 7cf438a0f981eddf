//! AFL++ entry point of the `config` target: [`vnfkeeper_fuzz::targets::config::run`] on each input
//! (a panic, i.e. a property violation, is a crash). Built by `scripts/fuzz config`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        vnfkeeper_fuzz::targets::config::run(data);
    });
}
