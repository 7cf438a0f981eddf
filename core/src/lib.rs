//! vnfkeeper's pure core: everything that decides, nothing that waits. Domain types, the SOL003
//! wire types and their validation, VNF package parsing, operation plans (stages as data), the
//! adjusted HOT of individual VNFC management, recipe steps with their scripts, the flavours'
//! MgmtDriver hooks, and the reconcile policy. No async runtime, no database, no SSH, no clock:
//! the `vnfkeeper` crate reads and writes, and passes `now`.

/// `ansible-playbook`'s JSON-lines events (the `ansible.posix.jsonl` callback): play recap and
/// failures as data.
pub mod ansible;
/// What vnfkeeper keeps of a VNF's configuration under its state directory (admin kubeconfig).
pub mod artifact;
/// What the cloud reports, as data: Heat stacks and resources, Nova servers, Neutron ports,
/// Cinder volumes (tolerant serde structs).
pub mod cloud;
/// SSH host keys in a server's console output (cloud-init's fingerprint and key blocks).
pub mod console;
/// Digests as lowercase hex (SHA-256 of files, request bodies, package contents).
pub mod digest;
/// Flavours: roles, SSH access, MgmtDriver hooks as stages, reconcile probes.
pub mod flavour;
/// Individual VNFC management: BaseHOT → adjusted HOT + `nfv` parameters, merge patches.
pub mod heat;
/// vnfkeeper as Tacker v2's MgmtDriver: hook requests checked, what each hook runs.
pub mod mgmt_hook;
/// Domain types and invariants: operation states, instances, VNFC rows, roles, times.
pub mod model;
/// VNF packages: VNFD, BaseHOT and package files (reads confined to the package directory).
pub mod package;
/// Planning: intended + observed state → what to do; operation plans as stored stages.
pub mod plan;
/// Reconcile policy: observations and memory → heal, repair, defer, or alert.
pub mod policy;
/// Recipes: actions → idempotent check-then-apply steps with their scripts.
pub mod recipes;
/// Tacker companion mode: subscription and polled operation-occurrence decisions, heal routes.
pub mod tacker;
/// SOL003 request envelopes and bodies, their validation, and `Secret`.
pub mod wire;
