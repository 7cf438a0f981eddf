//! The `vnfkeeper` binary: everything lives in the library; this only hands over to the CLI.

fn main() -> std::process::ExitCode {
    vnfkeeper::cli::main()
}
