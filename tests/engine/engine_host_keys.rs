//! First contact with a server the engine created (no root needed: the testbed's cloud without
//! hosts, SSH through `FakeRemote`, whose servers all present `FAKE_HOST_KEY`): the key is
//! verified against the server's console output (Nova `os-getConsoleOutput`), refused when the
//! console lists another key, and trusted on first use — with a WARN — only when the console
//! holds no host key block.

use crate::support;
use vnfkeeper_core::model::{OpOccId, Timestamp};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use testbed::cloud::{CloudOptions, Testbed};
use vnfkeeper::cloud::OpenStackCloud;
use vnfkeeper::engine::{Engine, EngineLimits};
use vnfkeeper::intake::spool::{self, IntakeContext, Outcome, Spool};
use vnfkeeper::remote::fake::{Call, FAKE_HOST_KEY, FakeRemote};
use vnfkeeper::store::{Db, Store};

/// Log lines written while a test runs (fmt layer, no colours).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;
    fn make_writer(&'a self) -> Logs {
        self.clone()
    }
}

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    tb: Testbed,
    db: Db,
    engine: Engine<OpenStackCloud>,
    fake: Arc<FakeRemote>,
    cloud: Arc<OpenStackCloud>,
    db_path: std::path::PathBuf,
    op: OpOccId,
    logs: Logs,
    _log_guard: tracing::subscriber::DefaultGuard,
}

/// A cloud without hosts whose consoles all show `console`, an engine over it, and the seed's
/// INSTANTIATE accepted.
async fn setup(console: &str) -> Setup {
    let logs = Logs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let log_guard = tracing::subscriber::set_default(subscriber);
    let dir = tempfile::tempdir().unwrap();
    let tb = Testbed::start(CloudOptions::no_hosts(dir.path()))
        .await
        .unwrap();
    tb.cloud().set_console_override(Some(console.to_string()));
    let db = Db::new(Store::open(&dir.path().join("state.db")).unwrap());
    let spool = Spool::open(&dir.path().join("spool")).unwrap();
    let cloud = Arc::new(
        OpenStackCloud::connect(tb.clouds_yaml(), "testbed", Duration::from_secs(10))
            .await
            .unwrap(),
    );
    let fake = Arc::new(FakeRemote::new());
    let limits = EngineLimits {
        attempts: 3,
        backoff: Duration::from_millis(20),
        ..EngineLimits::default()
    };
    let engine = Engine::new(db.clone(), cloud.clone(), fake.clone(), limits);
    let fixture =
        support::repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let path = spool.submit(&std::fs::read(fixture).unwrap()).unwrap();
    let root = support::repo_root();
    let package_store = dir.path().join("package-store");
    let ctx = IntakeContext {
        packages_dir: &root,
        package_store: &package_store,
        cloud_configured: true,
    };
    let now = Timestamp(chrono::Utc::now());
    let out = db
        .with(|s| spool::process(&spool, s, &[path], &ctx, now))
        .unwrap()
        .remove(0);
    let Outcome::Accepted {
        vnf_lcm_op_occ_id, ..
    } = out
    else {
        panic!("{out:?}")
    };
    Setup {
        db_path: dir.path().join("state.db"),
        cloud,
        _dir: dir,
        tb,
        db,
        engine,
        fake,
        op: vnf_lcm_op_occ_id,
        logs,
        _log_guard: log_guard,
    }
}

/// cloud-init's blocks for one key line.
fn cloud_init(key: &str) -> String {
    let fp = vnfkeeper::remote::fingerprint(key).unwrap();
    format!(
        "[   10.0] cloud-init[800]: running modules:final\r\n\
         <14>Nov 24 03:20:01 cloud-init: -----BEGIN SSH HOST KEY FINGERPRINTS-----\r\n\
         <14>Nov 24 03:20:01 cloud-init: 256 {fp} root@vm (ED25519)\r\n\
         <14>Nov 24 03:20:01 cloud-init: -----END SSH HOST KEY FINGERPRINTS-----\r\n\
         -----BEGIN SSH HOST KEY KEYS-----\r\n{key} root@vm\r\n-----END SSH HOST KEY KEYS-----\r\n"
    )
}

/// (vnfc_id, message, evidence) of the HOST_KEY_PINNED events.
fn pinned_events(s: &Setup) -> Vec<(String, String, String)> {
    let c = rusqlite::Connection::open(&s.db_path).unwrap();
    let mut st = c
        .prepare("SELECT vnfc_id, message, evidence FROM event WHERE kind = 'HOST_KEY_PINNED' ORDER BY id")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn pins(s: &Setup) -> Vec<(String, Option<String>)> {
    let inst = s.db.with(|st| st.reader().instances()).unwrap();
    s.db.with(|st| st.reader().vnfcs(&inst[0].id))
        .unwrap()
        .into_iter()
        .map(|v| (v.id.into_string(), v.host_key))
        .collect()
}

#[tokio::test]
async fn a_key_the_console_lists_is_verified_and_pinned() {
    let s = setup(&cloud_init(FAKE_HOST_KEY)).await;
    let state = s.engine.run(&s.op).await.unwrap();
    let pins = pins(&s);
    assert!(!pins.is_empty());
    assert!(
        pins.iter()
            .all(|(_, k)| k.as_deref() == Some(FAKE_HOST_KEY)),
        "{state:?} {pins:?}"
    );
    let events = pinned_events(&s);
    assert_eq!(events.len(), pins.len(), "{events:?}");
    for (vnfc, message, evidence) in &events {
        assert!(
            message.contains("verified against the console"),
            "{message}"
        );
        assert!(
            evidence.contains("\"verified_by\":\"console\""),
            "{evidence}"
        );
        assert!(pins.iter().any(|(id, _)| id == vnfc));
    }
    let logs = s.logs.text();
    assert!(
        logs.contains("host key verified against the console and pinned"),
        "{logs}"
    );
    assert!(!logs.contains("trust on first use"), "{logs}");
    s.tb.shutdown().await;
}

#[tokio::test]
async fn a_key_the_console_does_not_list_is_refused_before_anything_runs() {
    let other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH2Hxt8c0HBnPwSf0fvzPRQ0E0xY+XJbYq3zV3rG1mAh";
    let s = setup(&cloud_init(other)).await;
    let state = s.engine.run(&s.op).await.unwrap();
    assert_eq!(state.as_str(), "FAILED_TEMP");
    let error =
        s.db.with(|st| st.reader().operation(&s.op))
            .unwrap()
            .unwrap()
            .error
            .map(|p| serde_json::to_string(&p).unwrap())
            .unwrap();
    let presented = vnfkeeper::remote::fingerprint(FAKE_HOST_KEY).unwrap();
    let listed = vnfkeeper::remote::fingerprint(other).unwrap();
    assert!(error.contains("HOST KEY NOT LISTED"), "{error}");
    assert!(
        error.contains(&presented) && error.contains(&listed),
        "{error}"
    );
    assert!(error.contains("no password was sent"), "{error}");
    use vnfkeeper::cloud::Cloud as _;
    let servers: Vec<String> = s
        .cloud
        .servers()
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.id)
        .collect();
    assert!(
        servers.iter().any(|id| error.contains(id.as_str())),
        "names the server: {error}"
    );
    // Nothing ran on any host, nothing was pinned, no pin event.
    let calls = s.fake.calls();
    assert!(
        calls.iter().all(|c| matches!(c, Call::Connect { .. })),
        "{calls:?}"
    );
    let pins = pins(&s);
    assert!(
        !pins.is_empty() && pins.iter().all(|(_, k)| k.is_none()),
        "{pins:?}"
    );
    assert!(pinned_events(&s).is_empty());
    s.tb.shutdown().await;
}

#[tokio::test]
async fn an_empty_console_is_asked_again_then_trusted_on_first_use_with_a_warning() {
    let s = setup("").await;
    let _ = s.engine.run(&s.op).await.unwrap();
    let pins = pins(&s);
    assert!(!pins.is_empty());
    assert!(
        pins.iter()
            .all(|(_, k)| k.as_deref() == Some(FAKE_HOST_KEY)),
        "{pins:?}"
    );
    let events = pinned_events(&s);
    assert_eq!(events.len(), pins.len(), "{events:?}");
    assert!(
        events
            .iter()
            .all(|(_, _, e)| e.contains("\"verified_by\":\"trust_on_first_use\"")),
        "{events:?}"
    );
    let logs = s.logs.text();
    let fp = vnfkeeper::remote::fingerprint(FAKE_HOST_KEY).unwrap();
    let warns: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("pinned by trust on first use"))
        .collect();
    assert_eq!(warns.len(), pins.len(), "{logs}");
    for (id, _) in &pins {
        assert!(
            warns
                .iter()
                .any(|w| w.contains(id.as_str()) && w.contains(&fp)),
            "WARN names {id} and {fp}: {warns:?}"
        );
    }
    // Asked again while the console held no block: `attempts` (3) console reads per host.
    let reads: u64 =
        s.tb.cloud()
            .request_counts()
            .values()
            .flat_map(|m| m.iter())
            .filter(|(k, _)| k.starts_with("POST") && k.ends_with("/action"))
            .map(|(_, n)| *n)
            .sum();
    assert_eq!(reads, 3 * pins.len() as u64, "console reads");
    s.tb.shutdown().await;
}
