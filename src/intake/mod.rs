//! Intake: where requests enter vnfkeeper. Validates completely, persists, and only then acknowledges.

mod admission;
pub mod check;
mod maildir;
pub mod snapshot;
pub mod spool;
pub(crate) use admission::examine_external;
pub(crate) use admission::precheck;
pub use maildir::SubmitLabel;

/// The user name of `uid` in the password database (`/etc/passwd`); `None` when it has none or
/// the file cannot be read.
pub fn user_name(uid: u32) -> Option<String> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        (f.nth(1)?.parse::<u32>().ok()? == uid).then(|| name.to_owned())
    })
}
