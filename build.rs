//! Rebuilds the crate when a migration is added: refinery embeds `migrations/` at compile time.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
