//! WAL checkpoints on their own thread and connection, so that no commit waits for one.
//!
//! By default SQLite checkpoints inside the commit that takes the WAL past 1,000 pages: that
//! commit copies the WAL into the database file and, at `synchronous=NORMAL`, syncs both
//! (<https://www.sqlite.org/wal.html#automatic_checkpoint>) — a few milliseconds during which
//! every caller waiting on the one read-write connection waits too (a notification's 204, an
//! intake batch). [`Checkpointer::start`] raises that threshold on the read-write connection to
//! [`SAFETY_NET_PAGES`] and runs `PRAGMA wal_checkpoint(PASSIVE)` on a second connection of its
//! own, at most every [`INTERVAL`] and only after a write ([`Checkpointer::poke`]). A PASSIVE
//! checkpoint neither waits for nor blocks writers and readers
//! (<https://www.sqlite.org/c3ref/wal_checkpoint_v2.html>); the next writer restarts the WAL from
//! its beginning once every frame is in the database, so the WAL stays as small as before.
//! Durability is unchanged: a commit is in the WAL when it returns, as before, and at
//! `synchronous=FULL` (`[ha]`) synced there by the commit itself.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

/// Shortest time between two background checkpoints: writes within it share one.
pub const INTERVAL: Duration = Duration::from_millis(500);

/// WAL size in pages (4 KiB each) at which the read-write connection still checkpoints by
/// itself: reached only when the background thread cannot keep up or has stopped.
pub const SAFETY_NET_PAGES: u32 = 10_000;

/// The handle of the checkpoint thread. Dropping it (with every clone of the `Db` holding it,
/// after the read-write connection) ends the thread and waits for it: its connection, then
/// the last one, checkpoints the whole WAL as it closes, as the read-write connection did before
/// (so a cleanly stopped daemon leaves everything in `state.db`).
#[derive(Debug)]
pub struct Checkpointer {
    wake: Option<SyncSender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Checkpointer {
    /// Sets `PRAGMA wal_autocheckpoint` of `conn` (the read-write connection of the database at
    /// `path`) to [`SAFETY_NET_PAGES`] and starts the thread. `None` for an in-memory database
    /// or when the thread cannot be started (SQLite's own checkpoints then stay in place).
    pub fn start(conn: &Connection) -> Option<Self> {
        let path = PathBuf::from(conn.path().filter(|p| !p.is_empty())?);
        let (wake, woken) = std::sync::mpsc::sync_channel(1);
        let thread = match std::thread::Builder::new()
            .name("wal-checkpoint".into())
            .spawn(move || run(&path, &woken))
        {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the WAL checkpoint thread; SQLite checkpoints in commits");
                return None;
            }
        };
        if let Err(e) = conn.pragma_update(None, "wal_autocheckpoint", SAFETY_NET_PAGES) {
            tracing::warn!(error = %e, "cannot raise wal_autocheckpoint; SQLite checkpoints in commits too");
        }
        Some(Self {
            wake: Some(wake),
            thread: Some(thread),
        })
    }

    /// Tells the thread that something may have been written (cheap, never blocks).
    pub fn poke(&self) {
        if let Some(w) = &self.wake {
            let _ = w.try_send(());
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        drop(self.wake.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread: waits for a poke, lets [`INTERVAL`] pass so that the writes around it share one
/// checkpoint, and checkpoints; ends when the handle is dropped.
fn run(path: &Path, woken: &Receiver<()>) {
    let conn = match Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(database = %path.display(), error = %e, "WAL checkpoint thread cannot open the database; the WAL grows to {SAFETY_NET_PAGES} pages between checkpoints");
            return;
        }
    };
    let mut failing = false;
    while woken.recv().is_ok() {
        // Let INTERVAL pass (pokes within it share this checkpoint), unless the handle is
        // dropped: then close at once.
        let until = Instant::now() + INTERVAL;
        loop {
            match woken.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok(()) => {}
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        match conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
            Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
        }) {
            Ok((frames, done)) => {
                failing = false;
                tracing::trace!(frames, done, "WAL checkpoint");
            }
            // Logged once per failing spell: the read-write connection's checkpoints remain.
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(database = %path.display(), error = %e, "WAL checkpoint failed; trying again after the next write");
            }
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages in the database file itself (not the WAL): what checkpoints have copied there.
    fn db_pages(path: &Path) -> u64 {
        std::fs::metadata(path).unwrap().len() / 4096
    }

    #[test]
    fn commits_do_not_checkpoint_and_the_thread_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let conn = Connection::open(&path).unwrap();
        let _: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .unwrap();
        conn.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        let checkpointer = Checkpointer::start(&conn).unwrap();
        let limit: u32 = conn
            .query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))
            .unwrap();
        assert_eq!(limit, SAFETY_NET_PAGES);
        // 1,200 commits of a page each: past SQLite's default threshold of 1,000 pages, at which
        // a commit would have copied them into the database file.
        for _ in 0..1200 {
            conn.execute("INSERT INTO t VALUES (zeroblob(3000))", [])
                .unwrap();
        }
        assert!(
            db_pages(&path) < 100,
            "a commit checkpointed: {} pages",
            db_pages(&path)
        );
        checkpointer.poke();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while db_pages(&path) < 1200 {
            assert!(
                std::time::Instant::now() < deadline,
                "no checkpoint: {} pages",
                db_pages(&path)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        for _ in 0..50 {
            conn.execute("INSERT INTO t VALUES (2)", []).unwrap();
        }
        // Closing the read-write connection, then the handle: the thread's connection, the last,
        // checkpoints everything and removes the WAL as it closes.
        drop(conn);
        drop(checkpointer);
        let wal = dir.path().join("c.db-wal");
        assert!(
            std::fs::metadata(&wal).map_or(true, |m| m.len() == 0),
            "WAL left after a clean close"
        );
        let rows: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 1250);
    }
}
