//! Running one journaled step: a cloud call or a remote check-then-apply step (fanned out over
//! the hosts of a wave), each with retries for transient failures.

use std::future::Future;
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use tracing::Instrument as _;

use backon::Retryable as _;

use super::{Engine, EngineError, now, retries};
use crate::cloud::{Cloud, CloudError};
use crate::remote::{HostKeyPolicy, Output, RemoteCommand, RemoteError, Target, UploadFile};
use crate::store::{OperationRow, StoreError};
use vnfkeeper_core::ansible::PlaybookRun;
use vnfkeeper_core::console::FirstContact;
use vnfkeeper_core::flavour::{ApplyOutput, MgmtDriver};
use vnfkeeper_core::model::{
    LcmOperationType, ProblemDetails, StageKey, StepState, VnfInstanceId, VnfcId,
};
use vnfkeeper_core::recipes::{EXIT_NEEDED, EXIT_REFUSED, OutputUse, Step};
use vnfkeeper_core::wire::Secret;

/// A step that did not succeed: what, where, and why (no secrets).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("step {step} on {host}: {reason}")]
pub struct StepFailure {
    /// Step name, e.g. `storage.mount`.
    pub step: String,
    /// VNFC id and address (or `cloud`).
    pub host: String,
    /// Remote exit status, when the step ran to an exit.
    pub exit_status: Option<u32>,
    /// Masked stderr tail or error message.
    pub reason: String,
    /// HTTP-style status for the ProblemDetails (500 failed, 501 not supported).
    pub status: u16,
}

impl StepFailure {
    /// An operation this version cannot run yet.
    pub fn unsupported(op: LcmOperationType) -> Self {
        Self {
            step: "plan".into(),
            host: "-".into(),
            exit_status: None,
            reason: format!(
                "{op} is not implemented by this version of vnfkeeper; FAIL this operation"
            ),
            status: 501,
        }
    }

    /// A cloud step failed.
    pub fn cloud(step: &str, e: &CloudError) -> Self {
        Self {
            step: step.into(),
            host: "cloud".into(),
            exit_status: None,
            reason: e.to_string(),
            status: 500,
        }
    }

    /// Something about the plan's inputs is wrong (package, request, observed state).
    pub fn input(step: &str, reason: impl Into<String>) -> Self {
        Self {
            step: step.into(),
            host: "-".into(),
            exit_status: None,
            reason: reason.into(),
            status: 422,
        }
    }

    /// The ProblemDetails recorded on the operation.
    pub fn problem(&self) -> ProblemDetails {
        let exit = self
            .exit_status
            .map(|c| format!(" (exit status {c})"))
            .unwrap_or_default();
        let mut p = ProblemDetails::new(
            self.status,
            format!(
                "step {} on {} failed{exit}: {}",
                self.step, self.host, self.reason
            ),
            Vec::new(),
        );
        if self.status == 500 {
            p.title = "Step failed".into();
        }
        p
    }
}

/// How to reach one VNFC.
#[derive(Debug, Clone)]
pub(crate) struct Host {
    /// vnfcInstanceId (journal key).
    pub vnfc_id: String,
    /// Nova server id (whose console lists the host keys at first contact), if known.
    pub server_id: Option<String>,
    /// SSH target (host key pinned or trust on first use).
    pub target: Target,
    /// Values to mask in anything recorded.
    pub secrets: Vec<Secret<String>>,
    /// The VNF instance whose operation reaches the host.
    pub vnf_instance_id: String,
    /// A host outside the VNF (the Ansible server): its key is pinned by address in
    /// `external_host_key`, not on a VNFC row.
    pub external: bool,
    /// Files produced when the step runs, uploaded after the step's own uploads.
    pub late: Vec<LateFile>,
    /// For a node's `trust.*` step: the registries it makes the node trust, recorded when the
    /// step ends DONE (`Tx::record_node_trust`); empty otherwise.
    pub registries: Vec<vnfkeeper_core::flavour::trust::RegistryUse>,
}

/// A step's late file (`recipes::Late`) with its content.
#[derive(Clone)]
pub(crate) struct LateFile {
    /// Absolute path on the host.
    pub path: String,
    /// File mode.
    pub mode: u32,
    /// Content (may hold passwords: never logged).
    pub bytes: Secret<Vec<u8>>,
}

impl std::fmt::Debug for LateFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LateFile")
            .field("path", &self.path)
            .field("mode", &format_args!("{:o}", self.mode))
            .finish_non_exhaustive()
    }
}

impl Host {
    fn label(&self) -> String {
        format!("{} ({})", self.vnfc_id, self.target.address)
    }
}

impl<C: Cloud> Engine<C> {
    /// Shows "step k/N: what" in `vnfkeeper ops`.
    pub(super) fn step_status(
        &self,
        op: &OperationRow,
        step_no: i64,
        what: &str,
    ) -> Result<(), StoreError> {
        let total = self.db.with(|s| s.reader().steps_total(&op.id))?;
        let k = total
            .map(|n| format!("{step_no}/{n}"))
            .unwrap_or_else(|| step_no.to_string());
        self.status(op, &format!("step {k}: {what}"))
    }

    /// Runs a cloud step (journaled under its stage key, host `""`), retrying transient errors.
    /// `persist` records what the step learned (stack id, VNFC rows) and checks it before the
    /// step is journaled DONE, so a crash between the two cannot leave a DONE step whose result
    /// was never stored; a failed check journals the step FAILED.
    pub(super) async fn cloud_step<T, F, Fut, P>(
        &self,
        op: &OperationRow,
        key: &StageKey,
        step_no: i64,
        name: &'static str,
        f: F,
        persist: P,
    ) -> Result<T, EngineError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, CloudError>>,
        P: FnOnce(&T) -> Result<(), EngineError>,
    {
        self.step_status(op, step_no, name)?;
        self.db
            .write(|tx| tx.journal_start(&op.id, key, step_no, name, "", now()))?;
        let started = std::time::Instant::now();
        let r = self.cloud_attempts(op, key, name, f, persist).await;
        match &r {
            Ok(_) => self.metrics.step_finished(name, true, started.elapsed()),
            Err(EngineError::Step(_)) => self.metrics.step_finished(name, false, started.elapsed()),
            Err(EngineError::Store(_)) => {}
        }
        r
    }

    /// The attempts of [`Engine::cloud_step`] after its journal start.
    async fn cloud_attempts<T, F, Fut, P>(
        &self,
        op: &OperationRow,
        key: &StageKey,
        name: &'static str,
        f: F,
        persist: P,
    ) -> Result<T, EngineError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, CloudError>>,
        P: FnOnce(&T) -> Result<(), EngineError>,
    {
        let mut attempt = 1;
        let result = (|| f())
            .retry(retries(self.limits.backoff, self.limits.attempts))
            .sleep(tokio::time::sleep)
            .when(CloudError::is_transient)
            .notify(|e, wait| {
                attempt += 1;
                tracing::warn!(step = name, error = %e, attempt, wait_ms = wait.as_millis() as u64, "transient cloud error; retrying");
            })
            .await;
        match result {
            Ok(v) => {
                if let Err(err) = persist(&v) {
                    if let EngineError::Step(f) = &err {
                        self.db.write(|tx| {
                            tx.journal_finish(
                                &op.id,
                                key,
                                StepState::Failed,
                                None,
                                &f.reason,
                                now(),
                            )
                        })?;
                    }
                    return Err(err);
                }
                self.db.write(|tx| {
                    tx.journal_finish(&op.id, key, StepState::Done, None, "done", now())
                })?;
                crate::failpoint::hit("engine-step-done");
                Ok(v)
            }
            Err(e) => {
                let f = StepFailure::cloud(name, &e);
                self.db.write(|tx| {
                    tx.journal_finish(&op.id, key, StepState::Failed, None, &f.reason, now())
                })?;
                Err(f.into())
            }
        }
    }

    /// Runs remote stages `(step_no, key, step, host)` of one wave in parallel, at most
    /// `max_parallel_hosts` at once. All run to their end before the first failure (if any) is
    /// returned, so the journal is complete.
    pub(super) async fn fan_out(
        &self,
        op: &OperationRow,
        stages: Vec<(i64, StageKey, Step, Host)>,
        driver: &dyn MgmtDriver,
    ) -> Result<(), EngineError> {
        let results: Vec<Result<(), EngineError>> = futures::stream::iter(stages)
            .map(|(step_no, key, step, host)| {
                let span = tracing::info_span!("step", step = step.name(), vnfc_id = %host.vnfc_id, host = %host.target.address);
                async move { self.remote_step(op, &key, step_no, &step, &host, driver).await }
                    .instrument(span)
            })
            .buffer_unordered(self.limits.max_parallel_hosts.max(1))
            .collect()
            .await;
        results.into_iter().collect()
    }

    /// check → (upload, apply, check again) on one host, journaled under `key`, with retries
    /// for transient SSH failures.
    async fn remote_step(
        &self,
        op: &OperationRow,
        key: &StageKey,
        step_no: i64,
        step: &Step,
        host: &Host,
        driver: &dyn MgmtDriver,
    ) -> Result<(), EngineError> {
        self.db.write(|tx| {
            tx.journal_start(&op.id, key, step_no, step.name(), &host.vnfc_id, now())
        })?;
        let started = std::time::Instant::now();
        // Which attempt runs (1-based): the host key check of the first contact reads it.
        let attempt = std::sync::atomic::AtomicU32::new(0);
        let next = || attempt.load(std::sync::atomic::Ordering::Relaxed) + 1;
        let result = (|| {
            attempt.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.check_apply(step, host, next() - 1, driver)
        })
        .retry(retries(self.limits.backoff, self.limits.attempts))
        .sleep(tokio::time::sleep)
        .when(|e| match e {
            Attempt::Console(_) => true,
            Attempt::Remote(e) => e.is_transient(),
            Attempt::Failed { .. } | Attempt::Store(_) => false,
        })
        .notify(|e, wait| {
            let (attempt, wait_ms) = (next(), wait.as_millis() as u64);
            match e {
                Attempt::Console(why) => {
                    tracing::info!(reason = %why, attempt, wait_ms, "host key not verifiable yet; retrying");
                }
                Attempt::Remote(e) => {
                    tracing::warn!(error = %e, kind = e.kind(), attempt, wait_ms, "transient SSH failure; retrying");
                }
                Attempt::Failed { .. } | Attempt::Store(_) => {}
            }
        })
        .await;
        let outcome = match result {
            Ok(detail) => Ok(detail),
            Err(Attempt::Console(why)) => Err(StepFailure {
                step: step.name().into(),
                host: host.label(),
                exit_status: None,
                reason: why,
                status: 500,
            }),
            Err(Attempt::Remote(e)) => Err(StepFailure {
                step: step.name().into(),
                host: host.label(),
                exit_status: None,
                reason: format!("{e} ({})", e.kind()),
                status: 500,
            }),
            Err(Attempt::Failed {
                exit_status,
                reason,
            }) => {
                // A script that refuses (e.g. a PersistentVolume in use) changed nothing: 409.
                let status = if exit_status == Some(EXIT_REFUSED) {
                    409
                } else {
                    500
                };
                Err(StepFailure {
                    step: step.name().into(),
                    host: host.label(),
                    exit_status,
                    reason,
                    status,
                })
            }
            Err(Attempt::Store(e)) => return Err(e.into()),
        };
        self.metrics
            .step_finished(step.name(), outcome.is_ok(), started.elapsed());
        match outcome {
            Ok(detail) => {
                tracing::info!(detail = %detail, "step done");
                self.db.write(|tx| {
                    let t = now();
                    tx.journal_finish(&op.id, key, StepState::Done, Some(0), &detail, t)?;
                    if !host.registries.is_empty() {
                        let applied = detail.starts_with("applied");
                        tx.record_node_trust(
                            &VnfInstanceId::from(&host.vnf_instance_id),
                            &VnfcId::from(&host.vnfc_id),
                            &host.registries,
                            applied,
                            t,
                        )?;
                    }
                    Ok(())
                })?;
                crate::failpoint::hit("engine-step-done");
                Ok(())
            }
            Err(f) => {
                self.db.write(|tx| {
                    tx.journal_finish(
                        &op.id,
                        key,
                        StepState::Failed,
                        f.exit_status,
                        &f.reason,
                        now(),
                    )
                })?;
                Err(f.into())
            }
        }
    }

    /// How to accept the host key of a server without a pinned one, before any password is
    /// sent: the keys its console lists (Nova `os-getConsoleOutput`, cloud-init's blocks), else
    /// trust on first use. While the console holds no block yet (cloud-init prints them late in
    /// boot) or the console cannot be read for a transient reason, the attempt ends with
    /// [`Attempt::Console`] so that the step's retry loop waits and asks again; on the last
    /// attempt a console without a block (or a cloud that gives no console) means trust on
    /// first use.
    async fn first_contact(
        &self,
        host: &Host,
        attempt: u32,
    ) -> Result<(HostKeyPolicy, FirstContact), Attempt> {
        let last = attempt >= self.limits.attempts;
        let tofu = Ok((
            HostKeyPolicy::TrustOnFirstUse,
            FirstContact::TrustOnFirstUse,
        ));
        let Some(server_id) = host.server_id.as_deref() else {
            tracing::warn!(vnfc_id = %host.vnfc_id, "VNFC has no server id: no console to verify its host key against");
            return tofu;
        };
        match self.cloud.console_output(server_id, CONSOLE_LINES).await {
            Ok(text) => match vnfkeeper_core::console::parse(&text) {
                Some(keys) => Ok((
                    HostKeyPolicy::Listed {
                        server_id: server_id.to_owned(),
                        keys,
                    },
                    FirstContact::Console,
                )),
                None if !last => Err(Attempt::Console(format!(
                    "the console output of server {server_id} holds no SSH host key block yet"
                ))),
                None => {
                    tracing::warn!(vnfc_id = %host.vnfc_id, server_id, "the console output holds no SSH host key block: trust on first use");
                    tofu
                }
            },
            Err(e) if e.is_transient() => Err(Attempt::Console(format!(
                "cannot read the console output of server {server_id} to verify its host key: {e}"
            ))),
            Err(e) => {
                tracing::warn!(vnfc_id = %host.vnfc_id, server_id, error = %e, "the cloud gives no console output: trust on first use");
                tofu
            }
        }
    }

    /// The host's SSH target with its host key verified: at first contact the key is verified
    /// against the console (or trusted on first use) and pinned in the database.
    async fn verified_target(&self, host: &Host, attempt: u32) -> Result<Target, Attempt> {
        let mut target = host.target.clone();
        let mut how = None;
        if target.host_key == HostKeyPolicy::TrustOnFirstUse && !host.external {
            let (policy, first) = self.first_contact(host, attempt).await?;
            target.host_key = policy;
            how = Some(first);
        }
        let connected = self
            .remote
            .connect(&target)
            .await
            .map_err(Attempt::Remote)?;
        if connected.learned && host.external {
            // First contact with a host outside the VNF: no console to verify against.
            let pinned = self
                .db
                .write(|tx| {
                    tx.pin_external_host_key(
                        &target.address.to_string(),
                        &connected.host_key,
                        &connected.fingerprint,
                        now(),
                    )
                })
                .map_err(Attempt::Store)?;
            if pinned {
                tracing::warn!(
                    host = %host.vnfc_id,
                    address = %target.address,
                    fingerprint = %connected.fingerprint,
                    "host key of a host outside the VNF pinned by trust on first use"
                );
            }
            target.host_key = HostKeyPolicy::Pinned(connected.host_key.clone());
        } else if connected.learned {
            // First contact with a server the engine created: pin the key in the database.
            let how = how.unwrap_or(FirstContact::TrustOnFirstUse);
            let pinned = self
                .db
                .write(|tx| {
                    tx.pin_host_key(
                        &VnfcId::from(&host.vnfc_id),
                        &connected.host_key,
                        &connected.fingerprint,
                        how,
                        now(),
                    )
                })
                .map_err(Attempt::Store)?;
            if pinned {
                match how {
                    FirstContact::Console => tracing::info!(
                        vnfc_id = %host.vnfc_id,
                        fingerprint = %connected.fingerprint,
                        "host key verified against the console and pinned"
                    ),
                    FirstContact::TrustOnFirstUse => tracing::warn!(
                        vnfc_id = %host.vnfc_id,
                        fingerprint = %connected.fingerprint,
                        "host key pinned by trust on first use: the console listed no host keys"
                    ),
                }
            }
            target.host_key = HostKeyPolicy::Pinned(connected.host_key.clone());
        }
        Ok(target)
    }

    /// check → (upload, apply, check again) on one host; returns the step's verdict line.
    async fn check_apply(
        &self,
        step: &Step,
        host: &Host,
        attempt: u32,
        driver: &dyn MgmtDriver,
    ) -> Result<String, Attempt> {
        let target = self.verified_target(host, attempt).await?;
        let check = self.exec(step, &target, "check").await?;
        if check.exit_status == Some(0) {
            self.keep(step, host, &check, driver)?;
        }
        match check.exit_status {
            Some(0) => return Ok(last_line(&check)),
            Some(EXIT_NEEDED) => {}
            other => return Err(self.failed(&check, other, host, "check")),
        }
        self.upload(step, host, &target).await?;
        let apply = match step.kind.output_use() {
            OutputUse::Verdict => self.exec(step, &target, "apply").await?,
            OutputUse::Streamed => {
                let events = Arc::new(Mutex::new(PlaybookRun::default()));
                let apply = self
                    .exec_streamed(step, &target, "apply", Some(journal_sink(host, &events)))
                    .await?;
                let events = std::mem::take(&mut *events.lock().unwrap_or_else(|p| p.into_inner()));
                self.judge(step, host, &apply, &events, driver)?;
                apply
            }
        };
        if apply.exit_status != Some(0) {
            return Err(self.failed(&apply, apply.exit_status, host, "apply"));
        }
        crate::failpoint::hit(&format!("engine-applied-{}", step.name()));
        let verify = self.exec(step, &target, "check").await?;
        if verify.exit_status != Some(0) {
            return Err(self.failed(
                &verify,
                verify.exit_status,
                host,
                "verification after apply",
            ));
        }
        self.keep(step, host, &verify, driver)?;
        Ok(format!("applied: {}", last_line(&apply)))
    }

    /// The step's uploads, then its late files: first each directory they go to is made (once
    /// per step), then the files are written (through one SFTP session where the remote can:
    /// a `pv.register` of several PersistentVolumes uploads its manifests in one).
    async fn upload(&self, step: &Step, host: &Host, target: &Target) -> Result<(), Attempt> {
        let files: Vec<UploadFile<'_>> = step
            .uploads
            .iter()
            .map(|u| UploadFile {
                path: u.path.as_str(),
                bytes: u.bytes.as_slice(),
                mode: u.mode,
            })
            .chain(host.late.iter().map(|l| UploadFile {
                path: l.path.as_str(),
                bytes: l.bytes.expose().as_slice(),
                mode: l.mode,
            }))
            .collect();
        let mut made = std::collections::BTreeSet::new();
        for f in &files {
            let Some(dir) = std::path::Path::new(f.path)
                .parent()
                .filter(|d| made.insert(d.to_path_buf()))
            else {
                continue;
            };
            let mkdir = RemoteCommand::new("mkdir")
                .arg("-p")
                .arg(dir.display().to_string())
                .sudo(step.sudo)
                .timeout(std::time::Duration::from_secs(30))
                .step(step.name());
            let out = self
                .remote
                .run(target, &mkdir)
                .await
                .map_err(Attempt::Remote)?;
            if out.exit_status != Some(0) {
                return Err(self.failed(
                    &out,
                    out.exit_status,
                    host,
                    "creating the upload directory",
                ));
            }
        }
        self.remote
            .upload_files(target, &files, step.sudo)
            .await
            .map_err(Attempt::Remote)
    }

    async fn exec(&self, step: &Step, target: &Target, mode: &str) -> Result<Output, Attempt> {
        self.exec_streamed(step, target, mode, None).await
    }

    /// [`exec`](Self::exec), with standard output given line by line to `sink` as it arrives.
    async fn exec_streamed(
        &self,
        step: &Step,
        target: &Target,
        mode: &str,
        sink: Option<crate::remote::LineSink>,
    ) -> Result<Output, Attempt> {
        let timeout = step.timeout.min(self.limits.command_timeout);
        let mut cmd = RemoteCommand::script(step.script_text())
            .arg(mode)
            .args(step.args.iter().cloned())
            .sudo(step.sudo)
            .timeout(timeout)
            .step(step.name());
        if mode == "apply" {
            // One apply at a time per host, also against one a killed daemon left running.
            cmd = cmd.host_lock();
        }
        if let Some(sink) = sink {
            cmd = cmd.stream_stdout(sink);
        }
        self.remote.run(target, &cmd).await.map_err(Attempt::Remote)
    }

    /// Keeps what the flavour keeps of the step's check output (`MgmtDriver::keep`, e.g. the
    /// admin kubeconfig) under the state directory (directory 0700, file 0600, written to a
    /// temporary file and renamed). Never logged.
    fn keep(
        &self,
        step: &Step,
        host: &Host,
        out: &Output,
        driver: &dyn MgmtDriver,
    ) -> Result<(), Attempt> {
        let kept = driver
            .keep(step, &out.stdout_str())
            .map_err(|e| Attempt::Failed {
                exit_status: None,
                reason: e.to_string(),
            })?;
        let (Some(kept), Some(dir)) = (kept, self.db.with(|s| s.state_dir())) else {
            return Ok(());
        };
        let label = kept.artifact.label();
        let path = kept.artifact.path(&dir, &host.vnf_instance_id);
        write_private(&path, kept.text.expose()).map_err(|e| Attempt::Failed {
            exit_status: None,
            reason: format!("cannot keep the {label} under the state directory: {e}"),
        })?;
        tracing::info!(artifact = label, "{label} kept");
        Ok(())
    }

    /// The flavour's verdict on a streamed apply (its events were read and journaled line by
    /// line while it ran), its reason with every secret masked (also those a JSON event carried
    /// escaped).
    fn judge(
        &self,
        step: &Step,
        host: &Host,
        out: &Output,
        events: &PlaybookRun,
        driver: &dyn MgmtDriver,
    ) -> Result<(), Attempt> {
        let secrets: Vec<&Secret<String>> = host.secrets.iter().collect();
        let stdout_tail = crate::remote::tail_masked(&out.stdout, 1000, &secrets);
        let stderr_tail = out.stderr_tail(1000, &secrets);
        let verdict = driver.judge_apply(
            step,
            &ApplyOutput {
                exit_status: out.exit_status,
                signal: out.signal.as_deref(),
                events,
                stdout_tail: &stdout_tail,
                stderr_tail: &stderr_tail,
            },
        );
        verdict.map_err(|e| Attempt::Failed {
            exit_status: out.exit_status,
            reason: crate::remote::tail_masked(e.reason.as_bytes(), usize::MAX, &secrets),
        })
    }

    fn failed(&self, out: &Output, exit_status: Option<u32>, host: &Host, phase: &str) -> Attempt {
        let secrets: Vec<&Secret<String>> = host.secrets.iter().collect();
        let mut tail = out.stderr_tail(2000, &secrets);
        if tail.trim().is_empty() {
            tail = crate::remote::tail_masked(&out.stdout, 2000, &secrets);
        }
        let signal = out
            .signal
            .as_deref()
            .map(|s| format!(", killed by SIG{s}"))
            .unwrap_or_default();
        Attempt::Failed {
            exit_status,
            reason: format!("{phase} failed{signal}: {}", tail.trim()),
        }
    }
}

/// Lines of console output asked for at first contact (`os-getConsoleOutput` `length`): enough
/// to reach back to cloud-init's blocks on a server that has printed more since boot.
const CONSOLE_LINES: u32 = 10_000;

/// How one attempt at a step ended, when not successfully.
enum Attempt {
    Remote(RemoteError),
    /// The host key cannot be verified yet (no block in the console yet, console unreadable for
    /// now); retried like a transient failure.
    Console(String),
    Failed {
        exit_status: Option<u32>,
        reason: String,
    },
    Store(StoreError),
}

/// Writes `text` to `path` with mode 0600 (its directory created 0700): a temporary file,
/// synced, renamed over the old one.
/// A streamed step's output read line by line as it runs: each line fed to `events` (Ansible's
/// JSON-lines events, [`PlaybookRun::feed`]), what an operator reads of it journaled with the
/// step's span (so the operation's fields), secrets masked after the JSON was unescaped.
fn journal_sink(host: &Host, events: &Arc<Mutex<PlaybookRun>>) -> crate::remote::LineSink {
    let secrets: Vec<Secret<String>> = host.secrets.clone();
    let events = Arc::clone(events);
    Arc::new(move |line: &str| {
        let shown = events.lock().unwrap_or_else(|p| p.into_inner()).feed(line);
        let refs: Vec<&Secret<String>> = secrets.iter().collect();
        for l in shown {
            if l.trim().is_empty() {
                continue;
            }
            let l = crate::remote::tail_masked(l.as_bytes(), usize::MAX, &refs);
            tracing::info!(target: "vnfkeeper::ansible", line = %l, "ansible-playbook");
        }
    })
}

fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::other(format!(
            "{} names no file",
            path.display()
        )));
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let tmp = dir.join(format!(".{}.tmp", name.to_string_lossy()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// The last line a step script printed: its verdict ("already done: …", "applied …").
fn last_line(out: &Output) -> String {
    out.stdout_str()
        .lines()
        .last()
        .unwrap_or("")
        .trim()
        .to_owned()
}
