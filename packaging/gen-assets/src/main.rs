//! Writes vnfkeeper's man pages and shell completions, generated from the clap definition in
//! `vnfkeeper::cli::Cli`, so that they never drift from the binary:
//!
//! ```text
//! gen-assets OUT_DIR   →  OUT_DIR/man/vnfkeeper.1, vnfkeeper-<subcommand>.1, …
//!                         OUT_DIR/completions/vnfkeeper.bash, _vnfkeeper, vnfkeeper.fish
//! ```
//!
//! A separate workspace crate (not a hidden subcommand) keeps clap_mangen and clap_complete out of
//! the shipped binary. `scripts/package` runs it before `cargo deb` and `cargo generate-rpm`.

use std::path::{Path, PathBuf};

use clap::CommandFactory as _;
use clap_complete::Shell;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Result<()> {
    let out = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .ok_or("usage: gen-assets OUT_DIR")?;
    let cmd = vnfkeeper::cli::Cli::command();
    let man_dir = out.join("man");
    let comp_dir = out.join("completions");
    std::fs::create_dir_all(&man_dir)?;
    std::fs::create_dir_all(&comp_dir)?;
    write_man_pages(&cmd, &man_dir)?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let path = clap_complete::generate_to(shell, &mut cmd.clone(), "vnfkeeper", &comp_dir)?;
        println!("{}", path.display());
    }
    Ok(())
}

/// One page for the command and one per subcommand (`vnfkeeper-config-check.1`, …), as git does;
/// clap's generated `help` subcommands get none (clap_mangen's `generate_to` skips only the top one).
fn write_man_pages(cmd: &clap::Command, dir: &Path) -> Result<()> {
    fn generate(cmd: clap::Command, dir: &Path) -> Result<()> {
        for sub in cmd.get_subcommands() {
            if sub.get_name() != "help" && !sub.is_hide_set() {
                generate(sub.clone(), dir)?;
            }
        }
        let path = clap_mangen::Man::new(cmd).generate_to(dir)?;
        println!("{}", path.display());
        Ok(())
    }
    let mut cmd = cmd.clone().disable_help_subcommand(true);
    cmd.build();
    generate(cmd, dir)
}
