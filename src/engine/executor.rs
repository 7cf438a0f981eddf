//! The one executor of stored plans: runs an operation's stages wave by wave, skipping the stages
//! the journal has DONE, expanding a flavour hook's placeholder once (and storing the result
//! before running it), and carrying out cloud actions and remote steps.

use std::collections::BTreeSet;

use serde_json::Value;

use super::instance::{Instance, instance_row, stack_name};
use super::steps::{Host, LateFile};
use super::{Engine, EngineError, StepFailure, now};
use crate::cloud::{Cloud, ErrorKind, StackCreate, StackRef, StackStatus};
use crate::remote::{Auth, HostKeyPolicy, Target};
use crate::store::{OperationRow, VnfcRow};
use vnfkeeper_core::artifact::Artifact;
use vnfkeeper_core::flavour::{FlavourError, HookContext, KeptArtifacts};
use vnfkeeper_core::model::{StageKey, StepState, VnfInstanceId, VnfcId};
use vnfkeeper_core::plan::individual::AdjustedPlan;
use vnfkeeper_core::plan::stages::{
    self, Action, CloudAction, Hook, Mark, ReadCheck, StackDocument, Stage,
};
use vnfkeeper_core::wire::Secret;

/// Where a cloud stage is journaled: its operation, stage key and number, and the action's name.
pub(super) struct At<'a> {
    pub(super) op: &'a OperationRow,
    pub(super) key: &'a StageKey,
    pub(super) step_no: i64,
    pub(super) name: &'static str,
}

/// What the executor needs besides the stages: the instance and the operation's adjusted HOT.
pub(super) struct Exec<'a> {
    /// The instance (flavour driver for access and hooks, VNFD for reading VNFCs); `None` when
    /// the instance has no completed INSTANTIATE (a TERMINATE after a failed one).
    pub instance: Option<&'a Instance>,
    /// The operation's adjusted HOT (individual VNFC management): VNFC parameters.
    pub adjusted: Option<&'a AdjustedPlan>,
    /// The VNFCs a hook is about (SCALE_OUT: computed after the stack changed; HEAL: targets).
    pub subjects: Subjects,
}

/// Which VNFCs a flavour hook is given.
pub(super) enum Subjects {
    /// None (INSTANTIATE).
    None,
    /// These VNFC ids (HEAL targets, SCALE_IN victims).
    Listed(Vec<VnfcId>),
    /// The VNFCs created at or after this time (SCALE_OUT: the operation's start).
    CreatedSince(vnfkeeper_core::model::Timestamp),
}

impl Exec<'_> {
    fn instance(&self) -> Result<&Instance, StepFailure> {
        self.instance.ok_or_else(|| {
            StepFailure::input("plan", "the VNF instance has no completed INSTANTIATE")
        })
    }
}

impl From<FlavourError> for StepFailure {
    fn from(e: FlavourError) -> Self {
        StepFailure::input(e.step, e.reason)
    }
}

impl<C: Cloud> Engine<C> {
    /// Runs `stages` (the operation's stored plan) to their end. A placeholder is expanded by its
    /// hook over the VNFC rows as stored when it is reached; the expanded list is stored (and
    /// `steps_total` set to its length) before any of it runs.
    pub(super) async fn execute(
        &self,
        op: &OperationRow,
        mut stages: Vec<Stage>,
        x: &Exec<'_>,
    ) -> Result<(), EngineError> {
        let mut i = 0;
        while i < stages.len() {
            let wave = stages[i].wave;
            let end = stages[i..]
                .iter()
                .position(|s| s.wave != wave)
                .map_or(stages.len(), |n| i + n);
            if let Action::Expand(hook) = stages[i].action {
                let rows = self.db.with(|s| s.reader().vnfcs(&op.vnf_instance_id))?;
                let expansion = self.hook(op, hook, &rows, x)?;
                stages::expand(&mut stages, hook, expansion);
                stages::check(&stages)
                    .map_err(|err| StepFailure::input("plan", err.to_string()))?;
                self.save_stages(op, &stages)?;
                continue;
            }
            let done = self.db.with(|s| s.reader().done_stages(&op.id))?;
            let todo: Vec<(usize, &Stage)> = (i..end)
                .map(|n| (n, &stages[n]))
                .filter(|(_, s)| !done.contains(&s.key))
                .collect();
            if !todo.is_empty() {
                self.run_wave(op, &todo, x).await?;
            }
            i = end;
        }
        Ok(())
    }

    fn hook(
        &self,
        op: &OperationRow,
        hook: Hook,
        rows: &[VnfcRow],
        x: &Exec<'_>,
    ) -> Result<Vec<Stage>, EngineError> {
        let c = HookContext {
            vnfcs: rows,
            pv_wait: self.limits.pv_wait,
            op_occ_id: op.id.as_str(),
        };
        let subjects: Vec<VnfcId> = match &x.subjects {
            Subjects::None => Vec::new(),
            Subjects::Listed(ids) => ids.clone(),
            Subjects::CreatedSince(t) => rows
                .iter()
                .filter(|v| v.created_at >= *t)
                .map(|v| v.id.clone())
                .collect(),
        };
        let d = &x.instance()?.driver;
        Ok(match hook {
            Hook::InstantiateEnd => d.instantiate_end(c)?,
            Hook::ScaleEnd => d.scale_end(c, &subjects)?,
            Hook::HealEnd => d.heal_end(c, &subjects)?,
            Hook::Configure => {
                // What the operation's DONE stages observed: their verdict lines.
                let observed = self
                    .db
                    .with(|s| s.reader().journal(&op.id))?
                    .into_iter()
                    .filter(|j| j.state == StepState::Done)
                    .map(|j| (j.stage_key, j.detail.unwrap_or_default()))
                    .collect();
                d.configure(c, &observed)?
            }
        })
    }

    /// Writes `stages` into the operation's stored plan (the other keys of the plan are kept)
    /// and sets `steps_total` to their number.
    pub(super) fn save_stages(
        &self,
        op: &OperationRow,
        stages: &[Stage],
    ) -> Result<(), EngineError> {
        let list = serde_json::to_value(stages)
            .map_err(|err| StepFailure::input("plan", err.to_string()))?;
        // One writer per operation (the engine runs one task per VNF): read, then replace.
        let mut plan: Value = match self.db.with(|s| s.reader().operation_plan(&op.id))? {
            Some(text) => serde_json::from_str(&text)
                .ok()
                .filter(Value::is_object)
                .ok_or_else(|| {
                    StepFailure::input("plan", "the stored plan is not a JSON object")
                })?,
            None => Value::Object(Default::default()),
        };
        plan["stages"] = list;
        self.db.write(|tx| {
            tx.replace_operation_plan(&op.id, &plan.to_string())?;
            tx.set_steps_total(&op.id, stages.len() as i64)
        })?;
        Ok(())
    }

    /// One wave: a cloud stage alone, or remote stages on their hosts at once (bounded). Every
    /// remote stage runs to its end before the first failure is returned.
    async fn run_wave(
        &self,
        op: &OperationRow,
        todo: &[(usize, &Stage)],
        x: &Exec<'_>,
    ) -> Result<(), EngineError> {
        let mut remote = Vec::new();
        let rows = self.db.with(|s| s.reader().vnfcs(&op.vnf_instance_id))?;
        for (n, stage) in todo {
            let step_no = *n as i64 + 1;
            match &stage.action {
                Action::Cloud(action) => self.cloud_stage(op, step_no, stage, action, x).await?,
                Action::Remote(r) => {
                    let host = self.host(op.vnf_instance_id.as_str(), &rows, &r.step, r.role, x)?;
                    remote.push((step_no, stage.key.clone(), r.step.clone(), host));
                }
                Action::Expand(_) => {
                    return Err(StepFailure::input(
                        "plan",
                        format!("placeholder `{}` shares a wave", stage.key),
                    )
                    .into());
                }
            }
        }
        if remote.is_empty() {
            return Ok(());
        }
        // A wave may hold different steps on different hosts (a storage server prepared beside
        // the cluster install): name each once, in plan order.
        let mut names: Vec<&str> = Vec::new();
        for (_, _, step, _) in &remote {
            if !names.contains(&step.name()) {
                names.push(step.name());
            }
        }
        self.step_status(
            op,
            remote[0].0,
            &format!("{} on {} host(s)", names.join(", "), remote.len()),
        )?;
        self.fan_out(op, remote, x.instance()?.driver.as_ref())
            .await
    }

    /// How to reach VNFC `vnfc` in `role` now: the address of the role's CP in its current row,
    /// its pinned host key (first contact when none is pinned yet: see `steps::first_contact`).
    /// A role the flavour reaches at a fixed address (the Ansible server) is a host outside the
    /// VNF: its key is pinned in `external_host_key`. The step's late files are produced here,
    /// from the rows as they are now, and every password the flavour knows is masked in what is
    /// recorded of the step.
    fn host(
        &self,
        vnf_instance_id: &str,
        rows: &[VnfcRow],
        step: &vnfkeeper_core::recipes::Step,
        role: vnfkeeper_core::model::Role,
        x: &Exec<'_>,
    ) -> Result<Host, StepFailure> {
        let driver = &x.instance()?.driver;
        let access = driver.access(role)?;
        let kept = self.kept_artifacts(vnf_instance_id)?;
        let mut late = Vec::new();
        for l in &step.late {
            late.push(LateFile {
                path: l.path().to_owned(),
                mode: l.mode(),
                bytes: driver.late_upload(l, rows, &kept)?,
            });
        }
        let mut secrets = vec![access.password.clone()];
        for (artifact, text) in &kept {
            secrets.extend(artifact.secrets(text.expose()).into_iter().map(Secret::new));
        }
        for r in [
            vnfkeeper_core::model::Role::Master,
            vnfkeeper_core::model::Role::Worker,
            vnfkeeper_core::model::Role::StorageServer,
            vnfkeeper_core::model::Role::LoadBalancer,
            vnfkeeper_core::model::Role::AnsibleServer,
        ] {
            if let Ok(a) = driver.access(r) {
                secrets.push(a.password);
            }
        }
        secrets.extend(driver.secrets());
        if let Some(address) = access.address {
            let pinned = self
                .db
                .with(|s| s.reader().external_host_key(&address.to_string()))
                .map_err(|err| StepFailure::input("plan", err.to_string()))?;
            return Ok(Host {
                vnfc_id: step.host.clone(),
                server_id: None,
                target: Target {
                    address,
                    port: 22,
                    username: access.username,
                    auth: Auth::Password(access.password.clone()),
                    host_key: pinned
                        .map(HostKeyPolicy::Pinned)
                        .unwrap_or(HostKeyPolicy::TrustOnFirstUse),
                    label: step.host.clone(),
                },
                secrets,
                vnf_instance_id: vnf_instance_id.to_owned(),
                external: true,
                late,
                registries: Vec::new(),
            });
        }
        // A node's trust step records the registries it makes the node trust.
        let registries = if step.kind.records_trust() {
            driver.registries()
        } else {
            Vec::new()
        };
        let vnfc = step.host.as_str();
        let row = rows.iter().find(|v| v.id == vnfc).ok_or_else(|| {
            StepFailure::input("plan", format!("VNFC {vnfc} is not a VNFC of the instance"))
        })?;
        let address = access.address_of(row).ok_or_else(|| {
            StepFailure::input(
                "plan",
                format!("VNFC {} has no address on CP `{}`", row.id, access.cp),
            )
        })?;
        Ok(Host {
            vnfc_id: row.id.to_string(),
            server_id: row.server_id.clone(),
            target: Target {
                address,
                port: 22,
                username: access.username,
                auth: Auth::Password(access.password.clone()),
                host_key: row
                    .host_key
                    .clone()
                    .map(HostKeyPolicy::Pinned)
                    .unwrap_or(HostKeyPolicy::TrustOnFirstUse),
                label: row.id.to_string(),
            },
            secrets,
            vnf_instance_id: vnf_instance_id.to_owned(),
            external: false,
            late,
            registries,
        })
    }

    /// Removes the artifacts of `vnf_instance_id` that `which` selects from the state
    /// directory; one that cannot be removed is logged (WARN) and left.
    pub(super) fn remove_artifacts(
        &self,
        vnf_instance_id: &VnfInstanceId,
        which: impl Fn(Artifact) -> bool,
    ) {
        let Some(dir) = self.db.with(|s| s.state_dir()) else {
            return;
        };
        for artifact in Artifact::ALL.iter().copied().filter(|a| which(*a)) {
            let path = artifact.path(&dir, vnf_instance_id.as_str());
            let label = artifact.label();
            match std::fs::remove_file(&path) {
                Ok(()) => tracing::info!(path = %path.display(), "{label} removed"),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => {
                    tracing::warn!(path = %path.display(), error = %err, "cannot remove the {label}")
                }
            }
        }
    }

    /// The artifacts kept for `vnf_instance_id` under the state directory
    /// (`vnfkeeper_core::artifact`), for a step's late files and the values to mask. Errors: a
    /// kept file that cannot be read (other than absent).
    pub(super) fn kept_artifacts(
        &self,
        vnf_instance_id: &str,
    ) -> Result<KeptArtifacts, StepFailure> {
        let mut kept = KeptArtifacts::new();
        let Some(dir) = self.db.with(|s| s.state_dir()) else {
            return Ok(kept);
        };
        for artifact in Artifact::ALL {
            let path = artifact.path(&dir, vnf_instance_id);
            match std::fs::read_to_string(&path) {
                Ok(text) => {
                    kept.insert(*artifact, Secret::new(text));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(StepFailure::input(
                        "plan",
                        format!("cannot read the kept {}: {e}", artifact.label()),
                    ));
                }
            }
        }
        Ok(kept)
    }

    fn stack_request(&self, name: &str, doc: &StackDocument) -> StackCreate {
        StackCreate {
            stack_name: name.to_owned(),
            template: doc.template.clone(),
            files: doc.files.clone(),
            parameters: doc.parameters.clone(),
            timeout_mins: Some((self.limits.stack_timeout.as_secs() / 60).max(1) as u32),
            disable_rollback: true,
        }
    }

    /// The instance's stack as recorded. Errors: no stack id recorded yet.
    fn recorded_stack(&self, op: &OperationRow) -> Result<StackRef, EngineError> {
        Ok(super::instance::instance_stack(self, op.vnf_instance_id.as_str())?.1)
    }

    /// One cloud stage: its action carried out as one journaled step (`cloud_step`), each
    /// action idempotent against a crash between the call and its journal row.
    async fn cloud_stage(
        &self,
        op: &OperationRow,
        step_no: i64,
        stage: &Stage,
        action: &CloudAction,
        x: &Exec<'_>,
    ) -> Result<(), EngineError> {
        let at = At {
            op,
            key: &stage.key,
            step_no,
            name: action.name(),
        };
        match action {
            CloudAction::CreateStack(doc) => self.create_stack(&at, doc).await,
            CloudAction::WaitCreate => self.wait_stack(&at, StackStatus::CreateComplete).await,
            CloudAction::WaitUpdate => self.wait_stack(&at, StackStatus::UpdateComplete).await,
            CloudAction::PatchStack { parameters } => {
                let stack = self.recorded_stack(op)?;
                let body = Value::Object(parameters.clone());
                self.journaled(&at, || self.cloud.update_stack_patch(&stack, body.clone()))
                    .await
            }
            CloudAction::UpdateStack(doc) => {
                let stack = self.recorded_stack(op)?;
                let req = self.stack_request(&stack.name, doc);
                self.journaled(&at, || self.cloud.update_stack(&stack, &req))
                    .await
            }
            CloudAction::ReadVnfcs(check) => {
                let stack = self.recorded_stack(op)?;
                self.read_vnfcs(op, at.key, step_no, &stack, check, x).await
            }
            CloudAction::MarkUnhealthy { marks, reason } => {
                self.mark_unhealthy(&at, marks, reason).await
            }
            CloudAction::MarkGroupMembers { victims, reason } => {
                self.mark_group_members(&at, victims, reason).await
            }
            CloudAction::DeleteStack => self.delete_stack(&at).await,
            CloudAction::WaitDelete => self.wait_delete(&at).await,
            CloudAction::StopServer { server_id } => self.stop_server(&at, server_id).await,
            CloudAction::DetachVolume {
                server_id,
                volume_id,
            } => self.detach_volume(&at, server_id, volume_id).await,
            CloudAction::RegisterVim => self.register_vim(&at).await,
        }
    }

    /// `nova.stop`: the server `SHUTOFF` (asked once with `os-stop` while it is `ACTIVE` or in
    /// `ERROR`) or gone. Polled for at most the stack timeout.
    async fn stop_server(&self, at: &At<'_>, server_id: &str) -> Result<(), EngineError> {
        self.polled_step(at, || async move {
            let mut poll = PollPause::new(self.limits.stack_timeout);
            let mut asked = false;
            loop {
                let Some(s) = self.cloud.server(server_id).await? else {
                    return Ok(None);
                };
                match s.status.as_str() {
                    "SHUTOFF" => return Ok(None),
                    // Nova stops an ERROR server too (its vm_state becomes `stopped`, from
                    // which a volume can be detached).
                    "ACTIVE" | "ERROR" if !asked => {
                        match self.cloud.stop_server(server_id).await {
                            // Already being stopped (or otherwise busy): keep polling.
                            Err(e) if matches!(e.kind(), ErrorKind::Conflict) => {}
                            other => other?,
                        }
                        asked = true;
                    }
                    _ => {}
                }
                if !poll.next().await {
                    return Ok(Some(format!(
                        "server {server_id} is still {} after {} s",
                        s.status,
                        poll.deadline.as_secs()
                    )));
                }
            }
        })
        .await
    }

    /// `nova.detach_volume`: the volume no longer attached to `server_id` and `available`
    /// (detached once through Nova while attached there). A kept volume that is gone or attached
    /// to another server fails the stage. Polled for at most the stack timeout.
    async fn detach_volume(
        &self,
        at: &At<'_>,
        server_id: &str,
        volume_id: &str,
    ) -> Result<(), EngineError> {
        self.polled_step(at, || async move {
            let mut poll = PollPause::new(self.limits.stack_timeout);
            let mut asked = false;
            loop {
                let Some(v) = self.cloud.volume(volume_id).await? else {
                    return Ok(Some(format!("volume {volume_id} is gone")));
                };
                let here = v.attachments.iter().any(|a| a.server_id == server_id);
                if !here {
                    if let Some(a) = v.attachments.first() {
                        return Ok(Some(format!(
                            "volume {volume_id} is attached to server {}, not {server_id}",
                            a.server_id
                        )));
                    }
                    if v.status == "available" {
                        return Ok(None);
                    }
                } else if !asked && v.status == "in-use" {
                    match self.cloud.detach_volume(server_id, volume_id).await {
                        // Nova no longer lists the attachment: Cinder catches up.
                        Err(e) if matches!(e.kind(), ErrorKind::NotFound) => {}
                        other => other?,
                    }
                    asked = true;
                }
                if !poll.next().await {
                    return Ok(Some(format!(
                        "volume {volume_id} is still {} after {} s",
                        v.status,
                        poll.deadline.as_secs()
                    )));
                }
            }
        })
        .await
    }

    /// `f` as the journaled cloud step `at`, where `f` polls until the state it waits for
    /// (`None`) or gives the reason it never came (`Some`), which fails the stage.
    async fn polled_step<F, Fut>(&self, at: &At<'_>, f: F) -> Result<(), EngineError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<Option<String>, crate::cloud::CloudError>>,
    {
        self.cloud_step(
            at.op,
            at.key,
            at.step_no,
            at.name,
            f,
            |late: &Option<String>| match late {
                None => Ok(()),
                Some(why) => Err(StepFailure::input(at.name, why.clone()).into()),
            },
        )
        .await
        .map(|_| ())
    }

    /// `f` as the journaled cloud step `at`, with nothing to store of its result.
    async fn journaled<T, F, Fut>(&self, at: &At<'_>, f: F) -> Result<(), EngineError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, crate::cloud::CloudError>>,
    {
        self.cloud_step(at.op, at.key, at.step_no, at.name, f, |_| Ok(()))
            .await
            .map(|_| ())
    }

    /// `heat.create`: the instance's stack, found by name when a crash came between its
    /// creation and recording its id, created otherwise; its id recorded.
    async fn create_stack(&self, at: &At<'_>, doc: &StackDocument) -> Result<(), EngineError> {
        let op = at.op;
        let stack_name = stack_name(op.vnf_instance_id.as_str());
        let create = self.stack_request(&stack_name, doc);
        self.cloud_step(
            op,
            at.key,
            at.step_no,
            at.name,
            || async {
                match self.cloud.find_stack(&stack_name).await? {
                    Some(s) => Ok(s),
                    None => self.cloud.create_stack(&create).await,
                }
            },
            |s: &StackRef| {
                Ok(self.db.write(|tx| {
                    tx.set_instance_stack(&op.vnf_instance_id, &s.name, Some(&s.id), now())
                })?)
            },
        )
        .await?;
        Ok(())
    }

    /// `heat.wait_create` / `heat.wait_update`: the recorded stack reaches `status`.
    async fn wait_stack(&self, at: &At<'_>, status: StackStatus) -> Result<(), EngineError> {
        let stack = self.recorded_stack(at.op)?;
        let status = [status];
        self.journaled(at, || {
            self.cloud
                .wait_stack(&stack, &status, self.limits.stack_timeout)
        })
        .await
    }

    /// `heat.mark_unhealthy`: each mark's resource marked unhealthy in its own stack.
    async fn mark_unhealthy(
        &self,
        at: &At<'_>,
        marks: &[Mark],
        reason: &str,
    ) -> Result<(), EngineError> {
        self.journaled(at, || async {
            for m in marks {
                let owner = StackRef {
                    name: m.stack_name.clone(),
                    id: m.stack_id.clone(),
                };
                self.cloud
                    .mark_unhealthy(&owner, &m.resource, reason)
                    .await?;
            }
            Ok(())
        })
        .await
    }

    /// `heat.mark_group_members`: each victim's AutoScalingGroup member (the resource whose
    /// nested stack holds the server) marked unhealthy; the victim's own resource when no
    /// member matches.
    async fn mark_group_members(
        &self,
        at: &At<'_>,
        victims: &[Mark],
        reason: &str,
    ) -> Result<(), EngineError> {
        let stack = self.recorded_stack(at.op)?;
        self.journaled(at, || async {
            let resources = self.cloud.stack_resources(&stack, 5).await?;
            for v in victims {
                let (owner, resource) = resources
                    .iter()
                    .find(|r| r.nested_stack.as_ref().is_some_and(|n| n.id == v.stack_id))
                    .map(|r| (r.stack.clone(), r.resource_name.clone()))
                    .unwrap_or_else(|| {
                        let own = StackRef {
                            name: v.stack_name.clone(),
                            id: v.stack_id.clone(),
                        };
                        (own, v.resource.clone())
                    });
                self.cloud.mark_unhealthy(&owner, &resource, reason).await?;
            }
            Ok(())
        })
        .await
    }

    /// `heat.delete`: the instance's stack deleted, if it exists.
    async fn delete_stack(&self, at: &At<'_>) -> Result<(), EngineError> {
        let known = self.known_stack(at.op)?;
        self.journaled(at, || async {
            if let Some(s) = &self.existing_stack(at.op, known.as_ref()).await? {
                self.cloud.delete_stack(s).await?;
            }
            Ok(())
        })
        .await
    }

    /// `heat.wait_delete`: the instance's stack gone (DELETE_COMPLETE or not found).
    async fn wait_delete(&self, at: &At<'_>) -> Result<(), EngineError> {
        let known = self.known_stack(at.op)?;
        self.journaled(at, || async {
            let Some(s) = self.existing_stack(at.op, known.as_ref()).await? else {
                return Ok(());
            };
            match self
                .cloud
                .wait_stack(
                    &s,
                    &[StackStatus::DeleteComplete],
                    self.limits.stack_timeout,
                )
                .await
            {
                Err(err) if matches!(err.kind(), ErrorKind::NotFound) => Ok(()),
                other => other.map(|_| ()),
            }
        })
        .await
    }

    /// The stack to delete or wait for: the recorded one, else the one of the instance's name
    /// (a crash between create and recording its id), else none.
    async fn existing_stack(
        &self,
        op: &OperationRow,
        known: Option<&StackRef>,
    ) -> Result<Option<StackRef>, crate::cloud::CloudError> {
        match known {
            Some(s) => Ok(Some(s.clone())),
            None => {
                self.cloud
                    .find_stack(&stack_name(op.vnf_instance_id.as_str()))
                    .await
            }
        }
    }

    /// The stack recorded for the instance, if an id was recorded.
    fn known_stack(&self, op: &OperationRow) -> Result<Option<StackRef>, EngineError> {
        let row = instance_row(self, op.vnf_instance_id.as_str())?;
        let name = row
            .stack_name
            .clone()
            .unwrap_or_else(|| stack_name(op.vnf_instance_id.as_str()));
        Ok(row.stack_id.map(|id| StackRef { name, id }))
    }

    /// `heat.read_vnfcs`: lists the stack's resources, servers, ports and volumes, records the
    /// VNFCs (with an adjusted HOT, each individually managed VNFC with its index and
    /// `parameters`), then checks them against `check`.
    async fn read_vnfcs(
        &self,
        op: &OperationRow,
        key: &StageKey,
        step_no: i64,
        stack: &StackRef,
        check: &ReadCheck,
        x: &Exec<'_>,
    ) -> Result<(), EngineError> {
        let vnfd = &x.instance()?.pkg.vnfd;
        let earlier = self.db.with(|s| s.reader().vnfcs(&op.vnf_instance_id))?;
        let mut stored = Vec::new();
        self.cloud_step(
            op,
            key,
            step_no,
            "heat.read_vnfcs",
            || async {
                let resources = self.cloud.stack_resources(stack, 5).await?;
                let servers = self.cloud.servers().await?;
                let ports = self.cloud.ports().await?;
                let volumes = self.cloud.volumes().await?;
                // Floating IPs are listed only for a stack that has some.
                let floating_ips = if resources
                    .iter()
                    .any(|r| r.resource_type == "OS::Neutron::FloatingIP")
                {
                    self.cloud.floating_ips().await?
                } else {
                    Vec::new()
                };
                let mut observed = vnfkeeper_core::plan::vnfcs::observe(
                    vnfd,
                    &resources,
                    &servers,
                    &ports,
                    &volumes,
                    &floating_ips,
                );
                if let Some(a) = x.adjusted {
                    a.annotate(&mut observed);
                }
                Ok(observed)
            },
            |observed| {
                stored = self
                    .db
                    .write(|tx| tx.sync_vnfcs(&op.vnf_instance_id, observed, now()))?;
                verify(&stored, check)?;
                Ok(())
            },
        )
        .await?;
        // A new or replaced server may answer at an address a pooled session still points to.
        for v in stored.iter().filter(|v| v.host_key.is_none()) {
            let cps = vnfkeeper_core::plan::vnfcs::cp_addresses(std::slice::from_ref(v));
            for addr in cps.values().filter_map(|a| a.parse().ok()) {
                let _ = self.remote.forget_address(addr).await;
            }
        }
        // A VNFC that moved (CHANGE_EXT_CONN): its old addresses may go to another server, and
        // its next session must be a new handshake at the new address against its pinned key.
        for old in &earlier {
            let now = stored.iter().find(|v| v.id == old.id);
            let kept =
                now.map(|v| vnfkeeper_core::plan::vnfcs::cp_addresses(std::slice::from_ref(v)));
            let was = vnfkeeper_core::plan::vnfcs::cp_addresses(std::slice::from_ref(old));
            for (cp, addr) in &was {
                if kept.as_ref().and_then(|k| k.get(cp)) != Some(addr)
                    && let Ok(a) = addr.parse()
                {
                    let _ = self.remote.forget_address(a).await;
                }
            }
        }
        Ok(())
    }
}

/// The stack holds what the plan expects: exactly the planned individually managed VNFCs, the
/// planned number per VDU, none of the removed ones.
fn verify(rows: &[VnfcRow], check: &ReadCheck) -> Result<(), StepFailure> {
    if let Some(planned) = &check.adjusted {
        let found: BTreeSet<String> = rows
            .iter()
            .filter_map(|r| {
                r.vnfc_index
                    .map(|i| vnfkeeper_core::heat::template::indexed(&r.vdu_id, i as u32))
            })
            .collect();
        if planned != &found {
            return Err(StepFailure::input(
                "heat.read_vnfcs",
                format!(
                    "the stack holds VNFCs [{}], the adjusted HOT plans [{}]",
                    found.into_iter().collect::<Vec<_>>().join(", "),
                    planned.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    for (vdu, want) in &check.capacities {
        let have = rows.iter().filter(|v| &v.vdu_id == vdu).count();
        if have != *want as usize {
            return Err(StepFailure::input(
                "heat.read_vnfcs",
                format!("VDU `{vdu}` has {have} VNFC(s) after the update, {want} planned"),
            ));
        }
    }
    if let Some(left) = rows.iter().find(|v| check.absent.contains(&v.id)) {
        return Err(StepFailure::input(
            "heat.read_vnfcs",
            format!("VNFC {} chosen for removal is still there", left.id),
        ));
    }
    Ok(())
}

/// The pauses of a polling step: 0.15 s, doubling up to 5 s, for at most `deadline` in all (a
/// server stop or volume detach often ends within half a second: a short first pause ends the
/// step close to it, the doubling keeps a slow one to a read every 5 s).
struct PollPause {
    started: std::time::Instant,
    deadline: std::time::Duration,
    pause: std::time::Duration,
}

impl PollPause {
    fn new(deadline: std::time::Duration) -> Self {
        Self {
            started: std::time::Instant::now(),
            deadline,
            pause: std::time::Duration::from_millis(150),
        }
    }

    /// Sleeps before the next read; `false` (without sleeping) once `deadline` has passed.
    async fn next(&mut self) -> bool {
        if self.started.elapsed() >= self.deadline {
            return false;
        }
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(std::time::Duration::from_secs(5));
        true
    }
}
