//! Operation plans as data: the ordered stages an LCM operation runs, decided once by pure
//! functions (the flavour's hooks and the cloud part of each operation), stored in the
//! operation's `plan` before anything acts on them, and replayed by resume and RETRY.
//!
//! A stage has a stable key (`heat.create`, `k8s.install@<vnfcInstanceId>`,
//! `storage.filesystem@<volumeId>`, `pv.register@<vnfcInstanceId>` of the master that registers
//! every PersistentVolume; an earlier version's plans hold `pv.register@<PersistentVolume>`): the step journal is keyed
//! by it, so which stages a resumed operation skips depends only on the stored list and the
//! journal, never on a package or VNFC row that changed in between. Stages with the same `wave`
//! run concurrently (bounded fan-out over hosts); waves run in order. An [`Action::Expand`] stands
//! for the stages of a flavour hook whose inputs exist only later (the VNFCs Heat creates): the
//! executor replaces it once, when it is reached, and stores the result before running it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::model::StageKey;
use crate::recipes::Step;

/// One stage of an operation's plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    /// Stable key, unique within the plan; the step journal's key.
    pub key: StageKey,
    /// Stages of one wave run concurrently; waves run in ascending order.
    pub wave: u32,
    /// What the stage does.
    pub action: Action,
}

/// What a stage does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// A call to the cloud (Heat), journaled under host `""`.
    Cloud(CloudAction),
    /// A check-then-apply step on one VNFC over SSH.
    Remote(RemoteStage),
    /// The stages of a flavour hook, computed when this stage is reached.
    Expand(Hook),
}

/// A remote stage: `step` on the VNFC `step.host`, reached as `role`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteStage {
    /// How the VNFC is reached (which CP, which credentials).
    pub role: crate::model::Role,
    /// The step (script, arguments, uploads).
    pub step: Step,
}

/// The flavour hooks whose stages follow the cloud part of an operation (Tacker's MgmtDriver
/// `instantiate_end`, `scale_end`, `heal_end`; `tacker/vnfm/mgmt_drivers/vnflcm_abstract_driver.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hook {
    /// Configure the new cluster (INSTANTIATE).
    InstantiateEnd,
    /// Configure the VNFCs a SCALE_OUT created.
    ScaleEnd,
    /// Configure the healed VNFCs.
    HealEnd,
    /// The rest of a hook's expansion that needs what its earlier stages observed (the
    /// verdict lines of their checks, e.g. a NIC's MTU): [`MgmtDriver::configure`]
    /// (`crate::flavour::MgmtDriver::configure`), expanded when reached.
    Configure,
}

impl Hook {
    /// Key of the placeholder stage, e.g. `instantiate_end`.
    pub fn key(self) -> &'static str {
        match self {
            Hook::InstantiateEnd => "instantiate_end",
            Hook::ScaleEnd => "scale_end",
            Hook::HealEnd => "heal_end",
            Hook::Configure => "configure",
        }
    }
}

/// A Heat stack request body: the top-level template, nested files and parameters (Heat
/// Orchestration API v1, `POST /stacks` and `PUT /stacks/{name}/{id}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackDocument {
    /// The top-level template (HOT) as JSON.
    pub template: Value,
    /// Nested templates by the name the template references them with.
    pub files: BTreeMap<String, String>,
    /// Stack parameters, e.g. `{"nfv": {…}}`.
    pub parameters: Map<String, Value>,
}

/// A resource to mark unhealthy: `resource` in the stack `stack_name`/`stack_id` (Heat
/// `PATCH /stacks/{name}/{id}/resources/{resource}` with `mark_unhealthy`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// Owner stack name.
    pub stack_name: String,
    /// Owner stack id.
    pub stack_id: String,
    /// Resource name in that stack.
    pub resource: String,
}

/// What `heat.read_vnfcs` checks after reading (a failed check fails the stage with 422).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadCheck {
    /// Exactly this many VNFCs per VDU (SCALE).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacities: BTreeMap<String, u32>,
    /// VNFCs that must be gone (SCALE_IN victims).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent: Vec<crate::model::VnfcId>,
    /// The individually managed VNFCs (`<VDU>-<index>`) the adjusted HOT plans: the rows get
    /// their parameters from the operation's adjusted plan and must be exactly these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adjusted: Option<BTreeSet<String>>,
}

/// A call to the cloud. The stack is the instance's (`vnf-<vnfInstanceId>` or the recorded one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloudAction {
    /// `heat.create`: create the stack, or adopt the one of that name a crashed attempt created.
    CreateStack(StackDocument),
    /// `heat.wait_create`: until `CREATE_COMPLETE`.
    WaitCreate,
    /// `heat.update`: PATCH update with these parameters (`{}` replaces what is marked
    /// unhealthy).
    PatchStack {
        /// The `parameters` of the PATCH body.
        parameters: Map<String, Value>,
    },
    /// `heat.update`: full update (PUT) with the adjusted documents.
    UpdateStack(StackDocument),
    /// `heat.wait_update`: until `UPDATE_COMPLETE`.
    WaitUpdate,
    /// `heat.read_vnfcs`: stack resources, servers, ports, volumes → VNFC rows, then `check`.
    ReadVnfcs(ReadCheck),
    /// `heat.mark_unhealthy` of known resources (HEAL).
    MarkUnhealthy {
        /// The resources.
        marks: Vec<Mark>,
        /// Heat's `resource_status_reason`.
        reason: String,
    },
    /// `heat.mark_unhealthy` of the AutoScalingGroup members whose nested stack holds these
    /// VNFCs' servers (SCALE_IN: Heat removes failed members first), found when run.
    MarkGroupMembers {
        /// The VNFCs (by their server's stack).
        victims: Vec<Mark>,
        /// Heat's `resource_status_reason`.
        reason: String,
    },
    /// `heat.delete` of the stack (found by name when no id was recorded; gone is fine).
    DeleteStack,
    /// `heat.wait_delete`: until `DELETE_COMPLETE` or gone.
    WaitDelete,
    /// `nova.stop` of a server whose kept volumes its replacement will attach (HEAL): Compute
    /// API `os-stop` unless it is `SHUTOFF` already (or gone), then until `SHUTOFF` (Nova stops
    /// a server in `ERROR` too).
    StopServer {
        /// Nova server id (decided with the plan).
        server_id: String,
    },
    /// `nova.detach_volume` of a kept volume from the server a HEAL replaces: Compute API
    /// `DELETE /servers/{server_id}/os-volume_attachments/{volume_id}` unless the volume is no
    /// longer attached to it, then until Cinder reports it `available`. Heat creates a server's
    /// replacement before it deletes the server, and Nova refuses a volume attached elsewhere.
    DetachVolume {
        /// Nova server id the volume is attached to (decided with the plan).
        server_id: String,
        /// Cinder volume id.
        volume_id: String,
    },
    /// `tacker.register_vim` (companion mode, after a Tacker INSTANTIATE's management steps):
    /// the cluster registered with Tacker's NFVO as a Kubernetes VIM (`POST /v1.0/vims`, as
    /// Tacker's sample MgmtDriver's `_create_vim`), checked first by listing Tacker's VIMs by
    /// name (`crate::tacker::vim`). Its facts (name, endpoint, CA, bearer token) are read from
    /// the kept artifacts when it runs, never stored in the plan; without them the stage is
    /// done with an event saying why nothing was registered.
    RegisterVim,
}

impl CloudAction {
    /// The step name journaled for this action, e.g. `heat.update`.
    pub fn name(&self) -> &'static str {
        match self {
            CloudAction::CreateStack(_) => "heat.create",
            CloudAction::WaitCreate => "heat.wait_create",
            CloudAction::PatchStack { .. } | CloudAction::UpdateStack(_) => "heat.update",
            CloudAction::WaitUpdate => "heat.wait_update",
            CloudAction::ReadVnfcs(_) => "heat.read_vnfcs",
            CloudAction::MarkUnhealthy { .. } | CloudAction::MarkGroupMembers { .. } => {
                "heat.mark_unhealthy"
            }
            CloudAction::DeleteStack => "heat.delete",
            CloudAction::WaitDelete => "heat.wait_delete",
            CloudAction::StopServer { .. } => "nova.stop",
            CloudAction::DetachVolume { .. } => "nova.detach_volume",
            CloudAction::RegisterVim => "tacker.register_vim",
        }
    }
}

impl Stage {
    /// A cloud stage in its own wave; its key is the action's name.
    pub fn cloud(wave: u32, action: CloudAction) -> Self {
        Self {
            key: StageKey::from(action.name()),
            wave,
            action: Action::Cloud(action),
        }
    }

    /// A cloud stage about one subject (a server, a volume) in its own wave, keyed
    /// `<action name>@<subject>`.
    pub fn cloud_on(wave: u32, subject: &str, action: CloudAction) -> Self {
        Self {
            key: StageKey::new(format!("{}@{subject}", action.name())),
            wave,
            action: Action::Cloud(action),
        }
    }

    /// A remote stage keyed `<step name>@<subject>` (the VNFC, volume or PersistentVolume the
    /// step is about).
    pub fn remote(wave: u32, subject: &str, role: crate::model::Role, step: Step) -> Self {
        Self {
            key: StageKey::new(format!("{}@{subject}", step.name())),
            wave,
            action: Action::Remote(RemoteStage { role, step }),
        }
    }

    /// The placeholder for `hook`'s stages.
    pub fn expand(wave: u32, hook: Hook) -> Self {
        Self {
            key: StageKey::from(hook.key()),
            wave,
            action: Action::Expand(hook),
        }
    }
}

/// Stages built wave by wave: each `wave` call opens the next wave number, so callers never
/// count by hand.
#[derive(Debug, Default)]
pub struct StageList {
    stages: Vec<Stage>,
    next_wave: u32,
}

impl StageList {
    /// Adds one wave of stages built by `f(wave)`; an empty wave takes no number.
    pub fn wave(&mut self, f: impl FnOnce(u32) -> Vec<Stage>) -> &mut Self {
        let stages = f(self.next_wave);
        if !stages.is_empty() {
            self.next_wave += 1;
            self.stages.extend(stages);
        }
        self
    }

    /// Adds a cloud stage as its own wave.
    pub fn cloud(&mut self, action: CloudAction) -> &mut Self {
        self.wave(|w| vec![Stage::cloud(w, action)])
    }

    /// Adds a cloud stage about `subject` ([`Stage::cloud_on`]) as its own wave.
    pub fn cloud_on(&mut self, subject: &str, action: CloudAction) -> &mut Self {
        self.wave(|w| vec![Stage::cloud_on(w, subject, action)])
    }

    /// Appends a hook's stages (their waves from 0 on) after the waves so far, keeping their
    /// relative order.
    pub fn append(&mut self, stages: Vec<Stage>) -> &mut Self {
        let Some(min) = stages.iter().map(|s| s.wave).min() else {
            return self;
        };
        let base = self.next_wave;
        for mut s in stages {
            s.wave = s.wave - min + base;
            self.next_wave = self.next_wave.max(s.wave + 1);
            self.stages.push(s);
        }
        self
    }

    /// The number the next [`StageList::wave`] will take.
    pub fn next_wave(&self) -> u32 {
        self.next_wave
    }

    /// Runs `stages` (remote stages, waves from 0 on, e.g. another list's) beside the waves from
    /// `from` on: their wave k joins wave `from + k`, so that steps on hosts that need nothing of
    /// each other overlap (a storage server prepared while the cluster installs). Later waves
    /// continue after the last one used. Stages keep their order within a wave. `stages` must
    /// hold no cloud stage or placeholder (each needs a wave of its own) and no host that the
    /// waves they join already use; the caller guarantees both.
    pub fn beside(&mut self, from: u32, stages: Vec<Stage>) -> &mut Self {
        let Some(min) = stages.iter().map(|s| s.wave).min() else {
            return self;
        };
        for mut s in stages {
            s.wave = s.wave - min + from;
            self.next_wave = self.next_wave.max(s.wave + 1);
            self.stages.push(s);
        }
        self.stages.sort_by_key(|s| s.wave);
        self
    }

    /// The stages, in order.
    pub fn into_stages(self) -> Vec<Stage> {
        self.stages
    }
}

/// Why a list of stages cannot be a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StagesError {
    /// Two stages share a key (the journal could not tell them apart).
    #[error("stage key `{0}` appears twice in the plan")]
    DuplicateKey(StageKey),
    /// Waves must not decrease along the list.
    #[error("stage `{0}` is out of wave order")]
    WaveOrder(StageKey),
}

/// Checks that keys are unique and waves ascend.
pub fn check(stages: &[Stage]) -> Result<(), StagesError> {
    let mut seen = BTreeSet::new();
    let mut wave = 0;
    for s in stages {
        if !seen.insert(s.key.as_str()) {
            return Err(StagesError::DuplicateKey(s.key.clone()));
        }
        if s.wave < wave {
            return Err(StagesError::WaveOrder(s.key.clone()));
        }
        wave = s.wave;
    }
    Ok(())
}

/// Replaces the placeholder `hook` in `stages` by `expansion` (its waves shifted to follow the
/// placeholder's, later waves shifted after them). Returns `false` when no placeholder of `hook`
/// is left (already expanded).
pub fn expand(stages: &mut Vec<Stage>, hook: Hook, expansion: Vec<Stage>) -> bool {
    let Some(at) = stages.iter().position(|s| s.action == Action::Expand(hook)) else {
        return false;
    };
    let base = stages[at].wave;
    let min = expansion.iter().map(|s| s.wave).min().unwrap_or(0);
    let width = expansion
        .iter()
        .map(|s| s.wave - min + 1)
        .max()
        .unwrap_or(0);
    let tail: Vec<Stage> = stages.split_off(at + 1);
    stages.pop();
    stages.extend(expansion.into_iter().map(|mut s| {
        s.wave = s.wave - min + base;
        s
    }));
    stages.extend(tail.into_iter().map(|mut s| {
        s.wave = s.wave + width - 1;
        s
    }));
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Role;

    fn remote(wave: u32, host: &str) -> Stage {
        Stage::remote(wave, host, Role::Worker, crate::recipes::nfs_client(host))
    }

    /// The HEAL's Nova stages are stored under these names and keys (a stored plan and its
    /// journal must load again after an upgrade), each about its subject.
    #[test]
    fn nova_stages_are_stored_by_name_and_keyed_by_subject() {
        let mut list = StageList::default();
        list.cloud_on(
            "vnfc-storage_server-0",
            CloudAction::StopServer {
                server_id: "s1".into(),
            },
        )
        .cloud_on(
            "v1",
            CloudAction::DetachVolume {
                server_id: "s1".into(),
                volume_id: "v1".into(),
            },
        );
        let stages = list.into_stages();
        check(&stages).unwrap();
        assert_eq!(
            serde_json::to_value(&stages).unwrap(),
            serde_json::json!([
                {"key": "nova.stop@vnfc-storage_server-0", "wave": 0,
                 "action": {"cloud": {"stop_server": {"server_id": "s1"}}}},
                {"key": "nova.detach_volume@v1", "wave": 1,
                 "action": {"cloud": {"detach_volume": {"server_id": "s1", "volume_id": "v1"}}}},
            ])
        );
    }

    /// A plan stored before steps had a closed kind (one stage of every step kind, then
    /// kubespray's INSTANTIATE with its placeholder, as that version wrote it) loads and is
    /// written back unchanged; after a journal with its first 20 stages DONE, exactly the rest
    /// runs, and every remote stage's key is the one the engine computes now, so the journal
    /// rows of that version still match.
    #[test]
    fn a_plan_and_journal_stored_before_step_kinds_load_and_resume_unchanged() {
        let stored: serde_json::Value =
            serde_json::from_str(include_str!("testdata/plan-before-step-kinds.json")).unwrap();
        let stages: Vec<Stage> = serde_json::from_value(stored["stages"].clone()).unwrap();
        assert_eq!(serde_json::to_value(&stages).unwrap(), stored["stages"]);
        check(&stages).unwrap();

        let kinds: std::collections::BTreeSet<crate::recipes::StepKind> = stages
            .iter()
            .filter_map(|s| match &s.action {
                Action::Remote(r) => Some(r.step.kind),
                _ => None,
            })
            .collect();
        // Every one of the 30 kinds of that version (kinds added since are not in it).
        assert_eq!(kinds.len(), 30);
        assert!(
            stages
                .iter()
                .any(|s| matches!(s.action, Action::Expand(Hook::Configure)))
        );

        let journal_done: std::collections::BTreeSet<&str> =
            stages[..20].iter().map(|s| s.key.as_str()).collect();
        let resumed: Vec<&str> = stages
            .iter()
            .map(|s| s.key.as_str())
            .filter(|k| !journal_done.contains(k))
            .collect();
        let rest: Vec<&str> = stored["stages"].as_array().unwrap()[20..]
            .iter()
            .map(|s| s["key"].as_str().unwrap())
            .collect();
        assert_eq!(resumed, rest);

        for s in &stages {
            if let Action::Remote(r) = &s.action {
                let (_, subject) = s.key.as_str().split_once('@').unwrap();
                let now = Stage::remote(s.wave, subject, r.role, r.step.clone());
                assert_eq!(now.key, s.key);
                assert_eq!(
                    now.key.as_str().split_once('@').unwrap().0,
                    r.step.kind.name()
                );
            }
        }
    }

    #[test]
    fn expansion_replaces_the_placeholder_and_shifts_later_waves() {
        let mut stages = StageList::default();
        stages.cloud(CloudAction::WaitCreate);
        stages.wave(|w| vec![Stage::expand(w, Hook::InstantiateEnd)]);
        stages.cloud(CloudAction::WaitUpdate);
        let mut stages = stages.into_stages();
        assert!(
            expand(
                &mut stages,
                Hook::InstantiateEnd,
                vec![remote(0, "a"), remote(0, "b"), remote(1, "c")]
            ),
            "expanded"
        );
        let keys: Vec<(&str, u32)> = stages.iter().map(|s| (s.key.as_str(), s.wave)).collect();
        assert_eq!(
            keys,
            [
                ("heat.wait_create", 0),
                ("nfs.client@a", 1),
                ("nfs.client@b", 1),
                ("nfs.client@c", 2),
                ("heat.wait_update", 3)
            ]
        );
        check(&stages).unwrap();
        assert!(!expand(&mut stages, Hook::InstantiateEnd, Vec::new()));
    }

    #[test]
    fn stages_beside_join_the_waves_from_the_given_one_and_later_waves_follow() {
        let mut list = StageList::default();
        list.cloud(CloudAction::WaitCreate);
        let from = list.next_wave();
        list.wave(|w| vec![remote(w, "m")]);
        list.wave(|w| vec![remote(w, "w1"), remote(w, "w2")]);
        let mut side = StageList::default();
        for h in ["s1", "s2", "s3"] {
            side.wave(|w| vec![remote(w, h)]);
        }
        list.beside(from, side.into_stages());
        list.wave(|w| vec![remote(w, "after")]);
        let stages = list.into_stages();
        check(&stages).unwrap();
        let keys: Vec<(&str, u32)> = stages.iter().map(|s| (s.key.as_str(), s.wave)).collect();
        assert_eq!(
            keys,
            [
                ("heat.wait_create", 0),
                ("nfs.client@m", 1),
                ("nfs.client@s1", 1),
                ("nfs.client@w1", 2),
                ("nfs.client@w2", 2),
                ("nfs.client@s2", 2),
                ("nfs.client@s3", 3),
                ("nfs.client@after", 4),
            ]
        );
        let mut list = StageList::default();
        list.beside(0, Vec::new());
        assert_eq!(list.next_wave(), 0);
    }

    #[test]
    fn an_empty_expansion_removes_the_placeholder() {
        let mut stages = vec![
            Stage::expand(0, Hook::HealEnd),
            Stage::cloud(1, CloudAction::WaitUpdate),
        ];
        assert!(expand(&mut stages, Hook::HealEnd, Vec::new()));
        assert_eq!(stages.len(), 1);
        assert_eq!(stages[0].wave, 0);
    }

    #[test]
    fn duplicate_keys_are_refused() {
        let stages = vec![remote(0, "a"), remote(1, "a")];
        assert_eq!(
            check(&stages),
            Err(StagesError::DuplicateKey("nfs.client@a".into()))
        );
    }

    #[test]
    fn stages_round_trip_through_json() {
        let stages = vec![
            Stage::cloud(
                0,
                CloudAction::MarkUnhealthy {
                    marks: vec![Mark {
                        stack_name: "s".into(),
                        stack_id: "1".into(),
                        resource: "VDU1".into(),
                    }],
                    reason: "r".into(),
                },
            ),
            remote(1, "a"),
            Stage::expand(2, Hook::ScaleEnd),
        ];
        let text = serde_json::to_string(&stages).unwrap();
        let back: Vec<Stage> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, stages);
    }
}
