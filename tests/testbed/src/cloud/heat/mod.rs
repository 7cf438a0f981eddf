//! Simulated Heat: stacks, resources, nested stacks, template evaluation and the orchestration API
//! (follows the Heat Orchestration API v1 reference and the HOT specification for the subset Tacker's
//! BaseHOTs use).

pub mod api;
pub mod engine;
pub mod template;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::state::Inner;

/// Resource types the testbed implements (others fail the stack with a reason naming them).
pub const SUPPORTED_TYPES: &[&str] = &[
    "OS::Nova::Server",
    "OS::Neutron::Port",
    "OS::Cinder::Volume",
    "OS::Heat::AutoScalingGroup",
    "OS::Nova::ServerGroup",
    "OS::Neutron::FloatingIP",
    "OS::Neutron::Net",
    "OS::Neutron::Subnet",
    "OS::Neutron::SecurityGroup",
    "OS::Heat::ScalingPolicy",
    "OS::Heat::None",
];

/// A Heat stack (top-level or nested).
#[derive(Clone, Debug)]
pub struct Stack {
    /// UUID.
    pub id: String,
    /// Name (nested: `{parent}-{resource}-{short id}`).
    pub name: String,
    /// Parent stack id and the resource name in it, for nested stacks.
    pub parent: Option<(String, String)>,
    /// Id of the top-level stack (itself for a top-level stack).
    pub top: String,
    /// The template (HOT) as JSON.
    pub template: Value,
    /// Files (nested templates, scripts) by name.
    pub files: BTreeMap<String, String>,
    /// Parameters as given by the client (or the parent resource's properties).
    pub params_given: Map<String, Value>,
    /// Effective typed parameter values (after defaults and type coercion).
    pub params: Map<String, Value>,
    /// `CREATE`, `UPDATE`, `DELETE`, …
    pub action: String,
    /// `IN_PROGRESS`, `COMPLETE`, `FAILED`.
    pub status: String,
    /// `stack_status_reason`.
    pub reason: String,
    /// Resources in creation order (re-sorted to template order after each action).
    pub resources: Vec<Res>,
    /// Events of the stack and its resources, oldest first.
    pub events: Vec<Event>,
    /// Creation time.
    pub created: DateTime<Utc>,
    /// Last update time.
    pub updated: Option<DateTime<Utc>>,
    /// Deletion time (top-level stacks stay visible by id with `DELETE_COMPLETE`).
    pub deleted: Option<DateTime<Utc>>,
    /// `disable_rollback` as given (rollback is never performed).
    pub disable_rollback: bool,
    /// `timeout_mins` as given.
    pub timeout_mins: Option<u64>,
    /// `tags` as given.
    pub tags: Option<Value>,
    /// Resources an update replaced, waiting for Heat's cleanup: (type, physical id, nested
    /// stack id). The replacement is created first; these are deleted once an update
    /// completes, or with the stack.
    pub replaced: Vec<Replaced>,
}

/// A resource an update replaced whose physical resource is not deleted yet.
#[derive(Clone, Debug)]
pub struct Replaced {
    /// Resource type.
    pub rtype: String,
    /// Physical resource id (may be empty when the create never got one).
    pub physical_id: String,
    /// Nested stack id for template resources and groups.
    pub nested: Option<String>,
}

/// One resource of a stack.
#[derive(Clone, Debug)]
pub struct Res {
    /// Logical name.
    pub name: String,
    /// Type (`OS::Nova::Server`, `VDU1.yaml`, …).
    pub rtype: String,
    /// `INIT`, `CREATE`, `UPDATE`, `DELETE`, `CHECK`.
    pub action: String,
    /// `IN_PROGRESS`, `COMPLETE`, `FAILED`.
    pub status: String,
    /// `resource_status_reason`.
    pub reason: String,
    /// Physical id (server/port/volume id, nested stack id, …); empty before creation.
    pub physical_id: String,
    /// Resolved properties at the last create/update (the update diff compares these).
    pub props: Value,
    /// Creation time.
    pub created: DateTime<Utc>,
    /// Last update time.
    pub updated: Option<DateTime<Utc>>,
    /// Creation sequence (ASG members: oldest first).
    pub seq: u64,
    /// Names of resources of the same stack this one depends on.
    pub deps: Vec<String>,
    /// Nested stack id (template resources and AutoScalingGroups).
    pub nested: Option<String>,
}

/// One Heat event: a status change of a stack (its `resource_name` is the stack's name, its
/// physical id the stack's id) or of one of its resources, kept in the order they happened.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// UUID (the `marker` of event pagination).
    pub id: String,
    /// Global order of events (several happen within one second).
    pub seq: u64,
    /// When.
    pub time: DateTime<Utc>,
    /// Logical resource name, or the stack's name for the stack's own events.
    pub resource_name: String,
    /// Physical resource id at that moment (may be empty while a resource is created).
    pub physical_id: String,
    /// Resource type (`OS::Heat::Stack` for the stack's own events).
    pub rtype: String,
    /// `ACTION_STATUS`, e.g. `CREATE_IN_PROGRESS`.
    pub status: String,
    /// `resource_status_reason`.
    pub reason: String,
}

/// Orders events across stacks.
static EVENT_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Stack {
    /// Records the stack's current status as an event of the stack itself.
    pub fn stack_event(&mut self) {
        let e = Event {
            id: super::state::new_id(),
            seq: EVENT_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            time: Utc::now(),
            resource_name: self.name.clone(),
            physical_id: self.id.clone(),
            rtype: "OS::Heat::Stack".into(),
            status: self.status_string(),
            reason: self.reason.clone(),
        };
        self.events.push(e);
    }

    /// Records a resource's current status as an event (nothing for an unknown name).
    pub fn res_event(&mut self, name: &str) {
        let Some(r) = self.res(name) else {
            return;
        };
        let e = Event {
            id: super::state::new_id(),
            seq: EVENT_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            time: Utc::now(),
            resource_name: r.name.clone(),
            physical_id: r.physical_id.clone(),
            rtype: r.rtype.clone(),
            status: r.status_string(),
            reason: r.reason.clone(),
        };
        self.events.push(e);
    }

    /// `ACTION_STATUS`.
    pub fn status_string(&self) -> String {
        format!("{}_{}", self.action, self.status)
    }

    /// A resource by logical name.
    pub fn res(&self, name: &str) -> Option<&Res> {
        self.resources.iter().find(|r| r.name == name)
    }

    /// A resource by logical name (mutable).
    pub fn res_mut(&mut self, name: &str) -> Option<&mut Res> {
        self.resources.iter_mut().find(|r| r.name == name)
    }

    /// True while an action runs.
    pub fn busy(&self) -> bool {
        self.status == "IN_PROGRESS"
    }

    /// Stores `DELETE_IN_PROGRESS` with its event, once: the API marks it before it answers
    /// and the delete itself finds it already set.
    pub fn mark_delete_in_progress(&mut self) {
        if self.action == "DELETE" && self.busy() {
            return;
        }
        self.action = "DELETE".into();
        self.status = "IN_PROGRESS".into();
        self.reason = "Stack DELETE started".into();
        self.stack_event();
    }
}

impl Res {
    /// `ACTION_STATUS`.
    pub fn status_string(&self) -> String {
        format!("{}_{}", self.action, self.status)
    }

    /// Whether the resource is in a FAILED state (incl. `CHECK_FAILED` after mark-unhealthy).
    pub fn failed(&self) -> bool {
        self.status == "FAILED"
    }
}

/// Finds a stack by id or name. With `top_only`, nested stacks are skipped for name lookups,
/// and deleted stacks are found only by id.
pub fn find_stack<'a>(inner: &'a Inner, name_or_id: &str, top_only: bool) -> Option<&'a Stack> {
    if let Some(s) = inner.stacks.get(name_or_id) {
        return Some(s);
    }
    inner
        .stacks
        .values()
        .filter(|s| s.deleted.is_none() && (!top_only || s.parent.is_none()))
        .find(|s| s.name == name_or_id)
}

/// Is `t` a template-resource type (a file name such as `VDU1.yaml`)?
pub fn is_template_type(t: &str) -> bool {
    t.ends_with(".yaml") || t.ends_with(".yml") || t.ends_with(".template")
}
