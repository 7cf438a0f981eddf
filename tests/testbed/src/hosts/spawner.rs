//! Spawns long-lived host processes from one dedicated thread that never exits.
//!
//! Host processes are started under `setpriv --pdeathsig KILL`, so they die when their parent
//! *thread* dies. Spawning them from a tokio worker (which may exit) would kill hosts at random;
//! this thread lives as long as the process, so hosts die exactly when the harness dies.

use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

use anyhow::{Context, Result};

type Job = (
    Command,
    tokio::sync::oneshot::Sender<std::io::Result<Child>>,
);

static SPAWNER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();

fn sender() -> mpsc::Sender<Job> {
    SPAWNER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("testbed-host-spawner".into())
                .spawn(move || {
                    for (mut cmd, reply) in rx {
                        let _ = reply.send(cmd.spawn());
                    }
                })
                .expect("cannot start the host spawner thread");
            Mutex::new(tx)
        })
        .lock()
        .expect("spawner lock poisoned")
        .clone()
}

/// Spawns `cmd` from the spawner thread.
pub(crate) async fn spawn(cmd: Command) -> Result<Child> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    sender()
        .send((cmd, tx))
        .ok()
        .context("host spawner thread is gone")?;
    rx.await
        .context("host spawner thread dropped the request")?
        .context("cannot spawn host process")
}
