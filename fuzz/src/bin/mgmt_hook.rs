//! AFL++ entry point of the `mgmt_hook` target: [`vnfkeeper_fuzz::targets::mgmt_hook::run`] on each input
//! (a panic, i.e. a property violation, is a crash). Built by `scripts/fuzz mgmt_hook`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        vnfkeeper_fuzz::targets::mgmt_hook::run(data);
    });
}
