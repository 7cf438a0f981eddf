//! An engine on the testbed for integration tests (needs root): a cloud whose servers are real
//! SSH hosts, a database, a spool, and an engine over them; requests go through intake.

use std::sync::Arc;
use std::time::Duration;

use super::Cleanup;
use testbed::cloud::Testbed;
use testbed::hosts::HostFarm;
use vnfkeeper::cloud::OpenStackCloud;
use vnfkeeper::engine::{Engine, EngineLimits};
use vnfkeeper::intake::spool::{self, IntakeContext, Outcome, Spool};
use vnfkeeper::remote::{SshConfig, SshRemote};
use vnfkeeper::store::{Db, Store};
use vnfkeeper_core::model::{OpOccId, Timestamp, VnfInstanceId};

pub fn now() -> Timestamp {
    Timestamp(chrono::Utc::now())
}

/// A testbed cloud with real hosts, a database and a spool, and an engine over them.
pub struct Bed {
    pub dir: tempfile::TempDir,
    pub farm: Arc<HostFarm>,
    pub tb: Testbed,
    pub db: Db,
    pub spool: Spool,
    pub engine: Engine<OpenStackCloud>,
    pub cloud: Arc<OpenStackCloud>,
    _cleanup: Cleanup,
}

impl Bed {
    pub async fn new(prefix: &'static str, net: u8, limits: EngineLimits) -> Self {
        Self::on(prefix, net, limits, testbed::cloud::ControlPlane::Simulated).await
    }

    /// [`Bed::new`] with real Keystone and Heat (tagged `prefix`) in place of the simulated ones.
    #[allow(dead_code)] // not every test binary that includes `support` calls it
    pub async fn new_real(prefix: &'static str, net: u8, limits: EngineLimits) -> Self {
        Self::on(
            prefix,
            net,
            limits,
            testbed::cloud::ControlPlane::Real(prefix.to_string()),
        )
        .await
    }

    async fn on(
        prefix: &'static str,
        net: u8,
        limits: EngineLimits,
        control_plane: testbed::cloud::ControlPlane,
    ) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("vk-engine-")
            .tempdir_in("/var/tmp")
            .unwrap();
        // A real Heat validates a template synchronously (Glance, Nova and Neutron lookups) on a
        // machine every test binary loads: its calls get longer than the product's default.
        let real = control_plane.real_tag().is_some();
        let api_timeout = if real {
            Duration::from_secs(180)
        } else {
            Duration::from_secs(30)
        };
        let (farm, tb, cleanup) =
            super::testbed_with_hosts_on(prefix, net, dir.path(), false, control_plane).await;
        let db = Db::new(Store::open(&dir.path().join("state.db")).unwrap());
        let spool = Spool::open(&dir.path().join("spool")).unwrap();
        let mut cloud = OpenStackCloud::connect(tb.clouds_yaml(), "testbed", api_timeout)
            .await
            .unwrap();
        if real {
            // A real Heat's stack operation takes 5-15 s: polled at most every second, so that
            // the product's backoff (up to 20 s between polls) does not leave a finished step
            // waiting.
            cloud = cloud.with_poll_policy(vnfkeeper::cloud::PollPolicy {
                initial: Duration::from_millis(250),
                max: Duration::from_secs(1),
                factor: 1.5,
                jitter: 0.2,
            });
        }
        let cloud = Arc::new(cloud);
        let engine = Engine::new(
            db.clone(),
            cloud.clone(),
            Arc::new(SshRemote::new(SshConfig::default())),
            limits,
        );
        Bed {
            dir,
            farm,
            tb,
            db,
            spool,
            engine,
            cloud,
            _cleanup: cleanup,
        }
    }

    /// Submits a request file through intake; returns what intake did.
    pub fn submit(&self, bytes: &[u8]) -> Outcome {
        self.submit_in(bytes, &super::repo_root())
    }

    /// Submits a request file through intake, relative `vnfPackage` paths resolved against
    /// `packages_dir`; returns what intake did.
    #[allow(dead_code)] // not every test binary that includes `support` calls it
    pub fn submit_in(&self, bytes: &[u8], packages_dir: &std::path::Path) -> Outcome {
        let path = self.spool.submit(bytes).unwrap();
        let ctx = IntakeContext {
            packages_dir,
            package_store: &self.dir.path().join("package-store"),
            cloud_configured: true,
        };
        let mut out = self
            .db
            .with(|s| spool::process(&self.spool, s, &[path], &ctx, now()))
            .unwrap();
        out.remove(0)
    }

    /// Submits the seed's instantiate request; returns (op id, vnf instance id).
    pub fn submit_instantiate(&self) -> (OpOccId, VnfInstanceId) {
        let fixture =
            super::repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
        match self.submit(&std::fs::read(fixture).unwrap()) {
            Outcome::Accepted {
                vnf_lcm_op_occ_id,
                vnf_instance_id,
                ..
            } => (vnf_lcm_op_occ_id, vnf_instance_id),
            other => panic!("{other:?}"),
        }
    }

    /// The journal rows of operation `op`, in step order.
    pub fn journal(&self, op: &OpOccId) -> Vec<vnfkeeper::store::JournalRow> {
        self.db.with(|s| s.reader().journal(op)).unwrap()
    }

    /// Prints `op`'s journal to stderr, a line per stage: position, step, host, state, attempts,
    /// the last attempt's duration (start to finish, `-` while unfinished) and the detail.
    pub fn print_journal(&self, op: &OpOccId) {
        for j in self.journal(op) {
            // The last attempt's duration, when it finished.
            let took = match (&j.started_at, &j.finished_at) {
                (Some(a), Some(b)) => format!("{:.2}s", (b.0 - a.0).as_seconds_f64()),
                _ => "-".to_owned(),
            };
            eprintln!(
                "{:>3} {:<18} {:<38} {:<6} x{} {:>7} {}",
                j.step_no,
                j.name,
                j.host,
                j.state,
                j.attempts,
                took,
                j.detail.as_deref().unwrap_or("")
            );
        }
    }

    /// The operation's ProblemDetails as JSON text, if it has one.
    pub fn error_of(&self, op: &OpOccId) -> Option<String> {
        self.db
            .with(|s| s.reader().operation(op))
            .unwrap()
            .and_then(|o| o.error)
            .map(|p| serde_json::to_string(&p).unwrap())
    }
}

pub fn fast_limits() -> EngineLimits {
    EngineLimits {
        backoff: Duration::from_millis(200),
        pv_wait: Duration::from_secs(30),
        ..EngineLimits::default()
    }
}
