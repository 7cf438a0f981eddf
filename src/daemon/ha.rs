//! `[ha]` at start: the shard's file system must be mounted and hold the database before the
//! daemon takes its lock, opens or creates anything (a missing database under a cluster
//! manager means the mount is missing, not the data), and a fenced write ends the process.

use std::path::{Path, PathBuf};

use crate::store::Epoch;

/// Why `[ha]` refuses the start (exit 78).
#[derive(Debug, thiserror::Error)]
pub enum HaRefusal {
    /// `require_mount` is not a mount point now.
    #[error(
        "{mount} is not a mount point: the shard's file system is not mounted on this node (with \
         [ha] the cluster manager mounts it before it starts the daemon; nothing was created)"
    )]
    NotMounted {
        /// `ha.require_mount`.
        mount: PathBuf,
    },
    /// The mount is there but the database is not.
    #[error(
        "database {database} does not exist: the mount is missing, not the data. With [ha] the \
         daemon never creates a database; check that the shard's file system is the right one \
         and mounted at {mount}, or create a new database on purpose with `vnfkeeper db init`"
    )]
    NoDatabase {
        /// `database`.
        database: PathBuf,
        /// `ha.require_mount`.
        mount: PathBuf,
    },
    /// `/proc/self/mountinfo` could not be read.
    #[error("cannot read /proc/self/mountinfo to check {mount}: {error}")]
    MountInfo {
        /// `ha.require_mount`.
        mount: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
}

/// Checks `[ha]`'s conditions: `mount` is a mount point (`/proc/self/mountinfo`, field 5) and
/// `database` exists. Errors: [`HaRefusal`].
pub fn check_start(mount: &Path, database: &Path) -> Result<(), HaRefusal> {
    let info =
        std::fs::read_to_string("/proc/self/mountinfo").map_err(|error| HaRefusal::MountInfo {
            mount: mount.into(),
            error,
        })?;
    if !is_mount_point(&info, mount) {
        return Err(HaRefusal::NotMounted {
            mount: mount.into(),
        });
    }
    if std::fs::symlink_metadata(database).is_err() {
        return Err(HaRefusal::NoDatabase {
            database: database.into(),
            mount: mount.into(),
        });
    }
    Ok(())
}

/// Whether `mountinfo` (proc(5) `/proc/<pid>/mountinfo`) lists `path` as a mount point. The
/// mount point field escapes space, tab, newline and backslash as `\ooo`.
fn is_mount_point(mountinfo: &str, path: &Path) -> bool {
    let want = path.to_string_lossy();
    let want = want.trim_end_matches('/');
    mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|field| unescape(field).trim_end_matches('/') == want)
}

fn unescape(field: &str) -> String {
    let mut out = Vec::with_capacity(field.len());
    let b = field.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// This node's name for the daemon epoch's record (`/proc/sys/kernel/hostname`, at most 64
/// printable characters; `unknown` when unreadable).
pub fn node_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_graphic()))
        .unwrap_or_else(|| "unknown".into())
}

/// The store's fence hook ([`crate::store::OnFenced`]): logs `MSG_DAEMON_FENCED` and ends the
/// process at once with [`crate::store::EXIT_FENCED`] (79). The write was rolled back; nothing
/// else runs (no shutdown: a running step must not be journaled, and the newer daemon owns the
/// database).
pub fn exit_fenced(held: Epoch, current: Epoch) {
    tracing::error!(
        message_id = crate::message_ids::MSG_DAEMON_FENCED,
        held_epoch = held.0,
        current_epoch = current.0,
        "fenced: this daemon holds epoch {held}, the database's daemon epoch is now {current}: \
         another daemon started on this database; exiting at once with status {} (its write was \
         rolled back)",
        crate::store::EXIT_FENCED
    );
    std::process::exit(i32::from(crate::store::EXIT_FENCED));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_read_from_mountinfo_with_escapes() {
        let info = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                    40 22 7:0 / /srv/vnfkeeper/a rw - ext4 /dev/loop0 rw\n\
                    41 22 0:5 / /srv/with\\040space rw - tmpfs tmpfs rw\n";
        assert!(is_mount_point(info, Path::new("/srv/vnfkeeper/a")));
        assert!(is_mount_point(info, Path::new("/srv/vnfkeeper/a/")));
        assert!(is_mount_point(info, Path::new("/srv/with space")));
        assert!(!is_mount_point(info, Path::new("/srv/vnfkeeper")));
        assert!(!is_mount_point(info, Path::new("/srv/vnfkeeper/a/state")));
    }
}
