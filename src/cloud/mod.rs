//! The OpenStack cloud as the engine and reconcile see it: trait [`Cloud`] and its
//! implementation [`OpenStackCloud`] (Keystone v3, Nova v2.1, Neutron v2.0, Cinder v3, Heat v1).
//!
//! Design: the `openstack` crate (osauth) only authenticates and resolves endpoints from the
//! catalog; every call is a raw request whose answer is decoded into our own tolerant structs
//! ([`types`]), because the crate's typed models are strict (one volume with `name: null` fails
//! the whole listing) and it has no orchestration (Heat) module. Every request has a timeout, is
//! counted ([`Cloud::request_count`]) and logged at debug level (method, path, status, duration;
//! never a token or password).
//!
//! Observation is a handful of list calls per pass — [`Cloud::servers`], [`Cloud::ports`],
//! [`Cloud::volumes`], [`Cloud::stack_resources`] — never one call per server.

mod config;
mod error;
mod heat;
pub(crate) mod openstack;
pub use vnfkeeper_core::cloud as types;

use std::future::Future;
use std::time::Duration;

pub use config::CloudsYamlError;
pub use error::{CloudError, ErrorKind};
pub use openstack::{ChangedServers, OpenStackCloud, PollPolicy};
pub use types::StackStatus;
pub use types::{
    FixedIp, FloatingIp, Inventory, Port, Server, ServerAddress, Stack, StackCreate, StackOutput,
    StackRef, StackResource, Volume, VolumeAttachment,
};

/// Parses clouds.yaml `text` (the os-client-config format) and validates its entry `cloud`, as
/// [`OpenStackCloud::connect`] and `vnfkeeper config check` do after reading the file (relative
/// `cacert` paths are left relative). Returns the entry's `Debug` text, in which credentials read
/// `<redacted>`. Errors: the problem, naming the cloud and the key, never a value (see
/// [`OpenStackCloud::check_entry`] for the file-reading form).
pub fn parse_clouds_yaml(text: &str, cloud: &str) -> Result<String, CloudsYamlError> {
    config::parse(text, cloud, None).map(|entry| format!("{entry:?}"))
}

/// Most bytes of console output [`Cloud::console_output`] returns (its tail).
pub const CONSOLE_LIMIT: usize = 1024 * 1024;

/// Operations vnfkeeper needs from an OpenStack project.
///
/// Methods return `Send` futures so callers can run them in spawned tasks. Errors are
/// [`CloudError`]; use [`CloudError::is_transient`] to decide on a retry and
/// [`CloudError::kind`] to branch. Nothing here retries by itself except
/// [`Cloud::wait_stack`], which keeps polling through transient errors until its deadline, and
/// [`OpenStackCloud`], which re-authenticates once when a request is answered 401.
pub trait Cloud: Send + Sync {
    /// Creates a stack: `POST /v1/{project}/stacks` with `stack_name`, `template`, `files`,
    /// `parameters`, `disable_rollback`, `timeout_mins` (Heat API v1 "Create stack"; 201).
    ///
    /// Returns as soon as Heat accepted the request (status `CREATE_IN_PROGRESS`); follow with
    /// [`Cloud::wait_stack`]. Errors: 409 `StackExists` (kind `Conflict`) when the name is taken
    /// (use [`Cloud::find_stack`] first when resuming), 400 for an invalid template.
    fn create_stack(
        &self,
        req: &StackCreate,
    ) -> impl Future<Output = Result<StackRef, CloudError>> + Send;

    /// Shows a stack: `GET /v1/{project}/stacks/{name}/{id}` (Heat API v1 "Show stack details"):
    /// status, reason, outputs, parameters. Errors: 404 (kind `NotFound`).
    fn stack(&self, s: &StackRef) -> impl Future<Output = Result<Stack, CloudError>> + Send;

    /// Polls [`Cloud::stack`] until `stack_status` is one of `done` (e.g.
    /// `[StackStatus::CreateComplete]`),
    /// with exponential backoff and jitter (see [`PollPolicy`]), for at most `deadline`.
    ///
    /// `*_FAILED` and `ROLLBACK_COMPLETE` (unless listed in `done`) end the wait with
    /// [`CloudError::StackFailed`] (status + `stack_status_reason`); a rollback in progress is
    /// waited for first. Other statuses, including a
    /// stale terminal one seen just after an update request, keep the wait going. Transient
    /// errors while polling are logged and polling continues; other errors are returned. When
    /// `done` contains `DELETE_COMPLETE`, a 404 counts as deleted (a synthetic stack with that
    /// status is returned). Past the deadline: [`CloudError::WaitTimeout`] with the last status.
    fn wait_stack(
        &self,
        s: &StackRef,
        done: &[StackStatus],
        deadline: Duration,
    ) -> impl Future<Output = Result<Stack, CloudError>> + Send;

    /// Lists a stack's resources: `GET /v1/{project}/stacks/{name}/{id}/resources?nested_depth=N`
    /// (Heat API v1 "List resources"); Tacker uses depth 2 (VNFC servers inside ASG members).
    /// Each entry names the stack that holds it ([`StackResource::stack`], from `links[rel=stack]`).
    fn stack_resources(
        &self,
        s: &StackRef,
        nested_depth: u32,
    ) -> impl Future<Output = Result<Vec<StackResource>, CloudError>> + Send;

    /// Updates a stack keeping its template and files: `PATCH /v1/{project}/stacks/{name}/{id}`
    /// with `{"parameters": parameters}` (Heat API v1 "Update stack (PATCH)"; 202). Parameters not
    /// named keep their values, each named one is replaced as a whole (Heat does not deep-merge a
    /// `json` parameter: send the complete `nfv` object); resources marked unhealthy are
    /// replaced. `{}` is a plain "converge" (the heal step after [`Cloud::mark_unhealthy`]).
    /// `parameters` must be a JSON object. Follow with [`Cloud::wait_stack`] for `UPDATE_COMPLETE`.
    /// Errors: 409 `ActionInProgress` while the stack is busy.
    fn update_stack_patch(
        &self,
        s: &StackRef,
        parameters: serde_json::Value,
    ) -> impl Future<Output = Result<(), CloudError>> + Send;

    /// Replaces a stack's template, files and parameters: `PUT /v1/{project}/stacks/{name}/{id}`
    /// (Heat API v1 "Update stack (PUT)"; 202). `req.stack_name` is not sent. Use this when the
    /// top template changes (the adjusted HOT of individual VNFC management); the nested
    /// templates must be in `req.files` again.
    fn update_stack(
        &self,
        s: &StackRef,
        req: &StackCreate,
    ) -> impl Future<Output = Result<(), CloudError>> + Send;

    /// Marks a resource unhealthy so the next update replaces it:
    /// `PATCH /v1/{project}/stacks/{name}/{id}/resources/{resource_name}` with
    /// `{"mark_unhealthy": true, "resource_status_reason": reason}` (Heat API v1 "Mark a resource
    /// as unhealthy"; 200). `owner` must be the stack that holds the resource — for a VNFC inside
    /// an ASG member that is the nested stack ([`StackResource::stack`]), not the top stack.
    fn mark_unhealthy(
        &self,
        owner: &StackRef,
        resource_name: &str,
        reason: &str,
    ) -> impl Future<Output = Result<(), CloudError>> + Send;

    /// Deletes a stack: `DELETE /v1/{project}/stacks/{name}/{id}` (204). A 404 is success (already
    /// gone). Follow with [`Cloud::wait_stack`] for `DELETE_COMPLETE`.
    fn delete_stack(&self, s: &StackRef) -> impl Future<Output = Result<(), CloudError>> + Send;

    /// Looks a stack up by name: `GET /v1/{project}/stacks/{name}` (Heat answers 302 to
    /// `/stacks/{name}/{id}`; the redirect is followed). `None` when there is no such stack or it
    /// is `DELETE_COMPLETE` — so a resumed create does not create twice.
    fn find_stack(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<StackRef>, CloudError>> + Send;

    /// All servers of the project: `GET /v2.1/servers/detail`, every page (Compute API "List
    /// Servers Detailed", `limit`/`marker`, following `servers_links[rel=next]`).
    fn servers(&self) -> impl Future<Output = Result<Vec<Server>, CloudError>> + Send;

    /// The last `length` lines of a server's console log: `POST /v2.1/servers/{id}/action` with
    /// `{"os-getConsoleOutput": {"length": length}}` (Compute API "Show Console Output"; 200
    /// `{"output": text}`). The text is the guest's (treat it as hostile); at most
    /// [`CONSOLE_LIMIT`] bytes are kept (the end, where cloud-init prints last). Errors: 404
    /// (unknown server, or the hypervisor keeps no console log), 409 (server not running),
    /// 501 (the virt driver has no console log).
    fn console_output(
        &self,
        server_id: &str,
        length: u32,
    ) -> impl Future<Output = Result<String, CloudError>> + Send;

    /// One server: `GET /v2.1/servers/{id}` (Compute API "Show Server Details"); `None` when
    /// Nova answers 404 (gone).
    fn server(
        &self,
        server_id: &str,
    ) -> impl Future<Output = Result<Option<Server>, CloudError>> + Send;

    /// Stops a server: `POST /v2.1/servers/{id}/action` with `{"os-stop": null}` (Compute API
    /// "Stop Server"; 202). Returns once Nova accepted; the server becomes `SHUTOFF` later
    /// (poll [`Cloud::server`]). Errors: 409 when the server is not `ACTIVE` (or busy), 404.
    fn stop_server(&self, server_id: &str) -> impl Future<Output = Result<(), CloudError>> + Send;

    /// One volume: `GET /v3/{project}/volumes/{id}` (Block Storage API v3 "Show a volume's
    /// details"); `None` when Cinder answers 404.
    fn volume(
        &self,
        volume_id: &str,
    ) -> impl Future<Output = Result<Option<Volume>, CloudError>> + Send;

    /// Detaches a volume from a server:
    /// `DELETE /v2.1/servers/{server_id}/os-volume_attachments/{volume_id}` (Compute API
    /// "Detach a volume from an instance"; 202). The volume becomes `available` later (poll
    /// [`Cloud::volume`]). Errors: 404 when the volume is not attached to that server, 409 when
    /// the server's state forbids it (e.g. `ERROR`) or the volume is the root disk.
    fn detach_volume(
        &self,
        server_id: &str,
        volume_id: &str,
    ) -> impl Future<Output = Result<(), CloudError>> + Send;

    /// All ports of the project: `GET /v2.0/ports`, every page (Networking API "List ports",
    /// `ports_links[rel=next]`).
    fn ports(&self) -> impl Future<Output = Result<Vec<Port>, CloudError>> + Send;

    /// All floating IPs of the project: `GET /v2.0/floatingips`, every page (Networking API
    /// "List floating IPs", `floatingips_links[rel=next]`).
    fn floating_ips(&self) -> impl Future<Output = Result<Vec<FloatingIp>, CloudError>> + Send;

    /// All volumes of the project: `GET /v3/{project}/volumes/detail`, every page (Block Storage
    /// API v3 "List accessible volumes with details", `volumes_links[rel=next]`).
    fn volumes(&self) -> impl Future<Output = Result<Vec<Volume>, CloudError>> + Send;

    /// Servers, ports and volumes of the project in one go: the three listings run concurrently
    /// (a reconcile pass needs all three; wall time is the slowest of them). Fails with the first
    /// error of the three.
    fn inventory(&self) -> impl Future<Output = Result<Inventory, CloudError>> + Send {
        async move {
            let (servers, ports, volumes) =
                tokio::try_join!(self.servers(), self.ports(), self.volumes())?;
            Ok(Inventory {
                servers,
                ports,
                volumes,
            })
        }
    }

    /// API requests sent so far by this client (each page counts; Keystone token requests,
    /// osauth's cached version discovery and HTTP redirects followed internally do not).
    fn request_count(&self) -> u64;
}
