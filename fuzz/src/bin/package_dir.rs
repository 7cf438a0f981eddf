//! AFL++ entry point of the `package_dir` target: [`vnfkeeper_fuzz::targets::package_dir::run`] on each input
//! (a panic, i.e. a property violation, is a crash). Built by `scripts/fuzz package_dir`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        vnfkeeper_fuzz::targets::package_dir::run(data);
    });
}
